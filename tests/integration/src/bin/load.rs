//! Load: N desks against one `rexd --irc` through a private ngircd, each desk asking in a loop
//! (one request in flight, the next as soon as the answer comes) within the server's flood
//! limits, as the desks' own pacing keeps them. A measurement, not a test: it prints a table and
//! asserts nothing about speed. `bash tests/load/run.sh` runs the whole matrix; see
//! `docs/benchmarks.md` ("Load: N desks against one rexd") and `docs/scaling.md`.
//!
//! Shapes:
//! - `shared`: N desks, a connection each, all in one channel with rexd (every frame reaches
//!   every member);
//! - `per-channel`: N desks, a connection and a channel each; rexd joined to all N channels on
//!   its one connection (`--channel` N times);
//! - `multi`: N desks on one connection (`oa1::MultiDesk`), a channel each; rexd as in
//!   `per-channel`.
//!
//! The desks connect, and once every one is ready (in its channel, with rexd there) or
//! `--ready-secs` have passed, they start asking; after `--warmup` seconds the window opens, and
//! what is answered or fails within its `--seconds` is counted, with rexd's and ngircd's CPU time
//! over the window (from `/proc`). Requests keep the default 30 s timeout, which runs while a
//! request waits for its turn on a paced connection.
//!
//! Limits (`--limits`): `default` (ngircd's flood protection as shipped; rexd paces itself from
//! the server's `004`), `remote-exempt` (`MaxPenaltyTime = 0` and rexd
//! `--pacing-interval-ms 0`: the operator exempted the remote; the desks keep their pacing), or
//! `all-exempt` (the desks' pacing off too).

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use deskwire::irc::SessionEvent;
use deskwire::oa1::{
    ConnectionConfig, ConnectionEvent, ConnectionOutput, ConnectionState, Desk, Event, MultiDesk,
    MultiOutput, Pacing,
};
use deskwire_integration::{Ngircd, TempDir};

const REMOTE: &str = "deskbot";
/// The command every request runs: a one-line answer.
const COMMAND: &str = "echo ok";
const EXPECTED: &str = "ok\n";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Shared,
    PerChannel,
    Multi,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limits {
    Default,
    RemoteExempt,
    AllExempt,
}

struct Args {
    shape: Shape,
    limits: Limits,
    sizes: Vec<usize>,
    seconds: u64,
    warmup: u64,
    ready_secs: u64,
    rexd: PathBuf,
}

const USAGE: &str = "usage: load --shape shared|per-channel|multi \
    [--limits default|remote-exempt|all-exempt] [--sizes 1,10,100,500] [--warmup 5] [--seconds 20] \
    [--ready-secs 60] [--rexd target/release/rexd] [--header]";

fn parse_args() -> Result<(Args, bool), String> {
    let mut args = Args {
        shape: Shape::Shared,
        limits: Limits::Default,
        sizes: vec![1, 10, 100, 500],
        seconds: 20,
        warmup: 5,
        ready_secs: 60,
        rexd: PathBuf::from("target/release/rexd"),
    };
    let mut header = false;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--header" {
            header = true;
            continue;
        }
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--shape" => {
                args.shape = match value.as_str() {
                    "shared" => Shape::Shared,
                    "per-channel" => Shape::PerChannel,
                    "multi" => Shape::Multi,
                    _ => return Err(format!("unknown shape {value}")),
                }
            }
            "--limits" => {
                args.limits = match value.as_str() {
                    "default" => Limits::Default,
                    "remote-exempt" => Limits::RemoteExempt,
                    "all-exempt" => Limits::AllExempt,
                    _ => return Err(format!("unknown limits {value}")),
                }
            }
            "--sizes" => {
                args.sizes = value
                    .split(',')
                    .map(|s| s.parse().map_err(|e| format!("--sizes {s}: {e}")))
                    .collect::<Result<_, _>>()?;
                if args.sizes.contains(&0) {
                    return Err("--sizes: 0 desks".into());
                }
            }
            "--warmup" => args.warmup = value.parse().map_err(|e| format!("--warmup: {e}"))?,
            "--seconds" => args.seconds = value.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--ready-secs" => {
                args.ready_secs = value.parse().map_err(|e| format!("--ready-secs: {e}"))?
            }
            "--rexd" => args.rexd = PathBuf::from(value),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok((args, header))
}

