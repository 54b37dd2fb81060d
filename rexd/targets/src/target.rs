//! Where a daemon runs and how to reach it: `local` (a child `rexd --stdio`),
//! `ssh://user@host[:port]` (`ssh … rexd --stdio`), or a `rexd --listen` daemon at
//! `https://host:port` / `wss://host:port` (its `/ws` endpoint; `http://` and `ws://` for
//! loopback only: they would carry the bearer token in clear).

#[cfg(unix)]
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::TargetError;

/// The transport half of a target: which machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// This machine: spawn `rexd --stdio`.
    Local,
    /// Another machine over OpenSSH: `ssh [-p port] [user@]host rexd --stdio`.
    Ssh {
        /// The login user; ssh's default (config or the local user name) when absent.
        user: Option<String>,
        /// Host name or address (IPv6 without brackets).
        host: String,
        /// The port; ssh's default when absent.
        port: Option<u16>,
    },
    /// A `rexd --listen` daemon's WebSocket endpoint.
    Ws {
        /// `wss://host:port/ws` or `ws://host:port/ws`.
        url: String,
        /// As given (`https://host:port`), for messages.
        given: String,
        /// The host name or address (what the server's certificate must name).
        host: String,
        /// The port.
        port: u16,
        /// TLS (`https`, `wss`).
        tls: bool,
    },
}

/// What `ssh` is given unless the target's `ssh_options` say otherwise: 15 s for the TCP
/// connection and the SSH banner.
pub const SSH_CONNECT_TIMEOUT: &str = "ConnectTimeout=15";

impl Endpoint {
    /// Parses `local` or `ssh://[user@]host[:port]` (IPv6 as `[::1]`).
    ///
    /// Hand-parsed on purpose: the grammar is this small, and a general URL parser would
    /// accept paths, queries and percent-escapes that mean nothing to ssh.
    pub fn parse(text: &str) -> Result<Endpoint, TargetError> {
        let bad = |reason: &str| TargetError::BadTarget {
            target: without_credentials(text),
            reason: reason.to_owned(),
        };
        if text == "local" {
            return Ok(Endpoint::Local);
        }
        for (scheme, tls) in [
            ("https://", true),
            ("wss://", true),
            ("http://", false),
            ("ws://", false),
        ] {
            if let Some(rest) = text.strip_prefix(scheme) {
                return Endpoint::parse_ws(text, rest, tls);
            }
        }
        let rest = text.strip_prefix("ssh://").ok_or_else(|| {
            bad("expected `local`, `ssh://[user@]host[:port]` or `https://host:port`")
        })?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((user, hp)) => (Some(user), hp),
            None => (None, rest),
        };
        if let Some(user) = user
            && (user.is_empty() || !user.chars().all(is_name_char))
        {
            return Err(bad("the user name may hold only letters, digits, `._-`"));
        }
        let (host, port) = if let Some(bracketed) = hostport.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| bad("`[` without `]`"))?;
            match after {
                "" => (host, None),
                p => (
                    host,
                    Some(p.strip_prefix(':').ok_or_else(|| bad("junk after `]`"))?),
                ),
            }
        } else {
            match hostport.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        let host_ok = !host.is_empty()
            && !host.starts_with('-')
            && host.chars().all(|c| is_name_char(c) || c == ':');
        if !host_ok {
            return Err(bad("the host must be a name or an address"));
        }
        let port = match port {
            None => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or_else(|| bad("the port must be 1..=65535"))?,
            ),
        };
        Ok(Endpoint::Ssh {
            user: user.map(str::to_owned),
            host: host.to_owned(),
            port,
        })
    }
}

