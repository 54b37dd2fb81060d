//! `mobile_desktop`: the desktop end of the mobile companion protocol
//! (`docs/sidecar-and-mobile.md`), runnable.
//!
//! An Axum WebSocket server on `ws://ADDR:9120/ws` drives `deskwire::mobile`'s server engine:
//! it prints the six-digit pairing code, pairs phones, keeps their tokens in a file across
//! restarts (`--tokens`), accepts `Authorization: Bearer <token>` on the upgrade (401 for a
//! token it does not know), syncs the agent state on connect, pings, and runs a scripted agent:
//! `command start` → `Running` → a chat message and a task update → a `permission_request` →
//! on approval `Running` (iteration 1) → `Stopped` (`Completed`); a refusal stops it with
//! `ManualStop`, and so does `command stop`.
//!
//! ```sh
//! cargo run -p mobile_desktop -- --bind 0.0.0.0 --tokens ~/.config/deskwire/phones
//! ```
//!
//! Lines typed on standard input act like the desktop's UI: `pair` shows a new code (the only
//! way to open pairing: it shows one at start, and closes after a phone paired or the code was
//! burnt by wrong guesses), `revoke TOKEN` stops accepting a token and closes the connections
//! that use it, `quit` exits. `--config JSON` sets the server engine's configuration (any of its
//! fields, e.g. `{"max_unpaired_connections": 2}`). The program's own lines on standard output
//! (`listening on …`, `pairing code: …`, `paired …`, `state: …`) are what tests read.
//!
//! The engine does all protocol work; this file only moves frames between sockets and the
//! engine, keeps the clock and the timer, and plays the agent.

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::ws::{Message, WebSocket};
use axum::extract::{State, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header::AUTHORIZATION};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clap::Parser;
use deskwire::gateway::envelope::Timestamp;
use deskwire::mobile::server::{
    Admission, Config, ConnId, Event, NewPermission, Output, PairingFailure, Refusal, Server,
};
use deskwire::mobile::{
    self, AgentState, ChatMessage, CommandAction, RunningData, StopReason, StoppedData, TaskUpdate,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{Notify, mpsc};

#[derive(Parser, Debug)]
#[command(about = "The desktop end of the deskwire mobile companion (WebSocket server)")]
struct Args {
    /// Address to listen on (0.0.0.0 to let phones on the LAN in).
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Port to listen on (the spec's 9120; 0 picks a free one, printed at start).
    #[arg(long, default_value_t = mobile::DEFAULT_PORT)]
    port: u16,
    /// File that keeps the issued tokens across restarts, one per line.
    #[arg(long)]
    tokens: Option<PathBuf>,
    /// The server engine's configuration as JSON (any subset of its fields).
    #[arg(long, value_parser = parse_config)]
    config: Option<Config>,
}

fn parse_config(text: &str) -> Result<Config, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// The scripted agent's task.
#[derive(Debug)]
enum Agent {
    Idle,
    /// Waiting for the phone's answer to permission request `permission`.
    Asking {
        task_id: String,
        permission: String,
    },
    Done,
}

/// Everything behind the lock: the engine, the sockets' outgoing queues, the agent.
struct Desk {
    server: Server,
    clock: Instant,
    sockets: HashMap<u64, mpsc::UnboundedSender<Message>>,
    next_conn: u64,
    tokens_file: Option<PathBuf>,
    agent: Agent,
    tasks: u64,
    /// The engine's next deadline (ms on `clock`), for the timer task.
    deadline: u64,
}

#[derive(Clone)]
struct Shared {
    desk: Arc<Mutex<Desk>>,
    rearm: Arc<Notify>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Desk> {
        self.desk.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drains the engine and wakes the timer for the new deadline.
    fn pump(&self, desk: &mut Desk) {
        desk.pump();
        self.rearm.notify_one();
    }
}

fn say(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

impl Desk {
    fn now(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    /// Does what the engine asks until it only has a deadline left.
    fn pump(&mut self) {
        let now = self.now();
        loop {
            match self.server.poll_output(now) {
                Output::Transmit { conn, text } => {
                    if let Some(tx) = self.sockets.get(&conn.0) {
                        let _ = tx.send(Message::Text(text.into()));
                    }
                }
                Output::Close { conn, reason } => {
                    if let Some(tx) = self.sockets.remove(&conn.0) {
                        let _ = tx.send(Message::Close(None));
                    }
                    say(format_args!("closing connection {conn}: {reason:?}"));
                }
                Output::Event(event) => self.on_event(now, event),
                Output::Timeout(deadline) => {
                    self.deadline = deadline;
                    return;
                }
            }
        }
    }

    /// Opens pairing: only on the user's `pair` (and once at start), never after a pairing or
    /// a failure, since every new code is a new chance for a guesser.
    fn show_code(&mut self, now: u64) {
        match self.server.start_pairing(now) {
            Ok(code) => say(format_args!("pairing code: {code}")),
            Err(e) => say(format_args!("cannot pair: {e}")),
        }
    }

    fn on_event(&mut self, now: u64, event: Event) {
        match event {
            Event::Paired { conn, token } => {
                say(format_args!("paired connection {conn}"));
                self.persist_token(&token);
                say(format_args!("pairing closed; type `pair` for a new code"));
            }
            Event::PairingFailed { conn, failure } => {
                say(format_args!(
                    "pairing failed on connection {conn}: {failure:?}"
                ));
                if failure == PairingFailure::LockedOut {
                    say(format_args!("pairing closed; type `pair` for a new code"));
                }
            }
            Event::ClientConnected { conn, via } => {
                say(format_args!("connected {conn} via {via:?}"))
            }
            Event::ClientDisconnected { conn, reason } => {
                say(format_args!("disconnected {conn}: {reason:?}"))
            }
            Event::Command { conn, command } => {
                say(format_args!("command from {conn}: {:?}", command.action));
                match command.action {
                    CommandAction::Start => self.start_task(now, command.task),
                    CommandAction::Stop => self.stop_task(now, StopReason::ManualStop),
                    _ => self.chat(now, "system", "pause and resume are not scripted here"),
                }
            }
            Event::UserMessage { conn, content } => {
                say(format_args!("message from {conn}: {content}"));
                self.chat(now, "assistant", &format!("You said: {content}"));
            }
            Event::PermissionAnswered { id, approved, .. } => {
                say(format_args!("permission {id}: approved={approved}"));
                self.answered(now, &id, approved);
            }
            Event::PermissionTimedOut { id } => {
                say(format_args!("permission {id} timed out"));
                self.answered(now, &id, false);
            }
            other => say(format_args!("event: {other:?}")),
        }
    }

    fn set_state(&mut self, now: u64, state: AgentState) {
        say(format_args!("state: {}", state.to_value()));
        self.server.set_state(now, state);
    }

    fn chat(&mut self, now: u64, role: &str, content: &str) {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.server.send_message(
            now,
            ChatMessage {
                role: role.to_owned(),
                content: content.to_owned(),
                timestamp: Timestamp::from_unix_ms(unix_ms).to_string(),
            },
        );
    }

    /// Idle → Running → asks a permission.
    fn start_task(&mut self, now: u64, task: Option<String>) {
        if let Agent::Asking { .. } = self.agent {
            self.chat(now, "system", "a task is running already");
            return;
        }
        self.tasks += 1;
        let task_id = format!("task-{}", self.tasks);
        let task = task.unwrap_or_else(|| "look around".to_owned());
        self.set_state(
            now,
            AgentState::Running(RunningData {
                task_id: task_id.clone(),
                iteration: 0,
            }),
        );
        self.chat(
            now,
            "assistant",
            &format!("I'll start by listing the workspace for: {task}"),
        );
        self.server.send_task_update(
            now,
            TaskUpdate {
                task_id: task_id.clone(),
                iteration: 0,
                status: "running".to_owned(),
            },
        );
        let asked = self.server.request_permission(
            now,
            NewPermission {
                tool_name: "shell".to_owned(),
                command: "ls -la".to_owned(),
                description: "List the files in the workspace".to_owned(),
                tier: "medium".to_owned(),
            },
        );
        match asked {
            Ok(permission) => {
                say(format_args!("asking permission {permission}"));
                self.agent = Agent::Asking {
                    task_id,
                    permission,
                };
            }
            Err(e) => {
                say(format_args!("cannot ask: {e}"));
                self.finish(now, task_id, StopReason::Error);
            }
        }
    }

    /// The answer came: approved → Running (iteration 1) → Stopped(Completed).
    fn answered(&mut self, now: u64, id: &str, approved: bool) {
        let Agent::Asking {
            task_id,
            permission,
        } = &self.agent
        else {
            return;
        };
        if permission != id {
            return;
        }
        let task_id = task_id.clone();
        if !approved {
            self.chat(now, "assistant", "Permission refused; stopping.");
            self.finish(now, task_id, StopReason::ManualStop);
            return;
        }
        self.set_state(
            now,
            AgentState::Running(RunningData {
                task_id: task_id.clone(),
                iteration: 1,
            }),
        );
        self.server.send_task_update(
            now,
            TaskUpdate {
                task_id: task_id.clone(),
                iteration: 1,
                status: "running".to_owned(),
            },
        );
        self.chat(now, "assistant", "Listed the workspace: 3 files. Done.");
        self.finish(now, task_id, StopReason::Completed);
    }

    fn stop_task(&mut self, now: u64, reason: StopReason) {
        if let Agent::Asking {
            task_id,
            permission,
        } = &self.agent
        {
            let (task_id, permission) = (task_id.clone(), permission.clone());
            let _ = self.server.cancel_permission(now, &permission);
            self.finish(now, task_id, reason);
        }
    }

    fn finish(&mut self, now: u64, task_id: String, reason: StopReason) {
        self.set_state(now, AgentState::Stopped(StoppedData { task_id, reason }));
        self.agent = Agent::Done;
    }

    fn persist_token(&mut self, token: &str) {
        let Some(path) = &self.tokens_file else {
            return;
        };
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| writeln!(f, "{token}"));
        if let Err(e) = written {
            say(format_args!(
                "cannot keep the token in {}: {e}",
                path.display()
            ));
        }
    }

    /// Stops accepting `token`; the engine closes its connections (`Output::Close`, which the
    /// next pump carries out).
    fn revoke(&mut self, token: &str) {
        let known = self.server.revoke_token(token);
        say(format_args!("revoked: {known}"));
        if let Some(path) = &self.tokens_file
            && let Ok(text) = std::fs::read_to_string(path)
        {
            let kept: String = text
                .lines()
                .filter(|line| line.trim() != token)
                .map(|line| format!("{line}\n"))
                .collect();
            let _ = std::fs::write(path, kept);
        }
    }
}

/// `GET /ws`: the upgrade. The engine decides on the bearer token before the upgrade, so a bad
/// token is answered 401 (and too many connections 503) without a WebSocket.
async fn upgrade(
    State(shared): State<Shared>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(mobile::bearer_token)
        .map(str::to_owned);
    let (tx, rx) = mpsc::unbounded_channel();
    let conn = {
        let mut desk = shared.lock();
        let conn = desk.next_conn;
        desk.next_conn += 1;
        // Registered before `open`, which queues the state sync for it.
        desk.sockets.insert(conn, tx);
        let now = desk.now();
        let admission = desk.server.open(now, ConnId(conn), bearer.as_deref());
        let refusal = match admission {
            Ok(Admission::Refused(Refusal::BadToken)) => Some(StatusCode::UNAUTHORIZED),
            Ok(Admission::Refused(_)) => Some(StatusCode::SERVICE_UNAVAILABLE),
            Ok(_) => None,
            Err(_) => Some(StatusCode::INTERNAL_SERVER_ERROR),
        };
        if let Some(status) = refusal {
            desk.sockets.remove(&conn);
            say(format_args!("refused connection {conn}: {status}"));
            return status.into_response();
        }
        say(format_args!("opened connection {conn}: {admission:?}"));
        shared.pump(&mut desk);
        conn
    };
    let failed = shared.clone();
    ws.on_failed_upgrade(move |_| {
        let mut desk = failed.lock();
        desk.sockets.remove(&conn);
        let now = desk.now();
        desk.server.closed(now, ConnId(conn));
        failed.pump(&mut desk);
    })
    .on_upgrade(move |socket| serve_socket(shared, conn, socket, rx))
}

/// One WebSocket: frames in go to the engine, what the engine sends for it goes out.
async fn serve_socket(
    shared: Shared,
    conn: u64,
    mut socket: WebSocket,
    mut outgoing: mpsc::UnboundedReceiver<Message>,
) {
    loop {
        tokio::select! {
            out = outgoing.recv() => match out {
                Some(Message::Close(frame)) => {
                    let _ = socket.send(Message::Close(frame)).await;
                    break;
                }
                Some(message) => {
                    if socket.send(message).await.is_err() {
                        break;
                    }
                }
                None => break,
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    let mut desk = shared.lock();
                    let now = desk.now();
                    desk.server.handle_text(now, ConnId(conn), text.as_str());
                    shared.pump(&mut desk);
                }
                // The spec allows JSON text frames only; a binary frame is dropped.
                Some(Ok(Message::Binary(_))) => say(format_args!("binary frame from {conn} ignored")),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
            },
        }
    }
    let mut desk = shared.lock();
    desk.sockets.remove(&conn);
    let now = desk.now();
    desk.server.closed(now, ConnId(conn));
    shared.pump(&mut desk);
}

/// Sleeps until the engine's deadline (or until a pump moved it) and lets it act.
async fn timer(shared: Shared) {
    loop {
        let (clock, deadline) = {
            let desk = shared.lock();
            (desk.clock, desk.deadline)
        };
        let at = clock + Duration::from_millis(deadline);
        tokio::select! {
            _ = tokio::time::sleep_until(at.into()) => {
                let mut desk = shared.lock();
                desk.pump();
            }
            _ = shared.rearm.notified() => {}
        }
    }
}

/// The desktop's UI, as lines on standard input.
async fn console(shared: Shared) {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mut desk = shared.lock();
        let now = desk.now();
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["pair"] => desk.show_code(now),
            ["revoke", token] => desk.revoke(token),
            ["quit"] => std::process::exit(0),
            [] => {}
            _ => say(format_args!("commands: pair | revoke TOKEN | quit")),
        }
        shared.pump(&mut desk);
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    // Pairing codes and tokens are secrets: their entropy comes from the OS.
    let mut entropy = [0u8; 32];
    getrandom::fill(&mut entropy)?;
    let mut server = Server::new(args.config.clone().unwrap_or_default(), entropy);
    if let Some(path) = &args.tokens
        && let Ok(text) = std::fs::read_to_string(path)
    {
        let mut restored = 0;
        for token in text.lines().map(str::trim).filter(|t| !t.is_empty()) {
            match server.add_token(token) {
                Ok(()) => restored += 1,
                Err(e) => say(format_args!("token not restored: {e}")),
            }
        }
        say(format_args!("restored {restored} token(s)"));
    }
    let mut desk = Desk {
        server,
        clock: Instant::now(),
        sockets: HashMap::new(),
        next_conn: 1,
        tokens_file: args.tokens.clone(),
        agent: Agent::Idle,
        tasks: 0,
        deadline: 0,
    };
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.bind, args.port)).await?;
    say(format_args!(
        "listening on ws://{}{}",
        listener.local_addr()?,
        mobile::DEFAULT_PATH
    ));
    let now = desk.now();
    desk.show_code(now);
    desk.pump();
    let shared = Shared {
        desk: Arc::new(Mutex::new(desk)),
        rearm: Arc::new(Notify::new()),
    };
    tokio::spawn(timer(shared.clone()));
    tokio::spawn(console(shared.clone()));
    let app = Router::new()
        .route(mobile::DEFAULT_PATH, get(upgrade))
        .with_state(shared);
    axum::serve(listener, app).await?;
    Ok(())
}
