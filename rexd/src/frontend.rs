//! The one I/O loop behind `rexd --stdio` and `rexd --mcp`: client bytes from an input
//! descriptor, lines to an output descriptor, the [`Service`]'s children and timers, all on one
//! mio poll.
//!
//! What differs between the frontends is only how client bytes become [`Service`] calls and
//! how the service's replies and events become lines: that is the [`Frontend`] trait. The loop
//! owns the rest, the same for every frontend:
//! - **Backpressure**: while more than [`HIGH_WATER`] bytes wait to be written, neither input
//!   nor children's output is read, so a slow client slows the children (their pipes fill) and
//!   its own requests wait in the pipe instead of the daemon's memory growing.
//! - **Shutdown**: at the end of the input, on `SIGTERM`, `SIGINT` or `SIGHUP` (or once the
//!   output is broken: nobody reads us) the
//!   service ends its children, detached ones too; the loop returns when they are gone and the
//!   output is written, or after the kill grace (dropping the service kills what is left).

use std::io::{self, Read, Write};
use std::os::fd::{BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::service::{Service, TOKEN_BASE};
use crate::sys;

/// Bytes waiting for the output above which neither input nor children's output is read.
pub const HIGH_WATER: usize = 4 << 20;
const INPUT: Token = Token(0);
const OUTPUT: Token = Token(1);
const SIGNAL: Token = Token(2);
/// Written bytes kept at the front of the buffer before it is compacted.
const COMPACT_AFTER: usize = 1 << 20;

/// What a frontend adds to the loop: its protocol between the client's bytes and the service.
pub trait Frontend {
    /// The service the frontend calls (the loop pumps it and feeds it poll events).
    fn service(&mut self) -> &mut Service;
    /// Bytes the client sent.
    fn handle_input(&mut self, now: u64, bytes: &[u8]);
    /// Moves what is ready: client messages to the service, the service's outputs as lines to
    /// `out`. May stop early while `out` holds [`HIGH_WATER`] bytes not yet written.
    fn turn(&mut self, now: u64, out: &mut Outbox);
    /// When to call [`Frontend::turn`] again if nothing arrives (valid after a turn).
    fn next_deadline(&mut self) -> Option<u64>;
    /// Whether another turn has work without waiting for input or a deadline.
    fn has_work(&mut self) -> bool;
}

/// Bytes for the output: what is written is kept at the front until the buffer is compacted.
#[derive(Debug, Default)]
pub struct Outbox {
    buf: Vec<u8>,
    written: usize,
}

impl Outbox {
    /// Bytes appended but not yet written.
    pub fn backlog(&self) -> usize {
        self.buf.len() - self.written
    }

    /// Whether nothing waits to be written.
    pub fn is_empty(&self) -> bool {
        self.backlog() == 0
    }

    /// Whether the backlog reached [`HIGH_WATER`].
    pub fn is_full(&self) -> bool {
        self.backlog() >= HIGH_WATER
    }

    /// The buffer to append to (bytes already there stay untouched).
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Writes as much as `sink` takes without blocking: the bytes written, `Err` when the
    /// sink is broken.
    fn write_to(&mut self, sink: &mut impl Write) -> io::Result<usize> {
        let mut total = 0;
        let result = loop {
            if self.written == self.buf.len() {
                break Ok(());
            }
            match sink.write(&self.buf[self.written..]) {
                Ok(n) => {
                    self.written += n;
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        if self.written == self.buf.len() || result.is_err() {
            self.buf.clear();
            self.written = 0;
        } else if self.written > COMPACT_AFTER {
            self.buf.drain(..self.written);
            self.written = 0;
        }
        result.map(|()| total)
    }
}

/// Waits on `poll`; `Ok(false)` when a signal interrupted the wait (nothing to handle).
pub fn wait(poll: &mut Poll, events: &mut Events, timeout: Option<Duration>) -> io::Result<bool> {
    match poll.poll(events, timeout) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e),
    }
}

/// The readiness a child's pipe event means to [`Service::handle_event`]-like owners:
/// `(readable, writable)`, with a closed or failed end counted as ready (the read or write
/// then reports it).
pub fn child_readiness(e: &Event) -> (bool, bool) {
    (
        e.is_readable() || e.is_read_closed() || e.is_error(),
        e.is_writable() || e.is_write_closed(),
    )
}

/// Whether a poll token belongs to a child's pipe (the service's tokens).
pub fn is_child_token(t: Token) -> bool {
    t.0 >= TOKEN_BASE
}

/// Runs `frontend` on the given descriptors until the input ends and the children have
/// ended (or `kill_grace_ms` after the end of input passed).
pub fn serve(
    frontend: &mut impl Frontend,
    poll: &mut Poll,
    kill_grace_ms: u64,
    input: RawFd,
    output: RawFd,
) -> io::Result<()> {
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
        .register(&mut SourceFd(&input), INPUT, Interest::READABLE)
        .is_ok();
    let output_pollable = poll
        .registry()
        .register(&mut SourceFd(&output), OUTPUT, Interest::WRITABLE)
        .is_ok();
    // A daemon told to stop ends its processes first, as when its client goes away.
    let mut signals =
        signal_hook_mio::v1_0::Signals::new([libc::SIGTERM, libc::SIGINT, libc::SIGHUP])?;
    poll.registry()
        .register(&mut signals, SIGNAL, Interest::READABLE)?;
    let mut input_file = std::mem::ManuallyDrop::new(file(input));
    let mut output_file = std::mem::ManuallyDrop::new(file(output));

    let mut out = Outbox {
        buf: Vec::with_capacity(1 << 16),
        written: 0,
    };
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
        while input_open && input_ready && !out.is_full() {
            match input_file.read(&mut inbuf) {
                Ok(0) => input_open = false,
                Ok(n) => {
                    frontend.service().metrics().bytes("in", n);
                    frontend.handle_input(now, &inbuf[..n]);
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
            frontend.service().shutdown(now);
            shutdown_deadline = Some(now + kill_grace_ms + 1000);
        }
        // 2. Requests in, replies and events out, in order.
        let room = HIGH_WATER.saturating_sub(out.backlog());
        frontend.service().pump(now, room);
        frontend.service().handle_timeout(now);
        frontend.turn(now, &mut out);
        // 3. Output.
        if !output_broken {
            match out.write_to(&mut *output_file) {
                Ok(n) => frontend.service().metrics().bytes("out", n),
                Err(_) => output_broken = true,
            }
        }
        if output_broken && input_open {
            // Nobody reads us any more: same as the client going away.
            input_open = false;
            continue;
        }
        // 4. Done?
        if let Some(deadline) = shutdown_deadline
            && ((frontend.service().running() == 0 && out.is_empty()) || now >= deadline)
        {
            return Ok(());
        }
        // 5. Wait.
        let mut wake = frontend.next_deadline();
        if let Some(d) = shutdown_deadline {
            wake = Some(wake.map_or(d, |w| w.min(d)));
        }
        let busy = (frontend.has_work() && !out.is_full())
            || (!input_pollable && input_open)
            || (!output_pollable && !out.is_empty());
        let timeout = if busy {
            Some(Duration::ZERO)
        } else {
            wake.map(|w| Duration::from_millis(w.saturating_sub(now)))
        };
        if !wait(poll, &mut events, timeout)? {
            continue;
        }
        let now = now_ms();
        for e in events.iter() {
            match e.token() {
                INPUT => input_ready = true,
                SIGNAL => {
                    for signal in signals.pending() {
                        crate::log::info(&format!(
                            "{}: ending every process, then exiting",
                            sys::signal_name(signal)
                        ));
                        input_open = false;
                    }
                }
                t if is_child_token(t) => {
                    let (readable, writable) = child_readiness(e);
                    frontend.service().handle_event(now, t, readable, writable);
                }
                _ => {}
            }
        }
    }
}

fn file(fd: RawFd) -> std::fs::File {
    use std::os::fd::FromRawFd;
    // SAFETY: wrapped in ManuallyDrop by the caller: the descriptor stays the caller's.
    unsafe { std::fs::File::from_raw_fd(fd) }
}
