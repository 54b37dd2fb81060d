//! Typed requests, results and events, and their JSON-RPC envelopes.
//!
//! A host that already split a JSON-RPC message into `method` and `params` (the `jsonrpc`
//! module's peer does) calls [`Request::parse`] / [`Event::parse`] / [`Response::parse`]. For
//! whole lines there are [`RequestMessage::from_slice`], [`Event::from_notification`] (one pass,
//! borrowing: the hot path of a client reading `exec.stdout`) and [`ErrorResponse::from_slice`].

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::{ErrorObject, RexdError};
use super::exec::*;
use super::fs::*;
use super::method::Method;
use super::pty::*;
use super::session::*;
use crate::jsonrpc::Id;

/// Deserializes `T` from a JSON object only.
///
/// Derived struct deserializers also take a JSON array (fields by position); REXD params and
/// results are named, so an array is refused here like any other non-object, on every path.
fn object<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    struct ObjectOnly<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOnly<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_map(ObjectOnly(PhantomData))
}

/// Parses `raw` (params or a result) as `T`, or says why not in terms of `method`.
fn object_of<'a, T: Deserialize<'a>>(
    method: Method,
    raw: Option<&'a RawValue>,
) -> Result<T, RexdError> {
    let text = match raw.map(|r| r.get().trim_start()) {
        None | Some("null") => return Err(invalid(method, "missing params")),
        Some(text) => text,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let value = object(&mut de).map_err(|_| invalid(method, field_error::<T>(text)))?;
    de.end()
        .map_err(|e| invalid(method, without_position(&e)))?;
    Ok(value)
}

/// Why `text` does not parse as `T`, naming the field (`path: invalid type: integer `5`,
/// expected a string`). Parsed a second time, and only on failure, so the tracking costs the
/// well-formed requests nothing.
fn field_error<'a, T: Deserialize<'a>>(text: &'a str) -> String {
    let mut de = serde_json::Deserializer::from_str(text);
    let mut track = serde_path_to_error::Track::new();
    let e = match object::<T, _>(serde_path_to_error::Deserializer::new(&mut de, &mut track)) {
        Ok(_) => return "does not parse".into(),
        Err(e) => e,
    };
    let message = without_position(&e);
    match track.path().to_string().as_str() {
        // `.` is the object itself (a missing field names itself in the message).
        "." | "" => message,
        path => format!("{path}: {message}"),
    }
}

/// serde_json's message without its ` at line 1 column 30` (params are one line; the field
/// path says where).
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(message) => message.to_owned(),
        None => text,
    }
}

/// The line as text, or a parse error: JSON text is UTF-8 (RFC 8259 §8.1).
fn utf8(line: &[u8]) -> Result<&str, RexdError> {
    simdutf8::basic::from_utf8(line).map_err(|_| RexdError::Parse("not UTF-8".into()))
}

fn invalid(method: Method, reason: impl fmt::Display) -> RexdError {
    RexdError::InvalidParams {
        method,
        reason: reason.to_string(),
    }
}

/// A request type: its method and its result type, for typed clients
/// (`fn call<C: Call>(params: C) -> C::Result`).
pub trait Call: Serialize + DeserializeOwned + Into<Request> {
    /// The method these params go with.
    const METHOD: Method;
    /// What a successful call returns.
    type Result: Serialize + DeserializeOwned;
}

macro_rules! requests {
    ($($variant:ident = $name:literal, $params:ty => $result:ty;)*) => {
        /// A typed REXD request: the method and its params.
        ///
        /// Serializes as `{"method": …, "params": …}`, the JSON-RPC fields minus `jsonrpc` and
        /// `id` (see [`RequestMessage`] for whole lines).
        #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
        #[serde(tag = "method", content = "params")]
        #[non_exhaustive]
        pub enum Request {
            $(
                #[doc = concat!("`", $name, "`")]
                #[serde(rename = $name)]
                $variant($params),
            )*
        }

        impl Request {
            /// The method.
            pub fn method(&self) -> Method {
                match self {
                    $(Request::$variant(_) => Method::$variant,)*
                }
            }

            /// Parses the params of a known method; an event method is
            /// [`RexdError::UnknownMethod`] (it is not something a daemon serves).
            pub fn parse_known(method: Method, params: Option<&RawValue>) -> Result<Request, RexdError> {
                match method {
                    $(Method::$variant => object_of(method, params).map(Request::$variant),)*
                    _ => Err(RexdError::UnknownMethod(method.as_str().to_owned())),
                }
            }

            /// Writes the params into a map being serialized.
            fn serialize_params<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
                match self {
                    $(Request::$variant(p) => map.serialize_entry("params", p),)*
                }
            }
        }

        /// A typed REXD result: what a successful call of each method returns.
        ///
        /// A JSON-RPC response does not name its method, so parsing needs the method of the
        /// request it answers ([`Response::parse`]). Serializes as the bare result object.
        #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
        #[serde(untagged)]
        #[non_exhaustive]
        pub enum Response {
            $(
                #[doc = concat!("Result of `", $name, "`")]
                $variant($result),
            )*
        }

        impl Response {
            /// The method this answers.
            pub fn method(&self) -> Method {
                match self {
                    $(Response::$variant(_) => Method::$variant,)*
                }
            }

            /// Parses the `result` of a response to `method`. Errors are
            /// [`RexdError::InvalidParams`] naming the method (the result did not fit it), or
            /// [`RexdError::UnknownMethod`] for an event method, which has no result.
            pub fn parse(method: Method, result: &RawValue) -> Result<Response, RexdError> {
                match method {
                    $(Method::$variant => object_of(method, Some(result)).map(Response::$variant),)*
                    _ => Err(RexdError::UnknownMethod(method.as_str().to_owned())),
                }
            }
        }

        $(
            impl Call for $params {
                const METHOD: Method = Method::$variant;
                type Result = $result;
            }

            impl From<$params> for Request {
                fn from(params: $params) -> Request {
                    Request::$variant(params)
                }
            }
        )*
    };
}

