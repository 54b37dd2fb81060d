//! The sidecar IPC methods with typed params and results (`docs/sidecar-and-mobile.md`, "The
//! sidecar IPC").
//!
//! The wire (NDJSON, `{id, method, params}` / `{id, result | error | progress}`, UUID v4 ids) is
//! the [`Sidecar`] dialect of [`crate::jsonrpc`]; the correlation, per-method timeouts
//! ([`TimeoutPolicy::sidecar`](crate::jsonrpc::TimeoutPolicy::sidecar)) and progress are the
//! [`Peer`]'s. This module adds the types: a params struct per method ([`SidecarCall`] ties it
//! to its [`SidecarMethod`] and result type), [`call`] to send one, and [`parse_result`] /
//! [`SidecarResult::from_event`] to read the answer back.
//!
//! ```
//! use deskwire::jsonrpc::{Output, Peer, PeerConfig, PeerEvent, Sidecar, TimeoutPolicy};
//! use deskwire::sidecar::{self, HealthPingParams, SidecarResult};
//!
//! let config = PeerConfig { timeouts: TimeoutPolicy::sidecar(), ..PeerConfig::default() };
//! let mut rust = Peer::new(Sidecar, config, 7);
//! let id = sidecar::call(&mut rust, 0, &HealthPingParams::default(), 0).unwrap();
//! let Output::Transmit(line) = rust.poll_output(0) else { panic!() };
//! assert!(line.ends_with(b"\"method\":\"health.ping\",\"params\":{}}\n"));
//! let answer = format!("{{\"id\":{},\"result\":{{\"status\":\"ok\",\"version\":\"0.1.0\"}}}}\n",
//!     serde_json::to_string(&id).unwrap());
//! rust.handle_bytes(3, answer.as_bytes());
//! let Output::Event(event) = rust.poll_output(3) else { panic!() };
//! let Some(Ok(SidecarResult::HealthPing(pong))) = SidecarResult::from_event(&event) else { panic!() };
//! assert_eq!(pong.version, "0.1.0");
//! ```
//!
//! Choices where the spec leaves room:
//! - Status literals (`"ok"`, `"shutting_down"`, `"completed"`, `"stopped"`, `"loaded"`,
//!   `"saved"`) are checked: another value is a [`ResultError`], not a silent success.
//! - `inference.embed` does not fix the vector's length: 384 is the default model's dimension
//!   ([`DEFAULT_EMBEDDING_DIM`]); another `model_id` may give another length.
//! - `inference.plan`'s `context` is any JSON value (the spec does not say).
//! - The `training.start` config members are all optional (the sidecar applies its defaults)
//!   and unknown members are carried through (`extra`); the progress payload is "freeform":
//!   the spec's members are typed, anything else is kept in `extra`.
//! - `model.list` entries: `version` may be absent or `null` (models saved without a tag).
//! - Unknown members are ignored everywhere (a newer sidecar may add some).

use std::fmt;
use std::str::FromStr;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::jsonrpc::dialect::{Dialect, Inbound};
use crate::jsonrpc::{
    CallError, Code, Id, LocalError, Peer, PeerEvent, RawJson, RemoteError, Sidecar,
    SidecarErrorCode,
};

/// The default embedding model (spec: `all-MiniLM-L6-v2`).
pub const DEFAULT_EMBEDDING_MODEL: &str = "all-MiniLM-L6-v2";

/// The default embedding model's dimension.
pub const DEFAULT_EMBEDDING_DIM: usize = 384;

/// A sidecar method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum SidecarMethod {
    /// `health.ping`.
    HealthPing,
    /// `lifecycle.shutdown`.
    LifecycleShutdown,
    /// `inference.complete`.
    InferenceComplete,
    /// `inference.embed`.
    InferenceEmbed,
    /// `inference.plan`.
    InferencePlan,
    /// `training.start`.
    TrainingStart,
    /// `training.stop`.
    TrainingStop,
    /// `model.list`.
    ModelList,
    /// `model.load`.
    ModelLoad,
    /// `model.save`.
    ModelSave,
}

