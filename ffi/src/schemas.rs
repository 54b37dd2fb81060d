//! Values of the JSON Schemas in `core/schemas/` read through the Rust types
//! (`deskwire::schemas::read`): a host checks a message it built by hand and sees it as
//! deskwire writes it.

use std::ffi::c_char;

use deskwire::schemas::{self, SchemaError};
use serde_json::Value;

use crate::boundary::{self, Error, dw_status};

/// Reads `json` as `$defs/<def>` of `protocol`'s schema (`"rexd"`, `"sidecar"`, `"gateway"`,
/// `"mobile"`) through the Rust type a peer would read it into, and writes it back in
/// canonical form (defaults filled in, unknown members dropped where the protocol ignores
/// them) to the caller's buffer `out[0..cap]` (NUL-terminated; the length without the NUL in
/// `*out_len`; on `DW_STATUS_BUFFER_TOO_SMALL` only `*out_len`, the length needed, is written).
/// `DW_STATUS_INVALID_JSON` when `json` is not JSON or not a valid `def`;
/// `DW_STATUS_INVALID_ARGUMENT` for an unknown protocol or def.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_schema_read(
    protocol: *const c_char,
    def: *const c_char,
    json: *const c_char,
    out: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> dw_status {
    boundary::call(|| {
        boundary::check_buffer(out, cap, out_len)?;
        let protocol = boundary::str_arg(protocol, "protocol")?;
        let def = boundary::str_arg(def, "def")?;
        let value: Value = boundary::json_arg(json, "json")?;
        let written = schemas::read(protocol, def, &value).map_err(|e| match e {
            SchemaError::Invalid(why) => Error::with_kind(dw_status::InvalidJson, "invalid", why),
            other => Error::argument(other),
        })?;
        boundary::json_to_buffer(&written, out, cap, out_len)
    })
}
