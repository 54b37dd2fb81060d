//! What a tool is ([`ToolSpec`]), what a call of it is ([`ToolCall`]) and what goes back to
//! the model ([`ToolResult`]), independent of any LLM provider.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Longest tool name: 64 characters is the smallest provider limit (OpenAI, Gemini).
pub const MAX_NAME_LEN: usize = 64;

/// One tool as the model sees it: a name, a description that teaches the model when and how to
/// call it, and a JSON Schema (draft 2020-12 subset) for its arguments, whose root is an object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls (see [`check_name`]).
    pub name: String,
    /// What the tool does and how to use it well.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
}

/// Why a [`ToolSpec`] was refused. JSON: externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SpecError {
    /// The name is empty, too long, or has characters some provider refuses.
    #[error(
        "invalid tool name {0:?}: 1 to 64 of A-Z a-z 0-9 _ -, starting with a letter or underscore"
    )]
    InvalidName(String),
    /// The input schema's root is not `{"type": "object", ...}`.
    #[error("the input schema of {0:?} must be a JSON object with \"type\": \"object\"")]
    SchemaNotObject(String),
    /// The schema text is not JSON.
    #[error("the input schema of {name:?} is not JSON: {message}")]
    SchemaNotJson {
        /// The tool.
        name: String,
        /// The parser's message.
        message: String,
    },
}

/// Checks a tool name against the rules every provider accepts: OpenAI `^[a-zA-Z0-9_-]{1,64}$`,
/// Anthropic the same, Gemini additionally wants a letter or `_` first.
pub fn check_name(name: &str) -> Result<(), SpecError> {
    let bytes = name.as_bytes();
    let first_ok = bytes
        .first()
        .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_');
    let rest_ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-');
    if first_ok && rest_ok && bytes.len() <= MAX_NAME_LEN {
        Ok(())
    } else {
        Err(SpecError::InvalidName(name.to_owned()))
    }
}

