//! Readiness and output: children's streams read into `exec.stdout`/`exec.stderr`/`pty.output` events under the host's budget, with the output cap.

use super::*;

impl Service {
    /// Passes readiness of a service token (`readable` includes hang-up / error).
    pub fn handle_event(&mut self, now: u64, token: Token, readable: bool, writable: bool) {
        let Some(rel) = token.0.checked_sub(TOKEN_BASE) else {
            return;
        };
        let key = (rel / 4) as u64;
        let stream = Stream::from_index(rel % 4);
        match stream {
            Stream::Stdout | Stream::Stderr => {
                if readable {
                    self.readable.insert((key, stream as usize));
                }
                if writable {
                    self.flush_stdin(key);
                }
            }
            Stream::Stdin => self.flush_stdin(key),
            Stream::Exit => self.reap(now, key),
        }
    }

    /// Whether streams have data that [`Service::pump`] has not read yet (poll with a zero
    /// timeout then, if the host can take more output).
    pub fn wants_pump(&self) -> bool {
        self.readable.iter().any(|(key, stream)| {
            !self.is_paused(*key)
                && !self.is_lent(*key, *stream)
                && self.held_until(*key, *stream).is_none()
        })
    }

    /// The time a stream gathering output is read again ([`Output::held_until`]).
    fn held_until(&self, key: u64, stream: usize) -> Option<u64> {
        self.output(key, stream).and_then(|o| o.held_until)
    }

    fn output(&self, key: u64, stream: usize) -> Option<&Output> {
        let p = self.by_key.get(&key).and_then(|id| self.procs.get(id))?;
        match stream {
            0 => p.stdout.as_ref(),
            _ => p.stderr.as_ref(),
        }
    }

    fn output_mut(&mut self, key: u64, stream: usize) -> Option<&mut Output> {
        let p = self
            .by_key
            .get(&key)
            .and_then(|id| self.procs.get_mut(id))?;
        match stream {
            0 => p.stdout.as_mut(),
            _ => p.stderr.as_mut(),
        }
    }

    /// Whether a stream's last event still has bytes in the pipe ([`PipedBytes`]): it is not
    /// read until the host moved them.
    fn is_lent(&self, key: u64, stream: usize) -> bool {
        self.output(key, stream).is_some_and(Output::is_lent)
    }

    /// Whether `key`'s session is paused ([`Service::set_paused`]).
    fn is_paused(&self, key: u64) -> bool {
        !self.paused.is_empty()
            && self
                .by_key
                .get(&key)
                .and_then(|id| self.procs.get(id))
                .is_some_and(|p| self.paused.contains(&p.session))
    }

    /// Reads children's output into events, up to about `budget` bytes (the room the host has
    /// for output). Streams not drained stay queued for the next call.
    pub fn pump(&mut self, now: u64, budget: usize) {
        let mut budget = budget;
        self.end_holds(now);
        // Round robin: one chunk from each ready stream per round, so one chatty process does
        // not starve the others.
        while budget > 0 && !self.readable.is_empty() {
            let round: Vec<(u64, usize)> = self
                .readable
                .iter()
                .copied()
                .filter(|(key, stream)| {
                    !self.is_paused(*key)
                        && !self.is_lent(*key, *stream)
                        && self.held_until(*key, *stream).is_none()
                })
                .collect();
            if round.is_empty() {
                break;
            }
            for (key, stream) in round {
                if budget == 0 {
                    break;
                }
                match self.read_chunk(key, stream, Some(now)) {
                    ReadOutcome::Data(n) => {
                        budget = budget.saturating_sub(n.max(1));
                        if let Some(o) = self.output_mut(key, stream) {
                            o.last_event_ms = Some(now);
                        }
                    }
                    ReadOutcome::Drained => {
                        self.readable.remove(&(key, stream));
                    }
                    // Still readable: taken again once its bytes left the pipe, or once the
                    // stream gathered for a while.
                    ReadOutcome::Lent | ReadOutcome::Held => {}
                    ReadOutcome::Closed => {
                        self.readable.remove(&(key, stream));
                        self.try_finish(now, key);
                    }
                }
            }
        }
    }

