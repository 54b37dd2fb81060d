//! Finding the channels to serve by `LIST`, for device-code binding
//! ([`super::MultiRemote::discover`]): `LIST` once registered and then every `interval_ms`, and
//! every listed channel that carries the code ([`DeviceCode::matches`]) is joined and served.

use std::collections::VecDeque;

use serde::Serialize;

use super::device_code::DeviceCode;
use crate::irc::Message;

/// The least time between two `LIST`s: a listing is heavy for a server, and the game gives a
/// desk 30 s.
pub const MIN_INTERVAL_MS: u64 = 5_000;
/// The most channels one listing may add (a flood of look-alike channels cannot make the
/// remote join without end).
pub const MAX_FOUND_PER_LIST: usize = 64;

/// What discovery found or could not do. As JSON: `{"found": {"channel": ...}}`,
/// `{"list_refused": {"reply": ...}}`, `"list_empty"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DiscoveryEvent {
    /// A channel bound to the code was listed; it is joined and served now.
    Found {
        /// The channel, as the server listed it.
        channel: String,
    },
    /// The server refused `LIST` (its numeric and words): discovery cannot work there; join
    /// by name instead (`rexd --channel`).
    ListRefused {
        /// The reply, e.g. `481 Permission Denied`.
        reply: String,
    },
    /// A `LIST` ended without listing a single network channel (server-local `&` channels
    /// aside), not even one we are in: the server hides its list (from new connections, or
    /// altogether), the channels are secret (`+s`), or there are none yet. Said once until a
    /// listing shows channels again.
    ListEmpty,
}

/// The state of discovery on one connection.
#[derive(Debug)]
pub(super) struct Discovery {
    code: DeviceCode,
    interval_ms: u64,
    /// When the next `LIST` goes; `None` until registered.
    next_list_at: Option<u64>,
    /// Channels listed in the listing under way.
    listed: usize,
    /// Channels found in the listing under way.
    found_now: usize,
    found: VecDeque<String>,
    events: VecDeque<DiscoveryEvent>,
    said_empty: bool,
}

impl Discovery {
    pub(super) fn new(code: DeviceCode, interval_ms: u64) -> Self {
        Discovery {
            code,
            interval_ms: interval_ms.max(MIN_INTERVAL_MS),
            next_list_at: None,
            listed: 0,
            found_now: 0,
            found: VecDeque::new(),
            events: VecDeque::new(),
            said_empty: false,
        }
    }

    pub(super) fn code(&self) -> &DeviceCode {
        &self.code
    }

    /// Registered at `now`: the first `LIST` goes at once.
    pub(super) fn start(&mut self, now: u64) {
        self.next_list_at = Some(now);
    }

    /// Whether a `LIST` is due at `now`; if so, the next is scheduled.
    pub(super) fn take_due(&mut self, now: u64) -> bool {
        match self.next_list_at {
            Some(at) if at <= now => {
                self.next_list_at = Some(now.saturating_add(self.interval_ms));
                self.listed = 0;
                self.found_now = 0;
                true
            }
            _ => false,
        }
    }

    pub(super) fn deadline(&self) -> Option<u64> {
        self.next_list_at
    }

    /// Reads the replies to `LIST`: `322 me #chan users :topic`, `323` (the end), and the
    /// refusals some servers give.
    pub(super) fn on_message(&mut self, msg: &Message<'_>) {
        match msg.command {
            "322" => {
                // Server-local channels (`&SERVER`, which ngircd always lists) say nothing
                // about whether the network's channels are shown.
                if msg.param(1).is_some_and(|c| !c.starts_with('&')) {
                    self.listed += 1;
                }
                if let Some(channel) = msg.param(1)
                    && self.code.matches(channel)
                    && self.found_now < MAX_FOUND_PER_LIST
                {
                    self.found_now += 1;
                    self.found.push_back(channel.to_owned());
                }
            }
            "323" if self.listed == 0 && !self.said_empty => {
                self.said_empty = true;
                self.events.push_back(DiscoveryEvent::ListEmpty);
            }
            "323" if self.listed > 0 => self.said_empty = false,
            // 481: no privileges; 263: try again later; 416: too many matches; 421: LIST
            // unknown (disabled).
            "481" | "263" | "416" | "421"
                if msg.command != "421"
                    || msg.param(1).is_some_and(|c| c.eq_ignore_ascii_case("LIST")) =>
            {
                let words = msg.params().get(1..).unwrap_or_default().join(" ");
                self.events.push_back(DiscoveryEvent::ListRefused {
                    reply: format!("{} {words}", msg.command),
                });
            }
            _ => {}
        }
    }

    pub(super) fn pop_found(&mut self) -> Option<String> {
        self.found.pop_front()
    }

    pub(super) fn pop_event(&mut self) -> Option<DiscoveryEvent> {
        self.events.pop_front()
    }

    pub(super) fn push_event(&mut self, event: DiscoveryEvent) {
        self.events.push_back(event);
    }
}
