//! A child's stdin: `exec.input` queued into the pipe, answered once its bytes are in (the client's flow control).

use super::*;

impl Service {
    pub(super) fn queue_input(
        &mut self,
        session: &str,
        process: &str,
        bytes: &[u8],
        eof: bool,
    ) -> OpResult<u64> {
        let max = self.settings.limits.max_input_buffer_bytes;
        let proc_ = self.proc_in(session, process)?;
        if proc_.finished {
            return Err(err(ErrorCode::ProcessNotFound, "the process has ended"));
        }
        if proc_.stdin.is_none() || proc_.stdin_eof {
            return Err(err(ErrorCode::InvalidParams, "stdin is closed"));
        }
        if (proc_.stdin_buf.len() + bytes.len()) as u64 > max {
            return Err(err(
                ErrorCode::ResourceLimit,
                format!("more than {max} bytes of input waiting for the process to read"),
            ));
        }
        proc_.stdin_buf.extend_from_slice(bytes);
        proc_.stdin_eof |= eof;
        // What the child answers to this input is read at once, however busy its output was
        // ([`Output::held_until`] holds only output that comes unprompted).
        for o in [proc_.stdout.as_mut(), proc_.stderr.as_mut()]
            .into_iter()
            .flatten()
        {
            o.last_event_ms = None;
            // A stream gathering now is read at the next pump.
            if o.held_until.is_some() {
                o.held_until = Some(0);
            }
        }
        let key = proc_.key;
        self.flush_stdin(key);
        Ok(bytes.len() as u64)
    }

    /// Queues input; the answer waits until the pipe took it (or stdin closed), so a client
    /// that waits for answers never has more in flight than the daemon buffers.
    pub(super) fn exec_input(
        &mut self,
        handle: u64,
        p: ExecInputParams,
    ) -> OpResult<Option<Response>> {
        let bytes = self.input_bytes(&p.session_id, &p.data, p.encoding)?;
        // Looked up in the caller's session first: another session's process is unknown here,
        // whatever it runs on.
        if self.proc_in(&p.session_id, &p.process_id)?.pty_id.is_some() {
            return Err(err(
                ErrorCode::InvalidParams,
                "this process runs on a PTY: use pty.input",
            ));
        }
        let accepted = self.queue_input(&p.session_id, &p.process_id, &bytes, p.eof)?;
        match self.procs.get_mut(&p.process_id) {
            Some(proc_) if !proc_.stdin_buf.is_empty() => {
                proc_.input_waiters.push((handle, accepted));
                Ok(None)
            }
            _ => Ok(Some(Response::ExecInput(ExecInputResult {
                accepted_bytes: accepted,
            }))),
        }
    }

    /// Answers the `exec.input` calls waiting on `p`'s buffer.
    pub(super) fn answer_input(p: &mut Proc, outputs: &mut VecDeque<Frame>) {
        for (handle, accepted) in std::mem::take(&mut p.input_waiters) {
            outputs.push_back(
                ServiceOutput::Reply {
                    handle,
                    result: Ok(Response::ExecInput(ExecInputResult {
                        accepted_bytes: accepted,
                    })),
                }
                .into(),
            );
        }
    }

    /// Writes buffered input; closes stdin after it when EOF was asked for.
    pub(super) fn flush_stdin(&mut self, key: u64) {
        let Some(id) = self.by_key.get(&key) else {
            return;
        };
        let Some(p) = self.procs.get_mut(id) else {
            return;
        };
        let Some(fd) = &p.stdin else {
            return;
        };
        while !p.stdin_buf.is_empty() {
            let mut f = std::mem::ManuallyDrop::new(unsafe_file(fd));
            match f.write(&p.stdin_buf) {
                Ok(n) => {
                    p.stdin_buf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // EPIPE: the process closed its stdin; what it did not read is dropped.
                    p.stdin_buf.clear();
                    p.stdin_eof = true;
                    break;
                }
            }
        }
        if p.stdin_buf.is_empty() {
            Self::answer_input(p, &mut self.outputs);
        }
        if p.stdin_eof
            && p.pty_id.is_none()
            && let Some(fd) = p.stdin.take()
        {
            let _ = self.registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
        }
    }
}
