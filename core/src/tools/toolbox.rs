//! [`Toolbox`]: the registry, the policy, the per-agent gate and the approval table as one
//! sans-IO engine with the crate's `poll_output` shape.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::approvals::{
    ApprovalConfig, ApprovalDecided, ApprovalError, ApprovalRequest, ApprovalResponse, Approvals,
};
use super::gating::Visibility;
use super::gating::{self, Authorization, Context, Gate, Origin, TooManyAgents, ToolsChanged};
use super::policy::Policy;
use super::providers::ToolRequest;
use super::registry::{Entry, Registry, RegistryError};
use super::slash::{self, SlashError};
use super::spec::{ToolCall, ToolSpec};
use crate::ids::IdGenerator;

/// Limits. JSON: `{"max_agents", "approvals": {"timeout_ms", "max_pending"}}`; missing fields
/// take the defaults; unknown ones are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Agents tracked at most (default 1024).
    pub max_agents: usize,
    /// The approval table's limits.
    pub approvals: ApprovalConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_agents: 1024,
            approvals: ApprovalConfig::default(),
        }
    }
}

/// Something the host should learn. JSON: externally tagged, snake_case
/// (`{"tools_changed": {...}}`, `{"approval_requested": {...}}`, `{"approval_decided": {...}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// An agent's visible tools changed: rebuild its tool list (send MCP
    /// `notifications/tools/list_changed`, or just use the new list on the next turn).
    ToolsChanged(ToolsChanged),
    /// A call needs a human: show it (mobile `permission_request`, gateway approval).
    ApprovalRequested(ApprovalRequest),
    /// A waiting call was settled: run it when [`ApprovalDecided::may_run`], else send its
    /// [`observation`](ApprovalDecided::observation) as the call's error result.
    ApprovalDecided(ApprovalDecided),
}

/// What [`Toolbox::poll_output`] answers. JSON: `{"event": ...}` or `{"timeout": ms}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
// An event is moved out once and is rare next to the work around it: boxing would only add an
// allocation per event.
#[allow(clippy::large_enum_variant)]
pub enum Output {
    /// Tell the application.
    Event(Event),
    /// Nothing to do before this instant (ms) unless new input arrives; then call
    /// [`Toolbox::handle_timeout`].
    Timeout(u64),
}

/// What to do with a call now. JSON: `"run"`, `{"refuse": {"observation"}}`,
/// `{"pending": {"approval_id"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "ToolVerdict"))]
pub enum Verdict {
    /// Run it.
    Run,
    /// Do not run it; send this as the call's error result.
    Refuse {
        /// The text for the model.
        observation: String,
    },
    /// A human was asked ([`Event::ApprovalRequested`]); wait for [`Event::ApprovalDecided`].
    Pending {
        /// The approval's id.
        approval_id: String,
    },
}

