//! `rexd --mcp`: the daemon's tools as an MCP server on stdio (an adapter, as the spec puts
//! it: the protocol stays REXD, MCP clients see one logical toolset).
//!
//! The same [`Service`] serves the calls; this module only translates:
//! - `initialize` opens a REXD session (`client_name` from `clientInfo`) and advertises
//!   `tools: {listChanged: true}`; the negotiated version is the client's when it is one of
//!   [`PROTOCOL_VERSIONS`], else the latest.
//! - `tools/list`: `bash` (only when the daemon allows the shell), `exec`, `read`, `write`,
//!   `list`, `glob`, `stat`, with annotations (`read` is read-only, `write` destructive but
//!   idempotent, `bash`/`exec` destructive and open-world). Descriptions name the session's
//!   workspace roots, so the model knows where it may work.
//! - `tools/call`: `bash`/`exec` start a process; its `exec.stdout`/`exec.stderr` become
//!   `notifications/progress` (when the call carried a `progressToken`; `progress` is the
//!   byte count so far, so it only grows) and its `exec.exit` the result:
//!   `content` (the output), `structuredContent` (`exit_code`, `signal`, `timed_out`,
//!   `truncated`, `stdout`, `stderr`, `duration_ms`) and `isError` for a non-zero exit. Refusals
//!   (a path outside the roots, a bad argument) are `isError` results too, so a model can
//!   correct itself; an unknown tool is JSON-RPC `-32602`.
//! - `notifications/cancelled` for a running command kills its process group (`exec.kill`
//!   KILL) and, as MCP asks, the call gets no answer at all.
//! - Roots: when the client has the `roots` capability, after `notifications/initialized` (and
//!   on each `notifications/roots/list_changed`) the server asks `roots/list`, reopens the
//!   session on those directories (the daemon's allowlist still bounds them: roots outside it
//!   are refused and the previous session stays), and sends `notifications/tools/list_changed`
//!   because the tool descriptions changed.
//!
//! Stdout carries MCP only; logs go to stderr.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use deskwire::jsonrpc::{
    Code, Id, JsonRpc2, Output, Peer, PeerConfig, PeerEvent, RawJson, RemoteError,
};
use deskwire::rexd::{
    ErrorObject, Event, ExecKillParams, ExecOutput, ExecStartParams, Program, Request, Response,
    SessionCloseParams, SessionOpenParams, Signal,
};
use deskwire::tools::ToolCall;
use deskwire::tools::builtin::{self, RouteError};
use mio::Poll;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::frontend::{self, Frontend, Outbox};
use crate::service::{Service, ServiceOutput, Settings};

/// MCP revisions this server speaks (all use the `initialize` handshake).
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// What the server answers when the client asks for a revision it does not know.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";
/// Most bytes of a progress notification's `message` (the output chunk, cut).
const PROGRESS_MESSAGE_BYTES: usize = 1024;

/// The logical tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// A shell command line (`sh -c`).
    Bash,
    /// A program with arguments, no shell.
    Exec,
    /// Read a text file.
    Read,
    /// Write a file atomically.
    Write,
    /// List a directory.
    List,
    /// Find files by pattern.
    Glob,
    /// Stat a path.
    Stat,
}

impl Tool {
    /// Every tool, in the order `tools/list` gives them.
    pub const ALL: [Tool; 7] = [
        Tool::Bash,
        Tool::Exec,
        Tool::Read,
        Tool::Write,
        Tool::List,
        Tool::Glob,
        Tool::Stat,
    ];

