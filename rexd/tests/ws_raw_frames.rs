//! Raw frames and raw output over `rexd --listen`'s `/ws` (`docs/rexd-raw-frames.md`, "On /ws:
//! binary messages"), against a real daemon on loopback: `rex` and the client library get
//! command output and file bytes back exactly (NULs, invalid UTF-8, many lines), a WebSocket
//! client that does not ask sees text messages only, one that does sees each raw frame as one
//! binary message whose bytes are exactly its `raw_bytes`, a client's binary message is refused
//! with a close (1003) while the daemon serves the others, and a daemon (faked here) that sends
//! the client library a binary message breaking the rules gets a typed error, not a hang.

mod netkit;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use deskwire::rexd::Program;
use netkit::*;
use rexd::client::{
    Client, ClientError, ConnectOptions, ExecOptions, FrameError, Stream, TargetSpec,
};
use serde_json::{Value, json};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message, WebSocket};

fn random(n: usize) -> Vec<u8> {
    deskwire_integration::random_bytes(0x9e37_79b9_7f4a_7c15, n)
}

/// What `MIXED` writes: NULs, bytes that are not UTF-8, then many lines.
const MIXED: &str = r"printf 'a\000b\377\376c\n\000'; seq 1 300000; printf '\300\n' >&2";

fn mixed_stdout() -> Vec<u8> {
    let mut want = b"a\0b\xff\xfec\n\0".to_vec();
    for i in 1..=300_000 {
        want.extend_from_slice(format!("{i}\n").as_bytes());
    }
    want
}

