//! REXD error codes, the JSON-RPC error object REXD sends, and the errors of this module.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::method::Method;
use crate::jsonrpc::message::ErrorCode as Standard;

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
}

impl ErrorCode {
    /// Every code, standard ones first.
    pub const ALL: [ErrorCode; 13] = [
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
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

/// The JSON-RPC error object (`{"code", "message", "data"}`) as REXD fills it.
///
/// `code` stays a plain number so that codes this version does not know survive a round trip;
/// [`ErrorObject::error_code`] gives the typed view. `data` is free-form structured detail, e.g.
/// `{"path": …, "allowed_roots": […]}` for `forbidden_path`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The numeric code, normally one of [`ErrorCode`].
    pub code: i64,
    /// A short human-readable description.
    pub message: String,
    /// Structured detail; omitted when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error object with `code`'s default message and no data.
    pub fn new(code: ErrorCode) -> ErrorObject {
        ErrorObject {
            code: code.code(),
            message: code.message().to_owned(),
            data: None,
        }
    }

    /// The same object with this `message`.
    pub fn with_message(mut self, message: impl Into<String>) -> ErrorObject {
        self.message = message.into();
        self
    }

    /// The same object with this `data`.
    pub fn with_data(mut self, data: Value) -> ErrorObject {
        self.data = Some(data);
        self
    }

    /// The typed code, `None` when the number is not one REXD defines.
    pub fn error_code(&self) -> Option<ErrorCode> {
        ErrorCode::from_code(self.code)
    }

    /// The `forbidden_path` error of the spec's example: `data` names the path and the roots.
    pub fn forbidden_path(path: &str, allowed_roots: &[String]) -> ErrorObject {
        ErrorObject::new(ErrorCode::ForbiddenPath)
            .with_data(serde_json::json!({ "path": path, "allowed_roots": allowed_roots }))
    }
}

impl From<ErrorObject> for crate::jsonrpc::ErrorObject {
    /// The same error for the `jsonrpc` peer, `data` as raw JSON.
    fn from(e: ErrorObject) -> crate::jsonrpc::ErrorObject {
        let mut out = crate::jsonrpc::ErrorObject::new(e.code, e.message);
        // A `Value` always serializes.
        out.data = e
            .data
            .and_then(|d| crate::jsonrpc::RawJson::to_raw(&d).ok());
        out
    }
}

impl From<crate::jsonrpc::ErrorObject> for ErrorObject {
    /// The typed view of an error the `jsonrpc` peer received. `data` that is not valid JSON
    /// cannot occur (the peer parsed it); it would be dropped.
    fn from(e: crate::jsonrpc::ErrorObject) -> ErrorObject {
        ErrorObject {
            code: e.code,
            data: e.data.and_then(|d| serde_json::from_str(d.get()).ok()),
            message: e.message,
        }
    }
}

impl From<&RexdError> for crate::jsonrpc::ErrorObject {
    fn from(e: &RexdError) -> crate::jsonrpc::ErrorObject {
        e.to_error_object().into()
    }
}

impl From<ErrorCode> for ErrorObject {
    fn from(code: ErrorCode) -> ErrorObject {
        ErrorObject::new(code)
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
}

impl RexdError {
    /// The JSON-RPC error code a daemon answers this with.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            RexdError::UnknownMethod(_) => ErrorCode::MethodNotFound,
            RexdError::InvalidParams { .. } | RexdError::Base64(_) => ErrorCode::InvalidParams,
            RexdError::Parse(_) => ErrorCode::ParseError,
            RexdError::InvalidMessage(_) => ErrorCode::InvalidRequest,
        }
    }

    /// The error object to answer with: the code's default message and this error's text as
    /// `data.detail`.
    pub fn to_error_object(&self) -> ErrorObject {
        let mut data = serde_json::Map::new();
        data.insert("detail".into(), Value::String(self.to_string()));
        if let RexdError::UnknownMethod(name) = self {
            data.insert("method".into(), Value::String(name.clone()));
        }
        ErrorObject::new(self.error_code()).with_data(Value::Object(data))
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
        assert_eq!(ErrorCode::from_code(-32009), None);
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
        assert_eq!(e.error_code(), Some(ErrorCode::ForbiddenPath));
    }

    #[test]
    fn converts_to_and_from_the_jsonrpc_error_object() {
        let e = ErrorObject::forbidden_path("/etc/passwd", &["/srv".to_owned()]);
        let j: crate::jsonrpc::ErrorObject = e.clone().into();
        assert_eq!(j.code, -32002);
        assert_eq!(
            serde_json::to_value(&j).unwrap(),
            serde_json::to_value(&e).unwrap()
        );
        assert_eq!(ErrorObject::from(j), e);
        let j = crate::jsonrpc::ErrorObject::from(&RexdError::UnknownMethod("x".into()));
        assert_eq!(j.code, -32601);
    }

    #[test]
    fn unknown_codes_survive() {
        let e: ErrorObject = serde_json::from_str(r#"{"code":-31999,"message":"x"}"#).unwrap();
        assert_eq!(e.error_code(), None);
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
