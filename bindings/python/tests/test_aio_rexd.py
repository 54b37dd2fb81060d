"""deskwire.aio.RexdClient against a real ``rexd --stdio``, started directly and through a
loopback sshd, with rex's targets file."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any, AsyncIterator, Iterator, List, Optional, Union

import pytest

import deskwire
from deskwire.aio import ExecExit, ExecOutput, Pty, PtyExit, PtyOutput, RexdClient

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
    # A whole file of several pieces (zstd frames where the session compresses).
    text = log_text(3 * 1024 * 1024 // 2)
    (root / "sub" / "app.log").write_bytes(text)
    assert await client.read_file(str(root / "sub" / "app.log")) == text

    with pytest.raises(deskwire.RemoteError) as caught:
        await client.read("/etc/passwd")
    assert caught.value.code == "forbidden_path"
    code, out, err = await client.run(["echo", "done"], cwd=str(root))
    assert (code, out, err) == (0, b"done\n", b"")


async def test_local_rexd(root: Path) -> None:
    async with await RexdClient.connect("local", rexd=rexd_path(), rexd_args=["--root", str(root)], workspace_roots=[str(root)]) as client:
        assert client.session["protocol"] == "rexd/1"
        await exercise(client, root)


async def raw_frames_exactly(client: RexdClient, root: Path) -> None:
    """The session takes raw frames (over a child's stdio, and as binary messages over /ws):
    command output and file bytes come after their lines as they are (NULs, invalid UTF-8,
    newlines), exactly."""
    assert client.session.get("raw_frames") is True and client.session.get("raw_output") is True
    noise = os.urandom(3 * 1024 * 1024 + 7)
    (root / "noise.bin").write_bytes(noise)
    out = bytearray()
    async for event in client.exec(["cat", str(root / "noise.bin")], cwd=str(root)):
        if isinstance(event, ExecOutput):
            assert event.stream == "stdout"
            out += event.data
        else:
            assert event.exit_code == 0
    # Past the 1 MiB cap an agent keeps: the output is cut there, never corrupted.
    assert bytes(out) == noise[: len(out)] and len(out) >= 1024 * 1024
    assert await client.read(str(root / "noise.bin"), length=777_777) == noise[:777_777]
    assert await client.read(str(root / "noise.bin"), offset=len(noise) - 5) == noise[-5:]
    assert await client.read(str(root / "noise.bin"), offset=len(noise) + 10) == b""


async def test_raw_frames_locally_and_over_ssh(root: Path, sshd: Sshd) -> None:
    async with await RexdClient.connect("local", rexd=rexd_path(), rexd_args=["--root", str(root)]) as client:
        await raw_frames_exactly(client, root)
    async with await RexdClient.connect(
        "box", targets_file=str(sshd.targets_file), rexd_args=["--root", str(root)],
    ) as client:
        await raw_frames_exactly(client, root)


@pytest.mark.parametrize("direct", [True, False], ids=["own-pipe", "asyncio-transport"])
async def test_both_stdout_readers_carry_exact_bytes_and_close_their_pipes(
    root: Path, direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's stdout is read through the client's own pipe reader, or (on Windows, whose
    loop cannot watch a pipe) through asyncio's transport: both carry the bytes exactly, and a
    closed client leaves no descriptor open."""
    from deskwire.aio import rexd as client_module

    monkeypatch.setattr(client_module, "_DIRECT_PIPE", direct)
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(2):
        async with await RexdClient.connect("local", rexd=rexd_path(), rexd_args=["--root", str(root)]) as client:
            assert isinstance(client._link_reader, client_module._PipeReader if direct else client_module._WideReader)
            await raw_frames_exactly(client, root)
    assert sorted(os.listdir("/proc/self/fd")) == before


async def test_a_daemon_that_lies_about_raw_bytes_is_cut_off(root: Path) -> None:
    """A daemon that grants raw output, then announces a gigabyte after an event: the client
    ends the link before reading or holding any of it, and the command's caller hears so."""
    fake = root / "fake-rexd"
    fake.write_text(
        "#!/bin/sh\n"
        "while IFS= read -r line; do\n"
        "  id=$(printf '%s' \"$line\" | sed -n 's/.*\"id\":\\([0-9]*\\).*/\\1/p')\n"
        "  case \"$line\" in\n"
        "  *'\"session.open\"'*) printf '{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"session_id\":\"s_1\","
        "\"protocol\":\"rexd/1\",\"server_version\":\"fake\",\"capabilities\":[\"exec\"],\"limits\":{},"
        "\"workspace_roots\":[\"/\"],\"raw_frames\":true,\"raw_output\":true}}\\n' \"$id\";;\n"
        "  *'\"exec.start\"'*) printf '{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"process_id\":\"p_1\"}}\\n"
        "{\"jsonrpc\":\"2.0\",\"method\":\"exec.stdout\",\"params\":{\"session_id\":\"s_1\",\"process_id\":\"p_1\","
        "\"seq\":1,\"data\":\"\",\"encoding\":\"raw\",\"raw_bytes\":1000000000}}\\n' \"$id\";;\n"
        "  esac\n"
        "done\n"
    )
    fake.chmod(0o755)
    async with await RexdClient.connect("local", rexd=str(fake)) as client:
        assert client.session["raw_output"] is True
        with pytest.raises(deskwire.ClosedError):
            async for _ in client.exec(["true"]):
                pass


# --- compression and whole-file reads -------------------------------------------------------


def log_text(n: int) -> bytes:
    """``n`` bytes of log lines: zstd takes them to a tenth."""
    lines = (f"2026-11-29 INFO worker[{i % 7}] request {i} done in {i % 997} ms\n" for i in range(n))
    return b"".join(line.encode() for line in lines)[:n]


class Inflations:
    """Counts what the client inflated (``deskwire.rexd``'s ``inflate`` and ``decode``), to know
    the bytes came compressed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from deskwire.aio import rexd as client_module

        native = client_module._rexd
        self.frames = 0
        self.strings = 0
        inflate, decode = native.inflate, native.decode

        def counted_inflate(frame: bytes, limit: int) -> bytes:
            self.frames += 1
            return inflate(frame, limit)

        def counted_decode(text: str, encoding: str, limit: int) -> bytes:
            self.strings += 1
            return decode(text, encoding, limit)

        monkeypatch.setattr(native, "inflate", counted_inflate)
        monkeypatch.setattr(native, "decode", counted_decode)


async def whole_files_exactly(client: RexdClient, root: Path, text: bytes, noise: bytes) -> None:
    """read_file gives the exact bytes of a compressible and an incompressible file of several
    pieces, of a slice across pieces, and of an empty file; read_chunks no piece larger than the
    session's."""
    assert await client.read_file(str(root / "app.log")) == text
    assert await client.read_file(str(root / "noise.bin")) == noise
    piece = client.session["limits"]["max_file_read_bytes"]
    assert await client.read_file(str(root / "noise.bin"), offset=piece - 3, length=2 * piece + 5) == (
        noise[piece - 3: 3 * piece + 2]
    )
    assert await client.read_file(str(root / "app.log"), offset=len(text) + 1) == b""
    assert await client.read_file(str(root / "empty")) == b""
    chunks = [c async for c in client.read_chunks(str(root / "app.log"))]
    assert b"".join(chunks) == text and len(chunks) > 2 and max(map(len, chunks)) <= piece
    with pytest.raises(deskwire.LocalError) as caught:
        await client.read_file(str(root / "noise.bin"), max_size=len(noise) - 1)
    assert caught.value.code == "too_large"
    # Past the cap, the session goes on, in step.
    assert await client.read_file(str(root / "noise.bin"), max_size=len(noise)) == noise
    with pytest.raises(deskwire.RemoteError) as refused:
        await client.read_file("/etc/passwd")
    assert refused.value.code == "forbidden_path"


@pytest.mark.parametrize("where", ["local", "ssh"])
async def test_read_file_with_and_without_compression_raw_and_json(
    root: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = log_text(2 * 1024 * 1024 + 333)
    noise = os.urandom(2 * 1024 * 1024 + 7)
    (root / "app.log").write_bytes(text)
    (root / "noise.bin").write_bytes(noise)
    (root / "empty").write_bytes(b"")
    sshd = Sshd(rexd_path()) if where == "ssh" else None
    target = (
        {"target": "local", "rexd": rexd_path()}
        if sshd is None
        else {"target": "box", "targets_file": str(sshd.targets_file)}
    )
    try:
        # By default zstd is offered over ssh, not to a local daemon (a pipe gains nothing).
        async with await RexdClient.connect(**target, rexd_args=["--root", str(root)]) as client:
            assert client.session.get("compression") == ("zstd" if sshd else None)
        for raw in (True, False):
            for compression in (True, False):
                seen = Inflations(monkeypatch)
                async with await RexdClient.connect(
                    **target, rexd_args=["--root", str(root)], raw_frames=raw, compression=compression,
                ) as client:
                    assert client.session.get("raw_frames", False) is raw
                    assert client.session.get("compression") == ("zstd" if compression else None)
                    await whole_files_exactly(client, root, text, noise)
                    code, out, _ = await client.run(["seq", "1", "100000"], cwd=str(root))
                    assert (code, out) == (0, b"".join(b"%d\n" % i for i in range(1, 100001)))
                # Text and seq's output came as zstd frames (after their lines when raw, else in
                # base64) when compression was on, never when it was off.
                what = (raw, compression)
                assert (seen.frames > 0) is (raw and compression), (what, seen.frames)
                assert (seen.strings > 0) is (not raw and compression), (what, seen.strings)
    finally:
        if sshd is not None:
            sshd.stop()


def fake_rexd(root: Path) -> Path:
    """A daemon that grants raw frames, raw output and zstd, then answers fs.read of ``bomb``
    with a raw zstd frame of 32 KiB that inflates to 1 GiB (no size in its header), of ``json``
    with the same frame in base64, of ``liar`` with a frame that says 1000 bytes and holds
    256 KiB, of ``moving`` with a new mtime on every piece, and anything else with a piece of
    ``x``; exec.start with an output event carrying the bomb."""
    fake = root / "fake-rexd"
    fake.write_text(f"""#!{sys.executable}
import base64, json, struct, sys

def frame(blocks, size=None):
    f = bytearray(b"\\x28\\xb5\\x2f\\xfd")
    f += bytes([0, 0x50]) if size is None else bytes([0x80, 0x50]) + struct.pack("<I", size)
    for i in range(blocks):
        f += struct.pack("<I", (i + 1 == blocks) | 2 | (128 * 1024) << 3)[:3] + b"\\0"
    return bytes(f)

BOMB = frame(8192)
out = sys.stdout.buffer
mtime = 0
def send(message, raw=b""):
    out.write(json.dumps(message).encode() + b"\\n" + raw)
    out.flush()
for line in sys.stdin:
    m = json.loads(line)
    i, method, p = m.get("id"), m.get("method"), m.get("params") or {{}}
    if method == "session.open":
        send({{"jsonrpc": "2.0", "id": i, "result": {{"session_id": "s_1", "protocol": "rexd/1",
            "server_version": "fake", "capabilities": ["exec", "fs"], "workspace_roots": ["/"],
            "limits": {{"max_file_read_bytes": 1048576}}, "raw_frames": True, "raw_output": True,
            "compression": "zstd"}}}})
    elif method == "fs.read":
        path = p["path"]
        mtime += path == "moving"
        head = {{"path": path, "size": 4 << 20, "mtime": str(mtime), "content": "", "truncated": False}}
        if path == "bomb":
            send({{"jsonrpc": "2.0", "id": i, "result": dict(head, encoding="zstd", raw_bytes=len(BOMB))}}, BOMB)
        elif path == "json":
            send({{"jsonrpc": "2.0", "id": i, "result": dict(head, encoding="zstd",
                content=base64.b64encode(BOMB).decode())}})
        elif path == "liar":
            liar = frame(2, size=1000)
            send({{"jsonrpc": "2.0", "id": i, "result": dict(head, encoding="zstd", raw_bytes=len(liar))}}, liar)
        else:
            n = min(p["length"], (4 << 20) - p["offset"])
            send({{"jsonrpc": "2.0", "id": i, "result": dict(head, encoding="raw", raw_bytes=n)}}, b"x" * n)
    elif method == "exec.start":
        send({{"jsonrpc": "2.0", "id": i, "result": {{"process_id": "p_1"}}}})
        send({{"jsonrpc": "2.0", "method": "exec.stdout", "params": {{"session_id": "s_1",
            "process_id": "p_1", "seq": 1, "data": "", "encoding": "zstd", "raw_bytes": len(BOMB)}}}}, BOMB)
    elif i is not None:
        send({{"jsonrpc": "2.0", "id": i, "result": {{}}}})
""")
    fake.chmod(0o755)
    return fake


async def test_a_zstd_bomb_or_a_lying_frame_is_refused_unexpanded(root: Path) -> None:
    """Frames of 32 KiB that inflate to a gigabyte, after the line or in base64, in an fs.read
    answer or an output event, and a frame whose stated size is a lie: each is a typed error,
    none is expanded (the process's peak memory does not grow by anything near it), and the
    session goes on in step."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    async with await RexdClient.connect("local", rexd=str(fake_rexd(root))) as client:
        assert client.session["compression"] == "zstd"
        for path in ("bomb", "json"):
            with pytest.raises(deskwire.ProtocolError) as caught:
                await client.read_file(path)
            assert caught.value.code == "too_large", caught.value
            assert "refused, not expanded" in str(caught.value)
        with pytest.raises(deskwire.ProtocolError) as caught:
            await client.read("liar")
        assert caught.value.code == "bad_payload" and "said 1000 bytes" in str(caught.value)
        with pytest.raises(deskwire.ProtocolError) as caught:
            async for _ in client.exec(["true"]):
                pass
        assert caught.value.code == "too_large"
        with pytest.raises(deskwire.RemoteError) as changed:
            await client.read_file("moving")
        assert changed.value.code == "concurrency_conflict"
        # Still in step: a plain file of four pieces, whole.
        assert await client.read_file("plain") == b"x" * (4 << 20)
    grew_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grew_kib < 128 * 1024, f"peak memory grew by {grew_kib} KiB"


def test_inflate_and_decode_refuse_bad_input_with_typed_errors() -> None:
    """What a daemon (or a caller) may hand deskwire.rexd's inflate and decode: garbage, a frame
    past its limit, a wrong type, a negative limit; each a typed error, never a crash."""
    from deskwire import rexd

    assert rexd.decode("aGk=", "base64", 0) == b"hi"
    assert rexd.decode("héllo", "utf8", 0) == "héllo".encode()
    for frame in (b"", b"\x28\xb5\x2f", b"not a zstd frame", bytes(64)):
        with pytest.raises(deskwire.ProtocolError) as caught:
            rexd.inflate(frame, 1 << 20)
        assert caught.value.code == "bad_payload", frame
    with pytest.raises(deskwire.ProtocolError) as caught:
        rexd.decode("!!", "zstd", 10)
    assert caught.value.code == "bad_payload"
    with pytest.raises(deskwire.ProtocolError):
        rexd.decode("", "brotli", 10)
    with pytest.raises(deskwire.ProtocolError):
        rexd.decode("", "raw", 10)
    with pytest.raises(TypeError):
        rexd.inflate("a str", 10)  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        rexd.inflate(b"", -1)


async def test_output_past_the_cap_is_said_and_can_be_asked_for_whole(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An agent's session caps a command's output (1 MiB): ExecExit.truncated says it was cut,
    run() logs it; uncapped=True brings it all, as rex exec does; max_output_bytes lowers it."""
    whole = b"".join(b"%d\n" % i for i in range(1, 400001))

    async def output(client: RexdClient, **options: Any) -> "tuple[bytes, ExecExit]":
        out, last = bytearray(), None
        async for event in client.exec(["seq", "1", "400000"], **options):
            if isinstance(event, ExecOutput):
                out += event.data
            else:
                last = event
        assert last is not None
        return bytes(out), last

    async with await RexdClient.connect("local", rexd=rexd_path(), rexd_args=["--root", str(root)]) as client:
        capped, exit_ = await output(client)
        assert capped == whole[: 1 << 20] and exit_.truncated and exit_.exit_code == 0
        assert "truncated=True" in repr(exit_)
        full, exit_ = await output(client, uncapped=True)
        assert full == whole and not exit_.truncated
        few, exit_ = await output(client, max_output_bytes=1000)
        assert few == whole[:1000] and exit_.truncated
        with caplog.at_level("WARNING", logger="deskwire.aio.rexd"):
            code, out, _ = await client.run(["seq", "1", "400000"])
        assert (code, len(out)) == (0, 1 << 20)
        assert "output cut at the session's cap after 1048576 bytes" in caplog.text


async def test_a_write_too_large_for_one_message_is_refused_before_it_is_sent(root: Path) -> None:
    """More than a daemon's 16 MiB message in base64 raises at once (the daemon would drop the
    line and the call would wait out its timeout); in pieces with ``mode="append"`` it goes."""
    big = os.urandom(13 << 20)
    async with await RexdClient.connect("local", rexd=rexd_path(), rexd_args=["--root", str(root)]) as client:
        with pytest.raises(deskwire.LocalError, match='mode="append"') as caught:
            await asyncio.wait_for(client.write(str(root / "big.bin"), big), 10)
        assert caught.value.code == "too_large"
        assert not (root / "big.bin").exists()
        await client.write(str(root / "big.bin"), big[: 8 << 20])
        await client.write(str(root / "big.bin"), big[8 << 20:], mode="append")
        assert (root / "big.bin").read_bytes() == big


async def test_misspelt_connect_keywords_name_the_parameter() -> None:
    with pytest.raises(TypeError, match="'compresion'; did you mean 'compression'"):
        await RexdClient.connect("local", rexd=rexd_path(), compresion=False)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'raw_frame'; did you mean 'raw_frames'"):
        await RexdClient.connect("local", rexd=rexd_path(), raw_frame=False)  # type: ignore[call-arg]


async def test_through_loopback_sshd(root: Path, sshd: Sshd) -> None:
    async with await RexdClient.connect(
        "box", targets_file=str(sshd.targets_file), rexd_args=["--root", str(root)],
        workspace_roots=[str(root)],
    ) as client:
        await exercise(client, root)


async def test_an_ssh_target_that_cannot_be_reached_is_a_connect_failure(root: Path, sshd: Sshd) -> None:
    """ssh's own words, in a ConnectionError rather than the ClosedError of a closed client."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    with pytest.raises(deskwire.ConnectFailedError, match=f"port {closed_port}: Connection refused") as refused:
        await RexdClient.connect(f"ssh://127.0.0.1:{closed_port}", timeout=20)
    assert refused.value.code == "connect_failed" and isinstance(refused.value, ConnectionError)
    # The host is there, its rexd is not.
    with pytest.raises(deskwire.ConnectFailedError, match="no REXD session with box: .*nonexistent"):
        await RexdClient.connect("box", targets_file=str(sshd.targets_file), rexd="/nonexistent/rexd", timeout=20)


async def test_over_ssh_a_killed_link_is_resumed(root: Path, sshd: Sshd) -> None:
    """The ssh client is killed mid-command: RexdClient starts ssh again, resumes the session
    from the rexd agent that kept it, and every line arrives once, in order, with the exit
    code."""
    client = await RexdClient.connect(
        "box", targets_file=str(sshd.targets_file), rexd_args=["--root", str(root)],
        workspace_roots=[str(root)], resume=True,
    )
    try:
        assert client.session.get("resume"), client.session
        first_link = client._process
        script = 'i=1; while [ $i -le 30 ]; do echo "line $i"; i=$((i+1)); sleep 0.1; done; exit 7'
        out = bytearray()
        exit_: Optional[ExecExit] = None
        killed = False
        async for event in client.exec(["sh", "-c", script], cwd=str(root)):
            if isinstance(event, ExecOutput):
                out += event.data
                if not killed and out.count(b"\n") >= 8:
                    killed = True
                    assert first_link is not None
                    first_link.kill()  # the ssh client, as a dropped connection would end it
            else:
                exit_ = event
        assert killed and client._process is not first_link, "a new ssh carried the rest"
        assert out.decode().splitlines() == [f"line {i}" for i in range(1, 31)]
        assert exit_ is not None and exit_.exit_code == 7
        metrics = await client.call("rexd.metrics")
        assert "rexd_sessions_resumed_total 1\n" in metrics["text"], metrics["text"]
    finally:
        await client.close()


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
        # Longer than a u64 of milliseconds holds: the daemon's hard limit, not a refusal.
        assert await client.run(["echo", "long"], cwd=str(root), timeout=1e30) == (0, b"long\n", b"")


async def test_unknown_target_and_missing_daemon() -> None:
    with pytest.raises(deskwire.LocalError) as caught:
        await RexdClient.connect("nosuchtarget", targets_file="/nonexistent/targets.toml")
    assert caught.value.code == "unknown_target"
    with pytest.raises(deskwire.LocalError) as caught:
        await RexdClient.connect("local", rexd="/nonexistent/rexd")
    assert caught.value.code == "not_found"


# --- terminals (pty.*) ----------------------------------------------------------------------


async def read_until(term: Pty, needle: bytes, seen: bytearray) -> None:
    """Reads the terminal's output into ``seen`` until ``needle`` is in it."""
    async def go() -> None:
        async for event in term:
            assert isinstance(event, PtyOutput), f"the program ended first: {event}, {bytes(seen)!r}"
            seen.extend(event.data)
            if needle in seen:
                return
    await asyncio.wait_for(go(), 20)


async def rest(term: Pty) -> List[Union[PtyOutput, PtyExit]]:
    async def go() -> List[Union[PtyOutput, PtyExit]]:
        return [event async for event in term]
    return await asyncio.wait_for(go(), 20)


def connect_local(root: Path) -> "asyncio.Future[RexdClient]":
    return asyncio.ensure_future(RexdClient.connect(
        "local", rexd=rexd_path(), rexd_args=["--root", str(root)], workspace_roots=[str(root)]))


async def test_pty_runs_an_interactive_shell(root: Path) -> None:
    async with await connect_local(root) as client:
        async with await client.pty(["sh"], cwd=str(root), cols=80, rows=24) as term:
            seen = bytearray()
            # The typed text echoes as "$((6*7))"; only the shell running it prints "x-42".
            await term.write("echo x-$((6*7))\n")
            await read_until(term, b"x-42", seen)
            await term.write(b"stty size\n")
            await read_until(term, b"24 80", seen)
            await term.resize(cols=100, rows=30)
            await term.write(b"stty size\n")
            await read_until(term, b"30 100", seen)
            await term.write("printf 'h\\303\\251llo\\n'; exit 7\n")
            events = await rest(term)
            assert b"h\xc3\xa9llo" in b"".join(e.data for e in events if isinstance(e, PtyOutput))
            assert events[-1] == PtyExit(7, None)
            assert term.exit == PtyExit(7, None)
            # Read to its end: iterating again stops at once.
            assert await rest(term) == []


async def test_pty_program_that_ends_by_itself(root: Path) -> None:
    async with await connect_local(root) as client:
        term = await client.pty(["sh", "-c", "printf 'one\\ntwo\\n'; exit 3"], cwd=str(root))
        events = await rest(term)
        output = b"".join(e.data for e in events if isinstance(e, PtyOutput))
        # A terminal turns \n into \r\n.
        assert output == b"one\r\ntwo\r\n"
        assert events[-1] == PtyExit(3, None) and events[-1].duration_ms >= 0
        with pytest.raises(deskwire.ClosedError):
            await term.write(b"too late\n")
        await term.close()  # closing an ended terminal does nothing


async def test_pty_bad_input_is_a_typed_error(root: Path) -> None:
    async with await connect_local(root) as client:
        for bad in ({"cols": 0}, {"rows": 70000}, {"max_buffered": 0}):
            with pytest.raises(deskwire.LocalError):
                await client.pty(["sh"], **bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await client.pty(["sh"], cols="80")  # type: ignore[arg-type]
        with pytest.raises(deskwire.RemoteError):
            await client.pty(["/nonexistent/program"], cwd=str(root))
        async with await client.pty(["sh"], cwd=str(root)) as term:
            with pytest.raises(TypeError):
                await term.write(42)  # type: ignore[arg-type]
            with pytest.raises(deskwire.LocalError):
                await term.resize(0, 24)
            with pytest.raises(TypeError):
                await term.resize(True, 24)
        with pytest.raises(deskwire.ClosedError):
            await term.write(b"ls\n")
        with pytest.raises(deskwire.ClosedError):
            await term.resize(80, 24)
    with pytest.raises(deskwire.ClosedError):
        await client.pty(["sh"])


async def test_a_pty_write_too_large_for_one_message_is_refused_before_it_is_sent(root: Path) -> None:
    """Typing more than a daemon's 16 MiB message in base64 raises at once (the daemon would
    drop the line and the write wait out its timeout), bytes or text; the terminal goes on."""
    async with await connect_local(root) as client:
        async with await client.pty(["sh"], cwd=str(root)) as term:
            # 12 MiB: 16 MiB in base64, over the limit by the rest of the message.
            for big in (bytes(12 << 20), "é" * (6 << 20)):
                with pytest.raises(deskwire.LocalError, match="more than the 16777216 a daemon takes; write it in pieces") as caught:
                    await asyncio.wait_for(term.write(big), 10)
                assert caught.value.code == "too_large"
                assert f"pty.input of {12 << 20} bytes" in str(caught.value)
            seen = bytearray()
            await term.write("echo x-$((6*7))\n")
            await read_until(term, b"x-42", seen)


async def test_cancelling_the_reader_closes_the_terminal(root: Path) -> None:
    pidfile = root / "pty-pid"
    async with await connect_local(root) as client:
        term = await client.pty(["sh", "-c", f"echo $$ > {pidfile}; echo go; exec sleep 300"], cwd=str(root))

        reading = asyncio.Event()

        async def consume() -> None:
            async for _ in term:
                reading.set()

        task = asyncio.ensure_future(consume())
        # Cancelled while it waits in the loop (a task cancelled before it ever started
        # iterating never reached the terminal: `async with` closes it on every way out).
        await asyncio.wait_for(reading.wait(), 20)
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
            raise AssertionError("the terminal's program still runs after its reader was cancelled")
        with pytest.raises(deskwire.ClosedError):
            await term.write(b"\n")
        # The session goes on.
        assert (await client.stat(str(pidfile)))["exists"]


async def test_unread_terminal_output_is_bounded(root: Path) -> None:
    limit = 64 * 1024
    async with await connect_local(root) as client:
        term = await client.pty(["yes"], cwd=str(root), max_buffered=limit)
        # Nobody reads: the client closes the terminal once the output passes the limit.
        for _ in range(1000):
            if term._inbox.overflowed:
                break
            await asyncio.sleep(0.02)
        got = 0
        with pytest.raises(deskwire.LocalError) as caught:
            async for event in term:
                assert isinstance(event, PtyOutput)
                got += len(event.data)
        assert caught.value.code == "too_large"
        assert got <= limit
        with pytest.raises(deskwire.LocalError):  # and every later read says the same
            await term.__anext__()
        # The connection still answers.
        assert (await client.stat(str(root)))["exists"]


class _Listener:
    """``rexd --listen 127.0.0.1:0`` with TLS (certificates made with openssl for the run) and a
    token file, optionally asking for client certificates signed by the run's CA."""

    TOKEN = "0123456789abcdef0123456789abcdef"
    METRICS_TOKEN = "fedcba9876543210fedcba9876543210"

    def __init__(self, root: Path, pki: Path, mtls: bool = False) -> None:
        import subprocess

        tokens = pki / "tokens"
        tokens.write_text(f"python:{self.TOKEN}\nprometheus:{self.METRICS_TOKEN}:metrics\n")
        tokens.chmod(0o600)
        args = [
            rexd_path(), "--listen", "127.0.0.1:0", "--root", str(root),
            "--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"),
        ]
        args += ["--client-ca", str(pki / "ca.pem")] if mtls else ["--token-file", str(tokens)]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        assert line.startswith("rexd: listening on https://"), line
        self.url = line.split(" on ", 1)[1].strip()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def pki() -> Iterator[Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate (CN=python)."""
    import subprocess

    with tempfile.TemporaryDirectory(prefix="deskwire-pki-") as d:
        p = Path(d)

        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], cwd=p, check=True, capture_output=True)

        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        openssl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=test CA", "-keyout", "ca.key", "-out", "ca.pem")
        (p / "server.ext").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        (p / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
        for name, subj in [("server", "/CN=localhost"), ("client", "/CN=python")]:
            openssl("req", *ec, "-subj", subj, "-keyout", f"{name}.key", "-out", f"{name}.csr")
            openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                    "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem")
        yield p


async def test_over_https_with_a_token(root: Path, pki: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    daemon = _Listener(root, pki)
    try:
        token_file = pki / "client-token"
        token_file.write_text(_Listener.TOKEN + "\n")
        async with await RexdClient.connect(
            daemon.url, token_file=str(token_file), ca_file=str(pki / "ca.pem"),
            workspace_roots=[str(root)],
        ) as client:
            assert client.session["protocol"] == "rexd/1"
            # On loopback compression would only cost CPU: not offered unless asked for.
            assert client.session.get("compression") is None
            await exercise(client, root)
            await raw_frames_exactly(client, root)
        # Asked for: raw zstd frames in binary messages, inflated here.
        seen = Inflations(monkeypatch)
        async with await RexdClient.connect(
            daemon.url, token_file=str(token_file), ca_file=str(pki / "ca.pem"), compression=True,
        ) as client:
            assert client.session["compression"] == "zstd" and client.session["raw_frames"] is True
            text = log_text(3 * 1024 * 1024)
            (root / "app.log").write_bytes(text)
            assert await client.read_file(str(root / "app.log")) == text
            assert seen.frames > 0 and seen.strings == 0
        monkeypatch.undo()
        # Without raw frames: every byte in JSON strings, as exact.
        async with await RexdClient.connect(
            daemon.url, token_file=str(token_file), ca_file=str(pki / "ca.pem"),
            workspace_roots=[str(root)], raw_frames=False, compression=False,
        ) as client:
            assert "raw_frames" not in client.session and "raw_output" not in client.session
            noise = os.urandom(200_000)
            (root / "noise.bin").write_bytes(noise)
            assert await client.read_file(str(root / "noise.bin")) == noise
            assert (await client.run(["cat", str(root / "noise.bin")]))[1] == noise
        # The token from the environment, and a wss:// URL.
        monkeypatch.setenv("REXD_TOKEN", _Listener.TOKEN)
        wss = daemon.url.replace("https://", "wss://")
        async with await RexdClient.connect(wss, ca_file=str(pki / "ca.pem")) as client:
            assert await client.run(["echo", "env"], cwd=str(root)) == (0, b"env\n", b"")
        monkeypatch.delenv("REXD_TOKEN")
        with pytest.raises(deskwire.RemoteError) as caught:
            await RexdClient.connect(daemon.url, ca_file=str(pki / "ca.pem"), token="wrong-token-wrong-token")
        assert caught.value.code == "unauthorized"
        # Plain text beyond this machine would carry the token in clear: refused before dialling.
        for far in ("http://10.1.2.3:7070", "ws://rexd.example:7070", "http://[2001:db8::1]:80"):
            with pytest.raises(deskwire.LocalError, match="loopback only") as refused:
                await RexdClient.connect(far, token=_Listener.TOKEN)
            assert refused.value.code == "bad_target"
        # A token put in the target by mistake is refused, and no message shows it.
        for with_token in (f"https://limited:{_Listener.TOKEN}@127.0.0.1:7070",
                           f"https://127.0.0.1:7070/?token={_Listener.TOKEN}"):
            with pytest.raises(deskwire.LocalError, match="give only host and port") as refused:
                await RexdClient.connect(with_token, token=_Listener.TOKEN)
            assert _Listener.TOKEN not in str(refused.value) and "127.0.0.1:7070" in str(refused.value)
        # Files that cannot be used are named with their keyword.
        der = pki / "ca.der"
        import subprocess

        subprocess.run(["openssl", "x509", "-in", str(pki / "ca.pem"), "-outform", "der", "-out", str(der)], check=True)
        for keywords, says in [
            ({"ca_file": str(pki / "missing.pem")}, "ca_file .*missing.pem: No such file"),
            ({"ca_file": str(der)}, "ca_file .*ca.der: no PEM certificate in it"),
            ({"ca_file": str(pki / "ca.pem"), "client_cert": str(pki / "client.pem"),
              "client_key": str(pki / "server.key")}, "does not belong to this certificate"),
        ]:
            with pytest.raises(deskwire.LocalError, match=says) as bad:
                await RexdClient.connect(daemon.url, token=_Listener.TOKEN, **keywords)
            assert bad.value.code == "bad_setting"
        with pytest.raises(deskwire.ConnectFailedError, match="a TLS port. use https://") as plain_to_tls:
            await RexdClient.connect(daemon.url.replace("https://", "http://"), token=_Listener.TOKEN, timeout=5)
        assert not isinstance(plain_to_tls.value, deskwire.TlsError)
        # The daemon's answers to a token it does not take, and to one of another scope.
        ca = str(pki / "ca.pem")
        for token, code in [("f" * 32, "unauthorized"), (_Listener.METRICS_TOKEN, "forbidden")]:
            with pytest.raises(deskwire.RemoteError) as refused:
                await RexdClient.connect(daemon.url, token=token, ca_file=ca, timeout=5)
            assert refused.value.code == code and not isinstance(refused.value, deskwire.LocalError)
        # A server certificate nobody vouches for, and TLS to a port that does not speak it.
        with pytest.raises(deskwire.TlsError, match=r"certificate verify failed: .* \(give the server's CA with ca_file=\)") as unverified:
            await RexdClient.connect(daemon.url, token=_Listener.TOKEN)
        assert unverified.value.code == "tls_failed" and isinstance(unverified.value, ConnectionError)
        with socket.socket() as plain:
            plain.bind(("127.0.0.1", 0))
            plain.listen()
            url = f"https://127.0.0.1:{plain.getsockname()[1]}"
            accepting = asyncio.get_running_loop().run_in_executor(None, lambda: answer_plain_text(plain))
            with pytest.raises(deskwire.TlsError, match="a plain-text port"):
                await RexdClient.connect(url, token=_Listener.TOKEN, timeout=5)
            await accepting
            # An HTTP server that is not a rexd --listen.
            accepting = asyncio.get_running_loop().run_in_executor(None, lambda: answer_plain_text(plain))
            with pytest.raises(deskwire.ConnectFailedError, match="answered HTTP 400: not a rexd --listen"):
                await RexdClient.connect(url.replace("https://", "http://"), token=_Listener.TOKEN, timeout=5)
            await accepting
    finally:
        daemon.stop()


def answer_plain_text(listener: socket.socket) -> None:
    """Answers one connection with an HTTP error, as a plain-text port answers a TLS hello."""
    conn, _ = listener.accept()
    with conn:
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")


async def test_over_https_with_a_client_certificate(root: Path, pki: Path) -> None:
    daemon = _Listener(root, pki, mtls=True)
    try:
        async with await RexdClient.connect(
            daemon.url, ca_file=str(pki / "ca.pem"), client_cert=str(pki / "client.pem"),
            client_key=str(pki / "client.key"),
        ) as client:
            assert await client.run(["echo", "mtls"], cwd=str(root)) == (0, b"mtls\n", b"")
        # No client certificate for a daemon that asks for one.
        with pytest.raises(deskwire.TlsError):
            await RexdClient.connect(daemon.url, ca_file=str(pki / "ca.pem"))
    finally:
        daemon.stop()


async def test_over_a_websocket_a_cut_link_is_resumed(root: Path, pki: Path) -> None:
    """A proxy between client and daemon drops every connection mid-command: the client dials
    again and resumes by itself; every line arrives once, and the exit code."""
    import subprocess

    tokens = pki / "resume-tokens"
    tokens.write_text(f"python:{_Listener.TOKEN}\n")
    tokens.chmod(0o600)
    daemon = subprocess.Popen(
        [rexd_path(), "--listen", "127.0.0.1:0", "--root", str(root), "--allow-shell",
         "--token-file", str(tokens)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert daemon.stdout is not None
    port = int(daemon.stdout.readline().decode().rsplit(":", 1)[1])
    links: List[asyncio.StreamWriter] = []

    async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(65536):
                w.write(data)
                await w.drain()
        except ConnectionError:
            pass
        finally:
            w.close()

    async def relay(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        sr, sw = await asyncio.open_connection("127.0.0.1", port)
        links.extend([cw, sw])
        await asyncio.gather(pipe(cr, sw), pipe(sr, cw))

    proxy = await asyncio.start_server(relay, "127.0.0.1", 0)
    proxy_port = proxy.sockets[0].getsockname()[1]
    try:
        client = await RexdClient.connect(
            f"http://127.0.0.1:{proxy_port}", token=_Listener.TOKEN, resume=True
        )
        script = 'i=1; while [ $i -le 40 ]; do echo "line $i"; i=$((i+1)); sleep 0.05; done; exit 5'
        out = bytearray()
        exit_: Optional[ExecExit] = None
        cut = False
        async for event in client.exec(script, cwd=str(root)):
            if isinstance(event, ExecOutput):
                out += event.data
                if not cut and out.count(b"\n") >= 10:
                    cut = True
                    for w in links:
                        w.transport.abort()
                    links.clear()
            else:
                exit_ = event
        assert cut
        # The output came as binary messages, and those kept while the link was down as well.
        assert client.session["raw_output"] is True
        assert out.decode().splitlines() == [f"line {i}" for i in range(1, 41)]
        assert exit_ is not None and exit_.exit_code == 5
        # It was resumed, not merely never cut: the daemon counted one resume.
        metrics = await client.call("rexd.metrics")
        assert "rexd_sessions_resumed_total 1\n" in metrics["text"], metrics["text"]
        await client.close()
    finally:
        proxy.close()
        daemon.terminate()
        daemon.wait(timeout=10)


def _refused_handshake(status: int) -> Exception:
    """What websockets raises for a /ws answered with an HTTP ``status`` (a proxy's 503)."""
    from websockets.datastructures import Headers
    from websockets.exceptions import InvalidStatus
    from websockets.http11 import Response

    return InvalidStatus(Response(status, "Service Unavailable", Headers()))


async def _cut_mid_command(client: RexdClient, root: Path) -> "tuple[bytes, Optional[ExecExit]]":
    """Runs a command that prints 30 lines, cutting the link (TCP, no close) after the fifth;
    returns its output and its exit."""
    script = 'i=1; while [ $i -le 30 ]; do echo "line $i"; i=$((i+1)); sleep 0.05; done; exit 5'
    out = bytearray()
    exit_: Optional[ExecExit] = None
    cut = False
    async for event in client.exec(["sh", "-c", script], cwd=str(root)):
        if isinstance(event, ExecOutput):
            out += event.data
            if not cut and out.count(b"\n") >= 5:
                cut = True
                client._ws.transport.abort()
        else:
            exit_ = event
    assert cut
    return bytes(out), exit_


async def test_a_refused_handshake_while_resuming_is_tried_again(root: Path, pki: Path) -> None:
    """A re-dial that fails in the WebSocket handshake (an HTTP status, a hang-up) or times out
    is one more failed try, as a refused connection is: the client dials again on its schedule
    and resumes; the command's every line arrives once, and its exit."""
    from websockets.exceptions import InvalidHandshake

    daemon = _Listener(root, pki)
    try:
        client = await RexdClient.connect(
            daemon.url, token=_Listener.TOKEN, ca_file=str(pki / "ca.pem"), resume=True
        )
        real = client._dial
        assert real is not None
        failures: List[BaseException] = [
            _refused_handshake(503), InvalidHandshake("the daemon hung up"), asyncio.TimeoutError()
        ]
        dials = 0

        async def flaky() -> Any:
            nonlocal dials
            dials += 1
            if failures:
                raise failures.pop(0)
            return await real()

        client._dial = flaky
        out, exit_ = await asyncio.wait_for(_cut_mid_command(client, root), 30)
        assert dials == 4
        assert out.decode().splitlines() == [f"line {i}" for i in range(1, 31)]
        assert exit_ is not None and exit_.exit_code == 5
        metrics = await client.call("rexd.metrics")
        assert "rexd_sessions_resumed_total 1\n" in metrics["text"], metrics["text"]
        await client.close()
    finally:
        daemon.stop()


async def test_a_resume_whose_handshake_is_always_refused_ends_the_client(root: Path, pki: Path) -> None:
    """Every re-dial refused in the handshake: after its last try the client ends as when the
    daemon cannot be reached, the command's reader told why, not left waiting."""
    daemon = _Listener(root, pki)
    try:
        client = await RexdClient.connect(
            daemon.url, token=_Listener.TOKEN, ca_file=str(pki / "ca.pem"), resume=True
        )
        dials = 0

        async def refused() -> Any:
            nonlocal dials
            dials += 1
            raise _refused_handshake(503)

        client._dial = refused
        # The six tries wait 15.7 s in all.
        with pytest.raises(deskwire.ClosedError) as caught:
            await asyncio.wait_for(_cut_mid_command(client, root), 40)
        assert caught.value.code == "disconnected"
        assert "the REXD connection closed" in str(caught.value), caught.value
        assert dials == 6 and client._resuming is None
        with pytest.raises(deskwire.ClosedError):
            await client.stat(str(root))
        await client.close()
    finally:
        daemon.stop()


_BAD_WS_ANSWERS = {
    # A binary message whose line announces more bytes than it carries.
    "short": ("binary", b'{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s_1",'
              b'"process_id":"p_1","seq":1,"data":"","encoding":"raw","raw_bytes":10}}\nabc'),
    # Output bytes in a text message: on /ws they come in binary messages only.
    "text": ("text", '{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s_1",'
             '"process_id":"p_1","seq":1,"data":"","encoding":"raw","raw_bytes":3}}'),
    # A binary message without a header line.
    "headless": ("binary", b"\x00" * 64),
    # A binary message in a session that did not take raw frames.
    "unasked": ("binary", b'{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s_1",'
                b'"process_id":"p_1","seq":1,"data":"","encoding":"raw","raw_bytes":3}}\nabc'),
}


@pytest.mark.parametrize("case", sorted(_BAD_WS_ANSWERS))
async def test_a_websocket_daemon_that_breaks_the_raw_framing_is_cut_off(case: str) -> None:
    """A daemon on /ws that grants raw output (or, for ``unasked``, does not), then sends a
    malformed message after ``exec.start``: the client closes the link (1002) and the command's
    caller hears why, at once."""
    import json

    from websockets.asyncio.server import serve
    from websockets.exceptions import ConnectionClosed

    kind, bad = _BAD_WS_ANSWERS[case]
    closed_with: List[Optional[int]] = []

    async def daemon(ws: Any) -> None:
        with contextlib.suppress(ConnectionClosed):
            await answer(ws)
        closed_with.append(ws.close_code)

    async def answer(ws: Any) -> None:
        async for message in ws:
            call = json.loads(message)
            if call["method"] == "session.open":
                granted = {"raw_frames": True, "raw_output": True} if case != "unasked" else {}
                result = {"session_id": "s_1", "protocol": "rexd/1", "server_version": "fake",
                          "capabilities": ["exec"], "limits": {}, "workspace_roots": ["/"], **granted}
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": call["id"], "result": result}))
            elif call["method"] == "exec.start":
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": call["id"], "result": {"process_id": "p_1"}}))
                await ws.send(bad)

    async with serve(daemon, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        client = await RexdClient.connect(f"http://127.0.0.1:{port}", compression=False)
        assert bool(client.session.get("raw_output")) == (case != "unasked")
        with pytest.raises(deskwire.ClosedError) as caught:
            async with asyncio.timeout(10):
                async for _ in client.exec(["true"]):
                    pass
        assert "raw framing" in str(caught.value), caught.value
        await client.close()
    assert closed_with == [1002]


# --- what a caller gets wrong, said at once ---------------------------------------------------


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")], ids=["0", "-1", "nan", "inf"])
async def test_a_connect_timeout_that_is_not_positive_is_refused_before_anything_starts(timeout: float) -> None:
    """Refused before the daemon starts: a missing rexd would say ``not_found`` otherwise."""
    with pytest.raises(deskwire.LocalError, match=f"timeout must be a positive number of seconds, not {timeout!r}") as caught:
        await RexdClient.connect("local", rexd="/nonexistent/rexd", timeout=timeout)
    assert caught.value.code == "invalid_value"
    with pytest.raises(deskwire.LocalError, match="timeout must be a positive"):
        await RexdClient.connect("https://127.0.0.1:9", token=_Listener.TOKEN, timeout=timeout)


@pytest.mark.parametrize("timeout", ["5", True], ids=["str", "bool"])
async def test_a_connect_timeout_that_is_no_number_is_a_type_error(timeout: Any) -> None:
    """A TypeError naming the parameter, and no call left unawaited behind it."""
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match="timeout is a number of seconds"):
            await RexdClient.connect("local", rexd=rexd_path(), timeout=timeout)
        gc.collect()
    assert not [w for w in seen if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in seen]


async def test_no_session_in_time_says_what_it_waited_for(root: Path) -> None:
    """A daemon that reads and never answers: a RequestTimeout with words, not a bare one."""
    mute = root / "mute-rexd"
    mute.write_text("#!/bin/sh\nwhile IFS= read -r line; do :; done\n")
    mute.chmod(0o755)
    with pytest.raises(deskwire.RequestTimeout, match="no answer to session.open within 300 ms"):
        await asyncio.wait_for(RexdClient.connect("local", rexd=str(mute), timeout=0.3), 10)


async def test_stdin_too_large_for_one_message_is_refused_before_it_is_sent(root: Path) -> None:
    """A stdin= past a daemon's 16 MiB line raises at once (the daemon would drop the line and
    the call wait out its timeout), counting JSON's escapes; one that fits runs."""
    async with await RexdClient.connect("local", rexd=rexd_path(), rexd_args=["--root", str(root)]) as client:
        with pytest.raises(deskwire.LocalError, match=r"more than the 16777216 a daemon takes; write the input to a file") as caught:
            await asyncio.wait_for(client.run(["wc", "-c"], stdin="x" * (17 << 20)), 5)
        assert caught.value.code == "too_large"
        # 3 Mi characters, 18 MiB as \u0001 escapes.
        with pytest.raises(deskwire.LocalError, match="too_large"):
            await asyncio.wait_for(client.exec(["wc", "-c"], stdin="\x01" * (3 << 20)).__anext__(), 5)
        assert await asyncio.wait_for(client.run(["wc", "-c"], stdin="x" * (2 << 20)), 10) == (0, b"2097152\n", b"")
        with pytest.raises(TypeError, match="stdin must be a str, not bytes"):
            await client.run(["wc", "-c"], stdin=b"abc")  # type: ignore[arg-type]


async def test_an_argv_of_anything_but_str_is_a_type_error(root: Path) -> None:
    async with await RexdClient.connect("local", rexd=rexd_path(), rexd_args=["--root", str(root)]) as client:
        with pytest.raises(TypeError, match=r"argv must be a list of str .*; argv\[0\] is bytes"):
            await client.exec([b"echo"]).__anext__()  # type: ignore[list-item]
        with pytest.raises(TypeError, match=r"argv\[1\] is int"):
            await client.run(["echo", 1])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="argv must be a list of str .*, not bytes"):
            await client.run(b"echo hi")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"argv\[0\] is bytes"):
            await client.pty([b"sh"])  # type: ignore[list-item]
        assert await client.run(["echo", "still here"]) == (0, b"still here\n", b"")


async def test_connect_arguments_of_the_wrong_kind_are_said(root: Path) -> None:
    with pytest.raises(TypeError, match=r"rexd_args must be a list of str, not str: pass rexd_args=\['--allow-shell'\]"):
        await RexdClient.connect("local", rexd=rexd_path(), rexd_args="--allow-shell")
    with pytest.raises(TypeError, match="workspace_roots must be a list of str, not str"):
        await RexdClient.connect("local", rexd=rexd_path(), workspace_roots=str(root))
    with pytest.raises(TypeError, match=r"rexd_args\[1\] is PosixPath"):
        await RexdClient.connect("local", rexd=rexd_path(), rexd_args=["--root", root])  # type: ignore[list-item]
    # A rexd= that is there but no program: as one that is not there.
    text = root / "not-a-program"
    text.write_text("hello\n")
    for path in (text, root):
        with pytest.raises(deskwire.LocalError, match=f"cannot start {path}: Permission denied: not an executable program") as caught:
            await RexdClient.connect("local", rexd=str(path))
        assert caught.value.code == "not_found"


async def test_token_settings_that_cannot_be_used_never_show_the_token(root: Path, pki: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before dialling, naming where the token came from, never its value."""
    secret = _Listener.TOKEN
    url = "https://127.0.0.1:9"  # not dialled
    monkeypatch.setenv("REXD_TOKEN", f"{secret[:16]}\x1b{secret[16:]}")
    bad_file = pki / "bad-token"
    bad_file.write_text(f"{secret[:16]} {secret[16:]}\n")
    empty_file = pki / "empty-token"
    empty_file.write_text("\n" + secret + "\n")
    for keywords, says in [
        ({"token": f"{secret[:16]} {secret[16:]}"}, "token=: the token holds white space"),
        ({"token": f"{secret}\x7f"}, "token=: the token holds white space, a control character"),
        ({"token": " \n"}, "token=: empty"),
        ({"token_file": str(bad_file)}, f"token_file {bad_file}: the token holds white space"),
        ({"token_file": str(empty_file)}, f"token_file {empty_file}: its first line is empty"),
        ({}, r"\$REXD_TOKEN: the token holds white space"),
        ({"token_file": str(pki / "nope")}, f"token_file {pki / 'nope'}: No such file or directory"),
        ({"token_file": str(pki)}, f"token_file {pki}: Is a directory"),
    ]:
        with pytest.raises(deskwire.LocalError, match=says) as caught:
            await RexdClient.connect(url, **keywords)
        assert caught.value.code == "bad_setting"
        assert secret[:16] not in str(caught.value) and secret[16:] not in str(caught.value)


async def test_a_token_is_trimmed_and_a_shared_token_file_is_used_with_a_warning(
    root: Path, pki: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import traceback

    from deskwire.aio import rexd as client_module

    daemon = _Listener(root, pki)
    ca = str(pki / "ca.pem")
    try:
        # A pasted line end or spaces around the token are not part of it.
        async with await RexdClient.connect(daemon.url, token=_Listener.TOKEN + "\n", ca_file=ca, timeout=5) as client:
            assert await client.run(["echo", "trimmed"]) == (0, b"trimmed\n", b"")
        monkeypatch.setenv("REXD_TOKEN", f"  {_Listener.TOKEN}\r\n")
        async with await RexdClient.connect(daemon.url, ca_file=ca, timeout=5) as client:
            assert await client.run(["echo", "env"]) == (0, b"env\n", b"")
        monkeypatch.delenv("REXD_TOKEN")
        token_file = pki / "shared-token"
        token_file.write_text(f" {_Listener.TOKEN} \r\n")
        token_file.chmod(0o644)
        with caplog.at_level("WARNING", logger="deskwire.aio.rexd"):
            async with await RexdClient.connect(daemon.url, token_file=str(token_file), ca_file=ca, timeout=5) as client:
                assert await client.run(["echo", "shared"]) == (0, b"shared\n", b"")
        assert f"the token file {token_file} is readable by group or others (mode 644); `chmod 600` it" in caplog.text
        caplog.clear()
        token_file.chmod(0o600)
        with caplog.at_level("WARNING", logger="deskwire.aio.rexd"):
            async with await RexdClient.connect(daemon.url, token_file=str(token_file), ca_file=ca, timeout=5):
                pass
        assert "readable by group or others" not in caplog.text
        # Were a token with a line end to reach websockets, which quotes a header it refuses:
        # neither the message nor the traceback holds it.
        monkeypatch.setattr(client_module, "_checked_token", lambda value, where, empty: value)
        with pytest.raises(deskwire.ConnectFailedError) as caught:
            await RexdClient.connect(daemon.url, token=_Listener.TOKEN + "\n", ca_file=ca, timeout=5)
        told = "".join(traceback.format_exception(type(caught.value), caught.value, caught.value.__traceback__))
        assert "Authorization header" in told and _Listener.TOKEN not in told, told
    finally:
        daemon.stop()


async def test_a_port_that_says_nothing_or_hangs_up_is_said_in_words() -> None:
    """Not a rexd --listen on the port: the reason is never empty."""
    import re
    import threading

    def serve(listener: socket.socket, hang_up: bool, held: List[socket.socket], stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (socket.timeout, OSError):
                continue
            if hang_up:
                conn.close()
            else:
                held.append(conn)

    for hang_up in (False, True):
        held: List[socket.socket] = []
        stop = threading.Event()
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            listener.settimeout(0.1)
            port = listener.getsockname()[1]
            thread = threading.Thread(target=serve, args=(listener, hang_up, held, stop), daemon=True)
            thread.start()
            try:
                for scheme in ("https", "http"):
                    with pytest.raises(deskwire.ConnectFailedError) as caught:
                        await asyncio.wait_for(
                            RexdClient.connect(f"{scheme}://localhost:{port}", token=_Listener.TOKEN, timeout=0.5), 5
                        )
                    said = str(caught.value)
                    assert not re.search(r"failed: *\(", said), said
                    if hang_up:
                        assert re.search(r"connection ended during the handshake|hung up during the handshake|reset", said), said
                    else:
                        assert "no answer to the TLS or WebSocket handshake within 500 ms (a port that accepts and does not answer" in said
            finally:
                stop.set()
                thread.join(5)
                for conn in held:
                    conn.close()
