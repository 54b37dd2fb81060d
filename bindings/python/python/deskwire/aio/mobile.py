"""The phone end of the mobile companion over a real WebSocket: :class:`MobileClient` (the
``websockets`` package: ``pip install 'deskwire[mobile]'``)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from typing import Any, Dict, Optional, Sequence, Set

from .. import mobile
from .._deskwire import Timeout, Transmit
from .._errors import ClosedError, LocalError
from .pump import _keywords_checked, now_ms

_CLIENT_CONFIG = ("backoff_ms", "max_backoff_ms", "max_message_bytes",
                  "max_pending_permissions", "max_queued", "server_timeout_ms")
"""The fields of the engine's config that ``pair`` and ``connect`` take."""


def _client_options(given: Dict[str, Any]) -> Dict[str, Any]:
    """The config fields among ``given`` (a ``connect``'s locals) that were given."""
    return {name: given[name] for name in _CLIENT_CONFIG if given.get(name) is not None}

__all__ = ["MobileClient"]

log = logging.getLogger(__name__)  # under "deskwire.aio", as before the split


class MobileClient:
    """The phone end of the mobile companion protocol (``docs/sidecar-and-mobile.md``) over
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
        self._task = asyncio.get_running_loop().create_task(self._run())

    @classmethod
    @_keywords_checked
    async def pair(
        cls,
        url: str,
        code: str,
        *,
        max_events: int = 1024,
        max_frame: int = 1 << 20,
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
        engine = mobile.Client(**_client_options(locals()))
        engine.pair(now_ms(), code)  # a malformed code raises before anything starts
        return cls(url, engine, max_events, max_frame)

    @classmethod
    @_keywords_checked
    async def connect(
        cls,
        url: str,
        token: str,
        *,
        max_events: int = 1024,
        max_frame: int = 1 << 20,
        backoff_ms: Optional[Sequence[int]] = None,
        max_backoff_ms: Optional[int] = None,
        max_message_bytes: Optional[int] = None,
        max_pending_permissions: Optional[int] = None,
        max_queued: Optional[int] = None,
        server_timeout_ms: Optional[int] = None,
    ) -> "MobileClient":
        """Connects to the desktop at ``url`` with a token from an earlier pairing."""
        engine = mobile.Client(token=token, **_client_options(locals()))
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
