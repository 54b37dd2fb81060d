//! The message envelopes: request `{v, id, type, ts, op, auth, payload}`, response `{v, id,
//! type, ts, ok, result, error}` and event `{type: "event", op: "jobs.event", payload}`.
//!
//! Parsing checks, in order: JSON object, `v` (a version of a major this side speaks, else
//! [`ParseError::VersionUnsupported`], code `E_VERSION_UNSUPPORTED`), `type`, the fields, then
//! the typed payload. `Deserialize` runs the same checks, so `serde_json::from_str` accepts
//! exactly what [`RequestEnvelope::parse`] does (and what the JSON Schema accepts).

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::error::{ErrorBody, ParseError};
use super::ops::{JobEvent, Request, check_id, non_null};
use super::secret::{RedactedMap, Token, redact_value};
use super::{PROTOCOL_VERSION, SUPPORTED_MAJOR};

/// A protocol version, `MAJOR[.MINOR[.PATCH]]` (the spec writes `"1.0"`).
///
/// The spec says only "Versionamento no campo v. Commander deve recusar v incompatível"
/// (versioning in the `v` field; the Commander must refuse an incompatible `v`). deskwire reads
/// it as semantic versioning: the same major is compatible whatever the minor (a newer minor only
/// adds optional fields, which both sides ignore), another major is refused, by both sides.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Version {
    text: String,
    major: u32,
}

impl Version {
    /// The version this crate writes (`"1.0"`).
    pub fn current() -> Version {
        Version {
            text: PROTOCOL_VERSION.to_owned(),
            major: SUPPORTED_MAJOR,
        }
    }

    /// Reads a version string: 1 to 3 dot-separated decimal numbers without leading zeros.
    /// `None` when it is not one (whatever its major).
    pub fn parse(text: &str) -> Option<Version> {
        let parts: Vec<&str> = text.split('.').collect();
        if parts.len() > 3 {
            return None;
        }
        for part in &parts {
            let digits = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            if !digits || (part.len() > 1 && part.starts_with('0')) || part.len() > 9 {
                return None;
            }
        }
        let major = parts[0].parse().ok()?;
        Some(Version {
            text: text.to_owned(),
            major,
        })
    }

    /// The major version.
    pub fn major(&self) -> u32 {
        self.major
    }

    /// Whether this side speaks it (same major as [`SUPPORTED_MAJOR`]).
    pub fn is_compatible(&self) -> bool {
        self.major == SUPPORTED_MAJOR
    }

    /// The text as received.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Version::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("invalid version {text:?}")))
    }
}

/// A `ts`: an RFC 3339 date-time in `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` form.
///
/// The engine has no clock: the host gives the time when it formats a message, either as text
/// it already has or through [`Timestamp::from_unix_ms`].
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Timestamp(String);

impl Timestamp {
    /// Reads a timestamp; `None` when it is not of the form above (or a field is out of range).
    pub fn parse(text: &str) -> Option<Timestamp> {
        let b = text.as_bytes();
        let num = |range: std::ops::Range<usize>| -> Option<u32> {
            let part = b.get(range)?;
            part.iter()
                .all(u8::is_ascii_digit)
                .then(|| part.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')))
        };
        let (_year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        let separators = b.get(4) == Some(&b'-')
            && b.get(7) == Some(&b'-')
            && b.get(10) == Some(&b'T')
            && b.get(13) == Some(&b':')
            && b.get(16) == Some(&b':');
        let ranges = (1..=12).contains(&month)
            && (1..=31).contains(&day)
            && hour <= 23
            && minute <= 59
            && second <= 60;
        if !separators || !ranges {
            return None;
        }
        let mut rest = &b[19..];
        if rest.first() == Some(&b'.') {
            let digits = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            rest = &rest[1 + digits..];
        }
        let zone = match rest {
            b"Z" => true,
            [sign, h1, h2, b':', m1, m2]
                if (*sign == b'+' || *sign == b'-')
                    && [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()) =>
            {
                (h1 - b'0') * 10 + (h2 - b'0') <= 23 && (m1 - b'0') * 10 + (m2 - b'0') <= 59
            }
            _ => false,
        };
        zone.then(|| Timestamp(text.to_owned()))
    }

    /// Formats milliseconds since the Unix epoch (UTC) as `2026-02-18T12:00:00Z`, with `.mmm`
    /// when the milliseconds are not zero.
    pub fn from_unix_ms(ms: u64) -> Timestamp {
        let secs = ms / 1000;
        let (days, rem) = (secs / 86_400, secs % 86_400);
        // Howard Hinnant's civil_from_days, for days since 1970-01-01 (non-negative here).
        let z = days as i64 + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        let mut text = format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        );
        if !ms.is_multiple_of(1000) {
            text.push_str(&format!(".{:03}", ms % 1000));
        }
        text.push('Z');
        Timestamp(text)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Timestamp::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("invalid timestamp {text:?}")))
    }
}

