//! `deskwire.oa1`: escaping, frames, chunking, the bare `Client`/`Server` endpoints, and the
//! per-connection `Desk`/`Remote` engines over raw IRC bytes.

use std::time::Duration;

use deskwire::oa1::{self as core, ConnectionEvent, ConnectionOutput, Frame, FrameType, Output};

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString};

use crate::convert::{self, Utf8Arg, from_py, serde_event, to_py};
use crate::errors::{self, local, raise};
use crate::slot::Slot;

/// Inputs at least this large are handled with the GIL released.
pub const BULK_BYTES: usize = 64 * 1024;

/// Runs `work` on `size` bytes of input, with the GIL released when that is bulk work.
pub(crate) fn bulk<R: Send>(py: Python<'_>, size: usize, work: impl FnOnce() -> R + Send) -> R {
    if size >= BULK_BYTES {
        py.detach(work)
    } else {
        work()
    }
}

/// Escapes `text` for an OA1 payload (`\\`, `\n`, `\r`, `\t`, NUL as `\0`).
#[pyfunction]
fn escape(py: Python<'_>, text: &str) -> String {
    if text.len() >= BULK_BYTES {
        py.detach(|| core::escape::escape(text))
    } else {
        core::escape::escape(text)
    }
}

/// Decodes an escaped OA1 payload back to bytes (unknown escapes stay as they are).
#[pyfunction]
fn unescape<'py>(py: Python<'py>, escaped: &[u8]) -> Bound<'py, PyBytes> {
    let out = if escaped.len() >= BULK_BYTES {
        py.detach(|| core::escape::unescape(escaped))
    } else {
        core::escape::unescape(escaped)
    };
    PyBytes::new(py, &out)
}

/// Escapes `text` and cuts it into frame payloads of at most `budget` bytes each, never inside
/// an escape pair or a UTF-8 sequence (the payloads the endpoints send, in order).
#[pyfunction]
fn split(py: Python<'_>, text: &str, budget: usize) -> PyResult<Vec<String>> {
    if budget < core::chunk::MIN_PAYLOAD_BUDGET {
        return Err(errors::local(
            "invalid_value",
            format!(
                "a budget below {} bytes cannot hold an escape pair",
                core::chunk::MIN_PAYLOAD_BUDGET
            ),
        ));
    }
    let work = || {
        let escaped = core::escape::escape(text);
        core::chunk::split(&escaped, |_| budget)
            .into_iter()
            .map(|chunk| core::chunk::wire_payload(chunk).into_owned())
            .collect::<Vec<_>>()
    };
    Ok(if text.len() >= BULK_BYTES {
        py.detach(work)
    } else {
        work()
    })
}

fn frame_type(name: &str) -> PyResult<FrameType> {
    name.parse()
        .map_err(|e: core::UnknownFrameType| errors::local("invalid_value", e.to_string()))
}

/// Parses the text of a `PRIVMSG` as an OA1 frame: a dict with `type`, `id`, `seq`, `more`,
/// `payload` (still escaped), or `None` when the text is not a well-formed frame.
#[pyfunction]
fn parse_frame<'py>(py: Python<'py>, text: &str) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(frame) = Frame::parse(text) else {
        return Ok(None);
    };
    let dict = PyDict::new(py);
    dict.set_item("type", frame.kind.as_str())?;
    dict.set_item("id", frame.id)?;
    dict.set_item("seq", frame.seq)?;
    dict.set_item("more", frame.more)?;
    dict.set_item("payload", frame.payload)?;
    Ok(Some(dict))
}

/// Formats an OA1 frame (`OA1 TYPE ID SEQ MORE PAYLOAD`); `payload` must already be escaped.
/// A `LocalError` (`invalid_value`) for what the parser would refuse: a bad id, seq 0, a raw
/// NUL, CR or LF in the payload (which would end the IRC line there).
#[pyfunction]
#[pyo3(signature = (kind, id, seq, more, payload = ""))]
fn format_frame(kind: &str, id: &str, seq: u32, more: bool, payload: &str) -> PyResult<String> {
    let frame = Frame {
        kind: frame_type(kind)?,
        id,
        seq,
        more,
        payload,
    };
    frame
        .format()
        .map_err(|e| errors::local("invalid_value", e.to_string()))
}

/// Reads an `ERR` payload `code: message` as `(code, message)` (code `error` when it has none).
#[pyfunction]
fn parse_err_payload(payload: &str) -> (String, String) {
    let failure = core::Failure::from_err_payload(payload);
    (failure.code().to_owned(), failure.message())
}

/// A core `Config` from `channel`, `nick` and keyword overrides in its serde shape.
fn oa1_config(
    channel: &str,
    nick: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<core::Config> {
    match options {
        Some(options) => {
            let dict = options.copy()?;
            dict.set_item("channel", channel)?;
            dict.set_item("nick", nick)?;
            from_py("oa1 config", dict.as_any())
        }
        None => Ok(core::Config::new(channel, nick)),
    }
}

/// The shared body of a `poll_output` over a bare endpoint's `Output`.
fn output<'py>(py: Python<'py>, output: Output, text: bool) -> PyResult<Bound<'py, PyAny>> {
    match output {
        Output::Transmit(line) => convert::transmit(py, line.as_bytes()),
        Output::Event(event) => oa1_event(py, event, text),
        Output::Timeout(at) => convert::timeout(py, at),
    }
}

