//! The tool layer (`deskwire::tools`): the toolbox engine (registry, per-agent gating and its
//! change events, call checks, approvals, policy, slash commands), provider translation for the
//! four APIs, streamed responses, retrieval, and routing to REXD.

use std::ffi::c_char;

use deskwire::ids::IdGenerator;
use deskwire::tools::providers::{
    self, Limits, Provider, ProviderResponse, StreamParser, ToolChoice, ToolRequest,
};
use deskwire::tools::retrieval::{HostScores, ToolIndex};
use deskwire::tools::{
    ApprovalResponse, Context, Origin, Output, Policy, Registry, Rule, ToolCall, ToolResult,
    ToolSpec, Toolbox, Visibility, builtin, slash, toolbox,
};
use serde::Deserialize;
use serde_json::json;

use crate::boundary::{self, Error, Handle, Result, as_handle, dw_output, dw_status, dw_str};

/// A provider API (`DW_PROVIDER_*`).
pub type dw_provider = u32;
/// OpenAI Chat Completions.
pub const DW_PROVIDER_OPENAI_CHAT: dw_provider = 1;
/// OpenAI Responses.
pub const DW_PROVIDER_OPENAI_RESPONSES: dw_provider = 2;
/// Anthropic Messages.
pub const DW_PROVIDER_ANTHROPIC: dw_provider = 3;
/// Google Gemini.
pub const DW_PROVIDER_GEMINI: dw_provider = 4;

/// Who asked for a call (`DW_ORIGIN_*`).
pub type dw_origin = u32;
/// The model called the tool: approvals apply.
pub const DW_ORIGIN_MODEL: dw_origin = 1;
/// The user typed a slash command: no approval prompt, refusals still hold.
pub const DW_ORIGIN_USER: dw_origin = 2;

fn provider(p: dw_provider) -> Result<Provider> {
    match p {
        DW_PROVIDER_OPENAI_CHAT => Ok(Provider::OpenAiChat),
        DW_PROVIDER_OPENAI_RESPONSES => Ok(Provider::OpenAiResponses),
        DW_PROVIDER_ANTHROPIC => Ok(Provider::Anthropic),
        DW_PROVIDER_GEMINI => Ok(Provider::Gemini),
        other => Err(Error::argument(format_args!("unknown provider {other}"))),
    }
}

fn origin(o: dw_origin) -> Result<Origin> {
    match o {
        DW_ORIGIN_MODEL => Ok(Origin::Model),
        DW_ORIGIN_USER => Ok(Origin::User),
        other => Err(Error::argument(format_args!("unknown origin {other}"))),
    }
}

/// A tool spec from JSON, checked as `ToolSpec::new` checks it.
fn spec(value: ToolSpec) -> Result<ToolSpec> {
    ToolSpec::new(value.name, value.description, value.input_schema).map_err(Error::argument)
}

fn specs(ptr: *const c_char, what: &str) -> Result<Vec<ToolSpec>> {
    let list: Vec<ToolSpec> = boundary::json_arg(ptr, what)?;
    list.into_iter().map(spec).collect()
}

pub(crate) struct ToolboxState {
    toolbox: Toolbox,
    /// Ids of slash-command calls.
    ids: IdGenerator,
}

/// The tool layer for many agents (`deskwire::tools::Toolbox`): what each may see, whether a
/// call may run, and the approvals in between; events through `dw_toolbox_poll_output`.
pub struct dw_toolbox(Handle<ToolboxState>);
as_handle!(dw_toolbox, ToolboxState);

/// Creates a toolbox.
///
/// `policy_json`: `{"default": action, "rules": [{"tool", "when", "action"}], "max_remembered"?}`
/// (actions `"allow"`, `{"ask": "low" | "medium" | "high"}`, `{"deny": "reason"}`; conditions
/// `"always"`, `{"commands": [globs]}`, `{"arg", "patterns"}`, `{"outside": [roots]}`), or `NULL`
/// to allow everything. `config_json`: `{"max_agents", "approvals": {"timeout_ms",
/// "max_pending"}}` or `NULL` for the defaults. `builtins`: start with `RemoteBash` (visible
/// while the agent's NPC is bound) and REXD's logical tools. `seed` fixes approval and slash
/// call ids. On success `*out` is a new handle the caller frees with `dw_toolbox_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_new(
    policy_json: *const c_char,
    config_json: *const c_char,
    builtins: bool,
    seed: u64,
    out: *mut *mut dw_toolbox,
) -> dw_status {
    boundary::new_handle(out, || {
        let policy: Policy =
            boundary::opt_object_arg(policy_json, "policy_json")?.unwrap_or_else(Policy::allow_all);
        let config: toolbox::Config =
            boundary::opt_object_arg(config_json, "config_json")?.unwrap_or_default();
        let registry = if builtins {
            Registry::with_builtins()
        } else {
            Registry::new()
        };
        Ok(ToolboxState {
            toolbox: Toolbox::new(registry, policy, config, seed),
            ids: IdGenerator::new(seed),
        })
    })
}

