//! Authenticated frames: OA1 with a shared secret, which v40 leaves for later ("add a shared
//! secret or signature"); `docs/oa1.md`, "Authenticated frames", has the same rules with a
//! worked example.
//!
//! # Wire format
//!
//! With a secret configured on both ends every frame goes out as
//!
//! ```text
//! OA1A <TS> <TAG> <TYPE> <REQ_ID> <SEQ> <MORE>[ <PAYLOAD>]
//! ```
//!
//! - `TS`: when the frame was sent, Unix time in milliseconds, in lower-case base 36 (8 digits
//!   until 2059). A sender's `TS` only grows: two frames sent in the same millisecond get
//!   consecutive values.
//! - `TAG`: the first 16 bytes of `HMAC-SHA256(secret, "OA1A" 0x00 CHANNEL 0x00 TS 0x00 INNER)`
//!   in unpadded base64url (22 characters), where `CHANNEL` is the desk channel folded with
//!   RFC 1459 case mapping and `INNER` is the rest of the text after `TAG ` exactly as sent:
//!   type, request id, seq, more and the escaped payload.
//! - After the tag, the frame is a v40 frame without its `OA1 ` word, so everything but the
//!   header is unchanged.
//!
//! The marker word is `OA1A`, not `OA1`: a v40 endpoint (no secret) ignores these lines as not
//! OA1, and an endpoint with a secret ignores v40 frames, so a secret on one end only means that
//! nothing is accepted, in either direction. The stats say why: `unauthenticated` (a plain frame
//! reached an end with a secret) and `auth_unexpected` (an `OA1A` frame reached an end without).
//!
//! # What the receiver checks, before reassembly
//!
//! 1. The tag, in constant time. A wrong tag (forged, altered, another channel, another key) is
//!    dropped and counted in `forged`; a forged chunk can therefore never take the place of a
//!    real one.
//! 2. The age: `TS` must be within `max_skew_ms` (default 60 s) of the receiver's own clock, in
//!    either direction, else the frame is dropped and counted in `expired`. The two ends' clocks
//!    must agree within that window (NTP does far better); a desk whose clock is off by more sees
//!    every answer expire, and the remote's stats show `expired` for every request, which is
//!    what to look for. A larger `max_skew_ms` tolerates worse clocks at the price of a longer
//!    memory (below).
//! 3. Replay: every accepted tag is remembered until its `TS` leaves the window; the same tag
//!    again is a replay, dropped and counted in `replayed`. A captured `REQ` replayed later is
//!    either still remembered (replayed) or out of the window (expired): it never runs twice.
//!    The memory holds at most `max_remembered` tags (default 65 536, about 2 MiB); past that the
//!    oldest is forgotten early, which only matters for a peer that sends more than that many
//!    frames within one window.
//!
//! The host passes `epoch_unix_ms`, the Unix time at its `now_ms == 0`, so the engine stays
//! free of clocks: wall time is `epoch_unix_ms + now`.

use std::collections::{HashSet, VecDeque};
use std::fmt;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The marker word of authenticated frames.
pub const MARKER: &str = "OA1A";

/// Bytes of the truncated HMAC carried in a frame.
pub const TAG_BYTES: usize = 16;

/// Characters of the tag on the wire (unpadded base64url of [`TAG_BYTES`]).
pub const TAG_CHARS: usize = 22;

/// The most base-36 digits a timestamp takes (Unix ms fit 9 digits until the year 5188).
pub const MAX_TS_CHARS: usize = 9;

/// Extra bytes an authenticated frame takes over the v40 frame with the same content, at most:
/// `OA1A` for `OA1`, and ` <TS> <TAG>`.
pub const OVERHEAD: usize = 1 + 1 + MAX_TS_CHARS + 1 + TAG_CHARS;

/// The longest [`SealPrefix`]: `OA1A <TS> <TAG> ` with a 13-digit timestamp (a `u64`'s most).
const SEAL_PREFIX_MAX: usize = MARKER.len() + 1 + 13 + 1 + TAG_CHARS + 1;

/// `OA1A <TS> <TAG> `: what a sealed frame starts with in place of `OA1 `.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SealPrefix {
    bytes: [u8; SEAL_PREFIX_MAX],
    len: usize,
}

impl SealPrefix {
    fn push(&mut self, part: &[u8]) {
        self.bytes[self.len..self.len + part.len()].copy_from_slice(part);
        self.len += part.len();
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).expect("ASCII")
    }
}

