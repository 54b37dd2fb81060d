//! Sessions: `session.open` (roots, limits, the negotiated encodings), `session.info`, and their end with its cause.

use super::*;

#[derive(Debug)]
pub(super) struct Session {
    pub(super) id: String,
    pub(super) client: String,
    /// Who the transport authenticated (a token's label, a certificate's subject); `None` on
    /// stdio, where the client is whoever started the daemon.
    pub(super) principal: Option<String>,
    /// Where its client connects from (`IP:PORT`), for the audit; `None` when unknown.
    pub(super) address: Option<String>,
    pub(super) roots: Roots,
    pub(super) cwd: PathBuf,
    pub(super) limits: Limits,
    /// Running and recently finished processes, by process id.
    pub(super) procs: Vec<String>,
    /// It negotiated compression (`zstd` payloads both ways).
    pub(super) compress: bool,
    /// It negotiated raw frames (`fs.read` bytes after the answer's line).
    pub(super) raw_frames: bool,
    /// It negotiated raw output too (exec output bytes after the event's line).
    pub(super) raw_output: bool,
}

impl Service {
    pub(super) fn session(&self, id: &str) -> OpResult<&Session> {
        self.sessions.get(id).ok_or_else(|| {
            err(
                ErrorCode::InvalidParams,
                format!("unknown session_id {id:?}"),
            )
            .with_data(json!({"session_id": id}))
        })
    }

