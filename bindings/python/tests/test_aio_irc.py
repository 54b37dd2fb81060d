"""deskwire.aio over a real ngircd: IrcDesk against ``rexd --irc`` (RemoteBash of 16 KiB and
64 KiB byte for byte, cancellation, timeout) and IrcDesk against IrcRemote (streamed output,
the remote's handler cancelled by CANCEL)."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import AsyncIterator, Iterator, List

import pytest

import deskwire
from deskwire import irc, oa1
from deskwire.aio import IrcDesk, IrcDesks, IrcRemote, Reconnect

from peers import Ngircd, RexdIrc

# Pacing and penalties off for the data-heavy cases, as the Rust ngircd tests do: this is
# about bytes arriving whole, not about flood protection.
FAST = ["--pacing-interval-ms", "0", "--pacing-burst", "1000000", "--timeout-sec", "60"]


@pytest.fixture
def server() -> Iterator[Ngircd]:
    s = Ngircd(penalties=False)
    yield s
    s.stop()


@pytest.fixture
def rexd_irc(server: Ngircd) -> Iterator[RexdIrc]:
    r = RexdIrc(server.port, *FAST)
    yield r
    r.stop()


def mixed_utf8(size: int) -> bytes:
    """``size`` bytes of valid UTF-8 mixing ASCII, 2-, 3- and 4-byte sequences, tabs, newlines
    and backslashes (what OA1 escapes)."""
    piece = "line\tä\\n — €𝄞 ok\n".encode()
    out = (piece * (size // len(piece) + 1))[:size]
    while True:  # cut back to a whole character
        try:
            out.decode()
            break
        except UnicodeDecodeError:
            out = out[:-1] + b"."
    assert len(out) == size
    return out


@pytest.mark.parametrize("compression", [True, False])
@pytest.mark.parametrize("size", [16 * 1024, 64 * 1024])
async def test_remote_bash_sizes_byte_for_byte(
    server: Ngircd, rexd_irc: RexdIrc, size: int, compression: bool
) -> None:
    data = mixed_utf8(size)
    path = Path(rexd_irc.dir) / f"out-{size}.txt"
    path.write_bytes(data)
    async with await IrcDesk.connect(
        "127.0.0.1", server.port, nick="desk", compression=compression
    ) as desk:
        text = await desk.remote_bash(f"cat {path}", timeout=60)
        assert text.encode() == data
        oa1 = desk.stats()["oa1"]
        if compression:  # the default: the repetitive text comes deflated, in a frame or two
            assert oa1["compressed_in"] == 1 and oa1["frames_in"] < size // 512
        else:
            assert oa1["compressed_in"] == 0 and oa1["frames_in"] > size // 512


async def test_cancel_sends_cancel(server: Ngircd, rexd_irc: RexdIrc) -> None:
    async with await IrcDesk.connect("127.0.0.1", server.port) as desk:
        task = asyncio.ensure_future(desk.remote_bash("sleep 30", timeout=60))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(250):
            if "cancelled" in rexd_irc.text():
                break
            await asyncio.sleep(0.02)
        assert "cancelled" in rexd_irc.text()
        assert desk.stats()["oa1"]["cancels"] == 1
        # The desk still works afterwards.
        assert await desk.remote_bash("echo still here", timeout=30) == "still here\n"


async def test_timeout_raises_timeout_error(server: Ngircd, rexd_irc: RexdIrc) -> None:
    async with await IrcDesk.connect("127.0.0.1", server.port) as desk:
        with pytest.raises(TimeoutError) as caught:
            await desk.remote_bash("sleep 30", timeout=1)
        assert isinstance(caught.value, deskwire.RequestTimeout)
        assert caught.value.code == "timeout"


async def test_remote_error_is_remote_error(server: Ngircd) -> None:
    async def handler(request: oa1.Request) -> str:
        raise ValueError(f"no {request.payload}")

    remote = await IrcRemote.connect("127.0.0.1", server.port, handler)
    async with remote, await IrcDesk.connect("127.0.0.1", server.port) as desk:
        with pytest.raises(deskwire.RemoteError) as caught:
            await desk.request("thing", timeout=10)
        assert caught.value.code == "error"
        assert "no thing" in caught.value.message


async def test_irc_remote_streams_a_process_s_bytes(server: Ngircd) -> None:
    """A handler yielding a real process's stdout as read, 3 bytes at a time: multibyte
    characters cut between reads arrive whole, and a byte that is not UTF-8 becomes U+FFFD."""

    async def handler(request: oa1.Request) -> AsyncIterator[bytes]:
        process = await asyncio.create_subprocess_exec(
            "printf", request.payload, stdout=asyncio.subprocess.PIPE
        )
        assert process.stdout is not None
        while chunk := await process.stdout.read(3):
            yield chunk
        await process.wait()

    async def whole(request: oa1.Request) -> bytes:
        return b"caf\xc3\xa9 \xff"

    remote = await IrcRemote.connect("127.0.0.1", server.port, handler)
    async with remote, await IrcDesk.connect("127.0.0.1", server.port) as desk:
        text = await desk.request(r"d\303\251j\340\244\271 \360\235\204\236 \377 vu\303", timeout=30)
        assert text == "déjह 𝄞 \ufffd vu\ufffd"
        # The request itself may be bytes too.
        assert await desk.request("ä".encode(), timeout=30) == "ä"
    other = await IrcRemote.connect("127.0.0.1", server.port, whole, nick="deskbot2")
    async with other, await IrcDesk.connect("127.0.0.1", server.port, remote_nick="deskbot2") as desk:
        assert await desk.request("x", timeout=30) == "café \ufffd"


async def test_irc_remote_streams_and_sees_cancel(server: Ngircd) -> None:
    started = asyncio.Event()
    stopped: List[str] = []

    async def handler(request: oa1.Request) -> AsyncIterator[str]:
        if request.payload == "forever":
            started.set()
            try:
                while True:
                    yield "tick\n"
                    await asyncio.sleep(0.05)
            finally:
                stopped.append(request.id)
        else:
            for i in range(200):
                yield f"{i}: {request.payload}\n"

    remote = await IrcRemote.connect("127.0.0.1", server.port, handler,
                                     oa1={"pacing": {"burst": 1000000, "interval_ms": 0}})
    async with remote, await IrcDesk.connect("127.0.0.1", server.port) as desk:
        text = await desk.request("héllo", timeout=30)
        assert text == "".join(f"{i}: héllo\n" for i in range(200))

        task = asyncio.ensure_future(desk.request("forever", timeout=60))
        await asyncio.wait_for(started.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(250):
            if stopped:
                break
            await asyncio.sleep(0.02)
        assert len(remote.cancelled) == 1
        assert stopped == [remote.cancelled[0].id]


@pytest.fixture
def secret_rexd(server: Ngircd, tmp_path: Path) -> Iterator[RexdIrc]:
    (tmp_path / "secret").write_text("s3cret shared by desk and remote\n")
    (tmp_path / "secret").chmod(0o600)  # rexd refuses a secret others may read
    r = RexdIrc(server.port, *FAST, "--secret-file", str(tmp_path / "secret"))
    yield r
    r.stop()


async def test_authenticated_exchange(server: Ngircd, secret_rexd: RexdIrc) -> None:
    async with await IrcDesk.connect("127.0.0.1", server.port, secret="s3cret shared by desk and remote") as desk:
        assert await desk.remote_bash("echo signed", timeout=30) == "signed\n"
        assert desk.stats()["oa1"]["forged"] == 0
    # A desk with the wrong secret gets no answer: its frames are dropped as forged.
    async with await IrcDesk.connect("127.0.0.1", server.port, nick="desk", secret="wrong") as desk:
        with pytest.raises(deskwire.RequestTimeout):
            await desk.remote_bash("echo never", timeout=2)


async def test_compressed_exchange(server: Ngircd, rexd_irc: RexdIrc) -> None:
    data = ("compressible line of output\n" * 2000).encode()
    path = Path(rexd_irc.dir) / "big.txt"
    path.write_bytes(data)
    async with await IrcDesk.connect("127.0.0.1", server.port, compression=True) as desk:
        text = await desk.remote_bash(f"cat {path}", timeout=60)
        assert text.encode() == data
        stats = desk.stats()["oa1"]
        assert stats["compressed_in"] > 0
        # Far fewer frames than the plain text needs at 240 bytes each.
        assert stats["frames_in"] < len(data) // 240 // 4


async def test_irc_remote_with_secret_and_compression(server: Ngircd) -> None:
    async def handler(request: oa1.Request) -> str:
        return request.payload * 500

    remote = await IrcRemote.connect("127.0.0.1", server.port, handler, secret="k", compression=True,
                                     oa1={"pacing": {"burst": 1000000, "interval_ms": 0}})
    async with remote, await IrcDesk.connect("127.0.0.1", server.port, secret="k", compression=True) as desk:
        assert await desk.request("abc ", timeout=30) == "abc " * 500
        assert desk.stats()["oa1"]["compressed_in"] > 0


async def test_desk_and_remote_come_back_after_the_server_restarts(server: Ngircd) -> None:
    policy = Reconnect(min_delay=0.05, max_delay=0.5)

    async def handler(request: oa1.Request) -> str:
        if request.payload == "slow":
            await asyncio.sleep(60)
        return request.payload.upper()

    remote = await IrcRemote.connect("127.0.0.1", server.port, handler, reconnect=policy)
    desk = await IrcDesk.connect("127.0.0.1", server.port, reconnect=policy)
    try:
        assert await desk.request("before", timeout=10) == "BEFORE"
        in_flight = asyncio.ensure_future(desk.request("slow", timeout=60))
        await asyncio.sleep(0.2)
        await asyncio.get_running_loop().run_in_executor(None, server.restart)
        # What was in flight is lost with the connection: it fails at once, saying so, as a
        # fault of the link (not the caller's misuse).
        with pytest.raises(deskwire.DisconnectedError) as lost:
            await asyncio.wait_for(in_flight, 10)
        assert lost.value.code == "disconnected"
        assert "the IRC connection ended before the response" in lost.value.message
        assert not isinstance(lost.value, deskwire.LocalError)
        # A new request waits for the next connection (the desk's and the remote's).
        assert await desk.request("after", timeout=20) == "AFTER"
        assert desk.reconnects >= 1 and remote.reconnects >= 1
        assert desk.state == "ready"
    finally:
        await desk.close()
        await remote.close()
    with pytest.raises(deskwire.ClosedError):
        await desk.request("closed", timeout=1)
    await asyncio.wait_for(remote.serve_forever(), 5)  # ended for good by close()


async def test_a_call_right_after_the_link_dies_waits_for_the_next_connection(
    server: Ngircd,
) -> None:
    # Found by a new user: a call made at once after DisconnectedError raised ClosedError, and
    # `state` read "closed", though a new connection was coming.
    policy = Reconnect(min_delay=0.05, max_delay=0.5)

    async def handler(request: oa1.Request) -> str:
        if request.payload == "slow":
            await asyncio.sleep(60)
        return request.payload.upper()

    remote = await IrcRemote.connect("127.0.0.1", server.port, handler, reconnect=policy)
    desk = await IrcDesk.connect("127.0.0.1", server.port, reconnect=policy)
    try:
        in_flight = asyncio.ensure_future(desk.request("slow", timeout=60))
        await asyncio.sleep(0.2)
        server.process.terminate()  # the server goes away; it comes back below
        with pytest.raises(deskwire.DisconnectedError):
            await asyncio.wait_for(in_flight, 10)
        assert desk.state == "reconnecting"
        call = asyncio.ensure_future(desk.request("at once", timeout=20))
        await asyncio.sleep(0.5)
        assert not call.done(), "the call waits for the next connection"
        assert desk.state == "reconnecting"
        await asyncio.get_running_loop().run_in_executor(None, server.restart)
        assert await asyncio.wait_for(call, 30) == "AT ONCE"
        assert desk.state == "ready"
    finally:
        await desk.close()
        await remote.close()
    assert desk.state == "closed"


async def test_a_server_that_stops_answering_is_noticed_and_left(server: Ngircd) -> None:
    # SIGSTOP: the socket stays open and nothing comes. The keepalive notices (PING after
    # ping_interval_ms of silence, given up ping_timeout_ms later), the desk drops the link and
    # connects again once the server answers.
    policy = Reconnect(min_delay=0.05, max_delay=0.5)
    keepalive = {"ping_interval_ms": 1000, "ping_timeout_ms": 1500}

    async def handler(request: oa1.Request) -> str:
        return request.payload.upper()

    remote = await IrcRemote.connect("127.0.0.1", server.port, handler, reconnect=policy,
                                     session=keepalive)
    desk = await IrcDesk.connect("127.0.0.1", server.port, reconnect=policy, session=keepalive)
    loop = asyncio.get_running_loop()
    try:
        assert await desk.request("before", timeout=10) == "BEFORE"
        server.process.send_signal(signal.SIGSTOP)
        stopped = loop.time()
        while desk.state == "ready":
            assert loop.time() - stopped < 10, "the dead link was not noticed"
            await asyncio.sleep(0.02)
        noticed = loop.time() - stopped
        # Found by the keepalive (no answer to its PING), not by the socket, which stays open.
        assert irc.Disconnected(reason="timed_out") in desk.events, desk.events
        assert desk.state == "reconnecting"
        await asyncio.sleep(1.0)
        server.process.send_signal(signal.SIGCONT)
        resumed = loop.time()
        assert await desk.request("after", timeout=30) == "AFTER"
        back = loop.time() - resumed
        print(f"dead link noticed after {noticed:.2f} s; answered {back:.2f} s after SIGCONT")
        assert desk.reconnects >= 1
    finally:
        server.process.send_signal(signal.SIGCONT)
        await desk.close()
        await remote.close()


async def test_reconnecting_gives_up_nothing_until_closed(server: Ngircd) -> None:
    async def handler(request: oa1.Request) -> str:
        return "anyone"

    # "*": answers from anyone in the channel; the desk still waits for someone to be there.
    remote = await IrcRemote.connect("127.0.0.1", server.port, handler, nick="somebody")
    desk = await IrcDesk.connect("127.0.0.1", server.port, remote_nick="*", ready_timeout=3,
                                 reconnect=Reconnect(min_delay=0.05, max_delay=0.2))
    assert desk.members() == ["somebody"]
    assert await desk.request("who", timeout=10) == "anyone"
    await remote.close()
    server.stop()
    for _ in range(500):  # until the desk sees the connection gone
        if desk.state != "ready":
            break
        await asyncio.sleep(0.02)
    # No server: the request waits for a connection only as long as ready_timeout, then says
    # what it waited for; it is a TimeoutError too.
    with pytest.raises(TimeoutError) as caught:
        await desk.request("nobody there", timeout=1)
    assert isinstance(caught.value, deskwire.NotReadyError)
    assert "not ready after 3 s: waiting for" in caught.value.message
    await asyncio.wait_for(desk.close(), 5)  # closing stops the retries at once
    with pytest.raises(deskwire.LocalError):
        Reconnect(min_delay=0)


# What a user who gets something wrong sees: the server's words and what the desk waited for,
# never a bare timeout.


async def raw_client(port: int, nick: str) -> "tuple[asyncio.StreamReader, asyncio.StreamWriter]":
    """A bare IRC client, registered: a channel operator or a nick thief for the tests."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"NICK {nick}\r\nUSER {nick} 0 * :{nick}\r\n".encode())
    await writer.drain()
    await read_until(reader, " 001 ")
    return reader, writer


