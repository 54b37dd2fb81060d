"""OA1 over a real IRC server: :class:`IrcDesk` asks, :class:`IrcRemote` answers with an async
handler; both connect again when the server drops them, given a :class:`Reconnect` policy."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import random
import socket
import ssl
import time
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    TypeVar,
    Union,
)

from .. import irc, oa1, tools
from .._errors import (
    ClosedError,
    ConnectFailedError,
    DisconnectedError,
    LocalError,
    NotReadyError,
    RemoteError,
    TlsError,
)
from .pump import _duration, _keywords_checked, _millis, _Pump, _seconds, now_ms

__all__ = ["IrcDesk", "IrcRemote", "Reconnect", "Handler"]

log = logging.getLogger(__name__)  # under "deskwire.aio", as before the split


def _engine_options(
    oa1: Optional[Mapping[str, Any]],
    session: Optional[Mapping[str, Any]],
    rejoin_delay_ms: Optional[int],
    peer_grace_ms: Optional[int],
) -> Dict[str, Any]:
    """The connection config's fields ``connect`` passes on as the engine names them (only
    those given: the engine's defaults stand for the rest)."""
    given = {"oa1": oa1, "session": session, "rejoin_delay_ms": rejoin_delay_ms,
             "peer_grace_ms": peer_grace_ms}
    return {name: value for name, value in given.items() if value is not None}


def _secret_text(secret: Any) -> Optional[str]:
    """``secret=`` as the text the engine's config carries (the secret is its UTF-8 bytes):
    a ``str``, or ``bytes`` (a secret file's), decoded. Bytes that are not UTF-8 cannot be
    carried, and are refused without quoting any of them. Nothing is stripped: the secret is
    what was given, ``str`` or ``bytes`` alike."""
    if secret is None or isinstance(secret, str):
        return secret
    if isinstance(secret, (bytes, bytearray)):
        try:
            return bytes(secret).decode("utf-8")
        except UnicodeDecodeError:
            # from None: the decode error's text quotes a byte of the secret.
            raise LocalError(
                "invalid_value",
                "secret is bytes that are not UTF-8, and the OA1 config carries the secret as "
                "text: use a text secret on both ends (e.g. `openssl rand -hex 32`)",
            ) from None
    raise TypeError(f"secret must be a str (or UTF-8 bytes), not {type(secret).__name__}")


MIN_SECRET_BYTES = 16
"""The shortest shared secret taken without a warning (as ``rexd --secret-file``)."""


def _auth(secret: Any) -> Optional[Dict[str, Any]]:
    """The ``oa1`` config's ``auth`` for ``secret=`` (``None`` without one): the secret with
    the Unix time at our clock's zero."""
    text = _secret_text(secret)
    if text is None:
        return None
    size = len(text.encode("utf-8"))
    if 0 < size < MIN_SECRET_BYTES:
        # rexd's warning for a short --secret-file; an empty one the engine refuses.
        log.warning(
            "a secret of %d bytes can be guessed from the frames' tags by whoever sees the "
            "channel; make one with `openssl rand -hex 32`", size
        )
    epoch = int(time.time() * 1000) - now_ms()
    return {"secret": text, "epoch_unix_ms": max(0, epoch)}


def _oa1_options(
    options: Dict[str, Any], peer: Optional[str], secret: Union[str, bytes, None], compression: bool
) -> Dict[str, Any]:
    """The ``oa1`` part of a connection config: the peer, the shared secret with the Unix time
    at our clock's zero, and compression."""
    oa1_options = dict(options.pop("oa1", {}) or {})
    if peer is not None:
        oa1_options.setdefault("allowed_sender", peer)
    auth = _auth(secret)
    if auth is not None:
        oa1_options.setdefault("auth", auth)
    oa1_options.setdefault("compression", compression)
    return oa1_options


_oa1 = oa1  # the module, inside the connects whose ``oa1=`` parameter hides its name

TLS_HANDSHAKE_TIMEOUT = 10.0
"""Seconds the TLS handshake may take: a plain-text port answers nothing at all."""


