//! The IRC link of the Rust drivers (`rexd --irc` and the desk demo): where to connect, plain
//! TCP or TLS, the passwords read from files, as one nonblocking stream that a mio loop drives
//! (rustls' own `tlsclient-mio` pattern: the TLS state machine is fed the socket's bytes, as the
//! deskwire engines are fed the stream's).
//!
//! - A target is `ircs://HOST:PORT` (TLS; 6697 when the port is left out), `irc://HOST:PORT`
//!   or `HOST:PORT` (plain TCP, as before).
//! - Certificates are verified by default, host name included, against the platform's roots
//!   or `--irc-ca FILE`; `--irc-insecure-skip-verify` turns that off and is logged at start.
//! - A client certificate (`--irc-client-cert` with `--irc-client-key`) is what SASL EXTERNAL
//!   logs in with.
//! - A refused connect says the host, the port and the OS's reason; a failed handshake says
//!   which check failed (an untrusted certificate, a name mismatch, a server that answered in
//!   plain text), never a timeout.

use std::io::{self, Read, Write};
use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mio::net::TcpStream;

/// The default port of `ircs://` (IANA).
pub const IRCS_PORT: u16 = 6697;
/// The default port of `irc://`.
pub const IRC_PORT: u16 = 6667;
/// How long a TCP connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the TLS handshake may take: a plain-text port answers a `ClientHello` with
/// nothing at all (it waits for a line end), and a server that says nothing is not TLS.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the link could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The target is not `ircs://HOST[:PORT]`, `irc://HOST[:PORT]` or `HOST:PORT`.
    #[error(
        "{0:?}: expected the IRC server as ircs://HOST[:PORT] (TLS), irc://HOST[:PORT] or \
         HOST:PORT, e.g. ircs://irc.example.net:6697 or 127.0.0.1:6667"
    )]
    Target(String),
    /// The name does not resolve.
    #[error("{target}: {reason}")]
    Resolve {
        /// The target.
        target: String,
        /// The resolver's words.
        reason: String,
    },
    /// The TCP connect failed.
    #[error("connect to {target} failed: {source}")]
    Connect {
        /// The target.
        target: String,
        /// The OS's reason.
        source: io::Error,
    },
    /// A TLS file or setting cannot be used.
    #[error("{0}")]
    TlsSetup(String),
    /// TLS was asked for in a build without it.
    #[error("{0}: this rexd was built without TLS (the `net` feature)")]
    NoTls(String),
}

/// Where to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The host name or address (what the certificate must name).
    pub host: String,
    /// The port.
    pub port: u16,
    /// TLS (`ircs://`).
    pub tls: bool,
}

impl Target {
    /// `ircs://HOST[:PORT]`, `irc://HOST[:PORT]` or `HOST:PORT`; `[::1]:6697` for IPv6.
    pub fn parse(text: &str) -> Result<Target, TransportError> {
        let bad = || TransportError::Target(text.to_owned());
        let (rest, tls, default_port) = if let Some(rest) = text.strip_prefix("ircs://") {
            (rest, true, Some(IRCS_PORT))
        } else if let Some(rest) = text.strip_prefix("irc://") {
            (rest, false, Some(IRC_PORT))
        } else if text.contains("://") {
            return Err(bad());
        } else {
            (text, false, None)
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(':') && !port.contains(']') => {
                (host, Some(port.parse::<u16>().map_err(|_| bad())?))
            }
            _ => (rest, None),
        };
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let port = port.or(default_port).ok_or_else(bad)?;
        if host.is_empty() || port == 0 || host.contains(['/', ' ', '@']) {
            return Err(bad());
        }
        Ok(Target {
            host: host.to_owned(),
            port,
            tls,
        })
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "ircs" } else { "irc" };
        match self.host.contains(':') {
            true => write!(f, "{scheme}://[{}]:{}", self.host, self.port),
            false => write!(f, "{scheme}://{}:{}", self.host, self.port),
        }
    }
}

/// TLS settings of the link (with an `ircs://` target).
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// Trust this CA (PEM) instead of the platform's roots.
    pub ca_file: Option<PathBuf>,
    /// Show this certificate (PEM chain) to the server: SASL EXTERNAL's identity.
    pub client_cert: Option<PathBuf>,
    /// Its key (PEM).
    pub client_key: Option<PathBuf>,
    /// Do not verify the server's certificate at all. For a test server only.
    pub insecure_skip_verify: bool,
}

