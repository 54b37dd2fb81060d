//! REXD on arbitrary bytes: first as a JSON-RPC message (`jsonrpc::message::parse`), then as a
//! typed REXD request, event or result; and the whole-line parsers of `rexd` directly.
//!
//! - Nothing panics.
//! - Whatever parses writes back to JSON that parses to the same typed value (requests through
//!   their params, events through a notification line, results through their JSON).
//! - The one-pass notification parser agrees with parsing the same line's method and params.
#![no_main]

use deskwire::jsonrpc::Message;
use deskwire::jsonrpc::message::{Parsed, parse};
use deskwire::rexd::{ErrorResponse, Event, Method, Request, RequestMessage, Response};
use libfuzzer_sys::fuzz_target;

fn check_request(method: &str, params: Option<&serde_json::value::RawValue>) {
    if let Ok(req) = Request::parse(method, params) {
        assert_eq!(req.method().as_str(), method);
        let again = serde_json::value::to_raw_value(&req.params_value()).unwrap();
        assert_eq!(Request::parse(method, Some(&again)).unwrap(), req);
    }
}

fn check_event(method: &str, params: Option<&serde_json::value::RawValue>) {
    if let Ok(event) = Event::parse(method, params) {
        let line = event.to_notification();
        assert_eq!(Event::from_notification(line.as_bytes()).unwrap(), event);
    }
}

fn check_message(message: &Message) {
    match message {
        Message::Request { method, params, .. } => {
            check_request(method, params.as_ref().map(|p| p.as_raw()));
        }
        Message::Notification { method, params } => {
            check_event(method, params.as_ref().map(|p| p.as_raw()));
        }
        Message::Response { result, .. } => {
            // A result does not name its method: try it as the answer to each.
            for m in Method::ALL.into_iter().filter(|m| !m.is_event()) {
                if let Ok(resp) = Response::parse(m, result.as_raw()) {
                    let again = serde_json::value::to_raw_value(&resp).unwrap();
                    assert_eq!(Response::parse(m, &again).unwrap(), resp);
                }
            }
        }
        Message::Error { .. } => {}
    }
}

fuzz_target!(|data: &[u8]| {
    match parse(data, 16) {
        Ok(Parsed::Single(m)) => check_message(&m),
        Ok(Parsed::Batch(items)) => items.iter().flatten().for_each(check_message),
        Err(_) => {}
    }

    if let Ok(event) = Event::from_notification(data) {
        let line = event.to_notification();
        assert_eq!(Event::from_notification(line.as_bytes()).unwrap(), event);
        // The raw route gives the same event (when `Value` takes the line: it refuses some
        // things a skipped member may hold, such as numbers beyond f64).
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
            let params = serde_json::value::to_raw_value(&v["params"]).unwrap();
            let method = v["method"].as_str().unwrap();
            assert_eq!(Event::parse(method, Some(&params)).unwrap(), event);
        }
    }
    if let Ok(m) = RequestMessage::from_slice(data) {
        assert_eq!(
            RequestMessage::from_slice(m.to_line().as_bytes()).unwrap(),
            m
        );
    }
    if let Ok(e) = ErrorResponse::from_slice(data) {
        assert_eq!(
            ErrorResponse::from_slice(e.to_line().as_bytes()).unwrap(),
            e
        );
    }
});
