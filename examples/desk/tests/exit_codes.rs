//! The desk demo exits as ssh would: with the command's exit code, 128 + the number of the
//! signal that ended it, and 124 when its answer was cut at a timeout (the remote's, here: the
//! in-process remote lets a command run 90% of `--timeout-sec`), printing what arrived.

use std::process::Command;

fn desk(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_desk"))
        .args(args)
        .output()
        .expect("run the desk demo");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_demo_exits_with_the_commands_exit() {
    assert_eq!(desk(&["echo hi"]), (Some(0), "hi\n".to_owned()));
    assert_eq!(
        desk(&["echo no; exit 3"]),
        (Some(3), "no\n[exit code: 3]\n".to_owned())
    );
    assert_eq!(desk(&["kill -TERM $$"]).0, Some(128 + 15));
    let (code, out) = desk(&["--timeout-sec", "2", "echo started; sleep 100"]);
    assert_eq!(code, Some(124), "{out}");
    assert!(
        out.starts_with("started\n...[cut at the remote's timeout: 8 bytes arrived;"),
        "{out}"
    );
}
