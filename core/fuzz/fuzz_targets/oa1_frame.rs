//! OA1 frame parsing on arbitrary text, and whole endpoints fed arbitrary lines.
//!
//! - `Frame::parse` never panics; a parsed frame written back parses to the same frame, and the
//!   written header has the length `Frame::header_len` says.
//! - A `Client` with a request in flight and a `Server` take the data as IRC lines (raw, and
//!   wrapped as a channel `PRIVMSG` from the peer) without panicking, and stay within their
//!   memory bounds.
#![no_main]

use deskwire::oa1::{Client, Config, Frame, Output, Server};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Some(frame) = Frame::parse(text) {
            let mut written = String::new();
            frame.write(&mut written);
            assert_eq!(Frame::parse(&written), Some(frame));
            let header = Frame::header_len(frame.kind, frame.id, frame.seq, frame.payload.is_empty());
            assert_eq!(written.len(), header + frame.payload.len());
        }
    }

    let mut config = Config::new("#desk", "desk");
    config.max_message_bytes = 4096;
    config.max_streams = 4;
    let mut client = Client::new(config.clone(), 1);
    let id = client.request(0, "true", Some(1_000)).unwrap();
    let mut server = Server::new(Config {
        nick: "bot".into(),
        ..config
    });
    let mut now = 0;
    for (n, line) in data.split(|&b| b == b'\n').enumerate() {
        now += 7;
        client.handle_line(now, line);
        server.handle_line(now, line);
        // The same bytes as a frame text from the peer, with the live id spliced in.
        let mut wrapped = b":peer!~p@h PRIVMSG #desk :OA1 ".to_vec();
        if n % 2 == 0 {
            wrapped.extend_from_slice(b"RES ");
            wrapped.extend_from_slice(id.as_bytes());
            wrapped.push(b' ');
        }
        wrapped.extend_from_slice(line);
        client.handle_line(now, &wrapped);
        server.handle_line(now, &wrapped);
        for _ in 0..64 {
            if let Output::Timeout(_) = client.poll_output(now) {
                break;
            }
        }
        for _ in 0..64 {
            if let Output::Timeout(_) = server.poll_output(now) {
                break;
            }
        }
        // 4 streams of at most 4 KiB decoded plus 4 KiB out of order, plus queued lines.
        assert!(client.stats().bytes_buffered < 64 * 1024);
        assert!(server.stats().bytes_buffered < 128 * 1024);
    }
});
