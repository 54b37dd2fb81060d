//! Licences: cargo-deny checks the dependency graph (licences, bans, sources) before anything is
//! built, and cargo-about lists the crates linked into each artifact with their licence texts.
//!
//! cargo-deny's advisories check is not run: it needs the RustSec database from GitHub, which
//! the machines that build deskwire cannot reach.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::Dist;
use crate::cmd;

/// The project's own licence files, copied into every archive.
pub const PROJECT_LICENSES: &[&str] = &["LICENSE-MIT", "LICENSE-APACHE"];

/// The listing's file name inside each archive.
pub const THIRD_PARTY: &str = "THIRD-PARTY-LICENSES.txt";

/// `cargo deny check licenses bans sources` over the workspace (deny.toml).
pub fn check(dist: &Dist) -> Result<()> {
    cmd::run(dist.tools.cmd("cargo").args([
        "deny",
        "--log-level",
        "error",
        "check",
        "licenses",
        "bans",
        "sources",
    ]))
}

/// Writes the listing for `package` (its normal dependencies, for the Rust targets `triples`)
/// into `dir`, next to the project's licence files.
pub fn write(dist: &Dist, package: &str, triples: &[&str], dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    for name in PROJECT_LICENSES {
        cmd::copy(&dist.root.join(name), &dir.join(name))?;
    }
    let listing = listing(dist, package, triples)?;
    std::fs::copy(listing, dir.join(THIRD_PARTY))?;
    Ok(())
}

/// The listing for `package`, made once per run.
fn listing(dist: &Dist, package: &str, triples: &[&str]) -> Result<PathBuf> {
    let out = dist
        .work
        .join(format!("licenses-{package}-{}.txt", triples.join("+")));
    if out.exists() {
        return Ok(out);
    }
    let manifest = package_manifest(&dist.root, package)?;
    let config = dist.root.join("xtask/licenses/about.toml");
    let template = dist.root.join("xtask/licenses/about.hbs");
    let mut about = dist.tools.cmd("cargo");
    about
        .args(["about", "generate", "--locked", "--fail", "-c"])
        .arg(config);
    about.arg("-m").arg(manifest);
    for triple in triples {
        about.args(["--target", triple]);
    }
    about.arg("-o").arg(&out).arg(template);
    cmd::run(&mut about)?;
    let text = std::fs::read_to_string(&out)?;
    if !text.contains("serde_json") && !text.contains("memchr") {
        bail!("{} lists none of the crates {package} links", out.display());
    }
    Ok(out)
}

fn package_manifest(root: &Path, package: &str) -> Result<PathBuf> {
    let dir = match package {
        "deskwire-ffi" => "ffi",
        "deskwire-godot" => "godot",
        "deskwire-python" => "bindings/python",
        "deskwire-uniffi" => "bindings/kotlin",
        "rexd" => "rexd",
        other => bail!("no manifest known for package {other}"),
    };
    Ok(root.join(dir).join("Cargo.toml"))
}
