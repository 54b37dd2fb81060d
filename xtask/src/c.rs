//! The C library: `deskwire-VERSION-TRIPLE.tar.gz` holding `include/deskwire.h`, the libraries
//! (named libdeskwire, as ffi/install.sh installs them), a `deskwire.pc` whose prefix is
//! where the archive was unpacked (`${pcfiledir}/../..`), and under `share/doc/deskwire/` what
//! the header points to: the example host and the OA1 reference.

use std::path::Path;

use anyhow::{Result, bail};

use crate::target::{self, Target};
use crate::{Dist, Family, archive, cmd, inspect, licenses};

/// The musl tarball's lib/libunwind.a is not a Rust crate: cargo-about does not list it.
const LIBUNWIND_NOTE: &str = "
-------------------------------------------------------------------------------
lib/libunwind.a: LLVM's libunwind, as the Rust toolchain ships it for x86_64-unknown-linux-musl
(lib/rustlib/x86_64-unknown-linux-musl/lib/self-contained), under Apache-2.0 WITH
LLVM-exception: https://llvm.org/LICENSE.txt
";

/// What the header and the README send a C user to, shipped beside them (repo path, path in
/// the tarball).
const DOCS: &[(&str, &str)] = &[
    (
        "examples/c_host/c_host.c",
        "share/doc/deskwire/examples/c_host.c",
    ),
    ("docs/oa1.md", "share/doc/deskwire/oa1.md"),
];

/// Entry points every build must export (the whole API is `dw_*`).
const EXPORTS: &[&str] = &["dw_version", "dw_desk_new", "dw_desk_poll_output", "dw_*"];

/// What the library may export: its API and nothing else.
const API: &[&str] = &["dw_"];

pub fn dist(dist: &mut Dist) -> Result<()> {
    let prefix = format!("deskwire-{}-", dist.version);
    dist.clear(|name| name.starts_with(&prefix) && name.ends_with(".tar.gz"))?;
    let version = dist.version.clone();
    let major = version.split('.').next().unwrap_or("0").to_owned();
    for t in target::selected(Family::C, dist.linux_only) {
        let triple = t.triple();
        // musl targets build no cdylib (rustc drops it, with a warning).
        let crate_types = match t {
            Target::LinuxX64Musl => "staticlib",
            _ => "cdylib,staticlib",
        };
        let built = dist.build_lib(t, "deskwire-ffi", crate_types)?;
        let name = format!("deskwire-{version}-{triple}");
        let stage = dist.stage(&name)?;
        let lib = stage.join("lib");
        cmd::copy(
            &dist.root.join("include/deskwire.h"),
            &stage.join("include/deskwire.h"),
        )?;
        for (from, to) in DOCS {
            cmd::copy(&dist.root.join(from), &stage.join(to))?;
        }
        let tag = match t {
            Target::LinuxX64 | Target::LinuxArm64 => {
                let so = built.join("libdeskwire_ffi.so");
                let exported = inspect::elf_exports(&dist.tools, &so)?;
                for want in ["dw_version", "dw_desk_new"] {
                    if !exported.iter().any(|e| e == want) {
                        bail!("{} does not export {want}", so.display());
                    }
                }
                cmd::copy(&so, &lib.join(format!("libdeskwire.so.{version}")))?;
                std::os::unix::fs::symlink(
                    format!("libdeskwire.so.{version}"),
                    lib.join(format!("libdeskwire.so.{major}")),
                )?;
                std::os::unix::fs::symlink(
                    format!("libdeskwire.so.{major}"),
                    lib.join("libdeskwire.so"),
                )?;
                cmd::copy(&built.join("libdeskwire_ffi.a"), &lib.join("libdeskwire.a"))?;
                write_pc(dist, &lib, "-lpthread -ldl -lm")?;
                inspect::glibc_needs(&dist.tools, &so)?
            }
            Target::LinuxX64Musl => {
                // musl targets build no cdylib: the static library is the artifact. Rust's
                // unwinder is not in it (a Rust executable takes it from the toolchain), so the
                // toolchain's libunwind.a (LLVM's) comes along, and `pkg-config --static`
                // names it.
                cmd::copy(&built.join("libdeskwire_ffi.a"), &lib.join("libdeskwire.a"))?;
                let unwind = dist
                    .tools
                    .sysroot
                    .join("lib/rustlib")
                    .join(triple)
                    .join("lib/self-contained/libunwind.a");
                cmd::copy(&unwind, &lib.join("libunwind.a"))?;
                write_pc(dist, &lib, "-lunwind -lm")?;
                "static library (musl) + libunwind.a".into()
            }
            Target::WindowsX64 => {
                let dll = built.join("deskwire_ffi.dll");
                let tag = inspect::check_windows(&dist.tools, &dll, EXPORTS, API, &[])?;
                cmd::copy(&dll, &stage.join("bin/deskwire.dll"))?;
                import_library(dist, &stage.join("bin/deskwire.dll"), &lib)?;
                tag
            }
            Target::MacUniversal => {
                let dylib = built.join("libdeskwire_ffi.dylib");
                let tag = inspect::check_macos(&dist.tools, &dylib, EXPORTS, API, true)?;
                cmd::copy(&dylib, &lib.join("libdeskwire.dylib"))?;
                write_pc(dist, &lib, "")?;
                tag
            }
            Target::LinuxArm64Musl => bail!("no C tarball is made for {triple}"),
        };
        licenses::write(dist, "deskwire-ffi", &[triple], &stage)?;
        if t == Target::LinuxX64Musl {
            let listing = stage.join(licenses::THIRD_PARTY);
            let mut text = std::fs::read_to_string(&listing)?;
            text.push_str(LIBUNWIND_NOTE);
            std::fs::write(listing, text)?;
        }
        let tarball = dist.out.join(format!("{name}.tar.gz"));
        archive::tar_gz(&stage, &name, &tarball, dist.source_date)?;
        dist.add(tarball, triple, tag);
    }
    Ok(())
}

