//! `rexd --stdio`: NDJSON JSON-RPC 2.0 on stdin/stdout (also what `ssh host rexd --stdio`
//! runs), one mio loop for stdin, stdout, the children's pipes and the timers.
//!
//! The JSON-RPC side is the core's [`Peer`] in the [`JsonRpc2`] dialect (framing, ids,
//! malformed input answered with the standard errors); requests become typed
//! [`Request`]s and go to the [`Service`]; replies go back through the peer, events are written
//! as notification lines in the order the service produced them. Stdout is the protocol only:
//! diagnostics and the audit log go to stderr or a file.
//!
//! Backpressure: while more than [`HIGH_WATER`] bytes wait to be written to stdout, children's
//! output is not read, so a slow client slows the children (their pipes fill) instead of the
//! daemon's memory growing.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use deskwire::jsonrpc::{Code, Id, JsonRpc2, Output, Peer, PeerConfig, PeerEvent, RemoteError};
use deskwire::rexd::{ErrorObject, Request};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::service::{Service, ServiceOutput, Settings, TOKEN_BASE};
use crate::sys;

/// Bytes waiting for stdout above which children's output is left in their pipes.
pub const HIGH_WATER: usize = 4 << 20;
const STDIN: Token = Token(0);
const STDOUT: Token = Token(1);

/// Turns a REXD error object into the peer's error.
pub fn remote_error(e: ErrorObject) -> RemoteError {
    let e: deskwire::jsonrpc::ErrorObject = e.into();
    RemoteError {
        code: Code::Number(e.code),
        message: e.message,
        data: e.data,
    }
}