requests! {
    SessionOpen = "session.open", SessionOpenParams => SessionOpenResult;
    SessionClose = "session.close", SessionCloseParams => SessionCloseResult;
    SessionInfo = "session.info", SessionInfoParams => SessionInfoResult;
    ExecStart = "exec.start", ExecStartParams => ExecStartResult;
    ExecWait = "exec.wait", ExecWaitParams => ExecWaitResult;
    ExecKill = "exec.kill", ExecKillParams => ExecKillResult;
    ExecInput = "exec.input", ExecInputParams => ExecInputResult;
    FsRead = "fs.read", FsReadParams => FsReadResult;
    FsWrite = "fs.write", FsWriteParams => FsWriteResult;
    FsList = "fs.list", FsListParams => FsListResult;
    FsGlob = "fs.glob", FsGlobParams => FsGlobResult;
    FsStat = "fs.stat", FsStatParams => FsStatResult;
    PtyOpen = "pty.open", PtyOpenParams => PtyOpenResult;
    PtyInput = "pty.input", PtyInputParams => PtyInputResult;
    PtyResize = "pty.resize", PtyResizeParams => PtyResizeResult;
    PtyClose = "pty.close", PtyCloseParams => PtyCloseResult;
    SessionResume = "session.resume", SessionResumeParams => SessionResumeResult;
    RexdMetrics = "rexd.metrics", RexdMetricsParams => RexdMetricsResult;
}

impl Response {
    /// Appends the whole JSON-RPC success line `{"jsonrpc":"2.0","id":…,"result":…}` (without
    /// the trailing newline) to `out`. A daemon answering with large results (`fs.read` of
    /// megabytes) writes them once, straight into its output buffer, instead of through an
    /// intermediate `RawJson`.
    pub fn write_line(&self, id: &Id, out: &mut Vec<u8>) {
        if let Response::FsRead(r) = self {
            return super::fast::write_fs_read_line(id, r, out);
        }
        self.write_line_serde(id, out);
    }

    /// [`Response::write_line`], its `\n`, and the bytes of a raw `fs.read` answer right after
    /// it (`raw_bytes` of them; nothing for any other answer): one frame on a byte stream, to
    /// be written whole, with nothing between the line and its bytes.
    pub fn write_frame(&self, id: &Id, out: &mut Vec<u8>) {
        self.write_line(id, out);
        out.push(b'\n');
        if let Response::FsRead(r) = self
            && r.raw_bytes.is_some()
        {
            out.extend_from_slice(&r.raw);
        }
    }

    /// [`Response::write_line`] through serde only (the reference for the fast path).
    fn write_line_serde(&self, id: &Id, out: &mut Vec<u8>) {
        struct Line<'r>(&'r Id, &'r Response);
        impl Serialize for Line<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(3))?;
                map.serialize_entry("jsonrpc", "2.0")?;
                map.serialize_entry("id", self.0)?;
                map.serialize_entry("result", self.1)?;
                map.end()
            }
        }
        // Plain structs of strings and numbers serialize into memory without failing.
        let _ = serde_json::to_writer(out, &Line(id, self));
    }
}

impl Request {
    /// Parses a request from its JSON-RPC `method` and `params`.
    ///
    /// An unknown method (or an event name) is [`RexdError::UnknownMethod`] (answer `-32601`);
    /// params that are missing, not an object, or do not fit the method are
    /// [`RexdError::InvalidParams`] (answer `-32602`). Unknown fields are ignored, so a newer
    /// client's additions do not break an older daemon; `null` for an optional field means
    /// absent.
    pub fn parse(method: &str, params: Option<&RawValue>) -> Result<Request, RexdError> {
        match Method::from_name(method) {
            // The one method without params: `{}` or none at all.
            Some(Method::RexdMetrics) if params.is_none() => {
                Ok(Request::RexdMetrics(RexdMetricsParams::default()))
            }
            Some(m) if !m.is_event() => Request::parse_known(m, params),
            _ => Err(RexdError::UnknownMethod(method.to_owned())),
        }
    }

    /// The params as a JSON value, for a JSON-RPC layer that builds the message itself.
    pub fn params_value(&self) -> Value {
        match serde_json::to_value(self) {
            Ok(Value::Object(mut m)) => m.remove("params").unwrap_or(Value::Null),
            // Every params type serializes to an object of strings, numbers and booleans.
            _ => Value::Null,
        }
    }
}

