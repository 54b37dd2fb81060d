//! The correlation engine: one end of a JSON-RPC-style conversation, sans-IO.
//!
//! A [`Peer`] makes calls (a pending table of id → method, deadline, user data), answers the
//! calls it receives, and routes what comes back. Deadlines come from a [`TimeoutPolicy`] by
//! method prefix; progress messages push a deadline out, never past the call's hard maximum.
//! The surface is the crate's usual one: `handle_bytes` / `handle_timeout` in, `poll_output`
//! out.
//!
//! Batches (JSON-RPC 2.0 §6): the requests of a batch reach the host one by one, like any
//! others, and the host answers each whenever it likes; the peer collects the answers and
//! writes them as one array once the last request of the batch is answered (or forgotten).
//! Invalid elements and refused requests add their error objects to the array; notifications
//! add nothing, so a batch of notifications gets no answer at all. An empty or oversized
//! batch is one Invalid Request error, not an array.
//!
//! ```
//! use deskwire::jsonrpc::{Output, Peer, PeerConfig, PeerEvent, JsonRpc2};
//!
//! let mut client = Peer::new(JsonRpc2, PeerConfig::default(), 1);
//! let id = client.call(0, "session.info", None, 7).unwrap();
//! let Output::Transmit(bytes) = client.poll_output(0) else { panic!() };
//! assert_eq!(bytes, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.info\"}\n");
//! client.handle_bytes(5, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"ok\":true}}\n");
//! let Output::Event(PeerEvent::Response { id: got, user, result, .. }) = client.poll_output(5) else { panic!() };
//! assert_eq!((got, user, result.get()), (id, 7, "{\"ok\":true}"));
//! ```

use std::collections::{HashMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::dialect::{Dialect, Inbound, Outbound, RemoteError, WriteError};
use super::framing::{
    ContentLengthDecoder, DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_MESSAGE_BYTES, Frame,
    NdjsonDecoder, encode_content_length, encode_ndjson,
};
use super::message::{Id, Invalid, MAX_ID_BYTES, RawJson, write_batch_bodies};
use crate::ids::IdGenerator;

/// How long a drained peer with nothing scheduled asks to sleep.
pub const IDLE_WAIT_MS: u64 = 60_000;

/// How messages are delimited on the stream. JSON: `"ndjson"` or `"content_length"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "JsonRpcFraming"))]
pub enum Framing {
    /// One message per line.
    Ndjson,
    /// `Content-Length` headers (LSP).
    ContentLength,
}

/// A timeout for the methods that start with `prefix`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[cfg_attr(feature = "uniffi", uniffi(name = "JsonRpcTimeoutRule"))]
pub struct TimeoutRule {
    /// The method prefix (`health.` matches `health.ping`; a full name matches itself).
    pub prefix: String,
    /// How long a call may go without an answer or progress.
    pub timeout_ms: u64,
    /// How long a call may take at most, however much progress it reports.
    pub max_total_ms: u64,
}

/// Per-method timeouts; the longest matching prefix wins. JSON: the fields by name (missing
/// ones take [`TimeoutPolicy::default`]'s values: 30 s for every method, up to 10×), or the
/// name of a policy of [`TimeoutPolicy::NAMES`] (`"sidecar"`, `"default"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[cfg_attr(feature = "uniffi", uniffi(name = "JsonRpcTimeoutPolicy"))]
pub struct TimeoutPolicy {
    /// The rules.
    pub rules: Vec<TimeoutRule>,
    /// The timeout of methods no rule matches.
    pub default_timeout_ms: u64,
    /// How many timeouts a call may take in all, when its rule does not say (progress keeps a
    /// call alive up to this multiple of its timeout).
    pub default_max_total_factor: u64,
}

impl Default for TimeoutPolicy {
    fn default() -> Self {
        TimeoutPolicy::uniform(30_000)
    }
}

/// [`TimeoutPolicy`]'s fields as JSON spells them (its `Deserialize` reads a name too).
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct PolicyFields {
    rules: Vec<TimeoutRule>,
    default_timeout_ms: u64,
    default_max_total_factor: u64,
}

impl Default for PolicyFields {
    fn default() -> Self {
        let TimeoutPolicy {
            rules,
            default_timeout_ms,
            default_max_total_factor,
        } = TimeoutPolicy::default();
        PolicyFields {
            rules,
            default_timeout_ms,
            default_max_total_factor,
        }
    }
}

const POLICY_EXPECTED: &str = "the name of a timeout policy (\"sidecar\": the sidecar spec's \
    per-method table; \"default\": 30 s for every method) or an object {\"rules\": \
    [{\"prefix\", \"timeout_ms\", \"max_total_ms\"}], \"default_timeout_ms\", \
    \"default_max_total_factor\"}";

impl<'de> Deserialize<'de> for TimeoutPolicy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = TimeoutPolicy;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(POLICY_EXPECTED)
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<TimeoutPolicy, E> {
                TimeoutPolicy::named(name).ok_or_else(|| {
                    E::custom(format_args!(
                        "unknown timeout policy {name:?}: expected {POLICY_EXPECTED}"
                    ))
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<TimeoutPolicy, A::Error> {
                let fields =
                    PolicyFields::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(TimeoutPolicy {
                    rules: fields.rules,
                    default_timeout_ms: fields.default_timeout_ms,
                    default_max_total_factor: fields.default_max_total_factor,
                })
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl TimeoutPolicy {
    /// The names [`TimeoutPolicy::named`] knows, as JSON may give them instead of an object.
    pub const NAMES: [&'static str; 2] = ["sidecar", "default"];

    /// The policy of a name of [`TimeoutPolicy::NAMES`]: `"sidecar"` is
    /// [`TimeoutPolicy::sidecar`], `"default"` [`TimeoutPolicy::default`].
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "sidecar" => Some(TimeoutPolicy::sidecar()),
            "default" => Some(TimeoutPolicy::default()),
            _ => None,
        }
    }

    /// One timeout for every method.
    pub fn uniform(timeout_ms: u64) -> Self {
        TimeoutPolicy {
            rules: Vec::new(),
            default_timeout_ms: timeout_ms,
            default_max_total_factor: 10,
        }
    }

    /// The sidecar spec's policy: `health.*` 10 s, `inference.embed` 30 s,
    /// `inference.complete` and `inference.plan` 120 s, `training.start` 300 s (kept alive by
    /// progress up to 10×), `model.*` 60 s; 30 s for anything else.
    pub fn sidecar() -> Self {
        let rule = |prefix: &str, secs: u64| TimeoutRule {
            prefix: prefix.to_owned(),
            timeout_ms: secs * 1000,
            max_total_ms: secs * 1000 * 10,
        };
        TimeoutPolicy {
            rules: vec![
                rule("health.", 10),
                rule("inference.embed", 30),
                rule("inference.complete", 120),
                rule("inference.plan", 120),
                rule("training.start", 300),
                rule("model.", 60),
            ],
            default_timeout_ms: 30_000,
            default_max_total_factor: 10,
        }
    }

    /// (timeout, hard maximum) for `method`.
    pub fn lookup(&self, method: &str) -> (u64, u64) {
        self.rules
            .iter()
            .filter(|r| method.starts_with(&r.prefix))
            .max_by_key(|r| r.prefix.len())
            .map(|r| (r.timeout_ms, r.max_total_ms.max(r.timeout_ms)))
            .unwrap_or((
                self.default_timeout_ms,
                self.default_timeout_ms
                    .saturating_mul(self.default_max_total_factor.max(1)),
            ))
    }
}

/// Peer configuration. JSON: the fields by name; missing ones take the defaults, unknown ones
/// are refused.
///
/// The default `timeouts` depend on the dialect ([`Dialect::default_timeouts`]): the sidecar's
/// is its spec's per-method table ([`TimeoutPolicy::sidecar`]), the others' 30 s for every
/// method. [`PeerConfig::for_dialect`] and [`PeerConfig::from_json_for`] apply it;
/// `PeerConfig::default()` knows no dialect and has the flat 30 s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PeerConfig {
    /// Framing on the stream.
    pub framing: Framing,
    /// Largest message accepted.
    pub max_message_bytes: usize,
    /// Most elements in one batch; a larger batch is refused with a single error.
    pub batch_limit: usize,
    /// Most outgoing calls in flight.
    pub max_pending: usize,
    /// Most incoming calls waiting for our answer; more are answered with an error.
    pub max_incoming: usize,
    /// Call deadlines.
    pub timeouts: TimeoutPolicy,
    /// A notification to send when a call is cancelled or times out, with `{"id": <id>}`
    /// params (for example `$/cancelRequest`); `None` sends nothing.
    pub cancel_notification: Option<String>,
    /// How many answered or abandoned ids to remember, to tell a late answer from a stray one.
    pub finished_memory: usize,
    /// Outputs (events and frames) waiting at most for the host to drain `poll_output`. At the
    /// cap, what the peer alone makes us queue is dropped and counted (`PeerStats::dropped`):
    /// its notifications, progress reports (the deadline is still extended), reports of
    /// malformed input and the error answers to them. Answers to our calls and the peer's
    /// requests (at most `max_incoming`) are never dropped.
    pub max_queued: usize,
}

impl Default for PeerConfig {
    fn default() -> Self {
        PeerConfig {
            framing: Framing::Ndjson,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            batch_limit: 64,
            max_pending: 1024,
            max_incoming: 1024,
            timeouts: TimeoutPolicy::default(),
            cancel_notification: None,
            finished_memory: 1024,
            max_queued: 4096,
        }
    }
}

impl PeerConfig {
    /// The defaults for a peer speaking `dialect`: [`PeerConfig::default`] with the dialect's
    /// timeouts ([`Dialect::default_timeouts`]).
    pub fn for_dialect<D: Dialect>(dialect: &D) -> Self {
        PeerConfig {
            timeouts: dialect.default_timeouts(),
            ..PeerConfig::default()
        }
    }

    /// A configuration from JSON for a peer speaking `dialect` (what bindings read from their
    /// host): missing members take [`PeerConfig::for_dialect`]'s values, so a sidecar peer
    /// without `"timeouts"` gets the sidecar's table; `null` is all defaults.
    pub fn from_json_for<D: Dialect>(
        dialect: &D,
        json: serde_json::Value,
    ) -> Result<Self, serde_json::Error> {
        if json.is_null() {
            return Ok(PeerConfig::for_dialect(dialect));
        }
        let timeouts_given = json.get("timeouts").is_some();
        let mut config: PeerConfig = serde_json::from_value(json)?;
        if !timeouts_given {
            config.timeouts = dialect.default_timeouts();
        }
        Ok(config)
    }
}

/// Why a call ended without a result. JSON: `{"remote": {"code", "message", "data"?}}`,
/// `"timeout"` or `{"malformed": "<reason>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallError {
    /// The peer answered with an error.
    Remote(RemoteError),
    /// No answer (or progress) before the deadline, or the hard maximum passed.
    Timeout,
    /// The peer answered, but its answer could not be read (an error object of the wrong
    /// shape, a result holding `"\ud800"`, ...): what was wrong. Counted in
    /// [`PeerStats::malformed`].
    Malformed(String),
}

/// Something the application should learn. JSON: externally tagged, e.g.
/// `{"response": {"id": 1, "method": "m", "user": 0, "result": {...}}}`; params, results and
/// progress are embedded as the JSON they are (absent params are left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PeerEvent {
    /// The peer calls us: answer with [`Peer::respond`] or [`Peer::respond_error`].
    Request {
        /// The call's id.
        id: Id,
        /// The method.
        method: String,
        /// The params, raw.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        params: Option<RawJson>,
    },
    /// The peer notifies us.
    Notification {
        /// The method.
        method: String,
        /// The params, raw.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        params: Option<RawJson>,
    },
    /// A call of ours succeeded.
    Response {
        /// The call's id.
        id: Id,
        /// Its method.
        method: String,
        /// The user data given to [`Peer::call`].
        user: u64,
        /// The result, raw.
        result: RawJson,
    },
    /// A call of ours failed.
    Failed {
        /// The call's id.
        id: Id,
        /// Its method.
        method: String,
        /// The user data given to [`Peer::call`].
        user: u64,
        /// Why.
        error: CallError,
    },
    /// A call of ours reported progress (its deadline moved).
    Progress {
        /// The call's id.
        id: Id,
        /// Its method.
        method: String,
        /// The user data given to [`Peer::call`].
        user: u64,
        /// The progress data, raw.
        progress: RawJson,
    },
    /// The peer sent something unreadable (already answered where the dialect does that).
    Malformed {
        /// What was wrong.
        reason: String,
    },
}

/// What the peer wants from the host next. JSON: `{"transmit": "<the frame as text>"}` (the
/// peer writes only UTF-8), `{"event": {...}}` or `{"timeout": <ms>}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Output {
    /// Write these bytes (framing included) to the stream.
    Transmit(#[serde(with = "utf8_bytes")] Vec<u8>),
    /// Tell the application.
    Event(PeerEvent),
    /// Nothing to do before this instant (ms), unless new input arrives.
    Timeout(u64),
}

/// Misuse of the peer by the host. JSON: externally tagged (`{"unknown_id": 3}`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LocalError {
    /// An outgoing call with this id is already pending.
    #[error("a call with id {0} is already pending")]
    DuplicateId(Id),
    /// `max_pending` calls are in flight.
    #[error("{0} calls already pending")]
    TooManyPending(usize),
    /// No pending call (for `cancel`) or unanswered incoming request (for `respond`) has this id.
    #[error("no call with id {0} is in progress")]
    UnknownId(Id),
    /// The dialect cannot write this.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// Params that are neither an object nor an array (JSON-RPC 2.0, section 4.2), or not an
    /// object in the sidecar dialect: the peer would refuse the call as an invalid request.
    #[error("params {params:.40}: the {dialect} dialect's params are {allowed}")]
    InvalidParams {
        /// The dialect.
        dialect: &'static str,
        /// What params were (cut to 40 characters).
        params: String,
        /// What it takes.
        allowed: &'static str,
    },
}

