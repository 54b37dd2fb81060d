//! The bounds every client puts on REXD's `zstd` payloads (`docs/rexd-compression.md`), and,
//! with the `zstd` feature, a pure-Rust inflate that keeps them.
//!
//! A small frame can claim gigabytes, so a payload is inflated only under a limit: the length
//! the call asked for (an `fs.read` piece), or [`MAX_INFLATED`] for an output event. A frame
//! whose header states more than the limit is refused before anything is inflated; one without
//! a size is inflated block by block and stopped as soon as it passes the limit; its window may
//! be at most 2^[`MAX_WINDOW_LOG`] bytes, so the decoder never holds more than the limit plus
//! one window. `rex` keeps the same bounds with the C library (`rexd/src/compress.rs`); this
//! inflate is for the builds that have no C compiler (the Python wheels), at about a third of
//! the C library's speed (`docs/benchmarks.md`).

/// The most bytes an output event's `zstd` payload inflates to: what the longest message could
/// carry plain.
pub const MAX_INFLATED: usize = crate::jsonrpc::framing::DEFAULT_MAX_MESSAGE_BYTES;

/// The largest window a frame may use: 8 MiB (2^23). A sender's frames use at most the
/// payload's own size, which is under the 8 MiB read piece cap.
pub const MAX_WINDOW_LOG: u32 = 23;

/// Why a `zstd` payload was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InflateError {
    /// Not base64, not one zstd frame, or a frame that contradicts itself.
    #[error("bad zstd payload: {reason}")]
    Malformed {
        /// What was wrong.
        reason: String,
    },
    /// The payload inflates past the limit it is under: refused, not expanded.
    #[error("the zstd payload inflates past {limit} bytes (refused, not expanded)")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

#[cfg(feature = "zstd")]
pub use codec::{decode_into, inflate_into};

#[cfg(feature = "zstd")]
mod codec {
    use std::cell::RefCell;

    use base64::Engine as _;
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

    use super::{InflateError, MAX_WINDOW_LOG};
    use crate::rexd::data::{self, Encoding};

