//! OA1, request/response RPC in IRC `PRIVMSG` lines: the bare endpoints ([`Oa1Client`], the
//! desk; [`Oa1Server`], the remote) for hosts with their own IRC client, the `RemoteBash` tool
//! contract, and the codec pieces the conformance vectors check.

use std::sync::{Arc, Mutex};

use deskwire::oa1::{self, chunk, escape, remote_bash};

use crate::error::{DeskwireError, Error, ErrorKind, Result, api};
use crate::{endpoint, lock, long, long_size, non_negative, non_negative_u32, to_usize};

/// Endpoint configuration; [`oa1_config`] gives the spec's defaults. Sizes, counts and times
/// are `Long`s that cannot be negative: a negative one is refused (`InvalidInput`, kind
/// `NEGATIVE`) when the endpoint is built.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Oa1Config {
    /// The desk channel.
    pub channel: String,
    /// Our nick at registration.
    pub nick: String,
    /// Accept frames from this peer only: a nick, a `nick!user@host` mask (`*` and `?` in user
    /// and host), or `"*"` for anyone in the channel. A desk must set it (its remote, e.g.
    /// `rexd`); a desk sends nothing until that peer is in the channel.
    pub allowed_sender: Option<String>,
    /// Escaped payload bytes per frame at most (spec: 240).
    pub max_frame_payload_bytes: i64,
    /// Use the largest payload that fits the line.
    pub adaptive_payload: bool,
    /// Decoded bytes of one message at most (spec: 128 KiB).
    pub max_message_bytes: i64,
    /// Streams and requests in flight at most.
    pub max_streams: i64,
    /// How long a request may take once its lines may leave (client; spec: 30 s). The wait
    /// before that (registration, the join, the remote's arrival) is `readyTimeoutMs`'s.
    pub request_timeout_ms: i64,
    /// How long a gap inside a stream may last (spec: 10 s).
    pub partial_timeout_ms: i64,
    /// Lines sent at once before pacing starts.
    pub pacing_burst: i32,
    /// Then one line per this many ms.
    pub pacing_interval_ms: i64,
    /// Longer inbound lines are ignored.
    pub max_line_bytes: i64,
    /// Finished request ids remembered.
    pub finished_memory: i64,
    /// How long small streamed output may wait for more (server).
    pub flush_delay_ms: i64,
    /// Authenticated frames (`OA1A`) with a shared secret; `null` sends plain frames.
    #[uniffi(default = None)]
    pub auth: Option<Oa1AuthConfig>,
    /// Desk: offer compressed answers; remote: accept the offer.
    #[uniffi(default = false)]
    pub compression: bool,
    /// How long a request may wait to leave (registered, joined, the remote there) before it
    /// fails `NotReady` (client); its `requestTimeoutMs` starts only then.
    #[uniffi(default = 30000)]
    pub ready_timeout_ms: i64,
}

/// Authenticated frames: every frame carries an HMAC-SHA256 tag over the channel, a timestamp
/// and the frame, checked in constant time; forged, expired and replayed frames are dropped.
#[derive(Clone, PartialEq, Eq, uniffi::Record)]
#[uniffi::export(Display)]
pub struct Oa1AuthConfig {
    /// The shared secret.
    pub secret: Vec<u8>,
    /// Unix time (ms) of the host clock's `now_ms` 0.
    pub epoch_unix_ms: i64,
    /// How far a frame's timestamp may be from ours (spec default 60 s).
    #[uniffi(default = 60000)]
    pub max_skew_ms: i64,
    /// Tags remembered against replays.
    #[uniffi(default = 65536)]
    pub max_remembered: i64,
}

/// Kotlin's `toString()` (and so that of every config holding one): the fields as a data
/// class prints them, the secret as its length only, so a logged config leaks nothing.
impl std::fmt::Display for Oa1AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Oa1AuthConfig(secret=<{} bytes, hidden>, epochUnixMs={}, maxSkewMs={}, maxRemembered={})",
            self.secret.len(),
            self.epoch_unix_ms,
            self.max_skew_ms,
            self.max_remembered
        )
    }
}

