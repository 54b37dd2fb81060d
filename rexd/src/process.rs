//! Starting child processes: each in a process group of its own and in its exec's process
//! tree ([`crate::tree`]: a cgroup, or a marker the subreaper finds), its working directory
//! entered through a descriptor opened beneath a root (`fchdir`, so a symlink swapped in after
//! the check cannot move it), pipes or a PTY for its standard streams, a pidfd to learn of
//! its exit through the event loop, and, last before exec, its Landlock confinement
//! ([`crate::confine`]).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use deskwire::rexd::Program;

use crate::confine::{self, Confined};
use crate::sys;
use crate::tree::Join;

mod clone_into;

/// The size asked for a child's stdout and stderr pipes.
pub const OUTPUT_PIPE_BYTES: usize = 256 * 1024;

/// A started child and its descriptors (all non-blocking, close-on-exec).
#[derive(Debug)]
pub struct Spawned {
    /// Its pid, which is also its process group id.
    pub pid: libc::pid_t,
    /// Readable when it exits.
    pub pidfd: OwnedFd,
    /// Its stdin (pipes), or the PTY master (PTY: input and output).
    pub stdin: Option<OwnedFd>,
    /// Its stdout (pipes) or `None` (PTY: read from `stdin`'s master).
    pub stdout: Option<OwnedFd>,
    /// Its stderr (pipes).
    pub stderr: Option<OwnedFd>,
}

/// How to run it.
#[derive(Debug)]
pub struct Launch<'a> {
    /// What.
    pub program: &'a Program,
    /// The file to execute for an argv program, already resolved and checked against the
    /// command lists (`argv[0]` is still passed as given); `None`: `argv[0]` is looked up.
    pub exe: Option<&'a Path>,
    /// Directory descriptor to `fchdir` into.
    pub cwd: &'a OwnedFd,
    /// Added to (overriding) the daemon's environment.
    pub env: Option<&'a BTreeMap<String, String>>,
    /// How the child joins its exec's process tree.
    pub join: &'a Join,
    /// The Landlock ruleset it enforces on itself before exec, and its `TMPDIR`; `None`:
    /// unconfined.
    pub confine: Option<&'a Confined>,
}

fn command(l: &Launch<'_>) -> Command {
    let mut cmd = match l.program {
        Program::Argv(argv) => {
            let mut c = match l.exe {
                Some(exe) => {
                    let mut c = Command::new(exe);
                    c.arg0(&argv[0]);
                    c
                }
                None => Command::new(&argv[0]),
            };
            c.args(&argv[1..]);
            c
        }
        Program::Shell(line) => {
            let mut c = Command::new("/bin/sh");
            c.arg("-c").arg(line);
            c
        }
        // `Program` is non-exhaustive; a new kind must be handled here before it can run.
        #[allow(unreachable_patterns)]
        _ => Command::new("/nonexistent/rexd-unknown-program-kind"),
    };
    if let Some(tmp) = l.confine.and_then(|c| c.tmpdir()) {
        // The one temporary directory a confined command may write in; the client's wins.
        cmd.env("TMPDIR", tmp);
    }
    if let Some(env) = l.env {
        cmd.envs(env);
    }
    // After the client's variables, so a client cannot set the marker of another exec.
    if let Some((k, v)) = &l.join.marker {
        cmd.env(k, v);
    }
    let cwd = l.cwd.as_raw_fd();
    let cgroup = l.join.cgroup_procs.as_ref().map(|fd| fd.as_raw_fd());
    // SAFETY: fchdir and write are async-signal-safe; the descriptors outlive the spawn.
    // Joining the cgroup before exec means nothing the program does escapes it.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(fd) = cgroup {
                sys::write_raw(fd, b"0")?;
            }
            sys::fchdir(cwd)
        });
    }
    cmd
}

/// Confines the child, after every other `pre_exec` step (joining the cgroup, entering the cwd,
/// taking the terminal), so that nothing it does before exec needs a right the ruleset lacks.
fn confine(cmd: &mut Command, l: &Launch<'_>) {
    if let Some(c) = l.confine {
        let ruleset = c.ruleset();
        // SAFETY: prctl and landlock_restrict_self, two system calls, no allocation; the
        // ruleset's descriptor outlives the spawn (the caller holds `Confined`). A failure
        // fails the start: a command never runs unconfined when it should not.
        unsafe {
            cmd.pre_exec(move || confine::restrict_child(ruleset));
        }
    }
}

fn finish(child: std::process::Child) -> io::Result<(libc::pid_t, OwnedFd)> {
    let pid = child.id() as libc::pid_t;
    // std does not reap on drop; the daemon reaps with waitpid when the pidfd fires.
    let pidfd = sys::pidfd_open(pid)?;
    Ok((pid, pidfd))
}

/// A pipe's (read, write) ends, close-on-exec.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut ends = [0; 2];
    // SAFETY: two out-params.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors, ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) })
}