/// Serves JSON-RPC on the given descriptors (stdin/stdout for the binary) until the input ends
/// and the attached children have ended (or the kill grace passed).
pub fn serve(settings: Settings, input: RawFd, output: RawFd) -> io::Result<()> {
    let mut poll = Poll::new()?;
    let grace = settings.limits.kill_grace_ms;
    let mut service = Service::new(settings, poll.registry().try_clone()?);
    // SAFETY: the caller keeps both descriptors open for the duration of the call.
    let (in_fd, out_fd) = unsafe {
        (
            BorrowedFd::borrow_raw(input),
            BorrowedFd::borrow_raw(output),
        )
    };
    sys::set_nonblocking(in_fd)?;
    sys::set_nonblocking(out_fd)?;
    // Regular files cannot be polled (EPERM): they are always ready, so read them anyway.
    let input_pollable = poll
        .registry()
        .register(&mut SourceFd(&input), STDIN, Interest::READABLE)
        .is_ok();
    let output_pollable = poll
        .registry()
        .register(&mut SourceFd(&output), STDOUT, Interest::WRITABLE)
        .is_ok();
    let mut stdin = std::mem::ManuallyDrop::new(file(input));
    let mut stdout = std::mem::ManuallyDrop::new(file(output));

    let mut peer = Peer::new(JsonRpc2, PeerConfig::default(), 1);
    let mut pending: HashMap<u64, Id> = HashMap::new();
    let mut next_handle = 0u64;
    let mut out: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut written = 0usize;
    let mut events = Events::with_capacity(256);
    let mut inbuf = vec![0u8; 64 * 1024];
    let clock = Instant::now();
    let now_ms = || clock.elapsed().as_millis() as u64;
    let mut input_open = true;
    let mut input_ready = true;
    let mut output_broken = false;
    let mut shutdown_deadline: Option<u64> = None;

    loop {
        let now = now_ms();
        // 1. Input, unless the client is not reading our output: then its requests wait in
        //    the pipe (it cannot make the daemon buffer without bound).
        while input_open && input_ready && out.len() - written < HIGH_WATER {
            match stdin.read(&mut inbuf) {
                Ok(0) => input_open = false,
                Ok(n) => {
                    peer.handle_bytes(now, &inbuf[..n]);
                    if !input_pollable {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => input_ready = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => input_open = false,
            }
        }
        if !input_open && shutdown_deadline.is_none() {
            service.shutdown(now);
            shutdown_deadline = Some(now + grace + 1000);
        }
        // 2. Requests in, replies and events out, in order.
        let room = HIGH_WATER.saturating_sub(out.len() - written);
        service.pump(now, room);
        service.handle_timeout(now);
        let mut peer_deadline = drain_peer(
            &mut peer,
            now,
            &mut out,
            written,
            &mut service,
            &mut pending,
            &mut next_handle,
        );
        loop {
            let Some(o) = service.poll_output() else {
                // A request without an immediate reply (exec.wait): take the next one.
                if peer_deadline.is_none() && out.len() - written < HIGH_WATER {
                    peer_deadline = drain_peer(
                        &mut peer,
                        now,
                        &mut out,
                        written,
                        &mut service,
                        &mut pending,
                        &mut next_handle,
                    );
                    if service_idle_after(&peer_deadline, &service) {
                        break;
                    }
                    continue;
                }
                break;
            };
            match o {
                ServiceOutput::Reply { handle, result } => {
                    if let Some(id) = pending.remove(&handle) {
                        let sent = match result {
                            // Results are written once, straight into the output buffer (an
                            // fs.read of megabytes would otherwise be copied three times on its
                            // way through the peer); the peer only forgets the request.
                            Ok(response) => peer.forget_incoming(&id).map(|()| {
                                response.write_line(&id, &mut out);
                                out.push(b'\n');
                            }),
                            Err(e) => peer.respond_error(now, &id, remote_error(e)),
                        };
                        if let Err(e) = sent {
                            crate::log::warn(&format!("reply to {id}: {e}"));
                        }
                    }
                    peer_deadline = drain_peer(
                        &mut peer,
                        now,
                        &mut out,
                        written,
                        &mut service,
                        &mut pending,
                        &mut next_handle,
                    );
                }
                ServiceOutput::Event(event) => {
                    event.write_notification(&mut out);
                    out.push(b'\n');
                }
            }
        }
        // 3. Output.
        while written < out.len() && !output_broken {
            match stdout.write(&out[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => output_broken = true,
            }
        }
        if written == out.len() || output_broken {
            out.clear();
            written = 0;
        } else if written > (1 << 20) {
            out.drain(..written);
            written = 0;
        }
        if output_broken && input_open {
            // Nobody reads us any more: same as the client going away.
            input_open = false;
            continue;
        }
        // 4. Done?
        if let Some(deadline) = shutdown_deadline
            && ((service.running_attached() == 0 && out.is_empty()) || now >= deadline)
        {
            return Ok(());
        }
        // 5. Wait.
        let mut wake = service.next_deadline();
        if let Some(t) = peer_deadline {
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        if let Some(d) = shutdown_deadline {
            wake = Some(wake.map_or(d, |w| w.min(d)));
        }
        let backlog = out.len() - written;
        let busy = ((service.wants_pump() || peer_deadline.is_none()) && backlog < HIGH_WATER)
            || (!input_pollable && input_open)
            || (!output_pollable && backlog > 0);
        let timeout = if busy {
            Some(Duration::ZERO)
        } else {
            wake.map(|w| Duration::from_millis(w.saturating_sub(now)))
        };
        match poll.poll(&mut events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        let now = now_ms();
        for e in events.iter() {
            match e.token() {
                STDIN => input_ready = true,
                STDOUT => {}
                t if t.0 >= TOKEN_BASE => service.handle_event(
                    now,
                    t,
                    e.is_readable() || e.is_read_closed() || e.is_error(),
                    e.is_writable() || e.is_write_closed(),
                ),
                _ => {}
            }
        }
    }
}

/// Moves the peer's output: bytes to `out`, and the next request to the service. Returns the
/// peer's deadline once it is drained, `None` after handing over a request (call again after
/// its reply) or while `out` holds [`HIGH_WATER`] bytes not yet written (requests then wait in
/// the peer until the client reads).
fn drain_peer(
    peer: &mut Peer<JsonRpc2>,
    now: u64,
    out: &mut Vec<u8>,
    written: usize,
    service: &mut Service,
    pending: &mut HashMap<u64, Id>,
    next_handle: &mut u64,
) -> Option<u64> {
    loop {
        if out.len() - written >= HIGH_WATER {
            return None;
        }
        match peer.poll_output(now) {
            Output::Transmit(bytes) => out.extend_from_slice(&bytes),
            Output::Event(PeerEvent::Request { id, method, params }) => {
                match Request::parse(&method, params.as_ref().map(|p| p.as_raw())) {
                    Ok(request) => {
                        *next_handle += 1;
                        pending.insert(*next_handle, id);
                        service.call(now, *next_handle, request);
                        // One request at a time: its reply goes to `out` before the next is
                        // taken, so the high-water check above sees what is waiting.
                        return None;
                    }
                    Err(e) => {
                        let _ = peer.respond_error(now, &id, remote_error(e.to_error_object()));
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
            Output::Timeout(t) => return Some(t),
        }
    }
}

/// Whether the loop over service outputs can stop: the peer is drained or the service has
/// nothing queued.
fn service_idle_after(peer_deadline: &Option<u64>, service: &Service) -> bool {
    peer_deadline.is_some() && !service.has_output()
}

fn file(fd: RawFd) -> std::fs::File {
    use std::os::fd::FromRawFd;
    // SAFETY: wrapped in ManuallyDrop by the caller: the descriptor stays the caller's.
    unsafe { std::fs::File::from_raw_fd(fd) }
}

/// The process's own stdin and stdout.
pub fn serve_stdio(settings: Settings) -> io::Result<()> {
    serve(settings, io::stdin().as_raw_fd(), io::stdout().as_raw_fd())
}
