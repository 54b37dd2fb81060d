//! `deskwire.rexd`: REXD's typed messages (params, results, events checked and written back in
//! canonical form) and `rex`'s targets (the same file, names and daemon command line).

use std::path::PathBuf;

use deskwire::rexd::{self as core, Method, RexdError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use rex_targets::{Endpoint, Targets, default_path};

use crate::convert::{self, raw_of, to_py};
use crate::errors::{self, raise};

fn raw_value(
    what: &str,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Box<serde_json::value::RawValue>>> {
    value
        .filter(|v| !v.is_none())
        .map(|v| raw_of(what, v).map(|r| r.as_raw().to_owned()))
        .transpose()
}

/// The params of a request to `method`, checked against the method's type and written back in
/// canonical form (a dict). Raises `ProtocolError` with code `unknown_method` or
/// `invalid_params`.
#[pyfunction]
#[pyo3(signature = (method, params = None))]
fn parse_params<'py>(
    py: Python<'py>,
    method: &str,
    params: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let raw = raw_value("params", params)?;
    let request = core::Request::parse(method, raw.as_deref()).map_err(raise)?;
    convert::py_of_value(py, &request.params_value())
}

/// The result of a call of `method`, checked against the method's result type and written back
/// in canonical form.
#[pyfunction]
fn parse_result<'py>(
    py: Python<'py>,
    method: &str,
    result: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let method = Method::from_name(method)
        .ok_or_else(|| raise(RexdError::UnknownMethod(method.to_owned())))?;
    let raw = raw_of("result", result)?;
    let response = core::Response::parse(method, raw.as_raw()).map_err(raise)?;
    to_py(py, &response)
}

/// The params of an event notification (`exec.stdout`, `exec.stderr`, `exec.exit`,
/// `exec.error`, `pty.output`, `pty.exit`), checked and written back in canonical form.
#[pyfunction]
#[pyo3(signature = (method, params = None))]
fn parse_event<'py>(
    py: Python<'py>,
    method: &str,
    params: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let raw = raw_value("params", params)?;
    let event = core::Event::parse(method, raw.as_deref()).map_err(raise)?;
    let value =
        serde_json::to_value(&event).map_err(|e| errors::local("unserializable", e.to_string()))?;
    convert::py_of_value(py, value.get("params").unwrap_or(&serde_json::Value::Null))
}

/// The spec's name of a REXD error code (`-32002` → `"forbidden_path"`), `None` for a number
/// REXD does not define.
#[pyfunction]
fn error_name(code: i64) -> Option<&'static str> {
    core::ErrorCode::from_code(code).map(core::ErrorCode::name)
}

/// The method names REXD serves (requests) and sends (events).
#[pyfunction]
fn methods() -> (Vec<&'static str>, Vec<&'static str>) {
    let all = Method::ALL;
    (
        all.iter()
            .filter(|m| !m.is_event())
            .map(|m| m.as_str())
            .collect(),
        all.iter()
            .filter(|m| m.is_event())
            .map(|m| m.as_str())
            .collect(),
    )
}

