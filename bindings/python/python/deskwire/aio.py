"""asyncio drivers over the sans-IO engines: real sockets and processes, the same four steps.

Each driver is a thin pump: bytes read → ``handle_bytes``; drain ``poll_output`` → write every
``Transmit``, deliver every event; sleep until the deadline, new bytes, or a new command. No
protocol rule lives here.

- :class:`IrcDesk`: the desk end of OA1 on an IRC server (``await desk.remote_bash("ls")``).
- :class:`IrcRemote`: the remote end, answering requests with an async handler whose output
  streams as it comes.
- Both connect again when the server drops them, given ``reconnect=True`` or a
  :class:`Reconnect` policy.
- :class:`RexdClient`: REXD over ``rexd --stdio``, started directly or through ``ssh``, with the
  targets of ``rex`` (``"local"``, a name from ``~/.config/rex/targets.toml``, or
  ``ssh://user@host``); :meth:`RexdClient.pty` runs an interactive program in a terminal there.
- :class:`MobileClient`: the phone end of the mobile companion over a real WebSocket (the
  ``websockets`` package: ``pip install 'deskwire[mobile]'``), reconnecting as the engine says.
- :class:`GatewayServer`: the gateway end of the gateway RPC, serving the Commander's WebSocket
  connections (``websockets`` too: ``deskwire[gateway]``) with one :class:`deskwire.gateway.Gateway`.

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

import asyncio
import base64
import codecs
import collections
import contextlib
import importlib
import json
import logging
import math
import random
import time
from typing import (
    Any,
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Deque,
    Dict,
    List,
    Optional,
    Sequence,
    Set,
    TypeVar,
    Union,
)

from . import gateway, irc, jsonrpc, mobile, oa1, tools
from ._deskwire import Timeout, Transmit
from ._deskwire import rexd as _rexd
from ._errors import (
    ClosedError,
    DisconnectedError,
    LocalError,
    NotReadyError,
    ProtocolError,
    RemoteError,
    RequestTimeout,
)

__all__ = [
    "now_ms",
    "IrcDesk",
    "IrcRemote",
    "RexdClient",
    "ExecOutput",
    "ExecExit",
    "Pty",
    "PtyOutput",
    "PtyExit",
    "MobileClient",
    "GatewayServer",
    "Reconnect",
    "Handler",
]

log = logging.getLogger("deskwire.aio")


def now_ms() -> int:
    """The clock every driver gives its engine: ``time.monotonic()`` in milliseconds."""
    return int(time.monotonic() * 1000)


class _Pump:
    """Moves bytes between one engine and one asyncio stream until the stream ends."""

    def __init__(
        self,
        engine: Any,
        reader: asyncio.StreamReader,
        writer: Any,
        on_event: Callable[[Any], None],
        on_end: Callable[[], None],
    ) -> None:
        self.engine = engine
        self._reader = reader
        self._writer = writer
        self._on_event = on_event
        self._on_end = on_end
        self._wake = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run())

    def kick(self) -> None:
        """A command changed the engine: drain it now and wait for its new deadline."""
        self._wake.set()

    def _drain(self) -> int:
        drain = getattr(self.engine, "drain", None)
        if drain is not None:  # one crossing for all the lines
            data, events, deadline = drain(now_ms())
            if data:
                self._writer.write(data)
            for event in events:
                self._on_event(event)
            return int(deadline)
        while True:
            out = self.engine.poll_output(now_ms())
            if isinstance(out, Transmit):
                self._writer.write(out.data)
            elif isinstance(out, Timeout):
                return int(out.at_ms)
            else:
                self._on_event(out)

    async def _run(self) -> None:
        read: Optional[asyncio.Future[bytes]] = None
        try:
            while True:
                deadline = self._drain()
                await self._writer.drain()
                if read is None:
                    read = asyncio.ensure_future(self._reader.read(64 * 1024))
                wake: "asyncio.Future[Any]" = asyncio.ensure_future(self._wake.wait())
                delay = max(0, deadline - now_ms()) / 1000
                waiting: "Set[asyncio.Future[Any]]" = {read, wake}
                done, _ = await asyncio.wait(
                    waiting, timeout=delay, return_when=asyncio.FIRST_COMPLETED
                )
                wake.cancel()
                self._wake.clear()
                if read in done:
                    data = read.result()
                    read = None
                    if not data:
                        eof = getattr(self.engine, "handle_eof", None)
                        if eof is not None:
                            eof(now_ms())
                            self._drain()
                        return
                    self.engine.handle_bytes(now_ms(), data)
                elif not done:
                    self.engine.handle_timeout(now_ms())
        except (ConnectionError, BrokenPipeError) as e:
            log.debug("connection ended: %s", e)
            eof = getattr(self.engine, "handle_eof", None)
            if eof is not None and not self.engine.closed:
                eof(now_ms())
                with contextlib.suppress(Exception):
                    self._drain()
        finally:
            if read is not None:
                read.cancel()
            self._on_end()


def _seconds(timeout: Optional[float], what: str = "timeout") -> Optional[float]:
    """``timeout`` checked: ``None`` or a positive, finite number of seconds. Zero, a negative
    or a NaN would send the request and give up at once (the remote would still run the
    command), so they are refused before anything is sent."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{what} is a number of seconds, not {type(timeout).__name__}")
    if not (timeout > 0 and math.isfinite(timeout)):
        raise LocalError("invalid_value", f"{what} must be a positive number of seconds, not {timeout!r}")
    return float(timeout)


def _duration(seconds: float) -> str:
    """``30 s``, ``1.5 s``, ``250 ms``: a duration for a message, written as the core writes
    its own."""
    ms = int(seconds * 1000)
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms // 1000} s" if ms % 1000 == 0 else f"{ms / 1000:.1f} s"


def _oa1_options(
    options: Dict[str, Any], peer: Optional[str], secret: Optional[str], compression: bool
) -> Dict[str, Any]:
    """The ``oa1`` part of a connection config: the peer, the shared secret with the Unix time
    at our clock's zero, and compression."""
    oa1_options = dict(options.pop("oa1", {}) or {})
    if peer is not None:
        oa1_options.setdefault("allowed_sender", peer)
    if secret is not None:
        epoch = int(time.time() * 1000) - now_ms()
        oa1_options.setdefault("auth", {"secret": secret, "epoch_unix_ms": max(0, epoch)})
    if compression:
        oa1_options.setdefault("compression", True)
    return oa1_options


Dial = Callable[[], Awaitable["tuple[Any, asyncio.StreamReader, asyncio.StreamWriter]"]]
"""Opens a new connection with a new engine (what reconnecting does)."""


class Reconnect:
    """How an IRC connection comes back after the server drops it: the first try after
    ``min_delay`` seconds, each failure doubling the delay up to ``max_delay``, and a random
    fraction of it added so that many desks do not come back at once. A connection that
    became ready starts again at ``min_delay``."""

    def __init__(self, min_delay: float = 0.5, max_delay: float = 30.0) -> None:
        if not 0 < min_delay <= max_delay:
            raise LocalError("invalid_value", "reconnect delays need 0 < min_delay <= max_delay")
        self.min_delay = min_delay
        """Seconds before the first try."""
        self.max_delay = max_delay
        """The longest wait between tries."""

    def __repr__(self) -> str:
        return f"Reconnect(min_delay={self.min_delay!r}, max_delay={self.max_delay!r})"


_Connection = TypeVar("_Connection", bound="_IrcConnection")


