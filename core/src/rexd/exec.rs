//! `exec.start`, `exec.wait`, `exec.kill`, `exec.input` and the `exec.*` events.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};

use super::data::{self, Encoding};
use super::error::RexdError;

/// What to run: an argument vector (the default, no shell involved) or a shell command line.
///
/// On the wire this is `argv` with `shell` false or absent, or `shell: true` with `command`.
/// The spec marks `argv` "required" and `command` "required only when shell=true" without
/// saying what `argv` means in shell mode; here the two are exclusive and a request that mixes
/// them (both fields, `command` without `shell: true`, `argv` with `shell: true`) is invalid
/// params, so what runs is never a guess. An empty `argv` or `command` is invalid too.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Program {
    /// Run `argv[0]` with these arguments, no shell.
    Argv(Vec<String>),
    /// Run this command line through the daemon's shell (`sh -c`), explicitly and auditably.
    Shell(String),
}

impl Program {
    /// An argument vector from anything string-like.
    pub fn argv<I, S>(args: I) -> Program
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Program::Argv(args.into_iter().map(Into::into).collect())
    }

    /// A shell command line.
    pub fn shell(command: impl Into<String>) -> Program {
        Program::Shell(command.into())
    }

    /// Whether this is shell mode.
    pub fn is_shell(&self) -> bool {
        matches!(self, Program::Shell(_))
    }

    /// From the three wire fields, with the rules in the type's doc.
    pub(super) fn from_wire(
        argv: Option<Vec<String>>,
        shell: bool,
        command: Option<String>,
    ) -> Result<Program, String> {
        match (shell, argv, command) {
            (false, Some(argv), None) if !argv.is_empty() => Ok(Program::Argv(argv)),
            (false, Some(_), None) => Err("`argv` must not be empty".into()),
            (false, None, _) => {
                Err("missing field `argv` (or `shell: true` with `command`)".into())
            }
            (false, Some(_), Some(_)) => Err("`command` needs `shell: true`, not `argv`".into()),
            (true, None, Some(command)) if !command.is_empty() => Ok(Program::Shell(command)),
            (true, None, Some(_)) => Err("`command` must not be empty".into()),
            (true, None, None) => {
                Err("missing field `command` (required with `shell: true`)".into())
            }
            (true, Some(_), _) => Err("`argv` and `shell: true` are exclusive".into()),
        }
    }

    /// Writes `argv` + `shell: false`, or `shell: true` + `command`.
    pub(super) fn serialize_fields<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        match self {
            Program::Argv(argv) => {
                map.serialize_entry("argv", argv)?;
                map.serialize_entry("shell", &false)
            }
            Program::Shell(command) => {
                map.serialize_entry("shell", &true)?;
                map.serialize_entry("command", command)
            }
        }
    }
}

/// Checks an `env` field: every key must be a variable name a process can be given (not empty,
/// no `=`, no NUL) and no value may hold NUL. The check is the protocol's, not a policy's: the
/// environment a child gets is `NAME=VALUE` strings, so a key `BASH_ENV=/x` would set
/// `BASH_ENV` itself (to `/x=`) past any filter that compares whole keys, and `PATH=/x:` would
/// add a second `PATH`.
pub(super) fn check_env(env: Option<&BTreeMap<String, String>>) -> Result<(), String> {
    for (key, value) in env.into_iter().flatten() {
        if key.is_empty() || key.contains(['=', '\0']) {
            return Err(format!(
                "`env` key {key:?} is not a variable name: a name is not empty and holds no `=` \
                 or NUL"
            ));
        }
        if value.contains('\0') {
            return Err(format!("`env` value of {key:?} holds a NUL byte"));
        }
    }
    Ok(())
}

impl Default for Program {
    /// An empty argument vector: not valid to send, a placeholder for struct-update syntax.
    fn default() -> Program {
        Program::Argv(Vec::new())
    }
}

