//! The command policy, one rule set: the command lists (`security.allow_commands`,
//! `security.deny_commands`) and the `[policy]` section (command classes, actions per class
//! and per client, the sudo allowlist). [`Policy::check`] is the one entry point: which
//! programs an exec may start, what class it is in and which rule said so, and what of the
//! client's environment reaches it.
//!
//! # Classes (`[policy]`)
//!
//! An argv is looked at program position by program position: `argv[0]`, and through the
//! programs that run their arguments as a command, the program each of them runs
//! (`policy/wrappers.rs`: `env`, `nice`, `nohup`, `setsid`, `timeout`, `stdbuf`, `ionice`, `time`,
//! `chroot`, `command`, `xargs`, `flock`, `setpriv`, `unshare`, `nsenter`, `chrt`, `taskset`,
//! `prlimit`, `find -exec`, `busybox`/`toybox`), their options read as their own getopt reads
//! them (clusters, abbreviated long options, `--opt=value`, values in the next word). An option
//! a wrapper does not have, an ambiguous abbreviation or a missing value is refused
//! (`wrapper-option`), and so is a command with more than 16 positions (`too-many-positions`):
//! the look-through never stops early and allows. At each position the program is known by two
//! names, `argv`'s file name and
//! the file name it resolves to (so `/usr/bin/rm`, a symlink to `rm`, and `busybox rm` are all
//! `rm`), and takes the class of the first `[[policy.rules]]` entry whose `programs` and
//! `any_arg` match (an `any_arg` written as a long option, `--recursive`, also matches its
//! abbreviations, `--recu`, `--r`, as getopt takes them). The command gets the strictest action
//! of all its positions and names; where they tie, the first. Built in, before the rules:
//! - a program name outside printable ASCII is refused (`non-ascii-program`): look-alikes
//!   (`rм` with a Cyrillic `м`, fullwidth letters) must not pass for, or around, a rule;
//! - a shell at any position (`sh -c`, `bash -lc`, `busybox sh`, `env zsh`) is class `shell`
//!   (`shell-wrapper`), never guessed from its command string; so are `script` and `watch`,
//!   which always run one, `flock -c`, `chroot DIR`, `unshare` and `nsenter` without a program,
//!   `shell: true` (`shell-mode`) and `env -S` (`env-split-string`);
//! - `env PATH=…` is refused (`env-path`): the program after it would be found elsewhere; so is
//!   `env` setting a variable the client's `env` may not ([`UNSAFE_ENV`]: `env-unsafe-variable`);
//! - what `xargs` runs gets words from its input: a rule's `any_arg` holds for it whatever argv
//!   shows, and a wrapper whose program would come from the input (`xargs env`, `xargs -I{} {}`,
//!   `xargs find`) is refused (`xargs-program`);
//! - `setpriv --reuid`, `unshare -S`, `nsenter -S`, `chroot --userspec` run as another user
//!   (`privilege-escalation`); a program found under another root or directory (`chroot`,
//!   `unshare -R`, `env -C` with a relative path) is judged by its name, and refused while a
//!   command list is set (`program-elsewhere`);
//! - `sudo` takes no options but `-n` and `--`, never runs a shell (`sudo -s`, `sudo -i`,
//!   `sudo sh` are always refused), and runs only what a `[[policy.sudo]]` entry matches word by
//!   word; that runs as `sudo -n -- ARGV` (never a password prompt), class `privileged`.
//!   `doas`, `su`, `pkexec`, `run0`, `sudoedit` are refused (`privilege-escalation`).
//!
//! The action (`allow`, `flag`, `deny`) of a class comes from `[policy.classes]`, or for an
//! authenticated client from its `[[policy.clients]]` entry; a command no rule classifies is
//! `unclassified` and gets `policy.default`. A refusal is `-32001` naming the rule and the
//! class; the audit entry of every exec records `class`, `rule` and `action`.
//!
//! What classes cannot see: a copy of a program under another name (make `default = "deny"`
//! and classify what may run), what an allowed interpreter or a program that runs others and
//! is not a wrapper above does (awk's `system()`, sed's `e`, perl, python, `make`, `git` hooks,
//! `strace`, `parallel`: classify them by their arguments or deny them), and what a command
//! does to files (the roots confine fs ops, not processes). Under `default = "allow"` a denied
//! class therefore holds only against the wrappers above; rexd warns of it at start
//! ([`Policy::warnings`]).
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

use crate::config::{Action, PolicySection};

mod wrappers;
use wrappers::{Input, Position, Runs};

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
    /// Filter the client's environment even without a list (a `[policy]` is in force).
    filter_env: bool,
}

