//! `DeskRpcClient`: the OA1 desk engine (`deskwire::oa1::Desk`) as a Node.

use std::collections::HashMap;

use deskwire::oa1::remote_bash::RemoteBashArgs;
use deskwire::oa1::{
    Client, ConnectionEvent, ConnectionOutput, ConnectionState, Desk, Event, Failure, IdGenerator,
    LinkEvent, LocalError, Output, remote_bash,
};
use deskwire::tools::ToolCall;
use godot::classes::notify::NodeNotification;
use godot::classes::{INode, Node, SceneTree, SceneTreeTimer, X509Certificate};
use godot::global::Error;
use godot::obj::InstanceId;
use godot::prelude::*;
use godot::register::property::PhantomVar;
use serde_json::Value;

use crate::desk_connection::DeskConnection;
use crate::remote_call::RemoteCall;
use crate::shapes::{self, ConnectionSettings, Format};
use crate::socket::{self, Input, Socket, TlsSettings};
use crate::{on_main_thread, ticks, variant};
use deskwire::irc::{DisconnectReason, SessionEvent};
use deskwire::reconnect::{Backoff, ReconnectPolicy};

/// The desk end of OA1: sends `RemoteBash` commands as OA1 requests on an IRC channel and
/// delivers the answers.
///
/// Three ways to reach IRC:
/// - [method connect_to_server]: the client opens its own connection ([member server_host],
///   [member server_port], or the address given to the call; TLS with [member use_tls]),
///   registers as [member nick] and joins [member channel].
/// - [method attach]: the project already has an IRC connection in the channel. Pass every
///   line it receives to [method feed_line] and send every [signal line_to_send] line to the
///   channel's connection.
/// - [member connection]: a [DeskConnection] carries this desk beside others, one per channel,
///   on one IRC connection; [method connect_to_server] joins [member channel] on it.
///
/// A desk names its remote, [member remote_nick] (`rexd` by default, the nick `rexd --irc`
/// joins as), and sends nothing until that nick is in the channel: IRC keeps no history, so a
/// request sent into a channel without it would reach nobody. Requests made before wait
/// ([member state] `waiting_for_peer`, [method waiting_for] says for what) and leave when it
/// comes; their timeout starts then. One that cannot leave within 30 s fails `not_ready`.
///
/// The client pumps itself from `_process` (like `WebSocketPeer.poll()`) with
/// `Time.get_ticks_msec()`, so it must be in the scene tree: a client that is not (never
/// given to `add_child`) sends and receives nothing unless you call [method poll] yourself
/// (set [member auto_poll] to `false` then), and a call it holds fails `not_polled` once its
/// timeout has passed without a poll. Every signal is emitted on the main thread.
///
/// Every call made with [method remote_bash] (or [method RemoteBashTool.run]) ends the same
/// way, whenever it fails: [signal request_failed] with its id, a code and a message, then its
/// [signal RemoteCall.completed]. A call made before [method connect_to_server] fails
/// `not_connected` like that.
///
/// ```gdscript
/// var desk := DeskRpcClient.new()
/// desk.nick = "desk-7"               # rexd --irc --allow-from desk-7
/// desk.channel = "#desk-7"
/// desk.remote_nick = "rexd"          # the remote: rexd --irc's default nick
/// add_child(desk)                    # in the tree, so it pumps itself
/// desk.connect_to_server("irc.example", 6667)
/// var result: Dictionary = await desk.remote_bash("uname -a").completed
/// $Label.text = result.text if result.ok else "%s: %s" % [result.error, result.message]
/// ```
#[derive(GodotClass)]
#[class(init, base = Node)]
pub struct DeskRpcClient {
    /// The IRC server's host name or address ([method connect_to_server]'s `host`
    /// argument sets it).
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
    /// Our IRC nick: what the remote allows (`rexd --irc --allow-from desk`). When the
    /// server refuses it (taken, `433`: often our own previous connection, not yet gone),
    /// [signal irc_event] reports `nick_refused`, the connection registers as `desk_` and
    /// asks for `desk` back, and requests wait meanwhile ([member state]
    /// `waiting_for_nick`), since a remote that allows only `desk` would ignore `desk_`.
    #[export]
    #[init(val = GString::from("desk"))]
    nick: GString,
    /// The desk channel, with its prefix (`#desk`; `desk` is refused).
    #[export]
    #[init(val = GString::from("#desk"))]
    channel: GString,
    /// The remote: accept answers only from this nick (or `nick!user@host` mask), and send
    /// nothing until it is in the channel. The default matches `rexd --irc`; `"*"` takes
    /// answers from anyone there and waits only for someone to be there (not recommended).
    /// `""` is refused: [method connect_to_server] and [method attach] fail.
    #[export]
    #[init(val = GString::from("rexd"))]
    remote_nick: GString,
    /// How long a request may take by default, in seconds (0: the OA1 default, 30 s); a
    /// negative one makes [method connect_to_server] and [method attach] fail.
    /// [method remote_bash]'s `timeout_sec` overrides it per call.
    #[export]
    request_timeout_sec: i64,
    /// The IRC server's password (`PASS`; "": none). A secret, like [member sasl_password]
    /// and [member auth_secret]: masked in the inspector and never saved into a scene file, so
    /// set it from code (read from a file or the environment) before connecting.
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
    /// `login_failed` and the server's words in [member last_error_message], and is not
    /// tried again; `false` goes on unauthenticated ([signal irc_event] `login_failed`).
    #[export]
    #[init(val = true)]
    sasl_required: bool,
    /// The secret shared with the remote that authenticates OA1 frames ("": none): every
    /// frame then carries a timestamp and an HMAC tag, and frames without the right tag, too
    /// old (more than 60 s off this machine's clock) or replayed are dropped (counted in
    /// [member stats]). The remote needs the same secret (`rexd --irc --secret-file`).
    ///
    /// Masked in the inspector and never saved into a scene file (`.tscn` files are plain text
    /// and usually committed): set it from code before connecting, e.g.
    /// `desk.auth_secret = FileAccess.get_file_as_string("user://desk.secret").strip_edges()` or
    /// `OS.get_environment("DESKWIRE_SECRET")`. A value typed into the inspector lasts until the
    /// scene is closed.
    #[var(hint = PASSWORD, usage_flags = [EDITOR])]
    auth_secret: GString,
    /// Offer to take answers compressed (deflate; on by default), which a deskwire remote then
    /// sends in a third to a fifth of the IRC lines; other remotes answer plainly.
    #[export]
    #[init(val = true)]
    compression: bool,
    /// Any other setting of the core's connection configuration, e.g.
    /// `{"oa1": {"adaptive_payload": false}, "rejoin_delay_ms": 1000}`. Unknown keys
    /// make [method connect_to_server] and [method attach] fail.
    #[export]
    config_overrides: VarDictionary,
    /// Share this [DeskConnection] (one IRC connection for many desks) instead of opening a
    /// connection of our own: [method connect_to_server] then joins [member channel] on it,
    /// and [method close] leaves the channel. Only this desk's OA1 settings apply then
    /// ([member channel], [member remote_nick], [member request_timeout_sec],
    /// [member auth_secret], [member compression], `oa1` in [member config_overrides]); the
    /// server, nick, TLS and login are the connection's. `null` (the default): our own
    /// connection. Set it before [method connect_to_server].
    #[export]
    connection: Option<Gd<DeskConnection>>,
    /// Connect again when the link is lost after [method connect_to_server]: the server closed
    /// it, the socket failed, or the keepalive `PING` found it dead (after
    /// `{"session": {"ping_interval_ms", "ping_timeout_ms"}}` in [member config_overrides]:
    /// 60 s of silence, then 120 s without an answer). The core's reconnect policy, as on
    /// every deskwire driver: [member reconnect_first_ms], doubling up to
    /// [member reconnect_max_ms], each wait plus up to half of it at random. Requests in
    /// flight when the link dies fail `disconnected` (never resent: they may have run);
    /// requests made meanwhile wait for the next connection, at most 30 s (`not_ready`).
    /// [member state] reads `reconnecting` between tries. A first connection that fails is
    /// tried again too. [method close] stops it.
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
    /// Pump from `_process`, which runs only while the client is in the scene tree. With
    /// `false`, or outside the tree, call [method poll] yourself (every frame is fine).
    #[export]
    #[init(val = true)]
    auto_poll: bool,
    /// Where the connection stands: `closed` (never connected, or ended),
    /// `registering` (connecting, `NICK`/`USER` sent), `joining` (registered, joining
    /// [member channel]; a refused join is tried again after 5 s), `waiting_for_nick`
    /// (registered under a fallback because our nick was taken, asking for it back),
    /// `waiting_for_peer` (in the channel, waiting for [member remote_nick] to be there: see
    /// [method waiting_for]) or `ready` (requests go out). Requests made before `ready` wait and leave then.
    #[var(no_set)]
    #[init(val = GString::from("closed"))]
    state: GString,
    /// The counters of the IRC session and the OA1 endpoint (lines, frames, bytes, timeouts,
    /// ignored and malformed input), as `{"irc": {...}, "oa1": {...}}`.
    #[var(get = get_stats, no_set)]
    stats: PhantomVar<VarDictionary>,
    /// Why the last [method connect_to_server] or [method attach] failed: `invalid_config`
    /// (a bad nick, channel or [member remote_nick], or [member config_overrides]) or
    /// `cant_connect` (at once for an address Godot refuses; later, once the server could
    /// not be reached, with [member last_error_message] `connect to HOST:PORT failed: ...`);
    /// empty after one that succeeded.
    #[var(no_set)]
    last_error: GString,
    /// What went wrong in that call, for people (the core's words).
    #[var(no_set)]
    last_error_message: GString,
    engine: Engine,
    socket: Option<Socket>,
    /// Calls in flight by request id.
    calls: HashMap<String, Gd<RemoteCall>>,
    /// When a closing connection is given up on (ms).
    closing_deadline: Option<u64>,
    /// Whether the "not in the scene tree" warning was given (once per client).
    warned_outside_tree: bool,
    /// Ids for calls that fail before they leave (the engine names the others).
    #[init(val = IdGenerator::new(seed()))]
    local_ids: IdGenerator,
    /// [method connect_to_server] or [method attach] succeeded once: a call without an engine
    /// then finds it closed rather than never connected.
    started: bool,
    /// When [method poll] last ran (ms), for calls nothing pumps.
    last_poll_ms: u64,
    /// The engine's request timeout (ms): a call's wait when it gives none.
    request_timeout_ms: u64,
    /// The scene tree's timers of [method watch_pumping] still running (not held: the tree
    /// frees each once it fires).
    watch_timers: Vec<InstanceId>,
    /// Where [method connect_to_server] connected, for the next connection.
    address: Option<(String, u16)>,
    /// With [member reconnect]: the waits between tries.
    backoff: Option<Backoff>,
    /// While reconnecting: when the next try is made (ms).
    reconnect_at: Option<u64>,
    /// What the engine sent before the server said anything on this socket (registration):
    /// a socket that fails before any answer is replaced and these go into the next one, so
    /// the engine, and the requests it holds, carry on. `None` once the server answered.
    unanswered: Option<Vec<Vec<u8>>>,
    /// The engine replaced one whose link was lost: its first answer counts in `reconnects`.
    replacement: bool,
    /// Why the server could not be reached, when the connection ended before it ever answered
    /// (and no reconnect tries again): the calls the engine then fails as `disconnected` say
    /// this, not the engine's "the connection was lost".
    connect_failure: Option<String>,
    /// [method close] was called: no reconnect.
    closing: bool,
    base: Base<Node>,
}

