//! Two OA1 endpoints talking through the in-memory relay, driven by a virtual clock: no sockets,
//! no sleeps, every run the same.

use deskwire::oa1::{Client, Config, Event, Failure, LocalError, Output, Pacing, Server};
use deskwire::sim::Relay;

const CHANNEL: &str = "#desk";
const DESK: &str = "desk";
const BOT: &str = "deskbot";

type App = Box<dyn FnMut(&mut Server, u64, Event)>;
type Tamper = Box<dyn FnMut(String) -> Vec<String>>;

struct Pair {
    now: u64,
    client: Client,
    server: Server,
    relay: Relay,
    app: App,
    /// Applied to every line on its way to the desk (drop, duplicate, reorder).
    to_desk: Tamper,
    events: Vec<(u64, Event)>,
    max_line: usize,
}

fn config(nick: &str, peer: &str) -> Config {
    let mut c = Config::new(CHANNEL, nick);
    c.allowed_sender = Some(peer.to_owned());
    c
}

impl Pair {
    fn new(client_cfg: Config, server_cfg: Config, app: App) -> Self {
        let mut relay = Relay::new(CHANNEL, 7).with_noise(3);
        relay.join(DESK, "desk", "127.0.0.1");
        relay.join(BOT, "bot", "10.11.12.13");
        Pair {
            now: 1_000,
            client: Client::new(client_cfg, 1),
            server: Server::new(server_cfg),
            relay,
            app,
            to_desk: Box::new(|line| vec![line]),
            events: Vec::new(),
            max_line: 0,
        }
    }

    fn default_with(app: App) -> Self {
        Pair::new(config(DESK, BOT), config(BOT, DESK), app)
    }

    /// Runs until nothing happens before `until` (virtual ms from now).
    fn drive_for(&mut self, duration: u64) {
        let until = self.now + duration;
        loop {
            let mut progress = false;
            let client_deadline = loop {
                match self.client.poll_output(self.now) {
                    Output::Transmit(line) => {
                        self.max_line = self.max_line.max(line.len() + 2);
                        self.relay
                            .send(DESK, &line)
                            .expect("relay accepts desk line");
                        progress = true;
                    }
                    Output::Event(e) => {
                        self.events.push((self.now, e));
                        progress = true;
                    }
                    Output::Timeout(t) => break t,
                }
            };
            let server_deadline = loop {
                match self.server.poll_output(self.now) {
                    Output::Transmit(line) => {
                        self.max_line = self.max_line.max(line.len() + 2);
                        self.relay.send(BOT, &line).expect("relay accepts bot line");
                        progress = true;
                    }
                    Output::Event(e) => {
                        (self.app)(&mut self.server, self.now, e);
                        progress = true;
                    }
                    Output::Timeout(t) => break t,
                }
            };
            while let Some(line) = self.relay.recv(DESK) {
                for l in (self.to_desk)(line) {
                    self.client.handle_line(self.now, l.as_bytes());
                }
                progress = true;
            }
            while let Some(line) = self.relay.recv(BOT) {
                self.server.handle_line(self.now, line.as_bytes());
                progress = true;
            }
            if !progress {
                let next = client_deadline.min(server_deadline);
                assert!(
                    next > self.now,
                    "deadline in the past: client {client_deadline} server {server_deadline} now {}",
                    self.now
                );
                if next > until {
                    self.now = until;
                    return;
                }
                self.now = next;
            }
        }
    }

    fn only_event(&mut self) -> Event {
        assert_eq!(self.events.len(), 1, "events: {:?}", self.events);
        self.events.remove(0).1
    }
}

/// Mixed UTF-8 of exactly `n` bytes: ASCII, escapes, 2-, 3- and 4-byte sequences.
fn mixed_utf8(n: usize) -> String {
    // No NUL: toward a peer not known to be deskwire it becomes U+FFFD (oa1_compress.rs).
    let pieces = [
        "a", "\\", "\n", "\t", "\r", "é", "€", "𝄞", " ", "\u{1}", "z",
    ];
    let mut s = String::new();
    let mut i = 0;
    while s.len() < n {
        let p = pieces[i % pieces.len()];
        if s.len() + p.len() <= n {
            s.push_str(p);
        } else {
            s.push('.');
        }
        i = (i * 7 + 3) % 1_000_003;
    }
    s
}

