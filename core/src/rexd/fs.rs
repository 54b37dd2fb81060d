//! `fs.read`, `fs.write`, `fs.list`, `fs.glob`, `fs.stat`.
//!
//! Paths are strings as the daemon's OS spells them, absolute or relative to the session's cwd,
//! and must resolve (symlinks included) inside the allowed roots, else `forbidden_path`.
//!
//! Timestamps (`mtime`) are RFC 3339 strings in UTC, like `started_at`. The spec does not give
//! their type; a string keeps full precision (`2026-02-25T10:00:00.123456789Z`) where a JSON
//! number of milliseconds would not, and `expected_mtime` compares them exactly: a client passes
//! back the string `fs.read`, `fs.stat` or `fs.write` gave, unchanged, and never computes one.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::data::{self, Encoding};
use super::error::RexdError;
use super::exec::is_false;

fn yes() -> bool {
    true
}

/// `fs.read` params.
///
/// `offset` and `length` count bytes of the file. With `utf8` the daemon answers
/// `invalid_params` when the bytes read are not valid UTF-8 (cut mid-character or binary), so
/// text is never silently altered; ask for `base64` for such files.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FsReadParams {
    /// The session.
    pub session_id: String,
    /// The file.
    pub path: String,
    /// First byte to read; 0 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Bytes to read at most; to the end of the file (within `max_file_read_bytes`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
    /// How to carry the content; `utf8` by default.
    #[serde(default)]
    pub encoding: Encoding,
}

/// `fs.read` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsReadResult {
    /// The file, as resolved by the daemon.
    pub path: String,
    /// The whole file's size in bytes (not the length read).
    pub size: u64,
    /// The file's modification time (see the module doc).
    pub mtime: String,
    /// How `content` carries the bytes.
    pub encoding: Encoding,
    /// The bytes read.
    pub content: String,
    /// Fewer bytes than asked for were returned because of `max_file_read_bytes` (reaching the
    /// end of the file is not truncation).
    pub truncated: bool,
    /// With `encoding: "raw"` (addition to the spec): how many bytes follow the answer's line
    /// on the byte stream, right after its `\n`; `content` is then empty. With
    /// `encoding: "zstd"` (a session that negotiated compression too), those bytes are one
    /// zstd frame of the data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_bytes: Option<u64>,
    /// Those bytes. Never in the JSON: a daemon writes them after the line, a client reads
    /// them there.
    #[serde(skip)]
    pub raw: Vec<u8>,
}

impl FsReadResult {
    /// The bytes `content` carries (or, for `raw`, the bytes that followed the line).
    pub fn bytes(&self) -> Result<Cow<'_, [u8]>, RexdError> {
        if self.encoding == Encoding::Raw {
            return Ok(Cow::Borrowed(&self.raw));
        }
        data::decode(&self.content, self.encoding)
    }

    /// An answer with bytes after its line as a string one, for a way out that cannot carry
    /// bytes after a line (a batch's array): `raw` becomes `utf8` when the bytes are text, else
    /// `base64`; a raw `zstd` frame becomes its base64, as `zstd` strings are. Others are
    /// unchanged.
    pub fn into_string_form(mut self) -> FsReadResult {
        if self.raw_bytes.take().is_some() {
            let raw = std::mem::take(&mut self.raw);
            let (encoding, text) = match self.encoding {
                Encoding::Raw => data::encode(&raw),
                other => (other, data::encode_as(&raw, Encoding::Base64)),
            };
            self.encoding = encoding;
            self.content = text.into_owned();
        }
        self
    }
}

/// How `fs.write` treats an existing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum WriteMode {
    /// Only create: an existing file is `concurrency_conflict` (-32006).
    Create,
    /// Create or replace the whole file (the default).
    #[default]
    Replace,
    /// Create or append to the end.
    Append,
}

/// `fs.write` params.
///
/// `atomic` (default true) writes a temporary file beside the target and renames it over the
/// target, so readers see the old or the new file, never half of one; it applies to `create`
/// and `replace` and is ignored for `append`, which cannot be done by rename.
/// `expected_mtime`, when given, must equal the file's current mtime (and the file must exist),
/// else `concurrency_conflict` (-32006) and nothing is written.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FsWriteParams {
    /// The session.
    pub session_id: String,
    /// The file.
    pub path: String,
    /// The bytes to write, as `encoding` says.
    pub content: String,
    /// How `content` carries the bytes; `utf8` by default.
    #[serde(default)]
    pub encoding: Encoding,
    /// Create only, replace, or append; `replace` by default.
    #[serde(default)]
    pub mode: WriteMode,
    /// Create missing parent directories (inside the allowed roots); false by default.
    #[serde(default)]
    pub mkdir_parents: bool,
    /// Write through a temporary file and rename; true by default.
    #[serde(default = "yes")]
    pub atomic: bool,
    /// Optimistic concurrency: the mtime the client last saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_mtime: Option<String>,
}

impl FsWriteParams {
    /// The bytes `content` carries.
    pub fn bytes(&self) -> Result<Cow<'_, [u8]>, RexdError> {
        data::decode(&self.content, self.encoding)
    }
}

