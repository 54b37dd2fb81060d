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

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether any of the 8 bytes in `word` needs escaping: a byte below 14 (NUL, TAB, LF, CR are
/// all below 14) or a backslash. Exact as a yes/no (the classic "has less than" and "has zero
/// byte" bit tricks), so 8 plain bytes are skipped with a few instructions.
#[inline]
fn word_needs_escape(word: u64) -> bool {
    let below_14 = word.wrapping_sub(ONES * 14) & !word & HIGHS;
    let backslashes = word ^ (ONES * u64::from(b'\\'));
    let has_backslash = backslashes.wrapping_sub(ONES) & !backslashes & HIGHS;
    (below_14 | has_backslash) != 0
}

/// Appends the escaped form of `text` to `out`.
pub fn escape_into(text: &str, out: &mut String) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + bytes.len() / 32);
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(word) = bytes.get(i..i + 8) {
            let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            if !word_needs_escape(word) {
                i += 8;
                continue;
            }
        }
        let end = (i + 8).min(bytes.len());
        for (j, &b) in bytes[i..end].iter().enumerate() {
            let letter = ESCAPE[b as usize];
            if letter != 0 {
                // Escaped bytes are ASCII, so `copied..i + j` ends on a char boundary.
                out.push_str(&text[copied..i + j]);
                out.push('\\');
                out.push(letter as char);
                copied = i + j + 1;
            }
        }
        i = end;
    }
    out.push_str(&text[copied..]);
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
    pub fn feed(&mut self, mut piece: &[u8], out: &mut Vec<u8>) {
        out.reserve(piece.len());
        if self.held_backslash {
            let Some((&first, rest)) = piece.split_first() else {
                return;
            };
            self.held_backslash = false;
            push_escape(first, out);
            piece = rest;
        }
        while let Some(pos) = memchr::memchr(b'\\', piece) {
            out.extend_from_slice(&piece[..pos]);
            match piece.get(pos + 1) {
                Some(&letter) => {
                    push_escape(letter, out);
                    piece = &piece[pos + 2..];
                }
                None => {
                    self.held_backslash = true;
                    return;
                }
            }
        }
        out.extend_from_slice(piece);
    }

    /// Ends the stream: a held lone backslash is kept as a backslash.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.held_backslash) {
            out.push(b'\\');
        }
    }
}

#[inline]
fn push_escape(letter: u8, out: &mut Vec<u8>) {
    match letter {
        b'\\' => out.push(b'\\'),
        b'n' => out.push(b'\n'),
        b'r' => out.push(b'\r'),
        b't' => out.push(b'\t'),
        b'0' => out.push(0),
        b's' => out.push(b' '),
        other => out.extend_from_slice(&[b'\\', other]),
    }
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
    fn word_check_matches_the_table() {
        for b in 0..=255u8 {
            for pos in 0..8 {
                let mut word = [b'a'; 8];
                word[pos] = b;
                let needs = ESCAPE[b as usize] != 0 || b < 14;
                assert_eq!(
                    word_needs_escape(u64::from_le_bytes(word)),
                    needs,
                    "{b} at {pos}"
                );
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
