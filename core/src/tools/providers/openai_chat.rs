//! OpenAI Chat Completions: `tools[].function`, `tool_choice`, `parallel_tool_calls`;
//! `choices[0].message.tool_calls` with JSON-string `arguments`; streamed `delta.tool_calls`
//! concatenated by `index`; results as `{"role":"tool","tool_call_id",...}` messages.
//!
//! Gating: Chat Completions can only gate by leaving tools out, so only the visible tools are
//! sent (the catalog is ignored).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::{
    Budget, Limits, ParseError, ProviderResponse, Segment, SeqOf, ToolChoice, ToolRequest,
    call_segment, error_body, parse_json, str_field, to_map,
};
use crate::ids::IdGenerator;
use crate::tools::spec::{ToolResult, ToolSpec};

/// Whether OpenAI accepts `strict: true` for this schema: every object lists all its
/// properties in `required` and has `additionalProperties: false`.
pub fn strict_compatible(schema: &Value) -> bool {
    match schema {
        Value::Object(o) => {
            if o.get("type").and_then(Value::as_str) == Some("object")
                || o.contains_key("properties")
            {
                if o.get("additionalProperties") != Some(&Value::Bool(false)) {
                    return false;
                }
                let props = o.get("properties").and_then(Value::as_object);
                let required: Vec<&str> = o
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if props.is_some_and(|p| p.keys().any(|k| !required.contains(&k.as_str()))) {
                    return false;
                }
            }
            o.iter()
                .filter(|(k, _)| *k != "enum" && *k != "const" && *k != "default")
                .all(|(_, v)| strict_compatible(v))
        }
        Value::Array(items) => items.iter().all(strict_compatible),
        _ => true,
    }
}

/// One `tools[]` entry, serialized from the borrowed spec (no copy of the schema).
struct Function<'a> {
    spec: &'a ToolSpec,
    strict: bool,
}

impl Serialize for Function<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Body<'a>(&'a Function<'a>);
        impl Serialize for Body<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let spec = self.0.spec;
                let mut m = s.serialize_map(None)?;
                m.serialize_entry("name", &spec.name)?;
                m.serialize_entry("description", &spec.description)?;
                m.serialize_entry("parameters", &spec.input_schema)?;
                if self.0.strict && strict_compatible(&spec.input_schema) {
                    m.serialize_entry("strict", &true)?;
                }
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("function", &Body(self))?;
        m.end()
    }
}

/// The forced tool when it is offered; a hidden one cannot be forced, so nothing is called.
pub(crate) fn effective_choice<'c>(request: &'c ToolRequest<'_>) -> &'c ToolChoice {
    match &request.choice {
        ToolChoice::Tool(name) if !request.tools.iter().any(|t| &t.name == name) => {
            &ToolChoice::None
        }
        c => c,
    }
}

/// The request fields of [`request_tools`], serializable without copying the schemas.
pub struct Fields<'r, 'a>(pub &'r ToolRequest<'a>);

impl Serialize for Fields<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let request = self.0;
        let mut m = s.serialize_map(None)?;
        if request.tools.is_empty() {
            return m.end();
        }
        let tools = request.tools.iter().map(|spec| Function {
            spec,
            strict: request.strict,
        });
        m.serialize_entry("tools", &SeqOf(tools))?;
        let choice = match effective_choice(request) {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
        m.serialize_entry("tool_choice", &choice)?;
        if let Some(p) = request.parallel_tool_calls {
            m.serialize_entry("parallel_tool_calls", &p)?;
        }
        m.end()
    }
}

/// `tools`, `tool_choice` and `parallel_tool_calls` (nothing at all without tools: OpenAI
/// refuses `tool_choice` and `parallel_tool_calls` alone).
pub fn request_tools(request: &ToolRequest<'_>) -> Map<String, Value> {
    to_map(&Fields(request))
}

/// Message `content`: a string, null, or an array of `{"type":"text","text"}` parts.
fn push_content(response: &mut ProviderResponse, content: Option<&Value>) {
    match content {
        Some(Value::String(s)) => response.push_text(s),
        Some(Value::Array(parts)) => {
            for p in parts {
                if let Some(t) = str_field(p, "text") {
                    response.push_text(t);
                }
            }
        }
        _ => {}
    }
}

/// The arguments as text: a string as is, anything else (some compatible servers send an
/// object) as JSON.
fn arguments_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// A whole response body (`{"choices": [{"message": ..., "finish_reason": ...}]}`).
pub fn parse_response(body: &[u8]) -> Result<ProviderResponse, ParseError> {
    let v = parse_json(body)?;
    if let Some(e) = error_body(&v) {
        return Err(e);
    }
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| ParseError::Shape("no choices[0]".into()))?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| ParseError::Shape("no choices[0].message".into()))?;
    let mut response = ProviderResponse {
        stop_reason: str_field(choice, "finish_reason").map(str::to_owned),
        ..ProviderResponse::default()
    };
    push_content(&mut response, message.get("content"));
    if let Some(r) = str_field(message, "refusal") {
        response.push_text(r);
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let f = call.get("function").unwrap_or(&Value::Null);
        response.segments.push(call_segment(
            str_field(call, "id").unwrap_or_default().to_owned(),
            str_field(f, "name").unwrap_or_default().to_owned(),
            &arguments_text(f.get("arguments")),
            None,
        ));
    }
    Ok(response)
}

