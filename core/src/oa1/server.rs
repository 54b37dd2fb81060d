//! The remote end: reassembles requests and streams responses back as they are produced.

use std::collections::VecDeque;

use super::chunk::{self, MIN_PAYLOAD_BUDGET};
use super::compress::{self, DEFLATE, StreamCompressor};
use super::engine::Drained;
use super::escape::{escape, escape_into, escape_spec, escape_spec_into};
use super::frame::{Frame, FrameType};
use super::link::{Inbound, Link, Parsed, Taken};
use super::reassembly::{Accepted, OverflowPolicy, Reassembler, ReassemblyLimits};
use super::{
    Config, Event, IDLE_WAIT_MS, LocalError, Output, RefusedFrame, Stats, TRUNCATION_MARKER,
};
use crate::irc::{Identity, Message, netsplit_servers};

/// The nick of a `nick!user@host` source.
fn nick_of(source: &str) -> &str {
    source.split_once('!').map_or(source, |(nick, _)| nick)
}

/// A response being streamed.
#[derive(Debug)]
struct Reply {
    id: String,
    /// Who asked, as the server showed them (`nick!user@host`).
    source: String,
    /// Escaped output (base64 when compressed) not sent yet is `escaped[sent..]`.
    escaped: String,
    /// Set when the answer goes compressed (`RESZ`): output goes through it into `escaped`.
    compressor: Option<StreamCompressor>,
    /// Whether the compressor's last bytes are in `escaped` already.
    compressor_done: bool,
    sent: usize,
    next_seq: u32,
    /// Decoded output bytes accepted so far (the cap counts these).
    accepted: usize,
    truncated: bool,
    finished: bool,
    /// When the oldest unsent output arrived (for the flush delay).
    waiting_since: Option<u64>,
    /// `ERR` text to send once the output given before a timeout has gone out.
    then_error: Option<String>,
}

impl Reply {
    fn unsent(&self) -> &str {
        &self.escaped[self.sent..]
    }

    /// Escaped output that may go now. A plain answer carries only the spec's escapes, so a
    /// frame must not end with a space (servers trim them): spaces that end the output so far
    /// wait for what follows, unless the output is whole.
    fn sendable(&self, extended: bool) -> usize {
        let unsent = self.unsent();
        match extended || self.finished || self.compressor.is_some() {
            true => unsent.len(),
            false => unsent.trim_end_matches(' ').len(),
        }
    }

    fn kind(&self) -> FrameType {
        match self.compressor {
            Some(_) => FrameType::ResZ,
            None => FrameType::Res,
        }
    }

    /// Whether output went in that is not text yet (inside the compressor).
    fn has_hidden_output(&self) -> bool {
        self.compressor
            .as_ref()
            .is_some_and(StreamCompressor::pending)
    }

    /// Brings what the compressor holds into `escaped`: everything once finished, else a sync
    /// flush, when there is less than a frame of text (a frame is about to leave).
    fn surface(&mut self, budget: usize) {
        let Some(compressor) = self.compressor.as_mut() else {
            return;
        };
        if self.finished && !self.compressor_done {
            compressor.finish(&mut self.escaped);
            self.compressor_done = true;
        } else if self.escaped.len() - self.sent < budget {
            compressor.flush(&mut self.escaped);
        }
    }
}

/// Refusals (`ERR busy`) are queued only while the outbox holds fewer than this many lines
/// per `max_streams`: past that a flooding peer's requests get no answer and time out.
const BUSY_BACKLOG: usize = 4;

/// An `ACCEPT` seen for a request that is not whole yet.
#[derive(Debug)]
struct Offer {
    sender: String,
    id: String,
    expires_at: u64,
}

/// The OA1 server (the remote). See the [module docs](super) and the crate docs for the host loop.
#[derive(Debug)]
pub struct Server {
    link: Link,
    reassembler: Reassembler,
    /// Requests handed to the application and not yet answered, in round-robin order.
    replies: VecDeque<Reply>,
    /// Compression offers for requests still arriving (at most `max_streams`).
    offers: VecDeque<Offer>,
}

