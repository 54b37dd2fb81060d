//! Sessions that outlive an ssh connection: `rexd --stdio --resumable` and its per-user agent.
//!
//! `ssh host rexd --stdio` ends with its ssh connection, and so would every process it runs.
//! With `--resumable`, `rexd --stdio` is only a bridge: it connects to a per-user agent on a
//! Unix socket (starting it on demand, the way mosh-server and distant's manager are started)
//! and copies bytes both ways until either side ends. The agent is a [`crate::hub`]: it keeps
//! resumable sessions and their processes for `--resume-grace-ms` after their connection
//! drops, and a new bridge (a new ssh connection) takes a session over with `session.resume`.
//! It exits once it has had no connection, session or process for [`AGENT_IDLE_MS`]
//! (`$REXD_AGENT_IDLE_MS` in its environment sets another time, for tests).
//!
//! - The socket lives in `$XDG_RUNTIME_DIR/rexd/` or else `/tmp/rexd-UID/`, a directory of
//!   mode 0700 that must belong to the user; the socket itself is mode 0600, and the agent
//!   checks each peer's uid (`SO_PEERCRED`), so only the same user reaches it.
//! - Its name carries a hash of the daemon's arguments (`agent-HASH.sock`): bridges with
//!   another config, other roots or other flags get their own agent, never one set up
//!   differently.
//! - It reads a bridge's lines as `rexd --stdio` reads stdin (core's NDJSON framing): one of
//!   more than the message cap (`HubConfig::max_message_bytes`, 16 MiB) is skipped through its
//!   newline and logged, never held.
//! - The agent runs in its own session (`setsid`), with stdin and stdout on `/dev/null` and
//!   stderr appended to `agent-HASH.log` beside the socket, so it holds nothing of the ssh
//!   channel open and no hangup reaches it.
//!
//! Everything here is threads and blocking I/O: no async runtime, as for every stdio path.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use deskwire::jsonrpc::framing::{Frame, NdjsonDecoder};

use crate::hub::{self, ConnInfo, ConnKind, ConnSink, HubConfig, HubHandle, HubInput};
use crate::service::Settings;

/// How long an agent with nothing to do stays up.
pub const AGENT_IDLE_MS: u64 = 60_000;
/// Bytes of one client's messages the agent may hold before it reads no more of them.
const INBOUND_CREDIT: usize = 1 << 20;

/// The directory for agent sockets: `$XDG_RUNTIME_DIR/rexd`, else `/tmp/rexd-UID`; made with
/// mode 0700, and refused unless it is ours and nobody else's to enter.
pub fn runtime_dir() -> io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => Path::new(&d).join("rexd"),
        None => PathBuf::from(format!("/tmp/rexd-{uid}")),
    };
    match std::fs::create_dir(&dir) {
        Ok(()) => std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} must be a directory of uid {uid} with mode 0700 (it holds the agent's socket)",
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

/// The agent's socket for a daemon started with `args` (the command line without
/// `--stdio` and `--resumable`).
pub fn socket_for(args: &[OsString]) -> io::Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    // FNV-1a: a name, not a secret. The version is hashed too: a bridge never talks to an
    // agent another rexd started (an upgrade leaves the old agent to its sessions).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let version = OsString::from(env!("CARGO_PKG_VERSION"));
    for a in std::iter::once(&version).chain(args) {
        for b in a.as_bytes().iter().chain([0u8].iter()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    Ok(runtime_dir()?.join(format!("agent-{h:016x}.sock")))
}

/// The uid of the process at the other end of `s`.
fn peer_uid(s: &UnixStream) -> io::Result<libc::uid_t> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writing, sized for SO_PEERCRED.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Serves the hub on `socket` until it has been idle for [`AGENT_IDLE_MS`] (or a signal).
pub fn serve_agent(settings: Settings, socket: &Path, grace_ms: u64) -> io::Result<()> {
    // A socket file nobody answers on is a dead agent's: replace it.
    if socket.exists() && UnixStream::connect(socket).is_err() {
        let _ = std::fs::remove_file(socket);
    }
    let listener = UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    let idle = std::env::var("REXD_AGENT_IDLE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(AGENT_IDLE_MS);
    let config = HubConfig {
        resume_grace_ms: grace_ms,
        exit_when_idle_ms: Some(idle),
        ..HubConfig::default()
    };
    let max_line = config.max_message_bytes;
    let (hub, thread) = hub::start(settings, config)?;
    crate::log::info(&format!("agent on {}", socket.display()));
    {
        let hub = hub.clone();
        std::thread::spawn(move || accept(listener, hub, max_line));
    }
    // Signals end the agent as they end any rexd: its processes first.
    let signals = signal_hook::iterator::Signals::new([libc::SIGTERM, libc::SIGINT, libc::SIGHUP]);
    if let Ok(mut signals) = signals {
        let hub = hub.clone();
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                hub.send(HubInput::Shutdown);
            }
        });
    }
    let result = thread.join().unwrap_or(Ok(()));
    let _ = std::fs::remove_file(socket);
    crate::tree::kill_all_descendants();
    result
}

