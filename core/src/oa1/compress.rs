//! Compressed streams, negotiated per request (a deskwire extension; spec-only peers are
//! unaffected).
//!
//! IRC servers let a client send a few hundred bytes a second (ngircd: 3 lines, then about one a
//! second), so the size of a `RemoteBash` answer on the wire, not the codec, sets how fast it
//! arrives. Command output compresses well; deflate plus base64 carries typical text in a third
//! to a fifth of the lines of readable mode.
//!
//! # Wire format
//!
//! Three frame types beside v40's four. A v40 receiver drops them as not OA1-shaped (its `TYPE`
//! must be `REQ`, `RES`, `ERR` or `CANCEL`), so they never confuse a spec-only peer:
//!
//! - `OA1 ACCEPT <REQ_ID> 1 0 deflate`: sent by a desk right before the `REQ` stream of that id:
//!   "this answer may come compressed". The payload lists encodings separated by spaces; `deflate`
//!   is the only one.
//! - `OA1 RESZ <REQ_ID> <SEQ> <MORE> <PAYLOAD>`: a response stream whose reassembled payload is
//!   the answer compressed with raw deflate (RFC 1951) and written in standard base64 (RFC 4648,
//!   padded at the end). Chunks may cut the base64 text anywhere; it needs no escaping.
//! - `OA1 REQZ ...`: a request stream compressed the same way. It also means `ACCEPT deflate`.
//!
//! A deskwire remote that sees the offer answers with `RESZ`, streaming: output is compressed as
//! it comes and flushed (a deflate sync flush) only when a frame is about to leave, so the stream
//! still moves while the command runs. A remote that does not know the offer ignores it and
//! answers `RES`, which the desk takes as usual. A desk sends `REQZ` only to a peer it has seen
//! answer `RESZ` (it needs an `allowed_sender` to know who that is), and only when that takes no
//! more frames than the readable request; until then it sends `ACCEPT` and `REQ`.
//!
//! The negotiation also says who decodes deskwire's own escapes (`\s` for a space that ends a
//! frame, `\0` for NUL; see [`escape`](super::escape)), which a spec-only peer would show
//! literally. A remote uses them only inside compressed answers' text, that is never: its plain
//! `RES` and `ERR` frames carry the spec's four escapes only. A desk uses them in a plain `REQ`
//! only once its remote has answered `RESZ`. Between deskwire ends, compression therefore
//! carries exact bytes; without it, a server that trims lines may eat the spaces that end a
//! text, as it would a spec-only sender's.
//!
//! # Limits
//!
//! `max_message_bytes` (128 KiB) applies to the decompressed text. Inflating stops one byte past
//! the cap, so a compression bomb costs at most the cap in memory: an answer over it is truncated
//! with the marker, a request over it is answered `ERR too_large`. The compressed stream itself
//! is capped at [`compressed_cap`] of the same limit. A stream that is not valid base64 or
//! deflate fails the request (`malformed` on the desk, `ERR malformed` from the remote).

use std::io::Write;

use base64::Engine as _;
use flate2::write::DeflateEncoder;
use flate2::{Compression, Decompress, FlushDecompress, Status};

/// The one encoding: raw deflate in base64.
pub const DEFLATE: &str = "deflate";

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The largest compressed stream (base64 text) accepted for a message cap of `max_message_bytes`:
/// incompressible text grows by a third in base64, plus deflate's few bytes per block.
pub fn compressed_cap(max_message_bytes: usize) -> usize {
    max_message_bytes / 3 * 4 + max_message_bytes / 64 + 4096
}

/// Compresses `text` into the base64 payload of a `REQZ` or `RESZ` stream, in one go.
pub fn compress(text: &[u8]) -> String {
    let mut stream = StreamCompressor::new();
    let mut out = String::new();
    stream.write(text, &mut out);
    stream.finish(&mut out);
    out
}

/// Why a compressed stream could not be restored. The message (which goes on the wire in an
/// `ERR malformed`) is fixed; the field says more, for logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CorruptStream {
    /// Not base64.
    #[error("the compressed stream is not base64")]
    Base64(String),
    /// Not a deflate stream (or cut short).
    #[error("the compressed stream is not valid deflate")]
    Deflate(String),
}

