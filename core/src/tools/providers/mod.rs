//! Translation between deskwire's tools and four LLM APIs (`docs/tools.md`, "Provider requests";
//! the shapes are in the fixtures of `tests/vectors/providers/`): tool definitions out, tool calls
//! back, results out again.
//!
//! Every response, whole or streamed, normalises to a [`ProviderResponse`]: the ordered
//! [`Segment`]s of `docs/tools.md`, "Types" (text and tool calls as the model produced
//! them). Arguments that are not a JSON object become a [`Segment::InvalidToolCall`] (answer it
//! with an error result), never a panic; an empty argument string means `{}`.
//!
//! - [`openai_chat`]: Chat Completions (`tools[].function`, `tool_calls` with JSON-string
//!   arguments, streamed by index).
//! - [`openai_responses`]: Responses (flat tools, `function_call` items with `call_id`,
//!   `allowed_tools` gating that keeps the tool list, and so the prompt cache).
//! - [`anthropic`]: Messages (`tool_use` blocks, streamed `input_json_delta`, `tool_result`
//!   with `is_error`, all results in one user message).
//! - [`gemini`]: `functionDeclarations` with schemas converted to Gemini's OpenAPI subset
//!   ([`gemini_schema`]), `functionCall` ids generated when missing, `allowedFunctionNames`,
//!   `functionResponse` with the tool name recovered from the call.
//! - [`sse`]: the server-sent events framing all four stream in.
//! - [`StreamParser`]: bytes of a streamed response in any split → the same [`ProviderResponse`].
//!
//! Requests: [`request_tools`] gives the tool fields as a JSON map to merge into a request
//! body; [`write_request_tools`] writes the same fields as JSON text straight from the borrowed
//! specs, about as fast as serializing the finished JSON (`benches/tools.rs`), where the map
//! costs ~6x that because every schema is copied.
//!
//! The next turn: [`assistant_turn`] echoes a response in the provider's shape (with what it
//! needs back: Responses item ids, reasoning items and thinking blocks, Gemini thought
//! signatures), [`tool_results`] answers its calls.

pub mod anthropic;
pub mod gemini;
pub mod gemini_schema;
pub mod openai_chat;
pub mod openai_responses;
pub mod sse;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::spec::{ToolCall, ToolResult, ToolSpec};
use crate::ids::IdGenerator;

/// The APIs deskwire speaks. JSON: `"openai_chat"`, `"openai_responses"`, `"anthropic"`,
/// `"gemini"` (as [`Provider::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum Provider {
    /// OpenAI Chat Completions.
    #[serde(rename = "openai_chat")]
    #[cfg_attr(feature = "uniffi", uniffi(name = "OpenaiChat"))]
    OpenAiChat,
    /// OpenAI Responses.
    #[serde(rename = "openai_responses")]
    #[cfg_attr(feature = "uniffi", uniffi(name = "OpenaiResponses"))]
    OpenAiResponses,
    /// Anthropic Messages.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// Google Gemini `generateContent`.
    #[serde(rename = "gemini")]
    Gemini,
}

impl Provider {
    /// Every provider.
    pub const ALL: [Provider; 4] = [
        Provider::OpenAiChat,
        Provider::OpenAiResponses,
        Provider::Anthropic,
        Provider::Gemini,
    ];

    /// `openai_chat`, `openai_responses`, `anthropic`, `gemini` (the fixture file names).
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAiChat => "openai_chat",
            Provider::OpenAiResponses => "openai_responses",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
        }
    }

    /// The provider named `name`.
    pub fn from_name(name: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// Whether and which tool the model must call. JSON: `"auto"`, `"none"`, `"required"`,
/// `{"tool": "name"}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool.
    Tool(#[cfg_attr(feature = "uniffi", uniffi(name = "name"))] String),
}

/// The tool part of a request.
#[derive(Debug, Clone, Default)]
pub struct ToolRequest<'a> {
    /// The tools the model may call now (`visible_tools`).
    pub tools: Vec<&'a ToolSpec>,
    /// The full, stable tool list. When set, the APIs that can gate without changing the
    /// list (Responses `allowed_tools`, Gemini `allowedFunctionNames`) send this list and
    /// restrict it to `tools`, so the cached prompt prefix survives a desk bind; the others
    /// send `tools` only.
    pub catalog: Option<Vec<&'a ToolSpec>>,
    /// Tool choice.
    pub choice: ToolChoice,
    /// OpenAI `parallel_tool_calls`; `Some(false)` is Anthropic
    /// `disable_parallel_tool_use: true`. Gemini has no knob.
    pub parallel_tool_calls: Option<bool>,
    /// Ask OpenAI for strict schema adherence, for the tools whose schema allows it (every
    /// object closed with `additionalProperties: false` and every property required: OpenAI
    /// refuses `strict` on any other schema, so those tools go without it).
    pub strict: bool,
}

