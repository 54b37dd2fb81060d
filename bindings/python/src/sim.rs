//! `deskwire.sim`: in-memory IRC for tests and demos. `Network` is a server over raw bytes for
//! `oa1.Desk`/`oa1.Remote`; `Relay` is one channel over lines for `oa1.Client`/`oa1.Server`.

use deskwire::sim::{self as core, ClientId};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::to_py;
use crate::errors::{self, raise};
use crate::slot::Slot;

fn relay_stats<'py>(py: Python<'py>, stats: core::RelayStats) -> PyResult<Bound<'py, PyAny>> {
    let dict = pyo3::types::PyDict::new(py);
    dict.set_item("relayed", stats.relayed)?;
    dict.set_item("cut_lines", stats.cut_lines)?;
    dict.set_item("longest_line", stats.longest_line)?;
    dict.set_item("noise", stats.noise)?;
    Ok(dict.into_any())
}

/// One IRC channel in memory, over lines: members `send` lines (without CRLF) and `recv` what
/// the channel relays to them, with the `:nick!~user@host` prefix a real server adds, the
/// 510-byte limit and the 512-byte cut of relayed lines. `noise=n` injects a noise line after
/// every n messages.
#[pyclass(module = "deskwire.sim", name = "Relay")]
pub struct Relay(Slot<core::Relay>);

#[pymethods]
impl Relay {
    #[new]
    #[pyo3(signature = (channel, *, seed = 0, noise = 0))]
    fn new(channel: &str, seed: u64, noise: u32) -> Self {
        Relay(Slot::new(
            core::Relay::new(channel, seed).with_noise(noise),
            "relay",
        ))
    }

    /// Adds a member (`nick!~user@host`).
    #[pyo3(signature = (nick, user = None, host = "sim.example"))]
    fn join(&self, nick: &str, user: Option<&str>, host: &str) -> PyResult<()> {
        self.0.with(|r| r.join(nick, user.unwrap_or(nick), host))
    }

    /// `from` sends one line (without CRLF) to the server.
    fn send(&self, sender: &str, line: &str) -> PyResult<()> {
        self.0.with(|r| r.send(sender, line))?.map_err(raise)
    }

    /// The next line relayed to `nick` (without CRLF), or `None`.
    fn recv(&self, nick: &str) -> PyResult<Option<String>> {
        self.0.with(|r| r.recv(nick))
    }

    /// The channel's name.
    #[getter]
    fn channel(&self) -> PyResult<String> {
        self.0.with(|r| r.channel().to_owned())
    }

    /// Counters: `relayed`, `cut_lines`, `longest_line`, `noise`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        relay_stats(py, self.0.with(|r| r.stats())?)
    }
}

/// An IRC server in memory, over raw bytes: `connect` opens a connection (an int), the bytes
/// an engine transmits go to `handle_bytes`, and `take_bytes` gives what the server sent it,
/// exactly as a socket would. Registration, `PING`, `JOIN`/`PART`/`QUIT` and channel relay
/// behave like ngircd where it matters (prefixes, the 510-byte limit, cut relayed lines).
#[pyclass(module = "deskwire.sim", name = "Network")]
pub struct Network {
    net: Slot<core::Network>,
    ids: std::sync::Mutex<Vec<ClientId>>,
}

impl Network {
    fn id(&self, connection: usize) -> PyResult<ClientId> {
        let ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        ids.get(connection).copied().ok_or_else(|| {
            errors::local(
                "unknown_connection",
                format!("no connection {connection} on this network"),
            )
        })
    }
}

#[pymethods]
impl Network {
    #[new]
    #[pyo3(signature = (*, seed = 0, noise = 0))]
    fn new(seed: u64, noise: u32) -> Self {
        Network {
            net: Slot::new(core::Network::new(seed).with_noise(noise), "network"),
            ids: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Opens a connection from `host`; returns its number.
    #[pyo3(signature = (host = "sim.example"))]
    fn connect(&self, host: &str) -> PyResult<usize> {
        let id = self.net.with(|n| n.connect(host))?;
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        ids.push(id);
        Ok(ids.len() - 1)
    }

    /// Bytes the client of `connection` wrote.
    fn handle_bytes(&self, connection: usize, data: &[u8]) -> PyResult<()> {
        let id = self.id(connection)?;
        self.net.with(|n| n.handle_bytes(id, data))
    }

    /// What the server sent `connection` since the last call.
    fn take_bytes<'py>(&self, py: Python<'py>, connection: usize) -> PyResult<Bound<'py, PyBytes>> {
        let id = self.id(connection)?;
        let bytes = self.net.with(|n| n.take_bytes(id))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Whether `connection` is still open.
    fn is_open(&self, connection: usize) -> PyResult<bool> {
        let id = self.id(connection)?;
        self.net.with(|n| n.is_open(id))
    }

    /// Closes `connection` from the client's side.
    fn disconnect(&self, connection: usize) -> PyResult<()> {
        let id = self.id(connection)?;
        self.net.with(|n| n.disconnect(id))
    }

    /// Counters: `relayed`, `cut_lines`, `longest_line`, `noise`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        relay_stats(py, self.net.with(|n| n.stats())?)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let _ = to_py::<()>;
    m.add_class::<Relay>()?;
    m.add_class::<Network>()?;
    Ok(())
}
