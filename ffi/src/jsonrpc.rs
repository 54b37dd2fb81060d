//! The JSON-RPC peer (`deskwire::jsonrpc::Peer`) in each dialect, and the message reader.

use std::ffi::c_char;

use deskwire::gateway::Token;
use deskwire::gateway::commander::GatewayCommander;
use deskwire::jsonrpc::message::{self, Message, Parsed};
use deskwire::jsonrpc::{
    Dialect, Id, JsonRpc2, LocalError, Output, Peer, PeerConfig, RawJson, RemoteError, Sidecar,
};
use serde_json::{Value, json};

use crate::boundary::{
    self, Error, Handle, Result, as_handle, dw_output, dw_output_kind, dw_status, dw_str,
};

/// A dialect for `dw_peer_new` (`DW_DIALECT_*`).
pub type dw_dialect = u32;
/// Strict JSON-RPC 2.0 (REXD): integer ids, batches, numeric error codes.
pub const DW_DIALECT_JSONRPC2: dw_dialect = 1;
/// The sidecar NDJSON dialect: UUID ids, `SCREAMING_SNAKE_CASE` error codes, progress.
pub const DW_DIALECT_SIDECAR: dw_dialect = 2;

pub(crate) enum AnyPeer {
    JsonRpc2(Peer<JsonRpc2>),
    Sidecar(Peer<Sidecar>),
    Gateway(Peer<GatewayCommander>),
}

macro_rules! each {
    ($peer:expr, $p:ident => $body:expr) => {
        match $peer {
            AnyPeer::JsonRpc2($p) => $body,
            AnyPeer::Sidecar($p) => $body,
            AnyPeer::Gateway($p) => $body,
        }
    };
}

/// One end of a JSON-RPC-style conversation over a byte stream (`deskwire::jsonrpc::Peer`):
/// calls out with deadlines and user data, calls in to answer, progress, cancellation,
/// batches, NDJSON or `Content-Length` framing.
pub struct dw_peer(Handle<AnyPeer>);
as_handle!(dw_peer, AnyPeer);

/// `config_json` for a peer in `dialect`: missing members, `"timeouts"` included, take that
/// dialect's defaults (the sidecar's per-method table).
fn config<D: Dialect>(dialect: &D, json: *const c_char) -> Result<PeerConfig> {
    let value: serde_json::Value =
        boundary::opt_object_arg(json, "config_json")?.unwrap_or_default();
    PeerConfig::from_json_for(dialect, value).map_err(|e| Error::json("config_json", e))
}

/// Creates a peer in `dialect` (`DW_DIALECT_JSONRPC2` or `DW_DIALECT_SIDECAR`).
///
/// `config_json`: a `PeerConfig` as JSON (`{"framing": "ndjson" | "content_length",
/// "max_message_bytes", "batch_limit", "max_pending", "max_incoming", "timeouts": {"rules":
/// [{"prefix", "timeout_ms", "max_total_ms"}], "default_timeout_ms",
/// "default_max_total_factor"} or a name, "sidecar" or "default", "cancel_notification",
/// "finished_memory"}`; every member optional), or `NULL` for the defaults. Without
/// `"timeouts"` a sidecar peer takes the sidecar's per-method table (health 10 s ... training
/// 300 s), a JSON-RPC 2.0 peer a flat 30 s. `seed` fixes the generated ids. On success `*out`
/// is a new handle the caller frees with `dw_peer_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_new(
    dialect: dw_dialect,
    config_json: *const c_char,
    seed: u64,
    out: *mut *mut dw_peer,
) -> dw_status {
    boundary::new_handle(out, || match dialect {
        DW_DIALECT_JSONRPC2 => {
            let config = config(&JsonRpc2, config_json)?;
            Ok(AnyPeer::JsonRpc2(Peer::new(JsonRpc2, config, seed)))
        }
        DW_DIALECT_SIDECAR => {
            let config = config(&Sidecar, config_json)?;
            Ok(AnyPeer::Sidecar(Peer::new(Sidecar, config, seed)))
        }
        other => Err(Error::argument(format_args!("unknown dialect {other}"))),
    })
}