class _IrcConnection:
    """What the desk and the remote share: the socket, the pump, readiness and the end, and
    with a :class:`Reconnect` policy, a new connection (and engine) when the server drops it."""

    def __init__(
        self, engine: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        self._engine = engine
        self._writer = writer
        self._ready: asyncio.Future[None] = loop.create_future()
        self._ended: asyncio.Future[None] = loop.create_future()
        self._dial: Optional[Dial] = None
        self._policy: Optional[Reconnect] = None
        self._closing = False
        self._ready_timeout: Optional[float] = 30
        self._redial: Optional[asyncio.Task[None]] = None
        self._delay = 0.0
        self.reconnects = 0
        """How many times the connection came back after the server dropped it."""
        self.events: List[Any] = []
        """IRC and link events seen so far (registration, joins, state changes), at most 256."""
        self._pump = _Pump(engine, reader, writer, self._event, self._end)

    def _reconnect_with(self, dial: Dial, policy: Reconnect) -> None:
        self._dial, self._policy = dial, policy
        self._delay = policy.min_delay

    def _event(self, event: Any) -> None:
        if isinstance(event, oa1.StateChanged) and event.state == "ready":
            if self._policy is not None:
                self._delay = self._policy.min_delay
            if not self._ready.done():
                self._ready.set_result(None)
        # A refusal from the server while getting ready ends the wait with its words; the end
        # of the link does too, unless a new connection is coming.
        refused = isinstance(event, irc.JoinFailed) or (
            isinstance(event, irc.NickRefused) and event.next is None
        )
        ended = isinstance(event, irc.Disconnected) and self._dial is None
        if (refused or ended) and not self._ready.done():
            self._fail_ready(event.exception())
        if len(self.events) < 256:
            self.events.append(event)

    def _fail_ready(self, error: BaseException) -> None:
        self._ready.set_exception(error)
        self._ready.exception()  # seen here: nobody waiting for it is not an error to log

    def _waiting_for(self) -> str:
        """What the connection waits for, in words (the desk's engine says it; a remote is
        waiting for the server or the channel)."""
        waiting_for = getattr(self._engine, "waiting_for", None)
        said = waiting_for() if waiting_for is not None and not self._engine.closed else None
        if said:
            return str(said)
        state = self.state
        return "a connection to the server" if state == "closed" else f"the connection ({state})"

    def _end(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()
        if self._dial is not None and not self._closing:
            # Requests wait for the next connection; readiness is that connection's.
            if self._ready.done():
                self._ready = asyncio.get_running_loop().create_future()
            self._redial = asyncio.get_running_loop().create_task(self._come_back())
            return
        if not self._ready.done():
            self._fail_ready(DisconnectedError("disconnected", "the IRC connection closed"))
        if not self._ended.done():
            self._ended.set_result(None)

    async def _come_back(self) -> None:
        assert self._dial is not None and self._policy is not None
        while not self._closing:
            # The delay doubles with every try, connected or not, until a connection gets ready
            # (a server that takes the socket and then drops us is not retried in a loop).
            delay = self._delay
            self._delay = min(self._policy.max_delay, delay * 2)
            await asyncio.sleep(delay * (1 + random.random() / 2))
            try:
                engine, reader, writer = await asyncio.wait_for(self._dial(), 30)
            except (OSError, asyncio.TimeoutError) as e:
                log.info("reconnecting: %s; next try in about %.1f s", e, self._delay)
                continue
            self._engine.close()
            self._engine, self._writer = engine, writer
            self.reconnects += 1
            # This pump's end (the server dropping us again) starts the next round.
            self._pump = _Pump(engine, reader, writer, self._event, self._end)
            return

    @property
    def state(self) -> str:
        """The engine's connection state (``"ready"`` when requests flow)."""
        return str(self._engine.state)

    def stats(self) -> Dict[str, Any]:
        """The engine's counters: ``{"irc": {...}, "oa1": {...}}``."""
        return dict(self._engine.stats())

    async def wait_ready(self, timeout: Optional[float] = 30) -> None:
        """Waits until registered, in the channel, and (for a desk) its remote is there too.
        Raises :class:`deskwire.NotReadyError` (a :class:`TimeoutError`) after ``timeout``
        seconds, saying what it waited for and who was in the channel; a refusal from the
        server (:class:`deskwire.JoinFailedError`, :class:`deskwire.NickRefusedError`) or the
        end of the link (:class:`deskwire.DisconnectedError`) at once."""
        timeout = _seconds(timeout, "ready_timeout")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), timeout)
        except asyncio.TimeoutError:
            assert timeout is not None
            raise NotReadyError(
                "not_ready",
                f"not ready after {_duration(timeout)}: waiting for {self._waiting_for()}",
            ) from None

    async def close(self, reason: str = "bye", timeout: float = 2.0) -> None:
        """Leaves with ``QUIT`` and waits (at most ``timeout`` seconds) for the server to close."""
        self._closing = True
        if self._redial is not None and not self._redial.done():
            self._redial.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._redial
            self._end()  # no connection is coming: end as without reconnecting
        if not self._ended.done():
            with contextlib.suppress(LocalError):
                self._engine.quit(now_ms(), reason)
            self._pump.kick()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._ended), timeout)
        self._pump.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._pump.task
        self._engine.close()

    async def wait_closed(self) -> None:
        """Waits until the connection ends."""
        await asyncio.shield(self._ended)

    async def __aenter__(self: _Connection) -> _Connection:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class IrcDesk(_IrcConnection):
    """The desk end of OA1 on a real IRC server. Make one with :meth:`connect`; it sends only
    while its remote is in the channel, and takes answers from that remote only."""

    def __init__(
        self, engine: oa1.Desk, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._waiting: Dict[str, asyncio.Future[Union[oa1.Response, oa1.Failed]]] = {}
        super().__init__(engine, reader, writer)

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int = 6667,
        *,
        nick: str = "desk",
        channel: str = "#desk",
        remote_nick: str = "rexd",
        secret: Optional[str] = None,
        compression: bool = False,
        seed: Optional[int] = None,
        ready_timeout: Optional[float] = 30,
        reconnect: Union[bool, Reconnect] = False,
        **options: Any,
    ) -> "IrcDesk":
        """Connects, registers as ``nick`` and joins ``channel``; returns once its remote,
        ``remote_nick``, is in the channel too. The default is ``rexd``, the nick ``rexd --irc``
        joins as; name another nick, a ``nick!user@host`` mask, or ``"*"`` to take answers
        from anyone in the channel (then it waits for any other member). Answers are taken from
        the remote only, and nothing is sent while it is away (IRC keeps no history: a request
        sent into an empty channel reaches nobody). ``secret`` authenticates every frame (the
        remote needs the same); ``compression`` offers compressed answers. ``options`` are
        :class:`deskwire.oa1.Desk`'s (``oa1={...}``, ``session={...}``). Request ids come from
        the OS's entropy; ``seed`` fixes them, for tests only.

        ``ready_timeout`` (seconds) bounds the wait here and, later, how long a request may
        wait for the connection to be ready again before it fails. Raises
        :class:`deskwire.NotReadyError` (a :class:`TimeoutError`) when the connection is not
        ready in time, saying what it waited for and who was in the channel, e.g. ``not ready
        after 30 s: waiting for remote `rexd` in #desk; members: deskbot``;
        :class:`deskwire.JoinFailedError` or :class:`deskwire.NickRefusedError` with the
        server's words when it refuses the channel or every nick; :class:`deskwire.LocalError`
        (``invalid_config``) at once for a nick, channel or remote the server would refuse.

        With ``reconnect`` (``True`` or a :class:`Reconnect` policy), the desk connects again,
        with a fresh engine, when the server drops it: requests in flight then fail with
        :class:`deskwire.DisconnectedError`, and new ones wait for the next connection (up to
        ``ready_timeout``)."""
        ready_timeout = _seconds(ready_timeout, "ready_timeout")
        if remote_nick is None:
            raise LocalError(
                "invalid_config",
                "a desk needs its remote's nick (`rexd --irc` joins as `rexd`), or \"*\" to take "
                "answers from anyone in the channel",
            )
        oa1_options = _oa1_options(options, remote_nick, secret, compression)
        if ready_timeout is not None:
            oa1_options.setdefault("ready_timeout_ms", max(1, int(ready_timeout * 1000)))
        policy = Reconnect() if reconnect is True else reconnect or None

        async def dial() -> "tuple[Any, asyncio.StreamReader, asyncio.StreamWriter]":
            # A new engine each time: ids from the OS's entropy, or (tests) from the next seed,
            # so none repeats an earlier one.
            engine_seed = None if seed is None else seed + (desk_box[0].reconnects + 1 if desk_box else 0)
            engine = oa1.Desk(
                nick,
                channel,
                seed=engine_seed,
                now_ms=now_ms(),
                oa1=dict(oa1_options),
                **options,
            )
            reader, writer = await asyncio.open_connection(host, port)
            return engine, reader, writer

        desk_box: List["IrcDesk"] = []
        engine, reader, writer = await dial()
        desk = cls(engine, reader, writer)
        desk._ready_timeout = ready_timeout
        desk_box.append(desk)
        if policy is not None:
            desk._reconnect_with(dial, policy)
        try:
            await desk.wait_ready(ready_timeout)
        except BaseException:
            await desk.close()
            raise
        return desk

    def _event(self, event: Any) -> None:
        if isinstance(event, (oa1.Response, oa1.Failed)):
            # The engine fails every request the link dooms (disconnected, kicked, peer_left,
            # join_failed, not_ready), each with its reason: nothing is failed here.
            future = self._waiting.pop(event.id, None)
            if future is not None and not future.done():
                future.set_result(event)
            return
        super()._event(event)

    def _end(self) -> None:
        # Only what the engine could not fail itself (the pump stopped on an error).
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(DisconnectedError("disconnected", "the IRC connection closed"))
        self._waiting.clear()
        super()._end()

    def waiting_for(self) -> Optional[str]:
        """What requests wait for before they can leave, in words (``remote `rexd` in #desk;
        members: deskbot``), or ``None`` when they can leave now."""
        if self._engine.closed:
            return None
        said = self._engine.waiting_for()
        return None if said is None else str(said)

    def members(self) -> List[str]:
        """The other members of the channel, as the server wrote their nicks."""
        return [] if self._engine.closed else list(self._engine.members())

    async def request(
        self, payload: Union[str, bytes], *, timeout: Optional[float] = None
    ) -> str:
        """Sends ``payload`` (``str``, or UTF-8 ``bytes``) and returns the whole response text.

        ``timeout`` (seconds; ``None``: the engine's ``request_timeout_ms``, 30 s) starts when
        the request can leave, so the wait for the remote to (re)join is not counted in it;
        that wait is bounded by ``ready_timeout``. A ``timeout`` that is not positive raises
        :class:`deskwire.LocalError` before anything is sent.

        Raises :class:`deskwire.RequestTimeout` after ``timeout`` (the remote is sent
        ``CANCEL``), :class:`deskwire.NotReadyError` when the request could not leave within
        ``ready_timeout`` (both are :class:`TimeoutError` subclasses), :class:`deskwire.RemoteError`
        for the remote's ``ERR`` answer, and for the link: :class:`deskwire.JoinFailedError`,
        :class:`deskwire.KickedError`, :class:`deskwire.PeerLeftError`,
        :class:`deskwire.DisconnectedError`, each with what happened. Cancelling the awaiting
        task sends ``CANCEL``."""
        timeout = _seconds(timeout)
        if self._ended.done():
            raise ClosedError("closed", "the desk is closed")
        if not self._ready.done() and self._dial is not None:
            # Reconnecting: the engine of the next connection takes the request; wait for it
            # as long as a request may wait for readiness.
            await self.wait_ready(self._ready_timeout)
        timeout_ms = None if timeout is None else max(1, int(timeout * 1000))
        request_id = self._engine.request(now_ms(), payload, timeout_ms)
        future: asyncio.Future[Union[oa1.Response, oa1.Failed]]
        future = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        self._pump.kick()
        try:
            outcome = await future
        except asyncio.CancelledError:
            if self._waiting.pop(request_id, None) is not None:
                with contextlib.suppress(LocalError):
                    self._engine.cancel(now_ms(), request_id, "cancelled")
                self._pump.kick()
            raise
        if isinstance(outcome, oa1.Failed):
            raise outcome.exception()
        return outcome.text

    async def remote_bash(self, command: str, timeout: Optional[float] = 30) -> str:
        """Runs ``command`` through ``RemoteBash`` on the remote and returns its combined
        output (the tool's text result). ``timeout`` is in seconds, as the tool's
        ``timeout_sec`` (:func:`deskwire.oa1.remote_bash_args`) and :meth:`request`'s; it
        starts when the request can leave. Raises as :meth:`request`."""
        return await self.request(command, timeout=timeout)

    async def run_tool(self, call: Dict[str, Any]) -> Dict[str, Any]:
        """Runs a model's ``RemoteBash`` call (``{"id", "name", "args"}``, an item of
        :attr:`deskwire.tools.ProviderResponse.tool_calls` whose verdict is
        :class:`deskwire.tools.Run`) and gives its result for :func:`deskwire.tools.tool_results`:
        the output, or, when the arguments are wrong or the request failed, the tool's
        ``{"ok": false, "error", "message"}`` as an error result, so the model reads what
        happened. Misuse of the desk itself (closed, not a ``RemoteBash`` call) raises."""
        if not isinstance(call, dict) or call.get("name") != oa1.TOOL_NAME:
            name = call.get("name") if isinstance(call, dict) else call
            raise LocalError("invalid_value", f"run_tool runs {oa1.TOOL_NAME} calls, not {name!r}")
        call_id = str(call.get("id", ""))
        try:
            command, timeout = oa1.remote_bash_args(call.get("args", {}))
            if timeout == 0:
                raise LocalError("invalid_arguments", "timeout_sec must be at least 1")
        except LocalError as e:  # the model's arguments: it reads why
            return tools.result(call_id, oa1.remote_bash_failure(e.code, e.message), is_error=True)
        try:
            output = await self.remote_bash(command, timeout=timeout)
        except RemoteError as e:
            return tools.result(call_id, oa1.remote_bash_failure(e.code, e.message), is_error=True)
        return tools.result(call_id, output)


