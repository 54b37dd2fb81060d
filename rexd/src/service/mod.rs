//! The daemon's engine: sessions, processes and file operations behind typed REXD requests,
//! independent of any transport.
//!
//! A [`Service`] takes [`Request`]s with [`Service::call`] and hands back replies and events
//! through [`Service::poll_output`]. It registers its children's descriptors in the host's
//! [`mio::Registry`] with tokens at or above [`TOKEN_BASE`]; the host passes readiness for
//! those tokens to [`Service::handle_event`], calls [`Service::pump`] to move output (within
//! the bytes it can take, which is how a slow client slows the children down instead of
//! growing memory), and [`Service::handle_timeout`] at [`Service::next_deadline`].
//!
//! ```no_run
//! # use rexd::service::{Service, Settings, ServiceOutput, TOKEN_BASE};
//! # fn main() -> std::io::Result<()> {
//! let mut poll = mio::Poll::new()?;
//! let mut service = Service::new(Settings::for_roots(&[std::env::current_dir()?])?, poll.registry().try_clone()?);
//! let mut events = mio::Events::with_capacity(256);
//! let clock = std::time::Instant::now();
//! loop {
//!     let now = clock.elapsed().as_millis() as u64;
//!     service.pump(now, 1 << 20);
//!     while let Some(out) = service.poll_output() {
//!         match out {
//!             ServiceOutput::Reply { handle, result } => { /* answer request `handle` */ }
//!             ServiceOutput::Event(event) => { /* stream it */ }
//!         }
//!     }
//!     let wait = service.next_deadline().map(|d| std::time::Duration::from_millis(d.saturating_sub(now)));
//!     poll.poll(&mut events, if service.wants_pump() { Some(Default::default()) } else { wait })?;
//!     let now = clock.elapsed().as_millis() as u64;
//!     for e in events.iter() {
//!         if e.token().0 >= TOKEN_BASE { service.handle_event(now, e.token(), e.is_readable() || e.is_read_closed(), e.is_writable() || e.is_write_closed()); }
//!     }
//!     service.handle_timeout(now);
//! }
//! # }
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::SystemTime;

use deskwire::rexd::data::Encoding;
use deskwire::rexd::{
    Capability, ErrorCode, ErrorObject, Event, ExecErrorEvent, ExecExit, ExecInputParams,
    ExecInputResult, ExecKillParams, ExecOutput, ExecStartParams, ExecStartResult, ExecWaitParams,
    ExecWaitResult, Limits, OkResult, PROTOCOL_VERSION, ProcessInfo, ProcessStatus, Program,
    PtyCloseParams, PtyExit, PtyInputParams, PtyOpenParams, PtyOpenResult, PtyOutput,
    PtyResizeParams, Request, Response, RexdMetricsResult, SessionCloseParams, SessionInfoParams,
    SessionInfoResult, SessionOpenParams, SessionOpenResult, Signal,
};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use serde_json::{Value, json};

use std::sync::Arc;

use crate::audit::{Audit, Who};
use crate::compress;
use crate::config::{Action, Config, LimitsSection};
use crate::confine::Confinement;
use crate::fsops::{self, FsContext};
use crate::metrics::Metrics;
use crate::policy::{Checked, Decision, Policy};
use crate::process::{self, Launch, Spawned};
use crate::roots::{OpenError, Roots};
use crate::sys::{self, WaitStatus};
use crate::tree::{Join, Tracker, Tracking, Tree};

mod exec;
mod input;
mod lifecycle;
mod output;
mod piped;
mod proc;
mod pty;
mod session;
mod settings;

use output::ReadOutcome;
pub use piped::{Frame, PipedBytes, PipedOutput};
use proc::{Output, Proc, Stream, TimerKind, unsafe_file};
use session::Session;
pub use settings::{SessionEnd, Settings};

