//! An in-memory IRC server over raw bytes, for the per-connection engines
//! ([`Desk`](crate::oa1::Desk), [`Remote`](crate::oa1::Remote)) in tests, demos and the
//! bindings' examples.
//!
//! Each client is a connection: the host writes the bytes an engine transmits with
//! [`Network::handle_bytes`] and reads what the server sends it with [`Network::take_bytes`],
//! exactly as it would with a socket. The server registers clients (`NICK`, `USER` → `001`, `433`
//! for a nick in use), answers `PING`, handles `JOIN`, `PART`, `LIST` and `QUIT`, and relays `PRIVMSG`
//! and `NOTICE` with the rules of [`Relay`](super::Relay): the sender's `:nick!~user@host`
//! prefix, trailing whitespace trimmed, relayed lines over 512 bytes cut with `[CUT]`. A line over
//! 510 bytes gets `ERROR :Request too long` and the connection is closed, as ngircd does; so does a
//! client that lets more than [`MAX_PENDING_BYTES`] pile up unread ("SendQ exceeded").

use super::{CUT_MARK, NOISE, RelayStats, relayed_cut_at};
use crate::irc::{CaseMapping, MAX_LINE_BYTES, Message};
use crate::lines::{DecodedLine, LineDecoder};
use crate::oa1::IdGenerator;

/// Bytes a client may leave unread before the server drops it.
pub const MAX_PENDING_BYTES: usize = 1 << 20;

/// The server's name in the lines it sends.
const SERVER: &str = "sim.example";

/// One connection to the [`Network`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientId(usize);

#[derive(Debug)]
struct Client {
    decoder: LineDecoder,
    host: String,
    nick: Option<String>,
    user: Option<String>,
    registered: bool,
    outbox: Vec<u8>,
    open: bool,
}

impl Client {
    fn prefix(&self) -> String {
        let mut prefix = Vec::new();
        self.push_prefix(&mut prefix);
        String::from_utf8_lossy(&prefix).into_owned()
    }

    /// `nick!~user@host`, onto `out`.
    fn push_prefix(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.nick.as_deref().unwrap_or("*").as_bytes());
        out.extend_from_slice(b"!~");
        out.extend_from_slice(self.user.as_deref().unwrap_or("*").as_bytes());
        out.push(b'@');
        out.extend_from_slice(self.host.as_bytes());
    }
}

#[derive(Debug)]
struct Channel {
    name: String,
    members: Vec<ClientId>,
}

/// The server. See the module docs.
#[derive(Debug)]
pub struct Network {
    clients: Vec<Client>,
    channels: Vec<Channel>,
    noise_every: u32,
    since_noise: u32,
    rng: IdGenerator,
    stats: RelayStats,
    /// What `004` says the server is; none sent when `None`.
    version: Option<String>,
    /// The longest line, CRLF included, it takes and relays: 512, or what `LINELEN` says.
    linelen: usize,
    /// ISUPPORT tokens it sends after `001` (in one `005`; none sent when empty).
    isupport: Vec<String>,
}

impl Network {
    /// A server with no clients. `seed` fixes the noise sequence.
    pub fn new(seed: u64) -> Self {
        Network {
            clients: Vec::new(),
            channels: Vec::new(),
            noise_every: 0,
            since_noise: 0,
            rng: IdGenerator::new(seed),
            stats: RelayStats::default(),
            version: None,
            linelen: MAX_LINE_BYTES,
            isupport: Vec::new(),
        }
    }

    /// Says `token` (e.g. `BOT=B`) in its ISUPPORT `005` after `001`.
    pub fn with_isupport(mut self, token: &str) -> Self {
        self.isupport.push(token.to_owned());
        self
    }

    /// Takes and relays lines of up to `linelen` bytes (CRLF included; at least 512), and says
    /// so after `001` in ISUPPORT (`005 <nick> LINELEN=<n>`), as servers with longer lines do.
    pub fn with_linelen(mut self, linelen: usize) -> Self {
        self.linelen = linelen.max(MAX_LINE_BYTES);
        let linelen = self.linelen;
        self.with_isupport(&format!("LINELEN={linelen}"))
    }