/// Restores the base64 payload of a compressed stream, inflating at most `cap` bytes. Returns the
/// text and whether there was more (which is then dropped, never inflated).
pub fn decompress(encoded: &[u8], cap: usize) -> Result<(Vec<u8>, bool), CorruptStream> {
    const STEP: usize = 64 * 1024;
    let compressed = B64
        .decode(encoded)
        .map_err(|e| CorruptStream::Base64(e.to_string()))?;
    let mut inflater = Decompress::new(false);
    let mut text = Vec::new();
    loop {
        if text.len() > cap {
            text.truncate(cap);
            return Ok((text, true));
        }
        text.reserve_exact((cap + 1 - text.len()).min(STEP));
        let (consumed, produced) = (inflater.total_in(), text.len());
        let status = inflater
            .decompress_vec(
                &compressed[consumed as usize..],
                &mut text,
                FlushDecompress::None,
            )
            .map_err(|e| CorruptStream::Deflate(e.to_string()))?;
        if status == Status::StreamEnd {
            let over = text.len() > cap;
            text.truncate(cap);
            return Ok((text, over));
        }
        if inflater.total_in() == consumed && text.len() == produced {
            return Err(CorruptStream::Deflate("the stream is cut short".into()));
        }
    }
}

/// Restores what can be restored of a compressed stream cut short (an answer the request's
/// timeout ended): the whole base64 groups, inflated as far as they go, at most `cap` bytes.
/// The remote flushes the deflate stream whenever a frame leaves, so that is about everything
/// that arrived. Never an error: what does not decode is left out.
pub fn decompress_prefix(encoded: &[u8], cap: usize) -> Vec<u8> {
    let whole = encoded.len() / 4 * 4;
    let Ok(compressed) = B64.decode(&encoded[..whole]) else {
        return Vec::new();
    };
    let mut inflater = Decompress::new(false);
    let mut text = Vec::with_capacity(cap.min(compressed.len() * 4));
    while text.len() < cap {
        text.reserve((cap - text.len()).min(64 * 1024));
        let (consumed, produced) = (inflater.total_in(), text.len());
        let step = inflater.decompress_vec(
            &compressed[consumed as usize..],
            &mut text,
            FlushDecompress::Sync,
        );
        let stuck = inflater.total_in() == consumed && text.len() == produced;
        if !matches!(step, Ok(Status::Ok | Status::BufError)) || stuck {
            break;
        }
    }
    text.truncate(cap);
    text
}

/// Compresses a response as it is produced, into base64 text.
#[derive(Debug)]
pub(crate) struct StreamCompressor {
    encoder: DeflateEncoder<Vec<u8>>,
    /// Compressed bytes not written as base64 yet (base64 takes them three at a time).
    carry: Vec<u8>,
    /// Whether input went in since the last flush.
    dirty: bool,
}

impl StreamCompressor {
    pub(crate) fn new() -> Self {
        StreamCompressor {
            encoder: DeflateEncoder::new(Vec::new(), Compression::default()),
            carry: Vec::new(),
            dirty: false,
        }
    }

    /// Takes more text; whatever compressed output is ready is appended to `out` as base64.
    pub(crate) fn write(&mut self, text: &[u8], out: &mut String) {
        // Writing into a Vec cannot fail.
        let _ = self.encoder.write_all(text);
        self.dirty |= !text.is_empty();
        self.harvest(out, false);
    }

    /// Makes everything written so far available (a deflate sync flush), for a frame that is
    /// about to leave. Does nothing when nothing was written since the last flush.
    pub(crate) fn flush(&mut self, out: &mut String) {
        if self.dirty {
            let _ = self.encoder.flush();
            self.dirty = false;
            self.harvest(out, false);
        }
    }

    /// Ends the stream: the last bytes and base64's padding.
    pub(crate) fn finish(&mut self, out: &mut String) {
        let _ = self.encoder.try_finish();
        self.harvest(out, true);
    }

    /// Whether a flush would bring out base64 text: input went in since the last flush, or
    /// whole base64 groups wait. The one or two bytes base64 carries between groups do not
    /// count: they come out with the next input or at the end, and waiting for them to surface
    /// kept a remote polling without pause while its command was quiet. (They are the tail of
    /// the sync flush's empty block: the text before them inflates without them.)
    pub(crate) fn pending(&self) -> bool {
        self.dirty || self.buffered() >= 3
    }

