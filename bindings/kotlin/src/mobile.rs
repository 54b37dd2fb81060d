//! The mobile companion (`docs/sidecar-and-mobile.md`): the phone's engine
//! ([`MobileClient`]), the desktop's engine ([`MobileServer`]) and the messages between them.
//!
//! The messages, events, outputs, states and counters are the core's own types
//! (`deskwire::mobile`, Kotlin package `dev.deskwire.core`); only the two configurations are
//! mirrored here, for their `usize` fields.

use std::sync::{Arc, Mutex};

use deskwire::mobile::{self as core, client, server};

use crate::error::{Result, api};
use crate::{lock, to_usize};

/// Reads a server frame (`{"type", "payload"}`) the way the phone's engine does.
#[uniffi::export]
pub fn parse_server_message(text: String) -> Result<core::ServerMessage> {
    api(|| core::ServerMessage::parse(&text))
}

/// Writes a server message as its canonical JSON text frame.
#[uniffi::export]
pub fn server_message_to_json(message: core::ServerMessage) -> String {
    message.to_json()
}

/// Reads a client frame the way the desktop's engine does.
#[uniffi::export]
pub fn parse_client_message(text: String) -> Result<core::ClientMessage> {
    api(|| core::ClientMessage::parse(&text))
}

/// Writes a client message as its canonical JSON text frame.
#[uniffi::export]
pub fn client_message_to_json(message: core::ClientMessage) -> String {
    message.to_json()
}

/// Reads an agent state (`{"status", "data"}`).
#[uniffi::export]
pub fn parse_agent_state(json: String) -> Result<core::AgentState> {
    let value: serde_json::Value = api(|| serde_json::from_str::<serde_json::Value>(&json))?;
    api(|| core::AgentState::from_value(value))
}

/// Writes an agent state as JSON.
#[uniffi::export]
pub fn agent_state_to_json(state: core::AgentState) -> String {
    state.to_value().to_string()
}

/// The `Authorization` header value for a bearer token (`Bearer <token>`).
#[uniffi::export]
pub fn authorization_header(token: String) -> String {
    core::authorization_header(&token)
}

/// The token in an `Authorization` header value, or `null` for another scheme.
#[uniffi::export]
pub fn bearer_token(header: String) -> Option<String> {
    core::bearer_token(&header).map(str::to_owned)
}

/// Whether a pairing code has the right shape (six ASCII digits).
#[uniffi::export]
pub fn is_valid_pairing_code(code: String) -> bool {
    core::is_valid_code(&code)
}

/// The spec's default port (9120).
#[uniffi::export]
pub fn mobile_default_port() -> u16 {
    core::DEFAULT_PORT
}

/// The spec's default path (`/ws`).
#[uniffi::export]
pub fn mobile_default_path() -> String {
    core::DEFAULT_PATH.to_owned()
}

// ---------------------------------------------------------------------------------------------
// The phone's engine

/// The phone's configuration.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct MobileClientConfig {
    /// Delays before reconnect attempts 1, 2, ... (spec: 1, 2, 4, 8, 16 s).
    pub backoff_ms: Vec<u64>,
    /// The delay of later attempts and the cap of all (spec: 30 s).
    pub max_backoff_ms: u64,
    /// Larger frames from the server are ignored (counted).
    pub max_message_bytes: u64,
    /// Permission requests shown at most.
    pub max_pending_permissions: u64,
    /// Outputs queued at most when the host does not drain.
    pub max_queued: u64,
    /// Reconnect when the server is silent this long (`null`: never).
    pub server_timeout_ms: Option<u64>,
}

/// The spec's defaults for the phone.
#[uniffi::export]
pub fn mobile_client_config_default() -> MobileClientConfig {
    client::Config::default().into()
}

/// The delay before reconnect attempt `attempt` (1-based) under `config`.
#[uniffi::export]
pub fn mobile_backoff_ms(config: MobileClientConfig, attempt: u32) -> u64 {
    client::Config::from(config).backoff(attempt)
}

/// The phone's end: pairing code → token → reconnect with the bearer token and the spec's
/// backoff, automatic `pong`, state sync, permission prompts, commands and chat.
#[derive(uniffi::Object)]
pub struct MobileClient {
    inner: Mutex<client::Client>,
}

#[uniffi::export]
impl MobileClient {
    /// A client; `token` is the one stored from an earlier pairing, if any.
    #[uniffi::constructor]
    pub fn new(config: MobileClientConfig, token: Option<String>) -> Arc<Self> {
        Arc::new(MobileClient {
            inner: Mutex::new(client::Client::new(config.into(), token)),
        })
    }

