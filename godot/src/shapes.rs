//! Core values ↔ JSON values, engine-free, so every conversion is unit-tested without Godot.
//!
//! Each function here reaches a core value through the core's own serde shapes and provider
//! translation (`deskwire::tools::providers`); [`crate::variant`] then turns the JSON into
//! Dictionaries and Arrays. Nothing here decides a protocol question: which tools an agent sees,
//! how a call is read or whether it may run is the core's.

use deskwire::ids::IdGenerator;
use deskwire::oa1::remote_bash::{self, RemoteBashArgs};
use deskwire::oa1::{ConfigError, ConnectionConfig, Event};
use deskwire::reconnect::ReconnectPolicy;
use deskwire::tools::providers::{self, Provider, Segment, ToolRequest};
use deskwire::tools::slash::SlashError;
use deskwire::tools::{Authorization, Context, Origin, Policy, ToolCall, ToolResult, ToolSpec};
use serde_json::{Map, Value, json};

/// The JSON dialect a tool list or a tool call is written in: one of the core's providers, or
/// deskwire's own shapes (`ToolSpec`, `ToolCall` as serde writes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// An LLM API's shapes.
    Provider(Provider),
    /// `{"name","description","input_schema"}` tools and `{"id","name","args"}` calls.
    Deskwire,
}

/// Why a value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShapeError {
    /// Not a format name.
    #[error(
        "unknown tool format {0:?} (openai_chat, openai_responses, anthropic, gemini or deskwire)"
    )]
    UnknownFormat(String),
    /// The value is not one tool call of the format.
    #[error("not a tool call in the {format} format: {message}")]
    NotAToolCall {
        /// The format's name.
        format: &'static str,
        /// What is wrong.
        message: String,
    },
}

impl Format {
    /// The default: OpenAI Chat Completions, what most agent runtimes send.
    pub const DEFAULT: Format = Format::Provider(Provider::OpenAiChat);

    /// `openai_chat`, `openai_responses`, `anthropic`, `gemini` or `deskwire`.
    pub fn from_name(name: &str) -> Result<Format, ShapeError> {
        match name {
            "deskwire" => Ok(Format::Deskwire),
            _ => Provider::from_name(name)
                .map(Format::Provider)
                .ok_or_else(|| ShapeError::UnknownFormat(name.to_owned())),
        }
    }

    /// The name [`from_name`](Format::from_name) reads.
    pub fn name(self) -> &'static str {
        match self {
            Format::Provider(p) => p.name(),
            Format::Deskwire => "deskwire",
        }
    }
}

/// The tool definitions of `tools` as the format's `tools` array (for Gemini the one
/// `{"functionDeclarations": [...]}` entry it wants). Empty when there are no tools.
pub fn tool_list(format: Format, tools: Vec<&ToolSpec>) -> Vec<Value> {
    match format {
        Format::Deskwire => tools
            .into_iter()
            .map(|t| serde_json::to_value(t).expect("a ToolSpec serializes"))
            .collect(),
        Format::Provider(p) => {
            match providers::request_tools(p, &ToolRequest::new(tools)).remove("tools") {
                Some(Value::Array(list)) => list,
                _ => Vec::new(),
            }
        }
    }
}

/// All tool fields of a provider request (`tools`, `tool_choice`, Gemini's `toolConfig`, ...),
/// to merge into the request body. Deskwire's format has no request: its fields are `tools`.
pub fn request_fields(format: Format, request: &ToolRequest<'_>) -> Map<String, Value> {
    match format {
        Format::Provider(p) => providers::request_tools(p, request),
        Format::Deskwire => {
            let mut m = Map::new();
            m.insert(
                "tools".into(),
                Value::Array(tool_list(format, request.tools.clone())),
            );
            m
        }
    }
}

/// The smallest response body of `provider` that holds the one call `item`: the core's
/// response parser then reads the call, so the binding holds no rule of its own about it.
fn envelope(provider: Provider, item: Value) -> Value {
    match provider {
        Provider::OpenAiChat => json!({"choices": [{"message": {"tool_calls": [item]}}]}),
        Provider::OpenAiResponses => json!({"output": [item]}),
        Provider::Anthropic => json!({"content": [item]}),
        // A part (`{"functionCall": ...}`); a bare FunctionCall object is wrapped first.
        Provider::Gemini => {
            let part = if item.get("functionCall").is_some() {
                item
            } else {
                json!({ "functionCall": item })
            };
            json!({"candidates": [{"content": {"parts": [part]}}]})
        }
    }
}

