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

/// A bare OA1 endpoint ([`Client`], [`Server`]) for a host with its own IRC connection: it
/// takes every line the connection receives and gives back `PRIVMSG` lines to send.
pub trait LineEndpoint: Engine<Output = Output, Stats = Stats> {
    /// Feeds one line the IRC connection received, without its line end.
    fn handle_line(&mut self, now: u64, line: &[u8]);

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
    use crate::oa1::{ConnectionConfig, ConnectionEvent, Event, Pacing, Requester, Responder};
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
