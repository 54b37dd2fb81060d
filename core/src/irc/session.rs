//! A sans-IO IRC client session, for hosts that have no IRC client of their own.
//!
//! [`Session`] registers (`PASS`, `NICK`, `USER`), falls back to another nick when ours is taken,
//! answers `PING`, joins the configured channels, keeps the link alive with its own `PING`, and learns
//! the prefix the server shows for us (see [`Identity`]), which OA1 needs to size its chunks. It owns
//! no socket and no clock: the host writes what [`SessionOutput::Transmit`] gives it (plus `"\r\n"`),
//! feeds what it reads to [`Session::handle_bytes`] (or whole lines to [`Session::handle_line`]),
//! and calls [`Session::handle_timeout`] when the last [`SessionOutput::Timeout`] deadline passes.
//!
//! ```
//! use deskwire::irc::{Session, SessionConfig, SessionEvent, SessionOutput};
//!
//! let now = 0;
//! let mut session = Session::new(SessionConfig::new("desk", &["#desk"]), now);
//! let mut sent = Vec::new();
//! // The server's side of the conversation, as the socket would deliver it.
//! session.handle_bytes(now, b":srv 001 desk :Welcome desk!~desk@127.0.0.1\r\n");
//! loop {
//!     match session.poll_output(now) {
//!         // write `line` plus "\r\n" to the socket
//!         SessionOutput::Transmit(line) => sent.push(line),
//!         SessionOutput::Event(SessionEvent::Registered { nick }) => assert_eq!(nick, "desk"),
//!         SessionOutput::Event(event) => println!("{event:?}"),
//!         // wait for bytes from the socket or until `deadline`, then call
//!         // `handle_bytes` / `handle_timeout`
//!         SessionOutput::Timeout(deadline) => {
//!             assert!(deadline > now);
//!             break;
//!         }
//!     }
//! }
//! assert_eq!(sent, ["NICK desk", "USER desk 0 * deskwire", "JOIN #desk"]);
//! ```

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::DEFAULT_MAX_LINE_BYTES;
use super::cap::{CapNegotiation, SaslConfig, SaslMechanism, Step};
use super::identity::{Identity, MAX_LINE_BYTES};
use super::message::{self, Message, within_line_limits};
use crate::lines::{DecodedLine, LineDecoder};

/// The token of the keepalive `PING` the session sends.
pub const KEEPALIVE_TOKEN: &str = "deskwire";

/// Bytes a line we send may have before its CRLF (servers refuse longer ones).
const MAX_OUTGOING: usize = MAX_LINE_BYTES - 2;

/// The longest wait between two tries to regain our nick.
const MAX_REGAIN_DELAY_MS: u64 = 60_000;

/// How to register and what to join.
///
/// As JSON only `nick` is required; `user` defaults to the nick and the rest to
/// [`SessionConfig::new`]'s values. Unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "SessionConfigJson")]
pub struct SessionConfig {
    /// The nick to ask for first.
    pub nick: String,
    /// The user name sent in `USER` (servers may show it with a `~` in front).
    pub user: String,
    /// The real name sent in `USER`.
    pub realname: String,
    /// The server password, sent as `PASS` before anything else.
    pub password: Option<String>,
    /// Channels to join once registered.
    pub channels: Vec<String>,
    /// How many nicks to try before giving up: the configured one, then with `_`, then with `1`,
    /// `2`, ... appended. At least one is always tried.
    pub max_nick_attempts: u32,
    /// Send a keepalive `PING` when nothing arrived for this long.
    pub ping_interval_ms: u64,
    /// Give up on the link when nothing arrived this long after a keepalive `PING`.
    pub ping_timeout_ms: u64,
    /// Registered under a fallback nick (ours was taken: often by our own previous connection,
    /// which the server has not yet seen go), ask for ours back after this long, then after
    /// twice as long each time, up to a minute, and at once when `MONITOR` (where the server
    /// offers it) says it is free. 0: keep the fallback.
    pub nick_regain_ms: u64,
    /// Longest line accepted from the server, CRLF included; longer lines are ignored and counted.
    pub max_line_bytes: usize,
    /// Mark ourselves a bot (`MODE <nick> +B`) where the server offers a bot mode (ISUPPORT
    /// `BOT=B`), so clients can tell us from people. An OA1 remote sets it.
    pub bot_mode: bool,
    /// Log in with SASL while registering (`CAP LS 302`, `CAP REQ :sasl`, `AUTHENTICATE`;
    /// see [`super::cap`]). `None`: no `CAP` at all, as before.
    pub sasl: Option<SaslConfig>,
    /// IRCv3 capabilities to ask for when the server offers them (`account-tag`, which an
    /// `account:` allowed sender needs, is added by the connection). Empty with no `sasl`: no
    /// `CAP` at all.
    pub capabilities: Vec<String>,
}

/// [`SessionConfig`] as JSON gives it: the defaults fill what is missing.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionConfigJson {
    nick: String,
    user: Option<String>,
    realname: Option<String>,
    password: Option<String>,
    #[serde(default)]
    channels: Vec<String>,
    max_nick_attempts: Option<u32>,
    ping_interval_ms: Option<u64>,
    ping_timeout_ms: Option<u64>,
    nick_regain_ms: Option<u64>,
    max_line_bytes: Option<usize>,
    #[serde(default)]
    bot_mode: bool,
    #[serde(default)]
    sasl: Option<SaslConfig>,
    #[serde(default)]
    capabilities: Vec<String>,
}

impl From<SessionConfigJson> for SessionConfig {
    fn from(json: SessionConfigJson) -> Self {
        let mut config = SessionConfig::new(&json.nick, &[]);
        config.channels = json.channels;
        config.password = json.password;
        config.sasl = json.sasl;
        config.capabilities = json.capabilities;
        config.bot_mode = json.bot_mode;
        if let Some(user) = json.user {
            config.user = user;
        }
        if let Some(realname) = json.realname {
            config.realname = realname;
        }
        if let Some(n) = json.max_nick_attempts {
            config.max_nick_attempts = n;
        }
        if let Some(ms) = json.ping_interval_ms {
            config.ping_interval_ms = ms;
        }
        if let Some(ms) = json.ping_timeout_ms {
            config.ping_timeout_ms = ms;
        }
        if let Some(ms) = json.nick_regain_ms {
            config.nick_regain_ms = ms;
        }
        if let Some(n) = json.max_line_bytes {
            config.max_line_bytes = n;
        }
        config
    }
}

impl SessionConfig {
    /// A configuration for `nick` joining `channels`, with user `nick`, real name `deskwire`, 5
    /// nick attempts, a keepalive `PING` after 60 s of silence, a 120 s timeout for its answer, a
    /// fallback nick's first try to regain ours after 2 s, and lines of up to [`DEFAULT_MAX_LINE_BYTES`] (IRCv3 tags included).
    pub fn new(nick: &str, channels: &[&str]) -> Self {
        SessionConfig {
            nick: nick.to_owned(),
            user: nick.to_owned(),
            realname: "deskwire".to_owned(),
            password: None,
            channels: channels.iter().map(|c| (*c).to_owned()).collect(),
            max_nick_attempts: 5,
            ping_interval_ms: 60_000,
            ping_timeout_ms: 120_000,
            nick_regain_ms: 2_000,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            bot_mode: false,
            sasl: None,
            capabilities: Vec::new(),
        }
    }

    /// Checks every value; [`Session::new`] takes invalid values without panicking (see there),
    /// this says what is wrong instead.
    pub fn validate(&self) -> Result<(), SessionError> {
        if super::validate_nick(&self.nick).is_err() {
            return Err(SessionError::InvalidNick(self.nick.clone()));
        }
        if sanitize_word(&self.user) != self.user {
            return Err(SessionError::InvalidUser(self.user.clone()));
        }
        if has_forbidden_byte(&self.realname) {
            return Err(SessionError::ForbiddenByte);
        }
        if self.password.as_deref().is_some_and(has_forbidden_byte) {
            return Err(SessionError::ForbiddenByte);
        }
        for channel in &self.channels {
            validate_channel(channel)?;
        }
        if let Some(sasl) = &self.sasl {
            if sasl.mechanism == SaslMechanism::Plain
                && (sasl.username.is_empty() || sasl.password.is_empty())
            {
                return Err(SessionError::InvalidLogin(
                    "SASL PLAIN needs a username and a password",
                ));
            }
            if has_forbidden_byte(&sasl.username) {
                return Err(SessionError::ForbiddenByte);
            }
        }
        Ok(())
    }
}

