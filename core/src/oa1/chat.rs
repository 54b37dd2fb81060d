//! Channel chat beside OA1 (issue: the VR Offices game uses the desk channel for chat too: a
//! message that is not OA1 starts an NPC's turn, and the reply goes back in pieces).
//!
//! Opt-in on a connection of many channels ([`super::MultiDesk::set_chat`],
//! [`super::MultiRemote::set_chat`]): the channels' `PRIVMSG`s and `NOTICE`s that are not OA1
//! frames come out as [`ChatMessage`]s (a CTCP `ACTION` as [`ChatKind::Action`]), and
//! `send_text` sends plain text through the connection's pacing, in turn with the channels' OA1
//! lines. A host that does not ask sees nothing new.
//!
//! Membership is opt-in on its own ([`super::MultiDesk::set_membership`]): who joins, parts, is
//! kicked, quits or changes nick in a carried channel, and the whole `NAMES` list once the
//! server has sent it, come out as [`MembershipEvent`]s, in order with the chat.

use std::collections::VecDeque;

use serde::Serialize;

/// The most messages and membership changes kept for the host before the oldest are dropped
/// (counted in `MultiDesk::chat_dropped`).
pub const MAX_INBOX: usize = 1024;
/// The most text bytes a channel may have queued to send.
pub const MAX_OUTBOX_BYTES: usize = 64 * 1024;
/// A line of chat never starts with this: the spec reserves it for tools (`OA1 `, and deskwire's
/// authenticated `OA1A `).
const RESERVED: [&str; 2] = ["OA1 ", "OA1A "];

/// How a chat message was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatKind {
    /// A `PRIVMSG`.
    Privmsg,
    /// A `NOTICE`.
    Notice,
    /// A CTCP `ACTION` (`/me`), its text without the CTCP wrapping.
    Action,
}

/// A message in one of the connection's channels that is not an OA1 frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// The channel, as the connection carries it.
    pub channel: String,
    /// Who sent it: `nick!user@host` as the server wrote it.
    pub sender: String,
    /// How it was sent.
    pub kind: ChatKind,
    /// The text (invalid UTF-8 replaced by U+FFFD).
    pub text: String,
    /// The IRCv3 message tags (`account`, `time`, ...), in order.
    pub tags: Vec<(String, String)>,
}

/// A change in who is in one of the connection's channels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MembershipEvent {
    /// The channel's whole member list, when the server has ended a `NAMES` reply (after our
    /// own join, or a `NAMES` asked for): nicks without their status prefix (`@`, `+`), our own
    /// included; at most 1024.
    Names {
        /// The channel, as the connection carries it.
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
        /// Who kicked (a nick, or a server's name).
        by: String,
        /// The kick message, if any.
        reason: Option<String>,
    },
    /// `nick` quit IRC; one event for each carried channel it was seen in.
    Quit {
        /// The channel.
        channel: String,
        /// Who quit.
        nick: String,
        /// The quit message, if any (a netsplit's names the two servers).
        reason: Option<String>,
    },
    /// `nick` is now `new_nick`; one event for each carried channel it was seen in (every
    /// joined channel for our own nick).
    Renamed {
        /// The channel.
        channel: String,
        /// The old nick.
        nick: String,
        /// The new one.
        new_nick: String,
    },
}

impl MembershipEvent {
    /// The channel the change happened in.
    pub fn channel(&self) -> &str {
        match self {
            MembershipEvent::Names { channel, .. }
            | MembershipEvent::Joined { channel, .. }
            | MembershipEvent::Parted { channel, .. }
            | MembershipEvent::Kicked { channel, .. }
            | MembershipEvent::Quit { channel, .. }
            | MembershipEvent::Renamed { channel, .. } => channel,
        }
    }
}

/// Why text was not queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChatError {
    /// The connection does not carry this channel.
    #[error("{0} is not one of this connection's channels")]
    UnknownChannel(String),
    /// Nothing to send.
    #[error("the text is empty")]
    Empty,
    /// IRC cannot carry NUL, CR or LF inside a line.
    #[error("the text holds NUL, CR or LF, which IRC cannot carry in a line")]
    ForbiddenByte,
    /// The text starts with `OA1 ` (or `OA1A `), which the spec reserves for tool frames.
    #[error("a chat line may not start with {0:?}: the OA1 spec reserves it for tool frames")]
    ReservedPrefix(&'static str),
    /// The text would take what waits for the channel past [`MAX_OUTBOX_BYTES`] (or is longer
    /// than that by itself).
    #[error("{}", queue_full(.channel, *.queued, *.adding))]
    QueueFull {
        /// The channel.
        channel: String,
        /// Bytes queued already.
        queued: usize,
        /// Bytes the refused text would have added (its lines).
        adding: usize,
    },
    /// The connection has ended.
    #[error("the IRC connection has ended")]
    Closed,
}

/// [`ChatError::QueueFull`]'s words: a text too long by itself is not a queue that is full.
fn queue_full(channel: &str, queued: usize, adding: usize) -> String {
    match queued {
        0 => format!(
            "the text takes {adding} bytes of lines, more than the {MAX_OUTBOX_BYTES} that may \
             wait to go to {channel}: send it in parts"
        ),
        _ => format!(
            "{queued} bytes already wait to go to {channel} and the text would add {adding}; \
             the most is {MAX_OUTBOX_BYTES}"
        ),
    }
}

/// What waits in the inbox: chat, and membership changes, in the order their lines came.
#[derive(Debug)]
pub(super) enum ChatItem {
    Message(ChatMessage),
    Membership(MembershipEvent),
}