/// Serves each connection on its own thread; a line of more than `max_line` bytes is skipped.
fn accept(listener: UnixListener, hub: HubHandle, max_line: usize) {
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        match peer_uid(&stream) {
            Ok(uid) if uid == me => {}
            other => {
                crate::log::warn(&format!("refused a connection from uid {other:?}"));
                continue;
            }
        }
        let hub = hub.clone();
        std::thread::spawn(move || connection(stream, hub, max_line));
    }
}

/// The hub's way back to a bridge: lines (and the raw bytes after one, for a raw frame)
/// through a channel to the writer thread.
struct LineSink {
    tx: Sender<(Vec<u8>, Vec<u8>)>,
    unsent: Arc<AtomicUsize>,
    credit: Arc<(Mutex<usize>, Condvar)>,
    stream: UnixStream,
}

impl ConnSink for LineSink {
    fn send(&self, message: Vec<u8>) {
        self.send_frame(message, Vec::new());
    }
    fn send_frame(&self, message: Vec<u8>, bytes: Vec<u8>) {
        self.unsent
            .fetch_add(message.len() + bytes.len(), Ordering::Relaxed);
        let _ = self.tx.send((message, bytes));
    }
    fn unsent(&self) -> usize {
        self.unsent.load(Ordering::Relaxed)
    }
    fn consumed(&self, bytes: usize) {
        let (lock, cond) = &*self.credit;
        let mut c = lock.lock().unwrap_or_else(|e| e.into_inner());
        *c = c.saturating_sub(bytes);
        cond.notify_all();
    }
    fn close(&self, reason: &str) {
        crate::log::warn(&format!("closing a bridge: {reason}"));
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
    fn done(&self) {}
}

fn connection(stream: UnixStream, hub: HubHandle, max_line: usize) {
    let conn = hub.next_conn();
    let (tx, rx) = channel::<(Vec<u8>, Vec<u8>)>();
    let unsent = Arc::new(AtomicUsize::new(0));
    let credit = Arc::new((Mutex::new(0usize), Condvar::new()));
    let (Ok(for_sink), Ok(mut writer)) = (stream.try_clone(), stream.try_clone()) else {
        return;
    };
    let sink = LineSink {
        tx,
        unsent: Arc::clone(&unsent),
        credit: Arc::clone(&credit),
        stream: for_sink,
    };
    let mut sink = Some(sink);
    std::thread::spawn(move || {
        // One writer: a frame's line and its bytes go out with nothing between them.
        for (mut line, bytes) in rx {
            let n = line.len() + bytes.len();
            line.push(b'\n');
            let ok = writer.write_all(&line).is_ok() && writer.write_all(&bytes).is_ok();
            unsent.fetch_sub(n, Ordering::Relaxed);
            if !ok {
                let _ = writer.shutdown(std::net::Shutdown::Both);
                return;
            }
        }
    });
    // Core's NDJSON framing, as `rexd --stdio` reads: a line over the message cap is never
    // buffered whole (150 MiB of one line took the agent to 324 MB), only skipped and logged.
    let mut decoder = NdjsonDecoder::new(max_line);
    let mut reader = stream;
    let mut buf = vec![0u8; 64 * 1024];
    let mut open = true;
    while open {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        decoder.decode(&buf[..n], |frame| {
            let line = match frame {
                _ if !open => return,
                Frame::Error(e) => {
                    crate::log::warn(&format!("bridge connection {conn}: {e}"));
                    return;
                }
                Frame::Message(line) => line,
            };
            // The bridge's first line says who its client is; the client's lines follow.
            if let Some(sink) = sink.take() {
                let hello = BridgeHello::parse(line);
                let is_hello = hello.is_some();
                let hello = hello.unwrap_or_default();
                let info = ConnInfo {
                    principal: hello.principal.unwrap_or_else(|| {
                        // SAFETY: getuid cannot fail.
                        format!("uid {}", unsafe { libc::getuid() })
                    }),
                    address: hello.address,
                    kind: ConnKind::Stream,
                    // The bridge copies bytes as they are: raw frames pass.
                    raw_frames: true,
                };
                let sink = Box::new(sink);
                open = hub.send(HubInput::Open { conn, info, sink });
                if is_hello || !open {
                    return;
                }
            }
            // At most INBOUND_CREDIT bytes the hub has not taken yet (one line of any size).
            {
                let (lock, cond) = &*credit;
                let mut held = lock.lock().unwrap_or_else(|e| e.into_inner());
                while *held > 0 && *held + line.len() > INBOUND_CREDIT {
                    held = cond.wait(held).unwrap_or_else(|e| e.into_inner());
                }
                *held += line.len();
            }
            open = hub.send(HubInput::Message {
                conn,
                bytes: line.to_vec(),
            });
        });
    }
    hub.send(HubInput::Closed { conn });
}

/// The first line a bridge sends its agent: who its client is, for the audit and the policy
/// (the agent is shared by every connection of the user, so it cannot tell by itself).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct BridgeHello {
    /// [`crate::ssh_client::principal`] in the bridge.
    pub principal: Option<String>,
    /// [`crate::ssh_client::address`] in the bridge.
    pub address: Option<String>,
}

