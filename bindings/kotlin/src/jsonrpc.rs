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

/// An error answer in any dialect.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct JsonRpcRemoteError {
    /// The code.
    pub code: Code,
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

/// Peer configuration; [`json_rpc_config_default`] gives the defaults.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct JsonRpcConfig {
    /// Framing.
    pub framing: jsonrpc::Framing,
    /// Largest message accepted.
    pub max_message_bytes: u64,
    /// Most elements in a batch.
    pub batch_limit: u64,
    /// Most outgoing calls in flight.
    pub max_pending: u64,
    /// Most incoming calls waiting for an answer.
    pub max_incoming: u64,
    /// Call deadlines.
    pub timeouts: jsonrpc::TimeoutPolicy,
    /// A notification sent when a call is cancelled or times out (e.g. `$/cancelRequest`).
    pub cancel_notification: Option<String>,
    /// Answered or abandoned ids remembered.
    pub finished_memory: u64,
}

/// The peer defaults (NDJSON, 30 s for every method): JSON-RPC 2.0's. A sidecar peer wants
/// [`json_rpc_config_for`]`(Sidecar)`, whose per-method timeouts the sidecar spec sets.
#[uniffi::export]
pub fn json_rpc_config_default() -> JsonRpcConfig {
    jsonrpc::PeerConfig::default().into()
}

/// The defaults for a peer speaking `dialect`, as the core gives them: the sidecar's
/// per-method timeouts (`training.start` 300 s, `health.*` 10 s, ...) for `Sidecar`, 30 s
/// for every method otherwise.
#[uniffi::export]
pub fn json_rpc_config_for(dialect: &JsonRpcDialect) -> JsonRpcConfig {
    match dialect {
        JsonRpcDialect::JsonRpc2 => jsonrpc::PeerConfig::for_dialect(&JsonRpc2),
        JsonRpcDialect::Sidecar => jsonrpc::PeerConfig::for_dialect(&Sidecar),
        JsonRpcDialect::Gateway {
            token,
            epoch_unix_ms,
        } => jsonrpc::PeerConfig::for_dialect(&GatewayCommander::new(
            Token::new(token.clone()),
            *epoch_unix_ms,
        )),
    }
    .into()
}

/// The sidecar spec's timeouts (`health.*` 10 s, `inference.complete` 120 s, ...).
#[uniffi::export]
pub fn json_rpc_sidecar_timeouts() -> jsonrpc::TimeoutPolicy {
    jsonrpc::TimeoutPolicy::sidecar()
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
    /// The peer answered, but the answer could not be read.
    Malformed {
        /// What was wrong.
        reason: String,
    },
}

/// What the application should learn.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum JsonRpcEvent {
    /// The peer calls us: answer with `respond` or `respondError`.
    Request {
        /// The call's id.
        id: Id,
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
        id: Id,
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
        id: Id,
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
        id: Id,
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
    ) -> Result<Id> {
        let params = raw(params_json)?;
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.call(now_ms, &method, params, user)))
    }

    /// Calls `method` with the host's own id.
    pub fn call_with_id(
        &self,
        now_ms: u64,
        id: Id,
        method: String,
        params_json: Option<String>,
        user: u64,
    ) -> Result<()> {
        let params = raw(params_json)?;
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.call_with_id(now_ms, id, &method, params, user)))
    }

    /// Sends a notification.
    pub fn notify(&self, now_ms: u64, method: String, params_json: Option<String>) -> Result<()> {
        let params = raw(params_json)?;
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.notify(now_ms, &method, params)))
    }

    /// Answers the incoming request `id` with a result (JSON text).
    pub fn respond(&self, now_ms: u64, id: Id, result_json: String) -> Result<()> {
        let result = api(|| RawJson::from_string(result_json))?;
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.respond(now_ms, &id, result)))
    }

    /// Answers the incoming request `id` with an error.
    pub fn respond_error(&self, now_ms: u64, id: Id, error: JsonRpcRemoteError) -> Result<()> {
        let error = RemoteError::try_from(error)?;
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.respond_error(now_ms, &id, error)))
    }

    /// Reports progress on the incoming request `id` (dialects with progress messages).
    pub fn progress(&self, now_ms: u64, id: Id, progress_json: String) -> Result<()> {
        let progress = api(|| RawJson::from_string(progress_json))?;
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.progress(now_ms, &id, progress)))
    }

    /// Stops waiting for our call `id` (and sends the cancel notification, if configured).
    pub fn cancel(&self, now_ms: u64, id: Id) -> Result<()> {
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => api(|| p.cancel(now_ms, &id)))
    }

    /// Raw bytes from the stream (any split).
    /// Kotlin passes a direct `ByteBuffer` (position to limit), read in place for the call;
    /// `handleBytes(nowMs, ByteArray)` copies an array into one first.
    pub fn handle_bytes(&self, now_ms: u64, bytes: &[u8]) {
        let mut peer = lock(&self.inner);
        with_peer!(&mut *peer, p => p.handle_bytes(now_ms, bytes))
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
    pub fn is_pending(&self, id: Id) -> bool {
        let peer = lock(&self.inner);
        with_peer!(&*peer, p => p.is_pending(&id))
    }

    /// Counters.
    pub fn stats(&self) -> jsonrpc::PeerStats {
        let peer = lock(&self.inner);
        with_peer!(&*peer, p => p.stats())
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
        id: Id,
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
        id: Id,
        /// The result, JSON text.
        result_json: String,
    },
    /// An error answer.
    Error {
        /// The call's id.
        id: Id,
        /// The error.
        error: JsonRpcErrorObject,
    },
}

