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
//! - Events, outputs, configs and stats are uniffi enums and records (Kotlin sealed classes
//!   and data classes), mirrors of the core's types converted in one place per type.
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
pub mod error;
pub mod gateway;
pub mod irc;
pub mod jsonrpc;
pub mod mobile;
pub mod oa1;
pub mod providers;
pub mod schemas;
pub mod tools;

pub use error::DeskwireError;

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
            kind: "EntropyLength",
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
