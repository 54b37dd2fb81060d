//! The phone's end (the spec's Android `ConnectionManager`) as a sans-IO engine.
//!
//! States: `Idle` (nothing to do: no credentials, stopped, or credentials refused) →
//! `Connecting` (the host is opening the WebSocket) → `Authenticating` (pairing: `auth` sent,
//! waiting for `auth_result`) → `Online` (session up; `synced` once the first
//! `agent_state_update` arrived) → on a drop, `Waiting` for the backoff deadline → `Connecting`.
//!
//! Choices where the spec leaves room:
//! - A pairing code the user typed wins over a stored token: typing a code means "pair again".
//! - The backoff starts over when a session that was established (pairing succeeded, or the
//!   first `agent_state_update` arrived on a token connection) ends after lasting at least
//!   [`STABLE_SESSION_MS`]; not when the upgrade succeeds, and not when the session ends
//!   sooner. A server that accepts the upgrade, or even syncs, and drops us at once (say,
//!   with a frame the transport cannot take) is not hammered every second: the waits grow
//!   1, 2, 4, ... s as for a server that refuses the connection.
//! - A refused token (`disconnected(.., Unauthorized)`, or a failed `auth_result` on a token
//!   connection) and a refused pairing code end in `Idle` with no retry: retrying cannot help,
//!   the user must pair (again). Other drops retry forever.
//! - Permission requests are forgotten on a drop; the server sends the ones still waiting
//!   again when the session comes back.

use std::collections::VecDeque;

use super::message::{
    AgentState, Auth, ChatMessage, ClientMessage, Command, ParseError, PermissionRequest,
    PermissionResponse, ServerMessage, TaskUpdate, UserMessage,
};
use super::{IDLE_WAIT_MS, LocalError, is_valid_code};

/// A session that lasted this long (ms) before it ended counts as a success: the backoff
/// starts over at its first wait. One that ended sooner counts as one more failed attempt.
pub const STABLE_SESSION_MS: u64 = 10_000;

/// Client configuration; the defaults are the spec's. JSON: the fields by name; missing ones
/// take the defaults; unknown ones are refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Delays before reconnect attempts 1, 2, ... (spec: 1, 2, 4, 8, 16 s).
    pub backoff_ms: Vec<u64>,
    /// The delay of every later attempt, and the cap of all (spec: 30 s).
    pub max_backoff_ms: u64,
    /// Larger text frames from the server are ignored (counted).
    pub max_message_bytes: usize,
    /// Permission requests waiting for an answer at most. Beyond, the oldest is dropped: it
    /// leaves [`Client::pending_permissions`], answering it fails with
    /// [`LocalError::UnknownPermission`], and it is counted in [`Stats::dropped`], so an app
    /// that shows every [`Event::PermissionRequested`] learns that some went unanswerable.
    pub max_pending_permissions: usize,
    /// Outputs queued at most when the host does not drain `poll_output`. At the cap, what the
    /// server sent (its messages, state updates, task updates, permission requests) and the
    /// engine's own `pong`s are dropped and counted (`Stats::dropped`; [`Client::agent_state`]
    /// stays current), and the host's `pair`, `start`, `send_*` and `respond_permission` fail
    /// with [`LocalError::QueueFull`]. Only the instructions those calls and the socket's
    /// events make (`Connect`, `Close`, connection events) go past it, a few at a time.
    pub max_queued: usize,
    /// Close and reconnect when the server sends nothing (not even a ping) for this long: a
    /// phone that changed networks often keeps a dead socket that never reports an error.
    /// `None` (the default) waits forever, since the spec does not oblige a server to ping; with
    /// deskwire's server (a ping every 15 s) 45 s is a good value.
    pub server_timeout_ms: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            backoff_ms: vec![1_000, 2_000, 4_000, 8_000, 16_000],
            max_backoff_ms: 30_000,
            max_message_bytes: 1024 * 1024,
            max_pending_permissions: 64,
            max_queued: 1024,
            server_timeout_ms: None,
        }
    }
}

impl Config {
    /// The delay before reconnect attempt `attempt` (1-based).
    pub fn backoff(&self, attempt: u32) -> u64 {
        let index = attempt.saturating_sub(1) as usize;
        self.backoff_ms
            .get(index)
            .copied()
            .unwrap_or(self.max_backoff_ms)
            .min(self.max_backoff_ms)
    }
}

