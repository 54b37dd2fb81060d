//! `deskwire.jsonrpc`: the correlation engine (`Peer`) in each dialect, over NDJSON or
//! `Content-Length` framing.

use deskwire::gateway::Token;
use deskwire::gateway::commander::GatewayCommander;
use deskwire::jsonrpc::{
    self as core, Code, Id, JsonRpc2, Output, PeerConfig, RemoteError, Sidecar,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyString};

use crate::convert::{self, from_py, raw_of, serde_event, to_py, value_of};
use crate::errors::{self, raise};
use crate::oa1::BULK_BYTES;
use crate::slot::Slot;

/// A JSON-RPC id from Python: an int, a str or None.
pub fn id_of(id: &Bound<'_, PyAny>) -> PyResult<Id> {
    if id.is_none() {
        return Ok(Id::Null);
    }
    if let Ok(n) = id.cast::<PyInt>() {
        return n
            .extract::<i64>()
            .map(Id::Number)
            .map_err(|_| errors::local("invalid_value", "a numeric id must fit 64 bits"));
    }
    if let Ok(s) = id.cast::<PyString>() {
        return Ok(Id::String(s.to_cow()?.into_owned()));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(
        "a JSON-RPC id is an int, a str or None",
    ))
}

/// An id to Python.
pub fn py_of_id<'py>(py: Python<'py>, id: &Id) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, id)
}

enum Any {
    JsonRpc2(core::Peer<JsonRpc2>),
    Sidecar(core::Peer<Sidecar>),
    Gateway(core::Peer<GatewayCommander>),
}

macro_rules! each {
    ($peer:expr, $p:ident => $body:expr) => {
        match $peer {
            Any::JsonRpc2($p) => $body,
            Any::Sidecar($p) => $body,
            Any::Gateway($p) => $body,
        }
    };
}

/// The gateway dialect's own arguments, taken out of the peer options: the bearer token and
/// the wall-clock time at the host's `now_ms` 0 (for the requests' `ts`).
fn gateway_dialect(options: &Bound<'_, PyDict>) -> PyResult<GatewayCommander> {
    let take = |key: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        let value = options.get_item(key)?;
        if value.is_some() {
            options.del_item(key)?;
        }
        Ok(value)
    };
    let token: String = match take("token")? {
        Some(token) => token
            .extract()
            .map_err(|_| pyo3::exceptions::PyTypeError::new_err("token is a str"))?,
        None => {
            return Err(errors::local(
                "invalid_value",
                "the gateway dialect needs token= (the Commander's bearer token)",
            ));
        }
    };
    if token.trim().is_empty() {
        return Err(errors::local("invalid_value", "token is empty"));
    }
    let epoch_unix_ms: u64 = match take("epoch_unix_ms")? {
        Some(epoch) => epoch.extract().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err(
                "epoch_unix_ms is a non-negative int (Unix ms at now_ms 0)",
            )
        })?,
        None => {
            return Err(errors::local(
                "invalid_value",
                "the gateway dialect needs epoch_unix_ms= (the wall-clock Unix ms at now_ms 0: \
                 int(time.time() * 1000) - now_ms)",
            ));
        }
    };
    Ok(GatewayCommander::new(Token::new(token), epoch_unix_ms))
}

fn params_of(what: &str, params: Option<&Bound<'_, PyAny>>) -> PyResult<Option<core::RawJson>> {
    params.map(|p| raw_of(what, p)).transpose()
}

