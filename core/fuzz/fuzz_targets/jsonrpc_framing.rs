//! NDJSON and Content-Length framing on arbitrary bytes in arbitrary splits.
//!
//! Never panics; whatever the split, the same frames come out as from one feed; and the decoders
//! never hold more than their caps (plus one feed).
#![no_main]

use deskwire::jsonrpc::framing::{ContentLengthDecoder, Frame, NdjsonDecoder};
use libfuzzer_sys::fuzz_target;

const MAX: usize = 64;

fn frames(ndjson: bool, pieces: &[&[u8]]) -> Vec<Result<Vec<u8>, String>> {
    let mut nd = NdjsonDecoder::new(MAX);
    let mut cl = ContentLengthDecoder::new(MAX, 48);
    let mut out = Vec::new();
    for piece in pieces {
        let biggest = piece.len();
        if ndjson {
            nd.feed(piece);
            while let Some(f) = nd.next_frame() {
                out.push(owned(f));
            }
            assert!(nd.buffered() <= MAX + 2 + biggest);
        } else {
            cl.feed(piece);
            while let Some(f) = cl.next_frame() {
                out.push(owned(f));
            }
            assert!(cl.buffered() <= MAX + 48 + 4 + biggest);
        }
    }
    out
}

fn owned(frame: Frame<'_>) -> Result<Vec<u8>, String> {
    match frame {
        Frame::Message(m) => {
            assert!(m.len() <= MAX);
            Ok(m.to_vec())
        }
        Frame::Error(e) => Err(e.to_string()),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let step = 1 + usize::from(split % 23);
    let pieces: Vec<&[u8]> = stream.chunks(step).collect();
    for ndjson in [true, false] {
        assert_eq!(frames(ndjson, &[stream]), frames(ndjson, &pieces));
    }
    // The zero-copy path gives the same frames as feed + next_frame.
    let mut d = NdjsonDecoder::new(MAX);
    let mut direct = Vec::new();
    for piece in &pieces {
        d.decode(piece, |f| direct.push(owned(f)));
        assert!(d.buffered() <= MAX + 2 + piece.len());
    }
    assert_eq!(direct, frames(true, &[stream]));
});
