//! `DeskConnection`: one IRC connection carrying many desks, one per channel (the core's
//! `deskwire::oa1::MultiDesk`), with the channels' chat and membership as signals.
//!
//! The desks are `DeskRpcClient`s whose `connection` names this node: each keeps its own calls
//! and signals; this node owns the socket and the engine, and hands each channel's events to
//! the desk of that channel.

use deskwire::irc::{DisconnectReason, SessionEvent};
use deskwire::oa1::chat::{ChatError, ChatKind, ChatMessage, MembershipEvent};
use deskwire::oa1::{Config, ConnectionEvent, ConnectionState, LocalError, MultiDesk, MultiOutput};
use deskwire::reconnect::{Backoff, ReconnectPolicy};
use godot::classes::notify::NodeNotification;
use godot::classes::{INode, Node, X509Certificate};
use godot::global::Error;
use godot::obj::InstanceId;
use godot::prelude::*;
use godot::register::property::PhantomVar;

use crate::desk_client::{self, DeskRpcClient};
use crate::shapes::{self, ConnectionSettings};
use crate::socket::{self, Input, Socket, TlsSettings};
use crate::{on_main_thread, ticks, variant};

/// One IRC connection that carries many desks, one per channel: a VR office with a desk per
/// NPC needs one connection, not one per NPC. The channels share the connection's flood
/// pacing fairly, so one desk's long answer does not hold back another's short one.
///
/// Each desk is a [DeskRpcClient] whose [member DeskRpcClient.connection] is this node: it
/// keeps its own [member DeskRpcClient.channel], [member DeskRpcClient.remote_nick], timeouts,
/// calls, counters and signals, and its [method DeskRpcClient.connect_to_server] joins its
/// channel on this connection instead of opening its own ([method DeskRpcClient.close] leaves
/// it). Desks may join before or after [method connect_to_server]; a connection made again
/// joins every desk's channel again.
///
/// Channel chat beside OA1, opt-in: with [member chat_enabled], every `PRIVMSG`, `NOTICE` and
/// `/me` in the desks' channels that is not an OA1 frame comes as [signal chat_received]; with
/// [member membership_enabled], joins, parts, kicks, quits, nick changes and each channel's
/// member list come as [signal membership_changed]. [method send_text] says something in a
/// channel, through the same pacing.
///
/// The node pumps itself from `_process` while it is in the scene tree (or call [method poll]
/// yourself, with [member auto_poll] off); every signal is emitted on the main thread. A lost
/// link comes back by itself with [member reconnect]; without it, call
/// [method connect_to_server] again: every desk joins again either way.
///
/// ```gdscript
/// var office := DeskConnection.new()
/// office.nick = "office"               # rexd --irc --allow-from office
/// office.chat_enabled = true
/// add_child(office)
/// office.chat_received.connect(func(channel, sender, kind, text, tags): print(channel, " <", sender, "> ", text))
/// for n in 3:
///     var desk := DeskRpcClient.new()
///     desk.connection = office
///     desk.channel = "#desk-%d" % n
///     desk.remote_nick = "rexd"
///     office.add_child(desk)
///     desk.connect_to_server()
/// office.connect_to_server("irc.example", 6667)
/// ```
#[derive(GodotClass)]
#[class(init, base = Node)]
pub struct DeskConnection {
    /// The IRC server's host name or address ([method connect_to_server]'s `host` argument
    /// sets it).
    #[export]
    #[init(val = GString::from("127.0.0.1"))]
    server_host: GString,
    /// The IRC server's port (6697 is the usual one for TLS; [method connect_to_server]'s
    /// `port` argument sets it).
    #[export]
    #[init(val = 6667)]
    server_port: i32,
    /// Connect with TLS (`StreamPeerTLS`), checking the server's certificate.
    #[export]
    use_tls: bool,
    /// The name the server's certificate must carry ("": [member server_host]).
    #[export]
    tls_server_name: GString,
    /// Trust this certificate instead of the system's certificate authorities (for a server
    /// with its own certificate).
    #[export]
    tls_trusted_certificate: Option<Gd<X509Certificate>>,
    /// Our IRC nick, the one every desk's remote allows (`rexd --irc --allow-from office`).
    /// When the server refuses it (taken), the connection goes on under a fallback and asks
    /// for it back, and the desks' requests wait meanwhile.
    #[export]
    #[init(val = GString::from("desk"))]
    nick: GString,
    /// The IRC server's password (`PASS`; "": none). Masked in the inspector and never saved
    /// into a scene file: set it from code before connecting.
    #[var(hint = PASSWORD, usage_flags = [EDITOR])]
    server_password: GString,
    /// Log in with SASL PLAIN as this services account while registering ("": no SASL).
    /// Over TLS ([member use_tls]) only, unless you mean to send the password in clear.
    #[export]
    sasl_username: GString,
    /// The account's password (with [member sasl_username]). Masked in the inspector and never
    /// saved into a scene file: set it from code.
    #[var(hint = PASSWORD, usage_flags = [EDITOR])]
    sasl_password: GString,
    /// A failed login (or a server without SASL) ends the connection, with [member last_error]
    /// `login_failed`; `false` goes on unauthenticated.
    #[export]
    #[init(val = true)]
    sasl_required: bool,
    /// Any other setting of the core's connection configuration, e.g.
    /// `{"oa1": {"pacing": {"burst": 4, "refill_ms": 500}}, "rejoin_delay_ms": 1000}` (`oa1`
    /// here is the pacing the desks share; each desk's own OA1 settings are its own). Unknown
    /// keys make [method connect_to_server] fail.
    #[export]
    config_overrides: VarDictionary,
    /// Connect again when the link is lost after [method connect_to_server] (the server closed
    /// it, the socket failed, the keepalive `PING` found it dead, or it could not be made): the
    /// core's reconnect policy, [member reconnect_first_ms] doubling up to
    /// [member reconnect_max_ms], each wait plus up to half of it at random. Every desk joins
    /// again. Calls in flight when the link dies fail `disconnected` (never resent: they may
    /// have run), and calls made while it is away fail `closed` at once. [member state] reads
    /// `reconnecting` between tries. A refused login is not tried again; [method close] stops
    /// it.
    #[export]
    reconnect: bool,
    /// The first wait before connecting again (ms).
    #[export]
    #[init(val = 1000)]
    reconnect_first_ms: i64,
    /// The longest wait between tries (ms), before the random share.
    #[export]
    #[init(val = 10000)]
    reconnect_max_ms: i64,
    /// How many times the connection came back after the link was lost.
    #[var(no_set)]
    reconnects: i64,
    /// Pump from `_process`, which runs only while the node is in the scene tree. With
    /// `false`, or outside the tree, call [method poll] yourself (every frame is fine); a
    /// desk's [method DeskRpcClient.poll] pumps its connection too.
    #[export]
    #[init(val = true)]
    auto_poll: bool,
    /// Deliver the channels' chat as [signal chat_received] (off by default, so nothing new
    /// arrives unasked). It may be changed any time.
    #[var(get = get_chat_enabled, set = set_chat_enabled)]
    #[export]
    chat_enabled: bool,
    /// Deliver the channels' membership changes as [signal membership_changed] (off by
    /// default). It may be changed any time.
    #[var(get = get_membership_enabled, set = set_membership_enabled)]
    #[export]
    membership_enabled: bool,
    /// Where the connection stands: `closed` (never connected, or ended), `registering`
    /// (connecting, `NICK`/`USER` sent) or `ready` (registered: the desks join their
    /// channels; each desk's [member DeskRpcClient.state] says where it stands).
    #[var(no_set)]
    #[init(val = GString::from("closed"))]
    state: GString,
    /// The IRC session's counters, each desk's OA1 counters by channel and the chat messages
    /// dropped because nobody took them: `{"irc": {...}, "channels": {"#desk-1": {...}},
    /// "chat_dropped": 0}`.
    #[var(get = get_stats, no_set)]
    stats: PhantomVar<VarDictionary>,
    /// Why the last [method connect_to_server] failed, or the link could not be made:
    /// `invalid_config`, `cant_connect` or `login_failed`; empty after one that succeeded.
    #[var(no_set)]
    last_error: GString,
    /// What went wrong there, for people (the core's words).
    #[var(no_set)]
    last_error_message: GString,
    /// Why the last [method send_text] was refused: `unknown_channel`, `empty`,
    /// `forbidden_byte`, `reserved_prefix`, `queue_full` or `closed`; empty after one that
    /// was queued.
    #[var(no_set)]
    last_send_error: GString,
    /// What was wrong with that text, for people (the core's words).
    #[var(no_set)]
    last_send_error_message: GString,
    engine: Option<Box<MultiDesk>>,
    socket: Option<Socket>,
    /// The desks that use this connection, in the order they joined.
    desks: Vec<Member>,
    /// The server said something on this socket (else a closed socket could not connect).
    answered: bool,
    /// Where [method connect_to_server] connected.
    address: Option<(String, u16)>,
    /// When a closing connection is given up on (ms).
    closing_deadline: Option<u64>,
    /// When [method poll] last ran (ms).
    last_poll_ms: u64,
    /// With [member reconnect]: the waits between tries.
    backoff: Option<Backoff>,
    /// While reconnecting: when the next try is made (ms).
    reconnect_at: Option<u64>,
    /// [method close] was called: no reconnect.
    closing: bool,
    /// The link is a replacement: its registration counts in `reconnects`.
    replacement: bool,
    base: Base<Node>,
}

