//! `pty.open`, `pty.input`, `pty.resize` and `pty.close`: a process on a pseudo-terminal.

use super::*;

impl Service {
    pub(super) fn pty_open(&mut self, now: u64, p: PtyOpenParams) -> OpResult<PtyOpenResult> {
        let (cwd, checked) =
            self.prepare(&p.session_id, &p.program, p.cwd.as_deref(), p.env.as_ref())?;
        let read_only = self.read_only_client(&p.session_id, None)?;
        self.last_decision = checked.decision.clone();
        let program = checked.program.as_ref().unwrap_or(&p.program);
        let mut proc_ = self.new_proc(now, &p.session_id, false);
        self.next_pty += 1;
        let pty_id = format!("t_{}", self.next_pty);
        proc_.pty_id = Some(pty_id.clone());
        let (cols, rows) = p.size();
        let confined = self.settings.confine.for_spawn(read_only);
        let (tree, sp) = self
            .spawn_in_tree(proc_.key, |join| {
                let launch = Launch {
                    program,
                    exe: checked.exe.as_deref(),
                    cwd: &cwd,
                    env: checked.env.as_ref(),
                    join,
                    confine: confined.as_ref(),
                };
                process::spawn_pty(&launch, cols, rows)
            })
            .map_err(|e| err(ErrorCode::InvalidParams, format!("cannot start: {e}")))?;
        proc_.tree = Some(tree);
        self.attach_or_kill(&mut proc_, sp)?;
        let result = PtyOpenResult {
            pty_id,
            process_id: proc_.id.clone(),
        };
        self.insert(proc_);
        Ok(result)
    }

    fn pty_proc(&mut self, session: &str, pty_id: &str) -> OpResult<String> {
        self.session(session)?;
        self.procs
            .values()
            .find(|p| p.session == session && p.pty_id.as_deref() == Some(pty_id) && !p.orphaned)
            .map(|p| p.id.clone())
            .ok_or_else(|| {
                err(
                    ErrorCode::ProcessNotFound,
                    format!("no PTY {pty_id:?} in this session"),
                )
                .with_data(json!({"pty_id": pty_id}))
            })
    }

    pub(super) fn pty_input(&mut self, p: PtyInputParams) -> OpResult<ExecInputResult> {
        let bytes = self.input_bytes(&p.session_id, &p.data, p.encoding)?;
        let id = self.pty_proc(&p.session_id, &p.pty_id)?;
        let accepted = self.queue_input(&p.session_id, &id, &bytes, false)?;
        Ok(ExecInputResult {
            accepted_bytes: accepted,
        })
    }

    pub(super) fn pty_resize(&mut self, p: PtyResizeParams) -> OpResult<OkResult> {
        let id = self.pty_proc(&p.session_id, &p.pty_id)?;
        let proc_ = &self.procs[&id];
        let Some(master) = &proc_.stdin else {
            return Err(err(ErrorCode::ProcessNotFound, "the PTY is closed"));
        };
        if p.cols == 0 || p.rows == 0 {
            return Err(err(
                ErrorCode::InvalidParams,
                "cols and rows must be above 0",
            ));
        }
        sys::set_winsize(master.as_fd(), p.cols, p.rows)
            .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
        Ok(OkResult { ok: true })
    }

    pub(super) fn pty_close(&mut self, now: u64, p: PtyCloseParams) -> OpResult<OkResult> {
        let id = self.pty_proc(&p.session_id, &p.pty_id)?;
        let proc_ = self.procs.get_mut(&id).expect("found above");
        let running = !proc_.finished;
        let key = proc_.key;
        if p.kill_process && running {
            proc_.killed = true;
        }
        // Closing the master hangs up the terminal (SIGHUP to its session).
        if let Some(fd) = proc_.stdin.take() {
            let _ = self.registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
        }
        if let Some(out) = proc_.stdout.take() {
            drop(out);
        }
        proc_.stdin_buf.clear();
        if p.kill_process && running {
            self.terminate(now, key);
        }
        self.try_finish(now, key);
        Ok(OkResult { ok: running })
    }
}
