"""deskwire.aio.GatewayServer, the gateway end of the gateway RPC, over real WebSockets on
loopback, with the ``websockets`` client as the Commander: a job from creation to completion with
a stream, an approval and the host's log; tokens in the header, the query and the envelope, and
wrong ones; a wrong path; the bounds on a message's size and on a connection's unsent messages;
misuse after close."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any, Dict, List, Optional

import pytest

import deskwire
from deskwire import gateway
from deskwire.aio import GatewayServer

client = pytest.importorskip("websockets.asyncio.client")
ws_errors = pytest.importorskip("websockets.exceptions")

TOKEN = "s3cr3t-token"


class Commander:
    """One WebSocket connection of the Commander: numbered requests, their responses, and the
    stream events that arrive between them."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.events: List[Dict[str, Any]] = []
        self.count = 0

    @classmethod
    async def connect(cls, url: str, token: Optional[str] = TOKEN) -> "Commander":
        headers = {"Authorization": f"Bearer {token}"} if token else None
        return cls(await client.connect(url, additional_headers=headers))

    async def call(self, op: str, payload: Dict[str, Any], **envelope: Any) -> Dict[str, Any]:
        self.count += 1
        rid = f"r{self.count}"
        message = {"v": "1.0", "id": rid, "type": "request", "ts": "2026-02-18T12:00:00Z",
                   "op": op, "payload": payload, **envelope}
        await self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
            if reply["type"] == "response" and reply["id"] == rid:
                return reply
            self.events.append(reply)

    async def event(self) -> Dict[str, Any]:
        if self.events:
            return self.events.pop(0)
        return json.loads(await asyncio.wait_for(self.ws.recv(), 10))


async def next_event(server: GatewayServer) -> Any:
    return await asyncio.wait_for(server.__anext__(), 10)


def url(server: GatewayServer, query: str = "") -> str:
    return f"ws://127.0.0.1:{server.port}/ws{query}"


async def test_a_job_from_creation_to_completion() -> None:
    async with await GatewayServer.serve([TOKEN]) as server:
        commander = await Commander.connect(url(server))
        job = {"job": {"jobId": "j1", "repo": "org/repo", "policy": {"requireApprovals": True}}}
        created = await commander.call("jobs.create", job)
        assert created["ok"] and created["result"] == {"jobId": "j1", "status": "CREATED"}
        assert created["ts"].endswith("Z")  # stamped by the driver from the wall clock
        assert await next_event(server) == gateway.JobCreated(job_id="j1")
        # Creating it again is idempotent: no second job, no second event.
        again = await commander.call("jobs.create", job)
        assert again["ok"] and again["result"]["jobId"] == "j1", again

        assert (await commander.call("jobs.stream", {"jobId": "j1"}))["ok"]
        started = await commander.call("jobs.start", {"jobId": "j1"})
        assert started["result"]["status"] == "RUNNING"
        assert await next_event(server) == gateway.StateChanged(job_id="j1", from_="CREATED", to="QUEUED")
        assert await next_event(server) == gateway.StateChanged(job_id="j1", from_="QUEUED", to="RUNNING")
        assert [(await commander.event())["payload"]["status"] for _ in range(2)] == ["QUEUED", "RUNNING"]

        # The host works: progress, a log line for the stream, an approval.
        server.set_progress("j1", "modify_code", 0.5)
        server.log("j1", "info", "Running tests ✓")
        logged = await commander.event()
        assert (logged["op"], logged["payload"]["msg"]) == ("jobs.event", "Running tests ✓")
        status = await commander.call("jobs.status", {"jobId": "j1"})
        assert (status["result"]["step"], status["result"]["progress"]) == ("modify_code", 0.5)
        ticket = server.request_approval("j1", "shell", "rm -rf build", "appr_1")
        assert ticket["status"] == "pending"
        assert "appr_1" in (await commander.event())["payload"]["msg"]
        approved = await commander.call(
            "approvals.approve", {"jobId": "j1", "approvalId": "appr_1", "reason": "ok by label"}
        )
        assert approved["ok"], approved
        assert await next_event(server) == gateway.ApprovalDecided(
            job_id="j1", approval_id="appr_1", decision="approve", reason="ok by label"
        )

        server.review_ready("j1", {"summary": "tests pass", "checks": {"tests": "pass"}})
        assert await next_event(server) == gateway.StateChanged(job_id="j1", from_="RUNNING", to="REVIEW_READY")
        server.complete("j1")
        assert await next_event(server) == gateway.StateChanged(job_id="j1", from_="REVIEW_READY", to="COMPLETED")
        while (event := await commander.event())["payload"].get("status") != "COMPLETED":
            pass
        assert server.job_state("j1") == "COMPLETED"
        assert server.job_state("nope") is None
        # The host's misuse is a typed error, and nothing is sent for it.
        with pytest.raises(deskwire.LocalError) as caught:
            server.transition("j1", "RUNNING")
        assert caught.value.code == "transition"
        await commander.ws.close()


