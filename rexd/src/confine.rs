//! Confinement (`security.confine`): every process rexd starts (`exec.start`, `pty.open`, through
//! every transport) is confined with Linux Landlock to the daemon's roots (read-write) and what
//! a command needs of the system (read-only and execute), so `cat /etc/hostname` is refused to
//! a command as `fs.read` refuses it to a client.
//!
//! What a confined command may do:
//! - **read-write** (every file-system right Landlock knows, up to ABI 8): beneath each root,
//!   beneath a private temporary directory that its `TMPDIR` names (made once per daemon
//!   process, `rexd-PID.XXXXXX` in the daemon's own temporary directory, removed when the daemon
//!   ends), beneath `security.confine_write`, and the devices [`DEVICES`];
//! - **read-only and execute**: [`SYSTEM_READ`] (the system's programs and libraries, `/proc`,
//!   `/sys`, and named files of `/etc`: the loader's cache, users and groups, name service,
//!   certificates, time zone, locale, shell start-up files, git's and ssh's client
//!   configuration, never `/etc` as a whole), the directories of the daemon's `PATH`, the
//!   start-up files of the daemon's home directory ([`HOME_READ`]), and
//!   `security.confine_read`.
//!
//! What it does not confine: the network, connections to Unix sockets (a right of ABI 9, left
//! alone like the network), signals and abstract sockets (ABI 6 scopes, not used: one exec may
//! stop what another started), and reading a file's metadata (`stat`, `readlink`). Programs
//! run with `no_new_privs`, which Landlock needs: a set-user-ID program (`sudo`, `su`,
//! `passwd`) runs without its privileges.
//!
//! The ruleset is built in the daemon, once per [`crate::service::Settings`] (and again before
//! a start when a file it grants was replaced since, as `/etc/passwd` and `/etc/resolv.conf`
//! are by renaming a new file over them: a rule holds the file it was made with). A child
//! only enforces it, between fork and exec, with [`restrict_child`]: `prctl(PR_SET_NO_NEW_PRIVS)`
//! and `landlock_restrict_self(2)` on the ruleset's descriptor, two system calls that allocate
//! nothing. (The `landlock` crate's `RulesetCreated::restrict_self` consumes the ruleset and
//! keeps compatibility state, so it is not what the child calls.)

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr,
};
use serde::Deserialize;

use crate::config::Config;
use crate::roots::Roots;

/// `security.confine`: whether the processes rexd starts are confined with Landlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfineMode {
    /// Confined where the kernel has Landlock; where it has none, rexd says so (a warning at
    /// start and in `--check-config`) and runs commands unconfined.
    #[default]
    Auto,
    /// Confined, or rexd does not start.
    Required,
    /// Not confined.
    Off,
}

/// The file-system rights handled (denied unless a rule grants them): all of ABI 8's. ABI 9's
/// `RESOLVE_UNIX` (connecting to a Unix socket by path) is left out, as the network is.
/// Older kernels get what they know (`CompatLevel::BestEffort`).
const HANDLED: ABI = ABI::V8;

/// Read-only and execute by default, where they exist (a trailing `*` matches names that start
/// with what is before it). The whole of `/etc` is not among them: only what programs commonly
/// need to start, name users and hosts, check certificates, tell the time, and run shells, git
/// and ssh.
pub const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/proc",
    "/sys",
    // The dynamic loader.
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    // Users, groups, name service, hosts (the network is not confined, so its lookups work).
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/networks",
    // Certificates.
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/crypto-policies",
    // Time, locale, the system's name and kind.
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/alternatives",
    "/etc/mtab",
    // Shells and terminals.
    "/etc/environment",
    "/etc/shells",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/bashrc",
    "/etc/bash_completion",
    "/etc/bash_completion.d",
    "/etc/inputrc",
    "/etc/zsh",
    "/etc/zshenv",
    "/etc/zshrc",
    "/etc/terminfo",
    "/etc/vim",
    "/etc/vimrc",
    "/etc/nanorc",
    // Tools' system-wide configuration.
    "/etc/gitconfig",
    "/etc/ssh/ssh_config",
    "/etc/ssh/ssh_config.d",
    "/etc/ssh/ssh_known_hosts",
    "/etc/magic",
    "/etc/mime.types",
    "/etc/manpath.config",
    "/etc/python3*",
    "/etc/pip.conf",
    "/etc/npmrc",
    "/etc/wgetrc",
];

