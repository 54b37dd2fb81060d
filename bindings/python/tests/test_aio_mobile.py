"""deskwire.aio.MobileClient, the phone end, over a real WebSocket to ``examples/mobile_desktop``
(Axum, the core's mobile server engine, a scripted agent): pairing by code, the agent's run with
a permission approved from the phone, reconnecting with the stored token after the desktop
restarts, a revoked token refused, and a wrong code."""

from __future__ import annotations

import asyncio
import json
import logging
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


async def every_event(phone: MobileClient) -> List[Any]:
    """What ``async for event in phone`` gives until it ends (it must, within 20 s)."""
    async def go() -> List[Any]:
        return [event async for event in phone]
    return await asyncio.wait_for(go(), 20)


async def test_a_final_refusal_ends_the_iteration(tokens: Path) -> None:
    """A refused code or token is not retried, so ``async for`` ends after saying so instead of
    waiting forever for events that cannot come."""
    desktop = await Desktop.start(tokens)
    try:
        url = (await desktop.line("listening on ")).split()[-1]
        code = (await desktop.line("pairing code: ")).split()[-1]
        wrong = "000000" if code != "000000" else "111111"
        async with await MobileClient.pair(url, wrong) as phone:
            events = await every_event(phone)
            assert isinstance(events[-1], mobile.AuthFailed), events
            assert phone.connection_state == "idle" and phone.token is None
            with pytest.raises(StopAsyncIteration):
                await phone.__anext__()  # and it stays ended
        async with await MobileClient.connect(url, "zz" * 32) as phone:
            events = await every_event(phone)
            assert isinstance(events[-1], mobile.TokenRejected), events
            assert [e.reason for e in events if isinstance(e, mobile.Disconnected)] == ["unauthorized"]
            assert phone.connection_state == "idle"
        with pytest.raises(deskwire.ClosedError):
            await phone.__anext__()  # closed after the end: closed wins, as for every client
    finally:
        await desktop.stop()


async def test_wait_ready_then_send_at_once(tokens: Path) -> None:
    """``pair``/``connect`` return before the socket is open; ``wait_ready`` is the point from
    which ``send_*`` work, and it says at once when the desktop refused."""
    desktop = await Desktop.start(tokens)
    try:
        url = (await desktop.line("listening on ")).split()[-1]
        code = (await desktop.line("pairing code: ")).split()[-1]
        async with await MobileClient.pair(url, code) as phone:
            await asyncio.wait_for(phone.wait_ready(), 20)
            phone.send_command({"action": "start", "task": "right away"})  # no not_connected
            said = await next_of(phone, mobile.Message, lambda e: "right away" in e.content)
            assert said.role in ("assistant", "system")
            await phone.wait_ready()  # up already: returns at once
            token = phone.token
        assert token is not None
        async with await MobileClient.connect(url, token) as phone:
            await asyncio.wait_for(phone.wait_ready(), 20)
            phone.send_message("hello")
        # Refusals are final: LoginFailedError at once, not a timeout.
        async with await MobileClient.connect(url, "zz" * 32) as phone:
            with pytest.raises(deskwire.LoginFailedError) as refused:
                await asyncio.wait_for(phone.wait_ready(), 20)
            assert refused.value.code == "login_failed" and "refused the token" in refused.value.message
        wrong = "000000" if code != "000000" else "111111"
        async with await MobileClient.pair(url, wrong) as phone:
            with pytest.raises(deskwire.LoginFailedError) as refused:
                await asyncio.wait_for(phone.wait_ready(), 20)
            assert "refused the pairing code" in refused.value.message
        with pytest.raises(deskwire.ClosedError):
            await phone.wait_ready()
    finally:
        await desktop.stop()


async def test_wait_ready_times_out_saying_why() -> None:
    async with await MobileClient.connect("ws://127.0.0.1:9/ws", "some-token") as phone:
        with pytest.raises(deskwire.NotReadyError) as late:
            await phone.wait_ready(timeout=0.5)
        assert isinstance(late.value, TimeoutError)
        assert late.value.code == "not_ready" and "the last try failed" in late.value.message
        with pytest.raises(deskwire.LocalError) as early:
            phone.send_message("too early")
        assert early.value.code == "not_connected"


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
    with pytest.raises(TypeError, match="code is a str"):
        await MobileClient.pair("ws://127.0.0.1:9/ws", 123456)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="token is a str"):
        await MobileClient.connect("ws://127.0.0.1:9/ws", b"tok")  # type: ignore[arg-type]


# --- against a scripted desktop (the websockets server), for what the real one never sends.

STATE = json.dumps({"type": "agent_state_update", "payload": {"status": "Idle", "data": None}})


