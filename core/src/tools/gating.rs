//! Gating: what an agent may see ([`Visibility`] over a [`Context`] of facts) and, at call
//! time, whether a call may run ([`authorize`]).
//!
//! Both checks exist because hiding is not enough: models call tools they were not shown
//! (from earlier turns, from training), and many clients ignore list-change notifications. So
//! a call of a hidden tool is refused with an observation for the model, never executed.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::policy::{Action, Policy, Tier};
use super::registry::Registry;
use super::spec::ToolCall;

/// The facts about one agent that visibility rules read. The host owns them and sets them
/// whenever they change ([`Gate::set_context`]).
///
/// JSON: `{"bound_npc_id"?, "target"?, "cwd"?, "flags": [..]}`; every member may be left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Context {
    /// The NPC currently bound to the agent's desk, if any (`RemoteBash` is visible only while
    /// `bound_npc_id == npc_id`; `docs/tools.md`, "Gating").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_npc_id: Option<String>,
    /// The machine the runtime routes REXD calls to (`/target server-a`), if chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The working directory relative paths resolve against (policy path checks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Free-form facts (`"online"`, `"admin"`), for [`Visibility::WithFlag`].
    pub flags: BTreeSet<String>,
}

impl Context {
    /// A context where `npc_id` is bound to the desk.
    pub fn bound_to(npc_id: &str) -> Context {
        Context {
            bound_npc_id: Some(npc_id.to_owned()),
            ..Context::default()
        }
    }
}

/// When an agent may see a tool. JSON: `"always"`, `"never"`, `"while_bound"`,
/// `"with_target"`, `{"with_flag": "f"}`, `{"all_of": [..]}`, `{"any_of": [..]}`, `{"not": v}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Visibility {
    /// Always.
    Always,
    /// Never: hidden from everyone and every call refused (switched off, still registered).
    Never,
    /// While the agent is the NPC bound to the desk (`ctx.bound_npc_id == agent`).
    WhileBound,
    /// While a target machine is chosen.
    WithTarget,
    /// While the flag is set.
    WithFlag(String),
    /// While every rule holds.
    AllOf(Vec<Visibility>),
    /// While any rule holds.
    AnyOf(Vec<Visibility>),
    /// While the rule does not hold.
    Not(Box<Visibility>),
}

impl Visibility {
    /// Whether `agent` may see the tool in `ctx`.
    pub fn allows(&self, agent: &str, ctx: &Context) -> bool {
        match self {
            Visibility::Always => true,
            Visibility::Never => false,
            Visibility::WhileBound => ctx.bound_npc_id.as_deref() == Some(agent),
            Visibility::WithTarget => ctx.target.is_some(),
            Visibility::WithFlag(f) => ctx.flags.contains(f),
            Visibility::AllOf(all) => all.iter().all(|v| v.allows(agent, ctx)),
            Visibility::AnyOf(any) => any.iter().any(|v| v.allows(agent, ctx)),
            Visibility::Not(v) => !v.allows(agent, ctx),
        }
    }

    /// A sentence for the model about when the tool is available.
    pub fn explain(&self) -> String {
        match self {
            Visibility::Always => "it is always available".into(),
            Visibility::Never => "it is disabled".into(),
            Visibility::WhileBound => "it works only while you are bound to a desk".into(),
            Visibility::WithTarget => "it works only once a target machine is chosen".into(),
            Visibility::WithFlag(f) => format!("it needs {f:?}"),
            Visibility::AllOf(_) | Visibility::AnyOf(_) | Visibility::Not(_) => {
                "its conditions do not hold now".into()
            }
        }
    }
}

/// Who asked for the call. JSON: `"model"` or `"user"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "ToolOrigin"))]
pub enum Origin {
    /// The model decided to call it (agent autonomy: approvals apply).
    Model,
    /// The user typed a slash command (user authorized: no approval prompt, but hidden tools
    /// and denials still hold).
    User,
}

