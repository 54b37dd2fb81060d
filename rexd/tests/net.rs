//! `rexd --listen` against clients it did not write: curl for `POST /rpc`, the Python
//! `websockets` library for `/ws`, curl with client certificates and `openssl s_client` for
//! mTLS (certificates made for the run with openssl), and raw sockets for what no polite client
//! does (slow headers, stalled handshakes).

mod netkit;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use netkit::*;
use serde_json::json;

fn open_session(url: &str) -> String {
    let r = post(
        url,
        Some(TOKEN),
        r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"curl"}}"#,
    );
    assert_eq!(r.status, 200, "{r:?}");
    r.json()["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn pointed_calls_over_curl() {
    let place = Place::new("net-rpc");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    // Pointed calls do no streaming and cannot be resumed: not offered, even when asked.
    let open = post(
        &d.url,
        Some(TOKEN),
        r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"curl","resumable":true}}"#,
    )
    .json();
    let offered = open["result"]["capabilities"].as_array().unwrap();
    assert!(offered.contains(&json!("exec")), "{open}");
    assert!(
        !offered.contains(&json!("events")) && !offered.contains(&json!("resume")),
        "{open}"
    );
    assert!(open["result"].get("resume").is_none(), "{open}");
    let sid = open_session(&d.url);
    // A batch: start, then wait for it; answered as one array.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "exec.start",
         "params": {"session_id": sid, "argv": ["sh", "-c", "echo out; exit 4"]}},
        {"jsonrpc": "2.0", "id": 2, "method": "exec.wait",
         "params": {"session_id": sid, "process_id": "p_1", "timeout_ms": 10000}},
    ]);
    let r = post(&d.url, Some(TOKEN), &batch.to_string());
    assert_eq!(r.status, 200, "{r:?}");
    let answers = r.json();
    let wait = answers
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == 2)
        .unwrap();
    assert_eq!(wait["result"]["status"], "exited", "{answers}");
    assert_eq!(wait["result"]["exit_code"], 4);
    assert_eq!(wait["result"]["bytes_stdout"], 4);
    // Files, pretty-printed over several lines.
    let write = format!(
        "{{\n  \"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"fs.write\",\n  \"params\": {{\"session_id\": \"{sid}\", \"path\": \"a.txt\", \"content\": \"x\\ny\\n\"}}\n}}"
    );
    assert_eq!(
        post(&d.url, Some(TOKEN), &write).json()["result"]["bytes_written"],
        4
    );
    let read = json!({"jsonrpc": "2.0", "id": 4, "method": "fs.read",
                      "params": {"session_id": sid, "path": "a.txt"}});
    let r = post(&d.url, Some(TOKEN), &read.to_string());
    assert_eq!(r.json()["result"]["content"], "x\ny\n");
    assert_eq!(std::fs::read(place.work.join("a.txt")).unwrap(), b"x\ny\n");
    // Not JSON: JSON-RPC's parse error, in a 200 (the HTTP exchange itself went fine).
    let r = post(&d.url, Some(TOKEN), "this is not json");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (200, json!(-32700))
    );
    // Another client's token cannot see the session; its own can, from a fresh connection.
    let info = json!({"jsonrpc": "2.0", "id": 5, "method": "session.info",
                      "params": {"session_id": sid}});
    let r = post(&d.url, Some(OTHER_TOKEN), &info.to_string());
    assert_eq!(r.json()["error"]["code"], -32602, "{r:?}");
    assert_eq!(
        post(&d.url, Some(TOKEN), &info.to_string()).json()["result"]["session_id"],
        sid.as_str()
    );
    // Notifications only: nothing to answer.
    let r = post(
        &d.url,
        Some(TOKEN),
        r#"{"jsonrpc":"2.0","method":"anything"}"#,
    );
    assert_eq!((r.status, r.body.as_str()), (204, ""));
    // The audit log names the client by its token's label.
    let audit = place.audit_lines();
    let exec = audit.iter().find(|e| e["method"] == "exec.start").unwrap();
    assert_eq!(exec["principal"], "alice", "{exec}");
    assert_eq!(exec["client"], "curl");
    // Bob's probe of alice's session is in the log as a refusal (who, and the session he
    // named); nothing of it ran.
    let bobs = audit
        .iter()
        .filter(|e| e["principal"] == "bob")
        .collect::<Vec<_>>();
    assert_eq!(bobs.len(), 1, "{bobs:?}");
    assert_eq!(bobs[0]["method"], "session.info", "{bobs:?}");
    assert_eq!(bobs[0]["session_id"], sid.as_str(), "{bobs:?}");
    assert_eq!(bobs[0]["result"]["error"], -32602, "{bobs:?}");
    assert!(d.stop().success());
}

