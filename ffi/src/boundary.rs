//! What every entry point shares: the status codes, the panic boundary, handles with their
//! last error and views, and the checked conversions of C arguments.

use std::cell::{Cell, RefCell};
use std::ffi::{CStr, c_char};
use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The result of every fallible call. `DW_STATUS_OK` is 0; every other value is an error whose
/// message the handle's `_last_error` (or `dw_last_error()` for calls without a handle) gives.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum dw_status {
    /// Success; the outputs are written.
    Ok = 0,
    /// A pointer that must not be `NULL` was `NULL`.
    NullArgument = 1,
    /// A string is not valid UTF-8.
    InvalidUtf8 = 2,
    /// A JSON argument is not JSON, or not of the documented shape.
    InvalidJson = 3,
    /// An argument is outside its domain (an unknown enum value, a negative number, ...).
    InvalidArgument = 4,
    /// The caller's buffer is too small; the needed length was written to the length
    /// out-parameter and nothing else changed: call again with a larger buffer.
    BufferTooSmall = 5,
    /// The engine refused the call: host misuse (an unknown request id, too many in flight,
    /// a full queue, ...), the core's `LocalError`.
    Refused = 6,
    /// Input from the peer or a provider could not be read (a provider's error body, a
    /// malformed response, a value the protocol does not allow).
    Malformed = 7,
    /// The library panicked inside this call (a bug in deskwire): the handle is poisoned and
    /// refuses every later call but `_free`.
    Panic = 8,
    /// The handle is poisoned by an earlier panic; only `_free` works on it.
    Poisoned = 9,
}

pub(crate) fn status_str(status: u32) -> &'static str {
    match status {
        0 => "ok\0",
        1 => "a required pointer argument is NULL\0",
        2 => "a string argument is not valid UTF-8\0",
        3 => "a JSON argument is malformed or not of the documented shape\0",
        4 => "an argument is outside its domain\0",
        5 => "the output buffer is too small\0",
        6 => "the engine refused the call (host misuse)\0",
        7 => "input from the peer could not be read\0",
        8 => "deskwire panicked; the handle is poisoned\0",
        9 => "the handle is poisoned by an earlier panic\0",
        _ => "unknown status\0",
    }
}

/// What [`dw_output`] holds.
///
/// cbindgen:prefix-with-name=false
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum dw_output_kind {
    /// Nothing is due before `deadline_ms` (a drained engine always answers this): wait for
    /// input or until then, then call `_handle_timeout`.
    DwOutputTimeout = 0,
    /// Write `data[0..len]` to the connection (`conn` for engines with several).
    DwOutputTransmit = 1,
    /// Tell the application: `data[0..len]` is the event as UTF-8 JSON text.
    DwOutputEvent = 2,
    /// Mobile client: open the WebSocket; `data[0..len]` is the bearer token for the upgrade's
    /// `Authorization` header, or `len` is 0 for none.
    DwOutputConnect = 3,
    /// Close the connection (`conn` for engines with several); `data[0..len]` is the reason as
    /// JSON text, or `len` is 0.
    DwOutputClose = 4,
}

/// One instruction from an engine's `_poll_output`.
///
/// `data` points into the handle and stays valid until the next call with that handle (other
/// than `_last_error`); copy what must live longer. Never free it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dw_output {
    /// What to do.
    pub kind: dw_output_kind,
    /// The bytes (`Transmit`), the JSON text (`Event`, `Close`) or the token (`Connect`); not
    /// NUL-terminated. `NULL` when `len` is 0.
    pub data: *const u8,
    /// The length of `data`.
    pub len: usize,
    /// `Timeout`: the deadline, on the host's millisecond clock.
    pub deadline_ms: u64,
    /// `Transmit` / `Close` of the engines with several connections (mobile server, gateway):
    /// which one. 0 otherwise.
    pub conn: u64,
    /// The bulk text of an OA1 `response` event (the response text) or `request` event (the
    /// request payload): raw UTF-8, not NUL-terminated, and not repeated in the JSON, so the
    /// largest value on the hot path is neither escaped nor copied. Same lifetime as `data`.
    /// `NULL` (with `text_len` 0) for every other output.
    pub text: *const u8,
    /// The length of `text`.
    pub text_len: usize,
}

