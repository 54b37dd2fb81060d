//! Dialects: how a JSON protocol writes the same calls, answers and progress on the wire.
//!
//! The [`Peer`](super::Peer) correlates [`Inbound`] and [`Outbound`] messages; a [`Dialect`]
//! turns them into bytes and back:
//! - [`JsonRpc2`]: strict JSON-RPC 2.0 (REXD); integer ids; batches; numeric error codes.
//! - [`Sidecar`]: `{id, method, params}` / `{id, result | error | progress}` with UUID v4 ids and
//!   `SCREAMING_SNAKE_CASE` error codes (`docs/sidecar-and-mobile.md`, "The sidecar IPC").

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::message::{self, ErrorObject, Id, Invalid, Message, Parsed, RawJson};
use super::peer::TimeoutPolicy;
use crate::ids::IdGenerator;

/// An error code as the dialect carries it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "JsonRpcCode"))]
pub enum Code {
    /// JSON-RPC's numeric codes.
    Number(#[cfg_attr(feature = "uniffi", uniffi(name = "value"))] i64),
    /// The sidecar's `SCREAMING_SNAKE_CASE` names.
    Name(#[cfg_attr(feature = "uniffi", uniffi(name = "value"))] String),
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Code::Number(n) => write!(f, "{n}"),
            Code::Name(s) => f.write_str(s),
        }
    }
}

/// An error answer, in any dialect. JSON: `{"code", "message", "data"?}`, the code a number
/// or a string as the dialect carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteError {
    /// The code.
    pub code: Code,
    /// A human-readable message.
    pub message: String,
    /// Extra data, raw JSON (JSON-RPC 2.0 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<RawJson>,
}

impl RemoteError {
    /// An error with a code and a message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        RemoteError {
            code,
            message: message.into(),
            data: None,
        }
    }
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// A message read from the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// A call that wants an answer.
    Request {
        /// Its id.
        id: Id,
        /// The method.
        method: String,
        /// The params, raw.
        params: Option<RawJson>,
    },
    /// A call without an answer.
    Notification {
        /// The method.
        method: String,
        /// The params, raw.
        params: Option<RawJson>,
    },
    /// A successful answer.
    Result {
        /// The call's id.
        id: Id,
        /// The result, raw.
        result: RawJson,
    },
    /// A failed answer.
    Error {
        /// The call's id.
        id: Id,
        /// What went wrong.
        error: RemoteError,
    },
    /// Progress of a call still running (it does not complete the call).
    Progress {
        /// The call's id.
        id: Id,
        /// The progress data, raw.
        progress: RawJson,
    },
}

/// A message to write.
#[derive(Debug, Clone, Copy)]
pub enum Outbound<'a> {
    /// A call that wants an answer.
    Request {
        /// Its id.
        id: &'a Id,
        /// The method.
        method: &'a str,
        /// The params.
        params: Option<&'a RawJson>,
    },
    /// A call without an answer.
    Notification {
        /// The method.
        method: &'a str,
        /// The params.
        params: Option<&'a RawJson>,
    },
    /// A successful answer.
    Result {
        /// The call's id.
        id: &'a Id,
        /// The result.
        result: &'a RawJson,
    },
    /// A failed answer.
    Error {
        /// The call's id.
        id: &'a Id,
        /// What went wrong.
        error: &'a RemoteError,
    },
    /// Progress of a call we are answering.
    Progress {
        /// The call's id.
        id: &'a Id,
        /// The progress data.
        progress: &'a RawJson,
    },
}

/// Something the dialect cannot write. JSON: externally tagged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WriteError {
    /// The dialect has no such message (progress in JSON-RPC 2.0, say).
    #[error("the {dialect} dialect cannot carry {what}")]
    Unsupported {
        /// The dialect.
        dialect: &'static str,
        /// What was asked.
        what: &'static str,
    },
    /// A value the dialect cannot carry (a string error code in JSON-RPC 2.0, a numeric id in
    /// the sidecar dialect, ...).
    #[error("the {dialect} dialect cannot carry {what}")]
    InvalidValue {
        /// The dialect.
        dialect: &'static str,
        /// What was wrong.
        what: String,
    },
}

/// How one JSON protocol reads and writes messages.
pub trait Dialect {
    /// A short name for errors and logs.
    const NAME: &'static str;

    /// Reads one frame: one message, or several for a batch (each element checked on its own).
    fn read(
        &self,
        frame: &[u8],
        batch_limit: usize,
    ) -> Result<Vec<Result<Inbound, Invalid>>, Invalid>;