/// `POST /rpc` has no event stream, so a session of pointed calls keeps its commands' output
/// until `exec.wait` with `output: true` takes it: what came since the last take, UTF-8 or
/// base64, with the count of bytes past the bound.
#[test]
fn pointed_calls_take_a_commands_output_with_exec_wait() {
    let place = Place::new("net-rpc-output");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let sid = open_session(&d.url);
    let call = |id: u64, method: &str, params: serde_json::Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let r = post(&d.url, Some(TOKEN), &body.to_string());
        assert_eq!(r.status, 200, "{r:?}");
        r.json()
    };
    let start = |id: u64, script: &str| {
        let r = call(
            id,
            "exec.start",
            json!({"session_id": sid, "argv": ["sh", "-c", script]}),
        );
        r["result"]["process_id"].as_str().unwrap().to_owned()
    };
    let wait = |id: u64, process: &str, timeout_ms: Option<u64>| {
        let mut params = json!({"session_id": sid, "process_id": process, "output": true});
        if let Some(t) = timeout_ms {
            params["timeout_ms"] = json!(t);
        }
        call(id, "exec.wait", params)["result"].clone()
    };

    let p = start(1, "echo out; echo err >&2; exit 3");
    let r = wait(2, &p, None);
    assert_eq!(
        (r["status"].clone(), r["exit_code"].clone()),
        (json!("exited"), json!(3))
    );
    assert_eq!(r["output"]["stdout"], "out\n", "{r}");
    assert_eq!(r["output"]["stderr"], "err\n", "{r}");
    assert_eq!(r["output"]["encoding"], "utf8");
    assert_eq!(r["output"]["dropped_bytes"], 0);
    // Taken: asking again gives nothing new.
    let r = wait(3, &p, None);
    assert_eq!(r["output"]["stdout"], "", "{r}");

    // While it runs: a wait that times out answers what came so far; the next, the rest.
    let p = start(4, "echo first; sleep 1; echo second");
    let r = wait(5, &p, Some(300));
    assert_eq!(r["status"], "running", "{r}");
    assert_eq!(r["output"]["stdout"], "first\n", "{r}");
    let r = wait(6, &p, Some(20_000));
    assert_eq!(r["status"], "exited", "{r}");
    assert_eq!(r["output"]["stdout"], "second\n", "{r}");

    // Bytes that are not UTF-8 come as base64.
    let p = start(7, "printf '\\377'");
    let r = wait(8, &p, None);
    assert_eq!(r["output"]["encoding"], "base64", "{r}");
    assert_eq!(r["output"]["stdout"], "/w==", "{r}");

    // Without `output`, the answer is the spec's.
    let p = start(9, "echo quiet");
    let r = call(
        10,
        "exec.wait",
        json!({"session_id": sid, "process_id": p, "timeout_ms": 20_000}),
    );
    assert!(r["result"].get("output").is_none(), "{r}");
}

#[test]
fn bad_requests_get_http_answers_and_nothing_more() {
    let place = Place::new("net-bad");
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--max-message-bytes",
            "4096",
        ],
    );
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"x"}}"#;
    // No token, a wrong one, another scheme: 401, an empty body, no hint.
    for token in [None, Some("not-the-token-not-the-token-xx")] {
        let r = post(&d.url, token, body);
        assert_eq!((r.status, r.body.as_str()), (401, ""), "{token:?}");
    }
    // The operator's log says who, when and what, for fail2ban and the like (never the token).
    d.wait_for_log_lines("no bearer token, or a wrong one (POST /rpc)", 2);
    let refused: Vec<String> = d
        .stderr()
        .lines()
        .filter(|l| l.contains("no bearer token, or a wrong one"))
        .map(str::to_owned)
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    for line in &refused {
        let (time, rest) = line.split_once(' ').unwrap();
        assert!(
            time.len() == "2026-11-29T05:00:00.123Z".len()
                && time.ends_with('Z')
                && time.as_bytes()[10] == b'T',
            "a UTC timestamp first: {line}"
        );
        assert!(rest.starts_with("rexd: warn: refused 127.0.0.1:"), "{line}");
        assert!(!line.contains("not-the-token"), "{line}");
    }
    let r = curl(&[
        "-X",
        "POST",
        "-H",
        "Authorization: Basic YWxpY2U6eA==",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        body,
        &format!("{}/rpc", d.url),
    ]);
    assert_eq!((r.status, r.body.as_str()), (401, ""));
    // Even a path that does not exist says 401 first.
    let r = curl(&[&format!("{}/nothing", d.url)]);
    assert_eq!(r.status, 401);
    let auth = format!("Authorization: Bearer {TOKEN}");
    let r = curl(&["-H", &auth, &format!("{}/nothing", d.url)]);
    assert_eq!(r.status, 404);
    // The wrong method, the wrong content type, an empty body, an oversized one.
    let r = curl(&["-H", &auth, &format!("{}/rpc", d.url)]);
    assert_eq!(r.status, 405);
    let r = curl(&[
        "-X",
        "POST",
        "-H",
        &auth,
        "--data-binary",
        body,
        &format!("{}/rpc", d.url),
    ]);
    assert_eq!(r.status, 415, "form-encoded is not JSON-RPC");
    let r = post(&d.url, Some(TOKEN), "  ");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32600))
    );
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"session.open","params":{{"client_name":"{}"}}}}"#,
        "x".repeat(5000)
    );
    let r = post(&d.url, Some(TOKEN), &big);
    assert_eq!(r.status, 413, "{r:?}");
    // Chunked, so the size is only found out while reading.
    let r = curl(&[
        "-X",
        "POST",
        "-H",
        &auth,
        "-H",
        "Content-Type: application/json",
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        &big,
        &format!("{}/rpc", d.url),
    ]);
    assert_eq!(r.status, 413, "{r:?}");
    // The daemon is still fine.
    open_session(&d.url);
    assert!(d.stop().success());
}

