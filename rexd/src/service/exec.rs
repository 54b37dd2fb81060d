//! Starting processes (`exec.start`, the launch and its process tree), `exec.wait` and `exec.kill`.

use super::*;

impl Service {
    /// Policy checks shared by exec and PTY: shell mode, process count, the cwd opened
    /// beneath the session's roots, then the command lists (which resolve a relative program
    /// against that cwd) and the environment they allow.
    pub(super) fn prepare(
        &self,
        session: &str,
        program: &Program,
        cwd: Option<&str>,
        env: Option<&BTreeMap<String, String>>,
    ) -> OpResult<(OwnedFd, Checked)> {
        let s = self.session(session)?;
        if matches!(program, Program::Shell(_)) && !self.settings.allow_shell {
            return Err(err(
                ErrorCode::UnsupportedCapability,
                "shell mode is disabled on this daemon (security.allow_shell): start rexd with \
                 --allow-shell or security.allow_shell = true (a daemon rex starts: \
                 --rexd-arg=--allow-shell; rexd --listen: its operator's choice)",
            ));
        }
        let running = s
            .procs
            .iter()
            .filter(|id| self.procs.get(*id).is_some_and(|p| !p.finished))
            .count() as u64;
        if let Some(max) = s.limits.max_processes_per_session
            && running >= max
        {
            return Err(err(
                ErrorCode::ResourceLimit,
                format!("{max} processes already running in this session"),
            ));
        }
        let cwd_str = cwd.unwrap_or_else(|| s.cwd.to_str().unwrap_or("."));
        let resolved = s.roots.resolve(&s.cwd, cwd_str)?;
        let dir = resolved
            .open(libc::O_PATH | libc::O_DIRECTORY)
            .map_err(|e| match e {
                OpenError::Escape(_) => ErrorObject::forbidden_path(cwd_str, &s.roots.paths()),
                OpenError::IsRoot => ErrorObject::forbidden_path(cwd_str, &s.roots.paths()),
                OpenError::Io(e) => fsops::io_error(cwd_str, &e),
            })?;
        let checked =
            self.settings
                .commands
                .check(program, dir.as_fd(), env, s.principal.as_deref())?;
        Ok((dir, checked))
    }

    pub(super) fn new_proc(&mut self, now: u64, session: &str, detached: bool) -> Proc {
        self.next_key += 1;
        Proc {
            key: self.next_key,
            id: format!("p_{}", self.next_key),
            session: session.to_owned(),
            pty_id: None,
            pid: 0,
            pidfd: None,
            tree: None,
            stdout: None,
            stderr: None,
            stdin: None,
            stdin_buf: Vec::new(),
            stdin_eof: false,
            exit: None,
            bytes_stdout: 0,
            bytes_stderr: 0,
            cap: None,
            truncated: false,
            started_at: sys::rfc3339(SystemTime::now()),
            started_ms: now,
            timed_out: false,
            killed: false,
            detached,
            orphaned: false,
            launch_error: None,
            finished: false,
            waiters: Vec::new(),
            input_waiters: Vec::new(),
            class: self
                .last_decision
                .as_ref()
                .map_or_else(|| "unclassified".to_owned(), |d| d.class.clone()),
            compress: self.sessions.get(session).is_some_and(|s| s.compress),
            raw_output: self.sessions.get(session).is_some_and(|s| s.raw_output),
            piped_output: self.pipe_output
                && self
                    .sessions
                    .get(session)
                    .is_some_and(|s| s.raw_output && !s.compress),
        }
    }

