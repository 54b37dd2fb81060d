//! How a process ends: reaping, `exec.exit` strictly after the last output, timeouts, TERM then KILL, and the housekeeping of emptied process trees.

use super::*;

impl Service {
    /// Sends `signal` to every process of `key`'s tree (its group, if it has no tree).
    pub(super) fn signal_tree(&self, key: u64, signal: libc::c_int) {
        let Some(p) = self.by_key.get(&key).and_then(|id| self.procs.get(id)) else {
            return;
        };
        match &p.tree {
            Some(tree) => tree.signal(signal),
            None if p.pid > 1 && p.exit.is_none() => {
                let _ = sys::kill_group(p.pid, signal);
            }
            None => {}
        }
    }

    /// Kills every process of `key`'s tree now.
    pub(super) fn kill_tree(&mut self, now: u64, key: u64) {
        let Some(p) = self.by_key.get(&key).and_then(|id| self.procs.get(id)) else {
            return;
        };
        match &p.tree {
            Some(tree) => self.tracker.kill(tree),
            None if p.pid > 1 && p.exit.is_none() => {
                let _ = sys::kill_group(p.pid, libc::SIGKILL);
            }
            None => {}
        }
        if self.tracker.has_pending() {
            self.housekeeping_soon(now);
        }
    }

    /// TERM the tree now, KILL it after the grace.
    pub(super) fn terminate(&mut self, now: u64, key: u64) {
        self.signal_tree(key, libc::SIGTERM);
        // A stopped process does not act on TERM until continued.
        self.signal_tree(key, libc::SIGCONT);
        self.timers.insert((
            now.saturating_add(self.settings.limits.kill_grace_ms),
            key,
            TimerKind::Escalate,
        ));
    }

    /// Keeps a finished tree until its cgroup can be removed.
    pub(super) fn retire(&mut self, now: u64, tree: Tree) {
        if !tree.remove() {
            self.dead_trees.push(tree);
            self.housekeeping_soon(now);
        }
    }

    fn housekeeping_soon(&mut self, now: u64) {
        if !self.timers.iter().any(|t| t.2 == TimerKind::Housekeeping) {
            self.timers
                .insert((now.saturating_add(100), 0, TimerKind::Housekeeping));
        }
    }

    pub(super) fn reap(&mut self, now: u64, key: u64) {
        let Some(id) = self.by_key.get(&key) else {
            return;
        };
        let Some(p) = self.procs.get_mut(id) else {
            return;
        };
        if p.exit.is_some() {
            return;
        }
        if let Ok(Some(status)) = sys::try_wait(p.pid) {
            p.exit = Some(status);
            if let Some(tree) = p.tree.as_mut() {
                self.tracker.reaped(tree);
            }
            if let Some(fd) = p.pidfd.take() {
                let _ = self.registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
            }
            // Whatever still holds the pipes gets the grace, then is killed and the pipes
            // closed: `exec.exit` must not wait on a process that left the group.
            if p.stdout.is_some() || p.stderr.is_some() {
                let at = now.saturating_add(self.settings.limits.kill_grace_ms);
                self.timers.insert((at, key, TimerKind::CloseStreams));
            }
            // Output may still be in the pipes; reading them to EOF comes before exec.exit.
            self.readable.insert((key, Stream::Stdout as usize));
            self.readable.insert((key, Stream::Stderr as usize));
            self.try_finish(now, key);
        }
    }

