//! Bad input and limits: line budgets under the worst-case prefix, garbage and partial-stream
//! floods, duplicate floods, over-long lines. The engines never panic and memory stays bounded.

use deskwire::oa1::{AuthConfig, Client, Config, Event, IdGenerator, Output, Pacing, Server};
use proptest::prelude::*;

fn drain(poll: &mut dyn FnMut() -> Output) -> (Vec<String>, Vec<Event>, u64) {
    let mut lines = Vec::new();
    let mut events = Vec::new();
    loop {
        match poll() {
            Output::Transmit(l) => lines.push(l),
            Output::Event(e) => events.push(e),
            Output::Timeout(t) => return (lines, events, t),
        }
    }
}

/// `:nick!~user@host ` with the worst case the engine assumes before it learns the prefix:
/// a 20-character user with ident's `~`, a 63-character host.
fn worst_prefix_len(nick: &str) -> usize {
    1 + nick.len() + 1 + 21 + 1 + 63 + 1
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every line either end sends, with the worst-case prefix added, fits in 512 bytes, with
    /// and without authenticated frames; the text survives the round trip.
    #[test]
    fn every_line_fits_with_the_worst_case_prefix(
        text in ".{0,3000}",
        nick_len in 1usize..30,
        chan_len in 1usize..50,
        adaptive in any::<bool>(),
        authenticated in any::<bool>(),
    ) {
        let nick = "n".repeat(nick_len);
        let channel = format!("#{}", "c".repeat(chan_len));
        let mut cfg = Config::new(&channel, &nick);
        cfg.adaptive_payload = adaptive;
        cfg.pacing = Pacing::UNLIMITED;
        if authenticated {
            cfg.auth = Some(AuthConfig::new(b"shared".to_vec(), 1_790_000_000_000));
        }
        let mut client = Client::new(cfg.clone(), 9);
        client.request(0, &text, None).unwrap();
        let (lines, _, _) = drain(&mut || client.poll_output(0));
        let mut server = Server::new(cfg);
        let mut request_lines = Vec::new();
        for line in &lines {
            prop_assert!(line.len() + 2 + worst_prefix_len(&nick) <= 512, "{} bytes", line.len());
            request_lines.push(format!(":peer!~p@h {line}"));
        }
        for line in &request_lines {
            server.handle_line(0, line.as_bytes());
        }
        let (_, events, _) = drain(&mut || server.poll_output(0));
        let Some(Event::Request { id, payload, .. }) = events.into_iter().next() else {
            return Err(TestCaseError::fail("no request"));
        };
        // Toward a peer not known to be deskwire only the spec's escapes go: NUL, which IRC
        // cannot carry, arrives as U+FFFD. A peer with the secret is deskwire: it gets `\0`.
        let sent = match authenticated {
            true => text.clone(),
            false => text.replace('\0', "\u{FFFD}"),
        };
        prop_assert_eq!(&payload, &sent);
        server.respond(0, &id, &text).unwrap();
        let (lines, _, _) = drain(&mut || server.poll_output(0));
        prop_assert!(!lines.is_empty());
        for line in &lines {
            prop_assert!(line.len() + 2 + worst_prefix_len(&nick) <= 512, "{} bytes", line.len());
            prop_assert_eq!(line.contains(" :OA1A "), authenticated);
            client.handle_line(0, format!(":peer!~p@h {line}").as_bytes());
        }
        let (_, events, _) = drain(&mut || client.poll_output(0));
        prop_assert_eq!(
            events,
            vec![Event::Response { id, text: sent, truncated: false }]
        );
    }

    /// Arbitrary lines never panic an endpoint or leave anything buffered.
    #[test]
    fn arbitrary_lines_are_harmless(lines in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..600), 0..50)) {
        let mut client = Client::new(Config::new("#desk", "desk"), 1);
        let mut server = Server::new(Config::new("#desk", "bot"));
        for line in &lines {
            client.handle_line(5, line);
            server.handle_line(5, line);
        }
        drain(&mut || client.poll_output(5));
        drain(&mut || server.poll_output(5));
        prop_assert_eq!(client.stats().bytes_buffered, 0);
        prop_assert_eq!(server.stats().bytes_buffered, 0);
    }
}

