//! The mobile companion's engines (`deskwire::mobile`): the phone's client and the desktop's
//! server, over WebSocket text frames the host carries.

use std::ffi::c_char;

use deskwire::mobile::client::{self, Client, DisconnectReason};
use deskwire::mobile::server::{self, ConnId, NewPermission, Server};
use deskwire::mobile::{AgentState, ChatMessage, Command, TaskUpdate};

use crate::boundary::{
    self, Error, Handle, as_handle, dw_output, dw_output_kind, dw_status, dw_str,
};

/// The phone's end (`deskwire::mobile::Client`): pairing code → token → reconnect with the
/// bearer token on the spec's backoff, automatic `pong`, state sync, permission prompts.
pub struct dw_mobile_client(Handle<Client>);
as_handle!(dw_mobile_client, Client);

/// Creates a phone client. `config_json`: `{"backoff_ms": [..], "max_backoff_ms",
/// "max_message_bytes", "max_pending_permissions", "max_queued", "server_timeout_ms"}` (any
/// subset) or `NULL` for the spec's defaults; `token`: a stored bearer token or `NULL`. On
/// success `*out` is a new handle the caller frees with `dw_mobile_client_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_new(
    config_json: *const c_char,
    token: *const c_char,
    out: *mut *mut dw_mobile_client,
) -> dw_status {
    boundary::new_handle(out, || {
        let config: client::Config =
            boundary::opt_object_arg(config_json, "config_json")?.unwrap_or_default();
        let token = boundary::opt_str_arg(token, "token")?.map(str::to_owned);
        Ok(Client::new(config, token))
    })
}

/// Frees a phone client. `NULL` is a no-op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_free(client: *mut dw_mobile_client) {
    boundary::free_handle(client)
}

/// The message of the client's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_last_error(
    client: *const dw_mobile_client,
) -> *const c_char {
    boundary::last_error(client)
}

/// The kind of the client's last failed call: the core error's name (`"unknown_id"`, ...) or
/// the status's (`"invalid_json"`, ...), or `""` after a success. Same lifetime as
/// `dw_mobile_client_last_error`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_last_error_kind(
    client: *const dw_mobile_client,
) -> *const c_char {
    boundary::last_error_kind(client)
}

/// Starts connecting with the stored token. `DW_STATUS_REFUSED` without one, or when already
/// connecting.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_start(
    client: *mut dw_mobile_client,
    now_ms: u64,
) -> dw_status {
    boundary::with(client, |h| h.engine.start(now_ms).map_err(Error::refused))
}

/// Pairs with the six-digit `code` the desktop shows (it wins over a stored token).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_pair(
    client: *mut dw_mobile_client,
    now_ms: u64,
    code: *const c_char,
) -> dw_status {
    boundary::with(client, |h| {
        let code = boundary::str_arg(code, "code")?;
        h.engine.pair(now_ms, code).map_err(Error::refused)
    })
}

/// Stops: closes the connection and does not reconnect.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_stop(
    client: *mut dw_mobile_client,
    now_ms: u64,
) -> dw_status {
    boundary::with(client, |h| {
        h.engine.stop(now_ms);
        Ok(())
    })
}

/// Forgets the stored token.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_forget_token(client: *mut dw_mobile_client) -> dw_status {
    boundary::with(client, |h| {
        h.engine.forget_token();
        Ok(())
    })
}

/// The WebSocket upgrade the engine asked for (`DW_OUTPUT_CONNECT`) succeeded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_connected(
    client: *mut dw_mobile_client,
    now_ms: u64,
) -> dw_status {
    boundary::with(client, |h| {
        h.engine.connected(now_ms).map_err(Error::refused)
    })
}

/// The connection ended or failed: `reason_json` = `"closed"`, `{"failed": "why"}`,
/// `"unauthorized"` (the upgrade got 401/403) or `"server_timeout"`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_disconnected(
    client: *mut dw_mobile_client,
    now_ms: u64,
    reason_json: *const c_char,
) -> dw_status {
    boundary::with(client, |h| {
        let reason: DisconnectReason = boundary::json_arg(reason_json, "reason_json")?;
        h.engine.disconnected(now_ms, reason);
        Ok(())
    })
}

