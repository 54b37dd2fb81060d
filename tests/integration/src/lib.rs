//! Helpers shared by the real-peer integration tests: a private ngircd on a free loopback port,
//! an IRC connection pumped by deskwire's session helper on a non-blocking socket, a private
//! OpenSSH sshd ([`sshd::Sshd`]) and a linked network of ngircd servers ([`NgircdNetwork`]).

mod network;
pub mod sshd;

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use network::NgircdNetwork;
pub use sshd::Sshd;

use deskwire::irc::{
    DecodedLine, LineDecoder, Session, SessionConfig, SessionEvent, SessionOutput,
};

/// A monotonic millisecond clock, as hosts give the engines.
#[derive(Debug, Clone, Copy)]
pub struct Clock(Instant);

impl Clock {
    /// A clock starting at 0 now.
    pub fn start() -> Self {
        Clock(Instant::now())
    }

    /// Milliseconds since the start.
    pub fn now(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::start()
    }
}

/// A temporary directory removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates a fresh directory under the system temp dir.
    pub fn new(prefix: &str) -> std::io::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free TCP port on 127.0.0.1 (bound and released; good enough for a test server).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// `n` bytes of xorshift64 noise from `seed`: not UTF-8, not compressible, the same every run.
pub fn random_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed;
    (0..n.div_ceil(8))
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .take(n)
        .collect()
}

/// A port on 127.0.0.1 where nothing listens, for as long as this value lives: bound without
/// `listen`, so a connection is refused, and held, so that no server of a test running
/// alongside can take it (a released [`free_port`] can be, and then it answers).
#[derive(Debug)]
pub struct ClosedPort {
    _socket: socket2::Socket,
    /// The port.
    pub port: u16,
}

impl ClosedPort {
    /// Binds an ephemeral port and keeps it.
    pub fn hold() -> Self {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a TCP socket");
        let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("an address");
        socket.bind(&any.into()).expect("bind an ephemeral port");
        let port = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .map(|a| a.port())
            .expect("the bound port");
        ClosedPort {
            _socket: socket,
            port,
        }
    }
}

