//! JSON a peer sends that keeps its structure but cannot be read as values: a lone surrogate
//! escape (`"\ud800"`, which no string type holds) or a number past `f64` (`1e400`). A raw JSON
//! type accepts both, so they used to be routed and fail later, in the host or in a binding's
//! conversion (the Python `poll_output` raised, and the call was gone). Now every value a
//! dialect hands on is read in full first: a request is answered with the reason, an answer
//! ends its call with `CallError::Malformed`, and everything the peer gives out can be read.

use deskwire::jsonrpc::dialect::Dialect;
use deskwire::jsonrpc::{
    CallError, Id, JsonRpc2, Output, Peer, PeerConfig, PeerEvent, RawJson, Sidecar,
};
use serde_json::Value;

/// Every output until the peer sleeps: frames as JSON values, and events. Every raw value in
/// an event must be readable (what a host or binding does with it next).
fn drain<D: Dialect>(peer: &mut Peer<D>, now: u64) -> (Vec<Value>, Vec<PeerEvent>) {
    let (mut sent, mut events) = (Vec::new(), Vec::new());
    loop {
        match peer.poll_output(now) {
            Output::Transmit(bytes) => sent.push(
                serde_json::from_slice(&bytes)
                    .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes))),
            ),
            Output::Event(event) => {
                let raws: Vec<&RawJson> = match &event {
                    PeerEvent::Request { params, .. } | PeerEvent::Notification { params, .. } => {
                        params.iter().collect()
                    }
                    PeerEvent::Response { result, .. } => vec![result],
                    PeerEvent::Progress { progress, .. } => vec![progress],
                    _ => Vec::new(),
                };
                for raw in raws {
                    serde_json::from_str::<Value>(raw.get())
                        .unwrap_or_else(|e| panic!("{event:?} holds unreadable JSON: {e}"));
                }
                // What a binding does: the whole event as a JSON tree.
                serde_json::to_value(&event)
                    .unwrap_or_else(|e| panic!("{event:?} does not convert: {e}"));
                events.push(event);
            }
            Output::Timeout(_) => return (sent, events),
        }
    }
}

/// Values that keep JSON's structure but that no reader takes.
const UNREADABLE: [&str; 4] = [
    r#"{"x":"\ud800"}"#,
    r#"{"x":["ok","\udc00 trailing first"]}"#,
    r#"{"\ud800":1}"#,
    r#"{"x":1e400}"#,
];

fn sidecar_host() -> Peer<Sidecar> {
    Peer::new(Sidecar, PeerConfig::default(), 7)
}

fn id_json(id: &Id) -> String {
    serde_json::to_string(id).unwrap()
}

#[test]
fn sidecar_requests_with_unreadable_params_are_answered_invalid_params_and_the_next_one_runs() {
    for bad in UNREADABLE {
        let mut sidecar = Peer::new(Sidecar, PeerConfig::default(), 1);
        let lines = format!(
            "{{\"id\":\"s\",\"method\":\"health.ping\",\"params\":{bad}}}\n\
             {{\"id\":\"b\",\"method\":\"health.ping\",\"params\":{{}}}}\n"
        );
        sidecar.handle_bytes(0, lines.as_bytes());
        let (sent, events) = drain(&mut sidecar, 0);
        assert_eq!(sent.len(), 1, "{bad}: {sent:?}");
        assert_eq!(sent[0]["id"], "s", "{bad}");
        assert_eq!(sent[0]["error"]["code"], "INVALID_PARAMS", "{bad}");
        let message = sent[0]["error"]["message"].as_str().unwrap();
        assert!(message.contains("unreadable params"), "{bad}: {message}");
        // The bad line is reported; the good one is delivered as usual.
        assert!(
            matches!(&events[..], [PeerEvent::Malformed { .. }, PeerEvent::Request { id, .. }] if *id == Id::from("b")),
            "{bad}: {events:?}"
        );
        assert_eq!(sidecar.stats().malformed, 1);
        assert_eq!(sidecar.stats().incoming, 1, "only the good request waits");
    }
}

#[test]
fn sidecar_answers_that_cannot_be_read_end_their_call_malformed() {
    for bad in UNREADABLE {
        let mut host = sidecar_host();
        let call = host.call(0, "inference.complete", None, 5).unwrap();
        let other = host.call(0, "health.ping", None, 6).unwrap();
        drain(&mut host, 0);
        host.handle_bytes(
            1,
            format!(
                "{{\"id\":{},\"result\":{bad}}}\n{{\"id\":{},\"result\":{{\"status\":\"ok\",\"version\":\"1\"}}}}\n",
                id_json(&call),
                id_json(&other)
            )
            .as_bytes(),
        );
        let (sent, events) = drain(&mut host, 1);
        assert!(sent.is_empty(), "an answer is not answered: {sent:?}");
        match &events[..] {
            [
                PeerEvent::Failed {
                    id,
                    method,
                    user: 5,
                    error: CallError::Malformed(reason),
                },
                PeerEvent::Response {
                    id: ok, user: 6, ..
                },
            ] => {
                assert_eq!(
                    (id, method.as_str(), ok),
                    (&call, "inference.complete", &other)
                );
                assert!(reason.contains("unreadable result"), "{reason}");
            }
            other => panic!("{bad}: {other:?}"),
        }
        assert!(!host.is_pending(&call));
        assert_eq!(host.stats().malformed, 1);
        assert_eq!(host.stats().pending, 0);
    }
}

