//! `rexd --listen`: the spec's Profile C, REXD over HTTP(S) and WebSocket (feature `net`).
//!
//! - `POST /rpc`: one JSON-RPC request or batch in the body (`Content-Type: application/json`),
//!   its answer in the response; no events (the spec's "pointed calls"). A body of
//!   notifications only is answered `204`.
//! - `GET /ws` (WebSocket): a whole session, events included, exactly as over stdio; each text
//!   message is one JSON-RPC message or batch, each message the server sends one answer or event.
//!
//! Every request must authenticate: a bearer token from `--token-file` (`Authorization: Bearer
//! …`), a client certificate from `--client-ca` (checked in the TLS handshake), or both when
//! both are configured. A wrong or missing token gets `401` with nothing more. The daemon
//! refuses to start without one of the two, binds only loopback and private addresses unless
//! told `--allow-public`, and refuses a plaintext listener on anything but loopback unless told
//! `--allow-plaintext`. A request from a web page (one with an `Origin` header) is refused
//! unless its origin is listed (`allowed_origins`).
//!
//! The requests go to one [`crate::hub`] (one [`crate::service::Service`]: the same roots,
//! limits, policy and audit as stdio; the audit names the principal). Bounds: the body and the
//! WebSocket message size (`max_message_bytes`), connections at once (`max_connections`,
//! WebSockets for their whole life; more wait in the listen backlog) and per principal
//! (`max_connections_per_principal`), sessions per principal (`max_sessions_per_principal`),
//! the time to send a request's headers and to finish the TLS handshake (`header_timeout_ms`)
//! and its body (`body_timeout_ms`), the time a write may wait for the client to read
//! (`write_timeout_ms`), the results one batch's answer may hold (`max_batch_answer_bytes`),
//! and the hub's per-connection limits on unsent bytes.
//!
//! The tokio runtime is built here and only here, so the other transports run without one.

pub mod auth;
mod mcp_http;
mod refusals;
mod slots;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

use slots::{ClaimError, ConnSlot, PrincipalConns, Slots};
use tower::ServiceExt;

use crate::hub::{self, ConnId, ConnInfo, ConnKind, ConnSink, HubConfig, HubHandle, HubInput};
use crate::service::Settings;

/// Loads the daemon's settings again, from its config file and flags: each MCP-over-HTTP
/// session's service is made by it, and a reload (`SIGHUP`) takes its new settings from it.
pub type SettingsFactory = Arc<dyn Fn() -> std::io::Result<Settings> + Send + Sync>;

/// How `rexd --listen` is configured (the command line's flags).
#[derive(Clone)]
pub struct NetOptions {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Bind an address that is neither loopback nor private.
    pub allow_public: bool,
    /// Serve without TLS on an address that is not loopback.
    pub allow_plaintext: bool,
    /// `LABEL:TOKEN` lines ([`auth`]).
    pub token_file: Option<PathBuf>,
    /// The server's certificate chain (PEM).
    pub tls_cert: Option<PathBuf>,
    /// The server's private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM).
    pub client_ca: Option<PathBuf>,
    /// Connections served at once (WebSockets for their whole life).
    pub max_connections: usize,
    /// Connections one principal may have open at once.
    pub max_connections_per_principal: usize,
    /// Sessions one principal may have open at once: REXD sessions (`/rpc`, `/ws`) and MCP
    /// sessions (`/mcp`), each.
    pub max_sessions_per_principal: usize,
    /// Time allowed for a `/rpc` or `/mcp` request's body, once its headers are in.
    pub body_timeout_ms: u64,
    /// Origins (`https://host[:port]`) whose web pages may make requests; a request with any
    /// other `Origin` header is refused.
    pub allowed_origins: Vec<String>,
    /// The largest `/rpc` body and WebSocket message.
    pub max_message_bytes: usize,
    /// Time allowed for a request's headers and for the TLS handshake.
    pub header_timeout_ms: u64,
    /// Bytes a connection may leave unread before it is dropped.
    pub max_unsent_bytes: usize,
    /// Bytes of results one batch's answer may hold (`/rpc` and `/ws`).
    pub max_batch_answer_bytes: usize,
    /// How long a write to a client may wait for it to read before the connection is dropped.
    pub write_timeout_ms: u64,
    /// How long a connection may stay behind (sessions paused) before it is dropped.
    pub slow_reader_ms: u64,
    /// How long a session opened over `/rpc` lives without a request.
    pub rpc_session_idle_ms: u64,
    /// Serve `GET /metrics` on this address too (same authentication and TLS); it is always
    /// on the main address as well.
    pub metrics_listen: Option<SocketAddr>,
    /// How long a resumable session whose WebSocket dropped waits for `session.resume`.
    pub resume_grace_ms: u64,
    /// The daemon's settings, loaded again: each session of MCP's Streamable HTTP transport
    /// on `/mcp` gets a service of its own made by this, and a reload (`SIGHUP`) applies what
    /// it loads then. `None`: no `/mcp`, and a reload reads only the token file and the
    /// certificates again.
    pub load_settings: Option<SettingsFactory>,
}

impl std::fmt::Debug for NetOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetOptions")
            .field("listen", &self.listen)
            .field("load_settings", &self.load_settings.is_some())
            .finish_non_exhaustive()
    }
}

