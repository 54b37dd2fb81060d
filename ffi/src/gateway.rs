//! The gateway engine (`deskwire::gateway::Gateway`), the server side of the gateway protocol.
//! The Commander's side is a `dw_peer` (`dw_peer_new_gateway`).

use std::ffi::c_char;

use deskwire::gateway::ops::Level;
use deskwire::gateway::{
    Artifacts, Config, ConnId, ErrorBody, Gateway, JobState, Output, Timestamp, Token,
};

use crate::boundary::{
    self, Error, Handle, as_handle, dw_output, dw_output_kind, dw_status, dw_str,
};

pub(crate) struct GatewayState {
    gateway: Gateway,
    /// Wall-clock Unix ms at the host's monotonic instant 0: `ts` = this + `now_ms`.
    epoch_unix_ms: u64,
}

/// The gateway (`deskwire::gateway::Gateway`): authentication, idempotent `jobs.create` /
/// `jobs.start`, the job state machine with run slots and timeouts, approvals, `jobs.event`
/// streams, for any number of connections.
pub struct dw_gateway(Handle<GatewayState>);
as_handle!(dw_gateway, GatewayState);

/// Creates a gateway. `config_json` (camelCase, as the gateway's wire): `{"tokens": [..],
/// "gatewayVersion", "maxMessageBytes", "maxJobs", "maxRunning", "maxQueuedOutputs",
/// "maxApprovalsPerJob", "maxSubscriptions", "maxConnections", "defaultTimeoutSec",
/// "requireSandbox"}`, every member but `tokens` optional. Outgoing envelopes are stamped `ts` =
/// `epoch_unix_ms` (the wall-clock Unix time, in ms, at the host's monotonic instant 0) +
/// `now_ms`. `entropy`: `DW_ENTROPY_LEN` (32) bytes from the operating system's secure random
/// source, which fix the generated approval ids; read during the call only.
/// `DW_STATUS_REFUSED` without a non-empty token. On success `*out` is a new handle the caller
/// frees with `dw_gateway_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_new(
    config_json: *const c_char,
    now_ms: u64,
    entropy: *const u8,
    epoch_unix_ms: u64,
    out: *mut *mut dw_gateway,
) -> dw_status {
    boundary::new_handle(out, || {
        let config: Config = boundary::object_arg(config_json, "config_json")?;
        let entropy = boundary::entropy_arg(entropy)?;
        let gateway = Gateway::new(config, now_ms, entropy).map_err(Error::refused)?;
        Ok(GatewayState {
            gateway,
            epoch_unix_ms,
        })
    })
}

/// Frees a gateway. `NULL` is a no-op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_free(gateway: *mut dw_gateway) {
    boundary::free_handle(gateway)
}

/// The message of the gateway's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_last_error(gateway: *const dw_gateway) -> *const c_char {
    boundary::last_error(gateway)
}

/// The kind of the gateway's last failed call: the core error's name (`"unknown_id"`, ...) or
/// the status's (`"invalid_json"`, ...), or `""` after a success. Same lifetime as
/// `dw_gateway_last_error`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_last_error_kind(gateway: *const dw_gateway) -> *const c_char {
    boundary::last_error_kind(gateway)
}

/// A message arrived on `conn`: `data[0..len]`. Requests are answered through
/// `dw_gateway_poll_output`; what cannot be answered is ignored and counted.
/// `DW_STATUS_REFUSED` only when the output queue is full: drain it and feed the message again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_handle_message(
    gateway: *mut dw_gateway,
    now_ms: u64,
    conn: u64,
    data: *const u8,
    len: usize,
) -> dw_status {
    boundary::with(gateway, |h| {
        let bytes = boundary::bytes_arg(data, len, "data")?;
        h.engine
            .gateway
            .handle_message(now_ms, ConnId(conn), bytes)
            .map_err(Error::refused)
    })
}

/// The transport authenticated `conn` with `token` (the WebSocket upgrade's bearer); `*accepted`
/// says whether the token is valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_authenticate_connection(
    gateway: *mut dw_gateway,
    conn: u64,
    token: *const c_char,
    accepted: *mut bool,
) -> dw_status {
    boundary::with(gateway, |h| {
        let accepted = boundary::out_ptr(accepted, "accepted")?;
        let token = boundary::str_arg(token, "token")?;
        let ok = h
            .engine
            .gateway
            .authenticate_connection(ConnId(conn), token);
        boundary::write(accepted, ok);
        Ok(())
    })
}

/// `conn` closed: its subscriptions end.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_close_connection(
    gateway: *mut dw_gateway,
    conn: u64,
) -> dw_status {
    boundary::with(gateway, |h| {
        h.engine.gateway.close_connection(ConnId(conn));
        Ok(())
    })
}

