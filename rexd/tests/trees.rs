//! Process trees through the real `rexd --stdio`: `setsid` and double-forked grandchildren
//! that ignore TERM, a grandchild holding stdout past a timeout, detached processes across
//! sessions and the daemon's exit. Each case runs with a cgroup per exec and with the
//! subreaper (the cgroup run is skipped, saying so, where the daemon cannot make cgroups).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Daemon, alive, descendants, zombie_children};
use serde_json::{Value, json};

const MODES: [&str; 2] = ["cgroup", "subreaper"];

/// Kills a pid on drop, so a failing test leaves no sleeper behind.
struct Reaper(Vec<i32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if alive(pid) {
                // SAFETY: kill(2) with a pid this test started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// A daemon tracking trees in `mode` with a short kill grace, or `None` (said on stderr) when
/// this machine gives it no cgroups.
fn daemon(mode: &str, extra: &str) -> Option<(tempfile::TempDir, tempfile::TempDir, Daemon)> {
    let root = tempfile::tempdir().unwrap();
    let conf_dir = tempfile::tempdir().unwrap();
    let conf = conf_dir.path().join("rexd.toml");
    std::fs::write(
        &conf,
        format!(
            "[limits]\nkill_grace_ms = 300\n{extra}\n[security]\nprocess_tracking = {mode:?}\n\
             [[security.allowed_roots]]\npath = {:?}\n",
            root.path()
        ),
    )
    .unwrap();
    let mut d = Daemon::spawn(&["--config", conf.to_str().unwrap()]);
    let s = d.open_session();
    let r = d.call("exec.start", json!({"session_id": s, "argv": ["true"]}));
    let c = d.collect(r["process_id"].as_str().unwrap());
    d.call("session.close", json!({"session_id": s}));
    if c.exit["method"] == "exec.error" {
        let message = c.exit["params"]["message"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(
            mode == "cgroup" && message.contains("no cgroup"),
            "{mode}: {message}"
        );
        eprintln!("SKIPPED the {mode} run: {message}");
        return None;
    }
    Some((root, conf_dir, d))
}

/// Waits for `cond` for at most `secs` seconds.
fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pid a command wrote to `file` in the root.
fn pid_in(root: &Path, file: &str) -> i32 {
    let path = root.join(file);
    let mut pid = None;
    eventually(10, file, || {
        pid = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse().ok());
        pid.is_some()
    });
    pid.unwrap()
}

/// A grandchild that leaves the process group (`setsid`), its parent gone (double fork),
/// ignoring TERM; it writes its pid to `file`.
fn escapee(file: &str) -> String {
    format!("( setsid sh -c 'trap \"\" TERM; echo $$ > {file}; exec sleep 60' & ); exec sleep 60")
}

fn in_rexd_cgroup(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains("/rexd-"))
}

/// The next event of `process_id` that ends it, within `secs` (`None` if none came).
fn exit_of(d: &mut Daemon, process_id: &str, secs: u64) -> Option<Value> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let ev = d.next_event(left)?;
        if ev["params"]["process_id"] == process_id
            && (ev["method"] == "exec.exit" || ev["method"] == "exec.error")
        {
            return Some(ev);
        }
    }
}

#[test]
fn session_close_kills_a_setsid_grandchild_that_ignores_term() {
    for mode in MODES {
        let Some((root, _conf, mut d)) = daemon(mode, "") else {
            continue;
        };
        let s = d.open_session();
        d.call(
            "exec.start",
            json!({"session_id": s, "argv": ["sh", "-c", escapee("gc.pid")]}),
        );
        let gc = pid_in(root.path(), "gc.pid");
        let _guard = Reaper(vec![gc]);
        assert!(alive(gc));
        if mode == "cgroup" {
            assert!(in_rexd_cgroup(gc), "{gc} is not in an exec's cgroup");
        }
        d.call("session.close", json!({"session_id": s}));
        eventually(10, &format!("{mode}: grandchild {gc} killed"), || {
            !alive(gc)
        });
        // exec.kill (TERM) reaches it too, through the grace and KILL.
        let s = d.open_session();
        let r = d.call(
            "exec.start",
            json!({"session_id": s, "argv": ["sh", "-c", escapee("gc2.pid")]}),
        );
        let gc2 = pid_in(root.path(), "gc2.pid");
        let _guard2 = Reaper(vec![gc2]);
        d.call(
            "exec.kill",
            json!({"session_id": s, "process_id": r["process_id"]}),
        );
        eventually(10, &format!("{mode}: grandchild {gc2} killed"), || {
            !alive(gc2)
        });
    }
}

