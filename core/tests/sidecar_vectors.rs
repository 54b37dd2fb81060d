//! The sidecar conformance vectors (tests/vectors/sidecar.json), the ones every binding runs.
//!
//! Each case is checked against `#/$defs/<def>` of its schema (the case's `schema`, else the
//! file's) and read by Rust: whole lines through the sidecar dialect
//! ([`deskwire::sidecar::read_message`]), params and results through
//! [`SidecarParams`] / [`SidecarResult`]. Both accept a case exactly when `valid`; a valid case
//! written back gives its JSON again (or its `canonical` form).

mod support;

use support::load;

use deskwire::jsonrpc::dialect::Inbound;
use deskwire::sidecar::{
    self, Progress, SidecarMethod, SidecarParams, SidecarResult, ToolCall, ToolResult,
    TrainingConfig,
};
use serde_json::{Value, json};

/// Reads a whole line with the dialect, keeps it when its kind is one of `kinds`, writes it
/// back.
fn line_round(json: &Value, kinds: &[&str]) -> Result<Value, String> {
    let text = serde_json::to_string(json).unwrap();
    let message = sidecar::read_message(text.as_bytes()).map_err(|e| e.to_string())?;
    let kind = match &message {
        Inbound::Request { .. } => "request",
        Inbound::Notification { .. } => "notification",
        Inbound::Result { .. } => "result",
        Inbound::Error { .. } => "error",
        Inbound::Progress { .. } => "progress",
    };
    if !kinds.contains(&kind) {
        return Err(format!("a {kind}, not one of {kinds:?}"));
    }
    // Written back by hand from what the dialect read (the dialect's own writer is tested
    // beside it), so that this runner depends only on the read side.
    let id = match &message {
        Inbound::Request { id, .. }
        | Inbound::Result { id, .. }
        | Inbound::Error { id, .. }
        | Inbound::Progress { id, .. } => serde_json::to_value(id).unwrap(),
        Inbound::Notification { .. } => unreachable!("the sidecar dialect has none"),
    };
    let raw = |r: &deskwire::jsonrpc::RawJson| -> Value { serde_json::from_str(r.get()).unwrap() };
    Ok(match &message {
        Inbound::Request { method, params, .. } => {
            json!({"id": id, "method": method, "params": params.as_ref().map(raw)})
        }
        Inbound::Result { result, .. } => json!({"id": id, "result": raw(result)}),
        Inbound::Error { error, .. } => json!({
            "id": id,
            "error": {"code": error.code.to_string(), "message": error.message}
        }),
        Inbound::Progress { progress, .. } => json!({"id": id, "progress": raw(progress)}),
        Inbound::Notification { .. } => unreachable!("the sidecar dialect has none"),
    })
}

fn serde_round<T: serde::de::DeserializeOwned + serde::Serialize>(
    json: &Value,
) -> Result<Value, String> {
    if !json.is_object() {
        return Err("not an object".into());
    }
    let value: T = serde_json::from_value(json.clone()).map_err(|e| e.to_string())?;
    Ok(serde_json::to_value(value).expect("serialises"))
}

/// The method whose params (or result) `def` names.
fn method_of(def: &str) -> Option<(SidecarMethod, bool)> {
    let (stem, params) = if let Some(stem) = def.strip_suffix("Params") {
        (stem, true)
    } else if let Some(stem) = def.strip_suffix("Result") {
        (stem, false)
    } else {
        return None;
    };
    let method = match stem {
        "HealthPing" => SidecarMethod::HealthPing,
        "Shutdown" => SidecarMethod::LifecycleShutdown,
        "Complete" => SidecarMethod::InferenceComplete,
        "Embed" => SidecarMethod::InferenceEmbed,
        "Plan" => SidecarMethod::InferencePlan,
        "TrainingStart" => SidecarMethod::TrainingStart,
        "TrainingStop" => SidecarMethod::TrainingStop,
        "ModelList" => SidecarMethod::ModelList,
        "ModelLoad" => SidecarMethod::ModelLoad,
        "ModelSave" => SidecarMethod::ModelSave,
        _ => return None,
    };
    Some((method, params))
}

fn rust_round(def: &str, json: &Value) -> Result<Value, String> {
    if let Some((method, params)) = method_of(def) {
        let text = serde_json::to_string(json).unwrap();
        let raw = if params {
            SidecarParams::parse(method.as_str(), &text)
                .map(|p| p.to_raw())
                .map_err(|e| e.to_string())?
        } else {
            SidecarResult::parse(method.as_str(), &text)
                .map(|r| r.to_raw())
                .map_err(|e| e.to_string())?
        };
        return Ok(serde_json::from_str(raw.get()).unwrap());
    }
    match def {
        "Request" => line_round(json, &["request"]),
        "TypedRequest" => {
            let back = line_round(json, &["request"])?;
            let params = serde_json::to_string(&back["params"]).unwrap();
            let typed = SidecarParams::parse(back["method"].as_str().unwrap(), &params)
                .map_err(|e| e.to_string())?;
            let mut written = back.clone();
            written["params"] = serde_json::from_str(typed.to_raw().get()).unwrap();
            Ok(written)
        }
        "SuccessResponse" => line_round(json, &["result"]),
        "ErrorResponse" => line_round(json, &["error"]),
        "ProgressMessage" => line_round(json, &["progress"]),
        "Response" => line_round(json, &["result", "error"]),
        "Message" => line_round(json, &["request", "result", "error", "progress"]),
        "Method" => json
            .as_str()
            .and_then(SidecarMethod::parse)
            .map(|m| json!(m.as_str()))
            .ok_or_else(|| "unknown method".to_owned()),
        "ErrorCode" => json
            .as_str()
            .filter(|c| sidecar::is_error_code(c))
            .map(|c| json!(c))
            .ok_or_else(|| "not SCREAMING_SNAKE_CASE".to_owned()),
        "ErrorObject" => {
            line_round(&json!({"id": "x", "error": json}), &["error"]).map(|v| v["error"].clone())
        }
        "Progress" => serde_round::<Progress>(json),
        "TrainingConfig" => serde_round::<TrainingConfig>(json),
        "ModelInfo" => serde_round::<deskwire::sidecar::ModelInfo>(json),
        "ToolCall" => serde_round::<ToolCall>(json),
        "ToolResult" => serde_round::<ToolResult>(json),
        other => panic!("no Rust type for def {other}"),
    }
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
                    .any(|d| method_of(d) == Some((method, params))),
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
