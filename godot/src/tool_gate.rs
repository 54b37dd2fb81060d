//! `ToolGate`: which tools each NPC's model may see and call (dynamic tool schema filtering:
//! `docs/tools.md`, "Gating"), over the core's `Toolbox`.

use std::collections::HashMap;

use deskwire::ids::IdGenerator;
use deskwire::tools::providers::ToolRequest;
use deskwire::tools::toolbox::Config;
use deskwire::tools::{
    Context, Event, Output, Policy, Registry, ToolSpec, Toolbox, Visibility, builtin, slash,
};
use godot::classes::{IRefCounted, RefCounted, Time};
use godot::global::Error;
use godot::prelude::*;
use godot::register::property::PhantomVar;
use serde_json::Value;

use crate::shapes::{self, Format};
use crate::{on_main_thread, variant};

/// Decides which tools each NPC's language model sees and may call.
///
/// `RemoteBash` is listed only while the NPC sits at a desk ([method bind_npc] until
/// [method unbind_npc]; a desk seats one NPC, and seating another there unbinds the first with
/// [signal npc_displaced]); the project's own tools ([method register_tool]) are listed always,
/// or only while bound. Send [method visible_tools] with every request to the model, and pass
/// every tool call the model makes through [method authorize] before running it: a model can
/// call a tool it was not shown (from an earlier turn), and such a call is refused with an
/// observation to send back as the call's result.
///
/// ```gdscript
/// var gate := ToolGate.new()
/// gate.tools_changed.connect(func(npc_id): print(npc_id, " now sees ", gate.visible_tool_names(npc_id)))
/// gate.bind_npc("npc-1", "desk-1")            # RemoteBash appears for npc-1
/// var tools := gate.visible_tools("npc-1")    # OpenAI Chat "tools" array
/// var verdict := gate.authorize("npc-1", tool_call)
/// if not verdict.allowed:
///     messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": verdict.observation})
/// ```
///
/// A [member policy] can ask a human before some calls or refuse them (`needs_approval` and
/// `denied` verdicts); [method set_context] gives it the NPC's working directory and flags.
/// Commands the player types (`/RemoteBash uptime`) become calls with [method parse_slash]
/// and are checked with `origin` `"user"`.
///
/// Tool lists and tool calls are Dictionaries in the format named by [member provider]
/// (`openai_chat` by default; `openai_responses`, `anthropic`,
/// `gemini`, or `deskwire` for deskwire's own `{id, name, args}`).
/// Numbers parsed by `JSON.parse_string` are floats; whole ones count as integers.
#[derive(GodotClass)]
#[class(base = RefCounted)]
pub struct ToolGate {
    toolbox: Toolbox,
    /// npc → desk, and desk → npc: one NPC per desk.
    desk_of: HashMap<String, String>,
    npc_at: HashMap<String, String>,
    ids: IdGenerator,
    format: Format,
    /// The format of tool lists and tool calls: `openai_chat` (the default),
    /// `openai_responses`, `anthropic`, `gemini` or
    /// `deskwire`. The methods' `provider` arguments, when not `""`, override it for one call.
    /// Setting an unknown name is an error and keeps the old one.
    #[var(get = get_provider, set = set_provider)]
    provider: PhantomVar<GString>,
    /// The rules calls are checked against, in the core's shape: `{"default": action,
    /// "rules": [{"tool", "when", "action"}]}`. An action is `"allow"`,
    /// `{"ask": "low" | "medium" | "high"}` or `{"deny": "reason"}`; `when` is
    /// `"always"`, `{"commands": [globs]}` (a shell command, each part of a chain),
    /// `{"arg": name, "patterns": [globs]}` or `{"outside": [roots]}` (paths). `tool` is a
    /// name or `"*"`. The default, `{"default": "allow", "rules": []}`, allows every call the
    /// NPC may see (hidden tools are refused whatever the policy). Setting an invalid policy is
    /// an error and keeps the old one.
    #[var(get = get_policy, set = set_policy)]
    policy: PhantomVar<VarDictionary>,
    base: Base<RefCounted>,
}