/// Something the host should know about. As JSON: `{"joined": {"channel": "#desk"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "IrcSessionEvent"))]
pub enum SessionEvent {
    /// The server accepted us (`001`) under this nick; the configured channels are being joined.
    Registered {
        /// Our nick, as the server confirmed it.
        nick: String,
    },
    /// We are in this channel (the server echoed our `JOIN`).
    Joined {
        /// The channel, as the server wrote it.
        channel: String,
    },
    /// Our nick changed.
    NickChanged {
        /// The nick before.
        old: String,
        /// The nick now.
        new: String,
    },
    /// The prefix the server adds to our lines became known, or changed (a nick change, a host
    /// cloak). It sets how much text fits in one line: see [`Identity::privmsg_text_budget`].
    PrefixLearned {
        /// `nick!user@host`.
        prefix: String,
    },
    /// The server refused to let us into a channel we asked to join: `403` (no such channel),
    /// `405` (too many channels), `471` (full), `473` (invite only), `474` (banned), `475` (wrong
    /// key), `476` (bad channel mask) or `477` (registration needed). Trying again is the host's
    /// choice ([`Session::join`]).
    JoinFailed {
        /// The channel.
        channel: String,
        /// The numeric, e.g. `"474"`.
        numeric: String,
        /// The server's text, e.g. `Cannot join channel (+b)`.
        text: String,
    },
    /// The server refused a nick while registering (`432` erroneous, `433` in use, `436`
    /// collision, `437` unavailable). The session goes on with `next` (the configured nick with
    /// `_`, then `1`, `2`, ... appended), or ends with [`DisconnectReason::NickUnavailable`]
    /// when `next` is `None`. Peers that accept only the configured nick will ignore us.
    NickRefused {
        /// The nick refused.
        nick: String,
        /// The numeric, e.g. `"433"`.
        numeric: String,
        /// The server's text, e.g. `Nickname is already in use`.
        text: String,
        /// The nick tried next, if any attempts are left.
        next: Option<String>,
    },
    /// Someone removed us from a channel. Joining again is the host's choice ([`Session::join`]).
    Kicked {
        /// The channel.
        channel: String,
        /// The nick (or server) that kicked us.
        by: String,
        /// The reason given, possibly empty.
        reason: String,
    },
    /// We left a channel (the server echoed a `PART` of ours).
    Parted {
        /// The channel.
        channel: String,
    },
    /// The server answered with an error reply (numerics 400 to 599) that the session does not
    /// handle itself, for example `474 #desk Cannot join channel (+b)` or
    /// `404 #desk Cannot send to channel`.
    ServerError {
        /// The numeric and its parameters after our nick, separated by spaces.
        message: String,
    },
    /// SASL logged us in (`903`) as this account.
    LoggedIn {
        /// The account, as the server's `900` named it.
        account: String,
    },
    /// A SASL login that was not required failed, or could not be tried; the session goes on
    /// unauthenticated. (A required one ends the session with
    /// [`DisconnectReason::LoginFailed`] instead.)
    LoginFailed {
        /// What happened, with the server's numeric and words (`SASL login failed: 904 SASL
        /// authentication failed`) or why it could not be tried (`the server offers no SASL`).
        message: String,
    },
    /// The session is over; the host should close the connection. Nothing more happens after it.
    Disconnected {
        /// Why.
        reason: DisconnectReason,
    },
}

/// Why a session ended. As JSON: `"timed_out"` or `{"server_closed": {"message": ...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "IrcDisconnectReason"))]
pub enum DisconnectReason {
    /// The server closed the link with `ERROR`.
    ServerClosed {
        /// The text of the `ERROR` line.
        message: String,
    },
    /// Nothing arrived for `ping_timeout_ms` after a keepalive `PING`.
    TimedOut,
    /// The host said the connection closed or failed ([`Session::handle_eof`]).
    ConnectionLost,
    /// Every nick tried was taken or refused before registration.
    NickUnavailable,
    /// The host called [`Session::quit`].
    Quit,
    /// The SASL login the configuration requires failed, or the server could not do it.
    LoginFailed {
        /// What happened, with the server's numeric and words.
        message: String,
    },
}

impl std::fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DisconnectReason::ServerClosed { message } => {
                write!(f, "the server closed the link: {message}")
            }
            DisconnectReason::TimedOut => f.write_str("the server stopped answering PING"),
            DisconnectReason::ConnectionLost => f.write_str("the connection was lost"),
            DisconnectReason::NickUnavailable => f.write_str("every nick tried was refused"),
            DisconnectReason::Quit => f.write_str("we quit"),
            DisconnectReason::LoginFailed { message } => f.write_str(message),
        }
    }
}

/// What [`Session::poll_output`] asks the host to do.
///
/// Exhaustive on purpose: a host loop handles exactly these three cases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionOutput {
    /// Write this line, followed by `"\r\n"`, to the connection.
    Transmit(String),
    /// Tell the application.
    Event(SessionEvent),
    /// Nothing more to do until this instant (`now_ms` clock) or until bytes arrive; then call
    /// [`Session::handle_timeout`]. A deadline at or before `now` means: call it right away.
    Timeout(u64),
}

/// A misuse of the session by the host. The session is unchanged when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The session has ended (see [`SessionEvent::Disconnected`]).
    #[error("the session has ended")]
    Closed,
    /// The server has not accepted us yet; messages would be refused.
    #[error("not registered yet")]
    NotRegistered,
    /// A nick must follow RFC 2812 (see [`super::validate_nick`]).
    #[error(
        "invalid nick {0:?}: 1 to 30 characters, a letter or one of []\\`_^{{|}} first, then \
         letters, digits, those or '-'"
    )]
    InvalidNick(String),
    /// A user name must be non-empty, without spaces, commas, control bytes or a leading ':'.
    #[error("invalid user name {0:?}")]
    InvalidUser(String),
    /// A channel name must start with `#`, `&`, `+` or `!` and have no space, comma or control byte.
    #[error(
        "invalid channel name {0:?}: it starts with #, &, + or ! and has no space, comma or \
         control character"
    )]
    InvalidChannel(String),
    /// The server's ISUPPORT `CHANNELLEN` is shorter than the channel's name.
    #[error("channel name {channel:?} is {} bytes; this server takes at most {limit} (CHANNELLEN)", channel.len())]
    ChannelTooLong {
        /// The channel asked for.
        channel: String,
        /// The server's `CHANNELLEN`.
        limit: usize,
    },
    /// A message target must be a channel or a nick, one only (no commas).
    #[error("invalid message target {0:?}")]
    InvalidTarget(String),
    /// The text contains NUL, CR or LF; IRC cannot carry it.
    #[error("text contains a NUL, CR or LF byte")]
    ForbiddenByte,
    /// The SASL configuration cannot log in.
    #[error("invalid SASL configuration: {0}")]
    InvalidLogin(&'static str),
    /// An empty message text (servers refuse it).
    #[error("empty message text")]
    EmptyText,
    /// The text does not fit one line once the server adds our prefix.
    #[error("text of {len} bytes does not fit the {budget}-byte budget of one line")]
    TooLong {
        /// Bytes of text given.
        len: usize,
        /// Bytes of text that fit (see [`Identity::privmsg_text_budget`]).
        budget: usize,
    },
}

/// Counters, for logs and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SessionStats {
    /// Lines received (all of them, ignored ones included).
    pub lines_received: u64,
    /// Lines queued for sending.
    pub lines_queued: u64,
    /// Lines ignored because they were longer than `max_line_bytes`.
    pub ignored_too_long: u64,
    /// Lines ignored because they were not IRC messages (bad UTF-8, no command, stray bytes) or
    /// lacked a parameter the command needs.
    pub ignored_invalid: u64,
    /// Lines ignored because they arrived after the session ended.
    pub ignored_after_close: u64,
    /// Server `PING`s answered.
    pub pings_answered: u64,
    /// Keepalive `PING`s sent.
    pub keepalive_pings: u64,
    /// `NICK` commands sent during registration.
    pub nick_attempts: u32,
    /// `NICK` commands sent to regain the configured nick from a fallback.
    pub regain_attempts: u32,
    /// Of those, the ones the server refused (the nick was still taken).
    pub regain_refusals: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Registering,
    Registered,
    Closed,
}

/// A sans-IO IRC client session: see the [module docs](self).
#[derive(Debug, Clone)]
pub struct Session {
    config: SessionConfig,
    identity: Identity,
    state: State,
    /// The nick the fallbacks are built from.
    base_nick: String,
    /// Channels to join once registered.
    pending_joins: Vec<String>,
    /// Channels asked for with `JOIN` whose echo has not come yet (a refusal names one).
    joining: Vec<String>,
    /// Channels we are in, as the server wrote them.
    channels: Vec<String>,
    reported_prefix: Option<String>,
    /// The server's software and version, from `004` (`RPL_MYINFO`), e.g. `ngircd-26.1`.
    server_version: Option<String>,
    /// Capabilities and SASL.
    cap: CapNegotiation,
    queue: VecDeque<SessionOutput>,
    decoder: LineDecoder,
    last_received_ms: u64,
    keepalive_sent_ms: Option<u64>,
    /// Registered under a fallback: asking for our nick back.
    regain: Option<Regain>,
    /// The server's ISUPPORT has `MONITOR`.
    monitor_offered: bool,
    /// `MODE <nick> +B` was sent (see [`SessionConfig::bot_mode`]).
    bot_mode_set: bool,
    stats: SessionStats,
}

/// Asking for the configured nick back while registered under a fallback.
#[derive(Debug, Clone)]
struct Regain {
    /// When to send the next `NICK`.
    next_try_ms: u64,
    /// The wait before that try (doubling, up to [`MAX_REGAIN_DELAY_MS`]).
    delay_ms: u64,
    /// `MONITOR + nick` was sent: the server says when the nick is free (`731`).
    monitoring: bool,
}

