//! Authenticated frames between a desk and a remote on a virtual clock: forged, altered and
//! replayed frames are dropped before reassembly, a secret on one end only means nothing is
//! accepted (and the stats say why), and clock skew is bounded by the window.

use deskwire::oa1::{
    AuthConfig, Client, Config, Event, Failure, Output, Pacing, RefusalReason, Server, Stats,
};

const EPOCH: u64 = 1_790_000_000_000;

fn config(nick: &str, peer: &str, secret: Option<&str>, epoch: u64) -> Config {
    let mut config = Config::new("#desk", nick);
    config.allowed_sender = Some(peer.to_owned());
    config.pacing = Pacing::UNLIMITED;
    config.auth = secret.map(|s| AuthConfig::new(s.as_bytes().to_vec(), epoch));
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

/// The line as the other end receives it from the server.
fn relayed(from: &str, line: &str) -> String {
    format!(":{from}!~{from}@10.0.0.1 {line}")
}

struct Pair {
    desk: Client,
    remote: Server,
}

impl Pair {
    fn new(desk_secret: Option<&str>, remote_secret: Option<&str>) -> Self {
        Pair {
            desk: Client::new(config("desk", "deskbot", desk_secret, EPOCH), 11),
            remote: Server::new(config("deskbot", "desk", remote_secret, EPOCH)),
        }
    }

    /// Sends a request; returns its id and the lines the desk sent.
    fn ask(&mut self, now: u64, payload: &str) -> (String, Vec<String>) {
        let id = self.desk.request(now, payload, None).unwrap();
        let (lines, _) = drain(&mut || self.desk.poll_output(now));
        (id, lines)
    }

    fn deliver_to_remote(&mut self, now: u64, lines: &[String]) -> Vec<Event> {
        for line in lines {
            self.remote
                .handle_line(now, relayed("desk", line).as_bytes());
        }
        drain(&mut || self.remote.poll_output(now)).1
    }

    fn deliver_to_desk(&mut self, now: u64, lines: &[String]) -> Vec<Event> {
        for line in lines {
            self.desk
                .handle_line(now, relayed("deskbot", line).as_bytes());
        }
        drain(&mut || self.desk.poll_output(now)).1
    }
}

fn request_ids(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Request { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_round_trip_with_authenticated_frames() {
    let mut pair = Pair::new(Some("s3cret"), Some("s3cret"));
    let (id, lines) = pair.ask(0, "uname -a");
    assert_eq!(lines.len(), 1);
    assert!(lines[0].starts_with("PRIVMSG #desk :OA1A "), "{}", lines[0]);
    assert!(lines[0].ends_with(&format!(" REQ {id} 1 0 uname -a")));
    let events = pair.deliver_to_remote(100, &lines);
    assert_eq!(request_ids(&events), [id.as_str()]);
    let answer = "x".repeat(1000);
    pair.remote.respond(100, &id, &answer).unwrap();
    let (lines, _) = drain(&mut || pair.remote.poll_output(100));
    assert!(lines.len() > 4);
    assert!(lines.iter().all(|l| l.starts_with("PRIVMSG #desk :OA1A ")));
    let events = pair.deliver_to_desk(200, &lines);
    assert_eq!(
        events,
        [Event::Response {
            id,
            text: answer,
            truncated: false
        }]
    );
    assert_eq!(pair.desk.stats().forged + pair.remote.stats().forged, 0);
}

#[test]
fn a_forged_chunk_cannot_take_the_place_of_the_real_one() {
    let mut pair = Pair::new(Some("s3cret"), Some("s3cret"));
    let (id, lines) = pair.ask(0, "cat notes");
    pair.deliver_to_remote(10, &lines);
    pair.remote.respond(10, &id, "the real answer").unwrap();
    let (real, _) = drain(&mut || pair.remote.poll_output(10));
    // An attacker who sees the channel (and even uses the remote's nick) forges the first
    // chunk, and alters a copy of the real one, before the real one arrives.
    let real_text = real[0].strip_prefix("PRIVMSG #desk :").unwrap();
    let (header, _) = real_text.split_at(real_text.find(" RES ").unwrap());
    let forged = vec![
        format!("PRIVMSG #desk :{header} RES {id} 1 0 rm -rf is fine"),
        real[0].replace("the real answer", "the fake answer"),
        format!(
            "PRIVMSG #desk :OA1A {} AAAAAAAAAAAAAAAAAAAAAA RES {id} 1 0 x",
            "lz3xaqo0"
        ),
        format!("PRIVMSG #desk :OA1 RES {id} 1 0 plain spoof"),
    ];
    assert!(pair.deliver_to_desk(20, &forged).is_empty());
    let stats = pair.desk.stats();
    assert_eq!((stats.forged, stats.unauthenticated), (3, 1));
    assert_eq!(stats.duplicates, 0, "nothing forged reached reassembly");
    assert_eq!(
        pair.deliver_to_desk(30, &real),
        [Event::Response {
            id,
            text: "the real answer".into(),
            truncated: false
        }]
    );
}

#[test]
fn a_replayed_request_never_runs_twice() {
    let mut pair = Pair::new(Some("s3cret"), Some("s3cret"));
    let (id, lines) = pair.ask(0, "deploy");
    assert_eq!(
        request_ids(&pair.deliver_to_remote(10, &lines)),
        [id.as_str()]
    );
    pair.remote.respond(10, &id, "done").unwrap();
    drain(&mut || pair.remote.poll_output(10));
    // Within the window the tag is remembered.
    assert!(pair.deliver_to_remote(5_000, &lines).is_empty());
    assert_eq!(pair.remote.stats().replayed, 1);
    // After it, the timestamp is too old.
    assert!(pair.deliver_to_remote(60_001, &lines).is_empty());
    assert_eq!(pair.remote.stats().expired, 1);
    // A replay into a fresh remote (which remembers nothing) is still too old.
    let mut fresh = Server::new(config("deskbot", "desk", Some("s3cret"), EPOCH));
    for line in &lines {
        fresh.handle_line(120_000, relayed("desk", line).as_bytes());
    }
    assert!(drain(&mut || fresh.poll_output(120_000)).1.is_empty());
    assert_eq!(fresh.stats().expired, 1);
}

#[test]
fn a_secret_on_one_end_only_means_nothing_is_accepted() {
    // Desk with a secret, remote without: the remote ignores the authenticated frames.
    let mut pair = Pair::new(Some("s3cret"), None);
    let (_, lines) = pair.ask(0, "ls");
    assert!(pair.deliver_to_remote(10, &lines).is_empty());
    let Stats {
        auth_unexpected,
        frames_in,
        ..
    } = pair.remote.stats();
    assert_eq!((auth_unexpected, frames_in), (1, 0));

    // Remote with a secret, desk without: the remote ignores the plain frames.
    let mut pair = Pair::new(None, Some("s3cret"));
    let (_, lines) = pair.ask(0, "ls");
    assert!(pair.deliver_to_remote(10, &lines).is_empty());
    assert_eq!(pair.remote.stats().unauthenticated, 1);

    // Different secrets: forged, both ways.
    let mut pair = Pair::new(Some("one"), Some("two"));
    let (_, lines) = pair.ask(0, "ls");
    assert!(pair.deliver_to_remote(10, &lines).is_empty());
    assert_eq!(pair.remote.stats().forged, 1);
}

/// The remote's last refusal, as its host would log it.
fn refusal(remote: &Server) -> (String, RefusalReason, u64) {
    let last = remote.last_refused().expect("a refusal was recorded");
    (last.source.clone(), last.reason.clone(), last.count)
}

/// The desk's timeout, `ms` after its request was made at 0.
fn timeout_message(desk: &mut Client, ms: u64) -> String {
    let (_, events) = drain(&mut || desk.poll_output(ms));
    match events.as_slice() {
        [
            Event::Failed {
                failure: failure @ Failure::Timeout { .. },
                ..
            },
        ] => failure.message(),
        other => panic!("expected one timeout, got {other:?}"),
    }
}

#[test]
fn a_refused_request_is_named_by_the_remote_and_explained_by_the_desk_timeout() {
    // Each mismatch a new user makes: the remote records who and why (rexd logs it), and the
    // desk, which hears nothing back, says so in its timeout instead of a bare `timeout`.
    let cases: [(Option<&str>, Option<&str>, RefusalReason, &str); 3] = [
        (
            None,
            Some("s3cret"),
            RefusalReason::Unauthenticated,
            "the sender needs the same secret",
        ),
        (
            Some("s3cret"),
            None,
            RefusalReason::AuthUnexpected,
            "this end has none",
        ),
        (
            Some("one"),
            Some("two"),
            RefusalReason::Forged,
            "different secrets",
        ),
    ];
    for (desk_secret, remote_secret, reason, advice) in cases {
        let mut pair = Pair::new(desk_secret, remote_secret);
        let (_, lines) = pair.ask(0, "ls");
        assert!(pair.deliver_to_remote(10, &lines).is_empty());
        let (source, got, count) = refusal(&pair.remote);
        assert_eq!(
            (source.as_str(), &got, count),
            ("desk!~desk@10.0.0.1", &reason, 1)
        );
        let logged = pair.remote.last_refused().unwrap().to_string();
        assert!(
            logged.starts_with("refused an OA1 frame from desk!~desk@10.0.0.1: "),
            "{logged}"
        );
        assert!(logged.contains(advice), "{logged}");

        let message = timeout_message(&mut pair.desk, 30_000);
        assert!(message.starts_with("no complete response before the request timeout"));
        assert!(message.contains("no OA1 frame came back"), "{message}");
        assert!(message.contains("--allow-from"), "{message}");
    }

    // A nick the remote's allowed sender does not name.
    let mut pair = Pair::new(None, None);
    pair.remote = Server::new(config("deskbot", "bob", None, EPOCH));
    let (_, lines) = pair.ask(0, "ls");
    assert!(pair.deliver_to_remote(10, &lines).is_empty());
    let (_, reason, _) = refusal(&pair.remote);
    assert_eq!(reason, RefusalReason::DisallowedSender("bob".into()));
    assert!(
        pair.remote
            .last_refused()
            .unwrap()
            .to_string()
            .contains("its sender is not bob")
    );
    assert!(pair.desk.last_refused().is_none());
}

#[test]
fn answers_the_desk_refuses_are_named_in_its_timeout() {
    // The remote answers, but the desk's allowed sender is another nick: the answer is dropped
    // here, and the timeout says from whom and why.
    let mut pair = Pair::new(None, None);
    pair.desk = Client::new(config("desk", "rexd", None, EPOCH), 11);
    let (id, lines) = pair.ask(0, "uname -a");
    assert_eq!(
        request_ids(&pair.deliver_to_remote(10, &lines)),
        [id.as_str()]
    );
    pair.remote.respond(10, &id, "Linux").unwrap();
    let (answer, _) = drain(&mut || pair.remote.poll_output(10));
    assert!(pair.deliver_to_desk(20, &answer).is_empty());
    let message = timeout_message(&mut pair.desk, 30_000);
    assert_eq!(
        message,
        "no complete response before the request timeout; meanwhile this end refused 1 OA1 \
         frame, the last from deskbot!~deskbot@10.0.0.1: its sender is not rexd, the only one \
         this end takes frames from (rexd's --allow-from, a desk's allowed_sender)"
    );
    // The count goes on across requests; a later timeout counts only its own.
    let (_, lines) = pair.ask(30_000, "true");
    pair.deliver_to_remote(30_010, &lines);
    let message = timeout_message(&mut pair.desk, 60_000);
    assert!(message.contains("no OA1 frame came back"), "{message}");
    assert_eq!(pair.desk.last_refused().unwrap().count, 1);
}

#[test]
fn clock_skew_within_the_window_is_tolerated() {
    for (skew_ms, accepted) in [
        (0i64, true),
        (45_000, true),
        (-45_000, true),
        (61_000, false),
    ] {
        let desk_epoch = EPOCH.checked_add_signed(skew_ms).unwrap();
        let mut desk = Client::new(config("desk", "deskbot", Some("k"), desk_epoch), 1);
        let mut remote = Server::new(config("deskbot", "desk", Some("k"), EPOCH));
        desk.request(0, "date", None).unwrap();
        let (lines, _) = drain(&mut || desk.poll_output(0));
        for line in &lines {
            remote.handle_line(0, relayed("desk", line).as_bytes());
        }
        let (_, events) = drain(&mut || remote.poll_output(0));
        assert_eq!(events.len() == 1, accepted, "skew {skew_ms}");
        assert_eq!(
            remote.stats().expired,
            u64::from(!accepted),
            "skew {skew_ms}"
        );
    }
}

#[test]
fn cancels_and_errors_are_authenticated_too() {
    let mut pair = Pair::new(Some("k"), Some("k"));
    let (id, lines) = pair.ask(0, "sleep 60");
    pair.deliver_to_remote(1, &lines);
    pair.desk.cancel(2, &id, "user").unwrap();
    let (cancel, _) = drain(&mut || pair.desk.poll_output(2));
    assert!(cancel[0].starts_with("PRIVMSG #desk :OA1A ") && cancel[0].contains(" CANCEL "));
    let events = pair.deliver_to_remote(3, &cancel);
    assert_eq!(
        events,
        [Event::Cancelled {
            id,
            reason: "user".into()
        }]
    );
    let (id, lines) = pair.ask(4, "false");
    pair.deliver_to_remote(5, &lines);
    pair.remote.fail(5, &id, "exit_status", "1").unwrap();
    let (err, _) = drain(&mut || pair.remote.poll_output(5));
    assert!(err[0].contains(" ERR "));
    let events = pair.deliver_to_desk(6, &err);
    assert!(
        matches!(&events[..], [Event::Failed { failure, .. }] if failure.code() == "exit_status")
    );
}

#[test]
fn a_server_that_trims_lines_breaks_no_tag_and_loses_no_byte() {
    // The secret's holders are deskwire ends: spaces that end a frame travel as `\s`, so what a
    // trimming server (ngircd) delivers still carries a valid tag; NUL travels as `\0`.
    let trim = |lines: Vec<String>| -> Vec<String> {
        lines.into_iter().map(|l| l.trim_end().to_owned()).collect()
    };
    let mut pair = Pair::new(Some("s3cret"), Some("s3cret"));
    let (id, lines) = pair.ask(0, "echo 'ends with spaces  '  ");
    let events = pair.deliver_to_remote(100, &trim(lines));
    assert!(
        matches!(&events[..], [Event::Request { payload, .. }] if payload == "echo 'ends with spaces  '  "),
        "{events:?}"
    );
    let answer = format!("nul:\0 {}  ", "word ".repeat(100));
    pair.remote.respond(100, &id, &answer).unwrap();
    let (lines, _) = drain(&mut || pair.remote.poll_output(100));
    let events = pair.deliver_to_desk(200, &trim(lines));
    assert_eq!(
        events,
        [Event::Response {
            id,
            text: answer,
            truncated: false
        }]
    );
    assert_eq!(pair.desk.stats().forged + pair.remote.stats().forged, 0);
}