/// What may run: the file to execute (when a list is set) and the client's environment with
/// the unsafe variables dropped.
#[derive(Debug, Default)]
pub struct Checked {
    /// The resolved program to execute in place of `argv[0]`'s lookup.
    pub exe: Option<PathBuf>,
    /// The environment to add (filtered when a list is set).
    pub env: Option<BTreeMap<String, String>>,
    /// What runs instead of the client's program (`sudo -n -- …` for an allowlisted sudo).
    pub program: Option<Program>,
    /// The class, rule and action (`[policy]` in force).
    pub decision: Option<Decision>,
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
            filter_env: false,
        })
    }

    /// Whether a list is set (or a `[policy]`: either way the environment is filtered).
    pub fn is_set(&self) -> bool {
        self.has_lists() || self.filter_env
    }

    fn has_lists(&self) -> bool {
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
                env: env.cloned(),
                ..Checked::default()
            });
        }
        if let Some(env) = env
            && env.contains_key("PATH")
        {
            return Err(ErrorObject::of(ErrorCode::Unauthorized)
                .with_message(
                    "env PATH cannot be set while a command list or [policy] is in force \
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
        let file = self.check_file(argv0, cwd)?;
        // Shell mode runs /bin/sh as ever; argv runs the file that was checked.
        let exe = match program {
            Program::Argv(_) => file,
            _ => None,
        };
        Ok(Checked {
            exe,
            env,
            ..Checked::default()
        })
    }

    /// The lists' verdict on one program word (`argv[0]`, or a program a wrapper runs): the
    /// file it resolves to when it may run.
    fn check_file(&self, argv0: &str, cwd: BorrowedFd<'_>) -> Result<Option<PathBuf>, ErrorObject> {
        if !self.has_lists() {
            return Ok(resolve(argv0, cwd));
        }
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
        Ok(file)
    }
}

/// What the policy decided for an exec: recorded in its audit entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decision {
    /// The class (`destructive`, `shell`, `privileged`, `unclassified`, …).
    pub class: String,
    /// The rule that put it there (a `[[policy.rules]]` or `[[policy.sudo]]` name, or a built-in
    /// one: `shell-wrapper`, `shell-mode`, `default`, …).
    pub rule: String,
    /// What the class gets for this client.
    pub action: Action,
}

/// A `[policy]` that cannot be in force.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The section does not hold together (a class without an action, a bad glob, …).
    #[error("[policy] {0}")]
    Invalid(String),
    /// The command lists (an allow entry that names no program).
    #[error(transparent)]
    Lists(#[from] io::Error),
}

/// Shells: a shell at any program position is class `shell`, whatever its arguments.
pub const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "oksh", "loksh", "ash", "hush",
    "fish", "csh", "tcsh", "yash", "posh", "rbash", "elvish", "nu", "xonsh",
];
/// Programs that run something as another user; refused outright (sudo has its allowlist).
pub const ESCALATION: &[&str] = &[
    "doas",
    "su",
    "pkexec",
    "run0",
    "sudoedit",
    "sg",
    "newgrp",
    "machinectl",
    "runuser",
];
/// Programs that always run a shell, whatever their arguments: `script` (its `-c` string, or
/// the user's shell), `watch` (`sh -c` unless `-x`).
pub const RUNS_A_SHELL: &[&str] = &["script", "watch"];
const BUILT_IN_CLASSES: &[&str] = &["shell", "privileged", "unclassified"];
/// Program positions judged at most (`env nice timeout … cmd`, `find -exec … -exec …`); a
/// command with more is refused (`too-many-positions`), never judged in part.
const MAX_POSITIONS: usize = 16;

#[derive(Debug, Clone)]
struct ClassRuleC {
    name: String,
    class: String,
    programs: Vec<String>,
    any_arg: Vec<globset::GlobMatcher>,
    /// The `any_arg` entries that are long options written out (`--recursive`): getopt takes
    /// any unambiguous prefix of one (`--recu`, `--r`), so they match those too.
    long_options: Vec<String>,
}

impl ClassRuleC {
    /// Whether one argument matches an `any_arg` entry: by its glob, or as an abbreviation
    /// (`--r`, `--recu=…`) of a long option written out. A prefix that another option of the
    /// same program shares matches too: stricter than the program, never looser.
    fn matches_arg(&self, arg: &str) -> bool {
        if self.any_arg.iter().any(|g| g.is_match(arg)) {
            return true;
        }
        let Some(body) = arg.strip_prefix("--") else {
            return false;
        };
        let name = body.split('=').next().unwrap_or(body);
        !name.is_empty() && self.long_options.iter().any(|o| o.starts_with(name))
    }
}

/// `--name` with nothing a glob would read as a pattern.
fn long_option(pattern: &str) -> Option<String> {
    let name = pattern.strip_prefix("--")?;
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    plain.then(|| name.to_owned())
}

#[derive(Debug, Clone)]
struct SudoRuleC {
    name: String,
    argv: Vec<globset::GlobMatcher>,
}

#[derive(Debug, Clone)]
struct ClientC {
    principal: String,
    default: Option<Action>,
    classes: BTreeMap<String, Action>,
    read_only: bool,
}

/// `[policy]`, checked and compiled.
#[derive(Debug, Clone)]
struct Classes {
    default: Action,
    actions: BTreeMap<String, Action>,
    rules: Vec<ClassRuleC>,
    sudo: Vec<SudoRuleC>,
    clients: Vec<ClientC>,
}

fn glob(pattern: &str, what: &str) -> Result<globset::GlobMatcher, PolicyError> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| PolicyError::Invalid(format!("{what}: bad glob {pattern:?}: {e}")))
}

fn plain_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
}

