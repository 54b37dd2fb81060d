//! One sans-IO engine per IRC connection: [`Desk`] and [`Remote`].
//!
//! Each owns an [`irc::Session`](crate::irc::Session) (registration, `PING`, `JOIN`, nick
//! fallback, our prefix) and an OA1 endpoint ([`Client`] for the desk, [`Server`] for the remote),
//! and routes every line to both. The host only moves bytes and time:
//!
//! - bytes read from the socket → [`Desk::handle_bytes`] (partial lines wait for the rest);
//! - the socket closed or failed → [`Desk::handle_eof`];
//! - drain [`Desk::poll_output`] until it answers [`ConnectionOutput::Timeout`]: write every
//!   `Transmit` (CRLF included), deliver every `Event`, then sleep until the deadline or until
//!   the socket is readable, and start again.
//!
//! A desk names its remote (`allowed_sender`: `rexd`, `rexd!~rexd@10.0.0.7`, or `*` for anyone)
//! and sends nothing until the channel is joined and the remote is in it (from the `NAMES` reply
//! and its `JOIN`), since IRC keeps no history: a request sent before would reach nobody.
//! Requests made meanwhile wait inside and leave in the same drain that reports the state
//! [`ConnectionState::Ready`]; their timeout starts then. Nothing a user gets wrong ends as a bare
//! timeout:
//!
//! - a bad nick, channel or allowed sender is refused when the engine is built ([`ConfigError`]);
//! - a request that cannot leave within `ready_timeout_ms` fails `not_ready`, saying what it
//!   waited for and who was there ([`Desk::waiting_for`]);
//! - a refused join ([`SessionEvent::JoinFailed`]: banned, invite only, ...) fails the waiting
//!   requests `join_failed` with the server's text, and is tried again after `rejoin_delay_ms`;
//! - a kick fails the requests in flight `kicked`; the engine joins again after
//!   `rejoin_delay_ms`;
//! - a remote that leaves with requests in flight fails them `peer_left` unless it is back
//!   within `peer_grace_ms` (2 s); a remote split away by a netsplit (a `QUIT` naming two
//!   servers) fails them `peer_left` at once, with a message naming the servers, since what
//!   crosses a broken link is lost. Requests made meanwhile wait for the remote's return (the
//!   `JOIN` of the heal), as for any absent remote;
//! - the end of the connection ([`SessionEvent::Disconnected`], or `handle_eof`) fails them
//!   `disconnected` with the reason; the remote's requests end with [`Event::Cancelled`]. A new
//!   connection needs a new engine.
//!
//! A nick the server refuses (`433` in use, ...) is a [`SessionEvent::NickRefused`], and the
//! session goes on as `desk_`, `desk1`, ...: a remote that accepts only `desk` ignores that desk.
//!
//! The whole host loop over a blocking TCP socket with a read timeout, in 30 lines (every
//! binding's loop has these four steps):
//!
//! ```no_run
//! use std::{io::{ErrorKind, Read, Write}, net::TcpStream, time::{Duration, Instant}};
//! use deskwire::oa1::{ConnectionConfig, ConnectionEvent, ConnectionOutput, Desk};
//! let clock = Instant::now();
//! let now = || clock.elapsed().as_millis() as u64;
//! let mut socket = TcpStream::connect("127.0.0.1:6667")?;
//! let config = ConnectionConfig::new("desk", "#desk").with_peer("rexd");
//! let mut desk = Desk::new(config, now(), getrandom::u64()?)?;
//! desk.request(now(), "uname -a", None)?; // waits inside until rexd is in the channel
//! let mut buf = [0u8; 16 * 1024];
//! loop {
//!     let deadline = loop {
//!         match desk.poll_output(now()) {
//!             ConnectionOutput::Transmit(bytes) => socket.write_all(&bytes)?,
//!             ConnectionOutput::Event(ConnectionEvent::Oa1(answer)) => {
//!                 println!("{answer:?}"); // Event::Response { text, .. } or Event::Failed
//!                 return Ok(());
//!             }
//!             ConnectionOutput::Event(event) => eprintln!("{event:?}"),
//!             ConnectionOutput::Timeout(deadline) => break deadline,
//!         }
//!     };
//!     let wait = deadline.saturating_sub(now()).max(1);
//!     socket.set_read_timeout(Some(Duration::from_millis(wait)))?;
//!     match socket.read(&mut buf) {
//!         Ok(0) => desk.handle_eof(now()), // the request fails: `disconnected`
//!         Ok(n) => desk.handle_bytes(now(), &buf[..n]),
//!         Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
//!         Err(e) => return Err(e.into()),
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::chat::{self, ChatError, ChatInbox, ChatItem, ChatMessage, MembershipEvent};
use super::client::format_duration;
use super::discovery::{Discovery, DiscoveryEvent};
use super::link::Parsed;
use super::pacing::{Gate, TokenBucket};
use super::{Client, Config, Event, Failure, LocalError, Output, Pacing, Server, Stats};
use crate::irc::{
    CaseMapping, DecodedLine, InvalidName, LineDecoder, Message, Privmsg, SenderPattern, Session,
    SessionConfig, SessionError, SessionEvent, SessionOutput, SessionStats, netsplit_servers,
    within_line_limits,
};

/// How to connect: the IRC login and the OA1 endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionConfig {
    /// Registration and keepalive. Its `nick` is ours (the OA1 endpoint's `nick` is set from
    /// it); the OA1 channel is joined in addition to its `channels`.
    pub session: SessionConfig,
    /// The OA1 endpoint: channel, allowed sender, limits, pacing. A desk's `allowed_sender`
    /// (its remote) is required.
    pub oa1: Config,
    /// How long to wait before joining the channel again after a kick, a part or a refused
    /// join.
    #[serde(default = "default_rejoin_delay_ms")]
    pub rejoin_delay_ms: u64,
    /// Desk: how long the remote may be out of the channel, with requests in flight, before
    /// those requests fail with [`Failure::PeerLeft`] (a quick part and join, or a netsplit
    /// healing, loses nothing).
    #[serde(default = "default_peer_grace_ms")]
    pub peer_grace_ms: u64,
}

fn default_rejoin_delay_ms() -> u64 {
    5_000
}

fn default_peer_grace_ms() -> u64 {
    2_000
}

/// Why a configuration cannot work; [`Desk::new`] and [`Remote::new`] refuse it at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A nick, user name or channel the server would refuse or rename.
    #[error("{0}")]
    Session(#[from] SessionError),
    /// `oa1.allowed_sender` is not a nick, a `nick!user@host` mask or `*`.
    #[error("oa1.allowed_sender: {0}")]
    AllowedSender(InvalidName),
    /// A desk sends into the channel only when its remote can hear it, so it must know who
    /// that is.
    #[error(
        "a desk needs its remote's nick in oa1.allowed_sender (`rexd --irc` joins as `rexd`), \
         or \"*\" to take answers from anyone in the channel"
    )]
    NoRemote,
    /// A desk names its remote by nick (whose presence it watches), not by account.
    #[error(
        "a desk names its remote by nick or nick!user@host, whose presence in the channel it \
         watches; account:NAME is for a remote's allowed sender (rexd --allow-from)"
    )]
    AccountRemote,
    /// A connection carries each channel once.
    #[error("{0} is already one of this connection's channels")]
    DuplicateChannel(String),
    /// `oa1.auth` with an empty secret: every tag would be one anyone can make.
    #[error(
        "oa1.auth.secret is empty, so anyone could sign frames: share a random one with the \
         remote (`openssl rand -hex 32`), or leave authentication off"
    )]
    EmptySecret,
    /// A limit below what can work.
    #[error("{field} must be at least {min}")]
    TooSmall {
        /// The key, e.g. `oa1.max_streams`.
        field: &'static str,
        /// The least value.
        min: u64,
    },
    /// A timeout of 0 ms, which would fail every request (or stream) at once.
    #[error(
        "{field} is 0, so every {what} would fail at once: it is in milliseconds, at least 1 \
         (the default is {default})"
    )]
    ZeroTimeout {
        /// The key, e.g. `oa1.request_timeout_ms`.
        field: &'static str,
        /// What it bounds.
        what: &'static str,
        /// Its default.
        default: u64,
    },
    /// The same setting given twice with different values (the channel or the nick, which
    /// JSON gives at the top level and a Rust `ConnectionConfig` in `session` and `oa1`).
    #[error("{field} is {value} but {other} is {other_value}: give the {what} once{hint}")]
    Conflict {
        /// The first key, e.g. `channel`.
        field: &'static str,
        /// Its value, as JSON (`"#desk"`).
        value: String,
        /// The key that disagrees, e.g. `oa1.channel`.
        other: &'static str,
        /// Its value, as JSON (`"#other"`, `["#x"]`).
        other_value: String,
        /// `channel` or `nick`.
        what: &'static str,
        /// Where to give it instead.
        hint: &'static str,
    },
}

