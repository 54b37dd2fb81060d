//! Escaping, unescaping and chunking on arbitrary input.
//!
//! - Unescaping any bytes never panics, gives the bytes of a plain byte-by-byte decoder, and
//!   feeding them in any split gives the same bytes as one feed.
//! - Any text escaped, cut into chunks for any budget, and put on the wire comes back exactly;
//!   no wire payload is over the budget, ends with a space, or holds CR, LF or NUL.
#![no_main]

use deskwire::oa1::chunk::{MIN_PAYLOAD_BUDGET, split, wire_payload};
use deskwire::oa1::escape::{Unescaper, escape, unescape};
use libfuzzer_sys::fuzz_target;

/// The decoding rules one byte at a time (the library decodes a block at a time).
fn unescape_bytewise(escaped: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = escaped.iter().copied();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'\\') => out.push(b'\\'),
            Some(b'n') => out.push(b'\n'),
            Some(b'r') => out.push(b'\r'),
            Some(b't') => out.push(b'\t'),
            Some(b'0') => out.push(0),
            Some(b's') => out.push(b' '),
            Some(other) => out.extend([b'\\', other]),
            None => out.push(b'\\'),
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let (control, rest) = data.split_at(data.len().min(2));
    let whole = unescape(rest);
    assert_eq!(whole, unescape_bytewise(rest));
    let step = 1 + usize::from(control.first().copied().unwrap_or(0) % 80);
    let mut pieces = Vec::new();
    let mut decoder = Unescaper::default();
    for piece in rest.chunks(step) {
        decoder.feed(piece, &mut pieces);
    }
    decoder.finish(&mut pieces);
    assert_eq!(pieces, whole);

    if let Ok(text) = std::str::from_utf8(rest) {
        let budget = MIN_PAYLOAD_BUDGET + usize::from(control.get(1).copied().unwrap_or(0));
        let escaped = escape(text);
        let mut back = Vec::new();
        for chunk in split(&escaped, |_| budget) {
            let wire = wire_payload(chunk);
            assert!(wire.len() <= budget);
            assert!(!wire.ends_with(' '));
            assert!(!wire.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)));
            back.extend(unescape(wire.as_bytes()));
        }
        assert_eq!(back, text.as_bytes());
    }
});
