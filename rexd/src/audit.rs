//! The audit log: one JSON line per request (and per process end), to a file or stderr —
//! never stdout, which carries the protocol.
//!
//! Each entry has `ts` (RFC 3339, UTC), `session_id`, `client` (the session's `client_name`,
//! which the client chose), `principal` (who the transport authenticated: a token's label or a
//! client certificate's subject over `--listen`; absent over stdio, where the client is whoever
//! started the daemon), `address` (where the client connects from, when known), `method`, `params` (redacted: file contents, input data, stdin and environment values are
//! replaced by their size, commands and paths are kept because they are what an auditor wants)
//! and `result` (a summary: `ok`, an error code and message, or an exit status).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Value, json};

use crate::sys;

/// Who an entry is about: the principal the transport authenticated, and where the client
/// connects from (`IP:PORT`: a `--listen` client's address, or over ssh the client end of
/// `$SSH_CONNECTION`). Each is left out of the entry when unknown.
#[derive(Debug, Clone, Copy, Default)]
pub struct Who<'a> {
    /// A token's label or a certificate's subject.
    pub principal: Option<&'a str>,
    /// `IP:PORT`.
    pub address: Option<&'a str>,
}

/// Where audit entries go.
pub struct Audit {
    out: Option<Box<dyn Write + Send>>,
    /// The file entries are appended to, for [`Audit::reopen`] (`None`: stderr or a writer).
    path: Option<PathBuf>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("enabled", &self.out.is_some())
            .finish()
    }
}

impl Audit {
    /// No audit log.
    pub fn disabled() -> Audit {
        Audit {
            out: None,
            path: None,
        }
    }

    /// Entries to stderr.
    pub fn stderr() -> Audit {
        Audit {
            out: Some(Box::new(std::io::stderr())),
            path: None,
        }
    }

    /// Entries appended to `path` (created with mode 0600 if missing).
    pub fn file(path: &Path) -> std::io::Result<Audit> {
        Ok(Audit {
            out: Some(Box::new(Audit::open(path)?)),
            path: Some(path.to_owned()),
        })
    }

    fn open(path: &Path) -> std::io::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| {
                std::io::Error::new(e.kind(), format!("audit log {}: {e}", path.display()))
            })
    }

    /// Opens the audit file again at its path (after logrotate moved it: `SIGUSR1`); entries
    /// go on to the old file if that fails. A no-op for stderr and writers.
    pub fn reopen(&mut self) -> std::io::Result<()> {
        if let Some(path) = &self.path {
            let f = Audit::open(path)?;
            self.out = Some(Box::new(f));
        }
        Ok(())
    }

    /// Any writer (tests, embedding hosts).
    pub fn to_writer(w: Box<dyn Write + Send>) -> Audit {
        Audit {
            out: Some(w),
            path: None,
        }
    }

    /// Whether entries are written at all.
    pub fn enabled(&self) -> bool {
        self.out.is_some()
    }

    /// Writes one entry. A failing audit sink is reported on stderr once per failure and does
    /// not stop the daemon.
    pub fn record(
        &mut self,
        session_id: Option<&str>,
        client: Option<&str>,
        who: Who<'_>,
        method: &str,
        params: Value,
        result: Value,
    ) {
        let Some(out) = self.out.as_mut() else {
            return;
        };
        let mut entry = json!({
            "ts": sys::rfc3339(SystemTime::now()),
            "session_id": session_id,
            "client": client,
            "method": method,
            "params": redact(params),
            "result": result,
        });
        if let Some(principal) = who.principal {
            entry["principal"] = Value::String(principal.to_owned());
        }
        if let Some(address) = who.address {
            entry["address"] = Value::String(address.to_owned());
        }
        let mut line = entry.to_string();
        line.push('\n');
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|_| out.flush()) {
            eprintln!("rexd: audit log write failed: {e}");
        }
    }
}

/// Replaces payloads by their size; keeps everything else.
pub fn redact(params: Value) -> Value {
    match params {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("content" | "data" | "stdin", Value::String(s)) => {
                            Value::String(format!("<{} bytes redacted>", s.len()))
                        }
                        ("env", Value::Object(env)) => Value::Object(
                            env.into_iter()
                                .map(|(name, _)| (name, Value::String("<redacted>".into())))
                                .collect(),
                        ),
                        (_, v) => v,
                    };
                    (k, v)
                })
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_redacted_commands_kept() {
        let r = redact(json!({
            "session_id": "s_1", "argv": ["git", "push"], "stdin": "secret",
            "env": {"TOKEN": "abc"}, "content": "hello", "path": "/srv/a"
        }));
        assert_eq!(r["argv"], json!(["git", "push"]));
        assert_eq!(r["stdin"], json!("<6 bytes redacted>"));
        assert_eq!(r["env"], json!({"TOKEN": "<redacted>"}));
        assert_eq!(r["content"], json!("<5 bytes redacted>"));
        assert_eq!(r["path"], json!("/srv/a"));
    }
}
