//! The four OA1 handles as traits, so a binding (or a test harness) wraps them with one piece
//! of generic code instead of one copy per handle.
//!
//! - [`Engine`]: what all four do alike: run due timers, hand out the next output, count.
//! - [`LineEndpoint`]: the bare endpoints ([`Client`], [`Server`]) over IRC lines the host
//!   reads and writes itself.
//! - [`ConnectionEngine`]: the per-connection engines ([`Desk`], [`Remote`]) over the raw bytes
//!   of one IRC socket.
//!
//! What only one side does (asking, answering) is in [`Requester`](super::Requester) and
//! [`Responder`](super::Responder). Each method here is the handle's inherent method of the
//! same name, which stays the public API: the traits add nothing but the generic view.

use crate::irc::Session;

use super::{
    Client, Config, ConnectionOutput, ConnectionState, ConnectionStats, Desk, Output, Remote,
    Server, Stats,
};

/// What every OA1 handle does alike: the sans-IO pull loop (see the
/// [module docs of `connection`](super::connection) for the host loop).
pub trait Engine {
    /// What [`Engine::poll_output`] hands out: [`Output`] for the bare endpoints (one IRC line
    /// without CRLF), [`ConnectionOutput`] for the connection engines (socket bytes).
    type Output;
    /// The counters: [`Stats`] for the bare endpoints, [`ConnectionStats`] (both layers) for
    /// the connection engines.
    type Stats;

    /// Runs what is due by `now` (timeouts, flushes). [`Engine::poll_output`] does this too,
    /// so calling it is optional.
    fn handle_timeout(&mut self, now: u64);

    /// The next thing to do: something to write, an event, or the deadline to wait for. Call
    /// it after every input and command until it answers a timeout.
    fn poll_output(&mut self, now: u64) -> Self::Output;

    /// The counters.
    fn stats(&self) -> Self::Stats;
}

/// How a `drain_into` ([`LineEndpoint::drain_into`]) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Everything that could go went: nothing more to do before this instant (the deadline
    /// of the [`Output::Timeout`] that `poll_output` would answer now).
    Until(u64),
    /// The buffer reached its limit while lines could still go: call again with more room.
    Full,
}

/// A bare OA1 endpoint ([`Client`], [`Server`]) for a host with its own IRC connection: it
/// takes every line the connection receives and gives back `PRIVMSG` lines to send.
pub trait LineEndpoint: Engine<Output = Output, Stats = Stats> {
    /// Feeds one line the IRC connection received, without its line end.
    fn handle_line(&mut self, now: u64, line: &[u8]);

    /// [`LineEndpoint::handle_line`] for each line of `data`: lines ended by LF, with or
    /// without a CR before it (what [`LineEndpoint::drain_into`] writes, or a relay's buffer of
    /// them); a last line without one is taken whole.
    fn handle_lines(&mut self, now: u64, data: &[u8]) {
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', data) {
            let line = &data[start..end];
            self.handle_line(now, line.strip_suffix(b"\r").unwrap_or(line));
            start = end + 1;
        }
        if start < data.len() {
            self.handle_line(now, &data[start..]);
        }
    }

    /// `poll_output` until it answers a timeout, in one call: each line onto the end of `out`
    /// with its CRLF, without a `String` each, as long as `out` stays within `max_len` bytes;
    /// each event onto `events`.
    fn drain_into(
        &mut self,
        now: u64,
        out: &mut Vec<u8>,
        max_len: usize,
        events: &mut Vec<super::Event>,
    ) -> Drained;

    /// Tells the endpoint our prefix as the host's IRC client knows it, so its chunks fit the
    /// lines the server relays.
    fn set_identity(&mut self, nick: &str, user: &str, host: &str);

    /// Holds outgoing lines back (`true`) or lets them go (`false`).
    fn set_held(&mut self, held: bool);

    /// The IRC connection ended: what is in flight ends (a client's requests fail with
    /// `disconnected`, a server's requests end with `cancelled` events).
    fn disconnect(&mut self, now: u64);

    /// The configuration the endpoint was made with.
    fn config(&self) -> &Config;
}

