//! Raw frames negotiated at `session.open` (`docs/rexd-raw-frames.md`), against a real
//! `rexd --stdio` (read here byte by byte: a line, then the bytes it announces) and through the
//! client library, locally and over a loopback sshd: file bytes come back exact (random, text,
//! empty, across pieces), events of a command running meanwhile stay whole, a session that did
//! not ask gets exactly the old answers and `raw` refused.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use base64::Engine as _;
use deskwire::rexd::Program;
use deskwire_integration::Sshd;
use rexd::client::{Client, ConnectOptions, ExecOptions, Stream, TargetSpec};
use serde_json::{Value, json};

fn random(n: usize) -> Vec<u8> {
    deskwire_integration::random_bytes(0x2545_f491_4f6c_dd1d, n)
}

fn text(n: usize) -> Vec<u8> {
    let mut v = Vec::new();
    let mut i = 0;
    while v.len() < n {
        v.extend_from_slice(format!("line {i}: \"quoted\" \\ tab\tend\n").as_bytes());
        i += 1;
    }
    v.truncate(n);
    v
}

/// `rexd --stdio` read as a byte stream: a line, and the raw bytes after it when it says so.
struct Wire {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<Slow>,
    next_id: u64,
}

/// rexd's stdout, read at most 16 KiB at a time with `delay` before each read (a slow client:
/// rexd's output pipe fills, and its writes are partial).
struct Slow {
    inner: ChildStdout,
    delay: Option<std::time::Duration>,
}

impl Read for Slow {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some(delay) = self.delay else {
            return self.inner.read(buf);
        };
        std::thread::sleep(delay);
        let n = buf.len().min(16 * 1024);
        self.inner.read(&mut buf[..n])
    }
}

/// What came: a JSON line and the raw bytes that followed it (empty when none).
struct Frame {
    msg: Value,
    raw: Vec<u8>,
}

impl Wire {
    fn spawn(root: &Path) -> Wire {
        Wire::spawn_with(root, &[], None)
    }

    /// With more arguments, read by a client that waits `delay` before each read.
    fn spawn_with(root: &Path, args: &[&str], delay: Option<std::time::Duration>) -> Wire {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rexd"))
            .args(["--stdio", "--root", root.to_str().unwrap(), "--allow-shell"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let inner = child.stdout.take().unwrap();
        Wire {
            stdin: child.stdin.take().unwrap(),
            out: BufReader::new(Slow { inner, delay }),
            child,
            next_id: 1,
        }
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        id
    }

    fn send_line(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
    }

    /// The next line (it must be JSON), and the `raw_bytes` bytes after it for a raw answer.
    fn frame(&mut self) -> Frame {
        let mut line = Vec::new();
        self.out.read_until(b'\n', &mut line).unwrap();
        assert_eq!(line.last(), Some(&b'\n'), "the stream ended");
        let msg: Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
            panic!("not a JSON line ({e}): {}", String::from_utf8_lossy(&line))
        });
        let mut raw = Vec::new();
        let announced = msg["result"]["raw_bytes"]
            .as_u64()
            .or(msg["params"]["raw_bytes"].as_u64());
        if let Some(n) = announced {
            raw.resize(n as usize, 0);
            self.out.read_exact(&mut raw).unwrap();
        }
        Frame { msg, raw }
    }

