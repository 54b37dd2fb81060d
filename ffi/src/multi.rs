//! Many OA1 desks over one IRC connection (`deskwire::oa1::MultiDesk`), one per channel, with
//! channel chat and membership beside OA1 (both opt-in).

use std::ffi::c_char;

use deskwire::oa1::chat::ChatError;
use deskwire::oa1::{
    Config, ConnectionConfig, ConnectionEvent, ConnectionState, Event, LocalError, MultiDesk,
    MultiOutput, remote_bash,
};
use serde_json::{Value, json};

use crate::boundary::{
    self, Error, Handle, Result, as_handle, dw_output, dw_output_kind, dw_status, dw_str,
};
use crate::oa1::{invalid_config, oa1_event_json, refused, write_tool_result};

/// The state behind a `dw_multi_desk`: the engine, and the last OA1 event it gave out (whose
/// bulk text the last output views, and which `_tool_result` reads).
pub(crate) struct MultiState {
    desk: MultiDesk,
    last: Option<Event>,
}

impl boundary::Closable for MultiState {
    fn check_open(&self) -> Result<()> {
        match self.desk.session().is_closed() || self.desk.state() == ConnectionState::Closed {
            true => Err(refused(LocalError::Closed)),
            false => Ok(()),
        }
    }
}

/// Many desks over one IRC connection (`deskwire::oa1::MultiDesk`), one per channel, each with
/// its own remote, request ids, timeouts and counters; they share the connection's flood pacing
/// fairly. The host loop is the one of `dw_desk` (bytes in, EOF, timeout, poll); each event
/// names its channel.
pub struct dw_multi_desk(Handle<MultiState>);
as_handle!(dw_multi_desk, MultiState);

/// A refusal of the core's chat (`send_text`): the text itself is wrong
/// (`DW_STATUS_INVALID_ARGUMENT`, kinds `empty`, `forbidden_byte`, `reserved_prefix`), or the
/// engine cannot take it (`DW_STATUS_REFUSED`, kinds `unknown_channel`, `queue_full`, `closed`).
fn chat_refused(e: ChatError) -> Error {
    let (status, kind) = match &e {
        ChatError::UnknownChannel(_) => (dw_status::Refused, "unknown_channel"),
        ChatError::Empty => (dw_status::InvalidArgument, "empty"),
        ChatError::ForbiddenByte => (dw_status::InvalidArgument, "forbidden_byte"),
        ChatError::ReservedPrefix(_) => (dw_status::InvalidArgument, "reserved_prefix"),
        ChatError::QueueFull { .. } => (dw_status::Refused, "queue_full"),
        ChatError::Closed => (dw_status::Refused, "closed"),
        _ => (dw_status::Refused, "refused"),
    };
    Error::with_kind(status, kind, e)
}

fn unknown_channel(channel: &str) -> Error {
    refused(LocalError::UnknownChannel(channel.to_owned()))
}

/// `value` (an event's JSON object) with `"channel"` added: the channel's name, or `null` for
/// the connection's own events.
fn with_channel(value: Value, channel: Option<&str>) -> Value {
    let mut object = match value {
        Value::Object(object) => object,
        // Every event is an object today; anything else is kept whole under "event".
        other => {
            let mut object = serde_json::Map::new();
            object.insert("event".to_owned(), other);
            object
        }
    };
    object.insert("channel".to_owned(), json!(channel));
    Value::Object(object)
}

fn state_name(state: ConnectionState) -> String {
    let value = serde_json::to_value(state).expect("a state serializes");
    value.as_str().unwrap_or_default().to_owned()
}

/// Starts a connection for many desks at `now_ms` (its first outputs are `NICK` and `USER`).
///
/// `config_json` as for `dw_desk_new`, where `channel` may be `""` (or absent): no desk yet,
/// each is added with `dw_multi_desk_add_desk`. Its `oa1` settings (timeouts, limits, the
/// shared `pacing`) are those of every desk added by name. A `channel` that is not empty is
/// the first desk and then needs `oa1.allowed_sender`. A bad config is
/// `DW_STATUS_INVALID_ARGUMENT` with kind `invalid_config`. `seed` starts the desks' request
/// ids: read it from the OS's entropy (`getentropy`). On success `*out` is a new handle the
/// caller frees with `dw_multi_desk_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_new(
    config_json: *const c_char,
    now_ms: u64,
    seed: u64,
    out: *mut *mut dw_multi_desk,
) -> dw_status {
    boundary::new_handle(out, || {
        let mut value: serde_json::Map<String, Value> =
            boundary::object_arg(config_json, "config_json")?;
        // No channel: no desk yet.
        value.entry("channel").or_insert_with(|| json!(""));
        let config = ConnectionConfig::from_json(&Value::Object(value).to_string())
            .map_err(|e| Error::json("config_json", e))?;
        let desk = MultiDesk::new(config, now_ms, seed).map_err(invalid_config)?;
        Ok(MultiState { desk, last: None })
    })
}

