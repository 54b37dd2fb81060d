//! The WebSocket messages: the `{type, payload}` envelope, every message type in both
//! directions, and the agent state (`docs/sidecar-and-mobile.md`, "Messages").
//!
//! Reading is strict about what the spec fixes (the `type` names, the payload being an object,
//! field types, the status and action names) and lenient about the rest: unknown members are
//! ignored (a newer peer may add some), an optional member may be `null`, and a payload-less
//! message (`ping`, `pong`) may carry `"payload": null` or no payload at all. Writing is
//! canonical: optional members are left out when absent, `ping`/`pong` and `Idle` carry an
//! explicit `null`.

use std::fmt;

use serde::de::{self, DeserializeOwned};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Why a text frame is not a valid message. JSON: externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ParseError {
    /// The text is not JSON.
    #[error("not JSON: {0}")]
    Json(String),
    /// The JSON is not an object.
    #[error("a message is a JSON object")]
    NotAnObject,
    /// No string `type` member.
    #[error("the message has no string \"type\"")]
    MissingType,
    /// A `type` this direction does not have.
    #[error("unknown message type {0:?}")]
    UnknownType(String),
    /// The payload is missing, or not an object, or its members are wrong.
    #[error("invalid {kind} payload: {reason}")]
    InvalidPayload {
        /// The message type.
        kind: String,
        /// What is wrong.
        reason: String,
    },
    /// The text is longer than the configured limit.
    #[error("message of {size} bytes exceeds the {max} byte limit")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
}

fn invalid(kind: &str, reason: impl fmt::Display) -> ParseError {
    ParseError::InvalidPayload {
        kind: kind.to_owned(),
        reason: reason.to_string(),
    }
}

/// Splits an envelope into its type and payload (`None` when absent or `null`).
fn split(value: Value) -> Result<(String, Option<Value>), ParseError> {
    let Value::Object(mut map) = value else {
        return Err(ParseError::NotAnObject);
    };
    let kind = match map.remove("type") {
        Some(Value::String(kind)) => kind,
        _ => return Err(ParseError::MissingType),
    };
    let payload = match map.remove("payload") {
        None | Some(Value::Null) => None,
        Some(p) => Some(p),
    };
    Ok((kind, payload))
}

/// A payload that must be an object of type `T`. The object check comes first: serde would
/// otherwise read a struct from a JSON array, positionally.
fn payload<T: DeserializeOwned>(kind: &str, payload: Option<Value>) -> Result<T, ParseError> {
    match payload {
        Some(p @ Value::Object(_)) => serde_json::from_value(p).map_err(|e| invalid(kind, e)),
        Some(_) => Err(invalid(kind, "the payload must be an object")),
        None => Err(invalid(kind, "a payload is required")),
    }
}

fn no_payload(kind: &str, payload: Option<Value>) -> Result<(), ParseError> {
    match payload {
        None => Ok(()),
        Some(_) => Err(invalid(
            kind,
            "this type carries no payload (null or absent)",
        )),
    }
}

fn parse_value(text: &str) -> Result<Value, ParseError> {
    serde_json::from_str(text).map_err(|e| ParseError::Json(e.to_string()))
}

/// Writes `{"type": kind, "payload": payload}` in that order.
fn envelope<S: Serializer, P: Serialize + ?Sized>(
    s: S,
    kind: &str,
    payload: &P,
) -> Result<S::Ok, S::Error> {
    let mut st = s.serialize_struct("Envelope", 2)?;
    st.serialize_field("type", kind)?;
    st.serialize_field("payload", payload)?;
    st.end()
}

fn to_value<T: Serialize>(value: &T) -> Value {
    // Our payload types hold strings, integers and booleans only: nothing can fail.
    serde_json::to_value(value).expect("message payloads always serialise")
}

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("message payloads always serialise")
}

