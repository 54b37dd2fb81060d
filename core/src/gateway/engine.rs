//! The gateway engine: the server side of the protocol, sans-IO.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::canonical::canonical_json;
use super::envelope::{Envelope, EventEnvelope, RequestEnvelope, ResponseEnvelope, Timestamp};
use super::error::{ErrorBody, ErrorCode, LocalError, ParseError};
use super::job::JobState;
use super::ops::{
    ApprovalDecisionParams, ApprovalDecisionResult, ApprovalInfo, ApprovalStatus, ApprovalSummary,
    ApprovalsListParams, ApprovalsListResult, Decision, Diff, GitInfo, JobEvent, JobSpec,
    JobStatusBrief, JobsResultResult, JobsStatusResult, Level, Op, PingResult, Request, check_id,
};
use super::secret::Token;
use super::{Config, Event, IDLE_WAIT_MS, Output};
use crate::entropy::{Entropy, SecretRng};

/// A connection, named by the host (a WebSocket, or one HTTP request of the fallback). JSON:
/// the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConnId(pub u64);

/// A message for one connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Transmit {
    /// Where to send it.
    pub conn: ConnId,
    /// What to send.
    pub message: Outgoing,
}

/// A message the engine wants sent, without its `ts`: the host stamps it when formatting.
/// `Debug` scrubs secrets from results.
#[derive(Clone, PartialEq)]
pub enum Outgoing {
    /// A response to request `id`.
    Response {
        /// The request's id.
        id: String,
        /// The result or the error.
        outcome: Result<Map<String, Value>, ErrorBody>,
    },
    /// A `jobs.event` for a subscriber; `id` is its `jobs.stream` request's id.
    Event {
        /// The subscribing request's id.
        id: String,
        /// The event.
        event: JobEvent,
    },
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outgoing::Response { id, outcome } => f
                .debug_struct("Response")
                .field("id", id)
                .field("outcome", &outcome.as_ref().map(super::secret::RedactedMap))
                .finish(),
            Outgoing::Event { id, event } => f
                .debug_struct("Event")
                .field("id", id)
                .field("event", event)
                .finish(),
        }
    }
}

impl Outgoing {
    /// The envelope with `ts`.
    pub fn envelope(&self, ts: Timestamp) -> Envelope {
        match self {
            Outgoing::Response { id, outcome } => Envelope::Response(ResponseEnvelope {
                v: super::Version::current(),
                id: id.clone(),
                ts,
                outcome: outcome.clone(),
            }),
            Outgoing::Event { id, event } => Envelope::Event(EventEnvelope {
                v: Some(super::Version::current()),
                id: Some(id.clone()),
                ts: Some(ts),
                event: event.clone(),
            }),
        }
    }

    /// The JSON text to send, stamped with `ts`.
    pub fn to_json(&self, ts: &Timestamp) -> String {
        self.envelope(ts.clone()).to_value().to_string()
    }
}

/// What the executor produced, for `jobs.result` (all optional). JSON: the members of
/// `jobs.result` (`summary`, `git`, `diff`, `checks`, `commands`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Artifacts {
    /// What was done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Where the changes are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<GitInfo>,
    /// The changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
    /// Check outcomes by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<BTreeMap<String, String>>,
    /// Commands run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
}

/// The answer to [`Gateway::request_approval`]. JSON: `{"approval_id", "status"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalTicket {
    /// The approval's id (the host's, or `appr_` and 26 base32 characters from the engine's entropy).
    pub approval_id: String,
    /// `Pending` (wait for [`Event::ApprovalDecided`]), or `Approved` at once when the job's
    /// policy has `requireApprovals: false`.
    pub status: ApprovalStatus,
}

/// Why the host refuses a transport upgrade ([`Gateway::check_connection`]). JSON: snake_case,
/// `"bad_token"`, `{"too_many_connections": {"max": 64}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConnectionRefusal {
    /// The presented token is not one the gateway accepts.
    #[error("unauthorized: not an accepted bearer token")]
    BadToken,
    /// `max_connections` connections are authenticated by the transport already.
    #[error(
        "too many connections: {max} are open with a bearer token (maxConnections); try again later"
    )]
    TooManyConnections {
        /// `Config::max_connections`.
        max: usize,
    },
}

impl ConnectionRefusal {
    /// The HTTP status that refuses the upgrade: 401 for a bad token, 503 for the limit.
    pub fn http_status(&self) -> u16 {
        match self {
            ConnectionRefusal::BadToken => 401,
            ConnectionRefusal::TooManyConnections { .. } => 503,
        }
    }

    /// The WebSocket close code for a connection that was accepted before the refusal was
    /// known (1008 policy violation for a bad token, 1013 try again later for the limit).
    pub fn close_code(&self) -> u16 {
        match self {
            ConnectionRefusal::BadToken => 1008,
            ConnectionRefusal::TooManyConnections { .. } => 1013,
        }
    }
}

