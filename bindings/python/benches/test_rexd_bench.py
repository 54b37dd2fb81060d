"""``deskwire.aio.RexdClient`` next to ``rex`` (the Rust client) and plain ssh, in one run
(nothing is asserted about time):

- ``random``: a 10 MiB file of random bytes, read whole with ``RexdClient.read_file`` (pieces of
  the session's ``max_file_read_bytes``, three in flight, as ``rex read`` reads);
- ``text``: a 10 MiB file of log lines (the text of ``rexd/benches/ssh.rs``), read the same way;
- ``seq``: the output of ``seq 1 140000`` (0.9 MB of short lines, under the 1 MiB output cap an
  agent's session keeps).

``RexdClient`` runs three ways: raw frames with zstd (its defaults over ssh), raw frames alone
(``compression=False``, its defaults locally and on loopback) and JSON (``raw_frames=False, compression=False``: everything in JSON
strings, base64 for file bytes); ``rex`` two: its defaults (raw frames) and ``--compress`` (raw
frames with zstd). Each round is a whole use, connection included: ``rex`` and ssh are processes
started per round, and ``RexdClient`` connects (starting ``rexd --stdio``, or ssh) and closes.
Locally, through a loopback sshd (skipped without OpenSSH), and to a ``rexd --listen`` on
loopback over its WebSocket (``ws``: raw frames as binary messages). ``$DESKWIRE_REXD`` and
``$DESKWIRE_REX`` name the binaries (release builds for numbers worth keeping).

``test_rexd_in_turns`` runs every contender of a case in turns, round after round, so a change
in the machine's load touches them all alike, and prints the medians and minimums with each
one's ratio to ``rex`` (the numbers to keep; ``$DESKWIRE_BENCH_ROUNDS`` rounds, 9 unless set):

    cd bindings/python && python -m pytest benches/test_rexd_bench.py -k in_turns -s

The other tests are the same contenders under pytest-benchmark, one after another:

    cd bindings/python && python -m pytest benches/test_rexd_bench.py -k "not in_turns" \\
        --benchmark-columns=min,median,rounds --benchmark-group-by=group
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from deskwire.aio import ExecOutput, RexdClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from peers import Sshd, rexd_path  # noqa: E402

FILE_BYTES = 10 * 1024 * 1024
SEQ = ["seq", "1", "140000"]
SEQ_BYTES = len("".join(f"{i}\n" for i in range(1, 140001)))
FILES = {"random": "ten.bin", "text": "ten.txt"}

# RexdClient's ways: the connect keywords of each.
WAYS: Dict[str, Dict[str, bool]] = {
    "raw+zstd": {"compression": True},
    "raw": {"compression": False},
    "json": {"raw_frames": False, "compression": False},
}
# rex's: its extra flags.
REX_WAYS: Dict[str, List[str]] = {"rex": [], "rex --compress": ["--compress"]}


def rex_path() -> str:
    return os.environ.get("DESKWIRE_REX") or str(Path(rexd_path()).parent / "rex")


def text_file() -> bytes:
    """10 MiB of log-like lines, as ``rexd/benches/ssh.rs`` makes them."""
    lines = []
    size, i = 0, 0
    while size < FILE_BYTES:
        line = (
            f"2026-11-26T10:{i // 3600 % 60:02}:{i // 60 % 60:02}.{i % 1000:03}Z INFO worker[{i % 16}] "
            f"request {i} done in {i * 37 % 1000} ms: \"GET /api/items?page={i % 97}\"\n"
        )
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines).encode()[:FILE_BYTES]


@pytest.fixture(scope="module")
def place() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="deskwire-bench-") as d:
        root = Path(d).resolve()
        (root / FILES["random"]).write_bytes(os.urandom(FILE_BYTES))
        (root / FILES["text"]).write_bytes(text_file())
        yield root


@pytest.fixture(scope="module")
def sshd() -> Iterator[Optional[Sshd]]:
    if not (shutil.which("ssh") and os.path.exists("/usr/sbin/sshd")):
        yield None
        return
    s = Sshd(rexd_path())
    yield s
    s.stop()


TOKEN = "0123456789abcdef0123456789abcdef"


class Listener:
    """``rexd --listen 127.0.0.1:0 --root place`` with a token file: plain ``http://`` on
    loopback, so the WebSocket's cost is measured without TLS's."""

    def __init__(self, place: Path) -> None:
        # Beside the served root, not in it (fs.list would show it); removed by stop().
        self.tokens = tokens = place.parent / f"{place.name}-tokens"
        tokens.write_text(f"bench:{TOKEN}\n")
        tokens.chmod(0o600)
        self.process = subprocess.Popen(
            [rexd_path(), "--listen", "127.0.0.1:0", "--root", str(place), "--token-file", str(tokens)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        assert line.startswith("rexd: listening on http://"), line
        self.url = line.split(" on ", 1)[1].strip()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.tokens.unlink(missing_ok=True)


_listeners: Dict[Path, Listener] = {}


def listener(place: Path) -> Listener:
    """The module's one daemon on loopback for ``place`` (started on first use)."""
    if place not in _listeners:
        _listeners[place] = Listener(place)
    return _listeners[place]