/// Sets a whole message in `fields`: as a `str` under `name` when `text`, else as its UTF-8
/// `bytes` under `data` (one copy, no `str` made). Returns the event's tag.
fn message<'t>(
    fields: &Bound<'_, PyDict>,
    name: &str,
    message: &str,
    text: bool,
    tag: &'t str,
    bytes_tag: &'t str,
) -> PyResult<&'t str> {
    if text {
        fields.set_item(name, message)?;
        Ok(tag)
    } else {
        fields.set_item("data", PyBytes::new(fields.py(), message.as_bytes()))?;
        Ok(bytes_tag)
    }
}

/// An OA1 event as its dataclass. The two that carry a whole message (up to 128 KiB) are made
/// straight from their fields, so the message is converted once (to `bytes` when `text` is
/// false); the others go through the serde shape like every other event.
fn oa1_event(py: Python<'_>, event: core::Event, text: bool) -> PyResult<Bound<'_, PyAny>> {
    let fields = PyDict::new(py);
    match &event {
        core::Event::Response {
            id,
            text: answer,
            truncated,
        } => {
            fields.set_item("id", id)?;
            let tag = message(&fields, "text", answer, text, "response", "response_bytes")?;
            fields.set_item("truncated", truncated)?;
            convert::event(py, "oa1", tag, &fields)
        }
        core::Event::Request {
            id,
            sender,
            payload,
        } => {
            fields.set_item("id", id)?;
            fields.set_item("sender", sender)?;
            let tag = message(
                &fields,
                "payload",
                payload,
                text,
                "request",
                "request_bytes",
            )?;
            convert::event(py, "oa1", tag, &fields)
        }
        core::Event::Failed { failure, .. } => {
            let failed = serde_event(py, "oa1", &event)?;
            errors::attach(&failed, errors::failure(failure))?;
            Ok(failed)
        }
        _ => serde_event(py, "oa1", &event),
    }
}

/// `handle_line` for each of `lines` (any iterable of `bytes`, or one `bytes`/`bytearray` of
/// lines each ended by LF or CRLF) in one call. Every item is checked before any is handled,
/// so a wrong type raises `TypeError` with nothing done; the GIL is released when the lines
/// add up to `BULK_BYTES`.
fn handle_lines<E: core::LineEndpoint + Send>(
    py: Python<'_>,
    slot: &Slot<E>,
    now_ms: u64,
    lines: &Bound<'_, PyAny>,
) -> PyResult<()> {
    // One buffer of lines (what `drain_into` writes): split in Rust, no object per line.
    if let Ok(data) = lines.cast::<PyBytes>() {
        let data = data.as_bytes();
        return bulk(py, data.len(), || {
            slot.with(|e| e.handle_lines(now_ms, data))
        });
    }
    if let Ok(data) = lines.cast::<PyByteArray>() {
        // A copy: a bytearray may change while the GIL is released.
        let data = data.to_vec();
        return bulk(py, data.len(), || {
            slot.with(|e| e.handle_lines(now_ms, &data))
        });
    }
    let owned = lines
        .try_iter()?
        .map(|item| Ok(item?.cast_into::<PyBytes>()?))
        .collect::<PyResult<Vec<_>>>()?;
    // The `bytes` objects are immutable and `owned` keeps them alive while the GIL is released.
    let slices: Vec<&[u8]> = owned.iter().map(|line| line.as_bytes()).collect();
    let work = || {
        slot.with(|e| {
            for line in &slices {
                e.handle_line(now_ms, line);
            }
        })
    };
    if slices.iter().map(|line| line.len()).sum::<usize>() >= BULK_BYTES {
        py.detach(work)
    } else {
        work()
    }
}

/// `poll_output` until it answers `Timeout`, in one call: `(lines, events, deadline_ms)`.
/// The lines come out of the engine into one buffer (no `String` each) and each becomes its
/// `bytes` from there: our lines hold no CR or LF, so each ends at the next CRLF.
fn drain_lines<'py, E: core::LineEndpoint>(
    py: Python<'py>,
    slot: &Slot<E>,
    now_ms: u64,
    text: bool,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, u64)> {
    let mut out = Vec::new();
    let mut pending = Vec::new();
    let drained = slot.with(|e| e.drain_into(now_ms, &mut out, usize::MAX, &mut pending))?;
    let deadline = match drained {
        core::Drained::Until(at) => at,
        // Not with unbounded room; were it, the rest would wait for the next call.
        core::Drained::Full => now_ms,
    };
    let mut start = 0;
    let lines = PyList::new(
        py,
        memchr::memchr_iter(b'\n', &out).map(|end| {
            let line = &out[start..end - 1];
            start = end + 1;
            PyBytes::new(py, line)
        }),
    )?;
    let events = PyList::empty(py);
    for event in pending {
        events.append(oa1_event(py, event, text)?)?;
    }
    Ok((lines, events, deadline))
}

