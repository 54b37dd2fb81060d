//! The gateway (`docs/gateway.md`): the engine that serves the orchestrator ("Commander") —
//! the `{v,id,type,ts,op,auth,payload}` envelope, the job state machine, idempotent
//! `jobs.create`, `jobs.stream` events and approvals. The Commander's side is the JSON-RPC peer
//! in the gateway dialect ([`crate::jsonrpc::JsonRpcDialect::Gateway`]).
//!
//! Job specs, results and artifacts are the gateway's JSON documents, so they cross as JSON text.

use std::sync::{Arc, Mutex};

use deskwire::gateway::envelope::Timestamp;
use deskwire::gateway::{self, ConnId, ErrorBody, ErrorCode, JobState, Token, ops};

use crate::error::{Result, api};
use crate::{entropy, lock, to_usize};

/// Engine configuration; [`gateway_config`] gives the defaults.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct GatewayConfig {
    /// Accepted bearer tokens (more than one while rotating).
    pub tokens: Vec<String>,
    /// What `gateway.ping` reports.
    pub gateway_version: String,
    /// Longer messages are ignored.
    pub max_message_bytes: u64,
    /// Jobs remembered.
    pub max_jobs: u64,
    /// Jobs running at once.
    pub max_running: u64,
    /// Outputs queued before input is refused.
    pub max_queued_outputs: u64,
    /// Approvals one job may ask for.
    pub max_approvals_per_job: u64,
    /// `jobs.stream` subscriptions at once.
    pub max_subscriptions: u64,
    /// Connections authenticated at once.
    pub max_connections: u64,
    /// `timeoutSec` of a job whose policy has none.
    pub default_timeout_sec: u64,
    /// Refuse jobs with `"sandbox": false`.
    pub require_sandbox: bool,
}

/// The defaults, accepting `token`.
#[uniffi::export]
pub fn gateway_config(token: String) -> GatewayConfig {
    gateway::Config::new(Token::new(token)).into()
}

/// A configuration from the gateway's camelCase JSON (`{"tokens": [..], "maxRunning": 2}`;
/// missing fields take the defaults).
#[uniffi::export]
pub fn gateway_config_from_json(json: String) -> Result<GatewayConfig> {
    api(|| serde_json::from_str::<gateway::Config>(&json)).map(Into::into)
}

/// An error as the gateway answers it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct GatewayErrorBody {
    /// The code (`E_POLICY_DENY`, `E_NOT_FOUND`, ...).
    pub code: String,
    /// For people.
    pub message: String,
    /// Structured context, JSON object text.
    #[uniffi(default = None)]
    pub details_json: Option<String>,
}

/// The answer to `request_approval`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct GatewayApprovalTicket {
    /// The approval's id.
    pub approval_id: String,
    /// `Pending`, or `Approved` at once when the job needs no approvals.
    pub status: ops::ApprovalStatus,
}

/// What the engine wants next.
#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum GatewayOutput {
    /// Send this envelope (JSON text, stamped with the `unix_ms` given to `poll_output`) on `conn`.
    Transmit {
        /// The connection.
        conn: u64,
        /// The envelope.
        text: String,
    },
    /// Tell the executor.
    Event {
        /// The event.
        event: gateway::Event,
    },
    /// Nothing to do before this instant unless input arrives.
    Timeout {
        /// The deadline (ms).
        deadline_ms: u64,
    },
}

/// The gateway engine for any number of Commander connections.
#[derive(uniffi::Object)]
pub struct Gateway {
    inner: Mutex<gateway::Gateway>,
}

#[uniffi::export]
impl Gateway {
    /// An engine; `entropy` is 32 bytes from a secure random source (ids are made from it).
    #[uniffi::constructor]
    pub fn new(config: GatewayConfig, now_ms: u64, entropy_bytes: Vec<u8>) -> Result<Arc<Self>> {
        let entropy = entropy(entropy_bytes)?;
        let engine = api(|| gateway::Gateway::new(config.into(), now_ms, entropy))?;
        Ok(Arc::new(Gateway {
            inner: Mutex::new(engine),
        }))
    }

    /// Replaces the accepted tokens (rotation).
    pub fn set_tokens(&self, tokens: Vec<String>) -> Result<()> {
        api(|| lock(&self.inner).set_tokens(tokens.into_iter().map(Token::new).collect()))
    }

    /// The transport authenticated `conn` with `presented` (a WebSocket's upgrade); whether it is accepted.
    pub fn authenticate_connection(&self, conn: u64, presented: String) -> bool {
        lock(&self.inner).authenticate_connection(ConnId(conn), &presented)
    }

    /// `conn` closed (its subscriptions end).
    pub fn close_connection(&self, conn: u64) {
        lock(&self.inner).close_connection(ConnId(conn))
    }

    /// One message from `conn`. Throws `Misuse` (`Backpressure`) when outputs are not drained.
    /// Kotlin passes a direct `ByteBuffer` (position to limit), read in place for the call;
    /// `handleMessage(nowMs, conn, ByteArray)` copies an array into one first.
    pub fn handle_message(&self, now_ms: u64, conn: u64, bytes: &[u8]) -> Result<()> {
        api(|| lock(&self.inner).handle_message(now_ms, ConnId(conn), bytes))
    }

    /// Moves a job to `to` (the state machine refuses illegal moves).
    pub fn transition(&self, now_ms: u64, job_id: String, to: JobState) -> Result<()> {
        api(|| lock(&self.inner).transition(now_ms, &job_id, to))
    }