/// The shared-secret configuration of an endpoint. Both ends need the same secret.
///
/// As JSON: `{"secret": "text", "epoch_unix_ms": 1790000000000, "max_skew_ms": 60000,
/// "max_remembered": 65536}`; the secret is the UTF-8 bytes of the string, and only `secret` and
/// `epoch_unix_ms` are required.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The shared secret (any bytes; 32 random bytes are plenty).
    #[serde(with = "secret_text")]
    pub secret: Vec<u8>,
    /// The Unix time in milliseconds at the host's `now_ms == 0`.
    pub epoch_unix_ms: u64,
    /// How far a frame's timestamp may be from our clock, either way.
    #[serde(default = "default_max_skew_ms")]
    pub max_skew_ms: u64,
    /// How many accepted tags are remembered against replays at most.
    #[serde(default = "default_max_remembered")]
    pub max_remembered: usize,
}

fn default_max_skew_ms() -> u64 {
    60_000
}

fn default_max_remembered() -> usize {
    65_536
}

impl AuthConfig {
    /// `secret`, with the host's clock at Unix time `epoch_unix_ms` when its `now_ms` is 0, and
    /// the default window and memory.
    pub fn new(secret: impl Into<Vec<u8>>, epoch_unix_ms: u64) -> Self {
        AuthConfig {
            secret: secret.into(),
            epoch_unix_ms,
            max_skew_ms: default_max_skew_ms(),
            max_remembered: default_max_remembered(),
        }
    }
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("secret", &format_args!("<{} bytes>", self.secret.len()))
            .field("epoch_unix_ms", &self.epoch_unix_ms)
            .field("max_skew_ms", &self.max_skew_ms)
            .field("max_remembered", &self.max_remembered)
            .finish()
    }
}

/// The secret as a JSON string (its UTF-8 bytes).
mod secret_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(secret: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&String::from_utf8_lossy(secret))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        Ok(String::deserialize(d)?.into_bytes())
    }
}

/// Why an inbound line was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not `OA1A` with a well-formed timestamp and tag.
    Malformed,
    /// The tag does not match.
    Forged,
    /// The timestamp is outside the window.
    Expired,
    /// The tag was seen before.
    Replayed,
}

/// Seals outgoing frames and opens incoming ones for one endpoint.
#[derive(Clone)]
pub(crate) struct Authenticator {
    config: AuthConfig,
    key: Hmac<Sha256>,
    /// The folded channel, as the tag covers it.
    channel: Vec<u8>,
    last_sent_ts: u64,
    seen: HashSet<[u8; TAG_BYTES]>,
    /// Accepted tags in arrival order, with the wall time at which each may be forgotten.
    expiries: VecDeque<(u64, [u8; TAG_BYTES])>,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("config", &self.config)
            .field("remembered", &self.seen.len())
            .finish()
    }
}

impl Authenticator {
    pub(crate) fn new(config: AuthConfig, channel: &str) -> Self {
        let key = <Hmac<Sha256> as Mac>::new_from_slice(&config.secret)
            .expect("HMAC takes keys of any length");
        Authenticator {
            key,
            channel: crate::irc::CaseMapping::Rfc1459.fold(channel).into_bytes(),
            last_sent_ts: 0,
            seen: HashSet::new(),
            expiries: VecDeque::new(),
            config,
        }
    }

    fn wall(&self, now: u64) -> u64 {
        self.config.epoch_unix_ms.saturating_add(now)
    }

    fn tag(&self, ts: &[u8], inner: &[u8]) -> Hmac<Sha256> {
        let mut mac = self.key.clone();
        mac.update(MARKER.as_bytes());
        mac.update(&[0]);
        mac.update(&self.channel);
        mac.update(&[0]);
        mac.update(ts);
        mac.update(&[0]);
        mac.update(inner);
        mac
    }

    /// The authenticated text for the v40 frame text `frame` (`OA1 TYPE ...`), sent at `now`
    /// (the link seals its lines where they lie, with [`Authenticator::seal_prefix`]).
    #[cfg(test)]
    pub(crate) fn seal(&mut self, now: u64, frame: &str) -> String {
        let inner = frame.strip_prefix("OA1 ").unwrap_or(frame);
        let prefix = self.seal_prefix(now, inner);
        let mut out = String::with_capacity(prefix.as_str().len() + inner.len());
        out.push_str(prefix.as_str());
        out.push_str(inner);
        out
    }

