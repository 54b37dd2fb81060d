//! IRC: the session helper (`deskwire::irc::Session`: registration, `PING`, `JOIN`, nick
//! fallback) for hosts without an IRC client, and the line parser.

use std::collections::BTreeMap;
use std::ffi::c_char;

use deskwire::irc::Message;
use deskwire::irc::session::{Session, SessionConfig, SessionError, SessionOutput};
use serde_json::{Map, Value, json};

use crate::boundary::{
    self, Error, Handle, as_handle, dw_output, dw_output_kind, dw_status, dw_str,
};

/// An IRC client session over a raw socket (`deskwire::irc::Session`).
pub struct dw_irc_session(Handle<Session>);
as_handle!(dw_irc_session, Session);

/// Creates a session. `config_json`: `{"nick", "user"?, "realname"?, "password"?,
/// "channels"?: [..], "max_nick_attempts"?, "ping_interval_ms"?, "ping_timeout_ms"?,
/// "nick_regain_ms"?, "max_line_bytes"?, "bot_mode"?, "sasl"?, "capabilities"?}` (unknown members
/// refused). Registration lines are queued at once. On success `*out` is a new handle the
/// caller frees with `dw_irc_session_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_new(
    config_json: *const c_char,
    now_ms: u64,
    out: *mut *mut dw_irc_session,
) -> dw_status {
    boundary::new_handle(out, || {
        let config: SessionConfig = boundary::object_arg(config_json, "config_json")?;
        config.validate().map_err(Error::argument)?;
        Ok(Session::new(config, now_ms))
    })
}

/// Frees a session. `NULL` is a no-op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_free(session: *mut dw_irc_session) {
    boundary::free_handle(session)
}

/// The message of the session's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_last_error(
    session: *const dw_irc_session,
) -> *const c_char {
    boundary::last_error(session)
}

/// The kind of the session's last failed call: the core error's name (`"unknown_id"`, ...) or
/// the status's (`"invalid_json"`, ...), or `""` after a success. Same lifetime as
/// `dw_irc_session_last_error`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_last_error_kind(
    session: *const dw_irc_session,
) -> *const c_char {
    boundary::last_error_kind(session)
}

/// Feeds bytes read from the socket (any split).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_handle_bytes(
    session: *mut dw_irc_session,
    now_ms: u64,
    data: *const u8,
    len: usize,
) -> dw_status {
    boundary::with(session, |h| {
        let bytes = boundary::bytes_arg(data, len, "data")?;
        h.engine.handle_bytes(now_ms, bytes);
        Ok(())
    })
}

/// Feeds one line (without its line end), for hosts that split lines themselves.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_handle_line(
    session: *mut dw_irc_session,
    now_ms: u64,
    line: *const u8,
    len: usize,
) -> dw_status {
    boundary::with(session, |h| {
        let line = boundary::bytes_arg(line, len, "line")?;
        h.engine.handle_line(now_ms, line);
        Ok(())
    })
}

/// The socket closed or failed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_handle_eof(
    session: *mut dw_irc_session,
    now_ms: u64,
) -> dw_status {
    boundary::with(session, |h| {
        h.engine.handle_eof(now_ms);
        Ok(())
    })
}

/// Time passed (keepalive `PING`, its timeout).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_handle_timeout(
    session: *mut dw_irc_session,
    now_ms: u64,
) -> dw_status {
    boundary::with(session, |h| {
        h.engine.handle_timeout(now_ms);
        Ok(())
    })
}

/// The next instruction: `DW_OUTPUT_TRANSMIT` (a line without its CRLF: append `"\r\n"` on
/// the socket), `DW_OUTPUT_EVENT` (`{"registered": {"nick"}}`,
/// `{"joined": {"channel"}}`, `{"nick_changed": {"old", "new"}}`, `{"prefix_learned":
/// {"prefix"}}`, `{"kicked": {..}}`, `{"parted": {..}}`, `{"server_error": {"message"}}`,
/// `{"disconnected": {"reason"}}`) or `DW_OUTPUT_TIMEOUT`. `out->data` stays valid until the
/// next call with `session`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_poll_output(
    session: *mut dw_irc_session,
    now_ms: u64,
    out: *mut dw_output,
) -> dw_status {
    boundary::with(session, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let output = match h.engine.poll_output(now_ms) {
            SessionOutput::Transmit(line) => {
                h.bytes_out(dw_output_kind::DwOutputTransmit, line.into_bytes(), 0)
            }
            SessionOutput::Event(event) => h.event(&event),
            SessionOutput::Timeout(at) => dw_output::timeout(at),
        };
        boundary::write(out, output);
        Ok(())
    })
}