impl Session {
    /// Starts a session at `now_ms`: queues `PASS` (when a password is set), `NICK` and `USER`.
    ///
    /// Invalid configuration values do not panic: in the nick and user name, spaces, commas,
    /// control bytes and a leading ':' become `_`; in the password and real name, NUL, CR and LF
    /// become spaces; invalid channel names are skipped. [`SessionConfig::validate`] reports them
    /// as errors instead.
    pub fn new(config: SessionConfig, now_ms: u64) -> Self {
        let base_nick = sanitize_word(&config.nick);
        let user = sanitize_word(&config.user);
        let mut realname = replace_forbidden(&config.realname);
        if realname.trim().is_empty() {
            realname = "deskwire".to_owned();
        }
        let pending_joins = config
            .channels
            .iter()
            .filter(|c| validate_channel(c).is_ok())
            .cloned()
            .collect();
        let mut session = Session {
            identity: Identity::new(&base_nick),
            state: State::Registering,
            base_nick,
            pending_joins,
            joining: Vec::new(),
            channels: Vec::new(),
            reported_prefix: None,
            server_version: None,
            cap: CapNegotiation::new(config.sasl.clone(), &config.capabilities),
            queue: VecDeque::new(),
            decoder: LineDecoder::new(config.max_line_bytes),
            last_received_ms: now_ms,
            keepalive_sent_ms: None,
            regain: None,
            monitor_offered: false,
            bot_mode_set: false,
            stats: SessionStats::default(),
            config,
        };
        // CAP LS first, when anything is wanted: the server then holds registration until
        // CAP END.
        if let Some(line) = session.cap.start() {
            session.transmit(line.to_owned());
        }
        if let Some(password) = session.config.password.as_deref() {
            let password = replace_forbidden(password);
            session.send("PASS", &[&password]);
        }
        let nick = session.base_nick.clone();
        session.stats.nick_attempts = 1;
        session.send("NICK", &[&nick]);
        session.send("USER", &[&user, "0", "*", &realname]);
        session
    }

    /// What we know about ourselves: nick, learned prefix, server limits, text budget.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The server's software and version as its `004` (`RPL_MYINFO`) names them, e.g.
    /// `ngircd-26.1` or `InspIRCd-3`; `None` before registration or from a server that does not
    /// say. What it is limits how fast lines may go (see `oa1::Pacing::for_server`).
    pub fn server_version(&self) -> Option<&str> {
        self.server_version.as_deref()
    }

    /// The account SASL logged us in as, if any.
    pub fn account(&self) -> Option<&str> {
        self.cap.account()
    }

    /// The IRCv3 capabilities in force (acknowledged by the server).
    pub fn capabilities(&self) -> Vec<String> {
        self.cap.enabled().map(str::to_owned).collect()
    }

    /// The configured nick while we are registered under a fallback and asking for it back
    /// (see [`SessionConfig::nick_regain_ms`]); `None` when we hold it, or keep the fallback.
    pub fn regaining_nick(&self) -> Option<&str> {
        self.regain.as_ref().map(|_| self.base_nick.as_str())
    }

    /// Whether the server has accepted us (`001`) and the session has not ended.
    pub fn is_registered(&self) -> bool {
        self.state == State::Registered
    }

    /// Whether the session has ended ([`SessionEvent::Disconnected`] was queued).
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// The channels we are in, as the server wrote them.
    pub fn channels(&self) -> &[String] {
        &self.channels
    }

    /// The counters.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// Feeds bytes read from the connection; complete lines are handled right away and a partial
    /// line waits for the rest. Over-long lines are dropped (counted), with bounded memory.
    pub fn handle_bytes(&mut self, now_ms: u64, bytes: &[u8]) {
        self.decoder.feed(bytes);
        // The decoder borrows its buffer for each line, so take it out while handling lines.
        let mut decoder = std::mem::take(&mut self.decoder);
        while let Some(decoded) = decoder.next_line() {
            match decoded {
                DecodedLine::Line(line) => self.handle_line(now_ms, line),
                _ => self.note_too_long(now_ms),
            }
        }
        self.decoder = decoder;
    }

    /// Handles one line from the server, with or without its CRLF.
    pub fn handle_line(&mut self, now_ms: u64, line: &[u8]) {
        self.stats.lines_received += 1;
        if self.state == State::Closed {
            self.stats.ignored_after_close += 1;
            return;
        }
        self.note_activity(now_ms);
        let mut content = line;
        while let [rest @ .., b'\r' | b'\n'] = content {
            content = rest;
        }
        if content.len().saturating_add(2) > self.config.max_line_bytes
            || !within_line_limits(content, self.identity.line_limit())
        {
            self.stats.ignored_too_long += 1;
            return;
        }
        match Message::parse(content) {
            Ok(msg) => self.handle_message(&msg),
            Err(_) => self.stats.ignored_invalid += 1,
        }
    }

    /// Handles a line the caller has parsed already (and checked against `max_line_bytes`):
    /// the connection engines parse each line once for every layer.
    pub(crate) fn handle_parsed(&mut self, now_ms: u64, msg: &Message<'_>) {
        self.stats.lines_received += 1;
        if self.state == State::Closed {
            self.stats.ignored_after_close += 1;
            return;
        }
        self.note_activity(now_ms);
        self.handle_message(msg);
    }

    /// A line the caller found was not an IRC message: counted; still a sign of life.
    pub(crate) fn note_invalid(&mut self, now_ms: u64) {
        self.stats.lines_received += 1;
        if self.state == State::Closed {
            self.stats.ignored_after_close += 1;
        } else {
            self.note_activity(now_ms);
            self.stats.ignored_invalid += 1;
        }
    }

    /// The connection closed or failed: the session ends with
    /// [`DisconnectReason::ConnectionLost`] (nothing happens when it had already ended).
    pub fn handle_eof(&mut self, now_ms: u64) {
        let _ = now_ms;
        if self.state != State::Closed {
            self.close(DisconnectReason::ConnectionLost);
        }
    }

    /// An over-long line was dropped before it reached the session: count it; it is still a
    /// sign of life.
    pub(crate) fn note_too_long(&mut self, now_ms: u64) {
        self.stats.lines_received += 1;
        if self.state == State::Closed {
            self.stats.ignored_after_close += 1;
        } else {
            self.note_activity(now_ms);
            self.stats.ignored_too_long += 1;
        }
    }

    /// Takes note of a line already known to be someone else's relayed `PRIVMSG` (the OA1
    /// endpoints' fast path): it only keeps the link alive, so it is not parsed again.
    pub(crate) fn handle_relayed(&mut self, now_ms: u64) {
        self.stats.lines_received += 1;
        if self.state == State::Closed {
            self.stats.ignored_after_close += 1;
        } else {
            self.note_activity(now_ms);
        }
    }

