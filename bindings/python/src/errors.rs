//! The one place where core errors become Python exceptions (`deskwire._errors`).
//!
//! The core splits misuse by the host (`LocalError`) from faults of the peer (`RemoteError`,
//! parse errors, timeouts); the Python tree keeps that split: `LocalError`, `ClosedError`,
//! `RemoteError`, `ProtocolError`, `RequestTimeout`, all under `DeskwireError`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// Which Python exception class an error maps to.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// Misuse by the caller.
    Local,
    /// Use after close.
    Closed,
    /// An error answer from the peer.
    Remote,
    /// Unreadable input from the peer.
    Protocol,
    /// No answer in time.
    Timeout,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Local => "LocalError",
            Kind::Closed => "ClosedError",
            Kind::Remote => "RemoteError",
            Kind::Protocol => "ProtocolError",
            Kind::Timeout => "RequestTimeout",
        }
    }
}

static CLASSES: PyOnceLock<[Py<PyType>; 5]> = PyOnceLock::new();

fn class(py: Python<'_>, kind: Kind) -> PyResult<Bound<'_, PyType>> {
    let classes = CLASSES.get_or_try_init(py, || -> PyResult<_> {
        let module = py.import("deskwire._errors")?;
        let get = |k: Kind| -> PyResult<Py<PyType>> {
            Ok(module
                .getattr(k.class_name())?
                .cast_into::<PyType>()?
                .unbind())
        };
        Ok([
            get(Kind::Local)?,
            get(Kind::Closed)?,
            get(Kind::Remote)?,
            get(Kind::Protocol)?,
            get(Kind::Timeout)?,
        ])
    })?;
    Ok(classes[kind as usize].bind(py).clone())
}

/// A deskwire exception of `kind` with the core's `code` and a message.
pub fn error(kind: Kind, code: &str, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| match class(py, kind) {
        Ok(cls) => match cls.call1((code, message)) {
            Ok(instance) => PyErr::from_value(instance),
            Err(e) => e,
        },
        Err(e) => e,
    })
}

/// Misuse by the caller.
pub fn local(code: &str, message: impl Into<String>) -> PyErr {
    error(Kind::Local, code, message)
}

/// Unreadable input from the peer.
pub fn protocol(code: &str, message: impl Into<String>) -> PyErr {
    error(Kind::Protocol, code, message)
}

/// The engine was closed.
pub fn closed(what: &str) -> PyErr {
    error(Kind::Closed, "closed", format!("the {what} is closed"))
}

/// Core error enums that know their code name.
pub trait Coded: std::fmt::Display {
    /// The core's snake_case name of this error (what the vectors call it).
    fn code(&self) -> &'static str;
    /// Which Python class it maps to.
    fn kind(&self) -> Kind {
        Kind::Local
    }
}

/// Converts any coded core error into its exception.
pub fn raise<E: Coded>(e: E) -> PyErr {
    error(e.kind(), e.code(), e.to_string())
}

impl Coded for deskwire::oa1::LocalError {
    fn code(&self) -> &'static str {
        deskwire::oa1::LocalError::code(self)
    }
    fn kind(&self) -> Kind {
        match self {
            deskwire::oa1::LocalError::Closed => Kind::Closed,
            _ => Kind::Local,
        }
    }
}

/// A core error whose serde shape is externally tagged (`"no_token"`, `{"unknown_job": ...}`):
/// the tag is its code.
pub fn tagged<E: serde::Serialize + std::fmt::Display>(kind: Kind, e: &E) -> PyErr {
    let code = match serde_json::to_value(e) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(serde_json::Value::Object(map)) if map.len() == 1 => {
            map.keys().next().cloned().unwrap_or_default()
        }
        _ => "error".to_owned(),
    };
    error(kind, &code, e.to_string())
}

// The core's error types, each with its code and Python class.

