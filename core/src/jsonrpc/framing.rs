//! Framing JSON messages on a byte stream: NDJSON (one message per line) and `Content-Length`
//! headers (LSP style).
//!
//! Both decoders buffer what the host feeds, hand out whole frames one at a time, and resume
//! scanning where they stopped, so feeding a byte at a time costs O(n) overall. Both bound their
//! memory: an over-long NDJSON line is reported once and skipped through its newline; a
//! `Content-Length` over the cap is reported before anything is allocated for it and its body is
//! skipped as it streams past.
//!
//! ```
//! use deskwire::jsonrpc::framing::{Frame, NdjsonDecoder};
//!
//! let mut decoder = NdjsonDecoder::new(1024);
//! decoder.feed(b"{\"id\":1}\r\n{\"id\"");
//! assert_eq!(decoder.next_frame(), Some(Frame::Message(b"{\"id\":1}")));
//! assert_eq!(decoder.next_frame(), None); // waits for the rest of the line
//! ```

use crate::lines::{DecodedLine, LineDecoder};

/// The default cap on one message (NDJSON line or `Content-Length` body): 16 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// The default cap on a `Content-Length` header block.
pub const DEFAULT_MAX_HEADER_BYTES: usize = 8 * 1024;

/// What a decoder found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// One whole message (not yet checked for UTF-8 or JSON).
    Message(&'a [u8]),
    /// Bad framing, reported once; decoding goes on after it.
    Error(FramingError),
}

/// Framing faults of the peer. The stream recovers from each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FramingError {
    /// An NDJSON line over the cap was skipped.
    #[error("a message line exceeds the {max} byte limit")]
    LineTooLong {
        /// The cap.
        max: usize,
    },
    /// A `Content-Length` over the cap: its body is skipped, never buffered.
    #[error("Content-Length {len} exceeds the {max} byte limit")]
    BodyTooLarge {
        /// The announced length.
        len: u64,
        /// The cap.
        max: usize,
    },
    /// A header block over the cap, or one that is not `Name: value` lines.
    #[error("malformed or over-long header block")]
    BadHeader,
    /// A header block without a valid `Content-Length`.
    #[error("header block without a valid Content-Length")]
    MissingContentLength,
}

/// Splits NDJSON: one message per `\n`-terminated line (a `\r` before it is dropped; blank lines
/// are skipped). See the module docs.
#[derive(Debug, Clone)]
pub struct NdjsonDecoder {
    lines: LineDecoder,
}

impl NdjsonDecoder {
    /// A decoder for messages of at most `max_message_bytes` (line end not counted).
    pub fn new(max_message_bytes: usize) -> Self {
        // The line splitter counts the line end; allow for CRLF.
        NdjsonDecoder {
            lines: LineDecoder::new(max_message_bytes.saturating_add(2)),
        }
    }

    /// Buffers bytes from the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.lines.feed(bytes);
    }

    /// The next frame, if a whole one is buffered.
    pub fn next_frame(&mut self) -> Option<Frame<'_>> {
        let max = self.lines.max_line_bytes() - 2;
        Some(match self.lines.next_line()? {
            // The splitter's limit leaves room for CRLF, so a line just over `max` gets here.
            DecodedLine::Line(line) if line.len() > max => {
                Frame::Error(FramingError::LineTooLong { max })
            }
            DecodedLine::Line(line) => Frame::Message(line),
            DecodedLine::TooLong { .. } => Frame::Error(FramingError::LineTooLong { max }),
        })
    }

    /// Splits `input` and hands each frame to `each`, copying only what it must: lines that
    /// arrive whole in `input` are handed out as slices of it, and only a line split across calls
    /// goes through the buffer. The same frames as [`feed`](Self::feed) and
    /// [`next_frame`](Self::next_frame), nearer the speed of a plain `memchr` split (copying
    /// every line first cost half of it; see `benches/jsonrpc_framing.rs`).
    pub fn decode(&mut self, mut input: &[u8], mut each: impl FnMut(Frame<'_>)) {
        let max = self.lines.max_line_bytes() - 2;
        if self.lines.is_mid_line() {
            // Finish the held line through the buffer.
            let Some(end) = memchr::memchr(b'\n', input) else {
                self.feed(input);
                while let Some(frame) = self.next_frame() {
                    each(frame);
                }
                return;
            };
            self.feed(&input[..=end]);
            while let Some(frame) = self.next_frame() {
                each(frame);
            }
            input = &input[end + 1..];
        }
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', input) {
            let line = &input[start..end];
            start = end + 1;
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            each(if line.len() > max {
                Frame::Error(FramingError::LineTooLong { max })
            } else {
                Frame::Message(line)
            });
        }
        // A trailing partial line waits in the buffer.
        self.feed(&input[start..]);
        while let Some(frame) = self.next_frame() {
            each(frame);
        }
    }

    /// Bytes held right now.
    pub fn buffered(&self) -> usize {
        self.lines.buffered()
    }
}

