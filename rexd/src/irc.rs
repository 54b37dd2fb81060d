//! `rexd --irc HOST:PORT --channel '#desk' --nick NAME`: the daemon as the remote end of OA1
//! (`oa1-irc-rpc.md` §11 "Remote": `IrcRpcServer` + `RemoteBashExecutor`).
//!
//! One mio loop holds the IRC socket, the children's pipes and the timers. The core's IRC
//! [`Session`] registers, joins and keeps the link alive; the core's OA1 [`Server`] reassembles
//! requests, paces the answer lines and learns our prefix; the [`Executor`] runs each request
//! as a fresh `sh -c` within the allowed roots.

use std::io::{self, Read, Write};
use std::net::ToSocketAddrs;
use std::time::{Duration, Instant};

use deskwire::irc::{
    DecodedLine, LineDecoder, Session, SessionConfig, SessionEvent, SessionOutput,
};
use deskwire::oa1::{self, Output, Server};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::frontend;
use crate::remote_bash::{Executor, ExecutorConfig};
use crate::service::Settings;

const SOCKET: Token = Token(0);

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct IrcOptions {
    /// `HOST:PORT` of the IRC server.
    pub addr: String,
    /// The desk channel.
    pub channel: String,
    /// Our nick.
    pub nick: String,
    /// Accept requests from this nick only (spec §9 `allowed_sender_nick`).
    pub allowed_sender: Option<String>,
    /// How long a command may run before `ERR timeout`.
    pub timeout_ms: u64,
    /// Use the largest payload that fits each line instead of 240 bytes.
    pub adaptive: bool,
    /// Outgoing line pacing.
    pub pacing: oa1::Pacing,
}

/// Serves `RemoteBash` on the channel until the IRC link ends (an error says why).
pub fn serve_irc(settings: Settings, options: &IrcOptions) -> io::Result<()> {
    let clock = Instant::now();
    let now_ms = || clock.elapsed().as_millis() as u64;
    let mut poll = Poll::new()?;
    let addr = options
        .addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
    let std_socket = std::net::TcpStream::connect(addr)?;
    std_socket.set_nodelay(true)?;
    std_socket.set_nonblocking(true)?;
    let mut socket = TcpStream::from_std(std_socket);
    poll.registry()
        .register(&mut socket, SOCKET, Interest::READABLE | Interest::WRITABLE)?;
    let mut session = Session::new(
        SessionConfig::new(&options.nick, &[&options.channel]),
        now_ms(),
    );
    let mut config = oa1::Config::new(&options.channel, &options.nick);
    config.allowed_sender = options.allowed_sender.clone();
    config.adaptive_payload = options.adaptive;
    config.pacing = options.pacing;
    let cap = config.max_message_bytes;
    let mut server = Server::new(config);
    let mut executor = Executor::new(
        settings,
        poll.registry().try_clone()?,
        ExecutorConfig {
            timeout_ms: options.timeout_ms,
            max_output_bytes: cap,
        },
    )
    .map_err(io::Error::other)?;
    let mut decoder = LineDecoder::default();
    let mut out: Vec<u8> = Vec::new();
    let mut events = Events::with_capacity(128);
    let mut buf = vec![0u8; 16 * 1024];
    let mut oa1_events = Vec::new();
    let mut readable = true;

    loop {
        let now = now_ms();
        while readable {
            match socket.read(&mut buf) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "IRC server closed the connection",
                    ));
                }
                Ok(n) => {
                    decoder.feed(&buf[..n]);
                    while let Some(line) = decoder.next_line() {
                        if let DecodedLine::Line(line) = line {
                            session.handle_line(now, line);
                            server.handle_line(now, line);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        session.handle_timeout(now);
        let session_deadline = loop {
            match session.poll_output(now) {
                SessionOutput::Transmit(line) => push_line(&mut out, &line),
                SessionOutput::Event(SessionEvent::Joined { channel }) => {
                    crate::log::info(&format!("joined {channel} as {}", options.nick));
                }
                SessionOutput::Event(SessionEvent::Disconnected { reason }) => {
                    return Err(io::Error::other(format!("IRC session ended: {reason:?}")));
                }
                SessionOutput::Event(_) => {}
                SessionOutput::Timeout(t) => break t,
            }
        };
        // The server and the executor feed each other until neither has anything new.
        let server_deadline = loop {
            executor.drive(now, &mut server, &mut oa1_events);
            let mut moved = false;
            let deadline = loop {
                match server.poll_output(now) {
                    Output::Transmit(line) => {
                        push_line(&mut out, &line);
                        moved = true;
                    }
                    Output::Event(e) => {
                        match &e {
                            oa1::Event::Request {
                                id,
                                sender,
                                payload,
                            } => crate::log::info(&format!("{sender} asks {id}: {payload}")),
                            oa1::Event::Cancelled { id, reason } => {
                                crate::log::info(&format!("{id} cancelled ({reason})"))
                            }
                            _ => {}
                        }
                        oa1_events.push(e);
                        moved = true;
                    }
                    Output::Timeout(t) => break t,
                }
            };
            if !moved {
                break deadline;
            }
        };
        while !out.is_empty() {
            match socket.write(&out) {
                Ok(n) => {
                    out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let mut wake = session_deadline.min(server_deadline);
        if let Some(t) = executor.next_deadline() {
            wake = wake.min(t);
        }
        let timeout = if executor.wants_pump() {
            Duration::ZERO
        } else {
            Duration::from_millis(wake.saturating_sub(now_ms()))
        };
        if !frontend::wait(&mut poll, &mut events, Some(timeout))? {
            continue;
        }
        let now = now_ms();
        for e in events.iter() {
            match e.token() {
                SOCKET => readable |= e.is_readable() || e.is_read_closed(),
                t if frontend::is_child_token(t) => {
                    let (pipe_readable, pipe_writable) = frontend::child_readiness(e);
                    executor.handle_event(now, t, pipe_readable, pipe_writable);
                }
                _ => {}
            }
        }
    }
}

fn push_line(out: &mut Vec<u8>, line: &str) {
    out.extend_from_slice(line.as_bytes());
    out.extend_from_slice(b"\r\n");
}