    /// Says after `001` what server this is (`004 <nick> sim.example <version> ...`), as real
    /// servers do: an engine paces lines by it (`ngircd-26.1`).
    pub fn with_version(mut self, version: &str) -> Self {
        self.version = Some(version.to_owned());
        self
    }

    /// Injects one noise line into a channel after every `n` messages relayed there (0: never).
    pub fn with_noise(mut self, n: u32) -> Self {
        self.noise_every = n;
        self
    }

    /// The longest line, CRLF included, it takes and relays (see [`Network::with_linelen`]).
    pub fn linelen(&self) -> usize {
        self.linelen
    }

    /// Opens a connection from `host` (shown in the client's prefix).
    pub fn connect(&mut self, host: &str) -> ClientId {
        self.clients.push(Client {
            decoder: LineDecoder::new(self.linelen),
            host: host.to_owned(),
            nick: None,
            user: None,
            registered: false,
            outbox: Vec::new(),
            open: true,
        });
        ClientId(self.clients.len() - 1)
    }

    /// Whether the connection is still open (a client that sent `QUIT` or broke a limit is not).
    pub fn is_open(&self, client: ClientId) -> bool {
        self.clients[client.0].open
    }

    /// Closes the connection from the client's side (its socket went away).
    pub fn disconnect(&mut self, client: ClientId) {
        self.close(client, None);
    }

    /// Takes bytes the client wrote. Bytes for a closed connection are dropped.
    pub fn handle_bytes(&mut self, client: ClientId, bytes: &[u8]) {
        if !self.clients[client.0].open {
            return;
        }
        // The decoder leaves the client while its lines are handled (which needs `&mut self`),
        // so no line is copied out of it.
        let fresh = LineDecoder::new(self.linelen);
        let mut decoder = std::mem::replace(&mut self.clients[client.0].decoder, fresh);
        decoder.feed(bytes);
        while self.clients[client.0].open {
            match decoder.next_line() {
                None => break,
                Some(DecodedLine::Line(line)) => self.handle_line(client, line),
                Some(_) => self.close(client, Some("Request too long")),
            }
        }
        self.clients[client.0].decoder = decoder;
    }

    /// Everything the server sent this client since the last call (whole lines, CRLF
    /// included). After the connection closed, what was sent before the close is still here.
    pub fn take_bytes(&mut self, client: ClientId) -> Vec<u8> {
        std::mem::take(&mut self.clients[client.0].outbox)
    }

    /// Counters of the channel traffic.
    pub fn stats(&self) -> RelayStats {
        self.stats
    }

