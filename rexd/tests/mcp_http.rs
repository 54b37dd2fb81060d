//! `POST /mcp` on `rexd --listen` against what the security review of issue 33 (finding 6)
//! tried over HTTP: ids the adapter cannot echo, a call cancelled by its own client, and
//! clients that hang up while their call runs. Real daemons on loopback, with curl (which gives
//! up after 20 s: a POST that is never answered shows as status 0) and raw sockets.

mod netkit;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use netkit::*;
use serde_json::{Value, json};

/// How long a test waits for something the daemon does on its own (a process to start, a
/// hung-up client to be noticed).
const WAIT: Duration = Duration::from_secs(60);
/// What `rexd --listen` holds of one MCP session's requests waiting for their answers.
const MAX_WAITING: usize = 64;

/// An MCP session over `POST /mcp`, initialized.
struct Session {
    url: String,
    id: String,
}

impl Session {
    fn start(d: &Daemon) -> Session {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "20", "-D", "-", "-X", "POST"])
            .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
            .args(["-H", "Content-Type: application/json"])
            .args(["-H", "Accept: application/json, text/event-stream"])
            .args([
                "--data-binary",
                r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            ])
            .arg(format!("{}/mcp", d.url))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let id = text
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("mcp-session-id:")
                    .map(|v| v.trim().to_owned())
            })
            .unwrap_or_else(|| panic!("no session: {text}"));
        let s = Session {
            url: d.url.clone(),
            id,
        };
        let r = s.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(r.status, 202, "{r:?}");
        s
    }

    /// `POST /mcp` in this session.
    fn post(&self, body: &str) -> Curl {
        curl(&[
            "-X",
            "POST",
            "-H",
            &format!("Authorization: Bearer {TOKEN}"),
            "-H",
            "Content-Type: application/json",
            "-H",
            "Accept: application/json, text/event-stream",
            "-H",
            &format!("Mcp-Session-Id: {}", self.id),
            "--data-binary",
            body,
            &format!("{}/mcp", self.url),
        ])
    }

    fn post_json(&self, body: &Value) -> Curl {
        self.post(&body.to_string())
    }
}

fn bash_call(id: &Value, command: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "bash", "arguments": {"command": command}}})
}

/// `notifications/cancelled` for call `id`.
fn cancel(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
           "params": {"requestId": id, "reason": "test"}})
}

/// `rexd_mcp_requests_waiting` as `GET /metrics` shows it.
fn waiting(d: &Daemon) -> Option<u64> {
    let r = curl(&[
        "-H",
        &format!("Authorization: Bearer {TOKEN}"),
        &format!("{}/metrics", d.url),
    ]);
    assert_eq!(r.status, 200, "{r:?}");
    r.body.lines().find_map(|l| {
        l.strip_prefix("rexd_mcp_requests_waiting ")
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Waits (up to [`WAIT`]) until `done` holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Finding 6 over HTTP: ids that are neither an integer, a string nor null, and ids over 256
/// bytes, were passed on to the adapter, which answers them with id null; nobody waited for id
/// null, so the POST hung and its entry stayed. Now core's parser refuses them before anything
/// is passed on: `400` with -32600 and id null, at once, and nothing of the call runs.
#[test]
fn odd_and_long_ids_are_answered_at_once() {
    let place = Place::new("mcp-http-ids");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let s = Session::start(&d);
    // In the root, so that a call that did run could write it (security.confine).
    let ran = place.work.join("ran");
    let command = format!("echo ran >> {}", ran.display());
    let long = format!("\"{}\"", "x".repeat(255)); // 257 bytes of JSON
    for odd in ["1.5", "{\"a\":1}", "[1]", "true", long.as_str()] {
        let body = bash_call(&json!("ID"), &command)
            .to_string()
            .replace("\"ID\"", odd);
        let r = s.post(&body);
        let shown = &odd[..odd.len().min(12)];
        assert_eq!(r.status, 400, "id {shown}: {r:?}");
        let a = r.json();
        assert_eq!(a["error"]["code"], -32600, "id {shown}: {a}");
        assert_eq!(a["id"], Value::Null, "id {shown}: {a}");
    }
    // Not JSON at all: -32700, as before.
    let r = s.post("{\"jsonrpc\":");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32700)),
        "{r:?}"
    );
    // Nothing ran, nothing waits, and the session goes on.
    assert!(!ran.exists(), "a refused call ran");
    let r = s.post_json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(
        r.json(),
        json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        "{r:?}"
    );
    // An id of exactly 256 bytes is served.
    let id = json!("i".repeat(254));
    let r = s.post_json(&bash_call(&id, "echo hi"));
    assert_eq!(r.json()["id"], id);
    assert_eq!(r.json()["result"]["structuredContent"]["stdout"], "hi\n");
    assert_eq!(waiting(&d), Some(0));
}

