//! A blocking client over a child process's stdio (`rexd --stdio`, or `ssh … rexd --stdio`).
//!
//! The core's sans-IO [`Peer`] does the JSON-RPC work (NDJSON framing, ids, the pending table,
//! deadlines); this module is its host loop. A reader thread turns the child's stdout into
//! chunks on a bounded channel (so a fast daemon is slowed down by the pipe, not buffered here
//! without end), another keeps the tail of its stderr for error messages, and the caller's
//! thread writes requests and waits on the channel until the peer's next deadline.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use deskwire::jsonrpc::framing::DEFAULT_MAX_MESSAGE_BYTES;
use deskwire::jsonrpc::{
    CallError, Code, Id, JsonRpc2, Output, Peer, PeerConfig, PeerEvent, RawJson, TimeoutPolicy,
    TimeoutRule,
};
use deskwire::rexd::data::{self, Encoding};
use deskwire::rexd::{
    Call, Capability, ErrorCode, Event, ExecExit, ExecInputParams, ExecKillParams, ExecStartParams,
    FsGlobParams, FsGlobResult, FsListParams, FsListResult, FsReadParams, FsReadResult,
    FsStatParams, FsStatResult, FsWriteParams, FsWriteResult, Limits, Method, Program,
    SessionCloseParams, SessionInfoParams, SessionInfoResult, SessionOpenParams, SessionOpenResult,
    SessionResumeParams, Signal, WriteMode,
};

use super::error::{ClientError, missing_rexd_hint};
use super::{Endpoint, TargetSpec};
use crate::compress;
use deskwire::rexd::frames::{self, RawFrames};

/// Most bytes of events held while the caller waits for something else.
pub const MAX_BUFFERED_EVENT_BYTES: usize = 64 * 1024 * 1024;
/// How much of the transport's stderr is kept for error messages.
const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// Chunks of stdout in flight between the reader thread and the caller (64 KiB each).
const CHANNEL_CHUNKS: usize = 64;
const READ_CHUNK: usize = 64 * 1024;
/// Reads shorter than this are copied out of the reader's buffer; longer ones take it along.
const SMALL_READ: usize = 8 * 1024;
/// The largest `fs.read` piece asked for (8 MiB: 11 MiB as base64, under the 16 MiB line cap).
const MAX_READ_PIECE: u64 = 8 * 1024 * 1024;
/// The most bytes one compressed output event may inflate to: what one plain message could
/// carry.
const MAX_EVENT_BYTES: usize = compress::MAX_INFLATED;
/// `fs.read` pieces asked for at once by [`Client::read_file`].
pub const READ_AHEAD: usize = 3;
/// Room a request's line takes besides its params (`{"jsonrpc":"2.0","id":…,"method":…}`).
const REQUEST_ENVELOPE_BYTES: usize = 256;
/// `exec.input` calls in flight at once: the stdin forwarder waits for answers beyond this.
const MAX_INPUT_IN_FLIGHT: usize = 4;

/// How to connect.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// `client_name` in `session.open` (it shows in the daemon's audit log).
    pub client_name: String,
    /// How long one call may wait for its answer.
    pub call_timeout_ms: u64,
    /// Copy the transport's stderr (daemon logs, ssh messages) to ours as it comes.
    pub forward_stderr: bool,
    /// Limits to ask for (the daemon only lowers its own).
    pub limits: Option<Limits>,
    /// Open a resumable session (over ssh, the remote `rexd --stdio --resumable`) and, when
    /// the link drops while a command runs, reconnect and resume it by itself: every event
    /// exactly once, then the live stream. Reconnects are tried after 0.2, 0.5, 1, 2, 4 and
    /// 8 s (about 16 s in all, under the daemon's 60 s grace).
    pub resume: bool,
    /// Offer `zstd` compression at `session.open`. When the daemon takes it, output events
    /// and `fs.read`/`fs.write` contents travel compressed where that makes them shorter
    /// (`docs/rexd-compression.md`); inflated sizes are bounded by what was asked for.
    pub compress: bool,
    /// Offer raw frames and raw output at `session.open` (every target: after the line on a
    /// child's stdio, `local` and ssh; one binary message with the line on a WebSocket). When
    /// the daemon grants them, [`Client::read_file`] gets file bytes after each answer's line
    /// and [`Client::exec`] output bytes after each event's, instead of inside a JSON string
    /// (`docs/rexd-raw-frames.md`). A daemon that does not know them ignores the offer, and
    /// everything travels as before.
    pub raw_frames: bool,
    /// Have the kernel end the transport's child (ssh, or a local rexd) with SIGTERM when the
    /// thread that connected exits, even when the process is killed with SIGKILL
    /// (`PR_SET_PDEATHSIG`), so that no ssh is left connecting or connected for nobody. For a
    /// program that connects from its main thread, as `rex` does: the kernel ties the signal
    /// to the thread, not the process. Off by default.
    pub end_with_this_thread: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            client_name: "rex".into(),
            call_timeout_ms: 120_000,
            forward_stderr: false,
            limits: None,
            resume: false,
            compress: false,
            raw_frames: true,
            end_with_this_thread: false,
        }
    }
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// `exec.stdout`
    Stdout,
    /// `exec.stderr`
    Stderr,
}

/// Per-command options of [`Client::exec`].
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// Working directory (the target's `cwd` when absent).
    pub cwd: Option<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// A small stdin payload sent with the start (`stdin` param), then EOF. Without it and
    /// without an `input` reader, [`Client::exec`] gives the command an empty stdin.
    pub stdin: Option<String>,
    /// The daemon kills the command after this long.
    pub timeout_ms: Option<u64>,
    /// Output cap for this command.
    pub max_output_bytes: Option<u64>,
    /// No cap but the daemon's hard one (`limits.hard_output_bytes`): for a caller that
    /// streams the output on (a terminal, a file), as `rex exec` does; ignored with
    /// `max_output_bytes`.
    pub uncapped_output: bool,
}

/// Options of [`Client::write_file`].
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Create only, replace (default) or append.
    pub mode: WriteMode,
    /// Create missing parent directories.
    pub mkdir_parents: bool,
    /// Refuse the write when the file's mtime is not this (optimistic concurrency).
    pub expected_mtime: Option<String>,
}

/// What the threads hand the caller's thread.
pub(crate) enum Input {
    Stdout(Vec<u8>),
    /// A text WebSocket message, `\n` appended: one JSON value.
    #[cfg(feature = "net")]
    Text(Vec<u8>),
    /// A binary WebSocket message: one raw frame (`docs/rexd-raw-frames.md`).
    #[cfg(feature = "net")]
    Binary(Vec<u8>),
    StdoutEnd(Option<io::Error>),
    Local(Vec<u8>),
    LocalEnd,
}

