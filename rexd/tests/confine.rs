//! Confinement (`security.confine`, Landlock) through the real `rexd --stdio`: what a command
//! may read, write and run, for execs and PTYs, and what `--check-config` says of it.

mod common;

use std::path::Path;
use std::process::Command;

use common::{Collected, Daemon};
use serde_json::json;

/// Whether this kernel has Landlock (the tests of a confined rexd skip where it has none, and
/// check that rexd says so instead).
fn landlock() -> bool {
    match rexd::confine::kernel_abi() {
        Ok(abi) => abi >= 1,
        Err(e) => {
            eprintln!("this kernel has no Landlock ({e}): confinement is not tested here");
            false
        }
    }
}

/// `rexd --stdio` with this TOML, `root` its one root, shell allowed.
fn with_config(root: &Path, toml: &str) -> (tempfile::TempDir, Daemon, String) {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("rexd.toml");
    let text = format!(
        "[security]\nallow_shell = true\n{toml}\n[[security.allowed_roots]]\npath = {:?}\n",
        root
    );
    std::fs::write(&conf, text).unwrap();
    let mut d = Daemon::spawn(&["--config", conf.to_str().unwrap()]);
    let s = d.open_session();
    (dir, d, s)
}

fn run(d: &mut Daemon, s: &str, argv: &[&str]) -> Collected {
    let r = d.call("exec.start", json!({"session_id": s, "argv": argv}));
    d.collect(r["process_id"].as_str().unwrap())
}

fn exit_code(c: &Collected) -> i64 {
    c.exit["params"]["exit_code"].as_i64().unwrap_or(-1)
}

/// A directory that is not a root, with a file in it.
fn outside() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.txt"), "outside\n").unwrap();
    dir
}

#[test]
fn commands_read_inside_the_roots_and_not_outside() {
    if !landlock() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("f.txt"), "inside\n").unwrap();
    let out = outside();
    let (_c, mut d, s) = with_config(root.path(), "");
    let c = run(&mut d, &s, &["cat", "f.txt"]);
    assert_eq!(
        (exit_code(&c), c.out()),
        (0, "inside\n".into()),
        "{}",
        c.err()
    );
    let secret = out.path().join("secret.txt");
    for path in ["/etc/hostname", secret.to_str().unwrap()] {
        if !Path::new(path).exists() {
            continue;
        }
        let c = run(&mut d, &s, &["cat", path]);
        assert_ne!(exit_code(&c), 0, "{path}: {}", c.out());
        assert!(c.out().is_empty(), "{path}: {}", c.out());
        assert!(c.err().contains("Permission denied"), "{path}: {}", c.err());
    }
    // fs.read refuses the same file: the exec no longer goes around it.
    let e = d.call_err("fs.read", json!({"session_id": s, "path": "/etc/hostname"}));
    assert_eq!(e["code"], -32002, "{e}");
}

#[test]
fn system_programs_still_run() {
    if !landlock() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (_c, mut d, s) = with_config(root.path(), "");
    let c = run(&mut d, &s, &["ls", "/usr"]);
    assert_eq!(exit_code(&c), 0, "{}", c.err());
    assert!(c.out().lines().any(|l| l == "bin"), "{}", c.out());
    let c = run(&mut d, &s, &["sh", "-c", "echo hi"]);
    assert_eq!((exit_code(&c), c.out()), (0, "hi\n".into()), "{}", c.err());
    // Users' names (/etc/passwd), the time zone, /proc.
    let c = run(
        &mut d,
        &s,
        &["sh", "-c", "id -un && date +%Z && ps -o pid= -p $$"],
    );
    assert_eq!(exit_code(&c), 0, "{}", c.err());
    assert!(c.err().is_empty(), "{}", c.err());
    let has_git = Command::new("git").arg("--version").output().is_ok();
    if has_git {
        let c = run(&mut d, &s, &["git", "--version"]);
        assert_eq!(exit_code(&c), 0, "{}", c.err());
        assert!(c.out().starts_with("git version"), "{}", c.out());
        // git reads its system and user configuration and works in a repository in a root.
        let c = run(
            &mut d,
            &s,
            &[
                "sh",
                "-c",
                "git init -q r && cd r && git status --short && echo ok",
            ],
        );
        assert_eq!((exit_code(&c), c.out()), (0, "ok\n".into()), "{}", c.err());
    }
}

