//! `deskwire.oa1.MultiDesk`: many desks over one IRC connection (the core's `oa1::MultiDesk`),
//! one per channel, with channel chat and membership beside OA1 for a host that asks.

use deskwire::oa1::chat::{ChatKind, ChatMessage};
use deskwire::oa1::{self as core, ConfigError, MultiOutput};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::convert::{self, Utf8Arg, to_py};
use crate::errors::{local, raise};
use crate::oa1::{args_error, args_json, bulk, connection_event, os_seed, remote_bash_timeout};
use crate::slot::Slot;

/// A refused desk: a channel carried already is `LocalError` (`duplicate_channel`), the rest
/// `LocalError` (`invalid_config`), as `Desk(...)` raises it.
fn config_error(e: ConfigError) -> PyErr {
    match e {
        ConfigError::DuplicateChannel(channel) => local(
            "duplicate_channel",
            format!("{channel} is already one of this connection's channels"),
        ),
        ConfigError::Session(deskwire::irc::SessionError::Closed) => {
            raise(core::LocalError::Closed)
        }
        other => raise(core::LocalError::from(other)),
    }
}

/// `UnknownChannelError` for a channel the connection does not carry.
fn unknown(channel: &str) -> PyErr {
    raise(core::LocalError::UnknownChannel(channel.to_owned()))
}

