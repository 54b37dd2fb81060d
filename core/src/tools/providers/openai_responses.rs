//! OpenAI Responses: flat `tools[]` (`{"type":"function","name",...}`), `function_call` output
//! items (`call_id` pairs the result, `id` is the item), streamed `output_item.added` →
//! `function_call_arguments.delta` → `output_item.done`; results as `function_call_output`
//! input items.
//!
//! Gating keeps the cache: with a catalog, every catalog tool is sent and `tool_choice`
//! `{"type":"allowed_tools",...}` lists the visible ones, so binding a desk changes only the
//! choice, not the tool list in the prompt prefix.
//!
//! `strict` is always written: the Responses API treats an absent `strict` as true and then
//! refuses schemas with optional properties (AI SDK sends it explicitly for the same reason).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::openai_chat::{effective_choice, strict_compatible};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::{
    Budget, Limits, ParseError, ProviderResponse, Segment, SeqOf, ToolChoice, ToolRequest,
    call_segment, error_body, parse_json, str_field, to_map,
};
use crate::tools::spec::{ToolResult, ToolSpec};

/// One flat `tools[]` entry, serialized from the borrowed spec.
struct Function<'a> {
    spec: &'a ToolSpec,
    strict: bool,
}

impl Serialize for Function<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let spec = self.spec;
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("name", &spec.name)?;
        m.serialize_entry("description", &spec.description)?;
        m.serialize_entry("parameters", &spec.input_schema)?;
        m.serialize_entry(
            "strict",
            &(self.strict && strict_compatible(&spec.input_schema)),
        )?;
        m.end()
    }
}

/// `tool_choice`: a plain value, or `allowed_tools` written from the borrowed visible list.
enum Choice<'r, 'a> {
    Plain(Value),
    Allowed {
        mode: &'static str,
        tools: &'r [&'a ToolSpec],
    },
}

impl Serialize for Choice<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Named<'a>(&'a str);
        impl Serialize for Named<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "function")?;
                m.serialize_entry("name", self.0)?;
                m.end()
            }
        }
        match self {
            Choice::Plain(v) => v.serialize(s),
            Choice::Allowed { mode, tools } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("type", "allowed_tools")?;
                m.serialize_entry("mode", mode)?;
                m.serialize_entry("tools", &SeqOf(tools.iter().map(|t| Named(&t.name))))?;
                m.end()
            }
        }
    }
}

/// The request fields of [`request_tools`], serializable without copying the schemas.
pub struct Fields<'r, 'a>(pub &'r ToolRequest<'a>);

impl Serialize for Fields<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let request = self.0;
        let mut m = s.serialize_map(None)?;
        let listed = request.catalog.as_ref().unwrap_or(&request.tools);
        if listed.is_empty() {
            return m.end();
        }
        let tools = listed.iter().map(|spec| Function {
            spec,
            strict: request.strict,
        });
        m.serialize_entry("tools", &SeqOf(tools))?;
        let gated = request.catalog.is_some();
        let allowed = |mode| Choice::Allowed {
            mode,
            tools: &request.tools,
        };
        let choice = match effective_choice(request) {
            _ if gated && request.tools.is_empty() => Choice::Plain(json!("none")),
            ToolChoice::Auto if gated => allowed("auto"),
            ToolChoice::Required if gated => allowed("required"),
            ToolChoice::Auto => Choice::Plain(json!("auto")),
            ToolChoice::Required => Choice::Plain(json!("required")),
            ToolChoice::None => Choice::Plain(json!("none")),
            ToolChoice::Tool(name) => Choice::Plain(json!({"type": "function", "name": name})),
        };
        m.serialize_entry("tool_choice", &choice)?;
        if let Some(p) = request.parallel_tool_calls {
            m.serialize_entry("parallel_tool_calls", &p)?;
        }
        m.end()
    }
}

/// `tools`, `tool_choice` and `parallel_tool_calls`.
pub fn request_tools(request: &ToolRequest<'_>) -> Map<String, Value> {
    to_map(&Fields(request))
}

fn arguments_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The text of a `message` item's content parts (`output_text`, `refusal`).
fn message_text(item: &Value) -> String {
    let mut text = String::new();
    for part in item
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = str_field(part, "text").or_else(|| str_field(part, "refusal")) {
            text.push_str(t);
        }
    }
    text
}

