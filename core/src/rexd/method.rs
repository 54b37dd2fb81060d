//! REXD method names: the requests a client sends and the events (notifications) a daemon emits.

use std::fmt;
use std::str::FromStr;

use super::error::RexdError;
use super::session::Capability;

/// Every method name REXD v1 defines, requests and events alike.
///
/// One enum for both, because both travel in the same `method` field of JSON-RPC and a host
/// routing lines needs one lookup; [`Method::is_event`] tells the two kinds apart. A request
/// method received as a notification (or the reverse) is answered as an unknown method by
/// [`super::Request::parse`] and [`super::Event::parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Method {
    /// `session.open`: create a session, learn the protocol version, capabilities and limits.
    SessionOpen,
    /// `session.close`: close a session and end its attached (not detached) processes.
    SessionClose,
    /// `session.info`: the session's state (cwd, processes, limits).
    SessionInfo,
    /// `exec.start`: start a non-PTY process whose output streams as events.
    ExecStart,
    /// `exec.wait`: wait for a process to finish (for clients that ignore the events).
    ExecWait,
    /// `exec.kill`: send a signal to a process.
    ExecKill,
    /// `exec.input`: write to a running process's stdin (Phase 2).
    ExecInput,
    /// `fs.read`: read (part of) a file.
    FsRead,
    /// `fs.write`: create, replace or append to a file.
    FsWrite,
    /// `fs.list`: list a directory.
    FsList,
    /// `fs.glob`: find paths matching a glob pattern within the allowed roots.
    FsGlob,
    /// `fs.stat`: metadata of one path.
    FsStat,
    /// `pty.open`: start a process on a pseudo-terminal (Phase 2).
    PtyOpen,
    /// `pty.input`: send keystrokes or bytes to a PTY (Phase 2).
    PtyInput,
    /// `pty.resize`: change a PTY's size (Phase 2).
    PtyResize,
    /// `pty.close`: close a PTY and, by default, end its process (Phase 2).
    PtyClose,
    /// `session.resume` (addition to the spec, Phase 3's resumable sessions): take a
    /// resumable session over on a new connection after the old one dropped, and get every
    /// event after `last_seq` again, then the live stream.
    SessionResume,
    /// `rexd.metrics` (addition to the spec, Phase 3's metrics): the daemon's counters and
    /// gauges in the Prometheus text format, the same text `rexd --listen` serves at `/metrics`.
    RexdMetrics,
    /// Event `exec.stdout`: a piece of a process's standard output.
    ExecStdout,
    /// Event `exec.stderr`: a piece of a process's standard error.
    ExecStderr,
    /// Event `exec.exit`: a process ended; terminal for that process.
    ExecExit,
    /// Event `exec.error`: a process could not be launched; terminal for that process.
    ExecError,
    /// Event `pty.output`: bytes a PTY's process wrote to the terminal.
    PtyOutput,
    /// Event `pty.exit`: a PTY's process ended.
    PtyExit,
}

impl Method {
    /// All methods, requests first, in the order of the spec.
    pub const ALL: [Method; 24] = [
        Method::SessionOpen,
        Method::SessionClose,
        Method::SessionInfo,
        Method::ExecStart,
        Method::ExecWait,
        Method::ExecKill,
        Method::ExecInput,
        Method::FsRead,
        Method::FsWrite,
        Method::FsList,
        Method::FsGlob,
        Method::FsStat,
        Method::PtyOpen,
        Method::PtyInput,
        Method::PtyResize,
        Method::PtyClose,
        Method::SessionResume,
        Method::RexdMetrics,
        Method::ExecStdout,
        Method::ExecStderr,
        Method::ExecExit,
        Method::ExecError,
        Method::PtyOutput,
        Method::PtyExit,
    ];