/// `exec.start` params: start a non-PTY process whose output streams as events.
///
/// Defaults: `shell` false, `detach` false. `timeout_ms` absent means the session's
/// `default_timeout_ms`; any value is clamped to `hard_timeout_ms`. `max_output_bytes` can only
/// lower the session's limit; `uncapped_output` (an addition to the spec) asks for no cap but
/// the operator's `limits.hard_output_bytes`, for a client that streams what it gets to a
/// terminal or a file (`rex exec`) rather than keeping it (an agent). `env` entries are added to
/// (and override) the daemon's environment. `stdin` is UTF-8 text written to the process's stdin, which is then closed;
/// without it stdin is an open pipe for `exec.input`, or closed at once when the daemon lacks
/// that capability. Optional fields accept `null` as absent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "ExecStartWire")]
pub struct ExecStartParams {
    /// The session.
    pub session_id: String,
    /// What to run (`argv`, or `shell` + `command`).
    pub program: Program,
    /// Working directory, inside the allowed roots; the session's cwd when absent.
    pub cwd: Option<String>,
    /// Extra environment variables.
    pub env: Option<BTreeMap<String, String>>,
    /// A small stdin payload (text).
    pub stdin: Option<String>,
    /// Kill the process (status `timed_out`) after this long.
    pub timeout_ms: Option<u64>,
    /// Output cap for this process, at most the session's `max_output_bytes`.
    pub max_output_bytes: Option<u64>,
    /// No cap but the daemon's hard one (addition to the spec; sent only when true). An older
    /// daemon ignores it and caps at `max_output_bytes`, and says so with `truncated`.
    pub uncapped_output: bool,
    /// Keep the process running after the session closes.
    pub detach: bool,
}

/// The wire fields of `exec.start` before the [`Program`] rules are checked.
#[derive(Deserialize)]
struct ExecStartWire {
    session_id: String,
    #[serde(default)]
    argv: Option<Vec<String>>,
    #[serde(default)]
    shell: bool,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    stdin: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    max_output_bytes: Option<u64>,
    #[serde(default)]
    uncapped_output: bool,
    #[serde(default)]
    detach: bool,
}

impl TryFrom<ExecStartWire> for ExecStartParams {
    type Error = String;

    fn try_from(w: ExecStartWire) -> Result<ExecStartParams, String> {
        check_env(w.env.as_ref())?;
        Ok(ExecStartParams {
            session_id: w.session_id,
            program: Program::from_wire(w.argv, w.shell, w.command)?,
            cwd: w.cwd,
            env: w.env,
            stdin: w.stdin,
            timeout_ms: w.timeout_ms,
            max_output_bytes: w.max_output_bytes,
            uncapped_output: w.uncapped_output,
            detach: w.detach,
        })
    }
}

impl Serialize for ExecStartParams {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("session_id", &self.session_id)?;
        self.program.serialize_fields(&mut map)?;
        if let Some(cwd) = &self.cwd {
            map.serialize_entry("cwd", cwd)?;
        }
        if let Some(env) = &self.env {
            map.serialize_entry("env", env)?;
        }
        if let Some(stdin) = &self.stdin {
            map.serialize_entry("stdin", stdin)?;
        }
        if let Some(t) = &self.timeout_ms {
            map.serialize_entry("timeout_ms", t)?;
        }
        if let Some(m) = &self.max_output_bytes {
            map.serialize_entry("max_output_bytes", m)?;
        }
        if self.uncapped_output {
            map.serialize_entry("uncapped_output", &true)?;
        }
        map.serialize_entry("detach", &self.detach)?;
        map.end()
    }
}

/// `exec.start` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecStartResult {
    /// The new process's id (unique within the daemon).
    pub process_id: String,
    /// When it started: an RFC 3339 timestamp in UTC, e.g. `"2026-02-25T10:00:00Z"` (the spec's
    /// example; it says only "timestamp").
    pub started_at: String,
}

/// `exec.wait` params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecWaitParams {
    /// The session.
    pub session_id: String,
    /// The process.
    pub process_id: String,
    /// How long to wait; absent waits until the process ends (or its own timeout kills it).
    /// When it expires first the answer is `status: "running"`, not an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Also answer the output the daemon collected since the last such `exec.wait` (a
    /// deskwire addition, for sessions without an event stream: `POST /rpc`'s). Omitted when
    /// false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub output: bool,
}