impl SidecarMethod {
    /// Every method, in the spec's order.
    pub const ALL: [SidecarMethod; 10] = [
        SidecarMethod::HealthPing,
        SidecarMethod::LifecycleShutdown,
        SidecarMethod::InferenceComplete,
        SidecarMethod::InferenceEmbed,
        SidecarMethod::InferencePlan,
        SidecarMethod::TrainingStart,
        SidecarMethod::TrainingStop,
        SidecarMethod::ModelList,
        SidecarMethod::ModelLoad,
        SidecarMethod::ModelSave,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SidecarMethod::HealthPing => "health.ping",
            SidecarMethod::LifecycleShutdown => "lifecycle.shutdown",
            SidecarMethod::InferenceComplete => "inference.complete",
            SidecarMethod::InferenceEmbed => "inference.embed",
            SidecarMethod::InferencePlan => "inference.plan",
            SidecarMethod::TrainingStart => "training.start",
            SidecarMethod::TrainingStop => "training.stop",
            SidecarMethod::ModelList => "model.list",
            SidecarMethod::ModelLoad => "model.load",
            SidecarMethod::ModelSave => "model.save",
        }
    }

    /// The method with this wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

impl fmt::Display for SidecarMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// JSON: the wire name (`"health.ping"`).
impl Serialize for SidecarMethod {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SidecarMethod {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Self::parse(&name).ok_or_else(|| {
            serde::de::Error::custom(format_args!("unknown sidecar method {name:?}"))
        })
    }
}

impl FromStr for SidecarMethod {
    type Err = ResultError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| ResultError::UnknownMethod(s.to_owned()))
    }
}

/// Why params or a result could not be read as the method's type. JSON: externally tagged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResultError {
    /// Not a method of the spec.
    #[error("unknown sidecar method {0:?}")]
    UnknownMethod(String),
    /// The answer belongs to another method than the one asked for.
    #[error("expected an answer to {expected}, got one to {got}")]
    MethodMismatch {
        /// The method asked for.
        expected: SidecarMethod,
        /// The method of the answer.
        got: String,
    },
    /// The JSON does not have the method's shape.
    #[error("invalid {what} for {method}: {reason}")]
    Invalid {
        /// The method.
        method: SidecarMethod,
        /// `params` or `result`.
        what: &'static str,
        /// What is wrong.
        reason: String,
    },
}

macro_rules! status_literal {
    ($(#[$doc:meta])* $name:ident, $wire:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            #[doc = concat!("`\"", $wire, "\"`.")]
            #[default]
            #[serde(rename = $wire)]
            Value,
        }
    };
}

status_literal!(
    /// `health.ping`'s status, always `"ok"`.
    HealthStatus,
    "ok"
);
status_literal!(
    /// `lifecycle.shutdown`'s status, always `"shutting_down"`.
    ShutdownStatus,
    "shutting_down"
);
status_literal!(
    /// `training.start`'s final status, always `"completed"`.
    TrainingCompletedStatus,
    "completed"
);
status_literal!(
    /// `training.stop`'s status, always `"stopped"`.
    TrainingStoppedStatus,
    "stopped"
);
status_literal!(
    /// `model.load`'s status, always `"loaded"`.
    ModelLoadedStatus,
    "loaded"
);
status_literal!(
    /// `model.save`'s status, always `"saved"`.
    ModelSavedStatus,
    "saved"
);

/// `health.ping` params: none (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthPingParams {}

/// `health.ping` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthPingResult {
    /// `"ok"`.
    pub status: HealthStatus,
    /// The sidecar's version.
    pub version: String,
}

/// `lifecycle.shutdown` params: none (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShutdownParams {}

/// `lifecycle.shutdown` result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShutdownResult {
    /// `"shutting_down"`.
    pub status: ShutdownStatus,
}