impl Classes {
    fn new(p: &PolicySection) -> Result<Classes, PolicyError> {
        let bad = |m: String| Err(PolicyError::Invalid(m));
        let known =
            |class: &str| p.classes.contains_key(class) || BUILT_IN_CLASSES.contains(&class);
        if p.classes.contains_key("unclassified") {
            return bad("classes.unclassified: say it with `default = \"…\"`".into());
        }
        let mut names = std::collections::BTreeSet::new();
        let mut rules = Vec::new();
        for r in &p.rules {
            if !plain_name(&r.name) || !names.insert(r.name.clone()) {
                return bad(format!(
                    "rules: name {:?} is empty, not plain or used twice",
                    r.name
                ));
            }
            if !known(&r.class) || r.class == "unclassified" {
                return bad(format!(
                    "rule {:?}: class {:?} has no action in [policy.classes]",
                    r.name, r.class
                ));
            }
            if r.programs.is_empty() {
                return bad(format!("rule {:?}: `programs` is empty", r.name));
            }
            if let Some(p) = r.programs.iter().find(|p| !plain_name(p)) {
                return bad(format!(
                    "rule {:?}: program {p:?} must be a file name (`rm`, not `/bin/rm`)",
                    r.name
                ));
            }
            let any_arg = r
                .any_arg
                .iter()
                .map(|g| glob(g, &format!("rule {:?}", r.name)))
                .collect::<Result<_, _>>()?;
            rules.push(ClassRuleC {
                name: r.name.clone(),
                class: r.class.clone(),
                programs: r.programs.clone(),
                any_arg,
                long_options: r.any_arg.iter().filter_map(|a| long_option(a)).collect(),
            });
        }
        let mut sudo = Vec::new();
        for r in &p.sudo {
            if !plain_name(&r.name) || !names.insert(r.name.clone()) {
                return bad(format!(
                    "sudo: name {:?} is empty, not plain or used twice",
                    r.name
                ));
            }
            let Some(first) = r.argv.first() else {
                return bad(format!("sudo {:?}: `argv` is empty", r.name));
            };
            let program = first.rsplit('/').next().unwrap_or(first);
            if first.contains(['*', '?', '[', '{']) {
                return bad(format!(
                    "sudo {:?}: the program {first:?} must be written out, not a glob",
                    r.name
                ));
            }
            if SHELLS.contains(&program)
                || ESCALATION.contains(&program)
                || program == "sudo"
                || wrappers::is_wrapper(program)
            {
                return bad(format!(
                    "sudo {:?}: {program:?} runs other programs; sudo never runs a shell or a \
                     wrapper here",
                    r.name
                ));
            }
            let argv = r
                .argv
                .iter()
                .map(|g| glob(g, &format!("sudo {:?}", r.name)))
                .collect::<Result<_, _>>()?;
            sudo.push(SudoRuleC {
                name: r.name.clone(),
                argv,
            });
        }
        let mut clients = Vec::new();
        for c in &p.clients {
            if c.principal.is_empty()
                || clients.iter().any(|x: &ClientC| x.principal == c.principal)
            {
                return bad(format!(
                    "clients: principal {:?} is empty or used twice",
                    c.principal
                ));
            }
            if let Some(class) = c.classes.keys().find(|k| !known(k) || *k == "unclassified") {
                return bad(format!(
                    "client {:?}: class {class:?} is not a class of [policy.classes] (use \
                     `default` for unclassified)",
                    c.principal
                ));
            }
            clients.push(ClientC {
                principal: c.principal.clone(),
                default: c.default,
                classes: c.classes.clone(),
                read_only: c.read_only,
            });
        }
        Ok(Classes {
            default: p.default,
            actions: p.classes.clone(),
            rules,
            sudo,
            clients,
        })
    }

    /// The action `class` gets for `principal`.
    fn action(&self, class: &str, principal: Option<&str>) -> Action {
        let client = principal.and_then(|p| self.clients.iter().find(|c| c.principal == p));
        if class == "unclassified" {
            return client.and_then(|c| c.default).unwrap_or(self.default);
        }
        if let Some(a) = client.and_then(|c| c.classes.get(class)) {
            return *a;
        }
        if let Some(a) = self.actions.get(class) {
            return *a;
        }
        match class {
            "privileged" => Action::Flag,
            _ => Action::Deny,
        }
    }

    fn decide(&self, class: &str, rule: &str, principal: Option<&str>) -> Decision {
        Decision {
            class: class.to_owned(),
            rule: rule.to_owned(),
            action: self.action(class, principal),
        }
    }
}

fn class_refusal(argv0: &str, d: &Decision, why: &str) -> ErrorObject {
    ErrorObject::of(ErrorCode::Unauthorized)
        .with_message(format!(
            "command {argv0:?} refused by policy rule {:?} (class {}): {why}",
            d.rule, d.class
        ))
        .with_data(json!({
            "command": argv0,
            "rule": d.rule,
            "class": d.class,
            "action": d.action,
        }))
}

/// The one rule set: the command lists and `[policy]`.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    lists: CommandPolicy,
    classes: Option<Classes>,
}

impl Policy {
    /// The lists (`security.allow_commands`, `deny_commands`) and `[policy]`, resolved and
    /// checked: anything that does not hold together is an error, never a looser policy.
    pub fn new(
        allow: &[String],
        deny: &[String],
        section: Option<&PolicySection>,
    ) -> Result<Policy, PolicyError> {
        let mut lists = CommandPolicy::new(allow, deny)?;
        let classes = section.map(Classes::new).transpose()?;
        lists.filter_env = classes.is_some();
        Ok(Policy { lists, classes })
    }

    /// Only the command lists.
    pub fn lists(allow: &[String], deny: &[String]) -> io::Result<Policy> {
        Ok(Policy {
            lists: CommandPolicy::new(allow, deny)?,
            classes: None,
        })
    }

    /// Whether `principal`'s `[[policy.clients]]` entry says `read_only = true`: its
    /// `fs.write` is refused and its commands run confined with the roots read-only.
    pub fn read_only(&self, principal: Option<&str>) -> bool {
        let Some((classes, principal)) = self.classes.as_ref().zip(principal) else {
            return false;
        };
        classes
            .clients
            .iter()
            .any(|c| c.principal == principal && c.read_only)
    }

    /// Whether anything is in force (then the client's environment is filtered).
    pub fn is_set(&self) -> bool {
        self.lists.is_set()
    }

