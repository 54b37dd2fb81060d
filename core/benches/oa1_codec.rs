//! OA1 encode (escape + chunk + format) and decode (parse + unescape + reassemble) of 128 KiB of
//! mixed UTF-8, next to a `memcpy` of the same bytes in the same run; then the cost per frame of
//! authenticated frames (HMAC-SHA256 sealing on the remote, checking on the desk) next to the
//! same answer without them.
//!
//! `cargo bench -p deskwire --bench oa1_codec`
//!
//! After criterion's groups, [`side_by_side`] times memcpy, encode, decode and the engines'
//! request and receiving in turns and prints their medians and ratios: criterion runs one bench
//! after the other, and on a shared host the machine under one can be twice as fast as under the
//! next. With criterion's `--profile-time` (to profile one bench) only that bench runs.

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group};
use deskwire::irc::Privmsg;
use deskwire::oa1::chunk::{split, wire_payload};
use deskwire::oa1::escape::{Unescaper, escape, escape_into};
use deskwire::oa1::reassembly::{Accepted, OverflowPolicy, Reassembler, ReassemblyLimits};
use deskwire::oa1::{
    AuthConfig, Client, Config, Drained, Frame, FrameType, Output, Pacing, Server,
};

/// Command output as it looks: lines of ~70 bytes, mostly ASCII, some accented and CJK text and
/// emoji, tabs and the odd backslash.
fn mixed_utf8(n: usize) -> String {
    let words = [
        "drwxr-xr-x",
        "root",
        "4096",
        "Nov",
        "22",
        "07:02",
        "src/",
        "naïve",
        "café",
        "日本語",
        "ファイル",
        "🙂",
        "\t",
        "C:\\path",
        "ok",
        "--",
        "Ünïcødé",
        "build",
        "passed",
        "12.5%",
    ];
    let mut s = String::with_capacity(n + 16);
    let mut line = 0;
    let mut i = 0usize;
    while s.len() < n {
        let w = words[i % words.len()];
        s.push_str(w);
        line += w.len() + 1;
        if line > 70 {
            s.push('\n');
            line = 0;
        } else {
            s.push(' ');
        }
        i = (i * 13 + 5) % 1_000_003;
    }
    while s.len() > n {
        s.pop();
    }
    s
}

const SIZE: usize = 128 * 1024;

/// The frames' IRC lines as a client receives them (with the server's prefix).
fn response_lines(text: &str, id: &str) -> Vec<String> {
    let escaped = escape(text);
    let chunks = split(&escaped, |_| 240);
    let n = chunks.len();
    chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            let payload = wire_payload(chunk);
            let frame = Frame {
                kind: FrameType::Res,
                id,
                seq: i as u32 + 1,
                more: i + 1 < n,
                payload: &*payload,
            };
            format!(":deskbot!~bot@127.0.0.1 PRIVMSG #desk :{frame}")
        })
        .collect()
}

/// Escapes, chunks and formats `text` as the lines of one response; returns their total length.
fn encode(text: &str, line: &mut String) -> usize {
    let escaped = escape(text);
    let chunks = split(&escaped, |_| 240);
    let n = chunks.len();
    let mut total = 0;
    for (i, chunk) in chunks.iter().enumerate() {
        line.clear();
        line.push_str("PRIVMSG #desk :");
        let payload = wire_payload(chunk);
        Frame {
            kind: FrameType::Res,
            id: "k3p2d9m1q7ab",
            seq: i as u32 + 1,
            more: i + 1 < n,
            payload: &*payload,
        }
        .write(line);
        total += line.len();
    }
    total
}

