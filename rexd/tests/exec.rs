//! Processes through the real `rexd --stdio`: real children for every exec path.

mod common;

use std::time::{Duration, Instant};

use common::{Daemon, alive, group_members};
use serde_json::{Value, json};

fn setup() -> (tempfile::TempDir, Daemon, String) {
    let root = tempfile::tempdir().unwrap();
    let mut d = Daemon::rooted(root.path());
    let s = d.open_session();
    (root, d, s)
}

fn start(d: &mut Daemon, params: Value) -> String {
    let r = d.call("exec.start", params);
    assert!(r["started_at"].as_str().unwrap().ends_with('Z'));
    r["process_id"].as_str().unwrap().to_owned()
}

/// Waits until `cond` holds or panics after `secs`.
fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn argv_streams_and_exit_code() {
    let (root, mut d, s) = setup();
    std::fs::create_dir(root.path().join("sub")).unwrap();
    let p = start(
        &mut d,
        json!({"session_id": s, "argv": ["sh", "-c", "pwd; echo \"$GREETING\"; echo oops >&2; printf 'caf\\303\\251'; exit 7"],
               "cwd": "sub", "env": {"GREETING": "hi there"}}),
    );
    let c = d.collect(&p);
    let sub = std::fs::canonicalize(root.path().join("sub")).unwrap();
    assert_eq!(c.out(), format!("{}\nhi there\ncafé", sub.display()));
    assert_eq!(c.err(), "oops\n");
    let exit = &c.exit["params"];
    assert_eq!(c.exit["method"], "exec.exit");
    assert_eq!(exit["exit_code"], 7);
    assert_eq!(exit["signal"], Value::Null);
    assert_eq!(exit["timed_out"], false);
    assert_eq!(exit["bytes_stdout"], c.stdout.len());
    assert_eq!(exit["bytes_stderr"], 5);
    let w = d.call("exec.wait", json!({"session_id": s, "process_id": p}));
    assert_eq!(
        (w["status"].clone(), w["exit_code"].clone()),
        (json!("exited"), json!(7))
    );
    // Binary output travels as base64.
    let p = start(
        &mut d,
        json!({"session_id": s, "argv": ["printf", "\\377\\000x"]}),
    );
    assert_eq!(d.collect(&p).stdout, b"\xff\x00x");
}

#[test]
fn exit_comes_after_all_output() {
    let (_r, mut d, s) = setup();
    // Lots of output on both streams and an immediate exit: the exit event must still be last.
    let p = start(
        &mut d,
        json!({"session_id": s, "shell": true, "command": "seq 1 100000; seq 1 50000 >&2"}),
    );
    let c = d.collect(&p);
    let expect: String = (1..=100000).map(|i| format!("{i}\n")).collect();
    assert_eq!(
        c.exit["params"]["truncated"],
        Value::Null,
        "under the cap: {}",
        c.exit
    );
    assert!(
        c.out() == expect,
        "stdout differs ({} bytes)",
        c.stdout.len()
    );
    assert_eq!(
        c.stderr.len(),
        (1..=50000)
            .map(|i: u32| i.to_string().len() + 1)
            .sum::<usize>()
    );
    assert!(c.events > 2);
    // Nothing of this process follows its exit.
    let after = d.next_event(Duration::from_millis(300));
    assert!(after.is_none(), "event after exit: {after:?}");
}

#[test]
fn shell_mode_needs_allow_shell_and_launch_errors_are_events() {
    let root = tempfile::tempdir().unwrap();
    let mut d = Daemon::spawn(&["--root", root.path().to_str().unwrap()]);
    let s = d.open_session();
    let e = d.call_err(
        "exec.start",
        json!({"session_id": s, "shell": true, "command": "echo hi"}),
    );
    assert_eq!(e["code"], -32007);
    let p = start(
        &mut d,
        json!({"session_id": s, "argv": ["/nonexistent/program"]}),
    );
    let c = d.collect(&p);
    assert_eq!(c.exit["method"], "exec.error");
    assert_eq!(c.exit["params"]["errno"], libc_enoent());
    // exec.wait says so too, for a client that gets no events (POST /rpc): not a bare
    // "exited" with neither an exit code nor a signal.
    let waited = d.call("exec.wait", json!({"session_id": s, "process_id": p}));
    assert_eq!(waited["status"], "exited", "{waited}");
    assert!(
        waited["exit_code"].is_null() && waited["signal"].is_null(),
        "{waited}"
    );
    let error = waited["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("cannot start /nonexistent/program: ") && error.contains("No such file"),
        "{waited}"
    );
    let (_r2, mut d2, s2) = setup();
    let p = start(
        &mut d2,
        json!({"session_id": s2, "shell": true, "command": "echo $((6*7))"}),
    );
    assert_eq!(d2.collect(&p).out(), "42\n");
}

