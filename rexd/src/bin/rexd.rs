//! `rexd`: the REXD v1 daemon. `rexd --stdio` serves JSON-RPC on stdin/stdout; `rexd --mcp`
//! the same tools as an MCP server; `rexd --irc HOST:PORT --channel '#desk' --nick NAME` serves
//! OA1 `RemoteBash` on an IRC channel; `rexd --listen ADDR --token-file F` serves REXD over
//! HTTP(S) and WebSocket (feature `net`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};
use rexd::audit::Audit;
use rexd::config::{Config, LogLevel};
use rexd::service::Settings;

#[derive(Debug, Clone, Parser)]
#[command(
    version,
    long_version = rexd::cli::LONG_VERSION,
    about = "REXD v1: a remote execution and file plane for agents"
)]
struct Args {
    /// Serve JSON-RPC 2.0 (NDJSON) on stdin/stdout.
    #[arg(long, conflicts_with = "irc")]
    stdio: bool,
    /// With --stdio: bridge stdin/stdout to this user's rexd agent (a Unix socket; started on
    /// demand), so that sessions opened with `resumable` and their processes outlive the
    /// connection (an ssh link that drops) and can be resumed from a new one.
    #[arg(long, requires = "stdio")]
    resumable: bool,
    /// The client's name in the audit log and [[policy.clients]] (with --stdio or --mcp; at
    /// most 128 characters). Under ssh without it, the name is the ssh user, with the key's
    /// SHA256 fingerprint where sshd exposes it (ExposeAuthInfo yes). An authorized_keys
    /// forced command sets it per key: command="rexd --stdio --config FILE --principal NAME".
    #[arg(long, value_name = "NAME", value_parser = principal_name)]
    principal: Option<String>,
    /// How long a resumable session whose connection dropped waits for session.resume (with
    /// --stdio --resumable, --listen).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    resume_grace_ms: u64,
    /// Run as the agent on this socket (what --resumable starts; not for direct use).
    #[arg(long, value_name = "SOCKET", hide = true, conflicts_with_all = ["stdio", "irc", "mcp"])]
    agent: Option<PathBuf>,
    /// Serve OA1 RemoteBash on an IRC channel: connect to ircs://HOST:PORT (TLS, the port 6697
    /// when left out, the certificate verified), irc://HOST:PORT or HOST:PORT (plain TCP). A
    /// link lost after joining (or found dead by the keepalive PING) is reconnected after
    /// 1 s, doubling up to 10 s, each plus up to half at random (--reconnect-first-ms,
    /// --reconnect-max-ms); a first connection that fails is an error.
    #[arg(long, value_name = "URL|HOST:PORT")]
    irc: Option<String>,
    #[command(flatten)]
    link: rexd::transport::LinkArgs,
    /// A desk channel to serve (with --irc; again for more, all on one connection). Without
    /// it and --device-code: #desk.
    #[arg(long = "channel", value_name = "CHANNEL")]
    channels: Vec<String>,
    /// Serve the desks the VR Offices game binds to a device code (with --irc): rexd prints
    /// the code (the one stored for --instance, else a new one; or CODE, or
    /// $REXD_DEVICE_CODE), the player types it into the desk's "Bind Device Code…" menu, and
    /// rexd joins every channel named #oa_..._dev_<code> or #oa_..._dev_<code>_... that LIST
    /// shows, polling every --list-interval-s. The code only names the channel, and anyone who
    /// can LIST the server sees it: who may run commands is still what --secret-file,
    /// --allow-from account:NAME or --unauthenticated say.
    #[arg(long, value_name = "CODE", num_args = 0..=1, default_missing_value = "")]
    device_code: Option<String>,
    /// Which stored device code (with --device-code): each instance keeps its own in
    /// $XDG_DATA_HOME/rexd/INSTANCE/device_code (else ~/.local/share/rexd/...).
    #[arg(long, value_name = "NAME", default_value = rexd::device_code::DEFAULT_INSTANCE)]
    instance: String,
    /// Seconds between two LISTs looking for the device code's channels (at least 5).
    #[arg(long, value_name = "S", default_value_t = 30, value_parser = clap::value_parser!(u64).range(5..))]
    list_interval_s: u64,
    /// Our nick (with --irc; default rexd, or with --device-code oa and the code, cut to 9).
    #[arg(long)]
    nick: Option<String>,
    /// Accept requests from this nick, a full NICK!USER@HOST mask (USER and HOST may use * and
    /// ?), or account:NAME (whoever the server says is logged in to that account; needs a SASL
    /// login of our own and a server that sends accounts), only (with --irc). A nick alone is
    /// taken by anyone once its owner quits.
    #[arg(long, value_name = "NICK|MASK")]
    allow_from: Option<String>,
    /// Serve --irc without --secret-file. RISK: whoever holds the allowed nick (or, without
    /// --allow-from, anyone in the channel) runs commands as this user; an IRC nick is not an
    /// identity. Every request's full nick!user@host is logged. Only for desks that cannot
    /// share a secret (spec-only peers) on a network you trust.
    #[arg(long)]
    unauthenticated: bool,
    /// The first wait before reconnecting a lost IRC link (ms); it doubles with each try
    /// (with --irc).
    #[arg(long, value_name = "MS", default_value_t = deskwire::reconnect::ReconnectPolicy::default().first_delay_ms)]
    reconnect_first_ms: u64,
    /// The longest wait between reconnection tries (ms), before up to half more at random
    /// (with --irc).
    #[arg(long, value_name = "MS", default_value_t = deskwire::reconnect::ReconnectPolicy::default().max_delay_ms)]
    reconnect_max_ms: u64,
    /// How long a RemoteBash command may run before `ERR timeout` (with --irc).
    #[arg(long, default_value_t = 27.0)]
    timeout_sec: f64,
    /// Use the spec's 240-byte payloads instead of the largest that fits each IRC line (with
    /// --irc).
    #[arg(long)]
    no_adaptive: bool,
    /// Answer plainly even when the desk offers to take compressed answers (with --irc).
    #[arg(long)]
    no_compression: bool,
    /// Do not end a failed command's output with `[exit code: N]` or `[signal: NAME]` (with
    /// --irc; the RemoteBash tool description tells the model what the line means).
    #[arg(long)]
    no_exit_marker: bool,
    /// Authenticate every OA1 frame with the shared secret in FILE (mode 600; with --irc; the
    /// desk needs the same secret; a trailing newline is not part of it).
    #[arg(long, value_name = "FILE")]
    secret_file: Option<PathBuf>,
    /// Lines sent in a burst before pacing starts (with --irc). Without this and
    /// --pacing-interval-ms: 3, then one a second, or on ngircd (its 004 says so) groups of 3
    /// lines every 1.1 s, as measured.
    #[arg(long)]
    pacing_burst: Option<u32>,
    /// Milliseconds between paced lines (with --irc; 0 sends as fast as the socket takes them,
    /// only for servers without flood protection). Either flag turns the server's own pacing
    /// off.
    #[arg(long)]
    pacing_interval_ms: Option<u64>,
    /// Serve the tools as an MCP server on stdin/stdout.
    #[arg(long, conflicts_with_all = ["stdio", "irc"])]
    mcp: bool,
    #[command(flatten)]
    listen: ListenArgs,
    /// The TOML configuration (the spec's /etc/rexd/config.toml format).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// An allowed root, in addition to the config's (repeatable). Without any, the current
    /// directory.
    #[arg(long = "root", value_name = "DIR")]
    roots: Vec<PathBuf>,
    /// Allow `shell: true` execs (also `security.allow_shell`).
    #[arg(long)]
    allow_shell: bool,
    /// Diagnostics on stderr: error, warn, info or debug (overrides `server.log_level`).
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
    /// How diagnostic lines look: text (`TIME rexd: LEVEL: MESSAGE`) or json (one object a line,
    /// `{"time","level","message"}`; overrides `server.log_format`).
    #[arg(long, value_name = "FORMAT", value_parser = ["text", "json"])]
    log_format: Option<String>,
    /// Write the audit log here (`-` for stderr), overriding `[audit]`.
    #[arg(long, value_name = "PATH")]
    audit_log: Option<String>,
    /// Check the configuration and the files the other flags name (as `sshd -t` does): load
    /// everything a start with the same flags would (config, policy, token file, certificates
    /// and key, password files), say what is wrong or worth a warning, and exit (0: it would
    /// start) without serving.
    #[arg(long)]
    check_config: bool,
}

