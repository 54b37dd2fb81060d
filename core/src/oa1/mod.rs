//! OA1: request/response RPC in IRC `PRIVMSG` lines (the wire format, deskwire's extensions and
//! the desk's safety rules: `docs/oa1.md`).
//!
//! Two sans-IO endpoints share one channel:
//! - [`Client`], the desk: sends a request, gets back one [`Event::Response`] or
//!   [`Event::Failed`].
//! - [`Server`], the remote: gets [`Event::Request`], streams the answer back with
//!   [`Server::send`] / [`Server::finish`], or [`Server::fail`]s it.
//!
//! Both take every line the IRC connection receives through `handle_line` (they pick out the
//! frames meant for them and learn our prefix from the rest), and give back lines to write, events
//! and the next deadline through `poll_output`. Lines go out paced by a token bucket.
//!
//! Hosts that read and write an IRC socket themselves use the per-connection engines instead,
//! [`Desk`] and [`Remote`] (module [`connection`]): they own the IRC session too, take raw socket
//! bytes, and hold requests until the channel (and the peer) are there. The host loop is in the
//! [`connection`] docs.
//!
//! Code that wraps all four (a binding, a test harness) does it once, over the traits they share:
//! [`Engine`], with [`LineEndpoint`] for the bare endpoints and [`ConnectionEngine`] for the
//! per-connection engines; [`Requester`] and [`Responder`] add the two roles.
//!
//! Beyond the v40 spec, both are optional and off by default: [`auth`] authenticates every frame
//! with a shared secret (HMAC-SHA256, replay window), and [`compress`] negotiates compressed
//! answers (and requests) per request, which spec-only peers never see.
//!
//! The building blocks are public too: [`escape`], [`frame`], [`chunk`], [`reassembly`] and
//! [`pacing`]; [`remote_bash`] holds the `RemoteBash` tool contract.
//!
//! `tests/vectors/oa1.json` holds the conformance cases every binding runs: escaping, frames,
//! chunking, `ERR` payloads, and scripted client and server exchanges on a virtual clock.

pub mod auth;
pub mod chat;
pub mod chunk;
mod client;
pub mod compress;
pub mod connection;
pub mod device_code;
pub mod discovery;
mod engine;
pub mod escape;
pub mod frame;
mod link;
pub mod multi;
pub mod pacing;
pub mod reassembly;
pub mod remote_bash;
mod roles;
mod server;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use crate::ids::IdGenerator;
pub use auth::AuthConfig;
pub use client::{Client, cut_short_marker, remote_timeout_marker, timeout_marker};
pub use connection::{
    ConfigError, ConnectionConfig, ConnectionEvent, ConnectionOutput, ConnectionState,
    ConnectionStats, Desk, LinkEvent, Remote,
};
pub use device_code::DeviceCode;
pub use discovery::DiscoveryEvent;
pub use engine::{ConnectionEngine, Drained, Engine, LineEndpoint};
pub use frame::{Frame, FrameError, FrameType, UnknownFrameType};
pub use multi::{MultiDesk, MultiOutput, MultiRemote};
pub use pacing::Pacing;
pub use roles::{Requester, Responder};
pub use server::Server;

/// The marker appended to a response cut at the size cap (`docs/oa1.md`, "Streams and
/// reassembly").
pub const TRUNCATION_MARKER: &str = "\n...[truncated]...";

/// How long a drained endpoint with nothing scheduled asks to sleep.
pub const IDLE_WAIT_MS: u64 = 60_000;