impl NetOptions {
    /// Defaults for everything but the address.
    pub fn new(listen: SocketAddr) -> NetOptions {
        NetOptions {
            listen,
            allow_public: false,
            allow_plaintext: false,
            token_file: None,
            tls_cert: None,
            tls_key: None,
            client_ca: None,
            max_connections: 128,
            max_connections_per_principal: 32,
            max_sessions_per_principal: 8,
            body_timeout_ms: 30_000,
            allowed_origins: Vec::new(),
            max_message_bytes: 16 << 20,
            header_timeout_ms: 10_000,
            max_unsent_bytes: 16 << 20,
            max_batch_answer_bytes: 16 << 20,
            write_timeout_ms: 30_000,
            slow_reader_ms: 30_000,
            rpc_session_idle_ms: 600_000,
            metrics_listen: None,
            resume_grace_ms: 60_000,
            load_settings: None,
        }
    }
}

/// Why the listener does not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// Neither tokens nor client certificates.
    #[error(
        "--listen needs --token-file or --client-ca (mTLS): rexd does not serve a network client \
         it cannot authenticate"
    )]
    NoAuth,
    /// A public address without `--allow-public`.
    #[error(
        "--listen {0}: not a loopback or private address; rexd binds those only, unless \
         --allow-public says you mean it (and put a firewall or reverse proxy in front)"
    )]
    Public(SocketAddr),
    /// No TLS off loopback without `--allow-plaintext`.
    #[error(
        "--listen {0}: tokens and commands would cross the network in clear; give --tls-cert and \
         --tls-key, or --allow-plaintext if a TLS proxy in front terminates it"
    )]
    Plaintext(SocketAddr),
    /// Flags that go together, alone.
    #[error("{0}")]
    Flags(String),
    /// The token file.
    #[error(transparent)]
    Tokens(#[from] auth::TokenFileError),
    /// The TLS files.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// Binding, the runtime, the hub.
    #[error("--listen {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// An `--allow-origin` value as browsers write `Origin`: `scheme://host[:port]`, lower case,
/// without the scheme's default port.
pub fn origin(value: &str) -> Result<String, NetError> {
    let bad = || {
        NetError::Flags(format!(
            "--allow-origin {value}: an origin is scheme://host[:port] as a browser sends it in \
             Origin (e.g. https://desk.example.com:8443), without a path"
        ))
    };
    let uri: axum::http::Uri = value.parse().map_err(|_| bad())?;
    let scheme = uri.scheme_str().ok_or_else(bad)?.to_ascii_lowercase();
    let authority = uri.authority().ok_or_else(bad)?;
    if !matches!(scheme.as_str(), "http" | "https")
        || !matches!(uri.path(), "" | "/")
        || uri.query().is_some()
        || authority.as_str().contains('@')
    {
        return Err(bad());
    }
    let host = authority.host().to_ascii_lowercase();
    let default_port = if scheme == "https" { 443 } else { 80 };
    Ok(match authority.port_u16() {
        Some(port) if port != default_port => format!("{scheme}://{host}:{port}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// Whether binding `ip` needs `--allow-public`: anything but loopback, private (RFC 1918, IPv6
/// unique local) and link-local addresses. The unspecified address (all interfaces) is public.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !(v4.is_loopback() || v4.is_private() || v4.is_link_local()),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80)
        }
    }
}

/// How clients prove who they are.
struct Auth {
    tokens: Option<auth::Tokens>,
    mtls: bool,
}

/// What a connection learned in its TLS handshake.
#[derive(Clone, Default)]
struct Peer {
    /// The client certificate's subject (RFC 4514), or why it names no client.
    cert_subject: Option<Result<String, tls::SubjectError>>,
}

/// Who a request is, once authenticated.
#[derive(Clone)]
pub(crate) struct Principal(pub(crate) String);

/// Why a request is not served.
enum Refusal {
    /// No credentials, or wrong ones: `401` and nothing more.
    Unauthorized,
    /// A certificate the CA signed that names no client: `403` with the reason.
    Certificate(tls::SubjectError),
}

impl Auth {
    /// The principal of a request, and what its token may do (a certificate: everything).
    fn principal(
        &self,
        headers: &HeaderMap,
        peer: &Peer,
    ) -> Result<(String, auth::Scope), Refusal> {
        let subject = match (self.mtls, &peer.cert_subject) {
            (true, Some(Ok(s))) => Some(s.clone()),
            (true, Some(Err(e))) => return Err(Refusal::Certificate(e.clone())),
            // The handshake requires a certificate; a connection without one never gets here.
            (true, None) => return Err(Refusal::Unauthorized),
            (false, _) => None,
        };
        let label = match &self.tokens {
            Some(tokens) => {
                let presented = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| auth::bearer(v.as_bytes()))
                    .ok_or(Refusal::Unauthorized)?;
                let (label, scope) = tokens.check(presented).ok_or(Refusal::Unauthorized)?;
                Some((label.to_owned(), scope))
            }
            None => None,
        };
        match (label, subject) {
            (Some((l, scope)), Some(s)) => Ok((format!("{l} ({s})"), scope)),
            (Some((l, scope)), None) => Ok((l, scope)),
            (None, Some(s)) => Ok((s, auth::Scope::All)),
            (None, None) => Err(Refusal::Unauthorized),
        }
    }
}

pub(crate) struct NetState {
    hub: HubHandle,
    /// How clients authenticate; a reload swaps it.
    auth: RwLock<Arc<Auth>>,
    pub(crate) max_message_bytes: usize,
    write_timeout: Duration,
    pub(crate) body_timeout: Duration,
    pub(crate) max_sessions_per_principal: usize,
    allowed_origins: Vec<String>,
    principal_conns: Arc<PrincipalConns>,
    metrics: Arc<crate::metrics::Metrics>,
    /// Refused clients, logged a few lines a minute per address.
    refusals: Arc<refusals::RefusalLog>,
    pub(crate) settings_factory: Option<SettingsFactory>,
    pub(crate) mcp: mcp_http::McpSessions,
    pub(crate) mcp_idle_ms: u64,
}

/// What the options make ready before anything binds: how clients authenticate, the TLS
/// configuration, the options with their origins normalized, and what to warn of.
struct Prepared {
    auth: Auth,
    tls: Option<Arc<rustls::ServerConfig>>,
    options: NetOptions,
    warnings: Vec<String>,
}

/// Checks the options and loads what they name (tokens, certificates, key), as a start does.
fn prepare(options: NetOptions) -> Result<Prepared, NetError> {
    let addr = options.listen;
    if options.token_file.is_none() && options.client_ca.is_none() {
        return Err(NetError::NoAuth);
    }
    for a in std::iter::once(addr).chain(options.metrics_listen) {
        if is_public(a.ip()) && !options.allow_public {
            return Err(NetError::Public(a));
        }
    }
    let mut warnings = Vec::new();
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => {
            let config = tls::server_config(cert, key, options.client_ca.as_deref())?;
            warnings.extend(tls::certificate_warnings(
                cert,
                std::time::SystemTime::now(),
            )?);
            Some(config)
        }
        (None, None) if options.client_ca.is_some() => {
            return Err(NetError::Flags(
                "--client-ca needs --tls-cert and --tls-key (client certificates are checked in \
                 the TLS handshake)"
                    .into(),
            ));
        }
        (None, None) => None,
        _ => {
            return Err(NetError::Flags(
                "--tls-cert and --tls-key go together".into(),
            ));
        }
    };
    for a in std::iter::once(addr).chain(options.metrics_listen) {
        if tls.is_none() && !a.ip().is_loopback() && !options.allow_plaintext {
            return Err(NetError::Plaintext(a));
        }
    }
    let tokens = match &options.token_file {
        Some(path) => Some(auth::Tokens::load(path)?),
        None => None,
    };
    let mut options = options;
    options.allowed_origins = options
        .allowed_origins
        .iter()
        .map(|o| origin(o))
        .collect::<Result<_, _>>()?;
    let auth = Auth {
        tokens,
        mtls: options.client_ca.is_some(),
    };
    Ok(Prepared {
        auth,
        tls,
        options,
        warnings,
    })
}

