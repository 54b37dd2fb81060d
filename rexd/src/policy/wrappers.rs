//! Programs that run another program named in their arguments (`env`, `nice`, `timeout`, `xargs`,
//! `find -exec`, …), and where in argv that program is: the policy judges every program position
//! (`super`), so it must find them as the wrappers themselves do.
//!
//! Each wrapper's options are read the way its own `getopt_long` reads them: short options in
//! clusters (`-iu NAME`, `-tc3`), a short option's value in the rest of its word or the next word,
//! long options abbreviated to any unambiguous prefix (`--adj` is `--adjustment`), their values
//! after `=` or in the next word, optional values only after `=`, `--` ending the options, and
//! options stopping at the first operand (every wrapper here asks for that with a leading `+` in
//! its option string). The tables are the tools' own option lists: GNU coreutils 9 (`env`,
//! `nice`, `nohup`, `timeout`, `stdbuf`, `chroot`), util-linux 2.38 to 2.41 (`setsid`, `ionice`,
//! `flock`, `setpriv`, `unshare`, `nsenter`, `chrt`, `taskset`, `prlimit`), GNU time 1.9 and GNU
//! findutils 4.9 (`xargs`, `find`). Where versions differ, the table holds the union: an option
//! a version lacks makes that version fail, which runs nothing.
//!
//! What is never guessed: an option a table does not know, an ambiguous abbreviation, or a value
//! that is missing is a refusal (`wrapper-option`), not a stop that lets the rest through.

/// How an option takes its value (`getopt`'s `:` and `::`, `has_arg` of `struct option`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    No,
    /// In the rest of a short option's word, after `=` for a long one, or else the next word.
    Required,
    /// Only in the rest of the word, or after `=`: never the next word.
    Optional,
}

/// What an option means for the program position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    None,
    /// The wrapper then runs no program (`--help`, `ionice -p PID`, `chrt -p`).
    NoProgram,
    /// The wrapper then works on a descriptor, not a file (`flock --fd N CMD`).
    Fd,
    /// The program is found from another directory (`env -C`, `nsenter --wd`).
    Chdir,
    /// The program is found under another root (`unshare --root`, `nsenter --root`).
    NewRoot,
    /// `xargs --replace`: the program's words are filled in from the input.
    Replace,
    /// Refused with this rule, class and reason.
    Refuse(Refusal),
}

/// A refusal of the whole command, named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Refusal {
    pub rule: &'static str,
    pub class: &'static str,
    pub why: &'static str,
}

const SPLIT_STRING: Refusal = Refusal {
    rule: "env-split-string",
    class: "shell",
    why: "`env -S` splits a string into a command, as a shell does",
};
const ENV_FROM_FILE: Refusal = Refusal {
    rule: "env-from-file",
    class: "unclassified",
    why: "`env --env0-from` reads variables from a file the policy cannot see",
};
const FLOCK_COMMAND: Refusal = Refusal {
    rule: "shell-wrapper",
    class: "shell",
    why: "`flock -c` runs its command string with a shell",
};
const AS_ANOTHER_USER: Refusal = Refusal {
    rule: "privilege-escalation",
    class: "privileged",
    why: "only sudo, with the [[policy.sudo]] allowlist, may run as another user",
};

/// One option: its short letter, its long names (aliases of one option), its value and what it
/// does to the program position.
#[derive(Debug)]
struct Opt {
    short: Option<u8>,
    long: &'static [&'static str],
    arg: Arg,
    effect: Effect,
}

const fn opt(short: u8, long: &'static [&'static str], arg: Arg, effect: Effect) -> Opt {
    Opt {
        short: Some(short),
        long,
        arg,
        effect,
    }
}

const fn long(long: &'static [&'static str], arg: Arg, effect: Effect) -> Opt {
    Opt {
        short: None,
        long,
        arg,
        effect,
    }
}

use Arg::{No, Optional, Required};
use Effect::{Chdir, Fd, NewRoot, NoProgram, Replace};
const NONE: Effect = Effect::None;

const HELP: Opt = long(&["help"], No, NoProgram);
const VERSION: Opt = long(&["version"], No, NoProgram);

