//! Splitting a byte stream into lines, with a bounded buffer: IRC lines and NDJSON messages.
//!
//! [`LineDecoder`] follows tokio-util's `LinesCodec`: the host feeds whatever the socket gave it,
//! then pulls lines until there are none left. A line longer than the limit is reported once as
//! [`DecodedLine::TooLong`], dropped through its `\n`, and decoding goes on with the next line, so
//! a peer cannot make the decoder buffer more than the limit.
//!
//! ```
//! use deskwire::lines::{DecodedLine, LineDecoder};
//!
//! let mut decoder = LineDecoder::new(512);
//! decoder.feed(b"PING :a\r\n:srv 001 desk :Wel");
//! assert_eq!(decoder.next_line(), Some(DecodedLine::Line(b"PING :a")));
//! assert_eq!(decoder.next_line(), None); // the rest waits for its line end
//! decoder.feed(b"come\r\n");
//! assert_eq!(decoder.next_line(), Some(DecodedLine::Line(b":srv 001 desk :Welcome")));
//! ```

use crate::irc::DEFAULT_MAX_LINE_BYTES;

/// What [`LineDecoder::next_line`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodedLine<'a> {
    /// One line, without its `\n` and without a `\r` just before it. Never empty.
    Line(&'a [u8]),
    /// A line longer than the limit was dropped.
    TooLong {
        /// How many bytes the dropped line had, its `\r\n` or `\n` included.
        discarded: usize,
    },
}

/// Splits a byte stream into lines ending in `\n` (a `\r` before it is removed), holding at most
/// `max_line_bytes` of an unfinished line.
///
/// The limit counts the whole line with its line end, as IRC does (512 bytes, CRLF included). Empty
/// lines are skipped. Scanning resumes where the previous call stopped, so feeding one byte at a time
/// costs O(n) in total.
///
/// After each [`feed`](Self::feed), call [`next_line`](Self::next_line) until it answers `None`;
/// then at most `max_line_bytes` stay buffered, and at most that plus one feed at any time.
#[derive(Debug, Clone)]
pub struct LineDecoder {
    max_line_bytes: usize,
    buf: Vec<u8>,
    /// Start of the first byte not yet handed out.
    start: usize,
    /// `buf[start..scanned]` holds no `\n`.
    scanned: usize,
    /// Bytes of the current over-long line dropped so far, while dropping it.
    discarding: Option<usize>,
    /// An over-long line that ended during `feed`, to report before anything else.
    finished_too_long: Option<usize>,
}

/// The default limit fits any IRC line with message tags ([`DEFAULT_MAX_LINE_BYTES`]).
impl Default for LineDecoder {
    fn default() -> Self {
        LineDecoder::new(DEFAULT_MAX_LINE_BYTES)
    }
}

impl LineDecoder {
    /// A decoder for lines of at most `max_line_bytes`, line end included. Plain IRC needs 512;
    /// with IRCv3 message tags use [`DEFAULT_MAX_LINE_BYTES`] (512 + 8191). A limit of 0 is taken
    /// as 1 (only empty lines would fit).
    pub fn new(max_line_bytes: usize) -> Self {
        LineDecoder {
            max_line_bytes: max_line_bytes.max(1),
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            discarding: None,
            finished_too_long: None,
        }
    }

    /// The line limit, line end included.
    pub fn max_line_bytes(&self) -> usize {
        self.max_line_bytes
    }

    /// Bytes held that [`next_line`](Self::next_line) has not handed out yet (complete lines not
    /// yet pulled and the unfinished line). Dropped bytes of an over-long line are not held.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Whether part of a line is held (buffered, or being dropped as over-long), so the next
    /// bytes continue it rather than start a new line.
    pub fn is_mid_line(&self) -> bool {
        self.buffered() > 0 || self.discarding.is_some() || self.finished_too_long.is_some()
    }

