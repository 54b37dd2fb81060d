"""The gateway RPC envelope (``specs/gateway-rpc-pt.md``): :func:`read` checks a message or a
payload against the core's types (``core/schemas/gateway.schema.json``) and gives it back in
canonical form. The gateway's job engine itself is not wrapped for Python yet.

    from deskwire import gateway
    gateway.read("JobStatus", "RUNNING")
"""

from __future__ import annotations

from typing import Any

from ._deskwire import read_def

__all__ = ["read"]


def read(name: str, value: Any) -> Any:
    """Reads ``value`` as ``$defs/<name>`` of the gateway schema through the core's types;
    :class:`deskwire.ProtocolError` when it does not fit."""
    return read_def("gateway", name, value)
