//! The desk end: sends requests and turns response streams into one event each.

use std::collections::HashMap;

use rustc_hash::FxBuildHasher;

use super::chunk;
use super::compress;
use super::engine::Drained;
use super::escape::{escape, escape_spec};
use super::frame::FrameType;
use super::link::{Inbound, Link, Parsed, Taken};
use super::reassembly::{Accepted, OverflowPolicy, Reassembler, ReassemblyLimits};
use super::{
    Config, Event, Failure, IDLE_WAIT_MS, LocalError, Output, RefusedFrame, Stats,
    TRUNCATION_MARKER, into_text,
};
use crate::ids::IdGenerator;
use crate::irc::Identity;

/// A request sent (or waiting to be) and not answered yet.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// When it was made.
    made_at: u64,
    /// Its request timeout, which runs from `started_at`.
    timeout_ms: u64,
    /// When its lines could first leave (the endpoint was not held); `None` while held.
    started_at: Option<u64>,
    /// The link's frames accepted and refused when it was made: what came meanwhile tells a
    /// timeout's message what to say.
    frames_in_at: u64,
    refused_at: u64,
}

impl Pending {
    fn deadline(&self, ready_timeout_ms: u64) -> u64 {
        match self.started_at {
            Some(at) => at.saturating_add(self.timeout_ms),
            None => self.made_at.saturating_add(ready_timeout_ms),
        }
    }
}

/// What a held client waits for, unless its host says more ([`Client::set_hold_reason`]).
const DEFAULT_HOLD_REASON: &str = "the host to let lines go (set_held)";

/// The OA1 client (the desk). See the [module docs](super) and the crate docs for the host loop.
#[derive(Debug)]
pub struct Client {
    link: Link,
    ids: IdGenerator,
    reassembler: Reassembler,
    /// Looked up for each frame received, with a hash quicker than SipHash (the keys are
    /// our own ids).
    requests: HashMap<String, Pending, FxBuildHasher>,
    /// What held lines wait for, told in a `not_ready` failure.
    hold_reason: String,
    /// The peer (`allowed_sender`) answered compressed once: it is deskwire, so requests may go
    /// compressed, and plain ones may use deskwire's escapes.
    peer_compresses: bool,
}

impl Client {
    /// A client with `config`; `seed` fixes the sequence of request ids.
    pub fn new(config: Config, seed: u64) -> Self {
        // Room for a remote's own truncation marker on a response cut at the same cap; a
        // compressed answer's base64 may be larger than the text it restores.
        let mut max_stream = config.max_message_bytes + TRUNCATION_MARKER.len();
        if config.compression {
            max_stream = max_stream.max(compress::compressed_cap(max_stream));
        }
        let limits = ReassemblyLimits {
            max_message_bytes: max_stream,
            max_streams: config.max_streams,
            partial_timeout_ms: config.partial_timeout_ms,
            expire_idle: false,
            overflow: OverflowPolicy::Truncate,
            finished_memory: config.finished_memory,
        };
        Client {
            link: Link::new(config),
            ids: IdGenerator::new(seed),
            reassembler: Reassembler::new(limits),
            requests: HashMap::default(),
            hold_reason: DEFAULT_HOLD_REASON.to_owned(),
            peer_compresses: false,
        }
    }

    /// Paces outgoing lines as `pacing` says from now on (a connection does this once the
    /// server has said what it is: [`Config::server_pacing`]).
    pub fn set_pacing(&mut self, pacing: super::Pacing) {
        self.link.set_pacing(pacing);
    }

    /// For an `account:` allowed sender: which of the capabilities that say who is logged in
    /// the server enabled. With `account-tag`, each message's tag alone is taken; with only
    /// `account-notify`, the members the server said are logged in (`extended-join`,
    /// `ACCOUNT`, WHOX replies). Neither (the default): the tag where a line has one.
    pub fn set_account_sources(&mut self, account_tag: bool, account_notify: bool) {
        self.link.set_account_sources(account_tag, account_notify);
    }

    /// The pacing in force.
    pub fn pacing(&self) -> super::Pacing {
        self.link.pacing()
    }

    /// Who lets the next line go (the connection shares one among its channels).
    pub(crate) fn gate_mut(&mut self) -> &mut super::pacing::Gate {
        self.link.gate_mut()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.link.config
    }

