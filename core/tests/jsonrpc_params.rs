//! `Peer::call`, `call_with_id` and `notify` refuse params the other end would refuse as an
//! invalid request (trial finding 6): JSON-RPC 2.0 takes an object or an array, the sidecar
//! dialect an object. Nothing is written and no id is used for a refused call; a peer on the
//! other end answers the accepted ones.

use deskwire::jsonrpc::{
    Id, JsonRpc2, LocalError, Output, Peer, PeerConfig, PeerEvent, RawJson, Sidecar,
};

fn raw(json: &str) -> Option<RawJson> {
    Some(RawJson::from_string(json.to_owned()).unwrap())
}

fn transmitted<D: deskwire::jsonrpc::Dialect>(peer: &mut Peer<D>) -> Vec<u8> {
    let mut bytes = Vec::new();
    loop {
        match peer.poll_output(0) {
            Output::Transmit(b) => bytes.extend(b),
            Output::Timeout(_) => return bytes,
            Output::Event(_) => {}
        }
    }
}

#[test]
fn jsonrpc2_params_are_an_object_or_an_array() {
    let mut peer = Peer::new(JsonRpc2, PeerConfig::default(), 1);
    for bad in ["\"str\"", "5", "true", "null", " \"padded\""] {
        let err = peer.call(0, "m", raw(bad), 0).unwrap_err();
        assert!(
            matches!(
                &err,
                LocalError::InvalidParams {
                    dialect: "jsonrpc2",
                    allowed: "an object or an array",
                    ..
                }
            ),
            "{bad}: {err:?}"
        );
        assert!(err.to_string().contains("an object or an array"), "{err}");
        assert!(matches!(
            peer.call_with_id(0, Id::Number(9), "m", raw(bad), 0),
            Err(LocalError::InvalidParams { .. })
        ));
        assert!(matches!(
            peer.notify(0, "m", raw(bad)),
            Err(LocalError::InvalidParams { .. })
        ));
    }
    assert!(
        transmitted(&mut peer).is_empty(),
        "a refused call was written"
    );
    assert_eq!(peer.stats().pending, 0);
    // What is allowed goes out, and another deskwire peer takes it as a request.
    let mut other = Peer::new(JsonRpc2, PeerConfig::default(), 2);
    let id = peer.call(0, "m", raw("{\"a\":1}"), 0).unwrap();
    peer.call(0, "m", raw("[1,2]"), 0).unwrap();
    peer.call(0, "m", None, 0).unwrap();
    peer.notify(0, "n", raw("[]")).unwrap();
    // The first call took the first id: the refused ones used none.
    assert_eq!(id, Id::Number(1));
    other.handle_bytes(0, &transmitted(&mut peer));
    let mut requests = 0;
    let mut malformed = 0;
    loop {
        match other.poll_output(0) {
            Output::Event(PeerEvent::Request { .. }) => requests += 1,
            Output::Event(PeerEvent::Notification { .. }) => requests += 1,
            Output::Event(PeerEvent::Malformed { .. }) => malformed += 1,
            Output::Timeout(_) => break,
            _ => {}
        }
    }
    assert_eq!((requests, malformed), (4, 0));
}

#[test]
fn sidecar_params_are_an_object() {
    let mut peer = Peer::new(Sidecar, PeerConfig::default(), 1);
    for bad in ["[1]", "\"str\"", "5"] {
        let err = peer.call(0, "m", raw(bad), 0).unwrap_err();
        assert!(
            matches!(
                &err,
                LocalError::InvalidParams {
                    dialect: "sidecar",
                    allowed: "an object",
                    ..
                }
            ),
            "{bad}: {err:?}"
        );
    }
    assert!(transmitted(&mut peer).is_empty());
    peer.call(0, "m", raw("{}"), 0).unwrap();
    peer.call(0, "m", None, 0).unwrap();
    assert!(!transmitted(&mut peer).is_empty());
}