impl Server {
    /// A server with `config`.
    pub fn new(config: Config) -> Self {
        // A compressed request's base64 may be larger than the text it restores; the text's
        // cap is checked once the request is whole.
        let mut max_stream = config.max_message_bytes;
        if config.compression {
            max_stream = compress::compressed_cap(max_stream);
        }
        let limits = ReassemblyLimits {
            max_message_bytes: max_stream,
            max_streams: config.max_streams,
            partial_timeout_ms: config.partial_timeout_ms,
            expire_idle: true,
            overflow: OverflowPolicy::Reject,
            finished_memory: config.finished_memory,
        };
        Server {
            link: Link::new(config),
            reassembler: Reassembler::new(limits),
            replies: VecDeque::new(),
            offers: VecDeque::new(),
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

    /// Requests handed out and not yet answered.
    pub fn active(&self) -> usize {
        self.replies.len()
    }

    /// Who sent request `id` (handed out and not yet answered), as the server showed them:
    /// `nick!user@host`. A nick alone proves nothing (anyone may take it once it is free); log
    /// this, and see [`super::auth`] for frames only the secret's holders can send.
    pub fn source(&self, id: &str) -> Option<&str> {
        self.replies
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.source.as_str())
    }

    /// Takes one line the IRC connection received (with or without CRLF).
    pub fn handle_line(&mut self, now: u64, line: &[u8]) {
        if let Some(inbound) = self.link.accept(now, line) {
            self.take(now, inbound);
        } else if !self.replies.is_empty()
            && let Ok(msg) = Message::parse(line)
        {
            self.follow_requesters(&msg);
        }
    }

    /// [`Server::handle_line`] for a line the connection engine parsed already.
    pub(crate) fn handle_parsed(&mut self, now: u64, parsed: Parsed<'_, '_>) {
        if let Parsed::Message(msg) = parsed
            && !self.replies.is_empty()
        {
            self.follow_requesters(msg);
        }
        if let Some(inbound) = self.link.accept_parsed(now, parsed) {
            self.take(now, inbound);
        }
    }

    /// A desk that leaves the channel (a part, a kick, a quit, a netsplit) can no longer hear
    /// its answers: its requests end with [`Event::Cancelled`], saying how it left, and their
    /// queued lines are dropped, so the remote neither works nor streams for nobody. A desk that
    /// changes its nick keeps its requests.
    fn follow_requesters(&mut self, msg: &Message<'_>) {
        let casemap = self.link.identity.casemapping();
        let ours = |channel: Option<&str>| {
            channel.is_some_and(|c| casemap.eq(c, &self.link.config.channel))
        };
        let (nick, how) = match (msg.command, msg.source_nick()) {
            (c, Some(nick)) if c.eq_ignore_ascii_case("QUIT") => {
                let reason = msg.param(0).unwrap_or("");
                let how = match netsplit_servers(reason) {
                    Some((near, far)) => format!("a netsplit between {near} and {far}"),
                    None => format!("quit: {reason}"),
                };
                (nick, how)
            }
            (c, Some(nick)) if c.eq_ignore_ascii_case("PART") && ours(msg.param(0)) => {
                (nick, "part".to_owned())
            }
            (c, Some(by)) if c.eq_ignore_ascii_case("KICK") && ours(msg.param(0)) => {
                let Some(victim) = msg.param(1) else { return };
                (victim, format!("kicked by {by}"))
            }
            (c, Some(old)) if c.eq_ignore_ascii_case("NICK") => {
                if let Some(new) = msg.param(0) {
                    for reply in &mut self.replies {
                        let nick = nick_of(&reply.source);
                        if casemap.eq(nick, old) {
                            reply.source.replace_range(..nick.len(), new);
                        }
                    }
                }
                return;
            }
            _ => return,
        };
        let channel = self.link.config.channel.clone();
        let mut kept = VecDeque::with_capacity(self.replies.len());
        for reply in std::mem::take(&mut self.replies) {
            if !casemap.eq(nick_of(&reply.source), nick) {
                kept.push_back(reply);
                continue;
            }
            self.link.withdraw(&reply.id);
            self.link.events.push_back(Event::Cancelled {
                id: reply.id,
                reason: format!("the desk `{nick}` left {channel} ({how})"),
            });
        }
        self.replies = kept;
    }

    /// A line that was not IRC: counted.
    pub(crate) fn note_invalid_line(&mut self) {
        self.link.note_invalid_line();
    }

    fn take(&mut self, now: u64, inbound: Inbound<'_>) {
        let Inbound {
            sender,
            source,
            frame,
        } = inbound;
        let compression = self.link.config.compression;
        match frame.kind {
            FrameType::Req => self.handle_request_frame(now, sender, source, &frame),
            FrameType::ReqZ if compression => {
                self.handle_request_frame(now, sender, source, &frame)
            }
            FrameType::Accept if compression => self.handle_offer(now, sender, &frame),
            FrameType::Cancel => self.handle_cancel(&frame),
            // Responses of another server on the channel are not ours to handle, and without
            // compression the deskwire extensions are as foreign as to a v40 server.
            FrameType::Res
            | FrameType::Err
            | FrameType::ResZ
            | FrameType::ReqZ
            | FrameType::Accept => self.link.stats.stale_frames += 1,
        }
    }

    /// Remembers that the answer to `frame.id` may go compressed.
    fn handle_offer(&mut self, now: u64, sender: &str, frame: &Frame<'_, [u8]>) {
        let deflate = frame
            .payload
            .split(|&b| b == b' ')
            .any(|word| word == DEFLATE.as_bytes());
        if !deflate || self.replies.iter().any(|r| r.id == frame.id) {
            self.link.stats.stale_frames += 1;
            return;
        }
        if self.offers.len() >= self.link.config.max_streams.max(1) {
            self.offers.pop_front();
        }
        self.offers.push_back(Offer {
            sender: sender.to_owned(),
            id: frame.id.to_owned(),
            expires_at: now.saturating_add(self.link.config.partial_timeout_ms),
        });
    }

    /// Takes the offer for `id` from `sender`, if one came and has not expired.
    fn take_offer(&mut self, now: u64, sender: &str, id: &str) -> bool {
        self.offers.retain(|o| o.expires_at > now);
        let casemap = self.link.identity.casemapping();
        match self
            .offers
            .iter()
            .position(|o| o.id == id && casemap.eq(&o.sender, sender))
        {
            Some(pos) => {
                self.offers.remove(pos);
                true
            }
            None => false,
        }
    }

    fn handle_request_frame(
        &mut self,
        now: u64,
        sender: &str,
        source: &str,
        frame: &Frame<'_, [u8]>,
    ) {
        if self.replies.iter().any(|r| r.id == frame.id) {
            self.link.stats.stale_frames += 1;
            return;
        }
        self.reassembler
            .set_casemapping(self.link.identity.casemapping());
        match self.reassembler.accept(now, sender, frame) {
            Accepted::Buffered => {}
            Accepted::Duplicate => self.link.stats.duplicates += 1,
            Accepted::Ignored(_) => self.link.stats.stale_frames += 1,
            Accepted::Overflow => {
                self.link.stats.too_large += 1;
                let max = self.link.config.max_message_bytes;
                self.queue_error(
                    frame.id,
                    "too_large",
                    &format!("request exceeds {max} bytes"),
                );
            }
            Accepted::Complete(done) => {
                let offered = self.take_offer(now, sender, frame.id);
                let compressed = frame.kind == FrameType::ReqZ;
                if self.replies.len() >= self.link.config.max_streams {
                    self.refuse_busy(frame.id);
                    return;
                }
                let max = self.link.config.max_message_bytes;
                let data = match compressed {
                    true => match compress::decompress(&done.data, max) {
                        Ok((data, false)) => {
                            self.link.stats.compressed_in += 1;
                            data
                        }
                        Ok((_, true)) => {
                            self.link.stats.too_large += 1;
                            let message = format!("request exceeds {max} bytes");
                            self.queue_error(frame.id, "too_large", &message);
                            return;
                        }
                        Err(e) => {
                            self.queue_error(frame.id, "malformed", &e.to_string());
                            return;
                        }
                    },
                    false if done.data.len() > max => {
                        self.link.stats.too_large += 1;
                        let message = format!("request exceeds {max} bytes");
                        self.queue_error(frame.id, "too_large", &message);
                        return;
                    }
                    false => done.data,
                };
                let compressor = (offered || compressed).then(|| {
                    self.link.stats.compressed_out += 1;
                    StreamCompressor::new()
                });
                self.replies.push_back(Reply {
                    id: frame.id.to_owned(),
                    source: source.to_owned(),
                    escaped: String::new(),
                    compressor,
                    compressor_done: false,
                    sent: 0,
                    next_seq: 1,
                    accepted: 0,
                    truncated: false,
                    finished: false,
                    waiting_since: None,
                    then_error: None,
                });
                self.link.events.push_back(Event::Request {
                    id: frame.id.to_owned(),
                    sender: sender.to_owned(),
                    payload: super::into_text(data),
                });
            }
        }
    }

    fn handle_cancel(&mut self, frame: &Frame<'_, [u8]>) {
        if let Some(pos) = self.replies.iter().position(|r| r.id == frame.id) {
            self.replies.remove(pos);
            self.link.withdraw(frame.id);
            self.link.stats.cancels += 1;
            let reason = super::escape::unescape(frame.payload);
            self.link.events.push_back(Event::Cancelled {
                id: frame.id.to_owned(),
                reason: String::from_utf8_lossy(&reason).into_owned(),
            });
        } else if self.reassembler.has_streams_for(frame.id) {
            // Cancelled before the request was whole: drop it quietly.
            self.reassembler.finish_id(frame.id);
            self.link.stats.cancels += 1;
        } else {
            self.link.stats.stale_frames += 1;
        }
    }

    fn reply_mut(&mut self, id: &str) -> Result<&mut Reply, LocalError> {
        match self.replies.iter_mut().find(|r| r.id == id) {
            Some(reply) if reply.finished => Err(LocalError::AlreadyFinished(id.to_owned())),
            Some(reply) => Ok(reply),
            None => Err(LocalError::UnknownRequest(id.to_owned())),
        }
    }

    /// Streams more output of request `id`. Output past `max_message_bytes` is dropped and the
    /// response ends with [`TRUNCATION_MARKER`].
    pub fn send(&mut self, now: u64, id: &str, output: &str) -> Result<(), LocalError> {
        let max = self.link.config.max_message_bytes;
        let extended = self.link.authenticated();
        let reply = self.reply_mut(id)?;
        if reply.truncated || output.is_empty() {
            return Ok(());
        }
        let room = max - reply.accepted;
        let mut take = output.len().min(room);
        while !output.is_char_boundary(take) {
            take -= 1;
        }
        let truncated = take < output.len();
        match reply.compressor.as_mut() {
            Some(compressor) => {
                compressor.write(&output.as_bytes()[..take], &mut reply.escaped);
                if truncated {
                    compressor.write(TRUNCATION_MARKER.as_bytes(), &mut reply.escaped);
                }
            }
            None if extended => {
                escape_into(&output[..take], &mut reply.escaped);
                if truncated {
                    escape_into(TRUNCATION_MARKER, &mut reply.escaped);
                }
            }
            None => {
                escape_spec_into(&output[..take], &mut reply.escaped);
                if truncated {
                    escape_spec_into(TRUNCATION_MARKER, &mut reply.escaped);
                }
            }
        }
        reply.accepted += take;
        if truncated {
            reply.truncated = true;
            self.link.stats.truncations += 1;
        }
        let reply = self.reply_mut(id)?;
        reply.waiting_since.get_or_insert(now);
        Ok(())
    }

    /// Ends the response of request `id` once its output has gone out.
    pub fn finish(&mut self, now: u64, id: &str) -> Result<(), LocalError> {
        let _ = now;
        self.reply_mut(id)?.finished = true;
        Ok(())
    }

    /// Sends the whole response `text` of request `id` and ends it.
    pub fn respond(&mut self, now: u64, id: &str, text: &str) -> Result<(), LocalError> {
        self.send(now, id, text)?;
        self.finish(now, id)
    }

    /// Answers request `id` with `ERR code: message`. Output not sent yet is dropped, except
    /// for `timeout`: what the command wrote before it goes out first, then the error, and a
    /// deskwire desk makes that output the answer (`docs/oa1.md`, "`RemoteBash`"); a spec-only
    /// desk reads the error.
    pub fn fail(
        &mut self,
        now: u64,
        id: &str,
        code: &str,
        message: &str,
    ) -> Result<(), LocalError> {
        let _ = now;
        if code.is_empty() || !code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            return Err(LocalError::InvalidErrorCode(code.to_owned()));
        }
        let reply = self.reply_mut(id)?;
        if code == "timeout" && (!reply.unsent().is_empty() || reply.has_hidden_output()) {
            reply.finished = true;
            reply.then_error = Some(format!("{code}: {message}"));
            return Ok(());
        }
        self.replies.retain(|r| r.id != id);
        self.queue_error(id, code, message);
        Ok(())
    }

