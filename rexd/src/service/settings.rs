//! What a service runs with ([`Settings`]), and why a session ended ([`SessionEnd`]).

use super::*;

/// Why a session ended: the `cause` of its `session.end` audit entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// `session.close`.
    Closed,
    /// Its client's connection ended (the end of stdin, a dropped WebSocket).
    Disconnected,
    /// A session of pointed calls (`POST /rpc`) had none for its idle time.
    Idle,
    /// A resumable session was not resumed within its grace.
    NotResumed,
    /// The daemon was told to stop (`SIGTERM`, `SIGINT`, `SIGHUP`).
    Shutdown,
}

impl SessionEnd {
    /// The name in the audit entry.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionEnd::Closed => "close",
            SessionEnd::Disconnected => "disconnect",
            SessionEnd::Idle => "idle",
            SessionEnd::NotResumed => "not_resumed",
            SessionEnd::Shutdown => "shutdown",
        }
    }
}

/// What a service runs with.
#[derive(Debug)]
pub struct Settings {
    /// The allowed roots.
    pub roots: Roots,
    /// Limits and extras (`kill_grace_ms`, input buffer).
    pub limits: LimitsSection,
    /// `shell: true` allowed.
    pub allow_shell: bool,
    /// The command policy: the lists (`security.allow_commands`, `security.deny_commands`)
    /// and `[policy]`, resolved.
    pub commands: Policy,
    /// `fs.read` reads files that have other hard links.
    pub read_hard_links: bool,
    /// How process trees are tracked.
    pub tracking: Tracking,
    /// Where audit entries go.
    pub audit: Audit,
    /// Counters and gauges (shared with the transports).
    pub metrics: Arc<Metrics>,
}

impl Settings {
    /// Spec defaults, shell off, no audit, these roots.
    pub fn for_roots(roots: &[PathBuf]) -> io::Result<Settings> {
        Ok(Settings {
            roots: Roots::open(roots)?,
            limits: LimitsSection::default(),
            allow_shell: false,
            commands: Policy::default(),
            read_hard_links: false,
            tracking: Tracking::Auto,
            audit: Audit::disabled(),
            metrics: Arc::new(Metrics::new()),
        })
    }

    /// From a parsed config (roots opened now; the audit sink as configured).
    pub fn from_config(config: &Config) -> io::Result<Settings> {
        let roots: Vec<PathBuf> = config
            .security
            .allowed_roots
            .iter()
            .map(|r| r.path.clone())
            .collect();
        let audit = match (config.audit.enabled, &config.audit.path) {
            (false, _) => Audit::disabled(),
            (true, None) => Audit::stderr(),
            (true, Some(p)) => Audit::file(p)?,
        };
        Ok(Settings {
            roots: Roots::open(&roots)?,
            limits: config.limits.clone(),
            allow_shell: config.security.allow_shell,
            commands: Policy::new(
                &config.security.allow_commands,
                &config.security.deny_commands,
                config.policy.as_ref(),
            )
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?,
            read_hard_links: config.security.read_hard_links,
            tracking: config.security.process_tracking,
            audit,
            metrics: Arc::new(Metrics::new()),
        })
    }
}
