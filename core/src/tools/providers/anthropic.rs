//! Anthropic Messages: `tools[]` with `input_schema`, `tool_choice` `auto` / `any` / `tool`;
//! `tool_use` content blocks with an object `input`; streamed `content_block_start` →
//! `input_json_delta` fragments → `content_block_stop`; results as `tool_result` blocks with
//! `is_error`, all of one turn in a single user message.
//!
//! Gating by leaving tools out (only the visible tools are sent). A `none` choice drops
//! `tools` altogether, as AI SDK does.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::openai_chat::{effective_choice, strict_compatible};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::{
    Budget, Limits, ParseError, ProviderResponse, Segment, SeqOf, ToolChoice, ToolRequest,
    call_segment, call_segment_value, error_body, parse_json, str_field, to_map,
};
use crate::tools::spec::{ToolResult, ToolSpec};

/// One `tools[]` entry, serialized from the borrowed spec.
struct Tool<'a> {
    spec: &'a ToolSpec,
    strict: bool,
}

impl Serialize for Tool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let spec = self.spec;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("name", &spec.name)?;
        m.serialize_entry("description", &spec.description)?;
        m.serialize_entry("input_schema", &spec.input_schema)?;
        if self.strict && strict_compatible(&spec.input_schema) {
            m.serialize_entry("strict", &true)?;
        }
        m.end()
    }
}

/// The request fields of [`request_tools`], serializable without copying the schemas.
pub struct Fields<'r, 'a>(pub &'r ToolRequest<'a>);

impl Serialize for Fields<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let request = self.0;
        let mut m = s.serialize_map(None)?;
        let choice = effective_choice(request);
        if request.tools.is_empty() || *choice == ToolChoice::None {
            return m.end();
        }
        let tools = request.tools.iter().map(|spec| Tool {
            spec,
            strict: request.strict,
        });
        m.serialize_entry("tools", &SeqOf(tools))?;
        let mut c = match choice {
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
            ToolChoice::Required => json!({"type": "any"}),
            _ => json!({"type": "auto"}),
        };
        if request.parallel_tool_calls == Some(false) {
            c["disable_parallel_tool_use"] = Value::Bool(true);
        }
        m.serialize_entry("tool_choice", &c)?;
        m.end()
    }
}

/// `tools` and `tool_choice` (nothing for no tools or a `none` choice).
pub fn request_tools(request: &ToolRequest<'_>) -> Map<String, Value> {
    to_map(&Fields(request))
}

/// A whole response body (`{"content": [...], "stop_reason": ...}`).
pub fn parse_response(body: &[u8]) -> Result<ProviderResponse, ParseError> {
    let v = parse_json(body)?;
    if let Some(e) = error_body(&v) {
        return Err(e);
    }
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ParseError::Shape("no content array".into()))?;
    let mut response = ProviderResponse {
        stop_reason: str_field(&v, "stop_reason").map(str::to_owned),
        ..ProviderResponse::default()
    };
    for block in content {
        match str_field(block, "type") {
            Some("text") => response.push_text(str_field(block, "text").unwrap_or_default()),
            Some("tool_use") => response.segments.push(call_segment_value(
                str_field(block, "id").unwrap_or_default().to_owned(),
                str_field(block, "name").unwrap_or_default().to_owned(),
                block.get("input"),
            )),
            Some("thinking" | "redacted_thinking") => {
                response
                    .segments
                    .push(Segment::Reasoning { raw: block.clone() });
            }
            _ => {} // server tools: not ours to run
        }
    }
    Ok(response)
}

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        start_input: Value,
        json: String,
    },
    /// A `thinking` block: its start, and the text and signature from the deltas.
    Thinking {
        start: Value,
        thinking: String,
        signature: String,
    },
    /// A block that arrives whole (`redacted_thinking`).
    Whole(Value),
    Other,
}

/// Assembles Messages stream events by content block `index`.
#[derive(Debug)]
pub struct StreamAssembler {
    limits: Limits,
    budget: Budget,
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
}

impl StreamAssembler {
    /// An empty assembler.
    pub fn new(limits: Limits) -> StreamAssembler {
        StreamAssembler {
            limits,
            budget: Budget::default(),
            blocks: BTreeMap::new(),
            stop_reason: None,
        }
    }