/// A per-connection OA1 engine ([`Desk`], [`Remote`]) over the raw bytes of one IRC socket:
/// registration, `PING`, `JOIN` and the OA1 endpoint behind one pull loop.
pub trait ConnectionEngine: Engine<Output = ConnectionOutput, Stats = ConnectionStats> {
    /// Feeds bytes read from the socket (any split; a partial line waits for the rest).
    fn handle_bytes(&mut self, now: u64, bytes: &[u8]);

    /// The socket closed or failed: the connection ends.
    fn handle_eof(&mut self, now: u64);

    /// Sends `QUIT :reason` and ends the connection.
    fn quit(&mut self, now: u64, reason: &str);

    /// Where the connection stands.
    fn state(&self) -> ConnectionState;

    /// The IRC session (our nick, learned prefix, channels; whether it has ended).
    fn session(&self) -> &Session;
}

macro_rules! engine {
    ($output:ty, $stats:ty: $($t:ty),*) => {$(
        impl Engine for $t {
            type Output = $output;
            type Stats = $stats;

            fn handle_timeout(&mut self, now: u64) {
                <$t>::handle_timeout(self, now)
            }

            fn poll_output(&mut self, now: u64) -> $output {
                <$t>::poll_output(self, now)
            }

            fn stats(&self) -> $stats {
                <$t>::stats(self)
            }
        }
    )*};
}

engine!(Output, Stats: Client, Server);
engine!(ConnectionOutput, ConnectionStats: Desk, Remote);

macro_rules! line_endpoint {
    ($($t:ty),*) => {$(
        impl LineEndpoint for $t {
            fn handle_line(&mut self, now: u64, line: &[u8]) {
                <$t>::handle_line(self, now, line)
            }

            fn drain_into(
                &mut self,
                now: u64,
                out: &mut Vec<u8>,
                max_len: usize,
                events: &mut Vec<super::Event>,
            ) -> Drained {
                <$t>::drain_into(self, now, out, max_len, events)
            }

            fn set_identity(&mut self, nick: &str, user: &str, host: &str) {
                <$t>::set_identity(self, nick, user, host)
            }

            fn set_held(&mut self, held: bool) {
                <$t>::set_held(self, held)
            }

            fn disconnect(&mut self, now: u64) {
                <$t>::disconnect(self, now)
            }

            fn config(&self) -> &Config {
                <$t>::config(self)
            }
        }
    )*};
}

line_endpoint!(Client, Server);

macro_rules! connection_engine {
    ($($t:ty),*) => {$(
        impl ConnectionEngine for $t {
            fn handle_bytes(&mut self, now: u64, bytes: &[u8]) {
                <$t>::handle_bytes(self, now, bytes)
            }

            fn handle_eof(&mut self, now: u64) {
                <$t>::handle_eof(self, now)
            }

            fn quit(&mut self, now: u64, reason: &str) {
                <$t>::quit(self, now, reason)
            }

            fn state(&self) -> ConnectionState {
                <$t>::state(self)
            }

            fn session(&self) -> &Session {
                <$t>::session(self)
            }
        }
    )*};
}

