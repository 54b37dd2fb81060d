"""``deskwire.aio.GatewayClient``, the Commander, against a real ``GatewayServer`` over a loopback
WebSocket: a job from creation to its final state through ``call`` and ``stream``, the
gateway's error answers as typed errors, a refused token, a job already final, a connection
that ends under a waiting call and a stream, and the wrong arguments."""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import json
from typing import Any, Dict, List

import pytest

import deskwire
from deskwire import gateway, jsonrpc
from deskwire.aio import GatewayClient, GatewayServer, JobEvents, Reconnect

pytest.importorskip("websockets.asyncio.client")

TOKEN = "s3cr3t-token"


def url(server: GatewayServer) -> str:
    return f"ws://127.0.0.1:{server.port}/ws"


async def next_event(server: GatewayServer) -> Any:
    return await asyncio.wait_for(server.__anext__(), 10)


async def _all(events: JobEvents) -> List[Dict[str, Any]]:
    return [event async for event in events]


async def test_a_job_from_creation_to_its_final_state() -> None:
    async with await GatewayServer.serve([TOKEN]) as server:
        async with await GatewayClient.connect(url(server), TOKEN) as commander:
            job = {"job": {"jobId": "j1", "repo": "org/repo", "policy": {"requireApprovals": False}}}
            assert await commander.call("jobs.create", job) == {"jobId": "j1", "status": "CREATED"}
            assert await next_event(server) == gateway.JobCreated(job_id="j1")
            stream = await commander.stream("j1")  # subscribed when this returns
            second = await commander.stream("j1")
            assert (await commander.call("jobs.start", {"jobId": "j1"}))["status"] == "RUNNING"
            server.log("j1", "info", "Running tests ✓")
            server.review_ready("j1", {"summary": "tests pass", "checks": {"tests": "pass"}})
            server.complete("j1")
            # The stream ends by itself after the final state.
            events: List[Dict[str, Any]] = await asyncio.wait_for(_all(stream), 10)
            assert [e.get("status") for e in events if "status" in e] == [
                "QUEUED", "RUNNING", "REVIEW_READY", "COMPLETED"]
            assert "Running tests ✓" in [e["msg"] for e in events]
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            result = await commander.call("jobs.result", {"jobId": "j1"})
            assert (result["status"], result["summary"]) == ("COMPLETED", "tests pass")
            # A second stream of the job had all its events queued; closed, it ends at once.
            assert "waiting=" in repr(second) and "waiting=0" not in repr(second)
            second.close()
            assert [e async for e in second] == []
            # A job already final: the stream yields nothing and ends.
            assert [e async for e in await commander.stream("j1")] == []
            pong = await commander.call("gateway.ping", {"echo": "hi"})
            assert pong["echo"] == "hi"
            assert commander.dropped_events == 0


async def test_the_gateways_error_answers_are_typed_errors_with_their_details() -> None:
    async with await GatewayServer.serve([TOKEN]) as server:
        async with await GatewayClient.connect(url(server), TOKEN) as commander:
            with pytest.raises(deskwire.GatewayError) as missing:
                await commander.call("jobs.status", {"jobId": "nope"})
            assert missing.value.code == "E_NOT_FOUND"
            assert missing.value.details == {"jobId": "nope"}
            job = {"job": {"jobId": "j2", "repo": "a/b"}}
            await commander.call("jobs.create", job)
            with pytest.raises(deskwire.GatewayError) as conflict:
                await commander.call("jobs.create", {"job": {"jobId": "j2", "repo": "other/repo"}})
            assert conflict.value.code == "E_CONFLICT"
            with pytest.raises(deskwire.GatewayError) as unknown:
                await commander.call("jobs.explode", {})
            assert unknown.value.code.startswith("E_"), unknown.value.code
            # The connection is still good.
            assert (await commander.call("jobs.status", {"jobId": "j2"}))["status"] == "CREATED"