    /// Runs the keepalive: sends a `PING` after `ping_interval_ms` of silence and ends the session
    /// when nothing answers within `ping_timeout_ms`. Calling it early does nothing.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        if self.state == State::Closed {
            return;
        }
        let mut steps = Vec::new();
        self.cap.handle_timeout(now_ms, &mut steps);
        if !self.apply(steps) {
            return;
        }
        match self.keepalive_sent_ms {
            Some(sent) if now_ms >= sent.saturating_add(self.config.ping_timeout_ms) => {
                self.close(DisconnectReason::TimedOut);
            }
            Some(_) => {}
            None if now_ms >= self.keepalive_deadline() => {
                self.keepalive_sent_ms = Some(now_ms);
                self.stats.keepalive_pings += 1;
                self.send("PING", &[KEEPALIVE_TOKEN]);
            }
            None => {}
        }
        if self
            .regain
            .as_ref()
            .is_some_and(|r| now_ms >= r.next_try_ms)
        {
            self.try_regain(now_ms);
        }
    }

    /// The next thing to do: a line to send, an event, or the deadline to wait for. Call it until
    /// it answers [`SessionOutput::Timeout`], after every `handle_*` call and app command.
    pub fn poll_output(&mut self, now_ms: u64) -> SessionOutput {
        if let Some(output) = self.queue.pop_front() {
            return output;
        }
        let deadline = match (self.state, self.keepalive_sent_ms) {
            (State::Closed, _) => now_ms.saturating_add(self.config.ping_interval_ms.max(1)),
            (_, Some(sent)) => sent.saturating_add(self.config.ping_timeout_ms),
            (_, None) => self.keepalive_deadline(),
        };
        let deadline = match self.cap.deadline() {
            Some(login) if self.state != State::Closed => deadline.min(login),
            _ => deadline,
        };
        let deadline = match &self.regain {
            Some(regain) if self.state != State::Closed => deadline.min(regain.next_try_ms),
            _ => deadline,
        };
        SessionOutput::Timeout(deadline)
    }

    /// Joins `channel`: right away when registered, otherwise once the server accepts us.
    /// [`SessionEvent::Joined`] follows when the server confirms.
    pub fn join(&mut self, channel: &str) -> Result<(), SessionError> {
        if self.state == State::Closed {
            return Err(SessionError::Closed);
        }
        validate_channel(channel)?;
        // Some servers cut a longer name and put us in another channel, whose JOIN we would
        // never match; refuse it here, by the server's own word.
        if let Some(limit) = self.identity.channel_len()
            && channel.len() > limit
        {
            return Err(SessionError::ChannelTooLong {
                channel: channel.to_owned(),
                limit,
            });
        }
        if self.state == State::Registered {
            self.send_join(channel);
        } else if !self
            .pending_joins
            .iter()
            .any(|c| self.identity.casemapping().eq(c, channel))
        {
            self.pending_joins.push(channel.to_owned());
        }
        Ok(())
    }

    /// Asks who in `channel` is logged in to which account (WHOX `%tna`), for an
    /// [`super::AccountWatch`]; only where the server has WHOX and we are registered.
    pub(crate) fn who_accounts(&mut self, channel: &str) {
        if self.state == State::Registered && self.identity.has_whox() {
            let fields = format!("%tna,{}", super::accounts::WHOX_TOKEN);
            self.send("WHO", &[channel, &fields]);
        }
    }

    /// Asks for the list of channels (`LIST`); each `322` reply comes in as a line for the
    /// host to read (the session does not keep them).
    pub fn list(&mut self) -> Result<(), SessionError> {
        match self.state {
            State::Closed => Err(SessionError::Closed),
            State::Registering => Err(SessionError::NotRegistered),
            State::Registered => {
                self.send("LIST", &[]);
                Ok(())
            }
        }
    }

    /// Leaves `channel`; [`SessionEvent::Parted`] follows when the server confirms.
    pub fn part(&mut self, channel: &str) -> Result<(), SessionError> {
        match self.state {
            State::Closed => return Err(SessionError::Closed),
            State::Registering => return Err(SessionError::NotRegistered),
            State::Registered => {}
        }
        validate_channel(channel)?;
        self.send("PART", &[channel]);
        Ok(())
    }

    /// Queues one `PRIVMSG target :text` line. The text must fit one line once the server adds our
    /// prefix ([`Identity::privmsg_text_budget`]); splitting longer texts is the caller's job (OA1
    /// does its own chunking).
    pub fn privmsg(&mut self, target: &str, text: &str) -> Result<(), SessionError> {
        match self.state {
            State::Closed => return Err(SessionError::Closed),
            State::Registering => return Err(SessionError::NotRegistered),
            State::Registered => {}
        }
        if target.is_empty()
            || target.starts_with(':')
            || target.bytes().any(|b| b == b' ' || b == b',' || b < 0x20)
        {
            return Err(SessionError::InvalidTarget(target.to_owned()));
        }
        if has_forbidden_byte(text) {
            return Err(SessionError::ForbiddenByte);
        }
        if text.is_empty() {
            return Err(SessionError::EmptyText);
        }
        let budget = self.identity.privmsg_text_budget(target);
        if text.len() > budget {
            return Err(SessionError::TooLong {
                len: text.len(),
                budget,
            });
        }
        match message::privmsg(target, text) {
            Ok(line) => {
                self.transmit(line);
                Ok(())
            }
            Err(_) => Err(SessionError::InvalidTarget(target.to_owned())),
        }
    }

    /// Sends `QUIT :reason` and ends the session: [`SessionEvent::Disconnected`] with
    /// [`DisconnectReason::Quit`] follows the `QUIT` line. Does nothing when already ended.
    pub fn quit(&mut self, reason: &str) {
        if self.state == State::Closed {
            return;
        }
        let reason = replace_forbidden(reason);
        self.send("QUIT", &[truncate_utf8(&reason, 400)]);
        self.close(DisconnectReason::Quit);
    }

    fn keepalive_deadline(&self) -> u64 {
        self.last_received_ms
            .saturating_add(self.config.ping_interval_ms)
    }

    fn note_activity(&mut self, now_ms: u64) {
        self.last_received_ms = self.last_received_ms.max(now_ms);
        self.keepalive_sent_ms = None;
    }

    fn handle_message(&mut self, msg: &Message<'_>) {
        let from_me = msg.source.is_some_and(|s| self.identity.is_me(s.nick));
        let old_nick = self.identity.nick().to_owned();
        let learned = self.identity.observe(msg);
        let command = msg.command;
        let mut steps = Vec::new();
        let taken = self.cap.handle(self.last_received_ms, msg, &mut steps);
        if !self.apply(steps) || taken {
            return;
        }
        if command.eq_ignore_ascii_case("PING") {
            match msg.param(0) {
                Some(token) => {
                    self.stats.pings_answered += 1;
                    self.send("PONG", &[token]);
                }
                None => self.stats.ignored_invalid += 1,
            }
        } else if command.eq_ignore_ascii_case("ERROR") {
            let message = msg.trailing().unwrap_or("").to_owned();
            self.close(DisconnectReason::ServerClosed { message });
            return;
        } else if command == "004" {
            // `004 <nick> <servername> <version> <usermodes> <chanmodes>`.
            if let Some(version) = msg.param(2).filter(|v| !v.is_empty() && v.len() <= 64) {
                self.server_version = Some(version.to_owned());
            }
        } else if command == "001" {
            if self.state == State::Registering {
                self.state = State::Registered;
                let nick = self.identity.nick().to_owned();
                self.event(SessionEvent::Registered { nick });
                self.report_prefix();
                for channel in std::mem::take(&mut self.pending_joins) {
                    self.send_join(&channel);
                }
                self.start_regain();
            }
        } else if command == "005" {
            // 005 <nick> TOKEN[=value] ... :are supported by this server
            let params = msg.params();
            let tokens = params.get(1..params.len().saturating_sub(1)).unwrap_or(&[]);
            if tokens
                .iter()
                .any(|t| t.split_once('=').map_or(*t, |(key, _)| key) == "MONITOR")
            {
                self.monitor_offered = true;
                self.start_monitor();
            }
            // BOT=B: the user mode that marks a bot.
            let bot = tokens.iter().find_map(|t| t.strip_prefix("BOT="));
            if let Some(mode) =
                bot.filter(|m| m.len() == 1 && m.bytes().all(|b| b.is_ascii_alphabetic()))
                && self.config.bot_mode
                && !self.bot_mode_set
            {
                self.bot_mode_set = true;
                let nick = self.identity.nick().to_owned();
                self.send("MODE", &[&nick, &format!("+{mode}")]);
            }
        } else if command == "731" {
            // 731 <me> :nick[!user@host][,nick...]: the nicks watched that are free now.
            let mapping = self.identity.casemapping();
            let free = msg.trailing().unwrap_or("").split(',').any(|target| {
                let nick = target.split('!').next().unwrap_or("");
                mapping.eq(nick, &self.base_nick)
            });
            if free && self.regain.is_some() {
                self.try_regain(self.last_received_ms);
            }
        } else if matches!(command, "432" | "433" | "436" | "437")
            && self.state == State::Registered
            && self.regain.is_some()
            && msg
                .param(1)
                .is_some_and(|n| self.identity.casemapping().eq(n, &self.base_nick))
        {
            // Our try to regain the nick was refused: still taken, so try again later. A nick
            // the server calls erroneous (432, e.g. reserved by services) never will be.
            self.stats.regain_refusals += 1;
            if command == "432" {
                self.stop_regain();
            }
        } else if matches!(command, "432" | "433" | "436" | "437")
            && self.state == State::Registering
        {
            // 433 * <nick> :Nickname is already in use; only the nick we last asked for counts.
            let refused = msg.param(1).unwrap_or(self.identity.nick()).to_owned();
            if self.identity.is_me(&refused) {
                let next = self.next_nick();
                self.event(SessionEvent::NickRefused {
                    nick: refused,
                    numeric: command.to_owned(),
                    text: msg.trailing().unwrap_or("").to_owned(),
                    next: next.clone(),
                });
                self.try_nick(next);
            }
        } else if is_join_refusal(command)
            && let Some(channel) = msg.param(1)
            && let Some(pos) = self.joining_index(channel)
        {
            // 474 <me> #desk :Cannot join channel (+b)
            self.joining.remove(pos);
            self.event(SessionEvent::JoinFailed {
                channel: channel.to_owned(),
                numeric: command.to_owned(),
                text: msg.params().get(2..).unwrap_or_default().join(" "),
            });
        } else if command.eq_ignore_ascii_case("JOIN") && from_me {
            match msg.param(0) {
                Some(channel) => {
                    if let Some(pos) = self.joining_index(channel) {
                        self.joining.remove(pos);
                    }
                    if !self.is_in(channel) {
                        self.channels.push(channel.to_owned());
                    }
                    self.event(SessionEvent::Joined {
                        channel: channel.to_owned(),
                    });
                }
                None => self.stats.ignored_invalid += 1,
            }
        } else if command.eq_ignore_ascii_case("PART") && from_me {
            match msg.param(0) {
                Some(channel) => {
                    self.forget_channel(channel);
                    self.event(SessionEvent::Parted {
                        channel: channel.to_owned(),
                    });
                }
                None => self.stats.ignored_invalid += 1,
            }
        } else if command.eq_ignore_ascii_case("KICK") {
            if let (Some(channel), Some(victim)) = (msg.param(0), msg.param(1)) {
                if self.identity.is_me(victim) {
                    self.forget_channel(channel);
                    self.event(SessionEvent::Kicked {
                        channel: channel.to_owned(),
                        by: msg.source_nick().unwrap_or("").to_owned(),
                        reason: msg.param(2).unwrap_or("").to_owned(),
                    });
                }
            } else {
                self.stats.ignored_invalid += 1;
            }
        } else if command.eq_ignore_ascii_case("NICK") && from_me {
            let new = self.identity.nick().to_owned();
            if self.regain.is_some() && self.identity.is_me(&self.base_nick) {
                self.stop_regain();
            }
            if new != old_nick {
                self.event(SessionEvent::NickChanged { old: old_nick, new });
            }
        } else if is_error_numeric(command) {
            // Skip our own nick (or `*`), the first parameter of every numeric reply.
            let mut message = command.to_owned();
            for param in msg.params().iter().skip(1) {
                message.push(' ');
                message.push_str(param);
            }
            self.event(SessionEvent::ServerError { message });
        }
        if learned {
            self.report_prefix();
        }
    }

    /// The nick to try after a refusal, if attempts are left.
    fn next_nick(&self) -> Option<String> {
        let max = self.config.max_nick_attempts.max(1);
        (self.stats.nick_attempts < max)
            .then(|| fallback_nick(&self.base_nick, self.stats.nick_attempts))
    }

    fn try_nick(&mut self, nick: Option<String>) {
        let Some(nick) = nick else {
            self.send("QUIT", &["no nick available"]);
            self.close(DisconnectReason::NickUnavailable);
            return;
        };
        self.stats.nick_attempts += 1;
        self.identity.set_nick(&nick);
        self.send("NICK", &[&nick]);
    }

    /// Registered under a fallback: plan to ask for the configured nick back.
    fn start_regain(&mut self) {
        if self.identity.is_me(&self.base_nick) || self.config.nick_regain_ms == 0 {
            return;
        }
        self.regain = Some(Regain {
            next_try_ms: self
                .last_received_ms
                .saturating_add(self.config.nick_regain_ms),
            delay_ms: self.config.nick_regain_ms,
            monitoring: false,
        });
        self.start_monitor();
    }

    /// Watches the configured nick with `MONITOR` when regaining it on a server that offers it.
    fn start_monitor(&mut self) {
        if let Some(regain) = self.regain.as_mut().filter(|r| !r.monitoring)
            && self.monitor_offered
        {
            regain.monitoring = true;
            let nick = self.base_nick.clone();
            self.send("MONITOR", &["+", &nick]);
        }
    }

    /// Asks for the configured nick now; the next try waits twice as long as this one did.
    fn try_regain(&mut self, now_ms: u64) {
        let Some(regain) = self.regain.as_mut() else {
            return;
        };
        regain.delay_ms = regain.delay_ms.saturating_mul(2).min(MAX_REGAIN_DELAY_MS);
        regain.next_try_ms = now_ms.saturating_add(regain.delay_ms);
        self.stats.regain_attempts += 1;
        let nick = self.base_nick.clone();
        self.send("NICK", &[&nick]);
    }

    fn stop_regain(&mut self) {
        if let Some(regain) = self.regain.take()
            && regain.monitoring
        {
            let nick = self.base_nick.clone();
            self.send("MONITOR", &["-", &nick]);
        }
    }

    fn send_join(&mut self, channel: &str) {
        if self.joining_index(channel).is_none() {
            self.joining.push(channel.to_owned());
        }
        self.send("JOIN", &[channel]);
    }

    fn joining_index(&self, channel: &str) -> Option<usize> {
        let mapping = self.identity.casemapping();
        self.joining.iter().position(|c| mapping.eq(c, channel))
    }

    fn report_prefix(&mut self) {
        let prefix = self.identity.learned_prefix();
        if prefix.is_some() && prefix != self.reported_prefix {
            self.reported_prefix = prefix.clone();
            if let Some(prefix) = prefix {
                self.event(SessionEvent::PrefixLearned { prefix });
            }
        }
    }

    fn is_in(&self, channel: &str) -> bool {
        let mapping = self.identity.casemapping();
        self.channels.iter().any(|c| mapping.eq(c, channel))
    }

    fn forget_channel(&mut self, channel: &str) {
        let mapping = self.identity.casemapping();
        self.channels.retain(|c| !mapping.eq(c, channel));
    }

    fn close(&mut self, reason: DisconnectReason) {
        self.state = State::Closed;
        self.keepalive_sent_ms = None;
        self.event(SessionEvent::Disconnected { reason });
    }

    /// Does what the CAP negotiation asks; `false` when it ended the session.
    fn apply(&mut self, steps: Vec<Step>) -> bool {
        for step in steps {
            match step {
                Step::Send(line) => self.transmit(line),
                Step::Event(event) => self.event(event),
                Step::Fail(reason) => {
                    self.send("QUIT", &["login failed"]);
                    self.close(reason);
                    return false;
                }
            }
        }
        true
    }

    fn event(&mut self, event: SessionEvent) {
        self.queue.push_back(SessionOutput::Event(event));
    }

    /// Formats and queues a command. Parameters are checked or sanitised by the callers; a line
    /// that still cannot be formatted or is too long is not sent.
    fn send(&mut self, command: &str, params: &[&str]) {
        let mut line = String::new();
        if message::format_line(&mut line, command, params).is_ok() && line.len() <= MAX_OUTGOING {
            self.transmit(line);
        }
    }

    fn transmit(&mut self, line: String) {
        self.stats.lines_queued += 1;
        self.queue.push_back(SessionOutput::Transmit(line));
    }
}

