//! The output of processes in sessions without an event stream (`POST /rpc`): kept, within a
//! bound per session, until an `exec.wait` with `output: true` takes it. Without this a client
//! of pointed calls could start a command and never see what it printed.

use std::collections::HashMap;

use deskwire::rexd::data::{self, Encoding};
use deskwire::rexd::{CollectedOutput, Event};

/// One process's output not yet taken.
#[derive(Default)]
struct Streams {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    dropped: u64,
}

/// One session's collected output, by process.
pub(super) struct Collected {
    by_process: HashMap<String, Streams>,
    /// Bytes held for all its processes.
    held: usize,
    /// The most it holds; past it, output is counted as dropped.
    max: usize,
}

impl Collected {
    pub(super) fn new(max: usize) -> Collected {
        Collected {
            by_process: HashMap::new(),
            held: 0,
            max,
        }
    }

    /// Keeps an `exec.stdout` / `exec.stderr` event's bytes; other events are not output.
    pub(super) fn add(&mut self, event: Event<'static>) {
        let (out, is_err) = match event.into_string_payload() {
            Event::ExecStdout(o) => (o, false),
            Event::ExecStderr(o) => (o, true),
            _ => return,
        };
        let bytes = match crate::compress::decode_bounded(
            &out.data,
            out.encoding,
            true,
            crate::compress::MAX_INFLATED,
        ) {
            Ok(b) => b.into_owned(),
            Err(e) => {
                crate::log::warn(&format!("output of {} not kept: {e}", out.process_id));
                return;
            }
        };
        let streams = self
            .by_process
            .entry(out.process_id.into_owned())
            .or_default();
        let room = self.max.saturating_sub(self.held);
        let kept = bytes.len().min(room);
        streams.dropped += (bytes.len() - kept) as u64;
        let stream = if is_err {
            &mut streams.stderr
        } else {
            &mut streams.stdout
        };
        stream.extend_from_slice(&bytes[..kept]);
        self.held += kept;
    }

    /// Takes what `process` wrote since the last take (empty streams when nothing came).
    pub(super) fn take(&mut self, process: &str) -> CollectedOutput {
        let s = self.by_process.remove(process).unwrap_or_default();
        self.held -= s.stdout.len() + s.stderr.len();
        let text = |b: &[u8]| std::str::from_utf8(b).ok().map(str::to_owned);
        match (text(&s.stdout), text(&s.stderr)) {
            (Some(stdout), Some(stderr)) => CollectedOutput {
                stdout,
                stderr,
                encoding: Encoding::Utf8,
                dropped_bytes: s.dropped,
            },
            _ => CollectedOutput {
                stdout: data::encode_as(&s.stdout, Encoding::Base64).into_owned(),
                stderr: data::encode_as(&s.stderr, Encoding::Base64).into_owned(),
                encoding: Encoding::Base64,
                dropped_bytes: s.dropped,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deskwire::rexd::ExecOutput;

    fn out(process: &str, data: &[u8], is_err: bool) -> Event<'static> {
        let (encoding, text) = data::encode(data);
        let o = ExecOutput {
            session_id: "s".into(),
            process_id: process.to_owned().into(),
            seq: 1,
            data: text.into_owned().into(),
            encoding,
            ..ExecOutput::default()
        };
        match is_err {
            true => Event::ExecStderr(o),
            false => Event::ExecStdout(o),
        }
    }

    #[test]
    fn output_is_kept_per_process_taken_once_and_bounded() {
        let mut c = Collected::new(10);
        c.add(out("p1", b"hello ", false));
        c.add(out("p2", b"x", true));
        c.add(out("p1", b"world", false));
        let p1 = c.take("p1");
        // 10 bytes kept in all: p1 gets "hello " and 3 of "world"; 2 are dropped.
        assert_eq!((p1.stdout.as_str(), p1.stderr.as_str()), ("hello wor", ""));
        assert_eq!((p1.encoding, p1.dropped_bytes), (Encoding::Utf8, 2));
        // Taken: the next take starts empty, and the room is back.
        assert_eq!(c.take("p1"), CollectedOutput::default());
        c.add(out("p1", b"\xff\x00", false));
        let p1 = c.take("p1");
        assert_eq!(
            (p1.stdout.as_str(), p1.encoding),
            ("/wA=", Encoding::Base64)
        );
        assert_eq!(c.take("p2").stderr, "x");
    }
}