    fn handle_line(&mut self, from: ClientId, line: &[u8]) {
        let line = trim_end(line);
        let Ok(msg) = Message::parse(line) else {
            return;
        };
        let registered = self.clients[from.0].registered;
        let upper;
        let command = match msg.command.bytes().any(|b| b.is_ascii_lowercase()) {
            true => {
                upper = msg.command.to_ascii_uppercase();
                upper.as_str()
            }
            false => msg.command,
        };
        match command {
            "NICK" => {
                let Some(nick) = msg.param(0) else { return };
                let taken = self.clients.iter().enumerate().any(|(i, c)| {
                    i != from.0 && c.open && c.nick.as_deref().is_some_and(|n| same(n, nick))
                });
                if taken {
                    let current = self.clients[from.0].nick.clone().unwrap_or("*".into());
                    self.send(
                        from,
                        format!(":{SERVER} 433 {current} {nick} :Nickname is already in use"),
                    );
                    return;
                }
                let old = self.clients[from.0].prefix();
                self.clients[from.0].nick = Some(nick.to_owned());
                if registered {
                    let line = format!(":{old} NICK :{nick}");
                    self.send(from, &line);
                    for peer in self.peers_of(from) {
                        self.send(peer, &line);
                    }
                }
                self.try_register(from);
            }
            "USER" => {
                if let Some(user) = msg.param(0) {
                    self.clients[from.0].user = Some(user.to_owned());
                    self.try_register(from);
                }
            }
            "PING" => {
                let token = msg.param(0).unwrap_or(SERVER).to_owned();
                self.send(from, format!(":{SERVER} PONG {SERVER} :{token}"));
            }
            "QUIT" => self.close(from, Some("Client Quit")),
            _ if !registered => {}
            "JOIN" => {
                let Some(name) = msg.param(0) else { return };
                let index = match self.channels.iter().position(|c| same(&c.name, name)) {
                    Some(index) => index,
                    None => {
                        self.channels.push(Channel {
                            name: name.to_owned(),
                            members: Vec::new(),
                        });
                        self.channels.len() - 1
                    }
                };
                if self.channels[index].members.contains(&from) {
                    return;
                }
                self.channels[index].members.push(from);
                let line = format!(
                    ":{} JOIN {}",
                    self.clients[from.0].prefix(),
                    self.channels[index].name
                );
                for member in self.channels[index].members.clone() {
                    self.send(member, &line);
                }
                // The NAMES reply ngircd sends after the JOIN echo.
                let nick = self.clients[from.0].nick.clone().unwrap_or_default();
                let names: Vec<String> = self.channels[index]
                    .members
                    .iter()
                    .filter_map(|m| self.clients[m.0].nick.clone())
                    .collect();
                let chan = self.channels[index].name.clone();
                self.send(
                    from,
                    format!(":{SERVER} 353 {nick} = {chan} :{}", names.join(" ")),
                );
                self.send(
                    from,
                    format!(":{SERVER} 366 {nick} {chan} :End of NAMES list"),
                );
            }
            "PART" => {
                let Some(name) = msg.param(0) else { return };
                let Some(index) = self.channels.iter().position(|c| same(&c.name, name)) else {
                    return;
                };
                if !self.channels[index].members.contains(&from) {
                    return;
                }
                let line = format!(
                    ":{} PART {}",
                    self.clients[from.0].prefix(),
                    self.channels[index].name
                );
                for member in self.channels[index].members.clone() {
                    self.send(member, &line);
                }
                self.channels[index].members.retain(|&m| m != from);
            }
            "LIST" => {
                // Every channel with members, as ngircd lists those not secret.
                let nick = self.clients[from.0].nick.clone().unwrap_or_default();
                self.send(from, format!(":{SERVER} 321 {nick} Channel :Users  Name"));
                let listed: Vec<(String, usize)> = self
                    .channels
                    .iter()
                    .filter(|c| !c.members.is_empty())
                    .map(|c| (c.name.clone(), c.members.len()))
                    .collect();
                for (name, users) in listed {
                    self.send(from, format!(":{SERVER} 322 {nick} {name} {users} :"));
                }
                self.send(from, format!(":{SERVER} 323 {nick} :End of LIST"));
            }
            "PRIVMSG" | "NOTICE" => {
                let Some(target) = msg.param(0) else { return };
                // The line as the client sent it after the command, relayed unchanged (the
                // command is a slice of the line, so this is where it ends).
                let after_command =
                    msg.command.as_ptr() as usize - line.as_ptr() as usize + msg.command.len();
                let rest = &line[after_command..];
                let mut relayed = Vec::with_capacity(64 + line.len());
                relayed.push(b':');
                self.clients[from.0].push_prefix(&mut relayed);
                relayed.push(b' ');
                relayed.extend_from_slice(command.as_bytes());
                relayed.extend_from_slice(rest);
                self.stats.longest_line = self.stats.longest_line.max(relayed.len() + 2);
                if let Some(cut) = relayed_cut_at(&relayed, self.linelen) {
                    relayed.truncate(cut);
                    relayed.extend_from_slice(CUT_MARK.as_bytes());
                    self.stats.cut_lines += 1;
                }
                if let Some(index) = self.channels.iter().position(|c| same(&c.name, target)) {
                    for member in self.channels[index].members.clone() {
                        if member != from {
                            self.send(member, &relayed);
                        }
                    }
                    self.stats.relayed += 1;
                    self.maybe_inject_noise(index);
                } else if let Some(to) = self
                    .clients
                    .iter()
                    .position(|c| c.open && c.nick.as_deref().is_some_and(|n| same(n, target)))
                {
                    self.send(ClientId(to), &relayed);
                }
            }
            _ => {}
        }
    }

