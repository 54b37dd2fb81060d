//! The per-connection engines (`oa1::Desk`, `oa1::Remote`) against the in-memory IRC server
//! (`sim::Network`), on a virtual clock: the join orders, requests made before registration,
//! the end of the connection, kicks, and the JSON shapes the bindings see.

use deskwire::irc::{DisconnectReason, SessionEvent};
use deskwire::oa1::{
    ConnectionConfig, ConnectionEngine, ConnectionEvent, ConnectionOutput, ConnectionState,
    DEFAULT_PACING, Desk, Event, Failure, LinkEvent, LocalError, Pacing, Remote,
};
use deskwire::sim::{ClientId, Network};

/// What one drain of `poll_output` gave: the bytes written, the events, the deadline.
#[derive(Debug, Default)]
struct Drain {
    lines: Vec<String>,
    events: Vec<ConnectionEvent>,
    deadline: u64,
}

impl Drain {
    fn has_line(&self, prefix: &str) -> bool {
        self.lines.iter().any(|l| l.starts_with(prefix))
    }

    fn has_event(&self, event: &ConnectionEvent) -> bool {
        self.events.contains(event)
    }
}

/// Drains the engine once, writing what it transmits into the network.
fn drain(
    engine: &mut impl ConnectionEngine,
    net: &mut Network,
    client: ClientId,
    now: u64,
) -> Drain {
    let mut drain = Drain::default();
    loop {
        match engine.poll_output(now) {
            ConnectionOutput::Transmit(bytes) => {
                assert!(
                    bytes.ends_with(b"\r\n"),
                    "a transmit is one line with its CRLF"
                );
                assert!(bytes.len() <= net.linelen(), "{} bytes", bytes.len());
                net.handle_bytes(client, &bytes);
                drain
                    .lines
                    .push(String::from_utf8(bytes).unwrap().trim_end().to_owned());
            }
            ConnectionOutput::Event(event) => drain.events.push(event),
            ConnectionOutput::Timeout(deadline) => {
                assert!(deadline >= now);
                drain.deadline = deadline;
                return drain;
            }
        }
    }
}

/// Delivers what the network has for `client` and drains the engine once.
fn step(
    engine: &mut impl ConnectionEngine,
    net: &mut Network,
    client: ClientId,
    now: u64,
) -> Drain {
    let bytes = net.take_bytes(client);
    if !bytes.is_empty() {
        engine.handle_bytes(now, &bytes);
    }
    drain(engine, net, client, now)
}

fn desk_config() -> ConnectionConfig {
    let mut config = ConnectionConfig::new("desk", "#desk");
    config.oa1.allowed_sender = Some("deskbot".into());
    config.oa1.pacing = Pacing::UNLIMITED;
    config
}

fn remote_config() -> ConnectionConfig {
    let mut config = ConnectionConfig::new("deskbot", "#desk");
    config.oa1.allowed_sender = Some("desk".into());
    config.oa1.pacing = Pacing::UNLIMITED;
    config
}

fn ready() -> ConnectionEvent {
    ConnectionEvent::Link(LinkEvent::StateChanged {
        state: ConnectionState::Ready,
    })
}

/// Steps the engine until it is ready (at most a few round trips with the server).
fn bring_up(engine: &mut impl ConnectionEngine, net: &mut Network, client: ClientId, now: u64) {
    for _ in 0..5 {
        step(engine, net, client, now);
        if engine.state() == ConnectionState::Ready {
            return;
        }
    }
    panic!("not ready: {:?}", engine.state());
}

/// The remote (`deskbot`) and the desk with the default configs, each registered and in
/// `#desk` on one network: (network, desk's client, remote's client, desk, remote).
fn ready_pair() -> (Network, ClientId, ClientId, Desk, Remote) {
    let mut net = Network::new(1);
    let (d, r) = (net.connect("h1"), net.connect("h2"));
    let mut remote = Remote::new(remote_config(), 0).unwrap();
    bring_up(&mut remote, &mut net, r, 0);
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    bring_up(&mut desk, &mut net, d, 0);
    (net, d, r, desk, remote)
}

/// Steps both ends until the desk reports an OA1 event; returns it.
fn run_until_desk_event(
    desk: &mut Desk,
    remote: &mut Remote,
    net: &mut Network,
    (d, r): (ClientId, ClientId),
    now: u64,
) -> Event {
    for _ in 0..20 {
        let from_remote = step(remote, net, r, now);
        for event in from_remote.events {
            if let ConnectionEvent::Oa1(Event::Request { id, payload, .. }) = event {
                remote
                    .respond(now, &id, &format!("ran: {payload}\n"))
                    .unwrap();
            }
        }
        step(remote, net, r, now);
        for event in step(desk, net, d, now).events {
            if let ConnectionEvent::Oa1(event) = event {
                return event;
            }
        }
    }
    panic!("no answer");
}

#[test]
fn a_request_made_before_registration_leaves_in_the_drain_that_reports_the_join() {
    let mut net = Network::new(1);
    let (d, r) = (net.connect("10.0.0.1"), net.connect("10.0.0.2"));
    let mut remote = Remote::new(remote_config(), 0).unwrap();
    bring_up(&mut remote, &mut net, r, 0);

    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    let id = desk.request(0, "uname -a", None).unwrap();
    assert_eq!(desk.state(), ConnectionState::Registering);
    let first = drain(&mut desk, &mut net, d, 0);
    assert_eq!(first.lines, ["NICK desk", "USER desk 0 * deskwire"]);
    let registered = step(&mut desk, &mut net, d, 10);
    assert_eq!(registered.lines, ["JOIN #desk"], "no frame before the join");
    let joined = step(&mut desk, &mut net, d, 20);
    assert!(
        joined.has_event(&ConnectionEvent::Irc(SessionEvent::Joined {
            channel: "#desk".into()
        }))
    );
    assert!(joined.has_event(&ready()));
    // The offer of a compressed answer (deskwire's default), then the request.
    assert_eq!(
        joined.lines,
        [
            format!("PRIVMSG #desk :OA1 ACCEPT {id} 1 0 deflate"),
            format!("PRIVMSG #desk :OA1 REQ {id} 1 0 uname -a")
        ]
    );
    let answer = run_until_desk_event(&mut desk, &mut remote, &mut net, (d, r), 30);
    assert_eq!(
        answer,
        Event::Response {
            id,
            text: "ran: uname -a\n".into(),
            truncated: false
        }
    );
}

