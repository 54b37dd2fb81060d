//! OA1 (`deskwire::oa1`): the per-connection desk and remote engines over raw IRC bytes, the
//! bare client and server for hosts with their own IRC client, the `RemoteBash` contract, and
//! the codec (escaping, frames, chunking, `ERR` payloads).

use std::ffi::c_char;

use deskwire::oa1::chunk::{check_budget, split, wire_payload};
use deskwire::oa1::escape::{escape, unescape};
use deskwire::oa1::{
    Client, Config, ConnectionConfig, ConnectionEngine, ConnectionEvent, ConnectionOutput, Desk,
    Engine, Event, Failure, Frame, FrameError, FrameType, LineEndpoint, LocalError, Output, Remote,
    Requester, Responder, Server, remote_bash,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::boundary::{
    self, Error, Handle, Result, as_handle, dw_output, dw_output_kind, dw_status, dw_str,
};

pub(crate) fn refused(e: LocalError) -> Error {
    Error::with_kind(dw_status::Refused, e.code(), e)
}

fn timeout(timeout_ms: u64) -> Option<u64> {
    (timeout_ms > 0).then_some(timeout_ms)
}

/// The state behind every OA1 handle: the engine and the last OA1 event it gave out, whose
/// text the last output views and which `_tool_result` reads.
/// Writes the `RemoteBash` tool result of `last` (an OA1 response or failure) to the C caller:
/// the call's id and the text for the model. A response's text is viewed where the event keeps
/// it (no copy); a failure's object is written to `view`. Views carry no NUL: `len` bounds them.
/// Shared by `dw_desk_tool_result` and `dw_multi_desk_tool_result`.
pub(crate) fn write_tool_result(
    last: Option<&Event>,
    view: &mut Vec<u8>,
    id: *mut dw_str,
    result: *mut dw_str,
) -> Result<()> {
    let id_out = boundary::out_ptr(id, "id")?;
    let result_out = boundary::out_ptr(result, "result")?;
    let (call, text) = match last {
        Some(Event::Response { id, text, .. }) => (id.as_str(), text.as_str()),
        Some(Event::Failed { id, failure }) => {
            let json = remote_bash::failure_json(failure);
            view.clear();
            view.extend_from_slice(json.as_bytes());
            view.push(0);
            (
                id.as_str(),
                std::str::from_utf8(&view[..json.len()]).expect("JSON is UTF-8"),
            )
        }
        _ => {
            return Err(Error::refused_text(
                "the last output was not a response or a failure",
            ));
        }
    };
    boundary::write(
        id_out,
        dw_str {
            ptr: call.as_ptr().cast(),
            len: call.len(),
        },
    );
    boundary::write(
        result_out,
        dw_str {
            ptr: text.as_ptr().cast(),
            len: text.len(),
        },
    );
    Ok(())
}

pub(crate) struct Oa1<E> {
    engine: E,
    last: Option<Event>,
}

/// An output of either kind of engine ([`Output`] of a bare endpoint, [`ConnectionOutput`] of
/// a connection), as the C side tells them apart.
pub(crate) enum Polled {
    Transmit(Vec<u8>),
    Oa1(Event),
    /// An IRC or link event of a connection.
    Other(ConnectionEvent),
    Timeout(u64),
}

impl From<Output> for Polled {
    fn from(output: Output) -> Polled {
        match output {
            Output::Transmit(line) => Polled::Transmit(line.into_bytes()),
            Output::Event(event) => Polled::Oa1(event),
            Output::Timeout(at) => Polled::Timeout(at),
        }
    }
}

impl From<ConnectionOutput> for Polled {
    fn from(output: ConnectionOutput) -> Polled {
        match output {
            ConnectionOutput::Transmit(bytes) => Polled::Transmit(bytes),
            ConnectionOutput::Event(ConnectionEvent::Oa1(event)) => Polled::Oa1(event),
            ConnectionOutput::Event(event) => Polled::Other(event),
            ConnectionOutput::Timeout(at) => Polled::Timeout(at),
        }
    }
}

/// What the C wrapper asks of an OA1 engine beyond the core's traits.
pub(crate) trait Wrapped: Engine<Output: Into<Polled>, Stats: Serialize> {
    /// Whether the connection has ended: from then on the verbs that start or answer work are
    /// refused with kind `closed` (the core itself refuses only `Desk::request`). A bare
    /// endpoint has no connection of its own and never ends.
    fn has_ended(&self) -> bool {
        false
    }

    /// Who sent request `id` (`nick!user@host`), for the `source` of its `request` event. Only
    /// the remote connection tells: a bare server's host reads the lines itself.
    fn source(&self, _id: &str) -> Option<&str> {
        None
    }
}

impl Wrapped for Client {}

impl Wrapped for Server {}

impl Wrapped for Desk {
    fn has_ended(&self) -> bool {
        self.session().is_closed()
    }
}

impl Wrapped for Remote {
    fn has_ended(&self) -> bool {
        self.session().is_closed()
    }

    fn source(&self, id: &str) -> Option<&str> {
        self.server().source(id)
    }
}

impl<E: Wrapped> boundary::Closable for Oa1<E> {
    fn check_open(&self) -> Result<()> {
        match self.engine.has_ended() {
            true => Err(refused(LocalError::Closed)),
            false => Ok(()),
        }
    }
}

/// The C handles of the OA1 engines, by the engine they hold.
pub(crate) trait Oa1Handle: boundary::AsHandle<Engine = Oa1<Self::Inner>> {
    type Inner: Wrapped;
}

impl<O, E: Wrapped> Oa1Handle for O
where
    O: boundary::AsHandle<Engine = Oa1<E>>,
{
    type Inner = E;
}

/// One body per C verb, generic over the core's traits ([`Engine`], [`LineEndpoint`],
/// [`ConnectionEngine`], [`Requester`], [`Responder`]). Each `extern "C"` function below is
/// written out by name, so that cbindgen sees it, and is one call into here.
mod verb {
    use super::*;

    pub(super) fn new<O: Oa1Handle>(
        out: *mut *mut O,
        f: impl FnOnce() -> Result<O::Inner>,
    ) -> dw_status {
        boundary::new_handle(out, || {
            Ok(Oa1 {
                engine: f()?,
                last: None,
            })
        })
    }

    // ---- every engine ----

    pub(super) fn handle_timeout<O: Oa1Handle>(ptr: *mut O, now: u64) -> dw_status {
        boundary::with(ptr, |h| {
            h.engine.engine.handle_timeout(now);
            Ok(())
        })
    }

    pub(super) fn poll_output<O: Oa1Handle>(
        ptr: *mut O,
        now: u64,
        out: *mut dw_output,
    ) -> dw_status {
        boundary::with(ptr, |h| {
            let out = boundary::out_ptr(out, "out")?;
            let output = match h.engine.engine.poll_output(now).into() {
                Polled::Transmit(bytes) => h.bytes_out(dw_output_kind::DwOutputTransmit, bytes, 0),
                Polled::Oa1(event) => {
                    let source = match &event {
                        Event::Request { id, .. } => h.engine.engine.source(id).map(str::to_owned),
                        _ => None,
                    };
                    oa1_event(&mut h.view, event, source.as_deref(), &mut h.engine.last)
                }
                Polled::Other(event) => h.event(&event),
                Polled::Timeout(at) => dw_output::timeout(at),
            };
            boundary::write(out, output);
            Ok(())
        })
    }

    pub(super) fn stats<O: Oa1Handle>(ptr: *mut O, out: *mut dw_str) -> dw_status {
        boundary::with(ptr, |h| {
            let out = boundary::out_ptr(out, "out")?;
            let stats = h.engine.engine.stats();
            boundary::write(out, h.json_view(&stats));
            Ok(())
        })
    }

    // ---- the connection engines ----

    pub(super) fn handle_bytes<O: Oa1Handle<Inner: ConnectionEngine>>(
        ptr: *mut O,
        now: u64,
        data: *const u8,
        len: usize,
    ) -> dw_status {
        boundary::with(ptr, |h| {
            let bytes = boundary::bytes_arg(data, len, "data")?;
            h.engine.engine.handle_bytes(now, bytes);
            Ok(())
        })
    }

    pub(super) fn handle_eof<O: Oa1Handle<Inner: ConnectionEngine>>(
        ptr: *mut O,
        now: u64,
    ) -> dw_status {
        boundary::with(ptr, |h| {
            h.engine.engine.handle_eof(now);
            Ok(())
        })
    }

    pub(super) fn quit<O: Oa1Handle<Inner: ConnectionEngine>>(
        ptr: *mut O,
        now: u64,
        reason: *const c_char,
    ) -> dw_status {
        boundary::with_open(ptr, |h| {
            let reason = boundary::str_arg(reason, "reason")?;
            h.engine.engine.quit(now, reason);
            Ok(())
        })
    }

    pub(super) fn state<O: Oa1Handle<Inner: ConnectionEngine>>(
        ptr: *mut O,
        out: *mut dw_str,
    ) -> dw_status {
        boundary::with(ptr, |h| {
            let out = boundary::out_ptr(out, "out")?;
            let state = serde_json::to_value(h.engine.engine.state()).expect("a state serializes");
            let state = state.as_str().unwrap_or_default().to_owned();
            boundary::write(out, h.text_view(&state));
            Ok(())
        })
    }

    // ---- the bare endpoints ----

    pub(super) fn handle_line<O: Oa1Handle<Inner: LineEndpoint>>(
        ptr: *mut O,
        now: u64,
        line: *const u8,
        len: usize,
    ) -> dw_status {
        boundary::with(ptr, |h| {
            let line = boundary::bytes_arg(line, len, "line")?;
            h.engine.engine.handle_line(now, line);
            Ok(())
        })
    }

    pub(super) fn set_identity<O: Oa1Handle<Inner: LineEndpoint>>(
        ptr: *mut O,
        nick: *const c_char,
        user: *const c_char,
        host: *const c_char,
    ) -> dw_status {
        boundary::with(ptr, |h| {
            let nick = boundary::str_arg(nick, "nick")?;
            let user = boundary::str_arg(user, "user")?;
            let host = boundary::str_arg(host, "host")?;
            h.engine.engine.set_identity(nick, user, host);
            Ok(())
        })
    }

    pub(super) fn set_held<O: Oa1Handle<Inner: LineEndpoint>>(
        ptr: *mut O,
        held: bool,
    ) -> dw_status {
        boundary::with(ptr, |h| {
            h.engine.engine.set_held(held);
            Ok(())
        })
    }

    pub(super) fn disconnect<O: Oa1Handle<Inner: LineEndpoint>>(
        ptr: *mut O,
        now: u64,
    ) -> dw_status {
        boundary::with(ptr, |h| {
            h.engine.engine.disconnect(now);
            Ok(())
        })
    }

    // ---- the asking side ----

    pub(super) fn request<O: Oa1Handle<Inner: Requester>>(
        ptr: *mut O,
        now: u64,
        payload: *const u8,
        len: usize,
        timeout_ms: u64,
        id: *mut dw_str,
    ) -> dw_status {
        boundary::with_open(ptr, |h| {
            let out = boundary::out_ptr(id, "id")?;
            let payload = boundary::text_arg(payload, len, "payload")?;
            let id = h
                .engine
                .engine
                .request(now, payload, timeout(timeout_ms))
                .map_err(refused)?;
            boundary::write(out, h.text_view(&id));
            Ok(())
        })
    }

    pub(super) fn cancel<O: Oa1Handle<Inner: Requester>>(
        ptr: *mut O,
        now: u64,
        id: *const c_char,
        reason: *const c_char,
    ) -> dw_status {
        boundary::with_open(ptr, |h| {
            let id = boundary::str_arg(id, "id")?;
            let reason = boundary::str_arg(reason, "reason")?;
            h.engine.engine.cancel(now, id, reason).map_err(refused)
        })
    }

    pub(super) fn remote_bash<O: Oa1Handle<Inner: Requester>>(
        ptr: *mut O,
        now: u64,
        args_json: *const c_char,
        id: *mut dw_str,
    ) -> dw_status {
        boundary::with_open(ptr, |h| {
            let out = boundary::out_ptr(id, "id")?;
            let args = boundary::str_arg(args_json, "args_json")?;
            let id = remote_bash::call(&mut h.engine.engine, now, args).map_err(|e| match e {
                remote_bash::ArgsError::Local(e) => refused(e),
                remote_bash::ArgsError::Invalid(e) => Error::json("args_json", e),
                other => Error::argument(other),
            })?;
            boundary::write(out, h.text_view(&id));
            Ok(())
        })
    }

    /// Writes the `RemoteBash` tool result of the OA1 event `poll_output` gave out last: the
    /// call's id and the text for the model. A response's text is viewed where the event keeps
    /// it (no copy); a failure's object is written to the view buffer.
    pub(super) fn tool_result<O: Oa1Handle<Inner: Requester>>(
        ptr: *mut O,
        id: *mut dw_str,
        result: *mut dw_str,
    ) -> dw_status {
        boundary::with(ptr, |h| {
            super::write_tool_result(h.engine.last.as_ref(), &mut h.view, id, result)
        })
    }

    // ---- the answering side ----

    pub(super) fn send<O: Oa1Handle<Inner: Responder>>(
        ptr: *mut O,
        now: u64,
        id: *const c_char,
        text: *const u8,
        len: usize,
    ) -> dw_status {
        boundary::with_open(ptr, |h| {
            let id = boundary::str_arg(id, "id")?;
            let text = boundary::text_arg(text, len, "text")?;
            h.engine.engine.send(now, id, text).map_err(refused)
        })
    }

    pub(super) fn finish<O: Oa1Handle<Inner: Responder>>(
        ptr: *mut O,
        now: u64,
        id: *const c_char,
    ) -> dw_status {
        boundary::with_open(ptr, |h| {
            let id = boundary::str_arg(id, "id")?;
            h.engine.engine.finish(now, id).map_err(refused)
        })
    }

    pub(super) fn respond<O: Oa1Handle<Inner: Responder>>(
        ptr: *mut O,
        now: u64,
        id: *const c_char,
        text: *const u8,
        len: usize,
    ) -> dw_status {
        boundary::with_open(ptr, |h| {
            let id = boundary::str_arg(id, "id")?;
            let text = boundary::text_arg(text, len, "text")?;
            h.engine.engine.respond(now, id, text).map_err(refused)
        })
    }

    pub(super) fn fail<O: Oa1Handle<Inner: Responder>>(
        ptr: *mut O,
        now: u64,
        id: *const c_char,
        code: *const c_char,
        message: *const c_char,
    ) -> dw_status {
        boundary::with_open(ptr, |h| {
            let id = boundary::str_arg(id, "id")?;
            let code = boundary::str_arg(code, "code")?;
            let message = boundary::str_arg(message, "message")?;
            h.engine
                .engine
                .fail(now, id, code, message)
                .map_err(refused)
        })
    }
}

/// An OA1 event's JSON without the bulk text (which rides in [`dw_output::text`]).
pub(crate) fn oa1_event_json(event: &Event, source: Option<&str>) -> serde_json::Value {
    match event {
        Event::Response { id, truncated, .. } => {
            json!({"response": {"id": id, "truncated": truncated}})
        }
        Event::Request { id, sender, .. } => match source {
            Some(source) => json!({"request": {"id": id, "sender": sender, "source": source}}),
            None => json!({"request": {"id": id, "sender": sender}}),
        },
        other => serde_json::to_value(other).expect("events serialize"),
    }
}

/// An OA1 event as an output: the JSON without the bulk text, which rides in `text` (see
/// [`dw_output::text`]). `keep` receives the event so the text stays where it is. A request
/// carries its `source` (`nick!user@host`) when the server's engine knows it.
fn oa1_event(
    view: &mut Vec<u8>,
    event: Event,
    source: Option<&str>,
    keep: &mut Option<Event>,
) -> dw_output {
    let json = oa1_event_json(&event, source);
    boundary::json_into(view, &json);
    *keep = Some(event);
    let (text, text_len) = match keep {
        Some(Event::Response { text, .. }) => (text.as_ptr(), text.len()),
        Some(Event::Request { payload, .. }) => (payload.as_ptr(), payload.len()),
        _ => (std::ptr::null(), 0),
    };
    dw_output {
        kind: dw_output_kind::DwOutputEvent,
        data: view.as_ptr(),
        len: view.len(),
        deadline_ms: 0,
        conn: 0,
        text,
        text_len,
    }
}

// ---- the desk engine ----

/// The desk end of OA1 over one IRC connection (`deskwire::oa1::Desk`): registration, `PING`,
/// `JOIN`, pacing, chunking, reassembly and timeouts behind four calls the host loop makes
/// (bytes in, EOF, timeout, poll).
pub struct dw_desk(Handle<Oa1<Desk>>);
as_handle!(dw_desk, Oa1<Desk>);

/// A configuration the engine cannot work with (a bad nick or channel, a desk without its
/// remote): `DW_STATUS_INVALID_ARGUMENT`, kind `invalid_config`.
pub(crate) fn invalid_config(e: deskwire::oa1::ConfigError) -> Error {
    Error::with_kind(dw_status::InvalidArgument, "invalid_config", e)
}

fn connection_config(json: *const c_char) -> Result<ConnectionConfig> {
    // Checked as an object first (serde would also read the struct from an array).
    let value: serde_json::Value = boundary::object_arg(json, "config_json")?;
    ConnectionConfig::from_json(&value.to_string()).map_err(|e| Error::json("config_json", e))
}

/// Starts a desk connection at `now_ms` (its first outputs are `NICK` and `USER`).
///
/// `config_json`: `{"nick", "channel", "session"?: {...}, "oa1": {"allowed_sender", ...},
/// "rejoin_delay_ms"?, "peer_grace_ms"?}` where `session` (IRC: `user`, `realname`,
/// `password`, `max_nick_attempts`, `ping_interval_ms`, ...) and `oa1` (`max_frame_payload_bytes`,
/// `request_timeout_ms`, `ready_timeout_ms`, `pacing`, ...) hold only what differs from the
/// defaults: the spec's, with deskwire's compressed answers and adaptive payloads on
/// (`"compression": false, "adaptive_payload": false` for the v40 wire format exactly).
/// `oa1.allowed_sender` is required: the remote's nick (`rexd`), a
/// `nick!user@host` mask, or `"*"` for anyone; requests wait until it is in the channel. The
/// nick and the channel are read from the top-level `nick` and `channel` only: `session.nick`,
/// `session.channels`, `oa1.nick` and `oa1.channel` may only repeat them, and a different value
/// there is `DW_STATUS_INVALID_JSON` naming both keys (the desk has one channel). A bad
/// nick or channel, a missing remote, or a timeout of 0 (`oa1.request_timeout_ms`,
/// `oa1.ready_timeout_ms`, `oa1.partial_timeout_ms`) is `DW_STATUS_INVALID_ARGUMENT` with kind
/// `invalid_config`. `seed` fixes the request ids: read it from the OS's entropy
/// (`getentropy`), never from the clock, or two desks started together pick the same ids; a
/// fixed seed is for tests only. On success `*out` is a new handle the caller frees with
/// `dw_desk_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_new(
    config_json: *const c_char,
    now_ms: u64,
    seed: u64,
    out: *mut *mut dw_desk,
) -> dw_status {
    verb::new(out, || {
        Desk::new(connection_config(config_json)?, now_ms, seed).map_err(invalid_config)
    })
}

