//! `rex` over real ssh: a private sshd on loopback (generated host and user keys), the built
//! `rexd` on the remote PATH, and the same core cases as locally through an `ssh://` target.

mod support;

use deskwire_integration::Sshd;
use support::Fixture;

core_cases!(
    Fixture::ssh(),
    #[cfg_attr(
        no_sshd,
        ignore = "needs OpenSSH (sshd, ssh, ssh-keygen): tests/run.sh installs openssh-server and openssh-client"
    )]
);

#[test]
#[cfg_attr(
    no_sshd,
    ignore = "needs OpenSSH (sshd, ssh, ssh-keygen): tests/run.sh installs openssh-server and openssh-client"
)]
fn rexd_missing_from_the_remote_path_is_explained() {
    // A plain sshd: the login's PATH has no rexd.
    let sshd = Sshd::start_with_config("SetEnv PATH=/usr/bin:/bin");
    let f = Fixture::local();
    f.add_ssh_target("bare", &sshd, &[]);
    let out = f.run(&["-t", "bare", "exec", "--", "true"]);
    assert_eq!(out.code, 127, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("rexd is not on the remote PATH of 127.0.0.1")
            && out.stderr.contains("not found")
            && out.stderr.contains("--rexd /path/to/rexd"),
        "{}",
        out.stderr
    );
    // Naming the daemon's path fixes it.
    let out = f.run(&[
        "-t",
        "bare",
        "--rexd",
        support::REXD,
        "exec",
        "--",
        "echo",
        "found",
    ]);
    assert_eq!(out.text(), "found\n", "{}", out.stderr);
}

/// The routing model: one command surface, the targets file decides the host.
#[test]
#[cfg_attr(
    no_sshd,
    ignore = "needs OpenSSH (sshd, ssh, ssh-keygen): tests/run.sh installs openssh-server and openssh-client"
)]
fn target_use_moves_the_same_commands_between_hosts() {
    let f = Fixture::ssh();
    // sshd sets SSH_CONNECTION for its sessions, so a command can tell where it runs.
    let probe = [
        "sh",
        "if [ -n \"$SSH_CONNECTION\" ]; then echo over-ssh; else echo local; fi",
    ];
    f.add_local_target("here", &[]);
    assert_eq!(f.run(&probe).ok().text(), "over-ssh\n");
    f.run(&["target", "use", "here"]).ok();
    assert_eq!(f.run(&probe).ok().text(), "local\n");
    f.run(&["target", "use", "box"]).ok();
    assert_eq!(f.run(&probe).ok().text(), "over-ssh\n");
}

#[test]
#[cfg_attr(
    no_sshd,
    ignore = "needs OpenSSH (sshd, ssh, ssh-keygen): tests/run.sh installs openssh-server and openssh-client"
)]
fn a_wrong_key_is_an_ssh_error_not_a_missing_daemon() {
    let f = Fixture::ssh();
    let sshd = f.sshd.as_ref().unwrap();
    let stranger = f.dir().join("stranger");
    let ok = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&stranger)
        .status()
        .unwrap();
    assert!(ok.success());
    let mut options = sshd.ssh_options();
    let key = options.iter().position(|o| o == "-i").unwrap() + 1;
    options[key] = stranger.display().to_string();
    f.add_ssh_target_with("wrong-key", sshd, options, &[]);
    let out = f.run(&["-t", "wrong-key", "exec", "--", "true"]);
    assert_eq!(out.code, 255, "{}", out.stderr);
    assert!(out.stderr.contains("Permission denied"), "{}", out.stderr);
    assert!(
        !out.stderr.contains("not on the remote PATH"),
        "{}",
        out.stderr
    );
}
