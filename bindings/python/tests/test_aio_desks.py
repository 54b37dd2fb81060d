"""deskwire.aio.IrcDesks over a real ngircd: many desks on one IRC connection against one
``rexd --irc`` serving many channels on one connection (50 desks asking at once, each getting
only its own answer), desks added and removed at run time, unknown channels; channel chat and
membership as an async iterator, against a second IRC client speaking raw IRC over a socket."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable, Iterator, List, Optional, Type, TypeVar

import pytest

import deskwire
from deskwire import oa1
from deskwire.aio import IrcDesks, IrcRemote, Reconnect

from peers import Ngircd, RexdIrc

# Pacing off on both sides and flood penalties off in ngircd: this is about which answer goes
# to which desk, not about flood protection.
FAST = ["--pacing-interval-ms", "0", "--pacing-burst", "1000000", "--timeout-sec", "60"]
UNPACED = {"pacing": {"burst": 1_000_000, "interval_ms": 0}}
# A bound on every wait here, so that a test that goes wrong ends; never an assertion.
WAIT = 30.0

T = TypeVar("T")


def rexd_for(port: int, channels: List[str]) -> RexdIrc:
    """One ``rexd --irc`` on one connection serving every channel of ``channels``."""
    more = [arg for channel in channels[1:] for arg in ("--channel", channel)]
    return RexdIrc(port, *FAST, *more, channel=channels[0])


@pytest.fixture
def server() -> Iterator[Ngircd]:
    s = Ngircd(penalties=False, max_joins=0)
    yield s
    s.stop()


class RawIrc:
    """A plain IRC client over an asyncio socket, for the other side of the chat: it registers,
    answers ``PING``, and reads lines until one fits."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.seen: List[str] = []

    @classmethod
    async def connect(cls, port: int, nick: str) -> "RawIrc":
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        raw = cls(reader, writer)
        await raw.send(f"NICK {nick}", f"USER {nick} 0 * :raw test client")
        await raw.expect(lambda line: line.split(" ")[1:2] == ["001"])
        return raw

    async def send(self, *lines: str) -> None:
        for line in lines:
            self.writer.write(line.encode() + b"\r\n")
        await self.writer.drain()

    async def expect(self, fits: Callable[[str], bool]) -> str:
        """The next line that ``fits`` (each line read is kept in ``seen``)."""

        async def read() -> str:
            while True:
                data = await self.reader.readline()
                if not data:
                    raise ConnectionError(f"the server closed the connection; seen: {self.seen[-5:]}")
                line = data.decode("utf-8", "replace").rstrip("\r\n")
                if line.startswith("PING "):
                    await self.send("PONG " + line[5:])
                    continue
                self.seen.append(line)
                if fits(line):
                    return line

        return await asyncio.wait_for(read(), WAIT)

    async def join(self, channel: str) -> None:
        await self.send(f"JOIN {channel}")
        # 366: the end of the NAMES list, after the join.
        await self.expect(lambda line: line.split(" ")[1:2] == ["366"])

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


def text_of(line: str) -> str:
    """The trailing parameter of a raw line."""
    return line.split(" :", 1)[1] if " :" in line else line.rsplit(" ", 1)[-1]


async def next_of(items: AsyncIterator[oa1.ChatEvent], kind: Type[T],
                  fits: Callable[[T], bool] = lambda _: True) -> T:
    """The next item of ``kind`` that ``fits`` (items of other kinds are passed over)."""

    async def find() -> T:
        async for item in items:
            if isinstance(item, kind) and fits(item):
                return item
        raise AssertionError(f"the chat ended before a {kind.__name__}")

    return await asyncio.wait_for(find(), WAIT)


async def test_fifty_desks_on_one_connection_each_get_only_their_own_answer(server: Ngircd) -> None:
    channels = [f"#desk-{i}" for i in range(50)]
    rexd = rexd_for(server.port, channels)
    try:
        async with await IrcDesks.connect(
            "127.0.0.1", server.port, channels=channels, oa1=UNPACED, ready_timeout=60
        ) as desks:
            assert desks.channels() == channels
            assert all(desks.channel_state(c) == "ready" for c in channels)
            # Every desk asks at once; each command's output names its channel.
            answers = await asyncio.gather(
                *(desks.remote_bash(c, f"echo 'answer for {c}'", timeout=60) for c in channels)
            )
            assert answers == [f"answer for {c}\n" for c in channels]
            stats = desks.stats()
            assert sorted(stats["desks"]) == sorted(channels)
            for channel in channels:
                assert desks.in_flight(channel) == 0
                # Each desk sent one request and read its own answer: frames out and in.
                assert stats["desks"][channel]["frames_out"] >= 1
                assert stats["desks"][channel]["frames_in"] >= 1
            # A second round on a few desks, in reverse order, still goes to the right ones.
            some = channels[::-7]
            again = await asyncio.gather(*(desks.request(c, f"echo '{c} again'") for c in some))
            assert again == [f"{c} again\n" for c in some]
        # One rexd on one connection served them all.
        assert rexd.process.poll() is None
        assert rexd.text().count("joined") >= 1
    finally:
        rexd.stop()


