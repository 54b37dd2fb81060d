//! Named targets in a TOML file, and the current one: the runtime's routing state, kept out of
//! the model's sight (the spec's "Runtime Routing Model"). The model sees one `bash`/`read`
//! toolset; `rex target use server-a` moves every later call to another host.
//!
//! ```toml
//! current = "server-a"
//!
//! [targets.server-a]
//! url = "ssh://deploy@server-a"
//! identity_file = "/home/me/.ssh/id_ed25519"
//! ssh_options = ["-o", "ConnectTimeout=5"]
//! rexd = "/usr/local/bin/rexd"
//! workspace_roots = ["/srv/myapp"]
//! cwd = "/srv/myapp"
//! ```
//!
//! `local` is always a target (this machine), unless the file defines its own `local`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::TargetError;
use crate::target::{Endpoint, TargetSpec};

/// The environment variable naming the targets file.
pub const TARGETS_FILE_ENV: &str = "REX_TARGETS_FILE";
/// The environment variable naming the target to use (overrides the file's `current`).
pub const TARGET_ENV: &str = "REX_TARGET";

/// The targets file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Targets {
    /// The target used when none is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// The named targets.
    #[serde(default)]
    pub targets: BTreeMap<String, TargetSpec>,
}

/// Where the targets file is: `explicit`, else `$REX_TARGETS_FILE`, else
/// `$XDG_CONFIG_HOME/rex/targets.toml`, else `~/.config/rex/targets.toml`.
pub fn default_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_owned();
    }
    if let Some(p) = std::env::var_os(TARGETS_FILE_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from("."));
    config.join("rex").join("targets.toml")
}

