//! `cargo xtask dist`: builds every release artifact of deskwire into `dist/` (the
//! rust-analyzer pattern: an ordinary Rust program in the workspace, the same locally and in CI);
//! `cargo xtask docs` builds every reference into `target/doc-site/` (docs.rs says what).
//!
//! ```text
//! cargo xtask dist                          everything, for every platform
//! cargo xtask dist --only python,rexd       some families (python, godot, kotlin, c, rexd)
//! cargo xtask dist --linux                  only the Linux x86_64 and aarch64 artifacts that
//!                                           this machine runs (what CI builds and tests)
//! cargo xtask dist --linux --profile dist-ci   the same, unoptimized (quicker, for CI's install tests)
//! cargo xtask docs                          the references, linked from one index page; links checked
//! ```
//!
//! It installs what it needs itself (zig, cargo-zigbuild, maturin and auditwheel into a virtual
//! environment; cargo-deb, cargo-about and cargo-deny with `cargo install`; the Rust standard
//! libraries with `rustup target add`), under `${DESKWIRE_CACHE:-$HOME/.cache/deskwire}`,
//! outside the clone. It ends with `dist/SHA256SUMS` and a table of what it made.

mod archive;
mod c;
mod cmd;
mod docs;
mod godot;
mod inspect;
mod kotlin;
mod licenses;
mod python;
mod rexd;
mod target;
mod tools;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use sha2::{Digest, Sha256};

use crate::tools::Tools;

#[derive(Parser)]
#[command(about = "deskwire's release tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the release artifacts into dist/, with dist/SHA256SUMS.
    Dist {
        /// Build only these families (comma-separated).
        #[arg(long, value_delimiter = ',')]
        only: Vec<Family>,
        /// Only the Linux x86_64 and aarch64 artifacts this machine can run (CI's build): not
        /// the macOS and Windows ones, nor the musllinux and free-threaded wheels.
        #[arg(long)]
        linux: bool,
        /// The Cargo profile the libraries and binaries are built with. Releases use `dist`
        /// (fat LTO, one codegen unit); `dist-ci` builds the same artifacts unoptimized, in
        /// less time, for CI's install tests.
        #[arg(long, default_value = "dist")]
        profile: String,
    },
    /// Build every reference into target/doc-site/ (the protocol book, rustdoc, pdoc, Dokka,
    /// Doxygen), linked from one index page, and check its internal links offline.
    Docs {
        /// A Python whose environment has deskwire installed (else ./bindings/python is
        /// installed into the docs venv under the cache).
        #[arg(long, value_name = "PYTHON")]
        python: Option<PathBuf>,
        /// Take the Kotlin pages from this deskwire-VERSION-javadoc.jar (cargo xtask dist
        /// makes it with Dokka from the same sources) instead of running Dokka.
        #[arg(long, value_name = "JAR")]
        kotlin_javadoc_jar: Option<PathBuf>,
        /// Only check the links of the site that is there.
        #[arg(long)]
        check_only: bool,
    },
}

/// A family of artifacts: what one ecosystem installs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Family {
    /// abi3 wheels, the sdist and the free-threaded wheel.
    Python,
    /// The addon zip for the Godot Asset Library.
    Godot,
    /// The JAR with its natives under JNA's resource paths, in dist/maven.
    Kotlin,
    /// The C tarballs: header, libraries, pkg-config file.
    C,
    /// Static rexd and rex, as tarballs and .deb packages.
    Rexd,
}

/// One file in dist/ and what the table says about it.
pub struct Artifact {
    /// The file, under dist/.
    pub path: PathBuf,
    /// The Rust target (or targets) it was built for.
    pub target: String,
    /// The platform tag, or the newest glibc symbol version it needs, or what it is.
    pub tag: String,
}

/// What every family's build gets: where things are and what has been made so far.
pub struct Dist {
    /// The workspace root.
    pub root: PathBuf,
    /// cargo's target directory (CARGO_TARGET_DIR is honoured).
    pub target_dir: PathBuf,
    /// dist/ under the workspace root.
    pub out: PathBuf,
    /// A scratch directory for staging archives, inside the target directory.
    pub work: PathBuf,
    /// The workspace version: every artifact carries it.
    pub version: String,
    /// The date archives give their entries (Unix seconds): archive::source_date.
    pub source_date: u64,
    /// Only the Linux x86_64 and aarch64 targets.
    pub linux_only: bool,
    /// The Cargo profile everything is built with (`dist` for releases).
    pub profile: String,
    pub tools: Tools,
    pub artifacts: Vec<Artifact>,
}

