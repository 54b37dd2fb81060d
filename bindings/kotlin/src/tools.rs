//! The tool layer: what each agent may see (`RemoteBash` only while its NPC sits at the desk),
//! whether a call may run (policy: deny lists, path roots, approvals), the approvals in between,
//! and slash commands typed by a user.
//!
//! Tool arguments and schemas are whatever JSON the tool defines, so they cross as JSON text;
//! the policy, a configuration, is given as the JSON of `tests/vectors/tools.json`.

use std::sync::{Arc, Mutex};

use deskwire::ids::IdGenerator;
use deskwire::tools::{self, providers, slash, toolbox};

use crate::error::{Result, api};
use crate::lock;
use crate::providers::write_request_tools;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolSpec {
    /// The name the model calls.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments, JSON text.
    pub input_schema_json: String,
}

/// One call of a tool. The last three fields carry what a provider needs back on the next
/// turn; a call read from a response keeps them, a call made by hand leaves them out.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolCall {
    /// The call's id (the provider's, or a generated one when it gave none).
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments, JSON text.
    pub args_json: String,
    /// The provider's item id when it differs from the call id (OpenAI Responses `fc_…`).
    #[uniffi(default = None)]
    pub item_id: Option<String>,
    /// Gemini's `thoughtSignature` of the call.
    #[uniffi(default = None)]
    pub thought_signature: Option<String>,
    /// The provider sent no id and `id` was generated (echoes leave it out).
    #[uniffi(default = false)]
    pub id_generated: bool,
}

/// What an agent's tools depend on.
#[derive(Debug, Clone, PartialEq, Eq, Default, uniffi::Record)]
pub struct ToolContext {
    /// The NPC bound to the desk, if any (`RemoteBash` is visible to that NPC only).
    #[uniffi(default = None)]
    pub bound_npc_id: Option<String>,
    /// The execution target, if any.
    #[uniffi(default = None)]
    pub target: Option<String>,
    /// The working directory, if any (path rules resolve against it).
    #[uniffi(default = None)]
    pub cwd: Option<String>,
    /// Flags tools may depend on.
    #[uniffi(default = [])]
    pub flags: Vec<String>,
}

/// When a registered tool is visible.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum ToolVisibility {
    /// Always.
    Always,
    /// Never (slash commands only).
    Never,
    /// While the agent's NPC is bound to the desk.
    WhileBound,
    /// While a target is set.
    WithTarget,
    /// While a flag is set.
    WithFlag {
        /// The flag.
        flag: String,
    },
}

/// A call waiting for a human.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolApprovalRequest {
    /// The approval's id.
    pub id: String,
    /// The agent.
    pub agent: String,
    /// The call.
    pub call: ToolCall,
    /// Its tier.
    pub tier: tools::Tier,
    /// A description for the person.
    pub description: String,
    /// The command or subject of the call (what a prompt shows).
    pub command: String,
    /// When it times out (ms).
    pub deadline_ms: u64,
}

/// A settled approval.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolApprovalDecided {
    /// The request.
    pub request: ToolApprovalRequest,
    /// How it ended.
    pub outcome: tools::Outcome,
    /// Whether the answer is remembered for such calls.
    pub remember: bool,
    /// The reason given.
    pub reason: Option<String>,
    /// Whether the call may run now.
    pub may_run: bool,
    /// The error result for the model when it may not.
    pub observation: Option<String>,
}

/// What the host should learn.
// uniffi enums carry values, not boxes, and an event is moved out once.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum ToolboxEvent {
    /// An agent's visible tools changed.
    ToolsChanged {
        /// The agent.
        agent: String,
        /// What it sees now.
        visible: Vec<String>,
        /// What appeared.
        added: Vec<String>,
        /// What went away.
        removed: Vec<String>,
    },
    /// A call needs a human (a mobile `permission_request`, a gateway approval).
    ApprovalRequested {
        /// The request.
        request: ToolApprovalRequest,
    },
    /// A waiting call was settled.
    ApprovalDecided {
        /// The settlement.
        decided: ToolApprovalDecided,
    },
}

/// What the toolbox wants next.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum ToolboxOutput {
    /// Tell the app.
    Event {
        /// The event.
        event: ToolboxEvent,
    },
    /// Nothing to do before this instant.
    Timeout {
        /// The deadline (ms).
        deadline_ms: u64,
    },
}

/// The tool layer for many agents as one sans-IO engine.
#[derive(uniffi::Object)]
pub struct Toolbox {
    inner: Mutex<toolbox::Toolbox>,
}