    pub(super) fn exec_start(&mut self, now: u64, p: ExecStartParams) -> OpResult<ExecStartResult> {
        let (cwd, checked) =
            self.prepare(&p.session_id, &p.program, p.cwd.as_deref(), p.env.as_ref())?;
        let read_only = self.read_only_client(&p.session_id, None)?;
        self.last_decision = checked.decision.clone();
        let program = checked.program.as_ref().unwrap_or(&p.program);
        let limits = self.session(&p.session_id)?.limits;
        if p.detach {
            let max = self.settings.limits.max_detached_processes;
            let detached = self
                .procs
                .values()
                .filter(|x| x.detached && !x.finished)
                .count() as u64;
            if detached >= max {
                return Err(err(
                    ErrorCode::ResourceLimit,
                    format!(
                        "{max} detached processes already running (limits.max_detached_processes); \
                         they count until they end, across sessions"
                    ),
                )
                .with_data(json!({"max_detached_processes": max})));
            }
        }
        let mut proc_ = self.new_proc(now, &p.session_id, p.detach);
        proc_.cap = match (
            p.uncapped_output,
            limits.max_output_bytes,
            p.max_output_bytes,
        ) {
            // A streaming client's: only the operator's hard cap.
            (true, ..) => self.settings.limits.hard_output_bytes,
            (false, Some(a), Some(b)) => Some(a.min(b)),
            (false, a, b) => a.or(b),
        };
        let result = ExecStartResult {
            process_id: proc_.id.clone(),
            started_at: proc_.started_at.clone(),
        };
        let confined = self.settings.confine.for_spawn(read_only);
        let spawned = self.spawn_in_tree(proc_.key, |join| {
            process::spawn_pipes(&Launch {
                program,
                exe: checked.exe.as_deref(),
                cwd: &cwd,
                env: checked.env.as_ref(),
                join,
                confine: confined.as_ref(),
            })
        });
        match spawned {
            Ok((tree, sp)) => {
                proc_.tree = Some(tree);
                if let Some(stdin) = &p.stdin {
                    proc_.stdin_buf.extend_from_slice(stdin.as_bytes());
                    proc_.stdin_eof = true;
                }
                self.attach_or_kill(&mut proc_, sp)?;
                if let Some(t) = limits.effective_timeout_ms(p.timeout_ms) {
                    self.timers
                        .insert((now.saturating_add(t), proc_.key, TimerKind::Timeout));
                }
            }
            Err(e) => {
                // Named, as a shell names what it could not run.
                let what = match program {
                    Program::Argv(argv) => argv.first().map_or("", String::as_str),
                    _ => "the shell",
                };
                let message = format!("cannot start {what}: {e}");
                proc_.launch_error = Some(message.clone());
                proc_.finished = true;
                proc_.exit = None;
                self.settings.metrics.exec(&proc_.class, "launch_error");
                if self.settings.audit.enabled() {
                    // The start was answered (its entry says ok); that it never ran is here.
                    let session = self.sessions.get(&p.session_id);
                    self.settings.audit.record(
                        Some(&p.session_id),
                        session.map(|s| s.client.as_str()),
                        Who {
                            principal: session.and_then(|s| s.principal.as_deref()),
                            address: session.and_then(|s| s.address.as_deref()),
                        },
                        "exec.error",
                        json!({"process_id": proc_.id}),
                        json!({"error": message, "errno": e.raw_os_error()}),
                    );
                }
                self.after_reply
                    .push(ServiceOutput::Event(Event::ExecError(ExecErrorEvent {
                        session_id: p.session_id.clone(),
                        process_id: proc_.id.clone(),
                        message,
                        errno: e.raw_os_error(),
                    })));
            }
        }
        self.insert(proc_);
        // Flush a stdin payload right away (the pipe is usually ready).
        if let Some(id) = self.procs.get(&result.process_id).map(|p| p.key) {
            self.flush_stdin(id);
        }
        Ok(result)
    }

    /// Starts a child in a new tree for `key`. In `auto` tracking, a child that cannot join
    /// its cgroup is started again under the subreaper, which then tracks every later exec.
    pub(super) fn spawn_in_tree(
        &mut self,
        key: u64,
        spawn: impl Fn(&Join) -> io::Result<Spawned>,
    ) -> io::Result<(Tree, Spawned)> {
        let (mut tree, join) = match self.tracker.prepare(key) {
            Ok(x) => x,
            // No cgroup for this exec (a limit on cgroups, a hierarchy gone read-only).
            Err(e) if self.tracker.fall_back(&e) => self.tracker.prepare_sweep(key),
            Err(e) => return Err(e),
        };
        let first = spawn(&join);
        drop(join);
        let sp = match first {
            Ok(sp) => sp,
            Err(e) => {
                tree.remove();
                if self.settings.tracking != Tracking::Auto || !self.tracker.uses_cgroups() {
                    return Err(e);
                }
                // The cgroup or the program? Only a start without the cgroup tells.
                let (sweep_tree, sweep_join) = self.tracker.prepare_sweep(key);
                let sp = spawn(&sweep_join).inspect_err(|_| self.tracker.abandon_sweep())?;
                self.tracker.fall_back(&e);
                tree = sweep_tree;
                sp
            }
        };
        self.tracker.started(&mut tree, sp.pid);
        Ok((tree, sp))
    }

    /// [`Service::attach`], or, when the loop cannot take the child, kills and reaps it so no
    /// process runs untracked.
    pub(super) fn attach_or_kill(&mut self, proc_: &mut Proc, sp: Spawned) -> OpResult<()> {
        let pid = sp.pid;
        // Descriptors already registered leave the poll when they close with `proc_`.
        let attached = self.attach(proc_, sp);
        if attached.is_err() {
            let tree = proc_.tree.take();
            if let Some(tree) = &tree {
                self.tracker.kill(tree);
            }
            let _ = sys::kill_group(pid, libc::SIGKILL);
            sys::wait_blocking(pid);
            if let Some(mut tree) = tree {
                self.tracker.reaped(&mut tree);
                self.retire(0, tree);
            }
        }
        attached
    }

