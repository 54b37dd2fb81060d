//! REXD error codes (the standard JSON-RPC codes extended with REXD's `-3200x`), REXD's
//! constructors of the one JSON-RPC error object, and the errors of this module.

use std::fmt;

use serde_json::Value;

use super::method::Method;
pub use crate::jsonrpc::message::ErrorObject;
use crate::jsonrpc::message::{ErrorCode as Standard, ErrorCodes};

/// The error codes of REXD v1: the standard JSON-RPC codes it reuses and its own `-3200x` codes.
///
/// The spec's table lists `-32602` and `-32601`; the other standard codes (`-32700`, `-32600`,
/// `-32603`) come with JSON-RPC 2.0 itself and a daemon needs them for unparsable lines,
/// malformed requests and its own faults, so they are here too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `-32700`: the line is not JSON.
    ParseError,
    /// `-32600`: JSON, but not a valid JSON-RPC request.
    InvalidRequest,
    /// `-32601`: no such method (or a capability-less daemon that does not know it at all).
    MethodNotFound,
    /// `-32602`: the params do not fit the method (missing or mistyped fields, bad enum values,
    /// bad base64, an unknown `session_id`).
    InvalidParams,
    /// `-32603`: the daemon failed on its own account.
    InternalError,
    /// `-32001` `unauthorized`: the caller may not do this at all.
    Unauthorized,
    /// `-32002` `forbidden_path`: a path or `cwd` outside the allowed roots (symlinks resolved).
    ForbiddenPath,
    /// `-32003` `timeout`: an operation ran past its timeout.
    Timeout,
    /// `-32004` `output_limit_exceeded`: output beyond `max_output_bytes` or
    /// `max_file_read_bytes` where truncating is not an option.
    OutputLimitExceeded,
    /// `-32005` `process_not_found`: no such `process_id` (or `pty_id`) in this session.
    ProcessNotFound,
    /// `-32006` `concurrency_conflict`: `expected_mtime` did not match, or `mode: "create"` found
    /// the file already there.
    ConcurrencyConflict,
    /// `-32007` `unsupported_capability`: the daemon does not offer what was asked (a requested
    /// capability, PTY, `exec.input`, shell mode when shell is disabled).
    UnsupportedCapability,
    /// `-32008` `resource_limit`: too many processes or sessions.
    ResourceLimit,
    /// `-32009` `not_found` (addition to the spec, whose table has no code for it): the path
    /// (a file, a directory, a `cwd`, or the parent of a file to write) does not exist inside
    /// the roots. `data` names the path and the errno.
    NotFound,
    /// `-32010` `events_lost` (addition to the spec): `session.resume` found that events after
    /// `last_seq` no longer fit the daemon's replay buffer. `data.lost` says how many; resuming
    /// with `accept_loss: true` goes on without them.
    EventsLost,
}

impl ErrorCode {
    /// Every code, standard ones first.
    pub const ALL: [ErrorCode; 15] = [
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::MethodNotFound,
        ErrorCode::InvalidParams,
        ErrorCode::InternalError,
        ErrorCode::Unauthorized,
        ErrorCode::ForbiddenPath,
        ErrorCode::Timeout,
        ErrorCode::OutputLimitExceeded,
        ErrorCode::ProcessNotFound,
        ErrorCode::ConcurrencyConflict,
        ErrorCode::UnsupportedCapability,
        ErrorCode::ResourceLimit,
        ErrorCode::NotFound,
        ErrorCode::EventsLost,
    ];

