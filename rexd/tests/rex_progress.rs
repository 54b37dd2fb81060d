//! `rex read` and `rex write` show a progress bar on stderr for a large transfer when stderr is
//! a terminal (here a pseudo-terminal from util-linux's `script`), and never when it is piped.

mod support;

use std::process::{Command, Stdio};

use support::{Fixture, REX, binary_blob};

const BIG: usize = 4 << 20;

/// Runs `line` (a shell command line) under `script`, with the fixture's targets file: what
/// the pseudo-terminal saw, and the exit code. None where `script` is missing.
fn under_a_terminal(f: &Fixture, line: &str) -> Option<(String, i32)> {
    let out = Command::new("script")
        .args(["-qec", line, "/dev/null"])
        .env("REX_TARGETS_FILE", &f.targets_file)
        .env_remove("REX_TARGET")
        .env("TERM", "xterm")
        .current_dir(&f.work)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    Some((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    ))
}

#[test]
fn a_terminal_shows_progress_for_a_large_read_and_write() {
    let f = Fixture::local();
    let blob = binary_blob(BIG);
    std::fs::write(f.work.join("big.bin"), &blob).unwrap();
    let copy = f.dir().join("copy.bin");
    // stdout to a file: what the terminal shows is rex's stderr alone.
    let line = format!("'{REX}' read big.bin > '{}'", copy.display());
    let Some((seen, code)) = under_a_terminal(&f, &line) else {
        eprintln!("no `script` (util-linux) here: skipped");
        return;
    };
    assert_eq!(code, 0, "{seen}");
    assert!(
        seen.contains("big.bin") && seen.contains("4.00 MiB/4.00 MiB"),
        "no progress bar on the terminal: {seen:?}"
    );
    assert!(std::fs::read(&copy).unwrap() == blob, "read changed bytes");

    let line = format!("'{REX}' write written.bin < '{}'", copy.display());
    let (seen, code) = under_a_terminal(&f, &line).unwrap();
    assert_eq!(code, 0, "{seen}");
    assert!(
        seen.contains("written.bin") && seen.contains("4.00 MiB/4.00 MiB"),
        "no progress bar on the terminal: {seen:?}"
    );
    assert!(std::fs::read(f.work.join("written.bin")).unwrap() == blob);

    // A small file shows none, terminal or not.
    std::fs::write(f.work.join("small.txt"), b"small\n").unwrap();
    let (seen, code) = under_a_terminal(&f, &format!("'{REX}' read small.txt")).unwrap();
    assert_eq!(code, 0, "{seen}");
    assert_eq!(seen.replace('\r', ""), "small\n");
}

#[test]
fn piped_stderr_stays_empty_and_stdout_is_the_same_bytes() {
    let f = Fixture::local();
    let blob = binary_blob(BIG);
    std::fs::write(f.work.join("big.bin"), &blob).unwrap();
    let out = f.run(&["read", "big.bin"]).ok();
    assert!(out.stderr.is_empty(), "{:?}", out.stderr);
    assert!(out.stdout == blob, "read changed bytes");

    let out = f
        .run_with_stdin(&["write", "written.bin"], Some(&blob))
        .ok();
    assert!(out.stderr.is_empty(), "{:?}", out.stderr);
    assert!(out.stdout.is_empty());
    assert!(std::fs::read(f.work.join("written.bin")).unwrap() == blob);
}
