//! The gateway conformance vectors (tests/vectors/gateway.json), the ones every binding runs.
//!
//! - Each case is checked against `#/$defs/<def>` of core/schemas/gateway.schema.json and parsed
//!   into the Rust type: both accept it exactly when `valid`. A valid case written back gives its
//!   JSON again (or its `canonical` form, when a default or a number spelling changes it).
//! - Each sequence is replayed through one `Gateway`: requests in, executor (`host`) calls, and
//!   the transmitted envelopes compared with `out`, in order.

mod support;

use support::{load, validator};

use deskwire::gateway::ops::{ApprovalStatus, Level};
use deskwire::gateway::{
    Config, ConnId, Gateway, JobState, LocalError, Output, Timestamp, Token, TransitionError,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

fn vectors() -> Value {
    load("tests/vectors/gateway.json")
}

fn from<T: DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// Reads `json` as the Rust type for `def` and writes it back: core's table
/// ([`deskwire::schemas::read`]), the one every binding uses.
fn rust_round(def: &str, json: &Value) -> Result<Value, String> {
    deskwire::schemas::read("gateway", def, json).map_err(|e| e.to_string())
}

#[test]
fn cases_match_schema_and_types() {
    support::check_cases("gateway", 100, rust_round);
}

#[test]
fn every_def_has_a_valid_case() {
    let doc = vectors();
    let schema = load(doc["schema"].as_str().unwrap());
    let covered: Vec<&str> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["valid"] == true)
        .map(|c| c["def"].as_str().unwrap())
        .collect();
    // Building blocks are covered through the defs that use them.
    let through_others = [
        "Version",
        "Timestamp",
        "Id",
        "Op",
        "Auth",
        "ErrorCode",
        "Level",
        "ApprovalStatus",
        "Decision",
        "WorkspaceMode",
        "JobSpec",
        "Issue",
        "Workspace",
        "Policy",
        "Instructions",
        "JobEvent",
        "GitInfo",
        "Diff",
        "ApprovalSummary",
        "ApprovalInfo",
    ];
    for def in schema["$defs"].as_object().unwrap().keys() {
        assert!(
            covered.contains(&def.as_str()) || through_others.contains(&def.as_str()),
            "no valid case for {def}"
        );
    }
}

/// Runs one executor call; returns the local error if any.
fn host(gw: &mut Gateway, now: &mut u64, h: &Value) -> Result<(), LocalError> {
    let s = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
    let job = s("jobId");
    let state = |k: &str| serde_json::from_value::<JobState>(h[k].clone()).unwrap();
    match h["action"].as_str().unwrap() {
        "progress" => gw.set_progress(&job, h["step"].as_str(), h["progress"].as_f64()),
        "log" => {
            let level: Level = serde_json::from_value(h["level"].clone()).unwrap();
            gw.log(&job, level, &s("msg"))
        }
        "review_ready" => gw.review_ready(*now, &job, from(&h["artifacts"])),
        "complete" => gw.complete(*now, &job, h.get("artifacts").map(from)),
        "fail" => gw.fail(
            *now,
            &job,
            serde_json::from_value(h["error_body"].clone()).unwrap(),
        ),
        "roll_back" => gw.roll_back(*now, &job),
        "cancel" => gw.cancel(*now, &job),
        "transition" => gw.transition(*now, &job, state("to")),
        "request_approval" => {
            let ticket =
                gw.request_approval(&job, h["approvalId"].as_str(), &s("kind"), &s("requested"))?;
            let expected: ApprovalStatus = h.get("status").map_or(ApprovalStatus::Pending, |v| {
                serde_json::from_value(v.clone()).unwrap()
            });
            assert_eq!(ticket.status, expected);
            if let Some(id) = h["approvalId"].as_str() {
                assert_eq!(ticket.approval_id, id);
            }
            Ok(())
        }
        "authenticate" => {
            let accepted = gw.authenticate_connection(ConnId(1), &s("token"));
            assert_eq!(accepted, h["accepted"].as_bool().unwrap());
            Ok(())
        }
        "close" => {
            gw.close_connection(ConnId(1));
            Ok(())
        }
        "timeout" => {
            *now = h["now_ms"].as_u64().unwrap();
            gw.handle_timeout(*now);
            Ok(())
        }
        other => panic!("unknown host action {other}"),
    }
}

/// The sequence's config (camelCase, core's serde: missing fields take the defaults) with the
/// token every sequence authenticates with.
fn config(overrides: Option<&Value>) -> Config {
    let mut config: Config = overrides.map_or_else(Config::default, from);
    assert!(
        config.tokens.is_empty(),
        "the vectors leave the token to the runner"
    );
    config.tokens = vec![Token::new("s3cr3t-token")];
    config
}

#[test]
fn sequences_replay_through_the_engine() {
    let doc = vectors();
    let schema = load(doc["schema"].as_str().unwrap());
    let envelope_schema = validator(&schema, "Envelope");
    let sequences = doc["sequences"].as_array().unwrap();
    assert!(sequences.len() >= 10);
    for seq in sequences {
        let name = seq["name"].as_str().unwrap();
        let ts = Timestamp::parse(seq["ts"].as_str().unwrap()).unwrap();
        let mut gw = Gateway::new(config(seq.get("config")), 0, [0; 32]).unwrap();
        let mut now = 0;
        for (i, step) in seq["steps"].as_array().unwrap().iter().enumerate() {
            let at = format!("{name} step {i}");
            if let Some(n) = step.get("now_ms") {
                now = n.as_u64().unwrap();
            }
            if let Some(input) = step.get("in") {
                gw.handle_message(now, ConnId(1), input.to_string().as_bytes())
                    .unwrap();
            } else {
                let result = host(&mut gw, &mut now, &step["host"]);
                match step.get("error") {
                    Some(e) => {
                        let from = serde_json::from_value(e["from"].clone()).unwrap();
                        let to = serde_json::from_value(e["to"].clone()).unwrap();
                        assert_eq!(
                            result,
                            Err(LocalError::Transition(TransitionError { from, to })),
                            "{at}"
                        );
                    }
                    None => assert_eq!(result, Ok(()), "{at}"),
                }
            }
            let mut out = Vec::new();
            loop {
                match gw.poll_output(now) {
                    Output::Transmit(t) => {
                        assert_eq!(t.conn, ConnId(1));
                        out.push(t.message.envelope(ts.clone()).to_value());
                    }
                    Output::Event(_) => {}
                    Output::Timeout(_) => break,
                }
            }
            for o in &out {
                assert!(
                    envelope_schema.is_valid(o),
                    "{at}: output fails the schema: {o}"
                );
            }
            let expected = step["out"].as_array().unwrap();
            assert_eq!(&out, expected, "{at}");
        }
    }
}
