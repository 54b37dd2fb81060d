//! The PTY extension: `pty.open`, `pty.input`, `pty.resize`, `pty.close`, and the
//! `pty.output` / `pty.exit` events.
//!
//! The spec names these methods and events but gives fields only for `pty.open`. The rest
//! follow `exec.*`: every request names its `session_id` and `pty_id`, input and output carry
//! `data` with an `encoding`, output has a per-PTY `seq`, and the exit event mirrors
//! `exec.exit`. A PTY's output is one stream (the terminal merges stdout and stderr).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};

use super::data::{self, Encoding};
use super::error::RexdError;
use super::exec::Program;

/// The terminal size a `pty.open` without `cols`/`rows` gets: the classic 80×24.
pub const DEFAULT_COLS: u16 = 80;
/// See [`DEFAULT_COLS`].
pub const DEFAULT_ROWS: u16 = 24;

fn yes() -> bool {
    true
}

/// `pty.open` params: `argv` or `command` with the same rules as `exec.start` (see
/// [`Program`]), plus the terminal size. `cols` and `rows` are optional (80×24).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "PtyOpenWire")]
pub struct PtyOpenParams {
    /// The session.
    pub session_id: String,
    /// What to run.
    pub program: Program,
    /// Working directory, inside the allowed roots.
    pub cwd: Option<String>,
    /// Extra environment variables (`TERM` is the daemon's choice unless set here).
    pub env: Option<BTreeMap<String, String>>,
    /// Terminal width in columns.
    pub cols: Option<u16>,
    /// Terminal height in rows.
    pub rows: Option<u16>,
}

impl PtyOpenParams {
    /// `(cols, rows)` with the defaults filled in.
    pub fn size(&self) -> (u16, u16) {
        (
            self.cols.unwrap_or(DEFAULT_COLS),
            self.rows.unwrap_or(DEFAULT_ROWS),
        )
    }
}

#[derive(Deserialize)]
struct PtyOpenWire {
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
    cols: Option<u16>,
    #[serde(default)]
    rows: Option<u16>,
}

impl TryFrom<PtyOpenWire> for PtyOpenParams {
    type Error = String;

    fn try_from(w: PtyOpenWire) -> Result<PtyOpenParams, String> {
        super::exec::check_env(w.env.as_ref())?;
        Ok(PtyOpenParams {
            session_id: w.session_id,
            program: Program::from_wire(w.argv, w.shell, w.command)?,
            cwd: w.cwd,
            env: w.env,
            cols: w.cols,
            rows: w.rows,
        })
    }
}

impl Serialize for PtyOpenParams {
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
        if let Some(cols) = &self.cols {
            map.serialize_entry("cols", cols)?;
        }
        if let Some(rows) = &self.rows {
            map.serialize_entry("rows", rows)?;
        }
        map.end()
    }
}

/// `pty.open` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtyOpenResult {
    /// The PTY, for `pty.input` / `pty.resize` / `pty.close` and the events.
    pub pty_id: String,
    /// The process on it (listed by `session.info`, killable with `exec.kill`).
    pub process_id: String,
}

/// `pty.input` params: keystrokes or bytes for the terminal.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PtyInputParams {
    /// The session.
    pub session_id: String,
    /// The PTY.
    pub pty_id: String,
    /// The bytes, as `encoding` says (control keys are just bytes: `"\u0003"` is Ctrl-C).
    pub data: String,
    /// `utf8` by default.
    #[serde(default)]
    pub encoding: Encoding,
}

impl PtyInputParams {
    /// The bytes `data` carries.
    pub fn bytes(&self) -> Result<Cow<'_, [u8]>, RexdError> {
        data::decode(&self.data, self.encoding)
    }
}

/// `pty.input` result (the same shape as `exec.input`'s).
pub type PtyInputResult = super::exec::ExecInputResult;

/// `pty.resize` params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PtyResizeParams {
    /// The session.
    pub session_id: String,
    /// The PTY.
    pub pty_id: String,
    /// New width in columns.
    pub cols: u16,
    /// New height in rows.
    pub rows: u16,
}

/// `pty.resize` result.
pub type PtyResizeResult = super::session::OkResult;

/// `pty.close` params.
///
/// "Close PTY (and optionally process)": `kill_process` (default true) ends the process as a
/// closed terminal does (`HUP` to its process group); false leaves it running without a
/// terminal, still listed in `session.info` and killable with `exec.kill`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtyCloseParams {
    /// The session.
    pub session_id: String,
    /// The PTY.
    pub pty_id: String,
    /// End the process too; true by default.
    #[serde(default = "yes")]
    pub kill_process: bool,
}

/// `pty.close` result.
pub type PtyCloseResult = super::session::OkResult;

/// The `pty.output` event: bytes the terminal's process wrote. Borrows like
/// [`super::ExecOutput`]; `seq` starts at 1 and grows by 1 per PTY.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PtyOutput<'a> {
    /// The session.
    #[serde(borrow)]
    pub session_id: Cow<'a, str>,
    /// The PTY.
    #[serde(borrow)]
    pub pty_id: Cow<'a, str>,
    /// Position in this PTY's output.
    pub seq: u64,
    /// The output, as `encoding` says.
    #[serde(borrow)]
    pub data: Cow<'a, str>,
    /// How `data` carries the bytes.
    #[serde(default)]
    pub encoding: Encoding,
}

impl<'a> PtyOutput<'a> {
    /// The output bytes.
    pub fn bytes(&self) -> Result<Cow<'_, [u8]>, RexdError> {
        data::decode(&self.data, self.encoding)
    }

    /// The same event owning its strings.
    pub fn into_owned(self) -> PtyOutput<'static> {
        PtyOutput {
            session_id: Cow::Owned(self.session_id.into_owned()),
            pty_id: Cow::Owned(self.pty_id.into_owned()),
            seq: self.seq,
            data: Cow::Owned(self.data.into_owned()),
            encoding: self.encoding,
        }
    }
}

/// The `pty.exit` event: the PTY's process ended; the PTY is closed. Terminal for the PTY.
///
/// `exit_code` and `signal` are nullable (written as `null`, absent reads as `null`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PtyExit {
    /// The session.
    pub session_id: String,
    /// The PTY.
    pub pty_id: String,
    /// The process that ran on it.
    pub process_id: String,
    /// The exit code, when it exited normally.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(default)]
    pub signal: Option<String>,
    /// How long it ran.
    pub duration_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn open_uses_exec_rules() {
        let p: PtyOpenParams =
            serde_json::from_value(json!({"session_id":"s","argv":["bash"],"cols":120,"rows":40}))
                .unwrap();
        assert_eq!(p.size(), (120, 40));
        let p: PtyOpenParams =
            serde_json::from_value(json!({"session_id":"s","shell":true,"command":"top"})).unwrap();
        assert_eq!(p.size(), (80, 24));
        assert!(
            serde_json::from_value::<PtyOpenParams>(json!({"session_id":"s","command":"top"}))
                .is_err()
        );
        assert!(
            serde_json::from_value::<PtyOpenParams>(
                json!({"session_id":"s","argv":["a"],"cols":70000})
            )
            .is_err()
        );
    }

    #[test]
    fn close_kills_by_default() {
        let p: PtyCloseParams =
            serde_json::from_value(json!({"session_id":"s","pty_id":"t"})).unwrap();
        assert!(p.kill_process);
    }
}
