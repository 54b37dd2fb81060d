//! Who a peer is: nick syntax, and the pattern an endpoint accepts frames from.
//!
//! An IRC nick is not an identity: once its owner quits, anyone may take it. A
//! [`SenderPattern`] can therefore also name the user and host the server shows for the peer
//! (`rexd!~rexd@10.0.0.7`, `desk!*@*.example.net`), which a stranger on another host cannot
//! copy. Only a shared secret (see `oa1::auth`) proves who sent a frame; `docs/oa1.md` says what
//! each choice protects against.

use super::{CaseMapping, Source};

/// The longest nick a configuration may name. Servers set their own limit (ngircd: 9 by
/// default, most networks 30); a longer nick is refused with `432` when registering.
pub const MAX_NICK_LEN: usize = 30;

/// Why a nick or a sender pattern cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidName {
    /// Not a nick by RFC 2812's grammar, or longer than [`MAX_NICK_LEN`].
    #[error(
        "invalid nick {0:?}: 1 to 30 characters, a letter or one of []\\`_^{{|}} first, then \
         letters, digits, those or '-'"
    )]
    Nick(String),
    /// Not `*`, a nick, `nick!user@host` or `account:NAME`.
    #[error(
        "invalid sender {0:?}: a nick, a mask nick!user@host (user and host may use * and ?), \
         account:NAME (a services account), or * for anyone"
    )]
    Pattern(String),
}

fn is_special(b: u8) -> bool {
    matches!(
        b,
        b'[' | b']' | b'\\' | b'`' | b'_' | b'^' | b'{' | b'|' | b'}'
    )
}

/// Checks `nick` against RFC 2812's grammar (`( letter / special ) *( letter / digit / special
/// / "-" )`) and [`MAX_NICK_LEN`].
pub fn validate_nick(nick: &str) -> Result<(), InvalidName> {
    let bytes = nick.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= MAX_NICK_LEN
        && (bytes[0].is_ascii_alphabetic() || is_special(bytes[0]))
        && bytes[1..]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || is_special(b) || b == b'-');
    match valid {
        true => Ok(()),
        false => Err(InvalidName::Nick(nick.to_owned())),
    }
}

/// Whom an endpoint takes frames from (its `allowed_sender`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SenderPattern {
    /// `*`: anyone in the channel but ourselves.
    Anyone,
    /// A nick: whoever holds it.
    Nick(String),
    /// `nick!user@host`: that nick, shown with a user and host that match (`*` any run of
    /// characters, `?` one character, letters in either case).
    Mask {
        /// The nick, exact (no wildcards: its presence in the channel is watched).
        nick: String,
        /// The user pattern (servers show a `~` before users they did not verify).
        user: String,
        /// The host pattern.
        host: String,
    },
    /// `account:NAME`: whoever the server says is logged in to that services account (the
    /// IRCv3 `account` tag on each message, which the session asks for). The server's word, as
    /// far as the server and its links are trusted; a message without the tag (no account,
    /// logged out, a server that does not send it) never matches.
    Account(String),
}

impl SenderPattern {
    /// Reads `*`, a nick, or `nick!user@host`.
    pub fn parse(text: &str) -> Result<Self, InvalidName> {
        if text == "*" {
            return Ok(SenderPattern::Anyone);
        }
        let invalid = || InvalidName::Pattern(text.to_owned());
        if let Some(account) = text.strip_prefix("account:") {
            let plain = !account.is_empty()
                && account.len() <= 64
                && !account
                    .bytes()
                    .any(|b| b <= b' ' || matches!(b, b'!' | b'@' | b',' | b'*' | b'?' | 0x7f));
            return match plain {
                true => Ok(SenderPattern::Account(account.to_owned())),
                false => Err(invalid()),
            };
        }
        let Some((nick, rest)) = text.split_once('!') else {
            validate_nick(text).map_err(|_| invalid())?;
            return Ok(SenderPattern::Nick(text.to_owned()));
        };
        let (user, host) = rest.split_once('@').ok_or_else(invalid)?;
        let part_ok = |p: &str| {
            !p.is_empty()
                && !p
                    .bytes()
                    .any(|b| b <= b' ' || matches!(b, b'!' | b'@' | b',' | 0x7f))
        };
        validate_nick(nick).map_err(|_| invalid())?;
        if !part_ok(user) || !part_ok(host) {
            return Err(invalid());
        }
        Ok(SenderPattern::Mask {
            nick: nick.to_owned(),
            user: user.to_owned(),
            host: host.to_owned(),
        })
    }

    /// The nick whose presence in the channel tells whether the peer can hear us (none for
    /// [`SenderPattern::Anyone`]).
    pub fn nick(&self) -> Option<&str> {
        match self {
            SenderPattern::Anyone | SenderPattern::Account(_) => None,
            SenderPattern::Nick(nick) | SenderPattern::Mask { nick, .. } => Some(nick),
        }
    }

    /// Whether a message from `nick`, shown as `user@host` (when the server gave them), comes
    /// from the pattern's sender. A mask never matches a source without user and host.
    pub fn matches(
        &self,
        casemap: CaseMapping,
        nick: &str,
        user_host: Option<(&str, &str)>,
    ) -> bool {
        match self {
            SenderPattern::Anyone => true,
            // Needs the message's account: see `matches_message`.
            SenderPattern::Account(_) => false,
            SenderPattern::Nick(want) => casemap.eq(nick, want),
            SenderPattern::Mask {
                nick: want,
                user,
                host,
            } => {
                casemap.eq(nick, want)
                    && user_host.is_some_and(|(u, h)| {
                        wildcard_match(user.as_bytes(), u.as_bytes())
                            && wildcard_match(host.as_bytes(), h.as_bytes())
                    })
            }
        }
    }

