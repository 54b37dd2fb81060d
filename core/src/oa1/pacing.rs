//! Flood pacing: a token bucket that holds lines back so the IRC server never throttles or kicks
//! us (`docs/oa1.md`, "Pacing").
//!
//! Two shapes. Steady (the default): GCRA (a virtual scheduling clock), a token bucket of
//! `burst` tokens refilled one per `interval_ms`, kept as one number; what a server that counts
//! lines per second wants. Grouped: up to `burst` lines at one instant, then none for
//! `interval_ms`; what ngircd wants, which reads at most three lines at a time and stops reading
//! for a second after any read of 256 bytes or more (so a second read within the same second is
//! what costs, not the number of lines in one).

/// Token-bucket settings. As JSON: `{"burst": 3, "interval_ms": 1000}`, and `"grouped": true`
/// for the grouped shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pacing {
    /// Lines that may go out back to back after a quiet period (grouped: in one group).
    pub burst: u32,
    /// Milliseconds per line after the burst (grouped: from one group to the next).
    pub interval_ms: u64,
    /// Lines leave in groups of up to `burst`, together, one group per `interval_ms`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grouped: bool,
}

impl Pacing {
    /// No pacing at all (for in-memory channels and tests).
    pub const UNLIMITED: Pacing = Pacing {
        burst: u32::MAX,
        interval_ms: 0,
        grouped: false,
    };

    /// `burst` lines back to back, then one per `interval_ms`.
    pub const fn steady(burst: u32, interval_ms: u64) -> Pacing {
        Pacing {
            burst,
            interval_ms,
            grouped: false,
        }
    }

    /// Groups of up to `burst` lines that leave together, one group per `interval_ms`.
    pub const fn grouped(burst: u32, interval_ms: u64) -> Pacing {
        Pacing {
            burst,
            interval_ms,
            grouped: true,
        }
    }

    /// The pacing measured for a server by the version its `004` gives, when it is one whose
    /// limits were measured (`docs/oa1.md`, "Pacing"; `tests/pacing/measure_ngircd.py`):
    /// - ngircd: groups of 3 lines every 1.1 s. It reads at most 3 lines at a time and stops
    ///   reading for a second after a read of 256 bytes or more, so 3 long lines that arrive
    ///   together every second all pass at once, where a line every 333 ms would be held back
    ///   (measured on ngircd 26.1: 3 lines per 1000 ms, together, kept every line on time; per
    ///   900 ms they were held back).
    /// - InspIRCd: 3 lines, then one a second (`tests/pacing/measure_inspircd.py`, InspIRCd
    ///   3.15's default connect class). It lets a faster sender run ahead for a while, then
    ///   holds its lines back and closes the link once they pass the class's `recvq`: a line
    ///   every 700 ms was cut off after about 50 lines of 450 bytes (`RecvQ exceeded`, in two
    ///   runs); one a second kept 80 lines on time.
    pub fn for_server(version: &str) -> Option<Pacing> {
        let software = version.split(['-', ' ', '/']).next().unwrap_or(version);
        if software.eq_ignore_ascii_case("ngircd") {
            Some(Pacing::grouped(3, 1100))
        } else if software.eq_ignore_ascii_case("inspircd") {
            Some(Pacing::steady(3, 1000))
        } else {
            None
        }
    }

    /// Lines that may leave within `window_ms` from a quiet start.
    pub fn lines_within(&self, window_ms: u64) -> u64 {
        let burst = u64::from(self.burst);
        match (self.interval_ms, self.grouped) {
            (0, _) => u64::MAX,
            (interval, false) => burst.saturating_add(window_ms / interval),
            (interval, true) => burst.saturating_mul(1 + window_ms / interval),
        }
    }
}

/// In words, for logs: `3 lines, then one every 1 s`, `groups of 3 lines every 1.1 s`,
/// `unlimited`.
impl std::fmt::Display for Pacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let every = super::client::format_duration(self.interval_ms);
        match (self.interval_ms, self.grouped) {
            (0, _) => f.write_str("unlimited"),
            (_, true) => write!(f, "groups of {} lines every {every}", self.burst),
            (_, false) => write!(f, "{} lines, then one every {every}", self.burst),
        }
    }
}

