//! Who the client of `ssh host rexd --stdio` is, from what sshd tells the command it runs:
//! where it connects from (`$SSH_CONNECTION`), the user it logged in as (`$USER`), the key it
//! authenticated with (`$SSH_USER_AUTH`, with sshd's `ExposeAuthInfo yes`), and, under a
//! forced command (`command="…"` in `authorized_keys`), what it asked to run
//! (`$SSH_ORIGINAL_COMMAND`).

use sha2::{Digest, Sha256};

/// The client end of `$SSH_CONNECTION` (`CLIENT_IP CLIENT_PORT SERVER_IP SERVER_PORT`) as
/// `IP:PORT`; `None` when rexd does not run under ssh.
pub fn address() -> Option<String> {
    let value = std::env::var("SSH_CONNECTION").ok()?;
    let mut parts = value.split_whitespace();
    let (ip, port) = (parts.next()?, parts.next()?);
    Some(match ip.contains(':') {
        true => format!("[{ip}]:{port}"),
        false => format!("{ip}:{port}"),
    })
}

/// The principal of the audit entries and `[[policy.clients]]`: `given` (`--principal`, which
/// a forced command sets per key), else under ssh the user, with the key's fingerprint when
/// sshd exposes it (`alice (SHA256:…)`); `None` for a local client.
pub fn principal(given: Option<&str>) -> Option<String> {
    if let Some(name) = given {
        return Some(name.to_owned());
    }
    std::env::var_os("SSH_CONNECTION")?;
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        // SAFETY: getuid cannot fail.
        .unwrap_or_else(|_| format!("uid {}", unsafe { libc::getuid() }));
    let key = std::env::var_os("SSH_USER_AUTH")
        .and_then(|path| std::fs::read_to_string(path).ok())
        .and_then(|text| key_fingerprint(&text));
    Some(match key {
        Some(fingerprint) => format!("{user} ({fingerprint})"),
        None => user,
    })
}

/// The `SHA256:…` fingerprint (as `ssh-keygen -l` prints it) of the first public key in the
/// text of `$SSH_USER_AUTH`: lines of `METHOD [DETAILS]`, a key's being
/// `publickey TYPE BASE64`.
pub fn key_fingerprint(auth_info: &str) -> Option<String> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
    auth_info.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next()? == "publickey").then_some(())?;
        let _key_type = words.next()?;
        let blob = STANDARD.decode(words.next()?).ok()?;
        let digest = Sha256::digest(&blob);
        Some(format!("SHA256:{}", STANDARD_NO_PAD.encode(digest)))
    })
}

/// Whether the client's own command, replaced by a forced command, held `flag` as a word (so
/// `--resumable` still works when `authorized_keys` forces `rexd --stdio --config …`).
pub fn original_command_asks(flag: &str) -> bool {
    std::env::var("SSH_ORIGINAL_COMMAND").is_ok_and(|c| c.split_whitespace().any(|w| w == flag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_ssh_keygens() {
        // A key made with `ssh-keygen -t ed25519`; `ssh-keygen -lf` printed the fingerprint.
        let info = "publickey ssh-ed25519 \
                    AAAAC3NzaC1lZDI1NTE5AAAAIHaKqResgdixf/zKAWZuL/SF3MfvwkdMdUnnL7lC8bIZ\n";
        assert_eq!(
            key_fingerprint(info).as_deref(),
            Some("SHA256:5YEIkylBksLKd7NygDPe42cp8/jZt/R2vT7lG8tk0eo")
        );
        assert_eq!(key_fingerprint("password\n"), None);
        assert_eq!(key_fingerprint("publickey ssh-ed25519 !!!\n"), None);
    }
}