async def test_a_refused_token_and_an_address_nobody_serves_never_show_the_token() -> None:
    async with await GatewayServer.serve([TOKEN]) as server:
        with pytest.raises(deskwire.GatewayError) as refused:
            await GatewayClient.connect(url(server), "wrong-token")
        assert (refused.value.code, refused.value.details) == ("E_UNAUTHORIZED", None)
        assert "wrong-token" not in str(refused.value)
        # The token in the URL too (the server takes ?token=): no message shows it.
        with pytest.raises(deskwire.GatewayError) as in_query:
            await GatewayClient.connect(url(server) + "?token=wrong-token", "wrong-token")
        with pytest.raises(deskwire.ConnectFailedError) as elsewhere:
            await GatewayClient.connect(f"ws://127.0.0.1:{server.port}/elsewhere?token={TOKEN}", TOKEN)
        assert "404" in str(elsewhere.value)
        port = server.port
    with pytest.raises(deskwire.ConnectFailedError) as nobody:
        await GatewayClient.connect(f"ws://bob:{TOKEN}@127.0.0.1:{port}/ws?token={TOKEN}", TOKEN, timeout=5)
    for error in (in_query.value, elsewhere.value, nobody.value):
        assert TOKEN not in str(error) and "wrong-token" not in str(error), error
        assert "<the token>" in str(error) or "bob" not in str(error), error
        assert "<the token> token>" not in str(error), error  # replaced once, not twice


async def test_a_request_the_gateway_would_drop_is_refused_before_it_is_sent() -> None:
    async with await GatewayServer.serve([TOKEN], maxMessageBytes=64 * 1024) as server:
        async with await GatewayClient.connect(url(server), TOKEN, max_message_bytes=64 * 1024) as commander:
            big = {"job": {"jobId": "j5", "repo": "a/b", "instructions": {"goal": "x" * 70_000}}}
            with pytest.raises(deskwire.LocalError) as refused:
                await commander.call("jobs.create", big)
            assert refused.value.code == "too_large" and "max_message_bytes" in str(refused.value)
            # Nothing was sent, and the connection is as good as before.
            assert server.stats()["ignored"] == 0
            assert (await commander.call("gateway.ping", {"echo": "ok"}))["echo"] == "ok"


async def test_an_answer_that_cannot_be_read_ends_the_call_at_once() -> None:
    """A gateway of another major version: its answer is refused, and the call ends with it
    instead of waiting out its 30 s."""
    server_mod = pytest.importorskip("websockets.asyncio.server")

    async def v2(ws: Any) -> None:
        async for message in ws:
            request = json.loads(message)
            await ws.send(json.dumps({"v": "2.0", "id": request["id"], "type": "response",
                                      "ts": "2026-02-18T12:00:00Z", "ok": True, "result": {}}))

    async with server_mod.serve(v2, "127.0.0.1", 0) as rogue:
        port = rogue.sockets[0].getsockname()[1]
        async with await GatewayClient.connect(f"ws://127.0.0.1:{port}/ws", TOKEN) as commander:
            started = asyncio.get_running_loop().time()
            with pytest.raises(deskwire.ProtocolError) as unreadable:
                await asyncio.wait_for(commander.call("gateway.ping", {}), 20)
            assert unreadable.value.code == "malformed" and "version" in str(unreadable.value)
            assert asyncio.get_running_loop().time() - started < 20


async def test_a_gateway_that_never_answers_ends_the_call_at_call_timeout() -> None:
    server_mod = pytest.importorskip("websockets.asyncio.server")
    heard: List[str] = []

    async def silent(ws: Any) -> None:
        async for message in ws:
            heard.append(json.loads(message)["op"])

    async with server_mod.serve(silent, "127.0.0.1", 0) as mute:
        port = mute.sockets[0].getsockname()[1]
        async with await GatewayClient.connect(f"ws://127.0.0.1:{port}/ws", TOKEN, call_timeout=0.3) as commander:
            with pytest.raises(deskwire.RequestTimeout) as late:
                await asyncio.wait_for(commander.call("jobs.status", {"jobId": "j"}), 20)
            assert isinstance(late.value, TimeoutError)
            assert "jobs.status" in str(late.value) and "300 ms (call_timeout)" in str(late.value)
            # One call given less time by the caller: it stops waiting, and the next call works
            # the same way.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(commander.call("gateway.ping", {}), 0.05)
            with pytest.raises(deskwire.RequestTimeout):
                await asyncio.wait_for(commander.call("jobs.result", {"jobId": "j"}), 20)
    assert heard == ["jobs.status", "gateway.ping", "jobs.result"]
    for wrong in (0, -1.0, float("nan")):
        with pytest.raises(deskwire.LocalError, match="call_timeout"):
            await GatewayClient.connect("ws://127.0.0.1:1/ws", TOKEN, call_timeout=wrong)
    with pytest.raises(TypeError, match="call_timeout"):
        await GatewayClient.connect("ws://127.0.0.1:1/ws", TOKEN, call_timeout=None)  # type: ignore[arg-type]


