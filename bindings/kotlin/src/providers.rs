//! Provider translation (`deskwire::tools::providers`): the tool fields of a request to an LLM
//! API, its answer (whole or streamed) read into typed segments, and the next turn (the
//! model's turn echoed, the tool results) in that API's shape.
//!
//! Request bodies and the echoed turns are the provider's own JSON, which the host puts into
//! its HTTP request: they cross as JSON text. Answers cross as records: [`ProviderResponse`]
//! with [`ResponseSegment`]s, whose tool calls keep what the provider needs back on the next
//! turn (Responses item ids, Gemini thought signatures, whether the id was generated).
//! Reasoning (Anthropic thinking blocks, Responses reasoning items) is opaque: the block as
//! received, JSON text, to be echoed unchanged.

use std::sync::{Arc, Mutex};

use deskwire::ids::IdGenerator;
use deskwire::tools::providers;

use crate::error::{Error, Result, api};
use crate::lock;
use crate::tools::{ToolCall, ToolSpec};

/// The tool part of a request.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ProviderToolRequest {
    /// The tools the model may call now.
    pub tools: Vec<ToolSpec>,
    /// Whether and which tool it must call.
    pub choice: providers::ToolChoice,
    /// The full, stable tool list: the APIs that can gate without changing the list
    /// (Responses `allowed_tools`, Gemini `allowedFunctionNames`) send it and allow `tools`,
    /// so a cached prompt prefix survives; the others send `tools` only.
    #[uniffi(default = None)]
    pub catalog: Option<Vec<ToolSpec>>,
    /// OpenAI `parallel_tool_calls`; `false` is Anthropic `disable_parallel_tool_use`.
    #[uniffi(default = None)]
    pub parallel_tool_calls: Option<bool>,
    /// Ask OpenAI for strict schemas, for the tools whose schema allows it.
    #[uniffi(default = false)]
    pub strict: bool,
}

/// One piece of a model's answer, in the order the model produced them.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum ResponseSegment {
    /// Text for the user.
    Text {
        /// The text.
        text: String,
    },
    /// A call to run (after `Toolbox.checkCall`).
    ToolCall {
        /// The call.
        call: ToolCall,
    },
    /// A call whose arguments are malformed.
    InvalidToolCall {
        /// The call.
        call: providers::InvalidToolCall,
    },
    /// The model's reasoning as the provider sent it (Anthropic `thinking` /
    /// `redacted_thinking` blocks, Responses `reasoning` items): not for the user, echoed
    /// unchanged on the next turn (with reasoning on, these APIs refuse a tool-use
    /// continuation without it).
    Reasoning {
        /// The block or item, JSON text.
        raw_json: String,
    },
}

/// A model's answer, normalised.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ProviderResponse {
    /// In the order the model produced them.
    pub segments: Vec<ResponseSegment>,
    /// Why the model stopped, as the provider says it (`tool_calls`, `tool_use`, `STOP`, ...).
    #[uniffi(default = None)]
    pub stop_reason: Option<String>,
}

/// What a (streamed) response may make the parser hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct ProviderLimits {
    /// Bytes of text, argument fragments and SSE lines at most.
    pub max_bytes: u64,
    /// Tool calls and content blocks at most.
    pub max_items: u64,
}

/// The core's limits (16 MiB, 512 items).
#[uniffi::export]
pub fn provider_limits_default() -> ProviderLimits {
    providers::Limits::default().into()
}

/// The fields to merge into `provider`'s request body (`tools`, `tool_choice`, `toolConfig`,
/// ...), a JSON object as text; `{}` when there is nothing to offer. Throws `InvalidInput` for
/// a tool whose name some provider refuses or whose schema is not a JSON object schema.
#[uniffi::export]
pub fn provider_request_tools(
    provider: providers::Provider,
    request: ProviderToolRequest,
) -> Result<String> {
    let tools = specs(request.tools)?;
    let catalog = request.catalog.map(specs).transpose()?;
    let request = providers::ToolRequest {
        tools: tools.iter().collect(),
        catalog: catalog.as_ref().map(|c| c.iter().collect()),
        choice: request.choice,
        parallel_tool_calls: request.parallel_tool_calls,
        strict: request.strict,
    };
    Ok(write_request_tools(provider, &request))
}

