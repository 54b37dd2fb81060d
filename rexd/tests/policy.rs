//! `[policy]` through a real `rexd --stdio`: refusals name the rule, the audit records class,
//! rule and action, an allowlisted sudo runs as `sudo -n --`, and a policy that does not parse
//! or hold together stops the daemon from starting (never "allow all").

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::Daemon;
use serde_json::{Value, json};

const POLICY: &str = r#"
[policy]
default = "allow"
[policy.classes]
read = "allow"
destructive = "deny"
network = "flag"
[[policy.rules]]
name = "rm-recursive"
class = "destructive"
programs = ["rm"]
any_arg = ["--recursive", "-[rR]*", "-[!-]*[rR]*"]
[[policy.rules]]
name = "fetchers"
class = "network"
programs = ["curl", "wget"]
[[policy.sudo]]
name = "restart-app"
argv = ["systemctl", "restart", "app-*"]
"#;

struct Setup {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    config: std::path::PathBuf,
    audit: std::path::PathBuf,
    bin: std::path::PathBuf,
}

fn setup(policy: &str) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("work").canonicalize().unwrap_or_else(|_| {
        std::fs::create_dir(tmp.path().join("work")).unwrap();
        tmp.path().join("work").canonicalize().unwrap()
    });
    let audit = tmp.path().join("audit.log");
    let config = tmp.path().join("rexd.toml");
    std::fs::write(
        &config,
        format!(
            "[security]\nallow_shell = true\n[[security.allowed_roots]]\npath = \"{}\"\n\
             [audit]\nenabled = true\npath = \"{}\"\n{policy}",
            root.display(),
            audit.display()
        ),
    )
    .unwrap();
    // A stand-in sudo on the daemon's PATH: it shows the argv it was given.
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(bin.join("sudo"), "#!/bin/sh\necho \"sudo $*\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("sudo"), std::fs::Permissions::from_mode(0o755)).unwrap();
    Setup {
        _tmp: tmp,
        root,
        config,
        audit,
        bin,
    }
}