/// `fs.write` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsWriteResult {
    /// The file, as resolved by the daemon.
    pub path: String,
    /// Bytes written (after base64 decoding).
    pub bytes_written: u64,
    /// The file's new modification time, for the next `expected_mtime`.
    pub mtime: String,
    /// Whether the file did not exist before.
    pub created: bool,
}

/// `fs.list` params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FsListParams {
    /// The session.
    pub session_id: String,
    /// The directory.
    pub path: String,
    /// Descend into subdirectories (never following symlinks); false by default.
    #[serde(default)]
    pub recursive: bool,
    /// Entries to return at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_entries: Option<u64>,
}

/// What a directory entry is (not following symlinks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum FileType {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (itself, not its target).
    Symlink,
    /// Anything else: socket, FIFO, device.
    Other,
}

/// One entry of `fs.list`.
///
/// `size` and `mtime` are nullable (`null` when the daemon could not stat the entry, e.g. it
/// vanished while listing); absent reads as `null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    /// The file name.
    pub name: String,
    /// The full path.
    pub path: String,
    /// What it is.
    #[serde(rename = "type")]
    pub kind: FileType,
    /// Size in bytes.
    #[serde(default)]
    pub size: Option<u64>,
    /// Modification time.
    #[serde(default)]
    pub mtime: Option<String>,
}

/// `fs.list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsListResult {
    /// The directory, as resolved by the daemon.
    pub path: String,
    /// Its entries (in no promised order; the daemon sorts by path).
    pub entries: Vec<DirEntry>,
    /// `max_entries` (or a daemon limit) cut the list (addition to the spec; omitted when false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub truncated: bool,
}

/// `fs.glob` params.
///
/// Pattern syntax: `*`, `?`, `[…]`, `{a,b}` and `**` for any number of directories (the
/// `globset` dialect); relative patterns resolve against `cwd`, else the session's cwd. Matches
/// outside the allowed roots are never returned.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FsGlobParams {
    /// The session.
    pub session_id: String,
    /// The glob.
    pub pattern: String,
    /// Base directory for a relative pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Matches to return at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_matches: Option<u64>,
}

/// `fs.glob` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsGlobResult {
    /// Matching paths.
    pub matches: Vec<String>,
    /// `max_matches` (or a daemon limit) cut the list (addition to the spec; omitted when
    /// false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub truncated: bool,
}

/// `fs.stat` params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FsStatParams {
    /// The session.
    pub session_id: String,
    /// The path.
    pub path: String,
}

/// `fs.stat` result.
///
/// Describes the path itself (lstat): a symlink is `type: "symlink"` with its
/// `symlink_target`. A missing path is not an error: `exists: false` and `type`, `size`,
/// `mtime`, `mode` are `null` (these four are nullable: written as `null` when unset, absent
/// reads as `null`). `uid`, `gid`, `symlink_target` are optional and omitted when unset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsStatResult {
    /// The path, as resolved by the daemon.
    pub path: String,
    /// Whether it exists.
    pub exists: bool,
    /// What it is.
    #[serde(rename = "type", default)]
    pub kind: Option<FileType>,
    /// Size in bytes.
    #[serde(default)]
    pub size: Option<u64>,
    /// Modification time.
    #[serde(default)]
    pub mtime: Option<String>,
    /// Permission bits (`st_mode & 0o7777`) as a number, e.g. 420 for `0644`.
    #[serde(default)]
    pub mode: Option<u32>,
    /// Owner's user id (Unix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Owner's group id (Unix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
    /// Where a symlink points (as stored in the link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn write_defaults() {
        let p: FsWriteParams = serde_json::from_value(
            json!({"session_id":"s_1","path":"/srv/myapp/README.md","content":"# Hello\n"}),
        )
        .unwrap();
        assert_eq!(
            (p.encoding, p.mode, p.mkdir_parents, p.atomic),
            (Encoding::Utf8, WriteMode::Replace, false, true)
        );
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"session_id":"s_1","path":"/srv/myapp/README.md","content":"# Hello\n",
                   "encoding":"utf8","mode":"replace","mkdir_parents":false,"atomic":true})
        );
        assert!(
            serde_json::from_value::<FsWriteParams>(
                json!({"session_id":"s","path":"p","content":"","mode":"truncate"})
            )
            .is_err()
        );
    }

    #[test]
    fn base64_content() {
        let p: FsWriteParams = serde_json::from_value(
            json!({"session_id":"s","path":"p","content":"AAEC","encoding":"base64"}),
        )
        .unwrap();
        assert_eq!(p.bytes().unwrap().as_ref(), &[0, 1, 2]);
    }

    #[test]
    fn stat_of_missing_path() {
        let r: FsStatResult = serde_json::from_value(json!({"path":"/x","exists":false})).unwrap();
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"path":"/x","exists":false,"type":null,"size":null,"mtime":null,"mode":null})
        );
    }

    #[test]
    fn list_entry_type_field() {
        let e: DirEntry = serde_json::from_value(
            json!({"name":"a","path":"/a","type":"symlink","size":null,"mtime":null}),
        )
        .unwrap();
        assert_eq!(e.kind, FileType::Symlink);
        assert!(
            serde_json::from_value::<DirEntry>(json!({"name":"a","path":"/a","type":"link"}))
                .is_err()
        );
    }
}