    /// Standard base64, padding optional on read (as [`data`] reads).
    const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );

    /// How much is decoded between two checks of the size: one block's most.
    const STEP: usize = 128 * 1024;

    thread_local! {
        /// A decoder per thread: its tables and buffer are allocated once, not per payload.
        static DECODER: RefCell<FrameDecoder> = RefCell::new(FrameDecoder::new());
    }

    fn malformed(reason: impl std::fmt::Display) -> InflateError {
        InflateError::Malformed {
            reason: reason.to_string(),
        }
    }

    /// Inflates one zstd frame into `out` (cleared first), refusing it when it holds more than
    /// `limit` bytes: before inflating anything when its header says so, else as soon as the
    /// bytes inflated pass `limit`. A frame whose window is over 2^[`MAX_WINDOW_LOG`], that
    /// holds other than the size it states, whose checksum fails, or that is followed by more
    /// bytes is refused too. `out` is empty after any refusal.
    pub fn inflate_into(frame: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), InflateError> {
        out.clear();
        let result = inflate(frame, limit, out);
        if result.is_err() {
            out.clear();
        }
        result
    }

    /// What a frame's header (RFC 8878, 3.1.1.1) says before any block is read: the size it
    /// will inflate to, when stated, and the window it needs. ruzstd parses the same header
    /// but does not export the parser.
    struct Header {
        content_size: Option<u64>,
        window: u64,
        single_segment: bool,
    }

    fn header(frame: &[u8]) -> Result<Header, InflateError> {
        const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
        let Some((magic, rest)) = frame.split_first_chunk::<4>() else {
            return Err(malformed("shorter than a frame header"));
        };
        if *magic != MAGIC {
            return Err(malformed("not a zstd frame (bad magic number)"));
        }
        let (&descriptor, mut rest) = rest
            .split_first()
            .ok_or_else(|| malformed("shorter than a frame header"))?;
        let single_segment = descriptor & 0x20 != 0;
        if descriptor & 0x08 != 0 {
            return Err(malformed("the frame header's reserved bit is set"));
        }
        let mut take = |n: usize| -> Result<u64, InflateError> {
            let (bytes, tail) = rest
                .split_at_checked(n)
                .ok_or_else(|| malformed("shorter than its frame header"))?;
            rest = tail;
            Ok(bytes
                .iter()
                .rev()
                .fold(0u64, |v, &b| (v << 8) | u64::from(b)))
        };
        let window_descriptor = if single_segment { None } else { Some(take(1)?) };
        if take([0, 1, 2, 4][usize::from(descriptor & 3)])? != 0 {
            return Err(malformed("the frame needs a dictionary"));
        }
        let content_size = match (descriptor >> 6, single_segment) {
            (0, false) => None,
            (0, true) => Some(take(1)?),
            (1, _) => Some(take(2)? + 256),
            (2, _) => Some(take(4)?),
            _ => Some(take(8)?),
        };
        let window = match (window_descriptor, content_size) {
            (Some(w), _) => {
                let log = 10 + (w >> 3);
                (1u64 << log) + ((1u64 << log) / 8) * (w & 7)
            }
            (None, size) => size.unwrap_or(0),
        };
        Ok(Header {
            content_size,
            window,
            single_segment,
        })
    }

    fn inflate(frame: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), InflateError> {
        let Header {
            content_size: declared,
            window,
            single_segment,
        } = header(frame)?;
        if let Some(size) = declared
            && size > limit as u64
        {
            return Err(InflateError::TooLarge { limit });
        }
        // A single-segment frame's window is its stated size, already under the limit.
        let max_window = if single_segment {
            window.max(1)
        } else {
            1 << MAX_WINDOW_LOG
        };
        if window > max_window {
            return Err(malformed(format!(
                "the frame's window of {window} bytes is over the {} allowed",
                1u64 << MAX_WINDOW_LOG
            )));
        }
        if let Some(size) = declared {
            out.reserve_exact(size as usize);
        }
        // A frame that stated its size is held to it: one that holds more is stopped there.
        let bound = declared.map_or(limit, |size| size as usize);
        let past_bound = || match declared {
            Some(size) => malformed(format!("the frame said {size} bytes and held more")),
            None => InflateError::TooLarge { limit },
        };
        DECODER.with(|cell| {
            let mut decoder = cell.borrow_mut();
            decoder.set_max_window_size(max_window);
            let mut source = frame;
            decoder.reset(&mut source).map_err(malformed)?;
            loop {
                let finished = decoder
                    .decode_blocks(&mut source, BlockDecodingStrategy::UptoBytes(STEP))
                    .map_err(malformed)?;
                // The decoder keeps one window back until the frame ends: at most the limit
                // plus a window and a step are ever held.
                if out.len() + decoder.can_collect() > bound {
                    return Err(past_bound());
                }
                decoder.collect_to_writer(&mut *out).map_err(malformed)?;
                if finished {
                    break;
                }
            }
            if let Some(size) = declared
                && out.len() as u64 != size
            {
                return Err(malformed(format!(
                    "the frame said {size} bytes and held {}",
                    out.len()
                )));
            }
            if let Some(sent) = decoder.get_checksum_from_data()
                && decoder.get_calculated_checksum() != Some(sent)
            {
                return Err(malformed("the frame's checksum does not match its content"));
            }
            if !source.is_empty() {
                return Err(malformed(format!(
                    "{} bytes after the frame (a payload is one frame)",
                    source.len()
                )));
            }
            Ok(())
        })
    }

    /// The bytes a string field carries, into `out` (cleared first): `utf8` and `base64` as
    /// [`data::decode_into`] reads them, `zstd` (the base64 of one frame) inflated by
    /// [`inflate_into`] under `limit`. `raw` is never in a string.
    pub fn decode_into(
        text: &str,
        encoding: Encoding,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), InflateError> {
        if encoding != Encoding::Zstd {
            return data::decode_into(text, encoding, out).map_err(malformed);
        }
        let frame = BASE64
            .decode(text)
            .map_err(|e| malformed(format!("base64: {e}")))?;
        inflate_into(&frame, limit, out)
    }
}

#[cfg(all(test, feature = "zstd"))]
mod tests {
    use base64::Engine as _;

    use super::*;
    use crate::rexd::Encoding;

    fn log_text(n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        let mut i = 0;
        while v.len() < n {
            v.extend_from_slice(
                format!("2026-11-29 INFO worker[{}] request {i} done\n", i % 7).as_bytes(),
            );
            i += 1;
        }
        v.truncate(n);
        v
    }

    fn compress(bytes: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
    }

    /// A frame by hand: magic, a descriptor without a size (window descriptor `window`), and
    /// `blocks` RLE blocks of 128 KiB of `byte` each: tiny, and as large inflated as asked.
    fn rle_frame(window: u8, blocks: usize, byte: u8, size: Option<u32>) -> Vec<u8> {
        let mut f = vec![0x28, 0xb5, 0x2f, 0xfd];
        match size {
            // Frame_Content_Size_flag 2 (4 bytes), not single segment: then the window byte.
            Some(n) => {
                f.extend_from_slice(&[0b1000_0000, window]);
                f.extend_from_slice(&n.to_le_bytes());
            }
            None => f.extend_from_slice(&[0, window]),
        }
        for i in 0..blocks {
            let last = u32::from(i + 1 == blocks);
            // Block_Header: last flag, Block_Type 1 (RLE), Block_Size 128 KiB.
            let header = last | (1 << 1) | ((128 * 1024) << 3);
            f.extend_from_slice(&header.to_le_bytes()[..3]);
            f.push(byte);
        }
        f
    }