/// Tokens at or above this belong to the service; hosts use smaller ones for their own sources.
pub const TOKEN_BASE: usize = 1 << 20;
/// Bytes read from a child's stream in one go.
const READ_CHUNK: usize = 256 * 1024;
/// Finished processes remembered per session for `exec.wait` / `session.info`.
const FINISHED_MEMORY: usize = 1024;
/// The media type of the metrics text (`rexd.metrics`, `GET /metrics`).
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The version announced in `session.open`.
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the service gives back.
#[derive(Debug)]
pub enum ServiceOutput {
    /// The answer to the call made with this `handle`.
    Reply {
        /// The host's handle from [`Service::call`].
        handle: u64,
        /// The result or the error to answer with.
        result: Result<Response, ErrorObject>,
    },
    /// An event to stream (`exec.stdout`, `exec.exit`, `pty.output`, …).
    Event(Event<'static>),
}

/// The engine. See the module docs.
#[derive(Debug)]
pub struct Service {
    settings: Settings,
    registry: Registry,
    sessions: HashMap<String, Session>,
    procs: HashMap<String, Proc>,
    by_key: HashMap<u64, String>,
    /// Streams that may have more to read (edge-triggered readiness not yet drained).
    readable: BTreeSet<(u64, usize)>,
    timers: BTreeSet<(u64, u64, TimerKind)>,
    /// exec.wait calls waiting: handle -> process id.
    waits: HashMap<u64, String>,
    outputs: VecDeque<Frame>,
    /// Events that must follow the reply being made (a launch failure's `exec.error`).
    after_reply: Vec<ServiceOutput>,
    next_key: u64,
    next_pty: u64,
    buf: Vec<u8>,
    tracker: Tracker,
    /// Trees of finished processes whose cgroups are not removed yet.
    dead_trees: Vec<Tree>,
    /// Sessions whose output is not read now (their client is behind): [`Service::pump`]
    /// leaves their streams in the pipes, so their children block instead of memory growing.
    paused: BTreeSet<String>,
    /// The principal of the call being made (for `session.open`).
    opening_principal: Option<String>,
    /// Where the client of the call being handled connects from ([`Service::set_address`]).
    opening_address: Option<String>,
    /// The policy's decision on the exec being started, for its audit entry.
    last_decision: Option<Decision>,
    /// Resumable sessions may be opened (the host keeps them across connections).
    resumable: bool,
    /// The calls come over a transport that can carry raw bytes after a line (stdio; the hub
    /// sets it per call for its connection: the agent's bridges, `/ws`), so `session.open`
    /// may grant `raw_frames`.
    raw_transport: bool,
    /// The host takes [`Service::poll_frame`]'s piped output ([`Service::set_pipe_output`]).
    pipe_output: bool,
}

type OpResult<T> = Result<T, ErrorObject>;

fn err(code: ErrorCode, message: impl Into<String>) -> ErrorObject {
    ErrorObject::of(code).with_message(message)
}

fn signal_number(s: Signal) -> libc::c_int {
    match s {
        Signal::Hup => libc::SIGHUP,
        Signal::Int => libc::SIGINT,
        Signal::Quit => libc::SIGQUIT,
        Signal::Abrt => libc::SIGABRT,
        Signal::Kill => libc::SIGKILL,
        Signal::Usr1 => libc::SIGUSR1,
        Signal::Usr2 => libc::SIGUSR2,
        Signal::Pipe => libc::SIGPIPE,
        Signal::Alrm => libc::SIGALRM,
        Signal::Cont => libc::SIGCONT,
        Signal::Stop => libc::SIGSTOP,
        Signal::Tstp => libc::SIGTSTP,
        Signal::Winch => libc::SIGWINCH,
        _ => libc::SIGTERM,
    }
}

impl Service {
    /// A service with `settings`, registering children in `registry` (a clone of the host's).
    pub fn new(settings: Settings, registry: Registry) -> Service {
        let tracker = Tracker::new(settings.tracking);
        crate::log::debug(&format!("process trees: {}", tracker.describe()));
        Service {
            tracker,
            dead_trees: Vec::new(),
            settings,
            registry,
            sessions: HashMap::new(),
            procs: HashMap::new(),
            by_key: HashMap::new(),
            readable: BTreeSet::new(),
            timers: BTreeSet::new(),
            waits: HashMap::new(),
            outputs: VecDeque::new(),
            after_reply: Vec::new(),
            paused: BTreeSet::new(),
            opening_principal: None,
            opening_address: None,
            last_decision: None,
            resumable: false,
            raw_transport: false,
            pipe_output: false,
            next_key: 0,
            next_pty: 0,
            buf: vec![0; READ_CHUNK],
        }
    }

