"""OA1: request/response RPC in IRC ``PRIVMSG`` lines, and the ``RemoteBash`` tool contract.

Per connection (raw socket bytes in, lines with CRLF out): :class:`Desk` sends requests and gets
:class:`Response` or :class:`Failed`; :class:`Remote` gets :class:`Request` and answers with
``send``/``finish``, ``respond`` or ``fail``. Both include an IRC session, so their
``poll_output`` also gives :mod:`deskwire.irc` events. :class:`Client` and :class:`Server` are the
same endpoints over IRC lines, for hosts that already have an IRC client. Each of the four takes
``text=False``: then whole messages come as :class:`ResponseBytes` and :class:`RequestBytes`,
the UTF-8 ``bytes`` reassembled from the frames, without making a ``str`` of them.

Many desks on one connection: :class:`MultiDesk` holds a desk per channel (``add_desk(now_ms,
channel, remote)``, ``remove_desk``, ``request(now_ms, channel, ...)``); its events come as
:class:`ChannelEvent` (the channel and the event a single desk would give). Asked for with
``chat=True`` and ``membership=True``, the channels' other messages come as
:class:`ChatMessage` and who comes and goes as :class:`MemberJoined`, :class:`MemberParted`,
:class:`MemberKicked`, :class:`MemberQuit`, :class:`MemberRenamed` and :class:`MemberNames`;
``send_text`` says something in a channel. :class:`deskwire.aio.IrcDesks` drives it on a socket.

A request of 128 KiB is about 580 lines. ``drain`` gives them as a list of ``bytes``;
``drain_into`` appends them to one ``bytearray``, each ended by CRLF, without an object per line
(``max_bytes=`` bounds how much one call adds), and ``handle_lines`` reads such a buffer back::

    client = Client("#desk", "desk", text=False)
    server = Server("#desk", "deskbot", text=False)
    client.request(0, b"uname -a\n" * 10_000)
    out = bytearray()
    appended, events, deadline_ms = client.drain_into(0, out)
    sock.sendall(out)                         # or a relay: lines as the server sends them
    server.handle_lines(0, received_lines)    # bytes of LF- or CRLF-ended lines, or a list

The building blocks: :func:`escape`, :func:`unescape`, :func:`split` (chunking),
:func:`parse_frame`, :func:`format_frame`, :func:`parse_err_payload`.

``RemoteBash``: :data:`TOOL_NAME`, :data:`TOOL_DESCRIPTION`, :data:`TOOL_INPUT_SCHEMA`,
:func:`remote_bash_args` (the model's arguments → ``(command, timeout_sec)``, seconds as
:meth:`deskwire.aio.IrcDesk.remote_bash` takes them) and
:func:`remote_bash_result` (an outcome → the tool result text), and
:func:`remote_bash_ending` (an answer's text → how the command ended, and its exit status).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional, Union

from ._deskwire.oa1 import (
    TOOL_DESCRIPTION,
    TOOL_INPUT_SCHEMA,
    TOOL_NAME,
    TRUNCATION_MARKER,
    Client,
    Desk,
    MultiDesk,
    Remote,
    Server,
    escape,
    exit_marker,
    format_frame,
    parse_err_payload,
    parse_frame,
    remote_bash_args,
    remote_bash_ending,
    remote_bash_failure,
    split,
    unescape,
)
from ._errors import DeskwireError
from ._events import attached_exception, event

__all__ = [
    "Client",
    "Server",
    "Desk",
    "Remote",
    "MultiDesk",
    "ChannelEvent",
    "ChatMessage",
    "ChatKind",
    "MemberNames",
    "MemberJoined",
    "MemberParted",
    "MemberKicked",
    "MemberQuit",
    "MemberRenamed",
    "MembershipEvent",
    "ChatEvent",
    "Response",
    "Failed",
    "Request",
    "ResponseBytes",
    "RequestBytes",
    "Cancelled",
    "StateChanged",
    "PeerJoined",
    "PeerLeft",
    "escape",
    "unescape",
    "split",
    "parse_frame",
    "format_frame",
    "parse_err_payload",
    "remote_bash_args",
    "remote_bash_failure",
    "exit_marker",
    "remote_bash_ending",
    "remote_bash_result",
    "TRUNCATION_MARKER",
    "TOOL_NAME",
    "TOOL_DESCRIPTION",
    "TOOL_INPUT_SCHEMA",
]


@event("oa1", "response")
@dataclass(frozen=True)
class Response:
    """Desk: the whole response to request ``id`` arrived."""

    id: str
    """The request id."""
    text: str
    """The reassembled, decoded text (ends with :data:`TRUNCATION_MARKER` when truncated)."""
    truncated: bool
    """Whether it was cut at the size cap."""


@event("oa1", "response_bytes")
@dataclass(frozen=True)
class ResponseBytes:
    """Desk made with ``text=False``: the whole response to request ``id`` arrived, as the UTF-8
    bytes of :attr:`Response.text` (no ``str`` made)."""

    id: str
    """The request id."""
    data: bytes
    """The reassembled text's UTF-8 (ends with :data:`TRUNCATION_MARKER` when truncated)."""
    truncated: bool
    """Whether it was cut at the size cap."""