async def test_desks_come_and_go_at_run_time(server: Ngircd) -> None:
    rexd = rexd_for(server.port, ["#a", "#b", "#c"])
    try:
        async with await IrcDesks.connect("127.0.0.1", server.port, oa1=UNPACED) as desks:
            assert desks.channels() == []
            assert desks.state == "ready"
            await desks.add_desk("#a", "rexd")
            assert await desks.remote_bash("#a", "echo a") == "a\n"
            await desks.add_desk("#b", "rexd", oa1={"request_timeout_ms": 45_000})
            assert desks.channels() == ["#a", "#b"]
            assert await desks.remote_bash("#b", "echo b") == "b\n"

            # A desk removed: its requests in flight fail, new ones are refused.
            sleeping = asyncio.ensure_future(desks.remote_bash("#b", "sleep 30", timeout=60))
            for _ in range(500):
                if desks.in_flight("#b") == 1 and "sleep 30" in rexd.text():
                    break
                await asyncio.sleep(0.02)
            assert desks.remove_desk("#b") is True
            with pytest.raises(deskwire.DisconnectedError):
                await asyncio.wait_for(sleeping, WAIT)
            assert desks.channels() == ["#a"]
            assert desks.remove_desk("#b") is False
            with pytest.raises(deskwire.UnknownChannelError) as caught:
                await desks.remote_bash("#b", "echo b")
            assert caught.value.code == "unknown_channel" and "#b" in caught.value.message

            # A round trip on #a first, so that the server has answered the PART of #b before
            # its JOIN goes out: the core applies a PART echo that comes after the channel was
            # added again to the new desk, which then waits for a remote it has forgotten
            # (reported to the lead; not a binding's rule to work around).
            assert await desks.remote_bash("#a", "echo a") == "a\n"
            # Added again, and another beside it: both answer, #a still does.
            await desks.add_desk("#b", "rexd")
            await desks.add_desk("#c", "rexd")
            assert await asyncio.gather(
                desks.remote_bash("#a", "echo a"),
                desks.remote_bash("#b", "echo b"),
                desks.remote_bash("#c", "echo c"),
            ) == ["a\n", "b\n", "c\n"]

            # A desk whose remote never comes: not ready in time, and not kept.
            with pytest.raises(deskwire.NotReadyError) as not_ready:
                await desks.add_desk("#nobody", "rexd", ready_timeout=1)
            assert "rexd" in not_ready.value.message
            assert "#nobody" not in desks.channels()
            assert await desks.remote_bash("#c", "echo c") == "c\n"
    finally:
        rexd.stop()


