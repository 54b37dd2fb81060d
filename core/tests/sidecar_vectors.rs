//! The sidecar conformance vectors (tests/vectors/sidecar.json), the ones every binding runs.
//!
//! Each case is checked against `#/$defs/<def>` of its schema (the case's `schema`, else the
//! file's) and read by Rust: whole lines through the sidecar dialect
//! ([`deskwire::sidecar::read_message`]), params and results through
//! [`SidecarParams`] / [`SidecarResult`]. Both accept a case exactly when `valid`; a valid case
//! written back gives its JSON again (or its `canonical` form).

mod support;

use support::load;

use deskwire::schemas::sidecar_method_of;
use deskwire::sidecar::SidecarMethod;
use serde_json::Value;

/// Reads `json` as the Rust type for `def` and writes it back: core's table
/// ([`deskwire::schemas::read`]), the one every binding uses.
fn rust_round(def: &str, json: &Value) -> Result<Value, String> {
    deskwire::schemas::read("sidecar", def, json).map_err(|e| e.to_string())
}

#[test]
fn cases_match_schema_and_types() {
    support::check_cases("sidecar", 90, rust_round);
}

#[test]
fn every_method_has_params_and_result_cases() {
    let doc = load("tests/vectors/sidecar.json");
    let valid_defs: Vec<&str> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["valid"] == true)
        .map(|c| c["def"].as_str().unwrap())
        .collect();
    for method in SidecarMethod::ALL {
        for params in [true, false] {
            assert!(
                valid_defs
                    .iter()
                    .any(|d| sidecar_method_of(d) == Some((method, params))),
                "{method}: no valid {} case",
                if params { "params" } else { "result" }
            );
        }
    }
}

/// Every schema compiles, and the copy of ToolCall in ipc-message equals tool-request's.
#[test]
fn schemas_compile_and_shared_defs_are_identical() {
    let ipc = load("core/schemas/ipc-message.schema.json");
    let tools = load("core/schemas/tool-request.schema.json");
    for (name, def) in tools["$defs"].as_object().unwrap() {
        assert_eq!(&ipc["$defs"][name], def, "$defs/{name} differs");
    }
    for schema in [&ipc, &tools] {
        jsonschema::validator_for(schema).expect("compiles");
    }
    let methods: Vec<&str> = ipc["$defs"]["Method"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let ours: Vec<&str> = SidecarMethod::ALL.iter().map(|m| m.as_str()).collect();
    assert_eq!(methods, ours);
    let codes: Vec<&str> = ipc["$defs"]["KnownErrorCode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let ours: Vec<&str> = deskwire::jsonrpc::SidecarErrorCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(codes, ours);
}
