//! `rexd --irc --device-code` against a real ngircd, with desks that behave as the VR Offices
//! game's do: they join `#oa_desk_<desk>_dev_<code>_<6 hex>` after `001` and speak plain OA1
//! (the spec's escapes, 240-byte payloads, no pacing), every frame it sends stripped of the
//! spaces at its edges, as the game's link does.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deskwire::oa1::{Client, Config, Event, Output, Pacing};
use deskwire_integration::{Clock, IrcConn, Ngircd, TempDir};

const CODE: &str = "ABCD2345";
/// The daemon's nick from the code: `oa` and the code in lower case, cut to 9.
const NICK: &str = "oaabcd234";

struct Rexd(Child);

impl Drop for Rexd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `rexd --irc --device-code [CODE]` with its data under `data`, listing every 5 s, its log
/// to `data/rexd.log` and what it prints to `data/rexd.out`.
fn start_rexd(addr: &str, data: &Path, code: Option<&str>, extra: &[&str]) -> Rexd {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rexd"));
    command
        .args(["--irc", addr, "--device-code"])
        .args(code)
        .args([
            "--list-interval-s",
            "5",
            "--unauthenticated",
            "--log-level",
            "info",
        ])
        .args(["--root", data.to_str().unwrap()])
        .args(extra)
        .env("XDG_DATA_HOME", data.join("xdg"))
        .env_remove("REXD_DEVICE_CODE")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(data.join("rexd.out")).unwrap())
        .stderr(std::fs::File::create(data.join("rexd.log")).unwrap());
    Rexd(command.spawn().expect("spawn rexd --irc --device-code"))
}

