//! The job state machine: states, the transition table, and the error for a forbidden change.
//!
//! The spec draws one happy path, `CREATED → QUEUED → RUNNING → REVIEW_READY → COMPLETED`, and
//! names four outcomes "Erros" (errors): `FAILED`, `TIMEOUT`, `CANCELLED`, `ROLLED_BACK`. It
//! does not say which state may reach which outcome, so the table below is deskwire's reading:
//!
//! | from | to |
//! |---|---|
//! | `CREATED` | `QUEUED` (`jobs.start`), `CANCELLED`, `FAILED` (e.g. the workspace cannot be prepared) |
//! | `QUEUED` | `RUNNING` (a run slot is free), `CANCELLED`, `FAILED` |
//! | `RUNNING` | `REVIEW_READY`, `FAILED`, `TIMEOUT` (`policy.timeoutSec`), `CANCELLED`, `ROLLED_BACK` (changes undone) |
//! | `REVIEW_READY` | `COMPLETED`, `ROLLED_BACK` (the review rejected the changes), `CANCELLED`, `FAILED` (e.g. the final push fails) |
//! | `COMPLETED`, `FAILED`, `TIMEOUT`, `CANCELLED`, `ROLLED_BACK` | nothing: terminal states are final |
//!
//! `TIMEOUT` is reached from `RUNNING` only: the policy's `timeoutSec` limits execution, not
//! time spent waiting in the queue or in review.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The state of a job, written exactly as the spec names it (`SCREAMING_SNAKE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "GatewayJobState"))]
pub enum JobState {
    /// Accepted by `jobs.create`, not started.
    Created,
    /// Started, waiting for a run slot.
    Queued,
    /// Executing.
    Running,
    /// Execution done; the changes wait for review.
    ReviewReady,
    /// Done (terminal).
    Completed,
    /// Ended in error (terminal).
    Failed,
    /// Ran longer than `policy.timeoutSec` (terminal).
    Timeout,
    /// Cancelled before it finished (terminal).
    Cancelled,
    /// Its changes were undone (terminal).
    RolledBack,
}

impl JobState {
    /// Every state, in the spec's order.
    pub const ALL: [JobState; 9] = [
        JobState::Created,
        JobState::Queued,
        JobState::Running,
        JobState::ReviewReady,
        JobState::Completed,
        JobState::Failed,
        JobState::Timeout,
        JobState::Cancelled,
        JobState::RolledBack,
    ];

    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Created => "CREATED",
            JobState::Queued => "QUEUED",
            JobState::Running => "RUNNING",
            JobState::ReviewReady => "REVIEW_READY",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Timeout => "TIMEOUT",
            JobState::Cancelled => "CANCELLED",
            JobState::RolledBack => "ROLLED_BACK",
        }
    }

    /// Whether the state is final (no transition leaves it).
    pub fn is_terminal(self) -> bool {
        next_states(self).is_empty()
    }

    /// Whether the table allows `self → to`.
    pub fn can_transition(self, to: JobState) -> bool {
        next_states(self).contains(&to)
    }

    /// `Ok(to)` when the table allows `self → to`, else the error naming both.
    pub fn transition(self, to: JobState) -> Result<JobState, TransitionError> {
        if self.can_transition(to) {
            Ok(to)
        } else {
            Err(TransitionError { from: self, to })
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The transition table (see the module docs): the states each state may move to.
pub const TRANSITIONS: [(JobState, &[JobState]); 9] = {
    use JobState::*;
    [
        (Created, &[Queued, Cancelled, Failed]),
        (Queued, &[Running, Cancelled, Failed]),
        (
            Running,
            &[ReviewReady, Failed, Timeout, Cancelled, RolledBack],
        ),
        (ReviewReady, &[Completed, RolledBack, Cancelled, Failed]),
        (Completed, &[]),
        (Failed, &[]),
        (Timeout, &[]),
        (Cancelled, &[]),
        (RolledBack, &[]),
    ]
};

/// The states `from` may move to.
pub fn next_states(from: JobState) -> &'static [JobState] {
    TRANSITIONS
        .iter()
        .find(|(state, _)| *state == from)
        .map(|(_, next)| *next)
        .unwrap_or(&[])
}

/// A state change the table forbids. JSON: `{"from", "to"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("illegal job transition {from} -> {to}")]
pub struct TransitionError {
    /// The state the job is in.
    pub from: JobState,
    /// The state asked for.
    pub to: JobState,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table as an independent list of legal pairs; every other pair must be refused.
    const LEGAL: [(JobState, JobState); 15] = {
        use JobState::*;
        [
            (Created, Queued),
            (Created, Cancelled),
            (Created, Failed),
            (Queued, Running),
            (Queued, Cancelled),
            (Queued, Failed),
            (Running, ReviewReady),
            (Running, Failed),
            (Running, Timeout),
            (Running, Cancelled),
            (Running, RolledBack),
            (ReviewReady, Completed),
            (ReviewReady, RolledBack),
            (ReviewReady, Cancelled),
            (ReviewReady, Failed),
        ]
    };

    #[test]
    fn every_pair_matches_the_table() {
        let legal = LEGAL;
        let mut refused = 0;
        for from in JobState::ALL {
            for to in JobState::ALL {
                let expected = legal.contains(&(from, to));
                assert_eq!(from.can_transition(to), expected, "{from} -> {to}");
                match from.transition(to) {
                    Ok(state) => assert_eq!(state, to),
                    Err(e) => {
                        refused += 1;
                        assert_eq!(e, TransitionError { from, to });
                        assert_eq!(
                            e.to_string(),
                            format!("illegal job transition {from} -> {to}")
                        );
                    }
                }
            }
        }
        assert_eq!(refused, 81 - 15);
    }

    #[test]
    fn terminal_states_are_final_and_self_loops_refused() {
        let terminal: Vec<_> = JobState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [
                JobState::Completed,
                JobState::Failed,
                JobState::Timeout,
                JobState::Cancelled,
                JobState::RolledBack
            ]
        );
        for s in JobState::ALL {
            assert!(!s.can_transition(s), "{s} -> {s}");
            assert!(
                !s.can_transition(JobState::Created),
                "nothing returns to CREATED"
            );
        }
    }

    #[test]
    fn names_round_trip() {
        for s in JobState::ALL {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(serde_json::from_str::<JobState>(&json).unwrap(), s);
        }
        assert!(serde_json::from_str::<JobState>("\"running\"").is_err());
    }
}
