//! Many desks over one IRC connection ([`MultiDesk`], the core's `oa1::MultiDesk`): a desk per
//! channel, each with its own remote, ids, timeouts and counters, sharing the connection's flood
//! pacing in turns; with channel chat and membership beside OA1 (both opt-in). The host loop is
//! the one of [`crate::connection::Desk`], with [`MultiDrain`] in place of `ConnectionDrain`:
//! each event names its channel.

use std::sync::{Arc, Mutex};

use deskwire::oa1::{self, chat};

use crate::connection::ConnectionConfig;
use crate::error::{Error, ErrorKind, Result, api};
use crate::irc::IrcSessionStats;
use crate::oa1::Oa1Stats;
use crate::{lock, long, long_size, ms, non_negative};

/// How a chat message was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ChatKind {
    /// A `PRIVMSG`.
    Privmsg,
    /// A `NOTICE`.
    Notice,
    /// A CTCP `ACTION` (`/me`), its text without the CTCP wrapping.
    Action,
}

/// One IRCv3 message tag (`account`, `time`, ...).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ChatTag {
    /// The tag's name.
    pub key: String,
    /// Its value (`""` when it has none).
    pub value: String,
}

/// A message in one of the connection's channels that is not an OA1 frame.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ChannelMessage {
    /// The channel, as the connection carries it.
    pub channel: String,
    /// Who sent it: `nick!user@host` as the server wrote it.
    pub sender: String,
    /// How it was sent.
    pub kind: ChatKind,
    /// The text (invalid UTF-8 replaced by U+FFFD).
    pub text: String,
    /// The message tags, in order.
    pub tags: Vec<ChatTag>,
}

/// A change in who is in one of the connection's channels.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum MembershipEvent {
    /// The channel's whole member list once the server has sent it (after our join): nicks
    /// without their status prefix, ours included.
    Names {
        /// The channel.
        channel: String,
        /// The members.
        nicks: Vec<String>,
    },
    /// `nick` joined (our own join too).
    Joined {
        /// The channel.
        channel: String,
        /// Who joined.
        nick: String,
    },
    /// `nick` left with `PART`.
    Parted {
        /// The channel.
        channel: String,
        /// Who left.
        nick: String,
        /// The part message, if any.
        reason: Option<String>,
    },
    /// `nick` was kicked out by `by`.
    Kicked {
        /// The channel.
        channel: String,
        /// Who was kicked.
        nick: String,
        /// Who kicked.
        by: String,
        /// The kick message, if any.
        reason: Option<String>,
    },
    /// `nick` quit IRC (one event per carried channel it was in).
    Quit {
        /// The channel.
        channel: String,
        /// Who quit.
        nick: String,
        /// The quit message, if any.
        reason: Option<String>,
    },
    /// `nick` is now `new_nick` (one event per carried channel it was in).
    Renamed {
        /// The channel.
        channel: String,
        /// The old nick.
        nick: String,
        /// The new one.
        new_nick: String,
    },
}

/// Chat beside OA1, for a host that asked ([`MultiDesk::set_chat`],
/// [`MultiDesk::set_membership`]).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum ChatEvent {
    /// A `PRIVMSG`, `NOTICE` or CTCP `ACTION`.
    Message {
        /// The message.
        message: ChannelMessage,
    },
    /// Someone joined, left, was kicked, quit or changed nick; or a channel's member list.
    Membership {
        /// The change.
        event: MembershipEvent,
    },
}

/// Something the application should learn from a connection of many desks.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum MultiDeskEvent {
    /// An IRC, OA1 or link event; `channel` is the desk's, `null` for the connection's own
    /// (registration, the end of the link).
    Connection {
        /// The desk's channel, as added.
        channel: Option<String>,
        /// The event.
        event: oa1::ConnectionEvent,
    },
    /// Chat or membership.
    Chat {
        /// The message or change.
        event: ChatEvent,
    },
}

/// What [`MultiDesk::drain`] gives: everything `poll_output` would until its `Timeout`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct MultiDrain {
    /// The lines to write to the socket, CRLF included (empty when there are none).
    pub bytes: Vec<u8>,
    /// The events, in the order they came.
    pub events: Vec<MultiDeskEvent>,
    /// Nothing to do before this instant (ms) unless bytes arrive.
    pub deadline_ms: i64,
}

/// Many desks over one IRC connection, one per channel.
#[derive(uniffi::Object)]
pub struct MultiDesk {
    inner: Mutex<oa1::MultiDesk>,
}

fn unknown_channel(channel: &str) -> crate::DeskwireError {
    Error::from(oa1::LocalError::UnknownChannel(channel.to_owned())).into()
}