    /// Whether `frame` (which [`Dialect::read`] accepted) is a batch, whose answers go back as
    /// one array. Only JSON-RPC 2.0 has batches.
    fn is_batch(&self, frame: &[u8]) -> bool {
        let _ = frame;
        false
    }

    /// Appends the frame body of `message` (without the framing) to `out`. `now` is the
    /// host's monotonic clock, for dialects that stamp messages.
    fn write(&self, now: u64, message: Outbound<'_>, out: &mut Vec<u8>) -> Result<(), WriteError>;

    /// The next id for an outgoing call.
    fn next_id(&self, ids: &mut IdGenerator, counter: &mut i64) -> Id;

    /// The error answer to an unreadable frame, when the dialect answers those at all.
    fn answer_invalid(&self, invalid: &Invalid) -> Option<(Id, RemoteError)>;

    /// The error answer to a call of a method nobody handles.
    fn method_not_found(&self, method: &str) -> RemoteError;

    /// The error answer to a second request with the id of one still being answered.
    fn duplicate_id(&self) -> RemoteError;

    /// The call deadlines a peer in this dialect has unless the host gives its own
    /// ([`PeerConfig::for_dialect`](super::PeerConfig::for_dialect)): 30 s for every method,
    /// unless the protocol defines its own table.
    fn default_timeouts(&self) -> TimeoutPolicy {
        TimeoutPolicy::default()
    }
}

/// Strict JSON-RPC 2.0 (REXD). See the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonRpc2;

impl Dialect for JsonRpc2 {
    const NAME: &'static str = "jsonrpc2";

    fn read(
        &self,
        frame: &[u8],
        batch_limit: usize,
    ) -> Result<Vec<Result<Inbound, Invalid>>, Invalid> {
        Ok(match message::parse(frame, batch_limit)? {
            Parsed::Single(m) => vec![Ok(inbound(m))],
            Parsed::Batch(items) => items.into_iter().map(|m| m.map(inbound)).collect(),
        })
    }

    fn is_batch(&self, frame: &[u8]) -> bool {
        // A frame `read` accepted is one JSON value: a batch when it is an array.
        frame
            .iter()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .is_some_and(|&b| b == b'[')
    }

    fn write(&self, _now: u64, message: Outbound<'_>, out: &mut Vec<u8>) -> Result<(), WriteError> {
        let message = match message {
            Outbound::Request { id, method, params } => Message::Request {
                id: id.clone(),
                method: method.to_owned(),
                params: params.cloned(),
            },
            Outbound::Notification { method, params } => Message::Notification {
                method: method.to_owned(),
                params: params.cloned(),
            },
            Outbound::Result { id, result } => Message::Response {
                id: id.clone(),
                result: result.clone(),
            },
            Outbound::Error { id, error } => {
                let Code::Number(code) = error.code else {
                    return Err(WriteError::InvalidValue {
                        dialect: Self::NAME,
                        what: format!("the error code {:?} (codes are integers)", error.code),
                    });
                };
                Message::Error {
                    id: id.clone(),
                    error: ErrorObject {
                        code,
                        message: error.message.clone(),
                        data: error.data.clone(),
                    },
                }
            }
            Outbound::Progress { .. } => {
                return Err(WriteError::Unsupported {
                    dialect: Self::NAME,
                    what: "progress messages (use a notification)",
                });
            }
        };
        message.write(out);
        Ok(())
    }

    fn next_id(&self, _ids: &mut IdGenerator, counter: &mut i64) -> Id {
        *counter += 1;
        Id::Number(*counter)
    }

    fn answer_invalid(&self, invalid: &Invalid) -> Option<(Id, RemoteError)> {
        if let Invalid::Answer { .. } = invalid {
            return None; // an answer is not answered; the Peer ends its call
        }
        let (id, error) = invalid.to_error();
        Some((id, remote(error)))
    }

    fn method_not_found(&self, method: &str) -> RemoteError {
        RemoteError::new(
            Code::Number(message::ErrorCode::MethodNotFound.code()),
            format!("Method not found: {method}"),
        )
    }