impl<'a> ToolRequest<'a> {
    /// `tools` with the default choice (auto).
    pub fn new(tools: Vec<&'a ToolSpec>) -> ToolRequest<'a> {
        ToolRequest {
            tools,
            ..ToolRequest::default()
        }
    }
}

/// The fields to merge into `provider`'s request body for `request` (`tools`, `tool_choice`,
/// `toolConfig`, ...). Empty when there is nothing to offer.
pub fn request_tools(provider: Provider, request: &ToolRequest<'_>) -> Map<String, Value> {
    match provider {
        Provider::OpenAiChat => openai_chat::request_tools(request),
        Provider::OpenAiResponses => openai_responses::request_tools(request),
        Provider::Anthropic => anthropic::request_tools(request),
        Provider::Gemini => gemini::request_tools(request),
    }
}

/// The same fields as [`request_tools`], written as JSON text straight from the borrowed
/// specs (no schema is copied): what a host puts into its request body, and what crosses the
/// FFI. Object keys come in the providers' documented order.
pub fn write_request_tools(provider: Provider, request: &ToolRequest<'_>, out: &mut Vec<u8>) {
    let result = match provider {
        Provider::OpenAiChat => serde_json::to_writer(&mut *out, &openai_chat::Fields(request)),
        Provider::OpenAiResponses => {
            serde_json::to_writer(&mut *out, &openai_responses::Fields(request))
        }
        Provider::Anthropic => serde_json::to_writer(&mut *out, &anthropic::Fields(request)),
        Provider::Gemini => serde_json::to_writer(&mut *out, &gemini::Fields(request)),
    };
    result.expect("JSON values serialize into a Vec");
}

/// Serializes an iterator as a JSON array, without collecting it first.
pub(crate) struct SeqOf<I>(pub I);

impl<I> Serialize for SeqOf<I>
where
    I: Iterator + Clone,
    I::Item: Serialize,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.clone())
    }
}

/// The fields a `Fields` serializer writes, as a map.
pub(crate) fn to_map(fields: &impl Serialize) -> Map<String, Value> {
    match serde_json::to_value(fields) {
        Ok(Value::Object(m)) => m,
        _ => unreachable!("request fields serialize to an object"),
    }
}

/// A tool call whose arguments could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct InvalidToolCall {
    /// The call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as received.
    pub arguments: String,
    /// What is wrong with them.
    pub error: String,
    /// The provider's item id (OpenAI Responses), to echo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub item_id: Option<String>,
}

/// One piece of a model's answer (`ContentSegment` of the protocol).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Segment {
    /// Text for the user.
    Text {
        /// The text.
        text: String,
    },
    /// A call to run (after [`crate::tools::authorize`]).
    ToolCall {
        /// The call.
        #[serde(rename = "toolCall")]
        tool_call: ToolCall,
    },
    /// A call whose arguments are malformed: answer it with an error result.
    InvalidToolCall {
        /// The call.
        #[serde(rename = "invalidToolCall")]
        invalid_tool_call: InvalidToolCall,
    },
    /// The model's reasoning as the provider sent it (Anthropic `thinking` /
    /// `redacted_thinking` blocks, OpenAI Responses `reasoning` items), echoed back unchanged
    /// on the next turn: with reasoning on, these providers refuse a tool-use continuation
    /// that drops it. Not for the user.
    Reasoning {
        /// The block or item as received (streams: as assembled).
        raw: Value,
    },
}

/// A model's answer, normalised.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProviderResponse {
    /// In the order the model produced them.
    pub segments: Vec<Segment>,
    /// Why the model stopped, as the provider says it (`tool_calls`, `tool_use`, `STOP`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
}

