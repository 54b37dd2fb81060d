//! `rex`: run commands and file operations on a REXD target.
//!
//! ```text
//! rex exec -- git status --short        # argv mode, output streamed live
//! git diff | rex exec -- wc -l          # stdin forwarded, EOF passed on (as ssh; -n: empty)
//! rex sh 'make -j4 2>&1 | tail'         # shell mode (the daemon must allow it)
//! rex read src/main.rs > main.rs        # byte-exact, any size
//! rex target add server-a ssh://deploy@server-a --use
//! rex ls /srv/myapp                     # now on server-a
//! ```
//!
//! The remote exit code becomes rex's; a command killed by a signal exits 128+N, a timed-out
//! one 124. rex's own failures: 127 when rexd is not installed on the target, 255 when the
//! target cannot be reached, 1 when the daemon refuses a call, 2 for usage errors.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};
use deskwire::rexd::{ExecExit, FileType, Program, Signal, WriteMode};
use indicatif::ProgressBar;
use rexd::client::targets;
use rexd::client::{
    Client, ClientError, ConnectOptions, ExecOptions, Stream, TargetSpec, Targets, WriteOptions,
};

#[derive(Parser, Debug)]
#[command(
    name = "rex",
    version,
    long_version = rexd::cli::LONG_VERSION,
    about = "Run commands and file operations on a REXD target"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Args, Debug)]