#[godot_api]
impl IRefCounted for ToolGate {
    fn init(base: Base<RefCounted>) -> Self {
        let mut registry = Registry::new();
        registry
            .register(builtin::remote_bash(), Visibility::WhileBound)
            .expect("an empty registry takes RemoteBash");
        ToolGate {
            toolbox: Toolbox::new(registry, Policy::allow_all(), Config::default(), seed()),
            desk_of: HashMap::new(),
            npc_at: HashMap::new(),
            ids: IdGenerator::new(seed()),
            format: Format::DEFAULT,
            provider: PhantomVar::default(),
            policy: PhantomVar::default(),
            base,
        }
    }
}

fn seed() -> u64 {
    // Ids only need to differ between gates; Godot's generator is seeded at start-up.
    let half = || godot::global::randi() as u64 & 0xffff_ffff;
    (half() << 32) | half()
}

fn now() -> u64 {
    Time::singleton().get_ticks_msec()
}

#[godot_api]
impl ToolGate {
    /// Emitted when the tools [param npc_id] may see changed (bound, unbound, a tool
    /// registered or removed). Rebuild its tool list with [method visible_tools].
    #[signal]
    fn tools_changed(npc_id: GString);

    /// [param npc_id] lost its seat at [param desk_id] because [method bind_npc] seated
    /// [param by_npc_id] there (one NPC per desk): it no longer sees `RemoteBash`. Stand it up
    /// in the scene, or seat it elsewhere. Emitted after [signal tools_changed].
    #[signal]
    fn npc_displaced(npc_id: GString, desk_id: GString, by_npc_id: GString);

    /// See [member provider].
    #[func]
    fn get_provider(&self) -> GString {
        self.format.name().into()
    }

    /// See [member provider].
    #[func]
    fn set_provider(&mut self, name: GString) {
        match Format::from_name(&name.to_string()) {
            Ok(f) => self.format = f,
            Err(e) => godot_error!("ToolGate.provider: {e}"),
        }
    }

    /// See [member policy].
    #[func]
    fn get_policy(&self) -> VarDictionary {
        variant::dictionary_of(&shapes::policy_json(self.toolbox.policy()))
    }

    /// See [member policy].
    #[func]
    fn set_policy(&mut self, policy: VarDictionary) {
        let read = variant::from_dictionary(&policy)
            .map_err(|e| e.to_string())
            .and_then(|map| shapes::policy(Value::Object(map)));
        match read {
            Ok(p) => *self.toolbox.policy_mut() = p,
            Err(e) => godot_error!("ToolGate.policy: {e}"),
        }
    }

    /// Seats [param npc_id] at [param desk_id]: from now on its model sees `RemoteBash`.
    /// An NPC sitting at another desk moves. A desk seats one NPC: one already at this desk is
    /// unbound, and [signal npc_displaced] says so (check [method npc_at] first to refuse
    /// instead). Emits [signal tools_changed] for every NPC whose list changed.
    #[func]
    fn bind_npc(&mut self, npc_id: GString, desk_id: GString) -> Error {
        if !on_main_thread("ToolGate.bind_npc") {
            return Error::ERR_UNAVAILABLE;
        }
        let (npc, desk) = (npc_id.to_string(), desk_id.to_string());
        if npc.is_empty() || desk.is_empty() {
            godot_error!("ToolGate.bind_npc: npc_id and desk_id must not be empty");
            return Error::ERR_INVALID_PARAMETER;
        }
        let displaced = self.npc_at.get(&desk).filter(|o| **o != npc).cloned();
        if let Some(other) = &displaced {
            self.release(other);
        }
        if let Some(old_desk) = self.desk_of.insert(npc.clone(), desk.clone()) {
            self.npc_at.remove(&old_desk);
        }
        self.npc_at.insert(desk.clone(), npc.clone());
        let mut ctx = self.toolbox.context(&npc).cloned().unwrap_or_default();
        ctx.bound_npc_id = Some(npc.clone());
        let status = match self.toolbox.set_context(&npc, ctx) {
            Ok(()) => Error::OK,
            Err(e) => {
                godot_error!("ToolGate.bind_npc: {e}");
                self.forget(&npc);
                Error::ERR_OUT_OF_MEMORY
            }
        };
        self.emit_changes();
        if let Some(other) = displaced {
            self.signals().npc_displaced().emit(
                &GString::from(other.as_str()),
                &GString::from(desk.as_str()),
                &npc_id,
            );
        }
        status
    }