@event("oa1", "failed")
@dataclass(frozen=True)
class Failed:
    """Desk: request ``id`` ended without a response."""

    id: str
    """The request id."""
    error: str
    """The code: the remote's ``ERR`` code, or ``timeout``, ``incomplete``, ``disconnected``,
    ``malformed``, ``not_ready`` (never left: the connection was not ready within
    ``ready_timeout_ms``), ``join_failed``, ``kicked`` or ``peer_left``."""
    message: str
    """A human-readable message: what happened, with the server's words where it spoke."""

    def exception(self) -> DeskwireError:
        """The exception to raise for it, its class chosen by the core's typed failure:
        :class:`deskwire.RequestTimeout` (``timeout``), :class:`deskwire.NotReadyError`,
        :class:`deskwire.JoinFailedError`, :class:`deskwire.KickedError`,
        :class:`deskwire.PeerLeftError`, :class:`deskwire.DisconnectedError`,
        :class:`deskwire.ProtocolError` (``malformed``), else :class:`deskwire.RemoteError`
        (the remote's ``ERR``, even one it calls ``timeout``)."""
        return attached_exception(self, self.error, self.message)


@event("oa1", "request")
@dataclass(frozen=True)
class Request:
    """Remote: a whole request arrived; answer it."""

    id: str
    """The request id."""
    sender: str
    """Who sent it."""
    payload: str
    """The decoded payload (for ``RemoteBash``, the command)."""


@event("oa1", "request_bytes")
@dataclass(frozen=True)
class RequestBytes:
    """Remote made with ``text=False``: a whole request arrived, as the UTF-8 bytes of
    :attr:`Request.payload` (no ``str`` made); answer it."""

    id: str
    """The request id."""
    sender: str
    """Who sent it."""
    data: bytes
    """The payload's UTF-8."""


@event("oa1", "cancelled")
@dataclass(frozen=True)
class Cancelled:
    """Remote: the desk cancelled request ``id``; stop working on it."""

    id: str
    """The request id."""
    reason: str
    """The reason the desk gave."""


@event("oa1", "state_changed")
@dataclass(frozen=True)
class StateChanged:
    """Desk/Remote: the connection's state changed."""

    state: str
    """``"registering"``, ``"joining"``, ``"waiting_for_nick"`` (a desk registered under a
    fallback nick, asking for its own back), ``"waiting_for_peer"`` (a desk in the channel, its
    remote not yet), ``"ready"`` or ``"closed"``."""


@event("oa1", "peer_joined")
@dataclass(frozen=True)
class PeerJoined:
    """Desk/Remote: the configured peer (``allowed_sender``) is in the channel."""

    nick: str
    """Its nick."""


@event("oa1", "peer_left")
@dataclass(frozen=True)
class PeerLeft:
    """Desk/Remote: the configured peer left the channel."""

    nick: str
    """Its nick."""


@event("oa1", "channel_event")
@dataclass(frozen=True)
class ChannelEvent:
    """:class:`MultiDesk`: an event of one desk's channel, or of the connection itself."""

    channel: Optional[str]
    """The desk's channel, as added; ``None`` for the connection's own events (registration,
    nick changes, the end of the link)."""
    event: Any
    """The event, as a single desk gives it: :class:`Response`, :class:`Failed`,
    :class:`StateChanged`, :class:`PeerJoined`, :class:`PeerLeft`, ``irc.Joined``,
    ``irc.Registered``, ``irc.Disconnected``, ..."""


