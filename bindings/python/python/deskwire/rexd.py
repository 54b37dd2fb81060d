"""REXD: the typed messages of ``docs/rexd.md`` and ``rex``'s targets.

:func:`parse_params`, :func:`parse_result` and :func:`parse_event` check a request's params, a
call's result or an event's params against the method's type and give them back in canonical
form (raising :class:`deskwire.ProtocolError` with code ``unknown_method`` or
``invalid_params``). :func:`resolve_target` finds a target as ``rex`` does. :func:`inflate`
and :func:`decode` give the bytes of a ``zstd`` payload (``docs/rexd-compression.md``) under a
limit, refusing a frame that would pass it unexpanded. The client is
:class:`deskwire.aio.RexdClient`::

    from deskwire import rexd
    rexd.parse_params("fs.read", {"session_id": "s_1", "path": "README.md"})
    rexd.resolve_target("local")["argv"]      # ['rexd', '--stdio']
    rexd.decode("aGk=", "base64", 16)          # b'hi'
"""

from __future__ import annotations

from typing import Any

from ._deskwire import read_def
from ._deskwire.rexd import (
    decode,
    error_name,
    inflate,
    methods,
    parse_event,
    parse_params,
    parse_result,
    resolve_target,
)

__all__ = [
    "read",
    "parse_params",
    "parse_result",
    "parse_event",
    "methods",
    "error_name",
    "resolve_target",
    "inflate",
    "decode",
]


def read(name: str, value: Any) -> Any:
    """Reads ``value`` as ``$defs/<name>`` of ``core/schemas/rexd.schema.json`` (a whole
    message, params or a result by method, or a nested type) through the core's types and
    gives it back in canonical form; :class:`deskwire.ProtocolError` when it does not fit."""
    return read_def("rexd", name, value)
