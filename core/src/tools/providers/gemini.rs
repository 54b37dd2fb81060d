//! Google Gemini: `tools[].functionDeclarations` (schemas through [`super::gemini_schema`]),
//! `toolConfig.functionCallingConfig` (`mode`, `allowedFunctionNames`); `functionCall` parts
//! (ids generated when missing, `thoughtSignature` kept to echo); streamed chunks are whole
//! responses whose text parts continue each other; results as `functionResponse` parts whose
//! `name` is recovered from the call.
//!
//! Gating keeps the tool list: with a catalog, every catalog tool is declared and
//! `allowedFunctionNames` names the visible ones. Gemini accepts that list only with mode
//! `ANY` (a call is required) or `VALIDATED` (the model may answer in text), so an `auto`
//! choice under gating becomes `VALIDATED`.

use serde_json::{Map, Value, json};

use super::gemini_schema::Converted;
use super::openai_chat::effective_choice;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::{
    Budget, Limits, ParseError, ProviderResponse, Segment, SeqOf, ToolChoice, ToolRequest,
    call_segment_value, error_body, parse_json, str_field, to_map,
};
use crate::ids::IdGenerator;
use crate::tools::spec::{ToolResult, ToolSpec};

/// One function declaration; the schema is converted while it is written.
struct Declaration<'a>(&'a ToolSpec);

impl Serialize for Declaration<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let spec = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("name", &spec.name)?;
        m.serialize_entry("description", &spec.description)?;
        if let Some(p) = Converted::parameters(&spec.input_schema) {
            m.serialize_entry("parameters", &p)?;
        }
        m.end()
    }
}

/// The request fields of [`request_tools`], serializable without copying the schemas.
pub struct Fields<'r, 'a>(pub &'r ToolRequest<'a>);

impl Serialize for Fields<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Tools<'r, 'a>(&'r [&'a ToolSpec]);
        impl Serialize for Tools<'_, '_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                struct Group<'r, 'a>(&'r [&'a ToolSpec]);
                impl Serialize for Group<'_, '_> {
                    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        let mut m = s.serialize_map(Some(1))?;
                        m.serialize_entry(
                            "functionDeclarations",
                            &SeqOf(self.0.iter().map(|t| Declaration(t))),
                        )?;
                        m.end()
                    }
                }
                s.collect_seq([Group(self.0)])
            }
        }
        let request = self.0;
        let mut m = s.serialize_map(None)?;
        let listed = request.catalog.as_ref().unwrap_or(&request.tools);
        if listed.is_empty() {
            return m.end();
        }
        m.serialize_entry("tools", &Tools(listed))?;
        let gated = request.catalog.is_some();
        let visible: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        let forced: [&str; 1];
        let (mode, allowed): (&str, Option<&[&str]>) = match effective_choice(request) {
            _ if gated && visible.is_empty() => ("NONE", None),
            ToolChoice::None => ("NONE", None),
            ToolChoice::Tool(name) => {
                forced = [name.as_str()];
                ("ANY", Some(&forced[..]))
            }
            ToolChoice::Required => ("ANY", gated.then_some(visible.as_slice())),
            ToolChoice::Auto if gated => ("VALIDATED", Some(visible.as_slice())),
            ToolChoice::Auto => ("AUTO", None),
        };
        let mut config = Map::new();
        config.insert("mode".into(), json!(mode));
        if let Some(names) = allowed {
            config.insert("allowedFunctionNames".into(), json!(names));
        }
        m.serialize_entry("toolConfig", &json!({ "functionCallingConfig": config }))?;
        m.end()
    }
}

/// `tools` and `toolConfig`.
pub fn request_tools(request: &ToolRequest<'_>) -> Map<String, Value> {
    to_map(&Fields(request))
}

/// Adds one `GenerateContentResponse` (a whole body, or one streamed chunk) to `response`.
fn add_chunk(
    response: &mut ProviderResponse,
    v: &Value,
    ids: &mut IdGenerator,
    mut budget: impl FnMut(usize) -> Result<(), ParseError>,
) -> Result<(), ParseError> {
    if let Some(e) = error_body(v) {
        return Err(e);
    }
    let Some(candidate) = v
        .get("candidates")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        if let Some(reason) = v
            .get("promptFeedback")
            .and_then(|f| str_field(f, "blockReason"))
        {
            response.stop_reason = Some(reason.to_owned());
        }
        return Ok(()); // a usage-only chunk
    };
    if let Some(r) = str_field(candidate, "finishReason") {
        response.stop_reason = Some(r.to_owned());
    }
    let parts = candidate
        .get("content")
        .and_then(|c| c.get("parts"))
        .and_then(Value::as_array);
    for part in parts.into_iter().flatten() {
        if let Some(call) = part.get("functionCall") {
            budget(call.to_string().len())?;
            let (id, generated) = match str_field(call, "id").filter(|s| !s.is_empty()) {
                Some(id) => (id.to_owned(), false),
                None => (format!("call_{}", ids.next_id()), true),
            };
            let mut segment = call_segment_value(
                id,
                str_field(call, "name").unwrap_or_default().to_owned(),
                call.get("args"),
            );
            if let Segment::ToolCall { tool_call } = &mut segment {
                tool_call.id_generated = generated;
                tool_call.thought_signature =
                    str_field(part, "thoughtSignature").map(str::to_owned);
            }
            response.segments.push(segment);
        } else if let Some(text) = str_field(part, "text") {
            if part.get("thought") == Some(&Value::Bool(true)) {
                continue; // a thought summary, not an answer
            }
            budget(text.len())?;
            response.push_text(text);
        }
    }
    Ok(())
}