/// Starts a process with pipes for stdin, stdout and stderr.
pub fn spawn_pipes(l: &Launch<'_>) -> io::Result<Spawned> {
    let spawned = match &l.join.cgroup_dir {
        Some(cgroup) => {
            let (stdin_read, stdin) = pipe()?;
            let (stdout, stdout_write) = pipe()?;
            let (stderr, stderr_write) = pipe()?;
            let stdio = clone_into::ChildStdio {
                fds: [
                    stdin_read.as_raw_fd(),
                    stdout_write.as_raw_fd(),
                    stderr_write.as_raw_fd(),
                ],
                pty: false,
            };
            clone_into::spawn(l, cgroup.as_raw_fd(), &stdio)?.map(|(pid, pidfd)| Spawned {
                pid,
                pidfd,
                stdin: Some(stdin),
                stdout: Some(stdout),
                stderr: Some(stderr),
            })
        }
        None => None,
    };
    let spawned = match spawned {
        Some(spawned) => spawned,
        None => spawn_pipes_forked(l)?,
    };
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (&spawned.stdin, &spawned.stdout, &spawned.stderr)
    else {
        return Err(missing());
    };
    for fd in [stdin, stdout, stderr] {
        sys::set_nonblocking(fd.as_fd())?;
    }
    // A larger pipe lets a chatty child write more per wake-up of the daemon (64 KiB by
    // default); best effort, the system may cap it.
    for fd in [stdout, stderr] {
        sys::set_pipe_size(fd.as_fd(), OUTPUT_PIPE_BYTES);
    }
    Ok(spawned)
}

/// [`spawn_pipes`] through std's fork, joining the cgroup (if any) by a write before exec.
fn spawn_pipes_forked(l: &Launch<'_>) -> io::Result<Spawned> {
    let mut cmd = command(l);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    confine(&mut cmd, l);
    let mut child = cmd.spawn()?;
    let stdin: OwnedFd = child.stdin.take().map(OwnedFd::from).ok_or_else(missing)?;
    let stdout: OwnedFd = child.stdout.take().map(OwnedFd::from).ok_or_else(missing)?;
    let stderr: OwnedFd = child.stderr.take().map(OwnedFd::from).ok_or_else(missing)?;
    let (pid, pidfd) = finish(child)?;
    Ok(Spawned {
        pid,
        pidfd,
        stdin: Some(stdin),
        stdout: Some(stdout),
        stderr: Some(stderr),
    })
}

fn missing() -> io::Error {
    io::Error::other("child pipe missing")
}