    /// The numeric code on the wire.
    pub const fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => Standard::ParseError.code(),
            ErrorCode::InvalidRequest => Standard::InvalidRequest.code(),
            ErrorCode::MethodNotFound => Standard::MethodNotFound.code(),
            ErrorCode::InvalidParams => Standard::InvalidParams.code(),
            ErrorCode::InternalError => Standard::InternalError.code(),
            ErrorCode::Unauthorized => -32001,
            ErrorCode::ForbiddenPath => -32002,
            ErrorCode::Timeout => -32003,
            ErrorCode::OutputLimitExceeded => -32004,
            ErrorCode::ProcessNotFound => -32005,
            ErrorCode::ConcurrencyConflict => -32006,
            ErrorCode::UnsupportedCapability => -32007,
            ErrorCode::ResourceLimit => -32008,
            ErrorCode::NotFound => -32009,
            ErrorCode::EventsLost => -32010,
        }
    }

    /// The code with this number; `None` for numbers REXD does not define (a peer may still
    /// send them: keep the number, see [`ErrorObject::code`]).
    pub const fn from_code(code: i64) -> Option<ErrorCode> {
        if let Some(standard) = Standard::from_code(code) {
            return Some(match standard {
                Standard::ParseError => ErrorCode::ParseError,
                Standard::InvalidRequest => ErrorCode::InvalidRequest,
                Standard::MethodNotFound => ErrorCode::MethodNotFound,
                Standard::InvalidParams => ErrorCode::InvalidParams,
                Standard::InternalError => ErrorCode::InternalError,
            });
        }
        Some(match code {
            -32001 => ErrorCode::Unauthorized,
            -32002 => ErrorCode::ForbiddenPath,
            -32003 => ErrorCode::Timeout,
            -32004 => ErrorCode::OutputLimitExceeded,
            -32005 => ErrorCode::ProcessNotFound,
            -32006 => ErrorCode::ConcurrencyConflict,
            -32007 => ErrorCode::UnsupportedCapability,
            -32008 => ErrorCode::ResourceLimit,
            -32009 => ErrorCode::NotFound,
            -32010 => ErrorCode::EventsLost,
            _ => return None,
        })
    }

    /// The snake_case name the spec gives the code (`"forbidden_path"`); the standard codes
    /// get the same style (`"invalid_params"`), handy for logs and for bindings' exception names.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "parse_error",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::MethodNotFound => "method_not_found",
            ErrorCode::InvalidParams => "invalid_params",
            ErrorCode::InternalError => "internal_error",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::ForbiddenPath => "forbidden_path",
            ErrorCode::Timeout => "timeout",
            ErrorCode::OutputLimitExceeded => "output_limit_exceeded",
            ErrorCode::ProcessNotFound => "process_not_found",
            ErrorCode::ConcurrencyConflict => "concurrency_conflict",
            ErrorCode::UnsupportedCapability => "unsupported_capability",
            ErrorCode::ResourceLimit => "resource_limit",
            ErrorCode::NotFound => "not_found",
            ErrorCode::EventsLost => "events_lost",
        }
    }

    /// A default human-readable `message` for an error object with this code. The standard
    /// codes use the wording of the JSON-RPC 2.0 spec.
    pub const fn message(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "Parse error",
            ErrorCode::InvalidRequest => "Invalid Request",
            ErrorCode::MethodNotFound => "Method not found",
            ErrorCode::InvalidParams => "Invalid params",
            ErrorCode::InternalError => "Internal error",
            ErrorCode::Unauthorized => "Unauthorized",
            ErrorCode::ForbiddenPath => "Path is outside allowed roots",
            ErrorCode::Timeout => "Timed out",
            ErrorCode::OutputLimitExceeded => "Output limit exceeded",
            ErrorCode::ProcessNotFound => "Process not found",
            ErrorCode::ConcurrencyConflict => "Concurrency conflict",
            ErrorCode::UnsupportedCapability => "Unsupported capability",
            ErrorCode::ResourceLimit => "Resource limit reached",
            ErrorCode::NotFound => "Not found",
            ErrorCode::EventsLost => "Events were lost",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

impl From<Standard> for ErrorCode {
    /// Every standard JSON-RPC code is a REXD code: REXD's set extends the standard one.
    fn from(code: Standard) -> ErrorCode {
        match code {
            Standard::ParseError => ErrorCode::ParseError,
            Standard::InvalidRequest => ErrorCode::InvalidRequest,
            Standard::MethodNotFound => ErrorCode::MethodNotFound,
            Standard::InvalidParams => ErrorCode::InvalidParams,
            _ => ErrorCode::InternalError,
        }
    }
}

impl ErrorCodes for ErrorCode {
    fn code(self) -> i64 {
        ErrorCode::code(self)
    }
    fn message(self) -> &'static str {
        ErrorCode::message(self)
    }
    fn from_code(code: i64) -> Option<Self> {
        ErrorCode::from_code(code)
    }
}

