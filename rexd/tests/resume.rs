//! Resumable sessions end to end: a command prints a numbered line every 100 ms for 10 s;
//! halfway through, its link is cut (the ssh client killed; the WebSocket's TCP connections
//! dropped by a proxy in between). `rex --resume` reconnects and resumes by itself: every line
//! arrives exactly once, in order, and rex exits with the command's exit code.

mod common;
mod netkit;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deskwire_integration::Sshd;
use netkit::*;

const LINES: usize = 100;
const SCRIPT: &str =
    "i=1; while [ $i -le 100 ]; do echo \"line $i\"; i=$((i+1)); sleep 0.1; done; exit 7";

/// Runs `rex` with `args`; its stdout lines come on the channel.
fn spawn_rex(args: &[String], env: &[(&str, &str)]) -> (Child, Receiver<String>) {
    let mut child = Command::new(REX)
        .args(args)
        .env("REX_TARGETS_FILE", "/nonexistent/rex-targets.toml")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// Reads lines until `n` arrived; returns them.
fn take(rx: &Receiver<String>, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            rx.recv_timeout(Duration::from_secs(20))
                .expect("rex stopped printing")
        })
        .collect()
}

/// Everything rex prints, then its exit code.
fn finish(mut child: Child, rx: Receiver<String>, mut got: Vec<String>) -> (Vec<String>, i32) {
    got.extend(rx.iter());
    (got, child.wait().unwrap().code().unwrap_or(-1))
}

fn expected() -> Vec<String> {
    (1..=LINES).map(|i| format!("line {i}")).collect()
}

#[test]
fn over_ssh_a_killed_ssh_client_loses_no_line() {
    if let Some(why) = Sshd::missing_tools() {
        eprintln!("skipped: {why}");
        return;
    }
    let bin_dir = Path::new(REXD).parent().unwrap().display().to_string();
    // A short agent idle time, so the agent this test starts is gone soon after it.
    let sshd = Sshd::start_with_config(&format!(
        "SetEnv PATH={bin_dir}:/usr/bin:/bin REXD_AGENT_IDLE_MS=3000"
    ));
    let place = Place::new("resume-ssh");
    let mut args: Vec<String> = vec!["-t".into(), sshd.url(), "--resume".into()];
    args.extend(sshd.ssh_options().iter().map(|o| format!("--ssh-arg={o}")));
    args.extend([
        "--rexd-arg=--config".into(),
        format!("--rexd-arg={}", place.config.display()),
        "sh".into(),
        SCRIPT.into(),
    ]);
    let (rex, rx) = spawn_rex(&args, &[]);
    let got = take(&rx, 30);
    let ssh = children(rex.id(), "ssh");
    assert_eq!(ssh.len(), 1, "rex's ssh: {ssh:?}");
    unsafe { libc::kill(ssh[0], libc::SIGKILL) };
    let (got, code) = finish(rex, rx, got);
    assert_eq!(got, expected(), "every line once, in order");
    assert_eq!(code, 7);
    // The audit log saw the resume.
    let resumed = place
        .audit_lines()
        .into_iter()
        .filter(|e| e["method"] == "session.resume")
        .count();
    assert_eq!(resumed, 1);
}