/// A desk on this connection.
struct Member {
    desk: InstanceId,
    channel: String,
    config: Config,
}

/// What a drain found, delivered after the engine is released.
enum Action {
    State(String),
    Event(ConnectionEvent),
    Desk(InstanceId, ConnectionEvent),
    Chat(ChatMessage),
    Membership(MembershipEvent),
}

/// How long a closed connection waits for the server to hang up after `QUIT`.
const CLOSE_GRACE_MS: u64 = 2_000;

#[godot_api]
impl INode for DeskConnection {
    fn process(&mut self, _delta: f64) {
        if self.auto_poll {
            self.poll();
        }
    }

    fn on_notification(&mut self, what: NodeNotification) {
        if what == NodeNotification::PREDELETE {
            self.shut_down("the DeskConnection was freed");
        }
    }
}

#[godot_api]
impl DeskConnection {
    /// [member state] changed.
    #[signal]
    fn connection_state_changed(state: GString);

    /// What the connection itself reports (not one desk's channel), in the core's JSON shape:
    /// `{"registered": {"nick"}}`, `{"nick_refused": {"nick", "numeric", "text", "next"}}`,
    /// `{"disconnected": {"reason"}}`, ... Each desk's channel events (joined, join refused,
    /// kicked, its remote coming and going) go to that desk's
    /// [signal DeskRpcClient.irc_event].
    #[signal]
    fn irc_event(event: VarDictionary);