    /// Emits the terminal event and answers waiters once the process exited and its output
    /// streams are closed (so `exec.exit` always follows the last output).
    pub(super) fn try_finish(&mut self, now: u64, key: u64) {
        let Some(id) = self.by_key.get(&key).cloned() else {
            return;
        };
        let Some(p) = self.procs.get_mut(&id) else {
            return;
        };
        if p.finished || p.exit.is_none() || p.stdout.is_some() || p.stderr.is_some() {
            return;
        }
        p.finished = true;
        // The leader is gone and so are its pipes: what it left running (a daemonized
        // grandchild) ends with it.
        if let Some(tree) = p.tree.take() {
            self.tracker.kill(&tree);
            self.retire(now, tree);
            if self.tracker.has_pending() {
                self.housekeeping_soon(now);
            }
        }
        let Some(p) = self.procs.get_mut(&id) else {
            return;
        };
        if let Some(fd) = p.stdin.take() {
            let _ = self.registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
        }
        p.stdin_buf = Vec::new();
        // What the process never read is dropped; the calls that brought it are answered.
        Self::answer_input(p, &mut self.outputs);
        let duration_ms = now.saturating_sub(p.started_ms);
        if !p.orphaned {
            let event = match &p.pty_id {
                Some(pty) => Event::PtyExit(PtyExit {
                    session_id: p.session.clone(),
                    pty_id: pty.clone(),
                    process_id: p.id.clone(),
                    exit_code: p.exit_code(),
                    signal: p.signal(),
                    duration_ms,
                }),
                None => Event::ExecExit(ExecExit {
                    session_id: p.session.clone(),
                    process_id: p.id.clone(),
                    exit_code: p.exit_code(),
                    signal: p.signal(),
                    timed_out: p.timed_out,
                    duration_ms,
                    bytes_stdout: p.bytes_stdout,
                    bytes_stderr: p.bytes_stderr,
                    truncated: p.truncated,
                }),
            };
            self.outputs.push_back(ServiceOutput::Event(event).into());
        }
        let outcome = match p.exit {
            _ if p.timed_out => "timeout",
            Some(WaitStatus::Exited(0)) => "exit_0",
            Some(WaitStatus::Exited(_)) => "exit_nonzero",
            _ => "signal",
        };
        self.settings.metrics.exec(&p.class, outcome);
        let result = p.wait_result();
        for handle in std::mem::take(&mut p.waiters) {
            self.waits.remove(&handle);
            self.outputs.push_back(
                ServiceOutput::Reply {
                    handle,
                    result: Ok(Response::ExecWait(result.clone())),
                }
                .into(),
            );
        }
        if self.settings.audit.enabled() {
            let (sid, pid, code, sig, to) = (
                p.session.clone(),
                p.id.clone(),
                p.exit_code(),
                p.signal(),
                p.timed_out,
            );
            let client = self.sessions.get(&sid).map(|s| s.client.clone());
            let (principal, address) = self.who_of(Some(&sid));
            self.settings.audit.record(
                Some(&sid),
                client.as_deref(),
                Who {
                    principal: principal.as_deref(),
                    address: address.as_deref(),
                },
                "exec.exit",
                json!({"process_id": pid}),
                json!({"exit_code": code, "signal": sig, "timed_out": to, "duration_ms": duration_ms}),
            );
        }
        self.timers.retain(|t| t.1 != key);
        let orphaned = self.procs.get(&id).is_some_and(|p| p.orphaned);
        if orphaned {
            self.forget(key);
        }
        self.update_gauges();
    }

    /// Fires timers due at `now`: timeouts (TERM), escalations (KILL), `exec.wait` timeouts.
    pub fn handle_timeout(&mut self, now: u64) {
        while let Some(&t) = self.timers.iter().next() {
            if t.0 > now {
                break;
            }
            self.timers.remove(&t);
            let (_, key, kind) = t;
            if kind == TimerKind::Housekeeping {
                self.housekeeping(now);
                continue;
            }
            let Some(id) = self.by_key.get(&key).cloned() else {
                continue;
            };
            let Some(p) = self.procs.get_mut(&id) else {
                continue;
            };
            match kind {
                TimerKind::Timeout if !p.finished => {
                    p.timed_out = true;
                    self.terminate(now, key);
                }
                TimerKind::Escalate if !p.finished => self.kill_tree(now, key),
                TimerKind::CloseStreams if !p.finished => self.close_streams(now, key),
                TimerKind::Wait(handle) => {
                    if let Some(pos) = p.waiters.iter().position(|h| *h == handle) {
                        p.waiters.remove(pos);
                        self.waits.remove(&handle);
                        let result = p.wait_result();
                        self.outputs.push_back(
                            ServiceOutput::Reply {
                                handle,
                                result: Ok(Response::ExecWait(result)),
                            }
                            .into(),
                        );
                    }
                }
                _ => {}
            }
        }
    }

    /// The leader was reaped a grace ago and its pipes are still open: kills what holds them,
    /// reads what they hold (a bounded amount) and closes them.
    fn close_streams(&mut self, now: u64, key: u64) {
        self.kill_tree(now, key);
        for stream in [Stream::Stdout as usize, Stream::Stderr as usize] {
            // Up to 16 reads: a writer that survived the kill cannot keep us here.
            for _ in 0..16 {
                match self.read_chunk(key, stream, None) {
                    ReadOutcome::Data(_) => {}
                    // A lent stream's pipe closes with its bytes still in it: they are the
                    // last, and `exec.exit` comes after them.
                    ReadOutcome::Drained
                    | ReadOutcome::Lent
                    | ReadOutcome::Held
                    | ReadOutcome::Closed => break,
                }
            }
            self.readable.remove(&(key, stream));
        }
        let Some(p) = self.by_key.get(&key).and_then(|id| self.procs.get_mut(id)) else {
            return;
        };
        for out in [p.stdout.take(), p.stderr.take()].into_iter().flatten() {
            let _ = self.registry.deregister(&mut SourceFd(&out.fd.as_raw_fd()));
        }
        self.try_finish(now, key);
    }

    /// Removes emptied cgroups and reaps killed orphans; runs again while some are left.
    fn housekeeping(&mut self, now: u64) {
        self.dead_trees.retain(|t| !t.remove());
        let left = self.tracker.reap();
        if left || !self.dead_trees.is_empty() {
            self.housekeeping_soon(now);
        }
    }
}