#[derive(Debug, Default)]
struct Partial {
    id: Option<String>,
    name: String,
    arguments: String,
}

#[derive(Debug)]
enum Slot {
    Text(String),
    Call(u64),
}

/// Assembles `chat.completion.chunk`s: text deltas, and `tool_calls` deltas concatenated by
/// `index` (the id and name come with a call's first delta; later ones carry argument
/// fragments). Segments keep the order in which each first appeared.
#[derive(Debug)]
pub struct StreamAssembler {
    limits: Limits,
    budget: Budget,
    slots: Vec<Slot>,
    calls: BTreeMap<u64, Partial>,
    stop_reason: Option<String>,
    ids: IdGenerator,
}

impl StreamAssembler {
    /// An empty assembler; `seed` makes ids for calls that arrive without one.
    pub fn new(limits: Limits, seed: u64) -> StreamAssembler {
        StreamAssembler {
            limits,
            budget: Budget::default(),
            slots: Vec::new(),
            calls: BTreeMap::new(),
            stop_reason: None,
            ids: IdGenerator::new(seed),
        }
    }

    /// One chunk (an SSE event's `data`).
    pub fn push(&mut self, data: &[u8]) -> Result<(), ParseError> {
        let v = parse_json(data)?;
        if let Some(e) = error_body(&v) {
            return Err(e);
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(()); // the usage chunk has no choices
        };
        if let Some(r) = str_field(choice, "finish_reason") {
            self.stop_reason = Some(r.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(());
        };
        for key in ["content", "refusal"] {
            if let Some(text) = str_field(delta, key).filter(|t| !t.is_empty()) {
                self.budget.take(&self.limits, text.len())?;
                match self.slots.last_mut() {
                    Some(Slot::Text(t)) => t.push_str(text),
                    _ => self.slots.push(Slot::Text(text.to_owned())),
                }
            }
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .ok_or_else(|| ParseError::Shape("tool_calls delta without index".into()))?;
            if !self.calls.contains_key(&index) {
                if self.calls.len() >= self.limits.max_items {
                    return Err(ParseError::TooLarge("tool calls"));
                }
                self.slots.push(Slot::Call(index));
            }
            let partial = self.calls.entry(index).or_default();
            if let Some(id) = str_field(call, "id").filter(|s| !s.is_empty())
                && partial.id.is_none()
            {
                self.budget.take(&self.limits, id.len())?;
                partial.id = Some(id.to_owned());
            }
            let f = call.get("function").unwrap_or(&Value::Null);
            if let Some(name) = str_field(f, "name").filter(|s| !s.is_empty())
                && partial.name.is_empty()
            {
                self.budget.take(&self.limits, name.len())?;
                partial.name = name.to_owned();
            }
            if let Some(fragment) = str_field(f, "arguments") {
                self.budget.take(&self.limits, fragment.len())?;
                partial.arguments.push_str(fragment);
            }
        }
        Ok(())
    }

    /// The assembled response.
    pub fn finish(mut self) -> ProviderResponse {
        let mut response = ProviderResponse {
            stop_reason: self.stop_reason.take(),
            ..ProviderResponse::default()
        };
        for slot in std::mem::take(&mut self.slots) {
            match slot {
                Slot::Text(t) => response.push_text(&t),
                Slot::Call(index) => {
                    let p = self.calls.remove(&index).unwrap_or_default();
                    let (id, generated) = match p.id {
                        Some(id) => (id, false),
                        None => (format!("call_{}", self.ids.next_id()), true),
                    };
                    let mut segment = call_segment(id, p.name, &p.arguments, None);
                    if let Segment::ToolCall { tool_call } = &mut segment {
                        tool_call.id_generated = generated;
                    }
                    response.segments.push(segment);
                }
            }
        }
        response
    }
}

/// The assistant message that echoes `response` into the next request's `messages`.
pub fn assistant_message(response: &ProviderResponse) -> Value {
    let text = response.text();
    let mut calls = Vec::new();
    for s in &response.segments {
        let (id, name, arguments) = match s {
            Segment::ToolCall { tool_call: c } => (&c.id, &c.name, c.args.to_string()),
            Segment::InvalidToolCall {
                invalid_tool_call: c,
            } => (&c.id, &c.name, c.arguments.clone()),
            _ => continue,
        };
        calls.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}));
    }
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    m.insert(
        "content".into(),
        if text.is_empty() {
            Value::Null
        } else {
            Value::String(text)
        },
    );
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(m)
}

/// A `tool` message with a call's result (Chat Completions has no error flag: the text says
/// so).
pub fn tool_message(result: &ToolResult) -> Value {
    json!({"role": "tool", "tool_call_id": result.call_id, "content": result.content})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strictness_is_only_claimed_for_closed_schemas() {
        assert!(strict_compatible(&json!({
            "type":"object","additionalProperties":false,"required":["a"],
            "properties":{"a":{"type":"object","additionalProperties":false,"required":[],"properties":{}}}
        })));
        // RemoteBash's optional timeout_sec: not strict-compatible.
        let rb: Value = serde_json::from_str(crate::oa1::remote_bash::INPUT_SCHEMA).unwrap();
        assert!(!strict_compatible(&rb));
        assert!(!strict_compatible(
            &json!({"type":"object","properties":{}})
        ));
    }
}