/// Creates a peer in the gateway envelope dialect, the Commander's side
/// (`deskwire::gateway::commander::GatewayCommander`): requests carry `token` in `auth` and a
/// `ts` of `epoch_unix_ms` (the wall-clock Unix time, in ms, at the host's monotonic instant 0)
/// plus `now_ms`. `config_json` and `seed` as for `dw_peer_new`. On success `*out` is a new
/// handle the caller frees with `dw_peer_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_new_gateway(
    token: *const c_char,
    epoch_unix_ms: u64,
    config_json: *const c_char,
    seed: u64,
    out: *mut *mut dw_peer,
) -> dw_status {
    boundary::new_handle(out, || {
        let token = boundary::str_arg(token, "token")?;
        let dialect = GatewayCommander::new(Token::new(token), epoch_unix_ms);
        let config = config(&dialect, config_json)?;
        Ok(AnyPeer::Gateway(Peer::new(dialect, config, seed)))
    })
}

/// Frees a peer. `NULL` is a no-op. Views it gave out become invalid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_free(peer: *mut dw_peer) {
    boundary::free_handle(peer)
}

/// The message of the peer's last failed call, or `""` after a success. Valid until the next
/// call with `peer`; owned by the peer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_last_error(peer: *const dw_peer) -> *const c_char {
    boundary::last_error(peer)
}

/// The kind of the peer's last failed call: the core error's name (`"unknown_id"`, ...) or
/// the status's (`"invalid_json"`, ...), or `""` after a success. Same lifetime as
/// `dw_peer_last_error`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_last_error_kind(peer: *const dw_peer) -> *const c_char {
    boundary::last_error_kind(peer)
}

/// Feeds bytes read from the stream (any split). Never fails for bad input: unreadable frames
/// become `malformed` events or error answers, and are counted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_handle_bytes(
    peer: *mut dw_peer,
    now_ms: u64,
    data: *const u8,
    len: usize,
) -> dw_status {
    boundary::with(peer, |h| {
        let bytes = boundary::bytes_arg(data, len, "data")?;
        each!(&mut h.engine, p => p.handle_bytes(now_ms, bytes));
        Ok(())
    })
}

/// Time passed: calls past their deadline fail with `{"failed": {..., "error": "timeout"}}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_handle_timeout(peer: *mut dw_peer, now_ms: u64) -> dw_status {
    boundary::with(peer, |h| {
        each!(&mut h.engine, p => p.handle_timeout(now_ms));
        Ok(())
    })
}

/// The next instruction: `DW_OUTPUT_TRANSMIT` (bytes with their framing, to write to the
/// stream), `DW_OUTPUT_EVENT` (a `PeerEvent` as JSON: `{"request": {"id", "method",
/// "params"?}}`, `{"notification": {"method", "params"?}}`, `{"response": {"id", "method",
/// "user", "result"}}`, `{"failed": {"id", "method", "user", "error": {"remote": {"code",
/// "message", "data"?}} | "timeout"}}`, `{"progress": {"id", "method", "user", "progress"}}`,
/// `{"malformed": {"reason"}}`) or `DW_OUTPUT_TIMEOUT`. Call until it answers
/// `DW_OUTPUT_TIMEOUT`. `out->data` stays valid until the next call with `peer`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_poll_output(
    peer: *mut dw_peer,
    now_ms: u64,
    out: *mut dw_output,
) -> dw_status {
    boundary::with(peer, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let output = match each!(&mut h.engine, p => p.poll_output(now_ms)) {
            Output::Transmit(bytes) => h.bytes_out(dw_output_kind::DwOutputTransmit, bytes, 0),
            Output::Event(event) => h.event(&event),
            Output::Timeout(at) => dw_output::timeout(at),
        };
        boundary::write(out, output);
        Ok(())
    })
}

fn raw(ptr: *const c_char, what: &str) -> Result<Option<RawJson>> {
    match boundary::opt_str_arg(ptr, what)? {
        None => Ok(None),
        Some(text) => RawJson::from_string(text.to_owned())
            .map(Some)
            .map_err(|e| Error::json(what, e)),
    }
}

/// A call the peer refused: params the dialect does not take are the host's bad JSON
/// (`DW_STATUS_INVALID_JSON`, kind `invalid_params`); the rest is `DW_STATUS_REFUSED` with the
/// core error's name.
fn call_error(e: LocalError) -> Error {
    match e {
        LocalError::InvalidParams { .. } => Error::with_kind(
            dw_status::InvalidJson,
            "invalid_params",
            format_args!("params_json: {e}"),
        ),
        e => Error::refused(e),
    }
}

fn id(ptr: *const c_char) -> Result<Id> {
    boundary::json_arg(ptr, "id_json")
}