impl Dist {
    /// Records a file in dist/ for the table and SHA256SUMS.
    pub fn add(&mut self, path: PathBuf, target: impl Into<String>, tag: impl Into<String>) {
        self.artifacts.push(Artifact {
            path,
            target: target.into(),
            tag: tag.into(),
        });
    }

    /// The release-profile output directory of cargo for a Rust target.
    pub fn built(&self, triple: &str) -> PathBuf {
        self.target_dir.join(triple).join(&self.profile)
    }

    /// Builds the library of `package` for `t` as `crate_types` and returns cargo's output
    /// directory for it.
    /// - It runs `cargo rustc --crate-type` (through cargo-zigbuild, zig as the linker): the
    ///   manifests also name `rlib`, for the workspace's tests, and Cargo runs no LTO for a
    ///   crate that is an rlib too, so a plain build would drop the profile's fat LTO unsaid.
    /// - Where zig's linker drops rustc's list of exported symbols (macOS and Windows), the
    ///   link goes to a linker that applies it (Tools::macos_ld64,
    ///   Tools::use_windows_gnu_linker): the library then exports its API and nothing else.
    /// - cargo-zigbuild makes universal2 files for `build` only: the two macOS slices are built
    ///   one after the other and joined here with fat-macho, the crate it and maturin use.
    pub fn build_lib(
        &self,
        t: target::Target,
        package: &str,
        crate_types: &str,
    ) -> Result<PathBuf> {
        let triples = match t {
            target::Target::MacUniversal => target::MAC_SLICES.map(str::to_owned).to_vec(),
            _ => vec![t.zig_triple()],
        };
        for triple in &triples {
            let mut cargo = self.tools.cmd("cargo-zigbuild");
            cargo
                .args(["rustc", "--quiet", "--profile", &self.profile])
                .args(["--target", triple, "-p", package, "--lib"])
                .args(["--crate-type", crate_types]);
            match t {
                target::Target::MacUniversal => self.tools.use_macos_ld64(&mut cargo)?,
                target::Target::WindowsX64 => self.tools.use_windows_gnu_linker(&mut cargo)?,
                _ => {}
            }
            cmd::run(&mut cargo)?;
        }
        let built = self.built(t.triple());
        if t == target::Target::MacUniversal {
            let name = format!("lib{}.dylib", package.replace('-', "_"));
            let mut fat = fat_macho::FatWriter::new();
            for triple in &triples {
                let slice = self.built(triple).join(&name);
                let bytes = std::fs::read(&slice)
                    .with_context(|| format!("reading {}", slice.display()))?;
                fat.add(bytes)
                    .with_context(|| format!("{} is no Mach-O library", slice.display()))?;
            }
            std::fs::create_dir_all(&built)?;
            fat.write_to_file(built.join(&name))?;
        }
        Ok(built)
    }

    /// Removes what an earlier run of a family left in dist/: the files whose names `ours`
    /// picks (directories too).
    pub fn clear(&self, ours: impl Fn(&str) -> bool) -> Result<()> {
        for entry in std::fs::read_dir(&self.out)? {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if ours(name) {
                if path.is_dir() {
                    std::fs::remove_dir_all(&path)?;
                } else {
                    std::fs::remove_file(&path)?;
                }
            }
        }
        Ok(())
    }

    /// A fresh staging directory `work/name`.
    pub fn stage(&self, name: &str) -> Result<PathBuf> {
        let dir = self.work.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Dist {
            only,
            linux,
            profile,
        } => dist(only, linux, profile),
        Command::Docs {
            python,
            kotlin_javadoc_jar,
            check_only,
        } => docs::docs(docs::Options {
            python,
            kotlin_javadoc_jar,
            check_only,
        }),
    }
}