#[test]
fn a_desk_that_joins_after_the_remote() {
    let mut net = Network::new(1);
    let (d, r) = (net.connect("h1"), net.connect("h2"));
    let mut remote = Remote::new(remote_config(), 0).unwrap();
    bring_up(&mut remote, &mut net, r, 0);
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    drain(&mut desk, &mut net, d, 0);
    step(&mut desk, &mut net, d, 5); // 001 → JOIN
    assert_eq!(desk.state(), ConnectionState::Joining);
    let id = desk.request(6, "ls", None).unwrap();
    let joined = step(&mut desk, &mut net, d, 7);
    // The NAMES reply that came with the JOIN echo shows the remote: no wait for it.
    assert!(
        joined.has_event(&ConnectionEvent::Link(LinkEvent::PeerJoined {
            nick: "deskbot".into()
        }))
    );
    assert!(joined.has_event(&ready()));
    assert!(joined.has_line(&format!("PRIVMSG #desk :OA1 REQ {id} 1 0 ls")));
    let answer = run_until_desk_event(&mut desk, &mut remote, &mut net, (d, r), 8);
    assert!(matches!(answer, Event::Response { text, .. } if text == "ran: ls\n"));
}

#[test]
fn a_remote_that_joins_after_the_desk() {
    let mut net = Network::new(1);
    let (d, r) = (net.connect("h1"), net.connect("h2"));
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    for t in 0..3 {
        step(&mut desk, &mut net, d, t);
    }
    assert_eq!(desk.state(), ConnectionState::WaitingForPeer);
    let id = desk.request(3, "hostname", None).unwrap();
    let waiting = step(&mut desk, &mut net, d, 3);
    assert!(
        waiting.lines.is_empty(),
        "nobody to send to: {:?}",
        waiting.lines
    );
    assert!(
        waiting.deadline <= 3 + 30_000,
        "the ready timeout runs meanwhile"
    );

    let mut remote = Remote::new(remote_config(), 4).unwrap();
    bring_up(&mut remote, &mut net, r, 4);
    let peer = step(&mut desk, &mut net, d, 5);
    assert!(
        peer.has_event(&ConnectionEvent::Link(LinkEvent::PeerJoined {
            nick: "deskbot".into()
        }))
    );
    assert!(peer.has_event(&ready()));
    assert!(peer.has_line(&format!("PRIVMSG #desk :OA1 REQ {id} 1 0 hostname")));
    let answer = run_until_desk_event(&mut desk, &mut remote, &mut net, (d, r), 6);
    assert!(matches!(answer, Event::Response { text, .. } if text == "ran: hostname\n"));
}

#[test]
fn the_desk_waits_again_when_the_remote_leaves() {
    let (mut net, d, r, mut desk, mut remote) = ready_pair();
    remote.quit(1, "bye");
    drain(&mut remote, &mut net, r, 1);
    net.disconnect(r);
    let left = step(&mut desk, &mut net, d, 2);
    assert!(left.has_event(&ConnectionEvent::Link(LinkEvent::PeerLeft {
        nick: "deskbot".into()
    })));
    assert_eq!(desk.state(), ConnectionState::WaitingForPeer);
    desk.request(3, "held", None).unwrap();
    assert!(drain(&mut desk, &mut net, d, 3).lines.is_empty());
}

#[test]
fn a_desk_with_anyone_as_its_remote_waits_for_some_other_member() {
    let mut net = Network::new(1);
    let (d, other) = (net.connect("h1"), net.connect("h2"));
    let mut desk = Desk::new(desk_config().with_peer("*"), 0, 7).unwrap();
    let id = desk.request(0, "x", None).unwrap();
    for t in 0..3 {
        step(&mut desk, &mut net, d, t);
    }
    assert_eq!(desk.state(), ConnectionState::WaitingForPeer);
    assert_eq!(
        desk.waiting_for().as_deref(),
        Some("another member in #desk; members: none")
    );
    net.handle_bytes(other, b"NICK eve\r\nUSER eve 0 * eve\r\nJOIN #desk\r\n");
    let joined = step(&mut desk, &mut net, d, 3);
    assert!(
        joined.has_event(&ConnectionEvent::Link(LinkEvent::PeerJoined {
            nick: "eve".into()
        }))
    );
    assert!(joined.has_event(&ready()));
    assert!(joined.has_line(&format!("PRIVMSG #desk :OA1 REQ {id} 1 0 x")));
    assert_eq!(desk.members(), ["eve"]);
}

#[test]
fn configs_that_cannot_work_are_refused_when_the_engine_is_built() {
    use deskwire::irc::{InvalidName, SessionError};
    use deskwire::oa1::ConfigError;
    let desk = |config: ConnectionConfig| Desk::new(config, 0, 7).map(|_| ());
    assert_eq!(
        desk(ConnectionConfig::new("desk", "#desk")),
        Err(ConfigError::NoRemote),
        "a desk must say who answers it"
    );
    assert_eq!(
        desk(ConnectionConfig::new("desk", "desk").with_peer("rexd")),
        Err(ConfigError::Session(SessionError::InvalidChannel(
            "desk".into()
        )))
    );
    for nick in ["a b", "", "9lives", "x".repeat(31).as_str()] {
        assert_eq!(
            desk(ConnectionConfig::new(nick, "#desk").with_peer("rexd")),
            Err(ConfigError::Session(SessionError::InvalidNick(nick.into()))),
            "{nick:?} would have been renamed"
        );
    }
    assert_eq!(
        desk(ConnectionConfig::new("desk", "#desk").with_peer("re xd")),
        Err(ConfigError::AllowedSender(InvalidName::Pattern(
            "re xd".into()
        )))
    );
    let mut no_streams = desk_config();
    no_streams.oa1.max_streams = 0;
    assert_eq!(
        desk(no_streams),
        Err(ConfigError::TooSmall {
            field: "oa1.max_streams",
            min: 1
        })
    );
    // An empty shared secret would let anyone sign frames: refused at either end.
    use deskwire::oa1::AuthConfig;
    let mut empty_secret = desk_config();
    empty_secret.oa1.auth = Some(AuthConfig::new(Vec::new(), 0));
    assert_eq!(desk(empty_secret), Err(ConfigError::EmptySecret));
    let mut remote = ConnectionConfig::new("rexd", "#desk");
    remote.oa1.auth = Some(AuthConfig::new(Vec::new(), 0));
    assert!(matches!(
        Remote::new(remote, 0),
        Err(ConfigError::EmptySecret)
    ));
    // A remote may answer anyone (its docs say what that risks).
    assert!(Remote::new(ConnectionConfig::new("rexd", "#desk"), 0).is_ok());
    // The message says what to do.
    assert!(
        ConfigError::NoRemote
            .to_string()
            .contains("oa1.allowed_sender")
    );
    let bad_channel = ConfigError::from(SessionError::InvalidChannel("desk".into()));
    assert!(
        bad_channel.to_string().contains("starts with #"),
        "{bad_channel}"
    );
}

