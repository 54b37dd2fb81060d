//! Canonical JSON text, for comparing payloads whatever their key order and number spelling.
//!
//! `jobs.create` is idempotent by `jobId`: a repeat with the same payload gets the first answer,
//! one with a different payload is a conflict. "Same" must not depend on how the Commander's
//! JSON library orders keys or spells numbers, so payloads are compared in this form: object
//! keys sorted by their UTF-8 bytes, no whitespace, strings escaped as `serde_json` does, and a
//! number with an integral value written as an integer (`1800.0` → `1800`).

use serde_json::Value;

/// The canonical text of `value`.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => out.push_str(&value.to_string()),
        Value::Number(n) => {
            // Integers within ±2^53 are exact in a double, so the conversion keeps the value.
            match n.as_f64() {
                Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
                    out.push_str(&(f as i64).to_string());
                }
                _ => out.push_str(&n.to_string()),
            }
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write(item, out);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn order_and_numbers_do_not_matter() {
        let a: Value = serde_json::from_str(r#"{"b":[1,{"y":2.0,"x":"é"}],"a":1800}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{ "a": 1800.0, "b": [1, {"x":"é","y":2}] }"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"a":1800,"b":[1,{"x":"é","y":2}]}"#);
        assert_ne!(
            canonical_json(&json!([1, 2])),
            canonical_json(&json!([2, 1]))
        );
        assert_ne!(
            canonical_json(&json!({"a": 0.5})),
            canonical_json(&json!({"a": 1}))
        );
    }
}
