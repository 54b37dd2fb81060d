"""Many desks on one IRC connection: :class:`IrcDesks`, one desk per channel, each with its own
remote, request ids, timeouts and counters, added and removed at run time; with ``chat=True``
and ``membership=True``, the channels' chat and who comes and goes, as an async iterator."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Deque,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Tuple,
    Union,
)

from .. import irc, oa1, tools
from .._errors import (
    ClosedError,
    DisconnectedError,
    LocalError,
    NotReadyError,
    RemoteError,
    UnknownChannelError,
)
from .irc import (
    Reconnect,
    _DeskConnection,
    _auth,
    _engine_options,
    _oa1_options,
    _open,
    _reconnect_policy,
    _session_options,
    _session_over,
)
from .pump import _duration, _keywords_checked, _millis, _seconds, now_ms

__all__ = ["IrcDesks"]

_oa1 = oa1  # the module, inside ``connect`` whose ``oa1=`` parameter hides its name

MAX_CHAT = 1024
"""The most chat messages and membership changes kept for :meth:`IrcDesks.chat` before the
oldest are dropped (counted in :attr:`IrcDesks.chat_dropped`), as the engine keeps."""

_CHAT_TYPES = (
    oa1.ChatMessage,
    oa1.MemberNames,
    oa1.MemberJoined,
    oa1.MemberParted,
    oa1.MemberKicked,
    oa1.MemberQuit,
    oa1.MemberRenamed,
)


class IrcDesks(_DeskConnection):
    """Many desks on one IRC connection, one per channel: a VR office with a desk per NPC needs
    one connection, not one per NPC. Each desk has its own remote (the nick it takes answers
    from), request ids, timeouts and counters; desks are added and removed while the
    connection runs. The channels share the connection's flood pacing in turns, so one
    channel's long answer does not hold back another's short one. Make one with
    :meth:`connect`::

        async with await IrcDesks.connect("127.0.0.1", 6667, nick="npcs") as desks:
            await desks.add_desk("#desk-1", "rexd")
            await desks.add_desk("#desk-2", "rexd-lab")
            one, two = await asyncio.gather(
                desks.remote_bash("#desk-1", "hostname"), desks.remote_bash("#desk-2", "hostname")
            )

    With ``chat=True`` (and ``membership=True``), :meth:`chat` yields the channels' messages
    that are not OA1 (and who joins, parts, quits, is kicked or changes nick), and
    :meth:`send_text` says something in a channel."""

    _closed_text = "the connection is closed"

    def __init__(
        self,
        engine: oa1.MultiDesk,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        chat: bool = False,
    ) -> None:
        loop = asyncio.get_running_loop()
        # What each desk was added with, to add it again on a new connection.
        self._desks: Dict[str, Tuple[str, Dict[str, Any]]] = {}
        self._refused: Dict[str, irc.JoinFailed] = {}
        self._changed: asyncio.Future[None] = loop.create_future()
        self._chat_on = chat
        self._inbox: Deque[oa1.ChatEvent] = collections.deque()
        self._inbox_wake = asyncio.Event()
        self._dropped = 0
        super().__init__(engine, reader, writer)

    @classmethod
    @_keywords_checked
    async def connect(
        cls,
        host: str,
        port: int = 6667,
        *,
        nick: str = "desk",
        channels: Iterable[str] = (),
        remote_nick: str = "rexd",
        chat: bool = False,
        membership: bool = False,
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
    ) -> "IrcDesks":
        """Connects and registers as ``nick``, with a desk in each of ``channels`` whose remote
        is ``remote_nick`` (more come with :meth:`add_desk`); returns once registered and every
        one of those desks is ready (its remote in its channel).

        ``chat=True`` keeps every ``PRIVMSG``, ``NOTICE`` and ``ACTION`` of a desk channel that
        is not OA1 for :meth:`chat`; ``membership=True`` every join, part, kick, quit, nick
        change and ``NAMES`` list of a desk channel. Both are off by default: then nothing is
        kept.

        ``secret``, ``compression``, ``tls``, ``password``, ``sasl``, ``oa1``, ``session``,
        ``rejoin_delay_ms``, ``peer_grace_ms`` and ``reconnect`` are :meth:`IrcDesk.connect`'s,
        for every desk (``oa1`` the settings each desk is made with), with the same
        ``TypeError`` for a ``tls``, ``sasl``, ``secret``, ``password`` or ``reconnect`` of
        another type (a ``secret`` or ``password`` may be ``str`` or UTF-8 ``bytes``); ``seed``
        fixes the request ids, for tests only. ``ready_timeout`` (seconds) bounds the wait here, and how long a
        request may wait for its desk to be ready before it fails. Raises
        :class:`deskwire.ConnectFailedError`, :class:`deskwire.NotReadyError`,
        :class:`deskwire.JoinFailedError`, :class:`deskwire.NickRefusedError` as
        :meth:`IrcDesk.connect` does, and :class:`deskwire.LocalError` at once for a nick,
        channel or remote the server would refuse."""
        ready_timeout = _seconds(ready_timeout, "ready_timeout")
        options = _engine_options(oa1, session, rejoin_delay_ms, peer_grace_ms)
        oa1_options = _oa1_options(options, None, secret, compression)
        _session_options(options, password, sasl)
        if ready_timeout is not None:
            oa1_options.setdefault("ready_timeout_ms", _millis(ready_timeout))
        policy = _reconnect_policy(reconnect)
        box: List["IrcDesks"] = []
        first = list(channels)

        async def dial() -> "tuple[Any, asyncio.StreamReader, asyncio.StreamWriter]":
            # A new engine each time, with every desk there is: ids from the OS's entropy, or
            # (tests) from the next seed, so none repeats an earlier one.
            engine_seed = None if seed is None else seed + (box[0].reconnects + 1 if box else 0)
            engine = _oa1.MultiDesk(
                nick,
                seed=engine_seed,
                now_ms=now_ms(),
                chat=chat,
                membership=membership,
                oa1=dict(oa1_options),
                **options,
            )
            added = box[0]._desks if box else {c: (remote_nick, {}) for c in first}
            for channel, (remote, overrides) in added.items():
                engine.add_desk(now_ms(), channel, remote, **overrides)
            reader, writer = await _open(host, port, tls)
            return engine, reader, writer

        engine, reader, writer = await dial()
        desks = cls(engine, reader, writer, chat=chat or membership)
        desks._ready_timeout = ready_timeout
        desks._desks = {c: (remote_nick, {}) for c in first}
        box.append(desks)
        if policy is not None:
            desks._reconnect_with(dial, policy)
        try:
            await desks.wait_ready(ready_timeout)
            await asyncio.gather(*(desks.wait_desk_ready(c, ready_timeout) for c in first))
        except BaseException:
            await desks.close()
            raise
        return desks

    # The pump's events.

    def _event(self, event: Any) -> None:
        if isinstance(event, _CHAT_TYPES):
            if len(self._inbox) >= MAX_CHAT:
                self._inbox.popleft()
                self._dropped += 1
            self._inbox.append(event)
            self._inbox_wake.set()
            return
        if not isinstance(event, oa1.ChannelEvent):
            super()._event(event)
            return
        inner = event.event
        if isinstance(inner, (oa1.Response, oa1.Failed)):
            self._settle(inner)
            return
        if isinstance(inner, irc.JoinFailed) and (event.channel or inner.channel) in self._desks:
            # Raised by whoever waits for that desk (the engine tries the join again later).
            self._refused[event.channel or inner.channel] = inner
        if event.channel is None and not isinstance(inner, irc.JoinFailed):
            if isinstance(inner, irc.Registered):
                self._attempt = 0
                if not self._ready.done():
                    self._ready.set_result(None)
            # The connection's own (refused nicks, the end of the link): the base class's.
            super()._event(inner)
        elif len(self.events) < 256:
            self.events.append(event)
        self._notify()

    def _notify(self) -> None:
        """Wakes whoever waits for a desk's state to change."""
        if not self._changed.done():
            self._changed.set_result(None)
        self._changed = asyncio.get_running_loop().create_future()

    def _end(self) -> None:
        super()._end()
        self._notify()
        self._inbox_wake.set()  # a chat iterator ends with the connection

    def _waiting_for(self) -> str:
        state = self.state
        if state in ("closed", "reconnecting"):
            return "a connection to the server"
        return f"the server's welcome ({state})"

    # Desks.

    def channels(self) -> List[str]:
        """The desks' channels, as added, in the order they were."""
        return list(self._desks)

    async def add_desk(
        self,
        channel: str,
        remote: str = "rexd",
        *,
        secret: Union[str, bytes, None] = None,
        oa1: Optional[Mapping[str, Any]] = None,
        ready_timeout: Optional[float] = 30,
    ) -> None:
        """Adds a desk in ``channel`` whose remote is ``remote`` (a nick, a ``nick!user@host``
        mask, or ``"*"`` for anyone in the channel), joins the channel and waits (at most
        ``ready_timeout`` seconds; ``None``: not at all) until the remote is there too.
        ``secret`` authenticates this desk's frames (its remote needs the same; ``str`` or UTF-8
        ``bytes``, as :meth:`IrcDesk.connect`'s); ``oa1`` holds
        settings of its own (``{"request_timeout_ms": 60000}``), over the connection's.

        Raises :class:`deskwire.LocalError` at once for a channel the connection carries
        already (code ``duplicate_channel``) or one the server would refuse
        (``invalid_config``); :class:`deskwire.NotReadyError` or
        :class:`deskwire.JoinFailedError` when the desk does not get ready in time, and then
        the desk is removed again. Requests to a desk not yet ready wait inside, up to the
        connection's ``ready_timeout``."""
        overrides: Dict[str, Any] = dict(oa1 or {})
        auth = _auth(secret)
        if auth is not None:
            overrides.setdefault("auth", auth)
        if self._ended.done():
            raise ClosedError("closed", "the connection is closed")
        # The engine checks the channel (a duplicate, a bad name) before anything is kept.
        self._engine.add_desk(now_ms(), channel, remote, **overrides)
        self._desks[channel] = (remote, overrides)
        self._refused.pop(channel, None)
        self._pump.kick()
        if ready_timeout is None:
            return
        try:
            await self.wait_desk_ready(channel, ready_timeout)
        except BaseException:
            self.remove_desk(channel)
            raise

    def remove_desk(self, channel: str) -> bool:
        """Leaves ``channel`` and drops its desk: its requests in flight fail with
        :class:`deskwire.DisconnectedError`. ``False`` when there is no such desk."""
        if self._engine.closed:
            removed = self._desks.pop(channel, None) is not None
        else:
            removed = bool(self._engine.remove_desk(now_ms(), channel))
            # The engine compares names as the server does: keep what it still carries.
            carried = set(self._engine.channels())
            for name in [n for n in self._desks if n not in carried]:
                del self._desks[name]
                self._refused.pop(name, None)
            self._pump.kick()
        self._notify()
        return removed

    def channel_state(self, channel: str) -> str:
        """Where the desk in ``channel`` stands: ``"registering"``, ``"joining"``,
        ``"waiting_for_peer"`` (its remote is not in the channel), ``"ready"``, ``"closed"``;
        ``"reconnecting"`` between two connections. :class:`deskwire.UnknownChannelError` for
        a channel that is not a desk's."""
        self._known(channel)
        if self._engine.closed or _session_over(self._engine):
            return "reconnecting" if self._reconnecting() else "closed"
        return str(self._engine.channel_state(channel))

    def _known(self, channel: str) -> None:
        """Raises :class:`deskwire.UnknownChannelError` unless ``channel`` is a desk's."""
        if self._engine.closed:
            if channel not in self._desks:
                raise UnknownChannelError(
                    "unknown_channel", f"{channel} is not one of this connection's channels"
                )
        else:
            self._engine.in_flight(channel)  # raises for a channel the engine does not carry

    async def wait_desk_ready(self, channel: str, timeout: Optional[float] = 30) -> None:
        """Waits until the desk in ``channel`` is ready: the connection registered, the channel
        joined and its remote there. Raises :class:`deskwire.NotReadyError` (a
        :class:`TimeoutError`) after ``timeout`` seconds, saying what it waited for;
        :class:`deskwire.JoinFailedError` with the server's words when it refuses the channel;
        :class:`deskwire.DisconnectedError` when the connection ends;
        :class:`deskwire.UnknownChannelError` for a channel that is not a desk's."""
        timeout = _seconds(timeout, "ready_timeout")
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        self._known(channel)
        while True:
            if self._ended.done():
                raise DisconnectedError("disconnected", "the IRC connection closed")
            refused = self._refused.pop(channel, None)
            if refused is not None:
                raise refused.exception()
            try:
                state = self.channel_state(channel)
            except UnknownChannelError:
                raise DisconnectedError(
                    "disconnected", f"the desk in {channel} was removed"
                ) from None
            if state == "ready":
                return
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                assert timeout is not None
                said = None if self._engine.closed else self._engine.waiting_for(channel)
                raise NotReadyError(
                    "not_ready",
                    f"not ready after {_duration(timeout)}: waiting for "
                    f"{said or self._waiting_for()}",
                )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._changed), remaining)

    def in_flight(self, channel: str) -> int:
        """Requests of the desk in ``channel`` sent and not yet answered."""
        self._known(channel)
        return 0 if self._engine.closed else int(self._engine.in_flight(channel))

    def members(self, channel: str) -> List[str]:
        """The other members of the desk's channel, as the server wrote their nicks."""
        self._known(channel)
        return [] if self._engine.closed else list(self._engine.members(channel))

    def waiting_for(self, channel: str) -> Optional[str]:
        """What the desk's requests wait for before they can leave, in words (``remote `rexd`
        in #desk-1``), or ``None`` when they can leave now."""
        self._known(channel)
        if self._engine.closed:
            return self._waiting_for()
        said = self._engine.waiting_for(channel)
        return None if said is None else str(said)

    def tool_description(self, channel: str) -> str:
        """The ``RemoteBash`` description for the desk in ``channel``, to give its model in
        place of :data:`deskwire.oa1.TOOL_DESCRIPTION`: its output budget follows the pacing
        the desks share."""
        self._known(channel)
        if self._engine.closed:
            return oa1.TOOL_DESCRIPTION
        return str(self._engine.tool_description(channel))

    def channel_stats(self, channel: str) -> Dict[str, int]:
        """The OA1 counters of the desk in ``channel`` (``requests``, ``responses``,
        ``frames_in``, ...); after :meth:`close`, the last ones."""
        return dict(self._engine.channel_stats(channel))

    def stats(self) -> Dict[str, Any]:
        """The counters: ``{"irc": {...}, "desks": {channel: {...}, ...}}``, the IRC session's
        and each desk's OA1 counters; after :meth:`close`, the last ones."""
        desks: Dict[str, Any] = {}
        for channel in self._desks:
            with contextlib.suppress(LocalError):
                desks[channel] = dict(self._engine.channel_stats(channel))
        return {"irc": dict(self._engine.irc_stats()), "desks": desks}

    # Requests.

    async def request(
        self, channel: str, payload: Union[str, bytes], *, timeout: Optional[float] = None
    ) -> str:
        """Sends ``payload`` (``str``, or UTF-8 ``bytes``) to the remote of the desk in
        ``channel`` and returns the whole response text. ``timeout`` and what it raises are
        :meth:`IrcDesk.request`'s; a channel that is not a desk's raises
        :class:`deskwire.UnknownChannelError` before anything is sent, and a desk removed
        while its request is in flight :class:`deskwire.DisconnectedError`."""
        timeout = _seconds(timeout)
        timeout_ms = None if timeout is None else _millis(timeout)
        return await self._call_in(
            channel, lambda now: self._engine.request(now, channel, payload, timeout_ms)
        )

    async def remote_bash(self, channel: str, command: str, timeout: Optional[float] = 30) -> str:
        """Runs ``command`` through ``RemoteBash`` on the remote of the desk in ``channel`` and
        returns its combined output; ``timeout`` in seconds, starting when the request can
        leave. Raises as :meth:`request`."""
        timeout = _seconds(timeout)
        return await self._call_in(
            channel, lambda now: self._engine.remote_bash(now, channel, command, timeout)
        )

    async def run_tool(self, channel: str, call: Dict[str, Any]) -> Dict[str, Any]:
        """Runs a model's ``RemoteBash`` call on the desk in ``channel`` and gives its result
        for :func:`deskwire.tools.tool_results`, as :meth:`IrcDesk.run_tool` does: wrong
        arguments and failed requests are error results the model reads; misuse (an unknown
        channel, a closed connection, not a ``RemoteBash`` call) raises."""
        if not isinstance(call, dict) or call.get("name") != oa1.TOOL_NAME:
            name = call.get("name") if isinstance(call, dict) else call
            raise LocalError("invalid_value", f"run_tool runs {oa1.TOOL_NAME} calls, not {name!r}")
        call_id = str(call.get("id", ""))
        args = call.get("args", {})
        try:
            output = await self._call_in(
                channel, lambda now: self._engine.remote_bash_call(now, channel, args)
            )
        except (LocalError, RemoteError) as e:
            if isinstance(e, LocalError) and e.code != "invalid_arguments":
                raise
            return tools.result(call_id, oa1.remote_bash_failure(e.code, e.message), is_error=True)
        return tools.result(call_id, output)

    def _call_in(self, channel: str, start: Callable[[int], str]) -> Awaitable[str]:
        """A request in ``channel``, a cancelled wait cancelling it there."""
        return self._call(
            start, lambda now, request_id: self._engine.cancel(now, channel, request_id, "cancelled")
        )

    # Chat.

    def chat(self) -> AsyncIterator[oa1.ChatEvent]:
        """The desk channels' chat and membership changes, in the order their lines came:
        :class:`deskwire.oa1.ChatMessage` (``chat=True``) and
        :class:`deskwire.oa1.MemberJoined`, ``MemberParted``, ``MemberKicked``, ``MemberQuit``,
        ``MemberRenamed``, ``MemberNames`` (``membership=True``)::

            async for item in desks.chat():
                if isinstance(item, oa1.ChatMessage) and item.kind == "privmsg":
                    desks.send_text(item.channel, f"{item.nick}: on it")

        Ends when the connection does. Messages wait for it from the connect on (at most
        1024, the oldest dropped and counted in :attr:`chat_dropped`); with more than one
        iterator, each message goes to one of them. :class:`deskwire.LocalError` when the
        connection was made without ``chat=True`` or ``membership=True``."""
        if not self._chat_on:
            raise LocalError(
                "invalid_state",
                "connect with chat=True (messages) or membership=True (joins, parts, quits)",
            )
        return self._chat_items()

    async def _chat_items(self) -> AsyncIterator[oa1.ChatEvent]:
        while True:
            while self._inbox:
                yield self._inbox.popleft()
            if self._ended.done():
                return
            self._inbox_wake.clear()
            await self._inbox_wake.wait()

    @property
    def chat_dropped(self) -> int:
        """Chat messages and membership changes dropped because :meth:`chat` did not take them
        (here and in the engine)."""
        engine = 0 if self._engine.closed else int(self._engine.chat_dropped)
        return self._dropped + engine

    def send_text(self, channel: str, text: str, notice: bool = False) -> int:
        """Says ``text`` in ``channel`` (as ``NOTICE``s with ``notice``): cut at spaces, or at
        character boundaries, into lines that fit, never a line starting with ``OA1 ``, and sent
        through the pacing the desks share, in turn with their OA1 lines, once the channel is
        joined. Returns the number of lines. Raises, with nothing sent:
        :class:`deskwire.UnknownChannelError`, :class:`deskwire.ReservedPrefixError` (text
        starting with ``OA1 ``), :class:`deskwire.EmptyTextError`,
        :class:`deskwire.ForbiddenByteError` (NUL, CR or LF), :class:`deskwire.QueueFullError`
        (64 KiB wait for the channel already), :class:`deskwire.ClosedError`."""
        if self._engine.closed:
            raise ClosedError("closed", "the connection is closed")
        lines = int(self._engine.send_text(channel, text, notice))
        self._pump.kick()
        return lines