    /// Stands [param npc_id] up: `RemoteBash` disappears from its list and its calls are
    /// refused. Emits [signal tools_changed]. Returns `ERR_DOES_NOT_EXIST` when it
    /// was not bound.
    #[func]
    fn unbind_npc(&mut self, npc_id: GString) -> Error {
        if !on_main_thread("ToolGate.unbind_npc") {
            return Error::ERR_UNAVAILABLE;
        }
        let npc = npc_id.to_string();
        if !self.desk_of.contains_key(&npc) {
            return Error::ERR_DOES_NOT_EXIST;
        }
        self.release(&npc);
        self.emit_changes();
        Error::OK
    }

    /// The desk [param npc_id] sits at, or an empty string.
    #[func]
    fn desk_of(&self, npc_id: GString) -> GString {
        self.desk_of
            .get(&npc_id.to_string())
            .map(|d| GString::from(d.as_str()))
            .unwrap_or_default()
    }

    /// The NPC sitting at [param desk_id], or an empty string.
    #[func]
    fn npc_at(&self, desk_id: GString) -> GString {
        self.npc_at
            .get(&desk_id.to_string())
            .map(|n| GString::from(n.as_str()))
            .unwrap_or_default()
    }

    /// The tool definitions [param npc_id]'s model may see now, as the `tools`
    /// array of a request in [param provider]'s format (empty: [member provider]). For
    /// OpenAI Chat each entry is
    /// `{"type": "function", "function": {name, description, parameters}}`. An unknown format
    /// gives an empty array and an error.
    #[func]
    fn visible_tools(
        &self,
        npc_id: GString,
        #[opt(default = "")] provider: GString,
    ) -> Array<VarDictionary> {
        let mut out = Array::new();
        let Some(format) = self.format_or_default(&provider) else {
            return out;
        };
        let list = shapes::tool_list(format, self.toolbox.visible_tools(&npc_id.to_string()));
        for tool in &list {
            out.push(&variant::dictionary_of(tool));
        }
        out
    }

    /// The names of the tools [param npc_id] may see now.
    #[func]
    fn visible_tool_names(&self, npc_id: GString) -> PackedStringArray {
        self.toolbox
            .visible_tools(&npc_id.to_string())
            .iter()
            .map(|t| GString::from(t.name.as_str()))
            .collect()
    }

    /// All tool fields of [param npc_id]'s next request in [param provider]'s format
    /// (`""`: [member provider]; `tools`, and for Gemini `toolConfig`), to merge into the body.
    /// With [param keep_list], the APIs that can restrict calls without changing the list
    /// (OpenAI Responses, Gemini) get every tool with only the visible ones allowed, so a desk
    /// bind does not invalidate the provider's prompt cache.
    #[func]
    fn request_tools(
        &self,
        npc_id: GString,
        #[opt(default = "")] provider: GString,
        #[opt(default = false)] keep_list: bool,
    ) -> VarDictionary {
        let Some(format) = self.format_or_default(&provider) else {
            return VarDictionary::new();
        };
        let request: ToolRequest<'_> = self.toolbox.tool_request(&npc_id.to_string(), keep_list);
        variant::dictionary(&shapes::request_fields(format, &request))
    }

