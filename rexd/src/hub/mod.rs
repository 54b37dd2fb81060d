//! Many clients, one [`Service`]: the engine behind `rexd --listen`.
//!
//! The hub runs on its own thread with its own mio poll (the service's children and timers,
//! and a [`mio::Waker`]), so it needs no async runtime: transports on other threads hand it
//! [`HubInput`]s through a [`HubHandle`] and get their client's messages back through the
//! [`ConnSink`] each connection brings.
//!
//! What the hub adds to the service:
//! - **Connections**: each speaks JSON-RPC through its own [`Peer`]; one inbound message is a
//!   JSON-RPC message or batch, one outbound message is one answer, batch answer or event.
//!   A [`ConnKind::Stream`] connection (a WebSocket) carries whole sessions, events included;
//!   a [`ConnKind::Pointed`] one (`POST /rpc`) carries one message and ends once it is answered.
//! - **Ownership**: a session belongs to the principal that opened it (a token's label, a
//!   certificate's subject), and one opened on a stream connection to that connection alone
//!   (or the one that `session.resume`s it with its secret). A request naming a session that is
//!   not the caller's is answered as if the session did not exist, so ids reveal nothing. Events
//!   go to the stream connection that holds the session; a session opened by pointed calls has
//!   no stream, so its events are dropped (the spec's "pointed calls" do no streaming) and it
//!   ends after `pointed_idle_ms` without a request. A stream connection's sessions end when it
//!   closes.
//! - **Backpressure per client**: while a connection has more than `high_water` bytes unsent,
//!   its sessions are paused ([`Service::set_paused`]: their children block on full pipes) and
//!   its further requests wait. A client that stays behind for `slow_reader_ms`, or whose unsent
//!   bytes pass `max_unsent_bytes` (answers that cannot wait, such as an `fs.read` result), is
//!   dropped with the reason, so the daemon never spends its memory on a slow reader.
//! - **Bounded input**: a connection's transport may hold at most a few messages the hub has not
//!   taken ([`ConnSink::consumed`] gives back the room), so a flood waits in the client's socket.
//! - **Turns**: each connection has one request handled per turn of the hub's loop, so one
//!   client's batch of slow requests (64 `fs.read`s) is interleaved with the others' calls.
//! - **Bounded batch answers**: the results kept for one batch's answer stop at
//!   `max_batch_answer_bytes`; the request that would pass it and those after it are answered
//!   `resource_limit` (the latter unrun), so one small batch cannot make a huge answer.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use deskwire::jsonrpc::{
    Code, ErrorCode as JsonRpcCode, Id, JsonRpc2, Output, Peer, PeerConfig, PeerEvent, RawJson,
    RemoteError,
};
use deskwire::rexd::{
    Capability, ErrorCode, ErrorObject, Event, Request, Response, ResumeInfo, SessionResumeParams,
    SessionResumeResult,
};
use mio::{Events, Poll, Token, Waker};
use serde_json::json;

use crate::frontend::{child_readiness, is_child_token, wait};
use crate::service::{Service, ServiceOutput, SessionEnd, Settings};

mod collect;
use crate::stdio::remote_error;
use collect::Collected;

const WAKER: Token = Token(0);
/// Bytes of children's output read per loop turn, so one busy client does not hold up the
/// others' requests for long.
const PUMP_BUDGET: usize = 1 << 20;
/// How often a hub with paused sessions looks again at its connections' unsent bytes (the
/// transports do not wake it when they catch up).
const PAUSED_TICK_MS: u64 = 20;

/// A connection's number, from [`HubHandle::next_conn`].
pub type ConnId = u64;

/// How a connection carries sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnKind {
    /// A whole conversation, events included (a WebSocket).
    Stream,
    /// One message, answered, then the end (`POST /rpc`); no events.
    Pointed,
}

/// Who a connection is.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// The authenticated client: a token's label or a certificate's subject.
    pub principal: String,
    /// Where the client connects from (`IP:PORT`), for the audit; `None` when unknown (the
    /// agent's bridges).
    pub address: Option<String>,
    /// Stream or pointed.
    pub kind: ConnKind,
    /// The connection can carry raw frames (`docs/rexd-raw-frames.md`): a plain byte stream
    /// (the agent's Unix socket, which a `rexd --stdio --resumable` bridge copies as it is)
    /// writes a line and its bytes together, a WebSocket (`/ws`) sends them as one binary
    /// message. Its sessions may be granted raw frames and raw output, and a raw `fs.read`
    /// answer or output event goes out with [`ConnSink::send_frame`].
    pub raw_frames: bool,
}

impl ConnInfo {
    /// Who the connection's requests are from, as the audit names them.
    fn who(&self) -> crate::audit::Who<'_> {
        crate::audit::Who {
            principal: Some(&self.principal),
            address: self.address.as_deref(),
        }
    }
}

/// The hub's way back to one client; implemented by the transport.
pub trait ConnSink: Send {
    /// Queues one outbound message (a JSON-RPC message without a newline).
    fn send(&self, message: Vec<u8>);
    /// Queues a message and the raw bytes that follow its newline, to be written together
    /// (`docs/rexd-raw-frames.md`). The hub calls it only for a `raw_frames` connection; a
    /// sink that cannot carry bytes after a line sends the message and closes rather than
    /// lose the bytes silently.
    fn send_frame(&self, message: Vec<u8>, bytes: Vec<u8>) {
        self.send(message);
        if !bytes.is_empty() {
            self.close("raw bytes on a connection that cannot carry them");
        }
    }
    /// Bytes queued by [`ConnSink::send`] and not yet written to the client.
    fn unsent(&self) -> usize;
    /// The hub took `bytes` of this client's input: the transport may read that much more.
    fn consumed(&self, bytes: usize);
    /// Ends the connection, telling the client `reason` where the transport can.
    fn close(&self, reason: &str);
    /// A pointed connection's message is fully answered.
    fn done(&self);
}

/// What transports hand the hub.
pub enum HubInput {
    /// A client connected (and authenticated).
    Open {
        /// From [`HubHandle::next_conn`].
        conn: ConnId,
        /// Who it is and how it talks.
        info: ConnInfo,
        /// The way back.
        sink: Box<dyn ConnSink>,
    },
    /// One message from a client: a JSON-RPC message or batch.
    Message {
        /// Whose.
        conn: ConnId,
        /// The message.
        bytes: Vec<u8>,
    },
    /// The client went away.
    Closed {
        /// Whose.
        conn: ConnId,
    },
    /// A new configuration (`SIGHUP`): [`Service::reload`]. The sessions and connections of
    /// the principals whose tokens it revoked (token labels) end, and say why.
    Reload {
        /// What the service runs with from now on (`None`: what it runs with now).
        settings: Option<Box<Settings>>,
        /// Labels of tokens that no longer authenticate (removed, or given another token or
        /// scope).
        revoked: Vec<String>,
    },
    /// Open the audit file again at its path (`SIGUSR1`, after logrotate moved it).
    ReopenAudit,
    /// End every session and process, then return.
    Shutdown,
}

