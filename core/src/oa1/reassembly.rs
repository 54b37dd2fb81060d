//! Reassembly of chunked OA1 streams (`docs/oa1.md`, "Streams and reassembly").
//!
//! One stream per (sender, type, request id). Chunks are decoded in `seq` order as soon as they
//! are contiguous; out-of-order chunks wait (still escaped) until the gap before them fills.
//! Duplicates are ignored, a gap that outlives `partial_timeout_ms` fails the stream, and every
//! stream is capped at `max_message_bytes` of decoded data. Memory stays bounded: at most
//! `max_streams` streams, each holding at most `max_message_bytes` decoded plus the same again of
//! out-of-order chunks.

use std::collections::{BTreeMap, HashSet, VecDeque};

use super::escape::Unescaper;
use super::frame::{Frame, FrameType};
use crate::irc::CaseMapping;

/// Bytes charged per buffered out-of-order chunk on top of its payload, so that floods of empty
/// chunks are bounded too.
const CHUNK_OVERHEAD: usize = 32;

/// What to do when a stream grows past `max_message_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverflowPolicy {
    /// Keep the first `max_message_bytes` (cut at a UTF-8 boundary), drop the rest, and complete
    /// with `truncated = true` when the final chunk arrives (responses).
    Truncate,
    /// Drop the stream at once and report [`Accepted::Overflow`] (requests: answer `too_large`).
    Reject,
}

/// Limits and behaviour of a [`Reassembler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReassemblyLimits {
    /// Decoded bytes a stream may hold (spec `MAX_MESSAGE_AGGREGATE_BYTES`).
    pub max_message_bytes: usize,
    /// Streams in flight at once.
    pub max_streams: usize,
    /// How long a gap (or, with `expire_idle`, any silence) may last inside a stream.
    pub partial_timeout_ms: u64,
    /// Whether a stream that receives nothing for `partial_timeout_ms` fails even without a gap.
    /// The remote side wants this for requests; the desk does not, because a command may run
    /// silently for a long time and its request timeout already bounds the wait.
    pub expire_idle: bool,
    /// What to do past `max_message_bytes`.
    pub overflow: OverflowPolicy,
    /// How many finished ids to remember so late frames for them are ignored.
    pub finished_memory: usize,
}

/// Identifies one stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StreamKey {
    /// The sender's nick as its first frame had it (compared under the case mapping).
    pub sender: String,
    /// Which stream of the request.
    pub kind: FrameType,
    /// The request id.
    pub id: String,
}

/// A whole stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// The decoded bytes (at most `max_message_bytes`).
    pub data: Vec<u8>,
    /// Whether bytes past the cap were dropped.
    pub truncated: bool,
}

/// Why a frame was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IgnoreReason {
    /// The id already finished.
    FinishedId,
    /// `max_streams` streams are in flight.
    TooManyStreams,
    /// A chunk after the final chunk, or a second, different final chunk.
    BeyondFinal,
    /// An out-of-order chunk that does not fit the stream's buffer.
    OutOfOrderOverflow,
}

/// What happened to one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// Stored; the stream is not complete yet.
    Buffered,
    /// The stream is complete (and forgotten; its id is now finished).
    Complete(Completed),
    /// A chunk already received.
    Duplicate,
    /// Not used, for this reason.
    Ignored(IgnoreReason),
    /// The stream passed the cap under [`OverflowPolicy::Reject`] and was dropped.
    Overflow,
}

#[derive(Debug)]
struct Stream {
    next_seq: u32,
    data: Vec<u8>,
    unescaper: Unescaper,
    pending: BTreeMap<u32, (Box<[u8]>, bool)>,
    pending_cost: usize,
    final_seq: Option<u32>,
    truncated: bool,
    last_activity: u64,
    gap_since: Option<u64>,
}

impl Stream {
    fn new(now: u64) -> Self {
        Stream {
            next_seq: 1,
            data: Vec::new(),
            unescaper: Unescaper::default(),
            pending: BTreeMap::new(),
            pending_cost: 0,
            final_seq: None,
            truncated: false,
            last_activity: now,
            gap_since: None,
        }
    }

    fn buffered(&self) -> usize {
        self.data.len() + self.pending_cost
    }

    fn deadline(&self, limits: &ReassemblyLimits) -> Option<u64> {
        let since = match (self.gap_since, limits.expire_idle) {
            (Some(gap), _) => Some(gap),
            (None, true) => Some(self.last_activity),
            (None, false) => None,
        };
        since.map(|t| t.saturating_add(limits.partial_timeout_ms))
    }