fn libc_enoent() -> i32 {
    2
}

#[test]
fn stdin_payload_and_exec_input() {
    let (_r, mut d, s) = setup();
    let p = start(
        &mut d,
        json!({"session_id": s, "argv": ["tr", "a-z", "A-Z"], "stdin": "hello\n"}),
    );
    assert_eq!(d.collect(&p).out(), "HELLO\n");
    // Interactive: write, see the echo, write more, close.
    let p = start(&mut d, json!({"session_id": s, "argv": ["cat"]}));
    let r = d.call(
        "exec.input",
        json!({"session_id": s, "process_id": p, "data": "one\n"}),
    );
    assert_eq!(r["accepted_bytes"], 4);
    let ev = d.next_event(common::WAIT).unwrap();
    assert_eq!(
        (ev["method"].clone(), ev["params"]["data"].clone()),
        (json!("exec.stdout"), json!("one\n"))
    );
    assert_eq!(ev["params"]["seq"], 1);
    d.call("exec.input", json!({"session_id": s, "process_id": p, "data": "dHdvCg==", "encoding": "base64", "eof": true}));
    let c = d.collect_after(&p, 1);
    assert_eq!(c.out(), "two\n");
    assert_eq!(c.exit["params"]["exit_code"], 0);
    let e = d.call_err(
        "exec.input",
        json!({"session_id": s, "process_id": p, "data": "late"}),
    );
    assert_eq!(e["code"], -32005);
}

/// A JSON-RPC batch gets one array of answers, once its last request is answered: here an
/// `exec.wait` the daemon answers only when the process ends, so the `fs.stat` beside it waits
/// for it. Notifications get nothing; bad elements get their own error objects.
#[test]
fn a_batch_is_answered_with_one_array() {
    let (_r, mut d, s) = setup();
    let p = start(&mut d, json!({"session_id": s, "argv": ["sleep", "30"]}));
    let batch = json!([
        {"jsonrpc": "2.0", "id": "w", "method": "exec.wait", "params": {"session_id": s, "process_id": p}},
        {"jsonrpc": "2.0", "id": "st", "method": "fs.stat", "params": {"session_id": s, "path": "."}},
        {"jsonrpc": "2.0", "method": "session.info", "params": {"session_id": s}},
        1,
        {"jsonrpc": "2.0", "id": "u", "method": "no.such", "params": {}},
    ]);
    d.send_raw(&batch.to_string());
    // A request sent after the batch is answered on its own while the batch waits.
    let info = d.call("session.info", json!({"session_id": s}));
    assert_eq!(info["session_id"], s);
    assert!(
        d.backlog()
            .iter()
            .all(|v| !v.is_array() && v.get("id") != Some(&json!("st"))),
        "the batch went out before its exec.wait was answered: {:?}",
        d.backlog()
    );
    assert_eq!(
        d.call("exec.kill", json!({"session_id": s, "process_id": p})),
        json!({"ok": true})
    );
    let answers = d.next_array(common::WAIT).expect("one array for the batch");
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 4, "{answers:?}");
    let by_id = |id: Value| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer for {id} in {answers:?}"))
    };
    assert_eq!(by_id(json!("w"))["result"]["status"], "killed");
    assert_eq!(by_id(json!("st"))["result"]["type"], "dir");
    assert_eq!(by_id(json!("u"))["error"]["code"], -32601);
    assert_eq!(by_id(Value::Null)["error"]["code"], -32600);
    // Nothing else answered any part of it.
    assert!(
        d.backlog().iter().all(|v| !["w", "st", "u"]
            .iter()
            .any(|id| v.get("id") == Some(&json!(id)))),
        "{:?}",
        d.backlog()
    );
}