def _password_text(password: Any) -> Optional[str]:
    """``password=`` (the server's, sent in ``PASS``) as the text the engine's config carries:
    a ``str``, or ``bytes`` (a password file's), decoded, as ``secret=``. Bytes that are not
    UTF-8, and a password holding CR, LF or NUL (which would end the ``PASS`` line early), are
    refused; another type is a :class:`TypeError`. No message quotes any of the password."""
    if password is None:
        return None
    if isinstance(password, (bytes, bytearray)):
        try:
            text = bytes(password).decode("utf-8")
        except UnicodeDecodeError:
            # from None: the decode error's text quotes a byte of the password.
            raise LocalError(
                "invalid_value",
                "password is bytes that are not UTF-8, and the connection config carries the "
                "server password as text: use a text password on the server and here",
            ) from None
    elif isinstance(password, str):
        text = password
    else:
        raise TypeError(f"password must be a str (or UTF-8 bytes), not {type(password).__name__}")
    if any(c in text for c in "\r\n\0"):
        raise LocalError(
            "invalid_value",
            "password holds a line break or NUL, which cannot go in an IRC PASS line: strip a "
            'file\'s line end (Path(f).read_bytes().rstrip(b"\\r\\n"))',
        )
    return text


def _session_options(
    options: Dict[str, Any], password: Union[str, bytes, None], sasl: "Optional[irc.SaslLogin]"
) -> None:
    """Puts the server password (a ``str`` or UTF-8 ``bytes``, checked by
    :func:`_password_text`) and the SASL login into ``options["session"]``."""
    password = _password_text(password)
    if password is None and sasl is None:
        return
    if sasl is not None and not isinstance(sasl, irc.SaslLogin):
        # A (user, password) pair is the likely intent: say how to build the login, never
        # echoing what was given (it may hold the password).
        raise TypeError(
            f"sasl must be a deskwire.irc.SaslLogin, not {type(sasl).__name__}: pass "
            "sasl=SaslLogin.plain(username, password), or SaslLogin.external() to log in with "
            "the TLS client certificate"
        )
    session = dict(options.pop("session", {}) or {})
    if password is not None:
        session.setdefault("password", password)
    if sasl is not None:
        session.setdefault("sasl", sasl.config())
    options["session"] = session


def _reconnect_policy(reconnect: Any) -> "Optional[Reconnect]":
    """``reconnect=`` as the policy to come back with: ``True`` the default :class:`Reconnect`,
    ``False`` (or ``None``) none, or the caller's :class:`Reconnect`. Anything else is a
    :class:`TypeError` here, at connect time, not a policy found wanting when the server drops
    the connection (and ``1`` is not ``True``: bool is checked by identity)."""
    if isinstance(reconnect, Reconnect):
        return reconnect
    if reconnect is True:
        return Reconnect()
    if reconnect is False or reconnect is None:
        return None
    hint = (
        f"pass reconnect={bool(reconnect)!r}"
        if isinstance(reconnect, int)
        else "pass reconnect=True for the default policy, or reconnect=Reconnect(min_delay=..., "
        "max_delay=...) for your own"
    )
    raise TypeError(
        f"reconnect must be True, False or a deskwire.aio.Reconnect, not {type(reconnect).__name__}: "
        f"{hint}"
    )


def _tls_context(tls: Any) -> Optional[ssl.SSLContext]:
    """``tls=`` as the context to connect with: ``True`` the system's CAs with the host name
    checked, ``False`` (or ``None``) none, or the caller's ``ssl.SSLContext``. Anything else
    is a :class:`TypeError` here, before connecting, not an ``AttributeError`` from asyncio's
    TLS setup once connected (and ``1`` is not ``True``: bool is checked by identity)."""
    if isinstance(tls, ssl.SSLContext):
        return tls
    if tls is True:
        return ssl.create_default_context()
    if tls is False or tls is None:
        return None
    hint = (
        f"pass tls={bool(tls)!r}"
        if isinstance(tls, int)
        else "pass tls=True for the system's CAs, or tls=ssl.create_default_context(cafile=...) "
        "for your own"
    )
    raise TypeError(f"tls must be True, False or an ssl.SSLContext, not {type(tls).__name__}: {hint}")


