//! `session.open`, `session.close`, `session.info`: capabilities and limits.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::exec::ProcessStatus;

/// A feature a daemon offers (`capabilities`) or a client asks for (`requested_capabilities`).
///
/// The spec's example lists `exec`, `fs` and `events`; `exec.input` and `pty` name the Phase 2
/// features so a client can tell whether it may use them before trying. Names this version
/// does not know are kept as [`Capability::Other`] (a newer daemon may offer more), so a list
/// survives a round trip unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Capability {
    /// `"exec"`: `exec.start`, `exec.wait`, `exec.kill`.
    Exec,
    /// `"fs"`: `fs.read`, `fs.write`, `fs.list`, `fs.glob`, `fs.stat`.
    Fs,
    /// `"events"`: streamed `exec.stdout` / `exec.stderr` / `exec.exit` / `exec.error`.
    Events,
    /// `"exec.input"`: writing to a running process's stdin.
    ExecInput,
    /// `"pty"`: the `pty.*` methods and events.
    Pty,
    /// `"metrics"`: `rexd.metrics` (addition to the spec).
    Metrics,
    /// `"resume"`: resumable sessions and `session.resume` (addition to the spec; offered by a
    /// daemon that outlives its connections: `rexd --listen`, `rexd --stdio --resumable`).
    Resume,
    /// Any other name, kept as sent.
    Other(String),
}

impl Capability {
    /// The name on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Capability::Exec => "exec",
            Capability::Fs => "fs",
            Capability::Events => "events",
            Capability::ExecInput => "exec.input",
            Capability::Pty => "pty",
            Capability::Metrics => "metrics",
            Capability::Resume => "resume",
            Capability::Other(name) => name,
        }
    }

    /// The capability with this name; unknown names become [`Capability::Other`].
    pub fn from_name(name: &str) -> Capability {
        match name {
            "exec" => Capability::Exec,
            "fs" => Capability::Fs,
            "events" => Capability::Events,
            "exec.input" => Capability::ExecInput,
            "pty" => Capability::Pty,
            "metrics" => Capability::Metrics,
            "resume" => Capability::Resume,
            other => Capability::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Capability {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Capability {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Capability, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Ok(Capability::from_name(&name))
    }
}

/// Daemon limits (the spec's "Limits" list and `[limits]` config section).
///
/// Every field is optional on the wire: `None` means "no limit stated" (the spec's own
/// `session.open` example sends only two of them). In a `session.open` result the daemon states
/// the limits in force for the session; in `session.open` params (an addition to the spec,
/// which says limits are "overridable downward per session" without naming a field) the client
/// asks for lower ones, and [`Limits::lowered_by`] computes what applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Limits {
    /// Output bytes kept per process (stdout and stderr together); more is dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
    /// Bytes one `fs.read` returns at most; a longer read is `truncated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_read_bytes: Option<u64>,
    /// Processes (exec and PTY) a session may run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_processes_per_session: Option<u64>,
    /// The timeout of an `exec.start` that names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_timeout_ms: Option<u64>,
    /// The most any `timeout_ms` may ask for; larger requests are clamped to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_timeout_ms: Option<u64>,
    /// Sessions the daemon serves at once. Lowering it per session is allowed but means nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_sessions: Option<u64>,
}

impl Limits {
    /// The spec's suggested configuration: 30 s default and 5 min hard timeout, 1 MiB output
    /// and file reads, 8 processes per session, 16 sessions.
    pub const DEFAULT: Limits = Limits {
        max_output_bytes: Some(1_048_576),
        max_file_read_bytes: Some(1_048_576),
        max_processes_per_session: Some(8),
        default_timeout_ms: Some(30_000),
        hard_timeout_ms: Some(300_000),
        max_concurrent_sessions: Some(16),
    };

    /// The limits that apply when a session asks for `requested` under these daemon limits.
    ///
    /// Limits may only go down: each field is the smaller of the two, a request above the
    /// daemon's value is clamped to it rather than refused (the result tells the client what it
    /// got), and a field the daemon leaves unlimited takes the requested value. If that leaves
    /// `default_timeout_ms` above `hard_timeout_ms`, the default is lowered to the hard limit.
    pub fn lowered_by(&self, requested: &Limits) -> Limits {
        fn min(daemon: Option<u64>, asked: Option<u64>) -> Option<u64> {
            match (daemon, asked) {
                (Some(d), Some(a)) => Some(d.min(a)),
                (d, a) => d.or(a),
            }
        }
        let mut out = Limits {
            max_output_bytes: min(self.max_output_bytes, requested.max_output_bytes),
            max_file_read_bytes: min(self.max_file_read_bytes, requested.max_file_read_bytes),
            max_processes_per_session: min(
                self.max_processes_per_session,
                requested.max_processes_per_session,
            ),
            default_timeout_ms: min(self.default_timeout_ms, requested.default_timeout_ms),
            hard_timeout_ms: min(self.hard_timeout_ms, requested.hard_timeout_ms),
            max_concurrent_sessions: min(
                self.max_concurrent_sessions,
                requested.max_concurrent_sessions,
            ),
        };
        if let (Some(d), Some(h)) = (out.default_timeout_ms, out.hard_timeout_ms) {
            out.default_timeout_ms = Some(d.min(h));
        }
        out
    }

    /// The timeout an `exec.start` gets: its own `timeout_ms` or the default, clamped to the hard
    /// limit. `None` when neither the request nor the limits give one.
    pub fn effective_timeout_ms(&self, requested: Option<u64>) -> Option<u64> {
        let t = requested.or(self.default_timeout_ms);
        match (t, self.hard_timeout_ms) {
            (Some(t), Some(h)) => Some(t.min(h)),
            (None, Some(h)) => Some(h),
            (t, None) => t,
        }
    }
}

/// `session.open` params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SessionOpenParams {
    /// Who is connecting, for the audit log.
    pub client_name: String,
    /// The client's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
    /// Preferred roots, a subset of the daemon's allowed roots. The daemon keeps those it allows
    /// and answers with the roots in force (`forbidden_path` if none is allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_roots: Option<Vec<String>>,
    /// Capabilities the client needs; the daemon answers `unsupported_capability` (-32007) when
    /// one of them is not offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_capabilities: Option<Vec<Capability>>,
    /// Lower limits for this session (addition to the spec; see [`Limits::lowered_by`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Ask for a resumable session (addition to the spec; capability `resume`): when the
    /// connection drops, the session and its processes wait `resume.grace_ms` for
    /// `session.resume`, and its events carry `event_seq`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub resumable: bool,
    /// Codecs the client can inflate, most wanted first (addition to the spec; `["zstd"]`).
    /// The daemon answers the one it chose in [`SessionOpenResult::compression`]; without
    /// this, or with no codec in common, every payload is `utf8` or `base64` as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<Vec<String>>,
    /// Ask for raw frames (addition to the spec): `fs.read` with `encoding: "raw"` answers
    /// with the bytes after the result's line instead of inside a string. Only a byte-stream
    /// transport (stdio, ssh) grants it; see [`SessionOpenResult::raw_frames`].
    #[serde(default, skip_serializing_if = "is_false")]
    pub raw_frames: bool,
    /// Ask for raw output too (addition to the spec; needs `raw_frames`): the session's
    /// `exec.stdout` and `exec.stderr` events carry their bytes after the line (`raw_bytes`)
    /// instead of in `data`. See [`SessionOpenResult::raw_output`].
    #[serde(default, skip_serializing_if = "is_false")]
    pub raw_output: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// How to resume a resumable session (in its `session.open` result).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeInfo {
    /// The secret `session.resume` must show (keep it like a password).
    pub resume_secret: String,
    /// How long the session waits for `session.resume` after its connection drops.
    pub grace_ms: u64,
    /// Events kept for replay at most (older ones are lost to a resume, which then says so).
    pub replay_events: u64,
}