/// Frees a many-desk connection. `NULL` is a no-op. Views it gave out become invalid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_free(desk: *mut dw_multi_desk) {
    boundary::free_handle(desk)
}

/// The message of the handle's last failed call, or `""` after a success. Valid until the next
/// call with `desk`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_last_error(desk: *const dw_multi_desk) -> *const c_char {
    boundary::last_error(desk)
}

/// The kind of the handle's last failed call (`"unknown_channel"`, `"duplicate_channel"`,
/// `"reserved_prefix"`, `"closed"`, ... or the status's name), or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_last_error_kind(
    desk: *const dw_multi_desk,
) -> *const c_char {
    boundary::last_error_kind(desk)
}

/// Adds a desk in `channel` whose remote is `remote` (a nick, `nick!user@host`, or `"*"`), with
/// the connection's `oa1` settings; the channel is joined (after registration when not yet
/// registered). A channel already carried is `DW_STATUS_INVALID_ARGUMENT`, kind
/// `duplicate_channel`; a bad channel or remote is kind `invalid_config`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_add_desk(
    desk: *mut dw_multi_desk,
    now_ms: u64,
    channel: *const c_char,
    remote: *const c_char,
) -> dw_status {
    boundary::with_open(desk, |h| {
        let channel = boundary::str_arg(channel, "channel")?;
        let remote = boundary::str_arg(remote, "remote")?;
        h.engine
            .desk
            .add_desk(now_ms, channel, remote)
            .map_err(config_refused)
    })
}

/// Adds a desk with settings of its own: `config_json` as for `dw_oa1_client_new` (`channel`,
/// `allowed_sender`, timeouts, limits, `auth`); its `pacing` is not used (the connection's is
/// shared). Errors as for `dw_multi_desk_add_desk`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_add_desk_with(
    desk: *mut dw_multi_desk,
    now_ms: u64,
    config_json: *const c_char,
) -> dw_status {
    boundary::with_open(desk, |h| {
        let config: Config = boundary::object_arg(config_json, "config_json")?;
        h.engine
            .desk
            .add_desk_with(now_ms, config)
            .map_err(config_refused)
    })
}

/// A desk the connection cannot add: kind `duplicate_channel` for a channel it carries, else
/// `invalid_config`.
fn config_refused(e: deskwire::oa1::ConfigError) -> Error {
    match e {
        deskwire::oa1::ConfigError::DuplicateChannel(_) => {
            Error::with_kind(dw_status::InvalidArgument, "duplicate_channel", e)
        }
        other => invalid_config(other),
    }
}

/// Leaves `channel` and drops its desk: its requests fail with `disconnected` (their events
/// still come out, with the channel). `DW_STATUS_REFUSED`, kind `unknown_channel`, for a
/// channel the connection does not carry.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_remove_desk(
    desk: *mut dw_multi_desk,
    now_ms: u64,
    channel: *const c_char,
) -> dw_status {
    boundary::with(desk, |h| {
        let channel = boundary::str_arg(channel, "channel")?;
        match h.engine.desk.remove_desk(now_ms, channel) {
            true => Ok(()),
            false => Err(unknown_channel(channel)),
        }
    })
}

/// Feeds bytes read from the socket, `data[0..len]` (any split).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_handle_bytes(
    desk: *mut dw_multi_desk,
    now_ms: u64,
    data: *const u8,
    len: usize,
) -> dw_status {
    boundary::with(desk, |h| {
        let bytes = boundary::bytes_arg(data, len, "data")?;
        h.engine.desk.handle_bytes(now_ms, bytes);
        Ok(())
    })
}