    /// Connects with the stored token.
    pub fn start(&self, now_ms: u64) -> Result<()> {
        api(|| lock(&self.inner).start(now_ms))
    }

    /// Pairs with the six-digit code the desktop shows.
    pub fn pair(&self, now_ms: u64, code: String) -> Result<()> {
        api(|| lock(&self.inner).pair(now_ms, &code))
    }

    /// Goes offline and stays there.
    pub fn stop(&self, now_ms: u64) {
        lock(&self.inner).stop(now_ms)
    }

    /// Forgets the token (the user unpaired).
    pub fn forget_token(&self) {
        lock(&self.inner).forget_token()
    }

    /// The WebSocket upgrade succeeded (101).
    pub fn connected(&self, now_ms: u64) -> Result<()> {
        api(|| lock(&self.inner).connected(now_ms))
    }

    /// The connection ended or the attempt failed.
    pub fn disconnected(&self, now_ms: u64, reason: client::DisconnectReason) {
        lock(&self.inner).disconnected(now_ms, reason)
    }

    /// One text frame from the server.
    pub fn handle_text(&self, now_ms: u64, text: String) {
        lock(&self.inner).handle_text(now_ms, &text)
    }

    /// Does what is due by `now_ms`.
    pub fn handle_timeout(&self, now_ms: u64) {
        lock(&self.inner).handle_timeout(now_ms)
    }

    /// Answers a permission request.
    pub fn respond_permission(
        &self,
        now_ms: u64,
        id: String,
        approved: bool,
        remember: bool,
    ) -> Result<()> {
        api(|| lock(&self.inner).respond_permission(now_ms, &id, approved, remember))
    }

    /// Sends an agent command.
    pub fn send_command(&self, now_ms: u64, command: core::Command) -> Result<()> {
        api(|| lock(&self.inner).send_command(now_ms, command))
    }

    /// Sends a chat message.
    pub fn send_message(&self, now_ms: u64, content: String) -> Result<()> {
        api(|| lock(&self.inner).send_message(now_ms, &content))
    }

    /// The next thing to do; call until it answers `Timeout`.
    pub fn poll_output(&self, now_ms: u64) -> client::Output {
        lock(&self.inner).poll_output(now_ms)
    }

    /// The bearer token (after pairing, or the one given).
    pub fn token(&self) -> Option<String> {
        lock(&self.inner).token().map(str::to_owned)
    }

    /// The last agent state the server sent.
    pub fn agent_state(&self) -> Option<core::AgentState> {
        lock(&self.inner).agent_state().cloned()
    }

    /// Whether the session is up and the state arrived.
    pub fn is_synced(&self) -> bool {
        lock(&self.inner).is_synced()
    }

    /// Where the client is.
    pub fn connection_state(&self) -> client::ConnectionState {
        lock(&self.inner).connection_state()
    }

    /// Ids of the permission requests waiting, oldest first.
    pub fn pending_permissions(&self) -> Vec<String> {
        lock(&self.inner)
            .pending_permissions()
            .map(str::to_owned)
            .collect()
    }

    /// Counters.
    pub fn stats(&self) -> client::Stats {
        lock(&self.inner).stats()
    }

    /// The configuration in force.
    pub fn config(&self) -> MobileClientConfig {
        lock(&self.inner).config().clone().into()
    }
}

// ---------------------------------------------------------------------------------------------
// The desktop's engine

/// The desktop's configuration.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct MobileServerConfig {
    /// How long a pairing code stays valid.
    pub pairing_code_ttl_ms: u64,
    /// Wrong codes (in all) before the code is burnt.
    pub max_pairing_attempts: u32,
    /// The wait after the first wrong code in a row; each further one doubles it, across
    /// codes, until a pairing succeeds.
    pub pairing_backoff_ms: u64,
    /// The longest such wait.
    pub max_pairing_backoff_ms: u64,
    /// How long an unpaired connection may take to pair.
    pub auth_timeout_ms: u64,
    /// Connections without a token open at most (counted apart from `max_connections`).
    pub max_unpaired_connections: u64,
    /// Time between pings.
    pub ping_interval_ms: u64,
    /// Pings in a row without a pong before closing.
    pub max_missed_pongs: u32,
    /// How long a permission request waits.
    pub permission_timeout_ms: u64,
    /// Permission requests waiting at most.
    pub max_pending_permissions: u64,
    /// Answered permission ids remembered.
    pub answered_memory: u64,
    /// Authenticated connections open at most.
    pub max_connections: u64,
    /// Tokens kept at most; at the cap pairing and `add_token` are refused (none is evicted).
    pub max_tokens: u64,
    /// Larger frames are ignored.
    pub max_message_bytes: u64,
    /// Outputs queued at most when the host does not drain.
    pub max_queued: u64,
}

