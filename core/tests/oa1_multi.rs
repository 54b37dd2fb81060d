//! Many OA1 channels over one IRC connection (`oa1::MultiDesk`, `oa1::MultiRemote`) against the
//! in-memory IRC server (`sim::Network`), on a virtual clock: 50 desks on one connection served
//! by one remote connection, fair turns between a long and a short answer, desks and channels
//! added and removed at run time, and the errors a host gets wrong.

use std::collections::BTreeMap;

use deskwire::oa1::{
    ConfigError, ConnectionConfig, ConnectionEvent, ConnectionState, Event, Failure, LinkEvent,
    LocalError, MultiDesk, MultiOutput, MultiRemote, Pacing,
};
use deskwire::sim::{ClientId, Network};

/// One event of a drain, with its channel.
type Tagged = (Option<String>, ConnectionEvent);

/// Anything with the multi-channel pull loop.
trait Multi {
    fn poll(&mut self, now: u64) -> MultiOutput;
    fn feed(&mut self, now: u64, bytes: &[u8]);
}

impl Multi for MultiDesk {
    fn poll(&mut self, now: u64) -> MultiOutput {
        self.poll_output(now)
    }
    fn feed(&mut self, now: u64, bytes: &[u8]) {
        self.handle_bytes(now, bytes)
    }
}

impl Multi for MultiRemote {
    fn poll(&mut self, now: u64) -> MultiOutput {
        self.poll_output(now)
    }
    fn feed(&mut self, now: u64, bytes: &[u8]) {
        self.handle_bytes(now, bytes)
    }
}

/// Delivers what the network has for `client`, then drains the engine once: the lines it
/// wrote, its events, and its deadline.
fn step(
    engine: &mut impl Multi,
    net: &mut Network,
    client: ClientId,
    now: u64,
) -> (Vec<String>, Vec<Tagged>, u64) {
    let bytes = net.take_bytes(client);
    if !bytes.is_empty() {
        engine.feed(now, &bytes);
    }
    let (mut lines, mut events) = (Vec::new(), Vec::new());
    loop {
        match engine.poll(now) {
            MultiOutput::Transmit(bytes) => {
                assert!(bytes.ends_with(b"\r\n") && bytes.len() <= net.linelen());
                net.handle_bytes(client, &bytes);
                lines.push(String::from_utf8(bytes).unwrap().trim_end().to_owned());
            }
            MultiOutput::Event { channel, event } => events.push((channel, event)),
            MultiOutput::Chat(message) => panic!("chat is off unless asked for: {message:?}"),
            MultiOutput::Membership(event) => {
                panic!("membership is off unless asked for: {event:?}")
            }
            MultiOutput::Discovery(found) => events.push((
                None,
                ConnectionEvent::Link(
                    // Discovery's events ride along as a link event of no channel, for the tests.
                    LinkEvent::PeerJoined {
                        nick: format!("discovery: {found:?}"),
                    },
                ),
            )),
            MultiOutput::Timeout(deadline) => {
                assert!(deadline >= now);
                return (lines, events, deadline);
            }
        }
    }
}

fn channel_name(i: usize) -> String {
    format!("#desk-{i}")
}

fn remote_config() -> ConnectionConfig {
    let mut config = ConnectionConfig::new("rexd", "");
    config.oa1.allowed_sender = Some("npcs".into());
    config.oa1.pacing = Pacing::UNLIMITED;
    config
}

fn desks_config() -> ConnectionConfig {
    let mut config = ConnectionConfig::new("npcs", "");
    config.oa1.pacing = Pacing::UNLIMITED;
    config
}

/// Answers every request the remote hands out with its channel and payload.
fn answer_all(
    remote: &mut MultiRemote,
    events: &[Tagged],
    now: u64,
    text: impl Fn(&str) -> String,
) {
    for (channel, event) in events {
        if let ConnectionEvent::Oa1(Event::Request { id, payload, .. }) = event {
            let channel = channel.as_deref().expect("a request names its channel");
            remote
                .respond(now, channel, id, &format!("{channel}: {}", text(payload)))
                .unwrap();
        }
    }
}

