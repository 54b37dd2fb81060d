//! Byte-safe chunking of escaped payloads (`docs/oa1.md`, "Chunking").
//!
//! The payload is escaped first and then cut, so every frame's escaped payload fits the budget.
//! A cut never lands inside a UTF-8 sequence and never between the two bytes of an escape pair.
//!
//! No frame payload ends with a space either: IRC servers trim trailing whitespace from the lines
//! they receive (ngircd's `ngt_TrimStr`), which would silently drop it. A cut moves back before
//! trailing spaces so they start the next chunk instead; a chunk that is all spaces, or that ends
//! the text with one, carries its last space as `\s` (IRCv3's escape for a space), see
//! [`wire_payload`].

use std::borrow::Cow;

use super::escape::splits_escape_pair;

/// The smallest payload budget that always makes progress (a 4-byte UTF-8 sequence).
pub const MIN_PAYLOAD_BUDGET: usize = 4;

/// A payload budget below [`MIN_PAYLOAD_BUDGET`]: a 4-byte character could never be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "a payload budget of {0} bytes is too small: chunks need at least {MIN_PAYLOAD_BUDGET} \
     (one 4-byte UTF-8 character, or an escape pair)"
)]
pub struct BudgetTooSmall(pub usize);

/// `budget` when it is at least [`MIN_PAYLOAD_BUDGET`]. [`split`] raises a smaller budget to
/// that floor; a host-facing chunker refuses it instead, so no chunk is ever over the budget
/// the host asked for.
pub fn check_budget(budget: usize) -> Result<usize, BudgetTooSmall> {
    match budget >= MIN_PAYLOAD_BUDGET {
        true => Ok(budget),
        false => Err(BudgetTooSmall(budget)),
    }
}

/// The furthest end after `start` within `budget` bytes that splits neither a UTF-8 sequence
/// nor an escape pair (spaces are the callers' concern).
fn fit(escaped: &str, start: usize, budget: usize) -> usize {
    debug_assert!(budget >= MIN_PAYLOAD_BUDGET);
    let mut end = escaped.len();
    if end - start > budget {
        end = start + budget;
        while !escaped.is_char_boundary(end) {
            end -= 1;
        }
        if splits_escape_pair(escaped.as_bytes(), start, end) {
            end -= 1;
        }
    }
    end
}

/// The end of the chunk of `escaped` that starts at `start` and holds at most `budget` bytes.
///
/// `start` must itself be a valid cut (0 or an end returned earlier), and `budget` at least
/// [`MIN_PAYLOAD_BUDGET`]; the returned end is then greater than `start` unless the text is used up.
pub fn cut(escaped: &str, start: usize, budget: usize) -> usize {
    let mut end = fit(escaped, start, budget);
    if end > start && escaped.as_bytes()[end - 1] == b' ' {
        let kept = escaped[start..end].trim_end_matches(' ').len();
        let last = end == escaped.len();
        if kept > 0 && (!last || end - start + 1 > budget) {
            // The spaces start the next chunk (a leading space survives the server).
            end = start + kept;
        } else if end - start + 1 > budget {
            // All spaces: leave room for the last one to travel as `\s`.
            end -= 1;
        }
    }
    end
}

/// The payload as it goes on the wire: a chunk that ends with a space carries that space as `\s`.
pub fn wire_payload(chunk: &str) -> Cow<'_, str> {
    match chunk.strip_suffix(' ') {
        Some(rest) => Cow::Owned(format!("{rest}\\s")),
        None => Cow::Borrowed(chunk),
    }
}

/// Splits a whole escaped payload into chunks; `budget(seq)` gives the payload budget of the
/// frame numbered `seq` (it shrinks as the seq gains digits). An empty payload is one empty chunk.
pub fn split(escaped: &str, budget: impl FnMut(u32) -> usize) -> Vec<&str> {
    split_with(escaped, budget, |start, budget| cut(escaped, start, budget))
}

/// [`cut`] for a peer that decodes only the spec's escapes, so no `\s`: trailing spaces move
/// to the next frame as ever; when the text ends with spaces they stay raw in the last frame
/// (a server that trims lines eats them, as it would a spec-only sender's), and while more text
/// is to come (`complete` false) they wait for it: the end returned is then `start` when the
/// rest is all spaces. Only a run of spaces longer than a whole frame still ends one.
pub fn cut_spec(escaped: &str, start: usize, budget: usize, complete: bool) -> usize {
    let end = fit(escaped, start, budget);
    if end > start && escaped.as_bytes()[end - 1] == b' ' {
        let kept = escaped[start..end].trim_end_matches(' ').len();
        let text_end = end == escaped.len();
        if text_end && complete {
            return end;
        }
        if kept > 0 {
            return start + kept;
        }
        if text_end {
            return start;
        }
    }
    end
}

/// [`split`] for a peer that decodes only the spec's escapes (see [`cut_spec`]); the chunks go on
/// the wire as they are, without [`wire_payload`].
pub fn split_spec(escaped: &str, budget: impl FnMut(u32) -> usize) -> Vec<&str> {
    split_with(escaped, budget, |start, budget| {
        cut_spec(escaped, start, budget, true)
    })
}

