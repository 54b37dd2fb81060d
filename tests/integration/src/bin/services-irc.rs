//! InspIRCd 3 linked to Atheme services on loopback ([`deskwire_integration::ServicesIrc`]), for
//! the binding suites (Python, Kotlin) to log in with SASL against: prints one JSON line with
//! the ports, the CA, the client certificate registered to the account and the account's
//! credentials, then keeps the servers up until its stdin closes.

use std::io::Read;

use deskwire_integration::ServicesIrc;

fn main() {
    let irc = ServicesIrc::start();
    // Paths are this run's temporary directory: no character JSON would need escaped.
    println!(
        r#"{{"port": {}, "tls_port": {}, "ca": "{}", "client_cert": "{}", "client_key": "{}", "account": "{}", "password": "{}"}}"#,
        irc.port,
        irc.tls_port,
        irc.ca.display(),
        irc.client_cert.display(),
        irc.client_key.display(),
        ServicesIrc::ACCOUNT,
        ServicesIrc::PASSWORD,
    );
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    drop(irc);
}