/// `inference.complete` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompleteParams {
    /// The prompt.
    pub prompt: String,
    /// The model.
    pub model_id: String,
    /// Most tokens to generate.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f64,
}

/// `inference.complete` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompleteResult {
    /// The generated text.
    pub text: String,
    /// Tokens used.
    pub tokens_used: u64,
    /// The model that answered.
    pub model_id: String,
}

/// `inference.embed` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbedParams {
    /// The text to embed.
    pub text: String,
    /// The model; the sidecar uses [`DEFAULT_EMBEDDING_MODEL`] without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
}

/// `inference.embed` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbedResult {
    /// The vector ([`DEFAULT_EMBEDDING_DIM`] floats for the default model).
    pub embedding: Vec<f32>,
}

/// `inference.plan` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanParams {
    /// The task.
    pub task: String,
    /// The agent loop's iteration.
    pub iteration: u64,
    /// What the planner should know (any JSON; the spec does not fix its shape).
    pub context: Value,
}

/// One tool call of a plan (also `tool-request.schema.json#/$defs/ToolCall`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool.
    pub tool_name: String,
    /// Its parameters (an object).
    pub parameters: Map<String, Value>,
}

/// The result of running a tool call, fed back to the planner
/// (`tool-request.schema.json#/$defs/ToolResult`).
///
/// The spec names `ToolResult` in its schema list without defining it; this is the shape the
/// agent loop needs: which tool, whether it worked, its output, and an error text when not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The tool.
    pub tool_name: String,
    /// Whether it succeeded.
    pub success: bool,
    /// What it produced (any JSON, often a string).
    #[serde(default)]
    pub output: Value,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `inference.plan` result: one planning step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanResult {
    /// Chain-of-thought shown in the UI and stored in memory.
    pub reasoning: String,
    /// Tools to run, in order (empty for a thinking step).
    pub tool_calls: Vec<ToolCall>,
    /// A question for the user: the agent pauses until answered. Written as `null` when absent.
    #[serde(default)]
    pub question: Option<String>,
    /// Whether the task is finished.
    pub is_complete: bool,
}

/// `training.start`'s `config`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainingConfig {
    /// The model to fine-tune from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_model: Option<String>,
    /// Epochs at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_epochs: Option<u32>,
    /// The learning rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning_rate: Option<f64>,
    /// The batch size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
    /// The fraction of the data held out for validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_split: Option<f64>,
    /// Other settings, passed through.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `training.start` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingStartParams {
    /// The model to create.
    pub model_id: String,
    /// The dataset (a JSONL file on the sidecar's machine).
    pub dataset_path: String,
    /// Settings.
    pub config: TrainingConfig,
}

/// `training.start` result (when training completed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingStartResult {
    /// `"completed"`.
    pub status: TrainingCompletedStatus,
    /// Where the trained model is.
    pub model_path: String,
    /// Final metrics.
    pub metrics: Map<String, Value>,
}

/// A progress payload (freeform; training sends these members).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The stage (`training`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The current epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// Epochs in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_epochs: Option<u64>,
    /// Optimiser steps so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_step: Option<u64>,
    /// Metrics so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Map<String, Value>>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Progress {
    /// Reads a `PeerEvent::Progress` payload (it must be an object).
    pub fn parse(progress: &RawJson) -> Result<Self, serde_json::Error> {
        serde_json::from_str(progress.get())
    }
}

/// `training.stop` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainingStopParams {
    /// The training to stop (the running one without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
}

/// `training.stop` result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainingStopResult {
    /// `"stopped"`.
    pub status: TrainingStoppedStatus,
}

/// `model.list` params: none (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelListParams {}

/// One model of `model.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The model id.
    pub id: String,
    /// Where it is stored.
    pub path: String,
    /// Its version tag (absent or `null` for none).
    #[serde(default)]
    pub version: Option<String>,
    /// Its size in MB.
    pub size_mb: f64,
}