#[test]
fn refuses_to_start_without_auth_or_on_a_public_address() {
    let place = Place::new("net-refuse");
    let tokens = place.tokens.to_str().unwrap();
    let config = place.config.to_str().unwrap();
    for (args, want) in [
        (
            vec!["--listen", "127.0.0.1:0"],
            "--token-file or --client-ca",
        ),
        (
            vec!["--listen", "0.0.0.0:0", "--token-file", tokens],
            "not a loopback or private address",
        ),
        (
            vec!["--listen", "192.168.0.1:0", "--token-file", tokens],
            "cross the network in clear",
        ),
        (
            vec!["--listen", "127.0.0.1:0", "--client-ca", tokens],
            "--client-ca needs --tls-cert",
        ),
        (
            vec![
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                tokens,
                "--tls-cert",
                tokens,
            ],
            "go together",
        ),
        (vec!["--token-file", tokens], "--listen"),
        // A --listen flag given to another mode is an error, not a flag left unused.
        (
            vec!["--stdio", "--tls-cert", tokens],
            "--tls-cert is a flag of --listen ADDR",
        ),
        (
            vec!["--mcp", "--max-connections", "3"],
            "--max-connections is a flag of --listen ADDR",
        ),
        (
            vec!["--listen", "localhost", "--token-file", tokens],
            "an address and port, like 127.0.0.1:7070",
        ),
        (
            vec![
                "--listen",
                "nosuchhost.invalid:7070",
                "--token-file",
                tokens,
            ],
            "does not resolve",
        ),
        (
            vec![
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                tokens,
                "--allow-origin",
                "desk.example",
            ],
            "an origin is scheme://host[:port]",
        ),
    ] {
        let mut all = vec!["--config", config];
        all.extend(args.iter().copied());
        let (code, stderr) = refused(&all);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    // A token file others can read.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&place.tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, stderr) = refused(&["--listen", "127.0.0.1:0", "--token-file", tokens]);
    assert_eq!(code, 2);
    assert!(stderr.contains("chmod 600"), "{stderr}");
    // Said alone: no confinement line or warning of a daemon that never serves before it.
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("rexd: --token-file"), "{stderr}");
}

#[test]
fn listens_on_a_host_name() {
    let place = Place::new("net-host-name");
    let d = Daemon::start_at(
        &place,
        "localhost:0",
        &["--token-file", place.tokens.to_str().unwrap()],
    );
    assert!(
        d.url.starts_with("http://127.0.0.1:") || d.url.starts_with("http://[::1]:"),
        "{}",
        d.url
    );
    d.stop();
}

/// Reads until EOF or `limit`; `true` when the server closed the connection.
fn closed_by_server(stream: &mut TcpStream, limit: Duration) -> bool {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// A flood of bad requests does not flood the log: five lines a minute per address, the
/// last saying that more are counted; every request still gets its 401.
#[test]
fn refusals_are_logged_a_few_a_minute_per_address() {
    let place = Place::new("net-refusals");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"x"}}"#;
    for _ in 0..12 {
        assert_eq!(
            post(&d.url, Some("not-the-token-not-the-token-xx"), body).status,
            401
        );
    }
    d.wait_for_log("counted, not logged");
    let log = d.stderr();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("refused 127.0.0.1:"))
        .collect();
    assert_eq!(refused.len(), 5, "{log}");
    assert!(
        refused[4].ends_with("(more from 127.0.0.1 this minute are counted, not logged)"),
        "{log}"
    );
}

