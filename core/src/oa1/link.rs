//! What both endpoints share: filtering inbound lines down to our frames, learning our prefix,
//! the line budget, and the paced outgoing queue.

use std::collections::VecDeque;
use std::sync::Arc;

use super::auth::{self, Authenticator, Refusal};
use super::chunk::{self, MIN_PAYLOAD_BUDGET};
use super::escape::{escape, escape_spec};
use super::frame::{Frame, FrameType};
use super::pacing::{Gate, Pacing, TokenBucket};
use super::{Config, Event, LocalError, RefusalReason, RefusedFrame, Stats};
use crate::irc::{AccountWatch, Identity, Message, Privmsg, SenderPattern, within_line_limits};

/// An inbound line, parsed once by whoever read it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Parsed<'a, 'm> {
    /// Someone else's relayed `PRIVMSG` (the fast path: not fully parsed).
    Relayed(Privmsg<'a>),
    /// Any other line, fully parsed.
    Message(&'m Message<'a>),
}

/// A frame picked out of an inbound line, with who sent it.
#[derive(Debug)]
pub(crate) struct Inbound<'a> {
    /// The sender's nick.
    pub(crate) sender: &'a str,
    /// The sender as the server showed it: `nick!user@host`.
    pub(crate) source: &'a str,
    pub(crate) frame: Frame<'a, [u8]>,
}

/// A line waiting for a token, tagged with its request id so it can be withdrawn.
#[derive(Debug)]
struct Queued {
    /// Shared by every line of the stream (a 128 KiB message is ~580 lines).
    id: Arc<str>,
    line: String,
    payload_len: usize,
}

#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) config: Config,
    pub(crate) identity: Identity,
    pub(crate) stats: Stats,
    pub(crate) events: VecDeque<Event>,
    /// `config.allowed_sender`, read once. A bare endpoint's value that is not a valid pattern
    /// is taken as a literal nick (the per-connection engines refuse it when built).
    allowed: Option<SenderPattern>,
    /// For an `account:` allowed sender: who the server says is logged in to it.
    accounts: Option<AccountWatch>,
    /// With a shared secret: seals what goes out, checks what comes in.
    auth: Option<Authenticator>,
    pacer: Gate,
    outbox: VecDeque<Queued>,
    outbox_bytes: usize,
    /// While held, lines stay queued: the connection is not in the channel yet (or lost it).
    held: bool,
    /// The last frame dropped by the sender filter or the secret, for the host's diagnosis.
    last_refused: Option<RefusedFrame>,
}

impl Link {
    pub(crate) fn new(config: Config) -> Self {
        let allowed = config.allowed_sender.as_deref().map(|text| {
            SenderPattern::parse(text).unwrap_or_else(|_| SenderPattern::Nick(text.to_owned()))
        });
        let accounts = match &allowed {
            Some(SenderPattern::Account(account)) => Some(AccountWatch::new(account)),
            _ => None,
        };
        Link {
            identity: Identity::new(&config.nick),
            allowed,
            accounts,
            auth: config
                .auth
                .clone()
                .map(|a| Authenticator::new(a, &config.channel)),
            pacer: Gate::Own(TokenBucket::new(config.pacing)),
            config,
            stats: Stats::default(),
            events: VecDeque::new(),
            outbox: VecDeque::new(),
            outbox_bytes: 0,
            held: false,
            last_refused: None,
        }
    }

    /// The capabilities the server enabled that say who is logged in to an account (for an
    /// `account:` allowed sender): `account-tag`, `account-notify`.
    pub(crate) fn set_account_sources(&mut self, account_tag: bool, account_notify: bool) {
        if let Some(watch) = &mut self.accounts {
            watch.set_sources(account_tag, account_notify);
        }
    }