/// `drain` into one `bytearray`: the lines appended to `buffer`, each ended by CRLF, while it
/// grows by at most `max_bytes`; `(bytes appended, events, deadline_ms)`, the deadline `now_ms`
/// when lines that may go now were left for want of room.
fn drain_lines_into<'py, E: core::LineEndpoint>(
    py: Python<'py>,
    slot: &Slot<E>,
    now_ms: u64,
    buffer: &Bound<'py, PyAny>,
    max_bytes: Option<usize>,
    text: bool,
) -> PyResult<(usize, Bound<'py, PyList>, u64)> {
    let buffer = buffer.cast::<PyByteArray>()?;
    // A bytearray with a live memoryview cannot grow: find out before a line is taken (a
    // resize to its own size checks nothing).
    let start = buffer.len();
    buffer.resize(start + 1)?;
    buffer.resize(start)?;
    let mut out = Vec::new();
    let mut pending = Vec::new();
    let drained = slot.with(|e| {
        e.drain_into(
            now_ms,
            &mut out,
            max_bytes.unwrap_or(usize::MAX),
            &mut pending,
        )
    })?;
    if !out.is_empty() {
        buffer.call_method1("extend", (PyBytes::new(py, &out),))?;
    }
    let events = PyList::empty(py);
    for event in pending {
        events.append(oa1_event(py, event, text)?)?;
    }
    let deadline = match drained {
        core::Drained::Until(at) => at,
        core::Drained::Full => now_ms,
    };
    Ok((out.len(), events, deadline))
}

// The methods both bare endpoints have, over `core::LineEndpoint`; `$own` adds the class's own.
macro_rules! line_methods {
    ($ty:ident, { $($own:tt)* }) => {
        #[pymethods]
        impl $ty {
            $($own)*

            /// One IRC line as received (without CRLF).
            fn handle_line(&self, py: Python<'_>, now_ms: u64, line: &[u8]) -> PyResult<()> {
                if line.len() >= BULK_BYTES {
                    py.detach(|| self.0.with(|e| e.handle_line(now_ms, line)))
                } else {
                    self.0.with(|e| e.handle_line(now_ms, line))
                }
            }

            /// Every line of `lines` (an iterable of `bytes`, each as received, without CRLF;
            /// or one `bytes`/`bytearray` of lines each ended by CRLF or LF, as `drain_into`
            /// writes them) in one call: the same as `handle_line` for each, with one crossing
            /// into Rust. Each item is checked first, so a wrong type raises `TypeError` before
            /// any line is handled.
            fn handle_lines(
                &self,
                py: Python<'_>,
                now_ms: u64,
                lines: &Bound<'_, PyAny>,
            ) -> PyResult<()> {
                handle_lines(py, &self.0, now_ms, lines)
            }

            /// The deadline of the last `Timeout` passed.
            fn handle_timeout(&self, now_ms: u64) -> PyResult<()> {
                self.0.with(|e| e.handle_timeout(now_ms))
            }

            /// Drains `poll_output` in one call: `(lines, events, deadline_ms)`, every
            /// transmit's line (without CRLF) in order, the events in order, and the deadline
            /// of the final `Timeout`. The same as calling `poll_output` until it answers
            /// `Timeout`.
            fn drain<'py>(
                &self,
                py: Python<'py>,
                now_ms: u64,
            ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, u64)> {
                drain_lines(py, &self.0, now_ms, self.1)
            }

            /// `drain` into one buffer: appends every line to `buffer` (a `bytearray`), each
            /// ended by CRLF, without an object per line. Returns `(appended, events,
            /// deadline_ms)`: the bytes appended, the events in order, the deadline of the
            /// final `Timeout`. With `max_bytes`, the buffer grows by at most that much; when
            /// lines that may go now did not fit, they stay queued and the deadline is
            /// `now_ms`: call again with room.
            #[pyo3(signature = (now_ms, buffer, max_bytes = None))]
            fn drain_into<'py>(
                &self,
                py: Python<'py>,
                now_ms: u64,
                buffer: &Bound<'py, PyAny>,
                max_bytes: Option<usize>,
            ) -> PyResult<(usize, Bound<'py, PyList>, u64)> {
                drain_lines_into(py, &self.0, now_ms, buffer, max_bytes, self.1)
            }

            /// The counters, as a dict.
            fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                to_py(py, &self.0.with(|e| e.stats())?)
            }

            /// Drops the engine; later calls raise `ClosedError`.
            fn close(&self) {
                self.0.close()
            }

            /// Whether `close` was called.
            #[getter]
            fn closed(&self) -> bool {
                self.0.is_closed()
            }
        }
    };
}

/// The desk end of OA1 over IRC lines you read and write yourself (see `Desk` for an engine
/// that also speaks IRC): `request`, then feed every received line to `handle_line` and drain
/// `poll_output` until it returns a `Timeout`. `handle_lines` and `drain` do the same for many
/// lines in one call each (a 128 KiB request is about 580 lines).
///
/// `Client("#desk", "desk", request_timeout_ms=5000)` (request ids from the OS's entropy;
/// `seed=` fixes them, for tests only): keyword options are the keys of
/// the core's OA1 config (`allowed_sender`, `max_frame_payload_bytes`, `adaptive_payload`,
/// `max_message_bytes`, `max_streams`, `request_timeout_ms`, `partial_timeout_ms`, `pacing`
/// as `{"burst": n, "interval_ms": ms}`, `max_line_bytes`, `finished_memory`, `flush_delay_ms`).
///
/// `text=False` gives each whole message as the UTF-8 `bytes` it was reassembled into, without
/// making a `str` of it: `ResponseBytes` for `Response`, `RequestBytes` for `Request`.
#[pyclass(module = "deskwire.oa1", name = "Client")]
pub struct Client(Slot<core::Client>, bool);