    /// The capabilities this daemon offers.
    pub fn capabilities() -> Vec<Capability> {
        vec![
            Capability::Exec,
            Capability::Fs,
            Capability::Events,
            Capability::ExecInput,
            Capability::Pty,
            Capability::Metrics,
        ]
    }

    /// The metrics this service counts into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.settings.metrics
    }

    /// The capabilities offered here: [`Service::capabilities`], plus `resume` when the host
    /// keeps sessions across connections ([`Service::set_resumable`]).
    pub fn offered(&self) -> Vec<Capability> {
        let mut c = Service::capabilities();
        if self.resumable {
            c.push(Capability::Resume);
        }
        c
    }

    /// A host resumed `session` on a new connection: counted, and written to the audit log.
    pub fn note_resumed(&mut self, session: &str, last_seq: u64, lost: u64) {
        self.settings.metrics.sessions_resumed.inc();
        if self.settings.audit.enabled() {
            let client = self.sessions.get(session).map(|s| s.client.clone());
            let (principal, address) = self.who_of(Some(session));
            self.settings.audit.record(
                Some(session),
                client.as_deref(),
                Who {
                    principal: principal.as_deref(),
                    address: address.as_deref(),
                },
                "session.resume",
                json!({"session_id": session, "last_seq": last_seq}),
                json!({"ok": true, "lost": lost}),
            );
        }
    }

    /// Says that the host keeps resumable sessions across connections (the hub does).
    pub fn set_resumable(&mut self, on: bool) {
        self.resumable = on;
    }

    /// Says that the calls from now on come over a transport whose host writes a raw
    /// `fs.read` answer's (or output event's) bytes right after its line
    /// ([`deskwire::rexd::Response::write_frame`]: stdio, ssh, the agent's bridges; one binary
    /// message on `/ws`): `session.open` then grants `raw_frames` to a client that asks.
    pub fn set_raw_transport(&mut self, on: bool) {
        self.raw_transport = on;
    }

    /// Says that the host takes its output with [`Service::poll_frame`] and moves a
    /// [`PipedOutput`]'s bytes from the command's pipe itself, right after the event's line
    /// (`rexd --stdio`). Only processes started afterwards, in sessions with raw output and no
    /// compression, leave their bytes in the pipe.
    pub fn set_pipe_output(&mut self, on: bool) {
        self.pipe_output = on;
    }

    /// Where the client of the next calls connects from (`IP:PORT`; the hub sets it per call
    /// for its connection): a session opened then keeps it for its audit entries. Over stdio
    /// it is the client end of `$SSH_CONNECTION`, when rexd runs under ssh.
    pub fn set_address(&mut self, address: Option<String>) {
        self.opening_address = address;
    }

    /// Who a session's audit entries are about (the values of the call being handled for an
    /// unknown session).
    fn who_of(&self, session: Option<&str>) -> (Option<String>, Option<String>) {
        match session.and_then(|s| self.sessions.get(s)) {
            Some(s) => (s.principal.clone(), s.address.clone()),
            None => (self.opening_principal.clone(), self.opening_address.clone()),
        }
    }

    /// The daemon's roots.
    pub fn roots(&self) -> &Roots {
        &self.settings.roots
    }

    /// Handles one request; its reply (now, or later for `exec.wait`) comes out of
    /// [`Service::poll_output`] with `handle`.
    pub fn call(&mut self, now: u64, handle: u64, request: Request) {
        self.call_from(now, handle, request, None)
    }

