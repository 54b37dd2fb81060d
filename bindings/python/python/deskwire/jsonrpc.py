"""JSON-RPC-style conversations: the correlation engine :class:`Peer` in each dialect
(``"jsonrpc2"`` for REXD, ``"sidecar"`` for the sidecar IPC) over NDJSON or ``Content-Length``
framing, and :func:`parse_message`, the JSON-RPC 2.0 message model.

Params, results, progress and error data are plain Python values (dict, list, str, ...); ids are
``int``, ``str`` or ``None``::

    from deskwire import Transmit, jsonrpc

    client = jsonrpc.Peer("jsonrpc2", seed=1)
    call_id = client.call(0, "session.info", user=7)
    out = client.poll_output(0)          # Transmit(data=b'{"jsonrpc":"2.0","id":1,...}\\n')
    client.handle_bytes(5, b'{"jsonrpc":"2.0","id":1,"result":{"ok":true}}\\n')
    client.poll_output(5)                # Response(id=1, method='session.info', user=7, result={'ok': True})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

from ._deskwire.jsonrpc import Peer, parse_message
from ._events import event

__all__ = [
    "Peer",
    "parse_message",
    "Request",
    "Notification",
    "Response",
    "Failed",
    "Progress",
    "Malformed",
    "Id",
]

Id = Union[int, str, None]
"""A JSON-RPC id."""


@event("jsonrpc", "request")
@dataclass(frozen=True)
class Request:
    """The peer calls us: answer with ``respond`` or ``respond_error``."""

    id: Id
    """The call's id."""
    method: str
    """The method."""
    params: Any = None
    """The params (absent: ``None``)."""


@event("jsonrpc", "notification")
@dataclass(frozen=True)
class Notification:
    """The peer notifies us."""

    method: str
    """The method."""
    params: Any = None
    """The params (absent: ``None``)."""


@event("jsonrpc", "response")
@dataclass(frozen=True)
class Response:
    """A call of ours succeeded."""

    id: Id
    """The call's id."""
    method: str
    """Its method."""
    user: int
    """The user data given to ``call``."""
    result: Any
    """The result."""


@event("jsonrpc", "failed")
@dataclass(frozen=True)
class Failed:
    """A call of ours failed: ``error`` is ``"timeout"``,
    ``{"remote": {"code": ..., "message": ..., "data": ...}}`` (the peer answered with an
    error), or ``{"malformed": "<reason>"}`` (the peer answered, but its answer could not be
    read: an error object of the wrong shape, a result holding ``"\\ud800"``, ...)."""

    id: Id
    """The call's id."""
    method: str
    """Its method."""
    user: int
    """The user data given to ``call``."""
    error: Union[str, Dict[str, Any]]
    """Why."""

    @property
    def timed_out(self) -> bool:
        """Whether no answer came before the deadline."""
        return self.error == "timeout"

    @property
    def remote(self) -> Optional[Dict[str, Any]]:
        """The peer's error object, when it answered with one."""
        if isinstance(self.error, dict):
            remote = self.error.get("remote")
            return remote if isinstance(remote, dict) else None
        return None

    @property
    def malformed(self) -> Optional[str]:
        """Why the peer's answer could not be read, when that is how the call ended."""
        if isinstance(self.error, dict):
            reason = self.error.get("malformed")
            return reason if isinstance(reason, str) else None
        return None


@event("jsonrpc", "progress")
@dataclass(frozen=True)
class Progress:
    """A call of ours reported progress (its deadline moved)."""

    id: Id
    """The call's id."""
    method: str
    """Its method."""
    user: int
    """The user data given to ``call``."""
    progress: Any
    """The progress data."""


@event("jsonrpc", "malformed")
@dataclass(frozen=True)
class Malformed:
    """The peer sent something unreadable (already answered where the dialect does that)."""

    reason: str
    """What was wrong."""
