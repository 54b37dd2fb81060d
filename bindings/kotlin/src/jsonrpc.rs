//! The JSON-RPC peer (one correlation engine over a dialect: JSON-RPC 2.0 for REXD, the
//! sidecar's `{id, method, params}`, the gateway envelope) and the JSON-RPC 2.0 message model.
//!
//! Params, results and progress are whatever JSON the method defines, so they cross as JSON
//! text (`*_json` fields); everything around them is typed.

use std::sync::{Arc, Mutex};

use deskwire::gateway::Token;
use deskwire::gateway::commander::GatewayCommander;
use deskwire::jsonrpc::{self, Code, Id, JsonRpc2, Peer, RawJson, RemoteError, Sidecar, message};

use crate::error::{Result, api};
use crate::{lock, to_usize};

/// A request id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum JsonRpcId {
    /// An integer id.
    Number {
        /// The value.
        value: i64,
    },
    /// A string id.
    Text {
        /// The value.
        value: String,
    },
    /// `null`.
    Null,
}

/// An error code as the dialect carries it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum JsonRpcCode {
    /// JSON-RPC's numeric codes.
    Number {
        /// The code.
        value: i64,
    },
    /// The sidecar's `SCREAMING_SNAKE_CASE` names.
    Name {
        /// The name.
        value: String,
    },
}

/// An error answer in any dialect.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct JsonRpcRemoteError {
    /// The code.
    pub code: JsonRpcCode,
    /// The message.
    pub message: String,
    /// Extra data, JSON text (JSON-RPC 2.0 only).
    #[uniffi(default = None)]
    pub data_json: Option<String>,
}

/// Which JSON protocol the peer speaks.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum JsonRpcDialect {
    /// Strict JSON-RPC 2.0 (REXD, MCP, LSP).
    JsonRpc2,
    /// The sidecar's `{id, method, params}` / `{id, result | error | progress}`.
    Sidecar,
    /// The gateway envelope, Commander side, authenticating with `token`; `epoch_unix_ms` is
    /// the wall-clock time at the host's monotonic instant 0 (for the `ts` stamps).
    Gateway {
        /// The bearer token.
        token: String,
        /// Unix ms at monotonic 0.
        epoch_unix_ms: u64,
    },
}

/// How messages are delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum JsonRpcFraming {
    /// One message per line.
    Ndjson,
    /// `Content-Length` headers (LSP).
    ContentLength,
}

/// A timeout for the methods starting with `prefix`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct JsonRpcTimeoutRule {
    /// The method prefix.
    pub prefix: String,
    /// Time without an answer or progress.
    pub timeout_ms: u64,
    /// Time at most, whatever the progress.
    pub max_total_ms: u64,
}

/// Per-method timeouts (the longest matching prefix wins).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct JsonRpcTimeoutPolicy {
    /// The rules.
    pub rules: Vec<JsonRpcTimeoutRule>,
    /// The timeout of other methods.
    pub default_timeout_ms: u64,
    /// Timeouts a call may take in all when its rule does not say.
    pub default_max_total_factor: u64,
}

/// Peer configuration; [`json_rpc_config_default`] gives the defaults.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct JsonRpcConfig {
    /// Framing.
    pub framing: JsonRpcFraming,
    /// Largest message accepted.
    pub max_message_bytes: u64,
    /// Most elements in a batch.
    pub batch_limit: u64,
    /// Most outgoing calls in flight.
    pub max_pending: u64,
    /// Most incoming calls waiting for an answer.
    pub max_incoming: u64,
    /// Call deadlines.
    pub timeouts: JsonRpcTimeoutPolicy,
    /// A notification sent when a call is cancelled or times out (e.g. `$/cancelRequest`).
    pub cancel_notification: Option<String>,
    /// Answered or abandoned ids remembered.
    pub finished_memory: u64,
}

/// The peer defaults (NDJSON, 30 s for every method).
#[uniffi::export]
pub fn json_rpc_config_default() -> JsonRpcConfig {
    jsonrpc::PeerConfig::default().into()
}

