//! Engine tests: idempotency, the state machine through the engine, auth, versions, approvals,
//! streams, limits, scrubbing, and an envelope round-trip property.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::ops::{
    ApprovalDecisionParams, ApprovalStatus, ApprovalsListParams, Decision, Instructions, Issue,
    JobEvent, JobRef, JobSpec, JobsCancelParams, JobsCreateParams, Level, PingParams, Policy,
    Workspace, WorkspaceMode,
};
use super::*;

const TOKEN: &str = "tok-3f9a1c-SECRET";
const C: ConnId = ConnId(1);

fn gateway() -> Gateway {
    Gateway::new(Config::new(Token::new(TOKEN)), 0, [1; 32]).unwrap()
}

fn request(id: &str, op: &str, payload: Value) -> Vec<u8> {
    json!({"v": "1.0", "id": id, "type": "request", "ts": "2026-02-18T12:00:00Z", "op": op,
           "auth": {"token": TOKEN}, "payload": payload})
    .to_string()
    .into_bytes()
}

fn drain(gw: &mut Gateway, now: u64) -> (Vec<Outgoing>, Vec<Event>) {
    let (mut sent, mut events) = (Vec::new(), Vec::new());
    loop {
        match gw.poll_output(now) {
            Output::Transmit(t) => sent.push(t.message),
            Output::Event(e) => events.push(e),
            Output::Timeout(_) => return (sent, events),
        }
    }
}

/// Sends one request, returns its response outcome (the first transmit) and everything else.
fn call(gw: &mut Gateway, now: u64, op: &str, payload: Value) -> Result<Value, ErrorBody> {
    gw.handle_message(now, C, &request("r", op, payload))
        .unwrap();
    let (sent, _) = drain(gw, now);
    let response = sent.into_iter().find_map(|o| match o {
        Outgoing::Response { outcome, .. } => Some(outcome),
        Outgoing::Event { .. } => None,
    });
    response.expect("a response").map(Value::Object)
}

fn job(id: &str) -> Value {
    json!({"job": {"jobId": id, "repo": "org/repo", "policy": {"timeoutSec": 10}}})
}

fn code(outcome: Result<Value, ErrorBody>) -> String {
    outcome.unwrap_err().code.as_str().to_owned()
}

/// A gateway with job `j` in `state` (runs slots 1, so nothing else interferes).
fn reach(state: JobState) -> Gateway {
    let mut gw = gateway();
    call(&mut gw, 0, "jobs.create", job("j")).unwrap();
    use JobState::*;
    let path: &[JobState] = match state {
        Created => &[],
        Queued => &[Queued],
        Running => &[Queued, Running],
        ReviewReady => &[Queued, Running, ReviewReady],
        Completed => &[Queued, Running, ReviewReady, Completed],
        Failed => &[Failed],
        Timeout => &[Queued, Running, Timeout],
        Cancelled => &[Cancelled],
        RolledBack => &[Queued, Running, RolledBack],
    };
    gw.config.max_running = 0; // keep QUEUED jobs queued; RUNNING is reached by hand below
    for &to in path {
        gw.transition(0, "j", to).unwrap();
    }
    gw.config.max_running = 4;
    drain(&mut gw, 0);
    assert_eq!(gw.job_state("j"), Some(state));
    gw
}

#[test]
fn every_transition_through_the_engine_matches_the_table() {
    let mut refused = 0;
    for from in JobState::ALL {
        for to in JobState::ALL {
            let mut gw = reach(from);
            gw.config.max_running = 0; // QUEUED stays QUEUED
            let result = gw.transition(5, "j", to);
            if job::next_states(from).contains(&to) {
                assert_eq!(result, Ok(()), "{from} -> {to}");
                assert_eq!(gw.job_state("j"), Some(to));
                let (_, events) = drain(&mut gw, 5);
                assert!(events.contains(&Event::StateChanged {
                    job_id: "j".into(),
                    from,
                    to
                }));
            } else {
                refused += 1;
                assert_eq!(
                    result,
                    Err(LocalError::Transition(TransitionError { from, to })),
                    "{from} -> {to}"
                );
                assert_eq!(gw.job_state("j"), Some(from), "unchanged");
                assert_eq!(drain(&mut gw, 5), (vec![], vec![]), "nothing emitted");
            }
        }
    }
    assert_eq!(refused, 81 - 15);
}

#[test]
fn create_is_idempotent_by_job_id() {
    let mut gw = gateway();
    let first = call(&mut gw, 0, "jobs.create", job("j1")).unwrap();
    assert_eq!(first, json!({"jobId": "j1", "status": "CREATED"}));
    // Same payload, other key order and number spelling: the same answer, nothing new.
    let same: Value = serde_json::from_str(
        r#"{"job":{"policy":{"timeoutSec":10.0},"repo":"org/repo","jobId":"j1"}}"#,
    )
    .unwrap();
    gw.handle_message(1, C, &request("r2", "jobs.create", same))
        .unwrap();
    let (sent, events) = drain(&mut gw, 1);
    assert_eq!(events, vec![]);
    assert_eq!(
        sent,
        vec![Outgoing::Response {
            id: "r2".into(),
            outcome: Ok(first.as_object().unwrap().clone())
        }]
    );
    // Still the first answer once the job moved on.
    call(&mut gw, 2, "jobs.start", json!({"jobId": "j1"})).unwrap();
    assert_eq!(call(&mut gw, 3, "jobs.create", job("j1")).unwrap(), first);
    // A different payload under the same id is a conflict.
    let other = json!({"job": {"jobId": "j1", "repo": "org/other"}});
    let err = call(&mut gw, 4, "jobs.create", other).unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert_eq!(err.details.unwrap()["jobId"], "j1");
    assert_eq!(gw.job_spec("j1").unwrap().repo, "org/repo");
    assert_eq!(gw.job_count(), 1);
}

