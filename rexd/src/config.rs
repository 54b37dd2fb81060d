//! The daemon's configuration: the spec's TOML file (`/etc/rexd/config.toml`), with the spec's
//! defaults for everything it leaves out, checked once at startup.
//!
//! Additions to the spec's table are marked below; unknown keys are refused so a typo does not
//! silently leave a limit at its default.

pub use crate::log::{LogFormat, LogLevel};
use std::path::{Path, PathBuf};

use deskwire::rexd::Limits;
use serde::Deserialize;

/// What can be wrong with a configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML does not parse or does not fit the schema (the message names line and key).
    #[error("invalid config {path}: {message}")]
    Parse {
        /// The file (or `<inline>`).
        path: PathBuf,
        /// The parser's explanation, with line and column.
        message: String,
    },
    /// A value parses but makes no sense.
    #[error("invalid config: {0}")]
    Invalid(String),
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[server]`.
    #[serde(default)]
    pub server: ServerSection,
    /// `[limits]`: the spec's limits table; absent keys take the spec's defaults.
    #[serde(default)]
    pub limits: LimitsSection,
    /// `[security]`.
    #[serde(default)]
    pub security: SecuritySection,
    /// `[audit]`.
    #[serde(default)]
    pub audit: AuditSection,
    /// `[policy]` (addition to the spec: command classes, the sudo allowlist, per-client
    /// actions; see [`crate::policy`]). Absent: no classes, sudo is an ordinary program.
    #[serde(default)]
    pub policy: Option<PolicySection>,
}

/// What a class of commands gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// It runs.
    Allow,
    /// It runs, and the audit entry and the daemon's log say so (`"action": "flag"`).
    Flag,
    /// Refused with `-32001`, naming the rule.
    Deny,
}

/// `[policy]`: sorts commands into classes by rules on their argv, says what each class gets
/// (for everyone, and per authenticated client), and keeps the sudo allowlist.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    /// What a command no rule classifies gets (class `unclassified`). Default `allow`; `deny`
    /// makes the rules an allowlist, the only kind of list a copy or a renamed binary cannot
    /// get around.
    #[serde(default = "allow")]
    pub default: Action,
    /// Class name -> action. Every class a rule names must be here; the built-in classes
    /// `shell` (shell wrappers and `shell: true`, default `deny`) and `privileged` (commands
    /// the sudo allowlist lets through, default `flag`) may be.
    #[serde(default)]
    pub classes: std::collections::BTreeMap<String, Action>,
    /// `[[policy.rules]]`, in order: a command takes the class of the first rule that matches.
    #[serde(default)]
    pub rules: Vec<ClassRule>,
    /// `[[policy.sudo]]`: the argv that may run as `sudo -n ARGV`; any other use of sudo is
    /// refused.
    #[serde(default)]
    pub sudo: Vec<SudoRule>,
    /// `[[policy.clients]]`: other actions for a client the network transport authenticated.
    #[serde(default)]
    pub clients: Vec<ClientPolicy>,
}

fn allow() -> Action {
    Action::Allow
}

/// One `[[policy.rules]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassRule {
    /// Named in refusals and audit entries.
    pub name: String,
    /// The class it puts a command in.
    pub class: String,
    /// Program file names (`rm`, not `/bin/rm`): matched against `argv[0]`'s file name and the
    /// file name it resolves to, at every program position (`env rm`, `busybox rm`, `nice rm`).
    pub programs: Vec<String>,
    /// Globs on the arguments (`-*r*`); the rule matches when one argument matches one of
    /// them. Absent: any arguments.
    #[serde(default)]
    pub any_arg: Vec<String>,
}

/// One `[[policy.sudo]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SudoRule {
    /// Named in audit entries.
    pub name: String,
    /// The command after `sudo`, one glob per word, as many words as given
    /// (`["systemctl", "restart", "app-*"]`).
    pub argv: Vec<String>,
}

