//! Runs the `rex` binary against a real `rexd`, locally or through a private sshd, and the core
//! cases both transports must pass.

#![allow(dead_code)] // each test file uses a different part

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use deskwire_integration::{Sshd, TempDir};

pub const REX: &str = env!("CARGO_BIN_EXE_rex");
pub const REXD: &str = env!("CARGO_BIN_EXE_rexd");

/// What one `rex` run gave.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Out {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    #[track_caller]
    pub fn ok(self) -> Out {
        assert_eq!(self.code, 0, "rex failed: {}", self.stderr);
        self
    }
}

/// A workspace root, a rexd config allowing it, a targets file whose current target reaches
/// the daemon, and (for ssh) the sshd that carries it.
pub struct Fixture {
    tmp: TempDir,
    /// The allowed root (canonical).
    pub work: PathBuf,
    pub config: PathBuf,
    pub targets_file: PathBuf,
    pub sshd: Option<Sshd>,
}

impl Fixture {
    fn new(prefix: &str) -> Fixture {
        let tmp = TempDir::new(prefix).expect("temp dir");
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let work = work.canonicalize().unwrap();
        let config = tmp.path().join("rexd.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nstdio = true\nlog_level = \"warn\"\n\n\
                 [security]\nallow_shell = true\n\n\
                 [[security.allowed_roots]]\npath = \"{}\"\n\n\
                 [audit]\nenabled = false\n",
                work.display()
            ),
        )
        .unwrap();
        let targets_file = tmp.path().join("targets.toml");
        Fixture {
            tmp,
            work,
            config,
            targets_file,
            sshd: None,
        }
    }

    /// A `local` target: `rex` finds the `rexd` built next to it.
    pub fn local() -> Fixture {
        let f = Fixture::new("rex-local");
        f.add_local_target("here", &["--use"]);
        f
    }

    /// Adds a named `local` target whose daemon reads this fixture's config.
    pub fn add_local_target(&self, name: &str, extra: &[&str]) {
        let config = format!("--rexd-arg={}", self.config.display());
        let mut args = vec![
            "target",
            "add",
            name,
            "local",
            "--rexd-arg=--config",
            &config,
        ];
        args.extend_from_slice(extra);
        self.run(&args).ok();
    }

    /// An `ssh://` target through a private sshd whose logins have the built `rexd` on their
    /// PATH. The tests that use it are `#[ignore]`d (counted and named) where OpenSSH is
    /// missing: see `cfg(no_sshd)` in `rexd/build.rs`.
    pub fn ssh() -> Fixture {
        let bin_dir = Path::new(REXD).parent().unwrap().display().to_string();
        let sshd = Sshd::start_with_config(&format!("SetEnv PATH={bin_dir}:/usr/bin:/bin"));
        let mut f = Fixture::new("rex-ssh");
        f.add_ssh_target("box", &sshd, &["--use"]);
        f.sshd = Some(sshd);
        f
    }

    /// Adds a named ssh target for `sshd` (key, private known_hosts, batch mode).
    pub fn add_ssh_target(&self, name: &str, sshd: &Sshd, extra: &[&str]) {
        self.add_ssh_target_with(name, sshd, sshd.ssh_options(), extra)
    }

    /// [`Fixture::add_ssh_target`] with the given ssh options.
    pub fn add_ssh_target_with(
        &self,
        name: &str,
        sshd: &Sshd,
        options: Vec<String>,
        extra: &[&str],
    ) {
        let config = self.config.display().to_string();
        let mut args: Vec<String> = vec!["target".into(), "add".into(), name.into(), sshd.url()];
        args.extend(options.into_iter().map(|o| format!("--ssh-arg={o}")));
        args.push("--rexd-arg=--config".into());
        args.push(format!("--rexd-arg={config}"));
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&refs).ok();
    }

    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// `rex` with this fixture's targets file and no target from the environment.
    pub fn rex(&self) -> Command {
        let mut cmd = Command::new(REX);
        cmd.env("REX_TARGETS_FILE", &self.targets_file)
            .env_remove("REX_TARGET")
            .current_dir(&self.work);
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Out {
        self.run_with_stdin(args, None)
    }

    pub fn run_with_stdin(&self, args: &[&str], stdin: Option<&[u8]>) -> Out {
        let mut child = self
            .rex()
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run rex");
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            let input = input.to_vec();
            // A thread, so a large input cannot deadlock against unread output.
            std::thread::spawn(move || {
                let _ = pipe.write_all(&input);
            });
        }
        let out = child.wait_with_output().expect("wait for rex");
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn path(&self, name: &str) -> String {
        self.work.join(name).display().to_string()
    }
}