#[test]
fn slow_headers_and_stalled_handshakes_are_cut_off() {
    let place = Place::new("net-slow");
    let certs = Certs::make(place.path());
    let plain = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--header-timeout-ms",
            "300",
        ],
    );
    let mut s = TcpStream::connect(("127.0.0.1", plain.port)).unwrap();
    s.write_all(b"POST /rpc HTTP/1.1\r\nHost: x\r\n").unwrap();
    // The rest of the headers never come: the daemon hangs up (no answer is owed).
    assert!(closed_by_server(&mut s, Duration::from_secs(15)));
    let tls = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--tls-cert",
            certs.server_cert.to_str().unwrap(),
            "--tls-key",
            certs.server_key.to_str().unwrap(),
            "--header-timeout-ms",
            "300",
        ],
    );
    let mut s = TcpStream::connect(("127.0.0.1", tls.port)).unwrap();
    // Not even a ClientHello.
    assert!(closed_by_server(&mut s, Duration::from_secs(15)));
    tls.wait_for_log("no TLS handshake within 300 ms");
    // Plain HTTP to the TLS port: the handshake fails, and the log says so with the address.
    let mut s = TcpStream::connect(("127.0.0.1", tls.port)).unwrap();
    s.write_all(b"POST /rpc HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert!(closed_by_server(&mut s, Duration::from_secs(15)));
    tls.wait_for_log("the TLS handshake failed");
    let log = tls.stderr();
    assert!(
        log.lines()
            .filter(|l| l.contains("TLS handshake"))
            .all(|l| l.contains("rexd: warn: refused 127.0.0.1:")),
        "{log}"
    );
    // Both still serve.
    open_session(&plain.url);
    let r = curl(&[
        "--cacert",
        certs.ca.to_str().unwrap(),
        "-X",
        "POST",
        "-H",
        &format!("Authorization: Bearer {TOKEN}"),
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"tls"}}"#,
        &format!("{}/rpc", tls.url),
    ]);
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn mtls_with_curl_and_openssl_s_client() {
    let place = Place::new("net-mtls");
    let certs = Certs::make(place.path());
    let d = Daemon::start(
        &place,
        &[
            "--tls-cert",
            certs.server_cert.to_str().unwrap(),
            "--tls-key",
            certs.server_key.to_str().unwrap(),
            "--client-ca",
            certs.ca.to_str().unwrap(),
        ],
    );
    assert!(d.url.starts_with("https://"), "{}", d.url);
    let body =
        r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"mtls"}}"#;
    let url = format!("{}/rpc", d.url);
    let base = [
        "--cacert",
        certs.ca.to_str().unwrap(),
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        body,
    ];
    // With the CA's client certificate: served, and named by its subject in the audit.
    let mut args = base.to_vec();
    args.extend([
        "--cert",
        certs.client_cert.to_str().unwrap(),
        "--key",
        certs.client_key.to_str().unwrap(),
        &url,
    ]);
    let r = curl(&args);
    assert_eq!(r.status, 200, "{r:?}");
    let sid = r.json()["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Without one, or with another CA's: the handshake fails, no HTTP at all.
    let mut args = base.to_vec();
    args.push(&url);
    let r = curl(&args);
    assert_eq!(r.status, 0, "{r:?}");
    assert_ne!(r.exit, 0);
    let mut args = base.to_vec();
    args.extend([
        "--cert",
        certs.rogue_cert.to_str().unwrap(),
        "--key",
        certs.rogue_key.to_str().unwrap(),
        &url,
    ]);
    let r = curl(&args);
    assert_eq!(r.status, 0, "{r:?}");
    // openssl s_client: a raw HTTP request through a verified mTLS session.
    let info = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"session.info","params":{{"session_id":"{sid}"}}}}"#
    );
    let request = format!(
        "POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{info}",
        info.len()
    );
    let s_client = |cert: &std::path::Path, key: &std::path::Path| {
        let mut child = Command::new("openssl")
            .args(["s_client", "-quiet", "-verify_return_error", "-connect"])
            .arg(format!("127.0.0.1:{}", d.port))
            .arg("-CAfile")
            .arg(&certs.ca)
            .arg("-cert")
            .arg(cert)
            .arg("-key")
            .arg(key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(request.as_bytes())
            .unwrap();
        // stdin stays open until the server closes (Connection: close), as s_client needs.
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let answer = s_client(&certs.client_cert, &certs.client_key);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains(&format!("\"session_id\":\"{sid}\"")),
        "{answer}"
    );
    let answer = s_client(&certs.rogue_cert, &certs.rogue_key);
    assert!(!answer.contains("HTTP/1.1"), "{answer}");
    let audit = place.audit_lines();
    let open = audit
        .iter()
        .find(|e| e["method"] == "session.open")
        .unwrap();
    assert_eq!(open["principal"], "CN=alice,O=ops", "{open}");
}

#[test]
fn mtls_and_token_together_need_both() {
    let place = Place::new("net-both");
    let certs = Certs::make(place.path());
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--tls-cert",
            certs.server_cert.to_str().unwrap(),
            "--tls-key",
            certs.server_key.to_str().unwrap(),
            "--client-ca",
            certs.ca.to_str().unwrap(),
        ],
    );
    let body =
        r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"both"}}"#;
    let url = format!("{}/rpc", d.url);
    let with = |token: Option<&str>| {
        let auth = token.map(|t| format!("Authorization: Bearer {t}"));
        let mut args = vec![
            "--cacert",
            certs.ca.to_str().unwrap(),
            "--cert",
            certs.client_cert.to_str().unwrap(),
            "--key",
            certs.client_key.to_str().unwrap(),
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            body,
        ];
        if let Some(a) = &auth {
            args.extend(["-H", a.as_str()]);
        }
        args.push(&url);
        curl(&args)
    };
    assert_eq!(with(None).status, 401);
    assert_eq!(with(Some(TOKEN)).status, 200);
    let audit = place.audit_lines();
    assert_eq!(audit[0]["principal"], "alice (CN=alice,O=ops)", "{audit:?}");
}

fn ws_env() -> Vec<(&'static str, &'static str)> {
    vec![("REXD_TOKEN", TOKEN), ("REXD_OTHER_TOKEN", OTHER_TOKEN)]
}

#[test]
fn websocket_sessions_with_python_websockets() {
    let place = Place::new("net-ws");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    run_python("ws_clients.py", &["refused", &d.url], &ws_env());
    run_python("ws_clients.py", &["session", &d.url], &ws_env());
    let audit = place.audit_lines();
    let exec = audit.iter().find(|e| e["method"] == "exec.exit").unwrap();
    assert_eq!(exec["principal"], "alice");
    assert!(d.stop().success());
}

#[test]
fn two_hundred_concurrent_websocket_sessions() {
    let place = Place::new("net-200");
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--max-connections",
            "256",
            // One client (alice) opens them all.
            "--max-connections-per-principal",
            "256",
            "--max-sessions-per-principal",
            "256",
        ],
    );
    let out = run_python("ws_clients.py", &["concurrent", &d.url, "200"], &ws_env());
    assert!(out.contains("\"sessions\": 200"), "{out}");
    let audit = place.audit_lines();
    let exits = audit.iter().filter(|e| e["method"] == "exec.exit").count();
    assert_eq!(exits, 200);
    assert!(
        audit
            .iter()
            .filter(|e| e["method"] == "exec.exit")
            .all(|e| e["result"]["exit_code"] == 0)
    );
    assert!(d.stop().success());
}