/// How long after a group opens a line may still join it: lines a host writes one after the
/// other in one drain reach the server together; a line that comes later waits for the next
/// group.
const GROUP_JOIN_MS: u64 = 10;

/// The bucket state.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    pacing: Pacing,
    /// Steady: the instant at which the bucket will be full again (GCRA's theoretical arrival
    /// time).
    full_at: u64,
    /// Grouped: when the last group opened, and how many lines it has.
    group: Option<(u64, u32)>,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(pacing: Pacing) -> Self {
        TokenBucket {
            pacing,
            full_at: 0,
            group: None,
        }
    }

    /// The pacing it keeps.
    pub fn pacing(&self) -> Pacing {
        self.pacing
    }

    fn window(&self) -> u64 {
        u64::from(self.pacing.burst.saturating_sub(1)).saturating_mul(self.pacing.interval_ms)
    }

    /// The first instant at or after `now` at which a line may go.
    pub fn ready_at(&self, now: u64) -> u64 {
        if !self.pacing.grouped {
            return now.max(self.full_at.saturating_sub(self.window()));
        }
        match self.group {
            None => now,
            Some((opened, lines)) if lines < self.pacing.burst && now < opened + GROUP_JOIN_MS => {
                now
            }
            Some((opened, _)) => now.max(opened.saturating_add(self.pacing.interval_ms)),
        }
    }

    /// Takes a token if one is there at `now`.
    pub fn try_take(&mut self, now: u64) -> bool {
        if self.ready_at(now) > now {
            return false;
        }
        if self.pacing.grouped {
            self.group = Some(match self.group {
                Some((opened, lines)) if now < opened + GROUP_JOIN_MS => (opened, lines + 1),
                _ => (now, 1),
            });
            return true;
        }
        self.full_at = self
            .full_at
            .max(now)
            .saturating_add(self.pacing.interval_ms);
        true
    }
}

/// Who lets an endpoint's next line go: its own bucket, or the connection it shares with other
/// channels. A server counts lines per connection, so the channels of one connection share one
/// bucket, which the connection hands out a turn at a time, round robin
/// (`oa1::MultiDesk`/`oa1::MultiRemote`); one channel's long answer cannot starve another's short
/// one.
#[derive(Debug, Clone)]
pub(crate) enum Gate {
    /// The endpoint paces itself.
    Own(TokenBucket),
    /// The connection paces: a line may go only on a turn it grants.
    Shared(Turn),
}

/// A turn from the connection's shared bucket.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Turn {
    /// The shared pacing, for what the endpoint reports (its budget in the tool description).
    pacing: Pacing,
    /// When the shared bucket has its next token.
    ready_at: u64,
    /// A line may go now.
    granted: bool,
    /// The granted line went (the connection takes the shared token for it).
    used: bool,
}

impl Gate {
    /// The first instant at or after `now` at which a line may go.
    pub(crate) fn ready_at(&self, now: u64) -> u64 {
        match self {
            Gate::Own(bucket) => bucket.ready_at(now),
            Gate::Shared(turn) if turn.granted => now,
            Gate::Shared(turn) => turn.ready_at.max(now),
        }
    }

    /// Takes a token (or the granted turn) if one is there at `now`.
    pub(crate) fn try_take(&mut self, now: u64) -> bool {
        match self {
            Gate::Own(bucket) => bucket.try_take(now),
            Gate::Shared(turn) if turn.granted => {
                turn.granted = false;
                turn.used = true;
                true
            }
            Gate::Shared(_) => false,
        }
    }

    /// The pacing in force.
    pub(crate) fn pacing(&self) -> Pacing {
        match self {
            Gate::Own(bucket) => bucket.pacing(),
            Gate::Shared(turn) => turn.pacing,
        }
    }

    /// Paced by the connection from now on; lines wait for [`Gate::grant`].
    pub(crate) fn shared(pacing: Pacing) -> Gate {
        Gate::Shared(Turn {
            pacing,
            ready_at: u64::MAX,
            granted: false,
            used: false,
        })
    }

