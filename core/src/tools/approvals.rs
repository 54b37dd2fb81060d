//! Approvals: a call that needs a human waits here with an id and a deadline until an answer
//! (or the deadline) settles it. Sans-IO: time comes in as `now_ms`, ids from a seeded
//! generator, and the host asks [`Approvals::next_deadline`] when to call
//! [`Approvals::handle_timeout`].
//!
//! Requests and answers map onto the two transports that carry them to a human: the mobile
//! companion's `permission_request` / `permission_response` ([`crate::mobile`]) and the
//! gateway's `approvals.*` ([`crate::gateway`]). The mobile server makes its own request ids,
//! so [`Approvals::link_external`] lets an answer come back under that id.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::policy::Tier;
use super::spec::ToolCall;
use crate::gateway;
use crate::gateway::ops::{ApprovalDecisionParams, ApprovalSummary, Decision};
use crate::ids::IdGenerator;
use crate::mobile::server::NewPermission;
use crate::mobile::{PermissionRequest, PermissionResponse};

/// Limits and defaults. JSON: the fields by name; missing ones take the defaults, unknown ones
/// are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalConfig {
    /// How long a request waits for an answer (default 5 minutes, as the mobile server).
    pub timeout_ms: u64,
    /// Requests waiting at most (default 64).
    pub max_pending: usize,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        ApprovalConfig {
            timeout_ms: 5 * 60_000,
            max_pending: 64,
        }
    }
}

/// A call waiting for a human. JSON: the fields by name, `call` as a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// `appr_` and 12 base36 characters from the seeded generator.
    pub id: String,
    /// The agent that made the call.
    pub agent: String,
    /// The call.
    pub call: ToolCall,
    /// How risky it is.
    pub tier: Tier,
    /// What the human is asked, in one line ([`describe_call`] when a
    /// [`Toolbox`](super::Toolbox) asks): who asks, for what, and what the tool does.
    pub description: String,
    /// When it times out (host clock, ms).
    pub deadline_ms: u64,
}

/// Longest subject (a command, a path, the arguments) a [`describe_call`] shows; the request's
/// `command` carries all of it.
const DESCRIBED_SUBJECT_CHARS: usize = 200;

/// What a human is asked to approve, in one line: who asks, for what, and what the tool does
/// (the first sentence of its description), e.g. ``npc-1 asks to run `make deploy` with bash
/// (Run a shell command (sh -c) on the current target machine.)``. The subject is cut at 200
/// characters; the request's `command` has it whole.
pub fn describe_call(agent: &str, call: &ToolCall, tool_description: &str) -> String {
    let mut subject = call.subject();
    if let Some((cut, _)) = subject.char_indices().nth(DESCRIBED_SUBJECT_CHARS) {
        subject.truncate(cut);
        subject.push('…');
    }
    let args = &call.args;
    let what = if args.get("command").is_some_and(|v| v.is_string()) {
        format!("run `{subject}` with {}", call.name)
    } else if args.get("path").is_some_and(|v| v.is_string())
        || args.get("pattern").is_some_and(|v| v.is_string())
    {
        format!("use {} on {subject}", call.name)
    } else {
        format!("call {} with {subject}", call.name)
    };
    let purpose = first_sentence(tool_description);
    match purpose.is_empty() {
        true => format!("{agent} asks to {what}"),
        false => format!("{agent} asks to {what} ({purpose})"),
    }
}

/// The text up to and including its first sentence's full stop (all of it when it has none).
fn first_sentence(text: &str) -> &str {
    let text = text.trim();
    match text.find(". ") {
        Some(end) => &text[..=end],
        None => text,
    }
}

impl ApprovalRequest {
    /// What the human approves: the command of a shell tool, else the path, else the
    /// arguments as JSON.
    pub fn command(&self) -> String {
        self.call.subject()
    }

    /// The mobile `permission_request` payload, under this request's id.
    pub fn to_permission_request(&self) -> PermissionRequest {
        PermissionRequest {
            id: self.id.clone(),
            tool_name: self.call.name.clone(),
            command: self.command(),
            description: self.description.clone(),
            tier: self.tier.as_str().to_owned(),
        }
    }

