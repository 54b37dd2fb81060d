//! The per-connection engines as a host drives them, with a hostile third party.
//!
//! A `Desk` and a `Remote` talk through the in-memory IRC server (`sim::Network`), with the
//! features the first byte picks: a shared secret, compression, default pacing, a small or a
//! large message cap. The rest is a sequence of operations: time passing, the desk's requests
//! and cancels, the remote's answers (streamed, whole or failed), and a third client on the
//! server or the server itself sending what it likes: arbitrary bytes, templated OA1 frames of
//! every type with fuzzed fields (plain, `OA1A`, and deflated payloads), straight into either
//! engine or relayed through the channel.
//!
//! Whatever comes in, neither engine panics or loops, every line written fits IRC's 512 bytes with
//! CRLF and carries no other CR, LF or NUL, deadlines never lie in the past, nothing in flight
//! exceeds its cap, and no event carries more than the message cap.
#![no_main]

use deskwire::oa1::compress;
use deskwire::oa1::{
    AuthConfig, ConnectionConfig, ConnectionEvent, ConnectionOutput, Desk, Event, Pacing, Remote,
    TRUNCATION_MARKER, timeout_marker,
};
use deskwire::sim::{ClientId, Network};
use libfuzzer_sys::fuzz_target;

const CHANNEL: &str = "#desk";
const TYPES: [&str; 9] = [
    "REQ", "RES", "ERR", "CANCEL", "ACCEPT", "REQZ", "RESZ", "req", "X",
];
/// More outputs than this from one drain means the engine is looping.
const MAX_OUTPUTS_PER_DRAIN: usize = 20_000;

struct Harness {
    now: u64,
    net: Network,
    desk: Desk,
    remote: Remote,
    d: ClientId,
    r: ClientId,
    eve: ClientId,
    cap: usize,
    max_streams: usize,
    desk_ids: Vec<String>,
    remote_ids: Vec<String>,
}

impl Harness {
    fn new(mode: u8) -> Self {
        let cap = if mode & 8 == 0 { 600 } else { 128 * 1024 };
        let max_streams = 3;
        let config = |nick: &str| {
            let mut c = ConnectionConfig::new(nick, CHANNEL);
            c.oa1.max_message_bytes = cap;
            c.oa1.max_streams = max_streams;
            c.oa1.finished_memory = 4;
            c.oa1.compression = mode & 2 != 0;
            c.oa1.adaptive_payload = mode & 16 != 0;
            if mode & 1 != 0 {
                c.oa1.auth = Some(AuthConfig::new(b"fuzz secret".to_vec(), 1_790_000_000_000));
            }
            if mode & 4 == 0 {
                c.oa1.pacing = Pacing::UNLIMITED;
            }
            c
        };
        let mut net = Network::new(u64::from(mode));
        let (d, r, eve) = (
            net.connect("desk.host"),
            net.connect("remote.host"),
            net.connect("eve.host"),
        );
        // A desk names its remote: the remote's nick, or "*" for anyone in the channel.
        let mut desk_config = config("desk");
        desk_config.oa1.allowed_sender = Some(if mode & 32 != 0 { "deskbot" } else { "*" }.into());
        Harness {
            now: 0,
            net,
            desk: Desk::new(desk_config, 0, 7).expect("a valid desk config"),
            remote: Remote::new(config("deskbot"), 0).expect("a valid remote config"),
            d,
            r,
            eve,
            cap,
            max_streams,
            desk_ids: Vec::new(),
            remote_ids: Vec::new(),
        }
    }

    /// Drains one engine's output, checking every item; returns the bytes to write.
    fn drain(&mut self, desk: bool) -> Vec<u8> {
        let mut bytes = Vec::new();
        for _ in 0..MAX_OUTPUTS_PER_DRAIN {
            let out = if desk {
                self.desk.poll_output(self.now)
            } else {
                self.remote.poll_output(self.now)
            };
            match out {
                ConnectionOutput::Transmit(line) => {
                    assert!(line.len() <= 512, "a {}-byte line", line.len());
                    let body = line.strip_suffix(b"\r\n").expect("a line without CRLF");
                    assert!(!body.iter().any(|b| matches!(b, b'\r' | b'\n' | 0)));
                    bytes.extend_from_slice(&line);
                }
                ConnectionOutput::Event(event) => self.observe(event),
                ConnectionOutput::Timeout(deadline) => {
                    assert!(deadline >= self.now);
                    return bytes;
                }
            }
        }
        panic!("poll_output never answered Timeout");
    }

    fn observe(&mut self, event: ConnectionEvent) {
        let ConnectionEvent::Oa1(event) = event else {
            return;
        };
        match event {
            Event::Response {
                text, truncated, ..
            } => {
                // Cut at the cap (the remote's marker), and/or by its timeout: the answer so
                // far, then the timeout's marker (its longest form).
                let marker = if truncated {
                    TRUNCATION_MARKER.len() + timeout_marker(u64::MAX, usize::MAX).len()
                } else {
                    0
                };
                assert!(text.len() <= self.cap + marker);
            }
            Event::Request { id, payload, .. } => {
                assert!(payload.len() <= self.cap);
                self.remote_ids.push(id);
                if self.remote_ids.len() > 8 {
                    self.remote_ids.remove(0);
                }
            }
            _ => {}
        }
    }