    /// Ends the holds of streams that gathered output long enough ([`Output::held_until`]).
    fn end_holds(&mut self, now: u64) {
        for p in self.procs.values_mut() {
            let tokens = [p.token(Stream::Stdout), p.token(Stream::Stderr)];
            for (o, token) in [p.stdout.as_mut(), p.stderr.as_mut()]
                .into_iter()
                .zip(tokens)
            {
                if let Some(o) = o
                    && o.held_until.is_some_and(|t| t <= now)
                {
                    o.held_until = None;
                    // Back in the poll; the stream is still in `readable`, so it is read now.
                    let _ = self.registry.register(
                        &mut SourceFd(&o.fd.as_raw_fd()),
                        token,
                        Interest::READABLE,
                    );
                }
            }
        }
    }

    /// Reads one chunk of a stream into an event. With `now` (a pump, not the last reads
    /// before its pipes close), a stream that made an event this very millisecond and holds
    /// less than [`GATHER_BYTES`] is held until the next one instead: a fast writer's output
    /// then travels in events of tens of KiB, not one per write (each event costs both
    /// daemon and client a wake-up and a few system calls). The first output after a quiet
    /// millisecond, a prompt or a line, is read at once.
    pub(super) fn read_chunk(&mut self, key: u64, stream: usize, now: Option<u64>) -> ReadOutcome {
        let Some(id) = self.by_key.get(&key) else {
            return ReadOutcome::Drained;
        };
        let Some(p) = self.procs.get_mut(id) else {
            return ReadOutcome::Drained;
        };
        let is_err = stream == Stream::Stderr as usize;
        let out = if is_err { &mut p.stderr } else { &mut p.stdout };
        let Some(o) = out.as_mut() else {
            return ReadOutcome::Drained;
        };
        if o.is_lent() {
            return ReadOutcome::Lent;
        }
        if let Some(now) = now
            && p.pty_id.is_none()
            && o.last_event_ms == Some(now)
            && sys::pipe_bytes(o.fd.as_fd()).is_ok_and(|n| n > 0 && n < GATHER_BYTES)
        {
            o.held_until = Some(now + 1);
            // Out of the poll meanwhile: each write of the child would wake us for nothing.
            let _ = self.registry.deregister(&mut SourceFd(&o.fd.as_raw_fd()));
            self.timers.insert((now + 1, key, TimerKind::Gather));
            return ReadOutcome::Held;
        }
        if p.piped_output
            && p.pty_id.is_none()
            && !p.truncated
            && !p.orphaned
            && let Some(n) = pipe_output(p, is_err, &mut self.outputs)
        {
            return ReadOutcome::Data(n);
        }
        let Some(o) = (if is_err { &mut p.stderr } else { &mut p.stdout }).as_mut() else {
            return ReadOutcome::Drained;
        };
        let mut f = std::mem::ManuallyDrop::new(unsafe_file(&o.fd));
        let n = match f.read(&mut self.buf) {
            Ok(0) => 0,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::Drained,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return ReadOutcome::Data(0),
            // EIO: a PTY whose other side is all closed — the end of its output.
            Err(_) => 0,
        };
        if n == 0 {
            // EOF: flush a held-back partial character, then close.
            let carry = std::mem::take(&mut o.carry);
            if !carry.is_empty() {
                emit_output(p, is_err, &carry, &mut self.outputs);
            }
            let out = if is_err { &mut p.stderr } else { &mut p.stdout };
            if let Some(o) = out.take() {
                let _ = self.registry.deregister(&mut SourceFd(&o.fd.as_raw_fd()));
            }
            return ReadOutcome::Closed;
        }
        // Complete UTF-8 goes out as text; an unfinished trailing sequence waits for more. Raw
        // output may end anywhere (and must: bytes left in the pipe follow these).
        let mut data = std::mem::take(&mut o.carry);
        data.extend_from_slice(&self.buf[..n]);
        let raw = p.raw_output && p.pty_id.is_none();
        let keep = match std::str::from_utf8(&data) {
            _ if raw => data.len(),
            Ok(_) => data.len(),
            Err(e) if e.error_len().is_none() && data.len() - e.valid_up_to() < 4 => {
                e.valid_up_to()
            }
            Err(_) => data.len(),
        };
        o.carry = data[keep..].to_vec();
        data.truncate(keep);
        if !data.is_empty() {
            emit_output(p, is_err, &data, &mut self.outputs);
        }
        ReadOutcome::Data(n)
    }
}

pub(super) enum ReadOutcome {
    Data(usize),
    Drained,
    /// Its last event's bytes are still in the pipe ([`Output::is_lent`]).
    Lent,
    /// Gathering output until [`Output::held_until`].
    Held,
    Closed,
}

