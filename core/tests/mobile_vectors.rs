//! The mobile conformance vectors (tests/vectors/mobile.json), the ones every binding runs.
//!
//! Each case is checked against `#/$defs/<def>` of its schema (the case's `schema`, else the
//! file's) and parsed into the Rust type: both accept it exactly when `valid`. A valid case
//! written back gives its JSON again (or its `canonical` form, where a default or a dropped
//! unknown member changes it).

mod support;

use support::load;

use deskwire::mobile::{ClientMessage, ServerMessage};
use serde_json::Value;

/// Reads `json` as the Rust type for `def` and writes it back: core's table
/// ([`deskwire::schemas::read`]), the one every binding uses.
fn rust_round(def: &str, json: &Value) -> Result<Value, String> {
    deskwire::schemas::read("mobile", def, json).map_err(|e| e.to_string())
}

#[test]
fn cases_match_schema_and_types() {
    support::check_cases("mobile", 100, rust_round);
}

#[test]
fn every_message_type_has_a_valid_case() {
    let doc = load("tests/vectors/mobile.json");
    let valid: Vec<&Value> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["valid"] == true)
        .collect();
    for (def, types) in [
        ("ServerMessage", &ServerMessage::TYPES[..]),
        ("ClientMessage", &ClientMessage::TYPES[..]),
    ] {
        for kind in types {
            assert!(
                valid
                    .iter()
                    .any(|c| c["def"] == def && c["json"]["type"] == *kind),
                "no valid {def} case of type {kind}"
            );
        }
    }
    for status in ["Idle", "Running", "Paused", "Stopped"] {
        assert!(
            valid
                .iter()
                .any(|c| c["json"]["payload"]["status"] == status),
            "no agent_state_update with {status}"
        );
    }
}

/// The same `$defs` in several files must not drift apart.
#[test]
fn shared_defs_are_identical() {
    let ws = load("core/schemas/ws-message.schema.json");
    let agent = load("core/schemas/agent-state.schema.json");
    let permission = load("core/schemas/permission.schema.json");
    for other in [&agent, &permission] {
        for (name, def) in other["$defs"].as_object().unwrap() {
            assert_eq!(&ws["$defs"][name], def, "$defs/{name} differs");
        }
    }
    for schema in [&ws, &agent, &permission] {
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        jsonschema::validator_for(schema).expect("compiles");
    }
}

mod roundtrip {
    //! Any message written as JSON parses back to itself, and the JSON is valid against the
    //! schema of its direction.

    use deskwire::mobile::{
        AgentState, Auth, AuthResult, ChatMessage, ClientMessage, Command, CommandAction,
        PausedData, PermissionRequest, PermissionResponse, RunningData, ServerMessage, StopReason,
        StoppedData, TaskUpdate, UserMessage,
    };
    use std::sync::LazyLock;

    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z0-9 _.-]{0,12}",
            any::<String>(),
            Just("\"\\\n\u{0}é💥".to_owned()),
        ]
    }

    fn state() -> impl Strategy<Value = AgentState> {
        prop_oneof![
            Just(AgentState::Idle),
            (text(), any::<u64>()).prop_map(|(task_id, iteration)| {
                AgentState::Running(RunningData { task_id, iteration })
            }),
            (
                text(),
                proptest::option::of(text()),
                proptest::option::of(text())
            )
                .prop_map(|(task_id, question, awaiting_permission)| {
                    AgentState::Paused(PausedData {
                        task_id,
                        question,
                        awaiting_permission,
                    })
                }),
            (
                text(),
                prop_oneof![
                    Just(StopReason::Completed),
                    Just(StopReason::ManualStop),
                    Just(StopReason::Error),
                    Just(StopReason::IterationLimit),
                ]
            )
                .prop_map(|(task_id, reason)| AgentState::Stopped(StoppedData { task_id, reason })),
        ]
    }

    fn server_message() -> impl Strategy<Value = ServerMessage> {
        prop_oneof![
            ("[a-f0-9]{1,64}", proptest::option::of(text()))
                .prop_map(|(token, _)| { ServerMessage::AuthResult(AuthResult::success(token)) }),
            text().prop_map(|e| ServerMessage::AuthResult(AuthResult::failure(e))),
            state().prop_map(ServerMessage::AgentStateUpdate),
            (text(), text(), text()).prop_map(|(role, content, timestamp)| {
                ServerMessage::Message(ChatMessage {
                    role,
                    content,
                    timestamp,
                })
            }),
            (text(), text(), text(), text(), text()).prop_map(
                |(id, tool_name, command, description, tier)| {
                    ServerMessage::PermissionRequest(PermissionRequest {
                        id,
                        tool_name,
                        command,
                        description,
                        tier,
                    })
                }
            ),
            (text(), any::<u64>(), text()).prop_map(|(task_id, iteration, status)| {
                ServerMessage::TaskUpdate(TaskUpdate {
                    task_id,
                    iteration,
                    status,
                })
            }),
            Just(ServerMessage::Ping),
        ]
    }

    fn client_message() -> impl Strategy<Value = ClientMessage> {
        let action = prop_oneof![
            Just(CommandAction::Start),
            Just(CommandAction::Stop),
            Just(CommandAction::Pause),
            Just(CommandAction::Resume),
        ];
        prop_oneof![
            text().prop_map(|code| ClientMessage::Auth(Auth { code })),
            (
                action,
                proptest::option::of(text()),
                proptest::option::of(any::<u64>())
            )
                .prop_map(|(action, task, max_iterations)| {
                    ClientMessage::Command(Command {
                        action,
                        task,
                        max_iterations,
                    })
                }),
            text().prop_map(|content| ClientMessage::Message(UserMessage { content })),
            (text(), any::<bool>(), any::<bool>()).prop_map(|(id, approved, remember)| {
                ClientMessage::PermissionResponse(PermissionResponse {
                    id,
                    approved,
                    remember,
                })
            }),
            Just(ClientMessage::Pong),
        ]
    }

    fn validator(def: &str) -> jsonschema::Validator {
        let mut schema = super::load("core/schemas/ws-message.schema.json");
        schema["$ref"] = json!(format!("#/$defs/{def}"));
        jsonschema::validator_for(&schema).unwrap()
    }

    static SERVER: LazyLock<jsonschema::Validator> = LazyLock::new(|| validator("ServerMessage"));
    static CLIENT: LazyLock<jsonschema::Validator> = LazyLock::new(|| validator("ClientMessage"));

    proptest! {
        #[test]
        fn server_messages_round_trip(m in server_message()) {
            let text = m.to_json();
            prop_assert_eq!(ServerMessage::parse(&text), Ok(m.clone()));
            let value: Value = serde_json::from_str(&text).unwrap();
            prop_assert!(SERVER.is_valid(&value), "{}", text);
        }

        #[test]
        fn client_messages_round_trip(m in client_message()) {
            let text = m.to_json();
            prop_assert_eq!(ClientMessage::parse(&text), Ok(m.clone()));
            let value: Value = serde_json::from_str(&text).unwrap();
            prop_assert!(CLIENT.is_valid(&value), "{}", text);
        }
    }
}
