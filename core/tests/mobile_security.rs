//! The desktop's engine against an attacker on the same network: guessing pairing codes,
//! pushing the real phone's token out, holding idle sockets, and keeping a revoked token's
//! session. The harness plays the host of `mobile::Server` with raw frames; no sockets.

use deskwire::mobile::server::{
    Admission, CloseReason, Config, Event, Output, PairingFailure, Refusal,
};
use deskwire::mobile::{AuthResult, ConnId, LocalError, Server, ServerMessage};

fn drain(s: &mut Server, now: u64) -> Vec<Output> {
    let mut out = Vec::new();
    loop {
        match s.poll_output(now) {
            Output::Timeout(_) => return out,
            o => out.push(o),
        }
    }
}

fn auth(code: &str) -> String {
    format!(r#"{{"type":"auth","payload":{{"code":"{code}"}}}}"#)
}

/// One pairing attempt on a new connection, as a phone makes it: open, `auth`, read the answer.
/// Returns the failure (or `None` on success) and the `auth_result` frame.
fn attempt(s: &mut Server, now: u64, conn: u64, code: &str) -> (Option<PairingFailure>, String) {
    assert_eq!(
        s.open(now, ConnId(conn), None),
        Ok(Admission::AwaitingPairing)
    );
    drain(s, now);
    s.handle_text(now, ConnId(conn), &auth(code));
    let mut failure = None;
    let mut frame = String::new();
    for o in drain(s, now) {
        match o {
            Output::Transmit { conn: c, text } if c == ConnId(conn) && frame.is_empty() => {
                frame = text
            }
            Output::Event(Event::PairingFailed { failure: f, .. }) => failure = Some(f),
            _ => {}
        }
    }
    (failure, frame)
}

fn other_than(code: &str) -> &'static str {
    if code == "000000" { "111111" } else { "000000" }
}

fn auth_result(frame: &str) -> AuthResult {
    match ServerMessage::parse(frame) {
        Ok(ServerMessage::AuthResult(r)) => r,
        other => panic!("{other:?} from {frame}"),
    }
}

#[test]
fn a_new_code_does_not_bring_a_fresh_budget_of_fast_guesses() {
    let config = Config::default();
    let mut s = Server::new(config.clone(), [3; 32]);
    let code = s.start_pairing(0).unwrap();
    let wrong = other_than(&code);
    let (first, frame) = attempt(&mut s, 0, 1, wrong);
    assert_eq!(first, Some(PairingFailure::WrongCode { attempts_left: 4 }));
    // The phone learns what the desktop knows.
    let told = auth_result(&frame);
    assert_eq!(
        (told.success, told.attempts_left, told.retry_after_ms),
        (false, Some(4), Some(config.pairing_backoff_ms))
    );
    // A second guess right away is not even compared with the code: the right one fails too,
    // and costs no attempt.
    let (second, frame) = attempt(&mut s, 10, 2, &code);
    assert_eq!(
        second,
        Some(PairingFailure::Throttled {
            retry_after_ms: config.pairing_backoff_ms - 10
        })
    );
    assert_eq!(
        auth_result(&frame).retry_after_ms,
        Some(config.pairing_backoff_ms - 10)
    );
    // A new code (the user asked for one) keeps the backoff: the attacker gains nothing.
    let code = s.start_pairing(20).unwrap();
    let (third, _) = attempt(&mut s, 20, 3, other_than(&code));
    assert!(
        matches!(third, Some(PairingFailure::Throttled { .. })),
        "{third:?}"
    );
    // Each wrong code in a row doubles the wait, across codes, up to the cap.
    let mut now = config.pairing_backoff_ms;
    let mut waits = Vec::new();
    for conn in 10..20 {
        if s.pairing_code(now).is_none() {
            s.start_pairing(now).unwrap();
        }
        let code = s.pairing_code(now).unwrap().to_owned();
        let (failure, frame) = attempt(&mut s, now, conn, other_than(&code));
        assert!(
            matches!(
                failure,
                Some(PairingFailure::WrongCode { .. } | PairingFailure::LockedOut)
            ),
            "{failure:?}"
        );
        let wait = auth_result(&frame).retry_after_ms.unwrap();
        waits.push(wait);
        now += wait;
    }
    assert_eq!(
        waits,
        [2, 4, 8, 16, 32, 60, 60, 60, 60, 60].map(|s| s * 1_000)
    );
    // The right code after the wait pairs, and resets the backoff.
    let code = s.start_pairing(now).unwrap();
    let (ok, _) = attempt(&mut s, now, 30, &code);
    assert_eq!(ok, None);
    let code = s.start_pairing(now).unwrap();
    let (fresh, _) = attempt(&mut s, now, 31, other_than(&code));
    assert_eq!(fresh, Some(PairingFailure::WrongCode { attempts_left: 4 }));
    assert_eq!(s.stats().pairing_failures, 14);
}

