//! `rex` against a local `rexd --stdio` (found next to the `rex` binary): the core cases, a
//! missing daemon, and the targets file.

mod support;

use support::{Fixture, REXD};

core_cases!(Fixture::local());

#[test]
fn a_missing_local_rexd_says_how_to_fix_it() {
    let f = Fixture::local();
    let out = f.run(&["--rexd", "/nonexistent/rexd", "exec", "--", "true"]);
    assert_eq!(out.code, 127);
    assert!(
        out.stderr.contains("rexd was not found")
            && out.stderr.contains("--rexd PATH")
            && out.stderr.contains(".tar.gz"),
        "{}",
        out.stderr
    );
}

#[test]
fn targets_are_listed_used_and_removed() {
    let f = Fixture::local();
    f.run(&["target", "add", "other", "ssh://deploy@server-b:2222"])
        .ok();
    let list = f.run(&["target", "list"]).ok().text();
    assert_eq!(
        list,
        "  local\tlocal\n* here\tlocal\n  other\tssh://deploy@server-b:2222\n"
    );
    f.run(&["target", "use", "other"]).ok();
    assert!(f.run(&["target", "list"]).ok().text().contains("* other"));
    let out = f.run(&["target", "use", "nowhere"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no target named \"nowhere\""),
        "{}",
        out.stderr
    );

    // --target beats the file's current target for one call.
    let out = f.run(&["-t", "here", "exec", "--", "echo", "routed"]).ok();
    assert_eq!(out.text(), "routed\n");

    let removed = f.run(&["target", "remove", "other"]).ok();
    assert!(
        removed
            .stderr
            .contains("other was the current target; now using local"),
        "{}",
        removed.stderr
    );
    let list = f.run(&["target", "list"]).ok().text();
    assert_eq!(
        list, "* local\tlocal\n  here\tlocal\n",
        "current falls back to local"
    );
    // A URL made current is listed as such.
    f.run(&["target", "use", "ssh://deploy@server-c"]).ok();
    let list = f.run(&["target", "list"]).ok().text();
    assert_eq!(
        list,
        "  local\tlocal\n  here\tlocal\n* ssh://deploy@server-c\tssh://deploy@server-c\n"
    );
    f.run(&["target", "use", "local"]).ok();
    let bad = f.run(&["target", "add", "x", "ftp://h"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("bad target"), "{}", bad.stderr);
}

#[test]
fn the_daemon_binary_is_next_to_rex() {
    // What the `local` target relies on without --rexd.
    let rex_dir = std::path::Path::new(support::REX).parent().unwrap();
    assert_eq!(std::path::Path::new(REXD).parent().unwrap(), rex_dir);
}

#[test]
fn stdin_forwarding_stops_when_the_command_ends_first() {
    let f = Fixture::local();
    // The command never reads: rex must still exit with its code, not wait on the input.
    let input = vec![b'x'; 8 << 20];
    let out = f.run_with_stdin(&["exec", "--", "sh", "-c", "exit 4"], Some(&input));
    assert_eq!(out.code, 4, "{}", out.stderr);
}

/// A Ctrl-C at the terminal reaches rex's whole process group; the command on the `local`
/// target must not outlive it.
#[test]
fn ctrl_c_of_rex_stops_the_local_command() {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;

    let f = Fixture::local();
    // In the root: what rexd runs may write nowhere else (security.confine).
    let pid_file = f.work.join("pid");
    let script = format!("echo $$ > '{}'; exec sleep 60", pid_file.display());
    let mut rex = f
        .rex()
        .args(["sh", &script])
        .process_group(0) // rex leads a group, as a shell's foreground job does
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the command did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(alive(pid));
    // What the terminal does on Ctrl-C: SIGINT to the foreground process group.
    let status = std::process::Command::new("kill")
        .args(["-INT", "--", &format!("-{}", rex.id())])
        .status()
        .unwrap();
    assert!(status.success());
    rex.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the command outlived rex's Ctrl-C"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Running (not a zombie waiting to be reaped).
/// `rex` killed with SIGKILL while its ssh is still connecting (to a port that accepts and
/// never answers) leaves no ssh behind: the kernel ends it with rex (PR_SET_PDEATHSIG).
#[test]
fn a_killed_rex_leaves_no_ssh_connecting() {
    use std::process::Stdio;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (accepted, connected) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let held = listener.accept();
        let _ = accepted.send(());
        std::thread::sleep(std::time::Duration::from_secs(30));
        drop(held);
    });
    let f = Fixture::local();
    let target = format!("ssh://nobody@127.0.0.1:{port}");
    let mut rex = f
        .rex()
        .args(["-t", &target, "exec", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    connected
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("ssh did not connect");
    let ssh = children(rex.id());
    assert_eq!(ssh.len(), 1, "rex's children: {ssh:?}");
    rex.kill().unwrap();
    rex.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while alive(ssh[0]) {
        assert!(
            std::time::Instant::now() < deadline,
            "ssh outlived the rex killed with SIGKILL"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                stat.rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().nth(1))
                    == Some(&pid.to_string())
            })
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.split_whitespace().next() != Some("Z"))
        })
        .unwrap_or(false)
}