/// What the engines do per line: the relayed-PRIVMSG fast path, the frame header, and the
/// reassembler (unescape); UTF-8 is checked once on the whole message.
fn decode(lines: &[String]) -> String {
    let limits = ReassemblyLimits {
        max_message_bytes: SIZE + 64,
        max_streams: 64,
        partial_timeout_ms: 10_000,
        expire_idle: false,
        overflow: OverflowPolicy::Truncate,
        finished_memory: 0,
    };
    let mut r = Reassembler::new(limits);
    for line in lines {
        let msg = Privmsg::parse(line.as_bytes()).expect("a relayed PRIVMSG");
        let frame = Frame::parse_bytes(msg.text).expect("an OA1 frame");
        if let Accepted::Complete(done) = r.accept(0, msg.source.nick, &frame) {
            return deskwire::oa1::into_text(done.data);
        }
    }
    panic!("the response did not complete")
}

/// The desk's engine as a host drives it: a 128 KiB request, every line out of `poll_output`.
/// Returns the bytes of the lines.
fn engine_request(text: &str) -> usize {
    let mut cfg = Config::new("#desk", "desk");
    cfg.pacing = Pacing::UNLIMITED;
    let mut client = Client::new(cfg, 1);
    client.request(0, text, None).unwrap();
    let mut n = 0;
    while let Output::Transmit(line) = client.poll_output(0) {
        n += line.len();
    }
    n
}

/// [`engine_request`] with the lines drained into one buffer (`Client::drain_into`).
fn engine_request_into(text: &str, out: &mut Vec<u8>) -> usize {
    let mut cfg = Config::new("#desk", "desk");
    cfg.pacing = Pacing::UNLIMITED;
    engine_request_into_with(cfg, text, out)
}

/// [`engine_request_into`] with `cfg`.
fn engine_request_into_with(cfg: Config, text: &str, out: &mut Vec<u8>) -> usize {
    let mut client = Client::new(cfg, 1);
    client.request(0, text, None).unwrap();
    out.clear();
    let mut events = Vec::new();
    let Drained::Until(_) = client.drain_into(0, out, usize::MAX, &mut events) else {
        panic!("an unlimited buffer is never full")
    };
    out.len()
}

/// The desk's engine receiving a 128 KiB answer: every line through `handle_line`, then the
/// response event. `lines` answer the request id a client of seed 1 makes first.
fn engine_receive(lines: &[String]) -> usize {
    let mut cfg = Config::new("#desk", "desk");
    cfg.pacing = Pacing::UNLIMITED;
    let mut client = Client::new(cfg, 1);
    client.request(0, "cat big", None).unwrap();
    while let Output::Transmit(_) = client.poll_output(0) {}
    for line in lines {
        client.handle_line(0, line.as_bytes());
    }
    match client.poll_output(0) {
        Output::Event(deskwire::oa1::Event::Response { text, .. }) => text.len(),
        other => panic!("{other:?}"),
    }
}

/// The lines of a 128 KiB answer to the first request of a client of seed 1.
fn client_answer_lines(text: &str) -> Vec<String> {
    // The id the client will pick (ids are deterministic for a seed).
    let client_id = Client::new(Config::new("#desk", "desk"), 1)
        .request(0, "cat big", None)
        .unwrap();
    response_lines(text, &client_id)
}

