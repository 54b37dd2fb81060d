//! The core's reconnect policy ([`deskwire::reconnect`]) for Kotlin: its waits as `Long`s.

use deskwire::reconnect;

use crate::error::{Error, ErrorKind, Result};
use crate::{long, non_negative};

/// How a dropped connection comes back: the first wait, doubling with each try up to
/// `maxDelayMs`, each plus up to `jitterPercent` of it at random; back to the first wait once
/// a connection is ready. The defaults (1 s, 10 s, 50 %) are the core's, the same on every
/// driver (`rexd --irc`, Python's `Reconnect`, Godot's `DeskRpcClient`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct ReconnectPolicy {
    /// The wait before the first try (ms).
    #[uniffi(default = 1000)]
    pub first_delay_ms: i64,
    /// The longest wait between two tries (ms), before the random share.
    #[uniffi(default = 10000)]
    pub max_delay_ms: i64,
    /// Up to this share of each wait (0 to 100) is added at random.
    #[uniffi(default = 50)]
    pub jitter_percent: i32,
}

impl TryFrom<ReconnectPolicy> for reconnect::ReconnectPolicy {
    type Error = crate::error::DeskwireError;

    fn try_from(p: ReconnectPolicy) -> Result<Self> {
        let policy = reconnect::ReconnectPolicy {
            first_delay_ms: non_negative("reconnect.firstDelayMs", p.first_delay_ms)?,
            max_delay_ms: non_negative("reconnect.maxDelayMs", p.max_delay_ms)?,
            jitter_percent: u32::try_from(non_negative(
                "reconnect.jitterPercent",
                i64::from(p.jitter_percent),
            )?)
            .unwrap_or(u32::MAX),
        };
        policy.validate().map_err(|e| {
            crate::error::DeskwireError::from(Error::Invalid {
                kind: ErrorKind::InvalidConfig,
                detail: e.to_string(),
            })
        })?;
        Ok(policy)
    }
}

/// The wait before reconnection try `attempt` (0 for the first), with `random` choosing its
/// random share. Throws for a policy that cannot work (`firstDelayMs` 0 or above
/// `maxDelayMs`, `jitterPercent` above 100).
#[uniffi::export]
pub fn reconnect_delay_ms(policy: ReconnectPolicy, attempt: i32, random: i64) -> Result<i64> {
    let policy = reconnect::ReconnectPolicy::try_from(policy)?;
    let attempt = u32::try_from(attempt.max(0)).unwrap_or(0);
    Ok(long(policy.delay_ms(attempt, random as u64)))
}