    /// Window descriptor for 2^log bytes.
    fn window(log: u32) -> u8 {
        ((log - 10) << 3) as u8
    }

    #[test]
    fn text_round_trips_exactly_to_the_limit() {
        let text = log_text(300_000);
        let frame = compress(&text);
        assert!(frame.len() < text.len() / 4, "{}", frame.len());
        let mut out = vec![1, 2, 3];
        inflate_into(&frame, text.len(), &mut out).unwrap();
        assert_eq!(out, text);
        // Twice on the same thread: the decoder is reused.
        inflate_into(&frame, text.len(), &mut out).unwrap();
        assert_eq!(out, text);
        assert_eq!(
            inflate_into(&frame, text.len() - 1, &mut out),
            Err(InflateError::TooLarge {
                limit: text.len() - 1
            })
        );
        assert!(out.is_empty());
        let s = base64::engine::general_purpose::STANDARD.encode(&frame);
        decode_into(&s, Encoding::Zstd, text.len(), &mut out).unwrap();
        assert_eq!(out, text);
        decode_into("aGk=", Encoding::Base64, 0, &mut out).unwrap();
        assert_eq!(out, b"hi");
    }

    /// 1 GiB of zeros in 32 KiB, without a size in its header: stopped a step past the limit,
    /// never expanded toward a gigabyte.
    #[test]
    fn a_bomb_is_refused_not_expanded() {
        let bomb = rle_frame(window(20), 8192, 0, None);
        assert!(bomb.len() < 40_000, "{}", bomb.len());
        let mut out = Vec::new();
        assert_eq!(
            inflate_into(&bomb, 1 << 20, &mut out),
            Err(InflateError::TooLarge { limit: 1 << 20 })
        );
        assert!(out.capacity() <= 4 << 20, "{}", out.capacity());
        // The same frame under a limit it fits: exactly its bytes.
        let small = rle_frame(window(20), 3, b'x', None);
        inflate_into(&small, 3 * 128 * 1024, &mut out).unwrap();
        assert_eq!(out, vec![b'x'; 3 * 128 * 1024]);
    }

    #[test]
    fn a_stated_size_over_the_limit_is_refused_before_inflating() {
        let frame = rle_frame(window(20), 8, 7, Some(u32::MAX));
        let mut out = Vec::new();
        assert_eq!(
            inflate_into(&frame, 1 << 20, &mut out),
            Err(InflateError::TooLarge { limit: 1 << 20 })
        );
        assert_eq!(out.capacity(), 0);
    }

    #[test]
    fn a_frame_that_lies_about_its_size_is_refused() {
        // Says 1000 bytes, holds 2 blocks of 128 KiB: stopped at the first.
        let frame = rle_frame(window(20), 2, 7, Some(1000));
        let r = inflate_into(&frame, 1 << 20, &mut Vec::new());
        assert!(matches!(r, Err(InflateError::Malformed { .. })), "{r:?}");
        // Says more than it holds.
        let frame = rle_frame(window(20), 1, 7, Some(500_000));
        let r = inflate_into(&frame, 1 << 20, &mut Vec::new());
        assert!(
            matches!(&r, Err(InflateError::Malformed { reason }) if reason.contains("said 500000")),
            "{r:?}"
        );
    }

    #[test]
    fn a_huge_window_is_refused() {
        let frame = rle_frame(window(27), 1, 0, None);
        let r = inflate_into(&frame, 64 << 20, &mut Vec::new());
        assert!(
            matches!(&r, Err(InflateError::Malformed { reason }) if reason.contains("window")),
            "{r:?}"
        );
        assert!(inflate_into(&rle_frame(window(23), 1, 0, None), 1 << 20, &mut Vec::new()).is_ok());
    }

    #[test]
    fn garbage_trailing_bytes_and_bad_base64_are_refused() {
        let mut out = Vec::new();
        for bad in [
            &b""[..],
            b"\x28\xb5\x2f",
            b"not a frame at all",
            &[0x28, 0xb5, 0x2f, 0xfd, 0, 0x50],
        ] {
            let r = inflate_into(bad, 1 << 20, &mut out);
            assert!(
                matches!(r, Err(InflateError::Malformed { .. })),
                "{bad:?}: {r:?}"
            );
        }
        let mut two = compress(b"first frame, then");
        two.extend_from_slice(&compress(b"a second one"));
        let r = inflate_into(&two, 1 << 20, &mut out);
        assert!(matches!(r, Err(InflateError::Malformed { .. })), "{r:?}");
        assert!(matches!(
            decode_into("!!", Encoding::Zstd, 10, &mut out),
            Err(InflateError::Malformed { .. })
        ));
    }
}
