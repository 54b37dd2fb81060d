//! Sessions, file operations and the path-escape cases, against the real `rexd --stdio`.

mod common;

use std::path::Path;

use common::Daemon;
use serde_json::{Value, json};

fn setup() -> (tempfile::TempDir, tempfile::TempDir, Daemon, String) {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mut d = Daemon::rooted(root.path());
    let s = d.open_session();
    (root, outside, d, s)
}

fn canon(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn session_open_info_close() {
    let (root, _o, mut d, s) = setup();
    let info = d.call("session.info", json!({"session_id": s}));
    assert_eq!(info["cwd"], canon(root.path()));
    assert_eq!(info["workspace_roots"], json!([canon(root.path())]));
    assert_eq!(info["processes"], json!([]));
    assert_eq!(info["limits"]["max_output_bytes"], 1048576);
    // Limits can be lowered per session, never raised.
    let s2 = d.open_session_with(json!({"client_name": "t", "limits": {"max_output_bytes": 10, "hard_timeout_ms": 999999999}}));
    let info2 = d.call("session.info", json!({"session_id": s2}));
    assert_eq!(info2["limits"]["max_output_bytes"], 10);
    assert_eq!(info2["limits"]["hard_timeout_ms"], 300000);
    // A narrower workspace root is allowed; one outside is forbidden.
    std::fs::create_dir(root.path().join("sub")).unwrap();
    let r = d.call(
        "session.open",
        json!({"client_name": "t", "workspace_roots": [canon(&root.path().join("sub"))]}),
    );
    assert_eq!(
        r["workspace_roots"],
        json!([canon(&root.path().join("sub"))])
    );
    let e = d.call_err(
        "session.open",
        json!({"client_name": "t", "workspace_roots": ["/etc"]}),
    );
    assert_eq!(e["code"], -32002);
    let e = d.call_err(
        "session.open",
        json!({"client_name": "t", "requested_capabilities": ["teleport"]}),
    );
    assert_eq!(e["code"], -32007);
    assert_eq!(
        d.call("session.close", json!({"session_id": s})),
        json!({"ok": true})
    );
    let e = d.call_err("session.info", json!({"session_id": s}));
    assert_eq!(e["code"], -32602);
}

#[test]
fn write_read_stat_list_glob() {
    let (root, _o, mut d, s) = setup();
    let w = d.call(
        "fs.write",
        json!({"session_id": s, "path": "dir/a.txt", "content": "héllo\n", "mkdir_parents": true}),
    );
    assert_eq!(w["created"], true);
    assert_eq!(w["bytes_written"], 7);
    assert_eq!(
        std::fs::read_to_string(root.path().join("dir/a.txt")).unwrap(),
        "héllo\n"
    );
    let r = d.call("fs.read", json!({"session_id": s, "path": "dir/a.txt"}));
    assert_eq!(r["content"], "héllo\n");
    assert_eq!(r["size"], 7);
    assert_eq!(r["mtime"], w["mtime"]);
    assert_eq!(r["truncated"], false);
    // Offset/length and base64.
    let r = d.call("fs.read", json!({"session_id": s, "path": "dir/a.txt", "offset": 1, "length": 2, "encoding": "base64"}));
    assert_eq!(r["content"], "w6k=");
    // A cut inside a character is not silently altered in utf8 mode.
    let e = d.call_err(
        "fs.read",
        json!({"session_id": s, "path": "dir/a.txt", "offset": 1, "length": 1}),
    );
    assert_eq!(e["code"], -32602);
    // Append, binary content.
    d.call("fs.write", json!({"session_id": s, "path": "dir/a.txt", "content": "AP8=", "encoding": "base64", "mode": "append"}));
    assert_eq!(
        std::fs::read(root.path().join("dir/a.txt")).unwrap(),
        b"h\xc3\xa9llo\n\x00\xff"
    );
    // Stat.
    let st = d.call("fs.stat", json!({"session_id": s, "path": "dir/a.txt"}));
    assert_eq!(
        (st["exists"].clone(), st["type"].clone(), st["size"].clone()),
        (json!(true), json!("file"), json!(9))
    );
    let st = d.call("fs.stat", json!({"session_id": s, "path": "nope/x"}));
    assert_eq!(st["exists"], false);
    std::os::unix::fs::symlink("a.txt", root.path().join("dir/link")).unwrap();
    let st = d.call("fs.stat", json!({"session_id": s, "path": "dir/link"}));
    assert_eq!(
        (st["type"].clone(), st["symlink_target"].clone()),
        (json!("symlink"), json!("a.txt"))
    );
    // List, recursive list, max_entries.
    std::fs::write(root.path().join("top.md"), "x").unwrap();
    let l = d.call("fs.list", json!({"session_id": s, "path": "."}));
    let names: Vec<&str> = l["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dir", "top.md"]);
    let l = d.call(
        "fs.list",
        json!({"session_id": s, "path": ".", "recursive": true}),
    );
    assert_eq!(l["entries"].as_array().unwrap().len(), 4);
    let l = d.call(
        "fs.list",
        json!({"session_id": s, "path": ".", "recursive": true, "max_entries": 1}),
    );
    assert_eq!(l["entries"].as_array().unwrap().len(), 1);
    assert_eq!(l["truncated"], true);
    // Glob.
    let g = d.call("fs.glob", json!({"session_id": s, "pattern": "**/*.txt"}));
    assert_eq!(
        g["matches"],
        json!([format!("{}/dir/a.txt", canon(root.path()))])
    );
    let g = d.call("fs.glob", json!({"session_id": s, "pattern": "*.md"}));
    assert_eq!(
        g["matches"],
        json!([format!("{}/top.md", canon(root.path()))])
    );
    let g = d.call(
        "fs.glob",
        json!({"session_id": s, "pattern": "*", "cwd": "dir"}),
    );
    assert_eq!(g["matches"].as_array().unwrap().len(), 2);
}