/// What `rexd --listen --check-config` does: everything a start checks and loads (the flags,
/// the token file, the certificates and key), without binding; the warnings a start would
/// log (a certificate that has expired or soon will).
pub fn check(options: NetOptions) -> Result<Vec<String>, NetError> {
    prepare(options).map(|p| p.warnings)
}

/// Checks the options, binds, and serves until `SIGTERM` or `SIGINT`; then every session and
/// process ends as when a stdio client goes away. `SIGHUP` reloads (`docs/rexd-config.md`),
/// `SIGUSR1` opens the audit file again.
pub fn serve(settings: Settings, options: NetOptions) -> Result<(), NetError> {
    let addr = options.listen;
    let io = |source| NetError::Io { addr, source };
    let Prepared {
        auth,
        tls,
        options,
        warnings,
    } = prepare(options)?;
    for w in &warnings {
        crate::log::warn(w);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("rexd-net")
        .build()
        .map_err(io)?;
    let result = runtime.block_on(run(settings, options, auth, tls));
    runtime.shutdown_timeout(Duration::from_secs(1));
    crate::tree::kill_all_descendants();
    result
}

async fn run(
    settings: Settings,
    options: NetOptions,
    auth: Auth,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Result<(), NetError> {
    let addr = options.listen;
    let io = |source| NetError::Io { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(io)?;
    let local = listener.local_addr().map_err(io)?;
    let hub_config = HubConfig {
        high_water: (options.max_unsent_bytes / 4).max(64 * 1024),
        max_unsent_bytes: options.max_unsent_bytes,
        slow_reader_ms: options.slow_reader_ms,
        pointed_idle_ms: options.rpc_session_idle_ms,
        max_message_bytes: options.max_message_bytes,
        resume_grace_ms: options.resume_grace_ms,
        max_batch_answer_bytes: options.max_batch_answer_bytes,
        max_sessions_per_principal: options.max_sessions_per_principal,
        // What rexd holds for one client: a pointed session's output as its unsent bytes.
        collected_output_bytes: options.max_unsent_bytes,
        ..HubConfig::default()
    };
    let metrics_listener = match options.metrics_listen {
        Some(addr) => {
            let l = TcpListener::bind(addr)
                .await
                .map_err(|source| NetError::Io { addr, source })?;
            let local = l
                .local_addr()
                .map_err(|source| NetError::Io { addr, source })?;
            Some((l, local))
        }
        None => None,
    };
    let metrics = Arc::clone(&settings.metrics);
    let (hub, hub_thread) = hub::start(settings, hub_config).map_err(io)?;
    let state = Arc::new(NetState {
        hub: hub.clone(),
        auth: RwLock::new(Arc::new(auth)),
        max_message_bytes: options.max_message_bytes,
        write_timeout: Duration::from_millis(options.write_timeout_ms),
        body_timeout: Duration::from_millis(options.body_timeout_ms),
        max_sessions_per_principal: options.max_sessions_per_principal,
        allowed_origins: options.allowed_origins.clone(),
        principal_conns: Arc::new(PrincipalConns::new(options.max_connections_per_principal)),
        metrics,
        refusals: Arc::default(),
        settings_factory: options.load_settings.clone(),
        mcp: mcp_http::McpSessions::default(),
        mcp_idle_ms: options.rpc_session_idle_ms,
    });
    let router = Router::new()
        .route("/rpc", post(rpc))
        .route("/ws", get(ws))
        .route("/metrics", get(serve_metrics))
        .route("/mcp", axum::routing::any(mcp_http::handle))
        .fallback(|| async { StatusCode::NOT_FOUND })
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            authenticate,
        ))
        // Added after the layer: a load balancer's or systemd's health check needs no token.
        .route("/healthz", get(healthz))
        .with_state(Arc::clone(&state));
    let scheme = if tls.is_some() { "https" } else { "http" };
    let acceptor = Arc::new(RwLock::new(tls.map(tokio_rustls::TlsAcceptor::from)));
    let slots = Arc::new(Slots::new(options.max_connections));
    let header_timeout = Duration::from_millis(options.header_timeout_ms);
    let write_timeout = Duration::from_millis(options.write_timeout_ms);
    // The signals are caught before rexd says it is ready: a reload sent as soon as the
    // address is out must not find SIGHUP's default (or an ignoring parent's SIG_IGN).
    let stop = stop_signal().map_err(io)?;
    reload_on_hangup(Arc::clone(&state), options.clone(), Arc::clone(&acceptor)).map_err(io)?;
    reopen_audit_on_usr1(hub.clone()).map_err(io)?;
    // The one line on stdout: where to connect (with `--listen HOST:0`, the port chosen).
    println!("rexd: listening on {scheme}://{local}");
    crate::notify::ready_status(&format!("listening on {scheme}://{local}"));
    crate::log::info(&format!(
        "serving /rpc and /ws on {scheme}://{local} ({} connections at most)",
        options.max_connections
    ));
    let accept = Accept {
        acceptor,
        slots,
        header_timeout,
        write_timeout,
        metrics: Arc::clone(&state.metrics),
        refusals: Arc::clone(&state.refusals),
    };
    let metrics_loop = match metrics_listener {
        Some((listener, local)) => {
            let router = Router::new()
                .route("/metrics", get(serve_metrics))
                .fallback(|| async { StatusCode::NOT_FOUND })
                .layer(middleware::from_fn_with_state(
                    Arc::clone(&state),
                    authenticate,
                ))
                .with_state(Arc::clone(&state));
            println!("rexd: metrics on {scheme}://{local}/metrics");
            Some(tokio::spawn(accept.clone().run(
                listener,
                router,
                stop.clone(),
            )))
        }
        None => None,
    };
    accept.run(listener, router, stop).await;
    if let Some(l) = metrics_loop {
        let _ = l.await;
    }
    crate::log::info("stopping: ending every process, then exiting");
    crate::notify::stopping();
    hub.send(HubInput::Shutdown);
    drop(state);
    let joined = tokio::task::spawn_blocking(move || hub_thread.join())
        .await
        .ok();
    match joined {
        Some(Ok(result)) => result.map_err(io),
        _ => Ok(()),
    }
}

/// Turns `true` on `SIGTERM` or `SIGINT` (`SIGHUP` reloads: [`reload_on_hangup`]).
fn stop_signal() -> std::io::Result<watch::Receiver<bool>> {
    use tokio::signal::unix::{SignalKind, signal};
    let (tx, rx) = watch::channel(false);
    let tx = Arc::new(tx);
    for kind in [SignalKind::terminate(), SignalKind::interrupt()] {
        let mut s = signal(kind)?;
        let tx = Arc::clone(&tx);
        tokio::spawn(async move {
            if s.recv().await.is_some() {
                tx.send_replace(true);
            }
        });
    }
    Ok(rx)
}

/// What a reload loaded, before anything running changes.
struct Reloaded {
    prepared: Prepared,
    settings: Option<Settings>,
}

/// Loads everything a start loads, with the same flags: the token file, the certificates,
/// and (with `load_settings`) the config. Any error refuses the whole reload.
fn load_again(options: NetOptions) -> Result<Reloaded, String> {
    let settings = match &options.load_settings {
        Some(load) => Some(load().map_err(|e| e.to_string())?),
        None => None,
    };
    let prepared = prepare(options).map_err(|e| e.to_string())?;
    Ok(Reloaded { prepared, settings })
}

/// On each `SIGHUP`, loads the configuration again ([`load_again`]) and applies it without
/// stopping anything: new handshakes get the new certificates, new requests the new tokens,
/// and the service the new settings ([`HubInput::Reload`]), which ends what revoked tokens
/// hold. A configuration that fails to load is refused, and the running one stays.
fn reload_on_hangup(
    state: Arc<NetState>,
    options: NetOptions,
    acceptor: Arc<RwLock<Option<tokio_rustls::TlsAcceptor>>>,
) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            crate::notify::reloading();
            crate::log::info("SIGHUP: loading the configuration, tokens and certificates again");
            let options = options.clone();
            let loaded = tokio::task::spawn_blocking(move || load_again(options)).await;
            let loaded = loaded.unwrap_or_else(|e| Err(format!("the reload failed: {e}")));
            match loaded {
                Ok(reloaded) => apply_reload(&state, &acceptor, reloaded),
                Err(e) => {
                    crate::log::error(&format!(
                        "reload refused, the running configuration stays: {e}"
                    ));
                    crate::notify::status(&format!("reload refused: {e}"));
                }
            }
            crate::notify::ready();
        }
    });
    Ok(())
}

