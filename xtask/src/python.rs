//! Python: one abi3 wheel per platform (as tokenizers ships), built by maturin with zig as the
//! linker (ld64.lld for macOS): manylinux2014 and musllinux_1_2 for x86_64 and aarch64, macOS
//! universal2, Windows x64; the sdist; and a free-threaded CPython 3.14 wheel for Linux x86_64,
//! which abi3 cannot serve. `auditwheel show` must agree with every Linux wheel's tag.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use crate::target::{self, Target};
use crate::{Dist, Family, cmd, inspect, licenses};

const MANIFEST: &str = "bindings/python/Cargo.toml";
const ENTRY: &str = "PyInit__deskwire";

pub fn dist(dist: &mut Dist) -> Result<()> {
    let sdist = format!("deskwire-{}.tar.gz", dist.version);
    dist.clear(|name| name.ends_with(".whl") || name == sdist)?;
    for t in target::selected(Family::Python, dist.linux_only) {
        // --linux builds what this machine can run: not the musllinux wheels (no musl CPython
        // here); the full build makes them and checks them with auditwheel.
        if dist.linux_only && matches!(t, Target::LinuxX64Musl | Target::LinuxArm64Musl) {
            continue;
        }
        let compatibility = match t {
            Target::LinuxX64 | Target::LinuxArm64 => Some("manylinux2014"),
            Target::LinuxX64Musl | Target::LinuxArm64Musl => Some("musllinux_1_2"),
            Target::MacUniversal | Target::WindowsX64 => None,
        };
        let wheel = build(dist, t, compatibility, None)?;
        let tag = match t {
            Target::WindowsX64 => {
                let pyd = extract_extension(dist, &wheel, ".pyd")?;
                inspect::check_windows(&dist.tools, &pyd, &[ENTRY], &[ENTRY], &["python3.dll"])?
            }
            Target::MacUniversal => {
                let so = extract_extension(dist, &wheel, ".so")?;
                inspect::check_macos(&dist.tools, &so, &[ENTRY], &[ENTRY], false)?
            }
            _ => {
                let shown = auditwheel(dist, &wheel)?;
                let needs = match musl_libc_soname(t) {
                    Some(libc) => libc.to_owned(),
                    None => {
                        let so = extract_extension(dist, &wheel, ".so")?;
                        inspect::glibc_needs(&dist.tools, &so)?
                    }
                };
                format!("{shown}, needs {needs}")
            }
        };
        let tag = format!("{}; {tag}", platform_tag(&wheel)?);
        dist.add(wheel, t.triple(), tag);
    }
    // The free-threaded build (Linux x86_64): there is no abi3 for it, so pyo3 builds for
    // CPython 3.14t alone (maturin knows its sysconfig; no 3.14t interpreter is needed, and
    // none is here to run it, so --linux leaves it out).
    if !dist.linux_only {
        let wheel = build(
            dist,
            Target::LinuxX64,
            Some("manylinux2014"),
            Some("python3.14t"),
        )?;
        let shown = auditwheel(dist, &wheel)?;
        let tag = format!("{}; {shown}", platform_tag(&wheel)?);
        dist.add(wheel, Target::LinuxX64.triple(), tag);
    }
    let before = wheels_and_sdists(&dist.out)?;
    cmd::run(
        dist.tools
            .cmd("maturin")
            .args(["sdist", "-m", MANIFEST, "-o"])
            .arg(&dist.out),
    )?;
    let sdist = new_file(&dist.out, &before)?;
    check_sdist(&sdist)?;
    dist.add(sdist, "source", "sdist (builds with Rust)");
    Ok(())
}

/// `maturin build` for one target; returns the wheel, with the licence listing added.
fn build(
    dist: &Dist,
    t: Target,
    compatibility: Option<&str>,
    interpreter: Option<&str>,
) -> Result<PathBuf> {
    let out = dist.stage(&format!("wheel-{}{}", t.short(), interpreter.unwrap_or("")))?;
    let mut maturin = dist.tools.cmd("maturin");
    maturin.args([
        "build",
        "--quiet",
        "--profile",
        &dist.profile,
        "-m",
        MANIFEST,
    ]);
    match t {
        // zig links it all the same, set up by hand: `--zig` would add a .def file naming
        // an entry point the extension does not have (Tools::use_windows_gnu_linker).
        Target::WindowsX64 => dist.tools.use_windows_gnu_linker(&mut maturin)?,
        // zig's Mach-O linker exports every Rust symbol (5 here, rust_eh_personality among
        // them, where PyInit__deskwire is meant: Tools::macos_ld64); maturin makes the
        // universal2 file from the two thin ones itself, and no crate here compiles C for it.
        Target::MacUniversal => dist.tools.use_macos_ld64(&mut maturin)?,
        _ => {
            maturin.arg("--zig");
        }
    }
    maturin.args(["--target", t.triple()]);
    if let Some(c) = compatibility {
        maturin.args(["--compatibility", c]);
    }
    if let Some(i) = interpreter {
        maturin.args(["--interpreter", i]);
    }
    cmd::run(maturin.arg("-o").arg(&out))?;
    let built = new_file(&out, &[])?;
    add_listing(dist, &built, t)?;
    let wheel = dist
        .out
        .join(built.file_name().context("wheel without a name")?);
    std::fs::rename(&built, &wheel)?;
    Ok(wheel)
}

