//! The JSON-RPC 2.0 message model: requests, notifications, responses and errors, with ids that
//! are numbers, strings or `null`, and batches.
//!
//! Params, results and error data stay raw JSON text ([`RawValue`]): the engine routes messages
//! without building a tree for them, and hosts in other languages parse them with their own JSON
//! library. `"jsonrpc": "2.0"` is checked on read and added on write.
//!
//! ```
//! use deskwire::jsonrpc::message::{Id, Message, Parsed, parse};
//!
//! let parsed = parse(br#"{"jsonrpc":"2.0","id":7,"method":"fs.stat","params":{"path":"a"}}"#, 16).unwrap();
//! let Parsed::Single(Message::Request { id, method, params }) = parsed else { panic!() };
//! assert_eq!((id, method.as_str()), (Id::Number(7), "fs.stat"));
//! assert_eq!(params.unwrap().get(), r#"{"path":"a"}"#);
//! ```

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

/// Raw JSON text (params, results, error data), compared by its text.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// Checks that `json` is one JSON value and keeps it as it is.
    pub fn from_string(json: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(json).map(RawJson)
    }

    /// The JSON of any serialisable value.
    pub fn to_raw<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(RawJson)
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The JSON as a borrowed raw value.
    pub fn as_raw(&self) -> &RawValue {
        &self.0
    }
}