/// A batch (MCP 2025-03-26 allows them) is answered element by element as one array: a request
/// its answer, an element core refuses its error with id null, a notification nothing. It used
/// to be passed on whole and answered `202`, its requests run and their answers dropped.
#[test]
fn a_batch_gets_one_answer_per_request() {
    let place = Place::new("mcp-http-batch");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let s = Session::start(&d);
    let batch = format!(
        "[{},{},{},{}]",
        json!({"jsonrpc": "2.0", "id": "a", "method": "ping"}),
        r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
        bash_call(&json!(2), "echo two"),
    );
    let r = s.post(&batch);
    assert_eq!(r.status, 200, "{r:?}");
    let answers = r.json();
    let answers = answers.as_array().unwrap_or_else(|| panic!("{answers}"));
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert_eq!(
        answers[0],
        json!({"jsonrpc": "2.0", "id": "a", "result": {}})
    );
    assert_eq!(
        (&answers[1]["id"], &answers[1]["error"]["code"]),
        (&Value::Null, &json!(-32600))
    );
    assert_eq!(answers[2]["id"], 2);
    assert_eq!(answers[2]["result"]["structuredContent"]["stdout"], "two\n");
    // Notifications only: nothing to answer.
    let r = s.post(r#"[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]"#);
    assert_eq!(r.status, 202, "{r:?}");
    let r = s.post("[]");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32600))
    );
    assert_eq!(waiting(&d), Some(0));
}

/// Finding 6 over HTTP: `notifications/cancelled` for one's own running call kills its command,
/// and the adapter, as MCP asks, sends no answer for it; its POST hung until the client gave
/// up. Now that POST ends `202 Accepted` with no body (no response, as for a notification), and
/// the id is free again.
#[test]
fn a_cancelled_call_ends_its_post() {
    let place = Place::new("mcp-http-cancel");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let s = Session::start(&d);
    let (pid, waiter) = start_sleep(&s, json!(7), &place.work.join("pid"));
    let r = s.post_json(&cancel(json!(7)));
    assert_eq!(r.status, 202, "{r:?}");
    let r = waiter.join().unwrap();
    assert_eq!(
        (r.status, r.body.as_str()),
        (202, ""),
        "the cancelled call's POST: {r:?}"
    );
    // SAFETY: kill(pid, 0) only asks whether the process exists.
    wait_until("the cancelled command ends", || unsafe {
        libc::kill(pid, 0) != 0
    });
    assert_eq!(waiting(&d), Some(0));
    let r = s.post_json(&bash_call(&json!(7), "echo again"));
    assert_eq!(
        r.json()["result"]["structuredContent"]["stdout"],
        "again\n",
        "{r:?}"
    );
}

/// A raw `POST /mcp` in session `sid`, left open.
fn raw_post(port: u16, sid: &str, body: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Mcp-Session-Id: {sid}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

/// Finding 6 over HTTP: the table of waiting requests had no bound and kept the entry of a
/// client that hung up. Now at most 64 of a session's requests wait (the 65th is answered
/// -32600 saying so), and a client that hangs up takes its entry with it: after 64 of them
/// left, nothing waits and the session is served again.
#[test]
fn waiting_requests_are_capped_and_leave_with_their_client() {
    let place = Place::new("mcp-http-cap");
    // Room for 64 commands that run past the test (the default timeout, 30 s, would answer
    // them, and so end their waits, without anyone hanging up).
    let config = std::fs::read_to_string(&place.config).unwrap().replace(
        "max_processes_per_session = 8",
        "max_processes_per_session = 100\ndefault_timeout_ms = 600000\nhard_timeout_ms = 600000",
    );
    std::fs::write(&place.config, config).unwrap();
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--max-connections-per-principal",
            "100",
        ],
    );
    let s = Session::start(&d);
    // In the root: what rexd runs may write nowhere else (security.confine).
    let started = place.work.join("started");
    std::fs::create_dir(&started).unwrap();
    let clients: Vec<TcpStream> = (0..MAX_WAITING)
        .map(|i| {
            let call = bash_call(
                &json!(i),
                &format!(": > {}/{i}; exec sleep 600", started.display()),
            );
            raw_post(d.port, &s.id, &call.to_string())
        })
        .collect();
    let count = |dir: &Path| std::fs::read_dir(dir).unwrap().count();
    wait_until("64 commands start", || count(&started) == MAX_WAITING);
    let r = s.post_json(&bash_call(&json!("one more"), "echo served"));
    let a = r.json();
    assert_eq!(
        (&a["id"], &a["error"]["code"]),
        (&json!("one more"), &json!(-32600)),
        "the 65th request: {a}"
    );
    let message = a["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("64") && message.contains("wait"),
        "{message}"
    );
    assert_eq!(waiting(&d), Some(MAX_WAITING as u64));
    drop(clients);
    wait_until("the hung-up requests leave", || waiting(&d) == Some(0));
    let r = s.post_json(&json!({"jsonrpc": "2.0", "id": "after", "method": "ping"}));
    assert_eq!(
        r.json(),
        json!({"jsonrpc": "2.0", "id": "after", "result": {}}),
        "{r:?}"
    );
}

