//! tar.gz and zip archives of a staged directory: sorted entries, fixed owners, and every time
//! the source's date (SOURCE_DATE_EPOCH, else the last commit's), so the same commit gives the
//! same archive, dated when it was made.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use flate2::Compression;
use flate2::write::GzEncoder;

use crate::cmd;

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

/// `out` (a .tar.gz) holds the contents of `dir` under `prefix/`, dated `mtime` (Unix
/// seconds). Symbolic links stay links.
pub fn tar_gz(dir: &Path, prefix: &str, out: &Path, mtime: u64) -> Result<()> {
    let file = File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut tar = tar::Builder::new(GzEncoder::new(BufWriter::new(file), Compression::best()));
    let mut append = |path: &Path, name: &Path| -> Result<()> {
        let meta = std::fs::symlink_metadata(path)?;
        let mut header = tar::Header::new_gnu();
        // Mode bits kept, owners zeroed; the time set below instead of the fixed 2006 one.
        header.set_metadata_in_mode(&meta, tar::HeaderMode::Deterministic);
        header.set_mtime(mtime);
        if meta.file_type().is_symlink() {
            tar.append_link(&mut header, name, std::fs::read_link(path)?)?;
        } else if meta.is_dir() {
            tar.append_data(&mut header, name, std::io::empty())?;
        } else {
            tar.append_data(&mut header, name, File::open(path)?)?;
        }
        Ok(())
    };
    append(dir, Path::new(prefix))?;
    for rel in entries(dir)? {
        append(&dir.join(&rel), &Path::new(prefix).join(&rel))?;
    }
    tar.into_inner()?.finish()?.flush()?;
    Ok(())
}

/// Unix seconds as a zip (MS-DOS) time, which counts from 1980 in two-second steps.
fn zip_time(unix: u64) -> Result<zip::DateTime> {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    // Howard Hinnant's days-to-civil: the proleptic Gregorian date of a day count.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as u16;
    zip::DateTime::from_date_and_time(
        year,
        month,
        day,
        (secs / 3600) as u8,
        (secs % 3600 / 60) as u8,
        (secs % 60) as u8,
    )
    .map_err(|e| anyhow::anyhow!("{unix} is no zip time: {e}"))
}

/// The source's date in Unix seconds: SOURCE_DATE_EPOCH when set (the reproducible-builds
/// convention), else the time of the last commit in `root`.
pub fn source_date(root: &Path) -> Result<u64> {
    if let Some(epoch) = std::env::var_os("SOURCE_DATE_EPOCH") {
        let epoch = epoch.to_string_lossy();
        return epoch
            .trim()
            .parse()
            .with_context(|| format!("SOURCE_DATE_EPOCH={epoch} is not a number of seconds"));
    }
    cmd::output(
        std::process::Command::new("git")
            .args(["log", "-1", "--format=%ct"])
            .current_dir(root),
    )
    .and_then(|out| Ok(out.trim().parse::<u64>()?))
    .with_context(|| {
        format!(
            "no commit time in {} for the archives' dates (set SOURCE_DATE_EPOCH)",
            root.display()
        )
    })
}

/// `out` (a .zip) holds the contents of `dir` (its entries named from the top of `dir`), dated
/// `mtime` (Unix seconds).
pub fn zip(dir: &Path, out: &Path, mtime: u64) -> Result<()> {
    let time = zip_time(mtime)?;
    use std::os::unix::fs::PermissionsExt;
    let file = File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut zip = zip::ZipWriter::new(BufWriter::new(file));
    for rel in entries(dir)? {
        let path = dir.join(&rel);
        let name = rel.to_str().context("non-UTF-8 file name")?.to_owned();
        let mode = path.metadata()?.permissions().mode() & 0o777;
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(time)
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

#[cfg(test)]
mod tests {
    use super::zip_time;

    #[test]
    fn zip_times_are_civil_dates() {
        let t = zip_time(0).err().map(|e| e.to_string());
        assert!(t.is_some(), "1970 is before zip's 1980");
        let t = zip_time(1_795_000_000).unwrap(); // 2026-11-18T11:06:40Z
        assert_eq!(
            (
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            ),
            (2026, 11, 18, 11, 6, 40)
        );
        let leap = zip_time(951_782_400).unwrap(); // 2000-02-29T00:00:00Z
        assert_eq!((leap.year(), leap.month(), leap.day()), (2000, 2, 29));
    }
}
