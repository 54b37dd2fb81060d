//! Compressed streams negotiated per request, between desk and remote on a virtual clock:
//! spec-only peers keep working both ways, the answer streams while the command runs, the cap
//! holds for the decompressed text (bombs included), and broken streams fail cleanly.

use deskwire::oa1::compress;
use deskwire::oa1::{
    AuthConfig, Client, Config, Event, Failure, Output, Pacing, Server, TRUNCATION_MARKER,
};

fn config(nick: &str, peer: &str, compression: bool) -> Config {
    let mut config = Config::new("#desk", nick);
    config.allowed_sender = Some(peer.to_owned());
    config.pacing = Pacing::UNLIMITED;
    config.compression = compression;
    config
}

fn drain(poll: &mut dyn FnMut() -> Output) -> (Vec<String>, Vec<Event>) {
    let (mut lines, mut events) = (Vec::new(), Vec::new());
    loop {
        match poll() {
            Output::Transmit(l) => lines.push(l),
            Output::Event(e) => events.push(e),
            Output::Timeout(_) => return (lines, events),
        }
    }
}

fn deliver(from: &str, lines: &[String], to: &mut dyn FnMut(&[u8])) {
    for line in lines {
        to(format!(":{from}!~{from}@10.0.0.1 {line}").as_bytes());
    }
}

/// A long `ls -la`-style listing: the typical RemoteBash output.
fn listing(bytes: usize) -> String {
    let mut out = String::from("total 1184\n");
    let mut i = 0u32;
    while out.len() < bytes {
        out.push_str(&format!(
            "-rw-r--r--  1 deploy deploy {:>7} Nov {:>2} {:02}:{:02} report-{i:05}.{}\n",
            (i * 7919) % 900_000,
            1 + i % 28,
            i % 24,
            (i * 7) % 60,
            ["log", "json", "csv", "txt"][i as usize % 4]
        ));
        i += 1;
    }
    out.truncate(bytes);
    out
}

/// Runs one request through both ends; returns the desk's lines, the remote's lines and the
/// desk's event.
fn exchange(
    desk: &mut Client,
    remote: &mut Server,
    now: u64,
    command: &str,
    answer: &str,
) -> (Vec<String>, Vec<String>, Event) {
    desk.request(now, command, None).unwrap();
    let (desk_lines, _) = drain(&mut || desk.poll_output(now));
    deliver("desk", &desk_lines, &mut |l| remote.handle_line(now, l));
    let (_, events) = drain(&mut || remote.poll_output(now));
    let Some(Event::Request { id, payload, .. }) = events.into_iter().next() else {
        panic!("no request");
    };
    assert_eq!(payload, command);
    remote.respond(now, &id, answer).unwrap();
    let (remote_lines, _) = drain(&mut || remote.poll_output(now));
    deliver("deskbot", &remote_lines, &mut |l| desk.handle_line(now, l));
    let (_, mut events) = drain(&mut || desk.poll_output(now));
    assert_eq!(events.len(), 1, "{events:?}");
    (desk_lines, remote_lines, events.remove(0))
}