    /// A message in one of the desks' channels that is not OA1 (with [member chat_enabled]):
    /// [param sender] is `nick!user@host` as the server wrote it, [param kind] `privmsg`,
    /// `notice` or `action` (`/me`, its text without the CTCP wrapping), [param tags] the IRCv3
    /// message tags (`account`, `time`, ...) by name.
    #[signal]
    fn chat_received(
        channel: GString,
        sender: GString,
        kind: GString,
        text: GString,
        tags: VarDictionary,
    );

    /// Who is in one of the desks' channels changed (with [member membership_enabled]):
    /// [param kind] is `names` (the whole member list, in [param details] `nicks`, after our
    /// join; [param nick] is empty), `joined` (our own join too), `parted` (`reason`),
    /// `kicked` (`by`, `reason`), `quit` (`reason`; once per channel the nick was in) or
    /// `renamed` (`new_nick`). A missing reason is `null`.
    #[signal]
    fn membership_changed(channel: GString, kind: GString, nick: GString, details: VarDictionary);

    /// Opens the connection, registers as [member nick] and joins every desk's channel.
    /// [param host] and [param port], when given, set [member server_host] and
    /// [member server_port] first. A previous connection is closed first (its desks' calls in
    /// flight fail `disconnected`). A configuration the core refuses fails with
    /// `ERR_INVALID_PARAMETER`, an address Godot refuses with `ERR_CANT_CONNECT`;
    /// [member last_error_message] says why.
    #[func]
    fn connect_to_server(
        &mut self,
        #[opt(default = "")] host: GString,
        #[opt(default = 0)] port: i32,
    ) -> Error {
        if !on_main_thread("DeskConnection.connect_to_server") {
            return Error::ERR_UNAVAILABLE;
        }
        // A refused call leaves the object as it was: the address is set once it is accepted.
        let host = if host.is_empty() {
            self.server_host.clone()
        } else {
            host
        };
        let port = if port == 0 { self.server_port } else { port };
        let config = match self.config() {
            Ok(c) => c,
            Err(e) => return self.refuse("invalid_config", &e),
        };
        let Ok(port_number) = u16::try_from(port) else {
            let message = format!("port {port} is out of range");
            return self.refuse("invalid_config", &message);
        };
        let now = ticks();
        if let Err(e) = MultiDesk::new(config, now, 0) {
            return self.refuse("invalid_config", &e.to_string());
        }
        let backoff = match self.reconnect.then(|| self.reconnect_policy()).transpose() {
            Ok(policy) => policy.map(|p| Backoff::new(p, desk_client::seed())),
            Err(e) => return self.refuse("invalid_config", &e),
        };
        self.server_host = host;
        self.server_port = port;
        let port = port_number;
        let mut actions = Vec::new();
        self.end_link(now, "reconnecting", &mut actions);
        self.deliver(actions);
        self.address = Some((self.server_host.to_string(), port));
        self.backoff = None;
        self.reconnect_at = None;
        self.replacement = false;
        self.reconnects = 0;
        let mut actions = match self.open_link(now) {
            Ok(actions) => actions,
            Err((code, message)) => return self.refuse(code, &message),
        };
        self.backoff = backoff;
        self.closing = false;
        self.last_error = GString::new();
        self.last_error_message = GString::new();
        actions.push(Action::State("registering".into()));
        self.deliver(actions);
        Error::OK
    }

