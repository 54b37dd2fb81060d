//! The JVM's path for the call a socket loop makes on every read: the bytes in, then
//! everything the engine wants done out, in one native call with numbers and buffers only
//! (`ConnectionPump` in Kotlin, `src/main/kotlin/dev/deskwire/ConnectionPump.kt`).
//!
//! Why it is not a uniffi method: every uniffi call from Kotlin clones the object's handle
//! first (a second native call), and each of those calls, the `&[u8]` argument and a returned
//! `RustBuffer` is a JNA `Structure`, written and read back by reflection around the call;
//! the buffer comes back through a third call that frees it. Those structures cost far more
//! than the engine's work (`HandleBytesBench.kt` measures each). Here:
//! - the Kotlin side clones the handle once, when it makes the pump, and frees it on close;
//! - the input is a direct `ByteBuffer` passed as a pointer and a length (JNA's direct
//!   mapping passes a buffer's address at its position, so `ptr` is where the bytes start);
//! - the output is the drain exactly as uniffi serialises a [`ConnectionDrain`] (so Kotlin
//!   reads it with the generated `FfiConverterTypeConnectionDrain`: same types, no mirror),
//!   written into a direct `ByteBuffer` the pump keeps and reuses;
//! - the return value is the length written, or minus the length needed when the pump's
//!   buffer is too small: the drain then waits in this thread's spill, and Kotlin takes it
//!   with [`deskwire_uniffi_take_spill`] into a larger buffer, on the same thread, at once;
//! - a panic returns [`PANIC`], which Kotlin throws as `InternalException`.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use uniffi::{Handle, Lower};

use crate::UniFfiTag;
use crate::connection::{ConnectionDrain, Desk, Remote};

/// What a call returns when the engine panicked (a bug, as `InternalException` is elsewhere).
pub const PANIC: i64 = i64::MIN;

thread_local! {
    /// The serialised drain: reused, so a call allocates nothing here once it has grown; kept
    /// until the next call when it did not fit the caller's buffer.
    static SPILL: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Reads `len` bytes at `ptr` (empty when `len` is 0, whatever `ptr` is).
///
/// # Safety
/// When `len > 0`, `ptr` must point at `len` readable bytes for the call's duration.
unsafe fn input<'a>(ptr: *const u8, len: i32) -> &'a [u8] {
    if len <= 0 || ptr.is_null() {
        return &[];
    }
    // SAFETY: the caller's promise above.
    unsafe { std::slice::from_raw_parts(ptr, len as usize) }
}

/// Serialises `drain` into the spill, then copies it to `out` if it fits.
///
/// # Safety
/// `out` must point at `out_cap` writable bytes (or be null with `out_cap` 0).
unsafe fn emit(drain: ConnectionDrain, out: *mut u8, out_cap: i32) -> i64 {
    SPILL.with_borrow_mut(|spill| {
        spill.clear();
        <ConnectionDrain as Lower<UniFfiTag>>::write(drain, spill);
        let len = spill.len();
        if !out.is_null() && out_cap >= 0 && len <= out_cap as usize {
            // SAFETY: `out` has `out_cap >= len` writable bytes (the caller's promise), and
            // the spill is Rust's own memory, so the two cannot overlap.
            unsafe { std::ptr::copy_nonoverlapping(spill.as_ptr(), out, len) };
            len as i64
        } else {
            -(len as i64)
        }
    })
}

/// Handles the bytes and drains, catching a panic.
///
/// # Safety
/// `handle` must be a live handle of a `T` object (one the caller holds a reference of), and
/// the buffers as [`input`] and [`emit`] require.
unsafe fn feed<T>(
    handle: u64,
    step: impl FnOnce(&T, &[u8]) -> ConnectionDrain,
    ptr: *const u8,
    len: i32,
    out: *mut u8,
    out_cap: i32,
) -> i64 {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: a uniffi handle of a sized object is its `Arc::into_raw` pointer, and the
        // caller holds a reference, so the object outlives the call.
        let object = unsafe { &*Handle::from_raw_unchecked(handle).as_pointer::<T>() };
        // SAFETY: the caller's promises about the buffers.
        let drain = step(object, unsafe { input(ptr, len) });
        unsafe { emit(drain, out, out_cap) }
    }))
    .unwrap_or(PANIC)
}