#[test]
fn pairing_is_closed_after_a_success_and_after_a_burnt_code_until_the_user_opens_it() {
    let config = Config {
        pairing_backoff_ms: 0,
        ..Config::default()
    };
    let mut s = Server::new(config, [3; 32]);
    let code = s.start_pairing(0).unwrap();
    assert_eq!(attempt(&mut s, 0, 1, &code).0, None);
    assert_eq!(s.pairing_code(1), None);
    // The same code again, or any other: nothing is open, however long one waits.
    for (conn, now) in [(2, 1), (3, 60_000)] {
        let (failure, frame) = attempt(&mut s, now, conn, &code);
        assert_eq!(failure, Some(PairingFailure::NoActiveCode));
        assert_eq!(auth_result(&frame).attempts_left, None);
        assert_eq!(s.pairing_code(now), None);
    }
    // Five wrong codes burn the code; the engine shows no other.
    let code = s.start_pairing(60_000).unwrap();
    let results: Vec<Option<PairingFailure>> = (10..16)
        .map(|conn| attempt(&mut s, 60_000, conn, other_than(&code)).0)
        .collect();
    assert_eq!(
        results,
        [
            Some(PairingFailure::WrongCode { attempts_left: 4 }),
            Some(PairingFailure::WrongCode { attempts_left: 3 }),
            Some(PairingFailure::WrongCode { attempts_left: 2 }),
            Some(PairingFailure::WrongCode { attempts_left: 1 }),
            Some(PairingFailure::LockedOut),
            Some(PairingFailure::LockedOut),
        ]
    );
    assert_eq!(s.pairing_code(60_000), None);
    assert_eq!(
        attempt(&mut s, 60_000, 20, &code).0,
        Some(PairingFailure::LockedOut)
    );
    assert_eq!(s.pairing_code(120_000), None);
}

#[test]
fn eight_idle_sockets_do_not_keep_out_a_phone_with_a_token() {
    let config = Config::default();
    let mut s = Server::new(config.clone(), [3; 32]);
    s.add_token("phone-token").unwrap();
    let mut admissions = Vec::new();
    for conn in 0..12 {
        admissions.push(s.open(0, ConnId(conn), None).unwrap());
    }
    let idle = config.max_unpaired_connections;
    assert!(idle < 8);
    assert!(
        admissions[..idle]
            .iter()
            .all(|a| *a == Admission::AwaitingPairing)
    );
    assert!(
        admissions[idle..]
            .iter()
            .all(|a| *a == Admission::Refused(Refusal::TooManyUnpaired))
    );
    // Every session slot is still there for phones with a token.
    for conn in 0..config.max_connections as u64 {
        assert_eq!(
            s.open(1, ConnId(100 + conn), Some("phone-token")),
            Ok(Admission::Authenticated)
        );
    }
    assert_eq!(
        s.open(1, ConnId(200), Some("phone-token")),
        Ok(Admission::Refused(Refusal::TooManyConnections))
    );
    // The idle sockets are dropped after the short auth timeout, and pairing is possible again.
    let out = drain(&mut s, config.auth_timeout_ms);
    let timed_out = out
        .iter()
        .filter(|o| {
            matches!(
                o,
                Output::Close {
                    reason: CloseReason::AuthTimeout,
                    ..
                }
            )
        })
        .count();
    assert_eq!(timed_out, idle);
    assert_eq!(
        s.open(config.auth_timeout_ms, ConnId(300), None),
        Ok(Admission::AwaitingPairing)
    );
}

#[test]
fn revoking_a_token_closes_the_sessions_that_used_it() {
    let mut s = Server::new(Config::default(), [3; 32]);
    s.add_token("kept").unwrap();
    s.add_token("stolen").unwrap();
    s.open(0, ConnId(1), Some("stolen")).unwrap();
    s.open(0, ConnId(2), Some("kept")).unwrap();
    s.open(0, ConnId(3), Some("stolen")).unwrap();
    // A phone that pairs uses the token it was given.
    let code = s.start_pairing(0).unwrap();
    assert_eq!(attempt(&mut s, 0, 4, &code).0, None);
    let paired = s.stats().tokens;
    assert_eq!(paired, 3);
    drain(&mut s, 0);
    assert!(s.revoke_token("stolen"));
    let out = drain(&mut s, 1);
    assert_eq!(
        out,
        [1, 3]
            .into_iter()
            .flat_map(|c| [
                Output::Close {
                    conn: ConnId(c),
                    reason: CloseReason::Revoked
                },
                Output::Event(Event::ClientDisconnected {
                    conn: ConnId(c),
                    reason: CloseReason::Revoked
                })
            ])
            .collect::<Vec<_>>()
    );
    assert!(s.is_authenticated(ConnId(2)));
    assert!(s.is_authenticated(ConnId(4)));
    // Revoking an unknown token closes nothing.
    assert!(!s.revoke_token("stolen"));
    assert_eq!(drain(&mut s, 1), []);
}