fn audit(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn refusals_name_the_rule_and_the_audit_records_the_class() {
    let s = setup(POLICY);
    let path = format!("{}:/usr/bin:/bin", s.bin.display());
    let mut d = Daemon::spawn_env(
        &["--config", s.config.to_str().unwrap()],
        &[("PATH", &path)],
    );
    let sid = d.open_session();
    std::fs::create_dir(s.root.join("x")).unwrap();
    for argv in [
        json!(["rm", "-rf", "x"]),
        json!(["/bin/rm", "-r", "x"]),
        json!(["env", "rm", "-rf", "x"]),
        json!(["busybox", "rm", "-rf", "x"]),
    ] {
        let e = d.call_err("exec.start", json!({"session_id": sid, "argv": argv}));
        assert_eq!(e["code"], -32001, "{argv}: {e}");
        assert_eq!(e["data"]["rule"], "rm-recursive", "{e}");
        assert_eq!(e["data"]["class"], "destructive", "{e}");
        assert!(
            e["message"].as_str().unwrap().contains("rm-recursive"),
            "{e}"
        );
    }
    assert!(s.root.join("x").exists(), "a refused rm ran");
    let e = d.call_err(
        "exec.start",
        json!({"session_id": sid, "argv": ["sh", "-c", "echo hi"]}),
    );
    assert_eq!(
        (e["data"]["rule"].clone(), e["data"]["class"].clone()),
        (json!("shell-wrapper"), json!("shell"))
    );
    for (argv, rule) in [
        (json!(["sudo", "-s"]), "sudo-options"),
        (json!(["sudo", "sh"]), "sudo-shell"),
        (
            json!(["sudo", "systemctl", "restart", "db"]),
            "sudo-allowlist",
        ),
    ] {
        let e = d.call_err("exec.start", json!({"session_id": sid, "argv": argv}));
        assert_eq!(e["data"]["rule"], rule, "{argv}: {e}");
    }
    // Allowlisted: runs as `sudo -n -- …`, class privileged, flagged.
    let r = d.call(
        "exec.start",
        json!({"session_id": sid, "argv": ["sudo", "systemctl", "restart", "app-web"]}),
    );
    let out = d.collect(r["process_id"].as_str().unwrap());
    assert_eq!(out.out(), "sudo -n -- systemctl restart app-web\n");
    // Allowed and unclassified.
    let r = d.call(
        "exec.start",
        json!({"session_id": sid, "argv": ["echo", "ok"]}),
    );
    assert_eq!(d.collect(r["process_id"].as_str().unwrap()).out(), "ok\n");
    drop(d);
    let entries = audit(&s.audit);
    let starts: Vec<&Value> = entries
        .iter()
        .filter(|e| e["method"] == "exec.start")
        .collect();
    let refused = starts
        .iter()
        .find(|e| e["params"]["argv"] == json!(["rm", "-rf", "x"]))
        .unwrap();
    assert_eq!(
        refused["result"]["data"]["rule"], "rm-recursive",
        "{refused}"
    );
    assert_eq!(refused["result"]["data"]["class"], "destructive");
    let sudo = starts
        .iter()
        .find(|e| e["params"]["argv"][0] == "sudo" && e["result"]["ok"] == true)
        .unwrap();
    assert_eq!(
        sudo["result"]["policy"],
        json!({"class": "privileged", "rule": "restart-app", "action": "flag"})
    );
    let echo = starts
        .iter()
        .find(|e| e["params"]["argv"] == json!(["echo", "ok"]))
        .unwrap();
    assert_eq!(
        echo["result"]["policy"],
        json!({"class": "unclassified", "rule": "default", "action": "allow"})
    );
}

#[test]
fn a_policy_that_does_not_parse_stops_the_daemon() {
    for (policy, want) in [
        ("[policy]\ndefualt = \"deny\"\n", "defualt"),
        ("[policy]\ndefault = \"perhaps\"\n", "perhaps"),
        ("[policy\n", "line"),
        (
            "[policy]\n[[policy.rules]]\nname = \"r\"\nclass = \"risky\"\nprograms = [\"rm\"]\n",
            "risky",
        ),
        (
            "[policy]\n[[policy.sudo]]\nname = \"s\"\nargv = [\"sh\"]\n",
            "never runs a shell",
        ),
    ] {
        let s = setup(policy);
        let out = Command::new(env!("CARGO_BIN_EXE_rexd"))
            .args(["--stdio", "--config"])
            .arg(&s.config)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{policy}: {err}");
        assert!(err.contains(want), "{policy}: {err}");
        assert!(out.stdout.is_empty());
    }
}

/// An `env` key is a variable name: `BASH_ENV=FILE` as a key would reach the child as
/// `BASH_ENV=FILE=` past the filter that drops `BASH_ENV`, and `ldd` (a bash script) would
/// then run FILE= as a shell script where class shell is denied.
#[test]
fn env_keys_that_are_not_names_are_refused() {
    let s = setup(POLICY);
    let mut d = Daemon::spawn(&["--config", s.config.to_str().unwrap()]);
    let sid = d.open_session();
    let pwned = s.root.join("pwned");
    std::fs::write(s.root.join("x="), format!("touch {}\n", pwned.display())).unwrap();
    let sneaky = format!("BASH_ENV={}/x", s.root.display());
    for (method, key) in [
        ("exec.start", sneaky.as_str()),
        ("pty.open", sneaky.as_str()),
        ("exec.start", "PATH=/tmp:"),
        ("exec.start", ""),
    ] {
        let e = d.call_err(
            method,
            json!({"session_id": sid, "argv": ["ldd", "/bin/true"], "env": {key: ""}}),
        );
        assert_eq!(e["code"], -32602, "{method} {key:?}: {e}");
        let message = e["message"].as_str().unwrap();
        assert!(message.contains(&format!("{key:?}")), "{message}");
    }
    assert!(!pwned.exists(), "BASH_ENV ran through an env key with `=`");
}

/// A class denied under `default = "allow"` holds only as far as the look-through sees: rexd
/// says so at start, for everyone and for each client that allows unclassified commands.
#[test]
fn a_denied_class_under_default_allow_is_warned_at_start() {
    let start = |policy: &str| {
        let s = setup(policy);
        let out = Command::new(env!("CARGO_BIN_EXE_rexd"))
            .args(["--stdio", "--config"])
            .arg(&s.config)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = start(POLICY);
    assert!(
        err.contains("warn: [policy] default = \"allow\" while class destructive, shell is deny"),
        "{err}"
    );
    assert!(err.contains("make the default \"deny\""), "{err}");
    let err = start(&POLICY.replace("default = \"allow\"", "default = \"deny\""));
    assert!(!err.contains("[policy]"), "{err}");
    let client = "[policy]\ndefault = \"deny\"\n[[policy.clients]]\nprincipal = \"ops\"\n\
                  default = \"allow\"\n";
    let err = start(client);
    assert!(
        err.contains("client \"ops\" allows unclassified commands while class shell is deny"),
        "{err}"
    );
}

/// The look-through as an attacker meets it: each of these ran a shell, or rm -r, past a
/// policy that denies both, before wrappers were read as their own getopt reads them.
#[test]
fn wrappers_read_as_their_getopt_reads_them() {
    let s = setup(POLICY);
    let mut d = Daemon::spawn(&["--config", s.config.to_str().unwrap()]);
    let sid = d.open_session();
    let pwned = s.root.join("pwned");
    let touch = format!("touch {}", pwned.display());
    std::fs::create_dir(s.root.join("x")).unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["env", "--un", "ls", "sh", "-c", &touch],
            "shell-wrapper",
        ),
        (
            vec!["env", "-iu", "ls", "sh", "-c", &touch],
            "shell-wrapper",
        ),
        (
            vec!["time", "-ao", "ls", "sh", "-c", &touch],
            "shell-wrapper",
        ),
        (
            vec!["nice", "--adj", "5", "sh", "-c", &touch],
            "shell-wrapper",
        ),
        (
            vec!["timeout", "-vk", "1", "5", "sh", "-c", &touch],
            "shell-wrapper",
        ),
        (
            vec!["stdbuf", "--out", "0", "sh", "-c", &touch],
            "shell-wrapper",
        ),
        (
            vec!["ionice", "-tc", "3", "sh", "-c", &touch],
            "shell-wrapper",
        ),
        (
            vec![
                "find",
                ".",
                "-maxdepth",
                "0",
                "-exec",
                "sh",
                "-c",
                &touch,
                ";",
            ],
            "shell-wrapper",
        ),
        (vec!["flock", ".", "-c", &touch], "shell-wrapper"),
        (vec!["env", "-x", "sh"], "wrapper-option"),
        (vec!["rm", "--recu", "x"], "rm-recursive"),
        (vec!["rm", "--r", "x"], "rm-recursive"),
        (vec!["xargs", "rm"], "rm-recursive"),
    ];
    for (argv, rule) in &cases {
        let e = d.call_err(
            "exec.start",
            json!({"session_id": sid, "argv": argv, "stdin": "-r x\n"}),
        );
        assert_eq!(e["code"], -32001, "{argv:?}: {e}");
        assert_eq!(e["data"]["rule"], *rule, "{argv:?}: {e}");
    }
    let mut nices = vec!["nice"; 16];
    nices.extend(["sh", "-c", &touch]);
    let e = d.call_err("exec.start", json!({"session_id": sid, "argv": nices}));
    assert_eq!(e["data"]["rule"], "too-many-positions", "{e}");
    assert!(!pwned.exists(), "a shell ran past the policy");
    assert!(s.root.join("x").exists(), "rm -r ran past the policy");
    // What the wrappers run stays allowed when it is allowed.
    let r = d.call(
        "exec.start",
        json!({"session_id": sid, "argv": ["nice", "--adj", "5", "timeout", "-k", "1", "5", "echo", "ok"]}),
    );
    assert_eq!(d.collect(r["process_id"].as_str().unwrap()).out(), "ok\n");
}