/// Limits of the hub.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Unsent bytes above which a connection's sessions are paused and its requests wait.
    pub high_water: usize,
    /// Unsent bytes above which a connection is dropped.
    pub max_unsent_bytes: usize,
    /// How long a connection may stay above `high_water` before it is dropped.
    pub slow_reader_ms: u64,
    /// How long a session opened by pointed calls lives without a request.
    pub pointed_idle_ms: u64,
    /// The largest message a client may send (the transport enforces it too).
    pub max_message_bytes: usize,
    /// Resumable sessions may be opened on stream connections.
    pub resumable: bool,
    /// How long a resumable session whose connection dropped waits for `session.resume`.
    pub resume_grace_ms: u64,
    /// Events a resumable session keeps for a resume, at most.
    pub replay_events: usize,
    /// Bytes of events a resumable session keeps for a resume, at most.
    pub replay_bytes: usize,
    /// End the hub once it has had no connection, session or process for this long.
    pub exit_when_idle_ms: Option<u64>,
    /// Bytes of results one batch's answer may hold; the requests past it fail with
    /// `resource_limit` (`usize::MAX`: no bound).
    pub max_batch_answer_bytes: usize,
    /// Sessions one principal may have open at once, under the service's own
    /// `max_concurrent_sessions` (`usize::MAX`: no bound of its own).
    pub max_sessions_per_principal: usize,
    /// Bytes of output a session without a stream (pointed calls) keeps for `exec.wait` with
    /// `output: true`; more is dropped and counted.
    pub collected_output_bytes: usize,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            high_water: 4 << 20,
            max_unsent_bytes: 32 << 20,
            slow_reader_ms: 30_000,
            pointed_idle_ms: 600_000,
            max_message_bytes: 16 << 20,
            resumable: true,
            resume_grace_ms: 60_000,
            replay_events: 8192,
            replay_bytes: 8 << 20,
            exit_when_idle_ms: None,
            max_batch_answer_bytes: usize::MAX,
            max_sessions_per_principal: usize::MAX,
            collected_output_bytes: 16 << 20,
        }
    }
}

/// The transports' end of the hub: cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct HubHandle {
    tx: Sender<HubInput>,
    waker: Arc<Waker>,
    next_conn: Arc<AtomicU64>,
}

impl HubHandle {
    /// Hands the hub an input; `false` once the hub has ended.
    pub fn send(&self, input: HubInput) -> bool {
        self.tx.send(input).is_ok() && self.waker.wake().is_ok()
    }

    /// A fresh connection number.
    pub fn next_conn(&self) -> ConnId {
        self.next_conn.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// Starts the hub on its own thread. The thread returns after [`HubInput::Shutdown`] (or once
/// every [`HubHandle`] is dropped), when the processes have ended.
pub fn start(
    settings: Settings,
    config: HubConfig,
) -> io::Result<(HubHandle, JoinHandle<io::Result<()>>)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let mut service = Service::new(settings, poll.registry().try_clone()?);
    service.set_resumable(config.resumable);
    let (tx, rx) = channel();
    let handle = HubHandle {
        tx,
        waker,
        next_conn: Arc::new(AtomicU64::new(0)),
    };
    let thread = std::thread::Builder::new()
        .name("rexd-hub".into())
        .spawn(move || {
            let mut hub = Hub::new(service, config, rx);
            hub.run(poll)
        })?;
    Ok((handle, thread))
}

struct Conn {
    info: ConnInfo,
    sink: Box<dyn ConnSink>,
    peer: Peer<JsonRpc2>,
    /// Messages received and not yet given to the peer.
    inbox: VecDeque<Vec<u8>>,
    /// Service handles of this connection's requests in flight, and their ids.
    pending: HashMap<u64, Id>,
    /// A pointed connection got its message.
    fed: bool,
    /// Since when its unsent bytes have been above the high water.
    behind_since: Option<u64>,
    /// A request taken from the peer and left for a later turn: each connection has one
    /// request handled per hub turn, so one client's batch does not hold up the others.
    deferred: Option<(Id, String, Option<RawJson>)>,
    /// This turn's request has been handled.
    served: bool,
    /// The number of the message the peer's requests come from (a batch is one message).
    message_seq: u64,
    /// Batched requests taken from the peer and not yet handled: their message.
    batch_of: HashMap<Id, u64>,
    /// Batched requests at the service (by handle): their message.
    pending_batch: HashMap<u64, u64>,
    /// The batches whose answer is not complete, by message.
    batches: HashMap<u64, BatchBudget>,
}

/// How much of `max_batch_answer_bytes` a batch has used.
#[derive(Default)]
struct BatchBudget {
    /// Bytes of the results kept for its answer.
    bytes: usize,
    /// Its requests at the service.
    in_flight: usize,
    /// An answer did not fit: the requests after it are not run.
    spent: bool,
}

struct HubSession {
    principal: String,
    /// The stream connection its events go to.
    stream: Option<ConnId>,
    last_used: u64,
    /// Opened by pointed calls (it ends after `pointed_idle_ms` without one).
    pointed: bool,
    /// A resumable session's replay state.
    replay: Option<Replay>,
    /// A session of pointed calls: its processes' output, until `exec.wait` takes it.
    collected: Option<Collected>,
}

/// The daemon's sessions are all taken and `principal`, holding `open` of them, asks for one
/// more: the least recently used idle session of pointed calls (`POST /rpc`, no process
/// running) of the client holding the most gives its place, if that client holds more than
/// `principal` would with this one. So a few clients that leave `/rpc` sessions open cannot
/// lock every other client out until their idle time runs out, and nobody loses a session to
/// a client that already holds as many.
fn make_room(
    sessions: &mut HashMap<String, HubSession>,
    service: &mut Service,
    now: u64,
    principal: &str,
    open: usize,
) {
    let mut held: HashMap<&str, usize> = HashMap::new();
    for s in sessions.values() {
        *held.entry(s.principal.as_str()).or_default() += 1;
    }
    let Some((richest, count)) = held
        .into_iter()
        .filter(|(p, _)| *p != principal)
        .max_by_key(|(_, n)| *n)
    else {
        return;
    };
    if count <= open + 1 {
        return;
    }
    let richest = richest.to_owned();
    let victim = sessions
        .iter()
        .filter(|(id, s)| {
            s.principal == richest && s.pointed && s.replay.is_none() && service.session_is_idle(id)
        })
        .min_by_key(|(_, s)| s.last_used)
        .map(|(id, _)| id.clone());
    if let Some(id) = victim {
        crate::log::info(&format!(
            "session {id} of {richest}: idle, closed to give its place to {principal} (every \
             session was taken, and {richest} held {count})"
        ));
        sessions.remove(&id);
        service.close_session_now(now, &id, SessionEnd::Evicted);
    }
}

/// An event's line and the raw bytes after it (empty for most events).
type EventFrame = (Vec<u8>, Vec<u8>);

/// What a resumable session keeps so that a client can resume it: the secret, the event
/// numbering, and the last events sent, bounded.
struct Replay {
    secret: String,
    /// `event_seq` of the next event.
    next_seq: u64,
    /// Each event's line and the raw bytes after it (empty for most).
    events: VecDeque<(u64, Vec<u8>, Vec<u8>)>,
    bytes: usize,
    /// Since when it has had no connection.
    detached_since: Option<u64>,
}

impl Replay {
    fn push(&mut self, seq: u64, line: Vec<u8>, raw: Vec<u8>, max_events: usize, max_bytes: usize) {
        self.bytes += line.len() + raw.len();
        self.events.push_back((seq, line, raw));
        while self.events.len() > max_events || (self.bytes > max_bytes && self.events.len() > 1) {
            if let Some((_, old, old_raw)) = self.events.pop_front() {
                self.bytes -= old.len() + old_raw.len();
            }
        }
    }

