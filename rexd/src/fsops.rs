//! `fs.read`, `fs.write`, `fs.list`, `fs.glob`, `fs.stat`, confined to a session's roots.
//!
//! Every path goes through [`Roots::resolve`] and is opened beneath its root's descriptor, so
//! nothing outside the roots is read, listed or written. Writes:
//! - never follow a symlink in the last component (refused as `forbidden_path`);
//! - are atomic by default: a temporary file in the same (pinned) directory, renamed over the
//!   target, so a reader sees the old or the new content and a directory swapped for a symlink
//!   mid-write cannot redirect the rename;
//! - honour `expected_mtime` (the file must exist with exactly that mtime) and `mode: create`
//!   (the file must not exist; checked by `RENAME_NOREPLACE`, not by a racy look first).
//!
//! Hard links: a file in a root may be another name of a file outside every root, which the
//! kernel's path checks cannot see. A write that would go into the existing file (`atomic:
//! false`, `append`) is refused (`forbidden_path`) when the file has more than one link; an
//! atomic write replaces the name and leaves the other links alone, so it goes ahead. A read is
//! refused too unless `security.read_hard_links` is on (see [`crate::config`]). Both look at
//! the descriptor they use, so a link made after a check cannot slip in.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use deskwire::rexd::{
    DirEntry, Encoding, ErrorCode, ErrorObject, FileType, FsGlobParams, FsGlobResult, FsListParams,
    FsListResult, FsReadParams, FsReadResult, FsStatParams, FsStatResult, FsWriteParams,
    FsWriteResult, WriteMode, data,
};
use serde_json::json;

use crate::compress;
use crate::roots::{OpenError, Resolved, Roots};
use crate::sys;

/// Entries `fs.list` returns when the request names no `max_entries`.
pub const DEFAULT_MAX_ENTRIES: u64 = 10_000;
/// Matches `fs.glob` returns when the request names no `max_matches`.
pub const DEFAULT_MAX_MATCHES: u64 = 10_000;
/// Directory entries a recursive list or a glob looks at, at most (bounds the work one request
/// can cause; the answer is `truncated` past it).
pub const MAX_WALK_ENTRIES: usize = 200_000;

/// Where fs operations run: the session's roots and cwd, and the read cap.
#[derive(Debug, Clone, Copy)]
pub struct FsContext<'a> {
    /// The session's roots.
    pub roots: &'a Roots,
    /// The session's cwd (absolute, inside a root).
    pub cwd: &'a Path,
    /// `max_file_read_bytes`.
    pub max_read: u64,
    /// `security.read_hard_links`: read files that have other hard links.
    pub read_hard_links: bool,
    /// The session negotiated compression (`zstd` payloads, both ways).
    pub compress: bool,
    /// The session negotiated raw frames (`fs.read` bytes after the answer's line).
    pub raw_frames: bool,
}

type OpResult<T> = Result<T, ErrorObject>;

/// An error object for a failed open, naming the client's path.
pub fn open_error(ctx: &FsContext<'_>, path: &str, e: OpenError) -> ErrorObject {
    match e {
        OpenError::Escape(_) => {
            ErrorObject::forbidden_path(path, &ctx.roots.paths()).with_message(format!(
                "Path is outside allowed roots: {path} is a symbolic link, or leads through \
                 one out of the roots ({}); rexd follows neither",
                ctx.roots.paths().join(", ")
            ))
        }
        OpenError::IsRoot => ErrorObject::of(ErrorCode::InvalidParams)
            .with_message(format!("{path} is a workspace root")),
        OpenError::Io(e) => io_error(path, &e),
    }
}

/// An OS error on `path` with the errno in `data`: `not_found` when it does not exist,
/// `unauthorized` when the OS refuses, else invalid params (the params name something that
/// cannot be used).
pub fn io_error(path: &str, e: &std::io::Error) -> ErrorObject {
    let code = match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => ErrorCode::Unauthorized,
        Some(libc::ENOENT) => ErrorCode::NotFound,
        _ => ErrorCode::InvalidParams,
    };
    ErrorObject::of(code)
        .with_message(format!("{path}: {e}"))
        .with_data(json!({"path": path, "errno": e.raw_os_error()}))
}

