//! `rexd --listen` against what the security review of issue 33 tried: forged certificate
//! subjects, batches with huge answers, clients that do not read or send slowly, more
//! connections and sessions than one client should have, and web pages. Real daemons on
//! loopback, with curl, openssl-made certificates and raw sockets.

mod netkit;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use netkit::*;
use serde_json::json;

/// `POST /rpc` over mTLS with this certificate.
fn mtls_post(d: &Daemon, certs: &Certs, cert: &Path, key: &Path, body: &str) -> Curl {
    curl(&[
        "--cacert",
        certs.ca.to_str().unwrap(),
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        body,
        &format!("{}/rpc", d.url),
    ])
}

const OPEN: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"t"}}"#;

/// Finding 3: the principal of a certificate is its subject in RFC 4514 form, so a single `O`
/// attribute `ops, CN=alice` is not `O=ops` + `CN=alice`; an empty subject is refused.
#[test]
fn certificate_principals_are_escaped_and_never_empty() {
    let place = Place::new("net-names");
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
    let r = mtls_post(&d, &certs, &certs.client_cert, &certs.client_key, OPEN);
    assert_eq!(r.status, 200, "{r:?}");
    let sid = r.json()["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The forged subject does not see alice's session…
    let info = json!({"jsonrpc": "2.0", "id": 2, "method": "session.info",
                      "params": {"session_id": sid}})
    .to_string();
    let r = mtls_post(&d, &certs, &certs.forger_cert, &certs.forger_key, &info);
    assert_eq!(
        r.json()["error"]["code"],
        -32602,
        "the certificate with O=\"ops, CN=alice\" saw alice's session: {r:?}"
    );
    // …and its own session is audited under a name of its own.
    let r = mtls_post(&d, &certs, &certs.forger_cert, &certs.forger_key, OPEN);
    assert_eq!(r.status, 200, "{r:?}");
    // An empty subject names nobody: refused, with the reason, and logged.
    let r = mtls_post(&d, &certs, &certs.nameless_cert, &certs.nameless_key, OPEN);
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.body.contains("empty subject"), "{r:?}");
    d.wait_for_log("empty subject");
    let opened: Vec<String> = place
        .audit_lines()
        .into_iter()
        .filter(|e| e["method"] == "session.open")
        .map(|e| e["principal"].as_str().unwrap_or("?").to_owned())
        .collect();
    assert_eq!(
        opened,
        ["CN=alice,O=ops", "O=ops\\, CN=alice"],
        "{opened:?}"
    );
}

