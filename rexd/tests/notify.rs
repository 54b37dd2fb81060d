//! systemd's readiness protocol (`rexd/src/notify.rs`): the real `rexd --listen` and
//! `rexd --irc` started with `$NOTIFY_SOCKET` naming a datagram socket the test binds, as
//! systemd does for the `Type=notify` units (`rexd/debian/*.service`). `READY=1` comes once
//! rexd serves, `STOPPING=1` on `SIGTERM`, and the commands rexd runs do not see the variable.

mod netkit;

use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deskwire_integration::Ngircd;
use netkit::*;

/// The socket systemd would listen on, bound in the test's directory.
struct NotifySocket {
    socket: UnixDatagram,
    path: std::path::PathBuf,
}

impl NotifySocket {
    fn bind(dir: &Path) -> NotifySocket {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        NotifySocket { socket, path }
    }

    /// The next datagram, within 15 s.
    fn next(&self) -> String {
        self.socket
            .set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = self
            .socket
            .recv(&mut buf)
            .expect("no notification from rexd within 15 s");
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    /// Datagrams until one has the line `want`; all of them, that one last.
    fn until(&self, want: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let d = self.next();
            let done = d.lines().any(|l| l == want);
            seen.push(d);
            if done {
                return seen;
            }
        }
    }

    /// Nothing more arrives within `wait`.
    fn quiet_for(&self, wait: Duration) -> Option<String> {
        self.socket.set_read_timeout(Some(wait)).unwrap();
        let mut buf = [0u8; 4096];
        self.socket
            .recv(&mut buf)
            .ok()
            .map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    }
}

/// Whether `fd` has something to read right now.
fn readable_now(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

fn sigterm(child: &Child) {
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rexd did not exit within 15 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn listen_says_ready_after_its_address_and_stopping_on_sigterm() {
    let place = Place::new("notify-listen");
    let notify = NotifySocket::bind(place.path());
    let mut child = Command::new(REXD)
        .arg("--config")
        .arg(&place.config)
        .args(["--listen", "127.0.0.1:0", "--token-file"])
        .arg(&place.tokens)
        .env("NOTIFY_SOCKET", &notify.path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stdout_fd = stdout.as_raw_fd();

    // READY=1 first; by then the address is on stdout already (printed, then notified).
    let ready = notify.next();
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    assert!(
        readable_now(stdout_fd),
        "READY=1 came before the listening line"
    );
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("rexd: listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    // systemctl status shows where it listens.
    assert!(
        ready
            .lines()
            .any(|l| l == format!("STATUS=listening on {url}")),
        "{ready:?}"
    );

    // It serves; its commands do not inherit NOTIFY_SOCKET (rexd keeps it to itself).
    let r = post(
        &url,
        Some(TOKEN),
        r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"notify"}}"#,
    );
    let sid = r.json()["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let batch = serde_json::json!([
        {"jsonrpc": "2.0", "id": 2, "method": "exec.start",
         "params": {"session_id": sid, "argv": ["sh", "-c", "test -z \"${NOTIFY_SOCKET+set}\""]}},
        {"jsonrpc": "2.0", "id": 3, "method": "exec.wait",
         "params": {"session_id": sid, "process_id": "p_1", "timeout_ms": 10000}},
    ]);
    let answers = post(&url, Some(TOKEN), &batch.to_string()).json();
    let wait = answers
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == 3)
        .unwrap();
    assert_eq!(wait["result"]["status"], "exited", "{answers}");
    assert_eq!(
        wait["result"]["exit_code"], 0,
        "NOTIFY_SOCKET is set: {answers}"
    );
    assert_eq!(notify.quiet_for(Duration::from_millis(200)), None);

    sigterm(&child);
    let stopping = notify.until("STOPPING=1");
    assert_eq!(stopping.len(), 1, "{stopping:?}");
    assert!(wait_exit(&mut child).success());
}

#[test]
fn listen_without_notify_socket_sends_nothing_and_serves() {
    // The socket exists, but rexd is not told of it: nothing arrives.
    let place = Place::new("notify-none");
    let notify = NotifySocket::bind(place.path());
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    assert_eq!(curl(&[&format!("{}/healthz", d.url)]).status, 200);
    assert_eq!(notify.quiet_for(Duration::from_millis(300)), None);
    assert!(d.stop().success());
}

#[test]
fn irc_says_ready_once_joined_and_stopping_on_sigterm() {
    let server = Ngircd::start();
    let place = Place::new("notify-irc");
    let notify = NotifySocket::bind(place.path());
    let log = place.path().join("rexd.log");
    let mut child = Command::new(REXD)
        .args(["--irc", &format!("127.0.0.1:{}", server.port)])
        .args([
            "--channel",
            "#desk",
            "--nick",
            "deskbot",
            "--allow-from",
            "desk",
        ])
        .args(["--unauthenticated", "--log-level", "info", "--root"])
        .arg(&place.work)
        .env("NOTIFY_SOCKET", &notify.path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let ready = notify.next();
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    assert!(
        ready
            .lines()
            .any(|l| l.starts_with("STATUS=joined #desk as deskbot on ")),
        "{ready:?}"
    );
    // Ready means in the channel: the log said so first.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("joined #desk as deskbot"), "{logged}");

    sigterm(&child);
    notify.until("STOPPING=1");
    assert!(wait_exit(&mut child).success());
}