/// The sidecar spec's timeouts (`health.*` 10 s, `inference.complete` 120 s, ...).
#[uniffi::export]
pub fn json_rpc_sidecar_timeouts() -> JsonRpcTimeoutPolicy {
    jsonrpc::TimeoutPolicy::sidecar().into()
}

/// Why a call of ours ended without a result.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum JsonRpcCallError {
    /// The peer answered with an error.
    Remote {
        /// The error.
        error: JsonRpcRemoteError,
    },
    /// No answer or progress before the deadline.
    Timeout,
}

/// What the application should learn.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum JsonRpcEvent {
    /// The peer calls us: answer with `respond` or `respondError`.
    Request {
        /// The call's id.
        id: JsonRpcId,
        /// The method.
        method: String,
        /// The params, JSON text.
        params_json: Option<String>,
    },
    /// The peer notifies us.
    Notification {
        /// The method.
        method: String,
        /// The params, JSON text.
        params_json: Option<String>,
    },
    /// A call of ours succeeded.
    Response {
        /// The call's id.
        id: JsonRpcId,
        /// Its method.
        method: String,
        /// The user data given to `call`.
        user: u64,
        /// The result, JSON text.
        result_json: String,
    },
    /// A call of ours failed.
    Failed {
        /// The call's id.
        id: JsonRpcId,
        /// Its method.
        method: String,
        /// The user data.
        user: u64,
        /// Why.
        error: JsonRpcCallError,
    },
    /// A call of ours reported progress.
    Progress {
        /// The call's id.
        id: JsonRpcId,
        /// Its method.
        method: String,
        /// The user data.
        user: u64,
        /// The progress, JSON text.
        progress_json: String,
    },
    /// The peer sent something unreadable.
    Malformed {
        /// What was wrong.
        reason: String,
    },
}

/// What the peer wants next.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum JsonRpcOutput {
    /// Write these bytes (framing included) to the stream.
    Transmit {
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Tell the app.
    Event {
        /// The event.
        event: JsonRpcEvent,
    },
    /// Nothing to do before this instant unless input arrives.
    Timeout {
        /// The deadline (ms).
        deadline_ms: u64,
    },
}

/// The peer's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct JsonRpcStats {
    /// Frames read.
    pub frames_in: u64,
    /// Frames written.
    pub frames_out: u64,
    /// Invalid messages.
    pub malformed: u64,
    /// Framing errors.
    pub framing_errors: u64,
    /// Answers for unknown ids.
    pub unmatched_responses: u64,
    /// Answers after a cancel or timeout.
    pub late_responses: u64,
    /// Calls timed out.
    pub timeouts: u64,
    /// Calls cancelled.
    pub cancelled: u64,
    /// Incoming requests refused.
    pub refused_requests: u64,
    /// Outgoing calls pending now.
    pub pending: u64,
    /// Incoming requests waiting now.
    pub incoming: u64,
    /// Bytes held now.
    pub bytes_buffered: u64,
}

enum AnyPeer {
    JsonRpc2(Peer<JsonRpc2>),
    Sidecar(Peer<Sidecar>),
    Gateway(Peer<GatewayCommander>),
}

/// Calls `$body` on the peer whatever its dialect.
macro_rules! with_peer {
    ($peer:expr, $p:ident => $body:expr) => {
        match $peer {
            AnyPeer::JsonRpc2($p) => $body,
            AnyPeer::Sidecar($p) => $body,
            AnyPeer::Gateway($p) => $body,
        }
    };
}

/// A JSON-RPC peer over raw stream bytes: calls out, answers in, requests in, answers out.
#[derive(uniffi::Object)]
pub struct JsonRpcPeer {
    inner: Mutex<AnyPeer>,
}

fn raw(json: Option<String>) -> Result<Option<RawJson>> {
    json.map(|text| api(|| RawJson::from_string(text)))
        .transpose()
}