/// Frees a desk. `NULL` is a no-op. Views it gave out become invalid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_free(desk: *mut dw_desk) {
    boundary::free_handle(desk)
}

/// The message of the desk's last failed call, or `""` after a success. Valid until the next
/// call with `desk`; owned by it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_last_error(desk: *const dw_desk) -> *const c_char {
    boundary::last_error(desk)
}

/// The kind of the desk's last failed call (`"too_large"`, `"too_many_in_flight"`,
/// `"unknown_request"`, `"closed"`, ... or the status's name), or `""`. Same lifetime as
/// `dw_desk_last_error`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_last_error_kind(desk: *const dw_desk) -> *const c_char {
    boundary::last_error_kind(desk)
}

/// Feeds bytes read from the socket, `data[0..len]` (any split; a partial line waits for the
/// rest). Never fails for bad input: noise is ignored and counted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_handle_bytes(
    desk: *mut dw_desk,
    now_ms: u64,
    data: *const u8,
    len: usize,
) -> dw_status {
    verb::handle_bytes(desk, now_ms, data, len)
}

/// The socket closed or failed: requests in flight fail with `disconnected`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_handle_eof(desk: *mut dw_desk, now_ms: u64) -> dw_status {
    verb::handle_eof(desk, now_ms)
}

/// The deadline of the last `DW_OUTPUT_TIMEOUT` passed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_handle_timeout(desk: *mut dw_desk, now_ms: u64) -> dw_status {
    verb::handle_timeout(desk, now_ms)
}

