//! Allowlisted workspace roots and how a client's path is confined to them.
//!
//! Two layers, so that neither alone has to be perfect:
//! 1. lexical: a path is absolute or relative to the session's cwd; any `..` component is
//!    refused outright (never normalised away), and the result must lie under a root
//!    (component-wise prefix);
//! 2. kernel: the remainder is opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`
//!    from a descriptor of the root, so symlinks (absolute, `..`, swapped in concurrently) and
//!    `/proc/self/root`-style magic links cannot lead out; a violation is `EXDEV`/`ELOOP`.
//!
//! Writes never follow a symlink in the last component (see [`crate::fsops`]).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use deskwire::rexd::{ErrorCode, ErrorObject};

use crate::sys;

/// One allowed root: its canonical path and a descriptor pinning it.
#[derive(Debug)]
pub struct Root {
    path: PathBuf,
    fd: OwnedFd,
}

impl Root {
    /// The canonical absolute path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor everything under this root is opened from.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A set of roots (the daemon's, or a session's narrower set).
#[derive(Debug, Clone)]
pub struct Roots(Vec<Arc<Root>>);

/// A path confined to a root.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The root it lies under.
    pub root: Arc<Root>,
    /// Relative to the root, without `.` or `..`; empty for the root itself.
    pub rel: PathBuf,
}

impl Resolved {
    /// The absolute path as the client should see it.
    pub fn display(&self) -> PathBuf {
        if self.rel.as_os_str().is_empty() {
            self.root.path.clone()
        } else {
            self.root.path.join(&self.rel)
        }
    }

    /// Opens the path beneath its root (see the module docs). Escapes come back as
    /// `forbidden_path` errors, other failures as [`io::Error`] inside [`OpenError::Io`].
    pub fn open(&self, flags: libc::c_int) -> Result<OwnedFd, OpenError> {
        sys::open_beneath(self.root.fd(), &self.rel, flags, 0o666).map_err(OpenError::from)
    }

