//! The mobile client and server engines wired back to back with a virtual clock: the spec's
//! connection lifecycle, pairing and its attempt limit, token refusal, the reconnect schedule,
//! keep-alive and permission prompts. No sockets, no sleeps: the harness plays both hosts.

use deskwire::mobile::client::{self, ConnectionState, DisconnectReason};
use deskwire::mobile::server::{
    self, Admission, AuthMethod, CloseReason, NewPermission, PairingFailure,
};
use deskwire::mobile::{
    AgentState, ChatMessage, Client, ClientMessage, Command, CommandAction, ConnId, RunningData,
    Server, ServerMessage, StopReason, StoppedData, TaskUpdate,
};

/// Both hosts and the wire between them.
struct Pair {
    client: Client,
    server: Server,
    now: u64,
    /// The open connection, if any.
    conn: Option<ConnId>,
    next_conn: u64,
    /// The server refuses connections (down, unreachable).
    server_down: bool,
    /// Frames from the client are lost (a half-dead link).
    drop_client_frames: bool,
    client_events: Vec<(u64, client::Event)>,
    server_events: Vec<(u64, server::Event)>,
    /// Every frame: (time, "c>s" or "s>c", text).
    wire: Vec<(u64, &'static str, String)>,
    /// The times of `Connect` instructions.
    connects: Vec<u64>,
}

impl Pair {
    fn new(client: Client, server: Server) -> Self {
        Pair {
            client,
            server,
            now: 0,
            conn: None,
            next_conn: 1,
            server_down: false,
            drop_client_frames: false,
            client_events: Vec::new(),
            server_events: Vec::new(),
            wire: Vec::new(),
            connects: Vec::new(),
        }
    }

    fn with_token(token: &str) -> Self {
        let mut server = Server::new(server::Config::default(), [7; 32]);
        server.add_token(token).unwrap();
        Pair::new(
            Client::new(client::Config::default(), Some(token.to_owned())),
            server,
        )
    }

    /// Runs both engines until neither has anything but a deadline; returns the earliest.
    fn drive(&mut self) -> u64 {
        loop {
            let mut busy = false;
            let client_deadline = loop {
                match self.client.poll_output(self.now) {
                    client::Output::Timeout(t) => break t,
                    output => {
                        busy = true;
                        self.client_output(output);
                    }
                }
            };
            let server_deadline = loop {
                match self.server.poll_output(self.now) {
                    server::Output::Timeout(t) => break t,
                    output => {
                        busy = true;
                        self.server_output(output);
                    }
                }
            };
            if !busy {
                return client_deadline.min(server_deadline);
            }
        }
    }

    fn client_output(&mut self, output: client::Output) {
        let now = self.now;
        match output {
            client::Output::Connect { bearer } => {
                self.connects.push(now);
                if self.server_down {
                    self.client
                        .disconnected(now, DisconnectReason::Failed("refused".into()));
                    return;
                }
                let conn = ConnId(self.next_conn);
                self.next_conn += 1;
                match self.server.open(now, conn, bearer.as_deref()).unwrap() {
                    Admission::Authenticated | Admission::AwaitingPairing => {
                        self.conn = Some(conn);
                        self.client.connected(now).unwrap();
                    }
                    Admission::Refused(server::Refusal::BadToken) => self
                        .client
                        .disconnected(now, DisconnectReason::Unauthorized),
                    Admission::Refused(other) => self
                        .client
                        .disconnected(now, DisconnectReason::Failed(format!("{other:?}"))),
                    other => panic!("{other:?}"),
                }
            }
            client::Output::Transmit(text) => {
                self.wire.push((now, "c>s", text.clone()));
                if let Some(conn) = self.conn
                    && !self.drop_client_frames
                {
                    self.server.handle_text(now, conn, &text);
                }
            }
            client::Output::Close => {
                if let Some(conn) = self.conn.take() {
                    self.server.closed(now, conn);
                }
            }
            client::Output::Event(e) => self.client_events.push((now, e)),
            client::Output::Timeout(_) => unreachable!(),
        }
    }

