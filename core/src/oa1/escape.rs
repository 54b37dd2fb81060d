//! OA1 payload escaping (spec §3): `\` → `\\`, LF → `\n`, CR → `\r`, TAB → `\t`, and NUL → `\0`
//! because IRC cannot carry NUL at all.
//!
//! A frame payload that would end with a space carries it as `\s` (servers trim trailing
//! whitespace; see [`chunk`](super::chunk)), so decoding also maps `\s` to a space.
//!
//! Decoding is one pass over the bytes. An unknown escape `\x` stays `\x`, and a lone trailing
//! backslash stays a backslash, so decoding never fails and never loses bytes. [`Unescaper`]
//! decodes a stream fed in pieces, holding back a backslash that ends one piece until it sees the
//! next, so a peer that cut a frame inside an escape pair is still decoded right.

/// For each byte, the letter that follows `\` in its escape, or 0 when it needs none.
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    table[b'\\' as usize] = b'\\';
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table[0] = b'0';
    table
};

/// Finding the bytes to (un)escape a block at a time: 16 bytes with SSE2 on x86_64 (safe
/// intrinsics, baseline on that target), 8 bytes with word bit tricks elsewhere.
mod block {
    #[cfg(target_arch = "x86_64")]
    pub(super) const STEP: usize = 16;
    #[cfg(not(target_arch = "x86_64"))]
    pub(super) const STEP: usize = 8;

    // SAFETY (for the `unsafe` blocks below): SSE2 is part of every x86_64 target's baseline, and
    // these intrinsics only compute on register values; none touches memory.
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    mod imp {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi64x,
            _mm_set1_epi8,
        };

        #[inline]
        fn vector(block: &[u8; 16]) -> __m128i {
            let lo = u64::from_le_bytes(block[..8].try_into().expect("8 bytes"));
            let hi = u64::from_le_bytes(block[8..].try_into().expect("8 bytes"));
            unsafe { _mm_set_epi64x(hi as i64, lo as i64) }
        }

        /// Bit k set when byte k is below 14 or a backslash.
        #[inline]
        pub(in super::super) fn specials(block: &[u8; 16]) -> u32 {
            let v = vector(block);
            unsafe {
                let below_14 = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(13)), v);
                let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
                _mm_movemask_epi8(_mm_or_si128(below_14, backslash)) as u32
            }
        }

        /// Bit k set when byte k is a backslash.
        #[inline]
        pub(in super::super) fn backslashes(block: &[u8; 16]) -> u32 {
            let v = vector(block);
            unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8))) as u32 }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    mod imp {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGHS: u64 = 0x8080_8080_8080_8080;
        const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;

        /// The high bit of each zero byte (exact: no carries cross bytes).
        fn zero_bytes(word: u64) -> u64 {
            !(((word & LOW7) + LOW7) | word | LOW7)
        }

        /// Moves each byte's high bit down to bit (byte index), like SSE2's movemask.
        fn gather(high_bits: u64) -> u32 {
            (0..8).fold(0, |m, k| m | (((high_bits >> (8 * k + 7)) & 1) as u32) << k)
        }

        pub(in super::super) fn specials(block: &[u8; 8]) -> u32 {
            let word = u64::from_le_bytes(*block);
            let below_14 = !(((word & LOW7) + ONES * (0x80 - 14)) | word) & HIGHS;
            gather(below_14 | zero_bytes(word ^ (ONES * u64::from(b'\\'))))
        }

        pub(in super::super) fn backslashes(block: &[u8; 8]) -> u32 {
            gather(zero_bytes(
                u64::from_le_bytes(*block) ^ (ONES * u64::from(b'\\')),
            ))
        }
    }

    pub(super) use imp::{backslashes, specials};

    /// The block of `STEP` bytes at `bytes[at..]`.
    #[inline]
    pub(super) fn at(bytes: &[u8], at: usize) -> &[u8; STEP] {
        bytes[at..at + STEP].try_into().expect("STEP bytes")
    }
}

use block::STEP;

/// Writes `b`, escaped if it must be, at `buf[w..]`; returns the new write position.
#[inline]
fn put_escaped(buf: &mut [u8], w: usize, b: u8) -> usize {
    let letter = ESCAPE[b as usize];
    if letter == 0 {
        buf[w] = b;
        w + 1
    } else {
        buf[w] = b'\\';
        buf[w + 1] = letter;
        w + 2
    }
}