/// Replaces the accepted tokens: `tokens_json` = `["new", "old"]` (rotation).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_set_tokens(
    gateway: *mut dw_gateway,
    tokens_json: *const c_char,
) -> dw_status {
    boundary::with(gateway, |h| {
        let tokens: Vec<Token> = boundary::json_arg(tokens_json, "tokens_json")?;
        h.engine.gateway.set_tokens(tokens).map_err(Error::refused)
    })
}

fn job<'a>(job_id: *const c_char) -> boundary::Result<&'a str> {
    boundary::str_arg(job_id, "job_id")
}

/// Moves job `job_id` to `state` (`"QUEUED"`, `"RUNNING"`, ...) as the executor says.
/// `DW_STATUS_REFUSED` for an unknown job or a transition the state machine forbids.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_transition(
    gateway: *mut dw_gateway,
    now_ms: u64,
    job_id: *const c_char,
    state: *const c_char,
) -> dw_status {
    boundary::with(gateway, |h| {
        let job = job(job_id)?;
        let to: JobState = serde_json::from_value(serde_json::Value::String(
            boundary::str_arg(state, "state")?.into(),
        ))
        .map_err(Error::argument)?;
        h.engine
            .gateway
            .transition(now_ms, job, to)
            .map_err(Error::refused)
    })
}

/// The job's execution is done and its changes wait for review (`→ REVIEW_READY`).
/// `artifacts_json`: `{"summary"?, "git"?, "diff"?, "checks"?, "commands"?}` as `jobs.result`
/// carries them.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_review_ready(
    gateway: *mut dw_gateway,
    now_ms: u64,
    job_id: *const c_char,
    artifacts_json: *const c_char,
) -> dw_status {
    boundary::with(gateway, |h| {
        let job = job(job_id)?;
        let artifacts: Artifacts = boundary::object_arg(artifacts_json, "artifacts_json")?;
        h.engine
            .gateway
            .review_ready(now_ms, job, artifacts)
            .map_err(Error::refused)
    })
}

/// The job is done (`→ COMPLETED`); `artifacts_json` may be `NULL` to keep those of
/// `review_ready`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_complete(
    gateway: *mut dw_gateway,
    now_ms: u64,
    job_id: *const c_char,
    artifacts_json: *const c_char,
) -> dw_status {
    boundary::with(gateway, |h| {
        let job = job(job_id)?;
        let artifacts: Option<Artifacts> =
            boundary::opt_object_arg(artifacts_json, "artifacts_json")?;
        h.engine
            .gateway
            .complete(now_ms, job, artifacts)
            .map_err(Error::refused)
    })
}

/// The job failed (`→ FAILED`): `error_json` = `{"code": "E_...", "message", "details"?}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_fail(
    gateway: *mut dw_gateway,
    now_ms: u64,
    job_id: *const c_char,
    error_json: *const c_char,
) -> dw_status {
    boundary::with(gateway, |h| {
        let job = job(job_id)?;
        let error: ErrorBody = boundary::object_arg(error_json, "error_json")?;
        h.engine
            .gateway
            .fail(now_ms, job, error)
            .map_err(Error::refused)
    })
}

/// The job's changes were undone (`→ ROLLED_BACK`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_roll_back(
    gateway: *mut dw_gateway,
    now_ms: u64,
    job_id: *const c_char,
) -> dw_status {
    boundary::with(gateway, |h| {
        let job = job(job_id)?;
        h.engine
            .gateway
            .roll_back(now_ms, job)
            .map_err(Error::refused)
    })
}

/// The gateway's side cancels the job (`→ CANCELLED`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_cancel(
    gateway: *mut dw_gateway,
    now_ms: u64,
    job_id: *const c_char,
) -> dw_status {
    boundary::with(gateway, |h| {
        let job = job(job_id)?;
        h.engine.gateway.cancel(now_ms, job).map_err(Error::refused)
    })
}

/// What the job is doing, for `jobs.status`: `step` (or `NULL` to keep it) and `progress` in
/// 0..=1 (or a negative value to keep it). `DW_STATUS_REFUSED` for progress above 1 or NaN.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_set_progress(
    gateway: *mut dw_gateway,
    job_id: *const c_char,
    step: *const c_char,
    progress: f64,
) -> dw_status {
    boundary::with(gateway, |h| {
        let job = job(job_id)?;
        let step = boundary::opt_str_arg(step, "step")?;
        let progress = (progress.is_nan() || progress >= 0.0).then_some(progress);
        h.engine
            .gateway
            .set_progress(job, step, progress)
            .map_err(Error::refused)
    })
}