#[test]
fn websocket_flood_waits_in_the_clients_socket() {
    let place = Place::new("net-flood");
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--max-unsent-bytes",
            "262144",
            "--slow-reader-ms",
            "60000",
        ],
    );
    let before = d.rss_kib();
    let mut flood = PyScript::spawn("ws_clients.py", &["flood", &d.url, "200000"], &ws_env());
    let facts = flood.next();
    assert_eq!(
        facts["blocked"], true,
        "the daemon took the whole flood: {facts}"
    );
    let after = d.rss_kib();
    // Sent requests beyond what the daemon holds wait in the kernel's buffers, not in rexd.
    assert!(
        after < before + 64 * 1024,
        "rexd grew from {before} KiB to {after} KiB under the flood"
    );
    flood.go_on();
    let done = flood.next();
    assert_eq!(
        done["answered"], facts["sent"],
        "answers lost: {done} {facts}"
    );
    flood.finish();
}

#[test]
fn an_oversized_websocket_message_closes_with_1009() {
    let place = Place::new("net-big");
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--max-message-bytes",
            "65536",
        ],
    );
    run_python("ws_clients.py", &["oversize", &d.url, "65536"], &ws_env());
    d.wait_for_log("message over the daemon's --max-message-bytes");
    open_session(&d.url);
    // rex says what to do about it.
    let big = "x".repeat(100_000);
    let (code, _, err) = rex(
        &["-t", &d.url, "write", "big.txt", "--content", &big],
        &[("REXD_TOKEN", TOKEN)],
    );
    assert_eq!(code, 255, "{err}");
    assert!(
        err.contains("(1009)") && err.contains("rex write --append"),
        "{err}"
    );
}

#[test]
fn a_websocket_client_that_stops_reading_is_dropped() {
    let place = Place::new("net-slowreader");
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--max-unsent-bytes",
            "262144",
            "--slow-reader-ms",
            "500",
        ],
    );
    let mut slow = PyScript::spawn("ws_clients.py", &["slow_reader", &d.url], &ws_env());
    slow.next();
    d.wait_for_log("slow reader");
    let rss = d.rss_kib();
    assert!(
        rss < 128 * 1024,
        "rexd holds {rss} KiB for a client that does not read"
    );
    slow.go_on();
    let facts = slow.next();
    // The close frame gets through when the socket has room; otherwise the TCP connection
    // just ends (no code). Either way the session and its command are gone.
    assert!(
        facts["close"] == 1008 || facts["close"].is_null(),
        "{facts}"
    );
    slow.finish();
    let audit = place.audit_lines();
    let exit = audit.iter().find(|e| e["method"] == "exec.exit").unwrap();
    assert!(exit["result"]["signal"].is_string(), "{exit}");
}

