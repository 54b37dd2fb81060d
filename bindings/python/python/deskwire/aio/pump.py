"""The pump every socket driver runs, and what the drivers share: the clock they give their
engines and how they check a timeout.

:class:`_Pump` moves bytes between one engine and one asyncio stream, the same four steps in
every driver: bytes read → ``handle_bytes``; drain ``poll_output`` (or ``drain``, one crossing
for all of it) → write every ``Transmit``, deliver every event; sleep until the deadline, new
bytes, or a command that changed the engine (:meth:`_Pump.kick`). No protocol rule lives here.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import inspect
import logging
import math
import re
import time
from typing import Any, Callable, Optional, Protocol, Set, TypeVar, cast

from .._deskwire import Timeout, Transmit
from .._errors import LocalError

__all__ = ["now_ms"]

log = logging.getLogger(__name__)  # under "deskwire.aio", as before the split

END_GRACE_MS = 2_000
"""After the engine's session ended (our ``QUIT``, the server's ``ERROR``, no answer to the
keepalive ``PING``), how long the pump waits for the server to close the socket before it
stops anyway: long enough for a ``QUIT`` to be read, short enough that a dead link (a server
that answers nothing, and never closes) ends and can be reconnected."""


_F = TypeVar("_F", bound=Callable[..., Any])


def _keywords_checked(fn: _F) -> _F:
    """Checks the keyword arguments of a ``connect`` against its parameters before it runs: a
    misspelt one is Python's ``TypeError`` naming it and the parameter it is closest to
    (``connect() got an unexpected keyword argument 'secert'; did you mean 'secret'?``), on
    every Python, rather than a complaint of the engine about its own config fields. The
    signature is the function's, so a type checker sees the typo too."""
    names = [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        for name in kwargs:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise TypeError(
                    f"{fn.__name__}() got an unexpected keyword argument {name!r}{hint}"
                )
        return fn(*args, **kwargs)

    return cast(_F, checked)


def now_ms() -> int:
    """The clock every driver gives its engine: ``time.monotonic()`` in milliseconds."""
    return int(time.monotonic() * 1000)


class _Reader(Protocol):
    """What the pump reads from: an :class:`asyncio.StreamReader`, or anything with its
    ``read``."""

    async def read(self, n: int = -1) -> bytes: ...


class _Pump:
    """Moves bytes between one engine and one asyncio stream until the stream ends.

    When the task is cancelled or the stream ends, the pump's own waits (the read in progress,
    the wake-up) are cancelled and awaited before it finishes, so none is left pending for the
    event loop to find ("Task was destroyed but it is pending!") after ``close``."""

    def __init__(
        self,
        engine: Any,
        reader: _Reader,
        writer: Any,
        on_event: Callable[[Any], None],
        on_end: Callable[[], None],
        session_over: Optional[Callable[[], bool]] = None,
    ) -> None:
        self.engine = engine
        self._session_over = session_over
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
        wake: Optional[asyncio.Future[Any]] = None
        ended_at: Optional[int] = None
        try:
            while True:
                deadline = self._drain()
                await self._writer.drain()
                if self._session_over is not None and self._session_over():
                    ended_at = now_ms() if ended_at is None else ended_at
                    if now_ms() >= ended_at + END_GRACE_MS:
                        return
                    deadline = min(deadline, ended_at + END_GRACE_MS)
                if read is None:
                    read = asyncio.ensure_future(self._reader.read(64 * 1024))
                wake = asyncio.ensure_future(self._wake.wait())
                delay = max(0, deadline - now_ms()) / 1000
                waiting: "Set[asyncio.Future[Any]]" = {read, wake}
                done, _ = await asyncio.wait(
                    waiting, timeout=delay, return_when=asyncio.FIRST_COMPLETED
                )
                wake.cancel()
                wake = None
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
            waits = [f for f in (read, wake) if f is not None and not f.done()]
            for f in waits:
                f.cancel()
            if waits:
                # Let them finish their cancellation, even when this task is being cancelled.
                await asyncio.wait(waits)
            self._on_end()


class _WsWriter:
    """The pump's writer over a WebSocket (REXD's ``/ws``, the gateway's Commander): each line
    the engine writes is one text message."""

    def __init__(self, ws: Any, closed: Any) -> None:
        self._ws = ws
        self._closed = closed
        self._pending = bytearray()

    def write(self, data: bytes) -> None:
        self._pending += data

    async def drain(self) -> None:
        while True:
            end = self._pending.find(b"\n")
            if end < 0:
                return
            line = bytes(self._pending[:end])
            del self._pending[: end + 1]
            if line:
                try:
                    await self._ws.send(line.decode("utf-8"))
                except self._closed:
                    return  # the reader sees the end and says why


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


_MAX_MS = 2**64 - 1


def _millis(seconds: float) -> int:
    """Checked ``seconds`` (:func:`_seconds`) as the engines' whole milliseconds: under one
    rounds up to 1, and a timeout beyond what a ``u64`` of milliseconds holds (half a billion
    years) is the longest one, not an ``OverflowError`` from the conversion."""
    return min(max(1, int(seconds * 1000)), _MAX_MS)


def _duration(seconds: float) -> str:
    """``30 s``, ``1.5 s``, ``250 ms``: a duration for a message, written as the core writes
    its own."""
    ms = int(seconds * 1000)
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms // 1000} s" if ms % 1000 == 0 else f"{ms / 1000:.1f} s"


def _without_secrets(text: str, token: Optional[str] = None) -> str:
    """``text`` (a URL, a library's error message) as it may be shown: the token replaced
    wherever it appears, a URL's ``user:password@`` and ``token=`` query value removed."""
    from urllib.parse import quote

    # The URL's parts first: the token's own replacement below must not be taken for a query
    # value again ("token=<the token> token>").
    text = re.sub(r"(?<=://)[^/@\s]*@", "", text)
    text = re.sub(r"(?i)(token=)[^&#\s'\"]*", r"\1<the token>", text)
    if token:
        for secret in {token, quote(token, safe="")}:
            text = text.replace(secret, "<the token>")
    return text