#[test]
fn sidecar_error_objects_of_the_wrong_shape_end_their_call_malformed() {
    for error in [
        r#"{"code":5,"message":"x"}"#,
        r#"{"code":"X"}"#,
        r#"{"code":"X","message":"\ud800"}"#,
        r#""just a string""#,
    ] {
        let mut host = sidecar_host();
        let call = host.call(0, "model.load", None, 1).unwrap();
        drain(&mut host, 0);
        host.handle_bytes(
            1,
            format!("{{\"id\":{},\"error\":{error}}}\n", id_json(&call)).as_bytes(),
        );
        let (sent, events) = drain(&mut host, 1);
        assert!(sent.is_empty(), "{error}: {sent:?}");
        assert!(
            matches!(
                &events[..],
                [PeerEvent::Failed {
                    error: CallError::Malformed(_),
                    ..
                }]
            ),
            "{error}: {events:?}"
        );
        assert!(!host.is_pending(&call));
    }
}

#[test]
fn unreadable_progress_is_reported_and_the_call_goes_on() {
    let mut host = sidecar_host();
    let call = host.call(0, "training.start", None, 1).unwrap();
    drain(&mut host, 0);
    let id = id_json(&call);
    host.handle_bytes(
        1,
        format!(
            "{{\"id\":{id},\"progress\":{{\"stage\":\"\\ud800\"}}}}\n\
             {{\"id\":{id},\"progress\":{{\"epoch\":1}}}}\n\
             {{\"id\":{id},\"result\":{{\"status\":\"completed\"}}}}\n"
        )
        .as_bytes(),
    );
    let (sent, events) = drain(&mut host, 1);
    assert!(sent.is_empty(), "progress is not answered: {sent:?}");
    match &events[..] {
        [
            PeerEvent::Malformed { reason },
            PeerEvent::Progress { .. },
            PeerEvent::Response { .. },
        ] => assert!(reason.contains("unreadable progress"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unreadable_answer_nobody_waits_for_is_counted_and_reported() {
    let mut host = sidecar_host();
    host.handle_bytes(0, b"{\"id\":\"nobody\",\"result\":{\"x\":\"\\ud800\"}}\n");
    let (sent, events) = drain(&mut host, 0);
    assert!(sent.is_empty(), "{sent:?}");
    assert!(
        matches!(&events[..], [PeerEvent::Malformed { .. }]),
        "{events:?}"
    );
    let stats = host.stats();
    assert_eq!((stats.malformed, stats.unmatched_responses), (1, 1));
}

#[test]
fn jsonrpc2_unreadable_params_results_and_error_data() {
    // A request: -32600 with its id, and the batch's other element still runs.
    let mut server = Peer::new(JsonRpc2, PeerConfig::default(), 1);
    server.handle_bytes(
        0,
        br#"[{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\ud800"}},{"jsonrpc":"2.0","id":2,"method":"m","params":[1e400]},{"jsonrpc":"2.0","id":3,"method":"m","params":["\ud83d\ude00"]}]
"#,
    );
    let (sent, events) = drain(&mut server, 0);
    assert!(sent.is_empty(), "the batch waits for request 3: {sent:?}");
    assert!(
        matches!(
            &events[..],
            [
                PeerEvent::Malformed { .. },
                PeerEvent::Malformed { .. },
                PeerEvent::Request {
                    id: Id::Number(3),
                    ..
                }
            ]
        ),
        "{events:?}"
    );
    server
        .respond(1, &Id::Number(3), RawJson::to_raw(&1).unwrap())
        .unwrap();
    let (sent, _) = drain(&mut server, 1);
    let answers = sent[0].as_array().expect("one array");
    let code_of = |id: i64| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .map(|a| a["error"]["code"].clone())
    };
    assert_eq!(code_of(1), Some(Value::from(-32600)));
    assert_eq!(code_of(2), Some(Value::from(-32600)));
    assert_eq!(code_of(3), Some(Value::Null), "3 has a result");

    // Answers: a result or error data that cannot be read ends the call, unanswered.
    let mut client = Peer::new(JsonRpc2, PeerConfig::default(), 1);
    let a = client.call(0, "a", None, 1).unwrap();
    let b = client.call(0, "b", None, 2).unwrap();
    let c = client.call(0, "c", None, 3).unwrap();
    drain(&mut client, 0);
    client.handle_bytes(
        1,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\\udfff\"}\n\
          {\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-1,\"message\":\"m\",\"data\":{\"d\":1e999}}}\n\
          {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":\"x\",\"message\":\"m\"}}\n",
    );
    let (sent, events) = drain(&mut client, 1);
    assert!(sent.is_empty(), "answers are not answered: {sent:?}");
    let failed: Vec<(Id, u64)> = events
        .iter()
        .map(|e| match e {
            PeerEvent::Failed {
                id,
                user,
                error: CallError::Malformed(_),
                ..
            } => (id.clone(), *user),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(failed, vec![(a, 1), (b, 2), (c, 3)]);
    assert_eq!(client.stats().pending, 0);
}

#[test]
fn readable_escapes_still_pass() {
    // A surrogate pair, an escaped backslash before `u`, big integers and tiny floats are all
    // values every reader takes.
    let mut sidecar = Peer::new(Sidecar, PeerConfig::default(), 1);
    sidecar.handle_bytes(
        0,
        br#"{"id":"a","method":"m","params":{"emoji":"\ud83d\ude00","path":"C:\\ud800","n":18446744073709551615,"f":1e-400,"big":123456789012345678901234567890}}
"#,
    );
    let (sent, events) = drain(&mut sidecar, 0);
    assert!(sent.is_empty(), "{sent:?}");
    let [
        PeerEvent::Request {
            params: Some(params),
            ..
        },
    ] = &events[..]
    else {
        panic!("{events:?}")
    };
    let params: Value = serde_json::from_str(params.get()).unwrap();
    assert_eq!(params["emoji"], "\u{1F600}");
    assert_eq!(params["path"], "C:\\ud800");
}
