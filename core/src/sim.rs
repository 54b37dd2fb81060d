//! An in-memory IRC channel that behaves like a real server where OA1 cares: it adds the sender's
//! `:nick!~user@host` prefix when relaying, refuses lines over 510 bytes from clients (ngircd
//! disconnects for them), trims trailing whitespace from what it receives (ngircd's
//! `ngt_TrimStr`), cuts relayed lines over 512 bytes the way ngircd does (`[CUT]`), and can inject
//! channel noise. For tests, demos and examples; it does no I/O.
//!
//! [`Relay`] moves whole lines between nicks, for the bare OA1 endpoints; [`Network`] is a whole
//! in-memory IRC server over raw bytes (registration, `JOIN`, `PING`), for the per-connection
//! engines.

mod network;

pub use network::{ClientId, MAX_PENDING_BYTES, Network};

use std::collections::VecDeque;

use crate::irc::{CaseMapping, MAX_LINE_BYTES, Message};
use crate::oa1::IdGenerator;

/// A line a client sent that the relay refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// Over 510 bytes before CRLF (a real server drops the connection).
    #[error("line of {0} bytes is over the 510-byte limit")]
    TooLong(usize),
    /// Not an IRC line.
    #[error("not an IRC line: {0}")]
    Invalid(#[from] crate::irc::ParseError),
    /// The sender never joined.
    #[error("{0} is not on the channel")]
    NotAMember(String),
}

/// What the relay saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayStats {
    /// Channel messages relayed to members.
    pub relayed: u64,
    /// Relayed lines that were over 512 bytes with CRLF and got cut (a budget bug if not zero).
    pub cut_lines: u64,
    /// The longest relayed line, CRLF included.
    pub longest_line: usize,
    /// Noise lines injected.
    pub noise: u64,
}

#[derive(Debug)]
struct Member {
    nick: String,
    user: String,
    host: String,
    inbox: VecDeque<String>,
}

impl Member {
    fn prefix(&self) -> String {
        format!("{}!~{}@{}", self.nick, self.user, self.host)
    }
}

/// The channel. See the module docs.
#[derive(Debug)]
pub struct Relay {
    channel: String,
    members: Vec<Member>,
    noise_every: u32,
    since_noise: u32,
    rng: IdGenerator,
    stats: RelayStats,
}

pub(crate) const NOISE: &[&str] = &[
    ":chatty!~chat@lounge.example PRIVMSG {chan} :anyone seen the build logs?",
    ":chatty!~chat@lounge.example PRIVMSG {chan} :OA1 RES {id} 1 0 spoofed answer",
    ":chatty!~chat@lounge.example PRIVMSG {chan} :OA1 garbage frame",
    ":chatty!~chat@lounge.example PRIVMSG {chan} :OA1 RES {id} 0 0 bad seq",
    ":services.example NOTICE {chan} :OA1 RES {id} 1 0 notice is not a frame",
    ":chatty!~chat@lounge.example PRIVMSG #elsewhere :OA1 REQ {id} 1 0 other channel",
    ":chatty!~chat@lounge.example PRIVMSG {chan} :\u{1}ACTION waves\u{1}",
    "PING :sim.example",
    "@time=2026-11-22T07:00:00.000Z :chatty!~chat@lounge.example PRIVMSG {chan} :tagged chatter ünïcødé",
];

impl Relay {
    /// An empty channel. `seed` fixes the noise sequence.
    pub fn new(channel: &str, seed: u64) -> Self {
        Relay {
            channel: channel.to_owned(),
            members: Vec::new(),
            noise_every: 0,
            since_noise: 0,
            rng: IdGenerator::new(seed),
            stats: RelayStats::default(),
        }
    }

    /// Injects one noise line to every member after every `n` relayed messages (0: never).
    pub fn with_noise(mut self, n: u32) -> Self {
        self.noise_every = n;
        self
    }

    /// The channel name.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Adds a member: it receives a welcome (`001`) and everyone sees its `JOIN`.
    pub fn join(&mut self, nick: &str, user: &str, host: &str) {
        let member = Member {
            nick: nick.to_owned(),
            user: user.to_owned(),
            host: host.to_owned(),
            inbox: VecDeque::new(),
        };
        let prefix = member.prefix();
        self.members.push(member);
        let welcome = format!(":sim.example 001 {nick} :Welcome to the simulated network {prefix}");
        let join = format!(":{prefix} JOIN {}", self.channel);
        for m in &mut self.members {
            if m.nick == nick {
                m.inbox.push_back(welcome.clone());
            }
            m.inbox.push_back(join.clone());
        }
    }