const ENV: &[Opt] = &[
    opt(b'a', &["argv0"], Required, NONE),
    opt(b'C', &["chdir"], Required, Chdir),
    opt(b'i', &["ignore-environment"], No, NONE),
    opt(
        b'S',
        &["split-string"],
        Required,
        Effect::Refuse(SPLIT_STRING),
    ),
    opt(b'u', &["unset"], Required, NONE),
    opt(b'v', &["debug"], No, NONE),
    opt(b'0', &["null"], No, NONE),
    long(&["env0-from"], Required, Effect::Refuse(ENV_FROM_FILE)),
    long(&["default-signal"], Optional, NONE),
    long(&["ignore-signal"], Optional, NONE),
    long(&["block-signal"], Optional, NONE),
    long(&["list-signal-handling"], No, NONE),
    HELP,
    VERSION,
];
const NICE: &[Opt] = &[opt(b'n', &["adjustment"], Required, NONE), HELP, VERSION];
const NOHUP: &[Opt] = &[HELP, VERSION];
const SETSID: &[Opt] = &[
    opt(b'c', &["ctty"], No, NONE),
    opt(b'f', &["fork"], No, NONE),
    opt(b'w', &["wait"], No, NONE),
    opt(b'h', &["help"], No, NoProgram),
    opt(b'V', &["version"], No, NoProgram),
];
const TIMEOUT: &[Opt] = &[
    opt(b'f', &["foreground"], No, NONE),
    opt(b'k', &["kill-after"], Required, NONE),
    opt(b'p', &["preserve-status"], No, NONE),
    opt(b's', &["signal"], Required, NONE),
    opt(b'v', &["verbose"], No, NONE),
    HELP,
    VERSION,
];
const STDBUF: &[Opt] = &[
    opt(b'i', &["input"], Required, NONE),
    opt(b'o', &["output"], Required, NONE),
    opt(b'e', &["error"], Required, NONE),
    HELP,
    VERSION,
];
const IONICE: &[Opt] = &[
    opt(b'n', &["classdata"], Required, NONE),
    opt(b'c', &["class"], Required, NONE),
    opt(b't', &["ignore"], No, NONE),
    opt(b'p', &["pid"], Required, NoProgram),
    opt(b'P', &["pgid"], Required, NoProgram),
    opt(b'u', &["uid"], Required, NoProgram),
    opt(b'h', &["help"], No, NoProgram),
    opt(b'V', &["version"], No, NoProgram),
];
const TIME: &[Opt] = &[
    opt(b'a', &["append"], No, NONE),
    opt(b'f', &["format"], Required, NONE),
    opt(b'o', &["output"], Required, NONE),
    opt(b'p', &["portability"], No, NONE),
    opt(b'q', &["quiet"], No, NONE),
    opt(b'v', &["verbose"], No, NONE),
    opt(b'h', &["help"], No, NoProgram),
    opt(b'V', &["version"], No, NoProgram),
];
const CHROOT: &[Opt] = &[
    long(&["groups"], Required, NONE),
    long(&["userspec"], Required, Effect::Refuse(AS_ANOTHER_USER)),
    long(&["skip-chdir"], No, NONE),
    HELP,
    VERSION,
];
/// The POSIX `command` utility, where it is a file (`-p`: the default `PATH`).
const COMMAND: &[Opt] = &[
    opt(b'p', &[], No, NONE),
    opt(b'v', &[], No, NoProgram),
    opt(b'V', &[], No, NoProgram),
];
const XARGS: &[Opt] = &[
    opt(b'0', &["null"], No, NONE),
    opt(b'a', &["arg-file"], Required, NONE),
    opt(b'd', &["delimiter"], Required, NONE),
    opt(b'E', &[], Required, NONE),
    opt(b'e', &["eof"], Optional, NONE),
    opt(b'I', &[], Required, Replace),
    opt(b'i', &["replace"], Optional, Replace),
    opt(b'l', &[], Optional, NONE),
    opt(b'L', &["max-lines"], Required, NONE),
    opt(b'n', &["max-args"], Required, NONE),
    opt(b'o', &["open-tty"], No, NONE),
    opt(b'p', &["interactive"], No, NONE),
    opt(b'r', &["no-run-if-empty"], No, NONE),
    opt(b's', &["max-chars"], Required, NONE),
    opt(b't', &["verbose"], No, NONE),
    opt(b'x', &["exit"], No, NONE),
    opt(b'P', &["max-procs"], Required, NONE),
    long(&["process-slot-var"], Required, NONE),
    long(&["show-limits"], No, NONE),
    HELP,
    VERSION,
];
const FLOCK: &[Opt] = &[
    opt(b's', &["shared"], No, NONE),
    opt(b'e', &[], No, NONE),
    opt(b'x', &["exclusive"], No, NONE),
    opt(b'u', &["unlock"], No, NONE),
    opt(b'n', &["nonblocking", "nb"], No, NONE),
    opt(b'o', &["close"], No, NONE),
    opt(b'F', &["no-fork"], No, NONE),
    opt(b'w', &["timeout", "wait"], Required, NONE),
    opt(b'E', &["conflict-exit-code"], Required, NONE),
    // Not in flock's option string, but taken wherever it stands (`flock -c CMD`).
    opt(b'c', &["command"], Required, Effect::Refuse(FLOCK_COMMAND)),
    long(&["verbose"], No, NONE),
    long(&["fcntl"], No, NONE),
    long(&["start"], Required, NONE),
    long(&["length"], Required, NONE),
    long(&["fd"], Required, Fd),
    opt(b'h', &["help"], No, NoProgram),
    opt(b'V', &["version"], No, NoProgram),
];
const SETPRIV: &[Opt] = &[
    opt(b'd', &["dump"], No, NoProgram),
    long(&["nnp", "no-new-privs"], No, NONE),
    long(&["inh-caps"], Required, NONE),
    long(&["ambient-caps"], Required, NONE),
    long(&["list-caps"], No, NoProgram),
    long(
        &["ruid", "euid", "rgid", "egid", "reuid", "regid", "groups"],
        Required,
        Effect::Refuse(AS_ANOTHER_USER),
    ),
    long(&["init-groups"], No, Effect::Refuse(AS_ANOTHER_USER)),
    long(&["clear-groups"], No, NONE),
    long(&["keep-groups"], No, NONE),
    long(&["bounding-set"], Required, NONE),
    long(&["securebits"], Required, NONE),
    long(&["pdeathsig"], Required, NONE),
    long(&["ptracer"], Required, NONE),
    long(&["selinux-label"], Required, NONE),
    long(&["apparmor-profile"], Required, NONE),
    long(&["landlock-access"], Required, NONE),
    long(&["landlock-rule"], Required, NONE),
    long(&["landlock-support"], No, NONE),
    long(&["list-landlock-access"], No, NONE),
    long(&["list-landlock-rights"], Required, NONE),
    long(&["seccomp-filter"], Required, NONE),
    long(&["reset-env"], No, NONE),
    opt(b'h', &["help"], No, NoProgram),
    opt(b'V', &["version"], No, NoProgram),
];
const UNSHARE: &[Opt] = &[
    // The namespaces: a bare letter, or a long name with an optional file to bind.
    opt(b'm', &[], No, NONE),
    opt(b'u', &[], No, NONE),
    opt(b'i', &[], No, NONE),
    opt(b'n', &[], No, NONE),
    opt(b'p', &[], No, NONE),
    opt(b'U', &[], No, NONE),
    opt(b'C', &[], No, NONE),
    opt(b'T', &[], No, NONE),
    long(&["mount"], Optional, NONE),
    long(&["uts"], Optional, NONE),
    long(&["ipc"], Optional, NONE),
    long(&["net"], Optional, NONE),
    long(&["pid"], Optional, NONE),
    long(&["user"], Optional, NONE),
    long(&["cgroup"], Optional, NONE),
    long(&["time"], Optional, NONE),
    opt(b'f', &["fork"], No, NONE),
    long(&["kill-child"], Optional, NONE),
    long(&["forward-signals"], No, NONE),
    long(&["mount-proc"], Optional, NONE),
    long(&["mount-binfmt"], Optional, NONE),
    long(&["map-user"], Required, NONE),
    long(&["map-users"], Required, NONE),
    long(&["map-group"], Required, NONE),
    long(&["map-groups"], Required, NONE),
    opt(b'r', &["map-root-user"], No, NONE),
    opt(b'c', &["map-current-user"], No, NONE),
    long(&["map-auto"], No, NONE),
    long(&["map-subids"], No, NONE),
    long(&["owner"], Required, NONE),
    long(&["propagation"], Required, NONE),
    long(&["setgroups"], Required, NONE),
    long(&["keep-caps"], No, NONE),
    long(&["monotonic"], Required, NONE),
    long(&["boottime"], Required, NONE),
    opt(b'l', &["load-interp"], Required, NONE),
    long(&["clear-env"], No, NONE),
    long(&["whitelist-env"], Required, NONE),
    opt(b'S', &["setuid"], Required, Effect::Refuse(AS_ANOTHER_USER)),
    opt(b'G', &["setgid"], Required, Effect::Refuse(AS_ANOTHER_USER)),
    opt(b'R', &["root"], Required, NewRoot),
    opt(b'w', &["wd"], Required, Chdir),
    opt(b'h', &["help"], No, NoProgram),
    opt(b'V', &["version"], No, NoProgram),
];
const NSENTER: &[Opt] = &[
    opt(b'a', &["all"], No, NONE),
    opt(b't', &["target"], Required, NONE),
    opt(b'm', &["mount"], Optional, NONE),
    opt(b'u', &["uts"], Optional, NONE),
    opt(b'i', &["ipc"], Optional, NONE),
    opt(b'n', &["net"], Optional, NONE),
    opt(b'N', &["net-socket"], Required, NONE),
    opt(b'p', &["pid"], Optional, NONE),
    opt(b'C', &["cgroup"], Optional, NONE),
    opt(b'U', &["user"], Optional, NONE),
    opt(b'T', &["time"], Optional, NONE),
    opt(b'S', &["setuid"], Required, Effect::Refuse(AS_ANOTHER_USER)),
    opt(b'G', &["setgid"], Required, Effect::Refuse(AS_ANOTHER_USER)),
    opt(b'r', &["root"], Optional, NewRoot),
    opt(b'w', &["wd"], Optional, Chdir),
    opt(b'W', &["wdns"], Optional, Chdir),
    opt(b'e', &["env"], No, NONE),
    opt(b'F', &["no-fork"], No, NONE),
    opt(b'c', &["join-cgroup"], No, NONE),
    opt(b'Z', &["follow-context"], No, NONE),
    long(&["preserve-credentials"], No, NONE),
    long(&["keep-caps"], No, NONE),
    long(&["user-parent"], No, NONE),
    opt(b'h', &["help"], No, NoProgram),
    opt(b'V', &["version"], No, NoProgram),
];
const CHRT: &[Opt] = &[
    opt(b'a', &["all-tasks"], No, NONE),
    opt(b'b', &["batch"], No, NONE),
    opt(b'd', &["deadline"], No, NONE),
    opt(b'e', &["ext"], No, NONE),
    opt(b'f', &["fifo"], No, NONE),
    opt(b'i', &["idle"], No, NONE),
    opt(b'o', &["other"], No, NONE),
    opt(b'r', &["rr"], No, NONE),
    opt(b'O', &["deadline-overrun"], No, NONE),
    opt(b'R', &["reset-on-fork"], No, NONE),
    opt(b'G', &["reclaim-grub"], No, NONE),
    opt(b'v', &["verbose"], No, NONE),
    opt(b'p', &["pid"], No, NoProgram),
    opt(b'm', &["max"], No, NoProgram),
    opt(b'D', &["sched-deadline"], Required, NONE),
    opt(b'P', &["sched-period"], Required, NONE),
    opt(b'T', &["sched-runtime"], Required, NONE),
    opt(b'U', &["clamp-min"], Required, NONE),
    opt(b'X', &["clamp-max"], Required, NONE),
    opt(b'h', &["help"], No, NoProgram),
    opt(b'V', &["version"], No, NoProgram),
];
const TASKSET: &[Opt] = &[
    opt(b'a', &["all-tasks"], No, NONE),
    opt(b'p', &["pid"], No, NoProgram),
    opt(b'c', &["cpu-list"], No, NONE),
    opt(b'h', &["help"], No, NoProgram),
    opt(b'V', &["version"], No, NoProgram),
];
const PRLIMIT: &[Opt] = &[
    opt(b'c', &["core"], Optional, NONE),
    opt(b'd', &["data"], Optional, NONE),
    opt(b'e', &["nice"], Optional, NONE),
    opt(b'f', &["fsize"], Optional, NONE),
    opt(b'i', &["sigpending"], Optional, NONE),
    opt(b'l', &["memlock"], Optional, NONE),
    opt(b'm', &["rss"], Optional, NONE),
    opt(b'n', &["nofile"], Optional, NONE),
    opt(b'q', &["msgqueue"], Optional, NONE),
    opt(b'r', &["rtprio"], Optional, NONE),
    opt(b's', &["stack"], Optional, NONE),
    opt(b't', &["cpu"], Optional, NONE),
    opt(b'u', &["nproc"], Optional, NONE),
    opt(b'v', &["as"], Optional, NONE),
    opt(b'x', &["locks"], Optional, NONE),
    opt(b'y', &["rttime"], Optional, NONE),
    opt(b'p', &["pid"], Required, NoProgram),
    opt(b'o', &["output"], Required, NONE),
    long(&["noheadings"], No, NONE),
    long(&["raw"], No, NONE),
    long(&["verbose"], No, NONE),
    opt(b'h', &["help"], No, NoProgram),
    opt(b'V', &["version"], No, NoProgram),
];

