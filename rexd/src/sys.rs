//! Thin, safe wrappers over the Linux calls the daemon needs and std does not offer: `openat2`
//! with `RESOLVE_BENEATH`, the `*at` family on directory descriptors, `pidfd_open`, process and
//! process-group signals, the child subreaper, PTYs.
//!
//! Every wrapper takes owned or borrowed descriptors and returns `io::Result`; `unsafe` stays in
//! this file.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

fn cstr(path: &Path) -> io::Result<CString> {
    // An empty relative path means the directory itself.
    let bytes = path.as_os_str().as_bytes();
    let bytes = if bytes.is_empty() { b"." } else { bytes };
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Opens `rel` (relative, may be empty) beneath `dir`: the kernel refuses any resolution that
/// leaves `dir` (`..`, absolute symlinks, symlinks out) with `EXDEV` and magic links
/// (`/proc/self/root`, `/proc/self/fd/N`) with `ELOOP`; a concurrent rename or symlink swap
/// cannot escape either (`openat2(2)`, Linux 5.6).
pub fn open_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let path = cstr(rel)?;
    // SAFETY: open_how is plain data; zero is a valid value for every field.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    if flags & libc::O_CREAT != 0 {
        how.mode = mode as u64;
    }
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    loop {
        // SAFETY: `how` and `path` outlive the call; the size is the struct's.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: the kernel just gave us this descriptor.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        }
        let e = io::Error::last_os_error();
        // RESOLVE_* may fail with EAGAIN when a rename raced the lookup; retrying is the fix.
        if e.raw_os_error() != Some(libc::EAGAIN) {
            return Err(e);
        }
    }
}

/// Opens `name` (one component) in `dir` without following a final symlink.
pub fn openat(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let c = cstr(Path::new(name))?;
    // SAFETY: plain syscall on a valid descriptor and C string.
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: a fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`; an empty name stats `dir` itself.
pub fn stat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<libc::stat> {
    let c = CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    let flags = if name.is_empty() {
        libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW
    } else {
        libc::AT_SYMLINK_NOFOLLOW
    };
    // SAFETY: `st` is written by the kernel before we read it.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        cvt(libc::fstatat(dir.as_raw_fd(), c.as_ptr(), &mut st, flags))?;
        Ok(st)
    }
}

/// `fstat`.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    stat_at(fd, OsStr::new(""))
}

/// `mkdirat(dir, name, 0777 & ~umask)`.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let c = cstr(Path::new(name))?;
    // SAFETY: plain syscall.
    cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o777) }).map(drop)
}

/// `renameat2(dir, from, dir, to, flags)`: `noreplace` fails with `EEXIST` rather than replace.
pub fn rename_at(dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr, noreplace: bool) -> io::Result<()> {
    let (f, t) = (cstr(Path::new(from))?, cstr(Path::new(to))?);
    let flags = if noreplace { libc::RENAME_NOREPLACE } else { 0 };
    // The system call itself, not libc's wrapper: musl, which the static release binaries link,
    // has no renameat2() before 1.2.5 (Linux has had the call since 3.15). It returns 0 or -1.
    // SAFETY: plain syscall; the two C strings outlive it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            dir.as_raw_fd(),
            f.as_ptr(),
            dir.as_raw_fd(),
            t.as_ptr(),
            flags,
        )
    };
    cvt(r as libc::c_int).map(drop)
}

/// `unlinkat(dir, name, 0)`.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let c = cstr(Path::new(name))?;
    // SAFETY: plain syscall.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) }).map(drop)
}

/// `readlinkat(dir, name)`.
pub fn readlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Vec<u8>> {
    let c = cstr(Path::new(name))?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: the buffer is as long as we say.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// The entries of the directory open at `dir` (without `.` and `..`).
pub fn read_dir(dir: BorrowedFd<'_>) -> io::Result<Vec<std::ffi::OsString>> {
    // Reopen for reading: `dir` may be an O_PATH descriptor, and fdopendir takes ownership.
    let fd = open_beneath(dir, Path::new(""), libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    // SAFETY: fdopendir takes the descriptor (closed by closedir); entries are copied out before
    // the next readdir.
    unsafe {
        let d = libc::fdopendir(fd.as_raw_fd());
        if d.is_null() {
            return Err(io::Error::last_os_error());
        }
        std::mem::forget(fd);
        let mut out = Vec::new();
        loop {
            let ent = libc::readdir(d);
            if ent.is_null() {
                break;
            }
            let name = CStr::from_ptr((*ent).d_name.as_ptr());
            let bytes = name.to_bytes();
            if bytes != b"." && bytes != b".." {
                out.push(OsStr::from_bytes(bytes).to_owned());
            }
        }
        libc::closedir(d);
        Ok(out)
    }
}

/// Reads at `offset` until `buf` is full or the file ends; returns the bytes read.
pub fn pread_full(fd: BorrowedFd<'_>, buf: &mut [u8], mut offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the slice bounds are respected.
        let n = unsafe {
            libc::pread(
                fd.as_raw_fd(),
                buf[done..].as_mut_ptr().cast(),
                buf.len() - done,
                offset as libc::off_t,
            )
        };
        match n {
            0 => break,
            n if n < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            n => {
                done += n as usize;
                offset += n as u64;
            }
        }
    }
    Ok(done)
}

/// The modification time of a stat buffer.
pub fn mtime(st: &libc::stat) -> SystemTime {
    let d = Duration::new(st.st_mtime.max(0) as u64, st.st_mtime_nsec as u32);
    SystemTime::UNIX_EPOCH + d
}

/// RFC 3339 in UTC with nanoseconds, e.g. `2026-02-25T10:00:00.123456789Z`.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_nanos(t).to_string()
}

/// `pidfd_open(pid)`: a descriptor that becomes readable when the process exits (Linux 5.3).
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Sends `signal` to every process in group `pgid`. A group that is gone is not an error.
pub fn kill_group(pgid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    if pgid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad process group",
        ));
    }
    // SAFETY: kill(2) touches no memory.
    match cvt(unsafe { libc::kill(-pgid, signal) }) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        r => r.map(drop),
    }
}

/// Sends `signal` to process `pid`. A process that is gone is not an error.
pub fn kill_pid(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    if pid <= 1 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad pid"));
    }
    // SAFETY: kill(2) touches no memory.
    match cvt(unsafe { libc::kill(pid, signal) }) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        r => r.map(drop),
    }
}

/// Makes this process the reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`): a
/// process whose parent dies is re-parented here instead of to init, so it stays findable.
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    cvt(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }).map(drop)
}

