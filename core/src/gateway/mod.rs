//! The gateway protocol (`docs/gateway.md`): an orchestrator (the "Commander") drives
//! jobs on an executor (the "Gateway") with JSON envelopes over a WebSocket or HTTP.
//!
//! - [`envelope`]: the request, response and event envelopes, their version check and log-safe
//!   views ([`RequestEnvelope`], [`ResponseEnvelope`], [`EventEnvelope`]).
//! - [`ops`]: every operation ([`Op`], [`Request`]) with typed params and results.
//! - [`job`]: the job state machine as a transition table ([`JobState`]).
//! - [`Gateway`]: the server side as a sans-IO engine: authentication, idempotent
//!   `jobs.create` / `jobs.start`, the job lifecycle with run slots and timeouts, approvals and
//!   `jobs.event` streams.
//! - [`secret`]: bearer tokens, their constant-time check, scrubbing for logs.
//! - [`canonical`]: canonical JSON for idempotency checks.
//!
//! # The host loop
//!
//! The host owns the sockets, the clock and the executor. It feeds each received message with
//! [`Gateway::handle_message`], reports what the executor does (`request_approval`, `log`,
//! `review_ready`, `complete`, `fail`, ...), and drains [`Gateway::poll_output`]:
//!
//! ```
//! use deskwire::gateway::{Config, ConnId, Event, Gateway, JobState, Output, Timestamp, Token};
//!
//! let mut entropy = [0u8; 32];
//! getrandom::fill(&mut entropy).expect("the OS random source"); // approval ids are secrets
//! let mut gw = Gateway::new(Config::new(Token::new("s3cret")), 0, entropy).unwrap();
//! let conn = ConnId(1);
//! let msg = br#"{"v":"1.0","id":"r1","type":"request","ts":"2026-02-18T12:00:00Z",
//!   "op":"jobs.create","auth":{"token":"s3cret"},"payload":{"job":{"jobId":"j1","repo":"org/repo"}}}"#;
//! gw.handle_message(0, conn, msg).unwrap();
//! loop {
//!     match gw.poll_output(0) {
//!         Output::Transmit(t) => {
//!             // the host stamps `ts` from its own wall clock and writes the text to `t.conn`
//!             let text = t.message.to_json(&Timestamp::from_unix_ms(1_771_416_000_000));
//!             assert!(text.contains(r#""status":"CREATED""#));
//!         }
//!         // e.g. start the executor on `StateChanged { to: RUNNING }`, stop it on a final state
//!         Output::Event(event) => assert!(matches!(event, Event::JobCreated { .. })),
//!         // sleep until a message arrives or `deadline`, then call `handle_timeout(now)`
//!         Output::Timeout(deadline) => break,
//!     }
//! }
//! assert_eq!(gw.job_state("j1"), Some(JobState::Created));
//! ```

pub mod canonical;
pub mod commander;
mod engine;
pub mod envelope;
pub mod error;
pub mod job;
pub mod ops;
pub mod secret;

pub use engine::{
    ApprovalTicket, Artifacts, ConnId, ConnectionRefusal, Gateway, OpStats, Outgoing, Stats,
    Transmit,
};
pub use envelope::{
    Auth, Envelope, EventEnvelope, GenericRequestEnvelope, RequestEnvelope, ResponseEnvelope,
    Timestamp, Version,
};
pub use error::{ErrorBody, ErrorCode, LocalError, ParseError};
pub use job::{JobState, TransitionError};
pub use ops::{Op, Request};
pub use secret::Token;

/// The protocol version this crate writes.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The major version this crate speaks; any `1.x` is accepted.
pub const SUPPORTED_MAJOR: u32 = 1;

/// How long a drained engine with no job deadline asks to sleep.
pub const IDLE_WAIT_MS: u64 = 60_000;