fn function_call(item: &Value) -> Segment {
    call_segment(
        str_field(item, "call_id").unwrap_or_default().to_owned(),
        str_field(item, "name").unwrap_or_default().to_owned(),
        &arguments_text(item.get("arguments")),
        str_field(item, "id").map(str::to_owned),
    )
}

fn stop_reason(response: &Value) -> Option<String> {
    response
        .get("incomplete_details")
        .and_then(|d| str_field(d, "reason"))
        .or_else(|| str_field(response, "status"))
        .map(str::to_owned)
}

/// A whole response body (`{"output": [...], "status": ...}`).
pub fn parse_response(body: &[u8]) -> Result<ProviderResponse, ParseError> {
    let v = parse_json(body)?;
    if let Some(e) = error_body(&v) {
        return Err(e);
    }
    let output = v
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| ParseError::Shape("no output array".into()))?;
    let mut response = ProviderResponse {
        stop_reason: stop_reason(&v),
        ..ProviderResponse::default()
    };
    for item in output {
        match str_field(item, "type") {
            Some("message") => response.push_text(&message_text(item)),
            Some("function_call") => response.segments.push(function_call(item)),
            Some("reasoning") => response
                .segments
                .push(Segment::Reasoning { raw: item.clone() }),
            _ => {} // built-in tool calls: not ours to run
        }
    }
    Ok(response)
}

#[derive(Debug)]
enum Item {
    Text(String),
    Call {
        item_id: Option<String>,
        call_id: String,
        name: String,
        arguments: String,
    },
    /// A `reasoning` item, whole (from `output_item.done`).
    Reasoning(Value),
    Other,
}

/// Assembles Responses stream events by `output_index`.
#[derive(Debug)]
pub struct StreamAssembler {
    limits: Limits,
    budget: Budget,
    items: BTreeMap<u64, Item>,
    stop_reason: Option<String>,
}

impl StreamAssembler {
    /// An empty assembler.
    pub fn new(limits: Limits) -> StreamAssembler {
        StreamAssembler {
            limits,
            budget: Budget::default(),
            items: BTreeMap::new(),
            stop_reason: None,
        }
    }

    fn slot(&mut self, index: u64, make: impl FnOnce() -> Item) -> Result<&mut Item, ParseError> {
        if !self.items.contains_key(&index) && self.items.len() >= self.limits.max_items {
            return Err(ParseError::TooLarge("output items"));
        }
        Ok(self.items.entry(index).or_insert_with(make))
    }

    fn item_from(&mut self, item: &Value) -> Result<Item, ParseError> {
        Ok(match str_field(item, "type") {
            Some("message") => {
                let text = message_text(item);
                self.budget.take(&self.limits, text.len())?;
                Item::Text(text)
            }
            Some("function_call") => {
                let arguments = arguments_text(item.get("arguments"));
                let call_id = str_field(item, "call_id").unwrap_or_default().to_owned();
                let name = str_field(item, "name").unwrap_or_default().to_owned();
                self.budget
                    .take(&self.limits, arguments.len() + call_id.len() + name.len())?;
                Item::Call {
                    item_id: str_field(item, "id").map(str::to_owned),
                    call_id,
                    name,
                    arguments,
                }
            }
            Some("reasoning") => {
                self.budget.take(&self.limits, item.to_string().len())?;
                Item::Reasoning(item.clone())
            }
            _ => Item::Other,
        })
    }