    /// Appends bytes that arrived. Nothing is decoded until [`next_line`](Self::next_line).
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if self.start > 0 {
            // Drop what was handed out; only the unfinished rest moves, once per feed.
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        if self.buf.is_empty()
            && self.finished_too_long.is_none()
            && let Some(dropped) = self.discarding
        {
            // Dropping an over-long line with nothing pending: skip the bytes without copying.
            match memchr::memchr(b'\n', bytes) {
                None => {
                    self.discarding = Some(dropped + bytes.len());
                    return;
                }
                Some(end) => {
                    self.discarding = None;
                    self.finished_too_long = Some(dropped + end + 1);
                    bytes = &bytes[end + 1..];
                }
            }
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete line, a report of a dropped over-long line, or `None` when more bytes are
    /// needed.
    pub fn next_line(&mut self) -> Option<DecodedLine<'_>> {
        if let Some(discarded) = self.finished_too_long.take() {
            return Some(DecodedLine::TooLong { discarded });
        }
        loop {
            let Some(offset) = memchr::memchr(b'\n', &self.buf[self.scanned..]) else {
                self.scanned = self.buf.len();
                let unfinished = self.buf.len() - self.start;
                if let Some(dropped) = self.discarding.as_mut() {
                    *dropped += unfinished;
                    self.drop_unfinished();
                } else if unfinished > self.max_line_bytes {
                    // With its line end still to come, this line is already over the limit.
                    self.discarding = Some(unfinished);
                    self.drop_unfinished();
                }
                return None;
            };
            let newline = self.scanned + offset;
            let line_start = self.start;
            self.start = newline + 1;
            self.scanned = self.start;
            let len = newline + 1 - line_start;
            if let Some(dropped) = self.discarding.take() {
                return Some(DecodedLine::TooLong {
                    discarded: dropped + len,
                });
            }
            let mut line_end = newline;
            if line_end > line_start && self.buf[line_end - 1] == b'\r' {
                line_end -= 1;
            }
            if line_end == line_start {
                continue;
            }
            if len > self.max_line_bytes {
                return Some(DecodedLine::TooLong { discarded: len });
            }
            return Some(DecodedLine::Line(&self.buf[line_start..line_end]));
        }
    }

    fn drop_unfinished(&mut self) {
        self.buf.truncate(self.start);
        self.scanned = self.start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Out {
        Line(Vec<u8>),
        TooLong(usize),
    }

    fn drain(decoder: &mut LineDecoder, out: &mut Vec<Out>) {
        while let Some(line) = decoder.next_line() {
            out.push(match line {
                DecodedLine::Line(l) => Out::Line(l.to_vec()),
                DecodedLine::TooLong { discarded } => Out::TooLong(discarded),
            });
        }
    }

    fn decode_chunks(max: usize, chunks: &[&[u8]]) -> (Vec<Out>, LineDecoder) {
        let mut decoder = LineDecoder::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk);
            drain(&mut decoder, &mut out);
        }
        (out, decoder)
    }

    fn line(s: &str) -> Out {
        Out::Line(s.as_bytes().to_vec())
    }

    const STREAM: &[u8] =
        b":srv 001 desk :Welcome\r\nPING :tok\n\r\n\n:a!b@c PRIVMSG #desk :hi\r\r\n:x JOIN #d\r\n";

    fn expected_stream() -> Vec<Out> {
        vec![
            line(":srv 001 desk :Welcome"),
            line("PING :tok"),
            line(":a!b@c PRIVMSG #desk :hi\r"),
            line(":x JOIN #d"),
        ]
    }

