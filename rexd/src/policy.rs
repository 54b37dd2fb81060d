//! The command lists (`security.allow_commands`, `security.deny_commands`): which programs an
//! exec may start, and what of the client's environment reaches them while a list is set.
//!
//! A program is matched by what would run, not by what it is called:
//! - `argv[0]` is resolved as `execvp` would, against the daemon's own `PATH` (never the
//!   client's, which is refused while a list is set), or, when it has a `/`, against the exec's
//!   cwd; symlinks are then resolved. List entries are resolved the same way when the daemon
//!   starts.
//! - An allow entry matches when both name the same file *and* `argv[0]`'s file name is the
//!   entry's (so a multi-call binary such as busybox allowed as `ls` does not also run as `sh`).
//!   A copy of an allowed program under another path (`<root>/bin/ls`) is a different file.
//! - A deny entry matches the same file, or any program with the entry's file name.
//! - The process runs the file that was checked (its absolute path), with `argv[0]` as given.
//!
//! While a list is set, the client's `env` may not set `PATH`, and variables that make a
//! program load or run other code ([`UNSAFE_ENV`], [`UNSAFE_ENV_PREFIXES`]) are dropped from it.
//!
//! What a list cannot promise: an allowed program that runs other programs (a shell, an
//! interpreter, `git` with a config it reads from the workspace, `find -exec`, `env`) runs
//! anything; shell mode is `sh`, allowed only when `sh` is listed (and `security.allow_shell`
//! is on); and a deny list alone is no boundary, since any program that is not named (`cp`,
//! an interpreter) can copy or do what the named one does.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use deskwire::rexd::{ErrorCode, ErrorObject, Program};
use serde_json::json;

/// Client variables dropped while a command list is set: the dynamic loader's (glibc's list
/// of variables it ignores for setuid programs), shell start-up files and exported functions,
/// interpreters' search paths and start-up code, and programs git, less and friends run.
pub const UNSAFE_ENV: &[&str] = &[
    "GCONV_PATH",
    "GETCONF_DIR",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "LOCPATH",
    "MALLOC_TRACE",
    "NIS_PATH",
    "NLSPATH",
    "RESOLV_HOST_CONF",
    "RES_OPTIONS",
    "TMPDIR",
    "TZDIR",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "CDPATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PERL5LIB",
    "PERLLIB",
    "PERL5OPT",
    "RUBYLIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "LUA_INIT",
    "LUA_PATH",
    "LUA_CPATH",
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_EXTERNAL_DIFF",
    "GIT_PROXY_COMMAND",
    "GIT_TEMPLATE_DIR",
    "GIT_DIR",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "PAGER",
    "EDITOR",
    "VISUAL",
    "MANPAGER",
    "LESSOPEN",
    "LESSCLOSE",
    "BROWSER",
];

/// Prefixes of dropped variables: the loaders' (`LD_PRELOAD`, `LD_LIBRARY_PATH`, `LD_AUDIT`,
/// macOS's `DYLD_*`), bash's exported functions, git's numbered config pairs.
pub const UNSAFE_ENV_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "BASH_FUNC_",
    "GIT_CONFIG_KEY_",
    "GIT_CONFIG_VALUE_",
];