    /// Registers a spawned child's descriptors.
    fn attach(&mut self, proc_: &mut Proc, sp: Spawned) -> OpResult<()> {
        let internal = |e: io::Error| err(ErrorCode::InternalError, format!("register: {e}"));
        proc_.pid = sp.pid;
        self.registry
            .register(
                &mut SourceFd(&sp.pidfd.as_raw_fd()),
                proc_.token(Stream::Exit),
                Interest::READABLE,
            )
            .map_err(internal)?;
        proc_.pidfd = Some(sp.pidfd);
        if let Some(fd) = sp.stdout {
            self.registry
                .register(
                    &mut SourceFd(&fd.as_raw_fd()),
                    proc_.token(Stream::Stdout),
                    Interest::READABLE,
                )
                .map_err(internal)?;
            proc_.stdout = Some(Output::new(fd));
        }
        if let Some(fd) = sp.stderr {
            self.registry
                .register(
                    &mut SourceFd(&fd.as_raw_fd()),
                    proc_.token(Stream::Stderr),
                    Interest::READABLE,
                )
                .map_err(internal)?;
            proc_.stderr = Some(Output::new(fd));
        }
        if let Some(fd) = sp.stdin {
            if proc_.pty_id.is_some() {
                // The PTY master: output is read from it, input written to it.
                self.registry
                    .register(
                        &mut SourceFd(&fd.as_raw_fd()),
                        proc_.token(Stream::Stdout),
                        Interest::READABLE | Interest::WRITABLE,
                    )
                    .map_err(internal)?;
                let read_side = fd
                    .try_clone()
                    .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
                proc_.stdout = Some(Output::new(read_side));
            } else {
                self.registry
                    .register(
                        &mut SourceFd(&fd.as_raw_fd()),
                        proc_.token(Stream::Stdin),
                        Interest::WRITABLE,
                    )
                    .map_err(internal)?;
            }
            proc_.stdin = Some(fd);
        }
        // Output may already be waiting; edge-triggered readiness might have fired before
        // registration.
        self.readable.insert((proc_.key, Stream::Stdout as usize));
        self.readable.insert((proc_.key, Stream::Stderr as usize));
        Ok(())
    }

    pub(super) fn insert(&mut self, proc_: Proc) {
        if let Some(s) = self.sessions.get_mut(&proc_.session) {
            s.procs.push(proc_.id.clone());
            // Forget the oldest finished processes past the memory.
            if s.procs.len() > FINISHED_MEMORY {
                let procs = &self.procs;
                let old: Vec<String> = s
                    .procs
                    .iter()
                    .filter(|id| procs.get(*id).is_some_and(|p| p.finished))
                    .take(s.procs.len() - FINISHED_MEMORY)
                    .cloned()
                    .collect();
                s.procs.retain(|id| !old.contains(id));
                for id in old {
                    if let Some(p) = self.procs.remove(&id) {
                        self.by_key.remove(&p.key);
                    }
                }
            }
        }
        self.by_key.insert(proc_.key, proc_.id.clone());
        self.procs.insert(proc_.id.clone(), proc_);
    }

    pub(super) fn forget(&mut self, key: u64) {
        if let Some(id) = self.by_key.remove(&key) {
            self.procs.remove(&id);
        }
    }

    pub(super) fn proc_in(&mut self, session: &str, process: &str) -> OpResult<&mut Proc> {
        self.session(session)?;
        match self.procs.get_mut(process) {
            Some(p) if p.session == session && !p.orphaned => Ok(p),
            _ => Err(err(
                ErrorCode::ProcessNotFound,
                format!("no process {process:?} in this session"),
            )
            .with_data(json!({"process_id": process}))),
        }
    }

    pub(super) fn exec_wait(
        &mut self,
        now: u64,
        handle: u64,
        p: ExecWaitParams,
    ) -> OpResult<Option<Response>> {
        if p.output {
            // Output is collected only where nothing streams it: the hub does that for
            // `POST /rpc` sessions and takes the flag off before the call gets here.
            return Err(err(
                ErrorCode::InvalidParams,
                "output: true is for sessions without an event stream (POST /rpc): this \
                 session's output comes in exec.stdout and exec.stderr events",
            ));
        }
        let proc_ = self.proc_in(&p.session_id, &p.process_id)?;
        if proc_.finished {
            return Ok(Some(Response::ExecWait(proc_.wait_result())));
        }
        proc_.waiters.push(handle);
        let key = proc_.key;
        self.waits.insert(handle, p.process_id.clone());
        if let Some(t) = p.timeout_ms {
            self.timers
                .insert((now.saturating_add(t), key, TimerKind::Wait(handle)));
        }
        Ok(None)
    }

    pub(super) fn exec_kill(&mut self, now: u64, p: ExecKillParams) -> OpResult<OkResult> {
        let proc_ = self.proc_in(&p.session_id, &p.process_id)?;
        if proc_.finished {
            return Ok(OkResult { ok: false });
        }
        let sig = signal_number(p.signal);
        if matches!(
            sig,
            libc::SIGTERM | libc::SIGKILL | libc::SIGHUP | libc::SIGINT
        ) {
            proc_.killed = true;
        }
        let key = proc_.key;
        if sig == libc::SIGKILL {
            self.kill_tree(now, key);
        } else {
            self.signal_tree(key, sig);
        }
        if sig == libc::SIGTERM {
            // TERM may be ignored; the grace still ends in KILL, as for timeouts.
            self.signal_tree(key, libc::SIGCONT);
            self.timers.insert((
                now.saturating_add(self.settings.limits.kill_grace_ms),
                key,
                TimerKind::Escalate,
            ));
        }
        Ok(OkResult { ok: true })
    }
}