/// Adds THIRD-PARTY-LICENSES.txt to the wheel's `.dist-info/licenses/` with the `wheel`
/// tool (unpack, add, pack: pack writes RECORD again). The project's own licence files are
/// there already (pyproject.toml's license-files).
fn add_listing(dist: &Dist, wheel: &Path, t: Target) -> Result<()> {
    let unpacked = dist.stage("wheel-unpacked")?;
    cmd::run(
        dist.tools
            .cmd("wheel")
            .args(["unpack", "--dest"])
            .arg(&unpacked)
            .arg(wheel),
    )?;
    let [root] = dir_entries(&unpacked)?.try_into().map_err(|_| {
        anyhow::anyhow!(
            "wheel unpack made more than one directory in {}",
            unpacked.display()
        )
    })?;
    let [info] = dir_entries(&root)?
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".dist-info"))
        .collect::<Vec<_>>()
        .try_into()
        .map_err(|_| anyhow::anyhow!("no single .dist-info in {}", wheel.display()))?;
    if let Some(libc) = musl_libc_soname(t) {
        name_musl_libc(dist, &root, libc)?;
    }
    let licenses_dir = info.join("licenses");
    for name in licenses::PROJECT_LICENSES {
        if !licenses_dir.join(name).exists() {
            bail!(
                "{} has no {name} in its .dist-info/licenses",
                wheel.display()
            );
        }
    }
    let triples: Vec<&str> = match t {
        Target::MacUniversal => target::MAC_SLICES.to_vec(),
        _ => vec![t.triple()],
    };
    licenses::write(dist, "deskwire-python", &triples, &licenses_dir)?;
    std::fs::remove_file(wheel)?;
    let dir = wheel.parent().context("wheel without a directory")?;
    cmd::run(
        dist.tools
            .cmd("wheel")
            .args(["pack", "--dest-dir"])
            .arg(dir)
            .arg(&root),
    )?;
    if !wheel.exists() {
        bail!("wheel pack did not make {} again", wheel.display());
    }
    Ok(())
}

/// What `auditwheel show` says the wheel is consistent with; fails unless that includes the
/// wheel's own platform tag.
fn auditwheel(dist: &Dist, wheel: &Path) -> Result<String> {
    let text = cmd::output(dist.tools.cmd("auditwheel").arg("show").arg(wheel))?;
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let tags = platform_tag(wheel)?;
    // A manylinux2014 wheel is tagged manylinux2014_x86_64.manylinux_2_17_x86_64: auditwheel
    // names the PEP 600 form.
    let pep600 = pep600_platform(&tags)
        .with_context(|| format!("{} has no PEP 600 platform tag", wheel.display()))?;
    let consistent = format!("is consistent with the following platform tag: \"{pep600}\"");
    if !flat.contains(&consistent) {
        bail!(
            "auditwheel show does not agree with the tag {pep600} of {}:\n{text}",
            wheel.display()
        );
    }
    Ok(format!("auditwheel: {pep600}"))
}

/// The platform tag part of a wheel's file name.
fn platform_tag(wheel: &Path) -> Result<String> {
    let name = wheel
        .file_name()
        .and_then(|n| n.to_str())
        .context("wheel name")?;
    let stem = name.strip_suffix(".whl").context("not a .whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    let [.., python, abi, platform] = parts.as_slice() else {
        bail!("{name} is not name-version-python-abi-platform.whl");
    };
    Ok(format!("{python}-{abi}-{platform}"))
}

/// The PEP 600 platform of `python-abi-platform` tags, where auditwheel names it:
/// `manylinux_2_17_x86_64` of `...-manylinux2014_x86_64.manylinux_2_17_x86_64`, or
/// `musllinux_1_2_x86_64`.
fn pep600_platform(tags: &str) -> Option<&str> {
    let platforms = tags.rsplit('-').next()?;
    platforms
        .split('.')
        .find(|t| t.starts_with("manylinux_") || t.starts_with("musllinux_"))
}