Handler = Callable[
    [oa1.Request], Union[Awaitable[Union[str, bytes]], AsyncIterator[Union[str, bytes]]]
]
"""An :class:`IrcRemote` handler: an async function returning the whole answer, or an async
generator yielding it piece by piece (each piece is sent as it comes). Answers and pieces may
be ``str`` or ``bytes`` (a process's output as read): bytes are decoded as UTF-8 across piece
boundaries, a sequence cut between two reads joined again, and bytes that are not UTF-8
replaced by U+FFFD, since an OA1 answer is text."""


class IrcRemote(_IrcConnection):
    """The remote end of OA1 on a real IRC server: every request runs ``handler`` as its own
    task; ``CANCEL`` cancels that task. Make one with :meth:`connect`."""

    def __init__(
        self,
        engine: oa1.Remote,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        handler: Handler,
    ) -> None:
        self._handler = handler
        self._tasks: Dict[str, Optional["asyncio.Task[None]"]] = {}
        self.cancelled: List[oa1.Cancelled] = []
        """The cancellations received (bounded: the last 256)."""
        super().__init__(engine, reader, writer)

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int = 6667,
        handler: Optional[Handler] = None,
        *,
        nick: str = "rexd",
        channel: str = "#desk",
        desk_nick: Optional[str] = "desk",
        secret: Optional[str] = None,
        compression: bool = True,
        ready_timeout: Optional[float] = 30,
        reconnect: Union[bool, Reconnect] = False,
        **options: Any,
    ) -> "IrcRemote":
        """Connects, registers as ``nick`` (``rexd`` by default, the remote nick an
        :class:`IrcDesk` waits for unless told another), joins ``channel`` and serves requests
        (from ``desk_nick`` only, unless ``None``) with ``handler``. ``secret`` authenticates every
        frame; ``compression`` accepts a desk's offer of compressed answers. With
        ``reconnect``, it connects again when the server drops it (the handlers running then
        are cancelled) and :meth:`serve_forever` goes on."""
        if handler is None:
            raise LocalError("invalid_value", "IrcRemote needs a handler")
        oa1_options = _oa1_options(options, desk_nick, secret, compression)
        policy = Reconnect() if reconnect is True else reconnect or None

        async def dial() -> "tuple[Any, asyncio.StreamReader, asyncio.StreamWriter]":
            engine = oa1.Remote(nick, channel, now_ms=now_ms(), oa1=dict(oa1_options), **options)
            reader, writer = await asyncio.open_connection(host, port)
            return engine, reader, writer

        engine, reader, writer = await dial()
        remote = cls(engine, reader, writer, handler)
        if policy is not None:
            remote._reconnect_with(dial, policy)
        try:
            await remote.wait_ready(ready_timeout)
        except BaseException:
            await remote.close()
            raise
        return remote

    def _event(self, event: Any) -> None:
        if isinstance(event, oa1.Request):
            task = asyncio.get_running_loop().create_task(self._serve(event))
            self._tasks[event.id] = task
            task.add_done_callback(self._forget(event.id))
            return
        if isinstance(event, oa1.Cancelled):
            self.cancelled = (self.cancelled + [event])[-256:]
            running = self._tasks.pop(event.id, None)
            if running is not None:
                running.cancel()
            return
        super()._event(event)

    def _forget(self, request_id: str) -> Callable[["asyncio.Task[None]"], None]:
        def forget(_task: "asyncio.Task[None]") -> None:
            self._tasks.pop(request_id, None)

        return forget

    def _end(self) -> None:
        for task in self._tasks.values():
            if task is not None:
                task.cancel()
        super()._end()

    async def _serve(self, request: oa1.Request) -> None:
        engine = self._engine
        try:
            result = self._handler(request)
            if hasattr(result, "__aiter__"):
                decoder = codecs.getincrementaldecoder("utf-8")("replace")
                async for piece in result:
                    if isinstance(piece, bytes):
                        piece = decoder.decode(piece)
                    if piece:
                        engine.send(now_ms(), request.id, piece)
                        self._pump.kick()
                rest = decoder.decode(b"", final=True)  # a sequence cut off at the very end
                if rest:
                    engine.send(now_ms(), request.id, rest)
                engine.finish(now_ms(), request.id)
            else:
                text = await result
                if isinstance(text, bytes):
                    text = text.decode("utf-8", "replace")
                engine.respond(now_ms(), request.id, text)
        except asyncio.CancelledError:
            return
        except LocalError as e:
            log.debug("request %s: %s", request.id, e)
            return
        except Exception as e:  # the handler's failure goes back as ERR
            log.warning("request %s failed: %s", request.id, e)
            with contextlib.suppress(LocalError):
                engine.fail(now_ms(), request.id, "error", f"{type(e).__name__}: {e}")
        self._pump.kick()

    async def serve_forever(self) -> None:
        """Serves until the connection ends."""
        await self.wait_closed()


