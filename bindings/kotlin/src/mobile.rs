//! The mobile companion (`docs/sidecar-and-mobile.md`): the phone's engine
//! ([`MobileClient`]), the desktop's engine ([`MobileServer`]) and the messages between them.

use std::sync::{Arc, Mutex};

use deskwire::mobile::{self as core, client, server};

use crate::error::{Result, api};
use crate::{lock, to_usize};

// ---------------------------------------------------------------------------------------------
// Messages

/// The agent's status with the data each status carries.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum AgentState {
    /// No task.
    Idle,
    /// A task runs.
    Running {
        /// The task.
        task_id: String,
        /// The agent loop's iteration.
        iteration: u64,
    },
    /// A task waits for the user.
    Paused {
        /// The task.
        task_id: String,
        /// The question the agent asks, if any.
        question: Option<String>,
        /// The id of the permission request it waits for, if any.
        awaiting_permission: Option<String>,
    },
    /// A task ended.
    Stopped {
        /// The task.
        task_id: String,
        /// Why.
        reason: StopReason,
    },
}

/// Why a task stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum StopReason {
    /// Done.
    Completed,
    /// The user stopped it.
    ManualStop,
    /// It failed.
    Error,
    /// It reached its iteration limit.
    IterationLimit,
}

/// `auth_result`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct AuthResult {
    /// The bearer token (empty on failure).
    pub token: String,
    /// Whether pairing succeeded.
    pub success: bool,
    /// Why it failed.
    pub error: Option<String>,
    /// Wrong codes the desktop still allows for the code it shows (deskwire's; 0: ask for a
    /// new code).
    #[uniffi(default = None)]
    pub attempts_left: Option<u32>,
    /// How long the desktop looks at no attempt (deskwire's).
    #[uniffi(default = None)]
    pub retry_after_ms: Option<u64>,
}

/// A chat message from the agent or the system.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: String,
    /// The text.
    pub content: String,
    /// When (RFC 3339 from deskwire's desktop).
    pub timestamp: String,
}

/// The agent asks for the user's approval of a tool call.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PermissionRequest {
    /// The id the answer echoes.
    pub id: String,
    /// The tool.
    pub tool_name: String,
    /// The command to approve.
    pub command: String,
    /// A description for the user.
    pub description: String,
    /// The risk tier.
    pub tier: String,
}

/// Progress on the current task.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TaskUpdate {
    /// The task.
    pub task_id: String,
    /// The iteration.
    pub iteration: u64,
    /// The status text.
    pub status: String,
}

/// What a `command` asks the agent to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum CommandAction {
    /// Start a task.
    Start,
    /// Stop it.
    Stop,
    /// Pause it.
    Pause,
    /// Resume it.
    Resume,
}

/// Agent control from the phone.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Command {
    /// The action.
    pub action: CommandAction,
    /// The task to start.
    #[uniffi(default = None)]
    pub task: Option<String>,
    /// An iteration limit.
    #[uniffi(default = None)]
    pub max_iterations: Option<u64>,
}

/// The answer to a permission request.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PermissionResponse {
    /// The request id.
    pub id: String,
    /// Whether the call may run.
    pub approved: bool,
    /// Whether to apply the answer to such calls from now on.
    pub remember: bool,
}

/// A message from the desktop to the phone.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum ServerMessage {
    /// `auth_result`.
    AuthResult {
        /// The result.
        result: AuthResult,
    },
    /// `agent_state_update`.
    AgentStateUpdate {
        /// The state.
        state: AgentState,
    },
    /// `message`.
    Message {
        /// The message.
        message: ChatMessage,
    },
    /// `permission_request`.
    PermissionRequest {
        /// The request.
        request: PermissionRequest,
    },
    /// `task_update`.
    TaskUpdate {
        /// The update.
        update: TaskUpdate,
    },
    /// `ping`.
    Ping,
}

/// A message from the phone to the desktop.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum ClientMessage {
    /// `auth` with the pairing code.
    Auth {
        /// The code.
        code: String,
    },
    /// `command`.
    Command {
        /// The command.
        command: Command,
    },
    /// `message` (the user's chat text).
    Message {
        /// The text.
        content: String,
    },
    /// `permission_response`.
    PermissionResponse {
        /// The answer.
        response: PermissionResponse,
    },
    /// `pong`.
    Pong,
}

/// Reads a server frame (`{"type", "payload"}`) the way the phone's engine does.
#[uniffi::export]
pub fn parse_server_message(text: String) -> Result<ServerMessage> {
    api(|| core::ServerMessage::parse(&text)).map(Into::into)
}

