//! The root of each JSON Schema in `core/schemas/` accepts exactly the messages its spec allows,
//! in both directions: the spec's examples pass, the messages the spec forbids fail, and every
//! valid whole-message case of the conformance vectors passes the root too. (The vector runners
//! check each `$defs` entry; a host that validates a message against the file, as
//! `docs/README.md` invites, uses the root.)

use serde_json::{Value, json};

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(path: &str) -> Value {
    let text = std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn validator(file: &str) -> jsonschema::Validator {
    let schema = load(&format!("core/schemas/{file}"));
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Checks `accepted` pass and `forbidden` fail the root of `file`; every failure is listed.
fn check(file: &str, accepted: &[Value], forbidden: &[(&str, Value)]) {
    let v = validator(file);
    let mut failures = Vec::new();
    for m in accepted {
        if let Err(e) = v.validate(m) {
            failures.push(format!("refused {m}: {e}"));
        }
    }
    for (why, m) in forbidden {
        if v.is_valid(m) {
            failures.push(format!("accepted {why}: {m}"));
        }
    }
    assert!(failures.is_empty(), "{file}:\n{}", failures.join("\n"));
}

/// The valid cases of `defs` in `tests/vectors/<vectors>.json` as they are on the wire.
fn valid_vector_messages(vectors: &str, defs: &[&str]) -> Vec<Value> {
    let doc = load(&format!("tests/vectors/{vectors}.json"));
    let cases: Vec<Value> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["valid"] == true && defs.contains(&c["def"].as_str().unwrap_or("")))
        .map(|c| c["json"].clone())
        .collect();
    assert!(!cases.is_empty(), "{vectors}: no cases of {defs:?}");
    cases
}

#[test]
fn ws_message_root() {
    let mut accepted = vec![
        json!({"type": "auth", "payload": {"code": "123456"}}),
        json!({"type": "auth_result", "payload": {"token": "t0k", "success": true}}),
        json!({"type": "auth_result", "payload": {"token": "", "success": false, "error": "invalid pairing code"}}),
        json!({"type": "agent_state_update", "payload": {"status": "Running", "data": {"task_id": "550e8400-", "iteration": 5}}}),
        json!({"type": "agent_state_update", "payload": {"status": "Idle", "data": null}}),
        json!({"type": "message", "payload": {"role": "assistant", "content": "I'll start by...", "timestamp": "2026-02-18T12:00:00Z"}}),
        json!({"type": "message", "payload": {"role": "user", "content": "go on"}}),
        json!({"type": "permission_request", "payload": {"id": "p1", "tool_name": "RemoteBash", "command": "ls", "description": "list", "tier": "low"}}),
        json!({"type": "permission_response", "payload": {"id": "p1", "approved": true}}),
        json!({"type": "task_update", "payload": {"task_id": "t", "iteration": 0, "status": "running"}}),
        json!({"type": "command", "payload": {"action": "start", "task": "fix it", "max_iterations": 10}}),
        json!({"type": "ping", "payload": null}),
        json!({"type": "pong"}),
    ];
    accepted.extend(valid_vector_messages(
        "mobile",
        &[
            "ServerMessage",
            "ClientMessage",
            "AuthMessage",
            "AuthResultMessage",
            "AgentStateUpdateMessage",
            "ServerChatMessage",
            "ClientChatMessage",
            "PermissionRequestMessage",
            "PermissionResponseMessage",
            "TaskUpdateMessage",
            "CommandMessage",
            "PingMessage",
            "PongMessage",
        ],
    ));
    let forbidden = [
        ("an unknown type (the issue's)", json!({"type": "teleport"})),
        (
            "an unknown action (the issue's)",
            json!({"type": "command", "payload": {"action": "explode"}}),
        ),
        ("no type", json!({"payload": {"code": "123456"}})),
        ("auth without its payload", json!({"type": "auth"})),
        (
            "a numeric pairing code",
            json!({"type": "auth", "payload": {"code": 123456}}),
        ),
        (
            "a successful auth_result without a token",
            json!({"type": "auth_result", "payload": {"success": true}}),
        ),
        (
            "a Running state without data",
            json!({"type": "agent_state_update", "payload": {"status": "Running"}}),
        ),
        (
            "an unknown status",
            json!({"type": "agent_state_update", "payload": {"status": "Flying", "data": null}}),
        ),
        (
            "a stop reason not in the spec",
            json!({"type": "agent_state_update", "payload": {"status": "Stopped", "data": {"task_id": "t", "reason": "Bored"}}}),
        ),
        (
            "a chat message with no content",
            json!({"type": "message", "payload": {"role": "user"}}),
        ),
        (
            "a permission_response without approved",
            json!({"type": "permission_response", "payload": {"id": "p1"}}),
        ),
        (
            "a permission_request without a tier",
            json!({"type": "permission_request", "payload": {"id": "p1", "tool_name": "x", "command": "ls", "description": "d"}}),
        ),
        (
            "a task_update with a negative iteration",
            json!({"type": "task_update", "payload": {"task_id": "t", "iteration": -1, "status": "s"}}),
        ),
        (
            "a ping with a payload",
            json!({"type": "ping", "payload": {"x": 1}}),
        ),
        ("not an object", json!(["ping"])),
    ];
    check("ws-message.schema.json", &accepted, &forbidden);
}

#[test]
fn agent_state_root() {
    let accepted = [
        json!({"status": "Idle", "data": null}),
        json!({"status": "Idle"}),
        json!({"status": "Running", "data": {"task_id": "t", "iteration": 5}}),
        json!({"status": "Paused", "data": {"task_id": "t", "question": "which branch?"}}),
        json!({"status": "Stopped", "data": {"task_id": "t", "reason": "IterationLimit"}}),
    ];
    let forbidden = [
        ("an unknown status", json!({"status": "Flying"})),
        ("Running without data", json!({"status": "Running"})),
        (
            "Idle with data",
            json!({"status": "Idle", "data": {"task_id": "t"}}),
        ),
        (
            "Stopped without a reason",
            json!({"status": "Stopped", "data": {"task_id": "t"}}),
        ),
        ("no status", json!({"data": null})),
    ];
    check("agent-state.schema.json", &accepted, &forbidden);
}

#[test]
fn permission_root() {
    let accepted = [
        json!({"id": "p1", "tool_name": "RemoteBash", "command": "ls", "description": "list", "tier": "low"}),
        json!({"id": "p1", "approved": false, "remember": true}),
        json!({"id": "p1", "approved": true, "remember": null}),
    ];
    let forbidden = [
        ("an empty object", json!({})),
        ("an id alone", json!({"id": "p1"})),
        (
            "approved as a string",
            json!({"id": "p1", "approved": "yes"}),
        ),
        (
            "a request without a command",
            json!({"id": "p1", "tool_name": "x", "description": "d", "tier": "low"}),
        ),
        ("not an object", json!("p1")),
    ];
    check("permission.schema.json", &accepted, &forbidden);
}

#[test]
fn tool_request_root() {
    let accepted = [
        json!({"tool_name": "bash", "parameters": {"command": "cat package.json"}}),
        json!({"tool_name": "bash", "success": true, "output": "ok"}),
        json!({"tool_name": "bash", "success": false, "error": "exit 1"}),
    ];
    let forbidden = [
        ("an empty object", json!({})),
        ("a call without parameters", json!({"tool_name": "bash"})),
        (
            "parameters that are not an object",
            json!({"tool_name": "bash", "parameters": "ls"}),
        ),
        (
            "a result whose success is a string",
            json!({"tool_name": "bash", "success": "yes"}),
        ),
    ];
    check("tool-request.schema.json", &accepted, &forbidden);
}

#[test]
fn ipc_message_root() {
    let id = "550e8400-e29b-41d4-a716-446655440000";
    let mut accepted = vec![
        json!({"id": id, "method": "inference.complete", "params": {"prompt": "Summarize this code...", "model_id": "default-llm", "max_tokens": 512, "temperature": 0.7}}),
        json!({"id": id, "method": "health.ping", "params": {}}),
        json!({"id": id, "result": {"text": "This code implements...", "tokens_used": 234, "model_id": "default-llm"}}),
        json!({"id": id, "error": {"code": "MODEL_NOT_LOADED", "message": "Model 'default-llm' is not loaded. Call model.load first."}}),
        json!({"id": id, "progress": {"stage": "training", "epoch": 3, "total_epochs": 10, "global_step": 1500, "metrics": {"train_loss": 0.342, "accuracy": 0.89}}}),
    ];
    accepted.extend(valid_vector_messages(
        "sidecar",
        &[
            "TypedRequest",
            "SuccessResponse",
            "ErrorResponse",
            "ProgressMessage",
            "Response",
        ],
    ));
    let forbidden = [
        (
            "both result and error (the spec: never both)",
            json!({"id": id, "result": {}, "error": {"code": "INTERNAL_ERROR", "message": "x"}}),
        ),
        ("neither result nor error", json!({"id": id})),
        (
            "a method the spec does not define",
            json!({"id": id, "method": "teleport", "params": {}}),
        ),
        (
            "a request without params",
            json!({"id": id, "method": "health.ping"}),
        ),
        (
            "inference.complete params without a prompt",
            json!({"id": id, "method": "inference.complete", "params": {"model_id": "m", "max_tokens": 1, "temperature": 0.0}}),
        ),
        ("a numeric id", json!({"id": 7, "result": {}})),
        (
            "an error code not in SCREAMING_SNAKE_CASE",
            json!({"id": id, "error": {"code": "model_not_loaded", "message": "x"}}),
        ),
        (
            "a progress that is not an object",
            json!({"id": id, "progress": 0.5}),
        ),
    ];
    check("ipc-message.schema.json", &accepted, &forbidden);
}

#[test]
fn rexd_root() {
    let mut accepted = vec![
        // The spec's minimal API examples, requests, responses and events.
        json!({"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"my-agent","workspace_roots":["/srv/myapp"]}}),
        json!({"jsonrpc":"2.0","id":1,"result":{"session_id":"s_1","protocol":"rexd/1","server_version":"0.1.0","capabilities":["exec","fs","events"],"limits":{"default_timeout_ms":30000,"max_output_bytes":1048576},"workspace_roots":["/srv/myapp"]}}),
        json!({"jsonrpc":"2.0","id":2,"method":"exec.start","params":{"session_id":"s_1","argv":["git","status","--short"],"cwd":"/srv/myapp"}}),
        json!({"jsonrpc":"2.0","id":2,"result":{"process_id":"p_1","started_at":"2026-02-25T10:00:00Z"}}),
        json!({"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s_1","process_id":"p_1","seq":1,"data":" M README.md\n","encoding":"utf8"}}),
        json!({"jsonrpc":"2.0","method":"exec.exit","params":{"session_id":"s_1","process_id":"p_1","exit_code":0,"signal":null,"timed_out":false,"duration_ms":93,"bytes_stdout":12,"bytes_stderr":0}}),
        json!({"jsonrpc":"2.0","id":3,"method":"fs.read","params":{"session_id":"s_1","path":"/srv/myapp/README.md"}}),
        json!({"jsonrpc":"2.0","id":4,"method":"fs.write","params":{"session_id":"s_1","path":"/srv/myapp/README.md","content":"# Hello\n","encoding":"utf8","mode":"replace","atomic":true}}),
        json!({"jsonrpc":"2.0","id":7,"error":{"code":-32002,"message":"Path is outside allowed roots","data":{"path":"/etc/passwd","allowed_roots":["/srv/app","/home/deploy"]}}}),
        json!({"jsonrpc":"2.0","id":5,"result":{"ok":true}}),
        json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}),
        // A JSON-RPC 2.0 batch.
        json!([{"jsonrpc":"2.0","id":8,"method":"fs.stat","params":{"session_id":"s_1","path":"a"}},
               {"jsonrpc":"2.0","id":9,"method":"session.info","params":{"session_id":"s_1"}}]),
    ];
    accepted.extend(valid_vector_messages(
        "rexd",
        &["RequestMessage", "NotificationMessage", "ErrorResponse"],
    ));
    let forbidden = [
        (
            "JSON-RPC 1.0 (the issue's)",
            json!({"jsonrpc":"1.0","id":1,"method":"session.info","params":{"session_id":"s_1"}}),
        ),
        (
            "no jsonrpc member",
            json!({"id":1,"method":"session.info","params":{"session_id":"s_1"}}),
        ),
        (
            "a response with both result and error (the issue's)",
            json!({"jsonrpc":"2.0","id":1,"result":{"ok":true},"error":{"code":-32603,"message":"x"}}),
        ),
        ("a response with neither", json!({"jsonrpc":"2.0","id":1})),
        (
            "a method the spec does not define",
            json!({"jsonrpc":"2.0","id":1,"method":"exec.launch","params":{"session_id":"s_1","argv":["ls"]}}),
        ),
        (
            "an event with an id",
            json!({"jsonrpc":"2.0","id":1,"method":"exec.stdout","params":{"session_id":"s_1","process_id":"p_1","seq":1,"data":"x","encoding":"utf8"}}),
        ),
        (
            "exec.start without a session",
            json!({"jsonrpc":"2.0","id":1,"method":"exec.start","params":{"argv":["ls"]}}),
        ),
        (
            "exec.stdout without seq",
            json!({"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s_1","process_id":"p_1","data":"x","encoding":"utf8"}}),
        ),
        (
            "a result that is no method's result",
            json!({"jsonrpc":"2.0","id":1,"result":{"teleported":true}}),
        ),
        (
            "an error code that is a string",
            json!({"jsonrpc":"2.0","id":1,"error":{"code":"forbidden_path","message":"x"}}),
        ),
        (
            "a fractional id",
            json!({"jsonrpc":"2.0","id":1.5,"result":{"ok":true}}),
        ),
        ("an empty batch", json!([])),
        (
            "a batch holding a non-message",
            json!([{"jsonrpc":"2.0","id":1,"result":{"ok":true}}, 7]),
        ),
    ];
    check("rexd.schema.json", &accepted, &forbidden);
}

