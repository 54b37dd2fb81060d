//! The ircdocs parser-tests `msg-split` vectors (tests/vectors/irc-msg-split.json) against
//! `Message::parse`: tags (values unescaped, the last of a repeated key wins), source, verb, params.
//!
//! Our parser agrees with every vector. Two rules it follows that the vectors rely on: runs of
//! spaces separate like one space (RFC 1459, not RFC 2812's single space), and a backslash before
//! a character with no escape meaning is dropped in tag values.

use std::collections::BTreeMap;

use deskwire::irc::Message;
use serde_json::Value;

fn vectors() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/vectors/irc-msg-split.json"
    );
    let text = std::fs::read_to_string(path).expect("vector file");
    let json: Value = serde_json::from_str(&text).expect("valid JSON");
    json["tests"].as_array().expect("tests array").clone()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|v| v.as_str().expect("string").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn msg_split_vectors() {
    let vectors = vectors();
    assert_eq!(vectors.len(), 35);
    for vector in vectors {
        let input = vector["input"].as_str().expect("input");
        let atoms = &vector["atoms"];
        let msg = Message::parse(input.as_bytes())
            .unwrap_or_else(|e| panic!("{input:?} does not parse: {e}"));

        assert_eq!(
            msg.command,
            atoms["verb"].as_str().unwrap(),
            "verb of {input:?}"
        );
        assert_eq!(
            msg.source.map(|s| s.raw),
            atoms["source"].as_str(),
            "source of {input:?}"
        );
        assert_eq!(
            msg.params(),
            strings(&atoms["params"]).as_slice(),
            "params of {input:?}"
        );

        // Repeated keys: the last one wins, as the vectors (and the IRCv3 spec) ask.
        let mut tags = BTreeMap::new();
        for (key, value) in msg.tags() {
            tags.insert(key.to_owned(), value.into_owned());
        }
        let expected: BTreeMap<String, String> = atoms["tags"]
            .as_object()
            .map(|map| {
                map.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().expect("tag value").to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(tags, expected, "tags of {input:?}");
        for (key, value) in &expected {
            assert_eq!(
                msg.tag(key).as_deref(),
                Some(value.as_str()),
                "tag {key} of {input:?}"
            );
        }
    }
}
