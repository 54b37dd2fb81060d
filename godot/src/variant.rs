//! Godot values ↔ JSON values: the one place where structured values cross between GDScript
//! and deskwire.
//!
//! Every structured value the core exchanges (configs, events, stats, tool lists, tool calls)
//! has a serde shape there; this crate turns it into a `serde_json::Value` and this module
//! turns that into a `Variant` (objects become `Dictionary`, arrays `Array`), or back. No type
//! is converted by hand anywhere else.
//!
//! From Godot to JSON, two things need a rule:
//! - Godot's `JSON.parse_string` makes every number a float, so a whole float that an `i64`
//!   holds exactly becomes a JSON integer (`5.0` → `5`): a model's `{"timeout_sec": 5}` parsed
//!   in GDScript must still pass an `"integer"` schema. NaN and infinities have no JSON form.
//! - Only JSON's types cross: `Vector2`, objects, callables and the like are refused with the
//!   path of the offending value, and nesting is capped so a self-containing array is an
//!   error, not a stack overflow.

use godot::builtin::{
    GString, PackedByteArray, PackedFloat32Array, PackedFloat64Array, PackedInt32Array,
    PackedInt64Array, PackedStringArray, StringName, VarArray, VarDictionary, Variant, VariantType,
};
use godot::meta::ToGodot;
use serde_json::{Map, Number, Value};

/// Nesting deeper than this is refused (serde_json's own parser stops at 128 as well).
pub const MAX_DEPTH: usize = 128;

/// Why a Godot value has no JSON form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// A type JSON cannot hold (`Vector2`, `Object`, `Callable`, ...).
    #[error(
        "{path}: a {type_name} has no JSON form (use Dictionary, Array, String, int, float, bool or null)"
    )]
    Unsupported {
        /// Where, as `$.key[index]`.
        path: String,
        /// Godot's name of the type.
        type_name: String,
    },
    /// A Dictionary key that is not a String or StringName.
    #[error("{path}: dictionary keys must be strings, not {type_name}")]
    KeyNotString {
        /// Where.
        path: String,
        /// Godot's name of the key's type.
        type_name: String,
    },
    /// NaN or an infinity.
    #[error("{path}: {value} has no JSON form")]
    NotFinite {
        /// Where.
        path: String,
        /// The number as text.
        value: String,
    },
    /// Nested deeper than [`MAX_DEPTH`] (or containing itself).
    #[error("{path}: nested deeper than {MAX_DEPTH} levels")]
    TooDeep {
        /// Where.
        path: String,
    },
    /// A value of the right kind but the wrong JSON type at the top (an array where an
    /// object was wanted).
    #[error("{0}")]
    Shape(String),
}

/// The JSON number for a Godot float: an integer when it is whole and an `i64` holds it
/// exactly, else the float itself; `None` for NaN and infinities.
pub fn number_from_float(f: f64) -> Option<Number> {
    // 2^63 is exactly representable; every whole float below it in magnitude fits an i64.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if f.fract() == 0.0 && (-LIMIT..LIMIT).contains(&f) {
        // Whole and in range: the cast is exact. `-0.0` becomes 0.
        Some(Number::from(f as i64))
    } else {
        Number::from_f64(f)
    }
}

/// `$` plus a key: `$.name`, or `$["odd key"]` when the key is not a plain word.
pub fn child_path(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !key.as_bytes()[0].is_ascii_digit();
    if plain {
        format!("{parent}.{key}")
    } else {
        format!("{parent}[{}]", Value::String(key.to_owned()))
    }
}

/// Rust text as a Godot String, the one conversion for text that comes from a peer (a
/// command's output, a server's message, a nick). A Godot String ends at its first NUL, so each
/// NUL becomes U+FFFD (`\u{FFFD}`, the replacement character) and the text after it is kept.
pub fn gstring(text: &str) -> GString {
    if text.contains('\0') {
        GString::from(text.replace('\0', "\u{FFFD}").as_str())
    } else {
        GString::from(text)
    }
}