impl Endpoint {
    /// `host:port[/ws]` after the scheme.
    fn parse_ws(text: &str, rest: &str, tls: bool) -> Result<Endpoint, TargetError> {
        let bad = |reason: &str| TargetError::BadTarget {
            target: without_credentials(text),
            reason: reason.to_owned(),
        };
        let hostport = rest
            .strip_suffix("/ws")
            .or_else(|| rest.strip_suffix('/'))
            .unwrap_or(rest);
        if hostport.contains('/') || hostport.contains('@') || hostport.contains('?') {
            return Err(bad(
                "give only host and port (`https://host:7070`); rex uses /ws",
            ));
        }
        let (host, port) = match hostport.strip_prefix('[') {
            Some(b) => {
                let (h, after) = b.split_once(']').ok_or_else(|| bad("`[` without `]`"))?;
                (h, after.strip_prefix(':'))
            }
            None => match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            },
        };
        if host.is_empty() || !host.chars().all(|c| is_name_char(c) || c == ':') {
            return Err(bad("the host must be a name or an address"));
        }
        if !tls && !is_loopback(host) {
            return Err(bad(
                "http:// and ws:// are for loopback only (127.0.0.1, ::1, localhost): the \
                 token would cross the network in clear; use https:// (wss://)",
            ));
        }
        let port = port
            .ok_or_else(|| bad("give the port (`https://host:7070`)"))?
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| bad("the port must be 1..=65535"))?;
        let shown = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        Ok(Endpoint::Ws {
            url: format!("{}://{shown}:{port}/ws", if tls { "wss" } else { "ws" }),
            given: text.to_owned(),
            host: host.to_owned(),
            port,
            tls,
        })
    }
}

/// `text` as a message may show it: a URL's credentials (`label:token@`, any user info of a
/// network target, an ssh user's `:password`) and its query and fragment (`?token=...`)
/// replaced, so a token put in a target by mistake reaches no terminal or log.
pub fn without_credentials(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_owned();
    };
    let (rest, tail) = match rest.find(['?', '#']) {
        Some(at) => (
            &rest[..at],
            if rest[at..].starts_with('?') {
                "?<query>"
            } else {
                "#<fragment>"
            },
        ),
        None => (rest, ""),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) if scheme == "ssh" && !user.contains(':') => format!("{user}@{host}"),
        Some((_, host)) => format!("<credentials>@{host}"),
        None => authority.to_owned(),
    };
    format!("{scheme}://{authority}{path}{tail}")
}

/// Whether `host` names this machine: a loopback address, or `localhost`. Only such a host
/// may be reached in plain text (`http://`, `ws://`), and a client need not compress for it.
pub fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Local => f.write_str("local"),
            Endpoint::Ws { given, .. } => f.write_str(given),
            Endpoint::Ssh { user, host, port } => {
                f.write_str("ssh://")?;
                if let Some(u) = user {
                    write!(f, "{u}@")?;
                }
                if host.contains(':') {
                    write!(f, "[{host}]")?;
                } else {
                    f.write_str(host)?;
                }
                if let Some(p) = port {
                    write!(f, ":{p}")?;
                }
                Ok(())
            }
        }
    }
}

/// A target as the targets file and the command line describe it: the endpoint plus how to
/// reach and start the daemon there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// `local` or `ssh://[user@]host[:port]`.
    pub url: String,
    /// `ssh -i FILE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_file: Option<PathBuf>,
    /// Extra ssh arguments, as given (`["-o", "ConnectTimeout=5"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_options: Vec<String>,
    /// The daemon program: a path, or a name looked up on the (remote) PATH. Default: `rexd`
    /// (for `local`, the `rexd` next to the running `rex` first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rexd: Option<String>,
    /// Extra daemon arguments after `--stdio` (`["--config", "/etc/rexd/config.toml"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rexd_args: Vec<String>,
    /// The workspace roots to ask for in `session.open` (the daemon may narrow them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workspace_roots: Vec<String>,
    /// The working directory for commands when the call gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `https://` targets: a file holding the bearer token (its first line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// `https://` targets: the environment variable holding the bearer token when there is no
    /// `token_file` (default `REXD_TOKEN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// `https://` targets: trust this CA (PEM) for the daemon's certificate instead of the
    /// system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// `https://` targets: the client certificate (PEM) for a daemon that asks for one (mTLS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<PathBuf>,
    /// `https://` targets: the client certificate's key (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key: Option<PathBuf>,
    /// Resume by itself when the link drops while a command runs (over ssh the remote rexd
    /// runs as `rexd --stdio --resumable`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resume: bool,
    /// `rex`: offer zstd compression (`rex --compress`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compress: bool,
    /// `rex`: do not offer raw frames (`rex --no-raw-frames`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_raw_frames: bool,
}

impl TargetSpec {
    /// A target with only a URL.
    pub fn new(url: impl Into<String>) -> TargetSpec {
        TargetSpec {
            url: url.into(),
            ..TargetSpec::default()
        }
    }

    /// The parsed endpoint.
    pub fn endpoint(&self) -> Result<Endpoint, TargetError> {
        Endpoint::parse(&self.url)
    }