/// One tool call as the model wrote it in `format` (an OpenAI Chat `tool_calls[i]`, a
/// Responses `function_call` item, an Anthropic `tool_use` block, a Gemini `functionCall`
/// part, or deskwire's `{"id","name","args"}`).
///
/// Arguments that are not a JSON object still give a call (with the raw text as `args`), so
/// that [`deskwire::tools::authorize`] refuses it with an observation the model can read.
/// `ids` names Gemini calls that came without an id.
pub fn tool_call(
    format: Format,
    value: Value,
    ids: &mut IdGenerator,
) -> Result<ToolCall, ShapeError> {
    let not_a_call = |message: String| ShapeError::NotAToolCall {
        format: format.name(),
        message,
    };
    if !value.is_object() {
        return Err(not_a_call("expected a Dictionary".into()));
    }
    let provider = match format {
        Format::Deskwire => {
            return serde_json::from_value(value).map_err(|e| not_a_call(e.to_string()));
        }
        Format::Provider(p) => p,
    };
    let body = envelope(provider, value).to_string();
    let response = providers::parse_response(provider, body.as_bytes(), ids)
        .map_err(|e| not_a_call(e.to_string()))?;
    let mut segments = response.segments.into_iter().filter(|s| {
        matches!(
            s,
            Segment::ToolCall { .. } | Segment::InvalidToolCall { .. }
        )
    });
    let call = match segments.next() {
        Some(Segment::ToolCall { tool_call }) => tool_call,
        Some(Segment::InvalidToolCall {
            invalid_tool_call: c,
        }) => {
            let mut call = ToolCall::new(c.id, c.name, Value::String(c.arguments));
            call.item_id = c.item_id;
            call
        }
        _ => return Err(not_a_call("no tool call in it (wrong format?)".into())),
    };
    if call.name.is_empty() {
        return Err(not_a_call("the call has no tool name".into()));
    }
    Ok(call)
}

/// The verdict of [`deskwire::tools::authorize`] in the core's JSON shape (`{"kind":
/// "allowed"}`, `{"kind": "denied", "reason", "message"?, "observation"}`, `{"kind":
/// "unknown", "observation"}`, `{"kind": "needs_approval", "tier"}`) plus `"allowed"`: whether
/// to run it now, the one thing every caller checks.
pub fn authorization(a: &Authorization) -> Value {
    let mut v = serde_json::to_value(a).expect("an Authorization serializes");
    v["allowed"] = Value::Bool(matches!(a, Authorization::Allowed));
    v
}

/// The verdict for a Dictionary that is not a tool call at all: refused, with `message` for
/// the model, in the same shape (`kind` "unreadable").
pub fn unreadable_call(message: &str) -> Value {
    json!({
        "allowed": false,
        "kind": "unreadable",
        "observation": format!("The tool call could not be read: {message}. It was not run."),
    })
}

/// The message (or input item) that carries `result` back to the model, in `format`:
/// OpenAI Chat `{"role":"tool",...}`, a Responses `function_call_output` item, an Anthropic
/// user message with the `tool_result` block, a Gemini user content with the
/// `functionResponse` part, or deskwire's `ToolResult`.
pub fn tool_message(format: Format, call: &ToolCall, result: &ToolResult) -> Value {
    let provider = match format {
        Format::Deskwire => {
            return serde_json::to_value(result).expect("a ToolResult serializes");
        }
        Format::Provider(provider) => provider,
    };
    // The core's shapes for the results of a turn; the turn here is the one call (Gemini names
    // the function from it).
    let turn = providers::ProviderResponse {
        segments: vec![Segment::ToolCall {
            tool_call: call.clone(),
        }],
        stop_reason: None,
    };
    match providers::tool_results(provider, &turn, std::slice::from_ref(result))
        .expect("the result answers the call it was made for")
    {
        // Chat and Responses give one message or item per result: this call's.
        Value::Array(mut items) if items.len() == 1 => items.remove(0),
        one => one,
    }
}

/// A policy from its JSON shape (`{"default", "rules": [{"tool", "when", "action"}],
/// "max_remembered"?}`); the core compiles the rules, so a bad glob is an error here.
pub fn policy(value: Value) -> Result<Policy, String> {
    serde_json::from_value(value).map_err(|e| format!("invalid policy: {e}"))
}

/// A policy in its JSON shape.
pub fn policy_json(policy: &Policy) -> Value {
    serde_json::to_value(policy).expect("a policy serializes")
}

/// An NPC's facts from the core's context shape (`{"target"?, "cwd"?, "flags"?}`), with the
/// desk binding the gate keeps: `bound_npc_id` is set by binding, so it is refused here.
pub fn context(value: Value, bound_npc: Option<&str>) -> Result<Context, String> {
    let mut ctx: Context =
        serde_json::from_value(value).map_err(|e| format!("invalid context: {e}"))?;
    if ctx.bound_npc_id.is_some() {
        return Err("bound_npc_id is set by bind_npc and unbind_npc, not in a context".into());
    }
    ctx.bound_npc_id = bound_npc.map(str::to_owned);
    Ok(ctx)
}

/// Who asked for a call: `"model"` or `"user"` (a slash command the player typed).
pub fn origin(name: &str) -> Result<Origin, String> {
    serde_json::from_value(Value::String(name.to_owned()))
        .map_err(|_| format!("unknown origin {name:?} (model or user)"))
}

