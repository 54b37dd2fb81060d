"""deskwire.tools.ToolIndex (the best few tools for an intent) and tools.rexd_request (a model's
call of REXD's logical tools as the request that runs it), the latter end to end against a
real ``rexd --stdio``."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import pytest

import deskwire
from deskwire import tools
from deskwire.aio import RexdClient

from peers import rexd_path


def spec(name: str, description: str) -> Dict[str, Any]:
    return {"name": name, "description": description, "input_schema": {"type": "object"}}


CATALOG: List[Dict[str, Any]] = [
    spec("weather_forecast", "Get the weather forecast for a city"),
    spec("send_email", "Send an email message to a recipient"),
    spec("calendarCreateEvent", "Create an event in the user's calendar"),
    spec("stock_quote", "Look up the latest stock price"),
    spec("translate_text", "Translate text between languages"),
]


def test_the_builtins_rank_by_intent() -> None:
    index = tools.ToolIndex(tools.Toolbox().visible_tools("npc-1"))
    ranked = index.top_n("read the contents of a file", 3)
    assert ranked[0][0] == "read"
    assert len(ranked) <= 3
    assert [score for _, score in ranked] == sorted((s for _, s in ranked), reverse=True)
    assert all(isinstance(name, str) and score > 0 for name, score in ranked)


def test_lexical_ranking_splits_camel_case_and_drops_unrelated_tools() -> None:
    index = tools.ToolIndex(CATALOG)
    assert index.top_n("what's the weather in Lisbon?", 5)[0][0] == "weather_forecast"
    # camelCase humps are words: "calendar" and "event" find calendarCreateEvent.
    assert index.top_n("new calendar event", 5)[0][0] == "calendarCreateEvent"
    # Only tools sharing a word come back; nothing shares a word with this.
    assert index.top_n("zzzz qqqq", 5) == []
    assert len(index.top_n("the", 1)) <= 1
    assert index.top_n("email", 0) == []


def test_host_scores_and_embeddings_blend_in() -> None:
    index = tools.ToolIndex(CATALOG)
    # No word in common: the host's own score brings the tool in.
    ranked = index.top_n("how much is ACME worth", 2, scores={"stock_quote": 0.9})
    assert ranked[0][0] == "stock_quote"
    # All weight on the lexical score: the host's score no longer counts.
    only_lexical = index.top_n("send a message", 5, scores={"stock_quote": 1.0}, lexical_weight=1.0)
    assert only_lexical[0][0] == "send_email"
    assert dict(only_lexical).get("stock_quote", 0.0) == 0.0

    for i, tool in enumerate(CATALOG):
        index.set_embedding(tool["name"], [1.0 if j == i else 0.0 for j in range(len(CATALOG))])
    near_translate = [0.0, 0.0, 0.0, 0.1, 1.0]
    ranked = index.top_n("", 2, query_embedding=near_translate, lexical_weight=0.0)
    assert [name for name, _ in ranked] == ["translate_text", "stock_quote"]
    assert all(0.0 <= score <= 1.0 for _, score in ranked)


def test_bad_input_is_a_typed_error() -> None:
    index = tools.ToolIndex(CATALOG)
    with pytest.raises(deskwire.LocalError) as caught:
        index.top_n("x", 3, scores={"send_email": 1.0}, query_embedding=[1.0])
    assert caught.value.code == "invalid_value"
    for weight in (math.nan, math.inf):
        with pytest.raises(deskwire.LocalError):
            index.top_n("x", 3, scores={}, lexical_weight=weight)
    with pytest.raises(deskwire.LocalError, match="value 1 of the embedding is not a finite number"):
        index.set_embedding("send_email", [1.0, math.nan])
    # Embeddings the index could not compare are refused, not scored 0 in silence.
    with pytest.raises(deskwire.LocalError, match="no tool has an embedding"):
        index.top_n("x", 3, query_embedding=[1.0, 0.0])
    with pytest.raises(deskwire.LocalError, match='no tool named "sendemail"'):
        index.set_embedding("sendemail", [1.0, 0.0])
    with pytest.raises(deskwire.LocalError, match="no values"):
        index.set_embedding("send_email", [])
    index.set_embedding("send_email", [1.0, 0.0])
    with pytest.raises(deskwire.LocalError, match="has 3 values; this index's embeddings have 2") as caught:
        index.set_embedding("stock_quote", [1.0, 0.0, 0.0])
    assert caught.value.code == "invalid_value"
    with pytest.raises(deskwire.LocalError, match="has 3 values"):
        index.top_n("x", 3, query_embedding=[1.0, 0.0, 0.0])
    assert index.top_n("send", 3, query_embedding=[1.0, 0.0])[0][0] == "send_email"
    with pytest.raises(TypeError):
        index.top_n(b"bytes", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        index.set_embedding("send_email", "not floats")  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        index.top_n("x", -1)
    with pytest.raises(deskwire.LocalError):
        tools.ToolIndex([{"name": "no description"}])
    with pytest.raises(deskwire.LocalError):
        tools.ToolIndex("not a list")  # type: ignore[arg-type]


def test_a_large_catalog_and_query() -> None:
    catalog = [spec(f"tool_{i}", f"does thing number {i} with widget{i % 97}") for i in range(2000)]
    index = tools.ToolIndex(catalog)
    ranked = index.top_n("widget5 " * 10_000, 10)
    assert len(ranked) == 10
    assert all(int(name.split("_")[1]) % 97 == 5 for name, _ in ranked)


def test_rexd_request_routes_the_logical_tools() -> None:
    method, params = tools.rexd_request({"id": "c1", "name": "read", "args": {"path": "a.txt"}}, "s_1")
    assert (method, params["session_id"], params["path"]) == ("fs.read", "s_1", "a.txt")
    method, params = tools.rexd_request({"id": "c2", "name": "bash", "args": {"command": "ls -l"}}, "s_1")
    assert method == "exec.start"
    assert params["session_id"] == "s_1" and "ls -l" in str(params)

    with pytest.raises(deskwire.LocalError) as local:
        tools.rexd_request({"id": "c3", "name": "RemoteBash", "args": {"command": "ls"}}, "s_1")
    assert local.value.code == "not_rexd_tool"
    for args in ({"path": 3}, ["a.txt"], {"path": "a", "extra": 1}):
        with pytest.raises(deskwire.ProtocolError) as caught:
            tools.rexd_request({"id": "c4", "name": "read", "args": args}, "s_1")
        assert caught.value.code == "invalid_args"
    with pytest.raises(deskwire.ProtocolError):
        tools.rexd_request({"id": "c5", "name": "bash", "args": {"command": ""}}, "s_1")
    with pytest.raises(deskwire.LocalError):
        tools.rexd_request({"name": "read"}, "s_1")


async def test_model_calls_run_through_a_real_rexd() -> None:
    with tempfile.TemporaryDirectory(prefix="deskwire-root-") as d:
        root = Path(d).resolve()
        (root / "notes.txt").write_text("héllo from the desk\n")
        async with await RexdClient.connect(
            "local", rexd=rexd_path(), rexd_args=["--root", str(root)], workspace_roots=[str(root)]
        ) as client:
            call = {"id": "c1", "name": "read", "args": {"path": str(root / "notes.txt")}}
            method, params = tools.rexd_request(call, client.session_id)
            result = await client.call(method, params)
            assert "héllo from the desk" in str(result)

            call = {"id": "c2", "name": "list", "args": {"path": str(root)}}
            method, params = tools.rexd_request(call, client.session_id)
            listing = await client.call(method, params)
            assert "notes.txt" in str(listing)


async def test_run_tool_gives_tool_results_from_a_real_rexd() -> None:
    with tempfile.TemporaryDirectory(prefix="deskwire-root-") as d:
        root = Path(d).resolve()
        (root / "notes.txt").write_text("héllo from the desk\n")
        (root / "sub").mkdir()
        common = {"rexd": rexd_path(), "workspace_roots": [str(root)]}

        def call(call_id: str, name: str, **args: Any) -> Dict[str, Any]:
            return {"id": call_id, "name": name, "args": args}

        # A default daemon: files yes, shell commands no, and the result says how to allow them.
        async with await RexdClient.connect("local", rexd_args=["--root", str(root)], **common) as rexd:
            assert await rexd.run_tool(call("c1", "read", path=str(root / "notes.txt"))) == {
                "callId": "c1", "content": "héllo from the desk\n"}
            listing = await rexd.run_tool(call("c2", "list", path=str(root)))
            assert sorted(listing["content"].splitlines()) == ["notes.txt", "sub/"]
            wrote = await rexd.run_tool(call("c3", "write", path=str(root / "new.txt"), content="x"))
            assert wrote == {"callId": "c3", "content": f"wrote 1 bytes to {root / 'new.txt'}"}
            refused = await rexd.run_tool(call("c4", "bash", command="echo hi"))
            # Said once, in the daemon's words.
            content = refused["content"]
            assert refused["isError"] and content.count("start rexd with --allow-shell") == 1, refused
            assert "runs no shell commands" not in content, refused
            outside = await rexd.run_tool(call("c5", "read", path="/etc/hostname"))
            assert outside["isError"] and outside["callId"] == "c5"
            bad_args = await rexd.run_tool(call("c6", "read", path=3))
            assert bad_args["isError"] and bad_args["content"].startswith("invalid_args")
            with pytest.raises(deskwire.LocalError):  # not a REXD tool: the host's mistake
                await rexd.run_tool(call("c7", "RemoteBash", command="ls"))
        # --allow-shell: the output, with stderr and the exit code as rexd --mcp gives them.
        async with await RexdClient.connect(
            "local", rexd_args=["--root", str(root), "--allow-shell"], **common
        ) as rexd:
            ok = await rexd.run_tool(call("c8", "bash", command="echo out; echo err >&2", cwd=str(root)))
            assert ok == {"callId": "c8", "content": "out\n\n[stderr]\nerr\n"}
            failed = await rexd.run_tool(call("c9", "bash", command="exit 3"))
            assert failed == {"callId": "c9", "content": "\n[exit code: 3]", "isError": True}


async def test_a_missing_rexd_says_where_it_comes_from() -> None:
    with pytest.raises(deskwire.LocalError) as caught:
        await RexdClient.connect("local", rexd="/nonexistent/rexd")
    assert caught.value.code == "not_found"
    assert f"rexd-{deskwire.__version__}-TARGET.tar.gz" in caught.value.message
    assert "cargo install --path rexd" in caught.value.message