def _check_address(host: Any, port: Any) -> None:
    """The server's address, refused in words before any connect: asyncio would take an
    empty host as this machine and a port out of range as an ``OverflowError``."""
    if not isinstance(host, str):
        raise TypeError(f"host must be a str, not {type(host).__name__}")
    if not host:
        raise LocalError("invalid_value", "host is empty: name the IRC server (e.g. 127.0.0.1)")
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(f"port must be an int, not {type(port).__name__}")
    if not 1 <= port <= 65535:
        raise LocalError("invalid_value", f"port must be 1-65535, not {port}")


async def _open(
    host: str, port: int, tls: "Union[bool, ssl.SSLContext, None]"
) -> "tuple[asyncio.StreamReader, asyncio.StreamWriter]":
    """Opens the connection, plain or TLS (``True``: the system's CAs, the host name checked;
    an ``SSLContext``: yours), and says what failed in words: the host, the port and the
    operating system's reason, or the TLS check that failed."""
    _check_address(host, port)
    context = _tls_context(tls)
    where = f"{host}:{port}"
    try:
        if context is None:
            return await asyncio.open_connection(host, port)
        return await asyncio.open_connection(
            host,
            port,
            ssl=context,
            server_hostname=host,
            ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT,
        )
    except ssl.SSLCertVerificationError as e:
        hint = " (give the server's CA: ssl.create_default_context(cafile=...))"
        if "Hostname mismatch" in str(e.verify_message) or "IP address mismatch" in str(
            e.verify_message
        ):
            hint = " (connect by a name the certificate lists)"
        raise TlsError(
            "tls_failed",
            f"TLS with {where} failed: certificate verify failed: {e.verify_message}{hint}",
        ) from e
    except ssl.SSLError as e:
        raise TlsError(
            "tls_failed",
            f"TLS with {where} failed: {e.reason or e} (a plain-text port? connect without tls)",
        ) from e
    except (asyncio.TimeoutError, TimeoutError) as e:
        what = "no answer to the TLS handshake" if context else "no answer"
        raise TlsError(
            "tls_failed" if context else "connect_failed",
            f"{where}: {what} within {TLS_HANDSHAKE_TIMEOUT:g} s"
            + (" (a plain-text port? connect without tls)" if context else ""),
        ) from e
    except OSError as e:
        if context is not None and isinstance(e, ConnectionAbortedError):
            # asyncio's own handshake timeout.
            raise TlsError(
                "tls_failed",
                f"TLS with {where} failed: no answer to the TLS handshake within "
                f"{TLS_HANDSHAKE_TIMEOUT:g} s (a plain-text port? connect without tls)",
            ) from e
        if isinstance(e, socket.gaierror):
            # The resolver's own words ("Name or service not known"): its codes are no errnos
            # (os.strerror(-2) is "Unknown error -2").
            reason = e.strerror or str(e)
        else:
            # asyncio words a refused connect "Connect call failed (...)": the errno says more.
            reason = os.strerror(e.errno) if e.errno else str(e)
        raise ConnectFailedError("connect_failed", f"connect to {where} failed: {reason}") from e


def _session_over(engine: Any) -> bool:
    """Whether the engine's IRC session has ended (or the engine was dropped)."""
    return bool(engine.closed) or str(engine.state) == "closed"


Dial = Callable[[], Awaitable["tuple[Any, asyncio.StreamReader, asyncio.StreamWriter]"]]
"""Opens a new connection with a new engine (what reconnecting does)."""