#[test]
fn gateway_root() {
    let mut accepted = vec![
        json!({"v":"1.0","id":"r1","type":"request","ts":"2026-02-18T12:00:00Z","op":"jobs.create","auth":{"token":"s3cret"},"payload":{"job":{"jobId":"j1","repo":"org/repo"}}}),
        json!({"v":"1.0","id":"r1","type":"response","ts":"2026-02-18T12:00:01Z","ok":true,"result":{"jobId":"j1","state":"CREATED"},"error":null}),
        json!({"v":"1.0","id":"r2","type":"response","ts":"2026-02-18T12:00:01Z","ok":false,"result":null,"error":{"code":"E_NOT_FOUND","message":"no job","details":{}}}),
        json!({"type":"event","op":"jobs.event","payload":{"jobId":"j1","seq":1,"ts":"2026-02-18T12:00:02Z","level":"info","msg":"started"}}),
    ];
    accepted.extend(valid_vector_messages(
        "gateway",
        &[
            "RequestEnvelope",
            "ResponseEnvelope",
            "EventEnvelope",
            "Envelope",
        ],
    ));
    let forbidden = [
        (
            "an unknown type",
            json!({"v":"1.0","id":"r1","type":"teleport","ts":"2026-02-18T12:00:00Z","op":"gateway.ping","payload":{}}),
        ),
        (
            "an incompatible major version",
            json!({"v":"2.0","id":"r1","type":"request","ts":"2026-02-18T12:00:00Z","op":"gateway.ping","payload":{}}),
        ),
        (
            "an op the spec does not define",
            json!({"v":"1.0","id":"r1","type":"request","ts":"2026-02-18T12:00:00Z","op":"jobs.teleport","payload":{}}),
        ),
        (
            "a request without ts",
            json!({"v":"1.0","id":"r1","type":"request","op":"gateway.ping","payload":{}}),
        ),
        (
            "ok with an error",
            json!({"v":"1.0","id":"r1","type":"response","ts":"2026-02-18T12:00:01Z","ok":true,"result":{},"error":{"code":"E_INTERNAL","message":"x"}}),
        ),
        (
            "not ok without an error",
            json!({"v":"1.0","id":"r1","type":"response","ts":"2026-02-18T12:00:01Z","ok":false,"result":null}),
        ),
        (
            "an event that is not jobs.event",
            json!({"type":"event","op":"jobs.teleport","payload":{"jobId":"j1","seq":1,"ts":"2026-02-18T12:00:02Z","level":"info","msg":"x"}}),
        ),
        (
            "jobs.create without a job",
            json!({"v":"1.0","id":"r1","type":"request","ts":"2026-02-18T12:00:00Z","op":"jobs.create","payload":{}}),
        ),
    ];
    check("gateway.schema.json", &accepted, &forbidden);
}

/// `deskwire::schemas::SCHEMAS`, the documents a binding hands its users, is every file of
/// `core/schemas/`, and each vector file's schema is found by the name the vectors give it.
#[test]
fn the_embedded_schemas_are_the_directory() {
    let mut files: Vec<String> = std::fs::read_dir(root().join("core/schemas"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".schema.json"))
        .collect();
    files.sort();
    let embedded: Vec<&str> = deskwire::schemas::SCHEMAS.iter().map(|(n, _)| *n).collect();
    assert_eq!(files, embedded);
    for protocol in ["rexd", "sidecar", "gateway", "mobile"] {
        let vectors = load(&format!("tests/vectors/{protocol}.json"));
        let named = vectors["schema"].as_str().unwrap();
        let text = deskwire::schemas::schema(named).unwrap_or_else(|| panic!("{named}"));
        assert_eq!(Some(text), deskwire::schemas::protocol_schema(protocol));
        let doc: Value = serde_json::from_str(text).unwrap();
        assert_eq!(doc, load(named));
    }
    assert_eq!(
        deskwire::schemas::schema("core/schemas/nope.schema.json"),
        None
    );
    assert_eq!(deskwire::schemas::protocol_schema("oa1"), None);
}
