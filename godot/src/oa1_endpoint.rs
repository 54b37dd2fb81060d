//! `Oa1Client` and `Oa1Server`: the bare OA1 endpoints (`deskwire::oa1::Client` and
//! `Server`) for hosts that own the IRC link and the clock.
//!
//! They take every IRC line the host receives and the host's time, and hand back lines,
//! events and deadlines through `poll_output`, as Dictionaries in the core's JSON shapes. No
//! signals: the host pulls, so they work on any thread and under a virtual clock (the OA1
//! conformance vectors run through them).

use deskwire::oa1::{Client, LineEndpoint, LocalError, Server};
use godot::classes::{IRefCounted, RefCounted};
use godot::global::Error;
use godot::prelude::*;
use godot::register::property::PhantomVar;
use serde_json::Value;

use crate::{oa1_shapes, variant};

/// The Godot error code for each of the core's local errors (their names stay in
/// `last_error`).
fn error_code(e: &LocalError) -> Error {
    match e {
        LocalError::TooLarge { .. } => Error::ERR_PARAMETER_RANGE_ERROR,
        LocalError::TooManyInFlight(_) => Error::ERR_BUSY,
        LocalError::UnknownRequest(_) => Error::ERR_DOES_NOT_EXIST,
        LocalError::AlreadyFinished(_) => Error::ERR_ALREADY_EXISTS,
        LocalError::InvalidErrorCode(_) => Error::ERR_INVALID_PARAMETER,
        LocalError::NoRoom(_) => Error::ERR_CANT_CREATE,
        LocalError::Closed => Error::ERR_CONNECTION_ERROR,
        _ => Error::FAILED,
    }
}

/// The outcome of the last call that can fail: the core's error name and message, or empty.
#[derive(Default)]
struct LastError {
    code: String,
    message: String,
}

impl LastError {
    /// Runs `call` at the host's time `now_ms` and records its outcome;
    /// `ERR_INVALID_PARAMETER` for a negative time.
    fn run(
        &mut self,
        now_ms: i64,
        what: &str,
        call: impl FnOnce(u64) -> Result<(), LocalError>,
    ) -> Error {
        match clock(now_ms, what) {
            Some(now) => self.record(call(now)),
            None => Error::ERR_INVALID_PARAMETER,
        }
    }

    fn record(&mut self, result: Result<(), LocalError>) -> Error {
        match result {
            Ok(()) => {
                *self = LastError::default();
                Error::OK
            }
            Err(e) => {
                let code = error_code(&e);
                self.code = e.code().to_owned();
                self.message = e.to_string();
                code
            }
        }
    }
}

/// The host's clock reading, refused when negative.
fn clock(now_ms: i64, what: &str) -> Option<u64> {
    let now = u64::try_from(now_ms).ok();
    if now.is_none() {
        godot_error!("{what}: now_ms is {now_ms}; the clock starts at 0");
    }
    now
}

fn read_config(config: &VarDictionary, what: &str) -> Option<deskwire::oa1::Config> {
    let read = variant::from_dictionary(config)
        .map_err(|e| e.to_string())
        .and_then(|map| oa1_shapes::config(Value::Object(map)));
    read.map_err(|e| godot_error!("{what}: {e}")).ok()
}

fn random_seed() -> u64 {
    let half = || godot::global::randi() as u64 & 0xffff_ffff;
    (half() << 32) | half()
}

fn handle_line(engine: &mut impl LineEndpoint, now_ms: i64, line: &GString, what: &str) {
    if let Some(now) = clock(now_ms, what) {
        engine.handle_line(now, line.to_string().as_bytes());
    }
}

fn handle_timeout(engine: &mut impl LineEndpoint, now_ms: i64, what: &str) {
    if let Some(now) = clock(now_ms, what) {
        engine.handle_timeout(now);
    }
}

fn poll_output(engine: &mut impl LineEndpoint, now_ms: i64, what: &str) -> VarDictionary {
    match clock(now_ms, what) {
        Some(now) => variant::dictionary_of(&oa1_shapes::output(&engine.poll_output(now))),
        None => VarDictionary::new(),
    }
}

fn disconnect(engine: &mut impl LineEndpoint, now_ms: i64, what: &str) {
    if let Some(now) = clock(now_ms, what) {
        engine.disconnect(now);
    }
}

fn stats(engine: &impl LineEndpoint) -> VarDictionary {
    variant::dictionary_of(&oa1_shapes::stats(&engine.stats()))
}

