//! Device-code binding, as the VR Offices game binds a desk to a machine: the remote's daemon
//! prints a code, the player types it into the desk's "Bind Device Code…" menu, the game joins
//! a channel whose name carries the code (`#oa_desk_<desk>_dev_<code>_<6 hex>`), and the daemon
//! finds that channel by polling `LIST` ([`super::MultiRemote::discover`]).
//!
//! The code names the channel; it proves nothing. Anyone who can `LIST` the server sees it, so
//! the security of `rexd --irc` (a secret, an account, or an accepted risk) still decides who is
//! served.

use std::fmt;

/// The alphabet of generated codes: RFC 4648 base32, no look-alike digits 0, 1, 8, 9.
const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
/// The length of a generated code.
pub const GENERATED_LEN: usize = 10;
/// The shortest valid code.
pub const MIN_LEN: usize = 6;
/// The longest valid code.
pub const MAX_LEN: usize = 16;
/// The longest nick the daemon takes from its code (RFC 1459's 9).
const NICK_LEN: usize = 9;

/// A device code in canonical form: 6 to 16 of `[0-9A-Z]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceCode(String);

/// Why a code was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a device code is {MIN_LEN} to {MAX_LEN} letters and digits once spaces and punctuation are \
     dropped; {given:?} has {len}"
)]
pub struct InvalidDeviceCode {
    /// What was given.
    pub given: String,
    /// How many letters and digits it has.
    pub len: usize,
}

impl DeviceCode {
    /// A new code of 10 characters from `entropy` (take it from the OS: `getrandom`); each
    /// character takes 5 bits of one byte.
    pub fn generate(entropy: [u8; GENERATED_LEN]) -> DeviceCode {
        DeviceCode(
            entropy
                .iter()
                .map(|b| char::from(ALPHABET[usize::from(b & 31)]))
                .collect(),
        )
    }

    /// Reads a code as a player may type it: trimmed, ASCII letters and digits kept, upper
    /// case. `" ab-cd 12 34 "` is `ABCD1234`.
    pub fn parse(text: &str) -> Result<DeviceCode, InvalidDeviceCode> {
        let code: String = text
            .trim()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_uppercase())
            .collect();
        match code.len() {
            MIN_LEN..=MAX_LEN => Ok(DeviceCode(code)),
            len => Err(InvalidDeviceCode {
                given: text.to_owned(),
                len,
            }),
        }
    }

    /// The code, canonical.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The daemon's nick by default: `oa` and the code in lower case, cut to 9 bytes.
    pub fn nick(&self) -> String {
        let mut nick = format!("oa{}", self.0.to_ascii_lowercase());
        nick.truncate(NICK_LEN);
        nick
    }

    /// Whether `channel` is a desk channel bound to this code: its lower-cased name starts
    /// with `#oa_` and holds `_dev_<code>` followed by `_` or the end of the name
    /// (`#oa_desk_desk_1_dev_abcd1234_1a2b3c`; not `..._dev_abcd1234x_...`).
    pub fn matches(&self, channel: &str) -> bool {
        let name = channel.to_ascii_lowercase();
        if !name.starts_with("#oa_") {
            return false;
        }
        let needle = format!("_dev_{}", self.0.to_ascii_lowercase());
        name.match_indices(&needle).any(|(at, _)| {
            let rest = &name[at + needle.len()..];
            rest.is_empty() || rest.starts_with('_')
        })
    }
}

impl fmt::Display for DeviceCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for DeviceCode {
    type Err = InvalidDeviceCode;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        DeviceCode::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_codes_are_ten_of_the_alphabet_and_valid() {
        let code = DeviceCode::generate([0, 1, 25, 26, 31, 32, 255, 7, 100, 200]);
        assert_eq!(code.as_str(), "ABZ27A7HEI");
        assert_eq!(DeviceCode::parse(code.as_str()), Ok(code));
    }

    #[test]
    fn codes_are_canonical_and_bounded() {
        assert_eq!(
            DeviceCode::parse(" ab-cd 12 34 ").unwrap().as_str(),
            "ABCD1234"
        );
        assert_eq!(DeviceCode::parse("abc12").unwrap_err().len, 5);
        assert!(DeviceCode::parse(&"A".repeat(17)).is_err());
        assert!(DeviceCode::parse(&"A".repeat(16)).is_ok());
        // Letters beyond ASCII are not part of a code.
        assert_eq!(DeviceCode::parse("ÄBCDEFG").unwrap().as_str(), "BCDEFG");
    }

    #[test]
    fn the_nick_is_oa_and_the_code_cut_to_nine() {
        assert_eq!(DeviceCode::parse("ABCD1234EF").unwrap().nick(), "oaabcd123");
        assert_eq!(DeviceCode::parse("ABC123").unwrap().nick(), "oaabc123");
    }

    #[test]
    fn channels_match_on_the_whole_code() {
        let code = DeviceCode::parse("ABCD1234").unwrap();
        assert!(code.matches("#oa_desk_desk_1_dev_abcd1234_1a2b3c"));
        assert!(code.matches("#OA_DESK_X_DEV_ABCD1234"));
        assert!(code.matches("#oa_x_dev_abcd12345_1_dev_abcd1234_ff"));
        assert!(
            !code.matches("#oa_desk_desk_1_dev_abcd1234x_1a2b3c"),
            "a longer code"
        );
        assert!(
            !code.matches("#oa_desk_desk_1_dev_abcd123_1a2b3c"),
            "a shorter code"
        );
        assert!(
            !code.matches("#desk_dev_abcd1234_1a2b3c"),
            "not a game channel"
        );
        assert!(!code.matches("#oa_desk_desk_1_abcd1234_1a2b3c"));
    }
}