#[uniffi::export]
impl Toolbox {
    /// deskwire's built-in tools (`RemoteBash` while bound; `bash`, `read`, `write`, `list`,
    /// `glob`, `stat` always) under `policy_json` (`{"default", "rules"}`; `null` allows all).
    #[uniffi::constructor]
    pub fn new(policy_json: Option<String>, seed: u64) -> Result<Arc<Self>> {
        let policy = match policy_json {
            Some(json) => api(|| serde_json::from_str::<tools::Policy>(&json))?,
            None => tools::Policy::allow_all(),
        };
        Ok(Arc::new(Toolbox {
            inner: Mutex::new(toolbox::Toolbox::new(
                tools::Registry::with_builtins(),
                policy,
                toolbox::Config::default(),
                seed,
            )),
        }))
    }

    /// Adds a tool.
    pub fn register(&self, spec: ToolSpec, visibility: ToolVisibility) -> Result<()> {
        let spec = tools::ToolSpec::try_from(spec)?;
        api(|| lock(&self.inner).register(spec, visibility.into()))
    }

    /// Removes a tool; whether it was there.
    pub fn unregister(&self, name: String) -> bool {
        lock(&self.inner).unregister(&name).is_some()
    }

    /// Sets what an agent's tools depend on (a `ToolsChanged` follows when its list changes).
    pub fn set_context(&self, agent: String, context: ToolContext) -> Result<()> {
        api(|| lock(&self.inner).set_context(&agent, context.into()))
    }

    /// Forgets an agent.
    pub fn remove_agent(&self, agent: String) -> bool {
        lock(&self.inner).remove_agent(&agent)
    }

    /// What `agent` may see now.
    pub fn visible_tools(&self, agent: String) -> Vec<ToolSpec> {
        lock(&self.inner)
            .visible_tools(&agent)
            .into_iter()
            .map(|s| ToolSpec::from(s.clone()))
            .collect()
    }

    /// What the gate says about a call, without side effects.
    pub fn authorize(
        &self,
        agent: String,
        call: ToolCall,
        origin: tools::Origin,
    ) -> Result<tools::Authorization> {
        let call = tools::ToolCall::try_from(call)?;
        Ok(lock(&self.inner).authorize(&agent, &call, origin))
    }

    /// Decides a call: run, refuse, or ask a human (an `ApprovalRequested` follows).
    pub fn check_call(
        &self,
        now_ms: u64,
        agent: String,
        call: ToolCall,
        origin: tools::Origin,
    ) -> Result<toolbox::Verdict> {
        let call = tools::ToolCall::try_from(call)?;
        api(|| lock(&self.inner).check_call(now_ms, &agent, &call, origin))
    }

    /// A human answered approval `id`.
    pub fn respond(
        &self,
        now_ms: u64,
        id: String,
        approved: bool,
        remember: bool,
        reason: Option<String>,
    ) -> Result<ToolApprovalDecided> {
        let response = tools::ApprovalResponse {
            id,
            approved,
            remember,
            reason,
        };
        api(|| lock(&self.inner).respond(now_ms, &response)).map(Into::into)
    }

    /// Withdraws a waiting approval.
    pub fn cancel_approval(&self, id: String) -> Result<ToolApprovalDecided> {
        api(|| lock(&self.inner).cancel_approval(&id)).map(Into::into)
    }

    /// The waiting approvals.
    pub fn pending_approvals(&self) -> Vec<ToolApprovalRequest> {
        lock(&self.inner)
            .pending_approvals()
            .cloned()
            .map(Into::into)
            .collect()
    }

    /// The tool fields of `agent`'s next request to `provider` (`tools`, `tool_choice`,
    /// `toolConfig`, ...), a JSON object as text to merge into the request body: the tools
    /// the agent sees now. With `keep_list`, every registered tool is listed and the visible
    /// ones allowed where the API can gate that way (Responses, Gemini), so the prompt
    /// prefix, and the provider's cache of it, stays the same when the agent's tools change.
    #[uniffi::method(default(keep_list = false, parallel_tool_calls = None, strict = false))]
    pub fn request_tools(
        &self,
        agent: String,
        provider: providers::Provider,
        choice: providers::ToolChoice,
        keep_list: bool,
        parallel_tool_calls: Option<bool>,
        strict: bool,
    ) -> String {
        let inner = lock(&self.inner);
        let mut request = inner.tool_request(&agent, keep_list);
        request.choice = choice;
        request.parallel_tool_calls = parallel_tool_calls;
        request.strict = strict;
        write_request_tools(provider, &request)
    }

