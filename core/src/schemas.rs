//! Values of the JSON Schemas in `core/schemas/`, read through the Rust types.
//!
//! [`read`] takes a protocol (`rexd`, `sidecar`, `gateway`, `mobile`), the name of one of its
//! schema's `$defs` and a JSON value; it reads the value as the Rust type for that def, through
//! the same entry point a peer uses (whole messages through their parsers, params by method,
//! nested types by serde), and writes it back in canonical form. So a host in any language can
//! check a message it built by hand and see it as deskwire writes it, and every binding runs
//! the conformance vectors (`tests/vectors/<protocol>.json`: `def`, `json`, `valid`,
//! `canonical`) through one table instead of its own.
//!
//! [`SCHEMAS`] carries the schema documents themselves, so a host can hand them to its own
//! JSON Schema validator (a binding's users, and its conformance runner for the schema half of
//! each vector) without a copy of this repository.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::{RawValue, to_raw_value};
use serde_json::{Value, json};

use crate::jsonrpc::dialect::Inbound;
use crate::{gateway, mobile, rexd, sidecar};

/// The JSON Schema documents of `core/schemas/` (JSON Schema 2020-12), by file name, as the
/// `schema` field of the conformance vectors names them (without the `core/schemas/` part).
pub const SCHEMAS: &[(&str, &str)] = &[
    (
        "agent-state.schema.json",
        include_str!("../schemas/agent-state.schema.json"),
    ),
    (
        "gateway.schema.json",
        include_str!("../schemas/gateway.schema.json"),
    ),
    (
        "ipc-message.schema.json",
        include_str!("../schemas/ipc-message.schema.json"),
    ),
    (
        "permission.schema.json",
        include_str!("../schemas/permission.schema.json"),
    ),
    (
        "rexd.schema.json",
        include_str!("../schemas/rexd.schema.json"),
    ),
    (
        "tool-request.schema.json",
        include_str!("../schemas/tool-request.schema.json"),
    ),
    (
        "ws-message.schema.json",
        include_str!("../schemas/ws-message.schema.json"),
    ),
];

/// The text of the schema document `name` (a file name of [`SCHEMAS`]; a leading
/// `core/schemas/` is accepted, as the vectors write it).
pub fn schema(name: &str) -> Option<&'static str> {
    let name = name.strip_prefix("core/schemas/").unwrap_or(name);
    SCHEMAS
        .iter()
        .find(|(file, _)| *file == name)
        .map(|(_, text)| *text)
}

/// The schema document a protocol's messages are written against: the one its conformance
/// vectors use unless a case names another.
pub fn protocol_schema(protocol: &str) -> Option<&'static str> {
    schema(match protocol {
        "rexd" => "rexd.schema.json",
        "sidecar" => "ipc-message.schema.json",
        "gateway" => "gateway.schema.json",
        "mobile" => "ws-message.schema.json",
        _ => return None,
    })
}

/// Why a value is not one of its def.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SchemaError {
    /// No such protocol.
    #[error("unknown protocol {0:?}")]
    UnknownProtocol(String),
    /// The protocol's schema has no such def, or it is a fragment with no Rust type.
    #[error(
        "no Rust type for {protocol} def {def:?}: messages and the parts that have a type are \
         read; any def can be checked against the schema with a JSON Schema validator"
    )]
    UnknownDef {
        /// The protocol.
        protocol: String,
        /// The def.
        def: String,
    },
    /// The value does not fit the def.
    #[error("{0}")]
    Invalid(String),
}

/// Reads `json` as `$defs/<def>` of `protocol`'s schema and writes it back (see the module
/// docs).
pub fn read(protocol: &str, def: &str, json: &Value) -> Result<Value, SchemaError> {
    let unknown = || SchemaError::UnknownDef {
        protocol: protocol.to_owned(),
        def: def.to_owned(),
    };
    let result = match protocol {
        "rexd" => read_rexd(def, json),
        "sidecar" => read_sidecar(def, json),
        "gateway" => read_gateway(def, json),
        "mobile" => read_mobile(def, json),
        other => return Err(SchemaError::UnknownProtocol(other.to_owned())),
    };
    match result {
        Some(r) => r.map_err(SchemaError::Invalid),
        None => Err(unknown()),
    }
}

fn serde_round<T: DeserializeOwned + Serialize>(json: &Value) -> Result<Value, String> {
    let value: T = serde_json::from_value(json.clone()).map_err(|e| e.to_string())?;
    Ok(serde_json::to_value(value).expect("deskwire types serialize"))
}