    /// Who we are on the server, as learned from the lines seen so far.
    pub fn identity(&self) -> &Identity {
        &self.link.identity
    }

    /// Lets a host with its own IRC client tell us our prefix (`nick`, `user`, `host`).
    pub fn set_identity(&mut self, nick: &str, user: &str, host: &str) {
        self.link.identity.set_nick(nick);
        self.link.identity.set_user_host(user, host);
    }

    /// Sends `payload` as a new request. `timeout_ms` overrides `request_timeout_ms` (for
    /// `RemoteBash`, `timeout_sec`); it runs from the moment the lines may leave (see
    /// [`Client::set_held`]). Returns the request id its events will carry.
    pub fn request(
        &mut self,
        now: u64,
        payload: &str,
        timeout_ms: Option<u64>,
    ) -> Result<String, LocalError> {
        let max = self.link.config.max_message_bytes;
        if payload.len() > max {
            return Err(LocalError::TooLarge {
                size: payload.len(),
                max,
            });
        }
        if timeout_ms == Some(0) {
            // It would fail at once, as a timeout blaming the remote: refused as the config's
            // zero `request_timeout_ms` is.
            return Err(LocalError::InvalidConfig(super::ConfigError::ZeroTimeout {
                field: "timeout_ms",
                what: "request",
                default: self.link.config.request_timeout_ms,
            }));
        }
        if self.requests.len() >= self.link.config.max_streams {
            return Err(LocalError::TooManyInFlight(self.requests.len()));
        }
        let id = loop {
            let id = self.ids.next_id();
            if !self.requests.contains_key(&id) && !self.reassembler.is_finished(&id) {
                break id;
            }
        };
        let widest = match self.link.config.compression {
            true => FrameType::ReqZ,
            false => FrameType::Req,
        };
        self.link.check_room(widest, &id)?;
        // deskwire's own escapes (`\s`, `\0`) only toward a remote known to be deskwire: one
        // that answered compressed, or one that shares our secret; the spec's four otherwise.
        let extended = self.peer_compresses || self.link.authenticated();
        if self.link.config.compression {
            let compressed = self
                .peer_compresses
                .then(|| compress::compress(payload.as_bytes()))
                .filter(|z| {
                    let escaped = match extended {
                        true => escape(payload),
                        false => escape_spec(payload),
                    };
                    self.frames(FrameType::ReqZ, &id, z, true)
                        <= self.frames(FrameType::Req, &id, &escaped, extended)
                });
            match compressed {
                Some(z) => {
                    self.link.queue_stream(FrameType::ReqZ, &id, &z, true);
                    self.link.stats.compressed_out += 1;
                }
                None => {
                    self.link
                        .queue_single(FrameType::Accept, &id, compress::DEFLATE);
                    self.link.queue_text(FrameType::Req, &id, payload, extended);
                }
            }
        } else {
            self.link.queue_text(FrameType::Req, &id, payload, extended);
        }
        let pending = Pending {
            made_at: now,
            timeout_ms: timeout_ms.unwrap_or(self.link.config.request_timeout_ms),
            started_at: (!self.link.is_held()).then_some(now),
            frames_in_at: self.link.stats.frames_in,
            refused_at: self.link.refused_count(),
        };
        self.requests.insert(id.clone(), pending);
        Ok(id)
    }

    /// How many frames `text` takes as a `kind` stream (`long`: in lines up to `LINELEN`).
    fn frames(&self, kind: FrameType, id: &str, text: &str, long: bool) -> usize {
        chunk::split(text, |seq| self.link.payload_budget(kind, id, seq, long)).len()
    }

    /// Cancels a request: no event will come for it, and the remote is sent a `CANCEL`.
    pub fn cancel(&mut self, now: u64, id: &str, reason: &str) -> Result<(), LocalError> {
        let _ = now;
        if self.requests.remove(id).is_none() {
            return Err(LocalError::UnknownRequest(id.to_owned()));
        }
        self.abandon(id, reason);
        Ok(())
    }

    /// Forgets `id` everywhere and tells the remote to stop.
    fn abandon(&mut self, id: &str, reason: &str) {
        self.reassembler.finish_id(id);
        self.link.withdraw(id);
        self.link.queue_single(FrameType::Cancel, id, reason);
        self.link.stats.cancels += 1;
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.requests.len()
    }