#[test]
fn start_never_restarts() {
    let mut gw = gateway();
    call(&mut gw, 0, "jobs.create", job("j")).unwrap();
    gw.handle_message(0, C, &request("s1", "jobs.start", json!({"jobId": "j"})))
        .unwrap();
    let (sent, events) = drain(&mut gw, 0);
    assert_eq!(
        sent[0],
        Outgoing::Response {
            id: "s1".into(),
            outcome: Ok(json!({"jobId": "j", "status": "RUNNING"})
                .as_object()
                .unwrap()
                .clone())
        }
    );
    assert_eq!(events.len(), 2, "CREATED→QUEUED→RUNNING: {events:?}");
    for now in [1, 2] {
        assert_eq!(
            call(&mut gw, now, "jobs.start", json!({"jobId": "j"})).unwrap()["status"],
            "RUNNING"
        );
    }
    gw.review_ready(3, "j", Artifacts::default()).unwrap();
    gw.complete(4, "j", None).unwrap();
    drain(&mut gw, 4);
    gw.handle_message(5, C, &request("s2", "jobs.start", json!({"jobId": "j"})))
        .unwrap();
    let (sent, events) = drain(&mut gw, 5);
    assert_eq!(events, vec![]);
    assert!(
        matches!(&sent[..], [Outgoing::Response { outcome: Ok(r), .. }] if r["status"] == "COMPLETED")
    );

    // Cancelled before it ever started: starting is an illegal transition.
    call(&mut gw, 6, "jobs.create", job("k")).unwrap();
    call(&mut gw, 6, "jobs.cancel", json!({"jobId": "k"})).unwrap();
    let err = call(&mut gw, 7, "jobs.start", json!({"jobId": "k"})).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidTransition);
    let details = err.details.unwrap();
    assert_eq!(
        (&details["from"], &details["to"]),
        (&json!("CANCELLED"), &json!("QUEUED"))
    );
    assert_eq!(
        code(call(&mut gw, 7, "jobs.start", json!({"jobId": "nope"}))),
        "E_NOT_FOUND"
    );
}

#[test]
fn run_slots_queue_jobs_in_order() {
    let mut gw = gateway();
    gw.config.max_running = 1;
    for j in ["a", "b", "c"] {
        call(&mut gw, 0, "jobs.create", job(j)).unwrap();
    }
    let starts: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|j| call(&mut gw, 0, "jobs.start", json!({"jobId": j})).unwrap()["status"].clone())
        .collect();
    assert_eq!(starts, [json!("RUNNING"), json!("QUEUED"), json!("QUEUED")]);
    call(&mut gw, 1, "jobs.cancel", json!({"jobId": "b"})).unwrap();
    gw.fail(2, "a", ErrorBody::new(ErrorCode::Internal, "boom"))
        .unwrap();
    assert_eq!(gw.job_state("c"), Some(JobState::Running));
    assert!(gw.run_queue.is_empty());
    let result = call(&mut gw, 3, "jobs.result", json!({"jobId": "a"})).unwrap();
    assert_eq!(result["status"], "FAILED");
    assert_eq!(result["error"]["code"], "E_INTERNAL");
}

#[test]
fn jobs_time_out_from_running() {
    let mut gw = gateway();
    call(&mut gw, 0, "jobs.create", job("j")).unwrap();
    call(&mut gw, 1_000, "jobs.start", json!({"jobId": "j"})).unwrap();
    assert_eq!(gw.poll_output(1_000), Output::Timeout(11_000));
    gw.handle_timeout(10_999);
    assert_eq!(gw.job_state("j"), Some(JobState::Running));
    gw.handle_timeout(11_000);
    assert_eq!(gw.job_state("j"), Some(JobState::Timeout));
    let (_, events) = drain(&mut gw, 11_000);
    assert_eq!(
        events,
        vec![Event::StateChanged {
            job_id: "j".into(),
            from: JobState::Running,
            to: JobState::Timeout
        }]
    );
    assert_eq!(
        gw.poll_output(11_000),
        Output::Timeout(11_000 + IDLE_WAIT_MS)
    );
}

#[test]
fn old_and_incompatible_versions_are_refused() {
    let mut gw = gateway();
    for v in ["0.9", "2.0"] {
        let mut msg: Value =
            serde_json::from_slice(&request("r", "gateway.ping", json!({}))).unwrap();
        msg["v"] = json!(v);
        gw.handle_message(0, C, msg.to_string().as_bytes()).unwrap();
        let (sent, _) = drain(&mut gw, 0);
        let Outgoing::Response {
            outcome: Err(e), ..
        } = &sent[0]
        else {
            panic!("{sent:?}")
        };
        assert_eq!(e.code, ErrorCode::VersionUnsupported);
        assert_eq!(e.details.as_ref().unwrap()["got"], v);
    }
    // A newer minor version is fine.
    let mut msg: Value =
        serde_json::from_slice(&request("r", "gateway.ping", json!({"echo": "x"}))).unwrap();
    msg["v"] = json!("1.4");
    gw.handle_message(0, C, msg.to_string().as_bytes()).unwrap();
    let (sent, _) = drain(&mut gw, 0);
    assert!(matches!(&sent[0], Outgoing::Response { outcome: Ok(r), .. } if r["echo"] == "x"));
}