struct Global {
    /// The target: a name from the targets file, `local`, `ssh://[user@]host[:port]`, or
    /// `https://host:port` (`wss://`; `http://` for loopback only) for a `rexd --listen` daemon
    /// (default: $REX_TARGET, else the file's current target, else `local`).
    #[arg(short, long, global = true)]
    target: Option<String>,
    /// The targets file (default: $REX_TARGETS_FILE, else $XDG_CONFIG_HOME/rex/targets.toml).
    #[arg(long, global = true)]
    targets_file: Option<PathBuf>,
    /// ssh identity file (`ssh -i`).
    #[arg(short, long, global = true)]
    identity: Option<PathBuf>,
    /// An ssh option (`ssh -o OPTION`), repeatable.
    #[arg(short = 'o', long = "ssh-option", global = true)]
    ssh_option: Vec<String>,
    /// A raw ssh argument, repeatable (`--ssh-arg=-F --ssh-arg=none`).
    #[arg(long = "ssh-arg", global = true, allow_hyphen_values = true)]
    ssh_arg: Vec<String>,
    /// The daemon program on the target (a path, or a name on its PATH).
    #[arg(long, global = true)]
    rexd: Option<String>,
    /// An extra daemon argument after `--stdio`, repeatable.
    #[arg(long = "rexd-arg", global = true, allow_hyphen_values = true)]
    rexd_arg: Vec<String>,
    /// A workspace root to ask for, repeatable: within the daemon's own roots (its cwd unless
    /// started with --root; widen them with --rexd-arg=--root --rexd-arg=DIR).
    #[arg(long = "root", global = true)]
    roots: Vec<String>,
    /// `https://` targets: a file holding the bearer token (default: the token in $REXD_TOKEN).
    #[arg(long, global = true, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// `https://` targets: the environment variable holding the token (default REXD_TOKEN).
    #[arg(long, global = true, value_name = "VAR")]
    token_env: Option<String>,
    /// `https://` targets: trust this CA (PEM) for the daemon's certificate.
    #[arg(long, global = true, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// `https://` targets: a client certificate (PEM) for mTLS.
    #[arg(long, global = true, value_name = "FILE", requires = "client_key")]
    client_cert: Option<PathBuf>,
    /// `https://` targets: the client certificate's key (PEM).
    #[arg(long, global = true, value_name = "FILE", requires = "client_cert")]
    client_key: Option<PathBuf>,
    /// Keep a command going across a dropped link: a resumable session (the remote rexd as
    /// `rexd --stdio --resumable`), resumed by rex itself when the link drops.
    #[arg(long, global = true)]
    resume: bool,
    /// Offer zstd compression at session.open: output and file contents travel compressed
    /// where that makes them shorter (worth it over slow links and for text).
    #[arg(long, global = true)]
    compress: bool,
    /// Do not offer raw frames (file bytes and command output after each line, or in one
    /// binary WebSocket message with it, instead of escaped or base64 inside JSON). They are
    /// offered by default over every target; a daemon that does not know them ignores the
    /// offer.
    #[arg(long, global = true)]
    no_raw_frames: bool,
    /// Show the transport's stderr (daemon logs, ssh messages) as it comes.
    #[arg(short, long, global = true)]
    verbose: bool,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run a program (argv mode, no shell): `rex exec -- ls -la`.
    #[command(after_help = STDIN_HELP)]
    Exec {
        #[command(flatten)]
        run: RunArgs,
        /// The program and its arguments.
        #[arg(required = true, last = true)]
        argv: Vec<String>,
    },
    /// Run a shell command line (`sh -c` on the target).
    #[command(after_help = STDIN_HELP)]
    Sh {
        #[command(flatten)]
        run: RunArgs,
        /// The command line.
        command: String,
    },
    /// Write a file's bytes to stdout.
    Read {
        path: String,
        /// Start at this byte.
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Read at most this many bytes.
        #[arg(long)]
        length: Option<u64>,
    },
    /// Write stdin (or --content) to a file, atomically.
    Write {
        path: String,
        /// The content (default: read stdin).
        #[arg(long)]
        content: Option<String>,
        /// Append instead of replacing.
        #[arg(long, conflicts_with = "create")]
        append: bool,
        /// Fail if the file exists.
        #[arg(long)]
        create: bool,
        /// Create missing parent directories.
        #[arg(short = 'p', long)]
        mkdir_parents: bool,
        /// Refuse unless the file's mtime is still this (from `rex stat`).
        #[arg(long)]
        expected_mtime: Option<String>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List a directory.
    Ls {
        #[arg(default_value = ".")]
        path: String,
        /// Recurse.
        #[arg(short, long)]
        recursive: bool,
        /// Type, size and mtime too.
        #[arg(short, long)]
        long: bool,
        /// At most this many entries.
        #[arg(long)]
        max_entries: Option<u64>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Find files by glob pattern within the allowed roots.
    Glob {
        pattern: String,
        /// Relative to this directory.
        #[arg(long)]
        cwd: Option<String>,
        /// At most this many matches.
        #[arg(long)]
        max_matches: Option<u64>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show a path's type, size, mode and mtime (exit 1 when it does not exist).
    Stat {
        path: String,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the session: capabilities, limits, roots (JSON).
    Info,
    /// Named targets: list, use, add, remove.
    #[command(subcommand)]
    Target(TargetCmd),
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Working directory on the target.
    #[arg(long)]
    cwd: Option<String>,
    /// An environment variable `NAME=VALUE`, repeatable.
    #[arg(short, long = "env", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// Kill the command after this many milliseconds (exit 124). Without it, the daemon's
    /// `default_timeout_ms` applies (30 s unless its operator set another); it never allows
    /// more than its `hard_timeout_ms` (5 min by default; `rex info` shows both).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: Option<u64>,
    /// Cap the output at this many bytes (without it, rex asks for all of it, as ssh streams
    /// it: only the daemon's `limits.hard_output_bytes`, if its operator set one, cuts it).
    #[arg(long)]
    max_output_bytes: Option<u64>,
    /// Give the command an empty stdin (like `ssh -n`) and leave rex's own unread.
    #[arg(short = 'n', long)]
    no_stdin: bool,
}

/// What `rex exec --help` and `rex sh --help` say about stdin.
const STDIN_HELP: &str = "\
Stdin works as with ssh: rex's stdin is forwarded to the command as it comes, and its end
(EOF) closes the command's stdin, so `printf 'a\\nb\\n' | rex exec -- cat` prints both lines.
A command that never reads its stdin is not held up by it. Use -n to give the command an empty
stdin instead, e.g. in a `while read` loop whose own stdin rex must not eat:
  while read -r host; do rex -t \"$host\" exec -n -- uptime; done < hosts";

#[derive(Subcommand, Debug)]
enum TargetCmd {
    /// List the targets; `*` marks the current one.
    List,
    /// Make NAME the current target.
    Use { name: String },
    /// Add (or replace) a named target.
    Add {
        name: String,
        /// `local`, `ssh://[user@]host[:port]`, or `https://host:port` (the --token-file,
        /// --ca-file, --client-cert and --client-key given are kept with it).
        url: String,
        /// The working directory for commands.
        #[arg(long)]
        cwd: Option<String>,
        /// Make it the current target too.
        #[arg(long = "use")]
        make_current: bool,
    },
    /// Remove a named target.
    Remove { name: String },
    /// Print the resolved current target (TOML).
    Show,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {s:?}")),
    }
}

/// `println!` that ends rex quietly when its stdout is closed (`rex info | head`), as `cat`
/// and `ls` do, where `println!` would panic on the broken pipe.
macro_rules! out {
    ($($arg:tt)*) => {
        print_line(format_args!($($arg)*))
    };
}

fn print_line(args: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
    {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("rex: cannot write to stdout: {e}");
        }
        std::process::exit(i32::from(code::STDOUT_CLOSED));
    }
}

/// rex's own exit codes (the remote command's code passes through unchanged).
mod code {
    pub const REFUSED: u8 = 1;
    /// Stdout went away (what a shell shows for a process a broken pipe ended: 128 + SIGPIPE).
    pub const STDOUT_CLOSED: u8 = 141;
    pub const TIMED_OUT: u8 = 124;
    pub const NOT_EXECUTABLE: u8 = 126;
    pub const NOT_FOUND: u8 = 127;
    pub const UNREACHABLE: u8 = 255;
}

fn main() -> ExitCode {
    // `--generate-completions SHELL` and `--generate-man`, for packaging (hidden).
    if let Some(code) = rexd::cli::generate(Cli::command) {
        return code;
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        // Whoever read our output stopped (`rex exec -- seq 1 1000000 | head`): the command
        // was ended; nothing to say, as cat says nothing.
        Err(ClientError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::from(code::STDOUT_CLOSED)
        }
        Err(e) => {
            eprintln!("rex: {e}");
            ExitCode::from(match e {
                ClientError::RexdNotFound(_) => code::NOT_FOUND,
                // As a shell says it: 127 for no such program, 126 for one it may not run.
                ClientError::Launch {
                    errno: Some(libc::ENOENT),
                    ..
                } => code::NOT_FOUND,
                ClientError::Launch {
                    errno: Some(libc::EACCES),
                    ..
                } => code::NOT_EXECUTABLE,
                ClientError::Remote { .. }
                | ClientError::Launch { .. }
                | ClientError::BadTarget { .. }
                | ClientError::UnknownTarget { .. }
                | ClientError::TargetsFile { .. }
                | ClientError::Unauthorized { .. }
                | ClientError::Busy { .. }
                | ClientError::TooLarge { .. }
                | ClientError::Setting { .. }
                | ClientError::Output(_) => code::REFUSED,
                _ => code::UNREACHABLE,
            })
        }
    }
}

fn run(cli: Cli) -> Result<u8, ClientError> {
    let file = targets::default_path(cli.global.targets_file.as_deref());
    if let Cmd::Target(cmd) = cli.command {
        return target_command(cmd, &cli.global, &file);
    }
    let spec = resolve(&cli.global, &file)?;
    warn_if_token_file_is_shared(&spec);
    let options = ConnectOptions {
        forward_stderr: cli.global.verbose,
        resume: spec.resume,
        compress: spec.compress,
        raw_frames: !spec.no_raw_frames,
        // rex connects from its main thread: its ssh (or local rexd) ends with it, even when
        // rex is killed while ssh is still connecting.
        end_with_this_thread: true,
        ..ConnectOptions::default()
    };
    let mut client = Client::connect(&spec, &options)?;
    let code = command(&mut client, cli.command)?;
    client.close()?;
    Ok(code)
}

/// A token file others can read is used, as ssh uses a readable config, but said: whoever
/// reads the token can act as this client on the daemon (which refuses such a file of its own).
fn warn_if_token_file_is_shared(spec: &TargetSpec) {
    if let Some(path) = &spec.token_file
        && let Ok(Some(mode)) = rexd::sys::open_to_others(path)
    {
        eprintln!(
            "rex: warning: the token file {} is readable by group or others (mode {mode:o}); \
             `chmod 600` it: whoever reads it can act as you on the daemon",
            path.display()
        );
    }
}

/// The target to use, with the command line's overrides applied.
fn resolve(global: &Global, file: &std::path::Path) -> Result<TargetSpec, ClientError> {
    // A targets file the user named that is not there chooses nothing, and rex would run the
    // command here: a mistyped path must not send a command meant for a server to `local`.
    let named = global.targets_file.is_some()
        || std::env::var_os(targets::TARGETS_FILE_ENV).is_some_and(|v| !v.is_empty());
    let chosen = global.target.is_some()
        || std::env::var_os(targets::TARGET_ENV).is_some_and(|v| !v.is_empty());
    if named && !chosen && !file.exists() {
        return Err(ClientError::TargetsFile {
            file: file.display().to_string(),
            reason: "it does not exist, so it chooses no target (the command would run here, \
                     on `local`): check the path, or choose with -t"
                .into(),
        });
    }
    let targets = Targets::load(file)?;
    let name = targets.chosen_name(global.target.as_deref());
    let mut spec = targets.lookup(&name, file)?;
    apply_overrides(&mut spec, global);
    Ok(spec)
}

fn apply_overrides(spec: &mut TargetSpec, global: &Global) {
    // The session flags: on the command line for one run, or saved with `rex target add`.
    spec.resume |= global.resume;
    spec.compress |= global.compress;
    spec.no_raw_frames |= global.no_raw_frames;
    for o in &global.ssh_option {
        spec.ssh_options.extend(["-o".to_owned(), o.clone()]);
    }
    spec.ssh_options.extend(global.ssh_arg.iter().cloned());
    if let Some(r) = &global.rexd {
        spec.rexd = Some(r.clone());
    }
    spec.rexd_args.extend(global.rexd_arg.iter().cloned());
    spec.workspace_roots.extend(global.roots.iter().cloned());
    let paths = [
        (&global.identity, &mut spec.identity_file),
        (&global.token_file, &mut spec.token_file),
        (&global.ca_file, &mut spec.ca_file),
        (&global.client_cert, &mut spec.client_cert),
        (&global.client_key, &mut spec.client_key),
    ];
    for (given, field) in paths {
        if let Some(p) = given {
            // Absolute, so a target saved with `rex target add` works from any directory.
            *field = Some(std::path::absolute(p).unwrap_or_else(|_| p.clone()));
        }
    }
    if let Some(v) = &global.token_env {
        spec.token_env = Some(v.clone());
    }
}

fn target_command(
    cmd: TargetCmd,
    global: &Global,
    file: &std::path::Path,
) -> Result<u8, ClientError> {
    let mut targets = Targets::load(file)?;
    match cmd {
        TargetCmd::List => {
            let current = targets.current_name().to_owned();
            let mark = |name: &str| if name == current { "*" } else { " " };
            if !targets.targets.contains_key("local") {
                out!("{} local\tlocal", mark("local"));
            }
            for (name, spec) in &targets.targets {
                out!("{} {name}\t{}", mark(name), spec.url);
            }
            // `rex target use URL` made a URL current: it is no name, so show it as itself.
            if current != "local" && !targets.targets.contains_key(&current) {
                out!("* {current}\t{current}");
            }
        }
        TargetCmd::Use { name } => {
            targets.use_target(&name, file)?;
            targets.save(file)?;
            eprintln!("rex: now using {name}");
        }
        TargetCmd::Add {
            name,
            url,
            cwd,
            make_current,
        } => {
            let mut spec = TargetSpec::new(url);
            spec.cwd = cwd;
            apply_overrides(&mut spec, global);
            targets.add(&name, spec)?;
            if make_current {
                targets.use_target(&name, file)?;
            }
            targets.save(file)?;
        }
        TargetCmd::Remove { name } => {
            let was_current = targets.current_name() == name;
            if !targets.remove(&name) {
                return Err(ClientError::UnknownTarget {
                    known: targets
                        .targets
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                    name,
                    file: file.display().to_string(),
                });
            }
            targets.save(file)?;
            if was_current {
                eprintln!("rex: {name} was the current target; now using local");
            }
        }
        TargetCmd::Show => {
            let spec = resolve(global, file)?;
            let name = targets.chosen_name(global.target.as_deref());
            let text = toml::to_string_pretty(&spec).unwrap_or_default();
            out!("# {name}\n{text}");
        }
    }
    Ok(0)
}

fn command(client: &mut Client, cmd: Cmd) -> Result<u8, ClientError> {
    match cmd {
        Cmd::Exec { run, argv } => exec(client, Program::Argv(argv), run),
        Cmd::Sh { run, command } => exec(client, Program::Shell(command), run),
        Cmd::Read {
            path,
            offset,
            length,
        } => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            // The bar, if any, is made once the first piece has told the size.
            let mut bar: Option<Option<ProgressBar>> = None;
            let result = client.read_file_with_progress(
                &path,
                offset,
                length,
                &mut |bytes| out.write_all(bytes),
                &mut |done, total| {
                    if let Some(b) = bar.get_or_insert_with(|| progress::bar(total, &path)) {
                        b.set_position(done);
                    }
                },
            );
            let bar = bar.flatten();
            let result = progress::end(bar, result)?;
            out.flush().map_err(ClientError::Output)?;
            if result.truncated {
                eprintln!("rex: {path}: the daemon stopped short of the end (truncated)");
            }
            Ok(0)
        }
        Cmd::Write {
            path,
            content,
            append,
            create,
            mkdir_parents,
            expected_mtime,
            json,
        } => {
            let bytes = match content {
                Some(c) => c.into_bytes(),
                None => {
                    let mut buf = Vec::new();
                    std::io::stdin()
                        .read_to_end(&mut buf)
                        .map_err(ClientError::Output)?;
                    buf
                }
            };
            let mode = if append {
                WriteMode::Append
            } else if create {
                WriteMode::Create
            } else {
                WriteMode::Replace
            };
            // One fs.write carries the whole file, so there is nothing to count on the way: the
            // bar, if any, says how much is going and for how long, and fills when it is done.
            let bar = progress::write_bar(bytes.len() as u64, &path);
            let result = client.write_file(
                &path,
                &bytes,
                &WriteOptions {
                    mode,
                    mkdir_parents,
                    expected_mtime,
                },
            );
            if let (Some(b), Ok(_)) = (&bar, &result) {
                b.set_position(bytes.len() as u64);
            }
            let result = progress::end(bar, result)?;
            if json {
                print_json(&result);
            }
            Ok(0)
        }
        Cmd::Ls {
            path,
            recursive,
            long,
            max_entries,
            json,
        } => {
            let result = client.list(&path, recursive, max_entries)?;
            if json {
                print_json(&result);
                return Ok(0);
            }
            for e in &result.entries {
                let name = shown_name(if recursive { &e.path } else { &e.name });
                let slash = if e.kind == FileType::Dir { "/" } else { "" };
                if long {
                    out!(
                        "{:<7} {:>12} {:<25} {name}{slash}",
                        type_name(e.kind),
                        e.size.map(|s| s.to_string()).unwrap_or_default(),
                        e.mtime.as_deref().unwrap_or("")
                    );
                } else {
                    out!("{name}{slash}");
                }
            }
            if result.truncated {
                eprintln!("rex: listing truncated (--max-entries N for more)");
            }
            Ok(0)
        }
        Cmd::Glob {
            pattern,
            cwd,
            max_matches,
            json,
        } => {
            let result = client.glob(&pattern, cwd, max_matches)?;
            if json {
                print_json(&result);
            } else {
                for m in &result.matches {
                    out!("{}", shown_name(m));
                }
            }
            if result.truncated {
                eprintln!("rex: matches truncated (--max-matches N for more)");
            }
            Ok(0)
        }
        Cmd::Stat { path, json } => {
            let s = client.stat(&path)?;
            if json {
                // The answer is printed either way; the status says whether the path exists,
                // as without --json.
                print_json(&s);
                if !s.exists {
                    return Ok(code::REFUSED);
                }
            } else if !s.exists {
                out!("{}: does not exist", shown_name(&s.path));
                return Ok(code::REFUSED);
            } else {
                out!(
                    "{}: {} size={} mode={} mtime={}{}",
                    shown_name(&s.path),
                    s.kind.map(type_name).unwrap_or("?"),
                    s.size.map(|n| n.to_string()).unwrap_or_default(),
                    s.mode.map(|m| format!("{m:o}")).unwrap_or_default(),
                    s.mtime.as_deref().unwrap_or(""),
                    s.symlink_target
                        .as_deref()
                        .map(|t| format!(" -> {}", shown_name(t)))
                        .unwrap_or_default()
                );
            }
            Ok(0)
        }
        Cmd::Info => {
            print_json(&client.info()?);
            Ok(0)
        }
        Cmd::Target(_) => unreachable!("handled before connecting"),
    }
}

/// `rex read` and `rex write`: a progress bar on stderr for a transfer of
/// [`progress::MIN_BYTES`] or more, only when stderr is a terminal (never when it is piped or
/// redirected, so scripts see exactly what they saw before).
mod progress {
    use std::io::IsTerminal;
    use std::time::Duration;

    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

