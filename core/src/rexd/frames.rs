//! Raw frames on the client's side: the bytes of a raw `fs.read` answer come right after its
//! line (`docs/rexd-raw-frames.md`), so they must be taken out of the byte stream before the
//! NDJSON framing of the peer sees them.
//!
//! [`RawFrames`] sits between the transport and the peer. Lines pass through; a line that is a
//! raw answer (a response whose `result` has `raw_bytes`) is held back until its bytes have
//! come, then handed on, its bytes kept for the caller under the answer's id. Only answers to
//! calls announced with [`RawFrames::expect`] may carry bytes, and no more than the length that
//! call asked for: a daemon cannot make this side allocate more than it asked for.
//!
//! In a session with raw output, `exec.stdout`/`exec.stderr` events carry bytes too (`params`
//! with `raw_bytes`), at most [`RawFrames::allow_output`]'s bound each; their bytes wait in
//! arrival order for [`RawFrames::take_output`], which the client calls for each such event
//! the peer hands on (the peer keeps the lines' order).
//!
//! On `rexd --listen`'s `/ws` a raw frame is one binary WebSocket message instead: the line,
//! `\n`, then exactly `raw_bytes` bytes ([`binary_message`] makes one). Its text messages are
//! one JSON value each and never announce raw bytes. [`RawFrames::feed_text`] and
//! [`RawFrames::feed_binary`] take those messages whole and check exactly that.

use std::collections::{HashMap, VecDeque};

use crate::jsonrpc::Id;

/// The longest line that may be a raw answer's header. A header has no content, so it is a
/// few hundred bytes plus the path (at most `PATH_MAX`, escaped); longer lines are passed on as
/// they come without being looked at.
const MAX_HEADER: usize = 64 * 1024;

/// What marks a header: the key of `raw_bytes`. Inside a JSON string a quote is always
/// escaped, so this can only be a key.
pub const MARK: &[u8] = b"\"raw_bytes\":";

/// Whether a notification carries raw bytes after its line: an output event (`exec.stdout`,
/// `exec.stderr`) whose params have `raw_bytes` (the key can only be a key: a quote inside a
/// JSON string is escaped). A client takes one [`RawFrames::take_output`] for each.
pub fn announces_output_bytes(method: &str, params: &str) -> bool {
    is_output(method) && memchr::memmem::find(params.as_bytes(), MARK).is_some()
}

/// A raw frame as one binary WebSocket message (`/ws`): `line` (without its `\n`), `\n`, then
/// `bytes`, the same bytes that follow the line on a byte stream.
pub fn binary_message(mut line: Vec<u8>, bytes: &[u8]) -> Vec<u8> {
    line.reserve_exact(1 + bytes.len());
    line.push(b'\n');
    line.extend_from_slice(bytes);
    line
}

/// The events whose bytes may follow their line.
fn is_output(method: &str) -> bool {
    method == "exec.stdout" || method == "exec.stderr"
}

/// Why the byte stream cannot be read on: after one of these the framing is lost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// A raw answer to a call that did not ask for raw bytes.
    #[error("raw bytes answered call {id}, which did not ask for them")]
    Unasked {
        /// The answer's id.
        id: String,
    },
    /// A raw answer claims more bytes than its call asked for.
    #[error("raw answer to call {id} claims {claimed} bytes, more than the {asked} asked for")]
    TooLong {
        /// The answer's id.
        id: String,
        /// `raw_bytes`.
        claimed: u64,
        /// The call's `length`.
        asked: u64,
    },
    /// An output event with bytes in a session that did not negotiate raw output.
    #[error("raw bytes after a {method} event, which this session did not negotiate")]
    UnaskedOutput {
        /// The event's method.
        method: String,
    },
    /// An output event claims more bytes than one event may carry.
    #[error("a {method} event claims {claimed} raw bytes, more than the {max} one event may carry")]
    OutputTooLong {
        /// The event's method.
        method: String,
        /// `raw_bytes`.
        claimed: u64,
        /// The bound.
        max: u64,
    },
    /// A WebSocket message that breaks the rules of raw frames on `/ws`: a binary message
    /// that is not one raw frame (a header line with `raw_bytes`, `\n`, exactly that many
    /// bytes), or a text message that announces raw bytes.
    #[error("a WebSocket message that is not what raw frames allow: {reason}")]
    Message {
        /// What is wrong with it.
        reason: String,
    },
    /// A binary WebSocket message to a client whose session has no raw frames.
    #[error("a binary WebSocket message, but this session did not negotiate raw frames")]
    BinaryUnasked,
    /// An earlier error lost the framing.
    #[error("the byte stream is out of step since an earlier raw frame error")]
    Broken,
}