    /// What [`crate::mobile::server::Server::request_permission`] takes (it makes its own id:
    /// [`Approvals::link_external`] it to this request).
    pub fn to_new_permission(&self) -> NewPermission {
        NewPermission {
            tool_name: self.call.name.clone(),
            command: self.command(),
            description: self.description.clone(),
            tier: self.tier.as_str().to_owned(),
        }
    }

    /// The gateway approval `kind`: `shell` for a call with a `command`, else `tool`.
    pub fn gateway_kind(&self) -> &'static str {
        if self.call.args.get("command").is_some_and(|c| c.is_string()) {
            "shell"
        } else {
            "tool"
        }
    }

    /// The gateway approval `requested` text: the command, or `tool: subject`.
    pub fn gateway_requested(&self) -> String {
        if self.gateway_kind() == "shell" {
            self.command()
        } else {
            format!("{}: {}", self.call.name, self.command())
        }
    }
}

/// A human's answer. JSON: `{"id", "approved", "remember"?, "reason"?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalResponse {
    /// The request's id (ours, or an id linked with [`Approvals::link_external`]).
    pub id: String,
    /// Run it or not.
    pub approved: bool,
    /// Apply the same answer to such calls from now on.
    #[serde(default)]
    pub remember: bool,
    /// Why, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl From<&PermissionResponse> for ApprovalResponse {
    fn from(r: &PermissionResponse) -> Self {
        ApprovalResponse {
            id: r.id.clone(),
            approved: r.approved,
            remember: r.remember,
            reason: None,
        }
    }
}

impl ApprovalResponse {
    /// The mobile `permission_response` payload.
    pub fn to_permission_response(&self) -> PermissionResponse {
        PermissionResponse {
            id: self.id.clone(),
            approved: self.approved,
            remember: self.remember,
        }
    }

    /// The answer in a gateway [`gateway::Event::ApprovalDecided`] (the gateway has no
    /// "remember"), or `None` for any other event.
    pub fn from_gateway_event(event: &gateway::Event) -> Option<ApprovalResponse> {
        match event {
            gateway::Event::ApprovalDecided {
                approval_id,
                decision,
                reason,
                ..
            } => Some(ApprovalResponse {
                id: approval_id.clone(),
                approved: *decision == Decision::Approve,
                remember: false,
                reason: reason.clone(),
            }),
            _ => None,
        }
    }

    /// `approvals.approve` / `approvals.deny` params for this answer in `job_id`.
    pub fn to_decision_params(&self, job_id: &str) -> ApprovalDecisionParams {
        ApprovalDecisionParams {
            job_id: job_id.to_owned(),
            approval_id: self.id.clone(),
            decision: Some(if self.approved {
                Decision::Approve
            } else {
                Decision::Deny
            }),
            reason: self.reason.clone(),
        }
    }
}

/// How a request was settled. JSON: `"approved"`, `"denied"`, `"timed_out"`, `"cancelled"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "ToolApprovalOutcome"))]
pub enum Outcome {
    /// Run it.
    Approved,
    /// Do not.
    Denied,
    /// Nobody answered before the deadline (do not run it).
    TimedOut,
    /// The host withdrew it.
    Cancelled,
}

/// A settled request. JSON: `{"request", "outcome", "remember", "reason"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDecided {
    /// The request.
    pub request: ApprovalRequest,
    /// How it was settled.
    pub outcome: Outcome,
    /// The human asked to remember the answer.
    pub remember: bool,
    /// The reason given, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ApprovalDecided {
    /// Whether the call may run now.
    pub fn may_run(&self) -> bool {
        self.outcome == Outcome::Approved
    }

    /// The error result text for the model when the call does not run.
    pub fn observation(&self) -> Option<String> {
        let tool = &self.request.call.name;
        let because = self
            .reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        match self.outcome {
            Outcome::Approved => None,
            Outcome::Denied => Some(format!(
                "The user denied this call of {tool}{because}. It was not run."
            )),
            Outcome::TimedOut => Some(format!(
                "Nobody approved this call of {tool} in time. It was not run."
            )),
            Outcome::Cancelled => Some(format!(
                "The approval of this call of {tool} was withdrawn. It was not run."
            )),
        }
    }

    /// The gateway `jobs.result` approval entry.
    pub fn to_approval_summary(&self) -> ApprovalSummary {
        ApprovalSummary {
            approval_id: Some(self.request.id.clone()),
            kind: self.request.gateway_kind().to_owned(),
            requested: self.request.gateway_requested(),
            approved: self.may_run(),
        }
    }
}