    /// One event (an SSE event's `data`; its `type` says which).
    pub fn push(&mut self, data: &[u8]) -> Result<(), ParseError> {
        let v = parse_json(data)?;
        let index = || {
            v.get("index")
                .and_then(Value::as_u64)
                .ok_or_else(|| ParseError::Shape("event without index".into()))
        };
        match str_field(&v, "type").unwrap_or_default() {
            "content_block_start" => {
                let index = index()?;
                if !self.blocks.contains_key(&index) && self.blocks.len() >= self.limits.max_items {
                    return Err(ParseError::TooLarge("content blocks"));
                }
                let b = v.get("content_block").unwrap_or(&Value::Null);
                let block = match str_field(b, "type") {
                    Some("text") => {
                        let t = str_field(b, "text").unwrap_or_default();
                        self.budget.take(&self.limits, t.len())?;
                        Block::Text(t.to_owned())
                    }
                    Some("tool_use") => {
                        let start_input = b.get("input").cloned().unwrap_or(Value::Null);
                        self.budget.take(&self.limits, b.to_string().len())?;
                        Block::ToolUse {
                            id: str_field(b, "id").unwrap_or_default().to_owned(),
                            name: str_field(b, "name").unwrap_or_default().to_owned(),
                            start_input,
                            json: String::new(),
                        }
                    }
                    Some("thinking") => {
                        self.budget.take(&self.limits, b.to_string().len())?;
                        Block::Thinking {
                            start: b.clone(),
                            thinking: str_field(b, "thinking").unwrap_or_default().to_owned(),
                            signature: str_field(b, "signature").unwrap_or_default().to_owned(),
                        }
                    }
                    Some("redacted_thinking") => {
                        self.budget.take(&self.limits, b.to_string().len())?;
                        Block::Whole(b.clone())
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let index = index()?;
                let delta = v.get("delta").unwrap_or(&Value::Null);
                let (kind, text) = match str_field(delta, "type") {
                    Some("text_delta") => ("text", str_field(delta, "text")),
                    Some("input_json_delta") => ("json", str_field(delta, "partial_json")),
                    Some("thinking_delta") => ("thinking", str_field(delta, "thinking")),
                    Some("signature_delta") => ("signature", str_field(delta, "signature")),
                    _ => return Ok(()),
                };
                let text = text.unwrap_or_default();
                self.budget.take(&self.limits, text.len())?;
                match (self.blocks.get_mut(&index), kind) {
                    (Some(Block::Text(t)), "text") => t.push_str(text),
                    (Some(Block::ToolUse { json, .. }), "json") => json.push_str(text),
                    (Some(Block::Thinking { thinking, .. }), "thinking") => {
                        thinking.push_str(text);
                    }
                    (Some(Block::Thinking { signature, .. }), "signature") => {
                        signature.push_str(text);
                    }
                    (None, _) => {
                        return Err(ParseError::Shape(format!(
                            "delta for block {index} before its start"
                        )));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = v.get("delta").and_then(|d| str_field(d, "stop_reason")) {
                    self.stop_reason = Some(r.to_owned());
                }
            }
            "error" => {
                return Err(
                    error_body(&v).unwrap_or_else(|| ParseError::Provider("error event".into()))
                );
            }
            _ => {} // message_start, content_block_stop, message_stop, ping
        }
        Ok(())
    }

    /// The assembled response, blocks in index order. A tool call with no `partial_json`
    /// keeps the start's `input` (`{}`).
    pub fn finish(self) -> ProviderResponse {
        let mut response = ProviderResponse {
            stop_reason: self.stop_reason,
            ..ProviderResponse::default()
        };
        for block in self.blocks.into_values() {
            match block {
                Block::Text(t) => response.push_text(&t),
                Block::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                } => response.segments.push(if json.trim().is_empty() {
                    call_segment_value(id, name, Some(&start_input))
                } else {
                    call_segment(id, name, &json, None)
                }),
                Block::Thinking {
                    mut start,
                    thinking,
                    signature,
                } => {
                    start["thinking"] = Value::String(thinking);
                    start["signature"] = Value::String(signature);
                    response.segments.push(Segment::Reasoning { raw: start });
                }
                Block::Whole(raw) => response.segments.push(Segment::Reasoning { raw }),
                Block::Other => {}
            }
        }
        response
    }
}

/// The assistant message that echoes `response` (`thinking` blocks as received, `text` and
/// `tool_use` blocks; a call with malformed arguments is echoed with `{}`, since `input` must
/// be an object).
pub fn assistant_message(response: &ProviderResponse) -> Value {
    let mut content = Vec::new();
    for s in &response.segments {
        match s {
            Segment::Text { text } => content.push(json!({"type": "text", "text": text})),
            Segment::ToolCall { tool_call: c } => content
                .push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.args})),
            Segment::InvalidToolCall {
                invalid_tool_call: c,
            } => content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": {}})),
            Segment::Reasoning { raw } => content.push(raw.clone()),
        }
    }
    json!({"role": "assistant", "content": content})
}

/// One user message with every result of the turn (`is_error` written only when true).
pub fn tool_results_message(results: &[ToolResult]) -> Value {
    let content: Vec<Value> = results
        .iter()
        .map(|r| {
            let mut b =
                json!({"type": "tool_result", "tool_use_id": r.call_id, "content": r.content});
            if r.is_error {
                b["is_error"] = Value::Bool(true);
            }
            b
        })
        .collect();
    json!({"role": "user", "content": content})
}