    fn try_register(&mut self, client: ClientId) {
        let c = &self.clients[client.0];
        if c.registered || c.nick.is_none() || c.user.is_none() {
            return;
        }
        self.clients[client.0].registered = true;
        let prefix = self.clients[client.0].prefix();
        let nick = self.clients[client.0].nick.clone().unwrap_or_default();
        self.send(
            client,
            format!(":{SERVER} 001 {nick} :Welcome to the simulated network {prefix}"),
        );
        if let Some(version) = self.version.clone() {
            self.send(
                client,
                format!(":{SERVER} 004 {nick} {SERVER} {version} io ntlk"),
            );
        }
        if !self.isupport.is_empty() {
            let tokens = self.isupport.join(" ");
            self.send(
                client,
                format!(":{SERVER} 005 {nick} {tokens} :are supported by this server"),
            );
        }
    }

    fn peers_of(&self, client: ClientId) -> Vec<ClientId> {
        let mut peers: Vec<ClientId> = self
            .channels
            .iter()
            .filter(|c| c.members.contains(&client))
            .flat_map(|c| c.members.iter().copied())
            .filter(|&m| m != client)
            .collect();
        peers.sort_by_key(|p| p.0);
        peers.dedup();
        peers
    }

    fn maybe_inject_noise(&mut self, channel: usize) {
        if self.noise_every == 0 {
            return;
        }
        self.since_noise += 1;
        if self.since_noise < self.noise_every {
            return;
        }
        self.since_noise = 0;
        let pick = (self.rng.next_u64() % NOISE.len() as u64) as usize;
        let id = self.rng.next_id();
        let line = NOISE[pick]
            .replace("{chan}", &self.channels[channel].name)
            .replace("{id}", &id);
        for member in self.channels[channel].members.clone() {
            self.send(member, &line);
        }
        self.stats.noise += 1;
    }

    fn send(&mut self, to: ClientId, line: impl AsRef<[u8]>) {
        let c = &mut self.clients[to.0];
        if !c.open {
            return;
        }
        c.outbox.extend_from_slice(line.as_ref());
        c.outbox.extend_from_slice(b"\r\n");
        if c.outbox.len() > MAX_PENDING_BYTES {
            self.close(to, Some("SendQ exceeded"));
        }
    }

    /// Closes a connection; `error` is the `ERROR` line's text when the server closes it.
    fn close(&mut self, client: ClientId, error: Option<&str>) {
        if !self.clients[client.0].open {
            return;
        }
        let quit = format!(
            ":{} QUIT :{}",
            self.clients[client.0].prefix(),
            error.unwrap_or("Connection closed")
        );
        let registered = self.clients[client.0].registered;
        if let Some(error) = error {
            let c = &mut self.clients[client.0];
            c.outbox
                .extend_from_slice(format!("ERROR :Closing connection: {error}\r\n").as_bytes());
        }
        let peers = self.peers_of(client);
        self.clients[client.0].open = false;
        for channel in &mut self.channels {
            channel.members.retain(|&m| m != client);
        }
        if registered {
            for peer in peers {
                self.send(peer, &quit);
            }
        }
    }
}

fn same(a: &str, b: &str) -> bool {
    CaseMapping::Rfc1459.eq(a, b)
}