/// Misuse of [`Approvals`] by the host. JSON: externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalError {
    /// [`ApprovalConfig::max_pending`] requests wait already.
    #[error("too many approvals waiting ({0})")]
    TooManyPending(usize),
    /// No waiting request has that id (never made, already settled, or timed out).
    #[error("no approval {0:?} is waiting")]
    Unknown(String),
    /// The external id names another waiting request already.
    #[error("external id {0:?} is linked to another approval")]
    ExternalIdTaken(String),
}

/// The waiting requests.
#[derive(Debug, Clone)]
pub struct Approvals {
    config: ApprovalConfig,
    pending: BTreeMap<String, ApprovalRequest>,
    /// External id → our id; our id → external id.
    aliases: BTreeMap<String, String>,
    linked: BTreeMap<String, String>,
    ids: IdGenerator,
}

impl Approvals {
    /// An empty table; `seed` fixes the ids.
    pub fn new(config: ApprovalConfig, seed: u64) -> Approvals {
        Approvals {
            config,
            pending: BTreeMap::new(),
            aliases: BTreeMap::new(),
            linked: BTreeMap::new(),
            ids: IdGenerator::new(seed),
        }
    }

    /// Makes a request for `call` by `agent`, due at `now + timeout_ms`.
    pub fn request(
        &mut self,
        now: u64,
        agent: &str,
        call: ToolCall,
        tier: Tier,
        description: &str,
    ) -> Result<ApprovalRequest, ApprovalError> {
        if self.pending.len() >= self.config.max_pending {
            return Err(ApprovalError::TooManyPending(self.pending.len()));
        }
        let id = loop {
            let id = format!("appr_{}", self.ids.next_id());
            if !self.pending.contains_key(&id) {
                break id;
            }
        };
        let request = ApprovalRequest {
            id: id.clone(),
            agent: agent.to_owned(),
            call,
            tier,
            description: description.to_owned(),
            deadline_ms: now.saturating_add(self.config.timeout_ms),
        };
        self.pending.insert(id, request.clone());
        Ok(request)
    }

    /// Lets answers for request `id` come under `external_id` too (the mobile server's id).
    pub fn link_external(&mut self, id: &str, external_id: &str) -> Result<(), ApprovalError> {
        if !self.pending.contains_key(id) {
            return Err(ApprovalError::Unknown(id.to_owned()));
        }
        if let Some(other) = self.aliases.get(external_id) {
            if other != id {
                return Err(ApprovalError::ExternalIdTaken(external_id.to_owned()));
            }
            return Ok(());
        }
        if let Some(old) = self.linked.insert(id.to_owned(), external_id.to_owned()) {
            self.aliases.remove(&old);
        }
        self.aliases.insert(external_id.to_owned(), id.to_owned());
        Ok(())
    }

    /// Settles a request with a human's answer. An answer at or after the deadline settles it
    /// as [`Outcome::TimedOut`]: late answers do not run anything.
    pub fn respond(
        &mut self,
        now: u64,
        response: &ApprovalResponse,
    ) -> Result<ApprovalDecided, ApprovalError> {
        let id = self
            .aliases
            .get(&response.id)
            .cloned()
            .unwrap_or_else(|| response.id.clone());
        let request = self
            .take(&id)
            .ok_or_else(|| ApprovalError::Unknown(response.id.clone()))?;
        if now >= request.deadline_ms {
            return Ok(ApprovalDecided {
                request,
                outcome: Outcome::TimedOut,
                remember: false,
                reason: None,
            });
        }
        Ok(ApprovalDecided {
            request,
            outcome: if response.approved {
                Outcome::Approved
            } else {
                Outcome::Denied
            },
            remember: response.remember,
            reason: response.reason.clone(),
        })
    }

