"""Every ```python block of the README runs, as a user would run it, against real peers: a
private ngircd, ``rexd --irc`` as the desk's remote (with ``--secret-file desk.secret`` when the
block passes ``secret=``), and ``rexd`` on ``PATH`` for ``RexdClient.connect("local")``. A
block that talks to a model gets Anthropic's SDK with only the network call replaced: it
answers with a recorded response of ``tests/vectors/providers/anthropic.json`` as the SDK's own
``Message``, then with text, and checks every request's ``messages`` and tool fields against
the SDK's param types. A README change that breaks a block fails here."""

from __future__ import annotations

import copy
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from conftest import REPO, load_vectors
from peers import Ngircd, RexdIrc, rexd_path

README = REPO / "README.md"
SECRET = "a secret shared by the desk and rexd"


def python_blocks() -> List[str]:
    text = README.read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def test_the_readme_has_its_python_blocks() -> None:
    blocks = python_blocks()
    # The drivers' tour and the agent turn; more blocks run too, fewer means one was lost.
    assert len(blocks) >= 2
    assert any("IrcDesk.connect" in b and "RexdClient.connect" in b for b in blocks)
    assert any("check_call" in b and "tool_results" in b for b in blocks)
    assert any("IrcDesks.connect" in b and "desks.chat()" in b for b in blocks)