    /// [`Service::call`] for a client the transport authenticated as `principal`: a session
    /// it opens carries the name, and every audit entry of that session shows it.
    pub fn call_from(&mut self, now: u64, handle: u64, request: Request, principal: Option<&str>) {
        self.opening_principal = principal.map(str::to_owned);
        let method = request.method();
        // What a flagged command was, for the log line that says so (the audit has it all).
        let program = match &request {
            Request::ExecStart(p) => Some(&p.program),
            Request::PtyOpen(p) => Some(&p.program),
            _ => None,
        }
        .map(|p| match p {
            Program::Argv(argv) => argv.first().cloned().unwrap_or_default(),
            _ => "sh -c".to_owned(),
        });
        // The params as JSON only for the audit log (an fs.write's content would be copied).
        let params = match self.settings.audit.enabled() {
            true => request.params_value(),
            false => Value::Null,
        };
        let session_id = params
            .get("session_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.last_decision = None;
        let result = self.dispatch(now, handle, request);
        let deferred = matches!(result, Ok(None));
        let decision = self.last_decision.take();
        self.count(method, &result, decision.as_ref());
        if let Some(d) = decision.as_ref().filter(|d| d.action == Action::Flag) {
            let who = principal.unwrap_or("the local client");
            let from = self
                .opening_address
                .as_deref()
                .map(|a| format!(" from {a}"))
                .unwrap_or_default();
            crate::log::warn(&format!(
                "{method} of {:?} by {who}{from} flagged by policy rule {:?} (class {})",
                program.as_deref().unwrap_or_default(),
                d.rule,
                d.class
            ));
        }
        if self.settings.audit.enabled() {
            let mut summary = match &result {
                Ok(Some(r)) => summarize(r),
                Ok(None) => json!({"deferred": true}),
                Err(e) => {
                    let mut v = json!({"error": e.code, "message": e.message});
                    if let Some(data) = e
                        .data
                        .as_ref()
                        .and_then(|d| serde_json::from_str::<Value>(d.get()).ok())
                    {
                        v["data"] = data;
                    }
                    v
                }
            };
            if let Some(d) = &decision {
                summary["policy"] = json!(d);
            }
            let sid = match &result {
                Ok(Some(Response::SessionOpen(r))) => Some(r.session_id.clone()),
                _ => session_id.clone(),
            };
            let client = sid
                .as_deref()
                .and_then(|s| self.sessions.get(s))
                .map(|s| s.client.clone())
                .or_else(|| {
                    params
                        .get("client_name")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                });
            let (principal, address) = self.who_of(sid.as_deref());
            self.settings.audit.record(
                sid.as_deref(),
                client.as_deref(),
                Who {
                    principal: principal.as_deref(),
                    address: address.as_deref(),
                },
                method.as_str(),
                params,
                summary,
            );
        }
        if !deferred {
            let result = result.map(|r| r.expect("not deferred"));
            self.outputs
                .push_back(ServiceOutput::Reply { handle, result }.into());
        }
        self.outputs
            .extend(self.after_reply.drain(..).map(Frame::from));
    }

    /// Counts a call's outcome in the metrics.
    fn count(
        &self,
        method: deskwire::rexd::Method,
        result: &OpResult<Option<Response>>,
        decision: Option<&Decision>,
    ) {
        let m = &self.settings.metrics;
        match result {
            Ok(Some(Response::SessionOpen(_))) => {
                m.sessions_opened.inc();
            }
            Err(e) => {
                m.error(e.code);
                if matches!(
                    method,
                    deskwire::rexd::Method::ExecStart | deskwire::rexd::Method::PtyOpen
                ) {
                    let class = e
                        .data
                        .as_ref()
                        .and_then(|d| serde_json::from_str::<Value>(d.get()).ok())
                        .and_then(|d| d["class"].as_str().map(str::to_owned))
                        .or_else(|| decision.map(|d| d.class.clone()))
                        .unwrap_or_else(|| "unclassified".into());
                    let outcome = if e.code == ErrorCode::Unauthorized.code() {
                        "refused"
                    } else {
                        "error"
                    };
                    m.exec(&class, outcome);
                }
            }
            _ => {}
        }
        self.update_gauges();
    }

    /// Sets the gauges from the state now.
    fn update_gauges(&self) {
        let m = &self.settings.metrics;
        m.sessions_open.set(self.sessions.len() as i64);
        m.processes_running.set(self.running() as i64);
    }

    /// `Ok(None)`: the reply comes later.
    fn dispatch(&mut self, now: u64, handle: u64, request: Request) -> OpResult<Option<Response>> {
        Ok(Some(match request {
            Request::SessionOpen(p) => Response::SessionOpen(self.session_open(p)?),
            Request::SessionClose(p) => Response::SessionClose(self.session_close(now, p)?),
            Request::SessionInfo(p) => Response::SessionInfo(self.session_info(p)?),
            Request::FsRead(p) => {
                Response::FsRead(self.with_fs(&p.session_id, |c| fsops::read(c, &p))?)
            }
            Request::FsWrite(p) => {
                self.read_only_client(&p.session_id, Some("fs.write"))?;
                Response::FsWrite(self.with_fs(&p.session_id, |c| fsops::write(c, &p))?)
            }
            Request::FsList(p) => {
                Response::FsList(self.with_fs(&p.session_id, |c| fsops::list(c, &p))?)
            }
            Request::FsGlob(p) => {
                Response::FsGlob(self.with_fs(&p.session_id, |c| fsops::glob(c, &p))?)
            }
            Request::FsStat(p) => {
                Response::FsStat(self.with_fs(&p.session_id, |c| fsops::stat(c, &p))?)
            }
            Request::ExecStart(p) => Response::ExecStart(self.exec_start(now, p)?),
            Request::ExecWait(p) => return self.exec_wait(now, handle, p),
            Request::ExecKill(p) => Response::ExecKill(self.exec_kill(now, p)?),
            Request::ExecInput(p) => return self.exec_input(handle, p),
            Request::PtyOpen(p) => Response::PtyOpen(self.pty_open(now, p)?),
            Request::PtyInput(p) => Response::PtyInput(self.pty_input(p)?),
            Request::PtyResize(p) => Response::PtyResize(self.pty_resize(p)?),
            Request::PtyClose(p) => Response::PtyClose(self.pty_close(now, p)?),
            Request::RexdMetrics(_) => {
                self.update_gauges();
                Response::RexdMetrics(RexdMetricsResult {
                    content_type: METRICS_CONTENT_TYPE.into(),
                    text: self.settings.metrics.encode(),
                })
            }
            other => {
                return Err(err(
                    ErrorCode::MethodNotFound,
                    format!("{} is not served", other.method()),
                ));
            }
        }))
    }

    /// The earliest timer, if any.
    pub fn next_deadline(&self) -> Option<u64> {
        self.timers.iter().next().map(|t| t.0)
    }

    /// Whether replies or events are waiting for [`Service::poll_output`].
    pub fn has_output(&self) -> bool {
        !self.outputs.is_empty()
    }

    /// The next reply or event (an output event left in its pipe is read into the event).
    pub fn poll_output(&mut self) -> Option<ServiceOutput> {
        self.outputs.pop_front().map(|f| match f {
            Frame::Output(o) => o,
            Frame::Piped(p) => p.into_output(),
        })
    }

    /// The next reply or event, an output event's bytes still in their pipe when the host
    /// said it moves them ([`Service::set_pipe_output`]).
    pub fn poll_frame(&mut self) -> Option<Frame> {
        self.outputs.pop_front()
    }

    /// Closes every session (the client went away, or the daemon is told to stop: `cause`):
    /// every process is terminated, detached ones too (a detached process outlives its
    /// session, not the daemon).
    pub fn shutdown(&mut self, now: u64, cause: SessionEnd) {
        let ids: Vec<String> = self.sessions.keys().cloned().collect();
        for id in ids {
            self.close_session(now, &id, true, cause);
        }
    }

    /// Processes still running (detached ones too), which the daemon sees end before it exits.
    pub fn running(&self) -> usize {
        self.procs
            .values()
            .filter(|p| !p.finished && !p.failed())
            .count()
    }

    /// How process trees are tracked (for the log).
    pub fn tracking(&self) -> String {
        self.tracker.describe()
    }

    /// `limits.kill_grace_ms`: how long TERM has before KILL.
    pub fn kill_grace_ms(&self) -> u64 {
        self.settings.limits.kill_grace_ms
    }

    /// Sessions open now.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Whether a new session would pass `limits.max_concurrent_sessions`.
    pub fn sessions_full(&self) -> bool {
        self.sessions.len() as u64 >= self.settings.limits.max_concurrent_sessions
    }

    /// Whether session `id` has no process running (so ending it ends nothing of its client's).
    pub fn session_is_idle(&self, id: &str) -> bool {
        self.sessions.get(id).is_some_and(|s| {
            s.procs
                .iter()
                .all(|p| self.procs.get(p).is_none_or(|p| p.finished))
        })
    }
}

/// The service's end is its processes' end: every tree still alive is killed (detached ones
/// too), leaders and killed orphans are reaped, and the cgroups removed, within about 2 s.
impl Drop for Service {
    fn drop(&mut self) {
        let mut trees: Vec<Tree> = self
            .procs
            .values_mut()
            .filter_map(|p| p.tree.take())
            .collect();
        trees.append(&mut self.dead_trees);
        for tree in &trees {
            self.tracker.kill(tree);
        }
        let mut leaders: Vec<libc::pid_t> = self
            .procs
            .values()
            .filter(|p| p.pid > 1 && p.exit.is_none() && !p.failed())
            .map(|p| p.pid)
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        loop {
            leaders.retain(|&pid| matches!(sys::try_wait(pid), Ok(None)));
            trees.retain(|t| !t.remove());
            let left = self.tracker.reap();
            if (leaders.is_empty() && trees.is_empty() && !left)
                || std::time::Instant::now() > deadline
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// How many bytes of the file an `fs.read` answer carries, whatever its encoding (the audit's
/// `bytes`): a raw answer's `raw_bytes`, a string's length once decoded, what a zstd frame's
/// header says it inflates to. `None` only for a zstd frame without one.
fn bytes_read(r: &deskwire::rexd::FsReadResult) -> Option<u64> {
    match (r.encoding, r.raw_bytes) {
        (Encoding::Zstd, Some(_)) => compress::content_size(&r.raw),
        (_, Some(n)) => Some(n),
        // The frame's header is in the first 18 bytes: 24 base64 characters.
        (Encoding::Zstd, None) => {
            let head = &r.content[..r.content.len().min(24)];
            deskwire::rexd::data::decode(head, Encoding::Base64)
                .ok()
                .and_then(|h| compress::content_size(&h))
        }
        (Encoding::Base64, None) => {
            let padding = r.content.bytes().rev().take_while(|b| *b == b'=').count();
            Some((r.content.len() / 4 * 3).saturating_sub(padding) as u64)
        }
        _ => Some(r.content.len() as u64),
    }
}

/// A short result summary for the audit log.
fn summarize(r: &Response) -> Value {
    match r {
        Response::ExecStart(x) => json!({"ok": true, "process_id": x.process_id}),
        Response::PtyOpen(x) => json!({"ok": true, "pty_id": x.pty_id, "process_id": x.process_id}),
        Response::FsRead(x) => {
            json!({"ok": true, "bytes": bytes_read(x), "truncated": x.truncated})
        }
        Response::FsWrite(x) => {
            json!({"ok": true, "bytes_written": x.bytes_written, "created": x.created})
        }
        Response::FsList(x) => json!({"ok": true, "entries": x.entries.len()}),
        Response::FsGlob(x) => json!({"ok": true, "matches": x.matches.len()}),
        Response::ExecWait(x) => json!({"ok": true, "status": x.status, "exit_code": x.exit_code}),
        Response::SessionOpen(x) => json!({"ok": true, "session_id": x.session_id}),
        _ => json!({"ok": true}),
    }
}