/// Joins `channel`. `DW_STATUS_INVALID_ARGUMENT` for an invalid name (kind `invalid_channel`,
/// or `channel_too_long` past the server's `CHANNELLEN`), `DW_STATUS_REFUSED` for a closed
/// session (`closed`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_join(
    session: *mut dw_irc_session,
    channel: *const c_char,
) -> dw_status {
    boundary::with(session, |h| {
        let channel = boundary::str_arg(channel, "channel")?;
        h.engine.join(channel).map_err(session_error)
    })
}

/// Leaves `channel`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_part(
    session: *mut dw_irc_session,
    channel: *const c_char,
) -> dw_status {
    boundary::with(session, |h| {
        let channel = boundary::str_arg(channel, "channel")?;
        h.engine.part(channel).map_err(session_error)
    })
}

/// Sends `text` to `target` in one `PRIVMSG` line. `DW_STATUS_INVALID_ARGUMENT` when it does
/// not fit a line (kind `too_long`), is empty (`empty_text`), holds NUL, CR or LF
/// (`forbidden_byte`) or `target` is not one channel or nick (`invalid_target`);
/// `DW_STATUS_REFUSED` before registration (`not_registered`) or after the end (`closed`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_privmsg(
    session: *mut dw_irc_session,
    target: *const c_char,
    text: *const c_char,
) -> dw_status {
    boundary::with(session, |h| {
        let target = boundary::str_arg(target, "target")?;
        let text = boundary::str_arg(text, "text")?;
        h.engine.privmsg(target, text).map_err(session_error)
    })
}

/// Quits with `reason`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_quit(
    session: *mut dw_irc_session,
    reason: *const c_char,
) -> dw_status {
    boundary::with(session, |h| {
        let reason = boundary::str_arg(reason, "reason")?;
        h.engine.quit(reason);
        Ok(())
    })
}

/// The counters as JSON in `*out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_session_stats(
    session: *mut dw_irc_session,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(session, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let stats = h.engine.stats();
        boundary::write(out, h.json_view(&stats));
        Ok(())
    })
}

/// Parses one IRC line (RFC 1459 with IRCv3 tags, no line end) into `{"tags"?: {key: value},
/// "source"?, "verb", "params": [..]}` (tag values unescaped, the last of a repeated key wins),
/// written to the caller's buffer `out[0..cap]` (NUL-terminated; the length without the NUL in
/// `*out_len`; on `DW_STATUS_BUFFER_TOO_SMALL` only `*out_len`, the length needed, is written).
/// `DW_STATUS_MALFORMED` for a line that is not a message.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_irc_parse_line(
    line: *const u8,
    len: usize,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let line = boundary::bytes_arg(line, len, "line")?;
        let msg = Message::parse(line).map_err(Error::malformed_text)?;
        let mut value = Map::new();
        let tags: BTreeMap<String, String> = msg
            .tags()
            .map(|(k, v)| (k.to_owned(), v.into_owned()))
            .collect();
        if !tags.is_empty() {
            value.insert("tags".into(), json!(tags));
        }
        if let Some(source) = &msg.source {
            value.insert("source".into(), json!(source.raw));
        }
        value.insert("verb".into(), json!(msg.command));
        value.insert("params".into(), json!(msg.params()));
        boundary::json_to_buffer(&Value::Object(value), out, cap, out_len)
    })
}

/// A session's refusal, with its kind: values IRC cannot carry are the caller's
/// (`DW_STATUS_INVALID_ARGUMENT`, as the desks give for the same mistakes), the session's state
/// is `DW_STATUS_REFUSED`.
fn session_error(e: SessionError) -> Error {
    use dw_status::{InvalidArgument, Refused};
    let (status, kind) = match &e {
        SessionError::Closed => (Refused, "closed"),
        SessionError::NotRegistered => (Refused, "not_registered"),
        SessionError::InvalidNick(_) => (InvalidArgument, "invalid_nick"),
        SessionError::InvalidUser(_) => (InvalidArgument, "invalid_user"),
        SessionError::InvalidChannel(_) => (InvalidArgument, "invalid_channel"),
        SessionError::ChannelTooLong { .. } => (InvalidArgument, "channel_too_long"),
        SessionError::InvalidTarget(_) => (InvalidArgument, "invalid_target"),
        SessionError::ForbiddenByte => (InvalidArgument, "forbidden_byte"),
        SessionError::InvalidLogin(_) => (InvalidArgument, "invalid_login"),
        SessionError::EmptyText => (InvalidArgument, "empty_text"),
        SessionError::TooLong { .. } => (InvalidArgument, "too_long"),
        // The core's enum is non-exhaustive: a new refusal is the session's until named here.
        _ => (Refused, "refused"),
    };
    Error::with_kind(status, kind, e)
}