/// Appends one NDJSON frame for `message` (which must hold no newline: compact JSON never does).
pub fn encode_ndjson(message: &[u8], out: &mut Vec<u8>) {
    debug_assert!(!message.contains(&b'\n'));
    out.reserve(message.len() + 1);
    out.extend_from_slice(message);
    out.push(b'\n');
}

/// Appends one `Content-Length` frame for `message`.
pub fn encode_content_length(message: &[u8], out: &mut Vec<u8>) {
    out.reserve(message.len() + 32);
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(message.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(message);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a header block; `scanned` bytes of it hold no `\r\n\r\n`.
    Header { scanned: usize },
    /// Waiting for a body of this many bytes.
    Body { len: usize },
    /// Dropping this many more bytes of an oversized body.
    Skip { remaining: u64 },
    /// Dropping a broken header block through its blank line.
    SkipHeader { scanned: usize },
}

/// Splits `Content-Length:`-framed messages (the LSP base protocol). See the module docs.
#[derive(Debug, Clone)]
pub struct ContentLengthDecoder {
    max_body: usize,
    max_header: usize,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    start: usize,
    state: State,
    /// A whole body is at `buf[start..start + len]`, to be handed out.
    ready: Option<usize>,
}

impl ContentLengthDecoder {
    /// A decoder for bodies of at most `max_body` bytes and header blocks of at most `max_header`.
    pub fn new(max_body: usize, max_header: usize) -> Self {
        ContentLengthDecoder {
            max_body,
            max_header: max_header.max(32),
            buf: Vec::new(),
            start: 0,
            state: State::Header { scanned: 0 },
            ready: None,
        }
    }

    /// Buffers bytes from the stream. Bytes of a body being skipped are dropped here.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if let Some(len) = self.ready.take() {
            self.start += len;
        }
        // Compact only when the consumed part is at least half, so compaction stays O(n) overall.
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if let State::Skip { remaining } = &mut self.state
            && self.buf.len() == self.start
        {
            let drop = bytes
                .len()
                .min(usize::try_from(*remaining).unwrap_or(usize::MAX));
            *remaining -= drop as u64;
            bytes = &bytes[drop..];
            if *remaining == 0 {
                self.state = State::Header { scanned: 0 };
            }
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held right now.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next frame, if a whole one is buffered.
    pub fn next_frame(&mut self) -> Option<Frame<'_>> {
        if let Some(len) = self.ready.take() {
            // The previous body was handed out; consume it now.
            self.start += len;
        }
        loop {
            let pending = &self.buf[self.start..];
            match self.state {
                State::Body { len } => {
                    if pending.len() < len {
                        return None;
                    }
                    self.state = State::Header { scanned: 0 };
                    self.ready = Some(len);
                    let start = self.start;
                    return Some(Frame::Message(&self.buf[start..start + len]));
                }
                State::Skip { remaining } => {
                    let drop = pending
                        .len()
                        .min(usize::try_from(remaining).unwrap_or(usize::MAX));
                    self.start += drop;
                    let remaining = remaining - drop as u64;
                    if remaining > 0 {
                        self.state = State::Skip { remaining };
                        return None;
                    }
                    self.state = State::Header { scanned: 0 };
                }
                State::Header { scanned } | State::SkipHeader { scanned } => {
                    let skipping = matches!(self.state, State::SkipHeader { .. });
                    let Some(end) = find_blank_line(pending, scanned) else {
                        let scanned = pending.len().saturating_sub(3);
                        // Up to 3 bytes of the blank line may already be here.
                        if !skipping && pending.len() > self.max_header + 3 {
                            // Drop what we have and go on dropping through the blank line.
                            self.start += scanned;
                            self.state = State::SkipHeader { scanned: 0 };
                            return Some(Frame::Error(FramingError::BadHeader));
                        }
                        if skipping {
                            self.start += scanned;
                            self.state = State::SkipHeader { scanned: 0 };
                        } else {
                            self.state = State::Header { scanned };
                        }
                        return None;
                    };
                    let header = &pending[..end];
                    let too_long = end > self.max_header;
                    self.start += end + 4;
                    self.state = State::Header { scanned: 0 };
                    if skipping {
                        continue;
                    }
                    if too_long {
                        return Some(Frame::Error(FramingError::BadHeader));
                    }
                    match parse_content_length(header) {
                        Ok(len) if len <= self.max_body as u64 => {
                            self.state = State::Body { len: len as usize };
                        }
                        Ok(len) => {
                            self.state = State::Skip { remaining: len };
                            return Some(Frame::Error(FramingError::BodyTooLarge {
                                len,
                                max: self.max_body,
                            }));
                        }
                        Err(e) => return Some(Frame::Error(e)),
                    }
                }
            }
        }
    }
}

