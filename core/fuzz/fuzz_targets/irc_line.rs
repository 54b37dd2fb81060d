//! IRC line parsing and line splitting on arbitrary bytes.
//!
//! - `Message::parse` never panics; a parsed message formatted back (tags, source, command,
//!   params) parses to the same message.
//! - `Privmsg::parse` (the OA1 fast path) reads the same source, target and text as
//!   `Message::parse` whenever it reads a line, unless the text alone is not UTF-8.
//! - `LineDecoder` gives the same lines whatever the feed sizes, never a line over its limit, and
//!   never holds more than the limit after being drained.
#![no_main]

use deskwire::irc::message::escape_tag_value;
use deskwire::irc::{DecodedLine, LineDecoder, Message, ParseError, Privmsg, format_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = Message::parse(data) {
        check_round_trip(&msg);
    }
    check_privmsg_fast_path(data);

    // The first bytes choose the line limit and the feed sizes; the rest is the stream.
    let (control, stream) = data.split_at(data.len().min(8));
    let max = 1 + usize::from(control.first().copied().unwrap_or(0));
    let whole = decode(max, &[stream]);
    let mut chunks: Vec<&[u8]> = Vec::new();
    let mut rest = stream;
    let mut sizes = control.iter().skip(1).cycle();
    while !rest.is_empty() {
        let size = sizes.next().map_or(rest.len(), |&b| usize::from(b % 17));
        if size == 0 {
            // An empty feed now and then, then at least one byte so the loop ends.
            chunks.push(&[]);
        }
        let (chunk, tail) = rest.split_at(size.clamp(1, rest.len()));
        chunks.push(chunk);
        rest = tail;
    }
    assert_eq!(decode(max, &chunks), whole);
});

#[derive(Debug, PartialEq)]
enum Out {
    Line(Vec<u8>),
    TooLong(usize),
}

fn decode(max: usize, chunks: &[&[u8]]) -> Vec<Out> {
    let mut decoder = LineDecoder::new(max);
    let mut out = Vec::new();
    for chunk in chunks {
        decoder.feed(chunk);
        while let Some(decoded) = decoder.next_line() {
            match decoded {
                DecodedLine::Line(line) => {
                    assert!(!line.is_empty() && !line.contains(&b'\n'));
                    assert!(line.len() < max, "a line with its line end fits the limit");
                    if let Ok(msg) = Message::parse(line) {
                        check_round_trip(&msg);
                    }
                    out.push(Out::Line(line.to_vec()));
                }
                DecodedLine::TooLong { discarded } => {
                    assert!(discarded > max);
                    out.push(Out::TooLong(discarded));
                }
                _ => unreachable!("no other kind of output"),
            }
        }
        assert!(decoder.buffered() <= max);
    }
    out
}

fn check_round_trip(msg: &Message<'_>) {
    let tags: Vec<(String, String)> = msg
        .tags()
        .map(|(key, value)| (key.to_owned(), value.into_owned()))
        .collect();
    let mut line = String::new();
    if !tags.is_empty() {
        line.push('@');
        for (index, (key, value)) in tags.iter().enumerate() {
            if index > 0 {
                line.push(';');
            }
            line.push_str(key);
            line.push('=');
            line.push_str(&escape_tag_value(value));
        }
        line.push(' ');
    }
    if let Some(source) = msg.source {
        line.push(':');
        line.push_str(source.raw);
        line.push(' ');
    }
    // Commands the formatter refuses (not letters or a numeric) are not written back.
    if format_line(&mut line, msg.command, msg.params()).is_err() {
        return;
    }
    let again = Message::parse(line.as_bytes()).expect("a formatted message parses");
    assert_eq!(again.command, msg.command);
    assert_eq!(again.params(), msg.params());
    assert_eq!(again.source, msg.source);
    let again_tags: Vec<(String, String)> = again
        .tags()
        .map(|(key, value)| (key.to_owned(), value.into_owned()))
        .collect();
    assert_eq!(again_tags, tags);
}

fn check_privmsg_fast_path(line: &[u8]) {
    let Some(fast) = Privmsg::parse(line) else {
        return;
    };
    match Message::parse(line) {
        Ok(msg) => {
            assert!(msg.is("PRIVMSG"));
            assert_eq!(msg.source, Some(fast.source));
            assert_eq!(msg.params().len(), 2);
            assert_eq!(msg.params()[0], fast.target);
            assert_eq!(msg.params()[1].as_bytes(), fast.text);
        }
        Err(error) => {
            assert_eq!(error, ParseError::InvalidUtf8);
            assert!(std::str::from_utf8(fast.text).is_err());
        }
    }
}