fn echo_app() -> App {
    Box::new(|server, now, event| {
        if let Event::Request { id, payload, .. } = event {
            server.respond(now, &id, &payload).unwrap();
        }
    })
}

/// The server answers a request "N" with N bytes of mixed UTF-8, streamed in 1000-byte pieces.
fn sized_app() -> App {
    Box::new(|server, now, event| {
        if let Event::Request { id, payload, .. } = event {
            let n: usize = payload.parse().unwrap();
            let text = mixed_utf8(n);
            let mut rest = text.as_str();
            while !rest.is_empty() {
                let mut cut = rest.len().min(1000);
                while !rest.is_char_boundary(cut) {
                    cut -= 1;
                }
                server.send(now, &id, &rest[..cut]).unwrap();
                rest = &rest[cut..];
            }
            server.finish(now, &id).unwrap();
        }
    })
}

fn assert_drained(pair: &Pair) {
    assert_eq!(
        pair.client.stats().bytes_buffered,
        0,
        "{:?}",
        pair.client.stats()
    );
    assert_eq!(
        pair.server.stats().bytes_buffered,
        0,
        "{:?}",
        pair.server.stats()
    );
    assert_eq!(pair.client.in_flight(), 0);
    assert_eq!(pair.server.active(), 0);
    assert_eq!(pair.relay.stats().cut_lines, 0);
    assert!(pair.max_line <= 512);
}

#[test]
fn responses_of_every_size_arrive_byte_exact() {
    for size in [0, 1, 239, 240, 241, 10 * 1024, 128 * 1024] {
        let mut pair = Pair::default_with(sized_app());
        let id = pair
            .client
            .request(pair.now, &size.to_string(), Some(3_600_000))
            .unwrap();
        pair.drive_for(3_600_000);
        match pair.only_event() {
            Event::Response {
                id: got,
                text,
                truncated,
            } => {
                assert_eq!(got, id);
                assert!(!truncated);
                assert_eq!(text, mixed_utf8(size), "size {size}");
            }
            other => panic!("size {size}: {other:?}"),
        }
        assert_drained(&pair);
        assert!(pair.client.stats().ignored > 0, "noise was filtered");
    }
}

#[test]
fn response_over_the_cap_is_truncated_with_the_marker() {
    let mut pair = Pair::default_with(sized_app());
    pair.client
        .request(pair.now, &(128 * 1024 + 1).to_string(), Some(3_600_000))
        .unwrap();
    pair.drive_for(3_600_000);
    let Event::Response {
        text, truncated, ..
    } = pair.only_event()
    else {
        panic!("expected a response")
    };
    assert!(truncated);
    let full = mixed_utf8(128 * 1024 + 1);
    let kept = text.strip_suffix(deskwire::oa1::TRUNCATION_MARKER).unwrap();
    assert!(full.starts_with(kept));
    assert!(kept.len() > 128 * 1024 - 4 && kept.len() <= 128 * 1024);
    assert_eq!(pair.server.stats().truncations, 1);
    assert_drained(&pair);
}

#[test]
fn requests_of_every_size_arrive_byte_exact() {
    for size in [0, 1, 239, 240, 241, 10 * 1024, 128 * 1024] {
        let mut pair = Pair::default_with(Box::new(|server, now, event| {
            if let Event::Request { id, payload, .. } = event {
                let answer = if payload == mixed_utf8(payload.len()) {
                    "same"
                } else {
                    "differs"
                };
                server
                    .respond(now, &id, &format!("{} {answer}", payload.len()))
                    .unwrap();
            }
        }));
        let payload = mixed_utf8(size);
        pair.client
            .request(pair.now, &payload, Some(3_600_000))
            .unwrap();
        pair.drive_for(3_600_000);
        match pair.only_event() {
            Event::Response { text, .. } => assert_eq!(text, format!("{size} same")),
            other => panic!("{other:?}"),
        }
        assert_drained(&pair);
    }
}

#[test]
fn oversized_request_is_refused_locally() {
    let mut pair = Pair::default_with(echo_app());
    let err = pair
        .client
        .request(pair.now, &"x".repeat(128 * 1024 + 1), None)
        .unwrap_err();
    assert_eq!(
        err,
        LocalError::TooLarge {
            size: 128 * 1024 + 1,
            max: 128 * 1024
        }
    );
}

