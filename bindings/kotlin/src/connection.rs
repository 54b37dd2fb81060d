//! The OA1 per-connection engines, [`Desk`] and [`Remote`]: an IRC session and an OA1 endpoint
//! in one, over the raw bytes of one IRC socket. The host loop has four steps: bytes read →
//! `handle_bytes` (or `handle_eof`); drain `poll_output`, writing every `Transmit` and
//! delivering every `Event`; sleep until the `Timeout` deadline or the next read; repeat.

use std::sync::{Arc, Mutex};

use deskwire::oa1::{self, ConnectionEngine};

use crate::error::{DeskwireError, Result, api};
use crate::irc::{IrcSessionConfig, IrcSessionStats};
use crate::oa1::{Oa1Config, Oa1Stats};
use crate::{endpoint, lock, long, long_size, ms, non_negative};

/// How to connect: the IRC login and the OA1 endpoint.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ConnectionConfig {
    /// Registration and keepalive (its nick is ours).
    pub session: IrcSessionConfig,
    /// The OA1 endpoint (its channel is joined).
    pub oa1: Oa1Config,
    /// How long to wait before joining again after a kick, a part or a refused join.
    pub rejoin_delay_ms: i64,
    /// Desk: how long the remote may be gone, with requests in flight, before they fail
    /// `PeerLeft` (a quick part and join, or a netsplit healing, loses nothing).
    #[uniffi(default = 2000)]
    pub peer_grace_ms: i64,
}

/// The spec's defaults for `nick` on `channel`, taking frames only from `peer`
/// (`oa1.allowedSender`). A desk needs its remote there: `rexd` (what `rexd --irc` joins as),
/// a `nick!user@host` mask such as `rexd!~rexd@10.0.0.7`, or `"*"` for anyone in the
/// channel; a desk without one is refused when it is built, since it would send into a
/// channel where nobody may hear it. A remote's `peer` is the desk it answers (`null`:
/// anyone).
#[uniffi::export(default(peer = None))]
pub fn connection_config(nick: String, channel: String, peer: Option<String>) -> ConnectionConfig {
    let config = oa1::ConnectionConfig::new(&nick, &channel);
    match peer {
        Some(peer) => config.with_peer(&peer),
        None => config,
    }
    .into()
}

/// A connection configuration from JSON: `{"nick", "channel", "session": {..}, "oa1": {..},
/// "rejoin_delay_ms", "peer_grace_ms"}` with only the values that differ from the defaults (a
/// desk's remote is `oa1.allowed_sender`).
#[uniffi::export]
pub fn connection_config_from_json(json: String) -> Result<ConnectionConfig> {
    api(|| oa1::ConnectionConfig::from_json(&json)).map(Into::into)
}

/// What a connection engine wants next.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum ConnectionOutput {
    /// Write these bytes to the socket (one line, CRLF included).
    Transmit {
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Tell the app.
    Event {
        /// The event.
        event: oa1::ConnectionEvent,
    },
    /// Nothing to do before this instant unless bytes arrive.
    Timeout {
        /// The deadline (ms).
        deadline_ms: i64,
    },
}

/// What a connection engine wants done, all at once ([`Desk::drain`], [`Remote::drain`]).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ConnectionDrain {
    /// The lines to write to the socket, one after the other, CRLF included (empty when
    /// there are none).
    pub bytes: Vec<u8>,
    /// The events, in the order they came.
    pub events: Vec<oa1::ConnectionEvent>,
    /// Nothing to do before this instant (ms) unless bytes arrive.
    pub deadline_ms: i64,
}

/// Polls `engine` until it answers `Timeout`: what [`Desk::drain`] and [`Remote::drain`] give.
pub(crate) fn drain(engine: &mut impl ConnectionEngine, now: u64) -> ConnectionDrain {
    let mut bytes = Vec::new();
    let mut events = Vec::new();
    loop {
        match engine.poll_output(now) {
            oa1::ConnectionOutput::Transmit(line) => bytes.extend_from_slice(&line),
            oa1::ConnectionOutput::Event(event) => events.push(event),
            oa1::ConnectionOutput::Timeout(deadline) => {
                return ConnectionDrain {
                    bytes,
                    events,
                    deadline_ms: long(deadline),
                };
            }
        }
    }
}

/// The counters of both layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct ConnectionStats {
    /// The IRC session's.
    pub irc: IrcSessionStats,
    /// The OA1 endpoint's.
    pub oa1: Oa1Stats,
}

