//! The platforms artifacts are built for, and how cargo-zigbuild names them.

use crate::Family;

/// One platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    LinuxX64,
    LinuxArm64,
    LinuxX64Musl,
    LinuxArm64Musl,
    /// x86_64 and arm64 in one library (cargo-zigbuild's `universal2-apple-darwin`).
    MacUniversal,
    WindowsX64,
}

/// The glibc the Linux libraries are linked against: manylinux2014's, so the wheels, the Godot
/// libraries, the JAR's natives and the C libraries load on every distribution from 2014 on
/// (CentOS 7, Debian 8, Ubuntu 14.04).
pub const GLIBC: &str = "2.17";

/// The two targets `MacUniversal` is built as, one slice each.
pub const MAC_SLICES: [&str; 2] = ["x86_64-apple-darwin", "aarch64-apple-darwin"];

impl Target {
    /// The Rust target triple (where cargo puts the output).
    pub fn triple(self) -> &'static str {
        match self {
            Target::LinuxX64 => "x86_64-unknown-linux-gnu",
            Target::LinuxArm64 => "aarch64-unknown-linux-gnu",
            Target::LinuxX64Musl => "x86_64-unknown-linux-musl",
            Target::LinuxArm64Musl => "aarch64-unknown-linux-musl",
            Target::MacUniversal => "universal2-apple-darwin",
            Target::WindowsX64 => "x86_64-pc-windows-gnu",
        }
    }

    /// What `cargo zigbuild --target` takes: glibc targets carry the glibc version.
    pub fn zig_triple(self) -> String {
        match self {
            Target::LinuxX64 | Target::LinuxArm64 => format!("{}.{GLIBC}", self.triple()),
            _ => self.triple().to_owned(),
        }
    }

    /// The standard libraries `rustup target add` must have.
    pub fn rustup_targets(self) -> &'static [&'static str] {
        match self {
            Target::MacUniversal => &MAC_SLICES,
            Target::LinuxX64 => &[],
            _ => std::slice::from_ref(match self {
                Target::LinuxArm64 => &"aarch64-unknown-linux-gnu",
                Target::LinuxX64Musl => &"x86_64-unknown-linux-musl",
                Target::LinuxArm64Musl => &"aarch64-unknown-linux-musl",
                _ => &"x86_64-pc-windows-gnu",
            }),
        }
    }

    /// Built and run here, by CI too.
    pub fn is_linux(self) -> bool {
        matches!(
            self,
            Target::LinuxX64 | Target::LinuxArm64 | Target::LinuxX64Musl | Target::LinuxArm64Musl
        )
    }

    /// The short name used in file names: `linux-x86_64`, `macos-universal`, ...
    pub fn short(self) -> &'static str {
        match self {
            Target::LinuxX64 => "linux-x86_64",
            Target::LinuxArm64 => "linux-aarch64",
            Target::LinuxX64Musl => "linux-x86_64-musl",
            Target::LinuxArm64Musl => "linux-aarch64-musl",
            Target::MacUniversal => "macos-universal",
            Target::WindowsX64 => "windows-x86_64",
        }
    }
}

/// The targets a family is built for.
pub fn of(family: Family) -> &'static [Target] {
    use Target::*;
    match family {
        Family::Python => &[
            LinuxX64,
            LinuxArm64,
            LinuxX64Musl,
            LinuxArm64Musl,
            MacUniversal,
            WindowsX64,
        ],
        Family::Godot | Family::Kotlin => &[LinuxX64, LinuxArm64, WindowsX64, MacUniversal],
        Family::C => &[LinuxX64, LinuxArm64, LinuxX64Musl, WindowsX64, MacUniversal],
        Family::Rexd => &[LinuxX64Musl, LinuxArm64Musl],
    }
}

/// The targets of these families that this run builds.
pub fn selected(family: Family, linux_only: bool) -> Vec<Target> {
    of(family)
        .iter()
        .copied()
        .filter(|t| !linux_only || t.is_linux())
        .collect()
}

/// Every Rust standard library these families need.
pub fn needed(families: &[Family], linux_only: bool) -> Vec<&'static str> {
    let mut triples: Vec<&'static str> = families
        .iter()
        .flat_map(|f| selected(*f, linux_only))
        .flat_map(|t| t.rustup_targets().iter().copied())
        .collect();
    triples.sort_unstable();
    triples.dedup();
    triples
}
