//! TLS for `rexd --listen` (rustls, ring provider): the server's certificate and key, and, with
//! `--client-ca`, mandatory client certificates signed by that CA (mTLS). A client without a
//! certificate, or with one from another CA, fails the handshake: it never reaches HTTP.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// What is wrong with the TLS files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("{flag} {path}: {reason}")]
    File {
        /// The flag that named it.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// rustls refused the combination (a key that does not fit the certificate, …).
    #[error("TLS configuration: {0}")]
    Config(String),
    /// The key file cannot be read, or others may read it (the message says which, and the
    /// `chmod` that fixes it).
    #[error("{0}")]
    Key(String),
}

/// Days before its end from which a server certificate is warned of.
pub const EXPIRY_WARNING_DAYS: u64 = 14;

/// What to warn of in the server's certificate (the leaf of `cert`) at `now`: that it has
/// expired, or ends within [`EXPIRY_WARNING_DAYS`] (clients refuse an expired one), and that it
/// is a CA's. A self-signed CA certificate trusted as itself works for curl and Python's
/// `ssl`, so that is a warning, not a refusal.
pub fn certificate_warnings(
    cert: &Path,
    now: std::time::SystemTime,
) -> Result<Vec<String>, TlsError> {
    use x509_cert::der::Decode;
    let chain = certs("--tls-cert", cert)?;
    let leaf = x509_cert::Certificate::from_der(chain[0].as_ref()).map_err(|e| TlsError::File {
        flag: "--tls-cert",
        path: cert.to_owned(),
        reason: format!("the certificate does not decode: {e}"),
    })?;
    let ca_warning = is_a_ca(&leaf).then(|| {
        format!(
            "--tls-cert {}: its first certificate is a CA's (basicConstraints CA:TRUE), which rex \
             and RexdClient refuse as a server's own (curl takes it when told to trust it): give \
             the server a certificate a CA issued for it, and the CA to the clients (rex \
             --ca-file)",
            cert.display()
        )
    });
    let end = leaf.tbs_certificate().validity().not_after;
    let end_unix = end.to_unix_duration();
    let now_unix = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let day = 24 * 3600;
    let mut warnings: Vec<String> = ca_warning.into_iter().collect();
    warnings.extend(if end_unix <= now_unix {
        vec![format!(
            "--tls-cert {}: the certificate expired at {end} ({} days ago): clients will refuse \
             it; renew it",
            cert.display(),
            (now_unix - end_unix).as_secs() / day
        )]
    } else if (end_unix - now_unix).as_secs() < EXPIRY_WARNING_DAYS * day {
        vec![format!(
            "--tls-cert {}: the certificate expires at {end}, in {} days: renew it",
            cert.display(),
            (end_unix - now_unix).as_secs() / day
        )]
    } else {
        Vec::new()
    });
    Ok(warnings)
}

/// Whether a certificate says it is a CA's (basicConstraints CA:TRUE).
fn is_a_ca(cert: &x509_cert::Certificate) -> bool {
    cert.tbs_certificate()
        .get_extension::<x509_cert::ext::pkix::BasicConstraints>()
        .is_ok_and(|c| c.is_some_and(|(_, c)| c.ca))
}