/// Why a call was refused. JSON: `"not_visible"`, `{"invalid_arguments": "why"}`,
/// `{"policy": "reason"}` (inside an [`Authorization`] it is flattened: see there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "ToolDenyReason"))]
pub enum DenyReason {
    /// The tool exists but this agent may not see it now.
    NotVisible,
    /// The arguments do not fit the schema.
    InvalidArguments(#[cfg_attr(feature = "uniffi", uniffi(name = "detail"))] String),
    /// A policy rule (or a remembered denial) says no.
    Policy(#[cfg_attr(feature = "uniffi", uniffi(name = "reason"))] String),
}

/// The answer of [`authorize`]. JSON (as `tests/vectors/tools.json` writes it), tagged by
/// `kind`: `{"kind": "allowed"}`, `{"kind": "needs_approval", "tier"}`,
/// `{"kind": "denied", "reason": "not_visible" | "invalid_arguments" | "policy", "message"?,
/// "observation"}` (`message`: the detail of the last two), `{"kind": "unknown", "observation"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "AuthorizationJson", from = "AuthorizationJson")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "ToolAuthorization"))]
pub enum Authorization {
    /// Run it.
    Allowed,
    /// Ask a human first ([`super::approvals`]), at this risk tier.
    NeedsApproval {
        /// The tier (what the prompt shows).
        tier: Tier,
    },
    /// Do not run it; send `observation` back as the call's error result.
    Denied {
        /// Why.
        reason: DenyReason,
        /// Text for the model.
        observation: String,
    },
    /// No such tool; send `observation` (which names the tools the agent has) back as the
    /// call's error result so the model can correct itself.
    Unknown {
        /// Text for the model.
        observation: String,
    },
}

impl Authorization {
    /// The observation for a refused call (`Denied` or `Unknown`).
    pub fn observation(&self) -> Option<&str> {
        match self {
            Authorization::Denied { observation, .. } | Authorization::Unknown { observation } => {
                Some(observation)
            }
            _ => None,
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum AuthorizationJson {
    Allowed,
    NeedsApproval {
        tier: Tier,
    },
    Denied {
        reason: DenyKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        observation: String,
    },
    Unknown {
        observation: String,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum DenyKind {
    NotVisible,
    InvalidArguments,
    Policy,
}

impl From<Authorization> for AuthorizationJson {
    fn from(a: Authorization) -> Self {
        match a {
            Authorization::Allowed => AuthorizationJson::Allowed,
            Authorization::NeedsApproval { tier } => AuthorizationJson::NeedsApproval { tier },
            Authorization::Denied {
                reason,
                observation,
            } => {
                let (reason, message) = match reason {
                    DenyReason::NotVisible => (DenyKind::NotVisible, None),
                    DenyReason::InvalidArguments(m) => (DenyKind::InvalidArguments, Some(m)),
                    DenyReason::Policy(m) => (DenyKind::Policy, Some(m)),
                };
                AuthorizationJson::Denied {
                    reason,
                    message,
                    observation,
                }
            }
            Authorization::Unknown { observation } => AuthorizationJson::Unknown { observation },
        }
    }
}

impl From<AuthorizationJson> for Authorization {
    fn from(a: AuthorizationJson) -> Self {
        match a {
            AuthorizationJson::Allowed => Authorization::Allowed,
            AuthorizationJson::NeedsApproval { tier } => Authorization::NeedsApproval { tier },
            AuthorizationJson::Denied {
                reason,
                message,
                observation,
            } => Authorization::Denied {
                reason: match reason {
                    DenyKind::NotVisible => DenyReason::NotVisible,
                    DenyKind::InvalidArguments => {
                        DenyReason::InvalidArguments(message.unwrap_or_default())
                    }
                    DenyKind::Policy => DenyReason::Policy(message.unwrap_or_default()),
                },
                observation,
            },
            AuthorizationJson::Unknown { observation } => Authorization::Unknown { observation },
        }
    }
}

fn available(registry: &Registry, agent: &str, ctx: &Context) -> String {
    let names = registry.visible_names(agent, ctx);
    if names.is_empty() {
        "You have no tools now.".into()
    } else {
        format!("Available tools: {}.", names.join(", "))
    }
}

/// Checks a call at call time: the tool exists, this agent may see it now, its arguments fit
/// the schema's top level, and the policy (with remembered decisions) allows it. `origin`
/// [`Origin::User`] turns "ask first" into "allowed": the user asked for it.
pub fn authorize(
    registry: &Registry,
    policy: &Policy,
    call: &ToolCall,
    agent: &str,
    ctx: &Context,
    origin: Origin,
) -> Authorization {
    let Some(entry) = registry.get(&call.name) else {
        return Authorization::Unknown {
            observation: format!(
                "Unknown tool {:?}. {}",
                call.name,
                available(registry, agent, ctx)
            ),
        };
    };
    if !entry.visibility.allows(agent, ctx) {
        return Authorization::Denied {
            reason: DenyReason::NotVisible,
            observation: format!(
                "Tool {:?} is not available now: {}. It was not run. {}",
                call.name,
                entry.visibility.explain(),
                available(registry, agent, ctx)
            ),
        };
    }
    if let Err(message) = entry
        .spec
        .check_args(&call.args)
        .and_then(|()| super::builtin::check_args(call))
    {
        return Authorization::Denied {
            observation: format!("Invalid arguments: {message}. It was not run."),
            reason: DenyReason::InvalidArguments(message),
        };
    }
    match policy.evaluate(call, ctx) {
        Action::Allow => Authorization::Allowed,
        Action::Ask(_) if origin == Origin::User => Authorization::Allowed,
        Action::Ask(tier) => Authorization::NeedsApproval { tier },
        Action::Deny(reason) => Authorization::Denied {
            observation: format!(
                "Tool {:?} was refused: {reason}. It was not run.",
                call.name
            ),
            reason: DenyReason::Policy(reason),
        },
    }
}

/// `tools_changed`: what one agent may see changed (like MCP
/// `notifications/tools/list_changed`, with the difference included). JSON:
/// `{"agent", "visible", "added", "removed"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolsChanged {
    /// The agent.
    pub agent: String,
    /// Everything it may see now, in registration order.
    pub visible: Vec<String>,
    /// Newly visible.
    pub added: Vec<String>,
    /// No longer visible.
    pub removed: Vec<String>,
}

/// The host registered more agents than [`Gate::new`] allows. JSON: the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("too many agents (at most {0}); remove_agent forgets one that is gone")]
pub struct TooManyAgents(pub usize);

#[derive(Debug, Clone)]
struct AgentState {
    ctx: Context,
    visible: Vec<String>,
}

/// Per-agent contexts and what each agent was last told it can see, so a change becomes a
/// [`ToolsChanged`].
#[derive(Debug, Clone)]
pub struct Gate {
    agents: BTreeMap<String, AgentState>,
    max_agents: usize,
}

impl Gate {
    /// A gate for at most `max_agents` agents.
    pub fn new(max_agents: usize) -> Gate {
        Gate {
            agents: BTreeMap::new(),
            max_agents,
        }
    }

    /// The agent's context (the default one for an agent never set).
    pub fn context(&self, agent: &str) -> Option<&Context> {
        self.agents.get(agent).map(|a| &a.ctx)
    }

    /// Sets an agent's facts. Returns the change of its visible tools, if any. The first
    /// context of an agent is compared with an empty list, so it reports what it can see.
    pub fn set_context(
        &mut self,
        registry: &Registry,
        agent: &str,
        ctx: Context,
    ) -> Result<Option<ToolsChanged>, TooManyAgents> {
        if !self.agents.contains_key(agent) && self.agents.len() >= self.max_agents {
            return Err(TooManyAgents(self.max_agents));
        }
        let visible = registry.visible_names(agent, &ctx);
        let state = self
            .agents
            .entry(agent.to_owned())
            .or_insert_with(|| AgentState {
                ctx: Context::default(),
                visible: Vec::new(),
            });
        state.ctx = ctx;
        Ok(diff(agent, &mut state.visible, visible))
    }

    /// Forgets an agent.
    pub fn remove(&mut self, agent: &str) -> bool {
        self.agents.remove(agent).is_some()
    }

    /// Recomputes every agent after the registry changed.
    pub fn refresh(&mut self, registry: &Registry) -> Vec<ToolsChanged> {
        let mut changes = Vec::new();
        for (agent, state) in &mut self.agents {
            let visible = registry.visible_names(agent, &state.ctx);
            changes.extend(diff(agent, &mut state.visible, visible));
        }
        changes
    }

    /// How many agents are known.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }
}

fn diff(agent: &str, old: &mut Vec<String>, new: Vec<String>) -> Option<ToolsChanged> {
    if *old == new {
        return None;
    }
    let added = new.iter().filter(|n| !old.contains(n)).cloned().collect();
    let removed = old.iter().filter(|n| !new.contains(n)).cloned().collect();
    *old = new.clone();
    Some(ToolsChanged {
        agent: agent.to_owned(),
        visible: new,
        added,
        removed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::policy::Rule;
    use serde_json::json;

    #[test]
    fn visibility_rules() {
        let mut ctx = Context::bound_to("npc-1");
        assert!(Visibility::WhileBound.allows("npc-1", &ctx));
        assert!(!Visibility::WhileBound.allows("npc-2", &ctx));
        assert!(!Visibility::WithTarget.allows("npc-1", &ctx));
        ctx.target = Some("server-a".into());
        ctx.flags.insert("admin".into());
        let both = Visibility::AllOf(vec![
            Visibility::WithTarget,
            Visibility::WithFlag("admin".into()),
        ]);
        assert!(both.allows("x", &ctx));
        assert!(!Visibility::Not(Box::new(both.clone())).allows("x", &ctx));
        ctx.flags.clear();
        assert!(!both.allows("x", &ctx));
        assert!(
            Visibility::AnyOf(vec![Visibility::Never, Visibility::WithTarget]).allows("x", &ctx)
        );
    }

    #[test]
    fn authorize_checks_existence_visibility_args_and_policy() {
        let registry = Registry::with_builtins();
        let mut policy = Policy::allow_all();
        policy
            .push(Rule::deny_commands("bash", ["rm -rf *"], "destructive"))
            .unwrap();
        let free = Context::default();
        let call = |name: &str, args| ToolCall::new("c1", name, args);

        let a = authorize(
            &registry,
            &policy,
            &call("nope", json!({})),
            "npc",
            &free,
            Origin::Model,
        );
        let Authorization::Unknown { observation } = a else {
            panic!("{a:?}")
        };
        assert_eq!(
            observation,
            "Unknown tool \"nope\". Available tools: bash, read, write, list, glob, stat."
        );

        let a = authorize(
            &registry,
            &policy,
            &call("RemoteBash", json!({"command": "ls"})),
            "npc",
            &free,
            Origin::User,
        );
        assert!(
            matches!(&a, Authorization::Denied { reason: DenyReason::NotVisible, observation }
                if observation.contains("bound to a desk")),
            "{a:?}"
        );

        let a = authorize(
            &registry,
            &policy,
            &call("read", json!({})),
            "npc",
            &free,
            Origin::Model,
        );
        assert!(matches!(
            a,
            Authorization::Denied {
                reason: DenyReason::InvalidArguments(_),
                ..
            }
        ));

        let a = authorize(
            &registry,
            &policy,
            &call("bash", json!({"command": "rm -rf /"})),
            "npc",
            &free,
            Origin::User,
        );
        assert!(matches!(
            a,
            Authorization::Denied {
                reason: DenyReason::Policy(_),
                ..
            }
        ));
        let a = authorize(
            &registry,
            &policy,
            &call("bash", json!({"command": "ls"})),
            "npc",
            &free,
            Origin::Model,
        );
        assert_eq!(a, Authorization::Allowed);
    }

    #[test]
    fn gate_reports_changes_only() {
        let registry = Registry::with_builtins();
        let mut gate = Gate::new(2);
        let first = gate
            .set_context(&registry, "npc-1", Context::default())
            .unwrap()
            .unwrap();
        assert_eq!(first.added.len(), 6);
        assert_eq!(
            gate.set_context(&registry, "npc-1", Context::default()),
            Ok(None)
        );
        let bound = gate
            .set_context(&registry, "npc-1", Context::bound_to("npc-1"))
            .unwrap()
            .unwrap();
        assert_eq!(bound.added, ["RemoteBash"]);
        assert!(bound.removed.is_empty());
        gate.set_context(&registry, "npc-2", Context::default())
            .unwrap();
        assert_eq!(
            gate.set_context(&registry, "npc-3", Context::default()),
            Err(TooManyAgents(2))
        );
        assert!(gate.remove("npc-2"));
        assert!(
            gate.set_context(&registry, "npc-3", Context::default())
                .is_ok()
        );
    }
}