/// A text frame arrived: `text[0..len]`, UTF-8. Bad frames are ignored and counted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_handle_text(
    client: *mut dw_mobile_client,
    now_ms: u64,
    text: *const u8,
    len: usize,
) -> dw_status {
    boundary::with(client, |h| {
        let text = boundary::text_arg(text, len, "text")?;
        h.engine.handle_text(now_ms, text);
        Ok(())
    })
}

/// Time passed (backoff deadlines, the server-silence timeout).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_handle_timeout(
    client: *mut dw_mobile_client,
    now_ms: u64,
) -> dw_status {
    boundary::with(client, |h| {
        h.engine.handle_timeout(now_ms);
        Ok(())
    })
}

/// Answers the permission request `id`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_respond_permission(
    client: *mut dw_mobile_client,
    now_ms: u64,
    id: *const c_char,
    approved: bool,
    remember: bool,
) -> dw_status {
    boundary::with(client, |h| {
        let id = boundary::str_arg(id, "id")?;
        h.engine
            .respond_permission(now_ms, id, approved, remember)
            .map_err(Error::refused)
    })
}

/// Sends an agent command: `command_json` = `{"action": "start" | "stop" | "pause" |
/// "resume", "task"?, "max_iterations"?}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_send_command(
    client: *mut dw_mobile_client,
    now_ms: u64,
    command_json: *const c_char,
) -> dw_status {
    boundary::with(client, |h| {
        let command: Command = boundary::object_arg(command_json, "command_json")?;
        h.engine
            .send_command(now_ms, command)
            .map_err(Error::refused)
    })
}

/// Sends a chat message, `text[0..len]` (UTF-8).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_send_message(
    client: *mut dw_mobile_client,
    now_ms: u64,
    text: *const u8,
    len: usize,
) -> dw_status {
    boundary::with(client, |h| {
        let text = boundary::text_arg(text, len, "text")?;
        h.engine.send_message(now_ms, text).map_err(Error::refused)
    })
}

/// The next instruction: `DW_OUTPUT_CONNECT` (open the WebSocket; `data` is the bearer token
/// or empty), `DW_OUTPUT_TRANSMIT` (send `data` as one text frame), `DW_OUTPUT_CLOSE` (close
/// it), `DW_OUTPUT_EVENT` (`"connected"`, `{"paired": {"token"}}`, `{"auth_failed": {"error",
/// "attempts_left", "retry_after_ms"}}` (what the desktop said; each may be `null`),
/// `"token_rejected"`, `{"disconnected": {"reason", "retry_in_ms"}}`, `{"state_changed":
/// {"state", "initial"}}`, `{"message": {..}}`, `{"permission_requested": {..}}`,
/// `{"task_update": {..}}`) or `DW_OUTPUT_TIMEOUT`. `out->data` stays valid until the next call
/// with `client`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_poll_output(
    client: *mut dw_mobile_client,
    now_ms: u64,
    out: *mut dw_output,
) -> dw_status {
    boundary::with(client, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let output = match h.engine.poll_output(now_ms) {
            client::Output::Connect { bearer } => h.bytes_out(
                dw_output_kind::DwOutputConnect,
                bearer.map(String::into_bytes).unwrap_or_default(),
                0,
            ),
            client::Output::Transmit(text) => {
                h.bytes_out(dw_output_kind::DwOutputTransmit, text.into_bytes(), 0)
            }
            client::Output::Close => h.bytes_out(dw_output_kind::DwOutputClose, Vec::new(), 0),
            client::Output::Event(event) => h.event(&event),
            client::Output::Timeout(at) => dw_output::timeout(at),
        };
        boundary::write(out, output);
        Ok(())
    })
}

/// Where the client is, as JSON in `*out`: `"idle"`, `{"waiting": {"retry_at"}}`,
/// `"connecting"`, `"authenticating"`, `{"online": {"synced"}}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_state(
    client: *mut dw_mobile_client,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(client, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let state = h.engine.connection_state();
        boundary::write(out, h.json_view(&state));
        Ok(())
    })
}