async def read_until(reader: asyncio.StreamReader, marker: str) -> str:
    while True:
        line = (await asyncio.wait_for(reader.readline(), 10)).decode(errors="replace")
        assert line, f"the server closed before {marker!r}"
        if marker in line:
            return line


async def test_connect_names_the_missing_remote_and_who_was_there(server: Ngircd, rexd_irc: RexdIrc) -> None:
    with pytest.raises(TimeoutError) as caught:
        await IrcDesk.connect("127.0.0.1", server.port, remote_nick="deskbot", ready_timeout=2)
    error = caught.value
    assert isinstance(error, deskwire.NotReadyError) and isinstance(error, deskwire.DeskwireError)
    assert error.code == "not_ready"
    assert error.message == "not ready after 2 s: waiting for remote `deskbot` in #desk; members: rexd"
    # The defaults agree with rexd --irc: nothing to name.
    async with await IrcDesk.connect("127.0.0.1", server.port) as desk:
        assert desk.waiting_for() is None and "rexd" in desk.members()


async def test_bad_configs_fail_before_connecting(server: Ngircd, caplog: pytest.LogCaptureFixture) -> None:
    for kwargs in ({"channel": "desk"}, {"nick": "a b"}, {"nick": ""}, {"remote_nick": "not a nick"},
                   {"remote_nick": None}, {"secret": ""}):
        with pytest.raises(deskwire.LocalError) as caught:
            await IrcDesk.connect("127.0.0.1", server.port, **kwargs)  # type: ignore[arg-type]
        assert caught.value.code == "invalid_config", kwargs
    with caplog.at_level(logging.WARNING, logger="deskwire.aio"):
        with pytest.raises(deskwire.LocalError):  # a bad nick, after the secret was read
            await IrcDesk.connect("127.0.0.1", server.port, nick="a b", secret="abc")
    warned = [r.getMessage() for r in caplog.records if "secret of 3 bytes" in r.getMessage()]
    assert warned and "abc" not in warned[0], caplog.records
    with pytest.raises(deskwire.LocalError, match="secret is empty, so anyone could sign frames"):
        await IrcRemote.connect("127.0.0.1", server.port, handler=lambda request: "x", secret=b"")
    # The server's address, said before connecting (asyncio took "" as this machine, and
    # 70000 as an OverflowError).
    for host, port in (("", server.port), ("127.0.0.1", 70000), ("127.0.0.1", 0), ("127.0.0.1", -1)):
        with pytest.raises(deskwire.LocalError) as bad_address:
            await IrcDesk.connect(host, port)
        assert bad_address.value.code == "invalid_value", (host, port)
    with pytest.raises(deskwire.LocalError, match="port must be 1-65535, not 70000"):
        await IrcDesks.connect("127.0.0.1", 70000)
    for host, port in ((None, server.port), ("127.0.0.1", "6667"), ("127.0.0.1", True)):
        with pytest.raises(TypeError):
            await IrcDesk.connect(host, port)  # type: ignore[arg-type]
    with pytest.raises(deskwire.LocalError) as missing:
        await IrcDesk.connect("127.0.0.1", server.port, remote_nick=None)  # type: ignore[arg-type]
    assert "rexd" in missing.value.message and '"*"' in missing.value.message
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(deskwire.LocalError):
            await IrcDesk.connect("127.0.0.1", server.port, ready_timeout=bad)