    /// What the authenticated form of the frame whose text after `OA1 ` is `inner` starts with
    /// in place of `OA1 `: `OA1A <TS> <TAG> `, sent at `now`. Made on the stack, so a host
    /// that seals a line where it lies allocates nothing per frame.
    pub(crate) fn seal_prefix(&mut self, now: u64, inner: &str) -> SealPrefix {
        // Saturating: a clock at the top of u64 (a host's bad epoch) repeats its last TS rather
        // than wrapping to 0 (or panicking in a debug build).
        let ts = self.wall(now).max(self.last_sent_ts.saturating_add(1));
        self.last_sent_ts = ts;
        let mut digits = [0u8; 13];
        let ts = base36_digits(ts, &mut digits);
        let tag = self.tag(ts, inner.as_bytes()).finalize().into_bytes();
        let mut prefix = SealPrefix {
            bytes: [0; SEAL_PREFIX_MAX],
            len: 0,
        };
        prefix.push(MARKER.as_bytes());
        prefix.push(b" ");
        prefix.push(ts);
        prefix.push(b" ");
        let written = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode_slice(&tag[..TAG_BYTES], &mut prefix.bytes[prefix.len..])
            .expect("room for the tag");
        prefix.len += written;
        prefix.push(b" ");
        prefix
    }

    /// Checks an `OA1A ...` text received at `now`; returns the inner frame text (`TYPE ...`).
    pub(crate) fn open<'a>(&mut self, now: u64, text: &'a [u8]) -> Result<&'a [u8], Refusal> {
        let rest = text
            .strip_prefix(MARKER.as_bytes())
            .and_then(|r| r.strip_prefix(b" "))
            .ok_or(Refusal::Malformed)?;
        let ts_end = memchr::memchr(b' ', rest).ok_or(Refusal::Malformed)?;
        let ts_text = &rest[..ts_end];
        let ts = parse_base36(ts_text).ok_or(Refusal::Malformed)?;
        let rest = &rest[ts_end + 1..];
        if rest.len() < TAG_CHARS + 1 || rest[TAG_CHARS] != b' ' {
            return Err(Refusal::Malformed);
        }
        let mut tag = [0u8; TAG_BYTES + 2];
        let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode_slice(&rest[..TAG_CHARS], &mut tag)
            .map_err(|_| Refusal::Malformed)?;
        if decoded != TAG_BYTES {
            return Err(Refusal::Malformed);
        }
        let tag: [u8; TAG_BYTES] = tag[..TAG_BYTES].try_into().expect("16 bytes");
        let inner = &rest[TAG_CHARS + 1..];
        self.tag(ts_text, inner)
            .verify_truncated_left(&tag)
            .map_err(|_| Refusal::Forged)?;
        let wall = self.wall(now);
        if ts.abs_diff(wall) > self.config.max_skew_ms {
            return Err(Refusal::Expired);
        }
        self.forget_expired(wall);
        if self.seen.contains(&tag) {
            return Err(Refusal::Replayed);
        }
        if self.seen.len() >= self.config.max_remembered.max(1)
            && let Some((_, oldest)) = self.expiries.pop_front()
        {
            self.seen.remove(&oldest);
        }
        self.seen.insert(tag);
        self.expiries
            .push_back((ts.saturating_add(self.config.max_skew_ms), tag));
        Ok(inner)
    }

    /// Drops the tags whose timestamps have left the window (the expiry test rejects them now).
    fn forget_expired(&mut self, wall: u64) {
        while let Some(&(until, tag)) = self.expiries.front() {
            if until >= wall {
                break;
            }
            self.expiries.pop_front();
            self.seen.remove(&tag);
        }
    }

    /// Tags remembered right now.
    #[cfg(test)]
    pub(crate) fn remembered(&self) -> usize {
        self.seen.len()
    }
}

/// `n` in lower-case base 36.
pub fn base36(n: u64) -> String {
    let mut digits = [0u8; 13];
    String::from_utf8_lossy(base36_digits(n, &mut digits)).into_owned()
}