/// The stored token (a secret: never log it), or `NULL` in `out->ptr` with `len` 0 when there
/// is none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_token(
    client: *mut dw_mobile_client,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(client, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let view = match h.engine.token().map(str::to_owned) {
            Some(token) => h.text_view(&token),
            None => dw_str {
                ptr: std::ptr::null(),
                len: 0,
            },
        };
        boundary::write(out, view);
        Ok(())
    })
}

/// The counters as JSON in `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_client_stats(
    client: *mut dw_mobile_client,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(client, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let stats = h.engine.stats();
        boundary::write(out, h.json_view(&stats));
        Ok(())
    })
}

/// The desktop's end (`deskwire::mobile::Server`): pairing codes, tokens, state sync,
/// keep-alive, permission prompts and broadcasts for any number of phones.
pub struct dw_mobile_server(Handle<Server>);
as_handle!(dw_mobile_server, Server);

/// Creates the desktop's server. `config_json`: `{"pairing_code_ttl_ms",
/// "max_pairing_attempts", "pairing_backoff_ms", "max_pairing_backoff_ms", "auth_timeout_ms",
/// "max_unpaired_connections", "ping_interval_ms", "max_missed_pongs",
/// "permission_timeout_ms", "max_pending_permissions", "answered_memory", "max_connections",
/// "max_tokens", "max_message_bytes", "max_queued"}` (any subset) or `NULL`. `entropy`:
/// `DW_ENTROPY_LEN` (32) bytes from the operating system's secure random source
/// (`getrandom(2)`), which fix the pairing codes, tokens and permission ids (the same bytes
/// replay the same secrets: never derive them from a clock or a counter); read during the call
/// only. On success `*out` is a new handle the caller frees with `dw_mobile_server_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_new(
    config_json: *const c_char,
    entropy: *const u8,
    out: *mut *mut dw_mobile_server,
) -> dw_status {
    boundary::new_handle(out, || {
        let config: server::Config =
            boundary::opt_object_arg(config_json, "config_json")?.unwrap_or_default();
        Ok(Server::new(config, boundary::entropy_arg(entropy)?))
    })
}

/// Frees the server. `NULL` is a no-op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_free(server: *mut dw_mobile_server) {
    boundary::free_handle(server)
}

/// The message of the server's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_last_error(
    server: *const dw_mobile_server,
) -> *const c_char {
    boundary::last_error(server)
}

/// The kind of the server's last failed call: the core error's name (`"unknown_id"`, ...) or
/// the status's (`"invalid_json"`, ...), or `""` after a success. Same lifetime as
/// `dw_mobile_server_last_error`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_last_error_kind(
    server: *const dw_mobile_server,
) -> *const c_char {
    boundary::last_error_kind(server)
}

/// Accepts a token issued before a restart. `DW_STATUS_REFUSED` (kind `"tokens_full"`) when
/// `max_tokens` are held: no token is ever dropped to make room.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_add_token(
    server: *mut dw_mobile_server,
    token: *const c_char,
) -> dw_status {
    boundary::with(server, |h| {
        let token = boundary::str_arg(token, "token")?;
        h.engine.add_token(token).map_err(Error::refused)
    })
}

/// Revokes a token (its phone must pair again); `*revoked` says whether it was held. The
/// connections that used it are closed: `DW_OUTPUT_CLOSE` (`"revoked"`) for each follows.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_revoke_token(
    server: *mut dw_mobile_server,
    token: *const c_char,
    revoked: *mut bool,
) -> dw_status {
    boundary::with(server, |h| {
        let revoked = boundary::out_ptr(revoked, "revoked")?;
        let token = boundary::str_arg(token, "token")?;
        boundary::write(revoked, h.engine.revoke_token(token));
        Ok(())
    })
}

