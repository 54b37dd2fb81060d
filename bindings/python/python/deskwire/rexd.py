"""REXD: the typed messages of ``specs/rexd-v1.md`` and ``rex``'s targets.

:func:`parse_params`, :func:`parse_result` and :func:`parse_event` check a request's params, a
call's result or an event's params against the method's type and give them back in canonical
form (raising :class:`deskwire.ProtocolError` with code ``unknown_method`` or
``invalid_params``). :func:`resolve_target` finds a target as ``rex`` does. The client is
:class:`deskwire.aio.RexdClient`::

    from deskwire import rexd
    rexd.parse_params("fs.read", {"session_id": "s_1", "path": "README.md"})
    rexd.resolve_target("local")["argv"]      # ['rexd', '--stdio']
"""

from __future__ import annotations

from ._deskwire.rexd import (
    error_name,
    methods,
    parse_event,
    parse_params,
    parse_result,
    resolve_target,
)

__all__ = [
    "parse_params",
    "parse_result",
    "parse_event",
    "methods",
    "error_name",
    "resolve_target",
]