/// Undoes [`set_child_subreaper`]: orphaned descendants go to init again.
pub fn clear_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    cvt(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }).map(drop)
}

/// In a child between fork and exec: writes `bytes` to `fd` in one `write(2)`
/// (async-signal-safe; used to join a cgroup by writing `0` to its `cgroup.procs`).
pub fn write_raw(fd: RawFd, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: the slice is valid for its length.
    let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How a reaped child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitStatus {
    /// Exited with this code.
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
}

/// `waitpid(pid, WNOHANG)`: `None` while the child runs.
pub fn try_wait(pid: libc::pid_t) -> io::Result<Option<WaitStatus>> {
    let mut status = 0;
    // SAFETY: `status` is ours.
    let r = cvt(unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) })?;
    if r == 0 {
        return Ok(None);
    }
    Ok(Some(if libc::WIFEXITED(status) {
        WaitStatus::Exited(libc::WEXITSTATUS(status))
    } else {
        WaitStatus::Signaled(libc::WTERMSIG(status))
    }))
}

/// `waitpid(pid, 0)`: reaps a child that was just killed.
pub fn wait_blocking(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waitpid writes only `status`.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// A new PTY pair `(master, slave)` of `cols` × `rows`.
pub fn openpty(cols: u16, rows: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    let (mut master, mut slave) = (0, 0);
    let ws = winsize(cols, rows);
    // SAFETY: out-params are ours; no name buffer, default termios.
    cvt(unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    })?;
    // SAFETY: fresh descriptors.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    for fd in [&master, &slave] {
        // SAFETY: fcntl on our descriptors.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok((master, slave))
}

fn winsize(cols: u16, rows: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Sets a PTY's size (the foreground process group gets `SIGWINCH`).
pub fn set_winsize(master: BorrowedFd<'_>, cols: u16, rows: u16) -> io::Result<()> {
    let ws = winsize(cols, rows);
    // SAFETY: TIOCSWINSZ reads a winsize we own.
    cvt(unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &ws) }).map(drop)
}

