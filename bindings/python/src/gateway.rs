//! `deskwire.gateway`: the gateway engine (`docs/gateway.md`): jobs, their state
//! machine, idempotent creation, streams and approvals, over messages of many connections.

use deskwire::gateway::ops::Level;
use deskwire::gateway::{
    self as core, ApprovalTicket, Artifacts, ConnId, ErrorBody, JobState, Output, Timestamp, Token,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{self, from_py, serde_event, to_py};
use crate::errors::{self, Kind, tagged};
use crate::slot::Slot;

fn local(e: core::LocalError) -> PyErr {
    tagged(Kind::Local, &e)
}

/// The gateway: answers the Commander's requests (`jobs.create`, `jobs.start`, `jobs.status`,
/// `jobs.stream`, approvals, ...) on the connections the host names, and takes the executor's
/// reports (`transition`, `review_ready`, `complete`, `fail`, `log`, `request_approval`).
///
/// `Gateway(tokens=["secret"], now_ms=0, entropy=os.urandom(32), **config)`: `config` keys are
/// the core's `Config` (camelCase, e.g. `maxJobs`); `entropy` (32 bytes) makes approval ids.
#[pyclass(module = "deskwire.gateway", name = "Gateway")]
pub struct Gateway(Slot<core::Gateway>);

#[pymethods]
impl Gateway {
    #[new]
    #[pyo3(signature = (tokens, *, now_ms = 0, entropy = None, **config))]
    fn new(
        py: Python<'_>,
        tokens: Vec<String>,
        now_ms: u64,
        entropy: Option<[u8; 32]>,
        config: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let dict = match config {
            Some(c) => c.copy()?,
            None => PyDict::new(py),
        };
        let mut config: core::Config = from_py("gateway config", dict.as_any())?;
        config.tokens = tokens.iter().map(|t| Token::new(t.as_str())).collect();
        let entropy = match entropy {
            Some(e) => e,
            None => {
                let bytes = py.import("os")?.call_method1("urandom", (32,))?;
                bytes.extract()?
            }
        };
        let engine = core::Gateway::new(config, now_ms, entropy).map_err(local)?;
        Ok(Gateway(Slot::new(engine, "gateway")))
    }

    /// A message arrived on connection `conn` (raises `LocalError` `backpressure` when the
    /// output queue is full: drain `poll_output` and feed it again).
    fn handle_message(&self, now_ms: u64, conn: u64, data: &[u8]) -> PyResult<()> {
        self.0
            .with(|g| g.handle_message(now_ms, ConnId(conn), data))?
            .map_err(local)
    }

    /// Before accepting a WebSocket upgrade that presents `token` (or none): `None` to accept
    /// it, or why to refuse it as `(http_status, close_code, message)`: 401 for a token that
    /// is not accepted, 503 when `maxConnections` connections are authenticated already
    /// (`close_code` is for a connection accepted before the refusal was known: 1008, 1013).
    #[pyo3(signature = (token))]
    fn check_connection(&self, token: Option<&str>) -> PyResult<Option<(u16, u16, String)>> {
        Ok(self
            .0
            .with(|g| g.check_connection(token))?
            .err()
            .map(|r| (r.http_status(), r.close_code(), r.to_string())))
    }

    /// Authenticates `conn` once for all its requests (the WebSocket handshake's token).
    fn authenticate_connection(&self, conn: u64, token: &str) -> PyResult<bool> {
        self.0
            .with(|g| g.authenticate_connection(ConnId(conn), token))
    }

    /// `conn` closed: its streams end.
    fn close_connection(&self, conn: u64) -> PyResult<()> {
        self.0.with(|g| g.close_connection(ConnId(conn)))
    }

    /// Moves job `job_id` to state `to` (`"RUNNING"`, ...) if the state machine allows it.
    fn transition(&self, now_ms: u64, job_id: &str, to: &Bound<'_, PyAny>) -> PyResult<()> {
        let to: JobState = from_py("job state", to)?;
        self.0
            .with(|g| g.transition(now_ms, job_id, to))?
            .map_err(local)
    }

    /// Execution finished: `RUNNING → REVIEW_READY` with the artifacts (`summary`, `git`,
    /// `diff`, `checks`, `commands`).
    fn review_ready(
        &self,
        now_ms: u64,
        job_id: &str,
        artifacts: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let artifacts: Artifacts = from_py("artifacts", artifacts)?;
        self.0
            .with(|g| g.review_ready(now_ms, job_id, artifacts))?
            .map_err(local)
    }

    /// The job is done: `→ COMPLETED`.
    #[pyo3(signature = (now_ms, job_id, artifacts = None))]
    fn complete(
        &self,
        now_ms: u64,
        job_id: &str,
        artifacts: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let artifacts: Option<Artifacts> =
            artifacts.map(|a| from_py("artifacts", a)).transpose()?;
        self.0
            .with(|g| g.complete(now_ms, job_id, artifacts))?
            .map_err(local)
    }

    /// The job failed: `→ FAILED` with the error body (`{"code", "message"}`).
    fn fail(&self, now_ms: u64, job_id: &str, error: &Bound<'_, PyAny>) -> PyResult<()> {
        let error: ErrorBody = from_py("error body", error)?;
        self.0
            .with(|g| g.fail(now_ms, job_id, error))?
            .map_err(local)
    }

    /// The job's changes were undone: `→ ROLLED_BACK`.
    fn roll_back(&self, now_ms: u64, job_id: &str) -> PyResult<()> {
        self.0.with(|g| g.roll_back(now_ms, job_id))?.map_err(local)
    }

    /// The gateway cancels the job: `→ CANCELLED`.
    fn cancel(&self, now_ms: u64, job_id: &str) -> PyResult<()> {
        self.0.with(|g| g.cancel(now_ms, job_id))?.map_err(local)
    }

    /// What the job is doing (`step`, `progress` in 0..=1), for `jobs.status`.
    #[pyo3(signature = (job_id, step = None, progress = None))]
    fn set_progress(
        &self,
        job_id: &str,
        step: Option<&str>,
        progress: Option<f64>,
    ) -> PyResult<()> {
        self.0
            .with(|g| g.set_progress(job_id, step, progress))?
            .map_err(local)
    }

    /// A log line for the job's streams (`level` `"info"`, `"warn"`, `"error"`, ...).
    fn log(&self, job_id: &str, level: &Bound<'_, PyAny>, msg: &str) -> PyResult<()> {
        let level: Level = from_py("level", level)?;
        self.0.with(|g| g.log(job_id, level, msg))?.map_err(local)
    }

    /// The executor wants to run a sensitive step: `{"approval_id", "status"}` (pending until
    /// the Commander decides; `ApprovalDecided` follows).
    #[pyo3(signature = (job_id, kind, requested, approval_id = None))]
    fn request_approval<'py>(
        &self,
        py: Python<'py>,
        job_id: &str,
        kind: &str,
        requested: &str,
        approval_id: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let ticket: ApprovalTicket = self
            .0
            .with(|g| g.request_approval(job_id, approval_id, kind, requested))?
            .map_err(local)?;
        let dict = PyDict::new(py);
        dict.set_item("approval_id", ticket.approval_id)?;
        dict.set_item("status", to_py(py, &ticket.status)?)?;
        Ok(dict)
    }

    /// The job's state (`"RUNNING"`, ...), `None` for an unknown job.
    fn job_state<'py>(&self, py: Python<'py>, job_id: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        let state = self.0.with(|g| g.job_state(job_id))?;
        state.map(|s| to_py(py, &s)).transpose()
    }

    /// The deadline of the last `Timeout` passed (jobs time out).
    fn handle_timeout(&self, now_ms: u64) -> PyResult<()> {
        self.0.with(|g| g.handle_timeout(now_ms))
    }

    /// A `Send` (a message for one connection, stamped with `ts`: RFC 3339 text, default now
    /// from the wall clock), an event (`JobCreated`, `StateChanged`, `ApprovalDecided`, ...) or
    /// a `Timeout`.
    #[pyo3(signature = (now_ms, ts = None))]
    fn poll_output<'py>(
        &self,
        py: Python<'py>,
        now_ms: u64,
        ts: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.0.with(|g| g.poll_output(now_ms))? {
            Output::Transmit(t) => {
                let ts = match ts {
                    Some(text) => Timestamp::parse(text).ok_or_else(|| {
                        errors::local("invalid_value", format!("ts {text:?} is not RFC 3339"))
                    })?,
                    None => {
                        let unix_ms = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_millis() as u64)
                            .unwrap_or(0);
                        Timestamp::from_unix_ms(unix_ms)
                    }
                };
                let fields = PyDict::new(py);
                fields.set_item("conn", t.conn.0)?;
                fields.set_item(
                    "message",
                    convert::py_of_value(py, &t.message.envelope(ts).to_value())?,
                )?;
                convert::event(py, "gateway", "send", &fields)
            }
            Output::Event(event) => serde_event(py, "gateway", &event),
            Output::Timeout(at) => convert::timeout(py, at),
            #[allow(unreachable_patterns)]
            other => Err(errors::local("unknown_event", format!("{other:?}"))),
        }
    }

    /// The counters, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = self.0.with(|g| g.stats().clone())?;
        to_py(py, &stats)
    }

    /// Drops the engine; later calls raise `ClosedError`.
    fn close(&self) {
        self.0.close()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Gateway>()?;
    Ok(())
}