/// The next instruction: `DW_OUTPUT_TRANSMIT` (bytes to write to the socket, CRLF included),
/// `DW_OUTPUT_EVENT` (JSON: IRC `{"registered": {"nick"}}`, `{"joined": {"channel"}}`,
/// `{"disconnected": {"reason"}}`, ...; OA1 `{"response": {"id", "truncated"}}` with the
/// response text raw in `out->text`, `{"failed": {"id", "error", "message"}}`; link
/// `{"state_changed": {"state"}}`,
/// `{"peer_joined": {"nick"}}`, ...) or `DW_OUTPUT_TIMEOUT` (sleep until `deadline_ms` or
/// until the socket is readable). Call until it answers `DW_OUTPUT_TIMEOUT`. `out->data`
/// stays valid until the next call with `desk`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_poll_output(
    desk: *mut dw_desk,
    now_ms: u64,
    out: *mut dw_output,
) -> dw_status {
    verb::poll_output(desk, now_ms, out)
}

/// Sends `payload[0..len]` (UTF-8) as a new request, queued until the channel is joined.
/// `timeout_ms` overrides the configured request timeout (0 keeps it). `*id` views the request
/// id its events will carry. `DW_STATUS_REFUSED` (kinds `too_large`, `too_many_in_flight`,
/// `closed`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_request(
    desk: *mut dw_desk,
    now_ms: u64,
    payload: *const u8,
    len: usize,
    timeout_ms: u64,
    id: *mut dw_str,
) -> dw_status {
    verb::request(desk, now_ms, payload, len, timeout_ms, id)
}

