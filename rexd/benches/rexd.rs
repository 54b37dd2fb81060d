//! rexd against the baselines the issue names:
//! - exec round trip of `true` through `rexd --stdio` vs spawning `sh -c true` directly;
//! - 200 MB of stdout through `exec.stdout` events vs the same bytes through a raw pipe;
//! - `fs.read` of a 10 MiB file vs `cat`.
//!
//! `cargo bench -p rexd --bench rexd -- --warm-up-time 1 --measurement-time 3`

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const STREAM_BYTES: u64 = 200 * 1024 * 1024;
const FILE_BYTES: usize = 10 * 1024 * 1024;

struct Daemon {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<std::process::ChildStdout>,
    line: Vec<u8>,
    id: u64,
    /// The session `start` opened.
    session: String,
}

impl Daemon {
    fn start(dir: &std::path::Path) -> Daemon {
        let conf = dir.join("rexd.toml");
        std::fs::write(
            &conf,
            format!(
                "[limits]\nmax_output_bytes = {}\nmax_file_read_bytes = {}\n[security]\nallow_shell = true\n[[security.allowed_roots]]\npath = {:?}\n",
                STREAM_BYTES * 2,
                FILE_BYTES * 2,
                dir
            ),
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_rexd"))
            .args(["--stdio", "--config", conf.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut d = Daemon {
            stdin: child.stdin.take().unwrap(),
            out: BufReader::with_capacity(1 << 20, child.stdout.take().unwrap()),
            child,
            line: Vec::new(),
            id: 0,
            session: String::new(),
        };
        d.send("session.open", r#"{"client_name":"bench"}"#);
        d.until(b"\"result\"");
        let opened: serde_json::Value = serde_json::from_slice(&d.line).unwrap();
        d.session = opened["result"]["session_id"].as_str().unwrap().to_owned();
        d
    }

    fn send(&mut self, method: &str, params: &str) {
        self.id += 1;
        writeln!(
            self.stdin,
            r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":{params}}}"#,
            self.id
        )
        .unwrap();
    }

    /// Reads lines until one contains `marker`; returns the bytes read.
    fn until(&mut self, marker: &[u8]) -> usize {
        let mut total = 0;
        loop {
            self.line.clear();
            let n = self.out.read_until(b'\n', &mut self.line).unwrap();
            assert!(n > 0, "rexd closed its stdout");
            total += n;
            // The marker (method or result key) is near the start of every line rexd writes;
            // scanning whole 64 KiB event lines would measure this client, not rexd.
            let head = &self.line[..self.line.len().min(64)];
            if head.windows(marker.len()).any(|w| w == marker) {
                return total;
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path());

    let mut g = c.benchmark_group("exec_true");
    g.bench_function("rexd_exec_start_to_exit", |b| {
        b.iter(|| {
            let params = format!(r#"{{"session_id":"{}","argv":["true"]}}"#, d.session);
            d.send("exec.start", &params);
            d.until(b"\"exec.exit\"");
        })
    });
    g.bench_function("spawn_sh_c_true", |b| {
        b.iter(|| {
            assert!(
                Command::new("sh")
                    .args(["-c", "true"])
                    .status()
                    .unwrap()
                    .success()
            );
        })
    });
    g.finish();

    let producer = format!("head -c {STREAM_BYTES} /dev/zero | tr '\\0' a");
    let mut g = c.benchmark_group("stream_200MB");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(STREAM_BYTES));
    g.bench_function("rexd_exec_stdout_events", |b| {
        let params =
            serde_json::json!({"session_id": d.session, "shell": true, "command": producer})
                .to_string();
        b.iter(|| {
            d.send("exec.start", &params);
            d.until(b"\"exec.exit\"");
        })
    });
    g.bench_function("raw_pipe", |b| {
        b.iter(|| {
            let mut child = Command::new("sh")
                .args(["-c", &producer])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut out = child.stdout.take().unwrap();
            let mut buf = vec![0u8; 1 << 16];
            let mut n = 0u64;
            loop {
                let k = out.read(&mut buf).unwrap();
                if k == 0 {
                    break;
                }
                n += k as u64;
            }
            assert_eq!(n, STREAM_BYTES);
            child.wait().unwrap();
        })
    });
    g.finish();

    let file = dir.path().join("ten.txt");
    std::fs::write(&file, vec![b'a'; FILE_BYTES]).unwrap();
    let mut g = c.benchmark_group("read_10MiB");
    g.throughput(Throughput::Bytes(FILE_BYTES as u64));
    g.bench_function("rexd_fs_read", |b| {
        b.iter(|| {
            let params = format!(r#"{{"session_id":"{}","path":"ten.txt"}}"#, d.session);
            d.send("fs.read", &params);
            let n = d.until(b"\"result\"");
            assert!(n > FILE_BYTES);
        })
    });
    g.bench_function("cat", |b| {
        b.iter(|| {
            let out = Command::new("cat").arg(&file).output().unwrap();
            assert_eq!(out.stdout.len(), FILE_BYTES);
        })
    });
    g.finish();
}

criterion_group!(rexd_benches, benches);
criterion_main!(rexd_benches);