#[uniffi::export]
impl MultiDesk {
    /// A connection that registers at once. `config.oa1.channel` may be `""`: no desk yet (each
    /// is added with `addDesk`); its `oa1` settings are those of every desk added, and its
    /// pacing is the one the desks share. A channel that is not empty is the first desk and
    /// needs its `oa1.allowedSender`. `seed` starts the desks' request ids (take it from
    /// `SecureRandom`).
    #[uniffi::constructor]
    pub fn new(config: ConnectionConfig, now_ms: i64, seed: i64) -> Result<Arc<Self>> {
        let config = config.try_into()?;
        let now = ms(now_ms)?;
        let desk = api(|| oa1::MultiDesk::new(config, now, seed as u64))?;
        Ok(Arc::new(MultiDesk {
            inner: Mutex::new(desk),
        }))
    }

    /// Adds a desk in `channel` whose remote is `remote` (a nick, `nick!user@host` or `*`);
    /// the channel is joined. Throws `InvalidInput` with kind `DUPLICATE_CHANNEL` for a
    /// channel the connection carries, `INVALID_CHANNEL` / `ALLOWED_SENDER` for bad names.
    pub fn add_desk(&self, now_ms: i64, channel: String, remote: String) -> Result<()> {
        let now = ms(now_ms)?;
        let mut desk = lock(&self.inner);
        if desk.session().is_closed() {
            return Err(Error::from(oa1::LocalError::Closed).into());
        }
        api(|| desk.add_desk(now, &channel, &remote))
    }

    /// Leaves `channel` and drops its desk: its requests fail `Disconnected`. Throws `Misuse`
    /// with kind `UNKNOWN_CHANNEL` for a channel the connection does not carry.
    pub fn remove_desk(&self, now_ms: i64, channel: String) -> Result<()> {
        match lock(&self.inner).remove_desk(ms(now_ms)?, &channel) {
            true => Ok(()),
            false => Err(unknown_channel(&channel)),
        }
    }

    /// Sends `payload` to the remote of the desk in `channel`; `timeout_ms` overrides the
    /// configured timeout. The id its events carry. Throws `Misuse` (`UNKNOWN_CHANNEL`,
    /// `TOO_LARGE`, `TOO_MANY_IN_FLIGHT`, `CLOSED`).
    pub fn request(
        &self,
        now_ms: i64,
        channel: String,
        payload: String,
        timeout_ms: Option<i64>,
    ) -> Result<String> {
        let timeout_ms = timeout_ms
            .map(|t| non_negative("timeoutMs", t))
            .transpose()?;
        let now = ms(now_ms)?;
        api(|| lock(&self.inner).request(now, &channel, &payload, timeout_ms))
    }

    /// Starts a `RemoteBash` call of `command` on the remote of the desk in `channel`
    /// (`timeout` `null`: the configured request timeout; zero throws `InvalidInput` with kind
    /// `ZERO_TIMEOUT`). The id its events carry.
    pub fn remote_bash_command(
        &self,
        now_ms: i64,
        channel: String,
        command: String,
        timeout: Option<std::time::Duration>,
    ) -> Result<String> {
        let now = ms(now_ms)?;
        api(|| lock(&self.inner).remote_bash(now, &channel, &command, timeout))
    }

    /// Cancels a request of the desk in `channel` (a `CANCEL` goes out).
    pub fn cancel(&self, now_ms: i64, channel: String, id: String, reason: String) -> Result<()> {
        let now = ms(now_ms)?;
        api(|| lock(&self.inner).cancel(now, &channel, &id, &reason))
    }

    /// Bytes read from the socket (any split).
    pub fn handle_bytes(&self, now_ms: i64, bytes: Vec<u8>) -> Result<()> {
        lock(&self.inner).handle_bytes(ms(now_ms)?, &bytes);
        Ok(())
    }

    /// The socket closed or failed.
    pub fn handle_eof(&self, now_ms: i64) -> Result<()> {
        lock(&self.inner).handle_eof(ms(now_ms)?);
        Ok(())
    }

    /// Does what is due by `now_ms`.
    pub fn handle_timeout(&self, now_ms: i64) -> Result<()> {
        lock(&self.inner).handle_timeout(ms(now_ms)?);
        Ok(())
    }

    /// Says goodbye (`QUIT`, in the next drain); the connection ends.
    pub fn quit(&self, now_ms: i64, reason: String) -> Result<()> {
        lock(&self.inner).quit(ms(now_ms)?, &reason);
        Ok(())
    }

