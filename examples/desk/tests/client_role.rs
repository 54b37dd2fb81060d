//! The desk demo as `--role client` against a remote already in the channel, over a real ngircd:
//! the request leaves as soon as the desk is ready, so while it waits for the answer its deadline
//! is the request's timeout, never an idle wake-up. Checked from what the desk says it waits for
//! (`--verbose`), not from the wall time.

use std::process::{Command, Stdio};
use std::time::Duration;

use deskwire_integration::{Ngircd, stop_daemon};

#[test]
fn a_client_against_a_remote_already_there_sends_at_once() {
    let ircd = Ngircd::start();
    let desk = env!("CARGO_BIN_EXE_desk");
    let mut remote = Command::new(desk)
        .args(["--irc", &ircd.addr(), "--role", "server", "--verbose"])
        .arg("--unauthenticated")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the remote");
    // The remote is in the channel once its verbose output says it is ready. Its stderr is
    // read to the end, so it never writes into a closed pipe.
    let mut stderr = remote.stderr.take().unwrap();
    let (tx, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&seen).contains("state: Ready") {
                let _ = tx.send(());
            }
        }
    });
    ready
        .recv_timeout(Duration::from_secs(15))
        .expect("the remote got ready");

    let out = Command::new(desk)
        .args(["--irc", &ircd.addr(), "--role", "client", "--verbose"])
        .args(["--timeout-sec", "30", "echo hi"])
        .output()
        .expect("run the desk");
    stop_daemon(&mut remote);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n", "{stderr}");
    // "[desk] at T ms, Ready: waiting up to W ms (until D)": D must be the request's deadline
    // (30 s from the first moment it could leave, the first T), not a 60 s idle wake-up.
    let ready_waits: Vec<(u64, u64)> = stderr
        .lines()
        .filter(|l| l.contains(", Ready: waiting up to"))
        .map(|l| {
            let at = l.split("at ").nth(1).unwrap().split(' ').next().unwrap();
            let until = l.rsplit("(until ").next().unwrap();
            (
                at.parse().unwrap(),
                until.trim_end_matches(')').parse().unwrap(),
            )
        })
        .collect();
    assert!(!ready_waits.is_empty(), "{stderr}");
    let ready_at = ready_waits[0].0;
    for (_, until) in ready_waits {
        assert!(
            until <= ready_at + 30_000,
            "the desk waited until {until}: {stderr}"
        );
    }
}

#[test]
fn a_remote_over_irc_needs_a_secret_or_an_explicit_risk() {
    // Refused before it connects: no server needed.
    let out = Command::new(env!("CARGO_BIN_EXE_desk"))
        .args(["--irc", "127.0.0.1:1", "--role", "server"])
        .output()
        .expect("run the desk demo");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--secret-file") && stderr.contains("--unauthenticated"),
        "{stderr}"
    );
}