fn split_with(
    escaped: &str,
    mut budget: impl FnMut(u32) -> usize,
    cut: impl Fn(usize, usize) -> usize,
) -> Vec<&str> {
    let mut chunks = Vec::with_capacity(escaped.len() / 200 + 1);
    let mut start = 0;
    let mut seq = 1u32;
    loop {
        let end = cut(start, budget(seq).max(MIN_PAYLOAD_BUDGET));
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

    #[test]
    fn budgets_below_the_floor_are_refused_not_raised() {
        for budget in 0..MIN_PAYLOAD_BUDGET {
            assert_eq!(check_budget(budget), Err(BudgetTooSmall(budget)));
        }
        assert_eq!(check_budget(MIN_PAYLOAD_BUDGET), Ok(MIN_PAYLOAD_BUDGET));
        // The floor is real: at 4 every chunk of a 4-byte character and of escapes fits.
        let escaped = escape("\u{1F600}\n\\é");
        assert!(split(&escaped, |_| 4).iter().all(|c| c.len() <= 4));
        let err = BudgetTooSmall(1).to_string();
        assert!(
            err.contains("budget of 1 bytes") && err.contains("at least 4"),
            "{err}"
        );
    }
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

    #[test]
    fn no_chunk_ends_with_a_space_on_the_wire() {
        assert_eq!(split("abc de", |_| 4), vec!["abc", " de"]);
        assert_eq!(split("ab  cdef", |_| 4), vec!["ab", "  cd", "ef"]);
        assert_eq!(split("         ", |_| 4), vec!["   ", "   ", "   "]);
        assert_eq!(wire_payload("   "), "  \\s");
        assert_eq!(split("x ", |_| 4), vec!["x "]);
        assert_eq!(wire_payload("x "), "x\\s");
        assert_eq!(wire_payload("x"), "x");
        assert_eq!(unescape(wire_payload("a  ").as_bytes()), b"a  ".to_vec());
    }

    #[test]
    fn spec_chunks_carry_spaces_raw_and_only_the_last_may_end_with_them() {
        assert_eq!(split_spec("abc de", |_| 4), vec!["abc", " de"]);
        assert_eq!(split_spec("ab  cdef", |_| 4), vec!["ab", "  cd", "ef"]);
        assert_eq!(split_spec("x ", |_| 4), vec!["x "]);
        assert_eq!(split_spec("ab cd  ", |_| 4), vec!["ab c", "d  "]);
        // Streaming: spaces at the end wait for more text, or for the end.
        assert_eq!(cut_spec("foo  ", 0, 10, false), 3);
        assert_eq!(cut_spec("foo  ", 3, 10, false), 3, "nothing to send yet");
        assert_eq!(cut_spec("foo  ", 3, 10, true), 5);
        // A run longer than a frame cannot help ending one, nor can one that does not fit in a
        // frame with the character after it.
        assert_eq!(split_spec("a      b", |_| 4), vec!["a", "    ", "  b"]);
        let cut = split_spec("      €a", |_| 8);
        assert_eq!(cut.concat(), "      €a");
        assert!(cut.iter().all(|chunk| chunk.len() <= 8), "{cut:?}");
    }

    proptest! {
        #[test]
        fn a_spec_only_decoder_reads_spec_chunks_back(
            text in "[ a\\\n\t€]{0,60}[a€]",
            budget in 8usize..16,
        ) {
            // Runs of spaces that fit in a frame with the character after them (the 3 bytes of
            // a `€`), and text that does not end in a space: what a server that trims each line
            // delivers is then exactly the text.
            prop_assume!(!text.contains(&" ".repeat(budget - 1)));
            prop_assume!(!text.contains(&format!("{}€", " ".repeat(budget - 3))));
            let escaped = escape(&text);
            let mut rejoined = String::new();
            for chunk in split_spec(&escaped, |_| budget) {
                prop_assert!(chunk.len() <= budget);
                prop_assert!(!chunk.ends_with(' '), "{:?}", chunk);
                rejoined.push_str(&crate::oa1::escape::unescape_v40(chunk));
            }
            prop_assert_eq!(rejoined, text);
        }

        #[test]
        fn wire_payloads_fit_never_end_in_a_space_and_rejoin(
            text in "[ a\\\n€]{0,60}",
            budget in 4usize..12,
        ) {
            let escaped = escape(&text);
            let mut rejoined = Vec::new();
            for chunk in split(&escaped, |_| budget) {
                let wire = wire_payload(chunk);
                prop_assert!(wire.len() <= budget, "{:?} over {}", wire, budget);
                prop_assert!(!wire.ends_with(' '));
                rejoined.extend(unescape(wire.as_bytes()));
            }
            prop_assert_eq!(rejoined, text.as_bytes().to_vec());
        }

        #[test]
        fn chunks_fit_and_rejoin(text in any::<String>(), budget in 4usize..40) {
            let escaped = escape(&text);
            let chunks = split(&escaped, |_| budget);
            let mut rejoined = Vec::new();
            for chunk in &chunks {
                let wire = wire_payload(chunk);
                prop_assert!(wire.len() <= budget);
                // each chunk decodes on its own: no pair was split
                rejoined.extend(unescape(wire.as_bytes()));
            }
            prop_assert_eq!(rejoined, text.as_bytes().to_vec());
        }
    }
}