/// Bytes that are not UTF-8 and not one repeating pattern.
pub fn binary_blob(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

// ---- the core cases --------------------------------------------------------------------------

/// `rex exec` streams all of a command's output, as ssh does (past the daemon's 1 MiB cap for
/// agents); `--max-output-bytes` still cuts it, and says so.
pub fn exec_streams_all_its_output(f: &Fixture) {
    let out = f.run(&["exec", "--", "seq", "1", "400000"]).ok();
    let local = std::process::Command::new("seq")
        .args(["1", "400000"])
        .output()
        .unwrap()
        .stdout;
    assert!(
        local.len() > 2 << 20,
        "{} bytes: more than the cap",
        local.len()
    );
    assert!(
        out.stdout == local,
        "{} bytes came of {}",
        out.stdout.len(),
        local.len()
    );
    assert!(!out.stderr.contains("truncated"), "{}", out.stderr);
    let out = f
        .run(&["exec", "--max-output-bytes", "10", "--", "seq", "1", "1000"])
        .ok();
    assert_eq!(out.text(), "1\n2\n3\n4\n5\n");
    assert!(
        out.stderr.contains("output truncated at the daemon's cap"),
        "{}",
        out.stderr
    );
}

pub fn exec_output_and_exit_code(f: &Fixture) {
    let out = f.run(&["exec", "--", "printf", "%s\\n", "a b", "c"]).ok();
    assert_eq!(out.text(), "a b\nc\n", "argv words stay whole: no shell");

    let out = f.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "echo to-err >&2; echo to-out; exit 3",
    ]);
    assert_eq!(out.code, 3, "the remote exit code is rex's: {}", out.stderr);
    assert_eq!(out.text(), "to-out\n");
    assert!(out.stderr.contains("to-err\n"), "stderr: {}", out.stderr);

    let out = f
        .run(&[
            "exec",
            "--cwd",
            &f.path(""),
            "--env",
            "GREETING=hi there",
            "--",
            "sh",
            "-c",
            "echo \"$GREETING\" in $(pwd)",
        ])
        .ok();
    assert_eq!(out.text(), format!("hi there in {}\n", f.work.display()));
}

pub fn shell_mode(f: &Fixture) {
    let out = f.run(&["sh", "echo $((6*7)) | tr 4 X; exit 5"]);
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert_eq!(out.text(), "X2\n");
}

/// As with ssh, rex's stdin is the command's: forwarded as it comes, its end closes the
/// command's stdin (no flag needed).
pub fn stdin_is_forwarded(f: &Fixture) {
    // The case: without EOF passed on, cat would wait until the timeout (exit 124).
    let out = f
        .run_with_stdin(
            &["exec", "--timeout-ms", "20000", "--", "cat"],
            Some(b"a\nb\n"),
        )
        .ok();
    assert_eq!(out.text(), "a\nb\n");

    let mut input = b"hello\n".repeat(30_000); // 180 kB: several exec.input chunks
    input.extend_from_slice(b"end\n");
    let out = f
        .run_with_stdin(
            &[
                "exec",
                "--timeout-ms",
                "20000",
                "--",
                "sh",
                "-c",
                "tr a-z A-Z | uniq -c",
            ],
            Some(&input),
        )
        .ok();
    let counts: Vec<String> = out
        .text()
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        counts,
        ["30000 HELLO", "1 END"],
        "every line arrived, in order, then EOF"
    );
}

/// `-n` (ssh's flag) gives the command an empty stdin and leaves rex's own unread.
pub fn no_stdin_gives_an_empty_stdin(f: &Fixture) {
    let script = "if read -r line; then echo \"read $line\"; else echo eof; fi";
    for flag in ["-n", "--no-stdin"] {
        let out = f
            .run_with_stdin(
                &["sh", "--timeout-ms", "20000", flag, script],
                Some(b"not for the command\n"),
            )
            .ok();
        assert_eq!(out.text(), "eof\n", "{flag}");
    }
    // Without -n the same command reads the line.
    let out = f
        .run_with_stdin(
            &["sh", "--timeout-ms", "20000", script],
            Some(b"for the command\n"),
        )
        .ok();
    assert_eq!(out.text(), "read for the command\n");
}