/// Cancels request `id`: no event comes for it, and the remote is sent a `CANCEL` with
/// `reason`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_cancel(
    desk: *mut dw_desk,
    now_ms: u64,
    id: *const c_char,
    reason: *const c_char,
) -> dw_status {
    verb::cancel(desk, now_ms, id, reason)
}

/// Sends `QUIT` with `reason` and ends the connection: drain `dw_desk_poll_output` to write the
/// `QUIT` (requests in flight fail with `disconnected`). From here on (as after EOF)
/// `dw_desk_request`, `dw_desk_remote_bash`, `dw_desk_cancel` and `dw_desk_quit` answer
/// `DW_STATUS_REFUSED` with kind `closed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_quit(
    desk: *mut dw_desk,
    now_ms: u64,
    reason: *const c_char,
) -> dw_status {
    verb::quit(desk, now_ms, reason)
}

/// Runs the `RemoteBash` tool: `args_json` = `{"command", "timeout_sec"?}` as the model sent
/// them (`timeout_sec` becomes the request timeout). `*id` views the request id.
/// `DW_STATUS_INVALID_JSON` for arguments that do not fit the tool's schema,
/// `DW_STATUS_INVALID_ARGUMENT` for `timeout_sec` 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_remote_bash(
    desk: *mut dw_desk,
    now_ms: u64,
    args_json: *const c_char,
    id: *mut dw_str,
) -> dw_status {
    verb::remote_bash(desk, now_ms, args_json, id)
}

