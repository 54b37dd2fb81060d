//! `rexd --irc ircs://HOST:PORT --channel '#desk' --nick NAME`: the daemon as the remote end of OA1
//! (`docs/oa1.md`, "`RemoteBash`": the remote that answers the desk's requests), in every
//! channel given (`--channel` again and again) and, with `--device-code`, in every channel the
//! VR Offices game binds to the code, found by `LIST`.
//!
//! One mio loop holds the IRC socket, the children's pipes and the timers. The core's OA1
//! engine for many channels on one connection, [`MultiRemote`], registers, joins, keeps the
//! link alive, reassembles requests and paces the answer lines (one pacing for the connection,
//! shared in turns by its channels); the [`Executor`] runs each request as a fresh `sh -c`
//! within the allowed roots.

use std::io;
use std::time::{Duration, Instant};

use crate::transport::{IrcStream, Keepalive, Target, TlsOptions};
use deskwire::irc::SessionEvent;
use deskwire::oa1::{
    self, ConnectionConfig, ConnectionEvent, DeviceCode, DiscoveryEvent, LocalError, MultiOutput,
    MultiRemote, Responder,
};
use deskwire::reconnect::{Backoff, ReconnectPolicy};
use mio::{Events, Interest, Poll, Token};

use crate::frontend;
use crate::remote_bash::{Executor, ExecutorConfig};
use crate::service::Settings;

const SOCKET: Token = Token(0);
const SIGNAL: Token = Token(1);

/// How a link's turn ended early.
enum Stop {
    /// The link is lost (the error says why); the caller reconnects.
    Lost(io::Error),
    /// SIGTERM, SIGINT or SIGHUP: end every process and exit.
    Signal(i32),
}

impl From<io::Error> for Stop {
    fn from(e: io::Error) -> Self {
        Stop::Lost(e)
    }
}

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct IrcOptions {
    /// The IRC server: `ircs://HOST[:PORT]` (TLS), `irc://HOST[:PORT]` or `HOST:PORT`.
    pub addr: String,
    /// TLS settings for an `ircs://` server.
    pub tls: TlsOptions,
    /// The server password (`PASS`).
    pub server_password: Option<String>,
    /// Log in with SASL while registering.
    pub sasl: Option<deskwire::irc::SaslConfig>,
    /// The desk channels served from the start (none is allowed with a device code).
    pub channels: Vec<String>,
    /// Device-code binding: serve every channel the game binds to this code, found by `LIST`
    /// every `list_interval_ms`.
    pub device_code: Option<DeviceCode>,
    /// How often to `LIST` for the device code's channels (at least 5 s).
    pub list_interval_ms: u64,
    /// Our nick.
    pub nick: String,
    /// Accept requests from this nick or `nick!user@host` mask only. Neither proves who asks:
    /// see [`IrcOptions::unauthenticated`].
    pub allowed_sender: Option<String>,
    /// Serve without a shared secret. Anyone who can take the allowed nick once its owner is
    /// gone (or, without `allowed_sender`, anyone in the channel) then runs commands as this
    /// user; [`serve_irc`] refuses to start with neither a secret nor this.
    pub unauthenticated: bool,
    /// How long a command may run before `ERR timeout`.
    pub timeout_ms: u64,
    /// Use the largest payload that fits each line instead of 240 bytes.
    pub adaptive: bool,
    /// Outgoing line pacing; `None`: the default, or what was measured for the server once
    /// it says what it is (`oa1::Pacing::for_server`).
    pub pacing: Option<oa1::Pacing>,
    /// Answer compressed when the desk offers it (OA1 `ACCEPT`; see `deskwire::oa1::compress`).
    pub compression: bool,
    /// A shared secret: every frame authenticated both ways (see `deskwire::oa1::auth`).
    pub secret: Option<Vec<u8>>,
    /// End a failed command's output with `[exit code: N]` or `[signal: NAME]`.
    pub exit_marker: bool,
    /// The Unix time (ms) of the loop's clock zero; [`serve_irc`] sets it.
    pub epoch_unix_ms: u64,
    /// The keepalive: how a dead link is noticed.
    pub keepalive: Keepalive,
    /// How a lost link comes back.
    pub reconnect: ReconnectPolicy,
}