    /// One event (an SSE event's `data`; its `type` says which).
    pub fn push(&mut self, data: &[u8]) -> Result<(), ParseError> {
        let v = parse_json(data)?;
        let index = || {
            v.get("output_index")
                .and_then(Value::as_u64)
                .ok_or_else(|| ParseError::Shape("event without output_index".into()))
        };
        match str_field(&v, "type").unwrap_or_default() {
            "response.output_item.added" | "response.output_item.done" => {
                let index = index()?;
                let item = v.get("item").unwrap_or(&Value::Null);
                let new = self.item_from(item)?;
                let slot = self.slot(index, || Item::Other)?;
                // `done` carries the whole item. Deltas may have come first (or `added` late):
                // keep the longer text and fill in missing names and ids, never losing any.
                match (slot, new) {
                    (
                        Item::Call {
                            item_id,
                            call_id,
                            name,
                            arguments,
                        },
                        Item::Call {
                            item_id: i,
                            call_id: c,
                            name: n,
                            arguments: a,
                        },
                    ) => {
                        if i.is_some() {
                            *item_id = i;
                        }
                        if !c.is_empty() {
                            *call_id = c;
                        }
                        if !n.is_empty() {
                            *name = n;
                        }
                        if a.len() >= arguments.len() {
                            *arguments = a;
                        }
                    }
                    (Item::Text(t), Item::Text(n)) => {
                        if n.len() >= t.len() {
                            *t = n;
                        }
                    }
                    (slot, new) => *slot = new,
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let index = index()?;
                let delta = str_field(&v, "delta").unwrap_or_default().to_owned();
                self.budget.take(&self.limits, delta.len())?;
                if let Item::Text(t) = self.slot(index, || Item::Text(String::new()))? {
                    t.push_str(&delta);
                }
            }
            "response.function_call_arguments.delta" => {
                let index = index()?;
                let delta = str_field(&v, "delta").unwrap_or_default().to_owned();
                self.budget.take(&self.limits, delta.len())?;
                let item_id = str_field(&v, "item_id").map(str::to_owned);
                let slot = self.slot(index, || Item::Call {
                    item_id,
                    call_id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                })?;
                if let Item::Call { arguments, .. } = slot {
                    arguments.push_str(&delta);
                }
            }
            "response.function_call_arguments.done" => {
                let index = index()?;
                if let Some(full) = str_field(&v, "arguments") {
                    let full = full.to_owned();
                    self.budget.take(&self.limits, full.len())?;
                    if let Some(Item::Call { arguments, .. }) = self.items.get_mut(&index) {
                        *arguments = full;
                    }
                }
            }
            "response.completed" | "response.incomplete" => {
                self.stop_reason = v.get("response").and_then(stop_reason);
            }
            "response.failed" => {
                let message = v
                    .get("response")
                    .and_then(|r| r.get("error"))
                    .and_then(|e| str_field(e, "message"))
                    .unwrap_or("response failed");
                return Err(ParseError::Provider(message.to_owned()));
            }
            "error" => {
                let message = str_field(&v, "message")
                    .map(str::to_owned)
                    .or_else(|| error_body(&v).map(|e| e.to_string()))
                    .unwrap_or_else(|| "error event".into());
                return Err(ParseError::Provider(message));
            }
            _ => {}
        }
        Ok(())
    }

    /// The assembled response, items in `output_index` order.
    pub fn finish(self) -> ProviderResponse {
        let mut response = ProviderResponse {
            stop_reason: self.stop_reason,
            ..ProviderResponse::default()
        };
        for item in self.items.into_values() {
            match item {
                Item::Text(t) => response.push_text(&t),
                Item::Call {
                    item_id,
                    call_id,
                    name,
                    arguments,
                } => response
                    .segments
                    .push(call_segment(call_id, name, &arguments, item_id)),
                Item::Reasoning(raw) => response.segments.push(Segment::Reasoning { raw }),
                Item::Other => {}
            }
        }
        response
    }
}

/// The input items that echo `response` into the next request (`reasoning` items as
/// received, `message` for text, `function_call` for each call), to be followed by
/// [`function_call_output`]s.
pub fn input_items(response: &ProviderResponse) -> Vec<Value> {
    let mut items = Vec::new();
    for s in &response.segments {
        match s {
            Segment::Text { text } => items.push(json!({
                "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]
            })),
            Segment::ToolCall { tool_call: c } => {
                items.push(call_item(&c.item_id, &c.id, &c.name, c.args.to_string()));
            }
            Segment::InvalidToolCall {
                invalid_tool_call: c,
            } => items.push(call_item(&c.item_id, &c.id, &c.name, c.arguments.clone())),
            Segment::Reasoning { raw } => items.push(raw.clone()),
        }
    }
    items
}

fn call_item(item_id: &Option<String>, call_id: &str, name: &str, arguments: String) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), json!("function_call"));
    if let Some(id) = item_id {
        m.insert("id".into(), json!(id));
    }
    m.insert("call_id".into(), json!(call_id));
    m.insert("name".into(), json!(name));
    m.insert("arguments".into(), json!(arguments));
    Value::Object(m)
}

/// A `function_call_output` input item (no error flag in this API: the text says so).
pub fn function_call_output(result: &ToolResult) -> Value {
    json!({"type": "function_call_output", "call_id": result.call_id, "output": result.content})
}