    fn duplicate_id(&self) -> RemoteError {
        RemoteError::new(
            Code::Number(message::ErrorCode::InvalidRequest.code()),
            "Invalid Request: id already in use",
        )
    }
}

fn remote(error: ErrorObject) -> RemoteError {
    RemoteError {
        code: Code::Number(error.code),
        message: error.message,
        data: error.data,
    }
}

fn inbound(message: Message) -> Inbound {
    match message {
        Message::Request { id, method, params } => Inbound::Request { id, method, params },
        Message::Notification { method, params } => Inbound::Notification { method, params },
        Message::Response { id, result } => Inbound::Result { id, result },
        Message::Error { id, error } => Inbound::Error {
            id,
            error: remote(error),
        },
    }
}

/// The sidecar error codes (`docs/sidecar-and-mobile.md`, "Methods"). JSON: the wire
/// name (`"MODEL_NOT_LOADED"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum SidecarErrorCode {
    /// The model is not loaded; call `model.load` first.
    ModelNotLoaded,
    /// No such model in the registry.
    ModelNotFound,
    /// Training already runs.
    TrainingInProgress,
    /// `training.stop` without a running training.
    TrainingNotRunning,
    /// Params failed validation.
    InvalidParams,
    /// Inference failed (out of memory, corrupt weights, ...).
    InferenceError,
    /// Unknown method.
    UnknownMethod,
    /// Unhandled exception in the sidecar.
    InternalError,
}

impl SidecarErrorCode {
    /// Every code, in the spec's order.
    pub const ALL: [SidecarErrorCode; 8] = [
        SidecarErrorCode::ModelNotLoaded,
        SidecarErrorCode::ModelNotFound,
        SidecarErrorCode::TrainingInProgress,
        SidecarErrorCode::TrainingNotRunning,
        SidecarErrorCode::InvalidParams,
        SidecarErrorCode::InferenceError,
        SidecarErrorCode::UnknownMethod,
        SidecarErrorCode::InternalError,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SidecarErrorCode::ModelNotLoaded => "MODEL_NOT_LOADED",
            SidecarErrorCode::ModelNotFound => "MODEL_NOT_FOUND",
            SidecarErrorCode::TrainingInProgress => "TRAINING_IN_PROGRESS",
            SidecarErrorCode::TrainingNotRunning => "TRAINING_NOT_RUNNING",
            SidecarErrorCode::InvalidParams => "INVALID_PARAMS",
            SidecarErrorCode::InferenceError => "INFERENCE_ERROR",
            SidecarErrorCode::UnknownMethod => "UNKNOWN_METHOD",
            SidecarErrorCode::InternalError => "INTERNAL_ERROR",
        }
    }

    /// The code with this wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// As a dialect-neutral code.
    pub fn code(self) -> Code {
        Code::Name(self.as_str().to_owned())
    }
}

/// The sidecar NDJSON dialect. See the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sidecar;

#[derive(Deserialize)]
struct SidecarMembers<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    progress: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct SidecarError {
    code: String,
    message: String,
}

#[derive(Serialize)]
struct SidecarOut<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<SidecarErrorOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct SidecarErrorOut<'a> {
    code: &'a str,
    message: &'a str,
}

impl Sidecar {
    fn read_one(text: &str) -> Result<Inbound, Invalid> {
        let bad = |id: Option<Id>, reason: &str| Invalid::Request {
            id,
            reason: reason.to_owned(),
        };
        let m: SidecarMembers<'_> =
            serde_json::from_str(text).map_err(|e| bad(None, &e.to_string()))?;
        let id = match m.id {
            Some(raw) if raw.get().len() > message::MAX_ID_BYTES => {
                return Err(Invalid::IdTooLong {
                    len: raw.get().len(),
                    max: message::MAX_ID_BYTES,
                });
            }
            Some(raw) => match serde_json::from_str::<String>(raw.get()) {
                Ok(id) => Id::String(id),
                Err(_) => return Err(bad(None, "id must be a string")),
            },
            None => return Err(bad(None, "every sidecar message has an id")),
        };
        match (m.method, m.result, m.error, m.progress) {
            (Some(method), None, None, None) => {
                let method: String = serde_json::from_str(method.get())
                    .map_err(|_| bad(Some(id.clone()), "method must be a string"))?;
                let params = match m.params {
                    Some(p) if p.get().starts_with('{') => p,
                    _ => return Err(bad(Some(id), "params must be an object")),
                };
                // Answered INVALID_PARAMS with the reason (`answer_invalid`).
                if let Err(e) = message::check_readable(params) {
                    return Err(bad(Some(id), &format!("unreadable params: {e}")));
                }
                Ok(Inbound::Request {
                    id,
                    method,
                    params: Some(params.into()),
                })
            }
            // An answer that cannot be read ends its call (`Invalid::Answer`): it is never
            // answered back, and the call does not wait for a timeout.
            (None, Some(result), None, None) => match message::check_readable(result) {
                Ok(()) => Ok(Inbound::Result {
                    id,
                    result: result.into(),
                }),
                Err(e) => Err(Invalid::Answer {
                    id,
                    reason: format!("unreadable result: {e}"),
                }),
            },
            (None, None, Some(error), None) => {
                match serde_json::from_str::<SidecarError>(error.get()) {
                    Ok(e) => Ok(Inbound::Error {
                        id,
                        error: RemoteError::new(Code::Name(e.code), e.message),
                    }),
                    Err(e) => Err(Invalid::Answer {
                        id,
                        reason: format!("error needs a string code and message: {e}"),
                    }),
                }
            }
            // Progress does not end the call, and is not answered: an unreadable one is only
            // reported (`Malformed`) and counted.
            (None, None, None, Some(progress)) if progress.get().starts_with('{') => {
                match message::check_readable(progress) {
                    Ok(()) => Ok(Inbound::Progress {
                        id,
                        progress: progress.into(),
                    }),
                    Err(e) => Err(bad(None, &format!("unreadable progress of {id}: {e}"))),
                }
            }
            (None, None, None, Some(_)) => {
                Err(bad(None, &format!("progress of {id} must be an object")))
            }
            _ => Err(bad(
                Some(id),
                "exactly one of method, result, error and progress",
            )),
        }
    }
}

