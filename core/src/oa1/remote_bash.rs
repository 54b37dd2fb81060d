//! The `RemoteBash` tool contract at the OA1 level (`docs/oa1.md`, "`RemoteBash`").
//!
//! The model calls `RemoteBash {"command": ..., "timeout_sec": ...}`; the desk sends the command
//! as the request payload and the tool result is the reassembled output text (with
//! [`TRUNCATION_MARKER`](super::TRUNCATION_MARKER) when cut), or the JSON object
//! `{"ok": false, "error": code, "message": message}` when the request failed.

use serde::Deserialize;

use super::{Event, Failure, LocalError, Requester};

/// The tool name the model sees.
pub const TOOL_NAME: &str = "RemoteBash";

/// The tool description for a desk with the connection defaults on a server not measured (see
/// [`description`]): what the model must know to use the tool well (each call is a fresh
/// shell, output travels slowly and is cut, how to page through large output, what the exit
/// marker means).
pub static DESCRIPTION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let defaults = super::ConnectionConfig::new("desk", "#desk").oa1;
    description(&defaults, defaults.pacing)
});

/// Typical command output (logs, listings, source) deflates to about a third; base64 then
/// adds a third back. Measured by `tests/pacing/remote_bash_speed.sh`: 2.3x for Rust source,
/// 4.5x for `ls -la`, 6.3-7.9x for logs.
const TYPICAL_DEFLATE_RATIO: u64 = 3;

/// Payload bytes a line carries with adaptive payloads: a 512-byte line less the server's
/// prefix, `PRIVMSG #channel :` and the frame header, for a prefix of average length.
const ADAPTIVE_PAYLOAD_ESTIMATE: u64 = 400;

/// About how many bytes of typical output reach the desk within `window_ms` over a link
/// paced by `pacing` with `config`'s payloads and compression, at most the size cap. An
/// estimate, for the model's description, never a limit.
pub fn output_budget(config: &super::Config, pacing: super::Pacing, window_ms: u64) -> u64 {
    let payload = match config.adaptive_payload {
        true => ADAPTIVE_PAYLOAD_ESTIMATE,
        false => config.max_frame_payload_bytes as u64,
    };
    let wire = pacing.lines_within(window_ms).saturating_mul(payload);
    let text = match config.compression {
        true => wire.saturating_mul(TYPICAL_DEFLATE_RATIO) / 4 * 3,
        false => wire,
    };
    text.min(config.max_message_bytes as u64)
}

/// The tool description for a desk with `config` whose lines are paced by `pacing` (the
/// connection's [`pacing`](super::Desk::pacing) once in the channel: what the server is
/// decides it, for the remote on the same server as for this end). It states the practical
/// output budget within the request timeout, so the model asks for what fits.
pub fn description(config: &super::Config, pacing: super::Pacing) -> String {
    let timeout = super::client::format_duration(config.request_timeout_ms);
    let budget = output_budget(config, pacing, config.request_timeout_ms) / 1024;
    let cap = config.max_message_bytes / 1024;
    format!(
        "Run a shell command on the remote machine and return its combined stdout and stderr \
         as text. Each call runs in a fresh shell: cd, exports and other shell state do not carry \
         over, so chain steps in one command (cd /x && make). Output travels over IRC, slowly: \
         about {budget} KB of typical output arrive within a {timeout} timeout on this link, \
         never more than {cap} KB. Output cut by a timeout ends with a '...[cut at ... timeout: \
         N bytes arrived ...]...' line; output over that cap ends with '...[truncated]...'. So \
         ask for what you need: keep output small (head, tail, rg -n, wc -l first); for \
         anything large, write it to a file (cmd > \"${{TMPDIR:-/tmp}}/out.txt\" 2>&1) and page \
         through it (sed -n '1,200p' \"${{TMPDIR:-/tmp}}/out.txt\", then '201,400p'). Give \
         timeout_sec for a slow command; the remote may stop a command sooner, at its own limit. \
         For structured output, ask the command itself for JSON. {EXIT_MARKER_RULE}"
    )
}

/// What a shell tool's description says about the [exit marker](exit_marker), in the same words
/// for `RemoteBash` and REXD's `bash` (`crate::tools::builtin`), whose results end the same way.
pub const EXIT_MARKER_RULE: &str = "A command that fails ends its output with a line such as \
     [exit code: 1] or [signal: KILL]; without one, it exited 0 (so no output and no such line \
     means success, as grep finding nothing does not).";