/// The socket closed or failed: every desk's requests in flight fail with `disconnected`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_handle_eof(
    desk: *mut dw_multi_desk,
    now_ms: u64,
) -> dw_status {
    boundary::with(desk, |h| {
        h.engine.desk.handle_eof(now_ms);
        Ok(())
    })
}

/// The deadline of the last `DW_OUTPUT_TIMEOUT` passed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_handle_timeout(
    desk: *mut dw_multi_desk,
    now_ms: u64,
) -> dw_status {
    boundary::with(desk, |h| {
        h.engine.desk.handle_timeout(now_ms);
        Ok(())
    })
}

/// Sends `QUIT` with `reason` and ends the connection (drain `dw_multi_desk_poll_output` to
/// write it). From then on the calls that start work answer `DW_STATUS_REFUSED`, kind `closed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_quit(
    desk: *mut dw_multi_desk,
    now_ms: u64,
    reason: *const c_char,
) -> dw_status {
    boundary::with_open(desk, |h| {
        let reason = boundary::str_arg(reason, "reason")?;
        h.engine.desk.quit(now_ms, reason);
        Ok(())
    })
}

/// The next instruction: `DW_OUTPUT_TRANSMIT` (bytes for the socket), `DW_OUTPUT_TIMEOUT`, or
/// `DW_OUTPUT_EVENT`, whose JSON is the event as `dw_desk_poll_output` gives it plus a
/// `"channel"` key: the desk's channel, or `null` for the connection's own events
/// (`{"channel": "#a", "response": {"id", "truncated"}}` with the text raw in `out->text`,
/// `{"channel": "#a", "failed": {...}}`, `{"channel": null, "registered": {"nick"}}`,
/// `{"channel": "#a", "state_changed": {"state"}}`, ...). With chat on
/// (`dw_multi_desk_set_chat`): `{"channel": "#a", "chat": {"channel", "sender"
/// (`nick!user@host`), "kind" (`"privmsg"`, `"notice"`, `"action"`), "text", "tags": [[key,
/// value], ...]}}`. With membership on (`dw_multi_desk_set_membership`): `{"channel": "#a",
/// "membership": {"kind": "names" | "joined" | "parted" | "kicked" | "quit" | "renamed",
/// "channel", "nick" | "nicks", "reason"?, "by"?, "new_nick"?}}`. Call until it answers
/// `DW_OUTPUT_TIMEOUT`. `out->data` stays valid until the next call with `desk`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_poll_output(
    desk: *mut dw_multi_desk,
    now_ms: u64,
    out: *mut dw_output,
) -> dw_status {
    boundary::with(desk, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let output = match h.engine.desk.poll_output(now_ms) {
            MultiOutput::Transmit(bytes) => h.bytes_out(dw_output_kind::DwOutputTransmit, bytes, 0),
            MultiOutput::Timeout(at) => dw_output::timeout(at),
            MultiOutput::Event {
                channel,
                event: ConnectionEvent::Oa1(event),
            } => {
                let value = with_channel(oa1_event_json(&event, None), channel.as_deref());
                let mut output = h.event(&value);
                h.engine.last = Some(event);
                let (text, text_len) = match &h.engine.last {
                    Some(Event::Response { text, .. }) => (text.as_ptr(), text.len()),
                    Some(Event::Request { payload, .. }) => (payload.as_ptr(), payload.len()),
                    _ => (std::ptr::null(), 0),
                };
                output.text = text;
                output.text_len = text_len;
                output
            }
            MultiOutput::Event { channel, event } => {
                let value = serde_json::to_value(&event).expect("events serialize");
                h.event(&with_channel(value, channel.as_deref()))
            }
            MultiOutput::Chat(message) => {
                let value = json!({"channel": message.channel, "chat": message});
                h.event(&value)
            }
            MultiOutput::Membership(event) => {
                let value = json!({"channel": event.channel(), "membership": event});
                h.event(&value)
            }
            MultiOutput::Discovery(event) => h.event(&json!({"channel": null, "discovery": event})),
        };
        boundary::write(out, output);
        Ok(())
    })
}

