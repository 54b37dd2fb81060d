//! OA1 values ↔ JSON for `Oa1`, `Oa1Client` and `Oa1Server`, engine-free so every conversion is unit-tested without Godot.
//!
//! Configurations, outputs, events and stats go through the core's serde shapes (those of
//! `tests/vectors/oa1.json`). Frames have no serde shape in the core (they borrow from the line);
//! they are written here field by field, named as the vectors name them. Whether a text is a frame, how text is escaped and chunked and
//! how an `ERR` payload reads is the core's.

use deskwire::oa1::chunk::{self, MIN_PAYLOAD_BUDGET};
use deskwire::oa1::escape::escape;
use deskwire::oa1::{Config, Failure, Frame, FrameType, Output, Stats};
use serde_json::{Value, json};

/// Every frame type, for reading a type's wire name back (the core only writes it).
const FRAME_TYPES: [FrameType; 7] = [
    FrameType::Req,
    FrameType::Res,
    FrameType::Err,
    FrameType::Cancel,
    FrameType::Accept,
    FrameType::ReqZ,
    FrameType::ResZ,
];

/// An endpoint configuration from its JSON shape: `channel` and `nick` required, every other
/// key the spec's default when missing, unknown keys refused (by the core).
pub fn config(value: Value) -> Result<Config, String> {
    serde_json::from_value(value).map_err(|e| format!("invalid OA1 configuration: {e}"))
}

/// What `poll_output` answers: `{"transmit": line}`, `{"event": {...}}` or `{"timeout": ms}`.
pub fn output(output: &Output) -> Value {
    serde_json::to_value(output).expect("an OA1 output serializes")
}

/// The endpoint's counters by name.
pub fn stats(stats: &Stats) -> Value {
    serde_json::to_value(stats).expect("OA1 stats serialize")
}

/// A `PRIVMSG` text as a frame, `{"type", "id", "seq", "more", "payload"}` (the payload still
/// escaped), or `None` when it is not one.
pub fn parse_frame(text: &str) -> Option<Value> {
    Frame::parse(text).map(|f| frame_json(&f))
}

fn frame_json(frame: &Frame<'_>) -> Value {
    json!({
        "type": frame.kind.as_str(),
        "id": frame.id,
        "seq": frame.seq,
        "more": frame.more,
        "payload": frame.payload,
    })
}

/// The text of a frame (`payload` already escaped), when the core reads that text back as the
/// same frame and it stays one IRC line: the type is one of the wire names, the id and seq are
/// valid, the payload holds no raw NUL, CR or LF.
pub fn format_frame(
    kind: &str,
    id: &str,
    seq: i64,
    more: bool,
    payload: &str,
) -> Result<String, String> {
    let kind = FRAME_TYPES
        .into_iter()
        .find(|t| t.as_str() == kind)
        .ok_or_else(|| format!("unknown frame type {kind:?}"))?;
    let seq = u32::try_from(seq).map_err(|_| format!("seq {seq} is not a 32-bit unsigned"))?;
    let frame = Frame {
        kind,
        id,
        seq,
        more,
        payload,
    };
    // The core's check: the text reads back as this frame and stays one IRC line (no raw
    // NUL, CR or LF in the payload).
    frame.format().map_err(|e| e.to_string())
}

/// `text` escaped and cut into frame payloads of at most `budget` bytes, as they go on the
/// wire.
pub fn split(text: &str, budget: i64) -> Result<Vec<String>, String> {
    let budget = usize::try_from(budget)
        .ok()
        .filter(|b| *b >= MIN_PAYLOAD_BUDGET)
        .ok_or_else(|| {
            format!("a budget below {MIN_PAYLOAD_BUDGET} bytes cannot hold a character")
        })?;
    let escaped = escape(text);
    Ok(chunk::split(&escaped, |_| budget)
        .into_iter()
        .map(|c| chunk::wire_payload(c).into_owned())
        .collect())
}

/// An `ERR` payload as `{"code", "message"}` (code `error` when it names none).
pub fn err_payload(payload: &str) -> Value {
    let failure = Failure::from_err_payload(payload);
    json!({"code": failure.code(), "message": failure.message()})
}

#[cfg(test)]
mod tests {
    use super::*;
    use deskwire::oa1::{Client, Event, Failure, LocalError};

    #[test]
    fn configs_take_defaults_and_refuse_unknown_keys() {
        let c = config(
            json!({"channel": "#desk", "nick": "desk", "max_message_bytes": 16,
                              "pacing": {"burst": 2, "interval_ms": 500}}),
        )
        .unwrap();
        assert_eq!(c.max_message_bytes, 16);
        assert_eq!(c.pacing.burst, 2);
        assert_eq!(
            c.request_timeout_ms,
            Config::new("#desk", "desk").request_timeout_ms
        );
        let auth = config(json!({"channel": "#d", "nick": "d",
                                 "auth": {"secret": "s", "epoch_unix_ms": 5}, "compression": true}))
        .unwrap();
        assert_eq!(auth.auth.unwrap().secret, b"s");
        assert!(auth.compression);
        for bad in [
            json!({"nick": "d"}),
            json!({"channel": "#d", "nick": "d", "max_streams": "many"}),
            json!({"channel": "#d", "nick": "d", "no_such_option": 1}),
            json!([1]),
        ] {
            let e = config(bad.clone()).unwrap_err();
            assert!(e.starts_with("invalid OA1 configuration"), "{bad}: {e}");
        }
    }