impl ToolSpec {
    /// A checked spec: a valid name and an object schema.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Result<ToolSpec, SpecError> {
        let spec = ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema,
        };
        spec.check()?;
        Ok(spec)
    }

    /// Checks what [`ToolSpec::new`] checks, for a spec made otherwise (read from JSON): a
    /// valid name and a schema whose root is `{"type": "object", ...}`.
    pub fn check(&self) -> Result<(), SpecError> {
        check_name(&self.name)?;
        if self.input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(SpecError::SchemaNotObject(self.name.clone()));
        }
        Ok(())
    }

    /// A checked spec whose schema is JSON text.
    pub fn from_schema_text(
        name: impl Into<String>,
        description: impl Into<String>,
        schema: &str,
    ) -> Result<ToolSpec, SpecError> {
        let name = name.into();
        let input_schema = serde_json::from_str(schema).map_err(|e| SpecError::SchemaNotJson {
            name: name.clone(),
            message: e.to_string(),
        })?;
        ToolSpec::new(name, description, input_schema)
    }

    /// The schema's `properties` (empty when there are none).
    pub fn properties(&self) -> Option<&Map<String, Value>> {
        self.input_schema
            .get("properties")
            .and_then(Value::as_object)
    }

    /// The schema's `required` names, in their order.
    pub fn required(&self) -> impl Iterator<Item = &str> {
        self.input_schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }

    /// Checks the arguments of a call against the schema's top level: an object, with every
    /// `required` property, each known property of its declared JSON type, and no unknown one
    /// when the schema says `additionalProperties: false`. Nested schemas
    /// are the tool's business; this catches what models get wrong most (a missing or
    /// mistyped argument) before anything runs.
    pub fn check_args(&self, args: &Value) -> Result<(), String> {
        let Some(obj) = args.as_object() else {
            return Err(format!(
                "the arguments of {} must be a JSON object",
                self.name
            ));
        };
        let missing: Vec<&str> = self.required().filter(|r| !obj.contains_key(*r)).collect();
        if !missing.is_empty() {
            return Err(format!(
                "{} is missing required argument(s): {}",
                self.name,
                missing.join(", ")
            ));
        }
        let closed = self.input_schema.get("additionalProperties") == Some(&Value::Bool(false));
        if let Some(props) = self.properties() {
            for (key, value) in obj {
                let Some(prop) = props.get(key) else {
                    if closed {
                        return Err(format!("{} has no argument {key}", self.name));
                    }
                    continue;
                };
                if !type_matches(prop.get("type"), value) {
                    return Err(format!(
                        "argument {key} of {} must be of type {}",
                        self.name,
                        prop.get("type").map(Value::to_string).unwrap_or_default()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Whether `value` has one of the JSON Schema `type`s (absent: anything goes).
fn type_matches(ty: Option<&Value>, value: &Value) -> bool {
    fn one(ty: &str, value: &Value) -> bool {
        match ty {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "null" => value.is_null(),
            _ => true,
        }
    }
    match ty {
        None => true,
        Some(Value::String(t)) => one(t, value),
        Some(Value::Array(ts)) => ts.iter().any(|t| t.as_str().is_none_or(|t| one(t, value))),
        Some(_) => true,
    }
}

/// A call of a tool, from a model or from a slash command.
///
/// `id` pairs the call with its result. `args` is the arguments object. The two optional
/// fields carry what a provider needs echoed back on the next turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The call id (the provider's, or a generated one when it gave none).
    pub id: String,
    /// The tool's name as the model wrote it (maybe not a registered tool).
    pub name: String,
    /// The arguments object.
    pub args: Value,
    /// The provider's item id when it differs from the call id (OpenAI Responses `fc_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    /// Gemini's `thoughtSignature` of the part, to echo back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// The provider sent no id and `id` was generated: echoes leave it out (Gemini).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub id_generated: bool,
}

impl ToolCall {
    /// A call with an id, a name and arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, args: Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            args,
            item_id: None,
            thought_signature: None,
            id_generated: false,
        }
    }

    /// What an approval prompt shows and what policy patterns match: the `command` argument
    /// of a shell tool, else the `path`, else the arguments as compact JSON.
    pub fn subject(&self) -> String {
        for key in ["command", "path", "pattern"] {
            if let Some(s) = self.args.get(key).and_then(Value::as_str) {
                return s.to_owned();
            }
        }
        self.args.to_string()
    }
}

/// The outcome of a tool call, going back to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ToolResult {
    /// The call it answers.
    pub call_id: String,
    /// The text the model reads.
    pub content: String,
    /// The call failed (or was refused): the model should see it as an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "uniffi", uniffi(default = false))]
    pub is_error: bool,
}

impl ToolResult {
    /// A successful result.
    pub fn ok(call_id: impl Into<String>, content: impl Into<String>) -> ToolResult {
        ToolResult {
            call_id: call_id.into(),
            content: content.into(),
            is_error: false,
        }
    }

    /// An error result (also what refusals and unknown-tool observations become).
    pub fn error(call_id: impl Into<String>, content: impl Into<String>) -> ToolResult {
        ToolResult {
            call_id: call_id.into(),
            content: content.into(),
            is_error: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_the_strictest_provider() {
        for ok in ["RemoteBash", "read", "_x", "a-b_c9", &"a".repeat(64)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "9lives", "-x", "a.b", "a b", "é", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn schema_root_must_be_an_object() {
        assert!(ToolSpec::new("t", "", json!({"type": "object"})).is_ok());
        assert_eq!(
            ToolSpec::new("t", "", json!({"type": "string"})),
            Err(SpecError::SchemaNotObject("t".into()))
        );
        assert!(matches!(
            ToolSpec::from_schema_text("t", "", "{"),
            Err(SpecError::SchemaNotJson { .. })
        ));
    }

    #[test]
    fn args_are_checked_at_the_top_level() {
        let spec = ToolSpec::new(
            "read",
            "",
            json!({"type":"object","properties":{"path":{"type":"string"},"n":{"type":["integer","null"]}},"required":["path"]}),
        )
        .unwrap();
        assert!(spec.check_args(&json!({"path": "a"})).is_ok());
        assert!(spec.check_args(&json!({"path": "a", "n": null})).is_ok());
        assert!(spec.check_args(&json!({"path": "a", "extra": 1})).is_ok());
        let e = spec.check_args(&json!({})).unwrap_err();
        assert!(e.contains("missing required argument(s): path"), "{e}");
        assert!(spec.check_args(&json!({"path": 1})).is_err());
        assert!(spec.check_args(&json!({"path": "a", "n": 1.5})).is_err());
        assert!(spec.check_args(&json!(["a"])).is_err());
        let closed = ToolSpec::new(
            "stat",
            "",
            json!({"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}),
        )
        .unwrap();
        assert!(closed.check_args(&json!({"path": "a"})).is_ok());
        assert_eq!(
            closed.check_args(&json!({"path": "a", "pth": "b"})),
            Err("stat has no argument pth".into())
        );
    }

    #[test]
    fn subject_prefers_the_command() {
        let c = ToolCall::new("1", "bash", json!({"command": "ls", "path": "/x"}));
        assert_eq!(c.subject(), "ls");
        let c = ToolCall::new("1", "read", json!({"path": "/x"}));
        assert_eq!(c.subject(), "/x");
        let c = ToolCall::new("1", "t", json!({"a": 1}));
        assert_eq!(c.subject(), r#"{"a":1}"#);
    }
}
