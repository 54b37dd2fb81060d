//! What a built library needs and offers, read with llvm-objdump (rustup's llvm-tools): the
//! newest glibc symbol version of an ELF file, and for the Windows and macOS libraries (built
//! here, run elsewhere) the entry points they export and the libraries they import.

use std::path::Path;

use anyhow::{Result, bail};

use crate::cmd;
use crate::tools::Tools;

fn objdump(tools: &Tools, args: &[&str], file: &Path) -> Result<String> {
    cmd::output(tools.cmd(&tools.objdump).args(args).arg(file))
}

/// The newest `GLIBC_x.y` among an ELF file's dynamic symbols ("static" when it names no
/// program interpreter and no shared library, as a static-pie does; "none" when it needs no
/// versioned glibc symbol).
pub fn glibc_needs(tools: &Tools, file: &Path) -> Result<String> {
    let headers = objdump(tools, &["-p"], file)?;
    let interp = headers
        .lines()
        .any(|l| l.trim_start().starts_with("INTERP"));
    let needed = headers
        .lines()
        .any(|l| l.trim_start().starts_with("NEEDED"));
    if !interp && !needed {
        return Ok("static".into());
    }
    let symbols = objdump(tools, &["-T"], file)?;
    let mut newest: Option<(Vec<u32>, String)> = None;
    for word in symbols.split(|c: char| c.is_whitespace() || c == '(' || c == ')') {
        if let Some(version) = word.strip_prefix("GLIBC_") {
            let Ok(key) = version
                .split('.')
                .map(str::parse)
                .collect::<Result<Vec<u32>, _>>()
            else {
                continue;
            };
            if newest.as_ref().is_none_or(|(k, _)| key > *k) {
                newest = Some((key, word.to_owned()));
            }
        }
    }
    Ok(newest.map_or_else(|| "none".into(), |(_, name)| name))
}

/// An ELF file's dynamic symbols that it defines.
pub fn elf_exports(tools: &Tools, file: &Path) -> Result<Vec<String>> {
    let text = objdump(tools, &["-T"], file)?;
    Ok(text
        .lines()
        .filter(|l| !l.contains("*UND*"))
        .filter_map(|l| l.split_whitespace().last().map(str::to_owned))
        .collect())
}

/// DLLs a Windows program may import: the Universal CRT (`api-ms-win-crt-*`, ucrtbase) and the
/// system's own DLLs. `extra` adds what the host process brings (python3.dll for a wheel).
const WINDOWS_SYSTEM: &[&str] = &[
    "kernel32.dll",
    "ntdll.dll",
    "advapi32.dll",
    "bcrypt.dll",
    "bcryptprimitives.dll",
    "ws2_32.dll",
    "userenv.dll",
    "ucrtbase.dll",
    "shell32.dll",
    "ole32.dll",
    "oleaut32.dll",
    "user32.dll",
    "secur32.dll",
    "crypt32.dll",
];

/// Checks a Windows DLL: it exports every name in `exports` (a name ending in `*` is a
/// prefix that must match at least one export), nothing outside the `api` prefixes (when
/// given), and imports only system DLLs and `extra`.
/// Returns a line for the table.
pub fn check_windows(
    tools: &Tools,
    dll: &Path,
    exports: &[&str],
    api: &[&str],
    extra: &[&str],
) -> Result<String> {
    let text = objdump(tools, &["-p"], dll)?;
    let mut imported = Vec::new();
    let mut exported = Vec::new();
    let mut in_exports = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("DLL Name:") {
            imported.push(name.trim().to_ascii_lowercase());
        }
        if line.starts_with("Export Table:") {
            in_exports = true;
        } else if in_exports {
            // "    1 0x1234 dw_version" rows under "Ordinal      RVA  Name".
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() == 3 && fields[0].parse::<u32>().is_ok() {
                exported.push(fields[2].to_owned());
            } else if line.is_empty() && !exported.is_empty() {
                in_exports = false;
            }
        }
    }
    check_exports(dll, &exported, exports, api)?;
    let foreign: Vec<&String> = imported
        .iter()
        .filter(|dll| {
            !(dll.starts_with("api-ms-win-")
                || WINDOWS_SYSTEM.contains(&dll.as_str())
                || extra.iter().any(|e| e.eq_ignore_ascii_case(dll)))
        })
        .collect();
    if !foreign.is_empty() {
        bail!(
            "{} imports DLLs that are not part of Windows: {foreign:?}",
            dll.display()
        );
    }
    if imported.is_empty() {
        bail!("{}: llvm-objdump showed no import table", dll.display());
    }
    let crt = if imported.iter().any(|d| d.starts_with("api-ms-win-crt-")) {
        "UCRT"
    } else {
        "no CRT"
    };
    Ok(format!(
        "PE x86-64, {} exports, imports {crt} + system DLLs",
        exported.len()
    ))
}