    /// The parent directory (opened `O_PATH`) and the last component; the root itself has none.
    pub fn open_parent(&self) -> Result<(OwnedFd, std::ffi::OsString), OpenError> {
        let name = self.rel.file_name().ok_or(OpenError::IsRoot)?.to_owned();
        let parent = self.rel.parent().unwrap_or(Path::new(""));
        let fd = sys::open_beneath(self.root.fd(), parent, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok((fd, name))
    }
}

/// Why opening beneath a root failed.
#[derive(Debug)]
pub enum OpenError {
    /// Resolution would have left the root (symlink out, magic link).
    Escape(io::Error),
    /// The operation needs a parent and the path is a root.
    IsRoot,
    /// Any other failure (not found, not a directory, permissions).
    Io(io::Error),
}

impl From<io::Error> for OpenError {
    fn from(e: io::Error) -> OpenError {
        match e.raw_os_error() {
            Some(libc::EXDEV) | Some(libc::ELOOP) => OpenError::Escape(e),
            _ => OpenError::Io(e),
        }
    }
}

impl Roots {
    /// Opens and canonicalises `paths`; each must be an existing directory. Duplicates merge.
    pub fn open(paths: &[PathBuf]) -> io::Result<Roots> {
        let mut roots: Vec<Arc<Root>> = Vec::new();
        for p in paths {
            let path = std::fs::canonicalize(p)
                .map_err(|e| io::Error::new(e.kind(), format!("root {}: {e}", p.display())))?;
            if path == Path::new("/") {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "root \"/\" would allow everything",
                ));
            }
            if roots.iter().any(|r| r.path == path) {
                continue;
            }
            let fd = std::fs::File::open(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("root {}: {e}", path.display())))?;
            if !fd.metadata()?.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("root {} is not a directory", path.display()),
                ));
            }
            roots.push(Arc::new(Root {
                path,
                fd: fd.into(),
            }));
        }
        Ok(Roots(roots))
    }

    /// The roots' paths, as strings for the wire.
    pub fn paths(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|r| r.path.to_string_lossy().into_owned())
            .collect()
    }

    /// Each root.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Root>> {
        self.0.iter()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The first root (a session's initial cwd).
    pub fn first(&self) -> Option<&Arc<Root>> {
        self.0.first()
    }

    /// Confines `path` (absolute, or relative to `cwd`, itself absolute and inside a root).
    pub fn resolve(&self, cwd: &Path, path: &str) -> Result<Resolved, ErrorObject> {
        let forbidden = || ErrorObject::forbidden_path(path, &self.paths());
        if path.is_empty() || path.contains('\0') {
            return Err(ErrorObject::of(ErrorCode::InvalidParams)
                .with_message("path must be non-empty and contain no NUL"));
        }
        let joined = cwd.join(path);
        let mut clean = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::RootDir => clean.push("/"),
                Component::Normal(n) => clean.push(n),
                Component::CurDir => {}
                // `..` is refused rather than normalised: `a/link/..` is not `a` when `link`
                // is a symlink, and there is never a need for it.
                Component::ParentDir | Component::Prefix(_) => {
                    return Err(forbidden().with_message(format!(
                        "Path is outside allowed roots: {path} has a `..`, which rexd refuses \
                         (through a symbolic link it could lead anywhere): name the path \
                         without it, absolute or from the working directory"
                    )));
                }
            }
        }
        // Outside every root: say where roots come from, as `narrow` does, since the asker
        // cannot see the daemon's command line.
        let outside = || {
            forbidden().with_message(format!(
                "Path is outside allowed roots: {path} is not under {}, the daemon's --root \
                 directories or the session's narrower workspace_roots (a daemon rex starts: \
                 --rexd-arg=--root --rexd-arg=DIR; rexd --listen: its operator's --root or \
                 [[security.allowed_roots]])",
                self.paths().join(", ")
            ))
        };
        let root = self
            .0
            .iter()
            .filter(|r| clean.starts_with(&r.path))
            .max_by_key(|r| r.path.as_os_str().len())
            .ok_or_else(outside)?;
        let rel = clean
            .strip_prefix(&root.path)
            .map_err(|_| forbidden())?
            .to_owned();
        Ok(Resolved {
            root: root.clone(),
            rel,
        })
    }

    /// A narrower set for a session: each requested path must be a directory inside these
    /// roots (else `forbidden_path`); it becomes a root of its own, opened beneath its parent
    /// root so a symlink cannot widen it.
    pub fn narrow(&self, requested: &[String]) -> Result<Roots, ErrorObject> {
        let mut out = Vec::new();
        for want in requested {
            let cwd = self.first().map(|r| r.path.clone()).unwrap_or_default();
            let resolved = self.resolve(&cwd, want)?;
            // A session narrows the daemon's roots and never widens them: say where wider
            // roots come from, since the asker (often `rex --root`) cannot see the daemon's
            // command line.
            let forbidden = || {
                ErrorObject::forbidden_path(want, &self.paths()).with_message(format!(
                    "workspace root {want} is outside the daemon's roots ({}): a session can \
                     only narrow them; start rexd with --root {want} (a daemon rex starts: \
                     --rexd-arg=--root --rexd-arg={want}; rexd --listen: its operator adds the \
                     root)",
                    self.paths().join(", ")
                ))
            };
            let fd = resolved
                .open(libc::O_PATH | libc::O_DIRECTORY)
                .map_err(|e| match e {
                    OpenError::Escape(_) => forbidden(),
                    OpenError::IsRoot => forbidden(),
                    OpenError::Io(e) => ErrorObject::of(ErrorCode::InvalidParams)
                        .with_message(format!("workspace root {want}: {e}")),
                })?;
            let path = resolved.display();
            if out.iter().any(|r: &Arc<Root>| r.path == path) {
                continue;
            }
            out.push(Arc::new(Root { path, fd }));
        }
        Ok(Roots(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_rules() {
        let dir = tempfile::tempdir().unwrap();
        let roots = Roots::open(&[dir.path().to_owned()]).unwrap();
        let root = roots.first().unwrap().path().to_owned();
        let ok = roots.resolve(&root, "a/./b").unwrap();
        assert_eq!(ok.rel, Path::new("a/b"));
        assert_eq!(ok.display(), root.join("a/b"));
        assert_eq!(roots.resolve(&root, ".").unwrap().rel, Path::new(""));
        let abs = format!("{}/x", root.display());
        assert_eq!(
            roots.resolve(Path::new("/"), &abs).unwrap().rel,
            Path::new("x")
        );
        for bad in ["..", "a/../b", "../x", "/etc/passwd", "/proc/self/root/etc"] {
            let e = roots.resolve(&root, bad).unwrap_err();
            assert_eq!(e.code_as(), Some(ErrorCode::ForbiddenPath), "{bad}");
        }
        // Outside every root, the refusal names the flag that widens them, for a daemon rex
        // starts and for one an operator runs; the data stays REXD's (path, allowed_roots).
        let e = roots.resolve(&root, "/etc/hostname").unwrap_err();
        assert!(e.message.contains("--rexd-arg=--root"), "{}", e.message);
        assert!(
            e.message.contains("rexd --listen: its operator's --root"),
            "{}",
            e.message
        );
        assert!(
            e.data
                .as_ref()
                .unwrap()
                .get()
                .contains(r#""path":"/etc/hostname""#)
        );
        // A sibling whose name extends the root's is not inside it.
        let sibling = format!("{}-evil/x", root.display());
        assert!(roots.resolve(&root, &sibling).is_err());
        assert!(Roots::open(&["/".into()]).is_err());
    }

    #[test]
    fn symlinks_out_are_refused_by_the_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink("../", dir.path().join("up")).unwrap();
        std::os::unix::fs::symlink("/proc/self/root", dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("inside"), "i").unwrap();
        std::os::unix::fs::symlink("inside", dir.path().join("ok")).unwrap();
        let roots = Roots::open(&[dir.path().to_owned()]).unwrap();
        let cwd = roots.first().unwrap().path().to_owned();
        for bad in ["out/secret", "up", "proc/etc/passwd"] {
            let r = roots.resolve(&cwd, bad).unwrap();
            assert!(
                matches!(r.open(libc::O_RDONLY), Err(OpenError::Escape(_))),
                "{bad}"
            );
        }
        assert!(
            roots
                .resolve(&cwd, "ok")
                .unwrap()
                .open(libc::O_RDONLY)
                .is_ok()
        );
    }
}