    /// Takes one line (without CRLF) from member `from`, as a server would.
    pub fn send(&mut self, from: &str, line: &str) -> Result<(), RelayError> {
        if line.len() > MAX_LINE_BYTES - 2 {
            return Err(RelayError::TooLong(line.len()));
        }
        let line = line.trim_end_matches([' ', '\t']);
        let msg = Message::parse(line.as_bytes())?;
        let sender = self
            .members
            .iter()
            .find(|m| m.nick == from)
            .ok_or_else(|| RelayError::NotAMember(from.to_owned()))?;
        let is_channel_msg = (msg.is("PRIVMSG") || msg.is("NOTICE"))
            && msg
                .param(0)
                .is_some_and(|t| CaseMapping::Rfc1459.eq(t, &self.channel));
        if !is_channel_msg {
            return Ok(());
        }
        let mut relayed = format!(":{} {}", sender.prefix(), line);
        self.stats.longest_line = self.stats.longest_line.max(relayed.len() + 2);
        if let Some(cut) = relayed_cut(relayed.as_bytes()) {
            relayed.truncate(cut);
            relayed.push_str(CUT_MARK);
            self.stats.cut_lines += 1;
        }
        for m in self.members.iter_mut().filter(|m| m.nick != from) {
            m.inbox.push_back(relayed.clone());
        }
        self.stats.relayed += 1;
        self.maybe_inject_noise();
        Ok(())
    }

    fn maybe_inject_noise(&mut self) {
        if self.noise_every == 0 {
            return;
        }
        self.since_noise += 1;
        if self.since_noise < self.noise_every {
            return;
        }
        self.since_noise = 0;
        let pick = (self.rng.next_u64() % NOISE.len() as u64) as usize;
        let id = self.rng.next_id();
        let line = NOISE[pick]
            .replace("{chan}", &self.channel)
            .replace("{id}", &id);
        for m in &mut self.members {
            m.inbox.push_back(line.clone());
        }
        self.stats.noise += 1;
    }

    /// The next line (without CRLF) for member `nick`.
    pub fn recv(&mut self, nick: &str) -> Option<String> {
        self.members
            .iter_mut()
            .find(|m| m.nick == nick)?
            .inbox
            .pop_front()
    }

    /// Counters.
    pub fn stats(&self) -> RelayStats {
        self.stats
    }
}

/// What ngircd appends to a relayed line it cut.
pub(crate) const CUT_MARK: &str = "[CUT]";

/// Where a relayed line that would be over 512 bytes with its CRLF is cut, the way ngircd does
/// (by bytes, then [`CUT_MARK`]; ngircd may even split a UTF-8 sequence, this keeps the text
/// valid), or `None` when it fits.
pub(crate) fn relayed_cut(relayed: &[u8]) -> Option<usize> {
    relayed_cut_at(relayed, MAX_LINE_BYTES)
}

/// [`relayed_cut`] for a server whose lines may be `max_line` bytes with their CRLF.
pub(crate) fn relayed_cut_at(relayed: &[u8], max_line: usize) -> Option<usize> {
    if relayed.len() + 2 <= max_line {
        return None;
    }
    let mut cut = max_line - 2 - CUT_MARK.len();
    while relayed[cut] & 0xC0 == 0x80 {
        cut -= 1;
    }
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relays_with_prefix_and_enforces_limits() {
        let mut relay = Relay::new("#desk", 1);
        relay.join("desk", "desk", "127.0.0.1");
        relay.join("bot", "bot", "127.0.0.1");
        assert!(relay.recv("desk").unwrap().contains(" 001 desk "));
        while relay.recv("desk").is_some() {}
        while relay.recv("bot").is_some() {}
        relay.send("desk", "PRIVMSG #desk :hi").unwrap();
        assert_eq!(
            relay.recv("bot").as_deref(),
            Some(":desk!~desk@127.0.0.1 PRIVMSG #desk :hi")
        );
        assert_eq!(relay.recv("desk"), None, "no echo to the sender");
        relay
            .send("desk", "PRIVMSG #desk :trailing space  \t")
            .unwrap();
        assert_eq!(
            relay.recv("bot").as_deref(),
            Some(":desk!~desk@127.0.0.1 PRIVMSG #desk :trailing space")
        );
        let long = format!("PRIVMSG #desk :{}", "x".repeat(496));
        assert_eq!(relay.send("desk", &long), Err(RelayError::TooLong(510 + 1)));
        let fits = format!("PRIVMSG #desk :{}", "x".repeat(495));
        relay.send("desk", &fits).unwrap();
        let got = relay.recv("bot").unwrap();
        assert!(got.ends_with("[CUT]"));
        assert_eq!(got.len(), 510);
        assert_eq!(relay.stats().cut_lines, 1);
    }

    #[test]
    fn noise_is_injected() {
        let mut relay = Relay::new("#desk", 1).with_noise(1);
        relay.join("a", "a", "h");
        relay.join("b", "b", "h");
        for _ in 0..20 {
            relay.send("a", "PRIVMSG #desk :x").unwrap();
        }
        assert_eq!(relay.stats().noise, 20);
    }
}