    fn server_output(&mut self, output: server::Output) {
        let now = self.now;
        match output {
            server::Output::Transmit { conn, text } => {
                if self.conn == Some(conn) {
                    self.wire.push((now, "s>c", text.clone()));
                    self.client.handle_text(now, &text);
                }
            }
            server::Output::Close { conn, .. } => {
                if self.conn == Some(conn) {
                    self.conn = None;
                    self.client.disconnected(now, DisconnectReason::Closed);
                }
            }
            server::Output::Event(e) => self.server_events.push((now, e)),
            server::Output::Timeout(_) => unreachable!(),
        }
    }

    /// Advances the clock to `until`, stopping at every deadline on the way.
    fn advance_to(&mut self, until: u64) {
        loop {
            let next = self.drive();
            if next > until {
                self.now = until;
                self.drive();
                return;
            }
            self.now = next.max(self.now);
            if next == self.now && self.drive() == next {
                // A deadline that stays put after being handled: move on by a millisecond.
                self.now += 1;
            }
        }
    }

    /// The link breaks under both (Wi-Fi lost): both hosts see the socket close.
    fn break_link(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.server.closed(self.now, conn);
            self.client.disconnected(self.now, DisconnectReason::Closed);
        }
        self.drive();
    }

    fn take_wire(&mut self) -> Vec<(&'static str, String)> {
        self.wire.drain(..).map(|(_, d, t)| (d, t)).collect()
    }

    fn take_client_events(&mut self) -> Vec<client::Event> {
        self.client_events.drain(..).map(|(_, e)| e).collect()
    }

    fn take_server_events(&mut self) -> Vec<server::Event> {
        self.server_events.drain(..).map(|(_, e)| e).collect()
    }
}

fn running(task: &str, iteration: u64) -> AgentState {
    AgentState::Running(RunningData {
        task_id: task.into(),
        iteration,
    })
}

fn s2c(m: ServerMessage) -> (&'static str, String) {
    ("s>c", m.to_json())
}

fn c2s(m: ClientMessage) -> (&'static str, String) {
    ("c>s", m.to_json())
}

fn shell_permission() -> NewPermission {
    NewPermission {
        tool_name: "shell".into(),
        command: "rm -rf build/".into(),
        description: "Delete the build directory".into(),
        tier: "dangerous".into(),
    }
}