    /// The program names `[[policy.rules]]` give that no directory of `search_path` (a `PATH`)
    /// holds as an executable file: a typo, or a tool not installed here, whose rule then
    /// never matches. `(rule name, program)` pairs; `rexd --check-config` warns of them.
    pub fn programs_not_found(&self, search_path: &std::ffi::OsStr) -> Vec<(String, String)> {
        use std::os::unix::fs::PermissionsExt;
        let Some(classes) = &self.classes else {
            return Vec::new();
        };
        let found = |name: &str| {
            std::env::split_paths(search_path).any(|dir| {
                std::fs::metadata(dir.join(name))
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
        };
        classes
            .rules
            .iter()
            .flat_map(|r| r.programs.iter().map(move |p| (r, p)))
            .filter(|(_, p)| !found(p))
            .map(|(r, p)| (r.name.clone(), p.clone()))
            .collect()
    }

    /// What the daemon should say at start about this policy: a class denied under
    /// `default = "allow"` (for everyone, or for a client) holds only as far as the
    /// look-through sees, since a program no rule names runs whatever it is given.
    pub fn warnings(&self) -> Vec<String> {
        let Some(classes) = &self.classes else {
            return Vec::new();
        };
        let mut names: Vec<&str> = classes.actions.keys().map(String::as_str).collect();
        names.extend(BUILT_IN_CLASSES.iter().filter(|c| **c != "unclassified"));
        names.sort_unstable();
        names.dedup();
        let mut warnings = Vec::new();
        let who =
            std::iter::once(None).chain(classes.clients.iter().map(|c| Some(c.principal.as_str())));
        for principal in who {
            if classes.action("unclassified", principal) != Action::Allow {
                continue;
            }
            let denied: Vec<&str> = names
                .iter()
                .copied()
                .filter(|c| classes.action(c, principal) == Action::Deny)
                .collect();
            if denied.is_empty() {
                continue;
            }
            let whose = principal.map_or_else(
                || "default = \"allow\"".to_owned(),
                |p| format!("client {p:?} allows unclassified commands"),
            );
            warnings.push(format!(
                "[policy] {whose} while class {} is deny: a program no rule names runs \
                 whatever it is given (awk's system(), sed's e, perl, python, make, git, strace, \
                 a copy of a shell under another name), so a denied class holds only against \
                 the wrappers rexd looks through; make the default \"deny\" and classify what \
                 may run",
                denied.join(", ")
            ));
        }
        warnings
    }

    /// Checks a program about to start for `principal` (the authenticated client, if any),
    /// with `env`, in the directory open at `cwd`. Refusals are `-32001` naming the rule.
    pub fn check(
        &self,
        program: &Program,
        cwd: BorrowedFd<'_>,
        env: Option<&BTreeMap<String, String>>,
        principal: Option<&str>,
    ) -> Result<Checked, ErrorObject> {
        let mut checked = self.lists.check(program, cwd, env)?;
        let Some(classes) = &self.classes else {
            return Ok(checked);
        };
        let argv = match program {
            Program::Argv(argv) => argv,
            Program::Shell(_) => {
                let d = classes.decide("shell", "shell-mode", principal);
                if d.action == Action::Deny {
                    return Err(class_refusal("sh", &d, "shell mode runs a command string"));
                }
                checked.decision = Some(d);
                return Ok(checked);
            }
            #[allow(unreachable_patterns)]
            _ => return Err(refused("?", "unknown program kind")),
        };
        let refuse = |rule: &str, class: &str, why: &str| {
            let d = classes.decide(class, rule, principal);
            let d = Decision {
                action: Action::Deny,
                ..d
            };
            Err(class_refusal(&argv[0], &d, why))
        };
        // A shell at a position: refused at once where class shell is deny, since the shell
        // is the refusal worth reading.
        let shell = |why: &str| {
            let d = classes.decide("shell", "shell-wrapper", principal);
            if d.action == Action::Deny {
                return Err(class_refusal(
                    &argv[0],
                    &d,
                    &format!("{why}; [policy.classes] shell is deny"),
                ));
            }
            Ok(d)
        };
        let mut decisions: Vec<Decision> = Vec::new();
        let mut sudo: Option<Checked> = None;
        // Program positions still to judge, first argv[0]; wrappers add the ones they run.
        let first = Position {
            at: 0,
            input: Input::None,
            elsewhere: false,
        };
        let mut queued = vec![first.clone()];
        let mut todo = vec![first];
        let mut judged = 0;
        while let Some(pos) = todo.pop() {
            judged += 1;
            if judged > MAX_POSITIONS {
                return refuse(
                    "too-many-positions",
                    "unclassified",
                    &format!(
                        "more than {MAX_POSITIONS} programs behind wrappers; not judged in part"
                    ),
                );
            }
            let at = pos.at;
            let word = &argv[at];
            let given = word.rsplit('/').next().unwrap_or(word);
            if !given.bytes().all(|b| b.is_ascii_graphic()) {
                return refuse(
                    "non-ascii-program",
                    "unclassified",
                    "a program name outside printable ASCII may be a look-alike of another",
                );
            }
            let resolved = if at == 0 {
                checked.exe.clone().or_else(|| resolve(word, cwd))
            } else if pos.elsewhere {
                // Found under another root or directory: what it resolves to here is not
                // what runs, so the lists cannot judge it, and only its name is known.
                if self.lists.has_lists() {
                    return refuse(
                        "program-elsewhere",
                        "unclassified",
                        &format!(
                            "{word:?} would be found under another root or directory than \
                             the exec's, where the command lists cannot check it"
                        ),
                    );
                }
                None
            } else {
                // A program a wrapper runs: the lists hold for it as for argv[0].
                self.lists.check_file(word, cwd)?
            };
            let real = resolved
                .as_deref()
                .and_then(|p| p.file_name())
                .and_then(|n| n.to_str())
                .map(str::to_owned);
            let names: Vec<&str> = std::iter::once(given)
                .chain(real.as_deref().filter(|r| *r != given))
                .collect();
            if let Some(n) = names
                .iter()
                .find(|n| !n.bytes().all(|b| b.is_ascii_graphic()))
            {
                return refuse(
                    "non-ascii-program",
                    "unclassified",
                    &format!("{n:?} is outside printable ASCII"),
                );
            }
            if names.iter().any(|n| ESCALATION.contains(n)) {
                return refuse(
                    "privilege-escalation",
                    "privileged",
                    "only sudo, with the [[policy.sudo]] allowlist, may run as another user",
                );
            }
            if names
                .iter()
                .any(|n| SHELLS.contains(n) || RUNS_A_SHELL.contains(n))
            {
                decisions.push(shell("a shell hides what it runs")?);
                continue;
            }
            if names.contains(&"sudo") {
                // Its argv is rewritten to `sudo -n -- …`: once, and only with what argv shows.
                if sudo.is_some() || pos.input != Input::None {
                    return refuse(
                        "sudo-options",
                        "privileged",
                        "sudo runs once per command, with the arguments it is given",
                    );
                }
                let c = self.sudo(classes, argv, at, principal, Checked::default())?;
                decisions.extend(c.decision.clone());
                sudo = Some(c);
                continue;
            }
            for name in &names {
                let args = &argv[at + 1..];
                let rule = classes.rules.iter().find(|r| {
                    r.programs.iter().any(|p| p == name)
                        // Arguments xargs adds are unseen: a rule on arguments holds anyway.
                        && (r.any_arg.is_empty()
                            || pos.input != Input::None
                            || args.iter().any(|a| r.matches_arg(a)))
                });
                decisions.push(match rule {
                    Some(r) => classes.decide(&r.class, &r.name, principal),
                    None => classes.decide("unclassified", "default", principal),
                });
            }
            // Each name may be a wrapper (a link named `env` to busybox runs as env; a copy
            // of env under another name still is env): follow every reading.
            for name in &names {
                if *name == "env" {
                    for assignment in wrappers::env_assignments(argv, at) {
                        let var = assignment.split('=').next().unwrap_or_default();
                        if var == "PATH" {
                            return refuse(
                                "env-path",
                                "unclassified",
                                "`env PATH=…` would find the program on another PATH",
                            );
                        }
                        if is_unsafe_env(var) {
                            return refuse(
                                "env-unsafe-variable",
                                "unclassified",
                                &format!(
                                    "`env {var}=…` sets a variable that makes programs load \
                                     or run other code"
                                ),
                            );
                        }
                    }
                }
                match wrappers::runs(argv, at, name, &pos.input) {
                    Ok(Runs::Programs(found)) => {
                        for p in found {
                            // Two readings of one word may find the same position.
                            if !queued.contains(&p) {
                                queued.push(p.clone());
                                todo.push(p);
                            }
                        }
                    }
                    Ok(Runs::Shell) => decisions.push(shell(&format!(
                        "{name} without a program starts the user's shell"
                    ))?),
                    Ok(Runs::Nothing) => {}
                    Err(r) => return refuse(r.rule, r.class, r.why),
                }
            }
        }
        // The strictest of all positions; the first of equals.
        let mut strictest = decisions.remove(0);
        for d in decisions {
            if d.action > strictest.action {
                strictest = d;
            }
        }
        if strictest.action == Action::Deny {
            let why = format!("[policy] says deny for class {}", strictest.class);
            return Err(class_refusal(&argv[0], &strictest, &why));
        }
        if let Some(sudo) = sudo {
            checked.program = sudo.program;
            checked.exe = checked.exe.or(sudo.exe);
        }
        checked.decision = Some(strictest);
        Ok(checked)
    }

    /// `sudo` at position `at`: options, the allowlist, then `sudo -n -- ARGV`.
    fn sudo(
        &self,
        classes: &Classes,
        argv: &[String],
        at: usize,
        principal: Option<&str>,
        mut checked: Checked,
    ) -> Result<Checked, ErrorObject> {
        let refuse = |rule: &str, why: String| {
            let d = Decision {
                action: Action::Deny,
                ..classes.decide("privileged", rule, principal)
            };
            Err(class_refusal(&argv[0], &d, &why))
        };
        let mut i = at + 1;
        while let Some(word) = argv.get(i) {
            match word.as_str() {
                "-n" | "--non-interactive" => i += 1,
                "--" => {
                    i += 1;
                    break;
                }
                w if w.starts_with('-') => {
                    return refuse(
                        "sudo-options",
                        format!(
                            "sudo takes no option but -n here ({w:?}): -s and -i start a shell, \
                             -u, -g, -E and the rest change who or what runs"
                        ),
                    );
                }
                _ => break,
            }
        }
        let inner = &argv[i.min(argv.len())..];
        let Some(first) = inner.first() else {
            return refuse("sudo-options", "sudo without a command".into());
        };
        let name = first.rsplit('/').next().unwrap_or(first);
        if SHELLS.contains(&name) {
            return refuse("sudo-shell", format!("sudo never runs a shell ({name})"));
        }
        let rule = classes.sudo.iter().find(|r| {
            r.argv.len() == inner.len() && r.argv.iter().zip(inner).all(|(g, w)| g.is_match(w))
        });
        let Some(rule) = rule else {
            return refuse(
                "sudo-allowlist",
                format!("{inner:?} is not on the sudo allowlist ([[policy.sudo]])"),
            );
        };
        let d = classes.decide("privileged", &rule.name, principal);
        if d.action == Action::Deny {
            return Err(class_refusal(
                &argv[0],
                &d,
                "[policy] says deny for class privileged",
            ));
        }
        let mut run: Vec<String> = argv[..at].to_vec();
        run.extend(["sudo", "-n", "--"].map(String::from));
        run.extend(inner.iter().cloned());
        if at == 0 {
            // What runs is sudo as resolved (the lists checked it), with the argv rewritten.
            checked.exe = checked
                .exe
                .or_else(|| lookup(OsStr::new("sudo"), std::env::var_os("PATH").as_deref()));
        }
        checked.program = Some(Program::Argv(run));
        checked.decision = Some(d);
        Ok(checked)
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

#[cfg(test)]
pub(super) mod class_tests {
    use super::*;
    use std::os::fd::AsFd;

    pub(crate) const POLICY: &str = r#"
[policy]
default = "allow"
[policy.classes]
read = "allow"
destructive = "deny"
network = "flag"
[[policy.rules]]
name = "rm-recursive"
class = "destructive"
programs = ["rm"]
any_arg = ["--recursive", "-[rR]*", "-[!-]*[rR]*"]
[[policy.rules]]
name = "readers"
class = "read"
programs = ["cat", "ls", "head"]
[[policy.rules]]
name = "fetchers"
class = "network"
programs = ["curl", "wget"]
[[policy.sudo]]
name = "restart-app"
argv = ["systemctl", "restart", "app-*"]
[[policy.clients]]
principal = "ops"
classes = { destructive = "allow", shell = "allow" }
"#;

    pub(crate) fn policy(text: &str) -> Policy {
        let c = crate::config::Config::from_toml(text, Path::new("t.toml")).unwrap();
        Policy::new(&[], &[], c.policy.as_ref()).unwrap()
    }

    pub(crate) fn check(
        p: &Policy,
        argv: &[&str],
        who: Option<&str>,
    ) -> Result<Checked, ErrorObject> {
        let d = tempfile::tempdir().unwrap();
        let f = std::fs::File::open(d.path()).unwrap();
        p.check(&Program::argv(argv.iter().copied()), f.as_fd(), None, who)
    }

    pub(crate) fn refusal(p: &Policy, argv: &[&str], who: Option<&str>) -> (String, String) {
        let e = check(p, argv, who).unwrap_err();
        assert_eq!(e.code, ErrorCode::Unauthorized.code(), "{argv:?}: {e:?}");
        let data: serde_json::Value = serde_json::from_str(e.data.unwrap().get()).unwrap();
        assert!(
            e.message.contains(data["rule"].as_str().unwrap()),
            "{}",
            e.message
        );
        (
            data["rule"].as_str().unwrap().to_owned(),
            data["class"].as_str().unwrap().to_owned(),
        )
    }

    fn decided(p: &Policy, argv: &[&str], who: Option<&str>) -> Decision {
        check(p, argv, who).unwrap().decision.unwrap()
    }

    #[test]
    fn rm_rf_is_destructive_and_denied_however_it_is_spelled() {
        let p = policy(POLICY);
        let want = ("rm-recursive".to_owned(), "destructive".to_owned());
        for argv in [
            &["rm", "-rf", "x"][..],
            &["rm", "-fr", "x"],
            &["rm", "-v", "-R", "x"],
            &["rm", "--recursive", "x"],
            &["/bin/rm", "-rf", "x"],
            &["/usr/bin/rm", "-rf", "x"],
            &["env", "rm", "-rf", "x"],
            &["env", "-i", "FOO=1", "rm", "-rf", "x"],
            &["env", "-u", "HOME", "--", "rm", "-rf", "x"],
            &["busybox", "rm", "-rf", "x"],
            &["nice", "-n", "5", "nohup", "rm", "-rf", "x"],
            &["timeout", "-s", "KILL", "10", "rm", "-rf", "x"],
            &["stdbuf", "-oL", "setsid", "rm", "-rf", "x"],
        ] {
            assert_eq!(refusal(&p, argv, None), want, "{argv:?}");
        }
        // Without -r it is not this rule's; a client allowed destructive commands may.
        assert_eq!(decided(&p, &["rm", "x"], None).class, "unclassified");
        let d = decided(&p, &["rm", "-rf", "x"], Some("ops"));
        assert_eq!((d.class.as_str(), d.action), ("destructive", Action::Allow));
        assert_eq!(decided(&p, &["ls", "-la"], None).rule, "readers");
        let d = decided(&p, &["curl", "http://x"], None);
        assert_eq!((d.rule.as_str(), d.action), ("fetchers", Action::Flag));
    }

    #[test]
    fn look_alikes_are_refused() {
        let p = policy(POLICY);
        for argv in [
            &["r\u{43c}", "-rf", "x"][..],     // Cyrillic em
            &["\u{ff52}\u{ff4d}", "-rf", "x"], // fullwidth rm
            &["env", "r\u{43c}", "-rf", "x"],
            &["./r\u{43c}"],
        ] {
            assert_eq!(refusal(&p, argv, None).0, "non-ascii-program", "{argv:?}");
        }
    }

    #[test]
    fn shells_are_class_shell_never_guessed() {
        let p = policy(POLICY);
        for argv in [
            &["sh", "-c", "ls"][..],
            &["bash", "-lc", "cat x"],
            &["/bin/dash"],
            &["env", "zsh", "-c", "ls"],
            &["busybox", "sh", "-c", "ls"],
            &["nice", "bash"],
        ] {
            assert_eq!(
                refusal(&p, argv, None),
                ("shell-wrapper".to_owned(), "shell".to_owned()),
                "{argv:?}"
            );
        }
        assert_eq!(
            refusal(&p, &["env", "-S", "rm -rf x"], None).0,
            "env-split-string"
        );
        assert_eq!(refusal(&p, &["env", "PATH=/tmp", "ls"], None).0, "env-path");
        // A client allowed shells gets them as class shell, whatever the string says.
        let d = decided(&p, &["bash", "-lc", "rm -rf /"], Some("ops"));
        assert_eq!(
            (d.class.as_str(), d.rule.as_str()),
            ("shell", "shell-wrapper")
        );
        let e = p.check(
            &Program::shell("ls"),
            std::fs::File::open("/").unwrap().as_fd(),
            None,
            None,
        );
        assert!(e.unwrap_err().message.contains("shell-mode"));
    }

    #[test]
    fn sudo_runs_only_the_allowlist_and_never_a_shell() {
        let p = policy(POLICY);
        let c = check(&p, &["sudo", "systemctl", "restart", "app-web"], None).unwrap();
        let d = c.decision.unwrap();
        assert_eq!(
            (d.class.as_str(), d.rule.as_str(), d.action),
            ("privileged", "restart-app", Action::Flag)
        );
        assert_eq!(
            c.program,
            Some(Program::argv([
                "sudo",
                "-n",
                "--",
                "systemctl",
                "restart",
                "app-web"
            ]))
        );
        // `-n` and `--` given by the client are fine; nothing else is.
        assert!(
            check(
                &p,
                &["sudo", "-n", "--", "systemctl", "restart", "app-x"],
                None
            )
            .is_ok()
        );
        for (argv, rule) in [
            (
                &["sudo", "systemctl", "restart", "db"][..],
                "sudo-allowlist",
            ),
            (
                &["sudo", "systemctl", "restart", "app-web", "now"],
                "sudo-allowlist",
            ),
            (&["sudo", "systemctl", "stop", "app-web"], "sudo-allowlist"),
            (&["sudo", "-s"], "sudo-options"),
            (&["sudo", "-i"], "sudo-options"),
            (
                &["sudo", "-u", "root", "systemctl", "restart", "app-web"],
                "sudo-options",
            ),
            (
                &["sudo", "-E", "systemctl", "restart", "app-web"],
                "sudo-options",
            ),
            (&["sudo", "sh"], "sudo-shell"),
            (&["sudo", "/bin/bash", "-c", "id"], "sudo-shell"),
            (&["sudo"], "sudo-options"),
            (&["env", "sudo", "sh"], "sudo-shell"),
            (&["doas", "id"], "privilege-escalation"),
            (&["su", "-c", "id"], "privilege-escalation"),
        ] {
            assert_eq!(refusal(&p, argv, Some("ops")).0, rule, "{argv:?}");
        }
    }

    #[test]
    fn policies_that_do_not_hold_together_are_errors() {
        for (text, want) in [
            (
                "[policy]\n[[policy.rules]]\nname = \"r\"\nclass = \"nope\"\nprograms = [\"rm\"]\n",
                "has no action",
            ),
            (
                "[policy]\n[[policy.rules]]\nname = \"r\"\nclass = \"shell\"\nprograms = [\"/bin/rm\"]\n",
                "file name",
            ),
            (
                "[policy]\n[[policy.rules]]\nname = \"r\"\nclass = \"shell\"\nprograms = []\n",
                "empty",
            ),
            (
                "[policy]\n[[policy.rules]]\nname = \"r\"\nclass = \"shell\"\nprograms = [\"rm\"]\nany_arg = [\"[\"]\n",
                "bad glob",
            ),
            (
                "[policy]\n[[policy.sudo]]\nname = \"s\"\nargv = [\"bash\"]\n",
                "never runs a shell",
            ),
            (
                "[policy]\n[[policy.sudo]]\nname = \"s\"\nargv = [\"env\", \"x\"]\n",
                "never runs a shell",
            ),
            (
                "[policy]\n[[policy.sudo]]\nname = \"s\"\nargv = [\"system*\"]\n",
                "written out",
            ),
            (
                "[policy]\n[[policy.clients]]\nprincipal = \"a\"\nclasses = { bogus = \"allow\" }\n",
                "bogus",
            ),
            ("[policy.classes]\nunclassified = \"deny\"\n", "default"),
        ] {
            let c = crate::config::Config::from_toml(text, Path::new("t.toml")).unwrap();
            let e = Policy::new(&[], &[], c.policy.as_ref())
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        // Parse errors are the config's: an unknown key, an unknown action.
        for text in [
            "[policy]\ndefualt = \"deny\"\n",
            "[policy]\ndefault = \"maybe\"\n",
            "[policy.classes]\nread = \"yes\"\n",
        ] {
            assert!(
                crate::config::Config::from_toml(text, Path::new("t")).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn default_deny_makes_the_rules_an_allowlist() {
        let p = policy(&POLICY.replace("default = \"allow\"", "default = \"deny\""));
        assert_eq!(refusal(&p, &["cp", "a", "b"], None).1, "unclassified");
        // A copy of rm under another name is just unclassified: refused.
        assert_eq!(refusal(&p, &["./my-rm", "-rf", "x"], None).0, "default");
        assert!(check(&p, &["cat", "x"], None).is_ok());
        // Every position must pass: an allowed wrapper does not carry an unknown program.
        assert_eq!(
            refusal(&p, &["nice", "cp", "a", "b"], None).1,
            "unclassified"
        );
    }
}

/// The adversarial cases of issue 33: each ran what the policy denies before the look-through
/// read wrappers as their own getopt does.
#[cfg(test)]
mod look_through_tests {
    use super::class_tests::{POLICY, check, policy, refusal};

    fn words(s: &str) -> Vec<&str> {
        s.split(' ').collect()
    }

    #[test]
    fn shells_behind_wrapper_options_are_found() {
        let p = policy(POLICY);
        let shell = ("shell-wrapper".to_owned(), "shell".to_owned());
        for argv in [
            "env --un ls sh -c id",
            "env -iu ls sh -c id",
            "env -u ls -- sh -c id",
            "env -- FOO=1 sh -c id",
            "env - sh -c id",
            "time -ao ls sh -c id",
            "time --out ls sh -c id",
            "nice --adj 5 sh",
            "nice -5 sh",
            "nice --5 sh",
            "timeout -vk 1 5 sh",
            "timeout --kill 1 5 sh",
            "timeout --sig KILL 5 sh",
            "stdbuf --out 0 sh",
            "ionice -tc 3 sh",
            "ionice --classd 7 sh",
            "xargs sh -c id",
            "xargs -0 -n 1 sh -c id",
            "find . -exec sh -c id ;",
            "find . -name x -ok ls ; -execdir sh -c id ;",
            "flock /tmp -c id",
            "flock -c id /tmp",
            "setpriv --nnp sh",
            "unshare -m",
            "unshare --fork --pid sh",
            "nsenter -t 1 -m",
            "nsenter -t1 -m -u sh",
            "chrt -o 0 sh",
            "chrt -b sh",
            "taskset -c 0 sh",
            "prlimit -n100 sh",
            "prlimit --nofile=100 sh",
            "chroot /tmp",
            "script -qc id",
            "watch id",
            "busybox sh",
        ] {
            assert_eq!(refusal(&p, &words(argv), None), shell, "{argv}");
        }
        let split = refusal(&p, &["env", "--s=sh -c id"], None);
        assert_eq!(split.0, "env-split-string");
    }

    #[test]
    fn a_program_past_the_last_position_judged_is_refused() {
        let p = policy(POLICY);
        let mut nices = vec!["nice"; 16];
        nices.push("sh");
        assert_eq!(refusal(&p, &nices, None).0, "too-many-positions");
        let mut envs = vec!["env"; 16];
        envs.extend(["rm", "-rf", "x"]);
        assert_eq!(refusal(&p, &envs, None).0, "too-many-positions");
        // Fifteen wrappers and the program are sixteen positions: judged whole.
        let mut fifteen = vec!["nice"; 15];
        fifteen.push("ls");
        assert!(check(&p, &fifteen, None).is_ok());
    }

    #[test]
    fn options_a_wrapper_does_not_have_are_refused() {
        let p = policy(POLICY);
        for argv in [
            "env -x sh",
            "env --bogus ls",
            "env --d ls",
            "env -u",
            "nice -x ls",
            "timeout -x 5 ls",
            "ionice --cl 3 ls",
            "setpriv --re ls",
            "flock --n /tmp ls",
            "time --output",
        ] {
            assert_eq!(
                refusal(&p, &words(argv), None).0,
                "wrapper-option",
                "{argv}"
            );
        }
    }

    #[test]
    fn what_xargs_adds_is_never_taken_as_harmless() {
        let p = policy(POLICY);
        for (argv, rule) in [
            ("xargs env", "xargs-program"),
            ("xargs nice -n 5", "xargs-program"),
            ("xargs timeout 5", "xargs-program"),
            ("xargs find .", "xargs-program"),
            ("xargs busybox", "xargs-program"),
            ("xargs -I{} {} -c id", "xargs-program"),
            ("xargs -I{} env {}=1 ls", "xargs-program"),
            ("xargs sudo systemctl restart app-web", "sudo-options"),
            // The arguments a rule looks for may come from the input.
            ("xargs rm", "rm-recursive"),
            ("xargs -I{} rm {}", "rm-recursive"),
            ("xargs nice rm", "rm-recursive"),
        ] {
            assert_eq!(refusal(&p, &words(argv), None).0, rule, "{argv}");
        }
        assert!(check(&p, &words("xargs -I{} cat {}"), None).is_ok());
        assert!(check(&p, &words("xargs nice -n 5 cat"), None).is_ok());
    }

    #[test]
    fn env_cannot_set_what_the_client_may_not() {
        let p = policy(POLICY);
        for (argv, rule) in [
            ("env LD_PRELOAD=/w/x.so ls", "env-unsafe-variable"),
            ("env -i BASH_ENV=/w/x ldd /bin/true", "env-unsafe-variable"),
            ("env -- LD_AUDIT=x ls", "env-unsafe-variable"),
            ("env PATH=/w ls", "env-path"),
            ("nice env PATH=/w ls", "env-path"),
            ("env --env0-from=/w/vars ls", "env-from-file"),
        ] {
            assert_eq!(refusal(&p, &words(argv), None).0, rule, "{argv}");
        }
    }

    #[test]
    fn long_options_match_abbreviated() {
        let p = policy(POLICY);
        for argv in [
            "rm --recu x",
            "rm --r x",
            "rm --recursive=1 x",
            "nice rm --rec x",
        ] {
            assert_eq!(refusal(&p, &words(argv), None).0, "rm-recursive", "{argv}");
        }
        // `--` alone and other options are not abbreviations of it.
        assert_eq!(
            check(&p, &words("rm -- --force x"), None)
                .unwrap()
                .decision
                .unwrap()
                .class,
            "unclassified"
        );
    }

    #[test]
    fn privilege_changes_behind_wrappers_are_refused() {
        let p = policy(POLICY);
        for argv in [
            "setpriv --reuid=1000 ls",
            "setpriv --reu 1000 ls",
            "setpriv --init-groups ls",
            "unshare -S 0 ls",
            "nsenter -t 1 -G 0 ls",
            "chroot --userspec=1:1 /x ls",
        ] {
            assert_eq!(
                refusal(&p, &words(argv), None).0,
                "privilege-escalation",
                "{argv}"
            );
        }
    }
}
