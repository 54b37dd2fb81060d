//! The operations and their typed payloads (request params and response results).
//!
//! Field names are the spec's (`camelCase`). Optional fields read `absent` as `None` and refuse
//! an explicit `null` (the schema does the same), and `None` is written as absent, so a payload
//! read and written back is the same JSON. Unknown fields are ignored on read: a newer minor
//! version may add some.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::error::ParseError;
use super::job::JobState;

/// Longest id (`id`, `jobId`, `approvalId`) in characters.
pub const MAX_ID_CHARS: usize = 256;

/// `Option` fields: absent is `None`, `null` is refused (`#[serde(default, deserialize_with)]`).
pub(crate) fn non_null<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Unsigned integers: JSON Schema's `integer` includes `10.0`, and so does this (a Commander in
/// a language without integers may write one); it is written back as `10`.
pub(crate) fn uint<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let value = Value::deserialize(d)?;
    value
        .as_u64()
        .or_else(|| {
            value
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 9_007_199_254_740_992.0)
                .map(|f| f as u64)
        })
        .ok_or_else(|| {
            serde::de::Error::custom(format!("expected a non-negative integer, got {value}"))
        })
}

/// [`uint`] for `Option` fields (absent is `None`, `null` is refused).
pub(crate) fn opt_uint<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    uint(d).map(Some)
}

/// An id: 1 to [`MAX_ID_CHARS`] characters.
pub(crate) fn check_id(text: &str) -> Result<(), &'static str> {
    match text.chars().count() {
        0 => Err("empty"),
        n if n > MAX_ID_CHARS => Err("longer than 256 characters"),
        _ => Ok(()),
    }
}

/// An operation name (`op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Op {
    /// `gateway.ping`: health and version.
    Ping,
    /// `jobs.create`: create a job (idempotent by `jobId`).
    JobsCreate,
    /// `jobs.start`: start a job (never restarts one).
    JobsStart,
    /// `jobs.status`: a job's state, step and progress.
    JobsStatus,
    /// `jobs.stream`: subscribe this connection to a job's `jobs.event` events.
    JobsStream,
    /// `jobs.result`: a job's artifacts.
    JobsResult,
    /// `jobs.cancel`: cancel a job. Not in the spec, which names the `CANCELLED` state but no
    /// way to reach it; deskwire adds the operation users expect.
    JobsCancel,
    /// `approvals.list`: approvals, pending and decided.
    ApprovalsList,
    /// `approvals.approve`: decide an approval (`decision` `approve`, or `deny`).
    ApprovalsApprove,
    /// `approvals.deny`: decide an approval negatively. Not in the spec (whose
    /// `approvals.approve` carries `decision`); added as the obvious counterpart.
    ApprovalsDeny,
}

/// JSON: the wire name (`"jobs.create"`), also as a map key.
impl Serialize for Op {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Op {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Op::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format_args!("unknown operation {name:?}")))
    }
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 10] = [
        Op::Ping,
        Op::JobsCreate,
        Op::JobsStart,
        Op::JobsStatus,
        Op::JobsStream,
        Op::JobsResult,
        Op::JobsCancel,
        Op::ApprovalsList,
        Op::ApprovalsApprove,
        Op::ApprovalsDeny,
    ];

    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Ping => "gateway.ping",
            Op::JobsCreate => "jobs.create",
            Op::JobsStart => "jobs.start",
            Op::JobsStatus => "jobs.status",
            Op::JobsStream => "jobs.stream",
            Op::JobsResult => "jobs.result",
            Op::JobsCancel => "jobs.cancel",
            Op::ApprovalsList => "approvals.list",
            Op::ApprovalsApprove => "approvals.approve",
            Op::ApprovalsDeny => "approvals.deny",
        }
    }

    /// Reads an operation name.
    pub fn parse(text: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.as_str() == text)
    }
}

