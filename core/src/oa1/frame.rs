//! OA1 frames: `OA1 <TYPE> <REQ_ID> <SEQ> <MORE> <PAYLOAD>` in the text of a `PRIVMSG`
//! (`docs/oa1.md`, "Frames").
//!
//! Parsing splits on single ASCII spaces into at most 6 parts; 5 parts is an empty payload. Type is
//! exact upper case (v40's four, and deskwire's `ACCEPT`, `REQZ`, `RESZ`), the id is `[A-Za-z0-9_-]{1,64}`, seq a decimal `u32` of at least 1 without
//! sign or leading zeros, and more is `0` or `1`. Anything else is not a frame.

use std::fmt;

use crate::irc::message::find_byte;

/// The longest request id accepted.
pub const MAX_ID_LEN: usize = 64;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "Oa1FrameType"))]
pub enum FrameType {
    /// A request stream chunk (desk → remote).
    Req,
    /// A response stream chunk (remote → desk).
    Res,
    /// An error stream chunk (remote → desk), completing the request.
    Err,
    /// A cancellation of a request (desk → remote).
    Cancel,
    /// deskwire: the desk accepts a compressed answer to this request (see
    /// [`compress`](super::compress)). v40 receivers drop it.
    Accept,
    /// deskwire: a compressed request stream (desk → remote).
    ReqZ,
    /// deskwire: a compressed response stream (remote → desk).
    ResZ,
}

impl FrameType {
    /// Every type, in wire order of introduction: v40's four, then deskwire's.
    pub const ALL: [FrameType; 7] = [
        FrameType::Req,
        FrameType::Res,
        FrameType::Err,
        FrameType::Cancel,
        FrameType::Accept,
        FrameType::ReqZ,
        FrameType::ResZ,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameType::Req => "REQ",
            FrameType::Res => "RES",
            FrameType::Err => "ERR",
            FrameType::Cancel => "CANCEL",
            FrameType::Accept => "ACCEPT",
            FrameType::ReqZ => "REQZ",
            FrameType::ResZ => "RESZ",
        }
    }
}

impl fmt::Display for FrameType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A frame type name that is none of [`FrameType::ALL`] (names are exact upper case).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown OA1 frame type {0:?}: use REQ, RES, ERR, CANCEL, ACCEPT, REQZ or RESZ")]
pub struct UnknownFrameType(pub String);

impl std::str::FromStr for FrameType {
    type Err = UnknownFrameType;

    fn from_str(name: &str) -> Result<Self, UnknownFrameType> {
        FrameType::ALL
            .into_iter()
            .find(|kind| kind.as_str() == name)
            .ok_or_else(|| UnknownFrameType(name.to_owned()))
    }
}

/// Why a frame cannot be written: its text would not read back as the same frame
/// ([`Frame::parse`]), or would break the IRC line it travels in. See [`Frame::validate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The id is not 1 to [`MAX_ID_LEN`] of `[A-Za-z0-9_-]`.
    #[error("frame id {0:?}: an id is 1 to 64 of A-Z a-z 0-9 _ -")]
    InvalidId(String),
    /// Chunks are numbered from 1.
    #[error("seq is 0: chunks are numbered from 1")]
    ZeroSeq,
    /// A raw NUL, CR or LF in the payload, which would end (or corrupt) the IRC line and let
    /// the rest be read as another command.
    #[error(
        "the payload holds a raw {name} byte at {at}: payloads are escaped first (\\0, \\r, \\n; docs/oa1.md, \"Escaping\")"
    )]
    ForbiddenByte {
        /// `NUL`, `CR` or `LF`.
        name: &'static str,
        /// Its byte offset in the payload.
        at: usize,
    },
}