/// Endpoint configuration. Every limit has the spec's default.
///
/// As JSON (`tests/vectors/oa1.json`) `channel` and `nick` are required and every other key
/// defaults to [`Config::new`]'s value; unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ConfigJson")]
pub struct Config {
    /// The desk channel (frames elsewhere are ignored; lines go there).
    pub channel: String,
    /// Our nick at registration (later changes are learned from the server's lines).
    pub nick: String,
    /// Accept frames from this sender only: a nick, a `nick!user@host` mask or `*` (what each
    /// protects against: `docs/oa1.md`, "Who may send").
    pub allowed_sender: Option<String>,
    /// Escaped payload bytes per frame at most (spec default 240).
    pub max_frame_payload_bytes: usize,
    /// Use the largest payload that fits the line instead of `max_frame_payload_bytes`.
    pub adaptive_payload: bool,
    /// Decoded bytes of one message at most (spec default 128 KiB).
    pub max_message_bytes: usize,
    /// Streams and requests in flight at most.
    pub max_streams: usize,
    /// Client: how long a request may take once it can leave (spec default 30 s).
    pub request_timeout_ms: u64,
    /// Client: how long a request may wait for its lines to be let go (the connection
    /// registered, in the channel, the remote there) before it fails `not_ready`; its
    /// `request_timeout_ms` starts only then.
    pub ready_timeout_ms: u64,
    /// How long a gap inside a stream may last (spec default 10 s).
    pub partial_timeout_ms: u64,
    /// Outgoing line pacing: for a server whose limits are not known (see `server_pacing`).
    pub pacing: Pacing,
    /// On a connection, once the server has said what it is (`004`): use the pacing measured
    /// for that server ([`Pacing::for_server`]) instead of `pacing`. On by default; giving
    /// `pacing` in JSON turns it off unless this is given too.
    pub server_pacing: bool,
    /// Inbound lines longer than this are ignored (IRC allows 512 plus 8191 of tags).
    pub max_line_bytes: usize,
    /// How many finished request ids are remembered (late frames for them are ignored).
    pub finished_memory: usize,
    /// Server: how long streamed output smaller than a frame may wait for more before it is sent.
    pub flush_delay_ms: u64,
    /// A shared secret: frames are authenticated both ways (see [`auth`]). `None` (the default)
    /// keeps the v40 wire format.
    pub auth: Option<AuthConfig>,
    /// Compressed streams (see [`compress`]): a client offers to take compressed answers (one
    /// `ACCEPT` line per request until the peer is known to compress), a server honours the
    /// offer. Off by default, which keeps the v40 wire format.
    pub compression: bool,
}

impl Config {
    /// Spec defaults for an endpoint on `channel` with nick `nick`.
    pub fn new(channel: &str, nick: &str) -> Self {
        Config {
            channel: channel.to_owned(),
            nick: nick.to_owned(),
            allowed_sender: None,
            max_frame_payload_bytes: 240,
            adaptive_payload: false,
            max_message_bytes: 128 * 1024,
            max_streams: 64,
            request_timeout_ms: 30_000,
            ready_timeout_ms: 30_000,
            partial_timeout_ms: 10_000,
            pacing: DEFAULT_PACING,
            server_pacing: true,
            max_line_bytes: crate::irc::DEFAULT_MAX_LINE_BYTES,
            finished_memory: 1024,
            flush_delay_ms: 20,
            auth: None,
            compression: false,
        }
    }
}

/// [`Config`] as JSON gives it: the defaults fill what is missing.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigJson {
    channel: String,
    nick: String,
    #[serde(default)]
    allowed_sender: Option<String>,
    max_frame_payload_bytes: Option<usize>,
    adaptive_payload: Option<bool>,
    max_message_bytes: Option<usize>,
    max_streams: Option<usize>,
    request_timeout_ms: Option<u64>,
    ready_timeout_ms: Option<u64>,
    partial_timeout_ms: Option<u64>,
    pacing: Option<Pacing>,
    server_pacing: Option<bool>,
    max_line_bytes: Option<usize>,
    finished_memory: Option<usize>,
    flush_delay_ms: Option<u64>,
    #[serde(default)]
    auth: Option<AuthConfig>,
    #[serde(default)]
    compression: bool,
}

