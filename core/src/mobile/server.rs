//! The desktop's end as a sans-IO engine: pairing, tokens, state sync, keep-alive,
//! permission prompts and broadcasts, for any number of phones.
//!
//! The host runs the WebSocket server. For each upgrade request it calls [`Server::open`] with
//! the bearer token of the `Authorization` header (see [`super::bearer_token`]) and follows the
//! [`Admission`]: refuse the upgrade with 401, or complete it. Then it feeds text frames with
//! [`Server::handle_text`], reports closed sockets with [`Server::closed`], and drains
//! [`Server::poll_output`].
//!
//! Choices where the spec leaves room:
//! - Pairing is open only while the user has asked for it: [`Server::start_pairing`] shows a
//!   code, and the engine never makes one by itself. A code is single-use (pairing is closed
//!   after a success until the user opens it again) and expires (`pairing_code_ttl_ms`). The
//!   attempt limit counts wrong codes across all connections (reconnecting does not reset it);
//!   at the limit the code is burnt and every attempt, the right code included, is refused
//!   until the user asks for a new one. A host must call `start_pairing` only on the user's
//!   action, never after a failure or a success: each new code gives a guesser a new chance.
//! - Wrong codes also start a backoff that spans codes: after the n-th wrong code in a row no
//!   attempt is looked at for `pairing_backoff_ms` × 2ⁿ⁻¹ (at most `max_pairing_backoff_ms`);
//!   attempts in that window are refused unread ([`PairingFailure::Throttled`]) and do not
//!   lengthen it. Only a successful pairing resets it (a new code does not).
//! - A failed pairing attempt is answered with `auth_result` (`success: false`, with
//!   deskwire's `attempts_left` and `retry_after_ms` members when they apply) and the
//!   connection is closed: a retry needs a new connection, which slows guessing.
//! - Tokens are never forgotten to make room: with `max_tokens` held, `start_pairing` and
//!   [`Server::add_token`] fail with [`LocalError::TokensFull`] and a pairing attempt is refused
//!   ([`PairingFailure::TokensFull`]) until the user revokes a phone.
//! - An invalid bearer token is refused at the upgrade (the host answers 401). Connections
//!   without a token have their own small budget (`max_unpaired_connections`) and must pair
//!   within `auth_timeout_ms`; they never count against `max_connections`, so idle sockets
//!   cannot keep out a phone that has a token.
//! - Each session remembers the token it used; revoking a token closes its sessions
//!   ([`CloseReason::Revoked`]).
//! - On every new session the server sends the current state, then every permission request
//!   still waiting (so a phone that dropped and came back can still answer it).
//! - Pairing codes and tokens (256 bits, hex-encoded) are secrets: they come from the 32 bytes
//!   of entropy given to [`Server::new`], expanded with ChaCha20 ([`crate::entropy`]), so give
//!   it bytes from the operating system's random source. Permission ids are not secret: they
//!   come from a generator seeded from that source too, and say nothing about the secrets.
//!   Presented codes and tokens are compared in constant time.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt;

use super::message::{
    AgentState, AuthResult, ChatMessage, ClientMessage, Command, PermissionRequest, ServerMessage,
    TaskUpdate,
};
use super::{IDLE_WAIT_MS, LocalError};
use crate::entropy::{Entropy, SecretRng};
use crate::gateway::secret::constant_time_eq;
use crate::ids::IdGenerator;

/// A connection, numbered by the host. JSON: the number.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct ConnId(pub u64);

