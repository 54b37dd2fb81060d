"""deskwire: a sans-IO protocol engine for agent tools, from Python.

The engines do no I/O. You feed them what arrived (``handle_bytes``/``handle_line``), the time
(``now_ms``, a monotonic clock you own, e.g. ``int(time.monotonic() * 1000)``) and your commands
(``request``, ``respond``, ``cancel``, ...), and pull what to do next with ``poll_output(now_ms)``:
a :class:`Transmit` (bytes to write), an event (a frozen dataclass of the engine's module), or a
:class:`Timeout` (nothing to do before ``at_ms`` unless input arrives). A drained engine always
answers ``Timeout``, so a loop always has exactly one deadline to wait for::

    from deskwire import Timeout, Transmit, oa1

    desk = oa1.Client("#desk", "desk", seed=42)
    request_id = desk.request(0, "uname -a")
    while True:
        out = desk.poll_output(0)
        if isinstance(out, Transmit):
            print(out.data)            # b'PRIVMSG #desk :OA1 REQ ... 1 0 uname -a'
        elif isinstance(out, Timeout):
            break                      # wait for a line or until out.at_ms

Modules: :mod:`deskwire.irc`, :mod:`deskwire.oa1`, :mod:`deskwire.sim`, :mod:`deskwire.jsonrpc`,
:mod:`deskwire.rexd`, :mod:`deskwire.sidecar`, :mod:`deskwire.gateway`, :mod:`deskwire.mobile`,
:mod:`deskwire.schemas` (the JSON Schemas of those four),
:mod:`deskwire.tools`, and :mod:`deskwire.aio` (asyncio drivers over real sockets and processes).
Errors are rooted in :class:`DeskwireError`. ``deskwire.aio`` and ``deskwire.sidecar`` are
imported on demand (they bring in asyncio).
"""

from __future__ import annotations

from ._deskwire import Timeout, Transmit, __version__
from ._errors import (
    ChatError,
    ClosedError,
    ConnectFailedError,
    DeskwireError,
    DisconnectedError,
    EmptyTextError,
    ForbiddenByteError,
    JoinFailedError,
    KickedError,
    LocalError,
    LoginFailedError,
    NickRefusedError,
    NotReadyError,
    PeerLeftError,
    ProtocolError,
    QueueFullError,
    GatewayError,
    RemoteError,
    RequestTimeout,
    ReservedPrefixError,
    TlsError,
    UnknownChannelError,
)
from . import gateway, irc, jsonrpc, mobile, oa1, rexd, schemas, sim, tools

__all__ = [
    "__version__",
    "Transmit",
    "Timeout",
    "DeskwireError",
    "LocalError",
    "ClosedError",
    "RemoteError",
    "ProtocolError",
    "RequestTimeout",
    "NotReadyError",
    "JoinFailedError",
    "NickRefusedError",
    "KickedError",
    "PeerLeftError",
    "DisconnectedError",
    "LoginFailedError",
    "ConnectFailedError",
    "TlsError",
    "UnknownChannelError",
    "ChatError",
    "EmptyTextError",
    "ForbiddenByteError",
    "ReservedPrefixError",
    "QueueFullError",
    "GatewayError",
    "gateway",
    "irc",
    "jsonrpc",
    "mobile",
    "oa1",
    "rexd",
    "schemas",
    "sim",
    "tools",
]
