//! `rexd --listen` takes a new configuration on `SIGHUP` without stopping what runs: a revoked
//! token's sessions and connections end (and say why) while another client's command goes on;
//! a config that fails to load is refused and the old one stays; new certificates serve new
//! handshakes; `SIGUSR1` opens the audit file again after logrotate moved it. Real daemons on
//! loopback, driven by `rex` over WebSockets and curl.

mod netkit;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netkit::*;
use serde_json::Value;

const OPEN: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"curl"}}"#;

/// `rex -t URL ARGS…` with `token`, running in the background.
fn rex_bg(url: &str, token: &str, args: &[&str]) -> Child {
    Command::new(REX)
        .args(["-t", url])
        .args(args)
        .env("REXD_TOKEN", token)
        .env("REX_TARGETS_FILE", "/nonexistent/rex-targets.toml")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` (at most `limit`): its exit code, stdout and stderr.
fn finish(mut child: Child, limit: Duration) -> (i32, String, String) {
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rex did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code().unwrap_or(-1), out, err)
}

/// Waits until an audit entry satisfies `want`.
fn wait_for_audit(place: &Place, what: &str, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(e) = place.audit_lines().into_iter().find(|e| want(e)) {
            return e;
        }
        assert!(Instant::now() < deadline, "no audit entry: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(d: &Daemon, sig: libc::c_int) {
    assert_eq!(unsafe { libc::kill(d.pid() as i32, sig) }, 0);
}

fn write_private(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn session_open_status(d: &Daemon, token: &str) -> u16 {
    post(&d.url, Some(token), OPEN).status
}

#[test]
fn sighup_revokes_a_token_while_another_clients_command_runs() {
    let place = Place::new("reload-revoke");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let ws = d.url.replace("http://", "ws://");
    let alice = rex_bg(
        &ws,
        TOKEN,
        &[
            "sh",
            "for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.25; done",
        ],
    );
    let bob = rex_bg(&ws, OTHER_TOKEN, &["exec", "--", "sleep", "60"]);
    for who in ["alice", "bob"] {
        wait_for_audit(&place, &format!("{who}'s exec.start"), |e| {
            e["method"] == "exec.start" && e["principal"] == who
        });
    }
    // bob's token leaves the file; alice's stays as it was.
    write_private(&place.tokens, &format!("alice:{TOKEN}\n"));
    signal(&d, libc::SIGHUP);

    // bob's command and connection end now, not after its 60 s.
    let (code, _, err) = finish(bob, Duration::from_secs(15));
    assert_ne!(code, 0, "bob's rex went on: {err}");
    assert!(err.contains("revoked"), "bob is not told why: {err}");
    let end = wait_for_audit(&place, "bob's session.end", |e| {
        e["method"] == "session.end" && e["principal"] == "bob"
    });
    assert_eq!(end["result"]["cause"], "revoked", "{end}");
    let reload = wait_for_audit(&place, "the reload", |e| e["method"] == "rexd.reload");
    assert_eq!(reload["result"]["revoked"], serde_json::json!(["bob"]));

    // alice's command ran on to its end, every line of it.
    let (code, out, err) = finish(alice, Duration::from_secs(20));
    assert_eq!(code, 0, "{err}");
    let ticks: Vec<String> = (1..=8).map(|i| format!("tick {i}")).collect();
    assert_eq!(out.lines().collect::<Vec<_>>(), ticks);
    assert!(
        !place
            .audit_lines()
            .iter()
            .any(|e| e["method"] == "session.end"
                && e["principal"] == "alice"
                && e["result"]["cause"] == "revoked"),
        "alice's session was ended"
    );

    // From now on bob's token is refused, alice's accepted; the daemon says what it did.
    assert_eq!(session_open_status(&d, OTHER_TOKEN), 401);
    assert_eq!(session_open_status(&d, TOKEN), 200);
    d.wait_for_log("reloaded: 1 token(s) revoked (bob)");
}

#[test]
fn a_config_that_fails_to_load_is_refused_and_the_old_one_stays() {
    let place = Place::new("reload-refused");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let good = std::fs::read_to_string(&place.config).unwrap();

    // A TOML error, then a token file open to others: each refused, each named.
    std::fs::write(&place.config, format!("{good}\n[limits\n")).unwrap();
    signal(&d, libc::SIGHUP);
    d.wait_for_log("reload refused, the running configuration stays");
    assert_eq!(session_open_status(&d, TOKEN), 200);
    std::fs::write(&place.config, &good).unwrap();
    let tokens = std::fs::read_to_string(&place.tokens).unwrap();
    std::fs::write(&place.tokens, format!("{tokens}carol:{}\n", "c".repeat(32))).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&place.tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    signal(&d, libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.stderr().matches("reload refused").count() < 2 {
        assert!(Instant::now() < deadline, "{}", d.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    // carol's token was never taken; bob's still works.
    assert_eq!(session_open_status(&d, &"c".repeat(32)), 401);
    assert_eq!(session_open_status(&d, OTHER_TOKEN), 200);
}

#[test]
fn a_reload_applies_the_policy_now_and_ends_sessions_in_a_removed_root() {
    let place = Place::new("reload-policy");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    let url = d.url.clone();
    let run = |cmd: &str| {
        let child = rex_bg(&url, TOKEN, &["exec", "--", "sh", "-c", cmd]);
        finish(child, Duration::from_secs(20))
    };
    assert_eq!(run("echo before").0, 0);
    // A session opened by pointed calls, in the root that goes away.
    let opened = post(&url, Some(TOKEN), OPEN).json();
    let sid = opened["result"]["session_id"].as_str().unwrap().to_owned();

    let other = place.path().join("other-root");
    std::fs::create_dir_all(&other).unwrap();
    let config = std::fs::read_to_string(&place.config)
        .unwrap()
        .replace(
            &format!("path = \"{}\"", place.work.display()),
            &format!("path = \"{}\"", other.canonicalize().unwrap().display()),
        )
        .replace("[security]\n", "[security]\ndeny_commands = [\"sh\"]\n");
    std::fs::write(&place.config, config).unwrap();
    signal(&d, libc::SIGHUP);
    let end = wait_for_audit(&place, "the session in the removed root", |e| {
        e["method"] == "session.end" && e["session_id"] == sid.as_str()
    });
    assert_eq!(end["result"]["cause"], "root_removed", "{end}");

    // The policy holds for the next command; the new root is where sessions start.
    let (code, _, err) = run("echo after");
    assert_ne!(code, 0, "sh ran after it was denied");
    assert!(err.contains("sh"), "{err}");
    let child = rex_bg(&url, TOKEN, &["exec", "--", "pwd"]);
    let (code, out, err) = finish(child, Duration::from_secs(20));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), other.canonicalize().unwrap().to_str().unwrap());
}

#[test]
fn new_certificates_serve_new_handshakes() {
    let place = Place::new("reload-tls");
    let first = Certs::make(place.path());
    let d = Daemon::start(
        &place,
        &[
            "--token-file",
            place.tokens.to_str().unwrap(),
            "--tls-cert",
            first.server_cert.to_str().unwrap(),
            "--tls-key",
            first.server_key.to_str().unwrap(),
        ],
    );
    let open = |ca: &std::path::Path| {
        curl(&[
            "--cacert",
            ca.to_str().unwrap(),
            "-H",
            &format!("Authorization: Bearer {TOKEN}"),
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            OPEN,
            &format!("{}/rpc", d.url),
        ])
    };
    assert_eq!(open(&first.ca).status, 200);
    // A new CA and server certificate, put where the flags point.
    let second_dir = place.path().join("second");
    std::fs::create_dir_all(&second_dir).unwrap();
    let second = Certs::make(&second_dir);
    std::fs::copy(&second.server_cert, &first.server_cert).unwrap();
    std::fs::copy(&second.server_key, &first.server_key).unwrap();
    signal(&d, libc::SIGHUP);
    d.wait_for_log("reloaded:");
    assert_eq!(open(&second.ca).status, 200);
    assert_ne!(
        open(&first.ca).status,
        200,
        "the old certificate is still served"
    );
}

#[test]
fn sigusr1_opens_the_audit_file_again() {
    let place = Place::new("reload-usr1");
    let d = Daemon::start(&place, &["--token-file", place.tokens.to_str().unwrap()]);
    assert_eq!(session_open_status(&d, TOKEN), 200);
    let rotated = place.path().join("audit.log.1");
    std::fs::rename(&place.audit, &rotated).unwrap();
    signal(&d, libc::SIGUSR1);
    d.wait_for_log("the audit log is open again");
    assert_eq!(session_open_status(&d, OTHER_TOKEN), 200);
    let fresh = place.audit_lines();
    assert!(
        fresh
            .iter()
            .any(|e| e["method"] == "session.open" && e["principal"] == "bob"),
        "{fresh:?}"
    );
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(
        old.contains("\"alice\"") && !old.contains("\"bob\""),
        "{old}"
    );
}
