//! What can go wrong between `rex` and a daemon.

use std::process::ExitStatus;

use deskwire::jsonrpc::LocalError;
use deskwire::rexd::ErrorCode;
use rex_targets::{Endpoint, REXD_INSTALL_HINT, TargetError, TargetSpec, local_rexd};

/// A client failure. Remote refusals (`-32002` and friends) are [`ClientError::Remote`];
/// everything else is about reaching the daemon or understanding it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
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
    /// `rexd` could not be started: not found locally, or not on the remote PATH.
    #[error("{0}")]
    RexdNotFound(String),
    /// Starting the transport (`rexd` or `ssh`) failed.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The transport ended (the daemon or ssh exited, or closed its stdout).
    #[error("the connection to {target} closed{}{}", status_text(.status), stderr_text(.stderr))]
    Closed {
        /// The target.
        target: String,
        /// How the transport process ended, when known.
        status: Option<ExitStatus>,
        /// The end of what it wrote on stderr.
        stderr: String,
    },
    /// Reading or writing the transport's pipes failed.
    #[error("i/o with {target}: {source}")]
    Io {
        /// The target.
        target: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The TLS handshake with a network daemon failed: a certificate this side does not
    /// trust, one the daemon refused, or no TLS on that port.
    #[error("TLS with {target} failed: {reason}")]
    Tls {
        /// The target.
        target: String,
        /// What went wrong, and how to fix it.
        reason: String,
    },
    /// A file or value the connection needs (the CA file, the token, the client certificate)
    /// that cannot be used: named with the option that gave it.
    #[error("{setting}: {reason}")]
    Setting {
        /// What it is and which option gave it (`the CA file /etc/ca.pem (--ca-file)`).
        setting: String,
        /// What is wrong with it, and how to fix it.
        reason: String,
    },
    /// A request longer than a daemon takes on one line or message: refused here, before it
    /// is sent (the daemon would drop it unanswered).
    #[error(
        "{method}: the request would be {bytes} bytes, more than the {max} a daemon takes in \
         one message{}",
        too_large_hint(.method)
    )]
    TooLarge {
        /// The method called.
        method: String,
        /// The request's params, serialized.
        bytes: usize,
        /// The message limit.
        max: usize,
    },
    /// A network daemon refused the credentials (`401`: no token, a wrong one; `403`: a token
    /// for something else, such as a metrics-only one).
    #[error("{target} refused the credentials ({status}): {hint}")]
    Unauthorized {
        /// The target.
        target: String,
        /// The HTTP status, 401 or 403.
        status: u16,
        /// What was wrong with what was sent, as far as this side can tell, and the fix.
        hint: String,
    },
    /// A network daemon refused the connection for a limit it names (`429`: this client's
    /// connections, `--max-connections-per-principal`; `503`: the daemon's), with its words.
    #[error("{target} refused the connection (HTTP {status}): {message}")]
    Busy {
        /// The target.
        target: String,
        /// The HTTP status.
        status: u16,
        /// The daemon's answer (its first line), or the status's name.
        message: String,
    },
    /// The daemon refused a call.
    #[error("{method}: {}{message}{}", code_text(*.code), data_text(.data))]
    Remote {
        /// The method called.
        method: String,
        /// The JSON-RPC error code (`-32002` forbidden_path, …).
        code: i64,
        /// The daemon's message.
        message: String,
        /// The error's `data`, if any.
        data: Option<serde_json::Value>,
    },
    /// No answer in time.
    #[error("{method}: no answer within {timeout_ms} ms")]
    Timeout {
        /// The method called.
        method: String,
        /// The client's call timeout.
        timeout_ms: u64,
    },
    /// The daemon answered something that does not fit the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A raw frame that breaks the rules (more bytes than asked for, bytes for a call that did
    /// not ask): the byte stream cannot be read on.
    #[error("protocol error: {0}")]
    Frame(#[from] super::FrameError),
    /// The daemon could not launch a command (`exec.error`).
    #[error("cannot run the command: {message}")]
    Launch {
        /// The daemon's message.
        message: String,
        /// The OS error number, when the daemon gave one (`ENOENT`: no such program).
        errno: Option<i32>,
    },
    /// The daemon streamed more than the client buffers while it waited for something else.
    #[error("more than {0} bytes of events buffered; the daemon streams faster than it is read")]
    Overflow(usize),
    /// The output sink (our stdout) failed, for example a closed pipe.
    #[error("writing output: {0}")]
    Output(std::io::Error),
    /// Misuse of the JSON-RPC peer (a bug here, not the daemon's fault).
    #[error("internal: {0}")]
    Local(#[from] LocalError),
}

impl From<TargetError> for ClientError {
    fn from(e: TargetError) -> ClientError {
        match e {
            TargetError::BadTarget { target, reason } => ClientError::BadTarget { target, reason },
            TargetError::UnknownTarget { name, file, known } => {
                ClientError::UnknownTarget { name, file, known }
            }
            TargetError::TargetsFile { file, reason } => ClientError::TargetsFile { file, reason },
        }
    }
}

impl ClientError {
    /// The REXD error code of a remote refusal, if it is one of the spec's.
    pub fn remote_code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Remote { code, .. } => ErrorCode::from_code(*code),
            _ => None,
        }
    }
}

