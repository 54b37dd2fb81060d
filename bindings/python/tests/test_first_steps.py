"""What a new user trips on first (issue 39, part 5): a misspelt ``connect`` keyword, a port
nobody listens on, and reading ``state`` and ``stats()`` after ``close()``, each as the user
meets it: a ``TypeError`` naming the parameter (and ``mypy`` seeing the typo), a
``DeskwireError`` that is an ``OSError`` too, and the last numbers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

import deskwire
from deskwire import oa1
from deskwire.aio import IrcDesk, IrcRemote, MobileClient, RexdClient

from peers import Ngircd, RexdIrc, free_port


@pytest.mark.parametrize("connect", [IrcDesk.connect, IrcRemote.connect])
async def test_a_misspelt_keyword_names_the_parameter(connect: object) -> None:
    with pytest.raises(TypeError) as raised:
        await connect("127.0.0.1", free_port(), secert="s3cret")  # type: ignore[operator]
    assert str(raised.value) == (
        "connect() got an unexpected keyword argument 'secert'; did you mean 'secret'?"
    )
    with pytest.raises(TypeError, match="'sesion'; did you mean 'session'"):
        await connect("127.0.0.1", free_port(), sesion={})  # type: ignore[operator]


async def test_a_misspelt_mobile_keyword_names_the_parameter() -> None:
    with pytest.raises(TypeError, match="'server_timeout'; did you mean 'server_timeout_ms'"):
        await MobileClient.connect("ws://127.0.0.1:9/ws", "t", server_timeout=5)  # type: ignore[call-arg]


def test_mypy_sees_a_misspelt_keyword(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(
        "from deskwire.aio import IrcDesk, MobileClient\n"
        "async def main() -> None:\n"
        "    await IrcDesk.connect('127.0.0.1', 6667, secert='x')\n"
        "    await IrcDesk.connect('127.0.0.1', 6667, oa1={'adaptive_payload': False},\n"
        "                          session={'ping_interval_ms': 1000}, peer_grace_ms=5)\n"
        "    await MobileClient.connect('ws://h/ws', 't', server_timeout_ms='5')\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(tmp_path / ".mypy_cache"), str(user)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, run.stdout + run.stderr
    assert 'user.py:3: error: Unexpected keyword argument "secert"' in errors[0]
    assert "user.py:6: error:" in errors[1] and "server_timeout_ms" in errors[1]


async def test_the_engine_config_still_reaches_the_engine() -> None:
    # Inside oa1={...} the names are the engine's, and so is the word on a misspelt one.
    with pytest.raises(deskwire.LocalError, match="unknown field `adaptive_paylod`"):
        await IrcDesk.connect("127.0.0.1", free_port(), oa1={"adaptive_paylod": False})
    with pytest.raises(deskwire.LocalError, match="expected u64"):
        await IrcDesk.connect("127.0.0.1", free_port(), peer_grace_ms=-1)


async def test_a_refused_connect_is_a_deskwire_error_and_an_os_error() -> None:
    port = free_port()  # nobody listens there
    with pytest.raises(deskwire.DeskwireError) as raised:
        await IrcDesk.connect("127.0.0.1", port)
    error = raised.value
    assert isinstance(error, deskwire.ConnectFailedError)
    assert isinstance(error, ConnectionError) and isinstance(error, OSError)
    assert f"127.0.0.1:{port}" in str(error) and "Connection refused" in str(error)


async def test_a_refused_rexd_listen_connect_is_a_deskwire_error_and_an_os_error() -> None:
    pytest.importorskip("websockets")
    port = free_port()
    with pytest.raises(deskwire.ConnectFailedError) as raised:
        await RexdClient.connect(f"http://127.0.0.1:{port}")
    assert isinstance(raised.value, OSError) and isinstance(raised.value, deskwire.DeskwireError)
    assert f"connect to 127.0.0.1:{port} failed: Connection refused" in str(raised.value)


def test_engine_state_and_stats_after_close() -> None:
    desk = oa1.Desk("desk", "#desk", seed=1, oa1={"allowed_sender": "rexd"})
    desk.handle_bytes(0, b":irc.example 001 desk :Welcome\r\n")
    before = desk.stats()
    assert before["irc"]["lines_received"] == 1
    desk.close()
    assert desk.closed and desk.state == "closed"
    assert desk.stats() == before  # the last numbers, not a ClosedError
    with pytest.raises(deskwire.ClosedError):
        desk.handle_bytes(0, b"PING :x\r\n")  # the engine itself is gone


@pytest.fixture
def server() -> Iterator[Ngircd]:
    s = Ngircd(penalties=False)
    yield s
    s.stop()


async def test_driver_state_and_stats_after_close(server: Ngircd) -> None:
    rexd = RexdIrc(server.port)
    try:
        desk = await IrcDesk.connect("127.0.0.1", server.port)
        await desk.remote_bash("true", timeout=30)
        before = desk.stats()
        await desk.close()
    finally:
        rexd.stop()
    assert desk.state == "closed"
    after = desk.stats()
    assert after["oa1"]["frames_out"] == before["oa1"]["frames_out"] > 0
    assert after["irc"]["lines_received"] >= before["irc"]["lines_received"] > 0
