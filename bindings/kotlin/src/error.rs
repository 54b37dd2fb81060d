//! The one public error, and the one place the core's errors become it.
//!
//! The core keeps misuse by the host (each engine's `LocalError`) apart from faults of the
//! peer. Faults of the peer never throw: the engines count them or report them as events.
//! What throws is the host's own mistake ([`DeskwireError::Misuse`]) or a value the host
//! handed in that the protocol does not allow ([`DeskwireError::InvalidInput`]: a message
//! that does not parse, a configuration that does not validate).

use std::fmt;

use deskwire::tools::providers::ParseError;

/// Every error a deskwire call raises. Kotlin: `DeskwireException.Misuse`,
/// `DeskwireException.InvalidInput` and `DeskwireException.Remote`, each with `kind` (the
/// core's variant name, e.g. `NotConnected`, `UnknownRequest`, `InvalidPayload`, `Provider`)
/// and `detail` (the core's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, uniffi::Error)]
pub enum DeskwireError {
    /// The engine refused a command in its current state, or its arguments (the core's
    /// `LocalError` of that engine).
    #[error("{kind}: {detail}")]
    Misuse {
        /// The core's variant name.
        kind: String,
        /// What is wrong.
        detail: String,
    },
    /// A value handed in (JSON, a message, a configuration) is not what the protocol allows.
    #[error("{kind}: {detail}")]
    InvalidInput {
        /// The core's variant name.
        kind: String,
        /// What is wrong.
        detail: String,
    },
    /// The peer's answer the host handed in reports an error of its own (an LLM provider's
    /// error object or error event): not the host's fault, and not garbage either.
    #[error("{kind}: {detail}")]
    Remote {
        /// The core's variant name.
        kind: String,
        /// The peer's message.
        detail: String,
    },
}

/// The crate's internal error: every core error that a call can return, as it is.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error(transparent)]
    Mobile(#[from] deskwire::mobile::LocalError),
    #[error(transparent)]
    MobileParse(#[from] deskwire::mobile::ParseError),
    #[error(transparent)]
    Oa1(#[from] deskwire::oa1::LocalError),
    #[error(transparent)]
    Oa1Config(#[from] deskwire::oa1::ConfigError),
    #[error(transparent)]
    RemoteBashArgs(#[from] deskwire::oa1::remote_bash::ArgsError),
    #[error(transparent)]
    Irc(#[from] deskwire::irc::SessionError),
    #[error(transparent)]
    IrcParse(#[from] deskwire::irc::ParseError),
    #[error(transparent)]
    JsonRpc(#[from] deskwire::jsonrpc::LocalError),
    #[error(transparent)]
    Gateway(#[from] deskwire::gateway::LocalError),
    #[error(transparent)]
    GatewayParse(#[from] deskwire::gateway::ParseError),
    #[error(transparent)]
    Toolbox(#[from] deskwire::tools::ToolboxError),
    #[error(transparent)]
    Policy(#[from] deskwire::tools::PolicyError),
    #[error(transparent)]
    Registry(#[from] deskwire::tools::RegistryError),
    #[error(transparent)]
    Spec(#[from] deskwire::tools::SpecError),
    #[error(transparent)]
    Slash(#[from] deskwire::tools::slash::SlashError),
    #[error(transparent)]
    ProviderParse(#[from] deskwire::tools::providers::ParseError),
    #[error(transparent)]
    UnknownCall(#[from] deskwire::tools::providers::gemini::UnknownCall),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Schema(#[from] deskwire::schemas::SchemaError),
    /// A value the binding checks itself before it reaches the core.
    #[error("{detail}")]
    Invalid { kind: &'static str, detail: String },
    /// A call the binding's own object refuses in its state (a finished stream parser).
    #[error("{detail}")]
    Refused { kind: &'static str, detail: String },
}

/// The variant name from a `Debug` rendering (`NotConnected`, `TooLarge { .. }` → `TooLarge`).
fn variant_name(error: &dyn fmt::Debug) -> String {
    let text = format!("{error:?}");
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

impl From<Error> for DeskwireError {
    fn from(error: Error) -> Self {
        let detail = error.to_string();
        let misuse = |kind: String| DeskwireError::Misuse {
            kind,
            detail: detail.clone(),
        };
        let invalid = |kind: String| DeskwireError::InvalidInput {
            kind,
            detail: detail.clone(),
        };
        match &error {
            Error::Mobile(e) => misuse(variant_name(e)),
            Error::Oa1(e) => misuse(variant_name(e)),
            // A nick or channel the server would refuse: its own kind (`InvalidNick`), not the
            // wrapper's.
            Error::Oa1Config(deskwire::oa1::ConfigError::Session(e)) => invalid(variant_name(e)),
            Error::Oa1Config(e) => invalid(variant_name(e)),
            Error::Irc(e) => misuse(variant_name(e)),
            Error::JsonRpc(e) => misuse(variant_name(e)),
            Error::Gateway(e) => misuse(variant_name(e)),
            Error::Toolbox(e) => misuse(variant_name(e)),
            Error::MobileParse(e) => invalid(variant_name(e)),
            Error::IrcParse(e) => invalid(variant_name(e)),
            Error::RemoteBashArgs(e) => invalid(variant_name(e)),
            Error::GatewayParse(e) => invalid(variant_name(e)),
            Error::Policy(e) => invalid(variant_name(e)),
            Error::Registry(e) => invalid(variant_name(e)),
            Error::Spec(e) => invalid(variant_name(e)),
            Error::Slash(e) => invalid(variant_name(e)),
            Error::ProviderParse(e @ ParseError::Provider(_)) => DeskwireError::Remote {
                kind: variant_name(e),
                detail: detail.clone(),
            },
            Error::ProviderParse(e) => invalid(variant_name(e)),
            Error::UnknownCall(e) => invalid(variant_name(e)),
            Error::Json(_) => invalid("Json".to_owned()),
            Error::Schema(e) => invalid(variant_name(e)),
            Error::Invalid { kind, .. } => invalid((*kind).to_owned()),
            Error::Refused { kind, .. } => misuse((*kind).to_owned()),
        }
    }
}

/// The result of a call that can fail, as uniffi exports it.
pub type Result<T, E = DeskwireError> = std::result::Result<T, E>;

/// Runs `f` and converts its core error: `api(|| engine.pair(now, &code))`.
pub(crate) fn api<T, E: Into<Error>>(f: impl FnOnce() -> std::result::Result<T, E>) -> Result<T> {
    f().map_err(|e| DeskwireError::from(e.into()))
}