/// `rexd --stdio` starts no runtime: one thread, however many requests it serves.
#[test]
fn stdio_runs_on_one_thread() {
    use std::io::{BufRead, BufReader};
    let place = Place::new("net-stdio");
    let mut child = Command::new(REXD)
        .args(["--stdio", "--config"])
        .arg(&place.config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.open\",\"params\":{\"client_name\":\"t\"}}\n")
        .unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("\"session_id\""), "{line}");
    let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id()))
        .unwrap()
        .count();
    assert_eq!(tasks, 1, "rexd --stdio runs {tasks} threads");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn rex_over_https_with_a_token_and_over_mtls() {
    let place = Place::new("net-rex");
    let certs = Certs::make(place.path());
    let token_file = place.path().join("client-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let tls = [
        "--tls-cert",
        certs.server_cert.to_str().unwrap(),
        "--tls-key",
        certs.server_key.to_str().unwrap(),
    ];
    let mut args = vec!["--token-file", place.tokens.to_str().unwrap()];
    args.extend(tls);
    let d = Daemon::start(&place, &args);
    let url = d.url.clone();
    let ca = certs.ca.to_str().unwrap();
    // A token file others can read is used, and said to be so.
    let (code, _, err) = rex(
        &[
            "-t",
            &url,
            "--ca-file",
            ca,
            "--token-file",
            token_file.to_str().unwrap(),
            "exec",
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("is readable by group or others (mode 644); `chmod 600` it"),
        "{err}"
    );
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Token from a file: the exit code and the streams pass through.
    let (code, out, err) = rex(
        &[
            "-t",
            &url,
            "--ca-file",
            ca,
            "--token-file",
            token_file.to_str().unwrap(),
            "sh",
            "echo out; echo err >&2; exit 5",
        ],
        &[],
    );
    assert_eq!((code, out.as_str(), err.as_str()), (5, "out\n", "err\n"));
    // Token from the environment, wss:// spelled out; files both ways.
    let wss = url.replace("https://", "wss://");
    let env = [("REXD_TOKEN", TOKEN)];
    let (code, _, err) = rex(
        &[
            "-t",
            &wss,
            "--ca-file",
            ca,
            "write",
            "f.txt",
            "--content",
            "hi",
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = rex(&["-t", &wss, "--ca-file", ca, "read", "f.txt"], &env);
    assert_eq!((code, out.as_str()), (0, "hi"));
    // No token, or the server's certificate not trusted: refused, with the reason.
    let (code, _, err) = rex(&["-t", &url, "--ca-file", ca, "exec", "--", "true"], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("401"), "{err}");
    let (code, _, err) = rex(&["-t", &url, "exec", "--", "true"], &env);
    assert_eq!(code, 255, "{err}");
    assert!(err.contains("--ca-file FILE"), "{err}");
    drop(d);

    // mTLS alone: the client certificate is the credential.
    let mut args = tls.to_vec();
    args.extend(["--client-ca", ca]);
    let d = Daemon::start(&place, &args);
    let (code, out, err) = rex(
        &[
            "-t",
            &d.url,
            "--ca-file",
            ca,
            "--client-cert",
            certs.client_cert.to_str().unwrap(),
            "--client-key",
            certs.client_key.to_str().unwrap(),
            "exec",
            "--",
            "echo",
            "mtls",
        ],
        &[],
    );
    assert_eq!((code, out.as_str()), (0, "mtls\n"), "{err}");
    let (code, _, _) = rex(
        &[
            "-t",
            &d.url,
            "--ca-file",
            ca,
            "--client-cert",
            certs.rogue_cert.to_str().unwrap(),
            "--client-key",
            certs.rogue_key.to_str().unwrap(),
            "exec",
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(code, 255, "another CA's certificate must not get through");
    let exits: Vec<_> = place
        .audit_lines()
        .into_iter()
        .filter(|e| e["method"] == "exec.exit")
        .map(|e| e["principal"].as_str().unwrap_or("").to_owned())
        .collect();
    // The first `true` with the shared token file, then the `sh`; then the mTLS client.
    assert_eq!(exits, ["alice", "alice", "CN=alice,O=ops"], "{exits:?}");
}

/// Each way a TLS connection from `rex` fails, said with the check that failed and the option
/// that fixes it (exit 255, as ssh's for a connection that could not be made).
#[test]
fn rex_says_which_tls_check_failed_and_how_to_fix_it() {
    let place = Place::new("net-rex-tls");
    let certs = Certs::make(place.path());
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let (ca, tokens) = (path(&certs.ca), path(&place.tokens));
    let with_token = Daemon::start(
        &place,
        &[
            "--token-file",
            &tokens,
            "--tls-cert",
            &path(&certs.server_cert),
            "--tls-key",
            &path(&certs.server_key),
        ],
    );
    let mtls = Daemon::start(
        &place,
        &[
            "--client-ca",
            &ca,
            "--tls-cert",
            &path(&certs.server_cert),
            "--tls-key",
            &path(&certs.server_key),
        ],
    );
    // A daemon that shows the CA's own certificate as its server certificate.
    let ca_as_leaf = Daemon::start(
        &place,
        &[
            "--token-file",
            &tokens,
            "--tls-cert",
            &ca,
            "--tls-key",
            &path(&certs.dir.join("ca.key")),
        ],
    );
    let plain = Daemon::start(&place, &["--token-file", &tokens]);
    let env = [("REXD_TOKEN", TOKEN)];
    let fails = |args: &[&str], says: &str| {
        let (code, out, err) = rex(&[args, &["info"]].concat(), &env);
        assert_eq!((code, out.as_str()), (255, ""), "{args:?}: {err}");
        assert!(
            err.starts_with("rex: ") && err.contains(says),
            "{args:?}: {err}"
        );
    };
    let tls_with = |d: &Daemon| format!("rex: TLS with {} failed: ", d.url);
    fails(
        &["-t", &with_token.url],
        &(tls_with(&with_token)
            + "its certificate is not signed by a CA this machine trusts (give the server's CA \
               with --ca-file FILE)"),
    );
    fails(
        &["-t", &ca_as_leaf.url, "--ca-file", &ca],
        &(tls_with(&ca_as_leaf) + "it presents a CA certificate as its own"),
    );
    fails(
        &["-t", &mtls.url, "--ca-file", &ca],
        &(tls_with(&mtls)
            + "it refused the handshake: it may ask for a client certificate (--client-cert \
               FILE with --client-key FILE)"),
    );
    fails(
        &[
            "-t",
            &mtls.url,
            "--ca-file",
            &ca,
            "--client-cert",
            &path(&certs.rogue_cert),
            "--client-key",
            &path(&certs.rogue_key),
        ],
        &(tls_with(&mtls) + "it refused this side's client certificate"),
    );
    let https_to_plain = plain.url.replace("http://", "https://");
    fails(
        &["-t", &https_to_plain],
        &format!(
            "rex: TLS with {https_to_plain} failed: it does not speak TLS on this port (a \
             plain-text port? use http:// for it, on loopback)"
        ),
    );
    let http_to_tls = with_token.url.replace("https://", "http://");
    fails(
        &["-t", &http_to_tls],
        &format!("rex: i/o with {http_to_tls}: it does not answer HTTP"),
    );
    // And with the right options, the same daemons answer (a token in the environment with
    // a line end after it too).
    let token_nl = format!("{TOKEN}\n");
    let (code, out, err) = rex(
        &["-t", &with_token.url, "--ca-file", &ca, "info"],
        &[("REXD_TOKEN", &token_nl)],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("session_id"), "{out}");

    // Files that cannot be used are named with the option that gave them (exit 1).
    let refused = |args: &[&str], says: &str| {
        let (code, _, err) = rex(&[&["-t", &with_token.url], args, &["info"]].concat(), &env);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    let missing = path(&place.path().join("missing.pem"));
    refused(
        &["--ca-file", &missing],
        &format!("rex: the CA file {missing} (--ca-file): "),
    );
    let der = place.path().join("ca.der");
    let converted = std::process::Command::new("openssl")
        .args(["x509", "-in", &ca, "-outform", "der", "-out", &path(&der)])
        .status()
        .unwrap();
    assert!(converted.success());
    refused(
        &["--ca-file", &path(&der)],
        "no PEM certificate in it (a DER file? `openssl x509 -inform der",
    );
    refused(
        &[
            "--ca-file",
            &ca,
            "--token-env",
            "DESKWIRE_TEST_UNSET_VARIABLE",
        ],
        "the token variable $DESKWIRE_TEST_UNSET_VARIABLE (--token-env): it is not set",
    );
    let blank = place.path().join("blank-token");
    std::fs::write(&blank, format!("\n{TOKEN}\n")).unwrap();
    refused(
        &["--ca-file", &ca, "--token-file", &path(&blank)],
        "(--token-file): its first line is empty",
    );
    refused(
        &[
            "--ca-file",
            &ca,
            "--client-cert",
            &path(&certs.client_cert),
            "--client-key",
            &path(&certs.server_key),
        ],
        "(--client-cert): the key (--client-key) does not belong to this certificate",
    );
}

/// A port that accepts and never answers is given up after the connect timeout, with the
/// reason; `http://` beyond loopback is refused before anything is sent (the token would
/// travel in clear).
#[test]
fn rex_gives_up_on_a_silent_port_and_refuses_plain_text_off_loopback() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let started = std::time::Instant::now();
    let (code, _, err) = rex(
        &["-t", &url, "exec", "--", "true"],
        &[("REXD_TOKEN", TOKEN)],
    );
    assert_eq!(code, 255, "{err}");
    assert!(
        err.contains("no answer to the TLS or WebSocket handshake within 15 s"),
        "{err}"
    );
    // It gave up on its own (the test harness's own limit is far longer).
    assert!(started.elapsed() < Duration::from_secs(60), "{err}");
    drop(silent);

    for far in ["http://10.1.2.3:7070", "ws://rexd.example:7070"] {
        let (code, _, err) = rex(&["-t", far, "exec", "--", "true"], &[("REXD_TOKEN", TOKEN)]);
        assert_eq!(code, 1, "{far}: {err}");
        assert!(
            err.contains("loopback only") && err.contains("use https://"),
            "{far}: {err}"
        );
    }
}

const METRICS_POLICY: &str = "[policy]\n[policy.classes]\ndestructive = \"deny\"\n\
     [[policy.rules]]\nname = \"rm-recursive\"\nclass = \"destructive\"\nprograms = [\"rm\"]\n\
     any_arg = [\"-[rR]*\"]\n";

#[test]
fn metrics_follow_a_scripted_session_on_both_binds() {
    let place = Place::with_config("net-metrics", METRICS_POLICY);
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let metrics_url = d.metrics_url.clone().expect("the metrics bind");
    let out = run_python(
        "metrics_check.py",
        &["listen", &d.url, &metrics_url],
        &ws_env(),
    );
    assert!(out.contains("\"ok\": true"), "{out}");
    // Without a token the metrics bind says no more than the main one.
    let r = curl(&[&metrics_url]);
    assert_eq!((r.status, r.body.as_str()), (401, ""));
}

#[test]
fn metrics_over_stdio_through_rexd_metrics() {
    let place = Place::with_config("net-metrics-stdio", METRICS_POLICY);
    let out = run_python(
        "metrics_check.py",
        &["stdio", REXD, place.config.to_str().unwrap()],
        &[],
    );
    assert!(out.contains("\"ok\": true"), "{out}");
}

#[test]
fn mcp_over_streamable_http_with_the_official_sdk() {
    let place = Place::new("net-mcp");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let out = run_python(
        "mcp_http.py",
        &[&d.url, place.work.to_str().unwrap()],
        &ws_env(),
    );
    assert!(out.contains("\"ok\": true"), "{out}");
    assert_eq!(
        std::fs::read_to_string(place.work.join("mcp.txt")).unwrap(),
        "over http\n"
    );
    // The session was ended by the SDK's DELETE: another client's id is unknown anyway.
    let r = curl(&[
        "-X",
        "POST",
        "-H",
        &format!("Authorization: Bearer {TOKEN}"),
        "-H",
        "Content-Type: application/json",
        "-H",
        "Mcp-Session-Id: 0123",
        "--data-binary",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        &format!("{}/mcp", d.url),
    ]);
    assert_eq!(r.status, 404, "{r:?}");
    let audit = place.audit_lines();
    let exec = audit
        .iter()
        .find(|e| e["method"] == "exec.start")
        .expect("the bash call");
    assert_eq!(exec["principal"], "alice", "{exec}");
}

/// `rex --compress` over `/ws`: the session negotiates zstd on this transport too (the audit
/// shows the reads asked for `zstd` and answered with far fewer bytes than the file), and every
/// byte comes back exact; without the flag the same read is `utf8`. Raw frames are left out
/// here (`--no-raw-frames`: reads then ask for strings); `ws_raw_frames.rs` has them.
#[test]
fn compression_over_websocket() {
    let place = Place::new("net-zstd");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let ws = d.url.replace("http://", "ws://");
    let text: String = (0..20_000)
        .map(|i| format!("2026-11-26 INFO worker[{}] request {i} done\n", i % 7))
        .collect();
    std::fs::write(place.work.join("log.txt"), &text).unwrap();
    let env = [("REXD_TOKEN", TOKEN)];
    let (code, out, err) = rex(
        &[
            "-t",
            &ws,
            "--compress",
            "--no-raw-frames",
            "read",
            "log.txt",
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out == text, "{} bytes back of {}", out.len(), text.len());
    let (code, out, err) = rex(&["-t", &ws, "--no-raw-frames", "read", "log.txt"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(out == text);
    let (code, out, err) = rex(&["-t", &ws, "--compress", "sh", "seq 1 20000"], &env);
    assert_eq!(code, 0, "{err}");
    let seq: String = (1..=20000).map(|i| format!("{i}\n")).collect();
    assert!(out == seq, "{} bytes of seq back", out.len());
    let reads: Vec<(String, u64)> = place
        .audit_lines()
        .into_iter()
        .filter(|e| e["method"] == "fs.read")
        .map(|e| {
            (
                e["params"]["encoding"]
                    .as_str()
                    .unwrap_or("utf8")
                    .to_owned(),
                e["result"]["bytes"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    // The audit counts the file's bytes read whatever the encoding; the answer was zstd.
    assert_eq!(reads.len(), 2, "{reads:?}");
    assert_eq!(
        reads[0],
        ("zstd".to_owned(), text.len() as u64),
        "{reads:?}"
    );
    assert_eq!(
        reads[1],
        ("utf8".to_owned(), text.len() as u64),
        "{reads:?}"
    );
}

/// A token with scope `metrics` reads `/metrics` and nothing else (403, logged); `/healthz`
/// answers without a token; the metrics carry `rexd_build_info`.
#[test]
fn a_metrics_token_reads_metrics_only_and_health_needs_no_token() {
    use std::os::unix::fs::PermissionsExt;
    let place = Place::new("net-scopes");
    let scraper = "aaaabbbbccccddddeeeeffff00001111";
    let tokens = place.path().join("scoped-tokens");
    std::fs::write(
        &tokens,
        format!("alice:{TOKEN}\nprometheus:{scraper}:metrics\nbob:{OTHER_TOKEN}:all\n"),
    )
    .unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let d = Daemon::start(&place, &["--token-file", tokens.to_str().unwrap()]);
    let bearer = |t: &str| format!("Authorization: Bearer {t}");
    let metrics = curl(&["-H", &bearer(scraper), &format!("{}/metrics", d.url)]);
    assert_eq!(metrics.status, 200, "{metrics:?}");
    assert!(
        metrics.body.contains(&format!(
            "rexd_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "{}",
        metrics.body
    );
    let rpc = curl(&[
        "-H",
        &bearer(scraper),
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"x"}}"#,
        &format!("{}/rpc", d.url),
    ]);
    assert_eq!(rpc.status, 403, "{rpc:?}");
    assert!(
        rpc.body.contains("may only read /metrics (scope metrics)"),
        "{rpc:?}"
    );
    let ws = curl(&["-H", &bearer(scraper), &format!("{}/ws", d.url)]);
    assert_eq!(ws.status, 403, "{ws:?}");
    d.wait_for_log("prometheus's token may only read /metrics");
    // rex says what each refusal means: a scoped token (403), none, a label left in, a
    // wrong one (401).
    let rex_refused = |token: Option<&str>, says: &str| {
        let env: Vec<(&str, &str)> = token.map(|t| ("REXD_TOKEN", t)).into_iter().collect();
        let (code, _, err) = rex(&["-t", &d.url, "exec", "--", "true"], &env);
        assert_eq!(code, 1, "{token:?}: {err}");
        assert!(err.contains(says), "{token:?}: {err}");
    };
    rex_refused(
        Some(scraper),
        "refused the credentials (403): the token is known but not for this",
    );
    rex_refused(None, "refused the credentials (401): no token was given");
    let labelled = format!("alice:{TOKEN}");
    rex_refused(Some(&labelled), "(401): the token given holds a `:`");
    rex_refused(
        Some("ffffffffffffffffffffffffffffffff"),
        "(401): the token given is not one it accepts",
    );
    // Tokens without a scope, or with `all`, do everything.
    for token in [TOKEN, OTHER_TOKEN] {
        let r = curl(&[
            "-H",
            &bearer(token),
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"x"}}"#,
            &format!("{}/rpc", d.url),
        ]);
        assert_eq!(r.status, 200, "{r:?}");
    }
    let health = curl(&[&format!("{}/healthz", d.url)]);
    assert_eq!(
        (health.status, health.body.as_str()),
        (200, "ok\n"),
        "{health:?}"
    );
    let nothing = curl(&[&format!("{}/metrics", d.url)]);
    assert_eq!(nothing.status, 401);
    // An unknown scope is refused at start, naming the line.
    std::fs::write(&tokens, format!("alice:{TOKEN}:admin\n")).unwrap();
    let (code, err) = refused(&[
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        tokens.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("line 1: unknown scope \"admin\""), "{err}");
}
