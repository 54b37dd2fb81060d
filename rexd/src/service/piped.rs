//! Raw output left in the command's pipe: in a session with raw output and no compression, a
//! host that writes to a descriptor (`rexd --stdio`) gets an output event's bytes as
//! [`PipedBytes`], which it moves from the command's pipe to its own output after the event's
//! line with `splice(2)`. The bytes are never copied through the daemon (a read and a write
//! each copied them once, and the event another time), which is what keeps `rex exec` of a
//! fast command at ssh's speed.
//!
//! The event's `raw_bytes` is what the pipe holds when the event is made (`FIONREAD`), and
//! nobody else reads that pipe, so exactly those bytes are there to move. Until they are moved,
//! the stream is *lent*: the service does not read it, so its next event (or its end, then
//! `exec.exit`) cannot overtake them.

use super::*;

/// Bytes of an output event still in the command's pipe: as many as its `raw_bytes`, to be
/// written right after its line ([`PipedBytes::splice_to`], or [`PipedBytes::read_rest`]).
/// The stream is not read again until this is dropped, so nothing of it can overtake them.
#[derive(Debug)]
pub struct PipedBytes {
    /// A duplicate of the pipe's read end: the bytes stay readable even once the service closes
    /// its own end.
    pipe: OwnedFd,
    left: usize,
    /// The stream's loan ([`Output::is_lent`]): given back when this is dropped.
    _loan: Arc<()>,
}

/// An output event whose bytes are still in the command's pipe ([`Service::poll_frame`]).
#[derive(Debug)]
pub struct PipedOutput {
    /// The event: `raw_bytes` says how many bytes follow its line, and its `raw` is empty.
    pub event: Event<'static>,
    /// Those bytes.
    pub bytes: PipedBytes,
}

/// What [`Service::poll_frame`] hands a host that can move bytes from a pipe itself.
#[derive(Debug)]
pub enum Frame {
    /// A reply or an event as [`Service::poll_output`] gives it.
    Output(ServiceOutput),
    /// An output event whose bytes the host moves from the pipe after its line.
    Piped(PipedOutput),
}

impl From<ServiceOutput> for Frame {
    fn from(o: ServiceOutput) -> Frame {
        Frame::Output(o)
    }
}

impl PipedBytes {
    pub(super) fn lend(out: &Output, len: usize) -> io::Result<PipedBytes> {
        Ok(PipedBytes {
            pipe: out.fd.try_clone()?,
            left: len,
            _loan: Arc::clone(&out.loan),
        })
    }

    /// Bytes not moved yet.
    pub fn len(&self) -> usize {
        self.left
    }

    /// Whether all of them were moved.
    pub fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// Moves as many of the bytes to `out` as it takes without waiting: how many moved
    /// (`WouldBlock` when `out` is full; `EINVAL` when `out` cannot take a splice, and then
    /// [`PipedBytes::read_rest`] gets them).
    pub fn splice_to(&mut self, out: std::os::fd::BorrowedFd<'_>) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        match sys::splice(self.pipe.as_fd(), out, self.left)? {
            0 => Err(short()),
            n => {
                self.left -= n;
                Ok(n)
            }
        }
    }

    /// Reads the bytes not moved yet into memory (a host that cannot splice them).
    pub fn read_rest(&mut self) -> io::Result<Vec<u8>> {
        let mut bytes = vec![0; self.left];
        let mut got = 0;
        let mut f = std::mem::ManuallyDrop::new(unsafe_file(&self.pipe));
        while got < bytes.len() {
            match f.read(&mut bytes[got..]) {
                Ok(0) => return Err(short()),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Announced bytes are in the pipe already: it cannot be empty before them.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(short()),
                Err(e) => return Err(e),
            }
        }
        self.left = 0;
        Ok(bytes)
    }
}

impl PipedOutput {
    /// The event with its bytes in it, as [`Service::poll_output`] gives it.
    pub fn into_output(mut self) -> ServiceOutput {
        let bytes = match self.bytes.read_rest() {
            Ok(bytes) => bytes,
            Err(e) => {
                crate::log::warn(&format!("output announced in a pipe: {e}"));
                Vec::new()
            }
        };
        let event = match self.event {
            Event::ExecStdout(o) => Event::ExecStdout(with_bytes(o, bytes)),
            Event::ExecStderr(o) => Event::ExecStderr(with_bytes(o, bytes)),
            other => other,
        };
        ServiceOutput::Event(event)
    }
}

/// `o` carrying `bytes` after its line (`raw_bytes` as many as there are).
fn with_bytes(o: ExecOutput<'static>, bytes: Vec<u8>) -> ExecOutput<'static> {
    ExecOutput::raw_frame(o.session_id, o.process_id, o.seq, Encoding::Raw, bytes)
}

fn short() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the pipe holds fewer bytes than its event announced",
    )
}