line_methods!(Client, {
    #[new]
    #[pyo3(signature = (channel, nick, *, seed = None, text = true, **options))]
    fn new(
        channel: &str,
        nick: &str,
        seed: Option<u64>,
        text: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let config = oa1_config(channel, nick, options)?;
        let seed = match seed {
            Some(seed) => seed,
            None => os_seed()?,
        };
        Ok(Client(
            Slot::new(core::Client::new(config, seed), "client"),
            text,
        ))
    }

    /// Sends `payload` (a `str`, or UTF-8 `bytes`) as a request; returns its id. `timeout_ms`
    /// overrides the configured request timeout.
    #[pyo3(signature = (now_ms, payload, timeout_ms = None))]
    fn request(
        &self,
        py: Python<'_>,
        now_ms: u64,
        payload: Utf8Arg,
        timeout_ms: Option<u64>,
    ) -> PyResult<String> {
        role::request(py, &self.0, now_ms, payload, timeout_ms)
    }

    /// Starts a `RemoteBash` call: `command` runs on the remote, `timeout` (seconds, `None`:
    /// the configured request timeout) starting when the lines may leave. Returns the request
    /// id whose `Response` or `Failed` ends the call. A `timeout` that is not positive raises
    /// `LocalError` (`invalid_arguments`), as does an empty command or one with a NUL byte.
    #[pyo3(signature = (now_ms, command, timeout = None))]
    fn remote_bash(&self, now_ms: u64, command: Utf8Arg, timeout: Option<f64>) -> PyResult<String> {
        role::remote_bash(&self.0, now_ms, command, timeout)
    }

    /// Starts a model's `RemoteBash` call from its arguments (a dict or JSON text,
    /// `{"command": ..., "timeout_sec": ...}`); wrong arguments raise `LocalError`
    /// (`invalid_arguments`). Returns the request id.
    fn remote_bash_call(&self, now_ms: u64, args: &Bound<'_, PyAny>) -> PyResult<String> {
        role::remote_bash_call(&self.0, now_ms, args)
    }

    /// Cancels request `id`: it fails no more, and `CANCEL` tells the remote to stop.
    fn cancel(&self, now_ms: u64, id: &str, reason: &str) -> PyResult<()> {
        role::cancel(&self.0, now_ms, id, reason)
    }

    /// Holds outgoing lines back (`True`) or lets them go (`False`), for a host whose own IRC
    /// client is not in the channel yet, or whose remote is away. Requests queue meanwhile; a
    /// request's timeout starts when its lines may leave, and one held longer than
    /// `ready_timeout_ms` fails `not_ready` with what `set_hold_reason` said.
    fn set_held(&self, held: bool) -> PyResult<()> {
        self.0.with(|c| c.set_held(held))
    }

    /// What held lines wait for, in words (``remote `rexd` in #desk``), for the message of a
    /// `not_ready` failure.
    fn set_hold_reason(&self, reason: &str) -> PyResult<()> {
        self.0.with(|c| c.set_hold_reason(reason))
    }

    /// The next thing to do: a `Transmit` (one IRC line, without CRLF), an event
    /// (`Response`, `Failed`) or a `Timeout`.
    fn poll_output<'py>(&self, py: Python<'py>, now_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        output(py, self.0.with(|c| c.poll_output(now_ms))?, self.1)
    }

    /// Requests in flight.
    #[getter]
    fn in_flight(&self) -> PyResult<usize> {
        self.0.with(|c| c.in_flight())
    }
});

/// The remote end of OA1 over IRC lines you read and write yourself (see `Remote`): each
/// `Request` event is answered with `send` + `finish`, `respond`, or `fail`.
///
/// `Server("#desk", "deskbot", allowed_sender="desk")`; the keyword options are the same as
/// `Client`'s.
///
/// `text=False` gives each whole message as the UTF-8 `bytes` it was reassembled into, without
/// making a `str` of it: `ResponseBytes` for `Response`, `RequestBytes` for `Request`.
#[pyclass(module = "deskwire.oa1", name = "Server")]
pub struct Server(Slot<core::Server>, bool);

line_methods!(Server, {
    #[new]
    #[pyo3(signature = (channel, nick, *, text = true, **options))]
    fn new(
        channel: &str,
        nick: &str,
        text: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let config = oa1_config(channel, nick, options)?;
        Ok(Server(Slot::new(core::Server::new(config), "server"), text))
    }

    /// Streams `output` (a `str`, or UTF-8 `bytes` such as a process's output) as part of the
    /// answer to `id` (sent in frames as they fill).
    fn send(&self, py: Python<'_>, now_ms: u64, id: &str, output: Utf8Arg) -> PyResult<()> {
        role::send(py, &self.0, now_ms, id, output)
    }

    /// Ends the answer to `id`.
    fn finish(&self, now_ms: u64, id: &str) -> PyResult<()> {
        role::finish(&self.0, now_ms, id)
    }

    /// Answers `id` with `text` (a `str`, or UTF-8 `bytes`) in one go (`send` + `finish`).
    fn respond(&self, py: Python<'_>, now_ms: u64, id: &str, text: Utf8Arg) -> PyResult<()> {
        role::respond(py, &self.0, now_ms, id, text)
    }

    /// Answers `id` with `ERR code: message` (`code` of `[a-z_]+`).
    fn fail(&self, now_ms: u64, id: &str, code: &str, message: &str) -> PyResult<()> {
        role::fail(&self.0, now_ms, id, code, message)
    }

    /// The next thing to do: a `Transmit` (one IRC line, without CRLF), an event
    /// (`Request`, `Cancelled`) or a `Timeout`.
    fn poll_output<'py>(&self, py: Python<'py>, now_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        output(py, self.0.with(|s| s.poll_output(now_ms))?, self.1)
    }

    /// Requests being answered.
    #[getter]
    fn active(&self) -> PyResult<usize> {
        self.0.with(|s| s.active())
    }
});