/// A session of `token`'s client over `POST /rpc`.
fn open_session(url: &str, token: &str) -> String {
    let r = post(url, Some(token), OPEN);
    assert_eq!(r.status, 200, "{r:?}");
    r.json()["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A batch of `n` `fs.read`s of `path`, ids 1..=n.
fn read_batch(sid: &str, path: &str, n: usize, encoding: &str) -> String {
    let batch: Vec<_> = (1..=n)
        .map(|i| {
            json!({"jsonrpc": "2.0", "id": i, "method": "fs.read",
                   "params": {"session_id": sid, "path": path, "encoding": encoding}})
        })
        .collect();
    serde_json::Value::Array(batch).to_string()
}

/// A file of `bytes` bytes of text in the place's root.
fn text_file(place: &Place, name: &str, bytes: usize) {
    let line = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\n";
    let text: String = line.chars().cycle().take(bytes).collect();
    std::fs::write(place.work.join(name), text).unwrap();
}

/// Finding 4: 64 reads of 1 MB in one 9 KB batch no longer make a 64 MB answer: past
/// `--max-batch-answer-bytes` (16 MiB) the rest fail with `resource_limit`, unrun, and say how
/// to get them.
#[test]
fn a_batch_answer_is_bounded_and_says_to_split_the_batch() {
    let place = Place::new("net-batch");
    text_file(&place, "big.txt", 1_000_000);
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let sid = open_session(&d.url, TOKEN);
    let batch = read_batch(&sid, "big.txt", 64, "utf8");
    // A quarter of it is the 64 session ids (34 bytes each: 128 random bits).
    assert!(batch.len() < 9 * 1024, "{}", batch.len());
    let r = post(&d.url, Some(TOKEN), &batch);
    assert_eq!(r.status, 200, "{}", r.stderr);
    // The bound, and room for the 64 small error objects.
    assert!(
        r.body.len() <= (16 << 20) + 64 * 1024,
        "a {} byte batch got a {} byte answer",
        batch.len(),
        r.body.len()
    );
    let answers = r.json();
    let answers = answers.as_array().unwrap();
    let mut ids: Vec<u64> = answers.iter().map(|a| a["id"].as_u64().unwrap()).collect();
    ids.sort();
    assert_eq!(
        ids,
        (1..=64).collect::<Vec<_>>(),
        "every request is answered once"
    );
    let read = answers.iter().filter(|a| a.get("result").is_some()).count();
    assert!((1..64).contains(&read), "{read} reads answered");
    for a in answers.iter().filter(|a| a.get("error").is_some()) {
        let e = &a["error"];
        assert_eq!(e["code"], -32008, "{a}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("--max-batch-answer-bytes") && message.contains("smaller batch"),
            "{message}"
        );
        assert_eq!(e["data"]["limit"], 16 << 20, "{a}");
    }
    // The requests past the bound never ran: at most one more read than were answered.
    let audited = place
        .audit_lines()
        .into_iter()
        .filter(|e| e["method"] == "fs.read")
        .count();
    assert!(audited <= read + 1, "{audited} reads ran, {read} answered");
    // A read on its own is still answered in full.
    let one = json!({"jsonrpc": "2.0", "id": 1, "method": "fs.read",
                     "params": {"session_id": sid, "path": "big.txt"}});
    let r = post(&d.url, Some(TOKEN), &one.to_string());
    assert_eq!(
        r.json()["result"]["content"].as_str().map(str::len),
        Some(1_000_000)
    );
}

/// Finding 4: a long batch is fed to the hub one request at a time, so another client's call
/// made while it runs is answered before the batch ends.
#[test]
fn a_long_batch_does_not_hold_up_other_clients() {
    let place = Place::new("net-batch-fair");
    text_file(&place, "big.txt", 1_000_000);
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--max-batch-answer-bytes",
            "1073741824",
        ],
    );
    let alice = open_session(&d.url, TOKEN);
    let bob = open_session(&d.url, OTHER_TOKEN);
    let batch = read_batch(&alice, "big.txt", 64, "base64");
    let url = d.url.clone();
    let long = std::thread::spawn(move || post(&url, Some(TOKEN), &batch));
    let reads = |place: &Place| {
        place
            .audit_lines()
            .into_iter()
            .filter(|e| e["method"] == "fs.read")
            .count()
    };
    // Once the batch has begun…
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while reads(&place) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the batch never began"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // …bob's call is answered before it ends.
    let stat = json!({"jsonrpc": "2.0", "id": 1, "method": "fs.stat",
                      "params": {"session_id": bob, "path": "big.txt"}});
    let r = post(&d.url, Some(OTHER_TOKEN), &stat.to_string());
    assert_eq!(r.json()["result"]["size"], 1_000_000, "{r:?}");
    let r = long.join().unwrap();
    assert_eq!(r.json().as_array().map(Vec::len), Some(64));
    let audit = place.audit_lines();
    let stat_at = audit.iter().position(|e| e["method"] == "fs.stat").unwrap();
    let last_read = audit
        .iter()
        .rposition(|e| e["method"] == "fs.read")
        .unwrap();
    let reads_after = audit[stat_at..]
        .iter()
        .filter(|e| e["method"] == "fs.read")
        .count();
    assert!(
        stat_at < last_read,
        "bob's fs.stat waited for all 64 of alice's reads ({reads_after} after it)"
    );
}

/// `setsockopt(SO_RCVBUF)`: a client with a small window fills the daemon's socket sooner.
fn receive_buffer(s: &TcpStream, size: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket and a c_int of the right size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
}