/// Appends the escaped form of `text` to `out`.
///
/// Works 8 bytes at a time into a buffer sized for the worst case. A word is stored whole; when
/// it holds a byte to escape, the write position only advances to that byte, which is then
/// written escaped, and the scan restarts right after it. Measured against scanning for each
/// special byte and appending the runs between them: see `core/benches/oa1_codec.rs`.
pub fn escape_into(text: &str, out: &mut String) {
    let bytes = text.as_bytes();
    let mut buf = std::mem::take(out).into_bytes();
    let mut w = buf.len();
    // Room for the text, an eighth more for escapes, and a block of slack; grown when the
    // escapes use it up (zeroing twice the size up front cost more than all the growing).
    buf.resize(w + bytes.len() + bytes.len() / 8 + 2 * STEP, 0);
    let mut i = 0;
    while i + STEP <= bytes.len() {
        if buf.len() - w < 2 * STEP {
            buf.resize(buf.len() + (bytes.len() - i) + 2 * STEP, 0);
        }
        let chunk = block::at(bytes, i);
        buf[w..w + STEP].copy_from_slice(chunk);
        let specials = block::specials(chunk);
        if specials == 0 {
            w += STEP;
            i += STEP;
            continue;
        }
        let skip = specials.trailing_zeros() as usize;
        w = put_escaped(&mut buf, w + skip, bytes[i + skip]);
        i += skip + 1;
    }
    buf.resize(buf.len().max(w + 2 * (bytes.len() - i)), 0);
    for &b in &bytes[i..] {
        w = put_escaped(&mut buf, w, b);
    }
    buf.truncate(w);
    *out = into_string(buf);
}

/// `buf` holds valid UTF-8: escaping only turns ASCII bytes into ASCII pairs.
#[allow(unsafe_code)]
fn into_string(buf: Vec<u8>) -> String {
    debug_assert!(std::str::from_utf8(&buf).is_ok());
    // SAFETY: `buf` is the UTF-8 of a `&str` (and possibly of a `String` before it) with some
    // ASCII bytes replaced by two ASCII bytes each, which keeps every sequence whole and valid.
    unsafe { String::from_utf8_unchecked(buf) }
}

/// The escaped form of `text`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    escape_into(text, &mut out);
    out
}

/// The decoded form of a whole escaped payload.
pub fn unescape(escaped: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(escaped.len());
    let mut decoder = Unescaper::default();
    decoder.feed(escaped, &mut out);
    decoder.finish(&mut out);
    out
}

/// A streaming decoder for escaped payload pieces.
#[derive(Debug, Default, Clone)]
pub struct Unescaper {
    held_backslash: bool,
}

impl Unescaper {
    /// Decodes `piece` onto `out`. A backslash at the very end is held until the next piece.
    ///
    /// Like [`escape_into`], 8 bytes at a time, restarting the scan after each escape.
    pub fn feed(&mut self, piece: &[u8], out: &mut Vec<u8>) {
        let mut w = out.len();
        out.resize(w + piece.len() + STEP, 0);
        let mut i = 0;
        if self.held_backslash {
            let Some(&first) = piece.first() else {
                out.truncate(w);
                return;
            };
            self.held_backslash = false;
            w = put_unescaped(out, w, first);
            i = 1;
        }
        while i < piece.len() {
            if i + STEP <= piece.len() {
                let chunk = block::at(piece, i);
                out[w..w + STEP].copy_from_slice(chunk);
                let backslashes = block::backslashes(chunk);
                if backslashes == 0 {
                    w += STEP;
                    i += STEP;
                    continue;
                }
                let skip = backslashes.trailing_zeros() as usize;
                w += skip;
                i += skip;
            } else if piece[i] != b'\\' {
                out[w] = piece[i];
                w += 1;
                i += 1;
                continue;
            }
            // piece[i] is a backslash.
            match piece.get(i + 1) {
                Some(&letter) => {
                    w = put_unescaped(out, w, letter);
                    i += 2;
                }
                None => {
                    self.held_backslash = true;
                    i += 1;
                }
            }
        }
        out.truncate(w);
    }

    /// Ends the stream: a held lone backslash is kept as a backslash.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.held_backslash) {
            out.push(b'\\');
        }
    }
}

/// For each escape letter, the byte it stands for; `UNKNOWN` for letters that are no escape.
const UNESCAPE: [u8; 256] = {
    let mut table = [UNKNOWN; 256];
    table[b'\\' as usize] = b'\\';
    table[b'n' as usize] = b'\n';
    table[b'r' as usize] = b'\r';
    table[b't' as usize] = b'\t';
    table[b'0' as usize] = 0;
    table[b's' as usize] = b' ';
    table
};
/// No escape decodes to 0xFF (it is not even UTF-8), so it marks the unknown letters.
const UNKNOWN: u8 = 0xFF;