/// What a server keeps of a line: no trailing spaces or tabs (ngircd's `ngt_TrimStr`).
fn trim_end(mut line: &[u8]) -> &[u8] {
    while let [rest @ .., b' ' | b'\t'] = line {
        line = rest;
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(net: &mut Network, c: ClientId) -> Vec<String> {
        String::from_utf8(net.take_bytes(c))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn registers_joins_and_relays() {
        let mut net = Network::new(1);
        let a = net.connect("10.0.0.1");
        let b = net.connect("10.0.0.2");
        net.handle_bytes(a, b"NICK alice\r\nUSER al 0 * :Alice\r\n");
        assert_eq!(
            lines(&mut net, a),
            [":sim.example 001 alice :Welcome to the simulated network alice!~al@10.0.0.1"]
        );
        net.handle_bytes(b, b"NICK alice\r\n");
        assert_eq!(
            lines(&mut net, b),
            [":sim.example 433 * alice :Nickname is already in use"]
        );
        net.handle_bytes(b, b"NICK bob\r\nUSER bob 0 * :Bob\r\nJOIN #Desk\r\n");
        net.handle_bytes(a, b"JOIN #desk\r\nPRIVMSG #DESK :hi there  \r\n");
        assert_eq!(
            lines(&mut net, b)[1..],
            [
                ":bob!~bob@10.0.0.2 JOIN #Desk",
                ":sim.example 353 bob = #Desk :bob",
                ":sim.example 366 bob #Desk :End of NAMES list",
                ":alice!~al@10.0.0.1 JOIN #Desk",
                ":alice!~al@10.0.0.1 PRIVMSG #DESK :hi there",
            ]
        );
        assert_eq!(
            lines(&mut net, a),
            [
                ":alice!~al@10.0.0.1 JOIN #Desk",
                ":sim.example 353 alice = #Desk :bob alice",
                ":sim.example 366 alice #Desk :End of NAMES list",
            ]
        );
        net.handle_bytes(b, b"PING :tok\r\n");
        assert_eq!(lines(&mut net, b), [":sim.example PONG sim.example :tok"]);
    }

    #[test]
    fn relays_the_text_after_the_command_and_cuts_long_lines_on_a_character() {
        let mut net = Network::new(1);
        let a = net.connect("10.0.0.1");
        let b = net.connect("10.0.0.2");
        net.handle_bytes(a, b"NICK alice\r\nUSER al 0 * :Alice\r\nJOIN #d\r\n");
        net.handle_bytes(b, b"NICK bob\r\nUSER bob 0 * :Bob\r\nJOIN #d\r\n");
        lines(&mut net, b);
        // A lowercase command and a source the client made up: the server's prefix replaces
        // the source, the command is upper-cased, the rest goes unchanged.
        net.handle_bytes(a, b":mallory privmsg #d  :two  spaces\r\nnotice #d x\r\n");
        assert_eq!(
            lines(&mut net, b),
            [
                ":alice!~al@10.0.0.1 PRIVMSG #d  :two  spaces",
                ":alice!~al@10.0.0.1 NOTICE #d x",
            ]
        );
        // 510 bytes from the client are over 510 once relayed with the prefix: cut to 505
        // bytes and `[CUT]`, here before a 3-byte character that would straddle the cut.
        let head = "PRIVMSG #d :";
        let prefix_len = ":alice!~al@10.0.0.1 ".len();
        let fill = "x".repeat(505 - prefix_len - head.len() - 1);
        let line = format!(
            "{head}{fill}€{}",
            "y".repeat(510 - head.len() - fill.len() - 3)
        );
        assert_eq!(line.len(), 510);
        net.handle_bytes(a, format!("{line}\r\n").as_bytes());
        let relayed = lines(&mut net, b);
        assert_eq!(relayed, [format!(":alice!~al@10.0.0.1 {head}{fill}[CUT]")]);
        assert_eq!(net.stats().cut_lines, 1);
    }

    #[test]
    fn a_long_line_closes_the_connection() {
        let mut net = Network::new(1);
        let a = net.connect("h");
        let b = net.connect("h");
        net.handle_bytes(a, b"NICK a\r\nUSER a 0 * a\r\nJOIN #d\r\n");
        net.handle_bytes(b, b"NICK b\r\nUSER b 0 * b\r\nJOIN #d\r\n");
        net.take_bytes(a);
        let long = format!("PRIVMSG #d :{}\r\n", "x".repeat(500));
        net.handle_bytes(a, long.as_bytes());
        assert!(!net.is_open(a));
        assert_eq!(
            lines(&mut net, a),
            ["ERROR :Closing connection: Request too long"]
        );
        assert!(
            lines(&mut net, b)
                .last()
                .unwrap()
                .ends_with("QUIT :Request too long")
        );
        net.handle_bytes(a, b"PRIVMSG #d :after\r\n");
        assert!(net.take_bytes(b).is_empty());
    }

    #[test]
    fn an_unread_client_is_dropped() {
        let mut net = Network::new(1);
        let a = net.connect("h");
        let b = net.connect("h");
        net.handle_bytes(a, b"NICK a\r\nUSER a 0 * a\r\nJOIN #d\r\n");
        net.handle_bytes(b, b"NICK b\r\nUSER b 0 * b\r\nJOIN #d\r\n");
        let line = format!("PRIVMSG #d :{}\r\n", "y".repeat(400));
        for _ in 0..(MAX_PENDING_BYTES / 400 + 10) {
            net.handle_bytes(a, line.as_bytes());
        }
        assert!(!net.is_open(b));
        assert!(net.take_bytes(b).len() <= MAX_PENDING_BYTES + 1024);
    }
}
