//! The `https://` / `wss://` transport of the client: a WebSocket to `rexd --listen`'s `/ws`,
//! with a bearer token (from a file or the environment) and, for mTLS, a client certificate.
//!
//! The caller stays blocking: a thread runs a small tokio runtime with the socket. Received
//! messages go to the client's inbox (the same channel a child's stdout feeds) whole: a text
//! message as one NDJSON line, a binary one (a raw frame: its line, `\n`, its bytes;
//! `docs/rexd-raw-frames.md`) as it is, for the client's [`RawFrames`] to check. Lines the
//! peer writes become one text message each.
//!
//! [`RawFrames`]: deskwire::rexd::frames::RawFrames

use std::io;
use std::path::Path;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::connection::Input;
use super::error::ClientError;
use super::{Endpoint, TargetSpec};

/// The largest message accepted from the daemon (its answers are bounded by its own limits).
/// A binary message's header is checked against what was asked for once the message is in;
/// this bounds what the WebSocket layer takes in before that.
const MAX_MESSAGE: usize = 64 << 20;
/// The environment variable a token is read from when the target names no file.
pub const DEFAULT_TOKEN_ENV: &str = "REXD_TOKEN";

/// A running WebSocket transport.
pub(crate) struct WsTransport {
    tx: Option<mpsc::UnboundedSender<Vec<u8>>>,
    thread: Option<JoinHandle<()>>,
    /// Why the connection ended, once it did (the daemon's close reason, or the error).
    ended: Arc<Mutex<Option<String>>>,
}

fn bad(spec: &TargetSpec, reason: String) -> ClientError {
    ClientError::BadTarget {
        target: spec.url.clone(),
        reason,
    }
}

/// A file the connection needs, named with the option that gives it.
fn setting(what: &str, path: &Path, option: &str, reason: String) -> ClientError {
    ClientError::Setting {
        setting: format!("the {what} {} ({option})", path.display()),
        reason,
    }
}

/// The bearer token: the first line of `token_file`, else `$token_env` (default `REXD_TOKEN`),
/// without the spaces and line end around it.
pub(crate) fn token(spec: &TargetSpec) -> Result<Option<String>, ClientError> {
    if let Some(path) = &spec.token_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| setting("token file", path, "--token-file", e.to_string()))?;
        let token = text.lines().next().unwrap_or("").trim().to_owned();
        if token.is_empty() {
            return Err(setting(
                "token file",
                path,
                "--token-file",
                "its first line is empty (the file holds the token alone, on its first line)"
                    .into(),
            ));
        }
        return Ok(Some(token));
    }
    let var = spec.token_env.as_deref().unwrap_or(DEFAULT_TOKEN_ENV);
    let token = std::env::var(var)
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty());
    // A variable the user named that holds nothing is a mistake to say, not a request to send
    // without a token.
    if token.is_none() && spec.token_env.is_some() {
        return Err(ClientError::Setting {
            setting: format!("the token variable ${var} (--token-env)"),
            reason: "it is not set, or empty".into(),
        });
    }
    Ok(token)
}

fn tls_config(spec: &TargetSpec) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let mut roots = rustls::RootCertStore::empty();
    match &spec.ca_file {
        Some(ca) => {
            for cert in read_certs(ca, "CA file", "--ca-file")? {
                roots
                    .add(cert)
                    .map_err(|e| setting("CA file", ca, "--ca-file", certificate_problem(&e)))?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                // A system root rustls cannot use is skipped, as browsers do.
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(spec, e.to_string()))?
        .with_root_certificates(roots);
    let config = match (&spec.client_cert, &spec.client_key) {
        (Some(cert), Some(key_path)) => {
            let chain = read_certs(cert, "client certificate", "--client-cert")?;
            let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| {
                let reason = match e {
                    rustls::pki_types::pem::Error::Io(io) => io.to_string(),
                    other => format!("no PEM private key in it ({other})"),
                };
                setting("client key", key_path, "--client-key", reason)
            })?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                setting(
                    "client certificate",
                    cert,
                    "--client-cert",
                    certificate_problem(&e),
                )
            })?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(bad(spec, "client_cert and client_key go together".into()));
        }
    };
    Ok(Arc::new(config))
}

fn read_certs(
    path: &Path,
    what: &str,
    option: &str,
) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| setting(what, path, option, e.to_string()))?;
    if certs.is_empty() {
        return Err(setting(
            what,
            path,
            option,
            "no PEM certificate in it (a DER file? `openssl x509 -inform der -in FILE -out \
             FILE.pem` converts it)"
                .into(),
        ));
    }
    Ok(certs)
}