    pub(super) fn with_fs<T>(
        &self,
        session: &str,
        f: impl FnOnce(&FsContext<'_>) -> OpResult<T>,
    ) -> OpResult<T> {
        let s = self.session(session)?;
        let ctx = FsContext {
            roots: &s.roots,
            cwd: &s.cwd,
            max_read: s.limits.max_file_read_bytes.unwrap_or(u64::MAX),
            read_hard_links: self.settings.read_hard_links,
            compress: s.compress,
            raw_frames: s.raw_frames,
        };
        f(&ctx)
    }

    /// Whether the session's client is read-only (`[[policy.clients]] read_only`), for a
    /// request that would change files (`what`: `fs.write`) or run a command (`None`). A
    /// write is refused; a command runs with the roots read-only, which only confinement can
    /// hold, so without it the command is refused too.
    pub(super) fn read_only_client(&self, session: &str, what: Option<&str>) -> OpResult<bool> {
        let s = self.session(session)?;
        let principal = s.principal.as_deref();
        if !self.settings.commands.read_only(principal) {
            return Ok(false);
        }
        let who = principal.unwrap_or_default();
        let refused = |why: String| {
            Err(err(ErrorCode::Unauthorized, why).with_data(json!({
                "principal": who,
                "read_only": true,
            })))
        };
        match what {
            Some(what) => refused(format!(
                "{who} is a read-only client ([[policy.clients]] read_only = true): {what} is \
                 refused"
            )),
            None if !self.settings.confine.is_active() => refused(format!(
                "{who} is a read-only client ([[policy.clients]] read_only = true), and only \
                 confinement can hold a command to that, which is off here ({}); its commands \
                 are refused",
                self.settings.confine.summary()
            )),
            None => Ok(true),
        }
    }

    /// The bytes of an `exec.input`/`pty.input`: `zstd` only in a session that negotiated it,
    /// inflated no further than a plain message could be long.
    pub(super) fn input_bytes(
        &self,
        session: &str,
        data: &str,
        encoding: Encoding,
    ) -> OpResult<Vec<u8>> {
        let negotiated = self.sessions.get(session).is_some_and(|s| s.compress);
        compress::decode_bounded(data, encoding, negotiated, compress::MAX_INFLATED)
            .map(|b| b.into_owned())
            .map_err(|e| err(ErrorCode::InvalidParams, e.to_string()))
    }

    pub(super) fn session_open(&mut self, p: SessionOpenParams) -> OpResult<SessionOpenResult> {
        let max = self.settings.limits.max_concurrent_sessions;
        if self.sessions.len() as u64 >= max {
            return Err(err(
                ErrorCode::ResourceLimit,
                format!(
                    "{max} sessions already open, the daemon's most \
                     (limits.max_concurrent_sessions): try again when one closes (a session \
                     opened over POST /rpc holds its place until session.close, or until \
                     --rpc-session-idle-ms pass without a request)"
                ),
            )
            .with_data(json!({"limit": max})));
        }
        let offered = self.offered();
        if p.resumable && !self.resumable {
            return Err(err(
                ErrorCode::UnsupportedCapability,
                "resumable sessions need a daemon that outlives its connection: \
                 `rexd --stdio --resumable` (over ssh) or `rexd --listen`",
            )
            .with_data(json!({"capability": "resume"})));
        }
        if let Some(asked) = &p.requested_capabilities
            && let Some(missing) = asked.iter().find(|c| !offered.contains(c))
        {
            return Err(err(
                ErrorCode::UnsupportedCapability,
                format!("capability {missing} is not offered"),
            )
            .with_data(json!({"capability": missing.as_str()})));
        }
        let roots = match &p.workspace_roots {
            Some(want) if !want.is_empty() => self.settings.roots.narrow(want)?,
            _ => self.settings.roots.clone(),
        };
        let cwd = roots
            .first()
            .map(|r| r.path().to_owned())
            .ok_or_else(|| err(ErrorCode::Unauthorized, "the daemon has no allowed roots"))?;
        let limits = self
            .settings
            .limits
            .to_limits()
            .lowered_by(&p.limits.unwrap_or_default());
        let compression = p.compression.as_deref().and_then(compress::choose);
        // Only a transport that can carry bytes as they are after a line grants raw frames:
        // stdio, ssh, the agent's bridges, and /ws (a line and its bytes in one binary
        // message); an HTTP body (POST /rpc, MCP) holds one JSON value.
        let raw_frames = p.raw_frames && self.raw_transport;
        let raw_output = raw_frames && p.raw_output;
        // 128 random bits: an id tells nothing of other sessions and cannot be guessed (the
        // hub answers a session only to its holder; this keeps a stranger from even aiming).
        let id = format!("s_{}", crate::sys::random_hex(16));
        let result = SessionOpenResult {
            session_id: id.clone(),
            protocol: PROTOCOL_VERSION.into(),
            server_version: SERVER_VERSION.into(),
            capabilities: offered,
            limits,
            workspace_roots: roots.paths(),
            resume: None,
            compression: compression.map(String::from),
            raw_frames,
            raw_output,
        };
        self.sessions.insert(
            id.clone(),
            Session {
                id,
                client: p.client_name,
                principal: self.opening_principal.clone(),
                address: self.opening_address.clone(),
                roots,
                cwd,
                limits,
                procs: Vec::new(),
                compress: compression.is_some(),
                raw_frames,
                raw_output,
            },
        );
        Ok(result)
    }

    pub(super) fn session_close(&mut self, now: u64, p: SessionCloseParams) -> OpResult<OkResult> {
        self.session(&p.session_id)?;
        self.close_session(now, &p.session_id, false, SessionEnd::Closed);
        Ok(OkResult { ok: true })
    }

    pub(super) fn close_session(
        &mut self,
        now: u64,
        id: &str,
        kill_detached: bool,
        cause: SessionEnd,
    ) {
        let Some(session) = self.sessions.remove(id) else {
            return;
        };
        if self.settings.audit.enabled() {
            self.settings.audit.record(
                Some(id),
                Some(&session.client),
                Who {
                    principal: session.principal.as_deref(),
                    address: session.address.as_deref(),
                },
                "session.end",
                json!({}),
                json!({"cause": cause.as_str(), "processes": session.procs.len()}),
            );
        }
        for pid in session.procs {
            let Some(proc_) = self.procs.get_mut(&pid) else {
                continue;
            };
            proc_.orphaned = true;
            if proc_.finished {
                let key = proc_.key;
                self.forget(key);
                continue;
            }
            if !proc_.detached || kill_detached {
                proc_.killed = true;
                let key = proc_.key;
                self.terminate(now, key);
            }
        }
    }

    pub(super) fn session_info(&self, p: SessionInfoParams) -> OpResult<SessionInfoResult> {
        let s = self.session(&p.session_id)?;
        let processes = s
            .procs
            .iter()
            .filter_map(|id| self.procs.get(id))
            .map(|pr| ProcessInfo {
                process_id: pr.id.clone(),
                status: pr.status(),
                started_at: pr.started_at.clone(),
                detached: pr.detached,
                pty_id: pr.pty_id.clone(),
            })
            .collect();
        Ok(SessionInfoResult {
            session_id: s.id.clone(),
            cwd: s.cwd.to_string_lossy().into_owned(),
            workspace_roots: s.roots.paths(),
            capabilities: self.offered(),
            limits: s.limits,
            processes,
        })
    }

    /// Stops (or resumes) reading the output of `session`'s processes: a host whose client
    /// for that session is behind pauses it, so the children block on full pipes (as with a
    /// slow ssh channel) and the host's memory does not grow. Timers still run.
    pub fn set_paused(&mut self, session: &str, paused: bool) {
        if paused {
            self.paused.insert(session.to_owned());
        } else {
            self.paused.remove(session);
        }
    }

    /// Closes `session` as `session.close` would (its attached processes end; detached ones
    /// run on, except for [`SessionEnd::Revoked`]), for a host whose client for it went away
    /// or lost its right to it. `false` if there is no such session.
    pub fn close_session_now(&mut self, now: u64, session: &str, cause: SessionEnd) -> bool {
        if !self.sessions.contains_key(session) {
            return false;
        }
        self.paused.remove(session);
        // A revoked client's detached processes end too: nobody may reach them any more.
        let kill_detached = cause == SessionEnd::Revoked;
        self.close_session(now, session, kill_detached, cause);
        self.update_gauges();
        true
    }

    /// The principal a session was opened by ([`Service::call_from`]); `None` for an unknown
    /// session or one opened without.
    pub fn session_principal(&self, session: &str) -> Option<Option<&str>> {
        self.sessions.get(session).map(|s| s.principal.as_deref())
    }
}
