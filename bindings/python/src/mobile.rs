//! `deskwire.mobile`: the mobile companion's WebSocket engines (`Client` on the phone, `Server`
//! on the desktop) over text frames: pairing, bearer tokens, reconnect backoff, state sync,
//! chat, permission prompts.

use deskwire::mobile::{self as core, ConnId};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{self, from_py, serde_event, to_py};
use crate::errors::{Kind, tagged};
use crate::slot::Slot;

fn local(e: core::LocalError) -> PyErr {
    tagged(Kind::Local, &e)
}

fn config<T: serde::de::DeserializeOwned>(
    py: Python<'_>,
    what: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<T> {
    let dict = match options {
        Some(o) => o.copy()?,
        None => PyDict::new(py),
    };
    from_py(what, dict.as_any())
}

/// The phone's end: `start` (with a stored token) or `pair` (with the code the desktop shows),
/// then follow `poll_output`: `Connect` (open the WebSocket, with the bearer token if any),
/// `Transmit` (send the UTF-8 bytes as one text frame), `Close`, events, `Timeout`. Report the
/// socket with `connected`/`disconnected` and every received text frame with `handle_text`.
///
/// `Client(token=None, **config)`: `config` keys are the core's (`backoff_ms`, ...).
#[pyclass(module = "deskwire.mobile", name = "Client")]
pub struct Client(Slot<core::Client>);

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (token = None, **options))]
    fn new(
        py: Python<'_>,
        token: Option<String>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let config: core::client::Config = config(py, "mobile client config", options)?;
        Ok(Client(Slot::new(
            core::Client::new(config, token),
            "mobile client",
        )))
    }

    /// Connects with the stored token.
    fn start(&self, now_ms: u64) -> PyResult<()> {
        self.0.with(|c| c.start(now_ms))?.map_err(local)
    }

    /// Connects and pairs with the code the desktop shows.
    fn pair(&self, now_ms: u64, code: &str) -> PyResult<()> {
        self.0.with(|c| c.pair(now_ms, code))?.map_err(local)
    }

    /// Disconnects and stays offline.
    fn stop(&self, now_ms: u64) -> PyResult<()> {
        self.0.with(|c| c.stop(now_ms))
    }

    /// Forgets the stored token (pair again afterwards).
    fn forget_token(&self) -> PyResult<()> {
        self.0.with(|c| c.forget_token())
    }

    /// The WebSocket opened.
    fn connected(&self, now_ms: u64) -> PyResult<()> {
        self.0.with(|c| c.connected(now_ms))?.map_err(local)
    }

    /// The WebSocket closed or failed: `"closed"`, `"unauthorized"`, `"server_timeout"` or
    /// `{"failed": "why"}`.
    #[pyo3(signature = (now_ms, reason = None))]
    fn disconnected(&self, now_ms: u64, reason: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let reason: core::client::DisconnectReason = match reason {
            Some(r) => from_py("disconnect reason", r)?,
            None => core::client::DisconnectReason::Closed,
        };
        self.0.with(|c| c.disconnected(now_ms, reason))
    }

    /// One text frame received.
    fn handle_text(&self, now_ms: u64, text: &str) -> PyResult<()> {
        self.0.with(|c| c.handle_text(now_ms, text))
    }

    /// The deadline of the last `Timeout` passed.
    fn handle_timeout(&self, now_ms: u64) -> PyResult<()> {
        self.0.with(|c| c.handle_timeout(now_ms))
    }

    /// Answers the permission request `id`.
    #[pyo3(signature = (now_ms, id, approved, remember = false))]
    fn respond_permission(
        &self,
        now_ms: u64,
        id: &str,
        approved: bool,
        remember: bool,
    ) -> PyResult<()> {
        self.0
            .with(|c| c.respond_permission(now_ms, id, approved, remember))?
            .map_err(local)
    }

    /// Sends an agent command (`{"action": "start", "task": ...}`).
    fn send_command(&self, now_ms: u64, command: &Bound<'_, PyAny>) -> PyResult<()> {
        let command: core::Command = from_py("command", command)?;
        self.0
            .with(|c| c.send_command(now_ms, command))?
            .map_err(local)
    }

    /// Sends a chat message.
    fn send_message(&self, now_ms: u64, content: &str) -> PyResult<()> {
        self.0
            .with(|c| c.send_message(now_ms, content))?
            .map_err(local)
    }

    /// `Connect`, `Transmit` (a text frame as UTF-8 bytes), `Close`, an event or a `Timeout`.
    fn poll_output<'py>(&self, py: Python<'py>, now_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        use core::client::Output;
        match self.0.with(|c| c.poll_output(now_ms))? {
            Output::Transmit(text) => convert::transmit(py, text.as_bytes()),
            Output::Timeout(at) => convert::timeout(py, at),
            Output::Event(event) => serde_event(py, "mobile.client", &event),
            other => serde_event(py, "mobile.client", &other),
        }
    }

    /// The connection state (`"idle"`, `{"waiting": {"retry_at": ms}}`, `"connecting"`,
    /// `"authenticating"`, `{"online": {"synced": bool}}`).
    #[getter]
    fn connection_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.0.with(|c| c.connection_state())?)
    }

    /// The bearer token, once paired.
    #[getter]
    fn token(&self) -> PyResult<Option<String>> {
        self.0.with(|c| c.token().map(str::to_owned))
    }

    /// The ids of the permission requests that can still be answered, oldest first (past
    /// `max_pending_permissions` the oldest are dropped, counted in `stats()["dropped"]`).
    #[getter]
    fn pending_permissions(&self) -> PyResult<Vec<String>> {
        self.0
            .with(|c| c.pending_permissions().map(str::to_owned).collect())
    }

    /// The counters, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.0.with(|c| c.stats())?)
    }

    /// Drops the engine; later calls raise `ClosedError`.
    fn close(&self) {
        self.0.close()
    }
}

