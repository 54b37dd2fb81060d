//! The desk demo: a `RemoteBash` round trip through OA1.
//!
//! ```text
//! cargo run --release --bin desk -- 'uname -a'
//! cargo run --release --bin desk -- --irc 127.0.0.1:6667 --channel '#desk' 'uname -a'
//! cargo run --release --bin desk -- --irc irc.example:6667 --role server   # the remote, keeps serving
//! cargo run --release --bin desk -- --irc irc.example:6667 --role client 'df -h'
//! ```
//!
//! Without `--irc`, the desk client and the remote executor talk through an in-process channel
//! that behaves like an IRC server (`deskwire::sim::Relay`: adds the prefix, enforces 512 bytes,
//! injects channel noise). With `--irc`, each end is a real IRC connection driven by the
//! `deskwire::irc::Session` helper. Both ends are the sans-IO engines of `deskwire::oa1`; the
//! remote end executes with `rexd`'s `RemoteBash` executor (the same code as `rexd --irc`),
//! whose children's pipes sit in the one mio poll the loop waits on, together with a waker for
//! the socket reader threads and the engines' next deadline.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender, TryRecvError};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use deskwire::irc::{
    DecodedLine, LineDecoder, Session, SessionConfig, SessionEvent, SessionOutput,
};
use deskwire::oa1::{self, Client, Config, Event, Output, Pacing, Server, remote_bash};
use deskwire::sim::Relay;
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
    /// Talk through a real IRC server at HOST:PORT instead of the in-process channel.
    #[arg(long, value_name = "HOST:PORT")]
    irc: Option<String>,
    /// The desk channel.
    #[arg(long, default_value = "#desk")]
    channel: String,
    /// Which end(s) to run (client and server need --irc).
    #[arg(long, value_enum, default_value = "both")]
    role: Role,
    /// The desk's nick (the remote accepts requests from this nick only).
    #[arg(long, default_value = "desk")]
    desk_nick: String,
    /// The remote's nick (the desk accepts answers from this nick only).
    #[arg(long, default_value = "deskbot")]
    remote_nick: String,
    /// RemoteBash timeout_sec: how long the desk waits for the answer.
    #[arg(long, default_value_t = 30)]
    timeout_sec: u64,
    /// How long the remote lets a command run (default: 90% of --timeout-sec, so the desk hears
    /// the remote's `ERR timeout` before its own deadline).
    #[arg(long)]
    exec_timeout_sec: Option<f64>,
    /// Use the largest payload that fits each line instead of 240 bytes.
    #[arg(long)]
    adaptive: bool,
    /// In-process channel: inject a noise line after every N messages (0: none).
    #[arg(long, default_value_t = 2)]
    noise: u32,
}