    /// [`SenderPattern::matches`] for a parsed message source.
    pub fn matches_source(&self, casemap: CaseMapping, source: &Source<'_>) -> bool {
        let user_host = source.user.zip(source.host);
        self.matches(casemap, source.nick, user_host)
    }

    /// [`SenderPattern::matches_source`] with the account the message says its sender is
    /// logged in to (its `account` tag), which an `account:` pattern needs. Accounts compare
    /// as nicks do (the server's case mapping).
    pub fn matches_message(
        &self,
        casemap: CaseMapping,
        source: &Source<'_>,
        account: Option<&str>,
    ) -> bool {
        match self {
            SenderPattern::Account(want) => account.is_some_and(|a| casemap.eq(a, want)),
            _ => self.matches_source(casemap, source),
        }
    }

    /// Whether the pattern needs each message's account (the `account-tag` capability).
    pub fn needs_accounts(&self) -> bool {
        matches!(self, SenderPattern::Account(_))
    }
}

impl std::fmt::Display for SenderPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SenderPattern::Anyone => f.write_str("*"),
            SenderPattern::Nick(nick) => f.write_str(nick),
            SenderPattern::Mask { nick, user, host } => write!(f, "{nick}!{user}@{host}"),
            SenderPattern::Account(account) => write!(f, "account:{account}"),
        }
    }
}

/// `*` and `?` glob matching, ASCII case-insensitive, without backtracking blow-up (the classic
/// two-pointer walk: linear in practice, `O(p·t)` at worst, with both sides under 512 bytes).
fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c.eq_ignore_ascii_case(&text[t]) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nicks_follow_rfc_2812() {
        for ok in [
            "desk", "rexd", "a", "desk_", "[bot]", "x-1", "Desk`2", "{a}|b^",
        ] {
            assert_eq!(validate_nick(ok), Ok(()), "{ok}");
        }
        for bad in [
            "", "a b", "1desk", "-x", "de,sk", "#desk", "d:x", "é", "a!b", "a@b",
        ] {
            assert!(validate_nick(bad).is_err(), "{bad:?}");
        }
        assert!(validate_nick(&"a".repeat(MAX_NICK_LEN)).is_ok());
        assert!(validate_nick(&"a".repeat(MAX_NICK_LEN + 1)).is_err());
    }

    #[test]
    fn patterns_parse() {
        assert_eq!(SenderPattern::parse("*"), Ok(SenderPattern::Anyone));
        assert_eq!(
            SenderPattern::parse("rexd"),
            Ok(SenderPattern::Nick("rexd".into()))
        );
        assert_eq!(
            SenderPattern::parse("rexd!~rexd@10.0.0.*"),
            Ok(SenderPattern::Mask {
                nick: "rexd".into(),
                user: "~rexd".into(),
                host: "10.0.0.*".into()
            })
        );
        for bad in [
            "", "a b", "rexd!", "rexd!u", "rexd!@h", "rexd!u@", "re*d!u@h", "!u@h", "a!b c@h",
        ] {
            assert!(SenderPattern::parse(bad).is_err(), "{bad:?}");
        }
        let mask = SenderPattern::parse("desk!*@*.example.net").unwrap();
        assert_eq!(mask.to_string(), "desk!*@*.example.net");
        assert_eq!(mask.nick(), Some("desk"));
        assert_eq!(SenderPattern::Anyone.nick(), None);
    }

    #[test]
    fn masks_match_nick_user_and_host() {
        let cm = CaseMapping::default();
        let mask = SenderPattern::parse("desk!~desk@10.0.0.?").unwrap();
        assert!(mask.matches(cm, "desk", Some(("~desk", "10.0.0.7"))));
        assert!(mask.matches(cm, "DESK", Some(("~DESK", "10.0.0.7"))));
        assert!(!mask.matches(cm, "desk", Some(("~desk", "10.0.0.17"))));
        assert!(!mask.matches(cm, "desk", Some(("~eve", "10.0.0.7"))));
        assert!(!mask.matches(cm, "eve", Some(("~desk", "10.0.0.7"))));
        assert!(
            !mask.matches(cm, "desk", None),
            "no user@host shown: no match"
        );
        let nick = SenderPattern::parse("desk").unwrap();
        assert!(nick.matches(cm, "Desk", None));
        assert!(nick.matches(cm, "desk", Some(("~eve", "evil.example"))));
        assert!(SenderPattern::Anyone.matches(cm, "eve", None));
    }

    #[test]
    fn wildcards() {
        let m = |p: &str, t: &str| wildcard_match(p.as_bytes(), t.as_bytes());
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("a*c", "abbbc"));
        assert!(m("*.example.net", "host.EXAMPLE.net"));
        assert!(!m("*.example.net", "example.net"));
        assert!(m("?x*", "ax"));
        assert!(!m("?x*", "x"));
        assert!(m("a*b*c", "a-b-b-c"));
        assert!(!m("a*b*c", "a-b-b-d"));
        // Pathological patterns stay bounded.
        let text = "a".repeat(500);
        assert!(m(&"*a".repeat(200), &text));
        assert!(!m(&format!("{}b", "*a".repeat(200)), &text));
    }
}