    /// Ends the connection, and any [member reconnect]: `QUIT` with [param reason]; every
    /// desk's calls in flight fail `disconnected`. The desks stay on this node and join again at the next
    /// [method connect_to_server].
    #[func]
    fn close(&mut self, #[opt(default = "bye")] reason: GString) {
        if !on_main_thread("DeskConnection.close") {
            return;
        }
        let now = ticks();
        self.closing = true;
        self.reconnect_at = None;
        let Some(engine) = self.engine.as_mut() else {
            return;
        };
        engine.quit(now, &reason.to_string());
        self.closing_deadline = Some(now + CLOSE_GRACE_MS);
        self.poll();
    }

    /// Moves bytes and time through the connection and emits what came out, here and on the
    /// desks. Called from `_process` while [member auto_poll]; safe to call any time.
    #[func]
    pub fn poll(&mut self) {
        if !on_main_thread("DeskConnection.poll") {
            return;
        }
        let now = ticks();
        self.last_poll_ms = now;
        let mut actions = Vec::new();
        self.pump_socket(now);
        self.drain(now, &mut actions);
        if let Some(reason) = self.socket.as_mut().and_then(Socket::flush) {
            self.socket_closed(now, &reason);
            self.drain(now, &mut actions);
        }
        if let Some(engine) = &self.engine
            && engine.state() == ConnectionState::Closed
        {
            // After QUIT the server hangs up; give it a moment so the QUIT is read.
            let gone = self.socket.as_ref().is_none_or(|s| !s.is_open());
            if gone || self.closing_deadline.is_none_or(|d| now >= d) {
                if let Some(mut socket) = self.socket.take() {
                    socket.close_now();
                }
                self.closing_deadline = None;
            }
        }
        if let Some(engine) = &self.engine
            && engine.state() == ConnectionState::Ready
        {
            if std::mem::take(&mut self.replacement) {
                self.reconnects += 1;
            }
            if let Some(backoff) = self.backoff.as_mut() {
                backoff.reset();
            }
        }
        self.come_back(now, &mut actions);
        match (&self.engine, self.reconnect_at) {
            (_, Some(_)) => actions.push(Action::State("reconnecting".into())),
            (Some(engine), None) => actions.push(Action::State(state_name(engine.state()))),
            (None, None) => {}
        }
        self.deliver(actions);
    }

    /// Says [param text] in [param channel], one of the desks' channels (as `NOTICE`s with
    /// [param notice]): cut at spaces, or between characters, into lines that fit, and sent
    /// through the connection's pacing in turn with the desks' OA1 lines once the channel is
    /// joined. Returns `OK` when it is queued; otherwise [member last_send_error] names why:
    /// `ERR_DOES_NOT_EXIST` for a channel no desk has (`unknown_channel`),
    /// `ERR_INVALID_PARAMETER` for empty text (`empty`), text holding NUL, CR or LF
    /// (`forbidden_byte`) or text starting with `OA1 ` (`reserved_prefix`: the OA1 spec
    /// reserves it for tool frames), `ERR_BUSY` when 64 KiB already wait for that channel
    /// (`queue_full`), `ERR_UNCONFIGURED` when the connection is not open (`closed`).
    #[func]
    fn send_text(
        &mut self,
        channel: GString,
        text: GString,
        #[opt(default = false)] notice: bool,
    ) -> Error {
        if !on_main_thread("DeskConnection.send_text") {
            return Error::ERR_UNAVAILABLE;
        }
        let (channel, text) = (channel.to_string(), text.to_string());
        let result = match self.engine.as_mut() {
            Some(engine) => engine.send_text(&channel, &text, notice),
            None => Err(ChatError::Closed),
        };
        match result {
            Ok(_) => {
                self.last_send_error = GString::new();
                self.last_send_error_message = GString::new();
                Error::OK
            }
            Err(e) => {
                let (code, error) = match &e {
                    ChatError::UnknownChannel(_) => ("unknown_channel", Error::ERR_DOES_NOT_EXIST),
                    ChatError::Empty => ("empty", Error::ERR_INVALID_PARAMETER),
                    ChatError::ForbiddenByte => ("forbidden_byte", Error::ERR_INVALID_PARAMETER),
                    ChatError::ReservedPrefix(_) => {
                        ("reserved_prefix", Error::ERR_INVALID_PARAMETER)
                    }
                    ChatError::QueueFull { .. } => ("queue_full", Error::ERR_BUSY),
                    _ => ("closed", Error::ERR_UNCONFIGURED),
                };
                self.last_send_error = code.into();
                self.last_send_error_message = variant::gstring(e.to_string().as_str());
                error
            }
        }
    }