/// Calls `method` with `params_json` (a JSON object or array, or `NULL` for none; the sidecar
/// dialect takes an object only) and `user` data that comes back with the answer. On success
/// `*id_json` views the call's id as JSON text (`7`, `"c0ffee..."`), valid until the next call
/// with `peer`. `DW_STATUS_INVALID_JSON` (kind `invalid_params`) for other params, such as a
/// string or a number; `DW_STATUS_REFUSED` when `max_pending` calls are in flight.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_call(
    peer: *mut dw_peer,
    now_ms: u64,
    method: *const c_char,
    params_json: *const c_char,
    user: u64,
    id_json: *mut dw_str,
) -> dw_status {
    boundary::with(peer, |h| {
        let out = boundary::out_ptr(id_json, "id_json")?;
        let method = boundary::str_arg(method, "method")?;
        let params = raw(params_json, "params_json")?;
        let id =
            each!(&mut h.engine, p => p.call(now_ms, method, params, user)).map_err(call_error)?;
        boundary::write(out, h.json_view(&id));
        Ok(())
    })
}

/// Calls `method` under an id the host chooses (`id_json`: a number or a string, as the dialect
/// carries ids), otherwise as `dw_peer_call`. `DW_STATUS_REFUSED` (kind `duplicate_id`) when a
/// call with that id is pending.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_call_with_id(
    peer: *mut dw_peer,
    now_ms: u64,
    id_json: *const c_char,
    method: *const c_char,
    params_json: *const c_char,
    user: u64,
) -> dw_status {
    boundary::with(peer, |h| {
        let id = id(id_json)?;
        let method = boundary::str_arg(method, "method")?;
        let params = raw(params_json, "params_json")?;
        each!(&mut h.engine, p => p.call_with_id(now_ms, id, method, params, user))
            .map_err(call_error)
    })
}

/// Whether our call `id_json` is still waiting for its answer; `*pending` receives it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_is_pending(
    peer: *mut dw_peer,
    id_json: *const c_char,
    pending: *mut bool,
) -> dw_status {
    boundary::with(peer, |h| {
        let out = boundary::out_ptr(pending, "pending")?;
        let id = id(id_json)?;
        boundary::write(out, each!(&h.engine, p => p.is_pending(&id)));
        Ok(())
    })
}

/// Sends a notification (no answer). `params_json` as for `dw_peer_call`, or `NULL`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_notify(
    peer: *mut dw_peer,
    now_ms: u64,
    method: *const c_char,
    params_json: *const c_char,
) -> dw_status {
    boundary::with(peer, |h| {
        let method = boundary::str_arg(method, "method")?;
        let params = raw(params_json, "params_json")?;
        each!(&mut h.engine, p => p.notify(now_ms, method, params)).map_err(call_error)
    })
}

/// Answers the incoming request `id_json` (its id as JSON text, as the `request` event gave it)
/// with `result_json`. `DW_STATUS_REFUSED` when no such request waits for an answer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_respond(
    peer: *mut dw_peer,
    now_ms: u64,
    id_json: *const c_char,
    result_json: *const c_char,
) -> dw_status {
    boundary::with(peer, |h| {
        let id = id(id_json)?;
        let result = raw(result_json, "result_json")?.ok_or_else(|| Error::null("result_json"))?;
        each!(&mut h.engine, p => p.respond(now_ms, &id, result)).map_err(Error::refused)
    })
}

/// Answers the incoming request `id_json` with an error, `error_json` = `{"code": number |
/// "NAME", "message", "data"?}` (the code as the dialect carries it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_respond_error(
    peer: *mut dw_peer,
    now_ms: u64,
    id_json: *const c_char,
    error_json: *const c_char,
) -> dw_status {
    boundary::with(peer, |h| {
        let id = id(id_json)?;
        let error: RemoteError = boundary::object_arg(error_json, "error_json")?;
        each!(&mut h.engine, p => p.respond_error(now_ms, &id, error)).map_err(Error::refused)
    })
}

/// Answers the incoming request `id_json` with the dialect's "method not found" error.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_respond_method_not_found(
    peer: *mut dw_peer,
    now_ms: u64,
    id_json: *const c_char,
    method: *const c_char,
) -> dw_status {
    boundary::with(peer, |h| {
        let id = id(id_json)?;
        let method = boundary::str_arg(method, "method")?;
        each!(&mut h.engine, p => p.respond_method_not_found(now_ms, &id, method))
            .map_err(Error::refused)
    })
}