    /// Bytes compressed but not handed out yet.
    pub(crate) fn buffered(&self) -> usize {
        self.encoder.get_ref().len() + self.carry.len()
    }

    fn harvest(&mut self, out: &mut String, last: bool) {
        let produced = self.encoder.get_mut();
        if produced.is_empty() && !last {
            return;
        }
        self.carry.append(produced);
        let whole = if last {
            self.carry.len()
        } else {
            self.carry.len() / 3 * 3
        };
        B64.encode_string(&self.carry[..whole], out);
        self.carry.drain(..whole);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_whole_and_streamed() {
        let text = "total 48\ndrwxr-xr-x  2 root root 4096 Nov 23 10:00 bin\n".repeat(200);
        let whole = compress(text.as_bytes());
        assert!(
            whole.len() < text.len() / 5,
            "{} of {}",
            whole.len(),
            text.len()
        );
        assert_eq!(
            decompress(whole.as_bytes(), 1 << 20).unwrap(),
            (text.clone().into_bytes(), false)
        );
        // Streamed in pieces with flushes between: the same text comes back.
        let mut stream = StreamCompressor::new();
        let mut out = String::new();
        for (i, piece) in text.as_bytes().chunks(777).enumerate() {
            stream.write(piece, &mut out);
            if i % 3 == 0 {
                stream.flush(&mut out);
            }
        }
        stream.finish(&mut out);
        assert_eq!(stream.buffered(), 0);
        assert_eq!(
            decompress(out.as_bytes(), 1 << 20).unwrap().0,
            text.as_bytes()
        );
    }

    #[test]
    fn a_flush_makes_what_was_written_decodable() {
        use std::io::Read;
        let mut stream = StreamCompressor::new();
        let mut out = String::new();
        stream.write(b"first part\n", &mut out);
        stream.flush(&mut out);
        // Whole base64 groups so far, and what they hold inflates to the text.
        let whole = out.len() / 4 * 4;
        let bytes = B64.decode(&out[..whole]).unwrap();
        let mut text = Vec::new();
        let _ = flate2::read::DeflateDecoder::new(&bytes[..]).read_to_end(&mut text);
        assert!(text.starts_with(b"first part"), "{text:?}");
    }

    #[test]
    fn a_stream_cut_short_restores_what_was_flushed() {
        let mut stream = StreamCompressor::new();
        let mut out = String::new();
        stream.write(b"line one\nline two\n", &mut out);
        stream.flush(&mut out);
        let flushed = out.len();
        stream.write(&b"more ".repeat(1000), &mut out);
        // Cut anywhere after the flush, even inside a base64 group: the flushed text comes back.
        for cut in [flushed, flushed + 1, flushed + 3, out.len()] {
            let text = decompress_prefix(&out.as_bytes()[..cut.min(out.len())], 1 << 20);
            assert!(text.starts_with(b"line one\nline two\n"), "{cut}: {text:?}");
        }
        assert_eq!(decompress_prefix(&out.as_bytes()[..flushed], 4), b"line");
        assert!(decompress_prefix(b"", 100).is_empty());
        assert!(decompress_prefix(b"!!!!not base64", 100).is_empty());
    }

    #[test]
    fn a_bomb_inflates_no_more_than_the_cap() {
        let bomb = compress(&vec![b'a'; 50 << 20]);
        assert!(bomb.len() < 100_000);
        let (text, over) = decompress(bomb.as_bytes(), 128 * 1024).unwrap();
        assert!(over);
        assert_eq!(text.len(), 128 * 1024);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(matches!(
            decompress(b"not base64!", 100),
            Err(CorruptStream::Base64(_))
        ));
        assert!(matches!(
            decompress(B64.encode(b"\xff\xff\xff garbage").as_bytes(), 100),
            Err(CorruptStream::Deflate(_))
        ));
        // Cut short: a prefix of a real stream.
        let whole = compress(&vec![b'x'; 10_000]);
        let cut = &whole[..whole.len() / 2 / 4 * 4];
        assert!(decompress(cut.as_bytes(), 1 << 20).is_err());
    }

    #[test]
    fn the_compressed_cap_fits_incompressible_text() {
        let mut noise = Vec::with_capacity(128 * 1024);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        while noise.len() < 128 * 1024 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            noise.extend_from_slice(&x.to_le_bytes());
        }
        assert!(compress(&noise).len() <= compressed_cap(128 * 1024));
    }
}