/// Reads a file of secrets given as `flag`: its bytes without the line end, refused when it is
/// empty or readable by group or others (`risk` says what a reader could do). systemd's
/// credentials (`$CREDENTIALS_DIRECTORY`, where the packaged unit's secrets are) are the
/// service's alone whatever the bits say: systemd may grant them with an ACL whose mask shows
/// as group bits.
pub fn read_private_file(flag: &str, path: &Path, risk: &str) -> Result<Vec<u8>, String> {
    let failed = |e: io::Error| format!("{flag} {}: {e}", path.display());
    let credential = std::env::var_os("CREDENTIALS_DIRECTORY")
        .is_some_and(|dir| !dir.is_empty() && path.starts_with(dir));
    if !credential && let Some(mode) = crate::sys::open_to_others(path).map_err(failed)? {
        return Err(format!(
            "{flag} {}: readable by group or others (mode {mode:o}); `chmod 600` it: {risk}",
            path.display()
        ));
    }
    let mut secret = std::fs::read(path).map_err(failed)?;
    while secret.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        secret.pop();
    }
    if secret.is_empty() {
        return Err(format!("{flag} {}: the file is empty", path.display()));
    }
    Ok(secret)
}

/// A password file ([`read_private_file`]): one line of UTF-8 without NUL, CR or LF.
pub fn read_password_file(flag: &str, path: &Path) -> Result<String, String> {
    let bytes = read_private_file(flag, path, "whoever reads it logs in as this daemon")?;
    String::from_utf8(bytes)
        .ok()
        .filter(|p| !p.contains(['\0', '\r', '\n']))
        .ok_or_else(|| format!("{flag} {}: not one line of UTF-8 text", path.display()))
}

/// The link: a nonblocking socket, plain or wrapped in TLS. Register [`IrcStream::socket`] with
/// mio for reading and writing; after a readable event call [`IrcStream::read`] until it says
/// `WouldBlock`, and write with [`IrcStream::write`], then [`IrcStream::flush`] whenever the
/// socket is writable and [`IrcStream::wants_write`].
pub struct IrcStream {
    socket: TcpStream,
    /// When the TCP connection was made (the TLS handshake's clock).
    #[cfg(feature = "net")]
    connected_at: std::time::Instant,
    #[cfg(feature = "net")]
    tls: Option<Box<tls::Tls>>,
    target: Target,
}