/// Reads until EOF or `limit`; `true` when the server closed the connection.
fn closed_by_server(stream: &mut TcpStream, limit: Duration) -> bool {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 65536];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// A raw `POST /rpc` with `token`.
fn raw_post(port: u16, token: &str, body: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    receive_buffer(&s, 4096);
    write!(
        s,
        "POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

/// Finding 4: an answer the client does not read is dropped after `--write-timeout-ms`
/// without progress, and its connection closed.
#[test]
fn an_answer_nobody_reads_is_cut_off() {
    let place = Place::new("net-unread");
    text_file(&place, "big.txt", 1_000_000);
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--write-timeout-ms",
            "300",
        ],
    );
    let sid = open_session(&d.url, TOKEN);
    // 12 MB of answer: more than the socket buffers hold.
    let mut s = raw_post(d.port, TOKEN, &read_batch(&sid, "big.txt", 12, "utf8"));
    d.wait_for_log("--write-timeout-ms");
    // Reset, not left to the kernel to deliver at the client's pace.
    assert!(closed_by_server(&mut s, Duration::from_secs(15)));
    // The others are still served.
    open_session(&d.url, OTHER_TOKEN);
}

/// What a raw request got: the head (status line and headers) and what followed it.
struct RawAnswer {
    head: String,
    body: String,
}

impl RawAnswer {
    fn status(&self) -> u16 {
        self.head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }
}

/// Reads an HTTP answer's head, and the body when it has a `Content-Length`; `None` when
/// nothing came within `limit`.
fn read_answer(s: &mut TcpStream, limit: Duration) -> Option<RawAnswer> {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) if got.is_empty() => return None,
            Ok(0) | Err(_) => break got.len(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&got[..end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = got[end..].to_vec();
    while body.len() < length {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&buf[..n]),
        }
    }
    Some(RawAnswer {
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// A WebSocket handshake on `/ws` (the connection stays open while the stream lives), and
/// the answer's head.
fn ws_upgrade(port: u16, token: &str, origin: Option<&str>) -> (TcpStream, RawAnswer) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let origin = origin
        .map(|o| format!("Origin: {o}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Upgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         {origin}\r\n"
    )
    .unwrap();
    let answer = read_answer(&mut s, Duration::from_secs(15)).expect("an answer to the upgrade");
    (s, answer)
}

/// Finding 5: an upgraded WebSocket keeps its connection slot for its whole life: with
/// `--max-connections 8` and 8 WebSockets open, a 9th connection waits until one closes.
#[test]
fn websockets_keep_their_connection_slot() {
    let place = Place::new("net-ws-slots");
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--max-connections",
            "8",
        ],
    );
    let mut open = Vec::new();
    for _ in 0..8 {
        let (s, a) = ws_upgrade(d.port, TOKEN, None);
        assert_eq!(a.status(), 101, "{}", a.head);
        open.push(s);
    }
    // The 9th waits in the listen backlog: no answer while the 8 are open…
    let mut s = raw_post(d.port, OTHER_TOKEN, OPEN);
    let early = read_answer(&mut s, Duration::from_secs(2));
    assert!(
        early.is_none(),
        "a 9th connection was served beside 8 WebSockets under --max-connections 8: {}",
        early.map(|a| a.head).unwrap_or_default()
    );
    // …and is served once one of them closes.
    drop(open.pop());
    let a = read_answer(&mut s, Duration::from_secs(15)).expect("served after a close");
    assert_eq!(a.status(), 200, "{}", a.head);
}

/// Issue 37: 500 sockets that never send a byte cannot keep a real client waiting. While every
/// slot is taken, the oldest connection that has not authenticated gives its slot to each new
/// client; an authenticated keep-alive connection keeps its slot through the flood.
#[test]
fn idle_sockets_cannot_keep_a_client_waiting() {
    let place = Place::new("net-idle-flood");
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--max-connections",
            "32",
            // Long enough that, without pushing them out, the idle sockets would hold their
            // slots past curl's 20 s.
            "--header-timeout-ms",
            "120000",
        ],
    );
    let mut kept = raw_post(d.port, TOKEN, OPEN);
    let a = read_answer(&mut kept, Duration::from_secs(15)).expect("an answer");
    assert_eq!(a.status(), 200, "{}", a.head);
    let idle: Vec<TcpStream> = (0..500)
        .map(|_| TcpStream::connect(("127.0.0.1", d.port)).unwrap())
        .collect();
    // A real client is served, over a new connection…
    let r = post(&d.url, Some(OTHER_TOKEN), OPEN);
    assert_eq!(r.status, 200, "{r:?}");
    // …and the authenticated connection opened before the flood still is.
    write!(
        kept,
        "POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{OPEN}",
        OPEN.len()
    )
    .unwrap();
    let a = read_answer(&mut kept, Duration::from_secs(15)).expect("kept its slot");
    assert_eq!(a.status(), 200, "{}", a.head);
    // The idle sockets that made room were closed, counted, and logged with their address.
    let metrics = curl(&[
        "-H",
        &format!("Authorization: Bearer {TOKEN}"),
        &format!("{}/metrics", d.url),
    ]);
    let pushed: u64 = metrics
        .body
        .lines()
        .find_map(|l| l.strip_prefix("rexd_connections_pushed_out_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pushed-out count: {}", metrics.body));
    assert!(pushed >= 1, "{pushed}");
    d.wait_for_log("closed before authenticating");
    drop(idle);
}