/// One `[[policy.clients]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientPolicy {
    /// The authenticated principal: a token's label, or a client certificate's subject as
    /// RFC 4514 writes it (`CN=alice,O=ops`).
    pub principal: String,
    /// Its action for unclassified commands (else `policy.default`).
    #[serde(default)]
    pub default: Option<Action>,
    /// Its actions for these classes (others as `policy.classes`).
    #[serde(default)]
    pub classes: std::collections::BTreeMap<String, Action>,
    /// Read-only: its `fs.write` is refused, and its commands run with the roots (and
    /// `security.confine_write`) read-only, only under confinement (Landlock); the private
    /// `TMPDIR` stays writable. Classes judge commands by name; this holds for what they do.
    #[serde(default)]
    pub read_only: bool,
}

/// `[server]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// Serve JSON-RPC on stdio (the only v1 transport; `--irc` is chosen on the command line).
    #[serde(default = "yes")]
    pub stdio: bool,
    /// `error`, `warn`, `info` or `debug`: how much the daemon says on stderr.
    #[serde(default = "info")]
    pub log_level: LogLevel,
    /// `text` (the default: `TIME rexd: LEVEL: MESSAGE`) or `json` (one JSON object a line,
    /// `{"time","level","message"}`, for a log shipper).
    #[serde(default)]
    pub log_format: LogFormat,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            stdio: true,
            log_level: LogLevel::Info,
            log_format: LogFormat::Text,
        }
    }
}

fn yes() -> bool {
    true
}

fn info() -> LogLevel {
    LogLevel::Info
}

/// `[limits]`, with the spec's defaults for absent keys.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSection {
    /// Timeout of an exec that names none.
    pub default_timeout_ms: u64,
    /// The most any exec may ask for.
    pub hard_timeout_ms: u64,
    /// Output bytes kept per process (stdout and stderr together).
    pub max_output_bytes: u64,
    /// Addition to the spec: the cap of an exec that asks for none (`uncapped_output`, what
    /// `rex exec` asks for: its output streams to a terminal or a file, with backpressure, and
    /// the daemon keeps none of it). Absent: no cap, as with ssh.
    pub hard_output_bytes: Option<u64>,
    /// Bytes one `fs.read` returns at most.
    pub max_file_read_bytes: u64,
    /// Processes (exec and PTY) one session runs at once.
    pub max_processes_per_session: u64,
    /// Sessions served at once.
    pub max_concurrent_sessions: u64,
    /// Addition to the spec: how long a process may take to end after `TERM` (timeout, session
    /// close) before its process group gets `KILL`.
    pub kill_grace_ms: u64,
    /// Addition to the spec: bytes of `exec.input` / `pty.input` buffered for a process that does
    /// not read its input; more is refused with `resource_limit`.
    pub max_input_buffer_bytes: u64,
    /// Addition to the spec: detached processes (`detach: true`) running at once for the one
    /// client of this daemon (`rexd --stdio` serves one client per process), across its
    /// sessions: a detached process outlives its session, so it counts until it ends. More is
    /// refused with `resource_limit`. Detached processes end with the daemon (see
    /// [`SecuritySection::process_tracking`]).
    pub max_detached_processes: u64,
}

impl Default for LimitsSection {
    fn default() -> Self {
        let d = Limits::DEFAULT;
        LimitsSection {
            default_timeout_ms: d.default_timeout_ms.unwrap_or(30_000),
            hard_timeout_ms: d.hard_timeout_ms.unwrap_or(300_000),
            max_output_bytes: d.max_output_bytes.unwrap_or(1 << 20),
            hard_output_bytes: None,
            max_file_read_bytes: d.max_file_read_bytes.unwrap_or(1 << 20),
            max_processes_per_session: d.max_processes_per_session.unwrap_or(8),
            max_concurrent_sessions: d.max_concurrent_sessions.unwrap_or(16),
            kill_grace_ms: 2_000,
            max_input_buffer_bytes: 1 << 20,
            max_detached_processes: 8,
        }
    }
}

impl LimitsSection {
    /// The wire view (the spec's six limits).
    pub fn to_limits(&self) -> Limits {
        Limits {
            max_output_bytes: Some(self.max_output_bytes),
            max_file_read_bytes: Some(self.max_file_read_bytes),
            max_processes_per_session: Some(self.max_processes_per_session),
            default_timeout_ms: Some(self.default_timeout_ms),
            hard_timeout_ms: Some(self.hard_timeout_ms),
            max_concurrent_sessions: Some(self.max_concurrent_sessions),
        }
    }
}