fn apply_reload(
    state: &NetState,
    acceptor: &RwLock<Option<tokio_rustls::TlsAcceptor>>,
    reloaded: Reloaded,
) {
    let Reloaded {
        prepared:
            Prepared {
                auth,
                tls,
                warnings,
                ..
            },
        settings,
    } = reloaded;
    for w in &warnings {
        crate::log::warn(w);
    }
    let revoked = {
        let mut current = state.auth.write().unwrap_or_else(|e| e.into_inner());
        let revoked = match (&current.tokens, &auth.tokens) {
            (Some(old), Some(new)) => old.revoked_by(new),
            _ => Vec::new(),
        };
        *current = Arc::new(auth);
        revoked
    };
    if let Some(tls) = tls {
        *acceptor.write().unwrap_or_else(|e| e.into_inner()) =
            Some(tokio_rustls::TlsAcceptor::from(tls));
    }
    state.mcp.end_sessions_of(&revoked);
    state.hub.send(HubInput::Reload {
        settings: settings.map(Box::new),
        revoked,
    });
}

/// On each `SIGUSR1`, the audit file is opened again at its path (after logrotate).
fn reopen_audit_on_usr1(hub: HubHandle) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut usr1 = signal(SignalKind::user_defined1())?;
    tokio::spawn(async move {
        while usr1.recv().await.is_some() {
            hub.send(HubInput::ReopenAudit);
        }
    });
    Ok(())
}