/// In a child between fork and exec: new session, and `fd` (a PTY slave on 0) as the
/// controlling terminal.
pub fn make_controlling_terminal() -> io::Result<()> {
    // SAFETY: async-signal-safe calls only.
    unsafe {
        cvt(libc::setsid())?;
        cvt(libc::ioctl(0, libc::TIOCSCTTY, 0))?;
    }
    Ok(())
}

/// In a child between fork and exec: `fchdir(fd)`.
pub fn fchdir(fd: RawFd) -> io::Result<()> {
    // SAFETY: async-signal-safe.
    cvt(unsafe { libc::fchdir(fd) }).map(drop)
}

/// Asks for a pipe buffer of `bytes` (`F_SETPIPE_SZ`); failures (limits) are ignored.
pub fn set_pipe_size(fd: BorrowedFd<'_>, bytes: usize) {
    // SAFETY: fcntl on a valid descriptor.
    unsafe {
        libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, bytes as libc::c_int);
    }
}

/// How many bytes a pipe holds that nobody has read yet (`FIONREAD`).
pub fn pipe_bytes(fd: BorrowedFd<'_>) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which outlives the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n) })?;
    Ok(n.max(0) as usize)
}

/// Moves up to `len` bytes from the pipe `from` to `to` inside the kernel (`splice(2)`: a
/// pipe's pages are handed on, not copied through this process), without waiting on either
/// end: the bytes moved, `WouldBlock` when `to` is full.
pub fn splice(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    // SAFETY: splice on valid descriptors, no offsets (both advance as streams).
    let n = unsafe {
        libc::splice(
            from.as_raw_fd(),
            std::ptr::null_mut(),
            to.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Sets `O_NONBLOCK` on a descriptor.
pub fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on a valid descriptor.
    unsafe {
        let flags = cvt(libc::fcntl(fd.as_raw_fd(), libc::F_GETFL))?;
        cvt(libc::fcntl(
            fd.as_raw_fd(),
            libc::F_SETFL,
            flags | libc::O_NONBLOCK,
        ))?;
    }
    Ok(())
}

/// The mode bits of `path` when its group or others have any access to it (`mode & 0o077`), as
/// `ssh` refuses for a private key: a secret in such a file is not the user's alone. `None` when
/// the file is private.
pub fn open_to_others(path: &Path) -> io::Result<Option<u32>> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)?.permissions().mode();
    Ok((mode & 0o077 != 0).then_some(mode & 0o777))
}

/// `len` bytes from the kernel's random source, as lowercase hex: for secrets and ids nobody may
/// guess. getrandom(2) always exists where rexd runs (it needs Linux 5.3 for `pidfd_open`);
/// `/dev/urandom` covers a seccomp filter that refuses the call. With neither there is no safe
/// value to give, so that panics.
pub fn random_hex(len: usize) -> String {
    let mut bytes = vec![0u8; len];
    fill_random(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Fills `bytes` from the kernel's random source, as [`random_hex`] says.
pub fn fill_random(bytes: &mut [u8]) {
    let len = bytes.len();
    let mut filled = 0;
    while filled < len {
        // SAFETY: the pointer and length describe the unfilled tail of `bytes`.
        let n = unsafe { libc::getrandom(bytes[filled..].as_mut_ptr().cast(), len - filled, 0) };
        if n > 0 {
            filled += n as usize;
        } else if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            use std::io::Read;
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut bytes[filled..]))
                .unwrap_or_else(|e| {
                    panic!("no kernel randomness: getrandom(2) and /dev/urandom: {e}")
                });
            filled = len;
        }
    }
}

/// Resident set size of process `pid` in KiB (`VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The name of a signal number (`"TERM"`), or its number as text.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "HUP",
        libc::SIGINT => "INT",
        libc::SIGQUIT => "QUIT",
        libc::SIGABRT => "ABRT",
        libc::SIGKILL => "KILL",
        libc::SIGUSR1 => "USR1",
        libc::SIGUSR2 => "USR2",
        libc::SIGPIPE => "PIPE",
        libc::SIGALRM => "ALRM",
        libc::SIGTERM => "TERM",
        libc::SIGCONT => "CONT",
        libc::SIGSTOP => "STOP",
        libc::SIGTSTP => "TSTP",
        libc::SIGWINCH => "WINCH",
        libc::SIGSEGV => "SEGV",
        libc::SIGBUS => "BUS",
        libc::SIGFPE => "FPE",
        libc::SIGILL => "ILL",
        other => return other.to_string(),
    };
    name.to_owned()
}
