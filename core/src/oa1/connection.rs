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
//! Requests made before the channel is joined wait inside and leave in the same drain that
//! reports the join; nothing depends on the host polling again at a particular moment. A desk
//! with an `allowed_sender` also waits for that nick to be in the channel (from the `NAMES` reply
//! and its `JOIN`), since IRC keeps no history: a request sent before the remote joined would
//! reach nobody. After a
//! kick or part the engine joins again after [`ConnectionConfig::rejoin_delay_ms`], holding lines
//! meanwhile. When the connection ends ([`SessionEvent::Disconnected`], or `handle_eof`), the
//! desk's requests in flight fail with [`Failure::Disconnected`](super::Failure::Disconnected) and the remote's requests end
//! with [`Event::Cancelled`]; a new connection needs a new engine.
//!
//! The whole host loop over a blocking TCP socket with a read timeout, in 29 lines (every
//! binding's loop has these four steps):
//!
//! ```no_run
//! use std::{io::{ErrorKind, Read, Write}, net::TcpStream, time::{Duration, Instant}};
//! use deskwire::oa1::{ConnectionConfig, ConnectionEvent, ConnectionOutput, Desk};
//! let clock = Instant::now();
//! let now = || clock.elapsed().as_millis() as u64;
//! let mut socket = TcpStream::connect("127.0.0.1:6667")?;
//! let mut desk = Desk::new(ConnectionConfig::new("desk", "#desk"), now(), 42);
//! desk.request(now(), "uname -a", None)?; // waits inside until the channel is joined
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

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::{Client, Config, Event, LocalError, Output, Server, Stats};
use crate::irc::{
    DecodedLine, LineDecoder, Session, SessionConfig, SessionEvent, SessionOutput, SessionStats,
};

/// How to connect: the IRC login and the OA1 endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionConfig {
    /// Registration and keepalive. Its `nick` is ours (the OA1 endpoint's `nick` is set from
    /// it); the OA1 channel is joined in addition to its `channels`.
    pub session: SessionConfig,
    /// The OA1 endpoint: channel, allowed sender, limits, pacing.
    pub oa1: Config,
    /// How long to wait before joining the channel again after a kick or part.
    #[serde(default = "default_rejoin_delay_ms")]
    pub rejoin_delay_ms: u64,
}

fn default_rejoin_delay_ms() -> u64 {
    5_000
}

impl ConnectionConfig {
    /// The spec's defaults for `nick` on `channel`.
    pub fn new(nick: &str, channel: &str) -> Self {
        ConnectionConfig {
            session: SessionConfig::new(nick, &[channel]),
            oa1: Config::new(channel, nick),
            rejoin_delay_ms: default_rejoin_delay_ms(),
        }
    }

    /// The configuration from JSON in the shape of `tests/vectors/oa1.json`:
    /// `{"nick": "desk", "channel": "#desk", "session": {...}, "oa1": {...}, "rejoin_delay_ms": N}`
    /// where `session` and `oa1` hold only the values that differ from [`ConnectionConfig::new`].
    /// Unknown keys are refused.
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
        }
        let partial: Partial = serde_json::from_str(json)?;
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
        let oa1 = merge(serde_json::to_value(&defaults.oa1)?, partial.oa1);
        Ok(ConnectionConfig {
            session: serde_json::from_value(session)?,
            oa1: serde_json::from_value(oa1)?,
            rejoin_delay_ms: partial.rejoin_delay_ms,
        })
    }
}

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConnectionState {
    /// Registering with the server (`NICK`/`USER` sent, no `001` yet).
    Registering,
    /// Registered, not (or no longer) in the OA1 channel: lines are held.
    Joining,
    /// Desk only, with an `allowed_sender`: in the channel, waiting for that nick to be there
    /// too (a request sent before would reach nobody). Lines are held.
    WaitingForPeer,
    /// In the channel (with the peer, when one is configured): frames flow.
    Ready,
    /// The connection ended; the engine takes no more requests.
    Closed,
}