pub(crate) fn ngircd_binary() -> Option<PathBuf> {
    [
        "/usr/sbin/ngircd",
        "/usr/bin/ngircd",
        "/usr/local/sbin/ngircd",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// A private ngircd in the foreground on a free loopback port, stopped on drop.
#[derive(Debug)]
pub struct Ngircd {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    conf: PathBuf,
    _dir: TempDir,
}

impl Ngircd {
    /// Starts ngircd with its default flood protection (see `tests/pacing/measure_ngircd.py`).
    pub fn start() -> Self {
        Self::start_with_limits("")
    }

    /// Starts ngircd with penalties off (`MaxPenaltyTime = 0`), for tests that move a lot of
    /// data and are not about pacing.
    pub fn start_without_penalties() -> Self {
        Self::start_with_limits("MaxPenaltyTime = 0\n")
    }

    /// Starts ngircd with a generated config (extra `[Limits]` lines appended) and waits until it
    /// accepts connections. Panics with a clear message when ngircd is not installed
    /// (`tests/run.sh` installs it).
    /// Starts ngircd with extra configuration sections after the generated ones, e.g.
    /// `[Channel]\nName = #locked\nModes = i\n` for a channel nobody may join uninvited.
    pub fn start_with_sections(extra_sections: &str) -> Self {
        Self::start_with_config("", extra_sections)
    }

    /// Starts ngircd with extra `[Limits]` lines, e.g. `MaxJoins = 60\n` (ngircd lets a
    /// connection into 10 channels by default).
    pub fn start_with_limits(extra_limits: &str) -> Self {
        Self::start_with_config(extra_limits, "")
    }

    fn start_with_config(extra_limits: &str, extra_sections: &str) -> Self {
        let binary = ngircd_binary()
            .expect("ngircd is not installed: run tests/run.sh, which installs it with apt");
        let dir = TempDir::new("deskwire-ngircd").expect("temp dir");
        let include = dir.path().join("conf.d");
        std::fs::create_dir_all(&include).expect("conf.d");
        let port = free_port();
        let conf = dir.path().join("ngircd.conf");
        std::fs::write(
            &conf,
            format!(
                "[Global]\nName = irc.deskwire.test\nInfo = deskwire test server\n\
                 AdminInfo1 = deskwire\nAdminInfo2 = tests\nAdminEMail = tests@deskwire.invalid\n\
                 Listen = 127.0.0.1\nPorts = {port}\n\
                 [Limits]\nMaxConnectionsIP = 0\nPingTimeout = 120\nPongTimeout = 60\n{extra_limits}\
                 [Options]\nPAM = no\nIdent = no\nDNS = no\nIncludeDir = {}\n{extra_sections}",
                include.display()
            ),
        )
        .expect("write ngircd.conf");
        Ngircd {
            child: Self::spawn(&binary, &conf, port),
            port,
            conf,
            _dir: dir,
        }
    }

    /// Runs ngircd on `conf` and waits until it accepts connections on `port`.
    pub(crate) fn spawn(binary: &Path, conf: &Path, port: u16) -> Child {
        let child = Command::new(binary)
            .arg("-n")
            .arg("-f")
            .arg(conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ngircd");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "ngircd did not start listening");
            std::thread::sleep(Duration::from_millis(20));
        }
        child
    }

    /// Stops the server (every client loses its connection) and starts it again on the same
    /// port with the same configuration.
    pub fn restart(&mut self) {
        stop_daemon(&mut self.child);
        let binary = ngircd_binary().expect("ngircd is installed");
        self.child = Self::spawn(&binary, &self.conf, self.port);
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops the server in its tracks (`SIGSTOP`): its sockets stay open and nothing answers,
    /// as with a dropped route. [`Ngircd::resume`] lets it go on.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused server go on (`SIGCONT`).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} ngircd");
    }
}

/// An ngircd with a TLS port beside its plain one, and the certificates made for this run: a
/// CA of its own, and a server certificate it signed for `localhost` only (so connecting by
/// `127.0.0.1` is a name mismatch).
#[derive(Debug)]
pub struct TlsNgircd {
    /// The server (its plain port is `server.port`).
    pub server: Ngircd,
    /// The TLS port.
    pub tls_port: u16,
    /// The CA that signed the server's certificate (PEM).
    pub ca: PathBuf,
    _certs: TempDir,
}

/// Runs `openssl` with `args` in `dir`, panicking with its words when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is installed (tests/run.sh installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`ca.pem`), a server certificate it signed for `localhost` only (`server.pem`,
/// `server.key`) and DH parameters (`dh.pem`, for ngircd), in `d`, readable by the daemons.
fn make_certs(d: &Path) {
    openssl(
        d,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=deskwire test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
    );
    openssl(
        d,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(d.join("san.ext"), "subjectAltName=DNS:localhost\n").expect("san.ext");
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            "server.pem",
            "-extfile",
            "san.ext",
        ],
    );
    openssl(
        d,
        &[
            "genpkey",
            "-genparam",
            "-algorithm",
            "DH",
            "-pkeyopt",
            "dh_param:ffdhe2048",
            "-out",
            "dh.pem",
        ],
    );
    // A daemon started as root may drop to nobody after reading its files.
    for f in ["server.pem", "server.key", "dh.pem", "ca.pem"] {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(d.join(f), std::fs::Permissions::from_mode(0o644));
    }
}

impl TlsNgircd {
    /// Makes the certificates and starts ngircd with `[SSL]` on a second free port.
    pub fn start() -> Self {
        let certs = TempDir::new("deskwire-tls").expect("temp dir");
        let d = certs.path();
        make_certs(d);
        let tls_port = free_port();
        let server = Ngircd::start_with_sections(&format!(
            "[SSL]\nCertFile = {}\nKeyFile = {}\nDHFile = {}\nPorts = {tls_port}\n",
            d.join("server.pem").display(),
            d.join("server.key").display(),
            d.join("dh.pem").display()
        ));
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", tls_port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "ngircd did not open its TLS port"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        TlsNgircd {
            ca: d.join("ca.pem"),
            server,
            tls_port,
            _certs: certs,
        }
    }
}

/// InspIRCd 3 with Atheme services linked to it, on loopback: SASL PLAIN and EXTERNAL and the
/// IRCv3 account capabilities, as `tests/run.sh` installs them (Debian's `inspircd` and
/// `atheme-services`). Atheme's database is written before it starts, with one account:
/// [`ServicesIrc::ACCOUNT`] / [`ServicesIrc::PASSWORD`], whose certificate fingerprint is that
/// of `client.pem` (for EXTERNAL).
#[derive(Debug)]
pub struct ServicesIrc {
    inspircd: Child,
    atheme: Child,
    /// The plain-text client port.
    pub port: u16,
    /// The TLS client port (its certificate names `localhost`, signed by [`ServicesIrc::ca`]).
    pub tls_port: u16,
    /// The CA (PEM).
    pub ca: PathBuf,
    /// A client certificate registered to the account (PEM), and its key.
    pub client_cert: PathBuf,
    /// The client certificate's key (PEM).
    pub client_key: PathBuf,
    dir: TempDir,
}

