//! A failed TLS handshake in words a user can act on, for the clients that dial out with TLS:
//! `rexd --irc ircs://…` and `rex`/`Client` to `https://`/`wss://` targets. Each names its own
//! options ([`Options`]); the reading of rustls's errors lives here once.

use rustls::{AlertDescription, CertificateError};

/// How the caller's user fixes what the advice points at.
pub struct Options<'a> {
    /// The option that trusts a private CA (`--irc-ca FILE`, `--ca-file FILE`).
    pub ca: &'a str,
    /// The option pair that presents a client certificate, if the caller has one.
    pub client_cert: Option<&'a str>,
    /// How to reach a plain-text port instead (`use irc:// for it`).
    pub plain: &'a str,
}

/// A name webpki says a certificate lists, as a user would type it: `DnsName("a.example")` is
/// `a.example`, `IpAddress(10.0.0.5)` is `10.0.0.5`; other kinds as webpki writes them.
fn listed_name(presented: &str) -> &str {
    presented
        .strip_prefix("DnsName(\"")
        .and_then(|n| n.strip_suffix("\")"))
        .or_else(|| {
            presented
                .strip_prefix("IpAddress(")
                .and_then(|n| n.strip_suffix(')'))
        })
        .unwrap_or(presented)
}

/// What went wrong with `host`'s handshake, after "TLS with … failed: ".
pub fn explain(e: &rustls::Error, host: &str, options: &Options<'_>) -> String {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
            "its certificate is not signed by a CA this machine trusts (give the server's CA \
             with {})",
            options.ca
        ),
        rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            presented,
            ..
        }) if !presented.is_empty() => format!(
            "its certificate is not valid for the name {host:?}: it lists {} (connect by one \
             of those)",
            presented
                .iter()
                .map(|name| listed_name(name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!(
            "its certificate is not valid for the name {host:?} (connect by a name the \
             certificate lists)"
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::Expired | CertificateError::ExpiredContext { .. },
        ) => "its certificate has expired".to_owned(),
        rustls::Error::InvalidCertificate(CertificateError::Other(other))
            if matches!(
                other.0.downcast_ref::<webpki::Error>(),
                Some(webpki::Error::CaUsedAsEndEntity)
            ) =>
        {
            "it presents a CA certificate as its own (the server needs a certificate signed \
             by that CA; the CA's file is what the client trusts)"
                .to_owned()
        }
        rustls::Error::InvalidCertificate(_) => format!("its {}", certificate_problem(e)),
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => format!(
            "it does not speak TLS on this port (a plain-text port? {})",
            options.plain
        ),
        rustls::Error::AlertReceived(
            AlertDescription::CertificateRequired | AlertDescription::HandshakeFailure,
        ) if options.client_cert.is_some() => format!(
            "it refused the handshake: it may ask for a client certificate ({})",
            options.client_cert.unwrap_or_default()
        ),
        rustls::Error::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateUnknown),
        ) => match options.client_cert {
            Some(flags) => format!(
                "it refused this side's client certificate ({alert:?}): give one signed by \
                 the CA it trusts ({flags})"
            ),
            None => format!("it refused this side's client certificate ({alert:?})"),
        },
        rustls::Error::AlertReceived(alert) => format!("it refused the handshake ({alert:?})"),
        other => other.to_string(),
    }
}

/// What rustls found wrong with a certificate (one of ours being loaded, or the peer's), in
/// words: "certificate: …".
pub fn certificate_problem(e: &rustls::Error) -> String {
    let webpki_error = |e: &rustls::Error| match e {
        rustls::Error::InvalidCertificate(CertificateError::Other(other)) => {
            other.0.downcast_ref::<webpki::Error>().cloned()
        }
        _ => None,
    };
    match webpki_error(e) {
        Some(webpki::Error::UnsupportedCertVersion) => "certificate is X.509 version 1, which \
            TLS refuses: issue it as version 3 (`openssl x509 -req … -extfile FILE`, the file \
            holding its extensions: `subjectAltName=DNS:NAME` for a server, \
            `extendedKeyUsage=clientAuth` for a client)"
            .to_owned(),
        Some(other) => format!("certificate: {other}"),
        None => match e {
            rustls::Error::InvalidCertificate(c) => format!("certificate: {c:?}"),
            other => format!("certificate: {other}"),
        },
    }
}

/// The rustls error inside an I/O error from a TLS stream, if that is what it is.
pub fn rustls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref()?.downcast_ref::<rustls::Error>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_names_read_as_typed() {
        assert_eq!(listed_name("DnsName(\"rexd.example\")"), "rexd.example");
        assert_eq!(listed_name("IpAddress(10.0.0.5)"), "10.0.0.5");
        assert_eq!(listed_name("DirectoryName"), "DirectoryName");
    }
}