#[test]
fn the_end_of_the_connection_fails_what_is_in_flight() {
    let (mut net, d, r, mut desk, mut remote) = ready_pair();
    let id = desk.request(1, "sleep 100", None).unwrap();
    drain(&mut desk, &mut net, d, 1);
    let asked = step(&mut remote, &mut net, r, 2);
    assert!(asked.events.iter().any(|e| matches!(
        e,
        ConnectionEvent::Oa1(Event::Request { payload, .. }) if payload == "sleep 100"
    )));

    desk.handle_eof(3);
    let end = drain(&mut desk, &mut net, d, 3);
    assert!(
        end.has_event(&ConnectionEvent::Irc(SessionEvent::Disconnected {
            reason: DisconnectReason::ConnectionLost
        }))
    );
    assert!(end.has_event(&ConnectionEvent::Oa1(Event::Failed {
        id: id.clone(),
        failure: Failure::Disconnected {
            message: "the connection was lost".into()
        }
    })));
    assert_eq!(desk.state(), ConnectionState::Closed);
    assert_eq!(desk.request(4, "again", None), Err(LocalError::Closed));

    remote.handle_eof(5);
    let end = drain(&mut remote, &mut net, r, 5);
    assert!(end.has_event(&ConnectionEvent::Oa1(Event::Cancelled {
        id,
        reason: "disconnected".into()
    })));
    assert_eq!(remote.active(), 0);
}

#[test]
fn a_kick_holds_lines_and_the_engine_joins_again() {
    let (mut net, d, _r, mut desk, _remote) = ready_pair();
    desk.handle_bytes(10, b":op!o@h KICK #desk desk :out\r\n");
    let kicked = drain(&mut desk, &mut net, d, 10);
    assert_eq!(desk.state(), ConnectionState::Joining);
    assert_eq!(
        kicked.deadline,
        10 + 5_000,
        "the rejoin is the next deadline"
    );
    // The server forgot us too (the sim has no KICK command; leave the channel for real).
    net.handle_bytes(d, b"PART #desk\r\n");
    net.take_bytes(d);
    let id = desk.request(11, "later", None).unwrap();
    assert!(drain(&mut desk, &mut net, d, 11).lines.is_empty());
    let rejoin = drain(&mut desk, &mut net, d, 5_010);
    assert_eq!(rejoin.lines, ["JOIN #desk"]);
    let back = step(&mut desk, &mut net, d, 5_020);
    assert!(back.has_event(&ready()));
    assert!(back.has_line(&format!("PRIVMSG #desk :OA1 REQ {id} 1 0 later")));
}

#[test]
fn pings_are_answered_and_the_keepalive_runs() {
    let mut net = Network::new(1);
    let d = net.connect("h1");
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    for t in 0..3 {
        step(&mut desk, &mut net, d, t);
    }
    desk.handle_bytes(100, b"PING :abc\r\n");
    assert_eq!(drain(&mut desk, &mut net, d, 100).lines, ["PONG abc"]);
    let idle = drain(&mut desk, &mut net, d, 101);
    assert_eq!(
        idle.deadline,
        100 + 60_000,
        "the keepalive is the next deadline"
    );
    assert_eq!(
        drain(&mut desk, &mut net, d, 60_100).lines,
        ["PING deskwire"]
    );
}

#[test]
fn events_and_outputs_have_the_vectors_json_shapes() {
    let json = |e: &ConnectionEvent| serde_json::to_value(e).unwrap();
    assert_eq!(
        json(&ConnectionEvent::Irc(SessionEvent::Joined {
            channel: "#desk".into()
        })),
        serde_json::json!({"joined": {"channel": "#desk"}})
    );
    assert_eq!(
        json(&ready()),
        serde_json::json!({"state_changed": {"state": "ready"}})
    );
    assert_eq!(
        json(&ConnectionEvent::Oa1(Event::Failed {
            id: "a".into(),
            failure: Failure::Disconnected {
                message: "the server closed the link: Closing Link".into()
            }
        })),
        serde_json::json!({"failed": {"id": "a", "error": "disconnected",
            "message": "the IRC connection ended before the response: the server closed the link: Closing Link"}})
    );
    assert_eq!(
        json(&ConnectionEvent::Irc(SessionEvent::Disconnected {
            reason: DisconnectReason::ConnectionLost
        })),
        serde_json::json!({"disconnected": {"reason": "connection_lost"}})
    );
    assert_eq!(
        serde_json::to_value(ConnectionOutput::Timeout(5)).unwrap(),
        serde_json::json!({"timeout": 5})
    );
}

#[test]
fn the_config_from_json_takes_overrides_and_refuses_unknown_keys() {
    let config = ConnectionConfig::from_json(
        r##"{"nick": "desk", "channel": "#ops",
            "session": {"password": "pw", "ping_interval_ms": 1000},
            "oa1": {"allowed_sender": "bot", "pacing": {"burst": 5, "interval_ms": 200}}}"##,
    )
    .unwrap();
    let mut expected = ConnectionConfig::new("desk", "#ops");
    expected.session.password = Some("pw".into());
    expected.session.ping_interval_ms = 1000;
    expected.oa1.allowed_sender = Some("bot".into());
    expected.oa1.pacing = Pacing::steady(5, 200);
    expected.oa1.server_pacing = false; // a pacing given is the pacing wanted
    assert_eq!(config, expected);
    for bad in [
        r##"{"nick": "desk"}"##,
        r##"{"nick": "desk", "channel": "#d", "colour": 1}"##,
        r##"{"nick": "desk", "channel": "#d", "oa1": {"max_streems": 1}}"##,
        r##"{"nick": "desk", "channel": "#d", "session": {"nick": 5}}"##,
        r##"{"nick": "desk", "channel": "#d", "oa1": {"pacing": {"burst": -1}}}"##,
        "not json",
    ] {
        assert!(ConnectionConfig::from_json(bad).is_err(), "{bad}");
    }
}

/// The tag section and the rest of a line keep their own limits (IRCv3): 600 bytes of tags
/// before a short `PING` are fine, a 600-byte line without tags is not (it is over 512).
#[test]
fn a_connection_counts_the_tag_section_apart_from_the_rest() {
    let (_net, _d, _r, mut desk, _remote) = ready_pair();
    let before = desk.stats().irc.ignored_too_long;
    let tags = format!("@+x={} PING :tagged\r\n", "t".repeat(595));
    desk.handle_bytes(1, tags.as_bytes());
    let long = format!(":a!b@c NOTICE desk :{}\r\n", "n".repeat(600));
    desk.handle_bytes(1, long.as_bytes());
    assert_eq!(desk.stats().irc.ignored_too_long, before + 1);
    let mut sent = Vec::new();
    loop {
        match desk.poll_output(1) {
            ConnectionOutput::Transmit(bytes) => sent.push(String::from_utf8(bytes).unwrap()),
            ConnectionOutput::Event(_) => {}
            ConnectionOutput::Timeout(_) => break,
        }
    }
    assert!(
        sent.iter().any(|l| l == "PONG tagged\r\n"),
        "the tagged PING was answered: {sent:?}"
    );
}

#[test]
fn garbage_and_floods_from_the_server_leave_the_engine_working() {
    let (mut net, d, _r, mut desk, _remote) = ready_pair();
    desk.handle_bytes(1, &[0xff, 0xfe, b'\r', b'\n', b':', b' ', b'\n']);
    desk.handle_bytes(1, &vec![b'x'; 100_000]);
    desk.handle_bytes(1, b"\r\n");
    for _ in 0..10_000 {
        desk.handle_bytes(
            1,
            b":a!b@c 353 desk = #desk :x y z\r\n:a!b@c JOIN #desk\r\n",
        );
    }
    let stats = desk.stats();
    assert_eq!(stats.irc.ignored_too_long, 1);
    assert!(stats.oa1.bytes_buffered < 1024);
    let id = desk.request(2, "still here", None).unwrap();
    assert!(
        drain(&mut desk, &mut net, d, 2)
            .has_line(&format!("PRIVMSG #desk :OA1 REQ {id} 1 0 still here"))
    );
}

