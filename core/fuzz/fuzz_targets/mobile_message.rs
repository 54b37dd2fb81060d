//! Mobile WebSocket messages and both engines on arbitrary text.
//!
//! - `ServerMessage::parse` / `ClientMessage::parse` / `Envelope::parse` never panic; a parsed
//!   message written back parses to the same message.
//! - A connected `Client` and a `Server` (one paired connection, one pairing) take every line
//!   of the input as a text frame, with the clock moving on, without panicking; their queues,
//!   tables and counters stay within their configured bounds.
#![no_main]

use deskwire::mobile::client::{self, Client};
use deskwire::mobile::server::{self, NewPermission, Server};
use deskwire::mobile::{ClientMessage, ConnId, Envelope, ServerMessage};
use libfuzzer_sys::fuzz_target;

fn drain_client(c: &mut Client, now: u64) {
    let mut n = 0;
    while !matches!(c.poll_output(now), client::Output::Timeout(_)) {
        n += 1;
        assert!(n < 10_000, "client output does not drain");
    }
}

fn drain_server(s: &mut Server, now: u64) {
    let mut n = 0;
    while !matches!(s.poll_output(now), server::Output::Timeout(t) if t >= now) {
        n += 1;
        assert!(n < 10_000, "server output does not drain");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(m) = ServerMessage::parse(text) {
        assert_eq!(ServerMessage::parse(&m.to_json()), Ok(m));
    }
    if let Ok(m) = ClientMessage::parse(text) {
        assert_eq!(ClientMessage::parse(&m.to_json()), Ok(m));
    }
    if let Ok(e) = Envelope::parse(text) {
        assert_eq!(Envelope::from_value(e.to_value()), Ok(e));
    }

    let client_config = client::Config {
        max_message_bytes: 4096,
        max_pending_permissions: 4,
        ..client::Config::default()
    };
    let mut phone = Client::new(client_config, Some("tok".into()));
    phone.start(0).unwrap();
    drain_client(&mut phone, 0);
    phone.connected(0).unwrap();

    let server_config = server::Config {
        max_message_bytes: 4096,
        max_pending_permissions: 4,
        answered_memory: 8,
        max_pairing_attempts: 3,
        ..server::Config::default()
    };
    let mut desk = Server::new(server_config.clone(), [1; 32]);
    desk.add_token("tok").unwrap();
    desk.start_pairing(0).unwrap();
    desk.open(0, ConnId(1), Some("tok")).unwrap();
    desk.open(0, ConnId(2), None).unwrap();

    let mut now = 0;
    for (n, line) in text.split('\n').enumerate() {
        now += 997;
        phone.handle_text(now, line);
        desk.handle_text(now, ConnId(1), line);
        desk.handle_text(now, ConnId(2), line);
        if n % 3 == 0 {
            let _ = desk.request_permission(
                now,
                NewPermission {
                    tool_name: "shell".into(),
                    command: line.chars().take(16).collect(),
                    description: String::new(),
                    tier: "low".into(),
                },
            );
        }
        // Answer whatever the phone was asked, so responses reach the desk's table too.
        let first = phone.pending_permissions().next().map(str::to_owned);
        if let Some(id) = first {
            let _ = phone.respond_permission(now, &id, n % 2 == 0, n % 5 == 0);
        }
        drain_client(&mut phone, now);
        drain_server(&mut desk, now);
        let c = phone.stats();
        assert!(c.pending_permissions <= 4);
        let s = desk.stats();
        assert!(s.pending_permissions <= 4);
        assert!(s.connections <= 2);
        assert!(s.tokens <= server_config.max_tokens as u64);
    }
});