/// Any envelope, typed or not: for hosts that route or log messages of types this version
/// does not know. `payload` is `None` when absent or `null`; it must otherwise be an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The `type`.
    pub kind: String,
    /// The payload.
    pub payload: Option<serde_json::Map<String, Value>>,
}

impl Envelope {
    /// Reads a text frame.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        Self::from_value(parse_value(text)?)
    }

    /// Reads a parsed JSON value.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        let (kind, payload) = split(value)?;
        let payload = match payload {
            None => None,
            Some(Value::Object(map)) => Some(map),
            Some(_) => return Err(invalid(&kind, "the payload must be an object or null")),
        };
        Ok(Envelope { kind, payload })
    }

    /// The envelope as JSON (`"payload": null` when there is none).
    pub fn to_value(&self) -> Value {
        let payload = self.payload.clone().map_or(Value::Null, Value::Object);
        let mut map = serde_json::Map::new();
        map.insert("type".to_owned(), Value::String(self.kind.clone()));
        map.insert("payload".to_owned(), payload);
        Value::Object(map)
    }
}

/// The status of the agent, with the data each status carries (spec "AgentState Payload").
///
/// On the wire: `{"status": "Running", "data": {"task_id": "...", "iteration": 5}}`; `Idle`
/// has `"data": null` (an absent `data` is read as `null` too).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum AgentState {
    /// No task.
    Idle,
    /// A task runs.
    Running(#[cfg_attr(feature = "uniffi", uniffi(name = "data"))] RunningData),
    /// A task waits for the user (an answer or a permission).
    Paused(#[cfg_attr(feature = "uniffi", uniffi(name = "data"))] PausedData),
    /// A task ended.
    Stopped(#[cfg_attr(feature = "uniffi", uniffi(name = "data"))] StoppedData),
}

/// The data of [`AgentState::Running`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct RunningData {
    /// The task.
    pub task_id: String,
    /// The agent loop's iteration (a non-negative integer).
    pub iteration: u64,
}

/// The data of [`AgentState::Paused`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct PausedData {
    /// The task.
    pub task_id: String,
    /// The question the agent asks the user, if it paused to ask one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The id of the `permission_request` the agent waits for, if any.
    ///
    /// The spec names the member but not its type; the id of the pending request is what a
    /// client needs to point at the prompt it already shows, so it is a string here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_permission: Option<String>,
}

/// The data of [`AgentState::Stopped`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct StoppedData {
    /// The task.
    pub task_id: String,
    /// Why it stopped.
    pub reason: StopReason,
}

/// Why a task stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum StopReason {
    /// The task is done.
    Completed,
    /// The user stopped it.
    ManualStop,
    /// It failed.
    Error,
    /// It reached its iteration limit.
    IterationLimit,
}

impl AgentState {
    /// The status name on the wire (`Idle`, `Running`, `Paused`, `Stopped`).
    pub fn status(&self) -> &'static str {
        match self {
            AgentState::Idle => "Idle",
            AgentState::Running(_) => "Running",
            AgentState::Paused(_) => "Paused",
            AgentState::Stopped(_) => "Stopped",
        }
    }

    /// The task this state is about (none when idle).
    pub fn task_id(&self) -> Option<&str> {
        match self {
            AgentState::Idle => None,
            AgentState::Running(d) => Some(&d.task_id),
            AgentState::Paused(d) => Some(&d.task_id),
            AgentState::Stopped(d) => Some(&d.task_id),
        }
    }

    /// The state as JSON.
    pub fn to_value(&self) -> Value {
        to_value(self)
    }

    /// Reads a state from JSON.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        const KIND: &str = "AgentState";
        let Value::Object(mut map) = value else {
            return Err(invalid(KIND, "an agent state is an object"));
        };
        let status = match map.remove("status") {
            Some(Value::String(s)) => s,
            _ => return Err(invalid(KIND, "no string \"status\"")),
        };
        let data = match map.remove("data") {
            None | Some(Value::Null) => None,
            Some(d) => Some(d),
        };
        let kind = format!("{KIND} {status}");
        match status.as_str() {
            "Idle" => match data {
                None => Ok(AgentState::Idle),
                Some(_) => Err(invalid(KIND, "Idle carries no data")),
            },
            "Running" => payload(&kind, data).map(AgentState::Running),
            "Paused" => payload(&kind, data).map(AgentState::Paused),
            "Stopped" => payload(&kind, data).map(AgentState::Stopped),
            other => Err(invalid(KIND, format!("unknown status {other:?}"))),
        }
    }
}