/// What an accept loop needs: TLS, the connection slots, the time limits.
#[derive(Clone)]
struct Accept {
    /// The TLS configuration (a reload swaps it); `None`: plaintext.
    acceptor: Arc<RwLock<Option<tokio_rustls::TlsAcceptor>>>,
    slots: Arc<Slots>,
    header_timeout: Duration,
    write_timeout: Duration,
    metrics: Arc<crate::metrics::Metrics>,
    refusals: Arc<refusals::RefusalLog>,
}

impl Accept {
    /// Accepts and serves connections until `stop` turns true.
    async fn run(self, listener: TcpListener, router: Router, mut stop: watch::Receiver<bool>) {
        let stopped = |stop: &watch::Receiver<bool>| *stop.borrow();
        loop {
            if stopped(&stop) {
                return;
            }
            let (tcp, addr) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        crate::log::warn(&format!("accept: {e}"));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = stop.changed() => continue,
            };
            // Its slot: a free one, or one a connection that never authenticated gives up;
            // past that, it waits with the clients behind it in the listen backlog.
            let pushed_out = |out: std::net::SocketAddr| {
                self.metrics.connections_pushed_out.inc();
                self.refusals.refused(
                    out,
                    "closed before authenticating: every connection slot (--max-connections) \
                     was taken and a new client needed one",
                );
            };
            let slot = tokio::select! {
                slot = self.slots.take(addr, pushed_out) => slot,
                _ = stop.changed() => continue,
            };
            let _ = tcp.set_nodelay(true);
            let tcp = ClientStream::new(tcp, self.write_timeout);
            let router = router.clone();
            let this = self.clone();
            tokio::spawn(async move {
                let watched = Arc::clone(&slot);
                tokio::select! {
                    () = this.serve(tcp, addr, slot, router) => {}
                    () = watched.until_pushed_out() => {}
                }
            });
        }
    }

    /// One connection: its TLS handshake (if any), then its HTTP requests.
    async fn serve(self, tcp: ClientStream, addr: SocketAddr, slot: Arc<ConnSlot>, router: Router) {
        let header_timeout = self.header_timeout;
        let acceptor = self
            .acceptor
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some(acceptor) = acceptor else {
            let peer = Peer::default();
            serve_connection(tcp, peer, slot, router, header_timeout, self.write_timeout).await;
            return;
        };
        let tls = match tokio::time::timeout(header_timeout, acceptor.accept(tcp)).await {
            Ok(Ok(tls)) => tls,
            // Logged with the address, for the operator's tools to act on.
            Ok(Err(e)) => {
                self.metrics.auth_failure("tls");
                let why = format!("the TLS handshake failed: {e}");
                self.refusals.refused(addr, &why);
                return;
            }
            Err(_) => {
                self.metrics.auth_failure("tls");
                let why = format!("no TLS handshake within {} ms", header_timeout.as_millis());
                self.refusals.refused(addr, &why);
                return;
            }
        };
        let cert_subject = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .map(tls::subject);
        let peer = Peer { cert_subject };
        serve_connection(tls, peer, slot, router, header_timeout, self.write_timeout).await;
    }
}

/// A client's TCP connection. A client that stops reading holds a write (and so its
/// connection) no longer than `--write-timeout-ms`: the write fails, and the connection with
/// it, WebSockets included. Such a connection is reset when dropped, so that the kernel does
/// not go on holding the unread bytes for a client that does not read them.
struct ClientStream {
    inner: Pin<Box<tokio_io_timeout::TimeoutStream<tokio::net::TcpStream>>>,
}

impl ClientStream {
    fn new(tcp: tokio::net::TcpStream, write_timeout: Duration) -> ClientStream {
        let mut inner = tokio_io_timeout::TimeoutStream::new(tcp);
        inner.set_write_timeout(Some(write_timeout));
        ClientStream {
            inner: Box::pin(inner),
        }
    }

    fn on_write<T>(&self, r: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if let Poll::Ready(Err(e)) = &r
            && e.kind() == std::io::ErrorKind::TimedOut
        {
            let _ = self.inner.get_ref().set_zero_linger();
        }
        r
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.inner.as_mut().poll_read(cx, buf)
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = self.inner.as_mut().poll_write(cx, buf);
        self.on_write(r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = self.inner.as_mut().poll_write_vectored(cx, bufs);
        self.on_write(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = self.inner.as_mut().poll_flush(cx);
        self.on_write(r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = self.inner.as_mut().poll_shutdown(cx);
        self.on_write(r)
    }
}

/// `GET /metrics`: the Prometheus text (OpenMetrics) of the daemon's counters and gauges.
async fn serve_metrics(State(state): State<Arc<NetState>>) -> Response {
    let mut r = state.metrics.encode().into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(crate::service::METRICS_CONTENT_TYPE),
    );
    r
}

/// Whether an error comes from the write timeout (`--write-timeout-ms`).
fn write_timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        cause = e.source();
    }
    false
}