/// Writes a server message as its canonical JSON text frame.
#[uniffi::export]
pub fn server_message_to_json(message: ServerMessage) -> String {
    core::ServerMessage::from(message).to_json()
}

/// Reads a client frame the way the desktop's engine does.
#[uniffi::export]
pub fn parse_client_message(text: String) -> Result<ClientMessage> {
    api(|| core::ClientMessage::parse(&text)).map(Into::into)
}

/// Writes a client message as its canonical JSON text frame.
#[uniffi::export]
pub fn client_message_to_json(message: ClientMessage) -> String {
    core::ClientMessage::from(message).to_json()
}

/// Reads an agent state (`{"status", "data"}`).
#[uniffi::export]
pub fn parse_agent_state(json: String) -> Result<AgentState> {
    let value: serde_json::Value = api(|| serde_json::from_str::<serde_json::Value>(&json))?;
    api(|| core::AgentState::from_value(value)).map(Into::into)
}

/// Writes an agent state as JSON.
#[uniffi::export]
pub fn agent_state_to_json(state: AgentState) -> String {
    core::AgentState::from(state).to_value().to_string()
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

/// Why the connection ended, as the host saw it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum MobileDisconnectReason {
    /// The socket closed.
    Closed,
    /// The connection failed (DNS, TCP, TLS, a non-101 answer other than 401/403).
    Failed {
        /// What failed.
        detail: String,
    },
    /// The upgrade was refused with 401 or 403: the token is not valid.
    Unauthorized,
    /// The engine gave up on a silent server.
    ServerTimeout,
}

/// Where the phone is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum MobileConnectionState {
    /// Not connected and not trying.
    Idle,
    /// Waiting for the backoff deadline.
    Waiting {
        /// When the next attempt starts.
        retry_at_ms: u64,
    },
    /// The host is opening the WebSocket.
    Connecting,
    /// Pairing: `auth` sent.
    Authenticating,
    /// The session is up.
    Online {
        /// Whether the first state arrived.
        synced: bool,
    },
}

/// What the phone's app should learn.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum MobileClientEvent {
    /// The session is up.
    Connected,
    /// Pairing succeeded: store `token`.
    Paired {
        /// The bearer token.
        token: String,
    },
    /// The pairing code was refused.
    AuthFailed {
        /// The server's reason.
        error: Option<String>,
        /// Wrong codes the desktop still allows for the code it shows (0: ask for a new one),
        /// when it says.
        attempts_left: Option<u32>,
        /// How long the desktop looks at no attempt, when it says.
        retry_after_ms: Option<u64>,
    },
    /// The stored token was refused (and forgotten): pair again.
    TokenRejected,
    /// The connection ended.
    Disconnected {
        /// Why.
        reason: MobileDisconnectReason,
        /// The delay of the scheduled reconnect, if any.
        retry_in_ms: Option<u64>,
    },
    /// The agent state changed; `initial` for the sync right after connecting.
    StateChanged {
        /// The state.
        state: AgentState,
        /// Whether it is the session's first.
        initial: bool,
    },
    /// A chat message.
    Message {
        /// The message.
        message: ChatMessage,
    },
    /// The agent asks for permission: answer with `respondPermission`.
    PermissionRequested {
        /// The request.
        request: PermissionRequest,
    },
    /// Progress on the task.
    TaskUpdate {
        /// The update.
        update: TaskUpdate,
    },
}

/// What the phone's engine wants next.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum MobileClientOutput {
    /// Open the WebSocket, with `Authorization: Bearer <bearer>` when given; then call
    /// `connected` or `disconnected`.
    Connect {
        /// The token for the upgrade's header.
        bearer: Option<String>,
    },
    /// Send this text frame.
    Transmit {
        /// The frame.
        text: String,
    },
    /// Close the WebSocket.
    Close,
    /// Tell the app.
    Event {
        /// The event.
        event: MobileClientEvent,
    },
    /// Nothing to do before this instant unless input arrives.
    Timeout {
        /// The deadline (ms, the host's clock).
        deadline_ms: u64,
    },
}