@pytest.fixture(scope="module", autouse=True)
def _stop_listeners() -> Iterator[None]:
    yield
    for daemon in _listeners.values():
        daemon.stop()
    _listeners.clear()


def connect_args(where: str, place: Path, sshd: Optional[Sshd]) -> Dict[str, Any]:
    if where == "local":
        return {"target": "local", "rexd": rexd_path(), "rexd_args": ["--root", str(place)]}
    if where == "ws":
        return {"target": listener(place).url, "token": TOKEN}
    assert sshd is not None
    return {"target": "box", "targets_file": str(sshd.targets_file), "rexd_args": ["--root", str(place)]}


def rex_argv(where: str, place: Path, sshd: Optional[Sshd], flags: List[str], *command: str) -> List[str]:
    if where == "local":
        return [rex_path(), "-t", "local", "--rexd", rexd_path(), "--rexd-arg=--root",
                f"--rexd-arg={place}", *flags, *command]
    if where == "ws":
        return [rex_path(), "-t", listener(place).url, *flags, *command]
    assert sshd is not None
    return [rex_path(), "--targets-file", str(sshd.targets_file), "-t", "box",
            "--rexd-arg=--root", f"--rexd-arg={place}", *flags, *command]


def ssh_argv(sshd: Sshd, *command: str) -> List[str]:
    key = sshd.dir / "client_key"
    return ["ssh", "-i", str(key), "-p", str(sshd.port), "-o", "StrictHostKeyChecking=no",
            "-o", f"UserKnownHostsFile={sshd.dir / 'known_hosts'}", "-o", "BatchMode=yes",
            "-o", "LogLevel=ERROR", sshd.ssh_url.split("//")[1].split(":")[0], *command]


def counted(argv: List[str]) -> int:
    """Runs a process and returns how many bytes it wrote. Its stdout is a file, not a pipe read
    here: reading 10 MiB from a pipe costs this Python process about as much as ``rex`` itself
    takes, which would be counted against ``rex``."""
    env = {**os.environ, "REXD_TOKEN": TOKEN}  # read by rex for an http:// target only
    with tempfile.TemporaryFile() as out:
        subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, check=True, env=env)
        return os.fstat(out.fileno()).st_size


def python_round(where: str, way: str, case: str, place: Path, sshd: Optional[Sshd]) -> Callable[[], int]:
    """One whole use of RexdClient: connect, read the file whole (or run seq), close."""

    async def once() -> int:
        async with await RexdClient.connect(**connect_args(where, place, sshd), **WAYS[way]) as client:
            assert bool(client.session.get("raw_frames")) == (way != "json")
            assert (client.session.get("compression") == "zstd") == (way == "raw+zstd")
            if case == "seq":
                got = 0
                async for event in client.exec(SEQ):
                    if isinstance(event, ExecOutput):
                        got += len(event.data)
                return got
            return len(await client.read_file(str(place / FILES[case])))

    return lambda: asyncio.run(once())