/// Finding 5: one principal's connections stop at `--max-connections-per-principal` (32),
/// WebSockets included, and the others still get in.
#[test]
fn one_principal_cannot_take_every_connection() {
    let place = Place::new("net-conn-cap");
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--max-connections",
            "64",
        ],
    );
    let mut open = Vec::new();
    for _ in 0..32 {
        let (s, a) = ws_upgrade(d.port, TOKEN, None);
        assert_eq!(a.status(), 101, "{}", a.head);
        open.push(s);
    }
    let (_s, a) = ws_upgrade(d.port, TOKEN, None);
    assert_eq!(
        a.status(),
        429,
        "alice's 33rd connection: {}{}",
        a.head,
        a.body
    );
    assert!(
        a.body.contains("--max-connections-per-principal"),
        "{}",
        a.body
    );
    let r = post(&d.url, Some(TOKEN), OPEN);
    assert_eq!(r.status, 429, "{r:?}");
    // rex says it was refused, and why: exit 1 (refused), not 255 (unreachable).
    let rex = std::process::Command::new(env!("CARGO_BIN_EXE_rex"))
        .args(["-t", &d.url, "exec", "--", "true"])
        .env("REXD_TOKEN", TOKEN)
        .env("REX_TARGETS_FILE", place.path().join("targets.toml"))
        .env_remove("REX_TARGET")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&rex.stderr);
    assert_eq!(rex.status.code(), Some(1), "{said}");
    assert!(
        said.contains("refused the connection (HTTP 429)")
            && said.contains("--max-connections-per-principal"),
        "{said}"
    );
    // Bob is served, over /ws and /rpc.
    let (_b, a) = ws_upgrade(d.port, OTHER_TOKEN, None);
    assert_eq!(a.status(), 101, "{}", a.head);
    open_session(&d.url, OTHER_TOKEN);
    // A closed WebSocket gives its place back.
    drop(open.pop());
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let r = post(&d.url, Some(TOKEN), OPEN);
        if r.status == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An MCP `initialize` over `POST /mcp`: the status, and the session's id.