/// `--listen` and its flags (Profile C). Each flag's `requires = "listen"` is also checked by
/// [`listen_flag_without_listen`]: clap skips it when --listen conflicts with a mode given.
#[derive(Debug, Clone, clap::Args)]
struct ListenArgs {
    /// Serve REXD over HTTP(S) and WebSocket on ADDR (`127.0.0.1:7070`, `[::1]:7070`, or a
    /// name that resolves, `localhost:7070`, at its first address; port 0 picks one, and
    /// the first line on stdout says which): `POST /rpc` for pointed calls, `GET /ws` for whole
    /// sessions with events. Needs --token-file or --client-ca.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["stdio", "irc", "mcp"], value_parser = listen_address)]
    listen: Option<std::net::SocketAddr>,
    /// Bearer tokens, one `LABEL:TOKEN` a line (mode 600); the label names the client in the
    /// audit log (with --listen).
    #[arg(long, value_name = "FILE", requires = "listen")]
    token_file: Option<PathBuf>,
    /// The server's certificate chain, PEM (with --listen).
    #[arg(long, value_name = "FILE", requires = "listen")]
    tls_cert: Option<PathBuf>,
    /// The server's private key, PEM (with --listen).
    #[arg(long, value_name = "FILE", requires = "listen")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA, PEM (mTLS; with --tls-cert). The
    /// certificate's subject, as RFC 4514 writes it (`CN=alice,O=ops`), names the client in the
    /// audit log and [[policy.clients]]; one with an empty subject is refused.
    #[arg(long, value_name = "FILE", requires = "listen")]
    client_ca: Option<PathBuf>,
    /// Allow --listen on an address that is neither loopback nor private (put a firewall or a
    /// reverse proxy in front).
    #[arg(long, requires = "listen")]
    allow_public: bool,
    /// Allow --listen without TLS on an address that is not loopback (when a TLS-terminating
    /// proxy on the same network segment is in front).
    #[arg(long, requires = "listen")]
    allow_plaintext: bool,
    /// Connections served at once, WebSockets for their whole life (with --listen). When all
    /// are taken, the oldest connection that has not authenticated yet is closed to make room
    /// for a new client; past that, new clients wait in the listen backlog.
    #[arg(long, value_name = "N", default_value_t = 128, requires = "listen")]
    max_connections: usize,
    /// Connections one client (token label or certificate subject) may have open at once;
    /// past it, its requests get 429 (with --listen).
    #[arg(long, value_name = "N", default_value_t = 32, requires = "listen")]
    max_connections_per_principal: usize,
    /// Sessions one client may have open at once, under `limits.max_concurrent_sessions`:
    /// REXD sessions (POST /rpc, /ws; past it session.open gets resource_limit) and MCP
    /// sessions (/mcp; past it 429), each (with --listen).
    #[arg(long, value_name = "N", default_value_t = 8, requires = "listen")]
    max_sessions_per_principal: usize,
    /// Milliseconds a client has to send a POST /rpc or /mcp body once its headers are in;
    /// then 408 and the connection is closed (with --listen).
    #[arg(long, value_name = "MS", default_value_t = 30_000, requires = "listen")]
    body_timeout_ms: u64,
    /// Take requests from web pages of this origin (`https://host[:port]`; repeatable). A
    /// request that carries any other Origin header (browsers send one, other clients none)
    /// gets 403, so a page cannot use a browser's credentials on rexd (with --listen).
    #[arg(long, value_name = "ORIGIN", requires = "listen")]
    allow_origin: Vec<String>,
    /// The largest POST /rpc body and WebSocket message, in bytes (with --listen).
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20, requires = "listen")]
    max_message_bytes: usize,
    /// Milliseconds a client has to send a request's headers, and to finish the TLS
    /// handshake (with --listen).
    #[arg(long, value_name = "MS", default_value_t = 10_000, requires = "listen")]
    header_timeout_ms: u64,
    /// Bytes of answers and events a connection may leave unread before it is dropped; at a
    /// quarter of it, its commands' output is no longer read (with --listen).
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20, requires = "listen")]
    max_unsent_bytes: usize,
    /// Bytes of results one batch's answer may hold (POST /rpc and /ws, with --listen): the
    /// request whose answer would pass it, and those after it (not run), get resource_limit
    /// (-32008) saying to send them again in a smaller batch.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20, requires = "listen")]
    max_batch_answer_bytes: usize,
    /// Milliseconds a write to a client may wait for the client to read; then its connection
    /// is dropped (with --listen).
    #[arg(long, value_name = "MS", default_value_t = 30_000, requires = "listen")]
    write_timeout_ms: u64,
    /// Milliseconds a connection may stay behind (a quarter of --max-unsent-bytes unread)
    /// before it is dropped (with --listen).
    #[arg(long, value_name = "MS", default_value_t = 30_000, requires = "listen")]
    slow_reader_ms: u64,
    /// Milliseconds a session opened over POST /rpc lives without a request (with --listen).
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 600_000,
        requires = "listen"
    )]
    rpc_session_idle_ms: u64,
    /// Serve GET /metrics on this address too, with the same authentication and TLS (it is
    /// on --listen's address as well).
    #[arg(long, value_name = "ADDR", requires = "listen")]
    metrics_listen: Option<std::net::SocketAddr>,
}

