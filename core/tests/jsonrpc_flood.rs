//! A peer floods a `jsonrpc::Peer` whose host keeps feeding bytes but stops draining
//! `poll_output`: notifications, progress and garbage lines (each garbage request answered with
//! an error) fill at most `max_queued` outputs; the rest is dropped and counted
//! (`stats().dropped`), and the answer to the host's own call still arrives.

use deskwire::jsonrpc::{JsonRpc2, Output, Peer, PeerConfig, PeerEvent, Sidecar};

const FLOOD: usize = 20_000;
const CAP: usize = 64;

fn config() -> PeerConfig {
    PeerConfig {
        max_queued: CAP,
        ..PeerConfig::default()
    }
}

fn drain<D: deskwire::jsonrpc::Dialect>(peer: &mut Peer<D>) -> Vec<Output> {
    let mut out = Vec::new();
    loop {
        match peer.poll_output(0) {
            Output::Timeout(_) => return out,
            o => out.push(o),
        }
    }
}

#[test]
fn notifications_and_garbage_fill_only_the_cap() {
    let mut peer = Peer::new(JsonRpc2, config(), 1);
    let id = peer.call(0, "exec.start", None, 0).unwrap();
    drain(&mut peer);
    let mut flood = Vec::new();
    for i in 0..FLOOD {
        match i % 3 {
            0 => flood.extend_from_slice(
                br#"{"jsonrpc":"2.0","method":"exec.stdout","params":{"seq":1}}"#,
            ),
            // An invalid request: answered with an error and reported as Malformed.
            1 => flood.extend_from_slice(br#"{"jsonrpc":"2.0","id":7,"method":5}"#),
            _ => flood.extend_from_slice(b"not json"),
        }
        flood.push(b'\n');
    }
    peer.handle_bytes(0, &flood);
    // The answer to our own call comes after the flood: it is never what gives way.
    let answer = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"ok":true}}}}"#);
    peer.handle_bytes(0, format!("{answer}\n").as_bytes());
    let out = drain(&mut peer);
    assert!(
        out.len() <= CAP + 1,
        "{} outputs queued, cap {CAP}",
        out.len()
    );
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Event(PeerEvent::Response { id: got, .. }) if *got == id)),
        "the response to our call was dropped"
    );
    assert!(peer.stats().dropped as usize >= FLOOD - CAP);
}

#[test]
fn progress_floods_fill_only_the_cap_and_still_extend_the_deadline() {
    let mut peer = Peer::new(Sidecar, config(), 1);
    let id = peer.call(0, "training.start", None, 0).unwrap();
    drain(&mut peer);
    let id_text = serde_json::to_string(&id).unwrap();
    let mut flood = Vec::new();
    for step in 0..FLOOD {
        flood.extend_from_slice(
            format!(r#"{{"id":{id_text},"progress":{{"step":{step}}}}}"#).as_bytes(),
        );
        flood.push(b'\n');
    }
    peer.handle_bytes(0, &flood);
    let out = drain(&mut peer);
    assert!(out.len() <= CAP, "{} outputs queued, cap {CAP}", out.len());
    assert_eq!(peer.stats().dropped as usize, FLOOD - out.len());
    assert!(peer.is_pending(&id));
}
