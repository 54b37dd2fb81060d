//! Flood pacing: a token bucket that holds lines back so the IRC server never throttles or kicks
//! us (`docs/oa1.md`, "Pacing").
//!
//! Implemented as GCRA (a virtual scheduling clock), which is a token bucket of `burst` tokens
//! refilled one per `interval_ms`, kept as one number.

/// Token-bucket settings. As JSON: `{"burst": 3, "interval_ms": 1000}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pacing {
    /// Lines that may go out back to back after a quiet period.
    pub burst: u32,
    /// Milliseconds per line after the burst.
    pub interval_ms: u64,
}

impl Pacing {
    /// No pacing at all (for in-memory channels and tests).
    pub const UNLIMITED: Pacing = Pacing {
        burst: u32::MAX,
        interval_ms: 0,
    };
}

/// The bucket state.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    pacing: Pacing,
    /// The instant at which the bucket will be full again (GCRA's theoretical arrival time).
    full_at: u64,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(pacing: Pacing) -> Self {
        TokenBucket { pacing, full_at: 0 }
    }

    fn window(&self) -> u64 {
        u64::from(self.pacing.burst.saturating_sub(1)).saturating_mul(self.pacing.interval_ms)
    }

    /// The first instant at or after `now` at which a line may go.
    pub fn ready_at(&self, now: u64) -> u64 {
        now.max(self.full_at.saturating_sub(self.window()))
    }

    /// Takes a token if one is there at `now`.
    pub fn try_take(&mut self, now: u64) -> bool {
        if self.ready_at(now) > now {
            return false;
        }
        self.full_at = self
            .full_at
            .max(now)
            .saturating_add(self.pacing.interval_ms);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_interval() {
        let mut b = TokenBucket::new(Pacing {
            burst: 3,
            interval_ms: 100,
        });
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
    fn unlimited_never_waits() {
        let mut b = TokenBucket::new(Pacing::UNLIMITED);
        for _ in 0..10_000 {
            assert!(b.try_take(7));
        }
    }
}
