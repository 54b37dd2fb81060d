//! Many OA1 channels over one IRC connection: [`MultiDesk`], many desks (one per channel, each
//! with its own remote, ids, timeouts and counters), and [`MultiRemote`], a remote that serves
//! every channel it has joined. A VR office with a desk per NPC needs one connection, not one
//! per NPC.
//!
//! The host loop is the one of [`Desk`](super::Desk) (see the [connection docs](super::connection)),
//! with [`MultiOutput`] in place of [`ConnectionOutput`]: each event names its channel.
//!
//! The server counts lines per connection, so the channels share one flood pacing
//! (`oa1.pacing`, or the server's own once it has said what it is): the connection hands its
//! turns out round robin among the channels with a line waiting, so one channel's long answer
//! cannot hold back another's short one, which leaves within a turn per busy channel.
//!
//! Channels are added and removed at run time. A channel added before registration is joined
//! after `001`; a kick or a refused join is tried again after `rejoin_delay_ms`, per channel.
//!
//! ```
//! use deskwire::oa1::{ConnectionConfig, MultiDesk, MultiOutput};
//! // No channel yet (""): each desk is added with its channel and its remote.
//! let mut desks = MultiDesk::new(ConnectionConfig::new("npcs", ""), 0, 7)?;
//! desks.add_desk(0, "#desk-1", "rexd")?;
//! desks.add_desk(0, "#desk-2", "rexd-lab")?;
//! let id = desks.request(0, "#desk-2", "uname -a", None)?; // waits for rexd-lab in #desk-2
//! assert_eq!(desks.in_flight("#desk-2"), Some(1));
//! // NICK and USER go first; the joins follow the server's welcome.
//! let MultiOutput::Transmit(line) = desks.poll_output(0) else { unreachable!() };
//! assert!(line.starts_with(b"NICK npcs"));
//! # let _ = id;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde::Serialize;

use super::chat::{ChatError, ChatInbox, ChatItem, ChatMessage, MembershipEvent};
use super::connection::{Connection, ConnectionEvent, ConnectionOutput};
use super::device_code::DeviceCode;
use super::discovery::{Discovery, DiscoveryEvent};
use super::remote_bash::ArgsError;
use super::{
    Client, Config, ConfigError, ConnectionConfig, ConnectionState, LocalError, Pacing, Server,
    Stats,
};
use crate::irc::{Session, SessionStats};

/// What a connection of many channels wants from the host next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MultiOutput {
    /// Write these bytes to the socket: one IRC line, CRLF included.
    Transmit(Vec<u8>),
    /// Tell the application. `channel` is the channel the event belongs to (as it was added),
    /// `None` for the connection's own (registration, the end of the link, nick changes).
    Event {
        /// The desk's or served channel's name, as added.
        channel: Option<String>,
        /// What happened.
        event: ConnectionEvent,
    },
    /// Device-code binding ([`MultiRemote::discover`]): a channel found and joined, or why
    /// `LIST` cannot find any.
    Discovery(DiscoveryEvent),
    /// A channel message that is not OA1, for a host that asked for chat
    /// ([`MultiDesk::set_chat`], [`MultiRemote::set_chat`]).
    Chat(ChatMessage),
    /// Someone joined, left, was kicked, quit or changed nick in a carried channel, or the
    /// channel's member list, for a host that asked ([`MultiDesk::set_membership`],
    /// [`MultiRemote::set_membership`]).
    Membership(MembershipEvent),
    /// Nothing more to do before this instant (ms, the host's clock) unless bytes arrive.
    Timeout(u64),
}

impl MultiOutput {
    fn from_poll((channel, output): (Option<String>, ConnectionOutput)) -> Self {
        match output {
            ConnectionOutput::Transmit(bytes) => MultiOutput::Transmit(bytes),
            ConnectionOutput::Event(event) => MultiOutput::Event { channel, event },
            ConnectionOutput::Timeout(at) => MultiOutput::Timeout(at),
        }
    }
}