impl Serialize for AgentState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Written field by field (not through a `Value`) so that members keep the order of the
        // spec's examples whatever map type serde_json was built with.
        let mut st = s.serialize_struct("AgentState", 2)?;
        st.serialize_field("status", self.status())?;
        match self {
            AgentState::Idle => st.serialize_field("data", &())?,
            AgentState::Running(d) => st.serialize_field("data", d)?,
            AgentState::Paused(d) => st.serialize_field("data", d)?,
            AgentState::Stopped(d) => st.serialize_field("data", d)?,
        }
        st.end()
    }
}

impl<'de> Deserialize<'de> for AgentState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        AgentState::from_value(Value::deserialize(d)?).map_err(de::Error::custom)
    }
}

/// `auth_result`: the answer to a pairing attempt (or the refusal of a token).
///
/// The spec lists `token` as a plain string and `error` as optional. A failed attempt has no
/// token to give, so it is written as `""` (peers that expect the member keep working) and read
/// as absent, `null` or any string; a success must carry a non-empty token.
///
/// `attempts_left` and `retry_after_ms` are deskwire's: a failure tells the phone what the
/// desktop knows, so the user sees it. Peers that know only the spec ignore them (unknown
/// members are ignored), and they are left out when absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct AuthResult {
    /// The bearer token for later connections (empty on failure).
    #[serde(default, deserialize_with = "string_or_null")]
    pub token: String,
    /// Whether pairing succeeded.
    pub success: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wrong codes still allowed before the code shown is burnt (0: ask for a new code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub attempts_left: Option<u32>,
    /// No attempt is looked at before this many milliseconds have passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub retry_after_ms: Option<u64>,
}

fn string_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

impl AuthResult {
    /// A successful pairing handing out `token`.
    pub fn success(token: impl Into<String>) -> Self {
        AuthResult {
            token: token.into(),
            success: true,
            error: None,
            attempts_left: None,
            retry_after_ms: None,
        }
    }

    /// A failed attempt.
    pub fn failure(error: impl Into<String>) -> Self {
        AuthResult {
            token: String::new(),
            success: false,
            error: Some(error.into()),
            attempts_left: None,
            retry_after_ms: None,
        }
    }
}

/// `message` from the server: a chat message from the agent or the system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ChatMessage {
    /// Who speaks (`assistant`, `system`, ...; the spec leaves the set open).
    pub role: String,
    /// The text.
    pub content: String,
    /// When it was said; the spec only says "string" (RFC 3339 is what the desktop writes).
    pub timestamp: String,
}

/// `permission_request`: the agent needs the user's approval for a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct PermissionRequest {
    /// The request id, echoed by the response.
    pub id: String,
    /// The tool.
    pub tool_name: String,
    /// The command (or arguments) to approve.
    pub command: String,
    /// A description for the user.
    pub description: String,
    /// The risk tier; the spec leaves the values open.
    pub tier: String,
}

/// `task_update`: progress on the current task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct TaskUpdate {
    /// The task.
    pub task_id: String,
    /// The iteration (the spec says "number"; iterations are counted, so a non-negative
    /// integer).
    pub iteration: u64,
    /// The status text; the spec leaves the values open.
    pub status: String,
}