/// The text of the desk's first OA1 failure in `drain`, as (code, message).
fn failure_in(drain: &Drain) -> Option<(String, String)> {
    drain.events.iter().find_map(|e| match e {
        ConnectionEvent::Oa1(Event::Failed { failure, .. }) => {
            Some((failure.code().to_owned(), failure.message()))
        }
        _ => None,
    })
}

/// A desk registered and in `#desk` on `net`, alone there (waiting for its remote).
fn desk_alone(net: &mut Network, d: ClientId) -> Desk {
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    for t in 0..3 {
        step(&mut desk, net, d, t);
    }
    assert_eq!(desk.state(), ConnectionState::WaitingForPeer);
    desk
}

#[test]
fn a_request_that_cannot_leave_fails_not_ready_saying_what_it_waited_for() {
    let mut net = Network::new(1);
    let (d, other) = (net.connect("h1"), net.connect("h2"));
    net.handle_bytes(other, b"NICK rexd\r\nUSER rexd 0 * rexd\r\nJOIN #desk\r\n");
    let mut desk = desk_alone(&mut net, d);
    let id = desk.request(3, "uname", Some(1_000)).unwrap();
    // The 1 s request timeout has not started: nothing was sent.
    assert!(failure_in(&step(&mut desk, &mut net, d, 5_000)).is_none());
    let late = step(&mut desk, &mut net, d, 3 + 30_000);
    assert_eq!(
        failure_in(&late),
        Some((
            "not_ready".into(),
            "not ready after 30 s: waiting for remote `deskbot` in #desk; members: rexd".into()
        ))
    );
    assert!(late.lines.is_empty(), "no CANCEL for a request never sent");
    assert_eq!(desk.in_flight(), 0);
    assert!(!late.events.iter().any(|e| matches!(e,
        ConnectionEvent::Oa1(Event::Failed { id: other, .. }) if *other != id)));
}

#[test]
fn a_request_timeout_starts_when_the_request_can_leave() {
    let mut net = Network::new(1);
    let (d, r) = (net.connect("h1"), net.connect("h2"));
    let mut desk = desk_alone(&mut net, d);
    let id = desk.request(3, "sleep 5", Some(1_000)).unwrap();
    step(&mut desk, &mut net, d, 20_000);
    let mut remote = Remote::new(remote_config(), 20_000).unwrap();
    bring_up(&mut remote, &mut net, r, 20_000);
    let sent = step(&mut desk, &mut net, d, 20_001);
    assert!(sent.has_line(&format!("PRIVMSG #desk :OA1 REQ {id} 1 0 sleep 5")));
    assert_eq!(
        sent.deadline, 21_001,
        "the 1 s runs from the moment it left"
    );
    assert!(failure_in(&step(&mut desk, &mut net, d, 21_000)).is_none());
    assert_eq!(
        failure_in(&step(&mut desk, &mut net, d, 21_001)).map(|f| f.0),
        Some("timeout".into())
    );
}

#[test]
fn a_refused_join_fails_the_waiting_requests_with_the_servers_words() {
    let mut net = Network::new(1);
    let d = net.connect("h1");
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    let id = desk.request(0, "ls", None).unwrap();
    drain(&mut desk, &mut net, d, 0);
    net.take_bytes(d);
    // What ngircd answers a JOIN to a channel that bans us.
    desk.handle_bytes(
        1,
        b":sim.example 001 desk :Welcome\r\n:sim.example 474 desk #desk :Cannot join channel (+b) -- You are banned\r\n",
    );
    let refused = drain(&mut desk, &mut net, d, 1);
    assert!(
        refused.has_event(&ConnectionEvent::Irc(SessionEvent::JoinFailed {
            channel: "#desk".into(),
            numeric: "474".into(),
            text: "Cannot join channel (+b) -- You are banned".into(),
        }))
    );
    assert!(refused.has_event(&ConnectionEvent::Oa1(Event::Failed {
        id,
        failure: Failure::JoinFailed {
            message: "the server refused to let us into #desk: 474 Cannot join channel (+b) -- You are banned".into()
        }
    })));
    assert_eq!(desk.state(), ConnectionState::Joining);
    assert_eq!(
        desk.waiting_for().as_deref(),
        Some("joining #desk (refused: 474 Cannot join channel (+b) -- You are banned)")
    );
    assert_eq!(refused.deadline, 1 + 5_000, "it tries again");
    assert_eq!(drain(&mut desk, &mut net, d, 5_001).lines, ["JOIN #desk"]);
}

#[test]
fn a_kick_fails_the_requests_in_flight() {
    let (mut net, d, _r, mut desk, _remote) = ready_pair();
    let id = desk.request(1, "sleep 100", None).unwrap();
    drain(&mut desk, &mut net, d, 1);
    desk.handle_bytes(2, b":op!o@h KICK #desk desk :no bots here\r\n");
    let kicked = drain(&mut desk, &mut net, d, 2);
    assert!(kicked.has_event(&ConnectionEvent::Oa1(Event::Failed {
        id,
        failure: Failure::Kicked {
            message: "kicked from #desk by op: no bots here".into()
        }
    })));
    assert_eq!(desk.in_flight(), 0);
}

#[test]
fn a_remote_that_leaves_mid_request_fails_it_peer_left_after_the_grace() {
    let (mut net, d, r, mut desk, mut remote) = ready_pair();
    let id = desk.request(1, "sleep 100", None).unwrap();
    drain(&mut desk, &mut net, d, 1);
    step(&mut remote, &mut net, r, 2);
    remote.quit(3, "restarting");
    drain(&mut remote, &mut net, r, 3);
    let left = step(&mut desk, &mut net, d, 4);
    assert!(left.has_event(&ConnectionEvent::Link(LinkEvent::PeerLeft {
        nick: "deskbot".into()
    })));
    assert_eq!(left.deadline, 4 + 2_000, "the grace ends next");
    assert!(failure_in(&left).is_none());
    let gone = step(&mut desk, &mut net, d, 2_004);
    assert_eq!(
        failure_in(&gone),
        Some((
            "peer_left".into(),
            "remote `deskbot` left #desk (quit: Client Quit) and was not back within 2 s".into()
        ))
    );
    assert!(gone.events.iter().any(
        |e| matches!(e, ConnectionEvent::Oa1(Event::Failed { id: failed, .. }) if *failed == id)
    ));
}

