//! IRC case mapping: which nicks and channel names are the same name.
//!
//! Servers announce the mapping in `ISUPPORT CASEMAPPING`; `rfc1459` (the default) also folds
//! `[]\~` onto `{}|^`, `strict-rfc1459` folds `[]\` only, `ascii` folds letters only.

/// A case mapping from `ISUPPORT CASEMAPPING`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CaseMapping {
    /// `A-Z` onto `a-z` only.
    Ascii,
    /// `A-Z[]\~` onto `a-z{}|^` (the RFC 1459 default).
    #[default]
    Rfc1459,
    /// `A-Z[]\` onto `a-z{}|`.
    StrictRfc1459,
}

impl CaseMapping {
    /// The mapping named by an ISUPPORT token value; unknown names fall back to RFC 1459.
    pub fn from_isupport(name: &str) -> Self {
        match name {
            "ascii" => CaseMapping::Ascii,
            "strict-rfc1459" => CaseMapping::StrictRfc1459,
            _ => CaseMapping::Rfc1459,
        }
    }

    /// Folds one byte to its lower-case form under this mapping.
    pub fn fold_byte(self, b: u8) -> u8 {
        match (self, b) {
            (_, b'A'..=b'Z') => b + 32,
            (CaseMapping::Rfc1459 | CaseMapping::StrictRfc1459, b'[' | b']' | b'\\') => b + 32,
            (CaseMapping::Rfc1459, b'~') => b'^',
            _ => b,
        }
    }

    /// Whether two names are equal under this mapping.
    pub fn eq(self, a: &str, b: &str) -> bool {
        // Byte-identical names are the common case (the same peer's nick, line after line).
        a == b
            || a.len() == b.len()
                && a.bytes()
                    .zip(b.bytes())
                    .all(|(x, y)| self.fold_byte(x) == self.fold_byte(y))
    }

    /// The folded (lower-case) form of a name, for use as a map key.
    pub fn fold(self, name: &str) -> String {
        // Only ASCII bytes change, so the result stays valid UTF-8.
        let bytes = name.bytes().map(|b| self.fold_byte(b)).collect();
        String::from_utf8(bytes).expect("folding maps ASCII to ASCII")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1459_folds_brackets_and_tilde() {
        let m = CaseMapping::Rfc1459;
        assert!(m.eq("#Desk[1]", "#desk{1}"));
        assert!(m.eq("Nick\\~", "nick|^"));
        assert!(!m.eq("#desk", "#desk2"));
        assert_eq!(m.fold("Ab[]\\~ü"), "ab{}|^ü");
    }

    #[test]
    fn strict_and_ascii() {
        assert!(!CaseMapping::StrictRfc1459.eq("~", "^"));
        assert!(CaseMapping::StrictRfc1459.eq("[", "{"));
        assert!(!CaseMapping::Ascii.eq("[", "{"));
        assert!(CaseMapping::Ascii.eq("ABC", "abc"));
        assert_eq!(CaseMapping::from_isupport("ascii"), CaseMapping::Ascii);
        assert_eq!(CaseMapping::from_isupport("weird"), CaseMapping::Rfc1459);
    }
}
