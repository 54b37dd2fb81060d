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

/// A sidecar handler reports progress far faster than its host writes: each request's
/// unsent report is replaced by the newest, so the outbox holds at most one progress frame per
/// request however many reports are made; what the host does take goes out as it was, the
/// newest report comes before the answer, and every request is answered.
#[test]
fn unsent_progress_is_replaced_by_the_newest_so_the_outbox_stays_bounded() {
    use deskwire::jsonrpc::{Id, RawJson};
    let mut sidecar = Peer::new(Sidecar, PeerConfig::default(), 1);
    let ids: Vec<Id> = (0..3).map(|i| Id::String(format!("r{i}"))).collect();
    for id in &ids {
        let line = format!(
            "{{\"id\":{},\"method\":\"training.start\",\"params\":{{}}}}\n",
            serde_json::to_string(id).unwrap()
        );
        sidecar.handle_bytes(0, line.as_bytes());
    }
    assert_eq!(drain(&mut sidecar).len(), 3, "three requests");
    let report = |n: usize| RawJson::to_raw(&serde_json::json!({"step": n})).unwrap();
    let mut most_buffered = 0;
    for n in 0..FLOOD {
        for id in &ids {
            sidecar.progress(0, id, report(n)).unwrap();
        }
        most_buffered = most_buffered.max(sidecar.stats().bytes_buffered);
    }
    assert!(
        most_buffered < 3 * 64,
        "{FLOOD} reports each for 3 requests held {most_buffered} bytes"
    );
    // The host takes one frame (the first request's newest report); a later report for that
    // request is queued anew, the others are still replaced in place.
    let Output::Transmit(first) = sidecar.poll_output(0) else {
        panic!("a frame")
    };
    assert_eq!(
        first,
        format!(
            "{{\"id\":\"r0\",\"progress\":{{\"step\":{}}}}}\n",
            FLOOD - 1
        )
        .as_bytes()
    );
    sidecar.progress(0, &ids[0], report(FLOOD)).unwrap();
    sidecar.progress(0, &ids[1], report(FLOOD)).unwrap();
    for id in &ids {
        sidecar
            .respond(0, id, RawJson::to_raw(&1).unwrap())
            .unwrap();
    }
    // Answered: progress for it is refused, not queued.
    assert!(sidecar.progress(0, &ids[2], report(0)).is_err());
    let lines: Vec<String> = drain(&mut sidecar)
        .into_iter()
        .map(|o| match o {
            Output::Transmit(b) => String::from_utf8(b).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    let last = FLOOD - 1;
    assert_eq!(
        lines,
        vec![
            format!("{{\"id\":\"r1\",\"progress\":{{\"step\":{FLOOD}}}}}\n"),
            format!("{{\"id\":\"r2\",\"progress\":{{\"step\":{last}}}}}\n"),
            format!("{{\"id\":\"r0\",\"progress\":{{\"step\":{FLOOD}}}}}\n"),
            "{\"id\":\"r0\",\"result\":1}\n".to_owned(),
            "{\"id\":\"r1\",\"result\":1}\n".to_owned(),
            "{\"id\":\"r2\",\"result\":1}\n".to_owned(),
        ]
    );
    assert_eq!(sidecar.stats().bytes_buffered, 0);
    // Progress that is not an object is refused at once, not written.
    sidecar.handle_bytes(0, b"{\"id\":\"x\",\"method\":\"m\",\"params\":{}}\n");
    drain(&mut sidecar);
    let err = sidecar
        .progress(0, &Id::from("x"), RawJson::to_raw("not a dict").unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("progress is an object"), "{err}");
    assert!(drain(&mut sidecar).is_empty());
}
