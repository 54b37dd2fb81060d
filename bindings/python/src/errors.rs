//! The one place where core errors become Python exceptions (`deskwire._errors`).
//!
//! The core splits misuse by the host (`LocalError`) from faults of the peer (`RemoteError`,
//! parse errors, timeouts, the link's failures); the Python tree keeps that split: `LocalError`,
//! `ClosedError`, `RemoteError`, `ProtocolError`, `RequestTimeout` and the OA1 failures
//! (`NotReadyError`, `JoinFailedError`, ...), all under `DeskwireError`.

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
    /// The connection did not become ready in time (also a `TimeoutError`).
    NotReady,
    /// The server refused the channel.
    JoinFailed,
    /// The server refused every nick.
    NickRefused,
    /// Kicked from the channel.
    Kicked,
    /// The remote left.
    PeerLeft,
    /// The link ended.
    Disconnected,
    /// The required SASL login failed (the link ended).
    LoginFailed,
    /// A connection of many channels does not carry this one.
    UnknownChannel,
    /// Chat text refused, for a reason newer than this binding.
    Chat,
    /// Chat text with nothing to send.
    EmptyText,
    /// Chat text holding NUL, CR or LF.
    ForbiddenByte,
    /// Chat text starting with `OA1 ` (reserved for tool frames).
    ReservedPrefix,
    /// Too much chat text queued for the channel.
    QueueFull,
}

/// Every kind, in the order of `CLASSES`.
const KINDS: [Kind; 18] = [
    Kind::Local,
    Kind::Closed,
    Kind::Remote,
    Kind::Protocol,
    Kind::Timeout,
    Kind::NotReady,
    Kind::JoinFailed,
    Kind::NickRefused,
    Kind::Kicked,
    Kind::PeerLeft,
    Kind::Disconnected,
    Kind::LoginFailed,
    Kind::UnknownChannel,
    Kind::Chat,
    Kind::EmptyText,
    Kind::ForbiddenByte,
    Kind::ReservedPrefix,
    Kind::QueueFull,
];

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Local => "LocalError",
            Kind::Closed => "ClosedError",
            Kind::Remote => "RemoteError",
            Kind::Protocol => "ProtocolError",
            Kind::Timeout => "RequestTimeout",
            Kind::NotReady => "NotReadyError",
            Kind::JoinFailed => "JoinFailedError",
            Kind::NickRefused => "NickRefusedError",
            Kind::Kicked => "KickedError",
            Kind::PeerLeft => "PeerLeftError",
            Kind::Disconnected => "DisconnectedError",
            Kind::LoginFailed => "LoginFailedError",
            Kind::UnknownChannel => "UnknownChannelError",
            Kind::Chat => "ChatError",
            Kind::EmptyText => "EmptyTextError",
            Kind::ForbiddenByte => "ForbiddenByteError",
            Kind::ReservedPrefix => "ReservedPrefixError",
            Kind::QueueFull => "QueueFullError",
        }
    }
}

static CLASSES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

fn class(py: Python<'_>, kind: Kind) -> PyResult<Bound<'_, PyType>> {
    let classes = CLASSES.get_or_try_init(py, || -> PyResult<_> {
        let module = py.import("deskwire._errors")?;
        let get = |k: Kind| -> PyResult<Py<PyType>> {
            Ok(module
                .getattr(k.class_name())?
                .cast_into::<PyType>()?
                .unbind())
        };
        KINDS.iter().map(|&k| get(k)).collect::<PyResult<Vec<_>>>()
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
            deskwire::oa1::LocalError::UnknownChannel(_) => Kind::UnknownChannel,
            _ => Kind::Local,
        }
    }
}

impl Coded for deskwire::oa1::chat::ChatError {
    fn code(&self) -> &'static str {
        use deskwire::oa1::chat::ChatError;
        match self {
            ChatError::UnknownChannel(_) => "unknown_channel",
            ChatError::Empty => "empty_text",
            ChatError::ForbiddenByte => "forbidden_byte",
            ChatError::ReservedPrefix(_) => "reserved_prefix",
            ChatError::QueueFull { .. } => "queue_full",
            ChatError::Closed => "closed",
            _ => "chat_refused",
        }
    }
    fn kind(&self) -> Kind {
        use deskwire::oa1::chat::ChatError;
        match self {
            ChatError::UnknownChannel(_) => Kind::UnknownChannel,
            ChatError::Empty => Kind::EmptyText,
            ChatError::ForbiddenByte => Kind::ForbiddenByte,
            ChatError::ReservedPrefix(_) => Kind::ReservedPrefix,
            ChatError::QueueFull { .. } => Kind::QueueFull,
            ChatError::Closed => Kind::Closed,
            _ => Kind::Chat,
        }
    }
}

