//! `RemoteBashTool`: the `RemoteBash` tool definition, and a model's tool call run through a
//! `DeskRpcClient` and turned back into the tool result message.

use deskwire::ids::IdGenerator;
use deskwire::oa1::remote_bash;
use deskwire::tools::builtin;
use godot::prelude::*;
use serde_json::Value;

use crate::desk_client::DeskRpcClient;
use crate::on_main_thread;
use crate::remote_call::RemoteCall;
use crate::shapes::{self, Format};
use crate::variant;

/// The `RemoteBash` tool: its definition for the model, and the glue from the model's tool call
/// to a [RemoteCall] and back to the tool result.
///
/// ```gdscript
/// # The model answered with tool calls (OpenAI Chat: message.tool_calls).
/// for tool_call in message.tool_calls:
///     var verdict := gate.authorize(npc_id, tool_call)
///     if not verdict.allowed:
///         messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": verdict.observation})
///     elif RemoteBashTool.handles(tool_call):
///         var call := RemoteBashTool.run(desk, tool_call)
///         await call.completed
///         messages.append(call.tool_message())
/// ```
///
/// `provider` names the format of definitions, calls and results:
/// `openai_chat` (default), `openai_responses`, `anthropic`,
/// `gemini` or `deskwire`.
#[derive(GodotClass)]
#[class(base = Object, no_init)]
pub struct RemoteBashTool {
    base: Base<Object>,
}

#[godot_api]
impl RemoteBashTool {
    /// The tool's name, `"RemoteBash"`: the name its [method definition] gives the model and
    /// the one a model's call to it carries (what [method handles] looks for). Use it to compare
    /// or route tool calls without spelling the name out.
    #[func]
    fn tool_name() -> GString {
        remote_bash::TOOL_NAME.into()
    }

    /// The tool definition in [param provider]'s format: one entry of a request's
    /// `tools` array (the core's schema and description: `docs/oa1.md`, "`RemoteBash`").
    /// [ToolGate] lists it by itself while an NPC is bound; this is for runtimes that build their
    /// own list.
    #[func]
    fn definition(#[opt(default = "openai_chat")] provider: GString) -> VarDictionary {
        let Some(format) = format(&provider) else {
            return VarDictionary::new();
        };
        let spec = builtin::remote_bash();
        match shapes::tool_list(format, vec![&spec]).first() {
            Some(tool) => variant::dictionary_of(tool),
            None => VarDictionary::new(),
        }
    }

    /// Whether [param tool_call] (in [param provider]'s format) calls `RemoteBash`.
    #[func]
    fn handles(
        tool_call: VarDictionary,
        #[opt(default = "openai_chat")] provider: GString,
    ) -> bool {
        let Some(format) = format(&provider) else {
            return false;
        };
        read(&tool_call, format).is_ok_and(|c| c.name == remote_bash::TOOL_NAME)
    }

    /// Runs [param tool_call] on [param client]: its `command` (and
    /// `timeout_sec`) go out as one OA1 request. Await the call's
    /// [signal RemoteCall.completed], then send [method RemoteCall.tool_message] back to the
    /// model. Arguments the tool refuses complete the call at once with
    /// `invalid_arguments` (its tool message tells the model why), through
    /// [signal DeskRpcClient.request_failed] like any other failure. Without a [param client]
    /// (`null`) the call completes with `closed`, its [member RemoteCall.id] the tool call's
    /// id, and its [method RemoteCall.tool_message] tells the model so. Check the call with [method ToolGate.authorize]
    /// first. [param provider] is `openai_chat` by default (see the class description). Off the
    /// main thread it returns `null` and prints an error.
    #[func]
    fn run(
        client: Option<Gd<DeskRpcClient>>,
        tool_call: VarDictionary,
        #[opt(default = "openai_chat")] provider: GString,
    ) -> Option<Gd<RemoteCall>> {
        if !on_main_thread("RemoteBashTool.run") {
            return None;
        }
        let read = format(&provider)
            .ok_or_else(|| format!("unknown provider {provider}"))
            .and_then(|format| Ok((read(&tool_call, format)?, format)));
        let Some(mut client) = client else {
            // Still an answer for the model: the call carries the tool call's id, and its
            // tool_message() tells the model why (a tool call that does not read fails as with
            // a client, `invalid_arguments`).
            let (id, tool, code, message) = match read {
                Ok((call, format)) => {
                    let message = "no DeskRpcClient was given".to_owned();
                    (call.id.clone(), Some((call, format)), "closed", message)
                }
                Err(message) => (String::new(), None, "invalid_arguments", message),
            };
            let mut call = RemoteCall::create(&id, None, tool);
            RemoteCall::settle(&mut call, shapes::local_failure(&id, code, &message));
            return Some(call);
        };
        let mut client = client.bind_mut();
        Some(match read {
            Ok((call, format)) => {
                let args = shapes::read_remote_bash(&call);
                client.start(args, Some((call, format)))
            }
            Err(message) => client.fail_at_once(None, "invalid_arguments", &message),
        })
    }
}

fn format(provider: &GString) -> Option<Format> {
    match Format::from_name(&provider.to_string()) {
        Ok(f) => Some(f),
        Err(e) => {
            godot_error!("RemoteBashTool: {e}");
            None
        }
    }
}

fn read(tool_call: &VarDictionary, format: Format) -> Result<deskwire::tools::ToolCall, String> {
    let value = variant::from_dictionary(tool_call).map_err(|e| e.to_string())?;
    // Ids only matter for Gemini calls that came without one; they are made here once.
    let mut ids = IdGenerator::new(u64::from(godot::global::randi() as u32));
    shapes::tool_call(format, Value::Object(value), &mut ids).map_err(|e| e.to_string())
}