macro_rules! multi_common {
    () => {
        /// Feeds bytes read from the socket (see [`Desk::handle_bytes`](super::Desk::handle_bytes)).
        pub fn handle_bytes(&mut self, now: u64, bytes: &[u8]) {
            self.0.handle_bytes(now, bytes)
        }

        /// The socket closed or failed: the connection ends, and every channel with it.
        pub fn handle_eof(&mut self, now: u64) {
            self.0.handle_eof(now)
        }

        /// Runs what is due by `now`; [`Self::poll_output`] does this too.
        pub fn handle_timeout(&mut self, now: u64) {
            self.0.handle_timeout(now)
        }

        /// Sends `QUIT :reason` and ends the connection.
        pub fn quit(&mut self, now: u64, reason: &str) {
            self.0.quit(now, reason)
        }

        /// The next thing to do: bytes to write, an event and its channel, or the deadline to
        /// wait for. Call it after every input and command until it answers
        /// [`MultiOutput::Timeout`].
        pub fn poll_output(&mut self, now: u64) -> MultiOutput {
            match self.0.chat.as_mut().and_then(ChatInbox::pop) {
                Some(ChatItem::Message(message)) => return MultiOutput::Chat(message),
                Some(ChatItem::Membership(event)) => return MultiOutput::Membership(event),
                None => {}
            }
            let output = self.0.poll(now);
            // Discovery's events come before the host goes to sleep.
            if let (_, ConnectionOutput::Timeout(_)) = output
                && let Some(event) = self.0.discovery.as_mut().and_then(Discovery::pop_event)
            {
                return MultiOutput::Discovery(event);
            }
            MultiOutput::from_poll(output)
        }

        /// The connection's state: `Registering`, `Ready` once registered, or `Closed`. Each
        /// channel has its own ([`Self::channel_state`]).
        pub fn state(&self) -> ConnectionState {
            self.0.state
        }

        /// Where a channel stands: `Joining`, `WaitingForPeer` (a desk whose remote is not
        /// there), `Ready`, ...; `None` for a channel this connection does not carry.
        pub fn channel_state(&self, channel: &str) -> Option<ConnectionState> {
            self.0.channel(channel).map(|c| c.state)
        }

        /// The channels, as added, in the order they were.
        pub fn channels(&self) -> Vec<String> {
            self.0.channels.iter().map(|c| c.name.clone()).collect()
        }

        /// The IRC session (our nick, learned prefix, channels joined).
        pub fn session(&self) -> &Session {
            &self.0.session
        }

        /// The IRC session's counters.
        pub fn irc_stats(&self) -> SessionStats {
            self.0.session.stats()
        }

        /// A channel's OA1 counters.
        pub fn channel_stats(&self, channel: &str) -> Option<Stats> {
            self.0.channel(channel).map(|c| c.endpoint.stats())
        }

        /// The flood pacing the channels share: the configured one, or the server's own once
        /// it has said what it is.
        pub fn pacing(&self) -> Pacing {
            self.0.pacing()
        }

        /// Channel chat beside OA1 (off by default): with `on`, each `PRIVMSG`, `NOTICE` and
        /// CTCP `ACTION` in a carried channel that is not an OA1 frame comes out as
        /// [`MultiOutput::Chat`], with its sender and tags (at most 1024 wait for the host; the
        /// oldest go first, counted in [`Self::chat_dropped`]).
        pub fn set_chat(&mut self, on: bool) {
            self.0.chat.get_or_insert_with(ChatInbox::default).messages = on;
            self.drop_inbox_when_unused();
        }

        /// Channel membership (off by default): with `on`, each `JOIN`, `PART`, `KICK`,
        /// `QUIT` and `NICK` that changes who is in a carried channel comes out as
        /// [`MultiOutput::Membership`], and so does a channel's whole member list once the
        /// server has sent it (after our join). A `QUIT` or `NICK` is told once for each
        /// carried channel its nick was seen in. It shares the chat's bound of 1024 waiting.
        pub fn set_membership(&mut self, on: bool) {
            self.0
                .chat
                .get_or_insert_with(ChatInbox::default)
                .membership = on;
            self.drop_inbox_when_unused();
        }

        fn drop_inbox_when_unused(&mut self) {
            if self
                .0
                .chat
                .as_ref()
                .is_some_and(|c| !c.messages && !c.membership)
            {
                self.0.chat = None;
            }
        }

        /// Chat messages and membership changes dropped because the host did not take them.
        pub fn chat_dropped(&self) -> u64 {
            self.0.chat.as_ref().map_or(0, |c| c.dropped)
        }

        /// Sends `text` to `channel` as chat (`NOTICE`s with `notice`): cut at spaces, or at
        /// character boundaries, into lines that fit, never a line starting with `OA1 `
        /// ([`ChatError::ReservedPrefix`] when the text does), and sent through the
        /// connection's pacing in turn with the channels' OA1 lines, once the channel is
        /// joined. At most 64 KiB wait per channel. Returns the number of lines.
        pub fn send_text(
            &mut self,
            channel: &str,
            text: &str,
            notice: bool,
        ) -> Result<usize, ChatError> {
            self.0.send_text(channel, text, notice)
        }

        /// What a channel's held lines wait for, in words; `None` when it is ready, closed or
        /// not carried.
        pub fn waiting_for(&self, channel: &str) -> Option<String> {
            self.0.channel(channel).and_then(|c| self.0.waiting_for(c))
        }
    };
}