// Kotlin: `typealias ConnId = ULong`.
#[cfg(feature = "uniffi")]
uniffi::custom_newtype!(ConnId, u64);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Server configuration. The spec gives no numbers for these; the defaults are ours. JSON: the
/// fields by name; missing ones take the defaults, unknown ones are refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How long a pairing code stays valid.
    pub pairing_code_ttl_ms: u64,
    /// Wrong codes (in all) before the code is burnt.
    pub max_pairing_attempts: u32,
    /// After the first wrong code in a row, no attempt is looked at for this long; each further
    /// wrong code doubles it, across codes, until a pairing succeeds.
    pub pairing_backoff_ms: u64,
    /// The longest such wait.
    pub max_pairing_backoff_ms: u64,
    /// How long a connection without a token may take to pair. Short: a phone sends the code
    /// as soon as the socket opens.
    pub auth_timeout_ms: u64,
    /// Connections without a token (pairing, or idle) open at most; beyond, the upgrade is
    /// refused (503). They are counted apart from `max_connections`.
    pub max_unpaired_connections: usize,
    /// Time between pings to a connected phone.
    pub ping_interval_ms: u64,
    /// Pings in a row without a pong before the connection is closed.
    pub max_missed_pongs: u32,
    /// How long a permission request waits for an answer.
    pub permission_timeout_ms: u64,
    /// Permission requests waiting at most.
    pub max_pending_permissions: usize,
    /// Answered or expired permission ids remembered, to tell a duplicate answer from an
    /// unknown one.
    pub answered_memory: usize,
    /// Authenticated connections (sessions) open at most; beyond, a token upgrade is refused
    /// (503) and so is a pairing attempt.
    pub max_connections: usize,
    /// Tokens kept at most. At the cap, pairing and `add_token` are refused: no phone is ever
    /// pushed out to make room for another (revoke one first).
    pub max_tokens: usize,
    /// Larger text frames are ignored (counted).
    pub max_message_bytes: usize,
    /// Outputs queued at most when the host does not drain `poll_output`. At the cap,
    /// broadcast frames (state, chat, task updates), what phones send (commands, chat, as
    /// events) and the engine's own pings are dropped and counted (`Stats::dropped`; a phone
    /// that missed a state update gets the current state when it reconnects), and
    /// [`Server::request_permission`] fails with [`LocalError::QueueFull`]. Only what the host's
    /// own calls and the connections' lifecycle make (auth results, state sync, closes,
    /// connection events) goes past it.
    pub max_queued: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pairing_code_ttl_ms: 5 * 60_000,
            max_pairing_attempts: 5,
            pairing_backoff_ms: 1_000,
            max_pairing_backoff_ms: 60_000,
            auth_timeout_ms: 10_000,
            max_unpaired_connections: 4,
            ping_interval_ms: 15_000,
            max_missed_pongs: 2,
            permission_timeout_ms: 5 * 60_000,
            max_pending_permissions: 64,
            answered_memory: 256,
            max_connections: 8,
            max_tokens: 16,
            max_message_bytes: 64 * 1024,
            max_queued: 4096,
        }
    }
}

/// What to do with an upgrade request. JSON: `"authenticated"`, `"awaiting_pairing"`,
/// `{"refused": "bad_token"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum Admission {
    /// The token is valid: complete the upgrade; the state sync is queued.
    Authenticated,
    /// No token: complete the upgrade; the phone must send `auth` with the pairing code.
    AwaitingPairing,
    /// Refuse the upgrade (401 for a bad token, 503 for too many connections).
    Refused(#[cfg_attr(feature = "uniffi", uniffi(name = "refusal"))] Refusal),
}

/// Why an upgrade is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum Refusal {
    /// The bearer token is not one we issued (or it was revoked).
    BadToken,
    /// `max_connections` sessions are open.
    TooManyConnections,
    /// `max_unpaired_connections` connections without a token are open.
    TooManyUnpaired,
}

/// Why a pairing attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum PairingFailure {
    /// Not the code shown; `attempts_left` more wrong codes burn it.
    WrongCode {
        /// Wrong codes still allowed.
        attempts_left: u32,
    },
    /// Too many wrong codes: refused until a new code is shown.
    LockedOut,
    /// No code is shown (none started, used, cancelled or expired).
    NoActiveCode,
    /// Sent too soon after a wrong code: not looked at.
    Throttled {
        /// When an attempt is looked at again.
        retry_after_ms: u64,
    },
    /// `max_tokens` phones are paired: the user must revoke one first.
    TokensFull,
    /// `max_connections` sessions are open.
    TooManyConnections,
}

impl PairingFailure {
    /// The `error` text of the `auth_result`.
    pub fn message(&self) -> String {
        match self {
            PairingFailure::WrongCode { attempts_left } => {
                format!("invalid pairing code; {attempts_left} more wrong code(s) burn it")
            }
            PairingFailure::LockedOut => {
                "too many wrong codes; ask for a new code on the desktop".to_owned()
            }
            PairingFailure::NoActiveCode => "no pairing code is active on the desktop".to_owned(),
            PairingFailure::Throttled { retry_after_ms } => format!(
                "too many wrong codes in a row; try again in {} s",
                retry_after_ms.div_ceil(1000)
            ),
            PairingFailure::TokensFull => {
                "the desktop keeps no more phones; revoke one on the desktop first".to_owned()
            }
            PairingFailure::TooManyConnections => {
                "too many phones are connected to the desktop".to_owned()
            }
        }
    }
}

/// Why the server closed a connection, or saw it close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum CloseReason {
    /// The host reported the socket closed.
    Closed,
    /// Too many pings went unanswered.
    PongTimeout,
    /// The connection did not pair in time.
    AuthTimeout,
    /// The pairing attempt failed.
    AuthFailed,
    /// The host asked for it ([`Server::close`]).
    Requested,
    /// The token the session used was revoked ([`Server::revoke_token`]).
    Revoked,
}

/// How a session was authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum AuthMethod {
    /// A bearer token on the upgrade.
    Token,
    /// A pairing code.
    Pairing,
}