class Reconnect:
    """How an IRC connection comes back after the server drops it, or after the keepalive
    ``PING`` finds it dead: the core's reconnect policy, the same on every driver (``rexd
    --irc``, Kotlin, Godot). The first try after ``min_delay`` seconds, each try doubling the
    wait up to ``max_delay``, each wait plus up to ``jitter_percent`` of it at random so that
    many desks do not come back at once. A connection that became ready starts again at
    ``min_delay``. The defaults (1 s, 10 s, 50 %) bring a desk back within 15 s of the server,
    inside the 30 s a request waits for the connection (``ready_timeout``)."""

    def __init__(
        self, min_delay: float = 1.0, max_delay: float = 10.0, jitter_percent: int = 50
    ) -> None:
        self.min_delay = min_delay
        """Seconds before the first try."""
        self.max_delay = max_delay
        """The longest wait between tries (before the random share)."""
        self.jitter_percent = jitter_percent
        """Up to this share of each wait (0 to 100) is added at random."""
        if not 0 < min_delay <= max_delay:
            raise LocalError("invalid_value", "reconnect delays need 0 < min_delay <= max_delay")
        self.delay(0)  # the core checks the rest

    def delay(self, attempt: int) -> float:
        """Seconds to wait before try ``attempt`` (0 for the first)."""
        return (
            irc.reconnect_delay_ms(
                attempt,
                random.getrandbits(64),
                first_delay_ms=max(1, round(self.min_delay * 1000)),
                max_delay_ms=max(1, round(self.max_delay * 1000)),
                jitter_percent=self.jitter_percent,
            )
            / 1000
        )

    def __repr__(self) -> str:
        return (
            f"Reconnect(min_delay={self.min_delay!r}, max_delay={self.max_delay!r}, "
            f"jitter_percent={self.jitter_percent!r})"
        )


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
        self._attempt = 0
        self.reconnects = 0
        """How many times the connection came back after the server dropped it."""
        self.events: List[Any] = []
        """IRC and link events seen so far (registration, joins, state changes), at most 256."""
        self._pump = self._pump_for(engine, reader, writer)

    def _pump_for(
        self, engine: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> _Pump:
        return _Pump(engine, reader, writer, self._event, self._end, lambda: _session_over(engine))

    def _reconnect_with(self, dial: Dial, policy: Reconnect) -> None:
        self._dial, self._policy = dial, policy
        self._attempt = 0

    def _event(self, event: Any) -> None:
        if isinstance(event, oa1.StateChanged) and event.state == "ready":
            self._attempt = 0
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
        if isinstance(event, irc.Disconnected) and self._reconnecting():
            # From now on requests wait for the next connection, even before the socket ends.
            if self._ready.done():
                self._ready = asyncio.get_running_loop().create_future()
        if len(self.events) < 256:
            self.events.append(event)

    def _reconnecting(self) -> bool:
        """Whether a new connection follows the end of this one."""
        return self._dial is not None and not self._closing and not self._ended.done()

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
            # The wait doubles with every try, connected or not, until a connection gets ready
            # (a server that takes the socket and then drops us is not retried in a loop).
            await asyncio.sleep(self._policy.delay(self._attempt))
            self._attempt += 1
            try:
                engine, reader, writer = await asyncio.wait_for(self._dial(), 30)
            except (OSError, asyncio.TimeoutError) as e:
                log.info("reconnecting: %s; try %d failed", e, self._attempt)
                continue
            self._engine.close()
            self._engine, self._writer = engine, writer
            self.reconnects += 1
            # This pump's end (the server dropping us again) starts the next round.
            self._pump = self._pump_for(engine, reader, writer)
            return

    @property
    def state(self) -> str:
        """The connection's state: the engine's (``"registering"``, ``"joining"``,
        ``"waiting_for_nick"``, ``"waiting_for_peer"``, ``"ready"`` when requests flow,
        ``"closed"``), or ``"reconnecting"`` between the end of one connection and the next
        with a :class:`Reconnect` policy."""
        if _session_over(self._engine) and self._reconnecting():
            return "reconnecting"
        return "closed" if self._engine.closed else str(self._engine.state)

    def stats(self) -> Dict[str, Any]:
        """The engine's counters: ``{"irc": {...}, "oa1": {...}}``; after :meth:`close` (or
        the server's end), the last ones, as ``state`` reads ``"closed"``."""
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


class _DeskConnection(_IrcConnection):
    """What :class:`IrcDesk` and :class:`IrcDesks` share: requests waiting for their outcome,
    by id, each settled by the engine's answer or failure."""

    #: What a call after the end raises.
    _closed_text = "the desk is closed"

    def __init__(self, engine: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._waiting: Dict[str, asyncio.Future[Union[oa1.Response, oa1.Failed]]] = {}
        super().__init__(engine, reader, writer)

    def _settle(self, outcome: Union[oa1.Response, oa1.Failed]) -> None:
        # The engine fails every request the link dooms (disconnected, kicked, peer_left,
        # join_failed, not_ready, a removed desk), each with its reason: nothing is failed here.
        future = self._waiting.pop(outcome.id, None)
        if future is not None and not future.done():
            future.set_result(outcome)

    def _end(self) -> None:
        # Only what the engine could not fail itself (the pump stopped on an error).
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(DisconnectedError("disconnected", "the IRC connection closed"))
        self._waiting.clear()
        super()._end()

    async def _call(self, start: Callable[[int], str], cancel: Callable[[int, str], None]) -> str:
        """Starts a request with ``start(now_ms)`` (which returns its id) and waits for its
        outcome: the text, or the exception the core's typed failure names. A cancelled wait
        sends ``CANCEL`` through ``cancel(now_ms, id)``."""
        if self._ended.done():
            raise ClosedError("closed", self._closed_text)
        if self._reconnecting() and (not self._ready.done() or _session_over(self._engine)):
            # Reconnecting: the engine of the next connection takes the request; wait for it
            # as long as a request may wait for readiness.
            await self.wait_ready(self._ready_timeout)
        if self._ended.done():
            raise ClosedError("closed", self._closed_text)
        request_id = start(now_ms())
        future: asyncio.Future[Union[oa1.Response, oa1.Failed]]
        future = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        self._pump.kick()
        try:
            outcome = await future
        except asyncio.CancelledError:
            if self._waiting.pop(request_id, None) is not None:
                with contextlib.suppress(LocalError):
                    cancel(now_ms(), request_id)
                self._pump.kick()
            raise
        if isinstance(outcome, oa1.Failed):
            raise outcome.exception()
        return outcome.text


class IrcDesk(_DeskConnection):
    """The desk end of OA1 on a real IRC server. Make one with :meth:`connect`; it sends only
    while its remote is in the channel, and takes answers from that remote only."""

    def __init__(
        self, engine: oa1.Desk, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        super().__init__(engine, reader, writer)

    @classmethod
    @_keywords_checked
    async def connect(
        cls,
        host: str,
        port: int = 6667,
        *,
        nick: str = "desk",
        channel: str = "#desk",
        remote_nick: str = "rexd",
        secret: Union[str, bytes, None] = None,
        compression: bool = True,
        tls: Union[bool, ssl.SSLContext] = False,
        password: Union[str, bytes, None] = None,
        sasl: "Optional[irc.SaslLogin]" = None,
        seed: Optional[int] = None,
        ready_timeout: Optional[float] = 30,
        reconnect: Union[bool, Reconnect] = False,
        oa1: Optional[Mapping[str, Any]] = None,
        session: Optional[Mapping[str, Any]] = None,
        rejoin_delay_ms: Optional[int] = None,
        peer_grace_ms: Optional[int] = None,
    ) -> "IrcDesk":
        """Connects, registers as ``nick`` and joins ``channel``; returns once its remote,
        ``remote_nick``, is in the channel too. The default is ``rexd``, the nick ``rexd --irc``
        joins as; name another nick, a ``nick!user@host`` mask, or ``"*"`` to take answers
        from anyone in the channel (then it waits for any other member). Answers are taken from
        the remote only, and nothing is sent while it is away (IRC keeps no history: a request
        sent into an empty channel reaches nobody). ``secret`` authenticates every frame (the
        remote needs the same): a ``str``, or UTF-8 ``bytes`` (other bytes are a
        :class:`deskwire.LocalError`, ``invalid_value``), used as given: strip a file's line
        end, as ``rexd --secret-file`` does (``Path(f).read_bytes().rstrip(b"\\r\\n")``); ``tls``
        connects with TLS (``True``: the system's CAs and the host name checked; ``False``, the
        default: plain text; or your ``ssl.SSLContext``, e.g. ``ssl.create_default_context(
        cafile="ca.pem")`` with ``load_cert_chain`` for SASL EXTERNAL); ``password`` is the
        server's, a ``str`` or UTF-8 ``bytes`` as ``secret`` (one holding CR, LF or NUL, which
        cannot go in a ``PASS`` line, is a :class:`deskwire.LocalError`, ``invalid_value``);
        ``sasl`` logs in while registering, a :class:`deskwire.irc.SaslLogin`
        (``SaslLogin.plain(username, password)`` or ``SaslLogin.external()``). A ``tls``,
        ``sasl``, ``secret``, ``password`` or ``reconnect`` of another type is a ``TypeError``
        saying what to pass, before connecting; no message quotes a secret or a password; an
        empty host, a port outside 1-65535 (:class:`deskwire.LocalError`, ``invalid_value``) and
        an empty secret (``invalid_config``) are refused there too, and a secret under 16
        bytes is logged as a warning (as ``rexd --secret-file`` warns). A connect that fails raises :class:`deskwire.ConnectFailedError` naming the host, the
        port and the reason (the resolver's words for a name that does not
        resolve), a TLS check that fails :class:`deskwire.TlsError`, a required login that fails
        :class:`deskwire.LoginFailedError` with the server's words. ``compression`` offers
        compressed answers (on by default:
        ``rexd --irc`` honours the offer and a spec-only remote never sees it; payloads also
        fill each line, unless ``oa1={"adaptive_payload": False}``). ``oa1``, ``session``,
        ``rejoin_delay_ms`` and ``peer_grace_ms`` are :class:`deskwire.oa1.Desk`'s config fields
        (``oa1={...}``, ``session={...}``); a keyword this does not take is a ``TypeError``
        naming the one it is closest to. Request ids come from the OS's entropy; ``seed`` fixes
        them, for tests only.

        ``ready_timeout`` (seconds) bounds the wait here and, later, how long a request may
        wait for the connection to be ready again before it fails. Raises
        :class:`deskwire.NotReadyError` (a :class:`TimeoutError`) when the connection is not
        ready in time, saying what it waited for and who was in the channel, e.g. ``not ready
        after 30 s: waiting for remote `rexd` in #desk; members: deskbot``;
        :class:`deskwire.JoinFailedError` or :class:`deskwire.NickRefusedError` with the
        server's words when it refuses the channel or every nick; :class:`deskwire.LocalError`
        (``invalid_config``) at once for a nick, channel or remote the server would refuse.

        With ``reconnect`` (``True`` or a :class:`Reconnect` policy; ``False``, the default, for
        none, and anything else, even ``1``, a ``TypeError``), the desk connects again,
        with a fresh engine, when the server drops it: requests in flight then fail with
        :class:`deskwire.DisconnectedError`, and new ones wait for the next connection (up to
        ``ready_timeout``)."""
        ready_timeout = _seconds(ready_timeout, "ready_timeout")
        options = _engine_options(oa1, session, rejoin_delay_ms, peer_grace_ms)
        if remote_nick is None:
            raise LocalError(
                "invalid_config",
                "a desk needs its remote's nick (`rexd --irc` joins as `rexd`), or \"*\" to take "
                "answers from anyone in the channel",
            )
        oa1_options = _oa1_options(options, remote_nick, secret, compression)
        _session_options(options, password, sasl)
        if ready_timeout is not None:
            oa1_options.setdefault("ready_timeout_ms", _millis(ready_timeout))
        policy = _reconnect_policy(reconnect)

        async def dial() -> "tuple[Any, asyncio.StreamReader, asyncio.StreamWriter]":
            # A new engine each time: ids from the OS's entropy, or (tests) from the next seed,
            # so none repeats an earlier one.
            engine_seed = None if seed is None else seed + (desk_box[0].reconnects + 1 if desk_box else 0)
            engine = _oa1.Desk(
                nick,
                channel,
                seed=engine_seed,
                now_ms=now_ms(),
                oa1=dict(oa1_options),
                **options,
            )
            reader, writer = await _open(host, port, tls)
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
            self._settle(event)
            return
        super()._event(event)

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

    def tool_description(self) -> str:
        """The ``RemoteBash`` description for this link, to give the model in place of
        :data:`deskwire.oa1.TOOL_DESCRIPTION`: it states about how much output arrives within
        the request timeout at the pacing in force (the server's own, once in the channel)."""
        if self._engine.closed:
            from deskwire.oa1 import TOOL_DESCRIPTION

            return TOOL_DESCRIPTION
        return str(self._engine.tool_description())

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
        timeout_ms = None if timeout is None else _millis(timeout)
        return await self._call(
            lambda now: self._engine.request(now, payload, timeout_ms), self._cancel
        )

    async def remote_bash(self, command: str, timeout: Optional[float] = 30) -> str:
        """Runs ``command`` through ``RemoteBash`` on the remote and returns its combined
        output (the tool's text result). ``timeout`` is in seconds, as the tool's
        ``timeout_sec`` (:func:`deskwire.oa1.remote_bash_args`) and :meth:`request`'s; it
        starts when the request can leave. Raises as :meth:`request`."""
        timeout = _seconds(timeout)
        return await self._call(
            lambda now: self._engine.remote_bash(now, command, timeout), self._cancel
        )

    def _cancel(self, now: int, request_id: str) -> None:
        self._engine.cancel(now, request_id, "cancelled")

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
        args = call.get("args", {})
        try:
            output = await self._call(
                lambda now: self._engine.remote_bash_call(now, args), self._cancel
            )
        except (LocalError, RemoteError) as e:
            if isinstance(e, LocalError) and e.code != "invalid_arguments":
                raise  # misuse of the desk itself (closed), not the model's arguments
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
    task; ``CANCEL`` cancels that task. Make one with :meth:`connect`.

    ``desk_nick`` (a nick or a ``nick!user@host`` mask) is a filter, not an identity: whoever
    takes the desk's nick once it quits, or copies its user name from the same host on a
    network that does not verify users, is served. When the handler runs commands, pass
    ``secret=`` (the desk needs the same) and log each request's :meth:`source`."""

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

    def source(self, request_id: str) -> Optional[str]:
        """Who sent request ``request_id`` (being answered), as the server showed them:
        ``nick!user@host``, or ``None``. Log it: the nick alone proves nothing."""
        engine = self._engine
        assert isinstance(engine, oa1.Remote)
        return engine.source(request_id)

    @classmethod
    @_keywords_checked
    async def connect(
        cls,
        host: str,
        port: int = 6667,
        handler: Optional[Handler] = None,
        *,
        nick: str = "rexd",
        channel: str = "#desk",
        desk_nick: Optional[str] = "desk",
        secret: Union[str, bytes, None] = None,
        compression: bool = True,
        tls: Union[bool, ssl.SSLContext] = False,
        password: Union[str, bytes, None] = None,
        sasl: "Optional[irc.SaslLogin]" = None,
        ready_timeout: Optional[float] = 30,
        reconnect: Union[bool, Reconnect] = False,
        oa1: Optional[Mapping[str, Any]] = None,
        session: Optional[Mapping[str, Any]] = None,
        rejoin_delay_ms: Optional[int] = None,
        peer_grace_ms: Optional[int] = None,
    ) -> "IrcRemote":
        """Connects, registers as ``nick`` (``rexd`` by default, the remote nick an
        :class:`IrcDesk` waits for unless told another), joins ``channel`` and serves requests
        (from ``desk_nick`` only, unless ``None``) with ``handler``. ``secret`` authenticates every
        frame; ``secret`` (``str`` or UTF-8 ``bytes``), ``tls``, ``password`` (``str`` or UTF-8
        ``bytes``), ``sasl`` and ``reconnect`` are :meth:`IrcDesk.connect`'s, as are the
        ``TypeError`` for another type of them;
        ``compression`` accepts a desk's offer of compressed answers. With
        ``reconnect``, it connects again when the server drops it (the handlers running then
        are cancelled) and :meth:`serve_forever` goes on."""
        if handler is None:
            raise LocalError("invalid_value", "IrcRemote needs a handler")
        options = _engine_options(oa1, session, rejoin_delay_ms, peer_grace_ms)
        oa1_options = _oa1_options(options, desk_nick, secret, compression)
        _session_options(options, password, sasl)
        policy = _reconnect_policy(reconnect)

        async def dial() -> "tuple[Any, asyncio.StreamReader, asyncio.StreamWriter]":
            engine = _oa1.Remote(nick, channel, now_ms=now_ms(), oa1=dict(oa1_options), **options)
            reader, writer = await _open(host, port, tls)
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