    /// The command that starts the daemon with its stdio as the connection.
    pub fn command(&self) -> Result<Command, TargetError> {
        match self.endpoint()? {
            Endpoint::Ws { given, .. } => Err(TargetError::BadTarget {
                target: given,
                reason: "a network target has no daemon to start".into(),
            }),
            Endpoint::Local => {
                let program = match &self.rexd {
                    Some(p) => PathBuf::from(p),
                    None => local_rexd(),
                };
                let mut cmd = Command::new(program);
                cmd.arg("--stdio").args(&self.rexd_args);
                // Its own process group: a Ctrl-C at the terminal stops rex, and rexd, seeing
                // its stdin close, kills the commands it runs (their groups are not the
                // terminal's). Killed by the same SIGINT, it would leave them running. (ssh
                // stays in ours: it may need the terminal for a passphrase prompt, and the
                // remote rexd sees the channel close either way.)
                #[cfg(unix)]
                cmd.process_group(0);
                Ok(cmd)
            }
            Endpoint::Ssh { user, host, port } => {
                let mut cmd = Command::new("ssh");
                // -T: no pty (the stream is bytes, not a terminal); -e none: no escape
                // character, so no byte of the stream is ever taken as an ssh command.
                cmd.args(["-T", "-e", "none"]);
                if let Some(p) = port {
                    cmd.arg("-p").arg(p.to_string());
                }
                if let Some(i) = &self.identity_file {
                    cmd.arg("-i").arg(i);
                }
                cmd.args(&self.ssh_options);
                // A host that accepts and never answers is given up, as rex's network targets
                // are. After the target's own options: ssh takes the first value it is given.
                cmd.args(["-o", SSH_CONNECT_TIMEOUT]);
                cmd.arg(match user {
                    Some(u) => format!("{u}@{host}"),
                    None => host,
                });
                cmd.arg(self.remote_command());
                Ok(cmd)
            }
        }
    }

    /// The remote shell command ssh runs: `rexd --stdio [args…]`, each word quoted.
    pub fn remote_command(&self) -> String {
        let program = self.rexd.as_deref().unwrap_or("rexd");
        let words = std::iter::once(program)
            .chain(std::iter::once("--stdio"))
            .chain(self.rexd_args.iter().map(String::as_str));
        // try_join fails only on NUL bytes, which no shell word can carry anyway.
        shlex::try_join(words).unwrap_or_else(|_| format!("{program} --stdio"))
    }
}

/// Where a missing `rexd` comes from, for the errors that report it (rex's and the Python
/// client's say the same).
pub const REXD_INSTALL_HINT: &str = concat!(
    "it ships with rex in deskwire's release as rexd-",
    env!("CARGO_PKG_VERSION"),
    "-TARGET.tar.gz (a static binary) and a .deb; from the source, `cargo install --path rexd` \
     installs it"
);