/// A typed REXD event: the notifications a daemon emits.
///
/// Output events borrow their strings from the parsed line where they can
/// ([`Event::into_owned`] to keep them). Serializes as `{"method": …, "params": …}`;
/// [`Event::to_notification`] writes the whole JSON-RPC line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "method", content = "params")]
#[non_exhaustive]
pub enum Event<'a> {
    /// `exec.stdout`
    #[serde(rename = "exec.stdout")]
    ExecStdout(ExecOutput<'a>),
    /// `exec.stderr`
    #[serde(rename = "exec.stderr")]
    ExecStderr(ExecOutput<'a>),
    /// `exec.exit`
    #[serde(rename = "exec.exit")]
    ExecExit(ExecExit),
    /// `exec.error`
    #[serde(rename = "exec.error")]
    ExecError(ExecErrorEvent),
    /// `pty.output`
    #[serde(rename = "pty.output")]
    PtyOutput(PtyOutput<'a>),
    /// `pty.exit`
    #[serde(rename = "pty.exit")]
    PtyExit(PtyExit),
}

/// Deserializes the params of one event method, straight from the line being parsed.
struct EventParams(Method);

impl<'de> DeserializeSeed<'de> for EventParams {
    type Value = Event<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Event<'de>, D::Error> {
        Ok(match self.0 {
            Method::ExecStdout => Event::ExecStdout(object(d)?),
            Method::ExecStderr => Event::ExecStderr(object(d)?),
            Method::ExecExit => Event::ExecExit(object(d)?),
            Method::ExecError => Event::ExecError(object(d)?),
            Method::PtyOutput => Event::PtyOutput(object(d)?),
            Method::PtyExit => Event::PtyExit(object(d)?),
            other => {
                return Err(serde::de::Error::custom(format_args!(
                    "{other} is not an event"
                )));
            }
        })
    }
}

impl<'a> Event<'a> {
    /// The method.
    pub fn method(&self) -> Method {
        match self {
            Event::ExecStdout(_) => Method::ExecStdout,
            Event::ExecStderr(_) => Method::ExecStderr,
            Event::ExecExit(_) => Method::ExecExit,
            Event::ExecError(_) => Method::ExecError,
            Event::PtyOutput(_) => Method::PtyOutput,
            Event::PtyExit(_) => Method::PtyExit,
        }
    }

    /// Parses an event from its JSON-RPC `method` and `params`, borrowing from `params`.
    /// Errors as for [`Request::parse`]: a request method or unknown name is
    /// [`RexdError::UnknownMethod`], bad params [`RexdError::InvalidParams`].
    pub fn parse(method: &str, params: Option<&'a RawValue>) -> Result<Event<'a>, RexdError> {
        match Method::from_name(method) {
            Some(m) if m.is_event() => Event::parse_known(m, params),
            _ => Err(RexdError::UnknownMethod(method.to_owned())),
        }
    }

    /// [`Event::parse`] for a method already looked up.
    pub fn parse_known(
        method: Method,
        params: Option<&'a RawValue>,
    ) -> Result<Event<'a>, RexdError> {
        if !method.is_event() {
            return Err(RexdError::UnknownMethod(method.as_str().to_owned()));
        }
        let text = match params.map(|r| r.get().trim_start()) {
            None | Some("null") => return Err(invalid(method, "missing params")),
            Some(text) => text,
        };
        let mut de = serde_json::Deserializer::from_str(text);
        let event = EventParams(method)
            .deserialize(&mut de)
            .map_err(|e| invalid(method, e))?;
        de.end().map_err(|e| invalid(method, e))?;
        Ok(event)
    }

    /// Parses a whole notification line (`{"jsonrpc":"2.0","method":…,"params":…}`) in one
    /// pass, borrowing strings from `line`.
    ///
    /// When `method` comes before `params` (as every encoder here and the spec's examples write
    /// it) the params are parsed straight into their type; otherwise they are captured raw and
    /// parsed after. Errors: [`RexdError::Parse`] for bytes that are not JSON,
    /// [`RexdError::InvalidMessage`] for JSON that is not a notification (no
    /// `"jsonrpc":"2.0"`, no `method`, an `id`), and the errors of [`Event::parse`].
    pub fn from_notification(line: &'a [u8]) -> Result<Event<'a>, RexdError> {
        // UTF-8 is checked for the whole line first: serde_json checks only the strings it
        // reads, so invalid bytes in a skipped member would pass (found by the fuzzer), and the
        // SIMD check up front is cheaper than serde_json's per-string one.
        let text = utf8(line)?;
        match serde_json::from_str::<FastNotification<'a>>(text) {
            Ok(FastNotification(event)) => Ok(event),
            // The fast path stops at the first problem without saying which layer it was in;
            // the careful path (only ever taken for bad input) tells them apart.
            Err(_) => {
                let env = Envelope::from_slice(line)?;
                if env.id.is_some() {
                    return Err(RexdError::InvalidMessage(
                        "a notification has no `id` (this is a request)".into(),
                    ));
                }
                let method = env.method()?;
                Event::parse(&method, env.params)
            }
        }
    }

    /// The whole JSON-RPC notification line, without the trailing newline.
    pub fn to_notification(&self) -> String {
        let mut out = Vec::new();
        self.write_notification(&mut out);
        // serde_json writes UTF-8 only.
        String::from_utf8(out).unwrap_or_default()
    }

    /// Appends the notification line (without the trailing newline) to `out`: a daemon
    /// streaming output writes straight into its output buffer, with no intermediate string.
    pub fn write_notification(&self, out: &mut Vec<u8>) {
        // Output events carry the megabytes: written by hand with a faster string escaper,
        // byte-identical to the serde path below (tested).
        match self {
            Event::ExecStdout(p) | Event::ExecStderr(p) => {
                return super::fast::write_output_event(
                    self.method().as_str(),
                    &p.session_id,
                    ("process_id", &p.process_id),
                    p.seq,
                    (&p.data, p.encoding),
                    p.raw_bytes,
                    out,
                );
            }
            Event::PtyOutput(p) => {
                return super::fast::write_output_event(
                    self.method().as_str(),
                    &p.session_id,
                    ("pty_id", &p.pty_id),
                    p.seq,
                    (&p.data, p.encoding),
                    None,
                    out,
                );
            }
            _ => {}
        }
        self.write_notification_serde(out);
    }

    /// [`Event::write_notification`], its `\n`, and an output event's raw bytes right after
    /// it (`raw_bytes` of them; nothing for any other event): one frame on a byte stream, to
    /// be written whole, with nothing between the line and its bytes.
    pub fn write_frame(&self, out: &mut Vec<u8>) {
        self.write_notification(out);
        out.push(b'\n');
        if let Some(raw) = self.raw_payload() {
            out.extend_from_slice(raw);
        }
    }

    /// The same event with an output event's raw bytes in its string
    /// ([`ExecOutput::into_string_payload`]), for a transport that cannot carry bytes after a
    /// line; every other event is unchanged.
    pub fn into_string_payload(self) -> Event<'a> {
        match self {
            Event::ExecStdout(p) => Event::ExecStdout(p.into_string_payload()),
            Event::ExecStderr(p) => Event::ExecStderr(p.into_string_payload()),
            other => other,
        }
    }

    /// Takes the bytes that follow this event's line (see [`Event::raw_payload`]), for a
    /// writer that queues them as they are after [`Event::write_notification`] and `\n`.
    pub fn take_raw_payload(&mut self) -> Option<Vec<u8>> {
        match self {
            Event::ExecStdout(p) | Event::ExecStderr(p) if p.raw_bytes.is_some() => {
                Some(std::mem::take(&mut p.raw))
            }
            _ => None,
        }
    }

    /// The bytes that follow this event's line: an output event's in a session with raw
    /// output, `None` for every other event.
    pub fn raw_payload(&self) -> Option<&[u8]> {
        match self {
            Event::ExecStdout(p) | Event::ExecStderr(p) if p.raw_bytes.is_some() => Some(&p.raw),
            _ => None,
        }
    }

    /// [`Event::write_notification`] through serde only (the reference for the fast path).
    fn write_notification_serde(&self, out: &mut Vec<u8>) {
        struct Line<'e, 'a>(&'e Event<'a>);
        impl Serialize for Line<'_, '_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(3))?;
                map.serialize_entry("jsonrpc", "2.0")?;
                map.serialize_entry("method", self.0.method().as_str())?;
                match self.0 {
                    Event::ExecStdout(p) | Event::ExecStderr(p) => {
                        map.serialize_entry("params", p)?
                    }
                    Event::ExecExit(p) => map.serialize_entry("params", p)?,
                    Event::ExecError(p) => map.serialize_entry("params", p)?,
                    Event::PtyOutput(p) => map.serialize_entry("params", p)?,
                    Event::PtyExit(p) => map.serialize_entry("params", p)?,
                }
                map.end()
            }
        }
        // Serializing plain structs of strings and integers into memory cannot fail.
        let _ = serde_json::to_writer(out, &Line(self));
    }

    /// The same event owning its strings.
    pub fn into_owned(self) -> Event<'static> {
        match self {
            Event::ExecStdout(p) => Event::ExecStdout(p.into_owned()),
            Event::ExecStderr(p) => Event::ExecStderr(p.into_owned()),
            Event::ExecExit(p) => Event::ExecExit(p),
            Event::ExecError(p) => Event::ExecError(p),
            Event::PtyOutput(p) => Event::PtyOutput(p.into_owned()),
            Event::PtyExit(p) => Event::PtyExit(p),
        }
    }
}

