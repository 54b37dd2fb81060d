"""The exceptions of deskwire, one tree rooted in :class:`DeskwireError`.

The split follows the Rust core: :class:`LocalError` is misuse by the caller (a bad argument, a
call in the wrong state, use after close), :class:`RemoteError` is everything else that can end
a request: the peer's fault (an ``ERR`` answer, a JSON-RPC error object, a response that cannot
be read) or the link's (the server refused us, the remote left, the connection ended). Every
error carries ``code``, the core's name for it (``too_large``, ``unknown_request``,
``timeout``, ...), and ``message``.

Which class a core failure becomes is decided once, in the native module (``src/errors.rs``),
from the core's typed failure; the drivers in :mod:`deskwire.aio` raise what it made.

Every error that means "waited and gave up" is also a :class:`TimeoutError`, so ``except
TimeoutError`` catches it on every Python the package supports (on 3.9 and 3.10,
``asyncio.TimeoutError`` is a different class that ``except TimeoutError`` misses).
"""

from __future__ import annotations

from typing import Any, Tuple

__all__ = [
    "DeskwireError",
    "LocalError",
    "ClosedError",
    "RemoteError",
    "ProtocolError",
    "RequestTimeout",
    "NotReadyError",
    "JoinFailedError",
    "NickRefusedError",
    "KickedError",
    "PeerLeftError",
    "DisconnectedError",
    "LoginFailedError",
    "ConnectFailedError",
    "TlsError",
    "UnknownChannelError",
    "ChatError",
    "EmptyTextError",
    "ForbiddenByteError",
    "ReservedPrefixError",
    "QueueFullError",
    "GatewayError",
]


class DeskwireError(Exception):
    """The root of every error deskwire raises on purpose."""

    code: str
    """The core's name for the error, e.g. ``too_large`` or ``unknown_request``."""
    message: str
    """A human-readable description."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __reduce__(self) -> Tuple[Any, ...]:
        # Rebuilt from (code, message), so it crosses a process boundary (pickle,
        # multiprocessing, concurrent.futures) whole.
        return (type(self), (self.code, self.message), self.__dict__)


class LocalError(DeskwireError, ValueError):
    """Misuse by the caller: an invalid argument, an unknown id, a call the engine refuses."""


class ClosedError(LocalError):
    """The engine or connection was closed by this side; it takes no more calls."""


class RemoteError(DeskwireError):
    """Not the caller's doing: an error answer from the peer, a timeout, input that breaks the
    protocol, or a link the server or the peer ended."""


class ProtocolError(RemoteError):
    """The peer's input could not be read (not JSON, not the expected shape, too large, a
    compressed answer that does not inflate)."""


class RequestTimeout(RemoteError, TimeoutError):
    """No complete answer arrived before the deadline (also a :class:`TimeoutError`)."""


class NotReadyError(RequestTimeout):
    """The connection did not become ready in time (code ``not_ready``): not registered, not
    in the channel, or the remote not there. The message says what it waited for and who was
    in the channel, e.g. ``not ready after 30 s: waiting for remote `deskbot` in #desk;
    members: rexd``. A :class:`RequestTimeout`, so also a :class:`TimeoutError`."""


class JoinFailedError(RemoteError):
    """The server refused to let us into the channel (code ``join_failed``); the message has
    the numeric and the server's text, e.g. ``473 Cannot join channel (+i)``."""


class NickRefusedError(RemoteError):
    """The server refused every nick tried (code ``nick_refused``), with its text."""


class KickedError(RemoteError):
    """We were kicked from the channel while the request was in flight (code ``kicked``).
    A request with part of its answer in returns that part instead, ending with ``...[cut
    short: ...; N bytes arrived; how the command ended is unknown]...``."""


class PeerLeftError(RemoteError):
    """The remote left the channel while the request was in flight and did not come back in
    time (code ``peer_left``). A request with part of its answer in returns that part instead,
    ending with ``...[cut short: ...]...``."""


class DisconnectedError(RemoteError):
    """The IRC connection ended before the answer (code ``disconnected``); the message says
    why (the server's ``ERROR`` text, a lost connection, no nick left). A request with part of
    its answer in returns that part instead, ending with ``...[cut short: ...]...``."""


class LoginFailedError(DisconnectedError):
    """The SASL login the connection requires failed, or the server could not do it (code
    ``login_failed``), with the server's numeric and words, e.g. ``SASL login failed: 904 SASL
    authentication failed``. The connection has ended: a :class:`DisconnectedError`."""


class ConnectFailedError(RemoteError, ConnectionError):
    """The connection to the server could not be made (code ``connect_failed``): the message
    names the host, the port and the operating system's reason. Also a
    :class:`ConnectionError`."""


class TlsError(ConnectFailedError):
    """The TLS handshake failed (code ``tls_failed``): the message says which check, e.g.
    ``certificate verify failed: unable to get local issuer certificate`` (give the server's CA
    in an ``ssl.SSLContext``), a host name the certificate does not list, or a server that does
    not speak TLS on that port."""


class UnknownChannelError(LocalError):
    """A connection of many desks does not carry this channel (code ``unknown_channel``): a
    request, a chat text or a question about a channel never added, or removed already."""


class ChatError(LocalError):
    """Chat text was not queued (:meth:`deskwire.aio.IrcDesks.send_text`); the subclasses say
    why. Nothing of it was sent."""


class EmptyTextError(ChatError):
    """The chat text is empty or only white space (code ``empty_text``)."""


class ForbiddenByteError(ChatError):
    """The chat text holds NUL, CR or LF, which IRC cannot carry inside a line (code
    ``forbidden_byte``): send each line by itself."""


class ReservedPrefixError(ChatError):
    """The chat text starts with ``OA1 `` (or ``OA1A ``), which the OA1 spec reserves for tool
    frames (code ``reserved_prefix``): such a line would be read as a request or an answer."""


class QueueFullError(ChatError):
    """Too much chat text waits to go to the channel already (64 KiB; code ``queue_full``):
    the connection's pacing sends it a line at a time. Try again once some has gone."""


class GatewayError(RemoteError):
    """The gateway answered a Commander's request with an error
    (:meth:`deskwire.aio.GatewayClient.call`), or refused its token at the connection (code
    ``E_UNAUTHORIZED``, no details): ``code`` is the gateway's (``E_NOT_FOUND``,
    ``E_CONFLICT``, ``E_INVALID_TRANSITION``, ...), ``details`` its ``details`` object or
    ``None``."""

    details: Any
    """The answer's ``details`` (``{"jobId": ...}``, ...), or ``None``."""

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(code, message)
        self.details = details


# Tracebacks and reprs name the classes as users import them (``deskwire.LocalError``), not by
# this private module.
for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, Exception) and _cls.__module__ == __name__:
        _cls.__module__ = "deskwire"
del _cls
