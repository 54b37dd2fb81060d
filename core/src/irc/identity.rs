//! Who we are on the server, and how many bytes of text fit in one `PRIVMSG`.
//!
//! A server relays our `PRIVMSG` to the channel with our source prefix `:nick!user@host ` in front,
//! and the relayed line must stay within 512 bytes including CRLF, so the text budget depends on
//! the prefix the server adds. [`Identity`] learns that prefix from the lines the server sends
//! (`001`, our own `JOIN`, an echoed message, `396`); until it knows, it assumes a worst case from
//! ISUPPORT `NICKLEN`/`USERLEN`/`HOSTLEN` or from conservative defaults.

use super::casemap::CaseMapping;
use super::message::Message;

/// The IRC line limit, CRLF included.
pub const MAX_LINE_BYTES: usize = 512;

/// User name length assumed when neither the prefix nor `USERLEN` is known (IRCv3 worst case).
pub const DEFAULT_USERLEN: usize = 20;
/// Host length assumed when neither the prefix nor `HOSTLEN` is known (RFC 1035 label limit).
pub const DEFAULT_HOSTLEN: usize = 63;

/// The longest `LINELEN` taken from a server (CRLF included): what a line decoder takes
/// without tags by default, so a desk reading the lines needs no other setting.
pub const MAX_LINELEN: usize = 8_192;

/// Our nick, the user and host the server shows for us, and the server's ISUPPORT limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    nick: String,
    user: Option<String>,
    host: Option<String>,
    userlen: Option<usize>,
    hostlen: Option<usize>,
    /// ISUPPORT `LINELEN`: the longest line, CRLF included, the server takes and relays.
    linelen: Option<usize>,
    /// ISUPPORT `NICKLEN`: the longest nick the server gives anyone.
    nicklen: Option<usize>,
    /// ISUPPORT `CHANNELLEN`: the longest channel name the server takes.
    channellen: Option<usize>,
    /// ISUPPORT `WHOX`: `WHO` takes a field list (accounts among them).
    whox: bool,
    casemapping: CaseMapping,
}

impl Identity {
    /// A fresh identity for `nick`, nothing learned yet.
    pub fn new(nick: &str) -> Self {
        Identity {
            nick: nick.to_owned(),
            user: None,
            host: None,
            userlen: None,
            hostlen: None,
            linelen: None,
            nicklen: None,
            channellen: None,
            whox: false,
            casemapping: CaseMapping::default(),
        }
    }

    /// Our current nick.
    pub fn nick(&self) -> &str {
        &self.nick
    }

    /// The case mapping the server announced (RFC 1459 until it says otherwise).
    pub fn casemapping(&self) -> CaseMapping {
        self.casemapping
    }

    /// The prefix the server adds to our relayed lines, when fully learned: `nick!user@host`.
    pub fn learned_prefix(&self) -> Option<String> {
        match (&self.user, &self.host) {
            (Some(user), Some(host)) => Some(format!("{}!{}@{}", self.nick, user, host)),
            _ => None,
        }
    }

    /// Sets our nick (for example after a nick-in-use fallback); the user and host stay.
    pub fn set_nick(&mut self, nick: &str) {
        self.nick = nick.to_owned();
    }

    /// Records a learned user and host (for example from a host's own IRC client).
    pub fn set_user_host(&mut self, user: &str, host: &str) {
        self.user = Some(user.to_owned());
        self.host = Some(host.to_owned());
    }

    /// Whether `nick` is ours under the server's case mapping.
    pub fn is_me(&self, nick: &str) -> bool {
        self.casemapping.eq(nick, &self.nick)
    }