class ExecOutput:
    """A piece of a process's output."""

    __slots__ = ("stream", "data", "seq")
    __match_args__ = ("stream", "data")

    def __init__(self, stream: str, data: bytes, seq: int) -> None:
        self.stream = stream
        """``"stdout"`` or ``"stderr"``."""
        self.data = data
        """The bytes."""
        self.seq = seq
        """The daemon's sequence number."""

    def __repr__(self) -> str:
        return f"ExecOutput(stream={self.stream!r}, data={self.data!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ExecOutput)
            and (self.stream, self.data) == (other.stream, other.data)
        )

    __hash__ = None  # type: ignore[assignment]


class ExecExit:
    """The process ended."""

    __slots__ = ("exit_code", "signal", "timed_out", "duration_ms")
    __match_args__ = ("exit_code", "signal")

    def __init__(
        self, exit_code: Optional[int], signal: Optional[str], timed_out: bool, duration_ms: int
    ) -> None:
        self.exit_code = exit_code
        """The exit status, ``None`` when a signal ended it."""
        self.signal = signal
        """The signal's name, when one ended it."""
        self.timed_out = timed_out
        """Whether the daemon killed it at its timeout."""
        self.duration_ms = duration_ms
        """How long it ran."""

    def __repr__(self) -> str:
        return (
            f"ExecExit(exit_code={self.exit_code!r}, signal={self.signal!r}, "
            f"timed_out={self.timed_out!r}, duration_ms={self.duration_ms!r})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExecExit) and (
            self.exit_code,
            self.signal,
            self.timed_out,
        ) == (other.exit_code, other.signal, other.timed_out)

    __hash__ = None  # type: ignore[assignment]


class PtyOutput:
    """A piece of what a terminal program wrote."""

    __slots__ = ("data", "seq")
    __match_args__ = ("data",)

    def __init__(self, data: bytes, seq: int) -> None:
        self.data = data
        """The bytes, as the terminal gave them (echo, escape sequences, CRLF line ends)."""
        self.seq = seq
        """The daemon's sequence number (1, 2, ... per terminal)."""

    def __repr__(self) -> str:
        return f"PtyOutput(data={self.data!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PtyOutput) and self.data == other.data

    __hash__ = None  # type: ignore[assignment]


class PtyExit:
    """The terminal's program ended."""

    __slots__ = ("exit_code", "signal", "duration_ms")
    __match_args__ = ("exit_code", "signal")

    def __init__(self, exit_code: Optional[int], signal: Optional[str], duration_ms: int = 0) -> None:
        self.exit_code = exit_code
        """The exit status, ``None`` when a signal ended it."""
        self.signal = signal
        """The signal's name, when one ended it."""
        self.duration_ms = duration_ms
        """How long it ran."""

    def __repr__(self) -> str:
        return (
            f"PtyExit(exit_code={self.exit_code!r}, signal={self.signal!r}, "
            f"duration_ms={self.duration_ms!r})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PtyExit) and (self.exit_code, self.signal) == (
            other.exit_code,
            other.signal,
        )

    __hash__ = None  # type: ignore[assignment]


class _PtyInbox:
    """The events of one terminal not yet read, and their size: a terminal's output has no cap
    at the daemon, so the client bounds what it holds for a reader that does not read."""

    def __init__(self, limit: int) -> None:
        self.queue: asyncio.Queue[Optional[Union[PtyOutput, PtyExit]]] = asyncio.Queue()
        self.buffered = 0
        self.limit = limit
        self.overflowed = False