/// Where a process stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProcessStatus {
    /// Still running.
    Running,
    /// Ended by itself (`exit_code` set, or `signal` when a signal nobody sent through
    /// `exec.kill` ended it).
    Exited,
    /// Ended by `exec.kill`, `pty.close` or the session closing.
    Killed,
    /// Killed because it ran past its timeout.
    TimedOut,
}

/// `exec.wait` result.
///
/// `exit_code` and `signal` are nullable: written as `null` when unset, and an absent field
/// reads as `null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecWaitResult {
    /// Where the process stands.
    pub status: ProcessStatus,
    /// The exit code, when it exited normally.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The signal that ended it (a [`Signal`] name such as `"KILL"`), when one did.
    #[serde(default)]
    pub signal: Option<String>,
    /// Stdout bytes sent in `exec.stdout` events so far.
    pub bytes_stdout: u64,
    /// Stderr bytes sent in `exec.stderr` events so far.
    pub bytes_stderr: u64,
    /// Output was cut at `max_output_bytes` (addition to the spec; omitted when false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub truncated: bool,
    /// With `output: true`: what the process wrote since the last such answer (a deskwire
    /// addition; omitted otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<CollectedOutput>,
    /// Why the process never ran (`cannot start echo: Argument list too long`), as its
    /// `exec.error` event said, for a client that gets no events (`POST /rpc`): then `status`
    /// is `exited` with neither `exit_code` nor `signal` (a deskwire addition; omitted
    /// otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The output a daemon kept for a session without an event stream, answered by `exec.wait`
/// with `output: true` (a deskwire addition).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CollectedOutput {
    /// Stdout bytes, in `encoding`.
    pub stdout: String,
    /// Stderr bytes, in `encoding`.
    pub stderr: String,
    /// `utf8` when both streams are UTF-8, else `base64` for both.
    #[serde(default)]
    pub encoding: Encoding,
    /// Bytes not kept, because the session's collected output reached its bound before a
    /// client took it.
    #[serde(default)]
    pub dropped_bytes: u64,
}

/// A signal name for `exec.kill`: the POSIX names without the `SIG` prefix, upper case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
#[non_exhaustive]
#[allow(missing_docs)] // the names are the documentation: see signal(7)
pub enum Signal {
    Hup,
    Int,
    Quit,
    Abrt,
    Kill,
    Usr1,
    Usr2,
    Pipe,
    Alrm,
    /// The default for `exec.kill`.
    #[default]
    Term,
    Cont,
    Stop,
    Tstp,
    Winch,
}

impl Signal {
    /// Every signal `exec.kill` accepts.
    pub const ALL: [Signal; 14] = [
        Signal::Hup,
        Signal::Int,
        Signal::Quit,
        Signal::Abrt,
        Signal::Kill,
        Signal::Usr1,
        Signal::Usr2,
        Signal::Pipe,
        Signal::Alrm,
        Signal::Term,
        Signal::Cont,
        Signal::Stop,
        Signal::Tstp,
        Signal::Winch,
    ];

    /// The name on the wire (`"TERM"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Signal::Hup => "HUP",
            Signal::Int => "INT",
            Signal::Quit => "QUIT",
            Signal::Abrt => "ABRT",
            Signal::Kill => "KILL",
            Signal::Usr1 => "USR1",
            Signal::Usr2 => "USR2",
            Signal::Pipe => "PIPE",
            Signal::Alrm => "ALRM",
            Signal::Term => "TERM",
            Signal::Cont => "CONT",
            Signal::Stop => "STOP",
            Signal::Tstp => "TSTP",
            Signal::Winch => "WINCH",
        }
    }

    /// The signal with this name, for hosts turning user input into params: a `SIG` prefix is
    /// accepted here (`"SIGKILL"`), though the wire takes only the bare name. Names only, never
    /// numbers, since signal numbers differ between platforms.
    pub fn from_name(name: &str) -> Option<Signal> {
        let name = name.strip_prefix("SIG").unwrap_or(name);
        Signal::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `exec.kill` params.
///
/// A process group is signalled (the process and its children), since killing only a shell
/// leaves its pipeline running. Killing a process that already ended answers `ok: false`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecKillParams {
    /// The session.
    pub session_id: String,
    /// The process.
    pub process_id: String,
    /// Which signal; `TERM` by default.
    #[serde(default)]
    pub signal: Signal,
}

