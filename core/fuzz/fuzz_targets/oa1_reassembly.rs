//! Reassembler operation sequences: frames from a few senders for a few ids with arbitrary
//! seq, more and payload, interleaved with time steps, expiries and finished ids.
//!
//! It never panics, never holds more streams than `max_streams` or more bytes than the bound,
//! never returns more than the cap, and leaves no stream of an id behind once the id completes
//! (after an `ERR`, once the caller took the answer's partial stream or finished the id).
#![no_main]

use deskwire::oa1::reassembly::{Accepted, OverflowPolicy, Reassembler, ReassemblyLimits};
use deskwire::oa1::{Frame, FrameType};
use libfuzzer_sys::fuzz_target;

const SENDERS: [&str; 3] = ["bot", "BOT", "eve"];
const IDS: [&str; 4] = ["a", "b", "c", "d"];
const PAYLOADS: [&str; 6] = ["", "x", "\\n", "€€", "abcdefghij", "\\"];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, ops)) = data.split_first() else { return };
    let limits = ReassemblyLimits {
        max_message_bytes: 64,
        max_streams: 3,
        partial_timeout_ms: 50,
        expire_idle: mode & 1 == 1,
        overflow: if mode & 2 == 2 { OverflowPolicy::Reject } else { OverflowPolicy::Truncate },
        finished_memory: usize::from(mode >> 4),
    };
    let mut r = Reassembler::new(limits);
    let mut now = 0u64;
    for op in ops.chunks(3) {
        let [a, b, c] = [op[0], *op.get(1).unwrap_or(&0), *op.get(2).unwrap_or(&0)];
        match a % 8 {
            0 => now += u64::from(b),
            1 => {
                r.expire(now);
            }
            2 => r.finish_id(IDS[usize::from(b) % IDS.len()]),
            _ => {
                let frame = Frame {
                    kind: if a & 0x80 == 0 { FrameType::Res } else { FrameType::Err },
                    id: IDS[usize::from(b >> 4) % IDS.len()],
                    seq: u32::from(b & 0x0F) + 1,
                    more: c & 1 == 1,
                    payload: PAYLOADS[usize::from(c >> 1) % PAYLOADS.len()].as_bytes(),
                };
                let sender = SENDERS[usize::from(c >> 5) % SENDERS.len()];
                if let Accepted::Complete(done) = r.accept(now, sender, &frame) {
                    assert!(done.data.len() <= limits.max_message_bytes);
                    if frame.kind == FrameType::Err {
                        // After an ERR the id's other streams are the caller's: a desk takes
                        // what arrived of the answer (a remote's timeout) or finishes the id.
                        if c & 0x10 == 0 {
                            if let Some((_, partial)) = r.take_partial(frame.id, &[FrameType::Res]) {
                                assert!(partial.len() <= limits.max_message_bytes);
                            }
                        } else {
                            r.finish_id(frame.id);
                        }
                    }
                    assert!(!r.has_streams_for(frame.id));
                }
            }
        }
        assert!(r.stream_count() <= limits.max_streams);
        assert!(r.buffered_bytes() <= limits.max_streams * (2 * limits.max_message_bytes + 16));
        if let Some(deadline) = r.next_deadline() {
            assert!(deadline <= now + limits.partial_timeout_ms);
        }
    }
});