impl From<ErrorCode> for ErrorObject {
    fn from(code: ErrorCode) -> ErrorObject {
        ErrorObject::of(code)
    }
}

/// REXD's errors are JSON-RPC's one error object ([`crate::jsonrpc::ErrorObject`]) with REXD's
/// codes: `data` is free-form structured detail, e.g. `{"path": …, "allowed_roots": […]}` for
/// `forbidden_path`; `code_as::<rexd::ErrorCode>()` gives the typed code.
impl ErrorObject {
    /// The `forbidden_path` error of the spec's example: `data` names the path and the roots.
    pub fn forbidden_path(path: &str, allowed_roots: &[String]) -> ErrorObject {
        ErrorObject::of(ErrorCode::ForbiddenPath)
            .with_data(serde_json::json!({ "path": path, "allowed_roots": allowed_roots }))
    }
}

impl From<&RexdError> for ErrorObject {
    fn from(e: &RexdError) -> ErrorObject {
        e.to_error_object()
    }
}

/// What can go wrong turning JSON into REXD types (and base64 into bytes).
///
/// [`RexdError::error_code`] maps each to the JSON-RPC code a daemon answers with, so a server
/// tells `-32601` (unknown method) from `-32602` (bad params) without matching strings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RexdError {
    /// The method name is not a REXD method of the expected kind (request or event).
    #[error("unknown REXD method {0:?}")]
    UnknownMethod(String),
    /// The method is known but its params (or result) do not fit its type.
    #[error("invalid params for {method}: {reason}")]
    InvalidParams {
        /// The method whose params were refused.
        method: Method,
        /// What was wrong, from the JSON parser or the field rules.
        reason: String,
    },
    /// A whole message (line) is not JSON.
    #[error("not JSON: {0}")]
    Parse(String),
    /// A whole message is JSON but not the JSON-RPC message expected (no `"jsonrpc":"2.0"`, an
    /// `id` on a notification, a missing `method`, …).
    #[error("invalid JSON-RPC message: {0}")]
    InvalidMessage(String),
    /// A `data`/`content` field marked `base64` does not decode.
    #[error("invalid base64 data: {0}")]
    Base64(String),
    /// A `data`/`content` field marked `zstd`: this crate has no codec; the daemon or client
    /// that negotiated compression inflates it, within the session's limits.
    #[error("zstd data is inflated by the session that negotiated it (session.open compression)")]
    Compressed,
    /// A `data`/`content` field marked `raw`: raw bytes travel beside a line, never in a
    /// string, and only in an `fs.read` answer of a session that negotiated them.
    #[error(
        "encoding \"raw\" is only an fs.read answer's, in a session that negotiated raw_frames"
    )]
    RawFrame,
}