    /// The answer to `id` (events before it are dropped).
    fn answer(&mut self, id: u64) -> Frame {
        loop {
            let f = self.frame();
            if f.msg["id"] == id {
                return f;
            }
            assert!(f.msg.get("method").is_some(), "{}", f.msg);
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Frame {
        let id = self.send(method, params);
        self.answer(id)
    }

    /// `session.open` offering raw frames; the session id.
    fn open_raw_session(&mut self) -> String {
        self.open(json!({"client_name": "raw", "raw_frames": true}))
    }

    /// `session.open` with these params; the session id.
    fn open(&mut self, params: Value) -> String {
        let open = self.call("session.open", params);
        open.msg["result"]["session_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", open.msg))
            .to_owned()
    }

    /// Runs `argv` and collects its stdout and stderr events until `exec.exit` (which must
    /// come after the last of them), and the exit's params.
    fn run(&mut self, sid: &str, argv: &[&str]) -> (Vec<Frame>, Vec<Frame>, Value) {
        self.run_with(json!({"session_id": sid, "argv": argv, "uncapped_output": true}))
    }

    /// [`Wire::run`] with these `exec.start` params; after `exec.exit`, a `session.info` call
    /// shows that no event of the process came after it.
    fn run_with(&mut self, params: Value) -> (Vec<Frame>, Vec<Frame>, Value) {
        let sid = params["session_id"].as_str().unwrap().to_owned();
        let started = self.call("exec.start", params);
        let pid = started.msg["result"]["process_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", started.msg))
            .to_owned();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        loop {
            let f = self.frame();
            if f.msg["params"]["process_id"] != pid.as_str() {
                continue;
            }
            match f.msg["method"].as_str() {
                Some("exec.stdout") => out.push(f),
                Some("exec.stderr") => err.push(f),
                Some("exec.exit") => {
                    let id = self.send("session.info", json!({"session_id": sid}));
                    loop {
                        let late = self.frame();
                        if late.msg["id"] == id {
                            break;
                        }
                        assert_ne!(
                            late.msg["params"]["process_id"], pid,
                            "after exec.exit: {}",
                            late.msg
                        );
                    }
                    return (out, err, f.msg["params"].clone());
                }
                _ => {}
            }
        }
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn root() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    (tmp, root)
}

#[test]
fn raw_reads_carry_the_bytes_after_the_line_exactly() {
    let (_tmp, root) = root();
    // Under the default max_file_read_bytes (1 MiB) to come whole; `big` is cut at it.
    let noise = random(1_000_003);
    let big = random(3 * 1024 * 1024 + 17);
    std::fs::write(root.join("big.bin"), &big).unwrap();
    let prose = text(200_000);
    std::fs::write(root.join("noise.bin"), &noise).unwrap();
    std::fs::write(root.join("prose.txt"), &prose).unwrap();
    std::fs::write(root.join("empty"), b"").unwrap();
    let mut w = Wire::spawn(&root);
    let open = w.call(
        "session.open",
        json!({"client_name": "raw", "raw_frames": true}),
    );
    assert_eq!(open.msg["result"]["raw_frames"], true, "{}", open.msg);
    let sid = open.msg["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let read = |w: &mut Wire, path: &str, range: Option<(u64, u64)>| {
        let mut p = json!({"session_id": sid, "path": path, "encoding": "raw"});
        if let Some((offset, length)) = range {
            p["offset"] = json!(offset);
            p["length"] = json!(length);
        }
        w.call("fs.read", p)
    };
    for (name, bytes) in [
        ("noise.bin", &noise),
        ("prose.txt", &prose),
        ("empty", &Vec::new()),
    ] {
        let f = read(&mut w, name, None);
        let r = &f.msg["result"];
        assert_eq!(
            (
                r["encoding"].clone(),
                r["content"].clone(),
                r["raw_bytes"].clone(),
                r["size"].clone(),
                r["truncated"].clone()
            ),
            (
                json!("raw"),
                json!(""),
                json!(bytes.len()),
                json!(bytes.len()),
                json!(false)
            ),
            "{name}"
        );
        assert!(f.raw == *bytes, "{name}: {} bytes back", f.raw.len());
    }
    // Cut at the daemon's cap: the bytes up to it, marked truncated.
    let f = read(&mut w, "big.bin", None);
    assert_eq!(
        (
            f.msg["result"]["raw_bytes"].clone(),
            f.msg["result"]["truncated"].clone()
        ),
        (json!(1 << 20), json!(true))
    );
    assert!(f.raw == big[..1 << 20]);
    // Ranges: inside the file, across the end, past the end.
    let n = noise.len() as u64;
    for (offset, length) in [(1, 65_536), (n - 10, 100), (n, 5), (n + 7, 5)] {
        let f = read(&mut w, "noise.bin", Some((offset, length)));
        let from = offset.min(n) as usize;
        let to = (offset + length).min(n) as usize;
        assert_eq!(f.msg["result"]["raw_bytes"], to - from);
        assert!(f.raw == noise[from..to], "{offset}+{length}");
    }
    // The stream goes on in step: a plain call after raw ones.
    let f = w.call(
        "fs.read",
        json!({"session_id": sid, "path": "prose.txt", "length": 5}),
    );
    assert_eq!(f.msg["result"]["content"], "line ");
    assert_eq!(f.msg["result"].get("raw_bytes"), None);
}

/// With compression negotiated too, a piece that shrinks comes as one zstd frame after the
/// line (`encoding: "zstd"`, `raw_bytes` the frame's length), and one that does not as raw.
#[test]
fn with_compression_a_piece_that_shrinks_comes_as_a_raw_zstd_frame() {
    let (_tmp, root) = root();
    let prose = text(500_000);
    let noise = random(500_000);
    std::fs::write(root.join("prose.txt"), &prose).unwrap();
    std::fs::write(root.join("noise.bin"), &noise).unwrap();
    let mut w = Wire::spawn(&root);
    let open = w.call(
        "session.open",
        json!({"client_name": "both", "raw_frames": true, "compression": ["zstd"]}),
    );
    let r = &open.msg["result"];
    assert_eq!(
        (r["raw_frames"].clone(), r["compression"].clone()),
        (json!(true), json!("zstd"))
    );
    let sid = r["session_id"].as_str().unwrap().to_owned();
    let f = w.call(
        "fs.read",
        json!({"session_id": sid, "path": "prose.txt", "encoding": "raw"}),
    );
    let r = &f.msg["result"];
    assert_eq!(
        (r["encoding"].as_str(), r["content"].as_str()),
        (Some("zstd"), Some(""))
    );
    assert_eq!(r["raw_bytes"], f.raw.len());
    assert!(f.raw.len() < prose.len() / 4, "{}", f.raw.len());
    assert!(zstd::stream::decode_all(&f.raw[..]).unwrap() == prose);
    let f = w.call(
        "fs.read",
        json!({"session_id": sid, "path": "noise.bin", "encoding": "raw"}),
    );
    assert_eq!(f.msg["result"]["encoding"], "raw");
    assert!(f.raw == noise);
    // In a batch: the frame as a zstd string.
    let read = json!({"jsonrpc": "2.0", "id": 90, "method": "fs.read",
                      "params": {"session_id": sid, "path": "prose.txt", "encoding": "raw"}});
    w.send_line(&json!([read]).to_string());
    let f = w.frame();
    let r = &f.msg[0]["result"];
    assert_eq!(
        (r["encoding"].as_str(), r.get("raw_bytes")),
        (Some("zstd"), None)
    );
    let frame = base64::engine::general_purpose::STANDARD
        .decode(r["content"].as_str().unwrap())
        .unwrap();
    assert!(zstd::stream::decode_all(&frame[..]).unwrap() == prose);
}

#[test]
fn a_session_that_does_not_ask_gets_the_old_answers_and_raw_is_refused() {
    let (_tmp, root) = root();
    let noise = random(5000);
    std::fs::write(root.join("noise.bin"), &noise).unwrap();
    let mut w = Wire::spawn(&root);
    let open = w.call("session.open", json!({"client_name": "plain"}));
    assert_eq!(open.msg["result"].get("raw_frames"), None, "{}", open.msg);
    let sid = open.msg["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let e = w.call(
        "fs.read",
        json!({"session_id": sid, "path": "noise.bin", "encoding": "raw"}),
    );
    assert_eq!(e.msg["error"]["code"], -32602, "{}", e.msg);
    assert!(
        e.msg["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not negotiated"),
        "{}",
        e.msg
    );
    // base64 as before, the same keys as before.
    let f = w.call(
        "fs.read",
        json!({"session_id": sid, "path": "noise.bin", "encoding": "base64"}),
    );
    let r = f.msg["result"].as_object().unwrap();
    let mut keys: Vec<&str> = r.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["content", "encoding", "mtime", "path", "size", "truncated"]
    );
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(r["content"].as_str().unwrap())
            .unwrap(),
        noise
    );
    assert!(f.raw.is_empty());
    // Raw bytes are never written in: fs.write refuses the encoding even when negotiated.
    let sid = w.open_raw_session();
    let e = w.call(
        "fs.write",
        json!({"session_id": sid, "path": "x", "content": "", "encoding": "raw"}),
    );
    assert_eq!(e.msg["error"]["code"], -32602, "{}", e.msg);
    assert!(!root.join("x").exists());
}