/// The wrappers by name, with their options and what follows the options.
fn table(name: &str) -> Option<(&'static [Opt], After)> {
    Some(match name {
        "env" => (ENV, After::Env),
        "nice" => (NICE, After::Program),
        "nohup" => (NOHUP, After::Program),
        "setsid" => (SETSID, After::Program),
        "timeout" => (TIMEOUT, After::Operand),
        "stdbuf" => (STDBUF, After::Program),
        "ionice" => (IONICE, After::Program),
        "time" => (TIME, After::Program),
        "chroot" => (CHROOT, After::Chroot),
        "command" => (COMMAND, After::Program),
        "xargs" => (XARGS, After::Xargs),
        "flock" => (FLOCK, After::Flock),
        "setpriv" => (SETPRIV, After::Program),
        "unshare" | "nsenter" => (
            if name == "unshare" { UNSHARE } else { NSENTER },
            After::ProgramOrShell,
        ),
        "chrt" => (CHRT, After::Chrt),
        "taskset" => (TASKSET, After::Operand),
        "prlimit" => (PRLIMIT, After::Program),
        _ => return None,
    })
}

/// What follows a wrapper's options.
#[derive(Debug, Clone, Copy)]
enum After {
    /// The program.
    Program,
    /// One operand (`timeout DURATION`, `taskset MASK`), then the program.
    Operand,
    /// The program, or without one the user's shell (`unshare`, `nsenter`).
    ProgramOrShell,
    /// `chroot NEWROOT [PROGRAM]`: without a program, the user's shell.
    Chroot,
    /// `env`: `-` (an empty environment), `NAME=VALUE` words, then the program.
    Env,
    /// `flock FILE PROGRAM`, `flock FILE -c STRING`, `flock --fd N PROGRAM`, `flock FD`.
    Flock,
    /// `chrt [PRIORITY] PROGRAM`: a first operand of digits is the priority.
    Chrt,
    /// `xargs PROGRAM`, whose arguments come from the input too; without one, `echo`.
    Xargs,
}