/// Sends `payload[0..len]` (UTF-8) to the remote of the desk in `channel`, queued until the
/// channel is joined and the remote is in it. `timeout_ms` 0 keeps the configured timeout.
/// `*id` views the request id its events carry. `DW_STATUS_REFUSED` with kinds
/// `unknown_channel`, `too_large`, `too_many_in_flight`, `closed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_request(
    desk: *mut dw_multi_desk,
    now_ms: u64,
    channel: *const c_char,
    payload: *const u8,
    len: usize,
    timeout_ms: u64,
    id: *mut dw_str,
) -> dw_status {
    boundary::with_open(desk, |h| {
        let out = boundary::out_ptr(id, "id")?;
        let channel = boundary::str_arg(channel, "channel")?;
        let payload = boundary::text_arg(payload, len, "payload")?;
        let timeout = (timeout_ms > 0).then_some(timeout_ms);
        let id = h
            .engine
            .desk
            .request(now_ms, channel, payload, timeout)
            .map_err(refused)?;
        boundary::write(out, h.text_view(&id));
        Ok(())
    })
}

/// Runs the `RemoteBash` tool on the remote of the desk in `channel`: `args_json` =
/// `{"command", "timeout_sec"?}` as the model sent them. `*id` views the request id. Errors as
/// for `dw_desk_remote_bash`, and kind `unknown_channel`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_remote_bash(
    desk: *mut dw_multi_desk,
    now_ms: u64,
    channel: *const c_char,
    args_json: *const c_char,
    id: *mut dw_str,
) -> dw_status {
    boundary::with_open(desk, |h| {
        let out = boundary::out_ptr(id, "id")?;
        let channel = boundary::str_arg(channel, "channel")?;
        let args = boundary::str_arg(args_json, "args_json")?;
        let args = remote_bash::RemoteBashArgs::parse(args).map_err(|e| match e {
            remote_bash::ArgsError::Invalid(e) => Error::json("args_json", e),
            remote_bash::ArgsError::Local(e) => refused(e),
            other => Error::argument(other),
        })?;
        let id = h
            .engine
            .desk
            .request(now_ms, channel, &args.command, args.timeout_ms())
            .map_err(refused)?;
        boundary::write(out, h.text_view(&id));
        Ok(())
    })
}

/// Cancels request `id` of the desk in `channel`: no event comes for it, and the remote is sent
/// a `CANCEL` with `reason`. Kinds `unknown_channel`, `unknown_request`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_cancel(
    desk: *mut dw_multi_desk,
    now_ms: u64,
    channel: *const c_char,
    id: *const c_char,
    reason: *const c_char,
) -> dw_status {
    boundary::with_open(desk, |h| {
        let channel = boundary::str_arg(channel, "channel")?;
        let id = boundary::str_arg(id, "id")?;
        let reason = boundary::str_arg(reason, "reason")?;
        h.engine
            .desk
            .cancel(now_ms, channel, id, reason)
            .map_err(refused)
    })
}

/// The `RemoteBash` tool result of the OA1 event `dw_multi_desk_poll_output` gave last, as
/// `dw_desk_tool_result` (views not NUL-terminated: use `len`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_tool_result(
    desk: *mut dw_multi_desk,
    id: *mut dw_str,
    result: *mut dw_str,
) -> dw_status {
    boundary::with(desk, |h| {
        write_tool_result(h.engine.last.as_ref(), &mut h.view, id, result)
    })
}

/// Channel chat beside OA1 (off by default): with `on`, each `PRIVMSG`, `NOTICE` and CTCP
/// `ACTION` in a carried channel that is not an OA1 frame comes out of
/// `dw_multi_desk_poll_output` as a `chat` event (at most 1024 wait; the oldest are dropped and
/// counted in the stats' `chat_dropped`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_set_chat(desk: *mut dw_multi_desk, on: bool) -> dw_status {
    boundary::with(desk, |h| {
        h.engine.desk.set_chat(on);
        Ok(())
    })
}

/// Channel membership (off by default): with `on`, each `JOIN`, `PART`, `KICK`, `QUIT` and
/// `NICK` that changes who is in a carried channel comes out as a `membership` event, and so
/// does a channel's whole member list (`"kind": "names"`) once the server has sent it. In order
/// with the chat; the same bound of 1024 waiting.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_set_membership(
    desk: *mut dw_multi_desk,
    on: bool,
) -> dw_status {
    boundary::with(desk, |h| {
        h.engine.desk.set_membership(on);
        Ok(())
    })
}