/// A command prints lines for a second while files are read raw in the same session, three
/// reads in flight all along: every line is whole JSON, every read's bytes exact, and the
/// output complete and in order.
#[test]
fn events_between_raw_reads_are_not_corrupted() {
    let (_tmp, root) = root();
    let noise = random(1024 * 1024 - 3);
    std::fs::write(root.join("noise.bin"), &noise).unwrap();
    let mut w = Wire::spawn(&root);
    let sid = w.open_raw_session();
    // 200 bursts of 100 numbers, 5 ms apart.
    let script = "i=0; while [ $i -lt 200 ]; do seq $((i*100+1)) $((i*100+100)); \
                  i=$((i+1)); sleep 0.005; done";
    let started = w.call(
        "exec.start",
        json!({"session_id": sid, "shell": true, "command": script}),
    );
    let pid = started.msg["result"]["process_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", started.msg))
        .to_owned();
    let read = |w: &mut Wire, i: u64| {
        let at = i * 4099 % 700_000;
        let id = w.send(
            "fs.read",
            json!({"session_id": sid, "path": "noise.bin", "encoding": "raw",
                   "offset": at, "length": 300_000}),
        );
        (id, at as usize)
    };
    let mut in_flight: Vec<(u64, usize)> = (0..3).map(|i| read(&mut w, i)).collect();
    let mut sent = 3;
    let mut out = Vec::new();
    let mut reads_done = 0;
    let mut events_while_reading = 0;
    let mut exited = false;
    while !(exited && in_flight.is_empty()) {
        let f = w.frame();
        if let Some(i) = in_flight.iter().position(|&(id, _)| f.msg["id"] == id) {
            let (_, at) = in_flight.remove(i);
            assert_eq!(f.msg["result"]["raw_bytes"], 300_000, "{}", f.msg);
            assert!(f.raw == noise[at..at + 300_000], "read at {at}");
            reads_done += 1;
            if !exited {
                in_flight.push(read(&mut w, sent));
                sent += 1;
            }
            continue;
        }
        let p = &f.msg["params"];
        match f.msg["method"].as_str() {
            Some("exec.stdout") if p["process_id"] == pid.as_str() => {
                out.extend(common::data_bytes(p));
                events_while_reading += 1;
            }
            Some("exec.exit") if p["process_id"] == pid.as_str() => {
                assert_eq!(p["exit_code"], 0);
                exited = true;
            }
            _ => {}
        }
    }
    let want: String = (1..=20_000).map(|i| format!("{i}\n")).collect();
    assert!(out == want.as_bytes(), "{} bytes of output", out.len());
    // Output and reads did take turns on the stream.
    assert!(
        reads_done >= 10 && events_while_reading >= 10,
        "{reads_done} reads, {events_while_reading} events"
    );
}

