"""The phone end of the mobile companion over a real WebSocket: :class:`MobileClient` (the
``websockets`` package: ``pip install 'deskwire[mobile]'``)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from typing import Any, Dict, List, Optional, Sequence, Set

from .. import mobile
from .._deskwire import Timeout, Transmit
from .._errors import ClosedError, LocalError, LoginFailedError, NotReadyError
from .gateway import _frame_bound, _ws_logger
from .pump import _keywords_checked, now_ms

_CLIENT_CONFIG = ("backoff_ms", "max_backoff_ms", "max_message_bytes",
                  "max_pending_permissions", "max_queued", "server_timeout_ms")
"""The fields of the engine's config that ``pair`` and ``connect`` take."""


def _client_options(given: Dict[str, Any]) -> Dict[str, Any]:
    """The config fields among ``given`` (a ``connect``'s locals) that were given."""
    return {name: given[name] for name in _CLIENT_CONFIG if given.get(name) is not None}


__all__ = ["MobileClient"]

log = logging.getLogger(__name__)  # under "deskwire.aio", as before the split

_ENDED = object()
"""Queued after the event of a final refusal: the iteration ends there."""


class MobileClient:
    """The phone end of the mobile companion protocol (``docs/sidecar-and-mobile.md``) over
    a real WebSocket, with the ``websockets`` package (``pip install 'deskwire[mobile]'``).
    :class:`deskwire.mobile.Client` decides everything (when to connect and reconnect, with
    which token, pings, the state sync); this only moves frames::

        phone = await MobileClient.pair("ws://192.168.1.20:9120/ws", "482913")
        await phone.wait_ready()                  # connected: send_* work from here
        phone.send_command({"action": "start", "task": "tidy up"})
        async for event in phone:                 # mobile.Paired(token=...), StateChanged, ...
            if isinstance(event, mobile.PermissionRequested):
                phone.respond_permission(event.id, approved=True)

    ``pair`` and ``connect`` return at once, before the socket is open: the engine connects
    (and reconnects after a drop) on its own. :meth:`wait_ready` waits until the session is
    up; a ``send_*`` before that raises :class:`deskwire.LocalError` ``not_connected``.

    Later, ``await MobileClient.connect(url, token)`` reconnects with the stored token. At most
    ``max_events`` events wait for the reader; past that no frame is read until it reads.

    Frame sizes: a frame over the engine's ``max_message_bytes`` (1 MiB) is ignored and
    counted (``stats()["too_large"]``); the connection stays up. ``max_frame`` is the
    transport's hard bound, four times ``max_message_bytes`` (4 MiB) unless given: a longer
    frame is not read at all, the socket closes (1009) and the engine reconnects after its
    backoff, which does not start over for a session that ends that soon.

    A refused token (:class:`deskwire.mobile.TokenRejected`) or pairing code
    (:class:`deskwire.mobile.AuthFailed`) is final: the engine does not retry
    (:attr:`connection_state` is ``"idle"``), so ``async for`` ends after that event, as a
    loop over a terminal ends after its exit. Pair again with a new client. Other drops
    (:class:`deskwire.mobile.Disconnected` with ``retry_in_ms``) are retried and the iteration
    goes on; after :meth:`close` it raises :class:`deskwire.ClosedError`."""

    def __init__(self, url: str, engine: mobile.Client, max_events: int, max_frame: int) -> None:
        try:
            self._ws_client = importlib.import_module("websockets.asyncio.client")
            self._ws_errors = importlib.import_module("websockets.exceptions")
        except ImportError:
            raise LocalError(
                "missing_dependency",
                "MobileClient needs the websockets package: pip install 'deskwire[mobile]'",
            ) from None
        if not isinstance(url, str):
            raise TypeError(f"url is a str, not {type(url).__name__}")
        try:
            importlib.import_module("websockets.uri").parse_uri(url)
        except self._ws_errors.InvalidURI as e:
            # Said at once: the engine would otherwise retry a URL that can never work.
            raise LocalError(
                "invalid_value", f"{url!r} is not a WebSocket URL (ws://HOST:PORT/PATH or wss://): {e}"
            ) from None
        self._url = url
        self._engine = engine
        self._max_frame = max_frame
        self._events: asyncio.Queue[Any] = asyncio.Queue(maxsize=max_events)
        self._ws: Any = None
        self._kick = asyncio.Event()
        self._closed = False
        self._changed = asyncio.Event()  # the pump went round: the engine's state may differ
        self._refused: Optional[str] = None  # why, after a final refusal
        self._last_failure: Optional[str] = None  # the last drop's reason
        self._task = asyncio.get_running_loop().create_task(self._run())

    @classmethod
    @_keywords_checked
    async def pair(
        cls,
        url: str,
        code: str,
        *,
        max_events: int = 1024,
        max_frame: Optional[int] = None,
        backoff_ms: Optional[Sequence[int]] = None,
        max_backoff_ms: Optional[int] = None,
        max_message_bytes: Optional[int] = None,
        max_pending_permissions: Optional[int] = None,
        max_queued: Optional[int] = None,
        server_timeout_ms: Optional[int] = None,
    ) -> "MobileClient":
        """Connects to the desktop at ``url`` and pairs with the six-digit ``code`` it shows; the
        :class:`deskwire.mobile.Paired` event carries the token to keep. The rest are
        :class:`deskwire.mobile.Client`'s config (``backoff_ms``, ``server_timeout_ms``, ...; the
        engine's defaults when not given)."""
        if not isinstance(code, str):
            raise TypeError(f"code is a str (six digits), not {type(code).__name__}")
        engine = mobile.Client(**_client_options(locals()))
        engine.pair(now_ms(), code)  # a malformed code raises before anything starts
        return cls(url, engine, max_events, _frame_bound(max_frame, max_message_bytes))

    @classmethod
    @_keywords_checked
    async def connect(
        cls,
        url: str,
        token: str,
        *,
        max_events: int = 1024,
        max_frame: Optional[int] = None,
        backoff_ms: Optional[Sequence[int]] = None,
        max_backoff_ms: Optional[int] = None,
        max_message_bytes: Optional[int] = None,
        max_pending_permissions: Optional[int] = None,
        max_queued: Optional[int] = None,
        server_timeout_ms: Optional[int] = None,
    ) -> "MobileClient":
        """Connects to the desktop at ``url`` with a token from an earlier pairing."""
        if not isinstance(token, str):
            raise TypeError(f"token is a str, not {type(token).__name__}")
        engine = mobile.Client(token=token, **_client_options(locals()))
        engine.start(now_ms())
        return cls(url, engine, max_events, _frame_bound(max_frame, max_message_bytes))

    @property
    def token(self) -> Optional[str]:
        """The token, once paired (keep it for :meth:`connect`)."""
        return self._engine.token

    @property
    def connection_state(self) -> Any:
        """The engine's connection state (``"idle"``, ``{"online": {"synced": True}}``, ...)."""
        return self._engine.connection_state

    @property
    def pending_permissions(self) -> List[str]:
        """The ids of the permission requests that can still be answered, oldest first. At
        most ``max_pending_permissions`` (64) wait: past that the oldest is dropped, so a
        :class:`deskwire.mobile.PermissionRequested` shown earlier may no longer be answerable
        (``respond_permission`` raises ``unknown_permission``); each is counted in
        ``stats()["dropped"]``."""
        return self._engine.pending_permissions

    def stats(self) -> Dict[str, int]:
        """The engine's counters (``connects``, ``sessions``, ``too_large``, ``dropped``, ...)."""
        return self._engine.stats()

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

    async def wait_ready(self, timeout: Optional[float] = 30) -> None:
        """Waits until the session is up (``connection_state`` is ``{"online": ...}``), so that
        ``send_*`` and ``respond_permission`` work; the desktop's state follows as
        :class:`deskwire.mobile.StateChanged` with ``initial``. Returns at once when it is up.
        Raises :class:`deskwire.NotReadyError` (a :class:`TimeoutError`) after ``timeout``
        seconds (``None``: no limit), saying what the engine was doing and why the last try
        failed (the engine goes on retrying); :class:`deskwire.LoginFailedError` (code
        ``login_failed``) at once when the desktop refused the token or the pairing code,
        which is final: pair again; :class:`deskwire.ClosedError` once closed. Events are
        read as before: waiting here does not consume them."""
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
            raise TypeError(f"timeout is a number of seconds or None, not {type(timeout).__name__}")
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if self._closed:
                raise ClosedError("closed", "the mobile client is closed")
            state = self._engine.connection_state
            if isinstance(state, dict) and "online" in state:
                return
            if self._refused is not None:
                raise LoginFailedError("login_failed", self._refused)
            if self._task.done():
                raise ClosedError("pump_failed", "the mobile client's pump stopped")
            self._changed.clear()
            left = None if deadline is None else deadline - loop.time()
            try:
                if left is not None and left <= 0:
                    raise asyncio.TimeoutError
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                failure = f"; the last try failed: {self._last_failure}" if self._last_failure else ""
                raise NotReadyError(
                    "not_ready", f"not connected after {timeout:g} s (the engine is {state}{failure})"
                ) from None

    def __aiter__(self) -> "MobileClient":
        return self

    async def __anext__(self) -> Any:
        """The next event of :mod:`deskwire.mobile`; :class:`deskwire.ClosedError` once closed
        (or when the pump failed, with the reason). After a final refusal (``TokenRejected``,
        ``AuthFailed``) the iteration ends (``StopAsyncIteration``)."""
        event = await self._events.get()
        if event is _ENDED:
            self._events.put_nowait(event)  # every later read ends the same way
            raise StopAsyncIteration
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
                    self._url, additional_headers=headers, max_size=self._max_frame,
                    logger=_ws_logger("deskwire.aio.mobile.websockets"),
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
            self._changed.set()
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
                if isinstance(out, mobile.Disconnected):
                    reason = out.reason
                    self._last_failure = (
                        reason["failed"] if isinstance(reason, dict) and "failed" in reason else str(reason)
                    )
                final = (isinstance(out, (mobile.TokenRejected, mobile.AuthFailed))
                         and self._engine.connection_state == "idle")
                if final:
                    self._refused = (
                        "the desktop refused the token (revoked or unknown): pair again"
                        if isinstance(out, mobile.TokenRejected)
                        else f"the desktop refused the pairing code: {out.error or 'no reason given'}"
                    )
                    self._changed.set()
                await self._events.put(out)  # waits while the reader is behind
                if final:
                    await self._events.put(_ENDED)  # no retry is coming: the iteration ends

    async def _run(self) -> None:
        receiving: Optional[asyncio.Task[Any]] = None
        kicked: Optional[asyncio.Future[Any]] = None
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
            # Cancelled while waiting (close): neither wait may outlive the pump.
            for waiting in (receiving, kicked):
                if waiting is not None:
                    waiting.cancel()

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
