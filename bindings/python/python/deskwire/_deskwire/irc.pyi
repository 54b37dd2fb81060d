from typing import Any, Dict, List

from typing_extensions import final

__all__ = ['parse', 'privmsg', 'reconnect_delay_ms', 'Session']

def parse(line: bytes) -> Any:
    """Parses one IRC line (RFC 1459 with IRCv3 tags; a trailing CRLF is ignored) into an
    ``irc.Message`` (``tags``, ``source``, ``nick``, ``user``, ``host``, ``command``, ``params``). Raises
    ``ProtocolError`` (code ``invalid_line``) when it is not an IRC line.
    """
def reconnect_delay_ms(
    attempt: int,
    random: int,
    *,
    first_delay_ms: int = 1000,
    max_delay_ms: int = 10000,
    jitter_percent: int = 50,
) -> int:
    """The wait (ms) before reconnection try ``attempt`` (0 for the first) under the core's reconnect
    policy: ``first_delay_ms`` doubling up to ``max_delay_ms``, plus ``random`` modulo one more than
    ``jitter_percent`` of it. Raises ``LocalError`` (``invalid_value``) for a policy that cannot work.
    """
def privmsg(target: str, text: str) -> str:
    """Formats ``PRIVMSG target :text`` (no CRLF); raises ``LocalError`` when it cannot be one line."""

@final
class Session:
    """An IRC client session over raw socket bytes: registration (``NICK``/``USER``, nick-in-use
    fallback), ``PING``/``PONG``, keepalive, ``JOIN``, learning our prefix. For hosts that speak IRC
    but not OA1; ``oa1.Desk``/``oa1.Remote`` include one.

    ``Session("desk", ["#desk"], now_ms=0, password=None, ping_interval_ms=60000, ...)``.
    """
    def __new__(cls, nick: str, channels: List[str] = ..., *, now_ms: int = 0, **options: Any) -> Session: ...
    def handle_bytes(self, now_ms: int, data: bytes) -> None:
        """Bytes read from the socket."""
    def handle_line(self, now_ms: int, line: bytes) -> None:
        """One line as received (without CRLF)."""
    def handle_eof(self, now_ms: int) -> None:
        """The socket closed or failed."""
    def handle_timeout(self, now_ms: int) -> None:
        """The deadline of the last ``Timeout`` passed."""
    def poll_output(self, now_ms: int) -> Any:
        """A ``Transmit`` (one line, CRLF included), an event (``Registered``, ``Joined``, ...) or a
        ``Timeout``.
        """
    def join(self, channel: str) -> None:
        """Joins ``channel``."""
    def part(self, channel: str) -> None:
        """Leaves ``channel``."""
    def privmsg(self, target: str, text: str) -> None:
        """Sends ``PRIVMSG target :text`` (one line; raises when it does not fit)."""
    def quit(self, reason: str = "bye") -> None:
        """Leaves the server with ``QUIT :reason``."""
    @property
    def nick(self) -> str:
        """Our nick as the server knows it."""
    @property
    def registered(self) -> bool:
        """Whether the server accepted us."""
    @property
    def channels(self) -> List[str]:
        """The channels we are in."""
    def stats(self) -> Dict[str, int]:
        """The counters, as a dict."""
    def close(self) -> None:
        """Drops the engine; later calls raise ``ClosedError``."""
