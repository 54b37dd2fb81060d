//! The audit log's `session.end` entries: every session that ends says why (`close`,
//! `disconnect`, `shutdown`, `idle`), through a real rexd on stdio and on `--listen`.

mod netkit;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use netkit::{Daemon, Place, REXD, TOKEN, curl};
use serde_json::{Value, json};

fn entries(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `(session_id, cause)` of every `session.end` entry, in order.
fn ends(path: &std::path::Path) -> Vec<(String, String)> {
    entries(path)
        .iter()
        .filter(|e| e["method"] == "session.end")
        .map(|e| {
            (
                e["session_id"].as_str().unwrap().to_owned(),
                e["result"]["cause"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// rexd --stdio with the audit on; sessions opened, one closed, then `end` (EOF or SIGTERM).
fn stdio_sessions(place: &Place, sigterm: bool) -> (Vec<String>, Vec<(String, String)>) {
    let mut command = Command::new(REXD);
    // As sshd sets it for `ssh host rexd --stdio` (the client's end first).
    if sigterm {
        command.env("SSH_CONNECTION", "203.0.113.7 51234 10.0.0.5 22");
    } else {
        command.env_remove("SSH_CONNECTION");
    }
    let mut child = command
        .args(["--stdio", "--config", place.config.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut call = |id: u64, method: &str, params: Value| -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{line}").unwrap();
        let mut answer = String::new();
        out.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap()
    };
    let mut ids = Vec::new();
    for n in 1..=2 {
        let open = call(n, "session.open", json!({"client_name": "audit"}));
        ids.push(open["result"]["session_id"].as_str().unwrap().to_owned());
    }
    let closed = call(3, "session.close", json!({"session_id": ids[0]}));
    assert_eq!(closed["result"]["ok"], true, "{closed}");
    if sigterm {
        let pid = child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
    } else {
        drop(stdin);
    }
    assert!(child.wait().unwrap().code().is_some());
    (ids, ends(&place.audit))
}

#[test]
fn stdio_sessions_end_by_close_disconnect_and_shutdown() {
    let place = Place::new("audit-eof");
    let (ids, ended) = stdio_sessions(&place, false);
    assert_eq!(
        ended,
        [
            (ids[0].clone(), "close".into()),
            (ids[1].clone(), "disconnect".into())
        ]
    );
    // Not under ssh: no address.
    assert!(
        entries(&place.audit)
            .iter()
            .all(|e| e.get("address").is_none())
    );
    let place = Place::new("audit-term");
    let (ids, ended) = stdio_sessions(&place, true);
    assert_eq!(
        ended,
        [
            (ids[0].clone(), "close".into()),
            (ids[1].clone(), "shutdown".into())
        ]
    );
    // Under ssh: every entry names the ssh client's end.
    let all = entries(&place.audit);
    assert!(all.len() >= 5, "{all:?}");
    for e in &all {
        assert_eq!(e["address"], "203.0.113.7:51234", "{e}");
    }
}

#[test]
fn a_pointed_session_left_idle_ends_as_idle() {
    let place = Place::new("audit-idle");
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--rpc-session-idle-ms",
            "300",
        ],
    );
    let open = curl(&[
        "-H",
        &format!("Authorization: Bearer {TOKEN}"),
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"curl"}}"#,
        &format!("{}/rpc", d.url),
    ]);
    let sid = open.json()["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    while ends(&place.audit).is_empty() {
        assert!(
            Instant::now() < deadline,
            "no session.end: {:?}",
            entries(&place.audit)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ends(&place.audit), [(sid, "idle".into())]);
    let entry = entries(&place.audit)
        .into_iter()
        .find(|e| e["method"] == "session.end")
        .unwrap();
    assert_eq!(entry["principal"], "alice", "{entry}");
    assert!(
        entry["address"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{entry}"
    );
}