#[uniffi::export]
impl JsonRpcPeer {
    /// A peer speaking `dialect`; `seed` fixes generated ids.
    #[uniffi::constructor]
    pub fn new(dialect: JsonRpcDialect, config: JsonRpcConfig, seed: u64) -> Arc<Self> {
        let config = jsonrpc::PeerConfig::from(config);
        let peer = match dialect {
            JsonRpcDialect::JsonRpc2 => AnyPeer::JsonRpc2(Peer::new(JsonRpc2, config, seed)),
            JsonRpcDialect::Sidecar => AnyPeer::Sidecar(Peer::new(Sidecar, config, seed)),
            JsonRpcDialect::Gateway {
                token,
                epoch_unix_ms,
            } => AnyPeer::Gateway(Peer::new(
                GatewayCommander::new(Token::new(token), epoch_unix_ms),
                config,
                seed,
            )),
        };
        Arc::new(JsonRpcPeer {
            inner: Mutex::new(peer),
        })
    }

    /// Calls `method` (params: JSON text) with a generated id; `user` comes back with the answer.
    pub fn call(
        &self,
        now_ms: u64,
        method: String,
        params_json: Option<String>,
        user: u64,
    ) -> Result<JsonRpcId> {
        let params = raw(params_json)?;
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.call(now_ms, &method, params, user))).map(Into::into)
    }

    /// Calls `method` with the host's own id.
    pub fn call_with_id(
        &self,
        now_ms: u64,
        id: JsonRpcId,
        method: String,
        params_json: Option<String>,
        user: u64,
    ) -> Result<()> {
        let params = raw(params_json)?;
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.call_with_id(now_ms, id.into(), &method, params, user)))
    }

    /// Sends a notification.
    pub fn notify(&self, now_ms: u64, method: String, params_json: Option<String>) -> Result<()> {
        let params = raw(params_json)?;
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.notify(now_ms, &method, params)))
    }

    /// Answers the incoming request `id` with a result (JSON text).
    pub fn respond(&self, now_ms: u64, id: JsonRpcId, result_json: String) -> Result<()> {
        let result = api(|| RawJson::from_string(result_json))?;
        let id = Id::from(id);
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.respond(now_ms, &id, result)))
    }

    /// Answers the incoming request `id` with an error.
    pub fn respond_error(
        &self,
        now_ms: u64,
        id: JsonRpcId,
        error: JsonRpcRemoteError,
    ) -> Result<()> {
        let error = RemoteError::try_from(error)?;
        let id = Id::from(id);
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.respond_error(now_ms, &id, error)))
    }

    /// Reports progress on the incoming request `id` (dialects with progress messages).
    pub fn progress(&self, now_ms: u64, id: JsonRpcId, progress_json: String) -> Result<()> {
        let progress = api(|| RawJson::from_string(progress_json))?;
        let id = Id::from(id);
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.progress(now_ms, &id, progress)))
    }

    /// Stops waiting for our call `id` (and sends the cancel notification, if configured).
    pub fn cancel(&self, now_ms: u64, id: JsonRpcId) -> Result<()> {
        let id = Id::from(id);
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.cancel(now_ms, &id)))
    }

    /// Raw bytes from the stream (any split).
    pub fn handle_bytes(&self, now_ms: u64, bytes: Vec<u8>) {
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => p.handle_bytes(now_ms, &bytes))
    }

    /// Does what is due by `now_ms`.
    pub fn handle_timeout(&self, now_ms: u64) {
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => p.handle_timeout(now_ms))
    }

    /// The next thing to do; call until it answers `Timeout`.
    pub fn poll_output(&self, now_ms: u64) -> JsonRpcOutput {
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => p.poll_output(now_ms)).into()
    }

    /// Whether our call `id` waits for an answer.
    pub fn is_pending(&self, id: JsonRpcId) -> bool {
        let id = Id::from(id);
        let peer = lock(&self.inner);
        with_peer!(&*peer, p => p.is_pending(&id))
    }

    /// Counters.
    pub fn stats(&self) -> JsonRpcStats {
        let peer = lock(&self.inner);
        with_peer!(&*peer, p => p.stats()).into()
    }
}

// ---------------------------------------------------------------------------------------------
// The JSON-RPC 2.0 message model