/// Counters for one operation (the spec: "métricas por operação", metrics per operation).
/// Latency is the host's to measure: the engine answers within the `handle_message` call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OpStats {
    /// Requests answered.
    pub requests: u64,
    /// Of which answered with an error.
    pub errors: u64,
}

/// Counters. JSON: the fields by name, `ops` keyed by the operation's wire name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    /// Messages given to `handle_message`.
    pub messages: u64,
    /// Messages dropped without an answer: over the size limit, not JSON, no usable `id`, or
    /// not a request.
    pub ignored: u64,
    /// Requests refused `E_UNAUTHORIZED`.
    pub unauthorized: u64,
    /// Requests answered with an error before dispatch (bad envelope, version, credentials).
    pub refused: u64,
    /// Per operation.
    pub ops: BTreeMap<Op, OpStats>,
    /// `jobs.event` messages queued.
    pub events_sent: u64,
    /// `jobs.event` log lines dropped because the output queue was full.
    pub events_dropped: u64,
    /// Final jobs forgotten to stay within `max_jobs`.
    pub jobs_forgotten: u64,
}

#[derive(Debug, Clone)]
pub(super) struct Approval {
    pub(super) id: String,
    pub(super) kind: String,
    pub(super) requested: String,
    pub(super) status: ApprovalStatus,
    pub(super) reason: Option<String>,
}

#[derive(Debug, Clone)]
pub(super) struct Job {
    pub(super) spec: JobSpec,
    /// Canonical text of the `jobs.create` payload, for idempotency.
    pub(super) canonical: String,
    pub(super) state: JobState,
    /// Whether `jobs.start` ever took effect (a later `jobs.start` then answers the state).
    pub(super) started: bool,
    pub(super) step: Option<String>,
    pub(super) progress: Option<f64>,
    /// While `RUNNING`: when it times out.
    pub(super) deadline: Option<u64>,
    pub(super) approvals: Vec<Approval>,
    pub(super) artifacts: Artifacts,
    pub(super) error: Option<ErrorBody>,
    pub(super) event_seq: u64,
}

/// `appr_` + 26 Crockford base32 characters (130 bits, ULID-sized like the spec's
/// `appr_01J...`) from the engine's secrets: an approval id names the dangerous step a decision
/// applies to, so one id seen must not tell the next.
fn new_approval_id(secrets: &mut SecretRng) -> String {
    const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    format!("appr_{}", secrets.chars(CROCKFORD, 26))
}

/// The gateway: a sans-IO server for the gateway protocol. See the [module docs](super) for the
/// host loop. The engine is `Send` but not `Sync`: one host thread drives it.
#[derive(Debug)]
pub struct Gateway {
    pub(super) config: Config,
    started_ms: u64,
    pub(super) jobs: BTreeMap<String, Job>,
    /// Job ids, oldest first (which final job to forget first, and listing order).
    order: VecDeque<String>,
    /// `QUEUED` jobs waiting for a run slot, first come first served.
    pub(super) run_queue: VecDeque<String>,
    pub(super) running: usize,
    /// The `RUNNING` jobs' deadlines, earliest first, beside `jobs`: a drained
    /// [`Gateway::poll_output`] and [`Gateway::handle_timeout`] read the next ones without
    /// visiting every remembered job (`maxJobs` may be large).
    pub(super) deadlines: BTreeSet<(u64, String)>,
    /// Approval id → job id.
    approval_index: BTreeMap<String, String>,
    authenticated: BTreeSet<ConnId>,
    /// Job id → (connection, `jobs.stream` request id).
    subscriptions: BTreeMap<String, Vec<(ConnId, String)>>,
    pub(super) subscription_count: usize,
    outputs: VecDeque<Output>,
    secrets: SecretRng,
    stats: Stats,
}