/// Engine configuration. The spec sets no limits; every default here is deskwire's choice.
///
/// JSON: the fields in camelCase, as the gateway's wire and `tests/vectors/gateway.json` spell
/// them (`{"tokens": ["s3cret"], "maxRunning": 2}`); missing fields take the defaults of
/// [`Config::new`], and a missing `tokens` is none (which [`Gateway::new`] refuses); an
/// unknown field is refused, so a misspelt limit is an error rather than a silent default.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Accepted bearer tokens. More than one while rotating ("rotacionável", rotatable): put the
    /// new token next to the old, move the Commander over, then drop the old one.
    pub tokens: Vec<Token>,
    /// What `gateway.ping` reports as `gatewayVersion`.
    pub gateway_version: String,
    /// Longer messages are not parsed (ignored and counted). Default 1 MiB.
    pub max_message_bytes: usize,
    /// Jobs remembered (for idempotency, status and results). When full, the oldest job in a
    /// final state is forgotten; when none is final, `jobs.create` answers `E_CAPACITY`.
    /// Default 1024.
    pub max_jobs: usize,
    /// Jobs `RUNNING` at once; more wait `QUEUED`. Default 4.
    pub max_running: usize,
    /// Outputs queued before `handle_message` refuses input with `LocalError::Backpressure`
    /// and `jobs.event` log lines are dropped (counted). Default 1024.
    pub max_queued_outputs: usize,
    /// Approvals one job may ask for. Default 64.
    pub max_approvals_per_job: usize,
    /// `jobs.stream` subscriptions at once, over all connections. Default 256.
    pub max_subscriptions: usize,
    /// Connections authenticated by the transport at once. Default 64.
    pub max_connections: usize,
    /// `timeoutSec` for a job whose policy has none (the spec's example: 1800).
    pub default_timeout_sec: u64,
    /// Refuse jobs with `"sandbox": false` (`E_POLICY_DENY`, label `sandbox-required`, the
    /// spec's error example). Default false.
    pub require_sandbox: bool,
}

impl Default for Config {
    /// The defaults without a token (add one before [`Gateway::new`]).
    fn default() -> Self {
        Config {
            tokens: Vec::new(),
            ..Config::new(Token::new(""))
        }
    }
}

impl Config {
    /// Defaults with one accepted token.
    pub fn new(token: Token) -> Self {
        Config {
            tokens: vec![token],
            gateway_version: env!("CARGO_PKG_VERSION").to_owned(),
            max_message_bytes: 1 << 20,
            max_jobs: 1024,
            max_running: 4,
            max_queued_outputs: 1024,
            max_approvals_per_job: 64,
            max_subscriptions: 256,
            max_connections: 64,
            default_timeout_sec: 1800,
            require_sandbox: false,
        }
    }
}

/// What the engine wants from the host next.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send this message on that connection (format it with a `ts` first).
    Transmit(Transmit),
    /// Tell the application / executor.
    Event(Event),
    /// Nothing to do before this instant (ms, the host's monotonic clock) unless input arrives;
    /// then call [`Gateway::handle_timeout`].
    Timeout(u64),
}

/// Something the host's executor should act on. JSON: externally tagged, snake_case
/// (`{"state_changed": {"job_id": "j1", "from": "QUEUED", "to": "RUNNING"}}`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "GatewayEvent"))]
pub enum Event {
    /// A job was created (`jobs.create`); it waits for `jobs.start`.
    JobCreated {
        /// The job.
        job_id: String,
    },
    /// A job changed state. On `to == RUNNING` start executing it; on a final state (`CANCELLED`,
    /// `TIMEOUT`, ...) stop it.
    StateChanged {
        /// The job.
        job_id: String,
        /// The old state.
        from: JobState,
        /// The new state.
        to: JobState,
    },
    /// The Commander decided an approval: run the step (approve) or skip it (deny). A denial
    /// does not end the job (the spec's `jobs.result` example is `COMPLETED` with a denied
    /// approval).
    ApprovalDecided {
        /// The job.
        job_id: String,
        /// The approval.
        approval_id: String,
        /// The decision.
        decision: ops::Decision,
        /// The reason given.
        reason: Option<String>,
    },
}

#[cfg(test)]
mod tests;
