//! `rex` over real ssh next to plain ssh, on a private sshd on loopback.
//!
//! Each pair does the same work both ways, so the ratio is what REXD costs over ssh alone:
//! - `connect_exec_true`: one fresh connection per call: `rex exec -- true` (the CLI) vs
//!   `ssh host true`. Dominated by the ssh handshake and the remote login shell.
//! - `exec_true`: one long-lived connection: `exec.start` + events until `exec.exit` through
//!   the client library vs `/bin/true; echo marker` written to a long-lived `ssh host sh` (the
//!   binary, so both fork and exec a process; the shell's builtin `true` would not).
//! - `stream_200mb`: 200 MB of stdout (`yes … | head -c 200M`) as `exec.stdout` events vs the
//!   same command's raw bytes through the long-lived ssh channel.
//! - `fs_read_10mib_text`, `fs_read_10mib_random`: `fs.read` of a 10 MiB file, text (log-like
//!   lines) and random bytes (xorshift), through `Client::read_file` (pieces of the daemon's
//!   `max_file_read_bytes`, read ahead) vs `cat` of it through the long-lived ssh channel.
//! - `exec_seq_2m`: a chatty command, `seq 1 2000000` (14.9 MB in short lines), as `exec.stdout`
//!   events vs its raw bytes through the long-lived ssh channel.
//! - in the turns only: `exec_find_usr` (`find /usr -xdev`, about 10 MB of paths) and
//!   `exec_random_100mib` (`head -c 104857600 /dev/urandom`), and `echo_one_line`: the round
//!   trip of a line through a running `cat` (`exec.input`, then an output event), vs the same
//!   through a long-lived `ssh host cat`.
//!
//! `fs_read_*` and `exec_seq_2m` also run `rex_over_ssh_zstd`: a second session that negotiated
//! compression (`docs/rexd-compression.md`), and `rex_over_ssh_raw`: a third that negotiated
//! raw frames and raw output (`docs/rexd-raw-frames.md`, what `rex` offers by default: file
//! bytes and command output after their lines), and
//! `rex_over_ssh_zstd_raw`: both (`rex --compress`: pieces that shrink come as raw zstd frames),
//! side by side with the plain one (JSON strings only, as before either). After the criterion
//! groups, those five contenders run again in turns, round after round ([`ROUNDS`]), and the medians and their
//! ratios to ssh are printed: on a shared machine the speed changes between one criterion group
//! and the next, and turns see the same machine. Each case also runs through ssh with `| cat`
//! after the command: rex's path is ssh's with one more process on it (rexd), and that one
//! process, copying and nothing else, is what ssh itself pays for it.
//!
//! Run: `cargo bench -p rexd --bench ssh -- --warm-up-time 1 --measurement-time 3`
//! (`-- fs_read` or `-- exec_seq` for one group).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use deskwire::rexd::Program;
use deskwire_integration::{Sshd, TempDir};
use rexd::client::{Client, ConnectOptions, ExecOptions, TargetSpec};

const REX: &str = env!("CARGO_BIN_EXE_rex");
const REXD: &str = env!("CARGO_BIN_EXE_rexd");
const STREAM_BYTES: u64 = 200_000_000;
const FILE_BYTES: usize = 10 * 1024 * 1024;
/// `seq 1 2000000 | wc -c`.
const SEQ_BYTES: u64 = 14_888_896;
/// A large `find`: every path under /usr, one line each (about 10 MB here).
const FIND_CMD: &str = "find /usr -xdev";
/// 100 MiB of random bytes.
const RANDOM_CMD: &str = "head -c 104857600 /dev/urandom";
const RANDOM_BYTES: u64 = 104_857_600;
const STREAM_CMD: &str =
    "yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c 200000000";

struct World {
    sshd: Sshd,
    _tmp: TempDir,
    spec: TargetSpec,
    text: String,
    random: String,
}