/// `rex ARGS` with the token in the environment: exit code, stdout and stderr as bytes.
fn rex_bytes(args: &[&str]) -> (i32, Vec<u8>, Vec<u8>) {
    let out = Command::new(REX)
        .args(args)
        .env("REX_TARGETS_FILE", "/nonexistent/rex-targets.toml")
        .env("REXD_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), out.stdout, out.stderr)
}

/// The encodings the audit shows `fs.read`s asked for, in order.
fn read_encodings(place: &Place) -> Vec<String> {
    place
        .audit_lines()
        .into_iter()
        .filter(|e| e["method"] == "fs.read")
        .map(|e| {
            e["params"]["encoding"]
                .as_str()
                .unwrap_or("utf8")
                .to_owned()
        })
        .collect()
}

#[test]
fn rex_over_ws_brings_output_and_files_back_byte_identical() {
    let place = Place::new("ws-raw-rex");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let ws = d.url.replace("http://", "ws://");
    let noise = random(3 * 1024 * 1024 + 5);
    std::fs::write(place.work.join("noise.bin"), &noise).unwrap();
    let want = mixed_stdout();
    for flags in [&[][..], &["--compress"], &["--no-raw-frames"]] {
        let with = |rest: &[&str]| {
            let mut args = vec!["-t", ws.as_str()];
            args.extend_from_slice(flags);
            args.extend_from_slice(rest);
            rex_bytes(&args)
        };
        let (code, out, err) = with(&["exec", "--", "sh", "-c", MIXED]);
        assert_eq!(code, 0, "{flags:?}: {}", String::from_utf8_lossy(&err));
        assert!(
            out == want,
            "{flags:?}: {} bytes of {}",
            out.len(),
            want.len()
        );
        assert_eq!(err, b"\xc0\n", "{flags:?}");
        let (code, out, err) = with(&["exec", "--", "cat", "noise.bin"]);
        assert_eq!(code, 0, "{flags:?}: {}", String::from_utf8_lossy(&err));
        assert!(
            out == noise,
            "{flags:?}: {} bytes of {}",
            out.len(),
            noise.len()
        );
        let (code, out, err) = with(&["read", "noise.bin"]);
        assert_eq!(code, 0, "{flags:?}: {}", String::from_utf8_lossy(&err));
        assert!(
            out == noise,
            "{flags:?}: {} bytes of {}",
            out.len(),
            noise.len()
        );
        // An exit code comes after the last byte of output.
        let (code, out, _) = with(&["exec", "--", "sh", "-c", "head -c 100000 noise.bin; exit 3"]);
        assert_eq!(code, 3, "{flags:?}");
        assert!(out == noise[..100_000], "{flags:?}");
    }
    // The reads of the first two runs were raw (the second's raw too: random bytes do not
    // shrink, so they came as raw frames rather than zstd ones); the third's were not.
    let encodings = read_encodings(&place);
    assert!(!encodings.is_empty());
    let third = encodings
        .iter()
        .position(|e| e != "raw")
        .expect("a non-raw read");
    assert!(third > 0, "{encodings:?}");
    assert!(
        encodings[third..].iter().all(|e| e != "raw"),
        "{encodings:?}"
    );
}

fn token_file(place: &Place) -> std::path::PathBuf {
    let path = place.path().join("client-token");
    std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
    path
}

/// Runs `argv` through the client library: stdout, stderr, exit code.
fn run(c: &mut Client, argv: &[&str]) -> (Vec<u8>, Vec<u8>, Option<i32>) {
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
    (out, err, exit.exit_code)
}

fn read_all(c: &mut Client, path: &Path) -> Vec<u8> {
    let mut got = Vec::new();
    c.read_file(path.to_str().unwrap(), 0, None, &mut |b| {
        got.extend_from_slice(b);
        Ok(())
    })
    .unwrap();
    got
}

#[test]
fn the_client_library_negotiates_raw_frames_over_ws_and_reads_exactly() {
    let place = Place::new("ws-raw-lib");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let spec = TargetSpec {
        token_file: Some(token_file(&place)),
        ..TargetSpec::new(d.url.replace("http://", "ws://"))
    };
    let noise = random(9 * 1024 * 1024 + 3);
    let path = place.work.join("noise.bin");
    std::fs::write(&path, &noise).unwrap();
    std::fs::write(place.work.join("empty"), b"").unwrap();
    let want = mixed_stdout();
    for (raw, compress) in [(true, false), (true, true), (false, false)] {
        let options = ConnectOptions {
            raw_frames: raw,
            compress,
            ..ConnectOptions::default()
        };
        let mut c = Client::connect(&spec, &options).unwrap();
        assert_eq!(c.raw_frames(), raw, "{:?}", c.session());
        assert_eq!(c.session().raw_output, raw, "{:?}", c.session());
        let (out, err, code) = run(&mut c, &["sh", "-c", MIXED]);
        assert!(
            out == want,
            "raw {raw}: {} bytes of {}",
            out.len(),
            want.len()
        );
        assert_eq!(err, b"\xc0\n");
        assert_eq!(code, Some(0));
        assert!(read_all(&mut c, &path) == noise, "raw {raw}");
        assert!(read_all(&mut c, &place.work.join("empty")).is_empty());
        c.close().unwrap();
    }
}

/// A WebSocket to the daemon's `/ws` with the test token, reads bounded by a timeout.
fn dial(url: &str) -> WebSocket<TcpStream> {
    let ws_url = format!("{}/ws", url.replace("http://", "ws://"));
    let mut request = ws_url.as_str().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let addr = url.trim_start_matches("http://");
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let (ws, _) = tungstenite::client::client(request, tcp).unwrap();
    ws
}

/// A message from the daemon: a text one parsed, or a binary one split into its line (parsed)
/// and the bytes after it.
enum Got {
    Text(Value),
    Binary(Value, Vec<u8>),
    Close(u16, String),
}

fn next(ws: &mut WebSocket<TcpStream>) -> Got {
    loop {
        match ws.read().unwrap() {
            Message::Text(t) => return Got::Text(serde_json::from_str(t.as_str()).unwrap()),
            Message::Binary(b) => {
                let nl = b
                    .iter()
                    .position(|&c| c == b'\n')
                    .expect("a line in a binary message");
                let line: Value = serde_json::from_slice(&b[..nl]).unwrap();
                return Got::Binary(line, b[nl + 1..].to_vec());
            }
            Message::Close(f) => {
                return match f {
                    Some(f) => Got::Close(u16::from(f.code), f.reason.to_string()),
                    None => Got::Close(0, String::new()),
                };
            }
            _ => {}
        }
    }
}

fn send(ws: &mut WebSocket<TcpStream>, message: Value) {
    ws.send(Message::text(message.to_string())).unwrap();
}

/// Opens a session with `params` added; its result.
fn open(ws: &mut WebSocket<TcpStream>, params: Value) -> Value {
    let mut p = json!({"client_name": "ws-test"});
    p.as_object_mut()
        .unwrap()
        .extend(params.as_object().unwrap().clone());
    send(
        ws,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session.open", "params": p}),
    );
    match next(ws) {
        Got::Text(v) => v["result"].clone(),
        _ => panic!("session.open answered in a binary message"),
    }
}

/// Runs `sh -c script` on `ws`; every message until `exec.exit` (included).
fn exec_messages(ws: &mut WebSocket<TcpStream>, sid: &str, script: &str) -> Vec<Got> {
    send(
        ws,
        json!({"jsonrpc": "2.0", "id": 2, "method": "exec.start",
               "params": {"session_id": sid, "argv": ["sh", "-c", script]}}),
    );
    let mut got = Vec::new();
    loop {
        let m = next(ws);
        let exit = matches!(&m, Got::Text(v) if v["method"] == "exec.exit");
        got.push(m);
        if exit {
            return got;
        }
    }
}

#[test]
fn ws_clients_get_binary_messages_only_when_they_ask() {
    let place = Place::new("ws-raw-wire");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let noise = random(600_000);
    std::fs::write(place.work.join("noise.bin"), &noise).unwrap();
    let script = format!("{MIXED}; cat {}", place.work.join("noise.bin").display());
    let mut want = mixed_stdout();
    want.extend_from_slice(&noise);

    // Not asked (nor raw output without raw frames): text messages only, bytes in strings.
    for params in [json!({}), json!({"raw_output": true})] {
        let mut ws = dial(&d.url);
        let r = open(&mut ws, params.clone());
        assert_eq!(r.get("raw_frames"), None, "{r}");
        assert_eq!(r.get("raw_output"), None, "{r}");
        let sid = r["session_id"].as_str().unwrap().to_owned();
        let mut out = Vec::new();
        for m in exec_messages(&mut ws, &sid, &script) {
            let Got::Text(v) = m else {
                panic!("{params}: a binary message to a client that did not ask");
            };
            if v["method"] == "exec.stdout" {
                let p = &v["params"];
                let data = p["data"].as_str().unwrap();
                match p["encoding"].as_str().unwrap_or("utf8") {
                    "utf8" => out.extend_from_slice(data.as_bytes()),
                    "base64" => {
                        use base64::Engine as _;
                        out.extend(
                            base64::engine::general_purpose::STANDARD
                                .decode(data)
                                .unwrap(),
                        );
                    }
                    other => panic!("{other}"),
                }
            }
        }
        assert!(out == want, "{} bytes of {}", out.len(), want.len());
        // A raw read is refused: not negotiated.
        send(
            &mut ws,
            json!({"jsonrpc": "2.0", "id": 3, "method": "fs.read",
                   "params": {"session_id": sid, "path": "noise.bin", "encoding": "raw"}}),
        );
        let Got::Text(v) = next(&mut ws) else {
            panic!("binary answer")
        };
        assert_eq!(v["error"]["code"], -32602, "{v}");
    }

    // Asked: each output event is one binary message holding its line and exactly its bytes,
    // in `seq` order, and `exec.exit` (text) after the last of them counts the same bytes.
    let mut ws = dial(&d.url);
    let r = open(&mut ws, json!({"raw_frames": true, "raw_output": true}));
    assert_eq!(r["raw_frames"], true, "{r}");
    assert_eq!(r["raw_output"], true, "{r}");
    let sid = r["session_id"].as_str().unwrap().to_owned();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (mut seq_out, mut binaries) = (0, 0);
    let messages = exec_messages(&mut ws, &sid, &script);
    let last = messages.len() - 1;
    for (i, m) in messages.into_iter().enumerate() {
        match m {
            Got::Binary(line, bytes) => {
                binaries += 1;
                let p = &line["params"];
                assert_eq!(p["encoding"], "raw", "{line}");
                assert_eq!(p["data"], "", "{line}");
                assert_eq!(
                    p["raw_bytes"].as_u64().unwrap(),
                    bytes.len() as u64,
                    "{line}"
                );
                match line["method"].as_str().unwrap() {
                    "exec.stdout" => {
                        let seq = p["seq"].as_u64().unwrap();
                        assert_eq!(seq, seq_out + 1, "{line}");
                        seq_out = seq;
                        out.extend_from_slice(&bytes);
                    }
                    "exec.stderr" => err.extend_from_slice(&bytes),
                    other => panic!("{other} in a binary message"),
                }
            }
            Got::Text(v) if i == last => {
                assert_eq!(v["params"]["bytes_stdout"], want.len() as u64, "{v}");
                assert_eq!(v["params"]["exit_code"], 0, "{v}");
            }
            Got::Text(v) => {
                assert!(v.get("id").is_some(), "an event in a text message: {v}");
            }
            Got::Close(code, reason) => panic!("closed: {code} {reason}"),
        }
    }
    assert!(binaries > 1);
    assert!(out == want, "{} bytes of {}", out.len(), want.len());
    assert_eq!(err, b"\xc0\n");
    // A raw read: one binary message, the file's bytes exactly.
    send(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 4, "method": "fs.read",
               "params": {"session_id": sid, "path": "noise.bin", "encoding": "raw"}}),
    );
    let Got::Binary(line, bytes) = next(&mut ws) else {
        panic!("a raw read answered in text")
    };
    assert_eq!(line["id"], 4, "{line}");
    assert_eq!(line["result"]["encoding"], "raw", "{line}");
    assert_eq!(line["result"]["raw_bytes"], noise.len() as u64, "{line}");
    assert!(bytes == noise, "{} bytes of {}", bytes.len(), noise.len());
    // In a batch it travels in its string, in the batch's one text message.
    send(
        &mut ws,
        json!([{"jsonrpc": "2.0", "id": 5, "method": "fs.read",
                "params": {"session_id": sid, "path": "noise.bin", "encoding": "raw",
                           "length": 10}}]),
    );
    let Got::Text(v) = next(&mut ws) else {
        panic!("a batch in a binary message")
    };
    assert_eq!(v[0]["result"]["encoding"], "base64", "{v}");
}