/// A `ConnectionConfig` from nick, channel and the optional parts of its JSON shape.
fn connection_config(
    nick: &str,
    channel: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<core::ConnectionConfig> {
    let mut json = serde_json::Map::new();
    if let Some(options) = options {
        let extra: serde_json::Map<String, serde_json::Value> =
            from_py("connection config", options.as_any())?;
        json = extra;
    }
    json.insert("nick".into(), nick.into());
    json.insert("channel".into(), channel.into());
    core::ConnectionConfig::from_json(&serde_json::Value::Object(json).to_string())
        .map_err(|e| errors::local("invalid_value", format!("connection config: {e}")))
}

fn connection_output<'py>(
    py: Python<'py>,
    output: ConnectionOutput,
    text: bool,
) -> PyResult<Bound<'py, PyAny>> {
    match output {
        ConnectionOutput::Transmit(bytes) => convert::transmit(py, &bytes),
        ConnectionOutput::Event(event) => connection_event(py, event, text),
        ConnectionOutput::Timeout(at) => convert::timeout(py, at),
    }
}

/// A connection's event as its dataclass: `irc.*` (with the exception a refusal or the end of
/// the link means attached), `oa1.Response`, ..., or the link's own (`oa1.StateChanged`, ...).
pub(crate) fn connection_event(
    py: Python<'_>,
    event: ConnectionEvent,
    text: bool,
) -> PyResult<Bound<'_, PyAny>> {
    match event {
        ConnectionEvent::Irc(event) => {
            let py_event = serde_event(py, "irc", &event)?;
            if let Some(error) = errors::session_error(&event) {
                errors::attach(&py_event, error)?;
            }
            Ok(py_event)
        }
        ConnectionEvent::Oa1(event) => oa1_event(py, event, text),
        // The link's own events (state changes, the peer joining or leaving).
        other => serde_event(py, "oa1", &other),
    }
}

/// A connection engine's counters when it was closed, which `stats()` reads afterwards.
type LastStats = std::sync::Mutex<Option<core::ConnectionStats>>;

// The methods both connection engines have; `$own` adds the class's own.
macro_rules! connection_methods {
    ($ty:ident, { $($own:tt)* }) => {
        #[pymethods]
        impl $ty {
            $($own)*

            /// Bytes read from the socket (partial lines wait for the rest).
            fn handle_bytes(&self, py: Python<'_>, now_ms: u64, data: &[u8]) -> PyResult<()> {
                if data.len() >= BULK_BYTES {
                    py.detach(|| self.0.with(|e| e.handle_bytes(now_ms, data)))
                } else {
                    self.0.with(|e| e.handle_bytes(now_ms, data))
                }
            }

            /// The socket closed or failed.
            fn handle_eof(&self, now_ms: u64) -> PyResult<()> {
                self.0.with(|e| e.handle_eof(now_ms))
            }

            /// The deadline of the last `Timeout` passed.
            fn handle_timeout(&self, now_ms: u64) -> PyResult<()> {
                self.0.with(|e| e.handle_timeout(now_ms))
            }

            /// Leaves the server with `QUIT :reason`.
            #[pyo3(signature = (now_ms, reason = "bye"))]
            fn quit(&self, now_ms: u64, reason: &str) -> PyResult<()> {
                self.0.with(|e| e.quit(now_ms, reason))
            }

            /// The next thing to do: a `Transmit` (one IRC line, CRLF included), an event
            /// (`irc.Registered`, `irc.Joined`, ..., `oa1.Response`, ...) or a `Timeout`.
            fn poll_output<'py>(
                &self,
                py: Python<'py>,
                now_ms: u64,
            ) -> PyResult<Bound<'py, PyAny>> {
                connection_output(py, self.0.with(|e| e.poll_output(now_ms))?, self.1)
            }

            /// Drains `poll_output` in one call: `(data, events, deadline_ms)`, every transmit
            /// concatenated into `data` (write it to the socket), the events in order, and the
            /// deadline of the final `Timeout`. The same as calling `poll_output` until it
            /// answers `Timeout`, with one crossing into Rust instead of one per line.
            fn drain<'py>(
                &self,
                py: Python<'py>,
                now_ms: u64,
            ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyList>, u64)> {
                let events = PyList::empty(py);
                let mut data = Vec::new();
                let mut pending = Vec::new();
                let deadline = self.0.with(|e| loop {
                    match e.poll_output(now_ms) {
                        ConnectionOutput::Transmit(bytes) => data.extend_from_slice(&bytes),
                        ConnectionOutput::Timeout(at) => break at,
                        event => pending.push(event),
                    }
                })?;
                for event in pending {
                    events.append(connection_output(py, event, self.1)?)?;
                }
                Ok((PyBytes::new(py, &data), events, deadline))
            }

            /// The connection's state as the core names it: `"registering"`, `"joining"`,
            /// `"ready"`, `"closed"`, ...; `"closed"` after `close()` too.
            #[getter]
            fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                match self.0.with(|e| e.state()) {
                    Ok(state) => to_py(py, &state),
                    Err(_) => to_py(py, &core::ConnectionState::Closed),
                }
            }

            /// The counters of both layers: `{"irc": {...}, "oa1": {...}}`; after `close()`,
            /// the last ones.
            fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                let stats = match self.0.with(|e| e.stats()) {
                    Ok(stats) => stats,
                    Err(_) => self.2.lock().unwrap_or_else(|p| p.into_inner()).unwrap_or_default(),
                };
                to_py(py, &stats)
            }

            /// Drops the engine; later calls raise `ClosedError` (`state`, `stats()` and
            /// `closed` stay readable).
            fn close(&self) {
                if let Ok(stats) = self.0.with(|e| e.stats()) {
                    *self.2.lock().unwrap_or_else(|p| p.into_inner()) = Some(stats);
                }
                self.0.close()
            }

            /// Whether `close` was called.
            #[getter]
            fn closed(&self) -> bool {
                self.0.is_closed()
            }
        }
    };
}

