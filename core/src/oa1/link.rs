//! What both endpoints share: filtering inbound lines down to our frames, learning our prefix,
//! the line budget, and the paced outgoing queue.

use std::collections::VecDeque;

use super::auth::{self, Authenticator, Refusal};
use super::chunk::{self, MIN_PAYLOAD_BUDGET};
use super::escape::{escape, escape_into, escape_spec};
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

/// Lines waiting for a pacing token, back to back in one buffer: queuing a 128 KiB message
/// (~580 lines) writes them there without a `String` each, and they leave as copies (or
/// straight into the host's buffer, see [`Link::take_queued_into`]). A `String` and a shared id
/// per line cost a fifth of `Client::request`, the id's reference counting alone a tenth.
#[derive(Debug, Default)]
struct Outbox {
    /// The lines' text, each `PRIVMSG <channel> :<frame>` without CRLF; the first at `head`.
    text: String,
    head: usize,
    lines: VecDeque<QueuedLine>,
}

#[derive(Debug, Clone, Copy)]
struct QueuedLine {
    len: usize,
    payload_len: usize,
}

impl Outbox {
    /// Ends the line appended to `text` since `from` (`payload_len`: its frame's payload).
    fn push(&mut self, from: usize, payload_len: usize) {
        self.lines.push_back(QueuedLine {
            len: self.text.len() - from,
            payload_len,
        });
    }

    fn front(&self) -> Option<(&str, QueuedLine)> {
        let line = *self.lines.front()?;
        Some((&self.text[self.head..self.head + line.len], line))
    }

    fn pop(&mut self) {
        let Some(line) = self.lines.pop_front() else {
            return;
        };
        self.head += line.len;
        if self.lines.is_empty() {
            self.text.clear();
            self.head = 0;
        } else if self.head > 64 * 1024 && self.head * 2 > self.text.len() {
            // Sent lines are given back now and then, not line by line (a paced stream
            // trickles out for minutes).
            self.text.drain(..self.head);
            self.head = 0;
        }
    }

    fn bytes(&self) -> usize {
        self.text.len() - self.head
    }

    /// Keeps the lines `keep` says yes to, in order.
    fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        let mut text = String::with_capacity(self.bytes());
        let mut lines = VecDeque::with_capacity(self.lines.len());
        let mut at = self.head;
        for line in &self.lines {
            let body = &self.text[at..at + line.len];
            at += line.len;
            if keep(body) {
                text.push_str(body);
                lines.push_back(*line);
            }
        }
        *self = Outbox {
            text,
            head: 0,
            lines,
        };
    }

    fn clear(&mut self) {
        *self = Outbox::default();
    }
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
    outbox: Outbox,
    /// While held, lines stay queued: the connection is not in the channel yet (or lost it).
    held: bool,
    /// The last frame dropped by the sender filter or the secret, for the host's diagnosis.
    last_refused: Option<RefusedFrame>,
    /// Where a queued line is sealed on its way into a host's buffer (reused).
    sealing: String,
}

/// How many bytes of text the escaped `escaped` stands for (it holds whole escape pairs).
fn unescaped_len(escaped: &[u8]) -> usize {
    let (mut at, mut len) = (0, 0);
    while at < escaped.len() {
        at += if escaped[at] == b'\\' { 2 } else { 1 };
        len += 1;
    }
    len
}

