//! `rexd`: the REXD v1 remote execution daemon (the protocol: `docs/rexd.md`).
//!
//! The engine is [`service::Service`]: sessions, processes (pipes or a PTY, each in its own
//! process group), file operations confined to allowlisted roots, limits and the audit log,
//! behind typed [`deskwire::rexd::Request`]s. Transports drive it from one mio loop
//! ([`frontend`] for the stdio ones):
//! [`stdio`] (NDJSON JSON-RPC 2.0, also over `ssh host rexd --stdio`) and [`irc`] (OA1
//! `RemoteBash` on an IRC channel, [`remote_bash`]). Other frontends use the same `Service`:
//! [`mcp`] (`rexd --mcp`, the tools as an MCP server). [`client`] is the other end: `rex`, the
//! client library and CLI (`local` and `ssh://` targets).
//!
//! ```
//! use rexd::service::{Service, ServiceOutput, Settings};
//! use deskwire::rexd::{Request, Response, SessionOpenParams};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let poll = mio::Poll::new().unwrap();
//! let settings = Settings::for_roots(&[dir.path().to_owned()]).unwrap();
//! let mut service = Service::new(settings, poll.registry().try_clone().unwrap());
//! let open = SessionOpenParams { client_name: "doc".into(), ..Default::default() };
//! service.call(0, 1, Request::SessionOpen(open));
//! let Some(ServiceOutput::Reply { handle: 1, result: Ok(Response::SessionOpen(r)) }) = service.poll_output() else {
//!     panic!()
//! };
//! assert_eq!(r.protocol, "rexd/1");
//! ```

//!
//! # Decisions where the spec leaves room
//!
//! - **Paths**: absolute, or relative to the session's cwd (its first root). A `..` component
//!   is refused, never normalised; the rest is opened with `openat2(RESOLVE_BENEATH |
//!   RESOLVE_NO_MAGICLINKS)` from a descriptor of the root (Linux ≥ 5.6), so symlinks out,
//!   symlinks swapped in concurrently and `/proc/self/root` are refused (`-32002`). Writes never
//!   follow a symlink in the last component; atomic writes rename a temporary file inside the
//!   pinned parent directory. FIFOs are refused as not regular files. A file with other hard
//!   links (which may lie outside the roots) is never written through (`atomic: false`,
//!   `append`: `-32002`) and is read only with `security.read_hard_links`.
//! - **Processes**: each in its own process group and process tree ([`tree`]: a cgroup v2 per
//!   exec where the daemon can make one, else the child subreaper and `/proc`), so `setsid`
//!   and double-forked grandchildren stay the exec's. A timeout, `exec.kill` (TERM) or a
//!   session close sends TERM to the whole tree, then KILL after `kill_grace_ms`. `exec.exit`
//!   comes once the child is reaped *and* its pipes reached EOF, so after all output; if
//!   something still holds the pipes `kill_grace_ms` after the leader was reaped, it is killed
//!   and the pipes closed, so `exec.exit` always comes. What an exec leaves running when it
//!   ends is killed. Past `max_output_bytes` output is read and dropped (`truncated`), the
//!   command runs on. A launch failure answers `exec.start` and then sends `exec.error`. PTY
//!   processes have neither a timeout nor an output cap (interactive; they end with
//!   `pty.close` or the session).
//! - **Confinement** ([`confine`]): every process started (exec and PTY) enforces a Landlock
//!   ruleset between fork and exec: read-write under the roots and a private `TMPDIR`,
//!   read-only for the system's programs, libraries, `/proc`, `/sys` and named files of `/etc`
//!   (`security.confine`, default `auto`: wherever the kernel has Landlock).
//! - **Detached** processes survive `session.close`, not the daemon: when the client goes away
//!   (or the daemon stops: `SIGTERM`, `SIGINT`, and `SIGHUP` except under `--listen`, where it
//!   reloads) they are terminated like the rest (a process nobody can reach any more must not
//!   run on); so are a revoked client's, on a reload. Until they end they count against
//!   `limits.max_detached_processes` (default 8) for the daemon's one client, across
//!   sessions, and their timeouts hold.
//! - **Stdin**: `exec.input` is answered once its bytes are in the child's pipe (or the child
//!   closed its stdin or ended; what it never read is dropped), so a client that waits for
//!   answers has no more in flight than the daemon buffers (`max_input_buffer_bytes`). A
//!   process started without `stdin` keeps its stdin open for `exec.input`; `"stdin": ""`
//!   starts it with an empty one (EOF at once).
//! - **Backpressure**: while more than [`frontend::HIGH_WATER`] bytes wait for stdout, neither
//!   children's output nor new requests are read.
//! - **Shell**: `shell: true` needs `security.allow_shell` (else `-32007`).
//! - **Command lists** ([`policy`]): matched on the file that would run (`argv[0]` resolved
//!   on the daemon's `PATH` or against the cwd, symlinks followed), never on the name alone,
//!   and that file is what runs; while a list is set the client may not set `PATH` and the
//!   loader's and interpreters' variables are dropped from its `env` (refusals are `-32001`).
//!   A list cannot stop an allowed shell or interpreter from running anything.
//! - **Errors**: bad params name the field in the message (`path: invalid type: integer `5`,
//!   expected a string`); a path that does not exist is `-32009 not_found`, an addition to the
//!   spec's table (which has no code for it), with `data.path` and `data.errno`.
//! - **Additions to the config**: `limits.kill_grace_ms`, `limits.max_input_buffer_bytes`,
//!   `limits.max_detached_processes`, `security.process_tracking`,
//!   `security.allow_commands`, `security.deny_commands`, `security.read_hard_links`,
//!   `security.confine`, `security.confine_read`, `security.confine_write`; unknown keys
//!   are errors.

#![warn(missing_docs)]

// The daemon is Unix-only (process groups, PTYs, signals); the client library (`rex`, which
// the Python package uses to resolve targets) builds everywhere, Windows too.
#[cfg(unix)]
pub mod agent;
#[cfg(unix)]
pub mod audit;
pub mod cli;
pub mod client;
pub mod compress;
#[cfg(unix)]
pub mod config;
#[cfg(unix)]
pub mod confine;
#[cfg(unix)]
pub mod device_code;
#[cfg(unix)]
pub mod frontend;
#[cfg(unix)]
pub mod fsops;
#[cfg(unix)]
pub mod hub;
#[cfg(unix)]
pub mod irc;
#[cfg(unix)]
pub mod log;
#[cfg(unix)]
pub mod mcp;
#[cfg(unix)]
pub mod metrics;
#[cfg(all(unix, feature = "net"))]
pub mod net;
#[cfg(unix)]
pub mod notify;
#[cfg(unix)]
pub mod policy;
#[cfg(unix)]
pub mod process;
#[cfg(unix)]
pub mod remote_bash;
#[cfg(unix)]
pub mod roots;
#[cfg(unix)]
pub mod service;
#[cfg(unix)]
pub mod ssh_client;
#[cfg(unix)]
pub mod stdio;
#[cfg(unix)]
pub mod sys;
#[cfg(feature = "net")]
pub mod tls_advice;
#[cfg(unix)]
pub mod transport;
#[cfg(unix)]
pub mod tree;