/// A log line for the job's `jobs.event` subscribers: `level` = `"debug"`, `"info"`, `"warn"`
/// or `"error"`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_log(
    gateway: *mut dw_gateway,
    job_id: *const c_char,
    level: *const c_char,
    message: *const c_char,
) -> dw_status {
    boundary::with(gateway, |h| {
        let job = job(job_id)?;
        let level: Level = serde_json::from_value(serde_json::Value::String(
            boundary::str_arg(level, "level")?.into(),
        ))
        .map_err(Error::argument)?;
        let message = boundary::str_arg(message, "message")?;
        h.engine
            .gateway
            .log(job, level, message)
            .map_err(Error::refused)
    })
}

/// The executor wants to run a sensitive step: `kind` (`"shell"`, ...) and `requested` (what
/// exactly). `approval_id` may be `NULL` for a generated one. `*ticket` views `{"approval_id",
/// "status": "pending" | "approved"}`; a pending one is decided by an `approval_decided` event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_request_approval(
    gateway: *mut dw_gateway,
    job_id: *const c_char,
    approval_id: *const c_char,
    kind: *const c_char,
    requested: *const c_char,
    ticket: *mut dw_str,
) -> dw_status {
    boundary::with(gateway, |h| {
        let out = boundary::out_ptr(ticket, "ticket")?;
        let job = job(job_id)?;
        let approval_id = boundary::opt_str_arg(approval_id, "approval_id")?;
        let kind = boundary::str_arg(kind, "kind")?;
        let requested = boundary::str_arg(requested, "requested")?;
        let ticket = h
            .engine
            .gateway
            .request_approval(job, approval_id, kind, requested)
            .map_err(Error::refused)?;
        boundary::write(out, h.json_view(&ticket));
        Ok(())
    })
}

/// Job `job_id`'s state as JSON in `*out` (`"RUNNING"`, ...), or `null` for an unknown job.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_job_state(
    gateway: *mut dw_gateway,
    job_id: *const c_char,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(gateway, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let job = job(job_id)?;
        let state = h.engine.gateway.job_state(job);
        boundary::write(out, h.json_view(&state));
        Ok(())
    })
}

/// Time passed: running jobs past `timeoutSec` time out.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_handle_timeout(
    gateway: *mut dw_gateway,
    now_ms: u64,
) -> dw_status {
    boundary::with(gateway, |h| {
        h.engine.gateway.handle_timeout(now_ms);
        Ok(())
    })
}

/// The next instruction: `DW_OUTPUT_TRANSMIT` (send the envelope `data`, JSON text stamped with
/// `ts`, on `conn`), `DW_OUTPUT_EVENT` (`{"job_created": {"job_id"}}`, `{"state_changed":
/// {"job_id", "from", "to"}}` — start the executor on `RUNNING`, stop it on a final state —,
/// `{"approval_decided": {"job_id", "approval_id", "decision", "reason"}}`) or
/// `DW_OUTPUT_TIMEOUT`. `out->data` stays valid until the next call with `gateway`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_poll_output(
    gateway: *mut dw_gateway,
    now_ms: u64,
    out: *mut dw_output,
) -> dw_status {
    boundary::with(gateway, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let output = match h.engine.gateway.poll_output(now_ms) {
            Output::Transmit(t) => {
                let ts = Timestamp::from_unix_ms(h.engine.epoch_unix_ms.saturating_add(now_ms));
                let text = t.message.to_json(&ts);
                h.bytes_out(
                    dw_output_kind::DwOutputTransmit,
                    text.into_bytes(),
                    t.conn.0,
                )
            }
            Output::Event(event) => h.event(&event),
            Output::Timeout(at) => dw_output::timeout(at),
        };
        boundary::write(out, output);
        Ok(())
    })
}

/// The counters as JSON in `*out` (`{"messages", "ignored", "unauthorized", "refused", "ops":
/// {"jobs.create": {"requests", "errors"}, ...}, "events_sent", "events_dropped",
/// "jobs_forgotten"}`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_stats(gateway: *mut dw_gateway, out: *mut dw_str) -> dw_status {
    boundary::with(gateway, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let stats = h.engine.gateway.stats().clone();
        boundary::write(out, h.json_view(&stats));
        Ok(())
    })
}

/// A message made safe for a log: every `auth` object and every value under a key that names a
/// secret replaced with `[REDACTED]`; text that is not JSON is not echoed (it might be a token).
/// `data[0..len]` in, the redacted text written to the caller's buffer `out[0..cap]`
/// (NUL-terminated; the length without the NUL in `*out_len`; on `DW_STATUS_BUFFER_TOO_SMALL`
/// only `*out_len`, the length needed, is written).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_gateway_redact(
    data: *const u8,
    len: usize,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let bytes = boundary::bytes_arg(data, len, "data")?;
        let text = deskwire::gateway::secret::redact_line(bytes);
        boundary::to_buffer(text.as_bytes(), out, cap, out_len)
    })
}