impl From<ConfigJson> for Config {
    fn from(json: ConfigJson) -> Self {
        let d = Config::new(&json.channel, &json.nick);
        Config {
            allowed_sender: json.allowed_sender,
            max_frame_payload_bytes: json
                .max_frame_payload_bytes
                .unwrap_or(d.max_frame_payload_bytes),
            adaptive_payload: json.adaptive_payload.unwrap_or(d.adaptive_payload),
            max_message_bytes: json.max_message_bytes.unwrap_or(d.max_message_bytes),
            max_streams: json.max_streams.unwrap_or(d.max_streams),
            request_timeout_ms: json.request_timeout_ms.unwrap_or(d.request_timeout_ms),
            ready_timeout_ms: json.ready_timeout_ms.unwrap_or(d.ready_timeout_ms),
            partial_timeout_ms: json.partial_timeout_ms.unwrap_or(d.partial_timeout_ms),
            // A pacing given means that pacing, unless server pacing is asked for too.
            server_pacing: json.server_pacing.unwrap_or(json.pacing.is_none()),
            pacing: json.pacing.unwrap_or(d.pacing),
            max_line_bytes: json.max_line_bytes.unwrap_or(d.max_line_bytes),
            finished_memory: json.finished_memory.unwrap_or(d.finished_memory),
            flush_delay_ms: json.flush_delay_ms.unwrap_or(d.flush_delay_ms),
            auth: json.auth,
            compression: json.compression,
            ..d
        }
    }
}

/// A reassembled message as text, as the engines make it: moved when it is UTF-8, invalid
/// sequences replaced with U+FFFD otherwise (lines are not checked one by one; see
/// [`Frame::parse_bytes`]).
///
/// Validated with simdutf8: std's check took half of the desk's decode time on mixed UTF-8.
#[allow(unsafe_code)]
pub fn into_text(data: Vec<u8>) -> String {
    if simdutf8::basic::from_utf8(&data).is_ok() {
        // SAFETY: simdutf8 just checked that `data` is valid UTF-8.
        unsafe { String::from_utf8_unchecked(data) }
    } else {
        String::from_utf8_lossy(&data).into_owned()
    }
}

/// `bytes` as text when they are UTF-8, checked with simdutf8 like [`into_text`] (std's check
/// took 55 µs of a 128 KiB request given as bytes from Python); the error is std's, with where
/// the first invalid sequence starts, worked out only when there is one.
pub fn as_text(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(_) => std::str::from_utf8(bytes),
    }
}

/// Pacing defaults, measured against ngircd 26.1 (see `tests/pacing/measure_ngircd.py`).
pub const DEFAULT_PACING: Pacing = Pacing::steady(3, 1000);

/// What an endpoint wants from the host next. As JSON: `{"transmit": line}`,
/// `{"event": {...}}` or `{"timeout": ms}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Output {
    /// Write this IRC line (without CRLF; append `"\r\n"` on a raw socket).
    Transmit(String),
    /// Tell the application.
    Event(Event),
    /// Nothing to do before this instant (ms, the host's clock), unless new input arrives.
    Timeout(u64),
}

