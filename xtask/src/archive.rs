//! tar.gz and zip archives of a staged directory: sorted entries, fixed times and owners, so the
//! same inputs give the same archive.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use flate2::Compression;
use flate2::write::GzEncoder;

/// Files and directories under `dir`, sorted, as paths relative to it.
fn entries(dir: &Path) -> Result<Vec<PathBuf>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let mut children: Vec<_> = std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        children.sort();
        for path in children {
            out.push(path.strip_prefix(root)?.to_path_buf());
            if path.is_dir() && !path.is_symlink() {
                walk(root, &path, out)?;
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

/// `out` (a .tar.gz) holds the contents of `dir` under `prefix/`. Symbolic links stay links.
pub fn tar_gz(dir: &Path, prefix: &str, out: &Path) -> Result<()> {
    let file = File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut tar = tar::Builder::new(GzEncoder::new(BufWriter::new(file), Compression::best()));
    tar.mode(tar::HeaderMode::Deterministic);
    tar.follow_symlinks(false);
    tar.append_dir(prefix, dir)?;
    for rel in entries(dir)? {
        tar.append_path_with_name(dir.join(&rel), Path::new(prefix).join(&rel))?;
    }
    tar.into_inner()?.finish()?.flush()?;
    Ok(())
}

/// `out` (a .zip) holds the contents of `dir` (its entries named from the top of `dir`).
pub fn zip(dir: &Path, out: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let file = File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut zip = zip::ZipWriter::new(BufWriter::new(file));
    for rel in entries(dir)? {
        let path = dir.join(&rel);
        let name = rel.to_str().context("non-UTF-8 file name")?.to_owned();
        let mode = path.metadata()?.permissions().mode() & 0o777;
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(mode);
        if path.is_dir() {
            zip.add_directory(format!("{name}/"), options)?;
        } else {
            zip.start_file(name, options)?;
            std::io::copy(&mut File::open(&path)?, &mut zip)?;
        }
    }
    zip.finish()?.flush()?;
    Ok(())
}
