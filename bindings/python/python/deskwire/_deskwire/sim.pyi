from typing import Dict, Optional

from typing_extensions import final

__all__ = ['Relay', 'Network']

@final
class Relay:
    """One IRC channel in memory, over lines: members ``send`` lines (without CRLF) and ``recv`` what
    the channel relays to them, with the ``:nick!~user@host`` prefix a real server adds, the
    510-byte limit and the 512-byte cut of relayed lines. ``noise=n`` injects a noise line after
    every n messages.
    """
    def __new__(cls, channel: str, *, seed: int = 0, noise: int = 0) -> Relay: ...
    def join(self, nick: str, user: Optional[str] = None, host: str = "sim.example") -> None:
        """Adds a member (``nick!~user@host``)."""
    def send(self, sender: str, line: str) -> None:
        """``from`` sends one line (without CRLF) to the server."""
    def recv(self, nick: str) -> Optional[str]:
        """The next line relayed to ``nick`` (without CRLF), or ``None``."""
    @property
    def channel(self) -> str:
        """The channel's name."""
    def stats(self) -> Dict[str, int]:
        """Counters: ``relayed``, ``cut_lines``, ``longest_line``, ``noise``."""

@final
class Network:
    """An IRC server in memory, over raw bytes: ``connect`` opens a connection (an int), the bytes
    an engine transmits go to ``handle_bytes``, and ``take_bytes`` gives what the server sent it,
    exactly as a socket would. Registration, ``PING``, ``JOIN``/``PART``/``QUIT`` and channel relay
    behave like ngircd where it matters (prefixes, the 510-byte limit, cut relayed lines).
    """
    def __new__(cls, *, seed: int = 0, noise: int = 0) -> Network: ...
    def connect(self, host: str = "sim.example") -> int:
        """Opens a connection from ``host``; returns its number."""
    def handle_bytes(self, connection: int, data: bytes) -> None:
        """Bytes the client of ``connection`` wrote."""
    def take_bytes(self, connection: int) -> bytes:
        """What the server sent ``connection`` since the last call."""
    def is_open(self, connection: int) -> bool:
        """Whether ``connection`` is still open."""
    def disconnect(self, connection: int) -> None:
        """Closes ``connection`` from the client's side."""
    def stats(self) -> Dict[str, int]:
        """Counters: ``relayed``, ``cut_lines``, ``longest_line``, ``noise``."""