impl Coded for deskwire::irc::SessionError {
    fn code(&self) -> &'static str {
        match self {
            deskwire::irc::SessionError::Closed => "closed",
            deskwire::irc::SessionError::NotRegistered => "not_registered",
            deskwire::irc::SessionError::InvalidNick(_) => "invalid_nick",
            deskwire::irc::SessionError::InvalidUser(_) => "invalid_user",
            deskwire::irc::SessionError::InvalidChannel(_) => "invalid_channel",
            deskwire::irc::SessionError::InvalidTarget(_) => "invalid_target",
            deskwire::irc::SessionError::ForbiddenByte => "forbidden_byte",
            deskwire::irc::SessionError::EmptyText => "empty_text",
            deskwire::irc::SessionError::TooLong { .. } => "too_long",
            _ => "session_error",
        }
    }
    fn kind(&self) -> Kind {
        match self {
            deskwire::irc::SessionError::Closed => Kind::Closed,
            _ => Kind::Local,
        }
    }
}

impl Coded for deskwire::jsonrpc::LocalError {
    fn code(&self) -> &'static str {
        match self {
            deskwire::jsonrpc::LocalError::DuplicateId(_) => "duplicate_id",
            deskwire::jsonrpc::LocalError::TooManyPending(_) => "too_many_pending",
            deskwire::jsonrpc::LocalError::UnknownId(_) => "unknown_id",
            deskwire::jsonrpc::LocalError::Write(
                deskwire::jsonrpc::dialect::WriteError::Unsupported { .. },
            ) => "unsupported",
            deskwire::jsonrpc::LocalError::Write(_) => "invalid_value",
            _ => "local_error",
        }
    }
}

impl Coded for deskwire::tools::ToolboxError {
    fn code(&self) -> &'static str {
        match self {
            deskwire::tools::ToolboxError::TooManyAgents(_) => "too_many_agents",
            deskwire::tools::ToolboxError::Registry(_) => "registry",
            deskwire::tools::ToolboxError::Approval(_) => "approval",
            _ => "toolbox_error",
        }
    }
}

impl Coded for deskwire::tools::providers::ParseError {
    fn code(&self) -> &'static str {
        match self {
            deskwire::tools::providers::ParseError::NotJson(_) => "not_json",
            deskwire::tools::providers::ParseError::Shape(_) => "shape",
            deskwire::tools::providers::ParseError::Provider(_) => "provider",
            deskwire::tools::providers::ParseError::TooLarge(_) => "too_large",
            _ => "parse_error",
        }
    }
    fn kind(&self) -> Kind {
        match self {
            deskwire::tools::providers::ParseError::Provider(_) => Kind::Remote,
            _ => Kind::Protocol,
        }
    }
}

impl Coded for deskwire::tools::builtin::RouteError {
    fn code(&self) -> &'static str {
        match self {
            deskwire::tools::builtin::RouteError::NotRexdTool(_) => "not_rexd_tool",
            _ => "invalid_args",
        }
    }
    fn kind(&self) -> Kind {
        match self {
            // The host routed a tool that is not REXD's.
            deskwire::tools::builtin::RouteError::NotRexdTool(_) => Kind::Local,
            // The model's arguments: the host answers it with an error result.
            _ => Kind::Protocol,
        }
    }
}

impl Coded for deskwire::rexd::RexdError {
    fn code(&self) -> &'static str {
        match self {
            deskwire::rexd::RexdError::UnknownMethod(_) => "unknown_method",
            deskwire::rexd::RexdError::InvalidParams { .. } => "invalid_params",
            deskwire::rexd::RexdError::Parse(_) => "not_json",
            _ => "invalid_message",
        }
    }
    fn kind(&self) -> Kind {
        Kind::Protocol
    }
}

impl Coded for deskwire::sim::RelayError {
    fn code(&self) -> &'static str {
        match self {
            deskwire::sim::RelayError::TooLong(_) => "too_long",
            deskwire::sim::RelayError::Invalid(_) => "invalid_line",
            deskwire::sim::RelayError::NotAMember(_) => "not_a_member",
            _ => "relay_error",
        }
    }
}