/// Wrappers beside the option tables: multi-call binaries and `find`.
const MULTI_CALL: &[&str] = &["busybox", "toybox"];
/// `find`'s actions that run a program, each followed by the program.
const FIND_RUNS: &[&str] = &["-exec", "-execdir", "-ok", "-okdir"];

/// Whether `name` runs a program from its arguments.
pub(super) fn is_wrapper(name: &str) -> bool {
    table(name).is_some() || MULTI_CALL.contains(&name) || name == "find"
}

/// Where the words a program gets come from, beyond argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Input {
    /// Only argv.
    None,
    /// `xargs` appends words from its input after argv's.
    Appended,
    /// `xargs -I R`: each word holding R is filled in from its input.
    Replaced(String),
}

/// A program position found behind a wrapper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Position {
    /// Its index in argv.
    pub at: usize,
    /// What else reaches its arguments at run time: argv as seen is then not all it gets.
    pub input: Input,
    /// It is looked up under another root or directory than the exec's (`chroot`, `env -C`),
    /// so what it resolves to here is not what runs.
    pub elsewhere: bool,
}

/// What a wrapper at some position runs.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Runs {
    /// These programs.
    Programs(Vec<Position>),
    /// A shell (`chroot DIR`, `unshare` without a program).
    Shell,
    /// Nothing: it prints and exits, or it fails.
    Nothing,
}

/// Options read from a wrapper's arguments, as its getopt reads them.
struct Parsed {
    /// The first word after the options.
    rest: usize,
    /// The options' effects, in order, with their values.
    effects: Vec<(Effect, Option<String>)>,
}

fn bad(why: &'static str) -> Refusal {
    Refusal {
        rule: "wrapper-option",
        class: "unclassified",
        why,
    }
}

fn from_input(why: &'static str) -> Refusal {
    Refusal {
        rule: "xargs-program",
        class: "unclassified",
        why,
    }
}

