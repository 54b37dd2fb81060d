//! MCP's Streamable HTTP transport on `rexd --listen` (`/mcp`), behind the listener's
//! authentication: the same MCP adapter as `rexd --mcp` ([`crate::mcp`]), one per MCP session.
//!
//! - `POST /mcp` with an `initialize` request and no `Mcp-Session-Id` starts a session: an
//!   adapter with its own service (the daemon's config: roots, limits, policy, audit) on its own
//!   thread, talking NDJSON over a pair of socket pairs; the answer carries the session's id in
//!   `Mcp-Session-Id`. Later requests carry that header (another principal's id is unknown,
//!   `404`, as the spec says for a session that is gone).
//! - Each body is read with core's JSON-RPC parser ([`deskwire::jsonrpc::message::parse`])
//!   before anything is passed on. What it refuses (not JSON: -32700; an id that is neither an
//!   integer, a string nor null, or over [`deskwire::jsonrpc::MAX_ID_BYTES`]: -32600) is
//!   answered here, `400` with the error and id `null`: the adapter could only answer it with
//!   id `null` too, and no POST would ever get that answer.
//! - A request is answered with `application/json` when the adapter answers it; notifications
//!   and responses from the client get `202 Accepted`. What the adapter sends unasked
//!   (progress, `tools/list_changed`) is not forwarded: there is no `GET` stream (`405`).
//! - A batch (MCP 2025-03-26 has them; later revisions send one message a POST) is passed on
//!   element by element and answered as one array, in its order: each request's answer, each
//!   element core refuses its error; only notifications and responses: `202`. At most
//!   [`PeerConfig::batch_limit`] elements, as on stdio.
//! - At most [`MAX_WAITING`] requests of a session wait for their answers at once; past it a
//!   request is answered -32600 saying so, and so is a second request with the id of one still
//!   waiting (core's duplicate-id error, as on stdio). A waiting request leaves the table when
//!   it is answered, when its client hangs up (the adapter still finishes it: in the
//!   revisions the adapter speaks, up to 2025-11-25, a dropped connection is not a
//!   cancellation) and when the session ends.
//! - `notifications/cancelled` naming one of the session's waiting requests ends that
//!   request's POST with `202 Accepted` and no body: MCP says a cancelled request gets no
//!   response (the adapter sends none, and kills its command), and a JSON-RPC answer for an id
//!   the client has forgotten is what clients log as a response to an unknown request.
//! - `DELETE /mcp` ends the session: its waiting POSTs get `404`, and the adapter sees the end
//!   of its input and ends its processes, as `rexd --mcp` does when its client goes away.
//! - At most [`MAX_SESSIONS`] sessions, and `--max-sessions-per-principal` of one principal
//!   (`429` past it); one idle for `--rpc-session-idle-ms` (with no request waiting) is ended
//!   to make room.
//! - `rexd_mcp_requests_waiting` (`GET /metrics`) counts the waiting requests of all sessions.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use deskwire::jsonrpc::message::{self, Invalid, Message, Parsed};
use deskwire::jsonrpc::{Code, Dialect, ErrorCode, ErrorObject, Id, JsonRpc2, PeerConfig, RawJson};
use http_body_util::{BodyExt, Limited};
use prometheus_client::metrics::gauge::Gauge;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex as AsyncMutex, oneshot};

use super::{NetState, Principal};
use crate::hub::holds_token;

/// MCP sessions served at once.
pub const MAX_SESSIONS: usize = 16;
/// Requests of one MCP session waiting for their answers at once. Each waiting POST holds an
/// HTTP/1.1 connection, so `--max-connections-per-principal` (32 by default) usually binds
/// first; this bounds the table whatever the connection limits are.
pub const MAX_WAITING: usize = 64;
const SESSION_HEADER: &str = "mcp-session-id";

/// What ends a waiting request.
enum Outcome {
    /// The adapter's answer: one JSON object.
    Answer(Vec<u8>),
    /// The client cancelled it (`notifications/cancelled`); the adapter sends no answer.
    Cancelled,
}

#[derive(Default)]
struct Calls {
    /// Each waiting request's ticket and the way to its POST.
    by_id: HashMap<Id, (u64, oneshot::Sender<Outcome>)>,
    next_ticket: u64,
    /// The session ended: nothing more will be answered.
    closed: bool,
}

/// One session's requests waiting for the adapter's answers, by id.
struct Waiting {
    calls: Mutex<Calls>,
    /// `rexd_mcp_requests_waiting`, shared by every session.
    gauge: Gauge,
}