impl dw_output {
    pub(crate) const fn timeout(deadline_ms: u64) -> dw_output {
        dw_output {
            kind: dw_output_kind::DwOutputTimeout,
            data: std::ptr::null(),
            len: 0,
            deadline_ms,
            conn: 0,
            text: std::ptr::null(),
            text_len: 0,
        }
    }
}

/// A view of text a handle owns: `ptr[0..len]`, UTF-8, followed by a NUL (so `ptr` is also a C
/// string) unless the function says otherwise. Valid until the next call with the same handle
/// (other than `_last_error`); never freed.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dw_str {
    /// The text, NUL-terminated.
    pub ptr: *const c_char,
    /// Its length in bytes, without the NUL.
    pub len: usize,
}

/// An error on its way out: the status, the kind and the message the handle (or the thread)
/// keeps.
#[derive(Debug)]
pub(crate) struct Error {
    pub status: dw_status,
    /// The core error's variant name (`unknown_request`, `too_many_pending`, ...), or the
    /// status's name for errors of the boundary itself.
    pub kind: String,
    pub message: String,
}

/// The name of `status` as `_last_error_kind` reports boundary errors.
fn status_kind(status: dw_status) -> &'static str {
    match status {
        dw_status::Ok => "ok",
        dw_status::NullArgument => "null_argument",
        dw_status::InvalidUtf8 => "invalid_utf8",
        dw_status::InvalidJson => "invalid_json",
        dw_status::InvalidArgument => "invalid_argument",
        dw_status::BufferTooSmall => "buffer_too_small",
        dw_status::Refused => "refused",
        dw_status::Malformed => "malformed",
        dw_status::Panic => "panic",
        dw_status::Poisoned => "poisoned",
    }
}

/// The variant name of a core error serialized externally tagged: a unit variant's string, or
/// the single key of the object. Only a name (`unknown_id`: letters, digits and `_`) is a
/// kind; a plain message (`"the stream is finished"`) serializes as a string too, and is none.
pub(crate) fn kind_of(e: &impl Serialize) -> Option<String> {
    let name = match serde_json::to_value(e).ok()? {
        serde_json::Value::String(s) => s,
        serde_json::Value::Object(o) if o.len() == 1 => o.keys().next().cloned()?,
        _ => return None,
    };
    let is_name = name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    is_name.then_some(name)
}

impl Error {
    pub fn new(status: dw_status, message: impl Display) -> Error {
        Error {
            status,
            kind: status_kind(status).to_owned(),
            message: message.to_string(),
        }
    }

    /// An error with a kind of its own.
    pub fn with_kind(status: dw_status, kind: &str, message: impl Display) -> Error {
        Error {
            status,
            kind: kind.to_owned(),
            message: message.to_string(),
        }
    }

    /// The engine refused the call with a core error (its variant name is the kind).
    pub fn refused(e: impl Display + Serialize) -> Error {
        match kind_of(&e) {
            Some(kind) => Error::with_kind(dw_status::Refused, &kind, e),
            None => Error::new(dw_status::Refused, e),
        }
    }

    pub fn null(what: &str) -> Error {
        Error::new(dw_status::NullArgument, format_args!("{what} is NULL"))
    }

    pub fn json(what: &str, e: impl Display) -> Error {
        Error::new(dw_status::InvalidJson, format_args!("{what}: {e}"))
    }

    /// The engine refused the call with an error that has no serde shape (kind `refused`).
    pub fn refused_text(e: impl Display) -> Error {
        Error::new(dw_status::Refused, e)
    }

    /// Unreadable input with an error that has no serde shape (kind `malformed`).
    pub fn malformed_text(e: impl Display) -> Error {
        Error::new(dw_status::Malformed, e)
    }

    pub fn malformed(e: impl Display + Serialize) -> Error {
        match kind_of(&e) {
            Some(kind) => Error::with_kind(dw_status::Malformed, &kind, e),
            None => Error::new(dw_status::Malformed, e),
        }
    }

    pub fn argument(e: impl Display) -> Error {
        Error::new(dw_status::InvalidArgument, e)
    }
}

pub(crate) type Result<T> = std::result::Result<T, Error>;

/// An engine with what the C side needs around it.
pub(crate) struct Handle<T> {
    pub engine: T,
    poisoned: bool,
    /// The last error message, NUL-terminated (just the NUL when there is none).
    error: Vec<u8>,
    /// The last error's kind, NUL-terminated.
    kind: Vec<u8>,
    /// The bytes of the last `Transmit`, kept so the caller can read them without a copy.
    pub out: Vec<u8>,
    /// Scratch for JSON views (events, stats, ids), NUL-terminated when handed out.
    pub view: Vec<u8>,
}