/// What the application should learn. JSON: externally tagged, snake_case
/// (`{"client_connected": {"conn": 1, "via": "token"}}`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "MobileServerEvent"))]
pub enum Event {
    /// A phone's session started (the state sync is on its way).
    ClientConnected {
        /// The connection.
        conn: ConnId,
        /// How it authenticated.
        via: AuthMethod,
    },
    /// A phone paired: persist `token` (and give it to [`Server::add_token`] after a restart).
    Paired {
        /// The connection.
        conn: ConnId,
        /// The new token. A secret: never log it.
        token: String,
    },
    /// A pairing attempt failed (the connection is being closed).
    PairingFailed {
        /// The connection.
        conn: ConnId,
        /// Why.
        failure: PairingFailure,
    },
    /// A connection ended.
    ClientDisconnected {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: CloseReason,
    },
    /// A phone sent an agent command.
    Command {
        /// The connection.
        conn: ConnId,
        /// The command.
        command: Command,
    },
    /// A phone sent a chat message.
    UserMessage {
        /// The connection.
        conn: ConnId,
        /// The text.
        content: String,
    },
    /// A permission request was answered (the first answer wins).
    PermissionAnswered {
        /// The request id.
        id: String,
        /// Who answered.
        conn: ConnId,
        /// Whether the call may run.
        approved: bool,
        /// Whether to apply the answer to such calls from now on.
        remember: bool,
    },
    /// Nobody answered a permission request in time.
    PermissionTimedOut {
        /// The request id.
        id: String,
    },
}