/// The keys of a JSON-RPC message; others are skipped.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Key {
    Jsonrpc,
    Id,
    Method,
    Params,
    #[serde(other)]
    Other,
}

/// A notification parsed in one pass (see [`Event::from_notification`]). Any problem is an
/// error here; the caller re-parses carefully to classify it.
struct FastNotification<'a>(Event<'a>);

impl<'de> Deserialize<'de> for FastNotification<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FastNotification<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON-RPC notification")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                use serde::de::Error;
                let mut version_ok = false;
                let mut method: Option<Method> = None;
                let mut event: Option<Event<'de>> = None;
                let mut raw: Option<&'de RawValue> = None;
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Jsonrpc => {
                            let v: Cow<'de, str> = map.next_value()?;
                            if version_ok || v != "2.0" {
                                return Err(A::Error::custom("bad jsonrpc"));
                            }
                            version_ok = true;
                        }
                        Key::Id => return Err(A::Error::custom("id")),
                        Key::Method => {
                            let name: Cow<'de, str> = map.next_value()?;
                            match Method::from_name(&name) {
                                Some(m) if m.is_event() && method.is_none() => method = Some(m),
                                _ => return Err(A::Error::custom("method")),
                            }
                        }
                        Key::Params => {
                            if event.is_some() || raw.is_some() {
                                return Err(A::Error::custom("duplicate params"));
                            }
                            match method {
                                Some(m) => event = Some(map.next_value_seed(EventParams(m))?),
                                None => raw = Some(map.next_value()?),
                            }
                        }
                        Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let (Some(method), true) = (method, version_ok) else {
                    return Err(A::Error::custom("incomplete"));
                };
                match (event, raw) {
                    (Some(event), _) => Ok(FastNotification(event)),
                    (None, Some(raw)) => Event::parse_known(method, Some(raw))
                        .map(FastNotification)
                        .map_err(A::Error::custom),
                    (None, None) => Err(A::Error::custom("missing params")),
                }
            }
        }
        d.deserialize_map(V)
    }
}