/// A request timeout of zero would fail the request at once, as a timeout blaming the remote:
/// refused before anything is sent, as a zero `request_timeout_ms` in the config is.
#[test]
fn a_zero_request_timeout_is_refused_locally() {
    let mut pair = Pair::default_with(echo_app());
    let err = pair.client.request(pair.now, "ls", Some(0)).unwrap_err();
    assert_eq!(err.code(), "invalid_config");
    assert!(
        err.to_string()
            .contains("timeout_ms is 0, so every request would fail at once"),
        "{err}"
    );
    assert_eq!(pair.client.in_flight(), 0);
    assert!(pair.client.request(pair.now, "ls", Some(1)).is_ok());
}

#[test]
fn oversized_request_from_a_peer_is_answered_too_large() {
    // A client with a larger cap than the server's.
    let mut client_cfg = config(DESK, BOT);
    client_cfg.max_message_bytes = 4096;
    let mut server_cfg = config(BOT, DESK);
    server_cfg.max_message_bytes = 1024;
    let mut pair = Pair::new(client_cfg, server_cfg, echo_app());
    pair.client
        .request(pair.now, &"y".repeat(2000), None)
        .unwrap();
    pair.drive_for(60_000);
    match pair.only_event() {
        Event::Failed {
            failure: Failure::Remote { code, .. },
            ..
        } => assert_eq!(code, "too_large"),
        other => panic!("{other:?}"),
    }
    assert_eq!(pair.server.stats().too_large, 1);
    assert_drained(&pair);
}

#[test]
fn silent_remote_times_out_and_is_cancelled() {
    let cancelled = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let seen = cancelled.clone();
    let mut pair = Pair::default_with(Box::new(move |_server, _now, event| {
        if let Event::Cancelled { id, reason } = event {
            seen.borrow_mut().push((id, reason));
        }
    }));
    let start = pair.now;
    let id = pair
        .client
        .request(start, "sleep 100", Some(5_000))
        .unwrap();
    pair.drive_for(60_000);
    let (at, event) = pair.events.remove(0);
    assert_eq!(at, start + 5_000, "fails exactly at the deadline");
    assert_eq!(
        event,
        Event::Failed {
            id: id.clone(),
            failure: Failure::Timeout {
                message: "no complete response before the request timeout, and no OA1 frame \
                          came back: the remote is still at it, or refused the request, which \
                          it does without a word (`rexd --irc` logs why: a secret that differs \
                          from this end's, or a nick its --allow-from does not name)"
                    .into()
            }
        }
    );
    assert_eq!(cancelled.borrow().as_slice(), &[(id, "timeout".to_owned())]);
    assert_eq!(pair.client.stats().timeouts, 1);
    assert_drained(&pair);
}

#[test]
fn a_lost_chunk_fails_the_request_as_incomplete() {
    let mut pair = Pair::default_with(sized_app());
    let mut res_frames = 0;
    pair.to_desk = Box::new(move |line| {
        if line.contains(":OA1 RES ") {
            res_frames += 1;
            if res_frames == 2 {
                return vec![];
            }
        }
        vec![line]
    });
    pair.client
        .request(pair.now, "2000", Some(600_000))
        .unwrap();
    pair.drive_for(600_000);
    match pair.only_event() {
        Event::Failed { failure, .. } => assert_eq!(failure, Failure::Incomplete),
        other => panic!("{other:?}"),
    }
    assert_eq!(pair.client.stats().incomplete, 1);
    assert_drained(&pair);
}

#[test]
fn duplicated_and_reordered_chunks_still_reassemble() {
    let mut pair = Pair::default_with(sized_app());
    let mut held: Option<String> = None;
    pair.to_desk = Box::new(move |line| {
        if !line.contains(":OA1 RES ") {
            return vec![line];
        }
        let text = deskwire::irc::Message::parse(line.as_bytes())
            .unwrap()
            .trailing()
            .unwrap()
            .to_owned();
        let Some(frame) = deskwire::oa1::Frame::parse(&text) else {
            return vec![line];
        };
        let last = !frame.more;
        // Swap each pair of frames, and deliver each twice.
        match (held.take(), last) {
            (None, false) => {
                held = Some(line);
                vec![]
            }
            (None, true) => vec![line.clone(), line],
            (Some(first), _) => vec![line.clone(), first.clone(), first, line],
        }
    });
    pair.client.request(pair.now, "960", None).unwrap();
    pair.drive_for(600_000);
    match pair.only_event() {
        Event::Response { text, .. } => assert_eq!(text, mixed_utf8(960)),
        other => panic!("{other:?}"),
    }
    assert!(pair.client.stats().duplicates >= 4);
    assert_drained(&pair);
}