    /// The channels of the desks on this connection, in the order they joined.
    #[func]
    fn channels(&self) -> PackedStringArray {
        self.desks
            .iter()
            .map(|m| variant::gstring(m.channel.as_str()))
            .collect()
    }

    /// See [member chat_enabled].
    #[func]
    fn get_chat_enabled(&self) -> bool {
        self.chat_enabled
    }

    /// See [member membership_enabled].
    #[func]
    fn get_membership_enabled(&self) -> bool {
        self.membership_enabled
    }

    /// See [member chat_enabled].
    #[func]
    fn set_chat_enabled(&mut self, enabled: bool) {
        self.chat_enabled = enabled;
        if let Some(engine) = self.engine.as_mut() {
            engine.set_chat(enabled);
        }
    }

    /// See [member membership_enabled].
    #[func]
    fn set_membership_enabled(&mut self, enabled: bool) {
        self.membership_enabled = enabled;
        if let Some(engine) = self.engine.as_mut() {
            engine.set_membership(enabled);
        }
    }

    /// See [member stats].
    #[func]
    fn get_stats(&self) -> VarDictionary {
        let Some(engine) = &self.engine else {
            return VarDictionary::new();
        };
        let channels: serde_json::Map<String, serde_json::Value> = self
            .desks
            .iter()
            .filter_map(|m| {
                let stats = engine.channel_stats(&m.channel)?;
                Some((m.channel.clone(), serde_json::to_value(stats).ok()?))
            })
            .collect();
        let value = serde_json::json!({
            "irc": serde_json::to_value(engine.irc_stats()).unwrap_or_default(),
            "channels": channels,
            "chat_dropped": engine.chat_dropped(),
        });
        variant::dictionary_of(&value)
    }
}

/// What a desk does through its connection (called by `DeskRpcClient`).
impl DeskConnection {
    /// Adds `desk`, with its OA1 settings, in `config.channel`: joined now if the connection is
    /// open, else at [method connect_to_server]. Returns the desk's state.
    pub(crate) fn join_desk(&mut self, desk: InstanceId, config: Config) -> Result<String, String> {
        let channel = config.channel.clone();
        if let Some(other) = self
            .desks
            .iter()
            .find(|m| m.desk != desk && m.channel.eq_ignore_ascii_case(&channel))
        {
            return Err(format!(
                "another desk on this DeskConnection is in {} already",
                other.channel
            ));
        }
        self.desks.retain(|m| m.desk != desk);
        let now = ticks();
        let state = match self.engine.as_mut() {
            Some(engine) if engine.state() != ConnectionState::Closed => {
                engine
                    .add_desk_with(now, config.clone())
                    .map_err(|e| e.to_string())?;
                state_name(
                    engine
                        .channel_state(&channel)
                        .unwrap_or(ConnectionState::Closed),
                )
            }
            _ => "closed".to_owned(),
        };
        self.desks.push(Member {
            desk,
            channel,
            config,
        });
        Ok(state)
    }

    /// Takes `desk` off this connection: its channel is left.
    pub(crate) fn leave_desk(&mut self, desk: InstanceId) {
        let Some(index) = self.desks.iter().position(|m| m.desk == desk) else {
            return;
        };
        let member = self.desks.remove(index);
        if let Some(engine) = self.engine.as_mut() {
            engine.remove_desk(ticks(), &member.channel);
        }
    }