/// `model.list` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelListResult {
    /// The models.
    pub models: Vec<ModelInfo>,
}

/// `model.load` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelLoadParams {
    /// The model.
    pub model_id: String,
}

/// `model.load` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelLoadResult {
    /// `"loaded"`.
    pub status: ModelLoadedStatus,
    /// The model.
    pub model_id: String,
}

/// `model.save` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSaveParams {
    /// The model.
    pub model_id: String,
    /// A version tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// `model.save` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSaveResult {
    /// `"saved"`.
    pub status: ModelSavedStatus,
    /// Where it was saved.
    pub path: String,
}

/// Params of one method: which method they are for and what its result is.
pub trait SidecarCall: Serialize + DeserializeOwned {
    /// The method.
    const METHOD: SidecarMethod;
    /// Its result type.
    type Result: Serialize + DeserializeOwned;
}

macro_rules! calls {
    ($($params:ty => $method:ident, $result:ty;)*) => {
        $(impl SidecarCall for $params {
            const METHOD: SidecarMethod = SidecarMethod::$method;
            type Result = $result;
        })*

        /// Params of any method, as the sidecar (or a test double) receives them.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum SidecarParams {
            $(
                #[doc = concat!("Params of `", stringify!($method), "`.")]
                $method($params),
            )*
        }

        /// The result of any method.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum SidecarResult {
            $(
                #[doc = concat!("Result of `", stringify!($method), "`.")]
                $method($result),
            )*
        }

        impl SidecarParams {
            /// The method.
            pub fn method(&self) -> SidecarMethod {
                match self { $(SidecarParams::$method(_) => SidecarMethod::$method,)* }
            }

            /// Reads the params of a request for `method`.
            pub fn parse(method: &str, params: &str) -> Result<Self, ResultError> {
                let m = SidecarMethod::parse(method)
                    .ok_or_else(|| ResultError::UnknownMethod(method.to_owned()))?;
                match m {
                    $(SidecarMethod::$method => read(m, "params", params).map(SidecarParams::$method),)*
                }
            }

            /// The params as JSON.
            pub fn to_raw(&self) -> RawJson {
                match self { $(SidecarParams::$method(p) => raw(p),)* }
            }
        }

        impl SidecarResult {
            /// The method it answers.
            pub fn method(&self) -> SidecarMethod {
                match self { $(SidecarResult::$method(_) => SidecarMethod::$method,)* }
            }

            /// Reads the result of a call of `method`.
            pub fn parse(method: &str, result: &str) -> Result<Self, ResultError> {
                let m = SidecarMethod::parse(method)
                    .ok_or_else(|| ResultError::UnknownMethod(method.to_owned()))?;
                match m {
                    $(SidecarMethod::$method => read(m, "result", result).map(SidecarResult::$method),)*
                }
            }

            /// The result as JSON (for a sidecar's answer through `Peer::respond`).
            pub fn to_raw(&self) -> RawJson {
                match self { $(SidecarResult::$method(r) => raw(r),)* }
            }
        }
    };
}

calls! {
    HealthPingParams => HealthPing, HealthPingResult;
    ShutdownParams => LifecycleShutdown, ShutdownResult;
    CompleteParams => InferenceComplete, CompleteResult;
    EmbedParams => InferenceEmbed, EmbedResult;
    PlanParams => InferencePlan, PlanResult;
    TrainingStartParams => TrainingStart, TrainingStartResult;
    TrainingStopParams => TrainingStop, TrainingStopResult;
    ModelListParams => ModelList, ModelListResult;
    ModelLoadParams => ModelLoad, ModelLoadResult;
    ModelSaveParams => ModelSave, ModelSaveResult;
}