fn main() -> ExitCode {
    // Under systemd (Type=notify), before any thread: rexd keeps $NOTIFY_SOCKET to itself, so
    // the commands it runs do not inherit it.
    // SAFETY: nothing has started a thread yet.
    unsafe { rexd::notify::take_socket_from_env() };
    // `--generate-completions SHELL` and `--generate-man`, for packaging (hidden).
    if let Some(code) = rexd::cli::generate(Args::command) {
        return code;
    }
    let matches = Args::command().get_matches();
    if let Some(error) = listen_flag_without_listen(&matches) {
        error.exit();
    }
    let args = Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rexd: {e}");
            ExitCode::from(2)
        }
    }
}

/// A flag of --listen's given without it (`rexd --stdio --tls-cert F`): an error, not a flag
/// silently unused. clap's own `requires` does not see it when --listen conflicts with the
/// mode that was given.
fn listen_flag_without_listen(matches: &clap::ArgMatches) -> Option<clap::Error> {
    if matches.get_one::<std::net::SocketAddr>("listen").is_some() {
        return None;
    }
    let mut command = Args::command();
    let group = command
        .get_groups()
        .find(|g| g.get_id() == "ListenArgs")?
        .get_args()
        .cloned()
        .collect::<Vec<_>>();
    let given = group.iter().find(|id| {
        matches.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
    })?;
    let long = command
        .get_arguments()
        .find(|a| a.get_id() == given)
        .and_then(|a| a.get_long())
        .unwrap_or(given.as_str())
        .to_owned();
    Some(command.error(
        clap::error::ErrorKind::MissingRequiredArgument,
        format!("--{long} is a flag of --listen ADDR, which was not given"),
    ))
}