impl std::fmt::Debug for Oa1AuthConfig {
    // The secret never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oa1AuthConfig")
            .field("secret", &"[REDACTED]")
            .field("epoch_unix_ms", &self.epoch_unix_ms)
            .finish_non_exhaustive()
    }
}

/// The spec's defaults for an endpoint with nick `nick` on `channel` (the order of
/// `connectionConfig`).
#[uniffi::export]
pub fn oa1_config(nick: String, channel: String) -> Oa1Config {
    oa1::Config::new(&channel, &nick).into()
}

/// An endpoint configuration from JSON in the shape of `tests/vectors/oa1.json` (`channel`
/// and `nick` required, the spec's defaults for the rest, unknown keys refused).
#[uniffi::export]
pub fn oa1_config_from_json(json: String) -> Result<Oa1Config> {
    api(|| serde_json::from_str::<oa1::Config>(&json)).map(Into::into)
}

/// What a bare endpoint wants next.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum Oa1Output {
    /// Write this IRC line (append CRLF on a raw socket).
    Transmit {
        /// The line.
        line: String,
    },
    /// Tell the app.
    Event {
        /// The event.
        event: oa1::Event,
    },
    /// Nothing to do before this instant unless input arrives.
    Timeout {
        /// The deadline (ms).
        deadline_ms: i64,
    },
}

/// An endpoint's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct Oa1Stats {
    /// Lines handed in.
    pub lines_in: i64,
    /// Lines handed out.
    pub lines_out: i64,
    /// Frames accepted.
    pub frames_in: i64,
    /// Frames sent.
    pub frames_out: i64,
    /// Escaped payload bytes sent.
    pub payload_bytes_out: i64,
    /// Lines not for us.
    pub ignored: i64,
    /// Lines from a sender not allowed.
    pub disallowed_sender: i64,
    /// Malformed `OA1 ` lines.
    pub malformed_frames: i64,
    /// Over-long or invalid lines.
    pub invalid_lines: i64,
    /// Duplicate chunks.
    pub duplicates: i64,
    /// Frames for finished or unknown streams.
    pub stale_frames: i64,
    /// Messages cut at the cap.
    pub truncations: i64,
    /// Requests refused as too large.
    pub too_large: i64,
    /// Requests timed out.
    pub timeouts: i64,
    /// Streams with a missing chunk.
    pub incomplete: i64,
    /// `CANCEL`s sent or received.
    pub cancels: i64,
    /// Bytes held now.
    pub bytes_buffered: i64,
    /// Plain frames refused because a secret is configured.
    pub unauthenticated: i64,
    /// Authenticated frames while no secret is configured.
    pub auth_unexpected: i64,
    /// Frames whose tag did not match.
    pub forged: i64,
    /// Frames outside the time window.
    pub expired: i64,
    /// Frames seen before.
    pub replayed: i64,
    /// Compressed frames received.
    pub compressed_in: i64,
    /// Compressed frames sent.
    pub compressed_out: i64,
}

/// The desk's bare endpoint: requests out, responses in, over lines the host's IRC client carries.
#[derive(uniffi::Object)]
pub struct Oa1Client {
    inner: Mutex<oa1::Client>,
}

#[uniffi::export]
impl Oa1Client {
    /// A client; `seed` fixes its request ids: take it from `SecureRandom` (a fixed seed is
    /// for tests: two desks with one seed pick the same ids and can take each other's
    /// answers).
    #[uniffi::constructor]
    pub fn new(config: Oa1Config, seed: i64) -> Result<Arc<Self>> {
        Ok(Arc::new(Oa1Client {
            inner: Mutex::new(oa1::Client::new(config.try_into()?, seed as u64)),
        }))
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> i64 {
        long_size(lock(&self.inner).in_flight())
    }
}

endpoint::line_methods!(Oa1Client);
endpoint::requester_methods!(Oa1Client);

/// The remote's bare endpoint: requests in, streamed answers out.
#[derive(uniffi::Object)]
pub struct Oa1Server {
    inner: Mutex<oa1::Server>,
}

#[uniffi::export]
impl Oa1Server {
    /// A server.
    #[uniffi::constructor]
    pub fn new(config: Oa1Config) -> Result<Arc<Self>> {
        Ok(Arc::new(Oa1Server {
            inner: Mutex::new(oa1::Server::new(config.try_into()?)),
        }))
    }

