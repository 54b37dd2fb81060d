//! `RemoteCall`: one request in flight, awaitable from GDScript.

use deskwire::tools::ToolCall;
use godot::classes::{IRefCounted, RefCounted};
use godot::global::Error;
use godot::obj::InstanceId;
use godot::prelude::*;
use godot::register::property::PhantomVar;
use serde_json::Value;

use crate::desk_client::DeskRpcClient;
use crate::on_main_thread;
use crate::shapes::{self, Format};
use crate::variant;

/// One request sent by a [DeskRpcClient]: await its [signal completed] to get the result.
///
/// ```gdscript
/// var call := desk.remote_bash("uname -a")
/// var result: Dictionary = await call.completed
/// if result.ok:
///     print(result.text)
/// else:
///     print("failed: ", result.error, " ", result.message)
/// ```
///
/// The result is `{"id", "ok": true, "text", "truncated"}` or
/// `{"id", "ok": false, "error", "message"}`; `id` is [member id]. A Godot String cannot hold
/// a NUL byte: each NUL in `text` (and in any text from the remote or the server) arrives as
/// U+FFFD, `"\uFFFD"`, and what follows it is kept. `error` is the
/// remote's error code, or one of [signal DeskRpcClient.request_failed]'s (`timeout`,
/// `not_ready`, `join_failed`, `kicked`, `peer_left`, `disconnected`, `not_connected`,
/// `not_polled`, `invalid_arguments`, ...), `cancelled` or `closed` (the client was closed or
/// freed, or [method RemoteBashTool.run] was given none); `message` says what happened. [signal completed] is always emitted once, later than the
/// call that made this object returned (so awaiting it right away never misses it).
#[derive(GodotClass)]
#[class(base = RefCounted, no_init)]
pub struct RemoteCall {
    /// The OA1 request id: the one [signal DeskRpcClient.request_completed] and
    /// [signal DeskRpcClient.request_failed] carry. A call that failed before it left has an id
    /// of its own too.
    #[var(no_set)]
    id: GString,
    /// Whether [signal completed] was emitted.
    #[var(no_set)]
    done: bool,
    /// The result once [member done] (see the class description); empty before.
    #[var(get = get_result, no_set)]
    result: PhantomVar<VarDictionary>,
    outcome: Option<Value>,
    client: Option<InstanceId>,
    tool: Option<(ToolCall, Format)>,
    base: Base<RefCounted>,
}

#[godot_api]
impl IRefCounted for RemoteCall {}

#[godot_api]
impl RemoteCall {
    /// The call finished: [param result] is the Dictionary described above.
    #[signal]
    fn completed(result: VarDictionary);

    /// See [member result].
    #[func]
    fn get_result(&self) -> VarDictionary {
        match (&self.outcome, self.done) {
            (Some(v), true) => variant::dictionary_of(v),
            _ => VarDictionary::new(),
        }
    }

    /// Stops waiting: the remote is sent an OA1 `CANCEL` and this call completes
    /// with `error: "cancelled"`. `ERR_DOES_NOT_EXIST` when it already
    /// finished or its client is gone, `ERR_UNAVAILABLE` (and an error) off the main thread.
    #[func]
    fn cancel(&mut self, #[opt(default = "cancelled")] reason: GString) -> Error {
        if !on_main_thread("RemoteCall.cancel") {
            return Error::ERR_UNAVAILABLE;
        }
        let Some(mut client) = self
            .client
            .and_then(|id| Gd::<DeskRpcClient>::try_from_instance_id(id).ok())
        else {
            return Error::ERR_DOES_NOT_EXIST;
        };
        if self.outcome.is_some() {
            return Error::ERR_DOES_NOT_EXIST;
        }
        let reason = reason.to_string();
        let cancelled = client
            .bind_mut()
            .cancel_request(&self.id.to_string(), &reason);
        match cancelled {
            Some((id, _)) => {
                // Settled here: `settle` would borrow this call a second time.
                self.outcome = Some(shapes::local_failure(&id, "cancelled", &reason));
                self.client = None;
                self.run_deferred_gd(RemoteCall::deliver);
                Error::OK
            }
            None => Error::ERR_DOES_NOT_EXIST,
        }
    }

    /// For a call made by [method RemoteBashTool.run]: the message that carries its result
    /// back to the model, in the provider's format (OpenAI Chat:
    /// `{"role": "tool", "tool_call_id", "content"}`). The content is the output
    /// text, or `{"ok": false, "error", "message"}` as JSON text. Empty before
    /// [member done]. A call made by [method DeskRpcClient.remote_bash] answers no tool call:
    /// it gives an empty Dictionary and an error (read [member result] instead).
    #[func]
    fn tool_message(&self) -> VarDictionary {
        match (&self.tool, &self.outcome, self.done) {
            (Some((call, format)), Some(outcome), true) => {
                let result = shapes::tool_result(&call.id, outcome);
                variant::dictionary_of(&shapes::tool_message(*format, call, &result))
            }
            (None, _, _) => {
                godot_error!("RemoteCall.tool_message: not made by RemoteBashTool.run");
                VarDictionary::new()
            }
            _ => VarDictionary::new(),
        }
    }
}

impl RemoteCall {
    /// A call in flight on `client`, or (with `client` None) one that already failed.
    pub fn create(
        id: &str,
        client: Option<InstanceId>,
        tool: Option<(ToolCall, Format)>,
    ) -> Gd<RemoteCall> {
        Gd::from_init_fn(|base| RemoteCall {
            id: id.into(),
            done: false,
            result: PhantomVar::default(),
            outcome: None,
            client,
            tool,
            base,
        })
    }

    /// Records the outcome and emits `completed` at the end of the frame (deferred), so
    /// handlers never run inside the client's own calls. Later outcomes are ignored.
    pub fn settle(call: &mut Gd<RemoteCall>, outcome: Value) {
        {
            let mut this = call.bind_mut();
            if this.outcome.is_some() {
                return;
            }
            this.outcome = Some(outcome);
            this.client = None;
        }
        call.run_deferred_gd(RemoteCall::deliver);
    }

    /// Emits `completed` once. The deferred closure owns `call`, so a handler that drops the
    /// last reference cannot free it while it is borrowed; and no borrow is held while the
    /// handlers run (they may read `result`).
    fn deliver(mut call: Gd<RemoteCall>) {
        let result = {
            let mut this = call.bind_mut();
            match (&this.outcome, this.done) {
                (Some(outcome), false) => {
                    let result = variant::dictionary_of(outcome);
                    this.done = true;
                    result
                }
                _ => return,
            }
        };
        call.signals().completed().emit(&result);
    }
}