impl ProviderResponse {
    /// The valid tool calls.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.segments.iter().filter_map(|s| match s {
            Segment::ToolCall { tool_call } => Some(tool_call),
            _ => None,
        })
    }

    /// All text, joined.
    pub fn text(&self) -> String {
        self.segments
            .iter()
            .filter_map(|s| match s {
                Segment::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The JSON of `docs/tools.md`, "Types" (`{"segments": [...]}`).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("segments serialize")
    }

    /// Appends text, joining it to a text segment just before.
    pub(crate) fn push_text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if let Some(Segment::Text { text: last }) = self.segments.last_mut() {
            last.push_str(text);
        } else {
            self.segments.push(Segment::Text {
                text: text.to_owned(),
            });
        }
    }
}

/// What went wrong reading a provider's response. JSON: externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ParseError {
    /// Not JSON.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON, but not the provider's shape.
    #[error("unexpected shape: {0}")]
    Shape(String),
    /// The provider reported an error (an `error` object or event).
    #[error("provider error: {0}")]
    Provider(String),
    /// A limit of [`Limits`] was crossed.
    #[error("too large: {0}")]
    TooLarge(&'static str),
    /// The stream ended before the provider said the response was done (the event that
    /// carries the stop reason): it was cut off in transit, and its last call may be half.
    #[error("the stream ended before {0}: the response was cut off")]
    Incomplete(&'static str),
}

/// Bounds on what a (streamed) response may make the parser hold. JSON: the fields by name;
/// missing ones take the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Bytes of text, argument fragments and SSE lines held at most (default 16 MiB).
    pub max_bytes: usize,
    /// Tool calls and content blocks at most (default 512).
    pub max_items: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 16 << 20,
            max_items: 512,
        }
    }
}

/// Reads a JSON argument string: empty (or blank) means `{}`; anything but an object is an
/// error message.
pub fn parse_arguments(raw: &str) -> Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(format!(
            "arguments must be a JSON object, not {}",
            json_kind(&other)
        )),
        Err(e) => Err(format!("arguments are not valid JSON: {e}")),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A segment for a call whose raw argument text is `raw`.
pub(crate) fn call_segment(
    id: String,
    name: String,
    raw: &str,
    item_id: Option<String>,
) -> Segment {
    match parse_arguments(raw) {
        Ok(args) => Segment::ToolCall {
            tool_call: ToolCall {
                item_id,
                ..ToolCall::new(id, name, args)
            },
        },
        Err(error) => Segment::InvalidToolCall {
            invalid_tool_call: InvalidToolCall {
                id,
                name,
                arguments: raw.to_owned(),
                error,
                item_id,
            },
        },
    }
}

/// A segment for a call whose arguments arrived as a JSON value (Anthropic, Gemini).
pub(crate) fn call_segment_value(id: String, name: String, args: Option<&Value>) -> Segment {
    match args {
        None | Some(Value::Null) => Segment::ToolCall {
            tool_call: ToolCall::new(id, name, Value::Object(Map::new())),
        },
        Some(v @ Value::Object(_)) => Segment::ToolCall {
            tool_call: ToolCall::new(id, name, v.clone()),
        },
        Some(other) => Segment::InvalidToolCall {
            invalid_tool_call: InvalidToolCall {
                id,
                name,
                arguments: other.to_string(),
                error: format!("arguments must be a JSON object, not {}", json_kind(other)),
                item_id: None,
            },
        },
    }
}

pub(crate) fn parse_json(bytes: &[u8]) -> Result<Value, ParseError> {
    serde_json::from_slice(bytes).map_err(|e| ParseError::NotJson(e.to_string()))
}

pub(crate) fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// An `{"error": {...}}` body, as a provider error.
pub(crate) fn error_body(v: &Value) -> Option<ParseError> {
    let e = v.get("error")?;
    if e.is_null() {
        return None;
    }
    let message = str_field(e, "message")
        .map(str::to_owned)
        .unwrap_or_else(|| e.to_string());
    Some(ParseError::Provider(message))
}

/// A whole (non-streamed) response body of `provider`. `ids` makes the ids Gemini leaves out.
pub fn parse_response(
    provider: Provider,
    body: &[u8],
    ids: &mut IdGenerator,
) -> Result<ProviderResponse, ParseError> {
    match provider {
        Provider::OpenAiChat => openai_chat::parse_response(body),
        Provider::OpenAiResponses => openai_responses::parse_response(body),
        Provider::Anthropic => anthropic::parse_response(body),
        Provider::Gemini => gemini::parse_response(body, ids),
    }
}

