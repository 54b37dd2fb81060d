//! How a `RemoteBash` command ended, read from its answer's last line
//! (`deskwire::oa1::remote_bash::ending`), for hosts that mirror its status.

use deskwire::oa1::remote_bash::{self, Ending};

use crate::boundary::{self, dw_status};

/// How a command ended (`dw_ending.kind`).
pub type dw_ending_kind = u32;
/// It exited: `[exit code: N]`, or no marker (exit 0).
pub const DW_ENDING_EXITED: dw_ending_kind = 0;
/// A signal ended it: `[signal: NAME]`.
pub const DW_ENDING_SIGNALED: dw_ending_kind = 1;
/// The answer was cut at the request's timeout: how the command ended is unknown.
pub const DW_ENDING_CUT_AT_TIMEOUT: dw_ending_kind = 2;
/// The answer was cut short when the remote or the link went away: how the command ended is
/// unknown.
pub const DW_ENDING_CUT_SHORT: dw_ending_kind = 3;

/// How a command ended, and the status a shell over ssh would report for it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct dw_ending {
    /// One of `DW_ENDING_*`.
    pub kind: dw_ending_kind,
    /// The exit code; 128 + the signal's number (Linux numbering; 1 for a signal it does not
    /// know); 124 when cut at the timeout (as `timeout` and `rex`); 255 when cut short (as ssh
    /// when its connection is lost). What a host that mirrors the command (a CLI, a CI step)
    /// exits with; the desk demo does.
    pub status: i32,
}

/// How the command behind a `RemoteBash` answer ended, from the answer's text
/// (`text[0..len]`, UTF-8, as the response event gave it): its last line is the remote's exit
/// marker or the desk's cut marker, and an answer without one exited 0. Writes `*out`.
/// `DW_STATUS_INVALID_UTF8` for text that is not UTF-8.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_remote_bash_ending(
    text: *const u8,
    len: usize,
    out: *mut dw_ending,
) -> dw_status {
    boundary::call(|| {
        let out = boundary::out_ptr(out, "out")?;
        let text = boundary::text_arg(text, len, "text")?;
        let ending = remote_bash::ending(text);
        let kind = match ending {
            Ending::Exited(_) => DW_ENDING_EXITED,
            Ending::Signaled(_) => DW_ENDING_SIGNALED,
            Ending::CutAtTimeout => DW_ENDING_CUT_AT_TIMEOUT,
            Ending::CutShort => DW_ENDING_CUT_SHORT,
        };
        boundary::write(
            out,
            dw_ending {
                kind,
                status: ending.exit_status(),
            },
        );
        Ok(())
    })
}