/// What arrived before the remote left is the answer, marked as cut short: only a request
/// that got nothing fails `peer_left` (as at a timeout).
#[test]
fn a_remote_that_leaves_after_part_of_the_answer_gives_that_part() {
    let (mut net, d, r, mut desk, mut remote) = ready_pair();
    let id = desk.request(1, "echo started; sleep 100", None).unwrap();
    drain(&mut desk, &mut net, d, 1);
    step(&mut remote, &mut net, r, 2);
    remote.send(2, &id, "started\n").unwrap();
    // Less than a frame waits for the flush delay.
    let held = drain(&mut remote, &mut net, r, 2);
    assert!(held.lines.is_empty());
    let t = held.deadline;
    assert!(!drain(&mut remote, &mut net, r, t).lines.is_empty());
    step(&mut desk, &mut net, d, t);
    remote.quit(t + 1, "restarting");
    drain(&mut remote, &mut net, r, t + 1);
    let left = step(&mut desk, &mut net, d, t + 2);
    assert!(failure_in(&left).is_none(), "the grace comes first");
    let gone = step(&mut desk, &mut net, d, t + 2 + 2_000);
    assert_eq!(failure_in(&gone), None);
    let answer = gone
        .events
        .iter()
        .find_map(|e| match e {
            ConnectionEvent::Oa1(Event::Response {
                id: answered,
                text,
                truncated,
            }) if *answered == id => Some((text.clone(), *truncated)),
            _ => None,
        })
        .expect("the part that arrived, as the answer");
    assert_eq!(
        answer,
        (
            "started\n...[cut short: remote `deskbot` left #desk (quit: Client Quit) and was \
             not back within 2 s; 8 bytes arrived; how the command ended is unknown]..."
                .to_owned(),
            true
        )
    );
    assert_eq!(
        deskwire::oa1::remote_bash::ending(&answer.0),
        deskwire::oa1::remote_bash::Ending::CutShort
    );
    assert_eq!(desk.in_flight(), 0);
}

#[test]
fn a_remote_back_within_the_grace_loses_nothing() {
    let (mut net, d, r, mut desk, mut remote) = ready_pair();
    let id = desk.request(1, "sleep 1", None).unwrap();
    drain(&mut desk, &mut net, d, 1);
    let asked = step(&mut remote, &mut net, r, 2);
    assert!(!asked.events.is_empty());
    // A part and a join on the same connection (say, a rejoin after a kick).
    net.handle_bytes(r, b"PART #desk\r\nJOIN #desk\r\n");
    step(&mut remote, &mut net, r, 3);
    let flap = step(&mut desk, &mut net, d, 3);
    let nick = "deskbot".to_owned();
    assert!(flap.has_event(&ConnectionEvent::Link(LinkEvent::PeerLeft {
        nick: nick.clone()
    })));
    assert!(flap.has_event(&ConnectionEvent::Link(LinkEvent::PeerJoined { nick })));
    assert_eq!(desk.state(), ConnectionState::Ready);
    assert!(failure_in(&step(&mut desk, &mut net, d, 5_000)).is_none());
    remote.respond(5_000, &id, "done\n").unwrap();
    let answer = run_until_desk_event(&mut desk, &mut remote, &mut net, (d, r), 5_001);
    assert_eq!(
        answer,
        Event::Response {
            id,
            text: "done\n".into(),
            truncated: false
        }
    );
}

#[test]
fn a_second_desk_with_the_same_nick_is_told_it_is_someone_else_now() {
    let mut net = Network::new(1);
    let (d1, d2) = (net.connect("h1"), net.connect("h3"));
    let mut first = Desk::new(desk_config(), 0, 1).unwrap();
    step(&mut first, &mut net, d1, 0);
    step(&mut first, &mut net, d1, 1);
    let mut second = Desk::new(desk_config(), 0, 2).unwrap();
    step(&mut second, &mut net, d2, 2);
    let refused = step(&mut second, &mut net, d2, 3);
    assert!(
        refused.has_event(&ConnectionEvent::Irc(SessionEvent::NickRefused {
            nick: "desk".into(),
            numeric: "433".into(),
            text: "Nickname is already in use".into(),
            next: Some("desk_".into()),
        }))
    );
    let registered = step(&mut second, &mut net, d2, 4);
    assert!(
        registered.has_event(&ConnectionEvent::Irc(SessionEvent::Registered {
            nick: "desk_".into()
        }))
    );
}

#[test]
fn two_desks_started_together_each_get_only_their_own_answers() {
    let mut net = Network::new(1);
    let (d1, d2, r) = (net.connect("h1"), net.connect("h3"), net.connect("h2"));
    let mut config = ConnectionConfig::new("deskbot", "#desk");
    config.oa1.pacing = Pacing::UNLIMITED;
    let mut remote = Remote::new(config, 0).unwrap();
    bring_up(&mut remote, &mut net, r, 0);
    // Seeds from the OS's entropy, as every binding takes them by default.
    let mut one = Desk::new(desk_config(), 0, getrandom::u64().unwrap()).unwrap();
    let mut two = Desk::new(
        {
            let mut c = desk_config();
            c.session.nick = "desk2".into();
            c
        },
        0,
        getrandom::u64().unwrap(),
    )
    .unwrap();
    bring_up(&mut one, &mut net, d1, 0);
    bring_up(&mut two, &mut net, d2, 0);
    let id1 = one.request(1, "echo one", None).unwrap();
    let id2 = two.request(1, "echo two", None).unwrap();
    assert_ne!(id1, id2);
    let mut answers = Vec::new();
    for t in 2..30 {
        drain(&mut one, &mut net, d1, t);
        drain(&mut two, &mut net, d2, t);
        for event in step(&mut remote, &mut net, r, t).events {
            if let ConnectionEvent::Oa1(Event::Request { id, payload, .. }) = event {
                remote.respond(t, &id, &payload).unwrap();
            }
        }
        drain(&mut remote, &mut net, r, t);
        for (who, desk, client) in [(1, &mut one, d1), (2, &mut two, d2)] {
            for event in step(desk, &mut net, client, t).events {
                if let ConnectionEvent::Oa1(event) = event {
                    answers.push((who, event));
                }
            }
        }
    }
    let text = |id: &str, text: &str| Event::Response {
        id: id.into(),
        text: text.into(),
        truncated: false,
    };
    assert_eq!(
        answers,
        [(1, text(&id1, "echo one")), (2, text(&id2, "echo two"))]
    );
}