/// Toolchains installed per user run confined, as in a shell: rustup's `rustc` proxy (in
/// `~/.cargo/bin`) runs the toolchain under `~/.rustup`; a credential beside them stays closed.
#[test]
fn per_user_toolchains_run() {
    if !landlock() {
        return;
    }
    let Some(home) = std::env::var_os("HOME").map(std::path::PathBuf::from) else {
        return;
    };
    if !home.join(".rustup").is_dir() || !home.join(".cargo/bin/rustc").exists() {
        eprintln!("no rustup toolchain in the home directory: nothing to run");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (_c, mut d, s) = with_config(root.path(), "");
    let rustc = home.join(".cargo/bin/rustc");
    let c = run(&mut d, &s, &[rustc.to_str().unwrap(), "--version"]);
    assert_eq!(exit_code(&c), 0, "{}", c.err());
    assert!(c.out().starts_with("rustc "), "{}", c.out());
    let credentials = home.join(".cargo/credentials.toml");
    if credentials.exists() {
        let c = run(&mut d, &s, &["cat", credentials.to_str().unwrap()]);
        assert_ne!(exit_code(&c), 0, "{}", c.out());
    }
}

#[test]
fn commands_write_inside_the_roots_and_their_tmpdir_only() {
    if !landlock() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let out = outside();
    let (_c, mut d, s) = with_config(root.path(), "");
    let target = out.path().join("new.txt");
    let c = run(
        &mut d,
        &s,
        &["sh", "-c", &format!("echo x > {}", target.display())],
    );
    assert_ne!(exit_code(&c), 0);
    assert!(c.err().contains("Permission denied"), "{}", c.err());
    assert!(!target.exists());
    // Nor may it change or remove what is there.
    let secret = out.path().join("secret.txt");
    let c = run(&mut d, &s, &["rm", "-f", secret.to_str().unwrap()]);
    assert_ne!(exit_code(&c), 0);
    assert!(secret.exists());
    let c = run(
        &mut d,
        &s,
        &[
            "sh",
            "-c",
            "echo y > inside.txt && mkdir sub && mv inside.txt sub/",
        ],
    );
    assert_eq!(exit_code(&c), 0, "{}", c.err());
    assert_eq!(
        std::fs::read_to_string(root.path().join("sub/inside.txt")).unwrap(),
        "y\n"
    );
    // TMPDIR names a private directory it may use; /tmp itself is not writable.
    let c = run(
        &mut d,
        &s,
        &[
            "sh",
            "-c",
            "t=$(mktemp) && echo z > $t && cat $t && echo $TMPDIR && dirname $t",
        ],
    );
    assert_eq!(exit_code(&c), 0, "{}", c.err());
    let text = c.out();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "z");
    assert_eq!(lines[1], lines[2], "mktemp honours TMPDIR");
    assert!(
        Path::new(lines[1])
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("rexd-"),
        "{lines:?}"
    );
    let c = run(
        &mut d,
        &s,
        &["sh", "-c", "echo x > /tmp/rexd-confine-test-$$"],
    );
    assert_ne!(exit_code(&c), 0);
    // The private TMPDIR goes with the daemon.
    let tmpdir = lines[1].to_owned();
    assert!(Path::new(&tmpdir).is_dir());
    drop(d);
    assert!(!Path::new(&tmpdir).exists(), "{tmpdir} left behind");
}

/// The `RemoteBash` description tells the model to write large output to a file and page
/// through it: the file it names must be writable under the default confinement (`/tmp`
/// itself is not).
#[test]
fn the_remote_bash_descriptions_file_advice_works_confined() {
    if !landlock() {
        return;
    }
    let config = deskwire::oa1::ConnectionConfig::new("desk", "#desk").oa1;
    let text = deskwire::oa1::remote_bash::description(&config, config.pacing);
    // "... write it to a file (cmd > FILE 2>&1) and page through it ..."
    let (_, after) = text
        .split_once("(cmd > ")
        .expect("the description's file advice");
    let (file, _) = after
        .split_once(" 2>&1)")
        .expect("the description's file advice");
    let root = tempfile::tempdir().unwrap();
    let (_c, mut d, s) = with_config(root.path(), "");
    let script = format!("seq 1 1000 > {file} 2>&1 && sed -n '1,200p' {file} | wc -l");
    let c = run(&mut d, &s, &["sh", "-c", &script]);
    assert_eq!(exit_code(&c), 0, "{script}: {}", c.err());
    assert_eq!(c.out().trim(), "200", "{script}");
}