    /// Picks out an OA1 frame meant for us from one inbound line: a `PRIVMSG` to our channel,
    /// from someone else (and from the allowed sender when one is set), whose text is a frame.
    /// Returns the frame and its sender; everything else is counted and dropped.
    ///
    /// The frame's payload is not checked for UTF-8 here: the engines check each reassembled
    /// message once, which costs a fifth of checking every line.
    ///
    /// With a shared secret, only authenticated frames whose tag, age and freshness check out
    /// are returned (see [`super::auth`]); everything else is counted and dropped here, before
    /// reassembly.
    pub(crate) fn accept<'a>(&mut self, now: u64, line: &'a [u8]) -> Option<Inbound<'a>> {
        if line.len() > self.config.max_line_bytes
            || !within_line_limits(line, self.identity.line_limit())
        {
            self.note_invalid_line();
            return None;
        }
        // Other people's relayed messages, nearly every line, take the fast path; our own echo
        // and everything else go through the full parser so the identity can learn from them.
        match Privmsg::parse(line) {
            Some(msg) if !self.identity.is_me(msg.source.nick) => {
                self.accept_parsed(now, Parsed::Relayed(msg))
            }
            _ => match Message::parse(line) {
                Ok(msg) => self.accept_parsed(now, Parsed::Message(&msg)),
                Err(_) => {
                    self.note_invalid_line();
                    None
                }
            },
        }
    }

    /// Remembers a frame the sender filter or the secret dropped (only the last is kept).
    fn refuse(&mut self, source: &str, reason: RefusalReason) {
        let count = self.refused_count() + 1;
        match &mut self.last_refused {
            Some(last) => {
                last.source.clear();
                last.source.push_str(source);
                last.reason = reason;
                last.count = count;
            }
            None => {
                self.last_refused = Some(RefusedFrame {
                    source: source.to_owned(),
                    reason,
                    count,
                })
            }
        }
    }

    /// The last frame the sender filter or the secret dropped.
    pub(crate) fn last_refused(&self) -> Option<&RefusedFrame> {
        self.last_refused.as_ref()
    }

    /// How many frames the sender filter or the secret has dropped.
    pub(crate) fn refused_count(&self) -> u64 {
        self.last_refused.as_ref().map_or(0, |r| r.count)
    }

    /// A line that was not an IRC message (or was over `max_line_bytes`): counted.
    pub(crate) fn note_invalid_line(&mut self) {
        self.stats.lines_in += 1;
        self.stats.invalid_lines += 1;
        self.stats.ignored += 1;
    }

    /// [`Link::accept`] for a line its caller has parsed already (a connection engine parses
    /// each line once for the endpoint, the session and the member list).
    pub(crate) fn accept_parsed<'a>(
        &mut self,
        now: u64,
        parsed: Parsed<'a, '_>,
    ) -> Option<Inbound<'a>> {
        self.stats.lines_in += 1;
        let (source, target, text, mine, account) = match parsed {
            // The fast path is for lines without tags: no account.
            Parsed::Relayed(msg) => (msg.source, msg.target, msg.text, false, None),
            Parsed::Message(msg) => {
                self.identity.observe(msg);
                if let Some(watch) = &mut self.accounts {
                    watch.observe(&self.identity, &self.config.channel, msg);
                }
                match (msg.source, msg.params()) {
                    (Some(source), [target, text]) if msg.is("PRIVMSG") => {
                        // Checked after `observe`, which may have just learned a new nick.
                        let mine = self.identity.is_me(source.nick);
                        (source, *target, text.as_bytes(), mine, msg.tag("account"))
                    }
                    _ => {
                        self.stats.ignored += 1;
                        return None;
                    }
                }
            }
        };
        let casemap = self.identity.casemapping();
        if mine || !text.starts_with(b"OA1") || !casemap.eq(target, &self.config.channel) {
            self.stats.ignored += 1;
            return None;
        }
        let authenticated = text.starts_with(b"OA1A ");
        if !authenticated && !text.starts_with(b"OA1 ") {
            self.stats.ignored += 1;
            return None;
        }
        let account = match &self.accounts {
            Some(watch) => watch.account_of(casemap, source.nick, account),
            None => account,
        };
        if let Some(allowed) = &self.allowed
            && !allowed.matches_message(casemap, &source, account.as_deref())
        {
            self.stats.disallowed_sender += 1;
            self.stats.ignored += 1;
            let allowed = self.config.allowed_sender.clone().unwrap_or_default();
            self.refuse(source.raw, RefusalReason::DisallowedSender(allowed));
            return None;
        }
        let parsed = match (&mut self.auth, authenticated) {
            (None, false) => Frame::parse_bytes(text),
            (Some(auth), true) => match auth.open(now, text) {
                Ok(inner) => Frame::parse_fields(text, text.len() - inner.len()),
                Err(refusal) => {
                    self.stats.ignored += 1;
                    let (counter, reason) = match refusal {
                        Refusal::Malformed => (
                            &mut self.stats.malformed_frames,
                            RefusalReason::MalformedSeal,
                        ),
                        Refusal::Forged => (&mut self.stats.forged, RefusalReason::Forged),
                        Refusal::Expired => (&mut self.stats.expired, RefusalReason::Expired),
                        Refusal::Replayed => (&mut self.stats.replayed, RefusalReason::Replayed),
                    };
                    *counter += 1;
                    self.refuse(source.raw, reason);
                    return None;
                }
            },
            (Some(_), false) => {
                self.stats.unauthenticated += 1;
                self.stats.ignored += 1;
                self.refuse(source.raw, RefusalReason::Unauthenticated);
                return None;
            }
            (None, true) => {
                self.stats.auth_unexpected += 1;
                self.stats.ignored += 1;
                self.refuse(source.raw, RefusalReason::AuthUnexpected);
                return None;
            }
        };
        match parsed {
            Some(frame) => {
                self.stats.frames_in += 1;
                Some(Inbound {
                    sender: source.nick,
                    source: source.raw,
                    frame,
                })
            }
            None => {
                self.stats.malformed_frames += 1;
                self.stats.ignored += 1;
                None
            }
        }
    }

    /// Escaped payload bytes that fit in frame `seq` of a `kind` stream for `id`. `long`: the
    /// peer is a deskwire end (it offered or uses deskwire's extensions), so the line may be
    /// as long as the server's `LINELEN`; a spec-only peer may read 512 bytes at most.
    pub(crate) fn payload_budget(&self, kind: FrameType, id: &str, seq: u32, long: bool) -> usize {
        let max_line = match long {
            true => self.identity.line_limit(),
            false => crate::irc::MAX_LINE_BYTES,
        };
        let mut text_budget = self
            .identity
            .privmsg_text_budget_within(&self.config.channel, max_line);
        if self.auth.is_some() {
            text_budget = text_budget.saturating_sub(auth::OVERHEAD);
        }
        let fits = text_budget.saturating_sub(Frame::header_len(kind, id, seq, false));
        if self.config.adaptive_payload {
            fits
        } else {
            fits.min(self.config.max_frame_payload_bytes)
        }
    }

    /// Checks that frames for `id` have room for a payload at all.
    pub(crate) fn check_room(&self, kind: FrameType, id: &str) -> Result<(), LocalError> {
        // Seq 9999 is a frame deep into a 128 KiB message; budgets only shrink with more digits.
        if self.payload_budget(kind, id, 9999, false) < MIN_PAYLOAD_BUDGET {
            return Err(LocalError::NoRoom(self.config.channel.clone()));
        }
        Ok(())
    }

    /// The `PRIVMSG` line carrying one frame.
    pub(crate) fn frame_line(&self, frame: &Frame<'_>) -> String {
        // Exact, so `Frame::write` never grows it (a realloc per line cost ~15% of encoding),
        // plus the CRLF a connection engine appends for the socket.
        let mut line = String::with_capacity(
            "PRIVMSG  :".len() + self.config.channel.len() + frame.text_len() + "\r\n".len(),
        );
        line.push_str("PRIVMSG ");
        line.push_str(&self.config.channel);
        line.push_str(" :");
        frame.write(&mut line);
        line
    }

    /// Queues a whole stream for `id`, cut into frames that fit. `extended`: the peer decodes
    /// deskwire's escapes, so a frame may end with `\s` (see [`chunk::split_spec`] otherwise).
    pub(crate) fn queue_stream(
        &mut self,
        kind: FrameType,
        id: &str,
        escaped: &str,
        extended: bool,
    ) {
        // A peer that decodes deskwire's escapes is a deskwire end: it reads long lines.
        let budget = |seq| self.payload_budget(kind, id, seq, extended);
        let chunks = match extended {
            true => chunk::split(escaped, budget),
            false => chunk::split_spec(escaped, budget),
        };
        let last = chunks.len();
        let id_shared: Arc<str> = Arc::from(id);
        self.outbox.reserve(last);
        for (i, chunk) in chunks.into_iter().enumerate() {
            let payload = match extended {
                true => chunk::wire_payload(chunk),
                false => std::borrow::Cow::Borrowed(chunk),
            };
            let frame = Frame {
                kind,
                id,
                seq: i as u32 + 1,
                more: i + 1 < last,
                payload: &*payload,
            };
            let line = self.frame_line(&frame);
            self.queue(id_shared.clone(), line, payload.len());
        }
    }

    /// Whether frames are authenticated: only a peer holding the secret (a deskwire one) reads
    /// them, so deskwire's escapes may be used, and must be, since a server that trims a final
    /// space would break the frame's tag.
    pub(crate) fn authenticated(&self) -> bool {
        self.auth.is_some()
    }

    /// Queues a one-frame message (`CANCEL`, `ACCEPT`) with `text` as its payload, escaped
    /// and cut to fit.
    pub(crate) fn queue_single(&mut self, kind: FrameType, id: &str, text: &str) {
        let budget = self
            .payload_budget(kind, id, 1, false)
            .max(MIN_PAYLOAD_BUDGET);
        let (escaped, wire);
        let payload = if self.authenticated() {
            escaped = escape(text);
            wire = chunk::wire_payload(&escaped[..chunk::cut(&escaped, 0, budget)]);
            &*wire
        } else {
            escaped = escape_spec(text);
            &escaped[..chunk::cut_spec(&escaped, 0, budget, true)]
        };
        let frame = Frame {
            kind,
            id,
            seq: 1,
            more: false,
            payload,
        };
        let line = self.frame_line(&frame);
        self.queue(id.into(), line, payload.len());
    }

    pub(crate) fn queue(&mut self, id: Arc<str>, line: String, payload_len: usize) {
        self.outbox_bytes += line.len();
        self.outbox.push_back(Queued {
            id,
            line,
            payload_len,
        });
    }

    /// Withdraws every queued line of `id` (a cancelled or timed-out request).
    pub(crate) fn withdraw(&mut self, id: &str) {
        self.outbox.retain(|q| &*q.id != id);
        self.outbox_bytes = self.outbox.iter().map(|q| q.line.len()).sum();
    }

    /// Whether queued lines wait for a pacing token (not for the hold to end).
    pub(crate) fn has_queued(&self) -> bool {
        !self.held && !self.outbox.is_empty()
    }

    /// Holds lines back, or lets them go again.
    pub(crate) fn set_held(&mut self, held: bool) {
        self.held = held;
    }

    pub(crate) fn is_held(&self) -> bool {
        self.held
    }

    /// Drops every queued line (the connection is gone).
    pub(crate) fn clear_queue(&mut self) {
        self.outbox.clear();
        self.outbox_bytes = 0;
    }

    pub(crate) fn queued_bytes(&self) -> usize {
        self.outbox_bytes
    }

    /// When the next line may go.
    pub(crate) fn ready_at(&self, now: u64) -> u64 {
        self.pacer.ready_at(now)
    }

    /// Paces lines from now on as `pacing` says (a fresh bucket: a group or burst may go).
    pub(crate) fn set_pacing(&mut self, pacing: Pacing) {
        self.pacer = Gate::Own(TokenBucket::new(pacing));
    }

    /// Who lets the next line go: the connection sets a shared gate for its channels.
    pub(crate) fn gate_mut(&mut self) -> &mut Gate {
        &mut self.pacer
    }

    /// The pacing in force.
    pub(crate) fn pacing(&self) -> Pacing {
        self.pacer.pacing()
    }

    /// Takes a pacing token if one is there.
    pub(crate) fn try_take_token(&mut self, now: u64) -> bool {
        self.pacer.try_take(now)
    }

    /// The next queued line, if pacing lets it go now.
    pub(crate) fn take_queued(&mut self, now: u64) -> Option<String> {
        if self.held || self.outbox.is_empty() || !self.pacer.try_take(now) {
            return None;
        }
        let queued = self.outbox.pop_front()?;
        self.outbox_bytes -= queued.line.len();
        self.count_frame_out(queued.payload_len);
        Some(self.seal(now, queued.line))
    }

    /// The line as it goes out at `now`: unchanged, or with the frame authenticated (sealed
    /// when sent, not when queued, so a frame held back by pacing is not older than it looks).
    pub(crate) fn seal(&mut self, now: u64, line: String) -> String {
        let Some(auth) = &mut self.auth else {
            return line;
        };
        let text_start = "PRIVMSG ".len() + self.config.channel.len() + " :".len();
        let mut sealed = String::with_capacity(line.len() + auth::OVERHEAD);
        sealed.push_str(&line[..text_start]);
        sealed.push_str(&auth.seal(now, &line[text_start..]));
        sealed
    }

    pub(crate) fn count_frame_out(&mut self, payload_len: usize) {
        self.stats.lines_out += 1;
        self.stats.frames_out += 1;
        self.stats.payload_bytes_out += payload_len as u64;
    }
}