#[derive(Default)]
enum Engine {
    #[default]
    Idle,
    /// Our own connection.
    Desk(Box<Desk>),
    /// Lines from the project's connection.
    Attached(Box<Client>),
    /// A desk on a `DeskConnection`, in this channel (as added).
    Shared(Gd<DeskConnection>, String),
}

/// What a drain found, delivered after the engine is released.
enum Action {
    Line(String),
    Event(ConnectionEvent),
    Settle(Gd<RemoteCall>, Value),
    State(String),
}

/// How long a closed connection waits for the server to hang up after `QUIT`.
const CLOSE_GRACE_MS: u64 = 2_000;

/// The Unix time (ms) at which `Time.get_ticks_msec()` was 0.
fn epoch_unix_ms() -> u64 {
    let unix_ms = godot::classes::Time::singleton().get_unix_time_from_system() * 1000.0;
    (unix_ms as u64).saturating_sub(ticks())
}

/// Request ids from the OS's entropy, so two desks started together never share one.
pub(crate) fn seed() -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        // No OS entropy (never seen): Godot's generator, seeded at start-up, still varies.
        let half = || godot::global::randi() as u64 & 0xffff_ffff;
        (half() << 32) | half()
    })
}

#[godot_api]
impl INode for DeskRpcClient {
    fn process(&mut self, _delta: f64) {
        if self.auto_poll {
            self.poll();
        }
    }

