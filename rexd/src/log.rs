//! Diagnostics on stderr (never stdout, which carries the protocol), filtered by level.
//!
//! Each line starts with the time in UTC (RFC 3339, milliseconds), for an operator's tools
//! (fail2ban and the like) to read: `2026-11-29T05:00:00.123Z rexd: warn: ...`. Under systemd,
//! whose journal stamps every line itself (it sets `JOURNAL_STREAM`), the time is left out.
//! With [`LogFormat::Json`] each line is one JSON object instead, time included:
//! `{"time":"2026-11-29T05:00:00.123Z","level":"warn","message":"..."}`.

use std::borrow::Cow;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::SystemTime;

use serde::Deserialize;

static LEVEL: AtomicU8 = AtomicU8::new(LogLevel::Info as u8);
static JSON: AtomicBool = AtomicBool::new(false);

/// Whether lines carry their own time (not when the journal adds it).
static STAMPED: LazyLock<bool> = LazyLock::new(|| std::env::var_os("JOURNAL_STREAM").is_none());

/// Sets the level for the whole process.
pub fn set_level(level: LogLevel) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Sets the line format for the whole process.
pub fn set_format(format: LogFormat) {
    JSON.store(format == LogFormat::Json, Ordering::Relaxed);
}

fn say(level: LogLevel, tag: &str, message: &str) {
    if level as u8 <= LEVEL.load(Ordering::Relaxed) {
        if JSON.load(Ordering::Relaxed) {
            let line = serde_json::json!({
                "time": humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
                "level": tag,
                "message": message,
            });
            eprintln!("{line}");
        } else if *STAMPED {
            let now = humantime::format_rfc3339_millis(SystemTime::now());
            eprintln!("{now} rexd: {tag}: {}", one_line(message));
        } else {
            eprintln!("rexd: {tag}: {}", one_line(message));
        }
    }
}

/// `message` as one line of text: control characters (a peer's CR and LF, NUL, terminal
/// escapes) written as escapes (`\n`, `\u{1b}`), so that what a peer sent, such as a command
/// logged as it was asked, can neither forge a line of the log nor make it binary to `grep`.
fn one_line(message: &str) -> Cow<'_, str> {
    if !message.chars().any(|c| c.is_control() && c != '\t') {
        return Cow::Borrowed(message);
    }
    let mut out = String::with_capacity(message.len() + 8);
    for c in message.chars() {
        match c {
            '\t' => out.push(c),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// An error.
pub fn error(message: &str) {
    say(LogLevel::Error, "error", message);
}

/// A warning.
pub fn warn(message: &str) {
    say(LogLevel::Warn, "warn", message);
}

/// Information.
pub fn info(message: &str) {
    say(LogLevel::Info, "info", message);
}

/// Detail.
pub fn debug(message: &str) {
    say(LogLevel::Debug, "debug", message);
}

/// How diagnostic lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// `2026-11-29T05:00:00.123Z rexd: warn: MESSAGE` (the time left out under systemd's
    /// journal, which stamps lines itself).
    #[default]
    Text,
    /// `{"time":"2026-11-29T05:00:00.123Z","level":"warn","message":"MESSAGE"}`.
    Json,
}

/// Diagnostic verbosity (stderr; never stdout, which carries the protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warn,
    /// The default.
    Info,
    /// Everything.
    Debug,
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn a_peers_text_stays_on_one_line() {
        assert_eq!(one_line("desk asks k1: ls -la"), "desk asks k1: ls -la");
        assert_eq!(
            one_line("desk asks k1: echo x\r\n2026-11-30T00:00:00.000Z rexd: info: forged"),
            "desk asks k1: echo x\\r\\n2026-11-30T00:00:00.000Z rexd: info: forged"
        );
        assert_eq!(
            one_line("a\0b \u{1b}[31mred\tcol ü"),
            "a\\u{0}b \\u{1b}[31mred\tcol ü"
        );
    }
}