/// The phone's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct MobileClientStats {
    /// Connection attempts.
    pub connects: u64,
    /// Sessions established.
    pub sessions: u64,
    /// Frames received.
    pub frames_in: u64,
    /// Frames sent.
    pub frames_out: u64,
    /// Frames that were not valid messages.
    pub malformed: u64,
    /// Frames over the size limit.
    pub too_large: u64,
    /// Valid messages that made no sense in the state.
    pub unexpected: u64,
    /// Pings answered.
    pub pings: u64,
    /// Outputs dropped for a full queue.
    pub dropped: u64,
    /// Permission requests waiting now.
    pub pending_permissions: u64,
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
    pub fn disconnected(&self, now_ms: u64, reason: MobileDisconnectReason) {
        lock(&self.inner).disconnected(now_ms, reason.into())
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
    pub fn send_command(&self, now_ms: u64, command: Command) -> Result<()> {
        api(|| lock(&self.inner).send_command(now_ms, command.into()))
    }

    /// Sends a chat message.
    pub fn send_message(&self, now_ms: u64, content: String) -> Result<()> {
        api(|| lock(&self.inner).send_message(now_ms, &content))
    }

    /// The next thing to do; call until it answers `Timeout`.
    pub fn poll_output(&self, now_ms: u64) -> MobileClientOutput {
        lock(&self.inner).poll_output(now_ms).into()
    }

    /// The bearer token (after pairing, or the one given).
    pub fn token(&self) -> Option<String> {
        lock(&self.inner).token().map(str::to_owned)
    }

    /// The last agent state the server sent.
    pub fn agent_state(&self) -> Option<AgentState> {
        lock(&self.inner).agent_state().cloned().map(Into::into)
    }

    /// Whether the session is up and the state arrived.
    pub fn is_synced(&self) -> bool {
        lock(&self.inner).is_synced()
    }

    /// Where the client is.
    pub fn connection_state(&self) -> MobileConnectionState {
        lock(&self.inner).connection_state().into()
    }

    /// Ids of the permission requests waiting, oldest first.
    pub fn pending_permissions(&self) -> Vec<String> {
        lock(&self.inner)
            .pending_permissions()
            .map(str::to_owned)
            .collect()
    }

    /// Counters.
    pub fn stats(&self) -> MobileClientStats {
        lock(&self.inner).stats().into()
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

/// What to do with an upgrade request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Admission {
    /// Valid token: complete the upgrade.
    Authenticated,
    /// No token: complete the upgrade; the phone must pair.
    AwaitingPairing,
    /// Refuse the upgrade (401 for a bad token, 503 for too many connections).
    Refused {
        /// Why.
        refusal: Refusal,
    },
}

/// Why an upgrade is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Refusal {
    /// Not a token we issued (or revoked): 401.
    BadToken,
    /// Too many sessions: 503.
    TooManyConnections,
    /// Too many connections without a token: 503.
    TooManyUnpaired,
}

/// Why a pairing attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum PairingFailure {
    /// Not the code shown.
    WrongCode {
        /// Wrong codes still allowed.
        attempts_left: u32,
    },
    /// Too many wrong codes.
    LockedOut,
    /// No code is shown.
    NoActiveCode,
    /// Too soon after a wrong code: not looked at.
    Throttled {
        /// When an attempt is looked at again.
        retry_after_ms: u64,
    },
    /// The token table is full: revoke a phone first.
    TokensFull,
    /// Every session slot is taken.
    TooManyConnections,
}

/// Why a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum CloseReason {
    /// The host reported the socket closed.
    Closed,
    /// Pings went unanswered.
    PongTimeout,
    /// No pairing in time.
    AuthTimeout,
    /// The pairing attempt failed.
    AuthFailed,
    /// The host asked for it.
    Requested,
    /// The token the session used was revoked.
    Revoked,
}

/// How a session authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum AuthMethod {
    /// A bearer token on the upgrade.
    Token,
    /// A pairing code.
    Pairing,
}

/// What the desktop's app should learn.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum MobileServerEvent {
    /// A phone's session started.
    ClientConnected {
        /// The connection.
        conn: u64,
        /// How it authenticated.
        via: AuthMethod,
    },
    /// A phone paired: persist `token`.
    Paired {
        /// The connection.
        conn: u64,
        /// The new token (a secret).
        token: String,
    },
    /// A pairing attempt failed.
    PairingFailed {
        /// The connection.
        conn: u64,
        /// Why.
        failure: PairingFailure,
    },
    /// A connection ended.
    ClientDisconnected {
        /// The connection.
        conn: u64,
        /// Why.
        reason: CloseReason,
    },
    /// A phone sent an agent command.
    Command {
        /// The connection.
        conn: u64,
        /// The command.
        command: Command,
    },
    /// A phone sent a chat message.
    UserMessage {
        /// The connection.
        conn: u64,
        /// The text.
        content: String,
    },
    /// A permission request was answered.
    PermissionAnswered {
        /// The request id.
        id: String,
        /// Who answered.
        conn: u64,
        /// Whether the call may run.
        approved: bool,
        /// Whether to remember the answer.
        remember: bool,
    },
    /// Nobody answered in time.
    PermissionTimedOut {
        /// The request id.
        id: String,
    },
}

