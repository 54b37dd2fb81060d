//! Runs `tests/vectors/tools.json`: the built-in registry under the file's policy.
//!
//! - `authorize`: `agent`, `context` (`bound_npc_id`, `target`, `cwd`, `flags`), `call`,
//!   `origin` (`model` / `user`) → `expect` `{"kind": "allowed" | "needs_approval" |
//!   "denied" | "unknown", "tier"?, "reason"?, "observation"?}`.
//! - `slash`: `line` → `expect` `{"name", "args"}` or `{"error": kind}`.
//! - `visible`: `agent`, `context` → `expect`, the visible tool names in order.
//!
//! The policy: `default` and `rules` of `{"tool", "when", "action"}`, `when` is `"always"`,
//! `{"commands": [...]}`, `{"outside": [...]}` or `{"arg", "patterns"}`; an action is
//! `"allow"`, `{"ask": tier}` or `{"deny": reason}`.
//!
//! `DESKWIRE_BLESS=1` rewrites every `expect` (review the diff).

use deskwire::ids::IdGenerator;
use deskwire::tools::slash::{self, SlashError};
use deskwire::tools::{
    Action, Authorization, Condition, Context, DenyReason, Origin, Policy, Registry, Rule, Tier,
    ToolCall, authorize,
};
use serde_json::{Value, json};

fn action(v: &Value) -> Action {
    match v {
        Value::String(s) if s == "allow" => Action::Allow,
        Value::Object(o) if o.contains_key("ask") => {
            Action::Ask(Tier::from_name(o["ask"].as_str().unwrap()).unwrap())
        }
        Value::Object(o) if o.contains_key("deny") => {
            Action::Deny(o["deny"].as_str().unwrap().to_owned())
        }
        other => panic!("bad action {other}"),
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

fn policy(v: &Value) -> Policy {
    let mut p = Policy::new(action(&v["default"]));
    for r in v["rules"].as_array().unwrap() {
        let when = match &r["when"] {
            Value::String(s) if s == "always" => Condition::Always,
            w if w.get("commands").is_some() => Condition::CommandMatches(strings(&w["commands"])),
            w if w.get("outside").is_some() => Condition::PathOutside {
                roots: strings(&w["outside"]),
            },
            w if w.get("arg").is_some() => Condition::ArgMatches {
                arg: w["arg"].as_str().unwrap().to_owned(),
                patterns: strings(&w["patterns"]),
            },
            other => panic!("bad condition {other}"),
        };
        p.push(Rule::new(
            r["tool"].as_str().unwrap(),
            when,
            action(&r["action"]),
        ))
        .unwrap();
    }
    p
}

fn context(v: &Value) -> Context {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    Context {
        bound_npc_id: s("bound_npc_id"),
        target: s("target"),
        cwd: s("cwd"),
        flags: v
            .get("flags")
            .map(|f| strings(f).into_iter().collect())
            .unwrap_or_default(),
    }
}

fn authorization(a: Authorization) -> Value {
    match a {
        Authorization::Allowed => json!({"kind": "allowed"}),
        Authorization::NeedsApproval { tier } => {
            json!({"kind": "needs_approval", "tier": tier.as_str()})
        }
        Authorization::Denied {
            reason,
            observation,
        } => {
            let reason = match reason {
                DenyReason::NotVisible => "not_visible",
                DenyReason::InvalidArguments(_) => "invalid_arguments",
                DenyReason::Policy(_) => "policy",
                _ => "other",
            };
            json!({"kind": "denied", "reason": reason, "observation": observation})
        }
        Authorization::Unknown { observation } => {
            json!({"kind": "unknown", "observation": observation})
        }
        _ => json!({"kind": "other"}),
    }
}

fn slash_error(e: &SlashError) -> &'static str {
    match e {
        SlashError::NotACommand => "not_a_command",
        SlashError::UnknownCommand { .. } => "unknown_command",
        SlashError::UnterminatedQuote => "unterminated_quote",
        SlashError::MissingArgument { .. } => "missing_argument",
        SlashError::TooManyArguments { .. } => "too_many_arguments",
        SlashError::BadValue { .. } => "bad_value",
        SlashError::BadJson(_) => "bad_json",
        _ => "other",
    }
}

#[test]
fn tools_vectors() {
    let file = format!("{}/../tests/vectors/tools.json", env!("CARGO_MANIFEST_DIR"));
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["protocol"], "tools");
    let registry = Registry::with_builtins();
    let policy = policy(&doc["policy"]);
    let bless = std::env::var("DESKWIRE_BLESS").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    let cases = doc["cases"].as_array_mut().unwrap();
    assert!(cases.len() >= 25, "{} cases", cases.len());
    for case in cases.iter_mut() {
        let got = match case["kind"].as_str().unwrap() {
            "authorize" => {
                let c = &case["call"];
                let call = ToolCall::new(
                    c["id"].as_str().unwrap(),
                    c["name"].as_str().unwrap(),
                    c["args"].clone(),
                );
                let origin = match case["origin"].as_str() {
                    Some("user") => Origin::User,
                    _ => Origin::Model,
                };
                let agent = case["agent"].as_str().unwrap();
                authorization(authorize(
                    &registry,
                    &policy,
                    &call,
                    agent,
                    &context(&case["context"]),
                    origin,
                ))
            }
            "slash" => match slash::parse(
                case["line"].as_str().unwrap(),
                &registry,
                &mut IdGenerator::new(0),
            ) {
                Ok(call) => json!({"name": call.name, "args": call.args}),
                Err(e) => json!({"error": slash_error(&e)}),
            },
            "visible" => json!(
                registry.visible_names(case["agent"].as_str().unwrap(), &context(&case["context"]))
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