/// A whole response body (`{"candidates": [...]}`), or the JSON array of chunks that
/// `streamGenerateContent` answers without `alt=sse`. `ids` makes the call ids Gemini leaves
/// out.
pub fn parse_response(body: &[u8], ids: &mut IdGenerator) -> Result<ProviderResponse, ParseError> {
    let v = parse_json(body)?;
    let mut response = ProviderResponse::default();
    match &v {
        Value::Array(chunks) => {
            for chunk in chunks {
                add_chunk(&mut response, chunk, ids, |_| Ok(()))?;
            }
        }
        Value::Object(_) => {
            if v.get("candidates").is_none()
                && v.get("promptFeedback").is_none()
                && v.get("error").is_none()
            {
                return Err(ParseError::Shape("no candidates".into()));
            }
            add_chunk(&mut response, &v, ids, |_| Ok(()))?;
        }
        _ => return Err(ParseError::Shape("not an object".into())),
    }
    Ok(response)
}

/// Assembles `streamGenerateContent?alt=sse` chunks.
#[derive(Debug)]
pub struct StreamAssembler {
    limits: Limits,
    budget: Budget,
    response: ProviderResponse,
    ids: IdGenerator,
}

impl StreamAssembler {
    /// An empty assembler; `seed` makes the call ids Gemini leaves out.
    pub fn new(limits: Limits, seed: u64) -> StreamAssembler {
        StreamAssembler {
            limits,
            budget: Budget::default(),
            response: ProviderResponse::default(),
            ids: IdGenerator::new(seed),
        }
    }

    /// One chunk (an SSE event's `data`).
    pub fn push(&mut self, data: &[u8]) -> Result<(), ParseError> {
        let v = parse_json(data)?;
        let limits = self.limits;
        let budget = &mut self.budget;
        add_chunk(&mut self.response, &v, &mut self.ids, |n| {
            budget.take(&limits, n)
        })?;
        if self.response.segments.len() > self.limits.max_items {
            return Err(ParseError::TooLarge("parts"));
        }
        Ok(())
    }

    /// The assembled response.
    pub fn finish(self) -> ProviderResponse {
        self.response
    }
}

/// The `model` content that echoes `response` (with each call's `thoughtSignature`; a
/// generated id is left out, since Gemini never saw it).
pub fn model_content(response: &ProviderResponse) -> Value {
    let mut parts = Vec::new();
    for s in &response.segments {
        match s {
            Segment::Text { text } => parts.push(json!({ "text": text })),
            Segment::ToolCall { tool_call: c } => {
                let mut call = Map::new();
                if !c.id_generated {
                    call.insert("id".into(), json!(c.id));
                }
                call.insert("name".into(), json!(c.name));
                call.insert("args".into(), c.args.clone());
                let mut part = json!({ "functionCall": call });
                if let Some(sig) = &c.thought_signature {
                    part["thoughtSignature"] = json!(sig);
                }
                parts.push(part);
            }
            Segment::InvalidToolCall {
                invalid_tool_call: c,
            } => parts.push(json!({"functionCall": {"name": c.name, "args": {}}})),
            _ => {} // reasoning of other providers: Gemini keeps its own in thoughtSignature
        }
    }
    json!({"role": "model", "parts": parts})
}

/// A result names a call the previous turn did not make.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no call {0:?} in the previous model turn")]
pub struct UnknownCall(pub String);

/// One `user` content with a `functionResponse` per result. Gemini wants the function's
/// `name`, which a result does not carry: it is recovered from the call with the same id in
/// `previous` (the model turn being answered). A success is `response: {name, content}`; an
/// error `response: {name, error}` (Gemini reads an `error` key as the function's error).
pub fn function_responses(
    previous: &ProviderResponse,
    results: &[ToolResult],
) -> Result<Value, UnknownCall> {
    let mut parts = Vec::new();
    for r in results {
        let found = previous.segments.iter().find_map(|s| match s {
            Segment::ToolCall { tool_call: c } if c.id == r.call_id => {
                Some((c.name.as_str(), !c.id_generated))
            }
            Segment::InvalidToolCall {
                invalid_tool_call: c,
            } if c.id == r.call_id => Some((c.name.as_str(), false)),
            _ => None,
        });
        let (name, send_id) = found.ok_or_else(|| UnknownCall(r.call_id.clone()))?;
        let key = if r.is_error { "error" } else { "content" };
        let mut f = Map::new();
        if send_id {
            f.insert("id".into(), json!(r.call_id));
        }
        f.insert("name".into(), json!(name));
        f.insert("response".into(), json!({ "name": name, key: r.content }));
        parts.push(json!({ "functionResponse": f }));
    }
    Ok(json!({"role": "user", "parts": parts}))
}