/// Pairing, then the diagram of the spec's "Connection Lifecycle" on a token connection.
#[test]
fn whole_lifecycle_of_the_spec_diagram() {
    let mut p = Pair::new(
        Client::new(client::Config::default(), None),
        Server::new(server::Config::default(), [42; 32]),
    );
    // Pairing: the desktop shows a code, the user types it.
    let code = p.server.start_pairing(0).unwrap();
    p.client.pair(0, &code).unwrap();
    p.drive();
    let wire = p.take_wire();
    let token = p.client.token().unwrap().to_owned();
    assert_eq!(
        wire,
        [
            c2s(ClientMessage::Auth(deskwire::mobile::Auth { code })),
            s2c(ServerMessage::AuthResult(
                deskwire::mobile::AuthResult::success(&token)
            )),
            s2c(ServerMessage::AgentStateUpdate(AgentState::Idle)),
        ]
    );
    assert_eq!(
        p.take_client_events(),
        [
            client::Event::Paired {
                token: token.clone()
            },
            client::Event::Connected,
            client::Event::StateChanged {
                state: AgentState::Idle,
                initial: true
            },
        ]
    );
    assert_eq!(
        p.take_server_events(),
        [
            server::Event::Paired {
                conn: ConnId(1),
                token: token.clone()
            },
            server::Event::ClientConnected {
                conn: ConnId(1),
                via: AuthMethod::Pairing
            },
        ]
    );

    // The app restarts: a new client with the stored token reconnects with the bearer header.
    p.client.stop(p.now);
    p.drive();
    assert_eq!(p.conn, None);
    p.take_server_events();
    p.client = Client::new(client::Config::default(), Some(token.clone()));
    p.now = 1_000;
    p.client.start(p.now).unwrap();
    p.drive();
    // Upgrade with the bearer token, then the immediate state sync.
    assert_eq!(
        p.take_wire(),
        [s2c(ServerMessage::AgentStateUpdate(AgentState::Idle))]
    );
    assert!(p.client.is_synced());
    assert_eq!(
        p.take_server_events(),
        [server::Event::ClientConnected {
            conn: ConnId(2),
            via: AuthMethod::Token
        }]
    );
    p.take_client_events();

    // command: start → Running, message, task_update.
    let start = Command::start("Summarise the repo", Some(10));
    p.client.send_command(p.now, start.clone()).unwrap();
    p.drive();
    assert_eq!(
        p.take_server_events(),
        [server::Event::Command {
            conn: ConnId(2),
            command: start.clone()
        }]
    );
    p.server.set_state(p.now, running("t-1", 0));
    let said = ChatMessage {
        role: "assistant".into(),
        content: "I'll start by reading the README.".into(),
        timestamp: "2026-02-18T12:00:00Z".into(),
    };
    p.server.send_message(p.now, said.clone());
    let update = TaskUpdate {
        task_id: "t-1".into(),
        iteration: 0,
        status: "running".into(),
    };
    p.server.send_task_update(p.now, update.clone());
    p.drive();

    // permission_request → permission_response: approved → Running.
    let id = p
        .server
        .request_permission(p.now, shell_permission())
        .unwrap();
    p.drive();
    let client::Event::PermissionRequested(request) = p.client_events.last().unwrap().1.clone()
    else {
        panic!("{:?}", p.client_events)
    };
    assert_eq!(request.id, id);
    p.client
        .respond_permission(p.now, &id, true, false)
        .unwrap();
    p.drive();
    p.server.set_state(p.now, running("t-1", 1));
    let stopped = AgentState::Stopped(StoppedData {
        task_id: "t-1".into(),
        reason: StopReason::Completed,
    });
    p.server.set_state(p.now, stopped.clone());
    p.drive();
    // close.
    p.client.stop(p.now);
    p.drive();

    assert_eq!(
        p.take_wire(),
        [
            c2s(ClientMessage::Command(start.clone())),
            s2c(ServerMessage::AgentStateUpdate(running("t-1", 0))),
            s2c(ServerMessage::Message(said.clone())),
            s2c(ServerMessage::TaskUpdate(update.clone())),
            s2c(ServerMessage::PermissionRequest(request.clone())),
            c2s(ClientMessage::PermissionResponse(
                deskwire::mobile::PermissionResponse {
                    id: id.clone(),
                    approved: true,
                    remember: false
                }
            )),
            s2c(ServerMessage::AgentStateUpdate(running("t-1", 1))),
            s2c(ServerMessage::AgentStateUpdate(stopped.clone())),
        ]
    );
    assert_eq!(
        p.take_client_events(),
        [
            client::Event::StateChanged {
                state: running("t-1", 0),
                initial: false
            },
            client::Event::Message(said),
            client::Event::TaskUpdate(update),
            client::Event::PermissionRequested(request),
            client::Event::StateChanged {
                state: running("t-1", 1),
                initial: false
            },
            client::Event::StateChanged {
                state: stopped.clone(),
                initial: false
            },
        ]
    );
    assert_eq!(
        p.take_server_events(),
        [
            server::Event::PermissionAnswered {
                id,
                conn: ConnId(2),
                approved: true,
                remember: false
            },
            server::Event::ClientDisconnected {
                conn: ConnId(2),
                reason: CloseReason::Closed
            },
        ]
    );
    assert_eq!(p.client.agent_state(), Some(&stopped));
    assert_eq!(p.client.connection_state(), ConnectionState::Idle);
    assert_eq!(p.server.connections(), 0);
    // Nothing was malformed or out of place on either side.
    assert_eq!(p.client.stats().malformed + p.client.stats().unexpected, 0);
    assert_eq!(p.server.stats().malformed + p.server.stats().unexpected, 0);
}