/// deskwire's defaults for the desktop.
#[uniffi::export]
pub fn mobile_server_config_default() -> MobileServerConfig {
    server::Config::default().into()
}

/// The desktop's end for any number of phones: pairing codes, tokens, state sync, pings,
/// permission prompts, broadcasts.
#[derive(uniffi::Object)]
pub struct MobileServer {
    inner: Mutex<server::Server>,
}

#[uniffi::export]
impl MobileServer {
    /// A server. `entropy` is 32 bytes from a secure random source (`SecureRandom`): pairing
    /// codes and tokens are secrets made from it. The same bytes replay the same codes (tests).
    #[uniffi::constructor]
    pub fn new(config: MobileServerConfig, entropy: Vec<u8>) -> Result<Arc<Self>> {
        let entropy = crate::entropy(entropy)?;
        Ok(Arc::new(MobileServer {
            inner: Mutex::new(server::Server::new(config.into(), entropy)),
        }))
    }

    /// Opens pairing with a new six-digit code to show; only on the user's action. Throws
    /// `TokensFull` while the token table is full.
    pub fn start_pairing(&self, now_ms: u64) -> Result<String> {
        api(|| lock(&self.inner).start_pairing(now_ms))
    }

    /// Withdraws the pairing code.
    pub fn cancel_pairing(&self) {
        lock(&self.inner).cancel_pairing()
    }

    /// The code to show, while one is valid.
    pub fn pairing_code(&self, now_ms: u64) -> Option<String> {
        lock(&self.inner).pairing_code(now_ms).map(str::to_owned)
    }

    /// Accepts a token issued earlier (restored from storage); throws `TokensFull` at the cap.
    pub fn add_token(&self, token: String) -> Result<()> {
        api(|| lock(&self.inner).add_token(&token))
    }

    /// Stops accepting `token`; whether it was known. The connections that used it are closed
    /// (`Close` outputs with `Revoked`).
    pub fn revoke_token(&self, token: String) -> bool {
        lock(&self.inner).revoke_token(&token)
    }

    /// An upgrade request on `conn` with the bearer token of its `Authorization` header.
    pub fn open(
        &self,
        now_ms: u64,
        conn: server::ConnId,
        bearer: Option<String>,
    ) -> Result<server::Admission> {
        api(|| lock(&self.inner).open(now_ms, conn, bearer.as_deref()))
    }

    /// The socket of `conn` closed.
    pub fn closed(&self, now_ms: u64, conn: server::ConnId) {
        lock(&self.inner).closed(now_ms, conn)
    }

    /// Closes `conn`.
    pub fn close(&self, now_ms: u64, conn: server::ConnId) -> Result<()> {
        api(|| lock(&self.inner).close(now_ms, conn))
    }

    /// One text frame from `conn`.
    pub fn handle_text(&self, now_ms: u64, conn: server::ConnId, text: String) {
        lock(&self.inner).handle_text(now_ms, conn, &text)
    }

    /// Does what is due by `now_ms`.
    pub fn handle_timeout(&self, now_ms: u64) {
        lock(&self.inner).handle_timeout(now_ms)
    }

    /// Sets the agent state and sends it to every phone.
    pub fn set_state(&self, now_ms: u64, state: core::AgentState) {
        lock(&self.inner).set_state(now_ms, state)
    }

    /// Sends a chat message to every phone.
    pub fn send_message(&self, now_ms: u64, message: core::ChatMessage) {
        lock(&self.inner).send_message(now_ms, message)
    }

    /// Sends task progress to every phone.
    pub fn send_task_update(&self, now_ms: u64, update: core::TaskUpdate) {
        lock(&self.inner).send_task_update(now_ms, update)
    }

    /// Asks the phones for permission; the id the answer will carry.
    pub fn request_permission(
        &self,
        now_ms: u64,
        permission: server::NewPermission,
    ) -> Result<String> {
        api(|| lock(&self.inner).request_permission(now_ms, permission))
    }