class Player(threading.Thread):
    """A player's IRC client, plain IRC over a socket: joins ``channel``, and once the desk
    (``desk_nick``) has joined it too, says ``text`` there. ``lines`` holds what it read."""

    def __init__(self, port: int, channel: str, text: str, desk_nick: str = "desk") -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.channel, self.text, self.desk_nick = channel, text, desk_nick
        self.lines: List[str] = []
        self.error: Optional[BaseException] = None
        self.joined = threading.Event()
        self.sent = threading.Event()
        self.start()

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\r\n")

    def run(self) -> None:
        try:
            self.send("NICK player")
            self.send("USER player 0 * :a player")
            buffer = b""
            while True:
                data = self.sock.recv(4096)
                if not data:
                    return
                buffer += data
                while b"\r\n" in buffer:
                    raw, buffer = buffer.split(b"\r\n", 1)
                    line = raw.decode("utf-8", "replace")
                    self.lines.append(line)
                    words = line.split(" ")
                    if words[0] == "PING":
                        self.send("PONG " + " ".join(words[1:]))
                    elif words[1:2] == ["001"]:
                        self.send(f"JOIN {self.channel}")
                    elif words[1:2] == ["366"]:
                        self.joined.set()
                    elif self.sent.is_set():
                        continue
                    elif (words[0].startswith(f":{self.desk_nick}!") and words[1:2] == ["JOIN"]
                          and words[2].lstrip(":") == self.channel) or (
                            # The desk was there first: its nick in the NAMES list.
                            words[1:2] == ["353"] and self.desk_nick in
                            [n.lstrip("@+") for n in line.split(" :", 1)[-1].split(" ")]):
                        self.send(f"PRIVMSG {self.channel} :{self.text}")
                        self.sent.set()
        except OSError as e:
            if not self.sent.is_set():
                self.error = e

    def stop(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.join(10)


class RecordedAnthropic:
    """``anthropic.AsyncAnthropic`` with its HTTP call replaced: the first answer is a
    recorded response with a ``RemoteBash`` call, the next is text. Every request is checked
    against the SDK's own param types, as the API would check it."""

    instances: List["RecordedAnthropic"] = []

    def __init__(self, **_options: Any) -> None:
        from pydantic import TypeAdapter
        from anthropic.types import MessageParam, ToolChoiceParam, ToolUnionParam

        self.messages = self
        self.requests: List[Dict[str, Any]] = []
        self._checks = (TypeAdapter(List[MessageParam]), TypeAdapter(List[ToolUnionParam]),
                        TypeAdapter(ToolChoiceParam))
        RecordedAnthropic.instances.append(self)

    async def create(self, **request: Any) -> Any:
        from anthropic.types import Message
        from test_sdk_models import complete

        messages, tools, choice = self._checks
        messages.validate_python(request["messages"])
        tools.validate_python(request["tools"])
        choice.validate_python(request["tool_choice"])
        self.requests.append(copy.deepcopy(request))
        if len(self.requests) == 1:
            (case,) = [c for c in load_vectors("providers/anthropic.json")["cases"]
                       if c["name"] == "text and tool_use blocks"]
            body = complete("anthropic", copy.deepcopy(case["body"]))
            # Calls of REXD's tools in the same turn, which a desk alone cannot run: `bash`
            # needs the daemon's --allow-shell, which the block passes.
            body["content"].append({"type": "tool_use", "id": "toolu_02B", "name": "read",
                                    "input": {"path": "README.md"}})
            body["content"].append({"type": "tool_use", "id": "toolu_03C", "name": "bash",
                                    "input": {"command": "echo from bash; exit 3"}})
        else:
            body = complete("anthropic", {"content": [{"type": "text", "text": "It runs Linux."}],
                                          "stop_reason": "end_turn"})
        return Message.model_validate(body)


@pytest.fixture
def peers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dict[str, Any]]:
    """A working directory like a user's (a git repository with the README and the secret),
    rexd on PATH, and ngircd; rexd --irc is started per block."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "README.md").write_bytes(README.read_bytes())
    (work / "desk.secret").write_text(SECRET + "\n")
    (work / "desk.secret").chmod(0o600)  # rexd refuses a secret others may read
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    monkeypatch.chdir(work)
    monkeypatch.setenv("PATH", f"{Path(rexd_path()).parent}{os.pathsep}{os.environ['PATH']}")
    server = Ngircd(penalties=False)
    yield {"server": server, "work": work}
    server.stop()


@pytest.mark.parametrize("index", range(len(python_blocks())), ids=lambda i: f"block-{i + 1}")
def test_readme_python_block_runs(index: int, peers: Dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    block = python_blocks()[index]
    server = peers["server"]
    # The blocks name the server a user runs on port 6667; this one listens elsewhere.
    source, replaced = re.subn(r'"127\.0\.0\.1", 6667\b', f'"127.0.0.1", {server.port}', block)
    rexd = None
    player = None
    if "IrcDesks.connect" in block:
        assert replaced, "a block that connects desks names the server as \"127.0.0.1\", 6667"
        channels = re.findall(r"--channel '(#[^']+)'", block)
        assert channels, "a block with many desks says how to start rexd for its channels"
        more = [arg for channel in channels[1:] for arg in ("--channel", channel)]
        rexd = RexdIrc(server.port, *more, channel=channels[0])
        player = Player(server.port, channels[0], "hello desk")
        assert player.joined.wait(30), player.lines
    elif "IrcDesk.connect" in block:
        assert replaced, "a block that connects a desk names the server as \"127.0.0.1\", 6667"
        args = ["--secret-file", str(peers["work"] / "desk.secret")] if "secret=" in block else []
        rexd = RexdIrc(server.port, *args)
    try:
        anthropic = pytest.importorskip("anthropic")
        RecordedAnthropic.instances.clear()
        monkeypatch.setattr(anthropic, "AsyncAnthropic", RecordedAnthropic)
        # Run as a script: its own module namespace, asyncio.run at the end.
        exec(compile(source, f"README.md python block {index + 1}", "exec"), {"__name__": "__main__"})
        printed = capsys.readouterr().out
    finally:
        if rexd is not None:
            rexd.stop()
        if player is not None:
            player.stop()
    if player is not None:
        assert player.error is None, player.error
        # The desks answered in their own channels, and the player's line came as chat.
        assert "one\n two\n" in printed
        assert "player in #npc-1 (privmsg): hello desk" in printed
        assert "MemberJoined(channel='#npc-1', nick='desk')" in printed
    if "remote_bash(\"uname -a\"" in block:
        assert os.uname().sysname in printed  # the answer of rexd --irc came back
    if "rexd.pty(" in block:
        assert "PtyExit(exit_code=0" in printed
    for model in RecordedAnthropic.instances:
        # The RemoteBash call ran at the desk and `read` in the local rexd; both outputs went
        # back as the next turn's results.
        assert len(model.requests) == 2
        results = model.requests[1]["messages"][-1]
        assert results["role"] == "user"
        remote_bash, read, bash = results["content"]
        assert remote_bash["type"] == "tool_result" and remote_bash["tool_use_id"] == "toolu_01A"
        assert "rexd.log" in str(remote_bash["content"]) and not remote_bash.get("is_error")
        assert read["tool_use_id"] == "toolu_02B" and not read.get("is_error"), read
        assert "# deskwire" in str(read["content"])
        # A shell command ran (not "start it with --allow-shell"), its failure marked as
        # RemoteBash marks one.
        assert bash["tool_use_id"] == "toolu_03C" and bash.get("is_error"), bash
        assert str(bash["content"]) == "from bash\n\n[exit code: 3]", bash
        assert "It runs Linux." in printed


def test_readme_python_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    """A user who copies a block into a typed project sees no error from ``mypy --strict``."""
    files = []
    for index, block in enumerate(python_blocks()):
        path = tmp_path / f"readme_block_{index + 1}.py"
        path.write_text(block, encoding="utf-8")
        files.append(str(path))
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(tmp_path / ".mypy_cache"), *files],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
