"""The mobile companion (``docs/sidecar-and-mobile.md``) over WebSocket text frames:
:class:`Client` on the phone, :class:`Server` on the desktop, and :func:`read`, which checks a
message against the core's types (``core/schemas/ws-message.schema.json``)::

    from deskwire import mobile

    desktop = mobile.Server()
    code = desktop.start_pairing(now_ms)         # show it on screen
    phone = mobile.Client()
    phone.pair(now_ms, code)                     # poll_output: Connect(bearer=None), ...

The client's events and the server's are the dataclasses below (``Paired`` serves both: the
server's carries the connection).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

from ._deskwire import read_def
from ._deskwire.mobile import Client, Server
from ._events import event

__all__ = [
    "Client",
    "Server",
    "read",
    "Connect",
    "Close",
    "Connected",
    "Paired",
    "AuthFailed",
    "TokenRejected",
    "Disconnected",
    "StateChanged",
    "Message",
    "PermissionRequested",
    "TaskUpdate",
    "Send",
    "CloseConnection",
    "ClientConnected",
    "PairingFailed",
    "ClientDisconnected",
    "Command",
    "UserMessage",
    "PermissionAnswered",
    "PermissionTimedOut",
]


def read(name: str, value: Any) -> Any:
    """Reads ``value`` as ``$defs/<name>`` of the WebSocket schema through the core's types;
    :class:`deskwire.ProtocolError` when it does not fit."""
    return read_def("mobile", name, value)


# --- the phone's engine ---------------------------------------------------------------------


@event("mobile.client", "connect")
@dataclass(frozen=True)
class Connect:
    """Client: open the WebSocket (with ``Authorization: Bearer <bearer>`` when given)."""

    bearer: Optional[str] = None
    """The stored token, if any."""


@event("mobile.client", "close")
@dataclass(frozen=True)
class Close:
    """Client: close the WebSocket."""


@event("mobile.client", "connected")
@dataclass(frozen=True)
class Connected:
    """Client: authenticated; the state sync follows."""


@event("mobile.client", "paired")
@event("mobile.server", "paired")
@dataclass(frozen=True)
class Paired:
    """Pairing succeeded: store ``token`` (client), or a phone on ``conn`` paired (server)."""

    token: str
    """The bearer token issued."""
    conn: Optional[int] = None
    """Server: the connection."""


@event("mobile.client", "auth_failed")
@dataclass(frozen=True)
class AuthFailed:
    """Client: the pairing code was refused."""

    error: Optional[str] = None
    """The server's reason."""
    attempts_left: Optional[int] = None
    """Wrong codes the desktop still allows for the code it shows (0: ask for a new one), when
    it says."""
    retry_after_ms: Optional[int] = None
    """How long the desktop looks at no attempt, when it says."""


@event("mobile.client", "token_rejected")
@dataclass(frozen=True)
class TokenRejected:
    """Client: the stored token was refused; pair again."""


@event("mobile.client", "disconnected")
@dataclass(frozen=True)
class Disconnected:
    """Client: the connection ended; ``retry_in_ms`` when it reconnects by itself."""

    reason: Union[str, Dict[str, Any]]
    """Why."""
    retry_in_ms: Optional[int] = None
    """When the next attempt starts."""


@event("mobile.client", "state_changed")
@dataclass(frozen=True)
class StateChanged:
    """Client: the agent's state (``initial`` for the sync after connecting)."""

    state: Union[str, Dict[str, Any]]
    """``{"status": "Running", "data": {"task_id", "iteration"}}``, ..."""
    initial: bool
    """Whether this is the sync after connecting."""


@event("mobile.client", "message")
@dataclass(frozen=True)
class Message:
    """Client: a chat message from the agent or the system."""

    role: str
    """Who speaks."""
    content: str
    """The text."""
    timestamp: str
    """When."""


@event("mobile.client", "permission_requested")
@dataclass(frozen=True)
class PermissionRequested:
    """Client: the agent asks for approval; answer with ``respond_permission``."""

    id: str
    """The request id."""
    tool_name: str
    """The tool."""
    command: str
    """What to approve."""
    description: str
    """A description."""
    tier: str
    """The risk tier."""


@event("mobile.client", "task_update")
@dataclass(frozen=True)
class TaskUpdate:
    """Client: progress on the current task."""

    task_id: str
    """The task."""
    iteration: int
    """The iteration."""
    status: str
    """The status text."""


# --- the desktop's engine -------------------------------------------------------------------


@event("mobile.server", "transmit")
@dataclass(frozen=True)
class Send:
    """Server: send ``text`` as one text frame on ``conn``."""

    conn: int
    """The connection."""
    text: str
    """The frame."""


@event("mobile.server", "close")
@dataclass(frozen=True)
class CloseConnection:
    """Server: close ``conn``."""

    conn: int
    """The connection."""
    reason: str
    """Why (``"revoked"`` when its token was revoked, ...)."""


@event("mobile.server", "client_connected")
@dataclass(frozen=True)
class ClientConnected:
    """Server: a phone authenticated on ``conn`` (``via`` ``token`` or ``pairing``)."""

    conn: int
    """The connection."""
    via: str
    """How it authenticated."""


@event("mobile.server", "pairing_failed")
@dataclass(frozen=True)
class PairingFailed:
    """Server: a pairing attempt on ``conn`` failed (``{"wrong_code": {"attempts_left"}}``,
    ``"locked_out"``, ``"no_active_code"``, ``{"throttled": {"retry_after_ms"}}``,
    ``"tokens_full"``, ``"too_many_connections"``)."""

    conn: int
    """The connection."""
    failure: Union[str, Dict[str, Any]]
    """Why."""


@event("mobile.server", "client_disconnected")
@dataclass(frozen=True)
class ClientDisconnected:
    """Server: the phone on ``conn`` went away."""

    conn: int
    """The connection."""
    reason: str
    """Why."""


@event("mobile.server", "command")
@dataclass(frozen=True)
class Command:
    """Server: a phone sent an agent command."""

    conn: int
    """The connection."""
    command: Dict[str, Any]
    """The command (``{"action": ..., ...}``)."""


@event("mobile.server", "user_message")
@dataclass(frozen=True)
class UserMessage:
    """Server: a phone sent a chat message."""

    conn: int
    """The connection."""
    content: str
    """The text."""


@event("mobile.server", "permission_answered")
@dataclass(frozen=True)
class PermissionAnswered:
    """Server: a phone answered the permission request ``id``."""

    id: str
    """The request id."""
    conn: int
    """The connection."""
    approved: bool
    """The answer."""
    remember: bool
    """Apply it to such calls from now on."""


@event("mobile.server", "permission_timed_out")
@dataclass(frozen=True)
class PermissionTimedOut:
    """Server: nobody answered the permission request ``id`` in time."""

    id: str
    """The request id."""