/// Request ids from the OS's entropy, so two desks started together never share one.
pub(crate) fn os_seed() -> PyResult<u64> {
    getrandom::u64().map_err(|e| local("no_entropy", format!("the OS random source: {e}")))
}

/// The desk end of OA1 on one IRC connection: registration, `PING`, `JOIN` and the OA1 client
/// in one engine over raw socket bytes. Requests made before the channel is joined and the
/// remote is there wait inside.
///
/// `Desk("desk", "#desk", now_ms=0, oa1={"allowed_sender": "rexd"},
/// session={"password": "..."})`: `session` and `oa1` hold what differs from the defaults, in
/// the shape of the core's `ConnectionConfig`; `oa1.allowed_sender` (the remote's nick, a
/// `nick!user@host` mask, or `"*"` for anyone) is required, and a bad nick or channel raises
/// `LocalError` (`invalid_config`). Request ids come from the OS's entropy; `seed=` fixes
/// them, for tests only.
///
/// `text=False` gives each whole message as the UTF-8 `bytes` it was reassembled into, without
/// making a `str` of it: `ResponseBytes` for `Response`, `RequestBytes` for `Request`.
#[pyclass(module = "deskwire.oa1", name = "Desk")]
pub struct Desk(Slot<core::Desk>, bool, LastStats);

connection_methods!(Desk, {
    #[new]
    #[pyo3(signature = (nick, channel, *, seed = None, now_ms = 0, text = true, **options))]
    fn new(
        nick: &str,
        channel: &str,
        seed: Option<u64>,
        now_ms: u64,
        text: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let config = connection_config(nick, channel, options)?;
        let seed = match seed {
            Some(seed) => seed,
            None => os_seed()?,
        };
        let desk =
            core::Desk::new(config, now_ms, seed).map_err(|e| raise(core::LocalError::from(e)))?;
        Ok(Desk(Slot::new(desk, "desk"), text, LastStats::default()))
    }

    /// Sends `payload` (a `str`, or UTF-8 `bytes`) as a request (queued until the channel is
    /// joined); returns its id.
    #[pyo3(signature = (now_ms, payload, timeout_ms = None))]
    fn request(
        &self,
        py: Python<'_>,
        now_ms: u64,
        payload: Utf8Arg,
        timeout_ms: Option<u64>,
    ) -> PyResult<String> {
        role::request(py, &self.0, now_ms, payload, timeout_ms)
    }

    /// Starts a `RemoteBash` call: `command` runs on the remote, `timeout` (seconds, `None`:
    /// the configured request timeout) starting when the lines may leave. Returns the request
    /// id whose `Response` or `Failed` ends the call. A `timeout` that is not positive raises
    /// `LocalError` (`invalid_arguments`), as does an empty command or one with a NUL byte.
    #[pyo3(signature = (now_ms, command, timeout = None))]
    fn remote_bash(&self, now_ms: u64, command: Utf8Arg, timeout: Option<f64>) -> PyResult<String> {
        role::remote_bash(&self.0, now_ms, command, timeout)
    }

    /// Starts a model's `RemoteBash` call from its arguments (a dict or JSON text,
    /// `{"command": ..., "timeout_sec": ...}`); wrong arguments raise `LocalError`
    /// (`invalid_arguments`). Returns the request id.
    fn remote_bash_call(&self, now_ms: u64, args: &Bound<'_, PyAny>) -> PyResult<String> {
        role::remote_bash_call(&self.0, now_ms, args)
    }

    /// Cancels request `id` and tells the remote with `CANCEL`.
    fn cancel(&self, now_ms: u64, id: &str, reason: &str) -> PyResult<()> {
        role::cancel(&self.0, now_ms, id, reason)
    }

    /// Requests in flight.
    #[getter]
    fn in_flight(&self) -> PyResult<usize> {
        self.0.with(|d| d.in_flight())
    }

    /// What requests wait for before they can leave, in words (``remote `rexd` in #desk;
    /// members: deskbot``, `joining #desk (refused: 473 Cannot join channel (+i))`), or `None`
    /// when ready or closed. A host that gives up waiting says this.
    fn waiting_for(&self) -> PyResult<Option<String>> {
        self.0.with(|d| d.waiting_for())
    }

    /// The other members of the channel, as the server wrote their nicks.
    fn members(&self) -> PyResult<Vec<String>> {
        self.0.with(|d| d.members())
    }

    /// The `RemoteBash` description for this link: the output budget it states follows the
    /// pacing in force (the server's own once in the channel). Give it to the model in place of
    /// `TOOL_DESCRIPTION` once the desk is ready.
    fn tool_description(&self) -> PyResult<String> {
        self.0.with(|d| d.tool_description())
    }
});