/// A request's operation with its typed payload.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Request {
    /// `gateway.ping`.
    Ping(PingParams),
    /// `jobs.create`.
    JobsCreate(JobsCreateParams),
    /// `jobs.start`.
    JobsStart(JobRef),
    /// `jobs.status`.
    JobsStatus(JobRef),
    /// `jobs.stream`.
    JobsStream(JobRef),
    /// `jobs.result`.
    JobsResult(JobRef),
    /// `jobs.cancel`.
    JobsCancel(JobsCancelParams),
    /// `approvals.list`.
    ApprovalsList(ApprovalsListParams),
    /// `approvals.approve`.
    ApprovalsApprove(ApprovalDecisionParams),
    /// `approvals.deny`.
    ApprovalsDeny(ApprovalDecisionParams),
}

/// Types a payload; a failure names the field at fault (`job.jobId: invalid type: integer
/// `5`, expected a string`), the payload itself when no field is (a missing field names itself).
fn params<T: DeserializeOwned>(op: Op, payload: Value) -> Result<T, ParseError> {
    serde_path_to_error::deserialize(payload).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        ParseError::InvalidParams {
            op: op.as_str(),
            message: match path.as_str() {
                "." | "" => message,
                path => format!("{path}: {message}"),
            },
        }
    })
}

fn check<T>(op: Op, value: T, ok: Result<(), String>) -> Result<T, ParseError> {
    ok.map(|()| value)
        .map_err(|message| ParseError::InvalidParams {
            op: op.as_str(),
            message,
        })
}

fn id_field(name: &str, value: &str) -> Result<(), String> {
    check_id(value).map_err(|why| format!("{name} is {why}"))
}

impl Request {
    /// Types `payload` for `op`.
    pub fn from_parts(op: &str, payload: Value) -> Result<Request, ParseError> {
        let kind = Op::parse(op).ok_or_else(|| ParseError::UnknownOp(op.to_owned()))?;
        // serde would also read a struct from an array; the protocol (and schema) want objects.
        if !payload.is_object() {
            return Err(ParseError::InvalidParams {
                op: kind.as_str(),
                message: "payload is not an object".to_owned(),
            });
        }
        Ok(match kind {
            Op::Ping => Request::Ping(params(kind, payload)?),
            Op::JobsCreate => {
                let p: JobsCreateParams = params(kind, payload)?;
                let ok = p.job.validate();
                Request::JobsCreate(check(kind, p, ok)?)
            }
            Op::JobsStart | Op::JobsStatus | Op::JobsStream | Op::JobsResult => {
                let p: JobRef = params(kind, payload)?;
                let ok = id_field("jobId", &p.job_id);
                let p = check(kind, p, ok)?;
                match kind {
                    Op::JobsStart => Request::JobsStart(p),
                    Op::JobsStatus => Request::JobsStatus(p),
                    Op::JobsStream => Request::JobsStream(p),
                    _ => Request::JobsResult(p),
                }
            }
            Op::JobsCancel => {
                let p: JobsCancelParams = params(kind, payload)?;
                let ok = id_field("jobId", &p.job_id);
                Request::JobsCancel(check(kind, p, ok)?)
            }
            Op::ApprovalsList => {
                let p: ApprovalsListParams = params(kind, payload)?;
                let ok = p.job_id.as_deref().map_or(Ok(()), |j| id_field("jobId", j));
                Request::ApprovalsList(check(kind, p, ok)?)
            }
            Op::ApprovalsApprove | Op::ApprovalsDeny => {
                let p: ApprovalDecisionParams = params(kind, payload)?;
                let ok = id_field("jobId", &p.job_id)
                    .and_then(|()| id_field("approvalId", &p.approval_id))
                    .and_then(|()| match (kind, p.decision) {
                        (Op::ApprovalsDeny, Some(Decision::Approve)) => {
                            Err("approvals.deny with decision \"approve\"".to_owned())
                        }
                        _ => Ok(()),
                    });
                let p = check(kind, p, ok)?;
                if kind == Op::ApprovalsApprove {
                    Request::ApprovalsApprove(p)
                } else {
                    Request::ApprovalsDeny(p)
                }
            }
        })
    }