fn log_write_timeout(write_timeout: Duration) {
    crate::log::warn(&format!(
        "dropped a connection: its client read nothing for --write-timeout-ms ({} ms)",
        write_timeout.as_millis()
    ));
}

async fn serve_connection<S>(
    io: S,
    peer: Peer,
    slot: Arc<ConnSlot>,
    router: Router,
    header_timeout: Duration,
    write_timeout: Duration,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service =
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(peer.clone());
            req.extensions_mut().insert(Arc::clone(&slot));
            router.clone().oneshot(req.map(Body::new))
        });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    if let Err(e) = builder
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades()
        .await
    {
        if write_timed_out(&e) {
            log_write_timeout(write_timeout);
        } else {
            crate::log::debug(&format!("connection: {e}"));
        }
    }
}

/// `401` with nothing more than RFC 6750 asks for.
/// `GET /healthz`, without authentication: `200 ok` while the daemon serves (it says nothing
/// else, so it tells a stranger nothing).
async fn healthz() -> &'static str {
    "ok\n"
}

fn unauthorized() -> Response {
    let mut r = StatusCode::UNAUTHORIZED.into_response();
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

async fn authenticate(
    State(state): State<Arc<NetState>>,
    mut req: Request,
    next: Next,
) -> Response {
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let origin = String::from_utf8_lossy(origin.as_bytes());
        let listed = state
            .allowed_origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(origin.trim_end_matches('/')));
        if !listed {
            // Only browsers send Origin; a page must not drive the daemon with the browser's
            // credentials (a client certificate, a token it got hold of).
            state.metrics.auth_failure("origin");
            refused(
                &state,
                &req,
                &format!(
                    "a request from a web page (Origin: {origin}), not given with --allow-origin"
                ),
            );
            return (
                StatusCode::FORBIDDEN,
                format!(
                    "a request from a web page (Origin: {origin}) is refused: rexd takes \
                     requests from web pages of the origins given with --allow-origin only\n"
                ),
            )
                .into_response();
        }
    }
    let peer = req.extensions().get::<Peer>().cloned().unwrap_or_default();
    let auth = Arc::clone(&state.auth.read().unwrap_or_else(|e| e.into_inner()));
    match auth.principal(req.headers(), &peer) {
        Ok((p, auth::Scope::Metrics)) if req.uri().path() != "/metrics" => {
            state.metrics.auth_failure("scope");
            let why = format!(
                "{p}'s token may only read /metrics (scope metrics), not {} {}",
                req.method(),
                req.uri().path()
            );
            refused(&state, &req, &why);
            (StatusCode::FORBIDDEN, format!("{why}\n")).into_response()
        }
        Ok((p, _)) => {
            let claimed = match req.extensions().get::<Arc<ConnSlot>>() {
                Some(slot) => slot.claim(&p, &state.principal_conns),
                None => Ok(()),
            };
            let (status, message) = match claimed {
                Ok(()) => {
                    req.extensions_mut().insert(Principal(p));
                    return next.run(req).await;
                }
                Err(ClaimError::PrincipalFull(open)) => {
                    crate::log::info(&format!(
                        "refused a connection of {p}: {open} open, its most \
                         (--max-connections-per-principal)"
                    ));
                    let message = format!(
                        "{p} has {open} connections open, the most \
                         --max-connections-per-principal allows: close one first\n"
                    );
                    (StatusCode::TOO_MANY_REQUESTS, message)
                }
                // It lost its slot to a new client just before its request came.
                Err(ClaimError::PushedOut) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "every connection slot is taken: connect again\n".to_owned(),
                ),
            };
            let mut r = (status, message).into_response();
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            r
        }
        Err(Refusal::Unauthorized) => {
            state.metrics.auth_failure("token");
            let why = format!(
                "no bearer token, or a wrong one ({} {})",
                req.method(),
                req.uri().path()
            );
            refused(&state, &req, &why);
            unauthorized()
        }
        Err(Refusal::Certificate(e)) => {
            state.metrics.auth_failure("tls");
            refused(&state, &req, &e.to_string());
            (StatusCode::FORBIDDEN, format!("{e}\n")).into_response()
        }
    }
}

/// Logs that the client that sent `req` was refused, and why (a few lines a minute per
/// address: [`refusals`]).
fn refused(state: &NetState, req: &Request, why: &str) {
    match req.extensions().get::<Arc<ConnSlot>>() {
        Some(slot) => state.refusals.refused(slot.addr, why),
        None => crate::log::warn(&format!("refused a client: {why}")),
    }
}

/// Tells the hub a connection is gone when its handler ends, however it ends.
struct Leave {
    hub: HubHandle,
    conn: ConnId,
}

impl Drop for Leave {
    fn drop(&mut self) {
        self.hub.send(HubInput::Closed { conn: self.conn });
    }
}

/// The answer to a `POST /rpc`, collected by the hub.
struct PointedSink {
    messages: Mutex<Vec<Vec<u8>>>,
    bytes: AtomicUsize,
    finished: Mutex<Option<oneshot::Sender<Result<(), String>>>>,
}

impl ConnSink for Arc<PointedSink> {
    fn send(&self, message: Vec<u8>) {
        self.bytes.fetch_add(message.len(), Ordering::Relaxed);
        self.messages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(message);
    }
    fn unsent(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
    fn consumed(&self, _: usize) {}
    fn close(&self, reason: &str) {
        if let Some(tx) = self
            .finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = tx.send(Err(reason.to_owned()));
        }
    }
    fn done(&self) {
        if let Some(tx) = self
            .finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = tx.send(Ok(()));
        }
    }
}

