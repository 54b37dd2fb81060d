//! IRCv3 capability negotiation and SASL, the client side, for [`Session`](super::Session).
//!
//! As the IRCv3 specifications (capability negotiation 302, `cap-notify`, SASL 3.1) and mature
//! clients (WeeChat's `irc-sasl.c` and its `CAP` handling) do it:
//! - `CAP LS 302` goes first, and only when something is wanted: a session that wants nothing
//!   registers exactly as before, with no `CAP` at all;
//! - the listing may span several lines (`CAP * LS * :...`) and carry values (`sasl=PLAIN`);
//! - only what is wanted *and* offered is requested, in one `CAP REQ` (servers answer a request
//!   all or nothing: `ACK` or `NAK`);
//! - with `sasl` acknowledged, `AUTHENTICATE <mechanism>`, the credentials in 400-byte base64
//!   pieces, and each numeric is a named outcome: `900` (logged in as), `903` (success),
//!   `902`/`904`/`905`/`906` (failure, with the server's words), `907` (already logged in),
//!   `908` (the mechanisms the server has);
//! - `CAP END` exactly once on every path that began with `CAP LS`, or the server never
//!   registers us; a server without `CAP` (`421`) registers as usual;
//! - `CAP NEW`/`CAP DEL` keep the enabled set current after registration.
//!
//! A login that is required fails the session ([`DisconnectReason::LoginFailed`]) rather than
//! going on unauthenticated; one that is only preferred goes on and says so
//! ([`SessionEvent::LoginFailed`]).

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::message::Message;
use super::session::{DisconnectReason, SessionEvent};

/// How to log in with SASL. As JSON: `{"mechanism": "PLAIN", "username": "alice", "password":
/// "...", "required": true}` or `{"mechanism": "EXTERNAL"}` (the TLS client certificate the host
/// presented; the server matches its fingerprint to an account).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct SaslConfig {
    /// `PLAIN` or `EXTERNAL`.
    pub mechanism: SaslMechanism,
    /// The account to log in as (`PLAIN`).
    #[serde(default)]
    pub username: String,
    /// Its password (`PLAIN`). Never shown by `Debug`.
    #[serde(default)]
    pub password: String,
    /// Fail the session when the login fails or the server offers no SASL (the default);
    /// `false` goes on unauthenticated and says so ([`SessionEvent::LoginFailed`]).
    #[serde(default = "required_by_default")]
    pub required: bool,
}

fn required_by_default() -> bool {
    true
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"<hidden>")
            .field("required", &self.required)
            .finish()
    }
}

impl SaslConfig {
    /// `PLAIN` as `username` with `password`, required.
    pub fn plain(username: &str, password: &str) -> Self {
        SaslConfig {
            mechanism: SaslMechanism::Plain,
            username: username.to_owned(),
            password: password.to_owned(),
            required: true,
        }
    }

    /// `EXTERNAL` (the TLS client certificate), required.
    pub fn external() -> Self {
        SaslConfig {
            mechanism: SaslMechanism::External,
            username: String::new(),
            password: String::new(),
            required: true,
        }
    }

    /// The decoded `AUTHENTICATE` payload: `PLAIN` is `authzid NUL authcid NUL password` with
    /// an empty authzid (log in as the account itself); `EXTERNAL` is empty.
    fn payload(&self) -> Vec<u8> {
        match self.mechanism {
            SaslMechanism::Plain => {
                let mut p = Vec::with_capacity(self.username.len() + self.password.len() + 2);
                p.push(0);
                p.extend_from_slice(self.username.as_bytes());
                p.push(0);
                p.extend_from_slice(self.password.as_bytes());
                p
            }
            SaslMechanism::External => Vec::new(),
        }
    }
}

/// A SASL mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum SaslMechanism {
    /// An account name and a password.
    #[serde(rename = "PLAIN")]
    Plain,
    /// The TLS client certificate (CertFP).
    #[serde(rename = "EXTERNAL")]
    External,
}

impl SaslMechanism {
    /// The name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::External => "EXTERNAL",
        }
    }
}

