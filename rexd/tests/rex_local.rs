//! `rex` against a local `rexd --stdio` (found next to the `rex` binary): the core cases, a
//! missing daemon, and the targets file.

mod support;

use support::{Fixture, REXD};

core_cases!(Some(Fixture::local()));

#[test]
fn a_missing_local_rexd_says_how_to_fix_it() {
    let f = Fixture::local();
    let out = f.run(&["--rexd", "/nonexistent/rexd", "exec", "--", "true"]);
    assert_eq!(out.code, 127);
    assert!(
        out.stderr.contains("rexd was not found") && out.stderr.contains("--rexd PATH"),
        "{}",
        out.stderr
    );
}

#[test]
fn targets_are_listed_used_and_removed() {
    let f = Fixture::local();
    f.run(&["target", "add", "other", "ssh://deploy@server-b:2222"])
        .ok();
    let list = f.run(&["target", "list"]).ok().text();
    assert_eq!(
        list,
        "  local\tlocal\n* here\tlocal\n  other\tssh://deploy@server-b:2222\n"
    );
    f.run(&["target", "use", "other"]).ok();
    assert!(f.run(&["target", "list"]).ok().text().contains("* other"));
    let out = f.run(&["target", "use", "nowhere"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no target named \"nowhere\""),
        "{}",
        out.stderr
    );

    // --target beats the file's current target for one call.
    let out = f.run(&["-t", "here", "exec", "--", "echo", "routed"]).ok();
    assert_eq!(out.text(), "routed\n");

    f.run(&["target", "remove", "other"]).ok();
    let list = f.run(&["target", "list"]).ok().text();
    assert_eq!(
        list, "* local\tlocal\n  here\tlocal\n",
        "current falls back to local"
    );
    let bad = f.run(&["target", "add", "x", "ftp://h"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("bad target"), "{}", bad.stderr);
}

#[test]
fn the_daemon_binary_is_next_to_rex() {
    // What the `local` target relies on without --rexd.
    let rex_dir = std::path::Path::new(support::REX).parent().unwrap();
    assert_eq!(std::path::Path::new(REXD).parent().unwrap(), rex_dir);
}

#[test]
fn stdin_forwarding_stops_when_the_command_ends_first() {
    let f = Fixture::local();
    // The command never reads: rex must still exit with its code, not wait on the input.
    let input = vec![b'x'; 8 << 20];
    let out = f.run_with_stdin(
        &["exec", "--stdin", "--", "sh", "-c", "exit 4"],
        Some(&input),
    );
    assert_eq!(out.code, 4, "{}", out.stderr);
}