/// A message from the desktop to the phone.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum ServerMessage {
    /// `auth_result`.
    AuthResult(#[cfg_attr(feature = "uniffi", uniffi(name = "result"))] AuthResult),
    /// `agent_state_update`.
    AgentStateUpdate(#[cfg_attr(feature = "uniffi", uniffi(name = "state"))] AgentState),
    /// `message`.
    Message(#[cfg_attr(feature = "uniffi", uniffi(name = "message"))] ChatMessage),
    /// `permission_request`.
    PermissionRequest(#[cfg_attr(feature = "uniffi", uniffi(name = "request"))] PermissionRequest),
    /// `task_update`.
    TaskUpdate(#[cfg_attr(feature = "uniffi", uniffi(name = "update"))] TaskUpdate),
    /// `ping` (no payload): answer with `pong`.
    Ping,
}

impl ServerMessage {
    /// Every server message type name.
    pub const TYPES: [&'static str; 6] = [
        "auth_result",
        "agent_state_update",
        "message",
        "permission_request",
        "task_update",
        "ping",
    ];

    /// The `type` of this message.
    pub fn kind(&self) -> &'static str {
        match self {
            ServerMessage::AuthResult(_) => "auth_result",
            ServerMessage::AgentStateUpdate(_) => "agent_state_update",
            ServerMessage::Message(_) => "message",
            ServerMessage::PermissionRequest(_) => "permission_request",
            ServerMessage::TaskUpdate(_) => "task_update",
            ServerMessage::Ping => "ping",
        }
    }

    /// Reads a text frame.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        Self::from_value(parse_value(text)?)
    }

    /// Reads a parsed JSON value.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        let (kind, p) = split(value)?;
        Ok(match kind.as_str() {
            "auth_result" => {
                let result: AuthResult = payload(&kind, p)?;
                if result.success && result.token.is_empty() {
                    return Err(invalid(&kind, "a successful auth_result carries a token"));
                }
                ServerMessage::AuthResult(result)
            }
            "agent_state_update" => match p {
                Some(v) => ServerMessage::AgentStateUpdate(AgentState::from_value(v)?),
                None => return Err(invalid(&kind, "a payload is required")),
            },
            "message" => ServerMessage::Message(payload(&kind, p)?),
            "permission_request" => ServerMessage::PermissionRequest(payload(&kind, p)?),
            "task_update" => ServerMessage::TaskUpdate(payload(&kind, p)?),
            "ping" => {
                no_payload(&kind, p)?;
                ServerMessage::Ping
            }
            _ => return Err(ParseError::UnknownType(kind)),
        })
    }

    /// The message as JSON.
    pub fn to_value(&self) -> Value {
        to_value(self)
    }

    /// The text frame to send.
    pub fn to_json(&self) -> String {
        to_json(self)
    }
}

impl Serialize for ServerMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kind = self.kind();
        match self {
            ServerMessage::AuthResult(r) => envelope(s, kind, r),
            ServerMessage::AgentStateUpdate(st) => envelope(s, kind, st),
            ServerMessage::Message(m) => envelope(s, kind, m),
            ServerMessage::PermissionRequest(r) => envelope(s, kind, r),
            ServerMessage::TaskUpdate(t) => envelope(s, kind, t),
            ServerMessage::Ping => envelope(s, kind, &()),
        }
    }
}

/// `auth`: the pairing code typed on the phone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Auth {
    /// The code the desktop shows (six digits from deskwire's server; any string is carried
    /// so that a wrong one is answered, not dropped).
    pub code: String,
}

/// What a `command` asks the agent to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum CommandAction {
    /// Start a task.
    Start,
    /// Stop the task.
    Stop,
    /// Pause the task.
    Pause,
    /// Resume the task.
    Resume,
}

/// `command`: agent control.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Command {
    /// The action.
    pub action: CommandAction,
    /// The task to start (for `start`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub task: Option<String>,
    /// An iteration limit (for `start`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub max_iterations: Option<u64>,
}