/// `408` for a body that did not arrive within `--body-timeout-ms`; the connection is closed.
pub(crate) fn body_too_slow(state: &NetState) -> Response {
    let ms = state.body_timeout.as_millis();
    crate::log::info(&format!(
        "a request's body did not arrive within --body-timeout-ms ({ms} ms): connection closed"
    ));
    let mut r = (
        StatusCode::REQUEST_TIMEOUT,
        format!("the body did not arrive within --body-timeout-ms ({ms} ms)\n"),
    )
        .into_response();
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn rpc(
    State(state): State<Arc<NetState>>,
    axum::Extension(Principal(principal)): axum::Extension<Principal>,
    req: Request,
) -> Response {
    let address = req
        .extensions()
        .get::<Arc<ConnSlot>>()
        .map(|slot| slot.addr.to_string());
    let json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "POST /rpc takes Content-Type: application/json\n",
        )
            .into_response();
    }
    let too_large = || {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is over {} bytes\n", state.max_message_bytes),
        )
            .into_response()
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > state.max_message_bytes as u64) {
        return too_large();
    }
    let collected = tokio::time::timeout(
        state.body_timeout,
        Limited::new(req.into_body(), state.max_message_bytes).collect(),
    )
    .await;
    let body = match collected {
        Err(_) => return body_too_slow(&state),
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(),
        Ok(Err(_)) => return StatusCode::BAD_REQUEST.into_response(),
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return json_response(
            StatusCode::BAD_REQUEST,
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"empty body: POST one JSON-RPC request or a batch"}}"#.to_vec(),
        );
    }
    let (tx, rx) = oneshot::channel();
    let sink = Arc::new(PointedSink {
        messages: Mutex::new(Vec::new()),
        bytes: AtomicUsize::new(0),
        finished: Mutex::new(Some(tx)),
    });
    let conn = state.hub.next_conn();
    let _leave = Leave {
        hub: state.hub.clone(),
        conn,
    };
    let opened = state.hub.send(HubInput::Open {
        conn,
        info: ConnInfo {
            principal,
            address,
            kind: ConnKind::Pointed,
            raw_frames: false,
        },
        sink: Box::new(Arc::clone(&sink)),
    }) && state.hub.send(HubInput::Message {
        conn,
        bytes: body.to_vec(),
    });
    if !opened {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    match rx.await {
        Ok(Ok(())) => {}
        Ok(Err(reason)) => return (StatusCode::SERVICE_UNAVAILABLE, reason).into_response(),
        Err(_) => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
    let mut messages =
        std::mem::take(&mut *sink.messages.lock().unwrap_or_else(|e| e.into_inner()));
    match messages.len() {
        0 => StatusCode::NO_CONTENT.into_response(),
        // One body is one JSON value; the hub makes one answer (or one batch array) per message.
        _ => json_response(StatusCode::OK, messages.swap_remove(0)),
    }
}

/// One message to a WebSocket client: a text message (one JSON value), or a binary one (a raw
/// frame: its line, `\n`, its bytes; `docs/rexd-raw-frames.md`).
enum Outbound {
    Text(Vec<u8>),
    Binary(Vec<u8>),
}

impl Outbound {
    fn len(&self) -> usize {
        match self {
            Outbound::Text(b) | Outbound::Binary(b) => b.len(),
        }
    }
}

/// The hub's way to a WebSocket client: messages through a channel to the writer, their bytes
/// counted until written; input credit given back as the hub takes messages.
struct StreamSink {
    tx: mpsc::UnboundedSender<Outbound>,
    unsent: Arc<AtomicUsize>,
    credits: Arc<Semaphore>,
    credit_cap: usize,
    close: watch::Sender<Option<String>>,
}

impl ConnSink for StreamSink {
    fn send(&self, message: Vec<u8>) {
        self.unsent.fetch_add(message.len(), Ordering::Relaxed);
        let _ = self.tx.send(Outbound::Text(message));
    }
    /// A raw frame is one binary message: the line, `\n`, the bytes. The hub sends frames
    /// only to sessions granted raw frames, so a client that did not ask gets text only.
    fn send_frame(&self, message: Vec<u8>, bytes: Vec<u8>) {
        let message = deskwire::rexd::frames::binary_message(message, &bytes);
        self.unsent.fetch_add(message.len(), Ordering::Relaxed);
        let _ = self.tx.send(Outbound::Binary(message));
    }
    fn unsent(&self) -> usize {
        self.unsent.load(Ordering::Relaxed)
    }
    fn consumed(&self, bytes: usize) {
        self.credits.add_permits(bytes.min(self.credit_cap));
    }
    fn close(&self, reason: &str) {
        self.close.send_replace(Some(reason.to_owned()));
    }
    fn done(&self) {}
}

async fn ws(
    State(state): State<Arc<NetState>>,
    axum::Extension(Principal(principal)): axum::Extension<Principal>,
    axum::Extension(slot): axum::Extension<Arc<ConnSlot>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let max = state.max_message_bytes;
    upgrade
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| async move {
            // The connection's place under the limits lives as long as the WebSocket.
            let address = slot.addr.to_string();
            let _slot = slot;
            ws_session(socket, state, principal, address).await
        })
}

/// Bytes of a WebSocket client's messages the hub may hold before it reads no more of them.
const INBOUND_CREDIT: usize = 1 << 20;

/// WebSocket close codes (RFC 6455 §7.4.1).
const CLOSE_POLICY: u16 = 1008;
const CLOSE_UNSUPPORTED: u16 = 1003;
const CLOSE_GOING_AWAY: u16 = 1001;
const CLOSE_TOO_BIG: u16 = 1009;