    /// Before the endpoint is polled: whether a line may go now, else when the shared bucket
    /// has its next token, and the pacing it keeps.
    pub(crate) fn grant(&mut self, pacing: Pacing, ready_at: u64, granted: bool) {
        *self = Gate::Shared(Turn {
            pacing,
            ready_at,
            granted,
            used: false,
        });
    }

    /// After the poll: whether the endpoint used the turn granted (a line went).
    pub(crate) fn take_used(&mut self) -> bool {
        match self {
            Gate::Shared(turn) => {
                let used = turn.used;
                turn.used = false;
                turn.granted = false;
                used
            }
            Gate::Own(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_interval() {
        let mut b = TokenBucket::new(Pacing::steady(3, 100));
        assert!(b.try_take(1000));
        assert!(b.try_take(1000));
        assert!(b.try_take(1000));
        assert!(!b.try_take(1000));
        assert_eq!(b.ready_at(1000), 1100);
        assert!(!b.try_take(1099));
        assert!(b.try_take(1100));
        assert_eq!(b.ready_at(1100), 1200);
        // A long quiet period refills the whole burst, no more.
        for _ in 0..3 {
            assert!(b.try_take(5000));
        }
        assert!(!b.try_take(5000));
    }

    #[test]
    fn groups_leave_together_one_per_interval() {
        let mut b = TokenBucket::new(Pacing::grouped(3, 1100));
        for _ in 0..3 {
            assert!(b.try_take(1000));
        }
        assert!(!b.try_take(1001), "a fourth line waits for the next group");
        assert_eq!(b.ready_at(1001), 2100);
        assert!(!b.try_take(2099));
        assert!(b.try_take(2100));
        // A line a little later than its group's first still joins it...
        assert!(b.try_take(2105));
        // ...but not one that comes once the group has left.
        assert!(!b.try_take(2110));
        assert_eq!(b.ready_at(2110), 3200);
        // A lone line opens a group too, and the next must wait a whole interval.
        assert!(b.try_take(9000));
        assert!(!b.try_take(9500));
        assert_eq!(b.ready_at(9500), 10_100);
    }

    #[test]
    fn lines_within_a_window() {
        assert_eq!(Pacing::steady(3, 1000).lines_within(30_000), 33);
        assert_eq!(Pacing::grouped(3, 1100).lines_within(30_000), 84);
        assert_eq!(Pacing::UNLIMITED.lines_within(30_000), u64::MAX);
    }

    #[test]
    fn servers_measured_get_their_pacing() {
        assert_eq!(
            Pacing::for_server("ngircd-26.1"),
            Some(Pacing::grouped(3, 1100))
        );
        assert_eq!(
            Pacing::for_server("ngIRCd-27~rc1"),
            Some(Pacing::grouped(3, 1100))
        );
        assert_eq!(
            Pacing::for_server("InspIRCd-3"),
            Some(Pacing::steady(3, 1000))
        );
        for unknown in ["solanum-1.0", "ngircdx-1", "inspircdx-4", ""] {
            assert_eq!(Pacing::for_server(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn unlimited_never_waits() {
        let mut b = TokenBucket::new(Pacing::UNLIMITED);
        for _ in 0..10_000 {
            assert!(b.try_take(7));
        }
    }

    #[test]
    fn said_in_words() {
        assert_eq!(
            Pacing::steady(3, 1000).to_string(),
            "3 lines, then one every 1 s"
        );
        assert_eq!(
            Pacing::grouped(3, 1100).to_string(),
            "groups of 3 lines every 1.1 s"
        );
        assert_eq!(Pacing::UNLIMITED.to_string(), "unlimited");
    }

    #[test]
    fn json_keeps_its_shape() {
        let steady = serde_json::to_string(&Pacing::steady(3, 1000)).unwrap();
        assert_eq!(steady, r#"{"burst":3,"interval_ms":1000}"#);
        let grouped: Pacing =
            serde_json::from_str(r#"{"burst":3,"interval_ms":1100,"grouped":true}"#).unwrap();
        assert_eq!(grouped, Pacing::grouped(3, 1100));
    }
}