#[test]
fn a_remote_with_a_mask_ignores_whoever_takes_the_desks_nick() {
    let mut net = Network::new(1);
    let (d, r, eve) = (net.connect("h1"), net.connect("h2"), net.connect("evil"));
    let mut config = ConnectionConfig::new("deskbot", "#desk").with_peer("desk!~desk@h1");
    config.oa1.pacing = Pacing::UNLIMITED;
    let mut remote = Remote::new(config, 0).unwrap();
    bring_up(&mut remote, &mut net, r, 0);
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    bring_up(&mut desk, &mut net, d, 0);
    let id = desk.request(1, "id -un", None).unwrap();
    drain(&mut desk, &mut net, d, 1);
    let asked = step(&mut remote, &mut net, r, 2);
    assert!(asked.events.iter().any(|e| matches!(e,
        ConnectionEvent::Oa1(Event::Request { id: got, .. }) if *got == id)));
    assert_eq!(remote.server().source(&id), Some("desk!~desk@h1"));

    // The real desk leaves; eve takes its nick and asks.
    desk.quit(3, "bye");
    drain(&mut desk, &mut net, d, 3);
    net.handle_bytes(
        eve,
        b"NICK desk\r\nUSER eve 0 * eve\r\nJOIN #desk\r\nPRIVMSG #desk :OA1 REQ t1 1 0 id -un\r\n",
    );
    let ignored = step(&mut remote, &mut net, r, 4);
    assert!(
        !ignored
            .events
            .iter()
            .any(|e| matches!(e, ConnectionEvent::Oa1(Event::Request { .. }))),
        "{:?}",
        ignored.events
    );
    assert_eq!(remote.stats().oa1.disallowed_sender, 1);
}

#[test]
fn remote_bash_is_a_typed_call_whose_outcome_is_the_tool_result_or_a_typed_failure() {
    use deskwire::oa1::remote_bash::{ArgsError, Outcome};
    use std::time::Duration;
    let (mut net, d, r, mut desk, mut remote) = ready_pair();

    assert!(matches!(
        desk.remote_bash(1, "ls", Some(Duration::ZERO)),
        Err(ArgsError::ZeroTimeout)
    ));
    let id = desk
        .remote_bash(1, "uname -a", Some(Duration::from_secs(5)))
        .unwrap();
    let event = run_until_desk_event(&mut desk, &mut remote, &mut net, (d, r), 2);
    let (answered, outcome) = Outcome::from_event(event).unwrap();
    assert_eq!(answered, id);
    assert!(!outcome.is_error());
    assert_eq!(outcome.tool_text(), "ran: uname -a\n");
    assert_eq!(outcome.into_result().unwrap(), "ran: uname -a\n");

    // No answer within timeout_sec: a timeout, typed as one, and the model's failure object.
    let id = desk
        .remote_bash(10, "sleep 60", Some(Duration::from_millis(999)))
        .unwrap();
    step(&mut desk, &mut net, d, 10);
    step(&mut remote, &mut net, r, 10);
    assert!(
        step(&mut desk, &mut net, d, 1_008).events.is_empty(),
        "999 ms is 999 ms"
    );
    let late = step(&mut desk, &mut net, d, 1_009);
    let failed = late
        .events
        .into_iter()
        .find_map(|e| match e {
            ConnectionEvent::Oa1(event) => Outcome::from_event(event).ok(),
            _ => None,
        })
        .expect("the call fails at its deadline");
    assert_eq!(failed.0, id);
    assert!(failed.1.is_error());
    let text: serde_json::Value = serde_json::from_str(&failed.1.tool_text()).unwrap();
    assert_eq!(text["ok"], false);
    assert_eq!(text["error"], "timeout");
    let failure = failed.1.into_result().unwrap_err();
    assert!(matches!(failure, Failure::Timeout { .. }), "{failure:?}");
    assert!(
        failure
            .message()
            .starts_with("no complete response before the request timeout")
    );
    assert!(failure.is_timeout());
    // The remote's own ERR with code `timeout` is its answer, not a local timeout.
    assert!(!Failure::from_err_payload("timeout: remote execution exceeded 30s").is_timeout());
}

/// A server that says it is ngircd (`004`) gets the pacing measured for it: groups of three
/// lines every 1.1 s, three times the lines of the default for unknown servers. A pacing the
/// host gave, or a server not measured, keeps the configured one.
#[test]
fn the_pacing_follows_what_the_server_says_it_is() {
    let measured = Pacing::grouped(3, 1100);
    for (version, config, want) in [
        (
            Some("ngircd-26.1"),
            ConnectionConfig::new("deskbot", "#desk"),
            measured,
        ),
        (
            Some("InspIRCd-3"),
            ConnectionConfig::new("deskbot", "#desk"),
            DEFAULT_PACING,
        ),
        (
            None,
            ConnectionConfig::new("deskbot", "#desk"),
            DEFAULT_PACING,
        ),
        (
            Some("ngircd-26.1"),
            ConnectionConfig::from_json(
                r##"{"nick": "deskbot", "channel": "#desk",
                     "oa1": {"pacing": {"burst": 5, "interval_ms": 2000}}}"##,
            )
            .unwrap(),
            Pacing::steady(5, 2000),
        ),
    ] {
        let mut net = Network::new(1);
        if let Some(version) = version {
            net = net.with_version(version);
        }
        let r = net.connect("10.0.0.2");
        let configured = config.oa1.pacing;
        let mut remote = Remote::new(config, 0).unwrap();
        assert_eq!(remote.pacing(), configured, "before the server says");
        bring_up(&mut remote, &mut net, r, 0);
        assert_eq!(remote.session().server_version(), version);
        assert_eq!(remote.pacing(), want, "{version:?}");
    }
    // The lines of a long answer then leave three at a time, 1.1 s apart.
    let mut net = Network::new(1).with_version("ngircd-26.1");
    let (d, r) = (net.connect("10.0.0.1"), net.connect("10.0.0.2"));
    let mut remote = Remote::new(
        ConnectionConfig::new("deskbot", "#desk").with_peer("desk"),
        0,
    )
    .unwrap();
    bring_up(&mut remote, &mut net, r, 0);
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    bring_up(&mut desk, &mut net, d, 0);
    step(&mut remote, &mut net, r, 0);
    desk.request(0, "cat big", None).unwrap();
    step(&mut desk, &mut net, d, 0);
    let incoming = step(&mut remote, &mut net, r, 0);
    let id = incoming
        .events
        .iter()
        .find_map(|e| match e {
            ConnectionEvent::Oa1(Event::Request { id, .. }) => Some(id.clone()),
            _ => None,
        })
        .expect("the request arrived");
    // Text that does not compress: the answer takes many lines.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let noise: String = (0..20_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'!' + (x % 90) as u8)
        })
        .collect();
    remote.respond(0, &id, &noise).unwrap();
    let mut sent_at = Vec::new();
    let mut now = 0;
    while now < 5_000 {
        let out = drain(&mut remote, &mut net, r, now);
        sent_at.extend(
            out.lines
                .iter()
                .filter(|l| l.contains(" :OA1 "))
                .map(|_| now),
        );
        now += 10;
    }
    assert_eq!(
        &sent_at[..9.min(sent_at.len())],
        &[0, 0, 0, 1100, 1100, 1100, 2200, 2200, 2200],
        "{:?}",
        remote.stats()
    );
}