#[test]
fn kill_wait_and_statuses() {
    let (_r, mut d, s) = setup();
    let p = start(&mut d, json!({"session_id": s, "argv": ["sleep", "30"]}));
    let w = d.call(
        "exec.wait",
        json!({"session_id": s, "process_id": p, "timeout_ms": 100}),
    );
    assert_eq!(w["status"], "running");
    // A waiter without timeout is answered when the process ends.
    d.send_raw(&json!({"jsonrpc": "2.0", "id": "w", "method": "exec.wait", "params": {"session_id": s, "process_id": p}}).to_string());
    assert_eq!(
        d.call("exec.kill", json!({"session_id": s, "process_id": p})),
        json!({"ok": true})
    );
    let c = d.collect(&p);
    assert_eq!(c.exit["params"]["signal"], "TERM");
    assert_eq!(c.exit["params"]["exit_code"], Value::Null);
    let w = d.response_to(&json!("w"));
    assert_eq!(w["result"]["status"], "killed");
    assert_eq!(
        d.call(
            "exec.kill",
            json!({"session_id": s, "process_id": p, "signal": "KILL"})
        ),
        json!({"ok": false})
    );
    let e = d.call_err("exec.kill", json!({"session_id": s, "process_id": "p_999"}));
    assert_eq!(e["code"], -32005);
}

/// Reads `p`'s events until its `exec.exit`: the stdout bytes, the exit event, and the most
/// the daemon's RSS reached meanwhile (from `rss_before`, in KiB).
fn stream_until_exit(d: &mut Daemon, p: &str, rss_before: u64) -> (usize, Value, u64) {
    let mut max_rss = rss_before;
    let mut bytes = 0usize;
    loop {
        let ev = d.next_event(common::WAIT).expect("events");
        if let Some(r) = rexd::sys::rss_kib(d.pid()) {
            max_rss = max_rss.max(r);
        }
        match ev["method"].as_str().unwrap() {
            "exec.stdout" => {
                assert_eq!(ev["params"]["process_id"], p);
                bytes += ev["params"]["data"].as_str().unwrap().len()
            }
            "exec.exit" => return (bytes, ev, max_rss),
            other => panic!("{other}"),
        }
    }
}

#[test]
fn output_cap_truncates_and_memory_stays_flat() {
    let (_r, mut d, s) = setup();
    let rss_before = rexd::sys::rss_kib(d.pid()).unwrap();
    let p = start(
        &mut d,
        json!({"session_id": s, "shell": true, "command": "yes | head -c 200M", "timeout_ms": 120000}),
    );
    let (bytes, exit, max_rss) = stream_until_exit(&mut d, &p, rss_before);
    assert_eq!(bytes, 1 << 20);
    assert_eq!(exit["params"]["truncated"], true);
    assert_eq!(exit["params"]["bytes_stdout"], 1 << 20);
    assert_eq!(
        exit["params"]["exit_code"], 0,
        "the command runs to its end: {exit}"
    );
    assert!(
        max_rss < rss_before + 32 * 1024,
        "daemon RSS grew from {rss_before} KiB to {max_rss} KiB"
    );
    // A per-exec cap lower than the session's.
    let p = start(
        &mut d,
        json!({"session_id": s, "argv": ["seq", "1", "1000"], "max_output_bytes": 10}),
    );
    let c = d.collect(&p);
    assert_eq!(c.out(), "1\n2\n3\n4\n5\n");
    assert_eq!(c.exit["params"]["truncated"], true);
}