/// [`base36`] written at the end of `buf`; returns the digits.
fn base36_digits(mut n: u64, buf: &mut [u8; 13]) -> &[u8] {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = DIGITS[(n % 36) as usize];
        n /= 36;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Lower-case base 36 of 1 to [`MAX_TS_CHARS`] digits, without a leading zero.
fn parse_base36(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > MAX_TS_CHARS || (text[0] == b'0' && text.len() > 1) {
        return None;
    }
    text.iter().try_fold(0u64, |n, &b| {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'z' => b - b'a' + 10,
            _ => return None,
        };
        Some(n * 36 + u64::from(digit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPOCH: u64 = 1_790_000_000_000;

    fn pair() -> (Authenticator, Authenticator) {
        let config = AuthConfig::new(b"correct horse".to_vec(), EPOCH);
        (
            Authenticator::new(config.clone(), "#Desk"),
            Authenticator::new(config, "#desk"),
        )
    }

    #[test]
    fn sealed_frames_open_once() {
        let (mut tx, mut rx) = pair();
        let sealed = tx.seal(0, "OA1 REQ abc 1 0 uname -a");
        assert!(sealed.starts_with("OA1A "), "{sealed}");
        assert!(sealed.ends_with(" REQ abc 1 0 uname -a"));
        assert_eq!(
            sealed.len(),
            "OA1 REQ abc 1 0 uname -a".len() + 1 + 1 + 8 + 1 + 22
        );
        assert_eq!(
            rx.open(5, sealed.as_bytes()),
            Ok(&b"REQ abc 1 0 uname -a"[..])
        );
        assert_eq!(rx.open(6, sealed.as_bytes()), Err(Refusal::Replayed));
    }

    #[test]
    fn any_change_is_a_forgery() {
        let (mut tx, mut rx) = pair();
        let sealed = tx.seal(0, "OA1 RES abc 2 1 output");
        let other_channel = {
            let mut a = Authenticator::new(AuthConfig::new(b"correct horse".to_vec(), EPOCH), "#x");
            a.seal(0, "OA1 RES abc 2 1 output")
        };
        let wrong_key = {
            let mut a = Authenticator::new(AuthConfig::new(b"wrong".to_vec(), EPOCH), "#desk");
            a.seal(0, "OA1 RES abc 2 1 output")
        };
        for forged in [
            sealed.replace("2 1", "2 0"),
            sealed.replace("output", "outpuT"),
            sealed.replace("RES", "ERR"),
            sealed.replace("abc", "abd"),
            format!("{sealed}!"),
            other_channel,
            wrong_key,
        ] {
            assert_eq!(
                rx.open(0, forged.as_bytes()),
                Err(Refusal::Forged),
                "{forged}"
            );
        }
        assert!(rx.open(0, sealed.as_bytes()).is_ok());
    }

    #[test]
    fn malformed_headers_are_not_frames() {
        let (mut tx, mut rx) = pair();
        let sealed = tx.seal(0, "OA1 RES abc 1 0 x");
        let ts_end = sealed[5..].find(' ').unwrap() + 5;
        for bad in [
            "OA1A".to_owned(),
            "OA1A ".to_owned(),
            "OA1 RES abc 1 0 x".to_owned(),
            format!("OA1A 0{}", &sealed[5..]),
            format!("OA1A {}", &sealed[ts_end + 1..]),
            sealed.replacen(' ', "  ", 2),
            format!("{}X{}", &sealed[..ts_end + 1], &sealed[ts_end + 2..]),
            format!("OA1A zzzzzzzzzz{}", &sealed[ts_end..]),
        ] {
            assert!(
                matches!(
                    rx.open(0, bad.as_bytes()),
                    Err(Refusal::Malformed | Refusal::Forged)
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_window_bounds_the_age_both_ways_and_the_memory() {
        let (mut tx, mut rx) = pair();
        let old = tx.seal(0, "OA1 CANCEL a 1 0");
        assert_eq!(rx.open(60_001, old.as_bytes()), Err(Refusal::Expired));
        let fresh = tx.seal(200_000, "OA1 CANCEL b 1 0");
        // The receiver's clock is behind by more than the window.
        assert_eq!(rx.open(139_999, fresh.as_bytes()), Err(Refusal::Expired));
        assert!(rx.open(140_000, fresh.as_bytes()).is_ok());
        assert_eq!(rx.remembered(), 1);
        let later = tx.seal(400_000, "OA1 CANCEL c 1 0");
        assert!(rx.open(400_000, later.as_bytes()).is_ok());
        assert_eq!(
            rx.remembered(),
            1,
            "the old tag was forgotten with its window"
        );
    }

    #[test]
    fn timestamps_only_grow_and_the_memory_is_capped() {
        let mut config = AuthConfig::new(b"k".to_vec(), EPOCH);
        config.max_remembered = 100;
        let mut tx = Authenticator::new(config.clone(), "#d");
        let mut rx = Authenticator::new(config, "#d");
        for i in 0..1000 {
            // The same frame text in the same millisecond: different timestamps, both accepted.
            let sealed = tx.seal(7, "OA1 RES a 1 0 same");
            assert!(rx.open(7, sealed.as_bytes()).is_ok(), "{i}");
        }
        assert_eq!(rx.remembered(), 100);
    }

    #[test]
    fn base36_round_trips() {
        for n in [0, 1, 35, 36, EPOCH, 36u64.pow(9) - 1] {
            assert_eq!(parse_base36(base36(n).as_bytes()), Some(n));
        }
        assert_eq!(base36(EPOCH).len(), 8);
    }

    #[test]
    fn debug_does_not_show_the_secret() {
        let config = AuthConfig::new(b"hunter2".to_vec(), 0);
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