#[test]
fn expected_mtime_and_create_mode() {
    let (root, _o, mut d, s) = setup();
    let w = d.call(
        "fs.write",
        json!({"session_id": s, "path": "f", "content": "1"}),
    );
    let mtime = w["mtime"].clone();
    let e = d.call_err(
        "fs.write",
        json!({"session_id": s, "path": "f", "content": "x", "mode": "create"}),
    );
    assert_eq!(e["code"], -32006);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let w2 = d.call(
        "fs.write",
        json!({"session_id": s, "path": "f", "content": "2", "expected_mtime": mtime}),
    );
    assert_ne!(w2["mtime"], mtime);
    // A stale mtime is a conflict and writes nothing.
    let e = d.call_err(
        "fs.write",
        json!({"session_id": s, "path": "f", "content": "3", "expected_mtime": mtime}),
    );
    assert_eq!(e["code"], -32006);
    assert_eq!(std::fs::read_to_string(root.path().join("f")).unwrap(), "2");
    let e = d.call_err(
        "fs.write",
        json!({"session_id": s, "path": "g", "content": "3", "expected_mtime": mtime}),
    );
    assert_eq!(e["code"], -32006);
    // Non-atomic replace works too; no temporary files are left behind.
    d.call(
        "fs.write",
        json!({"session_id": s, "path": "f", "content": "4", "atomic": false}),
    );
    assert_eq!(std::fs::read_to_string(root.path().join("f")).unwrap(), "4");
    let names: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["f"]);
}

#[test]
fn read_cap_truncates() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("big"), vec![b'a'; 5000]).unwrap();
    let mut d = Daemon::rooted(root.path());
    let s =
        d.open_session_with(json!({"client_name": "t", "limits": {"max_file_read_bytes": 1000}}));
    let r = d.call("fs.read", json!({"session_id": s, "path": "big"}));
    assert_eq!(r["content"].as_str().unwrap().len(), 1000);
    assert_eq!(r["truncated"], true);
    assert_eq!(r["size"], 5000);
}