/// One end of a JSON-RPC-style conversation: it makes calls (ids, deadlines from the
/// per-method timeout policy, progress, cancellation) and answers the calls it receives.
///
/// `Peer("jsonrpc2")` (REXD, strict JSON-RPC 2.0, batches), `Peer("sidecar")` (the sidecar
/// IPC: `{id, method, params}` / `{id, result | error | progress}`) or
/// `Peer("gateway", token=..., epoch_unix_ms=...)` (the gateway RPC's Commander side: requests
/// carry `token` in `auth` and a `ts` of `epoch_unix_ms + now_ms`, `jobs.event` envelopes come
/// as `Notification`; `deskwire.aio.GatewayClient` drives it); `framing="ndjson"` or
/// `"content_length"`; keyword options are the core's `PeerConfig` keys (`max_message_bytes`,
/// `batch_limit`, `max_pending`, `max_incoming`, `timeouts`, `cancel_notification`,
/// `finished_memory`, `max_queued`); missing ones take the dialect's defaults.
///
/// `timeouts` defaults to the dialect's policy: the sidecar spec's per-method table for
/// `"sidecar"` (`health.*` 10 s, `inference.embed` 30 s, `inference.complete`/`plan` 120 s,
/// `training.start` 300 s, `model.*` 60 s, else 30 s), 30 s for every method for
/// `"jsonrpc2"`. Give `timeouts="sidecar"`, `timeouts="default"` (30 s for every method) or a
/// dict `{"rules": [{"prefix", "timeout_ms", "max_total_ms"}], "default_timeout_ms",
/// "default_max_total_factor"}` to choose another.
#[pyclass(module = "deskwire.jsonrpc", name = "Peer")]
pub struct Peer(Slot<Any>);

#[pymethods]
impl Peer {
    #[new]
    #[pyo3(signature = (dialect = "jsonrpc2", *, framing = "ndjson", seed = 0, **options))]
    fn new(
        py: Python<'_>,
        dialect: &str,
        framing: &str,
        seed: u64,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let dict = match options {
            Some(o) => o.copy()?,
            None => PyDict::new(py),
        };
        let gateway = match dialect {
            "gateway" => Some(gateway_dialect(&dict)?),
            _ => None,
        };
        dict.set_item("framing", framing)?;
        let json = value_of("peer config", dict.as_any())?;
        // Missing keys (timeouts included) take the dialect's defaults: the core decides.
        let config = |read: Result<PeerConfig, serde_json::Error>| {
            read.map_err(|e| errors::local("invalid_value", format!("peer config: {e}")))
        };
        let peer = match (dialect, gateway) {
            ("gateway", Some(commander)) => {
                let config = config(PeerConfig::from_json_for(&commander, json))?;
                Any::Gateway(core::Peer::new(commander, config, seed))
            }
            ("jsonrpc2", _) => Any::JsonRpc2(core::Peer::new(
                JsonRpc2,
                config(PeerConfig::from_json_for(&JsonRpc2, json))?,
                seed,
            )),
            ("sidecar", _) => Any::Sidecar(core::Peer::new(
                Sidecar,
                config(PeerConfig::from_json_for(&Sidecar, json))?,
                seed,
            )),
            (other, _) => {
                return Err(errors::local(
                    "invalid_value",
                    format!("dialect {other:?}: use \"jsonrpc2\", \"sidecar\" or \"gateway\""),
                ));
            }
        };
        Ok(Peer(Slot::new(peer, "peer")))
    }