    /// Sends a request to the remote of the desk in `channel`: its id, or the code and words of
    /// why not.
    pub(crate) fn request(
        &mut self,
        channel: &str,
        payload: &str,
        timeout_ms: Option<u64>,
    ) -> Result<String, (String, String)> {
        let Some(engine) = self.engine.as_mut() else {
            let message = "not connected: the DeskConnection's connect_to_server() was not called";
            return Err(("not_connected".into(), message.into()));
        };
        engine
            .request(ticks(), channel, payload, timeout_ms)
            .map_err(|e| (e.code().to_owned(), e.to_string()))
    }

    /// Cancels request `id` of the desk in `channel` (its `CANCEL` leaves at the next poll).
    pub(crate) fn cancel(&mut self, channel: &str, id: &str, reason: &str) {
        if let Some(engine) = self.engine.as_mut() {
            let _: Result<(), LocalError> = engine.cancel(ticks(), channel, id, reason);
        }
    }

    /// The engine, for a desk's questions about its channel.
    pub(crate) fn engine(&self) -> Option<&MultiDesk> {
        self.engine.as_deref()
    }

    /// When [method poll] last ran (ms).
    pub(crate) fn last_poll_ms(&self) -> u64 {
        self.last_poll_ms
    }

    /// Whether something pumps this connection by itself.
    pub(crate) fn pumps_itself(&self) -> bool {
        self.auto_poll && self.base().is_inside_tree()
    }
}

impl DeskConnection {
    fn refuse(&mut self, code: &str, message: &str) -> Error {
        godot_error!("DeskConnection.connect_to_server: {message}");
        self.last_error = code.into();
        self.last_error_message = message.into();
        match code {
            "cant_connect" => Error::ERR_CANT_CONNECT,
            _ => Error::ERR_INVALID_PARAMETER,
        }
    }

    fn config(&self) -> Result<deskwire::oa1::ConnectionConfig, String> {
        let settings = ConnectionSettings {
            nick: self.nick.to_string(),
            channel: String::new(),
            remote_nick: String::new(),
            request_timeout_sec: 0,
            auth_secret: String::new(),
            epoch_unix_ms: 0,
            compression: true,
        };
        let mut overrides =
            variant::from_dictionary(&self.config_overrides).map_err(|e| e.to_string())?;
        desk_client::add_login(
            &mut overrides,
            &self.server_password.to_string(),
            &self.sasl_username.to_string(),
            &self.sasl_password.to_string(),
            self.sasl_required,
        );
        shapes::connection_config(&settings, overrides)
    }

    /// A new link to [member server_host]: the engine, every desk added to it, the socket.
    /// Returns the desks' states; the code and words of why not.
    fn open_link(&mut self, now: u64) -> Result<Vec<Action>, (&'static str, String)> {
        let config = self.config().map_err(|e| ("invalid_config", e))?;
        let mut engine = MultiDesk::new(config, now, desk_client::seed())
            .map_err(|e| ("invalid_config", e.to_string()))?;
        let (host, port) = self.address.clone().unwrap_or_default();
        let socket =
            Socket::connect(&host, port, self.tls_settings()).map_err(|e| ("cant_connect", e))?;
        engine.set_chat(self.chat_enabled);
        engine.set_membership(self.membership_enabled);
        let mut actions = Vec::new();
        for member in &self.desks {
            // Each was checked when it joined; a channel refused now is said on its desk.
            let event = match engine.add_desk_with(now, member.config.clone()) {
                Ok(()) => state_event(engine.channel_state(&member.channel)),
                Err(e) => {
                    godot_error!("DeskConnection: the desk in {}: {e}", member.channel);
                    state_event(Some(ConnectionState::Closed))
                }
            };
            actions.push(Action::Desk(member.desk, event));
        }
        self.engine = Some(Box::new(engine));
        self.socket = Some(socket);
        self.answered = false;
        self.closing_deadline = None;
        Ok(actions)
    }