/// What happened to the connection itself. As JSON: `{"state_changed": {"state": "ready"}}`,
/// `{"peer_joined": {"nick": ...}}`, `{"peer_left": {"nick": ...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LinkEvent {
    /// [`ConnectionState`] changed.
    StateChanged {
        /// The new state.
        state: ConnectionState,
    },
    /// The configured peer (`allowed_sender`) is in the channel.
    PeerJoined {
        /// Its nick.
        nick: String,
    },
    /// The configured peer left the channel (part, quit, kick or nick change).
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
pub enum ConnectionEvent {
    /// Registration, joins, nick and prefix changes, kicks, server errors, the end of the link.
    Irc(SessionEvent),
    /// A response, a failure, a request or a cancellation.
    Oa1(Event),
    /// The connection's state, and the peer's presence.
    Link(LinkEvent),
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
trait Endpoint {
    fn handle_line(&mut self, now: u64, line: &[u8]);
    fn last_was_relayed(&self) -> bool;
    fn poll_output(&mut self, now: u64) -> Output;
    fn set_held(&mut self, held: bool);
    fn disconnect(&mut self, now: u64);
    fn stats(&self) -> Stats;
}

macro_rules! endpoint {
    ($($t:ty),*) => {$(
        impl Endpoint for $t {
            fn handle_line(&mut self, now: u64, line: &[u8]) {
                <$t>::handle_line(self, now, line)
            }
            fn last_was_relayed(&self) -> bool {
                <$t>::last_was_relayed(self)
            }
            fn poll_output(&mut self, now: u64) -> Output {
                <$t>::poll_output(self, now)
            }
            fn set_held(&mut self, held: bool) {
                <$t>::set_held(self, held)
            }
            fn disconnect(&mut self, now: u64) {
                <$t>::disconnect(self, now)
            }
            fn stats(&self) -> Stats {
                <$t>::stats(self)
            }
        }
    )*};
}

endpoint!(Client, Server);

/// The session, the endpoint and the state between them.
#[derive(Debug)]
struct Connection<E> {
    session: Session,
    endpoint: E,
    decoder: LineDecoder,
    channel: String,
    /// The nick whose presence the desk waits for (its `allowed_sender`); none for the remote.
    peer: Option<String>,
    peer_present: bool,
    in_channel: bool,
    closed: bool,
    state: ConnectionState,
    /// Link events not handed out yet (a few at most: they come from state transitions).
    link_events: VecDeque<LinkEvent>,
    rejoin_delay_ms: u64,
    rejoin_at: Option<u64>,
}

fn with_crlf(line: String) -> Vec<u8> {
    let mut bytes = line.into_bytes();
    bytes.extend_from_slice(b"\r\n");
    bytes
}

/// A nick in a `353` (`NAMES`) reply without its channel-status prefix (`@`, `+`, ...).
fn strip_status(nick: &str) -> &str {
    nick.trim_start_matches(['@', '+', '%', '&', '~', '!'])
}

impl<E: Endpoint> Connection<E> {
    fn new(
        mut config: ConnectionConfig,
        now: u64,
        waits_for_peer: bool,
        make: impl FnOnce(Config) -> E,
    ) -> Self {
        let channel = config.oa1.channel.clone();
        let casemap = crate::irc::CaseMapping::default();
        if !config
            .session
            .channels
            .iter()
            .any(|c| casemap.eq(c, &channel))
        {
            config.session.channels.push(channel.clone());
        }
        config.oa1.nick = config.session.nick.clone();
        let peer = config.oa1.allowed_sender.clone().filter(|_| waits_for_peer);
        let decoder = LineDecoder::new(config.session.max_line_bytes);
        let mut endpoint = make(config.oa1);
        endpoint.set_held(true);
        Connection {
            session: Session::new(config.session, now),
            endpoint,
            decoder,
            channel,
            peer,
            peer_present: false,
            in_channel: false,
            closed: false,
            state: ConnectionState::Registering,
            link_events: VecDeque::new(),
            rejoin_delay_ms: config.rejoin_delay_ms,
            rejoin_at: None,
        }
    }

    fn handle_bytes(&mut self, now: u64, bytes: &[u8]) {
        self.decoder.feed(bytes);
        while let Some(decoded) = self.decoder.next_line() {
            match decoded {
                DecodedLine::Line(line) => {
                    self.endpoint.handle_line(now, line);
                    if self.endpoint.last_was_relayed() {
                        self.session.handle_relayed(now);
                    } else {
                        self.session.handle_line(now, line);
                        if self.peer.is_some() {
                            Self::track_peer(
                                &self.session,
                                self.peer.as_deref().unwrap_or_default(),
                                &self.channel,
                                &mut self.peer_present,
                                &mut self.link_events,
                                line,
                            );
                        }
                    }
                }
                DecodedLine::TooLong { .. } => self.session.note_too_long(now),
            }
        }
    }