/// Connects (TLS, WebSocket handshake with the token) and starts the transport thread.
pub(crate) fn connect(
    spec: &TargetSpec,
    endpoint: &Endpoint,
    inbox: SyncSender<Input>,
) -> Result<WsTransport, ClientError> {
    let Endpoint::Ws {
        url,
        given,
        host,
        port,
        tls,
    } = endpoint
    else {
        return Err(bad(spec, "not a network target".into()));
    };
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| bad(spec, e.to_string()))?;
    if let Some(token) = token(spec)? {
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| bad(spec, "the token is not a valid header value".into()))?;
        request.headers_mut().insert("authorization", value);
    }
    let tls = if *tls { Some(tls_config(spec)?) } else { None };
    let (host, port, given) = (host.clone(), *port, given.clone());
    let (tx, rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let ended = Arc::new(Mutex::new(None));
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<(), ClientError>>(1);
    let ended_in = Arc::clone(&ended);
    let thread = std::thread::Builder::new()
        .name("rex-ws".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(source) => {
                    let _ = ready_tx.send(Err(ClientError::Io {
                        target: given,
                        source,
                    }));
                    return;
                }
            };
            runtime.block_on(run(
                request, host, port, tls, given, rx, inbox, ready_tx, ended_in,
            ));
        })
        .map_err(|source| ClientError::Spawn {
            program: "rex-ws thread".into(),
            source,
        })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(WsTransport {
            tx: Some(tx),
            thread: Some(thread),
            ended,
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = thread.join();
            Err(bad(spec, "the transport thread ended".into()))
        }
    }
}

/// Why a daemon may have refused what was `sent` (a 401 or a 403), and the fix.
fn refusal_hint(status: u16, sent: Option<&str>) -> String {
    match (status, sent) {
        (403, _) => "the token is known but not for this (a `metrics` token reads /metrics \
                     only): use a token of the default scope"
            .into(),
        (_, None) => "no token was given: give it with --token-file, or in $REXD_TOKEN \
                      (--token-env names another variable)"
            .into(),
        (_, Some(token)) if token.contains(':') => "the token given holds a `:`: a client's \
            token is only the TOKEN of the daemon's LABEL:TOKEN line, without the label"
            .into(),
        _ => {
            "the token given is not one it accepts (mistyped, revoked, or another daemon's)".into()
        }
    }
}

/// A certificate or key rustls refused, in words.
fn certificate_problem(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InconsistentKeys(_) => {
            "the key (--client-key) does not belong to this certificate".into()
        }
        other => crate::tls_advice::certificate_problem(other),
    }
}

type Request = tokio_tungstenite::tungstenite::handshake::client::Request;

/// How a `rex` user fixes a failed TLS handshake.
const TLS_ADVICE: crate::tls_advice::Options<'static> = crate::tls_advice::Options {
    ca: "--ca-file FILE",
    client_cert: Some("--client-cert FILE with --client-key FILE"),
    plain: "use http:// for it, on loopback",
};

/// The link under the WebSocket: TCP, or TLS over it.
trait Link: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Link for T {}

/// How long the TCP connection, TLS and the WebSocket handshake may take together: a port
/// that accepts and never answers is given up, as ssh's `ConnectTimeout` would.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

#[allow(clippy::too_many_arguments)]
async fn run(
    request: Request,
    host: String,
    port: u16,
    tls: Option<Arc<rustls::ClientConfig>>,
    given: String,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    inbox: SyncSender<Input>,
    ready: std::sync::mpsc::SyncSender<Result<(), ClientError>>,
    ended: Arc<Mutex<Option<String>>>,
) {
    let opened =
        tokio::time::timeout(CONNECT_TIMEOUT, open(request, &host, port, tls, &given)).await;
    let ws = match opened {
        Ok(Ok(ws)) => ws,
        Ok(Err(e)) => {
            let _ = ready.send(Err(e));
            return;
        }
        Err(_) => {
            let _ = ready.send(Err(ClientError::Io {
                target: given,
                source: io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no answer to the TLS or WebSocket handshake within {} s (a port \
                         that accepts and does not answer: not a rexd --listen, or a \
                         firewall holding it)",
                        CONNECT_TIMEOUT.as_secs()
                    ),
                ),
            }));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    pump(ws, &mut rx, &inbox, &ended).await;
}