/// Reports progress on the incoming request `id_json` (dialects with progress: sidecar).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_progress(
    peer: *mut dw_peer,
    now_ms: u64,
    id_json: *const c_char,
    progress_json: *const c_char,
) -> dw_status {
    boundary::with(peer, |h| {
        let id = id(id_json)?;
        let progress =
            raw(progress_json, "progress_json")?.ok_or_else(|| Error::null("progress_json"))?;
        each!(&mut h.engine, p => p.progress(now_ms, &id, progress)).map_err(Error::refused)
    })
}

/// Forgets the incoming request `id_json` without answering it (a notification-like call the
/// host will not answer).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_forget_incoming(
    peer: *mut dw_peer,
    id_json: *const c_char,
) -> dw_status {
    boundary::with(peer, |h| {
        let id = id(id_json)?;
        each!(&mut h.engine, p => p.forget_incoming(&id)).map_err(Error::refused)
    })
}

/// Cancels our pending call `id_json`: it is forgotten (a late answer is dropped and counted)
/// and the configured `cancel_notification`, if any, is sent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_cancel(
    peer: *mut dw_peer,
    now_ms: u64,
    id_json: *const c_char,
) -> dw_status {
    boundary::with(peer, |h| {
        let id = id(id_json)?;
        each!(&mut h.engine, p => p.cancel(now_ms, &id)).map_err(Error::refused)
    })
}

/// The counters as JSON (`{"frames_in", "frames_out", "malformed", "framing_errors",
/// "unmatched_responses", "late_responses", "timeouts", "cancelled", "refused_requests",
/// "pending", "incoming", "bytes_buffered"}`), viewed in `*out` until the next call with `peer`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_peer_stats(peer: *mut dw_peer, out: *mut dw_str) -> dw_status {
    boundary::with(peer, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let stats = each!(&h.engine, p => p.stats());
        boundary::write(out, h.json_view(&stats));
        Ok(())
    })
}

fn message_json(m: &Message) -> Value {
    let raw = |r: &RawJson| -> Value {
        serde_json::from_str(r.get()).expect("a RawJson holds one JSON value")
    };
    let mut v = match m {
        Message::Request { id, method, params } => {
            json!({"kind": "request", "id": id, "method": method, "params": params.as_ref().map(raw)})
        }
        Message::Notification { method, params } => {
            json!({"kind": "notification", "method": method, "params": params.as_ref().map(raw)})
        }
        Message::Response { id, result } => {
            json!({"kind": "response", "id": id, "result": raw(result)})
        }
        Message::Error { id, error } => json!({
            "kind": "error", "id": id, "code": error.code, "message": error.message,
            "data": error.data.as_ref().map(raw)
        }),
    };
    if v.get("params").is_some_and(Value::is_null) {
        v.as_object_mut().expect("an object").remove("params");
    }
    v["canonical"] = Value::String(m.to_json());
    v
}

fn invalid_json(invalid: &message::Invalid) -> Value {
    let (id, error) = invalid.to_error();
    json!({"kind": "invalid", "id": id, "code": error.code, "reason": invalid.to_string()})
}

/// Reads one JSON-RPC 2.0 frame (`deskwire::jsonrpc::message::parse`) and writes what it is as
/// JSON to the caller's buffer `out[0..cap]` (NUL-terminated; its length without the NUL in
/// `*out_len`): `{"kind": "request" | "notification" | "response" | "error", "id", "method",
/// "params", "result", "code", "message", "data", "canonical"}` (the members the kind has;
/// `canonical` is the message as deskwire writes it), `{"kind": "invalid", "id", "code",
/// "reason"}` (the error answer it deserves), or `{"kind": "batch", "elements": [...]}`.
/// `DW_STATUS_BUFFER_TOO_SMALL`: only `*out_len` (the length needed) is written.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_jsonrpc_parse(
    frame: *const u8,
    len: usize,
    batch_limit: usize,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let frame = boundary::bytes_arg(frame, len, "frame")?;
        let value = match message::parse(frame, batch_limit) {
            Ok(Parsed::Single(m)) => message_json(&m),
            Ok(Parsed::Batch(items)) => json!({
                "kind": "batch",
                "elements": items.iter().map(|i| match i {
                    Ok(m) => message_json(m),
                    Err(e) => invalid_json(e),
                }).collect::<Vec<_>>()
            }),
            Err(e) => invalid_json(&e),
        };
        boundary::json_to_buffer(&value, out, cap, out_len)
    })
}