impl From<&RawValue> for RawJson {
    fn from(raw: &RawValue) -> Self {
        RawJson(raw.to_owned())
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for RawJson {}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

/// The longest id accepted, in bytes of its JSON text (quotes and escapes included). A peer
/// holds the id of every request it answers later, so without a bound 1024 requests in progress
/// could hold 1024 lines' worth of ids; a longer id is refused with -32600 and id `null`, before
/// it is copied. 256 bytes fits any UUID, counter or path-like id a client makes.
pub const MAX_ID_BYTES: usize = 256;

/// A request id: a number, a string, or `null` (only in an error answering an unreadable
/// request). Fractional numbers are refused: the spec discourages them and no peer needs them.
/// At most [`MAX_ID_BYTES`] of JSON.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "JsonRpcId"))]
pub enum Id {
    /// An integer id.
    Number(#[cfg_attr(feature = "uniffi", uniffi(name = "value"))] i64),
    /// A string id.
    #[cfg_attr(feature = "uniffi", uniffi(name = "Text"))]
    String(#[cfg_attr(feature = "uniffi", uniffi(name = "value"))] String),
    /// `null`.
    Null,
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::String(s) => write!(f, "{s:?}"),
            Id::Null => f.write_str("null"),
        }
    }
}

impl Id {
    /// The length of the id's JSON text, when it is over [`MAX_ID_BYTES`].
    pub fn too_long(&self) -> Option<usize> {
        let Id::String(s) = self else {
            return None; // an i64 or null is at most 20 bytes
        };
        // An escape is at most 6 bytes a byte: a short string needs no count.
        if s.len().saturating_mul(6) + 2 <= MAX_ID_BYTES {
            return None;
        }
        let len = serde_json::to_string(s).map_or(usize::MAX, |j| j.len());
        (len > MAX_ID_BYTES).then_some(len)
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Number(n)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::String(s.to_owned())
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Number(n) => serializer.serialize_i64(*n),
            Id::String(s) => serializer.serialize_str(s),
            Id::Null => serializer.serialize_unit(),
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer, a string or null")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id, E> {
                Ok(Id::Number(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
                i64::try_from(v)
                    .map(Id::Number)
                    .map_err(|_| E::custom("id out of range"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
                Ok(Id::String(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Id, E> {
                Ok(Id::String(v))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Id, E> {
                Ok(Id::Null)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A protocol's set of error codes: JSON-RPC's standard ones ([`ErrorCode`]), or a protocol's
/// that extend them (REXD's `-3200x`, [`crate::rexd::ErrorCode`]). One [`ErrorObject`] carries
/// a code of any set; [`ErrorObject::code_as`] reads it back as the set the reader knows.
pub trait ErrorCodes: Copy {
    /// The number on the wire.
    fn code(self) -> i64;
    /// The default `message` for an error with this code.
    fn message(self) -> &'static str;
    /// The code with this number, `None` when the set does not define it.
    fn from_code(code: i64) -> Option<Self>;
}

/// The standard error codes (JSON-RPC 2.0 §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCode {
    /// -32700: invalid JSON.
    ParseError,
    /// -32600: not a valid request object.
    InvalidRequest,
    /// -32601: no such method.
    MethodNotFound,
    /// -32602: invalid method parameters.
    InvalidParams,
    /// -32603: internal error.
    InternalError,
}

impl ErrorCode {
    /// The numeric code.
    pub const fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
        }
    }

    /// The standard code for a number, if it is one.
    pub const fn from_code(code: i64) -> Option<Self> {
        Some(match code {
            -32700 => ErrorCode::ParseError,
            -32600 => ErrorCode::InvalidRequest,
            -32601 => ErrorCode::MethodNotFound,
            -32602 => ErrorCode::InvalidParams,
            -32603 => ErrorCode::InternalError,
            _ => return None,
        })
    }

    /// The spec's message for the code.
    pub const fn message(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "Parse error",
            ErrorCode::InvalidRequest => "Invalid Request",
            ErrorCode::MethodNotFound => "Method not found",
            ErrorCode::InvalidParams => "Invalid params",
            ErrorCode::InternalError => "Internal error",
        }
    }
}

impl ErrorCodes for ErrorCode {
    fn code(self) -> i64 {
        ErrorCode::code(self)
    }
    fn message(self) -> &'static str {
        ErrorCode::message(self)
    }
    fn from_code(code: i64) -> Option<Self> {
        ErrorCode::from_code(code)
    }
}

/// The `error` member of an error response: the one error model of every JSON-RPC 2.0
/// protocol here (REXD's errors are these too, with its codes).
///
/// `code` stays a plain number so that codes a reader does not know survive a round trip;
/// [`ErrorObject::code_as`] gives the typed view in the code set the reader knows.
///
/// ```
/// use deskwire::jsonrpc::{ErrorCode, ErrorObject};
/// use deskwire::rexd;
///
/// let e = ErrorObject::of(rexd::ErrorCode::ForbiddenPath).with_message("outside the roots");
/// assert_eq!(e.code, -32002);
/// assert_eq!(e.code_as::<rexd::ErrorCode>(), Some(rexd::ErrorCode::ForbiddenPath));
/// assert_eq!(e.code_as::<ErrorCode>(), None); // not a standard code
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code (see [`ErrorCode`] for the standard ones).
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Extra information, as raw JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<RawJson>,
}

impl ErrorObject {
    /// A standard error with the spec's message.
    pub fn standard(code: ErrorCode) -> Self {
        Self::of(code)
    }

    /// An error with `code` (of any [`ErrorCodes`] set) and its default message, no data.
    pub fn of<C: ErrorCodes>(code: C) -> Self {
        ErrorObject {
            code: code.code(),
            message: code.message().to_owned(),
            data: None,
        }
    }

    /// An error with any code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error with this `message`.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// The same error with this structured `data`.
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        // A `Value` always serializes (its map keys are strings).
        self.data = RawJson::to_raw(&data).ok();
        self
    }

    /// The code as a member of the set `C`, `None` when `C` does not define the number.
    pub fn code_as<C: ErrorCodes>(&self) -> Option<C> {
        C::from_code(self.code)
    }

    /// `data` as a JSON tree.
    pub fn data_value(&self) -> Option<serde_json::Value> {
        self.data
            .as_ref()
            .and_then(|d| serde_json::from_str(d.get()).ok())
    }
}

impl From<ErrorCode> for ErrorObject {
    fn from(code: ErrorCode) -> Self {
        ErrorObject::of(code)
    }
}

/// One JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A call that wants an answer.
    Request {
        /// Its id.
        id: Id,
        /// The method.
        method: String,
        /// The params (an object or array), raw.
        params: Option<RawJson>,
    },
    /// A call without an answer.
    Notification {
        /// The method.
        method: String,
        /// The params, raw.
        params: Option<RawJson>,
    },
    /// A successful answer.
    Response {
        /// The request's id.
        id: Id,
        /// The result, raw (may be `null`).
        result: RawJson,
    },
    /// A failed answer.
    Error {
        /// The request's id (`null` when it could not be read).
        id: Id,
        /// What went wrong.
        error: ErrorObject,
    },
}

/// A parsed frame: one message or a batch. In a batch each element is checked on its own, so
/// one bad element does not spoil the rest (it gets its own error object in the answer array).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// One message.
    Single(Message),
    /// A batch, element by element.
    Batch(Vec<Result<Message, Invalid>>),
}

/// Why a frame is not a message: what the answer should say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    /// Not UTF-8 or not JSON (-32700, answered with id `null`).
    #[error("parse error: {0}")]
    Parse(String),
    /// JSON, but not a valid message (-32600). `id` is the request's id when it could be read.
    #[error("invalid request: {reason}")]
    Request {
        /// The id, if the object had a readable one.
        id: Option<Id>,
        /// What is wrong.
        reason: String,
    },
    /// An empty batch `[]` (-32600).
    #[error("invalid request: empty batch")]
    EmptyBatch,
    /// More elements than the batch limit (-32600).
    #[error("invalid request: batch of {len} exceeds the limit of {max}")]
    BatchTooLarge {
        /// Elements in the batch.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// An answer (a result or an error) to the call `id` that cannot be read: an error object
    /// of the wrong shape, or a result with a string or number no JSON reader can take (a lone
    /// surrogate escape such as `"\ud800"`, a number past `f64`). Nobody answers an answer:
    /// the [`Peer`](super::Peer) ends the call with
    /// [`CallError::Malformed`](super::CallError::Malformed) instead. [`Invalid::to_error`]
    /// gives -32600 with the id, for reports.
    #[error("unreadable answer to {id}: {reason}")]
    Answer {
        /// The call the answer is for.
        id: Id,
        /// What is wrong.
        reason: String,
    },
    /// An id over [`MAX_ID_BYTES`] (-32600, answered with id `null`: it is not echoed).
    #[error("invalid request: an id of {len} bytes (the limit is {max})")]
    IdTooLong {
        /// Bytes of the id's JSON text.
        len: usize,
        /// The limit, [`MAX_ID_BYTES`].
        max: usize,
    },
}

impl Invalid {
    /// The error response this calls for: its id and error object.
    pub fn to_error(&self) -> (Id, ErrorObject) {
        let (id, code) = match self {
            Invalid::Parse(_) => (Id::Null, ErrorCode::ParseError),
            Invalid::Request { id, .. } => {
                (id.clone().unwrap_or(Id::Null), ErrorCode::InvalidRequest)
            }
            Invalid::Answer { id, .. } => (id.clone(), ErrorCode::InvalidRequest),
            Invalid::EmptyBatch | Invalid::BatchTooLarge { .. } | Invalid::IdTooLong { .. } => {
                (Id::Null, ErrorCode::InvalidRequest)
            }
        };
        let mut error = ErrorObject::standard(code);
        error.data = RawJson::to_raw(&self.to_string()).ok();
        (id, error)
    }
}

/// The members of any message object; which ones are present decides what it is.
#[derive(Deserialize)]
struct Members<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// `Some` whenever the member is present, `null` included (plain `Option` would read `null` as
/// absent, and `"result": null` is a valid result).
pub(crate) fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Checks that a JSON value a peer sent can be read by any JSON reader, not only kept as text.
///
/// A [`RawValue`] only checks the structure: it accepts a lone surrogate escape (`"\ud800"`)
/// and a number past `f64` (`1e400`), which no string or number type can hold, so the host (or
/// a binding turning the value into its own types) would fail later, after the message was
/// routed. Every value a dialect hands on (params, results, progress, error data) goes through
/// this first. It walks the value once and keeps nothing; strings without escapes are not
/// copied.
pub fn check_readable(raw: &RawValue) -> Result<(), String> {
    serde_json::from_str::<Readable>(raw.get())
        .map(drop)
        .map_err(|e| e.to_string())
}

/// A JSON value read in full and dropped (see [`check_readable`]).
struct Readable;

impl<'de> Deserialize<'de> for Readable {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> de::Visitor<'de> for Visitor {
            type Value = Readable;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Readable, E> {
                Ok(Readable)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Readable, E> {
                Ok(Readable)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Readable, E> {
                Ok(Readable)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Readable, E> {
                Ok(Readable)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Readable, E> {
                Ok(Readable)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Readable, E> {
                Ok(Readable)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Readable, A::Error> {
                while seq.next_element::<Readable>()?.is_some() {}
                Ok(Readable)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Readable, A::Error> {
                while map.next_entry::<Readable, Readable>()?.is_some() {}
                Ok(Readable)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Parses one frame: a message or a batch of at most `batch_limit` elements.
pub fn parse(bytes: &[u8], batch_limit: usize) -> Result<Parsed, Invalid> {
    let text = std::str::from_utf8(bytes).map_err(|e| Invalid::Parse(e.to_string()))?;
    let raw: &RawValue = serde_json::from_str(text).map_err(|e| Invalid::Parse(e.to_string()))?;
    let json = raw.get();
    if json.starts_with('[') {
        let elements: Vec<&RawValue> =
            serde_json::from_str(json).map_err(|e| Invalid::Parse(e.to_string()))?;
        if elements.is_empty() {
            return Err(Invalid::EmptyBatch);
        }
        if elements.len() > batch_limit {
            return Err(Invalid::BatchTooLarge {
                len: elements.len(),
                max: batch_limit,
            });
        }
        return Ok(Parsed::Batch(elements.into_iter().map(parse_one).collect()));
    }
    parse_one(raw).map(Parsed::Single)
}

fn invalid(id: Option<Id>, reason: impl Into<String>) -> Invalid {
    Invalid::Request {
        id,
        reason: reason.into(),
    }
}

/// Reads an id, refusing one over [`MAX_ID_BYTES`] before it is copied.
fn read_id(raw: &RawValue) -> Result<Id, Invalid> {
    let len = raw.get().len();
    if len > MAX_ID_BYTES {
        return Err(Invalid::IdTooLong {
            len,
            max: MAX_ID_BYTES,
        });
    }
    serde_json::from_str::<Id>(raw.get())
        .map_err(|_| invalid(None, "id must be an integer, a string or null"))
}

/// Parses one message object.
pub fn parse_one(raw: &RawValue) -> Result<Message, Invalid> {
    if !raw.get().starts_with('{') {
        return Err(invalid(None, "a message must be a JSON object"));
    }
    let m: Members<'_> =
        serde_json::from_str(raw.get()).map_err(|e| invalid(None, e.to_string()))?;
    let id = match m.id {
        None => None,
        Some(raw_id) => Some(read_id(raw_id)?),
    };
    if m.jsonrpc.as_deref() != Some("2.0") {
        return Err(invalid(id, "\"jsonrpc\" must be \"2.0\""));
    }
    match (m.method, m.result, m.error) {
        (Some(method), None, None) => {
            let method: String = serde_json::from_str(method.get())
                .map_err(|_| invalid(id.clone(), "method must be a string"))?;
            let params = match m.params {
                None => None,
                Some(p) if p.get().starts_with(['{', '[']) => {
                    check_readable(p)
                        .map_err(|e| invalid(id.clone(), format!("unreadable params: {e}")))?;
                    Some(p.into())
                }
                Some(_) => return Err(invalid(id, "params must be an object or an array")),
            };
            Ok(match id {
                Some(id) => Message::Request { id, method, params },
                None => Message::Notification { method, params },
            })
        }
        (None, Some(result), None) => match id {
            Some(id) => match check_readable(result) {
                Ok(()) => Ok(Message::Response {
                    id,
                    result: result.into(),
                }),
                Err(e) => Err(Invalid::Answer {
                    id,
                    reason: format!("unreadable result: {e}"),
                }),
            },
            None => Err(invalid(None, "a response needs an id")),
        },
        (None, None, Some(error)) => {
            let Some(id) = id else {
                return Err(invalid(None, "an error response needs an id"));
            };
            let error = serde_json::from_str::<ErrorObject>(error.get())
                .map_err(|e| format!("bad error object: {e}"))
                .and_then(|error| match &error.data {
                    Some(data) => check_readable(data.as_raw())
                        .map(|()| error)
                        .map_err(|e| format!("unreadable error data: {e}")),
                    None => Ok(error),
                });
            match error {
                Ok(error) => Ok(Message::Error { id, error }),
                Err(reason) => Err(Invalid::Answer { id, reason }),
            }
        }
        (None, None, None) => Err(invalid(id, "no method, result or error")),
        _ => Err(invalid(
            id,
            "a message has exactly one of method, result and error",
        )),
    }
}

#[derive(Serialize)]
struct Out<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Id>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorObject>,
}

impl Message {
    fn out(&self) -> Out<'_> {
        let mut out = Out {
            jsonrpc: "2.0",
            id: None,
            method: None,
            params: None,
            result: None,
            error: None,
        };
        match self {
            Message::Request { id, method, params } => {
                out.id = Some(id);
                out.method = Some(method);
                out.params = params.as_ref().map(RawJson::as_raw);
            }
            Message::Notification { method, params } => {
                out.method = Some(method);
                out.params = params.as_ref().map(RawJson::as_raw);
            }
            Message::Response { id, result } => {
                out.id = Some(id);
                out.result = Some(result.as_raw());
            }
            Message::Error { id, error } => {
                out.id = Some(id);
                out.error = Some(error);
            }
        }
        out
    }

    /// Appends the compact JSON of the message (no newline) to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        serde_json::to_writer(out, &self.out()).expect("serialising to a Vec cannot fail");
    }

    /// The compact JSON of the message.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        self.write(&mut out);
        String::from_utf8(out).expect("serde_json writes UTF-8")
    }
}

/// Appends a batch (a JSON array of the messages) to `out`.
pub fn write_batch(messages: &[Message], out: &mut Vec<u8>) {
    write_array(messages, out, |m, out| m.write(out));
}

/// Appends a batch of messages already written (each one compact JSON object) to `out`.
pub fn write_batch_bodies(bodies: &[Vec<u8>], out: &mut Vec<u8>) {
    out.reserve(bodies.iter().map(|b| b.len() + 1).sum::<usize>() + 1);
    write_array(bodies, out, |b, out| out.extend_from_slice(b));
}

fn write_array<T>(items: &[T], out: &mut Vec<u8>, write: impl Fn(&T, &mut Vec<u8>)) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(item, out);
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn raw(json: &str) -> RawJson {
        RawJson::from_string(json.to_owned()).unwrap()
    }

    fn single(json: &str) -> Result<Message, Invalid> {
        match parse(json.as_bytes(), 8)? {
            Parsed::Single(m) => Ok(m),
            Parsed::Batch(_) => panic!("batch"),
        }
    }

    #[test]
    fn spec_examples() {
        assert_eq!(
            single(r#"{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}"#),
            Ok(Message::Request {
                id: Id::Number(1),
                method: "subtract".into(),
                params: Some(raw("[42, 23]"))
            })
        );
        assert_eq!(
            single(r#"{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}"#),
            Ok(Message::Notification {
                method: "update".into(),
                params: Some(raw("[1,2,3,4,5]"))
            })
        );
        assert_eq!(
            single(r#"{"jsonrpc": "2.0", "result": 19, "id": "a"}"#),
            Ok(Message::Response {
                id: Id::String("a".into()),
                result: raw("19")
            })
        );
        assert_eq!(
            single(r#"{"jsonrpc":"2.0","result":null,"id":3}"#),
            Ok(Message::Response {
                id: Id::Number(3),
                result: raw("null")
            })
        );
        assert_eq!(
            single(
                r#"{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}"#
            ),
            Ok(Message::Error {
                id: Id::Null,
                error: ErrorObject::standard(ErrorCode::ParseError)
            })
        );
        // id: null on a request is legal (if discouraged) and distinct from no id.
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","method":"m","id":null}"#),
            Ok(Message::Request { id: Id::Null, .. })
        ));
    }

    #[test]
    fn invalid_messages_say_why_and_keep_the_id() {
        assert!(matches!(single("{"), Err(Invalid::Parse(_))));
        assert!(matches!(parse(b"\xff", 8), Err(Invalid::Parse(_))));
        assert_eq!(
            single(r#"{"jsonrpc":"1.0","method":"m","id":5}"#)
                .unwrap_err()
                .to_error()
                .0,
            Id::Number(5)
        );
        for bad in [
            r#"{"method":"m","id":1}"#,
            r#"{"jsonrpc":"2.0","method":1,"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":3,"id":1}"#,
            r#"{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"x"},"id":1}"#,
            r#"{"jsonrpc":"2.0","result":1}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#,
            r#"{"jsonrpc":"2.0","error":{"code":"x","message":"y"},"id":1}"#,
            r#"1"#,
        ] {
            let err = single(bad).unwrap_err();
            assert_eq!(err.to_error().1.code, -32600, "{bad}: {err}");
        }
    }

    /// An id's JSON text is at most 256 bytes (quotes and escapes included); past that it is
    /// refused with -32600 and id null, before the id is copied anywhere.
    #[test]
    fn ids_longer_than_the_limit_are_refused_with_a_null_id() {
        const LIMIT: usize = 256;
        assert_eq!(MAX_ID_BYTES, LIMIT, "the documented limit");
        let string_id = |json_len: usize| format!("\"{}\"", "x".repeat(json_len - 2));
        let at = string_id(LIMIT);
        let over = string_id(LIMIT + 1);
        for (template, kind) in [
            (r#"{"jsonrpc":"2.0","id":ID,"method":"m"}"#, "request"),
            (r#"{"jsonrpc":"2.0","id":ID,"result":1}"#, "response"),
            (
                r#"{"jsonrpc":"2.0","id":ID,"error":{"code":1,"message":"x"}}"#,
                "error",
            ),
        ] {
            let ok = single(&template.replace("ID", &at));
            assert!(ok.is_ok(), "{kind} with a {LIMIT}-byte id: {ok:?}");
            let err = single(&template.replace("ID", &over)).unwrap_err();
            assert_eq!(err.to_error().0, Id::Null, "{kind}: {err}");
            assert_eq!(err.to_error().1.code, -32600, "{kind}: {err}");
            assert!(err.to_string().contains("257 bytes"), "{kind}: {err}");
        }
        // Escapes count as written: 43 `\u0041` are 260 bytes of JSON for 43 characters.
        let escaped = format!("\"{}\"", "\\u0041".repeat(43));
        let err = single(&format!(
            r#"{{"jsonrpc":"2.0","id":{escaped},"method":"m"}}"#
        ));
        assert_eq!(err.unwrap_err().to_error().0, Id::Null);
        // A number is never that long; a batch element with a long id is refused on its own.
        let parsed = parse(
            format!(
                r#"[{{"jsonrpc":"2.0","id":{over},"method":"m"}},{{"jsonrpc":"2.0","id":-9223372036854775808,"method":"m"}}]"#
            )
            .as_bytes(),
            8,
        )
        .unwrap();
        let Parsed::Batch(items) = parsed else {
            panic!("a batch")
        };
        assert!(items[0].is_err() && items[1].is_ok(), "{items:?}");
    }

    #[test]
    fn batches() {
        let parsed = parse(
            br#"[{"jsonrpc":"2.0","method":"a","id":1},{"foo":"boo"},{"jsonrpc":"2.0","method":"n"}]"#,
            8,
        )
        .unwrap();
        let Parsed::Batch(items) = parsed else {
            panic!()
        };
        assert_eq!(items.len(), 3);
        assert!(items[0].is_ok() && items[1].is_err() && items[2].is_ok());
        assert_eq!(parse(b"[]", 8), Err(Invalid::EmptyBatch));
        assert_eq!(
            parse(b"[1,2,3]", 2),
            Err(Invalid::BatchTooLarge { len: 3, max: 2 })
        );
        let mut out = Vec::new();
        write_batch(
            &[Message::Notification {
                method: "x".into(),
                params: None,
            }],
            &mut out,
        );
        assert_eq!(out, br#"[{"jsonrpc":"2.0","method":"x"}]"#);
    }

    fn id_strategy() -> impl Strategy<Value = Id> {
        prop_oneof![
            any::<i64>().prop_map(Id::Number),
            ".{0,12}".prop_map(Id::String),
            Just(Id::Null),
        ]
    }

    fn json_strategy() -> impl Strategy<Value = RawJson> {
        prop_oneof![
            Just(raw("{}")),
            Just(raw("[1,2]")),
            ".{0,20}".prop_map(|s| RawJson::to_raw(&serde_json::json!({ "s": s })).unwrap()),
        ]
    }

    fn message_strategy() -> impl Strategy<Value = Message> {
        prop_oneof![
            (
                id_strategy(),
                "[a-z.]{1,12}",
                proptest::option::of(json_strategy())
            )
                .prop_map(|(id, method, params)| Message::Request {
                    id,
                    method,
                    params
                }),
            ("[a-z./]{1,12}", proptest::option::of(json_strategy()))
                .prop_map(|(method, params)| Message::Notification { method, params }),
            (id_strategy(), json_strategy())
                .prop_map(|(id, result)| Message::Response { id, result }),
            (id_strategy(), any::<i64>(), ".{0,20}").prop_map(|(id, code, message)| {
                Message::Error {
                    id,
                    error: ErrorObject::new(code, message),
                }
            }),
        ]
    }

    proptest! {
        #[test]
        fn any_message_round_trips(message in message_strategy()) {
            let json = message.to_json();
            prop_assert_eq!(single(&json), Ok(message));
        }
    }
}