/// The model turn that echoes `response` into the next request to `provider`: the Chat
/// `assistant` message, the Responses input items (an array), the Anthropic `assistant`
/// message, the Gemini `model` content. One dispatch for every binding.
pub fn assistant_turn(provider: Provider, response: &ProviderResponse) -> Value {
    match provider {
        Provider::OpenAiChat => openai_chat::assistant_message(response),
        Provider::OpenAiResponses => Value::Array(openai_responses::input_items(response)),
        Provider::Anthropic => anthropic::assistant_message(response),
        Provider::Gemini => gemini::model_content(response),
    }
}

/// The results of the calls of `previous` (the model turn they answer), to follow
/// [`assistant_turn`] in the next request to `provider`: an array of Chat `tool` messages, an
/// array of Responses `function_call_output` items, one Anthropic `user` message, one Gemini
/// `user` content. A result for a call `previous` did not make is an error, which every API
/// would refuse (Gemini names each function from its call in `previous`); a `previous` with no
/// calls at all (a host that keeps no turn, for the APIs that pair by id alone) checks nothing.
/// Results may come in several lists (one call's at a time).
pub fn tool_results(
    provider: Provider,
    previous: &ProviderResponse,
    results: &[ToolResult],
) -> Result<Value, gemini::UnknownCall> {
    let calls: Vec<&str> = previous
        .segments
        .iter()
        .filter_map(|s| match s {
            Segment::ToolCall { tool_call: c } => Some(c.id.as_str()),
            Segment::InvalidToolCall {
                invalid_tool_call: c,
            } => Some(c.id.as_str()),
            _ => None,
        })
        .collect();
    if !calls.is_empty()
        && let Some(stray) = results.iter().find(|r| !calls.contains(&&*r.call_id))
    {
        return Err(gemini::UnknownCall(stray.call_id.clone()));
    }
    Ok(match provider {
        Provider::OpenAiChat => {
            Value::Array(results.iter().map(openai_chat::tool_message).collect())
        }
        Provider::OpenAiResponses => Value::Array(
            results
                .iter()
                .map(openai_responses::function_call_output)
                .collect(),
        ),
        Provider::Anthropic => anthropic::tool_results_message(results),
        Provider::Gemini => gemini::function_responses(previous, results)?,
    })
}

/// A byte counter against [`Limits::max_bytes`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Budget {
    used: usize,
}

impl Budget {
    pub(crate) fn take(&mut self, limits: &Limits, n: usize) -> Result<(), ParseError> {
        self.used = self.used.saturating_add(n);
        if self.used > limits.max_bytes {
            Err(ParseError::TooLarge("streamed content"))
        } else {
            Ok(())
        }
    }
}

enum Assembler {
    OpenAiChat(openai_chat::StreamAssembler),
    OpenAiResponses(openai_responses::StreamAssembler),
    Anthropic(anthropic::StreamAssembler),
    Gemini(gemini::StreamAssembler),
}

/// A streamed response: feed the HTTP body's bytes as they come (any split), then
/// [`finish`](Self::finish). The first error sticks: later input is ignored and `finish`
/// returns it.
pub struct StreamParser {
    sse: sse::SseDecoder,
    assembler: Assembler,
    error: Option<ParseError>,
}

impl StreamParser {
    /// A parser for `provider`; `seed` makes the ids a provider leaves out.
    pub fn new(provider: Provider, limits: Limits, seed: u64) -> StreamParser {
        let assembler = match provider {
            Provider::OpenAiChat => {
                Assembler::OpenAiChat(openai_chat::StreamAssembler::new(limits, seed))
            }
            Provider::OpenAiResponses => {
                Assembler::OpenAiResponses(openai_responses::StreamAssembler::new(limits))
            }
            Provider::Anthropic => Assembler::Anthropic(anthropic::StreamAssembler::new(limits)),
            Provider::Gemini => Assembler::Gemini(gemini::StreamAssembler::new(limits, seed)),
        };
        StreamParser {
            sse: sse::SseDecoder::new(limits.max_bytes.min(sse::DEFAULT_MAX_EVENT_BYTES)),
            assembler,
            error: None,
        }
    }

