//! The native module `deskwire._deskwire` behind the Python package `deskwire`.
//!
//! Each Rust module wraps one core module and registers its names in a submodule of
//! `_deskwire` (`_deskwire.oa1`, ...); the Python package's modules (`deskwire.oa1`, ...)
//! re-export them next to the event dataclasses. This crate converts types and nothing else:
//! protocol rules live in `deskwire` (core).

use pyo3::prelude::*;

mod convert;
mod errors;
mod gateway;
mod irc;
mod jsonrpc;
mod mobile;
mod multi;
mod oa1;
mod rexd;
mod sim;
mod slot;
mod tools;

fn submodule(
    parent: &Bound<'_, PyModule>,
    name: &str,
    fill: fn(&Bound<'_, PyModule>) -> PyResult<()>,
) -> PyResult<()> {
    let py = parent.py();
    let m = PyModule::new(py, name)?;
    fill(&m)?;
    parent.add_submodule(&m)?;
    // Registered under its dotted name so `from deskwire._deskwire.oa1 import Client` works
    // (an extension module's submodules are otherwise only attributes).
    py.import("sys")?
        .getattr("modules")?
        .set_item(format!("deskwire._deskwire.{name}"), &m)?;
    Ok(())
}

/// Reads `value` as `$defs/<name>` of `protocol`'s JSON Schema (`rexd`, `sidecar`, `gateway`,
/// `mobile`) through the core's Rust types, the way a peer reads it, and gives it back in
/// canonical form. Raises `ProtocolError` (code `invalid`) when it does not fit the def and
/// `LocalError` (code `unknown_def`) for a def with no type.
#[pyfunction]
fn read_def<'py>(
    py: Python<'py>,
    protocol: &str,
    name: &str,
    value: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let value = convert::value_of("value", value)?;
    match deskwire::schemas::read(protocol, name, &value) {
        Ok(back) => convert::py_of_value(py, &back),
        Err(deskwire::schemas::SchemaError::Invalid(reason)) => {
            Err(errors::protocol("invalid", reason))
        }
        Err(other) => Err(errors::local("unknown_def", other.to_string())),
    }
}

/// The text of the JSON Schema document `name`: a file name of `core/schemas/` (a leading
/// `core/schemas/` is accepted) or a protocol (`rexd`, `sidecar`, `gateway`, `mobile`) for the
/// document its messages are written against. `LocalError` (code `unknown_schema`) otherwise.
#[pyfunction]
fn schema_text(name: &str) -> PyResult<&'static str> {
    deskwire::schemas::protocol_schema(name)
        .or_else(|| deskwire::schemas::schema(name))
        .ok_or_else(|| {
            let files: Vec<&str> = deskwire::schemas::SCHEMAS.iter().map(|(n, _)| *n).collect();
            errors::local(
                "unknown_schema",
                format!(
                    "no JSON Schema {name:?}: a protocol (rexd, sidecar, gateway, mobile) or a \
                     file name ({})",
                    files.join(", ")
                ),
            )
        })
}

/// The file names of the JSON Schema documents the package carries.
#[pyfunction]
fn schema_names() -> Vec<&'static str> {
    deskwire::schemas::SCHEMAS
        .iter()
        .map(|(name, _)| *name)
        .collect()
}

/// A call that does nothing, to measure the cost of crossing into Rust (benchmarks).
#[pyfunction]
fn noop() {}

#[pymodule]
fn _deskwire(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<convert::Transmit>()?;
    m.add_class::<convert::Timeout>()?;
    m.add_function(wrap_pyfunction!(noop, m)?)?;
    m.add_function(wrap_pyfunction!(read_def, m)?)?;
    m.add_function(wrap_pyfunction!(schema_text, m)?)?;
    m.add_function(wrap_pyfunction!(schema_names, m)?)?;
    submodule(m, "oa1", oa1::register)?;
    submodule(m, "irc", irc::register)?;
    submodule(m, "sim", sim::register)?;
    submodule(m, "jsonrpc", jsonrpc::register)?;
    submodule(m, "tools", tools::register)?;
    submodule(m, "rexd", rexd::register)?;
    submodule(m, "gateway", gateway::register)?;
    submodule(m, "mobile", mobile::register)?;
    Ok(())
}
