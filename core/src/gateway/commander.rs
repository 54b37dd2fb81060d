//! The Commander's side of the gateway protocol: the gateway envelope as a
//! [`Dialect`], so the orchestrator drives calls through the same
//! correlation engine as the other JSON protocols ([`Peer`](crate::jsonrpc::Peer): pending table,
//! per-op timeouts, cancellation).
//!
//! Calls go out as request envelopes stamped with the Commander's version, its bearer token in
//! `auth`, and `ts` from the host's wall clock (`epoch_unix_ms` is the wall time at which the
//! host's monotonic `now_ms` was 0). Responses come back as results or errors (the gateway's
//! error `code` string, `message`, and `details` as data); `jobs.event` envelopes become
//! notifications. A response with an incompatible major `v` is refused like any unreadable
//! message.
//!
//! ```
//! use deskwire::gateway::commander::GatewayCommander;
//! use deskwire::gateway::Token;
//! use deskwire::jsonrpc::{Output, Peer, PeerConfig, RawJson};
//!
//! let dialect = GatewayCommander::new(Token::new("s3cret"), 1_771_416_000_000);
//! let mut commander = Peer::new(dialect, PeerConfig::default(), 1);
//! let payload = RawJson::from_string(r#"{"jobId":"j1"}"#.to_owned()).unwrap();
//! let id = commander.call(0, "jobs.status", Some(payload), 0).unwrap();
//! let Output::Transmit(bytes) = commander.poll_output(0) else { panic!() };
//! let text = String::from_utf8(bytes).unwrap();
//! assert!(text.contains(r#""op":"jobs.status""#) && text.contains(r#""ts":"2026-02-18T12:00:00"#));
//! ```

use serde_json::{Map, Value};

use super::envelope::{Auth, Envelope, GenericRequestEnvelope, Timestamp, Version};
use super::error::ParseError;
use super::secret::Token;
use crate::ids::IdGenerator;
use crate::jsonrpc::dialect::{Code, Dialect, Inbound, Outbound, RemoteError, WriteError};
use crate::jsonrpc::message::{Id, Invalid, RawJson};

/// The gateway envelope dialect, Commander side. See the module docs.
#[derive(Clone)]
pub struct GatewayCommander {
    token: Token,
    epoch_unix_ms: u64,
}

impl std::fmt::Debug for GatewayCommander {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayCommander")
            .field("token", &"[REDACTED]")
            .field("epoch_unix_ms", &self.epoch_unix_ms)
            .finish()
    }
}

impl GatewayCommander {
    /// A dialect that authenticates with `token`; `epoch_unix_ms` is the wall-clock time (Unix
    /// ms) at the host's monotonic instant 0, so requests carry a real `ts`.
    pub fn new(token: Token, epoch_unix_ms: u64) -> Self {
        GatewayCommander {
            token,
            epoch_unix_ms,
        }
    }

    /// Replaces the token (rotation).
    pub fn set_token(&mut self, token: Token) {
        self.token = token;
    }
}

fn invalid(error: ParseError, id: Option<Id>) -> Invalid {
    Invalid::Request {
        id,
        reason: error.to_string(),
    }
}

fn raw(value: Value) -> RawJson {
    RawJson::to_raw(&value).expect("a JSON value serialises")
}

impl Dialect for GatewayCommander {
    const NAME: &'static str = "gateway";