/// `exec.kill` result.
pub type ExecKillResult = super::session::OkResult;

/// `exec.input` params: bytes for a running process's stdin.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecInputParams {
    /// The session.
    pub session_id: String,
    /// The process.
    pub process_id: String,
    /// The bytes, as `encoding` says.
    pub data: String,
    /// `utf8` (default) or `base64` for binary input (addition to the spec, whose `data` is a
    /// plain string; omitted when `utf8`).
    #[serde(default, skip_serializing_if = "Encoding::is_default")]
    pub encoding: Encoding,
    /// Close stdin after this data.
    #[serde(default)]
    pub eof: bool,
}

impl ExecInputParams {
    /// The bytes `data` carries.
    pub fn bytes(&self) -> Result<Cow<'_, [u8]>, RexdError> {
        data::decode(&self.data, self.encoding)
    }
}

/// `exec.input` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecInputResult {
    /// Bytes taken for the process's stdin (after base64 decoding).
    pub accepted_bytes: u64,
}

/// The `exec.stdout` / `exec.stderr` event: one piece of a process's output.
///
/// This is the hot path of a REXD client: the strings borrow from the input line when they hold
/// no JSON escapes, so a piece of output is parsed without copying. `seq` starts at 1 and grows
/// by 1 per `(process_id, stream)`; `encoding` is `utf8` unless the bytes are not valid UTF-8
/// (then `base64`), and is always written.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecOutput<'a> {
    /// The session.
    #[serde(borrow)]
    pub session_id: Cow<'a, str>,
    /// The process.
    #[serde(borrow)]
    pub process_id: Cow<'a, str>,
    /// Position in this stream.
    pub seq: u64,
    /// The output, as `encoding` says.
    #[serde(borrow)]
    pub data: Cow<'a, str>,
    /// How `data` carries the bytes.
    #[serde(default)]
    pub encoding: Encoding,
    /// In a session that negotiated raw output (`session.open` `raw_output`, a deskwire
    /// addition): how many bytes follow this event's line on the byte stream, `data` being
    /// empty and `encoding` `raw` (the output as it is) or `zstd` (one zstd frame of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_bytes: Option<u64>,
    /// Those bytes: not part of the JSON, written after the line by
    /// [`Event::write_frame`](super::Event::write_frame) and put here by the client that took
    /// them off the stream.
    #[serde(skip)]
    pub raw: Vec<u8>,
}