#[test]
fn wrong_or_missing_token_is_refused() {
    let mut gw = gateway();
    let mut bad: Value = serde_json::from_slice(&request("r", "jobs.create", job("j"))).unwrap();
    for auth in [
        json!({"token": "tok-3f9a1c-SECREX"}),
        json!({"token": ""}),
        json!({}),
        json!(7),
    ] {
        bad["auth"] = auth;
        gw.handle_message(0, C, bad.to_string().as_bytes()).unwrap();
        let (sent, events) = drain(&mut gw, 0);
        assert_eq!(events, vec![]);
        let Outgoing::Response {
            outcome: Err(e), ..
        } = &sent[0]
        else {
            panic!()
        };
        assert_eq!(e.code, ErrorCode::Unauthorized);
    }
    bad.as_object_mut().unwrap().remove("auth");
    gw.handle_message(0, C, bad.to_string().as_bytes()).unwrap();
    assert!(
        matches!(&drain(&mut gw, 0).0[0], Outgoing::Response { outcome: Err(e), .. } if e.code == ErrorCode::Unauthorized)
    );
    assert_eq!(gw.stats().unauthorized, 5);
    assert_eq!(gw.job_count(), 0);

    // The transport's header token authenticates the connection instead.
    assert!(!gw.authenticate_connection(C, "wrong"));
    assert!(gw.authenticate_connection(C, TOKEN));
    gw.handle_message(0, C, bad.to_string().as_bytes()).unwrap();
    assert!(matches!(
        &drain(&mut gw, 0).0[0],
        Outgoing::Response { outcome: Ok(_), .. }
    ));
    // ...but not another connection, nor after close.
    gw.handle_message(0, ConnId(2), bad.to_string().as_bytes())
        .unwrap();
    assert!(matches!(
        &drain(&mut gw, 0).0[0],
        Outgoing::Response {
            outcome: Err(_),
            ..
        }
    ));
    gw.close_connection(C);
    gw.handle_message(0, C, bad.to_string().as_bytes()).unwrap();
    assert!(matches!(
        &drain(&mut gw, 0).0[0],
        Outgoing::Response {
            outcome: Err(_),
            ..
        }
    ));

    // Rotation: old and new accepted together, then only the new one.
    gw.set_tokens(vec![Token::new(TOKEN), Token::new("new")])
        .unwrap();
    assert!(call(&mut gw, 0, "gateway.ping", json!({})).is_ok());
    assert!(gw.authenticate_connection(C, TOKEN));
    gw.set_tokens(vec![Token::new("new")]).unwrap();
    gw.handle_message(0, C, bad.to_string().as_bytes()).unwrap();
    assert!(
        matches!(&drain(&mut gw, 0).0[0], Outgoing::Response { outcome: Err(e), .. } if e.code == ErrorCode::Unauthorized),
        "a rotation drops transport authentication"
    );
    assert_eq!(
        code(call(&mut gw, 0, "gateway.ping", json!({}))),
        "E_UNAUTHORIZED"
    );
    assert_eq!(gw.set_tokens(vec![]), Err(LocalError::NoToken));
    assert!(Gateway::new(Config::new(Token::new("")), 0, [0; 32]).is_err());
}

#[test]
fn the_connection_limit_refuses_the_upgrade_and_says_so() {
    let mut gw = Gateway::new(
        Config {
            max_connections: 2,
            ..Config::new(Token::new(TOKEN))
        },
        0,
        [0; 32],
    )
    .unwrap();
    // No token at the upgrade: accepted, each request carries its own.
    assert_eq!(gw.check_connection(None), Ok(()));
    let bad = gw.check_connection(Some("wrong")).unwrap_err();
    assert_eq!((bad, bad.http_status()), (ConnectionRefusal::BadToken, 401));
    for n in 1..=2 {
        assert_eq!(gw.check_connection(Some(TOKEN)), Ok(()));
        assert!(gw.authenticate_connection(ConnId(n), TOKEN));
    }
    // The third connection with a valid token is refused for the limit, not for its token.
    let full = gw.check_connection(Some(TOKEN)).unwrap_err();
    assert_eq!(full, ConnectionRefusal::TooManyConnections { max: 2 });
    assert_eq!((full.http_status(), full.close_code()), (503, 1013));
    assert!(full.to_string().contains("too many connections"), "{full}");
    assert!(!full.to_string().contains(TOKEN));
    assert_eq!(
        serde_json::to_value(full).unwrap(),
        json!({"too_many_connections": {"max": 2}})
    );
    // A wrong token is still a wrong token at the limit.
    assert_eq!(
        gw.check_connection(Some("wrong")),
        Err(ConnectionRefusal::BadToken)
    );
    // One closes: room again.
    gw.close_connection(ConnId(1));
    assert_eq!(gw.check_connection(Some(TOKEN)), Ok(()));
}

#[test]
fn an_invalid_payload_names_the_field_at_fault() {
    let mut gw = gateway();
    for (payload, field) in [
        (
            json!({"job": {"jobId": 5, "repo": "r"}}),
            "job.jobId: invalid type: integer `5`",
        ),
        (
            json!({"job": {"jobId": "j", "repo": "r", "branch": null}}),
            "job.branch: invalid type: null",
        ),
        (
            json!({"job": {"jobId": "j", "repo": "r", "policy": {"timeoutSec": -1}}}),
            "job.policy.timeoutSec: expected a non-negative integer, got -1",
        ),
    ] {
        let error = call(&mut gw, 0, "jobs.create", payload).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidParams);
        assert!(
            error.message.contains(field),
            "{:?} lacks {field:?}",
            error.message
        );
    }
}