/// `--listen`: `IP:PORT`, or `HOST:PORT` with a name that resolves (`localhost:7070`: its
/// first address).
fn listen_address(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    let usage = "an address and port, like 127.0.0.1:7070, [::1]:7070 or localhost:7070";
    if text
        .rsplit_once(':')
        .is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err())
    {
        return Err(usage.to_owned());
    }
    match text.to_socket_addrs() {
        Ok(mut addresses) => addresses
            .next()
            .ok_or_else(|| format!("{text} resolves to no address")),
        Err(e) => Err(format!("{text} does not resolve ({e}); {usage}")),
    }
}

/// `--principal`: printable, 1 to 128 characters.
fn principal_name(name: &str) -> Result<String, String> {
    match name.chars().count() {
        1..=128 if !name.chars().any(char::is_control) => Ok(name.to_owned()),
        _ => Err("1 to 128 characters, none of them control characters".into()),
    }
}

fn settings(args: &Args) -> Result<Settings, String> {
    let mut config = match &args.config {
        Some(path) => Config::load(path).map_err(|e| e.to_string())?,
        None => Config::default(),
    };
    for r in &args.roots {
        let path = std::path::absolute(r).map_err(|e| format!("--root {}: {e}", r.display()))?;
        config
            .security
            .allowed_roots
            .push(rexd::config::RootEntry { path });
    }
    if config.security.allowed_roots.is_empty() {
        let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
        config
            .security
            .allowed_roots
            .push(rexd::config::RootEntry { path: cwd });
    }
    config.security.allow_shell |= args.allow_shell;
    if let Some(level) = &args.log_level {
        config.server.log_level = match level.as_str() {
            "error" => LogLevel::Error,
            "warn" => LogLevel::Warn,
            "info" => LogLevel::Info,
            "debug" => LogLevel::Debug,
            other => {
                return Err(format!(
                    "--log-level {other:?}: use error, warn, info or debug"
                ));
            }
        };
    }
    match args.log_format.as_deref() {
        Some("json") => config.server.log_format = rexd::config::LogFormat::Json,
        Some(_) => config.server.log_format = rexd::config::LogFormat::Text,
        None => {}
    }
    config.validate().map_err(|e| e.to_string())?;
    rexd::log::set_level(config.server.log_level);
    rexd::log::set_format(config.server.log_format);
    let mut settings = Settings::from_config(&config).map_err(|e| e.to_string())?;
    for warning in settings.commands.warnings() {
        rexd::log::warn(&warning);
    }
    match args.audit_log.as_deref() {
        None => {}
        Some("-") => settings.audit = Audit::stderr(),
        Some(path) => {
            settings.audit = Audit::file(std::path::Path::new(path)).map_err(|e| e.to_string())?
        }
    }
    Ok(settings)
}

