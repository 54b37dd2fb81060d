//! A test client: spawns the real `rexd` binary over pipes and speaks NDJSON JSON-RPC to it.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

pub const WAIT: Duration = Duration::from_secs(30);

pub struct Daemon {
    pub child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    next_id: i64,
    backlog: VecDeque<Value>,
}

impl Daemon {
    /// `rexd --stdio` with these arguments (roots, config, …).
    pub fn spawn(args: &[&str]) -> Daemon {
        Daemon::spawn_env(args, &[])
    }

    /// [`Daemon::spawn`] with these environment variables set for rexd.
    pub fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rexd"))
            .arg("--stdio")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn rexd");
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
        Daemon {
            stdin: child.stdin.take(),
            child,
            rx,
            next_id: 1000,
            backlog: VecDeque::new(),
        }
    }

    /// Rooted at `root`, shell allowed.
    pub fn rooted(root: &Path) -> Daemon {
        Daemon::spawn(&["--root", root.to_str().unwrap(), "--allow-shell"])
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn recv(&mut self, timeout: Duration) -> Option<Value> {
        match self.rx.recv_timeout(timeout) {
            Ok(v) => Some(v),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Sends a request and returns the whole response message (events seen meanwhile are kept).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&line.to_string());
        self.response_to(&json!(id))
    }

    /// Waits for the response with this id.
    pub fn response_to(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .recv(left)
                .unwrap_or_else(|| panic!("no response to {id} within {WAIT:?}"));
            if v.get("method").is_some() {
                self.backlog.push_back(v);
            } else if v.get("id") == Some(id) {
                return v;
            } else {
                self.backlog.push_back(v);
            }
        }
    }

    /// A successful call's result (panics on an error response).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let r = self.request(method, params.clone());
        match r.get("result") {
            Some(v) => v.clone(),
            None => panic!("{method} {params} failed: {r}"),
        }
    }

    /// A failed call's error object (panics on success).
    pub fn call_err(&mut self, method: &str, params: Value) -> Value {
        let r = self.request(method, params.clone());
        match r.get("error") {
            Some(v) => v.clone(),
            None => panic!("{method} {params} should have failed: {r}"),
        }
    }

    pub fn open_session(&mut self) -> String {
        self.open_session_with(json!({"client_name": "test"}))
    }

    pub fn open_session_with(&mut self, params: Value) -> String {
        let r = self.call("session.open", params);
        assert_eq!(r["protocol"], "rexd/1");
        r["session_id"].as_str().unwrap().to_owned()
    }

    /// The next batch answer, a JSON array (from the backlog first).
    pub fn next_array(&mut self, timeout: Duration) -> Option<Value> {
        if let Some(i) = self.backlog.iter().position(Value::is_array) {
            return self.backlog.remove(i);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self.recv(left)?;
            if v.is_array() {
                return Some(v);
            }
            self.backlog.push_back(v);
        }
    }

    /// What was read but not yet asked for (responses and events).
    pub fn backlog(&self) -> &VecDeque<Value> {
        &self.backlog
    }

    /// The next notification (from the backlog first).
    pub fn next_event(&mut self, timeout: Duration) -> Option<Value> {
        if let Some(i) = self.backlog.iter().position(|v| v.get("method").is_some()) {
            return self.backlog.remove(i);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self.recv(left)?;
            if v.get("method").is_some() {
                return Some(v);
            }
            self.backlog.push_back(v);
        }
    }

    /// Collects a process's output events until its terminal event; checks the seq order and
    /// that nothing of this process comes after the end.
    pub fn collect(&mut self, process_id: &str) -> Collected {
        self.collect_after(process_id, 0)
    }

    /// [`Daemon::collect`] when the stdout events up to `seq_out` were already taken.
    pub fn collect_after(&mut self, process_id: &str, seq_out: u64) -> Collected {
        let mut c = Collected {
            last_seq_out: seq_out,
            ..Default::default()
        };
        let mut kept = Vec::new();
        loop {
            let ev = self
                .next_event(WAIT)
                .unwrap_or_else(|| panic!("no exit for {process_id}"));
            let p = &ev["params"];
            let method = ev["method"].as_str().unwrap().to_owned();
            if p["process_id"] != process_id {
                kept.push(ev);
                continue;
            }
            match method.as_str() {
                "exec.stdout" | "exec.stderr" => {
                    let seq = p["seq"].as_u64().unwrap();
                    let (buf, last) = if method == "exec.stdout" {
                        (&mut c.stdout, &mut c.last_seq_out)
                    } else {
                        (&mut c.stderr, &mut c.last_seq_err)
                    };
                    assert_eq!(seq, *last + 1, "seq must grow by one: {ev}");
                    *last = seq;
                    buf.extend_from_slice(&data_bytes(p));
                    c.events += 1;
                }
                "exec.exit" | "exec.error" => {
                    c.exit = ev.clone();
                    break;
                }
                other => panic!("unexpected event {other}: {ev}"),
            }
        }
        // Put back what belonged to others, in order.
        for ev in kept.into_iter().rev() {
            self.backlog.push_front(ev);
        }
        c
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return,
                _ if Instant::now() > deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return;
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

#[derive(Debug, Default)]
pub struct Collected {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit: Value,
    pub events: usize,
    last_seq_out: u64,
    last_seq_err: u64,
}

impl Collected {
    pub fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn err(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

pub fn data_bytes(p: &Value) -> Vec<u8> {
    let data = p["data"].as_str().unwrap();
    match p["encoding"].as_str() {
        Some("base64") => base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
        // A session that negotiated compression: base64 of one zstd frame.
        Some("zstd") => zstd::stream::decode_all(
            &base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap()[..],
        )
        .unwrap(),
        _ => data.as_bytes().to_vec(),
    }
}

/// Whether a process with this pid exists (zombies count as gone).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        }
        Err(_) => false,
    }
}

/// One process of `/proc/PID/stat`: the fields these tests read.
pub struct ProcStat {
    pub pid: i32,
    /// `R`, `S`, `Z` (ended, not reaped yet), ...
    pub state: String,
    pub ppid: i32,
    pub pgrp: i32,
}

/// Every process this test can see.
pub fn processes() -> Vec<ProcStat> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command's name: state ppid pgrp ...
        let rest: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        if let [state, ppid, pgrp, ..] = rest[..]
            && let (Ok(ppid), Ok(pgrp)) = (ppid.parse(), pgrp.parse())
        {
            out.push(ProcStat {
                pid,
                state: state.to_owned(),
                ppid,
                pgrp,
            });
        }
    }
    out
}

/// Pids of live processes in process group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|p| p.state != "Z" && p.pgrp == pgid)
        .map(|p| p.pid)
        .collect()
}

/// Pids of the zombie children of `pid`: ended, and not reaped by it.
pub fn zombie_children(pid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|p| p.state == "Z" && p.ppid == pid)
        .map(|p| p.pid)
        .collect()
}

/// Pids of the live descendants of `pid` (children, theirs, …).
pub fn descendants(pid: i32) -> Vec<i32> {
    let parent_of: Vec<(i32, i32)> = processes()
        .into_iter()
        .filter(|p| p.state != "Z")
        .map(|p| (p.pid, p.ppid))
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(child, parent) in &parent_of {
            if parent == p && !out.contains(&child) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}