impl Dialect for Sidecar {
    const NAME: &'static str = "sidecar";

    fn read(
        &self,
        frame: &[u8],
        _batch_limit: usize,
    ) -> Result<Vec<Result<Inbound, Invalid>>, Invalid> {
        let text = std::str::from_utf8(frame).map_err(|e| Invalid::Parse(e.to_string()))?;
        let raw: &RawValue =
            serde_json::from_str(text).map_err(|e| Invalid::Parse(e.to_string()))?;
        if !raw.get().starts_with('{') {
            return Err(Invalid::Request {
                id: None,
                reason: "a sidecar message is a JSON object".into(),
            });
        }
        Ok(vec![Self::read_one(raw.get())])
    }

    fn write(&self, _now: u64, message: Outbound<'_>, out: &mut Vec<u8>) -> Result<(), WriteError> {
        fn string_id(id: &Id) -> Result<&str, WriteError> {
            match id {
                Id::String(s) => Ok(s),
                other => Err(WriteError::InvalidValue {
                    dialect: Sidecar::NAME,
                    what: format!("the id {other} (ids are strings)"),
                }),
            }
        }
        let mut m = SidecarOut {
            id: "",
            method: None,
            params: None,
            result: None,
            error: None,
            progress: None,
        };
        let empty = RawJson::from_string("{}".to_owned()).expect("valid JSON");
        match message {
            Outbound::Request { id, method, params } => {
                m.id = string_id(id)?;
                m.method = Some(method);
                // Params are required; `{}` for none.
                m.params = Some(params.unwrap_or(&empty).as_raw());
            }
            Outbound::Notification { .. } => {
                return Err(WriteError::Unsupported {
                    dialect: Self::NAME,
                    what: "notifications (every message has an id)",
                });
            }
            Outbound::Result { id, result } => {
                m.id = string_id(id)?;
                m.result = Some(result.as_raw());
            }
            Outbound::Error { id, error } => {
                m.id = string_id(id)?;
                let Code::Name(code) = &error.code else {
                    return Err(WriteError::InvalidValue {
                        dialect: Self::NAME,
                        what: format!("the error code {} (codes are names)", error.code),
                    });
                };
                m.error = Some(SidecarErrorOut {
                    code,
                    message: &error.message,
                });
            }
            Outbound::Progress { id, progress } => {
                m.id = string_id(id)?;
                if !progress.get().starts_with('{') {
                    return Err(WriteError::InvalidValue {
                        dialect: Self::NAME,
                        what: format!("progress {:.40} (progress is an object)", progress.get()),
                    });
                }
                m.progress = Some(progress.as_raw());
            }
        }
        serde_json::to_writer(out, &m).expect("serialising to a Vec cannot fail");
        Ok(())
    }

    fn next_id(&self, ids: &mut IdGenerator, _counter: &mut i64) -> Id {
        Id::String(ids.next_uuid_v4())
    }

    fn answer_invalid(&self, invalid: &Invalid) -> Option<(Id, RemoteError)> {
        // Only a request whose id could be read can be answered: the sidecar has no null id.
        match invalid {
            Invalid::Request {
                id: Some(id),
                reason,
            } => Some((
                id.clone(),
                RemoteError::new(SidecarErrorCode::InvalidParams.code(), reason.clone()),
            )),
            _ => None,
        }
    }

    fn method_not_found(&self, method: &str) -> RemoteError {
        RemoteError::new(
            SidecarErrorCode::UnknownMethod.code(),
            format!("The method {method:?} is not recognized."),
        )
    }