/// The last line of a command's `RemoteBash` output when it did not exit 0: `[exit code: 2]` or
/// `[signal: KILL]`, so a model can tell `grep` finding nothing (exit 1) from success, as coding
/// agents' Bash tools do. `None` for exit 0 (and when neither is known). Remotes put it on a
/// line of its own, after a newline when the output did not end with one.
pub fn exit_marker(exit_code: Option<i32>, signal: Option<&str>) -> Option<String> {
    match (exit_code, signal) {
        (_, Some(signal)) => Some(format!("[signal: {signal}]")),
        (Some(0) | None, None) => None,
        (Some(code), None) => Some(format!("[exit code: {code}]")),
    }
}

/// How a command ended, as the last line of its `RemoteBash` answer says ([`exit_marker`], or
/// the desk's [timeout marker](super::timeout_marker)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending<'a> {
    /// `[exit code: N]`; no marker reads as 0, which holds for a remote that adds markers (every
    /// deskwire remote does unless told not to).
    Exited(i32),
    /// `[signal: NAME]`.
    Signaled(&'a str),
    /// The answer was cut at the request's timeout: how the command ended is unknown.
    CutAtTimeout,
    /// The answer was cut short when the remote or the link went away
    /// ([`cut_short_marker`](super::cut_short_marker)): how the command ended is unknown.
    CutShort,
}

impl Ending<'_> {
    /// The exit status a shell over ssh would report for it: the exit code, 128 + the signal's
    /// number (Linux numbering; an unknown name gives 1), 124 when the answer was cut at the
    /// timeout (as `timeout` and `rex`), 255 when it was cut short (as ssh when its connection
    /// is lost). What a host that mirrors the command's status (a CLI, a CI step) exits with.
    pub fn exit_status(&self) -> i32 {
        match *self {
            Ending::Exited(code) => code,
            Ending::Signaled(name) => signal_number(name).map_or(1, |n| 128 + n),
            Ending::CutAtTimeout => 124,
            Ending::CutShort => 255,
        }
    }
}

/// The Linux number of a signal named as remotes write it (`KILL`, `SEGV`; a number for one
/// without a name).
pub fn signal_number(name: &str) -> Option<i32> {
    const NAMES: [&str; 31] = [
        "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
        "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
        "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
    ];
    match NAMES.iter().position(|n| *n == name) {
        Some(i) => Some(i as i32 + 1),
        None => name.parse().ok().filter(|n| (1..=64).contains(n)),
    }
}

/// How the command behind `output` (a `RemoteBash` answer's text) ended.
pub fn ending(output: &str) -> Ending<'_> {
    let output = output.strip_suffix('\n').unwrap_or(output);
    let last = output.rsplit('\n').next().unwrap_or("");
    if last.starts_with("...[cut at the ") && last.ends_with("]...") {
        return Ending::CutAtTimeout;
    }
    if last.starts_with("...[cut short: ") && last.ends_with("]...") {
        return Ending::CutShort;
    }
    let marker = |prefix: &str| last.strip_prefix(prefix)?.strip_suffix(']');
    if let Some(code) = marker("[exit code: ").and_then(|c| c.parse().ok()) {
        return Ending::Exited(code);
    }
    match marker("[signal: ") {
        Some(name) if !name.is_empty() => Ending::Signaled(name),
        _ => Ending::Exited(0),
    }
}

/// The input schema (`docs/oa1.md`, "`RemoteBash`"), as JSON text.
pub const INPUT_SCHEMA: &str = r#"{"type":"object","properties":{"command":{"type":"string","description":"The shell command to run on the remote machine."},"timeout_sec":{"type":"integer","description":"Optional timeout (seconds)."}},"required":["command"]}"#;

/// Arguments of one call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RemoteBashArgs {
    /// The shell command.
    pub command: String,
    /// Overrides the request timeout.
    #[serde(default)]
    pub timeout_sec: Option<u64>,
}