    /// Execution finished: `RUNNING → REVIEW_READY` with the artifacts (JSON: `summary`, `git`, `diff`, `checks`, `commands`).
    pub fn review_ready(&self, now_ms: u64, job_id: String, artifacts_json: String) -> Result<()> {
        let artifacts = api(|| serde_json::from_str(&artifacts_json))?;
        api(|| lock(&self.inner).review_ready(now_ms, &job_id, artifacts))
    }

    /// `→ COMPLETED`, with artifacts if given.
    pub fn complete(
        &self,
        now_ms: u64,
        job_id: String,
        artifacts_json: Option<String>,
    ) -> Result<()> {
        let artifacts = artifacts_json
            .map(|json| api(|| serde_json::from_str(&json)))
            .transpose()?;
        api(|| lock(&self.inner).complete(now_ms, &job_id, artifacts))
    }

    /// `→ FAILED` with an error.
    pub fn fail(&self, now_ms: u64, job_id: String, error: GatewayErrorBody) -> Result<()> {
        let error = ErrorBody::try_from(error)?;
        api(|| lock(&self.inner).fail(now_ms, &job_id, error))
    }

    /// `→ ROLLED_BACK`.
    pub fn roll_back(&self, now_ms: u64, job_id: String) -> Result<()> {
        api(|| lock(&self.inner).roll_back(now_ms, &job_id))
    }

    /// `→ CANCELLED` (the gateway's side).
    pub fn cancel(&self, now_ms: u64, job_id: String) -> Result<()> {
        api(|| lock(&self.inner).cancel(now_ms, &job_id))
    }

    /// What the job is doing (`progress` in 0..1; `null` keeps a field).
    pub fn set_progress(
        &self,
        job_id: String,
        step: Option<String>,
        progress: Option<f64>,
    ) -> Result<()> {
        api(|| lock(&self.inner).set_progress(&job_id, step.as_deref(), progress))
    }

    /// A log line for the job's subscribers.
    pub fn log(&self, job_id: String, level: ops::Level, msg: String) -> Result<()> {
        api(|| lock(&self.inner).log(&job_id, level, &msg))
    }

    /// The executor wants to run a sensitive step (`kind` e.g. `shell`, `requested` what it runs).
    pub fn request_approval(
        &self,
        job_id: String,
        approval_id: Option<String>,
        kind: String,
        requested: String,
    ) -> Result<GatewayApprovalTicket> {
        let ticket = api(|| {
            lock(&self.inner).request_approval(&job_id, approval_id.as_deref(), &kind, &requested)
        })?;
        Ok(GatewayApprovalTicket {
            approval_id: ticket.approval_id,
            status: ticket.status,
        })
    }

    /// A job's state.
    pub fn job_state(&self, job_id: String) -> Option<JobState> {
        lock(&self.inner).job_state(&job_id)
    }

    /// Jobs remembered.
    pub fn job_count(&self) -> u64 {
        lock(&self.inner).job_count() as u64
    }

    /// Does what is due by `now_ms` (job timeouts, expired approvals).
    pub fn handle_timeout(&self, now_ms: u64) {
        lock(&self.inner).handle_timeout(now_ms)
    }

    /// The next thing to do; `unix_ms` is the wall-clock time the envelopes' `ts` shows.
    pub fn poll_output(&self, now_ms: u64, unix_ms: u64) -> GatewayOutput {
        match lock(&self.inner).poll_output(now_ms) {
            gateway::Output::Transmit(t) => GatewayOutput::Transmit {
                conn: t.conn.0,
                text: t.message.to_json(&Timestamp::from_unix_ms(unix_ms)),
            },
            gateway::Output::Event(event) => GatewayOutput::Event { event },
            gateway::Output::Timeout(deadline_ms) => GatewayOutput::Timeout { deadline_ms },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions

impl From<gateway::Config> for GatewayConfig {
    fn from(c: gateway::Config) -> Self {
        GatewayConfig {
            tokens: c.tokens.iter().map(|t| t.expose().to_owned()).collect(),
            gateway_version: c.gateway_version,
            max_message_bytes: c.max_message_bytes as u64,
            max_jobs: c.max_jobs as u64,
            max_running: c.max_running as u64,
            max_queued_outputs: c.max_queued_outputs as u64,
            max_approvals_per_job: c.max_approvals_per_job as u64,
            max_subscriptions: c.max_subscriptions as u64,
            max_connections: c.max_connections as u64,
            default_timeout_sec: c.default_timeout_sec,
            require_sandbox: c.require_sandbox,
        }
    }
}

impl From<GatewayConfig> for gateway::Config {
    fn from(c: GatewayConfig) -> Self {
        gateway::Config {
            tokens: c.tokens.into_iter().map(Token::new).collect(),
            gateway_version: c.gateway_version,
            max_message_bytes: to_usize(c.max_message_bytes),
            max_jobs: to_usize(c.max_jobs),
            max_running: to_usize(c.max_running),
            max_queued_outputs: to_usize(c.max_queued_outputs),
            max_approvals_per_job: to_usize(c.max_approvals_per_job),
            max_subscriptions: to_usize(c.max_subscriptions),
            max_connections: to_usize(c.max_connections),
            default_timeout_sec: c.default_timeout_sec,
            require_sandbox: c.require_sandbox,
        }
    }
}

impl TryFrom<GatewayErrorBody> for ErrorBody {
    type Error = crate::DeskwireError;

    fn try_from(e: GatewayErrorBody) -> Result<Self> {
        let details = e
            .details_json
            .map(|json| api(|| serde_json::from_str(&json)))
            .transpose()?;
        Ok(ErrorBody {
            code: ErrorCode::parse(&e.code).unwrap_or(ErrorCode::Other(e.code)),
            message: e.message,
            details,
        })
    }
}