/// Every way out of the root is refused with -32002, and nothing outside is read or touched.
#[test]
fn path_escapes_are_forbidden() {
    let (root, outside, mut d, s) = setup();
    let out = outside.path();
    std::fs::write(out.join("secret"), "secret").unwrap();
    let r = root.path();
    std::os::unix::fs::symlink(out, r.join("link_dir")).unwrap();
    std::os::unix::fs::symlink(out.join("secret"), r.join("link_file")).unwrap();
    std::os::unix::fs::symlink("../", r.join("up")).unwrap();
    std::os::unix::fs::symlink("/proc/self/root", r.join("procroot")).unwrap();
    std::fs::create_dir(r.join("sub")).unwrap();
    let outside_abs = canon(out);
    let paths = [
        "../secret".to_owned(),
        "sub/../../secret".to_owned(),
        format!("{outside_abs}/secret"),
        "/etc/passwd".to_owned(),
        "/proc/self/root/etc/passwd".to_owned(),
        format!(
            "{}/../{}",
            canon(r),
            out.file_name().unwrap().to_string_lossy()
        ),
        "link_dir/secret".to_owned(),
        "link_file".to_owned(),
        "up/etc".to_owned(),
        "procroot/etc/passwd".to_owned(),
        "procroot".to_owned(),
    ];
    for p in &paths {
        for (method, params) in [
            ("fs.read", json!({"session_id": s, "path": p})),
            (
                "fs.write",
                json!({"session_id": s, "path": p, "content": "pwned"}),
            ),
            (
                "fs.write",
                json!({"session_id": s, "path": format!("{p}/new"), "content": "pwned", "mkdir_parents": true}),
            ),
            (
                "fs.write",
                json!({"session_id": s, "path": p, "content": "pwned", "atomic": false}),
            ),
            (
                "fs.write",
                json!({"session_id": s, "path": p, "content": "pwned", "mode": "append"}),
            ),
            ("fs.list", json!({"session_id": s, "path": p})),
            (
                "fs.stat",
                json!({"session_id": s, "path": format!("{p}/x")}),
            ),
            (
                "exec.start",
                json!({"session_id": s, "argv": ["true"], "cwd": p}),
            ),
            (
                "pty.open",
                json!({"session_id": s, "argv": ["true"], "cwd": p}),
            ),
        ] {
            // link_file: stat of link_file/x is ENOTDIR-free "does not exist"? It must still not
            // leave the root; the error code check below covers the cases that name the file.
            let resp = d.request(method, params.clone());
            let code = resp["error"]["code"].clone();
            if method == "fs.stat" && (p == "link_file") {
                continue;
            }
            assert_eq!(code, json!(-32002), "{method} {params}: {resp}");
        }
    }
    for pattern in [
        "../*",
        "/etc/*",
        "link_dir/*",
        "up/*",
        "procroot/etc/*",
        "**/secret",
    ] {
        let resp = d.request("fs.glob", json!({"session_id": s, "pattern": pattern}));
        let ok_empty = resp["result"]["matches"] == json!([]);
        assert!(
            ok_empty || resp["error"]["code"] == json!(-32002),
            "glob {pattern}: {resp}"
        );
    }
    // Nothing outside was touched.
    let names: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["secret"]);
    assert_eq!(
        std::fs::read_to_string(out.join("secret")).unwrap(),
        "secret"
    );
    // Stat of an in-root symlink is fine and reports it (without following).
    let st = d.call("fs.stat", json!({"session_id": s, "path": "link_file"}));
    assert_eq!(st["type"], "symlink");
}

