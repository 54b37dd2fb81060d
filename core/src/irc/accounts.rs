//! Who is logged in to one account, as the server says it: on each message (IRCv3
//! `account-tag`), or, on servers without that tag, from what it says about the channel's members
//! (`extended-join` when they join, `account-notify` when they log in or out, and a WHOX reply
//! for those already there when we join).
//!
//! An `account:` allowed sender ([`super::SenderPattern::Account`]) reads it. Where the server
//! sends the tag, the tag alone is taken: a message without one is from nobody logged in. The
//! member list is taken only where `account-notify` is on, since without it a logout would go
//! unseen and a nick would keep an account it no longer has.

use std::borrow::Cow;

use super::casemap::CaseMapping;
use super::identity::Identity;
use super::message::Message;

/// The most nicks held as logged in to the account: one account rarely has more than a few
/// connections; past this, more are refused (never wrongly taken).
pub const MAX_WATCHED_NICKS: usize = 64;

/// The WHOX query token of our `WHO` (any 1–3 digits; it tells our replies from others').
pub const WHOX_TOKEN: &str = "735";

/// The nicks in our channel that the server said are logged in to `account`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountWatch {
    account: String,
    nicks: Vec<String>,
    /// `account-tag` is on: each message says its sender's account.
    tag: bool,
    /// `account-notify` is on: the server says when a member logs in or out.
    notify: bool,
}

impl AccountWatch {
    /// Watches who is logged in to `account`; nothing is known yet.
    pub fn new(account: &str) -> Self {
        AccountWatch {
            account: account.to_owned(),
            nicks: Vec::new(),
            tag: false,
            notify: false,
        }
    }

    /// The capabilities the server enabled: whether messages carry `account-tag`, and whether
    /// `account-notify` is on.
    pub fn set_sources(&mut self, account_tag: bool, account_notify: bool) {
        self.tag = account_tag;
        self.notify = account_notify;
    }