/// The name of a core error's kind: the unit variant's string, or the single key of its JSON.
pub fn error_kind(error: &impl serde::Serialize) -> String {
    match serde_json::to_value(error) {
        Ok(Value::String(kind)) => kind,
        Ok(Value::Object(map)) if map.len() == 1 => map.keys().next().cloned().unwrap_or_default(),
        _ => "error".to_owned(),
    }
}

/// A slash command as `{"call": {"id", "name", "args"}}`, or `{"error": kind, "message"}`
/// (kinds: `not_a_command`, `unknown_command`, `unterminated_quote`, `missing_argument`,
/// `too_many_arguments`, `bad_value`, `bad_json`).
pub fn slash_result(result: Result<ToolCall, SlashError>) -> Value {
    match result {
        Ok(call) => json!({ "call": call }),
        Err(e) => json!({"error": error_kind(&e), "message": e.to_string()}),
    }
}

/// What `DeskRpcClient`'s properties say about a connection; the rest comes from the core's
/// defaults and the `config_overrides` Dictionary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// Our nick.
    pub nick: String,
    /// The desk channel.
    pub channel: String,
    /// Accept answers from this nick only, and wait for it in the channel ("" for anyone).
    pub remote_nick: String,
    /// The default request timeout in seconds (0: the spec's default).
    pub request_timeout_sec: u64,
    /// The shared secret that authenticates frames ("" for none).
    pub auth_secret: String,
    /// The Unix time in ms at the host clock's 0 (authenticated frames carry wall time).
    pub epoch_unix_ms: u64,
    /// Offer compressed answers.
    pub compression: bool,
}

/// The core's connection configuration from the settings and `overrides` (the JSON shape of
/// [`ConnectionConfig::from_json`]: `{"session": {...}, "oa1": {...}, "rejoin_delay_ms": N}`;
/// keys in `overrides` win). Unknown keys and wrong types are errors, from the core.
pub fn connection_config(
    settings: &ConnectionSettings,
    overrides: Map<String, Value>,
) -> Result<ConnectionConfig, String> {
    let mut oa1 = Map::new();
    if !settings.remote_nick.is_empty() {
        oa1.insert("allowed_sender".into(), json!(settings.remote_nick));
    }
    if settings.request_timeout_sec > 0 {
        oa1.insert(
            "request_timeout_ms".into(),
            json!(settings.request_timeout_sec.saturating_mul(1000)),
        );
    }
    if !settings.auth_secret.is_empty() {
        oa1.insert(
            "auth".into(),
            json!({"secret": settings.auth_secret, "epoch_unix_ms": settings.epoch_unix_ms}),
        );
    }
    oa1.insert("compression".into(), json!(settings.compression));
    let mut config = json!({
        "nick": settings.nick,
        "channel": settings.channel,
        "oa1": oa1,
    });
    for (key, value) in overrides {
        match (config.get_mut(&key), value) {
            (Some(Value::Object(section)), Value::Object(more)) => section.extend(more),
            (_, value) => {
                config[&key] = value;
            }
        }
    }
    ConnectionConfig::from_json(&config.to_string())
        .map_err(|e| format!("invalid configuration: {e}"))
}

/// [`connection_config`] checked by the core as a desk's ([`ConnectionConfig::validate`]): a
/// nick or channel the server would refuse or rename, and an empty remote, are refused here,
/// before anything connects. Errors about the remote name `remote_nick`, the property.
pub fn desk_config(
    settings: &ConnectionSettings,
    overrides: Map<String, Value>,
) -> Result<ConnectionConfig, String> {
    let config = connection_config(settings, overrides)?;
    config.validate(true).map_err(|e| match e {
        ConfigError::NoRemote | ConfigError::AllowedSender(_) => format!("remote_nick: {e}"),
        e => e.to_string(),
    })?;
    Ok(config)
}

/// [method DeskRpcClient.remote_bash]'s arguments as the core's: `timeout_sec` 0 keeps the
/// configured timeout, a fraction of a second is rounded up to the next whole second (the
/// core counts whole seconds; a huge one is the longest), and a negative or non-finite one is
/// refused.
pub fn remote_bash_command(command: &str, timeout_sec: f64) -> Result<RemoteBashArgs, String> {
    if timeout_sec < 0.0 {
        return Err(format!(
            "timeout_sec must not be negative, not {timeout_sec}"
        ));
    }
    if !timeout_sec.is_finite() {
        return Err(format!(
            "timeout_sec must be a finite number of seconds, not {timeout_sec}"
        ));
    }
    // `as` saturates: past u64 is the longest timeout.
    let timeout_sec = (timeout_sec > 0.0).then(|| timeout_sec.ceil() as u64);
    RemoteBashArgs::new(command, timeout_sec).map_err(|e| e.to_string())
}

/// A tool call's arguments checked by the core's `RemoteBash` contract.
pub fn read_remote_bash(call: &ToolCall) -> Result<RemoteBashArgs, String> {
    if call.name != remote_bash::TOOL_NAME {
        return Err(format!("{:?} is not {}", call.name, remote_bash::TOOL_NAME));
    }
    RemoteBashArgs::parse(&call.args.to_string()).map_err(|e| e.to_string())
}