    pub const MIN_BYTES: u64 = 1 << 20;

    fn new(total: u64, what: &str, template: &str) -> Option<ProgressBar> {
        if total < MIN_BYTES || !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_owned());
        Some(bar)
    }

    /// A bar for `rex read`, moved on piece by piece.
    pub fn bar(total: u64, what: &str) -> Option<ProgressBar> {
        new(
            total,
            what,
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
        )
    }

    /// A bar for `rex write`: a spinner and the time, until the one call is answered.
    pub fn write_bar(total: u64, what: &str) -> Option<ProgressBar> {
        let bar = new(
            total,
            what,
            "{spinner} {msg} [{bar:30}] {bytes}/{total_bytes} ({elapsed})",
        )?;
        bar.enable_steady_tick(Duration::from_millis(100));
        Some(bar)
    }

    /// Leaves the finished bar on the terminal, or abandons it where the transfer failed.
    pub fn end<T, E>(bar: Option<ProgressBar>, result: Result<T, E>) -> Result<T, E> {
        if let Some(b) = bar {
            if result.is_ok() {
                b.finish();
            } else {
                b.abandon();
            }
        }
        result
    }
}

fn exec(client: &mut Client, program: Program, run: RunArgs) -> Result<u8, ClientError> {
    let options = ExecOptions {
        cwd: run.cwd,
        env: run.env,
        stdin: None,
        timeout_ms: run.timeout_ms,
        // All of it, as ssh streams it (the client drops this when a cap is given).
        uncapped_output: true,
        max_output_bytes: run.max_output_bytes,
    };
    // As ssh: forward stdin unless -n (then the client gives the command an empty one).
    let input: Option<Box<dyn Read + Send>> = if run.no_stdin {
        None
    } else {
        Some(Box::new(std::io::stdin()))
    };
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let exit = client.exec(program, &options, input, &mut |stream, bytes| {
        // Written and flushed per event, so output shows as the command makes it.
        match stream {
            Stream::Stdout => {
                let mut out = stdout.lock();
                out.write_all(bytes)?;
                out.flush()
            }
            Stream::Stderr => {
                let mut err = stderr.lock();
                err.write_all(bytes)?;
                err.flush()
            }
        }
    })?;
    Ok(exit_code(&exit))
}