/// 10 MiB of log-like text lines.
fn text_file() -> Vec<u8> {
    let mut out = Vec::with_capacity(FILE_BYTES + 128);
    let mut i = 0u64;
    while out.len() < FILE_BYTES {
        out.extend_from_slice(
            format!(
                "2026-11-26T10:{:02}:{:02}.{:03}Z INFO worker[{}] request {} done in {} ms: \"GET /api/items?page={}\"\n",
                i / 3600 % 60,
                i / 60 % 60,
                i % 1000,
                i % 16,
                i,
                i * 37 % 1000,
                i % 97
            )
            .as_bytes(),
        );
        i += 1;
    }
    out.truncate(FILE_BYTES);
    out
}

/// 10 MiB from xorshift64: incompressible, and not UTF-8.
fn random_file() -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..FILE_BYTES / 8)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect()
}

fn world() -> Option<World> {
    if let Some(why) = Sshd::missing_tools() {
        eprintln!("ssh benches skipped: {why}");
        return None;
    }
    let bin_dir = Path::new(REXD).parent().unwrap().display().to_string();
    let sshd = Sshd::start_with_config(&format!("SetEnv PATH={bin_dir}:/usr/bin:/bin"));
    let tmp = TempDir::new("rex-bench").unwrap();
    let work = tmp.path().canonicalize().unwrap();
    let config = work.join("rexd.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlog_level = \"warn\"\n[limits]\nmax_output_bytes = 268435456\n\
             [security]\nallow_shell = true\n[[security.allowed_roots]]\npath = \"{}\"\n\
             [audit]\nenabled = false\n",
            work.display()
        ),
    )
    .unwrap();
    let text = work.join("ten.txt");
    std::fs::write(&text, text_file()).unwrap();
    let random = work.join("ten.bin");
    std::fs::write(&random, random_file()).unwrap();
    let spec = TargetSpec {
        ssh_options: sshd.ssh_options(),
        rexd_args: vec!["--config".into(), config.display().to_string()],
        ..TargetSpec::new(sshd.url())
    };
    Some(World {
        sshd,
        _tmp: tmp,
        spec,
        text: text.display().to_string(),
        random: random.display().to_string(),
    })
}

/// A long-lived `ssh host sh`: commands in, their output back, one channel.
struct SshShell {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl SshShell {
    fn open(sshd: &Sshd) -> SshShell {
        let mut child = sshd
            .command(["sh"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::with_capacity(64 * 1024, child.stdout.take().unwrap());
        SshShell {
            child,
            stdin,
            stdout,
        }
    }

    /// Runs `cmd`, then reads `bytes` of its output and the marker line after it.
    fn run(&mut self, cmd: &str, bytes: u64) {
        writeln!(self.stdin, "{cmd}; echo __done__").unwrap();
        self.stdin.flush().unwrap();
        let copied = std::io::copy(&mut (&mut self.stdout).take(bytes), &mut std::io::sink());
        assert_eq!(copied.unwrap(), bytes);
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "__done__\n");
    }
}

impl Drop for SshShell {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "exit");
        let _ = self.child.wait();
    }
}

/// The plain session: everything in JSON strings (utf8 or base64), as before raw frames.
fn connect(w: &World) -> Client {
    let options = ConnectOptions {
        raw_frames: false,
        ..ConnectOptions::default()
    };
    let client = Client::connect(&w.spec, &options).expect("connect over ssh");
    assert!(!client.raw_frames());
    client
}

fn connect_compressed(w: &World) -> Client {
    let options = ConnectOptions {
        compress: true,
        raw_frames: false,
        ..ConnectOptions::default()
    };
    let client = Client::connect(&w.spec, &options).expect("connect over ssh");
    assert!(client.compressed(), "the daemon did not take zstd");
    client
}