/// [`Desk::handle_bytes`] with `len` bytes at `input`, then [`Desk::drain`], written to
/// `out` as described in the module docs.
///
/// # Safety
/// `handle` is a handle of a `Desk` the caller holds (a clone it has not freed); `input` has
/// `len` readable bytes; `out` has `out_cap` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn deskwire_uniffi_desk_feed(
    handle: u64,
    now_ms: i64,
    input: *const u8,
    len: i32,
    out: *mut u8,
    out_cap: i32,
) -> i64 {
    // `ConnectionPump` refuses a negative time before the call (as `handleBytes` does).
    let step = |desk: &Desk, bytes: &[u8]| {
        desk.handle_bytes(now_ms, bytes)
            .and_then(|()| desk.drain(now_ms))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    // SAFETY: passed on from the caller.
    unsafe { feed(handle, step, input, len, out, out_cap) }
}

/// [`deskwire_uniffi_desk_feed`] for a [`Remote`].
///
/// # Safety
/// As [`deskwire_uniffi_desk_feed`], with a handle of a `Remote`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn deskwire_uniffi_remote_feed(
    handle: u64,
    now_ms: i64,
    input: *const u8,
    len: i32,
    out: *mut u8,
    out_cap: i32,
) -> i64 {
    // `ConnectionPump` refuses a negative time before the call (as `handleBytes` does).
    let step = |remote: &Remote, bytes: &[u8]| {
        remote
            .handle_bytes(now_ms, bytes)
            .and_then(|()| remote.drain(now_ms))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    // SAFETY: passed on from the caller.
    unsafe { feed(handle, step, input, len, out, out_cap) }
}

/// Copies this thread's spill (the last drain that did not fit) into `out`: its length, or
/// minus it if it still does not fit.
///
/// # Safety
/// `out` has `out_cap` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn deskwire_uniffi_take_spill(out: *mut u8, out_cap: i32) -> i64 {
    SPILL.with_borrow(|spill| {
        let len = spill.len();
        if !out.is_null() && out_cap >= 0 && len <= out_cap as usize {
            // SAFETY: as in `emit`.
            unsafe { std::ptr::copy_nonoverlapping(spill.as_ptr(), out, len) };
            len as i64
        } else {
            -(len as i64)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::connection_config;

    const WELCOME: &[u8] = b":srv 001 desk :Welcome\r\n:desk!~d@h JOIN #desk\r\n\
        :srv 353 desk = #desk :desk deskbot\r\n:srv 366 desk #desk :End\r\n";

    fn desk() -> std::sync::Arc<Desk> {
        let config = connection_config("desk".into(), "#desk".into(), Some("deskbot".into()));
        Desk::new(config, 0, 1).unwrap()
    }

    /// The bytes `emit` writes are uniffi's serialisation of the same drain the uniffi
    /// method gives, and a buffer too small gets the needed length and then the spill.
    #[test]
    fn feed_writes_the_drain_and_spills_when_small() {
        let a = desk();
        let b = desk();
        let handle = Handle::from_pointer(std::sync::Arc::as_ptr(&a)).as_raw();
        let mut out = vec![0u8; 8];
        let n = unsafe {
            deskwire_uniffi_desk_feed(
                handle,
                0,
                WELCOME.as_ptr(),
                WELCOME.len() as i32,
                out.as_mut_ptr(),
                out.len() as i32,
            )
        };
        b.handle_bytes(0, WELCOME).unwrap();
        let mut expected = Vec::new();
        <ConnectionDrain as Lower<UniFfiTag>>::write(b.drain(0).unwrap(), &mut expected);
        assert!(expected.len() > 8, "the welcome drain has events");
        assert_eq!(n, -(expected.len() as i64));
        out.resize(expected.len(), 0);
        let taken = unsafe { deskwire_uniffi_take_spill(out.as_mut_ptr(), out.len() as i32) };
        assert_eq!(taken, expected.len() as i64);
        assert_eq!(out, expected);

        // Nothing new: an empty drain, which fits.
        let mut out = vec![0u8; 64];
        let n = unsafe {
            deskwire_uniffi_desk_feed(handle, 1, std::ptr::null(), 0, out.as_mut_ptr(), 64)
        };
        let mut expected = Vec::new();
        <ConnectionDrain as Lower<UniFfiTag>>::write(b.drain(1).unwrap(), &mut expected);
        assert_eq!(&out[..n as usize], &expected[..]);
    }
}