#[test]
fn fifty_desks_on_one_connection_each_get_only_their_own_answers() {
    const DESKS: usize = 50;
    let mut net = Network::new(3);
    let (d, r) = (net.connect("10.0.0.1"), net.connect("10.0.0.2"));
    let mut remote = MultiRemote::new(remote_config(), 0).unwrap();
    let mut desks = MultiDesk::new(desks_config(), 0, 11).unwrap();
    for i in 0..DESKS {
        remote.add_channel(0, &channel_name(i)).unwrap();
        desks.add_desk(0, &channel_name(i), "rexd").unwrap();
    }
    // Every desk asks at once, before registration: the requests wait for their remote.
    let mut asked = BTreeMap::new();
    for i in 0..DESKS {
        let id = desks
            .request(0, &channel_name(i), &format!("echo {i}"), None)
            .unwrap();
        asked.insert(id, channel_name(i));
    }
    let mut answers: BTreeMap<String, (String, String)> = BTreeMap::new();
    for now in 0..40 {
        let (_, events, _) = step(&mut remote, &mut net, r, now);
        answer_all(&mut remote, &events, now, |p| format!("ran {p}"));
        step(&mut remote, &mut net, r, now);
        let (_, events, _) = step(&mut desks, &mut net, d, now);
        for (channel, event) in events {
            if let ConnectionEvent::Oa1(Event::Response { id, text, .. }) = event {
                assert!(
                    answers.insert(id, (channel.unwrap(), text)).is_none(),
                    "twice"
                );
            }
        }
        if answers.len() == DESKS {
            break;
        }
    }
    assert_eq!(answers.len(), DESKS, "every desk answered");
    assert_eq!(remote.channels().len(), DESKS);
    for (id, (channel, text)) in &answers {
        // The answer came to the desk that asked, and is the one its remote gave in its channel.
        assert_eq!(&asked[id], channel);
        let i: usize = channel.trim_start_matches("#desk-").parse().unwrap();
        assert_eq!(text, &format!("{channel}: ran echo {i}"));
        assert_eq!(desks.channel_state(channel), Some(ConnectionState::Ready));
        assert_eq!(desks.in_flight(channel), Some(0));
    }
}

/// Brings a desk set and a remote up with one channel each, both ready.
fn pair(
    channels: &[&str],
    remote_pacing: Pacing,
) -> (Network, MultiDesk, MultiRemote, ClientId, ClientId) {
    let mut net = Network::new(5);
    let (d, r) = (net.connect("h1"), net.connect("h2"));
    let mut config = remote_config();
    config.oa1.pacing = remote_pacing;
    config.oa1.server_pacing = false;
    let mut remote = MultiRemote::new(config, 0).unwrap();
    let mut desks = MultiDesk::new(desks_config(), 0, 13).unwrap();
    for channel in channels {
        remote.add_channel(0, channel).unwrap();
        desks.add_desk(0, channel, "rexd").unwrap();
    }
    for now in 0..6 {
        step(&mut remote, &mut net, r, now);
        step(&mut desks, &mut net, d, now);
    }
    for channel in channels {
        assert_eq!(desks.channel_state(channel), Some(ConnectionState::Ready));
        assert_eq!(remote.channel_state(channel), Some(ConnectionState::Ready));
    }
    (net, desks, remote, d, r)
}

/// `len` bytes of hex from a fixed LCG: output that compresses about 2x, as a build log's might.
fn noise(len: usize) -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            char::from(b"0123456789abcdef"[(state >> 60) as usize])
        })
        .collect()
}