    /// Calls `method` with a generated id (returned); `user` comes back with the answer.
    #[pyo3(signature = (now_ms, method, params = None, user = 0))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        now_ms: u64,
        method: &str,
        params: Option<&Bound<'py, PyAny>>,
        user: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let params = params_of("params", params)?;
        let id = self
            .0
            .with(|p| each!(p, p => p.call(now_ms, method, params, user)))?
            .map_err(raise)?;
        py_of_id(py, &id)
    }

    /// Calls `method` with the id you choose.
    #[pyo3(signature = (now_ms, id, method, params = None, user = 0))]
    fn call_with_id(
        &self,
        now_ms: u64,
        id: &Bound<'_, PyAny>,
        method: &str,
        params: Option<&Bound<'_, PyAny>>,
        user: u64,
    ) -> PyResult<()> {
        let id = id_of(id)?;
        let params = params_of("params", params)?;
        self.0
            .with(|p| each!(p, p => p.call_with_id(now_ms, id, method, params, user)))?
            .map_err(raise)
    }

    /// Sends a notification (no answer).
    #[pyo3(signature = (now_ms, method, params = None))]
    fn notify(&self, now_ms: u64, method: &str, params: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let params = params_of("params", params)?;
        self.0
            .with(|p| each!(p, p => p.notify(now_ms, method, params)))?
            .map_err(raise)
    }

    /// Answers the incoming call `id` with `result`.
    fn respond(
        &self,
        now_ms: u64,
        id: &Bound<'_, PyAny>,
        result: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let id = id_of(id)?;
        let result = raw_of("result", result)?;
        self.0
            .with(|p| each!(p, p => p.respond(now_ms, &id, result)))?
            .map_err(raise)
    }

    /// Answers the incoming call `id` with an error: `code` an int (JSON-RPC 2.0) or a
    /// `SCREAMING_SNAKE` name (sidecar).
    #[pyo3(signature = (now_ms, id, code, message, data = None))]
    fn respond_error(
        &self,
        now_ms: u64,
        id: &Bound<'_, PyAny>,
        code: &Bound<'_, PyAny>,
        message: &str,
        data: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let id = id_of(id)?;
        let code: Code = from_py("error code", code)?;
        let mut error = RemoteError::new(code, message);
        error.data = params_of("error data", data)?;
        self.0
            .with(|p| each!(p, p => p.respond_error(now_ms, &id, error)))?
            .map_err(raise)
    }

    /// Answers the incoming call `id` with the dialect's "method not found".
    fn respond_method_not_found(
        &self,
        now_ms: u64,
        id: &Bound<'_, PyAny>,
        method: &str,
    ) -> PyResult<()> {
        let id = id_of(id)?;
        self.0
            .with(|p| each!(p, p => p.respond_method_not_found(now_ms, &id, method)))?
            .map_err(raise)
    }

    /// Reports progress of the incoming call `id` (sidecar only).
    fn progress(
        &self,
        now_ms: u64,
        id: &Bound<'_, PyAny>,
        progress: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let id = id_of(id)?;
        let progress = raw_of("progress", progress)?;
        self.0
            .with(|p| each!(p, p => p.progress(now_ms, &id, progress)))?
            .map_err(raise)
    }

    /// Stops waiting for our call `id` (its late answer is dropped).
    fn cancel(&self, now_ms: u64, id: &Bound<'_, PyAny>) -> PyResult<()> {
        let id = id_of(id)?;
        self.0
            .with(|p| each!(p, p => p.cancel(now_ms, &id)))?
            .map_err(raise)
    }

    /// Forgets the incoming call `id` without answering it.
    fn forget_incoming(&self, id: &Bound<'_, PyAny>) -> PyResult<()> {
        let id = id_of(id)?;
        self.0
            .with(|p| each!(p, p => p.forget_incoming(&id)))?
            .map_err(raise)
    }

    /// Whether our call `id` still waits for an answer.
    fn is_pending(&self, id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let id = id_of(id)?;
        self.0.with(|p| each!(p, p => p.is_pending(&id)))
    }

    /// Bytes read from the stream.
    fn handle_bytes(&self, py: Python<'_>, now_ms: u64, data: &[u8]) -> PyResult<()> {
        if data.len() >= BULK_BYTES {
            py.detach(|| self.0.with(|p| each!(p, p => p.handle_bytes(now_ms, data))))
        } else {
            self.0.with(|p| each!(p, p => p.handle_bytes(now_ms, data)))
        }
    }

    /// The deadline of the last `Timeout` passed.
    fn handle_timeout(&self, now_ms: u64) -> PyResult<()> {
        self.0.with(|p| each!(p, p => p.handle_timeout(now_ms)))
    }

    /// A `Transmit` (framing included), an event (`Request`, `Notification`, `Response`,
    /// `Failed`, `Progress`, `Malformed`) or a `Timeout`.
    fn poll_output<'py>(&self, py: Python<'py>, now_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        match self.0.with(|p| each!(p, p => p.poll_output(now_ms)))? {
            Output::Transmit(bytes) => convert::transmit(py, &bytes),
            Output::Event(event) => serde_event(py, "jsonrpc", &event),
            Output::Timeout(at) => convert::timeout(py, at),
        }
    }

    /// The counters, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.0.with(|p| each!(p, p => p.stats()))?)
    }

    /// The configuration, as a dict.
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let config = self.0.with(|p| each!(p, p => p.config().clone()))?;
        to_py(py, &config)
    }

    /// Drops the engine; later calls raise `ClosedError`.
    fn close(&self) {
        self.0.close()
    }
}