/// A counter the stdin forwarder waits on: at most [`MAX_INPUT_IN_FLIGHT`] chunks unanswered;
/// closed when the command ends, so the forwarder stops instead of waiting forever.
#[derive(Default)]
struct Gate {
    /// (chunks in flight, closed)
    state: Mutex<(usize, bool)>,
    cond: Condvar,
}

impl Gate {
    /// Takes a slot; `false` once the gate is closed.
    fn enter(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while s.0 >= MAX_INPUT_IN_FLIGHT && !s.1 {
            s = self.cond.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.0 += 1;
        !s.1
    }

    fn leave(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.0 = s.0.saturating_sub(1);
        self.cond.notify_all();
    }

    fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.cond.notify_all();
    }

    fn is_closed(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1
    }
}

/// Where forwarded stdin goes while a command runs.
struct InputRoute {
    process_id: String,
    gate: Arc<Gate>,
    calls: HashSet<Id>,
    error: Option<ClientError>,
}

/// How the bytes travel.
enum Transport {
    /// A child's stdio: `rexd --stdio`, or `ssh … rexd --stdio`.
    Process {
        child: Child,
        stdin: Option<ChildStdin>,
    },
    /// A WebSocket to `rexd --listen`.
    #[cfg(feature = "net")]
    Ws(super::ws::WsTransport),
}

impl Transport {
    fn is_open(&self) -> bool {
        match self {
            Transport::Process { stdin, .. } => stdin.is_some(),
            #[cfg(feature = "net")]
            Transport::Ws(ws) => ws.is_open(),
        }
    }
}

/// A connection to one daemon with one open session. See the module docs.
pub struct Client {
    target: String,
    spec: TargetSpec,
    endpoint: Endpoint,
    transport: Transport,
    inbox: Receiver<Input>,
    sender: SyncSender<Input>,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    stderr_thread: Option<JoinHandle<()>>,
    peer: Peer<JsonRpc2>,
    clock: Instant,
    call_timeout_ms: u64,
    answers: HashMap<Id, Result<RawJson, ClientError>>,
    /// Events in order: the method, the params, and the raw bytes after the line (an output
    /// event's in a session with raw output; empty otherwise).
    events: VecDeque<(Method, Option<RawJson>, Vec<u8>)>,
    events_bytes: usize,
    input: Option<InputRoute>,
    session: Option<SessionOpenResult>,
    options: ConnectOptions,
    /// The `event_seq` of the last event of a resumable session taken in.
    last_event: u64,
    /// Between the transport and the peer while raw frames are offered or granted.
    frames: Option<RawFrames>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("target", &self.target)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Starts the transport for `spec` and opens a session.
    ///
    /// A daemon that is not installed (locally, or on the remote PATH: ssh's exit 127) is
    /// [`ClientError::RexdNotFound`] with how to fix it; an ssh failure (auth, host key,
    /// network) is [`ClientError::Closed`] with ssh's own message.
    pub fn connect(spec: &TargetSpec, options: &ConnectOptions) -> Result<Client, ClientError> {
        let endpoint = spec.endpoint()?;
        let mut spec = spec.clone();
        if options.resume && !matches!(endpoint, Endpoint::Ws { .. }) {
            // Over ssh (and locally), the daemon must outlive the link: its agent does.
            spec.rexd_args.insert(0, "--resumable".into());
        }
        let spec = &spec;
        let (sender, inbox) = sync_channel(CHANNEL_CHUNKS);
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let (transport, stderr_thread) = match &endpoint {
            #[cfg(feature = "net")]
            Endpoint::Ws { .. } => (
                Transport::Ws(super::ws::connect(spec, &endpoint, sender.clone())?),
                None,
            ),
            #[cfg(not(feature = "net"))]
            Endpoint::Ws { given, .. } => {
                return Err(ClientError::BadTarget {
                    target: given.clone(),
                    reason: "this rex was built without the `net` feature".into(),
                });
            }
            _ => Client::spawn(spec, &endpoint, options, &sender, &stderr_tail)?,
        };
        Client::start(
            spec,
            options,
            endpoint,
            transport,
            (sender, inbox),
            stderr_tail,
            stderr_thread,
        )
    }