#[test]
fn a_short_answer_is_not_held_behind_a_long_one_in_another_channel() {
    // The remote's server pacing: 1 line every 100 ms after a burst of 1 (a slow server).
    let (mut net, mut desks, mut remote, d, r) = pair(&["#build", "#chat"], Pacing::steady(1, 100));
    let long = desks.request(10, "#build", "cat big.log", None).unwrap();
    let mut now = 10;
    let mut short = None;
    let mut lines_before_short = None;
    let mut remote_lines = 0usize;
    let mut done = BTreeMap::new();
    while now < 200_000 && done.len() < 2 {
        let (lines, events, _) = step(&mut remote, &mut net, r, now);
        remote_lines += lines.iter().filter(|l| l.contains(" :OA1 RES")).count();
        for (channel, event) in &events {
            if let ConnectionEvent::Oa1(Event::Request { id, .. }) = event {
                let channel = channel.as_deref().unwrap();
                let text = match channel {
                    "#build" => noise(64 * 1024),
                    _ => "ok".to_owned(),
                };
                remote.respond(now, channel, id, &text).unwrap();
            }
        }
        let (_, events, _) = step(&mut desks, &mut net, d, now);
        for (_, event) in events {
            if let ConnectionEvent::Oa1(Event::Response { id, text, .. }) = event {
                if Some(&id) == short.as_ref() {
                    lines_before_short = Some(remote_lines);
                }
                done.insert(id, text.len());
            }
        }
        // Once the long answer is streaming, the other desk asks for one line.
        if short.is_none() && remote_lines >= 5 {
            short = Some(desks.request(now, "#chat", "date", None).unwrap());
            lines_before_short = None;
            remote_lines = 0;
        }
        now += 10;
    }
    let short = short.expect("the short request was made");
    assert_eq!(done.get(&short), Some(&2));
    assert_eq!(done.get(&long), Some(&(64 * 1024)));
    // Turns alternate: the short answer waits for at most one of the long one's lines (the
    // turn in progress), not for the hundreds still queued.
    let waited = lines_before_short.expect("the short answer came");
    assert!(
        waited <= 2,
        "the short answer waited for {waited} lines of the long one"
    );
}

#[test]
fn desks_and_channels_come_and_go_at_run_time() {
    let (mut net, mut desks, mut remote, d, r) = pair(&["#a", "#b"], Pacing::UNLIMITED);
    // A request to #b, then #b's desk is removed before any answer: it fails, named.
    let doomed = desks.request(10, "#b", "sleep 100", None).unwrap();
    assert!(desks.remove_desk(11, "#b"));
    assert!(!desks.remove_desk(11, "#b"), "removed once");
    let (lines, events, _) = step(&mut desks, &mut net, d, 11);
    assert!(lines.iter().any(|l| l == "PART #b"), "{lines:?}");
    assert!(events.iter().any(|(channel, event)| {
        channel.as_deref() == Some("#b")
            && matches!(event, ConnectionEvent::Oa1(Event::Failed { id, failure: Failure::Disconnected { message } })
                if *id == doomed && message.contains("removed"))
    }));
    assert_eq!(
        desks.request(12, "#b", "ls", None),
        Err(LocalError::UnknownChannel("#b".into()))
    );
    assert_eq!(desks.channels(), ["#a"]);

    // A new desk in #c, whose channel the remote serves only later.
    desks.add_desk(20, "#c", "rexd").unwrap();
    let id = desks.request(20, "#c", "hostname", None).unwrap();
    for now in 21..25 {
        step(&mut desks, &mut net, d, now);
        step(&mut remote, &mut net, r, now);
    }
    assert_eq!(
        desks.channel_state("#c"),
        Some(ConnectionState::WaitingForPeer)
    );
    remote.add_channel(30, "#c").unwrap();
    let mut answer = None;
    for now in 30..40 {
        let (_, events, _) = step(&mut remote, &mut net, r, now);
        answer_all(&mut remote, &events, now, |p| p.to_owned());
        step(&mut remote, &mut net, r, now);
        for (channel, event) in step(&mut desks, &mut net, d, now).1 {
            if channel.as_deref() == Some("#c")
                && let ConnectionEvent::Link(LinkEvent::PeerJoined { nick }) = &event
            {
                assert_eq!(nick, "rexd");
            }
            if let ConnectionEvent::Oa1(Event::Response { id: got, text, .. }) = event {
                assert_eq!(got, id);
                answer = Some(text);
            }
        }
    }
    assert_eq!(answer.as_deref(), Some("#c: hostname"));

    // The remote stops serving #a: a request there is no longer answered by it.
    assert!(remote.remove_channel(40, "#a"));
    assert!(!remote.serves("#a"));
    let (lines, _, _) = step(&mut remote, &mut net, r, 40);
    assert!(lines.iter().any(|l| l == "PART #a"), "{lines:?}");
    assert_eq!(
        remote.respond(41, "#a", "x", "y"),
        Err(LocalError::UnknownChannel("#a".into()))
    );
}