    /// `ERR busy` for a request past `max_streams`. It was never accepted, so no line of its
    /// is queued to withdraw (a withdrawal reads every queued line: a flood of refusals would
    /// cost the square of its length). While the outbox already holds [`BUSY_BACKLOG`] lines
    /// per stream, no more refusals are queued: a peer that floods past `max_streams` gets
    /// its later requests timed out instead of an outbox that grows with the flood.
    fn refuse_busy(&mut self, id: &str) {
        if self.link.queued_lines() < BUSY_BACKLOG * self.link.config.max_streams.max(1) {
            self.queue_err_frame(id, "busy: too many requests in progress");
        }
    }

    fn queue_error(&mut self, id: &str, code: &str, message: &str) {
        self.queue_error_text(id, &format!("{code}: {message}"));
    }

    fn queue_error_text(&mut self, id: &str, text: &str) {
        self.link.withdraw(id);
        self.queue_err_frame(id, text);
    }

    /// Queues `ERR <id> <text>`, after whatever is queued.
    fn queue_err_frame(&mut self, id: &str, text: &str) {
        let extended = self.link.authenticated();
        let escaped = match extended {
            true => escape(text),
            false => escape_spec(text),
        };
        self.link
            .queue_stream(FrameType::Err, id, &escaped, extended);
    }