/// `AUTHENTICATE` carries base64 in pieces of at most this many bytes.
const AUTHENTICATE_PIECE: usize = 400;
/// The most capabilities a listing may offer (a server lists a few dozen).
const MAX_OFFERED: usize = 256;
/// How long the SASL exchange may take from `AUTHENTICATE <mechanism>`: a server that offers
/// `sasl` while its services are away answers nothing at all (InspIRCd does), and registration
/// waits for `CAP END`.
pub const LOGIN_TIMEOUT_MS: u64 = 15_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing wanted: no `CAP` at all.
    Off,
    /// `CAP LS 302` sent; the listing comes.
    Listing,
    /// `CAP REQ` sent.
    Requesting,
    /// `AUTHENTICATE <mechanism>` sent; waiting for `AUTHENTICATE +`.
    Mechanism,
    /// The credentials sent; waiting for the outcome.
    Credentials,
    /// `CAP END` sent, or the server has no `CAP`.
    Done,
}

/// What the negotiation asks the session to do.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Send this line.
    Send(String),
    /// Tell the host.
    Event(SessionEvent),
    /// End the session (after `QUIT`).
    Fail(DisconnectReason),
}

/// The negotiation's state; see the module docs.
#[derive(Debug, Clone)]
pub(super) struct CapNegotiation {
    phase: Phase,
    sasl: Option<SaslConfig>,
    /// Capabilities asked for whenever the server offers them.
    wanted: Vec<String>,
    /// What the server offers, with values (`sasl` → `PLAIN,EXTERNAL`).
    offered: BTreeMap<String, String>,
    enabled: BTreeSet<String>,
    account: Option<String>,
    /// When `AUTHENTICATE <mechanism>` went out.
    login_started: Option<u64>,
}

impl CapNegotiation {
    pub(super) fn new(sasl: Option<SaslConfig>, capabilities: &[String]) -> Self {
        let mut wanted: Vec<String> = Vec::new();
        if sasl.is_some() {
            wanted.push("sasl".to_owned());
        }
        for cap in capabilities {
            if !wanted.contains(cap) {
                wanted.push(cap.clone());
            }
        }
        CapNegotiation {
            phase: if wanted.is_empty() {
                Phase::Off
            } else {
                Phase::Listing
            },
            sasl,
            wanted,
            offered: BTreeMap::new(),
            enabled: BTreeSet::new(),
            account: None,
            login_started: None,
        }
    }

    /// When the login gives up unless the server answers ([`LOGIN_TIMEOUT_MS`]).
    pub(super) fn deadline(&self) -> Option<u64> {
        match self.phase {
            Phase::Mechanism | Phase::Credentials => self
                .login_started
                .map(|t| t.saturating_add(LOGIN_TIMEOUT_MS)),
            _ => None,
        }
    }

    /// The deadline passed at `now`.
    pub(super) fn handle_timeout(&mut self, now: u64, steps: &mut Vec<Step>) {
        if self.deadline().is_some_and(|d| now >= d) {
            let why = format!(
                "the server did not answer AUTHENTICATE within {} s",
                LOGIN_TIMEOUT_MS / 1000
            );
            self.login_failed(&why, steps);
        }
    }

