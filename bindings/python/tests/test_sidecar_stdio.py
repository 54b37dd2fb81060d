"""deskwire.sidecar.serve in a real child process whose stdin and stdout are what a user gives
it by hand: regular files (``< requests.ndjson``, ``> out.txt``) as well as pipes, and what the
serve loop answers for the handler's own mistakes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

SERVE = '''
import asyncio, sys
from deskwire import sidecar

async def echo(params, progress):
    progress({"stage": "echo"})
    await asyncio.sleep(0)
    return {"text": params["text"]}

sidecar.serve({"echo": echo})
'''

REQUESTS = (
    b'{"id":"p","method":"health.ping","params":{}}\n'
    b'{"id":"e","method":"echo","params":{"text":"hi"}}\n'
    b'not json\n'
    b'{"id":"s","method":"health.ping","params":{"x":"\\ud800"}}\n'
    b'{"id":"b","method":"health.ping","params":{}}\n'
)


def answers(out: bytes) -> Dict[str, Dict[str, Any]]:
    by_id: Dict[str, Dict[str, Any]] = {}
    for line in out.splitlines():
        message = json.loads(line)
        if "progress" not in message:
            assert message["id"] not in by_id, f"answered twice: {message}"
            by_id[message["id"]] = message
    return by_id


def check(out: bytes) -> None:
    got = answers(out)
    assert got["p"]["result"]["status"] == "ok"
    assert got["b"]["result"]["status"] == "ok"
    # The unreadable request is answered with the reason, and the next one still runs.
    assert got["s"]["error"]["code"] == "INVALID_PARAMS", got["s"]
    assert "unreadable params" in got["s"]["error"]["message"]
    # The echo either ran or was cut short by the end of input; either way it is answered.
    assert "e" in got


@pytest.mark.parametrize("stdin_kind, stdout_kind", [("file", "file"), ("file", "pipe"), ("pipe", "file")])
def test_serve_takes_regular_files_for_stdin_and_stdout(
    tmp_path: Path, stdin_kind: str, stdout_kind: str
) -> None:
    script = tmp_path / "serve.py"
    script.write_text(SERVE)
    requests = tmp_path / "requests.ndjson"
    requests.write_bytes(REQUESTS)
    out_path = tmp_path / "out.txt"
    with open(requests, "rb") as stdin_file, open(out_path, "wb") as stdout_file:
        process = subprocess.run(
            [sys.executable, str(script)],
            stdin=stdin_file if stdin_kind == "file" else None,
            input=None if stdin_kind == "file" else REQUESTS,
            stdout=stdout_file if stdout_kind == "file" else subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    assert process.returncode == 0, process.stderr.decode()
    assert b"Traceback" not in process.stderr, process.stderr.decode()
    out = out_path.read_bytes() if stdout_kind == "file" else process.stdout
    check(out)


def test_serve_replays_a_file_and_answers_every_request_once(tmp_path: Path) -> None:
    script = tmp_path / "serve.py"
    script.write_text(SERVE)
    lines: List[bytes] = [
        b'{"id":"%d","method":"health.ping","params":{}}\n' % i for i in range(1000)
    ]
    requests = tmp_path / "requests.ndjson"
    requests.write_bytes(b"".join(lines))
    out_path = tmp_path / "out.txt"
    with open(requests, "rb") as stdin_file, open(out_path, "wb") as stdout_file:
        process = subprocess.run(
            [sys.executable, str(script)], stdin=stdin_file, stdout=stdout_file,
            stderr=subprocess.PIPE, timeout=60,
        )
    assert process.returncode == 0, process.stderr.decode()
    got = answers(out_path.read_bytes())
    assert sorted(got, key=int) == [str(i) for i in range(1000)]
    assert all("result" in m or m["error"]["code"] == "INTERNAL_ERROR" for m in got.values())