    /// Fails request streams that went quiet for `partial_timeout_ms` (answered `ERR
    /// incomplete`). [`Server::poll_output`] calls this too.
    pub fn handle_timeout(&mut self, now: u64) {
        self.offers.retain(|o| o.expires_at > now);
        for key in self.reassembler.expire(now) {
            self.link.stats.incomplete += 1;
            let secs = self.link.config.partial_timeout_ms / 1000;
            self.queue_error(
                &key.id,
                "incomplete",
                &format!("request stream idle for {secs}s"),
            );
        }
    }

    fn flush_due(&self, reply: &Reply, now: u64) -> bool {
        let unsent = reply.sendable(self.link.authenticated());
        if reply.finished {
            return true;
        }
        if unsent == 0 && !reply.has_hidden_output() {
            return false;
        }
        let long = reply.compressor.is_some() || self.link.authenticated();
        let budget = self
            .link
            .payload_budget(reply.kind(), &reply.id, reply.next_seq, long);
        unsent >= budget
            || reply
                .waiting_since
                .is_some_and(|t| now >= t.saturating_add(self.link.config.flush_delay_ms))
    }

    /// The next frame of the first reply due, round robin. Takes a pacing token.
    fn take_reply_frame(&mut self, now: u64) -> Option<String> {
        if self.link.is_held() {
            return None;
        }
        let pos = (0..self.replies.len()).find(|&i| self.flush_due(&self.replies[i], now))?;
        if !self.link.try_take_token(now) {
            return None;
        }
        let mut reply = self.replies.remove(pos).expect("index in range");
        let kind = reply.kind();
        // Lines up to the server's LINELEN toward a deskwire desk (it asked for compression,
        // or shares our secret); 512 bytes toward a spec-only one.
        let long = reply.compressor.is_some() || self.link.authenticated();
        let budget = self
            .link
            .payload_budget(kind, &reply.id, reply.next_seq, long)
            .max(MIN_PAYLOAD_BUDGET);
        reply.surface(budget);
        // base64 has no spaces; plain text goes with the spec's escapes only, unless the desk
        // shares our secret (and so is deskwire).
        let (end, payload) = match self.link.authenticated() {
            true => {
                let end = chunk::cut(&reply.escaped, reply.sent, budget);
                (end, chunk::wire_payload(&reply.escaped[reply.sent..end]))
            }
            false => {
                let end = chunk::cut_spec(&reply.escaped, reply.sent, budget, reply.finished);
                (
                    end,
                    std::borrow::Cow::Borrowed(&reply.escaped[reply.sent..end]),
                )
            }
        };
        let last = reply.finished && end == reply.escaped.len();
        // Output before a timeout: its stream stays open, and the `ERR` ends the request.
        let error_follows = last && reply.then_error.is_some();
        if end == reply.sent && !last {
            // Only spaces a spec-only desk must not see at a frame's end: wait for more.
            self.replies.insert(pos, reply);
            return None;
        }
        let frame = Frame {
            kind,
            id: &reply.id,
            seq: reply.next_seq,
            more: !last || error_follows,
            payload: &*payload,
        };
        let line = self.link.frame_line(&frame);
        let line = self.link.seal(now, line);
        self.link.count_frame_out(payload.len());
        reply.sent = end;
        reply.next_seq = reply.next_seq.saturating_add(1);
        // Keep the buffer from growing with what was already sent.
        if reply.sent > 4096 && reply.sent * 2 > reply.escaped.len() {
            reply.escaped.drain(..reply.sent);
            reply.sent = 0;
        }
        reply.waiting_since = if reply.unsent().is_empty() && !reply.has_hidden_output() {
            None
        } else {
            Some(now)
        };
        if !last {
            self.replies.push_back(reply);
        } else if let Some(error) = reply.then_error.take() {
            self.queue_error_text(&reply.id, &error);
        }
        Some(line)
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
        if !self.link.has_queued()
            && let Some(line) = self.take_reply_frame(now)
        {
            return Output::Transmit(line);
        }
        Output::Timeout(self.deadline(now))
    }