/// Starts a process on a new PTY of `cols` × `rows`, as session leader with the PTY as its
/// controlling terminal (so `isatty` holds and `SIGWINCH` reaches it on resize).
pub fn spawn_pty(l: &Launch<'_>, cols: u16, rows: u16) -> io::Result<Spawned> {
    let (master, slave) = sys::openpty(cols, rows)?;
    if let Some(cgroup) = &l.join.cgroup_dir {
        let stdio = clone_into::ChildStdio {
            fds: [slave.as_raw_fd(); 3],
            pty: true,
        };
        if let Some((pid, pidfd)) = clone_into::spawn(l, cgroup.as_raw_fd(), &stdio)? {
            // Our slave end closes here, so reading the master ends (EIO) once the child's has.
            drop(slave);
            sys::set_nonblocking(master.as_fd())?;
            return Ok(Spawned {
                pid,
                pidfd,
                stdin: Some(master),
                stdout: None,
                stderr: None,
            });
        }
    }
    let mut cmd = command(l);
    if l.env.is_none_or(|e| !e.contains_key("TERM")) {
        cmd.env("TERM", "xterm-256color");
    }
    cmd.stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave));
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(sys::make_controlling_terminal);
    }
    confine(&mut cmd, l);
    let child = cmd.spawn()?;
    // Our copies of the slave end close with `cmd`, so reading the master ends (EIO) once the
    // child side has closed it.
    drop(cmd);
    sys::set_nonblocking(master.as_fd())?;
    let (pid, pidfd) = finish(child)?;
    Ok(Spawned {
        pid,
        pidfd,
        stdin: Some(master),
        stdout: None,
        stderr: None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::io::Read;

    use super::*;
    use crate::tree::{Tracker, Tracking};

    /// What `sh` reports of itself: its cgroup, directory, process group, signal state, two
    /// variables, and a line of its stdin.
    const REPORT: &str = "tail -n1 /proc/self/cgroup; pwd; [ \"$(cut -d' ' -f5 /proc/$$/stat)\" -eq $$ ] \
        && echo own group; grep -E '^Sig(Blk|Ign)' /proc/self/status; echo \"$FOO $REXD_TREE\"; \
        head -n1; echo to stderr >&2";

    /// Runs [`REPORT`] through `start` and returns its stdout and stderr.
    fn report(
        start: impl FnOnce(&Launch<'_>) -> io::Result<Spawned>,
        join: &Join,
    ) -> (String, String) {
        let dir = tempfile::tempdir().unwrap();
        let cwd: OwnedFd = std::fs::File::open(dir.path()).unwrap().into();
        let env = BTreeMap::from([("FOO".to_owned(), "bar".to_owned())]);
        let program = Program::Shell(REPORT.to_owned());
        let spawned = start(&Launch {
            program: &program,
            exe: None,
            cwd: &cwd,
            env: Some(&env),
            join,
            confine: None,
        })
        .unwrap();
        sys::write_raw(
            spawned.stdin.as_ref().unwrap().as_raw_fd(),
            b"line one\nline two\n",
        )
        .unwrap();
        drop(spawned.stdin);
        let read_all = |fd: OwnedFd| {
            // Blocking again, to read to the end.
            // SAFETY: fcntl on a descriptor we own.
            unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, 0) };
            let mut text = String::new();
            std::fs::File::from(fd).read_to_string(&mut text).unwrap();
            text
        };
        let out = read_all(spawned.stdout.unwrap());
        let err = read_all(spawned.stderr.unwrap());
        let mut status = 0;
        // SAFETY: reaps our own child.
        unsafe { libc::waitpid(spawned.pid, &mut status, 0) };
        (out.replace(&dir.path().display().to_string(), "CWD"), err)
    }

    /// Born in its cgroup (`clone3`) or moved there before exec (fork, then a write to
    /// `cgroup.procs`): either way the command runs in its exec's cgroup, and sees what std's
    /// start gives it (the subreaper's start, std's alone, is the reference).
    #[test]
    fn both_ways_into_a_cgroup_start_the_command_as_std_does() {
        let tracker = Tracker::new(Tracking::Auto);
        if !tracker.uses_cgroups() {
            eprintln!("SKIPPED: no cgroups here ({})", tracker.describe());
            return;
        }
        let (reference, reference_err) = report(spawn_pipes, &tracker.prepare_sweep(1).1);
        let marker = tracker.prepare_sweep(1).1.marker.unwrap().1;
        let expected = reference.replacen(&marker, "", 1);
        // SIGPIPE, which the Rust runtime ignores, is back to its default; nothing is blocked.
        let ignored = expected.split("SigIgn:\t").nth(1).unwrap();
        let ignored = u64::from_str_radix(&ignored[..16], 16).unwrap();
        assert_eq!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "{reference}");
        assert!(
            expected.contains("CWD\nown group\nSigBlk:\t0000000000000000\n")
                && expected.ends_with("\nbar \nline one\n"),
            "{reference}"
        );
        assert_eq!(reference_err, "to stderr\n");
        for (key, way) in [(2u64, "clone3"), (3, "fork and write")] {
            let (tree, join) = tracker.prepare(key).unwrap();
            let (out, err) = match way {
                "clone3" => report(spawn_pipes, &join),
                _ => report(spawn_pipes_forked, &join),
            };
            let (cgroup, rest) = out.split_once('\n').unwrap();
            assert!(cgroup.ends_with(&format!("/p{key}")), "{way}: {out}");
            // The reference's first line is the daemon's own cgroup.
            assert_eq!(rest, expected.split_once('\n').unwrap().1, "{way}");
            assert_eq!(err, "to stderr\n", "{way}");
            assert!(tree.remove(), "{way}: the cgroup is still in use");
        }
    }

    /// A program that does not exist, or cannot be run, is the error std's start gives.
    #[test]
    fn a_program_that_cannot_start_is_the_error_std_gives() {
        let tracker = Tracker::new(Tracking::Auto);
        if !tracker.uses_cgroups() {
            eprintln!("SKIPPED: no cgroups here ({})", tracker.describe());
            return;
        }
        let cwd: OwnedFd = std::fs::File::open("/").unwrap().into();
        let dir = tempfile::tempdir().unwrap();
        let not_executable = dir.path().join("data");
        std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
        for (argv, kind) in [
            (vec!["/nonexistent/program"], io::ErrorKind::NotFound),
            (vec!["no-such-program-on-path"], io::ErrorKind::NotFound),
            (
                vec![not_executable.to_str().unwrap()],
                io::ErrorKind::PermissionDenied,
            ),
            (
                vec!["sh", "-c", "nul \0 in argv"],
                io::ErrorKind::InvalidInput,
            ),
        ] {
            let program = Program::Argv(argv.iter().map(|s| s.to_string()).collect());
            let (tree, join) = tracker.prepare(7).unwrap();
            let err = spawn_pipes(&Launch {
                program: &program,
                exe: None,
                cwd: &cwd,
                env: None,
                join: &join,
                confine: None,
            })
            .map(|s| s.pid)
            .expect_err(&format!("{argv:?}"));
            assert_eq!(err.kind(), kind, "{argv:?}: {err}");
            assert!(
                tree.remove(),
                "{argv:?}: a failed start left its cgroup in use"
            );
        }
    }
}