impl ConnectionConfig {
    /// The defaults for `nick` on `channel`: the spec's, except two deskwire extensions that
    /// a spec-only peer never sees and that carry several times more output through a server's
    /// flood limit (`docs/oa1.md`): compressed answers offered and honoured
    /// (`oa1.compression`), and the largest payload that fits each line
    /// (`oa1.adaptive_payload`). Set both false for the v40 wire format exactly; the bare
    /// endpoints' [`Config::new`] keeps the spec's defaults. A desk also needs its remote: see
    /// [`ConnectionConfig::with_peer`].
    pub fn new(nick: &str, channel: &str) -> Self {
        // No channel yet ("") for a connection of many channels that adds them later.
        let channels: &[&str] = match channel.is_empty() {
            true => &[],
            false => &[channel],
        };
        let mut oa1 = Config::new(channel, nick);
        oa1.compression = true;
        oa1.adaptive_payload = true;
        ConnectionConfig {
            session: SessionConfig::new(nick, channels),
            oa1,
            rejoin_delay_ms: default_rejoin_delay_ms(),
            peer_grace_ms: default_peer_grace_ms(),
        }
    }

    /// Takes frames only from `peer` (`oa1.allowed_sender`): for a desk its remote (`rexd`, or
    /// `rexd!~rexd@10.0.0.7`, or `*` for anyone), for a remote the desk it answers.
    pub fn with_peer(mut self, peer: &str) -> Self {
        self.oa1.allowed_sender = Some(peer.to_owned());
        self
    }

    /// The configuration from JSON in the shape of `tests/vectors/oa1.json`:
    /// `{"nick": "desk", "channel": "#desk", "session": {...}, "oa1": {...}, "rejoin_delay_ms": N,
    /// "peer_grace_ms": N}` where `session` and `oa1` hold only the values that differ from
    /// [`ConnectionConfig::new`]. Unknown keys are refused.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Partial {
            nick: String,
            channel: String,
            #[serde(default)]
            session: serde_json::Map<String, serde_json::Value>,
            #[serde(default)]
            oa1: serde_json::Map<String, serde_json::Value>,
            #[serde(default = "default_rejoin_delay_ms")]
            rejoin_delay_ms: u64,
            #[serde(default = "default_peer_grace_ms")]
            peer_grace_ms: u64,
        }
        let partial: Partial = serde_json::from_str(json)?;
        check_given_once(
            &partial.nick,
            &partial.channel,
            &partial.session,
            &partial.oa1,
        )
        .map_err(<serde_json::Error as serde::de::Error>::custom)?;
        let defaults = ConnectionConfig::new(&partial.nick, &partial.channel);
        let merge = |defaults: serde_json::Value, overrides: serde_json::Map<_, _>| {
            let mut map = match defaults {
                serde_json::Value::Object(map) => map,
                _ => unreachable!("configs serialize as objects"),
            };
            map.extend(overrides);
            serde_json::Value::Object(map)
        };
        let session = merge(serde_json::to_value(&defaults.session)?, partial.session);
        let mut oa1_overrides = partial.oa1;
        // A pacing given means that pacing, unless server pacing is asked for too.
        if oa1_overrides.contains_key("pacing") && !oa1_overrides.contains_key("server_pacing") {
            oa1_overrides.insert("server_pacing".into(), serde_json::Value::Bool(false));
        }
        let oa1 = merge(serde_json::to_value(&defaults.oa1)?, oa1_overrides);
        Ok(ConnectionConfig {
            session: serde_json::from_value(session)?,
            oa1: serde_json::from_value(oa1)?,
            rejoin_delay_ms: partial.rejoin_delay_ms,
            peer_grace_ms: partial.peer_grace_ms,
        })
    }

    /// Checks what the server or the peer would otherwise refuse later, or what could never
    /// work: nick and channel syntax, the allowed sender, the limits, and (for a desk) that the
    /// remote is named.
    pub fn validate(&self, desk: bool) -> Result<(), ConfigError> {
        crate::irc::session::validate_channel(&self.oa1.channel)?;
        // One channel: `session.channels` (joined at registration) may only repeat it.
        if let Some(other) = self
            .session
            .channels
            .iter()
            .find(|c| !c.eq_ignore_ascii_case(&self.oa1.channel))
        {
            return Err(ConfigError::Conflict {
                field: "oa1.channel",
                value: serde_json::Value::from(self.oa1.channel.as_str()).to_string(),
                other: "session.channels",
                other_value: serde_json::Value::from(other.as_str()).to_string(),
                what: "channel",
                hint: " (a Desk or Remote has one channel, oa1.channel; MultiDesk and \
                       MultiRemote take more)",
            });
        }
        self.validate_without_channel(desk)
    }

    /// [`Self::validate`] but for the channel, for a connection of many channels that starts
    /// with none ([`super::MultiDesk`], [`super::MultiRemote`]).
    pub(super) fn validate_without_channel(&self, desk: bool) -> Result<(), ConfigError> {
        self.session.validate()?;
        match &self.oa1.allowed_sender {
            Some(sender) => {
                let pattern = SenderPattern::parse(sender).map_err(ConfigError::AllowedSender)?;
                if desk && pattern.needs_accounts() {
                    return Err(ConfigError::AccountRemote);
                }
            }
            None if desk => return Err(ConfigError::NoRemote),
            None => {}
        }
        if self
            .oa1
            .auth
            .as_ref()
            .is_some_and(|auth| auth.secret.is_empty())
        {
            return Err(ConfigError::EmptySecret);
        }
        let at_least = |field: &'static str, value: u64, min: u64| match value >= min {
            true => Ok(()),
            false => Err(ConfigError::TooSmall { field, min }),
        };
        let oa1 = &self.oa1;
        at_least("oa1.max_streams", oa1.max_streams as u64, 1)?;
        at_least("oa1.max_message_bytes", oa1.max_message_bytes as u64, 1)?;
        let min_payload = super::chunk::MIN_PAYLOAD_BUDGET as u64;
        at_least(
            "oa1.max_frame_payload_bytes",
            oa1.max_frame_payload_bytes as u64,
            min_payload,
        )?;
        at_least("oa1.pacing.burst", u64::from(oa1.pacing.burst), 1)?;
        let defaults = Config::new("", "");
        let not_zero =
            |field: &'static str, value: u64, what: &'static str, default: u64| match value {
                0 => Err(ConfigError::ZeroTimeout {
                    field,
                    what,
                    default,
                }),
                _ => Ok(()),
            };
        if desk {
            not_zero(
                "oa1.request_timeout_ms",
                oa1.request_timeout_ms,
                "request",
                defaults.request_timeout_ms,
            )?;
            not_zero(
                "oa1.ready_timeout_ms",
                oa1.ready_timeout_ms,
                "request made before the connection is ready",
                defaults.ready_timeout_ms,
            )?;
        }
        not_zero(
            "oa1.partial_timeout_ms",
            oa1.partial_timeout_ms,
            "stream of more than one frame",
            defaults.partial_timeout_ms,
        )?;
        Ok(())
    }
}

/// JSON gives the nick and the channel once, at the top level; the same key in `session` or
/// `oa1` (where a Rust `ConnectionConfig` keeps them) may only repeat it.
fn check_given_once(
    nick: &str,
    channel: &str,
    session: &serde_json::Map<String, serde_json::Value>,
    oa1: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), ConfigError> {
    let hint = " (the top-level key; the nested one may only repeat it)";
    let clash = |field, value: &str, other, given: Option<&serde_json::Value>, what| match given {
        Some(serde_json::Value::String(s)) if s == value => Ok(()),
        None => Ok(()),
        Some(given) => Err(ConfigError::Conflict {
            field,
            value: serde_json::Value::from(value).to_string(),
            other,
            other_value: given.to_string(),
            what,
            hint,
        }),
    };
    clash("nick", nick, "session.nick", session.get("nick"), "nick")?;
    clash("nick", nick, "oa1.nick", oa1.get("nick"), "nick")?;
    clash(
        "channel",
        channel,
        "oa1.channel",
        oa1.get("channel"),
        "channel",
    )?;
    if let Some(given) = session.get("channels") {
        let expected = match channel.is_empty() {
            true => serde_json::json!([]),
            false => serde_json::json!([channel]),
        };
        if *given != expected {
            return Err(ConfigError::Conflict {
                field: "channel",
                value: serde_json::Value::from(channel).to_string(),
                other: "session.channels",
                other_value: given.to_string(),
                what: "channel",
                hint: " (a desk or remote has the one top-level channel; a multi desk adds \
                       more with add_desk)",
            });
        }
    }
    Ok(())
}

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum ConnectionState {
    /// Registering with the server (`NICK`/`USER` sent, no `001` yet).
    Registering,
    /// Registered, not (or no longer) in the OA1 channel: lines are held. A refused join is
    /// tried again after `rejoin_delay_ms`.
    Joining,
    /// Desk only: registered under a fallback nick (ours was taken, often by our own previous
    /// connection, which the server has not yet seen go), asking for ours back (see
    /// `SessionConfig::nick_regain_ms`): a remote that serves our nick would ignore the
    /// fallback. Lines are held.
    WaitingForNick,
    /// Desk only: in the channel, waiting for the remote (`allowed_sender`; for `*`, anyone)
    /// to be there too, since IRC keeps no history and a request sent before would reach
    /// nobody. Lines are held.
    WaitingForPeer,
    /// In the channel (with the remote, for a desk): frames flow.
    Ready,
    /// The connection ended; the engine takes no more requests.
    Closed,
}

