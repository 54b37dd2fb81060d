//! IRC building blocks: a zero-copy line parser and formatter, case mapping, line budgets, a line
//! decoder for raw byte streams, and a sans-IO session helper for hosts without an IRC client.

pub mod casemap;
pub mod decoder;
pub mod identity;
pub mod message;
pub mod session;

pub use casemap::CaseMapping;
pub use decoder::{DEFAULT_MAX_LINE_BYTES, DecodedLine, LineDecoder};
pub use identity::{Identity, MAX_LINE_BYTES};
pub use message::{FormatError, Message, ParseError, Source, format_line, privmsg};
pub use session::{
    DisconnectReason, Session, SessionConfig, SessionError, SessionEvent, SessionOutput,
    SessionStats,
};