/// Starts `echo $$ > PID_FILE; exec sleep 600` as call `id` of `s` on a thread of its own (its
/// POST waits); returns the command's pid and the POST's thread. `PID_FILE` is in the root: what
/// rexd runs may write nowhere else (security.confine).
fn start_sleep(s: &Session, id: Value, pid_file: &Path) -> (i32, std::thread::JoinHandle<Curl>) {
    let call = bash_call(
        &id,
        &format!("echo $$ > {}; exec sleep 600", pid_file.display()),
    );
    let (url, sid) = (s.url.clone(), s.id.clone());
    let post = std::thread::spawn(move || Session { url, id: sid }.post_json(&call));
    let mut pid = None;
    wait_until("the command starts", || {
        pid = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok());
        pid.is_some()
    });
    (pid.unwrap(), post)
}

/// `DELETE /mcp` while a call waits: the call's POST ends `404` (the session is gone) and the
/// adapter, its input closed, ends the command. The waiting POST used to hold the session, so
/// the adapter never saw the end of its input: the POST hung and the command ran on.
#[test]
fn ending_the_session_ends_its_waiting_posts() {
    let place = Place::new("mcp-http-delete");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let s = Session::start(&d);
    let (pid, post) = start_sleep(&s, json!(1), &place.work.join("pid"));
    let r = curl(&[
        "-X",
        "DELETE",
        "-H",
        &format!("Authorization: Bearer {TOKEN}"),
        "-H",
        &format!("Mcp-Session-Id: {}", s.id),
        &format!("{}/mcp", d.url),
    ]);
    assert_eq!(r.status, 200, "{r:?}");
    let r = post.join().unwrap();
    assert_eq!(r.status, 404, "the waiting POST: {r:?}");
    // SAFETY: kill(pid, 0) only asks whether the process exists.
    wait_until("the session's command ends", || unsafe {
        libc::kill(pid, 0) != 0
    });
    assert_eq!(waiting(&d), Some(0));
}

/// A session whose call is still running is in use, however long ago its last POST came: a
/// new session that makes room (`--rpc-session-idle-ms`) does not end it.
#[test]
fn a_session_with_a_running_call_is_not_idle() {
    let place = Place::new("mcp-http-idle");
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--rpc-session-idle-ms",
            "1",
        ],
    );
    let s = Session::start(&d);
    let (_, post) = start_sleep(&s, json!("long"), &place.work.join("pid"));
    std::thread::sleep(Duration::from_millis(20)); // past the idle time
    let other = Session::start(&d);
    let r = s.post_json(&cancel(json!("long")));
    assert_eq!(r.status, 202, "the first session was ended: {r:?}");
    assert_eq!(post.join().unwrap().status, 202);
    // Idle without a call, it makes room.
    std::thread::sleep(Duration::from_millis(20));
    Session::start(&d);
    let r = s.post_json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(r.status, 404, "{r:?}");
    drop(other);
}

/// A second call with the id of one still waiting is refused -32600 (core's duplicate-id
/// error, as on stdio) and the first goes on waiting. The table was keyed by id with no such
/// check: the second POST took the first's place, and the first ended `404` as if its session
/// were gone.
#[test]
fn a_second_call_with_a_waiting_id_is_refused() {
    let place = Place::new("mcp-http-dup");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let s = Session::start(&d);
    let (_, first) = start_sleep(&s, json!(9), &place.work.join("pid"));
    let r = s.post_json(&bash_call(&json!(9), "echo second"));
    let a = r.json();
    assert_eq!(
        (&a["id"], &a["error"]["code"]),
        (&json!(9), &json!(-32600)),
        "{a}"
    );
    assert!(
        a["error"]["message"].as_str().unwrap().contains("in use"),
        "{a}"
    );
    // The first still waits: it ends when it is cancelled.
    let r = s.post_json(&cancel(json!(9)));
    assert_eq!(r.status, 202, "{r:?}");
    let r = first.join().unwrap();
    assert_eq!(
        (r.status, r.body.as_str()),
        (202, ""),
        "the first call's POST: {r:?}"
    );
    assert_eq!(waiting(&d), Some(0));
}