/// The `attempt`-th fallback (1-based) for `base`: `base_`, then `base1`, `base2`, ...
///
/// A fallback is never longer than `base` or 9 bytes, whichever is more: before `005` says the
/// server's `NICKLEN`, 9 (RFC 1459's) is the only length every server takes, and a 9-byte nick
/// (`rexd --device-code`'s `oa` and code) grown to 10 would be refused as too long, every
/// attempt after it too.
fn fallback_nick(base: &str, attempt: u32) -> String {
    let suffix = match attempt {
        0 => return base.to_owned(),
        1 => "_".to_owned(),
        n => (n - 1).to_string(),
    };
    let room = base.len().max(9).saturating_sub(suffix.len());
    let mut cut = room.min(base.len());
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &base[..cut])
}

/// The numerics that refuse a `JOIN`: no such channel, too many channels, full, invite only,
/// banned, wrong key, bad mask, registration needed.
fn is_join_refusal(command: &str) -> bool {
    matches!(
        command,
        "403" | "405" | "471" | "473" | "474" | "475" | "476" | "477"
    )
}

fn is_error_numeric(command: &str) -> bool {
    command.len() == 3
        && command.bytes().all(|b| b.is_ascii_digit())
        && matches!(command.as_bytes()[0], b'4' | b'5')
}

fn has_forbidden_byte(text: &str) -> bool {
    super::forbidden::has_forbidden_byte(text.as_bytes())
}

pub(crate) fn validate_channel(channel: &str) -> Result<(), SessionError> {
    let valid = channel.len() >= 2
        && channel.starts_with(['#', '&', '+', '!'])
        && !channel.bytes().any(|b| b == b' ' || b == b',' || b < 0x20)
        && "JOIN ".len() + channel.len() <= MAX_OUTGOING;
    if valid {
        Ok(())
    } else {
        Err(SessionError::InvalidChannel(channel.to_owned()))
    }
}

