//! OA1 payload escaping (`docs/oa1.md`, "Escaping"): `\` → `\\`, LF → `\n`, CR → `\r`,
//! TAB → `\t`, and NUL → `\0` because IRC cannot carry NUL at all.
//!
//! A frame payload that would end with a space carries it as `\s` (servers trim trailing
//! whitespace; see [`chunk`](super::chunk)), so decoding also maps `\s` to a space.
//!
//! Both are deskwire's: a peer written from the spec alone decodes only the spec's four escapes
//! and would show them literally. So they are used only toward a peer that has shown it decodes
//! them (see [`compress`](super::compress), whose `ACCEPT` negotiation carries it);
//! [`escape_spec_into`] is the escaping for every other peer: NUL, which IRC cannot carry and
//! the spec cannot express, becomes U+FFFD.
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

/// [`ESCAPE`] for the control bytes that have a letter, indexed by their value (0 to 15).
#[cfg(target_arch = "x86_64")]
const ESCAPE_LETTERS: [u8; 16] = {
    let mut table = [0u8; 16];
    let mut b = 0;
    while b < 16 {
        table[b] = ESCAPE[b];
        b += 1;
    }
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

    /// Word bit tricks, 8 bytes at a time: the implementation where SSE2 is missing, compiled
    /// (and tested against the byte rules) everywhere so that x86 test runs cover it too.
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    pub(super) mod swar {
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

    #[cfg(not(target_arch = "x86_64"))]
    use swar as imp;

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
/// With AVX-512 (VBMI2) and BMI2, 32 bytes per step without a branch per escape; with AVX2,
/// 16 bytes per step, also without one; otherwise a scan a block at a time (16 bytes with
/// SSE2) that restarts after each escape.
pub fn escape_into(text: &str, out: &mut String) {
    let mut buf = std::mem::take(out).into_bytes();
    #[cfg(target_arch = "x86_64")]
    let done =
        simd::wide::escape(text.as_bytes(), &mut buf) || simd::escape(text.as_bytes(), &mut buf);
    #[cfg(not(target_arch = "x86_64"))]
    let done = false;
    if !done {
        escape_scalar(text.as_bytes(), &mut buf);
    }
    *out = into_string(buf);
}

/// Appends the escaped form of `bytes` to `buf`.
///
/// Works a block at a time into a buffer sized for the worst case. A block is stored whole; when
/// it holds a byte to escape, the write position only advances to that byte, which is then
/// written escaped, and the scan restarts right after it. Measured against scanning for each
/// special byte and appending the runs between them: see `core/benches/oa1_codec.rs`.
fn escape_scalar(bytes: &[u8], buf: &mut Vec<u8>) {
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
        w = put_escaped(buf, w + skip, bytes[i + skip]);
        i += skip + 1;
    }
    buf.resize(buf.len().max(w + 2 * (bytes.len() - i)), 0);
    for &b in &bytes[i..] {
        w = put_escaped(buf, w, b);
    }
    buf.truncate(w);
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

/// Appends `text` escaped with the spec's four escapes only, for a peer that has not shown it
/// decodes deskwire's: a NUL byte becomes U+FFFD (the replacement character) instead of `\0`.
pub fn escape_spec_into(text: &str, out: &mut String) {
    if memchr::memchr(0, text.as_bytes()).is_some() {
        escape_into(&text.replace('\0', "\u{FFFD}"), out);
    } else {
        escape_into(text, out);
    }
}

/// [`escape_spec_into`] into a new string.
pub fn escape_spec(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    escape_spec_into(text, &mut out);
    out
}

/// What a peer written from the spec alone decodes: `\\\\`, `\\n`, `\\r` and `\\t`, and
/// nothing else (deskwire's `\\s` and `\\0` stay as they are). The reference for checking that
/// what deskwire sends toward such a peer reads right there.
pub fn unescape_v40(escaped: &str) -> String {
    let mut out = String::with_capacity(escaped.len());
    let mut chars = escaped.chars().peekable();
    while let Some(c) = chars.next() {
        let decoded = match (c, chars.peek()) {
            ('\\', Some('\\')) => Some('\\'),
            ('\\', Some('n')) => Some('\n'),
            ('\\', Some('r')) => Some('\r'),
            ('\\', Some('t')) => Some('\t'),
            _ => None,
        };
        match decoded {
            Some(d) => {
                chars.next();
                out.push(d);
            }
            None => out.push(c),
        }
    }
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
    pub fn feed(&mut self, mut piece: &[u8], out: &mut Vec<u8>) {
        if self.held_backslash {
            let Some((&letter, rest)) = piece.split_first() else {
                return;
            };
            self.held_backslash = false;
            match UNESCAPE[letter as usize] {
                UNKNOWN => out.extend_from_slice(&[b'\\', letter]),
                decoded => out.push(decoded),
            }
            piece = rest;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(held) = simd::unescape(piece, out) {
            self.held_backslash = held;
            return;
        }
        self.held_backslash = feed_scalar(piece, out);
    }

    /// Ends the stream: a held lone backslash is kept as a backslash.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.held_backslash) {
            out.push(b'\\');
        }
    }
}

/// Decodes `piece` (which does not continue an escape) onto `out` without SIMD beyond the block
/// scan; returns whether a final backslash is held for the next piece.
///
/// Like [`escape_into`], a block at a time, restarting the scan after each escape.
fn feed_scalar(piece: &[u8], out: &mut Vec<u8>) -> bool {
    let mut held = false;
    let mut w = out.len();
    out.resize(w + piece.len() + STEP, 0);
    let mut i = 0;
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
                held = true;
                i += 1;
            }
        }
    }
    out.truncate(w);
    held
}

