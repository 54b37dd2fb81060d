//! Starting a child in its exec's cgroup from birth: `clone3(CLONE_INTO_CGROUP)` (Linux 5.7).
//!
//! Joining by writing `0` to `cgroup.procs` between fork and exec moves the process, and a move
//! takes the kernel's `cgroup_threadgroup_rwsem` for writing, which waits out an RCU grace
//! period unless another move ran moments before. That wait was 10-13 ms here for the first
//! exec after an idle moment: `rex -t local exec -- true` took 28 ms in cgroup mode against
//! 15 ms in subreaper mode, with 50 ms between runs. A child made in the cgroup is never moved.
//!
//! `std::process::Command` cannot pass clone flags, so this does what its fork path does, in
//! the same order: everything that allocates before the clone (argv, the environment, the
//! pipes), and in the child only system calls: the standard streams, the process group (or the
//! session and controlling terminal of a PTY), the signal mask and `SIGPIPE` reset, `fchdir`,
//! the Landlock ruleset last, then `execvp` with the child's environment, whose `PATH` the
//! search uses. An error before or at exec comes back through a close-on-exec pipe as its
//! errno, as std reports it.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};

use super::Launch;
use deskwire::rexd::Program;

const CLONE_PIDFD: u64 = 0x1000;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// The kernel's `struct clone_args` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`, 88 bytes).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Set once the kernel (or a seccomp filter) has refused `clone3` or `CLONE_INTO_CGROUP`.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

unsafe extern "C" {
    static mut environ: *const *const libc::c_char;
}

/// The child's standard streams: descriptors the child gets as 0, 1 and 2 (each still open in
/// the parent, which closes them after the start), and whether they are a PTY's slave.
pub(super) struct ChildStdio {
    pub(super) fds: [RawFd; 3],
    pub(super) pty: bool,
}

/// Everything the child needs, made before the clone: it must not allocate. The strings are
/// kept for the pointers to them.
struct Prepared {
    program: CString,
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp_ptrs: Vec<*const libc::c_char>,
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )
    })
}