    /// Everything `poll_output` would give until its `Timeout`, in one call.
    pub fn drain(&self, now_ms: i64) -> Result<MultiDrain> {
        let now = ms(now_ms)?;
        let mut desk = lock(&self.inner);
        let mut bytes = Vec::new();
        let mut events = Vec::new();
        loop {
            match desk.poll_output(now) {
                oa1::MultiOutput::Transmit(line) => bytes.extend_from_slice(&line),
                oa1::MultiOutput::Event { channel, event } => {
                    events.push(MultiDeskEvent::Connection { channel, event })
                }
                oa1::MultiOutput::Chat(message) => events.push(MultiDeskEvent::Chat {
                    event: ChatEvent::Message {
                        message: message.into(),
                    },
                }),
                oa1::MultiOutput::Membership(event) => events.push(MultiDeskEvent::Chat {
                    event: ChatEvent::Membership {
                        event: event.into(),
                    },
                }),
                // Device-code discovery is the serving side's (`MultiRemote`); a desk has none.
                oa1::MultiOutput::Discovery(_) => {}
                oa1::MultiOutput::Timeout(deadline) => {
                    return Ok(MultiDrain {
                        bytes,
                        events,
                        deadline_ms: long(deadline),
                    });
                }
            }
        }
    }

    /// Channel chat beside OA1 (off by default): each `PRIVMSG`, `NOTICE` and CTCP `ACTION` of
    /// a carried channel that is not OA1 comes out as a `Chat` event (at most 1024 wait).
    pub fn set_chat(&self, on: bool) {
        lock(&self.inner).set_chat(on)
    }

    /// Channel membership (off by default): joins, parts, kicks, quits, nick changes and each
    /// channel's member list come out as `Chat` events, in order with the chat.
    pub fn set_membership(&self, on: bool) {
        lock(&self.inner).set_membership(on)
    }

    /// Chat messages and membership changes dropped because the host did not take them.
    pub fn chat_dropped(&self) -> i64 {
        long(lock(&self.inner).chat_dropped())
    }

    /// Sends `text` to `channel` as chat (`NOTICE`s with `notice`): cut at spaces, or at
    /// character boundaries, into lines that fit, through the shared pacing once the channel
    /// is joined. Returns the number of lines. Throws `InvalidInput` with kind
    /// `RESERVED_PREFIX` for text starting with `OA1 ` (the spec reserves it), `EMPTY_TEXT`,
    /// `FORBIDDEN_BYTE` (NUL, CR, LF); `Misuse` with `UNKNOWN_CHANNEL`, `QUEUE_FULL` (64 KiB
    /// wait per channel) or `CLOSED`.
    pub fn send_text(&self, channel: String, text: String, notice: bool) -> Result<i64> {
        let lines = lock(&self.inner)
            .send_text(&channel, &text, notice)
            .map_err(|e| crate::DeskwireError::from(Error::Chat(e)))?;
        Ok(long_size(lines))
    }

    /// The connection's state: `REGISTERING`, `READY` once registered, or `CLOSED` (each desk
    /// has its own: `channelState`).
    pub fn state(&self) -> oa1::ConnectionState {
        lock(&self.inner).state()
    }

    /// Where the desk in `channel` stands (`JOINING`, `WAITING_FOR_PEER`, `READY`, ...).
    /// Throws `Misuse` with kind `UNKNOWN_CHANNEL`.
    pub fn channel_state(&self, channel: String) -> Result<oa1::ConnectionState> {
        lock(&self.inner)
            .channel_state(&channel)
            .ok_or_else(|| unknown_channel(&channel))
    }

    /// The desks' channels, in the order they were added.
    pub fn channels(&self) -> Vec<String> {
        lock(&self.inner).channels()
    }

    /// The other members of the desk's channel. Throws `Misuse` with kind `UNKNOWN_CHANNEL`.
    pub fn members(&self, channel: String) -> Result<Vec<String>> {
        lock(&self.inner)
            .members(&channel)
            .ok_or_else(|| unknown_channel(&channel))
    }

    /// Requests of the desk in `channel` in flight. Throws `Misuse` with kind
    /// `UNKNOWN_CHANNEL`.
    pub fn in_flight(&self, channel: String) -> Result<i64> {
        lock(&self.inner)
            .in_flight(&channel)
            .map(long_size)
            .ok_or_else(|| unknown_channel(&channel))
    }

    /// What the desk's requests wait for, in words; `null` when ready. Throws `Misuse` with
    /// kind `UNKNOWN_CHANNEL`.
    pub fn waiting_for(&self, channel: String) -> Result<Option<String>> {
        let desk = lock(&self.inner);
        if desk.channel_state(&channel).is_none() {
            return Err(unknown_channel(&channel));
        }
        Ok(desk.waiting_for(&channel))
    }

    /// The OA1 counters of the desk in `channel`. Throws `Misuse` with kind `UNKNOWN_CHANNEL`.
    pub fn channel_stats(&self, channel: String) -> Result<Oa1Stats> {
        lock(&self.inner)
            .channel_stats(&channel)
            .map(Into::into)
            .ok_or_else(|| unknown_channel(&channel))
    }