/// The `auth` object: `{ "token": "..." }`. Its `Debug` shows no secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Auth {
    /// The bearer token.
    pub token: Token,
}

/// A request envelope with a typed operation and payload.
///
/// `auth` is optional: the spec allows the bearer token "no header ou query param" (in the
/// header or a query parameter) of the transport too; the host reports such a token with
/// `Gateway::authenticate_connection`. A request with neither is refused `E_UNAUTHORIZED`.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestEnvelope {
    /// Protocol version.
    pub v: Version,
    /// Request id (`req_01J...`), echoed in the response.
    pub id: String,
    /// When the Commander sent it.
    pub ts: Timestamp,
    /// The credential, when sent in the envelope.
    pub auth: Option<Auth>,
    /// The operation and its payload.
    pub request: Request,
}

#[derive(Serialize, Deserialize)]
struct RawRequest {
    v: Version,
    id: String,
    #[serde(rename = "type")]
    kind: String,
    ts: Timestamp,
    op: String,
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    auth: Option<Auth>,
    payload: Value,
}

/// Checks `v` and `type` before anything else, so an old peer gets the version error rather than
/// a complaint about a field that moved.
pub(crate) fn check_head(
    value: &Value,
    expected: &'static str,
    v_required: bool,
) -> Result<(), ParseError> {
    let Value::Object(map) = value else {
        return Err(ParseError::Malformed("not a JSON object".to_owned()));
    };
    match map.get("v") {
        Some(Value::String(text)) => match Version::parse(text) {
            Some(v) if v.is_compatible() => {}
            Some(_) => return Err(ParseError::VersionUnsupported { got: text.clone() }),
            None => return Err(ParseError::Malformed(format!("invalid version {text:?}"))),
        },
        None if !v_required => {}
        None => return Err(ParseError::Malformed("missing field `v`".to_owned())),
        Some(_) => return Err(ParseError::Malformed("`v` is not a string".to_owned())),
    }
    match map.get("type") {
        Some(Value::String(kind)) if kind == expected => Ok(()),
        Some(Value::String(kind)) => Err(ParseError::WrongType {
            got: kind.clone(),
            expected,
        }),
        Some(_) => Err(ParseError::Malformed("`type` is not a string".to_owned())),
        None => Err(ParseError::Malformed("missing field `type`".to_owned())),
    }
}

fn malformed(e: serde_json::Error) -> ParseError {
    ParseError::Malformed(e.to_string())
}

fn check_envelope_id(id: &str) -> Result<(), ParseError> {
    check_id(id).map_err(|why| ParseError::Malformed(format!("id is {why}")))
}

impl RequestEnvelope {
    /// A request with the current version.
    pub fn new(
        id: impl Into<String>,
        ts: Timestamp,
        token: Option<Token>,
        request: Request,
    ) -> Self {
        RequestEnvelope {
            v: Version::current(),
            id: id.into(),
            ts,
            auth: token.map(|token| Auth { token }),
            request,
        }
    }

    /// Parses a message.
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        Self::from_value(serde_json::from_slice(bytes).map_err(malformed)?)
    }

    /// Parses a JSON value.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        let generic = GenericRequestEnvelope::from_value(value)?;
        let request = Request::from_parts(&generic.op, Value::Object(generic.payload))?;
        Ok(RequestEnvelope {
            v: generic.v,
            id: generic.id,
            ts: generic.ts,
            auth: generic.auth,
            request,
        })
    }

    fn raw(&self) -> RawRequest {
        RawRequest {
            v: self.v.clone(),
            id: self.id.clone(),
            kind: "request".to_owned(),
            ts: self.ts.clone(),
            op: self.request.op().as_str().to_owned(),
            auth: self.auth.clone(),
            payload: self.request.payload(),
        }
    }

    /// The message as JSON (with the token: this is for the wire, not for logs).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self.raw()).unwrap_or(Value::Null)
    }

    /// The message as compact JSON text, for the wire.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }

    /// The message with every secret replaced by `[REDACTED]` (see [`redact_value`]).
    pub fn redacted(&self) -> Value {
        let mut value = self.to_value();
        redact_value(&mut value);
        value
    }

    /// A structured JSON log line (the spec: "logs estruturados JSON", "jobId sempre em logs"):
    /// `{"msg":"request","id","op","jobId","envelope":<redacted>}`.
    pub fn log_line(&self) -> String {
        let mut line = Map::new();
        line.insert("msg".into(), "request".into());
        line.insert("id".into(), self.id.clone().into());
        line.insert("op".into(), self.request.op().as_str().into());
        if let Some(job) = self.request.job_id() {
            line.insert("jobId".into(), job.into());
        }
        line.insert("envelope".into(), self.redacted());
        Value::Object(line).to_string()
    }
}