/// Why a request cannot wait for its answer.
enum Refusal {
    /// [`MAX_WAITING`] requests wait already.
    Full,
    /// A request with the same id waits.
    InUse,
}

impl Waiting {
    fn new(gauge: Gauge) -> Waiting {
        Waiting {
            calls: Mutex::default(),
            gauge,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `id` wait for its answer.
    fn wait_for(self: &Arc<Self>, id: Id) -> Result<Result<Ticket, Refusal>, Gone> {
        let mut calls = self.lock();
        if calls.closed {
            return Err(Gone);
        }
        if calls.by_id.contains_key(&id) {
            return Ok(Err(Refusal::InUse));
        }
        if calls.by_id.len() >= MAX_WAITING {
            return Ok(Err(Refusal::Full));
        }
        calls.next_ticket += 1;
        let ticket = calls.next_ticket;
        let (tx, rx) = oneshot::channel();
        calls.by_id.insert(id.clone(), (ticket, tx));
        self.gauge.inc();
        Ok(Ok(Ticket {
            waiting: Arc::clone(self),
            id,
            ticket,
            rx,
        }))
    }

    /// Ends the wait of `id` with `outcome`; `false` when nothing waited for it.
    fn end(&self, id: &Id, outcome: Outcome) -> bool {
        let Some((_, tx)) = self.lock().by_id.remove(id) else {
            return false;
        };
        self.gauge.dec();
        // The POST may be gone meanwhile; its ticket found the entry removed already.
        let _ = tx.send(outcome);
        true
    }

    /// The session ended: every waiting POST ends (`404`), and no request waits any more.
    fn close(&self) {
        let mut calls = self.lock();
        calls.closed = true;
        let n = calls.by_id.len();
        calls.by_id.clear();
        self.gauge.dec_by(n as i64);
    }

    fn is_empty(&self) -> bool {
        self.lock().by_id.is_empty()
    }
}

/// A request's place in [`Waiting`], held by its POST. Dropped with the POST (its client hung
/// up), it takes the entry with it.
struct Ticket {
    waiting: Arc<Waiting>,
    id: Id,
    ticket: u64,
    rx: oneshot::Receiver<Outcome>,
}

impl Ticket {
    /// How the wait ended; `None` when the session ended first.
    async fn outcome(&mut self) -> Option<Outcome> {
        (&mut self.rx).await.ok()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut calls = self.waiting.lock();
        // Only this wait's entry: after a cancellation the id may wait again, for another POST.
        if calls
            .by_id
            .get(&self.id)
            .is_some_and(|(ticket, _)| *ticket == self.ticket)
        {
            calls.by_id.remove(&self.id);
            self.waiting.gauge.dec();
        }
    }
}

/// One MCP session: the adapter's input, and the calls waiting for its answers.
pub(crate) struct McpSession {
    principal: String,
    input: AsyncMutex<tokio::net::UnixStream>,
    waiting: Arc<Waiting>,
    last_used: Mutex<Instant>,
}

/// The adapter is gone (or the session was ended while a request waited).
struct Gone;

impl McpSession {
    /// Passes one message (its JSON text) on to the adapter, as one line.
    async fn send(&self, raw: &[u8]) -> Result<(), Gone> {
        // JSON strings hold no raw line breaks: any in the text lies between tokens, and the
        // adapter reads one message a line.
        let mut line: Vec<u8> = raw
            .iter()
            .map(|&b| if matches!(b, b'\n' | b'\r') { b' ' } else { b })
            .collect();
        line.push(b'\n');
        self.input
            .lock()
            .await
            .write_all(&line)
            .await
            .map_err(|_| Gone)
    }
}

/// The sessions of one listener.
#[derive(Default)]
pub(crate) struct McpSessions {
    by_id: Mutex<HashMap<String, Arc<McpSession>>>,
}

fn new_id() -> String {
    crate::sys::random_hex(16)
}

fn json(status: StatusCode, body: Vec<u8>, session: Option<&str>) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(id) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        r.headers_mut().insert(SESSION_HEADER, id);
    }
    r
}

