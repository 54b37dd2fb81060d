//! `rex`, the REXD client: connect to a daemon on a target and call it, blocking.
//!
//! A target is `local` (a child `rexd --stdio`), `ssh://[user@]host[:port]` (`ssh … rexd
//! --stdio`) or `https://host:port` (a `rexd --listen` daemon's WebSocket, with a bearer token
//! from a file or `$REXD_TOKEN`, and a client certificate for mTLS); named targets and the current one live in a TOML file ([`targets`]), so the
//! runtime, not the model, decides where `bash` and `read` go (the spec's routing model).
//!
//! ```no_run
//! use rexd::client::{Client, ConnectOptions, ExecOptions, Stream, TargetSpec};
//! use deskwire::rexd::Program;
//!
//! let target = TargetSpec::new("ssh://deploy@server-a");
//! let mut rex = Client::connect(&target, &ConnectOptions::default())?;
//! let exit = rex.exec(
//!     Program::argv(["git", "status", "--short"]),
//!     &ExecOptions::default(),
//!     None,
//!     &mut |stream, bytes| match stream {
//!         Stream::Stdout => std::io::Write::write_all(&mut std::io::stdout(), bytes),
//!         Stream::Stderr => std::io::Write::write_all(&mut std::io::stderr(), bytes),
//!     },
//! )?;
//! println!("exit code {:?}", exit.exit_code);
//! rex.close()?;
//! # Ok::<(), rexd::client::ClientError>(())
//! ```

mod connection;
mod error;
#[cfg(feature = "net")]
mod ws;

pub use connection::{
    Client, ConnectOptions, ExecOptions, MAX_BUFFERED_EVENT_BYTES, READ_AHEAD, Stream, WriteOptions,
};
pub use deskwire::rexd::frames::FrameError;
pub use error::ClientError;
pub use rex_targets::{Endpoint, TargetError, TargetSpec, Targets, local_rexd, targets};