    fn on_notification(&mut self, what: NodeNotification) {
        if what == NodeNotification::PREDELETE {
            self.shut_down("the DeskRpcClient was freed");
        }
    }
}

#[godot_api]
impl DeskRpcClient {
    /// A line to send on the project's IRC connection (after [method attach]). It is a whole
    /// IRC command without the line ending, e.g. `PRIVMSG #desk :OA1 REQ ...`.
    #[signal]
    fn line_to_send(line: GString);

    /// Request [param id] was answered: [param text] is the remote's output; [param truncated]
    /// when it was cut at the size cap.
    #[signal]
    fn request_completed(id: GString, text: GString, truncated: bool);

    /// Request [param id] ended without an answer: [param error] is a code and [param message]
    /// says what happened. The remote's own code (`timeout` when the command outlived its
    /// time there, ...), or: `timeout` (no complete answer in time), `incomplete` (a chunk
    /// never came), `not_ready` (it never left: [member remote_nick] was not in the channel
    /// within 30 s; the message says what it waited for and who was there), `join_failed`
    /// (the server refused the channel, with its words), `kicked`, `peer_left` (the remote
    /// left the channel while it ran), `disconnected` (the connection ended, and why),
    /// `malformed`, `cancelled`, `closed` (the client was closed or freed). Calls that never
    /// left fail here too, after the call that made them returned: `not_connected` (made
    /// before [method connect_to_server] or [method attach]; the message gives the failed
    /// connect's reason if there was one), `invalid_arguments`, `too_large`,
    /// `too_many_in_flight`; and `not_polled` for a call nothing pumped for its whole timeout
    /// (the client is outside the scene tree, or [member auto_poll] is off and [method poll]
    /// was not called).
    #[signal]
    fn request_failed(id: GString, error: GString, message: GString);

    /// [member state] changed.
    #[signal]
    fn connection_state_changed(state: GString);

    /// Anything else the connection reports, in the core's JSON shape:
    /// `{"registered": {"nick"}}`, `{"joined": {"channel"}}`,
    /// `{"peer_joined": {"nick"}}`, `{"peer_left": {"nick"}}`,
    /// `{"join_failed": {"channel", "numeric", "text"}}` (the server refused the channel:
    /// `473` invite only, `474` banned, ...), `{"nick_refused": {"nick", "numeric", "text",
    /// "next"}}` (`433` taken: the connection goes on as `next`),
    /// `{"kicked": {"channel", "by", "reason"}}`, `{"disconnected": {"reason"}}`, ...
    #[signal]
    fn irc_event(event: VarDictionary);

    /// Opens our own connection and joins [member channel]. [param host] and [param port],
    /// when given, set [member server_host] and [member server_port] first
    /// (`connect_to_server("irc.example", 6667)`); without them the properties are used.
    /// Requests made before the channel (and [member remote_nick]) are there wait and leave
    /// then. A previous connection is closed first. A configuration the core refuses (a bad
    /// nick or channel, an empty [member remote_nick]) fails with `ERR_INVALID_PARAMETER`
    /// and a server that cannot be reached with `ERR_CANT_CONNECT`; [member last_error_message]
    /// says why. With [member connection] set, it joins [member channel] on that
    /// [DeskConnection] instead (no [param host] or [param port] then); a channel another desk
    /// of that connection has is refused with `ERR_INVALID_PARAMETER`.
    #[func]
    fn connect_to_server(
        &mut self,
        #[opt(default = "")] host: GString,
        #[opt(default = 0)] port: i32,
    ) -> Error {
        if !on_main_thread("DeskRpcClient.connect_to_server") {
            return Error::ERR_UNAVAILABLE;
        }
        if let Some(connection) = self.connection.clone() {
            if !host.is_empty() || port != 0 {
                let message =
                    "host and port are the DeskConnection's (this desk's connection is set)";
                return self.refuse("connect_to_server", "invalid_config", message);
            }
            return self.join_connection(connection);
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
            Err(e) => return self.refuse("connect_to_server", "invalid_config", &e),
        };
        let Ok(port_number) = u16::try_from(port) else {
            let message = format!("port {port} is out of range");
            return self.refuse("connect_to_server", "invalid_config", &message);
        };
        let backoff = match self.reconnect.then(|| self.reconnect_policy()).transpose() {
            Ok(policy) => policy.map(|p| Backoff::new(p, seed())),
            Err(e) => return self.refuse("connect_to_server", "invalid_config", &e),
        };
        self.server_host = host;
        self.server_port = port;
        let port = port_number;
        self.shut_down("reconnecting");
        self.warn_outside_tree("connect_to_server");
        let host = self.server_host.to_string();
        match Socket::connect(&host, port, self.tls_settings()) {
            Ok(socket) => self.socket = Some(socket),
            Err(e) => return self.refuse("connect_to_server", "cant_connect", &e.to_string()),
        }
        self.request_timeout_ms = config.oa1.request_timeout_ms;
        let desk = match Desk::new(config, ticks(), seed()) {
            Ok(desk) => desk,
            Err(e) => {
                self.socket = None;
                return self.refuse("connect_to_server", "invalid_config", &e.to_string());
            }
        };
        self.engine = Engine::Desk(Box::new(desk));
        self.started = true;
        self.address = Some((host, port));
        self.backoff = backoff;
        self.unanswered = Some(Vec::new());
        self.connect_failure = None;
        self.closing = false;
        self.reconnects = 0;
        self.last_error = GString::new();
        self.last_error_message = GString::new();
        self.deliver(vec![Action::State("registering".into())]);
        Error::OK
    }

    /// Uses the project's own IRC connection, which is already in [member channel] as
    /// [member nick]: feed it lines with [method feed_line], send [signal line_to_send].
    /// A previous connection is closed first. The client is `ready` at once: your link must
    /// not be told to send before [member remote_nick] is in the channel (a request sent
    /// earlier reaches nobody). Fails like [method connect_to_server] for a bad configuration,
    /// and while [member connection] is set.
    #[func]
    fn attach(&mut self) -> Error {
        if !on_main_thread("DeskRpcClient.attach") {
            return Error::ERR_UNAVAILABLE;
        }
        if self.connection.is_some() {
            let message = "this desk's connection is set: connect_to_server() joins it there";
            return self.refuse("attach", "invalid_config", message);
        }
        let config = match self.config() {
            Ok(c) => c,
            Err(e) => return self.refuse("attach", "invalid_config", &e),
        };
        self.shut_down("reattaching");
        self.warn_outside_tree("attach");
        self.request_timeout_ms = config.oa1.request_timeout_ms;
        self.engine = Engine::Attached(Box::new(Client::new(config.oa1, seed())));
        self.started = true;
        self.last_error = GString::new();
        self.last_error_message = GString::new();
        self.deliver(vec![Action::State("ready".into())]);
        Error::OK
    }

