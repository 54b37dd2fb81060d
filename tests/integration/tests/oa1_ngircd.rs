//! OA1 over a real ngircd: a desk and a remote (the per-connection engines `oa1::Desk` and
//! `oa1::Remote` over their own sockets) exchange RemoteBash-style requests while a third client
//! posts chatter and spoofed `OA1 RES` frames for the very ids in flight.
//! Results must be byte-exact, no relayed line may exceed 512 bytes, and the engines' pacing must
//! keep ngircd from disconnecting us; the same across the link of two linked servers.

use std::collections::HashMap;
use std::time::Duration;

use deskwire::irc::{Message, SessionEvent};
use deskwire::oa1::{
    ConnectionConfig, ConnectionEvent, ConnectionOutput, ConnectionState, Desk, Event, Frame,
    FrameType, Pacing, Remote, TRUNCATION_MARKER,
};
use deskwire_integration::{Clock, IrcConn, Ngircd, NgircdNetwork, Wire};

const CHANNEL: &str = "#desk";

/// `n` bytes of mixed UTF-8: mostly text in 1- to 4-byte characters, with the characters OA1
/// escapes (`\`, LF, CR, TAB) sprinkled in.
fn mixed_utf8(n: usize) -> String {
    let pieces = [
        "lorem ", "ipsum ", "é", "ü", "€", "中文", "𝄞", "🙂", "\n", "\\", "\t", "\r", "dolor ",
    ];
    let mut s = String::with_capacity(n);
    let mut i = 0usize;
    while s.len() < n {
        let p = pieces[i % pieces.len()];
        if s.len() + p.len() <= n {
            s.push_str(p);
        } else {
            s.push('.');
        }
        i = (i * 5 + 7) % 1_000_003;
    }
    s
}

struct World {
    clock: Clock,
    desk_wire: Wire,
    remote_wire: Wire,
    chatter: IrcConn,
    desk: Desk,
    remote: Remote,
    /// (id, seq) of each RES frame → when the remote handed it to its socket.
    sent_at: HashMap<(String, u32), u64>,
    max_lag_ms: u64,
    chatter_next: u64,
    chatter_count: u64,
    spoofed: u64,
    /// Session events of the desk and the remote (kicks must not happen).
    session_events: Vec<SessionEvent>,
}

/// The desk's and the remote's connection configurations.
fn configs(pacing: Pacing) -> (ConnectionConfig, ConnectionConfig) {
    let mut desk = ConnectionConfig::new("desk", CHANNEL);
    desk.oa1.allowed_sender = Some("deskbot".into());
    desk.oa1.adaptive_payload = true;
    desk.oa1.request_timeout_ms = 15 * 60_000;
    desk.oa1.pacing = pacing;
    let mut remote = ConnectionConfig::new("deskbot", CHANNEL);
    remote.oa1.allowed_sender = Some("desk".into());
    remote.oa1.adaptive_payload = true;
    remote.oa1.pacing = pacing;
    (desk, remote)
}

impl World {
    fn new(server: &Ngircd, pacing: Pacing) -> Self {
        Self::across(&server.addr(), &server.addr(), pacing, true)
    }

    /// The desk on `desk_addr`, the remote and the chatter on `remote_addr` (another server of
    /// a linked network, or the same); `compression` on both ends (the engines' default) or off.
    fn across(desk_addr: &str, remote_addr: &str, pacing: Pacing, compression: bool) -> Self {
        let clock = Clock::start();
        let (mut desk_cfg, mut remote_cfg) = configs(pacing);
        desk_cfg.oa1.compression = compression;
        remote_cfg.oa1.compression = compression;
        let mut world = World {
            desk_wire: Wire::connect(desk_addr),
            remote_wire: Wire::connect(remote_addr),
            chatter: IrcConn::connect(remote_addr, "chatter", CHANNEL, clock.now()),
            desk: Desk::new(desk_cfg, clock.now(), 2026).unwrap(),
            remote: Remote::new(remote_cfg, clock.now()).unwrap(),
            clock,
            sent_at: HashMap::new(),
            max_lag_ms: 0,
            chatter_next: 0,
            chatter_count: 0,
            spoofed: 0,
            session_events: Vec::new(),
        };
        let deadline = world.clock.now() + 10_000;
        while !(world.desk.state() == ConnectionState::Ready
            && world.remote.state() == ConnectionState::Ready
            && world.chatter.joined)
        {
            assert!(world.clock.now() < deadline, "clients did not join in time");
            world.step(&mut |_, _, _| {}, &mut Vec::new());
        }
        world
    }