/// `rex info | head`, `rex exec -- seq 1 1000000 | head`: when whatever reads rex's output
/// stops, rex ends quietly with 141 (what a shell shows for a process a broken pipe ended),
/// never with a panic or a message.
#[test]
fn a_closed_stdout_ends_rex_quietly() {
    let f = Fixture::local();
    for args in [
        &["info"][..],
        &["target", "list"],
        &["exec", "--", "seq", "1", "1000000"],
    ] {
        // A pipe whose reader is gone before rex starts.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = f
            .rex()
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// A file too large for one `fs.write` (its base64 over a daemon's 16 MiB message) is refused
/// before it is sent, saying how to send it instead; in pieces with `--append` it arrives
/// whole. (The daemon used to drop the line, and rex waited for an answer that never came.)
#[test]
fn a_file_too_large_for_one_write_is_refused_at_once_and_goes_in_pieces() {
    let f = Fixture::local();
    let blob = support::binary_blob(13 << 20);
    let path = f.path("big.bin");
    let out = f.run_with_stdin(&["write", &path], Some(&blob));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("fs.write: the request would be")
            && out.stderr.contains("rex write --append"),
        "{}",
        out.stderr
    );
    assert!(!std::path::Path::new(&path).exists());
    let (first, rest) = blob.split_at(8 << 20);
    f.run_with_stdin(&["write", &path], Some(first)).ok();
    f.run_with_stdin(&["write", "--append", &path], Some(rest))
        .ok();
    assert!(std::fs::read(&path).unwrap() == blob, "written whole");
    // Compressed, 17 MiB of zeros would fit in one message, but no daemon inflates past
    // 16 MiB: refused the same way, before it is sent.
    let zeros = vec![0u8; 17 << 20];
    let out = f.run_with_stdin(&["--compress", "write", &f.path("zeros.bin")], Some(&zeros));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("rex write --append"), "{}", out.stderr);
}

/// A program that cannot be started is named, and exits 127 (126 for one that may not run),
/// as a shell says it.
#[test]
fn a_program_that_cannot_start_is_named_with_a_shells_exit_code() {
    let f = Fixture::local();
    let out = f.run(&["exec", "--", "no-such-command-xyz", "arg"]);
    assert_eq!(out.code, 127, "as a shell says it: {}", out.stderr);
    assert!(
        out.stderr
            .contains("cannot start no-such-command-xyz: No such file or directory"),
        "{}",
        out.stderr
    );
    let script = f.path("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let out = f.run(&["exec", "--", &script]);
    assert_eq!(out.code, 126, "{}", out.stderr);
    assert!(out.stderr.contains("Permission denied"), "{}", out.stderr);
}

/// A targets file the user named that is not there is an error, not a quiet run on `local`;
/// with -t the command still goes where it is told.
#[test]
fn a_named_targets_file_that_is_missing_is_an_error() {
    let f = Fixture::local();
    let missing = f.path("typo-targets.toml");
    let out = f.run(&["--targets-file", &missing, "exec", "--", "echo", "ran"]);
    assert_eq!((out.code, out.text().as_str()), (1, ""), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("it does not exist, so it chooses no target"),
        "{}",
        out.stderr
    );
    let out = f
        .run(&[
            "--targets-file",
            &missing,
            "-t",
            "local",
            "exec",
            "--",
            "echo",
            "ran",
        ])
        .ok();
    assert_eq!(out.text(), "ran\n");
}

/// `rex target add` keeps the session flags given with it, and paths absolute (the identity
/// file too), so the target works the same from any directory.
#[test]
fn target_add_keeps_the_session_flags_and_absolute_paths() {
    let f = Fixture::local();
    f.run(&[
        "target",
        "add",
        "kept",
        "ssh://deploy@server-c",
        "--resume",
        "--compress",
        "--no-raw-frames",
        "-i",
        "keys/id",
    ])
    .ok();
    let shown = f.run(&["-t", "kept", "target", "show"]).ok().text();
    for line in [
        "resume = true",
        "compress = true",
        "no_raw_frames = true",
        &format!("identity_file = \"{}\"", f.work.join("keys/id").display()),
    ] {
        assert!(shown.contains(line), "{line}: {shown}");
    }
}

/// An ssh host that accepts and never answers is given up after ssh's connect timeout (rex
/// gives it `ConnectTimeout=15` unless the target's own options say otherwise).
#[test]
fn an_ssh_host_that_never_answers_is_given_up() {
    let f = Fixture::local();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ssh://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let started = std::time::Instant::now();
    let out = f.run(&["-t", &url, "exec", "--", "true"]);
    assert_eq!(out.code, 255, "{}", out.stderr);
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

/// Names with a newline or an escape sequence (Linux allows both) are quoted as `$'...'` by
/// `ls`, `glob` and `stat`: one line is one path, the terminal is not driven by a file name,
/// and bash reads the quoted name back as the same file.
#[test]
fn names_with_control_characters_are_quoted_one_per_line() {
    let f = Fixture::local();
    let dir = f.path("odd");
    std::fs::create_dir(&dir).unwrap();
    for name in ["two\nlines", "red\u{1b}[31m", "plain name", "it's\tok"] {
        std::fs::write(format!("{dir}/{name}"), "x").unwrap();
    }
    let out = f.run(&["ls", &dir]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = out.text();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            r"$'it\'s\tok'",
            r"$'red\x1b[31m'",
            r"$'two\nlines'",
            "plain name"
        ],
        "{text:?}"
    );
    let out = f.run(&["glob", &format!("{dir}/two*")]);
    assert_eq!(out.text().trim_end(), format!(r"$'{dir}/two\nlines'"));
    let out = f.run(&["stat", &format!("{dir}/two\nlines")]);
    let text = out.text();
    assert!(
        text.starts_with(&format!(r"$'{dir}/two\nlines': file")),
        "{text:?}"
    );
    // What `ls` printed, given to bash, names the same file.
    let back = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("cd {dir} && cat -- {}", r"$'two\nlines'"))
        .output()
        .unwrap();
    assert_eq!(
        back.stdout,
        b"x",
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
}