/// The fields of any JSON-RPC 2.0 message, parsed without interpreting params.
#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::jsonrpc::message::present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::jsonrpc::message::present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "crate::jsonrpc::message::present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "crate::jsonrpc::message::present")]
    error: Option<&'a RawValue>,
}

/// A checked [`RawEnvelope`].
struct Envelope<'a>(RawEnvelope<'a>);

impl<'a> std::ops::Deref for Envelope<'a> {
    type Target = RawEnvelope<'a>;
    fn deref(&self) -> &RawEnvelope<'a> {
        &self.0
    }
}

impl<'a> Envelope<'a> {
    fn from_slice(line: &'a [u8]) -> Result<Envelope<'a>, RexdError> {
        let raw: RawEnvelope<'a> = match serde_json::from_str(utf8(line)?) {
            Ok(raw) => raw,
            Err(e) if e.is_data() => return Err(RexdError::InvalidMessage(e.to_string())),
            Err(e) => return Err(RexdError::Parse(e.to_string())),
        };
        if raw.jsonrpc.as_deref() != Some("2.0") {
            return Err(RexdError::InvalidMessage(
                "`jsonrpc` must be \"2.0\"".into(),
            ));
        }
        Ok(Envelope(raw))
    }

    fn method(&self) -> Result<Cow<'a, str>, RexdError> {
        self.0
            .method
            .clone()
            .ok_or_else(|| RexdError::InvalidMessage("missing `method`".into()))
    }

    /// The id, by the rules of [`Id`]: a string, an integer (i64) or null.
    fn id(&self) -> Result<Id, RexdError> {
        let Some(raw) = self.0.id else {
            return Err(RexdError::InvalidMessage("missing `id`".into()));
        };
        serde_json::from_str::<Id>(raw.get()).map_err(|_| {
            RexdError::InvalidMessage("`id` must be a string, an integer or null".into())
        })
    }
}

/// A whole REXD request line: the JSON-RPC `id` and the typed request.
///
/// The `id` follows [`Id`] (a string, an integer or `null`; fractional numbers are refused as
/// the `jsonrpc` module does); correlating ids is the `jsonrpc` peer's job.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestMessage {
    /// The request id.
    pub id: Id,
    /// The method and params.
    pub request: Request,
}

impl RequestMessage {
    /// Parses a request line. Errors: [`RexdError::Parse`] (not JSON), [`RexdError::InvalidMessage`]
    /// (not a JSON-RPC 2.0 request: no `"jsonrpc":"2.0"`, no `method`, no `id` or an `id` that is
    /// not a string, integer or null), then those of [`Request::parse`].
    pub fn from_slice(line: &[u8]) -> Result<RequestMessage, RexdError> {
        let env = Envelope::from_slice(line)?;
        let method = env.method()?;
        let id = env.id()?;
        Ok(RequestMessage {
            id,
            request: Request::parse(&method, env.params)?,
        })
    }

    /// The line, without the trailing newline.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for RequestMessage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("jsonrpc", "2.0")?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("method", self.request.method().as_str())?;
        self.request.serialize_params(&mut map)?;
        map.end()
    }
}

/// A whole error response line: `{"jsonrpc":"2.0","id":…,"error":{…}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorResponse {
    /// The id of the request this answers ([`Id::Null`] when it could not be read).
    pub id: Id,
    /// The error.
    pub error: ErrorObject,
}

impl ErrorResponse {
    /// Parses an error response line; errors as for [`RequestMessage::from_slice`], with a
    /// missing or malformed `error` object as [`RexdError::InvalidMessage`].
    pub fn from_slice(line: &[u8]) -> Result<ErrorResponse, RexdError> {
        let env = Envelope::from_slice(line)?;
        let id = env.id()?;
        if env.result.is_some() || env.method.is_some() {
            return Err(RexdError::InvalidMessage(
                "an error response has neither `result` nor `method`".into(),
            ));
        }
        let raw = env
            .error
            .ok_or_else(|| RexdError::InvalidMessage("missing `error`".into()))?;
        let mut de = serde_json::Deserializer::from_str(raw.get());
        let error =
            object(&mut de).map_err(|e| RexdError::InvalidMessage(format!("`error`: {e}")))?;
        Ok(ErrorResponse { id, error })
    }