/// A JSON value as a Variant: `null`, `bool`, `int` (or `float` for integers past `i64`),
/// `float`, `String`, `Array`, `Dictionary`.
pub fn to_variant(value: &Value) -> Variant {
    match value {
        Value::Null => Variant::nil(),
        Value::Bool(b) => b.to_variant(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_variant(),
            None => n.as_f64().unwrap_or(f64::NAN).to_variant(),
        },
        Value::String(s) => gstring(s).to_variant(),
        Value::Array(items) => array(items).to_variant(),
        Value::Object(map) => dictionary(map).to_variant(),
    }
}

/// A JSON object as a Dictionary with String keys.
pub fn dictionary(map: &Map<String, Value>) -> VarDictionary {
    let mut d = VarDictionary::new();
    for (k, v) in map {
        d.set(&gstring(k).to_variant(), &to_variant(v));
    }
    d
}

/// A JSON value as a Dictionary: an object's entries, or `{"value": v}` for anything else
/// (so a signal typed `Dictionary` always gets one).
pub fn dictionary_of(value: &Value) -> VarDictionary {
    match value {
        Value::Object(map) => dictionary(map),
        other => {
            let mut d = VarDictionary::new();
            d.set(&"value".to_variant(), &to_variant(other));
            d
        }
    }
}

/// A JSON array as an untyped Array.
pub fn array(items: &[Value]) -> VarArray {
    let mut a = VarArray::new();
    for v in items {
        a.push(&to_variant(v));
    }
    a
}

/// A Variant as JSON (see the module docs for the rules).
pub fn from_variant(v: &Variant) -> Result<Value, ConvertError> {
    walk(v, "$", 0)
}

/// A Dictionary as a JSON object.
pub fn from_dictionary(d: &VarDictionary) -> Result<Map<String, Value>, ConvertError> {
    match walk(&d.to_variant(), "$", 0)? {
        Value::Object(map) => Ok(map),
        _ => unreachable!("a Dictionary converts to an object"),
    }
}

fn float(f: f64, path: &str) -> Result<Value, ConvertError> {
    number_from_float(f)
        .map(Value::Number)
        .ok_or_else(|| ConvertError::NotFinite {
            path: path.to_owned(),
            value: f.to_string(),
        })
}

fn items(values: impl Iterator<Item = Result<Value, ConvertError>>) -> Result<Value, ConvertError> {
    values.collect::<Result<Vec<_>, _>>().map(Value::Array)
}