#[test]
fn what_a_host_gets_wrong_is_refused_by_name() {
    let mut desks = MultiDesk::new(desks_config(), 0, 1).unwrap();
    desks.add_desk(0, "#a", "rexd").unwrap();
    assert_eq!(
        desks.add_desk(0, "#A", "rexd"),
        Err(ConfigError::DuplicateChannel("#A".into())),
        "channel names compare as the server folds them"
    );
    assert!(matches!(
        desks.add_desk(0, "nochannel", "rexd"),
        Err(ConfigError::Session(_))
    ));
    assert!(matches!(
        desks.add_desk(0, "#b", "bad nick!"),
        Err(ConfigError::AllowedSender(_))
    ));
    assert_eq!(
        desks.add_desk(0, "#b", "account:alice"),
        Err(ConfigError::AccountRemote)
    );
    assert_eq!(
        desks.cancel(0, "#zzz", "id", "why"),
        Err(LocalError::UnknownChannel("#zzz".into()))
    );
    assert_eq!(desks.in_flight("#zzz"), None);
    // A desk set whose first desk names no remote is refused, as a single desk is.
    let mut config = desks_config();
    config.oa1.channel = "#first".into();
    assert!(matches!(
        MultiDesk::new(config, 0, 1),
        Err(ConfigError::NoRemote)
    ));
    // After the end, nothing more is added.
    desks.handle_eof(5);
    while !matches!(desks.poll_output(5), MultiOutput::Timeout(_)) {}
    assert_eq!(desks.state(), ConnectionState::Closed);
    assert!(desks.add_desk(6, "#late", "rexd").is_err());
    assert_eq!(desks.request(6, "#a", "ls", None), Err(LocalError::Closed));
}

/// The game's desk: plain OA1 in `#oa_desk_<desk>_dev_<code>_<hex>`. A remote that discovers by
/// its code finds the channel within one listing, never a look-alike, and serves both desks of
/// the same code.
#[test]
fn a_remote_finds_the_channels_of_its_device_code_by_list() {
    use deskwire::oa1::DeviceCode;
    let code = DeviceCode::parse("abcd2345").unwrap();
    let mut net = Network::new(9);
    let (d, r) = (net.connect("h1"), net.connect("h2"));
    let mut desks = MultiDesk::new(desks_config(), 0, 17).unwrap();
    let bound = [
        "#oa_desk_desk_1_dev_abcd2345_1a2b3c",
        "#oa_desk_desk_2_dev_abcd2345_99ffee",
    ];
    let look_alike = "#oa_desk_desk_3_dev_abcd2345x_1a2b3c";
    for channel in bound.iter().chain([&look_alike]) {
        desks.add_desk(0, channel, "*").unwrap();
    }
    for now in 0..5 {
        step(&mut desks, &mut net, d, now);
    }
    let mut config = remote_config();
    config.session.nick = code.nick();
    config.oa1.allowed_sender = None;
    let mut remote = MultiRemote::new(config, 0).unwrap();
    remote.discover(code.clone(), 30_000);
    assert_eq!(remote.device_code(), Some(&code));
    let mut found = Vec::new();
    let mut lines = Vec::new();
    for now in 0..10 {
        let (out, events, _) = step(&mut remote, &mut net, r, now);
        lines.extend(out);
        for (_, event) in events {
            if let ConnectionEvent::Link(LinkEvent::PeerJoined { nick }) = event
                && nick.starts_with("discovery: ")
            {
                found.push(nick);
            }
        }
    }
    assert_eq!(
        lines.iter().filter(|l| *l == "LIST").count(),
        1,
        "{lines:?}"
    );
    let mut served = remote.channels();
    served.sort();
    assert_eq!(served, bound, "the look-alike is not joined");
    assert_eq!(found.len(), 2, "{found:?}");
    // Both desks are answered.
    let ids: Vec<String> = bound
        .iter()
        .map(|c| desks.request(20, c, "whoami", None).unwrap())
        .collect();
    let mut answered = Vec::new();
    for now in 20..40 {
        let (_, events, _) = step(&mut remote, &mut net, r, now);
        answer_all(&mut remote, &events, now, |p| p.to_owned());
        step(&mut remote, &mut net, r, now);
        for (_, event) in step(&mut desks, &mut net, d, now).1 {
            if let ConnectionEvent::Oa1(Event::Response { id, .. }) = event {
                answered.push(id);
            }
        }
    }
    answered.sort();
    let mut ids = ids;
    ids.sort();
    assert_eq!(answered, ids);
    // The next listing comes after the interval (from the first, at registration), not before.
    let (out, _, deadline) = step(&mut remote, &mut net, r, 29_000);
    assert!(!out.iter().any(|l| l == "LIST"));
    assert!((30_000..30_010).contains(&deadline), "{deadline}");
    let (out, _, _) = step(&mut remote, &mut net, r, deadline);
    assert!(out.iter().any(|l| l == "LIST"), "{out:?}");
}