/// Like [`serde_round`], but only objects: serde would otherwise read a struct from an array.
fn object_round<T: DeserializeOwned + Serialize>(json: &Value) -> Result<Value, String> {
    if !json.is_object() {
        return Err("not an object".into());
    }
    serde_round::<T>(json)
}

fn raw(json: &Value) -> Box<RawValue> {
    to_raw_value(json).expect("a JSON value serializes")
}

fn text(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).expect("raw JSON is one value")
}

// ---- rexd ----

/// The request method whose params a `…Params` def is, or whose result a `…Result` def is
/// (`ExecStartParams` → `exec.start`).
pub fn rexd_method_of(def: &str) -> Option<rexd::Method> {
    let stem = def
        .strip_suffix("Params")
        .or_else(|| def.strip_suffix("Result"))?;
    rexd::Method::ALL
        .into_iter()
        .filter(|m| !m.is_event())
        .find(|m| {
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

fn read_rexd(def: &str, json: &Value) -> Option<Result<Value, String>> {
    let e = |e: rexd::RexdError| e.to_string();
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
        return Some(
            rexd::Event::parse(method, Some(&params))
                .map(|event| {
                    serde_json::to_value(&event).expect("events serialize")["params"].clone()
                })
                .map_err(e),
        );
    }
    let line = json.to_string();
    Some(match def {
        "RequestMessage" => rexd::RequestMessage::from_slice(line.as_bytes())
            .map(|m| serde_json::from_str(&m.to_line()).expect("a line is JSON"))
            .map_err(e),
        "NotificationMessage" => rexd::Event::from_notification(line.as_bytes())
            .map(|n| serde_json::from_str(&n.to_notification()).expect("a line is JSON"))
            .map_err(e),
        "ErrorResponse" => rexd::ErrorResponse::from_slice(line.as_bytes())
            .map(|m| serde_json::from_str(&m.to_line()).expect("a line is JSON"))
            .map_err(e),
        "Encoding" => serde_round::<rexd::Encoding>(json),
        "Capability" => serde_round::<rexd::Capability>(json),
        "Limits" => serde_round::<rexd::Limits>(json),
        "ProcessStatus" => serde_round::<rexd::ProcessStatus>(json),
        "ProcessInfo" => serde_round::<rexd::ProcessInfo>(json),
        "ResumeInfo" => serde_round::<rexd::ResumeInfo>(json),
        "Signal" => serde_round::<rexd::Signal>(json),
        "FileType" => serde_round::<rexd::FileType>(json),
        "DirEntry" => serde_round::<rexd::DirEntry>(json),
        "WriteMode" => serde_round::<rexd::WriteMode>(json),
        "ErrorObject" => serde_round::<rexd::ErrorObject>(json),
        "OkResult" => serde_round::<rexd::OkResult>(json),
        _ => {
            let method = rexd_method_of(def)?;
            let r = raw(json);
            if def.ends_with("Params") {
                rexd::Request::parse(method.as_str(), Some(&r))
                    .map(|req| req.params_value())
                    .map_err(e)
            } else {
                rexd::Response::parse(method, &r)
                    .map(|resp| serde_json::to_value(&resp).expect("results serialize"))
                    .map_err(e)
            }
        }
    })
}

// ---- sidecar ----

/// The sidecar method whose params (`true`) or result (`false`) `def` names.
pub fn sidecar_method_of(def: &str) -> Option<(sidecar::SidecarMethod, bool)> {
    use sidecar::SidecarMethod as M;
    let (stem, params) = if let Some(stem) = def.strip_suffix("Params") {
        (stem, true)
    } else {
        (def.strip_suffix("Result")?, false)
    };
    let method = match stem {
        "HealthPing" => M::HealthPing,
        "Shutdown" => M::LifecycleShutdown,
        "Complete" => M::InferenceComplete,
        "Embed" => M::InferenceEmbed,
        "Plan" => M::InferencePlan,
        "TrainingStart" => M::TrainingStart,
        "TrainingStop" => M::TrainingStop,
        "ModelList" => M::ModelList,
        "ModelLoad" => M::ModelLoad,
        "ModelSave" => M::ModelSave,
        _ => return None,
    };
    Some((method, params))
}

/// Reads a whole sidecar line with the dialect (plus the error code's spelling), keeps it when
/// its kind is one of `kinds`, and writes it back as the spec shapes it.
fn sidecar_line(json: &Value, kinds: &[&str]) -> Result<Value, String> {
    let message = sidecar::read_message(json.to_string().as_bytes()).map_err(|e| e.to_string())?;
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
    let raw = |r: &crate::jsonrpc::RawJson| text(r.as_raw());
    Ok(match &message {
        Inbound::Request { id, method, params } => {
            json!({"id": id, "method": method, "params": params.as_ref().map(raw)})
        }
        Inbound::Result { id, result } => json!({"id": id, "result": raw(result)}),
        Inbound::Error { id, error } => json!({
            "id": id,
            "error": {"code": error.code.to_string(), "message": error.message}
        }),
        Inbound::Progress { id, progress } => json!({"id": id, "progress": raw(progress)}),
        Inbound::Notification { .. } => {
            return Err("the sidecar dialect has no notifications".into());
        }
    })
}

fn read_sidecar(def: &str, json: &Value) -> Option<Result<Value, String>> {
    use sidecar::{SidecarParams, SidecarResult};
    if let Some((method, params)) = sidecar_method_of(def) {
        let text = json.to_string();
        let raw = if params {
            SidecarParams::parse(method.as_str(), &text).map(|p| p.to_raw())
        } else {
            SidecarResult::parse(method.as_str(), &text).map(|r| r.to_raw())
        };
        return Some(
            raw.map(|r| serde_json::from_str(r.get()).expect("raw JSON is one value"))
                .map_err(|e| e.to_string()),
        );
    }
    Some(match def {
        "Request" => sidecar_line(json, &["request"]),
        "TypedRequest" => sidecar_line(json, &["request"]).and_then(|mut back| {
            let params = back["params"].to_string();
            let typed = SidecarParams::parse(back["method"].as_str().unwrap_or_default(), &params)
                .map_err(|e| e.to_string())?;
            back["params"] = text(typed.to_raw().as_raw());
            Ok(back)
        }),
        "SuccessResponse" => sidecar_line(json, &["result"]),
        "ErrorResponse" => sidecar_line(json, &["error"]),
        "ProgressMessage" => sidecar_line(json, &["progress"]),
        "Response" => sidecar_line(json, &["result", "error"]),
        "Message" => sidecar_line(json, &["request", "result", "error", "progress"]),
        "Method" => json
            .as_str()
            .and_then(sidecar::SidecarMethod::parse)
            .map(|m| json!(m.as_str()))
            .ok_or_else(|| "unknown method".to_owned()),
        "ErrorCode" => json
            .as_str()
            .filter(|c| sidecar::is_error_code(c))
            .map(|c| json!(c))
            .ok_or_else(|| "not SCREAMING_SNAKE_CASE".to_owned()),
        "ErrorObject" => {
            sidecar_line(&json!({"id": "x", "error": json}), &["error"]).map(|v| v["error"].clone())
        }
        "Progress" => object_round::<sidecar::Progress>(json),
        "TrainingConfig" => object_round::<sidecar::TrainingConfig>(json),
        "ModelInfo" => object_round::<sidecar::ModelInfo>(json),
        "ToolCall" => object_round::<sidecar::ToolCall>(json),
        "ToolResult" => object_round::<sidecar::ToolResult>(json),
        _ => return None,
    })
}

// ---- gateway ----

fn read_gateway(def: &str, json: &Value) -> Option<Result<Value, String>> {
    use gateway::ops;
    let e = |e: gateway::ParseError| e.to_string();
    let params = |op: &str| {
        gateway::Request::from_parts(op, json.clone())
            .map(|r| r.payload())
            .map_err(e)
    };
    Some(match def {
        "RequestEnvelope" => gateway::RequestEnvelope::from_value(json.clone())
            .map(|r| r.to_value())
            .map_err(e),
        "GenericRequestEnvelope" => gateway::GenericRequestEnvelope::from_value(json.clone())
            .map(|r| r.to_value())
            .map_err(e),
        "ResponseEnvelope" => gateway::ResponseEnvelope::from_value(json.clone())
            .map(|r| r.to_value())
            .map_err(e),
        "EventEnvelope" => gateway::EventEnvelope::from_value(json.clone())
            .map(|r| r.to_value())
            .map_err(e),
        "Envelope" => gateway::Envelope::from_value(json.clone())
            .map(|r| r.to_value())
            .map_err(e),
        "PingParams" => params("gateway.ping"),
        "JobsCreateParams" => params("jobs.create"),
        "JobRef" => params("jobs.start"),
        "JobsCancelParams" => params("jobs.cancel"),
        "ApprovalsListParams" => params("approvals.list"),
        "ApprovalDecisionParams" => params("approvals.approve"),
        "PingResult" => serde_round::<ops::PingResult>(json),
        "JobStatusBrief" => serde_round::<ops::JobStatusBrief>(json),
        "JobsStatusResult" => serde_round::<ops::JobsStatusResult>(json).and_then(|v| {
            // The schema bounds progress to 0..=1; serde's f64 does not, the type's users do.
            match v.get("progress").and_then(Value::as_f64) {
                Some(p) if !(0.0..=1.0).contains(&p) => Err(format!("progress {p}")),
                _ => Ok(v),
            }
        }),
        "JobsResultResult" => serde_round::<ops::JobsResultResult>(json),
        "ApprovalsListResult" => serde_round::<ops::ApprovalsListResult>(json),
        "ApprovalDecisionResult" => serde_round::<ops::ApprovalDecisionResult>(json),
        "ErrorBody" => serde_round::<gateway::ErrorBody>(json),
        "JobState" => serde_round::<gateway::JobState>(json),
        _ => return None,
    })
}

// ---- mobile ----

fn mobile_payload(kind: &str, server_side: bool, json: &Value) -> Result<Value, String> {
    let envelope = json!({ "type": kind, "payload": json });
    let back = if server_side {
        mobile::ServerMessage::from_value(envelope).map(|m| m.to_value())
    } else {
        mobile::ClientMessage::from_value(envelope).map(|m| m.to_value())
    };
    back.map(|v| v["payload"].clone())
        .map_err(|e| e.to_string())
}

fn mobile_typed(kind: &str, server_side: bool, json: &Value) -> Result<Value, String> {
    let (got, back) = if server_side {
        let m = mobile::ServerMessage::from_value(json.clone()).map_err(|e| e.to_string())?;
        (m.kind(), m.to_value())
    } else {
        let m = mobile::ClientMessage::from_value(json.clone()).map_err(|e| e.to_string())?;
        (m.kind(), m.to_value())
    };
    if got != kind {
        return Err(format!("a {got} message, not {kind}"));
    }
    Ok(back)
}

fn read_mobile(def: &str, json: &Value) -> Option<Result<Value, String>> {
    let state_data = |status: &str| {
        mobile_payload(
            "agent_state_update",
            true,
            &json!({"status": status, "data": json}),
        )
        .map(|v| v["data"].clone())
    };
    let e = |e: mobile::ParseError| e.to_string();
    Some(match def {
        "ServerMessage" => mobile::ServerMessage::from_value(json.clone())
            .map(|m| m.to_value())
            .map_err(e),
        "ClientMessage" => mobile::ClientMessage::from_value(json.clone())
            .map(|m| m.to_value())
            .map_err(e),
        "Envelope" => mobile::Envelope::from_value(json.clone())
            .map(|m| m.to_value())
            .map_err(e),
        "AgentState" => mobile::AgentState::from_value(json.clone())
            .map(|m| m.to_value())
            .map_err(e),
        "RunningData" => state_data("Running"),
        "PausedData" => state_data("Paused"),
        "StoppedData" => state_data("Stopped"),
        "StopReason" => serde_round::<mobile::StopReason>(json),
        "CommandAction" => serde_round::<mobile::CommandAction>(json),
        "AuthResult" => mobile_payload("auth_result", true, json),
        "ChatMessage" => mobile_payload("message", true, json),
        "PermissionRequest" => mobile_payload("permission_request", true, json),
        "TaskUpdate" => mobile_payload("task_update", true, json),
        "Auth" => mobile_payload("auth", false, json),
        "Command" => mobile_payload("command", false, json),
        "UserMessage" => mobile_payload("message", false, json),
        "PermissionResponse" => mobile_payload("permission_response", false, json),
        "AuthResultMessage" => mobile_typed("auth_result", true, json),
        "AgentStateUpdateMessage" => mobile_typed("agent_state_update", true, json),
        "ServerChatMessage" => mobile_typed("message", true, json),
        "PermissionRequestMessage" => mobile_typed("permission_request", true, json),
        "TaskUpdateMessage" => mobile_typed("task_update", true, json),
        "PingMessage" => mobile_typed("ping", true, json),
        "AuthMessage" => mobile_typed("auth", false, json),
        "CommandMessage" => mobile_typed("command", false, json),
        "ClientChatMessage" => mobile_typed("message", false, json),
        "PermissionResponseMessage" => mobile_typed("permission_response", false, json),
        "PongMessage" => mobile_typed("pong", false, json),
        _ => return None,
    })
}