/// A daemon that serves others (`--listen`, `--irc`) started without a config has no policy
/// and no audit: said at start and by `--check-config`, since nothing else would show it.
/// What a VR Offices player needs at start, on stdout whatever the log level: the code to
/// type into the desk, where it is kept, and what serving it means.
fn print_device_code(
    stored: &rexd::device_code::StoredCode,
    server: &str,
    nick: &str,
    instance: &str,
    settings: &Settings,
) {
    let user = std::env::var("USER").unwrap_or_else(|_| "this daemon's user".to_owned());
    let made = if stored.new { " (new)" } else { "" };
    println!("rexd device code: {}{made}", stored.code);
    println!("  instance: {instance} ({})", stored.dir.display());
    println!("  server: {server}, as {nick}");
    println!(
        "  commands run for real, as {user}, in: {}",
        settings.roots.paths().join(", ")
    );
    println!(
        "  bind a desk: type the code into its \"Bind Device Code…\" menu; rexd finds its \
         channel by LIST"
    );
    let _ = std::io::Write::flush(&mut std::io::stdout());
}

fn unconfigured_service(args: &Args) -> Option<&'static str> {
    let serves_others = args.listen.listen.is_some() || args.irc.is_some();
    (serves_others && args.config.is_none()).then_some(
        "no --config: no [policy] and no audit log, so a client may run any command in the \
         roots; start from the sample config (the .deb's /usr/share/doc/rexd/examples/rexd.toml)",
    )
}

/// `--check-config`: everything a start with these flags loads and checks, then a verdict.
fn check_config(args: &Args) -> Result<(), String> {
    let settings = settings(args)?; // logs the policy's own warnings
    let mut warnings = settings.commands.warnings().len();
    if let Some(w) = unconfigured_service(args) {
        warnings += 1;
        rexd::log::warn(w);
    }
    warnings += settings.confine.log();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for (rule, program) in settings.commands.programs_not_found(&path) {
        warnings += 1;
        rexd::log::warn(&format!(
            "[policy] rule {rule:?} names {program:?}, which no directory of PATH holds \
             ({}): a typo, or not installed here; the rule never matches it",
            path.to_string_lossy()
        ));
    }
    if args.irc.is_some() {
        args.link.settings()?;
        if let Some(path) = &args.secret_file {
            rexd::irc::read_secret_file(path)?;
        }
    }
    if let Some(addr) = args.listen.listen {
        for w in check_listen(args, addr)? {
            warnings += 1;
            rexd::log::warn(&w);
        }
    }
    match warnings {
        0 => println!("rexd: the configuration is valid"),
        n => println!("rexd: the configuration is valid, with {n} warning(s) above"),
    }
    Ok(())
}