/// Waits until `file` holds `want`; returns the file's text.
fn wait_for(file: &Path, want: &str, secs: u64) -> String {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.contains(want) {
            return text;
        }
        assert!(
            Instant::now() < end,
            "{want:?} not in {}:\n{text}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A desk as the game's: plain OA1 in its bound channel.
struct GameDesk {
    clock: Clock,
    conn: IrcConn,
    client: Client,
    channel: String,
    remote_joined: bool,
    /// The nick rexd joined under, when it was a fallback.
    joined_as: Option<String>,
}

impl GameDesk {
    fn join(addr: &str, nick: &str, channel: &str) -> GameDesk {
        let clock = Clock::start();
        let mut config = Config::new(channel, nick);
        config.allowed_sender = Some(NICK.into());
        config.pacing = Pacing::UNLIMITED;
        let seed = nick
            .bytes()
            .fold(3u64, |h, b| h.wrapping_mul(31) + u64::from(b));
        GameDesk {
            conn: IrcConn::connect(addr, nick, channel, clock.now()),
            client: Client::new(config, seed),
            channel: channel.to_owned(),
            clock,
            remote_joined: false,
            joined_as: None,
        }
    }

    /// One turn: lines in (the remote's JOIN noted; frames stripped at their edges), the
    /// session and the client pumped. Returns the client's events.
    fn turn(&mut self) -> Vec<Event> {
        let now = self.clock.now();
        for line in self.conn.read_lines(now) {
            let text = String::from_utf8_lossy(&line).into_owned();
            let words: Vec<&str> = text.split(' ').collect();
            // `:oaabcd234!~u@h JOIN :#channel` (ngircd writes the channel as a trailing).
            let join = words.get(1) == Some(&"JOIN")
                && words.get(2).map(|c| c.trim_start_matches(':')) == Some(self.channel.as_str());
            let names = words.get(1) == Some(&"353");
            let source = words[0]
                .trim_start_matches(':')
                .split('!')
                .next()
                .unwrap_or("");
            // rexd may join under a fallback nick (its old connection still held the nick
            // when it came back) and take its nick back later.
            let renamed = words.get(1) == Some(&"NICK")
                && words.get(2).map(|n| n.trim_start_matches(':')) == Some(NICK)
                && self.joined_as.as_deref() == Some(source);
            if join && source.starts_with(&NICK[..NICK.len() - 1]) {
                self.joined_as = Some(source.to_owned());
            }
            if (source == NICK && join)
                || renamed
                || (names
                    && words
                        .iter()
                        .any(|w| w.trim_start_matches([':', '@', '+']) == NICK))
            {
                self.remote_joined = true;
            }
            self.client.handle_line(now, &line);
        }
        self.conn.pump_session(now);
        let mut events = Vec::new();
        loop {
            match self.client.poll_output(now) {
                Output::Transmit(line) => {
                    // The game's link strips the spaces at the edges of each frame it sends.
                    let stripped = match line.split_once(" :") {
                        Some((head, frame)) => format!("{head} :{}", frame.trim()),
                        None => line,
                    };
                    self.conn.write_line(&stripped)
                }
                Output::Event(event) => events.push(event),
                Output::Timeout(_) => return events,
            }
        }
    }

    /// Turns until the remote is in the channel; returns how long that took.
    fn wait_for_remote(&mut self, secs: u64) -> Duration {
        let start = Instant::now();
        while !(self.conn.joined && self.remote_joined) {
            assert!(
                start.elapsed() < Duration::from_secs(secs),
                "rexd never joined {}",
                self.channel
            );
            self.turn();
            std::thread::sleep(Duration::from_millis(10));
        }
        start.elapsed()
    }

    /// Runs `command` and returns the answer's text.
    fn ask(&mut self, command: &str, secs: u64) -> String {
        let id = self
            .client
            .request(self.clock.now(), command, None)
            .unwrap();
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            assert!(Instant::now() < end, "no answer to {command:?}");
            for event in self.turn() {
                match event {
                    Event::Response { id: got, text, .. } if got == id => return text,
                    Event::Failed { id: got, failure } if got == id => panic!("{failure:?}"),
                    _ => {}
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn desks_bound_to_the_code_are_found_by_list_and_served_but_not_a_look_alike() {
    let ngircd = Ngircd::start();
    let data = TempDir::new("rexd-device-code").unwrap();
    let addr = ngircd.addr();
    // The desks are there first, as a player binds a desk before (or after) rexd starts.
    let mut one = GameDesk::join(&addr, "desk1", "#oa_desk_desk_1_dev_abcd2345_1a2b3c");
    let mut two = GameDesk::join(&addr, "desk2", "#oa_desk_desk_2_dev_abcd2345_99ffee");
    let mut look_alike = GameDesk::join(&addr, "desk3", "#oa_desk_desk_3_dev_abcd2345x_1a2b3c");
    for desk in [&mut one, &mut two, &mut look_alike] {
        while !desk.conn.joined {
            desk.turn();
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let _rexd = start_rexd(&addr, data.path(), Some("abcd-2345"), &[]);
    let printed = wait_for(&data.path().join("rexd.out"), "bind a desk", 10);
    assert!(
        printed.contains(&format!("rexd device code: {CODE}")),
        "{printed}"
    );
    assert!(printed.contains(&format!("as {NICK}")), "{printed}");
    assert!(printed.contains("commands run for real"), "{printed}");
    let found_after = one.wait_for_remote(15);
    two.wait_for_remote(15);
    println!("rexd joined the first bound desk {found_after:?} after it started");
    assert_eq!(one.ask("echo one", 20), "one\n");
    // Inner spaces arrive; spaces that end the whole answer are trimmed by the server toward
    // a spec-only desk (docs/oa1.md, "Trailing spaces").
    assert_eq!(two.ask("printf ' a  b  '", 20), " a  b");
    // A multi-frame answer, whole, paced for ngircd.
    let start = Instant::now();
    let expected: String = (1..=2000).map(|n| format!("{n}\n")).collect();
    assert_eq!(two.ask("seq 1 2000", 30), expected);
    // The game's desk gives up after 10 s without a frame: how far apart rexd's came.
    let frames: Vec<u64> = two
        .conn
        .received
        .iter()
        .filter(|(_, line)| String::from_utf8_lossy(line).contains(" :OA1 "))
        .map(|(at, _)| *at)
        .collect();
    let widest_gap = frames.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    println!(
        "seq 1 2000 ({} bytes) in {:?}; {} frames, at most {widest_gap} ms apart",
        expected.len(),
        start.elapsed(),
        frames.len()
    );
    // A second listing has passed by now: the look-alike is still without rexd.
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        look_alike.turn();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !look_alike.remote_joined,
        "rexd joined a channel of another code"
    );
    let log = std::fs::read_to_string(data.path().join("rexd.log")).unwrap();
    assert!(
        log.contains("found #oa_desk_desk_1_dev_abcd2345_1a2b3c"),
        "{log}"
    );
    assert!(!log.contains("abcd2345x"), "{log}");
}

#[test]
fn the_code_is_kept_across_restarts_and_a_bad_one_is_refused() {
    let ngircd = Ngircd::start();
    let data = TempDir::new("rexd-device-code").unwrap();
    let addr = ngircd.addr();
    let first = {
        let _rexd = start_rexd(&addr, data.path(), None, &[]);
        wait_for(&data.path().join("rexd.out"), "bind a desk", 10)
    };
    let code = first
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("rexd device code: "))
        .and_then(|l| l.strip_suffix(" (new)"))
        .unwrap_or_else(|| panic!("no new code printed:\n{first}"))
        .to_owned();
    assert_eq!(code.len(), 10);
    assert!(
        code.bytes()
            .all(|b| b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".contains(&b)),
        "{code}"
    );
    let stored = data.path().join("xdg/rexd/default/device_code");
    assert_eq!(
        std::fs::read_to_string(&stored).unwrap(),
        format!("{code}\n")
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&stored).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let again = {
        let _rexd = start_rexd(&addr, data.path(), None, &[]);
        wait_for(&data.path().join("rexd.out"), "bind a desk", 10)
    };
    assert!(
        again.starts_with(&format!("rexd device code: {code}\n")),
        "{again}"
    );
    // Another instance keeps another code.
    let other = {
        let _rexd = start_rexd(&addr, data.path(), None, &["--instance", "lab"]);
        wait_for(&data.path().join("rexd.out"), "bind a desk", 10)
    };
    assert!(!other.contains(&code), "{other}");
    assert!(other.contains("instance: lab"), "{other}");

    let refused = Command::new(env!("CARGO_BIN_EXE_rexd"))
        .args(["--irc", &addr, "--device-code", "ab-c", "--unauthenticated"])
        .env("XDG_DATA_HOME", data.path().join("xdg"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("6 to 16 letters and digits"), "{stderr}");
    // The stored code is untouched by the refusal.
    assert_eq!(
        std::fs::read_to_string(&stored).unwrap(),
        format!("{code}\n")
    );
}

#[test]
fn a_channel_list_hides_is_a_warning_and_joined_by_name_instead() {
    let ngircd = Ngircd::start();
    let data = TempDir::new("rexd-device-code").unwrap();
    let addr = ngircd.addr();
    let channel = "#oa_desk_desk_1_dev_abcd2345_1a2b3c";
    let mut desk = GameDesk::join(&addr, "desk1", channel);
    while !desk.conn.joined {
        desk.turn();
        std::thread::sleep(Duration::from_millis(10));
    }
    // A secret channel: ngircd leaves it out of LIST for whoever is not in it.
    desk.conn.write_line(&format!("MODE {channel} +s"));
    std::thread::sleep(Duration::from_millis(300));
    {
        let _rexd = start_rexd(&addr, data.path(), Some(CODE), &[]);
        let log = wait_for(&data.path().join("rexd.log"), "shows no channel", 15);
        assert!(log.contains("--channel"), "{log}");
    }
    // Given by name, the same channel is served.
    let _rexd = start_rexd(&addr, data.path(), Some(CODE), &["--channel", channel]);
    wait_for(
        &data.path().join("rexd.log"),
        &format!("joined {channel}"),
        15,
    );
    desk.wait_for_remote(15);
    assert_eq!(desk.ask("echo named", 20), "named\n");
}