/// memcpy, encode, decode and the engine's request and receiving measured in turns, round
/// after round, so that all see the same machine: on a shared host the speed of a whole
/// criterion run moves by 2x from one minute to the next. Prints the median throughput of each
/// and the median per-round ratio to memcpy; then the floors, the kernels alone on pieces the
/// size of a frame's payload and the message's UTF-8 check, which no framing can go below.
fn side_by_side() {
    const ROUNDS: usize = 2000;
    let text = mixed_utf8(SIZE);
    let lines = response_lines(&text, "k3p2d9m1q7ab");
    let answer = client_answer_lines(&text);
    let windows = frame_windows(&text);
    let payloads: Vec<&[u8]> = lines
        .iter()
        .map(|line| {
            let msg = Privmsg::parse(line.as_bytes()).expect("a relayed PRIVMSG");
            Frame::parse_bytes(msg.text).expect("an OA1 frame").payload
        })
        .collect();
    let mut dst = vec![0u8; SIZE];
    let mut line = String::with_capacity(512);
    let mut buffer = Vec::new();
    let mut escaped = String::with_capacity(2 * SIZE);
    let mut unescaped = Vec::with_capacity(2 * SIZE);
    let (adaptive_desk, adaptive_remote) = adaptive_configs();
    let adaptive_answer = remote_answers(
        adaptive_remote,
        &request_lines(adaptive_desk.clone(), "cat big"),
        &text,
    );
    let mut times: [Vec<f64>; 11] = Default::default();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        dst.copy_from_slice(black_box(text.as_bytes()));
        black_box(&dst);
        times[0].push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        black_box(encode(black_box(&text), &mut line));
        times[1].push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        black_box(decode(black_box(&lines)));
        times[2].push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        black_box(engine_request(black_box(&text)));
        times[3].push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        black_box(engine_request_into(black_box(&text), &mut buffer));
        times[4].push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        black_box(engine_receive(black_box(&answer)));
        times[5].push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        escaped.clear();
        for window in &windows {
            escape_into(black_box(window), &mut escaped);
        }
        black_box(&escaped);
        times[6].push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        unescaped.clear();
        let mut unescaper = Unescaper::default();
        for payload in &payloads {
            unescaper.feed(black_box(payload), &mut unescaped);
        }
        unescaper.finish(&mut unescaped);
        black_box(&unescaped);
        times[7].push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        black_box(deskwire::oa1::as_text(black_box(&unescaped)).is_ok());
        times[8].push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        black_box(engine_request_into_with(
            adaptive_desk.clone(),
            black_box(&text),
            &mut buffer,
        ));
        times[9].push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        black_box(desk_receives(
            adaptive_desk.clone(),
            black_box(&adaptive_answer),
        ));
        times[10].push(start.elapsed().as_secs_f64());
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratios =
        |i: usize| -> Vec<f64> { (0..ROUNDS).map(|r| times[i][r] / times[0][r]).collect() };
    let gib = |t: f64| SIZE as f64 / t / f64::from(1u32 << 30);
    let memcpy = median(&times[0]);
    println!(
        "\noa1_128KiB side by side, {ROUNDS} rounds of each in turn (medians; GiB/s of the 128 \
         KiB text; frames of 240 bytes, the bare engines' default, unless 'adaptive payloads': \
         as large as the line allows, the desks' default, {} answer frames):",
        adaptive_answer.len()
    );
    println!("  {:<48} {:>6.2} GiB/s", "memcpy", gib(memcpy));
    for (name, i) in [
        ("encode: escape + chunk + format", 1),
        ("decode: parse + unescape + reassemble", 2),
        ("engine: Client::request + poll_output", 3),
        ("engine: Client::request + drain_into", 4),
        ("engine: Client::handle_line to Response", 5),
        ("floor: escape kernel, per frame's window", 6),
        ("floor: unescape kernel, per frame's payload", 7),
        ("floor: UTF-8 check of the message", 8),
        ("adaptive payloads: request + drain_into", 9),
        ("adaptive payloads: handle_line to Response", 10),
    ] {
        let ratio = ratios(i);
        let t = median(&times[i]);
        println!(
            "  {name:<48} {:>6.2} GiB/s  {:>7.1} us  ({:.1}x the time of memcpy)",
            gib(t),
            t * 1e6,
            median(&ratio)
        );
    }
    // What the engines cannot go below on this CPU, whatever their framing costs: sending
    // escapes every byte and copies the lines out; receiving unescapes every payload and checks
    // the message's UTF-8 once.
    let send_floor = median(&times[6]) + memcpy;
    let receive_floor = median(&times[7]) + median(&times[8]);
    println!(
        "  floors: sending {:.2} GiB/s ({:.1} us), receiving {:.2} GiB/s ({:.1} us); the \
         framing's share: sending {:.0}%, receiving {:.0}%",
        gib(send_floor),
        send_floor * 1e6,
        gib(receive_floor),
        receive_floor * 1e6,
        100.0 * (1.0 - send_floor / median(&times[4])),
        100.0 * (1.0 - receive_floor / median(&times[5])),
    );
}