class Pty:
    """An interactive program in a terminal on the REXD host (``pty.open``); make one with
    :meth:`RexdClient.pty`. Iterate it for :class:`PtyOutput` as it comes, then one
    :class:`PtyExit`; :meth:`write` types, :meth:`resize` resizes, :meth:`close` (or leaving
    ``async with``, on every way out) ends it. Cancelling a task while it iterates closes the
    terminal too."""

    def __init__(self, client: "RexdClient", pty_id: str, process_id: str, inbox: _PtyInbox) -> None:
        self._client = client
        self._inbox = inbox
        self._closed = False
        self.pty_id = pty_id
        """The daemon's id of the terminal."""
        self.process_id = process_id
        """The daemon's id of its process."""
        self.exit: Optional[PtyExit] = None
        """How the program ended, once :class:`PtyExit` was read."""

    async def write(self, data: Union[bytes, str]) -> None:
        """Types ``data`` (``pty.input``): bytes as they are, a str as UTF-8. ``b"\x03"`` is
        Ctrl-C, ``b"\x04"`` Ctrl-D at the start of a line."""
        if not isinstance(data, (bytes, bytearray, memoryview, str)):
            raise TypeError(f"data must be bytes or str, not {type(data).__name__}")
        self._check_open()
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        await self._client.call(
            "pty.input",
            self._client._with_session(
                {
                    "pty_id": self.pty_id,
                    "data": base64.b64encode(raw).decode("ascii"),
                    "encoding": "base64",
                }
            ),
        )

    async def resize(self, cols: int, rows: int) -> None:
        """Resizes the terminal (``pty.resize``); the program gets ``SIGWINCH``."""
        for name, value in (("cols", cols), ("rows", rows)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if not 1 <= value <= 65535:
                raise LocalError("invalid_value", f"{name} must be 1..65535, not {value}")
        self._check_open()
        await self._client.call(
            "pty.resize",
            self._client._with_session({"pty_id": self.pty_id, "cols": cols, "rows": rows}),
        )

    async def close(self, kill_process: bool = True) -> None:
        """Closes the terminal (``pty.close``), ending its program unless ``kill_process`` is
        false. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._client._forget_pty(self.pty_id)
        if self._client._ended:
            return
        with contextlib.suppress(RemoteError):  # the program may have ended on its own
            await self._client.call(
                "pty.close",
                self._client._with_session({"pty_id": self.pty_id, "kill_process": kill_process}),
            )

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("closed", f"the terminal {self.pty_id} is closed")
        if self._client._ended:
            raise ClosedError("disconnected", "the REXD connection is closed")

    def _close_now(self) -> None:
        """Closes without waiting (a cancelled reader cannot await)."""
        if self._closed:
            return
        self._closed = True
        self._client._forget_pty(self.pty_id)
        if not self._client._ended:
            with contextlib.suppress(LocalError):
                self._client._peer.call(
                    now_ms(),
                    "pty.close",
                    self._client._with_session({"pty_id": self.pty_id, "kill_process": True}),
                )
            self._client._pump.kick()

    def __aiter__(self) -> "Pty":
        return self

    async def __anext__(self) -> Union[PtyOutput, PtyExit]:
        if self.exit is not None:
            raise StopAsyncIteration
        inbox = self._inbox
        try:
            event = await inbox.queue.get()
        except asyncio.CancelledError:
            self._close_now()
            raise
        if event is None:
            inbox.queue.put_nowait(None)  # every later read ends the same way
            self._closed = True
            self._client._forget_pty(self.pty_id)
            if inbox.overflowed:
                raise LocalError(
                    "too_large",
                    f"the terminal's unread output passed {inbox.limit} bytes; it was closed",
                )
            raise ClosedError("disconnected", "the REXD connection closed")
        if isinstance(event, PtyOutput):
            inbox.buffered -= len(event.data)
            return event
        self.exit = event
        self._closed = True
        self._client._forget_pty(self.pty_id)
        return self.exit

    async def __aenter__(self) -> "Pty":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Pty(pty_id={self.pty_id!r}, process_id={self.process_id!r})"


def _fs_text(method: str, result: Any) -> str:
    """A REXD file operation's result as the text of a tool result (``rexd --mcp``'s words)."""
    if method == "fs.read" and isinstance(result, dict):
        return _decode(result, "content").decode("utf-8", "replace")
    if method == "fs.write" and isinstance(result, dict):
        return f"wrote {result.get('bytes_written')} bytes to {result.get('path')}"
    if method == "fs.list" and isinstance(result, dict):
        return "".join(
            f"{e.get('name')}{'/' if e.get('type') == 'dir' else ''}\n" for e in result.get("entries", [])
        )
    if method == "fs.glob" and isinstance(result, dict):
        return "".join(f"{m}\n" for m in result.get("matches", []))
    return json.dumps(result, indent=2, ensure_ascii=False)


def _decode(params: Dict[str, Any], key: str = "data") -> bytes:
    data = params.get(key) or ""
    if params.get("encoding") == "base64":
        return base64.b64decode(data)
    return str(data).encode("utf-8")


class RexdClient:
    """A REXD session over ``rexd --stdio`` (directly, or through ``ssh``). Make one with
    :meth:`connect`; every call is a method of the REXD spec."""

    def __init__(self, process: asyncio.subprocess.Process, peer: jsonrpc.Peer) -> None:
        self._process = process
        self._peer = peer
        self._calls: Dict[Any, asyncio.Future[Any]] = {}
        self._exec: Dict[str, asyncio.Queue[Any]] = {}
        self._ptys: Dict[str, _PtyInbox] = {}
        # Output can come in the same read as pty.open's answer, before pty() has its inbox: it
        # is kept while an open is pending. Late output of a terminal closed here is dropped.
        self._pty_opening = 0
        self._pty_limit = 0
        self._ptys_closed: Deque[str] = collections.deque(maxlen=256)
        self._stderr = bytearray()
        self._ended = False
        self.session: Dict[str, Any] = {}
        """The ``session.open`` result (``session_id``, ``capabilities``, ``limits``, ...)."""
        assert process.stdout is not None and process.stdin is not None
        self._pump = _Pump(peer, process.stdout, process.stdin, self._event, self._end)
        self._stderr_task = asyncio.get_running_loop().create_task(self._read_stderr())

    @classmethod
    async def connect(
        cls,
        target: Optional[str] = "local",
        *,
        targets_file: Optional[str] = None,
        rexd: Optional[str] = None,
        rexd_args: Optional[Sequence[str]] = None,
        client_name: str = "deskwire-python",
        workspace_roots: Optional[Sequence[str]] = None,
        timeout: float = 30,
    ) -> "RexdClient":
        """Starts the daemon for ``target`` as ``rex`` does (``"local"``, a name from the
        targets file, an ``ssh://user@host[:port]`` URL, or ``None`` for the file's current
        target) and opens a session. ``rexd`` overrides the daemon's path and ``rexd_args`` its
        extra arguments (``["--root", "/srv/app"]``, ``["--allow-shell"]`` for REXD's ``bash``
        tool and shell command strings).

        ``"local"`` runs ``rexd`` from ``PATH`` (on an ssh target, the remote ``PATH``): the
        binary of this repository's ``rexd/`` crate, ``cargo install --path rexd`` (or
        ``cargo build --release -p rexd`` and ``rexd="target/release/rexd"``). Without it,
        :class:`deskwire.LocalError` (``not_found``) says so."""
        spec = _rexd.resolve_target(
            target,
            targets_file=targets_file,
            rexd=rexd,
            rexd_args=None if rexd_args is None else list(rexd_args),
        )
        try:
            process = await asyncio.create_subprocess_exec(
                *spec["argv"],
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=bool(spec["local"]),
            )
        except FileNotFoundError as e:
            raise LocalError(
                "not_found",
                f"cannot start {spec['argv'][0]}: {e.strerror}; rexd comes from this "
                "repository's rexd/ crate: `cargo install --path rexd` puts it on PATH, or pass "
                "rexd= its path (target/release/rexd after `cargo build --release -p rexd`)",
            ) from e
        peer = jsonrpc.Peer("jsonrpc2", seed=time.time_ns() & 0xFFFFFFFF)
        client = cls(process, peer)
        params: Dict[str, Any] = {"client_name": client_name}
        roots = list(workspace_roots) if workspace_roots is not None else spec["workspace_roots"]
        if roots:
            params["workspace_roots"] = roots
        try:
            client.session = await asyncio.wait_for(client.call("session.open", params), timeout)
        except BaseException:
            await client.close()
            raise
        return client

    @property
    def session_id(self) -> str:
        """The session's id."""
        return str(self.session["session_id"])

    async def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        while True:
            line = await self._process.stderr.readline()
            if not line:
                return
            if len(self._stderr) < 64 * 1024:
                self._stderr += line
            log.debug("rexd: %s", line.decode("utf-8", "replace").rstrip())

    def _event(self, event: Any) -> None:
        if isinstance(event, (jsonrpc.Response, jsonrpc.Failed)):
            future = self._calls.pop(event.id, None)
            if future is not None and not future.done():
                future.set_result(event)
        elif isinstance(event, jsonrpc.Notification):
            params = event.params if isinstance(event.params, dict) else {}
            process_id = params.get("process_id")
            if isinstance(process_id, str) and event.method.startswith("exec."):
                # Output may come in the same read as exec.start's answer, before exec() has
                # its queue: keep it for the process. (rexd bounds a process's output.)
                self._exec.setdefault(process_id, asyncio.Queue()).put_nowait(event)
            pty_id = params.get("pty_id")
            if isinstance(pty_id, str) and event.method in ("pty.output", "pty.exit"):
                self._pty_event(pty_id, event.method, params)
        elif isinstance(event, jsonrpc.Malformed):
            log.warning("rexd sent something unreadable: %s", event.reason)

    def _forget_pty(self, pty_id: str) -> None:
        self._ptys.pop(pty_id, None)
        self._ptys_closed.append(pty_id)

    def _pty_event(self, pty_id: str, method: str, params: Dict[str, Any]) -> None:
        inbox = self._ptys.get(pty_id)
        if inbox is None and self._pty_opening and pty_id not in self._ptys_closed:
            inbox = self._ptys[pty_id] = _PtyInbox(self._pty_limit)
        if inbox is None or inbox.overflowed:
            return  # a terminal closed on our side, or not ours
        if method == "pty.exit":
            code = params.get("exit_code")
            signal = params.get("signal")
            inbox.queue.put_nowait(
                PtyExit(
                    code if isinstance(code, int) else None,
                    signal if isinstance(signal, str) else None,
                    int(params.get("duration_ms") or 0),
                )
            )
            return
        data = _decode(params)
        inbox.buffered += len(data)
        if inbox.buffered > inbox.limit:
            # Nobody reads it: close the terminal rather than hold its output without bound.
            inbox.overflowed = True
            inbox.queue.put_nowait(None)
            with contextlib.suppress(LocalError):
                self._peer.call(
                    now_ms(),
                    "pty.close",
                    self._with_session({"pty_id": pty_id, "kill_process": True}),
                )
            self._pump.kick()
            return
        inbox.queue.put_nowait(PtyOutput(data, int(params.get("seq") or 0)))

    def _end(self) -> None:
        self._ended = True
        reason = self._stderr.decode("utf-8", "replace").strip()[-2000:]
        for future in self._calls.values():
            if not future.done():
                future.set_exception(
                    ClosedError("disconnected", f"rexd ended{': ' + reason if reason else ''}")
                )
        self._calls.clear()
        for queue in self._exec.values():
            queue.put_nowait(None)
        for inbox in self._ptys.values():
            inbox.queue.put_nowait(None)

    async def call(self, method: str, params: Optional[Dict[str, Any]] = None) -> Any:
        """Calls a REXD method and returns its result. A REXD error raises
        :class:`deskwire.RemoteError` whose ``code`` is the spec's name (``forbidden_path``, ...)
        with ``number`` and ``data``; no answer in time raises :class:`deskwire.RequestTimeout`.
        Cancelling the awaiting task stops waiting for the answer."""
        if self._ended:
            raise ClosedError("closed", "the REXD connection is closed")
        call_id = self._peer.call(now_ms(), method, params)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls[call_id] = future
        self._pump.kick()
        try:
            outcome = await future
        except asyncio.CancelledError:
            if self._calls.pop(call_id, None) is not None:
                with contextlib.suppress(LocalError):
                    self._peer.cancel(now_ms(), call_id)
                self._pump.kick()
            raise
        if isinstance(outcome, jsonrpc.Failed):
            if outcome.timed_out:
                raise RequestTimeout("timeout", f"no answer to {method} in time")
            remote = outcome.remote or {}
            number = remote.get("code")
            name = _rexd.error_name(number) if isinstance(number, int) else None
            error = RemoteError(name or str(number), str(remote.get("message", "")))
            error.number = number  # type: ignore[attr-defined]
            error.data = remote.get("data")  # type: ignore[attr-defined]
            raise error
        return outcome.result

    def _with_session(self, params: Dict[str, Any]) -> Dict[str, Any]:
        return {"session_id": self.session_id, **{k: v for k, v in params.items() if v is not None}}

    async def exec(
        self,
        argv: Union[Sequence[str], str],
        *,
        cwd: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        stdin: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> AsyncIterator[Union[ExecOutput, ExecExit]]:
        """Runs a process (an argv list, or a shell command string) and yields its output as it
        comes, then its :class:`ExecExit`. Leaving the loop early or cancelling the consuming
        task kills it (``exec.kill``); a daemon-side timeout raises
        :class:`deskwire.RequestTimeout` after the output."""
        program: Dict[str, Any]
        if isinstance(argv, str):
            program = {"command": argv, "shell": True}
        else:
            program = {"argv": list(argv)}
        timeout = _seconds(timeout)
        params = self._with_session(
            {
                **program,
                "cwd": cwd,
                "env": env,
                "stdin": stdin,
                "timeout_ms": None if timeout is None else max(1, int(timeout * 1000)),
            }
        )
        events = self._exec_events(params, repr(argv))
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()  # a loop left early kills the process now, not at collection

    async def _exec_events(
        self, params: Dict[str, Any], what: str
    ) -> AsyncGenerator[Union[ExecOutput, ExecExit], None]:
        """``exec.start`` with ``params``, then its events (see :meth:`exec`)."""
        started = await self.call("exec.start", params)
        process_id = started["process_id"]
        queue = self._exec.setdefault(process_id, asyncio.Queue())
        exited = False
        try:
            while True:
                event = await queue.get()
                if event is None:
                    raise ClosedError("disconnected", "the REXD connection closed")
                method, body = event.method, event.params
                if method in ("exec.stdout", "exec.stderr"):
                    yield ExecOutput(method[5:], _decode(body), int(body.get("seq", 0)))
                elif method == "exec.exit":
                    exited = True
                    done = ExecExit(
                        body.get("exit_code"),
                        body.get("signal"),
                        bool(body.get("timed_out")),
                        int(body.get("duration_ms") or 0),
                    )
                    if done.timed_out:
                        raise RequestTimeout("timeout", f"{what} ran past its timeout")
                    yield done
                    return
                elif method == "exec.error":
                    exited = True
                    raise RemoteError("exec_error", str(body.get("message", "")))
        finally:
            self._exec.pop(process_id, None)
            if not exited and not self._ended:
                with contextlib.suppress(LocalError):
                    self._peer.call(
                        now_ms(),
                        "exec.kill",
                        self._with_session({"process_id": process_id, "signal": "KILL"}),
                    )
                self._pump.kick()

    async def pty(
        self,
        argv: Union[Sequence[str], str],
        *,
        cwd: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        cols: int = 80,
        rows: int = 24,
        max_buffered: int = 4 << 20,
    ) -> Pty:
        """Starts an interactive program (an argv list, or a shell command string) in a
        ``cols`` × ``rows`` terminal (``pty.open``)::

            async with await rexd.pty(["sh"]) as term:
                await term.write(b"ls\n")
                async for event in term:        # PtyOutput(...), ..., PtyExit(...)
                    ...

        At most ``max_buffered`` bytes of output wait for the reader; past that the terminal is
        closed and reading raises :class:`deskwire.LocalError` (``too_large``)."""
        if not isinstance(max_buffered, int) or max_buffered <= 0:
            raise LocalError("invalid_value", "max_buffered must be a positive int")
        for name, value in (("cols", cols), ("rows", rows)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if not 1 <= value <= 65535:
                raise LocalError("invalid_value", f"{name} must be 1..65535, not {value}")
        program: Dict[str, Any]
        if isinstance(argv, str):
            program = {"command": argv, "shell": True}
        else:
            program = {"argv": list(argv)}
        params = self._with_session({**program, "cwd": cwd, "env": env, "cols": cols, "rows": rows})
        self._pty_opening += 1
        self._pty_limit = max(self._pty_limit, max_buffered)
        try:
            opened = await self.call("pty.open", params)
        finally:
            self._pty_opening -= 1
        pty_id = str(opened["pty_id"])
        inbox = self._ptys.setdefault(pty_id, _PtyInbox(max_buffered))
        inbox.limit = max_buffered
        return Pty(self, pty_id, str(opened["process_id"]), inbox)

    async def run(
        self, argv: Union[Sequence[str], str], **options: Any
    ) -> "tuple[int, bytes, bytes]":
        """Runs a process to its end: ``(exit_code, stdout, stderr)`` (``-1`` for a signal)."""
        out, err = bytearray(), bytearray()
        code = -1
        async for event in self.exec(argv, **options):
            if isinstance(event, ExecOutput):
                (out if event.stream == "stdout" else err).extend(event.data)
            else:
                code = event.exit_code if event.exit_code is not None else -1
        return code, bytes(out), bytes(err)

    async def run_tool(self, call: Dict[str, Any]) -> Dict[str, Any]:
        """Runs a model's call of REXD's logical tools (``bash``, ``read``, ``write``,
        ``list``, ``glob``, ``stat``: an item of
        :attr:`deskwire.tools.ProviderResponse.tool_calls` whose verdict is
        :class:`deskwire.tools.Run`) and gives its result for
        :func:`deskwire.tools.tool_results`, in the words ``rexd --mcp`` uses: for ``bash`` the
        output (stderr after ``[stderr]``), with ``[exit code N]`` and an error result for a
        non-zero exit; a file's text; a listing; ``wrote N bytes to PATH``. What the model got
        wrong (its arguments, a path outside the roots) and what the daemon refused come back
        as error results with the reason. ``bash`` runs through a shell, which a daemon allows
        only with ``--allow-shell`` (``security.allow_shell``); without it the result says so.

        (``tools.rexd_request(call, session_id)`` and :meth:`call` are the same by hand: for
        ``bash`` that answers ``exec.start`` with a process id, whose output then comes as
        notifications.)"""
        call_id = str(call.get("id", "")) if isinstance(call, dict) else ""
        try:
            method, params = tools.rexd_request(call, self.session_id)
        except ProtocolError as e:  # the model's arguments
            return tools.result(call_id, f"{e.code}: {e.message}", is_error=True)
        try:
            if method == "exec.start":
                text, failed = await self._bash_text(params)
                return tools.result(call_id, text, is_error=failed)
            result = await self.call(method, params)
        except RequestTimeout as e:
            return tools.result(call_id, f"{e.code}: {e.message}", is_error=True)
        except RemoteError as e:
            text = f"{e.code} ({getattr(e, 'number', '')}): {e.message}"
            if method == "exec.start" and getattr(e, "number", None) == -32007:
                text += "; this rexd runs no shell commands: start it with --allow-shell"
            return tools.result(call_id, text, is_error=True)
        return tools.result(call_id, _fs_text(method, result))

    async def _bash_text(self, params: Dict[str, Any]) -> "tuple[str, bool]":
        """The text of a ``bash`` call's result and whether it failed."""
        out, err = bytearray(), bytearray()
        ending = ""
        failed = False
        try:
            async for event in self._exec_events(params, "the command"):
                if isinstance(event, ExecOutput):
                    (out if event.stream == "stdout" else err).extend(event.data)
                elif event.signal is not None:
                    ending, failed = f"\n[killed by SIG{event.signal}]", True
                elif event.exit_code != 0:
                    ending, failed = f"\n[exit code {event.exit_code}]", True
        except RequestTimeout:
            ending, failed = "\n[timed out]", True
        text = out.decode("utf-8", "replace")
        if err:
            text += "\n[stderr]\n" + err.decode("utf-8", "replace")
        return text + ending, failed

    async def read(self, path: str, *, offset: Optional[int] = None, length: Optional[int] = None) -> bytes:
        """The bytes of a file (``fs.read``)."""
        result = await self.call(
            "fs.read",
            self._with_session({"path": path, "offset": offset, "length": length, "encoding": "base64"}),
        )
        return _decode(result, "content")

    async def write(
        self,
        path: str,
        data: Union[bytes, str],
        *,
        mode: str = "replace",
        atomic: bool = True,
        mkdir_parents: Optional[bool] = None,
    ) -> Dict[str, Any]:
        """Writes a file (``fs.write``); returns the result (``bytes_written``, ``mtime``, ...)."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        return dict(
            await self.call(
                "fs.write",
                self._with_session(
                    {
                        "path": path,
                        "content": base64.b64encode(raw).decode("ascii"),
                        "encoding": "base64",
                        "mode": mode,
                        "atomic": atomic,
                        "mkdir_parents": mkdir_parents,
                    }
                ),
            )
        )

    async def list(
        self, path: str, *, recursive: bool = False, max_entries: Optional[int] = None
    ) -> List[Dict[str, Any]]:
        """The entries of a directory (``fs.list``)."""
        result = await self.call(
            "fs.list",
            self._with_session({"path": path, "recursive": recursive, "max_entries": max_entries}),
        )
        return list(result["entries"])

    async def stat(self, path: str) -> Dict[str, Any]:
        """A file's metadata (``fs.stat``; ``exists`` is false for a missing path)."""
        return dict(await self.call("fs.stat", self._with_session({"path": path})))

    async def glob(
        self, pattern: str, *, cwd: Optional[str] = None, max_matches: Optional[int] = None
    ) -> List[str]:
        """The paths matching ``pattern`` (``fs.glob``)."""
        result = await self.call(
            "fs.glob",
            self._with_session({"pattern": pattern, "cwd": cwd, "max_matches": max_matches}),
        )
        return list(result["matches"])

    async def close(self, timeout: float = 5.0) -> None:
        """Closes the session and the daemon's stdin, and waits for it to exit (killing it after
        ``timeout`` seconds)."""
        if not self._ended and self.session:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self.call("session.close", {"session_id": self.session_id}), timeout
                )
        if self._process.stdin is not None:
            with contextlib.suppress(Exception):
                self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), timeout)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            await self._process.wait()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(self._pump.task, timeout)
        self._stderr_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._stderr_task
        self._peer.close()

    async def __aenter__(self) -> "RexdClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()