    /// One turn of the loop: read, feed the engines, write what they give, wait a little.
    fn step(&mut self, app: &mut dyn FnMut(&mut Remote, u64, Event), done: &mut Vec<Event>) {
        let now = self.clock.now();
        let seen = self.desk_wire.received.len();
        let bytes = self.desk_wire.read(now);
        for (_, line) in &self.desk_wire.received[seen..] {
            if let Some((id, seq)) = res_frame(line)
                && let Some(sent) = self.sent_at.remove(&(id, seq))
            {
                self.max_lag_ms = self.max_lag_ms.max(now - sent);
            }
        }
        self.desk.handle_bytes(now, &bytes);
        let bytes = self.remote_wire.read(now);
        self.remote.handle_bytes(now, &bytes);
        assert!(
            !self.desk_wire.closed && !self.remote_wire.closed,
            "disconnected"
        );
        for line in self.chatter.read_lines(now) {
            // The chatter answers every request it sees with a spoofed response.
            if let Some(id) = req_final_frame(&line) {
                self.chatter.write_line(&format!(
                    "PRIVMSG {CHANNEL} :OA1 RES {id} 1 0 spoofed answer"
                ));
                self.spoofed += 1;
            }
        }
        if now >= self.chatter_next {
            self.chatter_count += 1;
            let n = self.chatter_count;
            self.chatter.write_line(&format!(
                "PRIVMSG {CHANNEL} :chatter line {n}: is the build green?"
            ));
            self.chatter_next = now + 3_000;
        }
        let mut deadline = now + 50;
        loop {
            match self.desk.poll_output(now) {
                ConnectionOutput::Transmit(bytes) => self.desk_wire.write(&bytes),
                ConnectionOutput::Event(ConnectionEvent::Oa1(e)) => done.push(e),
                ConnectionOutput::Event(ConnectionEvent::Irc(e)) => self.session_event(e),
                ConnectionOutput::Event(_) => {}
                ConnectionOutput::Timeout(t) => {
                    deadline = deadline.min(t);
                    break;
                }
            }
        }
        loop {
            match self.remote.poll_output(now) {
                ConnectionOutput::Transmit(bytes) => {
                    if let Some(key) = std::str::from_utf8(&bytes)
                        .ok()
                        .and_then(|l| l.strip_prefix(&format!("PRIVMSG {CHANNEL} :")))
                        .and_then(|text| Frame::parse(text.trim_end()))
                        .filter(|f| f.kind == FrameType::Res)
                        .map(|f| (f.id.to_owned(), f.seq))
                    {
                        self.sent_at.insert(key, now);
                    }
                    self.remote_wire.write(&bytes);
                }
                ConnectionOutput::Event(ConnectionEvent::Oa1(e)) => app(&mut self.remote, now, e),
                ConnectionOutput::Event(ConnectionEvent::Irc(e)) => self.session_event(e),
                ConnectionOutput::Event(_) => {}
                ConnectionOutput::Timeout(t) => {
                    deadline = deadline.min(t);
                    break;
                }
            }
        }
        deadline = deadline.min(self.chatter.pump_session(now));
        let wait = deadline.saturating_sub(self.clock.now()).clamp(1, 20);
        std::thread::sleep(Duration::from_millis(wait));
    }

    fn session_event(&mut self, event: SessionEvent) {
        if let SessionEvent::Disconnected { reason } = &event {
            panic!("IRC session ended: {reason:?}");
        }
        self.session_events.push(event);
    }