#[test]
fn garbage_flood_is_counted_and_ignored() {
    let mut rng = IdGenerator::new(99);
    let mut client = Client::new(Config::new("#desk", "desk"), 1);
    let id = client.request(0, "ls", None).unwrap();
    drain(&mut || client.poll_output(0));
    let templates = [
        "PRIVMSG #desk :OA1 RES {id} {n} 1 {junk}",
        ":x!y@z PRIVMSG #desk :OA1 RES {id} 0 1 junk",
        ":x!y@z PRIVMSG #desk :OA1 RES {id} {n} 7 junk",
        ":x!y@z PRIVMSG #desk :OA1 RES bad.id 1 0 junk",
        ":x!y@z NOTICE #desk :OA1 RES {id} 1 0 junk",
        ":x!y@z PRIVMSG #other :OA1 RES {id} 1 0 junk",
        ":x!y@z PRIVMSG #desk :hello {junk}",
        "{junk}",
    ];
    for i in 0..50_000u64 {
        let junk = rng.next_id();
        let t = templates[(rng.next_u64() % templates.len() as u64) as usize];
        let line = t
            .replace("{id}", &id)
            .replace("{n}", &(i % 7 + 2).to_string())
            .replace("{junk}", &junk);
        client.handle_line(1, line.as_bytes());
    }
    // Binary garbage and invalid UTF-8 too.
    for i in 0..5_000u32 {
        let bytes: Vec<u8> = i.to_le_bytes().iter().cycle().take(40).copied().collect();
        client.handle_line(1, &bytes);
        client.handle_line(1, b":x!y@z PRIVMSG #desk :OA1 RES abc 1 0 \xff\xfe");
    }
    let stats = client.stats();
    assert_eq!(stats.lines_in, 60_000);
    assert!(stats.ignored > 40_000, "{stats:?}");
    assert!(stats.invalid_lines >= 5_000);
    assert_eq!(client.in_flight(), 1, "the request is still waiting");
    assert!(stats.bytes_buffered < 64 * 1024, "{stats:?}");
    let (_, events, _) = drain(&mut || client.poll_output(1));
    assert!(events.is_empty());
}

#[test]
fn partial_stream_flood_is_bounded_and_expires() {
    let mut cfg = Config::new("#desk", "bot");
    cfg.pacing = Pacing::UNLIMITED;
    let mut server = Server::new(cfg);
    let chunk = "x".repeat(200);
    for i in 0..10_000 {
        let line = format!(":attacker!~a@h PRIVMSG #desk :OA1 REQ id{i} 1 1 {chunk}");
        server.handle_line(0, line.as_bytes());
    }
    let buffered = server.stats().bytes_buffered;
    assert!(
        buffered <= 64 * 240,
        "only max_streams streams are kept: {buffered}"
    );
    assert!(server.stats().stale_frames >= 10_000 - 64);
    // Nothing is answered before the partial timeout...
    let (lines, events, deadline) = drain(&mut || server.poll_output(9_999));
    assert!(lines.is_empty() && events.is_empty());
    assert_eq!(deadline, 10_000);
    // ...then each kept stream gets one ERR incomplete, and nothing stays buffered.
    let (lines, _, _) = drain(&mut || server.poll_output(10_000));
    assert_eq!(lines.len(), 64);
    assert!(lines.iter().all(|l| l.contains(" 1 0 incomplete: ")));
    assert_eq!(server.stats().bytes_buffered, 0);
    assert_eq!(server.stats().incomplete, 64);
}

#[test]
fn duplicate_flood_keeps_memory_flat() {
    let mut cfg = Config::new("#desk", "bot");
    cfg.pacing = Pacing::UNLIMITED;
    let mut server = Server::new(cfg);
    let line = ":desk!~d@h PRIVMSG #desk :OA1 REQ abc 1 1 same chunk";
    for _ in 0..100_000 {
        server.handle_line(0, line.as_bytes());
    }
    let stats = server.stats();
    assert_eq!(stats.duplicates, 99_999);
    assert!(stats.bytes_buffered < 100);
}

#[test]
fn over_long_lines_are_dropped() {
    let mut client = Client::new(Config::new("#desk", "desk"), 1);
    let id = client.request(0, "x", None).unwrap();
    let huge = format!(
        ":bot!~b@h PRIVMSG #desk :OA1 RES {id} 1 0 {}",
        "y".repeat(1 << 20)
    );
    client.handle_line(0, huge.as_bytes());
    assert_eq!(client.stats().invalid_lines, 1);
    assert_eq!(client.in_flight(), 1);
}

#[test]
fn out_of_order_flood_on_a_response_is_bounded() {
    let mut client = Client::new(Config::new("#desk", "desk"), 1);
    let id = client.request(0, "x", Some(1_000_000)).unwrap();
    for seq in 2..20_000u32 {
        let line = format!(
            ":bot!~b@h PRIVMSG #desk :OA1 RES {id} {seq} 1 {}",
            "z".repeat(200)
        );
        client.handle_line(0, line.as_bytes());
    }
    let buffered = client.stats().bytes_buffered;
    assert!(buffered <= 128 * 1024 + 1024, "{buffered}");
    // The gap never fills: the request fails as incomplete after the partial timeout.
    let (_, events, _) = drain(&mut || client.poll_output(10_000));
    assert!(matches!(
        events.as_slice(),
        [Event::Failed {
            failure: deskwire::oa1::Failure::Incomplete,
            ..
        }]
    ));
    drain(&mut || client.poll_output(100_000));
    assert_eq!(client.stats().bytes_buffered, 0);
}