/// Devices a command may open for reading and writing (`/dev/tty`: its own terminal).
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// Files and directories of the daemon's home directory (`$HOME`) read-only by default: shells'
/// start-up files, git's, ssh's and editors' configuration, and the toolchains installed per
/// user (rustup and cargo's binaries and downloaded crates, pyenv, nvm, `~/.local`'s programs
/// and libraries, Go's module cache), so that `cargo build` or a pyenv `python3` runs as it
/// does in a shell. Not keys, not credentials (`~/.cargo/credentials.toml` is left out),
/// not caches that are written.
pub const HOME_READ: &[&str] = &[
    ".profile",
    ".bash_profile",
    ".bash_login",
    ".bashrc",
    ".bash_logout",
    ".bash_aliases",
    ".inputrc",
    ".zshenv",
    ".zprofile",
    ".zshrc",
    ".zlogin",
    ".zlogout",
    ".gitconfig",
    ".config/git",
    ".terminfo",
    ".vimrc",
    ".nanorc",
    ".selected_editor",
    ".ssh/config",
    ".ssh/known_hosts",
    ".rustup",
    ".cargo/bin",
    ".cargo/config.toml",
    ".cargo/registry",
    ".cargo/git",
    ".pyenv",
    ".nvm",
    ".local/bin",
    ".local/lib",
    "go/bin",
    "go/pkg/mod",
    ".sdkman/candidates",
];

/// What a child needs to confine itself: the ruleset's descriptor and the private `TMPDIR`.
#[derive(Debug, Clone)]
pub struct Confined {
    ruleset: Arc<OwnedFd>,
    tmp: Option<Arc<PrivateTmp>>,
}

impl Confined {
    /// The Landlock ruleset to enforce ([`restrict_child`]).
    pub fn ruleset(&self) -> RawFd {
        self.ruleset.as_raw_fd()
    }

    /// The private temporary directory (the child's `TMPDIR`); `None` where it could not be
    /// made (the daemon's temporary directory missing or read-only: rexd warned).
    pub fn tmpdir(&self) -> Option<&Path> {
        self.tmp.as_deref().map(|t| t.path.as_path())
    }
}

/// In a child between fork and exec: `no_new_privs`, then enforces `ruleset` on itself and
/// what it runs. Async-signal-safe: two system calls, no allocation.
pub fn restrict_child(ruleset: RawFd) -> io::Result<()> {
    // SAFETY: prctl and syscall with integer arguments.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The Landlock ABI of the running kernel (`ENOSYS`: not built in; `EOPNOTSUPP`: built in but
/// not enabled at boot).
pub fn kernel_abi() -> io::Result<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: a NULL attribute with size 0 and the VERSION flag only asks for the ABI.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v as i32)
}

/// The daemon's private temporary directory, shared by every [`Confinement`] of the process
/// while one lives (a reload's new settings take the same), removed with the last.
#[derive(Debug)]
struct PrivateTmp {
    path: PathBuf,
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

static PRIVATE_TMP: Mutex<Weak<PrivateTmp>> = Mutex::new(Weak::new());

fn private_tmp() -> io::Result<Arc<PrivateTmp>> {
    let mut slot = PRIVATE_TMP.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(tmp) = slot.upgrade() {
        return Ok(tmp);
    }
    remove_stale_tmps(&std::env::temp_dir());
    let template = std::env::temp_dir().join(format!("rexd-{}.XXXXXX", std::process::id()));
    let mut bytes = std::ffi::CString::new(template.into_os_string().into_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "TMPDIR has a NUL"))?
        .into_bytes_with_nul();
    // SAFETY: a writable NUL-terminated template ending in XXXXXX.
    if unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) }.is_null() {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "confinement: the private TMPDIR in {}: {e}",
                std::env::temp_dir().display()
            ),
        ));
    }
    bytes.pop();
    let path = PathBuf::from(std::ffi::OsString::from(
        String::from_utf8_lossy(&bytes).into_owned(),
    ));
    let tmp = Arc::new(PrivateTmp { path });
    *slot = Arc::downgrade(&tmp);
    Ok(tmp)
}

