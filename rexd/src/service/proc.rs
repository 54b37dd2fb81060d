//! One child process as the service tracks it: its streams, exit, counters and timers.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Stream {
    Stdout = 0,
    Stderr = 1,
    Stdin = 2,
    Exit = 3,
}

impl Stream {
    pub(super) fn from_index(i: usize) -> Stream {
        match i {
            0 => Stream::Stdout,
            1 => Stream::Stderr,
            2 => Stream::Stdin,
            _ => Stream::Exit,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum TimerKind {
    /// The process ran past its timeout: TERM the group.
    Timeout,
    /// The grace after TERM ended: KILL the group.
    Escalate,
    /// An `exec.wait` with a timeout gives up (answers `running`).
    Wait(u64),
    /// The grace after the leader was reaped ended: what still holds its pipes is killed and
    /// the pipes are closed, so `exec.exit` comes.
    CloseStreams,
    /// Service-wide (key 0): remove emptied cgroups, reap killed orphans.
    Housekeeping,
    /// A stream held back to gather more output ([`Output::held_until`]) is read again: the
    /// timer only wakes the host, and [`Service::pump`] reads it.
    Gather,
}

/// One output stream of a child.
#[derive(Debug)]
pub(super) struct Output {
    pub(super) fd: OwnedFd,
    pub(super) seq: u64,
    /// An incomplete UTF-8 sequence held back until the next read completes it.
    pub(super) carry: Vec<u8>,
    /// Shared with the [`PipedBytes`] of an event whose bytes are still in the pipe.
    pub(super) loan: Arc<()>,
    /// When (host milliseconds) this stream's last event was made.
    pub(super) last_event_ms: Option<u64>,
    /// Not read before this time: a fast stream gathers a larger event (`GATHER_BYTES`).
    pub(super) held_until: Option<u64>,
}

impl Output {
    pub(super) fn new(fd: OwnedFd) -> Output {
        Output {
            fd,
            seq: 0,
            carry: Vec::new(),
            loan: Arc::default(),
            last_event_ms: None,
            held_until: None,
        }
    }

    /// Whether an event's bytes are still in the pipe, not moved to the host's output yet:
    /// reading on would take them, or put later bytes first.
    pub(super) fn is_lent(&self) -> bool {
        Arc::strong_count(&self.loan) > 1
    }
}

#[derive(Debug)]
pub(super) struct Proc {
    pub(super) key: u64,
    pub(super) id: String,
    pub(super) session: String,
    pub(super) pty_id: Option<String>,
    pub(super) pid: libc::pid_t,
    pub(super) pidfd: Option<OwnedFd>,
    /// Every process it started (`None`: it never started).
    pub(super) tree: Option<Tree>,
    pub(super) stdout: Option<Output>,
    pub(super) stderr: Option<Output>,
    /// Stdin pipe, or the PTY master (which is also `stdout`'s source for a PTY).
    pub(super) stdin: Option<OwnedFd>,
    pub(super) stdin_buf: Vec<u8>,
    pub(super) stdin_eof: bool,
    pub(super) exit: Option<WaitStatus>,
    pub(super) bytes_stdout: u64,
    pub(super) bytes_stderr: u64,
    pub(super) cap: Option<u64>,
    pub(super) truncated: bool,
    pub(super) started_at: String,
    pub(super) started_ms: u64,
    pub(super) timed_out: bool,
    pub(super) killed: bool,
    pub(super) detached: bool,
    /// Its session closed: no more events.
    pub(super) orphaned: bool,
    /// Launch failed: what its `exec.error` said, for `exec.wait` too.
    pub(super) launch_error: Option<String>,
    pub(super) finished: bool,
    pub(super) waiters: Vec<u64>,
    /// `exec.input` calls answered once their bytes are in the pipe (or stdin closed):
    /// (handle, bytes accepted). The answer is the client's flow control, as ssh's window is.
    pub(super) input_waiters: Vec<(u64, u64)>,
    /// Its `[policy]` class (`unclassified` without one), for the metrics.
    pub(super) class: String,
    /// Its session negotiated compression: output events may be `zstd`.
    pub(super) compress: bool,
    /// Its session negotiated raw output: output events carry their bytes after the line.
    pub(super) raw_output: bool,
    /// Its output events' bytes may stay in the pipe for the host to move ([`PipedBytes`]):
    /// raw output without compression, to a host that splices.
    pub(super) piped_output: bool,
}

impl Proc {
    /// Whether it never ran (`exec.error` sent).
    pub(super) fn failed(&self) -> bool {
        self.launch_error.is_some()
    }

    pub(super) fn status(&self) -> ProcessStatus {
        if !self.finished {
            ProcessStatus::Running
        } else if self.timed_out {
            ProcessStatus::TimedOut
        } else if self.killed {
            ProcessStatus::Killed
        } else {
            ProcessStatus::Exited
        }
    }

    pub(super) fn exit_code(&self) -> Option<i32> {
        match self.exit {
            Some(WaitStatus::Exited(c)) => Some(c),
            _ => None,
        }
    }

    pub(super) fn signal(&self) -> Option<String> {
        match self.exit {
            Some(WaitStatus::Signaled(s)) => Some(sys::signal_name(s)),
            _ => None,
        }
    }

    pub(super) fn wait_result(&self) -> ExecWaitResult {
        ExecWaitResult {
            status: self.status(),
            exit_code: self.exit_code(),
            signal: self.signal(),
            bytes_stdout: self.bytes_stdout,
            bytes_stderr: self.bytes_stderr,
            truncated: self.truncated,
            output: None,
            error: self.launch_error.clone(),
        }
    }

    pub(super) fn token(&self, s: Stream) -> Token {
        Token(TOKEN_BASE + self.key as usize * 4 + s as usize)
    }
}

/// A `File` view of a descriptor we keep owning (wrap in `ManuallyDrop`, never drop).
pub(super) fn unsafe_file(fd: &OwnedFd) -> std::fs::File {
    use std::os::fd::FromRawFd;
    // SAFETY: the caller wraps the File in ManuallyDrop, so the descriptor is not closed twice.
    unsafe { std::fs::File::from_raw_fd(fd.as_raw_fd()) }
}
