//! Compression negotiated at `session.open` (`docs/rexd-compression.md`), against a real
//! `rexd --stdio` and real commands: a session that does not ask gets today's bytes; one that
//! asks gets `zstd` where it is shorter (exec output, fs.read) and may send it (fs.write,
//! exec.input); a compressed payload that inflates past the limits is refused, not expanded.
//! Payloads are inflated here with the zstd crate itself, not with rexd's code.

mod common;

use std::time::Duration;

use base64::Engine as _;
use common::{Daemon, data_bytes};
use rexd::client::{Client, ConnectOptions, ExecOptions, TargetSpec};
use serde_json::{Value, json};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn log_text(n: usize) -> Vec<u8> {
    let mut v = Vec::new();
    let mut i = 0;
    while v.len() < n {
        v.extend_from_slice(
            format!("2026-11-26 INFO worker[{}] request {i} done\n", i % 7).as_bytes(),
        );
        i += 1;
    }
    v.truncate(n);
    v
}

fn random(n: usize) -> Vec<u8> {
    deskwire_integration::random_bytes(0x9e37_79b9_7f4a_7c15, n)
}

/// A frame of `mib` MiB of zeros, written as a stream so its header does not say its size.
fn bomb(mib: usize) -> String {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..mib {
        std::io::Write::write_all(&mut enc, &zeros).unwrap();
    }
    let frame = enc.finish().unwrap();
    assert!(frame.len() < 100_000, "{}", frame.len());
    b64(&frame)
}

/// `exec.stdout` events of `seq 1 20000` in a session: (their encodings, the bytes).
fn seq_events(d: &mut Daemon, sid: &str) -> (Vec<String>, Vec<u8>) {
    let r = d.call(
        "exec.start",
        json!({"session_id": sid, "argv": ["seq", "1", "20000"]}),
    );
    let pid = r["process_id"].as_str().unwrap().to_owned();
    let mut encodings = Vec::new();
    let mut out = Vec::new();
    loop {
        let ev = d.next_event(Duration::from_secs(20)).expect("an event");
        let p = &ev["params"];
        if p["process_id"] != pid.as_str() {
            continue;
        }
        match ev["method"].as_str().unwrap() {
            "exec.stdout" => {
                encodings.push(p["encoding"].as_str().unwrap_or("utf8").to_owned());
                out.extend(data_bytes(p));
            }
            "exec.exit" => {
                assert_eq!(p["exit_code"], 0);
                return (encodings, out);
            }
            _ => {}
        }
    }
}