    /// The oldest `event_seq` still kept.
    fn first_kept(&self) -> u64 {
        self.events.front().map_or(self.next_seq, |(s, _, _)| *s)
    }
}

/// A notification line with `"event_seq":N` as the first member of its params.
fn with_event_seq(line: Vec<u8>, seq: u64) -> Vec<u8> {
    const PARAMS: &[u8] = b"\"params\":{";
    let Some(at) = line
        .windows(PARAMS.len())
        .position(|w| w == PARAMS)
        .map(|p| p + PARAMS.len())
    else {
        return line;
    };
    let member = format!("\"event_seq\":{seq}");
    let mut out = Vec::with_capacity(line.len() + member.len() + 1);
    out.extend_from_slice(&line[..at]);
    out.extend_from_slice(member.as_bytes());
    if line.get(at) != Some(&b'}') {
        out.push(b',');
    }
    out.extend_from_slice(&line[at..]);
    out
}

/// 32 random bytes from the kernel, hex.
/// Whether `principal` authenticated with the token labelled `label`: the label itself, or
/// `LABEL (SUBJECT)` when a certificate came with the token (labels hold no space).
pub(crate) fn holds_token(principal: &str, label: &str) -> bool {
    principal
        .strip_prefix(label)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(" ("))
}

fn new_secret() -> String {
    crate::sys::random_hex(32)
}

/// Equal in time whatever the content (for the resume secret).
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

struct Hub {
    service: Service,
    config: HubConfig,
    rx: Receiver<HubInput>,
    conns: HashMap<ConnId, Conn>,
    sessions: HashMap<String, HubSession>,
    /// Service handle -> connection.
    handles: HashMap<u64, ConnId>,
    /// Handles of `session.open` calls that asked for a resumable session on a stream.
    resumable_opens: std::collections::HashSet<u64>,
    /// Handles of `exec.wait` calls whose answer takes the collected output: (session, process).
    output_waits: HashMap<u64, (String, String)>,
    /// Since when the hub has had nothing to do (for `exit_when_idle_ms`).
    idle_since: Option<u64>,
    next_handle: u64,
    clock: Instant,
    shutting_down: Option<u64>,
}

/// The session a request names, if any.
fn request_session(request: &Request) -> Option<&str> {
    Some(match request {
        Request::SessionOpen(_) => return None,
        Request::SessionClose(p) => &p.session_id,
        Request::SessionInfo(p) => &p.session_id,
        Request::ExecStart(p) => &p.session_id,
        Request::ExecWait(p) => &p.session_id,
        Request::ExecKill(p) => &p.session_id,
        Request::ExecInput(p) => &p.session_id,
        Request::FsRead(p) => &p.session_id,
        Request::FsWrite(p) => &p.session_id,
        Request::FsList(p) => &p.session_id,
        Request::FsGlob(p) => &p.session_id,
        Request::FsStat(p) => &p.session_id,
        Request::PtyOpen(p) => &p.session_id,
        Request::PtyInput(p) => &p.session_id,
        Request::PtyResize(p) => &p.session_id,
        Request::PtyClose(p) => &p.session_id,
        Request::RexdMetrics(_) => return None,
        Request::SessionResume(_) => return None,
        // A method added later must say here which session it names; until then it is refused
        // (see `ownership`), never let through unchecked.
        _ => "",
    })
}

/// The session an event belongs to.
fn event_session<'e>(event: &'e Event<'_>) -> Option<&'e str> {
    Some(match event {
        Event::ExecStdout(o) | Event::ExecStderr(o) => &o.session_id,
        Event::ExecExit(x) => &x.session_id,
        Event::ExecError(x) => &x.session_id,
        Event::PtyOutput(o) => &o.session_id,
        Event::PtyExit(x) => &x.session_id,
        _ => return None,
    })
}

fn unknown_session(id: &str) -> ErrorObject {
    ErrorObject::of(ErrorCode::InvalidParams)
        .with_message(format!("unknown session_id {id:?}"))
        .with_data(json!({"session_id": id}))
}

impl Hub {
    fn new(service: Service, config: HubConfig, rx: Receiver<HubInput>) -> Hub {
        Hub {
            service,
            config,
            rx,
            conns: HashMap::new(),
            sessions: HashMap::new(),
            handles: HashMap::new(),
            resumable_opens: std::collections::HashSet::new(),
            output_waits: HashMap::new(),
            idle_since: None,
            next_handle: 0,
            clock: Instant::now(),
            shutting_down: None,
        }
    }

    fn now(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    fn run(&mut self, mut poll: Poll) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        loop {
            let now = self.now();
            self.take_inputs(now);
            if let Some(deadline) = self.shutting_down
                && (self.service.running() == 0 || now >= deadline)
            {
                for (_, conn) in self.conns.drain() {
                    conn.sink.close("the daemon is shutting down");
                }
                return Ok(());
            }
            self.feed_connections(now);
            self.service.pump(now, PUMP_BUDGET);
            self.service.handle_timeout(now);
            self.route(now);
            self.watch_connections(now);
            self.expire_sessions(now);
            if let Some(idle) = self.config.exit_when_idle_ms {
                let quiet = self.conns.is_empty()
                    && self.sessions.is_empty()
                    && self.service.running() == 0;
                match (quiet, self.idle_since) {
                    (false, _) => self.idle_since = None,
                    (true, None) => self.idle_since = Some(now),
                    (true, Some(since)) if now.saturating_sub(since) >= idle => {
                        crate::log::info(&format!("idle for {idle} ms: exiting"));
                        return Ok(());
                    }
                    _ => {}
                }
            }

            let mut wake = self.service.next_deadline();
            let mut consider = |t: u64| wake = Some(wake.map_or(t, |w| w.min(t)));
            if let Some(d) = self.shutting_down {
                consider(d);
            }
            if let Some(t) = self.next_expiry() {
                consider(t);
            }
            if let (Some(since), Some(idle)) = (self.idle_since, self.config.exit_when_idle_ms) {
                consider(since + idle);
            }
            if self.conns.values().any(|c| c.behind_since.is_some()) {
                consider(now + PAUSED_TICK_MS);
            }
            let busy = self.service.wants_pump() || self.has_feedable();
            let timeout = if busy {
                Some(Duration::ZERO)
            } else {
                wake.map(|w| Duration::from_millis(w.saturating_sub(now)))
            };
            if !wait(&mut poll, &mut events, timeout)? {
                continue;
            }
            let now = self.now();
            for e in events.iter() {
                if is_child_token(e.token()) {
                    let (readable, writable) = child_readiness(e);
                    self.service
                        .handle_event(now, e.token(), readable, writable);
                }
            }
        }
    }