/// Frees a toolbox. `NULL` is a no-op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_free(toolbox: *mut dw_toolbox) {
    boundary::free_handle(toolbox)
}

/// The message of the toolbox's last failed call, or `""`. Valid until the next call with
/// `toolbox`; owned by it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_last_error(toolbox: *const dw_toolbox) -> *const c_char {
    boundary::last_error(toolbox)
}

/// The kind of the toolbox's last failed call: the core error's name (`"unknown_id"`, ...) or
/// the status's (`"invalid_json"`, ...), or `""` after a success. Same lifetime as
/// `dw_toolbox_last_error`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_last_error_kind(toolbox: *const dw_toolbox) -> *const c_char {
    boundary::last_error_kind(toolbox)
}

/// Registers a tool: `spec_json` = `{"name", "description", "input_schema"}` (a name providers
/// accept, an object schema), `visibility_json` = `"always"`, `"never"`, `"while_bound"`,
/// `"with_target"`, `{"with_flag": f}`, `{"all_of": [..]}`, `{"any_of": [..]}`, `{"not": v}`, or
/// `NULL` for always. Agents that can see it get a `tools_changed` event.
/// `DW_STATUS_INVALID_ARGUMENT` for a bad name or schema, `DW_STATUS_REFUSED` for a duplicate.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_register(
    toolbox: *mut dw_toolbox,
    spec_json: *const c_char,
    visibility_json: *const c_char,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let spec = spec(boundary::object_arg(spec_json, "spec_json")?)?;
        let visibility: Visibility = boundary::opt_json_arg(visibility_json, "visibility_json")?
            .unwrap_or(Visibility::Always);
        h.engine
            .toolbox
            .register(spec, visibility)
            .map_err(Error::refused)
    })
}

/// Removes the tool `name`; `*removed` says whether it was registered. Agents that saw it get
/// a `tools_changed` event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_unregister(
    toolbox: *mut dw_toolbox,
    name: *const c_char,
    removed: *mut bool,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let removed = boundary::out_ptr(removed, "removed")?;
        let name = boundary::str_arg(name, "name")?;
        boundary::write(removed, h.engine.toolbox.unregister(name).is_some());
        Ok(())
    })
}

/// Sets an agent's facts: `context_json` = `{"bound_npc_id"?, "target"?, "cwd"?, "flags"?:
/// [..]}` (unknown members refused). A change of what the agent may see queues a
/// `tools_changed` event (also for a new agent). `DW_STATUS_REFUSED` beyond `max_agents`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_set_context(
    toolbox: *mut dw_toolbox,
    agent: *const c_char,
    context_json: *const c_char,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let agent = boundary::str_arg(agent, "agent")?;
        let context: Context = boundary::object_arg(context_json, "context_json")?;
        h.engine
            .toolbox
            .set_context(agent, context)
            .map_err(Error::refused)
    })
}

/// Forgets an agent; `*removed` says whether it was known.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_remove_agent(
    toolbox: *mut dw_toolbox,
    agent: *const c_char,
    removed: *mut bool,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let removed = boundary::out_ptr(removed, "removed")?;
        let agent = boundary::str_arg(agent, "agent")?;
        boundary::write(removed, h.engine.toolbox.remove_agent(agent));
        Ok(())
    })
}

/// The tools `agent` may see now, as a JSON array of specs, viewed in `*out` until the next
/// call with `toolbox`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_visible_tools(
    toolbox: *mut dw_toolbox,
    agent: *const c_char,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let agent = boundary::str_arg(agent, "agent")?;
        let visible: Vec<ToolSpec> = h
            .engine
            .toolbox
            .visible_tools(agent)
            .into_iter()
            .cloned()
            .collect();
        boundary::write(out, h.json_view(&visible));
        Ok(())
    })
}