/// A raw call in flight.
struct Expected {
    /// The most bytes its answer may carry.
    max: u64,
    /// Its answer is still wanted (`false` once dropped: its bytes are read and thrown away).
    keep: bool,
}

/// Whose bytes are coming: an answer's, or an output event's.
enum Owner {
    Answer(Id),
    Output,
}

/// The line whose bytes are coming.
struct Payload {
    owner: Owner,
    /// Its line, `\n` included, handed on once the bytes are in.
    header: Vec<u8>,
    /// Bytes still to come.
    left: usize,
    /// `None` for a dropped call: counted, not kept.
    bytes: Option<Vec<u8>>,
}

/// See the module docs.
#[derive(Default)]
pub struct RawFrames {
    /// The current line while it is short enough to be a header.
    line: Vec<u8>,
    /// The current line is too long to be a header: passed on as it comes, up to its `\n`.
    passing: bool,
    payload: Option<Payload>,
    expected: HashMap<Id, Expected>,
    ready: HashMap<Id, Vec<u8>>,
    /// Raw output is negotiated: the most bytes one output event may carry.
    output_max: Option<u64>,
    /// Output events' bytes, in the order their lines were handed on.
    outputs: VecDeque<Vec<u8>>,
    broken: bool,
}

#[derive(serde::Deserialize)]
struct Header {
    id: Option<Id>,
    result: Option<WithRawBytes>,
    method: Option<String>,
    params: Option<WithRawBytes>,
}

#[derive(serde::Deserialize)]
struct WithRawBytes {
    raw_bytes: u64,
}

impl RawFrames {
    /// Call `id` asked for raw bytes, `max` at most.
    pub fn expect(&mut self, id: Id, max: u64) {
        self.expected.insert(id, Expected { max, keep: true });
    }

    /// Call `id` was answered with an error: no bytes will come for it.
    pub fn forget(&mut self, id: &Id) {
        self.expected.remove(id);
        self.ready.remove(id);
    }

    /// Call `id` is no longer wanted (dropped, or past its deadline): its bytes, if they
    /// come, are skipped.
    pub fn drop_call(&mut self, id: &Id) {
        if let Some(e) = self.expected.get_mut(id) {
            e.keep = false;
        }
        self.ready.remove(id);
    }

    /// The bytes that came after the answer to `id` (its line has been handed on).
    pub fn take(&mut self, id: &Id) -> Option<Vec<u8>> {
        self.ready.remove(id)
    }

    /// The session negotiated raw output: output events may carry `max` bytes each.
    pub fn allow_output(&mut self, max: u64) {
        self.output_max = Some(max);
    }

    /// The bytes of the oldest output event handed on and not yet taken: call it once for
    /// each output event with `raw_bytes` the peer delivers, in order.
    pub fn take_output(&mut self) -> Option<Vec<u8>> {
        self.outputs.pop_front()
    }

    /// Whether no line or frame has begun without ending (tests check the state).
    #[cfg(test)]
    fn is_idle(&self) -> bool {
        self.line.is_empty() && !self.passing && self.payload.is_none()
    }

    /// Ends the splitting: the start of a line held back (never a frame's bytes, which only
    /// come for calls announced with [`RawFrames::expect`]), for the peer.
    pub fn into_held(self) -> Vec<u8> {
        self.line
    }

