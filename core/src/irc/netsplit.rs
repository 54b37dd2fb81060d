//! Telling a netsplit from a quit.
//!
//! When the link between two servers breaks, each side sees every user behind the link quit with
//! the two servers' names as the reason: `:bob!~bob@host QUIT :irc1.example irc2.example`. A user
//! cannot send that reason: servers mark a user's own quit text (ngircd quotes it, InspIRCd and
//! Solanum prefix `Quit: `), so two bare host names are the server's word. Networks that hide
//! their topology show `*.net *.split`, which this accepts too.

/// The two servers a `QUIT` reason names when it is a netsplit, in the order given (the near
/// side first, as servers send it), or `None` for any other reason.
///
/// ```
/// use deskwire::irc::netsplit_servers;
/// assert_eq!(
///     netsplit_servers("irc1.deskwire.test irc2.deskwire.test"),
///     Some(("irc1.deskwire.test", "irc2.deskwire.test"))
/// );
/// assert_eq!(netsplit_servers("*.net *.split"), Some(("*.net", "*.split")));
/// assert_eq!(netsplit_servers("\"irc1.example irc2.example\""), None); // a user's own text
/// assert_eq!(netsplit_servers("Quit: leaving"), None);
/// ```
pub fn netsplit_servers(reason: &str) -> Option<(&str, &str)> {
    let (near, far) = reason.split_once(' ')?;
    (is_server_name(near) && is_server_name(far) && near != far).then_some((near, far))
}

/// A host name with at least two labels (letters, digits, `-`, `_`, or a `*` mask), as servers
/// name themselves.
fn is_server_name(name: &str) -> bool {
    name.len() <= 255
        && name.contains('.')
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'*'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_two_bare_server_names_are_a_split() {
        for reason in [
            "",
            "irc1.example",
            "irc1.example irc2.example extra",
            "irc1.example  irc2.example",
            "irc1.example irc1.example",
            "irc1 irc2",
            "irc1.example. irc2.example",
            ".example irc2.example",
            "\"irc1.example irc2.example\"",
            "Quit: irc1.example irc2.example",
            "Ping timeout: 120 seconds",
            "Read error: Connection reset by peer",
            "irc1.exam\u{e9}ple irc2.example",
        ] {
            assert_eq!(netsplit_servers(reason), None, "{reason:?}");
        }
        assert_eq!(
            netsplit_servers("hub.eu.example leaf-2.us.example"),
            Some(("hub.eu.example", "leaf-2.us.example"))
        );
    }
}