    #[test]
    fn outputs_and_stats_in_the_vector_shapes() {
        assert_eq!(
            output(&Output::Transmit("PRIVMSG #d :x".into())),
            json!({"transmit": "PRIVMSG #d :x"})
        );
        assert_eq!(output(&Output::Timeout(31_000)), json!({"timeout": 31000}));
        let done = Output::Event(Event::Response {
            id: "a".into(),
            text: "t".into(),
            truncated: true,
        });
        assert_eq!(
            output(&done),
            json!({"event": {"response": {"id": "a", "text": "t", "truncated": true}}})
        );
        let failed = Output::Event(Event::Failed {
            id: "a".into(),
            failure: Failure::from_err_payload("too_large: big"),
        });
        assert_eq!(
            output(&failed),
            json!({"event": {"failed": {"id": "a", "error": "too_large", "message": "big"}}})
        );
        let client = Client::new(Config::new("#d", "d"), 1);
        let s = stats(&client.stats());
        assert_eq!(s["lines_in"], 0);
        assert_eq!(s["bytes_buffered"], 0);
        assert!(s["compressed_out"].is_u64());
    }

    #[test]
    fn local_errors_have_the_vector_names() {
        let mut client = Client::new(
            config(json!({"channel": "#d", "nick": "d", "max_message_bytes": 4})).unwrap(),
            1,
        );
        let e = client.request(0, "too long", None).unwrap_err();
        assert_eq!(e.code(), "too_large");
        assert_eq!(
            client.cancel(0, "nope", "x").unwrap_err(),
            LocalError::UnknownRequest("nope".into())
        );
    }

    #[test]
    fn frames_parse_into_their_fields() {
        assert_eq!(
            parse_frame("OA1 RES k3p 12 1 two  spaces "),
            Some(json!({"type": "RES", "id": "k3p", "seq": 12, "more": true,
                        "payload": "two  spaces "}))
        );
        assert_eq!(parse_frame("OA1 res abc 1 0 x"), None);
        assert_eq!(parse_frame("hello"), None);
    }

    #[test]
    fn frames_format_when_the_core_reads_them_back() {
        assert_eq!(
            format_frame("REQ", "abc", 1, false, "").unwrap(),
            "OA1 REQ abc 1 0"
        );
        assert_eq!(
            format_frame("RESZ", "abc", 4_294_967_295, true, "x y").unwrap(),
            "OA1 RESZ abc 4294967295 1 x y"
        );
        for (kind, id, seq) in [
            ("FOO", "abc", 1),
            ("req", "abc", 1),
            ("REQ", "a b", 1),
            ("REQ", "", 1),
            ("REQ", "ab.c", 1),
            ("REQ", "abc", 0),
            ("REQ", "abc", -1),
            ("REQ", "abc", 4_294_967_296),
        ] {
            assert!(
                format_frame(kind, id, seq, false, "x").is_err(),
                "{kind} {id:?} {seq}"
            );
        }
        // A raw NUL, CR or LF would end the IRC line and inject the rest as a command.
        for payload in ["x\r\nQUIT", "x\nQUIT", "\0"] {
            let err = format_frame("REQ", "ab", 1, false, payload).unwrap_err();
            assert!(err.contains("raw"), "{payload:?}: {err}");
        }
        // Every type the core knows formats and parses back.
        for t in FRAME_TYPES {
            let text = format_frame(t.as_str(), "i", 1, false, "p").unwrap();
            assert_eq!(parse_frame(&text).unwrap()["type"], t.as_str());
        }
    }

    #[test]
    fn split_escapes_and_cuts() {
        assert_eq!(split("", 240).unwrap(), vec![""]);
        assert_eq!(split("abcdefghij", 4).unwrap(), vec!["abcd", "efgh", "ij"]);
        assert_eq!(split("\n\n\n", 4).unwrap(), vec!["\\n\\n", "\\n"]);
        assert_eq!(split("hello world ", 240).unwrap(), vec!["hello world\\s"]);
        assert!(split("x", 3).is_err());
        assert!(split("x", -1).is_err());
    }

    #[test]
    fn err_payloads_split_at_the_first_separator() {
        assert_eq!(
            err_payload("a: b: c"),
            json!({"code": "a", "message": "b: c"})
        );
        assert_eq!(
            err_payload("Bad-Code: x"),
            json!({"code": "error", "message": "Bad-Code: x"})
        );
    }
}