/// A batch's answers are one JSON array: a raw read in it travels in its string.
#[test]
fn a_raw_read_in_a_batch_travels_in_its_string() {
    let (_tmp, root) = root();
    let noise = random(1000);
    std::fs::write(root.join("noise.bin"), &noise).unwrap();
    let mut w = Wire::spawn(&root);
    let sid = w.open_raw_session();
    let read = json!({"jsonrpc": "2.0", "id": 77, "method": "fs.read",
                      "params": {"session_id": sid, "path": "noise.bin", "encoding": "raw"}});
    let stat = json!({"jsonrpc": "2.0", "id": 78, "method": "fs.stat",
                      "params": {"session_id": sid, "path": "noise.bin"}});
    w.send_line(&json!([read, stat]).to_string());
    let f = w.frame();
    let answers = f.msg.as_array().expect("one array");
    let r = &answers.iter().find(|a| a["id"] == 77).unwrap()["result"];
    assert_eq!(
        (r["encoding"].as_str(), r.get("raw_bytes")),
        (Some("base64"), None)
    );
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(r["content"].as_str().unwrap())
            .unwrap(),
        noise
    );
    assert!(f.raw.is_empty());
    // And the stream is still in step.
    let f = w.call("fs.stat", json!({"session_id": sid, "path": "noise.bin"}));
    assert_eq!(f.msg["result"]["size"], 1000);
}

fn config(root: &Path, piece: u64) -> std::path::PathBuf {
    let config = root.join("rexd.toml");
    std::fs::write(
        &config,
        format!(
            "[limits]\nmax_file_read_bytes = {piece}\n[[security.allowed_roots]]\npath = \"{}\"\n\
             [audit]\nenabled = true\npath = \"{}\"\n",
            root.display(),
            root.join("audit.log").display()
        ),
    )
    .unwrap();
    config
}