    /// Decodes one in-order chunk. Returns false when the stream overflowed under `Reject`.
    fn apply(&mut self, payload: &[u8], limits: &ReassemblyLimits) -> bool {
        self.next_seq = self.next_seq.saturating_add(1);
        if self.truncated {
            return true;
        }
        self.unescaper.feed(payload, &mut self.data);
        self.check_cap(limits)
    }

    fn finish(&mut self, limits: &ReassemblyLimits) -> bool {
        if !self.truncated {
            self.unescaper.finish(&mut self.data);
        }
        self.check_cap(limits)
    }

    fn check_cap(&mut self, limits: &ReassemblyLimits) -> bool {
        if self.data.len() <= limits.max_message_bytes {
            return true;
        }
        if limits.overflow == OverflowPolicy::Reject {
            return false;
        }
        let mut cut = limits.max_message_bytes;
        while cut > 0 && (self.data[cut] & 0xC0) == 0x80 {
            cut -= 1;
        }
        self.data.truncate(cut);
        self.data.shrink_to_fit();
        self.truncated = true;
        true
    }

    fn is_complete(&self) -> bool {
        self.final_seq.is_some_and(|f| self.next_seq > f)
    }
}

/// A bounded set of recently finished ids (oldest forgotten first).
#[derive(Debug, Default)]
pub(crate) struct RecentIds {
    order: VecDeque<String>,
    set: HashSet<String>,
    capacity: usize,
}

impl RecentIds {
    pub(crate) fn new(capacity: usize) -> Self {
        RecentIds {
            capacity,
            ..Default::default()
        }
    }

    pub(crate) fn insert(&mut self, id: &str) {
        if self.capacity == 0 || !self.set.insert(id.to_owned()) {
            return;
        }
        self.order.push_back(id.to_owned());
        if self.order.len() > self.capacity
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }
}

/// Reassembles many streams at once. See the module docs.
#[derive(Debug)]
pub struct Reassembler {
    limits: ReassemblyLimits,
    /// At most `max_streams` entries, so a linear scan beats hashing an owned key per frame.
    streams: Vec<(StreamKey, Stream)>,
    finished: RecentIds,
    casemapping: CaseMapping,
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new(limits: ReassemblyLimits) -> Self {
        Reassembler {
            limits,
            streams: Vec::new(),
            finished: RecentIds::new(limits.finished_memory),
            casemapping: CaseMapping::default(),
        }
    }

    /// Sets how sender nicks compare (from the server's `ISUPPORT CASEMAPPING`).
    pub fn set_casemapping(&mut self, casemapping: CaseMapping) {
        self.casemapping = casemapping;
    }

    fn position(&self, sender: &str, kind: FrameType, id: &str) -> Option<usize> {
        self.streams.iter().position(|(key, _)| {
            key.kind == kind && key.id == id && self.casemapping.eq(&key.sender, sender)
        })
    }

    /// The limits in force.
    pub fn limits(&self) -> &ReassemblyLimits {
        &self.limits
    }

    /// Takes one frame from `sender` at time `now`. The payload is bytes: a stream's text is
    /// checked for UTF-8 once it is whole (see [`Frame::parse_bytes`]).
    pub fn accept(&mut self, now: u64, sender: &str, frame: &Frame<'_, [u8]>) -> Accepted {
        let index = match self.position(sender, frame.kind, frame.id) {
            Some(index) => index,
            None => {
                // A finished id never has a stream, so only new streams need this lookup.
                if self.finished.contains(frame.id) {
                    return Accepted::Ignored(IgnoreReason::FinishedId);
                }
                if self.streams.len() >= self.limits.max_streams {
                    return Accepted::Ignored(IgnoreReason::TooManyStreams);
                }
                let key = StreamKey {
                    sender: sender.to_owned(),
                    kind: frame.kind,
                    id: frame.id.to_owned(),
                };
                self.streams.push((key, Stream::new(now)));
                self.streams.len() - 1
            }
        };
        let limits = self.limits;
        match Self::accept_into(&mut self.streams[index].1, now, frame, &limits) {
            Step::Pending(outcome) => outcome,
            // Either way the id is over: its other streams (the other type, or another sender's)
            // are dropped with it. After an `ERR` they are the caller's to take or finish
            // ([`Reassembler::take_partial`], [`Reassembler::finish_id`]): a desk keeps what
            // arrived of an answer the remote's timeout ended.
            Step::Done => {
                let (_, stream) = self.streams.swap_remove(index);
                match frame.kind {
                    FrameType::Err => self.finished.insert(frame.id),
                    _ => self.finish_id(frame.id),
                }
                Accepted::Complete(Completed {
                    data: stream.data,
                    truncated: stream.truncated,
                })
            }
            Step::Overflowed => {
                self.finish_id(frame.id);
                Accepted::Overflow
            }
        }
    }