    /// The operation.
    pub fn op(&self) -> Op {
        match self {
            Request::Ping(_) => Op::Ping,
            Request::JobsCreate(_) => Op::JobsCreate,
            Request::JobsStart(_) => Op::JobsStart,
            Request::JobsStatus(_) => Op::JobsStatus,
            Request::JobsStream(_) => Op::JobsStream,
            Request::JobsResult(_) => Op::JobsResult,
            Request::JobsCancel(_) => Op::JobsCancel,
            Request::ApprovalsList(_) => Op::ApprovalsList,
            Request::ApprovalsApprove(_) => Op::ApprovalsApprove,
            Request::ApprovalsDeny(_) => Op::ApprovalsDeny,
        }
    }

    /// The payload as JSON.
    pub fn payload(&self) -> Value {
        let value = match self {
            Request::Ping(p) => serde_json::to_value(p),
            Request::JobsCreate(p) => serde_json::to_value(p),
            Request::JobsStart(p)
            | Request::JobsStatus(p)
            | Request::JobsStream(p)
            | Request::JobsResult(p) => serde_json::to_value(p),
            Request::JobsCancel(p) => serde_json::to_value(p),
            Request::ApprovalsList(p) => serde_json::to_value(p),
            Request::ApprovalsApprove(p) | Request::ApprovalsDeny(p) => serde_json::to_value(p),
        };
        // Plain structs of strings, numbers, maps: serialising them cannot fail.
        value.unwrap_or(Value::Null)
    }

    /// The job the request is about, when there is one (logs always carry it).
    pub fn job_id(&self) -> Option<&str> {
        match self {
            Request::Ping(_) => None,
            Request::JobsCreate(p) => Some(&p.job.job_id),
            Request::JobsStart(p)
            | Request::JobsStatus(p)
            | Request::JobsStream(p)
            | Request::JobsResult(p) => Some(&p.job_id),
            Request::JobsCancel(p) => Some(&p.job_id),
            Request::ApprovalsList(p) => p.job_id.as_deref(),
            Request::ApprovalsApprove(p) | Request::ApprovalsDeny(p) => Some(&p.job_id),
        }
    }
}

/// `gateway.ping` params: `{ "echo": "hello" }`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PingParams {
    /// Text the gateway sends back.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub echo: Option<String>,
}

/// `gateway.ping` result: `{ "echo": "hello", "gatewayVersion": "2026.2.18", "uptimeSec": 1234 }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PingResult {
    /// The request's `echo`.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub echo: Option<String>,
    /// The gateway's version (`Config::gateway_version`).
    pub gateway_version: String,
    /// Whole seconds since the engine was created.
    #[serde(deserialize_with = "uint")]
    pub uptime_sec: u64,
}

/// `jobs.create` params: `{ "job": { ... } }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsCreateParams {
    /// The job.
    pub job: JobSpec,
}

/// A job as the Commander describes it. `jobId` and `repo` are required; the spec's example
/// has every other field, but nothing says they are mandatory, so they are optional and the
/// gateway applies defaults (see [`Policy`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    /// The idempotency key (`job_01J...`).
    pub job_id: String,
    /// `org/repo`.
    pub repo: String,
    /// The issue the job comes from.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub issue: Option<Issue>,
    /// The branch to work on (`ai/issue-142`).
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub branch: Option<String>,
    /// The workspace to run in.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub workspace: Option<Workspace>,
    /// The Commander's policy for this job.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub policy: Option<Policy>,
    /// What to do.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub instructions: Option<Instructions>,
}