#[test]
fn revoking_a_paired_phones_token_closes_its_session() {
    let mut s = Server::new(Config::default(), [3; 32]);
    let code = s.start_pairing(0).unwrap();
    s.open(0, ConnId(1), None).unwrap();
    s.handle_text(0, ConnId(1), &auth(&code));
    let token = drain(&mut s, 0)
        .into_iter()
        .find_map(|o| match o {
            Output::Event(Event::Paired { token, .. }) => Some(token),
            _ => None,
        })
        .unwrap();
    assert!(s.revoke_token(&token));
    assert_eq!(
        drain(&mut s, 1)[0],
        Output::Close {
            conn: ConnId(1),
            reason: CloseReason::Revoked
        }
    );
    assert_eq!(s.connections(), 0);
}

#[test]
fn a_new_pairing_never_pushes_out_a_paired_phone() {
    let config = Config {
        max_tokens: 2,
        ..Config::default()
    };
    let mut s = Server::new(config, [3; 32]);
    s.add_token("first-phone").unwrap();
    // Pairing opened while there was room; the table fills before the phone types the code.
    let code = s.start_pairing(0).unwrap();
    s.add_token("second-phone").unwrap();
    let (failure, frame) = attempt(&mut s, 0, 1, &code);
    assert_eq!(failure, Some(PairingFailure::TokensFull));
    assert!(
        auth_result(&frame)
            .error
            .unwrap()
            .contains("revoke one on the desktop")
    );
    assert_eq!(
        s.open(1, ConnId(2), Some("first-phone")),
        Ok(Admission::Authenticated)
    );
    assert_eq!(
        s.open(1, ConnId(3), Some("second-phone")),
        Ok(Admission::Authenticated)
    );
    // No code is shown while the table is full, and nothing is forgotten to make room.
    assert_eq!(s.start_pairing(1), Err(LocalError::TokensFull { max: 2 }));
    assert_eq!(
        s.add_token("third-phone"),
        Err(LocalError::TokensFull { max: 2 })
    );
    // The user revokes a phone: pairing works again (the code was not burnt by the refusal).
    assert!(s.revoke_token("second-phone"));
    let (failure, _) = attempt(&mut s, 2, 4, &code);
    assert_eq!(failure, None);
}

#[test]
fn pairing_while_every_session_slot_is_taken_is_refused_without_a_guess() {
    let config = Config {
        max_connections: 1,
        ..Config::default()
    };
    let mut s = Server::new(config, [3; 32]);
    s.add_token("t").unwrap();
    s.open(0, ConnId(1), Some("t")).unwrap();
    let code = s.start_pairing(0).unwrap();
    assert_eq!(
        attempt(&mut s, 0, 2, other_than(&code)).0,
        Some(PairingFailure::TooManyConnections)
    );
    s.close(0, ConnId(1)).unwrap();
    assert_eq!(attempt(&mut s, 0, 3, &code).0, None);
}

#[test]
fn the_phone_is_told_the_attempts_left_and_the_wait() {
    use deskwire::mobile::Client;
    use deskwire::mobile::client::{self, Event as PhoneEvent, Output as PhoneOutput};

    let mut desk = Server::new(Config::default(), [3; 32]);
    let code = desk.start_pairing(0).unwrap();
    let mut phone = Client::new(client::Config::default(), None);
    phone.pair(0, other_than(&code)).unwrap();
    let mut events = Vec::new();
    // Both hosts, one connection, until neither has anything to do.
    loop {
        let mut busy = false;
        loop {
            let o = phone.poll_output(0);
            if matches!(o, PhoneOutput::Timeout(_)) {
                break;
            }
            busy = true;
            match o {
                PhoneOutput::Connect { bearer } => {
                    desk.open(0, ConnId(1), bearer.as_deref()).unwrap();
                    phone.connected(0).unwrap();
                }
                PhoneOutput::Transmit(text) => desk.handle_text(0, ConnId(1), &text),
                PhoneOutput::Event(e) => events.push(e),
                _ => {}
            }
        }
        for o in drain(&mut desk, 0) {
            busy = true;
            if let Output::Transmit { text, .. } = o {
                phone.handle_text(0, &text);
            }
        }
        if !busy {
            break;
        }
    }
    assert_eq!(
        events,
        [PhoneEvent::AuthFailed {
            error: Some(PairingFailure::WrongCode { attempts_left: 4 }.message()),
            attempts_left: Some(4),
            retry_after_ms: Some(Config::default().pairing_backoff_ms),
        }]
    );
}
