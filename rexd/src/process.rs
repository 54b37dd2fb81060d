//! Starting child processes: each in a process group of its own and in its exec's process
//! tree ([`crate::tree`]: a cgroup, or a marker the subreaper finds), its working directory
//! entered through a descriptor opened beneath a root (`fchdir`, so a symlink swapped in after
//! the check cannot move it), pipes or a PTY for its standard streams, a pidfd to learn of
//! its exit through the event loop, and, last before exec, its Landlock confinement
//! ([`crate::confine`]).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use deskwire::rexd::Program;

use crate::confine::{self, Confined};
use crate::sys;
use crate::tree::Join;

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

/// Starts a process with pipes for stdin, stdout and stderr.
pub fn spawn_pipes(l: &Launch<'_>) -> io::Result<Spawned> {
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
    for fd in [&stdin, &stdout, &stderr] {
        sys::set_nonblocking(fd.as_fd())?;
    }
    // A larger pipe lets a chatty child write more per wake-up of the daemon (64 KiB by
    // default); best effort, the system may cap it.
    for fd in [&stdout, &stderr] {
        sys::set_pipe_size(fd.as_fd(), OUTPUT_PIPE_BYTES);
    }
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