impl JobSpec {
    /// The checks serde cannot express (the schema has the same ones).
    pub(crate) fn validate(&self) -> Result<(), String> {
        id_field("jobId", &self.job_id)?;
        if self.repo.is_empty() {
            return Err("repo is empty".to_owned());
        }
        if let Some(policy) = &self.policy
            && policy.timeout_sec == Some(0)
        {
            return Err("policy.timeoutSec must be at least 1".to_owned());
        }
        Ok(())
    }
}

/// `{ "number": 142, "title": "..." }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    /// The issue number.
    #[serde(deserialize_with = "uint")]
    pub number: u64,
    /// Its title.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub title: Option<String>,
}

/// `{ "name": "org-repo", "mode": "isolated" }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    /// The workspace directory name.
    pub name: String,
    /// How it is shared.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub mode: Option<WorkspaceMode>,
}

/// A workspace's isolation. The spec shows `isolated` only ("diretório isolado", an isolated
/// directory per repo/project/branch); `shared` is deskwire's name for the other case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceMode {
    /// Its own directory.
    Isolated,
    /// Reuses a directory other jobs may use.
    Shared,
}

/// The Commander's rules for a job. Absent fields take safe defaults: `sandbox` true,
/// `allowNetwork` false, `timeoutSec` `Config::default_timeout_sec` (1800), `requireApprovals`
/// true.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// Run inside a sandbox.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub sandbox: Option<bool>,
    /// Allow network access.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub allow_network: Option<bool>,
    /// Longest execution (`RUNNING`) in seconds, at least 1; then the job goes `TIMEOUT`.
    #[serde(
        default,
        deserialize_with = "opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout_sec: Option<u64>,
    /// Sensitive steps wait for an explicit approval (else they are approved at once).
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub require_approvals: Option<bool>,
}

impl Policy {
    /// `sandbox` with its default.
    pub fn sandbox(&self) -> bool {
        self.sandbox.unwrap_or(true)
    }

    /// `requireApprovals` with its default.
    pub fn require_approvals(&self) -> bool {
        self.require_approvals.unwrap_or(true)
    }
}

/// `{ "goal": ..., "acceptance": [...], "constraints": [...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instructions {
    /// What the job should achieve.
    pub goal: String,
    /// Acceptance criteria.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub acceptance: Option<Vec<String>>,
    /// Constraints.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub constraints: Option<Vec<String>>,
}

/// `{ "jobId": ..., "status": ... }`: the result of `jobs.create`, `jobs.start`, `jobs.stream`
/// and `jobs.cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatusBrief {
    /// The job.
    pub job_id: String,
    /// Its state.
    pub status: JobState,
}

/// `{ "jobId": ... }`: the params of `jobs.start`, `jobs.status`, `jobs.stream`, `jobs.result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobRef {
    /// The job.
    pub job_id: String,
}

/// `jobs.cancel` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobsCancelParams {
    /// The job.
    pub job_id: String,
    /// Why (kept for the application; not interpreted).
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub reason: Option<String>,
}

/// `jobs.status` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobsStatusResult {
    /// The job.
    pub job_id: String,
    /// Its state.
    pub status: JobState,
    /// What it is doing (`modify_code`), as the executor last reported.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub step: Option<String>,
    /// How far along, `0.0..=1.0`.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub progress: Option<f64>,
}

/// A `jobs.event` level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "GatewayLevel"))]
pub enum Level {
    /// Detail.
    Debug,
    /// Progress.
    Info,
    /// Something odd.
    Warn,
    /// A failure.
    Error,
}

/// The payload of a `jobs.event` event: `{ "jobId", "level", "msg" }`, plus, from deskwire's
/// engine, `status` when the event reports a state change and `seq` (per job, from 1) so a
/// subscriber can tell whether it missed events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobEvent {
    /// The job.
    pub job_id: String,
    /// Severity.
    pub level: Level,
    /// The log text.
    pub msg: String,
    /// The job's new state, on a state change.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub status: Option<JobState>,
    /// The event's number within its job.
    #[serde(
        default,
        deserialize_with = "opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub seq: Option<u64>,
}