    #[test]
    fn whole_input_at_once() {
        let (out, decoder) = decode_chunks(512, &[STREAM]);
        assert_eq!(out, expected_stream());
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn one_byte_at_a_time() {
        let bytes: Vec<&[u8]> = STREAM.chunks(1).collect();
        let (out, decoder) = decode_chunks(512, &bytes);
        assert_eq!(out, expected_stream());
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn trailing_partial_line_waits_for_its_end() {
        let (out, mut decoder) = decode_chunks(512, &[b"PING :a\r\nPRIVMSG #d :hal"]);
        assert_eq!(out, vec![line("PING :a")]);
        assert_eq!(decoder.buffered(), "PRIVMSG #d :hal".len());
        assert_eq!(decoder.next_line(), None);
        decoder.feed(b"f\r");
        assert_eq!(decoder.next_line(), None);
        decoder.feed(b"\n");
        assert_eq!(
            decoder.next_line(),
            Some(DecodedLine::Line(b"PRIVMSG #d :half"))
        );
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn exactly_the_limit_passes_one_over_is_dropped() {
        // 10 bytes with the CRLF included.
        let fits = b"12345678\r\n";
        let over = b"123456789\r\n";
        let (out, _) = decode_chunks(10, &[fits, over, b"ok\n"]);
        assert_eq!(out, vec![line("12345678"), Out::TooLong(11), line("ok")]);
        // A bare LF counts one byte.
        let (out, _) = decode_chunks(10, &[b"123456789\n1234567890\n"]);
        assert_eq!(out, vec![line("123456789"), Out::TooLong(11)]);
    }

    #[test]
    fn limit_crossed_across_two_feeds() {
        let (out, decoder) = decode_chunks(10, &[b"1234567", b"89ab", b"cdef"]);
        // Dropped already, nothing kept, and not reported until the line ends.
        assert_eq!(out, vec![]);
        assert_eq!(decoder.buffered(), 0);
        let (out, _) = decode_chunks(10, &[b"1234567", b"89ab", b"cd\r\nnext\r\n"]);
        assert_eq!(out, vec![Out::TooLong(15), line("next")]);
        // Unfinished line of exactly the limit: its line end will push it over.
        let (out, _) = decode_chunks(10, &[b"1234567890", b"\r\nnext\n"]);
        assert_eq!(out, vec![Out::TooLong(12), line("next")]);
    }

    #[test]
    fn crlf_split_across_feeds() {
        let (out, _) = decode_chunks(512, &[b"PING :a\r", b"\nPING :b\r", b"\n"]);
        assert_eq!(out, vec![line("PING :a"), line("PING :b")]);
        // The CR sits exactly at the limit; the LF arrives later.
        let (out, _) = decode_chunks(10, &[b"12345678\r", b"\n"]);
        assert_eq!(out, vec![line("12345678")]);
    }

    #[test]
    fn flood_without_newline_stays_bounded() {
        let mut decoder = LineDecoder::new(512);
        let chunk = [b'x'; 4096];
        for _ in 0..1000 {
            decoder.feed(&chunk);
            assert_eq!(decoder.next_line(), None);
            assert!(decoder.buffered() <= 512);
        }
        decoder.feed(b"\r\nPONG :x\r\n");
        assert_eq!(
            decoder.next_line(),
            Some(DecodedLine::TooLong {
                discarded: 4096 * 1000 + 2
            })
        );
        assert_eq!(decoder.next_line(), Some(DecodedLine::Line(b"PONG :x")));
        assert_eq!(decoder.next_line(), None);
    }

    #[test]
    fn many_lines_in_one_feed() {
        let input: Vec<u8> = (0..1000)
            .flat_map(|i| format!("PING :{i}\r\n").into_bytes())
            .collect();
        let (out, _) = decode_chunks(512, &[&input]);
        assert_eq!(out.len(), 1000);
        assert_eq!(out[999], line("PING :999"));
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_lines(
            input in proptest::collection::vec(
                prop_oneof![Just(b'\r'), Just(b'\n'), Just(b'a'), any::<u8>()], 0..300),
            cuts in proptest::collection::vec(0usize..300, 0..20),
            max in 1usize..40,
        ) {
            let (whole, whole_decoder) = decode_chunks(max, &[&input]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(input.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut last = 0;
            for cut in cuts {
                chunks.push(&input[last..cut]);
                last = cut;
            }
            chunks.push(&input[last..]);
            let (split, split_decoder) = decode_chunks(max, &chunks);
            prop_assert_eq!(&split, &whole);
            prop_assert_eq!(split_decoder.buffered(), whole_decoder.buffered());
            prop_assert!(split_decoder.buffered() <= max);
            for out in &whole {
                if let Out::Line(l) = out {
                    prop_assert!(!l.is_empty() && !l.contains(&b'\n'));
                    prop_assert!(l.len() < max);
                }
            }
        }
    }
}