    /// The MCP tool name.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Bash => "bash",
            Tool::Exec => "exec",
            Tool::Read => "read",
            Tool::Write => "write",
            Tool::List => "list",
            Tool::Glob => "glob",
            Tool::Stat => "stat",
        }
    }

    /// The tool with this name.
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    fn is_exec(self) -> bool {
        matches!(self, Tool::Bash | Tool::Exec)
    }

    /// The `tools/list` entry, with the workspace roots in the description.
    pub fn definition(self, roots: &[String]) -> Value {
        let within = if roots.is_empty() {
            "No workspace root is open: every path is refused.".to_owned()
        } else {
            format!(
                "Paths and working directories must be inside: {}.",
                roots.join(", ")
            )
        };
        // The six logical tools are core's (`deskwire::tools::builtin`, the one source of their
        // descriptions and schemas); `exec`, argv without a shell, is this server's extra.
        let (description, mut schema) = match self {
            Tool::Exec => (
                "Runs a program with arguments (no shell) on the current target host and \
                 returns its output and exit code. Output streams as progress while it runs."
                    .to_owned(),
                json!({"type": "object", "properties": {
                    "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                             "description": "The program and its arguments."},
                    "cwd": {"type": "string", "description": "Working directory (absolute, inside a root)."},
                    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Kill the command after this long."},
                    "stdin": {"type": "string", "description": "Text given to the command's stdin."}},
                    "required": ["argv"], "additionalProperties": false}),
            ),
            logical => {
                let spec = builtin::rexd_tools()
                    .into_iter()
                    .find(|spec| spec.name == logical.name())
                    .expect("every other tool is one of core's logical tools");
                (spec.description, spec.input_schema)
            }
        };
        let exec_hints = || json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true});
        let read_hints = || json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false});
        let (title, annotations) = match self {
            Tool::Bash => ("Run a shell command", exec_hints()),
            Tool::Exec => ("Run a program", exec_hints()),
            Tool::Read => ("Read a file", read_hints()),
            Tool::Write => (
                "Write a file",
                json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}),
            ),
            Tool::List => ("List a directory", read_hints()),
            Tool::Glob => ("Find files", read_hints()),
            Tool::Stat => ("Stat a path", read_hints()),
        };
        schema["additionalProperties"] = json!(false);
        let mut annotations = annotations;
        annotations["title"] = json!(title);
        json!({
            "name": self.name(),
            "title": title,
            "description": format!("{description} {within}"),
            "inputSchema": schema,
            "annotations": annotations,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecArgs {
    argv: Vec<String>,
    cwd: Option<String>,
    timeout_ms: Option<u64>,
    stdin: Option<String>,
}

/// Turns a tool's arguments into the REXD request that serves it.
fn tool_request(tool: Tool, session_id: &str, args: Value) -> Result<Request, String> {
    if tool != Tool::Exec {
        // Core routes the logical tools (`deskwire::tools::builtin::rexd_request`).
        let call = ToolCall::new("mcp", tool.name(), args);
        return builtin::rexd_request(&call, session_id).map_err(|e| match e {
            RouteError::EmptyCommand => e.to_string(),
            other => format!("bad arguments: {other}"),
        });
    }
    // Derived deserializers also take arrays (fields by position); MCP arguments are named.
    if !args.is_object() {
        return Err("bad arguments for exec: expected an object".to_owned());
    }
    let a: ExecArgs =
        serde_json::from_value(args).map_err(|e| format!("bad arguments for exec: {e}"))?;
    if a.argv.is_empty() {
        return Err("`argv` is empty".into());
    }
    Ok(Request::ExecStart(ExecStartParams {
        session_id: session_id.to_owned(),
        program: Program::Argv(a.argv),
        cwd: a.cwd,
        stdin: a.stdin,
        timeout_ms: a.timeout_ms,
        ..ExecStartParams::default()
    }))
}

/// A `CallToolResult`.
fn tool_result(text: String, structured: Option<Value>, is_error: bool) -> Value {
    let mut r = json!({
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
    });
    if let Some(s) = structured {
        r["structuredContent"] = s;
    }
    r
}

/// A refusal as a tool result the model can read (`forbidden_path (-32002): …`).
fn error_result(e: &ErrorObject) -> Value {
    let name = e
        .code_as::<deskwire::rexd::ErrorCode>()
        .map(|c| c.name())
        .unwrap_or("error");
    let mut text = format!("{name} ({}): {}", e.code, e.message);
    if let Some(d) = &e.data {
        text.push_str(&format!(" {}", d.get()));
    }
    tool_result(
        text,
        Some(json!({"error": {"code": e.code, "message": e.message, "data": e.data}})),
        true,
    )
}

/// The result of a file tool.
fn fs_result(response: Response) -> Value {
    let structured = serde_json::to_value(&response).ok();
    let text = match &response {
        Response::FsRead(r) => r.content.clone(),
        Response::FsWrite(r) => format!("wrote {} bytes to {}", r.bytes_written, r.path),
        Response::FsList(r) => r
            .entries
            .iter()
            .map(|e| {
                let slash = if e.kind == deskwire::rexd::FileType::Dir {
                    "/"
                } else {
                    ""
                };
                format!("{}{slash}\n", e.name)
            })
            .collect(),
        Response::FsGlob(r) => r.matches.iter().map(|m| format!("{m}\n")).collect(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    // The file's content is the text; the structured part keeps only the metadata.
    let structured = match (structured, &response) {
        (Some(Value::Object(mut m)), Response::FsRead(_)) => {
            m.remove("content");
            Some(Value::Object(m))
        }
        (s, _) => s,
    };
    tool_result(text, structured, false)
}

/// A `file://` URI's path (`file:///srv/app`, `file://localhost/srv/app`), percent-decoded.
pub fn file_uri_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// What a service call was made for.
#[derive(Debug)]
enum Pending {
    /// A tool call: answer the MCP request `id`.
    Tool {
        id: Id,
        tool: Tool,
        progress: Option<Value>,
        cancelled: bool,
    },
    /// The first session.
    SessionOpen,
    /// A session on the client's roots, replacing the current one.
    Reopen { roots: Vec<String> },
    /// Nobody waits for the answer (session.close, exec.kill).
    Ignore,
}

/// A command started by a tool call.
#[derive(Debug)]
struct Running {
    id: Id,
    session: String,
    progress: Option<Value>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    cap: usize,
    sent: u64,
    cancelled: bool,
}

impl Running {
    fn keep(&mut self, stderr: bool, bytes: &[u8]) {
        let cap = self.cap;
        let buf = if stderr {
            &mut self.stderr
        } else {
            &mut self.stdout
        };
        let room = cap.saturating_sub(buf.len());
        buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// The MCP side of the server: a JSON-RPC peer for the client and the translation onto a
/// [`Service`]. [`serve`] is its I/O loop.
#[derive(Debug)]
pub struct McpServer {
    peer: Peer<JsonRpc2>,
    service: Service,
    allow_shell: bool,
    output_cap: usize,
    session_id: Option<String>,
    roots: Vec<String>,
    client_roots: bool,
    next_handle: u64,
    pending: HashMap<u64, Pending>,
    /// Running commands by process id.
    running: HashMap<String, Running>,
    /// Tool calls in flight (MCP id → service handle or process id), for cancellation.
    calls: HashMap<Id, CallRef>,
    out: VecDeque<Vec<u8>>,
    peer_deadline: u64,
    /// Who the transport authenticated (MCP over `rexd --listen`), for the audit log.
    principal: Option<String>,
}

impl Frontend for McpServer {
    fn service(&mut self) -> &mut Service {
        &mut self.service
    }

    fn handle_input(&mut self, now: u64, bytes: &[u8]) {
        self.peer.handle_bytes(now, bytes);
    }

    fn turn(&mut self, now: u64, out: &mut Outbox) {
        self.process(now);
        for bytes in self.out.drain(..) {
            out.buffer().extend_from_slice(&bytes);
        }
    }

    /// The peer's or the service's next deadline.
    fn next_deadline(&mut self) -> Option<u64> {
        Some(match self.service.next_deadline() {
            Some(d) => d.min(self.peer_deadline),
            None => self.peer_deadline,
        })
    }

    fn has_work(&mut self) -> bool {
        self.service.wants_pump()
    }
}

#[derive(Debug, Clone)]
enum CallRef {
    Starting(u64),
    Process(String),
}

impl McpServer {
    /// A server on `service`. `allow_shell` and `output_cap` come from the same settings.
    pub fn new(service: Service, allow_shell: bool, output_cap: u64) -> McpServer {
        McpServer {
            peer: Peer::new(JsonRpc2, PeerConfig::default(), 1),
            service,
            allow_shell,
            output_cap: usize::try_from(output_cap).unwrap_or(usize::MAX),
            session_id: None,
            roots: Vec::new(),
            client_roots: false,
            next_handle: 0,
            pending: HashMap::new(),
            running: HashMap::new(),
            calls: HashMap::new(),
            out: VecDeque::new(),
            peer_deadline: 0,
            principal: None,
        }
    }

    /// Calls made as `principal` (the audit names it), for a transport that authenticated
    /// the client.
    pub fn with_principal(mut self, principal: Option<String>) -> McpServer {
        self.principal = principal;
        self
    }

    /// The tools offered now.
    pub fn tools(&self) -> Vec<Tool> {
        Tool::ALL
            .into_iter()
            .filter(|t| *t != Tool::Bash || self.allow_shell)
            .collect()
    }

    /// Runs everything that is ready: client messages to the service, service outputs to
    /// the client's queue (which [`Frontend::turn`] moves to the output).
    fn process(&mut self, now: u64) {
        loop {
            let mut progressed = false;
            loop {
                match self.peer.poll_output(now) {
                    Output::Transmit(bytes) => self.out.push_back(bytes),
                    Output::Event(event) => {
                        progressed = true;
                        self.on_peer_event(now, event);
                    }
                    Output::Timeout(deadline) => {
                        self.peer_deadline = deadline;
                        break;
                    }
                }
            }
            while let Some(o) = self.service.poll_output() {
                progressed = true;
                self.on_service_output(now, o);
            }
            if !progressed {
                return;
            }
        }
    }

    fn call_service(&mut self, now: u64, request: Request, pending: Pending) -> u64 {
        self.next_handle += 1;
        let handle = self.next_handle;
        self.pending.insert(handle, pending);
        self.service
            .call_from(now, handle, request, self.principal.as_deref());
        handle
    }

    fn respond(&mut self, now: u64, id: &Id, result: Value) {
        match RawJson::to_raw(&result) {
            Ok(raw) => {
                if let Err(e) = self.peer.respond(now, id, raw) {
                    crate::log::warn(&format!("mcp: answer to {id}: {e}"));
                }
            }
            Err(e) => self.respond_error(now, id, -32603, &e.to_string()),
        }
    }

    fn respond_error(&mut self, now: u64, id: &Id, code: i64, message: &str) {
        if let Err(e) =
            self.peer
                .respond_error(now, id, RemoteError::new(Code::Number(code), message))
        {
            crate::log::warn(&format!("mcp: error answer to {id}: {e}"));
        }
    }

    fn notify(&mut self, now: u64, method: &str, params: Option<Value>) {
        let params = params.and_then(|p| RawJson::to_raw(&p).ok());
        if let Err(e) = self.peer.notify(now, method, params) {
            crate::log::warn(&format!("mcp: {method}: {e}"));
        }
    }

    fn on_peer_event(&mut self, now: u64, event: PeerEvent) {
        match event {
            PeerEvent::Request { id, method, params } => {
                let params: Value = params
                    .and_then(|p| serde_json::from_str(p.get()).ok())
                    .unwrap_or(Value::Null);
                self.on_request(now, id, &method, params);
            }
            PeerEvent::Notification { method, params } => {
                let params: Value = params
                    .and_then(|p| serde_json::from_str(p.get()).ok())
                    .unwrap_or(Value::Null);
                self.on_notification(now, &method, params);
            }
            PeerEvent::Response { method, result, .. } if method == "roots/list" => {
                let roots: Vec<String> = serde_json::from_str::<Value>(result.get())
                    .ok()
                    .and_then(|v| v.get("roots").and_then(Value::as_array).cloned())
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|r| r.get("uri").and_then(Value::as_str))
                    .filter_map(file_uri_path)
                    .collect();
                self.reopen_on(now, roots);
            }
            PeerEvent::Failed { method, error, .. } => {
                crate::log::warn(&format!("mcp: our {method} failed: {error:?}"));
            }
            PeerEvent::Malformed { reason } => {
                crate::log::warn(&format!("mcp: malformed input: {reason}"));
            }
            _ => {}
        }
    }

    fn on_request(&mut self, now: u64, id: Id, method: &str, params: Value) {
        match method {
            "initialize" => {
                let asked = params["protocolVersion"].as_str().unwrap_or("");
                let version = PROTOCOL_VERSIONS
                    .into_iter()
                    .find(|v| *v == asked)
                    .unwrap_or(LATEST_PROTOCOL_VERSION);
                self.client_roots = params["capabilities"].get("roots").is_some();
                let client = params["clientInfo"]["name"]
                    .as_str()
                    .unwrap_or("mcp-client")
                    .to_owned();
                if self.session_id.is_none() {
                    self.open_session(now, client);
                }
                self.respond(
                    now,
                    &id,
                    json!({
                        "protocolVersion": version,
                        "capabilities": {"tools": {"listChanged": true}},
                        "serverInfo": {"name": "rexd", "title": "REXD remote execution", "version": env!("CARGO_PKG_VERSION")},
                        "instructions": "Run commands and edit files on the current target host. \
                                         Paths must be inside the workspace roots named in each tool's description."
                    }),
                );
            }
            "ping" => self.respond(now, &id, json!({})),
            "tools/list" => {
                let tools: Vec<Value> = self
                    .tools()
                    .into_iter()
                    .map(|t| t.definition(&self.roots))
                    .collect();
                self.respond(now, &id, json!({ "tools": tools }));
            }
            "tools/call" => self.on_tool_call(now, id, params),
            _ => {
                if let Err(e) = self.peer.respond_method_not_found(now, &id, method) {
                    crate::log::warn(&format!("mcp: {e}"));
                }
            }
        }
    }

    fn open_session(&mut self, now: u64, client: String) {
        let open = SessionOpenParams {
            client_name: client,
            ..SessionOpenParams::default()
        };
        self.call_service(now, Request::SessionOpen(open), Pending::SessionOpen);
        // session.open answers at once; take the answer now so the next call has the session.
        while let Some(o) = self.service.poll_output() {
            self.on_service_output(now, o);
        }
    }

    fn on_tool_call(&mut self, now: u64, id: Id, params: Value) {
        let name = params["name"].as_str().unwrap_or("");
        let Some(tool) = Tool::from_name(name).filter(|t| self.tools().contains(t)) else {
            return self.respond_error(now, &id, -32602, &format!("Unknown tool: {name}"));
        };
        if self.session_id.is_none() {
            self.open_session(now, "mcp-client".into());
        }
        let Some(session_id) = self.session_id.clone() else {
            let text = "the daemon could not open a session".to_owned();
            return self.respond(now, &id, tool_result(text, None, true));
        };
        let args = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(a) => a.clone(),
        };
        let request = match tool_request(tool, &session_id, args) {
            Ok(r) => r,
            Err(message) => return self.respond(now, &id, tool_result(message, None, true)),
        };
        let progress = params["_meta"].get("progressToken").cloned();
        let handle = self.call_service(
            now,
            request,
            Pending::Tool {
                id: id.clone(),
                tool,
                progress,
                cancelled: false,
            },
        );
        if tool.is_exec() {
            self.calls.insert(id, CallRef::Starting(handle));
        }
    }

    fn on_notification(&mut self, now: u64, method: &str, params: Value) {
        match method {
            "notifications/initialized" | "notifications/roots/list_changed" => {
                if self.client_roots
                    && let Err(e) = self.peer.call(now, "roots/list", None, 0)
                {
                    crate::log::warn(&format!("mcp: roots/list: {e}"));
                }
            }
            "notifications/cancelled" => {
                let Some(id) = params
                    .get("requestId")
                    .and_then(|v| serde_json::from_value::<Id>(v.clone()).ok())
                else {
                    return;
                };
                self.cancel(now, &id);
            }
            _ => {}
        }
    }

    /// `notifications/cancelled`: kill the command (if it is one) and never answer the call.
    fn cancel(&mut self, now: u64, id: &Id) {
        let Some(call) = self.calls.remove(id) else {
            return; // finished already, or not ours: races are expected and harmless
        };
        // As MCP asks, the cancelled request gets no answer; its slot in the peer is freed.
        let _ = self.peer.forget_incoming(id);
        match call {
            CallRef::Starting(handle) => {
                if let Some(Pending::Tool { cancelled, .. }) = self.pending.get_mut(&handle) {
                    *cancelled = true;
                }
            }
            CallRef::Process(process_id) => {
                if let Some(r) = self.running.get_mut(&process_id) {
                    r.cancelled = true;
                }
                self.kill(now, process_id);
            }
        }
    }

    fn kill(&mut self, now: u64, process_id: String) {
        if let Some(session_id) = self.session_id.clone() {
            let kill = ExecKillParams {
                session_id,
                process_id,
                signal: Signal::Kill,
            };
            self.call_service(now, Request::ExecKill(kill), Pending::Ignore);
        }
    }

    /// Opens a session on the client's roots; on success it replaces the current one and the
    /// client hears that the tools changed (their descriptions name the roots).
    fn reopen_on(&mut self, now: u64, roots: Vec<String>) {
        if roots.is_empty() || roots == self.roots {
            return;
        }
        let open = SessionOpenParams {
            client_name: "mcp-client".into(),
            workspace_roots: Some(roots.clone()),
            ..SessionOpenParams::default()
        };
        self.call_service(now, Request::SessionOpen(open), Pending::Reopen { roots });
    }

    /// Closes a replaced session. Its commands are killed with it and send no more events, so
    /// their calls are answered here.
    fn end_session(&mut self, now: u64, session_id: String) {
        let ended: Vec<String> = self
            .running
            .iter()
            .filter(|(_, r)| r.session == session_id)
            .map(|(pid, _)| pid.clone())
            .collect();
        for pid in ended {
            if let Some(r) = self.running.remove(&pid) {
                self.calls.remove(&r.id);
                if !r.cancelled {
                    let text = "stopped: the workspace roots changed, so the session was replaced";
                    self.respond(now, &r.id, tool_result(text.into(), None, true));
                }
            }
        }
        let close = SessionCloseParams { session_id };
        self.call_service(now, Request::SessionClose(close), Pending::Ignore);
    }

    fn on_service_output(&mut self, now: u64, output: ServiceOutput) {
        match output {
            ServiceOutput::Reply { handle, result } => {
                let Some(pending) = self.pending.remove(&handle) else {
                    return;
                };
                self.on_reply(now, pending, result);
            }
            ServiceOutput::Event(event) => self.on_event(now, event),
        }
    }

    fn on_reply(&mut self, now: u64, pending: Pending, result: Result<Response, ErrorObject>) {
        match pending {
            Pending::Ignore => {}
            Pending::SessionOpen => match result {
                Ok(Response::SessionOpen(r)) => {
                    self.session_id = Some(r.session_id);
                    self.roots = r.workspace_roots;
                }
                Ok(_) => crate::log::warn("mcp: session.open gave another result"),
                Err(e) => crate::log::warn(&format!("mcp: session.open: {}", e.message)),
            },
            Pending::Reopen { roots } => match result {
                Ok(Response::SessionOpen(r)) => {
                    if let Some(old) = self.session_id.replace(r.session_id) {
                        self.end_session(now, old);
                    }
                    self.roots = r.workspace_roots;
                    self.notify(now, "notifications/tools/list_changed", None);
                }
                Ok(_) => {}
                Err(e) => crate::log::warn(&format!(
                    "mcp: the client's roots {roots:?} are refused ({}); keeping {:?}",
                    e.message, self.roots
                )),
            },
            Pending::Tool {
                id,
                tool,
                progress,
                cancelled,
            } => {
                if tool.is_exec() {
                    self.calls.remove(&id);
                }
                match result {
                    Ok(Response::ExecStart(started)) => {
                        if cancelled {
                            self.kill(now, started.process_id);
                            return;
                        }
                        self.calls
                            .insert(id.clone(), CallRef::Process(started.process_id.clone()));
                        let session = self.session_id.clone().unwrap_or_default();
                        self.running.insert(
                            started.process_id,
                            Running {
                                id,
                                session,
                                progress,
                                stdout: Vec::new(),
                                stderr: Vec::new(),
                                cap: self.output_cap,
                                sent: 0,
                                cancelled: false,
                            },
                        );
                    }
                    _ if cancelled => {}
                    Ok(response) => self.respond(now, &id, fs_result(response)),
                    Err(e) => self.respond(now, &id, error_result(&e)),
                }
            }
        }
    }

    fn on_event(&mut self, now: u64, event: Event<'static>) {
        match event {
            Event::ExecStdout(o) => self.on_output(now, false, &o),
            Event::ExecStderr(o) => self.on_output(now, true, &o),
            Event::ExecExit(exit) => {
                let Some(r) = self.running.remove(&exit.process_id) else {
                    return;
                };
                self.calls.remove(&r.id);
                if r.cancelled {
                    return;
                }
                let stdout = String::from_utf8_lossy(&r.stdout).into_owned();
                let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
                let mut text = stdout.clone();
                if !stderr.is_empty() {
                    text.push_str(&format!("\n[stderr]\n{stderr}"));
                }
                if exit.timed_out {
                    text.push_str(&format!("\n[timed out after {} ms]", exit.duration_ms));
                } else if let Some(marker) = deskwire::oa1::remote_bash::exit_marker(
                    // The core's marker, as `RemoteBash` ends its output (`[exit code: N]`,
                    // `[signal: KILL]`); an exit without a code or a signal is -1, as before.
                    Some(exit.exit_code.unwrap_or(-1)),
                    exit.signal.as_deref(),
                ) {
                    text.push_str(&format!("\n{marker}"));
                }
                if exit.truncated {
                    text.push_str("\n[output truncated]");
                }
                let structured = json!({
                    "exit_code": exit.exit_code,
                    "signal": exit.signal,
                    "timed_out": exit.timed_out,
                    "truncated": exit.truncated,
                    "duration_ms": exit.duration_ms,
                    "stdout": stdout,
                    "stderr": stderr,
                });
                let failed = exit.exit_code != Some(0);
                self.respond(now, &r.id, tool_result(text, Some(structured), failed));
            }
            Event::ExecError(e) => {
                let Some(r) = self.running.remove(&e.process_id) else {
                    return;
                };
                self.calls.remove(&r.id);
                if !r.cancelled {
                    let text = format!("cannot run the command: {}", e.message);
                    self.respond(now, &r.id, tool_result(text, None, true));
                }
            }
            _ => {}
        }
    }

    /// Keeps a chunk of a command's output and reports it as progress.
    fn on_output(&mut self, now: u64, stderr: bool, o: &ExecOutput<'_>) {
        let Some(r) = self.running.get_mut(o.process_id.as_ref()) else {
            return;
        };
        let Ok(chunk) = o.bytes() else { return };
        r.keep(stderr, &chunk);
        r.sent += chunk.len() as u64;
        let Some(token) = r.progress.clone() else {
            return;
        };
        let total = r.sent;
        let mut cut = chunk.len().min(PROGRESS_MESSAGE_BYTES);
        while cut > 0 && cut < chunk.len() && (chunk[cut] & 0xc0) == 0x80 {
            cut -= 1; // never split a UTF-8 sequence
        }
        let message = String::from_utf8_lossy(&chunk[..cut]).into_owned();
        self.notify(
            now,
            "notifications/progress",
            Some(json!({"progressToken": token, "progress": total, "message": message})),
        );
    }
}

/// Serves MCP on the given descriptors (stdin/stdout for the binary) until the input ends and
/// the children have ended (or the kill grace passed).
pub fn serve(settings: Settings, input: RawFd, output: RawFd) -> io::Result<()> {
    serve_as(settings, input, output, None)
}

/// [`serve`] for a client the transport authenticated as `principal` (MCP over HTTP).
pub fn serve_as(
    settings: Settings,
    input: RawFd,
    output: RawFd,
    principal: Option<String>,
) -> io::Result<()> {
    let mut poll = Poll::new()?;
    let grace = settings.limits.kill_grace_ms;
    let allow_shell = settings.allow_shell;
    let cap = settings.limits.max_output_bytes;
    let mut service = Service::new(settings, poll.registry().try_clone()?);
    service.set_address(crate::ssh_client::address());
    let mut server = McpServer::new(service, allow_shell, cap).with_principal(principal);
    frontend::serve(&mut server, &mut poll, grace, input, output)
}

/// `rexd --mcp`: MCP on the process's own stdin and stdout, for `principal` (the audit's;
/// [`crate::ssh_client::principal`]); at the end the process's descendants that no exec's
/// tree claimed are killed.
pub fn serve_stdio(settings: Settings, principal: Option<String>) -> io::Result<()> {
    let (input, output) = (io::stdin().as_raw_fd(), io::stdout().as_raw_fd());
    let served = serve_as(settings, input, output, principal);
    crate::tree::kill_all_descendants();
    served
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_become_paths() {
        assert_eq!(
            file_uri_path("file:///srv/app").as_deref(),
            Some("/srv/app")
        );
        assert_eq!(
            file_uri_path("file://localhost/srv/my%20app").as_deref(),
            Some("/srv/my app")
        );
        for bad in [
            "http://x/srv",
            "file://host/srv",
            "file:///a%2",
            "file:///a%zz",
            "/srv",
        ] {
            assert_eq!(file_uri_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn tool_definitions_follow_the_mcp_rules() {
        let roots = vec!["/srv/app".to_owned()];
        for tool in Tool::ALL {
            let d = tool.definition(&roots);
            let name = d["name"].as_str().unwrap();
            assert!(
                (1..=128).contains(&name.len())
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
            );
            assert_eq!(Tool::from_name(name), Some(tool));
            assert_eq!(d["inputSchema"]["type"], "object");
            assert_eq!(d["inputSchema"]["additionalProperties"], false);
            assert!(d["description"].as_str().unwrap().contains("/srv/app"));
            let a = &d["annotations"];
            let read_only = a["readOnlyHint"].as_bool().unwrap();
            assert_eq!(
                read_only,
                matches!(tool, Tool::Read | Tool::List | Tool::Glob | Tool::Stat)
            );
            // Every required field is a declared property.
            for field in d["inputSchema"]["required"].as_array().unwrap() {
                assert!(d["inputSchema"]["properties"][field.as_str().unwrap()].is_object());
            }
        }
        assert!(
            Tool::Read.definition(&[])["description"]
                .as_str()
                .unwrap()
                .contains("every path is refused")
        );
    }

    #[test]
    fn arguments_are_checked_before_anything_runs() {
        for (tool, args) in [
            (Tool::Bash, json!({})),
            (Tool::Bash, json!({"command": ""})),
            (Tool::Bash, json!({"command": "ls", "rm": true})),
            (Tool::Exec, json!({"argv": []})),
            (Tool::Exec, json!({"argv": "ls"})),
            (Tool::Write, json!({"path": "/a"})),
            (
                Tool::Write,
                json!({"path": "/a", "content": "", "mode": "truncate"}),
            ),
            (Tool::Read, json!([1])),
            (Tool::Stat, json!(["/srv/app"])),
        ] {
            assert!(
                tool_request(tool, "s_1", args.clone()).is_err(),
                "{tool:?} {args}"
            );
        }
        let Ok(Request::ExecStart(p)) = tool_request(
            Tool::Bash,
            "s_1",
            json!({"command": "echo hi", "timeout_ms": 5}),
        ) else {
            panic!()
        };
        assert_eq!(
            (p.program, p.timeout_ms, p.session_id.as_str()),
            (Program::shell("echo hi"), Some(5), "s_1")
        );
    }

    #[test]
    fn refusals_are_results_the_model_can_read() {
        let e = ErrorObject::forbidden_path("/etc/passwd", &["/srv/app".into()]);
        let r = error_result(&e);
        assert_eq!(r["isError"], true);
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("forbidden_path (-32002): "), "{text}");
        assert!(text.contains("/etc/passwd"));
    }
}