    fn accept_into(
        stream: &mut Stream,
        now: u64,
        frame: &Frame<'_, [u8]>,
        limits: &ReassemblyLimits,
    ) -> Step {
        let seq = frame.seq;
        if seq < stream.next_seq || stream.pending.contains_key(&seq) {
            return Step::Pending(Accepted::Duplicate);
        }
        let beyond_final = stream.final_seq.is_some_and(|f| seq > f || !frame.more);
        let final_before_received = !frame.more
            && stream
                .pending
                .last_key_value()
                .is_some_and(|(&last, _)| last > seq);
        if beyond_final || final_before_received {
            return Step::Pending(Accepted::Ignored(IgnoreReason::BeyondFinal));
        }
        if seq != stream.next_seq {
            let cost = frame.payload.len() + CHUNK_OVERHEAD;
            if stream.pending_cost + cost > limits.max_message_bytes {
                return Step::Pending(Accepted::Ignored(IgnoreReason::OutOfOrderOverflow));
            }
            stream.pending_cost += cost;
            stream
                .pending
                .insert(seq, (frame.payload.into(), frame.more));
            stream.gap_since.get_or_insert(now);
        } else if !stream.apply(frame.payload, limits) {
            return Step::Overflowed;
        }
        stream.last_activity = now;
        if !frame.more {
            stream.final_seq = Some(seq);
        }
        while let Some((payload, _)) = stream.pending.remove(&stream.next_seq) {
            stream.pending_cost -= payload.len() + CHUNK_OVERHEAD;
            if !stream.apply(&payload, limits) {
                return Step::Overflowed;
            }
        }
        if stream.pending.is_empty() {
            stream.gap_since = None;
        }
        if stream.is_complete() {
            if !stream.finish(limits) {
                return Step::Overflowed;
            }
            return Step::Done;
        }
        Step::Pending(Accepted::Buffered)
    }

    /// Fails and forgets every stream whose gap (or idle time) passed `partial_timeout_ms`.
    pub fn expire(&mut self, now: u64) -> Vec<StreamKey> {
        let limits = self.limits;
        let mut expired = Vec::new();
        let mut i = 0;
        while i < self.streams.len() {
            if self.streams[i]
                .1
                .deadline(&limits)
                .is_some_and(|d| d <= now)
            {
                let (key, _) = self.streams.swap_remove(i);
                self.finished.insert(&key.id);
                expired.push(key);
            } else {
                i += 1;
            }
        }
        expired
    }

    /// The earliest instant at which [`Reassembler::expire`] has work.
    pub fn next_deadline(&self) -> Option<u64> {
        self.streams
            .iter()
            .filter_map(|(_, s)| s.deadline(&self.limits))
            .min()
    }

    /// What arrived in order so far of `id`'s longest stream of one of `kinds` (any sender),
    /// with its type; then forgets every stream of `id`, as [`Reassembler::finish_id`] does.
    /// For an answer cut short by the request's timeout. `None` when nothing arrived.
    pub fn take_partial(&mut self, id: &str, kinds: &[FrameType]) -> Option<(FrameType, Vec<u8>)> {
        let best = self
            .streams
            .iter()
            .enumerate()
            .filter(|(_, (key, s))| key.id == id && kinds.contains(&key.kind) && !s.data.is_empty())
            .max_by_key(|(_, (_, s))| s.data.len())
            .map(|(i, _)| i);
        let taken = best.map(|i| {
            let (key, stream) = self.streams.swap_remove(i);
            (key.kind, stream.data)
        });
        self.finish_id(id);
        taken
    }

    /// Forgets every stream of `id` and ignores its frames from now on.
    pub fn finish_id(&mut self, id: &str) {
        self.streams.retain(|(key, _)| key.id != id);
        self.finished.insert(id);
    }

    /// Whether `id` has finished.
    pub fn is_finished(&self, id: &str) -> bool {
        self.finished.contains(id)
    }