/// The `encoding` of every `fs.read` in the audit log, in order.
fn read_encodings(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("audit.log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["method"] == "fs.read")
        .map(|e| e["params"]["encoding"].as_str().unwrap().to_owned())
        .collect()
}

fn read_all(c: &mut Client, path: &Path) -> Vec<u8> {
    let mut got = Vec::new();
    let r = c
        .read_file(path.to_str().unwrap(), 0, None, &mut |b| {
            got.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
    assert_eq!(r.size, got.len() as u64);
    got
}

/// The client library reads raw by default over a child's stdio (pieces of 64 KiB here, so
/// files end on and off piece boundaries), and as before when told not to offer.
fn client_reads_files_exactly(spec: TargetSpec, root: &Path) {
    const PIECE: usize = 64 * 1024;
    let files = [
        ("noise.bin", random(5 * PIECE + 123)),
        ("boundary.bin", random(3 * PIECE)),
        ("prose.txt", text(2 * PIECE + 5)),
        ("empty", Vec::new()),
    ];
    for (name, bytes) in &files {
        std::fs::write(root.join(name), bytes).unwrap();
    }
    for raw in [true, false] {
        let options = ConnectOptions {
            raw_frames: raw,
            ..ConnectOptions::default()
        };
        let mut c = Client::connect(&spec, &options).unwrap();
        assert_eq!(c.raw_frames(), raw);
        assert_eq!(c.session().raw_frames, raw);
        let before = read_encodings(root).len();
        for (name, bytes) in &files {
            assert!(
                read_all(&mut c, &root.join(name)) == *bytes,
                "{name} raw={raw}"
            );
        }
        // A piece from the middle, and a length that ends inside a piece.
        let mut got = Vec::new();
        c.read_file(
            root.join("noise.bin").to_str().unwrap(),
            PIECE as u64 - 1,
            Some(PIECE as u64 + 2),
            &mut |b| {
                got.extend_from_slice(b);
                Ok(())
            },
        )
        .unwrap();
        assert!(got == files[0].1[PIECE - 1..2 * PIECE + 1]);
        c.close().unwrap();
        let encodings = read_encodings(root);
        let used = &encodings[before..];
        if raw {
            assert!(used.iter().all(|e| e == "raw"), "{used:?}");
        } else {
            assert!(
                used.iter().all(|e| e == "utf8" || e == "base64") && used.len() > 10,
                "{used:?}"
            );
        }
    }
}

#[test]
fn the_client_reads_raw_over_stdio() {
    let (_tmp, root) = root();
    let config = config(&root, 64 * 1024);
    let spec = TargetSpec {
        rexd: Some(env!("CARGO_BIN_EXE_rexd").into()),
        rexd_args: vec!["--config".into(), config.display().to_string()],
        workspace_roots: vec![root.display().to_string()],
        ..TargetSpec::new("local")
    };
    client_reads_files_exactly(spec, &root);
}

#[test]
#[cfg_attr(
    no_sshd,
    ignore = "needs OpenSSH (sshd, ssh, ssh-keygen): tests/run.sh installs openssh-server and openssh-client"
)]
fn the_client_reads_raw_over_ssh() {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_rexd"))
        .parent()
        .unwrap()
        .display()
        .to_string();
    // A short agent idle time, so the agent of the resumable session is gone soon after.
    let sshd = Sshd::start_with_config(&format!(
        "SetEnv PATH={bin_dir}:/usr/bin:/bin REXD_AGENT_IDLE_MS=3000"
    ));
    let (_tmp, root) = root();
    let config = config(&root, 64 * 1024);
    let spec = TargetSpec {
        ssh_options: sshd.ssh_options(),
        rexd_args: vec!["--config".into(), config.display().to_string()],
        ..TargetSpec::new(sshd.url())
    };
    client_reads_files_exactly(spec.clone(), &root);
    // A resumable session goes through the bridge and the agent: bytes as they are, raw
    // frames too.
    let options = ConnectOptions {
        resume: true,
        ..ConnectOptions::default()
    };
    let mut c = Client::connect(&spec, &options).unwrap();
    assert!(c.raw_frames());
    assert!(c.session().resume.is_some());
    let noise = random(200_000);
    std::fs::write(root.join("resumable.bin"), &noise).unwrap();
    let before = read_encodings(&root).len();
    assert!(read_all(&mut c, &root.join("resumable.bin")) == noise);
    c.close().unwrap();
    let used = read_encodings(&root)[before..].to_vec();
    assert!(
        used.len() == 4 && used.iter().all(|e| e == "raw"),
        "{used:?}"
    );
    // Commands' output raw over ssh, and through the bridge and the agent's hub (its
    // writer thread and its replay buffer) in a resumable session.
    client_runs_commands_exactly(&spec, &ConnectOptions::default(), &root);
    client_runs_commands_exactly(&spec, &options, &root);
}

/// A daemon (a shell script here) that grants raw frames, then answers a read of 1000 bytes
/// with a header claiming a gigabyte: the client refuses it before reading or allocating it,
/// naming both sizes. And one that sends raw bytes to a call it was never asked.
#[test]
fn the_client_refuses_raw_bytes_it_did_not_ask_for() {
    let (_tmp, root) = root();
    std::fs::write(root.join("f"), b"x").unwrap();
    // `ID` becomes the request's id; each answer is one printf format (the script's `\n`s).
    let header = |n: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":ID,"result":{{"path":"/f","size":1,"mtime":"t","encoding":"raw","content":"","truncated":false,"raw_bytes":{n}}}}}\n"#
        )
    };
    let cases = [
        (
            header("1000000000") + &"0".repeat(4096),
            "claims 1000000000 bytes, more than the 1000 asked for",
        ),
        // Bytes for a call never made, before the real answer.
        (
            header("1").replace("ID", "424242") + "z" + &header("1") + "x",
            "raw bytes answered call 424242, which did not ask for them",
        ),
    ];
    let open = r#"{"jsonrpc":"2.0","id":ID,"result":{"session_id":"s_1","protocol":"rexd/1","server_version":"fake","capabilities":["fs"],"limits":{"max_file_read_bytes":1000},"workspace_roots":["/"],"raw_frames":true}}\n"#;
    for (answer, want) in cases {
        let fake = root.join("fake-rexd");
        let id = r#"'"$id"'"#;
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\n\
                 while IFS= read -r line; do\n\
                 id=$(printf '%s' \"$line\" | sed -n 's/.*\"id\":\\([^,}}]*\\).*/\\1/p')\n\
                 case \"$line\" in\n\
                 *'\"session.open\"'*) printf '{}';;\n\
                 *'\"fs.read\"'*) printf '{}';;\n\
                 esac\n\
                 done\n",
                open.replace("ID", id),
                answer.replace("ID", id),
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let spec = TargetSpec {
            rexd: Some(fake.display().to_string()),
            ..TargetSpec::new("local")
        };
        let mut c = Client::connect(&spec, &ConnectOptions::default()).unwrap();
        assert!(c.raw_frames());
        let e = c
            .read_file(root.join("f").to_str().unwrap(), 0, None, &mut |_| Ok(()))
            .unwrap_err();
        assert!(matches!(e, rexd::client::ClientError::Frame(_)), "{e:?}");
        assert!(e.to_string().contains(want), "{e}");
    }
}

