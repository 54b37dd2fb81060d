//! Messages of the JSON protocols checked by their Rust types (`deskwire::schemas`): a host
//! that builds a REXD, sidecar, gateway or mobile message by hand reads it back the way a
//! deskwire peer reads it, in canonical form.

use crate::error::{Result, api};

/// Reads `json` as a value of `$defs/<def>` of `protocol`'s schema (`rexd`, `sidecar`,
/// `gateway`, `mobile`) through the Rust types, and writes it back canonical. Throws
/// `InvalidInput` when deskwire would refuse it.
#[uniffi::export]
pub fn read_schema_value(protocol: String, def: String, json: String) -> Result<String> {
    let value: serde_json::Value = api(|| serde_json::from_str::<serde_json::Value>(&json))?;
    api(|| deskwire::schemas::read(&protocol, &def, &value).map(|v| v.to_string()))
}
