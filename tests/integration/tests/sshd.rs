//! The private sshd launcher works: a command runs over a real ssh login, its output and exit
//! code come back, and a long-lived `ssh … cat` round-trips stdin (the shape `rex` uses for
//! `ssh host rexd --stdio`).

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use deskwire_integration::Sshd;

#[test]
#[cfg_attr(
    no_sshd,
    ignore = "needs OpenSSH (sshd, ssh, ssh-keygen): tests/run.sh installs openssh-server and openssh-client"
)]
fn a_command_runs_over_ssh_and_its_exit_code_comes_back() {
    let sshd = Sshd::start();
    let out = sshd
        .command(["printf", "'%s|%s'", "hello", "$((6*7))"])
        .output()
        .expect("run ssh");
    assert!(
        out.status.success(),
        "ssh failed: {}\nsshd log: {}",
        String::from_utf8_lossy(&out.stderr),
        sshd.log_text()
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello|42");

    let out = sshd.command(["exit 7"]).output().expect("run ssh");
    assert_eq!(out.status.code(), Some(7), "the remote exit code");
}

#[test]
#[cfg_attr(
    no_sshd,
    ignore = "needs OpenSSH (sshd, ssh, ssh-keygen): tests/run.sh installs openssh-server and openssh-client"
)]
fn a_long_lived_session_round_trips_lines_over_stdio() {
    let sshd = Sshd::start();
    let mut child = sshd
        .command(["cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn ssh");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for i in 0..50 {
        writeln!(stdin, "{{\"line\":{i}}}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, format!("{{\"line\":{i}}}\n"));
    }
    drop(stdin);
    let status = child.wait().expect("reap ssh");
    assert!(status.success());
}

#[test]
#[cfg_attr(
    no_sshd,
    ignore = "needs OpenSSH (sshd, ssh, ssh-keygen): tests/run.sh installs openssh-server and openssh-client"
)]
fn a_wrong_key_is_refused() {
    let sshd = Sshd::start();
    let other = sshd.dir().join("stranger");
    let keygen = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .status()
        .unwrap();
    assert!(keygen.success());
    let mut opts = sshd.ssh_options();
    let i = opts.iter().position(|o| o == "-i").unwrap();
    opts[i + 1] = other.display().to_string();
    let out = std::process::Command::new("ssh")
        .arg("-p")
        .arg(sshd.port.to_string())
        .args(opts)
        .arg(sshd.destination())
        .arg("true")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(255),
        "ssh reports an auth failure as 255"
    );
}

#[test]
#[cfg_attr(
    no_sshd,
    ignore = "needs OpenSSH (sshd, ssh, ssh-keygen): tests/run.sh installs openssh-server and openssh-client"
)]
fn extra_config_sets_the_remote_path() {
    let sshd = Sshd::start_with_config("SetEnv PATH=/opt/deskwire-test/bin:/usr/bin:/bin");
    let out = sshd.command(["echo", "$PATH"]).output().expect("run ssh");
    let path = String::from_utf8_lossy(&out.stdout);
    // The login shell's rc files may prepend more; the configured entry must be there.
    assert!(
        path.trim()
            .split(':')
            .any(|p| p == "/opt/deskwire-test/bin"),
        "PATH {path:?}, stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
