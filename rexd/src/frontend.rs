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
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::service::{PipedBytes, Service, SessionEnd, TOKEN_BASE};
use crate::sys;

/// Bytes waiting for the output above which neither input nor children's output is read.
pub const HIGH_WATER: usize = 4 << 20;
const INPUT: Token = Token(0);
const OUTPUT: Token = Token(1);
const SIGNAL: Token = Token(2);

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

/// Bytes for the output, as a queue of buffers written with `writev`: small lines are appended
/// to the last buffer ([`Outbox::buffer`]), large payloads go in as they are
/// ([`Outbox::push_owned`]), and nothing is copied again or moved up once queued. (One growing
/// buffer compacted after each partial write moved a slow reader's megabytes over and over:
/// 100 MiB of output cost rexd three more copies of it.) Output still in a command's pipe
/// ([`Outbox::push_piped`]) is moved with `splice(2)` when its turn comes, never copied
/// through the daemon.
#[derive(Debug)]
pub struct Outbox {
    chunks: std::collections::VecDeque<Chunk>,
    /// Bytes of the first buffer already written.
    written: usize,
    /// The last buffer was pushed whole: lines start a new one after it.
    last_sealed: bool,
    /// The output took splices so far (`false` once it refused one: the rest are read).
    splices: bool,
}

impl Default for Outbox {
    fn default() -> Self {
        Outbox {
            chunks: Default::default(),
            written: 0,
            last_sealed: false,
            splices: true,
        }
    }
}

/// One queued piece of output.
#[derive(Debug)]
enum Chunk {
    Bytes(Vec<u8>),
    /// Bytes still in a command's pipe.
    Piped(PipedBytes),
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
            Chunk::Piped(p) => p.len(),
        }
    }
}

/// The size a buffer of appended lines starts with; lines go to a new one past it.
const LINE_BUFFER: usize = 64 * 1024;
/// Buffers handed to one `writev` (Linux takes up to 1024).
const MAX_IOVECS: usize = 64;

impl Outbox {
    /// Bytes queued but not yet written.
    pub fn backlog(&self) -> usize {
        self.chunks.iter().map(Chunk::len).sum::<usize>() - self.written
    }

    /// Whether nothing waits to be written.
    pub fn is_empty(&self) -> bool {
        self.backlog() == 0
    }

    /// Whether the backlog reached [`HIGH_WATER`].
    pub fn is_full(&self) -> bool {
        self.backlog() >= HIGH_WATER
    }