/// A desk that reconnects before the server has seen its previous connection go registers as
/// `desk_`: a remote serving `desk` would ignore that, so the desk holds its requests, asks for
/// its nick back, and sends once it has it.
#[test]
fn a_desk_under_a_fallback_nick_waits_for_its_own() {
    let mut net = Network::new(1);
    let (old, d, r) = (net.connect("h1"), net.connect("h1"), net.connect("h2"));
    let mut remote = Remote::new(remote_config(), 0).unwrap();
    bring_up(&mut remote, &mut net, r, 0);
    // The previous connection, still holding `desk`.
    net.handle_bytes(old, b"NICK desk\r\nUSER desk 0 * desk\r\n");
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    for t in 0..4 {
        step(&mut desk, &mut net, d, t);
    }
    assert_eq!(desk.session().identity().nick(), "desk_");
    assert_eq!(desk.state(), ConnectionState::WaitingForNick);
    let id = desk.request(4, "uname", None).unwrap();
    let held = step(&mut desk, &mut net, d, 5);
    assert!(!held.has_line("PRIVMSG"), "held: {:?}", held.lines);
    // Still taken at the first try (2 s after registering): refused quietly, no event.
    let tried = step(&mut desk, &mut net, d, 2_010);
    assert_eq!(tried.lines, ["NICK desk"]);
    let refused = step(&mut desk, &mut net, d, 2_011);
    assert!(refused.events.is_empty(), "{:?}", refused.events);
    assert_eq!(desk.state(), ConnectionState::WaitingForNick);
    assert_eq!(
        desk.waiting_for().as_deref(),
        Some(
            "our nick `desk` back (it was taken when we registered, so we are `desk_`; a remote \
             that serves `desk` would ignore `desk_`)"
        )
    );
    // The old connection goes; the next try (4 s later) takes the nick and the request leaves.
    net.disconnect(old);
    step(&mut desk, &mut net, d, 6_011);
    let back = step(&mut desk, &mut net, d, 6_012);
    assert!(
        back.has_event(&ConnectionEvent::Irc(SessionEvent::NickChanged {
            old: "desk_".into(),
            new: "desk".into()
        }))
    );
    assert!(back.has_event(&ready()));
    assert!(back.has_line(&format!("PRIVMSG #desk :OA1 REQ {id} 1 0 uname")));
    let asked = step(&mut remote, &mut net, r, 6_013);
    assert!(asked.events.iter().any(|e| matches!(e,
        ConnectionEvent::Oa1(Event::Request { id: got, .. }) if *got == id)));
}

/// When the nick never comes back, the request fails `not_ready` saying why.
#[test]
fn a_desk_that_cannot_regain_its_nick_says_so() {
    let mut net = Network::new(1);
    let (old, d) = (net.connect("h1"), net.connect("h1"));
    net.handle_bytes(old, b"NICK desk\r\nUSER desk 0 * desk\r\n");
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    for t in 0..4 {
        step(&mut desk, &mut net, d, t);
    }
    desk.request(4, "uname", None).unwrap();
    let mut failure = None;
    for t in (5..40_000).step_by(1_000) {
        failure = failure.or(failure_in(&step(&mut desk, &mut net, d, t)));
    }
    let (code, message) = failure.expect("the request failed");
    assert_eq!(code, "not_ready");
    assert!(
        message.starts_with("not ready after 30 s: waiting for our nick `desk` back"),
        "{message}"
    );
}

/// A 64 KiB answer through a server that says `LINELEN=n`: the lines the remote sent and the
/// longest line relayed, with the answer checked byte for byte.
/// `secret`: both ends share one and do not compress; `spec`: the desk offers nothing (as a
/// spec-only desk), so the remote answers in 512-byte lines whatever the server allows.
fn answer_through(linelen: Option<usize>, secret: bool, spec: bool) -> (u64, usize) {
    let mut net = Network::new(1);
    if let Some(n) = linelen {
        net = net.with_linelen(n);
    }
    let (d, r) = (net.connect("h1"), net.connect("h2"));
    let (mut desk_cfg, mut remote_cfg) = (desk_config(), remote_config());
    if spec {
        desk_cfg.oa1.compression = false;
    }
    if secret {
        for c in [&mut desk_cfg, &mut remote_cfg] {
            c.oa1.compression = false;
            c.oa1.auth = Some(deskwire::oa1::AuthConfig::new(b"s3cret".to_vec(), 0));
        }
    }
    let mut remote = Remote::new(remote_cfg, 0).unwrap();
    bring_up(&mut remote, &mut net, r, 0);
    let mut desk = Desk::new(desk_cfg, 0, 7).unwrap();
    bring_up(&mut desk, &mut net, d, 0);
    // Text that deflate does not shrink much: a build log's worth of hex.
    let mut answer = String::new();
    let mut x: u64 = 88172645463325252;
    while answer.len() < 64 * 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        answer.push_str(&format!("{x:016x} "));
        if answer.len() % 85 < 17 {
            answer.push('\n');
        }
    }
    answer.truncate(64 * 1024);
    let id = desk.request(1, "cat big", Some(600_000)).unwrap();
    let mut got = None;
    for t in 2..2_000 {
        for event in step(&mut remote, &mut net, r, t).events {
            if let ConnectionEvent::Oa1(Event::Request { id, .. }) = event {
                remote.respond(t, &id, &answer).unwrap();
            }
        }
        drain(&mut remote, &mut net, r, t);
        for event in step(&mut desk, &mut net, d, t).events {
            if let ConnectionEvent::Oa1(e @ (Event::Response { .. } | Event::Failed { .. })) = event
            {
                got = Some(e);
            }
        }
        if got.is_some() {
            break;
        }
    }
    assert_eq!(
        got,
        Some(Event::Response {
            id,
            text: answer,
            truncated: false
        })
    );
    (remote.stats().oa1.lines_out, net.stats().longest_line)
}

/// A server that relays longer lines (ISUPPORT `LINELEN`) carries a deskwire answer in fewer of
/// them, each within what it said; a desk that shares the secret gets them too.
#[test]
fn a_longer_linelen_carries_an_answer_in_fewer_lines() {
    let (plain_lines, plain_longest) = answer_through(None, false, false);
    let (long_lines, long_longest) = answer_through(Some(2048), false, false);
    assert!(plain_longest <= 512, "{plain_longest}");
    assert!(
        long_longest <= 2048 && long_longest > 1500,
        "{long_longest}"
    );
    assert!(
        long_lines * 3 < plain_lines,
        "{long_lines} lines with LINELEN=2048, {plain_lines} with 512"
    );
    // A desk that offers none of deskwire's extensions may read 512 bytes a line at most.
    let (_, spec_longest) = answer_through(Some(2048), false, true);
    assert!(spec_longest <= 512, "{spec_longest}");
    let (auth_lines, auth_longest) = answer_through(Some(2048), true, false);
    assert!(
        auth_longest <= 2048 && auth_longest > 1500,
        "{auth_longest}"
    );
    eprintln!(
        "64 KiB answer: {plain_lines} lines at 512 bytes, {long_lines} at LINELEN=2048 \
         (compressed); {auth_lines} at LINELEN=2048 authenticated, uncompressed"
    );
}