/// Reads `json` as `T`; params and results are objects (serde would also read a struct from
/// an array, positionally, which the spec does not allow).
fn read<T: DeserializeOwned>(
    method: SidecarMethod,
    what: &'static str,
    json: &str,
) -> Result<T, ResultError> {
    let invalid = |reason: String| ResultError::Invalid {
        method,
        what,
        reason,
    };
    if !json.trim_start().starts_with('{') {
        return Err(invalid("not a JSON object".to_owned()));
    }
    serde_json::from_str(json).map_err(|e| invalid(e.to_string()))
}

fn raw<T: Serialize>(value: &T) -> RawJson {
    // Our types hold strings, numbers, booleans and JSON values: serialising cannot fail
    // (serde_json writes a non-finite float as `null`).
    RawJson::to_raw(value).expect("sidecar types always serialise")
}

/// The params as JSON, for [`Peer::call`].
pub fn to_params<P: SidecarCall>(params: &P) -> RawJson {
    raw(params)
}

/// Calls `P::METHOD` with `params` on a sidecar peer; `user` comes back with the answer.
pub fn call<P: SidecarCall>(
    peer: &mut Peer<Sidecar>,
    now: u64,
    params: &P,
    user: u64,
) -> Result<Id, LocalError> {
    peer.call(now, P::METHOD.as_str(), Some(to_params(params)), user)
}

/// Reads the result of a call of `method` (the `method` of the `PeerEvent::Response`) as the
/// result of `P`.
pub fn parse_result<P: SidecarCall>(
    method: &str,
    result: &RawJson,
) -> Result<P::Result, ResultError> {
    if method != P::METHOD.as_str() {
        return Err(ResultError::MethodMismatch {
            expected: P::METHOD,
            got: method.to_owned(),
        });
    }
    read(P::METHOD, "result", result.get())
}

impl SidecarParams {
    /// The typed params of a `PeerEvent::Request` (the sidecar's side), with the request id to
    /// answer; `None` for other events. An unknown method is `ResultError::UnknownMethod`:
    /// answer it with `Peer::respond_method_not_found`.
    pub fn from_event(event: &PeerEvent) -> Option<Result<(Id, Self), ResultError>> {
        match event {
            PeerEvent::Request { id, method, params } => {
                let params = params.as_ref().map_or("{}", |p| p.get());
                Some(SidecarParams::parse(method, params).map(|p| (id.clone(), p)))
            }
            _ => None,
        }
    }
}

impl Progress {
    /// The progress as JSON, for `Peer::progress`.
    pub fn to_raw(&self) -> RawJson {
        raw(self)
    }
}

impl SidecarResult {
    /// The typed result of a `PeerEvent::Response`; `None` for other events.
    pub fn from_event(event: &PeerEvent) -> Option<Result<Self, ResultError>> {
        match event {
            PeerEvent::Response { method, result, .. } => {
                Some(SidecarResult::parse(method, result.get()))
            }
            _ => None,
        }
    }
}

/// Why a sidecar line is not a valid message (see [`read_message`]). JSON: externally tagged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MessageError {
    /// The dialect refused it.
    #[error("{0}")]
    Invalid(String),
    /// An error code that is not `SCREAMING_SNAKE_CASE`.
    #[error("error code {0:?} is not SCREAMING_SNAKE_CASE")]
    BadErrorCode(String),
}

/// Reads one sidecar message (a line without its `\n`) as `ipc-message.schema.json` does: the
/// [`Sidecar`] dialect's checks plus the error code's spelling. For validators, tests and
/// sidecars written on deskwire; the [`Peer`] itself stays lenient about codes.
pub fn read_message(line: &[u8]) -> Result<Inbound, MessageError> {
    let mut items = Sidecar
        .read(line, 1)
        .map_err(|e| MessageError::Invalid(e.to_string()))?;
    if items.len() != 1 {
        return Err(MessageError::Invalid("one message per line".to_owned()));
    }
    let message = items
        .pop()
        .expect("one item")
        .map_err(|e| MessageError::Invalid(e.to_string()))?;
    if let Inbound::Error {
        error: RemoteError {
            code: Code::Name(code),
            ..
        },
        ..
    } = &message
        && !is_error_code(code)
    {
        return Err(MessageError::BadErrorCode(code.clone()));
    }
    Ok(message)
}

