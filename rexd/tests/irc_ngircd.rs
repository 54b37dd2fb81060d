//! `rexd --irc` against a real ngircd, with the OA1 desk client (the core `oa1::Client` on an
//! IRC connection driven by the core session helper) on the other side.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deskwire::oa1::{
    AuthConfig, Client, Config, Event, Failure, Output, Pacing, TRUNCATION_MARKER,
};
use deskwire_integration::{Clock, IrcConn, Ngircd};

const CHANNEL: &str = "#desk";

struct Rexd(Child);

impl Drop for Rexd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_rexd(addr: &str, root: &Path, extra: &[&str]) -> Rexd {
    start_rexd_logging(
        addr,
        root,
        &["--allow-from", "desk"],
        extra,
        Stdio::inherit(),
    )
}

/// `rexd --irc` as `deskbot` serving the nick `desk`, unauthenticated, logging at info to
/// `rexd.log` in `root` (whose path comes back).
fn rexd_serving_desk(addr: &str, root: &Path) -> (Rexd, std::path::PathBuf) {
    let log_path = root.join("rexd.log");
    let rexd = start_rexd_logging(
        addr,
        root,
        &["--allow-from", "desk", "--log-level", "info"],
        &[],
        std::fs::File::create(&log_path).unwrap(),
    );
    (rexd, log_path)
}

/// `rexd --irc` as `deskbot`, unauthenticated unless `extra` gives a secret, its log to `log`.
fn start_rexd_logging(
    addr: &str,
    root: &Path,
    allow: &[&str],
    extra: &[&str],
    log: impl Into<Stdio>,
) -> Rexd {
    let secret = extra.contains(&"--secret-file");
    Rexd(
        Command::new(env!("CARGO_BIN_EXE_rexd"))
            .args(["--irc", addr, "--channel", CHANNEL, "--nick", "deskbot"])
            .args(allow)
            .args(["--root", root.to_str().unwrap()])
            .args(extra)
            // A private loopback server: serving without a secret is a risk accepted here.
            .args(if secret {
                &[][..]
            } else {
                &["--unauthenticated"][..]
            })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn rexd --irc"),
    )
}

struct Desk {
    clock: Clock,
    conn: IrcConn,
    client: Client,
    remote_joined: bool,
}

impl Desk {
    fn connect(addr: &str, pacing: Pacing, timeout_ms: u64) -> Desk {
        Self::connect_as(
            addr,
            deskwire::irc::SessionConfig::new("desk", &[CHANNEL]),
            pacing,
            timeout_ms,
        )
    }

    /// A desk whose IRC session is `session` (a nick, SASL).
    fn connect_as(
        addr: &str,
        session: deskwire::irc::SessionConfig,
        pacing: Pacing,
        timeout_ms: u64,
    ) -> Desk {
        let clock = Clock::start();
        let mut cfg = Config::new(CHANNEL, &session.nick);
        cfg.allowed_sender = Some("deskbot".into());
        cfg.pacing = pacing;
        cfg.request_timeout_ms = timeout_ms;
        // Request ids from the nick: two desks in one test never send the same id (rexd
        // would take the second for the first again).
        let seed = (session.nick.bytes()).fold(7u64, |h, b| h.wrapping_mul(31) + u64::from(b));
        let conn = IrcConn::connect_with(addr, session, clock.now());
        Desk {
            client: Client::new(cfg, seed),
            conn,
            clock,
            remote_joined: false,
        }
    }

