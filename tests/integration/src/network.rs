//! A linked IRC network on loopback: two or three ngircd servers in a chain, and an operator
//! who splits and heals a link.
//!
//! Server `i` is `irc{i+1}.deskwire.test`; it connects out to server `i + 1` (the far side waits),
//! retrying every second, so a link that breaks by itself comes back within a few seconds.
//! [`NgircdNetwork::split`] breaks a link and keeps it broken (ngircd's `DISCONNECT`) until
//! [`NgircdNetwork::heal`] (`CONNECT`). Each server keeps ngircd's default flood protection.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::{Ngircd, TempDir, free_port, ngircd_binary, stop_daemon};

const OPER_NAME: &str = "deskop";
const OPER_PASSWORD: &str = "deskop-pass";

/// One server of the network.
#[derive(Debug)]
struct Server {
    child: Child,
    port: u16,
    conf: PathBuf,
}

/// Two or three ngircd linked in a chain on loopback, stopped on drop.
#[derive(Debug)]
pub struct NgircdNetwork {
    servers: Vec<Server>,
    _dir: TempDir,
}

impl NgircdNetwork {
    /// Starts `count` (2 or 3) linked servers and waits until every link is up.
    pub fn start(count: usize) -> Self {
        Self::start_with_limits(count, "")
    }

    /// [`NgircdNetwork::start`] with extra `[Limits]` lines for every server, e.g.
    /// `MaxPenaltyTime = 0\n`.
    pub fn start_with_limits(count: usize, extra_limits: &str) -> Self {
        assert!((2..=3).contains(&count), "a chain of 2 or 3 servers");
        let binary = ngircd_binary()
            .expect("ngircd is not installed: run tests/run.sh, which installs it with apt");
        let dir = TempDir::new("deskwire-ngircd-net").expect("temp dir");
        let ports: Vec<u16> = (0..count).map(|_| free_port()).collect();
        let mut servers = Vec::new();
        // Last first: each link's passive end is listening before its active end starts, so
        // the first try links (after a failed one ngircd waits out its ConnectRetry, and under
        // load the network was not whole within the 20 s wait below).
        for (i, &port) in ports.iter().enumerate().rev() {
            let mut links = String::new();
            // The link to the previous server waits for it; the next one we connect to.
            if i > 0 {
                links += &link_section(i - 1, ports[i - 1], i, true);
            }
            if i + 1 < count {
                links += &link_section(i + 1, ports[i + 1], i, false);
            }
            let conf = dir.path().join(format!("irc{}.conf", i + 1));
            std::fs::write(
                &conf,
                format!(
                    "[Global]\nName = {}\nInfo = deskwire test network\n\
                     AdminInfo1 = deskwire\nAdminInfo2 = tests\n\
                     AdminEMail = tests@deskwire.invalid\nListen = 127.0.0.1\nPorts = {port}\n\
                     [Limits]\nMaxConnectionsIP = 0\nPingTimeout = 120\nPongTimeout = 60\n\
                     ConnectRetry = 1\n{extra_limits}\
                     [Options]\nPAM = no\nIdent = no\nDNS = no\n\
                     [Operator]\nName = {OPER_NAME}\nPassword = {OPER_PASSWORD}\n{links}",
                    server_name(i)
                ),
            )
            .expect("write ngircd.conf");
            let child = Ngircd::spawn(&binary, &conf, port);
            servers.push(Server { child, port, conf });
        }
        servers.reverse();
        let network = NgircdNetwork { servers, _dir: dir };
        network.wait_linked();
        network
    }

