// The build-script half of the honest skip for tests that need a peer this machine may lack
// (included by tests/integration/build.rs and rexd/build.rs): without OpenSSH's sshd, ssh and
// ssh-keygen, `cfg(no_sshd)` marks those tests `#[ignore]`, so `cargo test` counts and names
// them instead of passing them. With DESKWIRE_REQUIRE_PEERS set (tests/run.sh, which installs
// the peers), a missing one fails the build instead.

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(no_sshd)");
    println!("cargo::rerun-if-env-changed=DESKWIRE_REQUIRE_PEERS");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-changed=/usr/sbin/sshd");
    let sshd = std::path::Path::new("/usr/sbin/sshd").is_file() || on_path("sshd");
    let missing: Vec<&str> = [
        ("sshd (apt package openssh-server)", sshd),
        ("ssh (apt package openssh-client)", on_path("ssh")),
        ("ssh-keygen (apt package openssh-client)", on_path("ssh-keygen")),
    ]
    .into_iter()
    .filter(|(_, found)| !found)
    .map(|(what, _)| what)
    .collect();
    if missing.is_empty() {
        return;
    }
    if std::env::var_os("DESKWIRE_REQUIRE_PEERS").is_some() {
        panic!("the ssh tests need {}", missing.join(", "));
    }
    println!("cargo::warning=ssh tests are ignored: not installed: {}", missing.join(", "));
    println!("cargo::rustc-cfg=no_sshd");
}