fn prepare(l: &Launch<'_>, pty: bool) -> io::Result<Prepared> {
    let (program, argv): (&[u8], Vec<&[u8]>) = match l.program {
        Program::Argv(argv) => (
            l.exe
                .map_or(argv[0].as_bytes(), |exe| exe.as_os_str().as_bytes()),
            argv.iter().map(|a| a.as_bytes()).collect(),
        ),
        Program::Shell(line) => (b"/bin/sh", vec![b"/bin/sh", b"-c", line.as_bytes()]),
        #[allow(unreachable_patterns)]
        _ => (b"/nonexistent/rexd-unknown-program-kind", vec![b"rexd"]),
    };
    // The environment as `super::command` builds it: the daemon's, then TMPDIR, the client's
    // variables, the tree's marker (last, so a client cannot set another exec's) and a PTY's
    // TERM unless the client gave one.
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let mut set = |key: &str, value: &std::ffi::OsStr| {
        env.retain(|(k, _)| k != key);
        env.push((key.into(), value.to_owned()));
    };
    if let Some(tmp) = l.confine.and_then(|c| c.tmpdir()) {
        set("TMPDIR", tmp.as_os_str());
    }
    if let Some(vars) = l.env {
        for (k, v) in vars {
            set(k, v.as_ref());
        }
    }
    if let Some((k, v)) = &l.join.marker {
        set(k, v.as_ref());
    }
    if pty && l.env.is_none_or(|e| !e.contains_key("TERM")) {
        set("TERM", "xterm-256color".as_ref());
    }
    let argv = argv
        .into_iter()
        .map(c_string)
        .collect::<io::Result<Vec<_>>>()?;
    let envp = env
        .iter()
        .map(|(k, v)| c_string(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect::<io::Result<Vec<_>>>()?;
    let with_null = |v: &[CString]| {
        v.iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    Ok(Prepared {
        program: c_string(program)?,
        argv_ptrs: with_null(&argv),
        envp_ptrs: with_null(&envp),
        _argv: argv,
        _envp: envp,
    })
}

/// Starts the child in the cgroup whose directory is `cgroup`; its pid and pidfd. `Ok(None)`
/// where the kernel cannot (before 5.7, or `clone3` filtered out): the caller starts it the
/// other way.
pub(super) fn spawn(
    l: &Launch<'_>,
    cgroup: RawFd,
    stdio: &ChildStdio,
) -> io::Result<Option<(libc::pid_t, OwnedFd)>> {
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let prepared = prepare(l, stdio.pty)?;
    // Streams numbered 0 to 2 would be overwritten by the first dup2s: move them up first.
    let mut lifted = Vec::new();
    let mut fds = stdio.fds;
    for fd in &mut fds {
        if *fd <= 2 {
            // SAFETY: fcntl on a descriptor the caller holds open.
            let copy = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3) };
            if copy < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: a fresh descriptor, ours.
            lifted.push(unsafe { OwnedFd::from_raw_fd(copy) });
            *fd = copy;
        }
    }
    let (report_read, report_write) = super::pipe()?;
    let cwd = l.cwd.as_raw_fd();
    let ruleset = l.confine.map(|c| c.ruleset());
    let mut pidfd: RawFd = -1;
    let args = CloneArgs {
        flags: CLONE_PIDFD | CLONE_INTO_CGROUP,
        pidfd: (&raw mut pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup as u64,
        ..CloneArgs::default()
    };
    // SAFETY: `args` is a valid clone_args of its size. Without CLONE_VM the child has its own
    // copy of memory, like fork's; it runs only `child`, which does not return.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &raw const args,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if pid == 0 {
        // SAFETY: in the child; every pointer in `prepared` is valid in its copy of memory.
        unsafe {
            child(
                &prepared,
                fds,
                stdio.pty,
                cwd,
                ruleset,
                report_write.as_raw_fd(),
            )
        }
    }
    if pid < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOSYS | libc::EINVAL | libc::EPERM) => {
                UNSUPPORTED.store(true, Ordering::Relaxed);
                Ok(None)
            }
            _ => Err(e),
        };
    }
    let pid = pid as libc::pid_t;
    // SAFETY: CLONE_PIDFD filled in a fresh descriptor for the child.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    drop(report_write);
    drop(lifted);
    let mut errno = [0u8; 4];
    let mut got = 0;
    while got < errno.len() {
        // SAFETY: reads into the rest of `errno`.
        let n = unsafe {
            libc::read(
                report_read.as_raw_fd(),
                errno[got..].as_mut_ptr().cast(),
                errno.len() - got,
            )
        };
        match n {
            0 => break,
            n if n > 0 => got += n as usize,
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return Err(io::Error::last_os_error()),
        }
    }
    if got == 0 {
        // The pipe closed on exec: the program runs.
        return Ok(Some((pid, pidfd)));
    }
    // It failed before or at exec and has exited: reap it, and say why as std would.
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)))
}

/// The child's side: system calls only, then exec; on any failure its errno goes to `report`
/// and the child exits 127.
///
/// # Safety
/// Called once, in the child of a `clone3` without `CLONE_VM`.
unsafe fn child(
    p: &Prepared,
    fds: [RawFd; 3],
    pty: bool,
    cwd: RawFd,
    ruleset: Option<RawFd>,
    report: RawFd,
) -> ! {
    // SAFETY: async-signal-safe system calls on descriptors and pointers valid in this copy
    // of the parent's memory; `environ` is this process's alone now.
    unsafe {
        let fail = || -> ! {
            let errno = io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            libc::write(report, errno.to_ne_bytes().as_ptr().cast(), 4);
            libc::_exit(127)
        };
        for (target, fd) in fds.into_iter().enumerate() {
            if libc::dup2(fd, target as RawFd) < 0 {
                fail();
            }
        }
        if pty {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                fail();
            }
        } else if libc::setpgid(0, 0) < 0 {
            fail();
        }
        // As std: SIGPIPE back to its default (Rust ignores it) and no signal blocked.
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        if libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0
            || libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR
        {
            fail();
        }
        if libc::fchdir(cwd) < 0 {
            fail();
        }
        if let Some(ruleset) = ruleset
            && crate::confine::restrict_child(ruleset).is_err()
        {
            fail();
        }
        environ = p.envp_ptrs.as_ptr();
        libc::execvp(p.program.as_ptr(), p.argv_ptrs.as_ptr());
        fail()
    }
}