/// The desktop's end: one engine for every phone connection (`conn`, numbered by the host).
/// `open` a connection when a WebSocket upgrade arrives (with its bearer token, if any) and
/// follow its admission; feed every text frame to `handle_text`; `poll_output` gives `Send`
/// (a text frame for one connection), `CloseConnection`, events, `Timeout`.
///
/// `Server(entropy=os.urandom(32), **config)`.
#[pyclass(module = "deskwire.mobile", name = "Server")]
pub struct Server(Slot<core::Server>);

#[pymethods]
impl Server {
    #[new]
    #[pyo3(signature = (*, entropy = None, **options))]
    fn new(
        py: Python<'_>,
        entropy: Option<[u8; 32]>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let config: core::server::Config = config(py, "mobile server config", options)?;
        let entropy = match entropy {
            Some(e) => e,
            None => py.import("os")?.call_method1("urandom", (32,))?.extract()?,
        };
        Ok(Server(Slot::new(
            core::Server::new(config, entropy),
            "mobile server",
        )))
    }

    /// Accepts `token` as a bearer token (one issued earlier and stored by the host);
    /// `LocalError` (`tokens_full`) when `max_tokens` are held (none is dropped to make room).
    fn add_token(&self, token: &str) -> PyResult<()> {
        self.0.with(|s| s.add_token(token))?.map_err(local)
    }

    /// Revokes `token`; its connections are closed (`CloseConnection` with `"revoked"`).
    fn revoke_token(&self, token: &str) -> PyResult<bool> {
        self.0.with(|s| s.revoke_token(token))
    }

    /// Opens pairing with a new code (returned), on the user's action only: pairing stays
    /// closed after a success or a burnt code. `LocalError` (`tokens_full`) while `max_tokens`
    /// phones are paired.
    fn start_pairing(&self, now_ms: u64) -> PyResult<String> {
        self.0.with(|s| s.start_pairing(now_ms))?.map_err(local)
    }

    /// Withdraws the pairing code.
    fn cancel_pairing(&self) -> PyResult<()> {
        self.0.with(|s| s.cancel_pairing())
    }