/// The result `RemoteCall.completed` carries: the core's event JSON with `ok` added,
/// `{"id", "ok": true, "text", "truncated"}` or `{"id", "ok": false, "error", "message"}`.
/// `None` for events that do not end a call.
pub fn call_result(event: &Event) -> Option<(String, Value)> {
    let (tag, mut body) = match serde_json::to_value(event).ok()? {
        Value::Object(map) => map.into_iter().next()?,
        _ => return None,
    };
    let ok = match tag.as_str() {
        "response" => true,
        "failed" => false,
        _ => return None,
    };
    body["ok"] = Value::Bool(ok);
    let id = body["id"].as_str()?.to_owned();
    Some((id, body))
}

/// A call that ended here, not at the remote (refused arguments, cancelled, the client freed
/// or closed): the same shape as a failed call.
pub fn local_failure(id: &str, code: &str, message: &str) -> Value {
    json!({"id": id, "ok": false, "error": code, "message": message})
}

/// What the model reads for a finished call: the output text, or the core's failure object
/// `{"ok": false, "error", "message"}` as an error result (`docs/oa1.md`, "`RemoteBash`").
pub fn tool_result(call_id: &str, result: &Value) -> ToolResult {
    let text = |key: &str| result[key].as_str().unwrap_or_default().to_owned();
    if result["ok"] == Value::Bool(true) {
        ToolResult::ok(call_id, text("text"))
    } else {
        let object = remote_bash::failure_object(&text("error"), &text("message"));
        ToolResult::error(call_id, object)
    }
}

/// The reconnect policy of the `reconnect_first_ms` and `reconnect_max_ms` properties (of a
/// `DeskRpcClient` or a `DeskConnection`), checked by the core; a negative delay is refused
/// with the values given.
pub fn reconnect_policy(first_ms: i64, max_ms: i64) -> Result<ReconnectPolicy, String> {
    let (Ok(first_delay_ms), Ok(max_delay_ms)) = (u64::try_from(first_ms), u64::try_from(max_ms))
    else {
        return Err(format!(
            "reconnect_first_ms/reconnect_max_ms: delays must not be negative (got {first_ms} and {max_ms})"
        ));
    };
    let policy = ReconnectPolicy {
        first_delay_ms,
        max_delay_ms,
        ..ReconnectPolicy::default()
    };
    policy
        .validate()
        .map_err(|e| format!("reconnect_first_ms/reconnect_max_ms: {e}"))?;
    Ok(policy)
}

