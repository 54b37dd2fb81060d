//! Runs `tests/vectors/rexd.json`: every case against the JSON Schema (`#/$defs/<def>` of
//! `core/schemas/rexd.schema.json`) and through the Rust types, which must agree with the
//! case's `valid`; valid cases must write back to `canonical` (or `json` when absent).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use deskwire::rexd::Method;
use deskwire::schemas::rexd_method_of;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(path: &str) -> Value {
    let text = std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `$defs` that are fragments or documentation, not types a case parses into.
const NOT_TYPES: [&str; 2] = ["Program", "ErrorCode"];

/// Parses `json` as the Rust type for `def` through the same entry point a peer uses, and
/// writes it back: core's table ([`deskwire::schemas::read`]), the one every binding uses.
fn parse_and_write(def: &str, json: &Value) -> Result<Value, String> {
    deskwire::schemas::read("rexd", def, json).map_err(|e| e.to_string())
}

#[test]
fn vectors_agree_with_schema_and_types() {
    let vectors = load("tests/vectors/rexd.json");
    assert_eq!(vectors["protocol"], "rexd");
    let schema = load(vectors["schema"].as_str().unwrap());
    let defs = schema["$defs"].as_object().unwrap();

    let mut validators = HashMap::new();
    let mut covered = BTreeSet::new();
    let mut failures = Vec::new();
    let cases = vectors["cases"].as_array().unwrap();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let def = case["def"].as_str().unwrap();
        let json = &case["json"];
        let valid = case["valid"].as_bool().unwrap();
        assert!(defs.contains_key(def), "{name}: no $defs entry {def}");

        let validator = validators.entry(def.to_owned()).or_insert_with(|| {
            // The def alone: the file's root (whole messages) is replaced.
            let mut s = schema.clone();
            let object = s.as_object_mut().unwrap();
            object.remove("oneOf");
            object.insert("$ref".into(), Value::String(format!("#/$defs/{def}")));
            jsonschema::validator_for(&s).unwrap_or_else(|e| panic!("schema for {def}: {e}"))
        });
        if validator.is_valid(json) != valid {
            let why: Vec<String> = validator.iter_errors(json).map(|e| e.to_string()).collect();
            failures.push(format!(
                "{name}: schema says {}, want {valid} {why:?}",
                !valid
            ));
        }

        match (parse_and_write(def, json), valid) {
            (Ok(written), true) => {
                let want = case.get("canonical").unwrap_or(json);
                if &written != want {
                    failures.push(format!("{name}: wrote {written}, want {want}"));
                }
                covered.insert(def.to_owned());
            }
            (Err(e), true) => failures.push(format!("{name}: Rust refused a valid case: {e}")),
            (Ok(written), false) => failures.push(format!(
                "{name}: Rust accepted an invalid case as {written}"
            )),
            (Err(_), false) => {}
        }
        if !valid {
            assert!(
                case.get("canonical").is_none(),
                "{name}: canonical on an invalid case"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );

    let uncovered: Vec<&String> = defs
        .keys()
        .filter(|d| !covered.contains(*d) && !NOT_TYPES.contains(&d.as_str()))
        .collect();
    assert!(
        uncovered.is_empty(),
        "$defs without a valid case: {uncovered:?}"
    );
    assert!(cases.len() > 150);
}

#[test]
fn every_method_has_params_and_result_defs() {
    let schema = load("core/schemas/rexd.schema.json");
    let defs = schema["$defs"].as_object().unwrap();
    for def in defs.keys() {
        if def.ends_with("Params") || def.ends_with("Result") {
            if def == "OkResult" {
                continue;
            }
            assert!(
                rexd_method_of(def).is_some(),
                "{def} names no request method"
            );
        }
    }
    for m in Method::ALL.into_iter().filter(|m| !m.is_event()) {
        let n = defs.keys().filter(|d| rexd_method_of(d) == Some(m)).count();
        assert_eq!(n, 2, "{m}: params and result defs");
    }
}