impl<T> Handle<T> {
    pub fn new(engine: T) -> Handle<T> {
        Handle {
            engine,
            poisoned: false,
            error: vec![0],
            kind: vec![0],
            out: Vec::new(),
            view: Vec::new(),
        }
    }

    fn set_error(&mut self, kind: &str, message: &str) {
        c_text(&mut self.error, message);
        c_text(&mut self.kind, kind);
    }

    /// `value` as JSON text in the view buffer.
    pub fn json_view(&mut self, value: &impl Serialize) -> dw_str {
        json_into(&mut self.view, value);
        self.text_view_of_view()
    }

    /// `text` copied into the view buffer.
    pub fn text_view(&mut self, text: &str) -> dw_str {
        self.view.clear();
        self.view.extend_from_slice(text.as_bytes());
        self.text_view_of_view()
    }

    fn text_view_of_view(&mut self) -> dw_str {
        let len = self.view.len();
        self.view.push(0);
        dw_str {
            ptr: self.view.as_ptr().cast(),
            len,
        }
    }

    /// An `Event` output whose JSON is `value`.
    pub fn event(&mut self, value: &impl Serialize) -> dw_output {
        json_into(&mut self.view, value);
        dw_output {
            kind: dw_output_kind::DwOutputEvent,
            data: self.view.as_ptr(),
            len: self.view.len(),
            deadline_ms: 0,
            conn: 0,
            text: std::ptr::null(),
            text_len: 0,
        }
    }

    /// A `kind` output over `bytes`, kept in the handle without a copy.
    pub fn bytes_out(&mut self, kind: dw_output_kind, bytes: Vec<u8>, conn: u64) -> dw_output {
        self.out = bytes;
        dw_output {
            kind,
            data: if self.out.is_empty() {
                std::ptr::null()
            } else {
                self.out.as_ptr()
            },
            len: self.out.len(),
            deadline_ms: 0,
            conn,
            text: std::ptr::null(),
            text_len: 0,
        }
    }
}

pub(crate) fn json_into(buf: &mut Vec<u8>, value: &impl Serialize) {
    buf.clear();
    // Serializing the core's types into a Vec cannot fail: they have string keys and no
    // fallible Serialize impls.
    serde_json::to_writer(&mut *buf, value).expect("deskwire values serialize to JSON");
}

/// `text` as a C string in `buf` (a NUL inside becomes a space).
fn c_text(buf: &mut Vec<u8>, text: &str) {
    buf.clear();
    buf.extend(text.bytes().map(|b| if b == 0 { b' ' } else { b }));
    buf.push(0);
}