/// Serves `RemoteBash` on the channel until stopped.
///
/// A link that is lost after we joined is reconnected with `options.reconnect` (by default after
/// 1, 2, 4, 8, 10, 10 … s, each plus up to half at random; back to 1 s once a connection joins
/// again: [`deskwire::reconnect`]); the commands of the lost link are killed, since their answers have
/// nowhere to go (OA1 makes no promise across reconnects; the desk times the requests out). Only
/// a first connection that never joins is an error, so a wrong address or channel fails fast.
pub fn serve_irc(settings: Settings, options: &IrcOptions) -> io::Result<()> {
    let account = options
        .allowed_sender
        .as_deref()
        .and_then(|a| a.strip_prefix("account:"));
    // An account is the server's word about the sender: it counts only from a connection that
    // is itself logged in (SASL, required), so the server is the one we meant to trust.
    let by_account = account.is_some() && options.sasl.as_ref().is_some_and(|s| s.required);
    if options.secret.is_none() && !options.unauthenticated && !by_account {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            if account.is_some() {
                "--allow-from account:NAME needs this connection logged in too (--sasl-user with \
                 --sasl-password-file, or --sasl-external; not --sasl-optional): give those, \
                 or --secret-file"
            } else {
                "refusing to serve a shell over IRC without a shared secret: give --secret-file \
                 (the desk needs the same secret), --allow-from account:NAME with a SASL login, \
                 or --unauthenticated to accept that whoever holds the allowed nick runs \
                 commands as this user"
            },
        ));
    }
    let target = Target::parse(&options.addr)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    // Every channel and the rest of the configuration, checked before any connection.
    new_remote(options, 0)?;
    let loopback = target.host == "localhost"
        || target
            .host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match (target.tls, options.tls.insecure_skip_verify) {
        (false, _) if loopback => {}
        (false, _) => crate::log::warn(&format!(
            "{target} is plain TCP: commands, output and passwords cross in clear text; use \
             ircs:// where the server has TLS"
        )),
        (true, true) => crate::log::warn(&format!(
            "{target}: TLS WITHOUT VERIFYING THE SERVER (--irc-insecure-skip-verify): anyone \
             on the path can pose as the server"
        )),
        (true, false) => {}
    }
    crate::log::info(&match (&options.secret, &options.allowed_sender) {
        (None, Some(_)) if by_account => format!(
            "serving the account {} as the server says, over a connection logged in with SASL \
             (the server's word, as far as it and its links are trusted; a frame is not proved \
             without --secret-file)",
            account.unwrap_or_default()
        ),
        (Some(_), Some(from)) => format!("serving frames sealed with the secret, from {from}"),
        (Some(_), None) => "serving frames sealed with the secret, from anyone".to_owned(),
        (None, Some(from)) => {
            format!("UNAUTHENTICATED: serving whoever matches {from}; a nick is not an identity")
        }
        (None, None) => "UNAUTHENTICATED: serving anyone in the channel".to_owned(),
    });
    let clock = Instant::now();
    let now_ms = || clock.elapsed().as_millis() as u64;
    // The Unix time at `now_ms() == 0`, for authenticated frames' timestamps.
    let epoch_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let options = &IrcOptions {
        epoch_unix_ms,
        ..options.clone()
    };
    let mut poll = Poll::new()?;
    let mut executor = Executor::new(
        settings,
        poll.registry().try_clone()?,
        ExecutorConfig {
            timeout_ms: options.timeout_ms,
            max_output_bytes: connection_config(options).oa1.max_message_bytes,
            exit_marker: options.exit_marker,
        },
    )
    .map_err(io::Error::other)?;
    let mut events = Events::with_capacity(128);
    // A daemon told to stop ends its commands first, as rexd --stdio does.
    let mut signals =
        signal_hook_mio::v1_0::Signals::new([libc::SIGTERM, libc::SIGINT, libc::SIGHUP])?;
    poll.registry()
        .register(&mut signals, SIGNAL, Interest::READABLE)?;
    let served = serve_links(
        options,
        &mut poll,
        &mut events,
        &mut executor,
        &mut signals,
        &now_ms,
    );
    crate::notify::stopping();
    executor.cancel_all(now_ms());
    // What no command's tree claimed (a subreaper-mode escapee) ends with the daemon too.
    crate::tree::kill_all_descendants();
    served
}