/// `auto` tracking whose cgroups stop working (here: no more cgroups may be made below the
/// daemon's) goes on with the subreaper, and still kills the grandchild.
#[test]
fn auto_tracking_falls_back_to_the_subreaper() {
    let Some((root, _conf, mut d)) = daemon("auto", "") else {
        unreachable!("auto always runs");
    };
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/")
        .to_owned();
    let mount = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .find(|l| l.contains(" - cgroup2 "))
        .and_then(|l| l.split(' ').nth(4).map(str::to_owned));
    let base = mount.map(|m| {
        Path::new(&m)
            .join(own.trim_start_matches('/'))
            .join(format!("rexd-{}.0", d.pid()))
    });
    let Some(base) = base.filter(|b| b.exists()) else {
        eprintln!("SKIPPED: the daemon uses no cgroups here, there is nothing to fall back from");
        return;
    };
    std::fs::write(base.join("cgroup.max.descendants"), "0").unwrap();
    let s = d.open_session();
    d.call(
        "exec.start",
        json!({"session_id": s, "argv": ["sh", "-c", escapee("gc.pid")]}),
    );
    let gc = pid_in(root.path(), "gc.pid");
    let _guard = Reaper(vec![gc]);
    assert!(
        !in_rexd_cgroup(gc),
        "{gc} should be outside any cgroup of rexd"
    );
    d.call("session.close", json!({"session_id": s}));
    eventually(10, &format!("grandchild {gc} killed"), || !alive(gc));
}

#[test]
fn daemon_exit_kills_grandchildren_and_detached_processes() {
    for mode in MODES {
        let Some((root, _conf, mut d)) = daemon(mode, "") else {
            continue;
        };
        let s = d.open_session();
        d.call(
            "exec.start",
            json!({"session_id": s, "argv": ["sh", "-c", escapee("gc.pid")]}),
        );
        d.call(
            "exec.start",
            json!({"session_id": s, "detach": true, "argv": ["sh", "-c", "trap '' TERM; echo $$ > det.pid; exec sleep 60"]}),
        );
        let (gc, det) = (
            pid_in(root.path(), "gc.pid"),
            pid_in(root.path(), "det.pid"),
        );
        let _guard = Reaper(vec![gc, det]);
        d.close_stdin();
        let deadline = Instant::now() + Duration::from_secs(15);
        while d.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "{mode}: rexd did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        eventually(5, &format!("{mode}: {gc} and {det} killed"), || {
            !alive(gc) && !alive(det)
        });
    }
}

/// A background process that let go of the pipes does not outlive its exec.
#[test]
fn what_an_exec_leaves_running_ends_with_it() {
    for mode in MODES {
        let Some((root, _conf, mut d)) = daemon(mode, "") else {
            continue;
        };
        let s = d.open_session();
        let r = d.call(
            "exec.start",
            json!({"session_id": s, "argv": ["sh", "-c", "sleep 60 </dev/null >/dev/null 2>&1 & echo $! > bg.pid"]}),
        );
        let bg = pid_in(root.path(), "bg.pid");
        let _guard = Reaper(vec![bg]);
        let exit = exit_of(&mut d, r["process_id"].as_str().unwrap(), 15).unwrap();
        assert_eq!(exit["params"]["exit_code"], 0, "{exit}");
        eventually(10, &format!("{mode}: background {bg} killed"), || {
            !alive(bg)
        });
    }
}

/// A program that cannot start (which `auto` mode tries once more outside any cgroup, to tell
/// the cgroup's fault from the program's) changes nothing for the execs after it: what they
/// leave running is not kept as a zombie child of the daemon once it ends.
#[test]
fn a_program_that_cannot_start_leaves_no_zombies_after_it() {
    for mode in ["auto", "cgroup", "subreaper"] {
        let Some((root, _conf, mut d)) = daemon(mode, "") else {
            continue;
        };
        let s = d.open_session();
        let r = d.call(
            "exec.start",
            json!({"session_id": s, "argv": ["/nonexistent/program"]}),
        );
        let failed = exit_of(&mut d, r["process_id"].as_str().unwrap(), 15).unwrap();
        assert_eq!(failed["method"], "exec.error", "{mode}: {failed}");
        for round in 0..2 {
            let file = format!("bg{round}.pid");
            let r = d.call(
                "exec.start",
                json!({"session_id": s, "argv": ["sh", "-c",
                    format!("(sleep 0.2 </dev/null >/dev/null 2>&1 & echo $! > {file})")]}),
            );
            let bg = pid_in(root.path(), &file);
            let _guard = Reaper(vec![bg]);
            let exit = exit_of(&mut d, r["process_id"].as_str().unwrap(), 15).unwrap();
            assert_eq!(exit["params"]["exit_code"], 0, "{mode}: {exit}");
            eventually(10, &format!("{mode}: {bg} ended and reaped"), || {
                !alive(bg) && zombie_children(d.pid() as i32).is_empty()
            });
        }
    }
}

/// `SIGTERM` to the daemon ends it as the end of its input does: its processes first.
#[test]
fn sigterm_to_the_daemon_kills_grandchildren_and_detached_processes() {
    for mode in MODES {
        let Some((root, _conf, mut d)) = daemon(mode, "") else {
            continue;
        };
        let s = d.open_session();
        d.call(
            "exec.start",
            json!({"session_id": s, "argv": ["sh", "-c", escapee("gc.pid")]}),
        );
        d.call(
            "exec.start",
            json!({"session_id": s, "detach": true, "argv": ["sh", "-c", "trap '' TERM; echo $$ > det.pid; exec sleep 60"]}),
        );
        let (gc, det) = (
            pid_in(root.path(), "gc.pid"),
            pid_in(root.path(), "det.pid"),
        );
        let _guard = Reaper(vec![gc, det]);
        // SAFETY: kill(2) on the daemon this test started.
        unsafe { libc::kill(d.pid() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while d.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "{mode}: rexd did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        eventually(5, &format!("{mode}: {gc} and {det} killed"), || {
            !alive(gc) && !alive(det)
        });
    }
}