/// The `rexd` for the `local` target: next to the running executable when there is one there
/// (an installed or built pair), else `rexd` from PATH.
pub fn local_rexd() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("rexd")))
        .filter(|p| is_executable(p))
        .unwrap_or_else(|| PathBuf::from("rexd"))
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Windows has no execute bit: a file is what there is to run.
#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssh(user: Option<&str>, host: &str, port: Option<u16>) -> Endpoint {
        Endpoint::Ssh {
            user: user.map(str::to_owned),
            host: host.to_owned(),
            port,
        }
    }

    #[test]
    fn a_token_in_a_refused_target_is_not_in_the_message() {
        let token = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        for text in [
            format!("https://limited:{token}@127.0.0.1:7070"),
            format!("https://{token}@127.0.0.1:7070/ws"),
            format!("https://127.0.0.1:7070/?token={token}"),
            format!("wss://127.0.0.1:7070/ws#{token}"),
            format!("ssh://deploy:{token}@server-a"),
        ] {
            let message = Endpoint::parse(&text).unwrap_err().to_string();
            assert!(!message.contains(token), "{message}");
            assert!(
                message.contains("127.0.0.1") || message.contains("server-a"),
                "{message}"
            );
        }
        assert_eq!(
            without_credentials("https://limited:t@127.0.0.1:7070/x?token=t"),
            "https://<credentials>@127.0.0.1:7070/x?<query>"
        );
        // An ssh user is no secret, and is shown.
        assert_eq!(without_credentials("ssh://deploy@a!b"), "ssh://deploy@a!b");
    }

    #[test]
    fn endpoints_parse_and_print_back() {
        for (text, want) in [
            ("local", Endpoint::Local),
            ("ssh://server-a", ssh(None, "server-a", None)),
            (
                "ssh://deploy@server-a",
                ssh(Some("deploy"), "server-a", None),
            ),
            (
                "ssh://root@127.0.0.1:2222",
                ssh(Some("root"), "127.0.0.1", Some(2222)),
            ),
            ("ssh://u@[::1]:22", ssh(Some("u"), "::1", Some(22))),
            ("ssh://[fe80::1]", ssh(None, "fe80::1", None)),
        ] {
            let got = Endpoint::parse(text).unwrap();
            assert_eq!(got, want, "{text}");
            assert_eq!(got.to_string(), text);
        }
    }

    #[test]
    fn network_endpoints() {
        let e = Endpoint::parse("https://rexd.example:7070").unwrap();
        assert_eq!(
            e,
            Endpoint::Ws {
                url: "wss://rexd.example:7070/ws".into(),
                given: "https://rexd.example:7070".into(),
                host: "rexd.example".into(),
                port: 7070,
                tls: true
            }
        );
        assert_eq!(e.to_string(), "https://rexd.example:7070");
        for (text, url) in [
            ("wss://h:1/ws", "wss://h:1/ws"),
            ("ws://127.0.0.1:9/", "ws://127.0.0.1:9/ws"),
            ("http://[::1]:80", "ws://[::1]:80/ws"),
            ("http://localhost:7070", "ws://localhost:7070/ws"),
            ("http://127.0.0.2:7070", "ws://127.0.0.2:7070/ws"),
            ("https://10.1.2.3:7070", "wss://10.1.2.3:7070/ws"),
        ] {
            let Endpoint::Ws { url: got, .. } = Endpoint::parse(text).unwrap() else {
                panic!("{text}")
            };
            assert_eq!(got, url);
        }
        for text in [
            "https://h",
            "https://h:0",
            "https://h:1/rpc",
            "https://u@h:1",
            "https://:1",
            "wss://h:1?x",
        ] {
            assert!(Endpoint::parse(text).is_err(), "{text}");
        }
        // Plain text beyond this machine would carry the token in clear.
        for text in [
            "http://10.1.2.3:7070",
            "ws://rexd.example:7070",
            "http://[2001:db8::1]:80",
            "http://localhost.example.com:1",
        ] {
            let e = Endpoint::parse(text).unwrap_err().to_string();
            assert!(
                e.contains("loopback only") && e.contains("https://"),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn bad_endpoints_are_refused_with_a_reason() {
        for text in [
            "",
            "remote",
            "http://x",
            "ftp://x:1",
            "ssh://",
            "ssh://@host",
            "ssh://-oProxyCommand=x",
            "ssh://u@h:0",
            "ssh://u@h:70000",
            "ssh://u@h:port",
            "ssh://[::1",
            "ssh://[::1]x",
            "ssh://a b",
            "ssh://u;rm@h",
        ] {
            let e = Endpoint::parse(text).unwrap_err();
            assert!(matches!(e, TargetError::BadTarget { .. }), "{text}: {e}");
        }
    }

    #[test]
    fn ssh_command_line() {
        let spec = TargetSpec {
            url: "ssh://deploy@server-a:2222".into(),
            identity_file: Some("/k/id".into()),
            ssh_options: vec!["-o".into(), "BatchMode=yes".into()],
            rexd: Some("/opt/rex tools/rexd".into()),
            rexd_args: vec!["--config".into(), "/etc/rexd/c.toml".into()],
            ..TargetSpec::default()
        };
        let cmd = spec.command().unwrap();
        assert_eq!(cmd.get_program(), "ssh");
        let args: Vec<_> = cmd.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "-T",
                "-e",
                "none",
                "-p",
                "2222",
                "-i",
                "/k/id",
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=15",
                "deploy@server-a",
                "'/opt/rex tools/rexd' --stdio --config /etc/rexd/c.toml"
            ]
        );
    }

    #[test]
    fn local_command_line() {
        let spec = TargetSpec {
            rexd: Some("/bin/rexd".into()),
            rexd_args: vec!["--config".into(), "c.toml".into()],
            ..TargetSpec::new("local")
        };
        let cmd = spec.command().unwrap();
        assert_eq!(cmd.get_program(), "/bin/rexd");
        let args: Vec<_> = cmd.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(args, ["--stdio", "--config", "c.toml"]);
    }
}