/// Removes the private temporary directories of daemons that died without cleaning up
/// (killed by a signal): `rexd-PID.XXXXXX` of this user whose PID is gone. Left alone: another
/// user's, a live daemon's, anything else.
fn remove_stale_tmps(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("rexd-"))
            .and_then(|n| n.split_once('.'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        // Not followed if it is a link: symlink_metadata, and remove_dir_all does not either.
        let owned_dir = entry
            .path()
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == me);
        if owned_dir && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A path a rule is asked for.
#[derive(Debug, Clone)]
struct Wanted {
    path: PathBuf,
    write: bool,
    kind: Kind,
}

/// Where a [`Wanted`] path comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The config's (a missing one is worth a warning; built-in ones are skipped quietly).
    Configured,
    /// [`DEVICES`].
    Device,
    /// [`SYSTEM_READ`].
    System,
    /// A directory of `PATH`.
    PathDir,
    /// [`HOME_READ`].
    Home,
}

/// A rule made: the file it holds, to notice when the path names another.
#[derive(Debug)]
struct Granted {
    path: PathBuf,
    id: (u64, u64),
}

#[derive(Debug)]
struct Active {
    confined: Confined,
    /// The same with the roots and `confine_write` read-only, for read-only clients
    /// (`[[policy.clients]] read_only`).
    read_only: Confined,
    roots: Roots,
    wanted: Vec<Wanted>,
    granted: Vec<Granted>,
}

/// How this daemon's commands are confined: the ruleset made from the settings, and what to
/// say about it.
#[derive(Debug)]
pub struct Confinement {
    mode: ConfineMode,
    active: Option<Active>,
    summary: String,
    warnings: Vec<String>,
}

impl Confinement {
    /// Not confined (`security.confine = "off"`).
    pub fn off() -> Confinement {
        Confinement {
            mode: ConfineMode::Off,
            active: None,
            summary: "confinement: off (security.confine = \"off\"): commands may read and write \
                      whatever this user may"
                .into(),
            warnings: Vec::new(),
        }
    }

    /// The defaults (`auto`, no extra paths) for `roots`.
    pub fn for_roots(roots: &Roots) -> io::Result<Confinement> {
        Confinement::new(ConfineMode::Auto, roots, &[], &[])
    }

    /// From a parsed config, for its roots (opened).
    pub fn from_config(config: &Config, roots: &Roots) -> io::Result<Confinement> {
        let s = &config.security;
        let mut c = Confinement::new(s.confine, roots, &s.confine_read, &s.confine_write)?;
        if c.is_active() && config.policy.as_ref().is_some_and(|p| !p.sudo.is_empty()) {
            c.warnings.push(
                "[[policy.sudo]] is set, but confined commands run with no_new_privs (Landlock \
                 needs it), so sudo cannot raise privileges and those commands fail; set \
                 security.confine = \"off\" to use them"
                    .into(),
            );
        }
        Ok(c)
    }

