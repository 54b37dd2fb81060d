//! deskwire for Kotlin (and the other languages uniffi generates): the sans-IO engines of the
//! `deskwire` crate behind uniffi proc-macros. Kotlin package `dev.deskwire`.
//!
//! This crate converts types and nothing else; every protocol rule lives in `deskwire`.
//!
//! - Each engine is an object holding the core engine behind a mutex
//!   (`Object { inner: Mutex<core::X> }`, as mozilla/application-services does), so Kotlin may
//!   call it from any thread; calls are serialised.
//! - The API is the core's pull API: feed what arrived (`handle_bytes`, `handle_text`,
//!   `handle_line`), the time (`now_ms`, a monotonic clock the host owns) and commands, then
//!   call `poll_output` until it answers a `Timeout`. uniffi cannot export streams; the Kotlin
//!   drivers in `src/main/kotlin` turn this loop into coroutines and `Flow`s.
//! - Events, outputs, states, messages and stats are the core's own types: `deskwire`'s
//!   `uniffi` feature derives uniffi's traits on them (Kotlin package `dev.deskwire.core`), so
//!   this crate hands them over as they are. It mirrors a type only where its Kotlin shape must
//!   differ, converted in one place per type:
//!   - the OA1, IRC and connection surface takes and gives times, sizes and counters as
//!     `Long` (`i64`), where the core has `u64` (`ULong`): its configurations, outputs (the
//!     deadline) and stats;
//!   - sizes the core keeps as `usize`, which uniffi does not carry: the configurations of
//!     the mobile engines, the JSON-RPC peer, the gateway and the provider parser's limits;
//!   - JSON values (`serde_json::Value`, raw JSON) cross as JSON text: tool calls and specs,
//!     provider responses, JSON-RPC messages and events, gateway errors;
//!   - types that borrow (`irc::Message`, `oa1::Frame`, the provider request), that hold a
//!     set or a recursive rule (`tools::Context`, `tools::Visibility`), or that carry values
//!     the core computes on demand (an approval's command, whether it may run);
//!   - the one public error, [`DeskwireError`], mapped from every core error in [`error`].
//! - One path is not uniffi: [`pump`], three `extern "C"` functions that `ConnectionPump` in
//!   Kotlin calls for `handle_bytes` then `drain` on a `Desk` or `Remote`. A uniffi call from
//!   Kotlin costs what JNA's per-call structures cost (a call status per call, a handle clone
//!   per method, the bytes and the returned buffer), about 100 times the engine's work on a
//!   socket read; the pump passes numbers and direct buffers only, and returns the drain in
//!   uniffi's own serialisation, read by the generated converter (no mirror).
//! - Every failure is one public error, [`DeskwireError`] (`DeskwireException` in Kotlin),
//!   converted from the core's errors in [`error`]. A panic never crosses into the host: uniffi
//!   turns it into `InternalException`.

uniffi::setup_scaffolding!();

/// The core's enums are `#[non_exhaustive]`: a variant this crate does not know yet is a bug
/// here, reported (as `InternalException`) rather than mapped to a wrong value.
macro_rules! unmapped {
    ($value:expr) => {
        panic!("deskwire-uniffi does not map {:?} yet", $value)
    };
}

pub mod connection;
mod endpoint;
pub mod error;
pub mod gateway;
pub mod irc;
pub mod jsonrpc;
pub mod mobile;
pub mod multi;
pub mod oa1;
pub mod providers;
pub mod pump;
pub mod reconnect;
pub mod schemas;
pub mod tools;

pub use error::{DeskwireError, ErrorKind};

use std::sync::{Mutex, MutexGuard};

/// Locks an engine. A panic inside the core (a bug: uniffi reported it to the host as
/// `InternalException`) leaves the mutex poisoned; the engine's state is still memory-safe,
/// so later calls go on rather than turning one bug into a dead object.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The 32 bytes of entropy engines that make secrets take, checked for their length.
pub(crate) fn entropy(bytes: Vec<u8>) -> error::Result<deskwire::entropy::Entropy> {
    let len = bytes.len();
    bytes.try_into().map_err(|_| {
        error::Error::Invalid {
            kind: error::ErrorKind::EntropyLength,
            detail: format!(
                "entropy is {} bytes, not {len}",
                deskwire::entropy::ENTROPY_LEN
            ),
        }
        .into()
    })
}

/// Sizes cross as `u64` (Kotlin has no `usize`); values beyond the address space saturate.
pub(crate) fn to_usize(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

// The OA1, IRC and connection surface takes and gives times, durations, sizes, counters and
// seeds as `i64` (Kotlin `Long`), not `u64` (`ULong`, which needs `uL` literals and
// conversions at every call). The conversions live here.

/// A time (`now_ms`) from Kotlin: the host's monotonic clock, which starts at 0. A negative
/// one is refused (`InvalidInput`, kind `NEGATIVE`): a clock that went wrong, or a time made
/// from the wall clock's difference the wrong way round, said where it happened rather than
/// taken as 0 (which would fire every deadline or none).
pub(crate) fn ms(now_ms: i64) -> error::Result<u64> {
    u64::try_from(now_ms).map_err(|_| {
        error::Error::Invalid {
            kind: error::ErrorKind::Negative,
            detail: format!("nowMs is {now_ms}; the clock starts at 0"),
        }
        .into()
    })
}

/// A count, size or time for Kotlin; values past `Long.MAX_VALUE` (a deadline "never")
/// saturate.
pub(crate) fn long(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A `usize` for Kotlin, as [`long`].
pub(crate) fn long_size(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A setting from Kotlin that cannot be negative (a duration, a size, a count): refused when
/// it is, naming the setting.
pub(crate) fn non_negative(field: &'static str, value: i64) -> error::Result<u64> {
    u64::try_from(value).map_err(|_| {
        error::Error::Invalid {
            kind: error::ErrorKind::Negative,
            detail: format!("{field} is {value}; it cannot be negative"),
        }
        .into()
    })
}

/// [`non_negative`] for a setting the core keeps as `u32`; values past `u32::MAX` saturate.
pub(crate) fn non_negative_u32(field: &'static str, value: i32) -> error::Result<u32> {
    non_negative(field, i64::from(value)).map(|v| u32::try_from(v).unwrap_or(u32::MAX))
}