/// The messages and membership changes waiting for the host, bounded together.
#[derive(Debug, Default)]
pub(super) struct ChatInbox {
    items: VecDeque<ChatItem>,
    /// The host asked for chat messages.
    pub(super) messages: bool,
    /// The host asked for membership changes.
    pub(super) membership: bool,
    /// Items dropped because the host did not take them.
    pub(super) dropped: u64,
}

impl ChatInbox {
    pub(super) fn push(&mut self, item: ChatItem) {
        if self.items.len() >= MAX_INBOX {
            self.items.pop_front();
            self.dropped += 1;
        }
        self.items.push_back(item);
    }

    pub(super) fn pop(&mut self) -> Option<ChatItem> {
        self.items.pop_front()
    }
}

/// Whether a channel message's text is an OA1 frame (which OA1 reads, not chat).
pub(super) fn is_frame(text: &[u8]) -> bool {
    RESERVED.iter().any(|p| text.starts_with(p.as_bytes()))
}

/// The text and kind of a message, a CTCP `ACTION` unwrapped; `None` for other CTCP
/// (`VERSION`, `PING`, ...), which are not chat.
pub(super) fn classify(text: &[u8], notice: bool) -> Option<(ChatKind, String)> {
    let text = String::from_utf8_lossy(text);
    if let Some(ctcp) = text.strip_prefix('\u{1}') {
        let ctcp = ctcp.strip_suffix('\u{1}').unwrap_or(ctcp);
        return ctcp
            .strip_prefix("ACTION ")
            .map(|action| (ChatKind::Action, action.to_owned()));
    }
    let kind = match notice {
        true => ChatKind::Notice,
        false => ChatKind::Privmsg,
    };
    Some((kind, text.into_owned()))
}

/// Checks `text` and cuts it into lines of at most `budget` bytes: at a space where there is
/// one within the line (the space is dropped), else at a character boundary. No line starts
/// with a reserved prefix: a cut that would put `OA1 ` first moves back one word.
pub(super) fn split(text: &str, budget: usize) -> Result<Vec<String>, ChatError> {
    if text.trim().is_empty() {
        return Err(ChatError::Empty);
    }
    if text.bytes().any(|b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err(ChatError::ForbiddenByte);
    }
    if let Some(prefix) = RESERVED.iter().find(|p| text.starts_with(**p)) {
        return Err(ChatError::ReservedPrefix(prefix));
    }
    let budget = budget.max(16);
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if rest.len() <= budget {
            lines.push(rest.to_owned());
            break;
        }
        let mut cut = budget;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        // The last space within the line, if it leaves something on it.
        let mut at_space = rest[..cut].rfind(' ').filter(|&i| i > 0);
        // What follows must not read as a tool frame.
        while let Some(i) = at_space
            && is_frame(&rest.as_bytes()[i + 1..])
        {
            at_space = rest[..i].rfind(' ').filter(|&j| j > 0);
        }
        let (line, next) = match at_space {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => {
                // A hard cut that would put `OA1 ` first moves back a character.
                while cut > 1 && is_frame(&rest.as_bytes()[cut..]) {
                    cut -= 1;
                    while !rest.is_char_boundary(cut) {
                        cut -= 1;
                    }
                }
                (&rest[..cut], &rest[cut..])
            }
        };
        lines.push(line.to_owned());
        rest = next;
    }
    Ok(lines.into_iter().filter(|l| !l.is_empty()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_spaces_within_the_budget() {
        let lines = split("the quick brown fox jumps over the lazy dog", 16).unwrap();
        assert_eq!(lines, ["the quick brown", "fox jumps over", "the lazy dog"]);
        assert!(lines.iter().all(|l| l.len() <= 16));
    }

    #[test]
    fn a_long_word_is_cut_at_a_character_boundary() {
        let text = "é".repeat(20); // 40 bytes
        let lines = split(&text, 17).unwrap();
        assert_eq!(lines.concat(), text);
        assert!(lines.iter().all(|l| l.len() <= 17), "{lines:?}");
    }

    #[test]
    fn no_line_starts_with_a_reserved_prefix() {
        assert_eq!(
            split("OA1 REQ x", 100),
            Err(ChatError::ReservedPrefix("OA1 "))
        );
        assert_eq!(
            split("OA1A 1 2", 100),
            Err(ChatError::ReservedPrefix("OA1A "))
        );
        let lines = split("say hello to OA1 REQ id 1 0 rm", 16).unwrap();
        assert!(lines.iter().all(|l| !is_frame(l.as_bytes())), "{lines:?}");
        assert_eq!(lines.join(" "), "say hello to OA1 REQ id 1 0 rm");
        assert!(lines.iter().all(|l| l.len() <= 16), "{lines:?}");
    }

    #[test]
    fn bad_text_is_refused_by_name() {
        assert_eq!(split("   ", 100), Err(ChatError::Empty));
        assert_eq!(split("a\nb", 100), Err(ChatError::ForbiddenByte));
        assert_eq!(split("a\0b", 100), Err(ChatError::ForbiddenByte));
    }

    #[test]
    fn actions_are_unwrapped_and_other_ctcp_is_not_chat() {
        assert_eq!(
            classify(b"\x01ACTION waves\x01", false),
            Some((ChatKind::Action, "waves".into()))
        );
        assert_eq!(classify(b"\x01VERSION\x01", false), None);
        assert_eq!(classify(b"hi", true), Some((ChatKind::Notice, "hi".into())));
    }
}
