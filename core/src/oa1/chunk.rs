//! Byte-safe chunking of escaped payloads (spec §4, DESIGN "OA1 decisions" 3).
//!
//! The payload is escaped first and then cut, so every frame's escaped payload fits the budget.
//! A cut never lands inside a UTF-8 sequence and never between the two bytes of an escape pair.

use super::escape::splits_escape_pair;

/// The smallest payload budget that always makes progress (a 4-byte UTF-8 sequence).
pub const MIN_PAYLOAD_BUDGET: usize = 4;

/// The end of the chunk of `escaped` that starts at `start` and holds at most `budget` bytes.
///
/// `start` must itself be a valid cut (0 or an end returned earlier), and `budget` at least
/// [`MIN_PAYLOAD_BUDGET`]; the returned end is then greater than `start` unless the text is used up.
pub fn cut(escaped: &str, start: usize, budget: usize) -> usize {
    debug_assert!(budget >= MIN_PAYLOAD_BUDGET);
    if escaped.len() - start <= budget {
        return escaped.len();
    }
    let mut end = start + budget;
    while !escaped.is_char_boundary(end) {
        end -= 1;
    }
    if splits_escape_pair(escaped.as_bytes(), start, end) {
        end -= 1;
    }
    end
}

/// Splits a whole escaped payload into chunks; `budget(seq)` gives the payload budget of the
/// frame numbered `seq` (it shrinks as the seq gains digits). An empty payload is one empty chunk.
pub fn split(escaped: &str, mut budget: impl FnMut(u32) -> usize) -> Vec<&str> {
    let mut chunks = Vec::with_capacity(escaped.len() / 200 + 1);
    let mut start = 0;
    let mut seq = 1u32;
    loop {
        let end = cut(escaped, start, budget(seq).max(MIN_PAYLOAD_BUDGET));
        chunks.push(&escaped[start..end]);
        if end == escaped.len() {
            return chunks;
        }
        start = end;
        seq += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oa1::escape::{escape, unescape};
    use proptest::prelude::*;

    #[test]
    fn never_splits_a_code_point_or_escape_pair() {
        let text = "€€€€";
        assert_eq!(split(text, |_| 4), vec!["€", "€", "€", "€"]);
        let escaped = escape("a\nb\nc");
        assert_eq!(escaped, "a\\nb\\nc");
        assert_eq!(split(&escaped, |_| 4), vec!["a\\nb", "\\nc"]);
        // A cut at 5 would leave "a\\nb\\" with a lone escape start: it moves back one byte.
        assert_eq!(split(&escaped, |_| 5), vec!["a\\nb", "\\nc"]);
        assert_eq!(split("ab\\\\cd", |_| 4), vec!["ab\\\\", "cd"]);
        assert_eq!(split("a\\\\cd", |_| 4), vec!["a\\\\c", "d"]);
        assert_eq!(split("abc\\\\d", |_| 4), vec!["abc", "\\\\d"]);
        assert_eq!(split("", |_| 10), vec![""]);
        assert_eq!(split("abcd", |_| 4), vec!["abcd"]);
        assert_eq!(split("abcde", |_| 4), vec!["abcd", "e"]);
    }

    proptest! {
        #[test]
        fn chunks_fit_and_rejoin(text in any::<String>(), budget in 4usize..40) {
            let escaped = escape(&text);
            let chunks = split(&escaped, |_| budget);
            let mut rejoined = Vec::new();
            for chunk in &chunks {
                prop_assert!(chunk.len() <= budget);
                // each chunk decodes on its own: no pair was split
                rejoined.extend(unescape(chunk.as_bytes()));
            }
            prop_assert_eq!(rejoined, text.as_bytes().to_vec());
        }
    }
}