    /// The IRC session's counters.
    pub fn irc_stats(&self) -> IrcSessionStats {
        lock(&self.inner).irc_stats().into()
    }

    /// Our nick as the server knows it.
    pub fn nick(&self) -> String {
        lock(&self.inner).session().identity().nick().to_owned()
    }
}

/// The kind of a chat refusal: the text itself is wrong (`InvalidInput`), or the connection
/// cannot take it (`Misuse`).
pub(crate) fn chat_error_kind(e: &chat::ChatError) -> (bool, ErrorKind) {
    match e {
        chat::ChatError::UnknownChannel(_) => (false, ErrorKind::UnknownChannel),
        chat::ChatError::Empty => (true, ErrorKind::EmptyText),
        chat::ChatError::ForbiddenByte => (true, ErrorKind::ForbiddenByte),
        chat::ChatError::ReservedPrefix(_) => (true, ErrorKind::ReservedPrefix),
        chat::ChatError::QueueFull { .. } => (false, ErrorKind::QueueFull),
        chat::ChatError::Closed => (false, ErrorKind::Closed),
        other => unmapped!(other),
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions

impl From<chat::ChatMessage> for ChannelMessage {
    fn from(m: chat::ChatMessage) -> Self {
        ChannelMessage {
            channel: m.channel,
            sender: m.sender,
            kind: match m.kind {
                chat::ChatKind::Privmsg => ChatKind::Privmsg,
                chat::ChatKind::Notice => ChatKind::Notice,
                chat::ChatKind::Action => ChatKind::Action,
            },
            text: m.text,
            tags: m
                .tags
                .into_iter()
                .map(|(key, value)| ChatTag { key, value })
                .collect(),
        }
    }
}

impl From<chat::MembershipEvent> for MembershipEvent {
    fn from(e: chat::MembershipEvent) -> Self {
        use chat::MembershipEvent as M;
        match e {
            M::Names { channel, nicks } => MembershipEvent::Names { channel, nicks },
            M::Joined { channel, nick } => MembershipEvent::Joined { channel, nick },
            M::Parted {
                channel,
                nick,
                reason,
            } => MembershipEvent::Parted {
                channel,
                nick,
                reason,
            },
            M::Kicked {
                channel,
                nick,
                by,
                reason,
            } => MembershipEvent::Kicked {
                channel,
                nick,
                by,
                reason,
            },
            M::Quit {
                channel,
                nick,
                reason,
            } => MembershipEvent::Quit {
                channel,
                nick,
                reason,
            },
            M::Renamed {
                channel,
                nick,
                new_nick,
            } => MembershipEvent::Renamed {
                channel,
                nick,
                new_nick,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeskwireError;
    use crate::connection::connection_config;

    fn kind(e: DeskwireError) -> (bool, ErrorKind) {
        match e {
            DeskwireError::InvalidInput { kind, .. } => (true, kind),
            DeskwireError::Misuse { kind, .. } => (false, kind),
            DeskwireError::Remote { kind, .. } => (false, kind),
        }
    }

    #[test]
    fn refusals_have_their_kinds() {
        let desks =
            MultiDesk::new(connection_config("npcs".into(), "".into(), None), 0, 1).unwrap();
        desks.add_desk(0, "#a".into(), "rexd".into()).unwrap();
        let dup = desks.add_desk(0, "#a".into(), "rexd".into()).unwrap_err();
        assert_eq!(kind(dup), (true, ErrorKind::DuplicateChannel));
        let unknown = desks
            .request(0, "#zz".into(), "ls".into(), None)
            .unwrap_err();
        assert_eq!(kind(unknown), (false, ErrorKind::UnknownChannel));
        let unknown = desks
            .send_text("#zz".into(), "hi".into(), false)
            .unwrap_err();
        assert_eq!(kind(unknown), (false, ErrorKind::UnknownChannel));
        let reserved = desks
            .send_text("#a".into(), "OA1 x".into(), false)
            .unwrap_err();
        assert_eq!(kind(reserved), (true, ErrorKind::ReservedPrefix));
        assert_eq!(
            desks
                .send_text("#a".into(), "hi there".into(), true)
                .unwrap(),
            1
        );
        assert_eq!(
            kind(desks.members("#zz".into()).unwrap_err()),
            (false, ErrorKind::UnknownChannel)
        );
        assert_eq!(
            kind(desks.remove_desk(0, "#zz".into()).unwrap_err()),
            (false, ErrorKind::UnknownChannel)
        );
        desks.remove_desk(0, "#a".into()).unwrap();
        assert!(desks.channels().is_empty());
    }
}