    /// Learns from one line the server sent. Returns whether anything changed.
    pub fn observe(&mut self, msg: &Message<'_>) -> bool {
        // Most lines are other people's messages: skip them before copying anything.
        let relevant = matches!(msg.command, "001" | "005" | "396")
            || msg.source.is_some_and(|s| self.is_me(s.nick));
        if !relevant {
            return false;
        }
        let before = self.clone();
        match msg.command {
            // 001 <nick> :Welcome to the network nick!user@host
            "001" => {
                if let Some(nick) = msg.param(0) {
                    self.set_nick(nick);
                }
                if let Some(full) = msg.trailing().and_then(|t| t.rsplit(' ').next()) {
                    self.learn_from_source(full);
                }
            }
            // 005 <nick> TOKEN[=value] ... :are supported by this server
            "005" => {
                let params = msg.params();
                let tokens = params.get(1..params.len().saturating_sub(1)).unwrap_or(&[]);
                for token in tokens {
                    let (key, value) = token.split_once('=').unwrap_or((token, ""));
                    match key {
                        "USERLEN" => self.userlen = value.parse().ok(),
                        "HOSTLEN" => self.hostlen = value.parse().ok(),
                        "NICKLEN" => self.nicklen = value.parse().ok().filter(|&n| n > 0),
                        // No value, or `0`, is no limit.
                        "CHANNELLEN" => self.channellen = value.parse().ok().filter(|&n| n > 0),
                        // Never below IRC's 512; at most what a line decoder takes by default.
                        "LINELEN" => {
                            self.linelen = value
                                .parse::<usize>()
                                .ok()
                                .map(|n| n.clamp(MAX_LINE_BYTES, MAX_LINELEN));
                        }
                        "WHOX" => self.whox = true,
                        "CASEMAPPING" => self.casemapping = CaseMapping::from_isupport(value),
                        _ => {}
                    }
                }
            }
            // 396 <nick> <host> :is now your displayed host
            "396" => {
                if let Some(host) = msg.param(1) {
                    self.host = Some(host.to_owned());
                }
            }
            _ => {
                if let Some(source) = msg.source.filter(|s| self.is_me(s.nick)) {
                    if let (Some(user), Some(host)) = (source.user, source.host) {
                        self.user = Some(user.to_owned());
                        self.host = Some(host.to_owned());
                    }
                    if msg.is("NICK")
                        && let Some(new) = msg.param(0)
                    {
                        self.set_nick(new);
                    }
                }
            }
        }
        *self != before
    }

    fn learn_from_source(&mut self, full: &str) {
        let source = super::message::Source::parse(full);
        if let (true, Some(user), Some(host)) = (self.is_me(source.nick), source.user, source.host)
        {
            self.user = Some(user.to_owned());
            self.host = Some(host.to_owned());
        }
    }

    /// Length of the prefix `:nick!user@host ` the server adds when relaying our lines: exact
    /// once learned, otherwise a worst case (an ident `~` included).
    pub fn relay_prefix_len(&self) -> usize {
        let user = match &self.user {
            Some(user) => user.len(),
            None => self.userlen.unwrap_or(DEFAULT_USERLEN) + 1,
        };
        let host = match &self.host {
            Some(host) => host.len(),
            None => self.hostlen.unwrap_or(DEFAULT_HOSTLEN),
        };
        1 + self.nick.len() + 1 + user + 1 + host + 1
    }

    /// How many bytes of text fit in one `PRIVMSG <target> :<text>` so that the line the server
    /// relays, prefix and CRLF included, stays within 512 bytes. Our own outgoing line is then
    /// shorter still, so it fits the server's 510-byte input limit too.
    pub fn privmsg_text_budget(&self, target: &str) -> usize {
        self.privmsg_text_budget_within(target, MAX_LINE_BYTES)
    }

    /// The longest line, CRLF included, the server takes and relays: its ISUPPORT `LINELEN`
    /// (at most [`MAX_LINELEN`]), else IRC's 512.
    pub fn line_limit(&self) -> usize {
        self.linelen.unwrap_or(MAX_LINE_BYTES)
    }

    /// The longest nick the server gives anyone (ISUPPORT `NICKLEN`), once it has said.
    pub fn nick_len(&self) -> Option<usize> {
        self.nicklen
    }