/// `text` cut as a request's frames take it: windows of about a frame's payload (241 bytes,
/// the budget and one more, widened to a character's end), each escaped on its own.
fn frame_windows(text: &str) -> Vec<&str> {
    let mut windows = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + 241).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        windows.push(&text[at..end]);
        at = end;
    }
    windows
}

/// The engines' configs for the authentication comparison: unlimited pacing, and a shared
/// secret or none.
fn engine_configs(authenticated: bool) -> (Config, Config) {
    let mut desk = Config::new("#desk", "desk");
    let mut remote = Config::new("#desk", "deskbot");
    for cfg in [&mut desk, &mut remote] {
        cfg.pacing = Pacing::UNLIMITED;
        if authenticated {
            cfg.auth = Some(AuthConfig::new(b"bench secret".to_vec(), 1_790_000_000_000));
        }
    }
    (desk, remote)
}

/// The bare engines' configs with adaptive payloads, as the connection engines (`Desk`,
/// `Remote`) use them: each frame as large as the line allows (about 400 bytes) instead of 240.
fn adaptive_configs() -> (Config, Config) {
    let (mut desk, mut remote) = engine_configs(false);
    desk.adaptive_payload = true;
    remote.adaptive_payload = true;
    (desk, remote)
}

/// The request lines of a client of seed 1 with `desk`.
fn request_lines(desk: Config, text: &str) -> Vec<String> {
    let mut client = Client::new(desk, 1);
    client.request(0, text, None).unwrap();
    let mut lines = Vec::new();
    while let Output::Transmit(line) = client.poll_output(0) {
        lines.push(line);
    }
    lines
}

/// A response as the remote sends it: the request arrives, the 128 KiB answer goes out. Returns
/// the lines as the desk receives them.
fn remote_answers(remote: Config, request_lines: &[String], text: &str) -> Vec<String> {
    let mut server = Server::new(remote);
    for line in request_lines {
        server.handle_line(0, format!(":desk!~d@h {line}").as_bytes());
    }
    let Output::Event(deskwire::oa1::Event::Request { id, .. }) = server.poll_output(0) else {
        panic!("no request")
    };
    server.respond(0, &id, text).unwrap();
    let mut lines = Vec::new();
    while let Output::Transmit(line) = server.poll_output(0) {
        lines.push(format!(":deskbot!~bot@127.0.0.1 {line}"));
    }
    lines
}

/// The desk's side: a request, then every answer line to the response event.
fn desk_receives(desk: Config, lines: &[String]) -> usize {
    let mut client = Client::new(desk, 1);
    client.request(0, "cat big", None).unwrap();
    while let Output::Transmit(_) = client.poll_output(0) {}
    for line in lines {
        client.handle_line(0, line.as_bytes());
    }
    match client.poll_output(0) {
        Output::Event(deskwire::oa1::Event::Response { text, .. }) => text.len(),
        other => panic!("{other:?}"),
    }
}