    /// Follows whether `peer` is in our channel: `NAMES` replies, and its `JOIN`, `PART`,
    /// `KICK`, `QUIT` and `NICK`. One flag, whatever the size of the channel.
    fn track_peer(
        session: &Session,
        peer: &str,
        channel: &str,
        present: &mut bool,
        events: &mut VecDeque<LinkEvent>,
        line: &[u8],
    ) {
        let Ok(msg) = crate::irc::Message::parse(line) else {
            return;
        };
        let casemap = session.identity().casemapping();
        let is_peer = |nick: &str| casemap.eq(nick, peer);
        let in_our_channel = |name: Option<&str>| name.is_some_and(|c| casemap.eq(c, channel));
        let from_peer = msg.source_nick().is_some_and(is_peer);
        let now_present = if msg.command == "353" {
            // 353 <me> <type> <channel> :<nicks>
            match msg.params() {
                [_, _, chan, names] if in_our_channel(Some(chan)) => {
                    *present || names.split(' ').any(|n| is_peer(strip_status(n)))
                }
                _ => *present,
            }
        } else if msg.is("JOIN") && from_peer && in_our_channel(msg.param(0)) {
            true
        } else if (msg.is("PART") && from_peer && in_our_channel(msg.param(0)))
            || (msg.is("QUIT") && from_peer)
            || (msg.is("KICK") && in_our_channel(msg.param(0)) && msg.param(1).is_some_and(is_peer))
        {
            false
        } else if msg.is("NICK") {
            match (from_peer, msg.param(0).is_some_and(is_peer)) {
                (true, false) => false,
                (false, true) => true,
                _ => *present,
            }
        } else {
            *present
        };
        if now_present != *present {
            *present = now_present;
            let nick = peer.to_owned();
            events.push_back(match now_present {
                true => LinkEvent::PeerJoined { nick },
                false => LinkEvent::PeerLeft { nick },
            });
        }
    }

    fn handle_eof(&mut self, now: u64) {
        self.session.handle_eof(now);
    }

    fn handle_timeout(&mut self, now: u64) {
        self.session.handle_timeout(now);
    }

    fn quit(&mut self, now: u64, reason: &str) {
        self.session.quit(reason);
        self.handle_timeout(now);
    }

    fn is_our_channel(&self, channel: &str) -> bool {
        self.session
            .identity()
            .casemapping()
            .eq(channel, &self.channel)
    }

    /// Takes note of a session event before the host sees it.
    fn on_session_event(&mut self, now: u64, event: &SessionEvent) {
        match event {
            SessionEvent::Joined { channel } if self.is_our_channel(channel) => {
                self.in_channel = true;
                self.rejoin_at = None;
            }
            SessionEvent::Kicked { channel, .. } | SessionEvent::Parted { channel }
                if self.is_our_channel(channel) =>
            {
                self.in_channel = false;
                self.peer_present = false;
                self.rejoin_at = Some(now.saturating_add(self.rejoin_delay_ms));
            }
            SessionEvent::Disconnected { .. } => {
                self.closed = true;
                self.in_channel = false;
                self.rejoin_at = None;
                self.endpoint.set_held(true);
                self.endpoint.disconnect(now);
            }
            _ => {}
        }
    }

    /// The state the flags say; a change holds or releases the endpoint's lines and is
    /// reported.
    fn update_state(&mut self) {
        let state = if self.closed {
            ConnectionState::Closed
        } else if !self.session.is_registered() {
            ConnectionState::Registering
        } else if !self.in_channel {
            ConnectionState::Joining
        } else if self.peer.is_some() && !self.peer_present {
            ConnectionState::WaitingForPeer
        } else {
            ConnectionState::Ready
        };
        if state != self.state {
            self.state = state;
            self.endpoint.set_held(state != ConnectionState::Ready);
            self.link_events
                .push_back(LinkEvent::StateChanged { state });
        }
    }

