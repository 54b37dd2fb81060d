"""deskwire.sidecar.serve in a real child process (examples/sidecar.py), driven over its
stdin/stdout with the sidecar peer: concurrency, progress, errors, garbage, shutdown."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Dict, List

from deskwire import Timeout, Transmit, jsonrpc
from deskwire.aio import now_ms

from peers import REPO

SIDECAR = REPO / "examples" / "sidecar.py"


class Driver:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.peer = jsonrpc.Peer("sidecar", seed=3)
        self.events: List[Any] = []

    async def flush(self) -> None:
        assert self.process.stdin is not None
        while True:
            out = self.peer.poll_output(now_ms())
            if isinstance(out, Transmit):
                self.process.stdin.write(out.data)
            elif isinstance(out, Timeout):
                break
            else:
                self.events.append(out)
        await self.process.stdin.drain()

    async def until(self, done: Any, seconds: float = 20) -> None:
        assert self.process.stdout is not None
        deadline = asyncio.get_running_loop().time() + seconds
        await self.flush()
        while not done():
            left = deadline - asyncio.get_running_loop().time()
            assert left > 0, f"gave up waiting; events: {self.events}"
            data = await asyncio.wait_for(self.process.stdout.read(65536), left)
            assert data, "the sidecar closed its stdout"
            self.peer.handle_bytes(now_ms(), data)
            await self.flush()

    def answer(self, call_id: Any) -> Any:
        for e in self.events:
            if isinstance(e, (jsonrpc.Response, jsonrpc.Failed)) and e.id == call_id:
                return e
        return None


async def test_sidecar_serves_concurrently_with_progress_and_errors() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(SIDECAR),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    d = Driver(process)
    train = d.peer.call(now_ms(), "training.start",
                        {"model_id": "m", "dataset_path": "/d", "config": {"max_epochs": 5}})
    slow = d.peer.call(now_ms(), "inference.complete", {"prompt": "slow one", "delay_sec": 0.5})
    ping = d.peer.call(now_ms(), "health.ping", {})
    # The ping is answered while the training and the slow call are still running.
    await d.until(lambda: d.answer(ping) is not None)
    assert d.answer(train) is None and d.answer(slow) is None
    assert d.answer(ping).result["status"] == "ok"

    assert process.stdin is not None
    process.stdin.write(b"this is not json\n{\"id\": 5}\n\xff\xfe\n")
    missing = d.peer.call(now_ms(), "model.load", {"model_id": "nope"})
    unknown = d.peer.call(now_ms(), "no.such.method", {})
    await d.until(lambda: all(d.answer(i) is not None for i in (train, slow, missing, unknown)))
    progress = [e.progress["epoch"] for e in d.events if isinstance(e, jsonrpc.Progress) and e.id == train]
    assert progress == [1, 2, 3, 4, 5]
    assert d.answer(train).result["status"] == "completed"
    assert d.answer(slow).result["text"] == "slow one"
    assert d.answer(missing).remote["code"] == "MODEL_NOT_FOUND"
    assert d.answer(unknown).remote["code"] == "UNKNOWN_METHOD"

    bye = d.peer.call(now_ms(), "lifecycle.shutdown", {})
    await d.until(lambda: d.answer(bye) is not None)
    assert d.answer(bye).result == {"status": "shutting_down"}
    assert await asyncio.wait_for(process.wait(), 10) == 0
    assert process.stderr is not None
    log = (await process.stderr.read()).decode()
    assert "epoch 5/5" in log


async def test_sidecar_ends_at_end_of_input() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(SIDECAR),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b'{"id": "a", "method": "health.ping", "params": {}}\n')
    process.stdin.close()
    out = await asyncio.wait_for(process.stdout.read(), 10)
    assert b'"id":"a"' in out and b'"status":"ok"' in out
    assert await asyncio.wait_for(process.wait(), 10) == 0