thread_local! {
    static THREAD_ERROR: RefCell<Vec<u8>> = RefCell::new(vec![0]);
    static THREAD_KIND: RefCell<Vec<u8>> = RefCell::new(vec![0]);
    static TEST_PANIC: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn thread_error() -> *const c_char {
    // The buffer lives as long as the thread; the next call without a handle rewrites it.
    THREAD_ERROR.with(|e| e.borrow().as_ptr().cast())
}

pub(crate) fn thread_error_kind() -> *const c_char {
    THREAD_KIND.with(|e| e.borrow().as_ptr().cast())
}

fn set_thread_error(kind: &str, message: &str) {
    THREAD_ERROR.with(|e| c_text(&mut e.borrow_mut(), message));
    THREAD_KIND.with(|e| c_text(&mut e.borrow_mut(), kind));
}

/// A success clears the thread's last error, as a handle's does: a message left from an
/// earlier failure would describe a call that is not the last.
fn clear_thread_error() {
    THREAD_ERROR.with(|e| c_text(&mut e.borrow_mut(), ""));
    THREAD_KIND.with(|e| c_text(&mut e.borrow_mut(), ""));
}

#[cfg(feature = "testing")]
pub(crate) fn arm_test_panic() {
    TEST_PANIC.with(|p| p.set(true));
}

fn maybe_test_panic() {
    if TEST_PANIC.with(|p| p.replace(false)) {
        panic!("dw_testing_panic() asked for a panic");
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic");
    format!("deskwire panicked: {what}")
}

/// The opaque C types: each wraps a [`Handle`] of its engine (see [`as_handle!`]).
pub(crate) trait AsHandle: Sized {
    type Engine;
    fn wrap(handle: Handle<Self::Engine>) -> Self;
    fn handle(&mut self) -> &mut Handle<Self::Engine>;
    fn handle_ref(&self) -> &Handle<Self::Engine>;
}

/// Implements [`AsHandle`] for an opaque struct `pub struct dw_x(Handle<Engine>);` (declared
/// by hand so that cbindgen sees it).
macro_rules! as_handle {
    ($name:ident, $engine:ty) => {
        impl $crate::boundary::AsHandle for $name {
            type Engine = $engine;
            fn wrap(handle: $crate::boundary::Handle<$engine>) -> Self {
                $name(handle)
            }
            fn handle(&mut self) -> &mut $crate::boundary::Handle<$engine> {
                &mut self.0
            }
            fn handle_ref(&self) -> &$crate::boundary::Handle<$engine> {
                &self.0
            }
        }
    };
}
pub(crate) use as_handle;

/// Runs `f` on the handle behind `ptr` inside the panic boundary: `NULL` and a poisoned handle
/// are refused, an error is kept as the handle's last error, a panic poisons the handle.
pub(crate) fn with<O: AsHandle>(
    ptr: *mut O,
    f: impl FnOnce(&mut Handle<O::Engine>) -> Result<()>,
) -> dw_status {
    if ptr.is_null() {
        set_thread_error("null_argument", "the handle is NULL");
        return dw_status::NullArgument;
    }
    // SAFETY: the caller passes a pointer from this library's `_new` that it has not freed
    // (the documented contract); NULL was refused above. No other reference exists while the
    // call runs, since a handle is used by one thread at a time (documented).
    let handle = unsafe { &mut *ptr }.handle();
    if handle.poisoned {
        // The message stays the panic's; the kind says why this call was refused.
        c_text(&mut handle.kind, "poisoned");
        return dw_status::Poisoned;
    }
    let result = catch_unwind(AssertUnwindSafe(|| {
        maybe_test_panic();
        f(&mut *handle)
    }));
    match result {
        Ok(Ok(())) => {
            handle.set_error("", "");
            dw_status::Ok
        }
        Ok(Err(e)) => {
            handle.set_error(&e.kind, &e.message);
            e.status
        }
        Err(payload) => {
            handle.poisoned = true;
            handle.set_error("panic", &panic_message(payload.as_ref()));
            dw_status::Panic
        }
    }
}

/// An engine whose connection can end (the OA1 desk and remote, after `_quit` or EOF).
pub(crate) trait Closable {
    /// The engine's `closed` error once its connection has ended.
    fn check_open(&self) -> Result<()>;
}

/// [`with`] for the calls that start or answer work on a connection: once it has ended they
/// are refused (`DW_STATUS_REFUSED`, kind `closed`) instead of queueing what can never leave.
/// Draining (`_poll_output`), input, state and stats go on through [`with`], so the host can
/// still send the `QUIT` and see the end.
pub(crate) fn with_open<O: AsHandle>(
    ptr: *mut O,
    f: impl FnOnce(&mut Handle<O::Engine>) -> Result<()>,
) -> dw_status
where
    O::Engine: Closable,
{
    with(ptr, |h| {
        h.engine.check_open()?;
        f(h)
    })
}

/// Runs `f`, which has no handle, inside the panic boundary; its outcome goes to
/// `dw_last_error()` (`""` after a success).
pub(crate) fn call(f: impl FnOnce() -> Result<()>) -> dw_status {
    match catch_unwind(AssertUnwindSafe(|| {
        maybe_test_panic();
        f()
    })) {
        Ok(Ok(())) => {
            clear_thread_error();
            dw_status::Ok
        }
        Ok(Err(e)) => {
            set_thread_error(&e.kind, &e.message);
            e.status
        }
        Err(payload) => {
            set_thread_error("panic", &panic_message(payload.as_ref()));
            dw_status::Panic
        }
    }
}

/// The handle's last error as a C string (`""` when the last call succeeded). A `NULL` handle
/// gives the thread's (`dw_last_error()`), where a call made with a `NULL` handle left its
/// error: `fprintf(stderr, "%s\n", dw_desk_last_error(desk))` says why whether or not `desk`
/// was made.
pub(crate) fn last_error<O: AsHandle>(ptr: *const O) -> *const c_char {
    // SAFETY: a live handle from `_new` or NULL (documented).
    match unsafe { ptr.as_ref() } {
        Some(h) => h.handle_ref().error.as_ptr().cast(),
        None => thread_error(),
    }
}

/// The kind of the handle's last error (`""` after a success); a `NULL` handle gives the
/// thread's (`dw_last_error_kind()`).
pub(crate) fn last_error_kind<O: AsHandle>(ptr: *const O) -> *const c_char {
    // SAFETY: a live handle from `_new` or NULL (documented).
    match unsafe { ptr.as_ref() } {
        Some(h) => h.handle_ref().kind.as_ptr().cast(),
        None => thread_error_kind(),
    }
}

/// Boxes `engine` into a handle and writes it to `out`.
pub(crate) fn new_handle<O: AsHandle>(
    out: *mut *mut O,
    f: impl FnOnce() -> Result<O::Engine>,
) -> dw_status {
    call(|| {
        let out = out_ptr(out, "out")?;
        let engine = f()?;
        write(out, Box::into_raw(Box::new(O::wrap(Handle::new(engine)))));
        Ok(())
    })
}

/// Frees a handle; `NULL` is a no-op. A panic in a destructor is contained (the memory may
/// then leak; the caller survives).
///
/// Use after free and double free are documented as undefined (the header's preamble), not
/// detected, as rustls-ffi does. A cheap check (a tag in the handle, cleared here) would read
/// freed memory, itself undefined, and pass whenever the allocator has reused the block for a
/// new handle: it would turn a crash valgrind or ASan pins down into a silent wrong answer.
pub(crate) fn free_handle<O>(ptr: *mut O) {
    if ptr.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: a pointer from `_new`, freed once (documented).
        drop(unsafe { Box::from_raw(ptr) });
    }));
}