/// Opens pairing with a new six-digit code, viewed in `*code` (show it to the user). Call it
/// only on the user's action: pairing stays closed after a success or a burnt code.
/// `DW_STATUS_REFUSED` (kind `"tokens_full"`) while `max_tokens` phones are paired.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_start_pairing(
    server: *mut dw_mobile_server,
    now_ms: u64,
    code: *mut dw_str,
) -> dw_status {
    boundary::with(server, |h| {
        let out = boundary::out_ptr(code, "code")?;
        let code = h.engine.start_pairing(now_ms).map_err(Error::refused)?;
        boundary::write(out, h.text_view(&code));
        Ok(())
    })
}

/// Withdraws the pairing code.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_cancel_pairing(
    server: *mut dw_mobile_server,
) -> dw_status {
    boundary::with(server, |h| {
        h.engine.cancel_pairing();
        Ok(())
    })
}

/// An upgrade request arrived on `conn` with `bearer` (the `Authorization: Bearer` token, or
/// `NULL`). `*admission` views `"authenticated"`, `"awaiting_pairing"` or `{"refused":
/// "bad_token" | "too_many_connections" | "too_many_unpaired"}` (answer the upgrade with 401 /
/// 503 / 503).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_open(
    server: *mut dw_mobile_server,
    now_ms: u64,
    conn: u64,
    bearer: *const c_char,
    admission: *mut dw_str,
) -> dw_status {
    boundary::with(server, |h| {
        let out = boundary::out_ptr(admission, "admission")?;
        let bearer = boundary::opt_str_arg(bearer, "bearer")?;
        let admission = h
            .engine
            .open(now_ms, ConnId(conn), bearer)
            .map_err(Error::refused)?;
        boundary::write(out, h.json_view(&admission));
        Ok(())
    })
}

/// The socket of `conn` closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_closed(
    server: *mut dw_mobile_server,
    now_ms: u64,
    conn: u64,
) -> dw_status {
    boundary::with(server, |h| {
        h.engine.closed(now_ms, ConnId(conn));
        Ok(())
    })
}

/// Closes `conn` (a `DW_OUTPUT_CLOSE` follows).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_close(
    server: *mut dw_mobile_server,
    now_ms: u64,
    conn: u64,
) -> dw_status {
    boundary::with(server, |h| {
        h.engine.close(now_ms, ConnId(conn)).map_err(Error::refused)
    })
}

/// A text frame arrived on `conn`: `text[0..len]`, UTF-8.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_handle_text(
    server: *mut dw_mobile_server,
    now_ms: u64,
    conn: u64,
    text: *const u8,
    len: usize,
) -> dw_status {
    boundary::with(server, |h| {
        let text = boundary::text_arg(text, len, "text")?;
        h.engine.handle_text(now_ms, ConnId(conn), text);
        Ok(())
    })
}

/// Sets and broadcasts the agent state: `state_json` = `{"status": "Idle" | "Running" |
/// "Paused" | "Stopped", "data": ...}` (the spec's shape).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_set_state(
    server: *mut dw_mobile_server,
    now_ms: u64,
    state_json: *const c_char,
) -> dw_status {
    boundary::with(server, |h| {
        let state: AgentState = boundary::json_arg(state_json, "state_json")?;
        h.engine.set_state(now_ms, state);
        Ok(())
    })
}

/// Broadcasts a chat message: `{"role", "content", "timestamp"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_send_message(
    server: *mut dw_mobile_server,
    now_ms: u64,
    message_json: *const c_char,
) -> dw_status {
    boundary::with(server, |h| {
        let message: ChatMessage = boundary::object_arg(message_json, "message_json")?;
        h.engine.send_message(now_ms, message);
        Ok(())
    })
}

/// Broadcasts a task update: `{"task_id", "iteration", "status"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_send_task_update(
    server: *mut dw_mobile_server,
    now_ms: u64,
    update_json: *const c_char,
) -> dw_status {
    boundary::with(server, |h| {
        let update: TaskUpdate = boundary::object_arg(update_json, "update_json")?;
        h.engine.send_task_update(now_ms, update);
        Ok(())
    })
}