fn seq_text() -> Vec<u8> {
    (1..=20000)
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn a_session_that_does_not_ask_gets_plain_bytes_and_zstd_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    std::fs::write(root.join("log.txt"), log_text(100_000)).unwrap();
    let mut d = Daemon::rooted(&root);
    let r = d.call("session.open", json!({"client_name": "plain"}));
    assert_eq!(r.get("compression"), None, "{r}");
    let sid = r["session_id"].as_str().unwrap().to_owned();
    let (encodings, out) = seq_events(&mut d, &sid);
    assert!(encodings.iter().all(|e| e == "utf8"), "{encodings:?}");
    assert_eq!(out, seq_text());
    let e = d.call_err(
        "fs.read",
        json!({"session_id": sid, "path": "log.txt", "encoding": "zstd"}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("not negotiated"),
        "{e}"
    );
    let small = b64(&zstd::bulk::compress(b"hello", 1).unwrap());
    let e = d.call_err(
        "fs.write",
        json!({"session_id": sid, "path": "w.txt", "content": small, "encoding": "zstd"}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    assert!(!root.join("w.txt").exists());
    // An offer of codecs the daemon does not have: none chosen.
    let r = d.call(
        "session.open",
        json!({"client_name": "other", "compression": ["brotli"]}),
    );
    assert_eq!(r.get("compression"), None, "{r}");
}

#[test]
fn a_session_that_asks_gets_zstd_where_it_is_shorter() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let text = log_text(200_000);
    let noise = random(200_000);
    std::fs::write(root.join("log.txt"), &text).unwrap();
    std::fs::write(root.join("noise.bin"), &noise).unwrap();
    let mut d = Daemon::rooted(&root);
    let r = d.call(
        "session.open",
        json!({"client_name": "z", "compression": ["brotli", "zstd"]}),
    );
    assert_eq!(r["compression"], "zstd", "{r}");
    let sid = r["session_id"].as_str().unwrap().to_owned();

    let (encodings, out) = seq_events(&mut d, &sid);
    assert_eq!(out, seq_text());
    assert!(encodings.iter().any(|e| e == "zstd"), "{encodings:?}");

    let r = d.call(
        "fs.read",
        json!({"session_id": sid, "path": "log.txt", "encoding": "zstd"}),
    );
    assert_eq!(r["encoding"], "zstd");
    assert!(r["content"].as_str().unwrap().len() < text.len() / 4);
    let frame = base64::engine::general_purpose::STANDARD
        .decode(r["content"].as_str().unwrap())
        .unwrap();
    assert_eq!(zstd::stream::decode_all(&frame[..]).unwrap(), text);
    // Random bytes do not shrink: base64, as without compression.
    let r = d.call(
        "fs.read",
        json!({"session_id": sid, "path": "noise.bin", "encoding": "zstd"}),
    );
    assert_eq!(r["encoding"], "base64");
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(r["content"].as_str().unwrap())
            .unwrap(),
        noise
    );

    // Compressed in: fs.write and exec.input.
    let r = d.call(
        "fs.write",
        json!({"session_id": sid, "path": "copy.txt", "encoding": "zstd",
               "content": b64(&zstd::bulk::compress(&text, 3).unwrap())}),
    );
    assert_eq!(r["bytes_written"], text.len());
    assert_eq!(std::fs::read(root.join("copy.txt")).unwrap(), text);
    let r = d.call(
        "exec.start",
        json!({"session_id": sid, "argv": ["wc", "-c"]}),
    );
    let pid = r["process_id"].as_str().unwrap().to_owned();
    let r = d.call(
        "exec.input",
        json!({"session_id": sid, "process_id": pid, "encoding": "zstd", "eof": true,
               "data": b64(&zstd::bulk::compress(&text, 3).unwrap())}),
    );
    assert_eq!(r["accepted_bytes"], text.len());
    let c = d.collect(&pid);
    assert_eq!(c.out().trim(), text.len().to_string());
}

/// A few kilobytes that inflate to a gigabyte: refused with the limit named, nothing written,
/// and the daemon carries on (its memory was never spent on it).
#[test]
fn a_bomb_is_refused_not_expanded() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let mut d = Daemon::rooted(&root);
    let r = d.call(
        "session.open",
        json!({"client_name": "z", "compression": ["zstd"]}),
    );
    let sid = r["session_id"].as_str().unwrap().to_owned();
    let bomb = bomb(1024);
    let e = d.call_err(
        "fs.write",
        json!({"session_id": sid, "path": "bomb", "content": bomb, "encoding": "zstd"}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("inflates past 16777216 bytes"),
        "{e}"
    );
    assert!(!root.join("bomb").exists());
    let r = d.call("exec.start", json!({"session_id": sid, "argv": ["cat"]}));
    let pid = r["process_id"].as_str().unwrap().to_owned();
    let e = d.call_err(
        "exec.input",
        json!({"session_id": sid, "process_id": pid, "data": bomb, "encoding": "zstd"}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    // The daemon's resident memory stayed far below what the bomb would inflate to.
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.pid())).unwrap();
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(rss_kib < 256 * 1024, "peak RSS {rss_kib} KiB");
    // Still serving: 16 MiB exactly is accepted.
    let r = d.call(
        "fs.write",
        json!({"session_id": sid, "path": "sixteen", "encoding": "zstd",
               "content": bomb_exact(16)}),
    );
    assert_eq!(r["bytes_written"], 16 << 20);
    d.call(
        "exec.input",
        json!({"session_id": sid, "process_id": pid, "data": "", "eof": true}),
    );
    let _: Value = d.collect(&pid).exit;
}

fn bomb_exact(mib: usize) -> String {
    b64(&zstd::bulk::compress(&vec![0u8; mib << 20], 1).unwrap())
}

fn client(root: &std::path::Path, compress: bool, piece: u64) -> Client {
    let config = root.join("rexd.toml");
    std::fs::write(
        &config,
        format!(
            "[limits]\nmax_file_read_bytes = {piece}\n[security]\nallow_shell = true\n\
             [[security.allowed_roots]]\npath = \"{}\"\n",
            root.display()
        ),
    )
    .unwrap();
    let spec = TargetSpec {
        rexd: Some(env!("CARGO_BIN_EXE_rexd").into()),
        rexd_args: vec!["--config".into(), config.display().to_string()],
        workspace_roots: vec![root.display().to_string()],
        ..TargetSpec::new("local")
    };
    // Without compression: the JSON-string path (raw frames have their own tests).
    let options = ConnectOptions {
        compress,
        raw_frames: false,
        ..ConnectOptions::default()
    };
    Client::connect(&spec, &options).unwrap()
}

/// The client library both ways: every byte back exact, with and without compression.
#[test]
fn the_client_reads_writes_and_streams_the_same_bytes_either_way() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    // A file that is text, then binary, then text again, across many pieces.
    let mut mixed = log_text(150_000);
    mixed.extend(random(70_000));
    mixed.extend(log_text(90_000));
    std::fs::write(root.join("mixed.bin"), &mixed).unwrap();
    for compress in [false, true] {
        let mut c = client(&root, compress, 64 * 1024);
        assert_eq!(c.compressed(), compress);
        let mut got = Vec::new();
        c.read_file(
            root.join("mixed.bin").to_str().unwrap(),
            0,
            None,
            &mut |b| {
                got.extend_from_slice(b);
                Ok(())
            },
        )
        .unwrap();
        assert!(
            got == mixed,
            "compress={compress}: {} bytes back",
            got.len()
        );
        let name = format!("w{compress}.bin");
        let path = root.join(&name);
        c.write_file(path.to_str().unwrap(), &mixed, &Default::default())
            .unwrap();
        assert!(std::fs::read(&path).unwrap() == mixed);
        let mut out = Vec::new();
        let exit = c
            .exec(
                deskwire::rexd::Program::argv(["seq", "1", "20000"]),
                &ExecOptions::default(),
                None,
                &mut |_, b| {
                    out.extend_from_slice(b);
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!((exit.exit_code, out), (Some(0), seq_text()));
        c.close().unwrap();
    }
}