/// The value at quantile `q` (0..=1) of `sorted` (ascending), nearest rank; `None` when empty.
fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// A process's CPU time (its own, and its reaped children's) and memory, from `/proc`.
#[derive(Clone, Copy, Debug, Default)]
struct ProcSample {
    /// utime + stime, in clock ticks.
    own_ticks: u64,
    /// cutime + cstime: the children it waited for (rexd's `sh -c`).
    children_ticks: u64,
    /// VmHWM and VmRSS, kB.
    hwm_kb: u64,
    rss_kb: u64,
}

/// Parses `/proc/PID/stat`'s text: the fields after the command's closing parenthesis.
fn parse_stat(stat: &str) -> Option<(u64, u64, u64)> {
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    // After ") ": state is field 3 of the full line, so utime (14) is index 11 here.
    let field = |i: usize| fields.get(i)?.parse::<u64>().ok();
    let ppid = field(1)?;
    Some((ppid, field(11)? + field(12)?, field(13)? + field(14)?))
}

fn status_kb(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn sample(pid: u32) -> ProcSample {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let (_, own_ticks, children_ticks) = parse_stat(&stat).unwrap_or_default();
    ProcSample {
        own_ticks,
        children_ticks,
        hwm_kb: status_kb(&status, "VmHWM:"),
        rss_kb: status_kb(&status, "VmRSS:"),
    }
}

/// The ngircd this process started (our child named `ngircd`): its pid, for its CPU time.
fn child_ngircd() -> Option<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let (ppid, _, _) = parse_stat(&stat)?;
            (ppid == u64::from(me) && stat.contains("(ngircd)")).then_some(pid)
        })
}

fn clock_ticks_per_second() -> u64 {
    // getconf is POSIX; Linux has used 100 for user space since 2.6.
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

struct Rexd(Child);

impl Drop for Rexd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_rexd(binary: &Path, addr: &str, root: &Path, channels: &[String], exempt: bool) -> Rexd {
    let mut command = Command::new(binary);
    // Anyone in the channels may ask: every desk has a nick of its own, on a private server.
    command
        .args(["--irc", addr, "--nick", REMOTE, "--unauthenticated"])
        .args(["--log-level", "warn", "--root", root.to_str().unwrap()]);
    if exempt {
        command.args(["--pacing-interval-ms", "0"]);
    }
    for channel in channels {
        command.args(["--channel", channel]);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(root.join("rexd.log")).unwrap());
    Rexd(command.spawn().expect("spawn rexd --irc"))
}

/// What the desks saw during the measured window.
#[derive(Debug, Default)]
struct Tally {
    /// Round trips of the requests answered within the window, in microseconds.
    latencies_us: Vec<u64>,
    /// Requests that failed within the window, by code.
    failures: BTreeMap<String, u64>,
    /// The first failure of each code, in words.
    failure_examples: BTreeMap<String, String>,
    /// Answers that were not `ok\n` (must stay 0).
    wrong: u64,
    /// Connections that ended, at any time, by why (the server's `ERROR`, or the socket).
    lost: BTreeMap<String, u64>,
    /// The server's error replies (`4xx`, `5xx`), at any time.
    server_errors: BTreeMap<String, u64>,
}

impl Tally {
    fn note_session_event(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Disconnected { reason } => {
                *self.lost.entry(reason.to_string()).or_default() += 1
            }
            SessionEvent::ServerError { message } => {
                *self.server_errors.entry(message).or_default() += 1
            }
            _ => {}
        }
    }

    fn merge(&mut self, other: Tally) {
        self.latencies_us.extend(other.latencies_us);
        for (code, n) in other.failures {
            *self.failures.entry(code).or_default() += n;
        }
        for (code, example) in other.failure_examples {
            self.failure_examples.entry(code).or_insert(example);
        }
        self.wrong += other.wrong;
        for (why, n) in other.lost {
            *self.lost.entry(why).or_default() += n;
        }
        for (error, n) in other.server_errors {
            *self.server_errors.entry(error).or_default() += n;
        }
    }
}