    /// Takes one line the IRC connection received (with or without CRLF).
    pub fn handle_line(&mut self, now: u64, line: &[u8]) {
        if let Some(inbound) = self.link.accept(now, line) {
            self.take(now, inbound);
        }
    }

    /// [`Client::handle_line`] for a line the connection engine parsed already.
    pub(crate) fn handle_parsed(&mut self, now: u64, parsed: Parsed<'_, '_>) {
        if let Some(inbound) = self.link.accept_parsed(now, parsed) {
            self.take(now, inbound);
        }
    }

    /// A line that was not IRC: counted.
    pub(crate) fn note_invalid_line(&mut self) {
        self.link.note_invalid_line();
    }

    fn take(&mut self, now: u64, inbound: Inbound<'_>) {
        let Inbound { sender, frame, .. } = inbound;
        let compressed_answer = frame.kind == FrameType::ResZ && self.link.config.compression;
        if !(matches!(frame.kind, FrameType::Res | FrameType::Err) || compressed_answer)
            || !self.requests.contains_key(frame.id)
        {
            self.link.stats.stale_frames += 1;
            return;
        }
        self.reassembler
            .set_casemapping(self.link.identity.casemapping());
        match self.reassembler.accept(now, sender, &frame) {
            Accepted::Buffered => {}
            Accepted::Duplicate => self.link.stats.duplicates += 1,
            Accepted::Ignored(_) | Accepted::Overflow => self.link.stats.stale_frames += 1,
            Accepted::Complete(done) if frame.kind == FrameType::Err => {
                let id = frame.id.to_owned();
                self.requests.remove(&id);
                let failure = Failure::from_err_payload(&into_text(done.data));
                // The remote's own timeout after part of the answer: that part is the answer,
                // as at this end's timeout (only a request that got nothing is an error).
                let partial = (failure.code() == "timeout")
                    .then(|| self.partial_prefix(&id))
                    .flatten();
                self.reassembler.finish_id(&id);
                let event = self.cut_answer_or(id, partial, remote_timeout_marker, failure);
                self.link.events.push_back(event);
            }
            Accepted::Complete(done) => {
                let id = frame.id.to_owned();
                self.requests.remove(&id);
                // The other stream of this id (RES or ERR) is moot now.
                self.reassembler.finish_id(&id);
                let (data, cut_here) = match frame.kind {
                    FrameType::ResZ => {
                        self.link.stats.compressed_in += 1;
                        // Only a named remote's word counts ("*" is anyone at all).
                        if self
                            .link
                            .config
                            .allowed_sender
                            .as_deref()
                            .is_some_and(|p| p != "*")
                        {
                            self.peer_compresses = true;
                        }
                        let cap = self.link.config.max_message_bytes + TRUNCATION_MARKER.len();
                        match compress::decompress(&done.data, cap) {
                            Ok((text, over)) => (text, over || done.truncated),
                            Err(e) => {
                                self.link.events.push_back(Event::Failed {
                                    id,
                                    failure: Failure::Malformed {
                                        message: e.to_string(),
                                    },
                                });
                                return;
                            }
                        }
                    }
                    _ => (done.data, done.truncated),
                };
                let (text, truncated) = self.finish_text(into_text(data), cut_here);
                if truncated {
                    self.link.stats.truncations += 1;
                }
                self.link.events.push_back(Event::Response {
                    id,
                    text,
                    truncated,
                });
            }
        }
    }