impl BridgeHello {
    /// Its line (without the newline): `{"rexd.bridge":{...}}`.
    fn line(&self) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({ "rexd.bridge": self })).expect("serializable")
    }

    /// The hello in `line`, if it is one.
    fn parse(line: &[u8]) -> Option<BridgeHello> {
        #[derive(serde::Deserialize)]
        struct Line {
            #[serde(rename = "rexd.bridge")]
            hello: BridgeHello,
        }
        let hello = serde_json::from_slice::<Line>(line).ok().map(|l| l.hello);
        if hello.is_none() {
            crate::log::warn("a bridge did not say who its client is: the agent's uid names it");
        }
        hello
    }
}

/// `rexd --stdio --resumable`: connects stdin and stdout to the agent for `args`, starting it
/// when none answers, says who the client is (`hello`), and copies until either side ends.
pub fn bridge(exe: &Path, args: &[OsString], hello: &BridgeHello) -> io::Result<()> {
    let socket = socket_for(args)?;
    let stream = match UnixStream::connect(&socket) {
        Ok(s) => s,
        Err(_) => {
            start_agent(exe, args, &socket)?;
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match UnixStream::connect(&socket) {
                    Ok(s) => break s,
                    Err(e) if Instant::now() > deadline => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("the agent on {} did not start: {e}", socket.display()),
                        ));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    };
    let mut to_agent = stream.try_clone()?;
    let mut first = hello.line();
    first.push(b'\n');
    to_agent.write_all(&first)?;
    let closer = stream.try_clone()?;
    std::thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to_agent.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        // The client is gone: so is this connection (its resumable sessions wait).
        let _ = closer.shutdown(std::net::Shutdown::Both);
    });
    let mut from_agent = stream;
    let mut stdout = io::stdout().lock();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match from_agent.read(&mut buf) {
            Ok(0) | Err(_) => return Ok(()),
            Ok(n) => {
                if stdout
                    .write_all(&buf[..n])
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    return Ok(());
                }
            }
        }
    }
}

fn start_agent(exe: &Path, args: &[OsString], socket: &Path) -> io::Result<()> {
    let log = socket.with_extension("log");
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)?;
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o600))?;
    let mut cmd = Command::new(exe);
    cmd.arg("--agent")
        .arg(socket)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // SAFETY: setsid is async-signal-safe; a new session takes the agent out of ssh's.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Not waited for: it outlives us (the double fork of a daemon is the setsid above plus
    // this process exiting; init reaps it).
    cmd.spawn().map(drop)
}