async def test_tokens_in_the_header_the_query_and_the_envelope() -> None:
    async with await GatewayServer.serve([TOKEN]) as server:
        for token in ("wrong-token",):
            with pytest.raises(ws_errors.InvalidStatus) as refused:
                await Commander.connect(url(server), token)
            assert refused.value.response.status_code == 401
        with pytest.raises(ws_errors.InvalidStatus) as refused:
            await client.connect(url(server, "?token=wrong-token"))
        assert refused.value.response.status_code == 401
        with pytest.raises(ws_errors.InvalidStatus) as missing:
            await client.connect(f"ws://127.0.0.1:{server.port}/elsewhere")
        assert missing.value.response.status_code == 404

        by_query = Commander(await client.connect(url(server, "?token=" + TOKEN)))
        assert (await by_query.call("gateway.ping", {"echo": "q"}))["ok"]
        anonymous = await Commander.connect(url(server), token=None)
        refused_call = await anonymous.call("gateway.ping", {"echo": "a"})
        assert refused_call["error"]["code"] == "E_UNAUTHORIZED"
        in_envelope = await anonymous.call("gateway.ping", {"echo": "e"}, auth={"token": TOKEN})
        assert in_envelope["ok"], in_envelope
        # Malformed input: what has no id to answer is counted and dropped, an envelope with an
        # id is answered E_BAD_REQUEST, and the connection stays usable.
        await anonymous.ws.send("{not json")
        await anonymous.ws.send(b"\xff\xfe binary garbage")
        await anonymous.ws.send(json.dumps({"v": "1.0", "id": "bad"}))
        bad = json.loads(await asyncio.wait_for(anonymous.ws.recv(), 10))
        assert (bad["id"], bad["error"]["code"]) == ("bad", "E_BAD_REQUEST")
        assert server.stats()["ignored"] == 2
        assert (await anonymous.call("gateway.ping", {}, auth={"token": TOKEN}))["ok"]
        for c in (by_query, anonymous):
            await c.ws.close()


