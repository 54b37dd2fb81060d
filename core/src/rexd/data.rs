//! Text-or-base64 payloads: how REXD carries bytes in JSON strings.
//!
//! JSON strings hold Unicode text, while file contents and process output are bytes. Every field
//! that may carry bytes (`fs.read`/`fs.write` `content`, event `data`, input `data`) travels
//! with an `encoding`: `utf8` (the string is the bytes) or `base64` (RFC 4648 standard alphabet,
//! written padded; read with or without padding, since some encoders drop it).
//!
//! A session that negotiated compression at `session.open` (`compression: "zstd"`) may also
//! carry `zstd`: the base64 of one zstd frame of the data. Here `zstd` is a name on the wire,
//! and [`decode`] refuses it with [`RexdError::Compressed`]: the daemon and the client compress
//! and inflate, with the inflated size bounded as [`super::zstd`] says (which, with this crate's
//! `zstd` feature, also inflates, in pure Rust). See `docs/rexd-compression.md`.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde::{Deserialize, Serialize};

use super::error::RexdError;

/// Standard alphabet, padded on write, padding optional on read.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// How a string field carries bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Encoding {
    /// `"utf8"`: the string's UTF-8 bytes are the data. The default everywhere.
    #[default]
    Utf8,
    /// `"base64"`: the string is the base64 of the data (any bytes).
    Base64,
    /// `"zstd"`: the string is the base64 of one zstd frame of the data; only in a session
    /// that negotiated it (`session.open` `compression`).
    Zstd,
    /// `"raw"`: only on an `fs.read` of a session that negotiated raw frames (`session.open`
    /// `raw_frames`): the content is not in a string at all; the result's `raw_bytes` bytes
    /// follow its line on the byte stream (`docs/rexd-raw-frames.md`).
    Raw,
}

impl Encoding {
    /// The name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf8",
            Encoding::Base64 => "base64",
            Encoding::Zstd => "zstd",
            Encoding::Raw => "raw",
        }
    }

    /// Whether this is the default (`utf8`).
    pub fn is_default(&self) -> bool {
        *self == Encoding::Utf8
    }
}

/// Encodes `bytes` for a JSON string field: `utf8` when they are valid UTF-8 (borrowed, no
/// copy), else `base64`. This is what a daemon uses for process output and file contents.
pub fn encode(bytes: &[u8]) -> (Encoding, Cow<'_, str>) {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => (Encoding::Utf8, Cow::Borrowed(text)),
        Err(_) => (Encoding::Base64, Cow::Owned(BASE64.encode(bytes))),
    }
}

/// Encodes `bytes` with the given encoding. For `utf8`, invalid sequences are replaced by
/// U+FFFD (the caller asked for text; use [`encode`] to fall back to base64 instead).
/// `zstd` and `raw` are never produced here (this crate has no codec, and raw bytes are not a
/// string): asked for either, this writes base64, which the caller must then label `base64`.
pub fn encode_as(bytes: &[u8], encoding: Encoding) -> Cow<'_, str> {
    match encoding {
        Encoding::Utf8 => String::from_utf8_lossy(bytes),
        Encoding::Base64 | Encoding::Zstd | Encoding::Raw => Cow::Owned(BASE64.encode(bytes)),
    }
}

/// The bytes a field carries: borrowed for `utf8`, decoded for `base64`; `zstd` is
/// [`RexdError::Compressed`] (inflate it where it was negotiated, within the session's limits);
/// `raw` is [`RexdError::RawFrame`] (its bytes are not in the string).
pub fn decode(data: &str, encoding: Encoding) -> Result<Cow<'_, [u8]>, RexdError> {
    match encoding {
        Encoding::Utf8 => Ok(Cow::Borrowed(data.as_bytes())),
        Encoding::Base64 => BASE64
            .decode(data)
            .map(Cow::Owned)
            .map_err(|e| RexdError::Base64(e.to_string())),
        Encoding::Zstd => Err(RexdError::Compressed),
        Encoding::Raw => Err(RexdError::RawFrame),
    }
}

/// [`decode`] into a buffer the caller keeps (cleared first), for a reader decoding piece after
/// piece without an allocation each.
pub fn decode_into(data: &str, encoding: Encoding, out: &mut Vec<u8>) -> Result<(), RexdError> {
    out.clear();
    match encoding {
        Encoding::Utf8 => {
            out.extend_from_slice(data.as_bytes());
            Ok(())
        }
        Encoding::Base64 => BASE64
            .decode_vec(data, out)
            .map_err(|e| RexdError::Base64(e.to_string())),
        Encoding::Zstd => Err(RexdError::Compressed),
        Encoding::Raw => Err(RexdError::RawFrame),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_stays_text_and_bytes_go_base64() {
        assert_eq!(
            encode(b"line 1\n"),
            (Encoding::Utf8, Cow::Borrowed("line 1\n"))
        );
        let (enc, s) = encode(&[0xff, 0x00, b'a']);
        assert_eq!(enc, Encoding::Base64);
        assert_eq!(s, "/wBh");
        assert_eq!(decode(&s, enc).unwrap().as_ref(), &[0xff, 0x00, b'a']);
    }

    #[test]
    fn padding_is_optional_on_read_and_written() {
        assert_eq!(encode_as(b"ab", Encoding::Base64), "YWI=");
        assert_eq!(decode("YWI=", Encoding::Base64).unwrap().as_ref(), b"ab");
        assert_eq!(decode("YWI", Encoding::Base64).unwrap().as_ref(), b"ab");
        assert!(matches!(
            decode("Y!", Encoding::Base64),
            Err(RexdError::Base64(_))
        ));
        assert_eq!(decode("Y!", Encoding::Utf8).unwrap().as_ref(), b"Y!");
    }

    #[test]
    fn zstd_is_a_name_here_not_a_codec() {
        let e: Encoding = serde_json::from_str("\"zstd\"").unwrap();
        assert_eq!((e, e.as_str()), (Encoding::Zstd, "zstd"));
        assert_eq!(decode("KLUv/Q==", e), Err(RexdError::Compressed));
        assert_eq!(
            decode_into("KLUv/Q==", e, &mut Vec::new()),
            Err(RexdError::Compressed)
        );
    }

    #[test]
    fn lossy_text_when_asked() {
        assert_eq!(encode_as(&[b'a', 0xff], Encoding::Utf8), "a\u{fffd}");
    }
}