/// A streaming client (`rex exec`) asks for all the output: only the operator's
/// `limits.hard_output_bytes` cuts it, and the daemon's memory stays flat meanwhile; a client
/// that does not ask keeps the 1 MiB cap.
#[test]
fn uncapped_output_streams_past_the_cap_up_to_the_operators_hard_limit() {
    let (_r, mut d, s) = setup();
    let rss_before = rexd::sys::rss_kib(d.pid()).unwrap();
    let p = start(
        &mut d,
        json!({"session_id": s, "shell": true, "command": "head -c 24M /dev/zero | tr '\\0' x",
               "uncapped_output": true, "timeout_ms": 120000}),
    );
    let (bytes, exit, max_rss) = stream_until_exit(&mut d, &p, rss_before);
    assert_eq!(bytes, 24 << 20, "every byte came");
    assert_ne!(exit["params"]["truncated"], true, "{exit}");
    assert!(
        max_rss < rss_before + 32 * 1024,
        "daemon RSS grew from {rss_before} KiB to {max_rss} KiB"
    );
    // Without asking: the session's cap, as before.
    let p = start(
        &mut d,
        json!({"session_id": s, "shell": true, "command": "head -c 3M /dev/zero | tr '\\0' x"}),
    );
    let c = d.collect(&p);
    assert_eq!(c.out().len(), 1 << 20);
    assert_eq!(c.exit["params"]["truncated"], true);

    // The operator's hard limit holds for those who ask.
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("rexd.toml");
    std::fs::write(&config, "[limits]\nhard_output_bytes = 2000000\n").unwrap();
    let mut d = Daemon::spawn(&[
        "--root",
        root.path().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    let s = d.open_session();
    let p = start(
        &mut d,
        json!({"session_id": s, "argv": ["head", "-c", "3M", "/dev/zero"],
               "uncapped_output": true}),
    );
    let c = d.collect(&p);
    assert_eq!(c.out().len(), 2_000_000);
    assert_eq!(c.exit["params"]["truncated"], true);
}

#[test]
fn timeout_kills_the_whole_group_including_grandchildren() {
    let (_r, mut d, s) = setup();
    // The shell forks grandchildren (one ignoring TERM) and prints its pid = the group id.
    let p = start(
        &mut d,
        json!({"session_id": s, "shell": true, "timeout_ms": 500,
               "command": "sleep 300 & (trap '' TERM; sleep 301) & sh -c 'sleep 302' & echo $$; wait"}),
    );
    let first = d.next_event(common::WAIT).unwrap();
    let pgid: i32 = first["params"]["data"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eventually(10, "grandchildren started", || {
        group_members(pgid).len() >= 4
    });
    let members = group_members(pgid);
    let c = d.collect(&p);
    assert_eq!(c.exit["params"]["timed_out"], true, "{}", c.exit);
    let w = d.call("exec.wait", json!({"session_id": s, "process_id": p}));
    assert_eq!(w["status"], "timed_out");
    // Everything in the group is gone (the TERM-ignoring one by the KILL after the grace).
    eventually(10, "group gone", || group_members(pgid).is_empty());
    for pid in members {
        eventually(10, "member gone", || !alive(pid));
    }
}

#[test]
fn hundred_concurrent_execs_in_one_session() {
    let root = tempfile::tempdir().unwrap();
    let conf = root.path().join("c.toml");
    std::fs::write(&conf, "[limits]\nmax_processes_per_session = 128\n").unwrap();
    let mut d = Daemon::spawn(&[
        "--config",
        conf.to_str().unwrap(),
        "--root",
        root.path().to_str().unwrap(),
    ]);
    let s = d.open_session();
    let ids: Vec<String> = (0..100)
        .map(|i| start(&mut d, json!({"session_id": s, "argv": ["sh", "-c", format!("sleep 0.3; echo out-{i}; echo err-{i} >&2")]})))
        .collect();
    let info = d.call("session.info", json!({"session_id": s}));
    assert_eq!(info["processes"].as_array().unwrap().len(), 100);
    for (i, p) in ids.iter().enumerate() {
        let c = d.collect(p);
        assert_eq!(c.out(), format!("out-{i}\n"));
        assert_eq!(c.err(), format!("err-{i}\n"));
        assert_eq!(c.exit["params"]["exit_code"], 0);
    }
    // Over the default limit of 8 in a session that lowered it.
    let s2 = d
        .open_session_with(json!({"client_name": "t", "limits": {"max_processes_per_session": 2}}));
    start(&mut d, json!({"session_id": s2, "argv": ["sleep", "5"]}));
    start(&mut d, json!({"session_id": s2, "argv": ["sleep", "5"]}));
    let e = d.call_err(
        "exec.start",
        json!({"session_id": s2, "argv": ["sleep", "5"]}),
    );
    assert_eq!(e["code"], -32008);
}

#[test]
fn session_close_kills_children_unless_detached() {
    let (_r, mut d, s) = setup();
    let mut pids = Vec::new();
    for detach in [false, false, true] {
        let p = start(
            &mut d,
            json!({"session_id": s, "shell": true, "command": "echo $$; exec sleep 300", "detach": detach}),
        );
        let ev = d.next_event(common::WAIT).unwrap();
        assert_eq!(ev["params"]["process_id"], p);
        pids.push(
            ev["params"]["data"]
                .as_str()
                .unwrap()
                .trim()
                .parse::<i32>()
                .unwrap(),
        );
    }
    assert!(pids.iter().all(|p| alive(*p)));
    assert_eq!(
        d.call("session.close", json!({"session_id": s})),
        json!({"ok": true})
    );
    eventually(10, "attached children killed", || {
        !alive(pids[0]) && !alive(pids[1])
    });
    assert!(alive(pids[2]), "the detached child keeps running");
    unsafe_kill(pids[2]);
    // The closed session's processes are not addressable any more.
    let e = d.call_err("exec.wait", json!({"session_id": s, "process_id": "p_1"}));
    assert_eq!(e["code"], -32602);
    // Closing stdin ends the daemon, which ends the attached children of open sessions too.
    let s2 = d.open_session();
    let p = start(
        &mut d,
        json!({"session_id": s2, "shell": true, "command": "echo $$; exec sleep 300"}),
    );
    let ev = d.next_event(common::WAIT).unwrap();
    assert_eq!(ev["params"]["process_id"], p);
    let pid: i32 = ev["params"]["data"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    d.close_stdin();
    eventually(10, "daemon exit kills children", || !alive(pid));
}

/// `rexd --stdio` with this TOML (the root is appended as the allowed root).
fn with_config(root: &std::path::Path, toml: &str) -> (tempfile::TempDir, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("rexd.toml");
    let text = format!("{toml}\n[[security.allowed_roots]]\npath = {:?}\n", root);
    std::fs::write(&conf, text).unwrap();
    let d = Daemon::spawn(&["--config", conf.to_str().unwrap()]);
    (dir, d)
}

/// With a command list, what is checked is the file that runs (a copy of a binary named `ls`
/// inside the root is not `ls`), the client cannot move the lookup (`PATH`), and variables that
/// make an allowed program load other code do not reach it.
#[test]
fn command_lists_match_the_file_that_runs_and_filter_the_environment() {
    let root = tempfile::tempdir().unwrap();
    let (_conf, mut d) = with_config(
        root.path(),
        "[security]\nallow_commands = [\"ls\", \"printenv\"]",
    );
    let s = d.open_session();
    let p = start(
        &mut d,
        json!({"session_id": s, "argv": ["printenv"], "env": {
            "LD_PRELOAD": "/nonexistent/rexd-preload.so", "LD_LIBRARY_PATH": "/nonexistent",
            "BASH_ENV": "/nonexistent/rc", "GCONV_PATH": "/nonexistent",
            "GIT_SSH_COMMAND": "touch pwned", "GREETING": "hi"}}),
    );
    let c = d.collect(&p);
    assert!(c.out().contains("GREETING=hi\n"), "{}", c.out());
    // (The daemon's own environment passes as ever: only the client's values are checked.)
    for dropped in ["/nonexistent", "touch pwned"] {
        assert!(
            !c.out().contains(dropped),
            "{dropped} reached the child: {}",
            c.out()
        );
    }
    let e = d.call_err(
        "exec.start",
        json!({"session_id": s, "argv": ["ls"], "env": {"PATH": root.path()}}),
    );
    assert_eq!(e["code"], -32001, "{e}");
    assert_eq!(e["data"]["variable"], "PATH", "{e}");

    // A copy of another program, named ls, inside the root.
    let bin = root.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::copy("/bin/echo", bin.join("ls")).unwrap();
    let copy = bin.join("ls").to_str().unwrap().to_owned();
    for argv0 in [copy.as_str(), "bin/ls", "./bin/ls"] {
        let e = d.call_err(
            "exec.start",
            json!({"session_id": s, "argv": [argv0, "pwned"]}),
        );
        assert_eq!(e["code"], -32001, "{argv0}: {e}");
    }
    // A link named ls to the real ls is ls; a link named sh to the same file is not (a
    // multi-call binary allowed as ls must not run as sh).
    let real = rexd::policy::lookup("ls".as_ref(), std::env::var_os("PATH").as_deref()).unwrap();
    let links = root.path().join("links");
    std::fs::create_dir(&links).unwrap();
    std::os::unix::fs::symlink(&real, links.join("ls")).unwrap();
    std::os::unix::fs::symlink(&real, links.join("sh")).unwrap();
    let e = d.call_err("exec.start", json!({"session_id": s, "argv": ["links/sh"]}));
    assert_eq!(e["code"], -32001, "{e}");
    for argv0 in ["ls", "links/ls", real.to_str().unwrap()] {
        let p = start(&mut d, json!({"session_id": s, "argv": [argv0, "-d", "/"]}));
        let c = d.collect(&p);
        assert_eq!(c.out(), "/\n", "{argv0}: {}", c.err());
        assert_eq!(c.exit["params"]["exit_code"], 0);
    }
}

/// A deny list matches the file too: a link to a denied program under another name is
/// refused, and the environment is filtered as for an allow list.
#[test]
fn deny_lists_match_the_file_and_filter_the_environment() {
    let root = tempfile::tempdir().unwrap();
    let (_conf, mut d) = with_config(root.path(), "[security]\ndeny_commands = [\"rm\"]");
    let s = d.open_session();
    let rm = rexd::policy::lookup("rm".as_ref(), std::env::var_os("PATH").as_deref()).unwrap();
    std::os::unix::fs::symlink(&rm, root.path().join("tidy")).unwrap();
    std::fs::write(root.path().join("keep"), "x").unwrap();
    for argv0 in ["rm", "/bin/rm", "./tidy"] {
        let e = d.call_err(
            "exec.start",
            json!({"session_id": s, "argv": [argv0, "keep"]}),
        );
        assert_eq!(e["code"], -32001, "{argv0}: {e}");
    }
    assert!(root.path().join("keep").exists());
    let p = start(
        &mut d,
        json!({"session_id": s, "argv": ["printenv"], "env": {"LD_PRELOAD": "/nonexistent/x.so", "A": "b"}}),
    );
    let c = d.collect(&p);
    assert!(
        c.out().contains("A=b\n") && !c.out().contains("/nonexistent"),
        "{}",
        c.out()
    );
}

fn unsafe_kill(pid: i32) {
    let _ = std::process::Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .status();
}

#[test]
fn pty_is_a_terminal_and_resizes() {
    let (_r, mut d, s) = setup();
    let r = d.call(
        "pty.open",
        json!({"session_id": s, "argv": ["sh"], "cols": 100, "rows": 30}),
    );
    let pty = r["pty_id"].as_str().unwrap().to_owned();
    let mut screen = String::new();
    let read_until = |d: &mut Daemon, want: &str, screen: &mut String| {
        let deadline = Instant::now() + common::WAIT;
        while !screen.contains(want) {
            assert!(
                Instant::now() < deadline,
                "never saw {want:?} in {screen:?}"
            );
            if let Some(ev) = d.next_event(Duration::from_millis(200)) {
                assert_eq!(ev["method"], "pty.output", "{ev}");
                assert_eq!(ev["params"]["pty_id"], pty);
                screen.push_str(&String::from_utf8_lossy(&common::data_bytes(&ev["params"])));
            }
        }
    };
    d.call("pty.input", json!({"session_id": s, "pty_id": pty, "data": "test -t 0 && test -t 1 && echo IS''ATTY; stty size\n"}));
    read_until(&mut d, "ISATTY", &mut screen);
    read_until(&mut d, "30 100", &mut screen);
    assert_eq!(
        d.call(
            "pty.resize",
            json!({"session_id": s, "pty_id": pty, "cols": 132, "rows": 50})
        ),
        json!({"ok": true})
    );
    d.call(
        "pty.input",
        json!({"session_id": s, "pty_id": pty, "data": "stty size\nexit 3\n"}),
    );
    read_until(&mut d, "50 132", &mut screen);
    let exit = loop {
        let ev = d.next_event(common::WAIT).expect("pty.exit");
        if ev["method"] == "pty.exit" {
            break ev;
        }
    };
    assert_eq!(exit["params"]["exit_code"], 3);
    assert_eq!(exit["params"]["process_id"], r["process_id"]);
    // A program that is not a shell: isatty seen by a non-interactive child.
    let r = d.call(
        "pty.open",
        json!({"session_id": s, "argv": ["sh", "-c", "[ -t 1 ] && echo tty-yes || echo tty-no"]}),
    );
    let mut out = String::new();
    loop {
        let ev = d.next_event(common::WAIT).unwrap();
        if ev["method"] == "pty.exit" {
            assert_eq!(ev["params"]["pty_id"], r["pty_id"]);
            break;
        }
        out.push_str(&String::from_utf8_lossy(&common::data_bytes(&ev["params"])));
    }
    assert!(out.contains("tty-yes"), "{out:?}");
    // Close kills a running PTY process.
    let r = d.call(
        "pty.open",
        json!({"session_id": s, "argv": ["sleep", "300"]}),
    );
    assert_eq!(
        d.call("pty.close", json!({"session_id": s, "pty_id": r["pty_id"]})),
        json!({"ok": true})
    );
    let ev = loop {
        let ev = d.next_event(common::WAIT).unwrap();
        if ev["method"] == "pty.exit" {
            break ev;
        }
    };
    assert!(ev["params"]["signal"].is_string(), "{ev}");
    let e = d.call_err(
        "pty.input",
        json!({"session_id": s, "pty_id": "t_999", "data": "x"}),
    );
    assert_eq!(e["code"], -32005);
}

/// Peak resident memory of `pid`, KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Issue 33 item 7: 40 `exec.wait` calls with 4 MiB ids held 213 MB. An id is at most 256 bytes
/// of JSON: longer ones are answered -32600 with id null at once, and nothing keeps them.
#[test]
fn over_long_ids_are_refused_and_hold_nothing() {
    let (_root, mut d, s) = setup();
    let p = start(&mut d, json!({"session_id": s, "argv": ["sleep", "600"]}));
    let big = "x".repeat(4 << 20);
    for i in 0..40 {
        let line = json!({"jsonrpc": "2.0", "id": format!("{i}{big}"), "method": "exec.wait",
                          "params": {"session_id": s, "process_id": p}});
        d.send_raw(&line.to_string());
    }
    for _ in 0..40 {
        let answer = d.response_to(&Value::Null);
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        assert!(
            answer["error"]["data"]
                .as_str()
                .unwrap()
                .contains("the limit is 256"),
            "{answer}"
        );
    }
    let peak = peak_rss_kib(d.pid());
    assert!(peak < 96 * 1024, "peak RSS {peak} KiB");
    // 256 bytes of JSON, quotes included, is an id like any other.
    let id = json!("i".repeat(254));
    let line = json!({"jsonrpc": "2.0", "id": id, "method": "exec.wait",
                      "params": {"session_id": s, "process_id": p}});
    d.send_raw(&line.to_string());
    d.call(
        "exec.kill",
        json!({"session_id": s, "process_id": p, "signal": "KILL"}),
    );
    let r = d.response_to(&id);
    assert_eq!(r["result"]["signal"], "KILL", "{r}");
}

/// Issue 33: session ids were `s_1`, `s_2`, …; now 128 random bits, so an id says nothing of
/// the others and cannot be guessed.
#[test]
fn session_ids_are_random() {
    let (_root, mut d, first) = setup();
    let second = d.open_session();
    for id in [&first, &second] {
        let hex = id.strip_prefix("s_").unwrap_or_else(|| panic!("{id}"));
        assert!(
            hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
    }
    assert_ne!(first, second);
}

/// Issue 33: `exec.input` naming another session's PTY process answered "this process runs on a
/// PTY", which told the caller that the process exists. It gets the unknown-process answer.
#[test]
fn exec_input_to_another_sessions_process_is_not_found() {
    let (_root, mut d, mine) = setup();
    let theirs = d.open_session();
    let r = d.call(
        "pty.open",
        json!({"session_id": theirs, "argv": ["sleep", "300"]}),
    );
    let their_process = r["process_id"].as_str().unwrap().to_owned();
    let unknown = d.call_err(
        "exec.input",
        json!({"session_id": mine, "process_id": "p_999999", "data": "x"}),
    );
    let other = d.call_err(
        "exec.input",
        json!({"session_id": mine, "process_id": their_process, "data": "x"}),
    );
    assert_eq!(other["code"], -32005, "{other}");
    assert_eq!(other["code"], unknown["code"]);
    assert_eq!(
        other["message"],
        format!("no process {their_process:?} in this session"),
        "{other}"
    );
    // Its own session still hears the PTY answer.
    let e = d.call_err(
        "exec.input",
        json!({"session_id": theirs, "process_id": their_process, "data": "x"}),
    );
    assert!(e["message"].as_str().unwrap().contains("pty.input"), "{e}");
}

/// `exec.wait` with `output: true` is for sessions without an event stream (`POST /rpc`); over
/// stdio the output comes in events, and asking for it is invalid params that says so.
#[test]
fn output_on_exec_wait_is_refused_where_events_stream() {
    let (_root, mut d, s) = setup();
    let p = start(&mut d, json!({"session_id": s, "argv": ["true"]}));
    let e = d.call_err(
        "exec.wait",
        json!({"session_id": s, "process_id": p, "output": true}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("POST /rpc"), "{e}");
}
