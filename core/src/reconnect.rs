//! How a dropped link comes back: the one reconnect policy every driver uses (`rexd --irc`, the
//! desk demo, Python's `Reconnect`, Kotlin's connections, Godot's `DeskRpcClient`).
//!
//! A first wait, doubling with each try up to a cap, plus a random part of each wait so that
//! many clients dropped together (a server restart) do not all come back in the same second.
//! Once a connection gets ready the waits start over.
//!
//! The defaults fit the two ends to each other: with a 10 s cap, an end notices a server that
//! is back within 15 s (10 s and up to half of it at random), well inside the 30 s a desk's
//! request waits for the link to be ready (`ready_timeout_ms`). A cap of a minute (rexd's
//! before) left a desk whose server was down for 31 s without its remote until a minute later.

use serde::{Deserialize, Serialize};

use crate::ids::IdGenerator;

/// A reconnect policy. As JSON: `{"first_delay_ms": 1000, "max_delay_ms": 10000,
/// "jitter_percent": 50}` (each may be left out: the default fills it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReconnectPolicy {
    /// The wait before the first try.
    pub first_delay_ms: u64,
    /// The longest wait between two tries (before the random part).
    pub max_delay_ms: u64,
    /// Up to this share of each wait (0 to 100 percent) is added at random.
    pub jitter_percent: u32,
}

impl Default for ReconnectPolicy {
    /// 1 s, doubling up to 10 s, plus up to half of each at random.
    fn default() -> Self {
        ReconnectPolicy {
            first_delay_ms: 1_000,
            max_delay_ms: 10_000,
            jitter_percent: 50,
        }
    }
}

/// A policy that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReconnectPolicyError {
    /// The first wait is 0 or above the cap.
    #[error("reconnect delays need 0 < first_delay_ms <= max_delay_ms (got {first} and {max})")]
    Delays {
        /// `first_delay_ms`.
        first: u64,
        /// `max_delay_ms`.
        max: u64,
    },
    /// The random share is above 100 percent.
    #[error("jitter_percent is a share of each wait, 0 to 100 (got {0})")]
    Jitter(u32),
}

impl ReconnectPolicy {
    /// Checks the values: `0 < first_delay_ms <= max_delay_ms`, `jitter_percent <= 100`.
    pub fn validate(&self) -> Result<(), ReconnectPolicyError> {
        if self.first_delay_ms == 0 || self.first_delay_ms > self.max_delay_ms {
            return Err(ReconnectPolicyError::Delays {
                first: self.first_delay_ms,
                max: self.max_delay_ms,
            });
        }
        if self.jitter_percent > 100 {
            return Err(ReconnectPolicyError::Jitter(self.jitter_percent));
        }
        Ok(())
    }

    /// The wait before try `attempt` (0 for the first): its base wait plus `random` modulo one
    /// more than its random share. Hosts with their own random source (Kotlin's, Python's)
    /// call this; [`Backoff`] keeps the count and a generator.
    pub fn delay_ms(&self, attempt: u32, random: u64) -> u64 {
        let base = self.base_delay_ms(attempt);
        let span = base.saturating_mul(u64::from(self.jitter_percent.min(100))) / 100;
        match span {
            0 => base,
            span => base.saturating_add(random % (span.saturating_add(1))),
        }
    }

    /// The wait before try `attempt` (0 for the first), without the random part.
    pub fn base_delay_ms(&self, attempt: u32) -> u64 {
        self.first_delay_ms
            .saturating_mul(1u64 << attempt.min(32))
            .min(self.max_delay_ms)
    }
}

/// The waits of one outage, in turn: [`Backoff::next_delay_ms`] for each try, and
/// [`Backoff::reset`] once a connection got ready. Sans-IO: the host sleeps.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: ReconnectPolicy,
    attempt: u32,
    /// Draws the random part of each wait.
    random: IdGenerator,
}

impl Backoff {
    /// Starts with `policy`; `seed` drives the random part (from the OS's entropy in
    /// production, fixed in tests).
    pub fn new(policy: ReconnectPolicy, seed: u64) -> Self {
        Backoff {
            policy,
            attempt: 0,
            random: IdGenerator::new(seed),
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> ReconnectPolicy {
        self.policy
    }

    /// Tries since the last [`Backoff::reset`].
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// The wait before the next try: the base wait of this attempt plus its random part.
    pub fn next_delay_ms(&mut self) -> u64 {
        let random = self.random.next_u64();
        let delay = self.policy.delay_ms(self.attempt, random);
        self.attempt = self.attempt.saturating_add(1);
        delay
    }

    /// A connection got ready: the next outage starts from the first wait again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_and_start_over_after_a_success() {
        let policy = ReconnectPolicy {
            jitter_percent: 0,
            ..ReconnectPolicy::default()
        };
        let mut backoff = Backoff::new(policy, 1);
        let waits: Vec<u64> = (0..7).map(|_| backoff.next_delay_ms()).collect();
        assert_eq!(waits, [1_000, 2_000, 4_000, 8_000, 10_000, 10_000, 10_000]);
        assert_eq!(backoff.attempts(), 7);
        backoff.reset();
        assert_eq!(backoff.next_delay_ms(), 1_000);
        // Very many tries do not overflow.
        let mut long = Backoff::new(policy, 1);
        for _ in 0..200 {
            assert!(long.next_delay_ms() <= 10_000);
        }
    }

    #[test]
    fn the_random_part_stays_within_its_share_and_differs_between_clients() {
        let policy = ReconnectPolicy::default();
        let mut firsts = std::collections::BTreeSet::new();
        for seed in 0..64u64 {
            let mut backoff = Backoff::new(policy, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let first = backoff.next_delay_ms();
            assert!((1_000..=1_500).contains(&first), "{first}");
            firsts.insert(first);
            for _ in 0..10 {
                let wait = backoff.next_delay_ms();
                assert!((1_000..=15_000).contains(&wait), "{wait}");
            }
        }
        assert!(
            firsts.len() > 32,
            "64 clients, {} distinct first waits",
            firsts.len()
        );
    }

    #[test]
    fn the_defaults_fit_a_desks_ready_timeout() {
        // Back within the cap and its random part of the server's return: inside the 30 s a
        // request waits for the link.
        let policy = ReconnectPolicy::default();
        let worst =
            policy.max_delay_ms + policy.max_delay_ms * u64::from(policy.jitter_percent) / 100;
        assert!(worst * 2 <= 30_000 + 1, "{worst}");
    }

    #[test]
    fn bad_policies_are_refused_and_json_fills_defaults() {
        let bad = |first, max, jitter| {
            ReconnectPolicy {
                first_delay_ms: first,
                max_delay_ms: max,
                jitter_percent: jitter,
            }
            .validate()
        };
        assert!(bad(1_000, 10_000, 50).is_ok());
        assert_eq!(
            bad(0, 10_000, 50),
            Err(ReconnectPolicyError::Delays {
                first: 0,
                max: 10_000
            })
        );
        assert!(bad(20_000, 10_000, 50).is_err());
        assert_eq!(bad(1, 1, 101), Err(ReconnectPolicyError::Jitter(101)));
        let json: ReconnectPolicy = serde_json::from_str(r#"{"max_delay_ms": 5000}"#).unwrap();
        assert_eq!(json.max_delay_ms, 5_000);
        assert_eq!(json.first_delay_ms, 1_000);
        assert!(serde_json::from_str::<ReconnectPolicy>(r#"{"max": 1}"#).is_err());
    }
}