// ---- arguments ----

/// A required out-pointer, checked before any work so outputs are written only on success.
pub(crate) fn out_ptr<T>(ptr: *mut T, what: &str) -> Result<*mut T> {
    if ptr.is_null() {
        Err(Error::null(what))
    } else {
        Ok(ptr)
    }
}

/// Writes `value` through an out-pointer checked by [`out_ptr`].
pub(crate) fn write<T>(ptr: *mut T, value: T) {
    // SAFETY: checked non-NULL by `out_ptr`; the caller gives a writable location (documented).
    unsafe { ptr.write(value) }
}

/// A NUL-terminated UTF-8 string argument.
pub(crate) fn str_arg<'a>(ptr: *const c_char, what: &str) -> Result<&'a str> {
    if ptr.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: non-NULL and NUL-terminated (documented); only read during the call.
    let bytes = unsafe { CStr::from_ptr(ptr) }.to_bytes();
    std::str::from_utf8(bytes).map_err(|e| {
        Error::new(
            dw_status::InvalidUtf8,
            format_args!("{what} is not UTF-8: {e}"),
        )
    })
}

/// A string argument that may be `NULL` (for "none").
pub(crate) fn opt_str_arg<'a>(ptr: *const c_char, what: &str) -> Result<Option<&'a str>> {
    if ptr.is_null() {
        Ok(None)
    } else {
        str_arg(ptr, what).map(Some)
    }
}

/// A buffer argument `ptr[0..len]`, the one place C buffers become slices; `NULL` is allowed
/// when `len` is 0. What `slice::from_raw_parts` requires and a C caller can get wrong without
/// a bad pointer is checked: a size over `isize::MAX` bytes, a range that wraps around the
/// address space, a misaligned pointer. Each is `DW_STATUS_INVALID_ARGUMENT`, never a slice.
pub(crate) fn slice_arg<'a, T>(ptr: *const T, len: usize, what: &str) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::null(what));
    }
    let size = std::mem::size_of::<T>();
    let fits = len
        .checked_mul(size)
        .filter(|&bytes| bytes <= isize::MAX as usize)
        .is_some_and(|bytes| (ptr as usize).checked_add(bytes).is_some());
    if !fits {
        return Err(Error::argument(format_args!(
            "{what}: a buffer of {len} elements at {ptr:p} cannot exist (over PTRDIFF_MAX \
             bytes, or past the end of the address space): pass its real length"
        )));
    }
    if !ptr.is_aligned() {
        return Err(Error::argument(format_args!(
            "{what}: the pointer is not aligned for its type"
        )));
    }
    // SAFETY: `ptr[0..len]` is readable for the call (documented); NULL, sizes over
    // isize::MAX, wrapping ranges and misalignment are refused above.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A byte buffer argument ([`slice_arg`]).