# Spelled as a Union of Literals (read as ``Literal["privmsg", ...]``), as mypy's stubtest wants.
ChatKind = Union[Literal["privmsg"], Literal["notice"], Literal["action"]]
"""How a chat message was sent: a ``PRIVMSG``, a ``NOTICE``, or a CTCP ``ACTION`` (``/me``)."""


@event("oa1", "chat_message")
@dataclass(frozen=True)
class ChatMessage:
    """:class:`MultiDesk` made with ``chat=True``: a message in a desk's channel that is not
    OA1."""

    channel: str
    """The desk's channel, as added."""
    sender: str
    """Who sent it: ``nick!user@host`` as the server wrote it (:attr:`nick` is the nick)."""
    kind: ChatKind
    """``"privmsg"``, ``"notice"`` or ``"action"`` (a CTCP ``ACTION``, its text unwrapped)."""
    text: str
    """The text (bytes that are not UTF-8 replaced by U+FFFD)."""
    tags: Dict[str, str]
    """The IRCv3 message tags (``account``, ``time``, ...), in order; empty when the server
    sends none."""

    @property
    def nick(self) -> str:
        """The sender's nick (what comes before ``!``)."""
        return self.sender.split("!", 1)[0]


@event("membership", "names")
@dataclass(frozen=True)
class MemberNames:
    """:class:`MultiDesk` made with ``membership=True``: a desk channel's whole member list, once
    the server has sent it (after our own join)."""

    channel: str
    """The desk's channel."""
    nicks: List[str]
    """The members' nicks without their status prefix (``@``, ``+``), ours included."""


@event("membership", "joined")
@dataclass(frozen=True)
class MemberJoined:
    """``membership=True``: ``nick`` joined the channel (our own join too)."""

    channel: str
    """The desk's channel."""
    nick: str
    """Who joined."""


@event("membership", "parted")
@dataclass(frozen=True)
class MemberParted:
    """``membership=True``: ``nick`` left the channel."""

    channel: str
    """The desk's channel."""
    nick: str
    """Who left."""
    reason: Optional[str]
    """Their part message, if any."""


@event("membership", "kicked")
@dataclass(frozen=True)
class MemberKicked:
    """``membership=True``: ``nick`` was kicked from the channel by ``by``."""

    channel: str
    """The desk's channel."""
    nick: str
    """Who was kicked."""
    by: str
    """Who kicked them."""
    reason: Optional[str]
    """The kick message, if any."""


@event("membership", "quit")
@dataclass(frozen=True)
class MemberQuit:
    """``membership=True``: ``nick``, a member of the channel, quit the server (one event for
    each desk channel it was in)."""

    channel: str
    """A desk channel it was in."""
    nick: str
    """Who quit."""
    reason: Optional[str]
    """The quit message, if any."""


@event("membership", "renamed")
@dataclass(frozen=True)
class MemberRenamed:
    """``membership=True``: ``nick``, a member of the channel, is now ``new_nick``."""

    channel: str
    """A desk channel it is in."""
    nick: str
    """The old nick."""
    new_nick: str
    """The new one."""


MembershipEvent = Union[
    MemberNames, MemberJoined, MemberParted, MemberKicked, MemberQuit, MemberRenamed
]
"""A change in who is in a desk's channel."""

ChatEvent = Union[ChatMessage, MembershipEvent]
"""What :meth:`deskwire.aio.IrcDesks.chat` yields: a chat message or a membership change."""


def remote_bash_result(outcome: Union[Response, ResponseBytes, Failed]) -> str:
    """The ``RemoteBash`` tool result for the model: the output text of a :class:`Response`, or
    ``{"ok": false, "error": code, "message": ...}`` for a :class:`Failed`."""
    if isinstance(outcome, Response):
        return outcome.text
    if isinstance(outcome, ResponseBytes):
        return outcome.data.decode("utf-8")
    if isinstance(outcome, Failed):
        return remote_bash_failure(outcome.error, outcome.message)
    raise TypeError(f"expected oa1.Response or oa1.Failed, got {type(outcome).__name__}")