async def test_a_refused_join_fails_at_once_with_the_server_s_words(server: Ngircd) -> None:
    reader, writer = await raw_client(server.port, "op")
    writer.write(b"JOIN #locked\r\nMODE #locked +i\r\n")
    await writer.drain()
    await read_until(reader, "MODE #locked +i")
    try:
        with pytest.raises(deskwire.JoinFailedError) as caught:
            await IrcDesk.connect("127.0.0.1", server.port, channel="#locked", remote_nick="op",
                                  ready_timeout=60)
        assert caught.value.code == "join_failed"
        assert caught.value.message == (
            "the server refused to let us into #locked: 473 Cannot join channel (+i) -- Invited users only"
        )
    finally:
        writer.close()


async def test_a_taken_nick_keeps_the_second_desk_waiting_and_says_why(
    server: Ngircd, rexd_irc: RexdIrc
) -> None:
    async with await IrcDesk.connect("127.0.0.1", server.port) as first:
        # The second desk comes in as desk_, which rexd --allow-from desk would not serve: it
        # asks for desk back and sends nothing meanwhile, and says so when it gives up.
        with pytest.raises(deskwire.NotReadyError) as caught:
            await IrcDesk.connect("127.0.0.1", server.port, ready_timeout=3)
        assert caught.value.message.startswith(
            "not ready after 3 s: waiting for our nick `desk` back (it was taken when we "
            "registered, so we are `desk_`"
        ), caught.value.message
        assert await first.remote_bash("echo served", timeout=30) == "served\n"


