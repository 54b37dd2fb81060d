"""asyncio drivers over the sans-IO engines: real sockets and processes, the same four steps.

One module per driver: :mod:`deskwire.aio.pump` (the pump they share), :mod:`deskwire.aio.irc`,
:mod:`deskwire.aio.desks`,
:mod:`deskwire.aio.rexd`, :mod:`deskwire.aio.mobile`, :mod:`deskwire.aio.gateway`; every public
name is here too.

Each driver is a thin pump: bytes read → ``handle_bytes``; drain ``poll_output`` → write every
``Transmit``, deliver every event; sleep until the deadline, new bytes, or a new command. No
protocol rule lives here.

- :class:`IrcDesk`: the desk end of OA1 on an IRC server (``await desk.remote_bash("ls")``).
- :class:`IrcRemote`: the remote end, answering requests with an async handler whose output
  streams as it comes.
- :class:`IrcDesks`: many desks on one IRC connection, one per channel, added and removed at run
  time (``await desks.remote_bash("#desk-1", "ls")``); with ``chat=True``, the channels' chat as
  an async iterator (``async for message in desks.chat()``) and ``send_text`` to answer.
- They connect again when the server drops them, given ``reconnect=True`` or a
  :class:`Reconnect` policy.
- :class:`RexdClient`: REXD over ``rexd --stdio``, started directly or through ``ssh``, with the
  targets of ``rex`` (``"local"``, a name from ``~/.config/rex/targets.toml``, or
  ``ssh://user@host``); :meth:`RexdClient.pty` runs an interactive program in a terminal there.
- :class:`MobileClient`: the phone end of the mobile companion over a real WebSocket (the
  ``websockets`` package: ``pip install 'deskwire[mobile]'``), reconnecting as the engine says.
- :class:`GatewayServer`: the gateway end of the gateway RPC, serving the Commander's WebSocket
  connections (``websockets`` too: ``deskwire[gateway]``) with one :class:`deskwire.gateway.Gateway`.
- :class:`GatewayClient`: the Commander's end, calling a gateway (``await commander.call(
  "jobs.create", {...})``, ``async for event in await commander.stream(job_id)``), connecting
  again when the connection drops, given ``reconnect=True``.

Cancelling the task that awaits a request sends OA1 ``CANCEL`` (or REXD ``exec.kill``). Every
way a request can end without an answer is a :class:`deskwire.DeskwireError` saying what
happened: a request that runs out of time raises :class:`deskwire.RequestTimeout`, a connection
that never becomes ready :class:`deskwire.NotReadyError` (both :class:`TimeoutError` subclasses), a
server's refusal :class:`deskwire.JoinFailedError` or :class:`deskwire.NickRefusedError` with
its words, the remote leaving :class:`deskwire.PeerLeftError`, the link ending
:class:`deskwire.DisconnectedError`::

    import asyncio
    from deskwire.aio import IrcDesk

    async def main() -> None:
        # `rexd --irc 127.0.0.1:6667 --allow-from desk` joins #desk as `rexd`.
        async with await IrcDesk.connect("127.0.0.1", 6667) as desk:
            print(await desk.remote_bash("uname -a", timeout=30))

    asyncio.run(main())
"""

from __future__ import annotations

from .desks import IrcDesks
from .gateway import GatewayClient, GatewayServer, JobEvents
from .irc import Handler, IrcDesk, IrcRemote, Reconnect
from .mobile import MobileClient
from .pump import now_ms
from .rexd import ExecExit, ExecOutput, Pty, PtyExit, PtyOutput, RexdClient

__all__ = [
    "now_ms",
    "IrcDesk",
    "IrcRemote",
    "IrcDesks",
    "RexdClient",
    "ExecOutput",
    "ExecExit",
    "Pty",
    "PtyOutput",
    "PtyExit",
    "MobileClient",
    "GatewayServer",
    "GatewayClient",
    "JobEvents",
    "Reconnect",
    "Handler",
]