/// A stream that made an event this millisecond is read again at once only when its pipe
/// holds this much; less waits for the next millisecond ([`Service::read_chunk`]).
const GATHER_BYTES: usize = 64 * 1024;

/// The most bytes one event leaves in the pipe: what one read takes otherwise.
const MAX_PIPED: usize = READ_CHUNK;

/// Announces what `p`'s pipe holds (`FIONREAD`, within the output cap) in an event whose bytes
/// stay in the pipe for the host to move ([`PipedOutput`]): the bytes announced, `None` when
/// the pipe is empty (or cannot say), for a plain read to find its end or wait.
fn pipe_output(p: &mut Proc, is_err: bool, outputs: &mut VecDeque<Frame>) -> Option<usize> {
    let used = p.bytes_stdout + p.bytes_stderr;
    let o = if is_err { &mut p.stderr } else { &mut p.stdout }.as_mut()?;
    let held = sys::pipe_bytes(o.fd.as_fd()).ok()?.min(MAX_PIPED);
    if held == 0 {
        return None;
    }
    let mut take = held;
    if let Some(cap) = p.cap
        && used + take as u64 > cap
    {
        // The bytes past the cap are read and dropped as before, once these are out.
        take = cap.saturating_sub(used) as usize;
        p.truncated = true;
        if take == 0 {
            return None;
        }
    }
    let bytes = PipedBytes::lend(o, take).ok()?;
    o.seq += 1;
    let event = ExecOutput {
        raw_bytes: Some(take as u64),
        ..ExecOutput::raw_frame(
            p.session.clone(),
            p.id.clone(),
            o.seq,
            Encoding::Raw,
            Vec::new(),
        )
    };
    let event = match is_err {
        true => Event::ExecStderr(event),
        false => Event::ExecStdout(event),
    };
    if is_err {
        p.bytes_stderr += take as u64;
    } else {
        p.bytes_stdout += take as u64;
    }
    outputs.push_back(Frame::Piped(PipedOutput { event, bytes }));
    Some(take)
}

/// Queues an output event, applying the process's output cap.
fn emit_output(p: &mut Proc, is_err: bool, data: &[u8], outputs: &mut VecDeque<Frame>) {
    if p.truncated || p.orphaned {
        return;
    }
    let used = p.bytes_stdout + p.bytes_stderr;
    let mut take = data.len();
    if let Some(cap) = p.cap
        && used + take as u64 > cap
    {
        take = cap.saturating_sub(used) as usize;
        p.truncated = true;
    }
    if take == 0 {
        return;
    }
    let data = &data[..take];
    let event = if let Some(pty) = &p.pty_id {
        let Some(o) = p.stdout.as_mut() else {
            return;
        };
        o.seq += 1;
        let seq = o.seq;
        let (encoding, text) = compress::encode(data, p.compress);
        Event::PtyOutput(PtyOutput {
            session_id: p.session.clone().into(),
            pty_id: pty.clone().into(),
            seq,
            data: text.into_owned().into(),
            encoding,
        })
    } else {
        let o = if is_err { &mut p.stderr } else { &mut p.stdout };
        let seq = match o.as_mut() {
            Some(o) => {
                o.seq += 1;
                o.seq
            }
            // Output is only emitted while its stream is open.
            None => return,
        };
        let out = if p.raw_output {
            // The bytes as they are after the line, or one zstd frame of them when that is
            // shorter: no escaping, no base64, on either side.
            let (encoding, raw) = match p.compress.then(|| compress::raw_frame(data)) {
                Some(Some(frame)) => (Encoding::Zstd, frame),
                _ => (Encoding::Raw, data.to_vec()),
            };
            ExecOutput::raw_frame(p.session.clone(), p.id.clone(), seq, encoding, raw)
        } else {
            let (encoding, text) = compress::encode(data, p.compress);
            ExecOutput {
                session_id: p.session.clone().into(),
                process_id: p.id.clone().into(),
                seq,
                data: text.into_owned().into(),
                encoding,
                ..ExecOutput::default()
            }
        };
        if is_err {
            Event::ExecStderr(out)
        } else {
            Event::ExecStdout(out)
        }
    };
    if is_err {
        p.bytes_stderr += take as u64;
    } else {
        p.bytes_stdout += take as u64;
    }
    outputs.push_back(ServiceOutput::Event(event).into());
}
