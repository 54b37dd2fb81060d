"""deskwire.aio over a real ngircd: IrcDesk against ``rexd --irc`` (RemoteBash of 16 KiB and
64 KiB byte for byte, cancellation, timeout) and IrcDesk against IrcRemote (streamed output,
the remote's handler cancelled by CANCEL)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import AsyncIterator, Iterator, List

import pytest

import deskwire
from deskwire import oa1
from deskwire.aio import IrcDesk, IrcRemote, Reconnect

from peers import Ngircd, RexdIrc

# Pacing and penalties off for the data-heavy cases, as the Rust ngircd tests do: this is
# about bytes arriving whole, not about flood protection.
FAST = ["--adaptive", "--pacing-interval-ms", "0", "--pacing-burst", "1000000", "--timeout-sec", "60"]


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


@pytest.mark.parametrize("size", [16 * 1024, 64 * 1024])
async def test_remote_bash_sizes_byte_for_byte(server: Ngircd, rexd_irc: RexdIrc, size: int) -> None:
    data = mixed_utf8(size)
    path = Path(rexd_irc.dir) / f"out-{size}.txt"
    path.write_bytes(data)
    async with await IrcDesk.connect("127.0.0.1", server.port, nick="desk", remote_nick="deskbot") as desk:
        text = await desk.remote_bash(f"cat {path}", timeout=60)
        assert text.encode() == data
        assert desk.stats()["oa1"]["frames_in"] > size // 512


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

    remote = await IrcRemote.connect("127.0.0.1", server.port, handler, nick="deskbot")
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

    remote = await IrcRemote.connect("127.0.0.1", server.port, handler, nick="deskbot")
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

    remote = await IrcRemote.connect("127.0.0.1", server.port, handler, nick="deskbot",
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
        # What was in flight is lost with the connection: it fails, it does not hang.
        with pytest.raises(deskwire.ClosedError):
            await asyncio.wait_for(in_flight, 10)
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


async def test_reconnecting_gives_up_nothing_until_closed(server: Ngircd) -> None:
    desk = await IrcDesk.connect("127.0.0.1", server.port, remote_nick=None,
                                 reconnect=Reconnect(min_delay=0.05, max_delay=0.2))
    server.stop()
    for _ in range(500):  # until the desk sees the connection gone
        if desk.state != "ready":
            break
        await asyncio.sleep(0.02)
    # No server: the request waits for a connection only as long as its own timeout.
    with pytest.raises(TimeoutError):
        await desk.request("nobody there", timeout=1)
    await asyncio.wait_for(desk.close(), 5)  # closing stops the retries at once
    with pytest.raises(deskwire.LocalError):
        Reconnect(min_delay=0)