/// The phase's schedule, shared by the desks' threads.
struct Control {
    t0: Instant,
    ready: AtomicUsize,
    /// Set once: when the desks start asking.
    go: OnceLock<Instant>,
    /// How long they ask before the window opens (the queues fill), and then how long it lasts.
    warmup: Duration,
    seconds: Duration,
    stop: AtomicBool,
}

impl Control {
    fn now(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    /// Whether the desks ask at `at`: from `go` to the window's end.
    fn asking(&self, at: Instant) -> bool {
        self.go
            .get()
            .is_some_and(|go| at >= *go && at < *go + self.warmup + self.seconds)
    }

    /// Whether an answer or failure at `at` is counted: within the window, after the warm-up.
    fn in_window(&self, at: Instant) -> bool {
        self.go
            .get()
            .is_some_and(|go| at >= *go + self.warmup && at < *go + self.warmup + self.seconds)
    }
}

/// One request in flight: its id and when it was asked.
struct Asked {
    id: String,
    at: Instant,
}

fn settle(tally: &mut Tally, ctl: &Control, asked: Asked, event: &Event) {
    let now = Instant::now();
    if !ctl.in_window(now) {
        return;
    }
    match event {
        Event::Response { text, .. } if text == EXPECTED => tally
            .latencies_us
            .push(now.duration_since(asked.at).as_micros() as u64),
        Event::Response { .. } => tally.wrong += 1,
        Event::Failed { failure, .. } => {
            let code = failure.code().to_owned();
            *tally.failures.entry(code.clone()).or_default() += 1;
            tally
                .failure_examples
                .entry(code)
                .or_insert_with(|| format!("{failure:?}"));
        }
        _ => {}
    }
}

/// Waits for the socket to have bytes, at most until `deadline` (ms on `ctl`'s clock) and at
/// most 50 ms; returns what came, or `None` when the server closed the connection.
fn read_some(socket: &mut TcpStream, ctl: &Control, deadline: u64) -> Option<Vec<u8>> {
    let wait = deadline.saturating_sub(ctl.now()).clamp(1, 50);
    socket
        .set_read_timeout(Some(Duration::from_millis(wait)))
        .unwrap();
    let mut buf = [0u8; 16 * 1024];
    match socket.read(&mut buf) {
        Ok(0) => None,
        Ok(n) => Some(buf[..n].to_vec()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Some(vec![]),
        Err(e) if e.kind() == ErrorKind::Interrupted => Some(vec![]),
        Err(_) => None,
    }
}

fn desk_config(nick: &str, channel: &str, limits: Limits) -> ConnectionConfig {
    let mut config = ConnectionConfig::new(nick, channel).with_peer(REMOTE);
    if limits == Limits::AllExempt {
        config.oa1.pacing = Pacing::UNLIMITED;
        config.oa1.server_pacing = false;
    }
    config
}

fn seed(name: &str) -> u64 {
    name.bytes().fold(u64::from(std::process::id()), |h, b| {
        h.wrapping_mul(31) + u64::from(b)
    })
}

/// One desk on its own connection, asking in a loop once the window opens.
fn run_desk(
    mut socket: TcpStream,
    nick: &str,
    channel: &str,
    limits: Limits,
    ctl: &Control,
) -> Tally {
    let mut tally = Tally::default();
    socket.set_nodelay(true).ok();
    let mut desk = Desk::new(desk_config(nick, channel, limits), ctl.now(), seed(nick)).unwrap();
    let mut asked: Option<Asked> = None;
    let mut counted_ready = false;
    let mut closed = false;
    while !ctl.stop.load(Ordering::Relaxed) {
        let now = ctl.now();
        let deadline = loop {
            match desk.poll_output(now) {
                ConnectionOutput::Transmit(bytes) => {
                    if socket.write_all(&bytes).is_err() {
                        return tally;
                    }
                }
                ConnectionOutput::Event(ConnectionEvent::Oa1(
                    event @ (Event::Response { .. } | Event::Failed { .. }),
                )) => {
                    let id = match &event {
                        Event::Response { id, .. } | Event::Failed { id, .. } => id,
                        _ => unreachable!(),
                    };
                    if asked.as_ref().is_some_and(|a| &a.id == id) {
                        settle(&mut tally, ctl, asked.take().unwrap(), &event);
                    }
                }
                ConnectionOutput::Event(ConnectionEvent::Irc(event)) => {
                    tally.note_session_event(event)
                }
                ConnectionOutput::Event(_) => {}
                ConnectionOutput::Timeout(at) => break at,
            }
        };
        if closed {
            return tally;
        }
        let ready = desk.state() == ConnectionState::Ready;
        if ready && !counted_ready {
            counted_ready = true;
            ctl.ready.fetch_add(1, Ordering::Relaxed);
        }
        if asked.is_none() && ready && ctl.asking(Instant::now()) {
            let at = Instant::now();
            match desk.request(ctl.now(), COMMAND, None) {
                Ok(id) => {
                    asked = Some(Asked { id, at });
                    continue;
                }
                // Counted, then the desk waits for its socket as when idle.
                Err(e) => *tally.failures.entry(format!("refused: {e}")).or_default() += 1,
            }
        }
        match read_some(&mut socket, ctl, deadline) {
            Some(bytes) if !bytes.is_empty() => desk.handle_bytes(ctl.now(), &bytes),
            Some(_) => {}
            None => {
                // Its Disconnected event says why, on the next turn.
                desk.handle_eof(ctl.now());
                closed = true;
            }
        }
    }
    tally
}

/// N desks on one connection, a channel each, each asking in a loop once the window opens.
fn run_multi(addr: &str, channels: &[String], limits: Limits, ctl: &Control) -> Tally {
    let mut tally = Tally::default();
    let mut socket = TcpStream::connect(addr).expect("connect the desks");
    socket.set_nodelay(true).ok();
    let mut config = desk_config("desks", "", limits);
    config.oa1.allowed_sender = None;
    let mut desks = MultiDesk::new(config, ctl.now(), seed("desks")).unwrap();
    for channel in channels {
        desks.add_desk(ctl.now(), channel, REMOTE).unwrap();
    }
    let mut asked: BTreeMap<String, Asked> = BTreeMap::new();
    let mut ready: std::collections::BTreeSet<String> = Default::default();
    let mut closed = false;
    while !ctl.stop.load(Ordering::Relaxed) {
        let now = ctl.now();
        let deadline = loop {
            match desks.poll_output(now) {
                MultiOutput::Transmit(bytes) if socket.write_all(&bytes).is_err() => return tally,
                MultiOutput::Event {
                    channel: Some(channel),
                    event:
                        ConnectionEvent::Oa1(event @ (Event::Response { .. } | Event::Failed { .. })),
                } => {
                    let id = match &event {
                        Event::Response { id, .. } | Event::Failed { id, .. } => id,
                        _ => unreachable!(),
                    };
                    if asked.get(&channel).is_some_and(|a| &a.id == id) {
                        settle(&mut tally, ctl, asked.remove(&channel).unwrap(), &event);
                    }
                }
                MultiOutput::Event {
                    event: ConnectionEvent::Irc(event),
                    ..
                } => tally.note_session_event(event),
                MultiOutput::Timeout(at) => break at,
                _ => {}
            }
        };
        if closed {
            return tally;
        }
        for channel in channels {
            if desks.channel_state(channel) == Some(ConnectionState::Ready)
                && ready.insert(channel.clone())
            {
                ctl.ready.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut asked_now = false;
        if ctl.asking(Instant::now()) {
            for channel in &ready {
                if !asked.contains_key(channel) {
                    let at = Instant::now();
                    match desks.request(ctl.now(), channel, COMMAND, None) {
                        Ok(id) => {
                            asked.insert(channel.clone(), Asked { id, at });
                            asked_now = true;
                        }
                        Err(e) => *tally.failures.entry(format!("refused: {e}")).or_default() += 1,
                    }
                }
            }
        }
        if asked_now {
            continue;
        }
        match read_some(&mut socket, ctl, deadline) {
            Some(bytes) if !bytes.is_empty() => desks.handle_bytes(ctl.now(), &bytes),
            Some(_) => {}
            None => {
                desks.handle_eof(ctl.now());
                closed = true;
            }
        }
    }
    tally
}

/// One line of the table.
struct Row {
    n: usize,
    ready: usize,
    ready_secs: f64,
    tally: Tally,
    seconds: u64,
    rexd: (ProcSample, ProcSample),
    ngircd: (ProcSample, ProcSample),
    desks_cpu_ticks: u64,
}

fn phase(args: &Args, n: usize) -> Row {
    let channels: Vec<String> = match args.shape {
        Shape::Shared => vec!["#load".into()],
        Shape::PerChannel | Shape::Multi => (0..n).map(|i| format!("#load-{i}")).collect(),
    };
    let mut limits = String::new();
    if channels.len() > 10 {
        // ngircd lets a connection into 10 channels unless told otherwise.
        limits.push_str(&format!("MaxJoins = {}\n", channels.len() + 10));
    }
    if args.limits != Limits::Default {
        limits.push_str("MaxPenaltyTime = 0\n");
    }
    let ngircd = Ngircd::start_with_limits(&limits);
    let ngircd_pid = child_ngircd().expect("ngircd is our child");
    let root = TempDir::new("deskwire-load").unwrap();
    let rexd = start_rexd(
        &args.rexd,
        &ngircd.addr(),
        root.path(),
        &channels,
        args.limits != Limits::Default,
    );
    let ctl = Arc::new(Control {
        t0: Instant::now(),
        ready: AtomicUsize::new(0),
        go: OnceLock::new(),
        warmup: Duration::from_secs(args.warmup),
        seconds: Duration::from_secs(args.seconds),
        stop: AtomicBool::new(false),
    });
    let addr = ngircd.addr();
    let mut threads = Vec::new();
    match args.shape {
        Shape::Shared | Shape::PerChannel => {
            for i in 0..n {
                // One connect at a time, 5 ms apart: ngircd listens with a backlog of 10, and when
                // 100 desks connected at once, 36 connections ended without an ERROR (a closed
                // or failed socket); 5 ms apart, none did.
                std::thread::sleep(Duration::from_millis(5));
                let socket = TcpStream::connect(&addr).expect("connect a desk");
                let (ctl, limits) = (ctl.clone(), args.limits);
                let channel = channels[i.min(channels.len() - 1)].clone();
                threads.push(
                    std::thread::Builder::new()
                        .stack_size(256 * 1024)
                        .spawn(move || run_desk(socket, &format!("d{i}"), &channel, limits, &ctl))
                        .expect("spawn a desk thread"),
                );
            }
        }
        Shape::Multi => {
            let (ctl, addr, limits) = (ctl.clone(), addr.clone(), args.limits);
            let channels = channels.clone();
            threads.push(
                std::thread::Builder::new()
                    .spawn(move || run_multi(&addr, &channels, limits, &ctl))
                    .expect("spawn the desks' thread"),
            );
        }
    }
    // Every desk ready (in its channel with rexd), or the wait is over: the window opens.
    let ready_by = Instant::now() + Duration::from_secs(args.ready_secs);
    while ctl.ready.load(Ordering::Relaxed) < n && Instant::now() < ready_by {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ready = ctl.ready.load(Ordering::Relaxed);
    let ready_secs = ctl.t0.elapsed().as_secs_f64();
    let rexd_pid = rexd.0.id();
    let me = std::process::id();
    ctl.go.set(Instant::now()).unwrap();
    std::thread::sleep(ctl.warmup);
    let before = (sample(rexd_pid), sample(ngircd_pid), sample(me));
    std::thread::sleep(ctl.seconds);
    let after = (sample(rexd_pid), sample(ngircd_pid), sample(me));
    ctl.stop.store(true, Ordering::Relaxed);
    let mut tally = Tally::default();
    for thread in threads {
        tally.merge(thread.join().expect("a desk thread panicked"));
    }
    tally.latencies_us.sort_unstable();
    drop(rexd);
    drop(ngircd);
    Row {
        n,
        ready,
        ready_secs,
        tally,
        seconds: args.seconds,
        rexd: (before.0, after.0),
        ngircd: (before.1, after.1),
        desks_cpu_ticks: after.2.own_ticks.saturating_sub(before.2.own_ticks),
    }
}

fn print_row(args: &Args, row: &Row, tick_ms: f64) {
    let answered = row.tally.latencies_us.len() as u64;
    let ms = |q| {
        percentile(&row.tally.latencies_us, q)
            .map(|us| format!("{:.0}", us as f64 / 1000.0))
            .unwrap_or_else(|| "-".into())
    };
    let per_request = |ticks: u64| match answered {
        0 => "-".to_owned(),
        a => format!("{:.2}", ticks as f64 * tick_ms / a as f64),
    };
    let (rb, ra) = row.rexd;
    let failures: Vec<String> = row
        .tally
        .failures
        .iter()
        .map(|(code, n)| format!("{n} {code}"))
        .collect();
    println!(
        "| {} | {} | {} | {}/{} in {:.0} s | {:.2} | {} | {} | {} | {} | {} | {} | {:.1} / {:.1} | {} | {} |",
        match args.shape {
            Shape::Shared => "shared",
            Shape::PerChannel => "per-channel",
            Shape::Multi => "multi",
        },
        match args.limits {
            Limits::Default => "default",
            Limits::RemoteExempt => "remote exempt",
            Limits::AllExempt => "all exempt",
        },
        row.n,
        row.ready,
        row.n,
        row.ready_secs,
        answered as f64 / row.seconds as f64,
        ms(0.5),
        ms(0.99),
        per_request(ra.own_ticks.saturating_sub(rb.own_ticks)),
        per_request(ra.children_ticks.saturating_sub(rb.children_ticks)),
        per_request(
            row.ngircd
                .1
                .own_ticks
                .saturating_sub(row.ngircd.0.own_ticks)
        ),
        per_request(row.desks_cpu_ticks),
        ra.hwm_kb as f64 / 1024.0,
        ra.rss_kb as f64 / 1024.0,
        if failures.is_empty() {
            "0".to_owned()
        } else {
            failures.join(", ")
        },
        row.tally.wrong,
    );
    // Below the table: what it cannot hold.
    for (why, n) in &row.tally.lost {
        eprintln!("  {} desks, {n} connections ended: {why}", row.n);
    }
    for (code, example) in &row.tally.failure_examples {
        eprintln!("  {} desks, {code}: {example}", row.n);
    }
    for (error, n) in &row.tally.server_errors {
        eprintln!("  {} desks, {n} times the server said: {error}", row.n);
    }
}

fn main() {
    let (args, header) = match parse_args() {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if !args.rexd.exists() {
        eprintln!("no rexd at {}\n{USAGE}", args.rexd.display());
        std::process::exit(2);
    }
    if header {
        println!(
            "| shape | limits | desks | ready (at start) | answers/s | p50 ms | p99 ms | \
             rexd CPU ms/answer | its sh ms/answer | ngircd CPU ms/answer | desks CPU ms/answer | \
             rexd VmHWM / VmRSS MiB | failed | wrong |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    }
    let tick_ms = 1000.0 / clock_ticks_per_second() as f64;
    for &n in &args.sizes {
        let row = phase(&args, n);
        print_row(&args, &row, tick_ms);
        std::io::stdout().flush().ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 0.5), Some(50));
        assert_eq!(percentile(&values, 0.99), Some(99));
        assert_eq!(percentile(&values, 1.0), Some(100));
        assert_eq!(percentile(&[7], 0.99), Some(7));
        assert_eq!(percentile(&[3, 9], 0.5), Some(3));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn proc_stat_is_read_after_the_command_name() {
        // A command name with spaces and a parenthesis, as /proc shows it.
        let line = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 500 0 0 0 31 12 5 2 20 0 1 0";
        assert_eq!(parse_stat(line), Some((17, 43, 7)));
        assert_eq!(parse_stat("4242 (x"), None);
    }

    #[test]
    fn status_sizes_are_read_in_kb() {
        let status = "Name:\trexd\nVmHWM:\t   10240 kB\nVmRSS:\t    8192 kB\n";
        assert_eq!(status_kb(status, "VmHWM:"), 10240);
        assert_eq!(status_kb(status, "VmRSS:"), 8192);
        assert_eq!(status_kb(status, "VmSwap:"), 0);
    }
}