/// Unescaping 32 bytes per step without a branch per escape, with AVX2 (checked at run time).
///
/// The scalar loop above restarts its block scan after every escape, and with command output
/// (an escape every ~35 bytes: newlines, tabs, backslashes) its "block has a backslash" branch
/// is a coin flip. Here every block takes the same path: each backslash followed by a known
/// letter is overwritten with what the pair decodes to, bit masks find which backslashes really
/// start a pair (in a run, every second one is a letter), and the letters of decoded pairs are
/// squeezed out with byte shuffles. On `oa1_codec`'s corpus this decodes 128 KiB in about a
/// third of the scalar loop's time.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod simd {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm_castsi128_pd, _mm_storeh_pd, _mm_storel_epi64, _mm256_alignr_epi8,
        _mm256_and_si256, _mm256_blendv_epi8, _mm256_castsi256_si128, _mm256_cmpeq_epi8,
        _mm256_extracti128_si256, _mm256_loadu_si256, _mm256_movemask_epi8,
        _mm256_permute2x128_si256, _mm256_set_epi64x, _mm256_set1_epi8, _mm256_shuffle_epi8,
    };

    /// Whether the CPU runs [`unescape_blocks`].
    #[inline]
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
    }

    /// Bytes per block.
    pub(super) const BLOCK: usize = 32;

    /// What one block's escapes do (bit k for byte k).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub(super) struct Masks {
        /// Backslashes that start an escape pair.
        pub(super) starts: u64,
        /// Those of them whose letter is known (overwritten with the decoded byte).
        pub(super) decoded: u64,
        /// Bytes to drop: the letters of those escapes.
        pub(super) dropped: u64,
        /// The next block's first byte is the letter of an escape...
        pub(super) letter_next: bool,
        /// ... of a known one (so that letter is dropped).
        pub(super) drop_next: bool,
    }

    const EVEN: u64 = 0x5555_5555_5555_5555;
    const ODD: u64 = !EVEN;

    /// From `backslash` (bit k: byte k is a backslash), `known_next` (bit k: byte k + 1 is a
    /// known escape letter) and the previous block's masks, for a block of `WIDTH` bytes (32 or
    /// 64; the bits above are clear).
    #[inline]
    pub(super) fn masks<const WIDTH: u32>(backslash: u64, known_next: u64, prev: Masks) -> Masks {
        // A backslash that is itself a letter does not start a pair.
        let b = backslash & !u64::from(prev.letter_next);
        let run_starts = b & !(b << 1);
        // Adding a run's lowest bit clears the run (and sets the bit after it, never part of a
        // run): what the sum clears are the runs that begin on an even byte.
        let even_runs = b & !b.wrapping_add(run_starts & EVEN);
        let odd_runs = b & !even_runs;
        // In a run, every second backslash (counting from its start) is a letter.
        let letters_in_runs = (even_runs & ODD) | (odd_runs & EVEN);
        let starts = b & !letters_in_runs;
        let decoded = starts & known_next;
        let top = WIDTH - 1;
        Masks {
            starts,
            decoded,
            dropped: ((decoded << 1) & (u64::MAX >> (63 - top))) | u64::from(prev.drop_next),
            letter_next: (starts >> top) & 1 != 0,
            drop_next: (decoded >> top) & 1 != 0,
        }
    }

    /// For each 8-bit keep mask, the indices of its set bits in order (then zeros).
    static COMPRESS: [u64; 256] = {
        let mut table = [0u64; 256];
        let mut mask = 0;
        while mask < 256 {
            let mut out = 0u64;
            let mut n = 0;
            let mut bit = 0;
            while bit < 8 {
                if mask & (1 << bit) != 0 {
                    out |= (bit as u64) << (8 * n);
                    n += 1;
                }
                bit += 1;
            }
            table[mask] = out;
            mask += 1;
        }
        table
    };

    /// Indexed by a byte's low nibble: the escape letter with that nibble (no two share one),
    /// or 0 (whose nibble is another)...
    const LETTERS: [u8; 16] = *b"0\0rst\0\0\0\0\0\0\0\\\0n\0";
    /// ... and what that letter decodes to.
    const DECODED: [u8; 16] = *b"\0\0\r \t\0\0\0\0\0\0\0\\\0\n\0";

    /// A 16-byte table in both 128-bit lanes (byte shuffles stay inside their lane).
    #[inline]
    fn table(bytes: [u8; 16]) -> __m256i {
        let mut lo = [0u8; 8];
        let mut hi = [0u8; 8];
        lo.copy_from_slice(&bytes[..8]);
        hi.copy_from_slice(&bytes[8..]);
        let (lo, hi) = (i64::from_le_bytes(lo), i64::from_le_bytes(hi));
        // SAFETY: builds a register from values; AVX is checked by `available()` before any
        // caller runs.
        unsafe { _mm256_set_epi64x(hi, lo, hi, lo) }
    }

    /// The widest decoding kernel this CPU runs.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Kernel {
        /// 32-byte blocks, byte shuffles to squeeze ([`blocks`]).
        Avx2,
        /// 64-byte blocks, one compress to squeeze ([`wide::blocks`]).
        Avx512,
    }

    impl Kernel {
        /// Whether this CPU runs the kernel (the feature checks are cached by std).
        #[inline]
        pub(super) fn available(self) -> bool {
            match self {
                Kernel::Avx2 => available(),
                Kernel::Avx512 => wide::available(),
            }
        }
    }

    /// Appends the decoded `piece` to `out`. Returns whether `piece` ended with the backslash
    /// of an escape pair (not written: its letter is in the next piece). `None` when the CPU
    /// lacks AVX2.
    pub(super) fn unescape(piece: &[u8], out: &mut Vec<u8>) -> Option<bool> {
        unescape_with(Kernel::Avx512, piece, out)
            .or_else(|| unescape_with(Kernel::Avx2, piece, out))
    }

    /// [`unescape`] with one kernel; `None` when the CPU does not run it.
    pub(super) fn unescape_with(kernel: Kernel, piece: &[u8], out: &mut Vec<u8>) -> Option<bool> {
        if !kernel.available() {
            return None;
        }
        // Decoding never grows the bytes; stores write up to a wide block past the decoded end.
        out.reserve(piece.len() + wide::BLOCK);
        let start = out.len();
        // SAFETY: `kernel.available()` checked the kernel's CPU features; `out` has room for
        // `piece.len()` plus a wide block past `start`.
        let (written, held) = unsafe {
            let dst = out.as_mut_ptr().add(start);
            match kernel {
                Kernel::Avx512 => wide::blocks(piece, dst),
                Kernel::Avx2 => blocks(piece, dst),
            }
        };
        // SAFETY: the kernel wrote (initialised) the `written` bytes after `start`, within the
        // capacity reserved above.
        unsafe { out.set_len(start + written) };
        Some(held)
    }

    /// Decodes `piece` to `dst`; returns the bytes written and whether the last backslash was
    /// held back.
    ///
    /// # Safety
    /// `dst` is valid for writes of `piece.len() + BLOCK` bytes.
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn blocks(piece: &[u8], dst: *mut u8) -> (usize, bool) {
        let (mut m, mut w) = (Masks::default(), 0);
        let src = piece.as_ptr();
        let len = piece.len();
        let mut i = 0;
        // Two blocks at a time share one mask computation.
        while i + 2 * BLOCK < len {
            // SAFETY: i + 65 <= len, so the loads are inside `piece`; the bytes written so far
            // are at most those read, and `dst` has room for a block more than `piece`.
            unsafe {
                let (low, low_slash, low_known) = prepare(
                    _mm256_loadu_si256(src.add(i).cast::<__m256i>()),
                    _mm256_loadu_si256(src.add(i + 1).cast::<__m256i>()),
                );
                let (high, high_slash, high_known) = prepare(
                    _mm256_loadu_si256(src.add(i + BLOCK).cast::<__m256i>()),
                    _mm256_loadu_si256(src.add(i + BLOCK + 1).cast::<__m256i>()),
                );
                m = masks::<64>(
                    u64::from(low_slash) | u64::from(high_slash) << 32,
                    u64::from(low_known) | u64::from(high_known) << 32,
                    m,
                );
                let keep = !m.dropped;
                w += store(low, keep as u32, dst.add(w));
                w += store(high, (keep >> 32) as u32, dst.add(w));
            }
            i += 2 * BLOCK;
        }
        if i + BLOCK < len {
            // SAFETY: as above, with i + 33 <= len.
            unsafe {
                let (v, slash, known) = prepare(
                    _mm256_loadu_si256(src.add(i).cast::<__m256i>()),
                    _mm256_loadu_si256(src.add(i + 1).cast::<__m256i>()),
                );
                m = masks::<32>(u64::from(slash), u64::from(known), m);
                w += store(v, !m.dropped as u32, dst.add(w));
            }
            i += BLOCK;
        }
        let rest = len - i;
        if rest == 0 {
            return (w, false);
        }
        let skip = (BLOCK - rest) as u32;
        // SAFETY: as above for `dst`. For the loads: when `piece` has a whole block, the last
        // block of it (overlapping bytes already done, which `skip` leaves out); otherwise a
        // copy padded with zeros.
        unsafe {
            let v = if len >= BLOCK {
                _mm256_loadu_si256(src.add(len - BLOCK).cast::<__m256i>())
            } else {
                let mut padded = [0u8; BLOCK];
                padded[skip as usize..].copy_from_slice(piece);
                _mm256_loadu_si256(padded.as_ptr().cast::<__m256i>())
            };
            // The byte after each byte, with a zero (no escape letter) after the last.
            let next = _mm256_alignr_epi8::<1>(_mm256_permute2x128_si256::<0x81>(v, v), v);
            let (v, slash, known) = prepare(v, next);
            // Masks count from the first byte not skipped.
            m = masks::<32>(u64::from(slash >> skip), u64::from(known >> skip), m);
            w += store(v, (!m.dropped as u32) << skip, dst.add(w));
        }
        // A final backslash that starts a pair was kept (its "letter" was the zero): hold it.
        let held = m.starts & (1 << (rest - 1)) != 0;
        (w - usize::from(held), held)
    }

    /// For the block `v` and `next` (the byte after each of its bytes): `v` with every
    /// backslash before a known letter replaced by what the pair decodes to, and the bit masks
    /// of backslashes and of bytes followed by a known letter.
    #[inline]
    #[target_feature(enable = "avx2,popcnt")]
    fn prepare(v: __m256i, next: __m256i) -> (__m256i, u32, u32) {
        let is_slash = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
        let next_low = _mm256_and_si256(next, _mm256_set1_epi8(0x0F));
        let is_known = _mm256_cmpeq_epi8(_mm256_shuffle_epi8(table(LETTERS), next_low), next);
        // Backslashes that are letters themselves (the second of `\\`) are dropped anyway.
        let v = _mm256_blendv_epi8(
            v,
            _mm256_shuffle_epi8(table(DECODED), next_low),
            _mm256_and_si256(is_slash, is_known),
        );
        (
            v,
            _mm256_movemask_epi8(is_slash) as u32,
            _mm256_movemask_epi8(is_known) as u32,
        )
    }

    /// Writes the bytes of `v` whose bit is set in `keep` to `dst`, in order; returns how many.
    ///
    /// # Safety
    /// `dst` is valid for writes of 32 bytes.
    #[inline]
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn store(v: __m256i, keep: u32, dst: *mut u8) -> usize {
        let group = |k: u32| COMPRESS[((keep >> (8 * k)) & 0xFF) as usize];
        // Shuffle indices of the odd 8-byte groups point into their lane's upper half.
        let upper = 0x0808_0808_0808_0808u64;
        let order = _mm256_set_epi64x(
            (group(3) | upper) as i64,
            group(2) as i64,
            (group(1) | upper) as i64,
            group(0) as i64,
        );
        let packed = _mm256_shuffle_epi8(v, order);
        let low = _mm256_castsi256_si128(packed);
        let high = _mm256_extracti128_si256::<1>(packed);
        let c0 = (keep & 0xFF).count_ones() as usize;
        let c1 = (keep & 0xFFFF).count_ones() as usize;
        let c2 = (keep & 0xFF_FFFF).count_ones() as usize;
        // SAFETY: the caller's promise; each 8-byte store ends within 32 bytes of `dst`.
        unsafe {
            _mm_storel_epi64(dst.cast::<__m128i>(), low);
            _mm_storeh_pd(dst.add(c0).cast::<f64>(), _mm_castsi128_pd(low));
            _mm_storel_epi64(dst.add(c1).cast::<__m128i>(), high);
            _mm_storeh_pd(dst.add(c2).cast::<f64>(), _mm_castsi128_pd(high));
        }
        keep.count_ones() as usize
    }

    /// Indexed by a byte's low nibble: the byte to escape with that nibble (no two share one),
    /// or 0xFF, which no byte that looks it up is...
    const ESCAPED_BY_NIBBLE: [u8; 16] = {
        let mut table = [0xFFu8; 16];
        let mut b = 0;
        while b < 256 {
            if super::ESCAPE[b] != 0 {
                assert!(
                    table[b & 0x0F] == 0xFF,
                    "two escaped bytes share a low nibble"
                );
                table[b & 0x0F] = b as u8;
            }
            b += 1;
        }
        table
    };
    /// ... and the letter that follows its backslash.
    const LETTER_BY_NIBBLE: [u8; 16] = {
        let mut table = [0u8; 16];
        let mut n = 0;
        while n < 16 {
            if ESCAPED_BY_NIBBLE[n] != 0xFF {
                table[n] = super::ESCAPE[ESCAPED_BY_NIBBLE[n] as usize];
            }
            n += 1;
        }
        table
    };

    /// For each 8-bit mask of bytes to escape, the shuffle that spreads 8 input bytes over
    /// their output slots: each escaped byte gets a slot before it, left empty (index 0x80, a
    /// zero) for its backslash, as are the slots after the last byte.
    static EXPAND: [[u8; 16]; 256] = {
        let mut table = [[0x80u8; 16]; 256];
        let mut mask = 0;
        while mask < 256 {
            let (mut slot, mut byte) = (0, 0);
            while byte < 8 {
                if mask & (1 << byte) != 0 {
                    slot += 1;
                }
                table[mask][slot] = byte as u8;
                slot += 1;
                byte += 1;
            }
            mask += 1;
        }
        table
    };

    /// Appends the escaped `bytes` to `out`, 16 bytes per step without a branch per escape;
    /// `false` (and nothing done) when the CPU lacks AVX2 or popcnt.
    ///
    /// For CPUs with AVX2 but not AVX-512, where the 16-byte scan that restarts after each
    /// escape took 52-59 us for 128 KiB of command output (an escape every ~15 bytes) and this
    /// kernel takes 18.5-19 us: the fastest of 2000 rounds, the two builds run in turns on an
    /// AMD EPYC (`cargo bench -p deskwire --bench oa1_codec`, `escape`, times one build).
    pub(super) fn escape(bytes: &[u8], out: &mut Vec<u8>) -> bool {
        if !available() {
            return false;
        }
        let whole = bytes.len() - bytes.len() % STEP;
        // SAFETY: AVX2 and popcnt were checked above; each step stores 32 bytes past its start.
        unsafe { escape_with(escape_blocks, &bytes[..whole], out) };
        super::escape_scalar(&bytes[whole..], out);
        true
    }

    /// Appends what an escaping `kernel` writes for `bytes` to `out`.
    ///
    /// # Safety
    /// The CPU runs `kernel`, which writes at most `2 * bytes.len() + wide::BLOCK` bytes to its
    /// destination (every byte may double) and returns how many it initialised.
    unsafe fn escape_with(
        kernel: unsafe fn(&[u8], *mut u8) -> usize,
        bytes: &[u8],
        out: &mut Vec<u8>,
    ) {
        out.reserve(2 * bytes.len() + wide::BLOCK);
        let start = out.len();
        // SAFETY: the caller's promise; `out` has room for that many bytes after `start`.
        unsafe {
            let written = kernel(bytes, out.as_mut_ptr().add(start));
            out.set_len(start + written);
        }
    }

    /// Bytes per step of [`escape_blocks`].
    const STEP: usize = 16;

    /// Escapes the whole steps of `bytes` to `dst` (the bytes after them are the caller's);
    /// returns the bytes written.
    ///
    /// Per 16 input bytes: a lookup by low nibble finds the bytes to escape, another turns them
    /// into their letters (after which no byte is zero), and the 16 bytes, copied into
    /// both 128-bit lanes, are spread by one shuffle: the lower lane's [`EXPAND`] entry places
    /// the first 8 bytes, the upper lane's the last 8. The slots left zero get a backslash; the
    /// lanes are stored one after the other.
    ///
    /// # Safety
    /// The CPU has AVX2 and popcnt; `dst` is valid for writes of `2 * bytes.len() + BLOCK`
    /// bytes.
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn escape_blocks(bytes: &[u8], dst: *mut u8) -> usize {
        use std::arch::x86_64::{
            _mm_blendv_epi8, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8, _mm_shuffle_epi8, _mm_storeu_si128, _mm256_broadcastsi128_si256,
            _mm256_castsi128_si256, _mm256_inserti128_si256, _mm256_or_si256, _mm256_setzero_si256,
        };
        let (nibbles, letters) = (
            _mm256_castsi256_si128(table(ESCAPED_BY_NIBBLE)),
            _mm256_castsi256_si128(table(LETTER_BY_NIBBLE)),
        );
        let (src, len) = (bytes.as_ptr(), bytes.len());
        let (mut i, mut w) = (0, 0);
        while i + STEP <= len {
            // SAFETY: the load reads bytes i..i + 16 of `bytes`; the stores write 16 bytes at
            // `w` and at `w + 8 + (escapes among the first 8)`, all below `w + 32`, and
            // `w <= 2 * i`, so within `2 * len + BLOCK` bytes of `dst`.
            unsafe {
                let v = _mm_loadu_si128(src.add(i).cast());
                // A byte with its high bit set looks up a zero, which it is not.
                let escaped = _mm_cmpeq_epi8(_mm_shuffle_epi8(nibbles, v), v);
                let special = _mm_movemask_epi8(escaped) as usize;
                let v = _mm_blendv_epi8(v, _mm_shuffle_epi8(letters, v), escaped);
                let (low, high) = (special & 0xFF, special >> 8);
                let order = _mm256_inserti128_si256::<1>(
                    _mm256_castsi128_si256(_mm_loadu_si128(EXPAND[low].as_ptr().cast())),
                    _mm_or_si128(
                        _mm_loadu_si128(EXPAND[high].as_ptr().cast()),
                        _mm_set1_epi8(8),
                    ),
                );
                let spread = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(v), order);
                let empty = _mm256_cmpeq_epi8(spread, _mm256_setzero_si256());
                let placed = _mm256_or_si256(
                    spread,
                    _mm256_and_si256(empty, _mm256_set1_epi8(b'\\' as i8)),
                );
                _mm_storeu_si128(dst.add(w).cast(), _mm256_castsi256_si128(placed));
                let w_high = w + 8 + low.count_ones() as usize;
                _mm_storeu_si128(
                    dst.add(w_high).cast(),
                    _mm256_extracti128_si256::<1>(placed),
                );
                w = w_high + 8 + high.count_ones() as usize;
            }
            i += STEP;
        }
        w
    }

    /// The same decoding 64 bytes per step with AVX-512: one masked compress (VBMI2) replaces
    /// the shuffle-table squeeze, and the masks come straight out of the compares.
    pub(super) mod wide {
        use std::arch::x86_64::{
            __m512i, _mm_set_epi64x, _mm512_and_si512, _mm512_broadcast_i32x4,
            _mm512_cmpeq_epi8_mask, _mm512_loadu_si512, _mm512_mask_blend_epi8,
            _mm512_maskz_compress_epi8, _mm512_maskz_expand_epi8, _mm512_maskz_loadu_epi8,
            _mm512_set1_epi8, _mm512_setzero_si512, _mm512_shuffle_epi8, _mm512_storeu_si512,
        };

        use super::{DECODED, LETTERS, Masks, masks};

        /// Bytes per block.
        pub(in super::super) const BLOCK: usize = 64;

        /// Whether the CPU runs [`blocks`].
        #[inline]
        pub(in super::super) fn available() -> bool {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vbmi2")
                && std::arch::is_x86_feature_detected!("popcnt")
        }

        /// A 16-byte table in all four 128-bit lanes.
        #[inline]
        #[target_feature(enable = "avx512f")]
        fn table(bytes: [u8; 16]) -> __m512i {
            let lo = i64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8]));
            let hi = i64::from_le_bytes(bytes[8..].try_into().unwrap_or([0; 8]));
            _mm512_broadcast_i32x4(_mm_set_epi64x(hi, lo))
        }

        /// Whether the CPU runs [`escape_blocks`] (BMI2's `pdep`/`pext` place the escapes).
        #[inline]
        fn escape_available() -> bool {
            available() && std::arch::is_x86_feature_detected!("bmi2")
        }

        /// Appends the escaped `bytes` to `out` 32 bytes per step; `false` (and nothing done)
        /// when the CPU lacks the features.
        ///
        /// Escaping took two thirds of OA1 encoding with the 16-byte scan that restarts after
        /// every escape (benches/oa1_codec.rs): command output has one every ~35 bytes.
        pub(in super::super) fn escape(bytes: &[u8], out: &mut Vec<u8>) -> bool {
            if !escape_available() {
                return false;
            }
            // SAFETY: the features were checked above; stores write a whole block past the
            // escaped end.
            unsafe { super::escape_with(escape_blocks, bytes, out) };
            true
        }

        /// Escapes `bytes` to `dst`; returns the bytes written.
        ///
        /// Per 32 input bytes: compares find the bytes to escape (bit mask `s`), a table lookup
        /// turns them into their letters, and every input byte gets one output slot, two for an
        /// escaped one (its backslash first). `pdep` spreads `s` over the even bits of 64 slot
        /// candidates (odd bits: the byte itself, always there), `pext` of the odd bits over
        /// that presence mask marks which output slots hold input bytes, a VBMI2 expand puts the
        /// bytes there, and backslashes fill the other slots.
        ///
        /// # Safety
        /// The CPU has AVX-512 F/BW/VBMI2, BMI2 and popcnt; `dst` is valid for writes of
        /// `2 * bytes.len() + BLOCK` bytes.
        #[target_feature(enable = "avx512f,avx512bw,avx512vbmi2,bmi2,popcnt")]
        unsafe fn escape_blocks(bytes: &[u8], dst: *mut u8) -> usize {
            use std::arch::x86_64::{_pdep_u64, _pext_u64};
            const STEP: usize = 32;
            const EVEN: u64 = 0x5555_5555_5555_5555;
            const ODD: u64 = !EVEN;
            let letters = table(super::super::ESCAPE_LETTERS);
            let (src, len) = (bytes.as_ptr(), bytes.len());
            let (mut i, mut w) = (0, 0);
            while i < len {
                let n = (len - i).min(STEP);
                let here = u64::MAX >> (64 - n);
                // SAFETY: the masked load reads bytes i..i + n of `bytes` only; the store writes
                // 64 bytes at `w`, and `w + 64 <= 2 * i + 64 <= 2 * len + BLOCK`.
                let escaped = unsafe {
                    let v = _mm512_maskz_loadu_epi8(here, src.add(i).cast());
                    let backslash = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
                    let control = _mm512_cmpeq_epi8_mask(v, _mm512_setzero_si512())
                        | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\t' as i8))
                        | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\n' as i8))
                        | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\r' as i8));
                    let special = (backslash | control) & here;
                    // Control bytes are below 16, so their value indexes the letter table.
                    let v = _mm512_mask_blend_epi8(control, v, _mm512_shuffle_epi8(letters, v));
                    let present = _pdep_u64(special, EVEN) | ODD;
                    let byte_slots = _pext_u64(ODD, present);
                    let placed = _mm512_mask_blend_epi8(
                        byte_slots,
                        _mm512_set1_epi8(b'\\' as i8),
                        _mm512_maskz_expand_epi8(byte_slots, v),
                    );
                    _mm512_storeu_si512(dst.add(w).cast(), placed);
                    special.count_ones() as usize
                };
                w += n + escaped;
                i += n;
            }
            w
        }

        /// Decodes `piece` to `dst`; returns the bytes written and whether the last backslash
        /// was held back (see `super::blocks`).
        ///
        /// # Safety
        /// `dst` is valid for writes of `piece.len() + BLOCK` bytes.
        #[target_feature(enable = "avx512f,avx512bw,avx512vbmi2,popcnt")]
        pub(in super::super) unsafe fn blocks(piece: &[u8], dst: *mut u8) -> (usize, bool) {
            let (mut m, mut w) = (Masks::default(), 0);
            let src = piece.as_ptr();
            let len = piece.len();
            let (letters, decoded) = (table(LETTERS), table(DECODED));
            let mut i = 0;
            loop {
                let rest = len - i;
                // Masked loads read only the bytes inside `piece` (the rest are zero, which is
                // no backslash and no letter), so the last block needs no copy.
                if rest == 0 {
                    return (w, false);
                }
                let (here, after) = if rest > BLOCK {
                    (u64::MAX, u64::MAX)
                } else {
                    // `rest` bytes from `i`, `rest - 1` from `i + 1`.
                    let here = u64::MAX >> (BLOCK - rest);
                    (here, here >> 1)
                };
                // SAFETY: the masks select bytes i..len of `piece` only; writes stay within
                // `w + BLOCK <= i + BLOCK <= piece.len() + BLOCK` bytes of `dst`.
                unsafe {
                    let (v, next) = if rest > BLOCK {
                        (
                            _mm512_loadu_si512(src.add(i).cast()),
                            _mm512_loadu_si512(src.add(i + 1).cast()),
                        )
                    } else {
                        (
                            _mm512_maskz_loadu_epi8(here, src.add(i).cast()),
                            _mm512_maskz_loadu_epi8(after, src.add(i + 1).cast()),
                        )
                    };
                    let slash = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
                    let next_low = _mm512_and_si512(next, _mm512_set1_epi8(0x0F));
                    let known =
                        _mm512_cmpeq_epi8_mask(_mm512_shuffle_epi8(letters, next_low), next);
                    let v = _mm512_mask_blend_epi8(
                        slash & known,
                        v,
                        _mm512_shuffle_epi8(decoded, next_low),
                    );
                    m = masks::<64>(slash, known, m);
                    let keep = !m.dropped & here;
                    _mm512_storeu_si512(dst.add(w).cast(), _mm512_maskz_compress_epi8(keep, v));
                    w += keep.count_ones() as usize;
                }
                if rest <= BLOCK {
                    // A final backslash that starts a pair was kept (its "letter" was the zero):
                    // hold it.
                    let held = m.starts & (1 << (rest - 1)) != 0;
                    return (w - usize::from(held), held);
                }
                i += BLOCK;
            }
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

    #[test]
    fn word_masks_are_exact() {
        for b in 0..=255u8 {
            for filler in [b'a', 0, 0xff, b'\\', 13, 14, 0x80, 0x7f, 0x8e] {
                for pos in 0..8 {
                    let mut chunk = [filler; 8];
                    chunk[pos] = b;
                    for (k, &byte) in chunk.iter().enumerate() {
                        let bit = 1u32 << k;
                        let special = block::swar::specials(&chunk) & bit != 0;
                        assert_eq!(special, byte < 14 || byte == b'\\', "{byte} at {k}");
                        assert_eq!(block::swar::backslashes(&chunk) & bit != 0, byte == b'\\');
                    }
                }
            }
        }
    }

    /// The decoding rules one byte at a time, as plainly as they can be written.
    fn unescape_reference(escaped: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < escaped.len() {
            match (escaped[i], escaped.get(i + 1)) {
                (b'\\', Some(&letter)) => {
                    match letter {
                        b'\\' => out.push(b'\\'),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'0' => out.push(0),
                        b's' => out.push(b' '),
                        other => out.extend([b'\\', other]),
                    }
                    i += 2;
                }
                (b, _) => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        out
    }

    /// Bytes rich in backslashes, escape letters and their near misses.
    fn escape_heavy() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            prop_oneof![
                4 => Just(b'\\'),
                1 => proptest::sample::select(b"nrt0sxN\\ \x1c\xff\xdcl".to_vec()),
                2 => any::<u8>(),
            ],
            0..200,
        )
    }

    #[test]
    fn backslash_runs_of_every_length_and_phase() {
        for lead in 0..20 {
            for run in 0..40 {
                for letter in [b'n', b'x', b'a', b'\\'] {
                    let mut input = vec![b'a'; lead];
                    input.extend(std::iter::repeat_n(b'\\', run));
                    input.push(letter);
                    input.extend([b'b'; 20]);
                    assert_eq!(unescape(&input), unescape_reference(&input), "{lead} {run}");
                }
            }
        }
    }

    /// The masks of one block of `width` bytes, found walking its bytes.
    #[cfg(target_arch = "x86_64")]
    fn masks_by_walking(
        width: usize,
        slash: u64,
        known_next: u64,
        prev: simd::Masks,
    ) -> simd::Masks {
        let mut m = simd::Masks {
            dropped: u64::from(prev.drop_next),
            ..Default::default()
        };
        let mut k = usize::from(prev.letter_next);
        while k < width {
            if slash & (1 << k) == 0 {
                k += 1;
                continue;
            }
            m.starts |= 1 << k;
            let known = known_next & (1 << k) != 0;
            if known {
                m.decoded |= 1 << k;
            }
            if k == width - 1 {
                (m.letter_next, m.drop_next) = (true, known);
            } else if known {
                m.dropped |= 1 << (k + 1);
            }
            k += 2;
        }
        m
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn block_masks_match_a_byte_walk() {
        // Every backslash pattern of 16 bytes, at both ends of a block and in its middle, with
        // and without a letter carried in.
        let u32_bits = |x: u64| x & 0xFFFF_FFFF;
        for pattern in 0u64..0x1_0000 {
            for wide in [
                pattern,
                pattern << 16,
                pattern << 48,
                pattern | 0xFFFF_FFFF_0000,
                pattern * 0x1_0001_0001_0001,
            ] {
                for (letter_next, drop_next) in [(false, false), (true, false), (true, true)] {
                    let prev = simd::Masks {
                        letter_next,
                        drop_next,
                        ..Default::default()
                    };
                    for known in [
                        0u64,
                        u64::MAX,
                        0x5A5A_A5A5_5A5A_A5A5,
                        !pattern.rotate_right(7),
                    ] {
                        assert_eq!(
                            simd::masks::<64>(wide, known, prev),
                            masks_by_walking(64, wide, known, prev),
                            "{wide:#x} {known:#x} {prev:?}"
                        );
                        let (slash, known) = (u32_bits(wide), u32_bits(known));
                        assert_eq!(
                            simd::masks::<32>(slash, known, prev),
                            masks_by_walking(32, slash, known, prev),
                            "{slash:#x} {known:#x} {prev:?}"
                        );
                    }
                }
            }
        }
    }

    /// Bytes rich in what escaping changes and in bytes that look like it to a lookup by low
    /// nibble (0x19, 0x1A, 0x1D, 0x89, 0x5C's neighbours).
    fn escape_targets() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            prop_oneof![
                3 => proptest::sample::select(b"\\\n\r\t\0".to_vec()),
                1 => proptest::sample::select(b"\x01\x08\x0b\x0c\x0e\x0f\x10\x19\x1a\x1d\x5b\x5d\x80\x89\xff a".to_vec()),
                2 => any::<u8>(),
            ],
            0..200,
        )
    }

    proptest! {
        #[test]
        fn escape_kernels_agree(
            bytes in prop_oneof![escape_heavy(), escape_targets()],
            prefix in "[a-z]{0,3}",
        ) {
            let mut scalar = prefix.clone().into_bytes();
            escape_scalar(&bytes, &mut scalar);
            let expected: Vec<u8> = prefix
                .bytes()
                .chain(bytes.iter().flat_map(|&b| match ESCAPE[b as usize] {
                    0 => vec![b],
                    letter => vec![b'\\', letter],
                }))
                .collect();
            prop_assert_eq!(&scalar, &expected);
            #[cfg(target_arch = "x86_64")]
            {
                let mut wide = prefix.clone().into_bytes();
                if simd::wide::escape(&bytes, &mut wide) {
                    prop_assert_eq!(&wide, &expected);
                }
                let mut avx2 = prefix.into_bytes();
                if simd::escape(&bytes, &mut avx2) {
                    prop_assert_eq!(&avx2, &expected);
                }
            }
        }

        #[cfg(target_arch = "x86_64")]
        #[test]
        fn every_simd_kernel_matches_the_reference(bytes in escape_heavy(), held_at in 0usize..2) {
            // Both kernels, whichever this CPU would pick, on a piece and on its prefix that
            // may end in a held backslash.
            for kernel in [simd::Kernel::Avx2, simd::Kernel::Avx512] {
                let piece = &bytes[..bytes.len().saturating_sub(held_at)];
                let mut out = b"prefix".to_vec();
                let Some(held) = simd::unescape_with(kernel, piece, &mut out) else {
                    continue;
                };
                let mut expected = b"prefix".to_vec();
                let mut scalar = expected.clone();
                let scalar_held = feed_scalar(piece, &mut scalar);
                expected.extend(unescape_reference(piece));
                if held {
                    out.push(b'\\');
                }
                if scalar_held {
                    scalar.push(b'\\');
                }
                prop_assert_eq!(held, scalar_held, "{:?}", kernel);
                prop_assert_eq!(&out, &expected, "{:?}", kernel);
                prop_assert_eq!(&scalar, &expected);
            }
        }

        #[test]
        fn unescape_matches_the_reference(bytes in escape_heavy()) {
            prop_assert_eq!(unescape(&bytes), unescape_reference(&bytes));
        }

        /// The path CPUs without AVX2 take (the SIMD one is what `unescape` runs here).
        #[test]
        fn scalar_feed_matches_the_reference(bytes in escape_heavy()) {
            let mut out = b"kept".to_vec();
            let held = feed_scalar(&bytes, &mut out);
            if held {
                out.push(b'\\');
            }
            let mut expected = b"kept".to_vec();
            expected.extend(unescape_reference(&bytes));
            prop_assert_eq!(out, expected);
        }

        #[test]
        fn feeding_in_pieces_matches_the_reference(bytes in escape_heavy(), cuts in proptest::collection::vec(0usize..200, 0..6)) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort();
            let mut out = b"kept".to_vec();
            let mut d = Unescaper::default();
            let mut last = 0;
            for c in cuts.into_iter().chain([bytes.len()]) {
                d.feed(&bytes[last..c], &mut out);
                last = c;
            }
            d.finish(&mut out);
            let mut expected = b"kept".to_vec();
            expected.extend(unescape_reference(&bytes));
            prop_assert_eq!(out, expected);
        }

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