/// The `RemoteBash` tool result of the OA1 event `dw_desk_poll_output` gave last: `*id` views
/// the request id, `*result` the text for the model (the output, or `{"ok": false, "error",
/// "message"}` for a failure). Both valid until the next call with `desk`, and not
/// NUL-terminated (the output is viewed where the event keeps it, without a copy): use `len`.
/// `DW_STATUS_REFUSED` when the last event was not a response or a failure.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_tool_result(
    desk: *mut dw_desk,
    id: *mut dw_str,
    result: *mut dw_str,
) -> dw_status {
    verb::tool_result(desk, id, result)
}

/// The connection's state, viewed in `*out`: `registering`, `joining`, `waiting_for_nick`,
/// `waiting_for_peer`, `ready` or `closed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_state(desk: *mut dw_desk, out: *mut dw_str) -> dw_status {
    verb::state(desk, out)
}

/// The counters as JSON in `*out`: `{"irc": {"lines_received", ...}, "oa1": {"lines_in",
/// "frames_in", "timeouts", ...}}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_desk_stats(desk: *mut dw_desk, out: *mut dw_str) -> dw_status {
    verb::stats(desk, out)
}

// ---- the remote engine ----

/// The remote end of OA1 over one IRC connection (`deskwire::oa1::Remote`): requests come as
/// `request` events; answer with `_send` / `_finish`, `_respond` or `_fail`.
pub struct dw_remote(Handle<Oa1<Remote>>);
as_handle!(dw_remote, Oa1<Remote>);

/// Starts a remote connection at `now_ms`. `config_json` as for `dw_desk_new`; its
/// `oa1.allowed_sender` (optional here) is the desk: a nick, or a `nick!user@host` mask.
///
/// Neither proves who sent a request. Anyone may take the desk's nick once it quits (or before
/// it connects), and on a network that does not verify users anyone on the desk's host may also
/// copy its user name; they are then served. When the requests run commands, set `oa1.auth` (a
/// secret shared with the desk: frames without its tag are dropped) and log each request's
/// `source` (`nick!user@host`, in the `request` event's JSON). On success `*out` is a new handle
/// the caller frees with `dw_remote_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_new(
    config_json: *const c_char,
    now_ms: u64,
    out: *mut *mut dw_remote,
) -> dw_status {
    verb::new(out, || {
        Remote::new(connection_config(config_json)?, now_ms).map_err(invalid_config)
    })
}

/// Frees a remote. `NULL` is a no-op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_free(remote: *mut dw_remote) {
    boundary::free_handle(remote)
}

/// The message of the remote's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_last_error(remote: *const dw_remote) -> *const c_char {
    boundary::last_error(remote)
}

/// The kind of the remote's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_last_error_kind(remote: *const dw_remote) -> *const c_char {
    boundary::last_error_kind(remote)
}

/// Feeds bytes read from the socket (any split).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_handle_bytes(
    remote: *mut dw_remote,
    now_ms: u64,
    data: *const u8,
    len: usize,
) -> dw_status {
    verb::handle_bytes(remote, now_ms, data, len)
}

/// The socket closed or failed: requests in progress end with `cancelled` events.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_handle_eof(remote: *mut dw_remote, now_ms: u64) -> dw_status {
    verb::handle_eof(remote, now_ms)
}

/// The deadline of the last `DW_OUTPUT_TIMEOUT` passed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_handle_timeout(
    remote: *mut dw_remote,
    now_ms: u64,
) -> dw_status {
    verb::handle_timeout(remote, now_ms)
}

/// The next instruction, as for `dw_desk_poll_output`; the OA1 events are `{"request": {"id",
/// "sender", "source"}}` (`source`: `nick!user@host`, to log) with the payload raw in
/// `out->text`, and `{"cancelled": {"id", "reason"}}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_poll_output(
    remote: *mut dw_remote,
    now_ms: u64,
    out: *mut dw_output,
) -> dw_status {
    verb::poll_output(remote, now_ms, out)
}