impl<'a> ExecOutput<'a> {
    /// An event whose bytes follow its line (`raw_bytes` of them): `encoding` is `raw` for the
    /// output as it is, or `zstd` for one zstd frame of it.
    pub fn raw_frame(
        session_id: impl Into<Cow<'a, str>>,
        process_id: impl Into<Cow<'a, str>>,
        seq: u64,
        encoding: Encoding,
        raw: Vec<u8>,
    ) -> ExecOutput<'a> {
        ExecOutput {
            session_id: session_id.into(),
            process_id: process_id.into(),
            seq,
            data: Cow::Borrowed(""),
            encoding,
            raw_bytes: Some(raw.len() as u64),
            raw,
        }
    }

    /// An event for these output bytes: text when they are UTF-8, else base64.
    pub fn from_bytes(
        session_id: impl Into<Cow<'a, str>>,
        process_id: impl Into<Cow<'a, str>>,
        seq: u64,
        bytes: &'a [u8],
    ) -> ExecOutput<'a> {
        let (encoding, data) = data::encode(bytes);
        ExecOutput {
            session_id: session_id.into(),
            process_id: process_id.into(),
            seq,
            data,
            encoding,
            raw_bytes: None,
            raw: Vec::new(),
        }
    }

    /// The same event with its raw bytes in `data`, for a transport that cannot carry bytes
    /// after a line: `raw` becomes `utf8` or `base64` as [`data::encode`] chooses, and a raw
    /// zstd frame becomes a `zstd` string (the base64 of the frame). Others are unchanged.
    pub fn into_string_payload(self) -> ExecOutput<'a> {
        if self.raw_bytes.is_none() {
            return self;
        }
        let (encoding, text) = match self.encoding {
            Encoding::Zstd => (Encoding::Zstd, data::encode_as(&self.raw, Encoding::Zstd)),
            _ => data::encode(&self.raw),
        };
        let text = text.into_owned();
        ExecOutput {
            data: Cow::Owned(text),
            encoding,
            raw_bytes: None,
            raw: Vec::new(),
            ..self
        }
    }

    /// The output bytes: the raw bytes after the line when it had them (`raw`), else `data`
    /// decoded. A zstd frame is [`RexdError::Compressed`]: inflate it where it was negotiated.
    pub fn bytes(&self) -> Result<Cow<'_, [u8]>, RexdError> {
        match (self.raw_bytes, self.encoding) {
            (Some(_), Encoding::Raw) => Ok(Cow::Borrowed(&self.raw)),
            (Some(_), Encoding::Zstd) => Err(RexdError::Compressed),
            _ => data::decode(&self.data, self.encoding),
        }
    }

    /// The same event owning its strings.
    pub fn into_owned(self) -> ExecOutput<'static> {
        ExecOutput {
            session_id: Cow::Owned(self.session_id.into_owned()),
            process_id: Cow::Owned(self.process_id.into_owned()),
            seq: self.seq,
            data: Cow::Owned(self.data.into_owned()),
            encoding: self.encoding,
            raw_bytes: self.raw_bytes,
            raw: self.raw,
        }
    }
}

/// The `exec.exit` event: the process ended. Terminal: nothing more comes for this process.
///
/// `exit_code` and `signal` are nullable (written as `null`, absent reads as `null`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecExit {
    /// The session.
    pub session_id: String,
    /// The process.
    pub process_id: String,
    /// The exit code, when it exited normally.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(default)]
    pub signal: Option<String>,
    /// Whether its timeout killed it.
    pub timed_out: bool,
    /// How long it ran.
    pub duration_ms: u64,
    /// Stdout bytes sent in events.
    pub bytes_stdout: u64,
    /// Stderr bytes sent in events.
    pub bytes_stderr: u64,
    /// Output was cut at `max_output_bytes` (addition to the spec; omitted when false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub truncated: bool,
}

/// The `exec.error` event: the process could not be launched (`exec.start` had answered with a
/// `process_id`, but spawning failed). Terminal like `exec.exit`, which does not follow it.
///
/// The spec names the event without fields; these are the ones a client needs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecErrorEvent {
    /// The session.
    pub session_id: String,
    /// The process that did not start.
    pub process_id: String,
    /// What went wrong, for people (e.g. `"No such file or directory (os error 2)"`).
    pub message: String,
    /// The OS error number, when the failure came from the OS (platform-specific: for logs and
    /// for matching known cases, not for portable logic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
}