/// The shell's convention: the code, else 128 + the signal's number; 124 for a timeout.
fn exit_code(exit: &ExecExit) -> u8 {
    if exit.truncated {
        eprintln!(
            "rex: output truncated at the daemon's cap (--max-output-bytes, or its \
             limits.hard_output_bytes; an older rexd caps at limits.max_output_bytes)"
        );
    }
    if exit.timed_out {
        eprintln!("rex: timed out after {} ms", exit.duration_ms);
        return code::TIMED_OUT;
    }
    if let Some(c) = exit.exit_code {
        return (c & 0xff) as u8;
    }
    let number = exit
        .signal
        .as_deref()
        .and_then(Signal::from_name)
        .map(signal_number)
        .unwrap_or(0);
    if let Some(s) = &exit.signal {
        eprintln!("rex: killed by SIG{}", s.trim_start_matches("SIG"));
    }
    128u8.wrapping_add(number)
}

fn signal_number(s: Signal) -> u8 {
    match s {
        Signal::Hup => 1,
        Signal::Int => 2,
        Signal::Quit => 3,
        Signal::Abrt => 6,
        Signal::Kill => 9,
        Signal::Usr1 => 10,
        Signal::Usr2 => 12,
        Signal::Pipe => 13,
        Signal::Alrm => 14,
        Signal::Term => 15,
        Signal::Cont => 18,
        Signal::Stop => 19,
        Signal::Tstp => 20,
        Signal::Winch => 28,
        _ => 0,
    }
}

