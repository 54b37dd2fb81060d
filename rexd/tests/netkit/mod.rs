//! What the `rexd --listen` tests share: a daemon on a loopback port, certificates made for the
//! run with `openssl`, `curl`, and a Python venv with the official client libraries.

#![allow(dead_code)] // each test file uses a different part

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use deskwire_integration::TempDir;

pub const REXD: &str = env!("CARGO_BIN_EXE_rexd");
pub const REX: &str = env!("CARGO_BIN_EXE_rex");
pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";
pub const OTHER_TOKEN: &str = "fedcba9876543210fedcba9876543210";

/// The Python packages the client tests use, pinned.
const PY_PACKAGES: &[&str] = &[
    "websockets==17.4",
    "prometheus-client==0.26.0",
    "mcp==2.3.0",
];

/// A directory for one test: a root to work in, a token file, the audit log.
pub struct Place {
    pub tmp: TempDir,
    pub work: PathBuf,
    pub tokens: PathBuf,
    pub audit: PathBuf,
    pub config: PathBuf,
}

impl Place {
    pub fn new(prefix: &str) -> Place {
        Place::with_config(prefix, "")
    }

    /// `extra` is appended to the rexd config (TOML).
    pub fn with_config(prefix: &str, extra: &str) -> Place {
        use std::os::unix::fs::PermissionsExt;
        let tmp = TempDir::new(prefix).unwrap();
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let work = work.canonicalize().unwrap();
        let tokens = tmp.path().join("tokens");
        std::fs::write(
            &tokens,
            format!("# test clients\nalice:{TOKEN}\nbob:{OTHER_TOKEN}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
        let audit = tmp.path().join("audit.log");
        let config = tmp.path().join("rexd.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nlog_level = \"info\"\n\
                 [limits]\nmax_concurrent_sessions = 256\nmax_processes_per_session = 8\n\
                 max_output_bytes = 268435456\n\
                 [security]\nallow_shell = true\n\
                 [[security.allowed_roots]]\npath = \"{}\"\n\
                 [audit]\nenabled = true\npath = \"{}\"\n{extra}",
                work.display(),
                audit.display()
            ),
        )
        .unwrap();
        Place {
            tmp,
            work,
            tokens,
            audit,
            config,
        }
    }

    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    pub fn audit_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A running `rexd --listen 127.0.0.1:0`.
pub struct Daemon {
    pub child: Child,
    /// `http://127.0.0.1:PORT` or `https://…`.
    pub url: String,
    pub port: u16,
    stderr: Arc<Mutex<String>>,
    /// With `--metrics-listen`: where `/metrics` is served besides `url`.
    pub metrics_url: Option<String>,
}

impl Daemon {
    /// Starts rexd with `--config`, `--listen 127.0.0.1:0` and `args`; waits for its address.
    pub fn start(place: &Place, args: &[&str]) -> Daemon {
        Daemon::start_at(place, "127.0.0.1:0", args)
    }

    /// [`Daemon::start`] on another `--listen` address.
    pub fn start_at(place: &Place, listen: &str, args: &[&str]) -> Daemon {
        let mut child = Command::new(REXD)
            .arg("--config")
            .arg(&place.config)
            .args(["--listen", listen])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let err = child.stderr.take().unwrap();
        let keep = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { return };
                eprintln!("[rexd] {line}");
                keep.lock().unwrap().push_str(&line);
                keep.lock().unwrap().push('\n');
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("rexd: listening on ")
            .unwrap_or_else(|| {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "rexd did not start: {line:?} {}",
                    stderr.lock().unwrap().clone()
                )
            })
            .to_owned();
        let port = url.rsplit(':').next().unwrap().parse().unwrap();
        let metrics_url = if args.contains(&"--metrics-listen") {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            line.trim()
                .strip_prefix("rexd: metrics on ")
                .map(str::to_owned)
        } else {
            None
        };
        Daemon {
            child,
            url,
            port,
            stderr,
            metrics_url,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until rexd's stderr holds `text` (or fails after 15 s).
    pub fn wait_for_log(&self, text: &str) {
        self.wait_for_log_lines(text, 1);
    }

    /// Waits until `count` lines of rexd's stderr hold `text` (or fails after 15 s). rexd writes
    /// a refusal's log line after the answer has gone, so a client can see its answer first.
    pub fn wait_for_log_lines(&self, text: &str, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.stderr().lines().filter(|l| l.contains(text)).count() < count {
            assert!(
                Instant::now() < deadline,
                "rexd never logged {text:?} {count} times:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Resident memory of the daemon, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    }

    /// SIGTERM, then the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.terminate()
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return self.child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.terminate();
        }
    }
}

/// Runs rexd with these args and expects it to refuse to start: its exit code and stderr.
pub fn refused(args: &[&str]) -> (i32, String) {
    let out = Command::new(REXD)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A CA, a server certificate for 127.0.0.1 and client certificates, made with openssl.
pub struct Certs {
    pub dir: PathBuf,
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// Signed by `ca`, subject `CN=alice,O=ops`.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// Signed by another CA, subject `CN=mallory`.
    pub rogue_cert: PathBuf,
    pub rogue_key: PathBuf,
    /// Signed by `ca`, one `O` attribute whose value is `ops, CN=alice`.
    pub forger_cert: PathBuf,
    pub forger_key: PathBuf,
    /// Signed by `ca`, an empty subject.
    pub nameless_cert: PathBuf,
    pub nameless_key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (tests/run.sh installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Certs {
    pub fn make(dir: &Path) -> Certs {
        let dir = dir.join("pki");
        std::fs::create_dir_all(&dir).unwrap();
        let ca = |name: &str, cn: &str| {
            openssl(
                &dir,
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:P-256",
                    "-nodes",
                    "-days",
                    "2",
                    "-subj",
                    &format!("/CN={cn}"),
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.pem"),
                ],
            )
        };
        ca("ca", "rexd test CA");
        ca("rogue-ca", "rogue CA");
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
        let leaf = |name: &str, subj: &str, ca: &str, ext: &str| {
            openssl(
                &dir,
                &[
                    "req",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:P-256",
                    "-nodes",
                    "-subj",
                    subj,
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.csr"),
                ],
            );
            openssl(
                &dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &format!("{name}.csr"),
                    "-CA",
                    &format!("{ca}.pem"),
                    "-CAkey",
                    &format!("{ca}.key"),
                    "-CAcreateserial",
                    "-days",
                    "2",
                    "-extfile",
                    ext,
                    "-out",
                    &format!("{name}.pem"),
                ],
            );
        };
        leaf("server", "/CN=localhost", "ca", "server.ext");
        leaf("client", "/O=ops/CN=alice", "ca", "client.ext");
        leaf("rogue", "/CN=mallory", "rogue-ca", "client.ext");
        // openssl's -subj splits on `/` only: the comma is part of the one O value.
        leaf("forger", "/O=ops, CN=alice", "ca", "client.ext");
        leaf("nameless", "/", "ca", "client.ext");
        Certs {
            ca: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
            rogue_cert: dir.join("rogue.pem"),
            rogue_key: dir.join("rogue.key"),
            forger_cert: dir.join("forger.pem"),
            forger_key: dir.join("forger.key"),
            nameless_cert: dir.join("nameless.pem"),
            nameless_key: dir.join("nameless.key"),
            dir,
        }
    }
}

/// What curl got: the status (0 when there was no HTTP answer), the body, curl's exit code.
#[derive(Debug)]
pub struct Curl {
    pub status: u16,
    pub body: String,
    pub exit: i32,
    pub stderr: String,
}

impl Curl {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// `curl -s -o - -w '\n%{http_code}' ARGS…`.
pub fn curl(args: &[&str]) -> Curl {
    let out: Output = Command::new("curl")
        .args(["-sS", "--max-time", "20", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl (tests/run.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    Curl {
        status: code.trim().parse().unwrap_or(0),
        body: body.to_owned(),
        exit: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `POST url/rpc` with the token and a JSON body.
pub fn post(url: &str, token: Option<&str>, body: &str) -> Curl {
    let auth = token.map(|t| format!("Authorization: Bearer {t}"));
    let mut args = vec![
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        body,
    ];
    if let Some(a) = &auth {
        args.extend(["-H", a.as_str()]);
    }
    let target = format!("{url}/rpc");
    args.push(&target);
    curl(&args)
}

/// The venv's python with the pinned client packages, made on first use under the target
/// directory (tests/run.sh runs this suite, so its pip installs are the suite's own).
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let target = Path::new(REXD).parent().unwrap().parent().unwrap();
        let venv = target.join("rexd-py-venv");
        let python = venv.join("bin/python");
        let want = PY_PACKAGES.join(" ");
        let stamp = venv.join("rexd-packages.txt");
        if std::fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
            return python;
        }
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap()
            .success();
        assert!(ok, "python3 -m venv {}", venv.display());
        let ok = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(PY_PACKAGES)
            .status()
            .unwrap()
            .success();
        assert!(ok, "pip install {want}");
        std::fs::write(&stamp, &want).unwrap();
        python
    })
}

/// Runs `rexd/tests/py/SCRIPT` with the venv's python; panics with its output unless it exits 0.
/// Returns its stdout.
pub fn run_python(script: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(script);
    let mut child = Command::new(python())
        .arg(&path)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = String::new();
    let mut stderr = String::new();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let _ = so.read_to_string(&mut stdout);
    let status = child.wait().unwrap();
    stderr.push_str(&t.join().unwrap());
    assert!(
        status.success(),
        "{script} {args:?} failed ({status}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    stdout
}

/// A Python script the test talks to: it prints JSON lines and waits for a line on stdin
/// where the scenario needs the test to look at the daemon first.
pub struct PyScript {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    stdin: Option<std::process::ChildStdin>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl PyScript {
    pub fn spawn(script: &str, args: &[&str], env: &[(&str, &str)]) -> PyScript {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/py")
            .join(script);
        let mut child = Command::new(python())
            .arg(&path)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut se = child.stderr.take().unwrap();
        let stderr = Some(std::thread::spawn(move || {
            let mut s = String::new();
            let _ = se.read_to_string(&mut s);
            s
        }));
        PyScript {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
        }
    }

    /// The next JSON line it prints (panics with its stderr when it ends instead).
    pub fn next(&mut self) -> serde_json::Value {
        match self.lines.next() {
            Some(Ok(line)) => {
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
            }
            _ => {
                let status = self.child.wait().unwrap();
                let err = self
                    .stderr
                    .take()
                    .map(|t| t.join().unwrap())
                    .unwrap_or_default();
                panic!("the script ended ({status}) without a line:\n{err}")
            }
        }
    }

    /// Lets it go on past its `readline()`.
    pub fn go_on(&mut self) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for it to exit 0.
    pub fn finish(mut self) {
        self.stdin = None;
        let status = self.child.wait().unwrap();
        let err = self
            .stderr
            .take()
            .map(|t| t.join().unwrap())
            .unwrap_or_default();
        assert!(status.success(), "the script failed ({status}):\n{err}");
    }
}

/// Runs `rex ARGS` (no targets file, no token from the environment but `env`'s) to its end: the
/// exit code, stdout and stderr.
pub fn rex<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(REX)
        .args(args)
        .env("REX_TARGETS_FILE", "/nonexistent/rex-targets.toml")
        .env_remove("REXD_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The pids of `parent`'s children named `name`.
pub fn children(parent: u32, name: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some((comm, rest)) = stat.split_once(") ") else {
            continue;
        };
        let ppid: u32 = rest
            .split(' ')
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        if ppid == parent && comm.ends_with(&format!("({name}")) {
            out.push(pid);
        }
    }
    out
}
