//! Runs `tests/vectors/tools.json`: the built-in registry under the file's policy.
//!
//! - `authorize`: `agent`, `context` (`bound_npc_id`, `target`, `cwd`, `flags`), `call`,
//!   `origin` (`model` / `user`) → `expect` `{"kind": "allowed" | "needs_approval" |
//!   "denied" | "unknown", "tier"?, "reason"?, "message"?, "observation"?}`.
//! - `slash`: `line` → `expect` `{"name", "args"}` or `{"error": kind}`.
//! - `visible`: `agent`, `context` → `expect`, the visible tool names in order.
//!
//! The policy: `default` and `rules` of `{"tool", "when", "action"}`, `when` is `"always"`,
//! `{"commands": [...]}`, `{"outside": [...]}` or `{"arg", "patterns"}`; an action is
//! `"allow"`, `{"ask": tier}` or `{"deny": reason}`.
//!
//! `DESKWIRE_BLESS=1` rewrites every `expect` (review the diff).

use deskwire::ids::IdGenerator;
use deskwire::tools::{Context, Origin, Policy, Registry, ToolCall, authorize, slash};
use serde_json::{Value, json};

// Policies, contexts, calls, origins, authorizations and slash errors are read and written by
// core's serde impls: this runner proves their JSON shapes.

fn from<T: serde::de::DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// The variant name of an externally tagged value: a unit variant's string or the single key.
fn kind(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) if o.len() == 1 => o.keys().next().unwrap().clone(),
        other => panic!("not an externally tagged value: {other}"),
    }
}

#[test]
fn tools_vectors() {
    let file = format!("{}/../tests/vectors/tools.json", env!("CARGO_MANIFEST_DIR"));
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["protocol"], "tools");
    let registry = Registry::with_builtins();
    let policy: Policy = from(&doc["policy"]);
    // The policy writes back to the same JSON (plus the default memory bound).
    let mut written = serde_json::to_value(&policy).unwrap();
    written.as_object_mut().unwrap().remove("max_remembered");
    assert_eq!(written, doc["policy"]);
    let bless = std::env::var("DESKWIRE_BLESS").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    let cases = doc["cases"].as_array_mut().unwrap();
    assert!(cases.len() >= 25, "{} cases", cases.len());
    for case in cases.iter_mut() {
        let got = match case["kind"].as_str().unwrap() {
            "authorize" => {
                let call: ToolCall = from(&case["call"]);
                let origin: Origin = case.get("origin").map_or(Origin::Model, from);
                let agent = case["agent"].as_str().unwrap();
                let context: Context = from(&case["context"]);
                let got = authorize(&registry, &policy, &call, agent, &context, origin);
                let json = serde_json::to_value(&got).unwrap();
                assert_eq!(from::<deskwire::tools::Authorization>(&json), got);
                json
            }
            "slash" => match slash::parse(
                case["line"].as_str().unwrap(),
                &registry,
                &mut IdGenerator::new(0),
            ) {
                Ok(call) => json!({"name": call.name, "args": call.args}),
                Err(e) => json!({"error": kind(&serde_json::to_value(&e).unwrap())}),
            },
            "visible" => json!(
                registry.visible_names(case["agent"].as_str().unwrap(), &from(&case["context"]))
            ),
            other => panic!("unknown kind {other}"),
        };
        if bless {
            case["expect"] = got;
        } else if case["expect"] != got {
            failures.push(format!(
                "{}\n  want {}\n  got  {got}",
                case["name"], case["expect"]
            ));
        }
    }
    if bless {
        std::fs::write(&file, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