/// `[security]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecuritySection {
    /// Whether `shell: true` execs are allowed (the spec's default config says `true`; without
    /// a config file the daemon starts with it off).
    #[serde(default)]
    pub allow_shell: bool,
    /// `[[security.allowed_roots]]`: the directories file ops and `cwd` must stay inside.
    #[serde(default)]
    pub allowed_roots: Vec<RootEntry>,
    /// Addition to the spec: programs that may run, as names found on the daemon's `PATH`
    /// (`"ls"`) or paths (`"/usr/bin/ls"`), each resolved when the daemon starts (an entry
    /// that names no executable is a startup error). Empty means any. An exec's `argv[0]` is
    /// resolved the same way (on the daemon's `PATH`, or against the exec's cwd when it has a
    /// `/`, symlinks followed) and allowed when it is the same file under the same file name:
    /// a copy named `ls` inside a root is not `ls`, nor is a link named `sh` to an allowed
    /// multi-call binary. What was checked is what runs. A shell exec is `sh`.
    ///
    /// While this or `deny_commands` is set, a client's `env` may not set `PATH` (refused,
    /// `-32001`, naming the variable), and the variables that make a program load or run
    /// other code are dropped from it: `LD_*`, `DYLD_*`, `GCONV_PATH`, `BASH_ENV`, `ENV`,
    /// `BASH_FUNC_*`, interpreters' paths and start-up options (`PYTHONPATH`, `PERL5OPT`,
    /// `NODE_OPTIONS`, …), git's program and config variables (`GIT_SSH_COMMAND`,
    /// `GIT_CONFIG_*`, …) and `PAGER`/`EDITOR`-style ones (the full list:
    /// `rexd::policy::UNSAFE_ENV`). The daemon's own environment passes unchanged.
    ///
    /// What a list cannot promise: an allowed program that runs others (a shell, `python`,
    /// `env`, `find -exec`, `make`, `git` with hooks or a config it finds in the workspace)
    /// runs anything, so allow only programs that do not; shell mode bypasses the list unless
    /// `sh` is left off it or `allow_shell` is off; and the list says nothing about what
    /// an allowed program does to files (the roots confine fs ops, not processes).
    #[serde(default)]
    pub allow_commands: Vec<String>,
    /// Addition to the spec: programs that may never run; wins over the allow list. Matches
    /// the same file (a link to a denied program under another name is refused) or any
    /// program with the entry's file name. A deny list alone is a speed bump, not a boundary:
    /// any program left off it (`cp`, an interpreter) can copy or do what a denied one does.
    #[serde(default)]
    pub deny_commands: Vec<String>,
    /// Addition to the spec: whether `fs.read` reads a regular file that has more than one
    /// hard link. Off by default: another link may lie outside every root (the kernel's
    /// beneath-the-root checks see only the name used), so reading it could show a file the
    /// roots exclude. Turn it on for trees that hard-link on purpose (pnpm's store, `git clone
    /// --local`, `cp -al` backups) when nothing outside the roots is linked into them. Writes
    /// through such a file (`atomic: false`, `append`) are always refused; atomic writes
    /// replace the name and leave the other links alone.
    #[serde(default)]
    pub read_hard_links: bool,
    /// Addition to the spec: how the processes an exec starts are kept accountable to it, so
    /// that a timeout, `exec.kill`, `session.close` and the daemon's exit reach every one of
    /// them, including `setsid` and double-forked grandchildren that ignore `TERM` (TERM to all,
    /// then KILL after `kill_grace_ms`):
    /// - `"auto"` (default): a cgroup v2 per exec where the daemon may create cgroups below its
    ///   own (root, or a delegated subtree such as a systemd unit with `Delegate=yes`), else
    ///   `"subreaper"`;
    /// - `"cgroup"`: cgroups or no execs;
    /// - `"subreaper"`: the daemon becomes the child subreaper and finds an exec's processes
    ///   by walking `/proc` (its leader's descendants, and the daemon's descendants carrying the
    ///   exec's `REXD_TREE` variable). A process that leaves the tree *and* clears its
    ///   environment escapes its exec, not the daemon: `rexd --stdio` and `--mcp` kill every
    ///   descendant left when they exit.
    ///
    /// Either way, once an exec's leader has ended and `kill_grace_ms` passed, what is left of
    /// its tree is killed and its pipes closed, so `exec.exit` always comes and nothing runs on
    /// unaccounted. Detached processes outlive their session, never the daemon: when the client
    /// goes away (end of input) or `rexd --stdio` / `--mcp` gets `SIGTERM`, `SIGINT` or
    /// `SIGHUP`, they get TERM, then KILL, like the rest. A daemon killed with `SIGKILL`
    /// cannot clean up; its cgroups keep its processes findable (and the next daemon removes
    /// them once empty).
    #[serde(default)]
    pub process_tracking: crate::tree::Tracking,
    /// Addition to the spec: whether every process rexd starts is confined with Linux Landlock
    /// to the roots (read-write) and what commands need of the system (read-only): `"auto"`
    /// (default: where the kernel has Landlock; said plainly where it has none), `"required"`
    /// (rexd does not start without it) or `"off"`. See [`crate::confine`].
    #[serde(default)]
    pub confine: crate::confine::ConfineMode,
    /// Addition to the spec: more paths confined commands may read and execute (files, or
    /// directories and what is beneath them), absolute or `~/…` (the daemon's home).
    #[serde(default)]
    pub confine_read: Vec<PathBuf>,
    /// Addition to the spec: more paths confined commands may read, write, create in and
    /// remove from, absolute or `~/…` (the daemon's home).
    #[serde(default)]
    pub confine_write: Vec<PathBuf>,
}

