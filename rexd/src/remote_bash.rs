//! OA1 `RemoteBash` on top of the [`Service`]: the remote end of the tool (`docs/oa1.md`,
//! "`RemoteBash`").
//!
//! Stateless (`docs/oa1.md`, "`RemoteBash`"): every request is a fresh `sh -c` in the first
//! allowed root, stdout and stderr merged in the order the command wrote them (`exec 2>&1`), no
//! state carried between requests. A command that runs past the timeout is killed with its whole
//! process group and answered `ERR timeout` after the output it wrote (which a deskwire desk
//! makes the answer, cut with a marker); output over the cap ends the command and the
//! response is cut with the truncation marker; an OA1 `CANCEL` kills the process group.
//!
//! A command that does not exit 0 ends its output with a line saying how it ended
//! (`[exit code: 1]`, `[signal: KILL]`), which the `RemoteBash` tool description teaches the
//! model, since the tool's answer is one string (see [`ExecutorConfig::exit_marker`]).
//!
//! The executor is driven like the service it wraps: the host registers nothing itself, passes
//! readiness of tokens at or above [`crate::service::TOKEN_BASE`] to [`Executor::handle_event`],
//! and calls [`Executor::drive`] after every input and at [`Executor::next_deadline`], which
//! moves server requests in and command output out.

use std::collections::HashMap;

use deskwire::oa1::remote_bash::exit_marker;
use deskwire::oa1::{Event as Oa1Event, Responder};
use deskwire::rexd::{
    Event, ExecKillParams, ExecStartParams, Program, Request, Response, SessionOpenParams, Signal,
};
use mio::{Registry, Token};

use crate::service::{Service, ServiceOutput, Settings};

/// One request being executed.
#[derive(Debug)]
struct Running {
    request_id: String,
    /// Output bytes passed to the server so far.
    bytes: usize,
    /// Killed because the output passed the cap (the end is then a normal, truncated finish).
    capped: bool,
    /// The bytes of a UTF-8 sequence cut by a read, held for the next one.
    partial: Vec<u8>,
    /// Whether the output so far ends with a newline (or is empty).
    at_line_start: bool,
}

impl Running {
    /// The text of `bytes` read from the command: sequences cut between reads are joined,
    /// invalid bytes become U+FFFD.
    fn decode(&mut self, bytes: &[u8]) -> String {
        let mut data = std::mem::take(&mut self.partial);
        data.extend_from_slice(bytes);
        let keep = incomplete_tail(&data);
        self.partial = data.split_off(data.len() - keep);
        let text = String::from_utf8_lossy(&data).into_owned();
        if let Some(last) = text.chars().last() {
            self.at_line_start = last == '\n';
        }
        text
    }
}

/// How many bytes at the end of `data` start a UTF-8 sequence that the next read may complete.
fn incomplete_tail(data: &[u8]) -> usize {
    for back in 1..=data.len().min(3) {
        let b = data[data.len() - back];
        if b & 0xC0 != 0x80 {
            let need = match b {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => 1,
            };
            return if need > back { back } else { 0 };
        }
    }
    0
}

/// What an [`Executor`] runs with.
#[derive(Debug, Clone, Copy)]
pub struct ExecutorConfig {
    /// How long a command may run.
    pub timeout_ms: u64,
    /// Output bytes kept (the OA1 message cap); one byte more ends the command.
    pub max_output_bytes: usize,
    /// End the output of a command that did not exit 0 with a line saying how it ended
    /// (`[exit code: 1]`, `[signal: KILL]`; see `deskwire::oa1::remote_bash::exit_marker`).
    pub exit_marker: bool,
}

/// The `RemoteBash` executor.
#[derive(Debug)]
pub struct Executor {
    service: Service,
    session: String,
    config: ExecutorConfig,
    /// By process id.
    running: HashMap<String, Running>,
    /// Request id -> process id.
    by_request: HashMap<String, String>,
    /// Service calls in flight: handle -> request id.
    starting: HashMap<u64, String>,
    next_handle: u64,
}