/// Resolves a target as `rex` does: a name from the targets file (`targets_file`, else
/// `$REX_TARGETS_FILE`, else `~/.config/rex/targets.toml`), `local`, or an `ssh://user@host[:port]`
/// URL; `None` is the file's current target (or `$REX_TARGET`, or `local`). Returns
/// `{"name", "url", "argv", "workspace_roots", "cwd", "local", "rexd_install"}`: `argv` starts
/// the daemon with its stdio as the connection (`rexd --stdio`, or `ssh -T -e none … rexd
/// --stdio`); `rexd_install` says where rexd comes from, for an error when it is missing. `rexd`
/// overrides the daemon's path, `rexd_args` its extra arguments (e.g. `["--root", dir]`);
/// `resume` starts it as `rexd --stdio --resumable` (the bridge to the user's agent).
#[pyfunction]
#[pyo3(signature = (target = None, *, targets_file = None, rexd = None, rexd_args = None, resume = false))]
fn resolve_target<'py>(
    py: Python<'py>,
    target: Option<&str>,
    targets_file: Option<PathBuf>,
    rexd: Option<String>,
    rexd_args: Option<Vec<String>>,
    resume: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let file = default_path(targets_file.as_deref());
    let targets = Targets::load(&file).map_err(|e| errors::local("targets_file", e.to_string()))?;
    let name = targets.chosen_name(target);
    let mut spec = targets
        .lookup(&name, &file)
        .map_err(|e| errors::local("unknown_target", e.to_string()))?;
    if rexd.is_some() {
        spec.rexd = rexd;
    }
    if let Some(args) = rexd_args {
        spec.rexd_args = args;
    }
    if resume {
        // As rex does: the daemon must outlive the link, so it is the bridge to the agent.
        spec.rexd_args.insert(0, "--resumable".into());
    }
    let local = matches!(
        spec.endpoint()
            .map_err(|e| errors::local("bad_target", e.to_string()))?,
        Endpoint::Local
    );
    let command = spec
        .command()
        .map_err(|e| errors::local("bad_target", e.to_string()))?;
    let mut argv = vec![command.get_program().to_string_lossy().into_owned()];
    argv.extend(command.get_args().map(|a| a.to_string_lossy().into_owned()));
    let dict = PyDict::new(py);
    dict.set_item("name", &name)?;
    dict.set_item("url", &spec.url)?;
    dict.set_item("argv", argv)?;
    dict.set_item("workspace_roots", &spec.workspace_roots)?;
    dict.set_item("cwd", &spec.cwd)?;
    dict.set_item("local", local)?;
    dict.set_item("rexd_install", rex_targets::REXD_INSTALL_HINT)?;
    Ok(dict)
}

/// The raw-frame splitter (`docs/rexd-raw-frames.md`) between a `rexd --stdio` link's bytes
/// and the JSON-RPC peer: `feed` takes what the link read and returns what the peer should
/// see (`feed_text` and `feed_binary` take a `/ws` link's messages); the bytes after a raw
/// `fs.read` answer wait under its id for `take`, those after an output event in arrival
/// order for `take_output`. Only calls announced with `expect` may carry bytes, no more than
/// their `max`, and output events only after `allow_output`: anything else raises
/// `ProtocolError` (code `raw_frame`), after which the link cannot be read on.
#[pyclass(module = "deskwire.rexd", name = "RawFrames")]
pub struct RawFrames(std::sync::Mutex<core::frames::RawFrames>);

impl RawFrames {
    fn with<R>(&self, f: impl FnOnce(&mut core::frames::RawFrames) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[pymethods]
impl RawFrames {
    #[new]
    fn new() -> Self {
        RawFrames(std::sync::Mutex::new(core::frames::RawFrames::default()))
    }

    /// Takes bytes read from the link; returns the bytes the peer should see (whole lines
    /// where a line announces raw bytes, any cut otherwise).
    fn feed<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = Vec::with_capacity(data.len());
        self.with(|f| f.feed(data, &mut |b| out.extend_from_slice(b)))
            .map_err(|e| errors::protocol("raw_frame", e.to_string()))?;
        Ok(PyBytes::new(py, &out))
    }

    /// Takes one text message from a `/ws` link: one JSON value, returned as the line the peer
    /// should see (`\n` appended). A text message that announces raw bytes is refused: on
    /// `/ws` they come in binary messages only.
    fn feed_text<'py>(&self, py: Python<'py>, message: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let mut line = Vec::with_capacity(message.len() + 1);
        line.extend_from_slice(message);
        line.push(b'\n');
        let mut out = Vec::with_capacity(line.len());
        self.with(|f| f.feed_text(&line, &mut |b| out.extend_from_slice(b)))
            .map_err(|e| errors::protocol("raw_frame", e.to_string()))?;
        Ok(PyBytes::new(py, &out))
    }

