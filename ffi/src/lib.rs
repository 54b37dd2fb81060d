//! The C ABI of deskwire: `include/deskwire.h`, generated from this crate by cbindgen.
//!
//! The crate converts types and nothing else: every protocol rule lives in `deskwire` (the core
//! crate). Its conventions are rustls-ffi's, written down once in the header's preamble
//! (`cbindgen.toml`): a [`dw_status`] from every fallible call, outputs written only on
//! success, `_new` / `_free` pairs with `NULL` a no-op, a last-error message per handle, a panic
//! boundary around every body that poisons the handle it hit.
//!
//! Modules follow the core's: [`oa1`] (the desk and remote engines over raw IRC bytes, the bare
//! client and server, the codec, `RemoteBash`), [`multi`] (many desks on one IRC connection,
//! with channel chat and membership), [`irc`] (the session helper, the line parser),
//! [`jsonrpc`] (the peer in every dialect), [`gateway`], [`mobile`], [`tools`], and [`schemas`]
//! (reading a value of a protocol's JSON Schema through the Rust types).
#![allow(non_camel_case_types)]
// Every `extern "C"` function checks its pointers before using them and says in its doc comment
// what it expects; clippy cannot see that, so the lint is off crate-wide.
#![allow(clippy::missing_safety_doc)]

mod boundary;
pub mod gateway;
pub mod irc;
pub mod jsonrpc;
pub mod mobile;
pub mod multi;
pub mod oa1;
pub mod remote_bash;
pub mod schemas;
pub mod sim;
pub mod tools;

use std::ffi::c_char;

pub use boundary::{dw_output, dw_output_kind, dw_status, dw_str};

/// The major version of the header; `dw_version()` gives the library's.
pub const DW_VERSION_MAJOR: u32 = 0;
/// The minor version of the header.
pub const DW_VERSION_MINOR: u32 = 1;
/// The patch version of the header.
pub const DW_VERSION_PATCH: u32 = 0;

/// Bytes of entropy the engines that make secrets take (`dw_mobile_server_new`,
/// `dw_gateway_new`): read them from the operating system's secure random source.
pub const DW_ENTROPY_LEN: usize = 32;

/// The library's version, `"MAJOR.MINOR.PATCH"`, a static string (never freed). Compare it with
/// `DW_VERSION_STRING` to catch a header that does not match the library.
#[unsafe(no_mangle)]
pub extern "C" fn dw_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// A short description of `status`, a static string (never freed). An unknown value gives
/// `"unknown status"`.
#[unsafe(no_mangle)]
pub extern "C" fn dw_status_str(status: u32) -> *const c_char {
    boundary::status_str(status).as_ptr().cast()
}

/// The message of the last call on this thread that has no handle to keep it (the `_new`
/// functions, and functions that take no handle) when it failed, or `""` when it succeeded. A
/// static-lifetime view: valid until the next such call on this thread; never freed.
#[unsafe(no_mangle)]
pub extern "C" fn dw_last_error() -> *const c_char {
    boundary::thread_error()
}

/// The kind of the last call on this thread without a handle when it failed (see
/// `dw_last_error()`): the core error's name (`"unknown_request"`, ...) or the status's
/// (`"invalid_json"`, ...), or `""` after a success. Same lifetime as `dw_last_error()`.
#[unsafe(no_mangle)]
pub extern "C" fn dw_last_error_kind() -> *const c_char {
    boundary::thread_error_kind()
}

/// Makes the next call into the library on this thread panic inside its boundary, so tests can
/// check that a panic becomes `DW_STATUS_PANIC` and poisons the handle. Only in builds with the
/// `testing` feature; not in the header.
#[cfg(feature = "testing")]
#[unsafe(no_mangle)]
pub extern "C" fn dw_testing_panic() {
    boundary::arm_test_panic();
}

#[cfg(test)]
mod tests {
    /// The header's version macros are literals (cbindgen cannot evaluate `env!`): they must
    /// follow the crate's version.
    #[test]
    fn version_macros_follow_the_crate() {
        let v = env!("CARGO_PKG_VERSION");
        // DW_VERSION_STRING: cbindgen 0.29 emits no string constants, so cbindgen.toml has it.
        let toml = include_str!("../cbindgen.toml");
        assert!(toml.contains(&format!("#define DW_VERSION_STRING \"{v}\"")));
        let parts: Vec<u32> = v.split('.').map(|p| p.parse().unwrap()).collect();
        assert_eq!(
            parts,
            [
                super::DW_VERSION_MAJOR,
                super::DW_VERSION_MINOR,
                super::DW_VERSION_PATCH
            ]
        );
    }
}
