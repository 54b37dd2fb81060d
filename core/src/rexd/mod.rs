//! REXD v1 wire types: the remote execution daemon's JSON-RPC 2.0 methods, results, events and
//! error codes (`docs/rexd.md`), typed with serde.
//!
//! This module only describes messages; it does no I/O. The JSON-RPC framing and the
//! request/response correlation live in [`crate::jsonrpc`]; the daemon and the `rex` client in
//! the `rexd` crate. A daemon turns each incoming request into a [`Request`] with
//! [`Request::parse`] (or a whole line with [`RequestMessage::from_slice`]) and answers a
//! [`Response`] or an [`ErrorObject`]; a client reads the events it streams with
//! [`Event::from_notification`], which parses an `exec.stdout` line in one pass without copying
//! the strings it can borrow.
//!
//! ```
//! use deskwire::rexd::{Event, Request, RexdError, ErrorCode};
//! use serde_json::value::RawValue;
//!
//! let params = RawValue::from_string(r#"{"session_id":"s_1","argv":["git","status"]}"#.into()).unwrap();
//! let Request::ExecStart(start) = Request::parse("exec.start", Some(&params)).unwrap() else {
//!     unreachable!()
//! };
//! assert_eq!(start.program, deskwire::rexd::Program::argv(["git", "status"]));
//!
//! // -32601 and -32602 are told apart by type.
//! let e = Request::parse("exec.launch", Some(&params)).unwrap_err();
//! assert_eq!(e.error_code(), ErrorCode::MethodNotFound);
//!
//! let line = br#"{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s_1","process_id":"p_1","seq":1,"data":"hi","encoding":"utf8"}}"#;
//! let Event::ExecStdout(out) = Event::from_notification(line)? else { unreachable!() };
//! assert_eq!(out.bytes()?.as_ref(), b"hi");
//! # Ok::<(), RexdError>(())
//! ```
//!
//! # Field conventions (where the spec leaves room)
//!
//! - Field names are exactly the spec's. Fields the spec does not define but a client needs are
//!   marked "addition to the spec" in their docs; those that are false/empty unless used are
//!   omitted when unused, so output stays spec-shaped.
//! - **Optional** fields (the spec says "optional") are omitted when unset; `null` reads as
//!   absent. **Nullable** fields (the spec says "nullable", or a field that has no value in
//!   some state) are always written, as `null` when unset; absent reads as `null`. Fields with a
//!   **default** in the spec read as the default when absent and are always written, so a peer
//!   never has to know the defaults.
//! - Unknown fields are ignored (a newer peer's additions do not break an older one); params
//!   and results must be JSON objects (never positional arrays).
//! - Integers are unsigned 64-bit unless said otherwise (`exit_code` is `i32`, `cols`/`rows`
//!   `u16`, `mode`/`uid`/`gid` `u32`).
//! - Timestamps (`started_at`, `mtime`) are RFC 3339 strings in UTC.
//! - Bytes travel as `utf8` text or `base64` with an `encoding` field ([`data`]).
//! - `core/schemas/rexd.schema.json` (JSON Schema 2020-12) states the same rules, one `$defs`
//!   entry per type here; `tests/vectors/rexd.json` holds cases every binding checks.

pub mod data;
mod error;
mod exec;
mod fast;
pub mod frames;
mod fs;
mod message;
mod method;
mod pty;
mod session;
pub mod zstd;

#[cfg(test)]
mod proptests;

pub use data::Encoding;
pub use error::{ErrorCode, ErrorObject, RexdError};
pub use exec::{
    CollectedOutput, ExecErrorEvent, ExecExit, ExecInputParams, ExecInputResult, ExecKillParams,
    ExecKillResult, ExecOutput, ExecStartParams, ExecStartResult, ExecWaitParams, ExecWaitResult,
    ProcessStatus, Program, Signal,
};
pub use fs::{
    DirEntry, FileType, FsGlobParams, FsGlobResult, FsListParams, FsListResult, FsReadParams,
    FsReadResult, FsStatParams, FsStatResult, FsWriteParams, FsWriteResult, WriteMode,
};
pub use message::{Call, ErrorResponse, Event, Request, RequestMessage, Response};
pub use method::Method;
pub use pty::{
    DEFAULT_COLS, DEFAULT_ROWS, PtyCloseParams, PtyCloseResult, PtyExit, PtyInputParams,
    PtyInputResult, PtyOpenParams, PtyOpenResult, PtyOutput, PtyResizeParams, PtyResizeResult,
};
pub use session::{
    Capability, Limits, OkResult, ProcessInfo, ResumeInfo, RexdMetricsParams, RexdMetricsResult,
    SessionCloseParams, SessionCloseResult, SessionInfoParams, SessionInfoResult,
    SessionOpenParams, SessionOpenResult, SessionResumeParams, SessionResumeResult,
};

/// The `protocol` a REXD v1 daemon announces in its `session.open` result.
pub const PROTOCOL_VERSION: &str = "rexd/1";
