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
use crate::fsops::{self, FsContext};
use crate::metrics::Metrics;
use crate::policy::{Checked, Decision, Policy};
use crate::process::{self, Launch, Spawned};
use crate::roots::{OpenError, Roots};
use crate::sys::{self, WaitStatus};
use crate::tree::{Join, Tracker, Tracking, Tree};

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

/// Why a session ended: the `cause` of its `session.end` audit entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// `session.close`.
    Closed,
    /// Its client's connection ended (the end of stdin, a dropped WebSocket).
    Disconnected,
    /// A session of pointed calls (`POST /rpc`) had none for its idle time.
    Idle,
    /// A resumable session was not resumed within its grace.
    NotResumed,
    /// The daemon was told to stop (`SIGTERM`, `SIGINT`, `SIGHUP`).
    Shutdown,
}

impl SessionEnd {
    /// The name in the audit entry.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionEnd::Closed => "close",
            SessionEnd::Disconnected => "disconnect",
            SessionEnd::Idle => "idle",
            SessionEnd::NotResumed => "not_resumed",
            SessionEnd::Shutdown => "shutdown",
        }
    }
}

/// What a service runs with.
#[derive(Debug)]
pub struct Settings {
    /// The allowed roots.
    pub roots: Roots,
    /// Limits and extras (`kill_grace_ms`, input buffer).
    pub limits: LimitsSection,
    /// `shell: true` allowed.
    pub allow_shell: bool,
    /// The command policy: the lists (`security.allow_commands`, `security.deny_commands`)
    /// and `[policy]`, resolved.
    pub commands: Policy,
    /// `fs.read` reads files that have other hard links.
    pub read_hard_links: bool,
    /// How process trees are tracked.
    pub tracking: Tracking,
    /// Where audit entries go.
    pub audit: Audit,
    /// Counters and gauges (shared with the transports).
    pub metrics: Arc<Metrics>,
}

impl Settings {
    /// Spec defaults, shell off, no audit, these roots.
    pub fn for_roots(roots: &[PathBuf]) -> io::Result<Settings> {
        Ok(Settings {
            roots: Roots::open(roots)?,
            limits: LimitsSection::default(),
            allow_shell: false,
            commands: Policy::default(),
            read_hard_links: false,
            tracking: Tracking::Auto,
            audit: Audit::disabled(),
            metrics: Arc::new(Metrics::new()),
        })
    }

    /// From a parsed config (roots opened now; the audit sink as configured).
    pub fn from_config(config: &Config) -> io::Result<Settings> {
        let roots: Vec<PathBuf> = config
            .security
            .allowed_roots
            .iter()
            .map(|r| r.path.clone())
            .collect();
        let audit = match (config.audit.enabled, &config.audit.path) {
            (false, _) => Audit::disabled(),
            (true, None) => Audit::stderr(),
            (true, Some(p)) => Audit::file(p)?,
        };
        Ok(Settings {
            roots: Roots::open(&roots)?,
            limits: config.limits.clone(),
            allow_shell: config.security.allow_shell,
            commands: Policy::new(
                &config.security.allow_commands,
                &config.security.deny_commands,
                config.policy.as_ref(),
            )
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?,
            read_hard_links: config.security.read_hard_links,
            tracking: config.security.process_tracking,
            audit,
            metrics: Arc::new(Metrics::new()),
        })
    }
}

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