/// Lines are not checked for UTF-8 one by one: a message is checked once it is whole. A peer
/// that cuts inside a code point still gets its text across, and bytes that are not UTF-8 become
/// U+FFFD instead of silently losing the line (which would leave a gap and fail the request).
#[test]
fn utf8_is_checked_on_the_whole_message() {
    let mut client = Client::new(Config::new("#desk", "desk"), 1);
    let id = client.request(0, "x", None).unwrap();
    drain(&mut || client.poll_output(0));
    let emoji = "🙂".as_bytes();
    let frame = |seq: u32, more: u8, payload: &[u8]| {
        let mut line = format!(":bot!~b@h PRIVMSG #desk :OA1 RES {id} {seq} {more} ").into_bytes();
        line.extend_from_slice(payload);
        line
    };
    client.handle_line(1, &frame(1, 1, &[b"ok ", &emoji[..2]].concat()));
    client.handle_line(1, &frame(2, 1, &emoji[2..]));
    client.handle_line(1, &frame(3, 0, b" bad \xff end"));
    let (_, events, _) = drain(&mut || client.poll_output(1));
    assert_eq!(
        events,
        vec![Event::Response {
            id,
            text: "ok 🙂 bad \u{FFFD} end".to_owned(),
            truncated: false,
        }]
    );
    assert_eq!(client.stats().bytes_buffered, 0);
}

/// A peer that floods past `max_streams` with whole requests and never lets one finish: the
/// first `max_streams` are taken, each later one is answered `ERR busy` while the outbox holds
/// fewer than four lines per stream, and past that nothing more is queued, so the outbox does
/// not grow with the flood (and each refusal costs the same, not a read of the whole outbox).
#[test]
fn a_flood_of_requests_past_max_streams_leaves_a_bounded_outbox() {
    let mut cfg = Config::new("#desk", "bot");
    cfg.pacing = Pacing::UNLIMITED;
    cfg.allowed_sender = Some("desk".into());
    let mut server = Server::new(cfg.clone());
    for i in 0..8_000 {
        let line = format!(":desk!~d@h PRIVMSG #desk :OA1 REQ q{i} 1 0 echo\\s{i}");
        server.handle_line(0, line.as_bytes());
    }
    let (lines, events, _) = drain(&mut || server.poll_output(0));
    let requests = events
        .iter()
        .filter(|e| matches!(e, Event::Request { .. }))
        .count();
    assert_eq!(
        requests, cfg.max_streams,
        "the first max_streams are served"
    );
    let busy: Vec<&String> = lines.iter().filter(|l| l.contains(" busy:")).collect();
    assert_eq!(busy.len(), 4 * cfg.max_streams, "{} lines", lines.len());
    assert!(
        busy[0].contains(&format!("ERR q{} ", cfg.max_streams)),
        "{}",
        busy[0]
    );
    // Once the outbox has drained, a new request past the limit is refused again.
    server.handle_line(0, b":desk!~d@h PRIVMSG #desk :OA1 REQ late 1 0 echo");
    let (lines, _, _) = drain(&mut || server.poll_output(1));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("ERR late ") && l.contains("busy")),
        "{lines:?}"
    );
}

/// An authenticated sender whose clock sits at the top of `u64` (a host's bad epoch) repeats
/// its last timestamp instead of wrapping to 0 or panicking.
#[test]
fn an_authenticated_clock_at_the_top_of_u64_does_not_wrap() {
    let mut cfg = Config::new("#desk", "desk");
    cfg.pacing = Pacing::UNLIMITED;
    cfg.auth = Some(AuthConfig::new(b"0123456789abcdef".to_vec(), u64::MAX - 5));
    let mut client = Client::new(cfg, 1);
    let now = u64::MAX - 10;
    client.request(now, "x", None).unwrap();
    client.request(now, "y", None).unwrap();
    let (lines, _, _) = drain(&mut || client.poll_output(now));
    let stamps: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split(" :OA1A ").nth(1)?.split(' ').next())
        .collect();
    assert_eq!(stamps.len(), 2, "{lines:?}");
    assert_eq!(stamps[0], stamps[1], "saturated, not wrapped: {lines:?}");
}