    /// Checks a call [param npc_id]'s model made before it runs. [param tool_call] is one
    /// call in [member provider]'s format (for OpenAI Chat an element of the assistant
    /// message's `tool_calls`), or in [param provider]'s when given. Returns the core's
    /// verdict with `allowed` added: `{"allowed": true, "kind": "allowed"}`, or
    /// `allowed: false` with `kind`: `denied` with a `reason` (`not_visible`,
    /// `invalid_arguments` or `policy`, with the policy's `message`) and `observation`, the
    /// text to send back as the call's result; `needs_approval` with a `tier` (`low`,
    /// `medium`, `high`) when the [member policy] asks a human: ask the player, and run it
    /// if they agree; `unknown` (with `observation`) for a tool that does not exist;
    /// `unreadable` for a Dictionary that is not a tool call. [param origin] is
    /// `"model"`, or `"user"` for a command the player typed ([method parse_slash]):
    /// no approval is asked for it, but hidden tools and denials still hold.
    #[func]
    fn authorize(
        &mut self,
        npc_id: GString,
        tool_call: VarDictionary,
        #[opt(default = "model")] origin: GString,
        #[opt(default = "")] provider: GString,
    ) -> VarDictionary {
        let origin = match shapes::origin(&origin.to_string()) {
            Ok(o) => o,
            Err(e) => {
                godot_error!("ToolGate.authorize: {e}");
                return variant::dictionary_of(&shapes::unreadable_call(&e));
            }
        };
        let Some(format) = self.format_or_default(&provider) else {
            return variant::dictionary_of(&shapes::unreadable_call("unknown provider"));
        };
        let verdict = match self.read_call(&tool_call, format) {
            Ok(call) => {
                shapes::authorization(&self.toolbox.authorize(&npc_id.to_string(), &call, origin))
            }
            Err(message) => shapes::unreadable_call(&message),
        };
        variant::dictionary_of(&verdict)
    }

    /// A command the player typed as a tool call: `/read notes.txt`,
    /// `/bash cwd='/srv/my app' make test` (`key=value` words, then the rest for the first
    /// required argument), `/RemoteBash {"command": "uptime"}` (JSON arguments). Returns
    /// `{"call": {"id", "name", "args"}}` (deskwire's shape: check it with
    /// `authorize(npc_id, result.call, "user", "deskwire")`), or `{"error": kind,
    /// "message"}` with `kind` one of `not_a_command` (the line does not start with `/`:
    /// send it to the model), `unknown_command`, `unterminated_quote`,
    /// `missing_argument`, `too_many_arguments`, `bad_value`, `bad_json`.
    #[func]
    fn parse_slash(&mut self, line: GString) -> VarDictionary {
        let result = slash::parse(&line.to_string(), self.toolbox.registry(), &mut self.ids);
        variant::dictionary_of(&shapes::slash_result(result))
    }

    /// Sets what else the [member policy] and tool visibility know about [param npc_id]:
    /// `{"cwd": "/srv/app"}` (relative paths in calls resolve against it),
    /// `{"target": "server-a"}` (the machine its calls go to), `{"flags": ["admin"]}`.
    /// Replaces what was set before; the desk binding stays as [method bind_npc] made it.
    /// Emits [signal tools_changed] when its list changed.
    #[func]
    fn set_context(&mut self, npc_id: GString, context: VarDictionary) -> Error {
        if !on_main_thread("ToolGate.set_context") {
            return Error::ERR_UNAVAILABLE;
        }
        let npc = npc_id.to_string();
        let bound = self.desk_of.contains_key(&npc).then_some(npc.as_str());
        let read = variant::from_dictionary(&context)
            .map_err(|e| e.to_string())
            .and_then(|map| shapes::context(Value::Object(map), bound));
        let ctx = match read {
            Ok(ctx) => ctx,
            Err(e) => {
                godot_error!("ToolGate.set_context: {e}");
                return Error::ERR_INVALID_PARAMETER;
            }
        };
        let result = if ctx == Context::default() {
            // Nothing to remember: an unknown NPC has the default context.
            let _ = self.toolbox.set_context(&npc, ctx);
            self.toolbox.remove_agent(&npc);
            Ok(())
        } else {
            self.toolbox.set_context(&npc, ctx)
        };
        self.emit_changes();
        match result {
            Ok(()) => Error::OK,
            Err(e) => {
                godot_error!("ToolGate.set_context: {e}");
                Error::ERR_OUT_OF_MEMORY
            }
        }
    }

