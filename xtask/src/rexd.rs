//! rexd and rex: static musl binaries (one file each, no libc needed: `scp rexd host:` and run),
//! in ripgrep's archive layout, and a `.deb` per architecture from cargo-deb.
//!
//! They are linked by rust-lld against Rust's own musl (the target's self-contained libc.a),
//! not by zig: zig's musl has no `renameat2`, which rexd's atomic file writes call. The C in
//! their crates (ring's) is compiled by `zig cc` for the musl target: a fresh Debian has no
//! musl C compiler, and zig carries musl's headers.

use anyhow::{Result, bail};

use crate::target::{self, Target};
use crate::{Dist, Family, archive, cmd, inspect, licenses};

pub fn dist(dist: &mut Dist) -> Result<()> {
    dist.clear(|name| name.starts_with("rexd-") || name.starts_with("rexd_"))?;
    let mut help: Option<(String, String)> = None;
    for t in target::selected(Family::Rexd, dist.linux_only) {
        let triple = t.triple();
        let linker_var = format!(
            "CARGO_TARGET_{}_LINKER",
            triple.to_uppercase().replace('-', "_")
        );
        let cc_var = format!("CC_{}", triple.replace('-', "_"));
        let zig_target = triple.replace("-unknown-linux-", "-linux-");
        let cc = dist.tools.zig_cc(&zig_target)?;
        cmd::run(
            dist.tools
                .cmd("cargo")
                .env(linker_var, "rust-lld")
                .env(cc_var, cc)
                .args(["build", "--quiet", "--profile", &dist.profile])
                .args(["--target", triple])
                .args(["-p", "rexd", "--bin", "rexd", "--bin", "rex"]),
        )?;
        let built = dist.built(triple);
        for bin in ["rexd", "rex"] {
            let needs = inspect::glibc_needs(&dist.tools, &built.join(bin))?;
            if needs != "static" {
                bail!("{triple}/{bin} is not static: it needs {needs}");
            }
        }
        // The --help texts go into the .deb; the x86_64 binary runs here (built first).
        if help.is_none() && t == Target::LinuxX64Musl {
            let text = |bin: &str| cmd::output(dist.tools.cmd(built.join(bin)).arg("--help"));
            help = Some((text("rexd")?, text("rex")?));
        }

        let name = format!("rexd-{}-{triple}", dist.version);
        let stage = dist.stage(&name)?;
        for bin in ["rexd", "rex"] {
            cmd::copy(&built.join(bin), &stage.join(bin))?;
        }
        // The .deb's systemd units and the files they read, for a host without dpkg
        // (docs/rexd.md, "Under systemd", says where each goes).
        for (from, to) in SYSTEMD_FILES {
            cmd::copy(
                &dist.root.join("rexd/debian").join(from),
                &stage.join("systemd").join(to),
            )?;
        }
        licenses::write(dist, "rexd", &[triple], &stage)?;
        let tarball = dist.out.join(format!("{name}.tar.gz"));
        archive::tar_gz(&stage, &name, &tarball, dist.source_date)?;
        dist.add(tarball, triple, "static (no libc)");

        // cargo-deb takes the binaries from target/<triple>/dist and, through the assets named
        // target/release/deb/... in rexd/Cargo.toml, these files from target/<triple>/<profile>/deb.
        let Some((rexd_help, rex_help)) = &help else {
            bail!("the .deb needs rexd --help from the x86_64 build, which was not built");
        };
        let extra = built.join("deb");
        std::fs::create_dir_all(&extra)?;
        std::fs::write(extra.join("rexd-help.txt"), rexd_help)?;
        std::fs::write(extra.join("rex-help.txt"), rex_help)?;
        licenses::write(dist, "rexd", &[triple], &extra)?;
        let before = debs(dist)?;
        cmd::run(
            dist.tools
                .cmd("cargo")
                .args(["deb", "--quiet", "-p", "rexd", "--no-build", "--no-strip"])
                .args(["--profile", &dist.profile, "--target", triple, "--output"])
                .arg(&dist.out)
                // cargo-deb dates the package's files with it, as the archives are.
                .env("SOURCE_DATE_EPOCH", dist.source_date.to_string()),
        )?;
        let made: Vec<_> = debs(dist)?
            .into_iter()
            .filter(|d| !before.contains(d))
            .collect();
        let [deb] = made.as_slice() else {
            bail!("cargo deb made {} packages, expected one", made.len());
        };
        let arch = if t == Target::LinuxX64Musl {
            "amd64"
        } else {
            "arm64"
        };
        dist.add(deb.clone(), triple, format!("Debian {arch}, static"));
    }
    Ok(())
}

/// What the tarballs carry in `systemd/`: (in rexd/debian/, as named in the tarball).
const SYSTEMD_FILES: [(&str, &str); 6] = [
    ("rexd.service", "rexd.service"),
    ("rexd-listen.service", "rexd-listen.service"),
    ("default", "default-rexd"),
    ("default-listen", "default-rexd-listen"),
    ("rexd.toml", "rexd.toml"),
    ("etc-README", "README"),
];

fn debs(dist: &Dist) -> Result<Vec<std::path::PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dist.out)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "deb") {
            found.push(path);
        }
    }
    Ok(found)
}