    /// The name on the wire, e.g. `"exec.start"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::SessionOpen => "session.open",
            Method::SessionClose => "session.close",
            Method::SessionInfo => "session.info",
            Method::ExecStart => "exec.start",
            Method::ExecWait => "exec.wait",
            Method::ExecKill => "exec.kill",
            Method::ExecInput => "exec.input",
            Method::FsRead => "fs.read",
            Method::FsWrite => "fs.write",
            Method::FsList => "fs.list",
            Method::FsGlob => "fs.glob",
            Method::FsStat => "fs.stat",
            Method::PtyOpen => "pty.open",
            Method::PtyInput => "pty.input",
            Method::PtyResize => "pty.resize",
            Method::PtyClose => "pty.close",
            Method::SessionResume => "session.resume",
            Method::RexdMetrics => "rexd.metrics",
            Method::ExecStdout => "exec.stdout",
            Method::ExecStderr => "exec.stderr",
            Method::ExecExit => "exec.exit",
            Method::ExecError => "exec.error",
            Method::PtyOutput => "pty.output",
            Method::PtyExit => "pty.exit",
        }
    }

    /// The method with this wire name (exact, case-sensitive, as JSON-RPC method names are).
    pub fn from_name(name: &str) -> Option<Method> {
        // A match on the string compiles to a length switch plus compares: no table to build.
        Some(match name {
            "session.open" => Method::SessionOpen,
            "session.close" => Method::SessionClose,
            "session.info" => Method::SessionInfo,
            "exec.start" => Method::ExecStart,
            "exec.wait" => Method::ExecWait,
            "exec.kill" => Method::ExecKill,
            "exec.input" => Method::ExecInput,
            "fs.read" => Method::FsRead,
            "fs.write" => Method::FsWrite,
            "fs.list" => Method::FsList,
            "fs.glob" => Method::FsGlob,
            "fs.stat" => Method::FsStat,
            "pty.open" => Method::PtyOpen,
            "pty.input" => Method::PtyInput,
            "pty.resize" => Method::PtyResize,
            "pty.close" => Method::PtyClose,
            "session.resume" => Method::SessionResume,
            "rexd.metrics" => Method::RexdMetrics,
            "exec.stdout" => Method::ExecStdout,
            "exec.stderr" => Method::ExecStderr,
            "exec.exit" => Method::ExecExit,
            "exec.error" => Method::ExecError,
            "pty.output" => Method::PtyOutput,
            "pty.exit" => Method::PtyExit,
            _ => return None,
        })
    }

    /// Whether this is an event (a notification the daemon emits) rather than a request.
    pub const fn is_event(self) -> bool {
        matches!(
            self,
            Method::ExecStdout
                | Method::ExecStderr
                | Method::ExecExit
                | Method::ExecError
                | Method::PtyOutput
                | Method::PtyExit
        )
    }

    /// The implementation phase of the spec's plan: 1 (must-have), 2 (nice-to-have:
    /// `exec.input` and the PTY methods and events) or 3 (polish: `rexd.metrics`).
    pub const fn phase(self) -> u8 {
        match self {
            Method::RexdMetrics | Method::SessionResume => 3,
            Method::ExecInput
            | Method::PtyOpen
            | Method::PtyInput
            | Method::PtyResize
            | Method::PtyClose
            | Method::PtyOutput
            | Method::PtyExit => 2,
            _ => 1,
        }
    }

    /// The capability a daemon must advertise for this method, `None` for the session methods
    /// every daemon has. A daemon answers a method whose capability it lacks with
    /// [`super::ErrorCode::UnsupportedCapability`].
    pub fn capability(self) -> Option<Capability> {
        match self {
            Method::SessionOpen | Method::SessionClose | Method::SessionInfo => None,
            Method::RexdMetrics => Some(Capability::Metrics),
            Method::SessionResume => Some(Capability::Resume),
            Method::ExecInput => Some(Capability::ExecInput),
            Method::ExecStart | Method::ExecWait | Method::ExecKill => Some(Capability::Exec),
            Method::FsRead | Method::FsWrite | Method::FsList | Method::FsGlob | Method::FsStat => {
                Some(Capability::Fs)
            }
            Method::PtyOpen
            | Method::PtyInput
            | Method::PtyResize
            | Method::PtyClose
            | Method::PtyOutput
            | Method::PtyExit => Some(Capability::Pty),
            Method::ExecStdout | Method::ExecStderr | Method::ExecExit | Method::ExecError => {
                Some(Capability::Events)
            }
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Method {
    type Err = RexdError;

    fn from_str(name: &str) -> Result<Method, RexdError> {
        Method::from_name(name).ok_or_else(|| RexdError::UnknownMethod(name.to_owned()))
    }
}

impl serde::Serialize for Method {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Method {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Method, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Method::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format_args!("unknown REXD method {name:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.as_str()), Some(m));
            assert_eq!(m.as_str().parse::<Method>().unwrap(), m);
            assert!(seen.insert(m.as_str()));
        }
        assert_eq!(Method::ALL.iter().filter(|m| m.is_event()).count(), 6);
    }

    #[test]
    fn unknown_and_case_variants_are_refused() {
        for name in [
            "",
            "exec",
            "EXEC.START",
            "exec.start ",
            "exec_start",
            "fs.delete",
        ] {
            assert_eq!(Method::from_name(name), None, "{name:?}");
            assert!(
                matches!(name.parse::<Method>(), Err(RexdError::UnknownMethod(n)) if n == name)
            );
        }
    }

    #[test]
    fn phases_and_capabilities() {
        assert_eq!(Method::ExecStart.phase(), 1);
        assert_eq!(Method::ExecInput.phase(), 2);
        assert_eq!(Method::PtyExit.phase(), 2);
        assert_eq!(Method::SessionOpen.capability(), None);
        assert_eq!(Method::FsGlob.capability(), Some(Capability::Fs));
        assert_eq!(Method::ExecInput.capability(), Some(Capability::ExecInput));
        assert_eq!(Method::ExecStdout.capability(), Some(Capability::Events));
    }
}