    /// Builds the ruleset: `roots` and `write` read-write, `read` read-only, with the
    /// defaults. `mode` `auto` without Landlock is [`Confinement`] without a ruleset (said in
    /// [`Confinement::summary`]); `required` without it is an error.
    pub fn new(
        mode: ConfineMode,
        roots: &Roots,
        read: &[PathBuf],
        write: &[PathBuf],
    ) -> io::Result<Confinement> {
        if mode == ConfineMode::Off {
            return Ok(Confinement::off());
        }
        let abi = match kernel_abi() {
            Ok(abi) => abi,
            Err(e) => {
                let why = match e.raw_os_error() {
                    Some(libc::EOPNOTSUPP) => {
                        "this kernel has no Landlock (built in, but not enabled at boot: add \
                         landlock to its lsm= parameter)"
                    }
                    _ => "this kernel has no Landlock",
                };
                if mode == ConfineMode::Required {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        format!(
                            "security.confine = \"required\", but {why}; rexd does not start \
                             (Landlock came with Linux 5.13)"
                        ),
                    ));
                }
                return Ok(Confinement {
                    mode,
                    active: None,
                    summary: format!(
                        "confinement: off: {why}; commands may read and write whatever this \
                         user may (security.confine = \"auto\")"
                    ),
                    warnings: Vec::new(),
                });
            }
        };
        let home = home();
        let mut warnings = Vec::new();
        let mut wanted = Vec::new();
        for (list, write) in [(write, true), (read, false)] {
            for p in list {
                match expand(p, home.as_deref()) {
                    Some(path) => wanted.push(Wanted {
                        path,
                        write,
                        kind: Kind::Configured,
                    }),
                    None => warnings.push(format!(
                        "security.confine_{}: {} names the home directory, and $HOME is not set; \
                         left out",
                        if write { "write" } else { "read" },
                        p.display()
                    )),
                }
            }
        }
        for d in DEVICES {
            wanted.push(Wanted {
                path: d.into(),
                write: true,
                kind: Kind::Device,
            });
        }
        for p in SYSTEM_READ {
            for path in glob_prefix(p) {
                wanted.push(Wanted {
                    path,
                    write: false,
                    kind: Kind::System,
                });
            }
        }
        // rexd itself (a command may run `rexd --version`, or a nested `rexd --stdio`).
        // Without /proc (an empty chroot), the path it was started by.
        let exe = std::env::current_exe()
            .or_else(|_| std::fs::canonicalize(std::env::args_os().next().unwrap_or_default()));
        if let Ok(exe) = exe {
            wanted.push(Wanted {
                path: exe,
                write: false,
                kind: Kind::System,
            });
        }
        let path_dirs = path_dirs(home.as_deref());
        for d in &path_dirs {
            wanted.push(Wanted {
                path: d.clone(),
                write: false,
                kind: Kind::PathDir,
            });
        }
        if let Some(home) = &home {
            for f in HOME_READ {
                wanted.push(Wanted {
                    path: home.join(f),
                    write: false,
                    kind: Kind::Home,
                });
            }
        }
        let tmp = match private_tmp() {
            Ok(tmp) => Some(tmp),
            Err(e) => {
                warnings.push(format!(
                    "{e}: commands get no TMPDIR of their own, and may write only under the roots"
                ));
                None
            }
        };
        let (ruleset, granted, missing) = build(roots, tmp.as_deref(), &wanted, false)?;
        let (read_only, ..) = build(roots, tmp.as_deref(), &wanted, true)?;
        for (path, e) in missing {
            warnings.push(format!(
                "security.confine_read/confine_write: {}: {e}; left out",
                path.display()
            ));
        }
        let tmp_path = tmp.as_deref().map(|t| t.path.as_path());
        let summary = summary(abi, roots, tmp_path, &wanted, &granted, home.as_deref());
        Ok(Confinement {
            mode,
            active: Some(Active {
                confined: Confined {
                    ruleset: Arc::new(ruleset),
                    tmp: tmp.clone(),
                },
                read_only: Confined {
                    ruleset: Arc::new(read_only),
                    tmp,
                },
                roots: roots.clone(),
                wanted,
                granted,
            }),
            summary,
            warnings,
        })
    }

    /// Whether commands are confined.
    pub fn is_active(&self) -> bool {
        self.active.is_some()
    }

    /// The mode asked for.
    pub fn mode(&self) -> ConfineMode {
        self.mode
    }

    /// One line for the log: `confinement: Landlock ABI 7: read-write under …; read-only …`,
    /// or why commands are not confined.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// What is worth a warning (a configured path that does not exist, sudo rules that
    /// cannot work).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Logs [`Confinement::summary`] (a warning where `auto` found no Landlock, else info) and
    /// the warnings; returns how many warnings it logged.
    pub fn log(&self) -> usize {
        let mut n = self.warnings.len();
        if self.mode == ConfineMode::Auto && self.active.is_none() {
            crate::log::warn(&self.summary);
            n += 1;
        } else {
            crate::log::info(&self.summary);
        }
        for w in &self.warnings {
            crate::log::warn(w);
        }
        n
    }

    /// What the next child needs to confine itself, `None` when unconfined; `read_only`: the
    /// ruleset with the roots read-only. The rulesets are made again first when a file they
    /// grant was replaced since they were made.
    pub fn for_spawn(&mut self, read_only: bool) -> Option<Confined> {
        let a = self.active.as_mut()?;
        let stale = a.granted.iter().any(|g| {
            std::fs::metadata(&g.path)
                .map(|m| (m.dev(), m.ino()) != g.id)
                .unwrap_or(true)
        });
        if stale {
            let tmp = a.confined.tmp.as_deref();
            let both = build(&a.roots, tmp, &a.wanted, false)
                .and_then(|rw| Ok((rw, build(&a.roots, tmp, &a.wanted, true)?)));
            match both {
                Ok(((ruleset, granted, _), (read_only, ..))) => {
                    a.confined.ruleset = Arc::new(ruleset);
                    a.read_only.ruleset = Arc::new(read_only);
                    a.granted = granted;
                }
                Err(e) => crate::log::warn(&format!(
                    "confinement: the ruleset could not be made again ({e}); the old one stays"
                )),
            }
        }
        Some(if read_only { &a.read_only } else { &a.confined }.clone())
    }
}