/// What the server wants from the host next. JSON: externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "MobileServerOutput"))]
pub enum Output {
    /// Send this text frame on `conn`.
    Transmit {
        /// The connection.
        conn: ConnId,
        /// The frame.
        text: String,
    },
    /// Close `conn` (the engine forgot it already; `closed` need not be called).
    Close {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: CloseReason,
    },
    /// Tell the application.
    Event(#[cfg_attr(feature = "uniffi", uniffi(name = "event"))] Event),
    /// Nothing to do before this instant (ms), unless new input arrives.
    Timeout(#[cfg_attr(feature = "uniffi", uniffi(name = "deadline_ms"))] u64),
}

/// A permission request to show, without its id (the server makes one). JSON:
/// `{"tool_name", "command", "description", "tier"}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
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

/// Counters. `connections`, `pending_permissions` and `tokens` are gauges; the rest only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[cfg_attr(feature = "uniffi", uniffi(name = "MobileServerStats"))]
pub struct Stats {
    /// Text frames received.
    pub frames_in: u64,
    /// Text frames sent.
    pub frames_out: u64,
    /// Frames that were not valid client messages.
    pub malformed: u64,
    /// Frames over `max_message_bytes`.
    pub too_large: u64,
    /// Valid messages that made no sense (anything but `auth` before pairing, `auth` after,
    /// text on an unknown connection).
    pub unexpected: u64,
    /// Upgrades refused for a bad token.
    pub bad_tokens: u64,
    /// Wrong pairing codes (including attempts while locked out or without a code).
    pub pairing_failures: u64,
    /// Answers to permission requests we never made.
    pub unknown_permission_responses: u64,
    /// Second answers, or answers after the timeout.
    pub duplicate_permission_responses: u64,
    /// Pongs without an outstanding ping.
    pub unsolicited_pongs: u64,
    /// Broadcast frames, pings and phones' commands and chat dropped because the queue was full.
    pub dropped: u64,
    /// Connections open now.
    pub connections: u64,
    /// Permission requests waiting now.
    pub pending_permissions: u64,
    /// Tokens held now.
    pub tokens: u64,
}

#[derive(Debug)]
struct Pairing {
    code: String,
    expires_at: u64,
    wrong: u32,
}

#[derive(Debug)]
struct Conn {
    authenticated: bool,
    /// The token the session presented or was issued (to close it when revoked).
    token: Option<String>,
    /// Unpaired: the auth deadline; paired: the next ping.
    deadline: u64,
    awaiting_pong: bool,
    missed: u32,
}

#[derive(Debug)]
struct Pending {
    request: PermissionRequest,
    deadline: u64,
}

/// The desktop's end. See the [module docs](self).
#[derive(Debug)]
pub struct Server {
    config: Config,
    /// Pairing codes and tokens.
    secrets: SecretRng,
    /// Permission ids (not secret).
    ids: IdGenerator,
    agent: AgentState,
    tokens: VecDeque<String>,
    pairing: Option<Pairing>,
    /// Wrong codes since the last successful pairing, and when an attempt is looked at again.
    wrong_in_a_row: u32,
    next_attempt_at: u64,
    conns: BTreeMap<ConnId, Conn>,
    /// Waiting permission requests, by id; `order` keeps them oldest first.
    pending: BTreeMap<String, Pending>,
    order: VecDeque<String>,
    answered: VecDeque<String>,
    answered_set: HashSet<String>,
    queue: VecDeque<Output>,
    stats: Stats,
}

impl Server {
    /// A server with `config`. `entropy` (32 bytes from the OS's random source, e.g.
    /// `getrandom::fill`) fixes its pairing codes, tokens and permission ids: the same bytes
    /// replay the same secrets, so never derive them from a clock or a counter.
    pub fn new(config: Config, entropy: Entropy) -> Self {
        let mut secrets = SecretRng::new(entropy);
        let ids = IdGenerator::new(secrets.next_u64());
        Server {
            config,
            secrets,
            ids,
            agent: AgentState::Idle,
            tokens: VecDeque::new(),
            pairing: None,
            wrong_in_a_row: 0,
            next_attempt_at: 0,
            conns: BTreeMap::new(),
            pending: BTreeMap::new(),
            order: VecDeque::new(),
            answered: VecDeque::new(),
            answered_set: HashSet::new(),
            queue: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let mut stats = self.stats;
        stats.connections = self.conns.len() as u64;
        stats.pending_permissions = self.pending.len() as u64;
        stats.tokens = self.tokens.len() as u64;
        stats
    }

    /// The agent state phones are synced to.
    pub fn agent_state(&self) -> &AgentState {
        &self.agent
    }

    /// Accepts a token issued earlier (restored from storage). Empty and known tokens are
    /// ignored; with `max_tokens` held, [`LocalError::TokensFull`] (none is ever dropped to make
    /// room).
    pub fn add_token(&mut self, token: &str) -> Result<(), LocalError> {
        if token.is_empty() || self.token_index(token).is_some() {
            return Ok(());
        }
        self.tokens_room()?;
        self.tokens.push_back(token.to_owned());
        Ok(())
    }

    fn tokens_room(&self) -> Result<(), LocalError> {
        let max = self.config.max_tokens.max(1);
        match self.tokens.len() >= max {
            true => Err(LocalError::TokensFull { max }),
            false => Ok(()),
        }
    }

    /// Stops accepting `token`; returns whether it was known. The sessions that used it are
    /// closed (an [`Output::Close`] and a [`Event::ClientDisconnected`] with
    /// [`CloseReason::Revoked`] each).
    pub fn revoke_token(&mut self, token: &str) -> bool {
        let Some(i) = self.token_index(token) else {
            return false;
        };
        self.tokens.remove(i);
        let using: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.token.as_deref() == Some(token))
            .map(|(&id, _)| id)
            .collect();
        for conn in using {
            self.drop_conn(conn, CloseReason::Revoked);
        }
        true
    }

    /// Which token matches, checking every token in constant time each (no early exit, so
    /// the time does not say how many tokens exist before the match).
    fn token_index(&self, presented: &str) -> Option<usize> {
        let mut found = None;
        for (i, token) in self.tokens.iter().enumerate() {
            if constant_time_eq(presented.as_bytes(), token.as_bytes()) {
                found = Some(i);
            }
        }
        found
    }

    /// Opens pairing with a new six-digit code to show, replacing any earlier one and its
    /// attempt count (not the backoff). Call it only when the user asks: pairing stays closed
    /// after a success, a burnt code or an expired one until then. [`LocalError::TokensFull`]
    /// while `max_tokens` phones are paired.
    pub fn start_pairing(&mut self, now: u64) -> Result<String, LocalError> {
        self.tokens_room()?;
        let code = self.secrets.digits(6);
        self.pairing = Some(Pairing {
            code: code.clone(),
            expires_at: now.saturating_add(self.config.pairing_code_ttl_ms),
            wrong: 0,
        });
        Ok(code)
    }

    /// Withdraws the pairing code.
    pub fn cancel_pairing(&mut self) {
        self.pairing = None;
    }

    /// The code to show, while one is valid and not burnt.
    pub fn pairing_code(&self, now: u64) -> Option<&str> {
        self.pairing
            .as_ref()
            .filter(|p| p.expires_at > now && p.wrong < self.config.max_pairing_attempts)
            .map(|p| p.code.as_str())
    }

    /// An upgrade request arrived on `conn` with `bearer` (the token of its `Authorization:
    /// Bearer` header, if any).
    pub fn open(
        &mut self,
        now: u64,
        conn: ConnId,
        bearer: Option<&str>,
    ) -> Result<Admission, LocalError> {
        if self.conns.contains_key(&conn) {
            return Err(LocalError::DuplicateConnection(conn.0));
        }
        match bearer {
            Some(token) => {
                if self.token_index(token).is_none() {
                    self.stats.bad_tokens += 1;
                    return Ok(Admission::Refused(Refusal::BadToken));
                }
                if self.sessions() >= self.config.max_connections {
                    return Ok(Admission::Refused(Refusal::TooManyConnections));
                }
                self.conns.insert(
                    conn,
                    Conn {
                        authenticated: false,
                        token: Some(token.to_owned()),
                        deadline: now,
                        awaiting_pong: false,
                        missed: 0,
                    },
                );
                self.begin_session(now, conn, AuthMethod::Token);
                Ok(Admission::Authenticated)
            }
            None => {
                if self.conns.len() - self.sessions() >= self.config.max_unpaired_connections {
                    return Ok(Admission::Refused(Refusal::TooManyUnpaired));
                }
                self.conns.insert(
                    conn,
                    Conn {
                        authenticated: false,
                        token: None,
                        deadline: now.saturating_add(self.config.auth_timeout_ms),
                        awaiting_pong: false,
                        missed: 0,
                    },
                );
                Ok(Admission::AwaitingPairing)
            }
        }
    }

    /// Authenticated connections open now.
    fn sessions(&self) -> usize {
        self.conns.values().filter(|c| c.authenticated).count()
    }

    fn begin_session(&mut self, now: u64, conn: ConnId, via: AuthMethod) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.authenticated = true;
            c.deadline = now.saturating_add(self.config.ping_interval_ms);
        }
        self.event(Event::ClientConnected { conn, via });
        self.send(conn, &ServerMessage::AgentStateUpdate(self.agent.clone()));
        let waiting: Vec<ServerMessage> = self
            .order
            .iter()
            .filter_map(|id| self.pending.get(id))
            .map(|p| ServerMessage::PermissionRequest(p.request.clone()))
            .collect();
        for message in waiting {
            self.send(conn, &message);
        }
    }