/// A method name and id the peer would take as a call: a name that is not empty and, in
/// JSON-RPC 2.0, not `rpc.`-something (section 4: reserved for the protocol itself); an id that
/// is not `null`, which answers to requests nobody could read carry (section 5), so the answer
/// could not be told from one.
fn check_call<D: Dialect>(id: Option<&Id>, method: &str) -> Result<(), LocalError> {
    let refuse = |what: String| {
        Err(LocalError::Write(WriteError::InvalidValue {
            dialect: D::NAME,
            what,
        }))
    };
    if method.is_empty() {
        return refuse("an empty method name".to_owned());
    }
    if D::NAME == super::dialect::JsonRpc2::NAME && method.starts_with("rpc.") {
        return refuse(format!(
            "the method {method:.40} (names that start with rpc. are reserved for the protocol)"
        ));
    }
    if id == Some(&Id::Null) {
        return refuse(
            "a call with a null id (answers to unreadable requests carry null, so its answer \
             could not be told from one)"
                .to_owned(),
        );
    }
    Ok(())
}

/// Params the dialect's peers take: an object or an array (JSON-RPC 2.0), an object only for
/// the sidecar dialect, whose reader refuses anything else.
fn check_params<D: Dialect>(params: Option<&RawJson>) -> Result<(), LocalError> {
    let Some(params) = params else {
        return Ok(());
    };
    let text = params.get().trim_start();
    let sidecar = D::NAME == super::dialect::Sidecar::NAME;
    let ok = match sidecar {
        true => text.starts_with('{'),
        false => text.starts_with('{') || text.starts_with('['),
    };
    match ok {
        true => Ok(()),
        false => Err(LocalError::InvalidParams {
            dialect: D::NAME,
            params: params.get().to_owned(),
            allowed: match sidecar {
                true => "an object",
                false => "an object or an array",
            },
        }),
    }
}

/// Counters. `pending`, `incoming` and `bytes_buffered` are gauges; the rest only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[cfg_attr(feature = "uniffi", uniffi(name = "JsonRpcStats"))]
pub struct PeerStats {
    /// Frames read.
    pub frames_in: u64,
    /// Frames written.
    pub frames_out: u64,
    /// Frames or batch elements that were not valid messages.
    pub malformed: u64,
    /// Framing errors (over-long lines, bad headers, oversized bodies).
    pub framing_errors: u64,
    /// Answers for ids we never called (or forgot long ago).
    pub unmatched_responses: u64,
    /// Answers that came after the call was cancelled or timed out (dropped).
    pub late_responses: u64,
    /// Calls that timed out.
    pub timeouts: u64,
    /// Calls cancelled by the host.
    pub cancelled: u64,
    /// Incoming requests refused (duplicate id, or too many waiting).
    pub refused_requests: u64,
    /// Outgoing calls pending now.
    pub pending: u64,
    /// Incoming requests waiting for our answer now.
    pub incoming: u64,
    /// Bytes held by the decoder and the outbox now.
    pub bytes_buffered: u64,
    /// Notifications, progress reports, malformed-input reports and error answers dropped
    /// because `max_queued` outputs were waiting.
    pub dropped: u64,
}

