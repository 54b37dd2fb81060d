//! Who may talk to `rexd --listen`: bearer tokens from a file, client certificates (mTLS), or
//! both; and what the audit log calls the client.
//!
//! The token file has one token a line, `LABEL:TOKEN`, or `LABEL:TOKEN:SCOPE`; the label names
//! the client in the audit log (`principal`), and the scope says what the token may do: `all`
//! (the default) or `metrics` (only `GET /metrics`, for a Prometheus scraper). Blank lines and
//! lines starting with `#` are skipped. Tokens are at least
//! 16 bytes; labels are `[A-Za-z0-9._@-]{1,64}`. The file must not be readable by group or
//! others (as ssh insists for private keys), since whoever reads it can run commands.
//!
//! A presented token is hashed (SHA-256) and compared with every configured token's hash in
//! constant time, without stopping at a match, so neither the position of a difference nor the
//! matching entry shows in the time taken.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The shortest token accepted.
pub const MIN_TOKEN_BYTES: usize = 16;

/// What is wrong with a token file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenFileError {
    /// It could not be read.
    #[error("--token-file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Group or others may read it.
    #[error(
        "--token-file {path}: readable by group or others (mode {mode:o}); `chmod 600` it: whoever \
         reads it can run commands"
    )]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    /// A line does not parse.
    #[error("--token-file {path} line {line}: {reason}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// No token in it.
    #[error("--token-file {path}: no token in it (one `LABEL:TOKEN` a line)")]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything a client may do (`all`, the default).
    All,
    /// Only `GET /metrics` (`metrics`).
    Metrics,
}

impl Scope {
    fn parse(word: &str) -> Option<Scope> {
        match word {
            "all" => Some(Scope::All),
            "metrics" => Some(Scope::Metrics),
            _ => None,
        }
    }
}

/// The configured tokens, hashed.
#[derive(Clone)]
pub struct Tokens {
    entries: Vec<(String, [u8; 32], Scope)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let labels: Vec<&str> = self.entries.iter().map(|(l, _, _)| l.as_str()).collect();
        f.debug_struct("Tokens").field("labels", &labels).finish()
    }
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

fn label_ok(label: &str) -> bool {
    (1..=64).contains(&label.len())
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b))
}

impl Tokens {
    /// Reads and checks a token file.
    pub fn load(path: &Path) -> Result<Tokens, TokenFileError> {
        let read = |source| TokenFileError::Read {
            path: path.to_owned(),
            source,
        };
        if let Some(mode) = crate::sys::open_to_others(path).map_err(read)? {
            return Err(TokenFileError::Permissions {
                path: path.to_owned(),
                mode,
            });
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        Tokens::parse(&text, path)
    }

    /// Parses token file text; `path` only names the source in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Tokens, TokenFileError> {
        let mut entries: Vec<(String, [u8; 32], Scope)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let bad = |reason: &str| TokenFileError::Line {
                path: path.to_owned(),
                line: n + 1,
                reason: reason.to_owned(),
            };
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (label, token) = line
                .split_once(':')
                .ok_or_else(|| bad("expected LABEL:TOKEN or LABEL:TOKEN:SCOPE"))?;
            // A last `:WORD` that is a scope's name is the scope (a token is hex or base64).
            let (token, scope) = match token.rsplit_once(':') {
                Some((t, word)) if word.bytes().all(|b| b.is_ascii_lowercase()) => {
                    match Scope::parse(word) {
                        Some(scope) => (t, scope),
                        None => {
                            return Err(bad(&format!(
                                "unknown scope {word:?}: a token's scope is all (the default) or metrics"
                            )));
                        }
                    }
                }
                _ => (token, Scope::All),
            };
            if !label_ok(label) {
                return Err(bad("the label must be 1-64 of [A-Za-z0-9._@-]"));
            }
            if token.len() < MIN_TOKEN_BYTES {
                return Err(bad(&format!(
                    "the token is shorter than {MIN_TOKEN_BYTES} bytes (make one with `openssl rand -hex 32`)"
                )));
            }
            if token
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
            {
                return Err(bad("the token holds whitespace or control characters"));
            }
            if entries.iter().any(|(l, _, _)| l == label) {
                return Err(bad(&format!("label {label:?} is used twice")));
            }
            let hash = digest(token.as_bytes());
            // One token under two labels: which one its holder is (the audit's principal,
            // `[[policy.clients]]`, revocation) would be a guess.
            if let Some((first, _, _)) = entries.iter().find(|(_, h, _)| *h == hash) {
                return Err(bad(&format!(
                    "the token of label {label:?} is also the token of {first:?}: give each \
                     client its own (`openssl rand -hex 32`)"
                )));
            }
            entries.push((label.to_owned(), hash, scope));
        }
        if entries.is_empty() {
            return Err(TokenFileError::Empty {
                path: path.to_owned(),
            });
        }
        Ok(Tokens { entries })
    }

    /// The label and scope of the token `presented` is, if any; constant time in the token's
    /// content.
    pub fn check(&self, presented: &[u8]) -> Option<(&str, Scope)> {
        let want = digest(presented);
        let mut found: Option<(&str, Scope)> = None;
        for (label, hash, scope) in &self.entries {
            // No early exit: every entry is compared whatever matched before.
            if bool::from(hash.ct_eq(&want)) {
                found = Some((label, *scope));
            }
        }
        found
    }
}