type Built = (OwnedFd, Vec<Granted>, Vec<(PathBuf, io::Error)>);

/// Makes the ruleset; returns it, the rules made from paths, and the configured paths that
/// could not be opened. `read_only`: the roots and `confine_write` are read-only too (the
/// private `TMPDIR` and the devices stay writable: programs need them to run at all).
fn build(
    roots: &Roots,
    tmp: Option<&PrivateTmp>,
    wanted: &[Wanted],
    read_only: bool,
) -> io::Result<Built> {
    let ll = |e: landlock::RulesetError| io::Error::other(format!("Landlock: {e}"));
    let rw: BitFlags<AccessFs> = AccessFs::from_all(HANDLED);
    let ro: BitFlags<AccessFs> = AccessFs::from_read(HANDLED);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(rw)
        .map_err(ll)?
        .create()
        .map_err(ll)?;
    let roots_access = if read_only { ro } else { rw };
    for root in roots.iter() {
        ruleset = ruleset
            .add_rule(PathBeneath::new(root.fd(), roots_access))
            .map_err(ll)?;
    }
    if let Some(tmp) = tmp {
        let fd = open_path(&tmp.path)?;
        ruleset = ruleset.add_rule(PathBeneath::new(fd, rw)).map_err(ll)?;
    }
    let mut granted = Vec::new();
    let mut missing = Vec::new();
    for w in wanted {
        // An O_PATH descriptor answers fstat.
        let opened = open_path(&w.path)
            .map(std::fs::File::from)
            .and_then(|f| Ok((f.metadata()?, f)));
        let (meta, fd) = match opened {
            Ok(x) => x,
            Err(e) => {
                if w.kind == Kind::Configured {
                    missing.push((w.path.clone(), e));
                }
                continue;
            }
        };
        let writable = w.write && !(read_only && w.kind == Kind::Configured);
        let access = if writable { rw } else { ro };
        ruleset = ruleset.add_rule(PathBeneath::new(fd, access)).map_err(ll)?;
        granted.push(Granted {
            path: w.path.clone(),
            id: (meta.dev(), meta.ino()),
        });
    }
    let fd: Option<OwnedFd> = ruleset.into();
    let fd = fd.ok_or_else(|| io::Error::other("Landlock: the kernel made no ruleset"))?;
    Ok((fd, granted, missing))
}

