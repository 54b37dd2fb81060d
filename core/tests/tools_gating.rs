//! The tool layer end to end: an NPC binds, unbinds and rebinds at a desk (what it sees and the
//! `tools_changed` events), a RemoteBash call while unbound never reaches the OA1 client, and
//! the approval flows (approve, deny, remember, timeout) through the mobile server's
//! `permission_request` / `permission_response` and the gateway's approvals.

use deskwire::mobile::server::{self, Server};
use deskwire::mobile::{ClientMessage, ConnId, ServerMessage};
use deskwire::oa1;
use deskwire::tools::toolbox::Config;
use deskwire::tools::{
    ApprovalConfig, ApprovalResponse, Context, Event, Origin, Outcome, Output, Policy, Registry,
    Rule, Tier, ToolCall, Toolbox, ToolsChanged, Verdict,
};
use serde_json::json;

fn drain(tools: &mut Toolbox, now: u64) -> (Vec<Event>, u64) {
    let mut events = Vec::new();
    loop {
        match tools.poll_output(now) {
            Output::Event(e) => events.push(e),
            Output::Timeout(t) => return (events, t),
            other => panic!("{other:?}"),
        }
    }
}

fn changes(events: Vec<Event>) -> Vec<ToolsChanged> {
    events
        .into_iter()
        .map(|e| match e {
            Event::ToolsChanged(c) => c,
            other => panic!("{other:?}"),
        })
        .collect()
}

fn names(tools: &Toolbox, agent: &str) -> Vec<String> {
    tools
        .visible_tools(agent)
        .iter()
        .map(|s| s.name.clone())
        .collect()
}

/// What a host does with a model's RemoteBash call: only `Verdict::Run` reaches the desk.
fn host_calls_remote_bash(
    tools: &mut Toolbox,
    desk: &mut oa1::Client,
    agent: &str,
    call: &ToolCall,
) -> Result<String, String> {
    match tools.check_call(0, agent, call, Origin::Model).unwrap() {
        Verdict::Run => {
            oa1::remote_bash::call(desk, 0, &call.args.to_string()).map_err(|e| e.to_string())
        }
        Verdict::Refuse { observation } => Err(observation),
        other => panic!("{other:?}"),
    }
}

fn transmitted(desk: &mut oa1::Client) -> Vec<String> {
    let mut lines = Vec::new();
    while let oa1::Output::Transmit(line) = desk.poll_output(0) {
        lines.push(line);
    }
    lines
}

#[test]
fn bind_unbind_rebind() {
    let mut tools = Toolbox::new(
        Registry::with_builtins(),
        Policy::allow_all(),
        Config::default(),
        1,
    );
    let logical = ["bash", "read", "write", "list", "glob", "stat"];
    let mut with_desk = vec!["RemoteBash"];
    with_desk.extend(logical);

    // A new agent learns what it sees.
    tools.set_context("npc-1", Context::default()).unwrap();
    tools.set_context("npc-2", Context::default()).unwrap();
    let first = changes(drain(&mut tools, 0).0);
    assert_eq!(first.len(), 2);
    assert_eq!(first[0].visible, logical);
    assert_eq!(names(&tools, "npc-1"), logical);

    // npc-1 binds: only npc-1 gains RemoteBash.
    tools
        .set_context("npc-1", Context::bound_to("npc-1"))
        .unwrap();
    tools
        .set_context("npc-2", Context::bound_to("npc-1"))
        .unwrap();
    let bound = changes(drain(&mut tools, 0).0);
    assert_eq!(
        bound,
        [ToolsChanged {
            agent: "npc-1".into(),
            visible: with_desk.iter().map(|s| s.to_string()).collect(),
            added: vec!["RemoteBash".into()],
            removed: vec![],
        }]
    );
    assert_eq!(names(&tools, "npc-1"), with_desk);
    assert_eq!(names(&tools, "npc-2"), logical);

    // Unbind: it goes away again.
    tools.set_context("npc-1", Context::default()).unwrap();
    let unbound = changes(drain(&mut tools, 0).0);
    assert_eq!(unbound.len(), 1);
    assert_eq!(unbound[0].removed, ["RemoteBash"]);
    assert!(unbound[0].added.is_empty());

    // Rebind, then npc-2 takes the desk before the host polls: one event per agent, relative
    // to what the host last saw (npc-1: bound then unbound = no change at all).
    tools
        .set_context("npc-1", Context::bound_to("npc-1"))
        .unwrap();
    tools
        .set_context("npc-1", Context::bound_to("npc-2"))
        .unwrap();
    tools
        .set_context("npc-2", Context::bound_to("npc-2"))
        .unwrap();
    let swapped = changes(drain(&mut tools, 0).0);
    assert_eq!(swapped.len(), 1);
    assert_eq!(swapped[0].agent, "npc-2");
    assert_eq!(swapped[0].added, ["RemoteBash"]);

    // Setting the same facts again says nothing.
    tools
        .set_context("npc-2", Context::bound_to("npc-2"))
        .unwrap();
    assert!(drain(&mut tools, 0).0.is_empty());
}