/// For `skip_serializing_if` on additions to the spec that are false unless used.
pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn start(v: serde_json::Value) -> Result<ExecStartParams, serde_json::Error> {
        serde_json::from_value(v)
    }

    #[test]
    fn argv_mode_is_the_default() {
        let p =
            start(json!({"session_id":"s_1","argv":["git","status","--short"],"cwd":"/srv/myapp"}))
                .unwrap();
        assert_eq!(p.program, Program::argv(["git", "status", "--short"]));
        assert!(!p.detach);
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"session_id":"s_1","argv":["git","status","--short"],"shell":false,
                   "cwd":"/srv/myapp","detach":false})
        );
    }

    #[test]
    fn env_keys_must_be_variable_names() {
        let ok = start(json!({"session_id":"s","argv":["ls"],"env":{"LANG":"C","A_1":""}}));
        assert_eq!(ok.unwrap().env.unwrap().len(), 2);
        for (env, named) in [
            (json!({"BASH_ENV=/w/x": ""}), "BASH_ENV=/w/x"),
            (json!({"PATH=/x:": "/bin"}), "PATH=/x:"),
            (json!({"": "x"}), "\"\""),
            (json!({"A\0B": "x"}), "A\\0B"),
            (json!({"LANG": "C\0"}), "LANG"),
        ] {
            let e = start(json!({"session_id":"s","argv":["ls"],"env":env}))
                .unwrap_err()
                .to_string();
            assert!(e.contains(named), "{env}: {e}");
            let pty: Result<super::super::pty::PtyOpenParams, _> =
                serde_json::from_value(json!({"session_id":"s","argv":["ls"],"env":env}));
            assert!(pty.unwrap_err().to_string().contains(named), "{env}");
        }
    }

    #[test]
    fn shell_mode_needs_command_and_excludes_argv() {
        let p = start(json!({"session_id":"s","shell":true,"command":"ls | wc -l"})).unwrap();
        assert_eq!(p.program, Program::shell("ls | wc -l"));
        for bad in [
            json!({"session_id":"s","shell":true}),
            json!({"session_id":"s","shell":true,"command":""}),
            json!({"session_id":"s","shell":true,"command":"ls","argv":["ls"]}),
            json!({"session_id":"s","command":"ls"}),
            json!({"session_id":"s","argv":["ls"],"command":"ls"}),
            json!({"session_id":"s","argv":[]}),
            json!({"session_id":"s"}),
            json!({"argv":["ls"]}),
            json!({"session_id":"s","argv":"ls"}),
            json!({"session_id":"s","argv":["ls"],"timeout_ms":-1}),
        ] {
            assert!(start(bad.clone()).is_err(), "{bad}");
        }
        // `null` is absent.
        let p = start(json!({"session_id":"s","shell":true,"command":"ls","argv":null})).unwrap();
        assert!(p.program.is_shell());
    }

    #[test]
    fn signals() {
        let k: ExecKillParams =
            serde_json::from_value(json!({"session_id":"s","process_id":"p"})).unwrap();
        assert_eq!(k.signal, Signal::Term);
        assert_eq!(Signal::from_name("SIGKILL"), Some(Signal::Kill));
        assert_eq!(Signal::from_name("kill"), None);
        for s in Signal::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
            assert_eq!(Signal::from_name(s.as_str()), Some(s));
        }
        assert!(
            serde_json::from_value::<ExecKillParams>(
                json!({"session_id":"s","process_id":"p","signal":"SIGTERM"})
            )
            .is_err()
        );
    }

    #[test]
    fn output_borrows_when_it_can() {
        let line = r#"{"session_id":"s_123","process_id":"p_456","seq":1,"data":"plain","encoding":"utf8"}"#;
        let e: ExecOutput<'_> = serde_json::from_str(line).unwrap();
        assert!(matches!(e.data, Cow::Borrowed("plain")));
        assert!(matches!(e.session_id, Cow::Borrowed(_)));
        let line = r#"{"session_id":"s","process_id":"p","seq":2,"data":"a\nb"}"#;
        let e: ExecOutput<'_> = serde_json::from_str(line).unwrap();
        assert_eq!(e.data, "a\nb");
        assert_eq!(e.encoding, Encoding::Utf8);
        assert_eq!(e.into_owned().bytes().unwrap().as_ref(), b"a\nb");
    }

    #[test]
    fn binary_output_goes_base64() {
        let e = ExecOutput::from_bytes("s", "p", 3, &[0, 159, 146, 150]);
        assert_eq!(e.encoding, Encoding::Base64);
        assert_eq!(e.bytes().unwrap().as_ref(), &[0, 159, 146, 150]);
    }

    #[test]
    fn exit_nullable_fields() {
        let e: ExecExit = serde_json::from_value(json!({"session_id":"s","process_id":"p",
            "timed_out":true,"duration_ms":5,"bytes_stdout":0,"bytes_stderr":0}))
        .unwrap();
        assert_eq!(e.exit_code, None);
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["exit_code"], json!(null));
        assert_eq!(v["signal"], json!(null));
        assert!(v.get("truncated").is_none());
    }
}