async def test_unknown_channels_and_bad_desks_are_refused(server: Ngircd) -> None:
    rexd = rexd_for(server.port, ["#desk"])
    try:
        async with await IrcDesks.connect(
            "127.0.0.1", server.port, channels=["#desk"], chat=True
        ) as desks:
            for call in (
                lambda: desks.channel_state("#nope"),
                lambda: desks.in_flight("#nope"),
                lambda: desks.members("#nope"),
                lambda: desks.waiting_for("#nope"),
                lambda: desks.tool_description("#nope"),
                lambda: desks.send_text("#nope", "hello"),
            ):
                with pytest.raises(deskwire.UnknownChannelError):
                    call()
            with pytest.raises(deskwire.UnknownChannelError):
                await desks.request("#nope", "echo x")
            with pytest.raises(deskwire.UnknownChannelError):
                await desks.wait_desk_ready("#nope", 1)
            # Unknown is misuse by the caller: a LocalError, not a link failure.
            assert issubclass(deskwire.UnknownChannelError, deskwire.LocalError)
            with pytest.raises(deskwire.LocalError) as duplicate:
                await desks.add_desk("#DESK", "rexd")
            assert duplicate.value.code == "duplicate_channel"
            for channel, remote in (("no-hash", "rexd"), ("#with space", "rexd"), ("#ok", "bad nick")):
                with pytest.raises(deskwire.LocalError) as bad:
                    await desks.add_desk(channel, remote)
                assert bad.value.code == "invalid_config", (channel, remote)
            with pytest.raises(TypeError):
                await desks.add_desk(42, "rexd")  # type: ignore[arg-type]
            with pytest.raises(deskwire.LocalError):
                await desks.remote_bash("#desk", "echo x", timeout=0)
            # A channel the server refuses (invite only): the server's words, and not kept.
            op = await RawIrc.connect(server.port, "op")
            await op.join("#closed")
            await op.send("MODE #closed +i")
            await op.expect(lambda line: " MODE #closed +i" in line)
            with pytest.raises(deskwire.JoinFailedError) as refused:
                await desks.add_desk("#closed", "op")
            assert "473" in refused.value.message
            await op.close()
            assert desks.channels() == ["#desk"]
            # The desk is unharmed by all that.
            assert await desks.remote_bash("#desk", "echo fine") == "fine\n"
            # A timeout longer than the engine counts (in u64 milliseconds) is its longest.
            assert await desks.remote_bash("#desk", "echo long", timeout=1e30) == "long\n"
            assert await desks.request("#desk", "echo longer", timeout=1e30) == "longer\n"
            # The model's call with arguments that are wrong is an error result it reads.
            result = await desks.run_tool("#desk", {"id": "t1", "name": oa1.TOOL_NAME, "args": {}})
            assert result["isError"] is True and "invalid_arguments" in result["content"]
            ok = await desks.run_tool(
                "#desk", {"id": "t2", "name": oa1.TOOL_NAME, "args": {"command": "echo tool"}}
            )
            assert ok == {"callId": "t2", "content": "tool\n"}
        with pytest.raises(deskwire.ClosedError):
            await desks.request("#desk", "echo late")
    finally:
        rexd.stop()


async def test_chat_comes_with_sender_and_kind_beside_oa1(server: Ngircd) -> None:
    rexd = rexd_for(server.port, ["#desk"])
    raw: Optional[RawIrc] = None
    try:
        async with await IrcDesks.connect(
            "127.0.0.1", server.port, channels=["#desk"], chat=True
        ) as desks:
            raw = await RawIrc.connect(server.port, "raw")
            await raw.join("#desk")
            await raw.send(
                "PRIVMSG #desk :hello there, desk",
                "NOTICE #desk :a notice",
                "PRIVMSG #desk :\x01ACTION waves\x01",
                # Neither is chat: a CTCP that is not ACTION, and an OA1 frame (from a sender
                # the desk does not take answers from).
                "PRIVMSG #desk :\x01VERSION\x01",
                "PRIVMSG #desk :OA1 RES abc123 1 0 not for you",
                "PRIVMSG #desk :ünïcödé last one",
            )
            items = desks.chat()
            got = [await next_of(items, oa1.ChatMessage) for _ in range(4)]
            assert [(m.kind, m.text) for m in got] == [
                ("privmsg", "hello there, desk"),
                ("notice", "a notice"),
                ("action", "waves"),
                ("privmsg", "ünïcödé last one"),
            ]
            for message in got:
                assert message.channel == "#desk"
                assert message.sender.startswith("raw!") and message.nick == "raw"
                assert isinstance(message.tags, dict)
            # OA1 goes on beside the chat.
            assert await desks.remote_bash("#desk", "echo beside") == "beside\n"
            assert desks.chat_dropped == 0
    finally:
        if raw is not None:
            await raw.close()
        rexd.stop()


