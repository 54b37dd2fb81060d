"""The asyncio pump every driver runs: closing it leaves nothing pending behind
("Task was destroyed but it is pending!" after close, trial finding 20)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
from typing import Any, List

from deskwire import jsonrpc, sidecar
from deskwire.aio.pump import _Pump


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: List[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def serve_and_shut_down() -> None:
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    served = asyncio.ensure_future(sidecar.serve_async({}, reader=reader, writer=writer))
    host_reader, host_writer = await asyncio.open_connection(sock=theirs)
    host_writer.write(b'{"id":"a","method":"health.ping","params":{}}\n')
    host_writer.write(b'{"id":"z","method":"lifecycle.shutdown","params":{}}\n')
    await host_writer.drain()
    lines = [await asyncio.wait_for(host_reader.readline(), 10) for _ in range(2)]
    assert b'"shutting_down"' in b"".join(lines), lines
    await asyncio.wait_for(served, 10)
    writer.close()
    host_writer.close()


async def pump_then_cancel() -> None:
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    ended: List[bool] = []
    pump = _Pump(jsonrpc.Peer("sidecar"), reader, writer, lambda event: None, lambda: ended.append(True))
    await asyncio.sleep(0.01)  # the pump waits on its read and its wake-up
    pump.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pump.task
    assert ended == [True]
    writer.close()
    theirs.close()


def test_closing_leaves_no_task_pending() -> None:
    collect = Collect()
    logger = logging.getLogger("asyncio")
    logger.addHandler(collect)

    async def rounds() -> None:
        # One loop for all the rounds, as a long-running host has: what a closed pump left
        # pending is collected while the loop still runs.
        for _ in range(3):
            await serve_and_shut_down()
            await pump_then_cancel()
            gc.collect()
            await asyncio.sleep(0.05)
            gc.collect()

    try:
        asyncio.run(rounds())
        gc.collect()
    finally:
        logger.removeHandler(collect)
    destroyed: List[Any] = [r.getMessage() for r in collect.records if "destroyed" in r.getMessage()]
    assert destroyed == [], destroyed
