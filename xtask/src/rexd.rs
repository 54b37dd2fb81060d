//! rexd and rex: static musl binaries (one file each, no libc needed: `scp rexd host:` and run),
//! in ripgrep's archive layout, and a `.deb` per architecture from cargo-deb.
//!
//! They are linked by rust-lld against Rust's own musl (the target's self-contained libc.a),
//! not by zig: zig's musl has no `renameat2`, which rexd's atomic file writes call. The C in
//! their crates (ring's) is compiled by `zig cc` for the musl target: a fresh Debian has no
//! musl C compiler, and zig carries musl's headers.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Result, bail};

use crate::target::{self, Target};
use crate::{Dist, Family, archive, cmd, inspect, licenses};

pub fn dist(dist: &mut Dist) -> Result<()> {
    dist.clear(|name| name.starts_with("rexd-") || name.starts_with("rexd_"))?;
    let mut cli: Option<CliFiles> = None;
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
        // The --help texts, shell completions and man pages come from the x86_64 binaries,
        // which run here (built first); they are the same for every target.
        if cli.is_none() && t == Target::LinuxX64Musl {
            cli = Some(CliFiles::generate(dist, &built)?);
        }
        let Some(cli) = &cli else {
            bail!("the completions need rexd from the x86_64 build, which was not built");
        };

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
        // As ripgrep's archives: complete/ (bash, zsh, fish) and the man pages, in man/.
        cli.write_tarball(&stage)?;
        licenses::write(dist, "rexd", &[triple], &stage)?;
        let tarball = dist.out.join(format!("{name}.tar.gz"));
        archive::tar_gz(&stage, &name, &tarball, dist.source_date)?;
        dist.add(tarball, triple, "static (no libc)");

        // cargo-deb takes the binaries from target/<triple>/dist and, through the assets named
        // target/release/deb/... in rexd/Cargo.toml, these files from target/<triple>/<profile>/deb.
        let extra = built.join("deb");
        std::fs::create_dir_all(&extra)?;
        cli.write_deb(&extra)?;
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

/// What rexd and rex say about themselves, from their clap definitions: `--help`, what their
/// hidden `--generate-completions SHELL` prints, and the man pages `--generate-man DIR` writes
/// (src/cli.rs).
struct CliFiles {
    /// (program, --help, bash, zsh, fish)
    programs: Vec<[String; 5]>,
    /// (file name, page): `rex.1`, `rexd.1`, and one per subcommand (`rex-exec.1`, ...).
    man_pages: Vec<(String, String)>,
}

impl CliFiles {
    fn generate(dist: &Dist, built: &Path) -> Result<CliFiles> {
        let mut programs = Vec::new();
        let man_dir = built.join("man-pages");
        if man_dir.exists() {
            std::fs::remove_dir_all(&man_dir)?;
        }
        std::fs::create_dir_all(&man_dir)?;
        for bin in ["rexd", "rex"] {
            let run = |args: &[&str]| cmd::output(dist.tools.cmd(built.join(bin)).args(args));
            programs.push([
                bin.to_owned(),
                run(&["--help"])?,
                run(&["--generate-completions", "bash"])?,
                run(&["--generate-completions", "zsh"])?,
                run(&["--generate-completions", "fish"])?,
            ]);
            run(&["--generate-man", &man_dir.to_string_lossy()])?;
        }
        let mut man_pages = Vec::new();
        for entry in std::fs::read_dir(&man_dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            man_pages.push((name, std::fs::read_to_string(entry.path())?));
        }
        man_pages.sort();
        // The .deb takes each page by the name rexd/Cargo.toml gives it: one it does not name
        // would be left out of the package without a word.
        let manifest = std::fs::read_to_string(dist.root.join("rexd/Cargo.toml"))?;
        for (name, _) in &man_pages {
            let asset = format!("\"target/release/deb/man/{name}.gz\"");
            if !manifest.contains(&asset) {
                bail!(
                    "rexd/Cargo.toml's [package.metadata.deb] assets lack {asset} (a new subcommand's man page)"
                );
            }
        }
        Ok(CliFiles {
            programs,
            man_pages,
        })
    }

    /// complete/NAME.bash, complete/_NAME, complete/NAME.fish and man/NAME.1.
    fn write_tarball(&self, stage: &Path) -> Result<()> {
        std::fs::create_dir_all(stage.join("complete"))?;
        std::fs::create_dir_all(stage.join("man"))?;
        for [bin, _help, bash, zsh, fish] in &self.programs {
            std::fs::write(stage.join(format!("complete/{bin}.bash")), bash)?;
            std::fs::write(stage.join(format!("complete/_{bin}")), zsh)?;
            std::fs::write(stage.join(format!("complete/{bin}.fish")), fish)?;
        }
        for (name, page) in &self.man_pages {
            std::fs::write(stage.join("man").join(name), page)?;
        }
        Ok(())
    }

    /// The .deb's assets in `target/<triple>/<profile>/deb` (rexd/Cargo.toml names where each
    /// is installed): NAME-help.txt, completions/{NAME,_NAME,NAME.fish} and man/PAGE.1.gz
    /// (`gzip -9n`, as Debian wants: no name or time in the header).
    fn write_deb(&self, extra: &Path) -> Result<()> {
        std::fs::create_dir_all(extra.join("completions"))?;
        std::fs::create_dir_all(extra.join("man"))?;
        for [bin, help, bash, zsh, fish] in &self.programs {
            std::fs::write(extra.join(format!("{bin}-help.txt")), help)?;
            std::fs::write(extra.join(format!("completions/{bin}")), bash)?;
            std::fs::write(extra.join(format!("completions/_{bin}")), zsh)?;
            std::fs::write(extra.join(format!("completions/{bin}.fish")), fish)?;
        }
        for (name, page) in &self.man_pages {
            let mut gz = flate2::GzBuilder::new()
                .mtime(0)
                .write(Vec::new(), flate2::Compression::best());
            gz.write_all(page.as_bytes())?;
            std::fs::write(extra.join("man").join(format!("{name}.gz")), gz.finish()?)?;
        }
        Ok(())
    }
}

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