/// A JSON-RPC 2.0 error object.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct JsonRpcErrorObject {
    /// The code.
    pub code: i64,
    /// The message.
    pub message: String,
    /// Extra data, JSON text.
    #[uniffi(default = None)]
    pub data_json: Option<String>,
}

/// One JSON-RPC 2.0 message.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum JsonRpcMessage {
    /// A call that wants an answer.
    Request {
        /// Its id.
        id: JsonRpcId,
        /// The method.
        method: String,
        /// The params, JSON text as written.
        params_json: Option<String>,
    },
    /// A call without an answer.
    Notification {
        /// The method.
        method: String,
        /// The params, JSON text.
        params_json: Option<String>,
    },
    /// A result.
    Response {
        /// The call's id.
        id: JsonRpcId,
        /// The result, JSON text.
        result_json: String,
    },
    /// An error answer.
    Error {
        /// The call's id.
        id: JsonRpcId,
        /// The error.
        error: JsonRpcErrorObject,
    },
}

/// A message that is not valid, and the error answer it calls for.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct JsonRpcInvalid {
    /// The id of the error answer.
    pub id: JsonRpcId,
    /// The error code of the answer (-32700 parse error, -32600 invalid request, ...).
    pub code: i64,
    /// What is wrong.
    pub reason: String,
}

/// One element of a batch.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum JsonRpcBatchItem {
    /// A valid message.
    Message {
        /// The message.
        message: JsonRpcMessage,
    },
    /// An invalid element.
    Invalid {
        /// Why, and the answer it calls for.
        invalid: JsonRpcInvalid,
    },
}

/// What one frame holds.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum JsonRpcParsed {
    /// One message.
    Single {
        /// The message.
        message: JsonRpcMessage,
    },
    /// A batch.
    Batch {
        /// Its elements.
        items: Vec<JsonRpcBatchItem>,
    },
    /// Not a valid frame.
    Invalid {
        /// Why, and the answer it calls for.
        invalid: JsonRpcInvalid,
    },
}

/// Reads one JSON-RPC 2.0 frame (a message or a batch of at most `batch_limit`).
#[uniffi::export]
pub fn parse_json_rpc(frame: Vec<u8>, batch_limit: u64) -> JsonRpcParsed {
    match message::parse(&frame, to_usize(batch_limit)) {
        Ok(message::Parsed::Single(m)) => JsonRpcParsed::Single { message: m.into() },
        Ok(message::Parsed::Batch(items)) => JsonRpcParsed::Batch {
            items: items
                .into_iter()
                .map(|item| match item {
                    Ok(m) => JsonRpcBatchItem::Message { message: m.into() },
                    Err(e) => JsonRpcBatchItem::Invalid { invalid: e.into() },
                })
                .collect(),
        },
        Err(e) => JsonRpcParsed::Invalid { invalid: e.into() },
    }
}

/// Writes a message in its canonical form (`"jsonrpc":"2.0"` first).
#[uniffi::export]
pub fn json_rpc_message_to_json(message: JsonRpcMessage) -> Result<String> {
    Ok(message::Message::try_from(message)?.to_json())
}

// ---------------------------------------------------------------------------------------------
// Conversions

impl From<Id> for JsonRpcId {
    fn from(id: Id) -> Self {
        match id {
            Id::Number(value) => JsonRpcId::Number { value },
            Id::String(value) => JsonRpcId::Text { value },
            Id::Null => JsonRpcId::Null,
        }
    }
}

impl From<JsonRpcId> for Id {
    fn from(id: JsonRpcId) -> Self {
        match id {
            JsonRpcId::Number { value } => Id::Number(value),
            JsonRpcId::Text { value } => Id::String(value),
            JsonRpcId::Null => Id::Null,
        }
    }
}

fn text(raw: RawJson) -> String {
    raw.get().to_owned()
}

impl From<RemoteError> for JsonRpcRemoteError {
    fn from(e: RemoteError) -> Self {
        JsonRpcRemoteError {
            code: match e.code {
                Code::Number(value) => JsonRpcCode::Number { value },
                Code::Name(value) => JsonRpcCode::Name { value },
            },
            message: e.message,
            data_json: e.data.map(text),
        }
    }
}

