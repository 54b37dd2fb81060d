//! The Godot addon: `deskwire-godot-VERSION.zip` in the Asset Library layout (only
//! `addons/deskwire/`, as godot-jolt and godot-rapier ship), with a library per platform under
//! `bin/` and a `.gdextension` whose `[libraries]` name exactly those files, a debug and a
//! release key each. Android is left out: it needs the NDK (README, section Godot).

use anyhow::{Context as _, Result, bail};

use crate::target::{self, Target};
use crate::{Dist, Family, archive, cmd, inspect, licenses};

const ENTRY: &str = "deskwire_init";

pub fn dist(dist: &mut Dist) -> Result<()> {
    dist.clear(|name| name.starts_with("deskwire-godot-"))?;
    let stage = dist.stage("godot")?;
    let addon = stage.join("addons/deskwire");
    let repo_gdextension =
        std::fs::read_to_string(dist.root.join("godot/addons/deskwire/deskwire.gdextension"))?;
    let entry = repo_gdextension
        .lines()
        .find_map(|l| l.strip_prefix("entry_symbol = "))
        .map(|v| v.trim_matches('"'))
        .context("godot/addons/deskwire/deskwire.gdextension has no entry_symbol")?;
    if entry != ENTRY {
        bail!("the .gdextension's entry_symbol is {entry}, the library exports {ENTRY}");
    }
    let mut libraries = Vec::new();
    let mut triples = Vec::new();
    let mut tags = Vec::new();
    for t in target::selected(Family::Godot, dist.linux_only) {
        let triple = t.triple();
        let built = dist.build_lib(t, "deskwire-godot", "cdylib")?;
        // (feature tag in the .gdextension, directory under bin/, file name, what it is)
        let (key, dir, file, tag) = match t {
            Target::LinuxX64 | Target::LinuxArm64 => {
                let so = built.join("libdeskwire_godot.so");
                if !inspect::elf_exports(&dist.tools, &so)?
                    .iter()
                    .any(|e| e == ENTRY)
                {
                    bail!("{} does not export {ENTRY}", so.display());
                }
                let arch = if t == Target::LinuxX64 {
                    "x86_64"
                } else {
                    "arm64"
                };
                let needs = inspect::glibc_needs(&dist.tools, &so)?;
                (
                    format!("linux.{{}}.{arch}"),
                    format!("linux-{arch}"),
                    "libdeskwire_godot.so",
                    needs,
                )
            }
            Target::WindowsX64 => {
                let dll = built.join("deskwire_godot.dll");
                let tag = inspect::check_windows(&dist.tools, &dll, &[ENTRY], &[ENTRY], &[])?;
                (
                    "windows.{}.x86_64".into(),
                    "windows-x86_64".into(),
                    "deskwire_godot.dll",
                    tag,
                )
            }
            Target::MacUniversal => {
                let dylib = built.join("libdeskwire_godot.dylib");
                let tag = inspect::check_macos(&dist.tools, &dylib, &[ENTRY], &[ENTRY], true)?;
                (
                    "macos.{}".into(),
                    "macos".into(),
                    "libdeskwire_godot.dylib",
                    tag,
                )
            }
            _ => bail!("no Godot library is made for {triple}"),
        };
        cmd::copy(&built.join(file), &addon.join("bin").join(&dir).join(file))?;
        libraries.push((key, format!("res://addons/deskwire/bin/{dir}/{file}")));
        triples.push(triple);
        tags.push(format!("{dir}: {tag}"));
    }
    let mut text = String::new();
    // The header comment and [configuration] as in the repository; [libraries] from bin/.
    for line in repo_gdextension.lines() {
        if line.trim() == "[libraries]" {
            break;
        }
        text.push_str(line);
        text.push('\n');
    }
    text.push_str("[libraries]\n");
    for (key, path) in &libraries {
        for build in ["debug", "release"] {
            text.push_str(&format!("{} = \"{path}\"\n", key.replace("{}", build)));
        }
    }
    std::fs::write(addon.join("deskwire.gdextension"), text)?;
    // What an Asset Library addon carries besides the libraries: its plugin.cfg (name,
    // description, version), the plugin it names and the icon.
    for file in ["plugin.cfg", "plugin.gd", "icon.svg"] {
        let from = dist.root.join("godot/addons/deskwire").join(file);
        std::fs::copy(&from, addon.join(file)).with_context(|| format!("{}", from.display()))?;
    }
    licenses::write(dist, "deskwire-godot", &triples, &addon)?;
    let zip = dist
        .out
        .join(format!("deskwire-godot-{}.zip", dist.version));
    archive::zip(&stage, &zip, dist.source_date)?;
    dist.add(zip, triples.join(" "), tags.join("; "));
    Ok(())
}