/// A path as `ls`, `glob` and `stat` print it: as it is, unless it has a control character
/// (Linux allows a newline, a tab or an escape sequence in a name). Then it is quoted as a
/// shell's `$'...'`, so that one line is one path, the terminal shows the bytes instead of
/// obeying them, and the line pastes back into bash or zsh as the same name.
fn shown_name(path: &str) -> std::borrow::Cow<'_, str> {
    if !path.chars().any(char::is_control) {
        return path.into();
    }
    let mut quoted = String::with_capacity(path.len() + 8);
    quoted.push_str("$'");
    for c in path.chars() {
        match c {
            '\\' => quoted.push_str("\\\\"),
            '\'' => quoted.push_str("\\'"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            // C1 controls are UTF-8 sequences of two bytes: both as the shell reads them back.
            c if c.is_control() => {
                let mut bytes = [0; 4];
                for b in c.encode_utf8(&mut bytes).bytes() {
                    quoted.push_str(&format!("\\x{b:02x}"));
                }
            }
            c => quoted.push(c),
        }
    }
    quoted.push('\'');
    quoted.into()
}

fn type_name(t: FileType) -> &'static str {
    match t {
        FileType::File => "file",
        FileType::Dir => "dir",
        FileType::Symlink => "symlink",
        _ => "other",
    }
}

fn print_json<T: serde::Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => out!("{text}"),
        Err(e) => eprintln!("rex: cannot print the result: {e}"),
    }
}