    /// Withdraws a waiting permission request.
    pub fn cancel_permission(&self, now_ms: u64, id: String) -> Result<()> {
        api(|| lock(&self.inner).cancel_permission(now_ms, &id))
    }

    /// Ids of the waiting permission requests, oldest first.
    pub fn pending_permissions(&self) -> Vec<String> {
        lock(&self.inner)
            .pending_permissions()
            .map(str::to_owned)
            .collect()
    }

    /// The agent state phones are synced to.
    pub fn agent_state(&self) -> core::AgentState {
        lock(&self.inner).agent_state().clone()
    }

    /// Connections open now.
    pub fn connections(&self) -> u64 {
        lock(&self.inner).connections() as u64
    }

    /// Whether `conn` is open and authenticated.
    pub fn is_authenticated(&self, conn: server::ConnId) -> bool {
        lock(&self.inner).is_authenticated(conn)
    }

    /// The next thing to do; call until it answers `Timeout`.
    pub fn poll_output(&self, now_ms: u64) -> server::Output {
        lock(&self.inner).poll_output(now_ms)
    }

    /// Counters.
    pub fn stats(&self) -> server::Stats {
        lock(&self.inner).stats()
    }
}

// ---------------------------------------------------------------------------------------------
// The configurations: the core keeps sizes as `usize`, which uniffi does not carry (Kotlin has
// no `usize`); they cross as `u64` (`ULong`, as the rest of the mobile surface), converted here.

impl From<client::Config> for MobileClientConfig {
    fn from(c: client::Config) -> Self {
        MobileClientConfig {
            backoff_ms: c.backoff_ms,
            max_backoff_ms: c.max_backoff_ms,
            max_message_bytes: c.max_message_bytes as u64,
            max_pending_permissions: c.max_pending_permissions as u64,
            max_queued: c.max_queued as u64,
            server_timeout_ms: c.server_timeout_ms,
        }
    }
}

impl From<MobileClientConfig> for client::Config {
    fn from(c: MobileClientConfig) -> Self {
        client::Config {
            backoff_ms: c.backoff_ms,
            max_backoff_ms: c.max_backoff_ms,
            max_message_bytes: to_usize(c.max_message_bytes),
            max_pending_permissions: to_usize(c.max_pending_permissions),
            max_queued: to_usize(c.max_queued),
            server_timeout_ms: c.server_timeout_ms,
        }
    }
}

impl From<server::Config> for MobileServerConfig {
    fn from(c: server::Config) -> Self {
        MobileServerConfig {
            pairing_code_ttl_ms: c.pairing_code_ttl_ms,
            max_pairing_attempts: c.max_pairing_attempts,
            pairing_backoff_ms: c.pairing_backoff_ms,
            max_pairing_backoff_ms: c.max_pairing_backoff_ms,
            auth_timeout_ms: c.auth_timeout_ms,
            max_unpaired_connections: c.max_unpaired_connections as u64,
            ping_interval_ms: c.ping_interval_ms,
            max_missed_pongs: c.max_missed_pongs,
            permission_timeout_ms: c.permission_timeout_ms,
            max_pending_permissions: c.max_pending_permissions as u64,
            answered_memory: c.answered_memory as u64,
            max_connections: c.max_connections as u64,
            max_tokens: c.max_tokens as u64,
            max_message_bytes: c.max_message_bytes as u64,
            max_queued: c.max_queued as u64,
        }
    }
}

impl From<MobileServerConfig> for server::Config {
    fn from(c: MobileServerConfig) -> Self {
        server::Config {
            pairing_code_ttl_ms: c.pairing_code_ttl_ms,
            max_pairing_attempts: c.max_pairing_attempts,
            pairing_backoff_ms: c.pairing_backoff_ms,
            max_pairing_backoff_ms: c.max_pairing_backoff_ms,
            auth_timeout_ms: c.auth_timeout_ms,
            max_unpaired_connections: to_usize(c.max_unpaired_connections),
            ping_interval_ms: c.ping_interval_ms,
            max_missed_pongs: c.max_missed_pongs,
            permission_timeout_ms: c.permission_timeout_ms,
            max_pending_permissions: to_usize(c.max_pending_permissions),
            answered_memory: to_usize(c.answered_memory),
            max_connections: to_usize(c.max_connections),
            max_tokens: to_usize(c.max_tokens),
            max_message_bytes: to_usize(c.max_message_bytes),
            max_queued: to_usize(c.max_queued),
        }
    }
}