/// A chat message as `oa1.ChatMessage`.
fn chat_message(py: Python<'_>, message: ChatMessage) -> PyResult<Bound<'_, PyAny>> {
    let fields = PyDict::new(py);
    fields.set_item("channel", message.channel)?;
    fields.set_item("sender", message.sender)?;
    let kind = match message.kind {
        ChatKind::Privmsg => "privmsg",
        ChatKind::Notice => "notice",
        ChatKind::Action => "action",
    };
    fields.set_item("kind", kind)?;
    fields.set_item("text", message.text)?;
    let tags = PyDict::new(py);
    for (key, value) in message.tags {
        tags.set_item(key, value)?;
    }
    fields.set_item("tags", tags)?;
    convert::event(py, "oa1", "chat_message", &fields)
}

/// A membership change as its `oa1.Member*` dataclass: the serde shape is tagged by `kind`,
/// which picks the class; the other fields are its own.
fn membership(py: Python<'_>, event: core::chat::MembershipEvent) -> PyResult<Bound<'_, PyAny>> {
    let value = to_py(py, &event)?;
    let fields = value.cast_into::<PyDict>()?;
    let kind = fields
        .get_item("kind")?
        .ok_or_else(|| local("unknown_event", "a membership event without its kind"))?
        .extract::<String>()?;
    fields.del_item("kind")?;
    convert::event(py, "membership", &kind, &fields)
}

/// A `MultiOutput` event (not `Transmit` or `Timeout`) as its Python object: an event of a
/// channel (or of the connection) as `oa1.ChannelEvent`, chat as `oa1.ChatMessage`, a
/// membership change as `oa1.Member*`. `None` for device-code discovery, which a desk has not.
fn multi_event(
    py: Python<'_>,
    output: MultiOutput,
    text: bool,
) -> PyResult<Option<Bound<'_, PyAny>>> {
    Ok(Some(match output {
        MultiOutput::Event { channel, event } => {
            let fields = PyDict::new(py);
            fields.set_item("channel", channel)?;
            fields.set_item("event", connection_event(py, event, text)?)?;
            convert::event(py, "oa1", "channel_event", &fields)?
        }
        MultiOutput::Chat(message) => chat_message(py, message)?,
        MultiOutput::Membership(event) => membership(py, event)?,
        _ => return Ok(None),
    }))
}

/// The counters when the engine was closed: the IRC session's, and each desk's.
type LastStats = (deskwire::irc::SessionStats, Vec<(String, core::Stats)>);

/// Many desks on one IRC connection, one per channel: each with its own remote, request ids,
/// timeouts and counters, added and removed at run time. The channels share the connection's
/// flood pacing, in turns, so one channel's long answer does not hold back another's short one.
///
/// `MultiDesk("npcs", seed=None, now_ms=0, chat=False, membership=False,
/// oa1={"request_timeout_ms": 60000}, session={"password": "..."})`: `oa1` holds what every desk
/// is made with (its `channel` and `allowed_sender` come from `add_desk`), `session` the IRC
/// login, in the shape of the core's `ConnectionConfig`. A bad nick raises `LocalError`
/// (`invalid_config`).
///
/// `chat=True` hands out every `PRIVMSG`, `NOTICE` and `ACTION` of a desk channel that is not
/// OA1 as `ChatMessage`; `membership=True` every join, part, kick, quit, nick change and `NAMES`
/// list of a desk channel as `MemberJoined`, ...; both in the order their lines came, at most
/// 1024 waiting (the oldest dropped, counted in `chat_dropped`). `text=False` gives each whole
/// answer as `ResponseBytes`, its UTF-8 `bytes`, without making a `str` of it.
///
/// `poll_output` and `drain` give each event of a channel as `ChannelEvent(channel, event)`
/// (`channel` `None` for the connection's own: registration, the end of the link).
#[pyclass(module = "deskwire.oa1", name = "MultiDesk")]
pub struct MultiDesk {
    engine: Slot<core::MultiDesk>,
    /// Whole messages as `str` (`False`: UTF-8 `bytes`).
    text: bool,
    /// The connection's config as given, for desks added with settings of their own.
    options: serde_json::Map<String, serde_json::Value>,
    nick: String,
    /// The counters when closed.
    last: std::sync::Mutex<Option<LastStats>>,
}

impl MultiDesk {
    fn with<R>(&self, f: impl FnOnce(&mut core::MultiDesk) -> R) -> PyResult<R> {
        self.engine.with(f)
    }

    /// Runs `f` on the engine when it carries `channel`, else raises `UnknownChannelError`.
    fn on<R>(
        &self,
        channel: &str,
        f: impl FnOnce(&mut core::MultiDesk) -> Option<R>,
    ) -> PyResult<R> {
        self.with(f)?.ok_or_else(|| unknown(channel))
    }

    /// The config of a desk in `channel` with remote `remote`: the connection's `oa1` settings
    /// with `overrides` on top, read the way the connection's own were.
    fn desk_config(
        &self,
        channel: &str,
        remote: &str,
        overrides: &Bound<'_, PyDict>,
    ) -> PyResult<core::Config> {
        let overrides: serde_json::Map<String, serde_json::Value> =
            convert::from_py("desk config", overrides.as_any())?;
        let mut json = self.options.clone();
        let mut oa1 = match json.remove("oa1") {
            Some(serde_json::Value::Object(oa1)) => oa1,
            _ => serde_json::Map::new(),
        };
        oa1.extend(overrides);
        oa1.insert("allowed_sender".into(), remote.into());
        json.insert("oa1".into(), oa1.into());
        json.insert("nick".into(), self.nick.clone().into());
        json.insert("channel".into(), channel.into());
        let config =
            core::ConnectionConfig::from_json(&serde_json::Value::Object(json).to_string())
                .map_err(|e| local("invalid_value", format!("desk config: {e}")))?;
        Ok(config.oa1)
    }
}

#[pymethods]
impl MultiDesk {
    #[new]
    #[pyo3(signature = (nick, *, seed = None, now_ms = 0, text = true, chat = false, membership = false, **options))]
    fn new(
        nick: &str,
        seed: Option<u64>,
        now_ms: u64,
        text: bool,
        chat: bool,
        membership: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut json: serde_json::Map<String, serde_json::Value> = match options {
            Some(options) => convert::from_py("connection config", options.as_any())?,
            None => serde_json::Map::new(),
        };
        for reserved in ["nick", "channel"] {
            if json.contains_key(reserved) {
                return Err(local(
                    "invalid_value",
                    format!("{reserved} is given by MultiDesk's own arguments, not as an option"),
                ));
            }
        }
        let options = json.clone();
        json.insert("nick".into(), nick.into());
        // No desk at the start: each is added with its channel and its remote.
        json.insert("channel".into(), "".into());
        let config =
            core::ConnectionConfig::from_json(&serde_json::Value::Object(json).to_string())
                .map_err(|e| local("invalid_value", format!("connection config: {e}")))?;
        let seed = match seed {
            Some(seed) => seed,
            None => os_seed()?,
        };
        let mut desks = core::MultiDesk::new(config, now_ms, seed).map_err(config_error)?;
        desks.set_chat(chat);
        desks.set_membership(membership);
        Ok(MultiDesk {
            engine: Slot::new(desks, "connection"),
            text,
            options,
            nick: nick.to_owned(),
            last: std::sync::Mutex::new(None),
        })
    }

    /// Adds a desk in `channel` whose remote is `remote` (a nick, a `nick!user@host` mask, or
    /// `"*"`), with the connection's `oa1` settings and `oa1` overrides of its own (a secret,
    /// timeouts, limits); the channel is joined (after registration when not yet registered).
    /// Requests to it wait until the remote is in the channel. A channel carried already
    /// raises `LocalError` (`duplicate_channel`), a bad channel or remote `LocalError`
    /// (`invalid_config`).
    #[pyo3(signature = (now_ms, channel, remote, **oa1))]
    fn add_desk(
        &self,
        now_ms: u64,
        channel: &str,
        remote: &str,
        oa1: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        match oa1.filter(|o| !o.is_empty()) {
            None => self
                .with(|d| d.add_desk(now_ms, channel, remote))?
                .map_err(config_error),
            Some(overrides) => {
                let config = self.desk_config(channel, remote, overrides)?;
                self.with(|d| d.add_desk_with(now_ms, config))?
                    .map_err(config_error)
            }
        }
    }

    /// Leaves `channel` and drops its desk: its requests fail `disconnected` (their events still
    /// come out). `False` when the connection has no such desk.
    fn remove_desk(&self, now_ms: u64, channel: &str) -> PyResult<bool> {
        self.with(|d| d.remove_desk(now_ms, channel))
    }

    /// The desks' channels, as added, in the order they were.
    fn channels(&self) -> PyResult<Vec<String>> {
        Ok(self.with(|d| d.channels()).unwrap_or_default())
    }

    /// Sends `payload` (a `str`, or UTF-8 `bytes`) to the remote of the desk in `channel`
    /// (queued until it is there); returns the request id. `UnknownChannelError` for a channel
    /// the connection does not carry.
    #[pyo3(signature = (now_ms, channel, payload, timeout_ms = None))]
    fn request(
        &self,
        py: Python<'_>,
        now_ms: u64,
        channel: &str,
        payload: Utf8Arg,
        timeout_ms: Option<u64>,
    ) -> PyResult<String> {
        let payload = payload.as_str("payload")?;
        bulk(py, payload.len(), || {
            self.with(|d| d.request(now_ms, channel, payload, timeout_ms))
        })?
        .map_err(raise)
    }

    /// Starts a `RemoteBash` call on the remote of the desk in `channel`: `timeout` in seconds
    /// (`None`: the configured request timeout). Returns the request id.
    #[pyo3(signature = (now_ms, channel, command, timeout = None))]
    fn remote_bash(
        &self,
        now_ms: u64,
        channel: &str,
        command: Utf8Arg,
        timeout: Option<f64>,
    ) -> PyResult<String> {
        let command = command.as_str("command")?;
        let timeout = remote_bash_timeout(timeout)?;
        self.with(|d| d.remote_bash(now_ms, channel, command, timeout))?
            .map_err(args_error)
    }

    /// Starts a model's `RemoteBash` call on the desk in `channel` from its arguments (a dict
    /// or JSON text, `{"command": ..., "timeout_sec": ...}`); wrong arguments raise
    /// `LocalError` (`invalid_arguments`). Returns the request id.
    fn remote_bash_call(
        &self,
        now_ms: u64,
        channel: &str,
        args: &Bound<'_, PyAny>,
    ) -> PyResult<String> {
        let args =
            core::remote_bash::RemoteBashArgs::parse(&args_json(args)?).map_err(args_error)?;
        self.with(|d| d.request(now_ms, channel, &args.command, args.timeout_ms()))?
            .map_err(raise)
    }

    /// Cancels request `id` of the desk in `channel` and tells its remote with `CANCEL`.
    fn cancel(&self, now_ms: u64, channel: &str, id: &str, reason: &str) -> PyResult<()> {
        self.with(|d| d.cancel(now_ms, channel, id, reason))?
            .map_err(raise)
    }

    /// Requests of the desk in `channel` in flight.
    fn in_flight(&self, channel: &str) -> PyResult<usize> {
        self.on(channel, |d| d.in_flight(channel))
    }

    /// The other members of the desk's channel, as the server wrote their nicks.
    fn members(&self, channel: &str) -> PyResult<Vec<String>> {
        self.on(channel, |d| d.members(channel))
    }

    /// The `RemoteBash` description for the desk in `channel`, whose output budget follows the
    /// shared pacing.
    fn tool_description(&self, channel: &str) -> PyResult<String> {
        self.on(channel, |d| d.tool_description(channel))
    }

    /// What the desk's requests wait for before they can leave, in words (``remote `rexd` in
    /// #desk-1``), or `None` when it is ready.
    fn waiting_for(&self, channel: &str) -> PyResult<Option<String>> {
        self.on(channel, |d| {
            d.channel_state(channel)?;
            Some(d.waiting_for(channel))
        })
    }

    /// Where the desk in `channel` stands: `"registering"`, `"joining"`, `"waiting_for_peer"`
    /// (its remote is not in the channel), `"ready"`, `"closed"`, ...
    fn channel_state<'py>(&self, py: Python<'py>, channel: &str) -> PyResult<Bound<'py, PyAny>> {
        let state = self.on(channel, |d| d.channel_state(channel))?;
        to_py(py, &state)
    }

    /// The OA1 counters of the desk in `channel` (`requests`, `responses`, `frames_in`, ...).
    fn channel_stats<'py>(&self, py: Python<'py>, channel: &str) -> PyResult<Bound<'py, PyAny>> {
        let stats = match self.with(|d| d.channel_stats(channel)) {
            Ok(stats) => stats,
            // Closed: the last ones.
            Err(e) => {
                let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
                let found = last.as_ref().and_then(|(_, channels)| {
                    channels.iter().find(|(c, _)| c == channel).map(|(_, s)| *s)
                });
                match found {
                    Some(stats) => Some(stats),
                    None => return Err(e),
                }
            }
        };
        to_py(py, &stats.ok_or_else(|| unknown(channel))?)
    }

    /// The IRC session's counters (lines in and out, ...); after `close()`, the last ones.
    fn irc_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = match self.with(|d| d.irc_stats()) {
            Ok(stats) => stats,
            Err(_) => self
                .last
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .map(|(irc, _)| *irc)
                .unwrap_or_default(),
        };
        to_py(py, &stats)
    }

    /// The flood pacing the desks share: the configured one, or the server's own once it has
    /// said what it is.
    fn pacing<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.with(|d| d.pacing())?)
    }

    /// Sends `text` to `channel` as chat (`NOTICE`s with `notice`): cut at spaces, or at
    /// character boundaries, into lines that fit, never a line starting with `OA1 `, through
    /// the shared pacing in turn with the desks' OA1 lines, once the channel is joined. Returns
    /// the number of lines. Raises `UnknownChannelError`, `ReservedPrefixError` (text starting
    /// with `OA1 `), `EmptyTextError`, `ForbiddenByteError` (NUL, CR or LF), `QueueFullError`
    /// (64 KiB wait for the channel already) or `ClosedError`; nothing is sent then.
    #[pyo3(signature = (channel, text, notice = false))]
    fn send_text(&self, channel: &str, text: &str, notice: bool) -> PyResult<usize> {
        self.with(|d| d.send_text(channel, text, notice))?
            .map_err(raise)
    }

    /// Chat messages and membership changes dropped because they were not taken.
    #[getter]
    fn chat_dropped(&self) -> PyResult<u64> {
        self.with(|d| d.chat_dropped())
    }

    /// Bytes read from the socket (partial lines wait for the rest).
    fn handle_bytes(&self, py: Python<'_>, now_ms: u64, data: &[u8]) -> PyResult<()> {
        bulk(py, data.len(), || {
            self.with(|d| d.handle_bytes(now_ms, data))
        })
    }

    /// The socket closed or failed: the connection ends, and every desk with it.
    fn handle_eof(&self, now_ms: u64) -> PyResult<()> {
        self.with(|d| d.handle_eof(now_ms))
    }

    /// The deadline of the last `Timeout` passed.
    fn handle_timeout(&self, now_ms: u64) -> PyResult<()> {
        self.with(|d| d.handle_timeout(now_ms))
    }

    /// Leaves the server with `QUIT :reason`.
    #[pyo3(signature = (now_ms, reason = "bye"))]
    fn quit(&self, now_ms: u64, reason: &str) -> PyResult<()> {
        self.with(|d| d.quit(now_ms, reason))
    }

    /// The next thing to do: a `Transmit` (one IRC line, CRLF included), a `ChannelEvent`, a
    /// `ChatMessage`, a membership change (`MemberJoined`, ...), or a `Timeout`.
    fn poll_output<'py>(&self, py: Python<'py>, now_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        loop {
            match self.with(|d| d.poll_output(now_ms))? {
                MultiOutput::Transmit(bytes) => return convert::transmit(py, &bytes),
                MultiOutput::Timeout(at) => return convert::timeout(py, at),
                other => {
                    if let Some(event) = multi_event(py, other, self.text)? {
                        return Ok(event);
                    }
                }
            }
        }
    }

    /// Drains `poll_output` in one call: `(data, events, deadline_ms)`, every transmit
    /// concatenated into `data` (write it to the socket), the events in order, and the
    /// deadline of the final `Timeout`.
    fn drain<'py>(
        &self,
        py: Python<'py>,
        now_ms: u64,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyList>, u64)> {
        let mut data = Vec::new();
        let mut pending = Vec::new();
        let deadline = self.with(|d| {
            loop {
                match d.poll_output(now_ms) {
                    MultiOutput::Transmit(bytes) => data.extend_from_slice(&bytes),
                    MultiOutput::Timeout(at) => break at,
                    event => pending.push(event),
                }
            }
        })?;
        let events = PyList::empty(py);
        for output in pending {
            if let Some(event) = multi_event(py, output, self.text)? {
                events.append(event)?;
            }
        }
        Ok((PyBytes::new(py, &data), events, deadline))
    }

    /// The connection's state: `"registering"`, `"ready"` once registered, `"closed"` (after
    /// `close()` too). Each desk has its own (`channel_state`).
    #[getter]
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.with(|d| d.state()) {
            Ok(state) => to_py(py, &state),
            Err(_) => to_py(py, &core::ConnectionState::Closed),
        }
    }

    /// Drops the engine; later calls raise `ClosedError` (`state`, `irc_stats()`,
    /// `channel_stats()` of the desks then and `closed` stay readable).
    fn close(&self) {
        if let Ok(last) = self.with(|d| {
            let channels = d
                .channels()
                .into_iter()
                .filter_map(|c| d.channel_stats(&c).map(|s| (c, s)))
                .collect();
            (d.irc_stats(), channels)
        }) {
            *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(last);
        }
        self.engine.close()
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.engine.is_closed()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MultiDesk>()?;
    Ok(())
}
