//! One `rexd --irc` connection serving many channels (`--channel` given again and again), asked
//! by many desks on one connection (`oa1::MultiDesk`), over a real ngircd: each desk gets only
//! its own answers; a channel the server will not let rexd into is refused by name; and a short
//! answer in one channel does not wait for a long one in another.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deskwire::oa1::{
    ConnectionConfig, ConnectionEvent, ConnectionState, Event, MultiDesk, MultiOutput, Pacing,
};
use deskwire_integration::{Clock, Ngircd, TempDir, Wire};

const REMOTE: &str = "deskbot";

struct Rexd(Child);

impl Drop for Rexd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `rexd --irc` as `deskbot` serving `channels` on one connection, for the nick `desks`, its
/// log to `root/rexd.log`.
fn start_rexd(addr: &str, root: &Path, channels: &[String], extra: &[&str]) -> Rexd {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rexd"));
    command
        .args(["--irc", addr, "--nick", REMOTE, "--allow-from", "desks"])
        .args(["--unauthenticated", "--log-level", "info"])
        .args(["--root", root.to_str().unwrap()])
        .args(extra);
    for channel in channels {
        command.args(["--channel", channel]);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(root.join("rexd.log")).unwrap());
    Rexd(command.spawn().expect("spawn rexd --irc"))
}

/// Many desks on one connection, driven as a host would drive `MultiDesk`.
struct Desks {
    clock: Clock,
    wire: Wire,
    desks: MultiDesk,
}

impl Desks {
    /// Connects, with `pacing` for the desks' shared line budget (`None`: the default).
    fn connect(addr: &str, channels: &[String], pacing: Option<Pacing>) -> Desks {
        let clock = Clock::start();
        let mut config = ConnectionConfig::new("desks", "");
        if let Some(pacing) = pacing {
            config.oa1.pacing = pacing;
            config.oa1.server_pacing = false;
        }
        let mut desks = MultiDesk::new(config, clock.now(), 7).unwrap();
        for channel in channels {
            desks.add_desk(clock.now(), channel, REMOTE).unwrap();
        }
        Desks {
            wire: Wire::connect(addr),
            clock,
            desks,
        }
    }

    /// Bytes in, lines out; returns the events, each with its channel.
    fn turn(&mut self) -> Vec<(String, Event)> {
        let now = self.clock.now();
        let bytes = self.wire.read(now);
        if !bytes.is_empty() {
            self.desks.handle_bytes(now, &bytes);
        }
        assert!(!self.wire.closed, "the server closed the desks' connection");
        let mut events = Vec::new();
        loop {
            match self.desks.poll_output(now) {
                MultiOutput::Transmit(bytes) => self.wire.write(&bytes),
                MultiOutput::Event {
                    channel: Some(channel),
                    event: ConnectionEvent::Oa1(event),
                } => events.push((channel, event)),
                MultiOutput::Timeout(_) => return events,
                _ => {}
            }
        }
    }

