//! The mobile companion's WebSocket protocol (`docs/sidecar-and-mobile.md`): JSON text
//! frames `{"type", "payload"}` between the desktop (server) and an Android app (client).
//!
//! - [`message`]: every message type in both directions ([`ServerMessage`],
//!   [`ClientMessage`]) and the [`AgentState`].
//! - [`Client`]: the phone's side as a sans-IO engine: pairing code → token → reconnect with
//!   the bearer token, backoff 1, 2, 4, 8, 16 s then 30 s, automatic `pong`, state sync,
//!   permission prompts, commands and chat.
//! - [`Server`]: the desktop's side: six-digit pairing codes opened by the user, with an attempt
//!   limit and a backoff across codes, token issue and constant-time checks, revocation that
//!   closes the token's sessions, a separate budget for connections without a token, state
//!   sync on connect, pings with a missed-pong limit, permission requests matched by id with a
//!   timeout, broadcasts.
//!
//! # The host loop
//!
//! The host owns the WebSocket (the upgrade, its `Authorization` header, the frames) and the
//! clock. Both engines take what happened (`connected`, `handle_text`, `disconnected` /
//! `closed`, `handle_timeout`) and the app's commands, and give back instructions through
//! `poll_output` until it answers `Timeout`:
//!
//! ```
//! use deskwire::mobile::client::{Client, Config, Event, Output};
//!
//! // A phone that has no token yet: the user typed the code the desktop shows.
//! let mut phone = Client::new(Config::default(), None);
//! phone.pair(0, "123456").unwrap();
//! let mut sent = Vec::new();
//! loop {
//!     match phone.poll_output(0) {
//!         // open ws://DESKTOP:9120/ws, with `Authorization: Bearer <bearer>` when given;
//!         // call `connected(now)` on 101, `disconnected(now, reason)` on failure
//!         Output::Connect { bearer } => {
//!             assert_eq!(bearer, None);
//!             phone.connected(0).unwrap();
//!         }
//!         Output::Transmit(text) => sent.push(text), // one WebSocket text frame
//!         Output::Close => {}                         // close the socket
//!         Output::Event(event) => println!("{event:?}"),
//!         // wait for a frame or until `deadline`, then `handle_text` / `handle_timeout`
//!         Output::Timeout(deadline) => break,
//!     }
//! }
//! assert_eq!(sent, [r#"{"type":"auth","payload":{"code":"123456"}}"#]);
//! ```

pub mod client;
pub mod message;
pub mod server;

pub use client::Client;
pub use message::{
    AgentState, Auth, AuthResult, ChatMessage, ClientMessage, Command, CommandAction, Envelope,
    ParseError, PausedData, PermissionRequest, PermissionResponse, RunningData, ServerMessage,
    StopReason, StoppedData, TaskUpdate, UserMessage,
};
pub use server::{ConnId, Server};

/// The spec's default port (`ws://DESKTOP_IP:9120/ws`).
pub const DEFAULT_PORT: u16 = 9120;

/// The spec's default path.
pub const DEFAULT_PATH: &str = "/ws";

/// How long a drained engine with nothing scheduled asks to sleep.
pub const IDLE_WAIT_MS: u64 = 60_000;

/// The value of the `Authorization` header for a bearer token.
pub fn authorization_header(token: &str) -> String {
    format!("Bearer {token}")
}

/// The token in an `Authorization` header value (`Bearer <token>`; the scheme is
/// case-insensitive, RFC 7235), or `None` for another scheme or an empty token.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim_start();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Misuse of an engine by the host. JSON: externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LocalError {
    /// The client has neither a token nor a pairing code to connect with.
    #[error("no token and no pairing code to connect with")]
    NoCredentials,
    /// A pairing code is six ASCII digits.
    #[error("a pairing code is six digits, not {0:?}")]
    InvalidCode(String),
    /// The client is connecting or connected already (stop it first).
    #[error("already connecting or connected")]
    AlreadyConnected,
    /// `connected` without a `Connect` instruction pending.
    #[error("no connection attempt is in progress")]
    NotConnecting,
    /// The session is not established (or, on the server, the connection is not
    /// authenticated), so nothing can be sent.
    #[error("not connected")]
    NotConnected,
    /// No permission request with this id is waiting for an answer.
    #[error("no permission request {0:?} is waiting")]
    UnknownPermission(String),
    /// The server already has a connection with this id.
    #[error("connection {0} is already open")]
    DuplicateConnection(u64),
    /// The server knows no connection with this id.
    #[error("no connection {0}")]
    UnknownConnection(u64),
    /// Too many permission requests are waiting.
    #[error("{0} permission requests already waiting")]
    TooManyPending(usize),
    /// The text is larger than the peer accepts.
    #[error("message of {size} bytes exceeds the {max} byte limit")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The server holds `max_tokens` tokens: revoke one before pairing or adding another.
    #[error("{max} phones are paired already: revoke one first")]
    TokensFull {
        /// The engine's `max_tokens`.
        max: usize,
    },
    /// `max_queued` outputs wait for the host: drain `poll_output` before sending more.
    #[error("{max} outputs are waiting: drain poll_output first")]
    QueueFull {
        /// The engine's `max_queued`.
        max: usize,
    },
}

/// Checks a pairing code's shape: six ASCII digits.
pub fn is_valid_code(code: &str) -> bool {
    code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_header_round_trip() {
        assert_eq!(bearer_token(&authorization_header("abc")), Some("abc"));
        assert_eq!(bearer_token("bearer  xyz"), Some("xyz"));
        assert_eq!(bearer_token("Basic xyz"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
    }

    #[test]
    fn code_shape() {
        assert!(is_valid_code("012345"));
        assert!(!is_valid_code("12345"));
        assert!(!is_valid_code("12345a"));
        assert!(!is_valid_code("１２３４５６"));
    }
}