/// `actions` without a `closed` state that a `reconnecting` later in the same batch replaces:
/// a link the client will bring back never reads as ended, so a game that waits for `closed`
/// sees only the real end (`close()`, or a link given up).
pub fn without_superseded_close<A>(
    mut actions: Vec<A>,
    state: impl Fn(&A) -> Option<&str>,
) -> Vec<A> {
    let Some(last_reconnecting) = actions
        .iter()
        .rposition(|action| state(action) == Some("reconnecting"))
    else {
        return actions;
    };
    let mut index = 0;
    actions.retain(|action| {
        let superseded = index < last_reconnecting && state(action) == Some("closed");
        index += 1;
        !superseded
    });
    actions
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_close_that_reconnecting_replaces_is_dropped() {
        let states = |v: Vec<&'static str>| super::without_superseded_close(v, |s| Some(*s));
        assert_eq!(
            states(vec!["ready", "closed", "reconnecting", "registering"]),
            ["ready", "reconnecting", "registering"]
        );
        // The real end stays: no reconnecting after it, or the close came after.
        assert_eq!(states(vec!["ready", "closed"]), ["ready", "closed"]);
        assert_eq!(
            states(vec!["reconnecting", "closed"]),
            ["reconnecting", "closed"]
        );
    }

    use super::*;
    use deskwire::oa1::Failure;
    use deskwire::tools::builtin;
    use deskwire::tools::{Context, Origin, Policy, Registry, authorize};

    fn ids() -> IdGenerator {
        IdGenerator::new(1)
    }

    #[test]
    fn format_names_round_trip() {
        for name in [
            "openai_chat",
            "openai_responses",
            "anthropic",
            "gemini",
            "deskwire",
        ] {
            assert_eq!(Format::from_name(name).unwrap().name(), name);
        }
        assert_eq!(
            Format::from_name("OpenAI"),
            Err(ShapeError::UnknownFormat("OpenAI".into()))
        );
        assert_eq!(Format::DEFAULT.name(), "openai_chat");
    }

    #[test]
    fn tool_lists_in_each_format() {
        let rb = builtin::remote_bash();
        let chat = tool_list(Format::DEFAULT, vec![&rb]);
        assert_eq!(chat.len(), 1);
        assert_eq!(chat[0]["type"], "function");
        assert_eq!(chat[0]["function"]["name"], "RemoteBash");
        assert_eq!(
            chat[0]["function"]["parameters"]["required"],
            json!(["command"])
        );
        let anthropic = tool_list(Format::Provider(Provider::Anthropic), vec![&rb]);
        assert_eq!(anthropic[0]["name"], "RemoteBash");
        assert!(anthropic[0]["input_schema"].is_object());
        let responses = tool_list(Format::Provider(Provider::OpenAiResponses), vec![&rb]);
        assert_eq!(responses[0]["name"], "RemoteBash");
        let gemini = tool_list(Format::Provider(Provider::Gemini), vec![&rb]);
        assert_eq!(gemini.len(), 1);
        assert_eq!(gemini[0]["functionDeclarations"][0]["name"], "RemoteBash");
        let own = tool_list(Format::Deskwire, vec![&rb]);
        assert_eq!(own[0], serde_json::to_value(&rb).unwrap());
        for format in [
            Format::DEFAULT,
            Format::Provider(Provider::Anthropic),
            Format::Provider(Provider::Gemini),
            Format::Deskwire,
        ] {
            assert!(tool_list(format, vec![]).is_empty(), "{format:?}");
        }
    }

    #[test]
    fn request_fields_keep_the_catalog_for_gating_apis() {
        let registry = Registry::with_builtins();
        let unbound = registry.visible_tools("npc", &Context::default());
        let request = ToolRequest {
            tools: unbound,
            catalog: Some(registry.specs()),
            ..ToolRequest::default()
        };
        let gemini = request_fields(Format::Provider(Provider::Gemini), &request);
        let allowed = &gemini["toolConfig"]["functionCallingConfig"]["allowedFunctionNames"];
        assert!(!allowed.as_array().unwrap().contains(&json!("RemoteBash")));
        let own = request_fields(Format::Deskwire, &request);
        assert_eq!(own["tools"].as_array().unwrap().len(), 6);
    }

    #[test]
    fn tool_calls_in_each_format() {
        let want = ToolCall::new("call_1", "RemoteBash", json!({"command": "uname -a"}));
        let cases = [
            (
                Format::DEFAULT,
                json!({"id": "call_1", "type": "function",
                       "function": {"name": "RemoteBash", "arguments": "{\"command\":\"uname -a\"}"}}),
            ),
            (
                Format::Provider(Provider::Anthropic),
                json!({"type": "tool_use", "id": "call_1", "name": "RemoteBash",
                       "input": {"command": "uname -a"}}),
            ),
            (
                Format::Deskwire,
                json!({"id": "call_1", "name": "RemoteBash", "args": {"command": "uname -a"}}),
            ),
        ];
        for (format, value) in cases {
            assert_eq!(
                tool_call(format, value, &mut ids()).unwrap(),
                want,
                "{format:?}"
            );
        }
        let responses = tool_call(
            Format::Provider(Provider::OpenAiResponses),
            json!({"type": "function_call", "id": "fc_9", "call_id": "call_1", "name": "RemoteBash",
                   "arguments": "{\"command\":\"uname -a\"}"}),
            &mut ids(),
        )
        .unwrap();
        assert_eq!(responses.item_id.as_deref(), Some("fc_9"));
        assert_eq!(responses.args, want.args);
        // Gemini: a part, or the bare functionCall; a missing id is generated.
        let gemini = Format::Provider(Provider::Gemini);
        let part = json!({"functionCall": {"id": "call_1", "name": "RemoteBash",
                                           "args": {"command": "uname -a"}}});
        assert_eq!(tool_call(gemini, part, &mut ids()).unwrap(), want);
        let bare = json!({"name": "RemoteBash", "args": {"command": "uname -a"}});
        let call = tool_call(gemini, bare, &mut ids()).unwrap();
        assert!(call.id_generated && !call.id.is_empty());
    }

    #[test]
    fn malformed_arguments_reach_authorize_and_are_refused_there() {
        let call = tool_call(
            Format::DEFAULT,
            json!({"id": "c", "type": "function",
                   "function": {"name": "RemoteBash", "arguments": "{not json"}}),
            &mut ids(),
        )
        .unwrap();
        assert_eq!(call.args, json!("{not json"));
        let registry = Registry::with_builtins();
        let verdict = authorize(
            &registry,
            &Policy::allow_all(),
            &call,
            "npc",
            &Context::bound_to("npc"),
            Origin::Model,
        );
        let v = authorization(&verdict);
        assert_eq!(v["allowed"], false);
        assert_eq!(v["reason"], "invalid_arguments");
        assert!(v["observation"].as_str().unwrap().contains("not run"));
    }

    #[test]
    fn what_is_not_a_tool_call_is_an_error() {
        for (format, value) in [
            (Format::DEFAULT, json!("RemoteBash")),
            (Format::DEFAULT, json!({"id": "x"})),
            (
                Format::DEFAULT,
                json!({"role": "assistant", "content": "hi"}),
            ),
            (
                Format::Provider(Provider::Anthropic),
                json!({"type": "text", "text": "hi"}),
            ),
            (Format::Deskwire, json!({"name": "RemoteBash"})),
            (Format::Deskwire, json!([1, 2])),
        ] {
            let e = tool_call(format, value.clone(), &mut ids()).unwrap_err();
            assert!(
                matches!(e, ShapeError::NotAToolCall { .. }),
                "{format:?} {value}: {e}"
            );
            let prefix = format!("not a tool call in the {} format: ", format.name());
            assert!(e.to_string().starts_with(&prefix), "{e}");
        }
    }

    #[test]
    fn authorization_verdicts() {
        let registry = Registry::with_builtins();
        let policy = Policy::allow_all();
        let call = ToolCall::new("c", "RemoteBash", json!({"command": "ls"}));
        let check = |ctx: &Context, call: &ToolCall| {
            authorization(&authorize(
                &registry,
                &policy,
                call,
                "npc",
                ctx,
                Origin::Model,
            ))
        };
        assert_eq!(
            check(&Context::bound_to("npc"), &call),
            json!({"allowed": true, "kind": "allowed"})
        );
        let hidden = check(&Context::default(), &call);
        assert_eq!(hidden["allowed"], false);
        assert_eq!(hidden["kind"], "denied");
        assert_eq!(hidden["reason"], "not_visible");
        assert!(
            hidden["observation"]
                .as_str()
                .unwrap()
                .contains("bound to a desk")
        );
        let unknown = check(&Context::default(), &ToolCall::new("c", "Nope", json!({})));
        assert_eq!(unknown["kind"], "unknown");
        assert_eq!(unknown["allowed"], false);
        assert!(
            unknown["observation"]
                .as_str()
                .unwrap()
                .contains("Unknown tool")
        );
    }

    #[test]
    fn an_unreadable_call_is_refused_in_the_same_shape() {
        let v = unreadable_call("$.function: a VECTOR2 has no JSON form");
        assert_eq!(v["allowed"], false);
        assert_eq!(v["kind"], "unreadable");
        assert!(
            v["observation"]
                .as_str()
                .unwrap()
                .ends_with("It was not run.")
        );
    }

    #[test]
    fn tool_messages_in_each_format() {
        let call = ToolCall::new("call_1", "RemoteBash", json!({"command": "ls"}));
        let ok = ToolResult::ok("call_1", "a\nb\n");
        let err = ToolResult::error("call_1", r#"{"ok":false,"error":"timeout","message":"x"}"#);
        assert_eq!(
            tool_message(Format::DEFAULT, &call, &ok),
            json!({"role": "tool", "tool_call_id": "call_1", "content": "a\nb\n"})
        );
        let anthropic = tool_message(Format::Provider(Provider::Anthropic), &call, &err);
        assert_eq!(anthropic["content"][0]["tool_use_id"], "call_1");
        assert_eq!(anthropic["content"][0]["is_error"], true);
        let responses = tool_message(Format::Provider(Provider::OpenAiResponses), &call, &ok);
        assert_eq!(responses["type"], "function_call_output");
        assert_eq!(responses["output"], "a\nb\n");
        let gemini = tool_message(Format::Provider(Provider::Gemini), &call, &err);
        let f = &gemini["parts"][0]["functionResponse"];
        assert_eq!(f["name"], "RemoteBash");
        assert!(f["response"]["error"].is_string());
        assert_eq!(
            tool_message(Format::Deskwire, &call, &ok),
            json!({"callId": "call_1", "content": "a\nb\n"})
        );
    }

    #[test]
    fn connection_config_from_settings_and_overrides() {
        let settings = ConnectionSettings {
            nick: "godesk".into(),
            channel: "#desk".into(),
            remote_nick: "deskbot".into(),
            request_timeout_sec: 5,
            ..ConnectionSettings::default()
        };
        let config = connection_config(&settings, Map::new()).unwrap();
        assert_eq!(config.session.nick, "godesk");
        assert_eq!(config.oa1.channel, "#desk");
        assert_eq!(config.oa1.allowed_sender.as_deref(), Some("deskbot"));
        assert_eq!(config.oa1.request_timeout_ms, 5_000);
        let defaults = ConnectionConfig::new("godesk", "#desk");
        assert_eq!(config.oa1.max_message_bytes, defaults.oa1.max_message_bytes);

        assert!(config.oa1.adaptive_payload, "deskwire's connection default");
        let overrides = json!({"oa1": {"adaptive_payload": false, "request_timeout_ms": 7000},
                               "rejoin_delay_ms": 50});
        let Value::Object(overrides) = overrides else {
            unreachable!()
        };
        let config = connection_config(&settings, overrides).unwrap();
        assert!(!config.oa1.adaptive_payload);
        assert_eq!(config.oa1.request_timeout_ms, 7_000, "overrides win");
        assert_eq!(
            config.oa1.allowed_sender.as_deref(),
            Some("deskbot"),
            "merged, not replaced"
        );
        assert_eq!(config.rejoin_delay_ms, 50);

        let anyone = ConnectionSettings {
            remote_nick: String::new(),
            ..settings.clone()
        };
        assert_eq!(
            connection_config(&anyone, Map::new())
                .unwrap()
                .oa1
                .allowed_sender,
            None
        );
    }

    #[test]
    fn a_desk_config_names_its_remote_and_is_checked_before_connecting() {
        let settings = ConnectionSettings {
            nick: "godesk".into(),
            channel: "#desk".into(),
            remote_nick: "rexd".into(),
            ..ConnectionSettings::default()
        };
        let config = desk_config(&settings, Map::new()).unwrap();
        assert_eq!(config.oa1.allowed_sender.as_deref(), Some("rexd"));
        let anyone = ConnectionSettings {
            remote_nick: "*".into(),
            ..settings.clone()
        };
        assert!(desk_config(&anyone, Map::new()).is_ok(), "\"*\" opts out");

        let refused =
            |settings: ConnectionSettings| desk_config(&settings, Map::new()).unwrap_err();
        let e = refused(ConnectionSettings {
            remote_nick: String::new(),
            ..settings.clone()
        });
        assert!(e.starts_with("remote_nick: "), "{e}");
        assert!(
            e.contains("`rexd`") && e.contains("\"*\""),
            "says what to set: {e}"
        );
        let e = refused(ConnectionSettings {
            remote_nick: "two words".into(),
            ..settings.clone()
        });
        assert!(e.starts_with("remote_nick: "), "{e}");
        let e = refused(ConnectionSettings {
            channel: "desk".into(),
            ..settings.clone()
        });
        assert!(e.contains("desk"), "{e}");
        let e = refused(ConnectionSettings {
            nick: "a b".into(),
            ..settings.clone()
        });
        assert!(e.contains("a b"), "{e}");
    }

    #[test]
    fn bad_configuration_is_an_error_from_the_core() {
        let settings = ConnectionSettings {
            nick: "d".into(),
            channel: "#d".into(),
            ..ConnectionSettings::default()
        };
        for bad in [
            json!({"oa1": {"no_such_option": 1}}),
            json!({"oa1": {"max_streams": "many"}}),
            json!({"surprise": true}),
        ] {
            let Value::Object(bad) = bad else {
                unreachable!()
            };
            let e = connection_config(&settings, bad.clone()).unwrap_err();
            assert!(e.starts_with("invalid configuration"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn remote_bash_arguments_go_through_the_core_contract() {
        let call = |args: Value| ToolCall::new("c", "RemoteBash", args);
        let args = remote_bash_command("uname -a", 0.0).unwrap();
        assert_eq!(
            (args.command.as_str(), args.timeout_sec),
            ("uname -a", None)
        );
        let args = remote_bash_command("x", 3.0).unwrap();
        assert_eq!(args.timeout_sec, Some(3));
        // A fraction is never the configured timeout: it waits the next whole second.
        assert_eq!(remote_bash_command("x", 0.5).unwrap().timeout_sec, Some(1));
        assert_eq!(remote_bash_command("x", 2.25).unwrap().timeout_sec, Some(3));
        let e = remote_bash_command("x", -1.0).unwrap_err();
        assert!(e.contains("negative, not -1"), "{e}");
        for bad in [f64::NAN, f64::INFINITY, -0.5] {
            assert!(remote_bash_command("x", bad).is_err(), "{bad}");
        }
        // A command that runs nothing is the core's refusal, in its words.
        let e = remote_bash_command("  ", 0.0).unwrap_err();
        assert!(e.contains("the command is empty"), "{e}");
        let e = remote_bash_command("ls\0", 0.0).unwrap_err();
        assert!(e.contains("NUL byte at byte 2"), "{e}");
        assert!(read_remote_bash(&call(json!({"command": ""}))).is_err());
        let args = read_remote_bash(&call(json!({"command": "x", "timeout_sec": 3}))).unwrap();
        assert_eq!(args.timeout_ms(), Some(3_000));
        assert!(read_remote_bash(&call(json!({"command": 5}))).is_err());
        assert!(read_remote_bash(&call(json!({"command": "x", "timeout_sec": 0}))).is_err());
        let other = ToolCall::new("c", "wave", json!({"command": "x"}));
        assert!(
            read_remote_bash(&other)
                .unwrap_err()
                .contains("not RemoteBash")
        );
    }

    #[test]
    fn call_results_from_core_events() {
        let done = Event::Response {
            id: "abc".into(),
            text: "hi\n".into(),
            truncated: false,
        };
        assert_eq!(
            call_result(&done),
            Some((
                "abc".into(),
                json!({"id": "abc", "ok": true, "text": "hi\n", "truncated": false})
            ))
        );
        let failed = Event::Failed {
            id: "abc".into(),
            failure: Failure::Timeout {
                message: "no complete response before the request timeout".into(),
            },
        };
        let (id, v) = call_result(&failed).unwrap();
        assert_eq!(id, "abc");
        assert_eq!(v["ok"], false);
        assert_eq!(v["error"], "timeout");
        assert!(v["message"].is_string());
        let request = Event::Request {
            id: "x".into(),
            sender: "s".into(),
            payload: "p".into(),
        };
        assert_eq!(call_result(&request), None);
    }

    #[test]
    fn tool_results_for_the_model() {
        let ok = json!({"id": "a", "ok": true, "text": "out", "truncated": false});
        assert_eq!(tool_result("call_1", &ok), ToolResult::ok("call_1", "out"));
        let failed = local_failure("a", "timeout", "too slow");
        let r = tool_result("call_1", &failed);
        assert!(r.is_error);
        assert_eq!(
            serde_json::from_str::<Value>(&r.content).unwrap(),
            json!({"ok": false, "error": "timeout", "message": "too slow"})
        );
    }

    #[test]
    fn secret_and_compression_reach_the_core() {
        let plain = ConnectionSettings {
            nick: "d".into(),
            channel: "#d".into(),
            ..ConnectionSettings::default()
        };
        let config = connection_config(&plain, Map::new()).unwrap();
        assert_eq!(config.oa1.auth, None);
        assert!(!config.oa1.compression);

        let settings = ConnectionSettings {
            auth_secret: "s3cret".into(),
            epoch_unix_ms: 1_790_000_000_000,
            compression: true,
            ..plain
        };
        let config = connection_config(&settings, Map::new()).unwrap();
        let auth = config.oa1.auth.expect("auth configured");
        assert_eq!(auth.secret, b"s3cret");
        assert_eq!(auth.epoch_unix_ms, 1_790_000_000_000);
        assert_eq!(auth.max_skew_ms, 60_000, "the core's default window");
        assert!(config.oa1.compression);
        // The window is an override like any other.
        let Value::Object(more) = json!({"oa1": {"auth": {"secret": "s3cret",
            "epoch_unix_ms": 5, "max_skew_ms": 1000}}})
        else {
            unreachable!()
        };
        let config = connection_config(&settings, more).unwrap();
        assert_eq!(config.oa1.auth.unwrap().max_skew_ms, 1000);
    }

    #[test]
    fn policies_read_and_write_the_core_shape() {
        let json = json!({"default": "allow", "rules": [
            {"tool": "RemoteBash", "when": {"commands": ["rm -rf *"]}, "action": {"deny": "destructive"}},
            {"tool": "*", "when": {"outside": ["/srv/app"]}, "action": {"ask": "medium"}}]});
        let p = policy(json.clone()).unwrap();
        let mut back = policy_json(&p);
        back.as_object_mut().unwrap().remove("max_remembered");
        assert_eq!(back, json);
        for bad in [
            json!({"default": "maybe", "rules": []}),
            json!({"default": "allow", "rules": [{"tool": "x", "when": {"outside": ["relative"]}, "action": "allow"}]}),
            json!([]),
        ] {
            assert!(
                policy(bad.clone())
                    .unwrap_err()
                    .starts_with("invalid policy"),
                "{bad}"
            );
        }
    }

    #[test]
    fn contexts_keep_the_binding_to_the_gate() {
        let ctx = context(json!({"cwd": "/srv/app", "flags": ["admin"]}), Some("npc")).unwrap();
        assert_eq!(ctx.bound_npc_id.as_deref(), Some("npc"));
        assert_eq!(ctx.cwd.as_deref(), Some("/srv/app"));
        assert!(ctx.flags.contains("admin"));
        assert_eq!(context(json!({}), None).unwrap(), Context::default());
        let bound = context(json!({"bound_npc_id": "npc"}), None).unwrap_err();
        assert!(bound.contains("bind_npc"), "{bound}");
        assert!(context(json!({"cwd": 5}), None).is_err());
        assert!(context(json!({"desk": "d"}), None).is_err());
    }

    #[test]
    fn origins_by_name() {
        assert_eq!(origin("model"), Ok(Origin::Model));
        assert_eq!(origin("user"), Ok(Origin::User));
        assert!(origin("User").is_err());
    }

    #[test]
    fn slash_commands_as_calls_or_error_kinds() {
        let registry = Registry::with_builtins();
        let parse =
            |line: &str| slash_result(deskwire::tools::slash::parse(line, &registry, &mut ids()));
        let ok = parse("/read notes.txt");
        assert_eq!(ok["call"]["name"], "read");
        assert_eq!(ok["call"]["args"], json!({"path": "notes.txt"}));
        assert!(ok["call"]["id"].as_str().is_some_and(|id| !id.is_empty()));
        for (line, kind) in [
            ("read x", "not_a_command"),
            ("/cat x", "unknown_command"),
            ("/read", "missing_argument"),
            ("/bash 'open", "unterminated_quote"),
        ] {
            let e = parse(line);
            assert_eq!(e["error"], kind, "{line}");
            assert!(!e["message"].as_str().unwrap().is_empty());
            assert!(e.get("call").is_none());
        }
    }
}
