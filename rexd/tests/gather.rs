//! Output gathering: a stream that made an event this millisecond waits for the next one (or
//! for 64 KiB) before its next event, so a fast writer's output travels in large events. The
//! first output after a quiet millisecond, and a process's answer to input, are read at once.
//!
//! Driven through [`Service`] with the test's own clock, so the millisecond is exact; the
//! children are real processes.

use std::time::{Duration, Instant};

use deskwire::rexd::{Event, Request, Response};
use mio::{Events, Poll, Token};
use rexd::service::{Service, ServiceOutput, Settings, TOKEN_BASE};
use serde_json::{Value, json};

struct Host {
    poll: Poll,
    events: Events,
    service: Service,
    session: String,
    _root: tempfile::TempDir,
}

impl Host {
    fn new() -> Host {
        let root = tempfile::tempdir().unwrap();
        let mut settings = Settings::for_roots(&[root.path().to_owned()]).unwrap();
        settings.allow_shell = true;
        let poll = Poll::new().unwrap();
        let service = Service::new(settings, poll.registry().try_clone().unwrap());
        let mut host = Host {
            poll,
            events: Events::with_capacity(64),
            service,
            session: String::new(),
            _root: root,
        };
        host.session = match host.call(0, "session.open", json!({"client_name": "gather"})) {
            Response::SessionOpen(r) => r.session_id,
            other => panic!("{other:?}"),
        };
        host
    }

    fn call(&mut self, now: u64, method: &str, params: Value) -> Response {
        let params = serde_json::value::to_raw_value(&params).unwrap();
        let request = Request::parse(method, Some(&params)).unwrap();
        self.service.call(now, 1, request);
        loop {
            match self.service.poll_output() {
                Some(ServiceOutput::Reply { result, .. }) => return result.unwrap(),
                Some(ServiceOutput::Event(_)) => {}
                None => panic!("no answer to {method}"),
            }
        }
    }

    fn start(&mut self, now: u64, command: &str) -> String {
        let params = json!({"session_id": self.session, "command": command, "shell": true});
        match self.call(now, "exec.start", params) {
            Response::ExecStart(r) => r.process_id,
            other => panic!("{other:?}"),
        }
    }

    fn input(&mut self, now: u64, process: &str, text: &str) {
        let params = json!({"session_id": self.session, "process_id": process, "data": text});
        self.call(now, "exec.input", params);
    }

    /// Waits (real time) until a child's stream is readable, then lets the writer finish
    /// its burst.
    fn wait_readable(&mut self, now: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.poll
                .poll(&mut self.events, Some(Duration::from_millis(20)))
                .unwrap();
            let mut readable = false;
            for e in self.events.iter() {
                let Token(t) = e.token();
                if t >= TOKEN_BASE {
                    self.service.handle_event(
                        now,
                        e.token(),
                        e.is_readable() || e.is_read_closed(),
                        e.is_writable() || e.is_write_closed(),
                    );
                    readable |= e.is_readable();
                }
            }
            if readable {
                std::thread::sleep(Duration::from_millis(100));
                return;
            }
            assert!(Instant::now() < deadline, "the child wrote nothing");
        }
    }

    /// One turn of a host at `now`: timers, then output; the stdout bytes of the events made.
    fn turn(&mut self, now: u64) -> Vec<usize> {
        self.service.handle_timeout(now);
        self.service.pump(now, 1 << 20);
        let mut sizes = Vec::new();
        while let Some(out) = self.service.poll_output() {
            if let ServiceOutput::Event(Event::ExecStdout(o)) = out {
                sizes.push(o.data.len());
            }
        }
        sizes
    }
}

#[test]
fn a_burst_right_after_an_event_waits_for_the_next_millisecond() {
    let mut h = Host::new();
    h.start(10, "printf a; sleep 0.4; printf b; sleep 0.4; printf c");
    h.wait_readable(10);
    assert_eq!(h.turn(10), [1], "the first output is read at once");
    h.wait_readable(10);
    // "b" came in the millisecond of the last event: held, and nothing to pump meanwhile.
    assert_eq!(h.turn(10), Vec::<usize>::new());
    assert!(!h.service.wants_pump());
    assert_eq!(h.service.next_deadline(), Some(11));
    assert_eq!(h.turn(11), [1], "read once the millisecond ended");
    h.wait_readable(20);
    assert_eq!(h.turn(20), [1], "after a quiet millisecond, read at once");
}

#[test]
fn a_burst_of_64_kib_is_not_held() {
    let mut h = Host::new();
    h.start(
        10,
        "printf a; sleep 0.4; head -c 70000 /dev/zero | tr '\\0' x",
    );
    h.wait_readable(10);
    assert_eq!(h.turn(10), [1]);
    h.wait_readable(10);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        h.turn(10).iter().sum::<usize>(),
        70000,
        "a full pipe's worth goes at once"
    );
}

#[test]
fn the_answer_to_input_is_read_at_once() {
    let mut h = Host::new();
    let cat = h.start(10, "cat");
    h.input(10, &cat, "x");
    h.wait_readable(10);
    assert_eq!(h.turn(10), [1]);
    // The answer to the next line comes in the same millisecond: input means it is awaited.
    h.input(10, &cat, "y");
    h.wait_readable(10);
    assert_eq!(h.turn(10), [1]);
}