/// Why a call's arguments were refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArgsError {
    /// Not a JSON object with a string `command` (and an optional non-negative integer
    /// `timeout_sec`).
    #[error("invalid RemoteBash arguments: {0}")]
    Invalid(#[from] serde_json::Error),
    /// A timeout of zero: `timeout_sec` 0 in the model's arguments, or a host's zero duration.
    #[error("the timeout must be more than zero (timeout_sec at least 1)")]
    ZeroTimeout,
    /// An empty command, or one of only whitespace: a shell would run nothing and report
    /// success, which tells the model nothing.
    #[error("the command is empty: give the shell command to run")]
    EmptyCommand,
    /// A command with a NUL byte, which no shell command line can carry (`execve` refuses it).
    #[error("the command has a NUL byte at byte {at}; a shell command line cannot carry one")]
    NulInCommand {
        /// Its byte offset in the command.
        at: usize,
    },
    /// The request could not be sent.
    #[error(transparent)]
    Local(#[from] LocalError),
}

/// Refuses a command no remote could run as the caller meant: empty or only whitespace, or
/// with a NUL byte. Checked before anything is sent, for the model's JSON and a host's own
/// call alike.
pub fn check_command(command: &str) -> Result<(), ArgsError> {
    if command.trim().is_empty() {
        return Err(ArgsError::EmptyCommand);
    }
    match memchr::memchr(0, command.as_bytes()) {
        Some(at) => Err(ArgsError::NulInCommand { at }),
        None => Ok(()),
    }
}

impl RemoteBashArgs {
    /// A call's arguments from the host's own values (`desk.remote_bash("ls", Some(30))`):
    /// `timeout_sec` of 0, an empty command and one with a NUL byte are refused
    /// ([`check_command`]), as in the model's JSON.
    pub fn new(command: impl Into<String>, timeout_sec: Option<u64>) -> Result<Self, ArgsError> {
        if timeout_sec == Some(0) {
            return Err(ArgsError::ZeroTimeout);
        }
        let command = command.into();
        check_command(&command)?;
        Ok(RemoteBashArgs {
            command,
            timeout_sec,
        })
    }

    /// Parses the model's JSON arguments. An empty string means `{}` (and so fails for the
    /// missing `command`).
    pub fn parse(json: &str) -> Result<Self, ArgsError> {
        let json = if json.trim().is_empty() { "{}" } else { json };
        let args: RemoteBashArgs = serde_json::from_str(json)?;
        Self::new(args.command, args.timeout_sec)
    }

    /// The request timeout the call asks for, in milliseconds (`None`: the desk's
    /// `request_timeout_ms`).
    pub fn timeout_ms(&self) -> Option<u64> {
        self.timeout_sec.map(|s| s.saturating_mul(1000))
    }
}

/// Sends a `RemoteBash` call on `desk` (a [`Desk`](super::Desk) or a [`Client`](super::Client)):
/// the command is the request payload, `timeout_sec` its timeout. Returns the request id whose
/// event ([`Outcome::from_event`]) ends the call.
pub fn start<R: Requester + ?Sized>(
    desk: &mut R,
    now: u64,
    args: &RemoteBashArgs,
) -> Result<String, LocalError> {
    desk.request(now, &args.command, args.timeout_ms())
}

/// Starts a model's `RemoteBash` call on `desk` from its JSON arguments: returns the request
/// id whose event answers it.
pub fn call<R: Requester + ?Sized>(
    desk: &mut R,
    now: u64,
    args_json: &str,
) -> Result<String, ArgsError> {
    let args = RemoteBashArgs::parse(args_json)?;
    Ok(start(desk, now, &args)?)
}

/// How a `RemoteBash` call ended: what every binding turns into its language's result or error,
/// and into the tool result the model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The command's combined output, with the [exit marker](exit_marker) when it did not exit
    /// 0.
    Output {
        /// The text (with [`TRUNCATION_MARKER`](super::TRUNCATION_MARKER) when cut).
        text: String,
        /// Whether the text is not the whole answer: cut at the size cap, or the part that
        /// arrived before a timeout or the end of the remote or the link (see
        /// [`Event::Response`]'s `truncated`; [`ending`] tells which).
        truncated: bool,
    },
    /// The request failed; [`Failure::is_timeout`] tells the timeouts apart.
    Failed(Failure),
}

impl Outcome {
    /// The outcome a desk's event carries, with its request id: `Response` and `Failed`; any
    /// other event is given back.
    pub fn from_event(event: Event) -> Result<(String, Outcome), Event> {
        match event {
            Event::Response {
                id,
                text,
                truncated,
            } => Ok((id, Outcome::Output { text, truncated })),
            Event::Failed { id, failure } => Ok((id, Outcome::Failed(failure))),
            other => Err(other),
        }
    }