/// The sidecar error code of a failed call, when it is one of the spec's (`None` for a timeout
/// or an unknown code).
pub fn error_code(error: &CallError) -> Option<SidecarErrorCode> {
    match error {
        CallError::Remote(RemoteError {
            code: Code::Name(name),
            ..
        }) => SidecarErrorCode::parse(name),
        _ => None,
    }
}

/// Whether `code` is `SCREAMING_SNAKE_CASE` (`[A-Z][A-Z0-9_]*`), as the spec requires of error
/// codes; the dialect carries any string, this is for validators and sidecars.
pub fn is_error_code(code: &str) -> bool {
    let mut bytes = code.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_uppercase())
        && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::{Output, PeerConfig, TimeoutPolicy};

    #[test]
    fn method_names_round_trip() {
        for m in SidecarMethod::ALL {
            assert_eq!(SidecarMethod::parse(m.as_str()), Some(m));
            assert_eq!(m.as_str().parse::<SidecarMethod>(), Ok(m));
        }
        assert!("health.pong".parse::<SidecarMethod>().is_err());
    }

    #[test]
    fn spec_examples() {
        let params = SidecarParams::parse(
            "inference.complete",
            r#"{"prompt":"Summarize this code...","model_id":"default-llm","max_tokens":512,"temperature":0.7}"#,
        )
        .unwrap();
        assert_eq!(params.method(), SidecarMethod::InferenceComplete);
        let plan = SidecarResult::parse(
            "inference.plan",
            r#"{"reasoning":"I need to read the package.json to understand the project setup.","tool_calls":[{"tool_name":"shell","parameters":{"command":"cat package.json"}}],"question":null,"is_complete":false}"#,
        )
        .unwrap();
        let SidecarResult::InferencePlan(plan) = plan else {
            panic!()
        };
        assert_eq!(plan.tool_calls[0].tool_name, "shell");
        let start = SidecarParams::parse(
            "training.start",
            r#"{"model_id":"my-custom-model","dataset_path":"/path/to/dataset.jsonl","config":{"base_model":"gpt2","max_epochs":10,"learning_rate":1e-4,"batch_size":8,"val_split":0.1}}"#,
        )
        .unwrap();
        let SidecarParams::TrainingStart(start) = start else {
            panic!()
        };
        assert_eq!(start.config.batch_size, Some(8));
        assert!(
            SidecarResult::parse("health.ping", r#"{"status":"degraded","version":"1"}"#).is_err()
        );
        assert!(SidecarResult::parse("model.list", r#"[[]]"#).is_err());
    }

    #[test]
    fn call_and_typed_answer_through_a_peer() {
        let config = PeerConfig {
            timeouts: TimeoutPolicy::sidecar(),
            ..PeerConfig::default()
        };
        let mut peer = Peer::new(Sidecar, config, 1);
        let params = ModelLoadParams {
            model_id: "m".into(),
        };
        let id = call(&mut peer, 0, &params, 9).unwrap();
        let Output::Transmit(line) = peer.poll_output(0) else {
            panic!()
        };
        let line = String::from_utf8(line).unwrap();
        assert!(line.contains(r#""method":"model.load","params":{"model_id":"m"}"#));
        let Id::String(id) = id else { panic!() };
        peer.handle_bytes(
            1,
            format!(r#"{{"id":"{id}","result":{{"status":"loaded","model_id":"m"}}}}"#).as_bytes(),
        );
        peer.handle_bytes(1, b"\n");
        let Output::Event(PeerEvent::Response { method, result, .. }) = peer.poll_output(1) else {
            panic!()
        };
        let loaded = parse_result::<ModelLoadParams>(&method, &result).unwrap();
        assert_eq!(loaded.model_id, "m");
        assert!(matches!(
            parse_result::<ModelSaveParams>(&method, &result),
            Err(ResultError::MethodMismatch { .. })
        ));
    }

    /// Both ends on deskwire: the Rust core starts a training, the sidecar reports progress and
    /// answers; a second call gets a typed error.
    #[test]
    fn training_with_progress_between_two_peers() {
        let config = PeerConfig {
            timeouts: TimeoutPolicy::sidecar(),
            ..PeerConfig::default()
        };
        let mut core = Peer::new(Sidecar, config.clone(), 1);
        let mut python = Peer::new(Sidecar, config, 2);
        fn pump(from: &mut Peer<Sidecar>, to: &mut Peer<Sidecar>, now: u64) -> Vec<PeerEvent> {
            let mut events = Vec::new();
            loop {
                match from.poll_output(now) {
                    Output::Transmit(bytes) => to.handle_bytes(now, &bytes),
                    Output::Event(e) => events.push(e),
                    Output::Timeout(_) => return events,
                }
            }
        }
        let start = TrainingStartParams {
            model_id: "my-custom-model".into(),
            dataset_path: "/path/to/dataset.jsonl".into(),
            config: TrainingConfig {
                base_model: Some("gpt2".into()),
                max_epochs: Some(10),
                ..TrainingConfig::default()
            },
        };
        let id = call(&mut core, 0, &start, 1).unwrap();
        pump(&mut core, &mut python, 0);
        let events = pump(&mut python, &mut core, 0);
        let Some(Ok((got, SidecarParams::TrainingStart(params)))) =
            SidecarParams::from_event(&events[0])
        else {
            panic!("{events:?}")
        };
        assert_eq!((got.clone(), params), (id.clone(), start));
        // 299 s later, progress keeps the call alive past its 300 s timeout.
        let progress = Progress {
            stage: Some("training".into()),
            epoch: Some(3),
            total_epochs: Some(10),
            ..Progress::default()
        };
        python.progress(299_000, &got, progress.to_raw()).unwrap();
        pump(&mut python, &mut core, 299_000);
        let events = pump(&mut core, &mut python, 299_000);
        let PeerEvent::Progress { progress: raw, .. } = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(Progress::parse(raw).unwrap(), progress);
        let done = SidecarResult::TrainingStart(TrainingStartResult {
            status: TrainingCompletedStatus::Value,
            model_path: "/models/my-custom-model".into(),
            metrics: Map::new(),
        });
        python.respond(500_000, &got, done.to_raw()).unwrap();
        pump(&mut python, &mut core, 500_000);
        let events = pump(&mut core, &mut python, 500_000);
        assert_eq!(SidecarResult::from_event(&events[0]), Some(Ok(done)));

        // A second training while one runs: a typed error code.
        let id = call(&mut core, 500_000, &TrainingStopParams::default(), 2).unwrap();
        pump(&mut core, &mut python, 500_000);
        python
            .respond_error(
                500_000,
                &id,
                RemoteError::new(SidecarErrorCode::TrainingNotRunning.code(), "idle"),
            )
            .unwrap();
        pump(&mut python, &mut core, 500_000);
        let events = pump(&mut core, &mut python, 500_000);
        let PeerEvent::Failed { error, .. } = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(
            error_code(error),
            Some(SidecarErrorCode::TrainingNotRunning)
        );
    }

    #[test]
    fn error_codes() {
        assert!(is_error_code("MODEL_NOT_LOADED"));
        assert!(!is_error_code("model"));
        assert!(!is_error_code(""));
        let error = CallError::Remote(RemoteError::new(
            SidecarErrorCode::ModelNotFound.code(),
            "x",
        ));
        assert_eq!(error_code(&error), Some(SidecarErrorCode::ModelNotFound));
        assert_eq!(error_code(&CallError::Timeout), None);
    }
}
