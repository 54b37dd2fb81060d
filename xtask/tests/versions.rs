//! One version number everywhere: the workspace's. Every crate inherits it (so the wheel,
//! `deskwire.__version__`, the .deb and `rexd --version` carry it), and the files that must
//! spell it out (the C header's macros, the Kotlin development POM) say the same; cargo xtask
//! dist passes it to the published POM and names the archives with it. tests/dist/run.sh
//! checks it again in the built artifacts.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn workspace_version() -> String {
    let manifest: toml::Table = read("Cargo.toml").parse().unwrap();
    manifest["workspace"]["package"]["version"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn every_crate_inherits_the_workspace_version() {
    let manifest: toml::Table = read("Cargo.toml").parse().unwrap();
    let members = manifest["workspace"]["members"].as_array().unwrap();
    assert!(members.len() > 5);
    for member in members {
        let member = member.as_str().unwrap();
        let crate_manifest: toml::Table = read(&format!("{member}/Cargo.toml")).parse().unwrap();
        let version = &crate_manifest["package"]["version"];
        assert_eq!(
            version.get("workspace").and_then(|w| w.as_bool()),
            Some(true),
            "{member}/Cargo.toml sets its own version ({version}); use version.workspace = true"
        );
    }
}

#[test]
fn the_c_header_says_the_workspace_version() {
    let version = workspace_version();
    let header = read("include/deskwire.h");
    assert!(
        header.contains(&format!("#define DW_VERSION_STRING \"{version}\"")),
        "include/deskwire.h: DW_VERSION_STRING is not \"{version}\""
    );
    let parts: Vec<&str> = version.split(['.', '-']).collect();
    for (name, value) in ["MAJOR", "MINOR", "PATCH"].iter().zip(&parts) {
        assert!(
            header.contains(&format!("#define DW_VERSION_{name} {value}\n")),
            "include/deskwire.h: DW_VERSION_{name} is not {value}"
        );
    }
}

#[test]
fn the_poms_say_the_workspace_version() {
    let version = workspace_version();
    let dev = read("bindings/kotlin/pom.xml");
    let project_version = dev
        .split("<artifactId>deskwire</artifactId>")
        .nth(1)
        .and_then(|rest| rest.split("<version>").nth(1))
        .and_then(|rest| rest.split("</version>").next())
        .expect("bindings/kotlin/pom.xml has a project version");
    assert_eq!(
        project_version, version,
        "bindings/kotlin/pom.xml's version"
    );
    // The published POM takes it from cargo xtask dist (-Drevision) and names no other.
    let published = read("xtask/maven/pom.xml");
    assert!(published.contains("<version>${revision}</version>"));
}

#[test]
fn the_python_package_takes_its_version_from_cargo() {
    let pyproject: toml::Table = read("bindings/python/pyproject.toml").parse().unwrap();
    let dynamic = pyproject["project"]["dynamic"].as_array().unwrap();
    assert!(
        dynamic.iter().any(|d| d.as_str() == Some("version")),
        "pyproject.toml must leave the version to maturin (dynamic), which reads Cargo.toml"
    );
    assert!(pyproject["project"].get("version").is_none());
    assert!(read("bindings/python/src/lib.rs").contains("env!(\"CARGO_PKG_VERSION\")"));
}

#[test]
fn the_readme_install_lines_name_the_workspace_version() {
    let version = workspace_version();
    let readme = read("README.md");
    let section = readme
        .split("## Install without Rust")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README.md has a section \"Install without Rust\"");
    let mut named = 0;
    for (i, _) in section
        .match_indices("deskwire-godot-")
        .chain(section.match_indices(":deskwire:"))
    {
        let rest = &section[i..];
        let start = rest.find(|c: char| c.is_ascii_digit()).unwrap();
        let end = start
            + rest[start..]
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap();
        assert_eq!(
            rest[start..end].trim_end_matches('.'),
            version,
            "README: {}",
            &rest[..end]
        );
        named += 1;
    }
    for prefix in ["deskwire-", "rexd-", "rexd_"] {
        for (i, _) in section.match_indices(prefix) {
            let rest = &section[i + prefix.len()..];
            if rest.starts_with(|c: char| c.is_ascii_digit()) {
                assert!(
                    rest.starts_with(&version),
                    "README: {prefix}{}",
                    &rest[..12.min(rest.len())]
                );
                named += 1;
            }
        }
    }
    assert!(
        named >= 6,
        "the install section names {named} versioned files"
    );
}