impl RexdError {
    /// The JSON-RPC error code a daemon answers this with.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            RexdError::UnknownMethod(_) => ErrorCode::MethodNotFound,
            RexdError::InvalidParams { .. }
            | RexdError::Base64(_)
            | RexdError::Compressed
            | RexdError::RawFrame => ErrorCode::InvalidParams,
            RexdError::Parse(_) => ErrorCode::ParseError,
            RexdError::InvalidMessage(_) => ErrorCode::InvalidRequest,
        }
    }

    /// The error object to answer with. The message says what was wrong, naming the field
    /// for bad params (`path: invalid type: integer `5`, expected a string`), so a client that
    /// shows only `code: message` still tells the user what to fix; `data.detail` has the whole
    /// text and `data.method` the method.
    pub fn to_error_object(&self) -> ErrorObject {
        let mut data = serde_json::Map::new();
        data.insert("detail".into(), Value::String(self.to_string()));
        let message = match self {
            RexdError::UnknownMethod(name) => {
                data.insert("method".into(), Value::String(name.clone()));
                self.to_string()
            }
            RexdError::InvalidParams { method, reason } => {
                data.insert("method".into(), Value::String(method.as_str().to_owned()));
                reason.clone()
            }
            _ => self.to_string(),
        };
        ErrorObject::of(self.error_code())
            .with_message(message)
            .with_data(Value::Object(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(c.code()), Some(c));
            assert!(!c.message().is_empty());
        }
        assert_eq!(ErrorCode::from_code(-32009), Some(ErrorCode::NotFound));
        assert_eq!(ErrorCode::from_code(-32010), Some(ErrorCode::EventsLost));
        assert_eq!(ErrorCode::from_code(-32011), None);
        assert_eq!(ErrorCode::from_code(0), None);
        assert_eq!(ErrorCode::ForbiddenPath.code(), -32002);
        assert_eq!(ErrorCode::ResourceLimit.name(), "resource_limit");
    }

    #[test]
    fn spec_error_example() {
        let roots = vec!["/srv/app".to_owned(), "/home/deploy".to_owned()];
        let e = ErrorObject::forbidden_path("/etc/passwd", &roots);
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"code": -32002, "message": "Path is outside allowed roots",
                "data": {"path": "/etc/passwd", "allowed_roots": ["/srv/app", "/home/deploy"]}})
        );
        assert_eq!(e.code_as(), Some(ErrorCode::ForbiddenPath));
    }

    /// REXD's error object is JSON-RPC's: what the peer hands over needs no conversion, and
    /// REXD's codes read the standard ones too.
    #[test]
    fn one_error_model_with_rexd_codes_extending_the_standard_ones() {
        let e: crate::jsonrpc::ErrorObject = ErrorObject::forbidden_path("/etc/passwd", &[]);
        assert_eq!(e.code_as::<ErrorCode>(), Some(ErrorCode::ForbiddenPath));
        assert_eq!(
            e.code_as::<Standard>(),
            None,
            "-32002 is REXD's, not standard"
        );
        let standard = crate::jsonrpc::ErrorObject::standard(Standard::InvalidParams);
        assert_eq!(
            standard.code_as::<ErrorCode>(),
            Some(ErrorCode::InvalidParams)
        );
        assert_eq!(standard, ErrorObject::of(ErrorCode::InvalidParams));
        for s in [
            Standard::ParseError,
            Standard::InvalidRequest,
            Standard::MethodNotFound,
            Standard::InvalidParams,
            Standard::InternalError,
        ] {
            let extended = ErrorCode::from(s);
            assert_eq!(
                (extended.code(), extended.message()),
                (s.code(), s.message())
            );
        }
        let j = ErrorObject::from(&RexdError::UnknownMethod("x".into()));
        assert_eq!(j.code, -32601);
        assert_eq!(j.data_value().unwrap()["method"], "x");
    }

    #[test]
    fn unknown_codes_survive() {
        let e: ErrorObject = serde_json::from_str(r#"{"code":-31999,"message":"x"}"#).unwrap();
        assert_eq!(e.code_as::<ErrorCode>(), None);
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"code":-31999,"message":"x"}"#
        );
    }

    #[test]
    fn parse_errors_map_to_json_rpc_codes() {
        assert_eq!(
            RexdError::UnknownMethod("x".into()).error_code().code(),
            -32601
        );
        let e = RexdError::InvalidParams {
            method: Method::ExecStart,
            reason: "missing field `argv`".into(),
        };
        assert_eq!(e.error_code().code(), -32602);
        assert_eq!(e.to_error_object().code, -32602);
        assert_eq!(RexdError::Parse("eof".into()).error_code().code(), -32700);
    }
}
