//! Runs `tests/vectors/jsonrpc.json`: every frame is read as the vector says, and every valid
//! message writes back to its canonical text.

use deskwire::jsonrpc::message::{Id, Invalid, Message, Parsed, parse};
use serde_json::Value;

fn load() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/jsonrpc.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read vectors")).expect("JSON")
}

fn id_json(id: &Id) -> Value {
    serde_json::to_value(id).unwrap()
}

fn check_message(name: &str, got: &Message, expect: &Value) {
    let kind = expect["kind"].as_str().unwrap();
    match (kind, got) {
        ("request", Message::Request { id, method, params }) => {
            assert_eq!(id_json(id), expect["id"], "{name}");
            assert_eq!(method, expect["method"].as_str().unwrap(), "{name}");
            assert_eq!(
                params.as_ref().map(|p| p.get()),
                expect["params"].as_str(),
                "{name}"
            );
        }
        ("notification", Message::Notification { method, params }) => {
            assert_eq!(method, expect["method"].as_str().unwrap(), "{name}");
            assert_eq!(
                params.as_ref().map(|p| p.get()),
                expect["params"].as_str(),
                "{name}"
            );
        }
        ("response", Message::Response { id, result }) => {
            assert_eq!(id_json(id), expect["id"], "{name}");
            assert_eq!(result.get(), expect["result"].as_str().unwrap(), "{name}");
        }
        ("error", Message::Error { id, error }) => {
            assert_eq!(id_json(id), expect["id"], "{name}");
            assert_eq!(Some(error.code), expect["code"].as_i64(), "{name}");
        }
        _ => panic!("{name}: expected {kind}, got {got:?}"),
    }
    if let Some(canonical) = expect["canonical"].as_str() {
        assert_eq!(got.to_json(), canonical, "{name}: written form");
        // And the written form reads back to the same message.
        assert_eq!(
            parse(canonical.as_bytes(), 16),
            Ok(Parsed::Single(got.clone())),
            "{name}"
        );
    }
}

fn check_invalid(name: &str, got: &Invalid, expect: &Value) {
    let (id, error) = got.to_error();
    assert_eq!(Some(error.code), expect["code"].as_i64(), "{name}: {got}");
    assert_eq!(id_json(&id), expect["id"], "{name}: {got}");
}

#[test]
fn jsonrpc_vectors() {
    let vectors = load();
    let limit = vectors["batch_limit"].as_u64().unwrap() as usize;
    let cases = vectors["cases"].as_array().unwrap();
    assert!(cases.len() >= 20);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let input = match case["input"].as_str() {
            Some(text) => text.as_bytes().to_vec(),
            None => {
                let hex = case["input_hex"].as_str().unwrap();
                (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                    .collect()
            }
        };
        let expect = &case["expect"];
        match (expect["kind"].as_str().unwrap(), parse(&input, limit)) {
            ("invalid", Err(invalid)) => check_invalid(name, &invalid, expect),
            ("batch", Ok(Parsed::Batch(items))) => {
                let elements = expect["elements"].as_array().unwrap();
                assert_eq!(items.len(), elements.len(), "{name}");
                for (item, e) in items.iter().zip(elements) {
                    match item {
                        Ok(m) => check_message(name, m, e),
                        Err(invalid) => check_invalid(name, invalid, e),
                    }
                }
            }
            (_, Ok(Parsed::Single(m))) => check_message(name, &m, expect),
            (kind, other) => panic!("{name}: expected {kind}, got {other:?}"),
        }
    }
}
