//! Bearer tokens, their constant-time check, and scrubbing secrets from what goes to logs.
//!
//! The spec asks for a mandatory, rotatable bearer token and "logs com scrub de secrets" (logs
//! with secrets scrubbed). A [`Token`] never prints itself; [`redact_value`] replaces every
//! `auth` object and every value under a key that names a secret; [`redact_line`] does the same
//! for raw text and never echoes text it cannot parse (it might be a token).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use subtle::ConstantTimeEq;

/// What a scrubbed secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// A bearer token. `Debug` and `Display` print [`REDACTED`]; only serialisation (the wire) and
/// [`Token::expose`] give the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token.
    pub fn new(text: impl Into<String>) -> Self {
        Token(text.into())
    }

    /// The token text, for the wire. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` equals this token, in constant time (see [`constant_time_eq`]).
    pub fn matches(&self, presented: &str) -> bool {
        constant_time_eq(presented.as_bytes(), self.0.as_bytes())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({REDACTED})")
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Token {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Token {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Token)
    }
}

/// Compares a presented secret with the expected one in constant time (the `subtle` crate):
/// the time depends on the lengths only (tokens and codes have public, fixed lengths), never on
/// where the first difference is. An empty `expected` never matches.
pub fn constant_time_eq(presented: &[u8], expected: &[u8]) -> bool {
    !expected.is_empty() && bool::from(presented.ct_eq(expected))
}

/// Whether a JSON key names something secret (case-insensitive: `token`, `secret`,
/// `password`, `passwd`, `apikey`/`api_key`, `authorization`, `cookie`, `credential`,
/// `privatekey`/`private_key`, and `auth` itself).
pub fn is_sensitive_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase().replace(['_', '-'], "");
    lower == "auth"
        || [
            "token",
            "secret",
            "password",
            "passwd",
            "apikey",
            "authorization",
            "cookie",
            "credential",
            "privatekey",
        ]
        .iter()
        .any(|word| lower.contains(word))
}

/// Replaces, in place, every value under a sensitive key (see [`is_sensitive_key`]) with
/// [`REDACTED`]; an `auth` object keeps its keys so logs still show which credential was sent.
pub fn redact_value(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                if key == "auth"
                    && let Value::Object(fields) = inner
                {
                    for field in fields.values_mut() {
                        *field = Value::String(REDACTED.to_owned());
                    }
                } else if is_sensitive_key(key) {
                    *inner = Value::String(REDACTED.to_owned());
                } else {
                    redact_value(inner);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_value),
        _ => {}
    }
}

/// Formats a JSON object for `Debug` with secrets scrubbed (used by the `Debug` impls of
/// types that carry free-form JSON: results, error details, untyped payloads).
pub struct RedactedMap<'a>(pub &'a Map<String, Value>);

impl fmt::Debug for RedactedMap<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut value = Value::Object(self.0.clone());
        redact_value(&mut value);
        write!(f, "{value}")
    }
}

/// A log-safe form of a raw message: compact JSON with secrets scrubbed, or, when the bytes are
/// not JSON, only their length (unparsed text may hold a token).
pub fn redact_line(bytes: &[u8]) -> String {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(mut value) => {
            redact_value(&mut value);
            value.to_string()
        }
        Err(_) => format!("[unparseable message, {} bytes]", bytes.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cres", b"s3cret"));
        assert!(!constant_time_eq(b"s3cre", b"s3cret"));
        assert!(!constant_time_eq(b"s3crett", b"s3cret"));
        assert!(!constant_time_eq(b"s3crets3cret", b"s3cret"));
        assert!(!constant_time_eq(b"", b"s3cret"));
        assert!(!constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"x", b""));
        // Length 256 apart: a truncating length compare would call these equal.
        let long = vec![b'a'; 256 + 1];
        assert!(!constant_time_eq(&long, b"a"));
    }

    #[test]
    fn token_never_prints() {
        let t = Token::new("hunter2");
        assert_eq!(format!("{t:?} {t}"), "Token([REDACTED]) [REDACTED]");
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"hunter2\"");
        assert!(t.matches("hunter2") && !t.matches("hunter3"));
    }

    #[test]
    fn scrubs() {
        let line = br#"{"auth":{"token":"hunter2"},"payload":{"apiKey":"k","nested":[{"GITHUB_TOKEN":"t"}],"goal":"x"}}"#;
        let out = redact_line(line);
        assert!(!out.contains("hunter2") && !out.contains("\"k\"") && !out.contains("\"t\""));
        assert!(out.contains("\"goal\":\"x\""));
        assert!(out.contains("\"token\":\"[REDACTED]\""));
        assert_eq!(
            redact_line(b"token hunter2"),
            "[unparseable message, 13 bytes]"
        );
    }
}