/// Checks `call_json` (`{"id", "name", "args"}`) from `agent` without changing anything, as
/// JSON in `*out`: `{"kind": "allowed"}`, `{"kind": "needs_approval", "tier"}`, `{"kind":
/// "denied", "reason", "message"?, "observation"}`, `{"kind": "unknown", "observation"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_authorize(
    toolbox: *mut dw_toolbox,
    agent: *const c_char,
    call_json: *const c_char,
    origin: dw_origin,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let agent = boundary::str_arg(agent, "agent")?;
        let call: ToolCall = boundary::object_arg(call_json, "call_json")?;
        let origin = self::origin(origin)?;
        let answer = h.engine.toolbox.authorize(agent, &call, origin);
        boundary::write(out, h.json_view(&answer));
        Ok(())
    })
}

/// Decides what to do with `call_json` from `agent` now, as JSON in `*out`: `"run"`,
/// `{"refuse": {"observation"}}` (send it back as the call's error result), or `{"pending":
/// {"approval_id"}}` (an `approval_requested` event is queued; wait for `approval_decided`).
/// When too many approvals wait already, a call that needs one is refused with an observation
/// saying so (the model may try again later).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_check_call(
    toolbox: *mut dw_toolbox,
    now_ms: u64,
    agent: *const c_char,
    call_json: *const c_char,
    origin: dw_origin,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let agent = boundary::str_arg(agent, "agent")?;
        let call: ToolCall = boundary::object_arg(call_json, "call_json")?;
        let origin = self::origin(origin)?;
        let verdict = h
            .engine
            .toolbox
            .check_call(now_ms, agent, &call, origin)
            .map_err(Error::refused)?;
        boundary::write(out, h.json_view(&verdict));
        Ok(())
    })
}

/// Lets an answer to approval `id` come back under `external_id` (the mobile server's
/// permission id).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_link_external(
    toolbox: *mut dw_toolbox,
    id: *const c_char,
    external_id: *const c_char,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let id = boundary::str_arg(id, "id")?;
        let external = boundary::str_arg(external_id, "external_id")?;
        h.engine
            .toolbox
            .link_external(id, external)
            .map_err(Error::refused)
    })
}

/// A human answered: `response_json` = `{"id", "approved", "remember"?, "reason"?}`. The
/// settlement (`{"request", "outcome", "remember", "reason"?}`) is viewed in `*out` and also
/// queued as an `approval_decided` event. `DW_STATUS_REFUSED` for an id nobody waits on.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_respond(
    toolbox: *mut dw_toolbox,
    now_ms: u64,
    response_json: *const c_char,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let response: ApprovalResponse = boundary::object_arg(response_json, "response_json")?;
        let decided = h
            .engine
            .toolbox
            .respond(now_ms, &response)
            .map_err(Error::refused)?;
        boundary::write(out, h.json_view(&decided));
        Ok(())
    })
}

/// Withdraws the waiting approval `id`; the settlement is viewed in `*out` and queued as an
/// event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_cancel_approval(
    toolbox: *mut dw_toolbox,
    id: *const c_char,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let id = boundary::str_arg(id, "id")?;
        let decided = h
            .engine
            .toolbox
            .cancel_approval(id)
            .map_err(Error::refused)?;
        boundary::write(out, h.json_view(&decided));
        Ok(())
    })
}

/// The approvals waiting for a human, as a JSON array of requests (`{"id", "agent", "call",
/// "tier", "description", "deadline_ms"}`), viewed in `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_pending_approvals(
    toolbox: *mut dw_toolbox,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let pending: Vec<_> = h.engine.toolbox.pending_approvals().cloned().collect();
        boundary::write(out, h.json_view(&pending));
        Ok(())
    })
}

/// Adds a policy rule (`{"tool", "when", "action"}`). `DW_STATUS_INVALID_ARGUMENT` when a glob
/// does not compile or a root is relative.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_add_rule(
    toolbox: *mut dw_toolbox,
    rule_json: *const c_char,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let rule: Rule = boundary::object_arg(rule_json, "rule_json")?;
        h.engine
            .toolbox
            .policy_mut()
            .push(rule)
            .map_err(Error::argument)
    })
}