/// `lib/pkgconfig/deskwire.pc` from ffi/deskwire.pc.in, relocatable: pkg-config sets
/// `pcfiledir` to the directory the file was found in.
fn write_pc(dist: &Dist, lib: &Path, libs_private: &str) -> Result<()> {
    let template = std::fs::read_to_string(dist.root.join("ffi/deskwire.pc.in"))?;
    let mut pc = template
        .replace("@PREFIX@", "${pcfiledir}/../..")
        .replace("@LIBDIR@", "${prefix}/lib")
        .replace("@INCLUDEDIR@", "${prefix}/include")
        .replace("@VERSION@", &dist.version);
    if !pc.contains("Libs.private:") {
        bail!("ffi/deskwire.pc.in has no Libs.private line");
    }
    pc = pc
        .lines()
        .filter(|line| !(line.starts_with("Libs.private:") && libs_private.is_empty()))
        .map(|line| {
            if line.starts_with("Libs.private:") {
                format!("Libs.private: {libs_private}\n")
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    let dir = lib.join("pkgconfig");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("deskwire.pc"), pc)?;
    Ok(())
}

/// `lib/deskwire.lib`, the import library for `deskwire.dll`, made with zig's dlltool from the
/// DLL's export table: MSVC's link.exe takes it as `deskwire.lib`, MinGW's ld as `-ldeskwire`.
/// A program is then linked against it to check that it resolves to deskwire.dll.
fn import_library(dist: &Dist, dll: &Path, lib: &Path) -> Result<()> {
    let exports = cmd::output(dist.tools.cmd(&dist.tools.objdump).arg("-p").arg(dll))?;
    let mut def = String::from("LIBRARY deskwire.dll\nEXPORTS\n");
    let mut in_table = false;
    for line in exports.lines() {
        if line.trim_start().starts_with("Export Table:") {
            in_table = true;
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if in_table && fields.len() == 3 && fields[0].parse::<u32>().is_ok() {
            def.push_str(&format!("    {}\n", fields[2]));
        }
    }
    std::fs::create_dir_all(lib)?;
    let def_file = dist.work.join("deskwire.def");
    std::fs::write(&def_file, def)?;
    cmd::run(
        dist.tools
            .cmd("python3")
            .args(["-m", "ziglang", "dlltool", "-m", "i386:x86-64", "-d"])
            .arg(&def_file)
            .arg("-D")
            .arg("deskwire.dll")
            .arg("-l")
            .arg(lib.join("deskwire.lib")),
    )?;
    // A program linked against the import library must import deskwire.dll.
    let probe = dist.work.join("probe.c");
    std::fs::write(
        &probe,
        "#include <deskwire.h>\n#include <stdio.h>\nint main(void) { puts(dw_version()); return 0; }\n",
    )?;
    let exe = dist.work.join("probe.exe");
    cmd::run(
        dist.tools
            .cmd("python3")
            .args(["-m", "ziglang", "cc", "-target", "x86_64-windows-gnu"])
            .arg(&probe)
            .arg(format!("-I{}", dist.root.join("include").display()))
            .arg(format!("-L{}", lib.display()))
            .args(["-ldeskwire", "-o"])
            .arg(&exe),
    )?;
    let imports = cmd::output(dist.tools.cmd(&dist.tools.objdump).arg("-p").arg(&exe))?;
    if !imports
        .lines()
        .any(|l| l.trim() == "DLL Name: deskwire.dll")
    {
        bail!("a program linked with lib/deskwire.lib does not import deskwire.dll");
    }
    Ok(())
}
