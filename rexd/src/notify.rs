//! systemd's readiness protocol (`sd_notify(3)`): `READY=1`, `RELOADING=1`, `STOPPING=1` and
//! `STATUS=...` as datagrams to the socket in `$NOTIFY_SOCKET`, for the `Type=notify` units
//! the .deb ships (`rexd/debian/rexd.service`, `rexd/debian/rexd-listen.service`). Without
//! `$NOTIFY_SOCKET` (not under systemd, or a unit of another type) every call does nothing.
//!
//! [`take_socket_from_env`] takes the variable out of the environment when the daemon starts,
//! so that the commands rexd runs for its clients do not inherit it: a client's command has no
//! business talking to the service manager (systemd would refuse it under `NotifyAccess=main`
//! anyway, but it would log every try), and a nested sd_notify-speaking program would be
//! confused by it. That is why this is not the `sd-notify` crate, whose `notify` reads the
//! variable from the environment at every call (so it has to stay there for the daemon's whole
//! life); the protocol is one datagram of `KEY=VALUE` lines, written here.
//!
//! Failures to send are logged once (at `warn`) and otherwise ignored: readiness is best effort,
//! and rexd serves the same either way.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixDatagram;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// The variable systemd sets for a `Type=notify` service.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Where to send, once known: from [`take_socket_from_env`], else read (and left) in the
/// environment at the first message.
static SOCKET: OnceLock<Option<OsString>> = OnceLock::new();

/// Whether a failure to send was logged already.
static WARNED: AtomicBool = AtomicBool::new(false);

/// Takes `$NOTIFY_SOCKET` out of the environment and keeps it for the messages to come, so that
/// no child inherits it. `rexd`'s `main` calls it first thing.
///
/// # Safety
///
/// It removes an environment variable ([`std::env::remove_var`]): call it while the process
/// has one thread, before anything reads the environment on another.
pub unsafe fn take_socket_from_env() {
    let socket = std::env::var_os(NOTIFY_SOCKET);
    if socket.is_some() {
        // SAFETY: the caller promises there is no other thread.
        unsafe { std::env::remove_var(NOTIFY_SOCKET) };
    }
    let _ = SOCKET.set(socket);
}

fn socket() -> Option<&'static OsStr> {
    SOCKET
        .get_or_init(|| std::env::var_os(NOTIFY_SOCKET))
        .as_deref()
}

/// `READY=1`: the daemon serves (after startup, or after a reload it announced with
/// [`reloading`]).
pub fn ready() {
    send("READY=1\n");
}

/// `READY=1` with a `STATUS=` line (what `systemctl status` shows).
pub fn ready_status(status: &str) {
    send(&format!("READY=1\n{}", status_line(status)));
}

/// `RELOADING=1` with `MONOTONIC_USEC=` (the time of the request, which systemd 253's
/// `Type=notify-reload` needs; older systemd and `ExecReload=` units take it as well). Send
/// [`ready`] once the reload is done, whether it succeeded or not.
pub fn reloading() {
    let line = match monotonic_usec() {
        Some(usec) => format!("RELOADING=1\nMONOTONIC_USEC={usec}\n"),
        None => "RELOADING=1\n".to_owned(),
    };
    send(&line);
}

/// `STOPPING=1`: the daemon is ending its sessions and processes, then exits.
pub fn stopping() {
    send("STOPPING=1\n");
}

/// `STATUS=...`, a line of what the daemon is doing for `systemctl status`.
pub fn status(status: &str) {
    send(&status_line(status));
}

/// `STATUS=` and the text on one line (a line end would start another assignment).
fn status_line(status: &str) -> String {
    let one_line: String = status
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    format!("STATUS={one_line}\n")
}

fn send(message: &str) {
    let Some(socket) = socket() else {
        return;
    };
    if let Err(e) = send_to(socket, message)
        && !WARNED.swap(true, Ordering::Relaxed)
    {
        crate::log::warn(&format!(
            "cannot notify the service manager through {NOTIFY_SOCKET}={}: {e} (told once)",
            socket.to_string_lossy()
        ));
    }
}

/// Sends `message` as one datagram to `socket`: a path, or `@NAME` for a socket in the abstract
/// namespace (Linux).
pub fn send_to(socket: &OsStr, message: &str) -> io::Result<()> {
    let bytes = socket.as_bytes();
    let datagram = UnixDatagram::unbound()?;
    let sent = match bytes.first() {
        Some(b'/') => datagram.send_to(message.as_bytes(), socket)?,
        #[cfg(any(target_os = "linux", target_os = "android"))]
        Some(b'@') => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(&bytes[1..])?;
            datagram.send_to_addr(message.as_bytes(), &addr)?
        }
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "neither an absolute path nor @NAME (an abstract socket)",
            ));
        }
    };
    if sent != message.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("{sent} of {} bytes sent", message.len()),
        ));
    }
    Ok(())
}

/// `CLOCK_MONOTONIC` in microseconds, the clock systemd compares `MONOTONIC_USEC=` with.
fn monotonic_usec() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u64::try_from(ts.tv_nsec).ok()?;
    Some(secs * 1_000_000 + nanos / 1_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn received(listener: &UnixDatagram) -> String {
        listener
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = listener.recv(&mut buf).unwrap();
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn a_path_socket_gets_one_datagram() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        send_to(path.as_os_str(), "READY=1\nSTATUS=up\n").unwrap();
        assert_eq!(received(&listener), "READY=1\nSTATUS=up\n");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_abstract_socket_is_named_with_an_at_sign() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("rexd-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        send_to(OsStr::new(&format!("@{name}")), "STOPPING=1\n").unwrap();
        assert_eq!(received(&listener), "STOPPING=1\n");
    }

    #[test]
    fn a_relative_path_or_a_missing_socket_is_an_error() {
        assert!(send_to(OsStr::new("notify"), "READY=1\n").is_err());
        let dir = tempfile::tempdir().unwrap();
        assert!(send_to(dir.path().join("none").as_os_str(), "READY=1\n").is_err());
    }

    #[test]
    fn a_status_stays_on_one_line() {
        assert_eq!(status_line("a\nb\r\nc"), "STATUS=a b  c\n");
    }

    #[test]
    fn the_monotonic_clock_moves_forward() {
        let a = monotonic_usec().unwrap();
        std::thread::sleep(Duration::from_millis(2));
        assert!(monotonic_usec().unwrap() >= a + 1000);
    }
}