    /// The longest channel name the server takes (ISUPPORT `CHANNELLEN`), once it has said.
    pub fn channel_len(&self) -> Option<usize> {
        self.channellen
    }

    /// Whether the server's `WHO` takes a WHOX field list (ISUPPORT `WHOX`).
    pub fn has_whox(&self) -> bool {
        self.whox
    }

    /// [`Identity::privmsg_text_budget`] for relayed lines of up to `max_line` bytes.
    pub fn privmsg_text_budget_within(&self, target: &str, max_line: usize) -> usize {
        let overhead = self.relay_prefix_len() + "PRIVMSG ".len() + target.len() + " :".len() + 2;
        max_line.saturating_sub(overhead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observe(id: &mut Identity, line: &str) -> bool {
        id.observe(&Message::parse(line.as_bytes()).unwrap())
    }

    #[test]
    fn worst_case_until_learned() {
        let id = Identity::new("desk");
        // 1 + 4 + 1 + 21 + 1 + 63 + 1
        assert_eq!(id.relay_prefix_len(), 92);
        assert_eq!(id.privmsg_text_budget("#desk"), 512 - 92 - 8 - 5 - 2 - 2);
        assert_eq!(id.learned_prefix(), None);
    }

    #[test]
    fn learns_from_isupport_then_join() {
        let mut id = Identity::new("desk");
        assert!(observe(
            &mut id,
            ":srv 005 desk USERLEN=9 HOSTLEN=30 CASEMAPPING=ascii :are supported"
        ));
        assert_eq!(id.relay_prefix_len(), 1 + 4 + 1 + 10 + 1 + 30 + 1);
        assert_eq!(id.casemapping(), CaseMapping::Ascii);
        assert!(observe(&mut id, ":desk!~desk@127.0.0.1 JOIN #desk"));
        assert_eq!(id.learned_prefix().as_deref(), Some("desk!~desk@127.0.0.1"));
        assert_eq!(id.relay_prefix_len(), ":desk!~desk@127.0.0.1 ".len());
        // Someone else's JOIN teaches nothing.
        assert!(!observe(&mut id, ":bob!b@elsewhere JOIN #desk"));
    }

    #[test]
    fn linelen_is_taken_within_bounds() {
        let mut id = Identity::new("desk");
        assert_eq!(id.line_limit(), 512);
        assert!(observe(
            &mut id,
            ":srv 005 desk LINELEN=2048 :are supported"
        ));
        assert_eq!(id.line_limit(), 2048);
        let budget = id.privmsg_text_budget_within("#desk", id.line_limit());
        assert_eq!(budget, id.privmsg_text_budget("#desk") + 2048 - 512);
        observe(&mut id, ":srv 005 desk LINELEN=100 :are supported");
        assert_eq!(id.line_limit(), 512, "never below IRC's 512");
        observe(&mut id, ":srv 005 desk LINELEN=99999999 :are supported");
        assert_eq!(id.line_limit(), MAX_LINELEN);
        observe(&mut id, ":srv 005 desk LINELEN=x :are supported");
        assert_eq!(id.line_limit(), 512);
    }

    #[test]
    fn learns_from_welcome_nick_change_and_396() {
        let mut id = Identity::new("desk");
        observe(
            &mut id,
            ":srv 001 desk_ :Welcome to the Internet Relay Network desk_!~d@10.0.0.1",
        );
        assert_eq!(id.nick(), "desk_");
        assert_eq!(id.learned_prefix().as_deref(), Some("desk_!~d@10.0.0.1"));
        observe(
            &mut id,
            ":srv 396 desk_ cloaked.host :is now your displayed host",
        );
        assert_eq!(
            id.learned_prefix().as_deref(),
            Some("desk_!~d@cloaked.host")
        );
        observe(&mut id, ":DESK_!~d@cloaked.host NICK :desk2");
        assert_eq!(id.nick(), "desk2");
        assert!(id.is_me("Desk2"));
    }
}