/// What happened to the connection itself. As JSON: `{"state_changed": {"state": "ready"}}`,
/// `{"peer_joined": {"nick": ...}}`, `{"peer_left": {"nick": ...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum LinkEvent {
    /// [`ConnectionState`] changed.
    StateChanged {
        /// The new state.
        state: ConnectionState,
    },
    /// The desk's remote (`allowed_sender`) is in the channel.
    PeerJoined {
        /// Its nick.
        nick: String,
    },
    /// The desk's remote left the channel (part, quit, kick or nick change).
    PeerLeft {
        /// Its nick.
        nick: String,
    },
}

/// Something the application should learn: from the IRC session, from OA1, or about the link.
///
/// As JSON the variant's own tag is the key, e.g. `{"joined": {"channel": "#desk"}}`,
/// `{"response": {"id": ..., "text": ..., "truncated": false}}` or
/// `{"state_changed": {"state": "ready"}}` (the names do not overlap).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum ConnectionEvent {
    /// Registration, joins and refused joins, nick changes and refused nicks, prefix changes,
    /// kicks, server errors, the end of the link.
    Irc(#[cfg_attr(feature = "uniffi", uniffi(name = "event"))] SessionEvent),
    /// A response, a failure, a request or a cancellation.
    Oa1(#[cfg_attr(feature = "uniffi", uniffi(name = "event"))] Event),
    /// The connection's state, and the peer's presence.
    Link(#[cfg_attr(feature = "uniffi", uniffi(name = "event"))] LinkEvent),
}

/// What the engine wants from the host next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionOutput {
    /// Write these bytes to the socket: one IRC line, CRLF included.
    Transmit(Vec<u8>),
    /// Tell the application.
    Event(ConnectionEvent),
    /// Nothing more to do before this instant (ms, the host's clock) unless bytes arrive; then
    /// call `handle_timeout` (or just `poll_output` again).
    Timeout(u64),
}

/// The counters of both layers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ConnectionStats {
    /// The IRC session's.
    pub irc: SessionStats,
    /// The OA1 endpoint's.
    pub oa1: Stats,
}

/// What the two endpoints share, for the generic connection below.
pub(super) trait Endpoint {
    fn handle_parsed(&mut self, now: u64, parsed: Parsed<'_, '_>);
    fn note_invalid_line(&mut self);
    fn poll_output(&mut self, now: u64) -> Output;
    fn set_held(&mut self, held: bool);
    /// The connection ended: requests in flight end, queued lines are dropped.
    fn end(&mut self, now: u64, why: &str);
    fn stats(&self) -> Stats;
    /// Desk: fails the requests in flight for which `why` (given whether the request's lines
    /// were let go) gives a failure. A remote has no requests of its own.
    fn fail_requests(&mut self, why: &mut dyn FnMut(bool) -> Option<Failure>);
    /// Desk: whether a request in flight may have reached the remote.
    fn has_started_requests(&self) -> bool;
    /// Desk: what held requests wait for, for their `not_ready` failure.
    fn set_hold_reason(&mut self, reason: &str);
    /// Desk: the remote left; whatever comes back may be another program.
    fn forget_peer(&mut self);
    fn config(&self) -> &Config;
    fn set_pacing(&mut self, pacing: Pacing);
    fn pacing(&self) -> Pacing;
    fn gate_mut(&mut self) -> &mut Gate;
    fn set_account_sources(&mut self, account_tag: bool, account_notify: bool);
}

impl Endpoint for Client {
    fn handle_parsed(&mut self, now: u64, parsed: Parsed<'_, '_>) {
        Client::handle_parsed(self, now, parsed)
    }
    fn config(&self) -> &Config {
        Client::config(self)
    }
    fn set_pacing(&mut self, pacing: Pacing) {
        Client::set_pacing(self, pacing)
    }
    fn pacing(&self) -> Pacing {
        Client::pacing(self)
    }
    fn gate_mut(&mut self) -> &mut Gate {
        Client::gate_mut(self)
    }
    fn set_account_sources(&mut self, account_tag: bool, account_notify: bool) {
        Client::set_account_sources(self, account_tag, account_notify)
    }
    fn note_invalid_line(&mut self) {
        Client::note_invalid_line(self)
    }
    fn poll_output(&mut self, now: u64) -> Output {
        Client::poll_output(self, now)
    }
    fn set_held(&mut self, held: bool) {
        Client::set_held(self, held)
    }
    fn end(&mut self, _now: u64, why: &str) {
        self.fail_all(&mut |_| {
            Some(Failure::Disconnected {
                message: why.to_owned(),
            })
        });
        self.clear_queue();
    }
    fn stats(&self) -> Stats {
        Client::stats(self)
    }
    fn fail_requests(&mut self, why: &mut dyn FnMut(bool) -> Option<Failure>) {
        self.fail_all(why)
    }
    fn has_started_requests(&self) -> bool {
        Client::has_started_requests(self)
    }
    fn set_hold_reason(&mut self, reason: &str) {
        Client::set_hold_reason(self, reason)
    }
    fn forget_peer(&mut self) {
        Client::forget_peer(self)
    }
}

impl Endpoint for Server {
    fn handle_parsed(&mut self, now: u64, parsed: Parsed<'_, '_>) {
        Server::handle_parsed(self, now, parsed)
    }
    fn config(&self) -> &Config {
        Server::config(self)
    }
    fn set_pacing(&mut self, pacing: Pacing) {
        Server::set_pacing(self, pacing)
    }
    fn pacing(&self) -> Pacing {
        Server::pacing(self)
    }
    fn gate_mut(&mut self) -> &mut Gate {
        Server::gate_mut(self)
    }
    fn set_account_sources(&mut self, account_tag: bool, account_notify: bool) {
        Server::set_account_sources(self, account_tag, account_notify)
    }
    fn note_invalid_line(&mut self) {
        Server::note_invalid_line(self)
    }
    fn poll_output(&mut self, now: u64) -> Output {
        Server::poll_output(self, now)
    }
    fn set_held(&mut self, held: bool) {
        Server::set_held(self, held)
    }
    fn end(&mut self, now: u64, _why: &str) {
        self.disconnect(now)
    }
    fn stats(&self) -> Stats {
        Server::stats(self)
    }
    fn fail_requests(&mut self, _why: &mut dyn FnMut(bool) -> Option<Failure>) {}
    fn has_started_requests(&self) -> bool {
        false
    }
    fn set_hold_reason(&mut self, _reason: &str) {}
    fn forget_peer(&mut self) {}
}

/// The most channel members a desk keeps track of (a dedicated desk channel has a handful).
const MAX_TRACKED_MEMBERS: usize = 1024;
/// The most member names a `not_ready` message lists.
const MEMBERS_SHOWN: usize = 8;

/// Who else is in the desk's channel, from `NAMES` and the `JOIN`s, `PART`s, `KICK`s, `QUIT`s
/// and `NICK`s that follow. Bounded: past [`MAX_TRACKED_MEMBERS`] new names are not kept.
#[derive(Debug, Default)]
pub(super) struct Members {
    /// Folded nick → the nick as the server wrote it.
    pub(super) names: BTreeMap<String, String>,
    /// Names were dropped at the cap.
    overflowed: bool,
}

impl Members {
    fn insert(&mut self, casemap: CaseMapping, nick: &str) {
        if nick.is_empty() {
            return;
        }
        if self.names.len() >= MAX_TRACKED_MEMBERS {
            self.overflowed = true;
            return;
        }
        self.names.insert(casemap.fold(nick), nick.to_owned());
    }

    fn remove(&mut self, casemap: CaseMapping, nick: &str) -> bool {
        self.names.remove(&casemap.fold(nick)).is_some()
    }

    fn contains(&self, casemap: CaseMapping, nick: &str) -> bool {
        self.names.contains_key(&casemap.fold(nick))
    }

    fn clear(&mut self) {
        self.names.clear();
        self.overflowed = false;
    }

    /// `deskbot, eve`, `none`, or the first few and how many more.
    fn describe(&self) -> String {
        if self.names.is_empty() {
            return "none".to_owned();
        }
        let mut text = self
            .names
            .values()
            .take(MEMBERS_SHOWN)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        let more = self.names.len().saturating_sub(MEMBERS_SHOWN);
        if more > 0 || self.overflowed {
            text.push_str(&format!(
                " and {}more",
                if more > 0 {
                    format!("{more} ")
                } else {
                    String::new()
                }
            ));
        }
        text
    }
}

/// The desk's remote left with requests in flight: they fail at `deadline` unless it is back.
#[derive(Debug)]
pub(super) struct PeerGone {
    deadline: u64,
    /// `remote \`rexd\` left #desk (quit: Ping timeout)`.
    how: String,
}

