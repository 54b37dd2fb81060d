//! Gateway envelopes from arbitrary bytes, and a whole `Gateway` fed arbitrary messages.
//!
//! - `Envelope::parse` never panics; a parsed envelope written back parses to the same envelope.
//! - `redact_line` never lets the `auth` token through.
//! - A `Gateway` takes each line raw and spliced into a valid, authenticated request (op picked
//!   by the line), with executor calls and time steps between, without panicking, and stays
//!   within its limits (jobs remembered, queued outputs).
#![no_main]

use deskwire::gateway::ops::Level;
use deskwire::gateway::secret::redact_line;
use deskwire::gateway::{
    Artifacts, Config, ConnId, Envelope, ErrorBody, ErrorCode, Gateway, JobState, Output, Token,
};
use libfuzzer_sys::fuzz_target;

const TOKEN: &str = "fuzz-token-XYZ";
const OPS: [&str; 10] = [
    "gateway.ping",
    "jobs.create",
    "jobs.start",
    "jobs.status",
    "jobs.stream",
    "jobs.result",
    "jobs.cancel",
    "approvals.list",
    "approvals.approve",
    "approvals.deny",
];

fuzz_target!(|data: &[u8]| {
    if let Ok(env) = Envelope::parse(data) {
        let text = env.to_value().to_string();
        assert_eq!(Envelope::parse(text.as_bytes()).as_ref(), Ok(&env));
    }
    let _ = redact_line(data);

    let mut config = Config::new(Token::new(TOKEN));
    config.max_jobs = 4;
    config.max_running = 2;
    config.max_queued_outputs = 64;
    config.max_subscriptions = 4;
    config.max_approvals_per_job = 3;
    let mut gw = Gateway::new(config, 0, [1; 32]).unwrap();
    let mut now = 0u64;
    let jobs = ["a", "b", "c", "d", "e"];
    for (n, line) in data.split(|&b| b == b'\n').enumerate() {
        now += 997;
        let _ = gw.handle_message(now, ConnId(n as u64 % 2), line);
        let selector = line.first().copied().unwrap_or(0) as usize;
        let job = jobs[selector % jobs.len()];
        let text = String::from_utf8_lossy(line);
        let payload = match selector % 5 {
            0 => format!(
                r#"{{"job":{{"jobId":"{job}","repo":"r","policy":{{"timeoutSec":{},"requireApprovals":{}}}}}}}"#,
                1 + selector % 7,
                selector % 2 == 0
            ),
            1 => format!(
                r#"{{"jobId":"{job}","approvalId":"appr_{}"}}"#,
                selector % 3
            ),
            2 => format!(r#"{{"jobId":"{job}"}}"#),
            3 => text.to_string(),
            _ => "{}".to_owned(),
        };
        let wrapped = format!(
            r#"{{"v":"1.0","id":"r{n}","type":"request","ts":"2026-02-18T12:00:00Z","op":"{}","auth":{{"token":"{TOKEN}"}},"payload":{payload}}}"#,
            OPS[selector % OPS.len()]
        );
        if !text.contains(TOKEN) {
            assert!(!redact_line(wrapped.as_bytes()).contains(TOKEN));
        }
        let _ = gw.handle_message(now, ConnId(0), wrapped.as_bytes());
        // Executor calls, picked by the second byte.
        let action = line.get(1).copied().unwrap_or(0);
        let _ = match action % 9 {
            0 => gw.review_ready(now, job, Artifacts::default()),
            1 => gw.complete(now, job, None),
            2 => gw.fail(now, job, ErrorBody::new(ErrorCode::Internal, "x")),
            3 => gw.roll_back(now, job),
            4 => gw
                .request_approval(job, Some(&format!("appr_{}", action % 3)), "shell", &text)
                .map(|_| ()),
            5 => gw.log(job, Level::Info, &text),
            6 => gw.set_progress(job, Some("step"), Some(f64::from(action) / 255.0)),
            7 => gw.transition(now, job, JobState::ALL[usize::from(action) % 9]),
            _ => {
                now += u64::from(action) * 100;
                gw.handle_timeout(now);
                Ok(())
            }
        };
        if n % 3 == 0 {
            gw.close_connection(ConnId(1));
        }
        assert!(gw.job_count() <= 4);
        // Bounded: input is refused past the cap; state changes add a few per job at most.
        assert!(gw.queued_outputs() <= 64 + 64, "{}", gw.queued_outputs());
        if n % 2 == 0 {
            for _ in 0..256 {
                if let Output::Timeout(_) = gw.poll_output(now) {
                    break;
                }
            }
        }
    }
});