    /// Withdraws a waiting request.
    pub fn cancel(&mut self, id: &str) -> Result<ApprovalDecided, ApprovalError> {
        let request = self
            .take(id)
            .ok_or_else(|| ApprovalError::Unknown(id.to_owned()))?;
        Ok(ApprovalDecided {
            request,
            outcome: Outcome::Cancelled,
            remember: false,
            reason: None,
        })
    }

    /// Settles every request whose deadline is at or before `now` as timed out, oldest
    /// deadline first.
    pub fn handle_timeout(&mut self, now: u64) -> Vec<ApprovalDecided> {
        let mut due: Vec<(u64, String)> = self
            .pending
            .values()
            .filter(|r| r.deadline_ms <= now)
            .map(|r| (r.deadline_ms, r.id.clone()))
            .collect();
        due.sort();
        due.into_iter()
            .filter_map(|(_, id)| self.take(&id))
            .map(|request| ApprovalDecided {
                request,
                outcome: Outcome::TimedOut,
                remember: false,
                reason: None,
            })
            .collect()
    }

    /// The earliest deadline of a waiting request.
    pub fn next_deadline(&self) -> Option<u64> {
        self.pending.values().map(|r| r.deadline_ms).min()
    }

    /// The waiting requests, by id.
    pub fn pending(&self) -> impl Iterator<Item = &ApprovalRequest> {
        self.pending.values()
    }

    /// The waiting request `id` (ours or a linked external id).
    pub fn get(&self, id: &str) -> Option<&ApprovalRequest> {
        let id = self.aliases.get(id).map_or(id, String::as_str);
        self.pending.get(id)
    }