impl Command {
    /// A command without a task or limit.
    pub fn new(action: CommandAction) -> Self {
        Command {
            action,
            task: None,
            max_iterations: None,
        }
    }

    /// `start` with a task.
    pub fn start(task: impl Into<String>, max_iterations: Option<u64>) -> Self {
        Command {
            action: CommandAction::Start,
            task: Some(task.into()),
            max_iterations,
        }
    }
}

/// `message` from the phone: a chat message or the answer to the agent's question. Its
/// `role` is always `"user"` (written so, and required so on read).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct UserMessage {
    /// The text.
    pub content: String,
}

#[derive(Serialize)]
struct UserMessageWire<'a> {
    role: &'a str,
    content: &'a str,
}

#[derive(Deserialize)]
struct UserMessageIn {
    role: String,
    content: String,
}

/// `permission_response`: the user's answer to a `permission_request`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct PermissionResponse {
    /// The request's id.
    pub id: String,
    /// Whether the tool call may run.
    pub approved: bool,
    /// Whether to apply the same answer to such calls from now on. Optional on the wire
    /// (absent or `null` reads as `false`); always written.
    #[serde(default, deserialize_with = "bool_or_null")]
    pub remember: bool,
}

fn bool_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(d)?.unwrap_or(false))
}

/// A message from the phone to the desktop.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum ClientMessage {
    /// `auth`.
    Auth(#[cfg_attr(feature = "uniffi", uniffi(name = "auth"))] Auth),
    /// `command`.
    Command(#[cfg_attr(feature = "uniffi", uniffi(name = "command"))] Command),
    /// `message`.
    Message(#[cfg_attr(feature = "uniffi", uniffi(name = "message"))] UserMessage),
    /// `permission_response`.
    PermissionResponse(
        #[cfg_attr(feature = "uniffi", uniffi(name = "response"))] PermissionResponse,
    ),
    /// `pong` (no payload).
    Pong,
}

impl ClientMessage {
    /// Every client message type name.
    pub const TYPES: [&'static str; 5] =
        ["auth", "command", "message", "permission_response", "pong"];

    /// The `type` of this message.
    pub fn kind(&self) -> &'static str {
        match self {
            ClientMessage::Auth(_) => "auth",
            ClientMessage::Command(_) => "command",
            ClientMessage::Message(_) => "message",
            ClientMessage::PermissionResponse(_) => "permission_response",
            ClientMessage::Pong => "pong",
        }
    }

    /// Reads a text frame.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        Self::from_value(parse_value(text)?)
    }

    /// Reads a parsed JSON value.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        let (kind, p) = split(value)?;
        Ok(match kind.as_str() {
            "auth" => ClientMessage::Auth(payload(&kind, p)?),
            "command" => ClientMessage::Command(payload(&kind, p)?),
            "message" => {
                let m: UserMessageIn = payload(&kind, p)?;
                if m.role != "user" {
                    return Err(invalid(&kind, "a client message has role \"user\""));
                }
                ClientMessage::Message(UserMessage { content: m.content })
            }
            "permission_response" => ClientMessage::PermissionResponse(payload(&kind, p)?),
            "pong" => {
                no_payload(&kind, p)?;
                ClientMessage::Pong
            }
            _ => return Err(ParseError::UnknownType(kind)),
        })
    }

    /// The message as JSON.
    pub fn to_value(&self) -> Value {
        to_value(self)
    }

    /// The text frame to send.
    pub fn to_json(&self) -> String {
        to_json(self)
    }
}

impl Serialize for ClientMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kind = self.kind();
        match self {
            ClientMessage::Auth(a) => envelope(s, kind, a),
            ClientMessage::Command(c) => envelope(s, kind, c),
            ClientMessage::Message(m) => envelope(
                s,
                kind,
                &UserMessageWire {
                    role: "user",
                    content: &m.content,
                },
            ),
            ClientMessage::PermissionResponse(r) => envelope(s, kind, r),
            ClientMessage::Pong => envelope(s, kind, &()),
        }
    }
}