    /// One line the project's IRC connection received (with or without its line ending).
    /// Only after [method attach].
    #[func]
    fn feed_line(&mut self, line: GString) -> Error {
        if !on_main_thread("DeskRpcClient.feed_line") {
            return Error::ERR_UNAVAILABLE;
        }
        let Engine::Attached(client) = &mut self.engine else {
            godot_error!("DeskRpcClient.feed_line: call attach() first");
            return Error::ERR_UNCONFIGURED;
        };
        let text = line.to_string();
        client.handle_line(ticks(), text.trim_end_matches(['\r', '\n']).as_bytes());
        self.poll();
        Error::OK
    }

    /// Runs [param command] on the remote machine (the `RemoteBash` tool). [param timeout_sec]
    /// overrides [member request_timeout_sec] for this call (0: keep it); a fraction of a
    /// second is rounded up to the next whole second (`0.5` waits 1 s), and a negative or
    /// non-finite one fails the call with `invalid_arguments`. Await the returned call's
    /// [signal RemoteCall.completed]. Called from a thread other than the main one it returns
    /// `null` and prints an error: nothing is sent (the call's object could not be made there).
    #[func]
    fn remote_bash(
        &mut self,
        command: GString,
        #[opt(default = 0.0)] timeout_sec: f64,
    ) -> Option<Gd<RemoteCall>> {
        // Off the main thread godot-rust may make no object, Dictionary or Variant (it panics
        // before it would touch the engine): null is what can be returned there.
        if !on_main_thread("DeskRpcClient.remote_bash") {
            return None;
        }
        let args = shapes::remote_bash_command(&command.to_string(), timeout_sec);
        Some(self.start(args, None))
    }

    /// Cancels request [param id]: the remote is sent a `CANCEL`, and its call
    /// completes with `error: "cancelled"`.
    #[func]
    pub fn cancel(&mut self, id: GString, #[opt(default = "cancelled")] reason: GString) -> Error {
        if !on_main_thread("DeskRpcClient.cancel") {
            return Error::ERR_UNAVAILABLE;
        }
        let reason = reason.to_string();
        match self.cancel_request(&id.to_string(), &reason) {
            Some((id, mut call)) => {
                RemoteCall::settle(&mut call, shapes::local_failure(&id, "cancelled", &reason));
                Error::OK
            }
            None => Error::ERR_DOES_NOT_EXIST,
        }
    }

    /// Ends the connection: `QUIT` with [param reason] on our own connection; calls
    /// in flight fail with `disconnected` (attached, or on a [member connection]: `cancelled`,
    /// and a `CANCEL` is sent for each; on a connection the desk then leaves its channel, and
    /// a `CANCEL` the shared pacing has not let out yet is dropped with it).
    #[func]
    fn close(&mut self, #[opt(default = "bye")] reason: GString) {
        if !on_main_thread("DeskRpcClient.close") {
            return;
        }
        let now = ticks();
        let reason = reason.to_string();
        self.closing = true;
        self.reconnect_at = None;
        match &mut self.engine {
            Engine::Desk(desk) => {
                desk.quit(now, &reason);
                self.closing_deadline = Some(now + CLOSE_GRACE_MS);
            }
            Engine::Attached(_) | Engine::Shared(..) => {
                let mut ids: Vec<String> = self.calls.keys().cloned().collect();
                ids.sort();
                for id in ids {
                    self.cancel(id.as_str().into(), reason.as_str().into());
                }
            }
            Engine::Idle => return,
        }
        self.poll();
        if let Engine::Shared(connection, _) = &self.engine {
            // The CANCELs the shared pacing let out just now have left; any still queued go
            // with the desk, whose PART the remote sees instead.
            let mut connection = connection.clone();
            let desk = self.base().instance_id();
            connection.bind_mut().leave_desk(desk);
        }
        if let Engine::Attached(_) | Engine::Shared(..) = self.engine {
            self.engine = Engine::Idle;
            self.deliver(vec![Action::State("closed".into())]);
        }
    }

    /// Moves bytes and time through the engine and emits what came out. Called from
    /// `_process` while [member auto_poll]; safe to call any time. On a [member connection],
    /// it polls that connection (which emits for every desk on it).
    #[func]
    pub fn poll(&mut self) {
        if !on_main_thread("DeskRpcClient.poll") {
            return;
        }
        let now = ticks();
        self.last_poll_ms = now;
        if let Engine::Shared(connection, _) = &self.engine {
            // The connection pumps every desk on it, this one too.
            let mut connection = connection.clone();
            let _reentrant = self.base_mut();
            connection.bind_mut().poll();
            return;
        }
        let mut actions = Vec::new();
        self.pump_socket(now);
        self.drain(now, &mut actions);
        // Write what the drain queued now rather than a frame later.
        if let Some(reason) = self.socket.as_mut().and_then(Socket::flush) {
            self.socket_closed(now, &reason);
            self.drain(now, &mut actions);
        }
        if let Engine::Desk(desk) = &self.engine
            && desk.state() == ConnectionState::Closed
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
        self.come_back(now, &mut actions);
        self.deliver(actions);
    }

    /// See [member stats].
    #[func]
    fn get_stats(&self) -> VarDictionary {
        let value = match &self.engine {
            Engine::Desk(desk) => serde_json::to_value(desk.stats()),
            Engine::Attached(client) => {
                serde_json::to_value(client.stats()).map(|oa1| serde_json::json!({ "oa1": oa1 }))
            }
            Engine::Shared(connection, channel) => {
                let connection = connection.bind();
                let engine = connection.engine();
                let oa1 = engine.and_then(|e| e.channel_stats(channel));
                let irc = engine.map(|e| e.irc_stats());
                Ok(serde_json::json!({
                    "irc": serde_json::to_value(irc).unwrap_or_default(),
                    "oa1": serde_json::to_value(oa1).unwrap_or_default(),
                }))
            }
            Engine::Idle => Ok(serde_json::json!({})),
        };
        variant::dictionary_of(&value.unwrap_or_default())
    }

    /// Requests sent and not answered yet.
    #[func]
    fn in_flight(&self) -> i64 {
        self.calls.len() as i64
    }

