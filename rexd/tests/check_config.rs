//! `rexd --check-config` (as `sshd -t`): a start's checks and loads without serving, the
//! verdict on stdout, errors and warnings on stderr; and what a real `--listen` start now
//! refuses or warns of (a TLS key others may read, a certificate that soon expires).

mod netkit;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use netkit::{Certs, Daemon, Place, REXD};

/// `rexd ARGS --check-config`: exit code, stdout, stderr. It must return at once: it serves
/// nothing (stdin is left open, so a daemon that served stdio would wait).
fn check(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(REXD)
        .args(args)
        .arg("--check-config")
        .stdin(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_good_configuration_passes_and_nothing_is_served() {
    let place = Place::new("check-ok");
    let config = place.config.to_str().unwrap();
    let (code, out, err) = check(&["--config", config, "--stdio"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "rexd: the configuration is valid\n"),
        "{err}"
    );
    // The same flags as a real --listen start, on a port something else holds: nothing binds.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let tokens = place.tokens.to_str().unwrap();
    let (code, out, err) = check(&[
        "--config",
        config,
        "--listen",
        &addr,
        "--token-file",
        tokens,
    ]);
    assert_eq!(
        (code, out.as_str()),
        (0, "rexd: the configuration is valid\n"),
        "{err}"
    );
}

#[test]
fn errors_are_precise_and_exit_2() {
    let place = Place::new("check-bad");
    let broken = place.path().join("broken.toml");
    std::fs::write(&broken, "[limits]\nmax_output_bytes = \"lots\"\n").unwrap();
    let (code, out, err) = check(&["--config", broken.to_str().unwrap(), "--stdio"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("broken.toml") && err.contains("max_output_bytes"),
        "{err}"
    );

    // A token file others may read, as a start refuses it.
    std::fs::set_permissions(&place.tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = place.config.to_str().unwrap();
    let tokens = place.tokens.to_str().unwrap();
    let (code, _, err) = check(&[
        "--config",
        config,
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        tokens,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("chmod 600"), "{err}");
}

#[test]
fn policy_warnings_name_the_rule_and_the_program() {
    let place = Place::with_config(
        "check-policy",
        "[policy]\ndefault = \"allow\"\n[policy.classes]\nshell = \"deny\"\ndestructive = \"allow\"\n\
         [[policy.rules]]\nname = \"deploy\"\nclass = \"destructive\"\n\
         programs = [\"kubectl-nonexistent\", \"rm\"]\n",
    );
    let (code, out, err) = check(&["--config", place.config.to_str().unwrap(), "--stdio"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out, "rexd: the configuration is valid, with 2 warning(s) above\n",
        "{err}"
    );
    assert!(
        err.contains(
            "rule \"deploy\" names \"kubectl-nonexistent\", which no directory of PATH holds"
        ),
        "{err}"
    );
    assert!(!err.contains("\"rm\", which"), "rm is on PATH: {err}");
    assert!(err.contains("default = \"allow\" while class"), "{err}");
}

/// A TLS key others may read is refused, by a start and by the check, as the token file is;
/// a certificate that expires within 14 days is warned of by both.
#[test]
fn tls_key_modes_and_certificate_expiry() {
    let place = Place::new("check-tls");
    let certs = Certs::make(place.path());
    let config = place.config.to_str().unwrap();
    let tokens = place.tokens.to_str().unwrap();
    let cert = certs.server_cert.to_str().unwrap();
    let key = certs.server_key.to_str().unwrap();
    let listen = [
        "--config",
        config,
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        tokens,
    ];
    let tls = ["--tls-cert", cert, "--tls-key", key];
    let args: Vec<&str> = listen.iter().chain(&tls).copied().collect();

    // The test certificates last 2 days.
    let (code, out, err) = check(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("with 1 warning(s)"), "{out}");
    assert!(
        err.contains("the certificate expires at") && err.contains("renew it"),
        "{err}"
    );
    let daemon = Daemon::start(
        &place,
        &["--token-file", tokens, "--tls-cert", cert, "--tls-key", key],
    );
    daemon.wait_for_log("the certificate expires at");
    daemon.stop();

    // Another key than the certificate's: named, with what is wrong, not rustls's words.
    let client_key = certs.client_key.to_str().unwrap();
    let mismatched: Vec<&str> = listen
        .iter()
        .chain(&["--tls-cert", cert, "--tls-key", client_key])
        .copied()
        .collect();
    let (code, _, err) = check(&mismatched);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "--tls-key {client_key}: this key does not belong to the --tls-cert certificate"
        )),
        "{err}"
    );

    std::fs::set_permissions(&certs.server_key, std::fs::Permissions::from_mode(0o644)).unwrap();
    for run in [check(&args), {
        let (code, err) = netkit::refused(&args);
        (code, String::new(), err)
    }] {
        let (code, _, err) = run;
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("--tls-key")
                && err.contains("readable by group or others")
                && err.contains("chmod 600"),
            "{err}"
        );
    }
}

/// A daemon serving others without a config has no policy and no audit: `--check-config` and
/// a real start both say so; with a config, neither does.
#[test]
fn a_service_without_a_config_is_warned_of() {
    let place = Place::new("check-noconfig");
    let tokens = place.tokens.to_str().unwrap();
    let root = place.work.to_str().unwrap();
    let listen = [
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        tokens,
        "--root",
        root,
    ];
    let (code, out, err) = check(&listen);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "rexd: the configuration is valid, with 1 warning(s) above\n"
    );
    assert!(
        err.contains("no --config: no [policy] and no audit log"),
        "{err}"
    );
    let (_, _, err) = check(&["--config", place.config.to_str().unwrap(), "--stdio"]);
    assert!(!err.contains("no --config"), "{err}");
    // stdio (a client's own daemon, as `rex` starts it) is not warned about.
    let (_, _, err) = check(&["--stdio", "--root", root]);
    assert!(!err.contains("no --config"), "{err}");
}