fn run(args: Args) -> Result<(), String> {
    if args.check_config {
        return check_config(&args);
    }
    // Under a forced command (authorized_keys `command="rexd --stdio ..."`), the client's own
    // command is not run; its --resumable (what `rex --resume` asks for) is still honoured.
    let resumable =
        args.resumable || (args.stdio && rexd::ssh_client::original_command_asks("--resumable"));
    if resumable {
        // The agent is started with the same arguments, so it checks and loads the same
        // config; this process only carries bytes.
        let rest: Vec<std::ffi::OsString> = std::env::args_os()
            .skip(1)
            .filter(|a| a != "--stdio" && a != "--resumable")
            .collect();
        settings(&args)?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let hello = rexd::agent::BridgeHello {
            principal: rexd::ssh_client::principal(args.principal.as_deref()),
            address: rexd::ssh_client::address(),
        };
        return rexd::agent::bridge(&exe, &rest, &hello).map_err(|e| format!("--resumable: {e}"));
    }
    let settings = settings(&args)?;
    // What a start refuses (a token file others can read, a certificate without its key, a bad
    // --tls flag) is said alone, before the log tells of a confinement that never serves.
    if let Some(addr) = args.listen.listen {
        check_listen(&args, addr)?;
    }
    if args.irc.is_some() {
        args.link.settings()?;
    }
    let secret = match (&args.irc, &args.secret_file) {
        (Some(_), Some(path)) => Some(rexd::irc::read_secret_file(path)?),
        _ => None,
    };
    settings.confine.log();
    if let Some(w) = unconfigured_service(&args) {
        rexd::log::warn(w);
    }
    if let Some(socket) = &args.agent {
        return rexd::agent::serve_agent(settings, socket, args.resume_grace_ms)
            .map_err(|e| format!("--agent {}: {e}", socket.display()));
    }
    if args.stdio {
        let principal = rexd::ssh_client::principal(args.principal.as_deref());
        return rexd::stdio::serve_stdio(settings, principal).map_err(|e| e.to_string());
    }
    if let Some(addr) = &args.irc {
        let link = args.link.settings()?;
        let device_code = match &args.device_code {
            None => None,
            Some(given) => {
                let from_env = std::env::var("REXD_DEVICE_CODE").ok();
                let given = Some(given.as_str())
                    .filter(|g| !g.is_empty())
                    .or(from_env.as_deref().filter(|g| !g.trim().is_empty()));
                Some(rexd::device_code::load_or_create(&args.instance, given)?)
            }
        };
        let channels = match (&device_code, args.channels.is_empty()) {
            (None, true) => vec!["#desk".to_owned()],
            _ => args.channels.clone(),
        };
        let nick = match (&args.nick, &device_code) {
            (Some(nick), _) => nick.clone(),
            (None, Some(stored)) => stored.code.nick(),
            (None, None) => "rexd".to_owned(),
        };
        if let Some(stored) = &device_code {
            print_device_code(stored, addr, &nick, &args.instance, &settings);
        }
        let options = rexd::irc::IrcOptions {
            addr: addr.clone(),
            tls: link.tls,
            server_password: link.server_password,
            sasl: link.sasl,
            channels,
            device_code: device_code.map(|stored| stored.code),
            list_interval_ms: args.list_interval_s.saturating_mul(1000),
            nick,
            allowed_sender: args.allow_from.clone(),
            unauthenticated: args.unauthenticated,
            timeout_ms: (args.timeout_sec * 1000.0) as u64,
            adaptive: !args.no_adaptive,
            compression: !args.no_compression,
            exit_marker: !args.no_exit_marker,
            secret,
            epoch_unix_ms: 0,
            keepalive: link.keepalive,
            reconnect: {
                let policy = deskwire::reconnect::ReconnectPolicy {
                    first_delay_ms: args.reconnect_first_ms,
                    max_delay_ms: args.reconnect_max_ms,
                    ..Default::default()
                };
                policy
                    .validate()
                    .map_err(|e| format!("--reconnect-first-ms/--reconnect-max-ms: {e}"))?;
                policy
            },
            // Either flag sets the pacing; neither: the default, or the server's own.
            pacing: (args.pacing_burst.is_some() || args.pacing_interval_ms.is_some()).then(|| {
                let d = deskwire::oa1::DEFAULT_PACING;
                deskwire::oa1::Pacing::steady(
                    args.pacing_burst.unwrap_or(d.burst),
                    args.pacing_interval_ms.unwrap_or(d.interval_ms),
                )
            }),
        };
        return rexd::irc::serve_irc(settings, &options).map_err(|e| format!("--irc {addr}: {e}"));
    }
    if args.mcp {
        let principal = rexd::ssh_client::principal(args.principal.as_deref());
        return rexd::mcp::serve_stdio(settings, principal).map_err(|e| e.to_string());
    }
    if let Some(addr) = args.listen.listen {
        return listen(settings, &args, addr);
    }
    Err("choose a transport: --stdio, --mcp, --irc HOST:PORT or --listen ADDR".into())
}