/// The desk end of OA1 over an IRC link you run yourself, on your own clock: sends requests
/// and gets back one answer or one failure for each.
///
/// [DeskRpcClient] is the ready-made node (its own connection, signals, `_process`); this is
/// the engine under it for hosts that already have an IRC client, or that drive it on a
/// virtual clock. Hand it every line the IRC connection receives ([method handle_line]),
/// then drain [method poll_output] until it answers `{"timeout": ms}`; do that again after
/// every call and when that time comes. Times are milliseconds on one monotonic clock
/// (`Time.get_ticks_msec()`).
///
/// ```gdscript
/// var desk := Oa1Client.create({"channel": "#desk", "nick": "desk-7", "allowed_sender": "deskbot"})
/// var id := desk.request(Time.get_ticks_msec(), "uname -a")
///
/// func _on_irc_line(line: String) -> void:    # every line your IRC client receives
///     desk.handle_line(Time.get_ticks_msec(), line)
///
/// func _process(_delta: float) -> void:
///     while true:
///         var out := desk.poll_output(Time.get_ticks_msec())
///         if out.has("transmit"):
///             irc.send_line(out.transmit)     # e.g. "PRIVMSG #desk :OA1 REQ k3p2d9m1q7ab 1 0 uname -a"
///         elif out.has("event"):
///             print(out.event)                # {"response": {"id", "text", "truncated"}} or {"failed": {"id", "error", "message"}}
///         else:
///             break                           # {"timeout": ms}: nothing to do before then
/// ```
///
/// Calls that can fail return an [enum Error] (or, for [method request], an empty id) and
/// leave the core's name of the error in [member last_error]: `too_large`,
/// `too_many_in_flight`, `unknown_request`, `no_room` or `closed`.
#[derive(GodotClass)]
#[class(no_init, base = RefCounted)]
pub struct Oa1Client {
    engine: Client,
    error: LastError,
    /// The counters of the endpoint by name (`lines_in`, `frames_out`, `ignored`,
    /// `timeouts`, `bytes_buffered`, ...).
    #[var(get = get_stats, no_set)]
    stats: PhantomVar<VarDictionary>,
    /// The name of the error of the last call that failed (`too_large`, ...); empty after a
    /// call that succeeded.
    #[var(get = get_last_error, no_set)]
    last_error: PhantomVar<GString>,
    /// What went wrong in the last call that failed, for people.
    #[var(get = get_last_error_message, no_set)]
    last_error_message: PhantomVar<GString>,
    base: Base<RefCounted>,
}

#[godot_api]
impl IRefCounted for Oa1Client {}

#[godot_api]
impl Oa1Client {
    /// A desk endpoint. [param config] is OA1's configuration: `{"channel", "nick"}` and
    /// any of `allowed_sender` (answers only from this nick), `request_timeout_ms`,
    /// `max_message_bytes`, `max_frame_payload_bytes`, `adaptive_payload`, `pacing`
    /// (`{"burst", "interval_ms"}`), `auth` (`{"secret", "epoch_unix_ms"}`), `compression`,
    /// ...; what is missing takes the spec's default. [param seed] fixes the request ids (for
    /// tests); a negative one picks a random seed. Returns `null` (and reports why) for an
    /// unknown key or a wrong type.
    #[func]
    fn create(config: VarDictionary, #[opt(default = -1)] seed: i64) -> Option<Gd<Oa1Client>> {
        let config = read_config(&config, "Oa1Client.create")?;
        let seed = u64::try_from(seed).unwrap_or_else(|_| random_seed());
        Some(Gd::from_init_fn(|base| Oa1Client {
            engine: Client::new(config, seed),
            error: LastError::default(),
            stats: PhantomVar::default(),
            last_error: PhantomVar::default(),
            last_error_message: PhantomVar::default(),
            base,
        }))
    }

    /// One line the IRC connection received (with or without its line ending). The client
    /// picks out the frames meant for it and learns its own prefix from the rest.
    #[func]
    fn handle_line(&mut self, now_ms: i64, line: GString) {
        handle_line(&mut self.engine, now_ms, &line, "Oa1Client.handle_line");
    }

    /// Fails what has expired by [param now_ms]. [method poll_output] does this too.
    #[func]
    fn handle_timeout(&mut self, now_ms: i64) {
        handle_timeout(&mut self.engine, now_ms, "Oa1Client.handle_timeout");
    }

    /// The next thing to do: `{"transmit": line}` (write it to the IRC connection, adding
    /// `\r\n` on a raw socket), `{"event": {...}}` (`{"response": {"id", "text",
    /// "truncated"}}` or `{"failed": {"id", "error", "message"}}`), or `{"timeout": ms}`:
    /// nothing more until that time or the next input. Call it until it answers a timeout.
    #[func]
    fn poll_output(&mut self, now_ms: i64) -> VarDictionary {
        poll_output(&mut self.engine, now_ms, "Oa1Client.poll_output")
    }

