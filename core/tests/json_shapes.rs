//! The JSON shapes of the values that cross a binding (configs, events, outputs, stats, errors)
//! where no conformance vector fixes them: C passes these as JSON text, Python and Godot
//! convert them to native values. Every binding documents these shapes by pointing here.
//!
//! Conventions: enums are externally tagged with snake_case names (a unit variant is its name
//! as a string, any other variant an object with one key); configs read with the defaults for
//! every missing field and refuse unknown fields, so a misspelt limit is an error rather than
//! a silent default (policies and contexts too).

use deskwire::gateway;
use deskwire::jsonrpc::{
    self, CallError, Code, Framing, Id, PeerConfig, PeerEvent, PeerStats, RawJson, RemoteError,
    TimeoutPolicy,
};
use deskwire::mobile::{self, AgentState, ChatMessage, client, server};
use deskwire::tools::providers::{Limits, Provider, ToolChoice};
use deskwire::tools::retrieval::HostScores;
use deskwire::tools::{
    Action, ApprovalResponse, Condition, Context, Policy, Rule, Tier, ToolCall, Verdict,
    Visibility, toolbox,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn read<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// `value` writes as `json` and `json` reads back as `value`.
fn both_ways<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: T, json: Value) {
    assert_eq!(serde_json::to_value(&value).unwrap(), json);
    assert_eq!(read::<T>(json), value);
}

fn raw(text: &str) -> RawJson {
    RawJson::from_string(text.to_owned()).unwrap()
}

#[test]
fn configs_read_from_an_empty_object_are_the_defaults() {
    assert_eq!(read::<PeerConfig>(json!({})), PeerConfig::default());
    assert_eq!(read::<client::Config>(json!({})), client::Config::default());
    assert_eq!(read::<server::Config>(json!({})), server::Config::default());
    assert_eq!(
        read::<toolbox::Config>(json!({})),
        toolbox::Config::default()
    );
    assert_eq!(read::<Limits>(json!({})), Limits::default());
    assert_eq!(
        read::<gateway::Config>(json!({})),
        gateway::Config::default()
    );
    // And every default writes out and reads back unchanged.
    for config in [
        PeerConfig::default(),
        PeerConfig {
            framing: Framing::ContentLength,
            timeouts: TimeoutPolicy::sidecar(),
            cancel_notification: Some("$/cancelRequest".into()),
            ..PeerConfig::default()
        },
    ] {
        let json = serde_json::to_value(&config).unwrap();
        assert_eq!(read::<PeerConfig>(json), config);
    }
}

#[test]
fn config_fields_override_the_defaults() {
    let peer: PeerConfig = read(json!({
        "framing": "content_length",
        "timeouts": {"rules": [{"prefix": "health.", "timeout_ms": 10, "max_total_ms": 100}]},
        "max_pending": 3
    }));
    assert_eq!(peer.framing, Framing::ContentLength);
    assert_eq!(peer.max_pending, 3);
    assert_eq!(peer.timeouts.lookup("health.ping"), (10, 100));
    assert_eq!(peer.timeouts.default_timeout_ms, 30_000);
    assert_eq!(peer.batch_limit, PeerConfig::default().batch_limit);

    let phone: client::Config = read(json!({"backoff_ms": [5], "server_timeout_ms": 45000}));
    assert_eq!(phone.backoff(1), 5);
    assert_eq!(phone.server_timeout_ms, Some(45_000));

    // The gateway's config is camelCase, as its wire and tests/vectors/gateway.json.
    let gw: gateway::Config = read(json!({"tokens": ["s3cret"], "maxRunning": 2}));
    assert_eq!(gw.max_running, 2);
    assert!(gw.tokens[0].matches("s3cret"));
    assert_eq!(gw.max_jobs, gateway::Config::default().max_jobs);
    assert!(serde_json::from_value::<gateway::Config>(json!({"maxRunning": "2"})).is_err());
}