#[test]
fn reconnect_schedule_and_reset_after_success() {
    let mut p = Pair::with_token("tok");
    p.server_down = true;
    p.client.start(0).unwrap();
    p.advance_to(200_000);
    let first: Vec<u64> = p.connects.iter().take(8).copied().collect();
    let delays: Vec<u64> = first.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(delays, [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    // Every failure says when the next attempt comes.
    let announced: Vec<u64> = p
        .client_events
        .iter()
        .filter_map(|(_, e)| match e {
            client::Event::Disconnected { retry_in_ms, .. } => *retry_in_ms,
            _ => None,
        })
        .take(7)
        .collect();
    assert_eq!(announced, delays);

    // The server comes back: the next attempt succeeds and syncs.
    p.server_down = false;
    let ConnectionState::Waiting { retry_at } = p.client.connection_state() else {
        panic!("{:?}", p.client.connection_state())
    };
    p.advance_to(retry_at);
    assert!(p.client.is_synced());
    // The link drops after a session that lasted: the schedule starts over at 1 s.
    p.connects.clear();
    p.now += client::STABLE_SESSION_MS;
    let dropped_at = p.now;
    p.break_link();
    p.server_down = true;
    p.advance_to(dropped_at + 10_000);
    let delays: Vec<u64> = p.connects.iter().map(|t| t - dropped_at).collect();
    assert_eq!(delays, [1_000, 3_000, 7_000]);
}

#[test]
fn a_session_that_never_syncs_does_not_reset_the_backoff() {
    let mut p = Pair::with_token("tok");
    p.client.start(0).unwrap();
    p.drive();
    assert!(p.client.is_synced());
    // Two drops right after the upgrade, before any state arrives.
    for expected in [1_000, 2_000] {
        p.conn = None;
        p.client.disconnected(p.now, DisconnectReason::Closed);
        let ConnectionState::Waiting { retry_at } = p.client.connection_state() else {
            panic!()
        };
        assert_eq!(retry_at - p.now, expected);
        p.now = retry_at;
        // Connect, but lose the state sync this time.
        loop {
            match p.client.poll_output(p.now) {
                client::Output::Connect { .. } => break,
                client::Output::Event(_) => {}
                other => panic!("{other:?}"),
            }
        }
        p.client.connected(p.now).unwrap();
    }
}

#[test]
fn wrong_pairing_code_and_attempt_limit() {
    let config = server::Config {
        max_pairing_attempts: 3,
        ..server::Config::default()
    };
    let mut p = Pair::new(
        Client::new(client::Config::default(), None),
        Server::new(config, [5; 32]),
    );
    // No code shown yet.
    p.client.pair(0, "000000").unwrap();
    p.drive();
    assert_eq!(
        p.take_server_events()[0],
        server::Event::PairingFailed {
            conn: ConnId(1),
            failure: PairingFailure::NoActiveCode
        }
    );
    p.take_client_events();

    p.wire.clear();
    let code = p.server.start_pairing(p.now).unwrap();
    let wrong = if code == "111111" { "222222" } else { "111111" };
    let mut failures = Vec::new();
    for _ in 0..3 {
        p.client.pair(p.now, wrong).unwrap();
        p.drive();
        // The client is told, closes, and does not retry on its own.
        let events = p.take_client_events();
        assert!(
            matches!(&events[0], client::Event::AuthFailed { error: Some(e), .. } if e.contains("code")),
            "{events:?}"
        );
        assert_eq!(p.client.connection_state(), ConnectionState::Idle);
        assert_eq!(p.conn, None);
        for e in p.take_server_events() {
            if let server::Event::PairingFailed { failure, .. } = e {
                failures.push(failure);
            }
        }
        p.advance_to(p.now + 60_000);
        assert_eq!(
            p.take_wire().len(),
            2,
            "one auth, one auth_result per attempt"
        );
    }
    assert_eq!(
        failures,
        [
            PairingFailure::WrongCode { attempts_left: 2 },
            PairingFailure::WrongCode { attempts_left: 1 },
            PairingFailure::LockedOut,
        ]
    );
    // Burnt: even the right code is refused, and the desktop shows no code any more.
    assert_eq!(p.server.pairing_code(p.now), None);
    p.client.pair(p.now, &code).unwrap();
    p.drive();
    assert!(
        p.take_server_events()
            .contains(&server::Event::PairingFailed {
                conn: ConnId(5),
                failure: PairingFailure::LockedOut
            })
    );
    assert_eq!(p.client.token(), None);

    // A new code works.
    let code = p.server.start_pairing(p.now).unwrap();
    p.client.pair(p.now, &code).unwrap();
    p.drive();
    assert!(p.client.is_synced());
    assert!(p.client.token().is_some());
    assert_eq!(p.server.stats().pairing_failures, 5);

    // Codes expire.
    let mut p = Pair::new(
        Client::new(client::Config::default(), None),
        Server::new(server::Config::default(), [5; 32]),
    );
    let code = p.server.start_pairing(0).unwrap();
    p.now = 5 * 60_000;
    p.client.pair(p.now, &code).unwrap();
    p.drive();
    assert!(
        p.take_server_events()
            .contains(&server::Event::PairingFailed {
                conn: ConnId(1),
                failure: PairingFailure::NoActiveCode
            })
    );
}

#[test]
fn bad_token_is_refused_and_not_retried() {
    let mut p = Pair::with_token("good");
    p.client = Client::new(client::Config::default(), Some("forged".into()));
    p.client.start(0).unwrap();
    p.advance_to(120_000);
    assert_eq!(p.connects, [0], "a refused token is not retried");
    assert_eq!(
        p.take_client_events(),
        [
            client::Event::Disconnected {
                reason: DisconnectReason::Unauthorized,
                retry_in_ms: None
            },
            client::Event::TokenRejected,
        ]
    );
    assert_eq!(p.client.token(), None);
    assert_eq!(
        p.client.start(p.now),
        Err(deskwire::mobile::LocalError::NoCredentials)
    );
    assert_eq!(p.server.stats().bad_tokens, 1);
    assert_eq!(p.server.connections(), 0);

    // A token revoked on the desktop stops working at the next reconnect.
    let mut p = Pair::with_token("good");
    p.client.start(0).unwrap();
    p.drive();
    assert!(p.server.revoke_token("good"));
    p.break_link();
    p.advance_to(10_000);
    assert_eq!(p.connects, [0, 1_000]);
    assert_eq!(p.client.token(), None);
}

#[test]
fn ping_pong_and_missed_pong_limit() {
    let mut p = Pair::with_token("tok");
    p.client.start(0).unwrap();
    p.advance_to(60_000);
    let pings = p
        .wire
        .iter()
        .filter(|(_, d, t)| *d == "s>c" && t.contains("\"ping\""))
        .count();
    let pongs = p
        .wire
        .iter()
        .filter(|(_, d, t)| *d == "c>s" && t.contains("\"pong\""))
        .count();
    assert_eq!((pings, pongs), (4, 4), "a ping every 15 s, each answered");
    assert_eq!(p.client.stats().pings, 4);
    assert!(p.server.is_authenticated(ConnId(1)));

    // The phone's frames stop arriving: the pings at 75 s and 90 s go unanswered, and at
    // 105 s (the second missed pong) the server closes.
    p.drop_client_frames = true;
    p.wire.clear();
    p.advance_to(104_999);
    assert!(p.server.is_authenticated(ConnId(1)));
    p.advance_to(105_000);
    let closed: Vec<&server::Event> = p
        .server_events
        .iter()
        .map(|(_, e)| e)
        .filter(|e| matches!(e, server::Event::ClientDisconnected { .. }))
        .collect();
    assert_eq!(
        closed,
        [&server::Event::ClientDisconnected {
            conn: ConnId(1),
            reason: CloseReason::PongTimeout
        }]
    );
    // The phone saw the close and reconnects after 1 s; the new session works again.
    p.drop_client_frames = false;
    p.advance_to(p.now + 1_000);
    assert_eq!(p.connects, [0, 105_000 + 1_000]);
    assert!(p.client.is_synced());
    assert!(p.server.is_authenticated(ConnId(2)));
}

#[test]
fn permission_approve_deny_remember_and_timeout() {
    let mut p = Pair::with_token("tok");
    p.client.start(0).unwrap();
    p.drive();
    p.take_server_events();
    let a = p.server.request_permission(0, shell_permission()).unwrap();
    let b = p.server.request_permission(0, shell_permission()).unwrap();
    let c = p.server.request_permission(0, shell_permission()).unwrap();
    p.drive();
    let shown: Vec<&str> = p.client.pending_permissions().collect();
    assert_eq!(shown, [a.as_str(), b.as_str(), c.as_str()]);

    p.now = 1_000;
    p.client.respond_permission(p.now, &a, true, false).unwrap();
    p.client.respond_permission(p.now, &b, false, true).unwrap();
    p.drive();
    assert_eq!(
        p.take_server_events(),
        [
            server::Event::PermissionAnswered {
                id: a.clone(),
                conn: ConnId(1),
                approved: true,
                remember: false
            },
            server::Event::PermissionAnswered {
                id: b.clone(),
                conn: ConnId(1),
                approved: false,
                remember: true
            },
        ]
    );
    assert_eq!(
        p.client.respond_permission(p.now, &a, true, false),
        Err(deskwire::mobile::LocalError::UnknownPermission(a.clone()))
    );

    // Nobody answers c: it times out on the server after 5 minutes.
    p.advance_to(5 * 60_000);
    assert!(p.server_events.iter().any(
        |(t, e)| *t == 5 * 60_000 && *e == server::Event::PermissionTimedOut { id: c.clone() }
    ));
    // A late answer, a second answer and an answer to an id never asked are counted and
    // ignored.
    p.client.respond_permission(p.now, &c, true, false).unwrap();
    p.drive();
    let conn = p.conn.unwrap();
    let forged = |id: &str| {
        ClientMessage::PermissionResponse(deskwire::mobile::PermissionResponse {
            id: id.into(),
            approved: true,
            remember: false,
        })
        .to_json()
    };
    p.server.handle_text(p.now, conn, &forged(&a));
    p.server.handle_text(p.now, conn, &forged("never-asked"));
    p.drive();
    assert!(
        !p.server_events
            .iter()
            .any(|(t, e)| *t >= 5 * 60_000 && matches!(e, server::Event::PermissionAnswered { .. }))
    );
    let stats = p.server.stats();
    assert_eq!(
        (
            stats.duplicate_permission_responses,
            stats.unknown_permission_responses
        ),
        (2, 1)
    );
}

#[test]
fn waiting_permissions_are_sent_again_after_a_reconnect() {
    let mut p = Pair::with_token("tok");
    p.client.start(0).unwrap();
    p.drive();
    let id = p.server.request_permission(0, shell_permission()).unwrap();
    p.drive();
    p.break_link();
    assert_eq!(p.client.pending_permissions().count(), 0);
    assert_eq!(
        p.client.respond_permission(p.now, &id, true, false),
        Err(deskwire::mobile::LocalError::NotConnected)
    );
    p.wire.clear();
    p.advance_to(1_000);
    let wire = p.take_wire();
    assert!(wire[0].1.contains("agent_state_update"), "{wire:?}");
    assert!(wire[1].1.contains(&id), "{wire:?}");
    p.client.respond_permission(p.now, &id, true, true).unwrap();
    p.drive();
    assert!(p.server_events.iter().any(|(_, e)| matches!(
        e,
        server::Event::PermissionAnswered { id: got, remember: true, .. } if *got == id
    )));
}

#[test]
fn broadcasts_reach_every_paired_phone_only() {
    let mut server = Server::new(server::Config::default(), [3; 32]);
    server.add_token("t").unwrap();
    server.open(0, ConnId(1), Some("t")).unwrap();
    server.open(0, ConnId(2), Some("t")).unwrap();
    server.open(0, ConnId(3), None).unwrap();
    while !matches!(server.poll_output(0), server::Output::Timeout(_)) {}
    server.set_state(1, running("x", 1));
    let mut to = Vec::new();
    loop {
        match server.poll_output(1) {
            server::Output::Transmit { conn, .. } => to.push(conn),
            server::Output::Timeout(_) => break,
            _ => {}
        }
    }
    assert_eq!(to, [ConnId(1), ConnId(2)]);
}

#[test]
fn commands_from_the_phone() {
    let mut p = Pair::with_token("tok");
    p.client.start(0).unwrap();
    p.drive();
    p.take_server_events();
    for action in [
        CommandAction::Pause,
        CommandAction::Resume,
        CommandAction::Stop,
    ] {
        p.client.send_command(p.now, Command::new(action)).unwrap();
    }
    p.client
        .send_message(p.now, "Use the main branch.")
        .unwrap();
    p.drive();
    let events = p.take_server_events();
    assert_eq!(events.len(), 4);
    assert_eq!(
        events[3],
        server::Event::UserMessage {
            conn: ConnId(1),
            content: "Use the main branch.".into()
        }
    );
}

/// The spec's example messages, as printed (spaces and all).
#[test]
fn every_spec_example_parses() {
    assert!(ClientMessage::parse(r#"{"type": "auth", "payload": {"code": "123456"}}"#).is_ok());
    assert!(
        ServerMessage::parse(
            r#"{"type": "auth_result", "payload": {"token": "...", "success": true}}"#
        )
        .is_ok()
    );
    let state = r#"{
  "status": "Running",
  "data": {
    "task_id": "550e8400-...",
    "iteration": 5
  }
}"#;
    assert_eq!(
        AgentState::from_value(serde_json::from_str(state).unwrap()),
        Ok(running("550e8400-...", 5))
    );
}

#[test]
fn a_silent_server_is_given_up_on() {
    let mut p = Pair::with_token("tok");
    p.client = Client::new(
        client::Config {
            server_timeout_ms: Some(45_000),
            ..client::Config::default()
        },
        Some("tok".into()),
    );
    p.client.start(0).unwrap();
    // With the server's pings every 15 s, the connection stays up.
    p.advance_to(120_000);
    assert_eq!(p.connects, [0]);
    // The server stops talking (its frames are lost): 45 s after the last ping the phone closes
    // and reconnects 1 s later.
    let last_ping = p
        .wire
        .iter()
        .filter(|(_, d, _)| *d == "s>c")
        .map(|(t, _, _)| *t)
        .max()
        .unwrap();
    let conn = p.conn.take().unwrap();
    p.advance_to(last_ping + 45_000);
    assert!(p.client_events.iter().any(|(t, e)| *t == last_ping + 45_000
        && *e
            == client::Event::Disconnected {
                reason: DisconnectReason::ServerTimeout,
                retry_in_ms: Some(1_000)
            }));
    p.server.closed(p.now, conn);
    p.advance_to(last_ping + 46_000);
    assert_eq!(p.connects, [0, last_ping + 46_000]);
    assert!(p.client.is_synced());
}