def rex_round(where: str, way: str, case: str, place: Path, sshd: Optional[Sshd]) -> Callable[[], int]:
    command = ["exec", "--", *SEQ] if case == "seq" else ["read", str(place / FILES[case])]
    argv = rex_argv(where, place, sshd, REX_WAYS[way], *command)
    return lambda: counted(argv)


def ssh_round(case: str, place: Path, sshd: Sshd) -> Callable[[], int]:
    argv = ssh_argv(sshd, *SEQ) if case == "seq" else ssh_argv(sshd, "cat", str(place / FILES[case]))
    return lambda: counted(argv)


WHERE = ["local", "ssh", "ws"]
CASES = ["random", "text", "seq"]


def expected(case: str) -> int:
    return SEQ_BYTES if case == "seq" else FILE_BYTES


def skip_without(where: str, sshd: Optional[Sshd]) -> None:
    if where == "ssh" and sshd is None:
        pytest.skip("no OpenSSH here")


def contenders(where: str, case: str, place: Path, sshd: Optional[Sshd]) -> List[Tuple[str, Callable[[], int]]]:
    runs = [(f"RexdClient {way}", python_round(where, way, case, place, sshd)) for way in WAYS]
    runs += [(way, rex_round(where, way, case, place, sshd)) for way in REX_WAYS]
    if where == "ssh":
        assert sshd is not None
        runs.append(("ssh", ssh_round(case, place, sshd)))
    return runs


ROUNDS = int(os.environ.get("DESKWIRE_BENCH_ROUNDS", "9"))


@pytest.mark.parametrize("where", WHERE)
def test_rexd_in_turns(where: str, place: Path, sshd: Optional[Sshd]) -> None:
    """Every contender of each case in turns, ``ROUNDS`` rounds (one warm-up first); prints the
    medians and the minimums in ms (the minimum is the least touched by other work on the
    machine) and each one's ratio to ``rex`` (and, for RexdClient raw+zstd, to
    ``rex --compress``, the same session)."""
    skip_without(where, sshd)
    print(f"\n{where}: {ROUNDS} rounds in turns, ms (ratio to rex)")
    for case in CASES:
        runs = contenders(where, case, place, sshd)
        times: Dict[str, List[float]] = {name: [] for name, _ in runs}
        for name, run in runs:  # warm-up: page cache, the ssh connection's keys
            assert run() == expected(case), name
        for _ in range(ROUNDS):
            for name, run in runs:
                start = time.perf_counter()
                got = run()
                times[name].append((time.perf_counter() - start) * 1e3)
                assert got == expected(case), name
        for label, pick in (("median", statistics.median), ("min", min)):
            value = {name: pick(t) for name, t in times.items()}
            cells = []
            for name, ms in value.items():
                ratio = f" ({ms / value['rex']:.2f}x)" if name != "rex" else ""
                if name == "RexdClient raw+zstd":
                    ratio += f" [{ms / value['rex --compress']:.2f}x rex --compress]"
                cells.append(f"{name} {ms:.1f}{ratio}")
            print(f"  {case}, {label}: " + "; ".join(cells))


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("where", WHERE)
def test_rexd_python(benchmark: Any, where: str, case: str, way: str, place: Path, sshd: Optional[Sshd]) -> None:
    skip_without(where, sshd)
    benchmark.group = f"rexd {case}, {where}"
    assert benchmark(python_round(where, way, case, place, sshd)) == expected(case)


@pytest.mark.parametrize("way", list(REX_WAYS))
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("where", WHERE)
def test_rexd_rex(benchmark: Any, where: str, case: str, way: str, place: Path, sshd: Optional[Sshd]) -> None:
    skip_without(where, sshd)
    benchmark.group = f"rexd {case}, {where}"
    assert benchmark(rex_round(where, way, case, place, sshd)) == expected(case)


@pytest.mark.parametrize("case", CASES)
def test_rexd_ssh(benchmark: Any, case: str, place: Path, sshd: Optional[Sshd]) -> None:
    skip_without("ssh", sshd)
    assert sshd is not None
    benchmark.group = f"rexd {case}, ssh"
    assert benchmark(ssh_round(case, place, sshd)) == expected(case)