/// The README's `[policy]` example, as a user copies it: it loads, and does what the text
/// around it says.
#[test]
fn the_readme_policy_example_holds() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let block = readme
        .split("```toml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains("[policy]"))
        .expect("README.md has a ```toml block with [policy]");
    let s = setup(block);
    let mut d = Daemon::spawn(&["--config", s.config.to_str().unwrap()]);
    let sid = d.open_session();
    std::fs::create_dir(s.root.join("x")).unwrap();
    for (argv, rule) in [
        (json!(["rm", "-rf", "x"]), "rm-recursive"),
        (json!(["rm", "--recu", "x"]), "rm-recursive"),
        (json!(["rm", "--r", "x"]), "rm-recursive"),
        (
            json!(["nice", "--adj", "5", "sh", "-c", "id"]),
            "shell-wrapper",
        ),
        (json!(["awk", "BEGIN { system(\"id\") }"]), "default"),
    ] {
        let e = d.call_err("exec.start", json!({"session_id": sid, "argv": argv}));
        assert_eq!(e["data"]["rule"], rule, "{argv}: {e}");
    }
    assert!(s.root.join("x").exists());
    let r = d.call(
        "exec.start",
        json!({"session_id": sid, "argv": ["ls", "-d", "x"]}),
    );
    assert_eq!(d.collect(r["process_id"].as_str().unwrap()).out(), "x\n");
}
