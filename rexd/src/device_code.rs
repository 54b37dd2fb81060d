//! Where `rexd --irc --device-code` keeps its code: one file per instance, so a restart keeps
//! the code the player typed into the desk, and two daemons on one machine (`--instance`) keep
//! two.
//!
//! The file is `$XDG_DATA_HOME/rexd/<instance>/device_code` (else
//! `~/.local/share/rexd/<instance>/device_code`): the code and a newline, mode 0600, in a
//! directory of mode 0700.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use deskwire::oa1::DeviceCode;
use deskwire::oa1::device_code::GENERATED_LEN;

/// The instance when none is given.
pub const DEFAULT_INSTANCE: &str = "default";
/// The file's name in the instance's directory.
const FILE: &str = "device_code";

/// The device code in force and where it lives.
#[derive(Debug, Clone)]
pub struct StoredCode {
    /// The code.
    pub code: DeviceCode,
    /// The instance's data directory.
    pub dir: PathBuf,
    /// Whether it was made now (else read back, or given).
    pub new: bool,
}

/// The instance's data directory: `$XDG_DATA_HOME/rexd/<instance>` (an absolute
/// `XDG_DATA_HOME` only, as the XDG spec says), else `$HOME/.local/share/rexd/<instance>`.
pub fn data_dir(instance: &str) -> Result<PathBuf, String> {
    if instance.is_empty()
        || instance.len() > 64
        || !instance
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        || instance.starts_with('.')
    {
        return Err(format!(
            "--instance {instance:?}: use 1 to 64 letters, digits, '-', '_' or '.', not first"
        ));
    }
    let base = match std::env::var_os("XDG_DATA_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => match std::env::var_os("HOME") {
            Some(home) if !home.is_empty() => PathBuf::from(home).join(".local/share"),
            _ => {
                return Err(
                    "neither XDG_DATA_HOME nor HOME is set: nowhere to keep the device code".into(),
                );
            }
        },
    };
    Ok(base.join("rexd").join(instance))
}

/// The code for `instance`: `given` (canonicalised, checked and stored), else the one stored,
/// else a new one from the OS's entropy, stored.
pub fn load_or_create(instance: &str, given: Option<&str>) -> Result<StoredCode, String> {
    let dir = data_dir(instance)?;
    let path = dir.join(FILE);
    if let Some(given) = given {
        let code = DeviceCode::parse(given).map_err(|e| format!("--device-code: {e}"))?;
        store(&dir, &path, &code)?;
        return Ok(StoredCode {
            code,
            dir,
            new: false,
        });
    }
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let code = DeviceCode::parse(&text).map_err(|e| {
                format!(
                    "{}: {e}; remove the file for a new code, or give one with --device-code CODE",
                    path.display()
                )
            })?;
            Ok(StoredCode {
                code,
                dir,
                new: false,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut entropy = [0u8; GENERATED_LEN];
            crate::sys::fill_random(&mut entropy);
            let code = DeviceCode::generate(entropy);
            store(&dir, &path, &code)?;
            Ok(StoredCode {
                code,
                dir,
                new: true,
            })
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Writes the code and a newline, mode 0600, replacing the file whole (a temporary file
/// renamed over it: a crash leaves the old code or the new one, never half).
fn store(dir: &Path, path: &Path, code: &DeviceCode) -> Result<(), String> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let temporary = dir.join(format!(".{FILE}.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(format!("{code}\n").as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        format!("{}: {e}", path.display())
    })
}