/// Exec output in a session with raw output: each event's bytes follow its line, exactly
/// (random bytes, NULs and newlines included), `data` empty and `encoding` raw; the exit
/// comes after the last of them and counts the same bytes.
#[test]
fn exec_output_comes_raw_after_its_line() {
    let (_tmp, root) = root();
    let noise = random(3 * 1024 * 1024 + 5);
    std::fs::write(root.join("noise.bin"), &noise).unwrap();
    let mut w = Wire::spawn(&root);
    let open = w.call(
        "session.open",
        json!({"client_name": "raw", "raw_frames": true, "raw_output": true}),
    );
    assert_eq!(open.msg["result"]["raw_output"], true, "{}", open.msg);
    let sid = open.msg["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let script = format!(
        "cat {}; printf 'to stderr\\n' >&2",
        root.join("noise.bin").display()
    );
    let (out, err, exit) = w.run(&sid, &["sh", "-c", &script]);
    for f in out.iter().chain(&err) {
        let p = &f.msg["params"];
        assert_eq!(p["encoding"], "raw", "{p}");
        assert_eq!(p["data"], "", "{p}");
        assert_eq!(p["raw_bytes"].as_u64(), Some(f.raw.len() as u64), "{p}");
    }
    let got: Vec<u8> = out.iter().flat_map(|f| f.raw.clone()).collect();
    assert!(got == noise, "{} bytes of {}", got.len(), noise.len());
    let seqs: Vec<u64> = out
        .iter()
        .map(|f| f.msg["params"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=out.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        err.iter().flat_map(|f| f.raw.clone()).collect::<Vec<u8>>(),
        b"to stderr\n"
    );
    assert_eq!(exit["exit_code"], 0);
    assert_eq!(exit["bytes_stdout"], noise.len() as u64);
}

/// Raw output without compression stays in the command's pipe until its turn and moves to
/// rexd's stdout with splice(2). A client that reads slowly (rexd's pipe fills, the splices
/// are partial) still gets every byte in order, stdout and stderr interleaved as written, each
/// event's bytes right after its line, and `exec.exit` after the last of them.
#[test]
fn piped_output_reaches_a_slow_reader_exactly_and_exit_follows_its_last_byte() {
    let (_tmp, root) = root();
    let (a, b) = (random(3 * 1024 * 1024 + 7), random(600 * 1024 + 3));
    std::fs::write(root.join("a.bin"), &a).unwrap();
    std::fs::write(root.join("b.bin"), &b).unwrap();
    let slow = Some(std::time::Duration::from_millis(1));
    let mut w = Wire::spawn_with(&root, &[], slow);
    let sid = w.open(json!({"client_name": "raw", "raw_frames": true, "raw_output": true}));
    let script = format!(
        "cat {a}; printf 'between\\n' >&2; cat {b}; printf 'end\\n' >&2; printf tail",
        a = root.join("a.bin").display(),
        b = root.join("b.bin").display()
    );
    let (out, err, exit) = w.run(&sid, &["sh", "-c", &script]);
    for f in out.iter().chain(&err) {
        let p = &f.msg["params"];
        assert_eq!(
            (&p["encoding"], &p["data"]),
            (&json!("raw"), &json!("")),
            "{p}"
        );
        assert_eq!(p["raw_bytes"].as_u64(), Some(f.raw.len() as u64), "{p}");
    }
    let got: Vec<u8> = out.iter().flat_map(|f| f.raw.clone()).collect();
    let want = [&a[..], &b[..], b"tail"].concat();
    assert!(got == want, "{} bytes of {}", got.len(), want.len());
    let seqs: Vec<u64> = out
        .iter()
        .map(|f| f.msg["params"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=out.len() as u64).collect::<Vec<_>>());
    let err: Vec<u8> = err.iter().flat_map(|f| f.raw.clone()).collect();
    assert_eq!(err, b"between\nend\n");
    assert_eq!(exit["exit_code"], 0);
    assert_eq!(exit["bytes_stdout"], want.len() as u64);
}

/// Output left in the pipe keeps the caps: a command's `max_output_bytes` and the operator's
/// `limits.hard_output_bytes` cut it at exactly that many bytes, the first ones, and say
/// `truncated`.
#[test]
fn piped_output_keeps_the_output_caps() {
    let (_tmp, root) = root();
    let noise = random(1024 * 1024);
    std::fs::write(root.join("noise.bin"), &noise).unwrap();
    let config = root.join("rexd.toml");
    std::fs::write(&config, "[limits]\nhard_output_bytes = 300001\n").unwrap();
    let mut w = Wire::spawn_with(&root, &["--config", config.to_str().unwrap()], None);
    let sid = w.open(json!({"client_name": "raw", "raw_frames": true, "raw_output": true}));
    let path = root.join("noise.bin").display().to_string();
    for (params, cap) in [
        (
            json!({"session_id": sid, "argv": ["cat", path], "max_output_bytes": 100_003}),
            100_003,
        ),
        (
            json!({"session_id": sid, "argv": ["cat", path], "uncapped_output": true}),
            300_001,
        ),
    ] {
        let (out, _, exit) = w.run_with(params);
        let got: Vec<u8> = out.iter().flat_map(|f| f.raw.clone()).collect();
        assert!(got == noise[..cap], "{} bytes, cap {cap}", got.len());
        assert_eq!(exit["truncated"], true, "{exit}");
        assert_eq!(exit["bytes_stdout"], cap as u64, "{exit}");
    }
}

/// An output that takes no splice (a file opened to append) gets the bytes read and written
/// instead, exactly and in order.
#[test]
fn piped_output_to_an_output_that_takes_no_splice_is_read_and_written() {
    let (_tmp, root) = root();
    let noise = random(700 * 1024 + 9);
    std::fs::write(root.join("noise.bin"), &noise).unwrap();
    let log = root.join("out.log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rexd"))
        .args(["--stdio", "--root", root.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(file)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Everything rexd wrote so far, once it holds `what`.
    let wait_for = |what: &str| -> Vec<u8> {
        let deadline = std::time::Instant::now() + common::WAIT;
        loop {
            let bytes = std::fs::read(&log).unwrap();
            if memchr::memmem::find(&bytes, what.as_bytes()).is_some() {
                return bytes;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no {what} in rexd's output"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    let open = json!({"jsonrpc": "2.0", "id": 1, "method": "session.open",
                      "params": {"client_name": "raw", "raw_frames": true, "raw_output": true}});
    writeln!(stdin, "{open}").unwrap();
    let first = wait_for("\n");
    let end = memchr::memchr(b'\n', &first).unwrap();
    let answer: Value = serde_json::from_slice(&first[..end]).unwrap();
    assert_eq!(answer["result"]["raw_output"], true, "{answer}");
    let sid = answer["result"]["session_id"].as_str().unwrap();
    let start = json!({"jsonrpc": "2.0", "id": 2, "method": "exec.start",
                       "params": {"session_id": sid, "uncapped_output": true,
                                  "argv": ["cat", root.join("noise.bin")]}});
    writeln!(stdin, "{start}").unwrap();
    let all = wait_for("\"method\":\"exec.exit\"");
    drop(stdin);
    child.wait().unwrap();
    // Frames: a line, and the bytes it announces.
    let mut rest = &all[..];
    let mut got = Vec::new();
    let mut exited = false;
    while !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).expect("a whole line");
        let msg: Value = serde_json::from_slice(&rest[..end]).unwrap();
        rest = &rest[end + 1..];
        assert!(!exited, "after exec.exit: {msg}");
        match msg["method"].as_str() {
            Some("exec.stdout") => {
                let n = msg["params"]["raw_bytes"].as_u64().expect("raw") as usize;
                got.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
            }
            Some("exec.exit") => exited = true,
            _ => {}
        }
    }
    assert!(exited);
    assert!(got == noise, "{} bytes of {}", got.len(), noise.len());
}

/// With compression too, output that shrinks comes as one raw zstd frame per event (not its
/// base64), output that does not as raw.
#[test]
fn with_compression_output_that_shrinks_comes_as_raw_zstd_frames() {
    let (_tmp, root) = root();
    let mut w = Wire::spawn(&root);
    let sid = w.open(
        json!({"client_name": "raw", "raw_frames": true, "raw_output": true,
                            "compression": ["zstd"]}),
    );
    let (out, _, exit) = w.run(&sid, &["seq", "1", "300000"]);
    assert_eq!(exit["exit_code"], 0);
    let mut got = Vec::new();
    let mut zstd_events = 0;
    for f in &out {
        let p = &f.msg["params"];
        assert_eq!(p["raw_bytes"].as_u64(), Some(f.raw.len() as u64), "{p}");
        match p["encoding"].as_str() {
            Some("zstd") => {
                zstd_events += 1;
                got.extend(zstd::stream::decode_all(&f.raw[..]).unwrap());
            }
            Some("raw") => got.extend_from_slice(&f.raw),
            other => panic!("{other:?}: {p}"),
        }
    }
    let want: String = (1..=300_000).map(|i| format!("{i}\n")).collect();
    assert!(got == want.as_bytes(), "{} bytes", got.len());
    assert!(zstd_events > 0, "no event was compressed");
}

/// Raw output is an addition a client asks for: a session that asks for raw frames only (a
/// client of the previous release) gets its output in `data` as before, and raw output is
/// not granted without raw frames.
#[test]
fn raw_output_only_when_asked_for_with_raw_frames() {
    let (_tmp, root) = root();
    let mut w = Wire::spawn(&root);
    for params in [
        json!({"client_name": "old", "raw_frames": true}),
        json!({"client_name": "half", "raw_output": true}),
    ] {
        let open = w.call("session.open", params.clone());
        assert_eq!(
            open.msg["result"].get("raw_output"),
            None,
            "{params}: {}",
            open.msg
        );
        let sid = open.msg["result"]["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let (out, _, _) = w.run(&sid, &["printf", "a\\000b\\nc"]);
        for f in &out {
            assert!(
                f.raw.is_empty() && f.msg["params"].get("raw_bytes").is_none(),
                "{}",
                f.msg
            );
        }
        let got: Vec<u8> = out
            .iter()
            .flat_map(|f| common::data_bytes(&f.msg["params"]))
            .collect();
        assert_eq!(got, b"a\0b\nc", "{params}");
    }
}

/// The client library asks for raw output and streams it exactly, text and bytes.
fn client_runs_commands_exactly(spec: &TargetSpec, options: &ConnectOptions, root: &Path) {
    let noise = random(2 * 1024 * 1024 + 1);
    std::fs::write(root.join("noise.bin"), &noise).unwrap();
    let mut c = Client::connect(spec, options).unwrap();
    assert!(c.session().raw_output, "{:?}", c.session());
    let run = |c: &mut Client, argv: &[&str]| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let exit = c
            .exec(
                Program::Argv(argv.iter().map(|s| s.to_string()).collect()),
                &ExecOptions {
                    uncapped_output: true,
                    ..ExecOptions::default()
                },
                None,
                &mut |stream, bytes| {
                    match stream {
                        Stream::Stdout => out.extend_from_slice(bytes),
                        Stream::Stderr => err.extend_from_slice(bytes),
                    }
                    Ok(())
                },
            )
            .unwrap();
        (out, err, exit)
    };
    let path = root.join("noise.bin").display().to_string();
    let (out, _, exit) = run(&mut c, &["cat", &path]);
    assert!(out == noise, "{} bytes of {}", out.len(), noise.len());
    assert_eq!(exit.exit_code, Some(0));
    let (out, err, exit) = run(&mut c, &["sh", "-c", "seq 1 200000; echo done >&2; exit 4"]);
    let want: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
    assert!(out == want.as_bytes(), "{} bytes", out.len());
    assert_eq!(err, b"done\n");
    assert_eq!(exit.exit_code, Some(4));
    c.close().unwrap();
}

#[test]
fn the_client_runs_commands_with_raw_output_over_stdio() {
    let (_tmp, root) = root();
    let spec = TargetSpec {
        rexd: Some(env!("CARGO_BIN_EXE_rexd").into()),
        rexd_args: vec!["--root".into(), root.display().to_string()],
        ..TargetSpec::new("local")
    };
    client_runs_commands_exactly(&spec, &ConnectOptions::default(), &root);
    let compressed = ConnectOptions {
        compress: true,
        ..ConnectOptions::default()
    };
    client_runs_commands_exactly(&spec, &compressed, &root);
}

/// The audit's `bytes` for an `fs.read` is what was read from the file, whatever the answer's
/// encoding (a raw read said 0, a base64 one its string's length); a launch that failed has an
/// `exec.error` entry with its errno.
#[test]
fn the_audit_counts_bytes_read_in_every_encoding_and_failed_launches() {
    let (_tmp, root) = root();
    std::fs::write(root.join("noise.bin"), random(3000)).unwrap();
    std::fs::write(root.join("text.txt"), text(100_000)).unwrap();
    std::fs::write(root.join("bad-interpreter"), "#!/nonexistent/interpreter\n").unwrap();
    std::fs::set_permissions(
        root.join("bad-interpreter"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let config = config(&root, 1 << 20);
    let mut child = Command::new(env!("CARGO_BIN_EXE_rexd"))
        .args(["--stdio", "--config", config.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let inner = child.stdout.take().unwrap();
    let mut w = Wire {
        stdin: child.stdin.take().unwrap(),
        out: BufReader::new(Slow { inner, delay: None }),
        child,
        next_id: 1,
    };
    let sid = w.open(json!({"client_name": "audit", "raw_frames": true, "compression": ["zstd"]}));
    let reads = [
        ("noise.bin", "raw", 3000),
        ("noise.bin", "base64", 3000),
        ("text.txt", "raw", 100_000),  // comes as a raw zstd frame
        ("text.txt", "zstd", 100_000), // the base64 of a zstd frame
        ("text.txt", "utf8", 100_000),
    ];
    for (file, encoding, _) in reads {
        let f = w.call(
            "fs.read",
            json!({"session_id": sid, "path": file, "encoding": encoding}),
        );
        assert!(f.msg.get("result").is_some(), "{}", f.msg);
    }
    let failed = w.call(
        "exec.start",
        json!({"session_id": sid, "argv": [root.join("bad-interpreter")]}),
    );
    let pid = failed.msg["result"]["process_id"]
        .as_str()
        .unwrap()
        .to_owned();
    loop {
        let f = w.frame();
        if f.msg["method"] == "exec.error" {
            break;
        }
    }
    drop(w);
    let entries: Vec<Value> = std::fs::read_to_string(root.join("audit.log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let counted: Vec<u64> = entries
        .iter()
        .filter(|e| e["method"] == "fs.read")
        .map(|e| e["result"]["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(counted, reads.map(|r| r.2), "{entries:?}");
    let error = entries
        .iter()
        .find(|e| e["method"] == "exec.error")
        .unwrap_or_else(|| panic!("no exec.error entry: {entries:?}"));
    assert_eq!(error["params"]["process_id"], pid.as_str());
    assert_eq!(error["result"]["errno"], 2, "{error}");
    assert!(
        error["result"]["error"]
            .as_str()
            .unwrap()
            .starts_with("cannot start"),
        "{error}"
    );
}