    /// The buffer to append lines to (bytes already there stay untouched).
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        let fresh = match self.chunks.back() {
            Some(Chunk::Bytes(last)) => self.last_sealed || last.len() >= LINE_BUFFER,
            _ => true,
        };
        if fresh {
            self.chunks
                .push_back(Chunk::Bytes(Vec::with_capacity(LINE_BUFFER)));
            self.last_sealed = false;
        }
        match self.chunks.back_mut() {
            Some(Chunk::Bytes(b)) => b,
            _ => unreachable!("a buffer was pushed above"),
        }
    }

    /// Queues `bytes` as they are, after everything appended so far (a raw frame's payload).
    pub fn push_owned(&mut self, bytes: Vec<u8>) {
        if !bytes.is_empty() {
            self.chunks.push_back(Chunk::Bytes(bytes));
            self.last_sealed = true;
        }
    }

    /// Queues bytes still in a command's pipe, after everything appended so far: they are
    /// moved from the pipe to the output when their turn comes.
    pub fn push_piped(&mut self, bytes: PipedBytes) {
        if !bytes.is_empty() {
            self.chunks.push_back(Chunk::Piped(bytes));
            self.last_sealed = true;
        }
    }

    /// Writes as much as `sink` takes without blocking: the bytes written, `Err` when the
    /// sink is broken. Piped bytes are spliced to `fd`, `sink`'s descriptor (without one, or
    /// when it refuses a splice, they are read and written).
    fn write_to(&mut self, sink: &mut impl Write, fd: Option<BorrowedFd<'_>>) -> io::Result<usize> {
        let mut total = 0;
        let result = loop {
            while self.chunks.front().is_some_and(|c| c.len() == self.written) {
                self.chunks.pop_front();
                self.written = 0;
            }
            let Some(front) = self.chunks.front_mut() else {
                break Ok(());
            };
            if let Chunk::Piped(piped) = front {
                let moved = match fd.filter(|_| self.splices) {
                    Some(fd) => piped.splice_to(fd),
                    None => Err(io::ErrorKind::Unsupported.into()),
                };
                match moved {
                    Ok(n) => total += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // An output that takes no splice (a terminal, a file opened to append):
                    // these bytes and all later ones are read and written.
                    Err(e)
                        if e.kind() == io::ErrorKind::Unsupported
                            || matches!(
                                e.raw_os_error(),
                                Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)
                            ) =>
                    {
                        self.splices = false;
                        match piped.read_rest() {
                            Ok(bytes) => *front = Chunk::Bytes(bytes),
                            Err(e) => break Err(e),
                        }
                    }
                    Err(e) => break Err(e),
                }
                continue;
            }
            let mut slices = [io::IoSlice::new(&[]); MAX_IOVECS];
            let mut count = 0;
            for (i, chunk) in self.chunks.iter().take(MAX_IOVECS).enumerate() {
                let Chunk::Bytes(chunk) = chunk else {
                    break;
                };
                let from = if i == 0 { self.written } else { 0 };
                slices[count] = io::IoSlice::new(&chunk[from..]);
                count += 1;
            }
            match sink.write_vectored(&slices[..count]) {
                Ok(n) => {
                    total += n;
                    self.advance(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        if result.is_err() {
            self.chunks.clear();
            self.written = 0;
        }
        result.map(|()| total)
    }

    /// `n` more bytes were written.
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.chunks.front() else {
                return;
            };
            let left = front.len() - self.written;
            if n < left {
                self.written += n;
                return;
            }
            n -= left;
            self.chunks.pop_front();
            self.written = 0;
        }
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

    let mut out = Outbox::default();
    let mut events = Events::with_capacity(256);
    let mut inbuf = vec![0u8; 64 * 1024];
    let clock = Instant::now();
    let now_ms = || clock.elapsed().as_millis() as u64;
    let mut input_open = true;
    let mut input_ready = true;
    let mut output_broken = false;
    let mut shutdown_deadline: Option<u64> = None;
    // The end of the input (or of our output) is the client going away; a signal, a stop.
    let mut end_cause = SessionEnd::Disconnected;

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
            frontend.service().shutdown(now, end_cause);
            shutdown_deadline = Some(now + kill_grace_ms + 1000);
        }
        // 2. Requests in, replies and events out, in order.
        let room = HIGH_WATER.saturating_sub(out.backlog());
        frontend.service().pump(now, room);
        frontend.service().handle_timeout(now);
        frontend.turn(now, &mut out);
        // 3. Output.
        if !output_broken {
            match out.write_to(&mut *output_file, Some(out_fd.as_fd())) {
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
                        end_cause = SessionEnd::Shutdown;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe that takes at most `room` bytes per call, then would block every other call.
    struct Trickle {
        got: Vec<u8>,
        room: usize,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[io::IoSlice::new(buf)])
        }
        fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls.is_multiple_of(2) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.room - n);
                self.got.extend_from_slice(&b[..take]);
                n += take;
            }
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Lines appended and payloads pushed whole come out in order, whatever the sink takes
    /// per call, and the backlog counts what is left.
    #[test]
    fn lines_and_owned_payloads_come_out_in_order_through_partial_writes() {
        let mut out = Outbox::default();
        let mut want = Vec::new();
        for i in 0..200u32 {
            let line = format!("{{\"line\":{i}}}\n");
            out.buffer().extend_from_slice(line.as_bytes());
            want.extend_from_slice(line.as_bytes());
            if i % 7 == 0 {
                let payload: Vec<u8> = (0..i * 977).map(|b| b as u8).collect();
                want.extend_from_slice(&payload);
                out.push_owned(payload);
            }
        }
        assert_eq!(out.backlog(), want.len());
        for room in [7, 13, 4096, 70_000] {
            let mut copy = Outbox::default();
            copy.buffer().extend_from_slice(&want);
            let mut sink = Trickle {
                got: Vec::new(),
                room,
                calls: 0,
            };
            while !copy.is_empty() {
                copy.write_to(&mut sink, None).unwrap();
            }
            assert!(sink.got == want, "room {room}");
        }
        let mut sink = Trickle {
            got: Vec::new(),
            room: 1000,
            calls: 0,
        };
        let mut rounds = 0;
        while !out.is_empty() {
            let before = out.backlog();
            let n = out.write_to(&mut sink, None).unwrap();
            assert_eq!(out.backlog(), before - n);
            // Lines appended meanwhile go after what is queued.
            if rounds == 3 {
                out.buffer().extend_from_slice(b"late\n");
                want.extend_from_slice(b"late\n");
            }
            rounds += 1;
        }
        assert!(
            sink.got == want,
            "{} of {} bytes",
            sink.got.len(),
            want.len()
        );
        assert!(out.chunks.is_empty());
    }
}