/// Why an executor could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutorError {
    /// The service refused the internal session (no roots, …).
    #[error("cannot open the executor's session: {0}")]
    Session(String),
}

impl Executor {
    /// An executor over a service with `settings` (shell is enabled for it: `RemoteBash` is a
    /// shell command by definition), registering children in `registry`.
    pub fn new(
        mut settings: Settings,
        registry: Registry,
        config: ExecutorConfig,
    ) -> Result<Executor, ExecutorError> {
        settings.allow_shell = true;
        settings.limits.hard_timeout_ms = settings.limits.hard_timeout_ms.max(config.timeout_ms);
        settings.limits.max_output_bytes = config.max_output_bytes as u64 + 1;
        settings.limits.max_processes_per_session = settings
            .limits
            .max_processes_per_session
            .max(deskwire::oa1::Config::new("#x", "x").max_streams as u64);
        let mut service = Service::new(settings, registry);
        service.call(
            0,
            0,
            Request::SessionOpen(SessionOpenParams {
                client_name: "oa1-remote-bash".into(),
                ..Default::default()
            }),
        );
        let session = match service.poll_output() {
            Some(ServiceOutput::Reply {
                result: Ok(Response::SessionOpen(r)),
                ..
            }) => r.session_id,
            Some(ServiceOutput::Reply { result: Err(e), .. }) => {
                return Err(ExecutorError::Session(e.message));
            }
            other => return Err(ExecutorError::Session(format!("{other:?}"))),
        };
        Ok(Executor {
            service,
            session,
            config,
            running: HashMap::new(),
            by_request: HashMap::new(),
            starting: HashMap::new(),
            next_handle: 0,
        })
    }

    /// Requests being executed.
    pub fn active(&self) -> usize {
        self.running.len() + self.starting.len()
    }

    /// Starts `command` for request `id`.
    pub fn start(&mut self, now: u64, id: &str, command: &str) {
        self.next_handle += 1;
        self.starting.insert(self.next_handle, id.to_owned());
        // Merge stderr into stdout at the source so the interleaving is the command's own.
        let program = Program::shell(format!("exec 2>&1\n{command}"));
        self.service.call(
            now,
            self.next_handle,
            Request::ExecStart(ExecStartParams {
                session_id: self.session.clone(),
                program,
                timeout_ms: Some(self.config.timeout_ms),
                ..Default::default()
            }),
        );
    }

    /// Kills the command of request `id` (an OA1 `CANCEL`); its end is not reported.
    pub fn cancel(&mut self, now: u64, id: &str) {
        let Some(process) = self.by_request.remove(id) else {
            return;
        };
        self.running.remove(&process);
        self.kill(now, &process);
    }

    /// Kills every command (the link their answers would go to is gone); their ends are not
    /// reported.
    pub fn cancel_all(&mut self, now: u64) {
        let ids: Vec<String> = self.by_request.keys().cloned().collect();
        for id in ids {
            self.cancel(now, &id);
        }
    }

    fn kill(&mut self, now: u64, process: &str) {
        self.next_handle += 1;
        self.service.call(
            now,
            self.next_handle,
            Request::ExecKill(ExecKillParams {
                session_id: self.session.clone(),
                process_id: process.to_owned(),
                signal: Signal::Kill,
            }),
        );
    }

    /// Readiness of a service token.
    pub fn handle_event(&mut self, now: u64, token: Token, readable: bool, writable: bool) {
        self.service.handle_event(now, token, readable, writable);
    }

    /// The service's next timer.
    pub fn next_deadline(&self) -> Option<u64> {
        self.service.next_deadline()
    }

    /// Whether output is waiting to be read (poll without sleeping then).
    pub fn wants_pump(&self) -> bool {
        self.service.wants_pump()
    }