/// Connects, serves and reconnects until a signal says stop (`Ok`) or a first connection
/// fails (`Err`).
fn serve_links(
    options: &IrcOptions,
    poll: &mut Poll,
    events: &mut Events,
    executor: &mut Executor,
    signals: &mut signal_hook_mio::v1_0::Signals,
    now_ms: &dyn Fn() -> u64,
) -> io::Result<()> {
    let mut ever_joined = false;
    let seed = u64::from_str_radix(&crate::sys::random_hex(8), 16).unwrap_or(1);
    let mut backoff = Backoff::new(options.reconnect, seed);
    loop {
        let (stop, joined, sink) = match Link::connect(poll, options, now_ms()) {
            Ok(mut link) => {
                let stop = link.serve(poll, events, executor, signals, now_ms);
                if let Stop::Signal(_) = stop {
                    link.say_goodbye(now_ms());
                }
                let _ = poll.registry().deregister(link.stream.socket());
                (stop, link.joined, link.remote)
            }
            Err(e) => (Stop::Lost(e), false, new_remote(options, now_ms())?),
        };
        let lost = match stop {
            Stop::Signal(signal) => {
                crate::log::info(&format!(
                    "{}: ending every command, then exiting",
                    crate::sys::signal_name(signal)
                ));
                return Ok(());
            }
            Stop::Lost(e) => e,
        };
        ever_joined |= joined;
        if !ever_joined {
            return Err(lost);
        }
        if joined {
            backoff.reset();
        }
        executor.cancel_all(now_ms());
        let delay = backoff.next_delay_ms();
        crate::log::info(&format!(
            "IRC link lost ({lost}); reconnecting in {delay} ms"
        ));
        crate::notify::status(&format!("IRC link lost ({lost}); reconnecting"));
        let until = now_ms() + delay;
        if let Some(signal) =
            wait_servicing_children(poll, events, executor, signals, sink, until, now_ms)?
        {
            crate::log::info(&format!(
                "{}: ending every command, then exiting",
                crate::sys::signal_name(signal)
            ));
            return Ok(());
        }
    }
}

/// Sleeps until `until` while the killed commands end: their pipes and exits are still read,
/// and what they would answer goes to `sink`, the lost link's engine, which nobody reads.
/// Returns the signal that cut the wait short, if one did.
fn wait_servicing_children(
    poll: &mut Poll,
    events: &mut Events,
    executor: &mut Executor,
    signals: &mut signal_hook_mio::v1_0::Signals,
    mut sink: MultiRemote,
    until: u64,
    now_ms: &dyn Fn() -> u64,
) -> io::Result<Option<i32>> {
    loop {
        let now = now_ms();
        executor.drive(now, &mut Served(&mut sink), &mut Vec::new());
        if now >= until {
            return Ok(None);
        }
        let timeout = if executor.wants_pump() {
            Duration::ZERO
        } else {
            Duration::from_millis(until - now)
        };
        if frontend::wait(poll, events, Some(timeout))? {
            if let Some(signal) = pending_signal(events, signals) {
                return Ok(Some(signal));
            }
            dispatch_children(events, executor, now_ms());
        }
    }
}