#[test]
fn cancel_stops_the_remote_and_the_stream() {
    let mut pair = Pair::default_with(Box::new(|server, now, event| match event {
        Event::Request { id, .. } => server.send(now, &id, &"z".repeat(5000)).unwrap(),
        Event::Cancelled { id, reason } => {
            assert_eq!(reason, "user pressed stop");
            assert_eq!(
                server.send(now, &id, "more"),
                Err(LocalError::UnknownRequest(id.clone()))
            );
        }
        other => panic!("{other:?}"),
    }));
    let id = pair.client.request(pair.now, "yes", None).unwrap();
    pair.drive_for(2_000);
    assert!(pair.events.is_empty());
    pair.client
        .cancel(pair.now, &id, "user pressed stop")
        .unwrap();
    assert_eq!(
        pair.client.cancel(pair.now, &id, "again"),
        Err(LocalError::UnknownRequest(id.clone()))
    );
    pair.drive_for(120_000);
    assert!(pair.events.is_empty(), "no event after a cancel");
    assert_eq!(pair.server.stats().cancels, 1);
    assert!(pair.client.stats().stale_frames > 0 || pair.server.stats().frames_out > 0);
    assert_drained(&pair);
}

/// An error other than a timeout drops the output given before it (a timeout's output is
/// the answer: `a_remote_timeout_after_output_returns_what_arrived`).
#[test]
fn server_error_becomes_a_failure() {
    let mut pair = Pair::default_with(Box::new(|server, now, event| {
        if let Event::Request { id, .. } = event {
            server.send(now, &id, "partial output").unwrap();
            server
                .fail(now, &id, "output_error", "the pipe broke")
                .unwrap();
            assert_eq!(
                server.finish(now, &id),
                Err(LocalError::UnknownRequest(id.clone()))
            );
        }
    }));
    pair.client.request(pair.now, "sleep 60", None).unwrap();
    pair.drive_for(60_000);
    match pair.only_event() {
        Event::Failed { failure, .. } => assert_eq!(
            failure,
            Failure::Remote {
                code: "output_error".into(),
                message: "the pipe broke".into()
            }
        ),
        other => panic!("{other:?}"),
    }
    assert_drained(&pair);
}

#[test]
fn streamed_output_goes_out_before_the_command_ends() {
    let mut pair = Pair::default_with(Box::new(|server, now, event| {
        if let Event::Request { id, .. } = event {
            server.send(now, &id, "first line\n").unwrap();
        }
    }));
    pair.client
        .request(pair.now, "slow", Some(600_000))
        .unwrap();
    pair.drive_for(1_000);
    assert_eq!(pair.server.stats().frames_out, 1, "sent before finish");
    assert!(pair.events.is_empty());
}

#[test]
fn pacing_holds_lines_back() {
    let mut client_cfg = config(DESK, BOT);
    client_cfg.pacing = Pacing::steady(2, 500);
    let mut client = Client::new(client_cfg, 3);
    let now = 10_000;
    client.request(now, &"p".repeat(1000), None).unwrap(); // 5 frames
    let mut sent_at = Vec::new();
    let mut t = now;
    while sent_at.len() < 5 {
        match client.poll_output(t) {
            Output::Transmit(_) => sent_at.push(t),
            Output::Event(e) => panic!("{e:?}"),
            Output::Timeout(d) => t = d,
        }
    }
    assert_eq!(sent_at, vec![10_000, 10_000, 10_500, 11_000, 11_500]);
}