/// Raw frames (the default options): `fs.read` bytes after each answer's line; with
/// `compress`, zstd as well.
fn connect_raw(w: &World, compress: bool) -> Client {
    let options = ConnectOptions {
        compress,
        ..ConnectOptions::default()
    };
    let client = Client::connect(&w.spec, &options).expect("connect over ssh");
    assert!(client.raw_frames(), "the daemon did not grant raw frames");
    assert_eq!(client.compressed(), compress);
    client
}

/// Rounds of the in-turns timing.
const ROUNDS: usize = 9;

fn read_whole(client: &mut Client, file: &str) {
    let mut got = 0usize;
    client
        .read_file(file, 0, None, &mut |bytes| {
            got += bytes.len();
            Ok(())
        })
        .unwrap();
    assert_eq!(got, FILE_BYTES);
}

fn run_seq(client: &mut Client) {
    run_cmd(client, "seq 1 2000000", SEQ_BYTES);
}

/// Runs `cmd` (through `sh -c`, as the ssh side does) and counts its `bytes` of output.
fn run_cmd(client: &mut Client, cmd: &str, bytes: u64) {
    let mut got = 0u64;
    let exit = client
        .exec(
            Program::argv(["sh", "-c", cmd]),
            &ExecOptions::default(),
            None,
            &mut |_, out| {
                got += out.len() as u64;
                Ok(())
            },
        )
        .unwrap();
    assert_eq!((exit.exit_code, got), (Some(0), bytes), "{cmd}");
}

/// The output size of `cmd` run here (the daemon runs on this machine too).
fn output_bytes(cmd: &str) -> u64 {
    let out = Command::new("sh").args(["-c", cmd]).output().unwrap();
    out.stdout.len() as u64
}

/// Echo round trips: a line written to a running `cat`'s stdin and read back, [`ECHOES`]
/// times; the median round trip in ms. Through rex: `exec.input` and an output event.
fn echo_rtt_rex(client: &mut Client) -> f64 {
    use std::sync::mpsc;
    let (next_tx, next_rx) = mpsc::channel::<()>();
    /// Writes a line each time the output of the last one came back.
    struct Lines(mpsc::Receiver<()>, usize);
    impl Read for Lines {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.1 == ECHOES || self.0.recv().is_err() {
                return Ok(0);
            }
            self.1 += 1;
            buf[..5].copy_from_slice(b"ping\n");
            Ok(5)
        }
    }
    let mut times = Vec::with_capacity(ECHOES);
    let mut sent = Instant::now();
    next_tx.send(()).unwrap();
    let exit = client
        .exec(
            Program::argv(["cat"]),
            &ExecOptions::default(),
            Some(Box::new(Lines(next_rx, 0))),
            &mut |_, out| {
                assert_eq!(out, b"ping\n");
                times.push(sent.elapsed().as_secs_f64() * 1000.0);
                sent = Instant::now();
                let _ = next_tx.send(());
                Ok(())
            },
        )
        .unwrap();
    assert_eq!((exit.exit_code, times.len()), (Some(0), ECHOES));
    median(times)
}