    /// What requests wait for before they can leave, in the core's words, e.g.
    /// ``remote `rexd` in #desk; members: deskbot`` or
    /// `joining #desk (refused: 473 Cannot join channel (+i))`; empty when [member state] is
    /// `ready` or `closed`, and after [method attach]. A game shows it while it waits.
    #[func]
    fn waiting_for(&self) -> GString {
        match &self.engine {
            Engine::Desk(desk) => variant::gstring(desk.waiting_for().unwrap_or_default().as_str()),
            Engine::Shared(connection, channel) => connection
                .bind()
                .engine()
                .and_then(|e| e.waiting_for(channel))
                .unwrap_or_default()
                .as_str()
                .into(),
            Engine::Attached(_) | Engine::Idle => GString::new(),
        }
    }

    /// The other members of [member channel] as the server wrote their nicks (own
    /// connection only; empty before the channel is joined).
    #[func]
    fn members(&self) -> PackedStringArray {
        match &self.engine {
            Engine::Desk(desk) => desk
                .members()
                .iter()
                .map(|n| variant::gstring(n.as_str()))
                .collect(),
            Engine::Shared(connection, channel) => connection
                .bind()
                .engine()
                .and_then(|e| e.members(channel))
                .unwrap_or_default()
                .iter()
                .map(|n| variant::gstring(n.as_str()))
                .collect(),
            Engine::Attached(_) | Engine::Idle => PackedStringArray::new(),
        }
    }
}

impl DeskRpcClient {
    /// A refused `connect_to_server` or `attach`: reported, and kept for GDScript to read.
    fn refuse(&mut self, call: &str, code: &str, message: &str) -> Error {
        godot_error!("DeskRpcClient.{call}: {message}");
        self.last_error = code.into();
        self.last_error_message = message.into();
        match code {
            "cant_connect" => Error::ERR_CANT_CONNECT,
            _ => Error::ERR_INVALID_PARAMETER,
        }
    }

    /// `_process` pumps only a node in the tree; without it nothing moves and calls never
    /// complete, which looks like a hang. Said once per client.
    fn warn_outside_tree(&mut self, call: &str) {
        if let Engine::Shared(connection, _) = &self.engine
            && connection.bind().pumps_itself()
        {
            return;
        }
        if self.auto_poll && !self.base().is_inside_tree() && !self.warned_outside_tree {
            self.warned_outside_tree = true;
            godot_warn!(
                "DeskRpcClient.{call}: this client is not in the scene tree, so _process never \
                 pumps it and nothing is sent or received: add it with add_child(), or set \
                 auto_poll = false and call poll() yourself"
            );
        }
    }

    fn config(&self) -> Result<deskwire::oa1::ConnectionConfig, String> {
        let settings = ConnectionSettings {
            nick: self.nick.to_string(),
            channel: self.channel.to_string(),
            remote_nick: self.remote_nick.to_string(),
            request_timeout_sec: u64::try_from(self.request_timeout_sec).map_err(|_| {
                format!(
                    "request_timeout_sec must not be negative, not {} (0: the OA1 default, 30 s)",
                    self.request_timeout_sec
                )
            })?,
            auth_secret: self.auth_secret.to_string(),
            epoch_unix_ms: epoch_unix_ms(),
            compression: self.compression,
        };
        let mut overrides =
            variant::from_dictionary(&self.config_overrides).map_err(|e| e.to_string())?;
        add_login(
            &mut overrides,
            &self.server_password.to_string(),
            &self.sasl_username.to_string(),
            &self.sasl_password.to_string(),
            self.sasl_required,
        );
        shapes::desk_config(&settings, overrides)
    }

    /// Joins [member channel] on `connection` ([member connection]).
    fn join_connection(&mut self, mut connection: Gd<DeskConnection>) -> Error {
        let config = match self.config() {
            Ok(c) => c,
            Err(e) => return self.refuse("connect_to_server", "invalid_config", &e),
        };
        self.shut_down("reconnecting");
        self.request_timeout_ms = config.oa1.request_timeout_ms;
        let channel = config.oa1.channel.clone();
        let desk = self.base().instance_id();
        let joined = connection.bind_mut().join_desk(desk, config.oa1);
        match joined {
            Ok(state) => {
                self.engine = Engine::Shared(connection, channel);
                self.warn_outside_tree("connect_to_server");
                self.started = true;
                self.last_error = GString::new();
                self.last_error_message = GString::new();
                self.deliver(vec![Action::State(state)]);
                Error::OK
            }
            Err(e) => self.refuse("connect_to_server", "invalid_config", &e),
        }
    }

    /// Cancels request `id` in the engine (an id it no longer knows has just finished).
    fn engine_cancel(&mut self, now: u64, id: &str, reason: &str) {
        let _ = match &mut self.engine {
            Engine::Desk(desk) => desk.cancel(now, id, reason),
            Engine::Attached(client) => client.cancel(now, id, reason),
            Engine::Shared(connection, channel) => {
                let mut connection = connection.clone();
                connection.bind_mut().cancel(channel, id, reason);
                Ok(())
            }
            Engine::Idle => Ok(()),
        };
    }

    /// An event of this desk's channel on its [member connection].
    pub(crate) fn connection_event(&mut self, event: ConnectionEvent) {
        let mut actions = Vec::new();
        self.event(event, &mut actions);
        self.deliver(actions);
    }

    /// Its [member connection] is being freed: calls in flight fail `closed` (signals
    /// deferred, since the connection's own handlers may be running), and the desk lets go.
    pub(crate) fn connection_gone(&mut self, why: &str) {
        let mut calls: Vec<(String, Gd<RemoteCall>)> = self.calls.drain().collect();
        calls.sort_by(|a, b| a.0.cmp(&b.0));
        for (id, mut call) in calls {
            let (gid, message) = (variant::gstring(id.as_str()), variant::gstring(why));
            self.later(move |this| {
                this.signals()
                    .request_failed()
                    .emit(&gid, "closed", &message);
            });
            RemoteCall::settle(&mut call, shapes::local_failure(&id, "closed", why));
        }
        self.engine = Engine::Idle;
        self.connection = None;
        if self.state != "closed" {
            self.state = "closed".into();
            self.later(|this| {
                this.signals().connection_state_changed().emit("closed");
            });
        }
    }

    /// Runs `f` on this desk at the end of the frame, if the desk still exists then (a desk
    /// whose connection goes away is often freed with it).
    fn later(&self, f: impl FnOnce(Gd<Self>) + 'static) {
        let desk = self.base().instance_id();
        let mut f = Some(f);
        Callable::from_fn("DeskRpcClient.later", move |_| {
            if let (Some(f), Ok(this)) = (f.take(), Gd::<Self>::try_from_instance_id(desk)) {
                f(this);
            }
        })
        .call_deferred(&[]);
    }