/// What the socket reader threads send.
enum Input {
    Line(End, Vec<u8>),
    Closed(End, String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum End {
    Desk,
    Remote,
}

/// Where an end's lines go.
enum Wire {
    /// The in-process channel, shared by both ends (owned by the loop).
    Relay,
    /// A real IRC connection and its session helper.
    Irc {
        socket: TcpStream,
        session: Box<Session>,
        joined: bool,
    },
}

struct Desk {
    client: Client,
    wire: Wire,
    request: Option<String>,
    result: Option<(String, bool)>,
}

struct Remote {
    server: Server,
    wire: Wire,
    executor: Executor,
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
    let end_config = |nick: &str, peer: &str| {
        let mut c = Config::new(&args.channel, nick);
        c.allowed_sender = Some(peer.to_owned());
        c.adaptive_payload = args.adaptive;
        if in_process {
            // The in-process channel has no flood control to respect.
            c.pacing = Pacing::UNLIMITED;
        }
        c
    };
    let mut relay = Relay::new(&args.channel, 1).with_noise(args.noise);
    let mut wire_for = |end: End, nick: &str| -> Result<Wire, String> {
        match &args.irc {
            None => {
                relay.join(nick, nick, "127.0.0.1");
                Ok(Wire::Relay)
            }
            Some(addr) => connect(addr, end, nick, &args.channel, tx.clone(), waker.clone()),
        }
    };
    let mut desk = match wants_desk {
        true => Some(Desk {
            client: Client::new(end_config(&args.desk_nick, &args.remote_nick), seed()),
            wire: wire_for(End::Desk, &args.desk_nick)?,
            request: None,
            result: None,
        }),
        false => None,
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
            let executor = Executor::new(
                settings,
                poll.registry().try_clone().map_err(|e| e.to_string())?,
                ExecutorConfig {
                    timeout_ms: exec_timeout.as_millis() as u64,
                    max_output_bytes: oa1::Config::new("#", "x").max_message_bytes,
                },
            )
            .map_err(|e| e.to_string())?;
            Some(Remote {
                server: Server::new(end_config(&args.remote_nick, &args.desk_nick)),
                wire: wire_for(End::Remote, &args.remote_nick)?,
                executor,
            })
        }
        false => None,
    };
    let mut events = Events::with_capacity(128);
    let relay_nicks = (args.desk_nick.clone(), args.remote_nick.clone());

    loop {
        let now = clock.now();
        // Send the request once the desk is on the channel (and the remote too, in one process).
        if let (Some(d), Some(command)) = (desk.as_mut(), command.as_ref()) {
            let remote_ready = remote.as_ref().is_none_or(|r| r.wire.ready());
            if d.request.is_none() && d.wire.ready() && remote_ready {
                let call = serde_json::json!({"command": command, "timeout_sec": args.timeout_sec});
                let id = remote_bash::call(&mut d.client, now, &call.to_string())
                    .map_err(|e| e.to_string())?;
                d.request = Some(id);
            }
        }
        // Pump both engines and the in-process channel until nothing moves.
        let mut deadline = now + oa1::IDLE_WAIT_MS;
        loop {
            let mut moved = false;
            if let Some(d) = desk.as_mut() {
                deadline = deadline.min(pump_desk(d, now, &mut relay, &relay_nicks.0, &mut moved)?);
            }
            if let Some(r) = remote.as_mut() {
                deadline =
                    deadline.min(pump_remote(r, now, &mut relay, &relay_nicks.1, &mut moved)?);
            }
            if in_process {
                if let Some(d) = desk.as_mut() {
                    while let Some(line) = relay.recv(&relay_nicks.0) {
                        d.client.handle_line(now, line.as_bytes());
                        moved = true;
                    }
                }
                if let Some(r) = remote.as_mut() {
                    while let Some(line) = relay.recv(&relay_nicks.1) {
                        r.server.handle_line(now, line.as_bytes());
                        moved = true;
                    }
                }
            }
            if !moved {
                break;
            }
        }
        if let Some(Desk {
            result: Some((text, ok)),
            client,
            ..
        }) = desk.as_ref()
        {
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            print_stats(client, remote.as_ref(), &relay, in_process, clock.now());
            return Ok(if *ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        let busy = remote.as_ref().is_some_and(|r| r.executor.wants_pump());
        let wait = match busy {
            true => Duration::ZERO,
            false => Duration::from_millis(deadline.saturating_sub(clock.now())),
        };
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
                Ok(input) => handle_input(input, now, desk.as_mut(), remote.as_mut())?,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) if in_process => break,
                Err(TryRecvError::Disconnected) => return Err("input channel closed".into()),
            }
        }
    }
}

/// A different id sequence per run, so two desks on one channel do not collide.
fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        ^ u64::from(std::process::id())
}

fn handle_input(
    input: Input,
    now: u64,
    desk: Option<&mut Desk>,
    remote: Option<&mut Remote>,
) -> Result<(), String> {
    match input {
        Input::Line(End::Desk, line) => {
            if let Some(d) = desk {
                if let Wire::Irc { session, .. } = &mut d.wire {
                    session.handle_line(now, &line);
                }
                d.client.handle_line(now, &line);
            }
        }
        Input::Line(End::Remote, line) => {
            if let Some(r) = remote {
                if let Wire::Irc { session, .. } = &mut r.wire {
                    session.handle_line(now, &line);
                }
                r.server.handle_line(now, &line);
            }
        }
        Input::Closed(end, why) => return Err(format!("{end:?} connection closed: {why}")),
    }
    Ok(())
}

fn pump_desk(
    d: &mut Desk,
    now: u64,
    relay: &mut Relay,
    nick: &str,
    moved: &mut bool,
) -> Result<u64, String> {
    let session_deadline = d.wire.pump_session(now, moved)?;
    loop {
        match d.client.poll_output(now) {
            Output::Transmit(line) => {
                d.wire.send(relay, nick, &line)?;
                *moved = true;
            }
            Output::Event(event) => {
                *moved = true;
                if let Some((_, text)) = remote_bash::tool_result(&event) {
                    let ok = matches!(event, Event::Response { .. });
                    d.result = Some((text, ok));
                }
            }
            Output::Timeout(t) => return Ok(t.min(session_deadline)),
        }
    }
}