/// What to do instead of a request that is too large.
fn too_large_hint(method: &str) -> &'static str {
    match method {
        "fs.write" => {
            " (a file's bytes travel in base64, about 12 MiB of them in one message, or 16 MiB \
             compressed); write a larger file in pieces, the first as it is and the rest with \
             `rex write --append`"
        }
        _ => "",
    }
}

/// How to fix a missing daemon, for the error message.
pub(crate) fn missing_rexd_hint(spec: &TargetSpec, endpoint: &Endpoint) -> String {
    match endpoint {
        Endpoint::Local => format!(
            "rexd was not found ({}): put it next to rex or on PATH, or name it with `--rexd \
             PATH`; {REXD_INSTALL_HINT}",
            spec.rexd
                .clone()
                .unwrap_or_else(|| local_rexd().display().to_string())
        ),
        Endpoint::Ws { given, .. } => {
            format!("no rexd answers at {given} (start it there with `rexd --listen`)")
        }
        Endpoint::Ssh { host, .. } => format!(
            "rexd is not on the remote PATH of {host} (`ssh … {}` found no such command). \
             Install it there (a release's static `rexd` runs on any x86_64 or aarch64 Linux: \
             `scp rexd {host}:/usr/local/bin/rexd`), or name \
             its path with `--rexd /path/to/rexd` (`rexd = \"…\"` in the targets file)",
            spec.remote_command()
        ),
    }
}

fn status_text(status: &Option<ExitStatus>) -> String {
    match status {
        Some(s) => format!(" ({s})"),
        None => String::new(),
    }
}

/// The transport's last words for the error message: rexd's own `info:` log lines (the
/// confinement it set up, say) are not why it ended, so they are left out.
fn stderr_text(stderr: &str) -> String {
    let telling: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.contains(" rexd: info: ") && !l.trim().is_empty())
        .collect();
    let s = telling.join("\n");
    let s = s.trim();
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}

fn code_text(code: i64) -> String {
    match ErrorCode::from_code(code) {
        Some(c) => format!("{} ({code}): ", c.name()),
        None => format!("error {code}: "),
    }
}

fn data_text(data: &Option<serde_json::Value>) -> String {
    match data {
        Some(d) => format!(" {d}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::stderr_text;

    #[test]
    fn the_daemons_info_lines_are_not_given_as_the_reason() {
        let tail = "2026-11-30T01:02:03.004Z rexd: info: confinement: Landlock ABI 7: read-write under /srv\n";
        assert_eq!(stderr_text(tail), "");
        let tail =
            format!("{tail}2026-11-30T01:02:03.005Z rexd: error: out of memory\nssh: lost\n");
        assert_eq!(
            stderr_text(&tail),
            ": 2026-11-30T01:02:03.005Z rexd: error: out of memory\nssh: lost"
        );
    }
}