/// Libraries of macOS's own /usr/lib besides libSystem that a library may link: Rust's std
/// names libiconv, and the Python extension and the Godot library keep it; some crates name
/// libcharset. Both ship with every macOS.
const MACOS_SYSTEM_EXTRAS: &[&str] = &["/usr/lib/libiconv.2.dylib", "/usr/lib/libcharset.1.dylib"];

/// Checks a macOS library (both slices of a universal one): with `rpath`, its install name
/// starts with `@rpath/` (a Python extension module is loaded by path and needs none); it
/// exports `exports` and nothing outside `api` (as in `check_windows`) and links nothing but libSystem and
/// MACOS_SYSTEM_EXTRAS. Returns a line for the table.
pub fn check_macos(
    tools: &Tools,
    dylib: &Path,
    exports: &[&str],
    api: &[&str],
    rpath: bool,
) -> Result<String> {
    let mut arches = Vec::new();
    let mut extras: Vec<&str> = Vec::new();
    for arch in ["x86_64", "arm64"] {
        let arch_flag = format!("--arch={arch}");
        let id = objdump(tools, &["--macho", "--dylib-id", &arch_flag], dylib)?;
        let Some(id) = id.lines().nth(1).map(str::trim) else {
            bail!("{} has no {arch} slice", dylib.display());
        };
        if rpath && !id.starts_with("@rpath/") {
            bail!(
                "{} ({arch}) has the install name {id}, not @rpath/...",
                dylib.display()
            );
        }
        let used = objdump(tools, &["--macho", "--dylibs-used", &arch_flag], dylib)?;
        for line in used.lines().skip(1) {
            let lib = line.split(" (compatibility").next().unwrap_or("").trim();
            if lib == id || lib == "/usr/lib/libSystem.B.dylib" {
                continue;
            }
            let Some(known) = MACOS_SYSTEM_EXTRAS.iter().find(|known| **known == lib) else {
                bail!(
                    "{} ({arch}) links {lib}: only libSystem is expected",
                    dylib.display()
                );
            };
            if !extras.contains(known) {
                extras.push(known);
            }
        }
        let trie = objdump(tools, &["--macho", "--exports-trie", &arch_flag], dylib)?;
        let exported: Vec<String> = trie
            .lines()
            // "0x0004A2C0  _dw_version" rows, under the file name and "Exports trie:".
            .filter(|l| l.trim_start().starts_with("0x"))
            .filter_map(|l| l.split_whitespace().nth(1))
            // Mach-O C symbols carry a leading underscore.
            .map(|s| s.strip_prefix('_').unwrap_or(s).to_owned())
            .collect();
        check_exports(dylib, &exported, exports, api)?;
        arches.push(arch);
    }
    let name = if rpath { ", @rpath" } else { "" };
    let imports = if extras.is_empty() {
        "libSystem only".to_owned()
    } else {
        format!("libSystem and macOS's {}", extras.join(", "))
    };
    Ok(format!(
        "Mach-O {}{name}, imports {imports}",
        arches.join("+")
    ))
}

/// Checks that `file` exports each of `wanted` (a trailing `*` matches a prefix) and, when
/// `api` names any prefixes, nothing outside them: a linker that drops rustc's export list
/// exports every Rust symbol too (thousands, and a tenth of the file).
fn check_exports(file: &Path, exported: &[String], wanted: &[&str], api: &[&str]) -> Result<()> {
    if !api.is_empty() {
        let stray: Vec<&String> = exported
            .iter()
            .filter(|e| !api.iter().any(|prefix| e.starts_with(prefix)))
            .collect();
        if !stray.is_empty() {
            bail!(
                "{} exports {} symbols outside its API ({api:?}), e.g. {:?}",
                file.display(),
                stray.len(),
                &stray[..stray.len().min(3)]
            );
        }
    }
    for want in wanted {
        let found = match want.strip_suffix('*') {
            Some(prefix) => exported.iter().any(|e| e.starts_with(prefix)),
            None => exported.iter().any(|e| e == want),
        };
        if !found {
            bail!("{} does not export {want}", file.display());
        }
    }
    Ok(())
}
