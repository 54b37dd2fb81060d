//! `Client::read_file` in pieces: text travels as utf8 (pieces end before a character cut in
//! two), binary switches to base64 at the first piece that is not UTF-8, and every byte comes
//! back exact. And the daemon side of it: a utf8 range ending inside a character, a range that
//! is not UTF-8 at all.

mod common;

use common::Daemon;
use rexd::client::{Client, ConnectOptions, TargetSpec};
use serde_json::json;

const PIECE: u64 = 1000;

fn client(root: &std::path::Path, config: &std::path::Path) -> Client {
    let spec = TargetSpec {
        rexd: Some(env!("CARGO_BIN_EXE_rexd").into()),
        rexd_args: vec!["--config".into(), config.display().to_string()],
        workspace_roots: vec![root.display().to_string()],
        ..TargetSpec::new("local")
    };
    // The JSON-string path (utf8, base64); raw frames have their own tests.
    let options = ConnectOptions {
        raw_frames: false,
        ..ConnectOptions::default()
    };
    Client::connect(&spec, &options).unwrap()
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap().join("w");
    std::fs::create_dir(&root).unwrap();
    let config = tmp.path().join("rexd.toml");
    std::fs::write(
        &config,
        format!(
            "[limits]\nmax_file_read_bytes = {PIECE}\n[[security.allowed_roots]]\npath = \"{}\"\n\
             [audit]\nenabled = true\npath = \"{}\"\n",
            root.display(),
            tmp.path().join("audit.log").display()
        ),
    )
    .unwrap();
    (tmp, root, config)
}

fn read_all(c: &mut Client, path: &std::path::Path) -> Vec<u8> {
    let mut got = Vec::new();
    c.read_file(path.to_str().unwrap(), 0, None, &mut |b| {
        got.extend_from_slice(b);
        Ok(())
    })
    .unwrap();
    got
}

#[test]
fn text_with_characters_across_pieces_binary_and_mixed_files_come_back_exact() {
    let (_tmp, root, config) = setup();
    let mut c = client(&root, &config);
    // 3- and 4-byte characters: piece boundaries fall inside them.
    let text: String = (0..3000)
        .map(|i| ["€", "𝄞", "a", "\n", "é"][i % 5])
        .collect();
    let binary: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut mixed = text.as_bytes()[..2500].to_vec();
    mixed.extend_from_slice(&binary);
    for (name, bytes) in [
        ("text.txt", text.as_bytes().to_vec()),
        ("binary.bin", binary),
        ("mixed.bin", mixed),
        ("empty", Vec::new()),
    ] {
        let path = root.join(name);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_all(&mut c, &path), bytes, "{name}");
    }
    c.close().unwrap();
    // Which encodings went over the wire, file by file, in order.
    let audit = std::fs::read_to_string(_tmp.path().join("audit.log")).unwrap();
    let encodings = |name: &str| -> Vec<String> {
        audit
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|e| {
                e["method"] == "fs.read" && e["params"]["path"].as_str().unwrap().ends_with(name)
            })
            .map(|e| e["params"]["encoding"].as_str().unwrap().to_owned())
            .collect()
    };
    let text_enc = encodings("text.txt");
    assert!(
        text_enc.len() >= 11 && text_enc.iter().all(|e| e == "utf8"),
        "{text_enc:?}"
    );
    assert_eq!(encodings("binary.bin")[..2], ["utf8", "base64"]);
    assert!(encodings("binary.bin")[1..].iter().all(|e| e == "base64"));
    let mixed = encodings("mixed.bin");
    // Text first, then base64 from the first piece that is not UTF-8 on, never back.
    let switch = mixed.iter().position(|e| e == "base64").unwrap();
    assert!(
        switch > 0 && mixed[switch..].iter().all(|e| e == "base64"),
        "{mixed:?}"
    );
}

#[test]
fn a_utf8_range_ends_before_a_cut_character_and_binary_says_where() {
    let (_tmp, root, config) = setup();
    std::fs::write(root.join("t.txt"), "ab€cd").unwrap();
    std::fs::write(root.join("b.bin"), b"ok\xff\xfe").unwrap();
    let mut d = Daemon::spawn(&["--config", config.to_str().unwrap()]);
    let sid = d.open_session();
    // Bytes 0..3 end inside the euro sign (bytes 2..5): two bytes come, marked short.
    let r = d.call(
        "fs.read",
        json!({"session_id": sid, "path": "t.txt", "offset": 0, "length": 3}),
    );
    assert_eq!(
        (r["content"].clone(), r["truncated"].clone()),
        (json!("ab"), json!(true))
    );
    let r = d.call(
        "fs.read",
        json!({"session_id": sid, "path": "t.txt", "offset": 2, "length": 5}),
    );
    assert_eq!(r["content"], "€cd");
    // Not UTF-8 at all: where the valid text ends, in the file's offsets.
    let e = d.call_err(
        "fs.read",
        json!({"session_id": sid, "path": "b.bin", "offset": 1}),
    );
    assert_eq!(
        (e["code"].clone(), e["data"]["valid_up_to"].clone()),
        (json!(-32602), json!(2))
    );
    // What to do instead, for a model's `read` tool too (which cannot ask for base64).
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with("b.bin is not UTF-8 text at byte 2 (a binary file?)")
            && message.contains("`file` or `xxd | head` describes it"),
        "{message}"
    );
}
