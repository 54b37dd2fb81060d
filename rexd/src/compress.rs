//! Compressed payloads, negotiated per session (`docs/rexd-compression.md`).
//!
//! A client offers codecs in `session.open` (`compression: ["zstd"]`); the daemon answers the
//! one it chose (`compression: "zstd"`), or nothing, and then every byte payload stays as it was
//! (`utf8` or `base64`). In a session that chose `zstd`, a payload may also travel with
//! `encoding: "zstd"`: the string is the standard base64 of one zstd frame of the bytes. Each
//! payload is its own frame (no context spans two events), so a replayed event of a resumed
//! session decodes alone. A sender uses `zstd` only where it makes the string shorter.
//!
//! Inflation is bounded: [`decode_bounded`] stops one byte past the limit the payload is
//! under (the largest read, write, message or output the session allows) and refuses the
//! payload, so a small frame that claims gigabytes is never expanded. The decoder's window is
//! capped at [`MAX_WINDOW_LOG`] too, which bounds the memory it may ask for.

use std::borrow::Cow;
use std::io::Read;

use base64::Engine as _;
use deskwire::rexd::data::{self, Encoding};

/// The most bytes a `zstd` payload sent to the daemon (`fs.write`, `exec.input`) inflates to:
/// what the longest message could carry plain (the bound every client keeps for an event).
pub const MAX_INFLATED: usize = deskwire::rexd::zstd::MAX_INFLATED;

/// The codec's name in `session.open`.
pub const ZSTD: &str = "zstd";

/// zstd level: 1 is the fastest of the normal levels and already takes log text to a tenth.
const LEVEL: i32 = 1;

/// Payloads shorter than this are sent plain (a frame has about 10 bytes of header).
const MIN_COMPRESS: usize = 256;

/// The largest window a frame may use: 8 MiB (2^23). Our frames use at most the payload's own
/// size, which is under the 8 MiB read piece cap; a frame asking for more is refused before
/// the decoder allocates it.
pub const MAX_WINDOW_LOG: u32 = deskwire::rexd::zstd::MAX_WINDOW_LOG;

/// Standard base64, padded on write, padding optional on read (as `data` does).
const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// Why a payload could not be decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Not base64, or not a zstd frame.
    #[error("bad {encoding} payload: {reason}")]
    Malformed {
        /// The payload's encoding.
        encoding: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The payload inflates past the limit it is under: refused, not expanded.
    #[error("the zstd payload inflates past {limit} bytes (refused, not expanded)")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// `zstd` in a session that did not negotiate it.
    #[error("encoding \"zstd\" was not negotiated for this session (session.open compression)")]
    NotNegotiated,
}

/// Whether a client's offer (`session.open` `compression`) includes a codec this daemon has;
/// the chosen one's name.
pub fn choose(offer: &[String]) -> Option<&'static str> {
    offer.iter().any(|c| c == ZSTD).then_some(ZSTD)
}

/// Encodes `bytes` for a JSON string field: as [`data::encode`] does (`utf8` when they are
/// UTF-8, else `base64`), or as `zstd` when `compress` and that is shorter.
pub fn encode(bytes: &[u8], compress: bool) -> (Encoding, Cow<'_, str>) {
    if compress
        && bytes.len() >= MIN_COMPRESS
        && let Some(z) = compressed(bytes)
    {
        return (Encoding::Zstd, Cow::Owned(z));
    }
    data::encode(bytes)
}

/// `bytes` as base64 of a zstd frame when that is shorter than the bytes would be plain:
/// `base64` always counts 4/3 of them; `utf8` counts them as they are, so compressed text must
/// beat the text itself. A JSON escape or two per line is not counted, a small error on the
/// plain side's favour.
///
/// A payload over 32 KiB is first judged by its first 16 KiB: when they do not shrink below
/// 70% of themselves, the rest is not tried (random bytes would cost a whole compression to
/// end as base64 anyway). Compression contexts are kept per thread.
pub fn compressed(bytes: &[u8]) -> Option<String> {
    let plain = if simdutf8::basic::from_utf8(bytes).is_ok() {
        bytes.len()
    } else {
        bytes.len().div_ceil(3) * 4
    };
    frame_if(bytes, |n| n.div_ceil(3) * 4 < plain).map(|frame| BASE64.encode(&frame))
}

