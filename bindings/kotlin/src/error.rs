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
/// `DeskwireException.InvalidInput` and `DeskwireException.Remote`, each with `kind` (an
/// [`ErrorKind`], the core's variant: `ErrorKind.CLOSED`, `ErrorKind.UNKNOWN_REQUEST`, ...) and
/// `detail` (the core's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, uniffi::Error)]
pub enum DeskwireError {
    /// The engine refused a command in its current state, or its arguments (the core's
    /// `LocalError` of that engine).
    #[error("{kind:?}: {detail}")]
    Misuse {
        /// The core's variant.
        kind: ErrorKind,
        /// What is wrong.
        detail: String,
    },
    /// A value handed in (JSON, a message, a configuration) is not what the protocol allows.
    #[error("{kind:?}: {detail}")]
    InvalidInput {
        /// The core's variant.
        kind: ErrorKind,
        /// What is wrong.
        detail: String,
    },
    /// The peer's answer the host handed in reports an error of its own (an LLM provider's
    /// error object or error event): not the host's fault, and not garbage either.
    #[error("{kind:?}: {detail}")]
    Remote {
        /// The core's variant.
        kind: ErrorKind,
        /// The peer's message.
        detail: String,
    },
}

/// Declares [`ErrorKind`] and the lookup of a core variant's name in it.
macro_rules! error_kinds {
    ($($(#[doc = $doc:literal])+ $name:ident,)+) => {
        /// What went wrong: the variant of the core's error (each engine's `LocalError`, the
        /// parsers' `ParseError`s, the configuration's `ConfigError`, ...) or of a check this
        /// binding makes itself. `DeskwireException.*.detail` says the rest in words. The same
        /// name in two engines means the same thing (`CLOSED`: the connection has ended).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
        pub enum ErrorKind {
            $($(#[doc = $doc])+ $name,)+
        }

        impl ErrorKind {
            /// The kind of a core variant, by its name.
            fn from_name(name: &str) -> Option<ErrorKind> {
                match name {
                    $(stringify!($name) => Some(ErrorKind::$name),)+
                    _ => None,
                }
            }
        }
    };
}

error_kinds! {
    // The connection and the engines' state.
    /// The connection has ended (after `quit`, `close()` or the end of the socket); make a new
    /// engine for a new connection.
    Closed,
    /// IRC: the server has not accepted us yet.
    NotRegistered,
    /// Over a size limit: an OA1 request over `maxMessageBytes`, a message or text over a
    /// parser's or the peer's limit (the detail gives the size and the limit).
    TooLarge,
    /// OA1: `maxStreams` requests are in flight already.
    TooManyInFlight,
    /// OA1: no request with that id is in progress (unknown, finished or cancelled).
    UnknownRequest,
    /// OA1: the answer to that request has ended already.
    AlreadyFinished,
    /// OA1: an `ERR` code is not lowercase letters and `_`.
    InvalidErrorCode,
    /// OA1: the channel and nick leave too little room in a line for any payload.
    NoRoom,
    /// OA1: the endpoint's configuration cannot work.
    InvalidConfig,
    /// OA1, many desks on one connection: the connection does not carry that channel.
    UnknownChannel,
    /// OA1, many desks on one connection: the connection carries that channel already.
    DuplicateChannel,
    /// Chat: text that starts with `OA1 ` (or `OA1A `), which the OA1 spec reserves for tool
    /// frames.
    ReservedPrefix,
    // Configurations: refused when the engine is built.
    /// A desk's `oa1.allowedSender` is not set: a desk must name its remote (`rexd`), or `"*"`.
    NoRemote,
    /// `oa1.allowedSender` is not a nick, a `nick!user@host` mask, `account:NAME` or `"*"`.
    AllowedSender,
    /// A desk's `oa1.allowedSender` is `account:NAME`: a desk names its remote by nick, whose
    /// presence it watches; accounts are for a remote's allowed sender.
    AccountRemote,
    /// `session.sasl` cannot log in (`PLAIN` without a username or a password).
    InvalidLogin,
    /// A limit below what can work (the detail names it).
    TooSmall,
    /// A setting that cannot be negative is (the detail names it).
    Negative,
    /// A nick the server would refuse or rename (RFC 2812: 1 to 30 characters, a letter or one
    /// of `[]\^_{|}` or a backquote first, then letters, digits, those or `-`).
    InvalidNick,
    /// A user name with a space, a comma, a control character or a leading `:`.
    InvalidUser,
    /// A channel that does not start with `#`, `&`, `+` or `!`, or has a space, comma or
    /// control character.
    InvalidChannel,
    /// A message target that is not one channel or nick.
    InvalidTarget,
    /// A byte IRC cannot carry (NUL, CR, LF).
    ForbiddenByte,
    /// An empty message text.
    EmptyText,
    /// A line or value over its limit.
    TooLong,
    /// A `session` wrapper error (kept for errors not unwrapped to their own kind).
    Session,
    // Values handed in that do not parse.
    /// An IRC line without a command.
    MissingCommand,
    /// Text that is not UTF-8.
    InvalidUtf8,
    /// IRCv3 tags without a command after them.
    TagsWithoutCommand,
    /// Not what the protocol allows (the detail says what).
    Invalid,
    /// A timeout of 0: `RemoteBash`'s `timeout_sec`, or an OA1 configuration's
    /// `requestTimeoutMs`, `readyTimeoutMs` or `partialTimeoutMs` (the detail names it).
    ZeroTimeout,
    /// A `RemoteBash` command that is empty or only whitespace (a shell would run nothing).
    EmptyCommand,
    /// A `RemoteBash` command with a NUL byte (the detail gives its offset).
    NulInCommand,
    /// The same setting given twice with different values (a channel in `oa1.channel` and
    /// `session.channels`, the nick at the top level of a JSON config and in `session`/`oa1`).
    Conflict,
    /// An OA1 frame id that is not 1 to 64 of `A-Z a-z 0-9 _ -`.
    InvalidId,
    /// An OA1 frame with seq 0 (chunks are numbered from 1).
    ZeroSeq,
    /// A `RemoteBash` request the desk could not send (a wrapper of the OA1 kinds).
    Local,
    /// Not JSON, or not the JSON expected.
    Json,
    /// A JSON value that is not an object.
    NotAnObject,
    /// A message without its `type`.
    MissingType,
    /// A message of a `type` nobody knows.
    UnknownType,
    /// A message whose payload does not fit its type.
    InvalidPayload,
    /// A gateway message that is not JSON, or not its envelope.
    Malformed,
    /// A protocol version this side does not speak.
    VersionUnsupported,
    /// A message of the wrong type here.
    WrongType,
    /// An operation nobody knows.
    UnknownOp,
    /// Parameters that do not fit the method.
    InvalidParams,
    /// A protocol name `readSchemaValue` does not know.
    UnknownProtocol,
    /// A `$defs` name the schema does not have.
    UnknownDef,
    /// 32 bytes of entropy were expected.
    EntropyLength,
    /// An OA1 chunk budget below the least a frame can carry.
    BudgetTooSmall,
    // JSON-RPC.
    /// A request id already in flight.
    DuplicateId,
    /// Too many pending: JSON-RPC calls (`maxPending`), approvals, or the phone's permission
    /// requests.
    TooManyPending,
    /// JSON-RPC: no pending call or unanswered request has that id.
    UnknownId,
    /// JSON-RPC: the dialect cannot carry this message (progress in JSON-RPC 2.0, say).
    Write,
    // The gateway.
    /// The gateway's `tokens` is empty or holds an empty token: nobody could ever connect.
    NoToken,
    /// The gateway's output queue is full: drain `pollOutput` before feeding more.
    Backpressure,
    /// No job with that id.
    UnknownJob,
    /// A job state change the state machine does not allow.
    Transition,
    /// The job is not running.
    NotRunning,
    /// Too many approvals pending for the job.
    TooManyApprovals,
    /// An approval id used already.
    DuplicateApprovalId,
    /// A job's `progress` outside 0.0 to 1.0, or not a number.
    InvalidProgress,
    /// An id or text the gateway's wire format cannot carry (empty, or over 256 characters).
    InvalidField,
    // The tool layer and the providers.
    /// Too many agents have a context.
    TooManyAgents,
    /// A tool registry error (a duplicate name).
    Registry,
    /// An approval error (unknown, pending too many, an external id taken).
    Approval,
    /// A tool name used already.
    Duplicate,
    /// A tool name a provider does not accept.
    InvalidName,
    /// A tool's input schema is not a JSON object.
    SchemaNotObject,
    /// A tool's input schema is not JSON.
    SchemaNotJson,
    /// A slash line that does not start with `/`.
    NotACommand,
    /// A slash command nobody registered.
    UnknownCommand,
    /// A slash line with an unterminated quote.
    UnterminatedQuote,
    /// A slash command without an argument it needs.
    MissingArgument,
    /// A slash command with more arguments than it takes.
    TooManyArguments,
    /// A slash argument of the wrong type.
    BadValue,
    /// A slash argument that is not the JSON expected.
    BadJson,
    /// A policy pattern that does not compile.
    BadPattern,
    /// A policy root that is not an absolute path.
    RelativeRoot,
    /// A provider answer that is not JSON.
    NotJson,
    /// A provider answer whose shape is not the provider's.
    Shape,
    /// A provider's own error object or error event ([`DeskwireError::Remote`]).
    Provider,
    /// A provider stream that ended before the provider said the response was done (its stop
    /// reason): cut off in transit.
    Incomplete,
    /// A tool result names a call the previous model turn did not make.
    UnknownCall,
    /// A stream parser asked for more after `finish`.
    Finished,
    // The mobile companion.
    /// No pairing code or token to connect with.
    NoCredentials,
    /// A pairing code that is not six ASCII digits.
    InvalidCode,
    /// The phone is connecting or connected already.
    AlreadyConnected,
    /// `connected` without a `Connect` instruction pending.
    NotConnecting,
    /// The mobile session is not established, so nothing can be sent.
    NotConnected,
    /// No permission request with that id.
    UnknownPermission,
    /// A connection id in use already.
    DuplicateConnection,
    /// No connection with that id.
    UnknownConnection,
    /// `maxQueued` outputs wait for the host: drain `pollOutput` before sending more.
    QueueFull,
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
    Oa1Frame(#[from] deskwire::oa1::FrameError),
    #[error(transparent)]
    Chat(#[from] deskwire::oa1::chat::ChatError),
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
    Invalid { kind: ErrorKind, detail: String },
    /// A call the binding's own object refuses in its state (a finished stream parser).
    #[error("{detail}")]
    Refused { kind: ErrorKind, detail: String },
}

/// The kind of a core error, from the variant name of its `Debug` rendering (`NotConnected`,
/// `TooLarge { .. }` → `TooLarge`).
fn variant_name(error: &dyn fmt::Debug) -> ErrorKind {
    let text = format!("{error:?}");
    let name: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    // The core's error enums are `#[non_exhaustive]`: a new variant is a bug here until it
    // has a kind, reported (as `InternalException`) rather than mapped to a wrong kind.
    ErrorKind::from_name(&name).unwrap_or_else(|| unmapped!(text))
}

impl From<Error> for DeskwireError {
    fn from(error: Error) -> Self {
        let detail = error.to_string();
        let misuse = |kind: ErrorKind| DeskwireError::Misuse {
            kind,
            detail: detail.clone(),
        };
        let invalid = |kind: ErrorKind| DeskwireError::InvalidInput {
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
            Error::Oa1Frame(e) => invalid(variant_name(e)),
            Error::Irc(e) => misuse(variant_name(e)),
            Error::JsonRpc(e) => misuse(variant_name(e)),
            Error::Gateway(e) => misuse(variant_name(e)),
            Error::Toolbox(e) => misuse(variant_name(e)),
            Error::MobileParse(e) => invalid(variant_name(e)),
            Error::IrcParse(e) => invalid(variant_name(e)),
            // A request the desk refused (closed, too large): misuse, with the OA1 kind.
            Error::RemoteBashArgs(deskwire::oa1::remote_bash::ArgsError::Local(e)) => {
                misuse(variant_name(e))
            }
            Error::RemoteBashArgs(e) => invalid(variant_name(e)),
            Error::Chat(e) => match crate::multi::chat_error_kind(e) {
                (true, kind) => invalid(kind),
                (false, kind) => misuse(kind),
            },
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
            Error::Json(_) => invalid(ErrorKind::Json),
            Error::Schema(e) => invalid(variant_name(e)),
            Error::Invalid { kind, .. } => invalid(*kind),
            Error::Refused { kind, .. } => misuse(*kind),
        }
    }
}

/// The result of a call that can fail, as uniffi exports it.
pub type Result<T, E = DeskwireError> = std::result::Result<T, E>;

/// Runs `f` and converts its core error: `api(|| engine.pair(now, &code))`.
pub(crate) fn api<T, E: Into<Error>>(f: impl FnOnce() -> std::result::Result<T, E>) -> Result<T> {
    f().map_err(|e| DeskwireError::from(e.into()))
}