impl Serialize for RequestEnvelope {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw().serialize(s)
    }
}

impl<'de> Deserialize<'de> for RequestEnvelope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RequestEnvelope::from_value(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A request envelope whose payload is not typed: any `op`, any object `payload`.
///
/// For code that routes or logs requests without knowing every operation, and for the spec's
/// generic envelope example (`"op": "jobs.create"` with a placeholder `"payload": {}`, which
/// is not a valid `jobs.create`). `Debug` shows the redacted form.
#[derive(Clone, PartialEq)]
pub struct GenericRequestEnvelope {
    /// Protocol version.
    pub v: Version,
    /// Request id.
    pub id: String,
    /// When the Commander sent it.
    pub ts: Timestamp,
    /// The operation name, unchecked.
    pub op: String,
    /// The credential, when sent in the envelope.
    pub auth: Option<Auth>,
    /// The payload object.
    pub payload: Map<String, Value>,
}

impl GenericRequestEnvelope {
    /// Parses a message.
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        Self::from_value(serde_json::from_slice(bytes).map_err(malformed)?)
    }

    /// Parses a JSON value: everything a [`RequestEnvelope`] checks but the op and payload.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        check_head(&value, "request", true)?;
        let raw: RawRequest = serde_json::from_value(value).map_err(malformed)?;
        check_envelope_id(&raw.id)?;
        if raw.op.is_empty() {
            return Err(ParseError::Malformed("op is empty".to_owned()));
        }
        if raw
            .auth
            .as_ref()
            .is_some_and(|a| a.token.expose().is_empty())
        {
            return Err(ParseError::Malformed("auth.token is empty".to_owned()));
        }
        let Value::Object(payload) = raw.payload else {
            return Err(ParseError::Malformed("payload is not an object".to_owned()));
        };
        Ok(GenericRequestEnvelope {
            v: raw.v,
            id: raw.id,
            ts: raw.ts,
            op: raw.op,
            auth: raw.auth,
            payload,
        })
    }

    /// The message as JSON (with the token: for the wire, not for logs).
    pub fn to_value(&self) -> Value {
        let raw = RawRequest {
            v: self.v.clone(),
            id: self.id.clone(),
            kind: "request".to_owned(),
            ts: self.ts.clone(),
            op: self.op.clone(),
            auth: self.auth.clone(),
            payload: Value::Object(self.payload.clone()),
        };
        serde_json::to_value(raw).unwrap_or(Value::Null)
    }

    /// The message with secrets scrubbed, for logs.
    pub fn redacted(&self) -> Value {
        let mut value = self.to_value();
        redact_value(&mut value);
        value
    }
}

impl fmt::Debug for GenericRequestEnvelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GenericRequestEnvelope")
            .field("v", &self.v)
            .field("id", &self.id)
            .field("ts", &self.ts)
            .field("op", &self.op)
            .field("auth", &self.auth)
            .field("payload", &RedactedMap(&self.payload))
            .finish()
    }
}