    /// The first line of all, before `PASS`/`NICK`/`USER`, when anything is wanted.
    pub(super) fn start(&self) -> Option<&'static str> {
        (self.phase == Phase::Listing).then_some("CAP LS 302")
    }

    /// Capabilities in force.
    pub(super) fn enabled(&self) -> impl Iterator<Item = &str> {
        self.enabled.iter().map(String::as_str)
    }

    /// The account SASL logged us in as (`900`).
    pub(super) fn account(&self) -> Option<&str> {
        self.account.as_deref()
    }

    /// Whether registration still waits for the negotiation (`CAP END` not sent yet).
    pub(super) fn holds_registration(&self) -> bool {
        !matches!(self.phase, Phase::Off | Phase::Done)
    }

    /// Takes one server line; returns whether it was the negotiation's (then `steps` says what
    /// to do).
    pub(super) fn handle(&mut self, now: u64, msg: &Message<'_>, steps: &mut Vec<Step>) -> bool {
        match msg.command {
            c if c.eq_ignore_ascii_case("CAP") => self.on_cap(now, msg, steps),
            c if c.eq_ignore_ascii_case("AUTHENTICATE") => self.on_authenticate(msg, steps),
            "900" => {
                // `900 <nick> <nick!user@host> <account> :You are now logged in as <account>`
                if let Some(account) = msg.param(2).filter(|a| !a.is_empty() && a.len() <= 64) {
                    self.account = Some(account.to_owned());
                }
            }
            "901" => self.account = None,
            "903" | "907" if self.phase == Phase::Credentials || self.phase == Phase::Mechanism => {
                let account = self
                    .account
                    .clone()
                    .or_else(|| self.sasl.as_ref().map(|s| s.username.clone()))
                    .unwrap_or_default();
                steps.push(Step::Event(SessionEvent::LoggedIn { account }));
                self.end(steps);
            }
            "902" | "904" | "905" | "906"
                if self.phase == Phase::Credentials || self.phase == Phase::Mechanism =>
            {
                let text = msg.trailing().unwrap_or_default();
                let why = format!("{} {text}", msg.command);
                self.login_failed(&why, steps);
            }
            "908" => {} // the server's mechanisms; 904 follows
            "421" if msg.param(1).is_some_and(|c| c.eq_ignore_ascii_case("CAP")) => {
                // A server without CAP: it registers us as it always did.
                if self.holds_registration() {
                    self.phase = Phase::Done;
                    self.unavailable("the server does not speak CAP, so no SASL", steps);
                }
            }
            "001" => {
                // Registered without our CAP END: the server ignored CAP. The session still
                // takes the 001.
                if self.holds_registration() {
                    self.phase = Phase::Done;
                    self.unavailable("the server registered us without CAP, so no SASL", steps);
                }
                return false;
            }
            _ => return false,
        }
        true
    }

    fn on_cap(&mut self, now: u64, msg: &Message<'_>, steps: &mut Vec<Step>) {
        let Some(sub) = msg.param(1) else { return };
        let list = msg.trailing().or_else(|| msg.param(2)).unwrap_or_default();
        let more = msg.param(2) == Some("*") && msg.param(3).is_some();
        match sub.to_ascii_uppercase().as_str() {
            "LS" if self.phase == Phase::Listing => {
                for cap in list.split(' ').filter(|c| !c.is_empty()) {
                    if self.offered.len() >= MAX_OFFERED {
                        break;
                    }
                    let (name, value) = cap.split_once('=').unwrap_or((cap, ""));
                    self.offered.insert(name.to_owned(), value.to_owned());
                }
                if !more {
                    self.request(steps);
                }
            }
            "ACK" if self.phase == Phase::Requesting => {
                for cap in list.split(' ').filter(|c| !c.is_empty()) {
                    match cap.strip_prefix('-') {
                        Some(off) => self.enabled.remove(off),
                        None => self.enabled.insert(cap.to_owned()),
                    };
                }
                match &self.sasl {
                    Some(sasl) if self.enabled.contains("sasl") => {
                        self.phase = Phase::Mechanism;
                        self.login_started = Some(now);
                        steps.push(Step::Send(format!(
                            "AUTHENTICATE {}",
                            sasl.mechanism.name()
                        )));
                    }
                    _ => self.end(steps),
                }
            }
            "NAK" if self.phase == Phase::Requesting => {
                self.end(steps);
                self.unavailable(&format!("the server refused CAP REQ :{list}"), steps);
            }
            "NEW" => {
                for cap in list.split(' ').filter(|c| !c.is_empty()) {
                    let (name, value) = cap.split_once('=').unwrap_or((cap, ""));
                    if self.offered.len() < MAX_OFFERED {
                        self.offered.insert(name.to_owned(), value.to_owned());
                    }
                }
            }
            "DEL" => {
                for cap in list.split(' ').filter(|c| !c.is_empty()) {
                    self.offered.remove(cap);
                    self.enabled.remove(cap);
                }
            }
            _ => {}
        }
    }

    /// After the listing: `CAP REQ` what is wanted and offered, or `CAP END`.
    fn request(&mut self, steps: &mut Vec<Step>) {
        let mechanism_offered = |values: &str, m: SaslMechanism| {
            values.is_empty() || values.split(',').any(|v| v.eq_ignore_ascii_case(m.name()))
        };
        let asked: Vec<&str> = self
            .wanted
            .iter()
            .map(String::as_str)
            .filter(|w| match (self.offered.get(*w), *w, &self.sasl) {
                (Some(values), "sasl", Some(sasl)) => mechanism_offered(values, sasl.mechanism),
                (Some(_), _, _) => true,
                (None, _, _) => false,
            })
            .collect();
        if asked.is_empty() {
            self.end(steps);
            let why = match (&self.sasl, self.offered.get("sasl")) {
                (Some(sasl), Some(values)) => format!(
                    "the server offers SASL {values}, not {}",
                    sasl.mechanism.name()
                ),
                _ => "the server offers no SASL".to_owned(),
            };
            self.unavailable(&why, steps);
            return;
        }
        self.phase = Phase::Requesting;
        steps.push(Step::Send(format!("CAP REQ :{}", asked.join(" "))));
    }

    fn on_authenticate(&mut self, msg: &Message<'_>, steps: &mut Vec<Step>) {
        if self.phase != Phase::Mechanism || msg.param(0) != Some("+") {
            return;
        }
        let Some(sasl) = &self.sasl else { return };
        let encoded = base64::engine::general_purpose::STANDARD.encode(sasl.payload());
        for piece in encoded.as_bytes().chunks(AUTHENTICATE_PIECE) {
            // base64 is ASCII: every piece is a str.
            steps.push(Step::Send(format!(
                "AUTHENTICATE {}",
                std::str::from_utf8(piece).unwrap_or("+")
            )));
        }
        // An empty payload, or one that ends on a whole piece, ends with `+`.
        if encoded.len() % AUTHENTICATE_PIECE == 0 {
            steps.push(Step::Send("AUTHENTICATE +".to_owned()));
        }
        self.phase = Phase::Credentials;
    }

    /// `CAP END`, exactly once.
    fn end(&mut self, steps: &mut Vec<Step>) {
        if self.holds_registration() {
            self.phase = Phase::Done;
            steps.push(Step::Send("CAP END".to_owned()));
        }
    }

    /// The login failed (`904` and the like).
    fn login_failed(&mut self, why: &str, steps: &mut Vec<Step>) {
        let required = self.sasl.as_ref().is_some_and(|s| s.required);
        let message = format!("SASL login failed: {why}");
        if required {
            self.phase = Phase::Done;
            steps.push(Step::Fail(DisconnectReason::LoginFailed { message }));
        } else {
            self.end(steps);
            steps.push(Step::Event(SessionEvent::LoginFailed { message }));
        }
    }

    /// SASL cannot even be tried.
    fn unavailable(&mut self, why: &str, steps: &mut Vec<Step>) {
        let Some(sasl) = &self.sasl else { return };
        let message = format!("cannot log in: {why}");
        if sasl.required {
            steps.push(Step::Fail(DisconnectReason::LoginFailed { message }));
        } else {
            steps.push(Step::Event(SessionEvent::LoginFailed { message }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::irc::{Session, SessionConfig, SessionOutput};

    fn drain(session: &mut Session, now: u64) -> (Vec<String>, Vec<SessionEvent>, u64) {
        let mut lines = Vec::new();
        let mut events = Vec::new();
        loop {
            match session.poll_output(now) {
                SessionOutput::Transmit(line) => lines.push(line),
                SessionOutput::Event(event) => events.push(event),
                SessionOutput::Timeout(deadline) => return (lines, events, deadline),
            }
        }
    }

    fn server(session: &mut Session, now: u64, lines: &[&str]) -> (Vec<String>, Vec<SessionEvent>) {
        for line in lines {
            session.handle_line(now, format!("{line}\r\n").as_bytes());
        }
        let (sent, events, _) = drain(session, now);
        (sent, events)
    }

    fn session(sasl: SaslConfig) -> Session {
        let mut config = SessionConfig::new("desk", &["#desk"]);
        config.sasl = Some(sasl);
        let mut session = Session::new(config, 0);
        let (sent, _, _) = drain(&mut session, 0);
        assert_eq!(sent, ["CAP LS 302", "NICK desk", "USER desk 0 * deskwire"]);
        session
    }

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn failed(message: &str) -> SessionEvent {
        SessionEvent::Disconnected {
            reason: DisconnectReason::LoginFailed {
                message: message.into(),
            },
        }
    }

    #[test]
    fn plain_logs_in_then_registers() {
        let mut s = session(SaslConfig::plain("alice", "s3cretpw"));
        // A listing over two lines, with values.
        let (sent, events) = server(
            &mut s,
            10,
            &[
                ":irc.test CAP * LS * :multi-prefix sasl=PLAIN,EXTERNAL",
                ":irc.test CAP * LS :account-tag message-tags",
            ],
        );
        assert_eq!((sent, events), (vec!["CAP REQ :sasl".to_owned()], vec![]));
        let (sent, _) = server(&mut s, 20, &[":irc.test CAP * ACK :sasl"]);
        assert_eq!(sent, ["AUTHENTICATE PLAIN"]);
        let (sent, _) = server(&mut s, 30, &["AUTHENTICATE +"]);
        assert_eq!(
            sent,
            [format!("AUTHENTICATE {}", b64(b"\0alice\0s3cretpw"))]
        );
        let (sent, events) = server(
            &mut s,
            40,
            &[
                ":irc.test 900 desk desk!desk@127.0.0.1 alice :You are now logged in as alice",
                ":irc.test 903 desk :SASL authentication successful",
            ],
        );
        assert_eq!(sent, ["CAP END"]);
        assert_eq!(
            events,
            [SessionEvent::LoggedIn {
                account: "alice".into()
            }]
        );
        assert_eq!(s.account(), Some("alice"));
        assert_eq!(s.capabilities(), ["sasl"]);
        let (sent, events) = server(&mut s, 50, &[":irc.test 001 desk :Welcome"]);
        assert_eq!(sent, ["JOIN #desk"]);
        assert_eq!(
            events,
            [SessionEvent::Registered {
                nick: "desk".into()
            }]
        );
    }

    #[test]
    fn a_wrong_password_ends_a_required_login_with_the_servers_words() {
        let mut s = session(SaslConfig::plain("alice", "wrong"));
        server(&mut s, 0, &[":irc.test CAP * LS :sasl=PLAIN,EXTERNAL"]);
        server(&mut s, 0, &[":irc.test CAP * ACK :sasl", "AUTHENTICATE +"]);
        let (sent, events) = server(
            &mut s,
            0,
            &[":irc.test 904 desk :SASL authentication failed"],
        );
        assert_eq!(sent, ["QUIT :login failed"]);
        assert_eq!(
            events,
            [failed("SASL login failed: 904 SASL authentication failed")]
        );
        assert!(s.is_closed());
    }

    #[test]
    fn a_preferred_login_that_fails_goes_on_and_says_so() {
        let mut sasl = SaslConfig::plain("alice", "wrong");
        sasl.required = false;
        let mut s = session(sasl);
        server(&mut s, 0, &[":irc.test CAP * LS :sasl"]);
        server(&mut s, 0, &[":irc.test CAP * ACK :sasl", "AUTHENTICATE +"]);
        let (sent, events) = server(
            &mut s,
            0,
            &[":irc.test 904 desk :SASL authentication failed"],
        );
        assert_eq!(sent, ["CAP END"]);
        assert_eq!(
            events,
            [SessionEvent::LoginFailed {
                message: "SASL login failed: 904 SASL authentication failed".into()
            }]
        );
        let (_, events) = server(&mut s, 0, &[":irc.test 001 desk :Welcome"]);
        assert!(matches!(events[0], SessionEvent::Registered { .. }));
        assert_eq!(s.account(), None);
    }

    #[test]
    fn servers_without_sasl_or_without_cap() {
        // Offers CAP but no SASL (ngircd lists only multi-prefix): CAP END, and a required
        // login ends the session.
        let mut s = session(SaslConfig::plain("alice", "pw"));
        let (sent, events) = server(&mut s, 0, &[":irc.test CAP * LS :multi-prefix"]);
        assert_eq!(sent, ["CAP END", "QUIT :login failed"]);
        assert_eq!(events, [failed("cannot log in: the server offers no SASL")]);
        // Offers SASL, but not the mechanism configured.
        let mut s = session(SaslConfig::plain("alice", "pw"));
        let (sent, events) = server(&mut s, 0, &[":irc.test CAP * LS :sasl=EXTERNAL"]);
        assert_eq!(sent, ["CAP END", "QUIT :login failed"]);
        assert_eq!(
            events,
            [failed(
                "cannot log in: the server offers SASL EXTERNAL, not PLAIN"
            )]
        );
        // No CAP at all (421): preferred, the session registers as it always did.
        let mut sasl = SaslConfig::plain("alice", "pw");
        sasl.required = false;
        let mut s = session(sasl);
        let (sent, events) = server(
            &mut s,
            0,
            &[
                ":irc.test 421 * CAP :Unknown command",
                ":irc.test 001 desk :Welcome",
            ],
        );
        assert_eq!(sent, ["JOIN #desk"]);
        assert_eq!(
            events,
            [
                SessionEvent::LoginFailed {
                    message: "cannot log in: the server does not speak CAP, so no SASL".into()
                },
                SessionEvent::Registered {
                    nick: "desk".into()
                }
            ]
        );
        // A request refused all or nothing.
        let mut s = session(SaslConfig::plain("alice", "pw"));
        server(&mut s, 0, &[":irc.test CAP * LS :sasl"]);
        let (sent, events) = server(&mut s, 0, &[":irc.test CAP * NAK :sasl"]);
        assert_eq!(sent, ["CAP END", "QUIT :login failed"]);
        assert_eq!(
            events,
            [failed("cannot log in: the server refused CAP REQ :sasl")]
        );
    }

    #[test]
    fn external_and_long_payloads_in_pieces() {
        let mut s = session(SaslConfig::external());
        server(&mut s, 0, &[":irc.test CAP * LS :sasl=PLAIN,EXTERNAL"]);
        let (sent, _) = server(&mut s, 0, &[":irc.test CAP * ACK :sasl"]);
        assert_eq!(sent, ["AUTHENTICATE EXTERNAL"]);
        let (sent, _) = server(&mut s, 0, &["AUTHENTICATE +"]);
        assert_eq!(sent, ["AUTHENTICATE +"]);
        // 300 payload bytes are 400 of base64: one whole piece, then `+`.
        let mut s = session(SaslConfig::plain("a", &"p".repeat(297)));
        server(
            &mut s,
            0,
            &[":irc.test CAP * LS :sasl", ":irc.test CAP * ACK :sasl"],
        );
        let (sent, _) = server(&mut s, 0, &["AUTHENTICATE +"]);
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0].len(), "AUTHENTICATE ".len() + 400);
        assert_eq!(sent[1], "AUTHENTICATE +");
        // 301 bytes: a whole piece and a short one, no `+`.
        let mut s = session(SaslConfig::plain("a", &"p".repeat(298)));
        server(
            &mut s,
            0,
            &[":irc.test CAP * LS :sasl", ":irc.test CAP * ACK :sasl"],
        );
        let (sent, _) = server(&mut s, 0, &["AUTHENTICATE +"]);
        assert_eq!(sent.len(), 2);
        assert!(sent[1].len() < "AUTHENTICATE ".len() + 400 && sent[1] != "AUTHENTICATE +");
    }

    #[test]
    fn a_server_that_never_answers_authenticate_is_given_up_on() {
        let mut s = session(SaslConfig::plain("alice", "pw"));
        server(&mut s, 1_000, &[":irc.test CAP * LS :sasl"]);
        server(&mut s, 1_000, &[":irc.test CAP * ACK :sasl"]);
        let (_, _, deadline) = drain(&mut s, 1_000);
        assert_eq!(deadline, 1_000 + LOGIN_TIMEOUT_MS);
        s.handle_timeout(deadline);
        let (sent, events, _) = drain(&mut s, deadline);
        assert_eq!(sent, ["QUIT :login failed"]);
        assert_eq!(
            events,
            [failed(
                "SASL login failed: the server did not answer AUTHENTICATE within 15 s"
            )]
        );
    }

    #[test]
    fn cap_notify_keeps_the_set_current_and_passwords_stay_hidden() {
        let mut s = session(SaslConfig::plain("alice", "hunter2"));
        server(
            &mut s,
            0,
            &[":irc.test CAP * LS :sasl", ":irc.test CAP * ACK :sasl"],
        );
        server(
            &mut s,
            0,
            &[
                "AUTHENTICATE +",
                ":irc.test 903 desk :ok",
                ":irc.test 001 desk :hi",
            ],
        );
        assert_eq!(s.capabilities(), ["sasl"]);
        server(&mut s, 0, &[":irc.test CAP desk DEL :sasl"]);
        assert!(s.capabilities().is_empty());
        let shown = format!("{:?}", SaslConfig::plain("alice", "hunter2"));
        assert!(
            !shown.contains("hunter2") && shown.contains("alice"),
            "{shown}"
        );
    }

    #[test]
    fn json_and_validation() {
        let config: SessionConfig = serde_json::from_str(
            r#"{"nick": "desk", "sasl": {"mechanism": "PLAIN", "username": "alice", "password": "pw"}}"#,
        )
        .unwrap();
        assert_eq!(config.sasl, Some(SaslConfig::plain("alice", "pw")));
        let external: SessionConfig = serde_json::from_str(
            r#"{"nick": "desk", "sasl": {"mechanism": "EXTERNAL", "required": false}}"#,
        )
        .unwrap();
        assert!(!external.sasl.unwrap().required);
        let mut bad = SessionConfig::new("desk", &[]);
        bad.sasl = Some(SaslConfig::plain("", "pw"));
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("username and a password")
        );
        assert!(
            serde_json::from_str::<SessionConfig>(
                r#"{"nick": "d", "sasl": {"mechanism": "SCRAM"}}"#
            )
            .is_err()
        );
    }
}