/// The first stop signal among `events`, if any.
fn pending_signal(events: &Events, signals: &mut signal_hook_mio::v1_0::Signals) -> Option<i32> {
    if !events.iter().any(|e| e.token() == SIGNAL) {
        return None;
    }
    signals.pending().next()
}

/// The shared secret in `path`, without a trailing line end (an empty one is refused): what
/// `--secret-file` reads, for rexd and the desk demo alike. A file group or others may read is
/// refused, as `--token-file` is.
///
/// The secret is the file's bytes without the line end. Shorter than 16 bytes is warned of: the
/// frames' tags let whoever sees the channel try guesses offline.
pub fn read_secret_file(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let secret = crate::transport::read_private_file(
        "--secret-file",
        path,
        "whoever reads it can seal frames as the desk and run commands",
    )?;
    if secret.len() < MIN_SECRET_BYTES {
        crate::log::warn(&format!(
            "--secret-file {}: a secret of {} bytes can be guessed from the frames' tags by \
             whoever sees the channel; make one with `openssl rand -hex 32`",
            path.display(),
            secret.len()
        ));
    }
    Ok(secret)
}

/// The shortest shared secret taken without a warning.
pub const MIN_SECRET_BYTES: usize = 16;

/// A fresh engine for one connection, serving every channel given and discovering by the
/// device code; what the configuration gets wrong is said here, before any connection.
fn new_remote(options: &IrcOptions, now: u64) -> io::Result<MultiRemote> {
    let invalid = |e: oa1::ConfigError| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
    let mut remote = MultiRemote::new(connection_config(options), now).map_err(invalid)?;
    for channel in options.channels.iter().skip(1) {
        remote.add_channel(now, channel).map_err(invalid)?;
    }
    if let Some(code) = &options.device_code {
        remote.discover(code.clone(), options.list_interval_ms);
    }
    Ok(remote)
}

/// The executor's requests are keyed `CHANNEL ID`: ids are the desks' own, unique only within
/// their channel.
fn request_key(channel: &str, id: &str) -> String {
    format!("{channel} {id}")
}

/// The remote as the executor answers it, by `CHANNEL ID` keys.
struct Served<'a>(&'a mut MultiRemote);

impl Served<'_> {
    fn split(key: &str) -> Result<(&str, &str), LocalError> {
        key.split_once(' ')
            .ok_or_else(|| LocalError::UnknownRequest(key.to_owned()))
    }
}

impl Responder for Served<'_> {
    fn send(&mut self, now: u64, key: &str, output: &str) -> Result<(), LocalError> {
        let (channel, id) = Self::split(key)?;
        self.0.send(now, channel, id, output)
    }

    fn finish(&mut self, now: u64, key: &str) -> Result<(), LocalError> {
        let (channel, id) = Self::split(key)?;
        self.0.finish(now, channel, id)
    }

    fn fail(&mut self, now: u64, key: &str, code: &str, message: &str) -> Result<(), LocalError> {
        let (channel, id) = Self::split(key)?;
        self.0.fail(now, channel, id, code, message)
    }
}

fn connection_config(options: &IrcOptions) -> ConnectionConfig {
    let first = options.channels.first().map(String::as_str).unwrap_or("");
    let mut config = ConnectionConfig::new(&options.nick, first);
    config.oa1.allowed_sender = options.allowed_sender.clone();
    config.oa1.adaptive_payload = options.adaptive;
    if let Some(pacing) = options.pacing {
        config.oa1.pacing = pacing;
        config.oa1.server_pacing = false;
    }
    config.oa1.compression = options.compression;
    config.oa1.auth = options
        .secret
        .as_ref()
        .map(|secret| oa1::AuthConfig::new(secret.clone(), options.epoch_unix_ms));
    config.session.password = options.server_password.clone();
    config.session.sasl = options.sasl.clone();
    options.keepalive.apply(&mut config.session);
    config
}