/// A command that never reads its stdin (or closes it) runs to its end whatever rex's stdin
/// holds: the input waits (as ssh's does) and what the command never took is dropped.
pub fn a_command_that_never_reads_stdin(f: &Fixture) {
    // 4 MiB: more than the daemon buffers (1 MiB) and the pipe holds.
    let input = vec![b'x'; 4 << 20];
    let out = f
        .run_with_stdin(
            &["sh", "--timeout-ms", "20000", "sleep 1; echo done"],
            Some(&input),
        )
        .ok();
    assert_eq!(out.text(), "done\n");
    let out = f.run_with_stdin(
        &[
            "sh",
            "--timeout-ms",
            "20000",
            "exec 0<&-; sleep 0.5; echo closed; exit 3",
        ],
        Some(&input),
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert_eq!(out.text(), "closed\n");
    // A terminal-like stdin that never ends does not hold rex once the command exits.
    let mut child = f
        .rex()
        .args(["exec", "--", "echo", "quick"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _open_stdin = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"quick\n");
}

/// Output arrives while the command still runs, not at its end.
pub fn output_is_live(f: &Fixture) {
    let marker = f.dir().join("release");
    let script = format!(
        "echo first; while [ ! -e '{}' ]; do sleep 0.05; done; echo second",
        marker.display()
    );
    let mut child = f
        .rex()
        .args(["sh", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "first\n");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first line came while the command was still waiting for the marker"
    );
    std::fs::write(&marker, b"").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "second\n");
    assert!(child.wait().unwrap().success());
}

pub fn files_round_trip(f: &Fixture) {
    // 2.5 MiB of binary: more than one fs.read piece under the default 1 MiB cap.
    let blob = binary_blob(2_621_440 + 17);
    let path = f.path("sub/blob.bin");
    f.run_with_stdin(&["write", "-p", &path], Some(&blob)).ok();
    assert_eq!(std::fs::read(&path).unwrap(), blob, "written byte-exact");
    let out = f.run(&["read", &path]).ok();
    assert!(
        out.stdout == blob,
        "read back byte-exact ({} bytes)",
        out.stdout.len()
    );

    let out = f
        .run(&["read", "--offset", "1048570", "--length", "20", &path])
        .ok();
    assert_eq!(out.stdout, &blob[1_048_570..1_048_590]);

    let text = f.path("notes.txt");
    f.run(&["write", "--content", "one\n", &text]).ok();
    f.run(&["write", "--append", "--content", "two\n", &text])
        .ok();
    assert_eq!(f.run(&["read", &text]).ok().text(), "one\ntwo\n");
    let out = f.run(&["write", "--content", "x", &f.path("no/such/dir/x.txt")]);
    assert_eq!(out.code, 1, "no parents made unless asked");
    assert!(
        out.stderr.contains("no such directory to write it in") && out.stderr.contains("-p"),
        "{}",
        out.stderr
    );
    // A path ending in / names a directory: no file is made for it.
    let out = f.run(&["write", "--content", "x", &f.path("dirlike/")]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("names a directory"), "{}", out.stderr);
    assert!(!f.work.join("dirlike").exists());
    // --expected-mtime: a time that is not one is said to be so; the one stat gave works.
    let out = f.run(&[
        "write",
        "--expected-mtime",
        "banana",
        "--content",
        "z",
        &text,
    ]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("is not an RFC 3339 time"),
        "{}",
        out.stderr
    );
    let stat = f.run(&["stat", "--json", &text]).ok();
    let stat: serde_json::Value = serde_json::from_slice(&stat.stdout).unwrap();
    let mtime = stat["mtime"].as_str().unwrap().to_owned();
    f.run(&[
        "write",
        "--append",
        "--expected-mtime",
        &mtime,
        "--content",
        "",
        &text,
    ])
    .ok();
    let out = f.run(&["glob", ""]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("the glob pattern is empty"),
        "{}",
        out.stderr
    );
    let out = f.run(&["write", "--create", "--content", "x", &text]);
    assert_eq!(out.code, 1, "create refuses an existing file");
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "one\ntwo\n");

    let stat = f.run(&["stat", "--json", &path]).ok();
    let stat: serde_json::Value = serde_json::from_slice(&stat.stdout).unwrap();
    assert_eq!(stat["type"], "file");
    assert_eq!(stat["size"], blob.len() as u64);

    // The mtime from stat guards a write; a stale one is refused (-32006).
    let mtime = stat["mtime"].as_str().unwrap().to_owned();
    f.run(&[
        "write",
        "--expected-mtime",
        &mtime,
        "--content",
        "new",
        &path,
    ])
    .ok();
    let out = f.run(&[
        "write",
        "--expected-mtime",
        &mtime,
        "--content",
        "newer",
        &path,
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("-32006"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");

    let ls = f.run(&["ls", &f.path("")]).ok().text();
    assert_eq!(ls, "notes.txt\nsub/\n");
    let glob = f
        .run(&["glob", "--cwd", &f.path(""), "**/*.bin"])
        .ok()
        .text();
    assert_eq!(glob.trim(), path);
    let missing = f.run(&["stat", &f.path("nope")]);
    assert_eq!(missing.code, 1);
    assert!(missing.text().contains("does not exist"));
    // With --json too: the answer is printed, and the status says it is missing.
    let missing = f.run(&["stat", "--json", &f.path("nope")]);
    assert_eq!(missing.code, 1);
    let answer: serde_json::Value = serde_json::from_slice(&missing.stdout).unwrap();
    assert_eq!(answer["exists"], false);
}

pub fn paths_outside_the_roots_are_refused(f: &Fixture) {
    let out = f.run(&["read", "/etc/passwd"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("forbidden_path (-32002)"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty());

    let escape = format!("{}/../escaped.txt", f.work.display());
    let out = f.run(&["write", "--content", "x", &escape]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("has a `..`, which rexd refuses"),
        "{}",
        out.stderr
    );
    assert!(
        !f.dir().join("escaped.txt").exists(),
        "nothing written outside"
    );

    // Each way out says which it is: a symbolic link, a glob searching elsewhere.
    std::os::unix::fs::symlink("/etc/passwd", f.work.join("link-out")).unwrap();
    let out = f.run(&["read", &f.path("link-out")]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("is a symbolic link, or leads through one out of the roots"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty());
    let out = f.run(&["glob", "/etc/*"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("the pattern /etc/* searches outside"),
        "{}",
        out.stderr
    );
}

pub fn signals_and_timeouts_become_exit_codes(f: &Fixture) {
    let out = f.run(&["sh", "kill -TERM $$"]);
    assert_eq!(out.code, 128 + 15, "{}", out.stderr);
    let out = f.run(&["exec", "--timeout-ms", "300", "--", "sleep", "30"]);
    assert_eq!(out.code, 124, "{}", out.stderr);
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);
}

/// Defines one `#[test]` per core case for a fixture expression giving `Option<Fixture>`.
#[macro_export]
macro_rules! core_cases {
    ($fixture:expr $(, #[$attr:meta])*) => {
        #[test]
        $(#[$attr])*
        fn exec_output_and_exit_code() {
            let f = $fixture;
            support::exec_output_and_exit_code(&f);
        }
        #[test]
        $(#[$attr])*
        fn exec_streams_all_its_output() {
            let f = $fixture;
            support::exec_streams_all_its_output(&f);
        }
        #[test]
        $(#[$attr])*
        fn shell_mode() {
            let f = $fixture;
            support::shell_mode(&f);
        }
        #[test]
        $(#[$attr])*
        fn stdin_is_forwarded() {
            let f = $fixture;
            support::stdin_is_forwarded(&f);
        }
        #[test]
        $(#[$attr])*
        fn no_stdin_gives_an_empty_stdin() {
            let f = $fixture;
            support::no_stdin_gives_an_empty_stdin(&f);
        }
        #[test]
        $(#[$attr])*
        fn a_command_that_never_reads_stdin() {
            let f = $fixture;
            support::a_command_that_never_reads_stdin(&f);
        }
        #[test]
        $(#[$attr])*
        fn output_is_live() {
            let f = $fixture;
            support::output_is_live(&f);
        }
        #[test]
        $(#[$attr])*
        fn files_round_trip() {
            let f = $fixture;
            support::files_round_trip(&f);
        }
        #[test]
        $(#[$attr])*
        fn paths_outside_the_roots_are_refused() {
            let f = $fixture;
            support::paths_outside_the_roots_are_refused(&f);
        }
        #[test]
        $(#[$attr])*
        fn signals_and_timeouts_become_exit_codes() {
            let f = $fixture;
            support::signals_and_timeouts_become_exit_codes(&f);
        }
    };
}