/// Whether a client-set variable is dropped while a command list is set.
pub fn is_unsafe_env(name: &str) -> bool {
    UNSAFE_ENV.contains(&name) || UNSAFE_ENV_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// One list entry as written and as resolved.
#[derive(Debug, Clone)]
struct Entry {
    written: String,
    name: OsString,
    file: Option<PathBuf>,
}

/// The daemon's command lists, resolved. Empty lists: any program, any environment.
#[derive(Debug, Clone, Default)]
pub struct CommandPolicy {
    allow: Vec<Entry>,
    deny: Vec<Entry>,
}

/// What may run: the file to execute (when a list is set) and the client's environment with
/// the unsafe variables dropped.
#[derive(Debug, Default)]
pub struct Checked {
    /// The resolved program to execute in place of `argv[0]`'s lookup.
    pub exe: Option<PathBuf>,
    /// The environment to add (filtered when a list is set).
    pub env: Option<BTreeMap<String, String>>,
}

fn file_name(p: &Path) -> OsString {
    p.file_name().map(OsStr::to_owned).unwrap_or_default()
}

/// `name` looked up as `execvp` does, on `path` (the daemon's `PATH`), symlinks resolved.
/// Relative `PATH` entries are skipped: they would depend on the daemon's cwd.
pub fn lookup(name: &OsStr, path: Option<&OsStr>) -> Option<PathBuf> {
    let path = path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .and_then(|found| std::fs::canonicalize(found).ok())
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Resolves `argv0` for an exec whose cwd is the directory open at `cwd`.
fn resolve(argv0: &str, cwd: BorrowedFd<'_>) -> Option<PathBuf> {
    if argv0.contains('/') {
        let full = if argv0.starts_with('/') {
            PathBuf::from(argv0)
        } else {
            // The cwd by its descriptor, so the path is the one the exec would see.
            Path::new(&format!("/proc/self/fd/{}", cwd.as_raw_fd())).join(argv0)
        };
        std::fs::canonicalize(full)
            .ok()
            .filter(|p| is_executable(p))
    } else {
        lookup(OsStr::new(argv0), std::env::var_os("PATH").as_deref())
    }
}

impl Entry {
    fn new(written: &str) -> Entry {
        let file = if written.contains('/') {
            std::fs::canonicalize(written).ok()
        } else {
            lookup(OsStr::new(written), std::env::var_os("PATH").as_deref())
        };
        Entry {
            written: written.to_owned(),
            name: file_name(Path::new(written)),
            file,
        }
    }
}

fn refused(command: &str, why: &str) -> ErrorObject {
    ErrorObject::of(ErrorCode::Unauthorized)
        .with_message(format!("command {command:?} is not allowed: {why}"))
        .with_data(json!({"command": command}))
}

impl CommandPolicy {
    /// Resolves the lists against the daemon's `PATH`. An allow entry that names no
    /// executable file is an error (it could never match, which is most likely a typo).
    pub fn new(allow: &[String], deny: &[String]) -> io::Result<CommandPolicy> {
        let allow: Vec<Entry> = allow.iter().map(|a| Entry::new(a)).collect();
        if let Some(missing) = allow.iter().find(|e| e.file.is_none()) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "security.allow_commands: {:?} is not an executable file{}",
                    missing.written,
                    if missing.written.contains('/') {
                        ""
                    } else {
                        " on the daemon's PATH"
                    }
                ),
            ));
        }
        Ok(CommandPolicy {
            allow,
            deny: deny.iter().map(|d| Entry::new(d)).collect(),
        })
    }

    /// Whether a list is set (and so the environment is filtered).
    pub fn is_set(&self) -> bool {
        !self.allow.is_empty() || !self.deny.is_empty()
    }

    /// Checks a program about to start with `env` in the directory open at `cwd`.
    pub fn check(
        &self,
        program: &Program,
        cwd: BorrowedFd<'_>,
        env: Option<&BTreeMap<String, String>>,
    ) -> Result<Checked, ErrorObject> {
        if !self.is_set() {
            return Ok(Checked {
                exe: None,
                env: env.cloned(),
            });
        }
        if let Some(env) = env
            && env.contains_key("PATH")
        {
            return Err(ErrorObject::of(ErrorCode::Unauthorized)
                .with_message(
                    "env PATH cannot be set while a command list is in force \
                     (security.allow_commands / deny_commands): programs are found on the \
                     daemon's PATH",
                )
                .with_data(json!({"variable": "PATH"})));
        }
        let env = env.map(|e| {
            e.iter()
                .filter(|(k, _)| !is_unsafe_env(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        });
        let argv0 = match program {
            Program::Argv(argv) => argv[0].as_str(),
            Program::Shell(_) => "sh",
            #[allow(unreachable_patterns)]
            _ => return Err(refused("?", "unknown program kind")),
        };
        let file = resolve(argv0, cwd);
        let name = file_name(Path::new(argv0));
        let denied = self
            .deny
            .iter()
            .any(|d| d.name == name || d.written == argv0 || (file.is_some() && d.file == file));
        if denied {
            return Err(refused(argv0, "it is on security.deny_commands"));
        }
        if !self.allow.is_empty() {
            let Some(file) = &file else {
                return Err(refused(
                    argv0,
                    "it is not an executable file on the daemon's PATH",
                ));
            };
            let listed = self
                .allow
                .iter()
                .any(|a| a.file.as_deref() == Some(file.as_path()) && a.name == name);
            if !listed {
                return Err(refused(
                    argv0,
                    &format!(
                        "{} is not on security.allow_commands",
                        file.to_string_lossy()
                    ),
                ));
            }
        }
        // Shell mode runs /bin/sh as ever; argv runs the file that was checked.
        let exe = match program {
            Program::Argv(_) => file,
            _ => None,
        };
        Ok(Checked { exe, env })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn dir() -> (tempfile::TempDir, std::fs::File) {
        let d = tempfile::tempdir().unwrap();
        let f = std::fs::File::open(d.path()).unwrap();
        (d, f)
    }

    #[test]
    fn unsafe_variables() {
        for v in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "DYLD_INSERT_LIBRARIES",
            "GCONV_PATH",
            "BASH_ENV",
            "ENV",
            "BASH_FUNC_ls%%",
            "GIT_SSH_COMMAND",
            "GIT_CONFIG_KEY_0",
            "PYTHONPATH",
        ] {
            assert!(is_unsafe_env(v), "{v}");
        }
        for v in ["HOME", "LANG", "TERM", "GIT_AUTHOR_NAME", "MY_LD_THING"] {
            assert!(!is_unsafe_env(v), "{v}");
        }
    }

    #[test]
    fn no_list_changes_nothing() {
        let (_d, f) = dir();
        let p = CommandPolicy::new(&[], &[]).unwrap();
        let env = BTreeMap::from([("LD_PRELOAD".to_owned(), "x".to_owned())]);
        let c = p
            .check(&Program::argv(["anything"]), f.as_fd(), Some(&env))
            .unwrap();
        assert_eq!(c.exe, None);
        assert_eq!(c.env, Some(env));
    }

    #[test]
    fn allow_entries_must_exist() {
        let e = CommandPolicy::new(&["no-such-program-rexd".into()], &[]).unwrap_err();
        assert!(e.to_string().contains("no-such-program-rexd"), "{e}");
        assert!(CommandPolicy::new(&[], &["no-such-program-rexd".into()]).is_ok());
    }
}
