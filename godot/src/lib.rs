//! deskwire for Godot 4: a GDExtension that gives GDScript the OA1 desk client, desk-bound
//! tool gating and the `RemoteBash` tool.
//!
//! Classes (documented for GDScript users in the editor's help):
//! - `ToolGate` ([`tool_gate`]): which tools each NPC's model sees and may call.
//!
//! Structured values cross as Dictionaries and Arrays made from the core's serde shapes:
//! [`shapes`] (core values ↔ JSON, engine-free and unit-tested) and [`variant`] (JSON ↔
//! `Variant`, the only hand-written conversion). Signals are emitted on the main thread only,
//! from calls GDScript makes and from `_process`.

use godot::prelude::*;

pub mod shapes;
pub mod tool_gate;
pub mod variant;

struct Deskwire;

/// The entry symbol is `deskwire_init` (see `addons/deskwire/deskwire.gdextension`).
#[gdextension(entry_symbol = deskwire_init)]
unsafe impl ExtensionLibrary for Deskwire {}