/// Something the application should learn.
///
/// As JSON (`tests/vectors/oa1.json`): `{"response": {"id", "text", "truncated"}}`,
/// `{"failed": {"id", "error": code, "message"}}`, `{"request": {"id", "sender", "payload"}}`,
/// `{"cancelled": {"id", "reason"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "Oa1Event"))]
pub enum Event {
    /// Client: the whole response arrived. When `truncated`, `text` ends with
    /// [`TRUNCATION_MARKER`].
    Response {
        /// The request id.
        id: String,
        /// The reassembled, decoded text.
        text: String,
        /// Whether the text is not the whole answer: cut at the size cap (here or by the
        /// remote; it ends with [`TRUNCATION_MARKER`]), or the part that arrived before a
        /// timeout or the end of the remote or the link (it ends with [`timeout_marker`],
        /// [`remote_timeout_marker`] or [`cut_short_marker`]'s line, which
        /// [`remote_bash::ending`] reads).
        truncated: bool,
    },
    /// Client: the request ended without a response.
    Failed {
        /// The request id.
        id: String,
        /// Why.
        failure: Failure,
    },
    /// Server: a whole request arrived. Answer it with `send`/`finish` or `fail`.
    Request {
        /// The request id.
        id: String,
        /// Who sent it.
        sender: String,
        /// The decoded request payload (for `RemoteBash`, the command).
        payload: String,
    },
    /// Server: the client cancelled a request; stop working on it.
    Cancelled {
        /// The request id.
        id: String,
        /// The reason the client gave.
        reason: String,
    },
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStructVariant;
        match self {
            Event::Response {
                id,
                text,
                truncated,
            } => {
                let mut v = serializer.serialize_struct_variant("Event", 0, "response", 3)?;
                v.serialize_field("id", id)?;
                v.serialize_field("text", text)?;
                v.serialize_field("truncated", truncated)?;
                v.end()
            }
            Event::Failed { id, failure } => {
                let mut v = serializer.serialize_struct_variant("Event", 1, "failed", 3)?;
                v.serialize_field("id", id)?;
                v.serialize_field("error", failure.code())?;
                v.serialize_field("message", &failure.message())?;
                v.end()
            }
            Event::Request {
                id,
                sender,
                payload,
            } => {
                let mut v = serializer.serialize_struct_variant("Event", 2, "request", 3)?;
                v.serialize_field("id", id)?;
                v.serialize_field("sender", sender)?;
                v.serialize_field("payload", payload)?;
                v.end()
            }
            Event::Cancelled { id, reason } => {
                let mut v = serializer.serialize_struct_variant("Event", 3, "cancelled", 2)?;
                v.serialize_field("id", id)?;
                v.serialize_field("reason", reason)?;
                v.end()
            }
        }
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "Oa1Failure"))]
pub enum Failure {
    /// The remote answered `ERR code: message`.
    Remote {
        /// The error code (`error` when the remote gave none).
        code: String,
        /// The message.
        message: String,
    },
    /// No complete response within the request timeout (a `CANCEL` was sent). The message
    /// says what this end saw meanwhile: frames it refused (a secret or sender filter that
    /// differs from the remote's), or that nothing came back at all.
    Timeout {
        /// What timed out, and what was seen meanwhile.
        message: String,
    },
    /// A chunk of the response never arrived (the gap outlived the partial timeout).
    Incomplete,
    /// The IRC connection ended before the response arrived.
    Disconnected {
        /// Why, as the server or the host said it (e.g. `nick unavailable`, the `ERROR` text).
        message: String,
    },
    /// The remote's compressed answer could not be restored (not base64 or not deflate).
    Malformed {
        /// What was wrong.
        message: String,
    },
    /// The request never left: the connection was not ready (registered, in the channel, with
    /// the remote there) within `ready_timeout_ms`. The message says what it waited for and what
    /// it saw, e.g. ``not ready after 30 s: waiting for remote `rexd` in #desk; members: deskbot``.
    NotReady {
        /// What the connection waited for.
        message: String,
    },
    /// The server refused to let us into the channel (`474 Cannot join channel (+b)`, ...).
    JoinFailed {
        /// The channel, the numeric and the server's text.
        message: String,
    },
    /// We were kicked from the channel while the request was in flight; its answer is lost.
    Kicked {
        /// The channel, who kicked us and why.
        message: String,
    },
    /// The remote left the channel while the request was in flight and was not back within
    /// `peer_grace_ms`.
    PeerLeft {
        /// Who left and how.
        message: String,
    },
}

/// `code: message` (`timeout: no complete response before ...`), as the bindings write it.
impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

/// So that `outcome.into_result()?` works in a function returning `Box<dyn Error>`.
impl std::error::Error for Failure {}

impl Failure {
    /// The error code for a tool result: the remote's code, or `timeout`, `incomplete`,
    /// `disconnected`, `malformed`, `not_ready`, `join_failed`, `kicked`, `peer_left`.
    pub fn code(&self) -> &str {
        match self {
            Failure::Remote { code, .. } => code,
            Failure::Timeout { .. } => "timeout",
            Failure::Incomplete => "incomplete",
            Failure::Disconnected { .. } => "disconnected",
            Failure::Malformed { .. } => "malformed",
            Failure::NotReady { .. } => "not_ready",
            Failure::JoinFailed { .. } => "join_failed",
            Failure::Kicked { .. } => "kicked",
            Failure::PeerLeft { .. } => "peer_left",
        }
    }

