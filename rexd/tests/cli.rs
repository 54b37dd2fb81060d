//! `rex` and `rexd` as command-line programs: the shell completions and man pages their hidden
//! `--generate-completions SHELL` and `--generate-man` print (what `cargo xtask dist` ships),
//! and `--version` with the commit and the features.

use std::process::Command;

const REX: &str = env!("CARGO_BIN_EXE_rex");
const REXD: &str = env!("CARGO_BIN_EXE_rexd");

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_name_the_subcommands_and_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let rex = run(REX, &["--generate-completions", shell]);
        for word in ["exec", "read", "write", "target", "targets-file"] {
            assert!(rex.contains(word), "rex's {shell} completions lack {word}");
        }
        let rexd = run(REXD, &["--generate-completions", shell]);
        for word in ["stdio", "listen", "check-config"] {
            assert!(
                rexd.contains(word),
                "rexd's {shell} completions lack {word}"
            );
        }
        // The generators are hidden: no completion offers them.
        assert!(!rex.contains("generate-completions") && !rexd.contains("generate-man"));
    }
    let zsh = run(REX, &["--generate-completions", "zsh"]);
    assert!(zsh.starts_with("#compdef rex"), "{zsh}");
}

#[test]
fn bash_loads_the_completion() {
    let script = run(REX, &["--generate-completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rex");
    std::fs::write(&file, script).unwrap();
    let Ok(out) = Command::new("bash")
        .arg("-c")
        .arg(r#"source "$1" && complete -p rex"#)
        .arg("bash")
        .arg(&file)
        .output()
    else {
        eprintln!("no bash here: skipped");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("rex"), "{text}");
}

#[test]
fn man_pages_have_a_name_section_and_the_subcommands() {
    let rex = run(REX, &["--generate-man"]);
    assert!(rex.starts_with(".ie") || rex.contains(".TH rex 1"), "{rex}");
    assert!(rex.contains(".SH NAME\nrex \\- Run commands"), "{rex}");
    for sub in ["exec", "read", "write", "target"] {
        assert!(
            rex.contains(&format!("rex\\-{sub}(1)")),
            "no {sub} in {rex}"
        );
    }
    let rexd = run(REXD, &["--generate-man"]);
    assert!(rexd.contains(".TH rexd 1"), "{rexd}");
    assert!(rexd.contains(".SH NAME\nrexd \\- "), "{rexd}");
    assert!(rexd.contains("\\-\\-stdio"), "{rexd}");
}

#[test]
fn every_page_a_man_page_names_is_written_too() {
    let dir = tempfile::tempdir().unwrap();
    for program in [REX, REXD] {
        run(program, &["--generate-man", dir.path().to_str().unwrap()]);
    }
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    for page in [
        "rex.1",
        "rexd.1",
        "rex-exec.1",
        "rex-target.1",
        "rex-target-add.1",
    ] {
        assert!(pages.iter().any(|p| p == page), "no {page} in {pages:?}");
    }
    // Each `name(1)` a page refers to is a page here: `man rex-exec` finds what `rex.1` names.
    for page in &pages {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".SH NAME"), "{page}");
        for named in text
            .split("(1)")
            .filter_map(|before| before.rsplit([' ', '\n']).next())
        {
            let named = named.replace("\\-", "-").replace("\\fB", "");
            if named.starts_with("rex") {
                assert!(
                    pages.contains(&format!("{named}.1")),
                    "{page} names {named}(1), which is not written"
                );
            }
        }
    }
    // The main page is the same one `--generate-man` prints.
    let printed = run(REX, &["--generate-man"]);
    let written = std::fs::read_to_string(dir.path().join("rex.1")).unwrap();
    assert!(written.contains("rex\\-exec(1)") && printed.contains("rex\\-exec(1)"));
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let out = Command::new(REX)
        .args(["--generate-completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bash, zsh, fish"));
}

#[test]
fn version_says_the_commit_and_the_features() {
    let version = env!("CARGO_PKG_VERSION");
    for (program, name) in [(REX, "rex"), (REXD, "rexd")] {
        let text = run(program, &["--version"]);
        let line = text.trim_end();
        let rest = line
            .strip_prefix(&format!("{name} {version} (commit "))
            .unwrap_or_else(|| panic!("{line}"));
        let (commit, features) = rest.split_once(", features: ").expect(line);
        assert!(
            commit == "unknown"
                || (commit.len() >= 4 && commit.chars().all(|c| c.is_ascii_hexdigit())),
            "{line}"
        );
        assert!(
            features
                .trim_end_matches(')')
                .split(", ")
                .any(|f| f == "net"),
            "{line}"
        );
        // -V stays the short form.
        assert_eq!(
            run(program, &["-V"]).trim_end(),
            format!("{name} {version}")
        );
    }
}