    /// Sends a `RemoteBash` call (its arguments as the core checked them, or why they were
    /// refused; `tool`: the model's call it answers); the returned object completes later
    /// either way.
    pub(crate) fn start(
        &mut self,
        args: Result<RemoteBashArgs, String>,
        tool: Option<(ToolCall, Format)>,
    ) -> Gd<RemoteCall> {
        let args = match args {
            Ok(args) => args,
            Err(message) => return self.fail_at_once(tool, "invalid_arguments", &message),
        };
        if let Engine::Idle = self.engine {
            let (code, message) = self.why_idle();
            return self.fail_at_once(tool, code, &message);
        }
        self.warn_outside_tree("remote_bash");
        let started = match &mut self.engine {
            Engine::Desk(desk) => {
                remote_bash::start(desk.as_mut(), ticks(), &args).map_err(|e| local_error(&e))
            }
            Engine::Attached(client) => {
                remote_bash::start(client.as_mut(), ticks(), &args).map_err(|e| local_error(&e))
            }
            Engine::Shared(connection, channel) => {
                let mut connection = connection.clone();
                let channel = channel.clone();
                connection
                    .bind_mut()
                    .request(&channel, &args.command, args.timeout_ms())
            }
            Engine::Idle => return self.fail_at_once(tool, LocalError::Closed.code(), "closed"),
        };
        match started {
            Ok(id) => {
                let call = RemoteCall::create(&id, Some(self.base().instance_id()), tool);
                self.calls.insert(id.clone(), call.clone());
                let wait_ms = args
                    .timeout_sec
                    .map_or(self.request_timeout_ms, |s| s.saturating_mul(1000));
                self.watch_pumping(id, wait_ms);
                call
            }
            Err((code, message)) => {
                // A connection that ended on its own (it never connected, TLS or the login
                // failed): the call says why, not only that it ended.
                let message = match code == LocalError::Closed.code()
                    && !self.last_error_message.is_empty()
                {
                    true => format!("{message}: {}", self.last_error_message),
                    false => message,
                };
                self.fail_at_once(tool, &code, &message)
            }
        }
    }

    /// A call that never left: it gets an id of its own, and fails as every call does, through
    /// [signal request_failed] and its `completed`, both later than this returns.
    pub(crate) fn fail_at_once(
        &mut self,
        tool: Option<(ToolCall, Format)>,
        code: &str,
        message: &str,
    ) -> Gd<RemoteCall> {
        let id = self.local_ids.next_id();
        let mut call = RemoteCall::create(&id, None, tool);
        let (code, message) = (variant::gstring(code), variant::gstring(message));
        let outcome = shapes::local_failure(&id, &code.to_string(), &message.to_string());
        let id = variant::gstring(id.as_str());
        self.run_deferred_gd(move |this: Gd<Self>| {
            this.signals().request_failed().emit(&id, &code, &message);
        });
        RemoteCall::settle(&mut call, outcome);
        call
    }

    /// Why a call finds no engine: never connected (or the connect failed), or closed.
    fn why_idle(&self) -> (&'static str, String) {
        if self.started {
            let message = "the connection was closed: call connect_to_server() or attach() again";
            (LocalError::Closed.code(), message.into())
        } else if self.last_error.is_empty() {
            let message = "not connected: call connect_to_server() or attach() first";
            ("not_connected", message.into())
        } else {
            let message = format!(
                "not connected: connect_to_server() failed ({}: {})",
                self.last_error, self.last_error_message
            );
            ("not_connected", message)
        }
    }

    /// Bounds the wait of call `id` when nothing pumps this client (outside the scene tree,
    /// `auto_poll` off and no `poll()`, `_process` disabled): once `wait_ms` pass without a
    /// poll it fails `not_polled`. While polls come the engine's own timeouts apply, and this
    /// only looks again every `wait_ms`. The timer is the scene tree's (paused with it).
    fn watch_pumping(&mut self, id: String, wait_ms: u64) {
        let Some(mut tree) = godot::classes::Engine::singleton()
            .get_main_loop()
            .and_then(|l| l.try_cast::<SceneTree>().ok())
        else {
            return;
        };
        let Some(timer) = tree
            .create_timer_ex(wait_ms as f64 / 1000.0)
            .process_always(false)
            .ignore_time_scale(true)
            .done()
        else {
            return;
        };
        let client = self.base().instance_id();
        let timer_id = timer.instance_id();
        // Linked to the client: Godot drops the callable when the client is freed.
        let check = Callable::from_linked_fn("DeskRpcClient.watch_pumping", &self.to_gd(), {
            move |_| {
                if let Ok(mut client) = Gd::<DeskRpcClient>::try_from_instance_id(client) {
                    let mut client = client.bind_mut();
                    client.watch_timers.retain(|t| *t != timer_id);
                    client.check_pumped(&id, wait_ms);
                }
            }
        });
        timer.upcast::<Object>().connect("timeout", &check);
        self.watch_timers.push(timer_id);
    }

    fn check_pumped(&mut self, id: &str, wait_ms: u64) {
        if !self.calls.contains_key(id) {
            return;
        }
        let now = ticks();
        let last_poll_ms = match &self.engine {
            Engine::Shared(connection, _) => {
                self.last_poll_ms.max(connection.bind().last_poll_ms())
            }
            _ => self.last_poll_ms,
        };
        if now.saturating_sub(last_poll_ms) < wait_ms {
            self.watch_pumping(id.to_owned(), wait_ms);
            return;
        }
        let seconds = wait_ms as f64 / 1000.0;
        let message = if !self.auto_poll {
            format!(
                "poll() was not called for {seconds} s (auto_poll is false), so nothing was sent or received"
            )
        } else if !self.base().is_inside_tree() {
            format!(
                "this DeskRpcClient is not in the scene tree, so _process never pumped it for {seconds} s and nothing was sent or received: add it with add_child(), or set auto_poll = false and call poll()"
            )
        } else {
            format!(
                "_process did not run for {seconds} s (process_mode disabled?), so nothing was sent or received"
            )
        };
        let Some(mut call) = self.calls.remove(id) else {
            return;
        };
        // The CANCEL leaves if the client is ever pumped again.
        self.engine_cancel(now, id, &message);
        godot_warn!("DeskRpcClient: request {id} failed: {message}");
        self.signals().request_failed().emit(
            &variant::gstring(id),
            "not_polled",
            &variant::gstring(message.as_str()),
        );
        RemoteCall::settle(&mut call, shapes::local_failure(id, "not_polled", &message));
    }

