"""The gateway end of the gateway RPC, serving the Commander's WebSocket connections:
:class:`GatewayServer` (the ``websockets`` package: ``pip install 'deskwire[gateway]'``)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import re
from typing import Any, Dict, Optional, Sequence

from .. import gateway
from .._deskwire import Timeout
from .._errors import ClosedError, LocalError
from .pump import now_ms

__all__ = ["GatewayServer"]

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
        self._events.put_nowait(ClosedError("closed", "the gateway server is closed"))

    async def __aenter__(self) -> "GatewayServer":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


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