    /// Whether the request ran out of time here: no answer within its timeout (`timeout`), or
    /// it never left within `ready_timeout_ms` (`not_ready`). A remote's own `ERR timeout: ...`
    /// is its answer, not one of these. Bindings raise these as their language's timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Failure::Timeout { .. } | Failure::NotReady { .. })
    }

    /// A human-readable message.
    pub fn message(&self) -> String {
        match self {
            Failure::Remote { message, .. } => message.clone(),
            Failure::Incomplete => "a chunk of the response never arrived".to_owned(),
            Failure::Disconnected { message } => {
                format!("the IRC connection ended before the response: {message}")
            }
            Failure::Timeout { message }
            | Failure::Malformed { message }
            | Failure::NotReady { message }
            | Failure::JoinFailed { message }
            | Failure::Kicked { message }
            | Failure::PeerLeft { message } => message.clone(),
        }
    }

    /// Parses an `ERR` payload `code: message` (`docs/oa1.md`, "Errors"): the code is the text
    /// before the first `": "` when it matches `[a-z_]+`, else `error` and the whole text.
    pub fn from_err_payload(text: &str) -> Self {
        if let Some((code, message)) = text.split_once(": ")
            && !code.is_empty()
            && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        {
            return Failure::Remote {
                code: code.to_owned(),
                message: message.to_owned(),
            };
        }
        Failure::Remote {
            code: "error".to_owned(),
            message: text.to_owned(),
        }
    }
}

/// Misuse of an endpoint by the host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The payload is larger than `max_message_bytes`.
    #[error("payload of {size} bytes exceeds the {max} byte limit")]
    TooLarge {
        /// Payload size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// `max_streams` requests are already in flight.
    #[error("{0} requests already in flight")]
    TooManyInFlight(usize),
    /// No request with this id is in progress (unknown, finished or cancelled).
    #[error("no request {0:?} in progress")]
    UnknownRequest(String),
    /// The response of this id was already finished or failed.
    #[error("request {0:?} was already answered")]
    AlreadyFinished(String),
    /// The error code must match `[a-z_]+`.
    #[error("invalid error code {0:?}: use lower-case letters and '_'")]
    InvalidErrorCode(String),
    /// The channel and nick leave too little room in a line for any payload.
    #[error("no room for a payload in a line to {0:?}")]
    NoRoom(String),
    /// The IRC connection has ended; make a new engine for a new connection.
    #[error("the IRC connection has ended")]
    Closed,
    /// A connection of many channels ([`MultiDesk`], [`MultiRemote`]) has no such channel.
    #[error("{0} is not one of this connection's channels")]
    UnknownChannel(String),
    /// The configuration cannot work (see [`ConfigError`]).
    #[error("invalid configuration: {0}")]
    InvalidConfig(#[from] ConfigError),
}

impl LocalError {
    /// The error's name as the conformance vectors and the bindings write it.
    pub fn code(&self) -> &'static str {
        match self {
            LocalError::TooLarge { .. } => "too_large",
            LocalError::TooManyInFlight(_) => "too_many_in_flight",
            LocalError::UnknownRequest(_) => "unknown_request",
            LocalError::AlreadyFinished(_) => "already_finished",
            LocalError::InvalidErrorCode(_) => "invalid_error_code",
            LocalError::NoRoom(_) => "no_room",
            LocalError::Closed => "closed",
            LocalError::UnknownChannel(_) => "unknown_channel",
            LocalError::InvalidConfig(_) => "invalid_config",
        }
    }
}

/// An OA1 frame this end dropped though it came to its channel, and why. The other end hears
/// nothing back, so this is where a secret or a sender filter that differs from the peer's
/// shows ([`Client::last_refused`], [`Server::last_refused`]; `rexd --irc` logs each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedFrame {
    /// The sender as the server showed it: `nick!user@host`.
    pub source: String,
    /// Why it was dropped.
    pub reason: RefusalReason,
    /// How many frames this end has refused so far, this one included: a host that polls
    /// `last_refused` tells a new refusal from one it has seen.
    pub count: u64,
}