fn certs(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |reason: String| TlsError::File {
        flag,
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    Ok(certs)
}

/// The server's TLS configuration: `cert` (a PEM chain, leaf first) and `key` (PEM), and with
/// `client_ca` every client must show a certificate that CA signed.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = certs("--tls-cert", cert)?;
    // The key is refused when others may read it, as the token file is.
    let pem = crate::transport::read_private_file(
        "--tls-key",
        key,
        "whoever reads it can pose as this server",
    )
    .map_err(TlsError::Key)?;
    let private_key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsError::File {
        flag: "--tls-key",
        path: key.to_owned(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in certs("--client-ca", ca)? {
                roots.add(c).map_err(|e| TlsError::File {
                    flag: "--client-ca",
                    path: ca.to_owned(),
                    reason: e.to_string(),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, private_key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => TlsError::File {
                flag: "--tls-key",
                path: key.to_owned(),
                reason: "this key does not belong to the --tls-cert certificate".into(),
            },
            other => TlsError::File {
                flag: "--tls-cert",
                path: cert.to_owned(),
                reason: crate::tls_advice::certificate_problem(&other),
            },
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Why a client certificate names no client.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SubjectError {
    /// No attribute at all: every such certificate would be the same client.
    #[error(
        "the client certificate has an empty subject, so it names no client: rexd names clients \
         by their certificate's subject; have the CA issue it with one (e.g. CN=NAME)"
    )]
    Empty,
    /// The certificate passed the handshake but its subject does not decode.
    #[error("the client certificate's subject cannot be read ({0}); have the CA issue a new one")]
    Unreadable(String),
}

/// The subject of a client's leaf certificate as RFC 4514 writes it (`CN=alice,O=ops`: the
/// last RDN first, and `,` `+` `"` `\` `<` `>` `;` in values escaped), so that no value can
/// pose as other attributes: the principal in the audit log and `[[policy.clients]]`. It is
/// what `openssl x509 -noout -subject -nameopt RFC2253` prints.
pub fn subject(der: &CertificateDer<'_>) -> Result<String, SubjectError> {
    use x509_cert::der::Decode;
    let cert = x509_cert::Certificate::from_der(der.as_ref())
        .map_err(|e| SubjectError::Unreadable(e.to_string()))?;
    let name = cert.tbs_certificate().subject();
    if name.is_empty() {
        return Err(SubjectError::Empty);
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    /// A certificate of `days` days made with openssl (tests/run.sh installs it), a server's
    /// (CA:FALSE), not what `req -x509` makes by default (CA:TRUE).
    fn certificate(dir: &Path, days: &str) -> PathBuf {
        certificate_with(dir, days, "basicConstraints=critical,CA:FALSE")
    }

    fn certificate_with(dir: &Path, days: &str, extension: &str) -> PathBuf {
        let status = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", days, "-subj", "/CN=localhost"])
            .args(["-addext", extension])
            .args(["-keyout", "key.pem", "-out", "cert.pem"])
            .current_dir(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl");
        assert!(status.success());
        dir.join("cert.pem")
    }

    #[test]
    fn certificates_that_end_soon_or_ended_are_warned_of() {
        let dir = tempfile::tempdir().unwrap();
        let cert = certificate(dir.path(), "30");
        let day = Duration::from_secs(24 * 3600);
        let now = SystemTime::now();
        assert_eq!(
            certificate_warnings(&cert, now).unwrap(),
            Vec::<String>::new()
        );
        let soon = certificate_warnings(&cert, now + 20 * day).unwrap();
        assert!(
            soon.len() == 1 && soon[0].contains("expires at") && soon[0].contains("in 9 days"),
            "{soon:?}"
        );
        let ended = certificate_warnings(&cert, now + 33 * day).unwrap();
        assert!(
            ended.len() == 1
                && ended[0].contains("expired at")
                && ended[0].contains("(3 days ago)"),
            "{ended:?}"
        );
        std::fs::write(dir.path().join("empty.pem"), "").unwrap();
        assert!(certificate_warnings(&dir.path().join("empty.pem"), now).is_err());
    }

    #[test]
    fn a_ca_certificate_as_the_servers_own_is_warned_of() {
        let dir = tempfile::tempdir().unwrap();
        let cert = certificate_with(dir.path(), "30", "basicConstraints=critical,CA:TRUE");
        let warnings = certificate_warnings(&cert, SystemTime::now()).unwrap();
        assert!(
            warnings.len() == 1 && warnings[0].contains("its first certificate is a CA's"),
            "{warnings:?}"
        );
    }
}