impl Serialize for GenericRequestEnvelope {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for GenericRequestEnvelope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        GenericRequestEnvelope::from_value(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A response envelope. `outcome` is `Ok(result)` for `"ok": true` and `Err(error)` for
/// `"ok": false`; both `result` and `error` are always written, one of them `null`, as in the
/// spec's example. On read, an absent `result`/`error` counts as `null`. `Debug` scrubs
/// secrets from the result.
#[derive(Clone, PartialEq)]
pub struct ResponseEnvelope {
    /// Protocol version.
    pub v: Version,
    /// The request's id.
    pub id: String,
    /// When the gateway answered.
    pub ts: Timestamp,
    /// The result object or the error.
    pub outcome: Result<Map<String, Value>, ErrorBody>,
}

#[derive(Serialize, Deserialize)]
struct RawResponse {
    v: Version,
    id: String,
    #[serde(rename = "type")]
    kind: String,
    ts: Timestamp,
    ok: bool,
    #[serde(default)]
    result: Option<Map<String, Value>>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

impl ResponseEnvelope {
    /// Parses a message. This is the Commander side's check of the gateway's `v`.
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        Self::from_value(serde_json::from_slice(bytes).map_err(malformed)?)
    }

    /// Parses a JSON value.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        check_head(&value, "response", true)?;
        let raw: RawResponse = serde_json::from_value(value).map_err(malformed)?;
        check_envelope_id(&raw.id)?;
        let outcome = match (raw.ok, raw.result, raw.error) {
            (true, Some(result), None) => Ok(result),
            (false, None, Some(error)) => Err(error),
            (true, None, _) => return Err(ParseError::Malformed("ok without result".into())),
            (true, Some(_), Some(_)) => {
                return Err(ParseError::Malformed("ok with an error".into()));
            }
            (false, _, None) => return Err(ParseError::Malformed("not ok without error".into())),
            (false, Some(_), Some(_)) => {
                return Err(ParseError::Malformed("not ok with a result".into()));
            }
        };
        Ok(ResponseEnvelope {
            v: raw.v,
            id: raw.id,
            ts: raw.ts,
            outcome,
        })
    }

    /// The result decoded as `T` (e.g. [`JobStatusBrief`](super::ops::JobStatusBrief)), or the
    /// error. A result that does not fit `T` is an [`ParseError::Malformed`] error body.
    pub fn result_as<T: DeserializeOwned>(&self) -> Result<T, ErrorBody> {
        match &self.outcome {
            Ok(map) => serde_json::from_value(Value::Object(map.clone())).map_err(|e| {
                ErrorBody::from(&ParseError::Malformed(format!("unexpected result: {e}")))
            }),
            Err(error) => Err(error.clone()),
        }
    }

    fn raw(&self) -> RawResponse {
        RawResponse {
            v: self.v.clone(),
            id: self.id.clone(),
            kind: "response".into(),
            ts: self.ts.clone(),
            ok: self.outcome.is_ok(),
            result: self.outcome.as_ref().ok().cloned(),
            error: self.outcome.as_ref().err().cloned(),
        }
    }

    /// The message as JSON.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self.raw()).unwrap_or(Value::Null)
    }

    /// The message as compact JSON text.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }

    /// The message with secrets scrubbed, for logs.
    pub fn redacted(&self) -> Value {
        let mut value = self.to_value();
        redact_value(&mut value);
        value
    }
}

impl fmt::Debug for ResponseEnvelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseEnvelope")
            .field("v", &self.v)
            .field("id", &self.id)
            .field("ts", &self.ts)
            .field("outcome", &self.outcome.as_ref().map(RedactedMap))
            .finish()
    }
}

impl Serialize for ResponseEnvelope {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ResponseEnvelope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ResponseEnvelope::from_value(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// The `op` of every event.
pub const EVENT_OP: &str = "jobs.event";

/// An event envelope, `{"type": "event", "op": "jobs.event", "payload": {...}}`.
///
/// The spec's example event has no `v`, `id` or `ts`, so they are optional on read; deskwire's
/// engine writes `v` and `ts` always and `id` = the id of the `jobs.stream` request that
/// subscribed, so the Commander can tell which subscription an event belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct EventEnvelope {
    /// Protocol version.
    pub v: Option<Version>,
    /// The subscribing `jobs.stream` request's id.
    pub id: Option<String>,
    /// When the event happened.
    pub ts: Option<Timestamp>,
    /// The event.
    pub event: JobEvent,
}

#[derive(Serialize, Deserialize)]
struct RawEvent {
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    v: Option<Version>,
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    id: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    ts: Option<Timestamp>,
    op: String,
    payload: JobEvent,
}

impl EventEnvelope {
    /// Parses a message.
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        Self::from_value(serde_json::from_slice(bytes).map_err(malformed)?)
    }

    /// Parses a JSON value.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        check_head(&value, "event", false)?;
        let raw: RawEvent = serde_json::from_value(value).map_err(malformed)?;
        if let Some(id) = &raw.id {
            check_envelope_id(id)?;
        }
        if raw.op != EVENT_OP {
            return Err(ParseError::UnknownOp(raw.op));
        }
        check_id(&raw.payload.job_id)
            .map_err(|why| ParseError::Malformed(format!("jobId is {why}")))?;
        Ok(EventEnvelope {
            v: raw.v,
            id: raw.id,
            ts: raw.ts,
            event: raw.payload,
        })
    }

    fn raw(&self) -> RawEvent {
        RawEvent {
            v: self.v.clone(),
            id: self.id.clone(),
            kind: "event".into(),
            ts: self.ts.clone(),
            op: EVENT_OP.into(),
            payload: self.event.clone(),
        }
    }

    /// The message as JSON.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self.raw()).unwrap_or(Value::Null)
    }

    /// The message as compact JSON text.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }

    /// The message with secrets scrubbed, for logs.
    pub fn redacted(&self) -> Value {
        let mut value = self.to_value();
        redact_value(&mut value);
        value
    }
}