def chat(content: str) -> str:
    return json.dumps({"type": "message", "payload": {"role": "assistant", "content": content,
                                                      "timestamp": "2026-02-18T12:00:00Z"}})


class ScriptedDesktop:
    """Sends ``script`` (text frames) to every phone that connects, then keeps the socket
    open; counts the connections and keeps what the phones sent."""

    def __init__(self, script: List[str]) -> None:
        self.script = script
        self.connections = 0
        self.got: List[str] = []
        self.server: Any = None

    async def __aenter__(self) -> "ScriptedDesktop":
        serve = pytest.importorskip("websockets.asyncio.server").serve
        self.server = await serve(self.handler, "127.0.0.1", 0, max_size=None)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/ws"

    async def handler(self, ws: Any) -> None:
        self.connections += 1
        for frame in self.script:
            await ws.send(frame)
        async for message in ws:
            self.got.append(message)


async def test_a_frame_over_the_engine_bound_is_ignored_and_counted_not_a_reconnect_loop() -> None:
    """docs: frames over ``max_message_bytes`` (1 MiB) are ignored and counted. The transport
    takes up to four times that, so the engine applies its rule and the connection stays."""
    big = chat("x" * (2 << 20))
    async with ScriptedDesktop([STATE, big, chat("after the big one")]) as desk:
        async with await MobileClient.connect(desk.url, "ab" * 32) as phone:
            seen: List[Any] = []
            await next_of(phone, mobile.Message, lambda e: e.content == "after the big one", seen=seen)
            assert not any(isinstance(e, mobile.Disconnected) for e in seen), seen
            stats = phone.stats()
            assert (stats["too_large"], stats["connects"], stats["sessions"]) == (1, 1, 1), stats
        assert desk.connections == 1

    # Past the transport's bound the socket closes; the engine does not come back every second,
    # since a session that ends right after the sync does not start the backoff over.
    assert len(STATE) < 200
    async with ScriptedDesktop([STATE, chat("x" * 400)]) as desk:
        async with await MobileClient.connect(desk.url, "ab" * 32, max_frame=200) as phone:
            waits = [e.retry_in_ms for e in [await next_of(phone, mobile.Disconnected)]]
            await next_of(phone, mobile.StateChanged)  # it came back after its wait...
            waits.append((await next_of(phone, mobile.Disconnected)).retry_in_ms)
            assert waits == [1000, 2000], waits  # ...and the next wait is longer


async def test_permission_requests_dropped_past_the_cap_are_counted() -> None:
    asks = [json.dumps({"type": "permission_request", "payload": {
        "id": f"p{i}", "tool_name": "shell", "command": f"rm {i}", "description": "d", "tier": "high"}})
        for i in range(100)]
    async with ScriptedDesktop([STATE, *asks, chat("done asking")]) as desk:
        async with await MobileClient.connect(desk.url, "ab" * 32) as phone:
            seen: List[Any] = []
            await next_of(phone, mobile.Message, lambda e: e.content == "done asking", seen=seen)
            assert len([e for e in seen if isinstance(e, mobile.PermissionRequested)]) == 100
            assert phone.pending_permissions == [f"p{i}" for i in range(36, 100)]
            stats = phone.stats()
            assert (stats["pending_permissions"], stats["dropped"]) == (64, 36), stats
            with pytest.raises(deskwire.LocalError) as gone:
                phone.respond_permission("p0", approved=False)
            assert gone.value.code == "unknown_permission"
            phone.respond_permission("p36", approved=True)


async def test_the_token_and_the_code_never_reach_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    """With every logger at DEBUG (the websockets package logs requests, headers and frames
    there), neither the bearer token nor a pairing code appears in any record."""
    caplog.set_level(logging.DEBUG)
    token = "tok-" + "9f" * 16
    paired = json.dumps({"type": "auth_result", "payload": {"token": token, "success": True}})
    async with ScriptedDesktop([STATE, chat("hello")]) as desk:
        async with await MobileClient.connect(desk.url, token) as phone:
            await next_of(phone, mobile.Message)
    async with ScriptedDesktop([paired, STATE, chat("hello")]) as desk:
        async with await MobileClient.pair(desk.url, "482913") as phone:
            await next_of(phone, mobile.Message)
        assert any("482913" in m for m in desk.got)  # it was sent, just not logged
    # The phone's records; the scripted desktop's own (websockets.server) are the test's.
    phone_side = [r for r in caplog.records if r.name.startswith("deskwire")]
    assert any(r.levelno == logging.DEBUG for r in phone_side), "nothing was logged at DEBUG"
    records = [r.getMessage() + (caplog.handler.format(r) if r.exc_info else "") for r in phone_side]
    leaks = [m for m in records if token in m or "482913" in m]
    assert not leaks, leaks