#[test]
fn pty_commands_are_confined_too() {
    if !landlock() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("f.txt"), "inside\n").unwrap();
    let out = outside();
    let secret = out.path().join("secret.txt");
    let (_c, mut d, s) = with_config(root.path(), "");
    let line = format!(
        "cat f.txt; cat {}; tty >/dev/null && echo TTY-OK; echo x > /dev/tty",
        secret.display()
    );
    let r = d.call(
        "pty.open",
        json!({"session_id": s, "argv": ["sh", "-c", line]}),
    );
    let mut screen = String::new();
    let exit = loop {
        let ev = d.next_event(common::WAIT).expect("pty events");
        if ev["method"] == "pty.exit" {
            break ev;
        }
        screen.push_str(&String::from_utf8_lossy(&common::data_bytes(&ev["params"])));
    };
    assert_eq!(exit["params"]["pty_id"], r["pty_id"]);
    assert!(screen.contains("inside"), "{screen:?}");
    assert!(!screen.contains("outside"), "{screen:?}");
    assert!(screen.contains("Permission denied"), "{screen:?}");
    assert!(screen.contains("TTY-OK"), "{screen:?}");
}

#[test]
fn confine_off_lets_commands_read_anywhere() {
    let root = tempfile::tempdir().unwrap();
    let out = outside();
    let secret = out.path().join("secret.txt");
    let (_c, mut d, s) = with_config(root.path(), "confine = \"off\"");
    let c = run(&mut d, &s, &["cat", secret.to_str().unwrap()]);
    assert_eq!(
        (exit_code(&c), c.out()),
        (0, "outside\n".into()),
        "{}",
        c.err()
    );
    if Path::new("/etc/hostname").exists() {
        let c = run(&mut d, &s, &["cat", "/etc/hostname"]);
        assert_eq!(exit_code(&c), 0, "{}", c.err());
    }
}

#[test]
fn confine_read_and_confine_write_widen_it() {
    if !landlock() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let ro = outside();
    let rw = tempfile::tempdir().unwrap();
    let toml = format!(
        "confine_read = [{:?}]\nconfine_write = [{:?}]",
        ro.path(),
        rw.path()
    );
    let (_c, mut d, s) = with_config(root.path(), &toml);
    let secret = ro.path().join("secret.txt");
    let c = run(&mut d, &s, &["cat", secret.to_str().unwrap()]);
    assert_eq!(
        (exit_code(&c), c.out()),
        (0, "outside\n".into()),
        "{}",
        c.err()
    );
    let c = run(
        &mut d,
        &s,
        &["sh", "-c", &format!("echo x >> {}", secret.display())],
    );
    assert_ne!(exit_code(&c), 0, "read-only");
    let made = rw.path().join("made.txt");
    let c = run(
        &mut d,
        &s,
        &["sh", "-c", &format!("echo w > {}", made.display())],
    );
    assert_eq!(exit_code(&c), 0, "{}", c.err());
    assert_eq!(std::fs::read_to_string(made).unwrap(), "w\n");
}