    fn take(&mut self, id: &str) -> Option<ApprovalRequest> {
        let request = self.pending.remove(id)?;
        if let Some(external) = self.linked.remove(id) {
            self.aliases.remove(&external);
        }
        Some(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call() -> ToolCall {
        ToolCall::new("call_1", "bash", json!({"command": "make deploy"}))
    }

    #[test]
    fn approve_deny_and_late_answers() {
        let mut a = Approvals::new(ApprovalConfig::default(), 9);
        let r1 = a
            .request(1_000, "npc", call(), Tier::High, "deploy")
            .unwrap();
        let r2 = a
            .request(2_000, "npc", call(), Tier::High, "deploy")
            .unwrap();
        assert_ne!(r1.id, r2.id);
        assert!(r1.id.starts_with("appr_") && r1.id.len() == 17, "{}", r1.id);
        assert_eq!(r1.deadline_ms, 301_000);
        assert_eq!(a.next_deadline(), Some(301_000));

        let yes = ApprovalResponse {
            id: r1.id.clone(),
            approved: true,
            remember: true,
            reason: None,
        };
        let d = a.respond(5_000, &yes).unwrap();
        assert!(d.may_run() && d.remember);
        assert_eq!(d.observation(), None);
        // A second answer finds nothing waiting.
        assert_eq!(
            a.respond(5_001, &yes),
            Err(ApprovalError::Unknown(r1.id.clone()))
        );
        // An answer after the deadline runs nothing.
        let late = ApprovalResponse {
            id: r2.id.clone(),
            approved: true,
            remember: true,
            reason: None,
        };
        let d = a.respond(302_000, &late).unwrap();
        assert_eq!(d.outcome, Outcome::TimedOut);
        assert!(!d.remember);
        assert_eq!(a.next_deadline(), None);
    }

    #[test]
    fn timeouts_in_deadline_order_and_bounded_table() {
        let config = ApprovalConfig {
            timeout_ms: 100,
            max_pending: 2,
        };
        let mut a = Approvals::new(config, 1);
        let late = a.request(50, "x", call(), Tier::Low, "").unwrap();
        let early = a.request(10, "x", call(), Tier::Low, "").unwrap();
        assert_eq!(
            a.request(10, "x", call(), Tier::Low, ""),
            Err(ApprovalError::TooManyPending(2))
        );
        assert!(a.handle_timeout(109).is_empty());
        let due = a.handle_timeout(150);
        let ids: Vec<&str> = due.iter().map(|d| d.request.id.as_str()).collect();
        assert_eq!(ids, [early.id.as_str(), late.id.as_str()]);
        assert!(
            due.iter()
                .all(|d| d.outcome == Outcome::TimedOut && !d.may_run())
        );
        assert!(due[0].observation().unwrap().contains("in time"));
        assert_eq!(a.pending().count(), 0);
    }

    #[test]
    fn a_request_describes_the_call_for_the_human() {
        let shell = "Run a shell command (sh -c) on the current target machine. It returns stdout.";
        assert_eq!(
            describe_call("npc-1", &call(), shell),
            "npc-1 asks to run `make deploy` with bash (Run a shell command (sh -c) on the \
             current target machine.)"
        );
        let write = ToolCall::new("c2", "write", json!({"path": "/etc/hosts", "content": "x"}));
        assert_eq!(
            describe_call("npc-2", &write, "Write a file"),
            "npc-2 asks to use write on /etc/hosts (Write a file)"
        );
        let mail = ToolCall::new("c3", "send_email", json!({"to": "a@b.c"}));
        assert_eq!(
            describe_call("npc-3", &mail, ""),
            r#"npc-3 asks to call send_email with {"to":"a@b.c"}"#
        );
        // A long command is cut for the line; the request's command keeps it whole.
        let long = ToolCall::new("c4", "bash", json!({"command": "é".repeat(300)}));
        let line = describe_call("npc", &long, "");
        assert!(line.contains(&format!("`{}…`", "é".repeat(200))), "{line}");
    }

    #[test]
    fn mobile_mapping_and_external_ids() {
        let mut a = Approvals::new(ApprovalConfig::default(), 2);
        let r = a.request(0, "npc", call(), Tier::Medium, "Deploy").unwrap();
        let p = r.to_permission_request();
        assert_eq!(
            (
                p.id.as_str(),
                p.tool_name.as_str(),
                p.command.as_str(),
                p.tier.as_str()
            ),
            (r.id.as_str(), "bash", "make deploy", "medium")
        );
        let n = r.to_new_permission();
        assert_eq!(
            (n.command.as_str(), n.description.as_str()),
            ("make deploy", "Deploy")
        );

        a.link_external(&r.id, "uuid-1").unwrap();
        assert!(a.get("uuid-1").is_some());
        let other = a.request(0, "npc", call(), Tier::Medium, "").unwrap();
        assert_eq!(
            a.link_external(&other.id, "uuid-1"),
            Err(ApprovalError::ExternalIdTaken("uuid-1".into()))
        );
        let phone = PermissionResponse {
            id: "uuid-1".into(),
            approved: false,
            remember: true,
        };
        let answer = ApprovalResponse::from(&phone);
        assert_eq!(answer.to_permission_response(), phone);
        let d = a.respond(1, &answer).unwrap();
        assert_eq!(d.request.id, r.id);
        assert_eq!(d.outcome, Outcome::Denied);
        assert!(d.remember);
        assert!(a.get("uuid-1").is_none());
        let d = a.cancel(&other.id).unwrap();
        assert_eq!(d.outcome, Outcome::Cancelled);
    }

    #[test]
    fn gateway_mapping() {
        let mut a = Approvals::new(ApprovalConfig::default(), 3);
        let r = a.request(0, "npc", call(), Tier::High, "").unwrap();
        assert_eq!(r.gateway_kind(), "shell");
        assert_eq!(r.gateway_requested(), "make deploy");
        let read = ToolCall::new("c", "read", json!({"path": "/etc/hosts"}));
        let r2 = a.request(0, "npc", read, Tier::Low, "").unwrap();
        assert_eq!(r2.gateway_kind(), "tool");
        assert_eq!(r2.gateway_requested(), "read: /etc/hosts");

        let event = gateway::Event::ApprovalDecided {
            job_id: "job_1".into(),
            approval_id: r.id.clone(),
            decision: Decision::Approve,
            reason: Some("Allowed by label direct-commit".into()),
        };
        let answer = ApprovalResponse::from_gateway_event(&event).unwrap();
        let params = answer.to_decision_params("job_1");
        assert_eq!(params.decision, Some(Decision::Approve));
        assert_eq!(params.approval_id, r.id);
        let d = a.respond(10, &answer).unwrap();
        let summary = d.to_approval_summary();
        assert_eq!(
            serde_json::to_value(&summary).unwrap(),
            json!({"approvalId": r.id, "kind": "shell", "requested": "make deploy", "approved": true})
        );
    }
}