#[test]
fn bad_messages_are_answered_or_ignored_never_fatal() {
    let mut gw = gateway();
    for junk in [
        &b"not json"[..],
        b"[]",
        b"{}",
        br#"{"id":""}"#,
        br#"{"id":5,"v":"1.0"}"#,
    ] {
        gw.handle_message(0, C, junk).unwrap();
    }
    // A response sent to the gateway is not answered.
    gw.handle_message(0, C, br#"{"v":"1.0","id":"x","type":"response","ts":"2026-02-18T12:00:00Z","ok":true,"result":{}}"#).unwrap();
    assert_eq!(drain(&mut gw, 0), (vec![], vec![]));
    assert_eq!(gw.stats().ignored, 6);
    let cases = [
        ("jobs.explode", json!({}), "E_UNKNOWN_OP"),
        ("jobs.start", json!({"job": "j"}), "E_INVALID_PARAMS"),
        (
            "jobs.create",
            json!({"job": {"jobId": "", "repo": "r"}}),
            "E_INVALID_PARAMS",
        ),
        ("jobs.status", json!({"jobId": "nope"}), "E_NOT_FOUND"),
        ("jobs.result", json!({"jobId": "nope"}), "E_NOT_FOUND"),
        ("approvals.list", json!({"jobId": "nope"}), "E_NOT_FOUND"),
    ];
    for (op, payload, expected) in cases {
        assert_eq!(code(call(&mut gw, 0, op, payload)), expected, "{op}");
    }
    let mut no_ts: Value =
        serde_json::from_slice(&request("r", "gateway.ping", json!({}))).unwrap();
    no_ts.as_object_mut().unwrap().remove("ts");
    gw.handle_message(0, C, no_ts.to_string().as_bytes())
        .unwrap();
    assert!(
        matches!(&drain(&mut gw, 0).0[0], Outgoing::Response { outcome: Err(e), .. } if e.code == ErrorCode::BadRequest)
    );
    let big = vec![b' '; gw.config().max_message_bytes + 1];
    gw.handle_message(0, C, &big).unwrap();
    assert_eq!(gw.stats().ignored, 7);
}

#[test]
fn ping_reports_version_and_uptime() {
    let mut gw = Gateway::new(Config::new(Token::new(TOKEN)), 5_000, [1; 32]).unwrap();
    let r = call(&mut gw, 1_239_999, "gateway.ping", json!({"echo": "hello"})).unwrap();
    assert_eq!(
        r,
        json!({"echo": "hello", "gatewayVersion": env!("CARGO_PKG_VERSION"), "uptimeSec": 1234})
    );
    assert_eq!(
        gw.stats().ops[&Op::Ping],
        OpStats {
            requests: 1,
            errors: 0
        }
    );
}

#[test]
fn policy_can_require_a_sandbox() {
    let mut gw = gateway();
    gw.config.require_sandbox = true;
    let j = json!({"job": {"jobId": "j", "repo": "r", "policy": {"sandbox": false}}});
    let err = call(&mut gw, 0, "jobs.create", j).unwrap_err();
    assert_eq!(err.code, ErrorCode::PolicyDeny);
    assert_eq!(err.message, "Sandbox required by policy.");
    assert_eq!(err.details.unwrap()["label"], "sandbox-required");
    assert!(
        call(&mut gw, 0, "jobs.create", job("k")).is_ok(),
        "sandbox defaults to true"
    );
}

#[test]
fn approvals_flow() {
    let mut gw = reach(JobState::Running);
    gw.handle_message(0, C, &request("st", "jobs.stream", json!({"jobId": "j"})))
        .unwrap();
    drain(&mut gw, 0);
    let t = gw
        .request_approval("j", None, "shell", "rm -rf build")
        .unwrap();
    assert_eq!(t.status, ApprovalStatus::Pending);
    assert!(t.approval_id.starts_with("appr_") && t.approval_id.len() == 31);
    let (sent, _) = drain(&mut gw, 0);
    assert!(
        matches!(&sent[..], [Outgoing::Event { id, event }] if id == "st" && event.msg.contains(&t.approval_id) && !event.msg.contains("rm -rf"))
    );

    let listed = call(&mut gw, 0, "approvals.list", json!({"status": "pending"})).unwrap();
    assert_eq!(listed["approvals"][0]["approvalId"], t.approval_id.as_str());
    assert_eq!(listed["approvals"][0]["requested"], "rm -rf build");

    // The approval belongs to job j only.
    call(&mut gw, 0, "jobs.create", job("other")).unwrap();
    let wrong = json!({"jobId": "other", "approvalId": t.approval_id, "decision": "approve"});
    assert_eq!(
        code(call(&mut gw, 0, "approvals.approve", wrong)),
        "E_NOT_FOUND"
    );

    let decide = json!({"jobId": "j", "approvalId": t.approval_id, "decision": "approve", "reason": "Allowed by label direct-commit"});
    gw.handle_message(0, C, &request("a1", "approvals.approve", decide.clone()))
        .unwrap();
    let (sent, events) = drain(&mut gw, 0);
    let expected = json!({"jobId": "j", "approvalId": t.approval_id, "decision": "approve", "status": "RUNNING"});
    assert!(
        matches!(&sent[0], Outgoing::Response { outcome: Ok(r), .. } if Value::Object(r.clone()) == expected)
    );
    assert!(matches!(&sent[1], Outgoing::Event { event, .. } if event.msg.ends_with("approved")));
    assert_eq!(
        events,
        vec![Event::ApprovalDecided {
            job_id: "j".into(),
            approval_id: t.approval_id.clone(),
            decision: Decision::Approve,
            reason: Some("Allowed by label direct-commit".into())
        }]
    );
    // Same decision again: same answer, no new event. The opposite: conflict.
    assert_eq!(
        call(&mut gw, 0, "approvals.approve", decide).unwrap(),
        expected
    );
    let deny = json!({"jobId": "j", "approvalId": t.approval_id});
    assert_eq!(code(call(&mut gw, 0, "approvals.deny", deny)), "E_CONFLICT");
    let contradiction = json!({"jobId": "j", "approvalId": t.approval_id, "decision": "approve"});
    assert_eq!(
        code(call(&mut gw, 0, "approvals.deny", contradiction)),
        "E_INVALID_PARAMS"
    );

    // A denial leaves the job running; a pending approval expires when the job leaves RUNNING.
    let t2 = gw
        .request_approval("j", Some("appr_2"), "shell", "git push -f")
        .unwrap();
    let deny = json!({"jobId": "j", "approvalId": "appr_2", "decision": "deny"});
    assert_eq!(
        call(&mut gw, 0, "approvals.approve", deny).unwrap()["decision"],
        "deny"
    );
    assert_eq!(gw.job_state("j"), Some(JobState::Running));
    assert_eq!(
        gw.request_approval("j", Some("appr_2"), "shell", "x"),
        Err(LocalError::DuplicateApprovalId("appr_2".into()))
    );
    let t3 = gw
        .request_approval("j", None, "net", "curl example.org")
        .unwrap();
    gw.review_ready(1, "j", Artifacts::default()).unwrap();
    let late = json!({"jobId": "j", "approvalId": t3.approval_id, "decision": "approve"});
    assert_eq!(
        code(call(&mut gw, 1, "approvals.approve", late)),
        "E_CONFLICT"
    );
    let result = call(&mut gw, 1, "jobs.result", json!({"jobId": "j"})).unwrap();
    let approved: Vec<_> = result["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["approved"].as_bool().unwrap())
        .collect();
    assert_eq!(approved, [true, false, false]);
    assert_eq!(t2.status, ApprovalStatus::Pending);
    assert!(matches!(
        gw.request_approval("j", None, "shell", "ls"),
        Err(LocalError::NotRunning {
            state: JobState::ReviewReady,
            ..
        })
    ));
}

#[test]
fn approvals_are_automatic_without_require_approvals() {
    let mut gw = gateway();
    let j = json!({"job": {"jobId": "j", "repo": "r", "policy": {"requireApprovals": false}}});
    call(&mut gw, 0, "jobs.create", j).unwrap();
    call(&mut gw, 0, "jobs.start", json!({"jobId": "j"})).unwrap();
    let t = gw.request_approval("j", None, "shell", "make").unwrap();
    assert_eq!(t.status, ApprovalStatus::Approved);
    let listed = call(&mut gw, 0, "approvals.list", json!({"jobId": "j"})).unwrap();
    assert_eq!(listed["approvals"][0]["reason"], "policy");
}

#[test]
fn stream_events_follow_the_job_until_it_ends() {
    let mut gw = gateway();
    call(&mut gw, 0, "jobs.create", job("j")).unwrap();
    gw.handle_message(0, C, &request("st", "jobs.stream", json!({"jobId": "j"})))
        .unwrap();
    gw.handle_message(
        0,
        ConnId(2),
        &request("st2", "jobs.start", json!({"jobId": "j"})),
    )
    .unwrap();
    let (sent, _) = drain(&mut gw, 0);
    let seen: Vec<_> = sent
        .iter()
        .filter_map(|o| match o {
            Outgoing::Event { id, event } => Some((id.as_str(), event.status, event.seq)),
            Outgoing::Response { .. } => None,
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("st", Some(JobState::Queued), Some(1)),
            ("st", Some(JobState::Running), Some(2))
        ]
    );
    gw.set_progress("j", Some("modify_code"), Some(0.42))
        .unwrap();
    gw.log("j", Level::Info, "Running tests...").unwrap();
    gw.review_ready(1, "j", Artifacts::default()).unwrap();
    gw.complete(2, "j", None).unwrap();
    gw.log("j", Level::Info, "after the end").unwrap();
    let (sent, _) = drain(&mut gw, 2);
    let msgs: Vec<_> = sent
        .iter()
        .map(|o| match o {
            Outgoing::Event { id, event } => {
                assert_eq!(id, "st");
                (event.msg.clone(), event.seq.unwrap())
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        msgs,
        [
            ("Running tests...".to_owned(), 3),
            ("job REVIEW_READY".to_owned(), 4),
            ("job COMPLETED".to_owned(), 5)
        ]
    );
    assert_eq!(gw.subscription_count, 0);
    assert!(gw.set_progress("j", None, Some(1.5)).is_err());
}

#[test]
fn memory_stays_bounded() {
    let mut gw = gateway();
    gw.config.max_jobs = 2;
    call(&mut gw, 0, "jobs.create", job("a")).unwrap();
    call(&mut gw, 0, "jobs.create", job("b")).unwrap();
    assert_eq!(
        code(call(&mut gw, 0, "jobs.create", job("c"))),
        "E_CAPACITY"
    );
    call(&mut gw, 0, "jobs.cancel", json!({"jobId": "b"})).unwrap();
    call(&mut gw, 0, "jobs.create", job("c")).unwrap();
    assert_eq!(gw.job_count(), 2);
    assert_eq!(gw.job_state("b"), None);
    assert_eq!(gw.stats().jobs_forgotten, 1);

    gw.config.max_queued_outputs = 3;
    for i in 0..3 {
        gw.handle_message(0, C, &request(&format!("p{i}"), "gateway.ping", json!({})))
            .unwrap();
    }
    assert_eq!(
        gw.handle_message(0, C, &request("p4", "gateway.ping", json!({}))),
        Err(LocalError::Backpressure(3))
    );
    drain(&mut gw, 0);

    gw.config.max_subscriptions = 1;
    call(&mut gw, 0, "jobs.stream", json!({"jobId": "a"})).unwrap();
    call(&mut gw, 0, "jobs.stream", json!({"jobId": "a"})).unwrap();
    assert_eq!(
        code(call(&mut gw, 0, "jobs.stream", json!({"jobId": "c"}))),
        "E_CAPACITY"
    );
    // Log lines are lossy when the queue is full.
    gw.config.max_queued_outputs = 0;
    gw.log("a", Level::Debug, "x").unwrap();
    assert_eq!(gw.stats().events_dropped, 1);
}

#[test]
fn secrets_never_reach_logs() {
    let env = RequestEnvelope::parse(&request("r", "jobs.create", job("j"))).unwrap();
    let lines = [
        format!("{env:?}"),
        format!("{:?}", env.redacted()),
        env.log_line(),
        secret::redact_line(&request("r", "jobs.create", job("j"))),
        format!("{:?}", gateway()),
        format!("{:?}", Config::new(Token::new(TOKEN))),
    ];
    for line in &lines {
        assert!(!line.contains(TOKEN), "{line}");
    }
    // Free-form JSON (untyped payloads, results, error details) is scrubbed by key in Debug.
    let generic = GenericRequestEnvelope::parse(&request(
        "r",
        "x.y",
        json!({"apiKey": TOKEN, "nested": {"password": TOKEN}}),
    ))
    .unwrap();
    let mut result = serde_json::Map::new();
    result.insert("secret".into(), TOKEN.into());
    let response = Outgoing::Response {
        id: "r".into(),
        outcome: Ok(result.clone()),
    };
    let envelope = response.envelope(Timestamp::from_unix_ms(0));
    let error = ErrorBody::new(ErrorCode::Internal, "x").with_detail("token", TOKEN);
    for line in [
        format!("{generic:?}"),
        format!("{response:?}"),
        format!("{envelope:?}"),
        format!("{error:?}"),
    ] {
        assert!(!line.contains(TOKEN), "{line}");
        assert!(line.contains("[REDACTED]"), "{line}");
    }
    assert!(env.log_line().contains(r#""jobId":"j""#));
    assert!(env.log_line().contains(r#""token":"[REDACTED]""#));
    // The wire form keeps it.
    assert!(env.to_json().contains(TOKEN));
}

#[test]
fn the_spec_example_flow_formats_with_the_hosts_ts() {
    let mut gw = gateway();
    gw.handle_message(
        0,
        C,
        &request("req_1", "gateway.ping", json!({"echo": "hello"})),
    )
    .unwrap();
    let Output::Transmit(t) = gw.poll_output(0) else {
        panic!()
    };
    let ts = Timestamp::parse("2026-02-18T12:00:02Z").unwrap();
    let text = t.message.to_json(&ts);
    let back = ResponseEnvelope::parse(text.as_bytes()).unwrap();
    assert_eq!(back.ts, ts);
    assert_eq!(back.id, "req_1");
    assert_eq!(
        back.result_as::<ops::PingResult>().unwrap().echo.as_deref(),
        Some("hello")
    );
}

// ---- round trip property ------------------------------------------------------------------

fn text() -> impl Strategy<Value = String> {
    "[ -~é\\\\\"\n]{0,12}"
}

fn id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_.-]{1,20}"
}

fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> impl Strategy<Value = Option<T>> {
    proptest::option::of(s)
}

fn job_spec() -> impl Strategy<Value = JobSpec> {
    (
        id(),
        text().prop_filter("repo non-empty", |r| !r.is_empty()),
        opt((0u64..1_000_000, opt(text())).prop_map(|(number, title)| Issue { number, title })),
        opt(text()),
        opt((
            text(),
            opt(prop_oneof![
                Just(WorkspaceMode::Isolated),
                Just(WorkspaceMode::Shared)
            ]),
        )
            .prop_map(|(name, mode)| Workspace { name, mode })),
        opt((
            opt(any::<bool>()),
            opt(any::<bool>()),
            opt(1u64..100_000),
            opt(any::<bool>()),
        )
            .prop_map(
                |(sandbox, allow_network, timeout_sec, require_approvals)| Policy {
                    sandbox,
                    allow_network,
                    timeout_sec,
                    require_approvals,
                },
            )),
        opt((
            text(),
            opt(prop::collection::vec(text(), 0..3)),
            opt(prop::collection::vec(text(), 0..3)),
        )
            .prop_map(|(goal, acceptance, constraints)| Instructions {
                goal,
                acceptance,
                constraints,
            })),
    )
        .prop_map(
            |(job_id, repo, issue, branch, workspace, policy, instructions)| JobSpec {
                job_id,
                repo,
                issue,
                branch,
                workspace,
                policy,
                instructions,
            },
        )
}

fn request_strategy() -> impl Strategy<Value = Request> {
    let decision = opt(prop_oneof![Just(Decision::Approve), Just(Decision::Deny)]);
    prop_oneof![
        opt(text()).prop_map(|echo| Request::Ping(PingParams { echo })),
        job_spec().prop_map(|job| Request::JobsCreate(JobsCreateParams { job })),
        id().prop_map(|job_id| Request::JobsStart(JobRef { job_id })),
        id().prop_map(|job_id| Request::JobsStatus(JobRef { job_id })),
        id().prop_map(|job_id| Request::JobsStream(JobRef { job_id })),
        id().prop_map(|job_id| Request::JobsResult(JobRef { job_id })),
        (id(), opt(text()))
            .prop_map(|(job_id, reason)| Request::JobsCancel(JobsCancelParams { job_id, reason })),
        (
            opt(id()),
            opt(prop_oneof![
                Just(ApprovalStatus::Pending),
                Just(ApprovalStatus::Expired)
            ])
        )
            .prop_map(
                |(job_id, status)| Request::ApprovalsList(ApprovalsListParams { job_id, status })
            ),
        (id(), id(), decision, opt(text())).prop_map(|(job_id, approval_id, decision, reason)| {
            Request::ApprovalsApprove(ApprovalDecisionParams {
                job_id,
                approval_id,
                decision,
                reason,
            })
        }),
        (id(), id(), opt(text())).prop_map(|(job_id, approval_id, reason)| {
            Request::ApprovalsDeny(ApprovalDecisionParams {
                job_id,
                approval_id,
                decision: Some(Decision::Deny),
                reason,
            })
        }),
    ]
}

fn version() -> impl Strategy<Value = Version> {
    prop_oneof![Just("1"), Just("1.0"), Just("1.12"), Just("1.0.7")]
        .prop_map(|v| Version::parse(v).unwrap())
}

fn ts() -> impl Strategy<Value = Timestamp> {
    (0u64..4_102_444_800_000).prop_map(Timestamp::from_unix_ms)
}

fn level() -> impl Strategy<Value = Level> {
    prop_oneof![
        Just(Level::Debug),
        Just(Level::Info),
        Just(Level::Warn),
        Just(Level::Error)
    ]
}

fn envelope() -> impl Strategy<Value = Envelope> {
    let error = (
        prop_oneof![
            Just(ErrorCode::PolicyDeny),
            Just(ErrorCode::Conflict),
            Just(ErrorCode::Other("E_NEW_THING".into()))
        ],
        text(),
        opt(text().prop_map(|t| {
            let mut m = serde_json::Map::new();
            m.insert("label".into(), t.into());
            m
        })),
    )
        .prop_map(|(code, message, details)| ErrorBody {
            code,
            message,
            details,
        });
    let result = prop::collection::btree_map(
        id(),
        prop_oneof![
            text().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from)
        ],
        0..4,
    )
    .prop_map(|m| m.into_iter().collect::<serde_json::Map<_, _>>());
    prop_oneof![
        (
            version(),
            id(),
            ts(),
            opt(text()
                .prop_filter("token", |t| !t.is_empty())
                .prop_map(Token::new)),
            request_strategy()
        )
            .prop_map(
                |(v, id, ts, token, request)| Envelope::Request(RequestEnvelope {
                    v,
                    id,
                    ts,
                    auth: token.map(|token| Auth { token }),
                    request
                })
            ),
        (
            version(),
            id(),
            ts(),
            prop_oneof![result.prop_map(Ok), error.prop_map(Err)]
        )
            .prop_map(|(v, id, ts, outcome)| Envelope::Response(ResponseEnvelope {
                v,
                id,
                ts,
                outcome
            })),
        (
            opt(version()),
            opt(id()),
            opt(ts()),
            id(),
            level(),
            text(),
            opt(prop::sample::select(JobState::ALL.to_vec())),
            opt(any::<u64>())
        )
            .prop_map(
                |(v, id, ts, job_id, level, msg, status, seq)| Envelope::Event(EventEnvelope {
                    v,
                    id,
                    ts,
                    event: JobEvent {
                        job_id,
                        level,
                        msg,
                        status,
                        seq
                    },
                })
            ),
    ]
}

proptest! {
    #[test]
    fn any_envelope_round_trips(env in envelope()) {
        let text = env.to_value().to_string();
        prop_assert_eq!(&Envelope::parse(text.as_bytes()).unwrap(), &env);
        // And through the typed parsers and serde.
        match &env {
            Envelope::Request(r) => {
                prop_assert_eq!(&RequestEnvelope::parse(text.as_bytes()).unwrap(), r);
                prop_assert_eq!(&serde_json::from_str::<RequestEnvelope>(&text).unwrap(), r);
                prop_assert_eq!(serde_json::to_value(r).unwrap(), r.to_value());
            }
            Envelope::Response(r) => prop_assert_eq!(&serde_json::from_str::<ResponseEnvelope>(&text).unwrap(), r),
            Envelope::Event(e) => prop_assert_eq!(&serde_json::from_str::<EventEnvelope>(&text).unwrap(), e),
        }
    }

    #[test]
    fn garbage_never_panics_the_engine(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut gw = gateway();
        gw.handle_message(0, C, &bytes).unwrap();
        drain(&mut gw, 0);
        let _ = Envelope::parse(&bytes);
        prop_assert!(!secret::redact_line(&bytes).contains(TOKEN));
    }
}

/// One step of a random walk through the engine.
#[derive(Debug, Clone)]
enum Step {
    Op(usize, usize),
    Host(usize, usize),
    Approval(usize),
    Decide(usize, usize, bool),
    Time(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..6usize, 0..3usize).prop_map(|(op, j)| Step::Op(op, j)),
        (0..9usize, 0..3usize).prop_map(|(to, j)| Step::Host(to, j)),
        (0..3usize).prop_map(Step::Approval),
        (0..3usize, 0..4usize, any::<bool>()).prop_map(|(j, a, yes)| Step::Decide(j, a, yes)),
        (0..4_000u64).prop_map(Step::Time),
    ]
}

proptest! {
    /// Whatever the Commander and the executor do, every state change is in the table, final
    /// states never change, run slots are respected, and the engine stays within its limits.
    #[test]
    fn random_walks_keep_the_invariants(steps in prop::collection::vec(step(), 1..60)) {
        let mut gw = gateway();
        gw.config.max_running = 2;
        gw.config.max_jobs = 3;
        let jobs = ["a", "b", "c"];
        let mut now = 0;
        let mut finals: std::collections::BTreeMap<&str, JobState> = Default::default();
        for s in steps {
            match s.clone() {
                Step::Op(op, j) => {
                    let id = jobs[j];
                    let (name, payload) = match op {
                        0 => ("jobs.create", json!({"job": {"jobId": id, "repo": "r", "policy": {"timeoutSec": 2, "requireApprovals": j != 2}}})),
                        1 => ("jobs.start", json!({"jobId": id})),
                        2 => ("jobs.cancel", json!({"jobId": id})),
                        3 => ("jobs.stream", json!({"jobId": id})),
                        4 => ("jobs.status", json!({"jobId": id})),
                        _ => ("jobs.result", json!({"jobId": id})),
                    };
                    gw.handle_message(now, C, &request("r", name, payload)).unwrap();
                }
                Step::Host(to, j) => { let _ = gw.transition(now, jobs[j], JobState::ALL[to]); }
                Step::Approval(j) => { let _ = gw.request_approval(jobs[j], None, "shell", "x"); }
                Step::Decide(j, a, yes) => {
                    let op = if yes { "approvals.approve" } else { "approvals.deny" };
                    let ids: Vec<String> = gw.jobs.get(jobs[j]).map(|job| job.approvals.iter().map(|x| x.id.clone()).collect()).unwrap_or_default();
                    if let Some(id) = ids.get(a) {
                        gw.handle_message(now, C, &request("d", op, json!({"jobId": jobs[j], "approvalId": id}))).unwrap();
                    }
                }
                Step::Time(dt) => { now += dt; gw.handle_timeout(now); }
            }
            let (sent, events) = drain(&mut gw, now);
            let answered = sent.iter().any(|o| matches!(o, Outgoing::Response { .. }));
            prop_assert!(answered || !matches!(s, Step::Op(..)), "every request is answered");
            for e in events {
                if let Event::StateChanged { job_id, from, to } = e {
                    prop_assert!(from.can_transition(to), "{} -> {}", from, to);
                    prop_assert!(!from.is_terminal());
                    let _ = job_id;
                }
            }
            let running = gw.jobs.values().filter(|j| j.state == JobState::Running).count();
            prop_assert_eq!(running, gw.running);
            prop_assert!(running <= 2);
            prop_assert!(gw.job_count() <= 3);
            // A final job stays final until it is forgotten.
            for id in jobs {
                match (finals.get(id), gw.job_state(id)) {
                    (Some(f), Some(now_state)) => prop_assert_eq!(*f, now_state),
                    (_, Some(st)) if st.is_terminal() => { finals.insert(id, st); }
                    (Some(_), None) => { finals.remove(id); }
                    _ => {}
                }
            }
            // Running jobs have deadlines and only they do; pending approvals only on running jobs.
            // The index of deadlines holds exactly the running jobs' ones.
            let deadlines: std::collections::BTreeSet<(u64, String)> = gw.jobs.iter()
                .filter_map(|(id, j)| Some((j.deadline?, id.clone()))).collect();
            prop_assert_eq!(&deadlines, &gw.deadlines);
            for job in gw.jobs.values() {
                prop_assert_eq!(job.deadline.is_some(), job.state == JobState::Running);
                if job.state != JobState::Running {
                    prop_assert!(job.approvals.iter().all(|a| a.status != ApprovalStatus::Pending));
                }
            }
        }
    }
}

#[test]
fn generated_approval_ids_are_fixed_by_the_seed() {
    let ids = |seed| {
        let mut gw = Gateway::new(Config::new(Token::new(TOKEN)), 0, [seed; 32]).unwrap();
        call(&mut gw, 0, "jobs.create", job("j")).unwrap();
        call(&mut gw, 0, "jobs.start", json!({"jobId": "j"})).unwrap();
        (0..5)
            .map(|_| {
                gw.request_approval("j", None, "shell", "x")
                    .unwrap()
                    .approval_id
            })
            .collect::<Vec<_>>()
    };
    let a = ids(9);
    assert_eq!(a, ids(9));
    assert_ne!(a, ids(10));
    let unique: std::collections::BTreeSet<_> = a.iter().collect();
    assert_eq!(unique.len(), 5);
    for id in &a {
        let body = id.strip_prefix("appr_").unwrap();
        assert_eq!(body.len(), 26);
        assert!(
            body.bytes()
                .all(|b| b"0123456789ABCDEFGHJKMNPQRSTVWXYZ".contains(&b))
        );
    }
}