/// What the desktop's engine wants next.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum MobileServerOutput {
    /// Send this text frame on `conn`.
    Transmit {
        /// The connection.
        conn: u64,
        /// The frame.
        text: String,
    },
    /// Close `conn`.
    Close {
        /// The connection.
        conn: u64,
        /// Why.
        reason: CloseReason,
    },
    /// Tell the app.
    Event {
        /// The event.
        event: MobileServerEvent,
    },
    /// Nothing to do before this instant unless input arrives.
    Timeout {
        /// The deadline (ms).
        deadline_ms: u64,
    },
}

/// A permission request to show (the server makes its id).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct NewPermission {
    /// The tool.
    pub tool_name: String,
    /// The command.
    pub command: String,
    /// A description for the user.
    pub description: String,
    /// The risk tier.
    pub tier: String,
}

/// The desktop's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct MobileServerStats {
    /// Frames received.
    pub frames_in: u64,
    /// Frames sent.
    pub frames_out: u64,
    /// Frames that were not valid messages.
    pub malformed: u64,
    /// Frames over the size limit.
    pub too_large: u64,
    /// Valid messages that made no sense.
    pub unexpected: u64,
    /// Upgrades refused for a bad token.
    pub bad_tokens: u64,
    /// Wrong pairing codes.
    pub pairing_failures: u64,
    /// Answers to requests never made.
    pub unknown_permission_responses: u64,
    /// Second or late answers.
    pub duplicate_permission_responses: u64,
    /// Pongs without a ping.
    pub unsolicited_pongs: u64,
    /// Outputs dropped for a full queue.
    pub dropped: u64,
    /// Connections open now.
    pub connections: u64,
    /// Permission requests waiting now.
    pub pending_permissions: u64,
    /// Tokens held now.
    pub tokens: u64,
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
    pub fn open(&self, now_ms: u64, conn: u64, bearer: Option<String>) -> Result<Admission> {
        api(|| lock(&self.inner).open(now_ms, server::ConnId(conn), bearer.as_deref()))
            .map(Into::into)
    }

    /// The socket of `conn` closed.
    pub fn closed(&self, now_ms: u64, conn: u64) {
        lock(&self.inner).closed(now_ms, server::ConnId(conn))
    }

    /// Closes `conn`.
    pub fn close(&self, now_ms: u64, conn: u64) -> Result<()> {
        api(|| lock(&self.inner).close(now_ms, server::ConnId(conn)))
    }

    /// One text frame from `conn`.
    pub fn handle_text(&self, now_ms: u64, conn: u64, text: String) {
        lock(&self.inner).handle_text(now_ms, server::ConnId(conn), &text)
    }

    /// Does what is due by `now_ms`.
    pub fn handle_timeout(&self, now_ms: u64) {
        lock(&self.inner).handle_timeout(now_ms)
    }

    /// Sets the agent state and sends it to every phone.
    pub fn set_state(&self, now_ms: u64, state: AgentState) {
        lock(&self.inner).set_state(now_ms, state.into())
    }

    /// Sends a chat message to every phone.
    pub fn send_message(&self, now_ms: u64, message: ChatMessage) {
        lock(&self.inner).send_message(now_ms, message.into())
    }

    /// Sends task progress to every phone.
    pub fn send_task_update(&self, now_ms: u64, update: TaskUpdate) {
        lock(&self.inner).send_task_update(now_ms, update.into())
    }

    /// Asks the phones for permission; the id the answer will carry.
    pub fn request_permission(&self, now_ms: u64, permission: NewPermission) -> Result<String> {
        api(|| lock(&self.inner).request_permission(now_ms, permission.into()))
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
    pub fn agent_state(&self) -> AgentState {
        lock(&self.inner).agent_state().clone().into()
    }

    /// Connections open now.
    pub fn connections(&self) -> u64 {
        lock(&self.inner).connections() as u64
    }

    /// Whether `conn` is open and authenticated.
    pub fn is_authenticated(&self, conn: u64) -> bool {
        lock(&self.inner).is_authenticated(server::ConnId(conn))
    }

    /// The next thing to do; call until it answers `Timeout`.
    pub fn poll_output(&self, now_ms: u64) -> MobileServerOutput {
        lock(&self.inner).poll_output(now_ms).into()
    }

    /// Counters.
    pub fn stats(&self) -> MobileServerStats {
        lock(&self.inner).stats().into()
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions (the only place mobile types are converted)

impl From<core::AgentState> for AgentState {
    fn from(s: core::AgentState) -> Self {
        match s {
            core::AgentState::Idle => AgentState::Idle,
            core::AgentState::Running(d) => AgentState::Running {
                task_id: d.task_id,
                iteration: d.iteration,
            },
            core::AgentState::Paused(d) => AgentState::Paused {
                task_id: d.task_id,
                question: d.question,
                awaiting_permission: d.awaiting_permission,
            },
            core::AgentState::Stopped(d) => AgentState::Stopped {
                task_id: d.task_id,
                reason: d.reason.into(),
            },
            other => unmapped!(other),
        }
    }
}

impl From<AgentState> for core::AgentState {
    fn from(s: AgentState) -> Self {
        match s {
            AgentState::Idle => core::AgentState::Idle,
            AgentState::Running { task_id, iteration } => {
                core::AgentState::Running(core::RunningData { task_id, iteration })
            }
            AgentState::Paused {
                task_id,
                question,
                awaiting_permission,
            } => core::AgentState::Paused(core::PausedData {
                task_id,
                question,
                awaiting_permission,
            }),
            AgentState::Stopped { task_id, reason } => {
                core::AgentState::Stopped(core::StoppedData {
                    task_id,
                    reason: reason.into(),
                })
            }
        }
    }
}

impl From<core::StopReason> for StopReason {
    fn from(r: core::StopReason) -> Self {
        match r {
            core::StopReason::Completed => StopReason::Completed,
            core::StopReason::ManualStop => StopReason::ManualStop,
            core::StopReason::Error => StopReason::Error,
            core::StopReason::IterationLimit => StopReason::IterationLimit,
            other => unmapped!(other),
        }
    }
}

impl From<StopReason> for core::StopReason {
    fn from(r: StopReason) -> Self {
        match r {
            StopReason::Completed => core::StopReason::Completed,
            StopReason::ManualStop => core::StopReason::ManualStop,
            StopReason::Error => core::StopReason::Error,
            StopReason::IterationLimit => core::StopReason::IterationLimit,
        }
    }
}

impl From<core::AuthResult> for AuthResult {
    fn from(r: core::AuthResult) -> Self {
        AuthResult {
            token: r.token,
            success: r.success,
            error: r.error,
            attempts_left: r.attempts_left,
            retry_after_ms: r.retry_after_ms,
        }
    }
}

impl From<AuthResult> for core::AuthResult {
    fn from(r: AuthResult) -> Self {
        core::AuthResult {
            token: r.token,
            success: r.success,
            error: r.error,
            attempts_left: r.attempts_left,
            retry_after_ms: r.retry_after_ms,
        }
    }
}

impl From<core::ChatMessage> for ChatMessage {
    fn from(m: core::ChatMessage) -> Self {
        ChatMessage {
            role: m.role,
            content: m.content,
            timestamp: m.timestamp,
        }
    }
}

impl From<ChatMessage> for core::ChatMessage {
    fn from(m: ChatMessage) -> Self {
        core::ChatMessage {
            role: m.role,
            content: m.content,
            timestamp: m.timestamp,
        }
    }
}

impl From<core::PermissionRequest> for PermissionRequest {
    fn from(r: core::PermissionRequest) -> Self {
        PermissionRequest {
            id: r.id,
            tool_name: r.tool_name,
            command: r.command,
            description: r.description,
            tier: r.tier,
        }
    }
}

impl From<PermissionRequest> for core::PermissionRequest {
    fn from(r: PermissionRequest) -> Self {
        core::PermissionRequest {
            id: r.id,
            tool_name: r.tool_name,
            command: r.command,
            description: r.description,
            tier: r.tier,
        }
    }
}

impl From<core::TaskUpdate> for TaskUpdate {
    fn from(t: core::TaskUpdate) -> Self {
        TaskUpdate {
            task_id: t.task_id,
            iteration: t.iteration,
            status: t.status,
        }
    }
}

impl From<TaskUpdate> for core::TaskUpdate {
    fn from(t: TaskUpdate) -> Self {
        core::TaskUpdate {
            task_id: t.task_id,
            iteration: t.iteration,
            status: t.status,
        }
    }
}

impl From<core::CommandAction> for CommandAction {
    fn from(a: core::CommandAction) -> Self {
        match a {
            core::CommandAction::Start => CommandAction::Start,
            core::CommandAction::Stop => CommandAction::Stop,
            core::CommandAction::Pause => CommandAction::Pause,
            core::CommandAction::Resume => CommandAction::Resume,
            other => unmapped!(other),
        }
    }
}

impl From<CommandAction> for core::CommandAction {
    fn from(a: CommandAction) -> Self {
        match a {
            CommandAction::Start => core::CommandAction::Start,
            CommandAction::Stop => core::CommandAction::Stop,
            CommandAction::Pause => core::CommandAction::Pause,
            CommandAction::Resume => core::CommandAction::Resume,
        }
    }
}

impl From<core::Command> for Command {
    fn from(c: core::Command) -> Self {
        Command {
            action: c.action.into(),
            task: c.task,
            max_iterations: c.max_iterations,
        }
    }
}

impl From<Command> for core::Command {
    fn from(c: Command) -> Self {
        core::Command {
            action: c.action.into(),
            task: c.task,
            max_iterations: c.max_iterations,
        }
    }
}

impl From<core::ServerMessage> for ServerMessage {
    fn from(m: core::ServerMessage) -> Self {
        match m {
            core::ServerMessage::AuthResult(r) => ServerMessage::AuthResult { result: r.into() },
            core::ServerMessage::AgentStateUpdate(s) => {
                ServerMessage::AgentStateUpdate { state: s.into() }
            }
            core::ServerMessage::Message(m) => ServerMessage::Message { message: m.into() },
            core::ServerMessage::PermissionRequest(r) => {
                ServerMessage::PermissionRequest { request: r.into() }
            }
            core::ServerMessage::TaskUpdate(t) => ServerMessage::TaskUpdate { update: t.into() },
            core::ServerMessage::Ping => ServerMessage::Ping,
            other => unmapped!(other),
        }
    }
}

impl From<ServerMessage> for core::ServerMessage {
    fn from(m: ServerMessage) -> Self {
        match m {
            ServerMessage::AuthResult { result } => core::ServerMessage::AuthResult(result.into()),
            ServerMessage::AgentStateUpdate { state } => {
                core::ServerMessage::AgentStateUpdate(state.into())
            }
            ServerMessage::Message { message } => core::ServerMessage::Message(message.into()),
            ServerMessage::PermissionRequest { request } => {
                core::ServerMessage::PermissionRequest(request.into())
            }
            ServerMessage::TaskUpdate { update } => core::ServerMessage::TaskUpdate(update.into()),
            ServerMessage::Ping => core::ServerMessage::Ping,
        }
    }
}

impl From<core::ClientMessage> for ClientMessage {
    fn from(m: core::ClientMessage) -> Self {
        match m {
            core::ClientMessage::Auth(a) => ClientMessage::Auth { code: a.code },
            core::ClientMessage::Command(c) => ClientMessage::Command { command: c.into() },
            core::ClientMessage::Message(m) => ClientMessage::Message { content: m.content },
            core::ClientMessage::PermissionResponse(r) => ClientMessage::PermissionResponse {
                response: PermissionResponse {
                    id: r.id,
                    approved: r.approved,
                    remember: r.remember,
                },
            },
            core::ClientMessage::Pong => ClientMessage::Pong,
            other => unmapped!(other),
        }
    }
}

impl From<ClientMessage> for core::ClientMessage {
    fn from(m: ClientMessage) -> Self {
        match m {
            ClientMessage::Auth { code } => core::ClientMessage::Auth(core::Auth { code }),
            ClientMessage::Command { command } => core::ClientMessage::Command(command.into()),
            ClientMessage::Message { content } => {
                core::ClientMessage::Message(core::UserMessage { content })
            }
            ClientMessage::PermissionResponse { response } => {
                core::ClientMessage::PermissionResponse(core::PermissionResponse {
                    id: response.id,
                    approved: response.approved,
                    remember: response.remember,
                })
            }
            ClientMessage::Pong => core::ClientMessage::Pong,
        }
    }
}

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

impl From<MobileDisconnectReason> for client::DisconnectReason {
    fn from(r: MobileDisconnectReason) -> Self {
        match r {
            MobileDisconnectReason::Closed => client::DisconnectReason::Closed,
            MobileDisconnectReason::Failed { detail } => client::DisconnectReason::Failed(detail),
            MobileDisconnectReason::Unauthorized => client::DisconnectReason::Unauthorized,
            MobileDisconnectReason::ServerTimeout => client::DisconnectReason::ServerTimeout,
        }
    }
}

impl From<client::DisconnectReason> for MobileDisconnectReason {
    fn from(r: client::DisconnectReason) -> Self {
        match r {
            client::DisconnectReason::Closed => MobileDisconnectReason::Closed,
            client::DisconnectReason::Failed(detail) => MobileDisconnectReason::Failed { detail },
            client::DisconnectReason::Unauthorized => MobileDisconnectReason::Unauthorized,
            client::DisconnectReason::ServerTimeout => MobileDisconnectReason::ServerTimeout,
            other => unmapped!(other),
        }
    }
}

impl From<client::ConnectionState> for MobileConnectionState {
    fn from(s: client::ConnectionState) -> Self {
        match s {
            client::ConnectionState::Idle => MobileConnectionState::Idle,
            client::ConnectionState::Waiting { retry_at } => MobileConnectionState::Waiting {
                retry_at_ms: retry_at,
            },
            client::ConnectionState::Connecting => MobileConnectionState::Connecting,
            client::ConnectionState::Authenticating => MobileConnectionState::Authenticating,
            client::ConnectionState::Online { synced } => MobileConnectionState::Online { synced },
            other => unmapped!(other),
        }
    }
}

impl From<client::Event> for MobileClientEvent {
    fn from(e: client::Event) -> Self {
        match e {
            client::Event::Connected => MobileClientEvent::Connected,
            client::Event::Paired { token } => MobileClientEvent::Paired { token },
            client::Event::AuthFailed {
                error,
                attempts_left,
                retry_after_ms,
            } => MobileClientEvent::AuthFailed {
                error,
                attempts_left,
                retry_after_ms,
            },
            client::Event::TokenRejected => MobileClientEvent::TokenRejected,
            client::Event::Disconnected {
                reason,
                retry_in_ms,
            } => MobileClientEvent::Disconnected {
                reason: reason.into(),
                retry_in_ms,
            },
            client::Event::StateChanged { state, initial } => MobileClientEvent::StateChanged {
                state: state.into(),
                initial,
            },
            client::Event::Message(m) => MobileClientEvent::Message { message: m.into() },
            client::Event::PermissionRequested(r) => {
                MobileClientEvent::PermissionRequested { request: r.into() }
            }
            client::Event::TaskUpdate(t) => MobileClientEvent::TaskUpdate { update: t.into() },
            other => unmapped!(other),
        }
    }
}

impl From<client::Output> for MobileClientOutput {
    fn from(o: client::Output) -> Self {
        match o {
            client::Output::Connect { bearer } => MobileClientOutput::Connect { bearer },
            client::Output::Transmit(text) => MobileClientOutput::Transmit { text },
            client::Output::Close => MobileClientOutput::Close,
            client::Output::Event(e) => MobileClientOutput::Event { event: e.into() },
            client::Output::Timeout(deadline_ms) => MobileClientOutput::Timeout { deadline_ms },
        }
    }
}

impl From<client::Stats> for MobileClientStats {
    fn from(s: client::Stats) -> Self {
        MobileClientStats {
            connects: s.connects,
            sessions: s.sessions,
            frames_in: s.frames_in,
            frames_out: s.frames_out,
            malformed: s.malformed,
            too_large: s.too_large,
            unexpected: s.unexpected,
            pings: s.pings,
            dropped: s.dropped,
            pending_permissions: s.pending_permissions,
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

impl From<server::Admission> for Admission {
    fn from(a: server::Admission) -> Self {
        match a {
            server::Admission::Authenticated => Admission::Authenticated,
            server::Admission::AwaitingPairing => Admission::AwaitingPairing,
            server::Admission::Refused(r) => Admission::Refused { refusal: r.into() },
            other => unmapped!(other),
        }
    }
}

impl From<server::Refusal> for Refusal {
    fn from(r: server::Refusal) -> Self {
        match r {
            server::Refusal::BadToken => Refusal::BadToken,
            server::Refusal::TooManyConnections => Refusal::TooManyConnections,
            server::Refusal::TooManyUnpaired => Refusal::TooManyUnpaired,
            other => unmapped!(other),
        }
    }
}

impl From<server::PairingFailure> for PairingFailure {
    fn from(f: server::PairingFailure) -> Self {
        match f {
            server::PairingFailure::WrongCode { attempts_left } => {
                PairingFailure::WrongCode { attempts_left }
            }
            server::PairingFailure::LockedOut => PairingFailure::LockedOut,
            server::PairingFailure::NoActiveCode => PairingFailure::NoActiveCode,
            server::PairingFailure::Throttled { retry_after_ms } => {
                PairingFailure::Throttled { retry_after_ms }
            }
            server::PairingFailure::TokensFull => PairingFailure::TokensFull,
            server::PairingFailure::TooManyConnections => PairingFailure::TooManyConnections,
            other => unmapped!(other),
        }
    }
}

impl From<server::CloseReason> for CloseReason {
    fn from(r: server::CloseReason) -> Self {
        match r {
            server::CloseReason::Closed => CloseReason::Closed,
            server::CloseReason::PongTimeout => CloseReason::PongTimeout,
            server::CloseReason::AuthTimeout => CloseReason::AuthTimeout,
            server::CloseReason::AuthFailed => CloseReason::AuthFailed,
            server::CloseReason::Requested => CloseReason::Requested,
            server::CloseReason::Revoked => CloseReason::Revoked,
            other => unmapped!(other),
        }
    }
}

impl From<server::AuthMethod> for AuthMethod {
    fn from(m: server::AuthMethod) -> Self {
        match m {
            server::AuthMethod::Token => AuthMethod::Token,
            server::AuthMethod::Pairing => AuthMethod::Pairing,
            other => unmapped!(other),
        }
    }
}

impl From<server::Event> for MobileServerEvent {
    fn from(e: server::Event) -> Self {
        match e {
            server::Event::ClientConnected { conn, via } => MobileServerEvent::ClientConnected {
                conn: conn.0,
                via: via.into(),
            },
            server::Event::Paired { conn, token } => MobileServerEvent::Paired {
                conn: conn.0,
                token,
            },
            server::Event::PairingFailed { conn, failure } => MobileServerEvent::PairingFailed {
                conn: conn.0,
                failure: failure.into(),
            },
            server::Event::ClientDisconnected { conn, reason } => {
                MobileServerEvent::ClientDisconnected {
                    conn: conn.0,
                    reason: reason.into(),
                }
            }
            server::Event::Command { conn, command } => MobileServerEvent::Command {
                conn: conn.0,
                command: command.into(),
            },
            server::Event::UserMessage { conn, content } => MobileServerEvent::UserMessage {
                conn: conn.0,
                content,
            },
            server::Event::PermissionAnswered {
                id,
                conn,
                approved,
                remember,
            } => MobileServerEvent::PermissionAnswered {
                id,
                conn: conn.0,
                approved,
                remember,
            },
            server::Event::PermissionTimedOut { id } => {
                MobileServerEvent::PermissionTimedOut { id }
            }
            other => unmapped!(other),
        }
    }
}

impl From<server::Output> for MobileServerOutput {
    fn from(o: server::Output) -> Self {
        match o {
            server::Output::Transmit { conn, text } => {
                MobileServerOutput::Transmit { conn: conn.0, text }
            }
            server::Output::Close { conn, reason } => MobileServerOutput::Close {
                conn: conn.0,
                reason: reason.into(),
            },
            server::Output::Event(e) => MobileServerOutput::Event { event: e.into() },
            server::Output::Timeout(deadline_ms) => MobileServerOutput::Timeout { deadline_ms },
        }
    }
}

impl From<NewPermission> for server::NewPermission {
    fn from(p: NewPermission) -> Self {
        server::NewPermission {
            tool_name: p.tool_name,
            command: p.command,
            description: p.description,
            tier: p.tier,
        }
    }
}

impl From<server::Stats> for MobileServerStats {
    fn from(s: server::Stats) -> Self {
        MobileServerStats {
            frames_in: s.frames_in,
            frames_out: s.frames_out,
            malformed: s.malformed,
            too_large: s.too_large,
            unexpected: s.unexpected,
            bad_tokens: s.bad_tokens,
            pairing_failures: s.pairing_failures,
            unknown_permission_responses: s.unknown_permission_responses,
            duplicate_permission_responses: s.duplicate_permission_responses,
            unsolicited_pongs: s.unsolicited_pongs,
            dropped: s.dropped,
            connections: s.connections,
            pending_permissions: s.pending_permissions,
            tokens: s.tokens,
        }
    }
}