fn kind_of(st: &libc::stat) -> FileType {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => FileType::File,
        libc::S_IFDIR => FileType::Dir,
        libc::S_IFLNK => FileType::Symlink,
        _ => FileType::Other,
    }
}

/// The refusal of a file with other hard links, which may lie outside the roots.
fn hard_link_error(ctx: &FsContext<'_>, path: &str, st: &libc::stat, what: &str) -> ErrorObject {
    ErrorObject::forbidden_path(path, &ctx.roots.paths())
        .with_message(format!(
            "{path} has {} hard links, which may lie outside the allowed roots: {what}",
            st.st_nlink
        ))
        .with_data(json!({"path": path, "nlink": st.st_nlink, "allowed_roots": ctx.roots.paths()}))
}

fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `fs.read`.
pub fn read(ctx: &FsContext<'_>, p: &FsReadParams) -> OpResult<FsReadResult> {
    let r = ctx.roots.resolve(ctx.cwd, &p.path)?;
    // O_NONBLOCK: opening a FIFO (which a command may have made in the root) must not hang
    // the daemon; it is refused below as not a regular file.
    let fd = r
        .open(libc::O_RDONLY | libc::O_NONBLOCK)
        .map_err(|e| open_error(ctx, &p.path, e))?;
    let st = sys::fstat(fd.as_fd()).map_err(|e| io_error(&p.path, &e))?;
    if kind_of(&st) != FileType::File {
        return Err(ErrorObject::of(ErrorCode::InvalidParams)
            .with_message(format!("{} is not a regular file", p.path)));
    }
    if st.st_nlink > 1 && !ctx.read_hard_links {
        return Err(hard_link_error(
            ctx,
            &p.path,
            &st,
            "reading it is off (security.read_hard_links)",
        ));
    }
    let size = st.st_size as u64;
    let offset = p.offset.unwrap_or(0).min(size);
    let wanted = p.length.unwrap_or(size - offset).min(size - offset);
    let take = wanted.min(ctx.max_read);
    let mut buf = vec![0u8; take as usize];
    let mut n = sys::pread_full(fd.as_fd(), &mut buf, offset).map_err(|e| io_error(&p.path, &e))?;
    buf.truncate(n);
    let content = match p.encoding {
        Encoding::Utf8 => match simdutf8::compat::from_utf8(&buf) {
            Ok(_) => (Encoding::Utf8, String::from_utf8(buf).unwrap_or_default()),
            // A range that ends inside a character ends before it (the next read starts
            // there), so a client reading a UTF-8 file in pieces never needs base64.
            Err(e)
                if e.error_len().is_none() && e.valid_up_to() > 0 && offset + (n as u64) < size =>
            {
                n = e.valid_up_to();
                buf.truncate(n);
                (Encoding::Utf8, String::from_utf8(buf).unwrap_or_default())
            }
            Err(e) => {
                return Err(ErrorObject::of(ErrorCode::InvalidParams)
                    // Said for a model too, whose `read` tool asks for text only: what else
                    // there is besides base64.
                    .with_message(format!(
                        "{} is not UTF-8 text at byte {} (a binary file?): fs.read gives its \
                         bytes with encoding \"base64\", and a command such as `file` or \
                         `xxd | head` describes it",
                        p.path,
                        offset + e.valid_up_to() as u64
                    ))
                    .with_data(json!({
                        "path": p.path,
                        "encoding": "utf8",
                        "valid_up_to": offset + e.valid_up_to() as u64,
                    })));
            }
        },
        // Compressed where that is shorter, else as `data::encode` would: any bytes, so a
        // piece is never cut before a character.
        Encoding::Zstd => {
            if !ctx.compress {
                return Err(ErrorObject::of(ErrorCode::InvalidParams)
                    .with_message(compress::DecodeError::NotNegotiated.to_string()));
            }
            let (encoding, text) = compress::encode(&buf, true);
            (encoding, text.into_owned())
        }
        // The bytes as they are, after the answer's line: never cut, never encoded. In a
        // session that also negotiated compression, one zstd frame of them instead when that
        // is shorter (`encoding: "zstd"` with `raw_bytes`).
        Encoding::Raw => {
            if !ctx.raw_frames {
                return Err(ErrorObject::of(ErrorCode::InvalidParams).with_message(
                    "encoding \"raw\" was not negotiated for this session \
                     (session.open raw_frames)",
                ));
            }
            let (encoding, raw) = match ctx.compress.then(|| compress::raw_frame(&buf)) {
                Some(Some(frame)) => (Encoding::Zstd, frame),
                _ => (Encoding::Raw, std::mem::take(&mut buf)),
            };
            return Ok(FsReadResult {
                path: display(&r.display()),
                size,
                mtime: sys::rfc3339(sys::mtime(&st)),
                encoding,
                content: String::new(),
                truncated: (n as u64) < wanted,
                raw_bytes: Some(raw.len() as u64),
                raw,
            });
        }
        other => (other, data::encode_as(&buf, other).into_owned()),
    };
    let (encoding, content) = content;
    Ok(FsReadResult {
        path: display(&r.display()),
        size,
        mtime: sys::rfc3339(sys::mtime(&st)),
        encoding,
        content,
        truncated: (n as u64) < wanted,
        raw_bytes: None,
        raw: Vec::new(),
    })
}

