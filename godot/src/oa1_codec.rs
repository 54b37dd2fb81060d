//! `Oa1`: OA1's building blocks (escaping, frames, chunking, `ERR` payloads) as static
//! functions, for projects that look at frames themselves and for the conformance vectors.

use deskwire::oa1::escape::{escape, unescape};
use godot::prelude::*;

use crate::{oa1_shapes, variant};

/// OA1's building blocks: how text travels in frames on an IRC line
/// (`OA1 <TYPE> <ID> <SEQ> <MORE> <PAYLOAD>`).
///
/// [DeskRpcClient], [Oa1Client] and [Oa1Server] do all of this themselves; these are for
/// looking at frames (a debug overlay, a log viewer) and for tests.
///
/// ```gdscript
/// var payloads := Oa1.split("line one\nline two", 240)     # ["line one\\nline two"]
/// var frame := Oa1.parse_frame("OA1 RES k3p2d9m1q7ab 1 0 Linux desk\\n")
/// if not frame.is_empty():
///     print(frame.type, " ", frame.id, ": ", Oa1.unescape(frame.payload).get_string_from_utf8())
/// ```
#[derive(GodotClass)]
#[class(no_init, base = Object)]
pub struct Oa1 {
    base: Base<Object>,
}

#[godot_api]
impl Oa1 {
    /// [param text] as a frame payload: backslash, line feed, carriage return, tab and NUL
    /// become `\\`, `\n`, `\r`, `\t`, `\0`; everything else is unchanged.
    #[func]
    fn escape(text: GString) -> GString {
        escape(&text.to_string()).as_str().into()
    }

    /// A payload's text as bytes: the escapes [method escape] writes (and `\s`, a space) are
    /// decoded, any other backslash stays as written. Bytes, because `\0` decodes to a NUL,
    /// which a Godot String cannot hold; `get_string_from_utf8()` gives the text.
    #[func]
    fn unescape(escaped: GString) -> PackedByteArray {
        PackedByteArray::from(unescape(escaped.to_string().as_bytes()))
    }

    /// The frame in the text of a `PRIVMSG`, as `{"type", "id", "seq", "more", "payload"}`
    /// (the payload still escaped), or an empty Dictionary when the text is not a frame.
    #[func]
    fn parse_frame(text: GString) -> VarDictionary {
        oa1_shapes::parse_frame(&text.to_string())
            .map(|f| variant::dictionary_of(&f))
            .unwrap_or_default()
    }

    /// The text of a frame. [param frame_type] is `REQ`, `RES`, `ERR`,
    /// `CANCEL`, `ACCEPT`, `REQZ` or `RESZ`; [param payload] must be escaped already.
    /// An empty String (and an error) when it would not read back as that frame: an id
    /// outside 1 to 64 of `A-Z a-z 0-9 _ -`, a seq of 0 or past 32 bits.
    #[func]
    fn format_frame(
        frame_type: GString,
        id: GString,
        seq: i64,
        more: bool,
        #[opt(default = "")] payload: GString,
    ) -> GString {
        let text = oa1_shapes::format_frame(
            &frame_type.to_string(),
            &id.to_string(),
            seq,
            more,
            &payload.to_string(),
        );
        match text {
            Ok(text) => text.as_str().into(),
            Err(e) => {
                godot_error!("Oa1.format_frame: {e}");
                GString::new()
            }
        }
    }

    /// [param text] escaped and cut into the payloads of consecutive frames, each at most
    /// [param budget] bytes (the spec's default is 240), never inside a character or an
    /// escape pair; a payload that would end in a space carries it as `\s`. Empty (and an
    /// error) for a budget below 4.
    #[func]
    fn split(text: GString, #[opt(default = 240)] budget: i64) -> PackedStringArray {
        match oa1_shapes::split(&text.to_string(), budget) {
            Ok(payloads) => payloads.iter().map(|p| GString::from(p.as_str())).collect(),
            Err(e) => {
                godot_error!("Oa1.split: {e}");
                PackedStringArray::new()
            }
        }
    }

    /// An `ERR` answer's text as `{"code", "message"}`: the code is the part before the
    /// first `": "` when it is lower-case letters and `_`, else `error` with the whole text as
    /// the message.
    #[func]
    fn parse_err_payload(payload: GString) -> VarDictionary {
        variant::dictionary_of(&oa1_shapes::err_payload(&payload.to_string()))
    }
}