impl TryFrom<JsonRpcRemoteError> for RemoteError {
    type Error = crate::DeskwireError;

    fn try_from(e: JsonRpcRemoteError) -> Result<Self> {
        Ok(RemoteError {
            code: match e.code {
                JsonRpcCode::Number { value } => Code::Number(value),
                JsonRpcCode::Name { value } => Code::Name(value),
            },
            message: e.message,
            data: raw(e.data_json)?,
        })
    }
}

impl From<jsonrpc::PeerConfig> for JsonRpcConfig {
    fn from(c: jsonrpc::PeerConfig) -> Self {
        JsonRpcConfig {
            framing: match c.framing {
                jsonrpc::Framing::Ndjson => JsonRpcFraming::Ndjson,
                jsonrpc::Framing::ContentLength => JsonRpcFraming::ContentLength,
            },
            max_message_bytes: c.max_message_bytes as u64,
            batch_limit: c.batch_limit as u64,
            max_pending: c.max_pending as u64,
            max_incoming: c.max_incoming as u64,
            timeouts: c.timeouts.into(),
            cancel_notification: c.cancel_notification,
            finished_memory: c.finished_memory as u64,
        }
    }
}

impl From<JsonRpcConfig> for jsonrpc::PeerConfig {
    fn from(c: JsonRpcConfig) -> Self {
        jsonrpc::PeerConfig {
            framing: match c.framing {
                JsonRpcFraming::Ndjson => jsonrpc::Framing::Ndjson,
                JsonRpcFraming::ContentLength => jsonrpc::Framing::ContentLength,
            },
            max_message_bytes: to_usize(c.max_message_bytes),
            batch_limit: to_usize(c.batch_limit),
            max_pending: to_usize(c.max_pending),
            max_incoming: to_usize(c.max_incoming),
            timeouts: c.timeouts.into(),
            cancel_notification: c.cancel_notification,
            finished_memory: to_usize(c.finished_memory),
            // Not in JsonRpcConfig yet: the core's default cap on outputs waiting for the host.
            max_queued: jsonrpc::PeerConfig::default().max_queued,
        }
    }
}

impl From<jsonrpc::TimeoutPolicy> for JsonRpcTimeoutPolicy {
    fn from(t: jsonrpc::TimeoutPolicy) -> Self {
        JsonRpcTimeoutPolicy {
            rules: t
                .rules
                .into_iter()
                .map(|r| JsonRpcTimeoutRule {
                    prefix: r.prefix,
                    timeout_ms: r.timeout_ms,
                    max_total_ms: r.max_total_ms,
                })
                .collect(),
            default_timeout_ms: t.default_timeout_ms,
            default_max_total_factor: t.default_max_total_factor,
        }
    }
}

impl From<JsonRpcTimeoutPolicy> for jsonrpc::TimeoutPolicy {
    fn from(t: JsonRpcTimeoutPolicy) -> Self {
        jsonrpc::TimeoutPolicy {
            rules: t
                .rules
                .into_iter()
                .map(|r| jsonrpc::TimeoutRule {
                    prefix: r.prefix,
                    timeout_ms: r.timeout_ms,
                    max_total_ms: r.max_total_ms,
                })
                .collect(),
            default_timeout_ms: t.default_timeout_ms,
            default_max_total_factor: t.default_max_total_factor,
        }
    }
}

impl From<jsonrpc::CallError> for JsonRpcCallError {
    fn from(e: jsonrpc::CallError) -> Self {
        match e {
            jsonrpc::CallError::Remote(error) => JsonRpcCallError::Remote {
                error: error.into(),
            },
            jsonrpc::CallError::Timeout => JsonRpcCallError::Timeout,
            other => unmapped!(other),
        }
    }
}