/// What [`Link::take_queued_into`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// A line went into the buffer.
    Line,
    /// Nothing may go now (none queued, held, or waiting for pacing).
    Nothing,
    /// A line may go but the buffer has no room for it.
    NoRoom,
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
            outbox: Outbox::default(),
            held: false,
            last_refused: None,
            sealing: String::new(),
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

    /// The most bytes one of our lines can take with its CRLF (sealed or not): a relayed line
    /// holds it and the sender's prefix within the server's `LINELEN`.
    pub(crate) fn longest_line(&self) -> usize {
        self.identity.line_limit().max(crate::irc::MAX_LINE_BYTES)
    }

    /// Checks that frames for `id` have room for a payload at all.
    pub(crate) fn check_room(&self, kind: FrameType, id: &str) -> Result<(), LocalError> {
        // Seq 9999 is a frame deep into a 128 KiB message; budgets only shrink with more digits.
        if self.payload_budget(kind, id, 9999, false) < MIN_PAYLOAD_BUDGET {
            return Err(LocalError::NoRoom(self.config.channel.clone()));
        }
        Ok(())
    }

    /// Bytes of our lines before the frame text: `PRIVMSG <channel> :`.
    fn text_start(&self) -> usize {
        "PRIVMSG ".len() + self.config.channel.len() + " :".len()
    }

    /// The `PRIVMSG` line carrying one frame.
    pub(crate) fn frame_line(&self, frame: &Frame<'_>) -> String {
        // Exact, so `Frame::write` never grows it (a realloc per line cost ~15% of encoding),
        // plus the CRLF a connection engine appends for the socket and the room sealing takes.
        let seal_room = if self.auth.is_some() {
            auth::OVERHEAD
        } else {
            0
        };
        let mut line =
            String::with_capacity(self.text_start() + frame.text_len() + "\r\n".len() + seal_room);
        line.push_str("PRIVMSG ");
        line.push_str(&self.config.channel);
        line.push_str(" :");
        frame.write(&mut line);
        line
    }

    /// Appends the line of one frame to the outbox. `chunk` is the escaped payload as cut;
    /// `extended`: one that ends with a space carries it as `\s` (see [`chunk::wire_payload`]).
    fn push_frame_line(
        &mut self,
        kind: FrameType,
        id: &str,
        seq: u32,
        more: bool,
        chunk: &str,
        extended: bool,
    ) {
        let (body, space) = match chunk.strip_suffix(' ') {
            Some(body) if extended => (body, true),
            _ => (chunk, false),
        };
        let text = &mut self.outbox.text;
        let from = text.len();
        text.push_str("PRIVMSG ");
        text.push_str(&self.config.channel);
        text.push_str(" :");
        Frame::write_header(kind, id, seq, more, chunk.is_empty(), text);
        text.push_str(body);
        if space {
            text.push_str("\\s");
        }
        let payload_len = body.len() + if space { 2 } else { 0 };
        self.outbox.push(from, payload_len);
    }

    /// Queues a whole stream for `id`, cut into frames that fit. `extended`: the peer decodes
    /// deskwire's escapes, so a frame may end with `\s` (see [`chunk::split_spec`] otherwise).
    ///
    /// Each frame is cut and written straight into the outbox, one copy of the escaped text.
    pub(crate) fn queue_stream(
        &mut self,
        kind: FrameType,
        id: &str,
        escaped: &str,
        extended: bool,
    ) {
        // Room for the text and every line's prefix and header (frames rarely hold less than
        // 200 bytes), so the buffer is not regrown and copied while it fills.
        let first_budget = self
            .payload_budget(kind, id, 1, extended)
            .max(MIN_PAYLOAD_BUDGET);
        let lines = escaped.len() / first_budget.min(200) + 1;
        let per_line = self.text_start() + Frame::header_len(kind, id, u32::MAX, false) + 2;
        self.outbox.text.reserve(escaped.len() + lines * per_line);
        let mut start = 0;
        let mut seq = 1u32;
        loop {
            // A peer that decodes deskwire's escapes is a deskwire end: it reads long lines.
            let budget = self
                .payload_budget(kind, id, seq, extended)
                .max(MIN_PAYLOAD_BUDGET);
            let end = match extended {
                true => chunk::cut(escaped, start, budget),
                false => chunk::cut_spec(escaped, start, budget, true),
            };
            let more = end < escaped.len();
            self.push_frame_line(kind, id, seq, more, &escaped[start..end], extended);
            if !more {
                return;
            }
            start = end;
            seq += 1;
        }
    }

    /// Queues `text` as a whole stream for `id`: [`Link::queue_stream`] of its escaped form
    /// (deskwire's escapes when `extended`, the spec's otherwise), byte for byte, but escaped
    /// straight into the outbox a frame at a time, without the escaped text in a buffer of its
    /// own to be copied from.
    ///
    /// Each frame escapes a little more of the text than can fit (at least one escaped byte
    /// over the budget, so the cut is the one the whole escaped text would get), and what is
    /// cut off is escaped again for the next frame.
    pub(crate) fn queue_text(&mut self, kind: FrameType, id: &str, text: &str, extended: bool) {
        // The spec's escaping is deskwire's with NUL made U+FFFD first (see
        // `escape_spec_into`): done up front, so each byte of what is escaped below escapes
        // to one byte or a pair.
        let replaced;
        let text = match !extended && memchr::memchr(0, text.as_bytes()).is_some() {
            true => {
                replaced = text.replace('\0', "\u{FFFD}");
                replaced.as_str()
            }
            false => text,
        };
        let first_budget = self
            .payload_budget(kind, id, 1, extended)
            .max(MIN_PAYLOAD_BUDGET);
        let lines = text.len() / first_budget.min(200) + 1;
        let per_line = self.text_start() + Frame::header_len(kind, id, u32::MAX, false) + 4;
        self.outbox
            .text
            .reserve(text.len() + text.len() / 8 + lines * per_line);
        let mut src = 0;
        let mut seq = 1u32;
        loop {
            let budget = self
                .payload_budget(kind, id, seq, extended)
                .max(MIN_PAYLOAD_BUDGET);
            let out = &mut self.outbox.text;
            let from = out.len();
            out.push_str("PRIVMSG ");
            out.push_str(&self.config.channel);
            out.push_str(" :");
            // Written as if more follow and the payload is not empty; both fixed below.
            Frame::write_header(kind, id, seq, true, false, out);
            let payload_at = out.len();
            // Every byte escapes to at least one, so `budget + 1` bytes of text give more
            // than `budget` escaped: enough to place the cut.
            let mut window_end = (src + budget + 1).min(text.len());
            while !text.is_char_boundary(window_end) {
                window_end += 1;
            }
            escape_into(&text[src..window_end], out);
            let escaped = &out[payload_at..];
            // Not the whole rest of the text: then the window holds more than `budget` bytes,
            // so the cut is before its end, as it would be in the whole escaped text.
            let end = match extended {
                true => chunk::cut(escaped, 0, budget),
                false => chunk::cut_spec(escaped, 0, budget, true),
            };
            let last = window_end == text.len() && end == escaped.len();
            // What was cut off is a few bytes: counted back from there (a cut never splits a
            // pair), not forward through the whole frame.
            let consumed = (window_end - src) - unescaped_len(&escaped.as_bytes()[end..]);
            out.truncate(payload_at + end);
            let mut payload_len = end;
            if end == 0 {
                out.pop(); // the space before a payload there is none of
            } else if extended && out.ends_with(' ') {
                out.pop();
                out.push_str("\\s");
                payload_len += 1;
            }
            if last {
                // The `1` of MORE, before the payload's space.
                let more_at = payload_at - 2;
                out.replace_range(more_at..more_at + 1, "0");
            }
            self.outbox.push(from, payload_len);
            if last {
                return;
            }
            src += consumed;
            seq += 1;
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
        let extended = self.authenticated();
        let escaped = match extended {
            true => escape(text),
            false => escape_spec(text),
        };
        let end = match extended {
            true => chunk::cut(&escaped, 0, budget),
            false => chunk::cut_spec(&escaped, 0, budget, true),
        };
        self.push_frame_line(kind, id, 1, false, &escaped[..end], extended);
    }

    /// Withdraws every queued line of `id` (a cancelled or timed-out request).
    pub(crate) fn withdraw(&mut self, id: &str) {
        // Every queued line is one of ours, `PRIVMSG <channel> :OA1 ...`: its id is read back.
        let text_start = self.text_start();
        self.outbox.retain(|line| {
            Frame::parse_bytes(&line.as_bytes()[text_start..]).is_none_or(|f| f.id != id)
        });
    }

    /// Whether queued lines wait for a pacing token (not for the hold to end).
    pub(crate) fn has_queued(&self) -> bool {
        !self.held && !self.outbox.lines.is_empty()
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
    }

    /// Lines waiting in the outbox.
    pub(crate) fn queued_lines(&self) -> usize {
        self.outbox.lines.len()
    }

    pub(crate) fn queued_bytes(&self) -> usize {
        self.outbox.bytes()
    }

    /// Room for the queued lines as [`Link::take_queued_into`] writes them (CRLF, seals), at
    /// most `max_len` bytes: reserved once, so a host's buffer is not regrown and copied
    /// while a long message goes in.
    pub(crate) fn reserve_queued(&self, out: &mut Vec<u8>, max_len: usize) {
        let per_line = "\r\n".len()
            + if self.auth.is_some() {
                auth::OVERHEAD
            } else {
                0
            };
        let wanted = self.outbox.bytes() + self.outbox.lines.len() * per_line;
        out.reserve(wanted.min(max_len.saturating_sub(out.len())));
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
        let mut out = String::new();
        self.take_queued_with(now, |line| {
            // Room for the CRLF a connection engine appends for the socket.
            out.reserve_exact(line.len() + "\r\n".len());
            out.push_str(line);
        })
        .then_some(out)
    }

    /// [`Link::take_queued`] onto the end of `out`, followed by CRLF, without a `String` for the
    /// line. `room`: the line goes only if `out` then holds at most that many bytes; when it
    /// would not, nothing is taken and [`Taken::NoRoom`] says so.
    pub(crate) fn take_queued_into(&mut self, now: u64, out: &mut Vec<u8>, room: usize) -> Taken {
        let Some((line, _)) = self.outbox.front() else {
            return Taken::Nothing;
        };
        let sealed_len = line.len()
            + if self.auth.is_some() {
                auth::OVERHEAD
            } else {
                0
            };
        if out.len() + sealed_len + 2 > room {
            return if self.held || self.pacer.ready_at(now) > now {
                Taken::Nothing
            } else {
                Taken::NoRoom
            };
        }
        match self.take_queued_with(now, |line| {
            out.extend_from_slice(line.as_bytes());
            out.extend_from_slice(b"\r\n");
        }) {
            true => Taken::Line,
            false => Taken::Nothing,
        }
    }

    /// Takes the next queued line if pacing lets it go now, and gives it to `send` as it goes
    /// out (sealed with a shared secret); false when nothing went.
    fn take_queued_with(&mut self, now: u64, send: impl FnOnce(&str)) -> bool {
        if self.held || self.outbox.lines.is_empty() || !self.pacer.try_take(now) {
            return false;
        }
        let text_start = self.text_start();
        let Some((line, queued)) = self.outbox.front() else {
            return false;
        };
        match &mut self.auth {
            None => send(line),
            Some(auth) => {
                let (head, frame) = line.split_at(text_start);
                let inner = frame.strip_prefix("OA1 ").unwrap_or(frame);
                let prefix = auth.seal_prefix(now, inner);
                let sealed = &mut self.sealing;
                sealed.clear();
                sealed.push_str(head);
                sealed.push_str(prefix.as_str());
                sealed.push_str(inner);
                send(sealed);
            }
        }
        self.outbox.pop();
        self.count_frame_out(queued.payload_len);
        true
    }

    /// The line as it goes out at `now`: unchanged, or with the frame authenticated (sealed
    /// when sent, not when queued, so a frame held back by pacing is not older than it looks).
    /// Sealed where it lies: a line from [`Link::frame_line`] has the room already.
    pub(crate) fn seal(&mut self, now: u64, mut line: String) -> String {
        let text_start = self.text_start();
        let Some(auth) = &mut self.auth else {
            return line;
        };
        let frame = &line[text_start..];
        let marker = if frame.starts_with("OA1 ") { 4 } else { 0 };
        let prefix = auth.seal_prefix(now, &frame[marker..]);
        line.replace_range(text_start..text_start + marker, prefix.as_str());
        line
    }

    pub(crate) fn count_frame_out(&mut self, payload_len: usize) {
        self.stats.lines_out += 1;
        self.stats.frames_out += 1;
        self.stats.payload_bytes_out += payload_len as u64;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::oa1::AuthConfig;

    fn link(budget: usize, auth: bool) -> Link {
        let mut config = Config::new("#desk", "desk");
        config.pacing = Pacing::UNLIMITED;
        config.adaptive_payload = false;
        config.max_frame_payload_bytes = budget;
        if auth {
            config.auth = Some(AuthConfig::new(b"secret".to_vec(), 1_790_000_000_000));
        }
        Link::new(config)
    }

    /// The lines of a stream as they were made before the outbox: the whole escaped text cut
    /// by `chunk::split`/`split_spec`, each chunk made a wire payload and a `String` of its own.
    fn reference_lines(link: &Link, id: &str, escaped: &str, extended: bool) -> Vec<String> {
        let budget = |seq| link.payload_budget(FrameType::Res, id, seq, extended);
        let chunks = match extended {
            true => chunk::split(escaped, budget),
            false => chunk::split_spec(escaped, budget),
        };
        let last = chunks.len();
        chunks
            .iter()
            .enumerate()
            .map(|(i, chunk)| {
                let payload = match extended {
                    true => chunk::wire_payload(chunk),
                    false => std::borrow::Cow::Borrowed(*chunk),
                };
                link.frame_line(&Frame {
                    kind: FrameType::Res,
                    id,
                    seq: i as u32 + 1,
                    more: i + 1 < last,
                    payload: &payload,
                })
            })
            .collect()
    }

    fn take_all(link: &mut Link) -> Vec<String> {
        std::iter::from_fn(|| link.take_queued(0)).collect()
    }

    proptest! {
        #[test]
        fn queued_lines_are_the_chunks_of_the_escaped_text(
            text in "[ a\\\\\n\t\0€🙂]{0,120}|[ a\\\\\n€🙂]{900,1300}",
            budget in prop_oneof![4usize..24, Just(100_000)],
            extended: bool,
        ) {
            let mut link = link(budget, false);
            let escaped = match extended {
                true => escape(&text),
                false => escape_spec(&text),
            };
            let expected = reference_lines(&link, "abc", &escaped, extended);
            link.queue_stream(FrameType::Res, "abc", &escaped, extended);
            prop_assert_eq!(link.queued_bytes(), expected.iter().map(String::len).sum::<usize>());
            let stats_before = link.stats.payload_bytes_out;
            let lines = take_all(&mut link);
            prop_assert_eq!(&lines, &expected);
            // Every line within the 512-byte limit a spec-only desk reads, with the
            // relay's longest prefix and CRLF.
            for line in &lines {
                prop_assert!(line.len() + link.identity.relay_prefix_len() + 2 <= 512);
            }
            let payloads: usize = lines
                .iter()
                .map(|l| Frame::parse(&l["PRIVMSG #desk :".len()..]).unwrap().payload.len())
                .sum();
            prop_assert_eq!(link.stats.payload_bytes_out - stats_before, payloads as u64);
            prop_assert_eq!(link.queued_bytes(), 0);
        }
    }

    proptest! {
        #[test]
        fn text_escaped_into_the_outbox_makes_the_same_lines(
            text in "[ a\\\\\n\t\0€🙂]{0,120}|[ ab\\\\\n€🙂]{900,1300}|[ ]{0,40}",
            budget in prop_oneof![4usize..24, Just(100_000)],
            extended: bool,
        ) {
            let mut from_escaped = link(budget, false);
            let mut from_text = link(budget, false);
            let escaped = match extended {
                true => escape(&text),
                false => escape_spec(&text),
            };
            from_escaped.queue_stream(FrameType::Req, "id7", &escaped, extended);
            from_text.queue_text(FrameType::Req, "id7", &text, extended);
            prop_assert_eq!(from_text.queued_bytes(), from_escaped.queued_bytes());
            prop_assert_eq!(take_all(&mut from_text), take_all(&mut from_escaped));
            prop_assert_eq!(from_text.stats, from_escaped.stats);
        }
    }

    #[test]
    fn lines_go_into_a_buffer_only_while_they_fit_and_end_with_crlf() {
        let mut from_queue = link(50, false);
        let mut into_buffer = link(50, false);
        let text = escape_spec(&"ab\tc€ ".repeat(40));
        for l in [&mut from_queue, &mut into_buffer] {
            l.queue_stream(FrameType::Req, "id1", &text, false);
        }
        let lines = take_all(&mut from_queue);
        assert!(lines.len() > 3, "{lines:?}");
        let mut out = b"kept".to_vec();
        // Room for the first two lines and part of the third.
        let room = 4 + lines[0].len() + lines[1].len() + 4 + lines[2].len();
        assert_eq!(into_buffer.take_queued_into(0, &mut out, room), Taken::Line);
        assert_eq!(into_buffer.take_queued_into(0, &mut out, room), Taken::Line);
        assert_eq!(
            into_buffer.take_queued_into(0, &mut out, room),
            Taken::NoRoom
        );
        assert_eq!(
            out,
            format!("kept{}\r\n{}\r\n", lines[0], lines[1]).into_bytes()
        );
        let mut rest = Vec::new();
        while into_buffer.take_queued_into(0, &mut rest, usize::MAX) == Taken::Line {}
        let expected: String = lines[2..].iter().map(|l| format!("{l}\r\n")).collect();
        assert_eq!(String::from_utf8(rest).unwrap(), expected);
        assert_eq!(into_buffer.queued_bytes(), 0);
        assert_eq!(into_buffer.stats.lines_out, from_queue.stats.lines_out);
        assert_eq!(
            into_buffer.stats.payload_bytes_out,
            from_queue.stats.payload_bytes_out
        );
        // Held lines stay, whatever the room.
        into_buffer.queue_single(FrameType::Cancel, "id1", "bye");
        into_buffer.set_held(true);
        assert_eq!(into_buffer.take_queued_into(0, &mut out, 0), Taken::Nothing);
        assert_eq!(into_buffer.take_queued(0), None);
    }

    #[test]
    fn sealing_in_place_and_into_a_buffer_match_the_reference_seal() {
        let mut reference = link(200, true);
        let mut queued = link(200, true);
        let mut buffered = link(200, true);
        let text = escape(&"sealed output ".repeat(40));
        for l in [&mut queued, &mut buffered] {
            l.queue_stream(FrameType::Res, "id9", &text, true);
        }
        let plain = reference_lines(&reference, "id9", &text, true);
        let start = "PRIVMSG #desk :".len();
        let auth = reference.auth.as_mut().unwrap();
        let expected: Vec<String> = plain
            .iter()
            .map(|line| format!("{}{}", &line[..start], auth.seal(7, &line[start..])))
            .collect();
        let mut out = Vec::new();
        while buffered.take_queued_into(7, &mut out, usize::MAX) == Taken::Line {}
        let from_buffer: Vec<&str> = std::str::from_utf8(&out)
            .unwrap()
            .split_terminator("\r\n")
            .collect();
        let taken = take_all_at(&mut queued, 7);
        assert_eq!(taken, expected);
        assert_eq!(from_buffer, expected);
        // A line made whole and sealed where it lies (an answer's frames), without regrowing.
        let mut sealer = link(200, true);
        let line = sealer.frame_line(&Frame::parse("OA1 RES x 1 0 done").unwrap());
        let capacity = line.capacity();
        let sealed = sealer.seal(7, line);
        assert_eq!(sealed.capacity(), capacity);
        let mut again = link(200, true);
        let auth = again.auth.as_mut().unwrap();
        assert_eq!(
            sealed,
            format!("PRIVMSG #desk :{}", auth.seal(7, "OA1 RES x 1 0 done"))
        );
    }

    fn take_all_at(link: &mut Link, now: u64) -> Vec<String> {
        std::iter::from_fn(|| link.take_queued(now)).collect()
    }

    #[test]
    fn withdraw_takes_out_only_that_id_s_lines() {
        let mut link = link(20, false);
        link.queue_stream(
            FrameType::Req,
            "keep1",
            &escape_spec(&"a".repeat(50)),
            false,
        );
        link.queue_stream(
            FrameType::Req,
            "drop2",
            &escape_spec(&"b".repeat(50)),
            false,
        );
        link.queue_single(FrameType::Cancel, "keep3", "reason");
        let before = link.queued_bytes();
        link.withdraw("drop2");
        let lines = take_all(&mut link);
        assert!(lines.iter().all(|l| !l.contains("drop2")), "{lines:?}");
        assert_eq!(lines.iter().filter(|l| l.contains(" keep1 ")).count(), 3);
        assert!(lines.last().unwrap().contains("CANCEL keep3 1 0 reason"));
        assert!(before > lines.iter().map(String::len).sum::<usize>());
    }
}