fn walk(v: &Variant, path: &str, depth: usize) -> Result<Value, ConvertError> {
    if depth > MAX_DEPTH {
        return Err(ConvertError::TooDeep {
            path: path.to_owned(),
        });
    }
    let at = |i: usize| format!("{path}[{i}]");
    Ok(match v.get_type() {
        VariantType::NIL => Value::Null,
        VariantType::BOOL => Value::Bool(v.to::<bool>()),
        VariantType::INT => Value::Number(v.to::<i64>().into()),
        VariantType::FLOAT => float(v.to::<f64>(), path)?,
        VariantType::STRING => Value::String(v.to::<GString>().to_string()),
        VariantType::STRING_NAME => Value::String(v.to::<StringName>().to_string()),
        VariantType::ARRAY => {
            let a = v.to::<VarArray>();
            items(
                a.iter_shared()
                    .enumerate()
                    .map(|(i, item)| walk(&item, &at(i), depth + 1)),
            )?
        }
        VariantType::DICTIONARY => {
            let d = v.to::<VarDictionary>();
            let mut map = Map::new();
            for (key, value) in d.iter_shared() {
                let key = match key.get_type() {
                    VariantType::STRING => key.to::<GString>().to_string(),
                    VariantType::STRING_NAME => key.to::<StringName>().to_string(),
                    other => {
                        return Err(ConvertError::KeyNotString {
                            path: path.to_owned(),
                            type_name: format!("{other:?}"),
                        });
                    }
                };
                let child = child_path(path, &key);
                map.insert(key, walk(&value, &child, depth + 1)?);
            }
            Value::Object(map)
        }
        VariantType::PACKED_STRING_ARRAY => Value::Array(
            v.to::<PackedStringArray>()
                .as_slice()
                .iter()
                .map(|s| Value::String(s.to_string()))
                .collect(),
        ),
        VariantType::PACKED_BYTE_ARRAY => Value::Array(
            v.to::<PackedByteArray>()
                .as_slice()
                .iter()
                .map(|&b| Value::from(b))
                .collect(),
        ),
        VariantType::PACKED_INT32_ARRAY => Value::Array(
            v.to::<PackedInt32Array>()
                .as_slice()
                .iter()
                .map(|&i| Value::from(i))
                .collect(),
        ),
        VariantType::PACKED_INT64_ARRAY => Value::Array(
            v.to::<PackedInt64Array>()
                .as_slice()
                .iter()
                .map(|&i| Value::from(i))
                .collect(),
        ),
        VariantType::PACKED_FLOAT32_ARRAY => items(
            v.to::<PackedFloat32Array>()
                .as_slice()
                .iter()
                .enumerate()
                .map(|(i, &f)| float(f64::from(f), &at(i))),
        )?,
        VariantType::PACKED_FLOAT64_ARRAY => items(
            v.to::<PackedFloat64Array>()
                .as_slice()
                .iter()
                .enumerate()
                .map(|(i, &f)| float(f, &at(i))),
        )?,
        other => {
            return Err(ConvertError::Unsupported {
                path: path.to_owned(),
                type_name: format!("{other:?}"),
            });
        }
    })
}

#[cfg(test)]
mod tests {
    //! Only the engine-free rules run here; the Variant walks run in the engine
    //! (`godot/demo/tests/test_values.gd`).
    use super::*;

    #[test]
    fn whole_floats_become_integers() {
        assert_eq!(number_from_float(5.0), Some(Number::from(5)));
        assert_eq!(number_from_float(-3.0), Some(Number::from(-3)));
        assert_eq!(number_from_float(-0.0), Some(Number::from(0)));
        assert_eq!(
            number_from_float(9_007_199_254_740_993.0),
            Some(Number::from(9_007_199_254_740_992_i64))
        );
        assert_eq!(
            number_from_float(-9_223_372_036_854_775_808.0),
            Some(Number::from(i64::MIN))
        );
    }

    #[test]
    fn fractions_and_huge_floats_stay_floats() {
        assert_eq!(number_from_float(0.5), Number::from_f64(0.5));
        // 2^63 is one past i64::MAX: it stays a float rather than wrapping.
        let big = 9_223_372_036_854_775_808.0;
        assert_eq!(number_from_float(big), Number::from_f64(big));
        assert_eq!(number_from_float(1e300), Number::from_f64(1e300));
        assert!(number_from_float(1e300).unwrap().is_f64());
    }

    #[test]
    fn non_finite_floats_have_no_json_form() {
        assert_eq!(number_from_float(f64::NAN), None);
        assert_eq!(number_from_float(f64::INFINITY), None);
        assert_eq!(number_from_float(f64::NEG_INFINITY), None);
    }

    #[test]
    fn paths_quote_keys_that_are_not_words() {
        assert_eq!(child_path("$", "command"), "$.command");
        assert_eq!(child_path("$.a", "b_2"), "$.a.b_2");
        assert_eq!(child_path("$", "two words"), r#"$["two words"]"#);
        assert_eq!(child_path("$", "9lives"), r#"$["9lives"]"#);
        assert_eq!(child_path("$", ""), r#"$[""]"#);
        assert_eq!(child_path("$", "quote\""), r#"$["quote\""]"#);
    }

    #[test]
    fn errors_name_the_path() {
        let e = ConvertError::Unsupported {
            path: "$.args.where".into(),
            type_name: "VECTOR2".into(),
        };
        assert!(
            e.to_string()
                .starts_with("$.args.where: a VECTOR2 has no JSON form")
        );
    }
}