impl From<jsonrpc::PeerEvent> for JsonRpcEvent {
    fn from(e: jsonrpc::PeerEvent) -> Self {
        use jsonrpc::PeerEvent as E;
        match e {
            E::Request { id, method, params } => JsonRpcEvent::Request {
                id: id.into(),
                method,
                params_json: params.map(text),
            },
            E::Notification { method, params } => JsonRpcEvent::Notification {
                method,
                params_json: params.map(text),
            },
            E::Response {
                id,
                method,
                user,
                result,
            } => JsonRpcEvent::Response {
                id: id.into(),
                method,
                user,
                result_json: text(result),
            },
            E::Failed {
                id,
                method,
                user,
                error,
            } => JsonRpcEvent::Failed {
                id: id.into(),
                method,
                user,
                error: error.into(),
            },
            E::Progress {
                id,
                method,
                user,
                progress,
            } => JsonRpcEvent::Progress {
                id: id.into(),
                method,
                user,
                progress_json: text(progress),
            },
            E::Malformed { reason } => JsonRpcEvent::Malformed { reason },
            other => unmapped!(other),
        }
    }
}

impl From<jsonrpc::Output> for JsonRpcOutput {
    fn from(o: jsonrpc::Output) -> Self {
        match o {
            jsonrpc::Output::Transmit(bytes) => JsonRpcOutput::Transmit { bytes },
            jsonrpc::Output::Event(e) => JsonRpcOutput::Event { event: e.into() },
            jsonrpc::Output::Timeout(deadline_ms) => JsonRpcOutput::Timeout { deadline_ms },
        }
    }
}

impl From<jsonrpc::PeerStats> for JsonRpcStats {
    fn from(s: jsonrpc::PeerStats) -> Self {
        JsonRpcStats {
            frames_in: s.frames_in,
            frames_out: s.frames_out,
            malformed: s.malformed,
            framing_errors: s.framing_errors,
            unmatched_responses: s.unmatched_responses,
            late_responses: s.late_responses,
            timeouts: s.timeouts,
            cancelled: s.cancelled,
            refused_requests: s.refused_requests,
            pending: s.pending,
            incoming: s.incoming,
            bytes_buffered: s.bytes_buffered,
        }
    }
}

impl From<message::Message> for JsonRpcMessage {
    fn from(m: message::Message) -> Self {
        match m {
            message::Message::Request { id, method, params } => JsonRpcMessage::Request {
                id: id.into(),
                method,
                params_json: params.map(text),
            },
            message::Message::Notification { method, params } => JsonRpcMessage::Notification {
                method,
                params_json: params.map(text),
            },
            message::Message::Response { id, result } => JsonRpcMessage::Response {
                id: id.into(),
                result_json: text(result),
            },
            message::Message::Error { id, error } => JsonRpcMessage::Error {
                id: id.into(),
                error: JsonRpcErrorObject {
                    code: error.code,
                    message: error.message,
                    data_json: error.data.map(text),
                },
            },
        }
    }
}

impl TryFrom<JsonRpcMessage> for message::Message {
    type Error = crate::DeskwireError;

    fn try_from(m: JsonRpcMessage) -> Result<Self> {
        Ok(match m {
            JsonRpcMessage::Request {
                id,
                method,
                params_json,
            } => message::Message::Request {
                id: id.into(),
                method,
                params: raw(params_json)?,
            },
            JsonRpcMessage::Notification {
                method,
                params_json,
            } => message::Message::Notification {
                method,
                params: raw(params_json)?,
            },
            JsonRpcMessage::Response { id, result_json } => message::Message::Response {
                id: id.into(),
                result: api(|| RawJson::from_string(result_json))?,
            },
            JsonRpcMessage::Error { id, error } => message::Message::Error {
                id: id.into(),
                error: message::ErrorObject {
                    code: error.code,
                    message: error.message,
                    data: raw(error.data_json)?,
                },
            },
        })
    }
}

impl From<message::Invalid> for JsonRpcInvalid {
    fn from(invalid: message::Invalid) -> Self {
        let (id, error) = invalid.to_error();
        JsonRpcInvalid {
            id: id.into(),
            code: error.code,
            reason: invalid.to_string(),
        }
    }
}