    /// Requests being answered.
    pub fn active(&self) -> i64 {
        long_size(lock(&self.inner).active())
    }
}

endpoint::line_methods!(Oa1Server);
endpoint::responder_methods!(Oa1Server);

// ---------------------------------------------------------------------------------------------
// RemoteBash and the codec pieces

/// The tool's name, description and input schema (JSON) as the model sees them.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RemoteBashTool {
    /// `RemoteBash`.
    pub name: String,
    /// The description.
    pub description: String,
    /// The input schema, JSON text.
    pub input_schema: String,
}

/// `RemoteBash` as the model sees it.
#[uniffi::export]
pub fn remote_bash_tool() -> RemoteBashTool {
    RemoteBashTool {
        name: remote_bash::TOOL_NAME.to_owned(),
        description: remote_bash::DESCRIPTION.clone(),
        input_schema: remote_bash::INPUT_SCHEMA.to_owned(),
    }
}

/// The tool result for the model of a failed request: `{"ok": false, "error", "message"}`.
#[uniffi::export]
pub fn remote_bash_failure_json(failure: oa1::Failure) -> String {
    remote_bash::failure_json(&failure)
}

/// The code of a failure: the remote's, or `timeout`, `incomplete`, `disconnected`,
/// `malformed`, `not_ready`, `join_failed`, `kicked`, `peer_left`.
#[uniffi::export]
pub fn oa1_failure_code(failure: oa1::Failure) -> String {
    failure.code().to_owned()
}

/// Whether a failure is a timeout here (the core's `Failure::is_timeout`): no answer within the
/// request's timeout (`Timeout`), or it never left within `readyTimeoutMs` (`NotReady`). A
/// remote's own `ERR timeout: ...` is its answer, not one of these.
#[uniffi::export]
pub fn oa1_failure_is_timeout(failure: oa1::Failure) -> bool {
    failure.is_timeout()
}

/// A readable message for a failure.
#[uniffi::export]
pub fn oa1_failure_message(failure: oa1::Failure) -> String {
    failure.message()
}

/// Reads an `ERR` payload `code: message`.
#[uniffi::export]
pub fn oa1_failure_from_err_payload(payload: String) -> oa1::Failure {
    oa1::Failure::from_err_payload(&payload)
}

/// Escapes a payload for frames (`\\`, `\n`, `\r`, `\t`, NUL).
#[uniffi::export]
pub fn oa1_escape(text: String) -> String {
    escape::escape(&text)
}

/// Unescapes a frame payload (bytes: a decoded payload need not be UTF-8 on its own).
#[uniffi::export]
pub fn oa1_unescape(escaped: Vec<u8>) -> Vec<u8> {
    escape::unescape(&escaped)
}

/// Escapes `text` and cuts it into frame payloads of at most `budget` bytes each, as they go
/// on the wire.
#[uniffi::export]
pub fn oa1_chunk(text: String, budget: i64) -> Result<Vec<String>> {
    let budget = usize::try_from(budget).unwrap_or(0);
    if budget < chunk::MIN_PAYLOAD_BUDGET {
        return Err(Error::Invalid {
            kind: crate::error::ErrorKind::BudgetTooSmall,
            detail: format!("a budget is at least {} bytes", chunk::MIN_PAYLOAD_BUDGET),
        }
        .into());
    }
    let escaped = escape::escape(&text);
    Ok(chunk::split(&escaped, |_| budget)
        .into_iter()
        .map(|c| chunk::wire_payload(c).into_owned())
        .collect())
}