    /// The account of the sender `nick` of one message, whose `account` tag is `tag`.
    pub fn account_of<'a>(
        &'a self,
        casemap: CaseMapping,
        nick: &str,
        tag: Option<Cow<'a, str>>,
    ) -> Option<Cow<'a, str>> {
        if self.tag || tag.is_some() {
            return tag;
        }
        (self.notify && self.position(casemap, nick).is_some())
            .then_some(Cow::Borrowed(self.account.as_str()))
    }

    /// Learns from one line: members joining (`extended-join`), logging in or out
    /// (`account-notify`), changing nick or leaving, and WHOX replies. Our own join or part of
    /// `channel` starts again from nothing.
    pub fn observe(&mut self, identity: &Identity, channel: &str, msg: &Message<'_>) {
        let casemap = identity.casemapping();
        let ours = |name: Option<&str>| name.is_some_and(|c| casemap.eq(c, channel));
        let source = msg.source_nick();
        let from_me = source.is_some_and(|n| identity.is_me(n));
        match msg.command {
            // JOIN #chan account :real name (extended-join; `*` is no account)
            "JOIN" if ours(msg.param(0)) => match (from_me, source) {
                (true, _) => self.nicks.clear(),
                (false, Some(nick)) => self.set(casemap, nick, msg.param(1)),
                _ => {}
            },
            // ACCOUNT name, or ACCOUNT * on logout (account-notify)
            "ACCOUNT" => {
                if let Some(nick) = source.filter(|_| !from_me) {
                    self.set(casemap, nick, msg.param(0));
                }
            }
            "NICK" => {
                if let (Some(old), Some(new)) = (source, msg.param(0))
                    && let Some(i) = self.position(casemap, old)
                {
                    self.nicks[i] = new.to_owned();
                }
            }
            "PART" if ours(msg.param(0)) => match (from_me, source) {
                (true, _) => self.nicks.clear(),
                (false, Some(nick)) => self.remove(casemap, nick),
                _ => {}
            },
            "KICK" if ours(msg.param(0)) => match msg.param(1) {
                Some(victim) if identity.is_me(victim) => self.nicks.clear(),
                Some(victim) => self.remove(casemap, victim),
                None => {}
            },
            "QUIT" => {
                if let Some(nick) = source {
                    self.remove(casemap, nick);
                }
            }
            // 354 <me> <token> <nick> <account>: our `WHO #chan %tna,TOKEN`; `0` is no account
            "354" => {
                if let [_, token, nick, account] = msg.params()
                    && *token == WHOX_TOKEN
                    && !identity.is_me(nick)
                {
                    let account = (*account != "0").then_some(*account);
                    self.set(casemap, nick, Some(account.unwrap_or("*")));
                }
            }
            _ => {}
        }
    }

    fn set(&mut self, casemap: CaseMapping, nick: &str, account: Option<&str>) {
        let logged_in = account.is_some_and(|a| a != "*" && casemap.eq(a, &self.account));
        match (logged_in, self.position(casemap, nick)) {
            (true, None) if self.nicks.len() < MAX_WATCHED_NICKS => {
                self.nicks.push(nick.to_owned())
            }
            (false, Some(i)) => _ = self.nicks.swap_remove(i),
            _ => {}
        }
    }

    fn remove(&mut self, casemap: CaseMapping, nick: &str) {
        if let Some(i) = self.position(casemap, nick) {
            self.nicks.swap_remove(i);
        }
    }

    fn position(&self, casemap: CaseMapping, nick: &str) -> Option<usize> {
        self.nicks.iter().position(|n| casemap.eq(n, nick))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(watch: &mut AccountWatch, me: &Identity, lines: &[&str]) {
        for line in lines {
            watch.observe(me, "#desk", &Message::parse(line.as_bytes()).unwrap());
        }
    }

    fn who(watch: &AccountWatch, nick: &str) -> Option<String> {
        watch
            .account_of(CaseMapping::default(), nick, None)
            .map(Cow::into_owned)
    }

    #[test]
    fn members_are_followed_through_joins_logins_nicks_and_leaving() {
        let me = Identity::new("rexd");
        let mut watch = AccountWatch::new("bob");
        watch.set_sources(false, true);
        feed(
            &mut watch,
            &me,
            &[
                ":bobdesk!b@h JOIN #desk bob :Bob",
                ":guest!g@h JOIN #desk * :Guest",
                ":other!o@h JOIN #elsewhere bob :Bob",
            ],
        );
        assert_eq!(who(&watch, "BOBDESK").as_deref(), Some("bob"));
        assert_eq!(who(&watch, "guest"), None);
        assert_eq!(who(&watch, "other"), None, "not our channel");
        feed(
            &mut watch,
            &me,
            &[":guest!g@h ACCOUNT Bob", ":bobdesk!b@h NICK bob2"],
        );
        assert_eq!(who(&watch, "guest").as_deref(), Some("bob"));
        assert_eq!(who(&watch, "bob2").as_deref(), Some("bob"));
        assert_eq!(who(&watch, "bobdesk"), None);
        feed(
            &mut watch,
            &me,
            &[":guest!g@h ACCOUNT *", ":bob2!b@h PART #desk"],
        );
        assert_eq!(who(&watch, "guest"), None, "logged out");
        assert_eq!(who(&watch, "bob2"), None, "left");
        feed(
            &mut watch,
            &me,
            &[
                ":srv 354 rexd 735 early bob",
                ":srv 354 rexd 735 nobody 0",
                ":srv 354 rexd 999 spoof bob",
            ],
        );
        assert_eq!(who(&watch, "early").as_deref(), Some("bob"));
        assert_eq!(who(&watch, "nobody"), None);
        assert_eq!(who(&watch, "spoof"), None, "another query's reply");
        feed(&mut watch, &me, &[":rexd!r@h JOIN #desk"]);
        assert_eq!(who(&watch, "early"), None, "our own join starts again");
    }

    #[test]
    fn the_tag_is_the_only_word_where_the_server_sends_it() {
        let me = Identity::new("rexd");
        let mut watch = AccountWatch::new("bob");
        feed(&mut watch, &me, &[":bobdesk!b@h JOIN #desk bob :Bob"]);
        // Without account-notify a logout would go unseen: the member list is not taken.
        assert_eq!(who(&watch, "bobdesk"), None);
        watch.set_sources(true, true);
        assert_eq!(who(&watch, "bobdesk"), None, "untagged: nobody logged in");
        let tagged = watch.account_of(CaseMapping::default(), "x", Some("bob".into()));
        assert_eq!(tagged.as_deref(), Some("bob"));
    }

    #[test]
    fn the_list_is_bounded() {
        let me = Identity::new("rexd");
        let mut watch = AccountWatch::new("bob");
        watch.set_sources(false, true);
        for i in 0..MAX_WATCHED_NICKS + 10 {
            feed(&mut watch, &me, &[&format!(":n{i}!u@h JOIN #desk bob :x")]);
        }
        assert_eq!(watch.nicks.len(), MAX_WATCHED_NICKS);
        assert_eq!(who(&watch, &format!("n{}", MAX_WATCHED_NICKS + 5)), None);
    }
}
