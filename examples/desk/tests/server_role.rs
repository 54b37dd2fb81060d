//! The desk demo as `--role server` comes back after its IRC server restarts (the core's
//! reconnect policy, as `rexd --irc`), and a desk started afterwards is answered.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deskwire_integration::{Ngircd, stop_daemon};

/// Waits (at most 30 s) until `seen` holds `want` at least `times` times.
fn wait_for(seen: &Arc<Mutex<String>>, want: &str, times: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = seen.lock().unwrap().clone();
        if text.matches(want).count() >= times {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no {want:?} ({times}x) in:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_server_role_comes_back_after_the_irc_server_restarts() {
    let mut ircd = Ngircd::start();
    let desk = env!("CARGO_BIN_EXE_desk");
    let mut remote = Command::new(desk)
        .args(["--irc", &ircd.addr(), "--role", "server", "--verbose"])
        .arg("--unauthenticated")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the remote");
    let mut stderr = remote.stderr.take().unwrap();
    let seen = Arc::new(Mutex::new(String::new()));
    let sink = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    wait_for(&seen, "state: Ready", 1);
    ircd.restart();
    wait_for(&seen, "remote: IRC link lost (", 1);
    wait_for(&seen, "remote: connected again", 1);
    wait_for(&seen, "state: Ready", 2);
    let out = Command::new(desk)
        .args(["--irc", &ircd.addr(), "--role", "client"])
        .args(["--timeout-sec", "30", "echo again"])
        .output()
        .expect("run the desk");
    let still_running = remote.try_wait().unwrap().is_none();
    stop_daemon(&mut remote);
    assert!(still_running, "{}", seen.lock().unwrap());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "again\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `desk ARGS` for at most 30 s; its exit code and stderr (`None`: still running, killed).
fn run_bounded(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_desk"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the desk demo");
    // A TLS handshake a plain port never answers takes 10 s to give up on.
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (code, stderr)
}

/// TLS to a port that speaks plain IRC: a remote whose first link never gets into the channel
/// ends saying why, as `rexd --irc` does, instead of "connected again" and retrying forever;
/// the in-process desk and remote (`--role both`) say the TLS failure, not only that the link
/// ended.
#[test]
fn a_first_link_that_never_gets_in_ends_the_demo_saying_why() {
    let ircd = Ngircd::start();
    let url = format!("ircs://{}", ircd.addr());
    let (code, stderr) = run_bounded(&["--irc", &url, "--role", "server", "--unauthenticated"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("remote: the IRC link ended before it got into the channel: TLS"),
        "{stderr}"
    );
    assert!(!stderr.contains("connected again"), "{stderr}");
    let (code, stderr) = run_bounded(&["--irc", &url, "--unauthenticated", "true"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("TLS"), "{stderr}");
}

/// A wrong server password: both roles end with the server's words, not only "closed".
#[test]
fn a_wrong_server_password_ends_the_demo_with_the_servers_words() {
    let ircd = Ngircd::start_with_sections("[Global]\nPassword = sekrit\n");
    let dir = deskwire_integration::TempDir::new("desk-password").unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "wrong\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600)).unwrap();
    let password = password.to_str().unwrap();
    let addr = ircd.addr();
    for role in [&["--role", "server"][..], &["true"][..]] {
        let mut args = vec!["--irc", &addr, "--irc-password-file", password];
        args.push("--unauthenticated");
        args.extend_from_slice(role);
        let (code, stderr) = run_bounded(&args);
        assert_eq!(code, Some(2), "{role:?}: {stderr}");
        assert!(
            stderr.contains("Access denied: Bad password?"),
            "{role:?}: {stderr}"
        );
    }
}