/// The offset of the `\r\n\r\n` ending a header block, searching from `from` (minus overlap).
fn find_blank_line(bytes: &[u8], from: usize) -> Option<usize> {
    let from = from.min(bytes.len());
    memchr::memmem::find(&bytes[from..], b"\r\n\r\n").map(|i| from + i)
}

/// The value of the one `Content-Length` header (case-insensitive name). Other headers, such as
/// `Content-Type`, are accepted and ignored.
fn parse_content_length(header: &[u8]) -> Result<u64, FramingError> {
    let mut length = None;
    for line in header.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Err(FramingError::BadHeader);
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"Content-Length") {
            let value = std::str::from_utf8(value)
                .map_err(|_| FramingError::MissingContentLength)?
                .trim();
            let parsed = match value.bytes().all(|b| b.is_ascii_digit()) && !value.is_empty() {
                true => value.parse::<u64>().ok(),
                false => None,
            };
            if length.is_some() || parsed.is_none() {
                return Err(FramingError::MissingContentLength);
            }
            length = parsed;
        }
    }
    length.ok_or(FramingError::MissingContentLength)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ndjson_all(max: usize, pieces: &[&[u8]]) -> Vec<Result<Vec<u8>, FramingError>> {
        let mut d = NdjsonDecoder::new(max);
        let mut out = Vec::new();
        for piece in pieces {
            d.feed(piece);
            while let Some(f) = d.next_frame() {
                out.push(match f {
                    Frame::Message(m) => Ok(m.to_vec()),
                    Frame::Error(e) => Err(e),
                });
            }
        }
        out
    }

    fn ndjson_decode_all(max: usize, pieces: &[&[u8]]) -> Vec<Result<Vec<u8>, FramingError>> {
        let mut d = NdjsonDecoder::new(max);
        let mut out = Vec::new();
        for piece in pieces {
            d.decode(piece, |f| {
                out.push(match f {
                    Frame::Message(m) => Ok(m.to_vec()),
                    Frame::Error(e) => Err(e),
                })
            });
        }
        out
    }

    fn cl_all(max: usize, pieces: &[&[u8]]) -> Vec<Result<Vec<u8>, FramingError>> {
        let mut d = ContentLengthDecoder::new(max, 64);
        let mut out = Vec::new();
        for piece in pieces {
            d.feed(piece);
            while let Some(f) = d.next_frame() {
                out.push(match f {
                    Frame::Message(m) => Ok(m.to_vec()),
                    Frame::Error(e) => Err(e),
                });
            }
        }
        out
    }

    fn bytewise(input: &[u8]) -> Vec<&[u8]> {
        input.chunks(1).collect()
    }

    #[test]
    fn ndjson_triad_and_crlf() {
        let input = b"{\"a\":1}\n\r\n{\"b\":2}\r\n{\"c\"";
        let expect = vec![Ok(b"{\"a\":1}".to_vec()), Ok(b"{\"b\":2}".to_vec())];
        assert_eq!(ndjson_all(100, &[input]), expect, "whole");
        assert_eq!(ndjson_all(100, &bytewise(input)), expect, "byte at a time");
        let mut d = NdjsonDecoder::new(100);
        d.feed(input);
        while d.next_frame().is_some() {}
        assert_eq!(d.buffered(), 4, "trailing partial line kept");
        d.feed(b":3}\n");
        assert_eq!(d.next_frame(), Some(Frame::Message(b"{\"c\":3}")));
    }

    #[test]
    fn ndjson_limit_boundaries() {
        let at_limit = [b'x'; 10];
        let mut input = at_limit.to_vec();
        input.extend_from_slice(b"\r\n");
        assert_eq!(ndjson_all(10, &[&input]), vec![Ok(at_limit.to_vec())]);
        let over = b"xxxxxxxxxxx\nok\n";
        let expect = vec![
            Err(FramingError::LineTooLong { max: 10 }),
            Ok(b"ok".to_vec()),
        ];
        assert_eq!(ndjson_all(10, &[over]), expect);
        // The limit crossed across two reads.
        assert_eq!(ndjson_all(10, &[b"xxxxxx", b"xxxxx\nok\n"]), expect);
        assert_eq!(ndjson_all(10, &bytewise(over)), expect);
        for pieces in [
            vec![&over[..]],
            vec![&b"xxxxxx"[..], &b"xxxxx\nok\n"[..]],
            bytewise(over),
        ] {
            assert_eq!(ndjson_decode_all(10, &pieces), expect);
        }
    }

    #[test]
    fn content_length_triad() {
        let input = b"Content-Length: 7\r\n\r\n{\"a\":1}content-length:2\r\nContent-Type: application/json\r\n\r\n{}Content-Length: 7\r\n\r\n{\"b\"";
        let expect = vec![Ok(b"{\"a\":1}".to_vec()), Ok(b"{}".to_vec())];
        assert_eq!(cl_all(100, &[input]), expect, "whole");
        assert_eq!(cl_all(100, &bytewise(input)), expect, "byte at a time");
        let mut d = ContentLengthDecoder::new(100, 64);
        d.feed(input);
        while d.next_frame().is_some() {}
        assert_eq!(d.buffered(), 4, "trailing partial body kept");
        d.feed(b":1}");
        assert_eq!(d.next_frame(), Some(Frame::Message(b"{\"b\":1}")));
        assert_eq!(d.next_frame(), None);
    }

    #[test]
    fn content_length_over_the_cap_is_skipped_without_buffering() {
        let mut d = ContentLengthDecoder::new(10, 64);
        d.feed(b"Content-Length: 9223372036854775808\r\n\r\n");
        assert_eq!(
            d.next_frame(),
            Some(Frame::Error(FramingError::BodyTooLarge {
                len: 1 << 63,
                max: 10
            }))
        );
        for _ in 0..1000 {
            d.feed(&[b'z'; 4096]);
            assert_eq!(d.next_frame(), None);
            assert_eq!(d.buffered(), 0);
        }
        // One byte over the cap, then a good frame.
        let out = cl_all(
            10,
            &[
                b"Content-Length: 11\r\n\r\n",
                b"xxxxxxxxxxx",
                b"Content-Length: 2\r\n\r\n{}",
            ],
        );
        assert_eq!(
            out,
            vec![
                Err(FramingError::BodyTooLarge { len: 11, max: 10 }),
                Ok(b"{}".to_vec())
            ]
        );
        assert_eq!(
            cl_all(10, &[b"Content-Length: 10\r\n\r\n0123456789"]),
            vec![Ok(b"0123456789".to_vec())]
        );
    }

    #[test]
    fn content_length_bad_headers_recover() {
        let out = cl_all(
            100,
            &[b"Content-Type: x\r\n\r\nContent-Length: 2\r\n\r\n{}"],
        );
        assert_eq!(
            out,
            vec![Err(FramingError::MissingContentLength), Ok(b"{}".to_vec())]
        );
        let out = cl_all(100, &[b"Content-Length: -1\r\n\r\nContent-Length: +2\r\n\r\nno colon\r\n\r\nContent-Length: 2\r\n\r\n[]"]);
        assert_eq!(
            out,
            vec![
                Err(FramingError::MissingContentLength),
                Err(FramingError::MissingContentLength),
                Err(FramingError::BadHeader),
                Ok(b"[]".to_vec())
            ]
        );
        // A header block over the cap is dropped through its blank line.
        let long = [b'h'; 200];
        let out = cl_all(100, &[&long, b"\r\n\r\nContent-Length: 2\r\n\r\n{}"]);
        assert_eq!(out, vec![Err(FramingError::BadHeader), Ok(b"{}".to_vec())]);
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_frames(
            messages in proptest::collection::vec("[ -~]{0,40}", 0..8),
            cuts in proptest::collection::vec(0usize..400, 0..10),
        ) {
            let mut nd = Vec::new();
            let mut cl = Vec::new();
            for m in &messages {
                encode_ndjson(m.as_bytes(), &mut nd);
                encode_content_length(m.as_bytes(), &mut cl);
            }
            for (stream, content_length) in [(nd, false), (cl, true)] {
                let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
                cuts.sort();
                let mut pieces = Vec::new();
                let mut last = 0;
                for c in cuts.into_iter().chain([stream.len()]) {
                    pieces.push(&stream[last..c]);
                    last = c;
                }
                let got = if content_length { cl_all(1000, &pieces) } else { ndjson_all(1000, &pieces) };
                if !content_length {
                    prop_assert_eq!(&ndjson_decode_all(1000, &pieces), &got);
                }
                let want: Vec<_> = messages
                    .iter()
                    .filter(|m| content_length || !m.trim_end_matches('\r').is_empty())
                    .map(|m| Ok(m.as_bytes().to_vec()))
                    .collect();
                if !content_length {
                    // NDJSON drops a trailing CR and skips blank lines; compare on that basis.
                    let want: Vec<_> = messages
                        .iter()
                        .map(|m| m.strip_suffix('\r').unwrap_or(m))
                        .filter(|m| !m.is_empty())
                        .map(|m| Ok(m.as_bytes().to_vec()))
                        .collect();
                    prop_assert_eq!(got, want);
                } else {
                    prop_assert_eq!(got, want);
                }
            }
        }
    }
}