#[test]
fn peer_events_and_outputs() {
    both_ways(
        PeerEvent::Request {
            id: Id::Number(1),
            method: "fs.stat".into(),
            params: Some(raw(r#"{"path":"a"}"#)),
        },
        json!({"request": {"id": 1, "method": "fs.stat", "params": {"path": "a"}}}),
    );
    both_ways(
        PeerEvent::Notification {
            method: "exec.exit".into(),
            params: None,
        },
        json!({"notification": {"method": "exec.exit"}}),
    );
    both_ways(
        PeerEvent::Response {
            id: Id::String("a".into()),
            method: "m".into(),
            user: 7,
            result: raw("null"),
        },
        json!({"response": {"id": "a", "method": "m", "user": 7, "result": null}}),
    );
    both_ways(
        PeerEvent::Failed {
            id: Id::Number(2),
            method: "m".into(),
            user: 0,
            error: CallError::Remote(RemoteError::new(Code::Name("MODEL_NOT_LOADED".into()), "x")),
        },
        json!({"failed": {"id": 2, "method": "m", "user": 0,
            "error": {"remote": {"code": "MODEL_NOT_LOADED", "message": "x"}}}}),
    );
    both_ways(
        PeerEvent::Failed {
            id: Id::Number(3),
            method: "m".into(),
            user: 0,
            error: CallError::Timeout,
        },
        json!({"failed": {"id": 3, "method": "m", "user": 0, "error": "timeout"}}),
    );
    both_ways(
        PeerEvent::Malformed { reason: "r".into() },
        json!({"malformed": {"reason": "r"}}),
    );
    both_ways(
        jsonrpc::Output::Transmit(b"{\"a\":1}\n".to_vec()),
        json!({"transmit": "{\"a\":1}\n"}),
    );
    both_ways(jsonrpc::Output::Timeout(5), json!({"timeout": 5}));
    let stats = serde_json::to_value(PeerStats::default()).unwrap();
    assert_eq!(stats["frames_in"], 0);
    assert_eq!(stats.as_object().unwrap().len(), 13);
    assert_eq!(
        serde_json::to_value(jsonrpc::LocalError::UnknownId(Id::Number(4))).unwrap(),
        json!({"unknown_id": 4})
    );
}

#[test]
fn mobile_events_and_outputs() {
    both_ways(client::Event::Connected, json!("connected"));
    both_ways(
        client::Event::Disconnected {
            reason: client::DisconnectReason::Failed("dns".into()),
            retry_in_ms: Some(1000),
        },
        json!({"disconnected": {"reason": {"failed": "dns"}, "retry_in_ms": 1000}}),
    );
    both_ways(
        client::Event::StateChanged {
            state: AgentState::Idle,
            initial: true,
        },
        json!({"state_changed": {"state": {"status": "Idle", "data": null}, "initial": true}}),
    );
    both_ways(
        client::Event::Message(ChatMessage {
            role: "agent".into(),
            content: "hi".into(),
            timestamp: "t".into(),
        }),
        json!({"message": {"role": "agent", "content": "hi", "timestamp": "t"}}),
    );
    both_ways(
        client::Output::Connect { bearer: None },
        json!({"connect": {"bearer": null}}),
    );
    both_ways(
        client::ConnectionState::Waiting { retry_at: 9 },
        json!({"waiting": {"retry_at": 9}}),
    );
    both_ways(
        server::Event::ClientConnected {
            conn: server::ConnId(3),
            via: server::AuthMethod::Pairing,
        },
        json!({"client_connected": {"conn": 3, "via": "pairing"}}),
    );
    both_ways(
        server::Event::PairingFailed {
            conn: server::ConnId(3),
            failure: server::PairingFailure::WrongCode { attempts_left: 2 },
        },
        json!({"pairing_failed": {"conn": 3, "failure": {"wrong_code": {"attempts_left": 2}}}}),
    );
    both_ways(
        server::Output::Close {
            conn: server::ConnId(1),
            reason: server::CloseReason::PongTimeout,
        },
        json!({"close": {"conn": 1, "reason": "pong_timeout"}}),
    );
    both_ways(
        server::Admission::Refused(server::Refusal::BadToken),
        json!({"refused": "bad_token"}),
    );
    assert_eq!(
        serde_json::to_value(mobile::LocalError::InvalidCode("1".into())).unwrap(),
        json!({"invalid_code": "1"})
    );
}

#[test]
fn gateway_events_and_stats() {
    both_ways(
        gateway::Event::StateChanged {
            job_id: "j1".into(),
            from: gateway::JobState::Queued,
            to: gateway::JobState::Running,
        },
        json!({"state_changed": {"job_id": "j1", "from": "QUEUED", "to": "RUNNING"}}),
    );
    let mut stats = gateway::Stats::default();
    stats
        .ops
        .insert(gateway::Op::JobsCreate, Default::default());
    let json = serde_json::to_value(&stats).unwrap();
    assert_eq!(json["ops"]["jobs.create"]["requests"], 0);
    assert_eq!(read::<gateway::Stats>(json), stats);
    assert_eq!(
        serde_json::to_value(gateway::LocalError::UnknownJob("j".into())).unwrap(),
        json!({"unknown_job": "j"})
    );
}

#[test]
fn tool_values() {
    let mut policy = Policy::new(Action::Ask(Tier::Low));
    policy
        .push(Rule::deny_commands("bash", ["rm *"], "no"))
        .unwrap();
    policy
        .push(Rule::new(
            "write",
            Condition::ArgMatches {
                arg: "path".into(),
                patterns: vec!["*.lock".into()],
            },
            Action::Allow,
        ))
        .unwrap();
    let json = serde_json::to_value(&policy).unwrap();
    assert_eq!(
        json,
        json!({"default": {"ask": "low"}, "max_remembered": 1024, "rules": [
            {"tool": "bash", "when": {"commands": ["rm *"]}, "action": {"deny": "no"}},
            {"tool": "write", "when": {"arg": "path", "patterns": ["*.lock"]}, "action": "allow"}
        ]})
    );
    let back: Policy = read(json);
    let call = ToolCall::new("c", "bash", json!({"command": "rm -rf /"}));
    assert_eq!(
        back.evaluate(&call, &Context::default()),
        Action::Deny("no".into())
    );
    // A rule that cannot compile, an unknown member or a missing default is refused.
    for bad in [
        json!({"default": "allow", "rules": [{"tool": "*", "when": {"outside": ["rel"]}, "action": "allow"}]}),
        json!({"default": "allow", "rules": [{"tool": "*", "when": {"commands": ["[a"]}, "action": "allow"}]}),
        json!({"default": "allow", "rulez": []}),
        json!({"rules": []}),
    ] {
        assert!(
            serde_json::from_value::<Policy>(bad.clone()).is_err(),
            "{bad}"
        );
    }

    both_ways(
        Context {
            bound_npc_id: Some("npc".into()),
            flags: ["online".to_owned()].into(),
            ..Context::default()
        },
        json!({"bound_npc_id": "npc", "flags": ["online"]}),
    );
    assert!(serde_json::from_value::<Context>(json!({"bound_npc": "x"})).is_err());
    both_ways(
        Visibility::AllOf(vec![
            Visibility::WhileBound,
            Visibility::Not(Box::new(Visibility::WithFlag("busy".into()))),
        ]),
        json!({"all_of": ["while_bound", {"not": {"with_flag": "busy"}}]}),
    );
    both_ways(
        Verdict::Pending {
            approval_id: "a".into(),
        },
        json!({"pending": {"approval_id": "a"}}),
    );
    both_ways(Verdict::Run, json!("run"));
    let answer: ApprovalResponse = read(json!({"id": "a", "approved": true}));
    assert!(!answer.remember && answer.reason.is_none());
    both_ways(Provider::OpenAiChat, json!("openai_chat"));
    both_ways(ToolChoice::Tool("read".into()), json!({"tool": "read"}));
    both_ways(
        HostScores::Scores(vec![("bash".into(), 0.25), ("read".into(), 0.5)]),
        json!({"scores": {"bash": 0.25, "read": 0.5}}),
    );
}

/// Every engine's config refuses a field it does not know (here a misspelt limit), naming it.
#[test]
fn configs_refuse_unknown_fields() {
    fn refused<T: DeserializeOwned + std::fmt::Debug>(v: Value) {
        let error = serde_json::from_value::<T>(v.clone()).expect_err(&v.to_string());
        assert!(error.to_string().contains("unknown field"), "{v}: {error}");
    }
    refused::<gateway::Config>(json!({"tokens": ["t"], "maxRuning": 2}));
    refused::<PeerConfig>(json!({"max_pendng": 2}));
    refused::<PeerConfig>(json!({"timeouts": {"default_ms": 5}}));
    refused::<toolbox::Config>(json!({"max_agnts": 2}));
    refused::<toolbox::Config>(json!({"approvals": {"timout_ms": 5}}));
    refused::<client::Config>(json!({"max_queud": 2}));
    refused::<server::Config>(json!({"max_tokns": 2}));
    refused::<deskwire::oa1::Config>(json!({"channel": "#d", "nick": "d", "max_stream": 2}));
    // The documented spellings still read.
    read::<gateway::Config>(json!({"tokens": ["t"], "maxRunning": 2}));
    read::<PeerConfig>(json!({"max_pending": 2, "timeouts": {}}));
    read::<client::Config>(json!({"max_queued": 2}));
    read::<server::Config>(json!({"max_tokens": 2}));
}