    /// The socket of `conn` closed. Unknown connections (already closed by the engine) are
    /// ignored.
    pub fn closed(&mut self, now: u64, conn: ConnId) {
        let _ = now;
        if self.conns.remove(&conn).is_some() {
            self.event(Event::ClientDisconnected {
                conn,
                reason: CloseReason::Closed,
            });
        }
    }

    /// Closes `conn` (an `Output::Close` follows).
    pub fn close(&mut self, now: u64, conn: ConnId) -> Result<(), LocalError> {
        let _ = now;
        if !self.conns.contains_key(&conn) {
            return Err(LocalError::UnknownConnection(conn.0));
        }
        self.drop_conn(conn, CloseReason::Requested);
        Ok(())
    }

    fn drop_conn(&mut self, conn: ConnId, reason: CloseReason) {
        self.conns.remove(&conn);
        self.queue.push_back(Output::Close { conn, reason });
        self.event(Event::ClientDisconnected { conn, reason });
    }

    /// Takes one text frame from `conn`.
    pub fn handle_text(&mut self, now: u64, conn: ConnId, text: &str) {
        self.stats.frames_in += 1;
        let Some(c) = self.conns.get(&conn) else {
            self.stats.unexpected += 1;
            return;
        };
        let authenticated = c.authenticated;
        if text.len() > self.config.max_message_bytes {
            self.stats.too_large += 1;
            return;
        }
        let Ok(message) = ClientMessage::parse(text) else {
            self.stats.malformed += 1;
            return;
        };
        match (authenticated, message) {
            (false, ClientMessage::Auth(auth)) => self.try_pair(now, conn, &auth.code),
            (true, ClientMessage::Pong) => {
                let c = self.conns.get_mut(&conn).expect("checked above");
                if c.awaiting_pong {
                    c.awaiting_pong = false;
                    c.missed = 0;
                } else {
                    self.stats.unsolicited_pongs += 1;
                }
            }
            (true, ClientMessage::Command(command)) => {
                self.peer_event(Event::Command { conn, command });
            }
            (true, ClientMessage::Message(m)) => {
                self.peer_event(Event::UserMessage {
                    conn,
                    content: m.content,
                });
            }
            (true, ClientMessage::PermissionResponse(r)) => {
                if self.pending.remove(&r.id).is_some() {
                    self.order.retain(|id| id != &r.id);
                    self.remember_answered(r.id.clone());
                    self.event(Event::PermissionAnswered {
                        id: r.id,
                        conn,
                        approved: r.approved,
                        remember: r.remember,
                    });
                } else if self.answered_set.contains(&r.id) {
                    self.stats.duplicate_permission_responses += 1;
                } else {
                    self.stats.unknown_permission_responses += 1;
                }
            }
            // Anything but `auth` before pairing is ignored: an unpaired phone controls nothing.
            _ => self.stats.unexpected += 1,
        }
    }