/// The policy as JSON (`{"default", "rules", "max_remembered"}`), viewed in `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_policy(
    toolbox: *mut dw_toolbox,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let policy = serde_json::to_value(h.engine.toolbox.policy()).expect("a policy serializes");
        boundary::write(out, h.json_view(&policy));
        Ok(())
    })
}

/// Forgets every remembered approval answer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_forget_remembered(toolbox: *mut dw_toolbox) -> dw_status {
    boundary::with(toolbox, |h| {
        h.engine.toolbox.policy_mut().forget_all();
        Ok(())
    })
}

/// Time passed: approvals past their deadline settle as timed out (events).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_handle_timeout(
    toolbox: *mut dw_toolbox,
    now_ms: u64,
) -> dw_status {
    boundary::with(toolbox, |h| {
        h.engine.toolbox.handle_timeout(now_ms);
        Ok(())
    })
}

/// The next instruction: `DW_OUTPUT_EVENT` (`{"tools_changed": {"agent", "visible", "added",
/// "removed"}}`, `{"approval_requested": request}`, `{"approval_decided": {"request",
/// "outcome", "remember", "reason"?}}`) or `DW_OUTPUT_TIMEOUT`. Call until it answers
/// `DW_OUTPUT_TIMEOUT`. `out->data` stays valid until the next call with `toolbox`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_poll_output(
    toolbox: *mut dw_toolbox,
    now_ms: u64,
    out: *mut dw_output,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let output = match h.engine.toolbox.poll_output(now_ms) {
            Output::Event(event) => h.event(&event),
            Output::Timeout(at) => dw_output::timeout(at),
            other => return Err(Error::refused(format_args!("unknown output {other:?}"))),
        };
        boundary::write(out, output);
        Ok(())
    })
}

/// How a provider request offers tools: the JSON of `dw_toolbox_request_tools`'s
/// `options_json` and the options part of `dw_provider_request_tools`' `request_json`.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct RequestOptions {
    /// Send the whole registry with the visible tools allowed where the API can.
    keep_list: bool,
    choice: ToolChoice,
    parallel_tool_calls: Option<bool>,
    strict: bool,
}

/// The tool fields of `agent`'s next request to `provider` (`tools`, `tool_choice`,
/// `toolConfig`, ...) as a JSON object to merge into the request body, viewed in `*out`.
/// `options_json` (or `NULL`): `{"keep_list"?: bool (send the whole, stable list and gate by
/// allowed names where the API can: Responses, Gemini), "choice"?: "auto" | "none" |
/// "required" | {"tool": name}, "parallel_tool_calls"?: bool, "strict"?: bool}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_request_tools(
    toolbox: *mut dw_toolbox,
    agent: *const c_char,
    provider: dw_provider,
    options_json: *const c_char,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let agent = boundary::str_arg(agent, "agent")?;
        let provider = self::provider(provider)?;
        let options: RequestOptions =
            boundary::opt_object_arg(options_json, "options_json")?.unwrap_or_default();
        let mut request = h.engine.toolbox.tool_request(agent, options.keep_list);
        request.choice = options.choice;
        request.parallel_tool_calls = options.parallel_tool_calls;
        request.strict = options.strict;
        h.view.clear();
        providers::write_request_tools(provider, &request, &mut h.view);
        let len = h.view.len();
        h.view.push(0);
        boundary::write(
            out,
            dw_str {
                ptr: h.view.as_ptr().cast(),
                len,
            },
        );
        Ok(())
    })
}

/// Reads a slash command typed by the user (`/read notes.txt`, `/bash ls | head`,
/// `/write {"path": "a", "content": "b"}`) against the registry. `*out` views `{"call":
/// {"id", "name", "args"}}` (check it with `DW_ORIGIN_USER`) or `{"error": e}` with `e` one of
/// `"not_a_command"` (send the line to the model instead), `{"unknown_command": {"name",
/// "available"}}`, `"unterminated_quote"`, `{"missing_argument": {"tool", "argument"}}`,
/// `{"too_many_arguments": {"tool", "expected"}}`, `{"bad_value": {"argument", "expected",
/// "value"}}`, `{"bad_json": message}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_toolbox_slash(
    toolbox: *mut dw_toolbox,
    line: *const c_char,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(toolbox, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let line = boundary::str_arg(line, "line")?;
        let state = &mut h.engine;
        let value = match slash::parse(line, state.toolbox.registry(), &mut state.ids) {
            Ok(call) => json!({ "call": call }),
            Err(e) => json!({ "error": e }),
        };
        boundary::write(out, h.json_view(&value));
        Ok(())
    })
}

