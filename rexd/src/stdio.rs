//! `rexd --stdio`: NDJSON JSON-RPC 2.0 on stdin/stdout (also what `ssh host rexd --stdio`
//! runs), one mio loop for stdin, stdout, the children's pipes and the timers.
//!
//! The JSON-RPC side is the core's [`Peer`] in the [`JsonRpc2`] dialect (framing, ids,
//! malformed input answered with the standard errors, a batch answered with one array);
//! requests become typed [`Request`]s and go to the [`Service`]; replies go back through the
//! peer, events are written as notification lines in the order the service produced them. Stdout is the protocol only:
//! diagnostics and the audit log go to stderr or a file.
//!
//! The I/O loop (backpressure, shutdown) is [`crate::frontend`]'s, shared with `rexd --mcp`.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use deskwire::jsonrpc::{
    Code, ErrorCode, Id, JsonRpc2, Output, Peer, PeerConfig, PeerEvent, RawJson, RemoteError,
};
use deskwire::rexd::{ErrorObject, Request, Response};
use mio::Poll;

use crate::frontend::{self, Frontend, Outbox};
use crate::service::{Frame, Service, ServiceOutput, Settings};

/// Turns a REXD error object into the peer's error.
pub fn remote_error(e: ErrorObject) -> RemoteError {
    RemoteError {
        code: Code::Number(e.code),
        message: e.message,
        data: e.data,
    }
}

/// Serves JSON-RPC on the given descriptors (stdin/stdout for the binary) until the input ends
/// and the children have ended (or the kill grace passed).
pub fn serve(settings: Settings, input: RawFd, output: RawFd) -> io::Result<()> {
    serve_as(settings, input, output, None)
}

/// [`serve`], every call made as `principal` (the audit's, and `[[policy.clients]]`'s).
pub fn serve_as(
    settings: Settings,
    input: RawFd,
    output: RawFd,
    principal: Option<String>,
) -> io::Result<()> {
    let mut poll = Poll::new()?;
    let grace = settings.limits.kill_grace_ms;
    let mut service = Service::new(settings, poll.registry().try_clone()?);
    // Every answer below goes out as a frame on the byte stream (raw `fs.read` bytes after
    // their line), so raw frames may be granted.
    service.set_raw_transport(true);
    // Raw output without compression stays in the command's pipe until its turn to be
    // written, then moves to our output with splice(2), uncopied.
    service.set_pipe_output(true);
    // Under `ssh host rexd --stdio`, the audit names where the ssh client connects from.
    service.set_address(crate::ssh_client::address());
    let mut frontend = JsonRpcFrontend {
        service,
        peer: Peer::new(JsonRpc2, PeerConfig::default(), 1),
        pending: HashMap::new(),
        principal,
        next_handle: 0,
        peer_deadline: None,
    };
    frontend::serve(&mut frontend, &mut poll, grace, input, output)
}

/// REXD requests from the peer to the service, its replies back through the peer and its
/// events as notification lines.
struct JsonRpcFrontend {
    service: Service,
    peer: Peer<JsonRpc2>,
    /// Service handles of the requests in flight, and their JSON-RPC ids.
    pending: HashMap<u64, Id>,
    /// Who the calls are made as (`--principal`, or the ssh user and key).
    principal: Option<String>,
    next_handle: u64,
    /// The peer's deadline once drained; `None` after a request was handed over (call again
    /// after its reply) or while the output is full.
    peer_deadline: Option<u64>,
}

impl Frontend for JsonRpcFrontend {
    fn service(&mut self) -> &mut Service {
        &mut self.service
    }

    fn handle_input(&mut self, now: u64, bytes: &[u8]) {
        self.peer.handle_bytes(now, bytes);
    }