/// Frames as JSON strings: every dialect writes UTF-8, so the text is the bytes.
mod utf8_bytes {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(bytes) {
            Ok(text) => s.serialize_str(text),
            Err(_) => s.serialize_bytes(bytes),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        String::deserialize(d)
            .map(String::into_bytes)
            .map_err(|e| D::Error::custom(format!("a frame as text: {e}")))
    }
}

#[derive(Debug)]
struct Pending {
    method: String,
    user: u64,
    timeout_ms: u64,
    deadline: u64,
    hard_deadline: u64,
}

#[derive(Debug)]
enum Decoder {
    Ndjson(NdjsonDecoder),
    ContentLength(ContentLengthDecoder),
}

/// A bounded memory of ids we stopped waiting for.
#[derive(Debug, Default)]
struct Abandoned {
    order: VecDeque<Id>,
    set: HashSet<Id>,
    capacity: usize,
}

impl Abandoned {
    fn insert(&mut self, id: Id) {
        if self.capacity == 0 || !self.set.insert(id.clone()) {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > self.capacity
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
    }
}

/// A batch whose requests are not all answered yet.
#[derive(Debug, Default)]
struct OpenBatch {
    /// Requests of the batch still waiting for the host's answer.
    waiting: usize,
    /// Answer bodies so far, in the order they were made (the spec allows any order).
    answers: Vec<Vec<u8>>,
}

/// The batches waiting for answers, and which incoming request belongs to which.
#[derive(Debug, Default)]
struct Batches {
    open: HashMap<u64, OpenBatch>,
    of_request: HashMap<Id, u64>,
    next: u64,
}

/// One end of a conversation in dialect `D`. See the module docs.
#[derive(Debug)]
pub struct Peer<D: Dialect> {
    dialect: D,
    config: PeerConfig,
    decoder: Decoder,
    ids: IdGenerator,
    counter: i64,
    pending: HashMap<Id, Pending>,
    incoming: HashSet<Id>,
    batches: Batches,
    abandoned: Abandoned,
    outbox: VecDeque<Vec<u8>>,
    outbox_bytes: usize,
    /// Frames ever queued and ever taken: a frame queued as number `n` is at
    /// `outbox[n - taken]` while `n >= taken`.
    queued_total: u64,
    taken_total: u64,
    /// The number of the progress frame of each incoming request, while it may still wait in
    /// the outbox: a newer report replaces it there ([`Peer::progress`]).
    queued_progress: HashMap<Id, u64>,
    events: VecDeque<PeerEvent>,
    stats: PeerStats,
}

impl<D: Dialect> Peer<D> {
    /// A peer speaking `dialect`; `seed` fixes generated ids.
    pub fn new(dialect: D, config: PeerConfig, seed: u64) -> Self {
        let decoder = match config.framing {
            Framing::Ndjson => Decoder::Ndjson(NdjsonDecoder::new(config.max_message_bytes)),
            Framing::ContentLength => Decoder::ContentLength(ContentLengthDecoder::new(
                config.max_message_bytes,
                DEFAULT_MAX_HEADER_BYTES,
            )),
        };
        Peer {
            dialect,
            abandoned: Abandoned {
                capacity: config.finished_memory,
                ..Default::default()
            },
            config,
            decoder,
            ids: IdGenerator::new(seed),
            counter: 0,
            pending: HashMap::new(),
            incoming: HashSet::new(),
            batches: Batches::default(),
            outbox: VecDeque::new(),
            outbox_bytes: 0,
            queued_total: 0,
            taken_total: 0,
            queued_progress: HashMap::new(),
            events: VecDeque::new(),
            stats: PeerStats::default(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &PeerConfig {
        &self.config
    }

    /// Calls `method` with a generated id; `user` comes back with the answer.
    pub fn call(
        &mut self,
        now: u64,
        method: &str,
        params: Option<RawJson>,
        user: u64,
    ) -> Result<Id, LocalError> {
        // Before an id is taken: a refused call uses none.
        check_call::<D>(None, method)?;
        check_params::<D>(params.as_ref())?;
        let id = loop {
            let id = self.dialect.next_id(&mut self.ids, &mut self.counter);
            if !self.pending.contains_key(&id) {
                break id;
            }
        };
        self.call_with_id(now, id.clone(), method, params, user)?;
        Ok(id)
    }

    /// Calls `method` with the host's own id. An id already pending is refused.
    pub fn call_with_id(
        &mut self,
        now: u64,
        id: Id,
        method: &str,
        params: Option<RawJson>,
        user: u64,
    ) -> Result<(), LocalError> {
        check_call::<D>(Some(&id), method)?;
        check_params::<D>(params.as_ref())?;
        if self.pending.contains_key(&id) {
            return Err(LocalError::DuplicateId(id));
        }
        // The peer would refuse it (MAX_ID_BYTES): not worth a round trip.
        if let Some(len) = id.too_long() {
            return Err(LocalError::Write(WriteError::InvalidValue {
                dialect: D::NAME,
                what: format!("an id of {len} bytes (the limit is {MAX_ID_BYTES})"),
            }));
        }
        if self.pending.len() >= self.config.max_pending {
            return Err(LocalError::TooManyPending(self.pending.len()));
        }
        self.send(
            now,
            Outbound::Request {
                id: &id,
                method,
                params: params.as_ref(),
            },
        )?;
        let (timeout_ms, max_total_ms) = self.config.timeouts.lookup(method);
        self.pending.insert(
            id,
            Pending {
                method: method.to_owned(),
                user,
                timeout_ms,
                deadline: now.saturating_add(timeout_ms),
                hard_deadline: now.saturating_add(max_total_ms),
            },
        );
        Ok(())
    }

    /// Sends a notification.
    pub fn notify(
        &mut self,
        now: u64,
        method: &str,
        params: Option<RawJson>,
    ) -> Result<(), LocalError> {
        check_call::<D>(None, method)?;
        check_params::<D>(params.as_ref())?;
        self.send(
            now,
            Outbound::Notification {
                method,
                params: params.as_ref(),
            },
        )
    }

    /// Answers the incoming request `id` with a result.
    pub fn respond(&mut self, now: u64, id: &Id, result: RawJson) -> Result<(), LocalError> {
        if !self.incoming.contains(id) {
            return Err(LocalError::UnknownId(id.clone()));
        }
        let body = self.encode(
            now,
            Outbound::Result {
                id,
                result: &result,
            },
        )?;
        self.take_incoming(id)?;
        self.answer(id, body);
        Ok(())
    }

    /// Answers the incoming request `id` with an error.
    pub fn respond_error(
        &mut self,
        now: u64,
        id: &Id,
        error: RemoteError,
    ) -> Result<(), LocalError> {
        if !self.incoming.contains(id) {
            return Err(LocalError::UnknownId(id.clone()));
        }
        let body = self.encode(now, Outbound::Error { id, error: &error })?;
        self.take_incoming(id)?;
        self.answer(id, body);
        Ok(())
    }

    /// Answers the incoming request `id` with the dialect's "method not found" error.
    pub fn respond_method_not_found(
        &mut self,
        now: u64,
        id: &Id,
        method: &str,
    ) -> Result<(), LocalError> {
        let error = self.dialect.method_not_found(method);
        self.respond_error(now, id, error)
    }

    /// Reports progress on the incoming request `id` (dialects that have progress messages).
    ///
    /// Progress is a state, not a log: while the request's previous report still waits in the
    /// outbox (the host has not taken it from [`Peer::poll_output`]), the new one replaces it
    /// there, at its place in the queue. So however fast a handler reports and however slowly
    /// the host writes, progress holds at most one frame per request in progress
    /// (`max_incoming`); the peer at the other end sees the newest report, and every report the
    /// host has taken is sent as it was.
    pub fn progress(&mut self, now: u64, id: &Id, progress: RawJson) -> Result<(), LocalError> {
        if !self.incoming.contains(id) {
            return Err(LocalError::UnknownId(id.clone()));
        }
        let body = self.encode(
            now,
            Outbound::Progress {
                id,
                progress: &progress,
            },
        )?;
        let frame = self.frame(&body);
        if let Some(&number) = self.queued_progress.get(id)
            && let Some(index) = number.checked_sub(self.taken_total)
            && let Some(queued) = self.outbox.get_mut(index as usize)
        {
            self.outbox_bytes = self.outbox_bytes - queued.len() + frame.len();
            *queued = frame;
            return Ok(());
        }
        self.queue_frame(frame);
        self.queued_progress
            .insert(id.clone(), self.queued_total - 1);
        Ok(())
    }

    /// Forgets the incoming request `id` without answering it, for protocols whose
    /// cancellation says the receiver should not respond (MCP `notifications/cancelled`).
    /// Without this an unanswered request would hold one of the `max_incoming` slots forever.
    ///
    /// A request of a batch whose answer the host writes itself (around the peer) must not be
    /// forgotten this way: see [`Peer::is_batched`].
    pub fn forget_incoming(&mut self, id: &Id) -> Result<(), LocalError> {
        self.take_incoming(id)?;
        if let Some(batch) = self.batches.of_request.remove(id) {
            self.batch_answered(batch, None);
        }
        Ok(())
    }

    /// Whether the incoming request `id` came in a batch, so its answer goes into the batch's
    /// array: answer it with [`Peer::respond`] or [`Peer::respond_error`], never by writing a
    /// line of one's own.
    pub fn is_batched(&self, id: &Id) -> bool {
        self.batches.of_request.contains_key(id)
    }

    fn take_incoming(&mut self, id: &Id) -> Result<(), LocalError> {
        self.queued_progress.remove(id);
        if self.incoming.remove(id) {
            Ok(())
        } else {
            Err(LocalError::UnknownId(id.clone()))
        }
    }

    /// Sends the answer `body` to request `id` (already taken from `incoming`): alone, or into
    /// its batch.
    fn answer(&mut self, id: &Id, body: Vec<u8>) {
        match self.batches.of_request.remove(id) {
            Some(batch) => self.batch_answered(batch, Some(body)),
            None => self.push_frame(&body),
        }
    }

    /// One request of `batch` is done (`None`: forgotten, no answer); the last one sends the
    /// array, if it holds anything.
    fn batch_answered(&mut self, batch: u64, body: Option<Vec<u8>>) {
        let Some(open) = self.batches.open.get_mut(&batch) else {
            return;
        };
        open.answers.extend(body);
        open.waiting -= 1;
        if open.waiting == 0
            && let Some(open) = self.batches.open.remove(&batch)
        {
            self.send_batch(open.answers);
        }
    }

    /// Writes the answers of a batch as one array (nothing when there are none: a batch of
    /// notifications is not answered).
    fn send_batch(&mut self, answers: Vec<Vec<u8>>) {
        if answers.is_empty() {
            return;
        }
        let mut array = Vec::new();
        write_batch_bodies(&answers, &mut array);
        self.push_frame(&array);
    }

    /// Stops waiting for call `id`: no event will come for it, and an answer that still arrives
    /// is counted and dropped. Cancelling twice, or an id that is not pending, is `UnknownId`.
    pub fn cancel(&mut self, now: u64, id: &Id) -> Result<(), LocalError> {
        if self.pending.remove(id).is_none() {
            return Err(LocalError::UnknownId(id.clone()));
        }
        self.stats.cancelled += 1;
        self.abandon(now, id.clone());
        Ok(())
    }

    fn abandon(&mut self, now: u64, id: Id) {
        if let Some(method) = self.config.cancel_notification.clone() {
            let params = RawJson::to_raw(&serde_json::json!({ "id": id })).ok();
            // A dialect without notifications simply cannot tell the peer; nothing is lost.
            let _ = self.send(
                now,
                Outbound::Notification {
                    method: &method,
                    params: params.as_ref(),
                },
            );
        }
        self.abandoned.insert(id);
    }

    fn send(&mut self, now: u64, message: Outbound<'_>) -> Result<(), LocalError> {
        let body = self.encode(now, message)?;
        self.push_frame(&body);
        Ok(())
    }

    /// The body of `message`, without framing.
    fn encode(&self, now: u64, message: Outbound<'_>) -> Result<Vec<u8>, LocalError> {
        let mut body = Vec::new();
        self.dialect.write(now, message, &mut body)?;
        Ok(body)
    }

    /// `body` with the stream's framing.
    fn frame(&self, body: &[u8]) -> Vec<u8> {
        match self.config.framing {
            Framing::Ndjson => {
                let mut f = Vec::with_capacity(body.len() + 1);
                encode_ndjson(body, &mut f);
                f
            }
            Framing::ContentLength => {
                let mut f = Vec::with_capacity(body.len() + 32);
                encode_content_length(body, &mut f);
                f
            }
        }
    }

    /// Frames `body` and queues it for the stream.
    fn push_frame(&mut self, body: &[u8]) {
        let frame = self.frame(body);
        self.queue_frame(frame);
    }

    /// Queues a framed `frame` for the stream.
    fn queue_frame(&mut self, frame: Vec<u8>) {
        self.outbox_bytes += frame.len();
        self.outbox.push_back(frame);
        self.queued_total += 1;
    }

    /// Takes bytes the stream delivered.
    pub fn handle_bytes(&mut self, now: u64, bytes: &[u8]) {
        // The decoder lends out frames while `self` handles them, so it steps out of `self` for
        // the duration (a decoder with no buffer costs nothing to make).
        let placeholder = Decoder::Ndjson(NdjsonDecoder::new(0));
        let mut decoder = std::mem::replace(&mut self.decoder, placeholder);
        match &mut decoder {
            Decoder::Ndjson(d) => d.decode(bytes, |frame| self.handle_decoded(now, frame)),
            Decoder::ContentLength(d) => {
                d.feed(bytes);
                while let Some(frame) = d.next_frame() {
                    self.handle_decoded(now, frame);
                }
            }
        }
        self.decoder = decoder;
    }

    fn handle_decoded(&mut self, now: u64, frame: Frame<'_>) {
        match frame {
            Frame::Message(body) => self.handle_frame(now, body),
            Frame::Error(e) => {
                self.stats.framing_errors += 1;
                self.peer_event(PeerEvent::Malformed {
                    reason: e.to_string(),
                });
            }
        }
    }

    fn handle_frame(&mut self, now: u64, body: &[u8]) {
        self.stats.frames_in += 1;
        // An unreadable, empty or oversized batch is one error, not an array (read says so).
        let items = match self.dialect.read(body, self.config.batch_limit) {
            Ok(items) => items,
            Err(invalid) => return self.handle_invalid(now, &invalid, None),
        };
        let batch = self.dialect.is_batch(body).then(|| {
            let batch = self.batches.next;
            self.batches.next += 1;
            // Counts itself as one waiting request until every element is read, so the array
            // cannot go out half-filled.
            let open = OpenBatch {
                waiting: 1,
                answers: Vec::new(),
            };
            self.batches.open.insert(batch, open);
            batch
        });
        for item in items {
            match item {
                Ok(message) => self.handle_message(now, message, batch),
                Err(invalid) => self.handle_invalid(now, &invalid, batch),
            }
        }
        if let Some(batch) = batch {
            self.batch_answered(batch, None);
        }
    }

    /// Sends an answer the peer makes itself (errors): alone, or into the open `batch`.
    fn send_answer(&mut self, now: u64, batch: Option<u64>, message: Outbound<'_>) {
        let Some(batch) = batch else {
            if self.queue_full() {
                self.stats.dropped += 1;
            } else {
                let _ = self.send(now, message);
            }
            return;
        };
        if let Ok(body) = self.encode(now, message)
            && let Some(open) = self.batches.open.get_mut(&batch)
        {
            open.answers.push(body);
        }
    }

    fn handle_invalid(&mut self, now: u64, invalid: &Invalid, batch: Option<u64>) {
        self.stats.malformed += 1;
        // An unreadable answer to one of our calls ends that call, typed, like any answer (and
        // is never dropped); one nobody waits for is counted as stray and reported.
        if let Invalid::Answer { id, reason } = invalid
            && let Some(p) = self.finish(id)
        {
            self.events.push_back(PeerEvent::Failed {
                id: id.clone(),
                method: p.method,
                user: p.user,
                error: CallError::Malformed(reason.clone()),
            });
            return;
        }
        if let Some((id, error)) = self.dialect.answer_invalid(invalid) {
            self.send_answer(
                now,
                batch,
                Outbound::Error {
                    id: &id,
                    error: &error,
                },
            );
        }
        self.peer_event(PeerEvent::Malformed {
            reason: invalid.to_string(),
        });
    }

    fn handle_message(&mut self, now: u64, message: Inbound, batch: Option<u64>) {
        match message {
            Inbound::Request { id, method, params } => {
                let refusal = if self.incoming.contains(&id) {
                    Some(self.dialect.duplicate_id())
                } else if self.incoming.len() >= self.config.max_incoming {
                    Some(RemoteError::new(
                        self.dialect.duplicate_id().code,
                        "too many requests in progress",
                    ))
                } else {
                    None
                };
                if let Some(error) = refusal {
                    self.stats.refused_requests += 1;
                    self.send_answer(
                        now,
                        batch,
                        Outbound::Error {
                            id: &id,
                            error: &error,
                        },
                    );
                    return;
                }
                if let Some(batch) = batch
                    && let Some(open) = self.batches.open.get_mut(&batch)
                {
                    open.waiting += 1;
                    self.batches.of_request.insert(id.clone(), batch);
                }
                self.incoming.insert(id.clone());
                self.events
                    .push_back(PeerEvent::Request { id, method, params });
            }
            Inbound::Notification { method, params } => {
                self.peer_event(PeerEvent::Notification { method, params });
            }
            Inbound::Result { id, result } => {
                if let Some(p) = self.finish(&id) {
                    self.events.push_back(PeerEvent::Response {
                        id,
                        method: p.method,
                        user: p.user,
                        result,
                    });
                }
            }
            Inbound::Error { id, error } => {
                if let Some(p) = self.finish(&id) {
                    self.events.push_back(PeerEvent::Failed {
                        id,
                        method: p.method,
                        user: p.user,
                        error: CallError::Remote(error),
                    });
                }
            }
            Inbound::Progress { id, progress } => {
                if let Some(p) = self.pending.get_mut(&id) {
                    p.deadline = now.saturating_add(p.timeout_ms).min(p.hard_deadline);
                    let (method, user) = (p.method.clone(), p.user);
                    self.peer_event(PeerEvent::Progress {
                        id,
                        method,
                        user,
                        progress,
                    });
                } else {
                    self.count_stray(&id);
                }
            }
        }
    }

    fn queue_full(&self) -> bool {
        self.events.len() + self.outbox.len() >= self.config.max_queued
    }

    /// Queues an event only the peer caused, unless `max_queued` outputs wait (then counts it).
    fn peer_event(&mut self, event: PeerEvent) {
        if self.queue_full() {
            self.stats.dropped += 1;
        } else {
            self.events.push_back(event);
        }
    }

    /// Removes a pending call that was answered; counts answers nobody waits for.
    fn finish(&mut self, id: &Id) -> Option<Pending> {
        let pending = self.pending.remove(id);
        if pending.is_none() {
            self.count_stray(id);
        }
        pending
    }

    fn count_stray(&mut self, id: &Id) {
        if self.abandoned.set.contains(id) {
            self.stats.late_responses += 1;
        } else {
            self.stats.unmatched_responses += 1;
        }
    }

    /// Fails the calls whose deadline passed. [`Peer::poll_output`] calls this too.
    pub fn handle_timeout(&mut self, now: u64) {
        let expired: Vec<Id> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let p = self.pending.remove(&id).expect("listed above");
            self.stats.timeouts += 1;
            self.abandon(now, id.clone());
            self.events.push_back(PeerEvent::Failed {
                id,
                method: p.method,
                user: p.user,
                error: CallError::Timeout,
            });
        }
    }

    /// The next thing to do: an event, bytes to write, or the instant to wake up at. Call it
    /// after every input until it returns [`Output::Timeout`].
    pub fn poll_output(&mut self, now: u64) -> Output {
        self.handle_timeout(now);
        if let Some(event) = self.events.pop_front() {
            return Output::Event(event);
        }
        if let Some(frame) = self.outbox.pop_front() {
            self.taken_total += 1;
            self.outbox_bytes -= frame.len();
            self.stats.frames_out += 1;
            return Output::Transmit(frame);
        }
        let next = self.pending.values().map(|p| p.deadline).min();
        Output::Timeout(next.unwrap_or(now.saturating_add(IDLE_WAIT_MS)).max(now))
    }

    /// Whether call `id` is still waiting for its answer.
    pub fn is_pending(&self, id: &Id) -> bool {
        self.pending.contains_key(id)
    }

    /// Counters and gauges.
    pub fn stats(&self) -> PeerStats {
        let mut stats = self.stats;
        stats.pending = self.pending.len() as u64;
        stats.incoming = self.incoming.len() as u64;
        let decoder = match &self.decoder {
            Decoder::Ndjson(d) => d.buffered(),
            Decoder::ContentLength(d) => d.buffered(),
        };
        stats.bytes_buffered = (decoder + self.outbox_bytes) as u64;
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::dialect::{Code, JsonRpc2, Sidecar, SidecarErrorCode};
    use proptest::prelude::*;

    fn raw(json: &str) -> RawJson {
        RawJson::from_string(json.to_owned()).unwrap()
    }

    fn drain<D: Dialect>(peer: &mut Peer<D>, now: u64) -> (Vec<String>, Vec<PeerEvent>) {
        let mut sent = Vec::new();
        let mut events = Vec::new();
        loop {
            match peer.poll_output(now) {
                Output::Transmit(b) => sent.push(String::from_utf8(b).unwrap()),
                Output::Event(e) => events.push(e),
                Output::Timeout(_) => return (sent, events),
            }
        }
    }

    fn sidecar() -> Peer<Sidecar> {
        let config = PeerConfig {
            timeouts: TimeoutPolicy::sidecar(),
            ..PeerConfig::default()
        };
        Peer::new(Sidecar, config, 42)
    }

    #[test]
    fn calls_the_peer_could_not_take_are_refused_before_they_are_sent() {
        let refused = |r: Result<(), LocalError>| match r {
            Err(LocalError::Write(WriteError::InvalidValue { what, .. })) => what,
            other => panic!("{other:?}"),
        };
        let mut client = Peer::new(JsonRpc2, PeerConfig::default(), 1);
        let what = refused(client.call(0, "", None, 0).map(|_| ()));
        assert!(what.contains("empty method"), "{what}");
        let what = refused(client.call(0, "rpc.discover", None, 0).map(|_| ()));
        assert!(what.contains("reserved"), "{what}");
        let what = refused(client.notify(0, "rpc.x", None));
        assert!(what.contains("reserved"), "{what}");
        assert!(refused(client.notify(0, "", None)).contains("empty method"));
        let what = refused(client.call_with_id(0, Id::Null, "m", None, 0));
        assert!(what.contains("null id"), "{what}");
        assert_eq!(client.stats().pending, 0);
        assert!(drain(&mut client, 0).0.is_empty(), "nothing sent");
        // A name that only contains "rpc." is an ordinary name; the sidecar reserves none.
        client.call(0, "x.rpc.y", None, 0).unwrap();
        sidecar().call(0, "rpc.x", Some(raw("{}")), 0).unwrap();
        assert!(refused(sidecar().call(0, "", Some(raw("{}")), 0).map(|_| ())).contains("empty"));
    }

    #[test]
    fn sidecar_concurrency_example_answers_out_of_order() {
        let mut rust = sidecar();
        let embed = rust
            .call(0, "inference.embed", Some(raw("{\"text\":\"hi\"}")), 1)
            .unwrap();
        let complete = rust
            .call(0, "inference.complete", Some(raw("{\"prompt\":\"x\"}")), 2)
            .unwrap();
        let (sent, _) = drain(&mut rust, 0);
        assert_eq!(sent.len(), 2);
        assert!(sent[0].starts_with(&format!(
            "{{\"id\":{}",
            serde_json::to_string(&embed).unwrap()
        )));
        let answer = |id: &Id, body: &str| {
            format!(
                "{{\"id\":{},\"result\":{body}}}\n",
                serde_json::to_string(id).unwrap()
            )
        };
        rust.handle_bytes(10, answer(&complete, "{\"text\":\"...\"}").as_bytes());
        rust.handle_bytes(11, answer(&embed, "{\"embedding\":[0.1]}").as_bytes());
        let (_, events) = drain(&mut rust, 11);
        let users: Vec<u64> = events
            .iter()
            .map(|e| match e {
                PeerEvent::Response { user, .. } => *user,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(users, vec![2, 1]);
        assert_eq!(rust.stats().pending, 0);
    }

    #[test]
    fn a_forgotten_request_frees_its_slot_and_cannot_be_answered() {
        let config = PeerConfig {
            max_incoming: 1,
            ..PeerConfig::default()
        };
        let mut server = Peer::new(JsonRpc2, config, 1);
        server.handle_bytes(0, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"slow\"}\n");
        let (_, events) = drain(&mut server, 0);
        assert!(matches!(&events[..], [PeerEvent::Request { .. }]));
        assert_eq!(server.stats().incoming, 1);

        server.forget_incoming(&Id::Number(1)).unwrap();
        assert_eq!(server.stats().incoming, 0);
        let (sent, _) = drain(&mut server, 0);
        assert!(sent.is_empty(), "forgetting sends nothing");
        assert_eq!(
            server.respond(0, &Id::Number(1), raw("{}")),
            Err(LocalError::UnknownId(Id::Number(1)))
        );
        assert_eq!(
            server.forget_incoming(&Id::Number(1)),
            Err(LocalError::UnknownId(Id::Number(1)))
        );
        // The slot is free again: a second request is accepted, not refused.
        server.handle_bytes(1, b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"slow\"}\n");
        let (sent, events) = drain(&mut server, 1);
        assert!(sent.is_empty(), "{sent:?}");
        assert!(matches!(&events[..], [PeerEvent::Request { .. }]));
    }

    /// A sidecar peer configured without timeouts (what the bindings do with a host's JSON or
    /// keyword options) has the sidecar's table; the other dialects keep the flat 30 s; a
    /// policy can be named, and a bad one says what is valid.
    #[test]
    fn the_dialect_decides_the_default_timeouts() {
        use serde_json::json;
        let sidecar_config =
            PeerConfig::from_json_for(&Sidecar, json!({"max_pending": 8})).unwrap();
        assert_eq!(sidecar_config.timeouts, TimeoutPolicy::sidecar());
        assert_eq!(sidecar_config.max_pending, 8);
        assert_eq!(
            PeerConfig::for_dialect(&Sidecar).timeouts,
            TimeoutPolicy::sidecar()
        );
        assert_eq!(
            PeerConfig::from_json_for(&Sidecar, serde_json::Value::Null).unwrap(),
            PeerConfig::for_dialect(&Sidecar)
        );
        assert_eq!(
            PeerConfig::from_json_for(&JsonRpc2, json!({}))
                .unwrap()
                .timeouts,
            TimeoutPolicy::uniform(30_000)
        );
        // The host's own choice wins, by name or spelt out.
        for (given, want) in [
            (json!("default"), TimeoutPolicy::default()),
            (json!("sidecar"), TimeoutPolicy::sidecar()),
            (
                json!({"default_timeout_ms": 5_000}),
                TimeoutPolicy::uniform(5_000),
            ),
        ] {
            let config = PeerConfig::from_json_for(&Sidecar, json!({ "timeouts": given })).unwrap();
            assert_eq!(config.timeouts, want);
        }
        assert_eq!(
            PeerConfig::from_json_for(&JsonRpc2, json!({"timeouts": "sidecar"}))
                .unwrap()
                .timeouts,
            TimeoutPolicy::sidecar()
        );
        for bad in [json!("sidecars"), json!(5), json!({"default_timeout": 1})] {
            let err = PeerConfig::from_json_for(&Sidecar, json!({ "timeouts": bad }))
                .unwrap_err()
                .to_string();
            let names_the_choices = err.contains("\"sidecar\"") && err.contains("\"default\"");
            let names_the_fields = err.contains("default_timeout_ms");
            assert!(names_the_choices || names_the_fields, "{bad}: {err}");
        }
        // The configured peer follows the table: training.start lives 300 s, not 30 s.
        let mut rust = Peer::new(Sidecar, sidecar_config, 1);
        rust.call(0, "training.start", None, 1).unwrap();
        drain(&mut rust, 0);
        assert_eq!(rust.poll_output(0), Output::Timeout(300_000));
    }

    #[test]
    fn each_timeout_in_the_sidecar_policy() {
        for (method, secs) in [
            ("health.ping", 10),
            ("inference.embed", 30),
            ("inference.complete", 120),
            ("inference.plan", 120),
            ("training.start", 300),
            ("model.load", 60),
            ("lifecycle.shutdown", 30),
        ] {
            let mut rust = sidecar();
            let id = rust.call(1_000, method, None, 9).unwrap();
            drain(&mut rust, 1_000);
            let deadline = 1_000 + secs * 1000;
            assert_eq!(
                rust.poll_output(1_000),
                Output::Timeout(deadline),
                "{method}"
            );
            assert!(drain(&mut rust, deadline - 1).1.is_empty());
            let (_, events) = drain(&mut rust, deadline);
            assert_eq!(
                events,
                vec![PeerEvent::Failed {
                    id: id.clone(),
                    method: method.into(),
                    user: 9,
                    error: CallError::Timeout
                }]
            );
            // A late answer is counted and dropped.
            rust.handle_bytes(
                deadline + 1,
                format!(
                    "{{\"id\":{},\"result\":{{}}}}\n",
                    serde_json::to_string(&id).unwrap()
                )
                .as_bytes(),
            );
            assert!(drain(&mut rust, deadline + 1).1.is_empty());
            assert_eq!(rust.stats().late_responses, 1);
        }
    }

    #[test]
    fn progress_extends_up_to_the_hard_maximum() {
        let mut rust = sidecar();
        let id = rust.call(0, "training.start", None, 0).unwrap();
        drain(&mut rust, 0);
        let progress = format!(
            "{{\"id\":{},\"progress\":{{\"epoch\":1}}}}\n",
            serde_json::to_string(&id).unwrap()
        );
        let mut now = 0;
        // Progress every 200 s keeps it alive...
        for _ in 0..14 {
            now += 200_000;
            rust.handle_bytes(now, progress.as_bytes());
            let (_, events) = drain(&mut rust, now);
            assert!(
                matches!(events.as_slice(), [PeerEvent::Progress { .. }]),
                "{now}: {events:?}"
            );
        }
        // ...but never past 10 × 300 s: the next deadline is the hard one, not now + 300 s.
        assert_eq!(now, 2_800_000);
        assert_eq!(rust.poll_output(now), Output::Timeout(3_000_000));
        let (_, events) = drain(&mut rust, 3_000_000);
        assert!(matches!(
            events.as_slice(),
            [PeerEvent::Failed {
                error: CallError::Timeout,
                ..
            }]
        ));
    }

    #[test]
    fn cancellation_semantics() {
        let mut client = Peer::new(
            JsonRpc2,
            PeerConfig {
                cancel_notification: Some("$/cancelRequest".into()),
                ..PeerConfig::default()
            },
            1,
        );
        let id = client.call(0, "exec.wait", None, 0).unwrap();
        drain(&mut client, 0);
        client.cancel(1, &id).unwrap();
        assert_eq!(
            client.cancel(1, &id),
            Err(LocalError::UnknownId(id.clone())),
            "double cancel"
        );
        assert_eq!(
            client.cancel(1, &Id::Number(99)),
            Err(LocalError::UnknownId(Id::Number(99)))
        );
        let (sent, events) = drain(&mut client, 1);
        assert_eq!(
            sent,
            vec!["{\"jsonrpc\":\"2.0\",\"method\":\"$/cancelRequest\",\"params\":{\"id\":1}}\n"]
        );
        assert!(events.is_empty());
        client.handle_bytes(2, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":0}\n");
        client.handle_bytes(2, b"{\"jsonrpc\":\"2.0\",\"id\":77,\"result\":0}\n");
        assert!(drain(&mut client, 2).1.is_empty(), "dropped");
        let stats = client.stats();
        assert_eq!(
            (
                stats.late_responses,
                stats.unmatched_responses,
                stats.pending
            ),
            (1, 1, 0)
        );
    }

    #[test]
    fn duplicate_ids_are_refused_both_ways() {
        let mut a = Peer::new(JsonRpc2, PeerConfig::default(), 1);
        a.call_with_id(0, Id::String("x".into()), "m", None, 0)
            .unwrap();
        assert_eq!(
            a.call_with_id(0, Id::String("x".into()), "m", None, 0),
            Err(LocalError::DuplicateId(Id::String("x".into())))
        );
        let mut b = Peer::new(JsonRpc2, PeerConfig::default(), 2);
        b.handle_bytes(0, b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"m\"}\n{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"m\"}\n");
        let (sent, events) = drain(&mut b, 0);
        assert_eq!(events.len(), 1);
        assert!(sent[0].contains("-32600"), "{sent:?}");
        b.respond(1, &Id::Number(5), raw("true")).unwrap();
        assert_eq!(
            b.respond(1, &Id::Number(5), raw("true")),
            Err(LocalError::UnknownId(Id::Number(5)))
        );
    }

    #[test]
    fn unknown_methods_and_garbage_are_answered() {
        let mut server = Peer::new(JsonRpc2, PeerConfig::default(), 1);
        server.handle_bytes(
            0,
            b"{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"nope\"}\nnot json\n[]\n",
        );
        let (sent, events) = drain(&mut server, 0);
        let PeerEvent::Request { id, method, .. } = &events[0] else {
            panic!("{events:?}")
        };
        server
            .respond_method_not_found(0, &id.clone(), &method.clone())
            .unwrap();
        let (more, _) = drain(&mut server, 0);
        assert!(
            sent[0].contains("-32700") && sent[0].contains("\"id\":null"),
            "{sent:?}"
        );
        assert!(sent[1].contains("-32600"));
        assert!(more[0].contains("-32601") && more[0].contains("\"id\":\"q\""));
        assert_eq!(server.stats().malformed, 2);
    }

    /// A request whose id is over the limit is answered -32600 with id null and never reaches
    /// the host, so nothing holds the id (40 such ids of 4 MiB once held 213 MB in rexd); a
    /// host cannot make such a call either.
    #[test]
    fn over_long_ids_are_refused_before_anything_holds_them() {
        let mut server = Peer::new(JsonRpc2, PeerConfig::default(), 1);
        let huge = "x".repeat(4 << 20);
        for _ in 0..3 {
            server.handle_bytes(
                0,
                format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{huge}\",\"method\":\"exec.wait\"}}\n")
                    .as_bytes(),
            );
        }
        let (sent, events) = drain(&mut server, 0);
        let reached = requests(&events).len();
        assert_eq!(reached, 0, "{reached} requests reached the host");
        let sent = sent_values(&sent);
        assert_eq!(sent.len(), 3);
        for answer in &sent {
            assert_eq!(answer["id"], serde_json::Value::Null, "{answer}");
            assert_eq!(answer["error"]["code"], -32600, "{answer}");
        }
        assert_eq!(server.stats().incoming, 0);
        // 256 bytes of JSON (the quotes included) is still an id.
        let at_limit = Id::String("y".repeat(254));
        server.handle_bytes(
            1,
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"m\"}}\n",
                serde_json::to_string(&at_limit).unwrap()
            )
            .as_bytes(),
        );
        let (_, events) = drain(&mut server, 1);
        assert_eq!(requests(&events), [(at_limit, "m".to_owned())]);
        // Our own calls keep to the same rule.
        let mut client = Peer::new(JsonRpc2, PeerConfig::default(), 1);
        let long = Id::String("z".repeat(255));
        assert!(matches!(
            client.call_with_id(0, long, "m", None, 0),
            Err(LocalError::Write(WriteError::InvalidValue { .. }))
        ));
        assert_eq!(client.stats().pending, 0);
        // The sidecar dialect has no null id: an over-long one is dropped unanswered.
        let mut rust = sidecar();
        rust.handle_bytes(
            0,
            format!("{{\"id\":\"{huge}\",\"method\":\"health.ping\",\"params\":{{}}}}\n")
                .as_bytes(),
        );
        let (sent, events) = drain(&mut rust, 0);
        assert!(sent.is_empty() && requests(&events).is_empty(), "{sent:?}");
        assert_eq!(rust.stats().malformed, 1);
    }

    /// The JSON values of the lines `peer` sent.
    fn sent_values(sent: &[String]) -> Vec<serde_json::Value> {
        sent.iter()
            .map(|line| {
                assert!(line.ends_with('\n'), "{line:?}");
                serde_json::from_str(line).unwrap()
            })
            .collect()
    }

    /// The requests among `events`: (id, method).
    fn requests(events: &[PeerEvent]) -> Vec<(Id, String)> {
        events
            .iter()
            .filter_map(|e| match e {
                PeerEvent::Request { id, method, .. } => Some((id.clone(), method.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_mixed_batch_is_answered_with_one_array() {
        let mut server = Peer::new(JsonRpc2, PeerConfig::default(), 1);
        // JSON-RPC 2.0's own §7 example: two requests, a notification, an invalid element, a
        // request for an unknown method, another request, and a second notification.
        server.handle_bytes(
            0,
            br#"[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method":"notify_hello","params":[7]},{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"2"},{"foo":"boo"},{"jsonrpc":"2.0","method":"foo.get","params":{"name":"myself"},"id":"5"},{"jsonrpc":"2.0","method":"get_data","id":"9"}]
"#,
        );
        let (sent, events) = drain(&mut server, 0);
        // Nothing is written before the requests are answered.
        assert!(sent.is_empty(), "{sent:?}");
        let calls = requests(&events);
        assert_eq!(calls.len(), 4);
        assert!(events.iter().any(
            |e| matches!(e, PeerEvent::Notification { method, .. } if method == "notify_hello")
        ));
        for (id, method) in &calls {
            match method.as_str() {
                "sum" => server.respond(1, id, raw("7")).unwrap(),
                "subtract" => server.respond(1, id, raw("19")).unwrap(),
                "get_data" => server.respond(1, id, raw("[\"hello\",5]")).unwrap(),
                _ => server.respond_method_not_found(1, id, method).unwrap(),
            }
            // Still nothing until the last answer.
            if id != &calls.last().unwrap().0 {
                assert!(drain(&mut server, 1).0.is_empty());
            }
        }
        let (sent, _) = drain(&mut server, 1);
        assert_eq!(sent.len(), 1, "{sent:?}");
        let array = sent_values(&sent).remove(0);
        let answers = array.as_array().expect("one array");
        assert_eq!(answers.len(), 5, "{array}");
        let by_id = |id: serde_json::Value| {
            answers
                .iter()
                .find(|a| a["id"] == id)
                .unwrap_or_else(|| panic!("no answer for {id} in {array}"))
        };
        assert_eq!(by_id("1".into())["result"], 7);
        assert_eq!(by_id("2".into())["result"], 19);
        assert_eq!(by_id("9".into())["result"], serde_json::json!(["hello", 5]));
        assert_eq!(by_id("5".into())["error"]["code"], -32601);
        assert_eq!(by_id(serde_json::Value::Null)["error"]["code"], -32600);
        assert!(answers.iter().all(|a| a["jsonrpc"] == "2.0"));
        assert_eq!(server.stats().incoming, 0);
    }

    #[test]
    fn a_batch_of_notifications_gets_no_answer() {
        let mut server = Peer::new(JsonRpc2, PeerConfig::default(), 1);
        server.handle_bytes(
            0,
            b"[{\"jsonrpc\":\"2.0\",\"method\":\"a\"},{\"jsonrpc\":\"2.0\",\"method\":\"b\",\"params\":[1]}]\n",
        );
        let (sent, events) = drain(&mut server, 0);
        assert!(sent.is_empty(), "{sent:?}");
        let methods: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                PeerEvent::Notification { method, .. } => Some(method.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(methods, ["a", "b"]);
        // A request after it is answered on its own, as usual.
        server.handle_bytes(1, b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"c\"}\n");
        let (_, events) = drain(&mut server, 1);
        server
            .respond(1, &requests(&events)[0].0, raw("1"))
            .unwrap();
        let sent = sent_values(&drain(&mut server, 1).0);
        assert_eq!(
            sent,
            [serde_json::json!({"jsonrpc":"2.0","id":3,"result":1})]
        );
    }

    #[test]
    fn an_empty_batch_is_one_error_object_not_an_array() {
        let mut server = Peer::new(JsonRpc2, PeerConfig::default(), 1);
        server.handle_bytes(0, b"[]\n  [ ]\n");
        let sent = sent_values(&drain(&mut server, 0).0);
        assert_eq!(sent.len(), 2);
        for answer in sent {
            assert!(answer.is_object(), "{answer}");
            assert_eq!(
                (answer["id"].clone(), answer["error"]["code"].clone()),
                (serde_json::Value::Null, (-32600).into())
            );
        }
    }

    #[test]
    fn invalid_elements_get_their_own_error_objects_in_the_array() {
        let mut server = Peer::new(JsonRpc2, PeerConfig::default(), 1);
        server.handle_bytes(0, b"[1,2,3]\n");
        let sent = sent_values(&drain(&mut server, 0).0);
        assert_eq!(sent.len(), 1);
        let answers = sent[0].as_array().expect("an array");
        assert_eq!(answers.len(), 3);
        for a in answers {
            assert_eq!(a["error"]["code"], -32600);
            assert_eq!(a["id"], serde_json::Value::Null);
        }
        // A valid request beside an invalid one and a duplicate id: its answer joins theirs.
        server.handle_bytes(
            1,
            b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"},{\"jsonrpc\":\"1.0\",\"id\":2,\"method\":\"m\"},{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}]\n",
        );
        let (sent, events) = drain(&mut server, 1);
        assert!(sent.is_empty(), "{sent:?}");
        assert_eq!(requests(&events), [(Id::Number(1), "m".to_owned())]);
        server.respond(2, &Id::Number(1), raw("\"ok\"")).unwrap();
        let sent = sent_values(&drain(&mut server, 2).0);
        assert_eq!(
            sent,
            [serde_json::json!([
                {"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"Invalid Request","data":"invalid request: \"jsonrpc\" must be \"2.0\""}},
                {"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: id already in use"}},
                {"jsonrpc":"2.0","id":1,"result":"ok"},
            ])]
        );
        assert_eq!(server.stats().malformed, 4);
    }

    #[test]
    fn a_batch_waits_for_its_deferred_answer() {
        let mut server = Peer::new(JsonRpc2, PeerConfig::default(), 1);
        server.handle_bytes(
            0,
            b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"exec.wait\"},{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"fs.stat\"},{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"gone\"}]\n",
        );
        let (_, events) = drain(&mut server, 0);
        assert_eq!(requests(&events).len(), 3);
        assert!(server.is_batched(&Id::Number(1)));
        server
            .respond(0, &Id::Number(2), raw("{\"size\":1}"))
            .unwrap();
        // A cancelled request leaves the batch without an answer (MCP's rule).
        server.forget_incoming(&Id::Number(3)).unwrap();
        // Other traffic goes out meanwhile; the batch does not.
        server.notify(5, "exec.stdout", None).unwrap();
        let sent = sent_values(&drain(&mut server, 5).0);
        assert_eq!(
            sent,
            [serde_json::json!({"jsonrpc":"2.0","method":"exec.stdout"})]
        );
        server
            .respond_error(
                900,
                &Id::Number(1),
                RemoteError::new(Code::Number(-32003), "exited"),
            )
            .unwrap();
        let sent = sent_values(&drain(&mut server, 900).0);
        assert_eq!(
            sent,
            [serde_json::json!([
                {"jsonrpc":"2.0","id":2,"result":{"size":1}},
                {"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"exited"}},
            ])]
        );
        assert!(!server.is_batched(&Id::Number(1)));
        assert_eq!(
            server.respond(900, &Id::Number(1), raw("1")),
            Err(LocalError::UnknownId(Id::Number(1)))
        );
        // A batch whose only request is forgotten sends nothing.
        server.handle_bytes(901, b"[{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"m\"}]\n");
        drain(&mut server, 901);
        server.forget_incoming(&Id::Number(4)).unwrap();
        assert!(drain(&mut server, 901).0.is_empty());
    }

    #[test]
    fn an_oversized_batch_is_refused_with_one_error() {
        let config = PeerConfig {
            batch_limit: 2,
            ..PeerConfig::default()
        };
        let mut server = Peer::new(JsonRpc2, config, 1);
        let request = |id: u32| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"m\"}}");
        server.handle_bytes(
            0,
            format!("[{},{},{}]\n", request(1), request(2), request(3)).as_bytes(),
        );
        let (sent, events) = drain(&mut server, 0);
        assert!(requests(&events).is_empty(), "nothing of it runs");
        let sent = sent_values(&sent);
        assert_eq!(sent.len(), 1);
        assert!(sent[0].is_object(), "{}", sent[0]);
        assert_eq!(sent[0]["error"]["code"], -32600);
        assert_eq!(sent[0]["id"], serde_json::Value::Null);
        // At the limit it is a batch like any other.
        server.handle_bytes(1, format!("[{},{}]\n", request(1), request(2)).as_bytes());
        let (_, events) = drain(&mut server, 1);
        for (id, _) in requests(&events) {
            server.respond(1, &id, raw("0")).unwrap();
        }
        let sent = sent_values(&drain(&mut server, 1).0);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn other_dialects_have_no_batches() {
        let mut rust = sidecar();
        rust.handle_bytes(0, b"[{\"id\":\"a\",\"method\":\"health.ping\"}]\n");
        let (_, events) = drain(&mut rust, 0);
        assert!(requests(&events).is_empty());
        assert!(!rust.is_batched(&Id::String("a".into())));
    }

    #[test]
    fn sidecar_errors_and_content_length_framing() {
        let mut rust = Peer::new(
            Sidecar,
            PeerConfig {
                framing: Framing::ContentLength,
                ..PeerConfig::default()
            },
            3,
        );
        let id = rust
            .call(0, "model.load", Some(raw("{\"model_id\":\"m\"}")), 4)
            .unwrap();
        let (sent, _) = drain(&mut rust, 0);
        assert!(sent[0].starts_with("Content-Length: "));
        let body = format!(
            "{{\"id\":{},\"error\":{{\"code\":\"MODEL_NOT_FOUND\",\"message\":\"no\"}}}}",
            serde_json::to_string(&id).unwrap()
        );
        rust.handle_bytes(
            1,
            format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes(),
        );
        let (_, events) = drain(&mut rust, 1);
        assert_eq!(
            events,
            vec![PeerEvent::Failed {
                id,
                method: "model.load".into(),
                user: 4,
                error: CallError::Remote(RemoteError::new(
                    SidecarErrorCode::ModelNotFound.code(),
                    "no"
                ))
            }]
        );
        assert!(matches!(
            SidecarErrorCode::ModelNotFound.code(),
            Code::Name(_)
        ));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Call(u8),
        Answer(u8),
        Progress(u8),
        Cancel(u8),
        Advance(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            any::<u8>().prop_map(Op::Call),
            any::<u8>().prop_map(Op::Answer),
            any::<u8>().prop_map(Op::Progress),
            any::<u8>().prop_map(Op::Cancel),
            (0u32..400_000).prop_map(Op::Advance),
        ]
    }

    proptest! {
        /// Random interleavings of calls, answers, progress, cancels and time: every call ends in
        /// exactly one event or a cancel, and nothing stays in the pending table at the end.
        #[test]
        fn pending_table_never_leaks(ops in proptest::collection::vec(op(), 0..80)) {
            let mut rust = sidecar();
            let mut now = 0u64;
            let mut ids: Vec<Id> = Vec::new();
            let mut ended = 0usize;
            let mut cancelled = 0usize;
            for op in ops {
                match op {
                    Op::Call(m) => {
                        let method = ["health.ping", "training.start", "model.load", "x"][usize::from(m) % 4];
                        ids.push(rust.call(now, method, None, 0).unwrap());
                    }
                    Op::Answer(k) | Op::Progress(k) if !ids.is_empty() => {
                        let id = &ids[usize::from(k) % ids.len()];
                        let body = if matches!(op, Op::Answer(_)) { "\"result\":{}" } else { "\"progress\":{}" };
                        rust.handle_bytes(now, format!("{{\"id\":{},{body}}}\n", serde_json::to_string(id).unwrap()).as_bytes());
                    }
                    Op::Cancel(k) if !ids.is_empty() => {
                        let ok = rust.cancel(now, &ids[usize::from(k) % ids.len()]).is_ok();
                        cancelled += usize::from(ok);
                    }
                    Op::Advance(ms) => now += u64::from(ms),
                    _ => {}
                }
                let (_, events) = drain(&mut rust, now);
                ended += events.iter().filter(|e| matches!(e, PeerEvent::Response { .. } | PeerEvent::Failed { .. })).count();
            }
            // Far in the future every call has ended one way or another.
            let (_, events) = drain(&mut rust, now + 10_000_000);
            ended += events.iter().filter(|e| matches!(e, PeerEvent::Response { .. } | PeerEvent::Failed { .. })).count();
            prop_assert_eq!(rust.stats().pending, 0);
            prop_assert_eq!(ended + cancelled, ids.len());
        }
    }
}