macro_rules! deserialize_via_value {
    ($t:ty) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <$t>::from_value(Value::deserialize(d)?).map_err(de::Error::custom)
            }
        }
    };
}

deserialize_via_value!(ServerMessage);
deserialize_via_value!(ClientMessage);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spec_examples_parse() {
        let auth = ClientMessage::parse(r#"{"type": "auth", "payload": {"code": "123456"}}"#);
        assert_eq!(
            auth,
            Ok(ClientMessage::Auth(Auth {
                code: "123456".into()
            }))
        );
        let result = ServerMessage::parse(
            r#"{"type": "auth_result", "payload": {"token": "...", "success": true}}"#,
        );
        assert_eq!(
            result,
            Ok(ServerMessage::AuthResult(AuthResult::success("...")))
        );
        let state = AgentState::from_value(
            json!({"status": "Running", "data": {"task_id": "550e8400-...", "iteration": 5}}),
        );
        assert_eq!(
            state,
            Ok(AgentState::Running(RunningData {
                task_id: "550e8400-...".into(),
                iteration: 5
            }))
        );
    }

    #[test]
    fn payload_null_or_absent_only_where_allowed() {
        for text in [r#"{"type":"ping"}"#, r#"{"type":"ping","payload":null}"#] {
            assert_eq!(ServerMessage::parse(text), Ok(ServerMessage::Ping));
        }
        assert!(ServerMessage::parse(r#"{"type":"ping","payload":{}}"#).is_err());
        assert!(ServerMessage::parse(r#"{"type":"message"}"#).is_err());
        assert!(ServerMessage::parse(r#"{"type":"message","payload":null}"#).is_err());
        assert!(ClientMessage::parse(r#"{"type":"pong","payload":null}"#).is_ok());
        assert!(ClientMessage::parse(r#"{"type":"auth","payload":["1"]}"#).is_err());
    }

    #[test]
    fn strictness() {
        assert!(matches!(
            ServerMessage::parse(r#"{"type":"auth"}"#),
            Err(ParseError::UnknownType(_))
        ));
        assert_eq!(ServerMessage::parse("[]"), Err(ParseError::NotAnObject));
        assert_eq!(
            ServerMessage::parse(r#"{"payload":null}"#),
            Err(ParseError::MissingType)
        );
        assert!(ServerMessage::parse("{").is_err());
        assert!(
            ServerMessage::parse(r#"{"type":"auth_result","payload":{"success":true}}"#).is_err()
        );
        assert!(
            ClientMessage::parse(
                r#"{"type":"message","payload":{"role":"assistant","content":"x"}}"#
            )
            .is_err()
        );
        assert!(ClientMessage::parse(r#"{"type":"command","payload":{"action":"jump"}}"#).is_err());
        assert!(AgentState::from_value(json!({"status":"Idle","data":{"task_id":"t"}})).is_err());
        assert!(AgentState::from_value(json!({"status":"Running"})).is_err());
    }

    #[test]
    fn writes_canonically() {
        assert_eq!(
            ServerMessage::Ping.to_json(),
            r#"{"type":"ping","payload":null}"#
        );
        assert_eq!(
            ClientMessage::PermissionResponse(PermissionResponse {
                id: "p1".into(),
                approved: true,
                remember: false
            })
            .to_value(),
            json!({"type":"permission_response","payload":{"id":"p1","approved":true,"remember":false}})
        );
        assert_eq!(
            AgentState::Idle.to_value(),
            json!({"status":"Idle","data":null})
        );
        assert_eq!(
            ServerMessage::AuthResult(AuthResult::failure("wrong code")).to_value(),
            json!({"type":"auth_result","payload":{"token":"","success":false,"error":"wrong code"}})
        );
    }
}