/// Streams more output of request `id`: `text[0..len]` (UTF-8).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_send(
    remote: *mut dw_remote,
    now_ms: u64,
    id: *const c_char,
    text: *const u8,
    len: usize,
) -> dw_status {
    verb::send(remote, now_ms, id, text, len)
}

/// Ends the response of request `id` once its output has gone out.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_finish(
    remote: *mut dw_remote,
    now_ms: u64,
    id: *const c_char,
) -> dw_status {
    verb::finish(remote, now_ms, id)
}

/// Sends the whole response `text[0..len]` of request `id` and ends it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_respond(
    remote: *mut dw_remote,
    now_ms: u64,
    id: *const c_char,
    text: *const u8,
    len: usize,
) -> dw_status {
    verb::respond(remote, now_ms, id, text, len)
}

/// Answers request `id` with `ERR code: message` (`code` is `[a-z_]+`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_fail(
    remote: *mut dw_remote,
    now_ms: u64,
    id: *const c_char,
    code: *const c_char,
    message: *const c_char,
) -> dw_status {
    verb::fail(remote, now_ms, id, code, message)
}

/// Sends `QUIT` with `reason` and ends the connection: drain `dw_remote_poll_output` to write
/// it. From here on (as after EOF) `dw_remote_send`, `_finish`, `_respond`, `_fail` and `_quit`
/// answer `DW_STATUS_REFUSED` with kind `closed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_quit(
    remote: *mut dw_remote,
    now_ms: u64,
    reason: *const c_char,
) -> dw_status {
    verb::quit(remote, now_ms, reason)
}

/// The connection's state, as for `dw_desk_state`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_state(remote: *mut dw_remote, out: *mut dw_str) -> dw_status {
    verb::state(remote, out)
}

/// The counters as JSON in `*out`, as for `dw_desk_stats`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_stats(remote: *mut dw_remote, out: *mut dw_str) -> dw_status {
    verb::stats(remote, out)
}

// ---- the bare endpoints ----

/// The bare OA1 client (`deskwire::oa1::Client`) for hosts with their own IRC connection: feed
/// it every line the connection receives; it gives back `PRIVMSG` lines to send.
pub struct dw_oa1_client(Handle<Oa1<Client>>);
as_handle!(dw_oa1_client, Oa1<Client>);

fn oa1_config(json: *const c_char) -> Result<Config> {
    boundary::object_arg(json, "config_json")
}

/// Creates a bare client. `config_json`: `{"channel", "nick", "allowed_sender"?,
/// "max_frame_payload_bytes"?, "adaptive_payload"?, "max_message_bytes"?, "max_streams"?,
/// "request_timeout_ms"?, "partial_timeout_ms"?, "pacing"?: {"burst", "interval_ms"},
/// "max_line_bytes"?, "finished_memory"?, "flush_delay_ms"?}`. `seed` fixes the request ids. On
/// success `*out` is a new handle the caller frees with `dw_oa1_client_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_new(
    config_json: *const c_char,
    seed: u64,
    out: *mut *mut dw_oa1_client,
) -> dw_status {
    verb::new(out, || Ok(Client::new(oa1_config(config_json)?, seed)))
}

/// Frees a bare client. `NULL` is a no-op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_free(client: *mut dw_oa1_client) {
    boundary::free_handle(client)
}

/// The message of the client's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_last_error(client: *const dw_oa1_client) -> *const c_char {
    boundary::last_error(client)
}

/// The kind of the client's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_last_error_kind(
    client: *const dw_oa1_client,
) -> *const c_char {
    boundary::last_error_kind(client)
}

/// Tells the client our prefix as the host's own IRC client knows it (`nick`, `user`, `host`),
/// so its chunks fit the lines the server relays.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_set_identity(
    client: *mut dw_oa1_client,
    nick: *const c_char,
    user: *const c_char,
    host: *const c_char,
) -> dw_status {
    verb::set_identity(client, nick, user, host)
}

/// Holds outgoing lines back (`held`) or lets them go: for hosts that must not send before
/// their IRC client is in the channel. Requests still queue; their timeouts run.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_set_held(
    client: *mut dw_oa1_client,
    held: bool,
) -> dw_status {
    verb::set_held(client, held)
}

/// Feeds one line the IRC connection received, `line[0..len]`, without its line end.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_handle_line(
    client: *mut dw_oa1_client,
    now_ms: u64,
    line: *const u8,
    len: usize,
) -> dw_status {
    verb::handle_line(client, now_ms, line, len)
}

/// The deadline of the last `DW_OUTPUT_TIMEOUT` passed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_handle_timeout(
    client: *mut dw_oa1_client,
    now_ms: u64,
) -> dw_status {
    verb::handle_timeout(client, now_ms)
}

/// The IRC connection ended: requests in flight fail with `disconnected` and queued lines are
/// dropped. The bare client owns no connection, so it stays usable: a request made afterwards
/// is sent on whatever link the host feeds it next (`dw_desk`, which owns its connection,
/// refuses requests after its end with `closed`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_disconnect(
    client: *mut dw_oa1_client,
    now_ms: u64,
) -> dw_status {
    verb::disconnect(client, now_ms)
}

/// The next instruction: `DW_OUTPUT_TRANSMIT` (an IRC line without CRLF), `DW_OUTPUT_EVENT`
/// (`{"response": {"id", "truncated"}}` with the text raw in `out->text`, `{"failed": {"id",
/// "error", "message"}}`) or `DW_OUTPUT_TIMEOUT`. `out->data` stays valid until the next call with `client`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_poll_output(
    client: *mut dw_oa1_client,
    now_ms: u64,
    out: *mut dw_output,
) -> dw_status {
    verb::poll_output(client, now_ms, out)
}