impl Serialize for EventEnvelope {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw().serialize(s)
    }
}

impl<'de> Deserialize<'de> for EventEnvelope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        EventEnvelope::from_value(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// Any envelope, told apart by `type`.
#[derive(Debug, Clone, PartialEq)]
pub enum Envelope {
    /// `"type": "request"`.
    Request(RequestEnvelope),
    /// `"type": "response"`.
    Response(ResponseEnvelope),
    /// `"type": "event"`.
    Event(EventEnvelope),
}

impl Envelope {
    /// Parses a message of any type.
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        Self::from_value(serde_json::from_slice(bytes).map_err(malformed)?)
    }

    /// Parses a JSON value of any type.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        match value.get("type").and_then(Value::as_str) {
            Some("request") => RequestEnvelope::from_value(value).map(Envelope::Request),
            Some("response") => ResponseEnvelope::from_value(value).map(Envelope::Response),
            Some("event") => EventEnvelope::from_value(value).map(Envelope::Event),
            Some(other) => Err(ParseError::WrongType {
                got: other.to_owned(),
                expected: "request|response|event",
            }),
            None => Err(ParseError::Malformed("missing or non-string `type`".into())),
        }
    }

    /// The message as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            Envelope::Request(e) => e.to_value(),
            Envelope::Response(e) => e.to_value(),
            Envelope::Event(e) => e.to_value(),
        }
    }

    /// The message with secrets scrubbed, for logs.
    pub fn redacted(&self) -> Value {
        match self {
            Envelope::Request(e) => e.redacted(),
            Envelope::Response(e) => e.redacted(),
            Envelope::Event(e) => e.redacted(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        for ok in ["1", "1.0", "1.7", "1.0.3", "10.2"] {
            assert!(Version::parse(ok).is_some(), "{ok}");
        }
        for bad in ["", "1.", ".1", "01.0", "1.0.0.0", "v1", "1.x", "-1", "1 .0"] {
            assert!(Version::parse(bad).is_none(), "{bad}");
        }
        assert!(Version::parse("1.9").unwrap().is_compatible());
        assert!(!Version::parse("2.0").unwrap().is_compatible());
        assert!(!Version::parse("0.9").unwrap().is_compatible());
    }

    #[test]
    fn timestamps() {
        for ok in [
            "2026-02-18T12:00:00Z",
            "2026-02-18T12:00:00.123Z",
            "2026-02-18T12:00:00+01:00",
            "2026-12-31T23:59:60-11:30",
        ] {
            assert!(Timestamp::parse(ok).is_some(), "{ok}");
        }
        for bad in [
            "",
            "2026-02-18",
            "2026-02-18 12:00:00Z",
            "2026-13-18T12:00:00Z",
            "2026-02-18T24:00:00Z",
            "2026-02-18T12:00:00",
            "2026-02-18T12:00:00.Z",
            "2026-02-18T12:00:00+1:00",
            "2026-02-18T12:00:00z",
            "２026-02-18T12:00:00Z",
        ] {
            assert!(Timestamp::parse(bad).is_none(), "{bad}");
        }
        assert_eq!(Timestamp::from_unix_ms(0).as_str(), "1970-01-01T00:00:00Z");
        assert_eq!(
            Timestamp::from_unix_ms(1_771_416_000_000).as_str(),
            "2026-02-18T12:00:00Z"
        );
        assert_eq!(
            Timestamp::from_unix_ms(951_782_400_123).as_str(),
            "2000-02-29T00:00:00.123Z"
        );
    }

    #[test]
    fn old_and_new_majors_are_refused_with_the_version_code() {
        for v in ["0.9", "2.0", "2"] {
            let text = format!(
                r#"{{"v":"{v}","id":"r1","type":"request","ts":"2026-02-18T12:00:00Z","op":"gateway.ping","payload":{{}}}}"#
            );
            let err = RequestEnvelope::parse(text.as_bytes()).unwrap_err();
            assert_eq!(err, ParseError::VersionUnsupported { got: v.into() });
            assert_eq!(err.code().as_str(), "E_VERSION_UNSUPPORTED");
            assert!(serde_json::from_str::<RequestEnvelope>(&text).is_err());
            let resp = text.replace(r#""type":"request""#, r#""type":"response""#);
            assert!(matches!(
                ResponseEnvelope::parse(resp.as_bytes()),
                Err(ParseError::VersionUnsupported { .. })
            ));
        }
    }
}