fn file_error(path: &Path, reason: impl std::fmt::Display) -> TargetError {
    TargetError::TargetsFile {
        file: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// A target name: what `rex target add` accepts (and what can never look like a URL).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl Targets {
    /// Reads the file; a missing file is an empty set of targets.
    pub fn load(path: &Path) -> Result<Targets, TargetError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Targets::default()),
            Err(e) => return Err(file_error(path, e)),
        };
        let targets: Targets = toml::from_str(&text).map_err(|e| file_error(path, e))?;
        for (name, spec) in &targets.targets {
            if !valid_name(name) {
                return Err(file_error(path, format!("bad target name {name:?}")));
            }
            spec.endpoint()
                .map_err(|e| file_error(path, format!("target {name}: {e}")))?;
        }
        Ok(targets)
    }

    /// Writes the file atomically (a temp file renamed over it), creating its directory.
    pub fn save(&self, path: &Path) -> Result<(), TargetError> {
        let text = toml::to_string_pretty(self).map_err(|e| file_error(path, e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| file_error(path, e))?;
        }
        let tmp = path.with_extension(format!("toml.tmp{}", std::process::id()));
        std::fs::write(&tmp, text).map_err(|e| file_error(path, e))?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            file_error(path, e)
        })
    }

    /// Adds or replaces a named target (its URL checked first).
    pub fn add(&mut self, name: &str, spec: TargetSpec) -> Result<(), TargetError> {
        if !valid_name(name) {
            return Err(TargetError::BadTarget {
                target: name.to_owned(),
                reason: "a target name is 1-64 letters, digits or `._-`".into(),
            });
        }
        spec.endpoint()?;
        // `local` may carry settings for this machine, never another: `rex -t local` must
        // not reach over the network.
        if name == "local" && spec.url != "local" {
            return Err(TargetError::BadTarget {
                target: name.to_owned(),
                reason: format!("`local` names this machine; give {} another name", spec.url),
            });
        }
        self.targets.insert(name.to_owned(), spec);
        Ok(())
    }

    /// Removes a named target; the current one falls back to `local`.
    pub fn remove(&mut self, name: &str) -> bool {
        if self.current.as_deref() == Some(name) {
            self.current = None;
        }
        self.targets.remove(name).is_some()
    }

    /// Makes `name` the current target (`local` or a known name).
    pub fn use_target(&mut self, name: &str, file: &Path) -> Result<(), TargetError> {
        self.lookup(name, file)?;
        self.current = Some(name.to_owned());
        Ok(())
    }

    /// The name of the current target: the file's `current`, else `local`.
    pub fn current_name(&self) -> &str {
        self.current.as_deref().unwrap_or("local")
    }

    /// The target a command uses: `explicit` (rex's `--target`), else `$REX_TARGET`, else the
    /// current target.
    pub fn chosen_name(&self, explicit: Option<&str>) -> String {
        explicit
            .map(str::to_owned)
            .or_else(|| std::env::var(TARGET_ENV).ok().filter(|t| !t.is_empty()))
            .unwrap_or_else(|| self.current_name().to_owned())
    }

    /// A named target, `local`, or an ad-hoc URL (`ssh://…`).
    pub fn lookup(&self, name_or_url: &str, file: &Path) -> Result<TargetSpec, TargetError> {
        if let Some(spec) = self.targets.get(name_or_url) {
            return Ok(spec.clone());
        }
        if name_or_url == "local" || name_or_url.contains("://") {
            Endpoint::parse(name_or_url)?;
            return Ok(TargetSpec::new(name_or_url));
        }
        Err(TargetError::UnknownTarget {
            name: name_or_url.to_owned(),
            file: file.display().to_string(),
            known: std::iter::once("local")
                .chain(self.targets.keys().map(String::as_str))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rex-targets-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("sub").join("targets.toml")
    }

    #[test]
    fn add_use_save_load_round_trip() {
        let path = temp_file("round");
        let mut t = Targets::load(&path).unwrap();
        assert_eq!(t, Targets::default(), "a missing file is empty");
        assert_eq!(t.current_name(), "local");
        t.add(
            "server-a",
            TargetSpec {
                identity_file: Some("/k".into()),
                workspace_roots: vec!["/srv/app".into()],
                ..TargetSpec::new("ssh://deploy@server-a:2222")
            },
        )
        .unwrap();
        t.use_target("server-a", &path).unwrap();
        t.save(&path).unwrap();
        let back = Targets::load(&path).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.current_name(), "server-a");
        assert_eq!(
            back.lookup("server-a", &path).unwrap().url,
            "ssh://deploy@server-a:2222"
        );
        assert!(back.remove_clone("server-a").current.is_none());
        std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
    }

    impl Targets {
        fn remove_clone(&self, name: &str) -> Targets {
            let mut t = self.clone();
            assert!(t.remove(name));
            t
        }
    }

    #[test]
    fn lookup_takes_names_local_and_urls_and_refuses_the_rest() {
        let path = PathBuf::from("/nonexistent/targets.toml");
        let t = Targets::default();
        assert_eq!(t.lookup("local", &path).unwrap().url, "local");
        assert_eq!(t.lookup("ssh://h:22", &path).unwrap().url, "ssh://h:22");
        let e = t.lookup("server-b", &path).unwrap_err();
        assert!(e.to_string().contains("known: local"), "{e}");
        let mut t = t;
        assert!(t.use_target("server-b", &path).is_err());
        assert!(t.add("bad name", TargetSpec::new("local")).is_err());
        // `local` with this machine's settings, yes; pointing elsewhere, no.
        assert!(t.add("local", TargetSpec::new("local")).is_ok());
        let e = t.add("local", TargetSpec::new("ssh://x")).unwrap_err();
        assert!(e.to_string().contains("`local` names this machine"), "{e}");
        assert_eq!(t.targets["local"].url, "local");
        assert!(t.add("ok", TargetSpec::new("ftp://h")).is_err());
    }

    #[test]
    fn a_bad_file_names_itself_and_the_problem() {
        let path = temp_file("bad");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        for (text, needle) in [
            ("current = 1", "invalid type"),
            ("[targets.a]\nurl = \"gopher://x\"\n", "target a"),
            ("[targets.a]\nurl = \"local\"\ncolour = \"red\"\n", "colour"),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = Targets::load(&path).unwrap_err().to_string();
            assert!(e.contains("targets.toml") && e.contains(needle), "{e}");
        }
        std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
    }
}