async def test_send_text_arrives_whole_split_at_words(server: Ngircd) -> None:
    rexd = rexd_for(server.port, ["#desk"])
    raw: Optional[RawIrc] = None
    try:
        async with await IrcDesks.connect(
            "127.0.0.1", server.port, channels=["#desk"], chat=True, oa1=UNPACED
        ) as desks:
            raw = await RawIrc.connect(server.port, "raw")
            await raw.join("#desk")
            words = [f"wörd{i}" + "x" * (i % 7) for i in range(400)]
            text = " ".join(words)
            lines = desks.send_text("#desk", text)
            assert lines > 1
            said: List[str] = []
            for _ in range(lines):
                line = await raw.expect(lambda l: " PRIVMSG #desk :" in l and l.startswith(":desk!"))
                assert len(line.encode()) + 2 <= 512
                said.append(text_of(line))
            # Whole, in order, cut only between words.
            assert " ".join(said) == text
            for piece in said:
                assert piece.split(" ")[0] in words and piece.split(" ")[-1] in words
            # A notice, and refusals, each named; nothing of a refused text is sent.
            with pytest.raises(deskwire.ReservedPrefixError) as reserved:
                desks.send_text("#desk", "OA1 REQ abc 1 0 ls")
            assert reserved.value.code == "reserved_prefix"
            assert isinstance(reserved.value, deskwire.ChatError)
            with pytest.raises(deskwire.EmptyTextError):
                desks.send_text("#desk", "   ")
            with pytest.raises(deskwire.ForbiddenByteError):
                desks.send_text("#desk", "two\r\nlines")
            with pytest.raises(deskwire.UnknownChannelError):
                desks.send_text("#elsewhere", "hi")
            with pytest.raises(TypeError):
                desks.send_text("#desk", b"bytes")  # type: ignore[arg-type]
            assert desks.send_text("#desk", "a quiet word", notice=True) == 1
            line = await raw.expect(lambda l: l.startswith(":desk!") and " #desk :" in l)
            assert " NOTICE #desk :a quiet word" in line
            # One text longer than may ever wait is not a full queue: it says to send parts.
            with pytest.raises(deskwire.QueueFullError) as too_long:
                desks.send_text("#desk", "z" * 70_000)
            assert "more than the 65536 that may wait to go to #desk: send it in parts" in too_long.value.message
            # Much more than may wait for the channel: refused, and the connection goes on.
            with pytest.raises(deskwire.QueueFullError) as full:
                for _ in range(100):
                    desks.send_text("#desk", "y" * 2000)
            assert "bytes already wait to go to #desk and the text would add" in full.value.message
            assert await desks.remote_bash("#desk", "echo after", timeout=60) == "after\n"
        with pytest.raises(deskwire.ClosedError):
            desks.send_text("#desk", "too late")
    finally:
        if raw is not None:
            await raw.close()
        rexd.stop()


async def test_membership_joins_parts_renames_kicks_and_quits(server: Ngircd) -> None:
    rexd = rexd_for(server.port, ["#desk"])
    raw: Optional[RawIrc] = None
    try:
        async with await IrcDesks.connect(
            "127.0.0.1", server.port, channels=["#desk"], membership=True
        ) as desks:
            items = desks.chat()
            # Our own join, and the NAMES list after it (rexd was there first).
            own = await next_of(items, oa1.MemberJoined)
            assert (own.channel, own.nick) == ("#desk", "desk")
            names = await next_of(items, oa1.MemberNames)
            assert names.channel == "#desk" and {"desk", "rexd"} <= set(names.nicks)

            raw = await RawIrc.connect(server.port, "raw")
            await raw.join("#desk")
            joined = await next_of(items, oa1.MemberJoined, lambda e: e.nick == "raw")
            assert joined.channel == "#desk"
            await raw.send("PART #desk :back soon")
            parted = await next_of(items, oa1.MemberParted)
            assert (parted.channel, parted.nick, parted.reason) == ("#desk", "raw", "back soon")
            await raw.join("#desk")
            await next_of(items, oa1.MemberJoined, lambda e: e.nick == "raw")
            await raw.send("NICK raw2")
            renamed = await next_of(items, oa1.MemberRenamed)
            assert (renamed.channel, renamed.nick, renamed.new_nick) == ("#desk", "raw", "raw2")

            # In a channel the raw client opened (and so holds op in), it kicks the desk.
            await raw.join("#ops")
            await desks.add_desk("#ops", "raw2")
            await next_of(items, oa1.MemberJoined, lambda e: e.channel == "#ops")
            await raw.send("KICK #ops desk :out you go")
            kicked = await next_of(items, oa1.MemberKicked)
            assert (kicked.channel, kicked.nick, kicked.by, kicked.reason) == (
                "#ops", "desk", "raw2", "out you go")
            assert desks.remove_desk("#ops") is True

            await raw.send("QUIT :gone home")
            quit_ = await next_of(items, oa1.MemberQuit)
            assert (quit_.channel, quit_.nick) == ("#desk", "raw2")
            assert quit_.reason is not None and "gone home" in quit_.reason
            assert await desks.remote_bash("#desk", "echo still") == "still\n"
    finally:
        if raw is not None:
            await raw.close()
        rexd.stop()