#[test]
fn a_binary_message_from_a_client_is_refused_and_the_others_are_served() {
    let place = Place::new("ws-raw-refuse");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let mut other = dial(&d.url);
    let r = open(&mut other, json!({"raw_frames": true, "raw_output": true}));
    let other_sid = r["session_id"].as_str().unwrap().to_owned();

    let mut bad = dial(&d.url);
    let r = open(&mut bad, json!({"raw_frames": true, "raw_output": true}));
    assert_eq!(r["raw_frames"], true);
    // Even shaped as a raw frame, a client's binary message is not JSON-RPC.
    let mut frame =
        br#"{"jsonrpc":"2.0","id":2,"method":"session.info","params":{},"raw_bytes":1}"#.to_vec();
    frame.extend_from_slice(b"\nx");
    bad.send(Message::binary(frame)).unwrap();
    match next(&mut bad) {
        Got::Close(code, reason) => {
            assert_eq!(code, 1003, "{reason}");
            assert!(
                reason.contains("binary messages are not JSON-RPC"),
                "{reason}"
            );
        }
        _ => panic!("a binary message was not refused with a close"),
    }
    d.wait_for_log("binary messages are not JSON-RPC");

    // The connection that behaved goes on, raw frames and all; a new one is served too.
    let got = exec_messages(&mut other, &other_sid, "printf 'still\\000here'");
    assert!(
        got.iter()
            .any(|m| matches!(m, Got::Binary(_, b) if b == b"still\0here")),
        "the other client's output did not come"
    );
    let mut again = dial(&d.url);
    let r = open(&mut again, json!({}));
    assert!(r["session_id"].is_string(), "{r}");
}

