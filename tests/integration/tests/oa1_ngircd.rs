//! OA1 over a real ngircd: a desk client and a remote server exchange RemoteBash-style requests
//! while a third client posts chatter and spoofed `OA1 RES` frames for the very ids in flight.
//! Results must be byte-exact, no relayed line may exceed 512 bytes, and the engines' pacing must
//! keep ngircd from disconnecting us.

use std::collections::HashMap;
use std::time::Duration;

use deskwire::irc::Message;
use deskwire::oa1::{
    Client, Config, Event, Frame, FrameType, Output, Pacing, Server, TRUNCATION_MARKER,
};
use deskwire_integration::{Clock, IrcConn, Ngircd};

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
    desk: IrcConn,
    remote: IrcConn,
    chatter: IrcConn,
    client: Client,
    server: Server,
    /// (id, seq) of each RES frame → when the remote handed it to its socket.
    sent_at: HashMap<(String, u32), u64>,
    max_lag_ms: u64,
    chatter_next: u64,
    chatter_count: u64,
    spoofed: u64,
}

impl World {
    fn new(server: &Ngircd, pacing: Pacing) -> Self {
        let clock = Clock::start();
        let addr = server.addr();
        let mut desk_cfg = Config::new(CHANNEL, "desk");
        desk_cfg.allowed_sender = Some("deskbot".into());
        desk_cfg.adaptive_payload = true;
        desk_cfg.request_timeout_ms = 15 * 60_000;
        desk_cfg.pacing = pacing;
        let mut remote_cfg = Config::new(CHANNEL, "deskbot");
        remote_cfg.allowed_sender = Some("desk".into());
        remote_cfg.adaptive_payload = true;
        remote_cfg.pacing = pacing;
        let mut world = World {
            desk: IrcConn::connect(&addr, "desk", CHANNEL, clock.now()),
            remote: IrcConn::connect(&addr, "deskbot", CHANNEL, clock.now()),
            chatter: IrcConn::connect(&addr, "chatter", CHANNEL, clock.now()),
            client: Client::new(desk_cfg, 2026),
            server: Server::new(remote_cfg),
            clock,
            sent_at: HashMap::new(),
            max_lag_ms: 0,
            chatter_next: 0,
            chatter_count: 0,
            spoofed: 0,
        };
        let deadline = world.clock.now() + 10_000;
        while !(world.desk.joined && world.remote.joined && world.chatter.joined) {
            assert!(world.clock.now() < deadline, "clients did not join in time");
            world.step(&mut |_, _, _| {}, &mut Vec::new());
        }
        world
    }

    /// One turn of the loop: read, feed the engines, write what they give, wait a little.
    fn step(&mut self, app: &mut dyn FnMut(&mut Server, u64, Event), done: &mut Vec<Event>) {
        let now = self.clock.now();
        for line in self.desk.read_lines(now) {
            if let Some((id, seq)) = res_frame(&line)
                && let Some(sent) = self.sent_at.remove(&(id, seq))
            {
                self.max_lag_ms = self.max_lag_ms.max(now - sent);
            }
            self.client.handle_line(now, &line);
        }
        for line in self.remote.read_lines(now) {
            self.server.handle_line(now, &line);
        }
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
            match self.client.poll_output(now) {
                Output::Transmit(line) => self.desk.write_line(&line),
                Output::Event(e) => done.push(e),
                Output::Timeout(t) => {
                    deadline = deadline.min(t);
                    break;
                }
            }
        }
        loop {
            match self.server.poll_output(now) {
                Output::Transmit(line) => {
                    if let Some(key) = line
                        .strip_prefix(&format!("PRIVMSG {CHANNEL} :"))
                        .and_then(Frame::parse)
                        .filter(|f| f.kind == FrameType::Res)
                        .map(|f| (f.id.to_owned(), f.seq))
                    {
                        self.sent_at.insert(key, now);
                    }
                    self.remote.write_line(&line);
                }
                Output::Event(e) => app(&mut self.server, now, e),
                Output::Timeout(t) => {
                    deadline = deadline.min(t);
                    break;
                }
            }
        }
        for conn in [&mut self.desk, &mut self.remote, &mut self.chatter] {
            deadline = deadline.min(conn.pump_session(now));
        }
        let wait = deadline.saturating_sub(self.clock.now()).clamp(1, 20);
        std::thread::sleep(Duration::from_millis(wait));
    }

    /// Sends `payload` and runs until its one event arrives.
    fn exchange(&mut self, payload: &str, app: &mut dyn FnMut(&mut Server, u64, Event)) -> Event {
        let id = self
            .client
            .request(self.clock.now(), payload, None)
            .unwrap();
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
fn sized_answer(server: &mut Server, now: u64, event: Event) {
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
    let (c, s) = (world.client.stats(), world.server.stats());
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
        world.desk.longest_line,
        world.remote.longest_line,
        world.max_lag_ms,
    );
    // Every spoofed frame came from a disallowed sender and was ignored.
    assert!(world.spoofed >= 1);
    assert!(c.disallowed_sender >= world.spoofed);
    // No relayed line over 512 bytes, and none cut by the server.
    for conn in [&world.desk, &world.remote] {
        assert!(conn.longest_line <= 512, "{}", conn.longest_line);
        assert!(!conn.received.iter().any(|(_, l)| l.ends_with(b"[CUT]")));
    }
    // Nothing lost on the way: every RES frame the remote sent reached the desk.
    assert!(
        world.sent_at.is_empty(),
        "{} frames never arrived",
        world.sent_at.len()
    );
    assert_eq!(c.bytes_buffered, 0);
    assert_eq!(s.bytes_buffered, 0);
    // Nobody was disconnected (pump_session panics on a disconnect) or kicked.
    for conn in [&world.desk, &world.remote, &world.chatter] {
        assert!(
            !conn
                .events
                .iter()
                .any(|e| matches!(e, deskwire::irc::SessionEvent::Kicked { .. }))
        );
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
    for size in [0usize, 1, 239, 240, 241, 10 * 1024] {
        expect_exact(&mut world, size);
    }
    let request = mixed_utf8(2_000);
    match world.exchange(&request, &mut sized_answer) {
        Event::Response { text, .. } => assert_eq!(text, request),
        other => panic!("echo: {other:?}"),
    }
    check_and_report(&world, "ngircd, default pacing");
}

/// The large transfers, through an ngircd with penalties off so the test takes seconds rather
/// than minutes: 64 KiB exact, and 128 KiB + 1 byte cut at the cap with the marker.
#[test]
fn large_responses_over_ngircd() {
    let ircd = Ngircd::start_without_penalties();
    let mut world = World::new(
        &ircd,
        Pacing {
            burst: 20,
            interval_ms: 10,
        },
    );
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
