//! The IRC session helper (registration, `PING`, `JOIN`, nick fallback, our prefix) for hosts
//! without an IRC client of their own.

use std::sync::{Arc, Mutex};

use deskwire::irc;

use crate::error::{DeskwireError, Result, api};
use crate::{lock, long, long_size, ms, non_negative, non_negative_u32, to_usize};

/// How to register and what to join.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct IrcSessionConfig {
    /// The nick to ask for first.
    pub nick: String,
    /// The user name of `USER`.
    pub user: String,
    /// The real name of `USER`.
    pub realname: String,
    /// The server password (`PASS`).
    pub password: Option<String>,
    /// Channels to join once registered.
    pub channels: Vec<String>,
    /// Nicks to try before giving up.
    pub max_nick_attempts: i32,
    /// Keepalive `PING` after this much silence.
    pub ping_interval_ms: i64,
    /// Give up this long after an unanswered keepalive.
    pub ping_timeout_ms: i64,
    /// Registered under a fallback nick, ask for ours back after this long (doubling, up to a
    /// minute; at once when `MONITOR` says it is free). 0: keep the fallback.
    #[uniffi(default = 2000)]
    pub nick_regain_ms: i64,
    /// Longest line accepted from the server, CRLF included.
    pub max_line_bytes: i64,
    /// Mark ourselves a bot (`MODE <nick> +B`) where the server has a bot mode (ISUPPORT
    /// `BOT`); a remote's connection sets it.
    #[uniffi(default = false)]
    pub bot_mode: bool,
    /// Log in with SASL while registering (`null`: no `CAP` at all).
    #[uniffi(default = None)]
    pub sasl: Option<irc::SaslConfig>,
    /// IRCv3 capabilities to ask for when offered (`account-tag` is added for an `account:`
    /// allowed sender).
    #[uniffi(default = [])]
    pub capabilities: Vec<String>,
}

/// The session defaults for `nick` joining `channels`.
#[uniffi::export]
pub fn irc_session_config(nick: String, channels: Vec<String>) -> IrcSessionConfig {
    let channels: Vec<&str> = channels.iter().map(String::as_str).collect();
    irc::SessionConfig::new(&nick, &channels).into()
}

/// Checks every value of a session configuration.
#[uniffi::export]
pub fn irc_validate_session_config(config: IrcSessionConfig) -> Result<()> {
    let config = irc::SessionConfig::try_from(config)?;
    api(|| config.validate())
}

/// One IRC line split into its parts (RFC 1459 plus IRCv3 tags).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct IrcMessage {
    /// Tags with their values unescaped.
    pub tags: std::collections::HashMap<String, String>,
    /// The source without `:` (`nick!user@host` or a server name).
    pub source: Option<String>,
    /// The command or numeric.
    pub command: String,
    /// The parameters, the trailing one included.
    pub params: Vec<String>,
}

/// Splits one IRC line (CRLF optional).
#[uniffi::export]
pub fn irc_parse_line(line: Vec<u8>) -> Result<IrcMessage> {
    let message = api(|| irc::Message::parse(&line))?;
    Ok(IrcMessage {
        tags: message
            .tags()
            .map(|(k, v)| (k.to_owned(), v.into_owned()))
            .collect(),
        source: message.source.map(|s| s.raw.to_owned()),
        command: message.command.to_owned(),
        params: message.params().iter().map(|p| (*p).to_owned()).collect(),
    })
}

/// Why a session ended, in words (`the server closed the link: Closing Link ...`, `the
/// connection was lost`, ...), as the core says it in `Oa1Failure.Disconnected`.
#[uniffi::export]
pub fn irc_disconnect_reason_message(reason: irc::DisconnectReason) -> String {
    reason.to_string()
}

/// What the session wants next.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum IrcSessionOutput {
    /// Write this line plus CRLF.
    Transmit {
        /// The line, without CRLF.
        line: String,
    },
    /// Tell the app.
    Event {
        /// The event.
        event: irc::SessionEvent,
    },
    /// Nothing to do before this instant unless bytes arrive.
    Timeout {
        /// The deadline (ms).
        deadline_ms: i64,
    },
}

/// The session's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct IrcSessionStats {
    /// Lines received.
    pub lines_received: i64,
    /// Lines queued for sending.
    pub lines_queued: i64,
    /// Lines over `max_line_bytes`.
    pub ignored_too_long: i64,
    /// Lines that were not IRC.
    pub ignored_invalid: i64,
    /// Lines after the end.
    pub ignored_after_close: i64,
    /// Server `PING`s answered.
    pub pings_answered: i64,
    /// Keepalive `PING`s sent.
    pub keepalive_pings: i64,
    /// `NICK` commands sent.
    pub nick_attempts: i64,
    /// `NICK` commands sent to regain the configured nick from a fallback.
    pub regain_attempts: i64,
    /// Of those, the ones refused (the nick was still taken).
    pub regain_refusals: i64,
}

/// A sans-IO IRC client session.
#[derive(uniffi::Object)]
pub struct IrcSession {
    inner: Mutex<irc::Session>,
}

#[uniffi::export]
impl IrcSession {
    /// A session that registers right away (its first lines are in `poll_output`). A
    /// negative time or size in `config` throws `InvalidInput`; other values are taken as
    /// they are (see `ircValidateSessionConfig`).
    #[uniffi::constructor]
    pub fn new(config: IrcSessionConfig, now_ms: i64) -> Result<Arc<Self>> {
        Ok(Arc::new(IrcSession {
            inner: Mutex::new(irc::Session::new(config.try_into()?, ms(now_ms)?)),
        }))
    }