    /// Moves work both ways: the server's new requests and cancellations to the commands, the
    /// commands' output and ends to the server. Call after every input and at the deadlines.
    pub fn drive<R: Responder + ?Sized>(
        &mut self,
        now: u64,
        server: &mut R,
        events: &mut Vec<Oa1Event>,
    ) {
        for event in events.drain(..) {
            match event {
                Oa1Event::Request { id, payload, .. } => self.start(now, &id, &payload),
                Oa1Event::Cancelled { id, .. } => self.cancel(now, &id),
                _ => {}
            }
        }
        self.service.handle_timeout(now);
        self.service.pump(now, 1 << 20);
        while let Some(out) = self.service.poll_output() {
            match out {
                ServiceOutput::Reply {
                    handle,
                    result: Ok(Response::ExecStart(r)),
                } => {
                    if let Some(id) = self.starting.remove(&handle) {
                        self.by_request.insert(id.clone(), r.process_id.clone());
                        self.running.insert(
                            r.process_id,
                            Running {
                                request_id: id,
                                bytes: 0,
                                capped: false,
                                partial: Vec::new(),
                                at_line_start: true,
                            },
                        );
                    }
                }
                ServiceOutput::Reply {
                    handle,
                    result: Err(e),
                } => {
                    if let Some(id) = self.starting.remove(&handle) {
                        let _ = server.fail(now, &id, "exec_failed", &e.message);
                    }
                }
                ServiceOutput::Reply { .. } => {}
                ServiceOutput::Event(Event::ExecStdout(o) | Event::ExecStderr(o)) => {
                    let Some(run) = self.running.get_mut(o.process_id.as_ref()) else {
                        continue;
                    };
                    let bytes = o.bytes().map(|b| b.into_owned()).unwrap_or_default();
                    run.bytes += bytes.len();
                    let text = run.decode(&bytes);
                    let _ = server.send(now, &run.request_id, &text);
                    if run.bytes > self.config.max_output_bytes && !run.capped {
                        run.capped = true;
                        let process = o.process_id.into_owned();
                        self.kill(now, &process);
                    }
                }
                ServiceOutput::Event(Event::ExecExit(x)) => {
                    let Some(mut run) = self.running.remove(&x.process_id) else {
                        continue;
                    };
                    self.by_request.remove(&run.request_id);
                    if !run.partial.is_empty() {
                        let partial = std::mem::take(&mut run.partial);
                        let tail = String::from_utf8_lossy(&partial);
                        let _ = server.send(now, &run.request_id, &tail);
                        run.at_line_start = tail.ends_with('\n');
                    }
                    let marker = exit_marker(x.exit_code, x.signal.as_deref())
                        .filter(|_| self.config.exit_marker && !run.capped && !x.timed_out);
                    if let Some(marker) = marker {
                        let newline = if run.at_line_start { "" } else { "\n" };
                        let _ = server.send(now, &run.request_id, &format!("{newline}{marker}\n"));
                    }
                    let _ = if x.timed_out && !run.capped {
                        let secs = self.config.timeout_ms as f64 / 1000.0;
                        server.fail(
                            now,
                            &run.request_id,
                            "timeout",
                            &format!(
                                "remote execution exceeded {secs}s, this remote's limit for a \
                                 command (rexd --timeout-sec)"
                            ),
                        )
                    } else {
                        server.finish(now, &run.request_id)
                    };
                }
                ServiceOutput::Event(Event::ExecError(x)) => {
                    if let Some(run) = self.running.remove(&x.process_id) {
                        self.by_request.remove(&run.request_id);
                        let _ = server.fail(now, &run.request_id, "spawn_failed", &x.message);
                    }
                }
                ServiceOutput::Event(_) => {}
            }
        }
    }

    /// Ends every command (the host is shutting down).
    pub fn shutdown(&mut self, now: u64) {
        self.service
            .shutdown(now, crate::service::SessionEnd::Shutdown);
    }
}
