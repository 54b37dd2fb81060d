//! Running programs: every command is echoed, and a failure says which one and how it ended.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result, bail};

/// A command with the tools' PATH, ready for `.args()`.
pub fn new(program: impl AsRef<OsStr>, path: &OsStr) -> Command {
    let mut command = Command::new(program);
    command.env("PATH", path);
    command
}

fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

/// Runs it, echoing it first; fails unless it exits 0.
pub fn run(command: &mut Command) -> Result<()> {
    let text = describe(command);
    eprintln!("$ {text}");
    let status = command
        .status()
        .with_context(|| format!("could not start `{text}`"))?;
    if !status.success() {
        bail!("`{text}` failed ({status})");
    }
    Ok(())
}

/// Runs it quietly and returns its standard output; fails (with its standard error) unless it
/// exits 0.
pub fn output(command: &mut Command) -> Result<String> {
    let text = describe(command);
    let output = command
        .output()
        .with_context(|| format!("could not start `{text}`"))?;
    if !output.status.success() {
        bail!(
            "`{text}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
    }
    String::from_utf8(output.stdout).with_context(|| format!("`{text}` wrote non-UTF-8"))
}

/// Copies a file, creating the destination's directory, with a message that names both.
pub fn copy(from: &Path, to: &Path) -> Result<()> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}