/// A TCP proxy whose connections the test can cut (new ones still go through).
struct Proxy {
    port: u16,
    live: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    fn start(to: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let live: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (l2, s2) = (Arc::clone(&live), Arc::clone(&stop));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s2.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                for s in [&client, &server] {
                    l2.lock().unwrap().push(s.try_clone().unwrap());
                }
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 65536];
                        loop {
                            match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    if to.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, live, stop }
    }

    /// Drops every connection going through now.
    fn cut(&self) {
        for s in self.live.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.cut();
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

#[test]
fn over_websocket_a_cut_connection_loses_no_line() {
    let place = Place::new("resume-ws");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let proxy = Proxy::start(d.port);
    let url = format!("ws://127.0.0.1:{}", proxy.port);
    let args: Vec<String> = ["-t", &url, "--resume", "sh", SCRIPT]
        .map(String::from)
        .to_vec();
    let (rex, rx) = spawn_rex(&args, &[("REXD_TOKEN", TOKEN)]);
    let got = take(&rx, 30);
    proxy.cut();
    let (got, code) = finish(rex, rx, got);
    assert_eq!(got, expected(), "every line once, in order");
    assert_eq!(code, 7);
    let audit = place.audit_lines();
    let resume = audit
        .iter()
        .find(|e| e["method"] == "session.resume")
        .expect("a resume in the audit log");
    assert_eq!(resume["principal"], "alice", "{resume}");
}

#[test]
fn a_resume_that_cannot_replay_says_how_many_events_were_lost() {
    // Through the hub directly: a resumable session, more events than the replay buffer holds,
    // then a resume from the start.
    use rexd::hub::{self, ConnInfo, ConnKind, ConnSink, HubConfig, HubInput};
    #[derive(Clone, Default)]
    struct Keep(Arc<Mutex<Vec<serde_json::Value>>>);
    impl ConnSink for Keep {
        fn send(&self, m: Vec<u8>) {
            self.0
                .lock()
                .unwrap()
                .push(serde_json::from_slice(&m).unwrap());
        }
        fn unsent(&self) -> usize {
            0
        }
        fn consumed(&self, _: usize) {}
        fn close(&self, _: &str) {}
        fn done(&self) {}
    }
    let dir = tempfile::tempdir().unwrap();
    let mut settings = rexd::service::Settings::for_roots(&[dir.path().to_owned()]).unwrap();
    settings.allow_shell = true;
    let audit_path = dir.path().join("audit.log");
    settings.audit = rexd::audit::Audit::file(&audit_path).unwrap();
    let config = HubConfig {
        replay_events: 5,
        ..HubConfig::default()
    };
    let (hub, thread) = hub::start(settings, config).unwrap();
    let open = |sink: &Keep| {
        let conn = hub.next_conn();
        hub.send(HubInput::Open {
            conn,
            info: ConnInfo {
                principal: "p".into(),
                address: None,
                kind: ConnKind::Stream,
                raw_frames: false,
            },
            sink: Box::new(sink.clone()),
        });
        conn
    };
    let send = |conn, m: serde_json::Value| {
        hub.send(HubInput::Message {
            conn,
            bytes: m.to_string().into_bytes(),
        })
    };
    let wait = |sink: &Keep, what: &dyn Fn(&serde_json::Value) -> bool| {
        for _ in 0..1000 {
            if let Some(v) = sink.0.lock().unwrap().iter().find(|v| what(v)) {
                return v.clone();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("nothing came: {:?}", sink.0.lock().unwrap());
    };
    let a = Keep::default();
    let c1 = open(&a);
    send(
        c1,
        serde_json::json!({"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"t","resumable":true}}),
    );
    let opened = wait(&a, &|v| v["id"] == 1);
    let sid = opened["result"]["session_id"].as_str().unwrap().to_owned();
    let secret = opened["result"]["resume"]["resume_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    // Twelve separate events (a line every 20 ms), then the exit.
    send(
        c1,
        serde_json::json!({"jsonrpc":"2.0","id":2,"method":"exec.start","params":{"session_id":sid,"command":"for i in 1 2 3 4 5 6 7 8 9 10 11; do echo $i; sleep 0.02; done","shell":true}}),
    );
    wait(&a, &|v| v["method"] == "exec.exit");
    let last =
        a.0.lock()
            .unwrap()
            .iter()
            .filter_map(|v| v["params"]["event_seq"].as_u64())
            .max()
            .unwrap();
    assert!(last >= 7, "{last} events");
    hub.send(HubInput::Closed { conn: c1 });
    let b = Keep::default();
    let c2 = open(&b);
    send(
        c2,
        serde_json::json!({"jsonrpc":"2.0","id":3,"method":"session.resume","params":{"session_id":sid,"resume_secret":secret,"last_seq":0}}),
    );
    let e = wait(&b, &|v| v["id"] == 3);
    assert_eq!(e["error"]["code"], -32010, "{e}");
    assert_eq!(e["error"]["data"]["lost"], last - 5, "{e}");
    // A wrong secret: as if there were no such session.
    send(
        c2,
        serde_json::json!({"jsonrpc":"2.0","id":4,"method":"session.resume","params":{"session_id":sid,"resume_secret":"00","last_seq":last}}),
    );
    assert_eq!(wait(&b, &|v| v["id"] == 4)["error"]["code"], -32602);
    // The failed attempts are in the audit log, without the secret.
    let audit = std::fs::read_to_string(&audit_path).unwrap();
    let refused: Vec<&str> = audit
        .lines()
        .filter(|l| l.contains("\"session.resume\"") && l.contains("\"error\""))
        .collect();
    assert_eq!(refused.len(), 2, "{audit}");
    assert!(
        refused
            .iter()
            .all(|l| l.contains(&sid) && l.contains("\"principal\":\"p\"")),
        "{audit}"
    );
    assert!(
        !audit.contains(&secret),
        "the resume secret is never written"
    );
    // Accepting the loss: the five kept events come again.
    send(
        c2,
        serde_json::json!({"jsonrpc":"2.0","id":5,"method":"session.resume","params":{"session_id":sid,"resume_secret":secret,"last_seq":0,"accept_loss":true}}),
    );
    let r = wait(&b, &|v| v["id"] == 5);
    assert_eq!(
        (r["result"]["replayed"].clone(), r["result"]["lost"].clone()),
        (serde_json::json!(5), serde_json::json!(last - 5))
    );
    hub.send(HubInput::Shutdown);
    thread.join().unwrap().unwrap();
}

/// `rexd --stdio --resumable` bridges to one agent, all as the same user, in a runtime directory
/// of the test's own (so the agent is this test's alone; it exits soon after).
fn bridge(runtime: &Path, root: &Path) -> common::Daemon {
    common::Daemon::spawn_env(
        &[
            "--resumable",
            "--allow-shell",
            "--root",
            root.to_str().unwrap(),
        ],
        &[
            ("XDG_RUNTIME_DIR", runtime.to_str().unwrap()),
            ("REXD_AGENT_IDLE_MS", "2000"),
        ],
    )
}

/// Issue 33: another connection of the same user could drive a resumable session without its
/// secret (`session.info`, `exec.start`, input to its `cat`). A session now answers only on the
/// connection that holds it: the one that opened it, or the one that resumed it with the secret.
#[test]
fn another_bridge_cannot_drive_a_resumable_session_without_its_secret() {
    let runtime = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut a = bridge(runtime.path(), root.path());
    let opened = a.call(
        "session.open",
        serde_json::json!({"client_name": "a", "resumable": true}),
    );
    let sid = opened["session_id"].as_str().unwrap().to_owned();
    let secret = opened["resume"]["resume_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let cat = a.call(
        "exec.start",
        serde_json::json!({"session_id": sid, "argv": ["cat"]}),
    )["process_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut b = bridge(runtime.path(), root.path());
    for (method, params) in [
        ("session.info", serde_json::json!({"session_id": sid})),
        (
            "exec.start",
            serde_json::json!({"session_id": sid, "argv": ["echo", "mine"]}),
        ),
        (
            "exec.input",
            serde_json::json!({"session_id": sid, "process_id": cat, "data": "from b\n"}),
        ),
        (
            "exec.kill",
            serde_json::json!({"session_id": sid, "process_id": cat}),
        ),
        ("session.close", serde_json::json!({"session_id": sid})),
    ] {
        let e = b.call_err(method, params);
        assert_eq!(e["code"], -32602, "{method}: {e}");
        assert_eq!(
            e["message"],
            format!("unknown session_id {sid:?}"),
            "{method}: {e}"
        );
    }
    // The session and its cat are as they were: A still drives it.
    a.call(
        "exec.input",
        serde_json::json!({"session_id": sid, "process_id": cat, "data": "from a\n"}),
    );
    let out = a.next_event(common::WAIT).unwrap();
    assert_eq!(out["params"]["data"], "from a\n", "{out}");
    // With the secret B takes it over, and then A is the stranger.
    let r = b.call(
        "session.resume",
        serde_json::json!({"session_id": sid, "resume_secret": secret, "last_seq": 1}),
    );
    assert_eq!(r["session_id"], sid.as_str(), "{r}");
    b.call(
        "exec.input",
        serde_json::json!({"session_id": sid, "process_id": cat, "data": "from b\n", "eof": true}),
    );
    let c = b.collect_after(&cat, 1);
    assert_eq!(c.out(), "from b\n");
    let e = a.call_err("session.info", serde_json::json!({"session_id": sid}));
    assert_eq!(e["code"], -32602, "{e}");
    b.call("session.close", serde_json::json!({"session_id": sid}));
}

/// The same rule on `rexd --listen`: a `/ws` session answers on its own WebSocket only, not on
/// another WebSocket or a `POST /rpc` of the same token.
#[test]
fn a_websocket_session_answers_only_on_its_connection() {
    use tungstenite::client::IntoClientRequest;
    let place = Place::new("ws-owner");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let ws_url = format!("{}/ws", d.url.replacen("http", "ws", 1));
    let connect = || {
        let mut request = ws_url.as_str().into_client_request().unwrap();
        request
            .headers_mut()
            .insert("Authorization", format!("Bearer {TOKEN}").parse().unwrap());
        tungstenite::connect(request).unwrap().0
    };
    type Ws = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;
    fn call(ws: &mut Ws, id: u64, method: &str, params: serde_json::Value) -> serde_json::Value {
        let m = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        ws.send(tungstenite::Message::Text(m.to_string().into()))
            .unwrap();
        loop {
            let tungstenite::Message::Text(text) = ws.read().unwrap() else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }
    let mut a = connect();
    let opened = call(
        &mut a,
        1,
        "session.open",
        serde_json::json!({"client_name": "a"}),
    );
    let sid = opened["result"]["session_id"].as_str().unwrap().to_owned();
    let mut b = connect();
    let info = serde_json::json!({"session_id": sid});
    let e = call(&mut b, 2, "session.info", info.clone());
    assert_eq!(e["error"]["code"], -32602, "{e}");
    let e = call(
        &mut b,
        3,
        "exec.start",
        serde_json::json!({"session_id": sid, "argv": ["true"]}),
    );
    assert_eq!(e["error"]["code"], -32602, "{e}");
    let body =
        serde_json::json!({"jsonrpc": "2.0", "id": 4, "method": "session.info", "params": info});
    let r = post(&d.url, Some(TOKEN), &body.to_string());
    assert_eq!(r.json()["error"]["code"], -32602, "{r:?}");
    // Its own connection still drives it.
    let r = call(&mut a, 5, "session.info", info);
    assert_eq!(r["result"]["session_id"], sid.as_str(), "{r}");
}

/// Issue 33: the agent read a line of any length (150 MiB took it to 324 MB). It reads at most
/// the message cap (16 MiB) of one line: a longer one is skipped through its newline, as
/// `rexd --stdio` does, and the connection goes on.
#[test]
fn the_agent_reads_no_line_past_the_message_cap() {
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("agent.sock");
    let mut agent = Command::new(REXD)
        .arg("--agent")
        .arg(&socket)
        .arg("--root")
        .arg(dir.path())
        .env("REXD_AGENT_IDLE_MS", "60000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut stream = loop {
        match UnixStream::connect(&socket) {
            Ok(s) => break s,
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("the agent did not start: {e}"),
        }
    };
    let mut lines = BufReader::new(stream.try_clone().unwrap()).lines();
    // 200 MiB of one line, then a request.
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..200 {
        stream.write_all(&chunk).unwrap();
    }
    stream
        .write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.open\",\"params\":{\"client_name\":\"t\"}}\n")
        .unwrap();
    let answer: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer["result"]["session_id"].is_string(), "{answer}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.id())).unwrap();
    let peak: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(peak < 96 * 1024, "the agent's peak RSS {peak} KiB");
    drop((lines, stream));
    unsafe { libc::kill(agent.id() as i32, libc::SIGTERM) };
    agent.wait().unwrap();
}