    /// How many servers.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Never: a network has two servers at least.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// `127.0.0.1:PORT` of server `i`.
    pub fn addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.servers[i].port)
    }

    /// The name of server `i`, as a netsplit's `QUIT` shows it: `irc{i+1}.deskwire.test`.
    pub fn name(&self, i: usize) -> String {
        server_name(i)
    }

    /// Breaks the link between servers `i` and `i + 1` and keeps it broken: every user behind
    /// the link quits with the two servers' names, on both sides.
    pub fn split(&self, i: usize) {
        self.operator(i, &format!("DISCONNECT {}", server_name(i + 1)));
        self.wait_for_links(self.len() - 1);
    }

    /// Connects servers `i` and `i + 1` again and waits until the network is whole; the users
    /// behind the link come back by `JOIN` in the burst.
    pub fn heal(&self, i: usize) {
        self.operator(i, &format!("CONNECT {}", server_name(i + 1)));
        self.wait_linked();
    }

    /// Kills server `i` (`SIGTERM`): its users quit, on the other servers, as in a split.
    pub fn stop(&mut self, i: usize) {
        stop_daemon(&mut self.servers[i].child);
    }

    /// Starts server `i` again with its configuration and waits until the network is whole.
    pub fn restart(&mut self, i: usize) {
        stop_daemon(&mut self.servers[i].child);
        let binary = ngircd_binary().expect("ngircd is installed");
        let server = &mut self.servers[i];
        server.child = Ngircd::spawn(&binary, &server.conf, server.port);
        self.wait_linked();
    }

    /// Waits (up to 20 s) until server 0 sees every server of the network.
    pub fn wait_linked(&self) {
        self.wait_for_links(self.len());
    }

    fn wait_for_links(&self, want: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let seen = self.links_seen_from(0);
            if seen == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "server 0 sees {seen} servers, not {want}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How many servers `LINKS` on server `i` lists (itself included).
    fn links_seen_from(&self, i: usize) -> usize {
        let lines = self.session(i, "l", &["LINKS"], " 365 ");
        lines.iter().filter(|l| l.contains(" 364 ")).count()
    }

    /// Logs in as an IRC operator on server `i` and sends `command`.
    fn operator(&self, i: usize, command: &str) {
        let lines = self.session(
            i,
            "o",
            &[&format!("OPER {OPER_NAME} {OPER_PASSWORD}"), command],
            " 381 ",
        );
        assert!(
            lines.iter().any(|l| l.contains(" 381 ")),
            "not an operator on {}: {lines:?}",
            server_name(i)
        );
    }

    /// A short client session on server `i`: registers, sends `commands`, reads until a line
    /// containing `until` (or 10 s), then quits. Returns the lines read.
    fn session(&self, i: usize, nick: &str, commands: &[&str], until: &str) -> Vec<String> {
        let mut socket = TcpStream::connect(("127.0.0.1", self.servers[i].port))
            .expect("connect to the network's server");
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        // ngircd takes nicks of 9 characters at most; each session has its own.
        static SESSIONS: AtomicU32 = AtomicU32::new(0);
        let serial = SESSIONS.fetch_add(1, Ordering::Relaxed) % 1000;
        let nick = format!("{nick}{:04}{serial:03}", std::process::id() % 10_000);
        let mut text = format!("NICK {nick}\r\nUSER {nick} 0 * :deskwire tests\r\n");
        for command in commands {
            text += command;
            text += "\r\n";
        }
        socket.write_all(text.as_bytes()).expect("write");
        let mut lines = Vec::new();
        for line in BufReader::new(socket.try_clone().expect("clone")).lines() {
            let Ok(line) = line else { break };
            let done = line.contains(until);
            lines.push(line);
            if done {
                break;
            }
        }
        let _ = socket.write_all(b"QUIT\r\n");
        lines
    }
}

impl Drop for NgircdNetwork {
    fn drop(&mut self) {
        for server in &mut self.servers {
            stop_daemon(&mut server.child);
        }
    }
}

fn server_name(i: usize) -> String {
    format!("irc{}.deskwire.test", i + 1)
}

/// The `[Server]` block on server `me` for its link to server `peer`.
fn link_section(peer: usize, peer_port: u16, me: usize, passive: bool) -> String {
    // Each side's password for the link is the other's peer password.
    let (low, high) = (me.min(peer), me.max(peer));
    let (mine, theirs) = match me == low {
        true => (format!("link{low}{high}a"), format!("link{low}{high}b")),
        false => (format!("link{low}{high}b"), format!("link{low}{high}a")),
    };
    format!(
        "[Server]\nName = {}\nHost = 127.0.0.1\nPort = {peer_port}\nMyPassword = {mine}\n\
         PeerPassword = {theirs}\nPassive = {}\n",
        server_name(peer),
        if passive { "yes" } else { "no" }
    )
}
