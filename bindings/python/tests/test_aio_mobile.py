"""deskwire.aio.MobileClient, the phone end, over a real WebSocket to ``examples/mobile_desktop``
(Axum, the core's mobile server engine, a scripted agent): pairing by code, the agent's run with
a permission approved from the phone, reconnecting with the stored token after the desktop
restarts, a revoked token refused, and a wrong code."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any, AsyncIterator, Callable, List, Optional, Type

import pytest

import deskwire
from deskwire import mobile
from deskwire.aio import MobileClient

from peers import REPO, stop


def desktop_path() -> str:
    path = os.environ.get("DESKWIRE_MOBILE_DESKTOP") or str(REPO / "target" / "debug" / "mobile_desktop")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no mobile_desktop at {path}: cargo build -p mobile_desktop")
    return path


class Desktop:
    """examples/mobile_desktop on a free loopback port; its stdout lines are read as they come."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: List[str] = []

    @classmethod
    async def start(cls, tokens: Path) -> "Desktop":
        process = await asyncio.create_subprocess_exec(
            desktop_path(), "--port", "0", "--tokens", str(tokens),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def line(self, starts: str) -> str:
        """The next line starting with ``starts`` (the lines before it are kept in ``lines``)."""
        assert self.process.stdout is not None

        async def go() -> str:
            while True:
                raw = await self.process.stdout.readline()  # type: ignore[union-attr]
                if not raw:
                    raise AssertionError(f"mobile_desktop ended; it said {self.lines}")
                text = raw.decode().rstrip("\n")
                self.lines.append(text)
                if text.startswith(starts):
                    return text
        return await asyncio.wait_for(go(), 20)

    async def type(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command.encode() + b"\n")
        await self.process.stdin.drain()

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 5)
            except asyncio.TimeoutError:
                self.process.kill()
                await self.process.wait()


@pytest.fixture
async def tokens() -> AsyncIterator[Path]:
    with tempfile.TemporaryDirectory(prefix="deskwire-phones-") as d:
        yield Path(d) / "tokens"


async def next_of(phone: MobileClient, kind: Type[Any], where: Callable[[Any], bool] = lambda e: True,
                  seen: Optional[List[Any]] = None) -> Any:
    """The next event of type ``kind`` (matching ``where``); the others go to ``seen``."""
    async def go() -> Any:
        async for event in phone:
            if isinstance(event, kind) and where(event):
                return event
            if seen is not None:
                seen.append(event)
        raise AssertionError("the phone's events ended")
    return await asyncio.wait_for(go(), 20)


async def test_pair_run_a_task_and_reconnect_with_the_token(tokens: Path) -> None:
    desktop = await Desktop.start(tokens)
    try:
        url = (await desktop.line("listening on ")).split()[-1]
        code = (await desktop.line("pairing code: ")).split()[-1]
        # One event at most waits for the reader: the pump stops reading frames until it reads.
        async with await MobileClient.pair(url, code, max_events=1) as phone:
            paired = await next_of(phone, mobile.Paired)
            assert paired.token and phone.token == paired.token
            initial = await next_of(phone, mobile.StateChanged)
            assert initial.initial and initial.state["status"] == "Idle"

            phone.send_command({"action": "start", "task": "tidy the desk"})
            seen: List[Any] = []
            asked = await next_of(phone, mobile.PermissionRequested, seen=seen)
            running = [e.state for e in seen if isinstance(e, mobile.StateChanged)]
            assert running and running[0]["status"] == "Running"
            assert any(isinstance(e, mobile.Message) and "tidy the desk" in e.content for e in seen)
            phone.respond_permission(asked.id, approved=True)
            stopped = await next_of(phone, mobile.StateChanged, lambda e: e.state["status"] == "Stopped")
            assert stopped.state["data"]["reason"] == "Completed"
            await desktop.line(f"permission {asked.id}: approved=true")

            phone.send_message("héllo from the phone")
            said = await next_of(phone, mobile.Message, lambda e: "héllo from the phone" in e.content)
            assert said.role == "assistant"
            token = phone.token
        assert token is not None

        # The desktop restarts; the phone comes back with its token (kept in the tokens file).
        await desktop.stop()
        desktop = await Desktop.start(tokens)
        url = (await desktop.line("listening on ")).split()[-1]
        async with await MobileClient.connect(url, token) as phone:
            await next_of(phone, mobile.Connected)
            synced = await next_of(phone, mobile.StateChanged)
            assert synced.initial
            assert phone.connection_state == {"online": {"synced": True}}

        # Revoked on the desktop: the same token is refused at the upgrade (401).
        await desktop.type(f"revoke {token}")
        assert await desktop.line("revoked") == "revoked: true"
        async with await MobileClient.connect(url, token) as phone:
            refused = await next_of(phone, (mobile.TokenRejected, mobile.Disconnected))  # type: ignore[arg-type]
            if isinstance(refused, mobile.Disconnected):
                assert refused.reason == "unauthorized", refused
            assert phone.connection_state == "idle"
    finally:
        await desktop.stop()


async def test_a_wrong_code_fails_and_nothing_hangs(tokens: Path) -> None:
    desktop = await Desktop.start(tokens)
    try:
        url = (await desktop.line("listening on ")).split()[-1]
        code = (await desktop.line("pairing code: ")).split()[-1]
        wrong = "000000" if code != "000000" else "111111"
        async with await MobileClient.pair(url, wrong) as phone:
            failed = await next_of(phone, mobile.AuthFailed)
            assert failed is not None and phone.token is None
        with pytest.raises(deskwire.ClosedError):
            await phone.__anext__()
        with pytest.raises(deskwire.ClosedError):
            phone.send_message("after close")
    finally:
        await desktop.stop()


async def test_nothing_listening_is_a_disconnect_not_a_crash() -> None:
    async with await MobileClient.connect("ws://127.0.0.1:9/ws", "some-token") as phone:
        gone = await next_of(phone, mobile.Disconnected)
        assert "failed" in gone.reason and gone.retry_in_ms  # the engine will try again
    with pytest.raises(deskwire.LocalError):
        await MobileClient.pair("ws://127.0.0.1:9/ws", "12")  # not a six-digit code


@pytest.mark.parametrize("url", ["not a url", "http://127.0.0.1:9120/ws", "127.0.0.1:9120"])
async def test_a_url_that_is_no_websocket_url_is_refused_at_once(url: str) -> None:
    """Not a Disconnected event retried forever: the URL can never work."""
    for opening in (MobileClient.pair(url, "123456"), MobileClient.connect(url, "some-token")):
        with pytest.raises(deskwire.LocalError) as refused:
            await opening
        assert refused.value.code == "invalid_value"
        assert "is not a WebSocket URL (ws://HOST:PORT/PATH" in refused.value.message
    with pytest.raises(TypeError):
        await MobileClient.connect(None, "some-token")  # type: ignore[arg-type]