/// The cost of authenticated frames per frame, on both sides, next to the same frames without:
/// the remote sealing its answer and the desk checking it, in turns, round after round.
fn auth_side_by_side() {
    const ROUNDS: usize = 300;
    let text = mixed_utf8(SIZE);
    let modes = [false, true].map(|auth| {
        let (desk, remote) = engine_configs(auth);
        let req = request_lines(desk.clone(), "cat big");
        let answer = remote_answers(remote.clone(), &req, &text);
        (desk, remote, req, answer)
    });
    let frames = modes.each_ref().map(|m| m.3.len() as f64);
    println!(
        "(frames: {} plain, {} authenticated; the tag takes payload room)",
        modes[0].3.len(),
        modes[1].3.len()
    );
    // send plain, send authenticated, receive plain, receive authenticated
    let mut times: [Vec<f64>; 4] = Default::default();
    for _ in 0..ROUNDS {
        for (i, (desk, remote, req, answer)) in modes.iter().enumerate() {
            let start = Instant::now();
            black_box(remote_answers(remote.clone(), req, black_box(&text)));
            times[i].push(start.elapsed().as_secs_f64());
            let start = Instant::now();
            black_box(desk_receives(desk.clone(), black_box(answer)));
            times[2 + i].push(start.elapsed().as_secs_f64());
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratio = |a: usize, b: usize| {
        let r: Vec<f64> = (0..ROUNDS).map(|i| times[a][i] / times[b][i]).collect();
        median(&r)
    };
    println!(
        "\noa1 authenticated frames, {ROUNDS} rounds in turn, a 128 KiB answer (medians; per \
         frame of each mode's own frames):"
    );
    for (side, plain, auth) in [("remote, sealing", 0, 1), ("desk, checking", 2, 3)] {
        let (p, a) = (
            median(&times[plain]) / frames[0] * 1e9,
            median(&times[auth]) / frames[1] * 1e9,
        );
        println!(
            "  {side:<16} plain {p:>7.0} ns  authenticated {a:>7.0} ns  (+{:.0} ns a frame; \
             whole answer {:.2}x the time)",
            a - p,
            ratio(auth, plain)
        );
    }
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    if std::env::args().any(|arg| arg == "--profile-time") {
        return;
    }
    side_by_side();
    auth_side_by_side();
}

fn bench(c: &mut Criterion) {
    let text = mixed_utf8(SIZE);
    let mut group = c.benchmark_group("oa1_128KiB");
    group.throughput(Throughput::Bytes(SIZE as u64));

    group.bench_function("memcpy (baseline)", |b| {
        let mut dst = vec![0u8; SIZE];
        b.iter(|| {
            dst.copy_from_slice(black_box(text.as_bytes()));
            black_box(&dst);
        })
    });

    // Escaping alone: the kernel this CPU picks (AVX-512, AVX2 or the SSE2 scan).
    group.bench_function("escape", |b| b.iter(|| escape(black_box(&text))));

    group.bench_function("encode: escape + chunk + format", |b| {
        let mut line = String::with_capacity(512);
        b.iter(|| encode(black_box(&text), &mut line))
    });

    let id = "k3p2d9m1q7ab";
    let lines = response_lines(&text, id);
    group.bench_function("decode: parse + unescape + reassemble", |b| {
        b.iter(|| {
            let out = decode(black_box(&lines));
            assert_eq!(out.len(), SIZE);
            out
        })
    });

    // The whole engines, as a host drives them: requests and responses through poll_output.
    group.bench_function("engine: Server::respond + poll_output", |b| {
        b.iter(|| {
            let mut cfg = Config::new("#desk", "deskbot");
            cfg.pacing = Pacing::UNLIMITED;
            let mut server = Server::new(cfg);
            server.handle_line(0, b":desk!~d@h PRIVMSG #desk :OA1 REQ abc 1 0 cat big");
            let Output::Event(_) = server.poll_output(0) else {
                panic!()
            };
            server.respond(0, "abc", black_box(&text)).unwrap();
            let mut n = 0;
            while let Output::Transmit(line) = server.poll_output(0) {
                n += line.len();
            }
            black_box(n)
        })
    });

    group.bench_function("engine: Client::request + poll_output", |b| {
        b.iter(|| engine_request(black_box(&text)))
    });

    group.bench_function("engine: Client::request + drain_into", |b| {
        let mut buffer = Vec::new();
        b.iter(|| engine_request_into(black_box(&text), &mut buffer))
    });

    let client_lines = client_answer_lines(&text);
    group.bench_function("engine: Client::handle_line to Response", |b| {
        b.iter(|| engine_receive(black_box(&client_lines)))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