/// Chat beside OA1: off unless asked for (every other test here would fail on a chat message);
/// on, a long text is cut at spaces under the line budget, arrives whole and in order, and an
/// OA1 request in the same channel goes in turn with it.
#[test]
fn chat_goes_beside_oa1_in_turns() {
    use deskwire::oa1::chat::{ChatError, ChatKind};
    let (mut net, mut desks, mut remote, d, r) = pair(&["#a"], Pacing::steady(1, 100));
    desks.set_chat(true);
    remote.set_chat(true);
    let words: Vec<String> = (0..300).map(|i| format!("word{i}")).collect();
    let text = words.join(" ");
    let lines = desks.send_text("#a", &text, false).unwrap();
    assert!(lines > 2, "{lines}");
    let asked = desks.request(10, "#a", "uname", None).unwrap();
    assert_eq!(desks.send_text("#a", "  ", false), Err(ChatError::Empty));
    assert_eq!(
        desks.send_text("#a", "OA1 REQ x 1 0 rm -rf /", false),
        Err(ChatError::ReservedPrefix("OA1 "))
    );
    assert_eq!(
        desks.send_text("#zzz", "hi", false),
        Err(ChatError::UnknownChannel("#zzz".into()))
    );
    let mut got = Vec::new();
    let mut answer = None;
    let mut request_at = None;
    let mut chat_sent = 0;
    let mut now = 10;
    while now < 20_000 && (answer.is_none() || got.len() < lines) {
        for engine in [0, 1] {
            let (bytes, id) = if engine == 0 {
                (net.take_bytes(r), r)
            } else {
                (net.take_bytes(d), d)
            };
            if engine == 0 {
                remote.handle_bytes(now, &bytes);
            } else {
                desks.handle_bytes(now, &bytes);
            }
            loop {
                let output = if engine == 0 {
                    remote.poll_output(now)
                } else {
                    desks.poll_output(now)
                };
                match output {
                    MultiOutput::Transmit(line) => {
                        let text = String::from_utf8_lossy(&line).into_owned();
                        if engine == 1 && text.contains(" :OA1 REQ ") {
                            request_at = Some(chat_sent);
                        } else if engine == 1 && text.starts_with("PRIVMSG #a :word") {
                            chat_sent += 1;
                        }
                        net.handle_bytes(id, &line)
                    }
                    MultiOutput::Chat(message) => {
                        assert_eq!(engine, 0, "the desk hears no chat of its own");
                        assert_eq!(message.channel, "#a");
                        assert_eq!(message.kind, ChatKind::Privmsg);
                        assert!(message.sender.starts_with("npcs!"), "{}", message.sender);
                        got.push(message.text);
                    }
                    MultiOutput::Event {
                        channel,
                        event: ConnectionEvent::Oa1(Event::Request { id: rid, .. }),
                    } => {
                        remote
                            .respond(now, channel.as_deref().unwrap(), &rid, "Linux")
                            .unwrap();
                    }
                    MultiOutput::Event {
                        event: ConnectionEvent::Oa1(Event::Response { id: rid, text, .. }),
                        ..
                    } => {
                        assert_eq!(rid, asked);
                        answer = Some(text);
                    }
                    MultiOutput::Timeout(_) => break,
                    _ => {}
                }
            }
        }
        now += 10;
    }
    assert_eq!(answer.as_deref(), Some("Linux"));
    assert_eq!(got.join(" "), text, "the chat arrived whole and in order");
    // Each line fit the relayed line: the server cut none (it would add [CUT]).
    assert!(
        got.len() > 2 && got.iter().all(|l| !l.contains("[CUT]")),
        "{got:?}"
    );
    // On the wire, the request left in turn with the chat lines, not after all of them.
    let request_at = request_at.expect("the request arrived");
    assert!(
        request_at < lines,
        "the request waited for {request_at} of {lines} chat lines"
    );
    // A notice is a notice.
    desks.send_text("#a", "brb", true).unwrap();
    let mut notice = None;
    for now in now..now + 500 {
        let bytes = net.take_bytes(d);
        desks.handle_bytes(now, &bytes);
        while let MultiOutput::Transmit(line) = desks.poll_output(now) {
            net.handle_bytes(d, &line);
        }
        let bytes = net.take_bytes(r);
        remote.handle_bytes(now, &bytes);
        while let output = remote.poll_output(now)
            && !matches!(output, MultiOutput::Timeout(_))
        {
            if let MultiOutput::Chat(message) = output {
                notice = Some(message);
            }
        }
        if notice.is_some() {
            break;
        }
    }
    let notice = notice.expect("the notice arrived");
    assert_eq!(
        (notice.kind, notice.text.as_str()),
        (ChatKind::Notice, "brb")
    );
}