#[test]
fn a_timeout_ends_the_exec_though_a_setsid_grandchild_holds_stdout() {
    for mode in MODES {
        let Some((root, _conf, mut d)) = daemon(mode, "") else {
            continue;
        };
        let s = d.open_session();
        let script = "setsid sh -c 'trap \"\" TERM; echo $$ > gc.pid; exec sleep 60' & wait";
        let r = d.call(
            "exec.start",
            json!({"session_id": s, "argv": ["sh", "-c", script], "timeout_ms": 1000}),
        );
        let p = r["process_id"].as_str().unwrap().to_owned();
        let gc = pid_in(root.path(), "gc.pid");
        let _guard = Reaper(vec![gc]);
        let exit = exit_of(&mut d, &p, 15)
            .unwrap_or_else(|| panic!("{mode}: no exec.exit while the grandchild lives"));
        assert_eq!(exit["method"], "exec.exit");
        assert_eq!(exit["params"]["timed_out"], true, "{exit}");
        let w = d.call("exec.wait", json!({"session_id": s, "process_id": p}));
        assert_eq!(w["status"], "timed_out", "{w}");
        eventually(5, &format!("{mode}: grandchild {gc} killed"), || !alive(gc));
    }
}

/// A grandchild that leaves the group and the exec's descendants *and* clears its environment
/// (so the subreaper cannot attribute it): the exec still ends once its leader is gone and the
/// grace passed, and the daemon's exit kills the grandchild.
#[test]
fn exec_exit_comes_though_an_unattributed_escapee_holds_stdout() {
    for mode in MODES {
        let Some((root, _conf, mut d)) = daemon(mode, "") else {
            continue;
        };
        let s = d.open_session();
        let script = "( env -i setsid /bin/sh -c 'trap \"\" TERM; echo $$ > gc.pid; exec sleep 60' & ); exit 3";
        let r = d.call(
            "exec.start",
            json!({"session_id": s, "argv": ["sh", "-c", script]}),
        );
        let p = r["process_id"].as_str().unwrap().to_owned();
        let gc = pid_in(root.path(), "gc.pid");
        let _guard = Reaper(vec![gc]);
        let exit = exit_of(&mut d, &p, 15)
            .unwrap_or_else(|| panic!("{mode}: no exec.exit while the escapee holds stdout"));
        assert_eq!(exit["params"]["exit_code"], 3, "{exit}");
        let w = d.call("exec.wait", json!({"session_id": s, "process_id": p}));
        assert_eq!(w["status"], "exited", "{w}");
        if mode == "cgroup" {
            // It could not leave the cgroup: killed with the rest of the tree.
            eventually(5, &format!("{mode}: escapee {gc} killed"), || !alive(gc));
        }
        d.close_stdin();
        let deadline = Instant::now() + Duration::from_secs(15);
        while d.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "{mode}: rexd did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        eventually(5, &format!("{mode}: escapee {gc} killed at exit"), || {
            !alive(gc)
        });
    }
}

/// Open a session, start 8 detached processes, close it; again and again: detached processes
/// count against one ceiling for the client (default 8) for as long as they run.
#[test]
fn detached_processes_count_against_a_ceiling_that_outlives_sessions() {
    for mode in MODES {
        let Some((_root, _conf, mut d)) = daemon(mode, "") else {
            continue;
        };
        let rexd = d.pid() as i32;
        let mut refused = 0;
        for round in 0..3 {
            let s = d.open_session();
            for _ in 0..8 {
                let r = d.request(
                    "exec.start",
                    json!({"session_id": s, "detach": true, "argv": ["sleep", "60"]}),
                );
                if let Some(e) = r.get("error") {
                    assert_eq!(e["code"], -32008, "{mode} round {round}: {e}");
                    assert_eq!(e["data"]["max_detached_processes"], 8, "{e}");
                    refused += 1;
                } else {
                    assert_eq!(round, 0, "{mode}: round {round} started more: {r}");
                }
            }
            d.call("session.close", json!({"session_id": s}));
        }
        assert_eq!(refused, 16, "{mode}");
        let live = descendants(rexd);
        let _guard = Reaper(live.clone());
        assert_eq!(live.len(), 8, "{mode}: {live:?}");
        // One ends: there is room for one more.
        // SAFETY: kill(2) on a child of the daemon this test runs.
        unsafe { libc::kill(live[0], libc::SIGKILL) };
        let s = d.open_session();
        eventually(10, &format!("{mode}: room after one ended"), || {
            d.request(
                "exec.start",
                json!({"session_id": s, "detach": true, "argv": ["sleep", "60"]}),
            )
            .get("result")
            .is_some()
        });
        assert_eq!(descendants(rexd).len(), 8, "{mode}");
    }
}