/// TCP, TLS when asked, and the WebSocket handshake with the token.
async fn open(
    request: Request,
    host: &str,
    port: u16,
    tls: Option<Arc<rustls::ClientConfig>>,
    given: &str,
) -> Result<tokio_tungstenite::WebSocketStream<Box<dyn Link>>, ClientError> {
    let io_err = |source: io::Error| ClientError::Io {
        target: given.to_owned(),
        source,
    };
    // A TLS failure in words, with rex's options to fix it.
    let tls_err = |e: io::Error| match crate::tls_advice::rustls_error(&e) {
        Some(tls) => ClientError::Tls {
            target: given.to_owned(),
            reason: crate::tls_advice::explain(tls, host, &TLS_ADVICE),
        },
        None => io_err(e),
    };
    let plain = tls.is_none();
    let tcp = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(io_err)?;
    let _ = tcp.set_nodelay(true);
    let link: Box<dyn Link> = match tls {
        Some(config) => {
            let name = ServerName::try_from(host.to_owned())
                .map_err(|e| io_err(io::Error::other(e.to_string())))?;
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(tls_err)?;
            Box::new(stream)
        }
        None => Box::new(tcp),
    };
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let sent = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    use tokio_tungstenite::tungstenite::Error as WsError;
    match tokio_tungstenite::client_async_with_config(request, link, Some(config)).await {
        Ok((ws, _)) => Ok(ws),
        Err(WsError::Http(r)) if matches!(r.status().as_u16(), 401 | 403) => {
            let status = r.status().as_u16();
            Err(ClientError::Unauthorized {
                target: given.to_owned(),
                status,
                hint: refusal_hint(status, sent.as_deref()),
            })
        }
        // A limit of the daemon's: its answer says which (and it is a refusal, not a link
        // that could not be made).
        Err(WsError::Http(r)) if matches!(r.status().as_u16(), 429 | 503) => {
            let status = r.status();
            let said = r
                .body()
                .as_deref()
                .map(String::from_utf8_lossy)
                .and_then(|b| {
                    b.lines()
                        .next()
                        .map(|l| l.trim().chars().take(300).collect::<String>())
                })
                .filter(|l| !l.is_empty());
            Err(ClientError::Busy {
                target: given.to_owned(),
                status: status.as_u16(),
                message: said.unwrap_or_else(|| status.canonical_reason().unwrap_or("").to_owned()),
            })
        }
        // With TLS 1.3 a refused client certificate shows only after the handshake.
        Err(WsError::Io(e)) => Err(tls_err(e)),
        // Bytes that are not HTTP on a plain connection: most likely a TLS port dialled as
        // http://.
        Err(WsError::Protocol(
            tokio_tungstenite::tungstenite::error::ProtocolError::HttparseError(e),
        )) if plain => Err(io_err(io::Error::other(format!(
            "it does not answer HTTP ({e}): a TLS port? use https:// for it"
        )))),
        Err(other) => Err(io_err(io::Error::other(other.to_string()))),
    }
}

/// Moves messages both ways until either side ends; the inbox then gets `StdoutEnd`.
async fn pump<S>(
    ws: tokio_tungstenite::WebSocketStream<S>,
    rx: &mut mpsc::UnboundedReceiver<Vec<u8>>,
    inbox: &SyncSender<Input>,
    ended: &Mutex<Option<String>>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut stream) = ws.split();
    let why = loop {
        tokio::select! {
            line = rx.recv() => match line {
                Some(line) => {
                    let text = String::from_utf8_lossy(&line).into_owned();
                    if let Err(e) = sink.send(Message::Text(text.into())).await {
                        break e.to_string();
                    }
                }
                None => {
                    // The client closed: say goodbye properly.
                    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
                    break "closed by the client".into();
                }
            },
            message = stream.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    let mut line = text.as_str().as_bytes().to_vec();
                    line.push(b'\n');
                    if !deliver(inbox, Input::Text(line)).await {
                        break "the client is gone".into();
                    }
                }
                Some(Ok(Message::Binary(bytes))) => {
                    if !deliver(inbox, Input::Binary(bytes.into())).await {
                        break "the client is gone".into();
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    break match frame {
                        // 1009: a message over the daemon's own --max-message-bytes.
                        Some(f) if u16::from(f.code) == 1009 => format!(
                            "the daemon closed the connection (1009): {}; send less in one \
                             message (a file in pieces: rex write, then rex write --append)",
                            f.reason
                        ),
                        Some(f) => format!("the daemon closed the connection ({}): {}", u16::from(f.code), f.reason),
                        None => "the daemon closed the connection".into(),
                    };
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => break e.to_string(),
                None => break "the connection ended".into(),
            },
        }
    };
    *ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    deliver(inbox, Input::StdoutEnd(None)).await;
}

/// Hands `input` to the blocking side, waiting (without blocking the runtime) while its
/// channel is full: the daemon is slowed down by the socket, not buffered here.
async fn deliver(inbox: &SyncSender<Input>, mut input: Input) -> bool {
    loop {
        match inbox.try_send(input) {
            Ok(()) => return true,
            Err(TrySendError::Full(back)) => {
                input = back;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Err(TrySendError::Disconnected(_)) => return false,
        }
    }
}

impl WsTransport {
    /// Sends the peer's bytes: one text message per line.
    pub(crate) fn send(&mut self, bytes: &[u8]) -> bool {
        let Some(tx) = &self.tx else {
            return false;
        };
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            if tx.send(line.to_vec()).is_err() {
                return false;
            }
        }
        true
    }

    /// Whether the connection can still carry calls.
    pub(crate) fn is_open(&self) -> bool {
        self.tx.as_ref().is_some_and(|t| !t.is_closed())
    }

    /// Why it ended, once it did.
    pub(crate) fn ended(&self) -> String {
        self.ended
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| "the connection ended".into())
    }

    /// Closes the WebSocket (a close frame) and waits a moment for the thread.
    pub(crate) fn shutdown(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let deadline = std::time::Instant::now() + Duration::from_secs(2);
            while !t.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}