/// `fs.stat`. A path that does not exist (inside the roots) is `exists: false`, not an error.
pub fn stat(ctx: &FsContext<'_>, p: &FsStatParams) -> OpResult<FsStatResult> {
    let r = ctx.roots.resolve(ctx.cwd, &p.path)?;
    let shown = display(&r.display());
    let absent = FsStatResult {
        path: shown.clone(),
        exists: false,
        kind: None,
        size: None,
        mtime: None,
        mode: None,
        uid: None,
        gid: None,
        symlink_target: None,
    };
    let (dir, name): (OwnedFd, OsString) = match r.open_parent() {
        Ok(x) => x,
        Err(OpenError::IsRoot) => (
            r.open(libc::O_PATH | libc::O_DIRECTORY)
                .map_err(|e| open_error(ctx, &p.path, e))?,
            OsString::new(),
        ),
        Err(OpenError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(absent),
        Err(e) => return Err(open_error(ctx, &p.path, e)),
    };
    let st = match sys::stat_at(dir.as_fd(), &name) {
        Ok(st) => st,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(absent),
        Err(e) => return Err(io_error(&p.path, &e)),
    };
    let kind = kind_of(&st);
    let symlink_target = match kind {
        FileType::Symlink => sys::readlink_at(dir.as_fd(), &name)
            .ok()
            .map(|t| String::from_utf8_lossy(&t).into_owned()),
        _ => None,
    };
    Ok(FsStatResult {
        path: shown,
        exists: true,
        kind: Some(kind),
        size: Some(st.st_size as u64),
        mtime: Some(sys::rfc3339(sys::mtime(&st))),
        mode: Some(st.st_mode & 0o7777),
        uid: Some(st.st_uid),
        gid: Some(st.st_gid),
        symlink_target,
    })
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// `fs.write`.
pub fn write(ctx: &FsContext<'_>, p: &FsWriteParams) -> OpResult<FsWriteResult> {
    // `dir/` names a directory: never create a file called `dir` for it.
    if p.path.ends_with('/') {
        return Err(
            ErrorObject::of(ErrorCode::InvalidParams).with_message(format!(
                "{}: ends with /, so it names a directory, not a file",
                p.path
            )),
        );
    }
    // A compressed write inflates no further than a plain one could be long.
    let bytes =
        compress::decode_bounded(&p.content, p.encoding, ctx.compress, compress::MAX_INFLATED)
            .map_err(|e| ErrorObject::of(ErrorCode::InvalidParams).with_message(e.to_string()))?;
    let r = ctx.roots.resolve(ctx.cwd, &p.path)?;
    if p.mkdir_parents {
        make_parents(ctx, &r, &p.path)?;
    }
    let (dir, name) = r.open_parent().map_err(|e| match e {
        // Without mkdir_parents, a missing directory is the likely mistake: say so.
        OpenError::Io(io) if io.raw_os_error() == Some(libc::ENOENT) => io_error(&p.path, &io)
            .with_message(format!(
                "{}: no such directory to write it in (mkdir_parents: true creates it; \
                 `rex write -p`)",
                p.path
            )),
        other => open_error(ctx, &p.path, other),
    })?;
    let dir = dir.as_fd();
    let existing = match sys::stat_at(dir, &name) {
        Ok(st) => Some(st),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
        Err(e) => return Err(io_error(&p.path, &e)),
    };
    if let Some(st) = &existing {
        match kind_of(st) {
            FileType::Symlink => {
                return Err(ErrorObject::forbidden_path(&p.path, &ctx.roots.paths())
                    .with_message("writes do not follow symlinks"));
            }
            FileType::File => {}
            _ => {
                return Err(ErrorObject::of(ErrorCode::InvalidParams)
                    .with_message(format!("{} is not a regular file", p.path)));
            }
        }
    }
    let conflict = |why: &str| {
        ErrorObject::of(ErrorCode::ConcurrencyConflict)
            .with_message(format!("{}: {why}", p.path))
            .with_data(json!({"path": p.path}))
    };
    if let Some(expected) = &p.expected_mtime {
        // Not a time at all: say so, rather than that the file changed.
        if humantime::parse_rfc3339_weak(expected).is_err() {
            return Err(
                ErrorObject::of(ErrorCode::InvalidParams).with_message(format!(
                    "expected_mtime {expected:?} is not an RFC 3339 time (give the mtime \
                     fs.stat or rex stat printed, e.g. 2026-11-30T12:00:00.123456789Z)"
                )),
            );
        }
        match &existing {
            None => return Err(conflict("expected_mtime given but the file does not exist")),
            Some(st) if sys::rfc3339(sys::mtime(st)) != *expected => {
                return Err(conflict("the file changed since expected_mtime")
                    .with_data(json!({"path": p.path, "mtime": sys::rfc3339(sys::mtime(st))})));
            }
            Some(_) => {}
        }
    }
    if p.mode == WriteMode::Create && existing.is_some() {
        return Err(conflict("mode \"create\" but the file exists"));
    }
    let created = existing.is_none();
    let file_mode = existing.as_ref().map_or(0o644, |st| st.st_mode & 0o7777);
    let written_fd: OwnedFd = if p.atomic && p.mode != WriteMode::Append {
        let tmp = OsString::from(format!(
            ".{}.rexd-{}-{}.tmp",
            name.to_string_lossy(),
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let fd = sys::openat(
            dir,
            &tmp,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            file_mode,
        )
        .map_err(|e| io_error(&p.path, &e))?;
        let done = write_all(fd.as_fd(), &bytes)
            .and_then(|_| std::fs::File::from(fd.try_clone()?).sync_data())
            .and_then(|_| sys::rename_at(dir, &tmp, &name, p.mode == WriteMode::Create));
        if let Err(e) = done {
            let _ = sys::unlink_at(dir, &tmp);
            if e.raw_os_error() == Some(libc::EEXIST) {
                return Err(conflict("mode \"create\" but the file exists"));
            }
            return Err(io_error(&p.path, &e));
        }
        fd
    } else {
        // O_NONBLOCK: a FIFO swapped in after the check above fails (ENXIO) instead of
        // blocking the daemon until some reader appears. No O_TRUNC: the file is truncated only
        // once its descriptor shows it is a regular file with no other links.
        let flags = libc::O_WRONLY
            | libc::O_NONBLOCK
            | libc::O_CREAT
            | match p.mode {
                WriteMode::Append => libc::O_APPEND,
                WriteMode::Create => libc::O_EXCL,
                _ => 0,
            };
        let fd = sys::openat(dir, &name, flags, file_mode).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => ErrorObject::forbidden_path(&p.path, &ctx.roots.paths()),
            Some(libc::EEXIST) => conflict("mode \"create\" but the file exists"),
            _ => io_error(&p.path, &e),
        })?;
        let st = sys::fstat(fd.as_fd()).map_err(|e| io_error(&p.path, &e))?;
        if kind_of(&st) != FileType::File {
            return Err(ErrorObject::of(ErrorCode::InvalidParams)
                .with_message(format!("{} is not a regular file", p.path)));
        }
        if st.st_nlink > 1 {
            return Err(hard_link_error(
                ctx,
                &p.path,
                &st,
                "a non-atomic or append write would change them all; write with atomic: true",
            ));
        }
        let file = std::fs::File::from(fd);
        if p.mode == WriteMode::Replace {
            file.set_len(0).map_err(|e| io_error(&p.path, &e))?;
        }
        write_all(file.as_fd(), &bytes).map_err(|e| io_error(&p.path, &e))?;
        OwnedFd::from(file)
    };
    let st = sys::fstat(written_fd.as_fd()).map_err(|e| io_error(&p.path, &e))?;
    Ok(FsWriteResult {
        path: display(&r.display()),
        bytes_written: bytes.len() as u64,
        mtime: sys::rfc3339(sys::mtime(&st)),
        created,
    })
}

fn write_all(fd: BorrowedFd<'_>, bytes: &[u8]) -> std::io::Result<()> {
    // A duplicate descriptor, closed when the File drops.
    std::fs::File::from(fd.try_clone_to_owned()?).write_all(bytes)
}

/// Creates the missing parents of `r`, each one beneath the root.
fn make_parents(ctx: &FsContext<'_>, r: &Resolved, path: &str) -> OpResult<()> {
    let Some(parent) = r.rel.parent() else {
        return Ok(());
    };
    let mut at = PathBuf::new();
    for comp in parent.components() {
        let dir = crate::roots::Resolved {
            root: r.root.clone(),
            rel: at.clone(),
        }
        .open(libc::O_PATH | libc::O_DIRECTORY)
        .map_err(|e| open_error(ctx, path, e))?;
        match sys::mkdir_at(dir.as_fd(), comp.as_os_str()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
            Err(e) => return Err(io_error(path, &e)),
        }
        at.push(comp);
    }
    Ok(())
}

/// `fs.list`. Recursion does not follow symlinks (they are listed as `symlink`).
pub fn list(ctx: &FsContext<'_>, p: &FsListParams) -> OpResult<FsListResult> {
    let r = ctx.roots.resolve(ctx.cwd, &p.path)?;
    let dir = r
        .open(libc::O_PATH | libc::O_DIRECTORY)
        .map_err(|e| open_error(ctx, &p.path, e))?;
    let max = p.max_entries.unwrap_or(DEFAULT_MAX_ENTRIES) as usize;
    let base = r.display();
    let mut entries = Vec::new();
    let mut truncated = false;
    let mut visited = 0usize;
    let mut stack: Vec<(OwnedFd, PathBuf)> = vec![(dir, base.clone())];
    while let Some((fd, at)) = stack.pop() {
        let mut names = sys::read_dir(fd.as_fd()).map_err(|e| io_error(&p.path, &e))?;
        names.sort();
        for name in names {
            visited += 1;
            if entries.len() >= max || visited > MAX_WALK_ENTRIES {
                truncated = true;
                break;
            }
            let st = sys::stat_at(fd.as_fd(), &name).ok();
            let kind = st.as_ref().map_or(FileType::Other, kind_of);
            let full = at.join(&name);
            if p.recursive
                && kind == FileType::Dir
                && let Ok(sub) = sys::openat(fd.as_fd(), &name, libc::O_PATH | libc::O_DIRECTORY, 0)
            {
                stack.push((sub, full.clone()));
            }
            entries.push(DirEntry {
                name: name.to_string_lossy().into_owned(),
                path: display(&full),
                kind,
                size: st.as_ref().map(|s| s.st_size as u64),
                mtime: st.as_ref().map(|s| sys::rfc3339(sys::mtime(s))),
            });
        }
        if truncated {
            break;
        }
    }
    Ok(FsListResult {
        path: display(&base),
        entries,
        truncated,
    })
}

fn has_glob_meta(s: &OsStr) -> bool {
    s.as_bytes()
        .iter()
        .any(|b| matches!(b, b'*' | b'?' | b'[' | b']' | b'{' | b'}'))
}

/// `fs.glob`: `*` stays within one path component, `**` crosses them. The literal leading
/// components of the pattern choose the directory walked (it must be inside the roots);
/// symlinks are not followed. Matches are absolute paths, sorted.
pub fn glob(ctx: &FsContext<'_>, p: &FsGlobParams) -> OpResult<FsGlobResult> {
    if p.pattern.is_empty() {
        return Err(ErrorObject::of(ErrorCode::InvalidParams)
            .with_message("the glob pattern is empty (e.g. `**/*.rs`)"));
    }
    let cwd_res;
    let cwd: &Path = match &p.cwd {
        Some(c) => {
            cwd_res = ctx.roots.resolve(ctx.cwd, c)?.display();
            &cwd_res
        }
        None => ctx.cwd,
    };
    let full = cwd.join(&p.pattern);
    // Split into the literal directory to walk and the pattern below it.
    let mut base = PathBuf::new();
    let mut rest = PathBuf::new();
    for comp in full.components() {
        if rest.as_os_str().is_empty() && !has_glob_meta(comp.as_os_str()) {
            base.push(comp);
        } else {
            rest.push(comp);
        }
    }
    if rest.as_os_str().is_empty() {
        // No wildcard: the pattern names one path.
        rest = PathBuf::from(base.file_name().unwrap_or_default());
        base.pop();
    }
    let base_str = base.to_string_lossy().into_owned();
    // The pattern's fixed start must lie in a root, and nothing in it may climb out.
    let outside = || {
        ErrorObject::forbidden_path(&p.pattern, &ctx.roots.paths()).with_message(format!(
            "Path is outside allowed roots: the pattern {} searches outside {} (give a \
             pattern relative to the working directory, or under a root, without `..`)",
            p.pattern,
            ctx.roots.paths().join(", ")
        ))
    };
    let r = ctx
        .roots
        .resolve(Path::new("/"), &base_str)
        .map_err(|_| outside())?;
    if rest.components().any(|c| c.as_os_str() == "..") {
        return Err(outside());
    }
    let matcher = globset::GlobBuilder::new(&rest.to_string_lossy())
        .literal_separator(true)
        .build()
        .map_err(|e| {
            ErrorObject::of(ErrorCode::InvalidParams).with_message(format!("pattern: {e}"))
        })?
        .compile_matcher();
    let max = p.max_matches.unwrap_or(DEFAULT_MAX_MATCHES) as usize;
    let dir = match r.open(libc::O_PATH | libc::O_DIRECTORY) {
        Ok(d) => d,
        Err(OpenError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT) => {
            return Ok(FsGlobResult {
                matches: vec![],
                truncated: false,
            });
        }
        Err(e) => return Err(open_error(ctx, &p.pattern, e)),
    };
    let walk_deep = rest.components().count() > 1 || rest.to_string_lossy().contains("**");
    let base_shown = r.display();
    let mut matches = Vec::new();
    let mut truncated = false;
    let mut visited = 0usize;
    let mut stack: Vec<(OwnedFd, PathBuf)> = vec![(dir, PathBuf::new())];
    'walk: while let Some((fd, rel)) = stack.pop() {
        let Ok(names) = sys::read_dir(fd.as_fd()) else {
            continue;
        };
        for name in names {
            visited += 1;
            if visited > MAX_WALK_ENTRIES {
                truncated = true;
                break 'walk;
            }
            let rel_path = rel.join(&name);
            if matcher.is_match(&rel_path) {
                if matches.len() >= max {
                    truncated = true;
                    break 'walk;
                }
                matches.push(display(&base_shown.join(&rel_path)));
            }
            if walk_deep
                && let Ok(st) = sys::stat_at(fd.as_fd(), &name)
                && kind_of(&st) == FileType::Dir
                && let Ok(sub) = sys::openat(fd.as_fd(), &name, libc::O_PATH | libc::O_DIRECTORY, 0)
            {
                stack.push((sub, rel_path));
            }
        }
    }
    matches.sort();
    Ok(FsGlobResult { matches, truncated })
}
