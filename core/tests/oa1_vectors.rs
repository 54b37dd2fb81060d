//! The OA1 conformance vectors (tests/vectors/oa1.json), the ones every binding runs: escaping,
//! frame parsing and formatting, chunking, `ERR` payloads, and scripted exchanges that drive a
//! `Client` or a `Server` through `handle_line`, host calls and `poll_output` on a virtual clock.

use std::collections::HashMap;

use deskwire::oa1::chunk::{split, wire_payload};
use deskwire::oa1::escape::{escape, unescape};
use deskwire::oa1::{Client, Config, Failure, Frame, FrameType, LocalError, Output, Server, Stats};
use serde_json::{Value, json};

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/oa1.json");
    let text = std::fs::read_to_string(path).expect("tests/vectors/oa1.json");
    serde_json::from_str(&text).expect("valid JSON")
}

fn cases<'a>(doc: &'a Value, section: &str) -> &'a [Value] {
    let cases = doc[section].as_array().expect("a list of cases");
    assert!(!cases.is_empty(), "{section} has no cases");
    cases
}

fn str_of<'a>(case: &'a Value, key: &str) -> &'a str {
    case[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {case}"))
}

#[test]
fn escape_vectors() {
    for case in cases(&vectors(), "escape") {
        let name = str_of(case, "name");
        assert_eq!(
            escape(str_of(case, "text")),
            str_of(case, "escaped"),
            "{name}"
        );
    }
}

#[test]
fn unescape_vectors() {
    for case in cases(&vectors(), "unescape") {
        let name = str_of(case, "name");
        let text = unescape(str_of(case, "escaped").as_bytes());
        assert_eq!(text, str_of(case, "text").as_bytes(), "{name}");
    }
}

fn frame_json(frame: &Frame<'_>) -> Value {
    json!({
        "type": frame.kind.as_str(),
        "id": frame.id,
        "seq": frame.seq,
        "more": frame.more,
        "payload": frame.payload,
    })
}

#[test]
fn frame_vectors() {
    for case in cases(&vectors(), "frames") {
        let name = str_of(case, "name");
        let parsed = Frame::parse(str_of(case, "text")).map(|f| frame_json(&f));
        assert_eq!(parsed.unwrap_or(Value::Null), case["frame"], "{name}");
    }
}

fn frame_type(name: &str) -> FrameType {
    match name {
        "REQ" => FrameType::Req,
        "RES" => FrameType::Res,
        "ERR" => FrameType::Err,
        "CANCEL" => FrameType::Cancel,
        other => panic!("frame type {other}"),
    }
}

#[test]
fn format_vectors() {
    for case in cases(&vectors(), "format") {
        let name = str_of(case, "name");
        let f = &case["frame"];
        let frame = Frame {
            kind: frame_type(str_of(f, "type")),
            id: str_of(f, "id"),
            seq: f["seq"]
                .as_u64()
                .and_then(|s| u32::try_from(s).ok())
                .expect("seq"),
            more: f["more"].as_bool().expect("more"),
            payload: str_of(f, "payload"),
        };
        assert_eq!(frame.to_string(), str_of(case, "text"), "{name}");
        // And it reads back as the same frame.
        let text = frame.to_string();
        let back = Frame::parse(&text).map(|f| frame_json(&f));
        assert_eq!(back.as_ref(), Some(f), "{name}");
    }
}

#[test]
fn chunk_vectors() {
    for case in cases(&vectors(), "chunks") {
        let name = str_of(case, "name");
        let budget = case["budget"].as_u64().expect("budget") as usize;
        let escaped = escape(str_of(case, "text"));
        let payloads: Vec<String> = split(&escaped, |_| budget)
            .into_iter()
            .map(|chunk| wire_payload(chunk).into_owned())
            .collect();
        let expected: Vec<&str> = case["payloads"]
            .as_array()
            .expect("payloads")
            .iter()
            .map(|p| p.as_str().expect("a payload"))
            .collect();
        assert_eq!(payloads, expected, "{name}");
        // Each fits its budget, and together they decode to the text.
        let mut joined = Vec::new();
        for p in &payloads {
            assert!(p.len() <= budget.max(4), "{name}: {p:?} over {budget}");
            joined.extend(unescape(p.as_bytes()));
        }
        assert_eq!(joined, str_of(case, "text").as_bytes(), "{name}");
    }
}

#[test]
fn err_payload_vectors() {
    for case in cases(&vectors(), "err_payloads") {
        let name = str_of(case, "name");
        let failure = Failure::from_err_payload(str_of(case, "payload"));
        assert_eq!(failure.code(), str_of(case, "code"), "{name}");
        assert_eq!(failure.message(), str_of(case, "message"), "{name}");
    }
}

/// The config through its serde shape (spec defaults for missing keys; an unknown key fails,
/// so a vector never passes by being half read): the same conversion the bindings use.
fn config(json: &Value) -> Config {
    serde_json::from_value(json.clone()).expect("a valid config")
}

enum Endpoint {
    Client(Client),
    Server(Server),
}

impl Endpoint {
    fn handle_line(&mut self, now: u64, line: &[u8]) {
        match self {
            Endpoint::Client(c) => c.handle_line(now, line),
            Endpoint::Server(s) => s.handle_line(now, line),
        }
    }

    fn poll_output(&mut self, now: u64) -> Output {
        match self {
            Endpoint::Client(c) => c.poll_output(now),
            Endpoint::Server(s) => s.poll_output(now),
        }
    }