    /// With [member reconnect]: a link that ended is replaced, once the wait is over.
    fn come_back(&mut self, now: u64, actions: &mut Vec<Action>) {
        if self.closing {
            return;
        }
        let Some(backoff) = self.backoff.as_mut() else {
            return;
        };
        let ended = self
            .engine
            .as_ref()
            .is_some_and(|e| e.state() == ConnectionState::Closed);
        if ended && self.socket.is_none() && self.reconnect_at.is_none() {
            let delay = backoff.next_delay_ms();
            godot_warn!("DeskConnection: the link was lost; connecting again in {delay} ms");
            self.reconnect_at = Some(now + delay);
        }
        if self.reconnect_at.is_some_and(|at| now >= at) {
            self.reconnect_at = None;
            match self.open_link(now) {
                Ok(mut more) => {
                    self.replacement = true;
                    actions.append(&mut more);
                }
                Err(("invalid_config", e)) => {
                    godot_error!("DeskConnection: cannot connect again: {e}");
                    self.last_error = "invalid_config".into();
                    self.last_error_message = variant::gstring(e.as_str());
                    self.backoff = None;
                }
                Err((_, e)) => {
                    let delay = self.backoff.as_mut().map_or(0, Backoff::next_delay_ms);
                    godot_warn!("DeskConnection: {e}; trying again in {delay} ms");
                    self.reconnect_at = Some(now + delay);
                }
            }
        }
    }

    /// The reconnect policy the properties say, checked by the core.
    fn reconnect_policy(&self) -> Result<ReconnectPolicy, String> {
        shapes::reconnect_policy(self.reconnect_first_ms, self.reconnect_max_ms)
    }

    fn tls_settings(&self) -> Option<TlsSettings> {
        self.use_tls.then(|| TlsSettings {
            server_name: if self.tls_server_name.is_empty() {
                self.server_host.to_string()
            } else {
                self.tls_server_name.to_string()
            },
            trusted: self.tls_trusted_certificate.clone(),
        })
    }

    fn pump_socket(&mut self, now: u64) {
        let (Some(socket), Some(engine)) = (&mut self.socket, &mut self.engine) else {
            return;
        };
        for input in socket.pump() {
            match input {
                Input::Bytes(bytes) => {
                    self.answered = true;
                    engine.handle_bytes(now, &bytes);
                }
                Input::Closed(reason) => {
                    self.socket_closed(now, &reason);
                    return;
                }
            }
        }
    }

    fn socket_closed(&mut self, now: u64, reason: &str) {
        let Some(engine) = self.engine.as_mut() else {
            return;
        };
        if engine.state() == ConnectionState::Closed {
            return;
        }
        if self.answered {
            godot_warn!("DeskConnection: {reason}");
        } else {
            let (host, port) = self.address.clone().unwrap_or_default();
            let message = format!("connect to {host}:{port} failed: {reason}");
            godot_warn!("DeskConnection: {message}");
            self.last_error = "cant_connect".into();
            self.last_error_message = variant::gstring(message.as_str());
        }
        engine.handle_eof(now);
    }

    /// Drains the engine into `actions`; transmits go to the socket here.
    fn drain(&mut self, now: u64, actions: &mut Vec<Action>) {
        loop {
            let Some(engine) = self.engine.as_mut() else {
                return;
            };
            match engine.poll_output(now) {
                MultiOutput::Transmit(bytes) => {
                    if !self.socket.as_mut().is_some_and(|s| s.send(&bytes))
                        && self.socket.is_some()
                    {
                        godot_error!(
                            "DeskConnection: more than {} bytes wait to be sent; dropping the connection",
                            socket::MAX_OUTBOUND
                        );
                        if let Some(mut s) = self.socket.take() {
                            s.close_now();
                        }
                        engine.handle_eof(now);
                    }
                }
                MultiOutput::Event {
                    channel: Some(channel),
                    event,
                } => {
                    // A removed desk's last events (its calls were settled) go nowhere.
                    if let Some(member) = self.desks.iter().find(|m| m.channel == channel) {
                        actions.push(Action::Desk(member.desk, event));
                    }
                }
                MultiOutput::Event {
                    channel: None,
                    event,
                } => {
                    if let ConnectionEvent::Irc(SessionEvent::Disconnected {
                        reason: DisconnectReason::LoginFailed { message },
                    }) = &event
                    {
                        // A refused login is the user's to fix: said, and not tried again.
                        godot_warn!("DeskConnection: {message}");
                        self.backoff = None;
                        self.last_error = "login_failed".into();
                        self.last_error_message = variant::gstring(message.as_str());
                    }
                    if !matches!(event, ConnectionEvent::Link(_)) {
                        actions.push(Action::Event(event));
                    }
                }
                MultiOutput::Chat(message) => actions.push(Action::Chat(message)),
                MultiOutput::Membership(event) => actions.push(Action::Membership(event)),
                // Only a serving connection looks for channels.
                MultiOutput::Discovery(_) => {}
                MultiOutput::Timeout(_) => break,
            }
        }
    }