/// Sends `text[0..len]` (UTF-8) to `channel` as chat (`NOTICE`s with `notice`, else
/// `PRIVMSG`s): cut at spaces, or at character boundaries, into lines that fit, sent through
/// the connection's pacing in turn with the desks' OA1 lines once the channel is joined.
/// `*lines` receives the number of lines. Text starting with `OA1 ` is refused (the spec
/// reserves it for tool frames): `DW_STATUS_INVALID_ARGUMENT` with kind `reserved_prefix`, as
/// are empty text (`empty`) and text holding NUL, CR or LF (`forbidden_byte`).
/// `DW_STATUS_REFUSED` with kinds `unknown_channel`, `queue_full` (64 KiB wait per channel) and
/// `closed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_send_text(
    desk: *mut dw_multi_desk,
    channel: *const c_char,
    text: *const u8,
    len: usize,
    notice: bool,
    lines: *mut usize,
) -> dw_status {
    boundary::with_open(desk, |h| {
        let out = boundary::out_ptr(lines, "lines")?;
        let channel = boundary::str_arg(channel, "channel")?;
        let text = boundary::text_arg(text, len, "text")?;
        let n = h
            .engine
            .desk
            .send_text(channel, text, notice)
            .map_err(chat_refused)?;
        boundary::write(out, n);
        Ok(())
    })
}

/// The connection's state, viewed in `*out`: `registering`, `ready` or `closed` (each desk has
/// its own: `dw_multi_desk_channel_state`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_state(
    desk: *mut dw_multi_desk,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(desk, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let state = state_name(h.engine.desk.state());
        boundary::write(out, h.text_view(&state));
        Ok(())
    })
}

/// The state of the desk in `channel`, viewed in `*out`: `joining`, `waiting_for_peer`,
/// `ready`, ... Kind `unknown_channel` for a channel the connection does not carry.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_channel_state(
    desk: *mut dw_multi_desk,
    channel: *const c_char,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(desk, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let channel = boundary::str_arg(channel, "channel")?;
        let state = h
            .engine
            .desk
            .channel_state(channel)
            .ok_or_else(|| unknown_channel(channel))?;
        let state = state_name(state);
        boundary::write(out, h.text_view(&state));
        Ok(())
    })
}

/// The desks' channels, as added and in that order, as a JSON array in `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_channels(
    desk: *mut dw_multi_desk,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(desk, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let channels = h.engine.desk.channels();
        boundary::write(out, h.json_view(&channels));
        Ok(())
    })
}

/// The desk in `channel` as JSON in `*out`: `{"state", "in_flight", "members" (the other nicks
/// in the channel), "waiting_for" (what its held lines wait for, or null), "stats" (its OA1
/// counters, as `dw_oa1_client_stats`)}`. Kind `unknown_channel` for a channel the connection
/// does not carry.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_channel_info(
    desk: *mut dw_multi_desk,
    channel: *const c_char,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(desk, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let channel = boundary::str_arg(channel, "channel")?;
        let d = &h.engine.desk;
        let (Some(state), Some(in_flight), Some(members), Some(stats)) = (
            d.channel_state(channel),
            d.in_flight(channel),
            d.members(channel),
            d.channel_stats(channel),
        ) else {
            return Err(unknown_channel(channel));
        };
        let value = json!({
            "state": state, "in_flight": in_flight, "members": members,
            "waiting_for": d.waiting_for(channel), "stats": stats,
        });
        boundary::write(out, h.json_view(&value));
        Ok(())
    })
}

/// The `RemoteBash` tool description for the desk in `channel` (its output budget follows the
/// shared pacing), viewed in `*out`. Kind `unknown_channel`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_tool_description(
    desk: *mut dw_multi_desk,
    channel: *const c_char,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(desk, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let channel = boundary::str_arg(channel, "channel")?;
        let text = h
            .engine
            .desk
            .tool_description(channel)
            .ok_or_else(|| unknown_channel(channel))?;
        boundary::write(out, h.text_view(&text));
        Ok(())
    })
}

/// The connection's counters as JSON in `*out`: `{"irc": {"lines_received", ...},
/// "chat_dropped", "pacing": {"burst", "interval_ms"}}` (each desk's OA1 counters are in
/// `dw_multi_desk_channel_info`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_multi_desk_stats(
    desk: *mut dw_multi_desk,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(desk, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let d = &h.engine.desk;
        let value = json!({
            "irc": d.irc_stats(), "chat_dropped": d.chat_dropped(), "pacing": d.pacing(),
        });
        boundary::write(out, h.json_view(&value));
        Ok(())
    })
}
