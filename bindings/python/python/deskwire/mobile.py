"""The mobile companion's WebSocket messages (``specs/sidecar-ipc-and-mobile-ws.md`` §2):
:func:`read` checks a message against the core's types (``core/schemas/ws-message.schema.json``)
and gives it back in canonical form. The mobile client and server engines are not wrapped for
Python yet.

    from deskwire import mobile
    mobile.read("Ping", {"type": "ping", "payload": {}})
"""

from __future__ import annotations

from typing import Any

from ._deskwire import read_def

__all__ = ["read"]


def read(name: str, value: Any) -> Any:
    """Reads ``value`` as ``$defs/<name>`` of the WebSocket schema through the core's types;
    :class:`deskwire.ProtocolError` when it does not fit."""
    return read_def("mobile", name, value)
