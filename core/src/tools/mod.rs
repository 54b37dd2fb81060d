//! The tool layer: the model sees one small set of logical tools; the runtime decides what is
//! visible, what is allowed and where it runs (`docs/tools.md`).
//!
//! - [`spec`]: [`ToolSpec`], [`ToolCall`], [`ToolResult`].
//! - [`builtin`]: `RemoteBash` and REXD's logical tools, and routing a logical call to a REXD
//!   request ([`builtin::rexd_request`]).
//! - [`registry`]: the tools with their visibility rules, in a stable order.
//! - [`gating`]: [`Visibility`] over a per-agent [`Context`], [`Registry::visible_tools`],
//!   [`authorize`] at call time, `tools_changed` ([`ToolsChanged`]).
//! - [`policy`]: allow / deny / ask per tool and argument pattern, remembered answers.
//! - [`approvals`]: requests with ids and deadlines, answers, timeouts; mappings to the mobile
//!   `permission_request` and the gateway `approvals.*`.
//! - [`providers`]: translation to and from OpenAI Chat and Responses, Anthropic and Gemini.
//! - [`slash`]: `/read notes.txt` → a user-authorised call of the same tool.
//! - [`retrieval`]: top-N tools for an intent (BM25 over names and descriptions, blended with
//!   host-supplied scores or embeddings).
//! - [`Toolbox`]: all of the above as one sans-IO engine (`poll_output`).
//!
//! # What is gated where
//!
//! 1. **Listing** ([`Registry::visible_tools`], [`Toolbox::tool_request`]): each tool's
//!    [`Visibility`] over the agent's [`Context`]; `RemoteBash` is [`Visibility::WhileBound`]
//!    (`bound_npc_id == agent`). A change is a [`ToolsChanged`] event.
//! 2. **Request** ([`providers`]): OpenAI Chat and Anthropic get only the visible tools; OpenAI
//!    Responses (`allowed_tools`) and Gemini (`allowedFunctionNames`) can get the whole,
//!    stable list with the visible names allowed, so a desk bind does not change the cached
//!    prompt prefix.
//! 3. **Call** ([`authorize`], [`Toolbox::check_call`]): unknown tool → an observation naming
//!    the tools the agent has; hidden tool → refused, never run; arguments checked against the
//!    schema's top level; then the [`Policy`] (deny lists, path roots, ask), with remembered
//!    answers. Slash commands ([`slash`]) are [`Origin::User`]: no prompt, same refusals.
//! 4. **Approval** ([`approvals`]): an id and a deadline; answered from the phone
//!    (`permission_request`) or the Commander (`approvals.approve`), or timed out (not run).
//! 5. **Execution** is the host's: [`builtin::rexd_request`] routes a logical call to the
//!    current target's REXD session, [`crate::oa1::remote_bash::call`] sends `RemoteBash` to
//!    the desk.
//!
//! # The host loop
//!
//! ```
//! use deskwire::tools::{
//!     ApprovalResponse, Context, Event, Origin, Output, Policy, Registry, Rule, Tier, ToolCall,
//!     Toolbox, Verdict, toolbox::Config,
//! };
//! use serde_json::json;
//!
//! let mut policy = Policy::allow_all();
//! policy.push(Rule::ask("RemoteBash", Tier::High)).unwrap();
//! let mut tools = Toolbox::new(Registry::with_builtins(), policy, Config::default(), 7);
//!
//! // The NPC sits down at the desk: RemoteBash appears.
//! tools.set_context("npc-1", Context::bound_to("npc-1")).unwrap();
//! let Output::Event(Event::ToolsChanged(change)) = tools.poll_output(0) else { panic!() };
//! assert!(change.visible.contains(&"RemoteBash".to_string()));
//!
//! // The model calls it: a human must approve first.
//! let call = ToolCall::new("call_1", "RemoteBash", json!({"command": "uname -a"}));
//! let Verdict::Pending { approval_id } = tools.check_call(0, "npc-1", &call, Origin::Model).unwrap()
//! else { panic!() };
//! let Output::Event(Event::ApprovalRequested(request)) = tools.poll_output(0) else { panic!() };
//! // show `request.to_permission_request()` on the phone; its answer comes back:
//! let answer = ApprovalResponse { id: approval_id, approved: true, remember: false, reason: None };
//! tools.respond(1_000, &answer).unwrap();
//! let Output::Event(Event::ApprovalDecided(decided)) = tools.poll_output(1_000) else { panic!() };
//! assert!(decided.may_run()); // now run it (oa1::remote_bash::call)
//! // Drained: the next deadline (an hour ahead when nothing waits).
//! assert!(matches!(tools.poll_output(1_000), Output::Timeout(_)));
//! ```

pub mod approvals;
pub mod builtin;
pub mod gating;
pub mod policy;
pub mod providers;
pub mod registry;
pub mod retrieval;
pub mod slash;
pub mod spec;
pub mod toolbox;

pub use approvals::{
    ApprovalConfig, ApprovalDecided, ApprovalError, ApprovalRequest, ApprovalResponse, Approvals,
    Outcome,
};
pub use gating::{
    Authorization, Context, DenyReason, Gate, Origin, ToolsChanged, Visibility, authorize,
};
pub use policy::{Action, Condition, Policy, PolicyError, Rule, Tier};
pub use registry::{Registry, RegistryError};
pub use spec::{SpecError, ToolCall, ToolResult, ToolSpec};
pub use toolbox::{Event, Output, Toolbox, ToolboxError, Verdict};
