//! The remote end's `RemoteBash` executor: runs each command statelessly with `sh -c` in its own
//! process group, streams stdout and stderr (merged, in arrival order) as it comes, and enforces a
//! timeout and an output cap by killing the whole group.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Sender};
use std::time::{Duration, Instant};

/// What a running command reports to the main loop.
#[derive(Debug)]
pub enum ExecEvent {
    /// More output (UTF-8; invalid bytes replaced).
    Output { id: String, text: String },
    /// The command ended (or was killed): exit code, and whether the timeout killed it.
    Done {
        id: String,
        code: Option<i32>,
        timed_out: bool,
    },
}

/// A running command the main loop can kill.
pub struct Running {
    pgid: i32,
}

impl Running {
    /// Kills the whole process group (the shell and everything it started).
    pub fn kill(&self) {
        kill_group(self.pgid);
    }
}

fn kill_group(pgid: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group we created; it touches no memory.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Starts `command`; its output and end arrive on `events` (wrapped by `wrap`).
pub fn spawn<T: Send + 'static>(
    id: String,
    command: &str,
    timeout: Duration,
    cap: usize,
    events: Sender<T>,
    wrap: fn(ExecEvent) -> T,
) -> std::io::Result<Running> {
    let (reader, writer) = std::io::pipe()?;
    let mut child: Child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .process_group(0)
        .spawn()?;
    let pgid = child.id() as i32;
    // The pipe's write ends now live only in the child, so the reader sees EOF when the whole
    // group has closed them.
    std::thread::spawn(move || {
        let deadline = Instant::now() + timeout;
        let timed_out = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watchdog = {
            let timed_out = timed_out.clone();
            let (stop_tx, stop_rx) = mpsc::channel::<()>();
            let handle = std::thread::spawn(move || {
                let wait = deadline.saturating_duration_since(Instant::now());
                if let Err(mpsc::RecvTimeoutError::Timeout) = stop_rx.recv_timeout(wait) {
                    timed_out.store(true, std::sync::atomic::Ordering::SeqCst);
                    kill_group(pgid);
                }
            });
            (stop_tx, handle)
        };
        stream_output(&id, reader, cap, pgid, &events, wrap);
        let code = child.wait().ok().and_then(|s| s.code());
        drop(watchdog.0);
        let _ = watchdog.1.join();
        let timed_out = timed_out.load(std::sync::atomic::Ordering::SeqCst);
        let _ = events.send(wrap(ExecEvent::Done {
            id,
            code,
            timed_out,
        }));
    });
    Ok(Running { pgid })
}

/// Reads until EOF, sending UTF-8 text; stops the group once more than `cap` bytes came (the
/// OA1 server cuts at the cap and marks the truncation, so one byte over is enough to know).
fn stream_output<T>(
    id: &str,
    mut reader: std::io::PipeReader,
    cap: usize,
    pgid: i32,
    events: &Sender<T>,
    wrap: fn(ExecEvent) -> T,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut carry: Vec<u8> = Vec::new();
    let mut total = 0usize;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        total += n;
        carry.extend_from_slice(&buf[..n]);
        let text = take_utf8(&mut carry);
        if !text.is_empty() {
            let _ = events.send(wrap(ExecEvent::Output {
                id: id.to_owned(),
                text,
            }));
        }
        if total > cap {
            kill_group(pgid);
            break;
        }
    }
    if !carry.is_empty() {
        let _ = events.send(wrap(ExecEvent::Output {
            id: id.to_owned(),
            text: String::from_utf8_lossy(&carry).into_owned(),
        }));
    }
}

/// Takes the longest prefix of `carry` that is whole UTF-8 (invalid bytes become U+FFFD), leaving
/// an unfinished trailing sequence for the next read.
fn take_utf8(carry: &mut Vec<u8>) -> String {
    let keep_from = match std::str::from_utf8(carry) {
        Ok(_) => carry.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => carry.len(),
    };
    let rest = carry.split_off(keep_from);
    let text = String::from_utf8_lossy(carry).into_owned();
    *carry = rest;
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_split_across_reads_is_carried() {
        let mut carry = "ab€".as_bytes()[..4].to_vec();
        assert_eq!(take_utf8(&mut carry), "ab");
        carry.extend_from_slice(&"€".as_bytes()[2..]);
        assert_eq!(take_utf8(&mut carry), "€");
        let mut bad = vec![b'a', 0xff, b'b'];
        assert_eq!(take_utf8(&mut bad), "a\u{fffd}b");
    }

    fn run(command: &str, timeout_ms: u64, cap: usize) -> (String, Option<i32>, bool) {
        let (tx, rx) = std::sync::mpsc::channel();
        spawn(
            "t".into(),
            command,
            Duration::from_millis(timeout_ms),
            cap,
            tx,
            |e| e,
        )
        .unwrap();
        let mut out = String::new();
        loop {
            match rx.recv().unwrap() {
                ExecEvent::Output { text, .. } => out.push_str(&text),
                ExecEvent::Done {
                    code, timed_out, ..
                } => return (out, code, timed_out),
            }
        }
    }

    #[test]
    fn merges_stdout_and_stderr() {
        let (out, code, timed_out) = run("echo out; echo err >&2; exit 3", 10_000, 1 << 20);
        assert_eq!(out, "out\nerr\n");
        assert_eq!(code, Some(3));
        assert!(!timed_out);
    }

    #[test]
    fn timeout_kills_the_group() {
        let started = Instant::now();
        let (_, code, timed_out) = run("sleep 30 & sleep 30; echo never", 300, 1 << 20);
        assert!(timed_out);
        assert_eq!(code, None);
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn cap_stops_a_flood() {
        let (out, _, timed_out) = run("yes", 60_000, 100_000);
        assert!(out.len() > 100_000);
        assert!(!timed_out);
    }
}