    /// Takes one binary message from a `/ws` link: a raw frame whole (its JSON line, `\n`,
    /// then exactly `raw_bytes` bytes); returns the line for the peer, and the bytes wait as
    /// `feed`'s do. A message that was not asked for, or whose length disagrees with its
    /// line, is refused.
    fn feed_binary<'py>(&self, py: Python<'py>, message: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = Vec::new();
        self.with(|f| f.feed_binary(message.to_vec(), &mut |b| out.extend_from_slice(b)))
            .map_err(|e| errors::protocol("raw_frame", e.to_string()))?;
        Ok(PyBytes::new(py, &out))
    }

    /// Call `id` asked for raw bytes, `max` at most.
    fn expect(&self, id: &Bound<'_, PyAny>, max: u64) -> PyResult<()> {
        let id = crate::jsonrpc::id_of(id)?;
        self.with(|f| f.expect(id, max));
        Ok(())
    }

    /// Call `id` was answered with an error: no bytes will come for it.
    fn forget(&self, id: &Bound<'_, PyAny>) -> PyResult<()> {
        let id = crate::jsonrpc::id_of(id)?;
        self.with(|f| f.forget(&id));
        Ok(())
    }

    /// Call `id` is no longer wanted: its bytes, if they come, are skipped.
    fn drop_call(&self, id: &Bound<'_, PyAny>) -> PyResult<()> {
        let id = crate::jsonrpc::id_of(id)?;
        self.with(|f| f.drop_call(&id));
        Ok(())
    }

    /// The bytes that came after the answer to `id`, once (`None` when none came).
    fn take<'py>(
        &self,
        py: Python<'py>,
        id: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let id = crate::jsonrpc::id_of(id)?;
        Ok(self.with(|f| f.take(&id)).map(|b| PyBytes::new(py, &b)))
    }

    /// The session negotiated raw output: output events may carry `max` bytes each.
    fn allow_output(&self, max: u64) {
        self.with(|f| f.allow_output(max));
    }

    /// The bytes of the oldest output event handed on and not yet taken; call it once for
    /// each `exec.stdout`/`exec.stderr` event whose params have `raw_bytes`, in order.
    fn take_output<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.with(|f| f.take_output()).map(|b| PyBytes::new(py, &b))
    }
}

/// A refused `zstd` payload as `ProtocolError`: code `too_large` (it inflates past its limit)
/// or `bad_payload`.
fn inflate_error(e: core::zstd::InflateError) -> PyErr {
    let code = match e {
        core::zstd::InflateError::TooLarge { .. } => "too_large",
        _ => "bad_payload",
    };
    errors::protocol(code, e.to_string())
}

/// The bytes of one zstd frame (a raw frame's bytes in a session with compression), inflated
/// under `limit` (`docs/rexd-compression.md`): a frame that states more, inflates past it,
/// needs a window over 8 MiB or is not one well-formed frame raises `ProtocolError` (code
/// `too_large` or `bad_payload`) without being expanded. Pure Rust; the GIL is released.
#[pyfunction]
fn inflate<'py>(py: Python<'py>, frame: &[u8], limit: usize) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::new();
    py.detach(|| core::zstd::inflate_into(frame, limit, &mut out))
        .map_err(inflate_error)?;
    Ok(PyBytes::new(py, &out))
}

/// The bytes a string field carries with its `encoding`: `utf8`, `base64`, or `zstd` (the
/// base64 of one zstd frame, inflated under `limit` as `inflate` does).
#[pyfunction]
fn decode<'py>(
    py: Python<'py>,
    text: &str,
    encoding: &str,
    limit: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let encoding: core::Encoding = serde_json::from_value(encoding.into())
        .map_err(|_| errors::protocol("bad_payload", format!("unknown encoding {encoding:?}")))?;
    let mut out = Vec::new();
    py.detach(|| core::zstd::decode_into(text, encoding, limit, &mut out))
        .map_err(inflate_error)?;
    Ok(PyBytes::new(py, &out))
}

/// Whether `host` names this machine (a loopback address, or `localhost`): the only host a
/// client reaches in plain text (`http://`, `ws://`), as `rex` decides it.
#[pyfunction]
fn is_loopback_host(host: &str) -> bool {
    rex_targets::is_loopback(host)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The longest message (NDJSON line, WebSocket message) a daemon takes by default.
    m.add(
        "MAX_MESSAGE_BYTES",
        deskwire::jsonrpc::framing::DEFAULT_MAX_MESSAGE_BYTES,
    )?;
    m.add_class::<RawFrames>()?;
    m.add_function(wrap_pyfunction!(is_loopback_host, m)?)?;
    m.add_function(wrap_pyfunction!(inflate, m)?)?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_function(wrap_pyfunction!(parse_params, m)?)?;
    m.add_function(wrap_pyfunction!(parse_result, m)?)?;
    m.add_function(wrap_pyfunction!(parse_event, m)?)?;
    m.add_function(wrap_pyfunction!(methods, m)?)?;
    m.add_function(wrap_pyfunction!(error_name, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_target, m)?)?;
    Ok(())
}