    fn duplicate_id(&self) -> RemoteError {
        RemoteError::new(
            SidecarErrorCode::InvalidParams.code(),
            "id already in use by a request in progress",
        )
    }

    /// The sidecar spec's per-method table, [`TimeoutPolicy::sidecar`].
    fn default_timeouts(&self) -> TimeoutPolicy {
        TimeoutPolicy::sidecar()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> RawJson {
        RawJson::from_string(json.to_owned()).unwrap()
    }

    fn read_sidecar(json: &str) -> Result<Inbound, Invalid> {
        Sidecar.read(json.as_bytes(), 1)?.remove(0)
    }

    #[test]
    fn sidecar_spec_examples() {
        let id = Id::String("550e8400-e29b-41d4-a716-446655440000".into());
        assert_eq!(
            read_sidecar(
                r#"{"id":"550e8400-e29b-41d4-a716-446655440000","method":"inference.complete","params":{"prompt":"Summarize this code...","model_id":"default-llm","max_tokens":512,"temperature":0.7}}"#
            ),
            Ok(Inbound::Request {
                id: id.clone(),
                method: "inference.complete".into(),
                params: Some(raw(
                    r#"{"prompt":"Summarize this code...","model_id":"default-llm","max_tokens":512,"temperature":0.7}"#
                ))
            })
        );
        assert_eq!(
            read_sidecar(
                r#"{"id":"550e8400-e29b-41d4-a716-446655440000","error":{"code":"MODEL_NOT_LOADED","message":"Model 'default-llm' is not loaded. Call model.load first."}}"#
            ),
            Ok(Inbound::Error {
                id: id.clone(),
                error: RemoteError::new(
                    SidecarErrorCode::ModelNotLoaded.code(),
                    "Model 'default-llm' is not loaded. Call model.load first."
                )
            })
        );
        assert!(matches!(
            read_sidecar(r#"{"id":"a","progress":{"stage":"training","epoch":3}}"#),
            Ok(Inbound::Progress { .. })
        ));
    }

    #[test]
    fn sidecar_refuses_ambiguous_or_partial_messages() {
        for bad in [
            r#"{"id":"a","result":1,"error":{"code":"X","message":"y"}}"#,
            r#"{"id":"a"}"#,
            r#"{"id":1,"result":1}"#,
            r#"{"result":1}"#,
            r#"{"id":"a","method":"m"}"#,
            r#"{"id":"a","error":{"code":5,"message":"y"}}"#,
            r#"[{"id":"a","result":1}]"#,
        ] {
            assert!(read_sidecar(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sidecar_writes_and_reads_back() {
        let id = Id::String("x".into());
        let mut out = Vec::new();
        Sidecar
            .write(
                0,
                Outbound::Request {
                    id: &id,
                    method: "health.ping",
                    params: None,
                },
                &mut out,
            )
            .unwrap();
        assert_eq!(out, br#"{"id":"x","method":"health.ping","params":{}}"#);
        let error = RemoteError::new(SidecarErrorCode::InternalError.code(), "boom");
        out.clear();
        Sidecar
            .write(
                0,
                Outbound::Error {
                    id: &id,
                    error: &error,
                },
                &mut out,
            )
            .unwrap();
        assert_eq!(
            read_sidecar(std::str::from_utf8(&out).unwrap()),
            Ok(Inbound::Error {
                id: id.clone(),
                error
            })
        );
        assert!(
            Sidecar
                .write(
                    0,
                    Outbound::Notification {
                        method: "n",
                        params: None
                    },
                    &mut out
                )
                .is_err()
        );
        assert!(
            Sidecar
                .write(
                    0,
                    Outbound::Result {
                        id: &Id::Number(1),
                        result: &raw("1")
                    },
                    &mut out
                )
                .is_err()
        );
    }

    #[test]
    fn jsonrpc2_refuses_names_and_progress() {
        let mut out = Vec::new();
        let id = Id::Number(1);
        let error = RemoteError::new(Code::Name("X".into()), "y");
        assert!(
            JsonRpc2
                .write(
                    0,
                    Outbound::Error {
                        id: &id,
                        error: &error
                    },
                    &mut out
                )
                .is_err()
        );
        assert!(
            JsonRpc2
                .write(
                    0,
                    Outbound::Progress {
                        id: &id,
                        progress: &raw("{}")
                    },
                    &mut out
                )
                .is_err()
        );
    }

    #[test]
    fn error_codes_round_trip() {
        for code in SidecarErrorCode::ALL {
            assert_eq!(SidecarErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(SidecarErrorCode::parse("NOPE"), None);
    }
}