fn to_map<T: Serialize>(value: &T) -> Map<String, Value> {
    // Our result types are structs of strings, numbers, maps: always JSON objects.
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

fn not_found_job(job_id: &str) -> ErrorBody {
    ErrorBody::new(ErrorCode::NotFound, format!("no job {job_id:?}")).with_detail("jobId", job_id)
}

fn check_tokens(tokens: &[Token]) -> Result<(), LocalError> {
    if tokens.is_empty() || tokens.iter().any(|t| t.expose().is_empty()) {
        return Err(LocalError::NoToken);
    }
    Ok(())
}

impl Gateway {
    /// An engine started at `now_ms` (the origin of `gateway.ping`'s `uptimeSec`). `entropy`
    /// (32 bytes from the OS's random source, e.g. `getrandom::fill`) fixes the generated
    /// approval ids. Fails when no usable token is configured.
    pub fn new(config: Config, now_ms: u64, entropy: Entropy) -> Result<Self, LocalError> {
        check_tokens(&config.tokens)?;
        Ok(Gateway {
            config,
            started_ms: now_ms,
            jobs: BTreeMap::new(),
            order: VecDeque::new(),
            run_queue: VecDeque::new(),
            running: 0,
            deadlines: BTreeSet::new(),
            approval_index: BTreeMap::new(),
            authenticated: BTreeSet::new(),
            subscriptions: BTreeMap::new(),
            subscription_count: 0,
            outputs: VecDeque::new(),
            secrets: SecretRng::new(entropy),
            stats: Stats::default(),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Replaces the accepted tokens (rotation). Fails, changing nothing, when none is usable.
    /// Connections authenticated by the transport must authenticate again: the token they
    /// showed may be the one just retired.
    pub fn set_tokens(&mut self, tokens: Vec<Token>) -> Result<(), LocalError> {
        check_tokens(&tokens)?;
        self.config.tokens = tokens;
        self.authenticated.clear();
        Ok(())
    }

    /// Whether `presented` is an accepted token. Every configured token is compared, each in
    /// constant time, and the answers are combined without short-circuit.
    fn token_ok(&self, presented: &str) -> bool {
        self.config
            .tokens
            .iter()
            .fold(false, |ok, token| ok | token.matches(presented))
    }

    /// What to do with a transport upgrade (a WebSocket handshake) that presents `presented`
    /// (its `Authorization: Bearer` header or `token` query parameter), before accepting it:
    /// `Ok` to accept (then [`Gateway::authenticate_connection`] when a token was presented;
    /// without one every request must carry `auth.token`), or why to refuse it, with the HTTP
    /// status to answer ([`ConnectionRefusal::http_status`]): a token that is not accepted
    /// (401), or `max_connections` connections authenticated already (503). Refusing at the
    /// upgrade is what tells the Commander the truth: a connection accepted past the limit
    /// could only answer each request `E_UNAUTHORIZED`, which blames a valid token.
    pub fn check_connection(&self, presented: Option<&str>) -> Result<(), ConnectionRefusal> {
        let Some(presented) = presented else {
            return Ok(());
        };
        if !self.token_ok(presented) {
            return Err(ConnectionRefusal::BadToken);
        }
        if self.authenticated.len() >= self.config.max_connections {
            return Err(ConnectionRefusal::TooManyConnections {
                max: self.config.max_connections,
            });
        }
        Ok(())
    }

    /// The host checked a bearer token sent by the transport (HTTP `Authorization` header or a
    /// query parameter): when it is accepted, requests on `conn` without `auth` are accepted
    /// too. Returns whether it was (false also when `max_connections` are authenticated: a
    /// host that did not refuse the upgrade through [`Gateway::check_connection`] closes the
    /// connection then, saying [`ConnectionRefusal::TooManyConnections`]).
    pub fn authenticate_connection(&mut self, conn: ConnId, presented: &str) -> bool {
        let ok = self.token_ok(presented);
        if ok
            && (self.authenticated.len() < self.config.max_connections
                || self.authenticated.contains(&conn))
        {
            self.authenticated.insert(conn);
            return true;
        }
        false
    }

    /// The connection closed: forget its authentication and its subscriptions. Responses
    /// already queued for it are still returned by `poll_output` (the host drops them).
    pub fn close_connection(&mut self, conn: ConnId) {
        self.authenticated.remove(&conn);
        let mut removed = 0;
        for subs in self.subscriptions.values_mut() {
            let before = subs.len();
            subs.retain(|(c, _)| *c != conn);
            removed += before - subs.len();
        }
        self.subscriptions.retain(|_, subs| !subs.is_empty());
        self.subscription_count -= removed;
    }

    /// A job's state, if the job is remembered.
    pub fn job_state(&self, job_id: &str) -> Option<JobState> {
        self.jobs.get(job_id).map(|j| j.state)
    }

    /// A job as the Commander described it.
    pub fn job_spec(&self, job_id: &str) -> Option<&JobSpec> {
        self.jobs.get(job_id).map(|j| &j.spec)
    }

    /// Jobs remembered.
    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    /// Outputs waiting for `poll_output`.
    pub fn queued_outputs(&self) -> usize {
        self.outputs.len()
    }

    // ---- input from the peer ------------------------------------------------------------

    /// A message arrived on `conn`. Requests are answered through `poll_output`; what cannot be
    /// answered (no usable `id`, not a request) is ignored and counted. Fails only when the
    /// output queue is full: drain `poll_output` and feed the message again.
    pub fn handle_message(
        &mut self,
        now: u64,
        conn: ConnId,
        bytes: &[u8],
    ) -> Result<(), LocalError> {
        if self.outputs.len() >= self.config.max_queued_outputs {
            return Err(LocalError::Backpressure(self.outputs.len()));
        }
        self.stats.messages += 1;
        if bytes.len() > self.config.max_message_bytes {
            self.stats.ignored += 1;
            return Ok(());
        }
        let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
            self.stats.ignored += 1;
            return Ok(());
        };
        let id = value
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| check_id(id).is_ok())
            .map(str::to_owned);
        let Some(id) = id else {
            self.stats.ignored += 1;
            return Ok(());
        };
        match self.admit(conn, value) {
            Ok(envelope) => self.dispatch(now, conn, envelope),
            Err(Refusal::Ignore) => self.stats.ignored += 1,
            Err(Refusal::Answer(error)) => {
                self.stats.refused += 1;
                self.outputs.push_back(Output::Transmit(Transmit {
                    conn,
                    message: Outgoing::Response {
                        id,
                        outcome: Err(error),
                    },
                }));
            }
        }
        Ok(())
    }

    /// Version, type and credentials before the fields: an old Commander learns about the
    /// version, and a caller without a token learns nothing about its payload.
    fn admit(&mut self, conn: ConnId, value: Value) -> Result<RequestEnvelope, Refusal> {
        match super::envelope::check_head(&value, "request", true) {
            Ok(()) => {}
            Err(ParseError::WrongType { .. }) => return Err(Refusal::Ignore),
            Err(e) => return Err(Refusal::Answer(ErrorBody::from(&e))),
        }
        let authorized = match value.get("auth") {
            None => self.authenticated.contains(&conn),
            Some(auth) => auth
                .get("token")
                .and_then(Value::as_str)
                .is_some_and(|t| self.token_ok(t)),
        };
        if !authorized {
            self.stats.unauthorized += 1;
            return Err(Refusal::Answer(ErrorBody::new(
                ErrorCode::Unauthorized,
                "missing or invalid bearer token",
            )));
        }
        RequestEnvelope::from_value(value).map_err(|e| Refusal::Answer(ErrorBody::from(&e)))
    }

    fn dispatch(&mut self, now: u64, conn: ConnId, envelope: RequestEnvelope) {
        let op = envelope.request.op();
        // Events a request causes go out after its response.
        let mark = self.outputs.len();
        let outcome = match envelope.request {
            Request::Ping(p) => Ok(to_map(&PingResult {
                echo: p.echo,
                gateway_version: self.config.gateway_version.clone(),
                uptime_sec: now.saturating_sub(self.started_ms) / 1000,
            })),
            Request::JobsCreate(p) => {
                let canonical = canonical_json(&Request::JobsCreate(p.clone()).payload());
                self.create(p.job, canonical)
            }
            Request::JobsStart(p) => self.start(now, &p.job_id),
            Request::JobsStatus(p) => self.status(&p.job_id),
            Request::JobsStream(p) => self.stream(conn, &envelope.id, &p.job_id),
            Request::JobsResult(p) => self.result(&p.job_id),
            Request::JobsCancel(p) => self.cancel_request(now, &p.job_id),
            Request::ApprovalsList(p) => self.list_approvals(&p),
            Request::ApprovalsApprove(p) => self.decide(&p, Decision::Approve),
            Request::ApprovalsDeny(p) => self.decide(&p, Decision::Deny),
        };
        let stats = self.stats.ops.entry(op).or_default();
        stats.requests += 1;
        stats.errors += u64::from(outcome.is_err());
        let response = Output::Transmit(Transmit {
            conn,
            message: Outgoing::Response {
                id: envelope.id,
                outcome,
            },
        });
        self.outputs.insert(mark, response);
    }

    fn brief(job_id: &str, status: JobState) -> Map<String, Value> {
        to_map(&JobStatusBrief {
            job_id: job_id.to_owned(),
            status,
        })
    }

    /// `jobs.create`: idempotent by `jobId`. A repeat with the same payload (compared as
    /// canonical JSON, after typing, so unknown fields do not count) gets the first answer,
    /// `{jobId, status: "CREATED"}`, whatever the job's state now; a different payload gets
    /// `E_CONFLICT`.
    fn create(
        &mut self,
        spec: JobSpec,
        canonical: String,
    ) -> Result<Map<String, Value>, ErrorBody> {
        if let Some(job) = self.jobs.get(&spec.job_id) {
            return if job.canonical == canonical {
                Ok(Self::brief(&spec.job_id, JobState::Created))
            } else {
                Err(ErrorBody::new(
                    ErrorCode::Conflict,
                    format!("job {:?} exists with a different payload", spec.job_id),
                )
                .with_detail("jobId", spec.job_id.as_str()))
            };
        }
        let policy = spec.policy.clone().unwrap_or_default();
        if self.config.require_sandbox && !policy.sandbox() {
            return Err(
                ErrorBody::new(ErrorCode::PolicyDeny, "Sandbox required by policy.")
                    .with_detail("label", "sandbox-required"),
            );
        }
        if self.jobs.len() >= self.config.max_jobs && !self.forget_oldest_final() {
            return Err(ErrorBody::new(
                ErrorCode::Capacity,
                format!("{} jobs in progress, none finished", self.jobs.len()),
            ));
        }
        let job_id = spec.job_id.clone();
        self.jobs.insert(
            job_id.clone(),
            Job {
                spec,
                canonical,
                state: JobState::Created,
                started: false,
                step: None,
                progress: None,
                deadline: None,
                approvals: Vec::new(),
                artifacts: Artifacts::default(),
                error: None,
                event_seq: 0,
            },
        );
        self.order.push_back(job_id.clone());
        self.outputs.push_back(Output::Event(Event::JobCreated {
            job_id: job_id.clone(),
        }));
        Ok(Self::brief(&job_id, JobState::Created))
    }

    fn forget_oldest_final(&mut self) -> bool {
        let Some(pos) = self
            .order
            .iter()
            .position(|id| self.jobs.get(id).is_some_and(|j| j.state.is_terminal()))
        else {
            return false;
        };
        let Some(job_id) = self.order.remove(pos) else {
            return false;
        };
        if let Some(job) = self.jobs.remove(&job_id) {
            for approval in job.approvals {
                self.approval_index.remove(&approval.id);
            }
        }
        // Final jobs have no subscribers (dropped on the final state); stay safe anyway.
        if let Some(subs) = self.subscriptions.remove(&job_id) {
            self.subscription_count -= subs.len();
        }
        self.stats.jobs_forgotten += 1;
        true
    }

    /// `jobs.start`: `CREATED → QUEUED`, then `RUNNING` when a run slot is free. A job started
    /// before is never restarted: the answer is its state now ("se já RUNNING/COMPLETED, não
    /// reinicia"). A job that ended without ever starting (cancelled or failed while `CREATED`)
    /// cannot start: `E_INVALID_TRANSITION` from its state to `QUEUED`.
    fn start(&mut self, now: u64, job_id: &str) -> Result<Map<String, Value>, ErrorBody> {
        let job = self.jobs.get(job_id).ok_or_else(|| not_found_job(job_id))?;
        if job.state == JobState::Created {
            self.apply(now, job_id, JobState::Queued)
                .map_err(|e| local_to_body(&e))?;
        } else if !job.started {
            let error = super::TransitionError {
                from: job.state,
                to: JobState::Queued,
            };
            return Err(ErrorBody::from(&error));
        }
        let state = self.jobs.get(job_id).map_or(JobState::Created, |j| j.state);
        Ok(Self::brief(job_id, state))
    }

    fn status(&self, job_id: &str) -> Result<Map<String, Value>, ErrorBody> {
        let job = self.jobs.get(job_id).ok_or_else(|| not_found_job(job_id))?;
        Ok(to_map(&JobsStatusResult {
            job_id: job_id.to_owned(),
            status: job.state,
            step: job.step.clone(),
            progress: job.progress,
        }))
    }

    /// `jobs.stream`: events of the job go to this connection, tagged with this request's id,
    /// until the job reaches a final state or the connection closes. A job already final has
    /// nothing more to say: the answer is its state and no subscription is made. Subscribing
    /// again on the same connection only changes the id the events carry.
    fn stream(
        &mut self,
        conn: ConnId,
        request_id: &str,
        job_id: &str,
    ) -> Result<Map<String, Value>, ErrorBody> {
        let job = self.jobs.get(job_id).ok_or_else(|| not_found_job(job_id))?;
        let state = job.state;
        if !state.is_terminal() {
            let subs = self.subscriptions.entry(job_id.to_owned()).or_default();
            if let Some(existing) = subs.iter_mut().find(|(c, _)| *c == conn) {
                existing.1 = request_id.to_owned();
            } else if self.subscription_count >= self.config.max_subscriptions {
                if subs.is_empty() {
                    self.subscriptions.remove(job_id);
                }
                return Err(ErrorBody::new(
                    ErrorCode::Capacity,
                    "too many stream subscriptions",
                ));
            } else {
                subs.push((conn, request_id.to_owned()));
                self.subscription_count += 1;
            }
        }
        Ok(Self::brief(job_id, state))
    }

    fn result(&self, job_id: &str) -> Result<Map<String, Value>, ErrorBody> {
        let job = self.jobs.get(job_id).ok_or_else(|| not_found_job(job_id))?;
        let approvals = job
            .approvals
            .iter()
            .map(|a| ApprovalSummary {
                approval_id: Some(a.id.clone()),
                kind: a.kind.clone(),
                requested: a.requested.clone(),
                approved: a.status == ApprovalStatus::Approved,
            })
            .collect();
        let artifacts = job.artifacts.clone();
        Ok(to_map(&JobsResultResult {
            job_id: job_id.to_owned(),
            status: job.state,
            summary: artifacts.summary,
            git: artifacts.git,
            diff: artifacts.diff,
            checks: artifacts.checks,
            commands: artifacts.commands,
            approvals: Some(approvals),
            error: job.error.clone(),
        }))
    }

    /// `jobs.cancel`: any non-final job goes `CANCELLED`; cancelling a cancelled job answers
    /// the same again; another final state is `E_INVALID_TRANSITION`.
    fn cancel_request(&mut self, now: u64, job_id: &str) -> Result<Map<String, Value>, ErrorBody> {
        let job = self.jobs.get(job_id).ok_or_else(|| not_found_job(job_id))?;
        if job.state != JobState::Cancelled {
            self.apply(now, job_id, JobState::Cancelled)
                .map_err(|e| local_to_body(&e))?;
        }
        Ok(Self::brief(job_id, JobState::Cancelled))
    }

    /// `approvals.list`: every remembered approval, oldest job first, filtered by `jobId` (an
    /// unknown job is `E_NOT_FOUND`) and `status`.
    fn list_approvals(&self, p: &ApprovalsListParams) -> Result<Map<String, Value>, ErrorBody> {
        if let Some(job_id) = &p.job_id
            && !self.jobs.contains_key(job_id)
        {
            return Err(not_found_job(job_id));
        }
        let mut approvals = Vec::new();
        for job_id in &self.order {
            if p.job_id.as_ref().is_some_and(|j| j != job_id) {
                continue;
            }
            let Some(job) = self.jobs.get(job_id) else {
                continue;
            };
            for a in &job.approvals {
                if p.status.is_some_and(|s| s != a.status) {
                    continue;
                }
                approvals.push(ApprovalInfo {
                    approval_id: a.id.clone(),
                    job_id: job_id.clone(),
                    kind: a.kind.clone(),
                    requested: a.requested.clone(),
                    status: a.status,
                    reason: a.reason.clone(),
                });
            }
        }
        Ok(to_map(&ApprovalsListResult { approvals }))
    }

    /// `approvals.approve` / `approvals.deny`. Only the Commander decides (the request is
    /// authenticated; the executor has no way to approve its own request). The approval must
    /// belong to `jobId`. A pending approval takes the decision and the executor is told; the
    /// job's state does not change. Repeating a decision answers the same; the opposite decision
    /// on a decided approval, or any decision on an expired one, is `E_CONFLICT`.
    fn decide(
        &mut self,
        p: &ApprovalDecisionParams,
        default: Decision,
    ) -> Result<Map<String, Value>, ErrorBody> {
        let decision = p.decision.unwrap_or(default);
        let job = self
            .jobs
            .get_mut(&p.job_id)
            .ok_or_else(|| not_found_job(&p.job_id))?;
        let state = job.state;
        let Some(approval) = job.approvals.iter_mut().find(|a| a.id == p.approval_id) else {
            return Err(ErrorBody::new(
                ErrorCode::NotFound,
                format!("no approval {:?} in job {:?}", p.approval_id, p.job_id),
            )
            .with_detail("approvalId", p.approval_id.as_str()));
        };
        let wanted = match decision {
            Decision::Approve => ApprovalStatus::Approved,
            Decision::Deny => ApprovalStatus::Denied,
        };
        let answer = to_map(&ApprovalDecisionResult {
            job_id: p.job_id.clone(),
            approval_id: p.approval_id.clone(),
            decision,
            status: state,
        });
        match approval.status {
            ApprovalStatus::Pending => {}
            status if status == wanted => return Ok(answer),
            status => {
                return Err(ErrorBody::new(
                    ErrorCode::Conflict,
                    format!(
                        "approval {:?} is already {}",
                        p.approval_id,
                        status_name(status)
                    ),
                )
                .with_detail("approvalId", p.approval_id.as_str())
                .with_detail("status", status_name(status)));
            }
        }
        approval.status = wanted;
        approval.reason = p.reason.clone();
        let msg = format!("approval {} {}", p.approval_id, status_name(wanted));
        self.outputs
            .push_back(Output::Event(Event::ApprovalDecided {
                job_id: p.job_id.clone(),
                approval_id: p.approval_id.clone(),
                decision,
                reason: p.reason.clone(),
            }));
        self.emit(&p.job_id, Level::Info, msg, None, true);
        Ok(answer)
    }

    // ---- the state machine ----------------------------------------------------------------

    /// Moves a job, keeping run slots, deadlines, approvals and subscriptions in step.
    fn apply(&mut self, now: u64, job_id: &str, to: JobState) -> Result<(), LocalError> {
        let default_timeout = self.config.default_timeout_sec;
        let job = self
            .jobs
            .get_mut(job_id)
            .ok_or_else(|| LocalError::UnknownJob(job_id.to_owned()))?;
        let from = job.state;
        from.transition(to)?;
        job.state = to;
        if from == JobState::Running {
            self.running -= 1;
            if let Some(deadline) = job.deadline.take() {
                self.deadlines.remove(&(deadline, job_id.to_owned()));
            }
            for a in &mut job.approvals {
                if a.status == ApprovalStatus::Pending {
                    a.status = ApprovalStatus::Expired;
                }
            }
        }
        if from == JobState::Queued && to != JobState::Running {
            // Leaving the queue some other way: drop its entry now, so a queue that never moves
            // (all run slots busy) cannot fill up with dead entries.
            self.run_queue.retain(|id| id != job_id);
        }
        match to {
            JobState::Queued => {
                job.started = true;
                self.run_queue.push_back(job_id.to_owned());
            }
            JobState::Running => {
                self.running += 1;
                let secs = job
                    .spec
                    .policy
                    .as_ref()
                    .and_then(|p| p.timeout_sec)
                    .unwrap_or(default_timeout);
                let deadline = now.saturating_add(secs.saturating_mul(1000));
                job.deadline = Some(deadline);
                self.deadlines.insert((deadline, job_id.to_owned()));
            }
            _ => {}
        }
        self.outputs.push_back(Output::Event(Event::StateChanged {
            job_id: job_id.to_owned(),
            from,
            to,
        }));
        let level = match to {
            JobState::Failed | JobState::Timeout => Level::Error,
            JobState::Cancelled | JobState::RolledBack => Level::Warn,
            _ => Level::Info,
        };
        self.emit(job_id, level, format!("job {to}"), Some(to), true);
        if to.is_terminal()
            && let Some(subs) = self.subscriptions.remove(job_id)
        {
            self.subscription_count -= subs.len();
        }
        if to == JobState::Queued || from == JobState::Running {
            self.schedule(now);
        }
        Ok(())
    }

    /// Fills free run slots from the queue, oldest first.
    fn schedule(&mut self, now: u64) {
        while self.running < self.config.max_running {
            let Some(job_id) = self.run_queue.pop_front() else {
                return;
            };
            if self.job_state(&job_id) == Some(JobState::Queued) {
                // Cannot fail: the job exists and QUEUED → RUNNING is in the table.
                let _ = self.apply(now, &job_id, JobState::Running);
            }
        }
    }

    /// Queues a `jobs.event` for the job's subscribers. State changes and decisions always go
    /// (`must`); log lines are dropped, and counted, when the output queue is full.
    fn emit(
        &mut self,
        job_id: &str,
        level: Level,
        msg: String,
        status: Option<JobState>,
        must: bool,
    ) {
        let Some(job) = self.jobs.get_mut(job_id) else {
            return;
        };
        job.event_seq += 1;
        let seq = job.event_seq;
        let Some(subs) = self.subscriptions.get(job_id) else {
            return;
        };
        for (conn, id) in subs {
            if !must && self.outputs.len() >= self.config.max_queued_outputs {
                self.stats.events_dropped += 1;
                continue;
            }
            self.stats.events_sent += 1;
            self.outputs.push_back(Output::Transmit(Transmit {
                conn: *conn,
                message: Outgoing::Event {
                    id: id.clone(),
                    event: JobEvent {
                        job_id: job_id.to_owned(),
                        level,
                        msg: msg.clone(),
                        status,
                        seq: Some(seq),
                    },
                },
            }));
        }
    }

    // ---- the executor's side ----------------------------------------------------------------

    /// Moves a job to `to` if the table allows it (see [`super::job`]). The named helpers below
    /// are this with a fixed target.
    pub fn transition(&mut self, now: u64, job_id: &str, to: JobState) -> Result<(), LocalError> {
        self.apply(now, job_id, to)
    }

    /// Execution finished: `RUNNING → REVIEW_READY`, with the artifacts `jobs.result` shows.
    pub fn review_ready(
        &mut self,
        now: u64,
        job_id: &str,
        artifacts: Artifacts,
    ) -> Result<(), LocalError> {
        self.apply(now, job_id, JobState::ReviewReady)?;
        if let Some(job) = self.jobs.get_mut(job_id) {
            job.artifacts = artifacts;
        }
        Ok(())
    }

    /// Review done: `REVIEW_READY → COMPLETED`; `Some(artifacts)` replaces the stored ones
    /// (e.g. with the final commit).
    pub fn complete(
        &mut self,
        now: u64,
        job_id: &str,
        artifacts: Option<Artifacts>,
    ) -> Result<(), LocalError> {
        self.apply(now, job_id, JobState::Completed)?;
        if let (Some(job), Some(artifacts)) = (self.jobs.get_mut(job_id), artifacts) {
            job.artifacts = artifacts;
        }
        Ok(())
    }

    /// The job failed: `→ FAILED`, with the error `jobs.result` shows.
    pub fn fail(&mut self, now: u64, job_id: &str, error: ErrorBody) -> Result<(), LocalError> {
        self.apply(now, job_id, JobState::Failed)?;
        if let Some(job) = self.jobs.get_mut(job_id) {
            job.error = Some(error);
        }
        Ok(())
    }

    /// The job's changes were undone: `→ ROLLED_BACK`.
    pub fn roll_back(&mut self, now: u64, job_id: &str) -> Result<(), LocalError> {
        self.apply(now, job_id, JobState::RolledBack)
    }

    /// The gateway's side cancels a job: `→ CANCELLED`.
    pub fn cancel(&mut self, now: u64, job_id: &str) -> Result<(), LocalError> {
        self.apply(now, job_id, JobState::Cancelled)
    }

    /// What the job is doing, for `jobs.status` (`step`, `progress` in `0.0..=1.0`; `None`
    /// leaves a field as it was).
    pub fn set_progress(
        &mut self,
        job_id: &str,
        step: Option<&str>,
        progress: Option<f64>,
    ) -> Result<(), LocalError> {
        if let Some(p) = progress
            && !(0.0..=1.0).contains(&p)
        {
            return Err(LocalError::InvalidProgress(p));
        }
        let job = self
            .jobs
            .get_mut(job_id)
            .ok_or_else(|| LocalError::UnknownJob(job_id.to_owned()))?;
        if let Some(step) = step {
            job.step = Some(step.to_owned());
        }
        if progress.is_some() {
            job.progress = progress;
        }
        Ok(())
    }

    /// A log line for the job's `jobs.stream` subscribers (dropped and counted when the output
    /// queue is full: logs are lossy, state changes are not).
    pub fn log(&mut self, job_id: &str, level: Level, msg: &str) -> Result<(), LocalError> {
        if !self.jobs.contains_key(job_id) {
            return Err(LocalError::UnknownJob(job_id.to_owned()));
        }
        self.emit(job_id, level, msg.to_owned(), None, false);
        Ok(())
    }

    /// The executor wants to run a sensitive step (`kind` e.g. `shell`, `requested` what it
    /// would run) and needs an approval. The job must be `RUNNING`. With `requireApprovals:
    /// false` in the job's policy the step is approved at once (recorded, reason `policy`);
    /// otherwise it is `Pending` until the Commander decides ([`Event::ApprovalDecided`]). A
    /// pending approval expires when the job leaves `RUNNING`. `approval_id` is the host's id,
    /// or `None` for an unguessable one from the engine's entropy.
    pub fn request_approval(
        &mut self,
        job_id: &str,
        approval_id: Option<&str>,
        kind: &str,
        requested: &str,
    ) -> Result<ApprovalTicket, LocalError> {
        let max = self.config.max_approvals_per_job;
        let job = self
            .jobs
            .get(job_id)
            .ok_or_else(|| LocalError::UnknownJob(job_id.to_owned()))?;
        if job.state != JobState::Running {
            return Err(LocalError::NotRunning {
                job_id: job_id.to_owned(),
                state: job.state,
            });
        }
        if job.approvals.len() >= max {
            return Err(LocalError::TooManyApprovals(job_id.to_owned()));
        }
        let auto = job
            .spec
            .policy
            .as_ref()
            .is_some_and(|p| !p.require_approvals());
        let id = match approval_id {
            Some(id) => {
                check_id(id).map_err(|reason| LocalError::InvalidField {
                    field: "approvalId",
                    reason,
                })?;
                if self.approval_index.contains_key(id) {
                    return Err(LocalError::DuplicateApprovalId(id.to_owned()));
                }
                id.to_owned()
            }
            None => loop {
                let id = new_approval_id(&mut self.secrets);
                if !self.approval_index.contains_key(&id) {
                    break id;
                }
            },
        };
        let status = if auto {
            ApprovalStatus::Approved
        } else {
            ApprovalStatus::Pending
        };
        self.approval_index.insert(id.clone(), job_id.to_owned());
        if let Some(job) = self.jobs.get_mut(job_id) {
            job.approvals.push(Approval {
                id: id.clone(),
                kind: kind.to_owned(),
                requested: requested.to_owned(),
                status,
                reason: auto.then(|| "policy".to_owned()),
            });
        }
        // The event names the approval, not the command: `requested` may hold secrets.
        let msg = if auto {
            format!("approval {id} ({kind}) approved by policy")
        } else {
            format!("approval {id} ({kind}) requested")
        };
        self.emit(job_id, Level::Info, msg, None, true);
        Ok(ApprovalTicket {
            approval_id: id,
            status,
        })
    }

    // ---- time and output ------------------------------------------------------------------

    /// Time passed: `RUNNING` jobs past their `timeoutSec` go `TIMEOUT` (the executor is told
    /// with `StateChanged` and must stop them).
    pub fn handle_timeout(&mut self, now: u64) {
        let due: Vec<String> = self
            .deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline <= now)
            .map(|(_, id)| id.clone())
            .collect();
        for job_id in due {
            // Only RUNNING jobs have a deadline, and RUNNING → TIMEOUT is in the table.
            let _ = self.apply(now, &job_id, JobState::Timeout);
        }
    }

    /// The next thing to do: a message to send, an event, or, once drained, the instant to
    /// call `handle_timeout` (the earliest job deadline, or `now + IDLE_WAIT_MS`). Call it
    /// after every input until it answers `Timeout`.
    pub fn poll_output(&mut self, now: u64) -> Output {
        if let Some(output) = self.outputs.pop_front() {
            return output;
        }
        let next = self.deadlines.first().map(|(deadline, _)| *deadline);
        Output::Timeout(next.unwrap_or(now.saturating_add(IDLE_WAIT_MS)))
    }
}

enum Refusal {
    /// Not something to answer (a response or event sent to the gateway).
    Ignore,
    /// Answer with this error.
    Answer(ErrorBody),
}

fn status_name(status: ApprovalStatus) -> &'static str {
    match status {
        ApprovalStatus::Pending => "pending",
        ApprovalStatus::Approved => "approved",
        ApprovalStatus::Denied => "denied",
        ApprovalStatus::Expired => "expired",
    }
}

fn local_to_body(e: &LocalError) -> ErrorBody {
    match e {
        LocalError::Transition(t) => ErrorBody::from(t),
        LocalError::UnknownJob(id) => not_found_job(id),
        other => ErrorBody::new(ErrorCode::Internal, other.to_string()),
    }
}