    /// Sends [param payload] (for `RemoteBash`, the command) as a new request and returns its
    /// id, which the answer's event carries. [param timeout_ms] overrides the configured
    /// `request_timeout_ms` (0: keep it). An empty id means it was refused: see
    /// [member last_error].
    #[func]
    fn request(
        &mut self,
        now_ms: i64,
        payload: GString,
        #[opt(default = 0)] timeout_ms: i64,
    ) -> GString {
        let Some(now) = clock(now_ms, "Oa1Client.request") else {
            return GString::new();
        };
        let timeout = u64::try_from(timeout_ms).ok().filter(|t| *t > 0);
        match self.engine.request(now, &payload.to_string(), timeout) {
            Ok(id) => {
                self.error.record(Ok(()));
                variant::gstring(id.as_str())
            }
            Err(e) => {
                self.error.record(Err(e));
                GString::new()
            }
        }
    }

    /// Cancels request [param id]: no event will come for it, and the remote is sent a
    /// `CANCEL` with [param reason]. `ERR_DOES_NOT_EXIST` (`unknown_request`) when it is
    /// not in flight.
    #[func]
    fn cancel(
        &mut self,
        now_ms: i64,
        id: GString,
        #[opt(default = "cancelled")] reason: GString,
    ) -> Error {
        self.error.run(now_ms, "Oa1Client.cancel", |now| {
            self.engine
                .cancel(now, &id.to_string(), &reason.to_string())
        })
    }

    /// The IRC connection ended: every request in flight fails with `disconnected`.
    #[func]
    fn disconnect(&mut self, now_ms: i64) {
        disconnect(&mut self.engine, now_ms, "Oa1Client.disconnect");
    }

    /// Requests sent and not answered yet.
    #[func]
    fn in_flight(&self) -> i64 {
        self.engine.in_flight() as i64
    }

    /// See [member stats].
    #[func]
    fn get_stats(&self) -> VarDictionary {
        stats(&self.engine)
    }

    /// See [member last_error].
    #[func]
    fn get_last_error(&self) -> GString {
        variant::gstring(self.error.code.as_str())
    }

    /// See [member last_error_message].
    #[func]
    fn get_last_error_message(&self) -> GString {
        variant::gstring(self.error.message.as_str())
    }
}

/// The remote end of OA1 over an IRC link you run yourself, on your own clock: takes
/// requests and streams each one's answer back.
///
/// For a Godot host that serves requests itself (an in-game machine an NPC's desk talks to).
/// Hand it every line the IRC connection receives ([method handle_line]), drain
/// [method poll_output] until it answers `{"timeout": ms}`, and do that again after every
/// call and when that time comes.
///
/// ```gdscript
/// var remote := Oa1Server.create({"channel": "#desk", "nick": "deskbot", "allowed_sender": "desk-7"})
///
/// func _process(_delta: float) -> void:
///     var now := Time.get_ticks_msec()
///     while true:
///         var out := remote.poll_output(now)
///         if out.has("transmit"):
///             irc.send_line(out.transmit)
///         elif out.has("event") and out.event.has("request"):
///             var request: Dictionary = out.event.request      # {"id", "sender", "payload"}
///             remote.respond(now, request.id, "you asked for: " + request.payload)
///         elif out.has("timeout"):
///             break
/// ```
///
/// Calls that can fail return an [enum Error] and leave the core's name of the error in
/// [member last_error]: `unknown_request`, `already_finished`, `invalid_error_code` or
/// `closed`.
#[derive(GodotClass)]
#[class(no_init, base = RefCounted)]
pub struct Oa1Server {
    engine: Server,
    error: LastError,
    /// The counters of the endpoint by name (`lines_in`, `frames_out`, `ignored`,
    /// `too_large`, `cancels`, `bytes_buffered`, ...).
    #[var(get = get_stats, no_set)]
    stats: PhantomVar<VarDictionary>,
    /// The name of the error of the last call that failed (`unknown_request`, ...); empty
    /// after a call that succeeded.
    #[var(get = get_last_error, no_set)]
    last_error: PhantomVar<GString>,
    /// What went wrong in the last call that failed, for people.
    #[var(get = get_last_error_message, no_set)]
    last_error_message: PhantomVar<GString>,
    base: Base<RefCounted>,
}

#[godot_api]
impl IRefCounted for Oa1Server {}

#[godot_api]
impl Oa1Server {
    /// A remote endpoint. [param config] is OA1's configuration, as for
    /// [method Oa1Client.create] (`allowed_sender`: take requests only from this nick;
    /// `flush_delay_ms`: how long streamed output waits for more). Returns `null` (and
    /// reports why) for an unknown key or a wrong type.
    #[func]
    fn create(config: VarDictionary) -> Option<Gd<Oa1Server>> {
        let config = read_config(&config, "Oa1Server.create")?;
        Some(Gd::from_init_fn(|base| Oa1Server {
            engine: Server::new(config),
            error: LastError::default(),
            stats: PhantomVar::default(),
            last_error: PhantomVar::default(),
            last_error_message: PhantomVar::default(),
            base,
        }))
    }

