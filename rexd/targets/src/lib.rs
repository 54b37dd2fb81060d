//! `rex`'s targets: where a REXD daemon runs and how to start it there.
//!
//! A target is `local` (a child `rexd --stdio`), `ssh://[user@]host[:port]` (`ssh … rexd
//! --stdio`) or `https://host:port` (a `rexd --listen` daemon's WebSocket) — an [`Endpoint`] —
//! plus how to reach and start the daemon there: a [`TargetSpec`], whose
//! [`command`](TargetSpec::command) is the process to spawn. Named targets and the current one
//! live in a TOML file, [`Targets`].
//!
//! This is its own crate so that what only resolves a target into a command line (the Python
//! extension) links serde and toml, not the daemon. `rexd::client` re-exports all of it.
//!
//! ```
//! use rex_targets::Targets;
//!
//! // rex's file is `rex_targets::default_path(None)`; a missing file has only `local`.
//! let file = std::path::Path::new("no-such-dir/targets.toml");
//! let targets = Targets::load(file)?;
//! let spec = targets.lookup("local", file)?;
//! let command = spec.command()?;
//! assert_eq!(command.get_args().next().unwrap(), "--stdio");
//! # Ok::<(), rex_targets::TargetError>(())
//! ```

#![warn(missing_docs)]

mod error;
mod target;
pub mod targets;

pub use error::TargetError;
pub use target::{Endpoint, REXD_INSTALL_HINT, TargetSpec, is_loopback, local_rexd};
pub use targets::{TARGET_ENV, TARGETS_FILE_ENV, Targets, default_path, valid_name};