    /// Emits what a drain found, here and on the desks; handlers may call back into this node
    /// and the desks.
    fn deliver(&mut self, actions: Vec<Action>) {
        let actions = shapes::without_superseded_close(actions, |action| match action {
            Action::State(state) => Some(state.as_str()),
            _ => None,
        });
        for action in actions {
            match action {
                Action::State(state) => {
                    let state = GString::from(state.as_str());
                    if state != self.state {
                        self.state = state.clone();
                        self.signals().connection_state_changed().emit(&state);
                    }
                }
                Action::Event(event) => {
                    let value = serde_json::to_value(&event).unwrap_or_default();
                    self.signals()
                        .irc_event()
                        .emit(&variant::dictionary_of(&value));
                }
                Action::Desk(desk, event) => {
                    if let Ok(mut desk) = Gd::<DeskRpcClient>::try_from_instance_id(desk) {
                        // The desk's handlers may call back into this node.
                        let _reentrant = self.base_mut();
                        desk.bind_mut().connection_event(event);
                    }
                }
                Action::Chat(message) => {
                    let kind = match message.kind {
                        ChatKind::Privmsg => "privmsg",
                        ChatKind::Notice => "notice",
                        ChatKind::Action => "action",
                    };
                    let mut tags = VarDictionary::new();
                    for (key, value) in &message.tags {
                        tags.set(key.as_str(), value.as_str());
                    }
                    self.signals().chat_received().emit(
                        &variant::gstring(message.channel.as_str()),
                        &variant::gstring(message.sender.as_str()),
                        kind,
                        &variant::gstring(message.text.as_str()),
                        &tags,
                    );
                }
                Action::Membership(event) => {
                    let (channel, kind, nick, details) = membership_parts(&event);
                    self.signals().membership_changed().emit(
                        &variant::gstring(channel.as_str()),
                        &variant::gstring(kind.as_str()),
                        &variant::gstring(nick.as_str()),
                        &variant::dictionary_of(&details),
                    );
                }
            }
        }
    }

    /// Ends the current link (a `QUIT`, the socket closed); the desks' calls in flight fail
    /// `disconnected` through `actions`.
    fn end_link(&mut self, now: u64, why: &str, actions: &mut Vec<Action>) {
        if let Some(engine) = self.engine.as_mut() {
            engine.quit(now, why);
            self.drain(now, actions);
        }
        if let Some(mut socket) = self.socket.take() {
            socket.close_now();
        }
        self.engine = None;
        self.closing_deadline = None;
        self.reconnect_at = None;
    }

    /// The node is going away: nothing is emitted on it; each desk's calls fail `closed` and
    /// the desks let go of it.
    fn shut_down(&mut self, why: &str) {
        let now = ticks();
        if let Some(engine) = self.engine.as_mut() {
            engine.quit(now, why);
            loop {
                match engine.poll_output(now) {
                    MultiOutput::Transmit(bytes) => {
                        if let Some(s) = self.socket.as_mut() {
                            s.send(&bytes);
                        }
                    }
                    MultiOutput::Timeout(_) => break,
                    _ => {}
                }
            }
        }
        if let Some(mut socket) = self.socket.take() {
            socket.close_now();
        }
        self.engine = None;
        self.backoff = None;
        self.reconnect_at = None;
        for member in std::mem::take(&mut self.desks) {
            if let Ok(mut desk) = Gd::<DeskRpcClient>::try_from_instance_id(member.desk) {
                desk.bind_mut().connection_gone(why);
            }
        }
        self.state = "closed".into();
    }
}

/// A channel's state as the event a desk takes.
fn state_event(state: Option<ConnectionState>) -> ConnectionEvent {
    ConnectionEvent::Link(deskwire::oa1::LinkEvent::StateChanged {
        state: state.unwrap_or(ConnectionState::Closed),
    })
}

/// A connection state as the core names it (`waiting_for_peer`).
fn state_name(state: ConnectionState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A membership change as [signal DeskConnection.membership_changed]'s arguments: channel,
/// kind, nick ("" for a member list) and the rest of the core's JSON.
fn membership_parts(event: &MembershipEvent) -> (String, String, String, serde_json::Value) {
    let mut value = serde_json::to_value(event).unwrap_or_default();
    let mut take = |key: &str| match value.as_object_mut().and_then(|m| m.remove(key)) {
        Some(serde_json::Value::String(s)) => s,
        _ => String::new(),
    };
    let (kind, channel, nick) = (take("kind"), take("channel"), take("nick"));
    (channel, kind, nick, value)
}