/// The remote end of OA1 on one IRC connection: each `oa1.Request` is answered with `send` +
/// `finish`, `respond` or `fail`; `oa1.Cancelled` says to stop.
///
/// `Remote("rexd", "#desk", oa1={"allowed_sender": "desk"})`. `allowed_sender` (a nick or a
/// `nick!user@host` mask) proves nothing: whoever takes the desk's nick once it quits, or copies
/// its user name from the same host on a network that does not verify users, is served. When
/// the requests run commands, share a secret (`oa1={"auth": ...}`) and log `source(id)`.
///
/// `text=False` gives each whole message as the UTF-8 `bytes` it was reassembled into, without
/// making a `str` of it: `ResponseBytes` for `Response`, `RequestBytes` for `Request`.
#[pyclass(module = "deskwire.oa1", name = "Remote")]
pub struct Remote(Slot<core::Remote>, bool, LastStats);

connection_methods!(Remote, {
    #[new]
    #[pyo3(signature = (nick, channel, *, now_ms = 0, text = true, **options))]
    fn new(
        nick: &str,
        channel: &str,
        now_ms: u64,
        text: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let config = connection_config(nick, channel, options)?;
        let remote =
            core::Remote::new(config, now_ms).map_err(|e| raise(core::LocalError::from(e)))?;
        Ok(Remote(
            Slot::new(remote, "remote"),
            text,
            LastStats::default(),
        ))
    }

    /// Streams `output` (a `str`, or UTF-8 `bytes` such as a process's output) as part of the
    /// answer to `id`.
    fn send(&self, py: Python<'_>, now_ms: u64, id: &str, output: Utf8Arg) -> PyResult<()> {
        role::send(py, &self.0, now_ms, id, output)
    }

    /// Ends the answer to `id`.
    fn finish(&self, now_ms: u64, id: &str) -> PyResult<()> {
        role::finish(&self.0, now_ms, id)
    }

    /// Answers `id` with `text` (a `str`, or UTF-8 `bytes`) in one go.
    fn respond(&self, py: Python<'_>, now_ms: u64, id: &str, text: Utf8Arg) -> PyResult<()> {
        role::respond(py, &self.0, now_ms, id, text)
    }

    /// Answers `id` with `ERR code: message`.
    fn fail(&self, now_ms: u64, id: &str, code: &str, message: &str) -> PyResult<()> {
        role::fail(&self.0, now_ms, id, code, message)
    }

    /// Requests being answered.
    #[getter]
    fn active(&self) -> PyResult<usize> {
        self.0.with(|r| r.active())
    }

    /// Who sent request `id` (being answered), as the server showed them: `nick!user@host`,
    /// or `None`. Log it: the nick alone proves nothing.
    fn source(&self, id: &str) -> PyResult<Option<String>> {
        self.0.with(|r| r.server().source(id).map(str::to_owned))
    }
});

/// The two roles' methods, once for both classes of each: `Client` and `Desk` ask
/// (`core::Requester`), `Server` and `Remote` answer (`core::Responder`).
mod role {
    use super::*;
    use deskwire::oa1::remote_bash::call;
    use deskwire::oa1::{Requester, Responder};

    pub fn request<E: Requester + Send>(
        py: Python<'_>,
        slot: &Slot<E>,
        now_ms: u64,
        payload: Utf8Arg,
        timeout_ms: Option<u64>,
    ) -> PyResult<String> {
        let payload = payload.as_str("payload")?;
        bulk(py, payload.len(), || {
            slot.with(|e| e.request(now_ms, payload, timeout_ms))
        })?
        .map_err(raise)
    }

    pub fn remote_bash<E: Requester>(
        slot: &Slot<E>,
        now_ms: u64,
        command: Utf8Arg,
        timeout: Option<f64>,
    ) -> PyResult<String> {
        let command = command.as_str("command")?;
        let timeout = remote_bash_timeout(timeout)?;
        slot.with(|e| e.remote_bash(now_ms, command, timeout))?
            .map_err(args_error)
    }

    pub fn remote_bash_call<E: Requester>(
        slot: &Slot<E>,
        now_ms: u64,
        args: &Bound<'_, PyAny>,
    ) -> PyResult<String> {
        let json = args_json(args)?;
        slot.with(|e| call(e, now_ms, &json))?.map_err(args_error)
    }

    pub fn cancel<E: Requester>(
        slot: &Slot<E>,
        now_ms: u64,
        id: &str,
        reason: &str,
    ) -> PyResult<()> {
        slot.with(|e| e.cancel(now_ms, id, reason))?.map_err(raise)
    }

    pub fn send<E: Responder + Send>(
        py: Python<'_>,
        slot: &Slot<E>,
        now_ms: u64,
        id: &str,
        output: Utf8Arg,
    ) -> PyResult<()> {
        let output = output.as_str("output")?;
        bulk(py, output.len(), || {
            slot.with(|e| e.send(now_ms, id, output))
        })?
        .map_err(raise)
    }

    pub fn finish<E: Responder>(slot: &Slot<E>, now_ms: u64, id: &str) -> PyResult<()> {
        slot.with(|e| e.finish(now_ms, id))?.map_err(raise)
    }

    pub fn respond<E: Responder + Send>(
        py: Python<'_>,
        slot: &Slot<E>,
        now_ms: u64,
        id: &str,
        text: Utf8Arg,
    ) -> PyResult<()> {
        let text = text.as_str("text")?;
        bulk(py, text.len(), || {
            slot.with(|e| e.respond(now_ms, id, text))
        })?
        .map_err(raise)
    }