    /// The line, without the trailing newline.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for ErrorResponse {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("jsonrpc", "2.0")?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("error", &self.error)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rexd::{Encoding, ErrorCode};
    use serde_json::json;

    fn raw(v: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(v).unwrap()
    }

    #[test]
    fn unknown_method_and_invalid_params_differ() {
        let p = raw(&json!({"session_id": "s"}));
        assert!(matches!(
            Request::parse("fs.delete", Some(&p)),
            Err(RexdError::UnknownMethod(_))
        ));
        assert!(matches!(
            Request::parse("exec.stdout", Some(&p)),
            Err(RexdError::UnknownMethod(_))
        ));
        let e = Request::parse("exec.start", Some(&p)).unwrap_err();
        assert_eq!(e.error_code(), ErrorCode::InvalidParams);
        assert!(e.to_string().contains("argv"), "{e}");
        let e = Request::parse("session.info", None).unwrap_err();
        assert!(matches!(
            e,
            RexdError::InvalidParams {
                method: Method::SessionInfo,
                ..
            }
        ));
        let arr = raw(&json!(["s"]));
        assert!(matches!(
            Request::parse("session.info", Some(&arr)),
            Err(RexdError::InvalidParams { .. })
        ));
        assert_eq!(
            Request::parse("session.info", Some(&p)).unwrap(),
            Request::SessionInfo(SessionInfoParams {
                session_id: "s".into()
            })
        );
    }

    /// A bad field is named in the error a client shows (`code: message`), not only in a
    /// `data.detail` few clients print.
    #[test]
    fn invalid_params_name_the_field() {
        let cases = [
            (
                "fs.write",
                json!({"session_id": "s", "path": 5, "content": "x"}),
                "path: invalid type: integer `5`, expected a string",
            ),
            (
                "exec.start",
                json!({"session_id": "s", "argv": ["ls"], "env": {"A": 1}}),
                "env.A: invalid type: integer `1`, expected a string",
            ),
            (
                "fs.read",
                json!({"session_id": "s", "path": "x", "encoding": "hex"}),
                "encoding: unknown variant `hex`",
            ),
            (
                "fs.read",
                json!({"session_id": "s"}),
                "missing field `path`",
            ),
        ];
        for (method, params, want) in cases {
            let e = Request::parse(method, Some(&raw(&params))).unwrap_err();
            let o = e.to_error_object();
            assert_eq!(o.code, -32602);
            assert!(o.message.starts_with(want), "{method}: {}", o.message);
            assert!(!o.message.contains("line 1"), "{}", o.message);
            let data = o.data_value().unwrap();
            assert_eq!(data["method"], method);
            assert!(data["detail"].as_str().unwrap().contains(want), "{data}");
        }
        let e = Request::parse("fs.stat", Some(&raw(&json!(["s"])))).unwrap_err();
        assert!(e.to_string().contains("a JSON object"), "{e}");
    }