/// One allowed root.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootEntry {
    /// An absolute directory.
    pub path: PathBuf,
}

/// `[audit]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditSection {
    /// Write audit entries.
    #[serde(default)]
    pub enabled: bool,
    /// Where (JSON lines, appended); stderr when absent.
    #[serde(default)]
    pub path: Option<PathBuf>,
}

impl Config {
    /// Parses TOML text; `path` only names the source in errors.
    pub fn from_toml(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::from_toml(&text, path)
    }

    /// Checks what TOML types cannot: absolute roots, not `/`, coherent limits.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for root in &self.security.allowed_roots {
            if !root.path.is_absolute() {
                return Err(ConfigError::Invalid(format!(
                    "allowed root {:?} is not an absolute path",
                    root.path
                )));
            }
            if root.path == Path::new("/") {
                return Err(ConfigError::Invalid(
                    "allowed root \"/\" would allow everything; name the directories instead"
                        .into(),
                ));
            }
        }
        for (key, paths) in [
            ("confine_read", &self.security.confine_read),
            ("confine_write", &self.security.confine_write),
        ] {
            for p in paths {
                if !p.is_absolute() && !p.starts_with("~") {
                    return Err(ConfigError::Invalid(format!(
                        "security.{key}: {p:?} is neither an absolute path nor ~/…"
                    )));
                }
            }
        }
        let l = &self.limits;
        if l.default_timeout_ms == 0 || l.hard_timeout_ms == 0 {
            return Err(ConfigError::Invalid("timeouts must be above 0".into()));
        }
        if l.default_timeout_ms > l.hard_timeout_ms {
            return Err(ConfigError::Invalid(format!(
                "default_timeout_ms ({}) is above hard_timeout_ms ({})",
                l.default_timeout_ms, l.hard_timeout_ms
            )));
        }
        if l.max_concurrent_sessions == 0 || l.max_processes_per_session == 0 {
            return Err(ConfigError::Invalid(
                "max_concurrent_sessions and max_processes_per_session must be above 0".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample config the .deb ships sets every key the reference documents, and every key
    /// it sets is in the reference (docs/rexd-config.md).
    #[test]
    fn the_full_sample_loads_and_its_keys_are_documented() {
        let text = include_str!("../examples/rexd.toml");
        let c = Config::from_toml(text, Path::new("rexd.toml")).unwrap();
        assert_eq!(c.server.log_format, LogFormat::Text);
        assert!(c.policy.is_some() && c.audit.enabled);
        let reference = include_str!("../../docs/rexd-config.md");
        fn keys(v: &toml::Value, out: &mut Vec<String>) {
            match v {
                toml::Value::Table(t) => {
                    for (k, v) in t {
                        out.push(k.clone());
                        keys(v, out);
                    }
                }
                toml::Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        keys(&toml::from_str::<toml::Value>(text).unwrap(), &mut all);
        // Class names are the sample's own, not keys of the format.
        let own = ["read", "build", "destructive"];
        for key in all.iter().filter(|k| !own.contains(&k.as_str())) {
            assert!(
                reference.contains(&format!("`{key}`"))
                    || reference.contains(&format!("[{key}]"))
                    || reference.contains(&format!("[[policy.{key}]]"))
                    || reference.contains(&format!("[[security.{key}]]")),
                "docs/rexd-config.md does not describe `{key}`"
            );
        }
    }

    #[test]
    fn spec_example_parses_as_is() {
        let text = include_str!("../examples/config.toml");
        let c = Config::from_toml(text, Path::new("config.toml")).unwrap();
        assert!(c.server.stdio);
        assert_eq!(c.server.log_level, LogLevel::Info);
        assert_eq!(c.limits.hard_timeout_ms, 300_000);
        assert_eq!(c.limits.max_processes_per_session, 8);
        assert!(c.security.allow_shell);
        let roots: Vec<_> = c.security.allowed_roots.iter().map(|r| &r.path).collect();
        assert_eq!(
            roots,
            [Path::new("/srv/myapp"), Path::new("/home/deploy/projects")]
        );
        assert!(c.audit.enabled);
        assert_eq!(
            c.audit.path.as_deref(),
            Some(Path::new("/var/log/rexd/audit.log"))
        );
        assert_eq!(c.limits.to_limits(), Limits::DEFAULT);
    }

    #[test]
    fn missing_limits_keep_defaults() {
        let c = Config::from_toml("[limits]\nmax_output_bytes = 10\n", Path::new("x")).unwrap();
        assert_eq!(c.limits.max_output_bytes, 10);
        assert_eq!(c.limits.default_timeout_ms, 30_000);
        assert_eq!(c.limits.max_detached_processes, 8);
        assert_eq!(c.security.process_tracking, crate::tree::Tracking::Auto);
        assert!(!c.security.read_hard_links);
        let c = Config::from_toml(
            "[security]\nprocess_tracking = \"subreaper\"\n",
            Path::new("x"),
        )
        .unwrap();
        assert_eq!(
            c.security.process_tracking,
            crate::tree::Tracking::Subreaper
        );
        assert_eq!(
            Config::from_toml("", Path::new("x")).unwrap(),
            Config::default()
        );
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        for (text, want) in [
            ("[limits]\nmax_output_byte = 1\n", "max_output_byte"),
            ("[limits]\nmax_output_bytes = \"big\"\n", "max_output_bytes"),
            ("[security]\nallow_shell = 1\n", "allow_shell"),
            ("[[security.allowed_roots]]\npath = \"rel\"\n", "absolute"),
            ("[[security.allowed_roots]]\npath = \"/\"\n", "everything"),
            (
                "[limits]\ndefault_timeout_ms = 10\nhard_timeout_ms = 5\n",
                "hard_timeout_ms",
            ),
            ("[server]\nlog_level = \"loud\"\n", "log_level"),
            (
                "[security]\nprocess_tracking = \"magic\"\n",
                "process_tracking",
            ),
            ("[sever]\n", "sever"),
            ("[limits\n", "line 1"),
        ] {
            let e = Config::from_toml(text, Path::new("c.toml")).unwrap_err();
            assert!(e.to_string().contains(want), "{text:?}: {e}");
        }
        let e = Config::load(Path::new("/nonexistent/rexd.toml")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/rexd.toml"), "{e}");
    }
}
