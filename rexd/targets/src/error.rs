//! What can be wrong with a target or the targets file.

/// A target that does not parse, a name the file does not have, or a file that cannot be read,
/// written or understood.
///
/// Exhaustive on purpose: rexd's `ClientError` has one variant for each of these, and its
/// conversion names every variant, so a new one here must be given its own place there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// A target URL or name that does not parse.
    #[error("bad target {target:?}: {reason}")]
    BadTarget {
        /// What was given.
        target: String,
        /// Why it is refused.
        reason: String,
    },
    /// A named target that is not in the targets file.
    #[error("no target named {name:?} in {file} (known: {known})")]
    UnknownTarget {
        /// The name asked for.
        name: String,
        /// The targets file that was searched.
        file: String,
        /// The names it has, comma-separated.
        known: String,
    },
    /// The targets file could not be read or written, or is not valid TOML of the right shape.
    #[error("targets file {file}: {reason}")]
    TargetsFile {
        /// Its path.
        file: String,
        /// What went wrong.
        reason: String,
    },
}