    /// Turns until every desk in `channels` is ready (its remote is there), within `secs`.
    fn wait_ready(&mut self, channels: &[String], secs: u64) {
        let end = Instant::now() + Duration::from_secs(secs);
        while !channels
            .iter()
            .all(|c| self.desks.channel_state(c) == Some(ConnectionState::Ready))
        {
            let waiting: Vec<String> = channels
                .iter()
                .filter_map(|c| self.desks.waiting_for(c).map(|w| format!("{c}: {w}")))
                .take(3)
                .collect();
            assert!(Instant::now() < end, "desks not ready: {waiting:?}");
            self.turn();
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn wait_for_log(root: &Path, want: &str, secs: u64) -> String {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let log = std::fs::read_to_string(root.join("rexd.log")).unwrap_or_default();
        if log.contains(want) {
            return log;
        }
        assert!(Instant::now() < end, "{want:?} not in the log:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn fifty_desks_on_one_connection_to_one_rexd_each_get_only_their_own_answers() {
    // ngircd lets a connection into 10 channels by default; this server allows 50. Its flood
    // penalties are off: this test is about routing, the next one about pacing.
    let ngircd = Ngircd::start_with_limits("MaxJoins = 50\nMaxPenaltyTime = 0\n");
    let root = TempDir::new("rexd-multi").unwrap();
    let channels: Vec<String> = (0..50).map(|i| format!("#desk-{i}")).collect();
    // rexd is asked for one more than the server allows.
    let mut asked_for = channels.clone();
    asked_for.push("#desk-50".into());
    let _rexd = start_rexd(
        &ngircd.addr(),
        root.path(),
        &asked_for,
        &["--pacing-interval-ms", "0"],
    );
    // Penalties off: 50 requests at once need not wait for their turns (on a paced connection, a
    // request's timeout runs while it waits for one).
    let mut desks = Desks::connect(&ngircd.addr(), &asked_for, Some(Pacing::UNLIMITED));
    desks.wait_ready(&channels, 30);
    // The one too many is refused by the server, and rexd says which and why.
    let log = wait_for_log(root.path(), "cannot join #desk-50: 405", 10);
    assert!(log.contains("joined #desk-49"), "{log}");

    // Every desk asks at once; each answer names its own channel.
    let start = Instant::now();
    let mut pending = std::collections::BTreeMap::new();
    for channel in &channels {
        let id = desks
            .desks
            .request(
                desks.clock.now(),
                channel,
                &format!("echo 'from {channel}'"),
                None,
            )
            .unwrap();
        pending.insert(id, channel.clone());
    }
    let end = Instant::now() + Duration::from_secs(60);
    while !pending.is_empty() {
        assert!(Instant::now() < end, "{} answers missing", pending.len());
        for (channel, event) in desks.turn() {
            match event {
                Event::Response { id, text, .. } => {
                    let asked_in = pending.remove(&id).expect("an answer to a pending request");
                    assert_eq!(channel, asked_in, "the answer came back in its channel");
                    assert_eq!(text, format!("from {channel}\n"));
                }
                Event::Failed { id, failure } => panic!("{id} in {channel}: {failure:?}"),
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    println!(
        "50 desks on one connection, 50 answers in {:?}",
        start.elapsed()
    );
    let stats = desks.desks.irc_stats();
    println!("desks' connection: {stats:?}");

    // The desks' connection was refused the 51st channel too: its desk says so.
    let waiting = desks.desks.waiting_for("#desk-50").unwrap_or_default();
    println!("#desk-50 waits for: {waiting}");
    assert!(waiting.contains("405"), "{waiting}");
}

#[test]
fn a_short_answer_does_not_wait_for_a_long_one_in_another_channel_on_ngircd() {
    // ngircd's own flood protection, and rexd's default pacing for it.
    let ngircd = Ngircd::start();
    let root = TempDir::new("rexd-multi").unwrap();
    let channels = vec!["#long".to_owned(), "#short".to_owned()];
    let _rexd = start_rexd(&ngircd.addr(), root.path(), &channels, &[]);
    let mut desks = Desks::connect(&ngircd.addr(), &channels, None);
    desks.wait_ready(&channels, 30);
    let long = desks
        .desks
        .request(desks.clock.now(), "#long", "seq 1 4000", None)
        .unwrap();
    // Once the long answer streams, the short question goes.
    let mut short = None;
    let mut frames_when_asked = 0;
    let mut short_answered = false;
    let mut long_text = None;
    let end = Instant::now() + Duration::from_secs(90);
    while long_text.is_none() {
        assert!(Instant::now() < end, "no answer to seq 1 4000");
        let frames = desks.desks.channel_stats("#long").unwrap().frames_in;
        if short.is_none() && frames >= 2 {
            short = Some(
                desks
                    .desks
                    .request(desks.clock.now(), "#short", "echo short", None)
                    .unwrap(),
            );
            frames_when_asked = frames;
        }
        for (channel, event) in desks.turn() {
            match event {
                Event::Response { id, text, .. } if Some(&id) == short.as_ref() => {
                    assert_eq!((channel.as_str(), text.as_str()), ("#short", "short\n"));
                    let frames_now = desks.desks.channel_stats("#long").unwrap().frames_in;
                    println!(
                        "the short answer came while the long one streamed: {frames_when_asked} \
                         of its frames had come when asked, {frames_now} when answered"
                    );
                    short_answered = true;
                }
                Event::Response { id, text, .. } if id == long => long_text = Some(text),
                Event::Failed { id, failure } => panic!("{id} in {channel}: {failure:?}"),
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        short.is_some(),
        "the long answer came in fewer than 2 frames"
    );
    assert!(
        short_answered,
        "the short answer waited for the whole long one"
    );
    let expected: String = (1..=4000).map(|n| format!("{n}\n")).collect();
    assert_eq!(long_text.unwrap(), expected);
    let log = std::fs::read_to_string(root.path().join("rexd.log")).unwrap();
    assert!(!log.contains("Excess Flood"), "{log}");
}
