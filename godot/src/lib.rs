//! deskwire for Godot 4: a GDExtension that gives GDScript the OA1 desk client, desk-bound
//! tool gating and the `RemoteBash` tool.
//!
//! Classes (documented for GDScript users in the editor's help):
//! - `DeskRpcClient` ([`desk_client`]): the OA1 desk engine as a Node, over its own TCP/TLS
//!   connection ([`socket`]) or the project's IRC link.
//! - `DeskConnection` ([`desk_connection`]): one IRC connection for many `DeskRpcClient`s, one
//!   per channel, with the channels' chat and membership as signals.
//! - `RemoteCall` ([`remote_call`]): one request in flight, awaitable.
//! - `ToolGate` ([`tool_gate`]): which tools each NPC's model sees and may call.
//! - `RemoteBashTool` ([`remote_bash_tool`]): the tool definition, and a model's tool call run
//!   through a `DeskRpcClient` and turned back into its result message.
//! - `Oa1Client` and `Oa1Server` ([`oa1_endpoint`]): the bare OA1 endpoints for hosts that own
//!   the IRC link and the clock; `Oa1` ([`oa1_codec`]): escaping, frames, chunking and `ERR`
//!   payloads; `IrcMessage` ([`irc_message`]): an IRC line's parts. The OA1 and IRC
//!   conformance vectors run through these.
//!
//! Structured values cross as Dictionaries and Arrays made from the core's serde shapes:
//! [`shapes`] and [`oa1_shapes`] (core values ↔ JSON, engine-free and unit-tested) and [`variant`] (JSON ↔
//! `Variant`, the only hand-written conversion). Signals are emitted on the main thread only,
//! from calls GDScript makes and from `_process`.

// The classes' doc comments are also Godot class-reference text (register-docs), where
// `[ClassName]` is the editor's link markup; rustdoc would read it as an intra-doc link.
#![allow(rustdoc::broken_intra_doc_links)]

use godot::prelude::*;

pub mod desk_client;
pub mod desk_connection;
pub mod irc_message;
pub mod oa1_codec;
pub mod oa1_endpoint;
pub mod oa1_shapes;
pub mod remote_bash_tool;
pub mod remote_call;
pub mod shapes;
pub mod socket;
pub mod tool_gate;
pub mod variant;

/// Signals go out on the main thread only, so calls that may emit refuse other threads.
pub(crate) fn on_main_thread(what: &str) -> bool {
    if godot::init::is_main_thread() {
        true
    } else {
        godot::global::godot_error!(
            "{what}: call it from the main thread (signals are emitted there only)"
        );
        false
    }
}

/// The host's monotonic clock for the engines: `Time.get_ticks_msec()`.
pub(crate) fn ticks() -> u64 {
    godot::classes::Time::singleton().get_ticks_msec()
}

struct Deskwire;

/// The entry symbol is `deskwire_init` (see `addons/deskwire/deskwire.gdextension`).
#[gdextension(entry_symbol = deskwire_init)]
unsafe impl ExtensionLibrary for Deskwire {}