/// Writes the byte an escape `\\<letter>` stands for at `out[w..]` (an unknown escape stays
/// as it is, two bytes); returns the new write position. `out` has room for two bytes at `w`.
/// A table rather than a `match`: the jump table's indirect branch mispredicted on every escape.
#[inline]
fn put_unescaped(out: &mut [u8], w: usize, letter: u8) -> usize {
    let decoded = UNESCAPE[letter as usize];
    if decoded == UNKNOWN {
        out[w] = b'\\';
        out[w + 1] = letter;
        return w + 2;
    }
    out[w] = decoded;
    w + 1
}

/// Whether a cut at `pos` of the escaped text `escaped` would split an escape pair, given that
/// `start` (a previous cut) is not inside one.
pub(crate) fn splits_escape_pair(escaped: &[u8], start: usize, pos: usize) -> bool {
    let run = escaped[start..pos]
        .iter()
        .rev()
        .take_while(|&&b| b == b'\\')
        .count();
    run % 2 == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spec_escapes_and_nul() {
        assert_eq!(escape("a\\b\nc\rd\te\0f"), "a\\\\b\\nc\\rd\\te\\0f");
        assert_eq!(escape("plain ünïcode 𝄞"), "plain ünïcode 𝄞");
        assert_eq!(
            unescape(b"a\\\\b\\nc\\rd\\te\\0f"),
            b"a\\b\nc\rd\te\0f".to_vec()
        );
    }

    #[test]
    fn no_double_expansion() {
        // `\\n` is a backslash then `n`, not a newline.
        assert_eq!(unescape(b"\\\\n"), b"\\n".to_vec());
        assert_eq!(escape("\\n"), "\\\\n");
    }

    #[test]
    fn unknown_escape_and_trailing_backslash_stay() {
        assert_eq!(unescape(b"\\x\\"), b"\\x\\".to_vec());
        assert_eq!(unescape(b"a\\s"), b"a ".to_vec());
        assert_eq!(unescape(b"\\"), b"\\".to_vec());
    }

    #[test]
    fn streaming_across_an_escape_pair() {
        let mut out = Vec::new();
        let mut d = Unescaper::default();
        d.feed(b"ab\\", &mut out);
        assert_eq!(out, b"ab");
        d.feed(b"", &mut out);
        d.feed(b"nc\\", &mut out);
        d.finish(&mut out);
        assert_eq!(out, b"ab\nc\\");
    }

    #[test]
    fn escape_pair_detection() {
        let e = b"a\\\\\\n";
        assert!(!splits_escape_pair(e, 0, 1));
        assert!(splits_escape_pair(e, 0, 2));
        assert!(!splits_escape_pair(e, 0, 3));
        assert!(splits_escape_pair(e, 0, 4));
        assert!(!splits_escape_pair(e, 0, 5));
    }

    #[test]
    fn block_masks_are_exact() {
        for b in 0..=255u8 {
            for filler in [b'a', 0, 0xff, b'\\', 13, 14, 0x80] {
                for pos in 0..STEP {
                    let mut chunk = [filler; STEP];
                    chunk[pos] = b;
                    for (k, &byte) in chunk.iter().enumerate() {
                        let bit = 1u32 << k;
                        let special = block::specials(&chunk) & bit != 0;
                        assert_eq!(special, byte < 14 || byte == b'\\', "{byte} at {k}");
                        assert_eq!(block::backslashes(&chunk) & bit != 0, byte == b'\\');
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn round_trip(text in any::<String>()) {
            prop_assert_eq!(unescape(escape(&text).as_bytes()), text.as_bytes().to_vec());
        }

        #[test]
        fn escaped_text_has_no_line_breaks_or_nul(text in any::<String>()) {
            let e = escape(&text);
            prop_assert!(!e.bytes().any(|b| matches!(b, b'\r' | b'\n' | b'\0')));
        }

        #[test]
        fn streaming_equals_whole(bytes in proptest::collection::vec(any::<u8>(), 0..64), cuts in proptest::collection::vec(0usize..64, 0..6)) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort();
            let mut out = Vec::new();
            let mut d = Unescaper::default();
            let mut last = 0;
            for c in cuts.into_iter().chain([bytes.len()]) {
                d.feed(&bytes[last..c], &mut out);
                last = c;
            }
            d.finish(&mut out);
            prop_assert_eq!(out, unescape(&bytes));
        }
    }
}