/// One OA1 frame: `OA1 TYPE ID SEQ MORE PAYLOAD`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Oa1Frame {
    /// The type.
    pub kind: oa1::FrameType,
    /// The request id.
    pub id: String,
    /// The chunk number, from 1 (at most 4294967295).
    pub seq: i64,
    /// Whether more chunks follow.
    pub more: bool,
    /// The escaped payload.
    pub payload: String,
}

/// Reads a frame from a `PRIVMSG` text; `null` when it is not a well-formed frame.
#[uniffi::export]
pub fn oa1_parse_frame(text: String) -> Option<Oa1Frame> {
    oa1::Frame::parse(&text).map(|f| Oa1Frame {
        kind: f.kind,
        id: f.id.to_owned(),
        seq: i64::from(f.seq),
        more: f.more,
        payload: f.payload.to_owned(),
    })
}

/// Writes a frame; a `seq` outside 1 to 4294967295 is refused (`InvalidInput`, kind
/// `INVALID`), and so is a frame the parser would not read back or that would break the IRC
/// line: an id that is not 1 to 64 of `A-Z a-z 0-9 _ -` (`INVALID_ID`), a raw NUL, CR or LF
/// in the payload (`FORBIDDEN_BYTE`; escape it first).
#[uniffi::export]
pub fn oa1_format_frame(frame: Oa1Frame) -> Result<String> {
    let seq = u32::try_from(frame.seq)
        .ok()
        .filter(|&seq| seq >= 1)
        .ok_or_else(|| Error::Invalid {
            kind: ErrorKind::Invalid,
            detail: format!("seq is {}; it is 1 to {}", frame.seq, u32::MAX),
        })?;
    Ok(oa1::Frame {
        kind: frame.kind,
        id: frame.id.as_str(),
        seq,
        more: frame.more,
        payload: frame.payload.as_str(),
    }
    .format()
    .map_err(Error::Oa1Frame)?)
}

// ---------------------------------------------------------------------------------------------
// Conversions

impl From<oa1::Config> for Oa1Config {
    fn from(c: oa1::Config) -> Self {
        Oa1Config {
            channel: c.channel,
            nick: c.nick,
            allowed_sender: c.allowed_sender,
            max_frame_payload_bytes: long_size(c.max_frame_payload_bytes),
            adaptive_payload: c.adaptive_payload,
            max_message_bytes: long_size(c.max_message_bytes),
            max_streams: long_size(c.max_streams),
            request_timeout_ms: long(c.request_timeout_ms),
            ready_timeout_ms: long(c.ready_timeout_ms),
            partial_timeout_ms: long(c.partial_timeout_ms),
            pacing_burst: i32::try_from(c.pacing.burst).unwrap_or(i32::MAX),
            pacing_interval_ms: long(c.pacing.interval_ms),
            max_line_bytes: long_size(c.max_line_bytes),
            finished_memory: long_size(c.finished_memory),
            flush_delay_ms: long(c.flush_delay_ms),
            auth: c.auth.map(|a| Oa1AuthConfig {
                secret: a.secret,
                epoch_unix_ms: long(a.epoch_unix_ms),
                max_skew_ms: long(a.max_skew_ms),
                max_remembered: long_size(a.max_remembered),
            }),
            compression: c.compression,
        }
    }
}

/// An empty `oa1.auth.secret`: every tag would be one anybody can compute, so frames would
/// pass as authenticated that nobody sealed. `withSecret("")` says the same in Kotlin.
fn empty_secret() -> DeskwireError {
    crate::error::Error::Invalid {
        kind: crate::error::ErrorKind::Invalid,
        detail: "oa1.auth.secret is empty; use the bytes of rexd's --secret-file (make one with \
                 `openssl rand -hex 32`)"
            .into(),
    }
    .into()
}