/// One zstd frame of `bytes` when it is shorter than they are, for a raw frame's bytes
/// (`docs/rexd-raw-frames.md`: nothing is base64 there, so the frame only has to beat the
/// bytes themselves). Judged by a sample first, as [`compressed`] does.
pub fn raw_frame(bytes: &[u8]) -> Option<Vec<u8>> {
    if bytes.len() < MIN_COMPRESS {
        return None;
    }
    frame_if(bytes, |n| n < bytes.len())
}

/// The size a zstd frame inflates to, as its header says (the compressor here always writes
/// it); `None` for a frame without one or bytes that are not a frame.
pub fn content_size(frame: &[u8]) -> Option<u64> {
    zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
}

/// The frame of `bytes` when `pays(frame length)`; a large payload whose sample does not
/// shrink is not compressed whole.
fn frame_if(bytes: &[u8], pays: impl Fn(usize) -> bool) -> Option<Vec<u8>> {
    if bytes.len() > 2 * SAMPLE {
        let sample = &bytes[..SAMPLE];
        let frame = with_compressor(|c| c.compress(sample))?;
        if frame.len() as f64 > SAMPLE as f64 * SAMPLE_KEEP {
            return None;
        }
    }
    let frame = with_compressor(|c| c.compress(bytes))?;
    pays(frame.len()).then_some(frame)
}

/// How much of a large payload is tried first.
const SAMPLE: usize = 16 * 1024;
/// What the sample must shrink to (of its size) for the whole payload to be tried: base64
/// costs 4/3, so a frame must be under 3/4 of the bytes to pay off at all.
const SAMPLE_KEEP: f64 = 0.7;

thread_local! {
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

fn with_compressor(
    f: impl FnOnce(&mut zstd::bulk::Compressor<'static>) -> std::io::Result<Vec<u8>>,
) -> Option<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Compressor::new(LEVEL).ok()?);
        }
        f(slot.as_mut()?).ok()
    })
}

/// The bytes a field carries, `zstd` included, refusing any that would be longer than `limit`.
/// `zstd` is accepted only when `negotiated`.
pub fn decode_bounded<'a>(
    text: &'a str,
    encoding: Encoding,
    negotiated: bool,
    limit: usize,
) -> Result<Cow<'a, [u8]>, DecodeError> {
    if encoding != Encoding::Zstd {
        return data::decode(text, encoding).map_err(|e| DecodeError::Malformed {
            encoding: encoding.as_str(),
            reason: e.to_string(),
        });
    }
    if !negotiated {
        return Err(DecodeError::NotNegotiated);
    }
    let mut out = Vec::new();
    decode_zstd_into(text, limit, &mut out)?;
    Ok(Cow::Owned(out))
}

/// [`decode_bounded`] into a buffer the caller keeps (cleared first), for pieces one after
/// another without an allocation each. Always accepts `zstd` (a client asked for it).
pub fn decode_into(
    text: &str,
    encoding: Encoding,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    if encoding != Encoding::Zstd {
        return data::decode_into(text, encoding, out).map_err(|e| DecodeError::Malformed {
            encoding: encoding.as_str(),
            reason: e.to_string(),
        });
    }
    decode_zstd_into(text, limit, out)
}

fn decode_zstd_into(text: &str, limit: usize, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let frame = BASE64.decode(text).map_err(|e| DecodeError::Malformed {
        encoding: "zstd",
        reason: format!("base64: {e}"),
    })?;
    inflate_into(&frame, limit, out)
}