impl std::fmt::Debug for IrcStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IrcStream")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl IrcStream {
    /// Resolves and connects (blocking, at most 15 s), then sets the socket nonblocking; with
    /// TLS the handshake then runs as the loop reads and writes.
    pub fn connect(target: &Target, tls_options: &TlsOptions) -> Result<IrcStream, TransportError> {
        let name = format!("{}:{}", target.host, target.port);
        let addrs: Vec<_> = (target.host.as_str(), target.port)
            .to_socket_addrs()
            .map_err(|e| TransportError::Resolve {
                target: target.to_string(),
                reason: e.to_string(),
            })?
            .collect();
        let mut last = None;
        let mut connected = None;
        for addr in &addrs {
            match std::net::TcpStream::connect_timeout(addr, CONNECT_TIMEOUT) {
                Ok(s) => {
                    connected = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let std_socket = connected.ok_or_else(|| TransportError::Connect {
            target: name.clone(),
            source: last.unwrap_or_else(|| io::Error::other("the name has no address")),
        })?;
        let setup = |e: io::Error| TransportError::Connect {
            target: name.clone(),
            source: e,
        };
        std_socket.set_nodelay(true).map_err(setup)?;
        std_socket.set_nonblocking(true).map_err(setup)?;
        let socket = TcpStream::from_std(std_socket);
        #[cfg(feature = "net")]
        let tls = match target.tls {
            true => Some(Box::new(tls::Tls::new(target, tls_options)?)),
            false => None,
        };
        #[cfg(not(feature = "net"))]
        if target.tls {
            let _ = tls_options;
            return Err(TransportError::NoTls(target.to_string()));
        }
        Ok(IrcStream {
            socket,
            #[cfg(feature = "net")]
            connected_at: std::time::Instant::now(),
            #[cfg(feature = "net")]
            tls,
            target: target.clone(),
        })
    }

    /// The socket, to register with mio (readable and writable).
    pub fn socket(&mut self) -> &mut TcpStream {
        &mut self.socket
    }

    /// Where it goes.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Reads what has arrived: `Ok(0)` is the end of the stream, `WouldBlock` that nothing
    /// more is there now. TLS failures are `InvalidData` errors that name the failed check.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        #[cfg(feature = "net")]
        if let Some(tls) = &mut self.tls {
            return tls.read(&mut self.socket, buf, &self.target);
        }
        self.socket.read(buf)
    }

    /// Takes `data` to send: all of it with TLS (it is sealed into records that
    /// [`IrcStream::flush`] writes), as much as the socket takes without it.
    pub fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        #[cfg(feature = "net")]
        if let Some(tls) = &mut self.tls {
            // rustls takes what fits its buffer; the rest waits for the records to leave.
            let n = tls.conn.writer().write(data)?;
            self.flush()?;
            if n == 0 && !data.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            return Ok(n);
        }
        self.socket.write(data)
    }

    /// Writes what TLS has ready (records, handshake messages) until the socket would block.
    pub fn flush(&mut self) -> io::Result<()> {
        #[cfg(feature = "net")]
        if let Some(tls) = &mut self.tls {
            while tls.conn.wants_write() {
                match tls.conn.write_tls(&mut self.socket) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// How long the TLS handshake may still take: `None` once done (or without TLS). When it
    /// reaches zero, [`IrcStream::check_handshake`] says the server is not speaking TLS.
    pub fn handshake_remaining(&self) -> Option<Duration> {
        #[cfg(feature = "net")]
        if let Some(tls) = &self.tls
            && tls.conn.is_handshaking()
        {
            return Some(TLS_HANDSHAKE_TIMEOUT.saturating_sub(self.connected_at.elapsed()));
        }
        None
    }

    /// An error once the TLS handshake has taken longer than [`TLS_HANDSHAKE_TIMEOUT`].
    pub fn check_handshake(&self) -> io::Result<()> {
        match self.handshake_remaining() {
            Some(left) if left.is_zero() => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "TLS with {} failed: no answer to the TLS handshake within {} s (a \
                     plain-text port? use irc:// for it)",
                    self.target,
                    TLS_HANDSHAKE_TIMEOUT.as_secs()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Whether TLS has bytes for the socket ([`IrcStream::flush`] when it is writable).
    pub fn wants_write(&self) -> bool {
        #[cfg(feature = "net")]
        if let Some(tls) = &self.tls {
            return tls.conn.wants_write();
        }
        false
    }
}

#[cfg(feature = "net")]
mod tls {
    use std::io::{self, Read};
    use std::sync::Arc;

    use mio::net::TcpStream;
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::{ClientConnection, DigitallySignedStruct, SignatureScheme};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

    use super::{Target, TlsOptions, TransportError};

    pub(super) struct Tls {
        pub(super) conn: ClientConnection,
    }

    fn setup(e: impl std::fmt::Display) -> TransportError {
        TransportError::TlsSetup(e.to_string())
    }

    fn certs(
        flag: &str,
        path: &std::path::Path,
    ) -> Result<Vec<CertificateDer<'static>>, TransportError> {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|i| i.collect::<Result<Vec<_>, _>>())
            .map_err(|e| setup(format!("{flag} {}: {e}", path.display())))?;
        if certs.is_empty() {
            return Err(setup(format!(
                "{flag} {}: no PEM certificate in it",
                path.display()
            )));
        }
        Ok(certs)
    }

    impl Tls {
        pub(super) fn new(target: &Target, o: &TlsOptions) -> Result<Tls, TransportError> {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
                .with_safe_default_protocol_versions()
                .map_err(setup)?;
            let builder = if o.insecure_skip_verify {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(NoVerifier(provider)))
            } else {
                let mut roots = rustls::RootCertStore::empty();
                match &o.ca_file {
                    Some(ca) => {
                        for cert in certs("--irc-ca", ca)? {
                            roots
                                .add(cert)
                                .map_err(|e| setup(format!("--irc-ca {}: {e}", ca.display())))?;
                        }
                    }
                    None => {
                        for cert in rustls_native_certs::load_native_certs().certs {
                            // A system root rustls cannot use is skipped, as browsers do.
                            let _ = roots.add(cert);
                        }
                    }
                }
                builder.with_root_certificates(roots)
            };
            let config = match (&o.client_cert, &o.client_key) {
                (Some(cert), Some(key)) => {
                    let chain = certs("--irc-client-cert", cert)?;
                    let key = PrivateKeyDer::from_pem_file(key)
                        .map_err(|e| setup(format!("--irc-client-key {}: {e}", key.display())))?;
                    builder
                        .with_client_auth_cert(chain, key)
                        .map_err(|e| setup(format!("--irc-client-cert: {e}")))?
                }
                (None, None) => builder.with_no_client_auth(),
                _ => {
                    return Err(setup("--irc-client-cert and --irc-client-key go together"));
                }
            };
            let name = ServerName::try_from(target.host.clone())
                .map_err(|e| setup(format!("{}: not a host name: {e}", target.host)))?;
            let conn = ClientConnection::new(Arc::new(config), name).map_err(setup)?;
            Ok(Tls { conn })
        }

        pub(super) fn read(
            &mut self,
            socket: &mut TcpStream,
            buf: &mut [u8],
            target: &Target,
        ) -> io::Result<usize> {
            loop {
                // Plaintext already decrypted first.
                match self.conn.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!("{target}: the server ended TLS without saying so"),
                        ));
                    }
                    Err(e) => return Err(e),
                }
                match self.conn.read_tls(socket) {
                    Ok(0) => return Ok(0),
                    Ok(_) => {}
                    Err(e) => return Err(e),
                }
                if let Err(e) = self.conn.process_new_packets() {
                    // Tell the server why (an alert), then say it here.
                    let _ = self.conn.write_tls(socket);
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        explain(target, &e),
                    ));
                }
            }
        }
    }

    /// A TLS failure in words a user can act on.
    fn explain(target: &Target, e: &rustls::Error) -> String {
        let options = crate::tls_advice::Options {
            ca: "--irc-ca FILE",
            client_cert: Some("--irc-client-cert FILE with --irc-client-key FILE"),
            plain: "use irc:// for it",
        };
        let check = crate::tls_advice::explain(e, &target.host, &options);
        format!("TLS with {target} failed: {check}")
    }

    /// `--irc-insecure-skip-verify`: every certificate passes (signatures still checked).
    #[derive(Debug)]
    struct NoVerifier(Arc<rustls::crypto::CryptoProvider>);

    impl ServerCertVerifier for NoVerifier {
        fn verify_server_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _server_name: &ServerName<'_>,
            _ocsp: &[u8],
            _now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = |s: &str| Target::parse(s).map(|t| (t.host, t.port, t.tls));
        assert_eq!(
            t("ircs://irc.example.net:6697").unwrap(),
            ("irc.example.net".into(), 6697, true)
        );
        assert_eq!(
            t("ircs://irc.example.net").unwrap(),
            ("irc.example.net".into(), 6697, true)
        );
        assert_eq!(
            t("irc://irc.example.net").unwrap(),
            ("irc.example.net".into(), 6667, false)
        );
        assert_eq!(
            t("127.0.0.1:6667").unwrap(),
            ("127.0.0.1".into(), 6667, false)
        );
        assert_eq!(t("ircs://[::1]:7000").unwrap(), ("::1".into(), 7000, true));
        assert_eq!(t("ircs://host:7000/").unwrap(), ("host".into(), 7000, true));
        for bad in [
            "",
            "host",
            "https://x:1",
            "ircs://:6697",
            "ircs://h:x",
            "ircs://h:0",
            "a b:1",
        ] {
            let e = Target::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains("expected the IRC server as ircs://"),
                "{bad}: {e}"
            );
        }
        assert_eq!(
            Target::parse("ircs://irc.example.net").unwrap().to_string(),
            "ircs://irc.example.net:6697"
        );
    }
}