async def test_kicked_and_peer_left_fail_requests_in_flight(server: Ngircd) -> None:
    started = asyncio.Event()

    async def handler(request: oa1.Request) -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    # The first to join is the channel's operator.
    reader, writer = await raw_client(server.port, "op")
    writer.write(b"JOIN #desk\r\n")
    await writer.drain()
    await read_until(reader, "JOIN")
    remote = await IrcRemote.connect("127.0.0.1", server.port, handler)
    try:
        async with await IrcDesk.connect("127.0.0.1", server.port) as desk:
            in_flight = asyncio.ensure_future(desk.request("slow", timeout=60))
            await asyncio.wait_for(started.wait(), 10)
            writer.write(b"KICK #desk desk :go away\r\n")
            await writer.drain()
            with pytest.raises(deskwire.KickedError) as kicked:
                await asyncio.wait_for(in_flight, 10)
            assert kicked.value.message == "kicked from #desk by op: go away"
            assert any(isinstance(e, deskwire.irc.Kicked) for e in desk.events)
        started.clear()
        async with await IrcDesk.connect("127.0.0.1", server.port) as desk:
            in_flight = asyncio.ensure_future(desk.request("slow", timeout=60))
            await asyncio.wait_for(started.wait(), 10)
            await remote.close("going home")
            with pytest.raises(deskwire.PeerLeftError) as left:
                await asyncio.wait_for(in_flight, 20)
            assert left.value.code == "peer_left"
            assert "rexd" in left.value.message and "was not back within 2 s" in left.value.message
    finally:
        writer.close()
        await remote.close()