/// Inflates one zstd frame into `out` (cleared first), refusing it unexpanded when it holds
/// more than `limit` bytes: a raw frame's bytes, or the decoded string of a `zstd` payload.
pub fn inflate_into(frame: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    out.clear();
    let malformed = |reason: String| DecodeError::Malformed {
        encoding: "zstd",
        reason,
    };
    // A frame that says its size up front is refused before anything is inflated when that
    // is over the limit, else inflated in one pass into exactly that much room (a frame that
    // holds more than it said fails for want of room).
    if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(frame) {
        if size > limit as u64 {
            return Err(DecodeError::TooLarge { limit });
        }
        out.reserve(size as usize);
        let done = DECOMPRESSOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                let mut d = zstd::bulk::Decompressor::new()?;
                d.set_parameter(zstd::stream::raw::DParameter::WindowLogMax(MAX_WINDOW_LOG))?;
                *slot = Some(d);
            }
            let d = slot.as_mut().expect("set above");
            d.decompress_to_buffer(frame, out)
        });
        return match done {
            Ok(n) if n as u64 == size => Ok(()),
            Ok(n) => {
                out.clear();
                Err(malformed(format!(
                    "the frame said {size} bytes and held {n}"
                )))
            }
            Err(e) => {
                out.clear();
                Err(malformed(e.to_string()))
            }
        };
    }
    let mut decoder =
        zstd::stream::read::Decoder::with_buffer(frame).map_err(|e| malformed(e.to_string()))?;
    decoder
        .window_log_max(MAX_WINDOW_LOG)
        .map_err(|e| malformed(e.to_string()))?;
    // One byte past the limit tells "too large" from "exactly the limit" without inflating more.
    let mut bounded = decoder.take(limit as u64 + 1);
    bounded
        .read_to_end(out)
        .map_err(|e| malformed(e.to_string()))?;
    if out.len() > limit {
        out.clear();
        return Err(DecodeError::TooLarge { limit });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_text(n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        let mut i = 0;
        while v.len() < n {
            v.extend_from_slice(
                format!("2026-11-26 INFO worker[{}] request {i} done\n", i % 7).as_bytes(),
            );
            i += 1;
        }
        v.truncate(n);
        v
    }

    #[test]
    fn text_round_trips_compressed_and_shorter() {
        let text = log_text(100_000);
        let (enc, s) = encode(&text, true);
        assert_eq!(enc, Encoding::Zstd);
        assert!(s.len() < text.len() / 4, "{} of {}", s.len(), text.len());
        let back = decode_bounded(&s, enc, true, text.len()).unwrap();
        assert_eq!(back.as_ref(), &text[..]);
        let mut out = vec![1, 2, 3];
        decode_into(&s, enc, text.len(), &mut out).unwrap();
        assert_eq!(out, text);
    }

    /// 64 KiB of xorshift output: bytes zstd cannot shrink.
    fn random_bytes() -> Vec<u8> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..8192)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_le_bytes()
            })
            .collect()
    }

    #[test]
    fn incompressible_and_short_stay_plain() {
        let random = random_bytes();
        assert_eq!(encode(&random, true).0, Encoding::Base64);
        assert_eq!(
            encode(b"short line\n", true),
            (Encoding::Utf8, Cow::Borrowed("short line\n"))
        );
        // Not asked: today's bytes.
        let text = log_text(10_000);
        assert_eq!(encode(&text, false).0, Encoding::Utf8);
    }

    #[test]
    fn a_raw_frame_is_made_only_when_shorter_than_the_bytes() {
        let text = log_text(100_000);
        let frame = raw_frame(&text).unwrap();
        assert!(frame.len() < text.len() / 4);
        let mut out = vec![9];
        inflate_into(&frame, text.len(), &mut out).unwrap();
        assert_eq!(out, text);
        assert!(matches!(
            inflate_into(&frame, text.len() - 1, &mut out),
            Err(DecodeError::TooLarge { .. })
        ));
        let random = random_bytes();
        assert_eq!(raw_frame(&random), None);
        assert_eq!(raw_frame(b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), None);
    }

    #[test]
    fn exactly_the_limit_passes_one_byte_over_is_refused() {
        let text = log_text(10_000);
        let (_, s) = encode(&text, true);
        assert!(decode_bounded(&s, Encoding::Zstd, true, 10_000).is_ok());
        assert!(matches!(
            decode_bounded(&s, Encoding::Zstd, true, 9_999),
            Err(DecodeError::TooLarge { limit: 9_999 })
        ));
    }

    /// A frame of 1 GiB of zeros is about 40 KB; it must be refused without being inflated,
    /// whether or not its header says its size.
    #[test]
    fn a_bomb_is_refused_not_expanded() {
        let zeros = vec![0u8; 1 << 20];
        // Streamed, so the header carries no content size: 1024 MiB of zeros.
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        for _ in 0..1024 {
            std::io::Write::write_all(&mut enc, &zeros).unwrap();
        }
        let frame = enc.finish().unwrap();
        assert!(frame.len() < 200_000, "{}", frame.len());
        let text = BASE64.encode(&frame);
        let mut out = Vec::new();
        let r = decode_into(&text, Encoding::Zstd, 1 << 20, &mut out);
        assert!(matches!(r, Err(DecodeError::TooLarge { limit }) if limit == 1 << 20));
        // It stopped one byte past the limit: the buffer never grew toward a gigabyte.
        assert!(out.capacity() <= 4 << 20, "{}", out.capacity());
        // With the size in the header: refused before inflating anything.
        let sized = BASE64.encode(zstd::bulk::compress(&vec![0u8; 64 << 20], 1).unwrap());
        assert!(matches!(
            decode_bounded(&sized, Encoding::Zstd, true, 1 << 20),
            Err(DecodeError::TooLarge { .. })
        ));
    }

    #[test]
    fn not_negotiated_and_garbage_are_refused() {
        let text = log_text(1000);
        let (_, s) = encode(&text, true);
        assert!(matches!(
            decode_bounded(&s, Encoding::Zstd, false, 1 << 20),
            Err(DecodeError::NotNegotiated)
        ));
        assert!(matches!(
            decode_bounded("!!", Encoding::Zstd, true, 10),
            Err(DecodeError::Malformed { .. })
        ));
        assert!(matches!(
            decode_bounded("AAAAAAAA", Encoding::Zstd, true, 10),
            Err(DecodeError::Malformed { .. })
        ));
    }

    #[test]
    fn a_frame_that_lies_about_its_size_is_refused() {
        let text = log_text(100_000);
        let mut frame = zstd::bulk::compress(&text, 1).unwrap();
        // The header's content size (single segment, 4 bytes after magic and descriptor) set
        // low: the data does not fit the room it claimed.
        let said = zstd::zstd_safe::get_frame_content_size(&frame)
            .unwrap()
            .unwrap();
        assert_eq!(said, 100_000);
        let at = frame
            .windows(4)
            .position(|w| w == 100_000u32.to_le_bytes())
            .unwrap();
        frame[at..at + 4].copy_from_slice(&1000u32.to_le_bytes());
        let text = BASE64.encode(&frame);
        let r = decode_bounded(&text, Encoding::Zstd, true, 1 << 20);
        assert!(matches!(r, Err(DecodeError::Malformed { .. })), "{r:?}");
    }

    #[test]
    fn a_huge_window_is_refused() {
        // Streamed (no size known up front), so the frame keeps the 2^27 window it was given.
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        enc.set_parameter(zstd::stream::raw::CParameter::WindowLog(27))
            .unwrap();
        std::io::Write::write_all(&mut enc, &log_text(1 << 20)).unwrap();
        let frame = enc.finish().unwrap();
        let text = BASE64.encode(frame);
        let r = decode_bounded(&text, Encoding::Zstd, true, 64 << 20);
        assert!(matches!(r, Err(DecodeError::Malformed { .. })), "{r:?}");
    }
}