/// One OA1 channel of a connection: its endpoint, and what the connection knows of the
/// channel and of the peer in it.
#[derive(Debug)]
pub(super) struct Channel<E> {
    pub(super) name: String,
    pub(super) endpoint: E,
    /// Desk: the remote whose presence lets lines go. None for the remote role.
    peer: Option<SenderPattern>,
    /// Desk: the channel's other members.
    pub(super) members: Members,
    peer_present: bool,
    peer_gone: Option<PeerGone>,
    in_channel: bool,
    /// The server's last refusal of our `JOIN`, until a join succeeds.
    join_refused: Option<String>,
    rejoin_at: Option<u64>,
    pub(super) state: ConnectionState,
    /// Chat lines waiting for a turn (`PRIVMSG #channel :text`), and their bytes.
    chat_out: VecDeque<String>,
    chat_out_bytes: usize,
    /// Chat goes next in this channel's turn (it alternates with OA1 lines).
    chat_turn: bool,
    /// Membership: the `NAMES` reply so far (`353`s), handed out at its end (`366`).
    names_pending: Vec<String>,
}

/// The channel-less states come from the connection; the rest from the channel.
impl<E: Endpoint> Channel<E> {
    fn new(name: String, endpoint: E, peer: Option<SenderPattern>) -> Self {
        Channel {
            name,
            endpoint,
            peer,
            members: Members::default(),
            peer_present: false,
            peer_gone: None,
            in_channel: false,
            join_refused: None,
            rejoin_at: None,
            state: ConnectionState::Registering,
            chat_out: VecDeque::new(),
            chat_out_bytes: 0,
            chat_turn: true,
            names_pending: Vec::new(),
        }
    }

    fn left_channel(&mut self, now: u64, rejoin_delay_ms: u64) {
        self.in_channel = false;
        self.members.clear();
        self.peer_present = false;
        self.peer_gone = None;
        self.rejoin_at = Some(now.saturating_add(rejoin_delay_ms));
    }
}

/// An OA1 event, or a link event, of a channel; `None` for what concerns the whole connection.
type ChannelEvent = (String, ConnectionEvent);

/// What an endpoint gave when polled.
enum Polled {
    Transmit(String),
    Event(String, Event),
    Idle(u64),
}

/// The session, the channels' endpoints and the state between them.
#[derive(Debug)]
pub(super) struct Connection<E> {
    pub(super) session: Session,
    decoder: LineDecoder,
    pub(super) channels: Vec<Channel<E>>,
    /// Desk: channels are desks, each waiting for its remote.
    desk: bool,
    /// The OA1 settings of channels added later by name, and how their endpoints are made.
    pub(super) template: Config,
    make: fn(Config, u64) -> E,
    /// The next seed for a desk's request ids.
    seeds: u64,
    /// Many channels: one bucket for the connection, whose lines the server counts together,
    /// handed out round robin from `next_turn`. One channel paces itself (its endpoint's own
    /// bucket).
    shared: Option<TokenBucket>,
    next_turn: usize,
    /// The server's own pacing has been taken.
    server_paced: bool,
    closed: bool,
    /// The connection's state: registering, registered (`Ready`) or closed; a channel's own is
    /// in its [`Channel`].
    pub(super) state: ConnectionState,
    /// Events not handed out yet: link events from state transitions, and the last events of
    /// channels removed.
    events: VecDeque<ChannelEvent>,
    rejoin_delay_ms: u64,
    peer_grace_ms: u64,
    /// An `account:` allowed sender: follow what the server says about accounts.
    watch_accounts: bool,
    /// Remote: channels to serve found by `LIST` (device-code binding).
    pub(super) discovery: Option<Discovery>,
    /// Channel chat and membership, when the host asked for either.
    pub(super) chat: Option<ChatInbox>,
    /// Channels removed while we were in them, whose `PART` the server has not echoed yet: that
    /// echo is the old channel's, not a channel of the same name added since.
    parting: VecDeque<String>,
}

/// The most removed channels whose `PART` echo is awaited (beyond, the oldest is forgotten).
const MAX_PARTING: usize = 64;

fn with_crlf(line: String) -> Vec<u8> {
    let mut bytes = line.into_bytes();
    bytes.extend_from_slice(b"\r\n");
    bytes
}

/// A nick in a `353` (`NAMES`) reply without its channel-status prefix (`@`, `+`, ...).
fn strip_status(nick: &str) -> &str {
    nick.trim_start_matches(['@', '+', '%', '&', '~', '!'])
}