    /// What the model reads: the output text, or `{"ok": false, "error": code, "message": ...}`.
    pub fn tool_text(&self) -> String {
        match self {
            Outcome::Output { text, .. } => text.clone(),
            Outcome::Failed(failure) => failure_json(failure),
        }
    }

    /// Whether the tool result is an error result (the request failed).
    pub fn is_error(&self) -> bool {
        matches!(self, Outcome::Failed(_))
    }

    /// The output, or the typed failure.
    pub fn into_result(self) -> Result<String, Failure> {
        match self {
            Outcome::Output { text, .. } => Ok(text),
            Outcome::Failed(failure) => Err(failure),
        }
    }
}

/// The tool result for the model: the output text, or the failure object.
pub fn tool_result(event: &Event) -> Option<(String, String)> {
    match event {
        Event::Response { id, text, .. } => Some((id.clone(), text.clone())),
        Event::Failed { id, failure } => Some((id.clone(), failure_json(failure))),
        _ => None,
    }
}

/// `{"ok": false, "error": code, "message": message}`.
pub fn failure_json(failure: &Failure) -> String {
    failure_object(failure.code(), &failure.message())
}

/// The failure object from its parts, for a call that failed before it reached a desk (its
/// arguments refused, the desk closed): `{"ok": false, "error": code, "message": message}`.
pub fn failure_object(code: &str, message: &str) -> String {
    serde_json::json!({
        "ok": false,
        "error": code,
        "message": message,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `into_result()?` in a function that returns `Box<dyn Error>`: a failure is an error
    /// that says its code and message.
    #[test]
    fn a_failed_outcome_is_a_std_error() {
        fn output(outcome: Outcome) -> Result<String, Box<dyn std::error::Error>> {
            Ok(outcome.into_result()?)
        }
        let failed = Outcome::Failed(Failure::Remote {
            code: "busy".into(),
            message: "too many requests in progress".into(),
        });
        let e = output(failed).unwrap_err();
        assert_eq!(e.to_string(), "busy: too many requests in progress");
        let ok = Outcome::Output {
            text: "hi\n".into(),
            truncated: false,
        };
        assert_eq!(output(ok).unwrap(), "hi\n");
    }

    #[test]
    fn an_answers_last_line_says_how_the_command_ended() {
        let cut = format!("partial{}", super::super::timeout_marker(30_000, 7));
        let short = format!(
            "partial{}",
            super::super::cut_short_marker("remote `rexd` left #desk (quit: bye)", 7)
        );
        for (text, want) in [
            ("ok\n".to_owned(), Ending::Exited(0)),
            (String::new(), Ending::Exited(0)),
            ("no\n[exit code: 3]".to_owned(), Ending::Exited(3)),
            ("no\n[exit code: 3]\n".to_owned(), Ending::Exited(3)),
            ("[exit code: 1]".to_owned(), Ending::Exited(1)),
            ("x\n[signal: KILL]".to_owned(), Ending::Signaled("KILL")),
            (cut, Ending::CutAtTimeout),
            (short, Ending::CutShort),
            // A marker that is not the last line is the command's own output.
            ("[exit code: 3]\nmore".to_owned(), Ending::Exited(0)),
            ("[exit code: x]".to_owned(), Ending::Exited(0)),
        ] {
            assert_eq!(ending(&text), want, "{text:?}");
        }
        for (code, signal) in [(Some(2), None), (Some(7), Some("TERM"))] {
            let line = exit_marker(code, signal).unwrap();
            let want = signal.map_or(Ending::Exited(code.unwrap()), Ending::Signaled);
            assert_eq!(ending(&format!("out\n{line}")), want);
        }
    }

    #[test]
    fn an_ending_is_the_status_a_shell_over_ssh_would_give() {
        for (ending, status) in [
            (Ending::Exited(0), 0),
            (Ending::Exited(3), 3),
            (Ending::Signaled("KILL"), 137),
            (Ending::Signaled("TERM"), 143),
            (Ending::Signaled("SEGV"), 139),
            (Ending::Signaled("SYS"), 159),
            (Ending::Signaled("34"), 162),
            (Ending::Signaled("NOPE"), 1),
            (Ending::Signaled("99"), 1),
            (Ending::CutAtTimeout, 124),
            (Ending::CutShort, 255),
        ] {
            assert_eq!(ending.exit_status(), status, "{ending:?}");
        }
    }

    #[test]
    fn parses_arguments() {
        let a = RemoteBashArgs::parse(r#"{"command":"ls -la","timeout_sec":5}"#).unwrap();
        assert_eq!(a.command, "ls -la");
        assert_eq!(a.timeout_sec, Some(5));
        assert!(RemoteBashArgs::parse("").is_err());
        assert!(RemoteBashArgs::parse(r#"{"command":1}"#).is_err());
        assert!(RemoteBashArgs::parse(r#"{"command":"x","timeout_sec":-1}"#).is_err());
        assert!(matches!(
            RemoteBashArgs::parse(r#"{"command":"x","timeout_sec":0}"#),
            Err(ArgsError::ZeroTimeout)
        ));
    }

    #[test]
    fn a_command_that_runs_nothing_is_refused_before_it_is_sent() {
        for empty in ["", " ", "\t\n  "] {
            let json = serde_json::json!({ "command": empty }).to_string();
            assert!(
                matches!(RemoteBashArgs::parse(&json), Err(ArgsError::EmptyCommand)),
                "{empty:?}"
            );
            assert!(matches!(
                RemoteBashArgs::new(empty, None),
                Err(ArgsError::EmptyCommand)
            ));
        }
        let err = RemoteBashArgs::parse(r#"{"command":"ls\u0000 -la"}"#).unwrap_err();
        assert!(matches!(err, ArgsError::NulInCommand { at: 2 }), "{err:?}");
        assert!(err.to_string().contains("NUL byte at byte 2"), "{err}");
        // Newlines, tabs and any other text are a shell's to read.
        assert!(RemoteBashArgs::new("cd /x\n\tmake", None).is_ok());
    }

    #[test]
    fn exit_markers() {
        assert_eq!(exit_marker(Some(0), None), None);
        assert_eq!(exit_marker(None, None), None);
        assert_eq!(
            exit_marker(Some(1), None).as_deref(),
            Some("[exit code: 1]")
        );
        assert_eq!(
            exit_marker(None, Some("KILL")).as_deref(),
            Some("[signal: KILL]")
        );
        assert!(DESCRIPTION.contains("[exit code: 1]"));
        assert!(DESCRIPTION.contains(EXIT_MARKER_RULE));
    }

    #[test]
    fn the_description_states_the_budget_of_the_link() {
        use crate::oa1::{ConnectionConfig, Pacing};
        let config = ConnectionConfig::new("desk", "#desk").oa1;
        // Unknown server: 33 lines in 30 s, 400 bytes each, deflated text.
        assert_eq!(output_budget(&config, config.pacing, 30_000), 29_700);
        assert!(DESCRIPTION.contains("about 29 KB of typical output arrive within a 30 s"));
        assert!(DESCRIPTION.contains("never more than 128 KB"));
        // ngircd's pacing carries more; the spec's plain 240-byte frames much less.
        let ngircd = description(&config, Pacing::grouped(3, 1100));
        assert!(ngircd.contains("about 73 KB"), "{ngircd}");
        let mut v40 = config.clone();
        v40.compression = false;
        v40.adaptive_payload = false;
        assert_eq!(output_budget(&v40, v40.pacing, 30_000), 33 * 240);
        assert!(description(&v40, v40.pacing).contains("about 7 KB"));
        // Never past the cap.
        assert_eq!(
            output_budget(&config, Pacing::UNLIMITED, 30_000),
            128 * 1024
        );
    }

    #[test]
    fn schema_is_the_spec_schema() {
        let schema: serde_json::Value = serde_json::from_str(INPUT_SCHEMA).unwrap();
        assert_eq!(schema["required"], serde_json::json!(["command"]));
        assert_eq!(schema["properties"]["timeout_sec"]["type"], "integer");
    }

    #[test]
    fn failure_object() {
        let f = Failure::from_err_payload("timeout: remote execution exceeded 30s");
        let v: serde_json::Value = serde_json::from_str(&failure_json(&f)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"ok": false, "error": "timeout", "message": "remote execution exceeded 30s"})
        );
        let f = Failure::from_err_payload("Bad Thing: x");
        assert_eq!(f.code(), "error");
        assert_eq!(f.message(), "Bad Thing: x");
        assert_eq!(Failure::from_err_payload("no_colon").code(), "error");
    }
}