fn dist(only: Vec<Family>, linux_only: bool, profile: String) -> Result<()> {
    let started = Instant::now();
    let root = project_root();
    std::env::set_current_dir(&root)?;
    let target_dir = cargo_target_dir(&root)?;
    let out = root.join("dist");
    // A whole build starts from an empty dist/; --only replaces its families' files and keeps
    // the others' (SHA256SUMS covers every file there).
    let families = if only.is_empty() {
        if out.exists() {
            std::fs::remove_dir_all(&out)?;
        }
        vec![
            Family::Rexd,
            Family::C,
            Family::Python,
            Family::Godot,
            Family::Kotlin,
        ]
    } else {
        only
    };
    std::fs::create_dir_all(&out)?;
    let work = target_dir.join("dist-work");
    std::fs::create_dir_all(&work)?;
    let tools = Tools::ensure(&target::needed(&families, linux_only))?;
    let mut dist = Dist {
        version: workspace_version(&root)?,
        source_date: archive::source_date(&root)?,
        root,
        target_dir,
        out,
        work,
        linux_only,
        profile,
        tools,
        artifacts: Vec::new(),
    };
    eprintln!(
        "== deskwire {} into {} (profile {})",
        dist.version,
        dist.out.display(),
        dist.profile
    );
    licenses::check(&dist)?;
    for family in families {
        let at = Instant::now();
        eprintln!("== {family:?}");
        match family {
            Family::Python => python::dist(&mut dist)?,
            Family::Godot => godot::dist(&mut dist)?,
            Family::Kotlin => kotlin::dist(&mut dist)?,
            Family::C => c::dist(&mut dist)?,
            Family::Rexd => rexd::dist(&mut dist)?,
        }
        eprintln!("== {family:?} took {:.0?}", at.elapsed());
    }
    write_sums(&dist)?;
    print!("{}", table(&dist)?);
    println!(
        "dist: {} artifacts in {:.0?}",
        dist.artifacts.len(),
        started.elapsed()
    );
    Ok(())
}

/// `dist/SHA256SUMS`, in `sha256sum -c` format: every file under dist/ (dist/maven's too),
/// paths relative to dist/.
fn write_sums(dist: &Dist) -> Result<()> {
    let mut sums = String::new();
    let mut files = Vec::new();
    walk(&dist.out, &mut files)?;
    let list = dist.out.join("SHA256SUMS");
    files.retain(|f| *f != list);
    files.sort();
    for file in files {
        let digest = Sha256::digest(std::fs::read(&file)?);
        let name = file.strip_prefix(&dist.out)?.display().to_string();
        writeln!(sums, "{digest:x}  {name}")?;
    }
    std::fs::write(dist.out.join("SHA256SUMS"), sums)?;
    Ok(())
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

fn table(dist: &Dist) -> Result<String> {
    let mut rows = vec![[
        "artifact".to_owned(),
        "target".into(),
        "size".into(),
        "tag / needs".into(),
    ]];
    for a in &dist.artifacts {
        let size = if a.path.is_dir() {
            let mut files = Vec::new();
            walk(&a.path, &mut files)?;
            files
                .iter()
                .map(|f| f.metadata().map(|m| m.len()))
                .sum::<std::io::Result<u64>>()?
        } else {
            a.path.metadata()?.len()
        };
        let name = a.path.strip_prefix(&dist.out)?.display().to_string();
        rows.push([name, a.target.clone(), human(size), a.tag.clone()]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut text = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        writeln!(text, "{}", line.join("  ").trim_end())?;
    }
    Ok(text)
}

fn human(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else {
        format!("{} KiB", bytes.div_ceil(1024))
    }
}

/// The workspace root: xtask/ is one of its members.
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ has a parent")
        .to_path_buf()
}

/// `[workspace.package] version` of the root Cargo.toml: the one version every artifact carries.
pub fn workspace_version(root: &Path) -> Result<String> {
    let text = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let manifest: toml::Table = text.parse()?;
    manifest
        .get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(|p| p.get("version"))
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .context("no [workspace.package] version in Cargo.toml")
}

fn cargo_target_dir(root: &Path) -> Result<PathBuf> {
    let output = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let meta: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    meta["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("cargo metadata gave no target_directory")
}