    /// Sends `payload` and runs until its one event arrives.
    fn exchange(&mut self, payload: &str, app: &mut dyn FnMut(&mut Remote, u64, Event)) -> Event {
        let id = self.desk.request(self.clock.now(), payload, None).unwrap();
        let mut done = Vec::new();
        while done.is_empty() {
            self.step(app, &mut done);
        }
        assert_eq!(done.len(), 1, "{done:?}");
        let event = done.remove(0);
        match &event {
            Event::Response { id: got, .. } | Event::Failed { id: got, .. } => assert_eq!(got, &id),
            other => panic!("unexpected {other:?}"),
        }
        event
    }
}

fn privmsg_text(line: &[u8]) -> Option<String> {
    let msg = Message::parse(line).ok()?;
    if !msg.is("PRIVMSG") {
        return None;
    }
    msg.trailing().map(str::to_owned)
}

fn res_frame(line: &[u8]) -> Option<(String, u32)> {
    let text = privmsg_text(line)?;
    let f = Frame::parse(&text)?;
    (f.kind == FrameType::Res).then(|| (f.id.to_owned(), f.seq))
}

fn req_final_frame(line: &[u8]) -> Option<String> {
    let msg = Message::parse(line).ok()?;
    if msg.source_nick() != Some("desk") {
        return None;
    }
    let text = msg.trailing()?;
    let f = Frame::parse(text)?;
    (f.kind == FrameType::Req && !f.more).then(|| f.id.to_owned())
}

/// The remote answers "N" with N bytes of mixed UTF-8, streamed in pieces of up to 4 KiB.
fn sized_answer(server: &mut Remote, now: u64, event: Event) {
    if let Event::Request { id, payload, .. } = event {
        let text = match payload.parse::<usize>() {
            Ok(n) => mixed_utf8(n),
            Err(_) => payload, // echo
        };
        let mut rest = text.as_str();
        while !rest.is_empty() {
            let mut cut = rest.len().min(4096);
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            server.send(now, &id, &rest[..cut]).unwrap();
            rest = &rest[cut..];
        }
        server.finish(now, &id).unwrap();
    }
}

fn expect_exact(world: &mut World, size: usize) {
    match world.exchange(&size.to_string(), &mut sized_answer) {
        Event::Response {
            text, truncated, ..
        } => {
            assert!(!truncated, "size {size}");
            if text != mixed_utf8(size) {
                let want = mixed_utf8(size);
                let at = text.bytes().zip(want.bytes()).position(|(a, b)| a != b);
                panic!(
                    "size {size}: got {} bytes, first difference at {at:?}",
                    text.len()
                );
            }
        }
        other => panic!("size {size}: {other:?}"),
    }
}

/// Checks what every run must show, and prints what it measured.
fn check_and_report(world: &World, label: &str) {
    let (c, s) = (world.desk.stats().oa1, world.remote.stats().oa1);
    eprintln!(
        "{label}: {} ms, desk frames in {} out {}, remote frames in {} out {}, desk ignored {} \
         (disallowed {}), spoofed {} chatter {}, longest line desk {} remote {}, max RES lag {} ms",
        world.clock.now(),
        c.frames_in,
        c.frames_out,
        s.frames_in,
        s.frames_out,
        c.ignored,
        c.disallowed_sender,
        world.spoofed,
        world.chatter_count,
        world.desk_wire.longest_line,
        world.remote_wire.longest_line,
        world.max_lag_ms,
    );
    // Every spoofed frame came from a disallowed sender and was ignored.
    assert!(world.spoofed >= 1);
    assert!(c.disallowed_sender >= world.spoofed);
    // No relayed line over 512 bytes, and none cut by the server.
    for wire in [&world.desk_wire, &world.remote_wire] {
        assert!(wire.longest_line <= 512, "{}", wire.longest_line);
        assert!(!wire.received.iter().any(|(_, l)| l.ends_with(b"[CUT]")));
    }
    // Nothing lost on the way: every RES frame the remote sent reached the desk.
    assert!(
        world.sent_at.is_empty(),
        "{} frames never arrived",
        world.sent_at.len()
    );
    assert_eq!(c.bytes_buffered, 0);
    assert_eq!(s.bytes_buffered, 0);
    // Nobody was disconnected (the loop panics on a disconnect) or kicked.
    for events in [&world.session_events, &world.chatter.events] {
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, SessionEvent::Kicked { .. }))
        );
    }
}