// ---- providers ----

/// A provider request's tool part as `dw_provider_request_tools` reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestJson {
    tools: Vec<ToolSpec>,
    #[serde(default)]
    catalog: Option<Vec<ToolSpec>>,
    #[serde(default)]
    choice: ToolChoice,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    #[serde(default)]
    strict: bool,
}

/// The tool fields of a request to `provider`, written as a JSON object to the caller's buffer
/// `out[0..cap]` (NUL-terminated; the length without the NUL in `*out_len`; on
/// `DW_STATUS_BUFFER_TOO_SMALL` only `*out_len`, the length needed, is written).
/// `request_json` = `{"tools": [specs the model may call], "catalog"?: [the whole stable
/// list], "choice"?, "parallel_tool_calls"?, "strict"?}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_provider_request_tools(
    provider: dw_provider,
    request_json: *const c_char,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let provider = self::provider(provider)?;
        let json: RequestJson = boundary::object_arg(request_json, "request_json")?;
        let tools: Vec<ToolSpec> = json.tools.into_iter().map(spec).collect::<Result<_>>()?;
        let catalog: Option<Vec<ToolSpec>> = json
            .catalog
            .map(|c| c.into_iter().map(spec).collect::<Result<_>>())
            .transpose()?;
        let request = ToolRequest {
            tools: tools.iter().collect(),
            catalog: catalog.as_ref().map(|c| c.iter().collect()),
            choice: json.choice,
            parallel_tool_calls: json.parallel_tool_calls,
            strict: json.strict,
        };
        let mut text = Vec::new();
        providers::write_request_tools(provider, &request, &mut text);
        boundary::to_buffer(&text, out, cap, out_len)
    })
}

/// Reads a whole (non-streamed) response body of `provider` into `{"segments": [{"type":
/// "text", "text"} | {"type": "tool_call", "toolCall": {"id", "name", "args", ...}} | {"type":
/// "invalid_tool_call", "invalidToolCall": {...}} | {"type": "reasoning", "raw"}],
/// "stop_reason"?}`, written to the caller's buffer as for `dw_provider_request_tools`. `seed`
/// makes the call ids Gemini leaves out. `DW_STATUS_MALFORMED` for a body that is not the
/// provider's shape or is its error object (the message says which).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_provider_parse_response(
    provider: dw_provider,
    body: *const u8,
    len: usize,
    seed: u64,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let provider = self::provider(provider)?;
        let body = boundary::bytes_arg(body, len, "body")?;
        let response = providers::parse_response(provider, body, &mut IdGenerator::new(seed))
            .map_err(Error::malformed)?;
        boundary::json_to_buffer(&response, out, cap, out_len)
    })
}

/// The assistant turn to echo back in the next request to `provider`, from `response_json` (a
/// response as `dw_provider_parse_response` writes it): the Chat `assistant` message, the
/// Responses input items (an array), the Anthropic `assistant` message, the Gemini `model`
/// content. Written to the caller's buffer as for `dw_provider_request_tools`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_provider_assistant_message(
    provider: dw_provider,
    response_json: *const c_char,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let provider = self::provider(provider)?;
        let response: ProviderResponse = boundary::object_arg(response_json, "response_json")?;
        let value = providers::assistant_turn(provider, &response);
        boundary::json_to_buffer(&value, out, cap, out_len)
    })
}