/// `jobs.result` result: the artifacts. For a job still running only `jobId`, `status` and the
/// approvals so far are set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobsResultResult {
    /// The job.
    pub job_id: String,
    /// Its state.
    pub status: JobState,
    /// What was done.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub summary: Option<String>,
    /// Where the changes are.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub git: Option<GitInfo>,
    /// The changes.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub diff: Option<Diff>,
    /// Check outcomes by name (`{"tests": "pass", "lint": "pass"}`); free text, the spec lists
    /// no values.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub checks: Option<BTreeMap<String, String>>,
    /// Commands the job ran ("comandos rodados" in the spec's description of `jobs.result`).
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub commands: Option<Vec<String>>,
    /// Every approval the job asked for and how it was decided.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub approvals: Option<Vec<ApprovalSummary>>,
    /// Why the job failed, when it did and the executor said.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub error: Option<super::ErrorBody>,
}

/// `{ "base", "branch", "commit", "filesChanged" }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitInfo {
    /// The base branch.
    pub base: String,
    /// The job's branch.
    pub branch: String,
    /// The commit with the changes.
    pub commit: String,
    /// How many files changed.
    #[serde(
        default,
        deserialize_with = "opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub files_changed: Option<u64>,
}

/// `{ "format": "unified", "content": "..." }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diff {
    /// The diff format (`unified`).
    pub format: String,
    /// The diff.
    pub content: String,
}

/// An approval in `jobs.result`: `{ "kind": "shell", "requested": "rm -rf ...", "approved":
/// false }`, plus its `approvalId`. A pending approval or one that lapsed when its job left
/// `RUNNING` reads `approved: false`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalSummary {
    /// The approval.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub approval_id: Option<String>,
    /// What kind of step (`shell`).
    pub kind: String,
    /// What the step would do.
    pub requested: String,
    /// Whether it was approved.
    pub approved: bool,
}

/// `approvals.list` params: optional filters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalsListParams {
    /// Only this job's approvals.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub job_id: Option<String>,
    /// Only approvals in this state.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub status: Option<ApprovalStatus>,
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "GatewayApprovalStatus"))]
pub enum ApprovalStatus {
    /// Waiting for a decision.
    Pending,
    /// Approved.
    Approved,
    /// Denied.
    Denied,
    /// Its job left `RUNNING` before a decision (it can no longer be decided).
    Expired,
}

/// One approval in `approvals.list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalInfo {
    /// The approval (`appr_01J...`).
    pub approval_id: String,
    /// Its job.
    pub job_id: String,
    /// What kind of step (`shell`).
    pub kind: String,
    /// What the step would do.
    pub requested: String,
    /// Where it stands.
    pub status: ApprovalStatus,
    /// The reason given with the decision.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub reason: Option<String>,
}

/// `approvals.list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalsListResult {
    /// The approvals, oldest first.
    pub approvals: Vec<ApprovalInfo>,
}

/// A decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "GatewayDecision"))]
pub enum Decision {
    /// Let the step run.
    Approve,
    /// Refuse the step.
    Deny,
}

/// `approvals.approve` / `approvals.deny` params: `{ "jobId", "approvalId", "decision",
/// "reason" }`. `decision` may be left out: it then follows the operation's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalDecisionParams {
    /// The job.
    pub job_id: String,
    /// The approval.
    pub approval_id: String,
    /// The decision.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub decision: Option<Decision>,
    /// Why (`"Allowed by label direct-commit"`).
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub reason: Option<String>,
}

/// `approvals.approve` / `approvals.deny` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalDecisionResult {
    /// The job.
    pub job_id: String,
    /// The approval.
    pub approval_id: String,
    /// The decision in force.
    pub decision: Decision,
    /// The job's state (a decision does not change it).
    pub status: JobState,
}