fn mcp_initialize(url: &str, token: &str) -> (u16, String, String) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "20", "-D", "-", "-X", "POST"])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["-H", "Content-Type: application/json"])
        .args(["-H", "Accept: application/json, text/event-stream"])
        .args([
            "--data-binary",
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        ])
        .arg(format!("{url}/mcp"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let id = text
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id:")
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_default();
    (status, id, text)
}

/// Low finding: one principal cannot take every session: REXD sessions and MCP sessions stop
/// at `--max-sessions-per-principal` (8) each, under the global caps, and the others still
/// get theirs.
#[test]
fn one_principal_cannot_take_every_session() {
    let place = Place::new("net-session-cap");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    for _ in 0..8 {
        open_session(&d.url, TOKEN);
    }
    let r = post(&d.url, Some(TOKEN), OPEN);
    let e = &r.json()["error"];
    assert_eq!(e["code"], -32008, "alice's 9th session: {r:?}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("--max-sessions-per-principal"),
        "{e}"
    );
    open_session(&d.url, OTHER_TOKEN);
    for _ in 0..8 {
        let (status, id, text) = mcp_initialize(&d.url, TOKEN);
        assert_eq!(status, 200, "{text}");
        assert!(!id.is_empty(), "{text}");
    }
    let (status, _, text) = mcp_initialize(&d.url, TOKEN);
    assert_eq!(status, 429, "alice's 9th MCP session: {text}");
    assert!(text.contains("--max-sessions-per-principal"), "{text}");
    let (status, _, text) = mcp_initialize(&d.url, OTHER_TOKEN);
    assert_eq!(status, 200, "{text}");
}

/// Low finding: an authenticated client that sends its body slowly loses its connection after
/// `--body-timeout-ms`, with `408` saying why.
#[test]
fn a_slow_body_is_cut_off() {
    let place = Place::new("net-slow-body");
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--body-timeout-ms",
            "300",
        ],
    );
    for path in ["/rpc", "/mcp"] {
        let mut s = TcpStream::connect(("127.0.0.1", d.port)).unwrap();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"jsonrpc\""
        )
        .unwrap();
        // The other 990 bytes never come.
        let a = read_answer(&mut s, Duration::from_secs(15))
            .unwrap_or_else(|| panic!("{path}: no answer to a body that never ends"));
        assert_eq!(a.status(), 408, "{path}: {}{}", a.head, a.body);
        assert!(a.body.contains("--body-timeout-ms"), "{path}: {}", a.body);
        assert!(closed_by_server(&mut s, Duration::from_secs(15)), "{path}");
    }
    open_session(&d.url, TOKEN);
}

/// Low finding: a request from a web page (it carries `Origin`) is refused unless its origin
/// is given with `--allow-origin`: a page cannot drive `/ws` with a browser's credentials.
#[test]
fn web_pages_are_refused_unless_their_origin_is_allowed() {
    let place = Place::new("net-origin");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let (_s, a) = ws_upgrade(d.port, TOKEN, Some("https://evil.example"));
    assert_eq!(
        a.status(),
        403,
        "a WebSocket from https://evil.example: {}",
        a.head
    );
    assert!(a.body.contains("--allow-origin"), "{}", a.body);
    let r = curl(&[
        "-X",
        "POST",
        "-H",
        &format!("Authorization: Bearer {TOKEN}"),
        "-H",
        "Content-Type: application/json",
        "-H",
        "Origin: https://evil.example",
        "--data-binary",
        OPEN,
        &format!("{}/rpc", d.url),
    ]);
    assert_eq!(r.status, 403, "{r:?}");
    // Clients that are not browsers send no Origin.
    let (_s, a) = ws_upgrade(d.port, TOKEN, None);
    assert_eq!(a.status(), 101, "{}", a.head);
    drop(d);
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--allow-origin",
            "https://desk.example:8443",
        ],
    );
    let (_s, a) = ws_upgrade(d.port, TOKEN, Some("https://desk.example:8443"));
    assert_eq!(a.status(), 101, "{}", a.head);
    let (_s, a) = ws_upgrade(d.port, TOKEN, Some("https://evil.example"));
    assert_eq!(a.status(), 403, "{}", a.head);
}

