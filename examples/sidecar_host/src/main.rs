//! Spawns a Python sidecar and drives it with the core's sidecar peer
//! (`deskwire::jsonrpc::Peer<Sidecar>` and the spec's per-method timeouts): `health.ping`, a
//! `training.start` that reports progress, a call that times out, an error answer, and
//! `lifecycle.shutdown`. Exits 0 when every step went as the spec says.
//!
//! ```sh
//! cargo run -p deskwire-sidecar-host -- [PYTHON] [SIDECAR_SCRIPT]
//! ```
//!
//! The defaults are `python3` (or `$DESKWIRE_PYTHON`) and `examples/sidecar.py`; the Python
//! must have the `deskwire` package installed.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use deskwire::jsonrpc::{
    CallError, Output, Peer, PeerConfig, PeerEvent, RawJson, Sidecar, TimeoutPolicy, TimeoutRule,
};
use deskwire::sidecar::{Progress, TrainingStartResult};
use serde_json::{Value, json};

/// The child, its stdin, and its stdout as chunks from a reader thread (`None`: EOF).
struct Host {
    child: Child,
    stdin: ChildStdin,
    stdout: Receiver<Option<Vec<u8>>>,
    peer: Peer<Sidecar>,
    clock: Instant,
}

impl Host {
    fn spawn(python: &str, script: &str) -> Result<Host, String> {
        let mut child = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {python} {script}: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let mut stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(None);
                        return;
                    }
                    Ok(n) => {
                        if tx.send(Some(buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        // The spec's timeouts, with inference.complete cut to 1 s so the demo's slow call
        // times out quickly.
        let mut timeouts = TimeoutPolicy::sidecar();
        timeouts.rules.push(TimeoutRule {
            prefix: "inference.complete".into(),
            timeout_ms: 1_000,
            max_total_ms: 1_000,
        });
        let config = PeerConfig {
            timeouts,
            ..PeerConfig::default()
        };
        Ok(Host {
            child,
            stdin,
            stdout: rx,
            peer: Peer::new(Sidecar, config, 7),
            clock: Instant::now(),
        })
    }

    fn now(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    /// Calls `method` and pumps until its answer; progress events go to `on_progress`.
    fn call(
        &mut self,
        method: &str,
        params: Value,
        mut on_progress: impl FnMut(&RawJson),
    ) -> Result<Result<RawJson, CallError>, String> {
        let params = RawJson::to_raw(&params).map_err(|e| e.to_string())?;
        let id = self
            .peer
            .call(self.now(), method, Some(params), 0)
            .map_err(|e| e.to_string())?;
        loop {
            let deadline = loop {
                match self.peer.poll_output(self.now()) {
                    Output::Transmit(bytes) => self
                        .stdin
                        .write_all(&bytes)
                        .and_then(|()| self.stdin.flush())
                        .map_err(|e| format!("writing to the sidecar: {e}"))?,
                    Output::Event(PeerEvent::Response {
                        id: got, result, ..
                    }) if got == id => {
                        return Ok(Ok(result));
                    }
                    Output::Event(PeerEvent::Failed { id: got, error, .. }) if got == id => {
                        return Ok(Err(error));
                    }
                    Output::Event(PeerEvent::Progress {
                        id: got, progress, ..
                    }) if got == id => on_progress(&progress),
                    Output::Event(other) => eprintln!("host: {other:?}"),
                    Output::Timeout(at) => break at,
                }
            };
            let wait = Duration::from_millis(deadline.saturating_sub(self.now()).max(1));
            match self.stdout.recv_timeout(wait) {
                Ok(Some(bytes)) => self.peer.handle_bytes(self.now(), &bytes),
                Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("the sidecar closed its stdout while {method} ran"));
                }
                Err(RecvTimeoutError::Timeout) => self.peer.handle_timeout(self.now()),
            }
        }
    }
}

fn check(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        println!("ok   {what}");
        Ok(())
    } else {
        Err(format!("FAILED {what}"))
    }
}

fn run(python: &str, script: &str) -> Result<(), String> {
    let mut host = Host::spawn(python, script)?;
    let pong = host.call("health.ping", json!({}), |_| {})?;
    let pong: Value = serde_json::from_str(pong.map_err(|e| format!("{e:?}"))?.get())
        .map_err(|e| e.to_string())?;
    check(pong["status"] == "ok", &format!("health.ping -> {pong}"))?;

    let mut epochs = Vec::new();
    let trained = host.call(
        "training.start",
        json!({"model_id": "npc-tuned", "dataset_path": "/tmp/data.jsonl", "config": {"max_epochs": 3}}),
        |p| {
            if let Ok(progress) = Progress::parse(p) {
                println!("     progress: epoch {:?} of {:?}", progress.epoch, progress.total_epochs);
                epochs.extend(progress.epoch);
            }
        },
    )?;
    let trained: TrainingStartResult =
        serde_json::from_str(trained.map_err(|e| format!("{e:?}"))?.get())
            .map_err(|e| format!("training.start result: {e}"))?;
    check(
        epochs == [1, 2, 3] && trained.model_path.ends_with("npc-tuned"),
        &format!(
            "training.start: progress for epochs {epochs:?}, model at {}",
            trained.model_path
        ),
    )?;

    let slow = host.call(
        "inference.complete",
        json!({"prompt": "too slow", "model_id": "default-llm", "delay_sec": 3}),
        |_| {},
    )?;
    check(
        matches!(slow, Err(CallError::Timeout)),
        &format!("inference.complete past its 1 s timeout -> {slow:?}"),
    )?;

    let missing = host.call("model.load", json!({"model_id": "nope"}), |_| {})?;
    let code = match &missing {
        Err(CallError::Remote(e)) => e.code.to_string(),
        other => format!("{other:?}"),
    };
    check(
        code == "MODEL_NOT_FOUND",
        &format!("model.load of an unknown model -> {code}"),
    )?;

    let bye = host.call("lifecycle.shutdown", json!({}), |_| {})?;
    let bye: Value = serde_json::from_str(bye.map_err(|e| format!("{e:?}"))?.get())
        .map_err(|e| e.to_string())?;
    check(
        bye["status"] == "shutting_down",
        &format!("lifecycle.shutdown -> {bye}"),
    )?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = host.child.try_wait().map_err(|e| e.to_string())? {
            return check(status.success(), &format!("the sidecar exited ({status})"));
        }
        if Instant::now() > deadline {
            let _ = host.child.kill();
            let _ = host.child.wait();
            return Err("the sidecar did not exit after lifecycle.shutdown".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let python = args
        .next()
        .or_else(|| std::env::var("DESKWIRE_PYTHON").ok())
        .unwrap_or_else(|| "python3".into());
    let script = args
        .next()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../sidecar.py").to_owned());
    if let Err(e) = run(&python, &script) {
        eprintln!("sidecar-host: {e}");
        std::process::exit(1);
    }
}