/// [`echo_rtt_rex`] through a long-lived `ssh host cat`.
fn echo_rtt_ssh(sshd: &Sshd) -> f64 {
    let mut child = sshd
        .command(["cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut times = Vec::with_capacity(ECHOES);
    let mut line = String::new();
    for _ in 0..ECHOES {
        let t = Instant::now();
        stdin.write_all(b"ping\n").unwrap();
        stdin.flush().unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "ping\n");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    drop(stdin);
    let _ = child.wait();
    median(times)
}

/// Round trips per echo measurement.
const ECHOES: usize = 200;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// rex, rex with zstd, rex with raw frames, rex with both and plain ssh, one after the other,
/// [`ROUNDS`] times; prints the medians.
fn in_turns(w: &World, mut clients: [&mut Client; 4], shell: &mut SshShell) {
    let cat_text = format!("cat '{}'", w.text);
    let cat_random = format!("cat '{}'", w.random);
    let find_bytes = output_bytes(FIND_CMD);
    type Run<'a> = Box<dyn FnMut(&mut Client) + 'a>;
    let cases: Vec<(&str, Run<'_>, String, u64)> = vec![
        (
            "fs_read_10mib_text",
            Box::new(|c: &mut Client| read_whole(c, &w.text)),
            cat_text,
            FILE_BYTES as u64,
        ),
        (
            "fs_read_10mib_random",
            Box::new(|c: &mut Client| read_whole(c, &w.random)),
            cat_random,
            FILE_BYTES as u64,
        ),
        (
            "exec_seq_2m",
            Box::new(run_seq),
            "seq 1 2000000".into(),
            SEQ_BYTES,
        ),
        (
            "exec_find_usr",
            Box::new(move |c: &mut Client| run_cmd(c, FIND_CMD, find_bytes)),
            FIND_CMD.into(),
            find_bytes,
        ),
        (
            "exec_random_100mib",
            Box::new(|c: &mut Client| run_cmd(c, RANDOM_CMD, RANDOM_BYTES)),
            RANDOM_CMD.into(),
            RANDOM_BYTES,
        ),
    ];
    println!(
        "in turns, {ROUNDS} rounds, median ms (ratio: ssh time / rex time, above 1 is faster than ssh):"
    );
    for (name, mut run, cmd, bytes) in cases {
        let mut rex: [Vec<f64>; 4] = Default::default();
        let (mut ssh, mut ssh_hop) = (Vec::new(), Vec::new());
        let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;
        for _ in 0..ROUNDS {
            for (client, times) in clients.iter_mut().zip(rex.iter_mut()) {
                let t = Instant::now();
                run(client);
                times.push(ms(t));
            }
            let t = Instant::now();
            shell.run(&cmd, bytes);
            ssh.push(ms(t));
            // What one more process on the way costs ssh: rex's path is ssh's plus rexd.
            let t = Instant::now();
            shell.run(&format!("{cmd} | cat"), bytes);
            ssh_hop.push(ms(t));
        }
        let ssh = median(ssh);
        let ssh_hop = median(ssh_hop);
        let shown: Vec<String> = ["rex", "rex zstd", "rex raw", "rex zstd+raw"]
            .iter()
            .zip(rex)
            .map(|(label, times)| {
                let m = median(times);
                format!("{label} {m:.1} ({:.2}x)", ssh / m)
            })
            .collect();
        println!(
            "  {name}: {}, ssh {ssh:.1}, ssh with `| cat` {ssh_hop:.1} ({:.2}x)",
            shown.join(", "),
            ssh / ssh_hop
        );
    }
    // The latency of one line: a round trip through a running `cat`, each client in turn.
    let mut rex: [Vec<f64>; 4] = Default::default();
    let mut ssh = Vec::new();
    for _ in 0..3 {
        for (client, times) in clients.iter_mut().zip(rex.iter_mut()) {
            times.push(echo_rtt_rex(client));
        }
        ssh.push(echo_rtt_ssh(&w.sshd));
    }
    let ssh = median(ssh);
    let shown: Vec<String> = ["rex", "rex zstd", "rex raw", "rex zstd+raw"]
        .iter()
        .zip(rex)
        .map(|(label, times)| format!("{label} {:.3}", median(times)))
        .collect();
    println!(
        "  echo_one_line (median round trip of {ECHOES}, 3 runs, ms): {}, ssh {ssh:.3}",
        shown.join(", ")
    );
}

fn bench(c: &mut Criterion) {
    let Some(w) = world() else { return };

    let mut g = c.benchmark_group("connect_exec_true");
    g.sample_size(10);
    let mut rex_args: Vec<String> = vec!["-t".into(), w.sshd.url()];
    rex_args.extend(w.spec.ssh_options.iter().map(|o| format!("--ssh-arg={o}")));
    rex_args.extend(["exec", "--", "true"].map(String::from));
    g.bench_function("rex_cli_over_ssh", |b| {
        b.iter(|| {
            let status = Command::new(REX)
                .args(&rex_args)
                .env("REX_TARGETS_FILE", "/nonexistent/targets.toml")
                .status()
                .unwrap();
            assert!(status.success());
        })
    });
    g.bench_function("plain_ssh", |b| {
        b.iter(|| assert!(w.sshd.command(["true"]).status().unwrap().success()))
    });
    g.finish();

    let mut g = c.benchmark_group("exec_true");
    let mut client = connect(&w);
    g.bench_function("rex_over_ssh", |b| {
        b.iter(|| {
            let exit = client
                .exec(
                    Program::argv(["true"]),
                    &ExecOptions::default(),
                    None,
                    &mut |_, _| Ok(()),
                )
                .unwrap();
            assert_eq!(exit.exit_code, Some(0));
        })
    });
    let mut shell = SshShell::open(&w.sshd);
    g.bench_function("plain_ssh_channel", |b| {
        b.iter(|| shell.run("/bin/true", 0))
    });
    g.finish();

    let mut g = c.benchmark_group("stream_200mb");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Bytes(STREAM_BYTES));
    g.bench_function("rex_over_ssh", |b| {
        b.iter(|| {
            let mut got = 0u64;
            let exit = client
                .exec(
                    Program::shell(STREAM_CMD),
                    &ExecOptions::default(),
                    None,
                    &mut |_, bytes| {
                        got += bytes.len() as u64;
                        Ok(())
                    },
                )
                .unwrap();
            assert_eq!((exit.exit_code, got), (Some(0), STREAM_BYTES));
        })
    });
    g.bench_function("plain_ssh_channel", |b| {
        b.iter(|| shell.run(STREAM_CMD, STREAM_BYTES))
    });
    g.finish();

    let mut zclient = connect_compressed(&w);
    let mut rclient = connect_raw(&w, false);
    let mut zrclient = connect_raw(&w, true);
    for (group, file) in [
        ("fs_read_10mib_text", &w.text),
        ("fs_read_10mib_random", &w.random),
    ] {
        let mut g = c.benchmark_group(group);
        g.sample_size(10);
        g.throughput(Throughput::Bytes(FILE_BYTES as u64));
        g.bench_function("rex_over_ssh", |b| b.iter(|| read_whole(&mut client, file)));
        g.bench_function("rex_over_ssh_zstd", |b| {
            b.iter(|| read_whole(&mut zclient, file))
        });
        g.bench_function("rex_over_ssh_raw", |b| {
            b.iter(|| read_whole(&mut rclient, file))
        });
        g.bench_function("rex_over_ssh_zstd_raw", |b| {
            b.iter(|| read_whole(&mut zrclient, file))
        });
        let cat = format!("cat '{file}'");
        g.bench_function("plain_ssh_channel_cat", |b| {
            b.iter(|| shell.run(&cat, FILE_BYTES as u64))
        });
        g.finish();
    }

    let mut g = c.benchmark_group("exec_seq_2m");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(SEQ_BYTES));
    g.bench_function("rex_over_ssh", |b| b.iter(|| run_seq(&mut client)));
    g.bench_function("rex_over_ssh_zstd", |b| b.iter(|| run_seq(&mut zclient)));
    g.bench_function("rex_over_ssh_raw", |b| b.iter(|| run_seq(&mut rclient)));
    g.bench_function("plain_ssh_channel_seq", |b| {
        b.iter(|| shell.run("seq 1 2000000", SEQ_BYTES))
    });
    g.finish();

    in_turns(
        &w,
        [&mut client, &mut zclient, &mut rclient, &mut zrclient],
        &mut shell,
    );

    drop(shell);
    client.close().unwrap();
    zclient.close().unwrap();
    rclient.close().unwrap();
    zrclient.close().unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