/// A message that is not valid, and the error answer it calls for.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct JsonRpcInvalid {
    /// The id of the error answer.
    pub id: Id,
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

fn text(raw: RawJson) -> String {
    raw.get().to_owned()
}

impl From<RemoteError> for JsonRpcRemoteError {
    fn from(e: RemoteError) -> Self {
        JsonRpcRemoteError {
            code: e.code,
            message: e.message,
            data_json: e.data.map(text),
        }
    }
}

impl TryFrom<JsonRpcRemoteError> for RemoteError {
    type Error = crate::DeskwireError;

    fn try_from(e: JsonRpcRemoteError) -> Result<Self> {
        Ok(RemoteError {
            code: e.code,
            message: e.message,
            data: raw(e.data_json)?,
        })
    }
}

impl From<jsonrpc::PeerConfig> for JsonRpcConfig {
    fn from(c: jsonrpc::PeerConfig) -> Self {
        JsonRpcConfig {
            framing: c.framing,
            max_message_bytes: c.max_message_bytes as u64,
            batch_limit: c.batch_limit as u64,
            max_pending: c.max_pending as u64,
            max_incoming: c.max_incoming as u64,
            timeouts: c.timeouts,
            cancel_notification: c.cancel_notification,
            finished_memory: c.finished_memory as u64,
        }
    }
}

impl From<JsonRpcConfig> for jsonrpc::PeerConfig {
    fn from(c: JsonRpcConfig) -> Self {
        jsonrpc::PeerConfig {
            framing: c.framing,
            max_message_bytes: to_usize(c.max_message_bytes),
            batch_limit: to_usize(c.batch_limit),
            max_pending: to_usize(c.max_pending),
            max_incoming: to_usize(c.max_incoming),
            timeouts: c.timeouts,
            cancel_notification: c.cancel_notification,
            finished_memory: to_usize(c.finished_memory),
            // Not in JsonRpcConfig yet: the core's default cap on outputs waiting for the host.
            max_queued: jsonrpc::PeerConfig::default().max_queued,
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
            jsonrpc::CallError::Malformed(reason) => JsonRpcCallError::Malformed { reason },
            other => unmapped!(other),
        }
    }
}

impl From<jsonrpc::PeerEvent> for JsonRpcEvent {
    fn from(e: jsonrpc::PeerEvent) -> Self {
        use jsonrpc::PeerEvent as E;
        match e {
            E::Request { id, method, params } => JsonRpcEvent::Request {
                id,
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
                id,
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
                id,
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
                id,
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

impl From<message::Message> for JsonRpcMessage {
    fn from(m: message::Message) -> Self {
        match m {
            message::Message::Request { id, method, params } => JsonRpcMessage::Request {
                id,
                method,
                params_json: params.map(text),
            },
            message::Message::Notification { method, params } => JsonRpcMessage::Notification {
                method,
                params_json: params.map(text),
            },
            message::Message::Response { id, result } => JsonRpcMessage::Response {
                id,
                result_json: text(result),
            },
            message::Message::Error { id, error } => JsonRpcMessage::Error {
                id,
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
                id,
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
                id,
                result: api(|| RawJson::from_string(result_json))?,
            },
            JsonRpcMessage::Error { id, error } => message::Message::Error {
                id,
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
            id,
            code: error.code,
            reason: invalid.to_string(),
        }
    }
}