    /// Starts the child that carries a process transport, with its reader threads.
    fn spawn(
        spec: &TargetSpec,
        endpoint: &Endpoint,
        options: &ConnectOptions,
        sender: &SyncSender<Input>,
        stderr_tail: &Arc<Mutex<Vec<u8>>>,
    ) -> Result<(Transport, Option<JoinHandle<()>>), ClientError> {
        let endpoint = endpoint.clone();
        let mut cmd = spec.command()?;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if options.end_with_this_thread {
            end_with_parent(&mut cmd);
        }
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd.spawn().map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound && endpoint == Endpoint::Local {
                ClientError::RexdNotFound(missing_rexd_hint(spec, &endpoint))
            } else {
                ClientError::Spawn {
                    program: program.clone(),
                    source,
                }
            }
        })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped above");
        crate::sys::set_pipe_size(std::os::fd::AsFd::as_fd(&stdout), 1 << 20);
        let stderr = child.stderr.take().expect("piped above");
        let out_sender = sender.clone();
        std::thread::spawn(move || read_stdout(stdout, out_sender));
        let tail = Arc::clone(stderr_tail);
        let forward = options.forward_stderr;
        let stderr_thread = Some(std::thread::spawn(move || {
            read_stderr(stderr, tail, forward)
        }));
        Ok((Transport::Process { child, stdin }, stderr_thread))
    }

    /// The session over a started transport.
    fn start(
        spec: &TargetSpec,
        options: &ConnectOptions,
        endpoint: Endpoint,
        transport: Transport,
        (sender, inbox): (SyncSender<Input>, Receiver<Input>),
        stderr_tail: Arc<Mutex<Vec<u8>>>,
        stderr_thread: Option<JoinHandle<()>>,
    ) -> Result<Client, ClientError> {
        let mut timeouts = TimeoutPolicy::uniform(options.call_timeout_ms);
        // The daemon answers `exec.input` once the command took the bytes: a command that does
        // not read for a while holds the stdin forwarder, as ssh's window does, without failing.
        timeouts.rules.push(TimeoutRule {
            prefix: Method::ExecInput.as_str().to_owned(),
            timeout_ms: u64::MAX,
            max_total_ms: u64::MAX,
        });
        let config = PeerConfig {
            timeouts,
            ..PeerConfig::default()
        };
        let mut client = Client {
            target: endpoint.to_string(),
            spec: spec.clone(),
            endpoint,
            transport,
            inbox,
            sender,
            stderr_tail,
            stderr_thread,
            peer: Peer::new(JsonRpc2, config, u64::from(std::process::id())),
            clock: Instant::now(),
            call_timeout_ms: options.call_timeout_ms,
            answers: HashMap::new(),
            events: VecDeque::new(),
            events_bytes: 0,
            input: None,
            session: None,
            options: options.clone(),
            last_event: 0,
            // A child's stdio carries a raw frame's bytes after its line, a WebSocket in one
            // binary message with it; either way the splitter checks them.
            frames: options.raw_frames.then(RawFrames::default),
        };
        let roots = (!spec.workspace_roots.is_empty()).then(|| spec.workspace_roots.clone());
        let opened = client.call(SessionOpenParams {
            client_name: options.client_name.clone(),
            client_version: Some(env!("CARGO_PKG_VERSION").into()),
            workspace_roots: roots,
            requested_capabilities: None,
            limits: options.limits,
            resumable: options.resume,
            compression: options.compress.then(|| vec![compress::ZSTD.to_owned()]),
            raw_frames: client.frames.is_some(),
            raw_output: client.frames.is_some(),
        })?;
        if !opened.raw_frames {
            client.stop_frames();
        } else if opened.raw_output
            && let Some(f) = &mut client.frames
        {
            f.allow_output(MAX_EVENT_BYTES as u64);
        }
        client.session = Some(opened);
        Ok(client)
    }

    /// The target as a URL (`local`, `ssh://…`).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// What `session.open` answered: session id, capabilities, limits, roots.
    pub fn session(&self) -> &SessionOpenResult {
        self.session.as_ref().expect("set by connect")
    }

    /// Whether the session negotiated compression (`zstd` payloads).
    pub fn compressed(&self) -> bool {
        self.session
            .as_ref()
            .and_then(|s| s.compression.as_deref())
            .is_some_and(|c| c == compress::ZSTD)
    }

    /// Whether the session has raw frames: `fs.read` bytes come after each answer's line.
    pub fn raw_frames(&self) -> bool {
        self.frames.is_some() && self.session.as_ref().is_some_and(|s| s.raw_frames)
    }

    /// Not granted: lines go straight to the peer again (the splitter only costs a scan).
    fn stop_frames(&mut self) {
        if let Some(f) = self.frames.take() {
            // The start of a line that came after the answer, if any, is the peer's.
            let held = f.into_held();
            if !held.is_empty() {
                let now = self.now();
                self.peer.handle_bytes(now, &held);
            }
        }
    }

    fn session_id(&self) -> String {
        self.session().session_id.clone()
    }

    fn now(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    /// One typed call: sends `params`, waits for the answer (events that arrive meanwhile are
    /// kept for [`Client::exec`]).
    pub fn call<C: Call>(&mut self, params: C) -> Result<C::Result, ClientError> {
        let raw = RawJson::to_raw(&params)
            .map_err(|e| ClientError::Protocol(format!("encoding {}: {e}", C::METHOD)))?;
        let result = self.call_raw(C::METHOD, raw)?;
        serde_json::from_str(result.get()).map_err(|e| {
            ClientError::Protocol(format!("the answer to {} does not fit: {e}", C::METHOD))
        })
    }

    fn call_raw(&mut self, method: Method, params: RawJson) -> Result<RawJson, ClientError> {
        // A raw answer's bytes are not in the result this returns: only `read_file` asks.
        if method == Method::FsRead && params.get().contains(r#""encoding":"raw""#) {
            return Err(ClientError::Protocol(
                "fs.read with encoding \"raw\" goes through Client::read_file".into(),
            ));
        }
        let id = self.send_call(method, params)?;
        self.answer_to(&id)
    }

    /// Sends a call without waiting; [`Client::answer_to`] waits for it. A request longer
    /// than a daemon's message limit is refused here: the daemon would drop it unanswered.
    fn send_call(&mut self, method: Method, params: RawJson) -> Result<Id, ClientError> {
        let bytes = params.get().len();
        if bytes + REQUEST_ENVELOPE_BYTES > DEFAULT_MAX_MESSAGE_BYTES {
            return Err(ClientError::TooLarge {
                method: method.as_str().into(),
                bytes,
                max: DEFAULT_MAX_MESSAGE_BYTES,
            });
        }
        let now = self.now();
        Ok(self.peer.call(now, method.as_str(), Some(params), 0)?)
    }

    fn send<C: Call>(&mut self, params: &C) -> Result<Id, ClientError> {
        let raw = RawJson::to_raw(params)
            .map_err(|e| ClientError::Protocol(format!("encoding {}: {e}", C::METHOD)))?;
        self.send_call(C::METHOD, raw)
    }

    /// Waits for the answer to call `id` (events that arrive meanwhile are kept).
    fn answer_to(&mut self, id: &Id) -> Result<RawJson, ClientError> {
        loop {
            let deadline = self.pump()?;
            if let Some(answer) = self.answers.remove(id) {
                return answer;
            }
            self.wait_input(deadline)?;
        }
    }

    /// Writes what the peer has to send and handles its events; returns its next deadline.
    fn pump(&mut self) -> Result<u64, ClientError> {
        loop {
            let now = self.now();
            match self.peer.poll_output(now) {
                Output::Transmit(bytes) => self.transmit(&bytes)?,
                Output::Event(event) => self.dispatch(event)?,
                Output::Timeout(deadline) => return Ok(deadline),
            }
        }
    }

    fn transmit(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        match &mut self.transport {
            Transport::Process { stdin, .. } => {
                let Some(stdin) = stdin.as_mut() else {
                    return Err(self.connection_lost(None));
                };
                if let Err(e) = stdin.write_all(bytes) {
                    // A broken pipe means the other end is gone: say why from its exit and
                    // stderr.
                    return Err(self.connection_lost(Some(e)));
                }
            }
            #[cfg(feature = "net")]
            Transport::Ws(ws) => {
                if !ws.send(bytes) {
                    return Err(self.connection_lost(None));
                }
            }
        }
        Ok(())
    }

    fn dispatch(&mut self, event: PeerEvent) -> Result<(), ClientError> {
        match event {
            PeerEvent::Response { id, result, .. } if !self.input_answered(&id, None) => {
                self.answers.insert(id, Ok(result));
            }
            PeerEvent::Failed {
                id, method, error, ..
            } => {
                let answered = matches!(error, CallError::Remote(_) | CallError::Malformed(_));
                let error = match error {
                    CallError::Remote(e) => ClientError::Remote {
                        method,
                        code: match e.code {
                            Code::Number(n) => n,
                            Code::Name(_) => ErrorCode::InternalError.code(),
                        },
                        message: e.message,
                        data: e.data.and_then(|d| serde_json::from_str(d.get()).ok()),
                    },
                    // An answer this end cannot read is the daemon's fault, not a wait.
                    CallError::Malformed(why) => {
                        ClientError::Protocol(format!("{method}: unreadable answer: {why}"))
                    }
                    _ => ClientError::Timeout {
                        method,
                        timeout_ms: self.call_timeout_ms,
                    },
                };
                if let Some(f) = &mut self.frames {
                    match answered {
                        // The daemon answered: no raw bytes come for this call.
                        true => f.forget(&id),
                        // Its answer may still come, bytes and all: they are skipped.
                        false => f.drop_call(&id),
                    }
                }
                if let Some(error) = self.take_unless_input(&id, error) {
                    self.answers.insert(id, Err(error));
                }
            }
            PeerEvent::Notification { method, params } => {
                // The bytes after an output event's line, taken in the order the lines came
                // (those of an event skipped below are dropped with it).
                let raw = match (&mut self.frames, &params) {
                    (Some(f), Some(p)) if frames::announces_output_bytes(&method, p.get()) => {
                        f.take_output().ok_or_else(|| {
                            ClientError::Protocol(format!(
                                "{method} announced raw bytes that did not come"
                            ))
                        })?
                    }
                    _ => Vec::new(),
                };
                // A resumed session sends again what may have been seen: each event once.
                if self.options.resume
                    && let Some(seq) = params.as_ref().and_then(|p| event_seq(p.get()))
                {
                    if seq <= self.last_event {
                        return Ok(());
                    }
                    self.last_event = seq;
                }
                // Only the spec's events are kept; anything else a newer daemon sends is noise.
                if let Some(m) = Method::from_name(&method).filter(|m| m.is_event()) {
                    let len = params.as_ref().map_or(0, |p| p.get().len()) + raw.len();
                    if self.events_bytes + len > MAX_BUFFERED_EVENT_BYTES {
                        return Err(ClientError::Overflow(MAX_BUFFERED_EVENT_BYTES));
                    }
                    self.events_bytes += len;
                    self.events.push_back((m, params, raw));
                }
            }
            PeerEvent::Request { id, method, .. } => {
                // The daemon has nothing to ask a client in REXD v1.
                let now = self.now();
                self.peer.respond_method_not_found(now, &id, &method)?;
            }
            // Unreadable lines are counted by the peer and skipped: the stream goes on.
            _ => {}
        }
        Ok(())
    }

    /// Whether `id` was an `exec.input` call (then its answer only opens the gate).
    fn input_answered(&mut self, id: &Id, error: Option<ClientError>) -> bool {
        let Some(route) = self.input.as_mut() else {
            return false;
        };
        if !route.calls.remove(id) {
            return false;
        }
        route.gate.leave();
        if route.error.is_none() {
            route.error = error;
        }
        true
    }

    fn take_unless_input(&mut self, id: &Id, error: ClientError) -> Option<ClientError> {
        let is_input = self.input.as_ref().is_some_and(|r| r.calls.contains(id));
        if is_input {
            self.input_answered(id, Some(error));
            None
        } else {
            Some(error)
        }
    }

    /// Waits for input from the threads until `deadline` (peer time) and feeds it in.
    fn wait_input(&mut self, deadline: u64) -> Result<(), ClientError> {
        let wait = Duration::from_millis(deadline.saturating_sub(self.now()).max(1));
        match self.inbox.recv_timeout(wait) {
            Ok(input) => self.feed(input),
            Err(RecvTimeoutError::Timeout) => Ok(()),
            // The client holds a sender itself, so this cannot happen; treat it as the end.
            Err(RecvTimeoutError::Disconnected) => Err(self.connection_lost(None)),
        }
    }

    fn feed(&mut self, input: Input) -> Result<(), ClientError> {
        match input {
            Input::Stdout(bytes) => {
                let now = self.now();
                match &mut self.frames {
                    Some(frames) => {
                        let peer = &mut self.peer;
                        frames.feed(&bytes, &mut |line| peer.handle_bytes(now, line))?;
                    }
                    None => self.peer.handle_bytes(now, &bytes),
                }
                Ok(())
            }
            #[cfg(feature = "net")]
            Input::Text(line) => {
                let now = self.now();
                match &mut self.frames {
                    Some(frames) => {
                        let peer = &mut self.peer;
                        frames.feed_text(&line, &mut |line| peer.handle_bytes(now, line))?;
                    }
                    None => self.peer.handle_bytes(now, &line),
                }
                Ok(())
            }
            #[cfg(feature = "net")]
            Input::Binary(message) => {
                let now = self.now();
                // Raw frames not offered, or not granted: a binary message has no place.
                let Some(frames) = &mut self.frames else {
                    return Err(frames::FrameError::BinaryUnasked.into());
                };
                let peer = &mut self.peer;
                frames.feed_binary(message, &mut |line| peer.handle_bytes(now, line))?;
                Ok(())
            }
            Input::StdoutEnd(error) => Err(self.connection_lost(error)),
            Input::Local(chunk) => self.send_input(&chunk, false),
            Input::LocalEnd => self.send_input(&[], true),
        }
    }

    fn send_input(&mut self, chunk: &[u8], eof: bool) -> Result<(), ClientError> {
        let session_id = self.session_id();
        let Some(route) = self.input.as_mut().filter(|r| !r.gate.is_closed()) else {
            return Ok(()); // the command ended or closed its stdin: nobody reads this any more
        };
        let (encoding, data) = data::encode(chunk);
        let params = ExecInputParams {
            session_id,
            process_id: route.process_id.clone(),
            data: data.into_owned(),
            encoding,
            eof,
        };
        let raw = RawJson::to_raw(&params)
            .map_err(|e| ClientError::Protocol(format!("encoding exec.input: {e}")))?;
        let now = self.now();
        let id = self
            .peer
            .call(now, Method::ExecInput.as_str(), Some(raw), 0)?;
        if let Some(route) = self.input.as_mut() {
            route.calls.insert(id);
        }
        Ok(())
    }

    /// The transport ended: reap it and explain why, in the user's terms.
    fn connection_lost(&mut self, io_error: Option<io::Error>) -> ClientError {
        let child = match &mut self.transport {
            Transport::Process { child, stdin } => {
                *stdin = None;
                child
            }
            #[cfg(feature = "net")]
            Transport::Ws(ws) => {
                ws.shutdown();
                return ClientError::Closed {
                    target: self.target.clone(),
                    status: None,
                    stderr: ws.ended(),
                };
            }
        };
        let status = wait_with_timeout(child, Duration::from_secs(3));
        if let Some(t) = self.stderr_thread.take() {
            // stderr closes when the transport exits (unless a grandchild holds it open).
            let deadline = Instant::now() + Duration::from_millis(500);
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        let stderr = String::from_utf8_lossy(
            &self
                .stderr_tail
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
        .into_owned();
        if status.and_then(|s| s.code()) == Some(127) {
            let mut hint = missing_rexd_hint(&self.spec, &self.endpoint);
            if !stderr.trim().is_empty() {
                hint.push_str(&format!(" [{}]", stderr.trim()));
            }
            return ClientError::RexdNotFound(hint);
        }
        match io_error {
            Some(source) if status.is_none() => ClientError::Io {
                target: self.target.clone(),
                source,
            },
            _ => ClientError::Closed {
                target: self.target.clone(),
                status,
                stderr,
            },
        }
    }

    /// Runs a command and streams its output to `sink` as it arrives; returns its exit.
    ///
    /// Stdin works as ssh's does. With `input`, that reader is forwarded to the command's
    /// stdin (`exec.input`) from a thread, at most a few chunks ahead of what the command has
    /// taken, and its end (EOF) closes the command's stdin; a command that exits or closes its
    /// stdin without reading it all just stops the forwarding. Without `input` the command's
    /// stdin is [`ExecOptions::stdin`], or empty (ssh's `-n`): never a pipe left open. A
    /// failing `sink` (a closed stdout) kills the command.
    pub fn exec(
        &mut self,
        program: Program,
        options: &ExecOptions,
        input: Option<Box<dyn Read + Send>>,
        sink: &mut dyn FnMut(Stream, &[u8]) -> io::Result<()>,
    ) -> Result<ExecExit, ClientError> {
        let session_id = self.session_id();
        let env = (!options.env.is_empty()).then(|| options.env.iter().cloned().collect());
        let started = self.call(ExecStartParams {
            session_id: session_id.clone(),
            program,
            cwd: options.cwd.clone().or_else(|| self.spec.cwd.clone()),
            env,
            // No reader: the command gets the payload or an empty stdin, then EOF.
            stdin: match (&input, &options.stdin) {
                (None, None) => Some(String::new()),
                _ => options.stdin.clone(),
            },
            timeout_ms: options.timeout_ms,
            max_output_bytes: options.max_output_bytes,
            uncapped_output: options.uncapped_output && options.max_output_bytes.is_none(),
            detach: false,
        })?;
        let process_id = started.process_id;
        if let Some(reader) = input {
            let gate = Arc::new(Gate::default());
            self.input = Some(InputRoute {
                process_id: process_id.clone(),
                gate: Arc::clone(&gate),
                calls: HashSet::new(),
                error: None,
            });
            let sender = self.sender.clone();
            std::thread::spawn(move || forward_input(reader, sender, gate));
        }
        let result = self.stream_until_exit(&process_id, sink);
        if let Some(route) = self.input.take() {
            route.gate.close();
        }
        // A raw frame error leaves nothing to read an answer from (the splitter refuses all
        // that follows): the command ends with the connection, as the session does.
        let unreadable = matches!(result, Err(ClientError::Frame(_)));
        if result.is_err() && !unreadable && self.transport.is_open() {
            // Best effort: do not leave the command running after we stopped listening.
            let _ = self.call(ExecKillParams {
                session_id,
                process_id,
                signal: Signal::Kill,
            });
        }
        result
    }

    fn stream_until_exit(
        &mut self,
        process_id: &str,
        sink: &mut dyn FnMut(Stream, &[u8]) -> io::Result<()>,
    ) -> Result<ExecExit, ClientError> {
        let mut last_seq = [0u64; 2];
        loop {
            while let Some((method, params, raw)) = self.events.pop_front() {
                self.events_bytes -= params.as_ref().map_or(0, |p| p.get().len()) + raw.len();
                let event = Event::parse_known(method, params.as_ref().map(RawJson::as_raw))
                    .map_err(|e| ClientError::Protocol(e.to_string()))?;
                match event {
                    Event::ExecStdout(o) | Event::ExecStderr(o) if o.process_id == process_id => {
                        let (stream, slot) = if method == Method::ExecStdout {
                            (Stream::Stdout, 0)
                        } else {
                            (Stream::Stderr, 1)
                        };
                        if o.seq <= last_seq[slot] {
                            return Err(ClientError::Protocol(format!(
                                "{method} seq {} after {}",
                                o.seq, last_seq[slot]
                            )));
                        }
                        last_seq[slot] = o.seq;
                        if o.raw_bytes.is_some_and(|n| n != raw.len() as u64) {
                            // Only the splitter puts bytes here, as many as the line said.
                            return Err(ClientError::Protocol(format!(
                                "{method} announced raw bytes where this session has none"
                            )));
                        }
                        let bytes = match (o.raw_bytes, o.encoding) {
                            (Some(_), Encoding::Raw) => std::borrow::Cow::Borrowed(&raw[..]),
                            (Some(_), Encoding::Zstd) if self.compressed() => {
                                let mut out = Vec::new();
                                compress::inflate_into(&raw, MAX_EVENT_BYTES, &mut out)
                                    .map_err(|e| ClientError::Protocol(format!("{method}: {e}")))?;
                                std::borrow::Cow::Owned(out)
                            }
                            (Some(_), other) => {
                                return Err(ClientError::Protocol(format!(
                                    "{method}: raw bytes as {}",
                                    other.as_str()
                                )));
                            }
                            (None, _) => compress::decode_bounded(
                                &o.data,
                                o.encoding,
                                self.compressed(),
                                MAX_EVENT_BYTES,
                            )
                            .map_err(|e| ClientError::Protocol(format!("{method}: {e}")))?,
                        };
                        sink(stream, &bytes).map_err(ClientError::Output)?;
                    }
                    Event::ExecExit(exit) if exit.process_id == process_id => return Ok(exit),
                    Event::ExecError(e) if e.process_id == process_id => {
                        return Err(ClientError::Launch {
                            message: e.message,
                            errno: e.errno,
                        });
                    }
                    // Another process of this session (none in the CLI): not ours to show.
                    _ => {}
                }
            }
            if let Some(route) = self.input.as_mut()
                && let Some(error) = route.error.take()
            {
                match error.remote_code() {
                    // The command closed its stdin (`invalid_params`: "stdin is closed") or
                    // ended: what it did not read is dropped, as ssh drops it; stop reading ours.
                    Some(ErrorCode::InvalidParams | ErrorCode::ProcessNotFound) => {
                        route.gate.close();
                    }
                    // Anything else (the daemon's input cap, a lost transport) is an error.
                    _ => return Err(error),
                }
            }
            let step = self.pump().and_then(|deadline| {
                if self.events.is_empty() {
                    self.wait_input(deadline)
                } else {
                    Ok(())
                }
            });
            match step {
                Ok(()) => {}
                Err(e) if self.can_resume(&e) => self.reconnect(e)?,
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether `e` is a lost link this client resumes from.
    fn can_resume(&self, e: &ClientError) -> bool {
        self.options.resume
            && self.session.as_ref().is_some_and(|s| s.resume.is_some())
            && matches!(e, ClientError::Closed { .. } | ClientError::Io { .. })
    }

    /// The link dropped: a new transport, and `session.resume` from the last event seen.
    /// Calls in flight are lost with the old link (stdin being forwarded stops with an
    /// error); the command's events come again from where they stopped.
    fn reconnect(&mut self, lost: ClientError) -> Result<(), ClientError> {
        let session = self.session().clone();
        let info = session.resume.clone().expect("checked by can_resume");
        // Stdin chunks in flight may or may not have reached the command: that cannot be
        // resumed honestly, so it is an error (a command whose stdin was all sent resumes).
        if let Some(route) = self.input.as_mut()
            && !route.calls.is_empty()
        {
            for _ in route.calls.drain() {
                route.gate.leave();
            }
            route.error = Some(ClientError::Protocol(
                "the link dropped while stdin was being forwarded; what the command received \
                 of it is unknown"
                    .into(),
            ));
        }
        let mut last_error = lost;
        for delay_ms in [200u64, 500, 1000, 2000, 4000, 8000] {
            std::thread::sleep(Duration::from_millis(delay_ms));
            match self.relink(&session.session_id, &info.resume_secret) {
                Ok(()) => return Ok(()),
                // The session is gone (the grace passed) or events were lost: no retry helps.
                Err(e @ ClientError::Remote { .. }) => return Err(e),
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    fn relink(&mut self, session_id: &str, secret: &str) -> Result<(), ClientError> {
        self.shutdown();
        // What the old link's reader still had to say is of the old link.
        while self.inbox.try_recv().is_ok() {}
        let (transport, stderr_thread) = match &self.endpoint {
            #[cfg(feature = "net")]
            Endpoint::Ws { .. } => (
                Transport::Ws(super::ws::connect(
                    &self.spec,
                    &self.endpoint,
                    self.sender.clone(),
                )?),
                None,
            ),
            _ => {
                // `self.spec` already asks for `--resumable` (see `connect`).
                let spec = self.spec.clone();
                let endpoint = self.endpoint.clone();
                Client::spawn(
                    &spec,
                    &endpoint,
                    &self.options,
                    &self.sender,
                    &self.stderr_tail,
                )?
            }
        };
        self.transport = transport;
        self.stderr_thread = stderr_thread;
        if let Some(f) = &mut self.frames {
            *f = RawFrames::default(); // a new byte stream
            if self.session.as_ref().is_some_and(|s| s.raw_output) {
                f.allow_output(MAX_EVENT_BYTES as u64);
            }
        }
        let config = self.peer.config().clone();
        self.peer = Peer::new(
            JsonRpc2,
            config,
            u64::from(std::process::id()) ^ self.last_event,
        );
        self.answers.clear();
        let r = self.call(SessionResumeParams {
            session_id: session_id.to_owned(),
            resume_secret: secret.to_owned(),
            last_seq: self.last_event,
            accept_loss: false,
        })?;
        // The daemon's log (and its level) is Unix-only, as the daemon is.
        #[cfg(unix)]
        crate::log::debug(&format!(
            "resumed {session_id} after event {}: {} events again",
            self.last_event, r.replayed
        ));
        #[cfg(not(unix))]
        let _ = r;
        Ok(())
    }

    /// Kills a process of this session.
    pub fn kill(&mut self, process_id: &str, signal: Signal) -> Result<bool, ClientError> {
        let session_id = self.session_id();
        Ok(self
            .call(ExecKillParams {
                session_id,
                process_id: process_id.to_owned(),
                signal,
            })?
            .ok)
    }

    /// Reads a whole file (or `length` bytes from `offset`), byte-exact, in pieces of the
    /// session's `max_file_read_bytes`, handing each piece to `sink` as it comes. Up to
    /// [`READ_AHEAD`] pieces are asked for at once, so the daemon encodes the next while this
    /// side decodes the last. Returns the last piece's metadata with empty `content`. A file
    /// whose mtime changes between pieces is refused (`-32006`) rather than spliced.
    pub fn read_file(
        &mut self,
        path: &str,
        offset: u64,
        length: Option<u64>,
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> Result<FsReadResult, ClientError> {
        self.read_file_with_progress(path, offset, length, sink, &mut |_, _| {})
    }

    /// [`Client::read_file`], calling `progress(done, total)` after each piece has gone to
    /// `sink`: the bytes read so far and the bytes the read will give in all (known from the
    /// first piece on: the file's size, within `offset` and `length`). For a progress display;
    /// the client itself draws nothing.
    pub fn read_file_with_progress(
        &mut self,
        path: &str,
        offset: u64,
        length: Option<u64>,
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<FsReadResult, ClientError> {
        let mut ahead = VecDeque::new();
        let result = self.read_pieces(path, offset, length, sink, progress, &mut ahead);
        // After an error, pieces may still be in flight.
        self.drop_pieces(&mut ahead);
        result
    }

    fn read_pieces(
        &mut self,
        path: &str,
        offset: u64,
        length: Option<u64>,
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
        progress: &mut dyn FnMut(u64, u64),
        ahead: &mut VecDeque<(Id, u64)>,
    ) -> Result<FsReadResult, ClientError> {
        let session_id = self.session_id();
        // Pieces stay well under the peer's message cap even base64-encoded.
        let piece_max = self
            .session()
            .limits
            .max_file_read_bytes
            .map_or(MAX_READ_PIECE, |m| m.clamp(1, MAX_READ_PIECE));
        // Text travels as itself (utf8: about a third fewer bytes than base64, and nothing to
        // decode); the first piece that is not UTF-8 switches the rest of the file to base64,
        // which keeps any byte exact. The daemon ends a utf8 piece before a character cut in
        // two, so a UTF-8 file never needs base64.
        // With compression, `zstd` carries any bytes (the daemon sends a piece plain when that
        // is shorter), so there is no utf8-to-base64 switch. Raw frames carry any bytes too,
        // as they are, after the answer's line: nothing to encode or decode, nothing a third
        // longer; with compression as well, a piece that shrinks comes as a raw zstd frame.
        let mut encoding = if self.raw_frames() {
            data::Encoding::Raw
        } else if self.compressed() {
            data::Encoding::Zstd
        } else {
            data::Encoding::Utf8
        };
        let piece = |at: u64, len: u64, encoding: data::Encoding| FsReadParams {
            session_id: session_id.clone(),
            path: path.to_owned(),
            offset: Some(at),
            length: Some(len),
            encoding,
        };
        // The first piece tells the size; the rest can then be asked for ahead.
        let first_len = length.map_or(piece_max, |l| l.min(piece_max));
        let first_id = self.send_piece(&piece(offset, first_len, encoding))?;
        ahead.push_back((first_id, offset));
        let mut at = offset;
        let mut asked_to = offset + first_len;
        let mut stop: Option<u64> = None;
        let mut mtime: Option<String> = None;
        let mut decoded = Vec::new();
        loop {
            let (id, piece_at) = ahead.pop_front().expect("a piece is always in flight here");
            let answer = self.answer_to(&id);
            if piece_at != at {
                // An earlier piece came back short (the daemon ends a utf8 piece before a
                // character cut in two), so this one does not follow on, and may even have
                // failed for starting inside that character: drop the pieces in flight and ask
                // again from where the data ends.
                self.drop_pieces(ahead);
                asked_to = at;
                self.ask_ahead(&piece, encoding, stop.unwrap_or(at), &mut asked_to, ahead)?;
                continue;
            }
            let raw = match answer {
                Ok(raw) => raw,
                Err(e) if encoding == data::Encoding::Utf8 && not_utf8(&e) => {
                    // Binary: this piece and every later one again, as base64.
                    encoding = data::Encoding::Base64;
                    self.drop_pieces(ahead);
                    let len = match stop {
                        Some(end) => piece_max.min(end.saturating_sub(at)),
                        None => length.map_or(piece_max, |l| l.min(piece_max)),
                    };
                    let id = self.send_piece(&piece(at, len, encoding))?;
                    ahead.push_back((id, at));
                    asked_to = at + len;
                    continue;
                }
                Err(e) => return Err(e),
            };
            // Borrowed from the answer: the content is not copied before it is decoded.
            let got: FsReadPiece<'_> = serde_json::from_str(raw.get()).map_err(|e| {
                ClientError::Protocol(format!("the answer to fs.read does not fit: {e}"))
            })?;
            {
                match &mtime {
                    Some(m) if m.as_str() != got.mtime => {
                        return Err(ClientError::Remote {
                            method: Method::FsRead.as_str().into(),
                            code: ErrorCode::ConcurrencyConflict.code(),
                            message: format!("{path} changed while it was read"),
                            data: None,
                        });
                    }
                    Some(_) => {}
                    None => mtime = Some(got.mtime.to_string()),
                }
                // Taken off the byte stream after the line, no longer than asked for.
                let raw = match got.raw_bytes {
                    Some(n) if encoding == data::Encoding::Raw => {
                        match self.frames.as_mut().and_then(|f| f.take(&id)) {
                            Some(b) if b.len() as u64 == n => Some(b),
                            _ => {
                                return Err(ClientError::Protocol(
                                    "fs.read: a raw answer without its bytes".into(),
                                ));
                            }
                        }
                    }
                    Some(_) => {
                        return Err(ClientError::Protocol(
                            "fs.read: raw bytes for a read that did not ask for them".into(),
                        ));
                    }
                    None => None,
                };
                let n = {
                    let bytes: &[u8] = match (got.encoding, &raw) {
                        (data::Encoding::Raw, Some(b)) => b,
                        // A raw zstd frame, only where compression was negotiated; no piece
                        // is longer than asked for, so one that inflates past that is
                        // refused unexpanded.
                        (data::Encoding::Zstd, Some(frame)) if self.compressed() => {
                            compress::inflate_into(frame, piece_max as usize, &mut decoded)
                                .map_err(|e| ClientError::Protocol(format!("fs.read: {e}")))?;
                            &decoded
                        }
                        (_, Some(_)) => {
                            return Err(ClientError::Protocol(format!(
                                "fs.read: raw bytes as {}",
                                got.encoding.as_str()
                            )));
                        }
                        (data::Encoding::Utf8, None) => got.content.as_bytes(),
                        // No piece is longer than asked for: a frame that inflates past
                        // that is refused unexpanded.
                        (_, None) => {
                            compress::decode_into(
                                &got.content,
                                got.encoding,
                                piece_max as usize,
                                &mut decoded,
                            )
                            .map_err(|e| ClientError::Protocol(format!("fs.read: {e}")))?;
                            &decoded
                        }
                    };
                    sink(bytes).map_err(ClientError::Output)?;
                    bytes.len() as u64
                };
                at += n;
                let end = *stop.get_or_insert_with(|| {
                    let file_end = got.size.max(offset);
                    length.map_or(file_end, |l| file_end.min(offset.saturating_add(l)))
                });
                progress(at - offset, end.saturating_sub(offset).max(at - offset));
                if n == 0 || at >= end {
                    return Ok(FsReadResult {
                        path: got.path.into_owned(),
                        size: got.size,
                        mtime: got.mtime.into_owned(),
                        encoding: got.encoding,
                        content: String::new(),
                        // Cut short only when the daemon said so and gave nothing more.
                        truncated: got.truncated && n == 0 && at < got.size,
                        raw_bytes: None,
                        raw: Vec::new(),
                    });
                }
            }
            self.ask_ahead(&piece, encoding, stop.unwrap_or(at), &mut asked_to, ahead)?;
        }
    }

    /// Asks for pieces up to `end`, [`READ_AHEAD`] in flight at most.
    fn ask_ahead(
        &mut self,
        piece: &dyn Fn(u64, u64, data::Encoding) -> FsReadParams,
        encoding: data::Encoding,
        end: u64,
        asked_to: &mut u64,
        ahead: &mut VecDeque<(Id, u64)>,
    ) -> Result<(), ClientError> {
        let piece_max = self
            .session()
            .limits
            .max_file_read_bytes
            .map_or(MAX_READ_PIECE, |m| m.clamp(1, MAX_READ_PIECE));
        while ahead.len() < READ_AHEAD && *asked_to < end {
            let len = piece_max.min(end - *asked_to);
            let id = self.send_piece(&piece(*asked_to, len, encoding))?;
            ahead.push_back((id, *asked_to));
            *asked_to += len;
        }
        Ok(())
    }

    /// Sends one `fs.read`; a raw one is announced to the frame reader with its length, the
    /// most bytes its answer may bring.
    fn send_piece(&mut self, params: &FsReadParams) -> Result<Id, ClientError> {
        let id = self.send(params)?;
        if params.encoding == data::Encoding::Raw
            && let Some(f) = &mut self.frames
        {
            f.expect(id.clone(), params.length.unwrap_or(0));
        }
        Ok(id)
    }

    /// Forgets pieces asked for but no longer wanted: their answers are dropped on arrival
    /// (a raw one's bytes are read past and thrown away).
    fn drop_pieces(&mut self, ahead: &mut VecDeque<(Id, u64)>) {
        let now = self.now();
        for (id, _) in ahead.drain(..) {
            let _ = self.peer.cancel(now, &id);
            self.answers.remove(&id);
            if let Some(f) = &mut self.frames {
                f.drop_call(&id);
            }
        }
    }

    /// Writes a file in one `fs.write` (utf8 when the bytes are text, else base64).
    pub fn write_file(
        &mut self,
        path: &str,
        content: &[u8],
        options: &WriteOptions,
    ) -> Result<FsWriteResult, ClientError> {
        // Compressed or not, a daemon takes no more than one message's worth of bytes in one
        // write: refused here, with the way out, rather than by the daemon.
        if content.len() > compress::MAX_INFLATED {
            return Err(ClientError::TooLarge {
                method: Method::FsWrite.as_str().into(),
                bytes: content.len(),
                max: compress::MAX_INFLATED,
            });
        }
        let (encoding, text) = compress::encode(content, self.compressed());
        let session_id = self.session_id();
        self.call(FsWriteParams {
            session_id,
            path: path.to_owned(),
            content: text.into_owned(),
            encoding,
            mode: options.mode,
            mkdir_parents: options.mkdir_parents,
            atomic: true,
            expected_mtime: options.expected_mtime.clone(),
        })
    }

    /// Lists a directory.
    pub fn list(
        &mut self,
        path: &str,
        recursive: bool,
        max_entries: Option<u64>,
    ) -> Result<FsListResult, ClientError> {
        let session_id = self.session_id();
        self.call(FsListParams {
            session_id,
            path: path.to_owned(),
            recursive,
            max_entries,
        })
    }

    /// Globs within the allowed roots (`cwd` defaults to the target's).
    pub fn glob(
        &mut self,
        pattern: &str,
        cwd: Option<String>,
        max_matches: Option<u64>,
    ) -> Result<FsGlobResult, ClientError> {
        let session_id = self.session_id();
        let cwd = cwd.or_else(|| self.spec.cwd.clone());
        self.call(FsGlobParams {
            session_id,
            pattern: pattern.to_owned(),
            cwd,
            max_matches,
        })
    }

    /// Stats a path.
    pub fn stat(&mut self, path: &str) -> Result<FsStatResult, ClientError> {
        let session_id = self.session_id();
        self.call(FsStatParams {
            session_id,
            path: path.to_owned(),
        })
    }

    /// The session's state on the daemon.
    pub fn info(&mut self) -> Result<SessionInfoResult, ClientError> {
        let session_id = self.session_id();
        self.call(SessionInfoParams { session_id })
    }

    /// Whether the daemon announced `capability`.
    pub fn has_capability(&self, capability: &Capability) -> bool {
        self.session().capabilities.contains(capability)
    }

    /// Closes the session, ends the transport and reaps it.
    pub fn close(mut self) -> Result<(), ClientError> {
        let session_id = self.session_id();
        let closed = self.call(SessionCloseParams { session_id });
        self.shutdown();
        closed.map(|_| ())
    }

    fn shutdown(&mut self) {
        match &mut self.transport {
            Transport::Process { child, stdin } => {
                // EOF on its stdin ends `rexd --stdio` (and ssh with it).
                *stdin = None;
                if wait_with_timeout(child, Duration::from_secs(3)).is_none() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
            #[cfg(feature = "net")]
            Transport::Ws(ws) => ws.shutdown(),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The `event_seq` of an event's params, if it has one (a resumable session's events do).
fn event_seq(params: &str) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Seq {
        event_seq: Option<u64>,
    }
    serde_json::from_str::<Seq>(params).ok()?.event_seq
}

/// One `fs.read` answer, its strings borrowed from the answer's text where they hold no
/// escapes (base64 never does).
#[derive(serde::Deserialize)]
struct FsReadPiece<'a> {
    #[serde(borrow)]
    path: std::borrow::Cow<'a, str>,
    size: u64,
    #[serde(borrow)]
    mtime: std::borrow::Cow<'a, str>,
    #[serde(default)]
    encoding: data::Encoding,
    /// Empty (or absent) in a raw answer.
    #[serde(borrow, default)]
    content: std::borrow::Cow<'a, str>,
    #[serde(default)]
    truncated: bool,
    /// A raw answer: how many bytes followed its line.
    #[serde(default)]
    raw_bytes: Option<u64>,
}

/// Whether a failed `fs.read` says the range is not UTF-8 (ask again as base64).
fn not_utf8(e: &ClientError) -> bool {
    matches!(e, ClientError::Remote { code, data: Some(d), .. }
        if *code == ErrorCode::InvalidParams.code() && d.get("valid_up_to").is_some())
}

/// The child gets SIGTERM when the thread spawning it exits ([`ConnectOptions::end_with_this_thread`]).
fn end_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec the closure calls only async-signal-safe functions
    // (prctl, getppid) and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died before the line above: nobody would send the signal.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Waits up to `limit` for `child` to exit; `None` if it is still running.
fn wait_with_timeout(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => return None,
        }
    }
}

fn read_stdout(mut stdout: impl Read, sender: SyncSender<Input>) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match stdout.read(&mut buf) {
            Ok(0) => {
                let _ = sender.send(Input::StdoutEnd(None));
                return;
            }
            Ok(n) => {
                // A large read is handed on in its buffer (no copy of a stream's bulk); a
                // short one is copied out and the buffer kept.
                let chunk = match n >= SMALL_READ {
                    true => {
                        let mut full = std::mem::replace(&mut buf, vec![0u8; READ_CHUNK]);
                        full.truncate(n);
                        full
                    }
                    false => buf[..n].to_vec(),
                };
                if sender.send(Input::Stdout(chunk)).is_err() {
                    return; // the client is gone
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = sender.send(Input::StdoutEnd(Some(e)));
                return;
            }
        }
    }
}

fn read_stderr(mut stderr: impl Read, tail: Arc<Mutex<Vec<u8>>>, forward: bool) {
    let mut buf = [0u8; 4096];
    loop {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if forward {
                    let _ = io::stderr().write_all(&buf[..n]);
                }
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                t.extend_from_slice(&buf[..n]);
                if t.len() > STDERR_TAIL_BYTES {
                    let cut = t.len() - STDERR_TAIL_BYTES;
                    t.drain(..cut);
                }
            }
        }
    }
}

fn forward_input(mut reader: Box<dyn Read + Send>, sender: SyncSender<Input>, gate: Arc<Gate>) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        // Each chunk (and the end marker) holds a slot until the daemon answers its call.
        if !gate.enter() {
            return; // the command ended
        }
        match reader.read(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => gate.leave(),
            Ok(0) | Err(_) => {
                let _ = sender.send(Input::LocalEnd);
                return;
            }
            Ok(n) => {
                if sender.send(Input::Local(buf[..n].to_vec())).is_err() {
                    return;
                }
            }
        }
    }
}
