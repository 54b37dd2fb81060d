//! Hand-written JSON for the hot paths of a daemon: output events (`exec.stdout`,
//! `exec.stderr`, `pty.output`) and `fs.read` results, whose payload strings are megabytes.
//!
//! serde_json escapes strings byte by byte through a table; here clean runs are found eight
//! bytes at a time (SWAR) and copied whole. The output is byte-for-byte what serde_json writes
//! for the same value (tests compare both on arbitrary input), so readers never see a
//! difference. Measured on a 10 MiB `fs.read` through `rexd --stdio`: serde_json's escaper was
//! 28 % of the daemon's time (perf), see `rexd/benches/rexd.rs`.

use serde::Serialize;

use super::data::Encoding;
use crate::jsonrpc::Id;

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Non-zero when some byte of `w` is below 0x20, a `"` or a `\`. Never zero when one is (the
/// classic has-zero/has-less tricks have no false negatives; a false positive only sends the
/// word down the byte-by-byte path).
#[inline]
fn needs_escape(w: u64) -> u64 {
    let ctrl = w.wrapping_sub(LO * 0x20) & !w & HI;
    let quote = (w ^ (LO * u64::from(b'"'))).wrapping_sub(LO) & !(w ^ (LO * u64::from(b'"'))) & HI;
    let back = (w ^ (LO * u64::from(b'\\'))).wrapping_sub(LO) & !(w ^ (LO * u64::from(b'\\'))) & HI;
    ctrl | quote | back
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Writes the escape of `b` when it needs one (serde_json's choices).
#[inline]
fn escape_byte(b: u8, out: &mut Vec<u8>) -> bool {
    let short = match b {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        0..=0x1f => {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]);
            return true;
        }
        _ => return false,
    };
    out.extend_from_slice(&[b'\\', short]);
    true
}

/// Appends `s` as a JSON string literal (quotes included).
pub fn write_str(s: &str, out: &mut Vec<u8>) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    // Clean 32-byte blocks (the common case for output and file text) cost one test.
    while i + 32 <= bytes.len() {
        let block = &bytes[i..i + 32];
        let mut any = 0;
        for w in block.chunks_exact(8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            any |= needs_escape(u64::from_le_bytes(word));
        }
        if any != 0 {
            for (j, &b) in block.iter().enumerate() {
                if b < 0x20 || b == b'"' || b == b'\\' {
                    out.extend_from_slice(&bytes[start..i + j]);
                    escape_byte(b, out);
                    start = i + j + 1;
                }
            }
        }
        i += 32;
    }
    while i + 8 <= bytes.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[i..i + 8]);
        if needs_escape(u64::from_le_bytes(word)) != 0 {
            for (j, &b) in bytes[i..i + 8].iter().enumerate() {
                let at = i + j;
                if b < 0x20 || b == b'"' || b == b'\\' {
                    out.extend_from_slice(&bytes[start..at]);
                    escape_byte(b, out);
                    start = at + 1;
                }
            }
        }
        i += 8;
    }
    for (at, &b) in bytes.iter().enumerate().skip(i) {
        if b < 0x20 || b == b'"' || b == b'\\' {
            out.extend_from_slice(&bytes[start..at]);
            escape_byte(b, out);
            start = at + 1;
        }
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

fn write_u64(n: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(n.to_string().as_bytes());
}

/// `{"jsonrpc":"2.0","method":METHOD,"params":{"session_id":…,ID_KEY:ID,"seq":…,"data":…,"encoding":…}}`
/// with `(id_key, id)` and `(data, encoding)` as pairs.
pub fn write_output_event(
    method: &str,
    session_id: &str,
    (id_key, id): (&str, &str),
    seq: u64,
    (data, encoding): (&str, Encoding),
    raw_bytes: Option<u64>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
    write_str(method, out);
    out.extend_from_slice(b",\"params\":{\"session_id\":");
    write_str(session_id, out);
    out.push(b',');
    write_str(id_key, out);
    out.push(b':');
    write_str(id, out);
    out.extend_from_slice(b",\"seq\":");
    write_u64(seq, out);
    out.extend_from_slice(b",\"data\":");
    write_str(data, out);
    out.extend_from_slice(b",\"encoding\":");
    write_str(encoding.as_str(), out);
    if let Some(n) = raw_bytes {
        out.extend_from_slice(b",\"raw_bytes\":");
        write_u64(n, out);
    }
    out.extend_from_slice(b"}}");
}

/// The success line of an `fs.read`.
pub fn write_fs_read_line(id: &Id, r: &super::FsReadResult, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    let _ = id.serialize(&mut serde_json::Serializer::new(&mut *out));
    out.extend_from_slice(b",\"result\":{\"path\":");
    write_str(&r.path, out);
    out.extend_from_slice(b",\"size\":");
    write_u64(r.size, out);
    out.extend_from_slice(b",\"mtime\":");
    write_str(&r.mtime, out);
    out.extend_from_slice(b",\"encoding\":");
    write_str(r.encoding.as_str(), out);
    out.extend_from_slice(b",\"content\":");
    write_str(&r.content, out);
    out.extend_from_slice(b",\"truncated\":");
    out.extend_from_slice(if r.truncated { b"true" } else { b"false" });
    if let Some(n) = r.raw_bytes {
        out.extend_from_slice(b",\"raw_bytes\":");
        write_u64(n, out);
    }
    out.extend_from_slice(b"}}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn serde(s: &str) -> Vec<u8> {
        serde_json::to_vec(s).unwrap()
    }

    #[test]
    fn every_byte_class_matches_serde_json() {
        let mut all = String::new();
        for c in 0u32..0x80 {
            all.push(char::from_u32(c).unwrap());
        }
        all.push_str("é€𝄞\u{7f}\u{2028}");
        for s in [
            &all[..],
            "",
            "a",
            "\"",
            "\\\\",
            "abcdefgh\"",
            "abcdefg\n12345678",
        ] {
            let mut out = Vec::new();
            write_str(s, &mut out);
            assert_eq!(out, serde(s), "{s:?}");
        }
    }

    proptest! {
        #[test]
        fn matches_serde_json(s in ".{0,200}", noise in proptest::collection::vec(0u8..0x80, 0..64)) {
            let mut text = s.clone();
            text.push_str(&String::from_utf8(noise).unwrap());
            let mut out = Vec::new();
            write_str(&text, &mut out);
            prop_assert_eq!(out, serde(&text));
        }
    }
}