/// Asks the phones for permission: `permission_json` = `{"tool_name", "command",
/// "description", "tier"}`. `*id` views the request's id (answers come as
/// `permission_answered` events).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_request_permission(
    server: *mut dw_mobile_server,
    now_ms: u64,
    permission_json: *const c_char,
    id: *mut dw_str,
) -> dw_status {
    boundary::with(server, |h| {
        let out = boundary::out_ptr(id, "id")?;
        let permission: NewPermission = boundary::object_arg(permission_json, "permission_json")?;
        let id = h
            .engine
            .request_permission(now_ms, permission)
            .map_err(Error::refused)?;
        boundary::write(out, h.text_view(&id));
        Ok(())
    })
}

/// Withdraws the permission request `id`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_cancel_permission(
    server: *mut dw_mobile_server,
    now_ms: u64,
    id: *const c_char,
) -> dw_status {
    boundary::with(server, |h| {
        let id = boundary::str_arg(id, "id")?;
        h.engine
            .cancel_permission(now_ms, id)
            .map_err(Error::refused)
    })
}

/// Time passed (pings, pairing and permission deadlines).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_handle_timeout(
    server: *mut dw_mobile_server,
    now_ms: u64,
) -> dw_status {
    boundary::with(server, |h| {
        h.engine.handle_timeout(now_ms);
        Ok(())
    })
}

/// The next instruction: `DW_OUTPUT_TRANSMIT` (send `data` as a text frame on `conn`),
/// `DW_OUTPUT_CLOSE` (close `conn`; `data` is the reason as JSON: `"closed"`,
/// `"pong_timeout"`, `"auth_timeout"`, `"auth_failed"`, `"requested"`, `"revoked"`),
/// `DW_OUTPUT_EVENT`
/// (`{"client_connected": {"conn", "via"}}`, `{"paired": {"conn", "token"}}`,
/// `{"pairing_failed": {"conn", "failure"}}`, `{"client_disconnected": {"conn", "reason"}}`,
/// `{"command": {"conn", "command"}}`, `{"user_message": {"conn", "content"}}`,
/// `{"permission_answered": {"id", "conn", "approved", "remember"}}`,
/// `{"permission_timed_out": {"id"}}`) or `DW_OUTPUT_TIMEOUT`. `out->data` stays valid until
/// the next call with `server`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_poll_output(
    server: *mut dw_mobile_server,
    now_ms: u64,
    out: *mut dw_output,
) -> dw_status {
    boundary::with(server, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let output = match h.engine.poll_output(now_ms) {
            server::Output::Transmit { conn, text } => {
                h.bytes_out(dw_output_kind::DwOutputTransmit, text.into_bytes(), conn.0)
            }
            server::Output::Close { conn, reason } => {
                let reason = serde_json::to_vec(&reason).expect("a close reason serializes");
                h.bytes_out(dw_output_kind::DwOutputClose, reason, conn.0)
            }
            server::Output::Event(event) => h.event(&event),
            server::Output::Timeout(at) => dw_output::timeout(at),
        };
        boundary::write(out, output);
        Ok(())
    })
}

/// The counters as JSON in `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_server_stats(
    server: *mut dw_mobile_server,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(server, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let stats = h.engine.stats();
        boundary::write(out, h.json_view(&stats));
        Ok(())
    })
}

/// The bearer token of an `Authorization` header value (`Bearer <token>`, the scheme in any
/// case), written to the caller's buffer `out[0..cap]` (NUL-terminated; the length without the
/// NUL in `*out_len`; on `DW_STATUS_BUFFER_TOO_SMALL` only `*out_len` is written), for
/// `dw_mobile_server_open`. `DW_STATUS_MALFORMED` for another scheme or an empty token.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_mobile_bearer_token(
    header: *const c_char,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let header = boundary::str_arg(header, "header")?;
        let token = deskwire::mobile::bearer_token(header)
            .ok_or_else(|| Error::malformed_text("not a Bearer authorization with a token"))?;
        boundary::to_buffer(token.as_bytes(), out, cap, out_len)
    })
}