    fn turn(&mut self, now: u64, out: &mut Outbox) {
        self.drain_peer(now, out);
        loop {
            let Some(o) = self.service.poll_frame() else {
                // A request without an immediate reply (exec.wait): take the next one.
                if self.peer_deadline.is_none() && !out.is_full() {
                    self.drain_peer(now, out);
                    if self.peer_deadline.is_some() && !self.service.has_output() {
                        break;
                    }
                    continue;
                }
                break;
            };
            match o {
                Frame::Output(ServiceOutput::Reply { handle, result }) => {
                    if let Some(id) = self.pending.remove(&handle) {
                        let sent = match result {
                            // An answer inside a batch joins the batch's array: the peer
                            // writes it, and a raw read's bytes go in its string instead.
                            Ok(response) if self.peer.is_batched(&id) => {
                                let response = match response {
                                    Response::FsRead(r) => Response::FsRead(r.into_string_form()),
                                    other => other,
                                };
                                match RawJson::to_raw(&response) {
                                    Ok(raw) => self.peer.respond(now, &id, raw),
                                    Err(e) => self.peer.respond_error(
                                        now,
                                        &id,
                                        RemoteError::new(
                                            Code::Number(ErrorCode::InternalError.code()),
                                            e.to_string(),
                                        ),
                                    ),
                                }
                            }
                            // Results are written once, straight into the output buffer (an
                            // fs.read of megabytes would otherwise be copied three times on its
                            // way through the peer); the peer only forgets the request. A raw
                            // read's bytes are queued as they are right after its line, so no
                            // event comes between them.
                            Ok(mut response) => self.peer.forget_incoming(&id).map(|()| {
                                let buf = out.buffer();
                                response.write_line(&id, buf);
                                buf.push(b'\n');
                                if let Response::FsRead(r) = &mut response
                                    && r.raw_bytes.is_some()
                                {
                                    out.push_owned(std::mem::take(&mut r.raw));
                                }
                            }),
                            Err(e) => self.peer.respond_error(now, &id, remote_error(e)),
                        };
                        if let Err(e) = sent {
                            crate::log::warn(&format!("reply to {id}: {e}"));
                        }
                    }
                    self.drain_peer(now, out);
                }
                // An event in a session with raw output has its bytes queued right after its
                // line, as they are.
                Frame::Output(ServiceOutput::Event(mut event)) => {
                    let buf = out.buffer();
                    event.write_notification(buf);
                    buf.push(b'\n');
                    if let Some(raw) = event.take_raw_payload() {
                        out.push_owned(raw);
                    }
                }
                // The same, its bytes moved from the command's pipe when their turn comes.
                Frame::Piped(piped) => {
                    let buf = out.buffer();
                    piped.event.write_notification(buf);
                    buf.push(b'\n');
                    out.push_piped(piped.bytes);
                }
            }
        }
    }

    fn next_deadline(&mut self) -> Option<u64> {
        match (self.service.next_deadline(), self.peer_deadline) {
            (Some(s), Some(p)) => Some(s.min(p)),
            (s, p) => s.or(p),
        }
    }

    fn has_work(&mut self) -> bool {
        self.service.wants_pump() || self.peer_deadline.is_none()
    }
}

impl JsonRpcFrontend {
    /// Moves the peer's output: bytes to `out`, and the next request to the service. Sets
    /// `peer_deadline` once the peer is drained; leaves it `None` after handing over a request
    /// (call again after its reply) or while `out` is full (requests then wait in the peer
    /// until the client reads).
    fn drain_peer(&mut self, now: u64, out: &mut Outbox) {
        self.peer_deadline = None;
        loop {
            if out.is_full() {
                return;
            }
            match self.peer.poll_output(now) {
                Output::Transmit(bytes) => out.buffer().extend_from_slice(&bytes),
                Output::Event(PeerEvent::Request { id, method, params }) => {
                    match Request::parse(&method, params.as_ref().map(|p| p.as_raw())) {
                        Ok(request) => {
                            self.next_handle += 1;
                            self.pending.insert(self.next_handle, id);
                            let principal = self.principal.as_deref();
                            self.service
                                .call_from(now, self.next_handle, request, principal);
                            // One request at a time: its reply goes to `out` before the next
                            // is taken, so the high-water check above sees what is waiting.
                            return;
                        }
                        Err(e) => {
                            let _ = self.peer.respond_error(
                                now,
                                &id,
                                remote_error(e.to_error_object()),
                            );
                        }
                    }
                }
                Output::Event(PeerEvent::Notification { method, .. }) => {
                    crate::log::debug(&format!("ignored notification {method}"));
                }
                Output::Event(PeerEvent::Malformed { reason }) => {
                    crate::log::warn(&format!("malformed input: {reason}"));
                }
                Output::Event(_) => {}
                Output::Timeout(t) => {
                    self.peer_deadline = Some(t);
                    return;
                }
            }
        }
    }
}

/// The process's own stdin and stdout, for `principal` ([`crate::ssh_client::principal`]).
/// When the client is gone the process's own descendants are gone too: what no exec's tree
/// claimed is killed here.
pub fn serve_stdio(settings: Settings, principal: Option<String>) -> io::Result<()> {
    let (input, output) = (io::stdin().as_raw_fd(), io::stdout().as_raw_fd());
    let served = serve_as(settings, input, output, principal);
    crate::tree::kill_all_descendants();
    served
}
