"""`rexd --mcp` driven by the official MCP Python SDK (`pip install mcp`) as the client.

Run by tests/run.sh in a venv it creates; REXD names the daemon binary (default: the debug build).
"""

import os
import pathlib
import tempfile

import anyio
import pytest

import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

ROOT = pathlib.Path(__file__).resolve().parents[2]
REXD = os.environ.get("REXD", str(ROOT / "target" / "debug" / "rexd"))


@pytest.fixture
def work():
    with tempfile.TemporaryDirectory(prefix="rexd-mcp-") as tmp:
        tmp = pathlib.Path(tmp).resolve()
        work = tmp / "work"
        (work / "sub").mkdir(parents=True)
        (work / "top.txt").write_text("top\n")
        (work / "sub" / "inner.txt").write_text("inner\n")
        config = tmp / "rexd.toml"
        config.write_text(
            '[server]\nlog_level = "warn"\n[security]\nallow_shell = true\n'
            f'[[security.allowed_roots]]\npath = "{work}"\n[audit]\nenabled = false\n'
        )
        yield work, config


def params(config):
    return StdioServerParameters(command=REXD, args=["--mcp", "--config", str(config)])


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def run(main):
    anyio.run(main)


def test_initialize_and_tool_list_with_annotations(work):
    root, config = work

    async def main():
        async with stdio_client(params(config)) as (r, w):
            async with ClientSession(r, w) as s:
                init = await s.initialize()
                assert init.server_info.name == "rexd"
                assert init.capabilities.tools is not None
                assert init.capabilities.tools.list_changed is True
                tools = {t.name: t for t in (await s.list_tools()).tools}
                assert list(tools) == ["bash", "exec", "read", "write", "list", "glob", "stat"]
                assert tools["read"].annotations.read_only_hint is True
                assert tools["stat"].annotations.read_only_hint is True
                assert tools["write"].annotations.destructive_hint is True
                assert tools["write"].annotations.idempotent_hint is True
                assert tools["bash"].annotations.read_only_hint is False
                assert tools["bash"].annotations.open_world_hint is True
                assert tools["bash"].input_schema["required"] == ["command"]
                assert str(root) in tools["read"].description

    run(main)


def test_bash_streams_progress_and_returns_the_exit(work):
    root, config = work
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, message))

    async def main():
        async with stdio_client(params(config)) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                result = await s.call_tool(
                    "bash",
                    {"command": "echo one; sleep 0.3; echo two; echo oops >&2; exit 3", "cwd": str(root)},
                    progress_callback=on_progress,
                )
                assert result.is_error is True
                sc = result.structured_content
                assert sc["exit_code"] == 3
                assert sc["stdout"] == "one\ntwo\n"
                assert sc["stderr"] == "oops\n"
                assert "[exit code: 3]" in text_of(result)

                ok = await s.call_tool("bash", {"command": "pwd", "cwd": str(root / "sub")})
                assert ok.is_error is False
                assert ok.structured_content["stdout"] == f"{root / 'sub'}\n"

    run(main)
    values = [v for v, _ in progress]
    assert len(values) >= 2, progress
    assert values == sorted(values) and len(set(values)) == len(values), "progress only grows"
    assert "one" in "".join(m or "" for _, m in progress)


def test_files_refusals_and_unknown_tools(work):
    root, config = work

    async def main():
        async with stdio_client(params(config)) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                path = str(root / "new.txt")
                wrote = await s.call_tool("write", {"path": path, "content": "hello mcp\n"})
                assert wrote.is_error is False, text_of(wrote)
                assert (root / "new.txt").read_text() == "hello mcp\n"
                read = await s.call_tool("read", {"path": path})
                assert text_of(read) == "hello mcp\n"
                assert read.structured_content["size"] == 10
                listed = await s.call_tool("list", {"path": str(root)})
                assert text_of(listed).splitlines() == ["new.txt", "sub/", "top.txt"]
                found = await s.call_tool("glob", {"pattern": "**/*.txt", "cwd": str(root)})
                assert sorted(found.structured_content["matches"]) == sorted(
                    str(root / p) for p in ["new.txt", "top.txt", "sub/inner.txt"]
                )

                outside = await s.call_tool("read", {"path": "/etc/passwd"})
                assert outside.is_error is True
                assert "forbidden_path (-32002)" in text_of(outside)

                bad = await s.call_tool("read", {"nope": 1})
                assert bad.is_error is True and "bad arguments" in text_of(bad)

                with pytest.raises(MCPError) as e:
                    await s.call_tool("format_disk", {})
                assert e.value.error.code == -32602

    run(main)