/// The link's command-line flags, the same for `rexd --irc` and the desk demo
/// (`#[command(flatten)]`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LinkArgs {
    /// Trust this CA (PEM) for an ircs:// server instead of the platform's roots.
    #[arg(long, value_name = "FILE")]
    pub irc_ca: Option<PathBuf>,
    /// Show this client certificate (PEM) to an ircs:// server: what --sasl-external logs in
    /// with (the server maps its fingerprint to an account).
    #[arg(long, value_name = "FILE", requires = "irc_client_key")]
    pub irc_client_cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, value_name = "FILE", requires = "irc_client_cert")]
    pub irc_client_key: Option<PathBuf>,
    /// DANGEROUS: do not verify an ircs:// server's certificate (anyone on the path can pose
    /// as the server). For a test server only; logged at start.
    #[arg(long)]
    pub irc_insecure_skip_verify: bool,
    /// The IRC server's password (PASS), read from FILE (mode 600).
    #[arg(long, value_name = "FILE")]
    pub irc_password_file: Option<PathBuf>,
    /// Log in with SASL PLAIN as this account (with --sasl-password-file).
    #[arg(
        long,
        value_name = "ACCOUNT",
        requires = "sasl_password_file",
        conflicts_with = "sasl_external"
    )]
    pub sasl_user: Option<String>,
    /// The SASL PLAIN password, read from FILE (mode 600).
    #[arg(long, value_name = "FILE", requires = "sasl_user")]
    pub sasl_password_file: Option<PathBuf>,
    /// Log in with SASL EXTERNAL: the client certificate (--irc-client-cert) is the identity.
    #[arg(long, requires = "irc_client_cert")]
    pub sasl_external: bool,
    /// Go on unauthenticated when the SASL login fails (logged); by default a failed login
    /// ends the connection.
    #[arg(long)]
    pub sasl_optional: bool,
    /// Send a keepalive PING after this much silence from the server (ms).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub irc_ping_interval_ms: u64,
    /// Drop the link (and reconnect) when nothing answers the keepalive PING within this long
    /// (ms): a server that stopped answering is noticed within the two together.
    #[arg(long, value_name = "MS", default_value_t = 120_000)]
    pub irc_ping_timeout_ms: u64,
}

