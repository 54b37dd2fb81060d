//! What a service runs with ([`Settings`]), taking a new one while running
//! ([`Service::reload`]), and why a session ended ([`SessionEnd`]).

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
    /// The daemon was told to stop (`SIGTERM`, `SIGINT`; `SIGHUP` except under `--listen`).
    Shutdown,
    /// A reload revoked the token its client authenticated with.
    Revoked,
    /// A reload removed a root it works in.
    RootRemoved,
    /// An idle session of pointed calls gave its place to another client's new session: the
    /// daemon's sessions were all taken, and its client held more than the newcomer.
    Evicted,
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
            SessionEnd::Revoked => "revoked",
            SessionEnd::RootRemoved => "root_removed",
            SessionEnd::Evicted => "evicted",
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
    /// How the processes it starts are confined (`security.confine`, Landlock).
    pub confine: Confinement,
}

impl Settings {
    /// Spec defaults, shell off, no audit, these roots.
    pub fn for_roots(roots: &[PathBuf]) -> io::Result<Settings> {
        let roots = Roots::open(roots)?;
        Ok(Settings {
            confine: Confinement::for_roots(&roots)?,
            roots,
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
        let roots = Roots::open(&roots)?;
        Ok(Settings {
            confine: Confinement::from_config(config, &roots)?,
            roots,
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

impl Service {
    /// Takes a new configuration while running (`rexd --listen` on `SIGHUP`): the policy,
    /// `allow_shell`, `read_hard_links` and the audit sink apply to every call from now on;
    /// the roots and limits to sessions opened from now on. Running processes go on. A session
    /// working in a root the new configuration no longer allows ends (`root_removed`); the
    /// others keep the roots they opened with, opened again from the new ones. The metrics go
    /// on counting; the process tracking is chosen at start and stays. Returns the sessions
    /// that ended.
    pub fn reload(&mut self, now: u64, new: Settings) -> Vec<String> {
        let Settings {
            roots,
            limits,
            allow_shell,
            commands,
            read_hard_links,
            tracking,
            audit,
            metrics: _,
            confine,
        } = new;
        if tracking != self.settings.tracking {
            crate::log::warn(
                "reload: security.process_tracking changes at the next start, not on a reload",
            );
        }
        let mut ended = Vec::new();
        for (id, s) in self.sessions.iter_mut() {
            match roots.narrow(&s.roots.paths()) {
                Ok(narrowed) => s.roots = narrowed,
                Err(_) => ended.push(id.clone()),
            }
        }
        self.settings.audit = audit;
        for id in &ended {
            crate::log::info(&format!(
                "session {id}: a root it works in is no longer allowed; closed"
            ));
            self.paused.remove(id);
            self.close_session(now, id, false, SessionEnd::RootRemoved);
        }
        self.settings.roots = roots;
        // The new roots' ruleset, for processes started from now on.
        self.settings.confine = confine;
        self.settings.limits = limits;
        self.settings.allow_shell = allow_shell;
        self.settings.commands = commands;
        self.settings.read_hard_links = read_hard_links;
        self.update_gauges();
        ended
    }

    /// Writes an entry to the audit log for something the daemon did on its own (a reload);
    /// `result` says what came of it.
    pub fn audit_daemon_event(&mut self, method: &str, result: Value) {
        self.settings
            .audit
            .record(None, None, Who::default(), method, Value::Null, result);
    }

    /// An entry for a request the transport refused before the service saw it (a session id
    /// this client does not hold, a resume that failed): the probes of a leaked or guessed id
    /// leave a trace too.
    pub fn audit_refused(
        &mut self,
        method: &str,
        params: Value,
        who: Who<'_>,
        error: &deskwire::rexd::ErrorObject,
    ) {
        if self.settings.audit.enabled() {
            let session = params
                .get("session_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            self.settings.audit.record(
                session.as_deref(),
                None,
                who,
                method,
                crate::audit::redact(params),
                serde_json::json!({"error": error.code, "message": error.message}),
            );
        }
    }

    /// Opens the audit file again at its path (`SIGUSR1`, after logrotate moved it).
    pub fn reopen_audit(&mut self) -> io::Result<()> {
        self.settings.audit.reopen()
    }
}