/// The exception for an OA1 request that ended without an answer, chosen from the core's typed
/// failure (never from its code: a remote may answer `ERR timeout: ...` too, and that is its
/// own error). `oa1.Failed.exception()` and the `deskwire.aio` drivers raise it.
pub fn failure(failure: &deskwire::oa1::Failure) -> PyErr {
    use deskwire::oa1::Failure;
    let kind = match failure {
        Failure::Timeout { .. } => Kind::Timeout,
        Failure::NotReady { .. } => Kind::NotReady,
        Failure::JoinFailed { .. } => Kind::JoinFailed,
        Failure::Kicked { .. } => Kind::Kicked,
        Failure::PeerLeft { .. } => Kind::PeerLeft,
        Failure::Disconnected { .. } => Kind::Disconnected,
        Failure::Malformed { .. } => Kind::Protocol,
        // The remote's own ERR, a missing chunk, and failures newer than this binding.
        _ => Kind::Remote,
    };
    error(kind, failure.code(), failure.message())
}

/// The exception an IRC session event means for whoever waits on the connection: a refused
/// join, every nick refused, a kick, the end of the link; `None` for the others. The driver's
/// `connect` raises it when it comes before the connection is ready.
pub fn session_error(event: &deskwire::irc::SessionEvent) -> Option<PyErr> {
    use deskwire::irc::SessionEvent;
    Some(match event {
        SessionEvent::JoinFailed {
            channel,
            numeric,
            text,
        } => error(
            Kind::JoinFailed,
            "join_failed",
            format!("the server refused to let us into {channel}: {numeric} {text}"),
        ),
        SessionEvent::NickRefused {
            nick,
            numeric,
            text,
            next: None,
        } => error(
            Kind::NickRefused,
            "nick_refused",
            format!("the server refused the nick {nick} and every fallback: {numeric} {text}"),
        ),
        SessionEvent::Kicked {
            channel,
            by,
            reason,
        } => error(
            Kind::Kicked,
            "kicked",
            format!("kicked from {channel} by {by}: {reason}"),
        ),
        SessionEvent::Disconnected {
            reason: deskwire::irc::DisconnectReason::LoginFailed { message },
        } => error(Kind::LoginFailed, "login_failed", message.clone()),
        SessionEvent::Disconnected { reason } => error(
            Kind::Disconnected,
            "disconnected",
            format!("the IRC connection ended: {reason}"),
        ),
        _ => return None,
    })
}

/// Hangs `error` on an event dataclass (frozen, so through `object.__setattr__`) for its
/// `exception()` method: the class was chosen here, from the core's types.
pub fn attach<'py>(event: &Bound<'py, PyAny>, error: PyErr) -> PyResult<()> {
    let py = event.py();
    let object = py.import("builtins")?.getattr("object")?;
    object.call_method1("__setattr__", (event, "_exception", error.into_value(py)))?;
    Ok(())
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
            deskwire::irc::SessionError::ChannelTooLong { .. } => "channel_too_long",
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
            deskwire::tools::providers::ParseError::Incomplete(_) => "incomplete",
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