    /// Applies the size cap and the truncation marker (`docs/oa1.md`, "Streams and
    /// reassembly"). A remote that cut its output at the same cap already appended the marker;
    /// that text is kept as it is.
    fn finish_text(&self, mut text: String, cut_here: bool) -> (String, bool) {
        let max = self.link.config.max_message_bytes;
        let marked_by_remote =
            text.ends_with(TRUNCATION_MARKER) && text.len() - TRUNCATION_MARKER.len() <= max;
        if !marked_by_remote && (cut_here || text.len() > max) {
            let mut cut = max.min(text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str(TRUNCATION_MARKER);
        }
        let truncated = text.ends_with(TRUNCATION_MARKER);
        (text, truncated)
    }

    /// Fails what has expired by `now`: requests past their deadline (a `CANCEL` goes out),
    /// requests held past `ready_timeout_ms` (`not_ready`; nothing was sent) and responses
    /// whose missing chunk never came. [`Client::poll_output`] calls this too.
    pub fn handle_timeout(&mut self, now: u64) {
        if !self.link.is_held() {
            for pending in self.requests.values_mut() {
                pending.started_at.get_or_insert(now);
            }
        }
        let ready_timeout = self.link.config.ready_timeout_ms;
        let mut expired: Vec<(String, Pending)> = self
            .requests
            .iter()
            .filter(|(_, p)| p.deadline(ready_timeout) <= now)
            .map(|(id, p)| (id.clone(), *p))
            .collect();
        expired.sort_by(|a, b| a.0.cmp(&b.0));
        for (id, pending) in expired {
            self.requests.remove(&id);
            let failure = match pending.started_at {
                Some(_) => {
                    let partial = self.partial_prefix(&id);
                    self.abandon(&id, "timeout");
                    self.link.stats.timeouts += 1;
                    // What arrived is the answer, marked as cut (`docs/oa1.md`).
                    let failure = Failure::Timeout {
                        message: self.timeout_message(&pending),
                    };
                    let mark = |arrived| timeout_marker(pending.timeout_ms, arrived);
                    let event = self.cut_answer_or(id, partial, mark, failure);
                    self.link.events.push_back(event);
                    continue;
                }
                None => {
                    // Its lines never left: withdraw them, no CANCEL needed.
                    self.reassembler.finish_id(&id);
                    self.link.withdraw(&id);
                    Failure::NotReady {
                        message: format!(
                            "not ready after {}: waiting for {}",
                            format_duration(ready_timeout),
                            self.hold_reason
                        ),
                    }
                }
            };
            self.link.events.push_back(Event::Failed { id, failure });
        }
        for key in self.reassembler.expire(now) {
            if self.requests.remove(&key.id).is_some() {
                self.abandon(&key.id, "incomplete");
                self.link.stats.incomplete += 1;
                self.link.events.push_back(Event::Failed {
                    id: key.id,
                    failure: Failure::Incomplete,
                });
            }
        }
    }

    /// The next thing to do: an event, a line to send, or the instant to wake up at. Call it
    /// after every input until it returns [`Output::Timeout`].
    pub fn poll_output(&mut self, now: u64) -> Output {
        self.handle_timeout(now);
        if let Some(event) = self.link.events.pop_front() {
            return Output::Event(event);
        }
        if let Some(line) = self.link.take_queued(now) {
            return Output::Transmit(line);
        }
        Output::Timeout(self.deadline(now))
    }

    /// [`Client::poll_output`] until it answers [`Output::Timeout`], in one call: each line
    /// goes onto the end of `out` followed by CRLF (straight from the queue, without a
    /// `String` each), each event onto `events`. A line goes only if `out` then holds at most
    /// `max_len` bytes; [`Drained::Full`] says when lines that may go now were left for a
    /// call with more room.
    pub fn drain_into(
        &mut self,
        now: u64,
        out: &mut Vec<u8>,
        max_len: usize,
        events: &mut Vec<Event>,
    ) -> Drained {
        self.link.reserve_queued(out, max_len);
        // Once, not per line: taking a line ends no request, and nothing expires twice at one
        // `now` (per line, it was a fifth of a 128 KiB request's time).
        self.handle_timeout(now);
        events.extend(self.link.events.drain(..));
        loop {
            match self.link.take_queued_into(now, out, max_len) {
                Taken::Line => {}
                Taken::NoRoom => return Drained::Full,
                Taken::Nothing => return Drained::Until(self.deadline(now)),
            }
        }
    }

    /// When [`Client::poll_output`] has work next, once nothing is left to do at `now`.
    fn deadline(&self, now: u64) -> u64 {
        let mut deadline = now.saturating_add(IDLE_WAIT_MS);
        if self.link.has_queued() {
            deadline = deadline.min(self.link.ready_at(now));
        }
        let ready_timeout = self.link.config.ready_timeout_ms;
        if let Some(d) = self
            .requests
            .values()
            .map(|p| p.deadline(ready_timeout))
            .min()
        {
            deadline = deadline.min(d);
        }
        if let Some(d) = self.reassembler.next_deadline() {
            deadline = deadline.min(d);
        }
        deadline.max(now)
    }

    /// Holds outgoing lines back (`true`) or lets them go (`false`). While held, requests are
    /// accepted and queue up; a request's timeout starts when its lines may first leave, and a
    /// request held longer than `ready_timeout_ms` fails with [`Failure::NotReady`]. For hosts
    /// that must not send before their IRC client is in the channel; [`super::Desk`] does this
    /// by itself.
    pub fn set_held(&mut self, held: bool) {
        self.link.set_held(held);
    }

    /// Says what held lines wait for (e.g. ``remote `rexd` in #desk; members: deskbot``), for
    /// the message of a [`Failure::NotReady`].
    pub fn set_hold_reason(&mut self, reason: &str) {
        if self.hold_reason != reason {
            reason.clone_into(&mut self.hold_reason);
        }
    }

    /// The connection is gone: every request in flight fails with [`Failure::Disconnected`] (or,
    /// with part of its answer in, answers with that part and the [`cut_short_marker`]) and
    /// queued lines are dropped (no `CANCEL` can reach the remote any more).
    pub fn disconnect(&mut self, now: u64) {
        let _ = now;
        self.fail_all(&mut |_| {
            Some(Failure::Disconnected {
                message: "the host closed it".to_owned(),
            })
        });
        self.link.clear_queue();
    }

    /// Fails the requests in flight for which `why` gives a failure, given whether each one's
    /// lines have been let go. Their queued lines are withdrawn; no `CANCEL` is sent (the
    /// caller knows the remote cannot hear it, or never heard the request). A request the link
    /// or the remote left with part of its answer in answers with that part instead.
    pub(crate) fn fail_all(&mut self, why: &mut dyn FnMut(bool) -> Option<Failure>) {
        let mut doomed: Vec<(String, Failure)> = self
            .requests
            .iter()
            .filter_map(|(id, p)| why(p.started_at.is_some()).map(|f| (id.clone(), f)))
            .collect();
        doomed.sort_by(|a, b| a.0.cmp(&b.0));
        for (id, failure) in doomed {
            self.requests.remove(&id);
            // The link or the remote went away after part of the answer: that part is the
            // answer, marked as cut short (only a request that got nothing is an error).
            let partial = matches!(
                failure,
                Failure::Disconnected { .. } | Failure::Kicked { .. } | Failure::PeerLeft { .. }
            )
            .then(|| self.partial_prefix(&id))
            .flatten();
            self.reassembler.finish_id(&id);
            self.link.withdraw(&id);
            let why = failure.message();
            let mark = |arrived| cut_short_marker(&why, arrived);
            let event = self.cut_answer_or(id, partial, mark, failure);
            self.link.events.push_back(event);
        }
    }

    /// The event that ends request `id`: what arrived of its answer (`partial`), with the
    /// marker `mark` makes from its length, as a cut `Response`; else `failure`.
    fn cut_answer_or(
        &mut self,
        id: String,
        partial: Option<String>,
        mark: impl FnOnce(usize) -> String,
        failure: Failure,
    ) -> Event {
        match partial {
            Some(mut text) => {
                let arrived = text.len();
                let mark = mark(arrived);
                // On a line of its own, as a remote puts its exit marker: after the output's
                // own newline, if it ended with one, rather than after a blank line.
                let mark = match text.ends_with('\n') {
                    true => mark.strip_prefix('\n').unwrap_or(&mark),
                    false => &mark,
                };
                text.push_str(mark);
                self.link.stats.truncations += 1;
                Event::Response {
                    id,
                    text,
                    truncated: true,
                }
            }
            None => Event::Failed { id, failure },
        }
    }

    /// Drops every queued line.
    pub(crate) fn clear_queue(&mut self) {
        self.link.clear_queue();
    }

    /// The remote went away (it may come back as another program): what it had shown it
    /// understands is forgotten.
    pub(crate) fn forget_peer(&mut self) {
        self.peer_compresses = false;
    }

    /// Whether a request's lines have been let go (it may have reached the remote).
    pub(crate) fn has_started_requests(&self) -> bool {
        self.requests.values().any(|p| p.started_at.is_some())
    }

    /// The in-order prefix of a request's `RES` (or `RESZ`, inflated as far as it goes) stream,
    /// cut to whole characters and to the size cap; `None` when nothing of it arrived.
    fn partial_prefix(&mut self, id: &str) -> Option<String> {
        let (kind, data) = self
            .reassembler
            .take_partial(id, &[FrameType::Res, FrameType::ResZ])?;
        let max = self.link.config.max_message_bytes;
        let mut data = match kind {
            FrameType::ResZ => compress::decompress_prefix(&data, max),
            _ => data,
        };
        data.truncate(max);
        // A character the timeout cut in two is left out rather than replaced.
        let whole = match std::str::from_utf8(&data) {
            Ok(_) => data.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => data.len(),
        };
        data.truncate(whole);
        if data.is_empty() {
            return None;
        }
        Some(into_text(data))
    }

    /// What a request's timeout says: frames refused since it was made (the remote's answers
    /// dropped by this end's secret or sender filter), or that no frame came back at all, which
    /// is what a remote refusing the request looks like from here.
    fn timeout_message(&self, pending: &Pending) -> String {
        const TIMEOUT: &str = "no complete response before the request timeout";
        let refused = self.link.refused_count() - pending.refused_at;
        match self.link.last_refused() {
            Some(last) if refused > 0 => format!(
                "{TIMEOUT}; meanwhile this end refused {refused} OA1 frame{}, the last from {}: \
                 {}",
                if refused == 1 { "" } else { "s" },
                last.source,
                last.reason
            ),
            _ if self.link.stats.frames_in == pending.frames_in_at => format!(
                "{TIMEOUT}, and no OA1 frame came back: the remote is still at it, or refused \
                 the request, which it does without a word (`rexd --irc` logs why: a secret \
                 that differs from this end's, or a nick its --allow-from does not name)"
            ),
            _ => TIMEOUT.to_owned(),
        }
    }

    /// The last OA1 frame this client dropped for its sender or its secret: see
    /// [`RefusedFrame`]. A request's timeout message names it too.
    pub fn last_refused(&self) -> Option<&RefusedFrame> {
        self.link.last_refused()
    }

    /// Counters and the bytes buffered right now.
    pub fn stats(&self) -> Stats {
        let mut stats = self.link.stats;
        stats.bytes_buffered =
            (self.reassembler.buffered_bytes() + self.link.queued_bytes()) as u64;
        stats
    }
}

/// The line that ends an answer its request's timeout cut short:
/// `\n...[cut at the 30 s timeout: 12345 bytes arrived; the rest was cancelled]...` (see also
/// [`remote_timeout_marker`]). Said in
/// plain words for the model that reads it, which should narrow the command or raise
/// `timeout_sec`. "The rest", not "the command": the desk cannot tell a command still running
/// from an answer still on its way through the server's pacing; the cancel stops either.
pub fn timeout_marker(timeout_ms: u64, arrived: usize) -> String {
    format!(
        "\n...[cut at the {} timeout: {arrived} bytes arrived; the rest was cancelled]...",
        format_duration(timeout_ms)
    )
}

/// The line that ends an answer the remote's own timeout cut short (it answered `ERR timeout`
/// after part of the output): `\n...[cut at the remote's timeout: 12345 bytes arrived; the
/// command was stopped]...`.
pub fn remote_timeout_marker(arrived: usize) -> String {
    format!(
        "\n...[cut at the remote's timeout: {arrived} bytes arrived; the command was stopped]..."
    )
}

/// The line that ends an answer whose remote or link went away after part of it arrived (the
/// remote left the channel and did not come back, this end was kicked, the connection ended):
/// `\n...[cut short: remote `rexd` left #desk (quit: bye) and was not back within 2 s; 12345
/// bytes arrived; how the command ended is unknown]...`. The command may still be running; no
/// `CANCEL` can reach it.
pub fn cut_short_marker(why: &str, arrived: usize) -> String {
    format!("\n...[cut short: {why}; {arrived} bytes arrived; how the command ended is unknown]...")
}

/// `30 s`, `1.5 s`, `250 ms`: a duration for a message.
pub(crate) fn format_duration(ms: u64) -> String {
    match ms {
        ms if ms < 1000 => format!("{ms} ms"),
        ms if ms % 1000 == 0 => format!("{} s", ms / 1000),
        ms => format!("{:.1} s", ms as f64 / 1000.0),
    }
}