    /// Reads a slash command a person typed (`/bash ls -la`, `/read path=x`, `/RemoteBash {...}`)
    /// as a call of a registered tool.
    pub fn parse_slash(&self, line: String, seed: u64) -> Result<ToolCall> {
        let inner = lock(&self.inner);
        api(|| slash::parse(&line, inner.registry(), &mut IdGenerator::new(seed))).map(Into::into)
    }

    /// Does what is due by `now_ms` (approvals time out).
    pub fn handle_timeout(&self, now_ms: u64) {
        lock(&self.inner).handle_timeout(now_ms)
    }

    /// The next event or deadline; call until it answers `Timeout`.
    pub fn poll_output(&self, now_ms: u64) -> ToolboxOutput {
        lock(&self.inner).poll_output(now_ms).into()
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions

fn json_text(value: &serde_json::Value) -> String {
    value.to_string()
}

impl From<tools::ToolSpec> for ToolSpec {
    fn from(s: tools::ToolSpec) -> Self {
        ToolSpec {
            input_schema_json: json_text(&s.input_schema),
            name: s.name,
            description: s.description,
        }
    }
}

impl TryFrom<ToolSpec> for tools::ToolSpec {
    type Error = crate::DeskwireError;

    fn try_from(s: ToolSpec) -> Result<Self> {
        Ok(tools::ToolSpec {
            name: s.name,
            description: s.description,
            input_schema: api(|| serde_json::from_str(&s.input_schema_json))?,
        })
    }
}

impl From<tools::ToolCall> for ToolCall {
    fn from(c: tools::ToolCall) -> Self {
        ToolCall {
            args_json: json_text(&c.args),
            id: c.id,
            name: c.name,
            item_id: c.item_id,
            thought_signature: c.thought_signature,
            id_generated: c.id_generated,
        }
    }
}

impl TryFrom<ToolCall> for tools::ToolCall {
    type Error = crate::DeskwireError;

    fn try_from(c: ToolCall) -> Result<Self> {
        Ok(tools::ToolCall {
            args: api(|| serde_json::from_str(&c.args_json))?,
            id: c.id,
            name: c.name,
            item_id: c.item_id,
            thought_signature: c.thought_signature,
            id_generated: c.id_generated,
        })
    }
}

impl From<ToolContext> for tools::Context {
    fn from(c: ToolContext) -> Self {
        tools::Context {
            bound_npc_id: c.bound_npc_id,
            target: c.target,
            cwd: c.cwd,
            flags: c.flags.into_iter().collect(),
        }
    }
}

impl From<ToolVisibility> for tools::Visibility {
    fn from(v: ToolVisibility) -> Self {
        match v {
            ToolVisibility::Always => tools::Visibility::Always,
            ToolVisibility::Never => tools::Visibility::Never,
            ToolVisibility::WhileBound => tools::Visibility::WhileBound,
            ToolVisibility::WithTarget => tools::Visibility::WithTarget,
            ToolVisibility::WithFlag { flag } => tools::Visibility::WithFlag(flag),
        }
    }
}

impl From<tools::ApprovalRequest> for ToolApprovalRequest {
    fn from(r: tools::ApprovalRequest) -> Self {
        ToolApprovalRequest {
            command: r.command(),
            id: r.id,
            agent: r.agent,
            call: r.call.into(),
            tier: r.tier,
            description: r.description,
            deadline_ms: r.deadline_ms,
        }
    }
}

impl From<tools::ApprovalDecided> for ToolApprovalDecided {
    fn from(d: tools::ApprovalDecided) -> Self {
        let may_run = d.may_run();
        let observation = d.observation();
        ToolApprovalDecided {
            outcome: d.outcome,
            request: d.request.into(),
            remember: d.remember,
            reason: d.reason,
            may_run,
            observation,
        }
    }
}

impl From<toolbox::Event> for ToolboxEvent {
    fn from(e: toolbox::Event) -> Self {
        match e {
            toolbox::Event::ToolsChanged(c) => ToolboxEvent::ToolsChanged {
                agent: c.agent,
                visible: c.visible,
                added: c.added,
                removed: c.removed,
            },
            toolbox::Event::ApprovalRequested(r) => {
                ToolboxEvent::ApprovalRequested { request: r.into() }
            }
            toolbox::Event::ApprovalDecided(d) => {
                ToolboxEvent::ApprovalDecided { decided: d.into() }
            }
            other => unmapped!(other),
        }
    }
}

impl From<toolbox::Output> for ToolboxOutput {
    fn from(o: toolbox::Output) -> Self {
        match o {
            toolbox::Output::Event(e) => ToolboxOutput::Event { event: e.into() },
            toolbox::Output::Timeout(deadline_ms) => ToolboxOutput::Timeout { deadline_ms },
            other => unmapped!(other),
        }
    }
}
