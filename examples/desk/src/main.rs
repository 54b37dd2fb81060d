//! The desk demo: a `RemoteBash` round trip through OA1.
//!
//! ```text
//! cargo run --bin desk -- 'uname -a'
//! cargo run --bin desk -- --irc 127.0.0.1:6667 --channel '#desk' 'uname -a'
//! cargo run --bin desk -- --irc irc.example:6667 --role server   # the remote, keeps serving
//!                                                 # (and reconnects, as rexd --irc does)
//! cargo run --bin desk -- --irc irc.example:6667 --role client 'df -h'
//! ```
//!
//! Each end is one of the core's per-connection engines, [`Desk`] or [`Remote`]: the loop only
//! moves bytes and time. Without `--irc` both ends connect to an in-process IRC server
//! (`deskwire::sim::Network`: registration, `JOIN`, the `:nick!~user@host` prefix, 512-byte
//! lines, channel noise); with `--irc` each end has a TCP connection to a real server, read by a
//! thread that hands the bytes over. The remote executes with `rexd`'s `RemoteBash` executor (the
//! same code as `rexd --irc`), whose children's pipes sit in the one mio poll the loop waits on,
//! together with a waker for the socket reader threads and the engines' next deadline.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender, TryRecvError};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use deskwire::oa1::{
    self, ConnectionConfig, ConnectionEvent, ConnectionOutput, Desk, Event, Pacing, Remote,
    remote_bash,
};
use deskwire::sim::{ClientId, Network};
use mio::{Events, Poll, Token, Waker};
use rexd::remote_bash::{Executor, ExecutorConfig};
use rexd::service::{Settings, TOKEN_BASE};

/// The poll token of the waker the socket reader threads ring.
const WAKER: Token = Token(0);

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Role {
    /// Both ends in this process.
    Both,
    /// Only the desk: send the command, print the result, exit.
    Client,
    /// Only the remote: execute requests until stopped.
    Server,
}

#[derive(Debug, Parser)]
#[command(about = "A RemoteBash round trip through OA1 (RPC over IRC PRIVMSG lines)")]
struct Args {
    /// The shell command to run on the remote end.
    command: Option<String>,
    /// Talk through a real IRC server instead of the in-process one: ircs://HOST:PORT (TLS, the
    /// port 6697 when left out, the certificate verified), irc://HOST:PORT or HOST:PORT (plain
    /// TCP).
    #[arg(long, value_name = "URL|HOST:PORT")]
    irc: Option<String>,
    #[command(flatten)]
    link: rexd::transport::LinkArgs,
    /// The desk channel.
    #[arg(long, default_value = "#desk")]
    channel: String,
    /// Which end(s) to run (client and server need --irc).
    #[arg(long, value_enum, default_value = "both")]
    role: Role,
    /// The desk's nick (the remote accepts requests from this nick only).
    #[arg(long, default_value = "desk")]
    desk_nick: String,
    /// The remote's nick, or a NICK!USER@HOST mask (the desk accepts answers from it only, and
    /// waits for it to be in the channel before sending). The default is `rexd --irc`'s.
    #[arg(long, default_value = "rexd")]
    remote_nick: String,
    /// RemoteBash timeout_sec: how long the desk waits for the answer.
    #[arg(long, default_value_t = 30)]
    timeout_sec: u64,
    /// How long the remote lets a command run (default: 90% of --timeout-sec, so the desk hears
    /// the remote's `ERR timeout` before its own deadline).
    #[arg(long)]
    exec_timeout_sec: Option<f64>,
    /// Use the spec's 240-byte payloads instead of the largest that fits each line.
    #[arg(long)]
    no_adaptive: bool,
    /// Neither offer nor give compressed answers (the v40 wire format, with --no-adaptive).
    #[arg(long)]
    no_compression: bool,
    /// Authenticate every OA1 frame with the shared secret in FILE (mode 600; both ends, or
    /// the one end this process runs; the other needs the same secret).
    #[arg(long, value_name = "FILE")]
    secret_file: Option<std::path::PathBuf>,
    /// Serve the remote end over --irc without --secret-file. RISK: whoever takes the desk's
    /// nick runs commands as this user (an IRC nick is not an identity).
    #[arg(long)]
    unauthenticated: bool,
    /// Do not end a failed command's output with `[exit code: N]` or `[signal: NAME]`.
    #[arg(long)]
    no_exit_marker: bool,
    /// In-process server: inject a noise line after every N channel messages (0: none).
    #[arg(long, default_value_t = 2)]
    noise: u32,
    /// Print each connection event and what the desk waits for on stderr.
    #[arg(long)]
    verbose: bool,
}