    /// Adds REXD's logical tools (`bash`, `read`, `write`, `list`, `glob`,
    /// `stat`), always visible, for an agent runtime that routes them to `rexd` itself.
    /// `ERR_ALREADY_EXISTS` when one of them is registered already (the others are added).
    #[func]
    fn register_rexd_tools(&mut self) -> Error {
        if !on_main_thread("ToolGate.register_rexd_tools") {
            return Error::ERR_UNAVAILABLE;
        }
        let mut status = Error::OK;
        for spec in builtin::rexd_tools() {
            if let Err(e) = self.toolbox.register(spec, Visibility::Always) {
                godot_error!("ToolGate.register_rexd_tools: {e}");
                status = Error::ERR_ALREADY_EXISTS;
            }
        }
        self.emit_changes();
        status
    }

    /// [param tool_call] (in [member provider]'s format) as deskwire's
    /// `{"id", "name", "args"}`: one shape whatever the provider, with `args` a Dictionary
    /// (OpenAI's JSON text of arguments parsed), for a project that runs its own tools:
    /// `match gate.read_tool_call(tool_call).name`. A call without an id (Gemini's) gets one
    /// made here. An empty Dictionary and an error when it is not a tool call. It checks
    /// nothing: pass the call through [method authorize] before running it.
    #[func]
    fn read_tool_call(&mut self, tool_call: VarDictionary) -> VarDictionary {
        match self.read_call(&tool_call, self.format) {
            Ok(call) => {
                variant::dictionary_of(&serde_json::to_value(call).expect("a call serializes"))
            }
            Err(message) => {
                godot_error!("ToolGate.read_tool_call: {message}");
                VarDictionary::new()
            }
        }
    }

    /// Adds one of the project's own tools, so its visibility is decided here too.
    /// [param tool] is `{"name", "description", "input_schema"}` (a JSON Schema
    /// whose root is an object); `{"type": "function", "function": {name, description,
    /// parameters}}` (OpenAI Chat) is read too. With [param while_bound] it is listed
    /// only while the NPC sits at a desk, like `RemoteBash`.
    #[func]
    fn register_tool(
        &mut self,
        tool: VarDictionary,
        #[opt(default = false)] while_bound: bool,
    ) -> Error {
        if !on_main_thread("ToolGate.register_tool") {
            return Error::ERR_UNAVAILABLE;
        }
        let spec = match variant::from_dictionary(&tool)
            .map_err(|e| e.to_string())
            .and_then(|map| spec_from(Value::Object(map)))
        {
            Ok(spec) => spec,
            Err(e) => {
                godot_error!("ToolGate.register_tool: {e}");
                return Error::ERR_INVALID_PARAMETER;
            }
        };
        let visibility = if while_bound {
            Visibility::WhileBound
        } else {
            Visibility::Always
        };
        let result = self.toolbox.register(spec, visibility);
        self.emit_changes();
        match result {
            Ok(()) => Error::OK,
            Err(e) => {
                godot_error!("ToolGate.register_tool: {e}");
                Error::ERR_ALREADY_EXISTS
            }
        }
    }