/// A fake `/ws` daemon: answers `session.open` with `open` and `exec.start` with a process,
/// then sends `then` and reads on until the client goes.
fn fake_daemon(open: Value, then: Message) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let mut ws = tungstenite::accept(tcp).unwrap();
        let mut then = Some(then);
        while let Ok(m) = ws.read() {
            let Message::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            let result = match v["method"].as_str() {
                Some("session.open") => open.clone(),
                Some("exec.start") => json!({"process_id": "p_1",
                                             "started_at": "2026-11-30T00:00:00Z"}),
                _ => continue,
            };
            let answer = json!({"jsonrpc": "2.0", "id": v["id"], "result": result});
            if ws.send(Message::text(answer.to_string())).is_err() {
                return;
            }
            if v["method"] == "exec.start"
                && let Some(m) = then.take()
                && ws.send(m).is_err()
            {
                return;
            }
        }
    });
    url
}

#[test]
fn binary_messages_that_break_the_rules_are_typed_errors_in_the_client() {
    let granted = json!({"session_id": "s_1", "protocol": "rexd/1", "server_version": "fake",
                         "capabilities": ["exec", "fs"], "limits": {}, "workspace_roots": ["/"],
                         "raw_frames": true, "raw_output": true});
    let plain = json!({"session_id": "s_1", "protocol": "rexd/1", "server_version": "fake",
                       "capabilities": ["exec", "fs"], "limits": {}, "workspace_roots": ["/"]});
    let event = |n: u64| {
        json!({"jsonrpc": "2.0", "method": "exec.stdout",
               "params": {"session_id": "s_1", "process_id": "p_1", "seq": 1, "data": "",
                          "encoding": "raw", "raw_bytes": n}})
        .to_string()
    };
    let binary = |line: String, bytes: &[u8]| {
        let mut m = line.into_bytes();
        m.push(b'\n');
        m.extend_from_slice(bytes);
        Message::binary(m)
    };
    let cases: Vec<(&str, Value, bool, Message, &str)> = vec![
        (
            "fewer bytes than raw_bytes",
            granted.clone(),
            true,
            binary(event(10), b"abc"),
            "says raw_bytes 10 carries 3 bytes",
        ),
        (
            "more bytes than raw_bytes",
            granted.clone(),
            true,
            binary(event(1), b"abc"),
            "says raw_bytes 1 carries 3 bytes",
        ),
        (
            "more than one event may carry",
            granted.clone(),
            true,
            binary(event(1 << 30), b"abc"),
            "claims 1073741824 raw bytes, more than the 16777216",
        ),
        (
            "no header line",
            granted.clone(),
            true,
            Message::binary(b"\0\xff no newline".to_vec()),
            "without a header line",
        ),
        (
            "a text message announcing bytes",
            granted.clone(),
            true,
            Message::text(event(3)),
            "a text message announces raw bytes",
        ),
        (
            "raw frames not granted",
            plain.clone(),
            true,
            binary(event(3), b"abc"),
            "did not negotiate raw frames",
        ),
        (
            "raw frames not offered",
            granted.clone(),
            false,
            binary(event(3), b"abc"),
            "did not negotiate raw frames",
        ),
    ];
    // The fake daemon takes any token; a file of its own keeps $REXD_TOKEN out of it.
    let token_file =
        std::env::temp_dir().join(format!("ws-raw-frames-token-{}", std::process::id()));
    std::fs::write(&token_file, "fake-token\n").unwrap();
    for (what, open, offer, then, want) in cases {
        let url = fake_daemon(open, then);
        let token_file = token_file.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let spec = TargetSpec {
                token_file: Some(token_file),
                ..TargetSpec::new(url)
            };
            let options = ConnectOptions {
                raw_frames: offer,
                ..ConnectOptions::default()
            };
            let result = Client::connect(&spec, &options).and_then(|mut c| {
                c.exec(
                    Program::Argv(vec!["true".into()]),
                    &ExecOptions::default(),
                    None,
                    &mut |_, _| Ok(()),
                )
            });
            let _ = tx.send(result);
        });
        let result = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{what}: the client hung"));
        let e = result.expect_err(what);
        assert!(matches!(e, ClientError::Frame(_)), "{what}: {e:?}");
        assert!(e.to_string().contains(want), "{what}: {e}");
        if what == "raw frames not offered" {
            assert!(
                matches!(e, ClientError::Frame(FrameError::BinaryUnasked)),
                "{e:?}"
            );
        }
    }
    let _ = std::fs::remove_file(&token_file);
}