fn dispatch_children(events: &Events, executor: &mut Executor, now: u64) {
    for e in events.iter() {
        let t = e.token();
        if frontend::is_child_token(t) {
            let (pipe_readable, pipe_writable) = frontend::child_readiness(e);
            executor.handle_event(now, t, pipe_readable, pipe_writable);
        }
    }
}

/// One connection to the IRC server: the socket and the OA1 remote engine that keeps it
/// registered and joined and serves requests on it.
struct Link {
    stream: IrcStream,
    remote: MultiRemote,
    out: Vec<u8>,
    oa1_events: Vec<oa1::Event>,
    readable: bool,
    /// The server closed the connection; the engine has been told (its `Disconnected` carries
    /// the server's last `ERROR` words, e.g. a wrong password's).
    eof: bool,
    /// Whether this connection got into a channel (with a device code and no channel given:
    /// registered).
    joined: bool,
    /// Serving by device code alone: registering is what counts as getting in.
    by_code_alone: bool,
    nick: String,
    /// `--allow-from`, for the log of each request.
    allowed_sender: Option<String>,
    /// `--allow-from account:NAME`: the server must send accounts.
    needs_accounts: bool,
    refusals: RefusalLog,
}

/// Logs the frames the engine refuses (another secret, a nick `--allow-from` does not name):
/// the asker hears nothing back, so this log is where the mismatch shows. One line per sender
/// and reason a minute at most, so a stranger flooding the channel cannot flood the log.
#[derive(Default)]
struct RefusalLog {
    /// Each channel's refusal count last looked at (its engine counts its own).
    seen: std::collections::HashMap<String, u64>,
    /// When each sender-and-reason was last logged (bounded: cleared past 256).
    logged_at: std::collections::HashMap<String, u64>,
    /// Refusals not logged since the last line.
    unlogged: u64,
    /// A line was logged already (the first one has no "last such line").
    logged_any: bool,
}

impl RefusalLog {
    const QUIET_MS: u64 = 60_000;

    /// The line to log for a channel's last refused frame, if it is new and one is due.
    fn note(
        &mut self,
        channel: &str,
        now: u64,
        last: Option<&oa1::RefusedFrame>,
    ) -> Option<String> {
        let seen = self.seen.get(channel).copied().unwrap_or(0);
        let last = last.filter(|r| r.count > seen)?;
        // Frames refused in the same read before the last one are counted, not named.
        self.unlogged += last.count - seen - 1;
        self.seen.insert(channel.to_owned(), last.count);
        let key = format!("{} {:?}", last.source, std::mem::discriminant(&last.reason));
        if self
            .logged_at
            .get(&key)
            .is_some_and(|&at| now.saturating_sub(at) < Self::QUIET_MS)
        {
            self.unlogged += 1;
            return None;
        }
        if self.logged_at.len() >= 256 {
            self.logged_at.clear();
        }
        self.logged_at.insert(key, now);
        let more = match (std::mem::take(&mut self.unlogged), self.logged_any) {
            (0, _) => String::new(),
            (n, true) => format!(" ({n} more refused since the last such line)"),
            (n, false) => format!(" ({n} more refused before it)"),
        };
        self.logged_any = true;
        Some(format!("{last}{more}"))
    }
}

impl Link {
    fn connect(poll: &mut Poll, options: &IrcOptions, now: u64) -> io::Result<Link> {
        let target = Target::parse(&options.addr)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let mut stream = IrcStream::connect(&target, &options.tls).map_err(|e| {
            let kind = match &e {
                crate::transport::TransportError::Connect { source, .. } => source.kind(),
                _ => io::ErrorKind::InvalidInput,
            };
            io::Error::new(kind, e.to_string())
        })?;
        poll.registry().register(
            stream.socket(),
            SOCKET,
            Interest::READABLE | Interest::WRITABLE,
        )?;
        Ok(Link {
            stream,
            remote: new_remote(options, now)?,
            out: Vec::new(),
            oa1_events: Vec::new(),
            readable: true,
            eof: false,
            joined: false,
            by_code_alone: options.channels.is_empty(),
            nick: options.nick.clone(),
            allowed_sender: options.allowed_sender.clone(),
            needs_accounts: options
                .allowed_sender
                .as_deref()
                .is_some_and(|a| a.starts_with("account:")),
            refusals: RefusalLog::default(),
        })
    }