/// One parsed frame, borrowing from the line. The payload is still escaped.
///
/// `P` is what the payload is: `str` for frames built to be sent and for [`Frame::parse`] of a
/// text, `[u8]` for frames read off the wire with [`Frame::parse_bytes`]. Inbound payloads stay
/// bytes because the engines check UTF-8 once, on the whole reassembled message, instead of once
/// per line.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame<'a, P: ?Sized = str> {
    /// The frame type.
    pub kind: FrameType,
    /// The request id.
    pub id: &'a str,
    /// 1-based chunk number within the stream.
    pub seq: u32,
    /// Whether more chunks follow.
    pub more: bool,
    /// The escaped payload (possibly empty).
    pub payload: &'a P,
}

// By hand: derived impls would require `P: Clone`, which `str` and `[u8]` are not.
impl<P: ?Sized> Clone for Frame<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P: ?Sized> Copy for Frame<'_, P> {}

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

impl<'a> Frame<'a, [u8]> {
    /// Parses the text of a `PRIVMSG` as it came off the wire. `None` when it is not an OA1
    /// frame. Only the header must be ASCII; the payload is not looked at.
    ///
    /// One pass over the header bytes: each field is scanned for the bytes it may hold and must
    /// end at a single space (this took a sixth of the decode time as `split`/`parse` calls).
    #[inline]
    pub fn parse_bytes(bytes: &'a [u8]) -> Option<Self> {
        if !bytes.starts_with(b"OA1 ") {
            return None;
        }
        Frame::parse_fields(bytes, 4)
    }