/// Why the connection ended, as the host saw it. JSON: `"closed"`, `{"failed": "why"}`,
/// `"unauthorized"`, `"server_timeout"`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "MobileDisconnectReason"))]
pub enum DisconnectReason {
    /// The socket closed (either side).
    Closed,
    /// The connection failed (DNS, TCP, TLS, a non-101 answer other than 401/403, ...).
    Failed(#[cfg_attr(feature = "uniffi", uniffi(name = "detail"))] String),
    /// The upgrade was refused with 401 or 403: the token is not valid.
    Unauthorized,
    /// The engine gave up on a silent server (`server_timeout_ms`) and closed the socket.
    ServerTimeout,
}

/// Where the client is. JSON: `"idle"`, `{"waiting": {"retry_at": 5000}}`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "MobileConnectionState"))]
pub enum ConnectionState {
    /// Not connected and not trying.
    Idle,
    /// Waiting for the backoff deadline before connecting again.
    Waiting {
        /// When the next attempt starts.
        #[cfg_attr(feature = "uniffi", uniffi(name = "retry_at_ms"))]
        retry_at: u64,
    },
    /// The host is opening the WebSocket.
    Connecting,
    /// Pairing: `auth` sent, waiting for `auth_result`.
    Authenticating,
    /// The session is up.
    Online {
        /// Whether the first `agent_state_update` arrived.
        synced: bool,
    },
}

/// What the application should learn. JSON: externally tagged, snake_case (`"connected"`,
/// `{"paired": {"token": ".."}}`, `{"message": {"role", "content", "timestamp"}}`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "MobileClientEvent"))]
pub enum Event {
    /// The session is up (after the upgrade with a token, or after pairing).
    Connected,
    /// Pairing succeeded: store `token` for later connections.
    Paired {
        /// The bearer token.
        token: String,
    },
    /// The pairing code was refused; ask the user for a new one.
    AuthFailed {
        /// The server's reason.
        error: Option<String>,
        /// Wrong codes the desktop still allows for the code it shows (0: ask for a new code),
        /// when it says.
        attempts_left: Option<u32>,
        /// How long the desktop looks at no attempt, when it says.
        retry_after_ms: Option<u64>,
    },
    /// The stored token was refused (and forgotten); pair again.
    TokenRejected,
    /// The connection ended.
    Disconnected {
        /// Why.
        reason: DisconnectReason,
        /// When a reconnect is scheduled, its delay.
        retry_in_ms: Option<u64>,
    },
    /// The agent state changed; `initial` for the sync right after connecting.
    StateChanged {
        /// The new state.
        state: AgentState,
        /// Whether this is the first state of the session.
        initial: bool,
    },
    /// A chat message from the agent or the system.
    Message(#[cfg_attr(feature = "uniffi", uniffi(name = "message"))] ChatMessage),
    /// The agent asks for permission: answer with [`Client::respond_permission`].
    PermissionRequested(
        #[cfg_attr(feature = "uniffi", uniffi(name = "request"))] PermissionRequest,
    ),
    /// Progress on the current task.
    TaskUpdate(#[cfg_attr(feature = "uniffi", uniffi(name = "update"))] TaskUpdate),
}

/// What the client wants from the host next. JSON: externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "MobileClientOutput"))]
pub enum Output {
    /// Open the WebSocket; with `Authorization: Bearer <bearer>` on the upgrade when given
    /// (see [`super::authorization_header`]). Then call [`Client::connected`] or
    /// [`Client::disconnected`].
    Connect {
        /// The token for the upgrade's `Authorization` header.
        bearer: Option<String>,
    },
    /// Send this text frame.
    Transmit(#[cfg_attr(feature = "uniffi", uniffi(name = "text"))] String),
    /// Close the WebSocket (no `disconnected` call is needed afterwards).
    Close,
    /// Tell the application.
    Event(#[cfg_attr(feature = "uniffi", uniffi(name = "event"))] Event),
    /// Nothing to do before this instant (ms), unless new input arrives.
    Timeout(#[cfg_attr(feature = "uniffi", uniffi(name = "deadline_ms"))] u64),
}

/// Counters. `pending_permissions` is a gauge; the rest only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[cfg_attr(feature = "uniffi", uniffi(name = "MobileClientStats"))]
pub struct Stats {
    /// Connection attempts (`Connect` instructions).
    pub connects: u64,
    /// Sessions established.
    pub sessions: u64,
    /// Text frames received.
    pub frames_in: u64,
    /// Text frames sent.
    pub frames_out: u64,
    /// Frames that were not valid server messages.
    pub malformed: u64,
    /// Frames over `max_message_bytes`.
    pub too_large: u64,
    /// Valid messages that made no sense in the current state.
    pub unexpected: u64,
    /// Pings answered.
    pub pings: u64,
    /// Server messages (as events) and `pong`s dropped because the queue was full, and
    /// permission requests dropped (the oldest) past `max_pending_permissions`.
    pub dropped: u64,
    /// Permission requests waiting for the user now.
    pub pending_permissions: u64,
}

/// The phone's end. See the [module docs](self) and the [host loop](super).
#[derive(Debug)]
pub struct Client {
    config: Config,
    state: ConnectionState,
    token: Option<String>,
    code: Option<String>,
    /// Whether the current attempt pairs (sends `auth`) rather than presents the token.
    pairing: bool,
    /// Failed attempts since the last session that lasted [`STABLE_SESSION_MS`].
    attempt: u32,
    /// When the current session was established (cleared when it ends).
    established_at: Option<u64>,
    agent: Option<AgentState>,
    /// When the server last sent a frame (or the socket opened).
    last_heard: u64,
    permissions: VecDeque<String>,
    queue: VecDeque<Output>,
    stats: Stats,
}

impl Client {
    /// A client; `token` is the one stored from an earlier pairing, if any.
    pub fn new(config: Config, token: Option<String>) -> Self {
        Client {
            config,
            state: ConnectionState::Idle,
            token: token.filter(|t| !t.is_empty()),
            code: None,
            pairing: false,
            attempt: 0,
            established_at: None,
            agent: None,
            last_heard: 0,
            permissions: VecDeque::new(),
            queue: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Where the client is.
    pub fn connection_state(&self) -> ConnectionState {
        self.state
    }

    /// The bearer token (after pairing, or the one given to `new`).
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The last agent state the server sent (kept across drops, so the UI has something to
    /// show; [`Client::is_synced`] says whether it is current).
    pub fn agent_state(&self) -> Option<&AgentState> {
        self.agent.as_ref()
    }

    /// Whether the session is up and the server's state arrived.
    pub fn is_synced(&self) -> bool {
        matches!(self.state, ConnectionState::Online { synced: true })
    }

    /// Ids of the permission requests waiting for the user, oldest first.
    pub fn pending_permissions(&self) -> impl Iterator<Item = &str> {
        self.permissions.iter().map(String::as_str)
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let mut stats = self.stats;
        stats.pending_permissions = self.permissions.len() as u64;
        stats
    }

    /// Goes online with the stored token (or a pairing code given earlier): a `Connect` comes
    /// out now. While waiting for a reconnect, this skips the wait.
    pub fn start(&mut self, now: u64) -> Result<(), LocalError> {
        self.room()?;
        match self.state {
            ConnectionState::Idle | ConnectionState::Waiting { .. } => {}
            _ => return Err(LocalError::AlreadyConnected),
        }
        if self.token.is_none() && self.code.is_none() {
            return Err(LocalError::NoCredentials);
        }
        self.connect(now);
        Ok(())
    }

    /// Pairs with the six-digit `code` the desktop shows; connects now.
    pub fn pair(&mut self, now: u64, code: &str) -> Result<(), LocalError> {
        if !is_valid_code(code) {
            return Err(LocalError::InvalidCode(code.to_owned()));
        }
        self.room()?;
        match self.state {
            ConnectionState::Idle | ConnectionState::Waiting { .. } => {}
            _ => return Err(LocalError::AlreadyConnected),
        }
        self.code = Some(code.to_owned());
        self.attempt = 0;
        self.connect(now);
        Ok(())
    }

    /// Goes offline and stays there: closes the socket if one is open, cancels a reconnect.
    pub fn stop(&mut self, now: u64) {
        let _ = now;
        if matches!(
            self.state,
            ConnectionState::Connecting
                | ConnectionState::Authenticating
                | ConnectionState::Online { .. }
        ) {
            self.push(Output::Close);
        }
        self.state = ConnectionState::Idle;
        self.established_at = None;
        self.permissions.clear();
    }

    /// Forgets the token (the user unpaired); the current session, if any, goes on.
    pub fn forget_token(&mut self) {
        self.token = None;
    }

    fn connect(&mut self, _now: u64) {
        self.pairing = self.code.is_some();
        let bearer = if self.pairing {
            None
        } else {
            self.token.clone()
        };
        self.stats.connects += 1;
        self.state = ConnectionState::Connecting;
        self.push(Output::Connect { bearer });
    }

    /// The host finished the WebSocket upgrade (101).
    pub fn connected(&mut self, now: u64) -> Result<(), LocalError> {
        if self.state != ConnectionState::Connecting {
            return Err(LocalError::NotConnecting);
        }
        self.last_heard = now;
        if self.pairing {
            let code = self.code.clone().unwrap_or_default();
            self.send(ClientMessage::Auth(Auth { code }));
            self.state = ConnectionState::Authenticating;
        } else {
            self.state = ConnectionState::Online { synced: false };
            self.stats.sessions += 1;
            self.event(Event::Connected);
        }
        Ok(())
    }

    /// The connection ended (or the attempt failed). Ignored when the engine is not
    /// connecting or connected (after `stop`, after its own `Close`).
    pub fn disconnected(&mut self, now: u64, reason: DisconnectReason) {
        if matches!(
            self.state,
            ConnectionState::Idle | ConnectionState::Waiting { .. }
        ) {
            return;
        }
        self.permissions.clear();
        let lasted = self.established_at.take().map(|at| now.saturating_sub(at));
        if reason == DisconnectReason::Unauthorized {
            self.state = ConnectionState::Idle;
            self.event(Event::Disconnected {
                reason,
                retry_in_ms: None,
            });
            if self.pairing {
                self.code = None;
                self.event(Event::AuthFailed {
                    error: None,
                    attempts_left: None,
                    retry_after_ms: None,
                });
            } else {
                self.token = None;
                self.event(Event::TokenRejected);
            }
            return;
        }
        if lasted.is_some_and(|ms| ms >= STABLE_SESSION_MS) {
            self.attempt = 0;
        }
        self.attempt = self.attempt.saturating_add(1);
        let delay = self.config.backoff(self.attempt);
        self.state = ConnectionState::Waiting {
            retry_at: now.saturating_add(delay),
        };
        self.event(Event::Disconnected {
            reason,
            retry_in_ms: Some(delay),
        });
    }

    /// Starts the reconnect whose deadline passed. [`Client::poll_output`] calls this too.
    pub fn handle_timeout(&mut self, now: u64) {
        if let ConnectionState::Waiting { retry_at } = self.state
            && retry_at <= now
        {
            self.connect(now);
        }
        if let Some(deadline) = self.silence_deadline()
            && deadline <= now
        {
            self.push(Output::Close);
            self.disconnected(now, DisconnectReason::ServerTimeout);
        }
    }

    /// When a silent server is given up on (connected states only).
    fn silence_deadline(&self) -> Option<u64> {
        let timeout = self.config.server_timeout_ms?;
        matches!(
            self.state,
            ConnectionState::Authenticating | ConnectionState::Online { .. }
        )
        .then(|| self.last_heard.saturating_add(timeout))
    }

    /// Takes one text frame from the server.
    pub fn handle_text(&mut self, now: u64, text: &str) {
        self.stats.frames_in += 1;
        if matches!(
            self.state,
            ConnectionState::Authenticating | ConnectionState::Online { .. }
        ) {
            self.last_heard = now;
        }
        if text.len() > self.config.max_message_bytes {
            self.stats.too_large += 1;
            return;
        }
        let message = match ServerMessage::parse(text) {
            Ok(m) => m,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        match (self.state, message) {
            (
                ConnectionState::Authenticating | ConnectionState::Online { .. },
                ServerMessage::Ping,
            ) => {
                self.stats.pings += 1;
                self.send_automatic(ClientMessage::Pong);
            }
            (ConnectionState::Authenticating, ServerMessage::AuthResult(result)) => {
                self.code = None;
                if result.success {
                    self.token = Some(result.token.clone());
                    self.established(now, false);
                    self.event(Event::Paired {
                        token: result.token,
                    });
                    self.event(Event::Connected);
                } else {
                    self.push(Output::Close);
                    self.state = ConnectionState::Idle;
                    self.event(Event::AuthFailed {
                        error: result.error,
                        attempts_left: result.attempts_left,
                        retry_after_ms: result.retry_after_ms,
                    });
                }
            }
            (ConnectionState::Online { synced }, ServerMessage::AuthResult(result))
                if !result.success && !self.pairing =>
            {
                // The server refused our token after the upgrade (a host that cannot answer
                // the upgrade with 401 does this).
                let _ = synced;
                self.push(Output::Close);
                self.state = ConnectionState::Idle;
                self.permissions.clear();
                self.token = None;
                self.event(Event::TokenRejected);
            }
            (ConnectionState::Online { synced }, ServerMessage::AgentStateUpdate(state)) => {
                if !synced {
                    self.established(now, true);
                }
                self.agent = Some(state.clone());
                self.peer_event(Event::StateChanged {
                    state,
                    initial: !synced,
                });
            }
            (ConnectionState::Online { .. }, ServerMessage::Message(m)) => {
                self.peer_event(Event::Message(m));
            }
            (ConnectionState::Online { .. }, ServerMessage::TaskUpdate(t)) => {
                self.peer_event(Event::TaskUpdate(t));
            }
            (ConnectionState::Online { .. }, ServerMessage::PermissionRequest(request)) => {
                if self.permissions.contains(&request.id) {
                    self.stats.unexpected += 1;
                    return;
                }
                if self.queue_full() {
                    // Not shown, so not waiting for an answer either.
                    self.stats.dropped += 1;
                    return;
                }
                if self.permissions.len() >= self.config.max_pending_permissions.max(1) {
                    // Shown earlier, now unanswerable: counted, so that the app can tell.
                    self.permissions.pop_front();
                    self.stats.dropped += 1;
                }
                self.permissions.push_back(request.id.clone());
                self.event(Event::PermissionRequested(request));
            }
            _ => self.stats.unexpected += 1,
        }
    }

    /// A session is up: the backoff starts over if it lasts ([`STABLE_SESSION_MS`]).
    fn established(&mut self, now: u64, synced: bool) {
        self.established_at = Some(now);
        if self.state == ConnectionState::Authenticating {
            self.stats.sessions += 1;
        }
        self.state = ConnectionState::Online { synced };
    }

    /// Answers the permission request `id`; `remember` applies the answer to such calls from
    /// now on.
    pub fn respond_permission(
        &mut self,
        now: u64,
        id: &str,
        approved: bool,
        remember: bool,
    ) -> Result<(), LocalError> {
        let _ = now;
        self.online()?;
        self.room()?;
        let Some(index) = self.permissions.iter().position(|p| p == id) else {
            return Err(LocalError::UnknownPermission(id.to_owned()));
        };
        self.permissions.remove(index);
        self.send(ClientMessage::PermissionResponse(PermissionResponse {
            id: id.to_owned(),
            approved,
            remember,
        }));
        Ok(())
    }

    /// Sends an agent command.
    pub fn send_command(&mut self, now: u64, command: Command) -> Result<(), LocalError> {
        let _ = now;
        self.online()?;
        self.room()?;
        self.send(ClientMessage::Command(command));
        Ok(())
    }

    /// Sends a chat message (or the answer to the agent's question).
    pub fn send_message(&mut self, now: u64, content: &str) -> Result<(), LocalError> {
        let _ = now;
        self.online()?;
        self.room()?;
        self.send(ClientMessage::Message(UserMessage {
            content: content.to_owned(),
        }));
        Ok(())
    }

    fn online(&self) -> Result<(), LocalError> {
        match self.state {
            ConnectionState::Online { .. } => Ok(()),
            _ => Err(LocalError::NotConnected),
        }
    }

    fn send(&mut self, message: ClientMessage) {
        self.stats.frames_out += 1;
        self.queue.push_back(Output::Transmit(message.to_json()));
    }

    /// Queues a frame the engine sends on its own (a `pong`). Only a host that never drains
    /// fills the queue; these frames are what gives way then, instructions and events never do.
    fn send_automatic(&mut self, message: ClientMessage) {
        if self.queue_full() {
            self.stats.dropped += 1;
            return;
        }
        self.send(message);
    }

    fn queue_full(&self) -> bool {
        self.queue.len() >= self.config.max_queued
    }

    /// Refuses a host command while the queue is at its cap.
    fn room(&self) -> Result<(), LocalError> {
        match self.queue_full() {
            true => Err(LocalError::QueueFull {
                max: self.config.max_queued,
            }),
            false => Ok(()),
        }
    }

    /// An event caused by what the server sent: dropped (counted) at the cap.
    fn peer_event(&mut self, event: Event) {
        if self.queue_full() {
            self.stats.dropped += 1;
            return;
        }
        self.event(event);
    }

    fn event(&mut self, event: Event) {
        self.push(Output::Event(event));
    }

    fn push(&mut self, output: Output) {
        self.queue.push_back(output);
    }

    /// The next thing to do: an instruction, a frame, an event, or the instant to wake up at.
    /// Call it after every input until it returns [`Output::Timeout`].
    pub fn poll_output(&mut self, now: u64) -> Output {
        self.handle_timeout(now);
        if let Some(output) = self.queue.pop_front() {
            return output;
        }
        let deadline = match self.state {
            ConnectionState::Waiting { retry_at } => retry_at,
            _ => self
                .silence_deadline()
                .unwrap_or(u64::MAX)
                .min(now.saturating_add(IDLE_WAIT_MS)),
        };
        Output::Timeout(deadline.max(now))
    }
}

/// Reads a server frame the way [`Client::handle_text`] does (size limit, then parse), for
/// hosts that want the reason a frame was dropped (the engine only counts it).
pub fn parse_frame(text: &str, config: &Config) -> Result<ServerMessage, ParseError> {
    if text.len() > config.max_message_bytes {
        return Err(ParseError::TooLarge {
            size: text.len(),
            max: config.max_message_bytes,
        });
    }
    ServerMessage::parse(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mobile::message::RunningData;

    fn drain(c: &mut Client, now: u64) -> Vec<Output> {
        let mut out = Vec::new();
        loop {
            match c.poll_output(now) {
                Output::Timeout(_) => return out,
                o => out.push(o),
            }
        }
    }

    #[test]
    fn backoff_schedule() {
        let config = Config::default();
        let delays: Vec<u64> = (1..=8).map(|n| config.backoff(n)).collect();
        assert_eq!(
            delays,
            [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]
        );
    }

    #[test]
    fn token_connection_syncs_and_pongs() {
        let mut c = Client::new(Config::default(), Some("tok".into()));
        c.start(0).unwrap();
        assert_eq!(
            drain(&mut c, 0),
            [Output::Connect {
                bearer: Some("tok".into())
            }]
        );
        c.connected(1).unwrap();
        assert_eq!(drain(&mut c, 1), [Output::Event(Event::Connected)]);
        c.handle_text(2, r#"{"type":"ping","payload":null}"#);
        assert_eq!(
            drain(&mut c, 2),
            [Output::Transmit(r#"{"type":"pong","payload":null}"#.into())]
        );
        assert!(!c.is_synced());
        c.handle_text(
            3,
            r#"{"type":"agent_state_update","payload":{"status":"Running","data":{"task_id":"t","iteration":1}}}"#,
        );
        assert!(c.is_synced());
        let state = AgentState::Running(RunningData {
            task_id: "t".into(),
            iteration: 1,
        });
        assert_eq!(
            drain(&mut c, 3),
            [Output::Event(Event::StateChanged {
                state,
                initial: true
            })]
        );
    }

    /// Takes the pending `Connect`, connects and syncs at `now`.
    fn sync(c: &mut Client, now: u64) {
        assert!(
            drain(c, now)
                .iter()
                .any(|o| matches!(o, Output::Connect { .. }))
        );
        c.connected(now).unwrap();
        c.handle_text(
            now,
            r#"{"type":"agent_state_update","payload":{"status":"Idle","data":null}}"#,
        );
        assert!(c.is_synced());
        drain(c, now);
    }

    fn retry_in(c: &mut Client) -> Option<u64> {
        let ConnectionState::Waiting { .. } = c.connection_state() else {
            return None;
        };
        drain(c, 0).into_iter().find_map(|o| match o {
            Output::Event(Event::Disconnected { retry_in_ms, .. }) => retry_in_ms,
            _ => None,
        })
    }

    #[test]
    fn a_session_dropped_right_after_the_sync_does_not_reset_the_backoff() {
        // A desktop that syncs and then drops us at once (an oversize frame, a crash loop):
        // the waits grow as for a refused connection, not 1 s forever.
        let mut c = Client::new(Config::default(), Some("tok".into()));
        c.start(0).unwrap();
        let mut now = 0;
        let mut waits = Vec::new();
        for _ in 0..4 {
            sync(&mut c, now);
            c.disconnected(now + 50, DisconnectReason::Closed);
            let wait = retry_in(&mut c).expect("a reconnect is scheduled");
            waits.push(wait);
            now += 50 + wait;
            c.handle_timeout(now);
        }
        assert_eq!(waits, [1_000, 2_000, 4_000, 8_000]);
        assert_eq!(c.stats().sessions, 4);

        // A session that lasts starts the waits over.
        sync(&mut c, now);
        c.disconnected(now + STABLE_SESSION_MS, DisconnectReason::Closed);
        assert_eq!(retry_in(&mut c), Some(1_000));
    }

    #[test]
    fn permission_requests_past_the_cap_are_counted_when_dropped() {
        let mut c = Client::new(Config::default(), Some("tok".into()));
        c.start(0).unwrap();
        sync(&mut c, 0);
        let cap = Config::default().max_pending_permissions;
        for i in 0..100 {
            c.handle_text(
                1,
                &format!(
                    r#"{{"type":"permission_request","payload":{{"id":"p{i}","tool_name":"shell","command":"rm {i}","description":"d","tier":"high"}}}}"#
                ),
            );
        }
        let shown = drain(&mut c, 1)
            .into_iter()
            .filter(|o| matches!(o, Output::Event(Event::PermissionRequested(_))))
            .count();
        assert_eq!(shown, 100);
        let stats = c.stats();
        assert_eq!((stats.pending_permissions, stats.dropped), (cap as u64, 36));
        assert_eq!(c.pending_permissions().next(), Some("p36"));
        assert_eq!(
            c.respond_permission(2, "p0", true, false),
            Err(LocalError::UnknownPermission("p0".into()))
        );
        c.respond_permission(2, "p36", true, false).unwrap();
    }

    #[test]
    fn misuse_is_typed() {
        let mut c = Client::new(Config::default(), None);
        assert_eq!(c.start(0), Err(LocalError::NoCredentials));
        assert_eq!(c.connected(0), Err(LocalError::NotConnecting));
        assert!(matches!(c.pair(0, "12"), Err(LocalError::InvalidCode(_))));
        assert_eq!(c.send_message(0, "hi"), Err(LocalError::NotConnected));
        c.pair(0, "123456").unwrap();
        assert_eq!(c.pair(0, "123456"), Err(LocalError::AlreadyConnected));
    }

    #[test]
    fn unanswered_pongs_are_bounded() {
        let config = Config {
            max_queued: 3,
            ..Config::default()
        };
        let mut c = Client::new(config, Some("t".into()));
        c.start(0).unwrap();
        c.connected(0).unwrap();
        // Queue: Connect, Connected; then room for one pong.
        for _ in 0..5 {
            c.handle_text(1, r#"{"type":"ping"}"#);
        }
        assert_eq!(c.stats().dropped, 4);
        assert_eq!(drain(&mut c, 1).len(), 3);
    }

    #[test]
    fn garbage_is_counted() {
        let mut c = Client::new(Config::default(), Some("t".into()));
        c.start(0).unwrap();
        c.connected(0).unwrap();
        for text in [
            "",
            "{",
            "[]",
            r#"{"type":"nope"}"#,
            r#"{"type":"auth","payload":{"code":"1"}}"#,
        ] {
            c.handle_text(1, text);
        }
        c.handle_text(
            1,
            r#"{"type":"auth_result","payload":{"token":"x","success":true}}"#,
        );
        let stats = c.stats();
        assert_eq!((stats.malformed, stats.unexpected), (5, 1));
    }
}