/// The desk's end of one IRC connection: requests out (queued until the channel is joined and
/// the peer is there), responses in.
#[derive(uniffi::Object)]
pub struct Desk {
    inner: Mutex<oa1::Desk>,
}

#[uniffi::export]
impl Desk {
    /// A desk that registers at once. Its `oa1.allowedSender` (the remote: `rexd`, a
    /// `nick!user@host` mask, or `*` for anyone) is required; a bad nick or channel throws
    /// `InvalidInput`. `seed` fixes its request ids: take it from `SecureRandom`, never a clock
    /// (a fixed seed is for tests: two desks with one seed pick the same ids and can take each
    /// other's answers).
    #[uniffi::constructor]
    pub fn new(config: ConnectionConfig, now_ms: i64, seed: i64) -> Result<Arc<Self>> {
        let config = config.try_into()?;
        let now = ms(now_ms)?;
        let desk = api(|| oa1::Desk::new(config, now, seed as u64))?;
        Ok(Arc::new(Desk {
            inner: Mutex::new(desk),
        }))
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> i64 {
        long_size(lock(&self.inner).in_flight())
    }

    /// What requests wait for before they can leave, in words, e.g. ``remote `rexd` in #desk;
    /// members: deskbot`` or `joining #desk (refused: 474 Cannot join channel (+b))`; `null`
    /// when ready or closed. A host that gives up waiting says this.
    pub fn waiting_for(&self) -> Option<String> {
        lock(&self.inner).waiting_for()
    }

    /// The other members of the channel, as the server wrote their nicks (at most 1024 are
    /// kept).
    pub fn members(&self) -> Vec<String> {
        lock(&self.inner).members()
    }
}

endpoint::connection_methods!(Desk);
endpoint::requester_methods!(Desk);

/// The remote's end of one IRC connection: requests in, streamed answers out.
#[derive(uniffi::Object)]
pub struct Remote {
    inner: Mutex<oa1::Remote>,
}

#[uniffi::export]
impl Remote {
    /// A remote that registers at once; a bad nick or channel throws `InvalidInput`.
    ///
    /// `oa1.allowedSender` filters by nick or `nick!user@host`; neither proves who asks (anyone
    /// may take the desk's nick once it quits). Use `oa1.auth` when the commands matter.
    #[uniffi::constructor]
    pub fn new(config: ConnectionConfig, now_ms: i64) -> Result<Arc<Self>> {
        let config = config.try_into()?;
        let now = ms(now_ms)?;
        let remote = api(|| oa1::Remote::new(config, now))?;
        Ok(Arc::new(Remote {
            inner: Mutex::new(remote),
        }))
    }

    /// Requests being answered.
    pub fn active(&self) -> i64 {
        long_size(lock(&self.inner).active())
    }
}

endpoint::connection_methods!(Remote);
endpoint::responder_methods!(Remote);

// ---------------------------------------------------------------------------------------------
// Conversions

impl From<oa1::ConnectionConfig> for ConnectionConfig {
    fn from(c: oa1::ConnectionConfig) -> Self {
        ConnectionConfig {
            session: c.session.into(),
            oa1: c.oa1.into(),
            rejoin_delay_ms: long(c.rejoin_delay_ms),
            peer_grace_ms: long(c.peer_grace_ms),
        }
    }
}

impl TryFrom<ConnectionConfig> for oa1::ConnectionConfig {
    type Error = DeskwireError;

    fn try_from(c: ConnectionConfig) -> Result<Self> {
        Ok(oa1::ConnectionConfig {
            session: c.session.try_into()?,
            oa1: c.oa1.try_into()?,
            rejoin_delay_ms: non_negative("rejoinDelayMs", c.rejoin_delay_ms)?,
            peer_grace_ms: non_negative("peerGraceMs", c.peer_grace_ms)?,
        })
    }
}

impl From<oa1::ConnectionOutput> for ConnectionOutput {
    fn from(o: oa1::ConnectionOutput) -> Self {
        match o {
            oa1::ConnectionOutput::Transmit(bytes) => ConnectionOutput::Transmit { bytes },
            oa1::ConnectionOutput::Event(event) => ConnectionOutput::Event { event },
            oa1::ConnectionOutput::Timeout(deadline_ms) => ConnectionOutput::Timeout {
                deadline_ms: long(deadline_ms),
            },
        }
    }
}

impl From<oa1::ConnectionStats> for ConnectionStats {
    fn from(s: oa1::ConnectionStats) -> Self {
        ConnectionStats {
            irc: s.irc.into(),
            oa1: s.oa1.into(),
        }
    }
}
