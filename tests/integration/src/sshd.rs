//! A private OpenSSH `sshd` on a free loopback port, for tests that need a real `ssh host cmd`.
//!
//! Everything lives in a temp dir: a generated ed25519 host key, a generated client key, an
//! `authorized_keys` with the client's public key, an `sshd_config`, a `known_hosts` for the
//! client and sshd's own log. The daemon runs in the foreground (`sshd -D -e`) and is stopped and
//! reaped on drop (this container's PID 1 reaps slowly, so every child is `wait()`ed).
//!
//! ```no_run
//! use deskwire_integration::sshd::Sshd;
//!
//! if let Some(why) = Sshd::missing_tools() {
//!     eprintln!("skipped: {why}");
//!     return;
//! }
//! let sshd = Sshd::start();
//! let out = sshd.command(["echo", "hello"]).output().unwrap();
//! assert_eq!(out.stdout, b"hello\n");
//! ```

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{TempDir, free_port, stop_daemon};

const SSHD_CANDIDATES: [&str; 3] = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"];

/// `sshd`'s absolute path (sshd refuses to re-exec itself from a relative one).
pub fn sshd_binary() -> Option<PathBuf> {
    SSHD_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Whether `program` runs at all (found on PATH and executable).
fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// The user tests log in as: the one running the tests (sshd can only switch to another user
/// when it runs as root, and an unprivileged sshd on a high port logs in as its own user).
pub fn current_user() -> String {
    Command::new("id")
        .arg("-un")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "root".to_owned())
}

/// A running private sshd. See the module docs.
#[derive(Debug)]
pub struct Sshd {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// The user to log in as.
    pub user: String,
    client_key: PathBuf,
    known_hosts: PathBuf,
    log: PathBuf,
    dir: TempDir,
}

impl Sshd {
    /// Why an sshd test cannot run here (`sshd`, `ssh` or `ssh-keygen` missing), or `None`.
    /// `tests/run.sh` installs `openssh-server` and `openssh-client`, so CI always has them.
    pub fn missing_tools() -> Option<String> {
        let mut missing = Vec::new();
        if sshd_binary().is_none() {
            missing.push("sshd (apt package openssh-server)");
        }
        if !runs("ssh", "-V") {
            missing.push("ssh (apt package openssh-client)");
        }
        if !runs("ssh-keygen", "-?") {
            missing.push("ssh-keygen (apt package openssh-client)");
        }
        (!missing.is_empty()).then(|| format!("not installed: {}", missing.join(", ")))
    }

    /// Generates keys and a config, starts sshd and waits until it accepts connections.
    ///
    /// Panics with a clear message when the tools are missing (check [`Sshd::missing_tools`]
    /// first) or sshd does not come up (its log is in the message).
    pub fn start() -> Self {
        Self::start_with_config("")
    }

    /// [`Sshd::start`] with extra `sshd_config` lines, for example
    /// `SetEnv PATH=/opt/bin:/usr/bin:/bin` to put a program on the remote PATH of every login.
    pub fn start_with_config(extra: &str) -> Self {
        if let Some(why) = Self::missing_tools() {
            panic!("{why}: run tests/run.sh, which installs them with apt");
        }
        let binary = sshd_binary().expect("checked above");
        // The privilege separation directory; the package normally creates it at boot.
        let _ = std::fs::create_dir_all("/run/sshd");

        let dir = TempDir::new("deskwire-sshd").expect("temp dir");
        let host_key = dir.path().join("host_ed25519");
        let client_key = dir.path().join("client_ed25519");
        keygen(&host_key);
        keygen(&client_key);
        let authorized = dir.path().join("authorized_keys");
        std::fs::copy(client_key.with_extension("pub"), &authorized).expect("authorized_keys");

        let port = free_port();
        let conf = dir.path().join("sshd_config");
        let pid_file = dir.path().join("sshd.pid");
        std::fs::write(
            &conf,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nPidFile {}\n\
                 AuthorizedKeysFile {}\nPermitRootLogin prohibit-password\n\
                 PubkeyAuthentication yes\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nUseDNS no\n\
                 LogLevel ERROR\n{extra}\n",
                host_key.display(),
                pid_file.display(),
                authorized.display()
            ),
        )
        .expect("write sshd_config");

        let check = Command::new(&binary)
            .arg("-t")
            .arg("-f")
            .arg(&conf)
            .output()
            .expect("run sshd -t");
        assert!(
            check.status.success(),
            "sshd -t refused the generated config: {}",
            String::from_utf8_lossy(&check.stderr)
        );

        let log = dir.path().join("sshd.log");
        let log_file = std::fs::File::create(&log).expect("sshd log");
        let child = Command::new(&binary)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start sshd");
        let mut server = Sshd {
            child,
            port,
            user: current_user(),
            known_hosts: dir.path().join("known_hosts"),
            client_key,
            log,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("sshd exited ({status}): {}", server.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "sshd did not start listening: {}",
                server.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// The client's private key (`ssh -i`).
    pub fn client_key(&self) -> &Path {
        &self.client_key
    }

    /// The client's known_hosts file (in the temp dir, so the user's own is never touched).
    pub fn known_hosts(&self) -> &Path {
        &self.known_hosts
    }

    /// The temp dir everything lives in (tests may put their own files there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `user@127.0.0.1`.
    pub fn destination(&self) -> String {
        format!("{}@127.0.0.1", self.user)
    }

    /// `ssh://user@127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("ssh://{}@127.0.0.1:{}", self.user, self.port)
    }

    /// The `ssh` options that make a non-interactive login here work: key, private
    /// known_hosts, no host key prompt, no password prompt, no user config.
    pub fn ssh_options(&self) -> Vec<String> {
        vec![
            "-F".into(),
            "none".into(),
            "-i".into(),
            self.client_key.display().to_string(),
            "-o".into(),
            "IdentitiesOnly=yes".into(),
            "-o".into(),
            format!("UserKnownHostsFile={}", self.known_hosts.display()),
            "-o".into(),
            "StrictHostKeyChecking=no".into(),
            "-o".into(),
            "BatchMode=yes".into(),
            "-o".into(),
            "LogLevel=ERROR".into(),
        ]
    }

    /// `ssh -p PORT <options> user@127.0.0.1 <remote…>`, ready to run.
    pub fn command<I, S>(&self, remote: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new("ssh");
        cmd.arg("-p")
            .arg(self.port.to_string())
            .args(self.ssh_options())
            .arg(self.destination())
            .args(remote);
        cmd
    }

    /// What sshd logged so far (errors only), for failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "deskwire-test", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .expect("run ssh-keygen");
    assert!(
        out.status.success(),
        "ssh-keygen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // SIGTERM stops the listener; sessions still open end with their clients.
        stop_daemon(&mut self.child);
    }
}