    /// The pairing code in force, if any.
    fn pairing_code(&self, now_ms: u64) -> PyResult<Option<String>> {
        self.0.with(|s| s.pairing_code(now_ms).map(str::to_owned))
    }

    /// A WebSocket upgrade on `conn`: `"authenticated"`, `"awaiting_pairing"` or
    /// `{"refused": "bad_token" | "too_many_connections" | "too_many_unpaired"}`.
    #[pyo3(signature = (now_ms, conn, bearer = None))]
    fn open<'py>(
        &self,
        py: Python<'py>,
        now_ms: u64,
        conn: u64,
        bearer: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let admission = self
            .0
            .with(|s| s.open(now_ms, ConnId(conn), bearer))?
            .map_err(local)?;
        to_py(py, &admission)
    }

    /// The WebSocket of `conn` closed.
    fn closed(&self, now_ms: u64, conn: u64) -> PyResult<()> {
        self.0.with(|s| s.closed(now_ms, ConnId(conn)))
    }

    /// Closes `conn` from our side.
    fn close_connection(&self, now_ms: u64, conn: u64) -> PyResult<()> {
        self.0
            .with(|s| s.close(now_ms, ConnId(conn)))?
            .map_err(local)
    }

    /// One text frame from `conn`.
    fn handle_text(&self, now_ms: u64, conn: u64, text: &str) -> PyResult<()> {
        self.0.with(|s| s.handle_text(now_ms, ConnId(conn), text))
    }

    /// The agent's state (`{"status": "Running", "data": {"task_id", "iteration"}}`, ...), synced to
    /// every phone.
    fn set_state(&self, now_ms: u64, state: &Bound<'_, PyAny>) -> PyResult<()> {
        let state: core::AgentState = from_py("agent state", state)?;
        self.0.with(|s| s.set_state(now_ms, state))
    }

    /// A chat message to every phone (`{"role", "content", "timestamp"}`).
    fn send_message(&self, now_ms: u64, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let message: core::ChatMessage = from_py("chat message", message)?;
        self.0.with(|s| s.send_message(now_ms, message))
    }

    /// A task update to every phone (`{"task_id", "iteration", "status"}`).
    fn send_task_update(&self, now_ms: u64, update: &Bound<'_, PyAny>) -> PyResult<()> {
        let update: core::TaskUpdate = from_py("task update", update)?;
        self.0.with(|s| s.send_task_update(now_ms, update))
    }

    /// Asks the phones to approve a tool call (`{"tool_name", "command", "description",
    /// "tier"}`); returns the request id (`PermissionAnswered` or `PermissionTimedOut` follows).
    fn request_permission(&self, now_ms: u64, permission: &Bound<'_, PyAny>) -> PyResult<String> {
        let permission: core::server::NewPermission = from_py("permission", permission)?;
        self.0
            .with(|s| s.request_permission(now_ms, permission))?
            .map_err(local)
    }

    /// Withdraws the permission request `id`.
    fn cancel_permission(&self, now_ms: u64, id: &str) -> PyResult<()> {
        self.0
            .with(|s| s.cancel_permission(now_ms, id))?
            .map_err(local)
    }

    /// The deadline of the last `Timeout` passed.
    fn handle_timeout(&self, now_ms: u64) -> PyResult<()> {
        self.0.with(|s| s.handle_timeout(now_ms))
    }

    /// `Send` (a text frame for `conn`), `CloseConnection`, an event or a `Timeout`.
    fn poll_output<'py>(&self, py: Python<'py>, now_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        use core::server::Output;
        match self.0.with(|s| s.poll_output(now_ms))? {
            Output::Timeout(at) => convert::timeout(py, at),
            Output::Event(event) => serde_event(py, "mobile.server", &event),
            other => serde_event(py, "mobile.server", &other),
        }
    }

    /// Phones connected now.
    #[getter]
    fn connections(&self) -> PyResult<usize> {
        self.0.with(|s| s.connections())
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Client>()?;
    m.add_class::<Server>()?;
    Ok(())
}
