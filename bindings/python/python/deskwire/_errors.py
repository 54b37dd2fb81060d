"""The exceptions of deskwire, one tree rooted in :class:`DeskwireError`.

The split follows the Rust core: :class:`LocalError` is misuse by the caller (a bad argument, a
call in the wrong state, use after close), :class:`RemoteError` is a fault of the peer (an ``ERR``
answer, a JSON-RPC error object, a response that cannot be read). Every error carries ``code``,
the core's name for it (``too_large``, ``unknown_request``, ``timeout``, ...), and ``message``.
"""

from __future__ import annotations

__all__ = [
    "DeskwireError",
    "LocalError",
    "ClosedError",
    "RemoteError",
    "ProtocolError",
    "RequestTimeout",
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


class LocalError(DeskwireError, ValueError):
    """Misuse by the caller: an invalid argument, an unknown id, a call the engine refuses."""


class ClosedError(LocalError):
    """The engine or connection was closed; it takes no more calls."""


class RemoteError(DeskwireError):
    """A fault of the peer: an error answer, a timeout, or input that breaks the protocol."""


class ProtocolError(RemoteError):
    """The peer's input could not be read (not JSON, not the expected shape, too large)."""


class RequestTimeout(RemoteError, TimeoutError):
    """No complete answer arrived before the deadline (also a :class:`TimeoutError`)."""