impl McpSessions {
    /// Starts an adapter for a new session of `principal`.
    fn start(
        &self,
        state: &NetState,
        principal: &str,
        idle_ms: u64,
    ) -> Result<(String, Arc<McpSession>), (StatusCode, String)> {
        let Some(factory) = &state.settings_factory else {
            return Err((StatusCode::NOT_FOUND, String::new()));
        };
        {
            let mut map = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
            // Make room: sessions nobody used for the idle time end; one whose request is
            // still running is in use.
            map.retain(|_, s| {
                !s.waiting.is_empty()
                    || s.last_used
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .elapsed()
                        .as_millis()
                        < u128::from(idle_ms)
            });
            if map.len() >= MAX_SESSIONS {
                return Err((
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("{MAX_SESSIONS} MCP sessions already open\n"),
                ));
            }
            // One principal cannot take them all.
            let max = state.max_sessions_per_principal;
            let mine = map.values().filter(|s| s.principal == principal).count();
            if mine >= max {
                return Err((
                    StatusCode::TOO_MANY_REQUESTS,
                    format!(
                        "{principal} has {mine} MCP sessions open, the most \
                         --max-sessions-per-principal allows: end one (DELETE /mcp) first; one \
                         idle for --rpc-session-idle-ms ends by itself\n"
                    ),
                ));
            }
        }
        let fail = |e: std::io::Error| {
            crate::log::warn(&format!("MCP session: {e}"));
            (StatusCode::INTERNAL_SERVER_ERROR, String::new())
        };
        let settings = factory().map_err(fail)?;
        let who = principal.to_owned();
        let (adapter_in, ours_in) = std::os::unix::net::UnixStream::pair().map_err(fail)?;
        let (adapter_out, ours_out) = std::os::unix::net::UnixStream::pair().map_err(fail)?;
        std::thread::Builder::new()
            .name("rexd-mcp".into())
            .spawn(move || {
                let served = crate::mcp::serve_as(
                    settings,
                    adapter_in.as_raw_fd(),
                    adapter_out.as_raw_fd(),
                    Some(who),
                );
                if let Err(e) = served {
                    crate::log::warn(&format!("MCP session ended: {e}"));
                }
                drop((adapter_in, adapter_out));
            })
            .map_err(fail)?;
        ours_in.set_nonblocking(true).map_err(fail)?;
        ours_out.set_nonblocking(true).map_err(fail)?;
        let input = tokio::net::UnixStream::from_std(ours_in).map_err(fail)?;
        let output = tokio::net::UnixStream::from_std(ours_out).map_err(fail)?;
        let waiting = Arc::new(Waiting::new(state.metrics.mcp_requests_waiting.clone()));
        let answers = Arc::clone(&waiting);
        tokio::spawn(async move {
            let mut lines = BufReader::new(output).split(b'\n');
            while let Ok(Some(line)) = lines.next_segment().await {
                // An answer goes to its caller; what the adapter says unasked has no stream.
                if let Ok(Parsed::Single(
                    Message::Response { id, .. } | Message::Error { id, .. },
                )) = message::parse(&line, 1)
                {
                    answers.end(&id, Outcome::Answer(line));
                }
            }
            // The adapter ended: what waits will never be answered.
            answers.close();
        });
        let session = Arc::new(McpSession {
            principal: principal.to_owned(),
            input: AsyncMutex::new(input),
            waiting,
            last_used: Mutex::new(Instant::now()),
        });
        let id = new_id();
        self.by_id
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), Arc::clone(&session));
        Ok((id, session))
    }

    fn get(&self, id: &str, principal: &str) -> Option<Arc<McpSession>> {
        self.by_id
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .filter(|s| s.principal == principal)
            .cloned()
    }

    /// Ends every session of the holders of these (revoked) tokens.
    pub(crate) fn end_sessions_of(&self, labels: &[String]) {
        if labels.is_empty() {
            return;
        }
        let mut map = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        let ended: Vec<String> = map
            .iter()
            .filter(|(_, s)| labels.iter().any(|l| holds_token(&s.principal, l)))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ended {
            if let Some(s) = map.remove(&id) {
                s.waiting.close();
            }
        }
    }

    fn remove(&self, id: &str, principal: &str) -> bool {
        let mut map = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        let removed = match map.get(id) {
            Some(s) if s.principal == principal => map.remove(id),
            _ => None,
        };
        // Its waiting POSTs end now, and with them their hold on the adapter's input.
        removed.map(|s| s.waiting.close()).is_some()
    }
}

