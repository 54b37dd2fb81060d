//! Runs `tests/vectors/rexd.json`: every case against the JSON Schema (`#/$defs/<def>` of
//! `core/schemas/rexd.schema.json`) and through the Rust types, which must agree with the
//! case's `valid`; valid cases must write back to `canonical` (or `json` when absent).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use deskwire::rexd::{
    Capability, DirEntry, Encoding, ErrorObject, ErrorResponse, Event, FileType, Limits, Method,
    ProcessInfo, ProcessStatus, Request, RequestMessage, Response, Signal, WriteMode,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(path: &str) -> Value {
    let text = std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn raw(json: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(json).unwrap()
}

/// The `$defs` that are fragments or documentation, not types a case parses into.
const NOT_TYPES: [&str; 2] = ["Program", "ErrorCode"];

/// The request method whose params a `…Params` def is, or whose result a `…Result` def is.
fn method_of(def: &str) -> Option<Method> {
    let stem = def
        .strip_suffix("Params")
        .or_else(|| def.strip_suffix("Result"))?;
    Method::ALL.into_iter().filter(|m| !m.is_event()).find(|m| {
        let camel: String = m
            .as_str()
            .split('.')
            .map(|part| {
                let mut c = part.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect();
        camel == stem
    })
}

/// A plain serde round trip, for the nested types.
fn serde_trip<T: DeserializeOwned + Serialize>(json: &Value) -> Result<Value, String> {
    let t: T = serde_json::from_value(json.clone()).map_err(|e| e.to_string())?;
    Ok(serde_json::to_value(&t).unwrap())
}

/// Parses `json` as the Rust type for `def` through the same entry point a peer uses, and
/// writes it back.
fn parse_and_write(def: &str, json: &Value) -> Result<Value, String> {
    let text = json.to_string();
    let event_method = match def {
        "ExecOutput" => Some("exec.stdout"),
        "ExecExit" => Some("exec.exit"),
        "ExecErrorEvent" => Some("exec.error"),
        "PtyOutput" => Some("pty.output"),
        "PtyExit" => Some("pty.exit"),
        _ => None,
    };
    if let Some(method) = event_method {
        let params = raw(json);
        let event = Event::parse(method, Some(&params)).map_err(|e| e.to_string())?;
        return Ok(serde_json::to_value(&event).unwrap()["params"].clone());
    }
    match def {
        "RequestMessage" => {
            let m = RequestMessage::from_slice(text.as_bytes()).map_err(|e| e.to_string())?;
            return Ok(serde_json::from_str(&m.to_line()).unwrap());
        }
        "NotificationMessage" => {
            let e = Event::from_notification(text.as_bytes()).map_err(|e| e.to_string())?;
            return Ok(serde_json::from_str(&e.to_notification()).unwrap());
        }
        "ErrorResponse" => {
            let e = ErrorResponse::from_slice(text.as_bytes()).map_err(|e| e.to_string())?;
            return Ok(serde_json::from_str(&e.to_line()).unwrap());
        }
        "Encoding" => return serde_trip::<Encoding>(json),
        "Capability" => return serde_trip::<Capability>(json),
        "Limits" => return serde_trip::<Limits>(json),
        "ProcessStatus" => return serde_trip::<ProcessStatus>(json),
        "ProcessInfo" => return serde_trip::<ProcessInfo>(json),
        "Signal" => return serde_trip::<Signal>(json),
        "FileType" => return serde_trip::<FileType>(json),
        "DirEntry" => return serde_trip::<DirEntry>(json),
        "WriteMode" => return serde_trip::<WriteMode>(json),
        "ErrorObject" => return serde_trip::<ErrorObject>(json),
        "OkResult" => return serde_trip::<deskwire::rexd::OkResult>(json),
        _ => {}
    }
    let method = method_of(def).unwrap_or_else(|| panic!("no Rust type for def {def}"));
    let r = raw(json);
    if def.ends_with("Params") {
        let req = Request::parse(method.as_str(), Some(&r)).map_err(|e| e.to_string())?;
        assert_eq!(req.method(), method);
        Ok(req.params_value())
    } else {
        let resp = Response::parse(method, &r).map_err(|e| e.to_string())?;
        Ok(serde_json::to_value(&resp).unwrap())
    }
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
            let mut s = schema.clone();
            s.as_object_mut()
                .unwrap()
                .insert("$ref".into(), Value::String(format!("#/$defs/{def}")));
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
            assert!(method_of(def).is_some(), "{def} names no request method");
        }
    }
    for m in Method::ALL.into_iter().filter(|m| !m.is_event()) {
        let n = defs.keys().filter(|d| method_of(d) == Some(m)).count();
        assert_eq!(n, 2, "{m}: params and result defs");
    }
}