class MobileClient:
    """The phone end of the mobile companion protocol (``sidecar-ipc-and-mobile-ws.md`` §2) over
    a real WebSocket, with the ``websockets`` package (``pip install 'deskwire[mobile]'``).
    :class:`deskwire.mobile.Client` decides everything (when to connect and reconnect, with
    which token, pings, the state sync); this only moves frames::

        phone = await MobileClient.pair("ws://192.168.1.20:9120/ws", "482913")
        async for event in phone:                 # mobile.Paired(token=...), StateChanged, ...
            if isinstance(event, mobile.PermissionRequested):
                phone.respond_permission(event.id, approved=True)

    Later, ``await MobileClient.connect(url, token)`` reconnects with the stored token. At most
    ``max_events`` events wait for the reader; past that no frame is read until it reads."""

    def __init__(self, url: str, engine: mobile.Client, max_events: int, max_frame: int) -> None:
        try:
            self._ws_client = importlib.import_module("websockets.asyncio.client")
            self._ws_errors = importlib.import_module("websockets.exceptions")
        except ImportError:
            raise LocalError(
                "missing_dependency",
                "MobileClient needs the websockets package: pip install 'deskwire[mobile]'",
            ) from None
        self._url = url
        self._engine = engine
        self._max_frame = max_frame
        self._events: asyncio.Queue[Any] = asyncio.Queue(maxsize=max_events)
        self._ws: Any = None
        self._kick = asyncio.Event()
        self._closed = False
        self._task = asyncio.get_running_loop().create_task(self._run())

    @classmethod
    async def pair(
        cls, url: str, code: str, *, max_events: int = 1024, max_frame: int = 1 << 20, **options: Any
    ) -> "MobileClient":
        """Connects to the desktop at ``url`` and pairs with the six-digit ``code`` it shows; the
        :class:`deskwire.mobile.Paired` event carries the token to keep. ``options`` go to
        :class:`deskwire.mobile.Client` (``ping_interval_ms``, ...)."""
        engine = mobile.Client(**options)
        engine.pair(now_ms(), code)  # a malformed code raises before anything starts
        return cls(url, engine, max_events, max_frame)

    @classmethod
    async def connect(
        cls, url: str, token: str, *, max_events: int = 1024, max_frame: int = 1 << 20, **options: Any
    ) -> "MobileClient":
        """Connects to the desktop at ``url`` with a token from an earlier pairing."""
        engine = mobile.Client(token=token, **options)
        engine.start(now_ms())
        return cls(url, engine, max_events, max_frame)

    @property
    def token(self) -> Optional[str]:
        """The token, once paired (keep it for :meth:`connect`)."""
        return self._engine.token

    @property
    def connection_state(self) -> Any:
        """The engine's connection state (``"idle"``, ``{"online": {"synced": True}}``, ...)."""
        return self._engine.connection_state

    def send_message(self, content: str) -> None:
        """Sends a chat message to the agent."""
        self._engine.send_message(now_ms(), content)
        self._kick.set()

    def send_command(self, command: Dict[str, Any]) -> None:
        """Sends a command (``{"action": "start" | "stop" | "pause" | "resume", "task": ...}``)."""
        self._engine.send_command(now_ms(), command)
        self._kick.set()

    def respond_permission(self, id: str, approved: bool, remember: bool = False) -> None:
        """Answers the desktop's permission request ``id``."""
        self._engine.respond_permission(now_ms(), id, approved, remember)
        self._kick.set()

    def __aiter__(self) -> "MobileClient":
        return self

    async def __anext__(self) -> Any:
        """The next event of :mod:`deskwire.mobile`; :class:`deskwire.ClosedError` once closed
        (or when the pump failed, with the reason)."""
        event = await self._events.get()
        if isinstance(event, BaseException):
            self._events.put_nowait(event)  # every later read ends the same way
            raise event
        return event

    async def _open(self, bearer: Optional[str]) -> None:
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else None
        errors = self._ws_errors
        try:
            self._ws = await asyncio.wait_for(
                self._ws_client.connect(
                    self._url, additional_headers=headers, max_size=self._max_frame
                ),
                30,
            )
        except errors.InvalidStatus as e:
            status = e.response.status_code
            reason: Any = "unauthorized" if status in (401, 403) else {"failed": f"HTTP {status}"}
            self._engine.disconnected(now_ms(), reason)
        except (OSError, asyncio.TimeoutError, errors.WebSocketException) as e:
            self._engine.disconnected(now_ms(), {"failed": str(e) or type(e).__name__})
        else:
            self._engine.connected(now_ms())

    async def _drain(self) -> Optional[int]:
        while True:
            out = self._engine.poll_output(now_ms())
            if isinstance(out, Timeout):
                return int(out.at_ms)
            if isinstance(out, mobile.Connect):
                await self._open(out.bearer)
            elif isinstance(out, Transmit):
                if self._ws is not None:
                    with contextlib.suppress(self._ws_errors.ConnectionClosed):
                        await self._ws.send(out.data.decode("utf-8"))
            elif isinstance(out, mobile.Close):
                ws, self._ws = self._ws, None
                if ws is not None:
                    await ws.close()
            else:
                await self._events.put(out)  # waits while the reader is behind

    async def _run(self) -> None:
        receiving: Optional[asyncio.Task[Any]] = None
        try:
            while True:
                deadline = await self._drain()
                if receiving is None and self._ws is not None:
                    receiving = asyncio.ensure_future(self._ws.recv())
                kicked = asyncio.ensure_future(self._kick.wait())
                waits: Set[asyncio.Future[Any]] = {kicked}
                if receiving is not None:
                    waits.add(receiving)
                delay = None if deadline is None else max(0, deadline - now_ms()) / 1000
                done, _ = await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
                kicked.cancel()
                self._kick.clear()
                if receiving is not None and receiving in done:
                    task, receiving = receiving, None
                    try:
                        frame = task.result()
                    except self._ws_errors.ConnectionClosed:
                        self._ws = None
                        self._engine.disconnected(now_ms(), "closed")
                    else:
                        if isinstance(frame, str):
                            self._engine.handle_text(now_ms(), frame)
                if not done:
                    self._engine.handle_timeout(now_ms())
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug or a dead loop: tell the reader instead of hanging it
            log.exception("the mobile pump failed")
            with contextlib.suppress(asyncio.QueueFull):
                self._events.put_nowait(ClosedError("pump_failed", repr(e)))
        finally:
            if receiving is not None:
                receiving.cancel()

    async def close(self) -> None:
        """Says goodbye (the engine closes the socket) and stops. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        # The pump has stopped: write what stopping says (the socket's close), drop the events.
        with contextlib.suppress(LocalError):
            self._engine.stop(now_ms())
        while not isinstance(out := self._engine.poll_output(now_ms()), Timeout):
            if isinstance(out, Transmit) and self._ws is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._ws.send(out.data.decode("utf-8")), 5)
            elif isinstance(out, mobile.Close):
                break
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._ws.close(), 5)
            self._ws = None
        self._engine.close()
        while True:
            try:
                self._events.get_nowait()
            except asyncio.QueueEmpty:
                break
        self._events.put_nowait(ClosedError("closed", "the mobile client is closed"))

    async def __aenter__(self) -> "MobileClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class GatewayServer:
    """The gateway end of ``specs/gateway-rpc-pt.md``: serves the Commander's WebSocket
    connections (the ``websockets`` package: ``pip install 'deskwire[gateway]'``) with one
    :class:`deskwire.gateway.Gateway`, which decides every reply. The host runs the jobs::

        server = await GatewayServer.serve(["s3cr3t-token"], "127.0.0.1", 9130)
        async for event in server:                # gateway.JobCreated, StateChanged, ...
            if isinstance(event, gateway.StateChanged) and event.to == "RUNNING":
                server.log(event.job_id, "info", "cloning the repository")
                ...
                server.review_ready(event.job_id, {"summary": "done", "checks": {"tests": "pass"}})

    A bearer token in the upgrade's ``Authorization`` header or its ``token`` query parameter
    authenticates the connection; a wrong one is refused with HTTP 401, and without one every
    request carries ``auth.token``. Bounds: ``max_frame`` bytes a message, ``max_queued``
    unsent messages a connection (a slower reader is disconnected), ``max_events`` events
    waiting for the host (past that no message is read until it reads). ``config`` goes to
    :class:`deskwire.gateway.Gateway` (``max_jobs``, ``run_slots``, ...)."""

    def __init__(
        self, engine: gateway.Gateway, path: Optional[str], max_events: int, max_queued: int
    ) -> None:
        self._engine = engine
        self._path = path
        self._max_queued = max_queued
        self._events: asyncio.Queue[Any] = asyncio.Queue(maxsize=max_events)
        self._inbound: asyncio.Queue[Any] = asyncio.Queue(maxsize=64)
        self._outboxes: Dict[int, asyncio.Queue[Optional[str]]] = {}
        self._next_conn = 1
        self._kick = asyncio.Event()
        self._closed = False
        self._server: Any = None
        self._task = asyncio.get_running_loop().create_task(self._run())

    @classmethod
    async def serve(
        cls,
        tokens: Sequence[str],
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        path: Optional[str] = "/ws",
        max_events: int = 1024,
        max_frame: int = 1 << 20,
        max_queued: int = 1024,
        **config: Any,
    ) -> "GatewayServer":
        """Listens on ``host:port`` (``port=0``: any free port, see :attr:`port`) for WebSocket
        upgrades to ``path`` (``None``: any path; others get HTTP 404)."""
        try:
            ws_server = importlib.import_module("websockets.asyncio.server")
        except ImportError:
            raise LocalError(
                "missing_dependency",
                "GatewayServer needs the websockets package: pip install 'deskwire[gateway]'",
            ) from None
        if isinstance(tokens, (str, bytes)):
            raise TypeError("tokens is a list of str, not one str")
        for name, bound in (("max_events", max_events), ("max_frame", max_frame), ("max_queued", max_queued)):
            if not isinstance(bound, int) or isinstance(bound, bool):
                raise TypeError(f"{name} is an int, not {type(bound).__name__}")
            if bound < 1:
                raise LocalError("invalid_value", f"{name} is {bound}; it must be at least 1")
        engine = gateway.Gateway(list(tokens), now_ms=now_ms(), **config)
        self = cls(engine, path, max_events, max_queued)
        valid = set(tokens)

        def check(connection: Any, request: Any) -> Any:
            target = request.path.partition("?")
            if path is not None and target[0] != path:
                return connection.respond(404, "no such endpoint\n")
            token = _bearer(request.headers.get("Authorization")) or _query_token(target[2])
            if token is not None and token not in valid:
                return connection.respond(401, "unauthorized\n")
            return None

        self._server = await ws_server.serve(
            self._connection, host, port, process_request=check, max_size=max_frame
        )
        return self

    @property
    def port(self) -> int:
        """The port listened on."""
        return int(self._server.sockets[0].getsockname()[1])

    # --- the host's side of the jobs: each call tells the engine, which answers the Commander.

    def transition(self, job_id: str, to: str) -> None:
        """Moves job ``job_id`` to state ``to`` (``RUNNING``, ``REVIEW_READY``, ...); an illegal move
        raises :class:`deskwire.LocalError` ``transition``."""
        self._engine.transition(now_ms(), job_id, to)
        self._kick.set()

    def review_ready(self, job_id: str, artifacts: Any) -> None:
        """The job's work waits for review, with its ``artifacts`` (``summary``, ``git``,
        ``diff``, ``checks``, ``commands``)."""
        self._engine.review_ready(now_ms(), job_id, artifacts)
        self._kick.set()

    def complete(self, job_id: str, artifacts: Any = None) -> None:
        """The job succeeded."""
        self._engine.complete(now_ms(), job_id, artifacts)
        self._kick.set()

    def fail(self, job_id: str, error: Any) -> None:
        """The job failed with ``error`` (``{"code": ..., "message": ...}``)."""
        self._engine.fail(now_ms(), job_id, error)
        self._kick.set()

    def roll_back(self, job_id: str) -> None:
        """The job's changes were rolled back."""
        self._engine.roll_back(now_ms(), job_id)
        self._kick.set()

    def cancel(self, job_id: str) -> None:
        """The gateway cancels the job itself."""
        self._engine.cancel(now_ms(), job_id)
        self._kick.set()

    def set_progress(
        self, job_id: str, step: Optional[str] = None, progress: Optional[float] = None
    ) -> None:
        """What ``jobs.status`` reports: the current step and a fraction done."""
        self._engine.set_progress(job_id, step, progress)
        self._kick.set()

    def log(self, job_id: str, level: str, msg: str) -> None:
        """A log line for the job's ``jobs.stream`` subscribers."""
        self._engine.log(job_id, level, msg)
        self._kick.set()

    def request_approval(
        self, job_id: str, kind: str, requested: str, approval_id: Optional[str] = None
    ) -> Dict[str, Any]:
        """Asks the Commander to approve a step; the answer comes as
        :class:`deskwire.gateway.ApprovalDecided` (at once when the policy needs none)."""
        ticket = self._engine.request_approval(job_id, kind, requested, approval_id)
        self._kick.set()
        return ticket

    def job_state(self, job_id: str) -> Optional[str]:
        """The job's state, ``None`` for a job the gateway does not know."""
        return self._engine.job_state(job_id)

    def stats(self) -> Dict[str, Any]:
        """The engine's counters."""
        return self._engine.stats()

    def __aiter__(self) -> "GatewayServer":
        return self

    async def __anext__(self) -> Any:
        """The next event of :mod:`deskwire.gateway`; :class:`deskwire.ClosedError` once closed
        (or when the pump failed, with the reason)."""
        event = await self._events.get()
        if isinstance(event, BaseException):
            self._events.put_nowait(event)  # every later read ends the same way
            raise event
        return event

    # --- the pump: one task feeds the engine, drains it and keeps its deadline.

    async def _connection(self, ws: Any) -> None:
        conn, self._next_conn = self._next_conn, self._next_conn + 1
        outbox: asyncio.Queue[Optional[str]] = asyncio.Queue(maxsize=self._max_queued)
        self._outboxes[conn] = outbox
        token = _bearer(ws.request.headers.get("Authorization")) or _query_token(
            ws.request.path.partition("?")[2]
        )
        if token is not None:
            self._engine.authenticate_connection(conn, token)  # checked in process_request
        writer = asyncio.ensure_future(self._write(ws, outbox))
        try:
            async for message in ws:
                data = message.encode("utf-8") if isinstance(message, str) else message
                await self._inbound.put((conn, data))  # waits while the pump is behind
        except Exception as e:  # a dropped connection ends like a closed one
            log.debug("gateway connection %d ended: %r", conn, e)
        finally:
            self._outboxes.pop(conn, None)
            writer.cancel()
            if not self._closed:
                self._engine.close_connection(conn)
                self._kick.set()

    async def _write(self, ws: Any, outbox: "asyncio.Queue[Optional[str]]") -> None:
        with contextlib.suppress(Exception):
            while (text := await outbox.get()) is not None:
                await ws.send(text)
        await ws.close(1008, "too slow")

    def _send(self, conn: int, message: Dict[str, Any]) -> None:
        outbox = self._outboxes.get(conn)
        if outbox is None:
            return  # the connection is gone; the engine was told
        try:
            outbox.put_nowait(json.dumps(message, ensure_ascii=False))
        except asyncio.QueueFull:
            log.warning("gateway connection %d reads too slowly; closing it", conn)
            del self._outboxes[conn]
            while not outbox.empty():
                outbox.get_nowait()
            outbox.put_nowait(None)  # the writer closes the socket
            self._engine.close_connection(conn)

    async def _drain(self) -> int:
        while True:
            out = self._engine.poll_output(now_ms())
            if isinstance(out, Timeout):
                return int(out.at_ms)
            if isinstance(out, gateway.Send):
                self._send(out.conn, out.message)
            else:
                await self._events.put(out)  # waits while the host is behind

    async def _feed(self, conn: int, data: bytes) -> None:
        while True:
            try:
                self._engine.handle_message(now_ms(), conn, data)
                return
            except LocalError as e:
                if e.code != "backpressure":
                    raise
            await self._drain()  # room for the replies, then the same message again

    async def _run(self) -> None:
        try:
            while True:
                deadline = await self._drain()
                inbound = asyncio.ensure_future(self._inbound.get())
                kicked = asyncio.ensure_future(self._kick.wait())
                delay = max(0, deadline - now_ms()) / 1000
                done, _ = await asyncio.wait(
                    {inbound, kicked}, timeout=delay, return_when=asyncio.FIRST_COMPLETED
                )
                kicked.cancel()
                self._kick.clear()
                if inbound in done:
                    await self._feed(*inbound.result())
                else:
                    inbound.cancel()  # Queue.get leaves the item queued when cancelled
                if not done:
                    self._engine.handle_timeout(now_ms())
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug or a dead loop: tell the reader instead of hanging it
            log.exception("the gateway pump failed")
            with contextlib.suppress(asyncio.QueueFull):
                self._events.put_nowait(ClosedError("pump_failed", repr(e)))

    async def close(self) -> None:
        """Stops listening, closes every connection and the engine. Closing again does
        nothing."""
        if self._closed:
            return
        self._closed = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)
        self._engine.close()
        while True:
            try:
                self._events.get_nowait()
            except asyncio.QueueEmpty:
                break
        self._events.put_nowait(ClosedError("closed", "the gateway server is closed"))

    async def __aenter__(self) -> "GatewayServer":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def _bearer(header: Optional[str]) -> Optional[str]:
    scheme, _, token = (header or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _query_token(query: str) -> Optional[str]:
    from urllib.parse import parse_qs

    values = parse_qs(query).get("token")
    return values[0] if values else None