/// Many desks over one IRC connection, one per channel. See the [module docs](self).
#[derive(Debug)]
pub struct MultiDesk(Connection<Client>);

impl MultiDesk {
    /// Starts a connection at `now` (`NICK`/`USER` are the first output). `config.oa1` is the
    /// first desk when its channel is not empty (it must then name its remote), and in any case
    /// the settings of the desks [`Self::add_desk`] adds. `seed` starts the desks' request id
    /// sequences (take it from the OS's entropy; each desk gets its own sequence from it).
    pub fn new(config: ConnectionConfig, now: u64, seed: u64) -> Result<Self, ConfigError> {
        Connection::new(config, now, true, true, seed, Client::new).map(MultiDesk)
    }

    multi_common!();

    /// Adds a desk in `channel` whose remote is `remote` (a nick, `nick!user@host`, or `*`),
    /// with the settings of `config.oa1`; the channel is joined (after `001` when not yet
    /// registered). Requests to it wait until the remote is in the channel.
    pub fn add_desk(&mut self, now: u64, channel: &str, remote: &str) -> Result<(), ConfigError> {
        let mut oa1 = self.0.template.clone();
        oa1.channel = channel.to_owned();
        oa1.allowed_sender = Some(remote.to_owned());
        self.add_desk_with(now, oa1)
    }

    /// Adds a desk with settings of its own (`oa1.channel`, `oa1.allowed_sender`, timeouts,
    /// limits, a secret). Its `pacing` is not used: the connection's is shared.
    pub fn add_desk_with(&mut self, now: u64, oa1: Config) -> Result<(), ConfigError> {
        let _ = now;
        self.0.add_channel(oa1)
    }

    /// Leaves `channel` and drops its desk: its requests fail `disconnected` (their events
    /// still come out). `false` when the connection has no such desk.
    pub fn remove_desk(&mut self, now: u64, channel: &str) -> bool {
        self.0
            .remove_channel(now, channel, &format!("the desk in {channel} was removed"))
    }

    /// Sends `payload` to the remote of the desk in `channel` (see
    /// [`Desk::request`](super::Desk::request)). Returns the request id.
    pub fn request(
        &mut self,
        now: u64,
        channel: &str,
        payload: &str,
        timeout_ms: Option<u64>,
    ) -> Result<String, LocalError> {
        self.0.check_open()?;
        self.desk_mut(channel)?.request(now, payload, timeout_ms)
    }

    /// Runs `command` through `RemoteBash` on the remote of the desk in `channel` (see
    /// [`Desk::remote_bash`](super::Desk::remote_bash)).
    pub fn remote_bash(
        &mut self,
        now: u64,
        channel: &str,
        command: &str,
        timeout: Option<std::time::Duration>,
    ) -> Result<String, ArgsError> {
        let timeout_ms = super::roles::checked_remote_bash(command, timeout)?;
        Ok(self.request(now, channel, command, timeout_ms)?)
    }

    /// Cancels a request of the desk in `channel`: no event comes for it, and the remote is
    /// sent a `CANCEL`.
    pub fn cancel(
        &mut self,
        now: u64,
        channel: &str,
        id: &str,
        reason: &str,
    ) -> Result<(), LocalError> {
        self.desk_mut(channel)?.cancel(now, id, reason)
    }

    /// Requests of the desk in `channel` sent and not yet answered.
    pub fn in_flight(&self, channel: &str) -> Option<usize> {
        self.0.channel(channel).map(|c| c.endpoint.in_flight())
    }

    /// The other members of the desk's channel.
    pub fn members(&self, channel: &str) -> Option<Vec<String>> {
        let channel = self.0.channel(channel)?;
        Some(channel.members.names.values().cloned().collect())
    }

    /// The `RemoteBash` description for the desk in `channel`, whose output budget follows
    /// the shared pacing.
    pub fn tool_description(&self, channel: &str) -> Option<String> {
        let channel = self.0.channel(channel)?;
        Some(super::remote_bash::description(
            channel.endpoint.config(),
            self.0.pacing(),
        ))
    }