impl TryFrom<Oa1Config> for oa1::Config {
    type Error = DeskwireError;

    fn try_from(c: Oa1Config) -> Result<Self> {
        let size = |field, value| non_negative(field, value).map(to_usize);
        let auth = match c.auth {
            Some(a) if a.secret.is_empty() => return Err(empty_secret()),
            Some(a) => Some(oa1::AuthConfig {
                secret: a.secret,
                epoch_unix_ms: non_negative("oa1.auth.epochUnixMs", a.epoch_unix_ms)?,
                max_skew_ms: non_negative("oa1.auth.maxSkewMs", a.max_skew_ms)?,
                max_remembered: size("oa1.auth.maxRemembered", a.max_remembered)?,
            }),
            None => None,
        };
        let pacing = oa1::Pacing::steady(
            non_negative_u32("oa1.pacingBurst", c.pacing_burst)?,
            non_negative("oa1.pacingIntervalMs", c.pacing_interval_ms)?,
        );
        Ok(oa1::Config {
            // A pacing other than the default was chosen: keep it on every server.
            server_pacing: pacing == oa1::DEFAULT_PACING,
            pacing,
            allowed_sender: c.allowed_sender,
            max_frame_payload_bytes: size("oa1.maxFramePayloadBytes", c.max_frame_payload_bytes)?,
            adaptive_payload: c.adaptive_payload,
            max_message_bytes: size("oa1.maxMessageBytes", c.max_message_bytes)?,
            max_streams: size("oa1.maxStreams", c.max_streams)?,
            request_timeout_ms: non_negative("oa1.requestTimeoutMs", c.request_timeout_ms)?,
            ready_timeout_ms: non_negative("oa1.readyTimeoutMs", c.ready_timeout_ms)?,
            partial_timeout_ms: non_negative("oa1.partialTimeoutMs", c.partial_timeout_ms)?,
            max_line_bytes: size("oa1.maxLineBytes", c.max_line_bytes)?,
            finished_memory: size("oa1.finishedMemory", c.finished_memory)?,
            flush_delay_ms: non_negative("oa1.flushDelayMs", c.flush_delay_ms)?,
            auth,
            compression: c.compression,
            // Fields this binding does not carry yet keep the spec's defaults.
            ..oa1::Config::new(&c.channel, &c.nick)
        })
    }
}

impl From<oa1::Output> for Oa1Output {
    fn from(o: oa1::Output) -> Self {
        match o {
            oa1::Output::Transmit(line) => Oa1Output::Transmit { line },
            oa1::Output::Event(event) => Oa1Output::Event { event },
            oa1::Output::Timeout(deadline_ms) => Oa1Output::Timeout {
                deadline_ms: long(deadline_ms),
            },
        }
    }
}

impl From<oa1::Stats> for Oa1Stats {
    fn from(s: oa1::Stats) -> Self {
        Oa1Stats {
            lines_in: long(s.lines_in),
            lines_out: long(s.lines_out),
            frames_in: long(s.frames_in),
            frames_out: long(s.frames_out),
            payload_bytes_out: long(s.payload_bytes_out),
            ignored: long(s.ignored),
            disallowed_sender: long(s.disallowed_sender),
            malformed_frames: long(s.malformed_frames),
            invalid_lines: long(s.invalid_lines),
            duplicates: long(s.duplicates),
            stale_frames: long(s.stale_frames),
            truncations: long(s.truncations),
            too_large: long(s.too_large),
            timeouts: long(s.timeouts),
            incomplete: long(s.incomplete),
            cancels: long(s.cancels),
            bytes_buffered: long(s.bytes_buffered),
            unauthenticated: long(s.unauthenticated),
            auth_unexpected: long(s.auth_unexpected),
            forged: long(s.forged),
            expired: long(s.expired),
            replayed: long(s.replayed),
            compressed_in: long(s.compressed_in),
            compressed_out: long(s.compressed_out),
        }
    }
}