    /// Removes a tool added with [method register_tool] (or `RemoteBash`). Returns whether
    /// it was there.
    #[func]
    fn unregister_tool(&mut self, name: GString) -> bool {
        if !on_main_thread("ToolGate.unregister_tool") {
            return false;
        }
        let removed = self.toolbox.unregister(&name.to_string()).is_some();
        self.emit_changes();
        removed
    }
}

impl ToolGate {
    fn format_or_default(&self, name: &GString) -> Option<Format> {
        if name.is_empty() {
            return Some(self.format);
        }
        match Format::from_name(&name.to_string()) {
            Ok(f) => Some(f),
            Err(e) => {
                godot_error!("ToolGate: {e}");
                None
            }
        }
    }

    fn read_call(
        &mut self,
        tool_call: &VarDictionary,
        format: Format,
    ) -> Result<deskwire::tools::ToolCall, String> {
        let value = variant::from_dictionary(tool_call).map_err(|e| e.to_string())?;
        shapes::tool_call(format, Value::Object(value), &mut self.ids).map_err(|e| e.to_string())
    }

    /// Unbinds `npc` (its change is queued); an NPC with no other facts is forgotten, so the
    /// table stays as small as the number of seated NPCs and NPCs given a context.
    fn release(&mut self, npc: &str) {
        if let Some(desk) = self.desk_of.remove(npc) {
            self.npc_at.remove(&desk);
        }
        let mut ctx = self.toolbox.context(npc).cloned().unwrap_or_default();
        ctx.bound_npc_id = None;
        let idle = ctx == Context::default();
        // Setting the unbound context queues the change (the NPC is known, so it cannot fail
        // on the agent limit).
        let _ = self.toolbox.set_context(npc, ctx);
        if idle {
            self.toolbox.remove_agent(npc);
        }
    }

    fn forget(&mut self, npc: &str) {
        if let Some(desk) = self.desk_of.remove(npc) {
            self.npc_at.remove(&desk);
        }
    }

    /// Emits the queued changes. Handlers may call back into the gate (`base_mut` allows it).
    fn emit_changes(&mut self) {
        let now = now();
        let mut changed = Vec::new();
        while let Output::Event(event) = self.toolbox.poll_output(now) {
            if let Event::ToolsChanged(change) = event {
                changed.push(change.agent);
            }
        }
        for npc in changed {
            self.signals()
                .tools_changed()
                .emit(&GString::from(npc.as_str()));
        }
    }
}

/// A tool definition in deskwire's shape or OpenAI Chat's, checked by the core.
fn spec_from(value: Value) -> Result<ToolSpec, String> {
    let (name, description, schema) = match value.get("function") {
        Some(f) => (f.get("name"), f.get("description"), f.get("parameters")),
        None => (
            value.get("name"),
            value.get("description"),
            value.get("input_schema"),
        ),
    };
    let name = name
        .and_then(Value::as_str)
        .ok_or("the tool needs a string \"name\"")?;
    let description = description.and_then(Value::as_str).unwrap_or_default();
    let schema = schema
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    ToolSpec::new(name, description, schema).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_definitions_in_both_shapes() {
        let own = spec_from(json!({"name": "wave", "description": "Wave.",
                                   "input_schema": {"type": "object", "properties": {}}}))
        .unwrap();
        let chat = spec_from(json!({"type": "function", "function": {"name": "wave",
            "description": "Wave.", "parameters": {"type": "object", "properties": {}}}}))
        .unwrap();
        assert_eq!(own, chat);
        let bare = spec_from(json!({"name": "sit"})).unwrap();
        assert_eq!(bare.input_schema["type"], "object");
    }

    #[test]
    fn bad_tool_definitions_are_refused() {
        assert!(spec_from(json!({"description": "no name"})).is_err());
        assert!(spec_from(json!({"name": "two words"})).is_err());
        assert!(spec_from(json!({"name": "t", "input_schema": {"type": "string"}})).is_err());
    }
}
