//! Kotlin/JVM: the JAR `dev.deskwire:deskwire:VERSION` with its sources JAR, a javadoc JAR (the
//! Dokka HTML of the API) and a POM naming its dependencies, in a file-based Maven repository
//! at `dist/maven`. The native library rides in
//! the JAR under JNA's resource paths (`linux-x86-64/`, `linux-aarch64/`, `darwin-x86-64/`,
//! `darwin-aarch64/`, `win32-x86-64/`), as application-services' desktop JAR carries its
//! megazord, so a JVM needs neither cargo nor `jna.library.path`.
//!
//! The packaging POM is `xtask/maven/pom.xml`: it compiles bindings/kotlin's sources and leaves
//! bindings/kotlin/pom.xml (the development build and its tests) alone.

use anyhow::{Result, bail};

use crate::target::{self, Target};
use crate::{Dist, Family, cmd, inspect, licenses};

/// What the Kotlin bindings call (uniffi's scaffolding and the exported functions).
const EXPORTS: &[&str] = &[
    "ffi_deskwire_uniffi_uniffi_contract_version",
    "uniffi_deskwire_uniffi_fn_*",
];

/// What the library may export: uniffi's scaffolding for this crate and the core's types, its
/// metadata (what uniffi-bindgen reads), and the byte pump ConnectionPump.kt calls directly.
const API: &[&str] = &[
    "ffi_deskwire_",
    "uniffi_deskwire_",
    "UNIFFI_META_",
    "deskwire_uniffi_",
];

pub fn dist(dist: &mut Dist) -> Result<()> {
    dist.clear(|name| name == "maven")?;
    let natives = dist.stage("jar-resources")?;
    let mut triples = Vec::new();
    let mut tags = Vec::new();
    for t in target::selected(Family::Kotlin, dist.linux_only) {
        let triple = t.triple();
        let built = dist.build_lib(t, "deskwire-uniffi", "cdylib")?;
        match t {
            Target::LinuxX64 | Target::LinuxArm64 => {
                let so = built.join("libdeskwire_uniffi.so");
                let exported = inspect::elf_exports(&dist.tools, &so)?;
                for want in EXPORTS {
                    let prefix = want.trim_end_matches('*');
                    if !exported.iter().any(|e| e.starts_with(prefix)) {
                        bail!("{} does not export {want}", so.display());
                    }
                }
                let dir = if t == Target::LinuxX64 {
                    "linux-x86-64"
                } else {
                    "linux-aarch64"
                };
                cmd::copy(&so, &natives.join(dir).join("libdeskwire_uniffi.so"))?;
                tags.push(format!(
                    "{dir}: {}",
                    inspect::glibc_needs(&dist.tools, &so)?
                ));
                triples.push(triple);
            }
            Target::WindowsX64 => {
                let dll = built.join("deskwire_uniffi.dll");
                inspect::check_windows(&dist.tools, &dll, EXPORTS, API, &[])?;
                cmd::copy(&dll, &natives.join("win32-x86-64/deskwire_uniffi.dll"))?;
                tags.push("win32-x86-64".into());
                triples.push(triple);
            }
            Target::MacUniversal => {
                let universal = built.join("libdeskwire_uniffi.dylib");
                inspect::check_macos(&dist.tools, &universal, EXPORTS, API, true)?;
                // JNA looks per architecture: the two thin builds the universal one was made of.
                for (dir, thin) in [
                    ("darwin-x86-64", "x86_64-apple-darwin"),
                    ("darwin-aarch64", "aarch64-apple-darwin"),
                ] {
                    let dylib = dist.built(thin).join("libdeskwire_uniffi.dylib");
                    cmd::copy(&dylib, &natives.join(dir).join("libdeskwire_uniffi.dylib"))?;
                    tags.push(dir.into());
                    triples.push(thin);
                }
            }
            _ => bail!("no JVM native library is made for {triple}"),
        }
    }
    licenses::write(dist, "deskwire-uniffi", &triples, &natives.join("META-INF"))?;

    let repo = dist.out.join("maven");
    let m2 = dist.tools.cache.join("m2");
    cmd::run(
        dist.tools
            .cmd("mvn")
            .args([
                "-B",
                "-q",
                "-Dstyle.color=never",
                "-f",
                "xtask/maven/pom.xml",
            ])
            .arg(format!("-Dmaven.repo.local={}", m2.display()))
            .arg(format!("-Drevision={}", dist.version))
            .arg(format!("-Ddeskwire.natives={}", natives.display()))
            .arg(format!(
                "-Ddeskwire.build={}",
                dist.work.join("maven-build").display()
            ))
            .arg(format!(
                "-DaltDeploymentRepository=dist::file://{}",
                repo.display()
            ))
            .args(["clean", "deploy"]),
    )?;
    let base = repo.join("dev/deskwire/deskwire").join(&dist.version);
    // The main JAR, and the sources and javadoc JARs Maven Central requires beside it (the
    // javadoc one holds Dokka's HTML: tests/dist/run.sh opens both).
    for suffix in [".jar", "-sources.jar", "-javadoc.jar", ".pom"] {
        let file = base.join(format!("deskwire-{}{suffix}", dist.version));
        if !file.exists() {
            bail!("mvn deploy made no {}", file.display());
        }
    }
    let pom = std::fs::read_to_string(base.join(format!("deskwire-{}.pom", dist.version)))?;
    if pom.contains("${revision}") || !pom.contains("<artifactId>jna</artifactId>") {
        bail!("the deployed POM does not name its version and dependencies:\n{pom}");
    }
    dist.add(
        repo,
        triples.join(" "),
        format!(
            "dev.deskwire:deskwire:{} (JNA: {})",
            dist.version,
            tags.join(", ")
        ),
    );
    Ok(())
}
