"""deskwire.aio.RexdClient against a real ``rexd --stdio``, started directly and through a
loopback sshd, with rex's targets file."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import AsyncIterator, Iterator, List, Union

import pytest

import deskwire
from deskwire.aio import ExecExit, ExecOutput, RexdClient

from peers import Sshd, rexd_path


@pytest.fixture
def root() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="deskwire-root-") as d:
        yield Path(d).resolve()


@pytest.fixture
def sshd() -> Iterator[Sshd]:
    s = Sshd(rexd_path())
    yield s
    s.stop()


async def exercise(client: RexdClient, root: Path) -> None:
    """What every transport must do: exec with streamed output, fs calls, errors."""
    events: List[Union[ExecOutput, ExecExit]] = []
    async for event in client.exec(["sh", "-c", "printf 'a\\n'; printf 'b\\n' >&2; exit 3"], cwd=str(root)):
        events.append(event)
    assert ExecOutput("stdout", b"a\n", 0) in events
    assert ExecOutput("stderr", b"b\n", 0) in events
    assert events[-1] == ExecExit(3, None, False, 0)

    blob = bytes(range(256)) * 64
    written = await client.write(str(root / "blob.bin"), blob)
    assert written["bytes_written"] == len(blob)
    assert await client.read(str(root / "blob.bin")) == blob
    await client.write(str(root / "sub" / "t.txt"), "héllo\n", mkdir_parents=True)
    assert (root / "sub" / "t.txt").read_text() == "héllo\n"
    names = sorted(e["name"] for e in await client.list(str(root)))
    assert names == ["blob.bin", "sub"]
    assert (await client.stat(str(root / "blob.bin")))["size"] == len(blob)
    assert await client.glob("**/*.txt", cwd=str(root)) == [str(root / "sub" / "t.txt")]

    with pytest.raises(deskwire.RemoteError) as caught:
        await client.read("/etc/passwd")
    assert caught.value.code == "forbidden_path"
    code, out, err = await client.run(["echo", "done"], cwd=str(root))
    assert (code, out, err) == (0, b"done\n", b"")


async def test_local_rexd(root: Path) -> None:
    async with await RexdClient.connect("local", rexd=rexd_path(), rexd_args=["--root", str(root)], workspace_roots=[str(root)]) as client:
        assert client.session["protocol"] == "rexd/1"
        await exercise(client, root)


async def test_through_loopback_sshd(root: Path, sshd: Sshd) -> None:
    async with await RexdClient.connect(
        "box", targets_file=str(sshd.targets_file), rexd_args=["--root", str(root)],
        workspace_roots=[str(root)],
    ) as client:
        await exercise(client, root)


async def test_cancel_kills_the_process(root: Path) -> None:
    pidfile = root / "pid"
    async with await RexdClient.connect("local", rexd=rexd_path(), rexd_args=["--root", str(root)], workspace_roots=[str(root)]) as client:

        async def consume() -> None:
            async for _ in client.exec(["sh", "-c", f"echo $$ > {pidfile}; echo go; exec sleep 300"], cwd=str(root)):
                pass

        task = asyncio.ensure_future(consume())
        for _ in range(500):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            await asyncio.sleep(0.02)
        pid = int(pidfile.read_text())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(500):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the cancelled process is still running")


async def test_exec_timeout_raises_timeout_error(root: Path) -> None:
    async with await RexdClient.connect("local", rexd=rexd_path(), rexd_args=["--root", str(root)], workspace_roots=[str(root)]) as client:
        with pytest.raises(TimeoutError):
            async for _ in client.exec(["sleep", "30"], cwd=str(root), timeout=0.5):
                pass


async def test_unknown_target_and_missing_daemon() -> None:
    with pytest.raises(deskwire.LocalError) as caught:
        await RexdClient.connect("nosuchtarget", targets_file="/nonexistent/targets.toml")
    assert caught.value.code == "unknown_target"
    with pytest.raises(deskwire.LocalError) as caught:
        await RexdClient.connect("local", rexd="/nonexistent/rexd")
    assert caught.value.code == "not_found"
