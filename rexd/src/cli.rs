//! What `rex` and `rexd` share as command-line programs: the long `--version` text, and the
//! shell completions and man pages generated from their clap definitions at release time
//! (`cargo xtask dist` runs the built binaries with the arguments [`generate`] answers).

use std::io::Write;
use std::process::ExitCode;

use clap_complete::Shell;

/// `--version`: the crate's version, the commit it was built from (`unknown` outside a git
/// checkout, e.g. from a source tarball) and the cargo features enabled (build.rs).
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("REXD_GIT_COMMIT"),
    ", features: ",
    env!("REXD_FEATURES"),
    ")"
);

/// Answers `PROGRAM --generate-completions SHELL` (bash, zsh, fish, elvish, powershell) and
/// `PROGRAM --generate-man` on stdout, and `PROGRAM --generate-man DIR` (the program's page and
/// one per subcommand, `rex-exec.1`, `rex-target-add.1`, ..., which `rex.1` names, written into
/// DIR), before clap parses anything, so none appears in the program's help, its completions or
/// its man page (they are for packaging, not for users). Returns `None` for any other command
/// line, which the program then parses as usual.
pub fn generate(command: impl FnOnce() -> clap::Command) -> Option<ExitCode> {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .take(3)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    match args.as_slice() {
        ["--generate-completions", shell] => {
            let Ok(shell) = shell.parse::<Shell>() else {
                eprintln!("unknown shell {shell:?}: bash, zsh, fish, elvish or powershell");
                return Some(ExitCode::from(2));
            };
            let mut cmd = command();
            let name = cmd.get_name().to_owned();
            clap_complete::generate(shell, &mut cmd, name, &mut out);
        }
        ["--generate-man"] => {
            if let Err(e) = clap_mangen::Man::new(command()).render(&mut out) {
                eprintln!("cannot render the man page: {e}");
                return Some(ExitCode::FAILURE);
            }
        }
        ["--generate-man", dir] => {
            if let Err(e) = clap_mangen::generate_to(command(), dir) {
                eprintln!("cannot write the man pages into {dir}: {e}");
                return Some(ExitCode::FAILURE);
            }
            return Some(ExitCode::SUCCESS);
        }
        _ => return None,
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(&out).and_then(|()| stdout.flush()) {
        eprintln!("cannot write to stdout: {e}");
        return Some(ExitCode::FAILURE);
    }
    Some(ExitCode::SUCCESS)
}