    /// Pumps until `done` returns something or `secs` pass.
    fn run<T>(
        &mut self,
        secs: u64,
        mut done: impl FnMut(&mut Desk, Option<Event>) -> Option<T>,
    ) -> T {
        let end = self.clock.now() + secs * 1000;
        loop {
            let now = self.clock.now();
            assert!(now < end, "timed out");
            for line in self.conn.read_lines(now) {
                let text = String::from_utf8_lossy(&line);
                // The remote joined after us (its JOIN) or before us (in the NAMES reply).
                let names = text.split(' ').nth(1) == Some("353");
                if (text.starts_with(":deskbot!") && text.contains(" JOIN "))
                    || (names
                        && text
                            .split(' ')
                            .any(|w| w.trim_start_matches([':', '@', '+']) == "deskbot"))
                {
                    self.remote_joined = true;
                }
                self.client.handle_line(now, &line);
            }
            self.conn.pump_session(now);
            loop {
                match self.client.poll_output(now) {
                    Output::Transmit(line) => self.conn.write_line(&line),
                    Output::Event(e) => {
                        if let Some(v) = done(self, Some(e)) {
                            return v;
                        }
                    }
                    Output::Timeout(_) => break,
                }
            }
            if let Some(v) = done(self, None) {
                return v;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Keeps pumping for `ms` (lines queued behind an event, like a CANCEL, go out).
    fn pump_for(&mut self, ms: u64) {
        let until = self.clock.now() + ms;
        self.run(ms / 1000 + 5, |d, _| (d.clock.now() >= until).then_some(()));
    }

    fn wait_ready(&mut self) {
        self.run(20, |d, _| (d.conn.joined && d.remote_joined).then_some(()));
    }

    /// Sends `command` and waits for its answer.
    fn ask(&mut self, command: &str, secs: u64) -> Event {
        let now = self.clock.now();
        let id = self.client.request(now, command, None).unwrap();
        self.run(secs, |_, e| match e {
            Some(e @ (Event::Response { .. } | Event::Failed { .. })) => {
                let got = match &e {
                    Event::Response { id, .. } | Event::Failed { id, .. } => id.clone(),
                    _ => unreachable!(),
                };
                (got == id).then_some(e)
            }
            _ => None,
        })
    }
}

#[test]
fn remote_bash_over_ngircd() {
    let server = Ngircd::start();
    let root = tempfile::tempdir().unwrap();
    let _rexd = start_rexd(&server.addr(), root.path(), &["--timeout-sec", "2"]);
    let mut desk = Desk::connect(&server.addr(), deskwire::oa1::DEFAULT_PACING, 30_000);
    desk.wait_ready();

    // Stateless sh -c in the root, stdout and stderr merged, UTF-8 and escapes intact.
    let e = desk.ask("cd /tmp; printf 'héllo\\tworld\\n'; echo err >&2; pwd", 30);
    let Event::Response {
        text, truncated, ..
    } = e
    else {
        panic!("{e:?}")
    };
    assert_eq!(text, "héllo\tworld\nerr\n/tmp\n");
    assert!(!truncated);
    // The cd did not carry over: a fresh shell starts in the root again.
    let e = desk.ask("pwd", 30);
    let Event::Response { text, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!(
        text.trim(),
        std::fs::canonicalize(root.path())
            .unwrap()
            .to_str()
            .unwrap()
    );

    // Past the remote's timeout: ERR timeout, and the command's group is gone.
    let pidfile = root.path().join("pid");
    let e = desk.ask(
        &format!("echo $$ > {}; sleep 300 & wait", pidfile.display()),
        30,
    );
    let Event::Failed { failure, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!(failure.code(), "timeout", "{failure:?}");
    let pgid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !common::group_members(pgid).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed-out group still alive"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn cancel_kills_and_big_output_is_truncated() {
    let server = Ngircd::start_without_penalties();
    let root = tempfile::tempdir().unwrap();
    let _rexd = start_rexd(
        &server.addr(),
        root.path(),
        &[
            "--timeout-sec",
            "60",
            "--pacing-interval-ms",
            "0",
            "--pacing-burst",
            "1000000",
        ],
    );
    let mut desk = Desk::connect(&server.addr(), Pacing::UNLIMITED, 3_000);
    desk.wait_ready();

    // Output over the 128 KiB cap: the stream is cut and marked, and the command stopped.
    let e = desk.ask("yes 0123456789abcdef | head -c 50000000", 60);
    let Event::Response {
        text, truncated, ..
    } = e
    else {
        panic!("{e:?}")
    };
    assert!(truncated);
    assert!(text.ends_with(TRUNCATION_MARKER));
    assert!(text.starts_with("0123456789abcdef\n0123456789abcdef\n"));

    // The desk gives up after 3 s and sends CANCEL: the remote kills the process group.
    let pidfile = root.path().join("pid");
    let e = desk.ask(
        &format!("echo $$ > {}; exec sleep 300", pidfile.display()),
        30,
    );
    let Event::Failed { failure, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!(failure.code(), "timeout");
    desk.pump_for(300);
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while common::alive(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "cancelled command still running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn reconnects_after_the_server_restarts() {
    let mut server = Ngircd::start();
    let root = tempfile::tempdir().unwrap();
    let mut rexd = start_rexd(&server.addr(), root.path(), &[]);
    let mut desk = Desk::connect(&server.addr(), deskwire::oa1::DEFAULT_PACING, 30_000);
    desk.wait_ready();
    let e = desk.ask("echo before", 30);
    assert!(
        matches!(&e, Event::Response { text, .. } if text == "before\n"),
        "{e:?}"
    );

    // Every connection drops; rexd waits 1 s, connects again and rejoins the channel.
    server.restart();
    let mut desk = Desk::connect(&server.addr(), deskwire::oa1::DEFAULT_PACING, 30_000);
    desk.wait_ready();
    let e = desk.ask("echo after", 30);
    assert!(
        matches!(&e, Event::Response { text, .. } if text == "after\n"),
        "{e:?}"
    );
    assert!(rexd.0.try_wait().unwrap().is_none(), "rexd exited");
}

/// A server that stops answering (SIGSTOP: the socket stays open, nothing comes) is noticed
/// by the keepalive within --irc-ping-interval-ms plus --irc-ping-timeout-ms, and rexd connects
/// again once it answers.
#[test]
fn a_server_that_stops_answering_is_noticed_and_rexd_comes_back() {
    let server = Ngircd::start();
    let root = tempfile::tempdir().unwrap();
    let log = root.path().join("rexd.log");
    let _rexd = start_rexd_logging(
        &server.addr(),
        root.path(),
        &["--allow-from", "desk"],
        &[
            "--irc-ping-interval-ms",
            "1000",
            "--irc-ping-timeout-ms",
            "1500",
            "--reconnect-first-ms",
            "200",
            "--reconnect-max-ms",
            "1000",
        ],
        std::fs::File::create(&log).unwrap(),
    );
    wait_logged(&log, "joined");
    server.pause();
    let paused = std::time::Instant::now();
    let logged = wait_logged(&log, "IRC link lost");
    let noticed = paused.elapsed();
    assert!(
        logged.contains("IRC link lost (IRC session ended: the server stopped answering PING)"),
        "{logged}"
    );
    std::thread::sleep(Duration::from_secs(1));
    server.resume();
    let resumed = std::time::Instant::now();
    let mut desk = Desk::connect(&server.addr(), deskwire::oa1::DEFAULT_PACING, 30_000);
    desk.wait_ready();
    let e = desk.ask("echo after", 30);
    assert!(
        matches!(&e, Event::Response { text, .. } if text == "after\n"),
        "{e:?}"
    );
    eprintln!(
        "dead link noticed after {noticed:?}; answered {:?} after SIGCONT",
        resumed.elapsed()
    );
}

/// `rexd --irc ADDR --unauthenticated`, which must fail before serving; returns its stderr.
fn failed_start(addr: &str) -> String {
    failed_start_with(addr, &[])
}

/// [`failed_start`] with more flags.
fn failed_start_with(addr: &str, extra: &[&str]) -> String {
    let root = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_rexd"))
        .args(["--irc", addr, "--channel", CHANNEL])
        .args(extra)
        .args(["--root", root.path().to_str().unwrap(), "--unauthenticated"])
        .stdin(Stdio::null())
        .output()
        .expect("run rexd --irc");
    assert!(!output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_first_connection_that_fails_is_an_error() {
    // Nothing listens on this port: rexd reports it and exits instead of retrying forever.
    let closed = deskwire_integration::ClosedPort::hold();
    let stderr = failed_start(&format!("127.0.0.1:{}", closed.port));
    assert!(stderr.contains("refused"), "{stderr}");
}

/// A server password the server refuses: its words (`ERROR :Access denied: Bad password?`),
/// not only that it closed the connection.
#[test]
fn a_wrong_server_password_says_the_servers_words() {
    let ircd = Ngircd::start_with_sections("[Global]\nPassword = sekrit\n");
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "wrong\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600)).unwrap();
    let stderr = failed_start_with(
        &ircd.addr(),
        &["--irc-password-file", password.to_str().unwrap()],
    );
    assert!(stderr.contains("Access denied: Bad password?"), "{stderr}");
}

#[test]
fn an_address_without_a_port_says_what_is_expected() {
    let stderr = failed_start("nonsense");
    assert!(
        stderr.contains("--irc nonsense: ")
            && stderr.contains(
                "expected the IRC server as ircs://HOST[:PORT] (TLS), irc://HOST[:PORT] or \
                 HOST:PORT, e.g. ircs://irc.example.net:6697 or 127.0.0.1:6667"
            ),
        "{stderr}"
    );
}

#[test]
fn serving_a_shell_over_irc_needs_a_secret_or_an_explicit_risk() {
    let root = tempfile::tempdir().unwrap();
    // Refused before connecting anywhere: nothing listens on port 1.
    let output = Command::new(env!("CARGO_BIN_EXE_rexd"))
        .args(["--irc", "127.0.0.1:1", "--channel", CHANNEL])
        .args(["--root", root.path().to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .expect("run rexd --irc");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--secret-file") && stderr.contains("--unauthenticated"),
        "{stderr}"
    );
    let help = Command::new(env!("CARGO_BIN_EXE_rexd"))
        .arg("--help")
        .output()
        .expect("rexd --help");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--unauthenticated") && help.contains("RISK"),
        "{help}"
    );
}

/// Mode 0600, as a secret file must be.
fn private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Issue 33: a secret file others could read was taken (the token file of `--listen` was not).
/// Both are refused the same way, naming the mode and the fix, before connecting anywhere.
#[test]
fn a_secret_file_others_can_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let secret = root.path().join("desk.secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(mode)).unwrap();
        // Nothing listens on port 1: a refusal there would be a connection error instead.
        let output = Command::new(env!("CARGO_BIN_EXE_rexd"))
            .args(["--irc", "127.0.0.1:1", "--channel", CHANNEL])
            .args(["--root", root.path().to_str().unwrap()])
            .arg("--secret-file")
            .arg(&secret)
            .stdin(Stdio::null())
            .output()
            .expect("run rexd --irc");
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!(
                "--secret-file {}: readable by group or others (mode {mode:o}); `chmod 600` it",
                secret.display()
            )),
            "{stderr}"
        );
        // Said alone, before the log tells of a confinement that never serves.
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    // A systemd credential (the packaged unit's) is the service's whatever its bits say: it is
    // read, and rexd goes on to connect.
    let with_credential = || {
        let output = Command::new(env!("CARGO_BIN_EXE_rexd"))
            .args(["--irc", "127.0.0.1:1", "--channel", CHANNEL])
            .args(["--root", root.path().to_str().unwrap()])
            .arg("--secret-file")
            .arg(&secret)
            .env("CREDENTIALS_DIRECTORY", root.path())
            .stdin(Stdio::null())
            .output()
            .expect("run rexd --irc");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let stderr = with_credential();
    assert!(
        stderr.contains("--irc 127.0.0.1:1: connect to 127.0.0.1:1 failed: Connection refused"),
        "{stderr}"
    );
    // Six bytes ("s3cret"): used, and said to be guessable.
    assert!(
        stderr.contains("a secret of 6 bytes can be guessed from the frames' tags"),
        "{stderr}"
    );
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef\n").unwrap();
    let stderr = with_credential();
    assert!(!stderr.contains("can be guessed"), "{stderr}");
}

#[test]
fn a_first_join_the_server_refuses_is_an_error_with_its_words() {
    // An invite-only channel: ngircd answers the JOIN with 473.
    let server = Ngircd::start_with_sections("[Channel]\nName = #locked\nModes = i\n");
    let root = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_rexd"))
        .args([
            "--irc",
            &server.addr(),
            "--channel",
            "#locked",
            "--unauthenticated",
        ])
        .args(["--root", root.path().to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .expect("run rexd --irc");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot join #locked: 473"), "{stderr}");
}

#[test]
fn a_mask_keeps_out_whoever_takes_the_desks_nick() {
    let server = Ngircd::start();
    let root = tempfile::tempdir().unwrap();
    let log_path = root.path().join("rexd.log");
    let log = std::fs::File::create(&log_path).unwrap();
    // ngircd shows unverified users with a `~`: the desk below is desk!~desk@127.0.0.1.
    let _rexd = start_rexd_logging(
        &server.addr(),
        root.path(),
        &[
            "--allow-from",
            "desk!~desk@127.0.0.1",
            "--log-level",
            "info",
        ],
        &[],
        log,
    );
    let mut desk = Desk::connect(&server.addr(), deskwire::oa1::DEFAULT_PACING, 30_000);
    desk.wait_ready();
    let e = desk.ask("echo served", 30);
    assert!(
        matches!(&e, Event::Response { text, .. } if text == "served\n"),
        "{e:?}"
    );
    let logged = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        logged.contains("desk!~desk@127.0.0.1 (allowed by desk!~desk@127.0.0.1) in #desk asks"),
        "{logged}"
    );
    assert!(logged.contains("UNAUTHENTICATED"), "{logged}");

    // The desk quits; eve (another user name) takes its nick and asks for a shell.
    desk.conn.write_line("QUIT :bye");
    let clock = Clock::start();
    let mut eve = IrcConn::connect(&server.addr(), "eve", CHANNEL, clock.now());
    let start = std::time::Instant::now();
    while !eve.joined {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "eve never joined"
        );
        eve.read_lines(clock.now());
        eve.pump_session(clock.now());
        std::thread::sleep(Duration::from_millis(10));
    }
    eve.write_line("NICK desk");
    std::thread::sleep(Duration::from_millis(300));
    eve.write_line(&format!("PRIVMSG {CHANNEL} :OA1 REQ t1 1 0 id -un"));
    let until = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < until {
        for line in eve.read_lines(clock.now()) {
            let text = String::from_utf8_lossy(&line);
            assert!(!text.contains("OA1 RES t1"), "eve got a shell: {text}");
            assert!(!text.contains("OA1 ERR t1"), "eve was heard: {text}");
        }
        eve.pump_session(clock.now());
        std::thread::sleep(Duration::from_millis(20));
    }
    let logged = std::fs::read_to_string(&log_path).unwrap();
    assert!(!logged.contains("asks t1"), "{logged}");
    // Refused without a word to eve, and named in the log for the operator.
    assert!(
        logged.contains(
            "refused an OA1 frame from desk!~eve@127.0.0.1: its sender is not \
             desk!~desk@127.0.0.1"
        ),
        "{logged}"
    );
}

#[test]
fn a_desk_with_another_secret_times_out_saying_so_and_rexd_logs_why() {
    // What a new user meets first: the desk's secret (or none) is not rexd's. rexd answers
    // nothing (an answer would tell a stranger it is there), logs who it refused and why, and
    // the desk's timeout says nothing came back and where to look.
    let server = Ngircd::start();
    let root = tempfile::tempdir().unwrap();
    let secret_path = root.path().join("desk.secret");
    std::fs::write(&secret_path, "the remote's secret\n").unwrap();
    private(&secret_path);
    let log_path = root.path().join("rexd.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let _rexd = start_rexd_logging(
        &server.addr(),
        root.path(),
        &["--allow-from", "desk"],
        &["--secret-file", secret_path.to_str().unwrap()],
        log,
    );
    let mut desk = Desk::connect(&server.addr(), deskwire::oa1::DEFAULT_PACING, 2_000);
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        - desk.clock.now();
    let mut cfg = Config::new(CHANNEL, "desk");
    cfg.allowed_sender = Some("deskbot".into());
    cfg.request_timeout_ms = 2_000;
    cfg.auth = Some(AuthConfig::new(b"another secret".to_vec(), epoch));
    desk.client = Client::new(cfg, 7);
    desk.wait_ready();
    let e = desk.ask("touch PWNED", 10);
    let Event::Failed {
        failure: failure @ Failure::Timeout { .. },
        ..
    } = &e
    else {
        panic!("expected a timeout, got {e:?}");
    };
    assert!(
        failure.message().contains("no OA1 frame came back")
            && failure.message().contains("--allow-from"),
        "{}",
        failure.message()
    );
    assert!(!root.path().join("PWNED").exists());
    let logged = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        logged.contains(
            "refused an OA1 frame from desk!~desk@127.0.0.1: its tag does not check out: the \
             two ends hold different secrets"
        ),
        "{logged}"
    );
    // Asked again at once, it is not logged again: a stranger cannot flood the log.
    let _ = desk.ask("touch PWNED", 10);
    let logged = std::fs::read_to_string(&log_path).unwrap();
    assert_eq!(
        logged.matches("refused an OA1 frame").count(),
        1,
        "{logged}"
    );
}

#[test]
fn sigterm_ends_the_commands_and_then_rexd() {
    let server = Ngircd::start();
    let root = tempfile::tempdir().unwrap();
    let mut rexd = start_rexd(&server.addr(), root.path(), &["--timeout-sec", "600"]);
    let mut desk = Desk::connect(&server.addr(), deskwire::oa1::DEFAULT_PACING, 600_000);
    desk.wait_ready();
    let pidfile = root.path().join("pid");
    let now = desk.clock.now();
    desk.client
        .request(
            now,
            &format!("echo $$ > {}; exec sleep 300", pidfile.display()),
            None,
        )
        .unwrap();
    let start = std::time::Instant::now();
    while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap().trim().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the command never ran"
        );
        desk.pump_for(50);
    }
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(common::alive(pid));
    unsafe { libc::kill(rexd.0.id() as i32, libc::SIGTERM) };
    let status = loop {
        if let Some(status) = rexd.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "rexd did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(!common::alive(pid), "the command outlived rexd");
}

#[test]
fn a_failed_command_says_how_it_ended() {
    let server = Ngircd::start_without_penalties();
    let root = tempfile::tempdir().unwrap();
    let _rexd = start_rexd(&server.addr(), root.path(), &["--pacing-interval-ms", "0"]);
    let mut desk = Desk::connect(&server.addr(), Pacing::UNLIMITED, 30_000);
    desk.wait_ready();
    let text = |e: Event| match e {
        Event::Response { text, .. } => text,
        other => panic!("{other:?}"),
    };
    // grep finding nothing is not success: the model can tell.
    assert_eq!(
        text(desk.ask("grep -q x /dev/null", 30)),
        "[exit code: 1]\n"
    );
    assert_eq!(
        text(desk.ask("printf partial; exit 3", 30)),
        "partial\n[exit code: 3]\n"
    );
    assert_eq!(
        text(desk.ask("echo line; kill -KILL $$", 30)),
        "line\n[signal: KILL]\n"
    );
    assert_eq!(text(desk.ask("echo fine", 30)), "fine\n");
    // A character cut between two reads arrives whole.
    assert_eq!(
        text(desk.ask("printf '\\342\\202'; sleep 0.3; printf '\\254\\n'", 30)),
        "€\n"
    );
}

#[test]
fn the_exit_marker_can_be_turned_off() {
    let server = Ngircd::start_without_penalties();
    let root = tempfile::tempdir().unwrap();
    let _rexd = start_rexd(&server.addr(), root.path(), &["--no-exit-marker"]);
    let mut desk = Desk::connect(&server.addr(), deskwire::oa1::DEFAULT_PACING, 30_000);
    desk.wait_ready();
    let e = desk.ask("echo out; exit 2", 30);
    assert!(
        matches!(&e, Event::Response { text, .. } if text == "out\n"),
        "{e:?}"
    );
}

/// rexd paces by what the server says it is: ngircd, with its flood protection on, gets
/// groups of three lines every 1.1 s (three times the lines of the default for servers not
/// measured), and a long answer arrives whole. How fast, and that no line is held back by
/// the server, `tests/pacing/measure_ngircd.py` and `tests/pacing/remote_bash_speed.sh` show.
#[test]
fn rexd_paces_by_what_the_server_says_it_is() {
    let server = Ngircd::start();
    let root = tempfile::tempdir().unwrap();
    let log_path = root.path().join("rexd.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let _rexd = start_rexd_logging(
        &server.addr(),
        root.path(),
        &["--allow-from", "desk", "--log-level", "info"],
        &["--timeout-sec", "60"],
        log,
    );
    let mut desk = Desk::connect(&server.addr(), deskwire::oa1::DEFAULT_PACING, 60_000);
    desk.wait_ready();
    let e = desk.ask("seq 1 1500", 60);
    let want: String = (1..=1500).map(|i| format!("{i}\n")).collect();
    assert!(
        matches!(&e, Event::Response { text, truncated: false, .. } if *text == want),
        "{e:?}"
    );
    let logged = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        logged.contains("pacing on ngircd-") && logged.contains("groups of 3 lines every 1.1 s"),
        "{logged}"
    );
}

/// `rexd --irc ircs://...`: TLS with the certificate verified, and each way it can fail said
/// in words (a CA this machine does not trust, a name the certificate does not list, a port
/// that speaks plain text, nothing listening), never a timeout.
#[test]
fn rexd_over_tls_and_each_way_tls_fails() {
    let tls = deskwire_integration::TlsNgircd::start();
    let ca = tls.ca.to_str().unwrap();
    let root = tempfile::tempdir().unwrap();
    let log_path = root.path().join("rexd.log");
    let _rexd = start_rexd_logging(
        &format!("ircs://localhost:{}", tls.tls_port),
        root.path(),
        &[
            "--allow-from",
            "desk",
            "--log-level",
            "info",
            "--irc-ca",
            ca,
        ],
        &[],
        std::fs::File::create(&log_path).unwrap(),
    );
    // The desk on the plain port: the server relays between the two.
    let mut desk = Desk::connect(&tls.server.addr(), deskwire::oa1::DEFAULT_PACING, 30_000);
    desk.wait_ready();
    let e = desk.ask("echo over tls", 30);
    assert!(
        matches!(&e, Event::Response { text, .. } if text == "over tls\n"),
        "{e:?}"
    );
    let logged = std::fs::read_to_string(&log_path).unwrap();
    assert!(!logged.contains("plain TCP"), "{logged}");

    let untrusted = failed_start_with(&format!("ircs://localhost:{}", tls.tls_port), &[]);
    assert!(
        untrusted.contains("TLS with ircs://localhost:")
            && untrusted.contains("not signed by a CA this machine trusts")
            && untrusted.contains("--irc-ca"),
        "{untrusted}"
    );
    let wrong_name = failed_start_with(
        &format!("ircs://127.0.0.1:{}", tls.tls_port),
        &["--irc-ca", ca],
    );
    assert!(
        wrong_name.contains("not valid for the name \"127.0.0.1\": it lists localhost"),
        "{wrong_name}"
    );
    let plain = failed_start_with(
        &format!("ircs://localhost:{}", tls.server.port),
        &["--irc-ca", ca],
    );
    assert!(
        plain.contains("a plain-text port? use irc:// for it"),
        "{plain}"
    );
    let held = deskwire_integration::ClosedPort::hold();
    let closed = held.port;
    let refused = failed_start_with(&format!("ircs://localhost:{closed}"), &["--irc-ca", ca]);
    assert!(
        refused.contains(&format!(
            "connect to localhost:{closed} failed: Connection refused"
        )),
        "{refused}"
    );
    // Verification off: it connects, and says so loudly.
    let insecure_log = root.path().join("insecure.log");
    let _insecure = start_rexd_logging(
        &format!("ircs://127.0.0.1:{}", tls.tls_port),
        root.path(),
        &["--allow-from", "desk", "--irc-insecure-skip-verify"],
        &[],
        std::fs::File::create(&insecure_log).unwrap(),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let logged = std::fs::read_to_string(&insecure_log).unwrap();
        if logged.contains("joined #desk") {
            assert!(
                logged.contains("TLS WITHOUT VERIFYING THE SERVER"),
                "{logged}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never joined: {logged}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `log` contains `want` (at most 20 s); returns the log.
fn wait_logged(log: &Path, want: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let logged = std::fs::read_to_string(log).unwrap_or_default();
        if logged.contains(want) {
            return logged;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {want:?} in: {logged}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SASL against InspIRCd 3 with Atheme: PLAIN with the right password logs in, the wrong one
/// ends the start with the server's words, EXTERNAL logs in with the client certificate
/// registered to the account, all over TLS.
#[test]
fn rexd_logs_in_with_sasl() {
    let irc = deskwire_integration::ServicesIrc::start();
    let root = tempfile::tempdir().unwrap();
    let secret = |name: &str, text: &str| {
        use std::os::unix::fs::PermissionsExt;
        let path = root.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let (right, wrong) = (
        secret("right", deskwire_integration::ServicesIrc::PASSWORD),
        secret("wrong", "not-the-password\n"),
    );
    let url = format!("ircs://localhost:{}", irc.tls_port);
    let ca = irc.ca.to_str().unwrap();
    let account = deskwire_integration::ServicesIrc::ACCOUNT;
    let log_path = root.path().join("plain.log");
    let _plain = start_rexd_logging(
        &url,
        root.path(),
        &[
            "--allow-from",
            "desk",
            "--log-level",
            "info",
            "--irc-ca",
            ca,
        ],
        &["--sasl-user", account, "--sasl-password-file", &right],
        std::fs::File::create(&log_path).unwrap(),
    );
    let logged = wait_logged(&log_path, "joined #desk");
    assert!(
        logged.contains(&format!("logged in as {account} (SASL)")),
        "{logged}"
    );

    let refused = failed_start_with(
        &url,
        &[
            "--irc-ca",
            ca,
            "--sasl-user",
            account,
            "--sasl-password-file",
            &wrong,
        ],
    );
    assert!(
        refused.contains("SASL login failed: 904 SASL authentication failed"),
        "{refused}"
    );

    let log_path = root.path().join("external.log");
    let _external = start_rexd_logging(
        &url,
        root.path(),
        &[
            "--allow-from",
            "desk",
            "--log-level",
            "info",
            "--irc-ca",
            ca,
        ],
        &[
            "--irc-client-cert",
            irc.client_cert.to_str().unwrap(),
            "--irc-client-key",
            irc.client_key.to_str().unwrap(),
            "--sasl-external",
        ],
        std::fs::File::create(&log_path).unwrap(),
    );
    let logged = wait_logged(&log_path, "joined #desk");
    assert!(
        logged.contains(&format!("logged in as {account} (SASL)")),
        "{logged}"
    );
}

/// rexd's flags to log in to the services' account with SASL PLAIN, its password in a file
/// (mode 600, as rexd demands) in `dir`.
fn services_login(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let password = dir.join("password");
    std::fs::write(&password, deskwire_integration::ServicesIrc::PASSWORD).unwrap();
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600)).unwrap();
    let account = deskwire_integration::ServicesIrc::ACCOUNT;
    let password = password.to_str().unwrap();
    ["--sasl-user", account, "--sasl-password-file", password]
        .map(str::to_owned)
        .into()
}

/// `--allow-from account:bob`: a desk logged in to bob's account is served whatever its nick;
/// a guest holding the nick `desk` is not; and a server that does not send accounts (ngircd)
/// stops the start, naming the missing capability.
#[test]
fn rexd_serves_an_account() {
    let irc = deskwire_integration::ServicesIrc::start();
    let root = tempfile::tempdir().unwrap();
    let account = deskwire_integration::ServicesIrc::ACCOUNT;
    let log_path = root.path().join("rexd.log");
    let sasl = services_login(root.path());
    let sasl: Vec<&str> = sasl.iter().map(String::as_str).collect();
    let allow = format!("account:{account}");
    let _rexd = start_rexd_logging(
        &format!("127.0.0.1:{}", irc.port),
        root.path(),
        &["--allow-from", &allow, "--log-level", "info"],
        &sasl,
        std::fs::File::create(&log_path).unwrap(),
    );
    let logged = wait_logged(&log_path, "joined #desk");
    assert!(
        logged.contains("serving the account bob as the server says"),
        "{logged}"
    );
    // A guest that holds the nick `desk` but no account: refused (and logged).
    let mut guest = Desk::connect(&irc.addr(), deskwire::oa1::DEFAULT_PACING, 8_000);
    guest.wait_ready();
    let e = guest.ask("echo guest", 10);
    assert!(matches!(&e, Event::Failed { .. }), "{e:?}");
    drop(guest);
    // A desk logged in as bob, under another nick: served.
    let mut session = deskwire::irc::SessionConfig::new("bobdesk", &[CHANNEL]);
    session.sasl = Some(deskwire::irc::SaslConfig::plain(
        account,
        deskwire_integration::ServicesIrc::PASSWORD,
    ));
    let mut desk = Desk::connect_as(&irc.addr(), session, deskwire::oa1::DEFAULT_PACING, 10_000);
    desk.wait_ready();
    let e = desk.ask("echo bob", 30);
    assert!(
        matches!(&e, Event::Response { text, .. } if text == "bob\n"),
        "{e:?}"
    );
    let logged = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        logged.contains("refused"),
        "the guest's frame was logged as refused: {logged}"
    );
    // Logged out, the same desk is nobody.
    desk.conn.write_line("PRIVMSG NickServ :LOGOUT");
    desk.pump_for(2_000);
    assert!(
        desk.conn
            .received
            .iter()
            .any(|(_, l)| String::from_utf8_lossy(l).contains(" 901 ")),
        "NickServ logged the desk out: {:?}",
        desk.conn
            .received
            .iter()
            .rev()
            .take(8)
            .map(|(_, l)| String::from_utf8_lossy(l).into_owned())
            .collect::<Vec<_>>()
    );
    let e = desk.ask("echo after logout", 15);
    assert!(matches!(&e, Event::Failed { .. }), "{e:?}");

    // Without a login of its own, an account is nobody's word rexd should take.
    let output = Command::new(env!("CARGO_BIN_EXE_rexd"))
        .args(["--irc", &irc.addr(), "--allow-from", &allow])
        .args(["--root", root.path().to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let refused = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success()
            && refused.contains("--allow-from account:NAME needs this connection logged in"),
        "{refused}"
    );
    // ngircd sends no accounts: rexd will not serve one it cannot check.
    let ngircd = Ngircd::start();
    let refused = failed_start_with(&ngircd.addr(), &["--allow-from", &allow]);
    assert!(
        refused.contains("offers neither the account-tag nor the account-notify capability"),
        "{refused}"
    );
}

/// On a server that puts no account on messages (InspIRCd without `account-tag`), rexd
/// follows who is logged in to the allowed account from what the server says of the channel's
/// members: `extended-join` for a desk that joins after it, a WHOX reply for one already there
/// when it joins, and `account-notify` when that desk logs out.
#[test]
fn rexd_follows_an_account_where_messages_carry_none() {
    let irc = deskwire_integration::ServicesIrc::start_without_account_tag();
    let root = tempfile::tempdir().unwrap();
    let account = deskwire_integration::ServicesIrc::ACCOUNT;
    let sasl = services_login(root.path());
    let sasl: Vec<&str> = sasl.iter().map(String::as_str).collect();
    let allow = format!("account:{account}");
    let bob_desk = |nick: &str| {
        let mut session = deskwire::irc::SessionConfig::new(nick, &[CHANNEL]);
        session.sasl = Some(deskwire::irc::SaslConfig::plain(
            account,
            deskwire_integration::ServicesIrc::PASSWORD,
        ));
        Desk::connect_as(&irc.addr(), session, deskwire::oa1::DEFAULT_PACING, 10_000)
    };
    // A desk logged in as bob that is in the channel before rexd: known from rexd's WHOX.
    let mut early = bob_desk("bobearly");
    early.run(20, |d, _| d.conn.joined.then_some(()));
    let log_path = root.path().join("rexd.log");
    let rexd = start_rexd_logging(
        &irc.addr(),
        root.path(),
        &["--allow-from", &allow, "--log-level", "info"],
        &sasl,
        std::fs::File::create(&log_path).unwrap(),
    );
    wait_logged(&log_path, "joined #desk");
    early.wait_ready();
    let e = early.ask("echo early", 30);
    assert!(
        matches!(&e, Event::Response { text, .. } if text == "early\n"),
        "{e:?}"
    );
    // One that joins after rexd: known from extended-join.
    let mut late = bob_desk("boblate");
    late.wait_ready();
    let e = late.ask("echo late", 30);
    assert!(
        matches!(&e, Event::Response { text, .. } if text == "late\n"),
        "{e:?}"
    );
    // A guest holding the nick `desk` and no account: refused.
    let mut guest = Desk::connect(&irc.addr(), deskwire::oa1::DEFAULT_PACING, 8_000);
    guest.wait_ready();
    let e = guest.ask("echo guest", 10);
    assert!(matches!(&e, Event::Failed { .. }), "{e:?}");
    // Logged out (account-notify), the late desk is nobody.
    late.conn.write_line("PRIVMSG NickServ :LOGOUT");
    late.pump_for(2_000);
    let e = late.ask("echo after logout", 15);
    assert!(matches!(&e, Event::Failed { .. }), "{e:?}");
    let logged = std::fs::read_to_string(&log_path).unwrap();
    assert!(logged.contains("refused"), "{logged}");
    drop(rexd);
}

/// InspIRCd 3 with its default connect class closes the link of a client that sends faster
/// than a line a second for long (`RecvQ exceeded` after 48 lines at 700 ms:
/// tests/pacing/measure_inspircd.py). rexd paces it by what its `004` says, and a long answer
/// (about 60 lines) comes back whole.
#[test]
fn a_long_answer_through_inspircd_keeps_within_its_flood_limits() {
    let irc = deskwire_integration::ServicesIrc::start();
    let root = tempfile::tempdir().unwrap();
    let (_rexd, log_path) = rexd_serving_desk(&irc.addr(), root.path());
    let logged = wait_logged(&log_path, "joined #desk");
    assert!(
        logged.contains("pacing on InspIRCd-3: 3 lines, then one every 1 s"),
        "{logged}"
    );
    let mut desk = Desk::connect(&irc.addr(), deskwire::oa1::DEFAULT_PACING, 150_000);
    desk.wait_ready();
    let started = Instant::now();
    let e = desk.ask("seq 100000 103500", 160);
    let want = Command::new("seq")
        .args(["100000", "103500"])
        .output()
        .unwrap()
        .stdout;
    let Event::Response { text, .. } = &e else {
        panic!("{e:?}\n{}", std::fs::read_to_string(&log_path).unwrap());
    };
    assert!(
        text.as_bytes() == want,
        "{} bytes of {}",
        text.len(),
        want.len()
    );
    let frames = desk.client.stats().frames_in;
    println!(
        "InspIRCd: {} bytes in {frames} frames, {:.1} s",
        want.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(frames > 50, "a long answer: {frames} frames");
}

/// Where the server has a bot mode (InspIRCd's botmode: ISUPPORT `BOT=B`), rexd marks itself
/// a bot, so `WHOIS` says so (`335`) and clients can tell it from people.
#[test]
fn rexd_marks_itself_a_bot_where_the_server_offers_it() {
    let irc = deskwire_integration::ServicesIrc::start();
    let root = tempfile::tempdir().unwrap();
    let (_rexd, log_path) = rexd_serving_desk(&irc.addr(), root.path());
    wait_logged(&log_path, "joined #desk");
    let clock = Clock::start();
    let mut looker = IrcConn::connect(&irc.addr(), "looker", CHANNEL, clock.now());
    let deadline = clock.now() + 10_000;
    let mut asked = false;
    let mut whois = Vec::new();
    loop {
        assert!(clock.now() < deadline, "no end of WHOIS: {whois:?}");
        for line in looker.read_lines(clock.now()) {
            let line = String::from_utf8_lossy(&line).into_owned();
            if asked && line.contains(" deskbot ") {
                whois.push(line);
            }
        }
        looker.pump_session(clock.now());
        if !asked && looker.session.is_registered() {
            looker.write_line("WHOIS deskbot");
            asked = true;
        }
        if whois.iter().any(|l| l.contains(" 318 ")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(whois.iter().any(|l| l.contains(" 335 ")), "{whois:?}");
}