    /// Forgets request `id` and sends its `CANCEL`; [signal request_failed] follows once this
    /// returns (deferred, as for every call that fails by the caller's hand, so a handler never
    /// runs inside the caller's `cancel`), before the call's `completed`, which the caller
    /// settles.
    pub(crate) fn cancel_request(
        &mut self,
        id: &str,
        reason: &str,
    ) -> Option<(String, Gd<RemoteCall>)> {
        let call = self.calls.remove(id)?;
        let now = ticks();
        // An id the engine no longer knows has just finished; its answer is dropped now.
        self.engine_cancel(now, id, reason);
        let (gid, message) = (variant::gstring(id), variant::gstring(reason));
        self.later(move |this| {
            this.signals()
                .request_failed()
                .emit(&gid, "cancelled", &message);
        });
        Some((id.to_owned(), call))
    }

    fn pump_socket(&mut self, now: u64) {
        let (Some(socket), Engine::Desk(desk)) = (&mut self.socket, &mut self.engine) else {
            return;
        };
        for input in socket.pump() {
            match input {
                Input::Bytes(bytes) => {
                    if self.unanswered.take().is_some() && std::mem::take(&mut self.replacement) {
                        self.reconnects += 1;
                    }
                    desk.handle_bytes(now, &bytes);
                }
                Input::Closed(reason) => {
                    self.socket_closed(now, &reason);
                    return;
                }
            }
        }
    }

    fn socket_closed(&mut self, now: u64, reason: &str) {
        let Engine::Desk(desk) = &mut self.engine else {
            return;
        };
        if desk.state() == ConnectionState::Closed {
            return;
        }
        if self.unanswered.is_some() {
            // The server never answered on this socket: it could not be reached.
            let (host, port) = self.address.clone().unwrap_or_default();
            let message = format!("connect to {host}:{port} failed: {reason}");
            self.last_error = "cant_connect".into();
            self.last_error_message = variant::gstring(message.as_str());
            if let Some(backoff) = self.backoff.as_mut().filter(|_| !self.closing) {
                // The engine, and the requests it holds, wait for the next socket.
                let delay = backoff.next_delay_ms();
                godot_warn!("DeskRpcClient: {message}; trying again in {delay} ms");
                self.socket = None;
                self.reconnect_at = Some(now + delay);
                return;
            }
            godot_warn!("DeskRpcClient: {message}");
            self.connect_failure = Some(message);
        } else {
            godot_warn!("DeskRpcClient: {reason}");
        }
        desk.handle_eof(now);
    }

    /// With [member reconnect]: a link that ended (the engine closed, its socket gone) is
    /// replaced by a new engine, which holds requests until its socket, made once the wait is
    /// over, is ready.
    fn come_back(&mut self, now: u64, actions: &mut Vec<Action>) {
        let Engine::Desk(desk) = &self.engine else {
            return;
        };
        if self.closing || self.backoff.is_none() {
            return;
        }
        if desk.state() == ConnectionState::Closed && self.socket.is_none() {
            let desk = match self
                .config()
                .and_then(|c| Desk::new(c, now, seed()).map_err(|e| e.to_string()))
            {
                Ok(desk) => desk,
                Err(e) => {
                    godot_error!("DeskRpcClient: cannot connect again: {e}");
                    self.backoff = None;
                    return;
                }
            };
            let delay = self.backoff.as_mut().map_or(0, Backoff::next_delay_ms);
            godot_warn!("DeskRpcClient: the link was lost; connecting again in {delay} ms");
            self.engine = Engine::Desk(Box::new(desk));
            self.unanswered = Some(Vec::new());
            self.replacement = true;
            self.reconnect_at = Some(now + delay);
            // Its registration lines wait in `unanswered` for the socket.
            self.drain(now, actions);
        }
        if let Some(at) = self.reconnect_at
            && now >= at
        {
            self.reconnect_at = None;
            let (host, port) = self.address.clone().unwrap_or_default();
            match Socket::connect(&host, port, self.tls_settings()) {
                Ok(mut socket) => {
                    for line in self.unanswered.iter().flatten() {
                        socket.send(line);
                    }
                    self.socket = Some(socket);
                }
                Err(e) => {
                    let delay = self.backoff.as_mut().map_or(0, Backoff::next_delay_ms);
                    godot_warn!("DeskRpcClient: {e}; trying again in {delay} ms");
                    self.reconnect_at = Some(now + delay);
                }
            }
        }
        if let Engine::Desk(desk) = &self.engine {
            let state = match self.reconnect_at {
                Some(_) => "reconnecting".to_owned(),
                None => state_name(desk.state()),
            };
            actions.push(Action::State(state));
        }
    }

    /// The reconnect policy the properties say, checked by the core.
    fn reconnect_policy(&self) -> Result<ReconnectPolicy, String> {
        shapes::reconnect_policy(self.reconnect_first_ms, self.reconnect_max_ms)
    }

    /// TLS as the properties say ([member use_tls]).
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

    /// Drains the engine into `actions`; transmits go to the socket here.
    fn drain(&mut self, now: u64, actions: &mut Vec<Action>) {
        loop {
            match &mut self.engine {
                // The connection drains its engine and hands this desk its events.
                Engine::Idle | Engine::Shared(..) => return,
                Engine::Desk(desk) => match desk.poll_output(now) {
                    ConnectionOutput::Transmit(bytes) => {
                        let queued = match self.unanswered.as_mut() {
                            // Kept for a socket that fails before the server answers.
                            Some(lines)
                                if lines.iter().map(Vec::len).sum::<usize>() + bytes.len()
                                    <= socket::MAX_OUTBOUND =>
                            {
                                lines.push(bytes.clone());
                                self.socket.as_mut().is_none_or(|s| s.send(&bytes))
                            }
                            _ => self.socket.as_mut().is_some_and(|s| s.send(&bytes)),
                        };
                        if !queued {
                            godot_error!(
                                "DeskRpcClient: more than {} bytes wait to be sent; dropping the connection",
                                socket::MAX_OUTBOUND
                            );
                            if let Some(mut s) = self.socket.take() {
                                s.close_now();
                            }
                            desk.handle_eof(now);
                        }
                    }
                    ConnectionOutput::Event(event) => self.event(event, actions),
                    ConnectionOutput::Timeout(_) => return,
                },
                Engine::Attached(client) => match client.poll_output(now) {
                    Output::Transmit(line) => actions.push(Action::Line(line)),
                    Output::Event(event) => self.event(ConnectionEvent::Oa1(event), actions),
                    Output::Timeout(_) => return,
                },
            }
        }
    }

