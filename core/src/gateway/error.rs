//! Error codes on the wire, the error body, and the typed errors of this module.
//!
//! Three kinds of failure stay apart (h11 style): [`ParseError`] is the peer's fault (a message
//! that is not a valid envelope), [`TransitionError`] is a job
//! state change the table forbids, and [`LocalError`] is the host misusing the engine.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::job::{JobState, TransitionError};

/// An error code of the `error.code` field.
///
/// The spec names one code, `E_POLICY_DENY`; the others follow its `E_SCREAMING_SNAKE` shape and
/// are deskwire's choice. A code this version does not know is kept as [`ErrorCode::Other`], so
/// a newer gateway's codes reach the application instead of failing the whole response.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `E_POLICY_DENY`: the gateway's policy refuses the job (the spec's example: a job without
    /// a sandbox where the gateway requires one).
    PolicyDeny,
    /// `E_UNAUTHORIZED`: no bearer token, or not one the gateway accepts.
    Unauthorized,
    /// `E_VERSION_UNSUPPORTED`: the envelope's `v` has a major version this side does not speak.
    VersionUnsupported,
    /// `E_BAD_REQUEST`: not a valid envelope (not JSON, wrong `type`, missing or mistyped fields).
    BadRequest,
    /// `E_UNKNOWN_OP`: the `op` is not one the gateway implements.
    UnknownOp,
    /// `E_INVALID_PARAMS`: the `payload` does not fit the operation.
    InvalidParams,
    /// `E_NOT_FOUND`: no such job or approval (or it was forgotten, see `Config::max_jobs`).
    NotFound,
    /// `E_CONFLICT`: the same `jobId` with a different payload, or a decided approval decided
    /// the other way.
    Conflict,
    /// `E_INVALID_TRANSITION`: the job's state machine forbids the change; `details` has
    /// `from` and `to`.
    InvalidTransition,
    /// `E_CAPACITY`: a configured limit is reached (jobs remembered, stream subscriptions).
    Capacity,
    /// `E_INTERNAL`: the gateway failed for its own reasons (set by the host, e.g. in `fail`).
    Internal,
    /// A code this version does not know, kept verbatim.
    Other(String),
}

impl ErrorCode {
    /// The code as written on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::PolicyDeny => "E_POLICY_DENY",
            ErrorCode::Unauthorized => "E_UNAUTHORIZED",
            ErrorCode::VersionUnsupported => "E_VERSION_UNSUPPORTED",
            ErrorCode::BadRequest => "E_BAD_REQUEST",
            ErrorCode::UnknownOp => "E_UNKNOWN_OP",
            ErrorCode::InvalidParams => "E_INVALID_PARAMS",
            ErrorCode::NotFound => "E_NOT_FOUND",
            ErrorCode::Conflict => "E_CONFLICT",
            ErrorCode::InvalidTransition => "E_INVALID_TRANSITION",
            ErrorCode::Capacity => "E_CAPACITY",
            ErrorCode::Internal => "E_INTERNAL",
            ErrorCode::Other(code) => code,
        }
    }

    /// Every code this version knows (for tests and bindings).
    pub const KNOWN: [ErrorCode; 11] = [
        ErrorCode::PolicyDeny,
        ErrorCode::Unauthorized,
        ErrorCode::VersionUnsupported,
        ErrorCode::BadRequest,
        ErrorCode::UnknownOp,
        ErrorCode::InvalidParams,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::InvalidTransition,
        ErrorCode::Capacity,
        ErrorCode::Internal,
    ];

    /// Reads a code. `None` when it is not `E_` followed by `[A-Z0-9_]+` (the schema's pattern).
    pub fn parse(text: &str) -> Option<ErrorCode> {
        if let Some(known) = Self::KNOWN.iter().find(|c| c.as_str() == text) {
            return Some(known.clone());
        }
        let rest = text.strip_prefix("E_")?;
        let shaped = !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        shaped.then(|| ErrorCode::Other(text.to_owned()))
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        ErrorCode::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("invalid error code {text:?}")))
    }
}

/// The `error` object of a failed response: `{code, message, details}`. `Debug` scrubs
/// secrets from `details`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, for programs.
    pub code: ErrorCode,
    /// What went wrong, for people.
    pub message: String,
    /// Structured context (e.g. `{"label": "sandbox-required"}`, `{"from": ..., "to": ...}`).
    /// `null` and absent both read as `None`; `None` is written as absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Map<String, Value>>,
}

impl fmt::Debug for ErrorBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ErrorBody")
            .field("code", &self.code)
            .field("message", &self.message)
            .field(
                "details",
                &self.details.as_ref().map(super::secret::RedactedMap),
            )
            .finish()
    }
}

impl ErrorBody {
    /// An error without details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// The same error with one more `details` entry.
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details
            .get_or_insert_with(Map::new)
            .insert(key.to_owned(), value.into());
        self
    }
}