    fn stats(&self) -> Stats {
        match self {
            Endpoint::Client(c) => c.stats(),
            Endpoint::Server(s) => s.stats(),
        }
    }

    fn client(&mut self) -> &mut Client {
        match self {
            Endpoint::Client(c) => c,
            Endpoint::Server(_) => panic!("a client step on a server"),
        }
    }

    fn server(&mut self) -> &mut Server {
        match self {
            Endpoint::Server(s) => s,
            Endpoint::Client(_) => panic!("a server step on a client"),
        }
    }
}

/// The vectors' name for a local error.
fn error_name(error: &LocalError) -> &'static str {
    error.code()
}

/// An output as the vectors write it, through its serde shape. A `failed` event carries its
/// message only where the expectation has one (the texts for timeout and incomplete are not
/// part of the protocol).
fn output_json(output: &Output, expected: Option<&Value>) -> Value {
    let mut json = serde_json::to_value(output).expect("outputs serialize");
    let wants_message = expected
        .and_then(|e| e.pointer("/event/failed/message"))
        .is_some();
    if !wants_message && let Some(failed) = json.pointer_mut("/event/failed") {
        failed.as_object_mut().expect("an object").remove("message");
    }
    json
}

fn stats_json(stats: &Stats) -> Value {
    serde_json::to_value(stats).expect("stats serialize")
}

/// Replaces `{name}` with the ids bound so far, in every string of `value`.
fn bind(value: &Value, ids: &HashMap<String, String>) -> Value {
    match value {
        Value::String(s) => {
            let mut s = s.clone();
            for (name, id) in ids {
                s = s.replace(&format!("{{{name}}}"), id);
            }
            Value::String(s)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| bind(v, ids)).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), bind(v, ids))).collect())
        }
        other => other.clone(),
    }
}

/// Runs one host call; `Err` holds the local error's vector name.
fn call(
    endpoint: &mut Endpoint,
    now: u64,
    step: &Value,
    ids: &mut HashMap<String, String>,
) -> Result<(), &'static str> {
    let err = |e: LocalError| error_name(&e);
    if let Some(request) = step.get("request") {
        let timeout = request.get("timeout_ms").and_then(Value::as_u64);
        let id = endpoint
            .client()
            .request(now, str_of(request, "payload"), timeout)
            .map_err(err)?;
        if let Some(name) = step.get("bind").and_then(Value::as_str) {
            ids.insert(name.to_owned(), id);
        }
    } else if let Some(cancel) = step.get("cancel") {
        let (id, reason) = (str_of(cancel, "id"), str_of(cancel, "reason"));
        endpoint.client().cancel(now, id, reason).map_err(err)?;
    } else if let Some(send) = step.get("send") {
        let (id, text) = (str_of(send, "id"), str_of(send, "text"));
        endpoint.server().send(now, id, text).map_err(err)?;
    } else if let Some(finish) = step.get("finish") {
        endpoint
            .server()
            .finish(now, str_of(finish, "id"))
            .map_err(err)?;
    } else if let Some(respond) = step.get("respond") {
        let (id, text) = (str_of(respond, "id"), str_of(respond, "text"));
        endpoint.server().respond(now, id, text).map_err(err)?;
    } else if let Some(fail) = step.get("fail") {
        let (id, code, message) = (
            str_of(fail, "id"),
            str_of(fail, "code"),
            str_of(fail, "message"),
        );
        endpoint
            .server()
            .fail(now, id, code, message)
            .map_err(err)?;
    } else {
        panic!("unknown step {step}");
    }
    Ok(())
}

fn run_exchange(exchange: &Value) {
    let name = str_of(exchange, "name");
    let config = config(&exchange["config"]);
    let mut endpoint = match str_of(exchange, "endpoint") {
        "client" => Endpoint::Client(Client::new(
            config,
            exchange["seed"].as_u64().expect("seed"),
        )),
        "server" => Endpoint::Server(Server::new(config)),
        other => panic!("endpoint {other}"),
    };
    let mut ids = HashMap::new();
    for (index, raw) in exchange["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .enumerate()
    {
        let step = bind(raw, &ids);
        let now = step["at"].as_u64().expect("at");
        let at = format!("{name}, step {index} ({raw})");
        if step.get("line").is_some() {
            endpoint.handle_line(now, str_of(&step, "line").as_bytes());
        } else if let Some(expected) = step.get("poll") {
            let expected = expected.as_array().expect("outputs");
            let mut got = Vec::new();
            loop {
                let output = endpoint.poll_output(now);
                let done = matches!(output, Output::Timeout(_));
                got.push(output_json(&output, expected.get(got.len())));
                assert!(got.len() <= expected.len() + 50, "{at}: poll does not end");
                if done {
                    break;
                }
            }
            assert_eq!(&got, expected, "{at}");
        } else if let Some(counters) = step.get("stats") {
            let stats = stats_json(&endpoint.stats());
            for (counter, value) in counters.as_object().expect("counters") {
                assert!(
                    stats.get(counter).is_some(),
                    "{at}: unknown counter {counter}"
                );
                assert_eq!(&stats[counter], value, "{at}: {counter}");
            }
        } else {
            let result = call(&mut endpoint, now, &step, &mut ids);
            let expected = step.get("expect_error").and_then(Value::as_str);
            assert_eq!(result.err(), expected, "{at}");
        }
    }
}

#[test]
fn exchange_vectors() {
    let doc = vectors();
    for exchange in cases(&doc, "exchanges") {
        run_exchange(exchange);
    }
}
