"""A sidecar handler reports progress as fast as it can while the host does not read the
sidecar's stdout (trial finding 12): the sidecar's memory stays bounded (each request's unsent
report is replaced by the newest), and once the host reads, every request is answered and the
last report of each is its newest."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

FLOOD = '''
import asyncio, time
from deskwire import sidecar

async def flood(params, progress):
    end = time.monotonic() + params["seconds"]
    n = 0
    while time.monotonic() < end:
        progress({"n": n, "pad": "x" * 200})
        n += 1
        if n % 1000 == 0:
            await asyncio.sleep(0)
    return {"count": n}

sidecar.serve({"flood": flood})
'''

FLOOD_SECONDS = 5
BOUND_KB = 24 * 1024
"""How much the sidecar's resident memory may grow while nobody reads: the pipe and the
transport's buffer plus one report per request. Before the fix it grew by about 40 MB a second
of flooding."""


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def send(process: "subprocess.Popen[bytes]", message: Dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def test_progress_faster_than_the_host_reads_keeps_memory_bounded(tmp_path: Path) -> None:
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    process = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        send(process, {"id": "ping", "method": "health.ping", "params": {}})
        assert b'"ping"' in process.stdout.readline()
        before = rss_kb(process.pid)
        ids = [f"flood-{i}" for i in range(3)]
        for call_id in ids:
            send(process, {"id": call_id, "method": "flood", "params": {"seconds": FLOOD_SECONDS}})
        # Nobody reads stdout while the handlers flood.
        most = before
        for _ in range(4 * (FLOOD_SECONDS + 1)):
            time.sleep(0.25)
            most = max(most, rss_kb(process.pid))
        send(process, {"id": "bye", "method": "lifecycle.shutdown", "params": {}})
        out, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0
    assert most - before < BOUND_KB, f"RSS grew from {before} kB to {most} kB"

    lines: List[Dict[str, Any]] = [json.loads(line) for line in out.splitlines()]
    results = {m["id"]: m["result"] for m in lines if "result" in m}
    assert results["bye"] == {"status": "shutting_down"}
    for call_id in ids:
        count = results[call_id]["count"]
        assert count > 0
        reports = [m["progress"]["n"] for m in lines if m["id"] == call_id and "progress" in m]
        assert reports == sorted(reports) and len(set(reports)) == len(reports)
        assert reports[-1] == count - 1, "the newest report is the last one sent"