    fn read(
        &self,
        frame: &[u8],
        _batch_limit: usize,
    ) -> Result<Vec<Result<Inbound, Invalid>>, Invalid> {
        let value: Value =
            serde_json::from_slice(frame).map_err(|e| Invalid::Parse(e.to_string()))?;
        let id = value
            .get("id")
            .and_then(Value::as_str)
            .map(|s| Id::String(s.to_owned()));
        let kind = value.get("type").and_then(Value::as_str).map(str::to_owned);
        let inbound = if kind.as_deref() == Some("request") {
            // Requests from the gateway are routed untyped: the Commander handles no ops yet.
            let request = GenericRequestEnvelope::from_value(value).map_err(|e| invalid(e, id))?;
            Inbound::Request {
                id: Id::String(request.id),
                method: request.op,
                params: Some(raw(Value::Object(request.payload))),
            }
        } else {
            let envelope =
                Envelope::from_value(value).map_err(|e| match (kind.as_deref(), id) {
                    // An answer to one of our calls that cannot be read (another major version, a
                    // field missing) ends that call at once, rather than leaving it to time out.
                    (Some("response"), Some(id)) => Invalid::Answer {
                        id,
                        reason: e.to_string(),
                    },
                    (_, id) => invalid(e, id),
                })?;
            match envelope {
                Envelope::Response(response) => match response.outcome {
                    Ok(result) => Inbound::Result {
                        id: Id::String(response.id),
                        result: raw(Value::Object(result)),
                    },
                    Err(body) => Inbound::Error {
                        id: Id::String(response.id),
                        error: RemoteError {
                            code: Code::Name(body.code.as_str().to_owned()),
                            message: body.message,
                            data: body.details.map(|d| raw(Value::Object(d))),
                        },
                    },
                },
                Envelope::Event(event) => Inbound::Notification {
                    method: super::envelope::EVENT_OP.to_owned(),
                    params: Some(raw(
                        serde_json::to_value(&event.event).expect("an event serialises")
                    )),
                },
                Envelope::Request(request) => Inbound::Request {
                    id: Id::String(request.id.clone()),
                    method: request.request.op().as_str().to_owned(),
                    params: request.to_value().get("payload").cloned().map(raw),
                },
            }
        };
        Ok(vec![Ok(inbound)])
    }

    fn write(&self, now: u64, message: Outbound<'_>, out: &mut Vec<u8>) -> Result<(), WriteError> {
        let Outbound::Request { id, method, params } = message else {
            return Err(WriteError::Unsupported {
                dialect: Self::NAME,
                what: "anything but requests from the Commander",
            });
        };
        let Id::String(id) = id else {
            return Err(WriteError::InvalidValue {
                dialect: Self::NAME,
                what: format!("the id {id} (ids are strings)"),
            });
        };
        let payload: Map<String, Value> = match params {
            None => Map::new(),
            Some(p) => match serde_json::from_str(p.get()) {
                Ok(Value::Object(map)) => map,
                _ => {
                    return Err(WriteError::InvalidValue {
                        dialect: Self::NAME,
                        what: "a payload that is not a JSON object".to_owned(),
                    });
                }
            },
        };
        let envelope = GenericRequestEnvelope {
            v: Version::current(),
            id: id.clone(),
            ts: Timestamp::from_unix_ms(self.epoch_unix_ms.saturating_add(now)),
            op: method.to_owned(),
            auth: Some(Auth {
                token: self.token.clone(),
            }),
            payload,
        };
        serde_json::to_writer(out, &envelope.to_value()).expect("serialising to a Vec cannot fail");
        Ok(())
    }

    fn next_id(&self, ids: &mut IdGenerator, _counter: &mut i64) -> Id {
        Id::String(format!("req_{}", ids.next_uuid_v4().replace('-', "")))
    }

    fn answer_invalid(&self, _invalid: &Invalid) -> Option<(Id, RemoteError)> {
        // The Commander answers nothing: an unreadable gateway message is only reported.
        None
    }

    fn method_not_found(&self, method: &str) -> RemoteError {
        RemoteError::new(
            Code::Name("E_UNKNOWN_OP".into()),
            format!("unknown op {method}"),
        )
    }