/// The tool results to send back to `provider`: `results_json` = `[{"callId", "content",
/// "isError"?}]`; `previous_json` = the model turn they answer (as
/// `dw_provider_parse_response` writes it; Gemini needs it to name each function, the others
/// may pass `NULL`). Written to the caller's buffer as for `dw_provider_request_tools`: an
/// array of Chat `tool` messages, an array of Responses `function_call_output` items, one
/// Anthropic `user` message, or one Gemini `user` content. `DW_STATUS_INVALID_ARGUMENT` when a
/// result answers no call of `previous_json` (every API refuses one; `NULL` or a turn without
/// calls checks nothing).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_provider_tool_results(
    provider: dw_provider,
    results_json: *const c_char,
    previous_json: *const c_char,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let provider = self::provider(provider)?;
        let results: Vec<ToolResult> = boundary::json_arg(results_json, "results_json")?;
        let previous: Option<ProviderResponse> =
            boundary::opt_object_arg(previous_json, "previous_json")?;
        // Only Gemini needs the turn the results answer (it names each function from it).
        let previous = match (provider, previous) {
            (Provider::Gemini, None) => return Err(Error::null("previous_json")),
            (_, previous) => previous.unwrap_or_default(),
        };
        let value =
            providers::tool_results(provider, &previous, &results).map_err(Error::argument)?;
        boundary::json_to_buffer(&value, out, cap, out_len)
    })
}

/// A streamed provider response being assembled (`deskwire::tools::providers::StreamParser`):
/// feed the HTTP body as it comes (any split), then finish.
pub struct dw_stream_parser(Handle<Option<StreamParser>>);
as_handle!(dw_stream_parser, Option<StreamParser>);

/// Creates a stream parser for `provider`. `limits_json`: `{"max_bytes", "max_items"}` or
/// `NULL` for the defaults. `seed` makes the ids a provider leaves out. On success `*out` is a
/// new handle the caller frees with `dw_stream_parser_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_stream_parser_new(
    provider: dw_provider,
    limits_json: *const c_char,
    seed: u64,
    out: *mut *mut dw_stream_parser,
) -> dw_status {
    boundary::new_handle(out, || {
        let provider = self::provider(provider)?;
        let limits: Limits =
            boundary::opt_object_arg(limits_json, "limits_json")?.unwrap_or_default();
        Ok(Some(StreamParser::new(provider, limits, seed)))
    })
}

/// Frees a stream parser. `NULL` is a no-op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_stream_parser_free(parser: *mut dw_stream_parser) {
    boundary::free_handle(parser)
}

/// The message of the parser's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_stream_parser_last_error(
    parser: *const dw_stream_parser,
) -> *const c_char {
    boundary::last_error(parser)
}

/// The kind of the parser's last failed call: the core error's name (`"unknown_id"`, ...) or
/// the status's (`"invalid_json"`, ...), or `""` after a success. Same lifetime as
/// `dw_stream_parser_last_error`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_stream_parser_last_error_kind(
    parser: *const dw_stream_parser,
) -> *const c_char {
    boundary::last_error_kind(parser)
}

fn parser(h: &mut Handle<Option<StreamParser>>) -> Result<&mut StreamParser> {
    h.engine
        .as_mut()
        .ok_or_else(|| Error::with_kind(dw_status::Refused, "finished", "the stream is finished"))
}

/// Feeds the next bytes of the body (server-sent events). `DW_STATUS_MALFORMED` once the stream
/// is unreadable (the first error sticks); `DW_STATUS_REFUSED` after `_finish`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_stream_parser_feed(
    parser: *mut dw_stream_parser,
    data: *const u8,
    len: usize,
) -> dw_status {
    boundary::with(parser, |h| {
        let bytes = boundary::bytes_arg(data, len, "data")?;
        self::parser(h)?.feed(bytes).map_err(Error::malformed)
    })
}

/// Feeds one event's `data` directly, for hosts whose HTTP client already splits the events.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_stream_parser_push_data(
    parser: *mut dw_stream_parser,
    data: *const u8,
    len: usize,
) -> dw_status {
    boundary::with(parser, |h| {
        let bytes = boundary::bytes_arg(data, len, "data")?;
        self::parser(h)?.push_data(bytes).map_err(Error::malformed)
    })
}

/// The end of the body: the assembled response (as `dw_provider_parse_response` writes it) is
/// viewed in `*out` until the next call with `parser`. The parser takes no more input.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_stream_parser_finish(
    parser: *mut dw_stream_parser,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(parser, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let parser = h.engine.take().ok_or_else(|| {
            Error::with_kind(dw_status::Refused, "finished", "the stream is finished")
        })?;
        let response = parser.finish().map_err(Error::malformed)?;
        boundary::write(out, h.json_view(&response));
        Ok(())
    })
}