    pub fn fail<E: Responder>(
        slot: &Slot<E>,
        now_ms: u64,
        id: &str,
        code: &str,
        message: &str,
    ) -> PyResult<()> {
        slot.with(|e| e.fail(now_ms, id, code, message))?
            .map_err(raise)
    }
}

/// The model's `RemoteBash` arguments as JSON text: a `str` as it is, anything else as JSON.
pub(crate) fn args_json(args: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(text) = args.cast::<PyString>() {
        Ok(text.to_cow()?.into_owned())
    } else {
        convert::json_of("RemoteBash arguments", args)
    }
}

/// A `RemoteBash` timeout in seconds as the core's duration; `None` keeps the configured one.
/// Zero, negative, NaN and infinite are `invalid_arguments`, as the core refuses a zero
/// `timeout_sec`; a finite timeout too long for a `Duration` is the longest one, not an error.
pub(crate) fn remote_bash_timeout(seconds: Option<f64>) -> PyResult<Option<Duration>> {
    seconds
        .map(|s| {
            if !(s > 0.0 && s.is_finite()) {
                return Err(local(
                    "invalid_arguments",
                    format!("timeout must be a positive, finite number of seconds, not {s}"),
                ));
            }
            Ok(Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX))
        })
        .transpose()
}

/// A refused `RemoteBash` call: its arguments (`invalid_arguments`), or the engine's refusal.
pub(crate) fn args_error(e: core::remote_bash::ArgsError) -> PyErr {
    match e {
        core::remote_bash::ArgsError::Local(e) => raise(e),
        other => local("invalid_arguments", other.to_string()),
    }
}

/// `RemoteBash` arguments (`{"command": ..., "timeout_sec": ...}`) as `(command,
/// timeout_sec)`, in seconds like `IrcDesk.remote_bash(timeout=)`; a `LocalError` with code
/// `invalid_arguments` when they are not valid.
#[pyfunction]
fn remote_bash_args(args: &Bound<'_, PyAny>) -> PyResult<(String, Option<u64>)> {
    let parsed = core::remote_bash::RemoteBashArgs::parse(&args_json(args)?).map_err(args_error)?;
    Ok((parsed.command, parsed.timeout_sec))
}

/// The `RemoteBash` tool result of a failed call: the
/// `{"ok": false, "error": code, "message": ...}` JSON the model reads.
#[pyfunction]
fn remote_bash_failure(code: &str, message: &str) -> String {
    core::remote_bash::failure_object(code, message)
}

/// How the command behind a `RemoteBash` answer's text ended, from its last line:
/// `{"kind": "exited" | "signaled" | "cut_at_timeout" | "cut_short", "status": N}` (plus
/// `"signal": "KILL"` when signaled). `status` is what a shell over ssh would report: the exit
/// code, 128 + the signal's number, 124 cut at the timeout, 255 cut short.
#[pyfunction]
fn remote_bash_ending<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    use core::remote_bash::Ending;
    let ending = core::remote_bash::ending(text);
    let (kind, signal) = match ending {
        Ending::Exited(_) => ("exited", None),
        Ending::Signaled(name) => ("signaled", Some(name)),
        Ending::CutAtTimeout => ("cut_at_timeout", None),
        Ending::CutShort => ("cut_short", None),
    };
    let mut value = serde_json::json!({"kind": kind, "status": ending.exit_status()});
    if let Some(name) = signal {
        value["signal"] = name.into();
    }
    convert::py_of_value(py, &value)
}

/// The line a shell tool's output ends with when the command did not exit 0: `[exit code: 2]`
/// or `[signal: KILL]` (`RemoteBash` and REXD's `bash` alike); `None` for exit 0 or when
/// neither is known.
#[pyfunction]
#[pyo3(signature = (exit_code, signal = None))]
fn exit_marker(exit_code: Option<i32>, signal: Option<&str>) -> Option<String> {
    core::remote_bash::exit_marker(exit_code, signal)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(escape, m)?)?;
    m.add_function(wrap_pyfunction!(unescape, m)?)?;
    m.add_function(wrap_pyfunction!(split, m)?)?;
    m.add_function(wrap_pyfunction!(parse_frame, m)?)?;
    m.add_function(wrap_pyfunction!(format_frame, m)?)?;
    m.add_function(wrap_pyfunction!(parse_err_payload, m)?)?;
    m.add_function(wrap_pyfunction!(remote_bash_args, m)?)?;
    m.add_function(wrap_pyfunction!(remote_bash_failure, m)?)?;
    m.add_function(wrap_pyfunction!(exit_marker, m)?)?;
    m.add_function(wrap_pyfunction!(remote_bash_ending, m)?)?;
    m.add_class::<Client>()?;
    m.add_class::<Server>()?;
    m.add_class::<Desk>()?;
    m.add_class::<Remote>()?;
    crate::multi::register(m)?;
    m.add("TRUNCATION_MARKER", core::TRUNCATION_MARKER)?;
    m.add("TOOL_NAME", core::remote_bash::TOOL_NAME)?;
    m.add("TOOL_DESCRIPTION", core::remote_bash::DESCRIPTION.as_str())?;
    m.add("TOOL_INPUT_SCHEMA", core::remote_bash::INPUT_SCHEMA)?;
    Ok(())
}