/// `session.resume` params (addition to the spec).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SessionResumeParams {
    /// The session to take over.
    pub session_id: String,
    /// The `resume_secret` of its `session.open` result.
    pub resume_secret: String,
    /// The `event_seq` of the last event the client saw (0: none).
    pub last_seq: u64,
    /// Resume even when events after `last_seq` are no longer kept (`events_lost` otherwise).
    #[serde(default, skip_serializing_if = "is_false")]
    pub accept_loss: bool,
}

/// `session.resume` result (addition to the spec). The replayed events follow it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionResumeResult {
    /// The session.
    pub session_id: String,
    /// Events sent again after this answer (those after `last_seq`).
    pub replayed: u64,
    /// Events after `last_seq` that were no longer kept (0 unless `accept_loss`).
    pub lost: u64,
}

/// `session.open` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionOpenResult {
    /// The id every later request of the session carries.
    pub session_id: String,
    /// Always [`super::PROTOCOL_VERSION`] (`"rexd/1"`) for this version.
    pub protocol: String,
    /// The daemon's version.
    pub server_version: String,
    /// What the daemon offers.
    pub capabilities: Vec<Capability>,
    /// The limits in force for this session.
    pub limits: Limits,
    /// The roots in force for this session.
    pub workspace_roots: Vec<String>,
    /// For a resumable session: how to resume it (addition to the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<ResumeInfo>,
    /// The codec chosen from the client's offer (addition to the spec): payloads of this
    /// session (exec output events, `fs.read` content, `fs.write` content, `exec.input` data)
    /// may then be `encoding: "zstd"`. Absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    /// Raw frames were asked for and granted (addition to the spec): this session's `fs.read`
    /// may ask for `encoding: "raw"`. Absent: not granted.
    #[serde(default, skip_serializing_if = "is_false")]
    pub raw_frames: bool,
    /// Raw output was asked for and granted with raw frames (addition to the spec): this
    /// session's `exec.stdout`/`exec.stderr` events have `raw_bytes` and their bytes follow
    /// the line. Absent: not granted, events carry `data` as always.
    #[serde(default, skip_serializing_if = "is_false")]
    pub raw_output: bool,
}