/// The small and boundary sizes, one that needs several frames, and a 2,000-byte echo, each
/// byte-exact.
fn small_and_boundary_exchanges(world: &mut World) {
    for size in [0usize, 1, 239, 240, 241, 10 * 1024] {
        expect_exact(world, size);
    }
    let request = mixed_utf8(2_000);
    match world.exchange(&request, &mut sized_answer) {
        Event::Response { text, .. } => assert_eq!(text, request),
        other => panic!("echo: {other:?}"),
    }
}

/// With ngircd's flood protection on and the engines' default pacing (burst 3, then one line a
/// second, measured by `tests/pacing/measure_ngircd.py`): the small and boundary sizes, and a
/// request that needs several frames. Prints the largest delay between the remote writing a
/// frame and the desk reading it; a server that throttled us would show seconds here.
#[test]
fn remote_bash_exchanges_over_ngircd_with_default_pacing() {
    let ircd = Ngircd::start();
    let mut world = World::new(&ircd, deskwire::oa1::DEFAULT_PACING);
    small_and_boundary_exchanges(&mut world);
    check_and_report(&world, "ngircd, default pacing");
}

/// The large transfers, through an ngircd with penalties off so the test takes seconds rather
/// than minutes: 64 KiB exact, and 128 KiB + 1 byte cut at the cap with the marker.
#[test]
fn large_responses_over_ngircd() {
    let ircd = Ngircd::start_without_penalties();
    let mut world = World::new(&ircd, Pacing::steady(20, 10));
    expect_exact(&mut world, 64 * 1024);
    let size = 128 * 1024 + 1;
    match world.exchange(&size.to_string(), &mut sized_answer) {
        Event::Response {
            text, truncated, ..
        } => {
            assert!(truncated);
            let kept = text.strip_suffix(TRUNCATION_MARKER).expect("marker");
            assert!(mixed_utf8(size).starts_with(kept));
            assert!(kept.len() > 128 * 1024 - 4 && kept.len() <= 128 * 1024);
        }
        other => panic!("128 KiB + 1: {other:?}"),
    }
    check_and_report(&world, "ngircd, no penalties");
}

/// The same exchanges with the desk on one server and the remote (and the chatter with its
/// spoofed frames) on the other of a linked pair: byte-exact across the link, default pacing,
/// uncompressed (the frames a spec-only peer reads).
#[test]
fn remote_bash_exchanges_across_a_linked_network() {
    let network = NgircdNetwork::start(2);
    let mut world = World::across(
        &network.addr(0),
        &network.addr(1),
        deskwire::oa1::DEFAULT_PACING,
        false,
    );
    small_and_boundary_exchanges(&mut world);
    check_and_report(&world, "linked ngircd, default pacing");
}

/// 64 KiB compressed (`REQZ`/`RESZ`) across the link, penalties off.
#[test]
fn compressed_large_responses_across_a_linked_network() {
    let network = NgircdNetwork::start_with_limits(2, "MaxPenaltyTime = 0\n");
    let mut world = World::across(
        &network.addr(0),
        &network.addr(1),
        Pacing::steady(20, 10),
        true,
    );
    expect_exact(&mut world, 64 * 1024);
    let (c, s) = (world.desk.stats().oa1, world.remote.stats().oa1);
    assert!(
        s.frames_out * 400 < 64 * 1024,
        "{} frames: not compressed",
        s.frames_out
    );
    assert!(c.frames_in > 0);
    check_and_report(&world, "linked ngircd, compressed, no penalties");
}

