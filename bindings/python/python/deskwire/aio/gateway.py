"""Both ends of the gateway RPC over WebSocket (the ``websockets`` package: ``pip install
'deskwire[gateway]'``): :class:`GatewayServer`, the gateway, serving the Commander's
connections, and :class:`GatewayClient`, the Commander, calling a gateway."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import re
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

from .. import gateway, jsonrpc
from .._deskwire import Timeout
from .._errors import (
    ClosedError,
    ConnectFailedError,
    DeskwireError,
    DisconnectedError,
    GatewayError,
    LocalError,
    ProtocolError,
    RequestTimeout,
)
from .irc import Reconnect, _reconnect_policy
from .pump import _duration, _millis, _Pump, _seconds, _without_secrets, _WsWriter, now_ms

__all__ = ["GatewayServer", "GatewayClient", "JobEvents"]

log = logging.getLogger(__name__)  # under "deskwire.aio", as before the split


class GatewayServer:
    """The gateway end of ``docs/gateway.md``: serves the Commander's WebSocket
    connections (the ``websockets`` package: ``pip install 'deskwire[gateway]'``) with one
    :class:`deskwire.gateway.Gateway`, which decides every reply. The host runs the jobs::

        server = await GatewayServer.serve(["s3cr3t-token"], "127.0.0.1", 9130)
        async for event in server:                # gateway.JobCreated, StateChanged, ...
            if isinstance(event, gateway.StateChanged) and event.to == "RUNNING":
                server.log(event.job_id, "info", "cloning the repository")
                ...
                server.review_ready(event.job_id, {"summary": "done", "checks": {"tests": "pass"}})

    The host must iterate the events: ``async for event in server`` is not optional. At most
    ``max_events`` (1024) events wait for the host; past that the server reads no message and
    answers nothing, ``gateway.ping`` included, on any connection, until the host reads (a
    warning is logged when that happens). A host that needs no events still drains them.

    A bearer token in the upgrade's ``Authorization`` header or its ``token`` query parameter
    authenticates the connection; a wrong one is refused with HTTP 401, and without one every
    request carries ``auth.token``. At most ``maxConnections`` (64) connections are
    authenticated that way at once: past that the upgrade is refused with HTTP 503 ("too many
    connections"), never accepted and then answered ``E_UNAUTHORIZED``.

    Bounds: a message over the engine's ``maxMessageBytes`` (1 MiB) is ignored and counted
    (``stats()["ignored"]``), the connection stays open; ``max_frame`` is the transport's
    hard bound, four times ``maxMessageBytes`` (4 MiB) unless given: a longer frame closes the
    connection (1009). ``max_queued`` unsent messages a connection (a slower reader is
    disconnected, 1008). ``config`` goes to :class:`deskwire.gateway.Gateway`; its keys are
    the core's camelCase names: ``gatewayVersion``, ``maxMessageBytes``, ``maxJobs``,
    ``maxRunning``, ``maxQueuedOutputs``, ``maxApprovalsPerJob``, ``maxSubscriptions``,
    ``maxConnections``, ``defaultTimeoutSec``, ``requireSandbox`` (``docs/gateway.md``); an
    unknown key raises :class:`deskwire.LocalError` ``invalid_value``. The ``websockets``
    records go to the ``deskwire.aio.gateway.websockets`` logger, which never shows a token."""

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
        self._stalled = False  # the events filled up and the host has not caught up yet
        self._server: Any = None
        self._port: Optional[int] = None
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
        max_frame: Optional[int] = None,
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
        for token in tokens:
            if not isinstance(token, str):
                raise TypeError(f"tokens is a list of str; it holds a {type(token).__name__}")
        max_frame = _frame_bound(max_frame, config.get("maxMessageBytes"))
        for name, bound in (("max_events", max_events), ("max_queued", max_queued)):
            if not isinstance(bound, int) or isinstance(bound, bool):
                raise TypeError(f"{name} is an int, not {type(bound).__name__}")
            if bound < 1:
                raise LocalError("invalid_value", f"{name} is {bound}; it must be at least 1")
        engine = gateway.Gateway(list(tokens), now_ms=now_ms(), **config)
        self = cls(engine, path, max_events, max_queued)

        def check(connection: Any, request: Any) -> Any:
            target = request.path.partition("?")
            if path is not None and target[0] != path:
                return connection.respond(404, "no such endpoint\n")
            token = _bearer(request.headers.get("Authorization")) or _query_token(target[2])
            refusal = engine.check_connection(token)  # a wrong token 401, the limit 503
            if refusal is not None:
                status, _, message = refusal
                return connection.respond(status, message + "\n")
            return None

        self._server = await ws_server.serve(
            self._connection, host, port, process_request=check, max_size=max_frame,
            logger=_ws_logger("deskwire.aio.gateway.websockets"),
        )
        self._port = int(self._server.sockets[0].getsockname()[1])
        return self

    @property
    def port(self) -> int:
        """The port listened on (still given after :meth:`close`, to serve there again)."""
        assert self._port is not None  # set by serve(), which made this object
        return self._port

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
        """The next event of :mod:`deskwire.gateway`. Once the server is closed the iteration
        ends (``async for event in server`` leaves its loop); when the pump failed this raises
        :class:`deskwire.ClosedError` with the reason."""
        event = await self._events.get()
        if isinstance(event, BaseException):
            self._events.put_nowait(event)  # every later read ends the same way
            raise event
        if self._events.empty():
            self._stalled = False
        return event

    # --- the pump: one task feeds the engine, drains it and keeps its deadline.

    async def _connection(self, ws: Any) -> None:
        conn, self._next_conn = self._next_conn, self._next_conn + 1
        outbox: asyncio.Queue[Optional[str]] = asyncio.Queue(maxsize=self._max_queued)
        self._outboxes[conn] = outbox
        token = _bearer(ws.request.headers.get("Authorization")) or _query_token(
            ws.request.path.partition("?")[2]
        )
        if token is not None and not self._engine.authenticate_connection(conn, token):
            # Checked at the upgrade, but another connection took the last place since.
            self._outboxes.pop(conn, None)
            refusal = self._engine.check_connection(token)
            _, code, message = refusal if refusal is not None else (0, 1013, "try again later")
            await ws.close(code, message[:120])
            return
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
                if self._events.full() and not self._stalled:
                    # Said once each time the server stops for the host (until the host has
                    # read them all): else the Commander only sees its requests time out.
                    self._stalled = True
                    log.warning(
                        "%d GatewayServer events wait for the host: no message is read or"
                        " answered (gateway.ping included) until it reads them"
                        " (async for event in server)", self._events.maxsize)
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
        inbound: Optional[asyncio.Future[Any]] = None
        kicked: Optional[asyncio.Future[Any]] = None
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
        finally:
            # Cancelled while waiting (close): neither wait may outlive the pump.
            for waiting in (inbound, kicked):
                if waiting is not None and not waiting.done():
                    waiting.cancel()

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
        self._events.put_nowait(StopAsyncIteration())  # the host's loop ends, as an iterator does

    async def __aenter__(self) -> "GatewayServer":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


_FINAL = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "ROLLED_BACK"})
"""The job states no job leaves (``docs/gateway.md``, "Job states"): a stream ends at one."""


class GatewayClient:
    """The Commander's end of ``docs/gateway.md`` over one WebSocket connection: requests
    stamped with the Commander's token and the wall-clock ``ts``, answers matched to them, a
    job's events as an async iterator. The correlation (ids, per-op timeouts, late answers) is
    the core's :class:`deskwire.jsonrpc.Peer` in its ``"gateway"`` dialect::

        async with await GatewayClient.connect("ws://127.0.0.1:9130/ws", "s3cr3t-token") as commander:
            await commander.call("jobs.create", {"job": {"jobId": "j1", "repo": "org/repo"}})
            events = await commander.stream("j1")        # subscribed: nothing is missed from here
            await commander.call("jobs.start", {"jobId": "j1"})
            async for event in events:                   # {"jobId", "level", "msg", "seq", "status"?}
                print(event["msg"])                      # ends after the job's final state
            print(await commander.call("jobs.result", {"jobId": "j1"}))

    :meth:`call` returns the answer's ``payload``. A gateway's error answer raises
    :class:`deskwire.GatewayError` whose ``code`` is the gateway's (``E_NOT_FOUND``,
    ``E_CONFLICT``, ...), with its ``details``; an answer that cannot be read (another major
    version, a field missing) raises :class:`deskwire.ProtocolError` ``malformed`` at once; no
    answer within ``call_timeout`` (30 s) raises :class:`deskwire.RequestTimeout` (a
    :class:`TimeoutError`, as is ``asyncio.wait_for``'s on Python 3.11+: catch the one you
    mean); a connection that ended raises :class:`deskwire.ClosedError`. Every one of them is a
    :class:`deskwire.DeskwireError`.

    The token goes in the upgrade's ``Authorization`` header and in every request's ``auth``; a
    refused token is :class:`deskwire.GatewayError` ``E_UNAUTHORIZED`` from :meth:`connect`. It
    reaches no log and no error message, even when it is also in the URL (``?token=``, or
    ``user:token@``): messages show the URL without it.

    Bounds: a request over ``max_message_bytes`` (1 MiB, the gateway's default
    ``maxMessageBytes``; a gateway ignores a longer one and the call would only time out) is
    refused before it is sent, :class:`deskwire.LocalError` ``too_large``; a frame over
    ``max_frame`` (4 × ``max_message_bytes``) closes the connection; at most ``max_events``
    (1024) log events wait for each :meth:`stream` reader, and past that the newest are dropped
    (their ``seq`` numbers show the gap) and counted in :attr:`dropped_events`. A state change
    is never dropped (a job has a handful), so a stream always sees its job end.

    Given ``reconnect=True`` (or a :class:`deskwire.aio.Reconnect` policy: 1 s doubling to 10 s,
    jittered), a connection the gateway or the network drops is opened again, as the protocol
    recommends, until it comes back or :meth:`close`:

    - a call waiting for its answer when the connection drops raises
      :class:`deskwire.DisconnectedError`: its request may or may not have reached the
      gateway, so it is not sent again (``jobs.create`` is idempotent by ``jobId``; other ops
      are the caller's to judge);
    - a call made while reconnecting waits for the next connection, within ``call_timeout``;
    - every :meth:`stream` is subscribed again on the new connection. Events the job sent while
      it was down are lost, and the first event after the gap is
      ``{"jobId", "status", "level": "warn", "msg", "resumed": True}`` (no ``seq``): the job's
      state when it was subscribed again. When that state is final the iteration ends there, so
      a stream still sees its job end. A gateway that no longer knows the job (it restarted)
      makes the iteration raise its :class:`deskwire.GatewayError` ``E_NOT_FOUND``;
    - a token the gateway refuses when reconnecting ends the client (HTTP 401 does not get
      better by trying again): calls and streams raise :class:`deskwire.ClosedError` saying so.

    :attr:`reconnects` counts the connections that came back."""

    def __init__(self, ws: Any, closed: Any, peer: Any, max_events: int, max_message_bytes: int,
                 call_timeout: float = 30.0, dial: "Optional[_Dial]" = None,
                 policy: Optional[Reconnect] = None) -> None:
        self._ws = ws
        self._closed = closed
        self._call_timeout = call_timeout
        self._peer = peer
        self._max_events = max_events
        self._max_message_bytes = max_message_bytes
        self._calls: Dict[Any, "asyncio.Future[Any]"] = {}
        self._streams: Dict[str, List["asyncio.Queue[Any]"]] = {}
        self._ended: Optional[str] = None
        self._dropped_events = 0
        self._dial = dial
        self._policy = policy  # None: a lost connection ends the client
        self._closing = False
        self._redial: "Optional[asyncio.Task[None]]" = None
        self._attempt = 0  # back to 0 when an answer comes: a gateway that drops us at once waits longer
        self._resubscribing: "Set[asyncio.Task[None]]" = set()
        # Done while a connection is up; a new future while reconnecting.
        self._connected: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._connected.set_result(None)
        self.reconnects = 0
        """How many times the connection came back after it dropped (``reconnect=``)."""
        self._start_pump(ws, peer)

    def _start_pump(self, ws: Any, peer: Any) -> None:
        self._ws, self._peer = ws, peer
        reader = self._reader = _GatewayReader(ws, self._closed)
        self._pump = _Pump(peer, reader, _WsWriter(ws, self._closed), self._deliver,
                           lambda: self._lost(reader.reason))

    @property
    def dropped_events(self) -> int:
        """Log events dropped on this connection, over all its :meth:`stream` readers, because
        a reader fell ``max_events`` behind (the events' ``seq`` numbers show each reader its
        own gaps)."""
        return self._dropped_events

    @classmethod
    async def connect(
        cls,
        url: str,
        token: str,
        *,
        timeout: Optional[float] = 10.0,
        call_timeout: float = 30.0,
        reconnect: Union[bool, Reconnect] = False,
        max_message_bytes: int = 1 << 20,
        max_frame: Optional[int] = None,
        max_events: int = 1024,
    ) -> "GatewayClient":
        """Opens a connection to the gateway at ``url`` (``ws://host:port/ws``) as the Commander
        holding ``token``, within ``timeout`` seconds. Each :meth:`call` then waits at most
        ``call_timeout`` seconds for its answer (for one call, shorter:
        ``asyncio.wait_for(commander.call(...), 5)``, which stops waiting as cancelling does).
        ``reconnect``: see the class."""
        if not isinstance(url, str):
            raise TypeError(f"url is a str, not {type(url).__name__}")
        if not isinstance(token, str):
            raise TypeError(f"token is a str, not {type(token).__name__}")
        if not token.strip() or any(c in token for c in "\r\n\0"):
            raise LocalError("invalid_value", "token is empty or holds a line break or NUL")
        shown = _without_secrets(url, token)
        if not url.startswith(("ws://", "wss://")):
            raise LocalError("invalid_value", f"url {shown!r}: a gateway URL starts with ws:// or wss://")
        for name, bound in (("max_events", max_events), ("max_message_bytes", max_message_bytes)):
            if not isinstance(bound, int) or isinstance(bound, bool):
                raise TypeError(f"{name} must be an int, not {type(bound).__name__}")
            if bound < 1:
                raise LocalError("invalid_value", f"{name} is {bound}; it must be at least 1")
        max_frame = _frame_bound(max_frame, max_message_bytes)
        seconds = _seconds(timeout)
        per_call = _seconds(call_timeout, "call_timeout")
        if per_call is None:
            raise TypeError("call_timeout is a number of seconds, not None: a call always ends")
        policy = _reconnect_policy(reconnect)
        try:
            ws_client = importlib.import_module("websockets.asyncio.client")
            ws_errors = importlib.import_module("websockets.exceptions")
        except ImportError:
            raise LocalError(
                "missing_dependency",
                "GatewayClient needs the websockets package: pip install 'deskwire[gateway]'",
            ) from None

        async def dial() -> Tuple[Any, Any]:
            return await _open(ws_client, ws_errors, url, token, shown, seconds, max_frame, per_call)

        ws, peer = await dial()
        return cls(ws, ws_errors.ConnectionClosed, peer, max_events, max_message_bytes, per_call,
                   dial, policy)

    async def call(self, op: str, payload: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Sends the request ``op`` (``jobs.create``, ``jobs.status``, ``approvals.approve``, ...)
        with ``payload`` and returns the answer's ``payload``. Cancelling the awaiting task
        stops waiting for it (a late answer is dropped)."""
        if self._ended is not None:
            raise ClosedError("closed", self._ended)
        if payload is not None and not isinstance(payload, dict):
            raise TypeError(f"payload must be a dict, not {type(payload).__name__}")
        payload = payload if payload is not None else {}
        size = len(json.dumps(payload, ensure_ascii=False).encode("utf-8"))
        if size + _ENVELOPE_BYTES > self._max_message_bytes:
            raise LocalError(
                "too_large",
                f"the {op} request's payload is {size} bytes; with its envelope it would pass the "
                f"gateway's {self._max_message_bytes}-byte limit (max_message_bytes), and the "
                "gateway would drop it unanswered",
            )
        if not self._connected.done():
            # Reconnecting: the call goes out on the next connection, if one comes in time.
            try:
                await asyncio.wait_for(asyncio.shield(self._connected), self._call_timeout)
            except asyncio.TimeoutError:
                raise RequestTimeout(
                    "timeout", f"no connection to the gateway for {op} within "
                    f"{_duration(self._call_timeout)} (call_timeout); still reconnecting") from None
            if self._ended is not None:
                raise ClosedError("closed", self._ended)
        peer = self._peer
        call_id = peer.call(now_ms(), op, payload)
        future: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        self._calls[call_id] = future
        self._pump.kick()
        try:
            outcome = await future
        except asyncio.CancelledError:
            if self._calls.get(call_id) is future and peer is self._peer and self._ended is None:
                del self._calls[call_id]
                with contextlib.suppress(LocalError):
                    peer.cancel(now_ms(), call_id)
            raise
        if isinstance(outcome, BaseException):
            raise outcome
        if isinstance(outcome, jsonrpc.Failed):
            if outcome.timed_out:
                raise RequestTimeout(
                    "timeout", f"no answer to {op} within {_duration(self._call_timeout)} (call_timeout)")
            if outcome.malformed is not None:
                raise ProtocolError("malformed", f"the answer to {op} could not be read: {outcome.malformed}")
            remote = outcome.remote or {}
            raise GatewayError(str(remote.get("code", "E_INTERNAL")), str(remote.get("message", "")),
                               remote.get("data"))
        result: Dict[str, Any] = outcome.result
        return result

    async def stream(self, job_id: str) -> "JobEvents":
        """Subscribes to job ``job_id`` (``jobs.stream``) and returns its events as an async
        iterator, once the gateway has answered: nothing the job does after this returns is
        missed. The events (``{"jobId", "level", "msg", "seq", "status"?}``) end after the one
        that reports a final state; for a job already final there are none. The subscription
        ends with the connection, and then the iterator raises :class:`deskwire.ClosedError`."""
        if not isinstance(job_id, str):
            raise TypeError(f"job_id is a str, not {type(job_id).__name__}")
        events = JobEvents(self, job_id)
        self._streams.setdefault(job_id, []).append(events._inbox)  # before the request
        try:
            answer = await self.call("jobs.stream", {"jobId": job_id})
        except BaseException:
            events.close()
            raise
        if answer.get("status") in _FINAL:
            events.close()
        return events

    def _unsubscribe(self, job_id: str, inbox: "asyncio.Queue[Any]") -> None:
        readers = self._streams.get(job_id)
        if readers is not None and inbox in readers:
            readers.remove(inbox)
            if not readers:
                del self._streams[job_id]

    # --- the pump: one task feeds the peer, drains it and keeps its deadline.

    def _deliver(self, event: Any) -> None:
        if isinstance(event, (jsonrpc.Response, jsonrpc.Failed)):
            if isinstance(event, jsonrpc.Response):
                self._attempt = 0
            future = self._calls.pop(event.id, None)
            if future is not None and not future.done():
                future.set_result(event)
        elif isinstance(event, jsonrpc.Notification) and isinstance(event.params, dict):
            state_change = "status" in event.params
            for inbox in self._streams.get(str(event.params.get("jobId")), ()):
                if inbox.qsize() >= self._max_events and not state_change:
                    self._dropped_events += 1
                else:
                    inbox.put_nowait(event.params)
        elif isinstance(event, jsonrpc.Request):
            # The Commander serves no ops: the gateway's request is only logged.
            log.warning("the gateway sent a request the Commander does not serve: %s", event.method)
            with contextlib.suppress(LocalError):
                self._peer.forget_incoming(event.id)
        elif isinstance(event, jsonrpc.Malformed):
            log.warning("the gateway sent an unreadable message: %s", event.reason)

    def _lost(self, why: str) -> None:
        """The pump's end: the connection is gone. With a reconnect policy (and no
        :meth:`close`) another one is dialled; otherwise the client ends."""
        if self._policy is None or self._closing or self._ended is not None:
            self._end(why)
            return
        # Calls in flight may or may not have reached the gateway: they end here.
        waiting, self._calls = self._calls, {}
        for future in waiting.values():
            if not future.done():
                future.set_result(DisconnectedError(
                    "disconnected", f"{why} before the answer came; reconnecting"))
        self._peer.close()
        self._connected = asyncio.get_running_loop().create_future()
        self._redial = asyncio.get_running_loop().create_task(self._come_back(why))

    async def _come_back(self, why: str) -> None:
        assert self._dial is not None and self._policy is not None
        with contextlib.suppress(Exception):  # the old socket, if the pump ended with it open
            await asyncio.wait_for(self._ws.close(), 1)
        while not self._closing:
            # The wait doubles with every try, as the IRC drivers' does (Reconnect's policy).
            await asyncio.sleep(self._policy.delay(self._attempt))
            self._attempt += 1
            try:
                ws, peer = await self._dial()
            except GatewayError as refused:  # HTTP 401: trying again will not change it
                self._end(f"{why}, and reconnecting failed: {refused}")
                return
            except (ConnectFailedError, RequestTimeout) as e:
                log.info("gateway reconnect try %d failed: %s", self._attempt, e)
                continue
            if self._closing:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(ws.close(), 5)
                return
            self.reconnects += 1
            self._start_pump(ws, peer)
            self._connected.set_result(None)
            for job_id in list(self._streams):
                task = asyncio.get_running_loop().create_task(self._resubscribe(job_id))
                self._resubscribing.add(task)  # held: the loop keeps only weak references
                task.add_done_callback(self._resubscribing.discard)
            return

    async def _resubscribe(self, job_id: str) -> None:
        """Subscribes ``job_id`` again on a new connection, and tells its readers the job's
        state then (the first event after the gap)."""
        try:
            answer = await self.call("jobs.stream", {"jobId": job_id})
        except (DisconnectedError, ClosedError):
            return  # dropped again (the next connection subscribes it), or closed
        except DeskwireError as e:  # the gateway forgot the job (a restart): the readers raise it
            for inbox in self._streams.get(job_id, ()):
                inbox.put_nowait(e)
            return
        status = answer.get("status")
        resumed = {"jobId": job_id, "status": status, "level": "warn", "resumed": True,
                   "msg": f"the connection to the gateway came back; the job is {status} "
                          "(events sent while it was down are lost)"}
        for inbox in self._streams.get(job_id, ()):
            inbox.put_nowait(dict(resumed))

    def _end(self, why: str) -> None:
        if self._ended is not None:
            return
        self._ended = why
        error = ClosedError("closed", why)
        for future in self._calls.values():
            if not future.done():
                future.set_result(error)
        self._calls.clear()
        for readers in self._streams.values():
            for inbox in readers:
                inbox.put_nowait(error)
        if not self._connected.done():
            self._connected.set_result(None)  # calls waiting for a connection see the end

    async def close(self) -> None:
        """Closes the connection (and stops reconnecting): calls still waiting raise
        :class:`deskwire.ClosedError`, and so do streams. Closing again does nothing."""
        self._closing = True
        for task in [self._redial, *self._resubscribing]:
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if not self._pump.task.done():
            self._reader.reason = "the gateway connection is closed"
            self._pump.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._pump.task
        self._end("the gateway connection is closed")
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._ws.close(), 5)
        self._peer.close()

    async def __aenter__(self) -> "GatewayClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


_Dial = Callable[[], Awaitable[Tuple[Any, Any]]]
"""Opens a new connection to the gateway: its WebSocket and a new Commander peer."""


async def _open(ws_client: Any, ws_errors: Any, url: str, token: str, shown: str,
                seconds: Optional[float], max_frame: Optional[int], call_timeout: float) -> Tuple[Any, Any]:
    """A WebSocket to the gateway at ``url``, and the Commander's peer for it (ids and per-op
    timeouts belong to one connection)."""
    epoch = int(time.time() * 1000) - now_ms()
    peer = jsonrpc.Peer("gateway", token=token, epoch_unix_ms=max(0, epoch),
                        timeouts={"default_timeout_ms": _millis(call_timeout), "default_max_total_factor": 1})
    try:
        ws = await asyncio.wait_for(
            ws_client.connect(
                url,
                additional_headers={"Authorization": f"Bearer {token}"},
                max_size=max_frame,
                open_timeout=None,
                logger=_ws_logger("deskwire.aio.gateway.websockets"),
            ),
            seconds,
        )
    except ws_errors.InvalidStatus as e:
        status = e.response.status_code
        if status == 401:
            raise GatewayError("E_UNAUTHORIZED", f"{shown} refused the token (HTTP 401)") from None
        body = e.response.body.decode("utf-8", "replace").strip()[:200] if e.response.body else ""
        raise ConnectFailedError(
            "connect_failed",
            f"{shown} answered HTTP {status}" + (f": {_without_secrets(body, token)}" if body else ""),
        ) from None
    except asyncio.TimeoutError:
        raise RequestTimeout("timeout", f"no WebSocket handshake with {shown} within {seconds} s") from None
    except (OSError, ws_errors.InvalidHandshake, ws_errors.InvalidURI) as e:
        text = _without_secrets(str(e) or type(e).__name__, token)
        raise ConnectFailedError("connect_failed", f"cannot connect to {shown}: {text}") from None
    return ws, peer


class _GatewayReader:
    """The pump's reader over the Commander's WebSocket: each message is one JSON value, given
    to the peer as one line; ``reason`` says how the connection ended."""

    def __init__(self, ws: Any, closed: Any) -> None:
        self._ws = ws
        self._closed = closed
        self.reason = "the gateway closed the connection"

    async def read(self, n: int = -1) -> bytes:
        """One message whole, whatever ``n`` asks (a message is never split)."""
        try:
            message = await self._ws.recv()
        except self._closed as e:
            rcvd = getattr(e, "rcvd", None)
            if rcvd is not None:
                reason = f": {rcvd.reason}" if rcvd.reason else ""
                self.reason = f"the gateway closed the connection ({rcvd.code}{reason})"
            else:  # no close frame: a dead link, or a gateway that stopped answering pings
                self.reason = f"the connection to the gateway was lost ({e})"
            return b""
        data = message.encode("utf-8") if isinstance(message, str) else bytes(message)
        # A line break inside one JSON value can only be white space between its tokens, and
        # the peer reads lines.
        return data.replace(b"\r", b" ").replace(b"\n", b" ") + b"\n"


class JobEvents:
    """The events of one job, from :meth:`GatewayClient.stream`: ``async for event in events``
    yields each ``jobs.event`` payload, the last being the one with the job's final
    ``status``. :meth:`close` stops following the job early."""

    def __init__(self, client: GatewayClient, job_id: str) -> None:
        self.job_id = job_id
        """The job followed."""
        self._client = client
        # Bounded by GatewayClient._deliver: log events up to max_events, state changes always
        # (a job has a handful).
        self._inbox: "asyncio.Queue[Any]" = asyncio.Queue()
        self._done = False

    def close(self) -> None:
        """Stops following the job: the iteration ends at once, events not yet read included
        (the gateway keeps sending the job's events on this connection until it ends; they
        are dropped here)."""
        self._end()
        while not self._inbox.empty():
            self._inbox.get_nowait()

    def _end(self) -> None:
        """No more events come in; those queued are still read."""
        if not self._done:
            self._done = True
            self._client._unsubscribe(self.job_id, self._inbox)

    def __aiter__(self) -> "JobEvents":
        return self

    async def __anext__(self) -> Dict[str, Any]:
        if self._done and self._inbox.empty():
            raise StopAsyncIteration
        event = await self._inbox.get()
        if isinstance(event, BaseException):
            self._end()
            self._inbox.put_nowait(event)  # every later read ends the same way
            raise event
        if event.get("status") in _FINAL:
            self._end()
        result: Dict[str, Any] = event
        return result

    def __repr__(self) -> str:
        return f"JobEvents(job_id={self.job_id!r}, waiting={self._inbox.qsize()})"


_ENVELOPE_BYTES = 512
"""What a request's envelope adds to its payload, at most: version, id, type, ts, op and the
token's ``auth`` (a token of up to about 300 bytes)."""


_SECRETS = re.compile(r"(?i)(bearer\s+|token=|\"token\"\s*:\s*\"|\"code\"\s*:\s*\")[^\s&\"']+")


class _Redact(logging.Filter):
    """Keeps secrets out of the ``websockets`` package's records: a frame at DEBUG is logged as
    its kind and length only (its text can hold ``auth.token`` or a pairing code), and a bearer
    token in a header, a ``token=`` query parameter or a JSON ``"token"`` is replaced."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg in ("< %s", "> %s") and args and type(args[0]).__name__ == "Frame":
            frame: Any = args[0]
            record.msg, record.args = "%s %s [%d bytes]", (
                record.msg[0], frame.opcode.name, len(frame.data))
            return True
        text = record.getMessage()
        redacted = _SECRETS.sub(lambda m: m.group(1) + "[redacted]", text)
        if redacted != text:
            record.msg, record.args = redacted, ()
        return True


def _frame_bound(max_frame: Optional[int], max_message_bytes: Optional[int]) -> int:
    """The transport's bound on a frame (the gateway's and the phone's): ``max_frame`` if given,
    else four times the engine's ``max_message_bytes`` (4 MiB at its default), so that a longer
    message reaches the engine, which ignores and counts it (``stats()``), instead of the socket
    closing on it."""
    if max_frame is not None:
        if not isinstance(max_frame, int) or isinstance(max_frame, bool):
            raise TypeError(f"max_frame is an int, not {type(max_frame).__name__}")
        if max_frame < 1:
            raise LocalError("invalid_value", f"max_frame is {max_frame}; it must be at least 1")
        return max_frame
    return 4 * (max_message_bytes if isinstance(max_message_bytes, int) else 1 << 20)


def _ws_logger(name: str) -> logging.Logger:
    """A logger for the ``websockets`` connections of a server or client (``deskwire.aio.*``),
    which never shows a token (:class:`_Redact`); gateway.md: secrets never reach logs."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, _Redact) for f in logger.filters):
        logger.addFilter(_Redact())
    return logger


def _bearer(header: Optional[str]) -> Optional[str]:
    scheme, _, token = (header or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _query_token(query: str) -> Optional[str]:
    from urllib.parse import parse_qs

    values = parse_qs(query).get("token")
    return values[0] if values else None