/// What the socket reader threads send, with the connection's number (a lost link's late
/// bytes are told from the new one's).
enum Input {
    Bytes(Side, u64, Vec<u8>),
    Closed(Side, u64, String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Side {
    Desk,
    Remote,
}

/// Where an end's bytes go.
enum Wire {
    /// A connection to the in-process server.
    Sim(ClientId),
    /// A connection to a real server (plain or TLS), run on a thread that sends what arrives.
    Link(rexd::transport::LinkThread),
}

impl Wire {
    fn write(&mut self, net: &mut Network, bytes: &[u8]) -> Result<(), String> {
        match self {
            Wire::Sim(client) => {
                net.handle_bytes(*client, bytes);
                Ok(())
            }
            Wire::Link(link) => link.send(bytes.to_vec()),
        }
    }

    /// What the in-process server has for this end (nothing for a TCP wire).
    fn take(&mut self, net: &mut Network) -> Vec<u8> {
        match self {
            Wire::Sim(client) => net.take_bytes(*client),
            Wire::Link(_) => Vec::new(),
        }
    }
}

struct DeskEnd {
    engine: Desk,
    wire: Wire,
    result: Option<(String, bool)>,
}

struct RemoteEnd {
    engine: Remote,
    wire: Wire,
    executor: Executor,
    requests: Vec<Event>,
    /// The number of its connection: 0, then one more per reconnect.
    link: u64,
    /// `--role server`: a lost link is connected again (the config for each new engine, the
    /// waits between tries, when the next is due).
    comeback: Option<Comeback>,
}

/// How `--role server` comes back after a lost link: the core's reconnect policy, as in
/// `rexd --irc`, which also ends when its first connection never got into the channel (a
/// certificate not trusted, a wrong password): retrying would not mend it.
struct Comeback {
    config: ConnectionConfig,
    backoff: deskwire::reconnect::Backoff,
    /// Why the link was lost, once it is (the engine's end or the socket's).
    lost: Option<String>,
    /// When the next connection is tried.
    at: Option<u64>,
    /// Some connection got into the channel.
    ever_ready: bool,
    /// A new connection is on its way in: said when it is.
    reconnecting: bool,
}

struct Clock(Instant);

impl Clock {
    fn now(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("desk: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<ExitCode, String> {
    let clock = Clock(Instant::now());
    let (tx, rx) = mpsc::channel::<Input>();
    let mut poll = Poll::new().map_err(|e| e.to_string())?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| e.to_string())?);
    if args.role != Role::Both && args.irc.is_none() {
        return Err("--role client and --role server need --irc HOST:PORT".into());
    }
    let wants_desk = args.role != Role::Server;
    let command = match (&args.command, wants_desk) {
        (Some(c), true) => Some(c.clone()),
        (None, true) => return Err("give the command to run, e.g. desk 'uname -a'".into()),
        (_, false) => None,
    };

    let in_process = args.irc.is_none();
    if !in_process
        && args.role != Role::Client
        && args.secret_file.is_none()
        && !args.unauthenticated
    {
        return Err(
            "refusing to serve a shell over IRC without a shared secret: give \
                    --secret-file (the desk needs the same), or --unauthenticated to accept that \
                    whoever takes the desk's nick runs commands as this user"
                .into(),
        );
    }
    let secret = match &args.secret_file {
        Some(path) => Some(rexd::irc::read_secret_file(path)?),
        None => None,
    };
    // The Unix time at the clock's zero, for authenticated frames' timestamps.
    let epoch_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
        .saturating_sub(clock.now());
    let link = args.link.settings()?;
    let end_config = |nick: &str, peer: &str| {
        let mut c = ConnectionConfig::new(nick, &args.channel);
        c.session.password = link.server_password.clone();
        c.session.sasl = link.sasl.clone();
        link.keepalive.apply(&mut c.session);
        c.oa1.allowed_sender = Some(peer.to_owned());
        c.oa1.adaptive_payload = !args.no_adaptive;
        c.oa1.compression = !args.no_compression;
        c.oa1.auth = secret
            .as_ref()
            .map(|s| oa1::AuthConfig::new(s.clone(), epoch_unix_ms));
        if in_process {
            // The in-process server has no flood control to respect.
            c.oa1.pacing = Pacing::UNLIMITED;
            c.oa1.server_pacing = false;
        }
        c
    };
    let mut net = Network::new(1).with_noise(args.noise);
    let mut wire_for = |side: Side, host: &str| -> Result<Wire, String> {
        match &args.irc {
            None => Ok(Wire::Sim(net.connect(host))),
            Some(addr) => connect(addr, &link.tls, side, 0, tx.clone(), waker.clone()),
        }
    };
    let mut remote = match args.role != Role::Client {
        true => {
            // Stateless `sh -c` in the current directory (the executor's allowed root).
            let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
            let settings = Settings::for_roots(&[cwd]).map_err(|e| e.to_string())?;
            let exec_timeout = Duration::from_secs_f64(
                args.exec_timeout_sec
                    .unwrap_or(args.timeout_sec as f64 * 0.9),
            );
            let config = end_config(&args.remote_nick, &args.desk_nick);
            let executor = Executor::new(
                settings,
                poll.registry().try_clone().map_err(|e| e.to_string())?,
                ExecutorConfig {
                    timeout_ms: exec_timeout.as_millis() as u64,
                    max_output_bytes: config.oa1.max_message_bytes,
                    exit_marker: !args.no_exit_marker,
                },
            )
            .map_err(|e| e.to_string())?;
            let comeback = (args.role == Role::Server).then(|| Comeback {
                config: config.clone(),
                backoff: deskwire::reconnect::Backoff::new(
                    deskwire::reconnect::ReconnectPolicy::default(),
                    getrandom::u64().unwrap_or(1),
                ),
                lost: None,
                at: None,
                ever_ready: false,
                reconnecting: false,
            });
            Some(RemoteEnd {
                engine: Remote::new(config, clock.now()).map_err(|e| e.to_string())?,
                wire: wire_for(Side::Remote, "10.0.0.2")?,
                executor,
                requests: Vec::new(),
                link: 0,
                comeback,
            })
        }
        false => None,
    };
    let mut desk = match (wants_desk, &command) {
        (true, Some(command)) => {
            let mut engine = Desk::new(
                end_config(&args.desk_nick, &args.remote_nick),
                clock.now(),
                getrandom::u64().map_err(|e| format!("the OS random source: {e}"))?,
            )
            .map_err(|e| e.to_string())?;
            // Asked at once: the engine sends it as soon as it and the remote are in the channel.
            let call = serde_json::json!({"command": command, "timeout_sec": args.timeout_sec});
            remote_bash::call(&mut engine, clock.now(), &call.to_string())
                .map_err(|e| e.to_string())?;
            Some(DeskEnd {
                engine,
                wire: wire_for(Side::Desk, "10.0.0.1")?,
                result: None,
            })
        }
        _ => None,
    };
    let mut events = Events::with_capacity(128);

    loop {
        let now = clock.now();
        // Move bytes and work until nothing moves; the earliest deadline is the next wake-up.
        let mut deadline = now + oa1::IDLE_WAIT_MS;
        loop {
            let mut moved = false;
            if let Some(d) = desk.as_mut() {
                let bytes = d.wire.take(&mut net);
                if !bytes.is_empty() {
                    d.engine.handle_bytes(now, &bytes);
                    moved = true;
                }
                deadline = deadline.min(pump_desk(d, now, &mut net, args.verbose, &mut moved)?);
            }
            if let Some(r) = remote.as_mut() {
                let bytes = r.wire.take(&mut net);
                if !bytes.is_empty() {
                    r.engine.handle_bytes(now, &bytes);
                    moved = true;
                }
                deadline = deadline.min(pump_remote(r, now, &mut net, args.verbose, &mut moved)?);
            }
            if !moved {
                break;
            }
        }
        if let Some(DeskEnd {
            result: Some((text, ok)),
            engine,
            ..
        }) = desk.as_ref()
        {
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            print_stats(engine, remote.as_ref(), &net, in_process, clock.now());
            return Ok(match ok {
                true => exit_code(remote_bash::ending(text)),
                false => ExitCode::FAILURE,
            });
        }
        if let (Some(r), Some(addr)) = (remote.as_mut(), args.irc.as_deref()) {
            if come_back(r, addr, &link.tls, &tx, &waker, clock.now())? {
                // The new engine's registration goes out at once.
                deadline = clock.now();
            }
            if let Some(at) = r.comeback.as_ref().and_then(|c| c.at) {
                deadline = deadline.min(at);
            }
        }
        let busy = remote.as_ref().is_some_and(|r| r.executor.wants_pump());
        let wait = match busy {
            true => Duration::ZERO,
            false => Duration::from_millis(deadline.saturating_sub(clock.now())),
        };
        if args.verbose
            && let Some(d) = desk.as_ref()
        {
            eprintln!(
                "[desk] at {now} ms, {:?}: waiting up to {} ms (until {deadline})",
                d.engine.state(),
                wait.as_millis()
            );
        }
        if let Err(e) = poll.poll(&mut events, Some(wait))
            && e.kind() != std::io::ErrorKind::Interrupted
        {
            return Err(e.to_string());
        }
        let now = clock.now();
        for e in events.iter() {
            if e.token().0 >= TOKEN_BASE
                && let Some(r) = remote.as_mut()
            {
                r.executor.handle_event(
                    now,
                    e.token(),
                    e.is_readable() || e.is_read_closed() || e.is_error(),
                    e.is_writable() || e.is_write_closed(),
                );
            }
        }
        loop {
            match rx.try_recv() {
                Ok(Input::Bytes(Side::Desk, _, bytes)) => {
                    if let Some(d) = desk.as_mut() {
                        d.engine.handle_bytes(now, &bytes);
                    }
                }
                Ok(Input::Bytes(Side::Remote, link, bytes)) => {
                    if let Some(r) = remote.as_mut().filter(|r| r.link == link) {
                        r.engine.handle_bytes(now, &bytes);
                    }
                }
                Ok(Input::Closed(Side::Remote, link, why))
                    if remote.as_ref().is_some_and(|r| r.comeback.is_some()) =>
                {
                    // `--role server`: the link comes back (a late close of an old one is
                    // nothing).
                    if let Some(r) = remote.as_mut().filter(|r| r.link == link) {
                        r.engine.handle_eof(now);
                        let why = server_reason(|| r.engine.poll_output(now)).unwrap_or(why);
                        if let Some(comeback) = r.comeback.as_mut() {
                            comeback.lost.get_or_insert(why);
                        }
                    }
                }
                Ok(Input::Closed(side, _, why)) => {
                    let reason = match side {
                        Side::Desk => desk.as_mut().and_then(|d| {
                            d.engine.handle_eof(now);
                            server_reason(|| d.engine.poll_output(now))
                        }),
                        Side::Remote => remote.as_mut().and_then(|r| {
                            r.engine.handle_eof(now);
                            server_reason(|| r.engine.poll_output(now))
                        }),
                    };
                    return Err(format!(
                        "{side:?} connection closed: {}",
                        reason.unwrap_or(why)
                    ));
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) if in_process => break,
                Err(TryRecvError::Disconnected) => return Err("input channel closed".into()),
            }
        }
    }
}

/// `--role server` after a lost link: the commands of the lost link are ended (their answers
/// have nowhere to go: OA1 promises nothing across reconnects), and a new engine is connected
/// once the policy's wait is over, and again after each failed try. Whether a new engine was
/// connected; an error when the first link ended before it got into the channel.
fn come_back(
    r: &mut RemoteEnd,
    addr: &str,
    tls: &rexd::transport::TlsOptions,
    tx: &Sender<Input>,
    waker: &Arc<Waker>,
    now: u64,
) -> Result<bool, String> {
    let Some(comeback) = r.comeback.as_mut() else {
        return Ok(false);
    };
    let Some(lost) = comeback.lost.as_deref() else {
        return Ok(false);
    };
    if !comeback.ever_ready {
        return Err(format!(
            "remote: the IRC link ended before it got into the channel: {lost}"
        ));
    }
    if comeback.at.is_none() {
        r.executor.cancel_all(now);
        let delay = comeback.backoff.next_delay_ms();
        eprintln!("remote: IRC link lost ({lost}); reconnecting in {delay} ms");
        comeback.at = Some(now + delay);
    }
    if comeback.at.is_some_and(|at| now < at) {
        return Ok(false);
    }
    match connect(
        addr,
        tls,
        Side::Remote,
        r.link + 1,
        tx.clone(),
        waker.clone(),
    ) {
        Ok(wire) => match Remote::new(comeback.config.clone(), now) {
            Ok(engine) => {
                r.engine = engine;
                r.wire = wire;
                r.link += 1;
                comeback.lost = None;
                comeback.at = None;
                comeback.reconnecting = true;
                return Ok(true);
            }
            Err(e) => eprintln!("remote: {e}"),
        },
        Err(e) => {
            let delay = comeback.backoff.next_delay_ms();
            eprintln!("remote: {e}; trying again in {delay} ms");
            comeback.at = Some(now + delay);
        }
    }
    Ok(false)
}

/// The demo's exit as ssh's would be: the command's exit code, 128 + the number of the signal
/// that ended it, 124 (as `timeout` and `rex`) when the answer was cut at the timeout, and 255
/// (as ssh's lost connection) when the remote or the link went away in the middle of it.
fn exit_code(ending: remote_bash::Ending<'_>) -> ExitCode {
    let code = ending.exit_status();
    // An exit status is a byte; a code that would read as success there is a failure still.
    match u8::try_from(code & 0xFF) {
        Ok(0) if code != 0 => ExitCode::FAILURE,
        Ok(byte) => ExitCode::from(byte),
        Err(_) => ExitCode::FAILURE,
    }
}

/// Why the server ended a link whose socket closed: the engine, told of the close, ends its
/// session with the server's last `ERROR` words when it sent some (a wrong password's), which
/// the socket's close alone does not say.
fn server_reason(mut next: impl FnMut() -> ConnectionOutput) -> Option<String> {
    loop {
        match next() {
            // The engine's own "the connection was lost" says less than the socket's reason.
            ConnectionOutput::Event(ConnectionEvent::Irc(
                deskwire::irc::SessionEvent::Disconnected { reason },
            )) => {
                return (reason != deskwire::irc::DisconnectReason::ConnectionLost)
                    .then(|| reason.to_string());
            }
            ConnectionOutput::Timeout(_) => return None,
            _ => {}
        }
    }
}

/// Drains the desk engine; returns its deadline.
fn pump_desk(
    d: &mut DeskEnd,
    now: u64,
    net: &mut Network,
    verbose: bool,
    moved: &mut bool,
) -> Result<u64, String> {
    loop {
        match d.engine.poll_output(now) {
            ConnectionOutput::Transmit(bytes) => {
                d.wire.write(net, &bytes)?;
                *moved = true;
            }
            ConnectionOutput::Event(ConnectionEvent::Oa1(event)) => {
                *moved = true;
                if let Some((_, text)) = remote_bash::tool_result(&event) {
                    let ok = matches!(event, Event::Response { .. });
                    d.result = Some((text, ok));
                }
            }
            ConnectionOutput::Event(ConnectionEvent::Irc(
                deskwire::irc::SessionEvent::Disconnected { reason },
            )) => return Err(format!("desk: IRC session ended: {reason}")),
            ConnectionOutput::Event(event) => {
                *moved = true;
                if verbose {
                    eprintln!("[desk] at {now} ms: {event:?}");
                }
            }
            ConnectionOutput::Timeout(t) => return Ok(t),
        }
    }
}

/// Drains the remote engine and feeds its executor until neither moves; returns the deadline.
fn pump_remote(
    r: &mut RemoteEnd,
    now: u64,
    net: &mut Network,
    verbose: bool,
    moved: &mut bool,
) -> Result<u64, String> {
    loop {
        r.executor.drive(now, &mut r.engine, &mut r.requests);
        let mut progressed = false;
        let deadline = loop {
            match r.engine.poll_output(now) {
                ConnectionOutput::Transmit(bytes) => {
                    r.wire.write(net, &bytes)?;
                    progressed = true;
                }
                ConnectionOutput::Event(ConnectionEvent::Oa1(event)) => {
                    match &event {
                        Event::Request { id, payload, .. } => {
                            let source = r.engine.server().source(id).unwrap_or("?");
                            eprintln!("remote: {source} asks {id}: {payload}")
                        }
                        Event::Cancelled { id, reason } => {
                            eprintln!("remote: {id} cancelled ({reason})")
                        }
                        _ => {}
                    }
                    r.requests.push(event);
                    progressed = true;
                }
                ConnectionOutput::Event(ConnectionEvent::Irc(
                    deskwire::irc::SessionEvent::Disconnected { reason },
                )) => match r.comeback.as_mut() {
                    Some(comeback) => {
                        comeback
                            .lost
                            .get_or_insert(format!("IRC session ended: {reason}"));
                    }
                    None => return Err(format!("remote: IRC session ended: {reason}")),
                },
                ConnectionOutput::Event(event) => {
                    progressed = true;
                    if let ConnectionEvent::Link(oa1::LinkEvent::StateChanged {
                        state: oa1::ConnectionState::Ready,
                    }) = &event
                        && let Some(comeback) = r.comeback.as_mut()
                    {
                        comeback.backoff.reset();
                        comeback.ever_ready = true;
                        if std::mem::take(&mut comeback.reconnecting) {
                            eprintln!("remote: connected again");
                        }
                    }
                    if verbose {
                        eprintln!("[remote] {event:?}");
                    }
                }
                ConnectionOutput::Timeout(t) => break t,
            }
        };
        *moved |= progressed;
        if !progressed {
            let exec_deadline = r.executor.next_deadline().unwrap_or(u64::MAX);
            return Ok(deadline.min(exec_deadline));
        }
    }
}

/// Connects one end to a real IRC server through rexd's transport (the same link `rexd --irc`
/// uses); its thread hands over the bytes that arrive.
fn connect(
    addr: &str,
    tls: &rexd::transport::TlsOptions,
    side: Side,
    link: u64,
    tx: Sender<Input>,
    waker: Arc<Waker>,
) -> Result<Wire, String> {
    use rexd::transport::{Delivery, IrcStream, LinkThread, Target};
    let target = Target::parse(addr).map_err(|e| e.to_string())?;
    let stream = IrcStream::connect(&target, tls).map_err(|e| e.to_string())?;
    let link = LinkThread::spawn(stream, move |delivery| {
        let input = match delivery {
            Delivery::Bytes(bytes) => Input::Bytes(side, link, bytes),
            Delivery::Closed(why) => Input::Closed(side, link, why),
        };
        if tx.send(input).is_ok() {
            let _ = waker.wake();
        }
    })
    .map_err(|e| e.to_string())?;
    Ok(Wire::Link(link))
}

fn print_stats(desk: &Desk, remote: Option<&RemoteEnd>, net: &Network, in_process: bool, ms: u64) {
    let c = desk.stats().oa1;
    let mut line = format!(
        "[desk] frames out {} in {}, payload bytes out {}, ignored lines {}",
        c.frames_out, c.frames_in, c.payload_bytes_out, c.ignored
    );
    let refused = [
        ("unauthenticated", c.unauthenticated),
        ("authenticated without a secret", c.auth_unexpected),
        ("forged", c.forged),
        ("expired", c.expired),
        ("replayed", c.replayed),
    ];
    for (what, n) in refused.iter().filter(|(_, n)| *n > 0) {
        line.push_str(&format!(", {what} {n}"));
    }
    if c.compressed_in > 0 {
        line.push_str(&format!(", compressed answers {}", c.compressed_in));
    }
    if let Some(r) = remote {
        let s = r.engine.stats().oa1;
        line.push_str(&format!(
            "; [remote] frames out {} in {}, payload bytes out {}",
            s.frames_out, s.frames_in, s.payload_bytes_out
        ));
    }
    if in_process {
        let rs = net.stats();
        line.push_str(&format!(
            "; [channel] relayed {}, noise {}, longest line {} B",
            rs.relayed, rs.noise, rs.longest_line
        ));
    }
    line.push_str(&format!("; {ms} ms"));
    eprintln!("{line}");
}