/// `open(path, O_PATH | O_CLOEXEC)`, symlinks followed (std's `OpenOptions` masks `O_PATH` out
/// on musl, where it is part of `O_ACCMODE`).
fn open_path(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL"))?;
    loop {
        // SAFETY: a NUL-terminated path; these flags take no mode.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if fd >= 0 {
            // SAFETY: just opened, owned by nobody else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The daemon's home directory (`$HOME`), absolute, not `/`.
fn home() -> Option<PathBuf> {
    let h = PathBuf::from(std::env::var_os("HOME")?);
    (h.is_absolute() && h != Path::new("/")).then_some(h)
}

/// `~/x` under the home directory; other paths as they are.
fn expand(p: &Path, home: Option<&Path>) -> Option<PathBuf> {
    match p.strip_prefix("~") {
        Ok(rest) => Some(home?.join(rest)),
        Err(_) => Some(p.to_owned()),
    }
}

/// `/etc/python3*`: the entries of `/etc` whose names start with `python3`; other paths as
/// they are.
fn glob_prefix(p: &str) -> Vec<PathBuf> {
    let Some(prefix) = p.strip_suffix('*') else {
        return vec![p.into()];
    };
    let path = Path::new(prefix);
    let (Some(dir), Some(start)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let start = start.as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().as_encoded_bytes().starts_with(start))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// The absolute directories of the daemon's `PATH`, but `/` and the home directory itself.
fn path_dirs(home: Option<&Path>) -> Vec<PathBuf> {
    let Some(path) = std::env::var_os("PATH") else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for d in std::env::split_paths(&path) {
        if d.is_absolute() && d != Path::new("/") && Some(d.as_path()) != home && !out.contains(&d)
        {
            out.push(d);
        }
    }
    out
}

fn summary(
    abi: i32,
    roots: &Roots,
    tmp: Option<&Path>,
    wanted: &[Wanted],
    granted: &[Granted],
    home: Option<&Path>,
) -> String {
    // A set: comparing paths component by component, each wanted against each granted, was
    // 6% of a `rexd --stdio` start.
    let granted: std::collections::HashSet<&Path> =
        granted.iter().map(|g| g.path.as_path()).collect();
    let made = |w: &&Wanted| granted.contains(w.path.as_path());
    let of = |kind: Kind, write: bool| {
        wanted
            .iter()
            .filter(move |w| w.kind == kind && w.write == write)
            .filter(made)
    };
    let show = |w: &Wanted| w.path.display().to_string();
    let mut rw: Vec<String> = roots
        .iter()
        .map(|r| r.path().display().to_string())
        .collect();
    rw.extend(of(Kind::Configured, true).map(show));
    if let Some(tmp) = tmp {
        rw.push(format!("TMPDIR {}", tmp.display()));
    }
    let mut ro: Vec<String> = of(Kind::Configured, false).map(show).collect();
    let system: Vec<&Wanted> = of(Kind::System, false).collect();
    let (etc, others): (Vec<&Wanted>, Vec<&Wanted>) =
        system.iter().partition(|w| w.path.starts_with("/etc"));
    // Each once, and not what is beneath one already named (rexd's own file).
    let shown: Vec<&&Wanted> = others
        .iter()
        .enumerate()
        .filter(|(i, w)| !others[..*i].iter().any(|o| w.path.starts_with(&o.path)))
        .map(|(_, w)| w)
        .collect();
    ro.extend(shown.iter().map(|w| show(w)));
    if !etc.is_empty() {
        ro.push(format!("{} files and directories of /etc", etc.len()));
    }
    let path: Vec<String> = of(Kind::PathDir, false)
        .filter(|d| !others.iter().any(|s| d.path.starts_with(&s.path)))
        .map(show)
        .collect();
    if !path.is_empty() {
        ro.push(format!("PATH's {}", path.join(", ")));
    }
    let n = of(Kind::Home, false).count();
    if let (Some(h), true) = (home, n > 0) {
        ro.push(format!(
            "{n} start-up files and toolchains of {}",
            h.display()
        ));
    }
    let dev: Vec<String> = of(Kind::Device, true).map(show).collect();
    let none = |v: Vec<String>| match v.is_empty() {
        true => "none".to_owned(),
        false => v.join(", "),
    };
    format!(
        "confinement: Landlock ABI {abi}: read-write under {}; read-only {}; devices {}",
        rw.join(", "),
        none(ro),
        none(dev)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_expand_under_home_only_with_a_tilde() {
        let home = Path::new("/home/u");
        assert_eq!(
            expand(Path::new("~/.cargo"), Some(home)),
            Some(PathBuf::from("/home/u/.cargo"))
        );
        assert_eq!(expand(Path::new("~/.cargo"), None), None);
        assert_eq!(
            expand(Path::new("/srv/x"), None),
            Some(PathBuf::from("/srv/x"))
        );
    }

    #[test]
    fn a_trailing_star_matches_names_that_start_with_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["python3", "python3.11", "perl"] {
            std::fs::create_dir(dir.path().join(n)).unwrap();
        }
        let pattern = format!("{}/python3*", dir.path().display());
        assert_eq!(
            glob_prefix(&pattern),
            [dir.path().join("python3"), dir.path().join("python3.11")]
        );
        assert_eq!(glob_prefix("/usr"), [PathBuf::from("/usr")]);
    }

    /// A daemon killed by a signal leaves its private TMPDIR; the next one removes it, and
    /// nothing of a live daemon's or of anything else.
    #[test]
    fn a_dead_daemons_private_tmp_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        // A pid above the kernel's pid_max (4194304 at most) belongs to no process.
        let dead = dir.path().join("rexd-9999999.AbCdEf");
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join("out.txt"), "left behind").unwrap();
        let live = dir
            .path()
            .join(format!("rexd-{}.XyZabc", std::process::id()));
        std::fs::create_dir(&live).unwrap();
        let other = dir.path().join("rexd-notapid");
        std::fs::create_dir(&other).unwrap();
        let target = dir.path().join("kept");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("f"), "x").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("rexd-9999998.link")).unwrap();
        remove_stale_tmps(dir.path());
        assert!(!dead.exists());
        assert!(live.is_dir());
        assert!(other.is_dir());
        assert!(target.join("f").is_file(), "a link is not followed");
    }

    #[test]
    fn the_private_tmp_is_shared_while_one_lives() {
        let a = private_tmp().unwrap();
        let b = private_tmp().unwrap();
        assert_eq!(a.path, b.path);
        assert!(a.path.is_dir());
        drop(a);
        assert!(b.path.is_dir());
    }

    /// Runs `cat path` confined by `c`; whether it could read it.
    fn cat_confined(c: &Confined, path: &Path) -> bool {
        use std::os::unix::process::CommandExt;
        let fd = c.ruleset();
        let mut cmd = std::process::Command::new("cat");
        cmd.arg(path).stdout(std::process::Stdio::null());
        cmd.stderr(std::process::Stdio::null());
        // SAFETY: two system calls, no allocation.
        unsafe {
            cmd.pre_exec(move || restrict_child(fd));
        }
        cmd.status().unwrap().success()
    }

    /// A rule holds the file it was made with: when a granted file is replaced by renaming
    /// another over it (as `/etc/passwd` is), the next start gets a ruleset made again, which
    /// grants the new file.
    #[test]
    fn a_replaced_file_is_granted_again() {
        if kernel_abi().is_err() {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let (file, other) = (outside.path().join("f"), outside.path().join("g"));
        std::fs::write(&file, "one").unwrap();
        std::fs::write(&other, "other").unwrap();
        let roots = Roots::open(&[root.path().to_owned()]).unwrap();
        let mut c = Confinement::new(
            ConfineMode::Required,
            &roots,
            std::slice::from_ref(&file),
            &[],
        )
        .unwrap();
        assert!(
            c.summary().contains(&file.display().to_string()),
            "{}",
            c.summary()
        );
        let first = c.for_spawn(false).unwrap();
        assert!(cat_confined(&first, &file));
        assert!(!cat_confined(&first, &other));
        assert!(Arc::ptr_eq(
            &first.ruleset,
            &c.for_spawn(false).unwrap().ruleset
        ));
        let new = outside.path().join("f.new");
        std::fs::write(&new, "two").unwrap();
        std::fs::rename(&new, &file).unwrap();
        assert!(
            !cat_confined(&first, &file),
            "the old rule holds the old file"
        );
        let again = c.for_spawn(false).unwrap();
        assert!(!Arc::ptr_eq(&first.ruleset, &again.ruleset));
        assert!(cat_confined(&again, &file));
        assert!(!cat_confined(&again, &other));
    }
}
