//! Floods against the mobile engines whose host stops draining `poll_output`: every queue a
//! peer or the host can grow stays within `max_queued` (plus the few instructions the host's
//! own calls make); what gives way is counted (`stats().dropped`) or refused with a typed
//! error (`LocalError::QueueFull`), and the engines work again once drained.

use deskwire::mobile::client::{self, ConnectionState};
use deskwire::mobile::server::{self, NewPermission};
use deskwire::mobile::{
    AgentState, ChatMessage, Client, Command, CommandAction, ConnId, LocalError, RunningData,
    Server, ServerMessage, TaskUpdate,
};

const FLOOD: usize = 20_000;
const CAP: usize = 64;

fn drain_client(c: &mut Client, now: u64) -> Vec<client::Output> {
    let mut out = Vec::new();
    loop {
        match c.poll_output(now) {
            client::Output::Timeout(_) => return out,
            o => out.push(o),
        }
    }
}

fn drain_server(s: &mut Server, now: u64) -> Vec<server::Output> {
    let mut out = Vec::new();
    loop {
        match s.poll_output(now) {
            server::Output::Timeout(_) => return out,
            o => out.push(o),
        }
    }
}

/// A client online with a token, its queue drained.
fn online_client() -> Client {
    let config = client::Config {
        max_queued: CAP,
        ..client::Config::default()
    };
    let mut c = Client::new(config, Some("tok".into()));
    c.start(0).unwrap();
    drain_client(&mut c, 0);
    c.connected(0).unwrap();
    drain_client(&mut c, 0);
    assert!(matches!(
        c.connection_state(),
        ConnectionState::Online { .. }
    ));
    c
}

#[test]
fn a_server_flooding_a_client_whose_host_does_not_drain_fills_only_the_cap() {
    let mut c = online_client();
    for i in 0..FLOOD {
        let frame = match i % 4 {
            0 => ServerMessage::Message(ChatMessage {
                role: "assistant".into(),
                content: format!("line {i}"),
                timestamp: "2026-02-18T12:00:00Z".into(),
            }),
            1 => ServerMessage::TaskUpdate(TaskUpdate {
                task_id: "t".into(),
                iteration: i as u64,
                status: "running".into(),
            }),
            2 => ServerMessage::AgentStateUpdate(AgentState::Running(RunningData {
                task_id: "t".into(),
                iteration: i as u64,
            })),
            _ => ServerMessage::Ping,
        };
        c.handle_text(1, &frame.to_json());
    }
    // The host's own commands are refused with a typed error while the queue is full.
    assert_eq!(
        c.send_message(1, "hi"),
        Err(LocalError::QueueFull { max: CAP })
    );
    assert_eq!(
        c.send_command(1, Command::new(CommandAction::Stop)),
        Err(LocalError::QueueFull { max: CAP })
    );
    let queued = drain_client(&mut c, 1).len();
    assert!(queued <= CAP, "{queued} outputs queued, cap {CAP}");
    assert_eq!(c.stats().dropped as usize, FLOOD - queued);
    // The state is current even though most of its events were dropped.
    assert_eq!(
        c.agent_state(),
        Some(&AgentState::Running(RunningData {
            task_id: "t".into(),
            iteration: (FLOOD - 2) as u64,
        }))
    );
    // Drained, the client works again.
    c.send_message(2, "hi again").unwrap();
    assert_eq!(drain_client(&mut c, 2).len(), 1);
}

/// A server with one paired phone and a cap of [`CAP`].
fn server_with_phone(phones: u64) -> Server {
    let config = server::Config {
        max_queued: CAP,
        ..server::Config::default()
    };
    let mut s = Server::new(config, [5; 32]);
    s.add_token("tok").unwrap();
    for p in 0..phones {
        s.open(0, ConnId(p), Some("tok")).unwrap();
    }
    drain_server(&mut s, 0);
    s
}

#[test]
fn broadcasts_to_phones_whose_host_does_not_drain_fill_only_the_cap() {
    let mut s = server_with_phone(3);
    for i in 0..FLOOD {
        match i % 3 {
            0 => s.send_message(
                1,
                ChatMessage {
                    role: "assistant".into(),
                    content: format!("line {i}"),
                    timestamp: "2026-02-18T12:00:00Z".into(),
                },
            ),
            1 => s.send_task_update(
                1,
                TaskUpdate {
                    task_id: "t".into(),
                    iteration: i as u64,
                    status: "running".into(),
                },
            ),
            _ => s.set_state(1, AgentState::Idle),
        }
    }
    let queued = drain_server(&mut s, 1).len();
    assert!(queued <= CAP, "{queued} outputs queued, cap {CAP}");
    assert_eq!(s.stats().dropped as usize, 3 * FLOOD - queued);
    // Drained, broadcasts go out again, one frame per phone.
    s.set_state(2, AgentState::Idle);
    assert_eq!(drain_server(&mut s, 2).len(), 3);
}

#[test]
fn phones_flooding_commands_at_a_server_whose_host_does_not_drain_fill_only_the_cap() {
    let mut s = server_with_phone(2);
    let command = r#"{"type":"command","payload":{"action":"stop"}}"#;
    let chat = r#"{"type":"message","payload":{"role":"user","content":"hi"}}"#;
    for i in 0..FLOOD {
        let conn = ConnId((i % 2) as u64);
        s.handle_text(1, conn, if i % 3 == 0 { chat } else { command });
    }
    let queued = drain_server(&mut s, 1).len();
    assert!(queued <= CAP, "{queued} outputs queued, cap {CAP}");
    assert_eq!(s.stats().dropped as usize, FLOOD - queued);
    // Permission requests are the host's: refused with a typed error at the cap.
    for _ in 0..CAP {
        let _ = s.request_permission(2, permission());
    }
    assert!(matches!(
        s.request_permission(2, permission()),
        Err(LocalError::QueueFull { .. } | LocalError::TooManyPending(_))
    ));
    assert!(drain_server(&mut s, 2).len() <= CAP);
}

fn permission() -> NewPermission {
    NewPermission {
        tool_name: "RemoteBash".into(),
        command: "ls".into(),
        description: "list".into(),
        tier: "low".into(),
    }
}