    /// Runs the link until it ends or a signal says stop.
    fn serve(
        &mut self,
        poll: &mut Poll,
        events: &mut Events,
        executor: &mut Executor,
        signals: &mut signal_hook_mio::v1_0::Signals,
        now_ms: &dyn Fn() -> u64,
    ) -> Stop {
        loop {
            if let Err(stop) = self.turn(poll, events, executor, signals, now_ms) {
                return stop;
            }
        }
    }

    /// Leaves the server politely (`QUIT`), best effort: the daemon is stopping.
    fn say_goodbye(&mut self, now: u64) {
        self.remote.quit(now, "rexd stopping");
        loop {
            match self.remote.poll_output(now) {
                MultiOutput::Transmit(bytes) => self.out.extend_from_slice(&bytes),
                MultiOutput::Timeout(_) => break,
                _ => {}
            }
        }
        let _ = self.write();
    }

    /// Reads what arrived, moves the engine and the executor, writes, and waits for the next
    /// readiness or deadline.
    fn turn(
        &mut self,
        poll: &mut Poll,
        events: &mut Events,
        executor: &mut Executor,
        signals: &mut signal_hook_mio::v1_0::Signals,
        now_ms: &dyn Fn() -> u64,
    ) -> Result<(), Stop> {
        let now = now_ms();
        self.stream.check_handshake()?;
        self.read(now)?;
        let deadline = self.exchange(now, executor)?;
        if self.eof {
            // The engine did not say why (it ends the session with the server's reason when
            // it has one).
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "IRC server closed the connection",
            )
            .into());
        }
        self.write()?;
        let mut wake = deadline;
        if let Some(left) = self.stream.handshake_remaining() {
            wake = wake.min(now.saturating_add(left.as_millis() as u64 + 1));
        }
        if let Some(t) = executor.next_deadline() {
            wake = wake.min(t);
        }
        let timeout = if executor.wants_pump() {
            Duration::ZERO
        } else {
            Duration::from_millis(wake.saturating_sub(now_ms()))
        };
        if frontend::wait(poll, events, Some(timeout))? {
            if let Some(signal) = pending_signal(events, signals) {
                return Err(Stop::Signal(signal));
            }
            let now = now_ms();
            for e in events.iter() {
                if e.token() == SOCKET {
                    self.readable |= e.is_readable() || e.is_read_closed();
                }
            }
            dispatch_children(events, executor, now);
        }
        Ok(())
    }

    fn read(&mut self, now: u64) -> io::Result<()> {
        let mut buf = [0u8; 16 * 1024];
        while self.readable {
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    self.remote.handle_eof(now);
                    self.eof = true;
                    self.readable = false;
                }
                Ok(n) => {
                    self.remote.handle_bytes(now, &buf[..n]);
                    for channel in self.remote.channels() {
                        let refused = self.remote.server(&channel).and_then(|s| s.last_refused());
                        if let Some(line) = self.refusals.note(&channel, now, refused) {
                            crate::log::warn(&line);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The engine and the executor feed each other until neither has anything new; returns the
    /// engine's next deadline, or why the session ended.
    fn exchange(&mut self, now: u64, executor: &mut Executor) -> io::Result<u64> {
        loop {
            executor.drive(now, &mut Served(&mut self.remote), &mut self.oa1_events);
            let mut moved = false;
            let deadline = loop {
                let (channel, event) = match self.remote.poll_output(now) {
                    MultiOutput::Transmit(bytes) => {
                        self.out.extend_from_slice(&bytes);
                        moved = true;
                        continue;
                    }
                    MultiOutput::Timeout(t) => break t,
                    // rexd asks for neither chat nor membership: not for it.
                    MultiOutput::Chat(_) | MultiOutput::Membership(_) => continue,
                    MultiOutput::Discovery(found) => {
                        self.discovered(found);
                        continue;
                    }
                    MultiOutput::Event { channel, event } => (channel, event),
                };
                match event {
                    ConnectionEvent::Oa1(e) => {
                        let Some(channel) = channel else { continue };
                        if let Some(e) = self.request_event(&channel, e) {
                            self.oa1_events.push(e);
                        }
                        moved = true;
                    }
                    ConnectionEvent::Irc(event) => self.session_event(event)?,
                    other => crate::log::debug(&format!("{other:?}")),
                }
            };
            if !moved {
                return Ok(deadline);
            }
        }
    }

    /// A request or a cancellation of `channel`, logged and keyed for the executor.
    fn request_event(&self, channel: &str, event: oa1::Event) -> Option<oa1::Event> {
        match event {
            oa1::Event::Request {
                id,
                sender,
                payload,
            } => {
                // The whole prefix: a nick alone says little about who it is.
                let source = self
                    .remote
                    .server(channel)
                    .and_then(|s| s.source(&id))
                    .unwrap_or("?");
                let accepted = match &self.allowed_sender {
                    Some(mask) => format!(" (allowed by {mask})"),
                    None => String::new(),
                };
                crate::log::info(&format!(
                    "{source}{accepted} in {channel} asks {id}: {payload}"
                ));
                Some(oa1::Event::Request {
                    id: request_key(channel, &id),
                    sender,
                    payload,
                })
            }
            oa1::Event::Cancelled { id, reason } => {
                crate::log::info(&format!("{id} cancelled ({reason}) in {channel}"));
                Some(oa1::Event::Cancelled {
                    id: request_key(channel, &id),
                    reason,
                })
            }
            _ => None,
        }
    }

    /// What device-code discovery found, or why it cannot find anything.
    fn discovered(&mut self, event: DiscoveryEvent) {
        let code = self.remote.device_code().map(ToString::to_string);
        let code = code.unwrap_or_default();
        match event {
            DiscoveryEvent::Found { channel } => crate::log::info(&format!(
                "found {channel}, bound to the device code {code}: joining and serving it"
            )),
            DiscoveryEvent::ListRefused { reply } => crate::log::warn(&format!(
                "the server refuses LIST ({reply}): desks bound to the device code {code} cannot \
                 be found; give their channels with --channel"
            )),
            DiscoveryEvent::ListEmpty => crate::log::warn(&format!(
                "the server's LIST shows no channel at all: it hides its list (from new \
                 connections for a while, or from everyone), or no desk is bound yet. Desks \
                 bound to the device code {code} are found only where LIST shows them; give \
                 their channels with --channel otherwise"
            )),
            other => crate::log::info(&format!("device code {code}: {other:?}")),
        }
    }

    /// Logs what the IRC session says; a first join refused, a session that ended, or a server
    /// that cannot send accounts ends this link.
    fn session_event(&mut self, event: SessionEvent) -> io::Result<()> {
        match event {
            SessionEvent::Joined { channel } => {
                self.joined = true;
                let server = self
                    .remote
                    .session()
                    .server_version()
                    .unwrap_or("the server");
                crate::log::info(&format!(
                    "joined {channel} as {}; pacing on {server}: {}",
                    self.nick,
                    self.remote.pacing()
                ));
                // Registered (001) and in the channel: the desk can reach us now.
                // After a reconnection too (systemd takes READY=1 again quietly).
                crate::notify::ready_status(&format!(
                    "joined {channel} as {} on {server}",
                    self.nick
                ));
            }
            SessionEvent::JoinFailed {
                channel,
                numeric,
                text,
            } => {
                let refusal = format!("cannot join {channel}: {numeric} {text}");
                if !self.joined {
                    // Never in: a wrong channel or a ban, said by the server itself.
                    return Err(io::Error::new(io::ErrorKind::PermissionDenied, refusal));
                }
                crate::log::warn(&format!("{refusal}; trying again"));
            }
            SessionEvent::NickRefused {
                nick,
                numeric,
                text,
                next,
            } => crate::log::warn(&match next {
                Some(next) => format!(
                    "nick {nick} refused ({numeric} {text}); trying {next}, and {ours} again \
                     once it is free (a desk watching for {ours} waits until then)",
                    ours = self.nick
                ),
                None => format!("nick {nick} refused ({numeric} {text}); no more to try"),
            }),
            SessionEvent::NickChanged { old, new } => {
                crate::log::info(&format!("nick {old} is {new} now"))
            }
            SessionEvent::LoggedIn { account } => {
                crate::log::info(&format!("logged in as {account} (SASL)"))
            }
            SessionEvent::Registered { .. }
                if self.needs_accounts
                    && !self
                        .remote
                        .session()
                        .capabilities()
                        .iter()
                        .any(|c| c == "account-tag" || c == "account-notify") =>
            {
                // Fail closed and say why: no frame could ever be taken.
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the server does not send accounts (it offers neither the account-tag nor \
                     the account-notify capability), so --allow-from account:NAME cannot be \
                     checked: use --secret-file or a nick mask",
                ));
            }
            SessionEvent::Registered { nick } if self.by_code_alone => {
                // No channel to join yet: the desks come by the device code.
                self.joined = true;
                crate::log::info(&format!(
                    "registered as {nick}; looking for the device code's channels with LIST"
                ));
                crate::notify::ready_status(&format!("registered as {nick}"));
            }
            SessionEvent::LoginFailed { message } => {
                crate::log::warn(&format!("{message}; going on unauthenticated"))
            }
            // The engine's own "the connection was lost" after the socket's end: `turn` says
            // the server closed it.
            SessionEvent::Disconnected {
                reason: deskwire::irc::DisconnectReason::ConnectionLost,
            } if self.eof => {}
            SessionEvent::Disconnected { reason } => {
                // The caller kills what the executor still runs for this link.
                return Err(io::Error::other(format!("IRC session ended: {reason}")));
            }
            other => crate::log::debug(&format!("{other:?}")),
        }
        Ok(())
    }

    fn write(&mut self) -> io::Result<()> {
        // TLS may have handshake messages to send before any line.
        self.stream.flush()?;
        while !self.out.is_empty() {
            match self.stream.write(&self.out) {
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(source: &str, count: u64) -> oa1::RefusedFrame {
        oa1::RefusedFrame {
            source: source.to_owned(),
            reason: oa1::RefusalReason::Forged,
            count,
        }
    }

    /// The first line counts what came with it; later lines what went unlogged since the last.
    #[test]
    fn refusal_lines_count_what_they_leave_out() {
        let mut log = RefusalLog::default();
        // A two-frame request refused in one read: the first line says one more came with it.
        let first = log.note("#desk", 0, Some(&refused("x!u@h", 2))).unwrap();
        assert!(first.ends_with(" (1 more refused before it)"), "{first}");
        assert_eq!(
            log.note("#desk", 0, Some(&refused("x!u@h", 2))),
            None,
            "seen"
        );
        // Within the quiet minute: counted, not logged.
        assert_eq!(log.note("#desk", 1_000, Some(&refused("x!u@h", 3))), None);
        let later = log
            .note("#desk", 61_000, Some(&refused("x!u@h", 4)))
            .unwrap();
        assert!(
            later.ends_with(" (1 more refused since the last such line)"),
            "{later}"
        );
        let plain = log
            .note("#desk", 200_000, Some(&refused("x!u@h", 5)))
            .unwrap();
        assert!(!plain.contains("more refused"), "{plain}");
    }
}
