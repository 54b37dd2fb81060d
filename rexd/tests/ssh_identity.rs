//! Who the client is over ssh, and an `authorized_keys` forced command: a real sshd on
//! loopback, the built rexd on its PATH.
//!
//! - Without a forced command, the audit's principal is the ssh user, with the key's SHA256
//!   fingerprint where sshd exposes it (`ExposeAuthInfo yes`), as `ssh-keygen -l` prints it.
//! - With `command="rexd --stdio --config FILE --principal NAME",restrict`, the operator's
//!   config holds whatever the client passes (`--rexd-arg`), the principal is NAME, and
//!   `rex --resume` still works: rexd honours the client's own `--resumable`.

mod netkit;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use deskwire_integration::Sshd;
use netkit::*;

/// `-t ssh://… --ssh-arg=…` for this sshd, then `rest`.
fn over(sshd: &Sshd, rest: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec!["-t".into(), sshd.url()];
    args.extend(sshd.ssh_options().iter().map(|o| format!("--ssh-arg={o}")));
    args.extend(rest.iter().map(|s| s.to_string()));
    args
}

fn sshd_with(extra: &str) -> Option<Sshd> {
    if let Some(why) = Sshd::missing_tools() {
        eprintln!("skipped: {why}");
        return None;
    }
    let bin_dir = Path::new(REXD).parent().unwrap().display().to_string();
    Some(Sshd::start_with_config(&format!(
        "SetEnv PATH={bin_dir}:/usr/bin:/bin REXD_AGENT_IDLE_MS=3000\nExposeAuthInfo yes\n{extra}"
    )))
}

fn fingerprint(public_key: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(public_key)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace().nth(1).unwrap().to_owned()
}

#[test]
fn the_principal_over_ssh_is_the_user_and_the_key() {
    let Some(sshd) = sshd_with("") else { return };
    let place = Place::new("ssh-principal");
    let config = format!("--rexd-arg=--config={}", place.config.display());
    let (code, out, err) = rex(&over(&sshd, &[&config, "exec", "--", "echo", "hi"]), &[]);
    assert_eq!((code, out.as_str()), (0, "hi\n"), "{err}");
    let key = fingerprint(&sshd.client_key().with_extension("pub"));
    let want = format!("{} ({key})", sshd.user);
    let entries = place.audit_lines();
    let start = entries
        .iter()
        .find(|e| e["method"] == "exec.start")
        .expect("an exec.start entry");
    assert_eq!(start["principal"], want.as_str(), "{start}");
    assert!(
        start["address"]
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:")),
        "{start}"
    );
}

#[test]
fn a_forced_command_holds_the_policy_and_names_the_client_and_resume_works() {
    let Some(sshd) = sshd_with("") else { return };
    let place = Place::new("ssh-forced");
    // The operator's config: no shell mode, whatever the client asks for.
    let forced_config = place.path().join("forced.toml");
    let text = std::fs::read_to_string(&place.config)
        .unwrap()
        .replace("allow_shell = true", "allow_shell = false");
    std::fs::write(&forced_config, text).unwrap();
    let key = std::fs::read_to_string(sshd.client_key().with_extension("pub")).unwrap();
    std::fs::write(
        sshd.dir().join("authorized_keys"),
        format!(
            "command=\"rexd --stdio --config {} --principal laptop\",restrict {key}",
            forced_config.display()
        ),
    )
    .unwrap();

    // --rexd-arg cannot widen it: --allow-shell is the client's own command, never run.
    let (code, _, err) = rex(
        &over(
            &sshd,
            &["--rexd-arg=--allow-shell", "sh", "echo from a shell"],
        ),
        &[],
    );
    assert_ne!(code, 0, "shell mode ran under a forced command without it");
    assert!(err.contains("shell"), "{err}");

    // rex --resume: the client's --resumable is honoured; a killed ssh loses no line.
    let script = "i=1; while [ $i -le 30 ]; do echo \"line $i\"; i=$((i+1)); sleep 0.1; done";
    let mut child = Command::new(REX)
        .args(over(&sshd, &["--resume", "exec", "--", "sh", "-c", script]))
        .env("REX_TARGETS_FILE", "/nonexistent/rex-targets.toml")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut got: Vec<String> = (0..5).map(|_| lines.next().unwrap().unwrap()).collect();
    let ssh = children(child.id(), "ssh");
    assert_eq!(ssh.len(), 1, "rex's ssh: {ssh:?}");
    unsafe { libc::kill(ssh[0], libc::SIGKILL) };
    got.extend(lines.map(Result::unwrap));
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let want: Vec<String> = (1..=30).map(|i| format!("line {i}")).collect();
    assert_eq!(got, want);

    // The audit names the client as the forced command says, from where it connects.
    let entries = place.audit_lines();
    let resumed = entries
        .iter()
        .find(|e| e["method"] == "session.resume")
        .expect("the session was resumed");
    assert_eq!(resumed["principal"], "laptop", "{resumed}");
    assert!(
        resumed["address"]
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:")),
        "{resumed}"
    );
    assert!(
        entries
            .iter()
            .filter(|e| e["principal"].is_string())
            .all(|e| e["principal"] == "laptop"),
        "{entries:?}"
    );
}