/// Feeds server lines to a desk connection and returns what it hands out, chat and membership
/// as text, in order (the lines it writes are dropped).
fn hand_out(desks: &mut MultiDesk, now: u64, lines: &str) -> Vec<String> {
    desks.handle_bytes(now, lines.replace('\n', "\r\n").as_bytes());
    let mut out = Vec::new();
    loop {
        match desks.poll_output(now) {
            MultiOutput::Chat(m) => out.push(format!("chat {} {} {}", m.channel, m.sender, m.text)),
            MultiOutput::Membership(event) => {
                out.push(serde_json::to_string(&event).unwrap());
            }
            MultiOutput::Timeout(_) => return out,
            _ => {}
        }
    }
}

#[test]
fn membership_changes_come_in_order_with_chat_when_asked() {
    let mut desks = MultiDesk::new(desks_config(), 0, 1).unwrap();
    desks.add_desk(0, "#a", "rexd").unwrap();
    desks.add_desk(0, "#b", "rexd").unwrap();
    desks.set_chat(true);
    desks.set_membership(true);
    assert!(hand_out(&mut desks, 0, ":srv 001 npcs :Welcome\n").is_empty());
    let got = hand_out(
        &mut desks,
        1,
        ":npcs!u@h JOIN #a\n\
         :srv 353 npcs = #a :npcs @rexd +eve\n\
         :srv 353 npcs = #a :bob\n\
         :srv 366 npcs #a :End of NAMES list\n\
         :npcs!u@h JOIN #B\n\
         :srv 353 npcs = #B :npcs eve\n\
         :srv 366 npcs #B :End of NAMES list\n\
         :eve!e@h PRIVMSG #a :hello\n\
         :bob!b@h PART #a :bye\n\
         :eve!e@h NICK :eve2\n\
         :rexd!r@h KICK #a eve2 :out\n\
         :eve2!e@h QUIT :irc.a.net irc.b.net\n\
         :zed!z@h JOIN #other\n\
         :npcs!u@h NICK :npcs2\n",
    );
    let expected = [
        r##"{"kind":"joined","channel":"#a","nick":"npcs"}"##,
        r##"{"kind":"names","channel":"#a","nicks":["npcs","rexd","eve","bob"]}"##,
        r##"{"kind":"joined","channel":"#b","nick":"npcs"}"##,
        r##"{"kind":"names","channel":"#b","nicks":["npcs","eve"]}"##,
        "chat #a eve!e@h hello",
        r##"{"kind":"parted","channel":"#a","nick":"bob","reason":"bye"}"##,
        r##"{"kind":"renamed","channel":"#a","nick":"eve","new_nick":"eve2"}"##,
        r##"{"kind":"renamed","channel":"#b","nick":"eve","new_nick":"eve2"}"##,
        r##"{"kind":"kicked","channel":"#a","nick":"eve2","by":"rexd","reason":"out"}"##,
        // Kicked from #a, eve2 quits from #b only.
        r##"{"kind":"quit","channel":"#b","nick":"eve2","reason":"irc.a.net irc.b.net"}"##,
        // Our own nick, in every channel we are in; #other is not carried.
        r##"{"kind":"renamed","channel":"#a","nick":"npcs","new_nick":"npcs2"}"##,
        r##"{"kind":"renamed","channel":"#b","nick":"npcs","new_nick":"npcs2"}"##,
    ];
    assert_eq!(got, expected);

    // Membership alone: chat stays silent, and the other way round.
    desks.set_chat(false);
    let got = hand_out(
        &mut desks,
        2,
        ":eve!e@h JOIN #a\n:eve!e@h PRIVMSG #a :still here\n",
    );
    assert_eq!(got, [r##"{"kind":"joined","channel":"#a","nick":"eve"}"##]);
    desks.set_chat(true);
    desks.set_membership(false);
    let got = hand_out(&mut desks, 3, ":eve!e@h PART #a\n:bob!b@h PRIVMSG #b :hi\n");
    assert_eq!(got, ["chat #b bob!b@h hi"]);
    desks.set_chat(false);
    assert!(hand_out(&mut desks, 4, ":x!x@h JOIN #a\n:x!x@h PRIVMSG #a :y\n").is_empty());
}

#[test]
fn membership_waiting_for_the_host_is_bounded() {
    let mut remote = MultiRemote::new(remote_config(), 0).unwrap();
    remote.add_channel(0, "#a").unwrap();
    remote.set_membership(true);
    let mut lines = String::from(":srv 001 rexd :Welcome\r\n:rexd!u@h JOIN #a\r\n");
    // A NAMES reply longer than anyone keeps, and then a flood of joins nobody polls for.
    for i in 0..3000 {
        lines.push_str(&format!(":srv 353 rexd = #a :n{i}\r\n"));
    }
    lines.push_str(":srv 366 rexd #a :End\r\n");
    for i in 0..3000 {
        lines.push_str(&format!(":j{i}!u@h JOIN #a\r\n"));
    }
    remote.handle_bytes(0, lines.as_bytes());
    let mut membership = Vec::new();
    loop {
        match remote.poll_output(0) {
            MultiOutput::Membership(event) => membership.push(event),
            MultiOutput::Timeout(_) => break,
            _ => {}
        }
    }
    assert_eq!(membership.len(), 1024, "at most 1024 wait");
    assert_eq!(remote.chat_dropped(), 3002 - 1024);
    // The newest are kept.
    assert_eq!(
        serde_json::to_string(membership.last().unwrap()).unwrap(),
        r##"{"kind":"joined","channel":"#a","nick":"j2999"}"##
    );
}

#[test]
fn a_desk_removed_and_added_again_at_once_finds_its_remote() {
    // The PART of the old desk and the JOIN of the new one cross on the wire: the server's
    // `PART` echo must not empty the new desk's member list, which its JOIN's NAMES filled.
    let (mut net, mut desks, mut remote, d, r) = pair(&["#a", "#b"], Pacing::UNLIMITED);
    assert!(desks.remove_desk(10, "#b"));
    desks.add_desk(10, "#b", "rexd").unwrap();
    let id = desks.request(10, "#b", "uptime", None).unwrap();
    let mut answer = None;
    for now in 10..30 {
        for (channel, event) in step(&mut desks, &mut net, d, now).1 {
            if let ConnectionEvent::Oa1(Event::Response { id: got, text, .. }) = event {
                assert_eq!(
                    (got.as_str(), channel.as_deref()),
                    (id.as_str(), Some("#b"))
                );
                answer = Some(text);
            }
        }
        let (_, events, _) = step(&mut remote, &mut net, r, now);
        answer_all(&mut remote, &events, now, |p| p.to_owned());
        step(&mut remote, &mut net, r, now);
    }
    assert_eq!(
        desks.channel_state("#b"),
        Some(ConnectionState::Ready),
        "{:?}",
        desks.waiting_for("#b")
    );
    assert_eq!(answer.as_deref(), Some("#b: uptime"));
}
