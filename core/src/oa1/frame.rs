//! OA1 frames: `OA1 <TYPE> <REQ_ID> <SEQ> <MORE> <PAYLOAD>` in the text of a `PRIVMSG` (spec §2).
//!
//! Parsing splits on single ASCII spaces into at most 6 parts; 5 parts is an empty payload. Type is
//! exact upper case, the id is `[A-Za-z0-9_-]{1,64}`, seq a decimal `u32` of at least 1 without
//! sign or leading zeros, and more is `0` or `1`. Anything else is not a frame.

use std::fmt;

/// The longest request id accepted.
pub const MAX_ID_LEN: usize = 64;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameType {
    /// A request stream chunk (desk → remote).
    Req,
    /// A response stream chunk (remote → desk).
    Res,
    /// An error stream chunk (remote → desk), completing the request.
    Err,
    /// A cancellation of a request (desk → remote).
    Cancel,
}

impl FrameType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameType::Req => "REQ",
            FrameType::Res => "RES",
            FrameType::Err => "ERR",
            FrameType::Cancel => "CANCEL",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "REQ" => FrameType::Req,
            "RES" => FrameType::Res,
            "ERR" => FrameType::Err,
            "CANCEL" => FrameType::Cancel,
            _ => return None,
        })
    }
}

impl fmt::Display for FrameType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One parsed frame, borrowing from the line text. The payload is still escaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The frame type.
    pub kind: FrameType,
    /// The request id.
    pub id: &'a str,
    /// 1-based chunk number within the stream.
    pub seq: u32,
    /// Whether more chunks follow.
    pub more: bool,
    /// The escaped payload (possibly empty).
    pub payload: &'a str,
}

/// Whether `id` is a valid request id.
pub fn is_valid_id(id: &str) -> bool {
    (1..=MAX_ID_LEN).contains(&id.len()) && id.bytes().all(|b| ID_BYTE[b as usize])
}

/// `[A-Za-z0-9_-]`.
const ID_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
        b += 1;
    }
    table
};

/// Splits off the text before the next single space.
#[inline]
fn next_field(s: &str) -> Option<(&str, &str)> {
    let space = s.bytes().position(|b| b == b' ')?;
    Some((&s[..space], &s[space + 1..]))
}

fn parse_seq(s: &str) -> Option<u32> {
    let digits = s.as_bytes();
    if digits.is_empty() || digits[0] == b'0' || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.parse().ok()
}

impl<'a> Frame<'a> {
    /// Parses the text of a `PRIVMSG`. `None` when it is not an OA1 frame.
    pub fn parse(text: &'a str) -> Option<Self> {
        let rest = text.strip_prefix("OA1 ")?;
        let (kind, rest) = next_field(rest)?;
        let kind = FrameType::parse(kind)?;
        let (id, rest) = next_field(rest)?;
        if !is_valid_id(id) {
            return None;
        }
        let (seq, rest) = next_field(rest)?;
        let seq = parse_seq(seq)?;
        // MORE is the last field when the payload is empty (5 parts).
        let (more, payload) = match rest.split_at_checked(1)? {
            ("0", tail) => (false, tail),
            ("1", tail) => (true, tail),
            _ => return None,
        };
        let payload = match payload.as_bytes().first() {
            None => "",
            Some(b' ') => &payload[1..],
            Some(_) => return None,
        };
        Some(Frame {
            kind,
            id,
            seq,
            more,
            payload,
        })
    }

    /// Bytes of the frame before the payload: `OA1 TYPE ID SEQ MORE` plus the space that
    /// separates the payload when there is one.
    pub fn header_len(kind: FrameType, id: &str, seq: u32, payload_empty: bool) -> usize {
        let digits = seq.checked_ilog10().unwrap_or(0) as usize + 1;
        "OA1 ".len()
            + kind.as_str().len()
            + 1
            + id.len()
            + 1
            + digits
            + 2
            + usize::from(!payload_empty)
    }

    /// Appends the frame text to `out`. An empty payload is written without a trailing space.
    pub fn write(&self, out: &mut String) {
        out.reserve(32 + self.id.len() + self.payload.len());
        out.push_str("OA1 ");
        out.push_str(self.kind.as_str());
        out.push(' ');
        out.push_str(self.id);
        out.push(' ');
        let mut digits = [0u8; 10];
        let mut n = self.seq;
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &digit in &digits[start..] {
            out.push(char::from(digit));
        }
        out.push_str(if self.more { " 1" } else { " 0" });
        if !self.payload.is_empty() {
            out.push(' ');
            out.push_str(self.payload);
        }
    }
}

impl fmt::Display for Frame<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write(&mut s);
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_spec_examples() {
        let f =
            Frame::parse("OA1 ERR 7k3p2d9m1q 1 0 timeout: remote execution exceeded 30s").unwrap();
        assert_eq!(f.kind, FrameType::Err);
        assert_eq!(f.id, "7k3p2d9m1q");
        assert_eq!((f.seq, f.more), (1, false));
        assert_eq!(f.payload, "timeout: remote execution exceeded 30s");
        let f = Frame::parse("OA1 RES abc 2 1 ").unwrap();
        assert_eq!(f.payload, "");
        let f = Frame::parse("OA1 RES abc 2 1").unwrap();
        assert_eq!(f.payload, "");
        let f = Frame::parse("OA1 REQ a_b-C 4294967295 1  two  spaces ").unwrap();
        assert_eq!(f.seq, u32::MAX);
        assert_eq!(f.payload, " two  spaces ");
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            "",
            "OA1",
            "OA1 RES",
            "OA1 RES id 1",
            "oa1 RES id 1 0 x",
            "OA1 res id 1 0 x",
            "OA1 PING id 1 0 x",
            "OA1 RES i.d 1 0 x",
            "OA1 RES  id 1 0 x",
            "OA1 RES id 0 0 x",
            "OA1 RES id 01 0 x",
            "OA1 RES id +1 0 x",
            "OA1 RES id 4294967296 0 x",
            "OA1 RES id 1 2 x",
            "OA1 RES id 1 00 x",
            "OA2 RES id 1 0 x",
            " OA1 RES id 1 0 x",
        ] {
            assert_eq!(Frame::parse(bad), None, "{bad:?}");
        }
        let long_id = "a".repeat(65);
        assert_eq!(Frame::parse(&format!("OA1 RES {long_id} 1 0")), None);
        let max_id = "a".repeat(64);
        assert!(Frame::parse(&format!("OA1 RES {max_id} 1 0")).is_some());
    }

    #[test]
    fn write_then_parse_and_header_len() {
        for (payload, seq) in [("", 1), ("x y", 9), ("z", 10), ("", 4294967295)] {
            let f = Frame {
                kind: FrameType::Cancel,
                id: "id1",
                seq,
                more: seq == 9,
                payload,
            };
            let mut s = String::new();
            f.write(&mut s);
            assert_eq!(Frame::parse(&s), Some(f));
            assert_eq!(
                s.len(),
                Frame::header_len(f.kind, f.id, seq, payload.is_empty()) + payload.len()
            );
        }
        assert!(
            Frame {
                kind: FrameType::Res,
                id: "i",
                seq: 1,
                more: false,
                payload: ""
            }
            .to_string()
                == "OA1 RES i 1 0"
        );
    }
}