    fn try_pair(&mut self, now: u64, conn: ConnId, code: &str) {
        match self.check_code(now, code) {
            Ok(()) => {
                self.pairing = None;
                self.wrong_in_a_row = 0;
                self.next_attempt_at = 0;
                let token = self.new_token();
                self.tokens.push_back(token.clone());
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.token = Some(token.clone());
                }
                self.send(
                    conn,
                    &ServerMessage::AuthResult(AuthResult::success(&token)),
                );
                self.event(Event::Paired {
                    conn,
                    token: token.clone(),
                });
                self.begin_session(now, conn, AuthMethod::Pairing);
            }
            Err(failure) => {
                self.stats.pairing_failures += 1;
                let mut result = AuthResult::failure(failure.message());
                result.attempts_left = match failure {
                    PairingFailure::WrongCode { attempts_left } => Some(attempts_left),
                    PairingFailure::LockedOut => Some(0),
                    _ => None,
                };
                result.retry_after_ms =
                    Some(self.next_attempt_at.saturating_sub(now)).filter(|&ms| ms > 0);
                self.send(conn, &ServerMessage::AuthResult(result));
                self.event(Event::PairingFailed { conn, failure });
                self.drop_conn(conn, CloseReason::AuthFailed);
            }
        }
    }

    /// Whether `code` pairs now. Only a code that is actually compared can count as wrong.
    fn check_code(&mut self, now: u64, code: &str) -> Result<(), PairingFailure> {
        if now < self.next_attempt_at {
            return Err(PairingFailure::Throttled {
                retry_after_ms: self.next_attempt_at - now,
            });
        }
        let max = self.config.max_pairing_attempts;
        let tokens_full = self.tokens_room().is_err();
        let sessions_full = self.sessions() >= self.config.max_connections;
        let p = match &mut self.pairing {
            Some(p) if p.expires_at > now => p,
            _ => return Err(PairingFailure::NoActiveCode),
        };
        if p.wrong >= max {
            return Err(PairingFailure::LockedOut);
        }
        if tokens_full {
            return Err(PairingFailure::TokensFull);
        }
        if sessions_full {
            return Err(PairingFailure::TooManyConnections);
        }
        if constant_time_eq(code.as_bytes(), p.code.as_bytes()) {
            return Ok(());
        }
        p.wrong += 1;
        let wrong = p.wrong;
        self.wrong_in_a_row = self.wrong_in_a_row.saturating_add(1);
        let factor = 1u64
            .checked_shl(self.wrong_in_a_row - 1)
            .unwrap_or(u64::MAX);
        let wait = self
            .config
            .pairing_backoff_ms
            .saturating_mul(factor)
            .min(self.config.max_pairing_backoff_ms);
        self.next_attempt_at = now.saturating_add(wait);
        Err(if wrong >= max {
            PairingFailure::LockedOut
        } else {
            PairingFailure::WrongCode {
                attempts_left: max - wrong,
            }
        })
    }

    fn new_token(&mut self) -> String {
        loop {
            let token = self.secrets.hex_token(32);
            if self.token_index(&token).is_none() {
                return token;
            }
        }
    }

    fn remember_answered(&mut self, id: String) {
        if self.config.answered_memory == 0 || !self.answered_set.insert(id.clone()) {
            return;
        }
        self.answered.push_back(id);
        while self.answered.len() > self.config.answered_memory {
            if let Some(old) = self.answered.pop_front() {
                self.answered_set.remove(&old);
            }
        }
    }

    /// Sets the agent state and sends it to every phone.
    pub fn set_state(&mut self, now: u64, state: AgentState) {
        let _ = now;
        self.agent = state;
        self.broadcast(&ServerMessage::AgentStateUpdate(self.agent.clone()));
    }

    /// Sends a chat message to every phone.
    pub fn send_message(&mut self, now: u64, message: ChatMessage) {
        let _ = now;
        self.broadcast(&ServerMessage::Message(message));
    }

    /// Sends task progress to every phone.
    pub fn send_task_update(&mut self, now: u64, update: TaskUpdate) {
        let _ = now;
        self.broadcast(&ServerMessage::TaskUpdate(update));
    }

    /// Asks the phones for permission; returns the request id that
    /// [`Event::PermissionAnswered`] or [`Event::PermissionTimedOut`] will carry. Phones that
    /// connect later get it too, while it waits.
    pub fn request_permission(
        &mut self,
        now: u64,
        permission: NewPermission,
    ) -> Result<String, LocalError> {
        if self.pending.len() >= self.config.max_pending_permissions {
            return Err(LocalError::TooManyPending(self.pending.len()));
        }
        if self.queue_full() {
            return Err(LocalError::QueueFull {
                max: self.config.max_queued,
            });
        }
        let id = loop {
            let id = self.ids.next_uuid_v4();
            if !self.pending.contains_key(&id) && !self.answered_set.contains(&id) {
                break id;
            }
        };
        let request = PermissionRequest {
            id: id.clone(),
            tool_name: permission.tool_name,
            command: permission.command,
            description: permission.description,
            tier: permission.tier,
        };
        self.broadcast(&ServerMessage::PermissionRequest(request.clone()));
        self.pending.insert(
            id.clone(),
            Pending {
                request,
                deadline: now.saturating_add(self.config.permission_timeout_ms),
            },
        );
        self.order.push_back(id.clone());
        Ok(id)
    }

    /// Withdraws a waiting permission request (the agent no longer needs it). A later answer
    /// is counted as a duplicate.
    pub fn cancel_permission(&mut self, now: u64, id: &str) -> Result<(), LocalError> {
        let _ = now;
        if self.pending.remove(id).is_none() {
            return Err(LocalError::UnknownPermission(id.to_owned()));
        }
        self.order.retain(|p| p != id);
        self.remember_answered(id.to_owned());
        Ok(())
    }

    /// Ids of the permission requests waiting, oldest first.
    pub fn pending_permissions(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    /// Connections open now, paired or not.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Whether `conn` is open and authenticated.
    pub fn is_authenticated(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.authenticated)
    }

    fn broadcast(&mut self, message: &ServerMessage) {
        let text = message.to_json();
        let targets: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.authenticated)
            .map(|(&id, _)| id)
            .collect();
        for conn in targets {
            if self.queue_full() {
                self.stats.dropped += 1;
            } else {
                self.transmit(conn, text.clone());
            }
        }
    }

    fn queue_full(&self) -> bool {
        self.queue.len() >= self.config.max_queued
    }

    /// An event caused by what a phone sent: dropped (counted) at the cap.
    fn peer_event(&mut self, event: Event) {
        if self.queue_full() {
            self.stats.dropped += 1;
        } else {
            self.event(event);
        }
    }

    fn send(&mut self, conn: ConnId, message: &ServerMessage) {
        self.transmit(conn, message.to_json());
    }

    fn transmit(&mut self, conn: ConnId, text: String) {
        self.stats.frames_out += 1;
        self.queue.push_back(Output::Transmit { conn, text });
    }

    fn event(&mut self, event: Event) {
        self.queue.push_back(Output::Event(event));
    }

    /// Does what is due by `now`: pings, closes for missed pongs and pairing timeouts,
    /// permission timeouts. [`Server::poll_output`] calls this too.
    pub fn handle_timeout(&mut self, now: u64) {
        let due: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(&id, _)| id)
            .collect();
        for conn in due {
            let Some(c) = self.conns.get_mut(&conn) else {
                continue;
            };
            if !c.authenticated {
                self.drop_conn(conn, CloseReason::AuthTimeout);
                continue;
            }
            if c.awaiting_pong {
                c.missed += 1;
                if c.missed >= self.config.max_missed_pongs.max(1) {
                    self.drop_conn(conn, CloseReason::PongTimeout);
                    continue;
                }
            }
            c.awaiting_pong = true;
            // From now, not from the old deadline: a host that slept long sends one ping, not
            // a burst.
            c.deadline = now.saturating_add(self.config.ping_interval_ms.max(1));
            if self.queue_full() {
                self.stats.dropped += 1;
            } else {
                self.send(conn, &ServerMessage::Ping);
            }
        }
        while let Some(id) = self.order.front() {
            let expired = self.pending.get(id).is_none_or(|p| p.deadline <= now);
            if !expired {
                // Requests are made in order with one timeout, so the rest are later.
                break;
            }
            let id = self.order.pop_front().expect("front exists");
            if self.pending.remove(&id).is_some() {
                self.remember_answered(id.clone());
                self.event(Event::PermissionTimedOut { id });
            }
        }
    }

    /// The next thing to do: a frame to send, a connection to close, an event, or the instant
    /// to wake up at. Call it after every input until it returns [`Output::Timeout`].
    pub fn poll_output(&mut self, now: u64) -> Output {
        self.handle_timeout(now);
        if let Some(output) = self.queue.pop_front() {
            return output;
        }
        let mut deadline = now.saturating_add(IDLE_WAIT_MS);
        if let Some(d) = self.conns.values().map(|c| c.deadline).min() {
            deadline = deadline.min(d);
        }
        if let Some(p) = self.order.front().and_then(|id| self.pending.get(id)) {
            deadline = deadline.min(p.deadline);
        }
        Output::Timeout(deadline.max(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(s: &mut Server, now: u64) -> Vec<Output> {
        let mut out = Vec::new();
        loop {
            match s.poll_output(now) {
                Output::Timeout(_) => return out,
                o => out.push(o),
            }
        }
    }

    #[test]
    fn codes_are_six_digits_and_deterministic() {
        let mut a = Server::new(Config::default(), [9; 32]);
        let mut b = Server::new(Config::default(), [9; 32]);
        for _ in 0..50 {
            let code = a.start_pairing(0).unwrap();
            assert!(crate::mobile::is_valid_code(&code), "{code}");
            assert_eq!(code, b.start_pairing(0).unwrap());
        }
    }

    #[test]
    fn pairing_then_token() {
        let mut s = Server::new(Config::default(), [1; 32]);
        let code = s.start_pairing(0).unwrap();
        assert_eq!(s.open(0, ConnId(1), None), Ok(Admission::AwaitingPairing));
        s.handle_text(
            1,
            ConnId(1),
            &format!(r#"{{"type":"auth","payload":{{"code":"{code}"}}}}"#),
        );
        let out = drain(&mut s, 1);
        let token = out
            .iter()
            .find_map(|o| match o {
                Output::Event(Event::Paired { token, .. }) => Some(token.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(token.len(), 64);
        assert!(s.is_authenticated(ConnId(1)));
        assert_eq!(s.pairing_code(1), None, "codes are single-use");
        assert_eq!(
            s.open(2, ConnId(2), Some(&token)),
            Ok(Admission::Authenticated)
        );
        assert_eq!(
            s.open(2, ConnId(3), Some("nope")),
            Ok(Admission::Refused(Refusal::BadToken))
        );
        assert_eq!(
            s.open(2, ConnId(2), None),
            Err(LocalError::DuplicateConnection(2))
        );
    }

    #[test]
    fn unpaired_connections_control_nothing_and_time_out() {
        let mut s = Server::new(Config::default(), [1; 32]);
        s.open(0, ConnId(1), None).unwrap();
        s.handle_text(
            1,
            ConnId(1),
            r#"{"type":"command","payload":{"action":"start"}}"#,
        );
        assert_eq!(drain(&mut s, 1), []);
        assert_eq!(s.stats().unexpected, 1);
        let out = drain(&mut s, Config::default().auth_timeout_ms);
        assert_eq!(
            out[0],
            Output::Close {
                conn: ConnId(1),
                reason: CloseReason::AuthTimeout
            }
        );
    }

    #[test]
    fn connection_limits_and_host_close() {
        let mut s = Server::new(
            Config {
                max_connections: 1,
                max_unpaired_connections: 1,
                ..Config::default()
            },
            [1; 32],
        );
        s.add_token("t").unwrap();
        assert_eq!(s.open(0, ConnId(1), None), Ok(Admission::AwaitingPairing));
        assert_eq!(
            s.open(0, ConnId(2), None),
            Ok(Admission::Refused(Refusal::TooManyUnpaired))
        );
        // Budgets apart: a phone with a token gets in past the unpaired one, and is alone in
        // its own.
        assert_eq!(
            s.open(0, ConnId(3), Some("t")),
            Ok(Admission::Authenticated)
        );
        assert_eq!(
            s.open(0, ConnId(4), Some("t")),
            Ok(Admission::Refused(Refusal::TooManyConnections))
        );
        assert_eq!(
            s.open(0, ConnId(4), Some("forged")),
            Ok(Admission::Refused(Refusal::BadToken)),
            "a bad token is told apart from a full server"
        );
        s.close(0, ConnId(3)).unwrap();
        drain(&mut s, 0);
        assert_eq!(s.close(0, ConnId(1)), Ok(()));
        assert_eq!(
            drain(&mut s, 0),
            [
                Output::Close {
                    conn: ConnId(1),
                    reason: CloseReason::Requested
                },
                Output::Event(Event::ClientDisconnected {
                    conn: ConnId(1),
                    reason: CloseReason::Requested
                })
            ]
        );
        assert_eq!(s.close(0, ConnId(1)), Err(LocalError::UnknownConnection(1)));
        // The host reporting the socket closed afterwards is harmless.
        s.closed(0, ConnId(1));
        assert_eq!(drain(&mut s, 0), []);
        assert_eq!(s.open(0, ConnId(2), None), Ok(Admission::AwaitingPairing));
    }

    #[test]
    fn token_table_is_bounded_and_never_evicts() {
        let mut s = Server::new(
            Config {
                max_tokens: 2,
                ..Config::default()
            },
            [1; 32],
        );
        assert_eq!(s.add_token("a"), Ok(()));
        assert_eq!(s.add_token("b"), Ok(()));
        assert_eq!(s.add_token("a"), Ok(()), "a known token is no new one");
        assert_eq!(s.add_token("c"), Err(LocalError::TokensFull { max: 2 }));
        assert_eq!(s.start_pairing(0), Err(LocalError::TokensFull { max: 2 }));
        assert_eq!(s.stats().tokens, 2);
        assert_eq!(
            s.open(0, ConnId(1), Some("a")),
            Ok(Admission::Authenticated)
        );
        assert!(s.revoke_token("b"));
        assert!(!s.revoke_token("b"));
        assert_eq!(s.add_token("c"), Ok(()));
    }
}