/// A nick or user name usable as a middle parameter: forbidden bytes become `_`.
fn sanitize_word(word: &str) -> String {
    let mut out: String = word
        .chars()
        .map(|c| {
            if c == ' ' || c == ',' || c.is_ascii_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    if out.is_empty() {
        out.push('_');
    } else if out.starts_with(':') {
        out.replace_range(..1, "_");
    }
    out
}

fn replace_forbidden(text: &str) -> String {
    text.replace(['\0', '\r', '\n'], " ")
}

fn truncate_utf8(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Drains the session: the lines it sent, the events, and the deadline it ended on.
    fn drain(session: &mut Session, now: u64) -> (Vec<String>, Vec<SessionEvent>, u64) {
        let mut lines = Vec::new();
        let mut events = Vec::new();
        for _ in 0..10_000 {
            match session.poll_output(now) {
                SessionOutput::Transmit(line) => lines.push(line),
                SessionOutput::Event(event) => events.push(event),
                SessionOutput::Timeout(deadline) => return (lines, events, deadline),
            }
        }
        panic!("poll_output never reached a Timeout");
    }

    fn server(session: &mut Session, now: u64, lines: &[&str]) -> (Vec<String>, Vec<SessionEvent>) {
        for line in lines {
            session.handle_line(now, format!("{line}\r\n").as_bytes());
        }
        let (sent, events, _) = drain(session, now);
        (sent, events)
    }

    fn registered(channels: &[&str]) -> Session {
        let mut session = Session::new(SessionConfig::new("desk", channels), 0);
        drain(&mut session, 0);
        server(&mut session, 0, &[":srv 001 desk :Welcome to the network"]);
        session
    }

    #[test]
    fn registration_then_join_and_prefix() {
        let mut config = SessionConfig::new("desk", &["#desk", "#ops"]);
        config.password = Some("s3cret".into());
        let mut session = Session::new(config, 1_000);
        let (sent, events, deadline) = drain(&mut session, 1_000);
        assert_eq!(sent, ["PASS s3cret", "NICK desk", "USER desk 0 * deskwire"]);
        assert!(events.is_empty());
        assert_eq!(deadline, 61_000);
        assert!(!session.is_registered());

        let (sent, events) = server(
            &mut session,
            1_200,
            &[
                ":srv NOTICE * :*** Looking up your hostname",
                ":srv 001 desk :Welcome to the Internet Relay Network desk",
                ":srv 005 desk USERLEN=9 HOSTLEN=30 :are supported by this server",
            ],
        );
        assert_eq!(sent, ["JOIN #desk", "JOIN #ops"]);
        assert_eq!(
            events,
            [SessionEvent::Registered {
                nick: "desk".into()
            }]
        );
        assert!(session.is_registered());
        assert_eq!(
            session.identity().relay_prefix_len(),
            1 + 4 + 1 + 10 + 1 + 30 + 1
        );

        let (sent, events) = server(
            &mut session,
            1_300,
            &[
                ":desk!~desk@127.0.0.1 JOIN #desk",
                ":srv 353 desk = #desk :desk @bob",
                ":desk!~desk@127.0.0.1 JOIN :#ops",
            ],
        );
        assert!(sent.is_empty());
        assert_eq!(
            events,
            [
                SessionEvent::Joined {
                    channel: "#desk".into()
                },
                SessionEvent::PrefixLearned {
                    prefix: "desk!~desk@127.0.0.1".into()
                },
                SessionEvent::Joined {
                    channel: "#ops".into()
                },
            ]
        );
        assert_eq!(session.channels(), ["#desk", "#ops"]);
        assert_eq!(
            session.identity().privmsg_text_budget("#desk"),
            512 - ":desk!~desk@127.0.0.1 PRIVMSG #desk :\r\n".len()
        );
    }

    #[test]
    fn welcome_with_full_prefix_teaches_it_at_once() {
        let mut session = Session::new(SessionConfig::new("desk", &["#desk"]), 0);
        drain(&mut session, 0);
        let (sent, events) = server(
            &mut session,
            5,
            &[":srv 001 desk :Welcome to the Internet Relay Network desk!~desk@10.1.2.3"],
        );
        assert_eq!(sent, ["JOIN #desk"]);
        assert_eq!(
            events,
            [
                SessionEvent::Registered {
                    nick: "desk".into()
                },
                SessionEvent::PrefixLearned {
                    prefix: "desk!~desk@10.1.2.3".into()
                },
            ]
        );
        // The same prefix seen again is not reported again; a cloak is.
        let (_, events) = server(
            &mut session,
            6,
            &[
                ":desk!~desk@10.1.2.3 JOIN #desk",
                ":srv 396 desk cloak.example :is now your displayed host",
            ],
        );
        assert_eq!(
            events,
            [
                SessionEvent::Joined {
                    channel: "#desk".into()
                },
                SessionEvent::PrefixLearned {
                    prefix: "desk!~desk@cloak.example".into()
                },
            ]
        );
    }

    #[test]
    fn nick_in_use_falls_back_then_gives_up() {
        let mut config = SessionConfig::new("desk", &["#desk"]);
        config.max_nick_attempts = 4;
        let mut session = Session::new(config, 0);
        drain(&mut session, 0);
        let (sent, events) = server(
            &mut session,
            1,
            &[":srv 433 * desk :Nickname is already in use"],
        );
        assert_eq!(sent, ["NICK desk_"]);
        assert_eq!(
            events,
            [SessionEvent::NickRefused {
                nick: "desk".into(),
                numeric: "433".into(),
                text: "Nickname is already in use".into(),
                next: Some("desk_".into()),
            }]
        );
        // A late 433 for a nick we no longer ask for changes nothing.
        let (sent, _) = server(
            &mut session,
            2,
            &[":srv 433 * desk :Nickname is already in use"],
        );
        assert!(sent.is_empty());
        let (sent, _) = server(&mut session, 3, &[":srv 432 * desk_ :Erroneous nickname"]);
        assert_eq!(sent, ["NICK desk1"]);
        let (sent, _) = server(
            &mut session,
            4,
            &[":srv 433 * desk1 :Nickname is already in use"],
        );
        assert_eq!(sent, ["NICK desk2"]);
        assert_eq!(session.stats().nick_attempts, 4);
        let (sent, events) = server(
            &mut session,
            5,
            &[":srv 433 * desk2 :Nickname is already in use"],
        );
        assert_eq!(sent, ["QUIT :no nick available"]);
        assert_eq!(
            events,
            [
                SessionEvent::NickRefused {
                    nick: "desk2".into(),
                    numeric: "433".into(),
                    text: "Nickname is already in use".into(),
                    next: None,
                },
                SessionEvent::Disconnected {
                    reason: DisconnectReason::NickUnavailable
                }
            ]
        );
        assert!(session.is_closed());
        assert_eq!(session.join("#x"), Err(SessionError::Closed));
    }

    #[test]
    fn fallback_nicks_fit_nine_bytes_where_the_nick_does() {
        assert_eq!(fallback_nick("desk", 1), "desk_");
        assert_eq!(fallback_nick("desk", 3), "desk2");
        assert_eq!(fallback_nick("oaabcd234", 1), "oaabcd23_");
        assert_eq!(fallback_nick("oaabcd234", 2), "oaabcd231");
        assert_eq!(fallback_nick("oaabcd234", 12), "oaabcd211");
        assert_eq!(fallback_nick("a-longer-nick", 1), "a-longer-nic_");
    }

    #[test]
    fn fallback_nick_is_the_registered_nick() {
        let mut session = Session::new(SessionConfig::new("desk", &["#desk"]), 0);
        drain(&mut session, 0);
        server(
            &mut session,
            1,
            &[":srv 433 * desk :Nickname is already in use"],
        );
        let (sent, events) = server(&mut session, 2, &[":srv 001 desk_ :Welcome"]);
        assert_eq!(sent, ["JOIN #desk"]);
        assert_eq!(
            events,
            [SessionEvent::Registered {
                nick: "desk_".into()
            }]
        );
        assert_eq!(session.identity().nick(), "desk_");
        // After registration a 433 is an ordinary error reply.
        let (sent, events) = server(
            &mut session,
            3,
            &[":srv 433 desk_ bob :Nickname is already in use"],
        );
        assert!(sent.is_empty());
        assert_eq!(
            events,
            [SessionEvent::ServerError {
                message: "433 bob Nickname is already in use".into()
            }]
        );
    }

    /// Registered as `desk_` at 2 s because `desk` was taken.
    fn registered_under_fallback(config: SessionConfig) -> Session {
        let mut session = Session::new(config, 0);
        drain(&mut session, 0);
        server(
            &mut session,
            1,
            &[":srv 433 * desk :Nickname is already in use"],
        );
        server(&mut session, 2_000, &[":srv 001 desk_ :Welcome"]);
        session
    }

    #[test]
    fn fallback_nick_asks_for_ours_back_with_growing_waits() {
        let mut config = SessionConfig::new("desk", &["#desk"]);
        config.ping_interval_ms = 3_600_000; // no keepalive PING among the lines
        let mut session = registered_under_fallback(config);
        assert_eq!(session.regaining_nick(), Some("desk"));
        // The first try 2 s after registering, then 4 s, 8 s, ... up to a minute.
        let mut tries = Vec::new();
        let mut now = 2_000;
        for _ in 0..8 {
            let (_, _, deadline) = drain(&mut session, now);
            now = deadline;
            session.handle_timeout(now);
            let (sent, events, _) = drain(&mut session, now);
            assert_eq!(sent, ["NICK desk"], "at {now}");
            assert!(events.is_empty());
            tries.push(now);
            // Still taken: refused quietly (not a ServerError), and tried again later.
            let (sent, events) = server(
                &mut session,
                now,
                &[":srv 433 desk_ desk :Nickname is already in use"],
            );
            assert!(sent.is_empty() && events.is_empty(), "{sent:?} {events:?}");
        }
        let waits: Vec<u64> = tries.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(tries[0], 4_000);
        assert_eq!(
            waits,
            [4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]
        );
        assert_eq!(session.stats().regain_attempts, 8);
        assert_eq!(session.stats().regain_refusals, 8);
        // The server lets us have it: the session says so and stops asking.
        let (sent, events) = server(&mut session, now + 1, &[":desk_!u@h NICK :desk"]);
        assert!(sent.is_empty());
        assert_eq!(
            events,
            [
                SessionEvent::NickChanged {
                    old: "desk_".into(),
                    new: "desk".into()
                },
                SessionEvent::PrefixLearned {
                    prefix: "desk!u@h".into()
                }
            ]
        );
        assert_eq!(session.regaining_nick(), None);
        assert_eq!(session.identity().nick(), "desk");
        session.handle_timeout(now + 120_000);
        assert!(
            !drain(&mut session, now + 120_000)
                .0
                .contains(&"NICK desk".to_owned())
        );
        // A 433 for the nick now is an ordinary error again.
        let (_, events) = server(&mut session, now + 2, &[":srv 433 desk bob :in use"]);
        assert_eq!(events.len(), 1);
    }

    #[test]
    fn monitor_says_when_our_nick_is_free() {
        let mut session = registered_under_fallback(SessionConfig::new("desk", &["#desk"]));
        let (sent, _) = server(
            &mut session,
            2_001,
            &[":srv 005 desk_ MONITOR=100 NICKLEN=30 :are supported"],
        );
        assert_eq!(sent, ["MONITOR + desk"]);
        // 730: still online; nothing to do until 731 says it is free.
        let (sent, _) = server(&mut session, 2_100, &[":srv 730 desk_ :desk!u@h"]);
        assert!(sent.is_empty());
        let (sent, _) = server(&mut session, 2_200, &[":srv 731 desk_ :Desk"]);
        assert_eq!(sent, ["NICK desk"]);
        let (sent, _) = server(&mut session, 2_300, &[":desk_!u@h NICK desk"]);
        assert_eq!(sent, ["MONITOR - desk"]);
        assert_eq!(session.regaining_nick(), None);
    }

    #[test]
    fn a_nick_the_server_calls_erroneous_is_not_asked_for_again() {
        let mut session = registered_under_fallback(SessionConfig::new("desk", &["#desk"]));
        session.handle_timeout(4_000);
        assert_eq!(drain(&mut session, 4_000).0, ["NICK desk"]);
        server(
            &mut session,
            4_001,
            &[":srv 432 desk_ desk :Reserved by services"],
        );
        assert_eq!(session.regaining_nick(), None);
        session.handle_timeout(100_000);
        assert!(
            drain(&mut session, 100_000)
                .0
                .iter()
                .all(|l| l.starts_with("PING"))
        );
    }

    #[test]
    fn regain_off_keeps_the_fallback() {
        let mut config = SessionConfig::new("desk", &["#desk"]);
        config.nick_regain_ms = 0;
        let mut session = registered_under_fallback(config);
        assert_eq!(session.regaining_nick(), None);
        session.handle_timeout(50_000);
        assert!(drain(&mut session, 50_000).0.is_empty());
        let json: SessionConfig =
            serde_json::from_str(r#"{"nick": "desk", "nick_regain_ms": 0}"#).unwrap();
        assert_eq!(json.nick_regain_ms, 0);
    }

    #[test]
    fn a_bot_marks_itself_where_the_server_has_a_bot_mode() {
        let mut config = SessionConfig::new("rexd", &["#desk"]);
        config.bot_mode = true;
        let mut session = Session::new(config.clone(), 0);
        drain(&mut session, 0);
        server(&mut session, 1, &[":srv 001 rexd :Welcome"]);
        let (sent, _) = server(
            &mut session,
            2,
            &[":srv 005 rexd BOT=B NICKLEN=30 :are supported"],
        );
        assert_eq!(sent, ["MODE rexd +B"]);
        // Once only, and nothing on a server without one, or for a session not asked to.
        let (sent, _) = server(&mut session, 3, &[":srv 005 rexd BOT=B :are supported"]);
        assert!(sent.is_empty());
        let mut plain = Session::new(config, 0);
        drain(&mut plain, 0);
        server(&mut plain, 1, &[":srv 001 rexd :Welcome"]);
        let (sent, _) = server(
            &mut plain,
            2,
            &[":srv 005 rexd NICKLEN=30 BOT= BOT=xy :are supported"],
        );
        assert!(sent.is_empty());
        let mut desk = Session::new(SessionConfig::new("desk", &["#desk"]), 0);
        drain(&mut desk, 0);
        server(&mut desk, 1, &[":srv 001 desk :Welcome"]);
        let (sent, _) = server(&mut desk, 2, &[":srv 005 desk BOT=B :are supported"]);
        assert!(sent.is_empty());
    }

    #[test]
    fn ping_is_answered_before_and_after_registration() {
        let mut session = Session::new(SessionConfig::new("desk", &[]), 0);
        drain(&mut session, 0);
        let (sent, _) = server(&mut session, 1, &["PING :12345"]);
        assert_eq!(sent, ["PONG 12345"]);
        server(&mut session, 2, &[":srv 001 desk :Welcome"]);
        let (sent, _) = server(
            &mut session,
            3,
            &["PING :irc.example.net", "ping :with space"],
        );
        assert_eq!(sent, ["PONG irc.example.net", "PONG :with space"]);
        assert_eq!(session.stats().pings_answered, 3);
    }

    #[test]
    fn keepalive_ping_then_timeout() {
        let mut session = registered(&[]);
        let (_, _, deadline) = drain(&mut session, 0);
        assert_eq!(deadline, 60_000);
        // Early wake-ups do nothing.
        session.handle_timeout(59_999);
        assert_eq!(drain(&mut session, 59_999).0, Vec::<String>::new());
        // A line resets the silence timer.
        server(&mut session, 30_000, &[":bob!b@h PRIVMSG #desk :hi"]);
        assert_eq!(drain(&mut session, 30_000).2, 90_000);
        session.handle_timeout(90_000);
        let (sent, events, deadline) = drain(&mut session, 90_000);
        assert_eq!(sent, ["PING deskwire"]);
        assert!(events.is_empty());
        assert_eq!(deadline, 90_000 + 120_000);
        // The answer keeps the link up.
        server(&mut session, 90_050, &[":srv PONG srv :deskwire"]);
        assert_eq!(drain(&mut session, 90_050).2, 150_050);
        session.handle_timeout(150_050);
        assert_eq!(drain(&mut session, 150_050).0, ["PING deskwire"]);
        // No answer: the session ends, and keeps answering a deadline after the current time.
        session.handle_timeout(270_049);
        assert!(drain(&mut session, 270_049).1.is_empty());
        session.handle_timeout(270_050);
        let (sent, events, deadline) = drain(&mut session, 270_050);
        assert!(sent.is_empty());
        assert_eq!(
            events,
            [SessionEvent::Disconnected {
                reason: DisconnectReason::TimedOut
            }]
        );
        assert_eq!(deadline, 270_050 + 60_000);
        assert!(session.is_closed());
    }

    #[test]
    fn unregistered_link_times_out_too() {
        let mut session = Session::new(SessionConfig::new("desk", &[]), 0);
        drain(&mut session, 0);
        session.handle_timeout(60_000);
        assert_eq!(drain(&mut session, 60_000).0, ["PING deskwire"]);
        session.handle_timeout(180_000);
        assert_eq!(
            drain(&mut session, 180_000).1,
            [SessionEvent::Disconnected {
                reason: DisconnectReason::TimedOut
            }]
        );
    }

    #[test]
    fn kick_part_and_nick_change() {
        let mut session = registered(&["#desk"]);
        server(
            &mut session,
            1,
            &[":desk!~d@h JOIN #desk", ":desk!~d@h JOIN #ops"],
        );
        // Someone else kicked: nothing for us.
        let (_, events) = server(&mut session, 2, &[":op!o@h KICK #desk bob :bye"]);
        assert!(events.is_empty());
        let (sent, events) = server(&mut session, 3, &[":op!o@h KICK #Desk DESK :no bots"]);
        assert!(sent.is_empty(), "rejoining is the host's choice");
        assert_eq!(
            events,
            [SessionEvent::Kicked {
                channel: "#Desk".into(),
                by: "op".into(),
                reason: "no bots".into()
            }]
        );
        assert_eq!(session.channels(), ["#ops"]);
        session.join("#desk").unwrap();
        assert_eq!(drain(&mut session, 3).0, ["JOIN #desk"]);

        session.part("#ops").unwrap();
        assert_eq!(drain(&mut session, 4).0, ["PART #ops"]);
        let (_, events) = server(&mut session, 4, &[":desk!~d@h PART #ops :Leaving"]);
        assert_eq!(
            events,
            [SessionEvent::Parted {
                channel: "#ops".into()
            }]
        );

        let (_, events) = server(&mut session, 5, &[":desk!~d@h NICK :desk2"]);
        assert_eq!(
            events,
            [
                SessionEvent::NickChanged {
                    old: "desk".into(),
                    new: "desk2".into()
                },
                SessionEvent::PrefixLearned {
                    prefix: "desk2!~d@h".into()
                },
            ]
        );
        assert!(session.identity().is_me("DESK2"));
        // Someone else's nick change is not ours.
        let (_, events) = server(&mut session, 6, &[":bob!b@h NICK bobby"]);
        assert!(events.is_empty());
    }

    #[test]
    fn error_line_disconnects_and_later_lines_are_ignored() {
        let mut session = registered(&[]);
        let (_, events) = server(
            &mut session,
            1,
            &[
                "ERROR :Closing link: desk[127.0.0.1] (Ping timeout)",
                "PING :x",
            ],
        );
        assert_eq!(
            events,
            [SessionEvent::Disconnected {
                reason: DisconnectReason::ServerClosed {
                    message: "Closing link: desk[127.0.0.1] (Ping timeout)".into()
                }
            }]
        );
        assert_eq!(session.stats().ignored_after_close, 1);
        assert_eq!(session.privmsg("#desk", "hi"), Err(SessionError::Closed));
    }

    #[test]
    fn error_replies_become_server_errors() {
        let mut session = registered(&[]);
        let (_, events) = server(
            &mut session,
            1,
            &[":srv 474 desk #desk :Cannot join channel (+b)"],
        );
        assert_eq!(
            events,
            [SessionEvent::ServerError {
                message: "474 #desk Cannot join channel (+b)".into()
            }]
        );
    }

    #[test]
    fn privmsg_checks_budget_and_bytes() {
        let mut session = Session::new(SessionConfig::new("desk", &[]), 0);
        drain(&mut session, 0);
        assert_eq!(
            session.privmsg("#desk", "early"),
            Err(SessionError::NotRegistered)
        );
        server(
            &mut session,
            0,
            &[":srv 001 desk :Welcome desk!~desk@127.0.0.1"],
        );
        session.privmsg("#desk", "OA1 REQ abc 1 0 uname").unwrap();
        assert_eq!(
            drain(&mut session, 0).0,
            ["PRIVMSG #desk :OA1 REQ abc 1 0 uname"]
        );

        let budget = 512 - ":desk!~desk@127.0.0.1 PRIVMSG #desk :\r\n".len();
        assert_eq!(session.identity().privmsg_text_budget("#desk"), budget);
        session.privmsg("#desk", &"x".repeat(budget)).unwrap();
        let (sent, _, _) = drain(&mut session, 0);
        assert_eq!(sent[0].len() + ":desk!~desk@127.0.0.1 \r\n".len(), 512);
        assert_eq!(
            session.privmsg("#desk", &"x".repeat(budget + 1)),
            Err(SessionError::TooLong {
                len: budget + 1,
                budget
            })
        );
        assert_eq!(
            session.privmsg("#desk", "a\r\nQUIT"),
            Err(SessionError::ForbiddenByte)
        );
        assert_eq!(session.privmsg("#desk", ""), Err(SessionError::EmptyText));
        assert_eq!(
            session.privmsg("#a,#b", "hi"),
            Err(SessionError::InvalidTarget("#a,#b".into()))
        );
        assert_eq!(
            session.join("desk"),
            Err(SessionError::InvalidChannel("desk".into()))
        );
        assert!(drain(&mut session, 0).0.is_empty());
    }

    #[test]
    fn join_before_registration_waits_for_welcome() {
        let mut session = Session::new(SessionConfig::new("desk", &[]), 0);
        session.join("#later").unwrap();
        let (sent, _, _) = drain(&mut session, 0);
        assert!(!sent.iter().any(|l| l.starts_with("JOIN")));
        let (sent, _) = server(&mut session, 1, &[":srv 001 desk :Welcome"]);
        assert_eq!(sent, ["JOIN #later"]);
    }

    #[test]
    fn quit_sends_quit_then_disconnects() {
        let mut session = registered(&[]);
        session.quit("bye\r\nnow");
        let (sent, events, _) = drain(&mut session, 1);
        assert_eq!(sent, ["QUIT :bye  now"]);
        assert_eq!(
            events,
            [SessionEvent::Disconnected {
                reason: DisconnectReason::Quit
            }]
        );
        session.quit("again");
        assert!(drain(&mut session, 1).0.is_empty());
    }

    #[test]
    fn bytes_are_split_into_lines_and_bad_lines_counted() {
        let mut config = SessionConfig::new("desk", &[]);
        config.max_line_bytes = 64;
        let mut session = Session::new(config, 0);
        drain(&mut session, 0);
        let long = format!(":srv NOTICE desk :{}\r\n", "x".repeat(100));
        let mut stream = Vec::new();
        stream.extend_from_slice(b"PING :a\r\n");
        stream.extend_from_slice(long.as_bytes());
        stream.extend_from_slice(b":srv\r\n\xff\xfe PRIVMSG\r\n:srv 001 desk :Welcome\r\nPING :b");
        for byte in &stream {
            session.handle_bytes(0, std::slice::from_ref(byte));
        }
        let (sent, events, _) = drain(&mut session, 0);
        assert_eq!(sent, ["PONG a"]);
        assert_eq!(
            events,
            [SessionEvent::Registered {
                nick: "desk".into()
            }]
        );
        session.handle_bytes(0, b"\r\n");
        assert_eq!(drain(&mut session, 0).0, ["PONG b"]);
        let stats = session.stats();
        assert_eq!(stats.ignored_too_long, 1);
        assert_eq!(stats.ignored_invalid, 2);
        assert_eq!(stats.lines_received, 6);
        // A long line handed over whole is refused the same way.
        session.handle_line(0, long.as_bytes());
        assert_eq!(session.stats().ignored_too_long, 2);
    }

    #[test]
    fn the_tag_section_and_the_rest_of_a_line_are_held_to_their_own_limits() {
        let mut session = registered(&[]);
        let ignored = |s: &Session| s.stats().ignored_too_long;
        // 600 bytes of tags and a short command: 600 + 9 is over 512 in all, yet each part fits.
        let tags = format!("@+x={}", "t".repeat(595));
        assert_eq!(
            server(&mut session, 0, &[&format!("{tags} PING :a")]).0,
            ["PONG a"]
        );
        // The same 609 bytes without tags are over IRC's 512.
        let long_ping = format!("PING :{}", "p".repeat(600));
        assert!(server(&mut session, 0, &[&long_ping]).0.is_empty());
        assert_eq!(ignored(&session), 1);
        // Tags of 8191 bytes fit; 8192 do not, however short the rest.
        let tags = |n: usize| format!("@+x={}", "t".repeat(n - "@+x= ".len()));
        assert_eq!(
            server(&mut session, 0, &[&format!("{} PING :b", tags(8191))]).0,
            ["PONG b"]
        );
        assert!(
            server(&mut session, 0, &[&format!("{} PING :c", tags(8192))])
                .0
                .is_empty()
        );
        assert_eq!(ignored(&session), 2);
        // A server that says LINELEN=1024 may send the longer line.
        server(
            &mut session,
            0,
            &[":srv 005 desk LINELEN=1024 :are supported by this server"],
        );
        server(&mut session, 0, &[&long_ping]);
        assert_eq!(ignored(&session), 2);
    }

    #[test]
    fn a_channel_longer_than_the_servers_channellen_is_refused_before_joining() {
        let mut session = registered(&[]);
        let long = format!("#{}", "c".repeat(60));
        session.join(&long).unwrap();
        assert_eq!(drain(&mut session, 0).0, [format!("JOIN {long}")]);
        server(
            &mut session,
            0,
            &[":srv 005 desk NICKLEN=9 CHANNELLEN=50 :are supported"],
        );
        assert_eq!(session.identity().nick_len(), Some(9));
        let err = session.join(&long).unwrap_err();
        assert_eq!(
            err,
            SessionError::ChannelTooLong {
                channel: long.clone(),
                limit: 50
            }
        );
        assert!(
            err.to_string()
                .contains("is 61 bytes; this server takes at most 50"),
            "{err}"
        );
        assert!(drain(&mut session, 0).0.is_empty());
        session.join(&long[..50]).unwrap();
        assert_eq!(drain(&mut session, 0).0, [format!("JOIN {}", &long[..50])]);
    }

    #[test]
    fn invalid_config_is_sanitised_and_reported_by_validate() {
        let mut config = SessionConfig::new("my desk", &["#ok", "bad", "#no,pe"]);
        config.realname = "line\r\nQUIT".into();
        assert_eq!(
            config.validate(),
            Err(SessionError::InvalidNick("my desk".into()))
        );
        let mut session = Session::new(config, 0);
        let (sent, _, _) = drain(&mut session, 0);
        assert_eq!(sent, ["NICK my_desk", "USER my_desk 0 * :line  QUIT"]);
        let (sent, _) = server(&mut session, 0, &[":srv 001 my_desk :Welcome"]);
        assert_eq!(sent, ["JOIN #ok"]);
        assert_eq!(SessionConfig::new("desk", &["#desk"]).validate(), Ok(()));
    }

    fn arb_line() -> impl Strategy<Value = Vec<u8>> {
        let word = prop_oneof![
            Just("desk".to_owned()),
            Just("DESK".to_owned()),
            Just("desk_".to_owned()),
            Just("#desk".to_owned()),
            Just("*".to_owned()),
            Just(":".to_owned()),
            Just("".to_owned()),
            "[ -~]{0,12}",
        ];
        let command = prop_oneof![
            Just("PING"),
            Just("PONG"),
            Just("ERROR"),
            Just("001"),
            Just("005"),
            Just("396"),
            Just("432"),
            Just("433"),
            Just("474"),
            Just("JOIN"),
            Just("PART"),
            Just("KICK"),
            Just("NICK"),
            Just("PRIVMSG"),
        ];
        let source = prop_oneof![
            Just(String::new()),
            Just(":desk!~d@h ".to_owned()),
            Just(":srv ".to_owned()),
            Just(":bob!b@h ".to_owned()),
        ];
        let structured = (source, command, proptest::collection::vec(word, 0..5)).prop_map(
            |(source, command, params)| {
                let mut line = format!("{source}{command}");
                for p in params {
                    line.push(' ');
                    line.push_str(&p);
                }
                line.into_bytes()
            },
        );
        prop_oneof![structured, proptest::collection::vec(any::<u8>(), 0..80)]
    }

    proptest! {
        #[test]
        fn random_lines_never_panic(
            lines in proptest::collection::vec((arb_line(), 0u64..200_000), 0..40),
            max_line_bytes in prop_oneof![Just(0usize), Just(16), Just(512)],
        ) {
            let mut config = SessionConfig::new("desk", &["#desk"]);
            config.max_line_bytes = max_line_bytes;
            let mut session = Session::new(config, 0);
            let mut now = 0;
            for (line, step) in lines {
                now += step;
                session.handle_line(now, &line);
                session.handle_bytes(now, &line);
                session.handle_timeout(now);
                let _ = session.privmsg("#desk", "hello");
                let (sent, _, deadline) = drain(&mut session, now);
                prop_assert!(deadline > now);
                for line in sent {
                    prop_assert!(line.len() <= 510);
                    prop_assert!(!line.contains(['\r', '\n', '\0']));
                    prop_assert!(Message::parse(line.as_bytes()).is_ok());
                }
            }
        }
    }
}