async def test_bounds_on_message_size_and_unsent_messages() -> None:
    async with await GatewayServer.serve([TOKEN], max_frame=4096, max_queued=2) as server:
        big = await Commander.connect(url(server))
        await big.ws.send(json.dumps({"v": "1.0", "id": "x", "pad": "a" * 8192}))
        with pytest.raises(ws_errors.ConnectionClosed) as closed:
            await asyncio.wait_for(big.ws.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009

        # jobs.start answers its caller and sends two stream events at once: three messages
        # for a connection allowed two unsent ones, which is closed rather than buffered.
        slow = await Commander.connect(url(server))
        assert (await slow.call("jobs.create", {"job": {"jobId": "j1", "repo": "r"}}))["ok"]
        assert (await slow.call("jobs.stream", {"jobId": "j1"}))["ok"]
        await slow.ws.send(json.dumps({"v": "1.0", "id": "s", "type": "request", "ts": "2026-02-18T12:00:00Z",
                                       "op": "jobs.start", "payload": {"jobId": "j1"}}))
        with pytest.raises(ws_errors.ConnectionClosed) as dropped:
            while True:
                await asyncio.wait_for(slow.ws.recv(), 10)
        assert dropped.value.rcvd is not None and dropped.value.rcvd.code == 1008

        # The server goes on serving others, and the job went on without the dropped stream.
        other = await Commander.connect(url(server))
        status = await other.call("jobs.status", {"jobId": "j1"})
        assert status["result"]["status"] == "RUNNING"
        await other.ws.close()


async def test_misuse_after_close() -> None:
    server = await GatewayServer.serve([TOKEN])
    port = server.port
    commander = await Commander.connect(url(server))
    await server.close()
    await server.close()  # twice is fine
    # The host's `async for event in server` ends; later reads end the same way.
    assert [event async for event in server] == []
    with pytest.raises(StopAsyncIteration):
        await next_event(server)
    with pytest.raises(deskwire.ClosedError):
        server.log("j1", "info", "late")
    with pytest.raises(ws_errors.ConnectionClosed):
        await asyncio.wait_for(commander.ws.recv(), 10)
    with pytest.raises(OSError):
        await client.connect(f"ws://127.0.0.1:{port}/ws")
    with pytest.raises(TypeError):
        await GatewayServer.serve(TOKEN)
    with pytest.raises(TypeError, match="tokens is a list of str; it holds a int"):
        await GatewayServer.serve([5])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        await GatewayServer.serve([TOKEN], max_events="many")  # type: ignore[arg-type]
    with pytest.raises(deskwire.LocalError) as caught:
        await GatewayServer.serve([TOKEN], max_queued=0)
    assert caught.value.code == "invalid_value"


async def test_past_max_connections_the_upgrade_is_refused_503_naming_the_limit() -> None:
    """Not accepted and then answered E_UNAUTHORIZED, which blames a valid token."""
    async with await GatewayServer.serve([TOKEN], maxConnections=2) as server:
        first, second = [await Commander.connect(url(server)) for _ in range(2)]
        for via in (lambda: Commander.connect(url(server)),
                    lambda: client.connect(url(server, "?token=" + TOKEN))):
            with pytest.raises(ws_errors.InvalidStatus) as refused:
                await via()
            response = refused.value.response
            assert response.status_code == 503
            assert b"too many connections" in response.body and b"maxConnections" in response.body
            assert TOKEN.encode() not in response.body
        # A wrong token is still told so, and the two inside are served.
        with pytest.raises(ws_errors.InvalidStatus) as wrong:
            await Commander.connect(url(server), "wrong-token")
        assert wrong.value.response.status_code == 401
        assert (await first.call("gateway.ping", {}))["ok"]
        # One leaves: the next gets in.
        await second.ws.close()
        for _ in range(100):
            try:
                third = await Commander.connect(url(server))
                break
            except ws_errors.InvalidStatus:
                await asyncio.sleep(0.05)  # the server has not seen the close yet
        assert (await third.call("gateway.ping", {}))["ok"]
        for c in (first, third):
            await c.ws.close()


async def test_a_message_over_max_message_bytes_is_ignored_and_counted() -> None:
    """gateway.md: longer messages are ignored and counted, the connection stays."""
    async with await GatewayServer.serve([TOKEN]) as server:
        commander = await Commander.connect(url(server))
        big = json.dumps({"v": "1.0", "id": "big", "type": "request", "ts": "2026-02-18T12:00:00Z",
                          "op": "gateway.ping", "payload": {"pad": "a" * (1 << 20)}})
        await commander.ws.send(big)
        pong = await commander.call("gateway.ping", {"echo": "still here"})
        assert pong["ok"], pong
        assert server.stats()["ignored"] == 1
        await commander.ws.close()


def test_the_docstring_names_config_keys_that_work() -> None:
    doc = GatewayServer.__doc__ or ""
    assert "max_jobs" not in doc and "run_slots" not in doc
    named = set(re.findall(r"``((?:max|gateway|default|require)[A-Z]\w*)``", doc))
    assert {"maxJobs", "maxRunning", "maxConnections", "maxMessageBytes"} <= named, named
    for key in named:
        value: Any = {"gatewayVersion": "9.9", "requireSandbox": True}.get(key, 7)
        gateway.Gateway([TOKEN], **{key: value})  # refused keys raise invalid_value


async def test_a_host_that_does_not_read_its_events_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    """Documented: past ``max_events`` nothing is read until the host reads. It is logged, so
    that the Commander's silent timeouts have an explanation on the gateway's side."""
    caplog.set_level(logging.WARNING, logger="deskwire.aio.gateway")
    async with await GatewayServer.serve([TOKEN], max_events=2) as server:
        commander = await Commander.connect(url(server))
        for n in range(3):
            await commander.call("jobs.create", {"job": {"jobId": f"j{n}", "repo": "r"}})
        await commander.ws.send(json.dumps({"v": "1.0", "id": "p", "type": "request",
                                            "ts": "2026-02-18T12:00:00Z", "op": "gateway.ping", "payload": {}}))
        for _ in range(100):
            if any("async for event in server" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.05)
        warned = [r for r in caplog.records if "async for event in server" in r.getMessage()]
        assert len(warned) == 1 and warned[0].levelno == logging.WARNING
        # The host reads: the server goes on, the ping is answered.
        assert [await next_event(server) for _ in range(3)] == [gateway.JobCreated(job_id=f"j{n}") for n in range(3)]
        reply = json.loads(await asyncio.wait_for(commander.ws.recv(), 10))
        assert (reply["id"], reply["ok"]) == ("p", True)
        await commander.ws.close()


async def test_tokens_never_reach_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    """gateway.md: secrets never reach logs, the websockets package's DEBUG records included
    (request lines, headers, frames)."""
    caplog.set_level(logging.DEBUG)
    async with await GatewayServer.serve([TOKEN]) as server:
        by_header = await Commander.connect(url(server))
        assert (await by_header.call("gateway.ping", {}))["ok"]
        by_query = Commander(await client.connect(url(server, "?token=" + TOKEN)))
        assert (await by_query.call("gateway.ping", {}))["ok"]
        anonymous = await Commander.connect(url(server), token=None)
        assert (await anonymous.call("gateway.ping", {}, auth={"token": TOKEN}))["ok"]
        for wrong in ("Bearer wrong-" + TOKEN, ):
            with pytest.raises(ws_errors.InvalidStatus):
                await client.connect(url(server), additional_headers={"Authorization": wrong})
        for c in (by_header, by_query, anonymous):
            await c.ws.close()
    server_side = [r for r in caplog.records if r.name.startswith("deskwire")]
    assert any(r.levelno == logging.DEBUG for r in server_side), "nothing was logged at DEBUG"
    leaks = [r.getMessage() for r in server_side if TOKEN in r.getMessage()]
    assert not leaks, leaks