impl From<&TransitionError> for ErrorBody {
    fn from(e: &TransitionError) -> Self {
        ErrorBody::new(ErrorCode::InvalidTransition, e.to_string())
            .with_detail("from", e.from.as_str())
            .with_detail("to", e.to.as_str())
    }
}

impl From<&ParseError> for ErrorBody {
    fn from(e: &ParseError) -> Self {
        let body = ErrorBody::new(e.code(), e.to_string());
        match e {
            ParseError::VersionUnsupported { got } => body
                .with_detail("got", got.as_str())
                .with_detail("supported", super::PROTOCOL_VERSION),
            ParseError::UnknownOp(op) => body.with_detail("op", op.as_str()),
            _ => body,
        }
    }
}

/// Why a message from the peer is not a valid envelope. Each maps to an [`ErrorCode`]. JSON:
/// externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ParseError {
    /// Longer than `Config::max_message_bytes` (not parsed at all).
    #[error("message of {len} bytes is over the {max}-byte limit")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Not JSON, or JSON that does not fit the envelope (missing field, wrong type, bad enum).
    #[error("malformed envelope: {0}")]
    Malformed(String),
    /// `v` is a version, but of a major version this side does not speak.
    #[error(
        "unsupported protocol version {got:?} (this side speaks {}.x)",
        super::SUPPORTED_MAJOR
    )]
    VersionUnsupported {
        /// The `v` received.
        got: String,
    },
    /// The `type` field is not the one expected here (e.g. a response sent to the gateway).
    #[error("unexpected message type {got:?}, expected {expected:?}")]
    WrongType {
        /// The `type` received.
        got: String,
        /// The `type` this parser reads.
        expected: &'static str,
    },
    /// A request `op` this version does not implement.
    #[error("unknown operation {0:?}")]
    UnknownOp(String),
    /// The payload does not fit the operation.
    #[error("invalid payload for {op}: {message}")]
    InvalidParams {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        message: String,
    },
}

impl ParseError {
    /// The error code a response to this message carries.
    pub fn code(&self) -> ErrorCode {
        match self {
            ParseError::TooLarge { .. }
            | ParseError::Malformed(_)
            | ParseError::WrongType { .. } => ErrorCode::BadRequest,
            ParseError::VersionUnsupported { .. } => ErrorCode::VersionUnsupported,
            ParseError::UnknownOp(_) => ErrorCode::UnknownOp,
            ParseError::InvalidParams { .. } => ErrorCode::InvalidParams,
        }
    }
}

/// The host misused the engine (distinct from peer faults, which become error responses).
/// JSON: externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LocalError {
    /// `Config::tokens` is empty or holds an empty token: no request could ever be accepted.
    #[error("the gateway needs at least one non-empty bearer token")]
    NoToken,
    /// The output queue is full: drain `poll_output` before feeding more messages.
    #[error("output queue full ({0} entries): drain poll_output first")]
    Backpressure(usize),
    /// No job with this id (never created, or forgotten to stay within `max_jobs`).
    #[error("unknown job {0:?}")]
    UnknownJob(String),
    /// The state machine forbids the change.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// The operation needs a `RUNNING` job.
    #[error("job {job_id:?} is {state}, not RUNNING")]
    NotRunning {
        /// The job.
        job_id: String,
        /// Its state.
        state: JobState,
    },
    /// The job already has `Config::max_approvals_per_job` approvals.
    #[error("job {0:?} has too many approvals")]
    TooManyApprovals(String),
    /// An approval id that is already in use (ids must be unique across jobs).
    #[error("approval id {0:?} is already in use")]
    DuplicateApprovalId(String),
    /// `progress` outside `0.0..=1.0` (or not a number).
    #[error("progress {0} is outside 0..=1")]
    InvalidProgress(f64),
    /// An id or text the wire format cannot carry (empty or longer than 256 characters).
    #[error("invalid {field}: {reason}")]
    InvalidField {
        /// Which field.
        field: &'static str,
        /// Why.
        reason: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_ones_survive() {
        for code in ErrorCode::KNOWN {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), code);
        }
        assert_eq!(
            ErrorCode::parse("E_RATE_LIMITED"),
            Some(ErrorCode::Other("E_RATE_LIMITED".into()))
        );
        for bad in ["", "E_", "e_policy_deny", "POLICY_DENY", "E_POLICY-DENY"] {
            assert_eq!(ErrorCode::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn transition_errors_name_both_states() {
        let body = ErrorBody::from(&TransitionError {
            from: JobState::Completed,
            to: JobState::Running,
        });
        assert_eq!(body.code, ErrorCode::InvalidTransition);
        let details = body.details.unwrap();
        assert_eq!(details["from"], "COMPLETED");
        assert_eq!(details["to"], "RUNNING");
    }
}