impl Tokens {
    /// The labels of this file's tokens that `new` no longer accepts as they were: removed,
    /// given another token, or another scope. Their holders' sessions end on a reload.
    pub fn revoked_by(&self, new: &Tokens) -> Vec<String> {
        self.entries
            .iter()
            .filter(|(label, hash, scope)| {
                !new.entries
                    .iter()
                    .any(|(l, h, s)| l == label && h == hash && s == scope)
            })
            .map(|(label, _, _)| label.clone())
            .collect()
    }
}

/// The bearer token of an `Authorization` header value (`Bearer TOKEN`, scheme
/// case-insensitive).
pub fn bearer(header: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = header.split_at(header.iter().position(|&b| b == b' ')?);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_removed_changed_or_rescoped_is_revoked() {
        let parse = |text: &str| Tokens::parse(text, Path::new("t")).unwrap();
        let old = parse(
            "keep:0123456789abcdef0123\ngone:1111222233334444\n\
             changed:5555666677778888\nscoped:9999aaaabbbbcccc\n",
        );
        let new = parse(
            "keep:0123456789abcdef0123\nchanged:5555666677778889\n\
             scoped:9999aaaabbbbcccc:metrics\nadded:ddddeeeeffff0000\n",
        );
        assert_eq!(old.revoked_by(&new), ["gone", "changed", "scoped"]);
        assert!(new.revoked_by(&new).is_empty());
        assert!(crate::hub::holds_token("keep", "keep"));
        assert!(crate::hub::holds_token("keep (CN=a)", "keep"));
        assert!(!crate::hub::holds_token("keeper", "keep"));
        assert!(!crate::hub::holds_token("CN=keep", "keep"));
    }

    #[test]
    fn scopes_follow_the_token() {
        let t = Tokens::parse(
            "a:0123456789abcdef0123:metrics\nb:fedcba9876543210fedc:all\nc:0000111122223333\n",
            Path::new("t"),
        )
        .unwrap();
        assert_eq!(
            t.check(b"0123456789abcdef0123"),
            Some(("a", Scope::Metrics))
        );
        assert_eq!(t.check(b"fedcba9876543210fedc"), Some(("b", Scope::All)));
        assert_eq!(t.check(b"0000111122223333"), Some(("c", Scope::All)));
        // The scope is not part of the token.
        assert_eq!(t.check(b"0123456789abcdef0123:metrics"), None);
        let e = Tokens::parse("a:0123456789abcdef0123:root\n", Path::new("t")).unwrap_err();
        assert!(e.to_string().contains("unknown scope \"root\""), "{e}");
    }

    #[test]
    fn tokens_parse_and_match_by_label() {
        let t = Tokens::parse(
            "# clients\n\nalice:0123456789abcdef0123\n bob:fedcba9876543210fedc \n",
            Path::new("t"),
        )
        .unwrap();
        assert_eq!(
            t.check(b"0123456789abcdef0123"),
            Some(("alice", Scope::All))
        );
        assert_eq!(t.check(b"fedcba9876543210fedc"), Some(("bob", Scope::All)));
        assert_eq!(t.check(b"0123456789abcdef012"), None);
        assert_eq!(t.check(b""), None);
    }

    #[test]
    fn bad_token_files_say_which_line() {
        for (text, want) in [
            ("", "no token"),
            ("# only a comment\n", "no token"),
            ("justatoken0123456789\n", "line 1: expected LABEL:TOKEN"),
            ("a:short\n", "shorter than 16"),
            ("bad label:0123456789abcdef\n", "label"),
            (":0123456789abcdef\n", "label"),
            (
                "a:0123456789abcdef\na:0123456789abcdeg\n",
                "line 2: label \"a\" is used twice",
            ),
            (
                "a:0123456789abcdef\nb:0123456789abcdef:metrics\n",
                "line 2: the token of label \"b\" is also the token of \"a\"",
            ),
            ("a:0123456789abcdef\u{7}\n", "control"),
        ] {
            let e = Tokens::parse(text, Path::new("tok"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn world_readable_token_files_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, "a:0123456789abcdef\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Tokens::load(&path).unwrap_err().to_string();
        assert!(e.contains("mode 644") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Tokens::load(&path).is_ok());
    }

    #[test]
    fn bearer_headers() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearer"), None);
        assert_eq!(bearer(b"Bearer "), None);
    }
}