fn raw_value<'py>(py: Python<'py>, raw: &core::RawJson) -> PyResult<Bound<'py, PyAny>> {
    convert::py_of_json(py, raw.get())
}

/// One message as a dict: `kind` (`request`, `notification`, `response`, `error`), `id`,
/// `method`, `params`, `result`, `error` as present, and `wire`, its canonical form as bytes.
fn message_dict<'py>(py: Python<'py>, message: &core::Message) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    match message {
        core::Message::Request { id, method, params } => {
            dict.set_item("kind", "request")?;
            dict.set_item("id", py_of_id(py, id)?)?;
            dict.set_item("method", method)?;
            if let Some(params) = params {
                dict.set_item("params", raw_value(py, params)?)?;
            }
        }
        core::Message::Notification { method, params } => {
            dict.set_item("kind", "notification")?;
            dict.set_item("method", method)?;
            if let Some(params) = params {
                dict.set_item("params", raw_value(py, params)?)?;
            }
        }
        core::Message::Response { id, result } => {
            dict.set_item("kind", "response")?;
            dict.set_item("id", py_of_id(py, id)?)?;
            dict.set_item("result", raw_value(py, result)?)?;
        }
        core::Message::Error { id, error } => {
            dict.set_item("kind", "error")?;
            dict.set_item("id", py_of_id(py, id)?)?;
            dict.set_item("error", to_py(py, error)?)?;
        }
    }
    dict.set_item(
        "wire",
        pyo3::types::PyBytes::new(py, message.to_json().as_bytes()),
    )?;
    Ok(dict)
}

/// An invalid message as a dict: `kind` `invalid`, the `id` and `error` object a peer answers.
fn invalid_dict<'py>(
    py: Python<'py>,
    invalid: &core::message::Invalid,
) -> PyResult<Bound<'py, PyDict>> {
    let (id, error) = invalid.to_error();
    let dict = PyDict::new(py);
    dict.set_item("kind", "invalid")?;
    dict.set_item("id", py_of_id(py, &id)?)?;
    dict.set_item("error", to_py(py, &error)?)?;
    dict.set_item("reason", invalid.to_string())?;
    Ok(dict)
}

/// Parses one JSON-RPC 2.0 frame as the REXD dialect reads it: a message dict (see
/// `Peer` docs for its keys), or for a batch a list of them (invalid elements as
/// `{"kind": "invalid", "id", "error"}`). A frame that is not a message or a batch at all
/// raises `ProtocolError` whose `.id` and `.error` are what a peer answers.
#[pyfunction]
#[pyo3(signature = (frame, batch_limit = 64))]
fn parse_message<'py>(
    py: Python<'py>,
    frame: &[u8],
    batch_limit: usize,
) -> PyResult<Bound<'py, PyAny>> {
    match core::message::parse(frame, batch_limit) {
        Ok(core::message::Parsed::Single(m)) => Ok(message_dict(py, &m)?.into_any()),
        Ok(core::message::Parsed::Batch(items)) => {
            let list = pyo3::types::PyList::empty(py);
            for item in &items {
                match item {
                    Ok(m) => list.append(message_dict(py, m)?)?,
                    Err(invalid) => list.append(invalid_dict(py, invalid)?)?,
                }
            }
            Ok(list.into_any())
        }
        Err(invalid) => {
            let (id, error) = invalid.to_error();
            let err = errors::protocol("invalid", invalid.to_string());
            let value = err.value(py);
            value.setattr("id", py_of_id(py, &id)?)?;
            value.setattr("error", to_py(py, &error)?)?;
            Err(err)
        }
    }
}

/// Whether `code` is spelled as the sidecar spec requires of error codes
/// (`SCREAMING_SNAKE_CASE`: `[A-Z][A-Z0-9_]*`).
#[pyfunction]
fn is_sidecar_error_code(code: &str) -> bool {
    deskwire::sidecar::is_error_code(code)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Peer>()?;
    m.add_function(wrap_pyfunction!(parse_message, m)?)?;
    m.add_function(wrap_pyfunction!(is_sidecar_error_code, m)?)?;
    Ok(())
}