async def test_chat_is_opt_in_and_ends_with_the_connection(server: Ngircd) -> None:
    rexd = rexd_for(server.port, ["#desk"])
    try:
        async with await IrcDesks.connect("127.0.0.1", server.port, channels=["#desk"]) as plain:
            with pytest.raises(deskwire.LocalError) as caught:
                plain.chat()
            assert "chat=True" in caught.value.message
        desks = await IrcDesks.connect("127.0.0.1", server.port, channels=["#desk"], chat=True)
        seen: List[Any] = []

        async def read_all() -> None:
            async for item in desks.chat():
                seen.append(item)

        reader = asyncio.ensure_future(read_all())
        raw = await RawIrc.connect(server.port, "raw")
        await raw.join("#desk")
        await raw.send("PRIVMSG #desk :one")
        for _ in range(500):
            if seen:
                break
            await asyncio.sleep(0.02)
        await raw.close()
        await desks.close()
        # The iterator ends with the connection.
        await asyncio.wait_for(reader, WAIT)
        assert [m.text for m in seen if isinstance(m, oa1.ChatMessage)] == ["one"]
    finally:
        rexd.stop()


async def test_each_desk_has_its_own_remote(server: Ngircd) -> None:
    """Two remotes on the same server: rexd in #a, and a Python remote as ``other`` in #b and
    in #a too. The desk of #a takes rexd's answers only, the desk of #b other's."""

    async def handler(request: oa1.Request) -> str:
        return f"other ran {request.payload}"

    rexd = rexd_for(server.port, ["#a"])
    other_b = await IrcRemote.connect("127.0.0.1", server.port, handler, nick="other",
                                      channel="#b")
    other_a = await IrcRemote.connect("127.0.0.1", server.port, handler, nick="other_a",
                                      channel="#a", desk_nick="*")
    try:
        async with await IrcDesks.connect("127.0.0.1", server.port, oa1=UNPACED) as desks:
            await desks.add_desk("#a", "rexd")
            await desks.add_desk("#b", "other")
            # other_a answers in #a too (it serves anyone), but #a's desk takes rexd's answer.
            a, b = await asyncio.gather(
                desks.remote_bash("#a", "echo from rexd"), desks.request("#b", "echo hi")
            )
            assert (a, b) == ("from rexd\n", "other ran echo hi")
            assert desks.channel_stats("#a")["disallowed_sender"] >= 1
            assert sorted(desks.members("#a")) == ["other_a", "rexd"]
    finally:
        await other_a.close()
        await other_b.close()
        rexd.stop()


async def test_every_desk_comes_back_after_the_server_restarts(server: Ngircd) -> None:
    rexd = rexd_for(server.port, ["#a", "#b"])
    try:
        async with await IrcDesks.connect(
            "127.0.0.1", server.port, channels=["#a"], chat=True,
            reconnect=Reconnect(min_delay=0.05, max_delay=0.5),
        ) as desks:
            await desks.add_desk("#b", "rexd")  # added at run time: it comes back too
            assert await desks.remote_bash("#b", "echo b") == "b\n"
            in_flight = asyncio.ensure_future(desks.remote_bash("#a", "sleep 30", timeout=60))
            for _ in range(500):
                if "sleep 30" in rexd.text():
                    break
                await asyncio.sleep(0.02)
            await asyncio.get_running_loop().run_in_executor(None, server.restart)
            with pytest.raises(deskwire.DisconnectedError):
                await asyncio.wait_for(in_flight, WAIT)
            # New requests wait for the next connection, and for rexd to be back in each channel.
            assert await asyncio.gather(
                desks.remote_bash("#a", "echo a", timeout=60),
                desks.remote_bash("#b", "echo b", timeout=60),
            ) == ["a\n", "b\n"]
            assert desks.reconnects >= 1
            assert desks.channels() == ["#a", "#b"]
            assert [desks.channel_state(c) for c in ("#a", "#b")] == ["ready", "ready"]
    finally:
        rexd.stop()