/// Host misuse. JSON: externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolboxError {
    /// See [`TooManyAgents`].
    #[error(transparent)]
    TooManyAgents(#[from] TooManyAgents),
    /// See [`RegistryError`].
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// See [`ApprovalError`].
    #[error(transparent)]
    Approval(#[from] ApprovalError),
}

/// Far deadline of an idle engine: an hour ahead.
const IDLE_MS: u64 = 3_600_000;

/// The tool layer for many agents: what each may see, whether a call may run, and the
/// approvals in between.
#[derive(Debug, Clone)]
pub struct Toolbox {
    registry: Registry,
    policy: Policy,
    gate: Gate,
    approvals: Approvals,
    /// Ids of the calls this engine makes (slash commands), so no two are alike.
    call_ids: IdGenerator,
    /// At most one `ToolsChanged` per agent (a new one absorbs a queued one) plus approval
    /// events, so the queue is bounded by the agent and approval limits.
    events: VecDeque<Event>,
}

impl Toolbox {
    /// An engine over `registry` and `policy`; `seed` fixes approval and call ids (hosts pass
    /// one from the OS's entropy; a fixed one is for tests).
    pub fn new(registry: Registry, policy: Policy, config: Config, seed: u64) -> Toolbox {
        Toolbox {
            registry,
            policy,
            gate: Gate::new(config.max_agents),
            approvals: Approvals::new(config.approvals, seed),
            // Another sequence than the approvals' (a SplitMix64 state far from theirs).
            call_ids: IdGenerator::new(!seed),
            events: VecDeque::new(),
        }
    }

    /// A slash command typed by a human (`/bash ls -la`) as a call of a registered tool, with
    /// an id of its own ([`slash::parse`]).
    pub fn parse_slash(&mut self, line: &str) -> Result<ToolCall, SlashError> {
        slash::parse(line, &self.registry, &mut self.call_ids)
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The policy, to add rules or forget remembered answers.
    pub fn policy_mut(&mut self) -> &mut Policy {
        &mut self.policy
    }

    /// Adds a tool; agents that can see it get `tools_changed`.
    pub fn register(&mut self, spec: ToolSpec, visibility: Visibility) -> Result<(), ToolboxError> {
        self.registry.register(spec, visibility)?;
        self.refresh();
        Ok(())
    }

    /// Removes a tool; agents that saw it get `tools_changed`.
    pub fn unregister(&mut self, name: &str) -> Option<Entry> {
        let entry = self.registry.remove(name)?;
        self.refresh();
        Some(entry)
    }

    fn refresh(&mut self) {
        for change in self.gate.refresh(&self.registry) {
            self.push(Event::ToolsChanged(change));
        }
    }

    /// Sets an agent's facts (bound NPC, target, cwd, flags); a change of what it may see
    /// becomes [`Event::ToolsChanged`] (also for a new agent, listing what it sees).
    pub fn set_context(&mut self, agent: &str, ctx: Context) -> Result<(), ToolboxError> {
        if let Some(change) = self.gate.set_context(&self.registry, agent, ctx)? {
            self.push(Event::ToolsChanged(change));
        }
        Ok(())
    }

    /// The agent's facts (`None` for an agent never set).
    pub fn context(&self, agent: &str) -> Option<&Context> {
        self.gate.context(agent)
    }

    /// Forgets an agent.
    pub fn remove_agent(&mut self, agent: &str) -> bool {
        self.gate.remove(agent)
    }

    /// What `agent` may see now (an unknown agent has the default context).
    pub fn visible_tools(&self, agent: &str) -> Vec<&ToolSpec> {
        let default = Context::default();
        let ctx = self.gate.context(agent).unwrap_or(&default);
        self.registry.visible_tools(agent, ctx)
    }

    /// The tool part of `agent`'s next provider request: its visible tools, and with
    /// `keep_list` the whole registry as the catalog, so APIs that can gate without changing
    /// the tool list (Responses, Gemini) keep their prompt cache across desk binds. Turn it into
    /// request fields with [`request_tools`](super::providers::request_tools).
    pub fn tool_request(&self, agent: &str, keep_list: bool) -> ToolRequest<'_> {
        ToolRequest {
            tools: self.visible_tools(agent),
            catalog: keep_list.then(|| self.registry.specs()),
            ..ToolRequest::default()
        }
    }

    /// [`gating::authorize`] with the agent's stored context; changes nothing.
    pub fn authorize(&self, agent: &str, call: &ToolCall, origin: Origin) -> Authorization {
        let default = Context::default();
        let ctx = self.gate.context(agent).unwrap_or(&default);
        gating::authorize(&self.registry, &self.policy, call, agent, ctx, origin)
    }

    /// Decides what to do with a call: run it, refuse it with an observation, or ask a human
    /// (a request with a deadline of `now` + the approval timeout).
    pub fn check_call(
        &mut self,
        now: u64,
        agent: &str,
        call: &ToolCall,
        origin: Origin,
    ) -> Result<Verdict, ToolboxError> {
        match self.authorize(agent, call, origin) {
            Authorization::Allowed => Ok(Verdict::Run),
            Authorization::NeedsApproval { tier } => {
                let tool_description = self
                    .registry
                    .get(&call.name)
                    .map(|e| e.spec.description.as_str())
                    .unwrap_or_default();
                let description = super::approvals::describe_call(agent, call, tool_description);
                let request =
                    match self
                        .approvals
                        .request(now, agent, call.clone(), tier, &description)
                    {
                        Ok(request) => request,
                        // No human can be asked now: the model is told, as for any refusal,
                        // and may try again later; its turn goes on.
                        Err(ApprovalError::TooManyPending(waiting)) => {
                            return Ok(Verdict::Refuse {
                                observation: format!(
                                    "Not run: {} needs a human's approval, and {waiting} \
                                     requests already wait for one. Try again later.",
                                    call.name
                                ),
                            });
                        }
                        Err(e) => return Err(e.into()),
                    };
                let approval_id = request.id.clone();
                self.push(Event::ApprovalRequested(request));
                Ok(Verdict::Pending { approval_id })
            }
            refused => Ok(Verdict::Refuse {
                observation: refused.observation().unwrap_or_default().to_owned(),
            }),
        }
    }

    /// Lets an answer to approval `id` come under `external_id` (the mobile server's id).
    pub fn link_external(&mut self, id: &str, external_id: &str) -> Result<(), ToolboxError> {
        Ok(self.approvals.link_external(id, external_id)?)
    }

    /// A human answered; "remember" is stored in the policy. Returns the settlement (also
    /// queued as [`Event::ApprovalDecided`]).
    pub fn respond(
        &mut self,
        now: u64,
        response: &ApprovalResponse,
    ) -> Result<ApprovalDecided, ToolboxError> {
        let decided = self.approvals.respond(now, response)?;
        if decided.remember {
            self.policy
                .remember(&decided.request.call, decided.may_run());
        }
        self.push(Event::ApprovalDecided(decided.clone()));
        Ok(decided)
    }

    /// Withdraws a waiting approval.
    pub fn cancel_approval(&mut self, id: &str) -> Result<ApprovalDecided, ToolboxError> {
        let decided = self.approvals.cancel(id)?;
        self.push(Event::ApprovalDecided(decided.clone()));
        Ok(decided)
    }

    /// The waiting approvals.
    pub fn pending_approvals(&self) -> impl Iterator<Item = &ApprovalRequest> {
        self.approvals.pending()
    }

    /// Time passed: approvals past their deadline settle as timed out.
    pub fn handle_timeout(&mut self, now: u64) {
        for decided in self.approvals.handle_timeout(now) {
            self.push(Event::ApprovalDecided(decided));
        }
    }

    /// The next event, or the next deadline (an hour ahead when idle). Call until it answers
    /// `Timeout`.
    pub fn poll_output(&mut self, now: u64) -> Output {
        if self.approvals.next_deadline().is_some_and(|d| d <= now) {
            self.handle_timeout(now);
        }
        match self.events.pop_front() {
            Some(event) => Output::Event(event),
            None => Output::Timeout(
                self.approvals
                    .next_deadline()
                    .unwrap_or(now.saturating_add(IDLE_MS)),
            ),
        }
    }

    fn push(&mut self, event: Event) {
        let Event::ToolsChanged(mut change) = event else {
            self.events.push_back(event);
            return;
        };
        let queued = self
            .events
            .iter()
            .position(|e| matches!(e, Event::ToolsChanged(c) if c.agent == change.agent));
        if let Some(Event::ToolsChanged(old)) = queued.and_then(|i| self.events.remove(i)) {
            // What the host last saw is the list before the queued change.
            let mut before: Vec<String> = old
                .visible
                .iter()
                .filter(|n| !old.added.contains(n))
                .cloned()
                .collect();
            before.extend(old.removed);
            change.added = change
                .visible
                .iter()
                .filter(|n| !before.contains(n))
                .cloned()
                .collect();
            change.removed = before
                .into_iter()
                .filter(|n| !change.visible.contains(n))
                .collect();
            if change.added.is_empty() && change.removed.is_empty() {
                return;
            }
        }
        self.events.push_back(Event::ToolsChanged(change));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::providers::{self, Provider};

    #[test]
    fn tool_request_gates_by_list_or_by_allowed_names() {
        let mut tools = Toolbox::new(
            Registry::with_builtins(),
            Policy::allow_all(),
            Config::default(),
            0,
        );
        tools.set_context("npc", Context::default()).unwrap();
        let chat = providers::request_tools(Provider::OpenAiChat, &tools.tool_request("npc", true));
        assert_eq!(chat["tools"].as_array().unwrap().len(), 6);
        let gemini = providers::request_tools(Provider::Gemini, &tools.tool_request("npc", true));
        let declared = &gemini["tools"][0]["functionDeclarations"];
        assert_eq!(declared.as_array().unwrap().len(), 7);
        let allowed = &gemini["toolConfig"]["functionCallingConfig"]["allowedFunctionNames"];
        assert!(!allowed.as_array().unwrap().contains(&"RemoteBash".into()));
    }
}
