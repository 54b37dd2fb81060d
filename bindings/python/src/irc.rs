//! `deskwire.irc`: the IRC line parser and the client session helper (registration, `PING`,
//! `JOIN`, nick fallback) over raw socket bytes.

use deskwire::irc::{self as core, SessionOutput};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::{self, from_py, serde_event, to_py};
use crate::errors::{self, raise};
use crate::oa1::BULK_BYTES;
use crate::slot::Slot;

/// Parses one IRC line (RFC 1459 with IRCv3 tags; a trailing CRLF is ignored) into an
/// `irc.Message` (`tags`, `source`, `nick`, `user`, `host`, `command`, `params`). Raises
/// `ProtocolError` (code `invalid_line`) when it is not an IRC line.
#[pyfunction]
fn parse<'py>(py: Python<'py>, line: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let msg =
        core::Message::parse(line).map_err(|e| errors::protocol("invalid_line", e.to_string()))?;
    let fields = PyDict::new(py);
    let tags = PyDict::new(py);
    for (key, value) in msg.tags() {
        tags.set_item(key, value.as_ref())?;
    }
    fields.set_item("tags", tags)?;
    fields.set_item("source", msg.source.map(|s| s.raw))?;
    fields.set_item("nick", msg.source.map(|s| s.nick))?;
    fields.set_item("user", msg.source.and_then(|s| s.user))?;
    fields.set_item("host", msg.source.and_then(|s| s.host))?;
    fields.set_item("command", msg.command)?;
    fields.set_item("params", PyList::new(py, msg.params())?.to_tuple())?;
    convert::event(py, "irc", "message", &fields)
}

/// Formats `PRIVMSG target :text` (no CRLF); raises `LocalError` when it cannot be one line.
#[pyfunction]
fn privmsg(target: &str, text: &str) -> PyResult<String> {
    core::privmsg(target, text).map_err(|e| errors::local("invalid_line", e.to_string()))
}

/// An IRC client session over raw socket bytes: registration (`NICK`/`USER`, nick-in-use
/// fallback), `PING`/`PONG`, keepalive, `JOIN`, learning our prefix. For hosts that speak IRC
/// but not OA1; `oa1.Desk`/`oa1.Remote` include one.
///
/// `Session("desk", ["#desk"], now_ms=0, password=None, ping_interval_ms=60000, ...)`.
#[pyclass(module = "deskwire.irc", name = "Session")]
pub struct Session(Slot<core::Session>);

#[pymethods]
impl Session {
    #[new]
    #[pyo3(signature = (nick, channels = Vec::new(), *, now_ms = 0, **options))]
    fn new(
        py: Python<'_>,
        nick: &str,
        channels: Vec<String>,
        now_ms: u64,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let dict = match options {
            Some(o) => o.copy()?,
            None => PyDict::new(py),
        };
        dict.set_item("nick", nick)?;
        dict.set_item("channels", channels)?;
        let config: core::SessionConfig = from_py("session config", dict.as_any())?;
        config.validate().map_err(raise)?;
        Ok(Session(Slot::new(
            core::Session::new(config, now_ms),
            "session",
        )))
    }

    /// Bytes read from the socket.
    fn handle_bytes(&self, py: Python<'_>, now_ms: u64, data: &[u8]) -> PyResult<()> {
        if data.len() >= BULK_BYTES {
            py.detach(|| self.0.with(|s| s.handle_bytes(now_ms, data)))
        } else {
            self.0.with(|s| s.handle_bytes(now_ms, data))
        }
    }

    /// One line as received (without CRLF).
    fn handle_line(&self, now_ms: u64, line: &[u8]) -> PyResult<()> {
        self.0.with(|s| s.handle_line(now_ms, line))
    }

    /// The socket closed or failed.
    fn handle_eof(&self, now_ms: u64) -> PyResult<()> {
        self.0.with(|s| s.handle_eof(now_ms))
    }

    /// The deadline of the last `Timeout` passed.
    fn handle_timeout(&self, now_ms: u64) -> PyResult<()> {
        self.0.with(|s| s.handle_timeout(now_ms))
    }

    /// A `Transmit` (one line, CRLF included), an event (`Registered`, `Joined`, ...) or a
    /// `Timeout`.
    fn poll_output<'py>(&self, py: Python<'py>, now_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        match self.0.with(|s| s.poll_output(now_ms))? {
            SessionOutput::Transmit(line) => {
                let mut bytes = line.into_bytes();
                bytes.extend_from_slice(b"\r\n");
                convert::transmit(py, &bytes)
            }
            SessionOutput::Event(event) => serde_event(py, "irc", &event),
            SessionOutput::Timeout(at) => convert::timeout(py, at),
        }
    }

    /// Joins `channel`.
    fn join(&self, channel: &str) -> PyResult<()> {
        self.0.with(|s| s.join(channel))?.map_err(raise)
    }

    /// Leaves `channel`.
    fn part(&self, channel: &str) -> PyResult<()> {
        self.0.with(|s| s.part(channel))?.map_err(raise)
    }

    /// Sends `PRIVMSG target :text` (one line; raises when it does not fit).
    fn privmsg(&self, target: &str, text: &str) -> PyResult<()> {
        self.0.with(|s| s.privmsg(target, text))?.map_err(raise)
    }

    /// Leaves the server with `QUIT :reason`.
    #[pyo3(signature = (reason = "bye"))]
    fn quit(&self, reason: &str) -> PyResult<()> {
        self.0.with(|s| s.quit(reason))
    }

    /// Our nick as the server knows it.
    #[getter]
    fn nick(&self) -> PyResult<String> {
        self.0.with(|s| s.identity().nick().to_owned())
    }

    /// Whether the server accepted us.
    #[getter]
    fn registered(&self) -> PyResult<bool> {
        self.0.with(|s| s.is_registered())
    }

    /// The channels we are in.
    #[getter]
    fn channels(&self) -> PyResult<Vec<String>> {
        self.0.with(|s| s.channels().to_vec())
    }

    /// The counters, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.0.with(|s| s.stats())?)
    }

    /// Drops the engine; later calls raise `ClosedError`.
    fn close(&self) {
        self.0.close()
    }
}

/// The wait (ms) before reconnection try `attempt` (0 for the first) under the core's reconnect
/// policy: `first_delay_ms` doubling up to `max_delay_ms`, plus `random` modulo one more than
/// `jitter_percent` of it. Raises `LocalError` (`invalid_value`) for a policy that cannot work.
#[pyfunction]
#[pyo3(signature = (attempt, random, *, first_delay_ms = 1000, max_delay_ms = 10000, jitter_percent = 50))]
fn reconnect_delay_ms(
    attempt: u32,
    random: u64,
    first_delay_ms: u64,
    max_delay_ms: u64,
    jitter_percent: u32,
) -> PyResult<u64> {
    let policy = deskwire::reconnect::ReconnectPolicy {
        first_delay_ms,
        max_delay_ms,
        jitter_percent,
    };
    policy
        .validate()
        .map_err(|e| errors::local("invalid_value", e.to_string()))?;
    Ok(policy.delay_ms(attempt, random))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse, m)?)?;
    m.add_function(wrap_pyfunction!(reconnect_delay_ms, m)?)?;
    m.add_function(wrap_pyfunction!(privmsg, m)?)?;
    m.add_class::<Session>()?;
    Ok(())
}