#[test]
fn remote_bash_while_unbound_is_refused_and_never_sent() {
    let mut tools = Toolbox::new(
        Registry::with_builtins(),
        Policy::allow_all(),
        Config::default(),
        1,
    );
    let mut desk = oa1::Client::new(oa1::Config::new("#desk", "desk"), 5);
    let call = ToolCall::new("call_1", "RemoteBash", json!({"command": "uname -a"}));

    tools.set_context("npc-1", Context::default()).unwrap();
    let refused = host_calls_remote_bash(&mut tools, &mut desk, "npc-1", &call).unwrap_err();
    assert!(
        refused.starts_with("Tool \"RemoteBash\" is not available now"),
        "{refused}"
    );
    assert!(refused.contains("bound to a desk"), "{refused}");
    assert!(refused.contains("Available tools: bash, read"), "{refused}");
    assert!(transmitted(&mut desk).is_empty(), "nothing may reach IRC");

    // Another NPC's binding does not count either.
    tools
        .set_context("npc-1", Context::bound_to("npc-2"))
        .unwrap();
    assert!(host_calls_remote_bash(&mut tools, &mut desk, "npc-1", &call).is_err());
    assert!(transmitted(&mut desk).is_empty());

    // Bound: the same call goes out as an OA1 request.
    tools
        .set_context("npc-1", Context::bound_to("npc-1"))
        .unwrap();
    let id = host_calls_remote_bash(&mut tools, &mut desk, "npc-1", &call).unwrap();
    let lines = transmitted(&mut desk);
    assert_eq!(lines.len(), 1);
    assert!(lines[0].contains(&format!("OA1 REQ {id} ")), "{}", lines[0]);
    assert!(lines[0].ends_with("uname -a"), "{}", lines[0]);

    // An unknown tool names the tools the agent has, RemoteBash included now.
    let unknown = ToolCall::new("call_2", "Bash", json!({"command": "ls"}));
    let Verdict::Refuse { observation } = tools
        .check_call(0, "npc-1", &unknown, Origin::Model)
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        observation,
        "Unknown tool \"Bash\". Available tools: RemoteBash, bash, read, write, list, glob, stat."
    );
}

fn ask_policy() -> Policy {
    let mut policy = Policy::allow_all();
    policy.push(Rule::ask("RemoteBash", Tier::High)).unwrap();
    policy
        .push(Rule::deny_commands(
            "RemoteBash",
            ["rm -rf *"],
            "destructive",
        ))
        .unwrap();
    policy
}

fn bound_toolbox(timeout_ms: u64) -> Toolbox {
    let config = Config {
        approvals: ApprovalConfig {
            timeout_ms,
            max_pending: 8,
        },
        ..Config::default()
    };
    let mut tools = Toolbox::new(Registry::with_builtins(), ask_policy(), config, 42);
    tools
        .set_context("npc-1", Context::bound_to("npc-1"))
        .unwrap();
    drain(&mut tools, 0);
    tools
}

fn remote(id: &str, cmd: &str) -> ToolCall {
    ToolCall::new(id, "RemoteBash", json!({ "command": cmd }))
}