async def test_a_timeout_that_cannot_work_is_refused_before_sending(server: Ngircd, rexd_irc: RexdIrc) -> None:
    async with await IrcDesk.connect("127.0.0.1", server.port) as desk:
        for bad in (0, -5, float("nan")):
            with pytest.raises(deskwire.LocalError) as caught:
                await desk.remote_bash("touch ran", timeout=bad)
            assert caught.value.code == "invalid_value"
        with pytest.raises(TypeError):
            await desk.remote_bash("touch ran", timeout="30")  # type: ignore[arg-type]
        assert desk.stats()["oa1"]["frames_out"] == 0
        assert await desk.remote_bash("test -e ran && echo ran || echo absent", timeout=30) == "absent\n"


async def test_run_tool_turns_a_model_s_call_into_its_tool_result(server: Ngircd, rexd_irc: RexdIrc) -> None:
    async with await IrcDesk.connect("127.0.0.1", server.port) as desk:
        ran = await desk.run_tool({"id": "c1", "name": "RemoteBash", "args": {"command": "echo hi"}})
        assert ran == {"callId": "c1", "content": "hi\n"}
        # The model's mistakes come back to it as error results, with what was wrong.
        for args in ({"command": "sleep 30", "timeout_sec": 0}, {"timeout_sec": 5}, {"command": 3}):
            bad = await desk.run_tool({"id": "c2", "name": "RemoteBash", "args": args})
            assert bad["isError"] and '"ok":false' in bad["content"], args
        # A request that fails (here its timeout) is an error result the model reads.
        slow = await desk.run_tool({"id": "c3", "name": "RemoteBash",
                                    "args": {"command": "sleep 30", "timeout_sec": 1}})
        assert slow["isError"] and '"error":"timeout"' in slow["content"]
        with pytest.raises(deskwire.LocalError):  # the host's mistake, not the model's
            await desk.run_tool({"id": "c4", "name": "read", "args": {"path": "x"}})