    fn event(&mut self, event: ConnectionEvent, actions: &mut Vec<Action>) {
        let event = match (event, &self.connect_failure) {
            (
                ConnectionEvent::Oa1(Event::Failed {
                    id,
                    failure: Failure::Disconnected { .. },
                }),
                Some(why),
            ) => ConnectionEvent::Oa1(Event::Failed {
                id,
                failure: Failure::Disconnected {
                    message: why.clone(),
                },
            }),
            (event, _) => event,
        };
        match &event {
            ConnectionEvent::Oa1(e @ (Event::Response { .. } | Event::Failed { .. })) => {
                if let Some((id, result)) = shapes::call_result(e)
                    && let Some(call) = self.calls.remove(&id)
                {
                    actions.push(Action::Settle(call, result));
                }
                actions.push(Action::Event(event));
            }
            ConnectionEvent::Irc(SessionEvent::Disconnected {
                reason: DisconnectReason::LoginFailed { message },
            }) => {
                // A refused login is the user's to fix: said, and not tried again.
                godot_warn!("DeskRpcClient: {message}");
                self.last_error = "login_failed".into();
                self.last_error_message = variant::gstring(message.as_str());
                self.backoff = None;
                actions.push(Action::Event(event));
            }
            ConnectionEvent::Link(LinkEvent::StateChanged { state }) => {
                if *state == ConnectionState::Ready
                    && let Some(backoff) = self.backoff.as_mut()
                {
                    backoff.reset();
                }
                actions.push(Action::State(state_name(*state)));
            }
            _ => actions.push(Action::Event(event)),
        }
    }

    /// Emits what a drain found; handlers may call back into this client.
    fn deliver(&mut self, actions: Vec<Action>) {
        let actions = shapes::without_superseded_close(actions, |action| match action {
            Action::State(state) => Some(state.as_str()),
            _ => None,
        });
        for action in actions {
            match action {
                Action::Line(line) => {
                    self.signals()
                        .line_to_send()
                        .emit(&GString::from(line.as_str()));
                }
                Action::Settle(mut call, result) => RemoteCall::settle(&mut call, result),
                Action::State(state) => {
                    let state = GString::from(state.as_str());
                    if state != self.state {
                        self.state = state.clone();
                        self.signals().connection_state_changed().emit(&state);
                    }
                }
                Action::Event(ConnectionEvent::Oa1(Event::Response {
                    id,
                    text,
                    truncated,
                })) => {
                    self.signals().request_completed().emit(
                        &variant::gstring(id.as_str()),
                        &variant::gstring(text.as_str()),
                        truncated,
                    );
                }
                Action::Event(ConnectionEvent::Oa1(Event::Failed { id, failure })) => {
                    self.signals().request_failed().emit(
                        &variant::gstring(id.as_str()),
                        &variant::gstring(failure.code()),
                        &variant::gstring(failure.message().as_str()),
                    );
                }
                Action::Event(other) => {
                    let value = serde_json::to_value(&other).unwrap_or_default();
                    self.signals()
                        .irc_event()
                        .emit(&variant::dictionary_of(&value));
                }
            }
        }
    }

    /// Ends everything without emitting on this object (it may be going away): calls in flight
    /// complete with `closed`, the remote is sent `CANCEL`s and `QUIT`, the socket is closed.
    fn shut_down(&mut self, why: &str) {
        let now = ticks();
        let mut calls: Vec<(String, Gd<RemoteCall>)> = self.calls.drain().collect();
        calls.sort_by(|a, b| a.0.cmp(&b.0));
        for (id, mut call) in calls {
            self.engine_cancel(now, &id, why);
            RemoteCall::settle(&mut call, shapes::local_failure(&id, "closed", why));
        }
        if let Engine::Shared(connection, _) = &mut self.engine {
            let mut connection = connection.clone();
            let desk = self.base().instance_id();
            connection.bind_mut().leave_desk(desk);
        }
        if let Engine::Desk(desk) = &mut self.engine {
            // The CANCELs leave before QUIT: ending the connection drops what is still queued.
            loop {
                match desk.poll_output(now) {
                    ConnectionOutput::Transmit(bytes) => {
                        if let Some(s) = self.socket.as_mut() {
                            s.send(&bytes);
                        }
                    }
                    ConnectionOutput::Event(_) => {}
                    _ => break,
                }
            }
            desk.quit(now, why);
            loop {
                match desk.poll_output(now) {
                    ConnectionOutput::Transmit(bytes) => {
                        if let Some(s) = self.socket.as_mut() {
                            s.send(&bytes);
                        }
                    }
                    ConnectionOutput::Event(_) => {}
                    _ => break,
                }
            }
        }
        if let Some(mut socket) = self.socket.take() {
            socket.close_now();
        }
        self.engine = Engine::Idle;
        // Their calls are settled: the timers end at the next frame instead of lingering.
        for timer in self.watch_timers.drain(..) {
            if let Ok(mut timer) = Gd::<SceneTreeTimer>::try_from_instance_id(timer) {
                timer.set_time_left(0.0);
            }
        }
        self.closing_deadline = None;
        self.reconnect_at = None;
        self.unanswered = None;
        self.backoff = None;
        self.replacement = false;
        self.state = "closed".into();
    }
}

/// A local error as a call's code and message.
fn local_error(e: &LocalError) -> (String, String) {
    (e.code().to_owned(), e.to_string())
}

/// Adds the login properties to `overrides`' session config; its own keys win.
pub(crate) fn add_login(
    overrides: &mut serde_json::Map<String, Value>,
    server_password: &str,
    sasl_username: &str,
    sasl_password: &str,
    sasl_required: bool,
) {
    let mut session = serde_json::Map::new();
    if !server_password.is_empty() {
        session.insert("password".into(), server_password.into());
    }
    if !sasl_username.is_empty() {
        session.insert(
            "sasl".into(),
            serde_json::json!({
                "mechanism": "PLAIN",
                "username": sasl_username,
                "password": sasl_password,
                "required": sasl_required,
            }),
        );
    }
    match overrides.get_mut("session") {
        Some(Value::Object(own)) => {
            for (key, value) in session {
                own.entry(key).or_insert(value);
            }
        }
        _ if !session.is_empty() => {
            overrides.insert("session".into(), session.into());
        }
        _ => {}
    }
}

/// A connection state as the core names it (`waiting_for_peer`).
fn state_name(state: ConnectionState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