    /// Moves bytes between the engines and the server until nothing moves.
    fn pump(&mut self) {
        for _ in 0..64 {
            let from_desk = self.drain(true);
            let from_remote = self.drain(false);
            self.net.handle_bytes(self.d, &from_desk);
            self.net.handle_bytes(self.r, &from_remote);
            let to_desk = self.net.take_bytes(self.d);
            let to_remote = self.net.take_bytes(self.r);
            self.net.take_bytes(self.eve);
            let moved = !(from_desk.is_empty() && from_remote.is_empty())
                || !(to_desk.is_empty() && to_remote.is_empty());
            self.desk.handle_bytes(self.now, &to_desk);
            self.remote.handle_bytes(self.now, &to_remote);
            assert!(self.desk.in_flight() <= self.max_streams);
            assert!(self.remote.active() <= self.max_streams);
            if !moved {
                return;
            }
        }
    }

    fn advance(&mut self, ms: u64) {
        self.now += ms;
        self.desk.handle_timeout(self.now);
        self.remote.handle_timeout(self.now);
    }
}

/// A text made of the fuzz bytes (lossy, so any bytes make a valid `&str`).
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A frame line from the fuzz bytes: `PRIVMSG #desk :OA1[A] TYPE ID SEQ MORE PAYLOAD`.
fn frame_line(ids: &[&String], op: &[u8], payload: &[u8], deflate: bool) -> Vec<u8> {
    let [a, b, c] = [op[0], op[1], op[2]];
    let id = match ids.get(usize::from(b % 8)) {
        Some(id) => id.as_str(),
        None => ["abc", "", "x y", "0123456789abcdef0123"][usize::from(b % 4)],
    };
    let mut line = format!(
        "PRIVMSG {} :{} {} {} {} {}",
        if c & 0x80 == 0 { CHANNEL } else { "#DESK" },
        if a & 0x40 == 0 {
            "OA1"
        } else {
            "OA1A 1 AAAAAAAAAAAAAAAAAAAAAA OA1"
        },
        TYPES[usize::from(a) % TYPES.len()],
        id,
        [1u32, 2, 3, 0, 10, 4_294_967_295, 99, 2][usize::from(c % 8)],
        ["0", "1", "2", ""][usize::from((c >> 3) % 4)],
    )
    .into_bytes();
    line.push(b' ');
    if deflate {
        line.extend_from_slice(compress::compress(payload).as_bytes());
    } else {
        line.extend(payload.iter().map(|&b| {
            if matches!(b, b'\r' | b'\n' | 0) {
                b'\\'
            } else {
                b
            }
        }));
    }
    line.extend_from_slice(b"\r\n");
    line
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut ops)) = data.split_first() else {
        return;
    };
    let mut h = Harness::new(mode);
    h.pump();
    // Eve registers and joins, so her frames reach the channel.
    h.net
        .handle_bytes(h.eve, b"NICK eve\r\nUSER eve 0 * :eve\r\nJOIN #desk\r\n");
    h.pump();
    while let &[a, b, c, ref rest @ ..] = ops {
        let take = usize::from(c >> 2).min(rest.len());
        let (bytes, next) = rest.split_at(take);
        ops = next;
        match a % 12 {
            0 => h.advance(u64::from(b) * 97),
            1 => h.advance(u64::from(b) * 1_000),
            2 => {
                let payload = text(bytes).repeat(usize::from(b % 4) * 40 + 1);
                if let Ok(id) = h.desk.request(h.now, &payload, None) {
                    h.desk_ids.push(id);
                }
            }
            3 => {
                if let Some(id) = h.desk_ids.get(usize::from(b) % h.desk_ids.len().max(1)) {
                    let _ = h.desk.cancel(h.now, &id.clone(), &text(bytes));
                }
            }
            4..=6 => {
                let Some(id) = h.remote_ids.get(usize::from(b) % h.remote_ids.len().max(1)) else {
                    continue;
                };
                let (id, body) = (id.clone(), text(bytes).repeat(usize::from(c & 3) * 100 + 1));
                let _ = match a % 12 {
                    4 => h.remote.send(h.now, &id, &body),
                    5 if b & 1 == 0 => h.remote.finish(h.now, &id),
                    5 => h.remote.respond(h.now, &id, &body),
                    _ => h.remote.fail(
                        h.now,
                        &id,
                        ["timeout", "bad code", ""][usize::from(b % 3)],
                        &body,
                    ),
                };
            }
            // Eve, through the server: raw bytes, then templated frames.
            7 => h.net.handle_bytes(h.eve, bytes),
            8 | 9 => {
                let ids: Vec<&String> = h.desk_ids.iter().chain(&h.remote_ids).collect();
                let line = frame_line(&ids, &[a, b, c], bytes, a % 12 == 9);
                h.net.handle_bytes(h.eve, &line);
            }
            // A hostile server: bytes or frames straight into an engine, under any prefix.
            10 | 11 => {
                let ids: Vec<&String> = h.desk_ids.iter().chain(&h.remote_ids).collect();
                let mut line = match b & 3 {
                    0 => bytes.to_vec(),
                    _ => {
                        let mut l = [":deskbot!~d@h ", ":desk!~d@h ", ":eve!e@h "]
                            [usize::from(b & 3) - 1]
                            .as_bytes()
                            .to_vec();
                        l.extend(frame_line(&ids, &[b, c, a], bytes, b & 4 != 0));
                        l
                    }
                };
                if b & 8 != 0 {
                    line.truncate(line.len() / 2); // a partial line, finished by later bytes
                }
                if a % 12 == 10 {
                    h.desk.handle_bytes(h.now, &line);
                } else {
                    h.remote.handle_bytes(h.now, &line);
                }
            }
            _ => unreachable!(),
        }
        h.pump();
    }
    // Everything in flight ends once enough time passes.
    h.advance(10 * 60 * 1_000);
    h.pump();
    assert_eq!(h.desk.in_flight(), 0);
});