async def test_desks_with_a_secret(server: Ngircd, tmp_path: Any) -> None:
    """Authenticated frames: the connection's secret for the desks made with it, and one given
    to a desk of its own; a desk holding another secret gets no answer from rexd."""
    secret = "a secret the desks and rexd share"
    path = tmp_path / "desk.secret"
    path.write_text(secret + "\n")
    path.chmod(0o600)
    rexd = RexdIrc(server.port, *FAST, "--channel", "#b", "--channel", "#c",
                   "--secret-file", str(path), channel="#a")
    try:
        async with await IrcDesks.connect(
            "127.0.0.1", server.port, channels=["#a"], secret=secret
        ) as desks:
            assert await desks.remote_bash("#a", "echo signed") == "signed\n"
            await desks.add_desk("#b", "rexd", secret=secret)
            assert await desks.remote_bash("#b", "echo own secret") == "own secret\n"
            await desks.add_desk("#c", "rexd", secret="not the one rexd holds")
            with pytest.raises(deskwire.RequestTimeout):
                await desks.remote_bash("#c", "echo never", timeout=2)
        assert "#c" in rexd.text()  # rexd logs the frame it refused, and where
    finally:
        rexd.stop()


def test_the_engine_refuses_bad_input() -> None:
    """``oa1.MultiDesk`` itself, without a server: what a host gets wrong is an exception
    naming it, never a crash, and a closed engine says so."""
    with pytest.raises(deskwire.LocalError) as bad_nick:
        oa1.MultiDesk("bad nick")
    assert bad_nick.value.code == "invalid_config"
    with pytest.raises(deskwire.LocalError):
        oa1.MultiDesk("npcs", channel="#desk")  # desks come from add_desk
    with pytest.raises(deskwire.LocalError):
        oa1.MultiDesk("npcs", oa1={"request_timeout_ms": "soon"})
    with pytest.raises(TypeError):
        oa1.MultiDesk(7)  # type: ignore[arg-type]
    desks = oa1.MultiDesk("npcs", seed=3, chat=True)
    desks.add_desk(0, "#a", "rexd", request_timeout_ms=1000)
    with pytest.raises(deskwire.LocalError) as bad_override:
        desks.add_desk(0, "#b", "rexd", request_timeout_ms=-5)
    assert bad_override.value.code == "invalid_value"
    with pytest.raises(deskwire.LocalError):
        desks.add_desk(0, "#c", "account:rexd")  # a desk's remote is a nick
    assert desks.channels() == ["#a"]
    with pytest.raises(TypeError):
        desks.request(0, "#a", 42)  # type: ignore[arg-type]
    with pytest.raises(deskwire.LocalError):
        desks.request(0, "#a", b"\xff not utf-8")
    with pytest.raises(deskwire.LocalError) as bad_args:
        desks.remote_bash_call(0, "#a", {"cmd": "ls"})
    assert bad_args.value.code == "invalid_arguments"
    with pytest.raises(deskwire.UnknownChannelError):
        desks.cancel(0, "#zz", "abc", "why")
    with pytest.raises(deskwire.LocalError):
        desks.cancel(0, "#a", "no-such-id", "why")
    request_id = desks.request(0, "#a", "uname -a")
    assert desks.in_flight("#a") == 1
    # Before registration only NICK and USER go out; the request waits for its remote.
    data, events, deadline = desks.drain(0)
    assert data.startswith(b"NICK npcs\r\nUSER npcs ") and b"uname" not in data
    assert deadline > 0 and all(isinstance(e, oa1.ChannelEvent) for e in events)
    # A server's welcome and the desk's channel, fed as bytes: the events name their channel.
    desks.handle_bytes(1, b":irc.test 001 npcs :Welcome\r\n:npcs!u@h JOIN #a\r\n"
                          b":irc.test 353 npcs = #a :npcs\r\n:irc.test 366 npcs #a :End\r\n"
                          b":someone!u@h PRIVMSG #a :hi there\r\n")
    _, events, _ = desks.drain(2)
    assert oa1.ChannelEvent(channel="#a", event=deskwire.irc.Joined(channel="#a")) in events
    chat = [e for e in events if isinstance(e, oa1.ChatMessage)]
    assert chat == [oa1.ChatMessage(channel="#a", sender="someone!u@h", kind="privmsg",
                                    text="hi there", tags={})]
    assert desks.channel_state("#a") == "waiting_for_peer"
    assert "rexd" in (desks.waiting_for("#a") or "")
    desks.close()
    assert desks.closed and desks.state == "closed"
    assert desks.channel_stats("#a")["bytes_buffered"] > 0  # the last counters stay readable
    for call in (lambda: desks.request(0, "#a", "x"), lambda: desks.poll_output(0),
                 lambda: desks.send_text("#a", "hi"), lambda: desks.add_desk(0, "#d", "rexd")):
        with pytest.raises(deskwire.ClosedError):
            call()
    assert request_id