    fn poll_output(&mut self, now: u64) -> ConnectionOutput {
        self.session.handle_timeout(now);
        if let Some(at) = self.rejoin_at
            && at <= now
        {
            self.rejoin_at = None;
            // Fails only when the session has ended, which `Disconnected` reports.
            let _ = self.session.join(&self.channel);
        }
        let session_deadline = match self.session.poll_output(now) {
            // Also after the end: the `QUIT` goes to a socket that may still be open.
            SessionOutput::Transmit(line) => return ConnectionOutput::Transmit(with_crlf(line)),
            SessionOutput::Event(event) => {
                self.on_session_event(now, &event);
                self.update_state();
                return ConnectionOutput::Event(ConnectionEvent::Irc(event));
            }
            SessionOutput::Timeout(deadline) => deadline,
        };
        self.update_state();
        if let Some(event) = self.link_events.pop_front() {
            return ConnectionOutput::Event(ConnectionEvent::Link(event));
        }
        match self.endpoint.poll_output(now) {
            Output::Transmit(line) => ConnectionOutput::Transmit(with_crlf(line)),
            Output::Event(event) => ConnectionOutput::Event(ConnectionEvent::Oa1(event)),
            Output::Timeout(deadline) => {
                let mut deadline = deadline.min(session_deadline);
                if let Some(at) = self.rejoin_at {
                    deadline = deadline.min(at);
                }
                ConnectionOutput::Timeout(deadline.max(now))
            }
        }
    }

    fn check_open(&self) -> Result<(), LocalError> {
        match self.closed {
            true => Err(LocalError::Closed),
            false => Ok(()),
        }
    }

    fn stats(&self) -> ConnectionStats {
        ConnectionStats {
            irc: self.session.stats(),
            oa1: self.endpoint.stats(),
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
            self.0.state
        }

        /// The IRC session (our nick, learned prefix, channels).
        pub fn session(&self) -> &Session {
            &self.0.session
        }

        /// The counters of both layers.
        pub fn stats(&self) -> ConnectionStats {
            self.0.stats()
        }
    };
}

/// The desk end of OA1 over one IRC connection. See the [module docs](self) for the host loop.
#[derive(Debug)]
pub struct Desk(Connection<Client>);

impl Desk {
    /// Starts a connection at `now` (`NICK`/`USER` are the first output); `seed` fixes the
    /// sequence of request ids.
    pub fn new(config: ConnectionConfig, now: u64, seed: u64) -> Self {
        Desk(Connection::new(config, now, true, |oa1| {
            Client::new(oa1, seed)
        }))
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
        self.0.endpoint.request(now, payload, timeout_ms)
    }

    /// Cancels a request: no event comes for it, and the remote is sent a `CANCEL`.
    pub fn cancel(&mut self, now: u64, id: &str, reason: &str) -> Result<(), LocalError> {
        self.0.endpoint.cancel(now, id, reason)
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.0.endpoint.in_flight()
    }

    /// The OA1 endpoint.
    pub fn client(&self) -> &Client {
        &self.0.endpoint
    }
}

/// The remote end of OA1 over one IRC connection. See the [module docs](self) for the host loop.
#[derive(Debug)]
pub struct Remote(Connection<Server>);

impl Remote {
    /// Starts a connection at `now` (`NICK`/`USER` are the first output).
    pub fn new(config: ConnectionConfig, now: u64) -> Self {
        Remote(Connection::new(config, now, false, Server::new))
    }

    connection_common!();

    /// Streams more output of request `id`.
    pub fn send(&mut self, now: u64, id: &str, output: &str) -> Result<(), LocalError> {
        self.0.endpoint.send(now, id, output)
    }

    /// Ends the response of request `id` once its output has gone out.
    pub fn finish(&mut self, now: u64, id: &str) -> Result<(), LocalError> {
        self.0.endpoint.finish(now, id)
    }

    /// Sends the whole response `text` of request `id` and ends it.
    pub fn respond(&mut self, now: u64, id: &str, text: &str) -> Result<(), LocalError> {
        self.0.endpoint.respond(now, id, text)
    }

    /// Answers request `id` with `ERR code: message`.
    pub fn fail(
        &mut self,
        now: u64,
        id: &str,
        code: &str,
        message: &str,
    ) -> Result<(), LocalError> {
        self.0.endpoint.fail(now, id, code, message)
    }

    /// Requests handed out and not yet answered.
    pub fn active(&self) -> usize {
        self.0.endpoint.active()
    }

    /// The OA1 endpoint.
    pub fn server(&self) -> &Server {
        &self.0.endpoint
    }
}