/// A whole (non-streamed) response body of `provider` (Gemini: also the JSON array of chunks
/// `streamGenerateContent` answers without `alt=sse`). `seed` makes the call ids Gemini leaves
/// out. Throws `Remote` (kind `Provider`) for the provider's error object, `InvalidInput`
/// (`NotJson`, `Shape`) for a body that is not its answer.
#[uniffi::export(default(seed = 0))]
pub fn provider_parse_response(
    provider: providers::Provider,
    body: Vec<u8>,
    seed: u64,
) -> Result<ProviderResponse> {
    api(|| providers::parse_response(provider, &body, &mut IdGenerator::new(seed))).map(Into::into)
}

/// The model's turn echoed into the next request to `provider`, JSON text: the Chat
/// `assistant` message, the Responses input items (an array), the Anthropic `assistant`
/// message, the Gemini `model` content.
#[uniffi::export]
pub fn provider_assistant_turn(
    provider: providers::Provider,
    response: ProviderResponse,
) -> Result<String> {
    let response = providers::ProviderResponse::try_from(response)?;
    Ok(providers::assistant_turn(provider, &response).to_string())
}

/// The results of the calls of `previous` (the turn they answer), JSON text to follow the
/// echoed turn: an array of Chat `tool` messages, an array of Responses `function_call_output`
/// items, one Anthropic `user` message, one Gemini `user` content. Throws `InvalidInput`
/// (kind `UnknownCall`) when a result answers no call of `previous` (every API refuses one; a
/// `previous` without calls checks nothing).
#[uniffi::export]
pub fn provider_tool_results(
    provider: providers::Provider,
    previous: ProviderResponse,
    results: Vec<deskwire::tools::ToolResult>,
) -> Result<String> {
    let previous = providers::ProviderResponse::try_from(previous)?;
    api(|| providers::tool_results(provider, &previous, &results)).map(|v| v.to_string())
}

/// A streamed response (server-sent events) being read: [`feed`](Self::feed) the HTTP body's
/// bytes as they come, in any split, then [`finish`](Self::finish) for the response. The
/// first error sticks: every later call throws it again.
#[derive(uniffi::Object)]
pub struct ProviderStreamParser {
    inner: Mutex<Option<providers::StreamParser>>,
}

#[uniffi::export]
impl ProviderStreamParser {
    /// A parser for `provider`; `seed` makes the ids a provider leaves out; `limits` bound
    /// what it holds (`null`: the core's defaults).
    #[uniffi::constructor(default(seed = 0, limits = None))]
    pub fn new(
        provider: providers::Provider,
        seed: u64,
        limits: Option<ProviderLimits>,
    ) -> Arc<Self> {
        let limits = limits.map(Into::into).unwrap_or_default();
        Arc::new(ProviderStreamParser {
            inner: Mutex::new(Some(providers::StreamParser::new(provider, limits, seed))),
        })
    }

    /// The next bytes of the body. Throws `Remote` (kind `Provider`) for an error event,
    /// `InvalidInput` (`NotJson`, `Shape`, `TooLarge`) for a stream that is not the
    /// provider's, `Misuse` (`Finished`) after [`finish`](Self::finish).
    pub fn feed(&self, bytes: Vec<u8>) -> Result<()> {
        let mut inner = lock(&self.inner);
        api(|| parser(&mut inner)?.feed(&bytes).map_err(Error::from))
    }

    /// One event's `data`, for HTTP clients that split the events themselves.
    pub fn push_data(&self, data: Vec<u8>) -> Result<()> {
        let mut inner = lock(&self.inner);
        api(|| parser(&mut inner)?.push_data(&data).map_err(Error::from))
    }