fn check_config(root: &Path, toml: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("rexd.toml");
    std::fs::write(&conf, format!("[security]\n{toml}\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rexd"))
        .args(["--check-config", "--log-format", "text", "--config"])
        .arg(&conf)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn check_config_says_how_commands_are_confined() {
    let root = tempfile::tempdir().unwrap();
    let root_s = root.path().canonicalize().unwrap();
    let (ok, text) = check_config(root.path(), "");
    assert!(ok, "{text}");
    if landlock() {
        let abi = rexd::confine::kernel_abi().unwrap();
        let want = format!(
            "confinement: Landlock ABI {abi}: read-write under {}, TMPDIR ",
            root_s.display()
        );
        assert!(text.contains(&want), "{text}");
        assert!(text.contains("read-only /usr"), "{text}");
        assert!(text.contains("devices /dev/null"), "{text}");
        let (ok, text) = check_config(root.path(), "confine = \"required\"");
        assert!(ok && text.contains("Landlock ABI"), "{text}");
        // A configured path that does not exist is a warning, not an error.
        let (ok, text) = check_config(root.path(), "confine_read = [\"/nonexistent/rexd\"]");
        assert!(ok && text.contains("/nonexistent/rexd"), "{text}");
        assert!(text.contains("with 1 warning"), "{text}");
    } else {
        assert!(
            text.contains("confinement: off: this kernel has no Landlock"),
            "{text}"
        );
        let (ok, text) = check_config(root.path(), "confine = \"required\"");
        assert!(!ok && text.contains("no Landlock"), "{text}");
    }
    let (ok, text) = check_config(root.path(), "confine = \"off\"");
    assert!(
        ok && text.contains("confinement: off (security.confine = \"off\")"),
        "{text}"
    );
    let (ok, text) = check_config(root.path(), "confine_write = [\"relative/dir\"]");
    assert!(!ok && text.contains("confine_write"), "{text}");
    let (ok, text) = check_config(root.path(), "confine = \"sometimes\"");
    assert!(!ok && text.contains("confine"), "{text}");
}

/// A read-only client (`[[policy.clients]] read_only = true`): its `fs.write` is refused, and
/// its commands read the roots but cannot change them, whatever program they run (classes
/// judge a command by its name: `cp` classed `read` would still write). Its `TMPDIR` stays
/// writable, and another client of the same daemon still writes.
#[test]
fn a_read_only_clients_commands_cannot_change_the_roots() {
    if !landlock() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("f.txt"), "kept\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("rexd.toml");
    let text = format!(
        "[security]\nallow_shell = true\n[[security.allowed_roots]]\npath = {:?}\n\
         [policy]\ndefault = \"allow\"\n[policy.classes]\nshell = \"allow\"\n\
         [[policy.clients]]\nprincipal = \"reader\"\nread_only = true\n",
        root.path()
    );
    std::fs::write(&conf, text).unwrap();
    let conf = conf.to_str().unwrap();
    let mut d = Daemon::spawn(&["--config", conf, "--principal", "reader"]);
    let s = d.open_session();
    let f = root.path().join("f.txt");
    let refused = d.call_err(
        "fs.write",
        json!({"session_id": s, "path": f, "content": "changed\n"}),
    );
    assert_eq!(refused["code"], -32001, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("read-only client"),
        "{refused}"
    );
    let c = run(&mut d, &s, &["cat", "f.txt"]);
    assert_eq!((exit_code(&c), c.out().as_str()), (0, "kept\n"));
    for argv in [
        &["cp", "f.txt", "copy.txt"][..],
        &["sh", "-c", "echo changed > f.txt"],
        &["rm", "f.txt"],
        &["mkdir", "sub"],
    ] {
        let c = run(&mut d, &s, argv);
        assert_ne!(exit_code(&c), 0, "{argv:?} ran: {}", c.err());
        assert!(
            c.err().contains("Permission denied"),
            "{argv:?}: {}",
            c.err()
        );
    }
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "kept\n");
    assert!(!root.path().join("copy.txt").exists() && !root.path().join("sub").exists());
    // Programs still get a temporary directory to write in.
    let c = run(
        &mut d,
        &s,
        &["sh", "-c", "t=$(mktemp) && echo z > $t && cat $t"],
    );
    assert_eq!((exit_code(&c), c.out().as_str()), (0, "z\n"), "{}", c.err());
    // A PTY is held the same way.
    let opened = d.call(
        "pty.open",
        json!({"session_id": s, "argv": ["sh", "-c", "echo x > pty.txt; echo done $?"]}),
    );
    let mut screen = String::new();
    loop {
        let ev = d.next_event(common::WAIT).expect("pty events");
        if ev["method"] == "pty.exit" {
            assert_eq!(ev["params"]["pty_id"], opened["pty_id"]);
            break;
        }
        screen.push_str(&String::from_utf8_lossy(&common::data_bytes(&ev["params"])));
    }
    assert!(screen.contains("Permission denied"), "{screen:?}");
    assert!(!screen.contains("done 0"), "{screen:?}");
    assert!(!root.path().join("pty.txt").exists());
    drop(d);

    // Another client of the same configuration writes as before.
    let mut d = Daemon::spawn(&["--config", conf, "--principal", "writer"]);
    let s = d.open_session();
    let c = run(&mut d, &s, &["cp", "f.txt", "copy.txt"]);
    assert_eq!(exit_code(&c), 0, "{}", c.err());
    d.call(
        "fs.write",
        json!({"session_id": s, "path": f, "content": "changed\n"}),
    );
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "changed\n");
}

/// Without confinement a read-only client's commands cannot be held to it, so they are refused
/// (its reads still work).
#[test]
fn a_read_only_client_runs_no_command_unconfined() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("f.txt"), "kept\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("rexd.toml");
    let text = format!(
        "[security]\nconfine = \"off\"\n[[security.allowed_roots]]\npath = {:?}\n\
         [policy]\ndefault = \"allow\"\n[[policy.clients]]\nprincipal = \"reader\"\nread_only = true\n",
        root.path()
    );
    std::fs::write(&conf, text).unwrap();
    let mut d = Daemon::spawn(&["--config", conf.to_str().unwrap(), "--principal", "reader"]);
    let s = d.open_session();
    let refused = d.call_err(
        "exec.start",
        json!({"session_id": s, "argv": ["touch", "new.txt"]}),
    );
    assert_eq!(refused["code"], -32001, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("only confinement"),
        "{refused}"
    );
    assert!(!root.path().join("new.txt").exists());
    let read = d.call("fs.read", json!({"session_id": s, "path": "f.txt"}));
    assert_eq!(read["content"], "kept\n", "{read}");
}