class _Proxy:
    """A loopback TCP relay in front of the gateway that the test can cut: ``hold()`` stops
    passing the gateway's bytes on (so a call waits), ``drop()`` closes every connection
    through it; new connections are still relayed."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.held = False
        self.connections = 0
        self._writers: List[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers += [client_w, up_w]

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter, from_gateway: bool) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await r.read(65536):
                    while from_gateway and self.held:
                        await asyncio.sleep(0.01)
                    w.write(data)
                    await w.drain()
            w.close()

        await asyncio.gather(pipe(client_r, up_w, False), pipe(up_r, client_w, True))

    def drop(self) -> None:
        for w in self._writers:
            w.transport.abort()
        self._writers.clear()
        self.held = False

    async def close(self) -> None:
        self.drop()
        self._server.close()


async def test_a_dropped_connection_comes_back_with_its_streams() -> None:
    fast = Reconnect(min_delay=0.05, max_delay=0.2)
    async with await GatewayServer.serve([TOKEN]) as server:
        proxy = _Proxy(server.port)
        port = await proxy.start()
        try:
            async with await GatewayClient.connect(f"ws://127.0.0.1:{port}/ws", TOKEN, reconnect=fast) as commander:
                for job_id in ("j1", "j2"):
                    await commander.call("jobs.create", {"job": {"jobId": job_id, "repo": "a/b",
                                                                 "policy": {"requireApprovals": False}}})
                one, two = await commander.stream("j1"), await commander.stream("j2")
                await commander.call("jobs.start", {"jobId": "j1"})
                await commander.call("jobs.start", {"jobId": "j2"})
                assert [(await one.__anext__())["status"] for _ in range(2)] == ["QUEUED", "RUNNING"]
                assert [(await two.__anext__())["status"] for _ in range(2)] == ["QUEUED", "RUNNING"]

                # A call waiting when the connection drops ends with it: it is not sent again.
                proxy.held = True
                waiting = asyncio.ensure_future(commander.call("jobs.status", {"jobId": "j1"}))
                await asyncio.sleep(0.2)
                server.log("j1", "info", "lost in the gap")
                server.fail("j2", {"code": "E_INTERNAL", "message": "gone while we were away"})
                proxy.drop()
                with pytest.raises(deskwire.DisconnectedError, match="reconnecting"):
                    await asyncio.wait_for(waiting, 10)

                # A call made while reconnecting waits for the next connection.
                assert (await asyncio.wait_for(commander.call("gateway.ping", {"echo": "back"}), 10))["echo"] == "back"
                assert commander.reconnects == 1 and proxy.connections == 2

                # Each stream's first event after the gap says so, with the job's state then;
                # j2 ended while the connection was down, and its stream ends with that.
                resumed = await asyncio.wait_for(one.__anext__(), 10)
                assert (resumed["resumed"], resumed["status"], resumed["level"]) == (True, "RUNNING", "warn")
                assert "seq" not in resumed
                rest = await asyncio.wait_for(_all(two), 10)
                assert [(e.get("resumed"), e["status"]) for e in rest] == [(True, "FAILED")]
                # j1 goes on, subscribed on the new connection.
                server.log("j1", "info", "after the gap")
                server.review_ready("j1", {"summary": "ok"})
                server.complete("j1")
                after = await asyncio.wait_for(_all(one), 10)
                assert "after the gap" in [e["msg"] for e in after]
                assert "lost in the gap" not in [e["msg"] for e in after]
                assert after[-1]["status"] == "COMPLETED"
        finally:
            await proxy.close()


async def test_reconnecting_ends_on_close_and_on_a_gateway_that_forgot_the_job() -> None:
    fast = Reconnect(min_delay=0.05, max_delay=0.2)
    server = await GatewayServer.serve([TOKEN])
    port = server.port
    commander = await GatewayClient.connect(url(server), TOKEN, reconnect=fast, call_timeout=0.5)
    await commander.call("jobs.create", {"job": {"jobId": "j1", "repo": "a/b"}})
    stream = await commander.stream("j1")
    await server.close()  # the gateway stops: its jobs are gone with it
    # No gateway: a call waits for a connection within call_timeout, then says why it failed.
    with pytest.raises(deskwire.RequestTimeout, match="still reconnecting"):
        await asyncio.wait_for(commander.call("gateway.ping", {}), 10)
    # A new gateway on the same port: the connection comes back, and the stream learns that
    # the job is not known there.
    async with await GatewayServer.serve([TOKEN], port=port):
        with pytest.raises(deskwire.GatewayError) as forgot:
            await asyncio.wait_for(stream.__anext__(), 10)
        assert forgot.value.code == "E_NOT_FOUND"
        assert commander.reconnects == 1
    # Closing while reconnecting stops it at once: waiting calls end with ClosedError.
    waiting = asyncio.ensure_future(commander.call("gateway.ping", {}))
    await asyncio.sleep(0.1)
    await asyncio.wait_for(commander.close(), 10)
    with pytest.raises(deskwire.ClosedError):
        await asyncio.wait_for(waiting, 10)
    with pytest.raises(TypeError, match="reconnect"):
        await GatewayClient.connect(url(server), TOKEN, reconnect=1)  # type: ignore[arg-type]
    assert url(server) == f"ws://127.0.0.1:{port}/ws"  # a closed server still says where it was


async def test_a_stream_reader_that_falls_behind_loses_the_newest_events_counted() -> None:
    async with await GatewayServer.serve([TOKEN]) as server:
        async with await GatewayClient.connect(url(server), TOKEN, max_events=2) as commander:
            await commander.call("jobs.create", {"job": {"jobId": "j4", "repo": "a/b", "policy": {"requireApprovals": False}}})
            stream = await commander.stream("j4")
            await commander.call("jobs.start", {"jobId": "j4"})  # QUEUED, RUNNING
            for i in range(10):
                server.log("j4", "info", f"line {i}")
            await commander.call("gateway.ping", {})  # everything sent before the answer is read
            server.fail("j4", {"code": "E_INTERNAL", "message": "stop"})
            await commander.call("gateway.ping", {})
            seen = await asyncio.wait_for(_all(stream), 10)  # ends at FAILED: never dropped
            assert seen[-1]["status"] == "FAILED", seen
            assert commander.dropped_events > 0
            assert len(seen) + commander.dropped_events == 13, (seen, commander.dropped_events)
            # The seq numbers show the reader what it missed.
            assert seen[-1]["seq"] == 13 and len(seen) < 13


async def test_a_connection_that_ends_ends_the_waiting_call_and_the_stream() -> None:
    server = await GatewayServer.serve([TOKEN])
    commander = await GatewayClient.connect(url(server), TOKEN)
    await commander.call("jobs.create", {"job": {"jobId": "j3", "repo": "a/b"}})
    stream = await commander.stream("j3")
    started = asyncio.ensure_future(stream.__anext__())
    await server.close()
    with pytest.raises(deskwire.ClosedError):
        await asyncio.wait_for(started, 10)
    with pytest.raises(deskwire.ClosedError) as after:
        await commander.call("gateway.ping", {})
    assert "closed" in str(after.value)
    with pytest.raises(deskwire.ClosedError):
        await stream.__anext__()  # and stays ended
    assert "closed" in str(after.value) and str(after.value).count("the gateway") <= 1, after.value
    await commander.close()
    await commander.close()  # again: nothing


async def test_the_wrong_arguments_are_refused_before_anything_is_sent() -> None:
    with pytest.raises(deskwire.LocalError):
        await GatewayClient.connect("http://127.0.0.1:1/ws", TOKEN)
    with pytest.raises(deskwire.LocalError):
        await GatewayClient.connect("ws://127.0.0.1:1/ws", " ")
    with pytest.raises(TypeError):
        await GatewayClient.connect("ws://127.0.0.1:1/ws", 5)  # type: ignore[arg-type]
    with pytest.raises(deskwire.LocalError):
        await GatewayClient.connect("ws://127.0.0.1:1/ws", TOKEN, max_events=0)
    async with await GatewayServer.serve([TOKEN]) as server:
        async with await GatewayClient.connect(url(server), TOKEN) as commander:
            with pytest.raises(TypeError, match="payload must be a dict, not list"):
                await commander.call("gateway.ping", ["not", "a", "dict"])  # type: ignore[arg-type]
            with pytest.raises(deskwire.LocalError, match="empty method"):
                await commander.call("", {})


def test_the_gateway_dialect_of_the_peer_stamps_token_and_time() -> None:
    with pytest.raises(deskwire.LocalError, match="token="):
        jsonrpc.Peer("gateway", epoch_unix_ms=0)
    with pytest.raises(deskwire.LocalError, match="epoch_unix_ms="):
        jsonrpc.Peer("gateway", token=TOKEN)
    epoch = calendar.timegm((2026, 2, 18, 12, 0, 0)) * 1000
    peer = jsonrpc.Peer("gateway", token=TOKEN, epoch_unix_ms=epoch)
    peer.call(5_000, "jobs.status", {"jobId": "j1"})
    sent = peer.poll_output(5_000)
    assert isinstance(sent, deskwire.Transmit)
    text = sent.data.decode()
    assert '"op":"jobs.status"' in text and f'"token":"{TOKEN}"' in text
    assert '"ts":"2026-02-18T12:00:05' in text, text