def test_cancellation_kills_the_command_and_sends_no_answer(work):
    root, config = work
    pid_file = root / "pid"

    async def main():
        async with stdio_client(params(config)) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                started = anyio.Event()

                async def on_progress(value, total, message):
                    if "started" in (message or ""):
                        started.set()

                async def long_call():
                    await s.call_tool(
                        "bash",
                        {"command": f"echo $$ > {pid_file}; echo started; exec sleep 60"},
                        progress_callback=on_progress,
                    )
                    raise AssertionError("a cancelled call must not complete")

                async with anyio.create_task_group() as tg:
                    tg.start_soon(long_call)
                    with anyio.fail_after(10):
                        await started.wait()
                    pid = int(pid_file.read_text())
                    assert process_alive(pid)
                    # The SDK sends notifications/cancelled when the caller gives up.
                    tg.cancel_scope.cancel()

                with anyio.fail_after(10):
                    while process_alive(pid):
                        await anyio.sleep(0.05)

                # The server keeps serving after the cancellation.
                after = await s.call_tool("bash", {"command": "echo still serving"})
                assert after.structured_content["stdout"] == "still serving\n"

    run(main)


def process_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    # Gone before the open, or reaped between the open and the read (ESRCH).
    except (FileNotFoundError, ProcessLookupError):
        return False


# Roots are deprecated from the 2026-07-28 revision on; the handshake revisions spoken here have them.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_roots_narrow_the_session_and_announce_list_changed(work):
    root, config = work
    roots = [root / "sub"]
    changed = []

    async def list_roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri()) for p in roots])

    async def on_message(message):
        method = getattr(message, "method", None) or getattr(getattr(message, "root", None), "method", None)
        if method == "notifications/tools/list_changed":
            changed.append(method)

    async def wait_changes(n):
        with anyio.fail_after(10):
            while len(changed) < n:
                await anyio.sleep(0.02)

    async def main():
        async with stdio_client(params(config)) as (r, w):
            async with ClientSession(r, w, list_roots_callback=list_roots, message_handler=on_message) as s:
                await s.initialize()
                await wait_changes(1)
                tools = {t.name: t for t in (await s.list_tools()).tools}
                assert str(root / "sub") in tools["read"].description
                assert f"{root}," not in tools["read"].description
                inner = await s.call_tool("read", {"path": str(root / "sub" / "inner.txt")})
                assert text_of(inner) == "inner\n"
                top = await s.call_tool("read", {"path": str(root / "top.txt")})
                assert top.is_error is True and "-32002" in text_of(top)

                roots[:] = [root]
                await s.send_roots_list_changed()
                await wait_changes(2)
                top = await s.call_tool("read", {"path": str(root / "top.txt")})
                assert text_of(top) == "top\n"

    run(main)


def test_exec_with_stdin_and_a_timeout(work):
    root, config = work

    async def main():
        async with stdio_client(params(config)) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                up = await s.call_tool("exec", {"argv": ["tr", "a-z", "A-Z"], "stdin": "shout\n"})
                assert up.is_error is False
                assert up.structured_content["stdout"] == "SHOUT\n"
                slow = await s.call_tool("exec", {"argv": ["sleep", "30"], "timeout_ms": 300})
                assert slow.is_error is True
                assert slow.structured_content["timed_out"] is True
                assert "[timed out after" in text_of(slow)

    run(main)


def test_without_allow_shell_there_is_no_bash(work):
    root, config = work
    config.write_text(config.read_text().replace("allow_shell = true", "allow_shell = false"))

    async def main():
        async with stdio_client(params(config)) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                names = [t.name for t in (await s.list_tools()).tools]
                assert "bash" not in names and "exec" in names
                with pytest.raises(MCPError) as e:
                    await s.call_tool("bash", {"command": "true"})
                assert e.value.error.code == -32602

    run(main)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_roots_outside_the_allowlist_are_refused(work):
    root, config = work
    asked = []

    async def list_roots(context):
        asked.append(True)
        return types.ListRootsResult(roots=[types.Root(uri="file:///etc")])

    async def main():
        async with stdio_client(params(config)) as (r, w):
            async with ClientSession(r, w, list_roots_callback=list_roots) as s:
                await s.initialize()
                with anyio.fail_after(10):
                    while not asked:
                        await anyio.sleep(0.02)
                # The server reads in order: our roots answer is handled before this ping.
                await s.send_ping()
                tools = {t.name: t for t in (await s.list_tools()).tools}
                assert str(root) in tools["read"].description
                assert "/etc" not in tools["read"].description
                outside = await s.call_tool("read", {"path": "/etc/hostname"})
                assert outside.is_error is True and "-32002" in text_of(outside)

    run(main)