    /// Takes the next bytes of the body.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), ParseError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.sse.feed(bytes);
        self.drain()
    }

    fn drain(&mut self) -> Result<(), ParseError> {
        while let Some(event) = self.sse.next_event() {
            let result = match event {
                Ok(event) => self.push_data(event.data.as_bytes()),
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                self.error = Some(e.clone());
                return Err(e);
            }
        }
        Ok(())
    }

    /// Takes one event's `data` directly (for hosts whose HTTP client already splits SSE).
    pub fn push_data(&mut self, data: &[u8]) -> Result<(), ParseError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if data == b"[DONE]" {
            return Ok(());
        }
        let result = match &mut self.assembler {
            Assembler::OpenAiChat(a) => a.push(data),
            Assembler::OpenAiResponses(a) => a.push(data),
            Assembler::Anthropic(a) => a.push(data),
            Assembler::Gemini(a) => a.push(data),
        };
        if let Err(e) = &result {
            self.error = Some(e.clone());
        }
        result
    }

    /// The end of the body: the assembled response (an unterminated last event counts), or
    /// [`ParseError::Incomplete`] when the provider never said it was done.
    pub fn finish(mut self) -> Result<ProviderResponse, ParseError> {
        if self.error.is_none() {
            self.sse.finish();
            self.drain()?;
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        let (response, end) = match self.assembler {
            Assembler::OpenAiChat(a) => (a.finish(), "a chunk with a finish_reason"),
            Assembler::OpenAiResponses(a) => (a.finish(), "response.completed"),
            Assembler::Anthropic(a) => (a.finish(), "message_delta's stop_reason"),
            Assembler::Gemini(a) => (a.finish(), "a chunk with a finishReason"),
        };
        // Every provider ends a whole stream with its stop reason; without one, a host would
        // run (or refuse) calls whose arguments were cut.
        match response.stop_reason {
            Some(_) => Ok(response),
            None => Err(ParseError::Incomplete(end)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments() {
        assert_eq!(parse_arguments(""), Ok(json!({})));
        assert_eq!(parse_arguments("  "), Ok(json!({})));
        assert_eq!(parse_arguments(r#"{"a":1}"#), Ok(json!({"a": 1})));
        assert!(parse_arguments("[1]").unwrap_err().contains("an array"));
        assert!(
            parse_arguments(r#"{"a":"#)
                .unwrap_err()
                .contains("not valid JSON")
        );
    }

    #[test]
    fn echoes_take_each_provider_shape() {
        let previous = ProviderResponse {
            segments: vec![Segment::ToolCall {
                tool_call: ToolCall::new("c1", "read", json!({"path": "a"})),
            }],
            stop_reason: None,
        };
        let results = [ToolResult::error("c1", "no such file")];
        let turn = |p| assistant_turn(p, &previous);
        assert_eq!(turn(Provider::OpenAiChat)["tool_calls"][0]["id"], "c1");
        assert_eq!(turn(Provider::OpenAiResponses)[0]["type"], "function_call");
        assert_eq!(turn(Provider::Anthropic)["content"][0]["type"], "tool_use");
        assert_eq!(turn(Provider::Gemini)["role"], "model");
        let back = |p| tool_results(p, &previous, &results).unwrap();
        assert_eq!(back(Provider::OpenAiChat)[0]["role"], "tool");
        assert_eq!(back(Provider::OpenAiResponses)[0]["call_id"], "c1");
        assert_eq!(back(Provider::Anthropic)["content"][0]["is_error"], true);
        let gemini = back(Provider::Gemini);
        assert_eq!(gemini["parts"][0]["functionResponse"]["name"], "read");
        let stray = [ToolResult::ok("c9", "x")];
        assert_eq!(
            tool_results(Provider::Gemini, &previous, &stray),
            Err(gemini::UnknownCall("c9".into()))
        );
        // Every API refuses a result for a call it did not make: caught here, not as a 400.
        for p in Provider::ALL {
            assert_eq!(
                tool_results(p, &previous, &stray),
                Err(gemini::UnknownCall("c9".into())),
                "{p:?}"
            );
        }
        // A host that keeps no turn (the APIs that pair by id alone) passes an empty one.
        let none = ProviderResponse::default();
        assert!(tool_results(Provider::Anthropic, &none, &stray).is_ok());
    }

    #[test]
    fn segments_serialize_as_the_protocol_says() {
        let mut r = ProviderResponse::default();
        r.push_text("Sure, ");
        r.push_text("let me check.");
        r.segments.push(Segment::ToolCall {
            tool_call: ToolCall::new("c1", "get_weather", json!({"location": "Taipei"})),
        });
        assert_eq!(
            r.to_value(),
            json!({"segments": [
                {"type": "text", "text": "Sure, let me check."},
                {"type": "tool_call", "toolCall": {"id": "c1", "name": "get_weather", "args": {"location": "Taipei"}}}
            ]})
        );
        assert_eq!(r.text(), "Sure, let me check.");
    }
}
