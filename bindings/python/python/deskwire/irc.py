"""IRC: the line parser and a client session over raw socket bytes.

:func:`parse` reads one line (RFC 1459 with IRCv3 tags) into a :class:`Message`. :class:`Session`
registers, answers ``PING``, joins channels and learns our prefix; its events are the dataclasses
below. :class:`deskwire.oa1.Desk` and :class:`deskwire.oa1.Remote` include a session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple, Union

from ._deskwire.irc import Session, parse, privmsg, reconnect_delay_ms
from ._errors import DeskwireError
from ._events import attached_exception, event

__all__ = [
    "parse",
    "privmsg",
    "reconnect_delay_ms",
    "Session",
    "SaslLogin",
    "Message",
    "Registered",
    "Joined",
    "JoinFailed",
    "NickRefused",
    "NickChanged",
    "PrefixLearned",
    "Kicked",
    "Parted",
    "ServerError",
    "LoggedIn",
    "LoginFailed",
    "Disconnected",
]


@dataclass(frozen=True)
class SaslLogin:
    """How a connection logs in with SASL while it registers: ``SaslLogin.plain("alice",
    password)`` (an account and its password) or ``SaslLogin.external()`` (the TLS client
    certificate the connection shows, which the server maps to an account). With ``required``
    (the default) a failed login ends the connection (:class:`deskwire.LoginFailedError`);
    without, the connection goes on unauthenticated and says so (:class:`LoginFailed`)."""

    mechanism: str
    """``"PLAIN"`` or ``"EXTERNAL"``."""
    username: str = ""
    """The account (``PLAIN``)."""
    password: str = field(default="", repr=False)
    """Its password (``PLAIN``); never shown by ``repr``."""
    required: bool = True
    """End the connection when the login fails or the server offers no SASL."""

    @classmethod
    def plain(cls, username: str, password: str, *, required: bool = True) -> "SaslLogin":
        """``PLAIN`` as ``username`` with ``password``."""
        return cls("PLAIN", username, password, required)

    @classmethod
    def external(cls, *, required: bool = True) -> "SaslLogin":
        """``EXTERNAL``: the TLS client certificate is the identity."""
        return cls("EXTERNAL", required=required)

    def config(self) -> Dict[str, Any]:
        """The session config's ``sasl`` entry."""
        return {
            "mechanism": self.mechanism,
            "username": self.username,
            "password": self.password,
            "required": self.required,
        }


@event("irc", "message")
@dataclass(frozen=True)
class Message:
    """One parsed IRC line."""

    tags: Dict[str, str]
    """IRCv3 tags, values unescaped (the last of a repeated key wins)."""
    source: Optional[str]
    """The source prefix as written (``nick!user@host`` or a server), without the ``:``."""
    nick: Optional[str]
    """The nick (or server name) of the source."""
    user: Optional[str]
    """The user part of the source."""
    host: Optional[str]
    """The host part of the source."""
    command: str
    """The command as written (``PRIVMSG``, ``001``, ...)."""
    params: Tuple[str, ...]
    """The parameters, the trailing one included."""


@event("irc", "registered")
@dataclass(frozen=True)
class Registered:
    """The server accepted us (``001``) under ``nick``; the channels are being joined."""

    nick: str
    """Our nick, as the server confirmed it."""


@event("irc", "joined")
@dataclass(frozen=True)
class Joined:
    """We are in ``channel`` (the server echoed our ``JOIN``)."""

    channel: str
    """The channel, as the server wrote it."""


@event("irc", "join_failed")
@dataclass(frozen=True)
class JoinFailed:
    """The server refused to let us into ``channel``: ``403`` (no such channel), ``405`` (too
    many channels), ``471`` (full), ``473`` (invite only), ``474`` (banned), ``475`` (wrong
    key), ``476`` (bad channel mask) or ``477`` (registration needed). Requests waiting for the
    channel fail at once with ``join_failed``; the engine tries the join again later."""

    channel: str
    """The channel."""
    numeric: str
    """The numeric, e.g. ``"473"``."""
    text: str
    """The server's text, e.g. ``Cannot join channel (+i)``."""

    def exception(self) -> DeskwireError:
        """What a caller waiting for the channel gets: :class:`deskwire.JoinFailedError`."""
        return attached_exception(self, "join_failed", f"{self.numeric} {self.text}")


@event("irc", "nick_refused")
@dataclass(frozen=True)
class NickRefused:
    """The server refused a nick while registering (``432`` erroneous, ``433`` in use, ``436``
    collision, ``437`` unavailable). The session goes on as ``next``, or ends when ``next`` is
    ``None``. A remote that accepts only the configured nick (``rexd --allow-from desk``) will
    ignore a desk that came in as ``desk_``."""

    nick: str
    """The nick refused."""
    numeric: str
    """The numeric, e.g. ``"433"``."""
    text: str
    """The server's text, e.g. ``Nickname is already in use``."""
    next: Optional[str]
    """The nick tried next, ``None`` when none is left."""

    def exception(self) -> DeskwireError:
        """:class:`deskwire.NickRefusedError` (what ``connect`` raises when no nick is left)."""
        return attached_exception(self, "nick_refused", f"{self.numeric} {self.text}")


@event("irc", "nick_changed")
@dataclass(frozen=True)
class NickChanged:
    """Our nick changed."""

    old: str
    """The nick before."""
    new: str
    """The nick now."""


@event("irc", "prefix_learned")
@dataclass(frozen=True)
class PrefixLearned:
    """The prefix the server adds to our lines became known or changed."""

    prefix: str
    """``nick!user@host``."""


@event("irc", "kicked")
@dataclass(frozen=True)
class Kicked:
    """Someone removed us from ``channel``."""

    channel: str
    """The channel."""
    by: str
    """Who kicked us."""
    reason: str
    """The reason given, possibly empty."""

    def exception(self) -> DeskwireError:
        """:class:`deskwire.KickedError`, with who and why."""
        return attached_exception(self, "kicked", f"kicked from {self.channel} by {self.by}")


@event("irc", "parted")
@dataclass(frozen=True)
class Parted:
    """We left ``channel``."""

    channel: str
    """The channel."""


@event("irc", "server_error")
@dataclass(frozen=True)
class ServerError:
    """An error reply (numerics 400 to 599) the session does not handle itself."""

    message: str
    """The numeric and its parameters after our nick."""


@event("irc", "logged_in")
@dataclass(frozen=True)
class LoggedIn:
    """SASL logged us in (``903``) as ``account`` (session config ``sasl``)."""

    account: str
    """The account, as the server's ``900`` named it."""


@event("irc", "login_failed")
@dataclass(frozen=True)
class LoginFailed:
    """A SASL login that was not required failed or could not be tried; the session goes on
    unauthenticated. (A required one ends it: :class:`Disconnected` with ``login_failed``.)"""

    message: str
    """What happened, with the server's numeric and words."""


@event("irc", "disconnected")
@dataclass(frozen=True)
class Disconnected:
    """The session is over; close the connection.

    ``reason`` is ``"timed_out"``, ``"connection_lost"``, ``"nick_unavailable"``, ``"quit"``,
    ``{"server_closed": {"message": ...}}`` or ``{"login_failed": {"message": ...}}``.
    """

    reason: Union[str, Dict[str, Any]]
    """Why."""

    def exception(self) -> DeskwireError:
        """:class:`deskwire.DisconnectedError`, saying why in words."""
        return attached_exception(self, "disconnected", f"the IRC connection ended: {self.reason}")