    /// [`Server::poll_output`] until it answers [`Output::Timeout`], in one call: each line
    /// goes onto the end of `out` followed by CRLF, each event onto `events`. A line goes only
    /// if `out` then holds at most `max_len` bytes (an answer's next frame is made only when a
    /// line as long as the server allows would fit); [`Drained::Full`] says when lines that
    /// may go now were left for a call with more room.
    pub fn drain_into(
        &mut self,
        now: u64,
        out: &mut Vec<u8>,
        max_len: usize,
        events: &mut Vec<Event>,
    ) -> Drained {
        self.link.reserve_queued(out, max_len);
        // Once, not per line: nothing expires twice at one `now`.
        self.handle_timeout(now);
        loop {
            if let Some(event) = self.link.events.pop_front() {
                events.push(event);
                continue;
            }
            match self.link.take_queued_into(now, out, max_len) {
                Taken::Line => continue,
                Taken::NoRoom => return Drained::Full,
                Taken::Nothing => {}
            }
            if self.link.has_queued() {
                return Drained::Until(self.deadline(now));
            }
            if out.len() + self.link.longest_line() > max_len {
                let due = !self.link.is_held()
                    && self.link.ready_at(now) <= now
                    && self.replies.iter().any(|reply| self.flush_due(reply, now));
                return match due {
                    true => Drained::Full,
                    false => Drained::Until(self.deadline(now)),
                };
            }
            match self.take_reply_frame(now) {
                Some(line) => {
                    out.extend_from_slice(line.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                None => return Drained::Until(self.deadline(now)),
            }
        }
    }

    /// When [`Server::poll_output`] has work next, once nothing is left to do at `now`.
    fn deadline(&self, now: u64) -> u64 {
        let mut deadline = now.saturating_add(IDLE_WAIT_MS);
        let ready = self.link.ready_at(now);
        if self.link.has_queued() {
            deadline = deadline.min(ready);
        }
        for reply in self.replies.iter().filter(|_| !self.link.is_held()) {
            if self.flush_due(reply, now) {
                deadline = deadline.min(ready);
            } else if let Some(t) = reply.waiting_since
                && (reply.sendable(self.link.authenticated()) > 0 || reply.has_hidden_output())
            {
                let due = t.saturating_add(self.link.config.flush_delay_ms);
                deadline = deadline.min(due.max(ready));
            }
        }
        if let Some(d) = self.reassembler.next_deadline() {
            deadline = deadline.min(d);
        }
        deadline.max(now)
    }

    /// Holds outgoing lines back (`true`) or lets them go (`false`). While held, requests still
    /// arrive and answers still queue; nothing is transmitted. For hosts that must not send before
    /// their IRC client is in the channel; [`super::Remote`] does this by itself.
    pub fn set_held(&mut self, held: bool) {
        self.link.set_held(held);
    }

    /// The connection is gone: every request in progress ends with [`Event::Cancelled`] (reason
    /// `"disconnected"`), so the application stops its work, and queued lines are dropped.
    pub fn disconnect(&mut self, now: u64) {
        let _ = now;
        for reply in std::mem::take(&mut self.replies) {
            self.link.events.push_back(Event::Cancelled {
                id: reply.id,
                reason: "disconnected".to_owned(),
            });
        }
        self.reassembler = Reassembler::new(*self.reassembler.limits());
        self.offers.clear();
        self.link.clear_queue();
    }

    /// The last OA1 frame this server dropped for its sender or its secret: see
    /// [`RefusedFrame`]. The asker hears nothing back, so a host logs this (`rexd --irc` does).
    pub fn last_refused(&self) -> Option<&RefusedFrame> {
        self.link.last_refused()
    }

    /// Counters and the bytes buffered right now.
    pub fn stats(&self) -> Stats {
        let mut stats = self.link.stats;
        let replies: usize = self
            .replies
            .iter()
            .map(|r| r.escaped.len() + r.compressor.as_ref().map_or(0, StreamCompressor::buffered))
            .sum();
        stats.bytes_buffered =
            (self.reassembler.buffered_bytes() + self.link.queued_bytes() + replies) as u64;
        stats
    }
}