/// A daemon whose answer cannot be read (a result holding a lone surrogate, which no string
/// can carry) is a protocol error naming the call, at once: not a wait that "timed out".
#[test]
fn an_answer_the_client_cannot_read_is_a_protocol_error_not_a_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let mut ws = tungstenite::accept(tcp).unwrap();
        while let Ok(m) = ws.read() {
            let Message::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            let answer = format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{{"session_id":"\ud800"}}}}"#,
                v["id"]
            );
            if ws.send(Message::text(answer)).is_err() {
                return;
            }
        }
    });
    let token_file =
        std::env::temp_dir().join(format!("ws-unreadable-token-{}", std::process::id()));
    std::fs::write(&token_file, "fake-token\n").unwrap();
    let (tx, rx) = mpsc::channel();
    let spec = TargetSpec {
        token_file: Some(token_file.clone()),
        ..TargetSpec::new(url)
    };
    std::thread::spawn(move || {
        let _ = tx.send(Client::connect(&spec, &ConnectOptions::default()).map(|_| ()));
    });
    let result = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the client hung");
    let _ = std::fs::remove_file(&token_file);
    let e = result.expect_err("an unreadable answer");
    assert!(matches!(e, ClientError::Protocol(_)), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("protocol error: session.open: unreadable answer: "),
        "{e}"
    );
}