/// A close reason fits a control frame: 123 bytes, cut on a character boundary.
fn close_frame(code: u16, reason: &str) -> Message {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    Message::Close(Some(CloseFrame {
        code,
        reason: reason[..end].into(),
    }))
}

async fn ws_session(socket: WebSocket, state: Arc<NetState>, principal: String, address: String) {
    let hub = state.hub.clone();
    let conn = hub.next_conn();
    let _leave = Leave {
        hub: hub.clone(),
        conn,
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<Outbound>();
    let unsent = Arc::new(AtomicUsize::new(0));
    // What the hub may hold of this client's messages: one message of any size, or up to
    // this many bytes of smaller ones; past it the client's sends wait in its socket.
    let credit_cap = INBOUND_CREDIT.min(state.max_message_bytes);
    let credits = Arc::new(Semaphore::new(credit_cap));
    let (close_tx, mut close_rx) = watch::channel(None::<String>);
    let sink = StreamSink {
        tx,
        unsent: Arc::clone(&unsent),
        credits: Arc::clone(&credits),
        credit_cap,
        close: close_tx,
    };
    if !hub.send(HubInput::Open {
        conn,
        info: ConnInfo {
            principal,
            address: Some(address),
            kind: ConnKind::Stream,
            // A raw frame travels as one binary message (`StreamSink::send_frame`).
            raw_frames: true,
        },
        sink: Box::new(sink),
    }) {
        return;
    }
    let (mut to_client, mut from_client) = socket.split();
    // Ends with the close to send when the client broke the rules.
    let reader = async {
        while let Some(message) = from_client.next().await {
            let text = match message {
                Ok(Message::Text(t)) => t,
                Ok(Message::Binary(_)) => {
                    return Some((
                        CLOSE_UNSUPPORTED,
                        "binary messages are not JSON-RPC: send text (only the daemon sends \
                         binary messages, for raw frames)",
                    ));
                }
                Err(e) => {
                    let capacity = e
                        .into_inner()
                        .downcast_ref::<tungstenite::Error>()
                        .is_some_and(|e| matches!(e, tungstenite::Error::Capacity(_)));
                    return capacity.then_some((
                        CLOSE_TOO_BIG,
                        "message over the daemon's --max-message-bytes",
                    ));
                }
                Ok(Message::Close(_)) => return None,
                Ok(_) => continue,
            };
            let len = text.len();
            let Ok(credit) = credits.acquire_many(len.min(credit_cap) as u32).await else {
                return None;
            };
            // Given back by the hub once it takes the message (`ConnSink::consumed`).
            credit.forget();
            if !hub.send(HubInput::Message {
                conn,
                bytes: text.as_str().as_bytes().to_vec(),
            }) {
                return None;
            }
        }
        None
    };
    let writer = async {
        let why = |rx: &watch::Receiver<Option<String>>| {
            rx.borrow()
                .clone()
                .unwrap_or_else(|| "the daemon is shutting down".into())
        };
        let reason = loop {
            let message = tokio::select! {
                biased;
                _ = close_rx.changed() => break why(&close_rx),
                m = rx.recv() => match m {
                    Some(m) => m,
                    None => break why(&close_rx),
                },
            };
            let len = message.len();
            let message = match message {
                Outbound::Text(bytes) => Message::Text(
                    match String::from_utf8(bytes) {
                        Ok(t) => t,
                        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
                    }
                    .into(),
                ),
                Outbound::Binary(bytes) => Message::Binary(bytes.into()),
            };
            // A client that stopped reading blocks this send: the hub's verdict must still
            // get through, so the send gives way to it.
            let sent = tokio::select! {
                biased;
                _ = close_rx.changed() => break why(&close_rx),
                sent = to_client.send(message) => sent,
            };
            unsent.fetch_sub(len, Ordering::Relaxed);
            if let Err(e) = sent {
                if write_timed_out(&e) {
                    log_write_timeout(state.write_timeout);
                }
                return;
            }
        };
        let code = if reason.starts_with("the daemon") {
            CLOSE_GOING_AWAY
        } else {
            CLOSE_POLICY
        };
        // A client that does not read gets no more than a second for the close frame.
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            to_client.send(close_frame(code, &reason)),
        )
        .await;
    };
    let broken = tokio::select! {
        broken = reader => broken,
        _ = writer => None,
    };
    if let Some((code, reason)) = broken {
        crate::log::info(&format!("closing connection {conn}: {reason}"));
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            to_client.send(close_frame(code, reason)),
        )
        .await;
        // What the client still sends is read and dropped for a moment, so the close frame is
        // not lost to a reset from unread data.
        let _ = tokio::time::timeout(Duration::from_millis(500), async {
            while from_client.next().await.is_some() {}
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_origins_are_written_as_browsers_send_them() {
        for (given, want) in [
            ("https://desk.example", "https://desk.example"),
            ("HTTPS://Desk.Example:443/", "https://desk.example"),
            ("http://desk.example:80", "http://desk.example"),
            ("https://desk.example:8443", "https://desk.example:8443"),
            ("http://127.0.0.1:3000", "http://127.0.0.1:3000"),
        ] {
            assert_eq!(origin(given).unwrap(), want, "{given}");
        }
        for bad in [
            "desk.example",
            "https://desk.example/app",
            "https://desk.example/?x=1",
            "ftp://desk.example",
            "https://user@desk.example",
            "",
        ] {
            let e = origin(bad).unwrap_err().to_string();
            assert!(e.contains("scheme://host[:port]"), "{bad}: {e}");
        }
    }
}