#[test]
fn spoofed_frames_from_other_senders_are_ignored() {
    let mut pair = Pair::default_with(Box::new(|_, _, _| {}));
    let id = pair.client.request(pair.now, "x", None).unwrap();
    pair.drive_for(100);
    pair.client.handle_line(
        pair.now,
        format!(":mallory!~m@evil PRIVMSG #desk :OA1 RES {id} 1 0 rm -rf ok").as_bytes(),
    );
    pair.client.handle_line(
        pair.now,
        format!(":{DESK}!~desk@127.0.0.1 PRIVMSG #desk :OA1 RES {id} 1 0 own echo").as_bytes(),
    );
    pair.drive_for(100);
    assert!(pair.events.is_empty());
    assert_eq!(pair.client.stats().disallowed_sender, 1);
    assert_eq!(pair.client.in_flight(), 1);
}

/// The remote's own timeout (`ERR timeout` after part of the output went out): what arrived
/// is the answer, with a marker saying the remote stopped the command; a remote timeout with
/// nothing before it stays a failure. Readable and compressed alike.
#[test]
fn a_remote_timeout_after_output_returns_what_arrived() {
    for (compression, output) in [
        (false, "started\n"),
        (true, "started\n"),
        (false, "half a line"),
        (false, ""),
    ] {
        let mut client_cfg = config(DESK, BOT);
        let mut server_cfg = config(BOT, DESK);
        client_cfg.compression = compression;
        server_cfg.compression = compression;
        let sent = output.to_owned();
        let mut pair = Pair::new(
            client_cfg,
            server_cfg,
            Box::new(move |server, now, event| {
                if let Event::Request { id, .. } = event
                    && !sent.is_empty()
                {
                    server.send(now, &id, &sent).unwrap();
                }
            }),
        );
        let id = pair.client.request(pair.now, "slow", Some(30_000)).unwrap();
        // The output goes out as it comes (after the flush delay), then the remote gives up.
        pair.drive_for(1_000);
        pair.server
            .fail(pair.now, &id, "timeout", "remote execution exceeded 1.8s")
            .unwrap();
        pair.drive_for(1_000);
        let (_, event) = pair.events.remove(0);
        let want = if output.is_empty() {
            Event::Failed {
                id,
                failure: deskwire::oa1::Failure::Remote {
                    code: "timeout".into(),
                    message: "remote execution exceeded 1.8s".into(),
                },
            }
        } else {
            Event::Response {
                id,
                // The marker on a line of its own: no blank line after a newline.
                text: format!(
                    "{output}{}...[cut at the remote's timeout: {} bytes arrived; the command \
                     was stopped]...",
                    if output.ends_with('\n') { "" } else { "\n" },
                    output.len()
                ),
                truncated: true,
            }
        };
        assert_eq!(event, want, "compression {compression}, output {output:?}");
        assert_drained(&pair);
    }
}

/// A command still writing when the request's timeout ends: what arrived is the answer, cut
/// with a marker that says so, and the remote is told to stop. Readable and compressed alike.
/// (Compressed, the quiet remote also once asked to be polled again at once, for ever: the
/// harness's "deadline in the past".)
#[test]
fn a_timeout_returns_what_arrived_and_cancels() {
    for compression in [false, true] {
        let cancelled = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let seen = cancelled.clone();
        let mut client_cfg = config(DESK, BOT);
        let mut server_cfg = config(BOT, DESK);
        client_cfg.compression = compression;
        server_cfg.compression = compression;
        let first = "first line é\n".repeat(40);
        let sent = first.clone();
        let mut pair = Pair::new(
            client_cfg,
            server_cfg,
            Box::new(move |server, now, event| match event {
                Event::Request { id, .. } => server.send(now, &id, &sent).unwrap(),
                Event::Cancelled { id, reason } => seen.borrow_mut().push((id, reason)),
                _ => {}
            }),
        );
        let start = pair.now;
        let id = pair.client.request(start, "slow", Some(30_000)).unwrap();
        pair.drive_for(60_000);
        let (at, event) = pair.events.remove(0);
        assert_eq!(at, start + 30_000, "answers at the deadline");
        let want = format!(
            "{first}...[cut at the 30 s timeout: {} bytes arrived; the rest was \
             cancelled]...",
            first.len()
        );
        assert_eq!(
            event,
            Event::Response {
                id: id.clone(),
                text: want,
                truncated: true
            },
            "compression {compression}"
        );
        assert_eq!(cancelled.borrow().as_slice(), &[(id, "timeout".to_owned())]);
        let stats = pair.client.stats();
        assert_eq!((stats.timeouts, stats.truncations), (1, 1));
        assert_drained(&pair);
    }
}