fn pump_remote(
    r: &mut Remote,
    now: u64,
    relay: &mut Relay,
    nick: &str,
    moved: &mut bool,
) -> Result<u64, String> {
    let session_deadline = r.wire.pump_session(now, moved)?;
    // The server and the executor feed each other until neither has anything new.
    let mut requests = Vec::new();
    loop {
        r.executor.drive(now, &mut r.server, &mut requests);
        let mut progressed = false;
        let deadline = loop {
            match r.server.poll_output(now) {
                Output::Transmit(line) => {
                    r.wire.send(relay, nick, &line)?;
                    progressed = true;
                }
                Output::Event(event) => {
                    match &event {
                        Event::Request {
                            id,
                            sender,
                            payload,
                        } => {
                            eprintln!("remote: {sender} asks {id}: {payload}")
                        }
                        Event::Cancelled { id, reason } => {
                            eprintln!("remote: {id} cancelled ({reason})")
                        }
                        _ => {}
                    }
                    requests.push(event);
                    progressed = true;
                }
                Output::Timeout(t) => break t,
            }
        };
        *moved |= progressed;
        if !progressed {
            let exec_deadline = r.executor.next_deadline().unwrap_or(u64::MAX);
            return Ok(deadline.min(session_deadline).min(exec_deadline));
        }
    }
}

impl Wire {
    fn ready(&self) -> bool {
        match self {
            Wire::Relay => true,
            Wire::Irc { joined, .. } => *joined,
        }
    }

    fn send(&mut self, relay: &mut Relay, nick: &str, line: &str) -> Result<(), String> {
        match self {
            Wire::Relay => relay.send(nick, line).map_err(|e| e.to_string()),
            Wire::Irc { socket, .. } => write_line(socket, line),
        }
    }

    /// Runs the IRC session helper (registration, PING, JOIN); returns its deadline.
    fn pump_session(&mut self, now: u64, moved: &mut bool) -> Result<u64, String> {
        let Wire::Irc {
            socket,
            session,
            joined,
        } = self
        else {
            return Ok(u64::MAX);
        };
        loop {
            match session.poll_output(now) {
                SessionOutput::Transmit(line) => {
                    write_line(socket, &line)?;
                    *moved = true;
                }
                SessionOutput::Event(SessionEvent::Joined { .. }) => {
                    *joined = true;
                    *moved = true;
                }
                SessionOutput::Event(SessionEvent::Disconnected { reason }) => {
                    return Err(format!("IRC session ended: {reason:?}"));
                }
                SessionOutput::Event(_) => *moved = true,
                SessionOutput::Timeout(t) => return Ok(t),
            }
        }
    }
}

fn write_line(socket: &mut TcpStream, line: &str) -> Result<(), String> {
    let mut bytes = Vec::with_capacity(line.len() + 2);
    bytes.extend_from_slice(line.as_bytes());
    bytes.extend_from_slice(b"\r\n");
    socket.write_all(&bytes).map_err(|e| e.to_string())
}

/// Connects one end to a real IRC server; a reader thread turns its bytes into lines.
fn connect(
    addr: &str,
    end: End,
    nick: &str,
    channel: &str,
    tx: Sender<Input>,
    waker: Arc<Waker>,
) -> Result<Wire, String> {
    let socket = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    socket.set_nodelay(true).ok();
    let mut reader = socket.try_clone().map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        let mut decoder = LineDecoder::default();
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => {
                    let _ = tx.send(Input::Closed(end, "server closed the connection".into()));
                    let _ = waker.wake();
                    return;
                }
                Ok(n) => n,
                Err(e) => {
                    let _ = tx.send(Input::Closed(end, e.to_string()));
                    let _ = waker.wake();
                    return;
                }
            };
            decoder.feed(&buf[..n]);
            while let Some(decoded) = decoder.next_line() {
                if let DecodedLine::Line(line) = decoded
                    && tx.send(Input::Line(end, line.to_vec())).is_err()
                {
                    return;
                }
            }
            let _ = waker.wake();
        }
    });
    let session = Box::new(Session::new(SessionConfig::new(nick, &[channel]), 0));
    Ok(Wire::Irc {
        socket,
        session,
        joined: false,
    })
}

fn print_stats(client: &Client, remote: Option<&Remote>, relay: &Relay, in_process: bool, ms: u64) {
    let c = client.stats();
    let mut line = format!(
        "[desk] frames out {} in {}, payload bytes out {}, ignored lines {}",
        c.frames_out, c.frames_in, c.payload_bytes_out, c.ignored
    );
    if let Some(r) = remote {
        let s = r.server.stats();
        line.push_str(&format!(
            "; [remote] frames out {} in {}, payload bytes out {}",
            s.frames_out, s.frames_in, s.payload_bytes_out
        ));
    }
    if in_process {
        let rs = relay.stats();
        line.push_str(&format!(
            "; [channel] relayed {}, noise {}, longest line {} B",
            rs.relayed, rs.noise, rs.longest_line
        ));
    }
    line.push_str(&format!("; {ms} ms"));
    eprintln!("{line}");
}