    /// The desk's OA1 endpoint.
    pub fn client(&self, channel: &str) -> Option<&Client> {
        self.0.channel(channel).map(|c| &c.endpoint)
    }

    fn desk_mut(&mut self, channel: &str) -> Result<&mut Client, LocalError> {
        match self.0.channel_mut(channel) {
            Some(c) => Ok(&mut c.endpoint),
            None => Err(LocalError::UnknownChannel(channel.to_owned())),
        }
    }
}

/// A remote that serves every channel it has joined, over one IRC connection. See the
/// [module docs](self).
#[derive(Debug)]
pub struct MultiRemote(Connection<Server>);

impl MultiRemote {
    /// Starts a connection at `now`. `config.oa1` serves its channel when that is not empty,
    /// and in any case is what every channel added by [`Self::add_channel`] is served with
    /// (allowed sender, secret, limits).
    pub fn new(config: ConnectionConfig, now: u64) -> Result<Self, ConfigError> {
        Connection::new(config, now, false, true, 0, |oa1, _| Server::new(oa1)).map(MultiRemote)
    }

    multi_common!();

    /// Joins `channel` and serves it as `config.oa1` says. Adding a channel served already is
    /// refused ([`ConfigError::DuplicateChannel`]).
    pub fn add_channel(&mut self, now: u64, channel: &str) -> Result<(), ConfigError> {
        let _ = now;
        let mut oa1 = self.0.template.clone();
        oa1.channel = channel.to_owned();
        self.0.add_channel(oa1)
    }

    /// Device-code binding: `LIST`s the server once registered and every `interval_ms` (at
    /// least 5 s) from then on, and joins and serves every listed channel bound to `code`
    /// ([`DeviceCode::matches`]), at most 64 new ones a listing. Each is a
    /// [`MultiOutput::Discovery`] `Found`; a server that refuses or hides `LIST` is one too.
    /// A channel found is kept (and joined again after a kick) until removed.
    pub fn discover(&mut self, code: DeviceCode, interval_ms: u64) {
        self.0.discovery = Some(Discovery::new(code, interval_ms));
    }

    /// The device code discovery looks for.
    pub fn device_code(&self) -> Option<&DeviceCode> {
        self.0.discovery.as_ref().map(Discovery::code)
    }

    /// Whether `channel` is served.
    pub fn serves(&self, channel: &str) -> bool {
        self.0.channel(channel).is_some()
    }

    /// Leaves `channel` and stops serving it: its requests end with
    /// [`Event::Cancelled`](super::Event::Cancelled). `false` when it was not served.
    pub fn remove_channel(&mut self, now: u64, channel: &str) -> bool {
        self.0
            .remove_channel(now, channel, "the channel was removed")
    }

    /// Streams more output of request `id` in `channel`.
    pub fn send(
        &mut self,
        now: u64,
        channel: &str,
        id: &str,
        output: &str,
    ) -> Result<(), LocalError> {
        self.served_mut(channel)?.send(now, id, output)
    }

    /// Ends the response of request `id` in `channel` once its output has gone out.
    pub fn finish(&mut self, now: u64, channel: &str, id: &str) -> Result<(), LocalError> {
        self.served_mut(channel)?.finish(now, id)
    }

    /// Sends the whole response `text` of request `id` in `channel` and ends it.
    pub fn respond(
        &mut self,
        now: u64,
        channel: &str,
        id: &str,
        text: &str,
    ) -> Result<(), LocalError> {
        self.served_mut(channel)?.respond(now, id, text)
    }

    /// Answers request `id` in `channel` with `ERR code: message`.
    pub fn fail(
        &mut self,
        now: u64,
        channel: &str,
        id: &str,
        code: &str,
        message: &str,
    ) -> Result<(), LocalError> {
        self.served_mut(channel)?.fail(now, id, code, message)
    }

    /// Requests of `channel` handed out and not yet answered.
    pub fn active(&self, channel: &str) -> Option<usize> {
        self.0.channel(channel).map(|c| c.endpoint.active())
    }

    /// The OA1 endpoint serving `channel`.
    pub fn server(&self, channel: &str) -> Option<&Server> {
        self.0.channel(channel).map(|c| &c.endpoint)
    }

    fn served_mut(&mut self, channel: &str) -> Result<&mut Server, LocalError> {
        match self.0.channel_mut(channel) {
            Some(c) => Ok(&mut c.endpoint),
            None => Err(LocalError::UnknownChannel(channel.to_owned())),
        }
    }
}
