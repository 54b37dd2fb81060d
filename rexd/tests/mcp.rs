//! `rexd --mcp` through the real binary: the JSON-RPC ids a client may use, and cancellation
//! (issue 33 item 6). The MCP tools themselves are exercised by tests/mcp/test_rexd_mcp.py.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

struct Mcp {
    child: Child,
    stdin: ChildStdin,
    rx: Receiver<Value>,
    root: tempfile::TempDir,
}

impl Mcp {
    /// `rexd --mcp` on a fresh root, shell allowed, initialized.
    fn start() -> Mcp {
        let root = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_rexd"))
            .args(["--mcp", "--allow-shell", "--root"])
            .arg(root.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("rexd wrote a non-JSON line ({e}): {line}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let mut mcp = Mcp {
            stdin: child.stdin.take().unwrap(),
            child,
            rx,
            root,
        };
        mcp.send(
            &json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "t"}}}),
        );
        mcp.answer(&json!("init"));
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send_line(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string());
    }

    /// The next answer (a message without a method), skipping notifications.
    fn next_answer(&mut self) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer within {WAIT:?}"));
            if v.get("method").is_none() {
                return v;
            }
        }
    }

    /// The next answer, which must be to `id`.
    fn answer(&mut self, id: &Value) -> Value {
        let a = self.next_answer();
        assert!(
            &a["id"] == id,
            "not an answer to {}: {}",
            short(id),
            short(&a)
        );
        a
    }

    fn call_bash(&mut self, id: &Value, command: &str) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "bash", "arguments": {"command": command}}}));
    }

    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

/// At most 300 characters of `v`, for messages about megabyte ids.
fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}… ({} bytes)", &text[..cut], text.len()),
        None => text,
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Ids that are neither an integer, a string nor null are answered -32600 with id null (they
/// cannot be echoed), and nothing of the call runs.
#[test]
fn odd_ids_are_answered_invalid_request() {
    let mut mcp = Mcp::start();
    for odd in ["1.5", "{\"a\":1}", "[1]", "true", "1e3"] {
        mcp.send_line(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{odd},\"method\":\"tools/call\",\"params\":{{\"name\":\"bash\",\"arguments\":{{\"command\":\"echo ran\"}}}}}}"
        ));
        let a = mcp.answer(&Value::Null);
        assert_eq!(a["error"]["code"], -32600, "{odd}: {a}");
    }
    // Still serving, and no answer of those calls came in between.
    mcp.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(mcp.answer(&json!(1))["result"], json!({}));
}

/// 30 calls with 4 MiB ids took the server from 18 to 190 MB. Ids over 256 bytes of JSON are
/// refused before a process starts or anything keeps them.
#[test]
fn over_long_ids_are_refused_and_hold_nothing() {
    let mut mcp = Mcp::start();
    let big = "x".repeat(4 << 20);
    for i in 0..30 {
        mcp.call_bash(&json!(format!("{i}{big}")), "sleep 600");
    }
    for _ in 0..30 {
        let a = mcp.answer(&Value::Null);
        assert_eq!(a["error"]["code"], -32600, "{}", short(&a));
    }
    let peak = mcp.peak_rss_kib();
    assert!(peak < 96 * 1024, "peak RSS {peak} KiB");
    // An id of 256 bytes is served.
    let id = json!("i".repeat(254));
    mcp.call_bash(&id, "echo hi");
    let a = mcp.answer(&id);
    assert_eq!(a["result"]["structuredContent"]["stdout"], "hi\n", "{a}");
}

/// `notifications/cancelled` for one's own running call kills its command and, as MCP asks,
/// the call is not answered; its id is free again and the server goes on serving.
#[test]
fn a_cancelled_call_is_killed_and_its_id_freed() {
    let mut mcp = Mcp::start();
    // The command's pid is written in the root (what rexd runs may write nowhere else), where
    // the test reads it.
    let pid_file = mcp.root.path().join("pid");
    mcp.call_bash(
        &json!(7),
        &format!("echo $$ > {}; exec sleep 600", pid_file.display()),
    );
    let deadline = Instant::now() + WAIT;
    let pid: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    mcp.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 7, "reason": "test"}}),
    );
    // SAFETY: kill(pid, 0) only asks whether the process exists.
    let alive = || unsafe { libc::kill(pid, 0) } == 0;
    while alive() {
        assert!(
            Instant::now() < deadline,
            "the cancelled command still runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The next answer is the ping's: the cancelled call got none.
    mcp.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}));
    mcp.answer(&json!(8));
    // Its id is no longer in use.
    mcp.call_bash(&json!(7), "echo again");
    let a = mcp.answer(&json!(7));
    assert_eq!(a["result"]["structuredContent"]["stdout"], "again\n", "{a}");
}
