//! IRC building blocks: a zero-copy line parser and formatter, case mapping, line budgets, a line
//! decoder for raw byte streams, and a sans-IO session helper for hosts without an IRC client.

pub mod accounts;
pub mod cap;
pub mod casemap;
mod forbidden;
pub mod identity;
pub mod mask;
pub mod message;
mod netsplit;
pub mod session;

pub use crate::lines::{DecodedLine, LineDecoder};
pub use accounts::AccountWatch;
pub use cap::{SaslConfig, SaslMechanism};
pub use casemap::CaseMapping;
pub use identity::{Identity, MAX_LINE_BYTES, MAX_LINELEN};
pub use mask::{InvalidName, MAX_NICK_LEN, SenderPattern, validate_nick};
pub use message::{
    FormatError, MAX_TAG_SECTION_BYTES, Message, ParseError, Privmsg, Source, format_line, privmsg,
    within_line_limits,
};
pub use netsplit::netsplit_servers;
pub use session::{
    DisconnectReason, Session, SessionConfig, SessionError, SessionEvent, SessionOutput,
    SessionStats,
};

/// A line limit that fits any IRC line with IRCv3 message tags: 8191 bytes of tags (the `@` and
/// the space after them included) plus the 512 bytes of a classic line (CRLF included).
pub const DEFAULT_MAX_LINE_BYTES: usize = MAX_TAG_SECTION_BYTES + MAX_LINE_BYTES;