    /// Takes bytes from the transport; hands what the peer should see to `out` (whole lines
    /// for headers, any cut for other lines).
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut dyn FnMut(&[u8])) -> Result<(), FrameError> {
        if self.broken {
            return Err(FrameError::Broken);
        }
        while !bytes.is_empty() {
            if let Some(p) = &mut self.payload {
                let n = p.left.min(bytes.len());
                if let Some(b) = &mut p.bytes {
                    b.extend_from_slice(&bytes[..n]);
                }
                p.left -= n;
                bytes = &bytes[n..];
                if p.left == 0 {
                    self.finish_payload(out);
                }
                continue;
            }
            let newline = memchr::memchr(b'\n', bytes);
            let end = newline.map_or(bytes.len(), |i| i + 1);
            let (part, rest) = bytes.split_at(end);
            bytes = rest;
            if self.passing {
                out(part);
                self.passing = newline.is_none();
                continue;
            }
            self.line.extend_from_slice(part);
            if newline.is_none() {
                if self.line.len() > MAX_HEADER {
                    out(&self.line);
                    self.line.clear();
                    self.passing = true;
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            match self.header(&line) {
                Ok(None) => out(&line),
                Ok(Some((owner, n, keep))) => {
                    self.payload = Some(Payload {
                        owner,
                        header: line,
                        left: n,
                        bytes: keep.then(|| Vec::with_capacity(n)),
                    });
                    if n == 0 {
                        self.finish_payload(out);
                    }
                }
                Err(e) => {
                    self.broken = true;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Takes one text WebSocket message from `/ws`, `\n` appended: one JSON value, handed to
    /// `out` whole. A text message never announces raw bytes (they come in binary messages
    /// only), so one that does is refused.
    pub fn feed_text(&mut self, line: &[u8], out: &mut dyn FnMut(&[u8])) -> Result<(), FrameError> {
        self.check_between_messages()?;
        match self.header(line) {
            Ok(None) => {
                out(line);
                Ok(())
            }
            Ok(Some(_)) => Err(self.lost(FrameError::Message {
                reason: "a text message announces raw bytes (raw_bytes); on /ws they come \
                         in one binary message with their line"
                    .into(),
            })),
            Err(e) => Err(self.lost(e)),
        }
    }

    /// Takes one binary WebSocket message from `/ws`: one raw frame, whole. Its header line is
    /// checked as on a byte stream (asked for, within its call's or an output event's bound),
    /// and the bytes after its `\n` must be exactly `raw_bytes` many. The line goes to `out`,
    /// the bytes wait as on a byte stream ([`RawFrames::take`], [`RawFrames::take_output`]).
    pub fn feed_binary(
        &mut self,
        mut message: Vec<u8>,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), FrameError> {
        self.check_between_messages()?;
        let bad = |reason: String| FrameError::Message { reason };
        let Some(newline) = memchr::memchr(b'\n', &message) else {
            return Err(self.lost(bad(format!(
                "a binary message of {} bytes without a header line",
                message.len()
            ))));
        };
        let bytes = message.split_off(newline + 1);
        let (owner, n, keep) = match self.header(&message) {
            Ok(Some(h)) => h,
            Ok(None) => {
                return Err(self.lost(bad(
                    "a binary message whose line is not a raw answer or output event \
                     (no raw_bytes)"
                        .into(),
                )));
            }
            Err(e) => return Err(self.lost(e)),
        };
        if n != bytes.len() {
            return Err(self.lost(bad(format!(
                "a binary message whose line says raw_bytes {n} carries {} bytes after it",
                bytes.len()
            ))));
        }
        self.payload = Some(Payload {
            owner,
            header: message,
            left: 0,
            bytes: keep.then_some(bytes),
        });
        self.finish_payload(out);
        Ok(())
    }

    /// A WebSocket message starts with nothing begun (`/ws` messages are whole).
    fn check_between_messages(&mut self) -> Result<(), FrameError> {
        if self.broken {
            return Err(FrameError::Broken);
        }
        if self.line.is_empty() && !self.passing && self.payload.is_none() {
            return Ok(());
        }
        Err(self.lost(FrameError::Message {
            reason: "a WebSocket message after bytes fed as a stream".into(),
        }))
    }

    /// The framing is lost: everything after `e` is [`FrameError::Broken`].
    fn lost(&mut self, e: FrameError) -> FrameError {
        self.broken = true;
        e
    }

    /// Whether `line` has bytes after it: whose, how many, and whether they are still wanted.
    fn header(&mut self, line: &[u8]) -> Result<Option<(Owner, usize, bool)>, FrameError> {
        if line.len() > MAX_HEADER || memchr::memmem::find(line, MARK).is_none() {
            return Ok(None);
        }
        // Neither a response with `result.raw_bytes` nor an event with `params.raw_bytes` (a
        // newer daemon's field elsewhere): a line.
        let Ok(h) = serde_json::from_slice::<Header>(line) else {
            return Ok(None);
        };
        match h {
            Header {
                id: Some(id),
                result: Some(result),
                ..
            } => self.answer_header(id, result.raw_bytes).map(Some),
            Header {
                id: None,
                method: Some(method),
                params: Some(params),
                ..
            } if is_output(&method) => {
                let Some(max) = self.output_max else {
                    return Err(FrameError::UnaskedOutput { method });
                };
                if params.raw_bytes > max {
                    return Err(FrameError::OutputTooLong {
                        method,
                        claimed: params.raw_bytes,
                        max,
                    });
                }
                Ok(Some((Owner::Output, params.raw_bytes as usize, true)))
            }
            _ => Ok(None),
        }
    }

    fn answer_header(
        &mut self,
        id: Id,
        raw_bytes: u64,
    ) -> Result<(Owner, usize, bool), FrameError> {
        let Some(e) = self.expected.remove(&id) else {
            return Err(FrameError::Unasked { id: id.to_string() });
        };
        if raw_bytes > e.max {
            return Err(FrameError::TooLong {
                id: id.to_string(),
                claimed: raw_bytes,
                asked: e.max,
            });
        }
        // Within `max`, which a caller keeps under its piece size (a few MiB).
        Ok((Owner::Answer(id), raw_bytes as usize, e.keep))
    }

    fn finish_payload(&mut self, out: &mut dyn FnMut(&[u8])) {
        if let Some(p) = self.payload.take() {
            match (p.owner, p.bytes) {
                (Owner::Answer(id), Some(b)) => {
                    self.ready.insert(id, b);
                }
                (Owner::Output, b) => self.outputs.push_back(b.unwrap_or_default()),
                (Owner::Answer(_), None) => {}
            }
            out(&p.header);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(id: i64, n: usize) -> Vec<u8> {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"path\":\"/f\",\"size\":{n},\
             \"mtime\":\"t\",\"encoding\":\"raw\",\"content\":\"\",\"truncated\":false,\
             \"raw_bytes\":{n}}}}}\n"
        )
        .into_bytes()
    }

    /// Feeds `stream` cut every `step` bytes; the bytes the peer saw.
    fn run(f: &mut RawFrames, stream: &[u8], step: usize) -> Result<Vec<u8>, FrameError> {
        let mut seen = Vec::new();
        for chunk in stream.chunks(step) {
            f.feed(chunk, &mut |b| seen.extend_from_slice(b))?;
        }
        Ok(seen)
    }

    #[test]
    fn bytes_after_a_header_are_taken_out_whatever_the_cuts() {
        let event = b"{\"jsonrpc\":\"2.0\",\"method\":\"exec.stdout\",\"params\":{\"data\":\"\\\"raw_bytes\\\":9\"}}\n";
        let payload: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let mut stream = event.to_vec();
        stream.extend_from_slice(&header(7, payload.len()));
        stream.extend_from_slice(&payload);
        stream.extend_from_slice(event);
        stream.extend_from_slice(&header(8, 0));
        stream.extend_from_slice(event);
        for step in [1, 2, 7, 64, 1000, stream.len()] {
            let mut f = RawFrames::default();
            f.expect(Id::Number(7), 1000);
            f.expect(Id::Number(8), 10);
            let seen = run(&mut f, &stream, step).unwrap();
            let mut want = event.to_vec();
            want.extend_from_slice(&header(7, payload.len()));
            want.extend_from_slice(event);
            want.extend_from_slice(&header(8, 0));
            want.extend_from_slice(event);
            assert_eq!(seen, want, "step {step}");
            assert_eq!(f.take(&Id::Number(7)).unwrap(), payload);
            assert_eq!(f.take(&Id::Number(8)).unwrap(), b"");
            assert!(f.is_idle());
        }
    }

    fn output(method: &str, seq: u64, n: usize) -> Vec<u8> {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"{method}\",\"params\":{{\"session_id\":\"s\",\
             \"process_id\":\"p_1\",\"seq\":{seq},\"data\":\"\",\"encoding\":\"raw\",\
             \"raw_bytes\":{n}}}}}\n"
        )
        .into_bytes()
    }

    #[test]
    fn output_events_bytes_wait_in_order_beside_answers() {
        let mut stream = output("exec.stdout", 1, 5);
        stream.extend_from_slice(b"a\nb\n\n");
        stream.extend_from_slice(&header(9, 3));
        stream.extend_from_slice(b"xyz");
        stream.extend_from_slice(&output("exec.stderr", 1, 0));
        stream.extend_from_slice(&output("exec.stdout", 2, 2));
        stream.extend_from_slice(b"\0\n");
        for step in [1, 3, 50, stream.len()] {
            let mut f = RawFrames::default();
            f.allow_output(10);
            f.expect(Id::Number(9), 3);
            let seen = run(&mut f, &stream, step).unwrap();
            let mut want = output("exec.stdout", 1, 5);
            want.extend_from_slice(&header(9, 3));
            want.extend_from_slice(&output("exec.stderr", 1, 0));
            want.extend_from_slice(&output("exec.stdout", 2, 2));
            assert_eq!(seen, want, "step {step}");
            assert_eq!(f.take(&Id::Number(9)).unwrap(), b"xyz");
            assert_eq!(f.take_output().unwrap(), b"a\nb\n\n");
            assert_eq!(f.take_output().unwrap(), b"");
            assert_eq!(f.take_output().unwrap(), b"\0\n");
            assert_eq!(f.take_output(), None);
            assert!(f.is_idle());
        }
    }

    #[test]
    fn output_bytes_not_negotiated_or_over_the_bound_are_refused() {
        let mut f = RawFrames::default();
        assert_eq!(
            run(&mut f, &output("exec.stdout", 1, 4), 7).unwrap_err(),
            FrameError::UnaskedOutput {
                method: "exec.stdout".into()
            }
        );
        let mut f = RawFrames::default();
        f.allow_output(1000);
        assert_eq!(
            run(&mut f, &output("exec.stderr", 1, 1 << 40), 7).unwrap_err(),
            FrameError::OutputTooLong {
                method: "exec.stderr".into(),
                claimed: 1 << 40,
                max: 1000
            }
        );
        assert_eq!(run(&mut f, b"{}\n", 3).unwrap_err(), FrameError::Broken);
        // Another event with the key is a line like any other (a newer daemon's field).
        let mut f = RawFrames::default();
        let other = output("exec.exit", 1, 4);
        assert_eq!(run(&mut f, &other, 5).unwrap(), other);
    }

    #[test]
    fn a_header_claiming_more_than_asked_is_refused_unallocated() {
        let mut f = RawFrames::default();
        f.expect(Id::Number(1), 100);
        let e = run(&mut f, &header(1, 1 << 40), 16).unwrap_err();
        assert_eq!(
            e,
            FrameError::TooLong {
                id: "1".into(),
                claimed: 1 << 40,
                asked: 100
            }
        );
        // The framing is lost for good.
        assert_eq!(run(&mut f, b"{}\n", 3).unwrap_err(), FrameError::Broken);
    }

    #[test]
    fn raw_bytes_for_a_call_that_did_not_ask_are_refused() {
        let mut f = RawFrames::default();
        f.expect(Id::Number(2), 100);
        assert_eq!(
            run(&mut f, &header(3, 4), 5).unwrap_err(),
            FrameError::Unasked { id: "3".into() }
        );
    }

    #[test]
    fn a_dropped_call_s_bytes_are_skipped() {
        let mut f = RawFrames::default();
        f.expect(Id::Number(4), 10);
        f.drop_call(&Id::Number(4));
        let mut stream = header(4, 10);
        stream.extend_from_slice(b"0123456789{\"x\":1}\n");
        let seen = run(&mut f, &stream, 3).unwrap();
        let mut want = header(4, 10);
        want.extend_from_slice(b"{\"x\":1}\n");
        assert_eq!(seen, want);
        assert_eq!(f.take(&Id::Number(4)), None);
    }

    #[test]
    fn an_error_answer_or_a_late_one_leaves_the_stream_in_step() {
        let mut f = RawFrames::default();
        f.expect(Id::Number(5), 10);
        f.expect(Id::Number(6), 10);
        // 5 was answered with an error: nothing is expected for it any more.
        f.forget(&Id::Number(5));
        assert_eq!(
            run(&mut f, &header(5, 1), 4).unwrap_err(),
            FrameError::Unasked { id: "5".into() }
        );
        // 6 went past its deadline: its late bytes are skipped.
        let mut f = RawFrames::default();
        f.expect(Id::Number(6), 10);
        f.drop_call(&Id::Number(6));
        let mut stream = header(6, 2);
        stream.extend_from_slice(b"\n\n{}\n");
        let seen = run(&mut f, &stream, 1).unwrap();
        let mut want = header(6, 2);
        want.extend_from_slice(b"{}\n");
        assert_eq!(seen, want);
        // A line begun when splitting stops is handed over.
        let mut f = RawFrames::default();
        let seen = run(&mut f, b"{}\n{\"a\":", 2).unwrap();
        assert_eq!(seen, b"{}\n");
        assert!(!f.is_idle());
        assert_eq!(f.into_held(), b"{\"a\":");
    }

    /// Feeds WebSocket messages (`true`: binary); the lines the peer saw.
    fn run_messages(
        f: &mut RawFrames,
        messages: &[(bool, Vec<u8>)],
    ) -> Result<Vec<u8>, FrameError> {
        let mut seen = Vec::new();
        for (binary, m) in messages {
            let out = &mut |b: &[u8]| seen.extend_from_slice(b);
            if *binary {
                f.feed_binary(m.clone(), out)?;
            } else {
                let mut line = m.clone();
                line.push(b'\n');
                f.feed_text(&line, out)?;
            }
        }
        Ok(seen)
    }

    fn without_newline(mut line: Vec<u8>) -> Vec<u8> {
        line.pop();
        line
    }

    #[test]
    fn binary_messages_carry_a_line_and_exactly_its_bytes() {
        let event = b"{\"jsonrpc\":\"2.0\",\"method\":\"exec.exit\",\"params\":{}}".to_vec();
        let payload: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let messages = [
            (false, event.clone()),
            (
                true,
                binary_message(without_newline(header(7, payload.len())), &payload),
            ),
            (
                true,
                binary_message(without_newline(output("exec.stdout", 1, 3)), b"\0\n\xff"),
            ),
            (true, binary_message(without_newline(header(8, 0)), b"")),
            (false, event.clone()),
        ];
        let mut f = RawFrames::default();
        f.expect(Id::Number(7), 1000);
        f.expect(Id::Number(8), 10);
        f.allow_output(10);
        let seen = run_messages(&mut f, &messages).unwrap();
        let mut want = event.clone();
        want.push(b'\n');
        want.extend_from_slice(&header(7, payload.len()));
        want.extend_from_slice(&output("exec.stdout", 1, 3));
        want.extend_from_slice(&header(8, 0));
        want.extend_from_slice(&event);
        want.push(b'\n');
        assert_eq!(seen, want);
        assert_eq!(f.take(&Id::Number(7)).unwrap(), payload);
        assert_eq!(f.take(&Id::Number(8)).unwrap(), b"");
        assert_eq!(f.take_output().unwrap(), b"\0\n\xff");
        assert!(f.is_idle());
    }

    #[test]
    fn binary_messages_that_break_the_rules_are_refused() {
        let out_line = || without_newline(output("exec.stdout", 1, 4));
        for (what, message, check) in [
            (
                "short",
                binary_message(out_line(), b"abc"),
                "carries 3 bytes",
            ),
            (
                "long",
                binary_message(out_line(), b"abcde"),
                "carries 5 bytes",
            ),
            ("no newline", out_line(), "without a header line"),
            (
                "no raw_bytes",
                b"{\"jsonrpc\":\"2.0\",\"method\":\"exec.exit\"}\nxx".to_vec(),
                "no raw_bytes",
            ),
        ] {
            let mut f = RawFrames::default();
            f.allow_output(10);
            let e = f.feed_binary(message, &mut |_| {}).unwrap_err();
            assert!(e.to_string().contains(check), "{what}: {e}");
            assert_eq!(
                f.feed_text(b"{}\n", &mut |_| {}).unwrap_err(),
                FrameError::Broken
            );
        }
        // Over the bound, or not negotiated: the same errors as on a byte stream.
        let mut f = RawFrames::default();
        f.allow_output(2);
        let e = f
            .feed_binary(binary_message(out_line(), b"abcd"), &mut |_| {})
            .unwrap_err();
        assert!(
            matches!(
                e,
                FrameError::OutputTooLong {
                    claimed: 4,
                    max: 2,
                    ..
                }
            ),
            "{e}"
        );
        let mut f = RawFrames::default();
        let e = f
            .feed_binary(binary_message(out_line(), b"abcd"), &mut |_| {})
            .unwrap_err();
        assert!(matches!(e, FrameError::UnaskedOutput { .. }), "{e}");
        // A text message never announces bytes.
        let mut f = RawFrames::default();
        f.allow_output(10);
        let e = f
            .feed_text(&output("exec.stdout", 1, 4), &mut |_| {})
            .unwrap_err();
        assert!(e.to_string().contains("text message announces"), "{e}");
    }

    #[test]
    fn long_lines_pass_through_unexamined() {
        let mut line = b"{\"a\":\"".to_vec();
        line.resize(MAX_HEADER * 2, b'x');
        line.extend_from_slice(b"\",\"raw_bytes\":3}\n");
        let mut f = RawFrames::default();
        let seen = run(&mut f, &line, 4096).unwrap();
        assert_eq!(seen, line);
        assert!(f.is_idle());
    }
}