/// `session.close` params. (The spec gives none; the session id is the one thing it needs.)
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SessionCloseParams {
    /// The session to close.
    pub session_id: String,
}

/// `session.info` params. (The spec gives none; the session id is the one thing it needs.)
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SessionInfoParams {
    /// The session to describe.
    pub session_id: String,
}

/// The result of methods that only succeed or fail: `session.close`, `exec.kill`,
/// `pty.resize`, `pty.close`.
///
/// The spec gives `exec.kill` the result `{ "ok": boolean }` and none for the others; they use
/// the same shape. `ok: false` means the operation was valid but had nothing to do (the process
/// had already exited); errors are JSON-RPC errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OkResult {
    /// Whether it happened.
    pub ok: bool,
}

/// `session.close` result.
pub type SessionCloseResult = OkResult;

/// One process in `session.info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// The process id `exec.start` or `pty.open` gave.
    pub process_id: String,
    /// Where it stands.
    pub status: ProcessStatus,
    /// When it started (RFC 3339, UTC).
    pub started_at: String,
    /// Whether it outlives the session (`detach: true`).
    #[serde(default)]
    pub detached: bool,
    /// The PTY it runs on, for `pty.open` processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pty_id: Option<String>,
}

/// `session.info` result: the session's state.
///
/// The spec says only "cwd, running processes, limits, etc."; this is that list plus what
/// `session.open` returned, so a client that reconnects can rebuild its view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfoResult {
    /// The session.
    pub session_id: String,
    /// The session's working directory: where relative paths and `exec.start` without `cwd`
    /// resolve.
    pub cwd: String,
    /// The roots in force.
    pub workspace_roots: Vec<String>,
    /// What the daemon offers.
    pub capabilities: Vec<Capability>,
    /// The limits in force.
    pub limits: Limits,
    /// The session's processes that have not been reaped (running, or ended but not yet waited
    /// for).
    pub processes: Vec<ProcessInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn capabilities_keep_unknown_names() {
        let caps: Vec<Capability> =
            serde_json::from_value(json!(["exec", "fs", "events", "pty", "exec.input", "x.y"]))
                .unwrap();
        assert_eq!(caps[5], Capability::Other("x.y".into()));
        assert_eq!(
            serde_json::to_value(&caps).unwrap(),
            json!(["exec", "fs", "events", "pty", "exec.input", "x.y"])
        );
        assert!(serde_json::from_value::<Capability>(json!(1)).is_err());
    }

    #[test]
    fn limits_only_go_down() {
        let daemon = Limits::DEFAULT;
        let asked = Limits {
            max_output_bytes: Some(10),
            hard_timeout_ms: Some(1_000),
            max_processes_per_session: Some(1_000),
            ..Limits::default()
        };
        let got = daemon.lowered_by(&asked);
        assert_eq!(got.max_output_bytes, Some(10));
        assert_eq!(got.max_processes_per_session, Some(8), "raising is clamped");
        assert_eq!(got.hard_timeout_ms, Some(1_000));
        assert_eq!(
            got.default_timeout_ms,
            Some(1_000),
            "default follows the hard limit down"
        );
        assert_eq!(got.max_file_read_bytes, Some(1_048_576));

        let unlimited = Limits::default();
        assert_eq!(unlimited.lowered_by(&asked), asked);
        assert_eq!(daemon.lowered_by(&Limits::default()), daemon);
    }

    #[test]
    fn effective_timeout() {
        let l = Limits::DEFAULT;
        assert_eq!(l.effective_timeout_ms(None), Some(30_000));
        assert_eq!(l.effective_timeout_ms(Some(5)), Some(5));
        assert_eq!(l.effective_timeout_ms(Some(10_000_000)), Some(300_000));
        assert_eq!(Limits::default().effective_timeout_ms(None), None);
    }

    #[test]
    fn spec_session_open_example() {
        let p: SessionOpenParams = serde_json::from_value(
            json!({"client_name":"my-agent","workspace_roots":["/srv/myapp"]}),
        )
        .unwrap();
        assert_eq!(
            p.workspace_roots.as_deref(),
            Some(&["/srv/myapp".to_owned()][..])
        );
        let r = json!({"session_id":"s_1","protocol":"rexd/1","server_version":"0.1.0",
            "capabilities":["exec","fs","events"],
            "limits":{"default_timeout_ms":30000,"max_output_bytes":1048576},
            "workspace_roots":["/srv/myapp"]});
        let parsed: SessionOpenResult = serde_json::from_value(r.clone()).unwrap();
        assert_eq!(parsed.limits.default_timeout_ms, Some(30_000));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), r);
    }
}

/// `rexd.metrics` params (addition to the spec): none; `{}` or absent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RexdMetricsParams {}

/// `rexd.metrics` result (addition to the spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RexdMetricsResult {
    /// The media type of `text`: `application/openmetrics-text; version=1.0.0`.
    pub content_type: String,
    /// The daemon's counters and gauges, as `rexd --listen` serves them at `/metrics`.
    pub text: String,
}