/// Why an OA1 frame was refused; its `Display` says what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalReason {
    /// The sender does not match `allowed_sender` (`rexd --allow-from`), given here.
    DisallowedSender(String),
    /// A plain `OA1` frame, and this end has a secret.
    Unauthenticated,
    /// A sealed `OA1A` frame, and this end has no secret.
    AuthUnexpected,
    /// An `OA1A` frame whose header does not parse.
    MalformedSeal,
    /// An `OA1A` frame whose tag does not check out.
    Forged,
    /// An `OA1A` frame whose time is outside `max_skew_ms` of this end's clock.
    Expired,
    /// An `OA1A` frame accepted before.
    Replayed,
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefusalReason::DisallowedSender(allowed) => write!(
                f,
                "its sender is not {allowed}, the only one this end takes frames from \
                 (rexd's --allow-from, a desk's allowed_sender)"
            ),
            RefusalReason::Unauthenticated => f.write_str(
                "it is a plain OA1 frame and this end has a secret: the sender needs the same \
                 secret",
            ),
            RefusalReason::AuthUnexpected => f.write_str(
                "it is sealed with a secret (OA1A) and this end has none: give this end the \
                 sender's secret",
            ),
            RefusalReason::MalformedSeal => f.write_str("its OA1A header is malformed"),
            RefusalReason::Forged => f.write_str(
                "its tag does not check out: the two ends hold different secrets (or the line \
                 was altered)",
            ),
            RefusalReason::Expired => f.write_str(
                "its time is outside max_skew_ms of this end's clock: the two clocks disagree",
            ),
            RefusalReason::Replayed => f.write_str("it repeats a frame accepted before"),
        }
    }
}

impl fmt::Display for RefusedFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "refused an OA1 frame from {}: {}",
            self.source, self.reason
        )
    }
}

/// Counters an endpoint keeps. `bytes_buffered` is a gauge; the rest only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Lines handed to `handle_line`.
    pub lines_in: u64,
    /// Lines handed out as `Transmit`.
    pub lines_out: u64,
    /// OA1 frames accepted for processing.
    pub frames_in: u64,
    /// OA1 frames sent.
    pub frames_out: u64,
    /// Payload bytes (escaped) sent.
    pub payload_bytes_out: u64,
    /// Lines that were not for us: other commands, channels, senders, or not OA1.
    pub ignored: u64,
    /// Lines from a sender that is not `allowed_sender` (a subset of `ignored`).
    pub disallowed_sender: u64,
    /// `OA1 ` lines that are not well-formed frames (a subset of `ignored`).
    pub malformed_frames: u64,
    /// Lines over `max_line_bytes` or not valid IRC (a subset of `ignored`).
    pub invalid_lines: u64,
    /// Duplicate chunks.
    pub duplicates: u64,
    /// Frames for finished, unknown or refused streams, or beyond a stream's end.
    pub stale_frames: u64,
    /// Messages cut at the size cap.
    pub truncations: u64,
    /// Requests over the size cap answered `too_large` (server).
    pub too_large: u64,
    /// Requests that timed out (client).
    pub timeouts: u64,
    /// Streams failed because a chunk never arrived.
    pub incomplete: u64,
    /// `CANCEL` frames sent (client) or received (server).
    pub cancels: u64,
    /// Bytes held right now in reassembly and outgoing queues.
    pub bytes_buffered: u64,
    /// With a secret: plain `OA1` frames, dropped (a subset of `ignored`).
    pub unauthenticated: u64,
    /// Without a secret: `OA1A` frames, dropped (a subset of `ignored`).
    pub auth_unexpected: u64,
    /// Authenticated frames whose tag did not match: forged, altered, another channel or key
    /// (a subset of `ignored`).
    pub forged: u64,
    /// Authenticated frames outside the clock window (a subset of `ignored`).
    pub expired: u64,
    /// Authenticated frames seen before (a subset of `ignored`).
    pub replayed: u64,
    /// Compressed streams received whole (client: `RESZ` answers; server: `REQZ` requests).
    pub compressed_in: u64,
    /// Compressed streams sent (client: `REQZ` requests; server: `RESZ` answers).
    pub compressed_out: u64,
}