    fn take_inputs(&mut self, now: u64) {
        loop {
            match self.rx.try_recv() {
                Ok(HubInput::Open { conn, info, sink }) => {
                    if self.shutting_down.is_some() {
                        sink.close("the daemon is shutting down");
                        continue;
                    }
                    let peer_config = PeerConfig {
                        max_message_bytes: self.config.max_message_bytes,
                        ..PeerConfig::default()
                    };
                    self.conns.insert(
                        conn,
                        Conn {
                            info,
                            sink,
                            peer: Peer::new(JsonRpc2, peer_config, conn),
                            inbox: VecDeque::new(),
                            pending: HashMap::new(),
                            fed: false,
                            behind_since: None,
                            deferred: None,
                            served: false,
                            message_seq: 0,
                            batch_of: HashMap::new(),
                            pending_batch: HashMap::new(),
                            batches: HashMap::new(),
                        },
                    );
                }
                Ok(HubInput::Message { conn, bytes }) => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.inbox.push_back(bytes);
                    }
                }
                Ok(HubInput::Closed { conn }) => self.drop_conn(now, conn, None),
                Ok(HubInput::Reload { settings, revoked }) => {
                    self.reload(now, settings.map(|s| *s), &revoked)
                }
                Ok(HubInput::ReopenAudit) => match self.service.reopen_audit() {
                    Ok(()) => crate::log::info("SIGUSR1: the audit log is open again at its path"),
                    Err(e) => crate::log::error(&format!(
                        "SIGUSR1: {e}; audit entries go on to the file that was open"
                    )),
                },
                Ok(HubInput::Shutdown) => self.begin_shutdown(now),
                Err(TryRecvError::Disconnected) => {
                    self.begin_shutdown(now);
                    return;
                }
                Err(TryRecvError::Empty) => return,
            }
        }
    }

    /// Applies a reload: the service takes the new settings, then whatever the principals
    /// of revoked tokens hold ends: their sessions (`revoked` in the audit; detached
    /// processes too, since nobody may reach them any more) and their connections.
    fn reload(&mut self, now: u64, settings: Option<Settings>, revoked: &[String]) {
        let mut ended = match settings {
            Some(settings) => self.service.reload(now, settings),
            None => Vec::new(),
        };
        for id in &ended {
            self.sessions.remove(id);
        }
        let of_revoked = |principal: &str| revoked.iter().any(|l| holds_token(principal, l));
        let sessions: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| of_revoked(&s.principal))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &sessions {
            self.sessions.remove(id);
            self.service.close_session_now(now, id, SessionEnd::Revoked);
        }
        let conns: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| of_revoked(&c.info.principal))
            .map(|(id, _)| *id)
            .collect();
        for conn in &conns {
            self.drop_conn(now, *conn, Some("its token was revoked"));
        }
        ended.extend(sessions.iter().cloned());
        let names = match revoked.is_empty() {
            true => String::new(),
            false => format!(" ({})", revoked.join(", ")),
        };
        crate::log::info(&format!(
            "reloaded: {} token(s) revoked{names}, {} session(s) and {} connection(s) ended",
            revoked.len(),
            ended.len(),
            conns.len()
        ));
        self.service.audit_daemon_event(
            "rexd.reload",
            json!({"ok": true, "revoked": revoked, "sessions_ended": ended}),
        );
    }

    fn begin_shutdown(&mut self, now: u64) {
        if self.shutting_down.is_none() {
            crate::log::info("ending every process, then exiting");
            self.service.shutdown(now, SessionEnd::Shutdown);
            self.sessions.clear();
            self.shutting_down = Some(now + self.service.kill_grace_ms() + 1000);
        }
    }

    /// Removes a connection: its stream sessions end, its answers in flight are dropped.
    fn drop_conn(&mut self, now: u64, conn: ConnId, reason: Option<&str>) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        if let Some(reason) = reason {
            crate::log::warn(&format!(
                "dropping client {} (connection {conn}): {reason}",
                c.info.principal
            ));
            c.sink.close(reason);
        }
        for handle in c.pending.keys() {
            self.handles.remove(handle);
        }
        let ended: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.stream == Some(conn))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ended {
            let s = self.sessions.get_mut(&id).expect("listed above");
            match &mut s.replay {
                // Resumable: it waits for its client, its commands held (their output stays
                // in the pipes until someone reads it).
                Some(r) => {
                    s.stream = None;
                    r.detached_since = Some(now);
                    self.service.set_paused(&id, true);
                    crate::log::info(&format!(
                        "session {id}: connection lost; kept {} ms for session.resume",
                        self.config.resume_grace_ms
                    ));
                }
                None => {
                    self.sessions.remove(&id);
                    self.service
                        .close_session_now(now, &id, SessionEnd::Disconnected);
                }
            }
        }
    }

    /// Whether a connection has input the hub could take now.
    fn has_feedable(&self) -> bool {
        self.conns.values().any(|c| {
            (!c.inbox.is_empty() || c.deferred.is_some())
                && c.sink.unsent() < self.config.high_water
        })
    }

    /// Gives each connection's messages to its peer and its requests to the service, one
    /// request per connection and turn, while the connection is not behind.
    fn feed_connections(&mut self, now: u64) {
        let ids: Vec<ConnId> = self.conns.keys().copied().collect();
        for conn in ids {
            let Some(c) = self.conns.get_mut(&conn) else {
                continue;
            };
            c.served = false;
            if c.sink.unsent() < self.config.high_water
                && let Some((id, method, params)) = c.deferred.take()
            {
                c.served = true;
                self.handle_request(now, conn, id, method, params);
            }
            // What the peer still holds of a batch comes before the next message.
            self.drain_peer(now, conn);
            while let Some(c) = self.conns.get_mut(&conn) {
                if c.served || c.deferred.is_some() || c.sink.unsent() >= self.config.high_water {
                    break;
                }
                let Some(mut message) = c.inbox.pop_front() else {
                    break;
                };
                let len = message.len();
                // One message is one line for the NDJSON decoder: raw line breaks are only
                // whitespace between JSON tokens (inside strings they must be escaped).
                for b in message.iter_mut() {
                    if *b == b'\n' || *b == b'\r' {
                        *b = b' ';
                    }
                }
                message.push(b'\n');
                self.service.metrics().bytes("in", len);
                // The batches of earlier messages that are fully answered are done with.
                c.batches.retain(|_, b| b.in_flight > 0);
                c.message_seq += 1;
                c.peer.handle_bytes(now, &message);
                c.sink.consumed(len);
                c.fed = true;
                self.drain_peer(now, conn);
            }
            self.finish_pointed(conn);
        }
    }

    /// A pointed connection whose message is answered is done.
    fn finish_pointed(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        if c.info.kind == ConnKind::Pointed
            && c.fed
            && c.pending.is_empty()
            && c.inbox.is_empty()
            && c.deferred.is_none()
        {
            c.sink.done();
            self.conns.remove(&conn);
        }
    }

    /// Moves a connection's peer output: frames to the client, requests to the service.
    fn drain_peer(&mut self, now: u64, conn: ConnId) {
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            // A request waits for the next turn: the rest of the peer's output waits behind it
            // (this drain may be nested in the one that handled this turn's request).
            if c.deferred.is_some() {
                return;
            }
            match c.peer.poll_output(now) {
                Output::Transmit(mut bytes) => {
                    if bytes.last() == Some(&b'\n') {
                        bytes.pop();
                    }
                    self.service.metrics().bytes("out", bytes.len());
                    c.sink.send(bytes);
                }
                Output::Event(PeerEvent::Request { id, method, params }) => {
                    if c.peer.is_batched(&id) {
                        c.batch_of.insert(id.clone(), c.message_seq);
                    }
                    if c.served {
                        // This connection had its turn: the rest of its batch waits.
                        c.deferred = Some((id, method, params));
                        return;
                    }
                    c.served = true;
                    self.handle_request(now, conn, id, method, params);
                }
                Output::Event(PeerEvent::Notification { method, .. }) => {
                    crate::log::debug(&format!("ignored notification {method}"));
                }
                Output::Event(PeerEvent::Malformed { reason }) => {
                    crate::log::debug(&format!("malformed input from connection {conn}: {reason}"));
                }
                Output::Event(_) => {}
                Output::Timeout(_) => return,
            }
        }
    }

    /// A request from `conn`'s peer: refused unrun when its batch's answer is already full,
    /// else parsed and called.
    fn handle_request(
        &mut self,
        now: u64,
        conn: ConnId,
        id: Id,
        method: String,
        params: Option<RawJson>,
    ) {
        let limit = self.config.max_batch_answer_bytes;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let batch = c.batch_of.remove(&id);
        if let Some(seq) = batch
            && c.batches.get(&seq).is_some_and(|b| b.spent)
        {
            let e = ErrorObject::of(ErrorCode::ResourceLimit)
                .with_message(format!(
                    "not run: this batch's answer reached --max-batch-answer-bytes ({limit} \
                     bytes) before it; send it again in a smaller batch, or alone"
                ))
                .with_data(json!({"limit": limit, "ran": false}));
            self.service.metrics().error(e.code);
            let _ = c.peer.respond_error(now, &id, remote_error(e));
            return;
        }
        match Request::parse(&method, params.as_ref().map(|p| p.as_raw())) {
            Ok(request) => self.call(now, conn, id, batch, request),
            Err(e) => {
                let _ = c
                    .peer
                    .respond_error(now, &id, remote_error(e.to_error_object()));
            }
        }
    }

    /// Checks that the request's session is the caller's, then hands it to the service.
    fn call(&mut self, now: u64, conn: ConnId, id: Id, batch: Option<u64>, mut request: Request) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let Request::SessionResume(p) = &request {
            let result = self.resume(now, conn, p);
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            match result {
                Ok((r, replay)) => {
                    if c.peer.forget_incoming(&id).is_ok() {
                        let mut line = Vec::new();
                        Response::SessionResume(r).write_line(&id, &mut line);
                        self.service.metrics().bytes("out", line.len());
                        c.sink.send(line);
                        for (event, raw) in replay {
                            self.service.metrics().bytes("out", event.len() + raw.len());
                            if raw.is_empty() {
                                c.sink.send(event);
                            } else {
                                c.sink.send_frame(event, raw);
                            }
                        }
                    }
                }
                Err(e) => {
                    self.service.metrics().error(e.code);
                    // The secret is not written: only which session was asked for.
                    let asked = json!({"session_id": p.session_id});
                    self.service
                        .audit_refused("session.resume", asked, c.info.who(), &e);
                    let _ = c.peer.respond_error(now, &id, remote_error(e));
                }
            }
            self.drain_peer(now, conn);
            return;
        }
        if let Some(sid) = request_session(&request) {
            // A session with a stream (resumable or not) answers only on the connection holding
            // it: another of the same principal needs the resume secret to take it over.
            let owned = self.sessions.get_mut(sid).filter(|s| {
                s.principal == c.info.principal && (s.pointed || s.stream == Some(conn))
            });
            match owned {
                Some(s) => s.last_used = now,
                None => {
                    let e = if sid.is_empty() {
                        ErrorObject::of(ErrorCode::MethodNotFound).with_message(format!(
                            "{} is not served over this transport",
                            request.method()
                        ))
                    } else {
                        unknown_session(sid)
                    };
                    self.service.audit_refused(
                        request.method().as_str(),
                        request.params_value(),
                        c.info.who(),
                        &e,
                    );
                    let _ = c.peer.respond_error(now, &id, remote_error(e));
                    return;
                }
            }
        }
        if let Request::SessionOpen(_) = &request {
            // One principal cannot take every session of the daemon.
            let max = self.config.max_sessions_per_principal;
            let principal = &c.info.principal;
            let open = self
                .sessions
                .values()
                .filter(|s| &s.principal == principal)
                .count();
            if open >= max {
                let e = ErrorObject::of(ErrorCode::ResourceLimit)
                    .with_message(format!(
                        "{principal} has {open} sessions open, the most \
                         --max-sessions-per-principal allows: close one (session.close) first; \
                         one opened over POST /rpc ends after --rpc-session-idle-ms without a \
                         request"
                    ))
                    .with_data(json!({"limit": max, "open": open}));
                self.service.metrics().error(e.code);
                let _ = c.peer.respond_error(now, &id, remote_error(e));
                return;
            }
            if self.service.sessions_full() {
                make_room(&mut self.sessions, &mut self.service, now, principal, open);
            }
        }
        self.next_handle += 1;
        let handle = self.next_handle;
        // An exec.wait that takes the collected output: the service waits as for any, and
        // the reply gets the output here.
        if let Request::ExecWait(p) = &mut request
            && p.output
            && self
                .sessions
                .get(&p.session_id)
                .is_some_and(|s| s.collected.is_some())
        {
            p.output = false;
            self.output_waits
                .insert(handle, (p.session_id.clone(), p.process_id.clone()));
        }
        if let Request::SessionOpen(p) = &request
            && p.resumable
            && c.info.kind == ConnKind::Stream
        {
            self.resumable_opens.insert(handle);
        }
        c.pending.insert(handle, id);
        if let Some(seq) = batch {
            c.pending_batch.insert(handle, seq);
            c.batches.entry(seq).or_default().in_flight += 1;
        }
        self.handles.insert(handle, conn);
        let principal = c.info.principal.clone();
        // A session.open from this connection may be granted raw frames only if it can
        // carry them.
        self.service.set_raw_transport(c.info.raw_frames);
        self.service.set_address(c.info.address.clone());
        self.service
            .call_from(now, handle, request, Some(&principal));
        self.route(now);
    }

    /// Delivers the service's replies and events.
    fn route(&mut self, now: u64) {
        while let Some(out) = self.service.poll_output() {
            match out {
                ServiceOutput::Reply { handle, result } => self.reply(now, handle, result),
                ServiceOutput::Event(event) => {
                    let Some(s) = event_session(&event).and_then(|sid| self.sessions.get_mut(sid))
                    else {
                        continue;
                    };
                    if s.stream.is_none() && s.replay.is_none() {
                        // Pointed calls do no streaming: the output waits for exec.wait.
                        if let Some(c) = &mut s.collected {
                            c.add(event);
                        }
                        continue;
                    }
                    let conn = s.stream.and_then(|conn| self.conns.get(&conn));
                    // Raw output is granted only where raw frames travel (byte streams, /ws);
                    // should its event ever go elsewhere, its bytes travel in its string.
                    let mut event = match conn.is_some_and(|c| c.info.raw_frames) {
                        true => event,
                        false => event.into_string_payload(),
                    };
                    let mut line = Vec::new();
                    event.write_notification(&mut line);
                    let raw = event.take_raw_payload().unwrap_or_default();
                    if let Some(r) = &mut s.replay {
                        let seq = r.next_seq;
                        r.next_seq += 1;
                        line = with_event_seq(line, seq);
                        r.push(
                            seq,
                            line.clone(),
                            raw.clone(),
                            self.config.replay_events,
                            self.config.replay_bytes,
                        );
                    }
                    if let Some(c) = conn {
                        self.service.metrics().bytes("out", line.len() + raw.len());
                        if raw.is_empty() {
                            c.sink.send(line);
                        } else {
                            c.sink.send_frame(line, raw);
                        }
                    }
                }
            }
        }
    }

    fn reply(&mut self, now: u64, handle: u64, mut result: Result<Response, ErrorObject>) {
        let resumable = self.resumable_opens.remove(&handle);
        if let Some((sid, pid)) = self.output_waits.remove(&handle)
            && let Ok(Response::ExecWait(r)) = &mut result
            && let Some(c) = self
                .sessions
                .get_mut(&sid)
                .and_then(|s| s.collected.as_mut())
        {
            r.output = Some(c.take(&pid));
        }
        let Some(conn) = self.handles.remove(&handle) else {
            // Its connection is gone; a session it opened must not be left behind.
            if let Ok(Response::SessionOpen(r)) = &result {
                self.service
                    .close_session_now(now, &r.session_id, SessionEnd::Disconnected);
            }
            return;
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some(id) = c.pending.remove(&handle) else {
            return;
        };
        // The budget of its batch, if it came in one.
        let mut batch = c
            .pending_batch
            .remove(&handle)
            .and_then(|seq| c.batches.get_mut(&seq));
        if let Some(b) = &mut batch {
            b.in_flight -= 1;
        }
        match &mut result {
            Ok(Response::SessionOpen(r)) => {
                if c.info.kind == ConnKind::Pointed {
                    // Pointed calls do no streaming and cannot be resumed: a session opened by
                    // them is not offered what it lacks.
                    r.capabilities
                        .retain(|c| !matches!(c, Capability::Events | Capability::Resume));
                }
                let replay = resumable.then(|| Replay {
                    secret: new_secret(),
                    next_seq: 1,
                    events: VecDeque::new(),
                    bytes: 0,
                    detached_since: None,
                });
                if let Some(rp) = &replay {
                    r.resume = Some(ResumeInfo {
                        resume_secret: rp.secret.clone(),
                        grace_ms: self.config.resume_grace_ms,
                        replay_events: self.config.replay_events as u64,
                    });
                }
                self.sessions.insert(
                    r.session_id.clone(),
                    HubSession {
                        principal: c.info.principal.clone(),
                        stream: (c.info.kind == ConnKind::Stream).then_some(conn),
                        last_used: now,
                        pointed: c.info.kind == ConnKind::Pointed,
                        collected: (c.info.kind == ConnKind::Pointed)
                            .then(|| Collected::new(self.config.collected_output_bytes)),
                        replay,
                    },
                );
            }
            Ok(Response::SessionClose(_)) => {
                // Which session: the service no longer has it, so drop what the hub holds of
                // sessions the service closed.
                let service = &self.service;
                self.sessions
                    .retain(|sid, _| service.session_principal(sid).is_some());
            }
            _ => {}
        }
        // A raw read's bytes follow its line only where raw frames travel (a byte stream, a
        // binary WebSocket message), and never inside a batch's array; elsewhere (a session
        // resumed over another kind of connection) they travel in the string.
        let result = result.map(|response| match response {
            Response::FsRead(r) if !c.info.raw_frames || c.peer.is_batched(&id) => {
                Response::FsRead(r.into_string_form())
            }
            other => other,
        });
        let limit = self.config.max_batch_answer_bytes;
        let sent = match result {
            Ok(response) if c.peer.is_batched(&id) => match RawJson::to_raw(&response) {
                Ok(raw) => match batch {
                    Some(b) if b.spent || b.bytes.saturating_add(raw.get().len()) > limit => {
                        b.spent = true;
                        let e = ErrorObject::of(ErrorCode::ResourceLimit)
                            .with_message(format!(
                                "ran, but its answer ({} bytes) would take this batch's answer \
                                 past --max-batch-answer-bytes ({limit} bytes), so it is not \
                                 sent and the requests after it are not run; send it again in \
                                 a smaller batch, or alone",
                                raw.get().len()
                            ))
                            .with_data(json!({
                                "limit": limit,
                                "ran": true,
                                "answer_bytes": raw.get().len(),
                            }));
                        self.service.metrics().error(e.code);
                        c.peer.respond_error(now, &id, remote_error(e))
                    }
                    Some(b) => {
                        b.bytes += raw.get().len();
                        c.peer.respond(now, &id, raw)
                    }
                    None => c.peer.respond(now, &id, raw),
                },
                Err(e) => c.peer.respond_error(
                    now,
                    &id,
                    RemoteError::new(
                        Code::Number(JsonRpcCode::InternalError.code()),
                        e.to_string(),
                    ),
                ),
            },
            Ok(mut response) => c.peer.forget_incoming(&id).map(|()| {
                let mut line = Vec::new();
                response.write_line(&id, &mut line);
                match &mut response {
                    Response::FsRead(r) if r.raw_bytes.is_some() => {
                        let bytes = std::mem::take(&mut r.raw);
                        self.service
                            .metrics()
                            .bytes("out", line.len() + bytes.len());
                        c.sink.send_frame(line, bytes);
                    }
                    _ => {
                        self.service.metrics().bytes("out", line.len());
                        c.sink.send(line);
                    }
                }
            }),
            Err(e) => c.peer.respond_error(now, &id, remote_error(e)),
        };
        if let Err(e) = sent {
            crate::log::warn(&format!("reply to {id}: {e}"));
        }
        self.drain_peer(now, conn);
        self.finish_pointed(conn);
    }

    /// Pauses the sessions of connections that are behind, and drops those too far behind.
    fn watch_connections(&mut self, now: u64) {
        let mut drop = Vec::new();
        for (&conn, c) in self.conns.iter_mut() {
            let unsent = c.sink.unsent();
            let behind = unsent >= self.config.high_water;
            if unsent > self.config.max_unsent_bytes {
                drop.push((
                    conn,
                    format!(
                        "slow reader: {unsent} bytes unsent (limit {})",
                        self.config.max_unsent_bytes
                    ),
                ));
                continue;
            }
            match (behind, c.behind_since) {
                (true, None) => c.behind_since = Some(now),
                (true, Some(since)) if now.saturating_sub(since) >= self.config.slow_reader_ms => {
                    drop.push((
                        conn,
                        format!(
                            "slow reader: {unsent} bytes unsent for {} ms",
                            now.saturating_sub(since)
                        ),
                    ));
                    continue;
                }
                (false, Some(_)) => c.behind_since = None,
                _ => {}
            }
        }
        for (conn, reason) in drop {
            self.drop_conn(now, conn, Some(&reason));
        }
        for (sid, s) in &self.sessions {
            if let Some(conn) = s.stream {
                let behind = self
                    .conns
                    .get(&conn)
                    .is_some_and(|c| c.behind_since.is_some());
                self.service.set_paused(sid, behind);
            }
        }
    }

    /// When a session without a connection ends: pointed ones after `pointed_idle_ms`
    /// without a request, resumable ones `resume_grace_ms` after their connection dropped.
    fn expiry(&self, s: &HubSession) -> Option<u64> {
        if let Some(since) = s.replay.as_ref().and_then(|r| r.detached_since) {
            return Some(since + self.config.resume_grace_ms);
        }
        s.pointed.then(|| s.last_used + self.config.pointed_idle_ms)
    }

    /// Ends the sessions whose time without a connection is up.
    fn expire_sessions(&mut self, now: u64) {
        let expired: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| self.expiry(s).is_some_and(|t| t <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            crate::log::info(&format!(
                "session {id}: nobody came back in time, closed (its processes end)"
            ));
            let cause = match self.sessions.remove(&id).and_then(|s| s.replay) {
                Some(_) => SessionEnd::NotResumed,
                None => SessionEnd::Idle,
            };
            self.service.close_session_now(now, &id, cause);
        }
    }

    fn next_expiry(&self) -> Option<u64> {
        self.sessions.values().filter_map(|s| self.expiry(s)).min()
    }

    /// `session.resume` on `conn`: the answer and the events to send after it.
    fn resume(
        &mut self,
        now: u64,
        conn: ConnId,
        p: &SessionResumeParams,
    ) -> Result<(SessionResumeResult, Vec<EventFrame>), ErrorObject> {
        let Some(c) = self.conns.get(&conn) else {
            return Err(unknown_session(&p.session_id));
        };
        if c.info.kind != ConnKind::Stream {
            return Err(ErrorObject::of(ErrorCode::InvalidRequest).with_message(
                "session.resume needs a connection that carries events (/ws, stdio)",
            ));
        }
        let principal = c.info.principal.clone();
        let s = self
            .sessions
            .get_mut(&p.session_id)
            .filter(|s| s.principal == principal)
            .ok_or_else(|| unknown_session(&p.session_id))?;
        let Some(r) = s.replay.as_mut() else {
            return Err(unknown_session(&p.session_id));
        };
        if !same_secret(&r.secret, &p.resume_secret) {
            // As if there were no such session: the secret is what proves it is yours.
            return Err(unknown_session(&p.session_id));
        }
        if p.last_seq >= r.next_seq {
            return Err(ErrorObject::of(ErrorCode::InvalidParams)
                .with_message(format!(
                    "last_seq {} is past the last event sent ({})",
                    p.last_seq,
                    r.next_seq - 1
                ))
                .with_data(json!({"last_seq": p.last_seq, "sent": r.next_seq - 1})));
        }
        let first = r.first_kept();
        let lost = first.saturating_sub(p.last_seq + 1);
        if lost > 0 && !p.accept_loss {
            return Err(ErrorObject::of(ErrorCode::EventsLost)
                .with_message(format!(
                    "{lost} events after event_seq {} are no longer kept (the replay buffer \
                     holds {} from {first}); resume with accept_loss to go on without them",
                    p.last_seq,
                    r.events.len()
                ))
                .with_data(json!({
                    "lost": lost,
                    "last_seq": p.last_seq,
                    "first_kept": first,
                })));
        }
        let replay: Vec<EventFrame> = r
            .events
            .iter()
            .filter(|(seq, _, _)| *seq > p.last_seq)
            .map(|(_, line, raw)| (line.clone(), raw.clone()))
            .collect();
        r.detached_since = None;
        if let Some(old) = s.stream.replace(conn)
            && old != conn
        {
            crate::log::info(&format!(
                "session {}: taken over from connection {old} by {conn}",
                p.session_id
            ));
        }
        s.last_used = now;
        self.service.set_paused(&p.session_id, false);
        self.service.note_resumed(&p.session_id, p.last_seq, lost);
        Ok((
            SessionResumeResult {
                session_id: p.session_id.clone(),
                replayed: replay.len() as u64,
                lost,
            },
            replay,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A sink that keeps what it is given.
    #[derive(Clone, Default)]
    struct Keep {
        got: Arc<Mutex<Vec<Vec<u8>>>>,
        closed: Arc<Mutex<Option<String>>>,
        done: Arc<Mutex<bool>>,
    }

    impl ConnSink for Keep {
        fn send(&self, message: Vec<u8>) {
            self.got.lock().unwrap().push(message);
        }
        fn unsent(&self) -> usize {
            0
        }
        fn consumed(&self, _: usize) {}
        fn close(&self, reason: &str) {
            *self.closed.lock().unwrap() = Some(reason.to_owned());
        }
        fn done(&self) {
            *self.done.lock().unwrap() = true;
        }
    }

    fn wait_for(what: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !what() {
            assert!(Instant::now() < deadline, "timed out");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn value(bytes: &[u8]) -> serde_json::Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn sessions_belong_to_their_principal_and_pointed_calls_end() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings::for_roots(&[dir.path().to_owned()]).unwrap();
        let (hub, thread) = start(settings, HubConfig::default()).unwrap();
        let open = |who: &str, kind: ConnKind, message: &str| {
            let sink = Keep::default();
            let conn = hub.next_conn();
            let info = ConnInfo {
                principal: who.into(),
                address: None,
                kind,
                raw_frames: false,
            };
            assert!(hub.send(HubInput::Open {
                conn,
                info,
                sink: Box::new(sink.clone())
            }));
            assert!(hub.send(HubInput::Message {
                conn,
                bytes: message.as_bytes().to_vec()
            }));
            (conn, sink)
        };
        // A pretty-printed request is one message.
        let (_, alice) = open(
            "alice",
            ConnKind::Pointed,
            "{\"jsonrpc\":\"2.0\",\n \"id\":1,\n \"method\":\"session.open\",\"params\":{\"client_name\":\"t\"}}",
        );
        wait_for(|| *alice.done.lock().unwrap());
        let got = alice.got.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        let sid = value(&got[0])["result"]["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        // Bob cannot see Alice's session; Alice can, from another connection.
        let info = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session.info\",\"params\":{{\"session_id\":\"{sid}\"}}}}"
        );
        let (_, bob) = open("bob", ConnKind::Pointed, &info);
        wait_for(|| *bob.done.lock().unwrap());
        let answer = value(&bob.got.lock().unwrap()[0]);
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let (_, again) = open("alice", ConnKind::Pointed, &info);
        wait_for(|| *again.done.lock().unwrap());
        let answer = value(&again.got.lock().unwrap()[0]);
        assert_eq!(answer["result"]["session_id"], sid.as_str(), "{answer}");
        // A notification alone is done with nothing to say.
        let (_, quiet) = open(
            "alice",
            ConnKind::Pointed,
            "{\"jsonrpc\":\"2.0\",\"method\":\"anything\"}",
        );
        wait_for(|| *quiet.done.lock().unwrap());
        assert!(quiet.got.lock().unwrap().is_empty());
        assert!(hub.send(HubInput::Shutdown));
        thread.join().unwrap().unwrap();
    }

    /// Raw frames are granted only to a byte-stream connection (the agent's), whose raw
    /// answers go out as a line and its bytes; a WebSocket's session is not granted them.
    #[test]
    fn raw_frames_only_for_connections_that_carry_them() {
        /// A line and the bytes after it.
        type Frame = (Vec<u8>, Vec<u8>);
        #[derive(Clone, Default)]
        struct Frames {
            keep: Keep,
            frames: Arc<Mutex<Vec<Frame>>>,
        }
        impl ConnSink for Frames {
            fn send(&self, message: Vec<u8>) {
                self.keep.send(message);
            }
            fn send_frame(&self, message: Vec<u8>, bytes: Vec<u8>) {
                self.frames.lock().unwrap().push((message, bytes));
            }
            fn unsent(&self) -> usize {
                0
            }
            fn consumed(&self, _: usize) {}
            fn close(&self, reason: &str) {
                self.keep.close(reason);
            }
            fn done(&self) {}
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("f"), b"\x00\n\xff").unwrap();
        let settings = Settings::for_roots(std::slice::from_ref(&root)).unwrap();
        let (hub, thread) = start(settings, HubConfig::default()).unwrap();
        for raw_frames in [false, true] {
            let sink = Frames::default();
            let conn = hub.next_conn();
            assert!(hub.send(HubInput::Open {
                conn,
                info: ConnInfo {
                    principal: "p".into(),
                    address: None,
                    kind: ConnKind::Stream,
                    raw_frames,
                },
                sink: Box::new(sink.clone()),
            }));
            let send = |m: serde_json::Value| {
                assert!(hub.send(HubInput::Message {
                    conn,
                    bytes: m.to_string().into_bytes()
                }))
            };
            send(
                serde_json::json!({"jsonrpc":"2.0","id":1,"method":"session.open",
                                    "params":{"client_name":"t","raw_frames":true}}),
            );
            wait_for(|| sink.keep.got.lock().unwrap().len() == 1);
            let open = value(&sink.keep.got.lock().unwrap()[0]);
            let sid = open["result"]["session_id"].as_str().unwrap().to_owned();
            send(
                serde_json::json!({"jsonrpc":"2.0","id":2,"method":"fs.read",
                                    "params":{"session_id":sid,"path":"f","encoding":"raw"}}),
            );
            if raw_frames {
                assert_eq!(open["result"]["raw_frames"], true, "{open}");
                wait_for(|| sink.frames.lock().unwrap().len() == 1);
                let (line, bytes) = sink.frames.lock().unwrap()[0].clone();
                let line = value(&line);
                assert_eq!(line["result"]["raw_bytes"], 3, "{line}");
                assert_eq!(bytes, b"\x00\n\xff");
            } else {
                assert_eq!(open["result"].get("raw_frames"), None, "{open}");
                wait_for(|| sink.keep.got.lock().unwrap().len() == 2);
                let e = value(&sink.keep.got.lock().unwrap()[1]);
                assert_eq!(e["error"]["code"], -32602, "{e}");
                assert!(sink.frames.lock().unwrap().is_empty());
            }
            assert_eq!(*sink.keep.closed.lock().unwrap(), None);
        }
        assert!(hub.send(HubInput::Shutdown));
        thread.join().unwrap().unwrap();
    }

    #[test]
    fn stream_sessions_get_their_events_and_end_with_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings::for_roots(&[dir.path().to_owned()]).unwrap();
        let (hub, thread) = start(settings, HubConfig::default()).unwrap();
        let sink = Keep::default();
        let conn = hub.next_conn();
        hub.send(HubInput::Open {
            conn,
            info: ConnInfo {
                principal: "p".into(),
                address: None,
                kind: ConnKind::Stream,
                raw_frames: false,
            },
            sink: Box::new(sink.clone()),
        });
        let send = |m: String| {
            hub.send(HubInput::Message {
                conn,
                bytes: m.into_bytes(),
            })
        };
        send(
            r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"t"}}"#
                .into(),
        );
        wait_for(|| sink.got.lock().unwrap().len() == 1);
        let sid = value(&sink.got.lock().unwrap()[0])["result"]["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        send(format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"exec.start","params":{{"session_id":"{sid}","argv":["echo","hi"]}}}}"#
        ));
        wait_for(|| {
            sink.got
                .lock()
                .unwrap()
                .iter()
                .any(|m| value(m)["method"] == "exec.exit")
        });
        let got = sink.got.lock().unwrap().clone();
        let out: Vec<_> = got
            .iter()
            .map(|m| value(m))
            .filter(|v| v["method"] == "exec.stdout")
            .collect();
        assert_eq!(out[0]["params"]["data"], "hi\n");
        hub.send(HubInput::Closed { conn });
        // The session is gone with its connection.
        let other = Keep::default();
        let c2 = hub.next_conn();
        hub.send(HubInput::Open {
            conn: c2,
            info: ConnInfo {
                principal: "p".into(),
                address: None,
                kind: ConnKind::Pointed,
                raw_frames: false,
            },
            sink: Box::new(other.clone()),
        });
        hub.send(HubInput::Message {
            conn: c2,
            bytes: format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"session.info","params":{{"session_id":"{sid}"}}}}"#
            )
            .into_bytes(),
        });
        wait_for(|| *other.done.lock().unwrap());
        assert_eq!(
            value(&other.got.lock().unwrap()[0])["error"]["code"],
            -32602
        );
        hub.send(HubInput::Shutdown);
        thread.join().unwrap().unwrap();
    }
}