/// Reads options from `argv[from..]` as `getopt_long` with a leading `+` does. `numbers`: a word
/// `-N`, `--N` or `-+N` (N a digit) is an option too (`nice -5`).
fn getopt(
    opts: &'static [Opt],
    argv: &[String],
    from: usize,
    numbers: bool,
) -> Result<Parsed, Refusal> {
    let mut effects = Vec::new();
    let mut i = from;
    while let Some(word) = argv.get(i) {
        let w = word.as_bytes();
        if word == "--" {
            i += 1;
            break;
        }
        if w.len() < 2 || w[0] != b'-' {
            break;
        }
        i += 1;
        let sign = usize::from(w[1] == b'-' || w[1] == b'+');
        if numbers && w.get(1 + sign).is_some_and(u8::is_ascii_digit) {
            continue;
        }
        if let Some(body) = word.strip_prefix("--") {
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            let o = find_long(opts, name)?;
            let value = match (o.arg, value) {
                (No, Some(_)) => {
                    return Err(bad("a long option that takes no value was given one"));
                }
                (No | Optional, None) => None,
                (_, Some(v)) => Some(v.to_owned()),
                (Required, None) => {
                    let v = argv.get(i).ok_or(bad("an option's value is missing"))?;
                    i += 1;
                    Some(v.clone())
                }
            };
            effects.push((o.effect, value));
            continue;
        }
        // A cluster of short options: `-iu NAME`, `-n5`, `-tc3`.
        let mut k = 1;
        while k < w.len() {
            let o = opts
                .iter()
                .find(|o| o.short == Some(w[k]))
                .ok_or(bad("an option the wrapper's option list does not have"))?;
            k += 1;
            let rest = || String::from_utf8_lossy(&w[k..]).into_owned();
            let value = match o.arg {
                No => None,
                Optional => Some(rest()).filter(|v| !v.is_empty()),
                Required if k < w.len() => Some(rest()),
                Required => {
                    let v = argv.get(i).ok_or(bad("an option's value is missing"))?;
                    i += 1;
                    Some(v.clone())
                }
            };
            effects.push((o.effect, value));
            if o.arg != No {
                break; // the value took the rest of the word
            }
        }
    }
    Ok(Parsed { rest: i, effects })
}