fn session_header(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// `POST /mcp`, `GET /mcp` (405) and `DELETE /mcp`.
pub(crate) async fn handle(
    State(state): State<Arc<NetState>>,
    axum::Extension(Principal(principal)): axum::Extension<Principal>,
    req: Request,
) -> Response {
    let sessions = &state.mcp;
    let session_id = session_header(req.headers());
    match *req.method() {
        axum::http::Method::POST => {}
        axum::http::Method::DELETE => {
            return match session_id {
                Some(id) if sessions.remove(&id, &principal) => StatusCode::OK.into_response(),
                _ => StatusCode::NOT_FOUND.into_response(),
            };
        }
        _ => return StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
    let collected = tokio::time::timeout(
        state.body_timeout,
        Limited::new(req.into_body(), state.max_message_bytes).collect(),
    )
    .await;
    let body = match collected {
        Err(_) => return super::body_too_slow(&state),
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(_)) => return StatusCode::PAYLOAD_TOO_LARGE.into_response(),
    };
    // Core's rules decide what is a message; what they refuse is answered here, never passed
    // on (the adapter could only answer it with id null, which no POST waits for).
    let parsed = match message::parse(&body, PeerConfig::default().batch_limit) {
        Ok(parsed) => parsed,
        Err(invalid) => return refused(&invalid),
    };
    let initialize = matches!(
        &parsed,
        Parsed::Single(Message::Request { method, .. }) if method == "initialize"
    );
    let (id, session) = match session_id {
        Some(id) => match sessions.get(&id, &principal) {
            Some(s) => (id, s),
            None => return StatusCode::NOT_FOUND.into_response(),
        },
        None if initialize => match sessions.start(&state, &principal, state.mcp_idle_ms) {
            Ok(x) => x,
            Err(r) => return r.into_response(),
        },
        None => {
            return (
                StatusCode::BAD_REQUEST,
                "no Mcp-Session-Id: start with an initialize request\n",
            )
                .into_response();
        }
    };
    *session.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    let answered = match parsed {
        Parsed::Single(m) => one(&session, m, &body).await,
        Parsed::Batch(items) => match serde_json::from_slice::<Vec<&RawValue>>(&body) {
            Ok(raws) => batch(&session, items, &raws).await,
            // Core read the same text as an array.
            Err(e) => return refused(&Invalid::Parse(e.to_string())),
        },
    };
    match answered {
        Ok(Some(body)) => json(StatusCode::OK, body, Some(&id)),
        Ok(None) => {
            let mut r = StatusCode::ACCEPTED.into_response();
            if let Ok(v) = HeaderValue::from_str(&id) {
                r.headers_mut().insert(SESSION_HEADER, v);
            }
            r
        }
        Err(Gone) => {
            sessions.remove(&id, &principal);
            StatusCode::NOT_FOUND.into_response()
        }
    }
}

fn error_body(id: Id, error: ErrorObject) -> Vec<u8> {
    Message::Error { id, error }.to_json().into_bytes()
}

/// `400` with the error core's parser calls for (id `null` unless it read a plain one).
fn refused(invalid: &Invalid) -> Response {
    let (id, error) = invalid.to_error();
    json(StatusCode::BAD_REQUEST, error_body(id, error), None)
}

impl Refusal {
    /// The error answering request `id` that cannot wait.
    fn answer(&self, id: &Id) -> Vec<u8> {
        let error = match self {
            Refusal::Full => ErrorObject::new(
                ErrorCode::InvalidRequest.code(),
                format!(
                    "{MAX_WAITING} requests of this MCP session already wait for their answers, \
                     the most rexd holds: wait for one to be answered, or cancel one \
                     (notifications/cancelled)"
                ),
            )
            .with_data(serde_json::json!({ "max_waiting": MAX_WAITING })),
            Refusal::InUse => {
                // Core's words for it, as the adapter says it on stdio.
                let e = JsonRpc2.duplicate_id();
                let code = match e.code {
                    Code::Number(n) => n,
                    Code::Name(_) => ErrorCode::InvalidRequest.code(),
                };
                ErrorObject::new(code, e.message)
            }
        };
        error_body(id.clone(), error)
    }
}

/// What a POST answers for one message passed on: nothing (a notification, a response), an
/// answer at once, or the wait for the adapter's.
enum Slot {
    Ready(Vec<u8>),
    Wait(Ticket),
}

/// Passes `message` (`raw`, its text) on to the adapter; a request waits for its answer first,
/// so that the answer cannot come before anyone waits for it.
async fn pass_on(session: &McpSession, message: Message, raw: &[u8]) -> Result<Option<Slot>, Gone> {
    let ticket = match &message {
        Message::Request { id, .. } => match session.waiting.wait_for(id.clone())? {
            Ok(ticket) => Some(ticket),
            Err(refusal) => return Ok(Some(Slot::Ready(refusal.answer(id)))),
        },
        _ => None,
    };
    session.send(raw).await?;
    if let Message::Notification { method, params } = &message
        && method == "notifications/cancelled"
        && let Some(id) = cancelled_id(params.as_ref())
    {
        // The adapter kills the command and sends no answer: the POST ends here (`202`).
        session.waiting.end(&id, Outcome::Cancelled);
    }
    Ok(ticket.map(Slot::Wait))
}

/// The `requestId` of `notifications/cancelled` params, when it is an id.
fn cancelled_id(params: Option<&RawJson>) -> Option<Id> {
    #[derive(serde::Deserialize)]
    struct Cancelled {
        #[serde(rename = "requestId")]
        request_id: Id,
    }
    serde_json::from_str::<Cancelled>(params?.get())
        .ok()
        .map(|c| c.request_id)
}

/// The answer to a POST of one message; `None`: `202`.
async fn one(session: &McpSession, message: Message, raw: &[u8]) -> Result<Option<Vec<u8>>, Gone> {
    match pass_on(session, message, raw).await? {
        None => Ok(None),
        Some(Slot::Ready(body)) => Ok(Some(body)),
        Some(Slot::Wait(mut ticket)) => match ticket.outcome().await.ok_or(Gone)? {
            Outcome::Answer(body) => Ok(Some(body)),
            Outcome::Cancelled => Ok(None),
        },
    }
}

/// The answer to a POST of a batch: one array of the requests' answers and the refused
/// elements' errors, in the batch's order (a cancelled request has none); `None`: `202`.
async fn batch(
    session: &McpSession,
    items: Vec<Result<Message, Invalid>>,
    raws: &[&RawValue],
) -> Result<Option<Vec<u8>>, Gone> {
    let mut slots = Vec::with_capacity(items.len());
    for (item, raw) in items.into_iter().zip(raws) {
        let slot = match item {
            Ok(m) => pass_on(session, m, raw.get().as_bytes()).await?,
            Err(invalid) => {
                let (id, error) = invalid.to_error();
                Some(Slot::Ready(error_body(id, error)))
            }
        };
        slots.extend(slot);
    }
    let mut answers = Vec::with_capacity(slots.len());
    for slot in slots {
        match slot {
            Slot::Ready(body) => answers.push(body),
            Slot::Wait(mut ticket) => match ticket.outcome().await.ok_or(Gone)? {
                Outcome::Answer(body) => answers.push(body),
                Outcome::Cancelled => {}
            },
        }
    }
    if answers.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    message::write_batch_bodies(&answers, &mut out);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting() -> Arc<Waiting> {
        Arc::new(Waiting::new(Gauge::default()))
    }

    fn wait(w: &Arc<Waiting>, id: i64) -> Ticket {
        match w.wait_for(Id::Number(id)) {
            Ok(Ok(ticket)) => ticket,
            _ => panic!("{id} cannot wait"),
        }
    }

    #[test]
    fn the_table_is_bounded_and_ids_wait_once() {
        let w = waiting();
        let tickets: Vec<Ticket> = (0..MAX_WAITING as i64).map(|i| wait(&w, i)).collect();
        assert_eq!(w.gauge.get(), MAX_WAITING as i64);
        assert!(matches!(w.wait_for(Id::Number(-1)), Ok(Err(Refusal::Full))));
        drop(tickets);
        assert!(w.is_empty());
        assert_eq!(w.gauge.get(), 0);
        let _one = wait(&w, 1);
        assert!(matches!(w.wait_for(Id::Number(1)), Ok(Err(Refusal::InUse))));
        // The same number as a string is another id.
        assert!(matches!(w.wait_for(Id::String("1".into())), Ok(Ok(_))));
    }

    /// A cancelled request's POST still holds its ticket when a new request takes the id: the
    /// old ticket, dropped, must not take the new entry with it.
    #[test]
    fn a_ticket_takes_only_its_own_entry() {
        let w = waiting();
        let mut old = wait(&w, 7);
        assert!(w.end(&Id::Number(7), Outcome::Cancelled));
        assert!(matches!(old.rx.try_recv(), Ok(Outcome::Cancelled)));
        let mut new = wait(&w, 7);
        drop(old);
        assert_eq!(w.gauge.get(), 1);
        assert!(w.end(&Id::Number(7), Outcome::Answer(b"{}".to_vec())));
        assert!(matches!(new.rx.try_recv(), Ok(Outcome::Answer(b)) if b == b"{}"));
        assert!(!w.end(&Id::Number(7), Outcome::Cancelled), "answered once");
        assert_eq!(w.gauge.get(), 0);
    }

    #[test]
    fn an_ended_session_ends_every_wait() {
        let w = waiting();
        let mut a = wait(&w, 1);
        let _b = wait(&w, 2);
        w.close();
        assert_eq!(w.gauge.get(), 0);
        assert!(a.rx.try_recv().is_err(), "the POST sees the session gone");
        assert!(w.wait_for(Id::Number(3)).is_err(), "nothing waits any more");
    }
}
