//! `rexd --irc` and a desk on different servers of a linked ngircd network (issue 38): requests
//! across one and two links, plain and sealed (OA1A) with compression; and netsplits, as a user
//! meets them: a split during a long answer, a request made during the split, the heal.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use deskwire::oa1::{
    AuthConfig, ConnectionConfig, ConnectionEvent, ConnectionOutput, ConnectionState, Desk, Event,
};
use deskwire_integration::{Clock, NgircdNetwork, Wire};

const CHANNEL: &str = "#desk";
const SECRET: &[u8] = b"the network's desk secret";

/// `rexd --irc` as `deskbot`, serving `desk`, logging at info to `rexd.log` in its root.
struct Rexd {
    child: Child,
    log: PathBuf,
}

impl Rexd {
    /// Starts rexd on `addr` and waits until it is in the channel. With `sealed`, it takes only
    /// OA1A frames sealed with [`SECRET`].
    fn start(addr: &str, root: &Path, sealed: bool) -> Rexd {
        let log = root.join("rexd.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_rexd"));
        command
            .args(["--irc", addr, "--channel", CHANNEL, "--nick", "deskbot"])
            .args(["--allow-from", "desk", "--log-level", "info"])
            .args(["--root", root.to_str().unwrap()]);
        if sealed {
            let secret = root.join("desk.secret");
            std::fs::write(&secret, SECRET).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
            command.arg("--secret-file").arg(secret);
        } else {
            // A private loopback network: serving without a secret is a risk accepted here.
            command.arg("--unauthenticated");
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn rexd --irc");
        let rexd = Rexd { child, log };
        rexd.wait_logged("joined", 1);
        rexd
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (up to 20 s) until the log holds `want` `count` times; returns the log.
    fn wait_logged(&self, want: &str, count: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let log = self.log_text();
            if log.matches(want).count() >= count {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "{want:?} not in rexd's log:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Rexd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The connection engine of a desk on a real socket, pumped by the test.
struct NetDesk {
    clock: Clock,
    wire: Wire,
    engine: Desk,
    /// OA1 outcomes not taken yet.
    done: Vec<Event>,
}

impl NetDesk {
    /// A desk `desk` for the remote `deskbot`; `sealed` seals with [`SECRET`] and asks for
    /// compressed answers (the engine's default), else plain OA1 uncompressed.
    fn connect(addr: &str, sealed: bool) -> NetDesk {
        let clock = Clock::start();
        let mut config = ConnectionConfig::new("desk", CHANNEL).with_peer("deskbot");
        config.oa1.request_timeout_ms = 60_000;
        config.oa1.adaptive_payload = true;
        config.oa1.compression = sealed;
        if sealed {
            let epoch = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64
                - clock.now();
            config.oa1.auth = Some(AuthConfig::new(SECRET.to_vec(), epoch));
        }
        NetDesk {
            wire: Wire::connect(addr),
            engine: Desk::new(config, clock.now(), 38).unwrap(),
            clock,
            done: Vec::new(),
        }
    }

    /// Reads, feeds the engine, writes what it gives; keeps the OA1 outcomes.
    fn pump(&mut self) {
        let now = self.clock.now();
        let bytes = self.wire.read(now);
        if self.wire.closed {
            self.engine.handle_eof(now);
        } else if !bytes.is_empty() {
            self.engine.handle_bytes(now, &bytes);
        }
        loop {
            match self.engine.poll_output(now) {
                ConnectionOutput::Transmit(line) => self.wire.write(&line),
                ConnectionOutput::Event(ConnectionEvent::Oa1(event)) => self.done.push(event),
                ConnectionOutput::Event(_) => {}
                ConnectionOutput::Timeout(_) => break,
            }
        }
    }

    /// Pumps until `until` holds, for at most `secs`.
    fn run_until(&mut self, secs: u64, what: &str, mut until: impl FnMut(&mut NetDesk) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            self.pump();
            if until(self) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within {secs} s ({:?})",
                self.engine.state()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn wait_ready(&mut self) {
        self.run_until(20, "ready", |d| d.engine.state() == ConnectionState::Ready);
    }

    /// Pumps until request `id` ends; returns its outcome.
    fn outcome(&mut self, id: &str, secs: u64) -> Event {
        let mut found = None;
        self.run_until(secs, &format!("the outcome of {id}"), |d| {
            let at = d.done.iter().position(|e| match e {
                Event::Response { id: got, .. } | Event::Failed { id: got, .. } => got == id,
                _ => false,
            });
            found = at.map(|i| d.done.remove(i));
            found.is_some()
        });
        found.unwrap()
    }

    fn ask(&mut self, command: &str, secs: u64) -> Event {
        let id = self
            .engine
            .request(self.clock.now(), command, None)
            .unwrap();
        self.outcome(&id, secs)
    }

    /// Whether any OA1 line of request `id` came in after `since` (desk clock, ms).
    fn frames_of_after(&self, id: &str, since: u64) -> usize {
        self.wire
            .received
            .iter()
            .filter(|(at, line)| {
                *at > since && String::from_utf8_lossy(line).contains(&format!(" {id} "))
            })
            .count()
    }
}

fn text_of(event: Event) -> String {
    match event {
        Event::Response {
            text,
            truncated: false,
            ..
        } => text,
        other => panic!("not a whole answer: {other:?}"),
    }
}

/// What `seq 1 n` prints.
fn seq(n: u32) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}

#[test]
fn requests_cross_two_links_plain_and_sealed_with_compression() {
    // rexd on the far end of a chain of three servers, the desk on the near end.
    let network = NgircdNetwork::start(3);
    for sealed in [false, true] {
        let root = tempfile::tempdir().unwrap();
        let rexd = Rexd::start(&network.addr(2), root.path(), sealed);
        let mut desk = NetDesk::connect(&network.addr(0), sealed);
        desk.wait_ready();
        assert_eq!(text_of(desk.ask("echo across", 30)), "across\n");
        assert_eq!(
            text_of(desk.ask("printf 'h\\303\\251llo \\342\\234\\223\\n'", 30)),
            "héllo ✓\n"
        );
        // Many frames (about 11 KB, in several lines even compressed).
        assert_eq!(text_of(desk.ask("seq 1 2500", 60)), seq(2500), "{sealed}");
        // Bytes that are not UTF-8 come back as the tool's replacement, the same either way.
        let odd = text_of(desk.ask("printf 'a\\377b\\n'", 30));
        assert_eq!(odd, "a\u{fffd}b\n");
        if sealed {
            let log = rexd.log_text();
            assert!(!log.contains("refused"), "{log}");
        }
    }
}

/// A split during a long answer, a request made during the split, the heal: what the desk and
/// rexd each see. `sealed`: the same with OA1A and compression.
fn split_during_a_long_answer(sealed: bool) {
    let network = NgircdNetwork::start(2);
    let root = tempfile::tempdir().unwrap();
    let rexd = Rexd::start(&network.addr(1), root.path(), sealed);
    let mut desk = NetDesk::connect(&network.addr(0), sealed);
    desk.wait_ready();

    // A command that streams for 60 s; the split comes once its first lines are here.
    let pidfile = root.path().join("pid");
    let long = desk
        .engine
        .request(
            desk.clock.now(),
            &format!(
                "echo $$ > {}; for i in $(seq 1 120); do echo line $i; sleep 0.5; done",
                pidfile.display()
            ),
            None,
        )
        .unwrap();
    desk.run_until(30, "the first lines of the long answer", |d| {
        d.frames_of_after(&long, 0) > 0
    });
    network.split(0);
    let split_at = desk.clock.now();

    // The desk ends the request at once, naming the servers; no waiting out a timeout. The
    // lines that came before the split are its answer, cut short.
    let Event::Response {
        text, truncated, ..
    } = desk.outcome(&long, 10)
    else {
        panic!("the long request did not end with the lines that came")
    };
    assert!(truncated);
    assert!(text.starts_with("line 1\n"), "{text}");
    let (lines, marker) = text.rsplit_once("\n...[").unwrap();
    assert!(
        lines
            .lines()
            .enumerate()
            .all(|(i, l)| l == format!("line {}", i + 1) || l.is_empty()),
        "{lines}"
    );
    assert!(
        marker.starts_with(
            "cut short: remote `deskbot` was split away from #desk by a netsplit between \
             irc1.deskwire.test and irc2.deskwire.test; the answer is lost; "
        ) && marker.ends_with(" bytes arrived; how the command ended is unknown]..."),
        "{marker}"
    );
    // rexd, which saw the desk split away, stopped the command and its answer.
    rexd.wait_logged(
        "cancelled (the desk `desk` left #desk (a netsplit between irc2.deskwire.test and \
         irc1.deskwire.test))",
        1,
    );
    let pgid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !common::group_members(pgid).is_empty() {
        assert!(Instant::now() < deadline, "the command outlived its desk");
        std::thread::sleep(Duration::from_millis(20));
    }

    // A request made during the split waits for the remote...
    let during = desk
        .engine
        .request(desk.clock.now(), "echo made during the split", None)
        .unwrap();
    let wait_from = Instant::now();
    while wait_from.elapsed() < Duration::from_millis(1_500) {
        desk.pump();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(desk.engine.state(), ConnectionState::WaitingForPeer);
    assert!(desk.done.is_empty(), "{:?}", desk.done);

    // ...and goes with the heal, answered; nothing of the cancelled answer comes after it.
    network.heal(0);
    assert_eq!(
        text_of(desk.outcome(&during, 30)),
        "made during the split\n"
    );
    assert_eq!(text_of(desk.ask("seq 1 300", 30)), seq(300));
    assert_eq!(desk.frames_of_after(&long, split_at), 0);
}

#[test]
fn a_split_during_a_long_answer_then_the_heal() {
    split_during_a_long_answer(false);
}

#[test]
fn a_split_during_a_long_answer_then_the_heal_sealed_and_compressed() {
    split_during_a_long_answer(true);
}