/// SplitMix64: the seeds of a connection's desks, one from the next, so two desks never share
/// a sequence of request ids.
fn next_seed(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl<E: Endpoint> Connection<E> {
    /// A connection with the channel `config.oa1.channel`, or with none yet when that is empty
    /// and `shared` (many channels) is asked for.
    pub(super) fn new(
        mut config: ConnectionConfig,
        now: u64,
        desk: bool,
        shared: bool,
        seed: u64,
        make: fn(Config, u64) -> E,
    ) -> Result<Self, ConfigError> {
        let first = config.oa1.channel.clone();
        if first.is_empty() && shared {
            // Each desk added names its own remote.
            config.validate_without_channel(false)?;
        } else {
            config.validate(desk)?;
        }
        config.oa1.nick = config.session.nick.clone();
        // A remote is a bot: it marks itself so where the server has a bot mode.
        if !desk {
            config.session.bot_mode = true;
        }
        // An `account:` sender is known by each message's account tag, or, on servers without
        // it, from what the server says of the channel's members: ask for all three.
        let needs_accounts = config
            .oa1
            .allowed_sender
            .as_deref()
            .and_then(|s| SenderPattern::parse(s).ok())
            .is_some_and(|p| p.needs_accounts());
        if needs_accounts {
            for cap in ["account-tag", "account-notify", "extended-join"] {
                if !config.session.capabilities.iter().any(|c| c == cap) {
                    config.session.capabilities.push(cap.to_owned());
                }
            }
        }
        let mut connection = Connection {
            decoder: LineDecoder::new(config.session.max_line_bytes),
            session: Session::new(config.session, now),
            channels: Vec::new(),
            desk,
            shared: shared.then(|| TokenBucket::new(config.oa1.pacing)),
            template: config.oa1,
            make,
            seeds: seed,
            next_turn: 0,
            server_paced: false,
            closed: false,
            state: ConnectionState::Registering,
            events: VecDeque::new(),
            rejoin_delay_ms: config.rejoin_delay_ms,
            peer_grace_ms: config.peer_grace_ms,
            watch_accounts: needs_accounts,
            discovery: None,
            chat: None,
            parting: VecDeque::new(),
        };
        if !first.is_empty() {
            let oa1 = connection.template.clone();
            connection.add_channel(oa1)?;
        }
        Ok(connection)
    }

    /// Adds the channel `oa1.channel` with its own endpoint, and joins it (at once when
    /// registered, else after `001`).
    pub(super) fn add_channel(&mut self, mut oa1: Config) -> Result<(), ConfigError> {
        crate::irc::session::validate_channel(&oa1.channel)?;
        if self.find(&oa1.channel).is_some() {
            return Err(ConfigError::DuplicateChannel(oa1.channel));
        }
        if self.closed {
            return Err(ConfigError::Session(SessionError::Closed));
        }
        let peer = match self.desk {
            true => {
                let pattern = oa1.allowed_sender.as_deref().ok_or(ConfigError::NoRemote)?;
                let pattern = SenderPattern::parse(pattern).map_err(ConfigError::AllowedSender)?;
                if pattern.needs_accounts() {
                    return Err(ConfigError::AccountRemote);
                }
                Some(pattern)
            }
            false => None,
        };
        oa1.nick = self.session.identity().nick().to_owned();
        self.session.join(&oa1.channel)?;
        let name = oa1.channel.clone();
        let pacing = oa1.pacing;
        let mut endpoint = (self.make)(oa1, next_seed(&mut self.seeds));
        endpoint.set_held(true);
        if self.shared.is_some() {
            *endpoint.gate_mut() = Gate::shared(pacing);
        }
        let caps = self.session.capabilities();
        let on = |cap: &str| caps.iter().any(|c| c == cap);
        endpoint.set_account_sources(on("account-tag"), on("account-notify"));
        let mut channel = Channel::new(name, endpoint, peer);
        channel.state = match self.session.is_registered() {
            true => ConnectionState::Joining,
            false => ConnectionState::Registering,
        };
        self.channels.push(channel);
        Ok(())
    }

    /// Leaves `name` and drops its endpoint: a desk's requests fail `disconnected`, a remote's
    /// end with [`Event::Cancelled`]; those events still come out.
    pub(super) fn remove_channel(&mut self, now: u64, name: &str, why: &str) -> bool {
        let Some(index) = self.find(name) else {
            return false;
        };
        let mut channel = self.channels.remove(index);
        // Fails only when the session has ended or not registered: no PART is needed then.
        if channel.in_channel && self.session.part(&channel.name).is_ok() {
            if self.parting.len() >= MAX_PARTING {
                self.parting.pop_front();
            }
            self.parting.push_back(channel.name.clone());
        }
        channel.endpoint.end(now, why);
        while let Output::Event(event) = channel.endpoint.poll_output(now) {
            self.events
                .push_back((channel.name.clone(), ConnectionEvent::Oa1(event)));
        }
        if self.next_turn > index {
            self.next_turn -= 1;
        }
        true
    }

    pub(super) fn find(&self, name: &str) -> Option<usize> {
        let casemap = self.session.identity().casemapping();
        self.channels.iter().position(|c| casemap.eq(&c.name, name))
    }

    pub(super) fn channel(&self, name: &str) -> Option<&Channel<E>> {
        self.find(name).map(|i| &self.channels[i])
    }

    pub(super) fn channel_mut(&mut self, name: &str) -> Option<&mut Channel<E>> {
        self.find(name).map(|i| &mut self.channels[i])
    }

    /// The only channel of a [`Desk`] or [`Remote`].
    fn single(&self) -> &Channel<E> {
        &self.channels[0]
    }

    fn single_mut(&mut self) -> &mut Channel<E> {
        &mut self.channels[0]
    }

    pub(super) fn handle_bytes(&mut self, now: u64, bytes: &[u8]) {
        self.decoder.feed(bytes);
        // The decoder lends each line out of its buffer; it leaves `self` meanwhile.
        let mut decoder = std::mem::take(&mut self.decoder);
        while let Some(decoded) = decoder.next_line() {
            match decoded {
                // A line over IRC's limits (the tag section and the rest each counted on its
                // own) is one no conforming server sends: dropped, as an over-long one.
                DecodedLine::Line(line)
                    if !within_line_limits(line, self.session.identity().line_limit()) =>
                {
                    self.note_invalid_line();
                    self.session.note_too_long(now);
                }
                // Each line is parsed once, for the endpoints, the session and the members.
                DecodedLine::Line(line) => match Privmsg::parse(line) {
                    // Someone else's relayed message, nearly every line: only the OA1 endpoint
                    // of its channel reads it.
                    Some(msg) if !self.session.identity().is_me(msg.source.nick) => {
                        if let Some(index) = self.find(msg.target) {
                            self.channels[index]
                                .endpoint
                                .handle_parsed(now, Parsed::Relayed(msg));
                            self.take_chat(index, msg.source.raw, msg.text, false, Vec::new());
                        }
                        self.session.handle_relayed(now);
                    }
                    _ => match Message::parse(line) {
                        Ok(msg) => {
                            for channel in &mut self.channels {
                                channel.endpoint.handle_parsed(now, Parsed::Message(&msg));
                            }
                            self.session.handle_parsed(now, &msg);
                            if let Some(discovery) = &mut self.discovery {
                                discovery.on_message(&msg);
                            }
                            let membership = self.chat.as_ref().is_some_and(|c| c.membership);
                            if self.chat.as_ref().is_some_and(|c| c.messages) {
                                self.chat_message(&msg);
                            }
                            if membership {
                                // Before the members are updated: a QUIT or NICK is told in
                                // the channels its nick was in.
                                self.membership_events(&msg);
                            }
                            if self.watch_accounts {
                                self.follow_accounts(&msg);
                            }
                            if self.desk || membership {
                                for index in 0..self.channels.len() {
                                    self.track_members(index, &msg);
                                    if self.desk {
                                        self.update_peer(index, now, &msg);
                                    }
                                }
                            }
                        }
                        Err(_) => {
                            self.note_invalid_line();
                            self.session.note_invalid(now);
                        }
                    },
                },
                DecodedLine::TooLong { .. } => self.session.note_too_long(now),
            }
        }
        self.decoder = decoder;
    }

    /// A channel's `PRIVMSG` or `NOTICE` that is not an OA1 frame, for a host that asked for
    /// chat.
    fn take_chat(
        &mut self,
        index: usize,
        sender: &str,
        text: &[u8],
        notice: bool,
        tags: Vec<(String, String)>,
    ) {
        let Some(inbox) = self.chat.as_mut().filter(|c| c.messages) else {
            return;
        };
        if chat::is_frame(text) {
            return;
        }
        if let Some((kind, text)) = chat::classify(text, notice) {
            inbox.push(ChatItem::Message(ChatMessage {
                channel: self.channels[index].name.clone(),
                sender: sender.to_owned(),
                kind,
                text,
                tags,
            }));
        }
    }

    /// The membership changes a line makes in the carried channels, for a host that asked.
    fn membership_events(&mut self, msg: &Message<'_>) {
        let identity = self.session.identity();
        let casemap = identity.casemapping();
        let source = msg.source_nick().unwrap_or_default();
        let name = |index: usize| self.channels[index].name.clone();
        let mut events = Vec::new();
        match msg.command {
            "353" => {
                // 353 <me> <type> <channel> :<nicks>
                if let [_, _, chan, nicks] = msg.params()
                    && let Some(index) = self.find(chan)
                {
                    let pending = &mut self.channels[index].names_pending;
                    for nick in nicks.split(' ').map(strip_status).filter(|n| !n.is_empty()) {
                        if pending.len() < MAX_TRACKED_MEMBERS {
                            pending.push(nick.to_owned());
                        }
                    }
                }
            }
            "366" => {
                // 366 <me> <channel> :End of /NAMES list
                if let Some(index) = msg.param(1).and_then(|chan| self.find(chan)) {
                    let channel = &mut self.channels[index];
                    events.push(MembershipEvent::Names {
                        channel: channel.name.clone(),
                        nicks: std::mem::take(&mut channel.names_pending),
                    });
                }
            }
            _ if msg.is("JOIN") => {
                if let Some(index) = msg.param(0).and_then(|chan| self.find(chan)) {
                    let channel = &mut self.channels[index];
                    if identity.is_me(source) {
                        // Our own join: the NAMES reply that follows starts a new list.
                        channel.names_pending.clear();
                    }
                    events.push(MembershipEvent::Joined {
                        channel: channel.name.clone(),
                        nick: source.to_owned(),
                    });
                }
            }
            _ if msg.is("PART") => {
                if let Some(index) = msg.param(0).and_then(|chan| self.find(chan)) {
                    events.push(MembershipEvent::Parted {
                        channel: name(index),
                        nick: source.to_owned(),
                        reason: msg.param(1).map(str::to_owned),
                    });
                }
            }
            _ if msg.is("KICK") => {
                if let (Some(index), Some(victim)) =
                    (msg.param(0).and_then(|chan| self.find(chan)), msg.param(1))
                {
                    events.push(MembershipEvent::Kicked {
                        channel: name(index),
                        nick: victim.to_owned(),
                        by: source.to_owned(),
                        reason: msg.param(2).map(str::to_owned),
                    });
                }
            }
            _ if msg.is("QUIT") => {
                for (index, channel) in self.channels.iter().enumerate() {
                    if channel.members.contains(casemap, source) {
                        events.push(MembershipEvent::Quit {
                            channel: name(index),
                            nick: source.to_owned(),
                            reason: msg.param(0).map(str::to_owned),
                        });
                    }
                }
            }
            _ if msg.is("NICK") => {
                let Some(new_nick) = msg.param(0) else { return };
                // The session has already taken our own change: `new_nick` is us then.
                let ours = identity.is_me(new_nick);
                let joined = self.session.channels();
                for (index, channel) in self.channels.iter().enumerate() {
                    let seen = match ours {
                        // The session knows at once (a channel's own flag waits for a poll).
                        true => joined.iter().any(|c| casemap.eq(c, &channel.name)),
                        false => channel.members.contains(casemap, source),
                    };
                    if seen {
                        events.push(MembershipEvent::Renamed {
                            channel: name(index),
                            nick: source.to_owned(),
                            new_nick: new_nick.to_owned(),
                        });
                    }
                }
            }
            _ => {}
        }
        if let Some(inbox) = &mut self.chat {
            for event in events {
                inbox.push(ChatItem::Membership(event));
            }
        }
    }

    /// Chat from a fully parsed line: tagged `PRIVMSG`s and every `NOTICE` come this way.
    fn chat_message(&mut self, msg: &Message<'_>) {
        let notice = msg.is("NOTICE");
        if !(notice || msg.is("PRIVMSG")) {
            return;
        }
        let Some(source) = &msg.source else { return };
        if self.session.identity().is_me(source.nick) {
            return;
        }
        let (Some(target), Some(text)) = (msg.param(0), msg.trailing()) else {
            return;
        };
        let Some(index) = self.find(target) else {
            return;
        };
        let tags = msg
            .tags()
            .map(|(k, v)| (k.to_owned(), v.into_owned()))
            .collect();
        let sender = source.raw;
        self.take_chat(index, sender, text.as_bytes(), notice, tags);
    }

    /// Queues `text` for `channel` as chat (`NOTICE`s with `notice`), cut into lines that fit,
    /// sent in turn with the channels' OA1 lines once the channel is joined. Returns how many
    /// lines it makes.
    pub(super) fn send_text(
        &mut self,
        channel: &str,
        text: &str,
        notice: bool,
    ) -> Result<usize, ChatError> {
        if self.closed {
            return Err(ChatError::Closed);
        }
        let Some(index) = self.find(channel) else {
            return Err(ChatError::UnknownChannel(channel.to_owned()));
        };
        let name = self.channels[index].name.clone();
        let budget = self.session.identity().privmsg_text_budget(&name);
        let lines = chat::split(text, budget)?;
        let channel = &mut self.channels[index];
        let bytes: usize = lines.iter().map(String::len).sum();
        if channel.chat_out_bytes + bytes > chat::MAX_OUTBOX_BYTES {
            return Err(ChatError::QueueFull {
                channel: name,
                queued: channel.chat_out_bytes,
                adding: bytes,
            });
        }
        let command = if notice { "NOTICE" } else { "PRIVMSG" };
        let count = lines.len();
        for line in lines {
            channel.chat_out_bytes += line.len();
            channel
                .chat_out
                .push_back(format!("{command} {name} :{line}"));
        }
        Ok(count)
    }

    fn note_invalid_line(&mut self) {
        for channel in &mut self.channels {
            channel.endpoint.note_invalid_line();
        }
    }

    /// For an `account:` allowed sender: tells the endpoints which capabilities say who is
    /// logged in, once the server has enabled them, and asks who already is when we join.
    fn follow_accounts(&mut self, msg: &Message<'_>) {
        let joined = match msg.is("JOIN")
            && msg
                .source_nick()
                .is_some_and(|n| self.session.identity().is_me(n))
        {
            true => msg.param(0).and_then(|c| self.find(c)),
            false => None,
        };
        if !msg.is("CAP") && joined.is_none() {
            return;
        }
        let caps = self.session.capabilities();
        let on = |cap: &str| caps.iter().any(|c| c == cap);
        let (tag, notify) = (on("account-tag"), on("account-notify"));
        match joined {
            // Only the member list needs it: with account-tag, each message says.
            Some(index) if notify && !tag => {
                let name = self.channels[index].name.clone();
                self.session.who_accounts(&name);
            }
            Some(_) => {}
            None => {
                for channel in &mut self.channels {
                    channel.endpoint.set_account_sources(tag, notify);
                }
            }
        }
    }

    /// Keeps the member list of a desk's channel: `NAMES` replies, and `JOIN`, `PART`, `KICK`,
    /// `QUIT` and `NICK`. Our own nick is never a member; our own join, part or kick starts the
    /// list again.
    fn track_members(&mut self, index: usize, msg: &Message<'_>) {
        let identity = self.session.identity();
        let channel = &mut self.channels[index];
        let members = &mut channel.members;
        let casemap = identity.casemapping();
        let ours = |name: Option<&str>| name.is_some_and(|c| casemap.eq(c, &channel.name));
        let source = msg.source_nick();
        let from_me = source.is_some_and(|n| identity.is_me(n));
        if msg.command == "353" {
            // 353 <me> <type> <channel> :<nicks>
            if let [_, _, chan, names] = msg.params()
                && ours(Some(chan))
            {
                for name in names.split(' ').map(strip_status) {
                    if !identity.is_me(name) {
                        members.insert(casemap, name);
                    }
                }
            }
        } else if msg.is("JOIN") && ours(msg.param(0)) {
            match (from_me, source) {
                (true, _) => members.clear(),
                (false, Some(nick)) => members.insert(casemap, nick),
                _ => {}
            }
        } else if msg.is("PART") && ours(msg.param(0)) {
            match (from_me, source) {
                (true, _) => members.clear(),
                (false, Some(nick)) => _ = members.remove(casemap, nick),
                _ => {}
            }
        } else if msg.is("KICK") && ours(msg.param(0)) {
            match msg.param(1) {
                Some(victim) if identity.is_me(victim) => members.clear(),
                Some(victim) => _ = members.remove(casemap, victim),
                None => {}
            }
        } else if msg.is("QUIT") {
            if let Some(nick) = source {
                members.remove(casemap, nick);
            }
        } else if msg.is("NICK")
            && let (Some(old), Some(new)) = (source, msg.param(0))
        {
            // The session has already taken our own change: `new` is us then.
            if members.remove(casemap, old) && !identity.is_me(new) {
                members.insert(casemap, new);
            }
        }
    }

    /// Whether a desk's remote is here now; a change is a link event, and a remote that left
    /// with requests in flight starts the grace period.
    fn update_peer(&mut self, index: usize, now: u64, msg: &Message<'_>) {
        let identity = self.session.identity();
        let casemap = identity.casemapping();
        let channel = &mut self.channels[index];
        let Some(peer) = &channel.peer else { return };
        let present = match peer.nick() {
            Some(nick) => channel.members.contains(casemap, nick),
            None => !channel.members.names.is_empty(),
        };
        if present == channel.peer_present {
            return;
        }
        channel.peer_present = present;
        let nick = match peer.nick() {
            Some(nick) => nick.to_owned(),
            None => msg
                .source_nick()
                .filter(|n| !identity.is_me(n))
                .or_else(|| channel.members.names.values().next().map(String::as_str))
                .unwrap_or("*")
                .to_owned(),
        };
        let name = channel.name.clone();
        if present {
            channel.peer_gone = None;
            self.events
                .push_back((name, ConnectionEvent::Link(LinkEvent::PeerJoined { nick })));
            return;
        }
        channel.endpoint.forget_peer();
        let split = msg
            .is("QUIT")
            .then(|| msg.param(0).and_then(netsplit_servers))
            .flatten();
        if let Some((near, far)) = split {
            // Lines sent across a broken link are lost, and the remote, which saw this desk
            // split away, has stopped their work: waiting for the heal would only wait for a
            // timeout. Requests not sent yet wait for the remote as for any absent remote.
            let message = format!(
                "remote `{nick}` was split away from {} by a netsplit between {near} and {far}; \
                 the answer is lost",
                channel.name
            );
            channel.endpoint.fail_requests(&mut |started| {
                started.then(|| Failure::PeerLeft {
                    message: message.clone(),
                })
            });
        } else if channel.endpoint.has_started_requests() && channel.peer_gone.is_none() {
            let how = match msg.command {
                c if c.eq_ignore_ascii_case("QUIT") => {
                    format!("quit: {}", msg.param(0).unwrap_or(""))
                }
                c if c.eq_ignore_ascii_case("KICK") => format!(
                    "kicked by {}: {}",
                    msg.source_nick().unwrap_or("?"),
                    msg.param(2).unwrap_or("")
                ),
                c if c.eq_ignore_ascii_case("NICK") => {
                    format!("now called {}", msg.param(0).unwrap_or("?"))
                }
                _ => "part".to_owned(),
            };
            channel.peer_gone = Some(PeerGone {
                deadline: now.saturating_add(self.peer_grace_ms),
                how: format!("remote `{nick}` left {} ({how})", channel.name),
            });
        }
        self.events
            .push_back((name, ConnectionEvent::Link(LinkEvent::PeerLeft { nick })));
    }

    pub(super) fn handle_eof(&mut self, now: u64) {
        self.session.handle_eof(now);
    }

    pub(super) fn handle_timeout(&mut self, now: u64) {
        self.session.handle_timeout(now);
    }

    pub(super) fn quit(&mut self, now: u64, reason: &str) {
        self.session.quit(reason);
        self.handle_timeout(now);
    }

    /// The pacing the server's `004` names, once per connection, when asked for.
    fn take_server_pacing(&mut self) {
        if self.server_paced || !self.template.server_pacing {
            return;
        }
        let Some(pacing) = self.session.server_version().and_then(Pacing::for_server) else {
            return;
        };
        self.server_paced = true;
        match &mut self.shared {
            Some(bucket) => *bucket = TokenBucket::new(pacing),
            None => {
                for channel in &mut self.channels {
                    if channel.endpoint.config().server_pacing {
                        channel.endpoint.set_pacing(pacing);
                    }
                }
            }
        }
    }

    /// Takes note of a session event before the host sees it; requests the event dooms fail now.
    fn on_session_event(&mut self, now: u64, event: &SessionEvent) {
        let rejoin_delay_ms = self.rejoin_delay_ms;
        match event {
            SessionEvent::Joined { channel } => {
                // By now the server has said what it is (`004` comes before any join).
                self.take_server_pacing();
                if let Some(ours) = self.channel_mut(channel) {
                    ours.in_channel = true;
                    ours.join_refused = None;
                    ours.rejoin_at = None;
                }
            }
            SessionEvent::JoinFailed {
                channel,
                numeric,
                text,
            } => {
                let Some(ours) = self.channel_mut(channel) else {
                    return;
                };
                let refusal = format!("{numeric} {text}");
                let message = format!("the server refused to let us into {channel}: {refusal}");
                ours.endpoint.fail_requests(&mut |_| {
                    Some(Failure::JoinFailed {
                        message: message.clone(),
                    })
                });
                ours.join_refused = Some(refusal);
                ours.rejoin_at = Some(now.saturating_add(rejoin_delay_ms));
            }
            SessionEvent::Kicked {
                channel,
                by,
                reason,
            } => {
                if self.forget_parting(channel) {
                    // Kicked before our PART reached the server (which then has no PART to
                    // echo): the removed channel's membership, not a new one's.
                    return;
                }
                let Some(ours) = self.channel_mut(channel) else {
                    return;
                };
                let message = format!("kicked from {channel} by {by}: {reason}");
                ours.endpoint.fail_requests(&mut |started| {
                    started.then(|| Failure::Kicked {
                        message: message.clone(),
                    })
                });
                ours.left_channel(now, rejoin_delay_ms);
            }
            SessionEvent::Parted { channel } => {
                if self.forget_parting(channel) {
                    // The removed channel's PART: a channel added since under that name has
                    // joined (or is joining) again, and keeps what its JOIN brought.
                    return;
                }
                if let Some(ours) = self.channel_mut(channel) {
                    ours.left_channel(now, rejoin_delay_ms);
                }
            }
            SessionEvent::Disconnected { reason } => {
                self.closed = true;
                self.parting.clear();
                for channel in &mut self.channels {
                    channel.in_channel = false;
                    channel.rejoin_at = None;
                    channel.peer_gone = None;
                    channel.endpoint.set_held(true);
                    channel.endpoint.end(now, &reason.to_string());
                }
            }
            _ => {}
        }
    }

    /// Whether `channel` was removed with its `PART` unanswered; forgets it if so.
    fn forget_parting(&mut self, channel: &str) -> bool {
        let casemap = self.session.identity().casemapping();
        match self.parting.iter().position(|c| casemap.eq(c, channel)) {
            Some(at) => {
                self.parting.remove(at);
                true
            }
            None => false,
        }
    }

    /// What the held lines of `channel` wait for, in words (`None` when ready or closed).
    pub(super) fn waiting_for(&self, channel: &Channel<E>) -> Option<String> {
        let name = &channel.name;
        match channel.state {
            ConnectionState::Registering => Some("registration with the server".to_owned()),
            ConnectionState::Joining => Some(match &channel.join_refused {
                Some(refusal) => format!("joining {name} (refused: {refusal})"),
                None => format!("joining {name}"),
            }),
            ConnectionState::WaitingForNick => Some(format!(
                "our nick `{}` back (it was taken when we registered, so we are `{}`; a remote \
                 that serves `{}` would ignore `{}`)",
                self.session.regaining_nick().unwrap_or(""),
                self.session.identity().nick(),
                self.session.regaining_nick().unwrap_or(""),
                self.session.identity().nick(),
            )),
            ConnectionState::WaitingForPeer => {
                let members = channel.members.describe();
                Some(match channel.peer.as_ref().and_then(SenderPattern::nick) {
                    Some(nick) => format!("remote `{nick}` in {name}; members: {members}"),
                    None => format!("another member in {name}; members: {members}"),
                })
            }
            ConnectionState::Ready | ConnectionState::Closed => None,
        }
    }

    /// The states the flags say; a change holds or releases a channel's lines and is reported.
    fn update_state(&mut self) {
        self.state = if self.closed {
            ConnectionState::Closed
        } else if !self.session.is_registered() {
            ConnectionState::Registering
        } else {
            ConnectionState::Ready
        };
        let waiting_for_nick = self.desk && self.session.regaining_nick().is_some();
        for index in 0..self.channels.len() {
            let channel = &self.channels[index];
            let state = match self.state {
                ConnectionState::Ready if !channel.in_channel => ConnectionState::Joining,
                ConnectionState::Ready if waiting_for_nick => ConnectionState::WaitingForNick,
                ConnectionState::Ready if channel.peer.is_some() && !channel.peer_present => {
                    ConnectionState::WaitingForPeer
                }
                state => state,
            };
            if state != channel.state {
                let channel = &mut self.channels[index];
                channel.state = state;
                channel.endpoint.set_held(state != ConnectionState::Ready);
                let event = ConnectionEvent::Link(LinkEvent::StateChanged { state });
                self.events.push_back((channel.name.clone(), event));
            }
            let channel = &self.channels[index];
            if let Some(reason) = self.waiting_for(channel) {
                self.channels[index].endpoint.set_hold_reason(&reason);
            }
        }
    }

    /// The next chat line of channel `index`, on the shared bucket's token.
    fn send_chat(&mut self, index: usize, now: u64) -> Polled {
        let count = self.channels.len();
        let channel = &mut self.channels[index];
        let Some(line) = channel.chat_out.pop_front() else {
            return Polled::Idle(now);
        };
        channel.chat_out_bytes = channel.chat_out_bytes.saturating_sub(line.len());
        channel.chat_turn = false;
        if let Some(bucket) = &mut self.shared {
            bucket.try_take(now);
        }
        self.next_turn = (index + 1) % count;
        Polled::Transmit(line)
    }

    /// The endpoints' next line or event. One channel paces itself; many take turns at the
    /// connection's bucket, round robin, so that each channel with a line waiting sends one in
    /// turn.
    fn poll_endpoints(&mut self, now: u64) -> Polled {
        let Some(bucket) = &self.shared else {
            let Some(channel) = self.channels.first_mut() else {
                return Polled::Idle(u64::MAX);
            };
            return match channel.endpoint.poll_output(now) {
                Output::Transmit(line) => Polled::Transmit(line),
                Output::Event(event) => Polled::Event(channel.name.clone(), event),
                Output::Timeout(deadline) => Polled::Idle(deadline),
            };
        };
        let (pacing, ready_at) = (bucket.pacing(), bucket.ready_at(now));
        let count = self.channels.len();
        let mut deadline = u64::MAX;
        for k in 0..count {
            let index = (self.next_turn + k) % count;
            let channel = &self.channels[index];
            // Chat waits its channel's turn, as its OA1 lines do, and alternates with them.
            let chat_waits = channel.in_channel && !channel.chat_out.is_empty();
            if chat_waits {
                if ready_at <= now && channel.chat_turn {
                    return self.send_chat(index, now);
                }
                deadline = deadline.min(ready_at);
            }
            let channel = &mut self.channels[index];
            channel
                .endpoint
                .gate_mut()
                .grant(pacing, ready_at, ready_at <= now);
            let output = channel.endpoint.poll_output(now);
            if channel.endpoint.gate_mut().take_used() {
                if let Some(bucket) = &mut self.shared {
                    bucket.try_take(now);
                }
                channel.chat_turn = true;
                self.next_turn = (index + 1) % count;
            }
            match output {
                Output::Transmit(line) => return Polled::Transmit(line),
                Output::Event(event) => return Polled::Event(channel.name.clone(), event),
                Output::Timeout(at) => deadline = deadline.min(at),
            }
            // OA1 had no line for the turn: chat takes it.
            if chat_waits && ready_at <= now {
                return self.send_chat(index, now);
            }
        }
        Polled::Idle(deadline)
    }

    /// The next output, with the channel an event belongs to (`None`: the connection's).
    pub(super) fn poll(&mut self, now: u64) -> (Option<String>, ConnectionOutput) {
        self.session.handle_timeout(now);
        self.discover(now);
        let peer_grace_ms = self.peer_grace_ms;
        for index in 0..self.channels.len() {
            let channel = &mut self.channels[index];
            if let Some(at) = channel.rejoin_at
                && at <= now
            {
                channel.rejoin_at = None;
                // Fails only when the session has ended, which `Disconnected` reports.
                let _ = self.session.join(&channel.name);
            }
            if let Some(gone) = channel.peer_gone.take_if(|g| g.deadline <= now) {
                let message = format!(
                    "{} and was not back within {}",
                    gone.how,
                    format_duration(peer_grace_ms)
                );
                channel.endpoint.fail_requests(&mut |started| {
                    started.then(|| Failure::PeerLeft {
                        message: message.clone(),
                    })
                });
            }
        }
        let session_deadline = match self.session.poll_output(now) {
            // Also after the end: the `QUIT` goes to a socket that may still be open.
            SessionOutput::Transmit(line) => {
                return (None, ConnectionOutput::Transmit(with_crlf(line)));
            }
            SessionOutput::Event(event) => {
                self.on_session_event(now, &event);
                self.update_state();
                let channel = match &event {
                    SessionEvent::Joined { channel }
                    | SessionEvent::Parted { channel }
                    | SessionEvent::Kicked { channel, .. }
                    | SessionEvent::JoinFailed { channel, .. } => {
                        self.channel(channel).map(|c| c.name.clone())
                    }
                    _ => None,
                };
                return (
                    channel,
                    ConnectionOutput::Event(ConnectionEvent::Irc(event)),
                );
            }
            SessionOutput::Timeout(deadline) => deadline,
        };
        self.update_state();
        if let Some((channel, event)) = self.events.pop_front() {
            return (Some(channel), ConnectionOutput::Event(event));
        }
        match self.poll_endpoints(now) {
            Polled::Transmit(line) => (None, ConnectionOutput::Transmit(with_crlf(line))),
            Polled::Event(channel, event) => (
                Some(channel),
                ConnectionOutput::Event(ConnectionEvent::Oa1(event)),
            ),
            Polled::Idle(deadline) => {
                let mut deadline = deadline.min(session_deadline);
                if let Some(at) = self.discovery.as_ref().and_then(Discovery::deadline) {
                    deadline = deadline.min(at);
                }
                for channel in &self.channels {
                    let due = [
                        channel.rejoin_at,
                        channel.peer_gone.as_ref().map(|g| g.deadline),
                    ];
                    for at in due.into_iter().flatten() {
                        deadline = deadline.min(at);
                    }
                }
                (None, ConnectionOutput::Timeout(deadline.max(now)))
            }
        }
    }

    /// Device-code binding: `LIST` when due, and joins what the listings found.
    fn discover(&mut self, now: u64) {
        let Some(discovery) = &mut self.discovery else {
            return;
        };
        if !self.session.is_registered() {
            return;
        }
        if discovery.deadline().is_none() {
            discovery.start(now);
        }
        if discovery.take_due(now) {
            // Fails only when the session has ended, which `Disconnected` reports.
            let _ = self.session.list();
        }
        while let Some(channel) = self.discovery.as_mut().and_then(Discovery::pop_found) {
            if self.find(&channel).is_some() {
                continue;
            }
            let mut oa1 = self.template.clone();
            oa1.channel = channel.clone();
            // A listed name the session refuses (over CHANNELLEN, say) is not joined.
            if self.add_channel(oa1).is_ok()
                && let Some(discovery) = &mut self.discovery
            {
                discovery.push_event(DiscoveryEvent::Found { channel });
            }
        }
    }

    fn poll_output(&mut self, now: u64) -> ConnectionOutput {
        self.poll(now).1
    }

    pub(super) fn check_open(&self) -> Result<(), LocalError> {
        match self.closed {
            true => Err(LocalError::Closed),
            false => Ok(()),
        }
    }

    /// The session's counters, and the first channel's OA1 counters (a [`Desk`]'s or a
    /// [`Remote`]'s only one).
    pub(super) fn stats(&self) -> ConnectionStats {
        ConnectionStats {
            irc: self.session.stats(),
            oa1: self
                .channels
                .first()
                .map(|c| c.endpoint.stats())
                .unwrap_or_default(),
        }
    }

    /// The pacing in force: the connection's for many channels, else the channel's own.
    pub(super) fn pacing(&self) -> Pacing {
        match (&self.shared, self.channels.first()) {
            (Some(bucket), _) => bucket.pacing(),
            (None, Some(channel)) => channel.endpoint.pacing(),
            (None, None) => self.template.pacing,
        }
    }
}

macro_rules! connection_common {
    () => {
        /// Feeds bytes read from the socket; whole lines are handled at once, a partial line
        /// waits for the rest, over-long lines are dropped (counted) with bounded memory.
        pub fn handle_bytes(&mut self, now: u64, bytes: &[u8]) {
            self.0.handle_bytes(now, bytes)
        }

        /// The socket closed or failed: the connection ends
        /// ([`DisconnectReason::ConnectionLost`](crate::irc::DisconnectReason::ConnectionLost)).
        pub fn handle_eof(&mut self, now: u64) {
            self.0.handle_eof(now)
        }

        /// Runs what is due by `now` (keepalive, timeouts, rejoin). [`Self::poll_output`] does
        /// this too, so calling it is optional.
        pub fn handle_timeout(&mut self, now: u64) {
            self.0.handle_timeout(now)
        }

        /// Sends `QUIT :reason` and ends the connection.
        pub fn quit(&mut self, now: u64, reason: &str) {
            self.0.quit(now, reason)
        }

        /// The next thing to do: bytes to write, an event, or the deadline to wait for. Call it
        /// after every input and command until it answers [`ConnectionOutput::Timeout`].
        pub fn poll_output(&mut self, now: u64) -> ConnectionOutput {
            self.0.poll_output(now)
        }

        /// Where the connection stands.
        pub fn state(&self) -> ConnectionState {
            self.0.single().state
        }

        /// The IRC session (our nick, learned prefix, channels).
        pub fn session(&self) -> &Session {
            &self.0.session
        }

        /// The counters of both layers.
        pub fn stats(&self) -> ConnectionStats {
            self.0.stats()
        }

        /// How outgoing lines are paced now: the configured pacing, or once in the channel of
        /// a server whose limits were measured, its own ([`Config::server_pacing`]).
        pub fn pacing(&self) -> Pacing {
            self.0.pacing()
        }
    };
}

/// The desk end of OA1 over one IRC connection. See the [module docs](self) for the host loop.
#[derive(Debug)]
pub struct Desk(Connection<Client>);

impl Desk {
    /// Starts a connection at `now` (`NICK`/`USER` are the first output), or says why
    /// `config` cannot work (see [`ConnectionConfig::validate`]; a desk must name its remote).
    ///
    /// `seed` fixes the sequence of request ids: take it from the OS's entropy
    /// (`getrandom::u64()`), so that two desks on one channel never pick the same ids. A fixed
    /// seed is for tests only.
    pub fn new(config: ConnectionConfig, now: u64, seed: u64) -> Result<Self, ConfigError> {
        Connection::new(config, now, true, false, seed, Client::new).map(Desk)
    }

    connection_common!();

    /// Sends `payload` as a new request (queued until the channel is joined). `timeout_ms`
    /// overrides the configured request timeout and runs from now. Returns the request id.
    pub fn request(
        &mut self,
        now: u64,
        payload: &str,
        timeout_ms: Option<u64>,
    ) -> Result<String, LocalError> {
        self.0.check_open()?;
        self.0
            .single_mut()
            .endpoint
            .request(now, payload, timeout_ms)
    }

    /// Runs `command` on the remote through `RemoteBash`. `timeout` overrides the request
    /// timeout and, like it, starts when the lines may leave; zero is refused. Returns the
    /// request id; its `Response` or `Failed` event, read with
    /// [`remote_bash::Outcome::from_event`](super::remote_bash::Outcome::from_event), ends the
    /// call.
    pub fn remote_bash(
        &mut self,
        now: u64,
        command: &str,
        timeout: Option<std::time::Duration>,
    ) -> Result<String, super::remote_bash::ArgsError> {
        super::Requester::remote_bash(self, now, command, timeout)
    }

    /// Cancels a request: no event comes for it, and the remote is sent a `CANCEL`.
    pub fn cancel(&mut self, now: u64, id: &str, reason: &str) -> Result<(), LocalError> {
        self.0.single_mut().endpoint.cancel(now, id, reason)
    }

    /// The `RemoteBash` description for this link
    /// ([`remote_bash::description`](super::remote_bash::description)): the output budget it
    /// states follows the pacing in force, which is the server's own once in the channel.
    pub fn tool_description(&self) -> String {
        super::remote_bash::description(self.0.single().endpoint.config(), self.pacing())
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.0.single().endpoint.in_flight()
    }

    /// What requests wait for before they can leave, in words, e.g. ``remote `rexd` in #desk;
    /// members: deskbot`` or `joining #desk (refused: 474 Cannot join channel (+b))`; `None`
    /// when ready or closed. A host that gives up waiting says this.
    pub fn waiting_for(&self) -> Option<String> {
        self.0.waiting_for(self.0.single())
    }

    /// The other members of the channel, as the server wrote their nicks (at most 1024 are
    /// kept).
    pub fn members(&self) -> Vec<String> {
        self.0.single().members.names.values().cloned().collect()
    }

    /// The OA1 endpoint.
    pub fn client(&self) -> &Client {
        &self.0.single().endpoint
    }
}

/// The remote end of OA1 over one IRC connection. See the [module docs](self) for the host loop.
#[derive(Debug)]
pub struct Remote(Connection<Server>);

impl Remote {
    /// Starts a connection at `now` (`NICK`/`USER` are the first output), or says why
    /// `config` cannot work (see [`ConnectionConfig::validate`]).
    ///
    /// Its `allowed_sender` filters by nick, or by `nick!user@host`: neither proves who sent a
    /// frame. Whoever takes the desk's nick once it is free (or, on a network that does not
    /// verify users, copies its user name from the same host) is served. Use a shared secret
    /// ([`super::auth`]) when the commands matter; [`Server::source`] says who asked.
    pub fn new(config: ConnectionConfig, now: u64) -> Result<Self, ConfigError> {
        Connection::new(config, now, false, false, 0, |oa1, _| Server::new(oa1)).map(Remote)
    }

    connection_common!();

    /// Streams more output of request `id`.
    pub fn send(&mut self, now: u64, id: &str, output: &str) -> Result<(), LocalError> {
        self.0.single_mut().endpoint.send(now, id, output)
    }

    /// Ends the response of request `id` once its output has gone out.
    pub fn finish(&mut self, now: u64, id: &str) -> Result<(), LocalError> {
        self.0.single_mut().endpoint.finish(now, id)
    }

    /// Sends the whole response `text` of request `id` and ends it.
    pub fn respond(&mut self, now: u64, id: &str, text: &str) -> Result<(), LocalError> {
        self.0.single_mut().endpoint.respond(now, id, text)
    }

    /// Answers request `id` with `ERR code: message`.
    pub fn fail(
        &mut self,
        now: u64,
        id: &str,
        code: &str,
        message: &str,
    ) -> Result<(), LocalError> {
        self.0.single_mut().endpoint.fail(now, id, code, message)
    }

    /// Requests handed out and not yet answered.
    pub fn active(&self) -> usize {
        self.0.single().endpoint.active()
    }

    /// The OA1 endpoint.
    pub fn server(&self) -> &Server {
        &self.0.single().endpoint
    }
}