#[derive(Debug)]
struct Session {
    id: String,
    client: String,
    /// Who the transport authenticated (a token's label, a certificate's subject); `None` on
    /// stdio, where the client is whoever started the daemon.
    principal: Option<String>,
    /// Where its client connects from (`IP:PORT`), for the audit; `None` when unknown.
    address: Option<String>,
    roots: Roots,
    cwd: PathBuf,
    limits: Limits,
    /// Running and recently finished processes, by process id.
    procs: Vec<String>,
    /// It negotiated compression (`zstd` payloads both ways).
    compress: bool,
    /// It negotiated raw frames (`fs.read` bytes after the answer's line).
    raw_frames: bool,
    /// It negotiated raw output too (exec output bytes after the event's line).
    raw_output: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stream {
    Stdout = 0,
    Stderr = 1,
    Stdin = 2,
    Exit = 3,
}

impl Stream {
    fn from_index(i: usize) -> Stream {
        match i {
            0 => Stream::Stdout,
            1 => Stream::Stderr,
            2 => Stream::Stdin,
            _ => Stream::Exit,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKind {
    /// The process ran past its timeout: TERM the group.
    Timeout,
    /// The grace after TERM ended: KILL the group.
    Escalate,
    /// An `exec.wait` with a timeout gives up (answers `running`).
    Wait(u64),
    /// The grace after the leader was reaped ended: what still holds its pipes is killed and
    /// the pipes are closed, so `exec.exit` comes.
    CloseStreams,
    /// Service-wide (key 0): remove emptied cgroups, reap killed orphans.
    Housekeeping,
}

/// One output stream of a child.
#[derive(Debug)]
struct Output {
    fd: OwnedFd,
    seq: u64,
    /// An incomplete UTF-8 sequence held back until the next read completes it.
    carry: Vec<u8>,
}

#[derive(Debug)]
struct Proc {
    key: u64,
    id: String,
    session: String,
    pty_id: Option<String>,
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    /// Every process it started (`None`: it never started).
    tree: Option<Tree>,
    stdout: Option<Output>,
    stderr: Option<Output>,
    /// Stdin pipe, or the PTY master (which is also `stdout`'s source for a PTY).
    stdin: Option<OwnedFd>,
    stdin_buf: Vec<u8>,
    stdin_eof: bool,
    exit: Option<WaitStatus>,
    bytes_stdout: u64,
    bytes_stderr: u64,
    cap: Option<u64>,
    truncated: bool,
    started_at: String,
    started_ms: u64,
    timed_out: bool,
    killed: bool,
    detached: bool,
    /// Its session closed: no more events.
    orphaned: bool,
    /// Launch failed (`exec.error` sent).
    failed: bool,
    finished: bool,
    waiters: Vec<u64>,
    /// `exec.input` calls answered once their bytes are in the pipe (or stdin closed):
    /// (handle, bytes accepted). The answer is the client's flow control, as ssh's window is.
    input_waiters: Vec<(u64, u64)>,
    /// Its `[policy]` class (`unclassified` without one), for the metrics.
    class: String,
    /// Its session negotiated compression: output events may be `zstd`.
    compress: bool,
    /// Its session negotiated raw output: output events carry their bytes after the line.
    raw_output: bool,
}

impl Proc {
    fn status(&self) -> ProcessStatus {
        if !self.finished {
            ProcessStatus::Running
        } else if self.timed_out {
            ProcessStatus::TimedOut
        } else if self.killed {
            ProcessStatus::Killed
        } else {
            ProcessStatus::Exited
        }
    }

    fn exit_code(&self) -> Option<i32> {
        match self.exit {
            Some(WaitStatus::Exited(c)) => Some(c),
            _ => None,
        }
    }

    fn signal(&self) -> Option<String> {
        match self.exit {
            Some(WaitStatus::Signaled(s)) => Some(sys::signal_name(s)),
            _ => None,
        }
    }

    fn wait_result(&self) -> ExecWaitResult {
        ExecWaitResult {
            status: self.status(),
            exit_code: self.exit_code(),
            signal: self.signal(),
            bytes_stdout: self.bytes_stdout,
            bytes_stderr: self.bytes_stderr,
            truncated: self.truncated,
        }
    }

    fn token(&self, s: Stream) -> Token {
        Token(TOKEN_BASE + self.key as usize * 4 + s as usize)
    }
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
    outputs: VecDeque<ServiceOutput>,
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
    /// The calls come over a byte stream that can carry raw bytes after a line (stdio; the
    /// hub sets it per call for its connection), so `session.open` may grant `raw_frames`.
    byte_stream: bool,
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
            byte_stream: false,
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

    /// Says that the calls from now on come over a byte stream whose host writes a raw
    /// `fs.read` answer's bytes right after its line ([`deskwire::rexd::Response::write_frame`]:
    /// stdio, ssh, the agent's bridges): `session.open` then grants `raw_frames` to a client
    /// that asks.
    pub fn set_byte_stream(&mut self, on: bool) {
        self.byte_stream = on;
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
            crate::log::warn(&format!(
                "{method} flagged by policy rule {:?} (class {})",
                d.rule, d.class
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
                .push_back(ServiceOutput::Reply { handle, result });
        }
        self.outputs.extend(self.after_reply.drain(..));
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

    fn session(&self, id: &str) -> OpResult<&Session> {
        self.sessions.get(id).ok_or_else(|| {
            err(
                ErrorCode::InvalidParams,
                format!("unknown session_id {id:?}"),
            )
            .with_data(json!({"session_id": id}))
        })
    }

    fn with_fs<T>(
        &self,
        session: &str,
        f: impl FnOnce(&FsContext<'_>) -> OpResult<T>,
    ) -> OpResult<T> {
        let s = self.session(session)?;
        let ctx = FsContext {
            roots: &s.roots,
            cwd: &s.cwd,
            max_read: s.limits.max_file_read_bytes.unwrap_or(u64::MAX),
            read_hard_links: self.settings.read_hard_links,
            compress: s.compress,
            raw_frames: s.raw_frames,
        };
        f(&ctx)
    }

    /// The bytes of an `exec.input`/`pty.input`: `zstd` only in a session that negotiated it,
    /// inflated no further than a plain message could be long.
    fn input_bytes(&self, session: &str, data: &str, encoding: Encoding) -> OpResult<Vec<u8>> {
        let negotiated = self.sessions.get(session).is_some_and(|s| s.compress);
        compress::decode_bounded(data, encoding, negotiated, compress::MAX_INFLATED)
            .map(|b| b.into_owned())
            .map_err(|e| err(ErrorCode::InvalidParams, e.to_string()))
    }

    fn session_open(&mut self, p: SessionOpenParams) -> OpResult<SessionOpenResult> {
        let max = self.settings.limits.max_concurrent_sessions;
        if self.sessions.len() as u64 >= max {
            return Err(err(
                ErrorCode::ResourceLimit,
                format!("{max} sessions already open"),
            ));
        }
        let offered = self.offered();
        if p.resumable && !self.resumable {
            return Err(err(
                ErrorCode::UnsupportedCapability,
                "resumable sessions need a daemon that outlives its connection: \
                 `rexd --stdio --resumable` (over ssh) or `rexd --listen`",
            )
            .with_data(json!({"capability": "resume"})));
        }
        if let Some(asked) = &p.requested_capabilities
            && let Some(missing) = asked.iter().find(|c| !offered.contains(c))
        {
            return Err(err(
                ErrorCode::UnsupportedCapability,
                format!("capability {missing} is not offered"),
            )
            .with_data(json!({"capability": missing.as_str()})));
        }
        let roots = match &p.workspace_roots {
            Some(want) if !want.is_empty() => self.settings.roots.narrow(want)?,
            _ => self.settings.roots.clone(),
        };
        let cwd = roots
            .first()
            .map(|r| r.path().to_owned())
            .ok_or_else(|| err(ErrorCode::Unauthorized, "the daemon has no allowed roots"))?;
        let limits = self
            .settings
            .limits
            .to_limits()
            .lowered_by(&p.limits.unwrap_or_default());
        let compression = p.compression.as_deref().and_then(compress::choose);
        // Only a transport that carries bytes as they are (stdio, ssh) can put them after a
        // line; a WebSocket message or an HTTP body holds one JSON value.
        let raw_frames = p.raw_frames && self.byte_stream;
        let raw_output = raw_frames && p.raw_output;
        // 128 random bits: an id tells nothing of other sessions and cannot be guessed (the
        // hub answers a session only to its holder; this keeps a stranger from even aiming).
        let id = format!("s_{}", crate::sys::random_hex(16));
        let result = SessionOpenResult {
            session_id: id.clone(),
            protocol: PROTOCOL_VERSION.into(),
            server_version: SERVER_VERSION.into(),
            capabilities: offered,
            limits,
            workspace_roots: roots.paths(),
            resume: None,
            compression: compression.map(String::from),
            raw_frames,
            raw_output,
        };
        self.sessions.insert(
            id.clone(),
            Session {
                id,
                client: p.client_name,
                principal: self.opening_principal.clone(),
                address: self.opening_address.clone(),
                roots,
                cwd,
                limits,
                procs: Vec::new(),
                compress: compression.is_some(),
                raw_frames,
                raw_output,
            },
        );
        Ok(result)
    }

    fn session_close(&mut self, now: u64, p: SessionCloseParams) -> OpResult<OkResult> {
        self.session(&p.session_id)?;
        self.close_session(now, &p.session_id, false, SessionEnd::Closed);
        Ok(OkResult { ok: true })
    }

    fn close_session(&mut self, now: u64, id: &str, kill_detached: bool, cause: SessionEnd) {
        let Some(session) = self.sessions.remove(id) else {
            return;
        };
        if self.settings.audit.enabled() {
            self.settings.audit.record(
                Some(id),
                Some(&session.client),
                Who {
                    principal: session.principal.as_deref(),
                    address: session.address.as_deref(),
                },
                "session.end",
                json!({}),
                json!({"cause": cause.as_str(), "processes": session.procs.len()}),
            );
        }
        for pid in session.procs {
            let Some(proc_) = self.procs.get_mut(&pid) else {
                continue;
            };
            proc_.orphaned = true;
            if proc_.finished {
                let key = proc_.key;
                self.forget(key);
                continue;
            }
            if !proc_.detached || kill_detached {
                proc_.killed = true;
                let key = proc_.key;
                self.terminate(now, key);
            }
        }
    }

    /// Sends `signal` to every process of `key`'s tree (its group, if it has no tree).
    fn signal_tree(&self, key: u64, signal: libc::c_int) {
        let Some(p) = self.by_key.get(&key).and_then(|id| self.procs.get(id)) else {
            return;
        };
        match &p.tree {
            Some(tree) => tree.signal(signal),
            None if p.pid > 1 && p.exit.is_none() => {
                let _ = sys::kill_group(p.pid, signal);
            }
            None => {}
        }
    }

    /// Kills every process of `key`'s tree now.
    fn kill_tree(&mut self, now: u64, key: u64) {
        let Some(p) = self.by_key.get(&key).and_then(|id| self.procs.get(id)) else {
            return;
        };
        match &p.tree {
            Some(tree) => self.tracker.kill(tree),
            None if p.pid > 1 && p.exit.is_none() => {
                let _ = sys::kill_group(p.pid, libc::SIGKILL);
            }
            None => {}
        }
        if self.tracker.has_pending() {
            self.housekeeping_soon(now);
        }
    }

    /// TERM the tree now, KILL it after the grace.
    fn terminate(&mut self, now: u64, key: u64) {
        self.signal_tree(key, libc::SIGTERM);
        // A stopped process does not act on TERM until continued.
        self.signal_tree(key, libc::SIGCONT);
        self.timers.insert((
            now.saturating_add(self.settings.limits.kill_grace_ms),
            key,
            TimerKind::Escalate,
        ));
    }

    fn session_info(&self, p: SessionInfoParams) -> OpResult<SessionInfoResult> {
        let s = self.session(&p.session_id)?;
        let processes = s
            .procs
            .iter()
            .filter_map(|id| self.procs.get(id))
            .map(|pr| ProcessInfo {
                process_id: pr.id.clone(),
                status: pr.status(),
                started_at: pr.started_at.clone(),
                detached: pr.detached,
                pty_id: pr.pty_id.clone(),
            })
            .collect();
        Ok(SessionInfoResult {
            session_id: s.id.clone(),
            cwd: s.cwd.to_string_lossy().into_owned(),
            workspace_roots: s.roots.paths(),
            capabilities: self.offered(),
            limits: s.limits,
            processes,
        })
    }

    /// Policy checks shared by exec and PTY: shell mode, process count, the cwd opened
    /// beneath the session's roots, then the command lists (which resolve a relative program
    /// against that cwd) and the environment they allow.
    fn prepare(
        &self,
        session: &str,
        program: &Program,
        cwd: Option<&str>,
        env: Option<&BTreeMap<String, String>>,
    ) -> OpResult<(OwnedFd, Checked)> {
        let s = self.session(session)?;
        if matches!(program, Program::Shell(_)) && !self.settings.allow_shell {
            return Err(err(
                ErrorCode::UnsupportedCapability,
                "shell mode is disabled on this daemon (security.allow_shell): start rexd with \
                 --allow-shell or security.allow_shell = true (a daemon rex starts: \
                 --rexd-arg=--allow-shell; rexd --listen: its operator's choice)",
            ));
        }
        let running = s
            .procs
            .iter()
            .filter(|id| self.procs.get(*id).is_some_and(|p| !p.finished))
            .count() as u64;
        if let Some(max) = s.limits.max_processes_per_session
            && running >= max
        {
            return Err(err(
                ErrorCode::ResourceLimit,
                format!("{max} processes already running in this session"),
            ));
        }
        let cwd_str = cwd.unwrap_or_else(|| s.cwd.to_str().unwrap_or("."));
        let resolved = s.roots.resolve(&s.cwd, cwd_str)?;
        let dir = resolved
            .open(libc::O_PATH | libc::O_DIRECTORY)
            .map_err(|e| match e {
                OpenError::Escape(_) => ErrorObject::forbidden_path(cwd_str, &s.roots.paths()),
                OpenError::IsRoot => ErrorObject::forbidden_path(cwd_str, &s.roots.paths()),
                OpenError::Io(e) => fsops::io_error(cwd_str, &e),
            })?;
        let checked =
            self.settings
                .commands
                .check(program, dir.as_fd(), env, s.principal.as_deref())?;
        Ok((dir, checked))
    }

    fn new_proc(&mut self, now: u64, session: &str, detached: bool) -> Proc {
        self.next_key += 1;
        Proc {
            key: self.next_key,
            id: format!("p_{}", self.next_key),
            session: session.to_owned(),
            pty_id: None,
            pid: 0,
            pidfd: None,
            tree: None,
            stdout: None,
            stderr: None,
            stdin: None,
            stdin_buf: Vec::new(),
            stdin_eof: false,
            exit: None,
            bytes_stdout: 0,
            bytes_stderr: 0,
            cap: None,
            truncated: false,
            started_at: sys::rfc3339(SystemTime::now()),
            started_ms: now,
            timed_out: false,
            killed: false,
            detached,
            orphaned: false,
            failed: false,
            finished: false,
            waiters: Vec::new(),
            input_waiters: Vec::new(),
            class: self
                .last_decision
                .as_ref()
                .map_or_else(|| "unclassified".to_owned(), |d| d.class.clone()),
            compress: self.sessions.get(session).is_some_and(|s| s.compress),
            raw_output: self.sessions.get(session).is_some_and(|s| s.raw_output),
        }
    }

    fn exec_start(&mut self, now: u64, p: ExecStartParams) -> OpResult<ExecStartResult> {
        let (cwd, checked) =
            self.prepare(&p.session_id, &p.program, p.cwd.as_deref(), p.env.as_ref())?;
        self.last_decision = checked.decision.clone();
        let program = checked.program.as_ref().unwrap_or(&p.program);
        let limits = self.session(&p.session_id)?.limits;
        if p.detach {
            let max = self.settings.limits.max_detached_processes;
            let detached = self
                .procs
                .values()
                .filter(|x| x.detached && !x.finished)
                .count() as u64;
            if detached >= max {
                return Err(err(
                    ErrorCode::ResourceLimit,
                    format!(
                        "{max} detached processes already running (limits.max_detached_processes); \
                         they count until they end, across sessions"
                    ),
                )
                .with_data(json!({"max_detached_processes": max})));
            }
        }
        let mut proc_ = self.new_proc(now, &p.session_id, p.detach);
        proc_.cap = match (
            p.uncapped_output,
            limits.max_output_bytes,
            p.max_output_bytes,
        ) {
            // A streaming client's: only the operator's hard cap.
            (true, ..) => self.settings.limits.hard_output_bytes,
            (false, Some(a), Some(b)) => Some(a.min(b)),
            (false, a, b) => a.or(b),
        };
        let result = ExecStartResult {
            process_id: proc_.id.clone(),
            started_at: proc_.started_at.clone(),
        };
        let spawned = self.spawn_in_tree(proc_.key, |join| {
            process::spawn_pipes(&Launch {
                program,
                exe: checked.exe.as_deref(),
                cwd: &cwd,
                env: checked.env.as_ref(),
                join,
            })
        });
        match spawned {
            Ok((tree, sp)) => {
                proc_.tree = Some(tree);
                if let Some(stdin) = &p.stdin {
                    proc_.stdin_buf.extend_from_slice(stdin.as_bytes());
                    proc_.stdin_eof = true;
                }
                self.attach_or_kill(&mut proc_, sp)?;
                if let Some(t) = limits.effective_timeout_ms(p.timeout_ms) {
                    self.timers
                        .insert((now.saturating_add(t), proc_.key, TimerKind::Timeout));
                }
            }
            Err(e) => {
                proc_.failed = true;
                proc_.finished = true;
                proc_.exit = None;
                self.settings.metrics.exec(&proc_.class, "launch_error");
                if self.settings.audit.enabled() {
                    // The start was answered (its entry says ok); that it never ran is here.
                    let session = self.sessions.get(&p.session_id);
                    self.settings.audit.record(
                        Some(&p.session_id),
                        session.map(|s| s.client.as_str()),
                        Who {
                            principal: session.and_then(|s| s.principal.as_deref()),
                            address: session.and_then(|s| s.address.as_deref()),
                        },
                        "exec.error",
                        json!({"process_id": proc_.id}),
                        json!({"error": format!("cannot start: {e}"), "errno": e.raw_os_error()}),
                    );
                }
                self.after_reply
                    .push(ServiceOutput::Event(Event::ExecError(ExecErrorEvent {
                        session_id: p.session_id.clone(),
                        process_id: proc_.id.clone(),
                        message: format!("cannot start: {e}"),
                        errno: e.raw_os_error(),
                    })));
            }
        }
        self.insert(proc_);
        // Flush a stdin payload right away (the pipe is usually ready).
        if let Some(id) = self.procs.get(&result.process_id).map(|p| p.key) {
            self.flush_stdin(id);
        }
        Ok(result)
    }

    /// Starts a child in a new tree for `key`. In `auto` tracking, a child that cannot join
    /// its cgroup is started again under the subreaper, which then tracks every later exec.
    fn spawn_in_tree(
        &mut self,
        key: u64,
        spawn: impl Fn(&Join) -> io::Result<Spawned>,
    ) -> io::Result<(Tree, Spawned)> {
        let (mut tree, join) = match self.tracker.prepare(key) {
            Ok(x) => x,
            // No cgroup for this exec (a limit on cgroups, a hierarchy gone read-only).
            Err(e) if self.tracker.fall_back(&e) => self.tracker.prepare_sweep(key),
            Err(e) => return Err(e),
        };
        let first = spawn(&join);
        drop(join);
        let sp = match first {
            Ok(sp) => sp,
            Err(e) => {
                tree.remove();
                if self.settings.tracking != Tracking::Auto || !self.tracker.uses_cgroups() {
                    return Err(e);
                }
                // The cgroup or the program? Only a start without the cgroup tells.
                let (sweep_tree, sweep_join) = self.tracker.prepare_sweep(key);
                let sp = spawn(&sweep_join)?;
                self.tracker.fall_back(&e);
                tree = sweep_tree;
                sp
            }
        };
        self.tracker.started(&mut tree, sp.pid);
        Ok((tree, sp))
    }

    /// [`Service::attach`], or, when the loop cannot take the child, kills and reaps it so no
    /// process runs untracked.
    fn attach_or_kill(&mut self, proc_: &mut Proc, sp: Spawned) -> OpResult<()> {
        let pid = sp.pid;
        // Descriptors already registered leave the poll when they close with `proc_`.
        let attached = self.attach(proc_, sp);
        if attached.is_err() {
            let tree = proc_.tree.take();
            if let Some(tree) = &tree {
                self.tracker.kill(tree);
            }
            let _ = sys::kill_group(pid, libc::SIGKILL);
            sys::wait_blocking(pid);
            if let Some(mut tree) = tree {
                self.tracker.reaped(&mut tree);
                self.retire(0, tree);
            }
        }
        attached
    }

    /// Keeps a finished tree until its cgroup can be removed.
    fn retire(&mut self, now: u64, tree: Tree) {
        if !tree.remove() {
            self.dead_trees.push(tree);
            self.housekeeping_soon(now);
        }
    }

    fn housekeeping_soon(&mut self, now: u64) {
        if !self.timers.iter().any(|t| t.2 == TimerKind::Housekeeping) {
            self.timers
                .insert((now.saturating_add(100), 0, TimerKind::Housekeeping));
        }
    }

    /// Registers a spawned child's descriptors.
    fn attach(&mut self, proc_: &mut Proc, sp: Spawned) -> OpResult<()> {
        let internal = |e: io::Error| err(ErrorCode::InternalError, format!("register: {e}"));
        proc_.pid = sp.pid;
        self.registry
            .register(
                &mut SourceFd(&sp.pidfd.as_raw_fd()),
                proc_.token(Stream::Exit),
                Interest::READABLE,
            )
            .map_err(internal)?;
        proc_.pidfd = Some(sp.pidfd);
        if let Some(fd) = sp.stdout {
            self.registry
                .register(
                    &mut SourceFd(&fd.as_raw_fd()),
                    proc_.token(Stream::Stdout),
                    Interest::READABLE,
                )
                .map_err(internal)?;
            proc_.stdout = Some(Output {
                fd,
                seq: 0,
                carry: Vec::new(),
            });
        }
        if let Some(fd) = sp.stderr {
            self.registry
                .register(
                    &mut SourceFd(&fd.as_raw_fd()),
                    proc_.token(Stream::Stderr),
                    Interest::READABLE,
                )
                .map_err(internal)?;
            proc_.stderr = Some(Output {
                fd,
                seq: 0,
                carry: Vec::new(),
            });
        }
        if let Some(fd) = sp.stdin {
            if proc_.pty_id.is_some() {
                // The PTY master: output is read from it, input written to it.
                self.registry
                    .register(
                        &mut SourceFd(&fd.as_raw_fd()),
                        proc_.token(Stream::Stdout),
                        Interest::READABLE | Interest::WRITABLE,
                    )
                    .map_err(internal)?;
                let read_side = fd
                    .try_clone()
                    .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
                proc_.stdout = Some(Output {
                    fd: read_side,
                    seq: 0,
                    carry: Vec::new(),
                });
            } else {
                self.registry
                    .register(
                        &mut SourceFd(&fd.as_raw_fd()),
                        proc_.token(Stream::Stdin),
                        Interest::WRITABLE,
                    )
                    .map_err(internal)?;
            }
            proc_.stdin = Some(fd);
        }
        // Output may already be waiting; edge-triggered readiness might have fired before
        // registration.
        self.readable.insert((proc_.key, Stream::Stdout as usize));
        self.readable.insert((proc_.key, Stream::Stderr as usize));
        Ok(())
    }

    fn insert(&mut self, proc_: Proc) {
        if let Some(s) = self.sessions.get_mut(&proc_.session) {
            s.procs.push(proc_.id.clone());
            // Forget the oldest finished processes past the memory.
            if s.procs.len() > FINISHED_MEMORY {
                let procs = &self.procs;
                let old: Vec<String> = s
                    .procs
                    .iter()
                    .filter(|id| procs.get(*id).is_some_and(|p| p.finished))
                    .take(s.procs.len() - FINISHED_MEMORY)
                    .cloned()
                    .collect();
                s.procs.retain(|id| !old.contains(id));
                for id in old {
                    if let Some(p) = self.procs.remove(&id) {
                        self.by_key.remove(&p.key);
                    }
                }
            }
        }
        self.by_key.insert(proc_.key, proc_.id.clone());
        self.procs.insert(proc_.id.clone(), proc_);
    }

    fn forget(&mut self, key: u64) {
        if let Some(id) = self.by_key.remove(&key) {
            self.procs.remove(&id);
        }
    }

    fn proc_in(&mut self, session: &str, process: &str) -> OpResult<&mut Proc> {
        self.session(session)?;
        match self.procs.get_mut(process) {
            Some(p) if p.session == session && !p.orphaned => Ok(p),
            _ => Err(err(
                ErrorCode::ProcessNotFound,
                format!("no process {process:?} in this session"),
            )
            .with_data(json!({"process_id": process}))),
        }
    }

    fn exec_wait(
        &mut self,
        now: u64,
        handle: u64,
        p: ExecWaitParams,
    ) -> OpResult<Option<Response>> {
        let proc_ = self.proc_in(&p.session_id, &p.process_id)?;
        if proc_.finished {
            return Ok(Some(Response::ExecWait(proc_.wait_result())));
        }
        proc_.waiters.push(handle);
        let key = proc_.key;
        self.waits.insert(handle, p.process_id.clone());
        if let Some(t) = p.timeout_ms {
            self.timers
                .insert((now.saturating_add(t), key, TimerKind::Wait(handle)));
        }
        Ok(None)
    }

    fn exec_kill(&mut self, now: u64, p: ExecKillParams) -> OpResult<OkResult> {
        let proc_ = self.proc_in(&p.session_id, &p.process_id)?;
        if proc_.finished {
            return Ok(OkResult { ok: false });
        }
        let sig = signal_number(p.signal);
        if matches!(
            sig,
            libc::SIGTERM | libc::SIGKILL | libc::SIGHUP | libc::SIGINT
        ) {
            proc_.killed = true;
        }
        let key = proc_.key;
        if sig == libc::SIGKILL {
            self.kill_tree(now, key);
        } else {
            self.signal_tree(key, sig);
        }
        if sig == libc::SIGTERM {
            // TERM may be ignored; the grace still ends in KILL, as for timeouts.
            self.signal_tree(key, libc::SIGCONT);
            self.timers.insert((
                now.saturating_add(self.settings.limits.kill_grace_ms),
                key,
                TimerKind::Escalate,
            ));
        }
        Ok(OkResult { ok: true })
    }

    fn queue_input(
        &mut self,
        session: &str,
        process: &str,
        bytes: &[u8],
        eof: bool,
    ) -> OpResult<u64> {
        let max = self.settings.limits.max_input_buffer_bytes;
        let proc_ = self.proc_in(session, process)?;
        if proc_.finished {
            return Err(err(ErrorCode::ProcessNotFound, "the process has ended"));
        }
        if proc_.stdin.is_none() || proc_.stdin_eof {
            return Err(err(ErrorCode::InvalidParams, "stdin is closed"));
        }
        if (proc_.stdin_buf.len() + bytes.len()) as u64 > max {
            return Err(err(
                ErrorCode::ResourceLimit,
                format!("more than {max} bytes of input waiting for the process to read"),
            ));
        }
        proc_.stdin_buf.extend_from_slice(bytes);
        proc_.stdin_eof |= eof;
        let key = proc_.key;
        self.flush_stdin(key);
        Ok(bytes.len() as u64)
    }

    /// Queues input; the answer waits until the pipe took it (or stdin closed), so a client
    /// that waits for answers never has more in flight than the daemon buffers.
    fn exec_input(&mut self, handle: u64, p: ExecInputParams) -> OpResult<Option<Response>> {
        let bytes = self.input_bytes(&p.session_id, &p.data, p.encoding)?;
        // Looked up in the caller's session first: another session's process is unknown here,
        // whatever it runs on.
        if self.proc_in(&p.session_id, &p.process_id)?.pty_id.is_some() {
            return Err(err(
                ErrorCode::InvalidParams,
                "this process runs on a PTY: use pty.input",
            ));
        }
        let accepted = self.queue_input(&p.session_id, &p.process_id, &bytes, p.eof)?;
        match self.procs.get_mut(&p.process_id) {
            Some(proc_) if !proc_.stdin_buf.is_empty() => {
                proc_.input_waiters.push((handle, accepted));
                Ok(None)
            }
            _ => Ok(Some(Response::ExecInput(ExecInputResult {
                accepted_bytes: accepted,
            }))),
        }
    }

    /// Answers the `exec.input` calls waiting on `p`'s buffer.
    fn answer_input(p: &mut Proc, outputs: &mut VecDeque<ServiceOutput>) {
        for (handle, accepted) in std::mem::take(&mut p.input_waiters) {
            outputs.push_back(ServiceOutput::Reply {
                handle,
                result: Ok(Response::ExecInput(ExecInputResult {
                    accepted_bytes: accepted,
                })),
            });
        }
    }

    /// Writes buffered input; closes stdin after it when EOF was asked for.
    fn flush_stdin(&mut self, key: u64) {
        let Some(id) = self.by_key.get(&key) else {
            return;
        };
        let Some(p) = self.procs.get_mut(id) else {
            return;
        };
        let Some(fd) = &p.stdin else {
            return;
        };
        while !p.stdin_buf.is_empty() {
            let mut f = std::mem::ManuallyDrop::new(unsafe_file(fd));
            match f.write(&p.stdin_buf) {
                Ok(n) => {
                    p.stdin_buf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // EPIPE: the process closed its stdin; what it did not read is dropped.
                    p.stdin_buf.clear();
                    p.stdin_eof = true;
                    break;
                }
            }
        }
        if p.stdin_buf.is_empty() {
            Self::answer_input(p, &mut self.outputs);
        }
        if p.stdin_eof
            && p.pty_id.is_none()
            && let Some(fd) = p.stdin.take()
        {
            let _ = self.registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
        }
    }

    fn pty_open(&mut self, now: u64, p: PtyOpenParams) -> OpResult<PtyOpenResult> {
        let (cwd, checked) =
            self.prepare(&p.session_id, &p.program, p.cwd.as_deref(), p.env.as_ref())?;
        self.last_decision = checked.decision.clone();
        let program = checked.program.as_ref().unwrap_or(&p.program);
        let mut proc_ = self.new_proc(now, &p.session_id, false);
        self.next_pty += 1;
        let pty_id = format!("t_{}", self.next_pty);
        proc_.pty_id = Some(pty_id.clone());
        let (cols, rows) = p.size();
        let (tree, sp) = self
            .spawn_in_tree(proc_.key, |join| {
                let launch = Launch {
                    program,
                    exe: checked.exe.as_deref(),
                    cwd: &cwd,
                    env: checked.env.as_ref(),
                    join,
                };
                process::spawn_pty(&launch, cols, rows)
            })
            .map_err(|e| err(ErrorCode::InvalidParams, format!("cannot start: {e}")))?;
        proc_.tree = Some(tree);
        self.attach_or_kill(&mut proc_, sp)?;
        let result = PtyOpenResult {
            pty_id,
            process_id: proc_.id.clone(),
        };
        self.insert(proc_);
        Ok(result)
    }

    fn pty_proc(&mut self, session: &str, pty_id: &str) -> OpResult<String> {
        self.session(session)?;
        self.procs
            .values()
            .find(|p| p.session == session && p.pty_id.as_deref() == Some(pty_id) && !p.orphaned)
            .map(|p| p.id.clone())
            .ok_or_else(|| {
                err(
                    ErrorCode::ProcessNotFound,
                    format!("no PTY {pty_id:?} in this session"),
                )
                .with_data(json!({"pty_id": pty_id}))
            })
    }

    fn pty_input(&mut self, p: PtyInputParams) -> OpResult<ExecInputResult> {
        let bytes = self.input_bytes(&p.session_id, &p.data, p.encoding)?;
        let id = self.pty_proc(&p.session_id, &p.pty_id)?;
        let accepted = self.queue_input(&p.session_id, &id, &bytes, false)?;
        Ok(ExecInputResult {
            accepted_bytes: accepted,
        })
    }

    fn pty_resize(&mut self, p: PtyResizeParams) -> OpResult<OkResult> {
        let id = self.pty_proc(&p.session_id, &p.pty_id)?;
        let proc_ = &self.procs[&id];
        let Some(master) = &proc_.stdin else {
            return Err(err(ErrorCode::ProcessNotFound, "the PTY is closed"));
        };
        if p.cols == 0 || p.rows == 0 {
            return Err(err(
                ErrorCode::InvalidParams,
                "cols and rows must be above 0",
            ));
        }
        sys::set_winsize(master.as_fd(), p.cols, p.rows)
            .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
        Ok(OkResult { ok: true })
    }

    fn pty_close(&mut self, now: u64, p: PtyCloseParams) -> OpResult<OkResult> {
        let id = self.pty_proc(&p.session_id, &p.pty_id)?;
        let proc_ = self.procs.get_mut(&id).expect("found above");
        let running = !proc_.finished;
        let key = proc_.key;
        if p.kill_process && running {
            proc_.killed = true;
        }
        // Closing the master hangs up the terminal (SIGHUP to its session).
        if let Some(fd) = proc_.stdin.take() {
            let _ = self.registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
        }
        if let Some(out) = proc_.stdout.take() {
            drop(out);
        }
        proc_.stdin_buf.clear();
        if p.kill_process && running {
            self.terminate(now, key);
        }
        self.try_finish(now, key);
        Ok(OkResult { ok: running })
    }

    /// Passes readiness of a service token (`readable` includes hang-up / error).
    pub fn handle_event(&mut self, now: u64, token: Token, readable: bool, writable: bool) {
        let Some(rel) = token.0.checked_sub(TOKEN_BASE) else {
            return;
        };
        let key = (rel / 4) as u64;
        let stream = Stream::from_index(rel % 4);
        match stream {
            Stream::Stdout | Stream::Stderr => {
                if readable {
                    self.readable.insert((key, stream as usize));
                }
                if writable {
                    self.flush_stdin(key);
                }
            }
            Stream::Stdin => self.flush_stdin(key),
            Stream::Exit => self.reap(now, key),
        }
    }

    fn reap(&mut self, now: u64, key: u64) {
        let Some(id) = self.by_key.get(&key) else {
            return;
        };
        let Some(p) = self.procs.get_mut(id) else {
            return;
        };
        if p.exit.is_some() {
            return;
        }
        if let Ok(Some(status)) = sys::try_wait(p.pid) {
            p.exit = Some(status);
            if let Some(tree) = p.tree.as_mut() {
                self.tracker.reaped(tree);
            }
            if let Some(fd) = p.pidfd.take() {
                let _ = self.registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
            }
            // Whatever still holds the pipes gets the grace, then is killed and the pipes
            // closed: `exec.exit` must not wait on a process that left the group.
            if p.stdout.is_some() || p.stderr.is_some() {
                let at = now.saturating_add(self.settings.limits.kill_grace_ms);
                self.timers.insert((at, key, TimerKind::CloseStreams));
            }
            // Output may still be in the pipes; reading them to EOF comes before exec.exit.
            self.readable.insert((key, Stream::Stdout as usize));
            self.readable.insert((key, Stream::Stderr as usize));
            self.try_finish(now, key);
        }
    }

    /// Whether streams have data that [`Service::pump`] has not read yet (poll with a zero
    /// timeout then, if the host can take more output).
    pub fn wants_pump(&self) -> bool {
        self.readable.iter().any(|(key, _)| !self.is_paused(*key))
    }

    /// Whether `key`'s session is paused ([`Service::set_paused`]).
    fn is_paused(&self, key: u64) -> bool {
        !self.paused.is_empty()
            && self
                .by_key
                .get(&key)
                .and_then(|id| self.procs.get(id))
                .is_some_and(|p| self.paused.contains(&p.session))
    }

    /// Stops (or resumes) reading the output of `session`'s processes: a host whose client
    /// for that session is behind pauses it, so the children block on full pipes (as with a
    /// slow ssh channel) and the host's memory does not grow. Timers still run.
    pub fn set_paused(&mut self, session: &str, paused: bool) {
        if paused {
            self.paused.insert(session.to_owned());
        } else {
            self.paused.remove(session);
        }
    }

    /// Closes `session` as `session.close` would (its attached processes end; detached ones
    /// run on), for a host whose client for it went away. `false` if there is no such session.
    pub fn close_session_now(&mut self, now: u64, session: &str, cause: SessionEnd) -> bool {
        if !self.sessions.contains_key(session) {
            return false;
        }
        self.paused.remove(session);
        self.close_session(now, session, false, cause);
        self.update_gauges();
        true
    }

    /// The principal a session was opened by ([`Service::call_from`]); `None` for an unknown
    /// session or one opened without.
    pub fn session_principal(&self, session: &str) -> Option<Option<&str>> {
        self.sessions.get(session).map(|s| s.principal.as_deref())
    }

    /// Reads children's output into events, up to about `budget` bytes (the room the host has
    /// for output). Streams not drained stay queued for the next call.
    pub fn pump(&mut self, now: u64, budget: usize) {
        let mut budget = budget;
        // Round robin: one chunk from each ready stream per round, so one chatty process does
        // not starve the others.
        while budget > 0 && !self.readable.is_empty() {
            let round: Vec<(u64, usize)> = self
                .readable
                .iter()
                .copied()
                .filter(|(key, _)| !self.is_paused(*key))
                .collect();
            if round.is_empty() {
                break;
            }
            for (key, stream) in round {
                if budget == 0 {
                    break;
                }
                match self.read_chunk(key, stream) {
                    ReadOutcome::Data(n) => budget = budget.saturating_sub(n.max(1)),
                    ReadOutcome::Drained => {
                        self.readable.remove(&(key, stream));
                    }
                    ReadOutcome::Closed => {
                        self.readable.remove(&(key, stream));
                        self.try_finish(now, key);
                    }
                }
            }
        }
    }

    fn read_chunk(&mut self, key: u64, stream: usize) -> ReadOutcome {
        let Some(id) = self.by_key.get(&key) else {
            return ReadOutcome::Drained;
        };
        let Some(p) = self.procs.get_mut(id) else {
            return ReadOutcome::Drained;
        };
        let is_err = stream == Stream::Stderr as usize;
        let out = if is_err { &mut p.stderr } else { &mut p.stdout };
        let Some(o) = out.as_mut() else {
            return ReadOutcome::Drained;
        };
        let mut f = std::mem::ManuallyDrop::new(unsafe_file(&o.fd));
        let n = match f.read(&mut self.buf) {
            Ok(0) => 0,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::Drained,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return ReadOutcome::Data(0),
            // EIO: a PTY whose other side is all closed — the end of its output.
            Err(_) => 0,
        };
        if n == 0 {
            // EOF: flush a held-back partial character, then close.
            let carry = std::mem::take(&mut o.carry);
            if !carry.is_empty() {
                emit_output(p, is_err, &carry, &mut self.outputs);
            }
            let out = if is_err { &mut p.stderr } else { &mut p.stdout };
            if let Some(o) = out.take() {
                let _ = self.registry.deregister(&mut SourceFd(&o.fd.as_raw_fd()));
            }
            return ReadOutcome::Closed;
        }
        // Complete UTF-8 goes out as text; an unfinished trailing sequence waits for more.
        let mut data = std::mem::take(&mut o.carry);
        data.extend_from_slice(&self.buf[..n]);
        let keep = match std::str::from_utf8(&data) {
            Ok(_) => data.len(),
            Err(e) if e.error_len().is_none() && data.len() - e.valid_up_to() < 4 => {
                e.valid_up_to()
            }
            Err(_) => data.len(),
        };
        o.carry = data[keep..].to_vec();
        data.truncate(keep);
        if !data.is_empty() {
            emit_output(p, is_err, &data, &mut self.outputs);
        }
        ReadOutcome::Data(n)
    }

    /// Emits the terminal event and answers waiters once the process exited and its output
    /// streams are closed (so `exec.exit` always follows the last output).
    fn try_finish(&mut self, now: u64, key: u64) {
        let Some(id) = self.by_key.get(&key).cloned() else {
            return;
        };
        let Some(p) = self.procs.get_mut(&id) else {
            return;
        };
        if p.finished || p.exit.is_none() || p.stdout.is_some() || p.stderr.is_some() {
            return;
        }
        p.finished = true;
        // The leader is gone and so are its pipes: what it left running (a daemonized
        // grandchild) ends with it.
        if let Some(tree) = p.tree.take() {
            self.tracker.kill(&tree);
            self.retire(now, tree);
            if self.tracker.has_pending() {
                self.housekeeping_soon(now);
            }
        }
        let Some(p) = self.procs.get_mut(&id) else {
            return;
        };
        if let Some(fd) = p.stdin.take() {
            let _ = self.registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
        }
        p.stdin_buf = Vec::new();
        // What the process never read is dropped; the calls that brought it are answered.
        Self::answer_input(p, &mut self.outputs);
        let duration_ms = now.saturating_sub(p.started_ms);
        if !p.orphaned {
            let event = match &p.pty_id {
                Some(pty) => Event::PtyExit(PtyExit {
                    session_id: p.session.clone(),
                    pty_id: pty.clone(),
                    process_id: p.id.clone(),
                    exit_code: p.exit_code(),
                    signal: p.signal(),
                    duration_ms,
                }),
                None => Event::ExecExit(ExecExit {
                    session_id: p.session.clone(),
                    process_id: p.id.clone(),
                    exit_code: p.exit_code(),
                    signal: p.signal(),
                    timed_out: p.timed_out,
                    duration_ms,
                    bytes_stdout: p.bytes_stdout,
                    bytes_stderr: p.bytes_stderr,
                    truncated: p.truncated,
                }),
            };
            self.outputs.push_back(ServiceOutput::Event(event));
        }
        let outcome = match p.exit {
            _ if p.timed_out => "timeout",
            Some(WaitStatus::Exited(0)) => "exit_0",
            Some(WaitStatus::Exited(_)) => "exit_nonzero",
            _ => "signal",
        };
        self.settings.metrics.exec(&p.class, outcome);
        let result = p.wait_result();
        for handle in std::mem::take(&mut p.waiters) {
            self.waits.remove(&handle);
            self.outputs.push_back(ServiceOutput::Reply {
                handle,
                result: Ok(Response::ExecWait(result.clone())),
            });
        }
        if self.settings.audit.enabled() {
            let (sid, pid, code, sig, to) = (
                p.session.clone(),
                p.id.clone(),
                p.exit_code(),
                p.signal(),
                p.timed_out,
            );
            let client = self.sessions.get(&sid).map(|s| s.client.clone());
            let (principal, address) = self.who_of(Some(&sid));
            self.settings.audit.record(
                Some(&sid),
                client.as_deref(),
                Who {
                    principal: principal.as_deref(),
                    address: address.as_deref(),
                },
                "exec.exit",
                json!({"process_id": pid}),
                json!({"exit_code": code, "signal": sig, "timed_out": to, "duration_ms": duration_ms}),
            );
        }
        self.timers.retain(|t| t.1 != key);
        let orphaned = self.procs.get(&id).is_some_and(|p| p.orphaned);
        if orphaned {
            self.forget(key);
        }
        self.update_gauges();
    }

    /// Fires timers due at `now`: timeouts (TERM), escalations (KILL), `exec.wait` timeouts.
    pub fn handle_timeout(&mut self, now: u64) {
        while let Some(&t) = self.timers.iter().next() {
            if t.0 > now {
                break;
            }
            self.timers.remove(&t);
            let (_, key, kind) = t;
            if kind == TimerKind::Housekeeping {
                self.housekeeping(now);
                continue;
            }
            let Some(id) = self.by_key.get(&key).cloned() else {
                continue;
            };
            let Some(p) = self.procs.get_mut(&id) else {
                continue;
            };
            match kind {
                TimerKind::Timeout if !p.finished => {
                    p.timed_out = true;
                    self.terminate(now, key);
                }
                TimerKind::Escalate if !p.finished => self.kill_tree(now, key),
                TimerKind::CloseStreams if !p.finished => self.close_streams(now, key),
                TimerKind::Wait(handle) => {
                    if let Some(pos) = p.waiters.iter().position(|h| *h == handle) {
                        p.waiters.remove(pos);
                        self.waits.remove(&handle);
                        let result = p.wait_result();
                        self.outputs.push_back(ServiceOutput::Reply {
                            handle,
                            result: Ok(Response::ExecWait(result)),
                        });
                    }
                }
                _ => {}
            }
        }
    }

    /// The leader was reaped a grace ago and its pipes are still open: kills what holds them,
    /// reads what they hold (a bounded amount) and closes them.
    fn close_streams(&mut self, now: u64, key: u64) {
        self.kill_tree(now, key);
        for stream in [Stream::Stdout as usize, Stream::Stderr as usize] {
            // Up to 16 reads: a writer that survived the kill cannot keep us here.
            for _ in 0..16 {
                match self.read_chunk(key, stream) {
                    ReadOutcome::Data(_) => {}
                    ReadOutcome::Drained | ReadOutcome::Closed => break,
                }
            }
            self.readable.remove(&(key, stream));
        }
        let Some(p) = self.by_key.get(&key).and_then(|id| self.procs.get_mut(id)) else {
            return;
        };
        for out in [p.stdout.take(), p.stderr.take()].into_iter().flatten() {
            let _ = self.registry.deregister(&mut SourceFd(&out.fd.as_raw_fd()));
        }
        self.try_finish(now, key);
    }

    /// Removes emptied cgroups and reaps killed orphans; runs again while some are left.
    fn housekeeping(&mut self, now: u64) {
        self.dead_trees.retain(|t| !t.remove());
        let left = self.tracker.reap();
        if left || !self.dead_trees.is_empty() {
            self.housekeeping_soon(now);
        }
    }

    /// The earliest timer, if any.
    pub fn next_deadline(&self) -> Option<u64> {
        self.timers.iter().next().map(|t| t.0)
    }

    /// Whether replies or events are waiting for [`Service::poll_output`].
    pub fn has_output(&self) -> bool {
        !self.outputs.is_empty()
    }

    /// The next reply or event.
    pub fn poll_output(&mut self) -> Option<ServiceOutput> {
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
            .filter(|p| !p.finished && !p.failed)
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
            .filter(|p| p.pid > 1 && p.exit.is_none() && !p.failed)
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

enum ReadOutcome {
    Data(usize),
    Drained,
    Closed,
}

/// A `File` view of a descriptor we keep owning (wrap in `ManuallyDrop`, never drop).
fn unsafe_file(fd: &OwnedFd) -> std::fs::File {
    use std::os::fd::FromRawFd;
    // SAFETY: the caller wraps the File in ManuallyDrop, so the descriptor is not closed twice.
    unsafe { std::fs::File::from_raw_fd(fd.as_raw_fd()) }
}

/// Queues an output event, applying the process's output cap.
fn emit_output(p: &mut Proc, is_err: bool, data: &[u8], outputs: &mut VecDeque<ServiceOutput>) {
    if p.truncated || p.orphaned {
        return;
    }
    let used = p.bytes_stdout + p.bytes_stderr;
    let mut take = data.len();
    if let Some(cap) = p.cap
        && used + take as u64 > cap
    {
        take = cap.saturating_sub(used) as usize;
        p.truncated = true;
    }
    if take == 0 {
        return;
    }
    let data = &data[..take];
    let event = if let Some(pty) = &p.pty_id {
        let Some(o) = p.stdout.as_mut() else {
            return;
        };
        o.seq += 1;
        let seq = o.seq;
        let (encoding, text) = compress::encode(data, p.compress);
        Event::PtyOutput(PtyOutput {
            session_id: p.session.clone().into(),
            pty_id: pty.clone().into(),
            seq,
            data: text.into_owned().into(),
            encoding,
        })
    } else {
        let o = if is_err { &mut p.stderr } else { &mut p.stdout };
        let seq = match o.as_mut() {
            Some(o) => {
                o.seq += 1;
                o.seq
            }
            // Output is only emitted while its stream is open.
            None => return,
        };
        let out = if p.raw_output {
            // The bytes as they are after the line, or one zstd frame of them when that is
            // shorter: no escaping, no base64, on either side.
            let (encoding, raw) = match p.compress.then(|| compress::raw_frame(data)) {
                Some(Some(frame)) => (Encoding::Zstd, frame),
                _ => (Encoding::Raw, data.to_vec()),
            };
            ExecOutput::raw_frame(p.session.clone(), p.id.clone(), seq, encoding, raw)
        } else {
            let (encoding, text) = compress::encode(data, p.compress);
            ExecOutput {
                session_id: p.session.clone().into(),
                process_id: p.id.clone().into(),
                seq,
                data: text.into_owned().into(),
                encoding,
                ..ExecOutput::default()
            }
        };
        if is_err {
            Event::ExecStderr(out)
        } else {
            Event::ExecStdout(out)
        }
    };
    if is_err {
        p.bytes_stderr += take as u64;
    } else {
        p.bytes_stdout += take as u64;
    }
    outputs.push_back(ServiceOutput::Event(event));
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

/// The client end of `$SSH_CONNECTION` (`CLIENT_IP CLIENT_PORT SERVER_IP SERVER_PORT`, set by
/// sshd for `ssh host rexd --stdio`) as `IP:PORT`; `None` when rexd does not run under ssh.
pub fn ssh_client_address() -> Option<String> {
    let value = std::env::var("SSH_CONNECTION").ok()?;
    let mut parts = value.split_whitespace();
    let (ip, port) = (parts.next()?, parts.next()?);
    Some(match ip.contains(':') {
        true => format!("[{ip}]:{port}"),
        false => format!("{ip}:{port}"),
    })
}