/// From an operator trial: two clients leaving `POST /rpc` sessions open filled every session
/// of the daemon, and every other client was refused until their idle time (10 minutes) ran
/// out. A newcomer now takes the place of the least recently used idle `/rpc` session of the
/// client holding the most, as long as that client holds more than the newcomer would; a
/// session with a process running is never taken.
#[test]
fn idle_rpc_sessions_give_their_place_to_a_client_with_fewer() {
    let place = Place::new("net-fair");
    let text = std::fs::read_to_string(&place.config).unwrap();
    let text = text.replace(
        "max_concurrent_sessions = 256",
        "max_concurrent_sessions = 4",
    );
    std::fs::write(&place.config, text).unwrap();
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    // Alice takes every place; the first of hers runs a command.
    let alice: Vec<String> = (0..4).map(|_| open_session(&d.url, TOKEN)).collect();
    let busy = json!({"jsonrpc": "2.0", "id": 2, "method": "exec.start",
                      "params": {"session_id": alice[0], "argv": ["sleep", "30"]}});
    assert_eq!(post(&d.url, Some(TOKEN), &busy.to_string()).status, 200);
    for (i, sid) in alice.iter().enumerate().skip(1) {
        let touch = json!({"jsonrpc": "2.0", "id": 3, "method": "session.info",
                           "params": {"session_id": sid}});
        assert_eq!(
            post(&d.url, Some(TOKEN), &touch.to_string()).status,
            200,
            "{i}"
        );
    }
    // Alice herself gets no more: she holds as many as anyone.
    let r = post(&d.url, Some(TOKEN), OPEN);
    assert!(r.body.contains("limits.max_concurrent_sessions"), "{r:?}");
    // Bob gets a place: alice's least recently used idle session (not the busy one) goes.
    let bob = open_session(&d.url, OTHER_TOKEN);
    let gone = json!({"jsonrpc": "2.0", "id": 4, "method": "session.info",
                      "params": {"session_id": alice[1]}});
    let r = post(&d.url, Some(TOKEN), &gone.to_string());
    assert!(r.body.contains("unknown session_id"), "{r:?}");
    let alive = json!({"jsonrpc": "2.0", "id": 5, "method": "session.info",
                       "params": {"session_id": alice[0]}});
    assert!(
        post(&d.url, Some(TOKEN), &alive.to_string())
            .body
            .contains("\"result\"")
    );
    // Bob's second: alice still holds 3, more than bob's 2 would be.
    open_session(&d.url, OTHER_TOKEN);
    // Now alice holds 2 and bob 2: bob's third is refused, naming the limit.
    let r = post(&d.url, Some(OTHER_TOKEN), OPEN);
    assert!(r.body.contains("limits.max_concurrent_sessions"), "{r:?}");
    drop(bob);
    let audit = place.audit_lines();
    let evicted = audit
        .iter()
        .filter(|e| e["method"] == "session.end" && e["result"]["cause"] == "evicted")
        .count();
    assert_eq!(evicted, 2, "{audit:?}");
    d.wait_for_log("closed to give its place to bob");
}

/// From an operator trial: a request naming a session its client does not hold (another
/// client's, perhaps a leaked id) was refused but left no trace. It is audited now, with who
/// asked, where from, and the refusal.
#[test]
fn a_request_naming_another_clients_session_is_audited() {
    let place = Place::new("net-probe");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let alices = open_session(&d.url, TOKEN);
    let probe = json!({"jsonrpc": "2.0", "id": 7, "method": "fs.read",
                       "params": {"session_id": alices, "path": "secret.txt"}});
    let r = post(&d.url, Some(OTHER_TOKEN), &probe.to_string());
    assert!(r.body.contains("unknown session_id"), "{r:?}");
    let audit = place.audit_lines();
    let entry = audit
        .iter()
        .find(|e| e["principal"] == "bob" && e["method"] == "fs.read")
        .unwrap_or_else(|| panic!("no entry of bob's probe: {audit:?}"));
    assert_eq!(entry["session_id"], alices.as_str(), "{entry}");
    assert_eq!(entry["result"]["error"], -32602, "{entry}");
    assert_eq!(entry["params"]["path"], "secret.txt", "{entry}");
    assert!(
        entry["address"]
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:")),
        "{entry}"
    );
}

/// From an operator trial: the log's "flagged" line named no client, so an operator watching
/// the log could not tell who ran what. It names the command, the principal and the address.
#[test]
fn a_flagged_command_is_logged_with_who_ran_it() {
    let place = Place::with_config(
        "net-flag",
        "[policy]\ndefault = \"allow\"\n[policy.classes]\nwrite = \"flag\"\n\
         [[policy.rules]]\nname = \"writers\"\nclass = \"write\"\nprograms = [\"touch\"]\n",
    );
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let sid = open_session(&d.url, TOKEN);
    let touch = json!({"jsonrpc": "2.0", "id": 2, "method": "exec.start",
                       "params": {"session_id": sid, "argv": ["touch", "flagged.txt"]}});
    let r = post(&d.url, Some(TOKEN), &touch.to_string());
    assert!(r.body.contains("process_id"), "{r:?}");
    d.wait_for_log("exec.start of \"touch\" by alice from 127.0.0.1:");
    d.wait_for_log("flagged by policy rule \"writers\" (class write)");
}
