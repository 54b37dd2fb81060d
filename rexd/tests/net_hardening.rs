//! `rexd --listen` against what the security review of issue 33 tried: forged certificate
//! subjects, batches with huge answers, clients that do not read or send slowly, more
//! connections and sessions than one client should have, and web pages. Real daemons on
//! loopback, with curl, openssl-made certificates and raw sockets.

mod netkit;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use netkit::*;
use serde_json::json;

/// `POST /rpc` over mTLS with this certificate.
fn mtls_post(d: &Daemon, certs: &Certs, cert: &Path, key: &Path, body: &str) -> Curl {
    curl(&[
        "--cacert",
        certs.ca.to_str().unwrap(),
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        body,
        &format!("{}/rpc", d.url),
    ])
}

const OPEN: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"t"}}"#;

/// Finding 3: the principal of a certificate is its subject in RFC 4514 form, so a single `O`
/// attribute `ops, CN=alice` is not `O=ops` + `CN=alice`; an empty subject is refused.
#[test]
fn certificate_principals_are_escaped_and_never_empty() {
    let place = Place::new("net-names");
    let certs = Certs::make(place.path());
    let d = Daemon::start(
        &place,
        &[
            "--tls-cert",
            certs.server_cert.to_str().unwrap(),
            "--tls-key",
            certs.server_key.to_str().unwrap(),
            "--client-ca",
            certs.ca.to_str().unwrap(),
        ],
    );
    let r = mtls_post(&d, &certs, &certs.client_cert, &certs.client_key, OPEN);
    assert_eq!(r.status, 200, "{r:?}");
    let sid = r.json()["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The forged subject does not see alice's session…
    let info = json!({"jsonrpc": "2.0", "id": 2, "method": "session.info",
                      "params": {"session_id": sid}})
    .to_string();
    let r = mtls_post(&d, &certs, &certs.forger_cert, &certs.forger_key, &info);
    assert_eq!(
        r.json()["error"]["code"],
        -32602,
        "the certificate with O=\"ops, CN=alice\" saw alice's session: {r:?}"
    );
    // …and its own session is audited under a name of its own.
    let r = mtls_post(&d, &certs, &certs.forger_cert, &certs.forger_key, OPEN);
    assert_eq!(r.status, 200, "{r:?}");
    // An empty subject names nobody: refused, with the reason, and logged.
    let r = mtls_post(&d, &certs, &certs.nameless_cert, &certs.nameless_key, OPEN);
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.body.contains("empty subject"), "{r:?}");
    d.wait_for_log("empty subject");
    let opened: Vec<String> = place
        .audit_lines()
        .into_iter()
        .filter(|e| e["method"] == "session.open")
        .map(|e| e["principal"].as_str().unwrap_or("?").to_owned())
        .collect();
    assert_eq!(
        opened,
        ["CN=alice,O=ops", "O=ops\\, CN=alice"],
        "{opened:?}"
    );
}