/// A long option by its name or an unambiguous prefix of one, as glibc's `getopt_long` finds it:
/// an exact name wins; else the prefix must name one option (aliases of one option are one).
fn find_long(opts: &'static [Opt], name: &str) -> Result<&'static Opt, Refusal> {
    if name.is_empty() {
        return Err(bad("an empty long option"));
    }
    if let Some(o) = opts.iter().find(|o| o.long.contains(&name)) {
        return Ok(o);
    }
    let mut found = opts
        .iter()
        .filter(|o| o.long.iter().any(|l| l.starts_with(name)));
    match (found.next(), found.next()) {
        (Some(o), None) => Ok(o),
        (Some(_), Some(_)) => Err(bad("an abbreviated long option that names more than one")),
        (None, _) => Err(bad("an option the wrapper's option list does not have")),
    }
}

/// What the wrapper `name` at `argv[at]` runs; `input` is what else reaches its own arguments
/// (it runs under `xargs`).
pub(super) fn runs(argv: &[String], at: usize, name: &str, input: &Input) -> Result<Runs, Refusal> {
    if !is_wrapper(name) {
        return Ok(Runs::Nothing);
    }
    let appended = *input == Input::Appended;
    if let Input::Replaced(r) = input
        && argv[at + 1..].iter().any(|w| w.contains(r.as_str()))
    {
        return Err(from_input(
            "xargs fills in this wrapper's words from its input",
        ));
    }
    // A position behind this one; `xargs` input reaches the end of argv, so it reaches it too.
    let here = |i: usize, elsewhere: bool| Position {
        at: i,
        input: input.clone(),
        elsewhere,
    };
    // Nothing follows: the wrapper fails or does without, unless xargs' input brings it.
    let missing = || {
        if appended {
            Err(from_input(
                "the program this wrapper runs would come from xargs' input",
            ))
        } else {
            Ok(Runs::Nothing)
        }
    };
    let program = |i: usize, elsewhere: bool| {
        if i < argv.len() {
            Ok(Runs::Programs(vec![here(i, elsewhere)]))
        } else {
            missing()
        }
    };
    if MULTI_CALL.contains(&name) {
        return match argv.get(at + 1) {
            // `busybox --list`, `--install`, `--help` run no applet.
            Some(word) if word.starts_with('-') => Ok(Runs::Nothing),
            _ => program(at + 1, false),
        };
    }
    if name == "find" {
        if appended {
            return Err(from_input("xargs' input could add `-exec` to find"));
        }
        let mut positions = Vec::new();
        for (k, word) in argv.iter().enumerate().skip(at + 1) {
            if FIND_RUNS.contains(&word.as_str()) {
                if k + 1 == argv.len() {
                    return Ok(Runs::Nothing); // `-exec` without a program: find fails
                }
                positions.push(here(k + 1, false));
            }
        }
        return Ok(Runs::Programs(positions));
    }
    let Some((opts, after)) = table(name) else {
        return Ok(Runs::Nothing);
    };
    let parsed = getopt(opts, argv, at + 1, name == "nice")?;
    let (mut new_root, mut chdir, mut fd, mut replace) = (false, false, false, None);
    for (effect, value) in parsed.effects {
        match effect {
            Effect::None => {}
            Effect::NoProgram => return Ok(Runs::Nothing),
            Effect::Refuse(r) => return Err(r),
            Effect::NewRoot => new_root = true,
            Effect::Chdir => chdir = true,
            Effect::Fd => fd = true,
            Effect::Replace => replace = Some(value.unwrap_or_else(|| "{}".into())),
        }
    }
    // Under another root every lookup differs; from another directory, a relative path does.
    let elsewhere = |i: usize| {
        new_root
            || (chdir
                && argv
                    .get(i)
                    .is_some_and(|w| w.contains('/') && !w.starts_with('/')))
    };
    let next = parsed.rest;
    match after {
        After::Program => program(next, elsewhere(next)),
        After::Operand if next < argv.len() => program(next + 1, elsewhere(next + 1)),
        After::Operand => missing(),
        After::ProgramOrShell if next < argv.len() => program(next, elsewhere(next)),
        After::ProgramOrShell if appended => missing(),
        After::ProgramOrShell => Ok(Runs::Shell),
        // `chroot NEWROOT PROGRAM`: the program is found under NEWROOT.
        After::Chroot if next + 1 < argv.len() => program(next + 1, true),
        After::Chroot if next < argv.len() && !appended => Ok(Runs::Shell),
        After::Chroot => missing(),
        After::Env => {
            let mut i = next;
            if argv.get(i).is_some_and(|w| w == "-") {
                i += 1; // `env -`: as -i
            }
            // `NAME=VALUE` words (the caller checks the variables).
            while argv.get(i).is_some_and(|w| w.contains('=')) {
                i += 1;
            }
            program(i, elsewhere(i))
        }
        After::Flock if fd => program(next, false),
        After::Flock => match argv.get(next + 1).map(String::as_str) {
            Some("-c" | "--command") => Err(FLOCK_COMMAND),
            _ if next < argv.len() => program(next + 1, false),
            _ => missing(),
        },
        After::Chrt => {
            let digits = |w: &String| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
            let i = if next + 1 < argv.len() && argv.get(next).is_some_and(digits) {
                next + 1
            } else {
                next
            };
            program(i, false)
        }
        After::Xargs => {
            let Some(word) = argv.get(next) else {
                // Alone, xargs runs echo; under another xargs its program would be input.
                return missing();
            };
            let input = match replace.filter(|r| !r.is_empty()) {
                Some(r) if word.contains(r.as_str()) => {
                    return Err(from_input(
                        "the program xargs runs would be filled in from its input",
                    ));
                }
                Some(r) => Input::Replaced(r),
                None => Input::Appended,
            };
            Ok(Runs::Programs(vec![Position {
                at: next,
                input,
                elsewhere: false,
            }]))
        }
    }
}

/// The `NAME=VALUE` words `env` at `argv[at]` sets, for the caller's variable rules.
pub(super) fn env_assignments(argv: &[String], at: usize) -> Vec<&str> {
    let Ok(parsed) = getopt(ENV, argv, at + 1, false) else {
        return Vec::new();
    };
    let mut i = parsed.rest;
    if argv.get(i).is_some_and(|w| w == "-") {
        i += 1;
    }
    argv[i.min(argv.len())..]
        .iter()
        .take_while(|w| w.contains('='))
        .map(String::as_str)
        .collect()
}

/// A table per wrapper, taken from its option list: where its program is. Each row whose
/// program runs unprivileged here is also run for real, with the program word swapped for a
/// marker program, so the tables agree with the tools' own getopt and not only with this file.
#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::{Command, Stdio};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Want {
        /// Programs at these indexes.
        At(&'static [usize]),
        Nothing,
        Shell,
        Refused(&'static str),
    }
    use Want::{At, Nothing, Refused, Shell};

    /// Rows: argv (split on spaces), what runs, and whether to run it for real here.
    type Table = &'static [(&'static str, Want, bool)];

    const ENV_T: Table = &[
        ("env ls", At(&[1]), true),
        ("env -i FOO=1 ls", At(&[3]), true),
        ("env --un ls sh -c x", At(&[3]), true),
        ("env -iu ls sh -c x", At(&[3]), true),
        ("env -u ls -- sh", At(&[4]), true),
        ("env -- FOO=1 sh", At(&[3]), true),
        ("env - sh", At(&[2]), true),
        ("env -C /tmp ls", At(&[3]), true),
        ("env --chdir=/tmp ls", At(&[2]), true),
        ("env -a name ls", At(&[3]), false), // -a is coreutils 9.6+
        ("env --default-signal ls", At(&[2]), true),
        ("env --default-signal=INT ls", At(&[2]), true),
        ("env -v ls", At(&[2]), true),
        ("env -0 ls", At(&[2]), false), // env refuses -0 with a program
        ("env -S x", Refused("env-split-string"), false),
        ("env --s=x", Refused("env-split-string"), false),
        ("env --sp x", Refused("env-split-string"), false),
        ("env -vS x", Refused("env-split-string"), false),
        ("env --env0-from=f ls", Refused("env-from-file"), false),
        ("env --help sh", Nothing, false),
        ("env --he sh", Nothing, false),
        ("env", Nothing, false),
        ("env FOO=1", Nothing, false),
        ("env -x sh", Refused("wrapper-option"), false),
        ("env --d ls", Refused("wrapper-option"), false),
        ("env --debug=1 ls", Refused("wrapper-option"), false),
        ("env -u", Refused("wrapper-option"), false),
    ];
    const NICE_T: Table = &[
        ("nice ls", At(&[1]), true),
        ("nice -n 5 ls", At(&[3]), true),
        ("nice -n5 ls", At(&[2]), true),
        ("nice --adj 5 ls", At(&[3]), true),
        ("nice --adjustment=5 ls", At(&[2]), true),
        ("nice -5 ls", At(&[2]), true),
        ("nice --5 ls", At(&[2]), true),
        ("nice -+5 ls", At(&[2]), true),
        ("nice -n 1 -5 ls", At(&[4]), true),
        ("nice --help ls", Nothing, false),
        ("nice -n", Refused("wrapper-option"), false),
        ("nice -x ls", Refused("wrapper-option"), false),
    ];
    const NOHUP_T: Table = &[
        ("nohup ls", At(&[1]), true),
        ("nohup -- ls", At(&[2]), true),
        ("nohup --help", Nothing, false),
        ("nohup -x ls", Refused("wrapper-option"), false),
    ];
    const SETSID_T: Table = &[
        ("setsid ls", At(&[1]), true),
        ("setsid -w ls", At(&[2]), true),
        ("setsid -fw ls", At(&[2]), true),
        ("setsid --wait ls", At(&[2]), true),
        ("setsid -w -- ls", At(&[3]), true),
        ("setsid -V ls", Nothing, false),
        ("setsid -x ls", Refused("wrapper-option"), false),
    ];
    const TIMEOUT_T: Table = &[
        ("timeout 5 ls", At(&[2]), true),
        ("timeout -s KILL 5 ls", At(&[4]), true),
        ("timeout -sKILL 5 ls", At(&[3]), true),
        ("timeout -vk 1 5 ls", At(&[4]), true),
        ("timeout --kill 1 5 ls", At(&[4]), true),
        ("timeout --kill=1 5 ls", At(&[3]), true),
        ("timeout --sig KILL 5 ls", At(&[4]), true),
        ("timeout --foreground --preserve 5 ls", At(&[4]), true),
        ("timeout -fp 5 ls", At(&[3]), false), // short -f and -p are coreutils 9.5+
        ("timeout 5", Nothing, false),
        ("timeout --help", Nothing, false),
        ("timeout -x 5 ls", Refused("wrapper-option"), false),
    ];
    const STDBUF_T: Table = &[
        ("stdbuf -oL ls", At(&[2]), true),
        ("stdbuf --out 0 ls", At(&[3]), true),
        ("stdbuf -o 0 -e 0 ls", At(&[5]), true),
        ("stdbuf --output=L ls", At(&[2]), true),
        ("stdbuf --e 0 ls", At(&[3]), true),
        ("stdbuf -x ls", Refused("wrapper-option"), false),
    ];
    const IONICE_T: Table = &[
        ("ionice -c 3 ls", At(&[3]), true),
        ("ionice -tc 3 ls", At(&[3]), true),
        ("ionice -c3 -n7 ls", At(&[3]), true),
        ("ionice --class 3 ls", At(&[3]), true),
        ("ionice --classd 7 ls", At(&[3]), true),
        ("ionice ls", At(&[1]), true),
        ("ionice -p 1", Nothing, false),
        ("ionice -p 1 sh", Nothing, false),
        ("ionice -t -p1 ls", Nothing, false),
        ("ionice --cl 3 ls", Refused("wrapper-option"), false),
    ];
    const TIME_T: Table = &[
        ("time ls", At(&[1]), true),
        ("time -ao out ls", At(&[3]), true),
        ("time --out out ls", At(&[3]), true),
        ("time -f %e ls", At(&[3]), true),
        ("time -p ls", At(&[2]), true),
        ("time --a -o out ls", At(&[4]), true),
        ("time -qv ls", At(&[2]), true),
        ("time -V", Nothing, false),
        ("time --output", Refused("wrapper-option"), false),
    ];
    const CHROOT_T: Table = &[
        ("chroot /x ls", At(&[2]), false),
        ("chroot --groups=1 /x ls", At(&[3]), false),
        ("chroot --skip-chdir /x ls", At(&[3]), false),
        ("chroot /x", Shell, false),
        ("chroot", Nothing, false),
        (
            "chroot --userspec=1:1 /x ls",
            Refused("privilege-escalation"),
            false,
        ),
    ];
    const COMMAND_T: Table = &[
        ("command ls", At(&[1]), false),
        ("command -p ls", At(&[2]), false),
        ("command -v ls", Nothing, false),
    ];
    const XARGS_T: Table = &[
        ("xargs ls", At(&[1]), true),
        ("xargs -0 -n 1 ls", At(&[4]), true),
        ("xargs -I{} cp {} /b", At(&[2]), true),
        ("xargs -i ls {}", At(&[2]), true),
        ("xargs -i{} ls", At(&[2]), true),
        ("xargs -e ls", At(&[2]), true),
        ("xargs -eEND ls", At(&[2]), true),
        ("xargs -E END ls", At(&[3]), true),
        ("xargs --max-args 1 ls", At(&[3]), true),
        ("xargs -l ls", At(&[2]), true),
        ("xargs", Nothing, false),
        ("xargs -I{} {} x", Refused("xargs-program"), false),
        ("xargs --replace=X X", Refused("xargs-program"), false),
        ("xargs -h ls", Refused("wrapper-option"), false),
    ];
    const FLOCK_T: Table = &[
        ("flock /tmp ls", At(&[2]), true),
        ("flock -n /tmp ls", At(&[3]), true),
        ("flock -w 5 /tmp ls", At(&[4]), true),
        ("flock --timeout 5 /tmp ls", At(&[4]), true),
        ("flock --nb /tmp ls", At(&[3]), true),
        ("flock -sn /tmp ls", At(&[3]), true),
        ("flock --fd 9 ls", At(&[3]), false),
        ("flock 9", Nothing, false),
        ("flock /tmp -c x", Refused("shell-wrapper"), false),
        ("flock /tmp --command x", Refused("shell-wrapper"), false),
        ("flock -c x /tmp", Refused("shell-wrapper"), false),
        ("flock --n /tmp ls", Refused("wrapper-option"), false),
    ];
    const SETPRIV_T: Table = &[
        ("setpriv --nnp ls", At(&[2]), true),
        ("setpriv --no-new-privs ls", At(&[2]), true),
        ("setpriv --inh-caps=-all ls", At(&[2]), true),
        ("setpriv --reset-env ls", At(&[2]), true),
        ("setpriv -d", Nothing, false),
        (
            "setpriv --reuid=1000 ls",
            Refused("privilege-escalation"),
            false,
        ),
        (
            "setpriv --reu 1000 ls",
            Refused("privilege-escalation"),
            false,
        ),
        ("setpriv --re ls", Refused("wrapper-option"), false),
    ];
    const UNSHARE_T: Table = &[
        ("unshare -m ls", At(&[2]), false),
        ("unshare --mount ls", At(&[2]), false),
        ("unshare --mount=/x ls", At(&[2]), false),
        ("unshare -R /x ls", At(&[3]), false),
        ("unshare --fork --pid ls", At(&[3]), false),
        ("unshare -rm", Shell, false),
        ("unshare", Shell, false),
        ("unshare -S 0 ls", Refused("privilege-escalation"), false),
    ];
    const NSENTER_T: Table = &[
        ("nsenter -t 1 -m ls", At(&[4]), false),
        ("nsenter -t1 -m -u ls", At(&[4]), false),
        ("nsenter -m/proc/1/ns/mnt ls", At(&[2]), false),
        ("nsenter -r ls", At(&[2]), false),
        ("nsenter -t 1 -a", Shell, false),
        ("nsenter -S 0 ls", Refused("privilege-escalation"), false),
    ];
    const CHRT_T: Table = &[
        ("chrt -o 0 ls", At(&[3]), true),
        ("chrt 1 ls", At(&[2]), false), // SCHED_RR needs CAP_SYS_NICE
        ("chrt -v -o 0 ls", At(&[4]), true),
        ("chrt -b ls", At(&[2]), false), // a priority is optional from util-linux 2.40
        ("chrt -o 0 5 ls", At(&[3]), false),
        ("chrt -p 1", Nothing, false),
        ("chrt -m", Nothing, false),
    ];
    const TASKSET_T: Table = &[
        ("taskset 1 ls", At(&[2]), true),
        ("taskset -c 0 ls", At(&[3]), true),
        ("taskset --cpu-list 0 ls", At(&[3]), true),
        ("taskset -p 1", Nothing, false),
        ("taskset -ap 1", Nothing, false),
    ];
    const PRLIMIT_T: Table = &[
        ("prlimit --nofile=100 ls", At(&[2]), true),
        ("prlimit -n100 ls", At(&[2]), true),
        // An optional value never takes the next word: "100" is the program.
        ("prlimit -n 100 ls", At(&[2]), true),
        ("prlimit --cpu 5 ls", At(&[2]), true),
        ("prlimit --pid 1", Nothing, false),
        ("prlimit", Nothing, false),
    ];
    const FIND_T: Table = &[
        ("find /etc/hostname -exec ls {} ;", At(&[3]), true),
        (
            "find /etc/hostname -name x -execdir rm {} + -ok ls ;",
            At(&[5, 9]),
            false,
        ),
        ("find /etc/hostname -exec", Nothing, false),
        ("find /etc/hostname", At(&[]), false),
    ];
    const BUSYBOX_T: Table = &[
        ("busybox rm -rf x", At(&[1]), false),
        ("busybox --list", Nothing, false),
        ("busybox", Nothing, false),
    ];

    const TABLES: &[Table] = &[
        ENV_T, NICE_T, NOHUP_T, SETSID_T, TIMEOUT_T, STDBUF_T, IONICE_T, TIME_T, CHROOT_T,
        COMMAND_T, XARGS_T, FLOCK_T, SETPRIV_T, UNSHARE_T, NSENTER_T, CHRT_T, TASKSET_T, PRLIMIT_T,
        FIND_T, BUSYBOX_T,
    ];

    fn argv(row: &str) -> Vec<String> {
        row.split(' ').map(str::to_owned).collect()
    }

    fn got(argv: &[String]) -> Want {
        match runs(argv, 0, &argv[0], &Input::None) {
            Ok(Runs::Programs(p)) => {
                let at: Vec<usize> = p.iter().map(|p| p.at).collect();
                At(Box::leak(at.into_boxed_slice()))
            }
            Ok(Runs::Shell) => Shell,
            Ok(Runs::Nothing) => Nothing,
            Err(r) => Refused(r.rule),
        }
    }

    #[test]
    fn every_table_row() {
        for table in TABLES {
            for (row, want, _) in *table {
                assert_eq!(got(&argv(row)), *want, "{row}");
            }
        }
    }

    #[test]
    fn every_table_row_one_more_word() {
        // Words after the program change nothing before it.
        for table in TABLES {
            for (row, want, _) in *table {
                if let At(at) = want
                    && !at.is_empty()
                {
                    let mut a = argv(row);
                    a.push("--bogus".into());
                    assert_eq!(got(&a), *want, "{row} --bogus");
                }
            }
        }
    }

    /// The real tools agree: with the word at the program index swapped for a marker program,
    /// the marker runs. A table that took an option's value for the program, or the program for
    /// a value, would run something else, or nothing.
    #[test]
    fn the_real_tools_run_the_program_the_table_names() {
        let dir = tempfile::tempdir().unwrap();
        let mut ran = 0;
        for (n, (row, want, real)) in TABLES.iter().flat_map(|t| t.iter()).enumerate() {
            let (true, &At(&[at])) = (*real, want) else {
                continue;
            };
            let mut a = argv(row);
            if a[0] == "time" {
                a[0] = "/usr/bin/time".into(); // not the shell keyword
            }
            if Command::new("sh")
                .args(["-c", &format!("command -v {} >/dev/null", a[0])])
                .status()
                .is_ok_and(|s| !s.success())
            {
                eprintln!("{row}: {} is not installed here; not run", a[0]);
                continue;
            }
            let mark = dir.path().join(format!("ran-{n}"));
            let prog = dir.path().join(format!("mark-{n}"));
            std::fs::write(&prog, format!("#!/bin/sh\n: > '{}'\n", mark.display())).unwrap();
            std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
            a[at] = prog.to_string_lossy().into_owned();
            let mut child = Command::new(&a[0])
                .args(&a[1..])
                .current_dir(dir.path())
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // xargs reads one item; the rest ignore their input.
            use std::io::Write;
            // (A tool that exits first closes its end: a broken pipe is no failure here.)
            let _ = child.stdin.take().unwrap().write_all(b"item\n");
            let out = child.wait_with_output().unwrap();
            // `setsid -f` returns before its child has run: wait for the marker (bounded).
            for _ in 0..100 {
                if mark.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            assert!(
                mark.exists(),
                "{row}: the real {} did not run the word at {at} ({}; {})",
                a[0],
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
        assert!(ran > 50, "only {ran} rows ran for real");
    }
}
