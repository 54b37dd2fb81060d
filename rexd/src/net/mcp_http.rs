//! MCP's Streamable HTTP transport on `rexd --listen` (`/mcp`), behind the listener's
//! authentication: the same MCP adapter as `rexd --mcp` ([`crate::mcp`]), one per MCP session.
//!
//! - `POST /mcp` with an `initialize` request and no `Mcp-Session-Id` starts a session: an
//!   adapter with its own service (the daemon's config: roots, limits, policy, audit) on its own
//!   thread, talking NDJSON over a pair of socket pairs; the answer carries the session's id in
//!   `Mcp-Session-Id`. Later requests carry that header (another principal's id is unknown,
//!   `404`, as the spec says for a session that is gone).
//! - A request is answered with `application/json` when the adapter answers it; notifications
//!   and responses from the client get `202 Accepted`. What the adapter sends unasked
//!   (progress, `tools/list_changed`) is not forwarded: there is no `GET` stream (`405`).
//! - `DELETE /mcp` ends the session: the adapter sees the end of its input and ends its
//!   processes, as `rexd --mcp` does when its client goes away.
//! - At most [`MAX_SESSIONS`] sessions, and `--max-sessions-per-principal` of one principal
//!   (`429` past it); one idle for `--rpc-session-idle-ms` is ended to make room.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Limited};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex as AsyncMutex, oneshot};

use super::{NetState, Principal};

/// MCP sessions served at once.
pub const MAX_SESSIONS: usize = 16;
const SESSION_HEADER: &str = "mcp-session-id";

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Vec<u8>>>>>;

/// One MCP session: the adapter's input, and the calls waiting for its answers.
pub(crate) struct McpSession {
    principal: String,
    input: AsyncMutex<tokio::net::UnixStream>,
    pending: Pending,
    last_used: Mutex<Instant>,
}

/// The sessions of one listener.
#[derive(Default)]
pub(crate) struct McpSessions {
    by_id: Mutex<HashMap<String, Arc<McpSession>>>,
}

fn id_key(id: &Value) -> String {
    id.to_string()
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
            // Make room: sessions nobody used for the idle time end.
            map.retain(|_, s| {
                s.last_used
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
        let pending: Pending = Arc::default();
        let answers = Arc::clone(&pending);
        tokio::spawn(async move {
            let mut lines = BufReader::new(output).split(b'\n');
            while let Ok(Some(line)) = lines.next_segment().await {
                let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                // An answer goes to its caller; what the adapter says unasked has no stream.
                if v.get("method").is_none()
                    && let Some(id) = v.get("id")
                    && let Some(tx) = answers
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&id_key(id))
                {
                    let _ = tx.send(line);
                }
            }
        });
        let session = Arc::new(McpSession {
            principal: principal.to_owned(),
            input: AsyncMutex::new(input),
            pending,
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

    fn remove(&self, id: &str, principal: &str) -> bool {
        let mut map = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(id) {
            Some(s) if s.principal == principal => map.remove(id).is_some(),
            _ => false,
        }
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
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return json(
            StatusCode::BAD_REQUEST,
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#
                .to_vec(),
            None,
        );
    };
    let (id, session) = match session_id {
        Some(id) => match sessions.get(&id, &principal) {
            Some(s) => (id, s),
            None => return StatusCode::NOT_FOUND.into_response(),
        },
        None if message.get("method").and_then(Value::as_str) == Some("initialize") => {
            match sessions.start(&state, &principal, state.mcp_idle_ms) {
                Ok(x) => x,
                Err(r) => return r.into_response(),
            }
        }
        None => {
            return (
                StatusCode::BAD_REQUEST,
                "no Mcp-Session-Id: start with an initialize request\n",
            )
                .into_response();
        }
    };
    *session.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    // A request waits for its answer; anything else is only passed on.
    let answer = match (message.get("method"), message.get("id")) {
        (Some(_), Some(call_id)) => {
            let (tx, rx) = oneshot::channel();
            session
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id_key(call_id), tx);
            Some(rx)
        }
        _ => None,
    };
    let mut line = serde_json::to_vec(&message).unwrap_or_default();
    line.push(b'\n');
    if session.input.lock().await.write_all(&line).await.is_err() {
        sessions.remove(&id, &principal);
        return StatusCode::NOT_FOUND.into_response();
    }
    match answer {
        None => {
            let mut r = StatusCode::ACCEPTED.into_response();
            if let Ok(v) = HeaderValue::from_str(&id) {
                r.headers_mut().insert(SESSION_HEADER, v);
            }
            r
        }
        Some(rx) => match rx.await {
            Ok(body) => json(StatusCode::OK, body, Some(&id)),
            Err(_) => StatusCode::NOT_FOUND.into_response(),
        },
    }
}