/// What [`LinkArgs`] say, read and checked: TLS settings, the server password, SASL.
#[derive(Debug, Clone, Default)]
pub struct LinkSettings {
    /// TLS.
    pub tls: TlsOptions,
    /// `PASS`.
    pub server_password: Option<String>,
    /// SASL.
    pub sasl: Option<deskwire::irc::SaslConfig>,
    /// The keepalive: how a dead link is noticed.
    pub keepalive: Keepalive,
}

/// The session's keepalive `PING`: sent after `interval_ms` of silence, the link given up
/// `timeout_ms` after it without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Silence before the `PING`.
    pub interval_ms: u64,
    /// The wait for its answer.
    pub timeout_ms: u64,
}

impl Default for Keepalive {
    /// The session's defaults: 60 s and 120 s.
    fn default() -> Self {
        let session = deskwire::irc::SessionConfig::new("x", &[]);
        Keepalive {
            interval_ms: session.ping_interval_ms,
            timeout_ms: session.ping_timeout_ms,
        }
    }
}

impl Keepalive {
    /// Puts it into a session configuration.
    pub fn apply(&self, session: &mut deskwire::irc::SessionConfig) {
        session.ping_interval_ms = self.interval_ms;
        session.ping_timeout_ms = self.timeout_ms;
    }
}

impl LinkArgs {
    /// Reads the password files and puts the settings together.
    pub fn settings(&self) -> Result<LinkSettings, String> {
        let server_password = match &self.irc_password_file {
            Some(path) => Some(read_password_file("--irc-password-file", path)?),
            None => None,
        };
        let mut sasl = match (
            &self.sasl_user,
            &self.sasl_password_file,
            self.sasl_external,
        ) {
            (Some(user), Some(path), false) => Some(deskwire::irc::SaslConfig::plain(
                user,
                &read_password_file("--sasl-password-file", path)?,
            )),
            (None, None, true) => Some(deskwire::irc::SaslConfig::external()),
            _ => None,
        };
        if let Some(sasl) = &mut sasl {
            sasl.required = !self.sasl_optional;
        }
        if self.irc_ping_interval_ms == 0 || self.irc_ping_timeout_ms == 0 {
            return Err("--irc-ping-interval-ms and --irc-ping-timeout-ms must be above 0".into());
        }
        Ok(LinkSettings {
            keepalive: Keepalive {
                interval_ms: self.irc_ping_interval_ms,
                timeout_ms: self.irc_ping_timeout_ms,
            },

            tls: TlsOptions {
                ca_file: self.irc_ca.clone(),
                client_cert: self.irc_client_cert.clone(),
                client_key: self.irc_client_key.clone(),
                insecure_skip_verify: self.irc_insecure_skip_verify,
            },
            server_password,
            sasl,
        })
    }
}