async def test_no_nick_left_fails_the_connect_with_the_server_s_words(server: Ngircd, rexd_irc: RexdIrc) -> None:
    async with await IrcDesk.connect("127.0.0.1", server.port):
        with pytest.raises(deskwire.NickRefusedError) as caught:
            await IrcDesk.connect("127.0.0.1", server.port, session={"max_nick_attempts": 1})
        assert caught.value.code == "nick_refused"
        assert caught.value.message.startswith(
            "the server refused the nick desk and every fallback: 433 ")


async def test_tls_verified_and_each_way_it_fails() -> None:
    """``tls=``: a desk reaches rexd (on the plain port) through the server's TLS port with the
    server's CA; without it, by the wrong name, or on a plain port it raises
    :class:`deskwire.TlsError` saying which check failed, and a refused connect
    :class:`deskwire.ConnectFailedError` with the host, the port and the reason."""
    import ssl

    import deskwire
    from peers import ClosedPort

    server = Ngircd(tls=True)
    rexd = RexdIrc(server.port)
    try:
        trusted = ssl.create_default_context(cafile=str(server.ca))
        async with await IrcDesk.connect("localhost", server.tls_port, tls=trusted) as desk:
            assert await desk.remote_bash("echo over tls", timeout=30) == "over tls\n"
        with pytest.raises(deskwire.TlsError, match="certificate verify failed.*give the server's CA"):
            await IrcDesk.connect("localhost", server.tls_port, tls=True)
        with pytest.raises(deskwire.TlsError, match="mismatch.*a name the certificate lists"):
            await IrcDesk.connect("127.0.0.1", server.tls_port, tls=trusted)
        with pytest.raises(deskwire.TlsError, match="plain-text port"):
            await IrcDesk.connect("localhost", server.port, tls=trusted)
        closed = ClosedPort()
        try:
            with pytest.raises(
                deskwire.ConnectFailedError, match=f"connect to 127.0.0.1:{closed.port} failed: .*refused"
            ):
                await IrcDesk.connect("127.0.0.1", closed.port)
        finally:
            closed.close()
    finally:
        rexd.stop()
        server.stop()


def test_reconnect_waits_are_the_cores_policy() -> None:
    steady = Reconnect(min_delay=1, max_delay=10, jitter_percent=0)
    assert [steady.delay(n) for n in range(6)] == [1, 2, 4, 8, 10, 10]
    default = Reconnect()
    waits = [default.delay(0) for _ in range(200)]
    assert all(1.0 <= w <= 1.5 for w in waits) and len(set(waits)) > 50
    assert all(10.0 <= default.delay(n) <= 15.0 for n in range(4, 40))
    with pytest.raises(deskwire.LocalError) as caught:
        Reconnect(jitter_percent=101)
    assert "jitter_percent" in caught.value.message