    #[test]
    fn spec_request_lines() {
        let m = RequestMessage::from_slice(
            br#"{"jsonrpc":"2.0","id":2,"method":"exec.start","params":{"session_id":"s_1","argv":["git","status","--short"],"cwd":"/srv/myapp"}}"#,
        )
        .unwrap();
        assert_eq!(m.id, Id::Number(2));
        let Request::ExecStart(p) = &m.request else {
            panic!()
        };
        assert_eq!(p.cwd.as_deref(), Some("/srv/myapp"));
        let back = RequestMessage::from_slice(m.to_line().as_bytes()).unwrap();
        assert_eq!(back, m);

        for (line, want) in [
            (&b"{"[..], "not JSON"),
            (br#"{"id":1,"method":"fs.stat","params":{}}"#, "jsonrpc"),
            (
                br#"{"jsonrpc":"2.0","method":"fs.stat","params":{}}"#,
                "missing `id`",
            ),
            (
                br#"{"jsonrpc":"2.0","id":[1],"method":"fs.stat","params":{}}"#,
                "`id`",
            ),
            (br#"{"jsonrpc":"2.0","id":1,"params":{}}"#, "method"),
        ] {
            let e = RequestMessage::from_slice(line).unwrap_err();
            assert!(e.to_string().contains(want), "{e}");
        }
    }

    #[test]
    fn notification_fast_and_slow_paths_agree() {
        let line = br#"{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s_1","process_id":"p_1","seq":1,"data":" M README.md\n","encoding":"utf8"}}"#;
        let e = Event::from_notification(line).unwrap();
        let Event::ExecStdout(out) = &e else { panic!() };
        assert_eq!(out.data, " M README.md\n");
        assert!(matches!(out.session_id, Cow::Borrowed("s_1")));
        assert_eq!(out.encoding, Encoding::Utf8);
        // params first: captured raw, parsed after.
        let reordered = br#"{"params":{"session_id":"s_1","process_id":"p_1","seq":1,"data":" M README.md\n","encoding":"utf8"},"method":"exec.stdout","jsonrpc":"2.0","x":[1,{"y":2}]}"#;
        assert_eq!(Event::from_notification(reordered).unwrap(), e);
        assert_eq!(
            Event::from_notification(e.to_notification().as_bytes()).unwrap(),
            e
        );
    }

    #[test]
    fn notification_errors_are_classified() {
        type Check = fn(&RexdError) -> bool;
        let cases: [(&[u8], Check); 8] = [
            (b"nope", |e| matches!(e, RexdError::Parse(_))),
            (br#"{"jsonrpc":"2.0","method":"exec.stdout""#, |e| {
                matches!(e, RexdError::Parse(_))
            }),
            (br#"[1]"#, |e| matches!(e, RexdError::InvalidMessage(_))),
            (
                br#"{"jsonrpc":"1.0","method":"exec.exit","params":{}}"#,
                |e| matches!(e, RexdError::InvalidMessage(_)),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"exec.exit","params":{}}"#,
                |e| matches!(e, RexdError::InvalidMessage(_)),
            ),
            (
                br#"{"jsonrpc":"2.0","method":"exec.start","params":{}}"#,
                |e| matches!(e, RexdError::UnknownMethod(_)),
            ),
            (
                br#"{"jsonrpc":"2.0","method":"exec.exit","params":{"session_id":"s"}}"#,
                |e| {
                    matches!(
                        e,
                        RexdError::InvalidParams {
                            method: Method::ExecExit,
                            ..
                        }
                    )
                },
            ),
            (
                br#"{"jsonrpc":"2.0","method":"exec.stdout","params":["s","p",1,"x"]}"#,
                |e| matches!(e, RexdError::InvalidParams { .. }),
            ),
        ];
        // Invalid UTF-8 in a member the parser skips (found by the fuzzer).
        let mut line = br#"{"jsonrpc":"2.0","method":"pty.output","params":{"session_id":"s","pty_id":"t","seq":3,"data":"$ ","x":"utf"}}"#.to_vec();
        let at = line.len() - 4;
        line[at] = 0xaa;
        assert!(matches!(
            Event::from_notification(&line),
            Err(RexdError::Parse(_))
        ));
        assert!(matches!(
            RequestMessage::from_slice(&line),
            Err(RexdError::Parse(_))
        ));
        for (line, ok) in cases {
            let e = Event::from_notification(line).unwrap_err();
            assert!(ok(&e), "{}: {e:?}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn responses_are_typed_by_method() {
        let r = raw(&json!({"process_id":"p_1","started_at":"2026-02-25T10:00:00Z"}));
        let resp = Response::parse(Method::ExecStart, &r).unwrap();
        assert_eq!(resp.method(), Method::ExecStart);
        assert_eq!(
            serde_json::to_value(&resp).unwrap(),
            serde_json::from_str::<Value>(r.get()).unwrap()
        );
        assert!(matches!(
            Response::parse(Method::FsRead, &r),
            Err(RexdError::InvalidParams { .. })
        ));
        assert!(matches!(
            Response::parse(Method::ExecExit, &r),
            Err(RexdError::UnknownMethod(_))
        ));
    }

    /// An output event with raw output: its line announces the bytes, which follow it; read
    /// back, the count comes with the line; a transport that cannot carry them gets them in
    /// the string instead.
    #[test]
    fn raw_output_frames() {
        let bytes = b"a\n\0\xff".to_vec();
        let e = Event::ExecStdout(ExecOutput::raw_frame(
            "s_1",
            "p_1",
            4,
            Encoding::Raw,
            bytes.clone(),
        ));
        let mut frame = Vec::new();
        e.write_frame(&mut frame);
        let line = "{\"jsonrpc\":\"2.0\",\"method\":\"exec.stdout\",\"params\":{\"session_id\":\"s_1\",\
                    \"process_id\":\"p_1\",\"seq\":4,\"data\":\"\",\"encoding\":\"raw\",\"raw_bytes\":4}}\n";
        let mut want = line.as_bytes().to_vec();
        want.extend_from_slice(&bytes);
        assert_eq!(frame, want);
        let Event::ExecStdout(mut back) =
            Event::from_notification(line.trim_end().as_bytes()).unwrap()
        else {
            panic!()
        };
        assert_eq!((back.raw_bytes, back.encoding), (Some(4), Encoding::Raw));
        back.raw = bytes.clone();
        assert_eq!(back.bytes().unwrap(), &bytes[..]);
        let Event::ExecStdout(o) = e else { panic!() };
        let plain = o.clone().into_string_payload();
        assert_eq!((plain.raw_bytes, plain.encoding), (None, Encoding::Base64));
        assert_eq!(plain.bytes().unwrap(), &bytes[..]);
        let zstd =
            ExecOutput::raw_frame("s", "p", 1, Encoding::Zstd, vec![1, 2]).into_string_payload();
        assert_eq!(
            (zstd.encoding, zstd.data.as_ref()),
            (Encoding::Zstd, "AQI=")
        );
        // Any other event has no bytes after it.
        let mut exit = Vec::new();
        let other = Event::ExecStdout(ExecOutput::from_bytes("s", "p", 1, b"x"));
        other.write_frame(&mut exit);
        assert!(exit.ends_with(b"}}\n") && other.raw_payload().is_none());
    }

    #[test]
    fn fast_lines_equal_serde_lines() {
        let data = "a\"b\\c\n\u{1}é\t".repeat(9);
        for e in [
            Event::ExecStdout(ExecOutput::from_bytes("s_\"1", "p_1", 7, data.as_bytes())),
            Event::ExecStderr(ExecOutput::from_bytes("s_1", "p_1", 1, b"\xff\x00")),
            Event::ExecStdout(ExecOutput::raw_frame(
                "s_1",
                "p_1",
                2,
                Encoding::Raw,
                vec![0; 9],
            )),
            Event::PtyOutput(PtyOutput {
                session_id: "s".into(),
                pty_id: "t_1".into(),
                seq: 3,
                data: data.clone().into(),
                encoding: Encoding::Utf8,
            }),
        ] {
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            e.write_notification(&mut fast);
            e.write_notification_serde(&mut slow);
            assert_eq!(
                String::from_utf8(fast).unwrap(),
                String::from_utf8(slow).unwrap()
            );
        }
        for (truncated, raw) in [(false, None), (true, None), (false, Some(3))] {
            let r = Response::FsRead(FsReadResult {
                path: "/srv/\"x\"".into(),
                size: 12,
                mtime: "2026-02-25T10:00:00.5Z".into(),
                encoding: if raw.is_some() {
                    Encoding::Raw
                } else {
                    Encoding::Utf8
                },
                content: if raw.is_some() {
                    String::new()
                } else {
                    data.clone()
                },
                truncated,
                raw_bytes: raw,
                raw: vec![b'\n', 0, 0xff],
            });
            for id in [Id::Number(-3), Id::String("i\"d".into()), Id::Null] {
                let (mut fast, mut slow) = (Vec::new(), Vec::new());
                r.write_line(&id, &mut fast);
                r.write_line_serde(&id, &mut slow);
                assert_eq!(
                    String::from_utf8(fast).unwrap(),
                    String::from_utf8(slow).unwrap()
                );
            }
        }
    }

    #[test]
    fn a_raw_frame_is_the_line_then_its_bytes() {
        let r = Response::FsRead(FsReadResult {
            path: "/f".into(),
            size: 3,
            mtime: "2026-02-25T10:00:00Z".into(),
            encoding: Encoding::Raw,
            content: String::new(),
            truncated: false,
            raw_bytes: Some(3),
            raw: vec![b'\n', 0, 0xff],
        });
        let mut out = Vec::new();
        r.write_frame(&Id::Number(4), &mut out);
        let nl = out.iter().position(|&b| b == b'\n').unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&out[..nl]).unwrap(),
            json!({"jsonrpc":"2.0","id":4,"result":{"path":"/f","size":3,
                   "mtime":"2026-02-25T10:00:00Z","encoding":"raw","content":"",
                   "truncated":false,"raw_bytes":3}})
        );
        assert_eq!(&out[nl + 1..], &[b'\n', 0, 0xff]);
        // A way out without a byte stream gets the bytes in the string.
        let Response::FsRead(r) = r else {
            unreachable!()
        };
        let s = r.into_string_form();
        assert_eq!(
            (s.encoding, s.content.as_str(), s.raw_bytes),
            (Encoding::Base64, "CgD/", None)
        );
    }

    #[test]
    fn response_line_is_the_jsonrpc_envelope() {
        let r = Response::parse(
            Method::ExecStart,
            &raw(&json!({"process_id":"p_1","started_at":"2026-02-25T10:00:00Z"})),
        )
        .unwrap();
        let mut out = Vec::new();
        r.write_line(&Id::Number(2), &mut out);
        assert_eq!(
            serde_json::from_slice::<Value>(&out).unwrap(),
            json!({"jsonrpc":"2.0","id":2,"result":{"process_id":"p_1","started_at":"2026-02-25T10:00:00Z"}})
        );
        let mut out = Vec::new();
        r.write_line(&Id::String("a\"b".into()), &mut out);
        assert!(out.starts_with(br#"{"jsonrpc":"2.0","id":"a\"b","result":{"#));
    }

    #[test]
    fn error_response_line() {
        let line = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32002,"message":"Path is outside allowed roots","data":{"path":"/etc/passwd","allowed_roots":["/srv/app","/home/deploy"]}}}"#;
        let e = ErrorResponse::from_slice(line).unwrap();
        assert_eq!(e.error.code_as(), Some(ErrorCode::ForbiddenPath));
        assert_eq!(
            serde_json::from_str::<Value>(&e.to_line()).unwrap(),
            serde_json::from_slice::<Value>(line).unwrap()
        );
        assert!(
            ErrorResponse::from_slice(
                br#"{"jsonrpc":"2.0","id":7,"error":{"code":"x","message":""}}"#
            )
            .is_err()
        );
        assert!(ErrorResponse::from_slice(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#).is_err());
    }

    #[test]
    fn call_links_params_to_results() {
        fn method_of<C: Call>(_: &C) -> Method {
            C::METHOD
        }
        let p = FsStatParams {
            session_id: "s".into(),
            path: "/x".into(),
        };
        assert_eq!(method_of(&p), Method::FsStat);
        let req: Request = p.into();
        assert_eq!(req.params_value(), json!({"session_id":"s","path":"/x"}));
    }
}