/// A directory swapped for a symlink to the outside while writes run: every write lands
/// inside or fails; the outside stays empty.
#[test]
fn symlink_swapped_in_during_writes() {
    let (root, outside, mut d, s) = setup();
    let r = root.path().to_owned();
    let out = outside.path().to_owned();
    std::fs::create_dir(r.join("d")).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (r, out, stop) = (r.clone(), out.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Swap d between a real directory and a symlink to the outside.
                let tmp = r.join(format!("tmp{n}"));
                if n.is_multiple_of(2) {
                    std::os::unix::fs::symlink(&out, &tmp).unwrap();
                } else {
                    std::fs::create_dir(&tmp).unwrap();
                }
                let _ = std::fs::remove_dir_all(r.join("old"));
                let _ = std::fs::remove_file(r.join("old"));
                let _ = std::fs::rename(r.join("d"), r.join("old"));
                // The daemon may have just written into `old`; a failed swap is retried.
                if std::fs::rename(&tmp, r.join("d")).is_ok() {
                    swaps += 1;
                } else {
                    let _ = std::fs::remove_dir(&tmp);
                    let _ = std::fs::remove_file(&tmp);
                }
                n += 1;
            }
            swaps
        })
    };
    let (mut ok, mut forbidden) = (0u32, 0u32);
    for i in 0..300 {
        for (atomic, mode) in [(true, "replace"), (false, "replace"), (false, "append")] {
            let resp = d.request(
                "fs.write",
                json!({"session_id": s, "path": format!("d/f{i}"), "content": "x", "atomic": atomic, "mode": mode}),
            );
            if resp.get("result").is_some() {
                ok += 1;
            } else {
                let code = resp["error"]["code"].as_i64().unwrap();
                // A swap can also leave `d` missing for a moment: not_found.
                assert!(code == -32002 || code == -32602 || code == -32009, "{resp}");
                forbidden += u32::from(code == -32002);
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 10, "the directory was swapped only {swaps} times");
    let leaked: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert!(leaked.is_empty(), "files written outside: {leaked:?}");
    // The race was exercised: writes landed inside, or were caught going through the link.
    assert!(
        ok + forbidden > 0,
        "no write met either state of the directory"
    );
}

#[test]
fn malformed_unknown_and_wrong_params_keep_serving() {
    let (_r, _o, mut d, s) = setup();
    d.send_raw("this is not json");
    let e = d.response_to(&Value::Null);
    assert_eq!(e["error"]["code"], -32700);
    d.send_raw(r#"{"jsonrpc":"2.0","id":"x","method":"fs.stat""#);
    let e = d.response_to(&Value::Null);
    assert_eq!(e["error"]["code"], -32700);
    d.send_raw(r#"{"jsonrpc":"1.0","id":5,"method":"fs.stat","params":{}}"#);
    let e = d.response_to(&json!(5));
    assert_eq!(e["error"]["code"], -32600);
    let e = d.call_err("fs.delete", json!({"session_id": s}));
    assert_eq!(e["code"], -32601);
    let e = d.call_err("exec.stdout", json!({"session_id": s}));
    assert_eq!(e["code"], -32601);
    for (m, p) in [
        ("fs.read", json!({"session_id": s})),
        ("fs.read", json!({"session_id": s, "path": 7})),
        ("exec.start", json!({"session_id": s, "argv": []})),
        (
            "exec.start",
            json!({"session_id": s, "argv": ["a"], "command": "b"}),
        ),
        (
            "exec.kill",
            json!({"session_id": s, "process_id": "p_1", "signal": "NUKE"}),
        ),
        ("session.open", json!([1, 2])),
        ("fs.read", json!({"session_id": "s_999", "path": "x"})),
    ] {
        let e = d.call_err(m, p.clone());
        assert_eq!(e["code"], -32602, "{m} {p}: {e}");
    }
    let e = d.call_err("exec.wait", json!({"session_id": s, "process_id": "p_404"}));
    assert_eq!(e["code"], -32005);
    // A line over the size limit is refused and the stream recovers.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"fs.stat","params":{{"session_id":"{s}","path":"{}"}}}}"#,
        "a".repeat(17 << 20)
    );
    d.send_raw(&huge);
    // Still serving.
    let st = d.call("fs.stat", json!({"session_id": s, "path": "."}));
    assert_eq!(st["type"], "dir");
}

#[test]
fn config_file_and_bad_config() {
    let root = tempfile::tempdir().unwrap();
    let audit = root.path().join("audit.log");
    let conf = root.path().join("rexd.toml");
    std::fs::write(
        &conf,
        format!(
            "[limits]\nmax_concurrent_sessions = 1\n[security]\nallow_shell = false\ndeny_commands = [\"rm\"]\n[[security.allowed_roots]]\npath = {:?}\n[audit]\nenabled = true\npath = {:?}\n",
            root.path(),
            audit
        ),
    )
    .unwrap();
    let mut d = Daemon::spawn(&["--config", conf.to_str().unwrap()]);
    let s = d.open_session();
    let e = d.call_err("session.open", json!({"client_name": "second"}));
    assert_eq!(e["code"], -32008);
    // It names the limit, and what holds the places.
    let said = e["message"].as_str().unwrap();
    assert!(
        said.contains("limits.max_concurrent_sessions") && said.contains("POST /rpc"),
        "{said}"
    );
    assert_eq!(e["data"]["limit"], 1);
    let e = d.call_err(
        "exec.start",
        json!({"session_id": s, "shell": true, "command": "true"}),
    );
    assert_eq!(e["code"], -32007);
    let e = d.call_err(
        "exec.start",
        json!({"session_id": s, "argv": ["/bin/rm", "-rf", "x"]}),
    );
    assert_eq!(e["code"], -32001);
    d.call(
        "fs.write",
        json!({"session_id": s, "path": "x", "content": "secret-content"}),
    );
    drop(d);
    let log = std::fs::read_to_string(&audit).unwrap();
    let entries: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(entries.len() >= 5, "{log}");
    let write = entries.iter().find(|e| e["method"] == "fs.write").unwrap();
    assert_eq!(write["client"], "test");
    assert_eq!(write["session_id"], s);
    assert!(write["ts"].as_str().unwrap().ends_with('Z'));
    assert!(!log.contains("secret-content"), "content must be redacted");
    let denied = entries
        .iter()
        .find(|e| e["params"]["argv"][0] == "/bin/rm")
        .unwrap();
    assert_eq!(denied["result"]["error"], -32001);

    // A bad config is a clear error on stderr and a non-zero exit.
    std::fs::write(&conf, "[limits]\nmax_output_bytes = \"lots\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rexd"))
        .args(["--stdio", "--config", conf.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("max_output_bytes") && err.contains("rexd.toml"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    // The spec's example parses, and on a machine without its directories the daemon says
    // which one is missing instead of starting half-configured.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/config.toml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rexd"))
        .args(["--stdio", "--config", example])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("/var/log/rexd/audit.log") || err.contains("/srv/myapp"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// A client that sends many large requests without reading the answers cannot make the daemon
/// buffer them: it stops reading requests while its output waits, and everything is answered
/// once the client reads.
#[test]
fn a_client_that_does_not_read_cannot_grow_the_daemon() {
    use std::io::{BufRead, BufReader, Write};
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("mb"), vec![b'x'; 1 << 20]).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rexd"))
        .args(["--stdio", "--root", root.path().to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":0,"method":"session.open","params":{{"client_name":"t"}}}}"#
    )
    .unwrap();
    assert!(out.read_line(&mut line).unwrap() > 0);
    let opened: serde_json::Value = serde_json::from_str(&line).unwrap();
    let sid = opened["result"]["session_id"].as_str().unwrap().to_owned();
    let n = 150;
    let writer = std::thread::spawn(move || {
        for i in 1..=n {
            writeln!(stdin, r#"{{"jsonrpc":"2.0","id":{i},"method":"fs.read","params":{{"session_id":"{sid}","path":"mb"}}}}"#).unwrap();
        }
        stdin
    });
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let rss = rexd::sys::rss_kib(pid).unwrap();
    // 150 answers of 1 MiB would be 150 MiB; the backlog stays near the high-water mark.
    assert!(
        rss < 64 * 1024,
        "daemon RSS {rss} KiB while its output is not read"
    );
    let mut answered = 0;
    while answered < n {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0);
        let head = &line[..line.len().min(64)];
        assert!(head.contains("\"result\":{"), "{head}");
        assert!(line.len() > 1 << 20, "{head}");
        answered += 1;
    }
    drop(writer.join().unwrap());
    child.wait().unwrap();
}

/// Errors say what was wrong: a mistyped field is named in the message (not only the generic
/// "Invalid params"), and a path that does not exist is `not_found`, not `invalid_params`.
#[test]
fn errors_name_the_field_and_missing_paths_are_not_found() {
    let (root, _o, mut d, s) = setup();
    let e = d.call_err(
        "fs.write",
        json!({"session_id": s, "path": 5, "content": "x"}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    assert_eq!(
        e["message"], "path: invalid type: integer `5`, expected a string",
        "{e}"
    );
    let missing = root.path().join("nope.txt");
    for (method, params) in [
        ("fs.read", json!({"session_id": s, "path": "nope.txt"})),
        ("fs.list", json!({"session_id": s, "path": "nodir"})),
        (
            "fs.write",
            json!({"session_id": s, "path": "nodir/a.txt", "content": "x"}),
        ),
        (
            "exec.start",
            json!({"session_id": s, "argv": ["true"], "cwd": "nodir"}),
        ),
    ] {
        let e = d.call_err(method, params);
        assert_eq!(e["code"], -32009, "{method}: {e}");
        assert_eq!(e["data"]["errno"], 2, "{method}: {e}");
    }
    let e = d.call_err("fs.read", json!({"session_id": s, "path": "nope.txt"}));
    assert!(
        e["message"].as_str().unwrap().contains("nope.txt"),
        "{e} names {missing:?}"
    );
}

/// A hard link inside the root to a file outside it: reads are refused unless
/// `security.read_hard_links` is on, writes that would go through the link are always refused,
/// and an atomic write replaces the name without touching the outside file.
#[test]
fn hard_links_out_of_the_root() {
    let (root, outside, mut d, s) = setup();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "outside\n").unwrap();
    std::fs::hard_link(&secret, root.path().join("link")).unwrap();
    let e = d.call_err("fs.read", json!({"session_id": s, "path": "link"}));
    assert_eq!(e["code"], -32002, "{e}");
    assert_eq!(e["data"]["nlink"], 2, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("read_hard_links"),
        "{e}"
    );
    for (atomic, mode) in [(false, "replace"), (false, "append"), (true, "append")] {
        let e = d.call_err(
            "fs.write",
            json!({"session_id": s, "path": "link", "content": "pwned\n", "atomic": atomic, "mode": mode}),
        );
        assert_eq!(e["code"], -32002, "{atomic} {mode}: {e}");
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "outside\n");
    }
    // An atomic replace breaks the link instead of writing through it.
    d.call(
        "fs.write",
        json!({"session_id": s, "path": "link", "content": "inside\n"}),
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "outside\n");
    assert_eq!(
        std::fs::read_to_string(root.path().join("link")).unwrap(),
        "inside\n"
    );
    let r = d.call("fs.read", json!({"session_id": s, "path": "link"}));
    assert_eq!(r["content"], "inside\n");
    drop(d);

    // Reading linked files is a config choice.
    std::fs::hard_link(&secret, root.path().join("link2")).unwrap();
    let conf = outside.path().join("rexd.toml");
    std::fs::write(
        &conf,
        format!(
            "[security]\nread_hard_links = true\n[[security.allowed_roots]]\npath = {:?}\n",
            root.path()
        ),
    )
    .unwrap();
    let mut d = Daemon::spawn(&["--config", conf.to_str().unwrap()]);
    let s = d.open_session();
    let r = d.call("fs.read", json!({"session_id": s, "path": "link2"}));
    assert_eq!(r["content"], "outside\n");
    let e = d.call_err(
        "fs.write",
        json!({"session_id": s, "path": "link2", "content": "x", "atomic": false}),
    );
    assert_eq!(e["code"], -32002, "{e}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "outside\n");
}

/// A FIFO in the root (any command can make one) neither hangs a read nor a write.
#[test]
fn fifos_do_not_hang_the_daemon() {
    let (root, _o, mut d, s) = setup();
    let fifo = root.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let e = d.call_err("fs.read", json!({"session_id": s, "path": "fifo"}));
    assert_eq!(e["code"], -32602, "{e}");
    for atomic in [false, true] {
        let r = d.request(
            "fs.write",
            json!({"session_id": s, "path": "fifo", "content": "x", "atomic": atomic}),
        );
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }
    let st = d.call("fs.stat", json!({"session_id": s, "path": "fifo"}));
    assert_eq!(st["type"], "other");
}

/// Thousands of garbage lines (random bytes, broken and odd JSON): every line rexd writes is
/// JSON, nothing crashes, and a real request still gets its answer.
#[test]
fn garbage_input_never_breaks_the_daemon() {
    let root = tempfile::tempdir().unwrap();
    let mut d = Daemon::spawn(&[
        "--root",
        root.path().to_str().unwrap(),
        "--log-level",
        "error",
    ]);
    let s = d.open_session();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let shapes = [
        r#"{"jsonrpc":"2.0","id":1,"method":"fs.read","params":{"session_id":"SID","path":PATH}}"#,
        r#"{"jsonrpc":"2.0","id":"x","method":"exec.start","params":{"session_id":"SID","argv":PATH}}"#,
        r#"{"jsonrpc":"2.0","id":[],"method":"fs.stat"}"#,
        r#"{"jsonrpc":"2.0","id":1e400,"method":"fs.stat","params":{}}"#,
        r#"[{"jsonrpc":"2.0","method":"x"},1,"a",{"jsonrpc":"2.0","id":3,"method":"fs.stat","params":{"session_id":"SID","path":PATH}}]"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"pty.resize","params":{"session_id":"SID","pty_id":PATH,"cols":70000,"rows":-1}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"fs.write","params":{"session_id":"SID","path":PATH,"content":"!!","encoding":"base64"}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"exec.kill","params":{"session_id":"SID","process_id":PATH,"signal":"KILL"}}"#,
    ];
    let paths = [
        r#""../x""#,
        r#""/etc""#,
        r#""\u0000""#,
        "null",
        "7",
        r#"["a"]"#,
        r#""ok""#,
        r#""a/b/""#,
    ];
    for i in 0..3000u64 {
        let r = next();
        let line = match r % 4 {
            0 => {
                let len = (next() % 200) as usize;
                let bytes: Vec<u8> = (0..len)
                    .map(|_| (next() % 256) as u8)
                    .filter(|b| *b != b'\n')
                    .collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
            1 => {
                let full = shapes[(next() % shapes.len() as u64) as usize]
                    .replace("SID", &s)
                    .replace("PATH", paths[(next() % paths.len() as u64) as usize]);
                let cut = (next() as usize) % (full.len() + 1);
                full[..full.floor_char_boundary(cut)].to_owned()
            }
            _ => shapes[(next() % shapes.len() as u64) as usize]
                .replace("SID", &s)
                .replace("PATH", paths[(next() % paths.len() as u64) as usize]),
        };
        d.send_raw(&line);
        if i % 500 == 0 {
            // Still serving, in the middle of it all.
            let st = d.call("fs.stat", json!({"session_id": s, "path": "."}));
            assert_eq!(st["type"], "dir");
        }
    }
    let st = d.call("fs.stat", json!({"session_id": s, "path": "."}));
    assert_eq!(st["exists"], true);
    assert!(d.child.try_wait().unwrap().is_none(), "rexd exited");
}
