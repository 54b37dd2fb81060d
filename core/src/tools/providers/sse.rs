//! Server-sent events (the WHATWG `text/event-stream` format), the framing of every
//! provider's streamed response: `field: value` lines, events ended by a blank line, several
//! `data` lines joined with `\n`, comments (`:`) ignored, LF / CRLF / CR line ends.
//!
//! Bounded: an event holds at most `max_event_bytes`; a longer one is reported once as
//! [`ParseError::TooLarge`] and skipped through its end.

use std::collections::VecDeque;

use super::ParseError;

/// Default cap of one event: 4 MiB (a whole Gemini chunk or a Responses `completed` event
/// with the full response fits).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 4 << 20;

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field (empty when absent).
    pub event: String,
    /// The `data` lines, joined with `\n`.
    pub data: String,
}

/// Splits a byte stream into events.
#[derive(Debug, Clone)]
pub struct SseDecoder {
    max_event_bytes: usize,
    /// The unfinished line.
    line: Vec<u8>,
    /// The current line has bytes (kept or skipped): it is not the blank line that ends an
    /// event.
    line_seen: bool,
    /// The last byte was a CR (a following LF belongs to it).
    after_cr: bool,
    /// Bytes of a leading UTF-8 byte order mark seen so far; `None` once the start is past.
    bom: Option<usize>,
    event: String,
    data: String,
    has_data: bool,
    /// Bytes of the current event so far.
    size: usize,
    /// Skipping the rest of an over-long event.
    skipping: bool,
    ready: VecDeque<Result<SseEvent, ParseError>>,
}

impl SseDecoder {
    /// A decoder holding at most `max_event_bytes` of one event.
    pub fn new(max_event_bytes: usize) -> SseDecoder {
        SseDecoder {
            max_event_bytes,
            line: Vec::new(),
            line_seen: false,
            after_cr: false,
            bom: Some(0),
            event: String::new(),
            data: String::new(),
            has_data: false,
            size: 0,
            skipping: false,
            ready: VecDeque::new(),
        }
    }

    /// Takes the next bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        const BOM: &[u8] = b"\xEF\xBB\xBF";
        let mut rest = bytes;
        // The stream may start with a byte order mark, which is not part of the first line.
        while let Some(seen) = self.bom {
            match rest.first() {
                None => return,
                Some(&b) if b == BOM[seen] => {
                    rest = &rest[1..];
                    self.bom = (seen + 1 < BOM.len()).then_some(seen + 1);
                }
                Some(_) => {
                    self.bom = None;
                    self.feed(&BOM[..seen]);
                }
            }
        }
        while !rest.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match memchr::memchr2(b'\n', b'\r', rest) {
                Some(i) => {
                    self.take_part(&rest[..i]);
                    self.after_cr = rest[i] == b'\r';
                    self.end_line();
                    rest = &rest[i + 1..];
                }
                None => {
                    self.take_part(rest);
                    rest = &[];
                }
            }
        }
    }

    /// The end of the stream: an event not ended by a blank line is dispatched.
    pub fn finish(&mut self) {
        if self.line_seen {
            self.end_line();
        }
        self.dispatch();
    }

    /// The next complete event (or an over-long event's error).
    pub fn next_event(&mut self) -> Option<Result<SseEvent, ParseError>> {
        self.ready.pop_front()
    }

    fn take_part(&mut self, part: &[u8]) {
        self.line_seen |= !part.is_empty();
        if self.skipping {
            return;
        }
        self.size = self.size.saturating_add(part.len());
        if self.size > self.max_event_bytes {
            self.skipping = true;
            self.line.clear();
            self.data.clear();
            self.ready
                .push_back(Err(ParseError::TooLarge("server-sent event")));
            return;
        }
        self.line.extend_from_slice(part);
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        if !std::mem::take(&mut self.line_seen) {
            self.dispatch();
            return;
        }
        if self.skipping {
            return;
        }
        // Line ends count against the event too, so a flood of empty `data:` lines is bounded.
        self.size = self.size.saturating_add(1);
        let text = String::from_utf8_lossy(&line);
        let (field, value) = match text.find(':') {
            Some(0) => return, // comment
            Some(i) => {
                let v = &text[i + 1..];
                (&text[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&text[..], ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = value.to_owned(),
            _ => {} // id, retry, unknown fields: nothing a response parser needs
        }
    }

    fn dispatch(&mut self) {
        if self.has_data && !self.skipping {
            self.ready.push_back(Ok(SseEvent {
                event: std::mem::take(&mut self.event),
                data: std::mem::take(&mut self.data),
            }));
        }
        self.event.clear();
        self.data.clear();
        self.has_data = false;
        self.size = 0;
        self.skipping = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(d: &mut SseDecoder) -> Vec<Result<SseEvent, ParseError>> {
        std::iter::from_fn(|| d.next_event()).collect()
    }

    fn ev(event: &str, data: &str) -> Result<SseEvent, ParseError> {
        Ok(SseEvent {
            event: event.into(),
            data: data.into(),
        })
    }

    const STREAM: &[u8] = b"\xEF\xBB\xBF: keep-alive\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\ndata: x\ndata:y\n\nid: 3\n\ndata: last\r\rdata: tail";

    #[test]
    fn whole_byte_by_byte_and_trailing() {
        let want = vec![
            ev("message_start", r#"{"a":1}"#),
            ev("", "x\ny"),
            ev("", "last"),
            ev("", "tail"),
        ];
        let mut whole = SseDecoder::new(1024);
        whole.feed(STREAM);
        let mut got = all(&mut whole);
        assert_eq!(got.len(), 3, "the tail waits for the end of the stream");
        whole.finish();
        got.extend(all(&mut whole));
        assert_eq!(got, want);
        let mut bytes = SseDecoder::new(1024);
        for b in STREAM {
            bytes.feed(std::slice::from_ref(b));
        }
        bytes.finish();
        assert_eq!(all(&mut bytes), want);
    }

    #[test]
    fn only_a_leading_bom_is_dropped() {
        let mut d = SseDecoder::new(64);
        d.feed(b"data: \xEF\xBB\xBFx\n\n");
        assert_eq!(all(&mut d), vec![ev("", "\u{feff}x")]);
        let mut d = SseDecoder::new(64);
        d.feed(b"\xEF\xBB");
        d.feed(b"\xBFdata: y\n\n");
        assert_eq!(all(&mut d), vec![ev("", "y")]);
    }

    #[test]
    fn over_long_event_is_reported_once_and_skipped() {
        let mut d = SseDecoder::new(16);
        d.feed(b"data: 0123456789abcdefghij\ndata: more\n\ndata: ok\n\n");
        assert_eq!(
            all(&mut d),
            vec![Err(ParseError::TooLarge("server-sent event")), ev("", "ok")]
        );
        // The limit is crossed across two feeds too, and many tiny lines count.
        let mut d = SseDecoder::new(16);
        d.feed(b"data: 0123456");
        d.feed(b"789abcdef\n\n");
        let mut d2 = SseDecoder::new(16);
        d2.feed(&b"data:\n".repeat(10));
        d2.feed(b"\n");
        assert!(matches!(d.next_event(), Some(Err(_))));
        assert!(matches!(d2.next_event(), Some(Err(_))));
    }
}
