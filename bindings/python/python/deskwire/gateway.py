"""The gateway RPC (``docs/gateway.md``): the :class:`Gateway` engine (jobs, their state
machine, idempotent creation, streams, approvals) over the messages of many connections, and
:func:`read`, which checks a message or payload against the core's types
(``core/schemas/gateway.schema.json``) and gives it back in canonical form::

    from deskwire import gateway

    gw = gateway.Gateway(["s3cr3t-token"])
    gw.handle_message(now_ms, conn=1, data=b'{"v":"1.0","id":"c1","type":"request",...}')
    out = gw.poll_output(now_ms)     # Send(conn=1, message={...}), JobCreated(...), Timeout(...)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from ._deskwire import read_def
from ._deskwire.gateway import Gateway
from ._events import event

__all__ = ["Gateway", "read", "Send", "JobCreated", "StateChanged", "ApprovalDecided"]


def read(name: str, value: Any) -> Any:
    """Reads ``value`` as ``$defs/<name>`` of the gateway schema through the core's types;
    :class:`deskwire.ProtocolError` when it does not fit."""
    return read_def("gateway", name, value)


@event("gateway", "send")
@dataclass(frozen=True)
class Send:
    """A message for connection ``conn`` (its ``ts`` already stamped)."""

    conn: int
    """The connection, as the host named it."""
    message: Dict[str, Any]
    """The envelope (``{"v", "id", "type", "ts", ...}``)."""


@event("gateway", "job_created")
@dataclass(frozen=True)
class JobCreated:
    """A job was created; it waits for ``jobs.start``."""

    job_id: str
    """The job."""


@event("gateway", "state_changed")
@dataclass(frozen=True)
class StateChanged:
    """A job changed state: on ``to == "RUNNING"`` start executing it; on a final state stop."""

    job_id: str
    """The job."""
    from_: str
    """The old state (``from`` on the wire)."""
    to: str
    """The new state."""


@event("gateway", "approval_decided")
@dataclass(frozen=True)
class ApprovalDecided:
    """The Commander decided an approval: run the step (approve) or skip it (deny)."""

    job_id: str
    """The job."""
    approval_id: str
    """The approval."""
    decision: str
    """``approve`` or ``deny``."""
    reason: Optional[str] = None
    """Why, if said."""