fn response(text: &str, event: Event) {
    match event {
        Event::Response {
            text: got,
            truncated: false,
            ..
        } => assert!(got == text, "{} bytes, expected {}", got.len(), text.len()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn both_ends_compress_and_the_answer_takes_far_fewer_lines() {
    let text = listing(64 * 1024);
    let mut desk = Client::new(config("desk", "deskbot", true), 1);
    let mut remote = Server::new(config("deskbot", "desk", true));
    let (asked, answered, event) = exchange(&mut desk, &mut remote, 0, "ls -la", &text);
    assert!(asked[0].contains(" :OA1 ACCEPT ") && asked[0].ends_with(" 1 0 deflate"));
    assert!(asked[1].contains(" :OA1 REQ "));
    assert!(answered.iter().all(|l| l.contains(" :OA1 RESZ ")));
    response(&text, event);

    let mut plain_desk = Client::new(config("desk", "deskbot", false), 1);
    let mut plain_remote = Server::new(config("deskbot", "desk", false));
    let (_, readable, _) = exchange(&mut plain_desk, &mut plain_remote, 0, "ls -la", &text);
    assert!(
        answered.len() * 4 < readable.len(),
        "{} compressed lines against {} readable",
        answered.len(),
        readable.len()
    );
    assert_eq!(desk.stats().compressed_in, 1);
    assert_eq!(remote.stats().compressed_out, 1);
}

#[test]
fn a_spec_only_remote_ignores_the_offer_and_the_desk_takes_its_plain_answer() {
    let text = listing(5000);
    let mut desk = Client::new(config("desk", "deskbot", true), 1);
    let mut remote = Server::new(config("deskbot", "desk", false));
    let (_, answered, event) = exchange(&mut desk, &mut remote, 0, "ls", &text);
    assert!(answered.iter().all(|l| l.contains(" :OA1 RES ")));
    response(&text, event);
    assert_eq!(remote.stats().stale_frames, 1, "the ACCEPT frame");
    // Not having seen a compressed answer, the desk offers again instead of compressing.
    desk.request(1, &"x".repeat(3000), None).unwrap();
    let (lines, _) = drain(&mut || desk.poll_output(1));
    assert!(lines[0].contains(" :OA1 ACCEPT "));
    assert!(lines[1..].iter().all(|l| l.contains(" :OA1 REQ ")));
}

#[test]
fn a_desk_that_does_not_offer_gets_the_v40_frames() {
    let text = listing(5000);
    let mut desk = Client::new(config("desk", "deskbot", false), 1);
    let mut remote = Server::new(config("deskbot", "desk", true));
    let (asked, answered, event) = exchange(&mut desk, &mut remote, 0, "ls", &text);
    assert!(asked.iter().all(|l| l.contains(" :OA1 REQ ")));
    assert!(answered.iter().all(|l| l.contains(" :OA1 RES ")));
    response(&text, event);
}

#[test]
fn once_the_peer_compressed_large_requests_go_compressed() {
    let mut desk = Client::new(config("desk", "deskbot", true), 1);
    let mut remote = Server::new(config("deskbot", "desk", true));
    exchange(&mut desk, &mut remote, 0, "true", "");
    let script = listing(20 * 1024);
    let (asked, answered, event) = exchange(&mut desk, &mut remote, 1, &script, "done\n");
    assert!(
        asked.iter().all(|l| l.contains(" :OA1 REQZ ")),
        "{}",
        asked[0]
    );
    assert!(asked.len() * 4 < script.len() / 240);
    assert!(answered.iter().all(|l| l.contains(" :OA1 RESZ ")));
    response("done\n", event);
    assert_eq!(remote.stats().compressed_in, 1);
    // A short request stays one readable frame, with its offer.
    let (asked, _, _) = exchange(&mut desk, &mut remote, 2, "ls", "x");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains(" :OA1 REQZ "));
}

#[test]
fn the_answer_streams_while_the_command_runs() {
    let mut desk = Client::new(config("desk", "deskbot", true), 1);
    let mut server_cfg = config("deskbot", "desk", true);
    server_cfg.pacing = Pacing::steady(1, 1000);
    let mut remote = Server::new(server_cfg);
    desk.request(0, "tail -f log", None).unwrap();
    let (lines, _) = drain(&mut || desk.poll_output(0));
    deliver("desk", &lines, &mut |l| remote.handle_line(0, l));
    let (_, events) = drain(&mut || remote.poll_output(0));
    let Some(Event::Request { id, .. }) = events.into_iter().next() else {
        panic!()
    };
    let mut sent_before_finish = 0;
    let mut all = Vec::new();
    let mut expected = String::new();
    for second in 0..5u64 {
        let now = second * 1000 + 100;
        let piece = listing(3000 + second as usize * 10);
        expected.push_str(&piece);
        remote.send(now, &id, &piece).unwrap();
        let (lines, _) = drain(&mut || remote.poll_output(now + 50));
        sent_before_finish += lines.len();
        all.extend(lines);
    }
    assert!(
        sent_before_finish >= 4,
        "{sent_before_finish} frames before the end"
    );
    remote.finish(5000, &id).unwrap();
    for t in 0..100 {
        let (lines, _) = drain(&mut || remote.poll_output(5000 + t * 1000));
        all.extend(lines);
    }
    deliver("deskbot", &all, &mut |l| desk.handle_line(200_000, l));
    let (_, events) = drain(&mut || desk.poll_output(200_000));
    assert_eq!(events.len(), 1);
    response(&expected, events.into_iter().next().unwrap());
}

#[test]
fn the_cap_holds_for_the_decompressed_text_and_bombs_never_inflate_past_it() {
    let mut desk = Client::new(config("desk", "deskbot", true), 1);
    let id = desk.request(0, "cat /dev/zero", None).unwrap();
    drain(&mut || desk.poll_output(0));
    // 64 MiB of zeros compress to about 64 KiB of base64: a bomb from a hostile remote.
    let bomb = compress::compress(&vec![b'0'; 64 << 20]);
    let chunks: Vec<&str> = bomb
        .as_bytes()
        .chunks(400)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let more = u8::from(i + 1 < chunks.len());
        let line = format!(
            ":deskbot!~b@h PRIVMSG #desk :OA1 RESZ {id} {} {more} {chunk}",
            i + 1
        );
        desk.handle_line(1, line.as_bytes());
    }
    let (_, events) = drain(&mut || desk.poll_output(1));
    match &events[..] {
        [
            Event::Response {
                text, truncated, ..
            },
        ] => {
            assert!(*truncated);
            assert_eq!(text.len(), 128 * 1024 + TRUNCATION_MARKER.len());
            assert!(text.ends_with(TRUNCATION_MARKER));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(desk.stats().bytes_buffered, 0);

    // A compressed request over the cap is refused as too large.
    let big = compress::compress(&vec![b'1'; 300 * 1024]);
    let line = format!(":desk!~d@h PRIVMSG #desk :OA1 REQZ q1 1 0 {big}");
    let mut config_long = config("deskbot", "desk", true);
    config_long.max_line_bytes = 1 << 20;
    let mut remote_long = Server::new(config_long);
    remote_long.handle_line(0, line.as_bytes());
    let (lines, events) = drain(&mut || remote_long.poll_output(0));
    assert!(events.is_empty());
    assert!(lines[0].ends_with("OA1 ERR q1 1 0 too_large: request exceeds 131072 bytes"));
}

#[test]
fn broken_streams_fail_the_request() {
    let mut desk = Client::new(config("desk", "deskbot", true), 1);
    let id = desk.request(0, "ls", None).unwrap();
    drain(&mut || desk.poll_output(0));
    desk.handle_line(
        1,
        format!(":deskbot!~b@h PRIVMSG #desk :OA1 RESZ {id} 1 0 bm90IGRlZmxhdGU=").as_bytes(),
    );
    let (_, events) = drain(&mut || desk.poll_output(1));
    assert!(
        matches!(
            &events[..],
            [Event::Failed {
                failure: Failure::Malformed { .. },
                ..
            }]
        ),
        "{events:?}"
    );

    let mut remote = Server::new(config("deskbot", "desk", true));
    remote.handle_line(0, b":desk!~d@h PRIVMSG #desk :OA1 REQZ q2 1 0 !!!");
    let (lines, events) = drain(&mut || remote.poll_output(0));
    assert!(events.is_empty());
    assert!(
        lines[0].contains("OA1 ERR q2 1 0 malformed: "),
        "{}",
        lines[0]
    );
}

#[test]
fn compressed_and_authenticated_together() {
    let auth = AuthConfig::new(b"k".to_vec(), 1_790_000_000_000);
    let mut desk_cfg = config("desk", "deskbot", true);
    desk_cfg.auth = Some(auth.clone());
    let mut remote_cfg = config("deskbot", "desk", true);
    remote_cfg.auth = Some(auth);
    let mut desk = Client::new(desk_cfg, 1);
    let mut remote = Server::new(remote_cfg);
    let text = listing(30_000);
    let (asked, answered, event) = exchange(&mut desk, &mut remote, 0, "ls", &text);
    assert!(asked[0].contains(" :OA1A ") && asked[0].contains(" ACCEPT "));
    assert!(
        answered
            .iter()
            .all(|l| l.contains(" :OA1A ") && l.contains(" RESZ "))
    );
    assert!(answered.iter().all(|l| l.len() + 2 + 92 <= 512));
    response(&text, event);
}

#[test]
fn offers_are_bounded() {
    let mut remote = Server::new(config("deskbot", "desk", true));
    for i in 0..10_000 {
        let line = format!(":desk!~d@h PRIVMSG #desk :OA1 ACCEPT o{i} 1 0 deflate");
        remote.handle_line(0, line.as_bytes());
    }
    // The last offers are still known; a request for one of them gets a compressed answer.
    remote.handle_line(0, b":desk!~d@h PRIVMSG #desk :OA1 REQ o9999 1 0 ls");
    let (_, events) = drain(&mut || remote.poll_output(0));
    assert_eq!(events.len(), 1);
    remote.respond(0, "o9999", "x").unwrap();
    let (lines, _) = drain(&mut || remote.poll_output(0));
    assert!(lines[0].contains(" RESZ o9999 "));
    // An offer expires with the partial timeout.
    remote.handle_line(0, b":desk!~d@h PRIVMSG #desk :OA1 ACCEPT late 1 0 deflate");
    remote.handle_line(20_000, b":desk!~d@h PRIVMSG #desk :OA1 REQ late 1 0 ls");
    drain(&mut || remote.poll_output(20_000));
    remote.respond(20_000, "late", "x").unwrap();
    let (lines, _) = drain(&mut || remote.poll_output(20_000));
    assert!(lines[0].contains(" RES late "), "{}", lines[0]);
}

/// The payloads of `lines` (`PRIVMSG #desk :OA1 TYPE ID SEQ MORE PAYLOAD`) joined, as a
/// spec-only peer decodes them; `trim` drops each line's trailing spaces as ngircd does.
fn as_spec_peer_reads(lines: &[String], kind: &str, trim: bool) -> String {
    lines
        .iter()
        .filter_map(|l| l.split_once(" :OA1 ").map(|(_, frame)| frame))
        .filter(|frame| frame.starts_with(&format!("{kind} ")))
        .map(|frame| {
            let frame = if trim {
                frame.trim_end_matches(' ')
            } else {
                frame
            };
            let payload = frame.splitn(5, ' ').nth(4).unwrap_or("");
            deskwire::oa1::escape::unescape_v40(payload)
        })
        .collect()
}

#[test]
fn toward_a_peer_not_known_to_be_deskwire_only_the_specs_escapes_go() {
    let text = "nul:\0:end\nends with spaces  ";
    // The desk's REQ, to a remote it knows nothing about.
    let mut desk = Client::new(config("desk", "deskbot", false), 1);
    desk.request(0, text, None).unwrap();
    let (asked, _) = drain(&mut || desk.poll_output(0));
    assert!(
        asked
            .iter()
            .all(|l| !l.contains("\\0") && !l.contains("\\s")),
        "{asked:?}"
    );
    let expected = "nul:\u{FFFD}:end\nends with spaces  ";
    assert_eq!(as_spec_peer_reads(&asked, "REQ", false), expected);
    // A server that trims lines eats the final spaces, exactly as a spec-only sender's.
    assert_eq!(as_spec_peer_reads(&asked, "REQ", true), expected.trim_end());

    // The remote's RES, streamed in pieces that end with spaces, to a desk that offered nothing.
    let mut remote = Server::new(config("deskbot", "desk", true));
    remote.handle_line(0, b":desk!~desk@h PRIVMSG #desk :OA1 REQ r1 1 0 cmd");
    drain(&mut || remote.poll_output(0));
    let mut answered = Vec::new();
    for (t, piece) in [
        (1, "nul:\0:end\n"),
        (100, "word  "),
        (200, "next "),
        (300, "  "),
    ] {
        remote.send(t, "r1", piece).unwrap();
        // Past the flush delay: whatever may go goes.
        answered.extend(drain(&mut || remote.poll_output(t + 50)).0);
    }
    remote.finish(400, "r1").unwrap();
    answered.extend(drain(&mut || remote.poll_output(400)).0);
    assert!(answered.len() > 1, "streamed: {answered:?}");
    for line in &answered[..answered.len() - 1] {
        assert!(
            !line.ends_with(' '),
            "an inner frame ends with a space: {line:?}"
        );
    }
    assert!(
        answered
            .iter()
            .all(|l| !l.contains("\\0") && !l.contains("\\s"))
    );
    let whole = "nul:\u{FFFD}:end\nword  next   ";
    assert_eq!(as_spec_peer_reads(&answered, "RES", false), whole);
    assert_eq!(as_spec_peer_reads(&answered, "RES", true), whole.trim_end());
}

#[test]
fn once_the_remote_has_answered_compressed_the_desk_uses_deskwires_escapes() {
    let mut desk = Client::new(config("desk", "deskbot", true), 1);
    let mut remote = Server::new(config("deskbot", "desk", true));
    desk.request(0, "nul:\0 ", None).unwrap();
    let (asked, _) = drain(&mut || desk.poll_output(0));
    assert!(asked[1].ends_with(" 1 0 nul:\u{FFFD} "), "{asked:?}");
    let (_, answered, _) = exchange(&mut desk, &mut remote, 0, "hostname", "ok");
    assert!(answered.iter().all(|l| l.contains(" :OA1 RESZ ")));
    // The remote answered RESZ: it is deskwire, so NUL and a final space travel exactly now
    // (in a plain REQ: text that compresses badly, which would take more frames as REQZ).
    let mut noise = deskwire::oa1::IdGenerator::new(5);
    let mut text: String = (0..690)
        .map(|_| char::from(b' ' + (noise.next_u64() % 95) as u8))
        .collect();
    text.push_str("nul:\0 ");
    let (asked, _, event) = exchange(&mut desk, &mut remote, 1, &text, "ok");
    assert!(
        asked
            .iter()
            .all(|l| l.contains(" :OA1 REQ ") || l.contains(" :OA1 ACCEPT ")),
        "{asked:?}"
    );
    assert!(asked.last().unwrap().ends_with("nul:\\0\\s"), "{asked:?}");
    response("ok", event);
}