// ---- retrieval ----

/// A search index over tools (`deskwire::tools::retrieval::ToolIndex`): BM25 over names and
/// descriptions, blended with the host's scores or embeddings.
pub struct dw_tool_index(Handle<ToolIndex>);
as_handle!(dw_tool_index, ToolIndex);

/// Indexes `specs_json` (a JSON array of tool specs). On success `*out` is a new handle the
/// caller frees with `dw_tool_index_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_tool_index_new(
    specs_json: *const c_char,
    out: *mut *mut dw_tool_index,
) -> dw_status {
    boundary::new_handle(out, || {
        let specs = specs(specs_json, "specs_json")?;
        Ok(ToolIndex::new(&specs.iter().collect::<Vec<_>>()))
    })
}

/// Frees an index. `NULL` is a no-op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_tool_index_free(index: *mut dw_tool_index) {
    boundary::free_handle(index)
}

/// The message of the index's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_tool_index_last_error(index: *const dw_tool_index) -> *const c_char {
    boundary::last_error(index)
}

/// The kind of the index's last failed call: the core error's name (`"unknown_id"`, ...) or
/// the status's (`"invalid_json"`, ...), or `""` after a success. Same lifetime as
/// `dw_tool_index_last_error`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_tool_index_last_error_kind(
    index: *const dw_tool_index,
) -> *const c_char {
    boundary::last_error_kind(index)
}

/// Stores tool `name`'s embedding, `values[0..len]` (copied). Every embedding of an index has
/// the first one's dimension: `DW_STATUS_INVALID_ARGUMENT` for another, for a tool the index
/// does not hold, for no values and for a value that is NaN or infinite.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_tool_index_set_embedding(
    index: *mut dw_tool_index,
    name: *const c_char,
    values: *const f32,
    len: usize,
) -> dw_status {
    boundary::with(index, |h| {
        let name = boundary::str_arg(name, "name")?;
        let values = boundary::slice_arg(values, len, "values")?;
        h.engine
            .set_embedding(name, values.to_vec())
            .map_err(Error::argument)
    })
}

/// The `n` best tools for `query` by BM25, as `[{"name", "score"}]` in `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_tool_index_top_n(
    index: *mut dw_tool_index,
    query: *const c_char,
    n: usize,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(index, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let query = boundary::str_arg(query, "query")?;
        let ranked = h.engine.top_n(query, n);
        boundary::write(out, h.json_view(&ranked));
        Ok(())
    })
}

/// The `n` best tools blending BM25 (weight `lexical_weight`, clamped to 0..1) with the host's
/// `host_scores_json`: `"none"`, `{"scores": {"name": 0.8}}` or `{"query_embedding": [..]}`
/// (cosine with the stored embeddings; `DW_STATUS_INVALID_ARGUMENT` when none is stored or the
/// query's dimension differs). `[{"name", "score"}]` in `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_tool_index_top_n_hybrid(
    index: *mut dw_tool_index,
    query: *const c_char,
    n: usize,
    host_scores_json: *const c_char,
    lexical_weight: f64,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(index, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let query = boundary::str_arg(query, "query")?;
        let host: HostScores = boundary::json_arg(host_scores_json, "host_scores_json")?;
        if lexical_weight.is_nan() {
            return Err(Error::argument("lexical_weight is NaN"));
        }
        let ranked = h
            .engine
            .top_n_hybrid(query, n, &host, lexical_weight)
            .map_err(Error::argument)?;
        boundary::write(out, h.json_view(&ranked));
        Ok(())
    })
}

// ---- routing ----

/// Routes a logical tool call (`bash`, `read`, `write`, `list`, `glob`, `stat`) to the REXD
/// request it means in session `session_id`: `{"method", "params"}` written to the caller's
/// buffer as for `dw_provider_request_tools`. `DW_STATUS_INVALID_ARGUMENT` for another tool or
/// arguments that do not fit.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_tools_rexd_request(
    call_json: *const c_char,
    session_id: *const c_char,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let call: ToolCall = boundary::object_arg(call_json, "call_json")?;
        let session = boundary::str_arg(session_id, "session_id")?;
        let request = builtin::rexd_request(&call, session).map_err(Error::argument)?;
        boundary::json_to_buffer(&request, out, cap, out_len)
    })
}