    /// Raw bytes from the socket (any split).
    /// Kotlin passes a direct `ByteBuffer` (position to limit), read in place for the call;
    /// `handleBytes(nowMs, ByteArray)` copies an array into one first.
    pub fn handle_bytes(&self, now_ms: i64, bytes: &[u8]) -> Result<()> {
        lock(&self.inner).handle_bytes(ms(now_ms)?, bytes);
        Ok(())
    }

    /// One whole line (CRLF optional).
    /// Kotlin passes a direct `ByteBuffer` (position to limit), read in place for the call;
    /// `handleLine(nowMs, ByteArray)` copies an array into one first.
    pub fn handle_line(&self, now_ms: i64, line: &[u8]) -> Result<()> {
        lock(&self.inner).handle_line(ms(now_ms)?, line);
        Ok(())
    }

    /// Does what is due by `now_ms`.
    pub fn handle_timeout(&self, now_ms: i64) -> Result<()> {
        lock(&self.inner).handle_timeout(ms(now_ms)?);
        Ok(())
    }

    /// The next thing to do; call until it answers `Timeout`.
    pub fn poll_output(&self, now_ms: i64) -> Result<IrcSessionOutput> {
        Ok(lock(&self.inner).poll_output(ms(now_ms)?).into())
    }

    /// Joins a channel.
    pub fn join(&self, channel: String) -> Result<()> {
        api(|| lock(&self.inner).join(&channel))
    }

    /// Leaves a channel.
    pub fn part(&self, channel: String) -> Result<()> {
        api(|| lock(&self.inner).part(&channel))
    }

    /// Sends one `PRIVMSG` line.
    pub fn privmsg(&self, target: String, text: String) -> Result<()> {
        api(|| lock(&self.inner).privmsg(&target, &text))
    }

    /// Says goodbye; the session ends.
    pub fn quit(&self, reason: String) {
        lock(&self.inner).quit(&reason)
    }

    /// Whether the server accepted us.
    pub fn is_registered(&self) -> bool {
        lock(&self.inner).is_registered()
    }

    /// Whether the session ended.
    pub fn is_closed(&self) -> bool {
        lock(&self.inner).is_closed()
    }

    /// The channels we are in.
    pub fn channels(&self) -> Vec<String> {
        lock(&self.inner).channels().to_vec()
    }

    /// Our nick as the server knows it.
    pub fn nick(&self) -> String {
        lock(&self.inner).identity().nick().to_owned()
    }

    /// Counters.
    pub fn stats(&self) -> IrcSessionStats {
        lock(&self.inner).stats().into()
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions

impl From<irc::SessionConfig> for IrcSessionConfig {
    fn from(c: irc::SessionConfig) -> Self {
        IrcSessionConfig {
            nick: c.nick,
            user: c.user,
            realname: c.realname,
            password: c.password,
            channels: c.channels,
            max_nick_attempts: i32::try_from(c.max_nick_attempts).unwrap_or(i32::MAX),
            ping_interval_ms: long(c.ping_interval_ms),
            ping_timeout_ms: long(c.ping_timeout_ms),
            nick_regain_ms: long(c.nick_regain_ms),
            max_line_bytes: long_size(c.max_line_bytes),
            bot_mode: c.bot_mode,
            sasl: c.sasl,
            capabilities: c.capabilities,
        }
    }
}

impl TryFrom<IrcSessionConfig> for irc::SessionConfig {
    type Error = DeskwireError;

    fn try_from(c: IrcSessionConfig) -> Result<Self> {
        Ok(irc::SessionConfig {
            nick: c.nick,
            user: c.user,
            realname: c.realname,
            password: c.password,
            channels: c.channels,
            max_nick_attempts: non_negative_u32("session.maxNickAttempts", c.max_nick_attempts)?,
            ping_interval_ms: non_negative("session.pingIntervalMs", c.ping_interval_ms)?,
            ping_timeout_ms: non_negative("session.pingTimeoutMs", c.ping_timeout_ms)?,
            nick_regain_ms: non_negative("session.nickRegainMs", c.nick_regain_ms)?,
            max_line_bytes: to_usize(non_negative("session.maxLineBytes", c.max_line_bytes)?),
            bot_mode: c.bot_mode,
            sasl: c.sasl,
            capabilities: c.capabilities,
        })
    }
}

impl From<irc::SessionOutput> for IrcSessionOutput {
    fn from(o: irc::SessionOutput) -> Self {
        match o {
            irc::SessionOutput::Transmit(line) => IrcSessionOutput::Transmit { line },
            irc::SessionOutput::Event(event) => IrcSessionOutput::Event { event },
            irc::SessionOutput::Timeout(deadline_ms) => IrcSessionOutput::Timeout {
                deadline_ms: long(deadline_ms),
            },
        }
    }
}

impl From<irc::SessionStats> for IrcSessionStats {
    fn from(s: irc::SessionStats) -> Self {
        IrcSessionStats {
            lines_received: long(s.lines_received),
            lines_queued: long(s.lines_queued),
            ignored_too_long: long(s.ignored_too_long),
            ignored_invalid: long(s.ignored_invalid),
            ignored_after_close: long(s.ignored_after_close),
            pings_answered: long(s.pings_answered),
            keepalive_pings: long(s.keepalive_pings),
            nick_attempts: i64::from(s.nick_attempts),
            regain_attempts: i64::from(s.regain_attempts),
            regain_refusals: i64::from(s.regain_refusals),
        }
    }
}
