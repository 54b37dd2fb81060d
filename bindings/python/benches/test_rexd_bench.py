"""``deskwire.aio.RexdClient`` next to ``rex`` (the Rust client) and plain ssh, in one run
(pytest-benchmark; nothing is asserted about time):

- ``read_10mib``: a 10 MiB file of random bytes, read whole; ``RexdClient`` reads pieces of the
  session's ``max_file_read_bytes``, three in flight, as ``rex read`` does.
- ``seq``: the output of ``seq 1 140000`` (0.9 MB of short lines, under the 1 MiB output cap
  an agent's session keeps).

``RexdClient`` runs twice: with raw frames (the default over stdio and ssh) and without
(``raw_frames=False``: everything in JSON strings, base64 for the random file, as before).

Each round is a whole use, connection included, the same for all three: ``rex`` and ssh are
processes started per round, and ``RexdClient`` connects (starting ``rexd --stdio``, or ssh) and
closes. Locally and through a loopback sshd (skipped without OpenSSH). ``$DESKWIRE_REXD`` and
``$DESKWIRE_REX`` name the binaries (release builds for numbers worth keeping):

    cd bindings/python && python -m pytest benches -k rexd --benchmark-columns=min,median,rounds \\
        --benchmark-group-by=group
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

from deskwire.aio import ExecOutput, RexdClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from peers import Sshd, rexd_path  # noqa: E402

FILE_BYTES = 10 * 1024 * 1024
SEQ = ["seq", "1", "140000"]
SEQ_BYTES = len("".join(f"{i}\n" for i in range(1, 140001)))


def rex_path() -> str:
    return os.environ.get("DESKWIRE_REX") or str(Path(rexd_path()).parent / "rex")


@pytest.fixture(scope="module")
def place() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="deskwire-bench-") as d:
        root = Path(d).resolve()
        (root / "ten.bin").write_bytes(os.urandom(FILE_BYTES))
        yield root


@pytest.fixture(scope="module")
def sshd() -> Iterator[Optional[Sshd]]:
    if not (shutil.which("ssh") and os.path.exists("/usr/sbin/sshd")):
        yield None
        return
    s = Sshd(rexd_path())
    yield s
    s.stop()


async def read_whole(client: RexdClient, path: str) -> int:
    """A file read whole in pieces, three in flight."""
    piece = int(client.session["limits"]["max_file_read_bytes"])
    got, offset = 0, 0
    while True:
        pieces = await asyncio.gather(
            *(client.read(path, offset=offset + i * piece, length=piece) for i in range(3))
        )
        for data in pieces:
            got += len(data)
        if len(pieces[-1]) < piece:
            return got
        offset += 3 * piece


async def run_seq(client: RexdClient) -> int:
    got = 0
    async for event in client.exec(SEQ):
        if isinstance(event, ExecOutput):
            got += len(event.data)
    return got


def connect_args(where: str, place: Path, sshd: Optional[Sshd]) -> dict:
    if where == "local":
        return {"target": "local", "rexd": rexd_path(), "rexd_args": ["--root", str(place)]}
    assert sshd is not None
    return {"target": "box", "targets_file": str(sshd.targets_file), "rexd_args": ["--root", str(place)]}


def rex_argv(where: str, place: Path, sshd: Optional[Sshd], *command: str) -> List[str]:
    if where == "local":
        return [rex_path(), "-t", "local", "--rexd", rexd_path(), "--rexd-arg=--root",
                f"--rexd-arg={place}", *command]
    assert sshd is not None
    return [rex_path(), "--targets-file", str(sshd.targets_file), "-t", "box",
            "--rexd-arg=--root", f"--rexd-arg={place}", *command]


def ssh_argv(sshd: Sshd, *command: str) -> List[str]:
    key = sshd.dir / "client_key"
    return ["ssh", "-i", str(key), "-p", str(sshd.port), "-o", "StrictHostKeyChecking=no",
            "-o", f"UserKnownHostsFile={sshd.dir / 'known_hosts'}", "-o", "BatchMode=yes",
            "-o", "LogLevel=ERROR", sshd.ssh_url.split("//")[1].split(":")[0], *command]


def counted(argv: List[str]) -> int:
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    return len(out.stdout)


WHERE = ["local", "ssh"]


def skip_without(where: str, sshd: Optional[Sshd]) -> None:
    if where == "ssh" and sshd is None:
        pytest.skip("no OpenSSH here")


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "json"])
@pytest.mark.parametrize("where", WHERE)
def test_rexd_read_10mib_python(benchmark, where: str, raw: bool, place: Path, sshd: Optional[Sshd]) -> None:
    skip_without(where, sshd)
    benchmark.group = f"rexd read 10 MiB, {where}"

    async def once() -> int:
        async with await RexdClient.connect(**connect_args(where, place, sshd), raw_frames=raw) as client:
            assert bool(client.session.get("raw_frames")) == raw
            return await read_whole(client, str(place / "ten.bin"))

    assert benchmark(lambda: asyncio.run(once())) == FILE_BYTES


@pytest.mark.parametrize("where", WHERE)
def test_rexd_read_10mib_rex(benchmark, where: str, place: Path, sshd: Optional[Sshd]) -> None:
    skip_without(where, sshd)
    benchmark.group = f"rexd read 10 MiB, {where}"
    argv = rex_argv(where, place, sshd, "read", str(place / "ten.bin"))
    assert benchmark(counted, argv) == FILE_BYTES


def test_rexd_read_10mib_ssh_cat(benchmark, place: Path, sshd: Optional[Sshd]) -> None:
    skip_without("ssh", sshd)
    assert sshd is not None
    benchmark.group = "rexd read 10 MiB, ssh"
    assert benchmark(counted, ssh_argv(sshd, "cat", str(place / "ten.bin"))) == FILE_BYTES


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "json"])
@pytest.mark.parametrize("where", WHERE)
def test_rexd_seq_python(benchmark, where: str, raw: bool, place: Path, sshd: Optional[Sshd]) -> None:
    skip_without(where, sshd)
    benchmark.group = f"rexd seq, {where}"

    async def once() -> int:
        async with await RexdClient.connect(**connect_args(where, place, sshd), raw_frames=raw) as client:
            assert bool(client.session.get("raw_output")) == raw
            return await run_seq(client)

    assert benchmark(lambda: asyncio.run(once())) == SEQ_BYTES


@pytest.mark.parametrize("where", WHERE)
def test_rexd_seq_rex(benchmark, where: str, place: Path, sshd: Optional[Sshd]) -> None:
    skip_without(where, sshd)
    benchmark.group = f"rexd seq, {where}"
    assert benchmark(counted, rex_argv(where, place, sshd, "exec", "--", *SEQ)) == SEQ_BYTES


def test_rexd_seq_ssh(benchmark, place: Path, sshd: Optional[Sshd]) -> None:
    skip_without("ssh", sshd)
    assert sshd is not None
    benchmark.group = "rexd seq, ssh"
    assert benchmark(counted, ssh_argv(sshd, *SEQ)) == SEQ_BYTES