/// Sends `payload[0..len]` (UTF-8) as a new request; `timeout_ms` 0 keeps the configured
/// timeout. `*id` views the request id.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_request(
    client: *mut dw_oa1_client,
    now_ms: u64,
    payload: *const u8,
    len: usize,
    timeout_ms: u64,
    id: *mut dw_str,
) -> dw_status {
    verb::request(client, now_ms, payload, len, timeout_ms, id)
}

/// Cancels request `id` (a `CANCEL` with `reason` goes to the remote).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_cancel(
    client: *mut dw_oa1_client,
    now_ms: u64,
    id: *const c_char,
    reason: *const c_char,
) -> dw_status {
    verb::cancel(client, now_ms, id, reason)
}

/// Runs the `RemoteBash` tool through the bare client, as `dw_desk_remote_bash`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_remote_bash(
    client: *mut dw_oa1_client,
    now_ms: u64,
    args_json: *const c_char,
    id: *mut dw_str,
) -> dw_status {
    verb::remote_bash(client, now_ms, args_json, id)
}

/// The `RemoteBash` tool result of the event `dw_oa1_client_poll_output` gave last, as
/// `dw_desk_tool_result`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_tool_result(
    client: *mut dw_oa1_client,
    id: *mut dw_str,
    result: *mut dw_str,
) -> dw_status {
    verb::tool_result(client, id, result)
}

/// The counters as JSON in `*out` (`{"lines_in", "lines_out", "frames_in", "frames_out",
/// "payload_bytes_out", "ignored", "disallowed_sender", "malformed_frames", "invalid_lines",
/// "duplicates", "stale_frames", "truncations", "too_large", "timeouts", "incomplete",
/// "cancels", "bytes_buffered"}`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_client_stats(
    client: *mut dw_oa1_client,
    out: *mut dw_str,
) -> dw_status {
    verb::stats(client, out)
}

/// The bare OA1 server (`deskwire::oa1::Server`) for hosts with their own IRC connection.
pub struct dw_oa1_server(Handle<Oa1<Server>>);
as_handle!(dw_oa1_server, Oa1<Server>);

/// Creates a bare server; `config_json` as for `dw_oa1_client_new`. On success `*out` is a new
/// handle the caller frees with `dw_oa1_server_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_new(
    config_json: *const c_char,
    out: *mut *mut dw_oa1_server,
) -> dw_status {
    verb::new(out, || Ok(Server::new(oa1_config(config_json)?)))
}

/// Frees a bare server. `NULL` is a no-op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_free(server: *mut dw_oa1_server) {
    boundary::free_handle(server)
}

/// The message of the server's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_last_error(server: *const dw_oa1_server) -> *const c_char {
    boundary::last_error(server)
}

/// The kind of the server's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_last_error_kind(
    server: *const dw_oa1_server,
) -> *const c_char {
    boundary::last_error_kind(server)
}

/// Tells the server our prefix as the host's own IRC client knows it (`nick`, `user`, `host`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_set_identity(
    server: *mut dw_oa1_server,
    nick: *const c_char,
    user: *const c_char,
    host: *const c_char,
) -> dw_status {
    verb::set_identity(server, nick, user, host)
}

/// Holds outgoing lines back (`held`) or lets them go; requests still arrive and answers queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_set_held(
    server: *mut dw_oa1_server,
    held: bool,
) -> dw_status {
    verb::set_held(server, held)
}

/// Feeds one line the IRC connection received, without its line end.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_handle_line(
    server: *mut dw_oa1_server,
    now_ms: u64,
    line: *const u8,
    len: usize,
) -> dw_status {
    verb::handle_line(server, now_ms, line, len)
}

/// The deadline of the last `DW_OUTPUT_TIMEOUT` passed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_handle_timeout(
    server: *mut dw_oa1_server,
    now_ms: u64,
) -> dw_status {
    verb::handle_timeout(server, now_ms)
}

/// The IRC connection ended: requests in progress end with `cancelled` events.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_disconnect(
    server: *mut dw_oa1_server,
    now_ms: u64,
) -> dw_status {
    verb::disconnect(server, now_ms)
}

/// The next instruction: `DW_OUTPUT_TRANSMIT` (an IRC line without CRLF), `DW_OUTPUT_EVENT`
/// (`{"request": {"id", "sender"}}` with the payload raw in `out->text`, `{"cancelled": {"id",
/// "reason"}}`) or `DW_OUTPUT_TIMEOUT`. `out->data` stays valid until the next call with `server`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_poll_output(
    server: *mut dw_oa1_server,
    now_ms: u64,
    out: *mut dw_output,
) -> dw_status {
    verb::poll_output(server, now_ms, out)
}

/// Streams more output of request `id`: `text[0..len]` (UTF-8).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_send(
    server: *mut dw_oa1_server,
    now_ms: u64,
    id: *const c_char,
    text: *const u8,
    len: usize,
) -> dw_status {
    verb::send(server, now_ms, id, text, len)
}

/// Ends the response of request `id` once its output has gone out.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_finish(
    server: *mut dw_oa1_server,
    now_ms: u64,
    id: *const c_char,
) -> dw_status {
    verb::finish(server, now_ms, id)
}

/// Sends the whole response `text[0..len]` of request `id` and ends it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_respond(
    server: *mut dw_oa1_server,
    now_ms: u64,
    id: *const c_char,
    text: *const u8,
    len: usize,
) -> dw_status {
    verb::respond(server, now_ms, id, text, len)
}