    /// One line the IRC connection received (with or without its line ending).
    #[func]
    fn handle_line(&mut self, now_ms: i64, line: GString) {
        handle_line(&mut self.engine, now_ms, &line, "Oa1Server.handle_line");
    }

    /// Ends what has expired by [param now_ms]. [method poll_output] does this too.
    #[func]
    fn handle_timeout(&mut self, now_ms: i64) {
        handle_timeout(&mut self.engine, now_ms, "Oa1Server.handle_timeout");
    }

    /// The next thing to do: `{"transmit": line}`, `{"event": {...}}` (`{"request":
    /// {"id", "sender", "payload"}}`: answer it; `{"cancelled": {"id", "reason"}}`: stop
    /// working on it), or `{"timeout": ms}`. Call it until it answers a timeout.
    #[func]
    fn poll_output(&mut self, now_ms: i64) -> VarDictionary {
        poll_output(&mut self.engine, now_ms, "Oa1Server.poll_output")
    }

    /// Streams more [param output] of request [param id]'s answer (sent in frames as it
    /// fills them, or after `flush_delay_ms`). End it with [method finish].
    #[func]
    fn send(&mut self, now_ms: i64, id: GString, output: GString) -> Error {
        self.error.run(now_ms, "Oa1Server.send", |now| {
            self.engine.send(now, &id.to_string(), &output.to_string())
        })
    }

    /// Ends request [param id]'s answer.
    #[func]
    fn finish(&mut self, now_ms: i64, id: GString) -> Error {
        self.error.run(now_ms, "Oa1Server.finish", |now| {
            self.engine.finish(now, &id.to_string())
        })
    }

    /// Answers request [param id] with [param text] in one go ([method send] and
    /// [method finish]).
    #[func]
    fn respond(&mut self, now_ms: i64, id: GString, text: GString) -> Error {
        self.error.run(now_ms, "Oa1Server.respond", |now| {
            self.engine.respond(now, &id.to_string(), &text.to_string())
        })
    }

    /// Fails request [param id]: the desk gets `ERR code: message`. [param code] is lower-case
    /// letters and `_` (`timeout`, `not_found`, ...).
    #[func]
    fn fail(&mut self, now_ms: i64, id: GString, code: GString, message: GString) -> Error {
        self.error.run(now_ms, "Oa1Server.fail", |now| {
            self.engine.fail(
                now,
                &id.to_string(),
                &code.to_string(),
                &message.to_string(),
            )
        })
    }

    /// The IRC connection ended: every request in progress ends with a `cancelled` event
    /// (reason `disconnected`).
    #[func]
    fn disconnect(&mut self, now_ms: i64) {
        disconnect(&mut self.engine, now_ms, "Oa1Server.disconnect");
    }

    /// Requests received and not answered yet.
    #[func]
    fn active(&self) -> i64 {
        self.engine.active() as i64
    }

    /// See [member stats].
    #[func]
    fn get_stats(&self) -> VarDictionary {
        stats(&self.engine)
    }

    /// See [member last_error].
    #[func]
    fn get_last_error(&self) -> GString {
        variant::gstring(self.error.code.as_str())
    }

    /// See [member last_error_message].
    #[func]
    fn get_last_error_message(&self) -> GString {
        variant::gstring(self.error.message.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_local_error_has_a_code_and_its_name() {
        let cases = [
            (
                LocalError::TooLarge { size: 2, max: 1 },
                Error::ERR_PARAMETER_RANGE_ERROR,
            ),
            (LocalError::TooManyInFlight(64), Error::ERR_BUSY),
            (
                LocalError::UnknownRequest("a".into()),
                Error::ERR_DOES_NOT_EXIST,
            ),
            (
                LocalError::AlreadyFinished("a".into()),
                Error::ERR_ALREADY_EXISTS,
            ),
            (
                LocalError::InvalidErrorCode("A".into()),
                Error::ERR_INVALID_PARAMETER,
            ),
            (LocalError::NoRoom("#d".into()), Error::ERR_CANT_CREATE),
            (LocalError::Closed, Error::ERR_CONNECTION_ERROR),
        ];
        for (e, want) in cases {
            let mut last = LastError::default();
            assert_eq!(last.record(Err(e.clone())), want, "{e:?}");
            assert_eq!(last.code, e.code());
            assert_eq!(last.message, e.to_string());
            assert_eq!(last.record(Ok(())), Error::OK);
            assert!(last.code.is_empty() && last.message.is_empty());
        }
    }
}