impl ServicesIrc {
    /// The account Atheme knows.
    pub const ACCOUNT: &'static str = "bob";
    /// Its password.
    pub const PASSWORD: &'static str = "hunter22";

    /// Starts InspIRCd, then Atheme, and waits until `CAP LS` offers `sasl` (Atheme linked).
    pub fn start() -> Self {
        Self::start_with(true)
    }

    /// The same server without `account-tag` (messages carry no account): who is logged in
    /// is known only from `extended-join`, `account-notify` and WHOX, as on older networks.
    pub fn start_without_account_tag() -> Self {
        Self::start_with(false)
    }

    fn start_with(account_tag: bool) -> Self {
        let account_tag = match account_tag {
            true => r#"<module name="ircv3_accounttag">"#,
            false => "",
        };
        let dir = TempDir::new("deskwire-services").expect("temp dir");
        let d = dir.path().to_owned();
        make_certs(&d);
        openssl(
            &d,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=bob",
                "-keyout",
                "client.key",
                "-out",
                "client.pem",
            ],
        );
        let der = Command::new("openssl")
            .args(["x509", "-in", "client.pem", "-outform", "DER"])
            .current_dir(&d)
            .output()
            .expect("openssl")
            .stdout;
        let fingerprint = sha256_hex(&der);
        let (port, tls_port, link) = (free_port(), free_port(), free_port());
        let p = d.display();
        std::fs::write(
            d.join("inspircd.conf"),
            format!(
                r#"<server name="irc.test" description="InspIRCd test" network="TestNet" id="0AA">
<admin name="admin" nick="admin" email="admin@irc.test">
<pid file="{p}/inspircd.pid">
<log method="file" type="* -USERINPUT -USEROUTPUT" level="default" target="{p}/inspircd.log">
<dns server="127.0.0.1" timeout="1">
<bind address="127.0.0.1" port="{port}" type="clients">
<bind address="127.0.0.1" port="{tls_port}" type="clients" sslprofile="Clients">
<bind address="127.0.0.1" port="{link}" type="servers">
<connect name="main" allow="*" resolvehostnames="no" localmax="1000" globalmax="1000">
<module name="ssl_gnutls">
<sslprofile name="Clients" provider="gnutls" certfile="{p}/server.pem" keyfile="{p}/server.key" hash="sha256" requestclientcert="yes">
<module name="sslinfo">
<module name="cap">
<module name="ircv3">
<ircv3 accountnotify="yes" awaynotify="yes" extendedjoin="yes">
{account_tag}
<module name="ircv3_ctctags">
<module name="ircv3_capnotify">
<module name="services_account">
<module name="sasl">
<sasl target="services.test" requiressl="no">
<module name="botmode">
<module name="spanningtree">
<link name="services.test" ipaddr="127.0.0.1" port="{link}" allowmask="127.0.0.0/8" sendpass="ircd2svc" recvpass="svc2ircd">
<uline server="services.test" silent="yes">
"#
            ),
        )
        .expect("inspircd.conf");
        std::fs::write(
            d.join("atheme.conf"),
            format!(
                r#"loadmodule "modules/protocol/inspircd"; loadmodule "modules/backend/opensex"; loadmodule "modules/nickserv/main";
loadmodule "modules/nickserv/register"; loadmodule "modules/nickserv/identify"; loadmodule "modules/nickserv/cert"; loadmodule "modules/nickserv/logout";
loadmodule "modules/saslserv/main"; loadmodule "modules/saslserv/plain"; loadmodule "modules/saslserv/external";
serverinfo {{
	name = "services.test"; desc = "Atheme test services"; numeric = "0SV"; recontime = 1;
	netname = "TestNet"; hidehostsuffix = "users.test"; adminname = "admin";
	adminemail = "admin@irc.test"; registeremail = "noreply@irc.test"; auth = none;
	casemapping = rfc1459; maxlogins = 5; maxusers = 5;
	loglevel = {{ error; info; admin; network; }};
}};
uplink "irc.test" {{ host = "127.0.0.1"; port = {link}; send_password = "svc2ircd"; receive_password = "ircd2svc"; }};
nickserv {{ nick = "NickServ"; user = "NickServ"; host = "services.test"; real = "Nickname Services"; }};
saslserv {{ nick = "SaslServ"; user = "SaslServ"; host = "services.test"; real = "SASL Agent"; }};
general {{ commit_interval = 5; }};
"#
            ),
        )
        .expect("atheme.conf");
        // Passwords in plain text (no crypto module loaded), as Atheme reads them back.
        std::fs::write(
            d.join("services.db"),
            format!(
                "DBV 12\nMU AAAAAAAAB {a} {w} {a}@example.com 1700000000 1700000000 + default\n\
                 MN {a} {a} 1700000000 1700000000\nMCFP {a} {fingerprint}\n",
                a = Self::ACCOUNT,
                w = Self::PASSWORD,
            ),
        )
        .expect("services.db");
        // InspIRCd raises its core limit and may crash on its way out (Debian's GnuTLS
        // module): no core files in the test's directory.
        let inspircd = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -c 0; exec /usr/sbin/inspircd --nofork --runasroot --config {p}/inspircd.conf"
            ))
            .current_dir(&d)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("inspircd is installed (tests/run.sh installs it)");
        wait_for_port(port, "inspircd");
        let atheme = Command::new("/usr/bin/atheme-services")
            .args(["-n", "-c"])
            .arg(d.join("atheme.conf"))
            .arg("-D")
            .arg(&d)
            .arg("-l")
            .arg(d.join("atheme.log"))
            .arg("-p")
            .arg(d.join("atheme.pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("atheme-services is installed (tests/run.sh installs it)");
        let server = ServicesIrc {
            inspircd,
            atheme,
            port,
            tls_port,
            ca: d.join("ca.pem"),
            client_cert: d.join("client.pem"),
            client_key: d.join("client.key"),
            dir,
        };
        server.wait_for_sasl();
        server
    }

    /// `127.0.0.1:PORT` (plain text).
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Until a fresh `CAP LS` lists `sasl`: Atheme has linked (at most 15 s).
    fn wait_for_sasl(&self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let _ = s.write_all(b"CAP LS 302\r\n");
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                    if got.windows(4).any(|w| w == b"sasl") {
                        return;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "Atheme never linked to InspIRCd: {}",
                std::fs::read_to_string(self.dir.path().join("atheme.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for ServicesIrc {
    fn drop(&mut self) {
        stop_daemon(&mut self.atheme);
        stop_daemon(&mut self.inspircd);
    }
}

fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not start listening");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SHA-256 of `data` as lowercase hex, from `sha256sum` (what InspIRCd's CertFP is).
fn sha256_hex(data: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(data)
        .expect("write");
    let out = child.wait_with_output().expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

impl Drop for Ngircd {
    fn drop(&mut self) {
        // SIGTERM stops ngircd cleanly.
        stop_daemon(&mut self.child);
    }
}

/// Stops a test daemon: SIGTERM, up to 5 s for it to exit, then SIGKILL; reaped either way so
/// no zombie stays.
pub fn stop_daemon(child: &mut Child) {
    let _ = Command::new("kill")
        .arg(child.id().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A non-blocking TCP connection to the IRC server for a per-connection engine
/// ([`deskwire::oa1::Desk`], [`deskwire::oa1::Remote`]): it moves raw bytes both ways and keeps a
/// copy of every line it received, for the tests to inspect.
#[derive(Debug)]
pub struct Wire {
    socket: TcpStream,
    recorder: LineDecoder,
    /// Every line received, CRLF excluded, with the time it was read.
    pub received: Vec<(u64, Vec<u8>)>,
    /// The longest line received, CRLF included.
    pub longest_line: usize,
    /// Whether the server closed the connection.
    pub closed: bool,
}

impl Wire {
    /// Connects to `addr`.
    pub fn connect(addr: &str) -> Self {
        let socket = TcpStream::connect(addr).expect("connect to the IRC server");
        socket.set_nodelay(true).ok();
        socket.set_nonblocking(true).expect("non-blocking");
        Wire {
            socket,
            // Accept anything a server may send, so an over-long relayed line would be seen.
            recorder: LineDecoder::new(64 * 1024),
            received: Vec::new(),
            longest_line: 0,
            closed: false,
        }
    }

    /// Writes all of `bytes` (blocking until written).
    pub fn write(&mut self, bytes: &[u8]) {
        let mut written = 0;
        while written < bytes.len() {
            match self.socket.write(&bytes[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("write to IRC server: {e}"),
            }
        }
    }

    /// Reads what is there: the raw bytes for the engine (empty when nothing came). Sets
    /// `closed` when the server closed the connection.
    pub fn read(&mut self, now: u64) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            match self.socket.read(&mut buf) {
                Ok(0) => {
                    self.closed = true;
                    break;
                }
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => panic!("read from IRC server: {e}"),
            }
        }
        self.recorder.feed(&bytes);
        while let Some(decoded) = self.recorder.next_line() {
            if let DecodedLine::Line(line) = decoded {
                self.longest_line = self.longest_line.max(line.len() + 2);
                self.received.push((now, line.to_vec()));
            }
        }
        bytes
    }
}

/// One IRC connection: a non-blocking socket, a line decoder and the session helper.
#[derive(Debug)]
pub struct IrcConn {
    socket: TcpStream,
    decoder: LineDecoder,
    /// The session helper (registration, PING, JOIN).
    pub session: Session,
    /// Whether the session joined its channel.
    pub joined: bool,
    /// Every line received, CRLF excluded, in order.
    pub received: Vec<(u64, Vec<u8>)>,
    /// The longest line received, CRLF included.
    pub longest_line: usize,
    /// Session events seen.
    pub events: Vec<SessionEvent>,
}

impl IrcConn {
    /// Connects and starts registering `nick`, joining `channel`.
    pub fn connect(addr: &str, nick: &str, channel: &str, now: u64) -> Self {
        Self::connect_with(addr, SessionConfig::new(nick, &[channel]), now)
    }

    /// Connects and starts a session with `config` (SASL, capabilities).
    pub fn connect_with(addr: &str, config: SessionConfig, now: u64) -> Self {
        let socket = TcpStream::connect(addr).expect("connect to the IRC server");
        socket.set_nodelay(true).ok();
        socket.set_nonblocking(true).expect("non-blocking");
        IrcConn {
            socket,
            // Accept anything a server may send, so an over-long relayed line would be seen.
            decoder: LineDecoder::new(64 * 1024),
            session: Session::new(config, now),
            joined: false,
            received: Vec::new(),
            longest_line: 0,
            events: Vec::new(),
        }
    }

    /// Writes one line plus CRLF (blocking until written).
    pub fn write_line(&mut self, line: &str) {
        let mut bytes = line.as_bytes().to_vec();
        bytes.extend_from_slice(b"\r\n");
        let mut written = 0;
        while written < bytes.len() {
            match self.socket.write(&bytes[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("write to IRC server: {e}"),
            }
        }
    }

    /// Reads what is there; returns the new lines (also recorded in `received`).
    pub fn read_lines(&mut self, now: u64) -> Vec<Vec<u8>> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match self.socket.read(&mut buf) {
                Ok(0) => panic!("the IRC server closed the connection"),
                Ok(n) => self.decoder.feed(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => panic!("read from IRC server: {e}"),
            }
        }
        let mut lines = Vec::new();
        while let Some(decoded) = self.decoder.next_line() {
            match decoded {
                DecodedLine::Line(line) => lines.push(line.to_vec()),
                DecodedLine::TooLong { discarded } => panic!("a {discarded}-byte line arrived"),
                _ => {}
            }
        }
        for line in &lines {
            self.longest_line = self.longest_line.max(line.len() + 2);
            self.session.handle_line(now, line);
            self.received.push((now, line.clone()));
        }
        lines
    }

    /// Runs the session: writes its lines, records its events. Returns its deadline.
    pub fn pump_session(&mut self, now: u64) -> u64 {
        loop {
            match self.session.poll_output(now) {
                SessionOutput::Transmit(line) => self.write_line(&line),
                SessionOutput::Event(event) => {
                    if matches!(event, SessionEvent::Joined { .. }) {
                        self.joined = true;
                    }
                    if let SessionEvent::Disconnected { reason } = &event {
                        panic!("IRC session ended: {reason:?}");
                    }
                    self.events.push(event);
                }
                SessionOutput::Timeout(t) => return t,
            }
        }
    }
}