/// What a [`LinkThread`] hands its host.
#[derive(Debug)]
pub enum Delivery {
    /// Bytes that arrived.
    Bytes(Vec<u8>),
    /// The link ended, with why.
    Closed(String),
}

/// An [`IrcStream`] run on a thread of its own, for a host whose loop is not a mio loop (the
/// desk demo): what arrives goes to the host's `deliver`, what the host sends is written as
/// soon as the socket takes it. The thread ends with the link, or when the handle is dropped.
#[derive(Debug)]
pub struct LinkThread {
    tx: std::sync::mpsc::Sender<Vec<u8>>,
    waker: std::sync::Arc<mio::Waker>,
    /// Why the link ended, once it has: what a later `send` says (the `Closed` delivery may
    /// still be on its way to the host).
    ended: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl LinkThread {
    /// Starts the thread.
    pub fn spawn(
        mut stream: IrcStream,
        mut deliver: impl FnMut(Delivery) + Send + 'static,
    ) -> io::Result<LinkThread> {
        const SOCKET: mio::Token = mio::Token(0);
        const WAKE: mio::Token = mio::Token(1);
        let mut poll = mio::Poll::new()?;
        poll.registry().register(
            stream.socket(),
            SOCKET,
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        )?;
        let waker = std::sync::Arc::new(mio::Waker::new(poll.registry(), WAKE)?);
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let ended_slot = std::sync::Arc::new(std::sync::Mutex::new(None));
        let ended_here = ended_slot.clone();
        std::thread::spawn(move || {
            let mut events = mio::Events::with_capacity(16);
            let mut out: Vec<u8> = Vec::new();
            let mut buf = [0u8; 16 * 1024];
            let ended = loop {
                loop {
                    match rx.try_recv() {
                        Ok(bytes) => out.extend_from_slice(&bytes),
                        Err(std::sync::mpsc::TryRecvError::Empty) => break,
                        // The host is gone: so is the link.
                        Err(std::sync::mpsc::TryRecvError::Disconnected) => return,
                    }
                }
                if let Err(e) = stream.flush().and_then(|()| {
                    while !out.is_empty() {
                        match stream.write(&out) {
                            Ok(n) => drop(out.drain(..n)),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(e),
                        }
                    }
                    stream.check_handshake()
                }) {
                    break e.to_string();
                }
                let timeout = stream
                    .handshake_remaining()
                    .map(|t| t + Duration::from_millis(1));
                if let Err(e) = poll.poll(&mut events, timeout)
                    && e.kind() != io::ErrorKind::Interrupted
                {
                    break e.to_string();
                }
                let mut closed = None;
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) => {
                            closed = Some("the server closed the connection".to_owned());
                            break;
                        }
                        Ok(n) => deliver(Delivery::Bytes(buf[..n].to_vec())),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            closed = Some(e.to_string());
                            break;
                        }
                    }
                }
                if let Some(why) = closed {
                    break why;
                }
            };
            if let Ok(mut slot) = ended_here.lock() {
                *slot = Some(ended.clone());
            }
            deliver(Delivery::Closed(ended));
        });
        Ok(LinkThread {
            tx,
            waker,
            ended: ended_slot,
        })
    }

    /// Sends `bytes` (whole IRC lines). After the link ended, the error says why (a failed TLS
    /// handshake, the server's close).
    pub fn send(&self, bytes: Vec<u8>) -> Result<(), String> {
        self.tx.send(bytes).map_err(|_| {
            match self.ended.lock().ok().and_then(|slot| slot.clone()) {
                Some(why) => format!("the link has ended: {why}"),
                None => "the link has ended".to_owned(),
            }
        })?;
        self.waker.wake().map_err(|e| e.to_string())
    }
}