/// Asks, and returns the approval request the toolbox queued.
fn ask(tools: &mut Toolbox, now: u64, call: &ToolCall) -> deskwire::tools::ApprovalRequest {
    let Verdict::Pending { approval_id } =
        tools.check_call(now, "npc-1", call, Origin::Model).unwrap()
    else {
        panic!("expected an approval")
    };
    let (events, _) = drain(tools, now);
    match &events[..] {
        [Event::ApprovalRequested(r)] if r.id == approval_id => {
            // The human reads this call, not the tool's general text.
            let what = format!("npc-1 asks to run `{}` with RemoteBash (", call.subject());
            assert!(r.description.starts_with(&what), "{}", r.description);
            r.clone()
        }
        other => panic!("{other:?}"),
    }
}

/// The desktop's mobile server with one authenticated phone on connection 1.
fn phone_server() -> Server {
    let mut server = Server::new(server::Config::default(), [3; 32]);
    server.add_token("tok").unwrap();
    server.open(0, ConnId(1), Some("tok")).unwrap();
    while !matches!(server.poll_output(0), server::Output::Timeout(_)) {}
    server
}

/// Shows `request` on the phone through the mobile server and plays the user's answer back;
/// returns the toolbox's settlement.
fn answer_on_phone(
    tools: &mut Toolbox,
    server: &mut Server,
    now: u64,
    request: &deskwire::tools::ApprovalRequest,
    approved: bool,
    remember: bool,
) -> deskwire::tools::ApprovalDecided {
    let external = server
        .request_permission(now, request.to_new_permission())
        .unwrap();
    tools.link_external(&request.id, &external).unwrap();
    // The frame the phone receives.
    let mut shown = None;
    loop {
        match server.poll_output(now) {
            server::Output::Transmit { text, .. } => shown = Some(text),
            server::Output::Timeout(_) => break,
            _ => {}
        }
    }
    let Ok(ServerMessage::PermissionRequest(prompt)) = ServerMessage::parse(&shown.unwrap()) else {
        panic!()
    };
    assert_eq!(prompt.tool_name, "RemoteBash");
    assert_eq!(prompt.command, request.command());
    assert_eq!(prompt.tier, "high");
    // The user's answer, as the phone writes it.
    let reply = ApprovalResponse {
        id: prompt.id.clone(),
        approved,
        remember,
        reason: None,
    };
    let frame = ClientMessage::PermissionResponse(reply.to_permission_response()).to_json();
    server.handle_text(now, ConnId(1), &frame);
    let answer = loop {
        match server.poll_output(now) {
            server::Output::Event(server::Event::PermissionAnswered {
                id,
                approved,
                remember,
                ..
            }) => {
                break ApprovalResponse {
                    id,
                    approved,
                    remember,
                    reason: None,
                };
            }
            server::Output::Timeout(_) => panic!("no answer"),
            _ => {}
        }
    };
    tools.respond(now, &answer).unwrap();
    let (events, _) = drain(tools, now);
    match &events[..] {
        [Event::ApprovalDecided(d)] => d.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn approve_and_deny_through_the_phone() {
    let mut tools = bound_toolbox(60_000);
    let mut server = phone_server();

    let call = remote("call_1", "make deploy");
    let request = ask(&mut tools, 1_000, &call);
    assert_eq!(request.deadline_ms, 61_000);
    assert_eq!(request.tier, Tier::High);
    let decided = answer_on_phone(&mut tools, &mut server, 2_000, &request, true, false);
    assert!(decided.may_run());
    assert_eq!(decided.request.call, call);

    // Not remembered: the same call asks again, and this time the user says no.
    let request = ask(&mut tools, 3_000, &call);
    let decided = answer_on_phone(&mut tools, &mut server, 4_000, &request, false, false);
    assert_eq!(decided.outcome, Outcome::Denied);
    assert_eq!(
        decided.observation().unwrap(),
        "The user denied this call of RemoteBash. It was not run."
    );
    assert_eq!(tools.pending_approvals().count(), 0);

    // A deny rule never asks.
    let Verdict::Refuse { observation } = tools
        .check_call(5_000, "npc-1", &remote("c", "rm -rf /"), Origin::Model)
        .unwrap()
    else {
        panic!()
    };
    assert!(observation.contains("destructive"), "{observation}");
}

#[test]
fn remembered_answers() {
    let mut tools = bound_toolbox(60_000);
    let mut server = phone_server();

    let status = remote("c1", "git status");
    let request = ask(&mut tools, 0, &status);
    assert!(answer_on_phone(&mut tools, &mut server, 1, &request, true, true).may_run());
    // Remembered: the same command runs without asking, another one still asks.
    assert_eq!(
        tools
            .check_call(2, "npc-1", &remote("c2", "git status"), Origin::Model)
            .unwrap(),
        Verdict::Run
    );
    let other = ask(&mut tools, 3, &remote("c3", "git push"));
    // A remembered "no" refuses at once.
    assert!(!answer_on_phone(&mut tools, &mut server, 4, &other, false, true).may_run());
    let Verdict::Refuse { observation } = tools
        .check_call(5, "npc-1", &remote("c4", "git push"), Origin::Model)
        .unwrap()
    else {
        panic!()
    };
    assert!(
        observation.contains("denied this call before"),
        "{observation}"
    );
    // A slash command is the user's own request: no prompt even for a fresh command.
    assert_eq!(
        tools
            .check_call(6, "npc-1", &remote("c5", "make"), Origin::User)
            .unwrap(),
        Verdict::Run
    );
}

#[test]
fn unanswered_approval_times_out() {
    let mut tools = bound_toolbox(30_000);
    let request = ask(&mut tools, 10_000, &remote("c1", "make deploy"));
    // The engine asks to be woken at the deadline.
    assert_eq!(drain(&mut tools, 10_000).1, 40_000);
    assert!(drain(&mut tools, 39_999).0.is_empty());
    let (events, next) = drain(&mut tools, 40_000);
    let [Event::ApprovalDecided(decided)] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(decided.request.id, request.id);
    assert_eq!(decided.outcome, Outcome::TimedOut);
    assert!(!decided.may_run());
    assert_eq!(next, 40_000 + 3_600_000);
    // The phone's late answer finds nothing to approve.
    let late = ApprovalResponse {
        id: request.id.clone(),
        approved: true,
        remember: true,
        reason: None,
    };
    assert!(tools.respond(40_001, &late).is_err());
    assert_eq!(tools.policy().remembered_len(), 0);
}

#[test]
fn gateway_approval_flow() {
    use deskwire::gateway::{self, Gateway, Token};

    let mut tools = bound_toolbox(60_000);
    let request = ask(&mut tools, 0, &remote("c1", "make deploy"));

    // The executor side: a running job asks its Commander under the same approval id.
    let mut gw = Gateway::new(gateway::Config::new(Token::new("s3cret")), 0, [7; 32]).unwrap();
    let create = br#"{"v":"1.0","id":"r1","type":"request","ts":"2026-02-18T12:00:00Z","op":"jobs.create","auth":{"token":"s3cret"},"payload":{"job":{"jobId":"j1","repo":"org/repo","policy":{"requireApprovals":true}}}}"#;
    gw.handle_message(0, gateway::ConnId(1), create).unwrap();
    let start = br#"{"v":"1.0","id":"r2","type":"request","ts":"2026-02-18T12:00:00Z","op":"jobs.start","auth":{"token":"s3cret"},"payload":{"jobId":"j1"}}"#;
    gw.handle_message(0, gateway::ConnId(1), start).unwrap();
    let ticket = gw
        .request_approval(
            "j1",
            Some(&request.id),
            request.gateway_kind(),
            &request.gateway_requested(),
        )
        .unwrap();
    assert_eq!(ticket.approval_id, request.id);

    // The Commander approves.
    let params = ApprovalResponse {
        id: request.id.clone(),
        approved: true,
        remember: false,
        reason: Some("Allowed by label direct-commit".into()),
    }
    .to_decision_params("j1");
    let approve = json!({"v":"1.0","id":"r3","type":"request","ts":"2026-02-18T12:00:00Z",
        "op":"approvals.approve","auth":{"token":"s3cret"},"payload": params});
    gw.handle_message(0, gateway::ConnId(1), approve.to_string().as_bytes())
        .unwrap();
    let answer = loop {
        match gw.poll_output(0) {
            gateway::Output::Event(e) => {
                if let Some(a) = ApprovalResponse::from_gateway_event(&e) {
                    break a;
                }
            }
            gateway::Output::Timeout(_) => panic!("no decision"),
            _ => {}
        }
    };
    let decided = tools.respond(1, &answer).unwrap();
    assert!(decided.may_run());
    assert_eq!(
        decided.reason.as_deref(),
        Some("Allowed by label direct-commit")
    );
    assert_eq!(decided.to_approval_summary().requested, "make deploy");
}

/// While `max_pending` approvals wait, a call that needs one is refused with an observation
/// (the model's turn goes on), and once one is settled the next call may wait again.
#[test]
fn a_call_past_the_approval_limit_is_refused_not_failed() {
    let mut tools = bound_toolbox(60_000);
    let waiting: Vec<_> = (0..8)
        .map(|i| ask(&mut tools, 1, &remote(&format!("c{i}"), "make")))
        .collect();
    let verdict = tools
        .check_call(2, "npc-1", &remote("c8", "make"), Origin::Model)
        .unwrap();
    let Verdict::Refuse { observation } = verdict else {
        panic!("{verdict:?}")
    };
    assert_eq!(
        observation,
        "Not run: RemoteBash needs a human's approval, and 8 requests already wait for one. \
         Try again later."
    );
    assert_eq!(drain(&mut tools, 2).0, [], "no approval was asked");
    tools
        .respond(
            3,
            &ApprovalResponse {
                id: waiting[0].id.clone(),
                approved: false,
                remember: false,
                reason: None,
            },
        )
        .unwrap();
    drain(&mut tools, 3);
    ask(&mut tools, 4, &remote("c9", "make"));
}

/// Slash commands typed by a human each get their own call id, different from the approval
/// ids, so their results pair with the right call.
#[test]
fn slash_commands_get_ids_of_their_own() {
    let mut tools = bound_toolbox(60_000);
    let ids: Vec<String> = ["/read notes.txt", "/bash ls -la | head", "/read notes.txt"]
        .iter()
        .map(|line| tools.parse_slash(line).unwrap().id)
        .collect();
    let approval = ask(&mut tools, 1, &remote("c0", "make")).id;
    assert!(ids.iter().all(|id| id.starts_with("slash_")), "{ids:?}");
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 3, "{ids:?}");
    assert!(
        ids.iter().all(|id| id[6..] != approval[5..]),
        "{ids:?} {approval}"
    );
}

/// The gate refuses the RemoteBash arguments the tool would refuse (an empty or blank command,
/// a NUL byte, a timeout that is not a positive integer), with an observation for the model:
/// a host that runs whatever the gate lets through never meets a second refusal.
#[test]
fn remote_bash_arguments_the_tool_refuses_are_refused_at_the_gate() {
    let mut tools = Toolbox::new(
        Registry::with_builtins(),
        Policy::allow_all(),
        Config::default(),
        1,
    );
    tools
        .set_context("npc-1", Context::bound_to("npc-1"))
        .unwrap();
    let check = |tools: &mut Toolbox, args| {
        tools
            .check_call(
                0,
                "npc-1",
                &ToolCall::new("c1", "RemoteBash", args),
                Origin::Model,
            )
            .unwrap()
    };
    for (args, says) in [
        (json!({"command": ""}), "the command is empty"),
        (json!({"command": "  \n"}), "the command is empty"),
        (json!({"command": "echo a\u{0}b"}), "NUL byte at byte 6"),
        (json!({"command": "ls", "timeout_sec": 0}), "more than zero"),
        (json!({"command": "ls", "timeout_sec": -1}), "invalid value"),
    ] {
        match check(&mut tools, args.clone()) {
            Verdict::Refuse { observation } => {
                assert!(
                    observation.starts_with("Invalid arguments: ") && observation.contains(says),
                    "{args}: {observation}"
                );
            }
            other => panic!("{args}: {other:?}"),
        }
    }
    assert_eq!(
        check(&mut tools, json!({"command": "ls", "timeout_sec": 5})),
        Verdict::Run
    );
}