#[cfg(feature = "net")]
fn listen(service: Settings, args: &Args, addr: std::net::SocketAddr) -> Result<(), String> {
    // Each MCP-over-HTTP session gets a service of its own, made from the same arguments,
    // and a reload (SIGHUP) loads them again.
    let again = args.clone();
    let load_settings: rexd::net::SettingsFactory = std::sync::Arc::new(move || {
        settings(&again).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    });
    let options = rexd::net::NetOptions {
        load_settings: Some(load_settings),
        ..net_options(args, addr)
    };
    rexd::net::serve(service, options).map_err(|e| e.to_string())
}

#[cfg(feature = "net")]
fn check_listen(args: &Args, addr: std::net::SocketAddr) -> Result<Vec<String>, String> {
    rexd::net::check(net_options(args, addr)).map_err(|e| e.to_string())
}

#[cfg(not(feature = "net"))]
fn check_listen(_: &Args, _: std::net::SocketAddr) -> Result<Vec<String>, String> {
    Err("--listen: this rexd was built without the `net` feature".into())
}

/// `--listen`'s flags as the network service takes them.
#[cfg(feature = "net")]
fn net_options(args: &Args, addr: std::net::SocketAddr) -> rexd::net::NetOptions {
    let a = &args.listen;
    rexd::net::NetOptions {
        allow_public: a.allow_public,
        allow_plaintext: a.allow_plaintext,
        token_file: a.token_file.clone(),
        tls_cert: a.tls_cert.clone(),
        tls_key: a.tls_key.clone(),
        client_ca: a.client_ca.clone(),
        max_connections: a.max_connections.max(1),
        max_connections_per_principal: a.max_connections_per_principal.max(1),
        max_sessions_per_principal: a.max_sessions_per_principal.max(1),
        body_timeout_ms: a.body_timeout_ms.max(1),
        allowed_origins: a.allow_origin.clone(),
        max_message_bytes: a.max_message_bytes.max(1024),
        header_timeout_ms: a.header_timeout_ms.max(1),
        max_unsent_bytes: a.max_unsent_bytes.max(64 * 1024),
        max_batch_answer_bytes: a.max_batch_answer_bytes,
        write_timeout_ms: a.write_timeout_ms.max(1),
        slow_reader_ms: a.slow_reader_ms,
        rpc_session_idle_ms: a.rpc_session_idle_ms,
        metrics_listen: a.metrics_listen,
        resume_grace_ms: args.resume_grace_ms,
        ..rexd::net::NetOptions::new(addr)
    }
}

#[cfg(not(feature = "net"))]
fn listen(_: Settings, _: &Args, _: std::net::SocketAddr) -> Result<(), String> {
    Err("--listen: this rexd was built without the `net` feature".into())
}
