//! Shared by the schema-vector runners (`*_vectors.rs`): loading repository files, and checking
//! every case of a vectors file against its JSON Schema and against the Rust types.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// A JSON file, by its path from the repository root.
pub fn load(path: &str) -> Value {
    let full = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&full).expect(&full)).expect("JSON")
}

/// A validator for `#/$defs/<def>` of `schema` alone (the file's root, which accepts whole
/// messages, is replaced).
pub fn validator(schema: &Value, def: &str) -> jsonschema::Validator {
    assert!(schema["$defs"].get(def).is_some(), "no $defs/{def}");
    let mut root = schema.clone();
    let object = root.as_object_mut().expect("a schema object");
    object.remove("anyOf");
    object.remove("oneOf");
    root["$ref"] = json!(format!("#/$defs/{def}"));
    jsonschema::validator_for(&root).expect("schema compiles")
}

/// Checks every case of `tests/vectors/<protocol>.json` (at least `min_cases` of them): the
/// schema (the case's `schema`, else the file's) accepts it exactly when it is `valid`, and so
/// does `rust_round(def, json)`, which reads the JSON into the Rust type for `def` and writes it
/// back; a valid case must come back as its JSON (or its `canonical` form).
pub fn check_cases(
    protocol: &str,
    min_cases: usize,
    rust_round: impl Fn(&str, &Value) -> Result<Value, String>,
) {
    let doc = load(&format!("tests/vectors/{protocol}.json"));
    assert_eq!(doc["protocol"], protocol);
    let default_schema = doc["schema"].as_str().unwrap().to_owned();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= min_cases, "{} cases", cases.len());
    let mut schemas = BTreeMap::new();
    let mut validators = BTreeMap::new();
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let def = case["def"].as_str().unwrap();
        let path = case["schema"]
            .as_str()
            .unwrap_or(&default_schema)
            .to_owned();
        let json = &case["json"];
        let valid = case["valid"].as_bool().unwrap();
        let schema = schemas
            .entry(path.clone())
            .or_insert_with(|| load(&path))
            .clone();
        let v = validators
            .entry((path, def.to_owned()))
            .or_insert_with(|| validator(&schema, def));
        let schema_ok = v.is_valid(json);
        if schema_ok != valid {
            let errors: Vec<String> = v.iter_errors(json).map(|e| e.to_string()).collect();
            failures.push(format!("{name}: schema says {schema_ok} {errors:?}"));
        }
        match (rust_round(def, json), valid) {
            (Ok(back), true) => {
                let expected = case.get("canonical").unwrap_or(json);
                if &back != expected {
                    failures.push(format!("{name}: written back as {back}"));
                }
            }
            (Err(why), true) => failures.push(format!("{name}: Rust refuses: {why}")),
            (Ok(_), false) => failures.push(format!("{name}: Rust accepts an invalid case")),
            (Err(_), false) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