    /// Whether a stream of `id` is in progress.
    pub fn has_streams_for(&self, id: &str) -> bool {
        self.streams.iter().any(|(key, _)| key.id == id)
    }

    /// Streams in flight.
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// Bytes held by all streams (decoded data plus out-of-order chunks and their overhead).
    pub fn buffered_bytes(&self) -> usize {
        self.streams.iter().map(|(_, s)| s.buffered()).sum()
    }
}

enum Step {
    Pending(Accepted),
    Done,
    Overflowed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oa1::chunk::split;
    use crate::oa1::escape::escape;
    use proptest::prelude::*;

    fn limits(overflow: OverflowPolicy) -> ReassemblyLimits {
        ReassemblyLimits {
            max_message_bytes: 64,
            max_streams: 2,
            partial_timeout_ms: 100,
            expire_idle: false,
            overflow,
            finished_memory: 16,
        }
    }

    fn frame<'a>(
        kind: FrameType,
        id: &'a str,
        seq: u32,
        more: bool,
        payload: &'a str,
    ) -> Frame<'a, [u8]> {
        Frame {
            kind,
            id,
            seq,
            more,
            payload: payload.as_bytes(),
        }
    }

    fn res<'a>(id: &'a str, seq: u32, more: bool, payload: &'a str) -> Frame<'a, [u8]> {
        frame(FrameType::Res, id, seq, more, payload)
    }

    #[test]
    fn in_order_duplicates_and_out_of_order() {
        let mut r = Reassembler::new(limits(OverflowPolicy::Truncate));
        assert_eq!(
            r.accept(0, "bot", &res("a", 2, true, "b\\n")),
            Accepted::Buffered
        );
        assert_eq!(
            r.accept(0, "bot", &res("a", 2, true, "b\\n")),
            Accepted::Duplicate
        );
        assert_eq!(r.next_deadline(), Some(100));
        assert_eq!(
            r.accept(1, "bot", &res("a", 1, true, "a")),
            Accepted::Buffered
        );
        assert_eq!(r.next_deadline(), None, "gap closed");
        assert_eq!(
            r.accept(1, "bot", &res("a", 1, true, "a")),
            Accepted::Duplicate
        );
        assert_eq!(
            r.accept(2, "bot", &res("a", 3, false, "c")),
            Accepted::Complete(Completed {
                data: b"ab\nc".to_vec(),
                truncated: false
            })
        );
        assert_eq!(r.buffered_bytes(), 0);
        assert_eq!(
            r.accept(3, "bot", &res("a", 3, false, "c")),
            Accepted::Ignored(IgnoreReason::FinishedId)
        );
    }

    #[test]
    fn streams_are_per_sender_and_type() {
        let mut r = Reassembler::new(limits(OverflowPolicy::Truncate));
        r.accept(0, "bot", &res("a", 1, true, "x"));
        r.accept(0, "eve", &res("a", 1, true, "y"));
        assert_eq!(r.stream_count(), 2);
        assert_eq!(
            r.accept(0, "bot", &frame(FrameType::Err, "a", 1, false, "e")),
            Accepted::Ignored(IgnoreReason::TooManyStreams)
        );
        r.finish_id("a");
        assert_eq!(r.stream_count(), 0);
        assert_eq!(r.buffered_bytes(), 0);
    }

    #[test]
    fn gap_at_final_expires_after_partial_timeout() {
        let mut r = Reassembler::new(limits(OverflowPolicy::Truncate));
        r.accept(10, "bot", &res("a", 1, true, "x"));
        r.accept(20, "bot", &res("a", 3, false, "z"));
        assert_eq!(r.next_deadline(), Some(120));
        assert!(r.expire(119).is_empty());
        let expired = r.expire(120);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].id, "a");
        assert_eq!(r.buffered_bytes(), 0);
        assert!(r.is_finished("a"));
    }

    #[test]
    fn idle_expiry_only_when_asked() {
        let mut l = limits(OverflowPolicy::Reject);
        l.expire_idle = true;
        let mut r = Reassembler::new(l);
        r.accept(10, "desk", &frame(FrameType::Req, "q", 1, true, "x"));
        assert_eq!(r.next_deadline(), Some(110));
        r.accept(50, "desk", &frame(FrameType::Req, "q", 2, true, "x"));
        assert_eq!(r.next_deadline(), Some(150));
        assert_eq!(r.expire(150).len(), 1);
    }

    #[test]
    fn beyond_final_is_ignored() {
        let mut r = Reassembler::new(limits(OverflowPolicy::Truncate));
        r.accept(0, "bot", &res("a", 3, false, "z"));
        assert_eq!(
            r.accept(0, "bot", &res("a", 4, true, "z")),
            Accepted::Ignored(IgnoreReason::BeyondFinal)
        );
        assert_eq!(
            r.accept(0, "bot", &res("a", 2, false, "z")),
            Accepted::Ignored(IgnoreReason::BeyondFinal)
        );
        r.accept(0, "bot", &res("b", 5, true, "z"));
        assert_eq!(
            r.accept(0, "bot", &res("b", 2, false, "z")),
            Accepted::Ignored(IgnoreReason::BeyondFinal)
        );
    }

    #[test]
    fn truncates_at_a_char_boundary() {
        let mut r = Reassembler::new(limits(OverflowPolicy::Truncate));
        let text = "€".repeat(30); // 90 bytes
        let escaped = escape(&text);
        let chunks = split(&escaped, |_| 16);
        let n = chunks.len() as u32;
        let mut result = None;
        for (i, c) in chunks.iter().enumerate() {
            let seq = i as u32 + 1;
            if let Accepted::Complete(done) = r.accept(0, "bot", &res("a", seq, seq < n, c)) {
                result = Some(done);
            }
            assert!(r.buffered_bytes() <= 64 + 16);
        }
        let done = result.unwrap();
        assert!(done.truncated);
        assert_eq!(done.data, "€".repeat(21).into_bytes()); // 63 bytes
    }

    #[test]
    fn reject_policy_drops_the_stream() {
        let mut r = Reassembler::new(limits(OverflowPolicy::Reject));
        let big = "x".repeat(60);
        assert_eq!(
            r.accept(0, "d", &frame(FrameType::Req, "q", 1, true, &big)),
            Accepted::Buffered
        );
        assert_eq!(
            r.accept(0, "d", &frame(FrameType::Req, "q", 2, true, &big)),
            Accepted::Overflow
        );
        assert_eq!(r.buffered_bytes(), 0);
        assert_eq!(
            r.accept(0, "d", &frame(FrameType::Req, "q", 3, false, "x")),
            Accepted::Ignored(IgnoreReason::FinishedId)
        );
    }

    #[test]
    fn out_of_order_flood_is_bounded() {
        let mut r = Reassembler::new(limits(OverflowPolicy::Truncate));
        let mut ignored = 0;
        for seq in 2..1000 {
            if r.accept(0, "bot", &res("a", seq, true, ""))
                == Accepted::Ignored(IgnoreReason::OutOfOrderOverflow)
            {
                ignored += 1;
            }
        }
        assert!(ignored > 990);
        assert!(r.buffered_bytes() <= 64);
    }

    proptest! {
        /// Any text, chunked, shuffled and duplicated, comes back byte-exactly.
        #[test]
        fn shuffled_duplicated_chunks_reassemble(
            text in any::<String>(),
            budget in 4usize..48,
            order in proptest::collection::vec(any::<proptest::sample::Index>(), 0..200),
        ) {
            let l = ReassemblyLimits { max_message_bytes: 1 << 20, max_streams: 4, partial_timeout_ms: 10, expire_idle: false, overflow: OverflowPolicy::Truncate, finished_memory: 8 };
            let mut r = Reassembler::new(l);
            let escaped = escape(&text);
            let chunks = split(&escaped, |_| budget);
            let n = chunks.len();
            // Deliver each chunk at least once, plus random duplicates, in a shuffled order.
            let mut deliveries: Vec<usize> = (0..n).collect();
            deliveries.extend(order.iter().map(|i| i.index(n)));
            for (i, pick) in order.iter().enumerate() {
                let len = deliveries.len();
                deliveries.swap(i % len, pick.index(len));
            }
            let mut result = None;
            for &i in &deliveries {
                let f = res("id", i as u32 + 1, i + 1 < n, chunks[i]);
                match r.accept(0, "bot", &f) {
                    Accepted::Complete(done) => { prop_assert!(result.is_none()); result = Some(done) }
                    Accepted::Buffered | Accepted::Duplicate | Accepted::Ignored(IgnoreReason::FinishedId) => {}
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
            let done = result.expect("complete");
            prop_assert!(!done.truncated);
            prop_assert_eq!(done.data, text.into_bytes());
            prop_assert_eq!(r.buffered_bytes(), 0);
        }
    }
}