    fn duplicate_id(&self) -> RemoteError {
        RemoteError::new(Code::Name("E_BAD_REQUEST".into()), "id already in use")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::{Config, ConnId, Gateway, Output as GatewayOutput};
    use crate::jsonrpc::{CallError, Output, Peer, PeerConfig, PeerEvent, TimeoutPolicy};

    const EPOCH: u64 = 1_771_416_000_000;

    /// Runs a Commander peer against the real gateway engine until both are quiet.
    fn exchange(
        commander: &mut Peer<GatewayCommander>,
        gateway: &mut Gateway,
        now: u64,
    ) -> Vec<PeerEvent> {
        let mut events = Vec::new();
        loop {
            let mut moved = false;
            loop {
                match commander.poll_output(now) {
                    Output::Transmit(bytes) => {
                        moved = true;
                        let body = bytes.strip_suffix(b"\n").unwrap();
                        let _ = gateway.handle_message(now, ConnId(1), body);
                    }
                    Output::Event(e) => {
                        moved = true;
                        events.push(e);
                    }
                    Output::Timeout(_) => break,
                }
            }
            loop {
                match gateway.poll_output(now) {
                    GatewayOutput::Transmit(t) => {
                        moved = true;
                        let mut text = t.message.to_json(&Timestamp::from_unix_ms(EPOCH + now));
                        text.push('\n');
                        commander.handle_bytes(now, text.as_bytes());
                    }
                    GatewayOutput::Event(_) => moved = true,
                    GatewayOutput::Timeout(_) => break,
                }
            }
            if !moved {
                return events;
            }
        }
    }

    fn params(json: &str) -> Option<RawJson> {
        Some(RawJson::from_string(json.to_owned()).unwrap())
    }

    #[test]
    fn commander_drives_the_gateway_engine() {
        let mut gateway = Gateway::new(Config::new(Token::new("s3cret")), 0, [7; 32]).unwrap();
        let mut commander = Peer::new(
            GatewayCommander::new(Token::new("s3cret"), EPOCH),
            PeerConfig {
                timeouts: TimeoutPolicy::uniform(10_000),
                ..PeerConfig::default()
            },
            3,
        );
        let create = r#"{"job":{"jobId":"j1","repo":"org/repo"}}"#;
        let id = commander
            .call(0, "jobs.create", params(create), 11)
            .unwrap();
        let events = exchange(&mut commander, &mut gateway, 0);
        let [
            PeerEvent::Response {
                id: got,
                user: 11,
                result,
                ..
            },
        ] = events.as_slice()
        else {
            panic!("{events:?}")
        };
        assert_eq!(got, &id);
        assert!(
            result.get().contains(r#""status":"CREATED""#),
            "{}",
            result.get()
        );

        // Same jobId, different payload: the gateway's conflict error comes back typed.
        let other = r#"{"job":{"jobId":"j1","repo":"org/other"}}"#;
        commander.call(1, "jobs.create", params(other), 12).unwrap();
        let events = exchange(&mut commander, &mut gateway, 1);
        let [
            PeerEvent::Failed {
                error: CallError::Remote(error),
                user: 12,
                ..
            },
        ] = events.as_slice()
        else {
            panic!("{events:?}")
        };
        assert_eq!(error.code, Code::Name("E_CONFLICT".into()));
    }

    #[test]
    fn a_wrong_token_is_refused_and_never_logged() {
        let mut gateway = Gateway::new(Config::new(Token::new("s3cret")), 0, [7; 32]).unwrap();
        let dialect = GatewayCommander::new(Token::new("wrong-token"), EPOCH);
        assert!(!format!("{dialect:?}").contains("wrong-token"));
        let mut commander = Peer::new(dialect, PeerConfig::default(), 3);
        commander.call(0, "gateway.ping", None, 0).unwrap();
        let events = exchange(&mut commander, &mut gateway, 0);
        let [
            PeerEvent::Failed {
                error: CallError::Remote(error),
                ..
            },
        ] = events.as_slice()
        else {
            panic!("{events:?}")
        };
        assert_eq!(error.code, Code::Name("E_UNAUTHORIZED".into()));
    }

    #[test]
    fn an_answer_that_cannot_be_read_ends_its_call_at_once() {
        // Another major version, and a compatible answer without its `ts`.
        for (v, why) in [("2.0", "version"), ("1.0", "ts")] {
            let mut commander = Peer::new(
                GatewayCommander::new(Token::new("t"), EPOCH),
                PeerConfig::default(),
                3,
            );
            let id = commander.call(0, "gateway.ping", None, 0).unwrap();
            let Output::Transmit(_) = commander.poll_output(0) else {
                panic!()
            };
            let Id::String(id) = id else { panic!() };
            let ts = match why {
                "ts" => String::new(),
                _ => r#""ts":"2026-02-18T12:00:02Z","#.to_owned(),
            };
            let reply = format!(
                r#"{{"v":"{v}","id":"{id}","type":"response",{ts}"ok":true,"result":{{}},"error":null}}"#
            );
            commander.handle_bytes(1, format!("{reply}\n").as_bytes());
            let Output::Event(PeerEvent::Failed {
                error: CallError::Malformed(reason),
                ..
            }) = commander.poll_output(1)
            else {
                panic!("{v} {why}")
            };
            assert!(reason.contains(why), "{reason}");
            assert_eq!(commander.stats().pending, 0, "not left to time out");
        }
    }
}
