//! rexd's diagnostic lines on stderr: text by default, one JSON object a line with
//! `--log-format json` or `[server] log_format = "json"` (for a log shipper).

use std::io::Write;
use std::process::{Command, Stdio};

const REXD: &str = env!("CARGO_BIN_EXE_rexd");

/// rexd --stdio with `args`, fed a line that is not JSON, then the end of input: its stderr.
fn stderr_after_bad_input(args: &[&str]) -> String {
    let root = tempfile::tempdir().unwrap();
    let mut child = Command::new(REXD)
        .args(["--stdio", "--root", root.path().to_str().unwrap()])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"this is not json\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stderr).unwrap()
}

fn json_lines(stderr: &str) -> Vec<serde_json::Value> {
    stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

#[test]
fn json_lines_carry_time_level_and_message() {
    let check = |stderr: &str| {
        let lines = json_lines(stderr);
        let warn = lines
            .iter()
            .find(|l| l["level"] == "warn")
            .unwrap_or_else(|| panic!("no warning in {stderr}"));
        assert!(
            warn["message"]
                .as_str()
                .unwrap()
                .starts_with("malformed input"),
            "{warn}"
        );
        let time = warn["time"].as_str().unwrap();
        assert!(time.len() == 24 && time.ends_with('Z'), "{time}");
        assert!(humantime::parse_rfc3339(time).is_ok(), "{time}");
        assert_eq!(warn.as_object().unwrap().len(), 3, "{warn}");
    };
    check(&stderr_after_bad_input(&["--log-format", "json"]));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rexd.toml");
    std::fs::write(&config, "[server]\nlog_format = \"json\"\n").unwrap();
    check(&stderr_after_bad_input(&[
        "--config",
        config.to_str().unwrap(),
    ]));
}

#[test]
fn text_lines_by_default_and_unknown_formats_refused() {
    let stderr = stderr_after_bad_input(&[]);
    let line = stderr
        .lines()
        .find(|l| l.contains("malformed input"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains(" rexd: warn: malformed input"), "{line}");
    let out = Command::new(REXD)
        .args(["--stdio", "--log-format", "xml"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values: text, json"));
}