/// Answers request `id` with `ERR code: message`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_fail(
    server: *mut dw_oa1_server,
    now_ms: u64,
    id: *const c_char,
    code: *const c_char,
    message: *const c_char,
) -> dw_status {
    verb::fail(server, now_ms, id, code, message)
}

/// The counters as JSON in `*out`, as for `dw_oa1_client_stats`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_server_stats(
    server: *mut dw_oa1_server,
    out: *mut dw_str,
) -> dw_status {
    verb::stats(server, out)
}

// ---- the codec ----

/// OA1-escapes `text[0..len]` (UTF-8): `\\`, `\n`, `\r`, `\t`, NUL as `\0`. Written to the
/// caller's buffer `out[0..cap]` (NUL-terminated; the length without the NUL in `*out_len`; on
/// `DW_STATUS_BUFFER_TOO_SMALL` only `*out_len`, the length needed, is written).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_escape(
    text: *const u8,
    len: usize,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let text = boundary::text_arg(text, len, "text")?;
        boundary::to_buffer(escape(text).as_bytes(), out, cap, out_len)
    })
}

/// Decodes an OA1-escaped payload `escaped[0..len]` into bytes (which may hold NUL: use
/// `*out_len`), written to the caller's buffer as for `dw_oa1_escape`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_unescape(
    escaped: *const u8,
    len: usize,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let escaped = boundary::bytes_arg(escaped, len, "escaped")?;
        boundary::to_buffer(&unescape(escaped), out, cap, out_len)
    })
}

/// Parses an OA1 frame, the text of a `PRIVMSG` (`OA1 REQ id 1 0 payload`), into `{"type":
/// "REQ" | "RES" | "ERR" | "CANCEL", "id", "seq", "more", "payload"}` (the payload still
/// escaped), or `null` when it is not a well-formed frame. Written to the caller's buffer as
/// for `dw_oa1_escape`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_frame_parse(
    text: *const u8,
    len: usize,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let text = boundary::text_arg(text, len, "text")?;
        let value = Frame::parse(text).map(|f| {
            json!({"type": f.kind.as_str(), "id": f.id, "seq": f.seq, "more": f.more, "payload": f.payload})
        });
        boundary::json_to_buffer(&value, out, cap, out_len)
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FrameJson {
    #[serde(rename = "type")]
    kind: String,
    id: String,
    seq: u32,
    more: bool,
    payload: String,
}

/// Writes a frame (`{"type", "id", "seq", "more", "payload"}`, the payload escaped) as its
/// `PRIVMSG` text, to the caller's buffer as for `dw_oa1_escape`. `DW_STATUS_INVALID_JSON`
/// for an unknown type. A frame that `dw_oa1_frame_parse` would not read back, or that would
/// break the IRC line, is `DW_STATUS_INVALID_ARGUMENT`: kind `invalid_id` for an id that is not
/// 1 to 64 of `A-Z a-z 0-9 _ -`, `zero_seq` for seq 0, `forbidden_byte` for a raw NUL, CR or
/// LF in the payload (escape it first with `dw_oa1_escape`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_frame_format(
    frame_json: *const c_char,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let f: FrameJson = boundary::object_arg(frame_json, "frame_json")?;
        let kind: FrameType = f
            .kind
            .parse()
            .map_err(|e: deskwire::oa1::UnknownFrameType| Error::json("frame_json", e))?;
        let frame = Frame {
            kind,
            id: &f.id,
            seq: f.seq,
            more: f.more,
            payload: f.payload.as_str(),
        };
        let text = frame.format().map_err(|e| {
            let kind = match e {
                FrameError::InvalidId(_) => "invalid_id",
                FrameError::ZeroSeq => "zero_seq",
                FrameError::ForbiddenByte { .. } => "forbidden_byte",
                _ => "invalid_argument",
            };
            Error::with_kind(
                dw_status::InvalidArgument,
                kind,
                format_args!("frame_json: {e}"),
            )
        })?;
        boundary::to_buffer(text.as_bytes(), out, cap, out_len)
    })
}

/// Escapes `text[0..len]` and cuts it into frame payloads of at most `budget` bytes each
/// (never inside an escape pair or a UTF-8 sequence), as a JSON array of the payloads as they
/// go on the wire, written to the caller's buffer as for `dw_oa1_escape`. A `budget` below 4
/// (a 4-byte character could never be sent) is `DW_STATUS_INVALID_ARGUMENT`, kind
/// `budget_too_small`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_chunk(
    text: *const u8,
    len: usize,
    budget: usize,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let text = boundary::text_arg(text, len, "text")?;
        let budget = check_budget(budget)
            .map_err(|e| Error::with_kind(dw_status::InvalidArgument, "budget_too_small", e))?;
        let escaped = escape(text);
        let payloads: Vec<String> = split(&escaped, |_| budget)
            .into_iter()
            .map(|chunk| wire_payload(chunk).into_owned())
            .collect();
        boundary::json_to_buffer(&payloads, out, cap, out_len)
    })
}

/// Reads an `ERR` payload `code: message` into `{"code", "message"}` (the code is `error` when
/// the text has none), written to the caller's buffer as for `dw_oa1_escape`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_oa1_err_payload(
    payload: *const u8,
    len: usize,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let payload = boundary::text_arg(payload, len, "payload")?;
        let failure = Failure::from_err_payload(payload);
        let value = json!({"code": failure.code(), "message": failure.message()});
        boundary::json_to_buffer(&value, out, cap, out_len)
    })
}

/// The `RemoteBash` tool spec (`{"name": "RemoteBash", "description", "input_schema"}`),
/// written to the caller's buffer as for `dw_oa1_escape`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_bash_spec(
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        boundary::json_to_buffer(&deskwire::tools::builtin::remote_bash(), out, cap, out_len)
    })
}