    /// The end of the body (an unterminated last event counts): the response. The parser
    /// takes nothing more.
    pub fn finish(&self) -> Result<ProviderResponse> {
        let parser = lock(&self.inner).take();
        api(|| parser.ok_or_else(finished)?.finish().map_err(Error::from)).map(Into::into)
    }

    /// Whether [`finish`](Self::finish) was called.
    pub fn is_finished(&self) -> bool {
        lock(&self.inner).is_none()
    }
}

/// Using a parser after `finish` is the host's mistake.
fn finished() -> Error {
    Error::Refused {
        kind: crate::error::ErrorKind::Finished,
        detail: "the stream parser is finished".into(),
    }
}

fn parser(
    inner: &mut Option<providers::StreamParser>,
) -> Result<&mut providers::StreamParser, Error> {
    inner.as_mut().ok_or_else(finished)
}

/// The request fields as JSON text, written from the borrowed specs.
pub(crate) fn write_request_tools(
    provider: providers::Provider,
    request: &providers::ToolRequest<'_>,
) -> String {
    let mut text = Vec::new();
    providers::write_request_tools(provider, request, &mut text);
    String::from_utf8(text).expect("serde_json writes UTF-8")
}

/// Specs checked as the providers need them (a valid name, an object schema).
fn specs(specs: Vec<ToolSpec>) -> Result<Vec<deskwire::tools::ToolSpec>> {
    specs
        .into_iter()
        .map(|s| {
            let spec = deskwire::tools::ToolSpec::try_from(s)?;
            api(|| deskwire::tools::ToolSpec::new(spec.name, spec.description, spec.input_schema))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Conversions

impl From<providers::Limits> for ProviderLimits {
    fn from(l: providers::Limits) -> Self {
        ProviderLimits {
            max_bytes: l.max_bytes as u64,
            max_items: l.max_items as u64,
        }
    }
}

impl From<ProviderLimits> for providers::Limits {
    fn from(l: ProviderLimits) -> Self {
        providers::Limits {
            max_bytes: crate::to_usize(l.max_bytes),
            max_items: crate::to_usize(l.max_items),
        }
    }
}

impl From<providers::Segment> for ResponseSegment {
    fn from(s: providers::Segment) -> Self {
        match s {
            providers::Segment::Text { text } => ResponseSegment::Text { text },
            providers::Segment::ToolCall { tool_call } => ResponseSegment::ToolCall {
                call: tool_call.into(),
            },
            providers::Segment::InvalidToolCall { invalid_tool_call } => {
                ResponseSegment::InvalidToolCall {
                    call: invalid_tool_call,
                }
            }
            providers::Segment::Reasoning { raw } => ResponseSegment::Reasoning {
                raw_json: raw.to_string(),
            },
            other => unmapped!(other),
        }
    }
}

impl TryFrom<ResponseSegment> for providers::Segment {
    type Error = crate::DeskwireError;

    fn try_from(s: ResponseSegment) -> Result<Self> {
        Ok(match s {
            ResponseSegment::Text { text } => providers::Segment::Text { text },
            ResponseSegment::ToolCall { call } => providers::Segment::ToolCall {
                tool_call: call.try_into()?,
            },
            ResponseSegment::InvalidToolCall { call } => providers::Segment::InvalidToolCall {
                invalid_tool_call: call,
            },
            ResponseSegment::Reasoning { raw_json } => providers::Segment::Reasoning {
                raw: api(|| serde_json::from_str(&raw_json))?,
            },
        })
    }
}

impl From<providers::ProviderResponse> for ProviderResponse {
    fn from(r: providers::ProviderResponse) -> Self {
        ProviderResponse {
            segments: r.segments.into_iter().map(Into::into).collect(),
            stop_reason: r.stop_reason,
        }
    }
}

impl TryFrom<ProviderResponse> for providers::ProviderResponse {
    type Error = crate::DeskwireError;

    fn try_from(r: ProviderResponse) -> Result<Self> {
        Ok(providers::ProviderResponse {
            segments: r
                .segments
                .into_iter()
                .map(TryInto::try_into)
                .collect::<Result<_>>()?,
            stop_reason: r.stop_reason,
        })
    }
}