/// Where the server has a bot mode (ISUPPORT `BOT=B`), a remote marks itself a bot; a desk
/// does not.
#[test]
fn a_remote_marks_itself_a_bot_where_the_server_offers_it() {
    let mut net = Network::new(1).with_isupport("BOT=B");
    let (d, r) = (net.connect("h1"), net.connect("h2"));
    let mut remote = Remote::new(remote_config(), 0).unwrap();
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    let (mut remote_lines, mut desk_lines) = (Vec::new(), Vec::new());
    for t in 0..5 {
        remote_lines.extend(step(&mut remote, &mut net, r, t).lines);
        desk_lines.extend(step(&mut desk, &mut net, d, t).lines);
    }
    assert!(
        remote_lines.contains(&"MODE deskbot +B".to_owned()),
        "{remote_lines:?}"
    );
    assert!(
        !desk_lines.iter().any(|l| l.starts_with("MODE")),
        "{desk_lines:?}"
    );
}

#[test]
fn a_remote_split_away_fails_the_request_in_flight_at_once_and_new_ones_wait_for_the_heal() {
    let (mut net, d, _r, mut desk, _remote) = ready_pair();
    let id = desk.request(1, "sleep 100", None).unwrap();
    drain(&mut desk, &mut net, d, 1);
    // What a client on the desk's side of a broken link sees: the remote quits with the two
    // servers' names. No grace: the answer cannot cross.
    desk.handle_bytes(
        2,
        b":deskbot!~deskbot@h QUIT :irc1.deskwire.test irc2.deskwire.test\r\n",
    );
    let split = drain(&mut desk, &mut net, d, 2);
    assert_eq!(
        failure_in(&split),
        Some((
            "peer_left".into(),
            "remote `deskbot` was split away from #desk by a netsplit between \
             irc1.deskwire.test and irc2.deskwire.test; the answer is lost"
                .into()
        ))
    );
    assert!(split.events.iter().any(
        |e| matches!(e, ConnectionEvent::Oa1(Event::Failed { id: failed, .. }) if *failed == id)
    ));
    assert_eq!(desk.state(), ConnectionState::WaitingForPeer);
    // A request made during the split waits inside, and goes with the heal's JOIN.
    let later = desk.request(3, "echo healed", None).unwrap();
    let waiting = drain(&mut desk, &mut net, d, 3);
    assert!(!waiting.has_line("PRIVMSG #desk :OA1 "), "{waiting:?}");
    desk.handle_bytes(4, b":deskbot!~deskbot@h JOIN #desk\r\n");
    let healed = drain(&mut desk, &mut net, d, 4);
    assert_eq!(desk.state(), ConnectionState::Ready);
    assert!(
        healed.has_line(&format!("PRIVMSG #desk :OA1 REQ {later} ")),
        "{healed:?}"
    );
    assert!(failure_in(&healed).is_none());
}

#[test]
fn a_quit_that_only_looks_like_a_split_gets_the_grace() {
    let (mut net, d, _r, mut desk, _remote) = ready_pair();
    desk.request(1, "sleep 100", None).unwrap();
    drain(&mut desk, &mut net, d, 1);
    // A user's own quit text is marked by the server (ngircd quotes it).
    desk.handle_bytes(
        2,
        b":deskbot!~deskbot@h QUIT :\"irc1.deskwire.test irc2.deskwire.test\"\r\n",
    );
    let left = drain(&mut desk, &mut net, d, 2);
    assert!(failure_in(&left).is_none());
    assert_eq!(left.deadline, 2 + 2_000, "the grace ends next");
}

/// A remote with one request in progress from `desk`, and the request's id.
fn remote_serving_desk(net: &mut Network) -> (Remote, ClientId, String) {
    let (d, r) = (net.connect("h1"), net.connect("h2"));
    let mut remote = Remote::new(remote_config(), 0).unwrap();
    bring_up(&mut remote, net, r, 0);
    let mut desk = Desk::new(desk_config(), 0, 7).unwrap();
    bring_up(&mut desk, net, d, 0);
    desk.request(1, "seq 1 100000", None).unwrap();
    drain(&mut desk, net, d, 1);
    let asked = step(&mut remote, net, r, 2);
    let id = asked
        .events
        .iter()
        .find_map(|e| match e {
            ConnectionEvent::Oa1(Event::Request { id, .. }) => Some(id.clone()),
            _ => None,
        })
        .expect("the request reached the remote");
    (remote, r, id)
}

#[test]
fn a_remote_stops_the_work_of_a_desk_that_left() {
    for (line, reason) in [
        (
            ":desk!~desk@h1 QUIT :irc2.deskwire.test irc1.deskwire.test",
            "the desk `desk` left #desk (a netsplit between irc2.deskwire.test and \
             irc1.deskwire.test)",
        ),
        (
            ":desk!~desk@h1 QUIT :Ping timeout",
            "the desk `desk` left #desk (quit: Ping timeout)",
        ),
        (
            ":desk!~desk@h1 PART #DESK :bye",
            "the desk `desk` left #desk (part)",
        ),
        (
            ":op!o@h KICK #desk desk :out",
            "the desk `desk` left #desk (kicked by op)",
        ),
    ] {
        let mut net = Network::new(1);
        let (mut remote, r, id) = remote_serving_desk(&mut net);
        remote.respond(3, &id, "1\n2\n").unwrap();
        // Lines queued but not sent yet: held back by a paused pacing would show the same.
        remote.handle_bytes(3, format!("{line}\r\n").as_bytes());
        let after = drain(&mut remote, &mut net, r, 3);
        assert!(
            after.has_event(&ConnectionEvent::Oa1(Event::Cancelled {
                id: id.clone(),
                reason: reason.into()
            })),
            "{line}: {after:?}"
        );
        assert!(
            !after.has_line("PRIVMSG #desk :OA1 RES"),
            "{line}: {after:?}"
        );
        assert!(
            remote.respond(4, &id, "3\n").is_err(),
            "{line}: nothing more is taken for a desk that left"
        );
        assert!(!drain(&mut remote, &mut net, r, 4).has_line("PRIVMSG"));
    }
}

#[test]
fn a_remote_keeps_the_work_of_a_desk_that_changed_its_nick_or_of_others_leaving() {
    let mut net = Network::new(1);
    let (mut remote, r, id) = remote_serving_desk(&mut net);
    remote.handle_bytes(
        3,
        b":other!~o@h QUIT :irc1.deskwire.test irc2.deskwire.test\r\n\
          :desk!~desk@h1 PART #elsewhere\r\n\
          :desk!~desk@h1 NICK desk2\r\n",
    );
    let after = drain(&mut remote, &mut net, r, 3);
    assert!(
        !after
            .events
            .iter()
            .any(|e| matches!(e, ConnectionEvent::Oa1(Event::Cancelled { .. }))),
        "{after:?}"
    );
    // Under its new nick the desk still leaves: its request ends then.
    remote.handle_bytes(4, b":desk2!~desk@h1 QUIT :bye\r\n");
    let after = drain(&mut remote, &mut net, r, 4);
    assert!(after.has_event(&ConnectionEvent::Oa1(Event::Cancelled {
        id,
        reason: "the desk `desk2` left #desk (quit: bye)".into()
    })));
}