connection_engine!(Desk, Remote);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oa1::{
        ConnectionConfig, ConnectionEvent, Event, Failure, Pacing, Requester, Responder,
    };
    use crate::sim::{ClientId, Network, Relay};

    const CHANNEL: &str = "#desk";

    fn line_config(nick: &str, peer: &str) -> Config {
        let mut c = Config::new(CHANNEL, nick);
        c.allowed_sender = Some(peer.to_owned());
        c
    }

    /// Drains a bare endpoint into the relay as `nick`: its events, and its deadline.
    fn drain_lines(
        e: &mut impl LineEndpoint,
        relay: &mut Relay,
        nick: &str,
        now: u64,
    ) -> Vec<Event> {
        let mut events = Vec::new();
        loop {
            match e.poll_output(now) {
                Output::Transmit(line) => relay.send(nick, &line).expect("the relay takes it"),
                Output::Event(event) => events.push(event),
                Output::Timeout(at) => {
                    assert!(at >= now);
                    return events;
                }
            }
        }
    }

    /// Hands `e` what the relay has for `nick`.
    fn deliver(e: &mut impl LineEndpoint, relay: &mut Relay, nick: &str, now: u64) {
        while let Some(line) = relay.recv(nick) {
            e.handle_line(now, line.as_bytes());
        }
    }

    #[test]
    fn the_bare_endpoints_run_through_the_trait() {
        let mut relay = Relay::new(CHANNEL, 7);
        relay.join("desk", "desk", "127.0.0.1");
        relay.join("deskbot", "bot", "10.0.0.2");
        let mut client = Client::new(line_config("desk", "deskbot"), 1);
        let mut server = Server::new(line_config("deskbot", "desk"));
        LineEndpoint::set_identity(&mut client, "desk", "desk", "127.0.0.1");
        assert_eq!(LineEndpoint::config(&server).nick, "deskbot");

        let id = Requester::request(&mut client, 0, "uname", None).unwrap();
        let mut answered = None;
        for now in 0..50 {
            drain_lines(&mut client, &mut relay, "desk", now);
            deliver(&mut server, &mut relay, "deskbot", now);
            for event in drain_lines(&mut server, &mut relay, "deskbot", now) {
                if let Event::Request { id, payload, .. } = event {
                    assert_eq!(payload, "uname");
                    Responder::send(&mut server, now, &id, "Linux").unwrap();
                    Responder::finish(&mut server, now, &id).unwrap();
                }
            }
            drain_lines(&mut server, &mut relay, "deskbot", now);
            deliver(&mut client, &mut relay, "desk", now);
            answered = drain_lines(&mut client, &mut relay, "desk", now).pop();
            if answered.is_some() {
                break;
            }
        }
        assert_eq!(
            answered,
            Some(Event::Response {
                id,
                text: "Linux".into(),
                truncated: false
            })
        );
        assert_eq!(Engine::stats(&client), Client::stats(&client));
        assert!(Engine::stats(&server).frames_in > 0);

        // Held lines stay in; a disconnect ends the request in flight.
        LineEndpoint::set_held(&mut client, true);
        let id = client.request(100, "later", None).unwrap();
        assert!(drain_lines(&mut client, &mut relay, "desk", 100).is_empty());
        assert_eq!(relay.recv("deskbot"), None);
        LineEndpoint::disconnect(&mut client, 101);
        match drain_lines(&mut client, &mut relay, "desk", 101).as_slice() {
            [Event::Failed { id: failed, .. }] => assert_eq!(failed, &id),
            other => panic!("{other:?}"),
        }
    }

    /// What `poll_output` gives until its timeout: the lines each with CRLF, the events, the
    /// deadline.
    fn polled(e: &mut impl LineEndpoint, now: u64) -> (Vec<u8>, Vec<Event>, u64) {
        let (mut bytes, mut events) = (Vec::new(), Vec::new());
        loop {
            match e.poll_output(now) {
                Output::Transmit(line) => {
                    bytes.extend_from_slice(line.as_bytes());
                    bytes.extend_from_slice(b"\r\n");
                }
                Output::Event(event) => events.push(event),
                Output::Timeout(at) => return (bytes, events, at),
            }
        }
    }

    /// `drain_into` with at most `max_len` bytes a call, called until it is not full.
    fn drained(e: &mut impl LineEndpoint, now: u64, max_len: usize) -> (Vec<u8>, Vec<Event>, u64) {
        let (mut bytes, mut events) = (Vec::new(), Vec::new());
        loop {
            let mut out = Vec::new();
            let end = e.drain_into(now, &mut out, max_len, &mut events);
            assert!(out.len() <= max_len, "{} over {max_len}", out.len());
            bytes.extend_from_slice(&out);
            match end {
                Drained::Full => assert!(!out.is_empty(), "full with nothing in it"),
                Drained::Until(at) => return (bytes, events, at),
            }
        }
    }

    #[test]
    fn drain_into_gives_the_bytes_and_events_of_poll_output() {
        let mut config = line_config("desk", "deskbot");
        config.pacing = Pacing::UNLIMITED;
        let text = "ligne\tà \\ échapper 🙂\n".repeat(2000);
        let prefixed = |bytes: &[u8], source: &str| -> Vec<String> {
            std::str::from_utf8(bytes)
                .unwrap()
                .split_terminator("\r\n")
                .map(|line| format!(":{source} {line}"))
                .collect()
        };
        // The same request and answer through two pairs of endpoints: one polled line by
        // line, the other drained into buffers, 1000 bytes at a time for the request and all at
        // once for the answer.
        let mut results = Vec::new();
        for max_len in [None, Some(1000)] {
            let mut client = Client::new(config.clone(), 1);
            let mut server_config = line_config("deskbot", "desk");
            server_config.pacing = Pacing::UNLIMITED;
            let mut server = Server::new(server_config);
            let id = client.request(0, &text, None).unwrap();
            let (request, _, _) = match max_len {
                None => polled(&mut client, 0),
                Some(max) => drained(&mut client, 0, max),
            };
            for line in prefixed(&request, "desk!d@h") {
                server.handle_line(0, line.as_bytes());
            }
            let (nothing, events, _) = match max_len {
                None => polled(&mut server, 0),
                Some(_) => drained(&mut server, 0, usize::MAX),
            };
            assert!(nothing.is_empty());
            let [Event::Request { payload, .. }] = events.as_slice() else {
                panic!("{events:?}")
            };
            assert_eq!(payload, &text);
            server.respond(0, &id, &text).unwrap();
            let (answer, _, deadline) = match max_len {
                None => polled(&mut server, 0),
                Some(max) => drained(&mut server, 0, max),
            };
            for line in prefixed(&answer, "deskbot!b@h") {
                client.handle_line(0, line.as_bytes());
            }
            let (_, events, _) = match max_len {
                None => polled(&mut client, 0),
                Some(_) => drained(&mut client, 0, usize::MAX),
            };
            assert_eq!(
                events,
                [Event::Response {
                    id,
                    text: text.clone(),
                    truncated: false
                }]
            );
            results.push((request, answer, deadline, client.stats(), server.stats()));
        }
        assert!(results[0].0.len() > 100 * 400, "{}", results[0].0.len());
        assert_eq!(results[0], results[1]);
    }

    /// Timeouts found by a drain (checked once per call, not per line) are the events and
    /// lines `poll_output` gives: the timed-out request's failure once, its `CANCEL`, and the
    /// other request's lines still going.
    #[test]
    fn drain_into_ends_timed_out_requests_as_poll_output_does() {
        let mut config = line_config("desk", "deskbot");
        config.pacing = Pacing::UNLIMITED;
        let mut results = Vec::new();
        for drain in [false, true] {
            let mut client = Client::new(config.clone(), 1);
            let short = client.request(0, "sleep 9", Some(100)).unwrap();
            let take = |client: &mut Client, now| match drain {
                false => polled(client, now),
                true => drained(client, now, usize::MAX),
            };
            let (first, none, _) = take(&mut client, 0);
            assert!(none.is_empty() && !first.is_empty());
            let long = client
                .request(150, &"x".repeat(2000), Some(60_000))
                .unwrap();
            let (lines, events, _) = take(&mut client, 200);
            let text = String::from_utf8(lines.clone()).unwrap();
            assert!(text.contains(&format!("OA1 CANCEL {short} ")), "{text}");
            assert!(text.contains(&format!("OA1 REQ {long} ")), "{text}");
            let [Event::Failed { id, failure }] = events.as_slice() else {
                panic!("{events:?}")
            };
            assert_eq!(id, &short);
            assert!(matches!(failure, Failure::Timeout { .. }), "{failure:?}");
            let (again, more, _) = take(&mut client, 200);
            assert!(again.is_empty() && more.is_empty(), "{more:?}");
            results.push((lines, events));
        }
        assert_eq!(results[0], results[1]);
    }

    #[test]
    fn handle_lines_takes_each_line_of_a_buffer() {
        let mut server = Server::new(line_config("deskbot", "desk"));
        let line = |seq: u32, more: u8, text: &str| {
            format!(":desk!d@h PRIVMSG #desk :OA1 REQ abc {seq} {more} {text}")
        };
        // CRLF, a bare LF, an empty line (not IRC: counted), and a last line without its end.
        let data = format!(
            "{}\r\n{}\n\r\n{}",
            line(1, 1, "one "),
            line(2, 1, "two "),
            line(3, 0, "three")
        );
        LineEndpoint::handle_lines(&mut server, 0, data.as_bytes());
        let (_, events, _) = polled(&mut server, 0);
        match events.as_slice() {
            [Event::Request { payload, .. }] => assert_eq!(payload, "one two three"),
            other => panic!("{other:?}"),
        }
        assert_eq!(server.stats().lines_in, 4);
        assert_eq!(server.stats().invalid_lines, 1);
    }

    #[test]
    fn drain_into_a_full_buffer_takes_nothing_and_held_lines_stay() {
        let mut config = line_config("desk", "deskbot");
        config.pacing = Pacing::UNLIMITED;
        let mut client = Client::new(config, 1);
        client.request(0, "uname -a", None).unwrap();
        let mut out = b"x".repeat(10);
        let mut events = Vec::new();
        assert_eq!(
            client.drain_into(0, &mut out, 20, &mut events),
            Drained::Full
        );
        assert_eq!(out, b"x".repeat(10));
        client.set_held(true);
        assert!(matches!(
            client.drain_into(0, &mut out, usize::MAX, &mut events),
            Drained::Until(_)
        ));
        assert_eq!(out.len(), 10);
        client.set_held(false);
        assert!(matches!(
            client.drain_into(0, &mut out, usize::MAX, &mut events),
            Drained::Until(_)
        ));
        assert!(
            out.ends_with(b" uname -a\r\n"),
            "{}",
            String::from_utf8_lossy(&out)
        );
    }

    /// Delivers what the network has for `client` to `e`, then drains `e` into the network.
    fn step(e: &mut impl ConnectionEngine, net: &mut Network, client: ClientId, now: u64) {
        let bytes = net.take_bytes(client);
        if !bytes.is_empty() {
            e.handle_bytes(now, &bytes);
        }
        loop {
            match e.poll_output(now) {
                ConnectionOutput::Transmit(bytes) => net.handle_bytes(client, &bytes),
                ConnectionOutput::Event(_) => {}
                ConnectionOutput::Timeout(at) => {
                    assert!(at >= now);
                    return;
                }
            }
        }
    }

    fn connection_config(nick: &str, peer: &str) -> ConnectionConfig {
        let mut config = ConnectionConfig::new(nick, CHANNEL);
        config.oa1.allowed_sender = Some(peer.into());
        config.oa1.pacing = Pacing::UNLIMITED;
        config
    }

    /// Brings `e` up on its own connection, then quits it: the same code for both engines.
    fn up_and_quit(mut e: impl ConnectionEngine, net: &mut Network, host: &str) {
        let client = net.connect(host);
        for _ in 0..5 {
            step(&mut e, net, client, 0);
        }
        assert!(e.session().is_registered());
        assert_ne!(e.state(), ConnectionState::Closed);
        assert!(e.stats().irc.lines_received > 0);
        e.quit(1, "bye");
        let mut sent = Vec::new();
        loop {
            match e.poll_output(1) {
                ConnectionOutput::Transmit(bytes) => sent.push(String::from_utf8(bytes).unwrap()),
                ConnectionOutput::Event(ConnectionEvent::Link(_) | ConnectionEvent::Irc(_)) => {}
                ConnectionOutput::Timeout(_) => break,
                other => panic!("{other:?}"),
            }
        }
        assert!(sent.iter().any(|l| l == "QUIT bye\r\n"), "{sent:?}");
        assert_eq!(e.state(), ConnectionState::Closed);
        assert!(e.session().is_closed());
    }

    #[test]
    fn the_connection_engines_run_through_the_trait() {
        let mut net = Network::new(3);
        let desk = Desk::new(connection_config("desk", "deskbot"), 0, 7).unwrap();
        let remote = Remote::new(connection_config("deskbot", "desk"), 0).unwrap();
        up_and_quit(desk, &mut net, "127.0.0.1");
        up_and_quit(remote, &mut net, "10.0.0.2");

        let mut desk = Desk::new(connection_config("desk", "deskbot"), 0, 7).unwrap();
        ConnectionEngine::handle_eof(&mut desk, 5);
        Engine::handle_timeout(&mut desk, 6);
        while !matches!(
            Engine::poll_output(&mut desk, 6),
            ConnectionOutput::Timeout(_)
        ) {}
        assert_eq!(ConnectionEngine::state(&desk), ConnectionState::Closed);
    }
}