/// Whether a path inside a wheel (`deskwire/_deskwire.abi3.so`, ...) is the extension module.
fn is_extension(path_in_wheel: &str, suffix: &str) -> bool {
    path_in_wheel.starts_with("deskwire/_deskwire") && path_in_wheel.ends_with(suffix)
}

/// Copies the extension module out of a wheel, to read it.
fn extract_extension(dist: &Dist, wheel: &Path, suffix: &str) -> Result<PathBuf> {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(wheel)?)?;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i)?;
        if is_extension(entry.name(), suffix) {
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes)?;
            let out = dist.work.join(format!("extension{suffix}"));
            std::fs::write(&out, bytes)?;
            return Ok(out);
        }
    }
    bail!("{} holds no deskwire/_deskwire*{suffix}", wheel.display())
}

/// The sdist builds everything from source: the bindings, the core and rex's targets crate.
fn check_sdist(sdist: &Path) -> Result<()> {
    let listing = {
        let file = std::fs::File::open(sdist)?;
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
        let mut names = Vec::new();
        for entry in tar.entries()? {
            names.push(entry?.path()?.display().to_string());
        }
        names
    };
    for want in [
        "pyproject.toml",
        "core/Cargo.toml",
        "rexd/targets/Cargo.toml",
        "LICENSE-MIT",
        "Cargo.lock",
    ] {
        if !listing.iter().any(|n| n.ends_with(want)) {
            bail!("{} holds no {want}", sdist.display());
        }
    }
    Ok(())
}

/// The name musl's C library goes by in a musllinux wheel's `DT_NEEDED`, as auditwheel's
/// musllinux policy whitelists it (Alpine's file name; musl's loader maps it to itself).
fn musl_libc_soname(t: Target) -> Option<&'static str> {
    match t {
        Target::LinuxX64Musl => Some("libc.musl-x86_64.so.1"),
        Target::LinuxArm64Musl => Some("libc.musl-aarch64.so.1"),
        _ => None,
    }
}

/// zig links a musl extension against its stub `libc.so`, so the extension needs `libc.so`:
/// musl's loader takes that name too, but `auditwheel show` does not, and looking for it on a
/// glibc machine finds glibc's linker script. patchelf names the library as a wheel built on
/// Alpine (the musllinux images) names it.
fn name_musl_libc(dist: &Dist, unpacked: &Path, libc: &str) -> Result<()> {
    let package = unpacked.join("deskwire");
    let extension = dir_entries(&package)?
        .into_iter()
        .find(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            is_extension(&format!("deskwire/{name}"), ".so")
        })
        .with_context(|| format!("no deskwire/_deskwire*.so in {}", package.display()))?;
    cmd::run(
        dist.tools
            .cmd("patchelf")
            .args(["--replace-needed", "libc.so", libc])
            .arg(&extension),
    )?;
    let needed = cmd::output(
        dist.tools
            .cmd("patchelf")
            .arg("--print-needed")
            .arg(&extension),
    )?;
    if needed.lines().any(|l| l.trim() == "libc.so") || !needed.lines().any(|l| l.trim() == libc) {
        bail!(
            "{} still needs {needed:?} after patchelf, not {libc}",
            extension.display()
        );
    }
    Ok(())
}

fn dir_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    Ok(entries)
}

fn wheels_and_sdists(dir: &Path) -> Result<Vec<PathBuf>> {
    dir_entries(dir)
}

/// The one file in `dir` that is not in `before`.
fn new_file(dir: &Path, before: &[PathBuf]) -> Result<PathBuf> {
    let made: Vec<PathBuf> = dir_entries(dir)?
        .into_iter()
        .filter(|p| !before.contains(p) && p.is_file())
        .collect();
    match made.as_slice() {
        [one] => Ok(one.clone()),
        _ => bail!("expected one new file in {}, found {made:?}", dir.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pep600_platform_of_each_linux_tag() {
        let cases = [
            (
                "cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64",
                Some("manylinux_2_17_x86_64"),
            ),
            (
                "cp39-abi3-musllinux_1_2_aarch64",
                Some("musllinux_1_2_aarch64"),
            ),
            ("cp39-abi3-win_amd64", None),
            ("cp39-abi3-linux_x86_64", None),
        ];
        for (tags, want) in cases {
            assert_eq!(pep600_platform(tags), want, "{tags}");
        }
        let wheel = Path::new("deskwire-0.1.0-cp39-abi3-musllinux_1_2_x86_64.whl");
        assert_eq!(
            pep600_platform(&platform_tag(wheel).unwrap()),
            Some("musllinux_1_2_x86_64")
        );
    }
}