    /// Parses `TYPE REQ_ID SEQ MORE[ PAYLOAD]` starting at `bytes[start]` (after the marker
    /// word: `OA1 ` here, `OA1A <TS> <TAG> ` for authenticated frames).
    #[inline]
    pub(crate) fn parse_fields(bytes: &'a [u8], start: usize) -> Option<Self> {
        let rest = bytes.get(start..)?;
        let (kind, mut pos) = match rest.get(..4)? {
            b"REQ " => (FrameType::Req, start + 4),
            b"RES " => (FrameType::Res, start + 4),
            b"ERR " => (FrameType::Err, start + 4),
            _ if rest.starts_with(b"CANCEL ") => (FrameType::Cancel, start + 7),
            _ if rest.starts_with(b"RESZ ") => (FrameType::ResZ, start + 5),
            _ if rest.starts_with(b"REQZ ") => (FrameType::ReqZ, start + 5),
            _ if rest.starts_with(b"ACCEPT ") => (FrameType::Accept, start + 7),
            _ => return None,
        };
        // The id ends at the next space. Finding it a word at a time and then checking its
        // bytes without an early exit took the id from a sixth of the decode time (a byte loop
        // whose exit branch mispredicted) to a few percent.
        let id_start = pos;
        pos = find_byte(bytes, id_start, b' ')?;
        let id_bytes = &bytes[id_start..pos];
        if !(1..=MAX_ID_LEN).contains(&id_bytes.len())
            || !id_bytes
                .iter()
                .fold(true, |ok, &b| ok & ID_BYTE[b as usize])
        {
            return None;
        }
        // ASCII by the check above, so this cannot fail.
        let id = crate::irc::message::short_str(&bytes[id_start..pos])?;
        pos += 1;
        let seq_start = pos;
        let mut seq = 0u64;
        while let Some(&b) = bytes.get(pos)
            && b.is_ascii_digit()
        {
            seq = seq.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
            pos += 1;
        }
        // At most 10 digits, so `seq` did not wrap.
        if !(1..=10).contains(&(pos - seq_start))
            || bytes[seq_start] == b'0'
            || bytes.get(pos) != Some(&b' ')
        {
            return None;
        }
        let seq = u32::try_from(seq).ok()?;
        let more = match bytes.get(pos + 1)? {
            b'0' => false,
            b'1' => true,
            _ => return None,
        };
        let payload: &[u8] = match bytes.get(pos + 2) {
            None => &[],
            Some(b' ') => &bytes[pos + 3..],
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
}

impl<'a> Frame<'a> {
    /// Parses the text of a `PRIVMSG`. `None` when it is not an OA1 frame.
    pub fn parse(text: &'a str) -> Option<Self> {
        let frame = Frame::parse_bytes(text.as_bytes())?;
        // The header is ASCII, so the payload starts on a char boundary.
        let payload = &text[text.len() - frame.payload.len()..];
        Some(Frame {
            kind: frame.kind,
            id: frame.id,
            seq: frame.seq,
            more: frame.more,
            payload,
        })
    }

    /// Checks that the frame can be written: its text reads back as the same frame and stays
    /// one IRC line (a valid id, a seq of at least 1, no raw NUL, CR or LF in the payload).
    /// Every binding's frame formatter calls this; the engines build only valid frames.
    pub fn validate(&self) -> Result<(), FrameError> {
        if !is_valid_id(self.id) {
            return Err(FrameError::InvalidId(self.id.to_owned()));
        }
        if self.seq == 0 {
            return Err(FrameError::ZeroSeq);
        }
        if let Some(at) = self
            .payload
            .bytes()
            .position(|b| matches!(b, 0 | b'\r' | b'\n'))
        {
            let name = match self.payload.as_bytes()[at] {
                0 => "NUL",
                b'\r' => "CR",
                _ => "LF",
            };
            return Err(FrameError::ForbiddenByte { name, at });
        }
        Ok(())
    }

    /// The frame's text after [`Frame::validate`]: what a formatter for hosts returns.
    pub fn format(&self) -> Result<String, FrameError> {
        self.validate()?;
        Ok(self.to_string())
    }

    /// The same frame with its payload as bytes.
    pub fn as_bytes(&self) -> Frame<'a, [u8]> {
        Frame {
            kind: self.kind,
            id: self.id,
            seq: self.seq,
            more: self.more,
            payload: self.payload.as_bytes(),
        }
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

    /// The length of the frame text [`Frame::write`] appends.
    pub fn text_len(&self) -> usize {
        Frame::header_len(self.kind, self.id, self.seq, self.payload.is_empty())
            + self.payload.len()
    }

    /// Appends the frame text to `out`. An empty payload is written without a trailing space.
    pub fn write(&self, out: &mut String) {
        #[cfg(debug_assertions)]
        let written_from = out.len();
        out.reserve(self.text_len());
        Frame::write_header(
            self.kind,
            self.id,
            self.seq,
            self.more,
            self.payload.is_empty(),
            out,
        );
        out.push_str(self.payload);
        #[cfg(debug_assertions)]
        debug_assert_eq!(out.len() - written_from, self.text_len());
    }

    /// Appends the first [`Frame::header_len`] bytes of a frame's text: `OA1 TYPE ID SEQ MORE`
    /// and, unless `payload_empty`, the space before the payload. For a writer that puts the
    /// payload after it in pieces (the link's queue, without a `String` per frame).
    pub(crate) fn write_header(
        kind: FrameType,
        id: &str,
        seq: u32,
        more: bool,
        payload_empty: bool,
        out: &mut String,
    ) {
        out.push_str("OA1 ");
        out.push_str(kind.as_str());
        out.push(' ');
        out.push_str(id);
        out.push(' ');
        let mut digits = [0u8; 10];
        let mut n = seq;
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        out.push_str(std::str::from_utf8(&digits[start..]).expect("ASCII digits"));
        out.push_str(match (more, payload_empty) {
            (false, true) => " 0",
            (true, true) => " 1",
            (false, false) => " 0 ",
            (true, false) => " 1 ",
        });
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

    #[test]
    fn every_type_parses_from_its_display_name() {
        for kind in FrameType::ALL {
            assert_eq!(kind.to_string().parse::<FrameType>(), Ok(kind));
        }
        assert_eq!(
            "req".parse::<FrameType>(),
            Err(UnknownFrameType("req".into()))
        );
        assert!("REQZ ".parse::<FrameType>().is_err());
    }

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

    /// The grammar as splits and `str::parse`, as it was first written.
    fn parse_by_splitting(text: &str) -> Option<Frame<'_>> {
        fn next_field(s: &str) -> Option<(&str, &str)> {
            s.split_once(' ')
        }
        let rest = text.strip_prefix("OA1 ")?;
        let (kind, rest) = next_field(rest)?;
        let kind = match kind {
            "REQ" => FrameType::Req,
            "RES" => FrameType::Res,
            "ERR" => FrameType::Err,
            "CANCEL" => FrameType::Cancel,
            "ACCEPT" => FrameType::Accept,
            "REQZ" => FrameType::ReqZ,
            "RESZ" => FrameType::ResZ,
            _ => return None,
        };
        let (id, rest) = next_field(rest)?;
        if !is_valid_id(id) {
            return None;
        }
        let (seq, rest) = next_field(rest)?;
        if seq.is_empty() || seq.starts_with('0') || !seq.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let seq = seq.parse().ok()?;
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

    proptest::proptest! {
        #[test]
        fn parse_agrees_with_splitting(
            kind in "(REQ|RES|ERR|CANCEL|REQZ|RESZ|ACCEPT|RE|CANCE|res|OA1|)",
            id in "[A-Za-z0-9_.-]{0,66}",
            seq in "(0|[1-9][0-9]{0,10}|4294967295|4294967296|\\+1|)",
            more in "(0|1|2|00|)",
            payload in "( ?.{0,8})",
            sep in "( |  |)",
            raw in ".{0,40}",
        ) {
            let text = format!("OA1 {kind} {id}{sep}{seq} {more}{payload}");
            proptest::prop_assert_eq!(Frame::parse(&text), parse_by_splitting(&text));
            let text = format!("OA1 {kind} {id} {seq} {more} {payload}");
            proptest::prop_assert_eq!(Frame::parse(&text), parse_by_splitting(&text));
            proptest::prop_assert_eq!(Frame::parse(&raw), parse_by_splitting(&raw));
            let text = format!("OA1 {raw}");
            proptest::prop_assert_eq!(Frame::parse(&text), parse_by_splitting(&text));
        }
    }

    #[test]
    fn format_refuses_what_parse_would_refuse_or_the_line_would_break() {
        let frame = |id, seq, payload| Frame {
            kind: FrameType::Req,
            id,
            seq,
            more: false,
            payload,
        };
        assert_eq!(
            frame("ab", 1, "x\\r\\nQUIT").format().as_deref(),
            Ok("OA1 REQ ab 1 0 x\\r\\nQUIT")
        );
        assert_eq!(frame("ab", 1, "").format().as_deref(), Ok("OA1 REQ ab 1 0"));
        assert_eq!(
            frame("ab", 1, "x\r\nQUIT").format(),
            Err(FrameError::ForbiddenByte { name: "CR", at: 1 })
        );
        assert_eq!(
            frame("ab", 1, "x\nQUIT").format(),
            Err(FrameError::ForbiddenByte { name: "LF", at: 1 })
        );
        assert_eq!(
            frame("ab", 1, "\0").format(),
            Err(FrameError::ForbiddenByte { name: "NUL", at: 0 })
        );
        assert_eq!(frame("ab", 0, "x").format(), Err(FrameError::ZeroSeq));
        let long = "a".repeat(65);
        for id in ["a b", "", "a.b", "é", long.as_str()] {
            assert_eq!(
                frame(id, 1, "x").format(),
                Err(FrameError::InvalidId(id.to_owned())),
                "{id:?}"
            );
        }
        let err = frame("ab", 1, "x\r\nQUIT")
            .format()
            .unwrap_err()
            .to_string();
        assert!(err.contains("raw CR byte at 1"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn what_format_writes_parses_back_as_the_same_frame(
            id in "[A-Za-z0-9_. -]{0,66}",
            seq in proptest::prelude::any::<u32>(),
            more in proptest::prelude::any::<bool>(),
            payload in "(?s).{0,12}",
        ) {
            let f = Frame { kind: FrameType::Res, id: id.as_str(), seq, more, payload: payload.as_str() };
            if let Ok(text) = f.format() {
                proptest::prop_assert_eq!(Frame::parse(&text), Some(f));
                proptest::prop_assert!(!text.contains(['\r', '\n', '\0']));
            }
        }
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