#[test]
fn a_spec_only_desk_reads_a_deskwire_answer_through_ngircd() {
    let ircd = Ngircd::start_without_penalties();
    let clock = Clock::start();
    let mut config = ConnectionConfig::new("deskbot", CHANNEL);
    config.oa1.pacing = Pacing::UNLIMITED;
    let mut remote_wire = Wire::connect(&ircd.addr());
    let mut remote = Remote::new(config, clock.now()).unwrap();
    // The spec-only desk: a bare IRC connection that sends one REQ and decodes what comes back
    // with the spec's four escapes.
    let mut desk = IrcConn::connect(&ircd.addr(), "specdesk", CHANNEL, clock.now());
    // Frames cut at spaces, a NUL, and spaces at the very end (ngircd trims those, as it would
    // a spec-only sender's).
    let answer = format!("nul:\0:end\n{}last  ", "word ".repeat(300));
    let give_up = clock.now() + 20_000;
    let mut asked = false;
    let mut text = String::new();
    loop {
        assert!(clock.now() < give_up, "no whole answer: {text:?}");
        let now = clock.now();
        let bytes = remote_wire.read(now);
        remote.handle_bytes(now, &bytes);
        loop {
            match remote.poll_output(now) {
                ConnectionOutput::Transmit(b) => remote_wire.write(&b),
                ConnectionOutput::Event(ConnectionEvent::Oa1(Event::Request { id, .. })) => {
                    remote.respond(now, &id, &answer).unwrap()
                }
                ConnectionOutput::Event(_) => {}
                ConnectionOutput::Timeout(_) => break,
            }
        }
        let mut last = false;
        for line in desk.read_lines(now) {
            let Some(frame) = privmsg_text(&line) else {
                continue;
            };
            let Some(rest) = frame.strip_prefix("OA1 RES s1 ") else {
                continue;
            };
            let [_seq, more, payload] = rest.splitn(3, ' ').collect::<Vec<_>>()[..] else {
                panic!("{frame}")
            };
            // ngircd trimmed the line: an inner frame must not have ended with a space.
            text.push_str(&deskwire::oa1::escape::unescape_v40(payload));
            last |= more == "0";
        }
        if last {
            break;
        }
        desk.pump_session(now);
        if desk.joined && remote.state() == ConnectionState::Ready && !asked {
            desk.write_line(&format!("PRIVMSG {CHANNEL} :OA1 REQ s1 1 0 cmd"));
            asked = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(text, answer.replace('\0', "\u{FFFD}").trim_end());
}

/// The join orders over a real server: each request completes without waiting for any idle
/// deadline, whatever joined first.
mod join_orders {
    use super::*;

    struct End<E> {
        wire: Wire,
        engine: E,
    }

    fn pump_desk(desk: &mut End<Desk>, now: u64, done: &mut Vec<Event>) -> u64 {
        let bytes = desk.wire.read(now);
        desk.engine.handle_bytes(now, &bytes);
        loop {
            match desk.engine.poll_output(now) {
                ConnectionOutput::Transmit(b) => desk.wire.write(&b),
                ConnectionOutput::Event(ConnectionEvent::Oa1(e)) => done.push(e),
                ConnectionOutput::Event(_) => {}
                ConnectionOutput::Timeout(t) => return t,
            }
        }
    }

    fn pump_remote(remote: &mut End<Remote>, now: u64) -> u64 {
        let bytes = remote.wire.read(now);
        remote.engine.handle_bytes(now, &bytes);
        loop {
            match remote.engine.poll_output(now) {
                ConnectionOutput::Transmit(b) => remote.wire.write(&b),
                ConnectionOutput::Event(ConnectionEvent::Oa1(Event::Request {
                    id,
                    payload,
                    ..
                })) => remote
                    .engine
                    .respond(now, &id, &format!("echo {payload}"))
                    .unwrap(),
                ConnectionOutput::Event(_) => {}
                ConnectionOutput::Timeout(t) => return t,
            }
        }
    }

    /// Runs until the desk has its answer; every wait is the engines' own deadline (capped at
    /// 20 ms only so both sockets are read). Once the desk is ready, the longest deadline it
    /// asks to wait for is the request timeout (`timeout_ms` from the moment the request could
    /// leave), never an idle deadline.
    fn run(
        clock: &Clock,
        desk: &mut End<Desk>,
        remote: &mut End<Remote>,
        timeout_ms: u64,
    ) -> Event {
        let mut done = Vec::new();
        let give_up = clock.now() + 20_000;
        let mut ready_since = None;
        while done.is_empty() {
            assert!(
                clock.now() < give_up,
                "no answer: {:?}",
                desk.engine.state()
            );
            let now = clock.now();
            let desk_deadline = pump_desk(desk, now, &mut done);
            if desk.engine.state() == ConnectionState::Ready && done.is_empty() {
                let since = *ready_since.get_or_insert(now);
                assert!(
                    desk_deadline <= since + timeout_ms,
                    "the desk waits for {desk_deadline}, past its request timeout"
                );
            }
            let remote_deadline = pump_remote(remote, now);
            let wait = desk_deadline
                .min(remote_deadline)
                .saturating_sub(clock.now());
            std::thread::sleep(Duration::from_millis(wait.clamp(1, 20)));
        }
        done.remove(0)
    }

    fn answer_is(event: Event, id: &str, payload: &str) {
        assert_eq!(
            event,
            Event::Response {
                id: id.to_owned(),
                text: format!("echo {payload}"),
                truncated: false
            }
        );
    }

    fn bring_up(clock: &Clock, remote: &mut End<Remote>) {
        let give_up = clock.now() + 10_000;
        while remote.engine.state() != ConnectionState::Ready {
            assert!(clock.now() < give_up, "remote not ready");
            let deadline = pump_remote(remote, clock.now());
            let wait = deadline.saturating_sub(clock.now()).clamp(1, 20);
            std::thread::sleep(Duration::from_millis(wait));
        }
    }

    #[test]
    fn a_request_made_before_registration_to_a_remote_already_there() {
        let ircd = Ngircd::start();
        let clock = Clock::start();
        let (desk_cfg, remote_cfg) = configs(deskwire::oa1::DEFAULT_PACING);
        let mut remote = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Remote::new(remote_cfg, clock.now()).unwrap(),
        };
        bring_up(&clock, &mut remote);
        let mut desk = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Desk::new(desk_cfg, clock.now(), 1).unwrap(),
        };
        let id = desk
            .engine
            .request(clock.now(), "first", Some(30_000))
            .unwrap();
        answer_is(run(&clock, &mut desk, &mut remote, 30_000), &id, "first");
    }

    #[test]
    fn a_desk_that_joins_after_the_remote() {
        let ircd = Ngircd::start();
        let clock = Clock::start();
        let (desk_cfg, remote_cfg) = configs(deskwire::oa1::DEFAULT_PACING);
        let mut remote = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Remote::new(remote_cfg, clock.now()).unwrap(),
        };
        bring_up(&clock, &mut remote);
        let mut desk = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Desk::new(desk_cfg, clock.now(), 2).unwrap(),
        };
        let give_up = clock.now() + 10_000;
        while desk.engine.state() != ConnectionState::Ready {
            assert!(clock.now() < give_up);
            pump_desk(&mut desk, clock.now(), &mut Vec::new());
            pump_remote(&mut remote, clock.now());
            std::thread::sleep(Duration::from_millis(5));
        }
        let id = desk
            .engine
            .request(clock.now(), "second", Some(30_000))
            .unwrap();
        answer_is(run(&clock, &mut desk, &mut remote, 30_000), &id, "second");
    }

    #[test]
    fn a_remote_that_joins_after_the_desk() {
        let ircd = Ngircd::start();
        let clock = Clock::start();
        let (desk_cfg, remote_cfg) = configs(deskwire::oa1::DEFAULT_PACING);
        let mut desk = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Desk::new(desk_cfg, clock.now(), 3).unwrap(),
        };
        let id = desk
            .engine
            .request(clock.now(), "third", Some(30_000))
            .unwrap();
        let give_up = clock.now() + 10_000;
        while desk.engine.state() != ConnectionState::WaitingForPeer {
            assert!(clock.now() < give_up, "{:?}", desk.engine.state());
            pump_desk(&mut desk, clock.now(), &mut Vec::new());
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut remote = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Remote::new(remote_cfg, clock.now()).unwrap(),
        };
        answer_is(run(&clock, &mut desk, &mut remote, 30_000), &id, "third");
    }

    /// A desk back before the server has seen its previous connection go (`close()` then an
    /// immediate `connect()`) registers as `desk_`, which the remote would ignore: it holds the
    /// request, takes `desk` back once the old connection is gone, and is answered.
    #[test]
    fn a_desk_registered_under_a_fallback_takes_its_nick_back() {
        let ircd = Ngircd::start();
        let clock = Clock::start();
        let (desk_cfg, remote_cfg) = configs(deskwire::oa1::DEFAULT_PACING);
        let mut remote = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Remote::new(remote_cfg, clock.now()).unwrap(),
        };
        bring_up(&clock, &mut remote);
        // The previous connection, still holding the nick.
        let mut old = IrcConn::connect(&ircd.addr(), "desk", CHANNEL, clock.now());
        let give_up = clock.now() + 10_000;
        while !old.joined {
            assert!(clock.now() < give_up);
            old.read_lines(clock.now());
            old.pump_session(clock.now());
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut desk = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Desk::new(desk_cfg, clock.now(), 6).unwrap(),
        };
        let id = desk
            .engine
            .request(clock.now(), "fifth", Some(30_000))
            .unwrap();
        while desk.engine.state() != ConnectionState::WaitingForNick {
            assert!(clock.now() < give_up, "{:?}", desk.engine.state());
            pump_desk(&mut desk, clock.now(), &mut Vec::new());
            pump_remote(&mut remote, clock.now());
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(desk.engine.session().identity().nick(), "desk_");
        let gone_at = clock.now();
        drop(old);
        answer_is(run(&clock, &mut desk, &mut remote, 30_000), &id, "fifth");
        assert_eq!(desk.engine.session().identity().nick(), "desk");
        eprintln!(
            "the nick was back and the request answered {} ms after the old connection closed",
            clock.now() - gone_at
        );
    }

    /// Pumps the desk until it reports an OA1 event (the one request's end).
    fn until_desk_event(clock: &Clock, desk: &mut End<Desk>, secs: u64) -> Event {
        let mut done = Vec::new();
        let give_up = clock.now() + secs * 1000;
        while done.is_empty() {
            assert!(clock.now() < give_up, "no event: {:?}", desk.engine.state());
            pump_desk(desk, clock.now(), &mut done);
            std::thread::sleep(Duration::from_millis(5));
        }
        done.remove(0)
    }

    fn failure(event: Event) -> (String, String) {
        match event {
            Event::Failed { failure, .. } => (failure.code().to_owned(), failure.message()),
            other => panic!("not a failure: {other:?}"),
        }
    }

    #[test]
    fn a_channel_the_server_refuses_fails_the_request_with_its_words() {
        let ircd = Ngircd::start_with_sections("[Channel]\nName = #locked\nModes = i\n");
        let clock = Clock::start();
        let config = ConnectionConfig::new("desk", "#locked").with_peer("rexd");
        let mut desk = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Desk::new(config, clock.now(), 4).unwrap(),
        };
        desk.engine.request(clock.now(), "ls", None).unwrap();
        let (code, message) = failure(until_desk_event(&clock, &mut desk, 10));
        assert_eq!(code, "join_failed");
        assert!(
            message.starts_with("the server refused to let us into #locked: 473 "),
            "{message}"
        );
    }

    #[test]
    fn a_desk_whose_remote_never_comes_says_who_is_there() {
        let ircd = Ngircd::start();
        let clock = Clock::start();
        let mut chatter = IrcConn::connect(&ircd.addr(), "chatter", CHANNEL, clock.now());
        let mut config = ConnectionConfig::new("desk", CHANNEL).with_peer("rexd");
        config.oa1.ready_timeout_ms = 2_000;
        let mut desk = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Desk::new(config, clock.now(), 5).unwrap(),
        };
        let give_up = clock.now() + 10_000;
        while !chatter.joined {
            assert!(clock.now() < give_up);
            chatter.read_lines(clock.now());
            chatter.pump_session(clock.now());
            std::thread::sleep(Duration::from_millis(5));
        }
        desk.engine.request(clock.now(), "ls", None).unwrap();
        let (code, message) = failure(until_desk_event(&clock, &mut desk, 10));
        assert_eq!(
            (code.as_str(), message.as_str()),
            (
                "not_ready",
                "not ready after 2 s: waiting for remote `rexd` in #desk; members: chatter"
            )
        );
    }

    #[test]
    fn a_remote_that_quits_mid_request_fails_it_peer_left() {
        let ircd = Ngircd::start();
        let clock = Clock::start();
        let (desk_cfg, mut remote_cfg) = configs(deskwire::oa1::DEFAULT_PACING);
        remote_cfg.oa1.request_timeout_ms = 60_000;
        let mut remote = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Remote::new(remote_cfg, clock.now()).unwrap(),
        };
        bring_up(&clock, &mut remote);
        let mut desk = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Desk::new(desk_cfg, clock.now(), 6).unwrap(),
        };
        desk.engine.request(clock.now(), "sleep 60", None).unwrap();
        // The remote takes the request and, instead of answering, quits.
        let give_up = clock.now() + 10_000;
        while remote.engine.active() == 0 {
            assert!(clock.now() < give_up, "the request never arrived");
            pump_desk(&mut desk, clock.now(), &mut Vec::new());
            let bytes = remote.wire.read(clock.now());
            remote.engine.handle_bytes(clock.now(), &bytes);
            loop {
                match remote.engine.poll_output(clock.now()) {
                    ConnectionOutput::Transmit(b) => remote.wire.write(&b),
                    ConnectionOutput::Event(_) => {}
                    ConnectionOutput::Timeout(_) => break,
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        remote.engine.quit(clock.now(), "restarting");
        loop {
            match remote.engine.poll_output(clock.now()) {
                ConnectionOutput::Transmit(b) => remote.wire.write(&b),
                ConnectionOutput::Event(_) => {}
                ConnectionOutput::Timeout(_) => break,
            }
        }
        let (code, message) = failure(until_desk_event(&clock, &mut desk, 10));
        assert_eq!(code, "peer_left");
        assert_eq!(
            message,
            // ngircd relays the quit message in quotes.
            "remote `deskbot` left #desk (quit: \"restarting\") and was not back within 2 s"
        );
    }

    #[test]
    fn a_second_desk_with_a_taken_nick_is_told_so() {
        let ircd = Ngircd::start();
        let clock = Clock::start();
        let (desk_cfg, _) = configs(deskwire::oa1::DEFAULT_PACING);
        let mut first = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Desk::new(desk_cfg.clone(), clock.now(), 7).unwrap(),
        };
        let give_up = clock.now() + 10_000;
        while first.engine.state() == ConnectionState::Registering {
            assert!(clock.now() < give_up);
            pump_desk(&mut first, clock.now(), &mut Vec::new());
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut second = End {
            wire: Wire::connect(&ircd.addr()),
            engine: Desk::new(desk_cfg, clock.now(), 8).unwrap(),
        };
        let mut events = Vec::new();
        while second.engine.state() == ConnectionState::Registering {
            assert!(clock.now() < give_up);
            let bytes = second.wire.read(clock.now());
            second.engine.handle_bytes(clock.now(), &bytes);
            loop {
                match second.engine.poll_output(clock.now()) {
                    ConnectionOutput::Transmit(b) => second.wire.write(&b),
                    ConnectionOutput::Event(e) => events.push(e),
                    ConnectionOutput::Timeout(_) => break,
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            events.contains(&ConnectionEvent::Irc(SessionEvent::NickRefused {
                nick: "desk".into(),
                numeric: "433".into(),
                text: "Nickname already in use".into(),
                next: Some("desk_".into()),
            })),
            "{events:?}"
        );
        assert_eq!(second.engine.session().identity().nick(), "desk_");
    }
}
