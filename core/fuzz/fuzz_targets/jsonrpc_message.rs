//! The JSON-RPC message parser and the Peer on arbitrary input.
//!
//! - `message::parse` never panics; a parsed message written back parses to the same message.
//! - A `Peer` in either dialect fed arbitrary bytes (as NDJSON) never panics, answers what it
//!   must, and keeps its buffers bounded.
#![no_main]

use deskwire::jsonrpc::message::{Parsed, parse};
use deskwire::jsonrpc::{JsonRpc2, Output, Peer, PeerConfig, Sidecar};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(parsed) = parse(data, 16) {
        let messages = match parsed {
            Parsed::Single(m) => vec![m],
            Parsed::Batch(items) => items.into_iter().flatten().collect(),
        };
        for m in messages {
            let json = m.to_json();
            assert_eq!(parse(json.as_bytes(), 16), Ok(Parsed::Single(m)));
        }
    }

    let config = PeerConfig {
        max_message_bytes: 4096,
        max_incoming: 8,
        ..PeerConfig::default()
    };
    let mut a = Peer::new(JsonRpc2, config.clone(), 1);
    let mut b = Peer::new(Sidecar, config, 2);
    let _ = a.call(0, "exec.wait", None, 0);
    let _ = b.call(0, "health.ping", None, 0);
    for (i, piece) in data.chunks(7).enumerate() {
        let now = i as u64 * 1000;
        a.handle_bytes(now, piece);
        b.handle_bytes(now, piece);
        for _ in 0..64 {
            if let Output::Timeout(_) = a.poll_output(now) {
                break;
            }
        }
        for _ in 0..64 {
            if let Output::Timeout(_) = b.poll_output(now) {
                break;
            }
        }
        assert!(a.stats().bytes_buffered <= 4096 + 2 + 7);
        assert!(b.stats().incoming <= 8);
    }
});