pub(crate) fn bytes_arg<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8]> {
    slice_arg(ptr, len, what)
}

/// A UTF-8 text argument given as bytes and length (it may hold NUL).
pub(crate) fn text_arg<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a str> {
    let bytes = bytes_arg(ptr, len, what)?;
    std::str::from_utf8(bytes).map_err(|e| {
        Error::new(
            dw_status::InvalidUtf8,
            format_args!("{what} is not UTF-8: {e}"),
        )
    })
}

/// `DW_ENTROPY_LEN` bytes of entropy behind a pointer.
pub(crate) fn entropy_arg(ptr: *const u8) -> Result<deskwire::entropy::Entropy> {
    let bytes = bytes_arg(ptr, deskwire::entropy::ENTROPY_LEN, "entropy")?;
    Ok(bytes.try_into().expect("ENTROPY_LEN bytes"))
}

/// A JSON argument read into `T` (the core's serde shapes).
pub(crate) fn json_arg<T: DeserializeOwned>(ptr: *const c_char, what: &str) -> Result<T> {
    let text = str_arg(ptr, what)?;
    serde_json::from_str(text).map_err(|e| Error::json(what, e))
}

/// A JSON argument that must be an object (a config, a record): serde alone would also read a
/// struct from an array, positionally, which no documented shape is.
pub(crate) fn object_arg<T: DeserializeOwned>(ptr: *const c_char, what: &str) -> Result<T> {
    let text = str_arg(ptr, what)?;
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::json(what, e))?;
    if !value.is_object() {
        return Err(Error::json(what, "expected a JSON object"));
    }
    T::deserialize(value).map_err(|e| Error::json(what, e))
}

/// [`object_arg`] that may be `NULL` (for the defaults).
pub(crate) fn opt_object_arg<T: DeserializeOwned>(
    ptr: *const c_char,
    what: &str,
) -> Result<Option<T>> {
    if ptr.is_null() {
        Ok(None)
    } else {
        object_arg(ptr, what).map(Some)
    }
}

/// A JSON argument that may be `NULL` (for the defaults / none).
pub(crate) fn opt_json_arg<T: DeserializeOwned>(
    ptr: *const c_char,
    what: &str,
) -> Result<Option<T>> {
    if ptr.is_null() {
        Ok(None)
    } else {
        json_arg(ptr, what).map(Some)
    }
}

/// Writes `text` and a NUL to the caller's buffer `out[0..cap]`, and its length (without the
/// NUL) to `*out_len`. When `cap` is too small only the length is written and the call reports
/// `DW_STATUS_BUFFER_TOO_SMALL`; `out` may be `NULL` with `cap` 0 to ask for the length.
pub(crate) fn to_buffer(
    text: &[u8],
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> Result<()> {
    let out_len = out_ptr(out_len, "out_len")?;
    if out.is_null() && cap > 0 {
        return Err(Error::null("out"));
    }
    write(out_len, text.len());
    if cap <= text.len() {
        return Err(Error::new(
            dw_status::BufferTooSmall,
            format_args!(
                "the result needs {} bytes and a NUL; the buffer has {cap}",
                text.len()
            ),
        ));
    }
    // SAFETY: `out[0..cap]` is writable (documented) and cap > text.len().
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), out.cast::<u8>(), text.len());
        out.add(text.len()).write(0);
    }
    Ok(())
}

/// Checks the buffer arguments of a function that writes with [`to_buffer`], before any work.
pub(crate) fn check_buffer(out: *mut c_char, cap: usize, out_len: *mut usize) -> Result<()> {
    out_ptr(out_len, "out_len")?;
    if out.is_null() && cap > 0 {
        return Err(Error::null("out"));
    }
    Ok(())
}

/// `value` as JSON in the caller's buffer ([`to_buffer`]).
pub(crate) fn json_to_buffer(
    value: &impl Serialize,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> Result<()> {
    let mut text = Vec::new();
    json_into(&mut text, value);
    to_buffer(&text, out, cap, out_len)
}
