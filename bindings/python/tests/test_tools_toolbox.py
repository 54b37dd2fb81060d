"""``deskwire.tools.Toolbox`` as an agent host uses it, including the wrong things: tools no
provider takes, more approvals than a human can answer, agents that come and go, ids that must
not repeat, and a provider stream cut off in transit."""

from __future__ import annotations

from typing import Any, Dict

import pytest

import deskwire
from deskwire import tools

ASK = {"default": "allow", "rules": [{"tool": "RemoteBash", "when": "always", "action": {"ask": "high"}}]}


def remote(call_id: str, command: str = "make") -> Dict[str, Any]:
    return {"id": call_id, "name": "RemoteBash", "args": {"command": command}}


def bound(policy: Any = None, **kwargs: Any) -> tools.Toolbox:
    toolbox = tools.Toolbox(policy, **kwargs)
    toolbox.bind("npc-1", "npc-1")
    return toolbox


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "1bad name", "description": "", "input_schema": {"type": "object"}},
        {"name": "", "description": "", "input_schema": {"type": "object"}},
        {"name": "a" * 65, "description": "", "input_schema": {"type": "object"}},
        {"name": "fine", "description": "", "input_schema": {"type": "string"}},
    ],
    ids=["space and digit first", "empty", "65 characters", "string schema"],
)
def test_register_refuses_a_tool_no_provider_takes(spec: Dict[str, Any]) -> None:
    toolbox = tools.Toolbox()
    before = toolbox.visible_tools("npc-1")
    with pytest.raises(deskwire.LocalError) as caught:
        toolbox.register(spec)
    assert caught.value.code == "registry"
    assert "invalid tool name" in str(caught.value) or "type" in str(caught.value)
    assert toolbox.visible_tools("npc-1") == before
    toolbox.register({"name": "a" * 64, "description": "", "input_schema": {"type": "object"}})


def test_an_approval_answer_in_the_documented_shape_settles_it() -> None:
    toolbox = bound(ASK, seed=1)
    verdict = toolbox.check_call(0, "npc-1", remote("c1"))
    assert isinstance(verdict, tools.Pending)
    # The human is shown this call, not the tool's general text.
    asked = []
    while not isinstance(event := toolbox.poll_output(0), deskwire.Timeout):
        asked.append(event)
    (request,) = [e for e in asked if isinstance(e, tools.ApprovalRequested)]
    assert request.description.startswith("npc-1 asks to run `make` with RemoteBash ("), request.description
    settled = toolbox.respond(1, {"id": verdict.approval_id, "approved": True, "remember": True})
    assert settled["outcome"] == "approved", settled
    # Remembered: the same call runs without asking again.
    assert isinstance(toolbox.check_call(2, "npc-1", remote("c2")), tools.Run)


def test_past_the_approval_limit_a_call_is_refused_with_an_observation() -> None:
    toolbox = bound(ASK, config={"approvals": {"max_pending": 2}})
    for i in range(2):
        assert isinstance(toolbox.check_call(0, "npc-1", remote(f"c{i}")), tools.Pending)
    verdict = toolbox.check_call(0, "npc-1", remote("c2"))
    assert isinstance(verdict, tools.Refuse)
    assert "2 requests already wait" in verdict.observation
    assert len(toolbox.pending_approvals()) == 2


def test_remove_agent_frees_its_slot() -> None:
    toolbox = tools.Toolbox(config={"max_agents": 2})
    toolbox.bind("a", "a")
    toolbox.bind("b", "b")
    with pytest.raises(deskwire.LocalError) as caught:
        toolbox.bind("c", "c")
    assert caught.value.code == "too_many_agents"
    assert "remove_agent" in str(caught.value)
    assert toolbox.remove_agent("a") is True
    assert toolbox.remove_agent("a") is False
    toolbox.bind("c", "c")
    assert "RemoteBash" in [t["name"] for t in toolbox.visible_tools("c")]


def test_ids_do_not_repeat_unless_a_seed_fixes_them() -> None:
    toolbox = tools.Toolbox()
    slash = [toolbox.parse_slash(line)["id"] for line in ["/read a.txt", "/read a.txt", "/bash ls"]]
    assert len(set(slash)) == 3, slash

    # Two toolboxes (two processes' worth) make different approval ids.
    approvals = []
    for _ in range(2):
        verdict = bound(ASK).check_call(0, "npc-1", remote("c1"))
        assert isinstance(verdict, tools.Pending)
        approvals.append(verdict.approval_id)
    assert approvals[0] != approvals[1]

    # Gemini leaves call ids out: each turn gets new ones, unless a test fixes the seed.
    gemini = {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "read", "args": {"path": "a.txt"}}}]}, "finishReason": "STOP"}]}
    first, second = (tools.parse_response("gemini", gemini).tool_calls[0]["id"] for _ in range(2))
    assert first != second
    fixed = {tools.parse_response("gemini", gemini, seed=7).tool_calls[0]["id"] for _ in range(2)}
    assert len(fixed) == 1


def test_a_stream_cut_before_the_stop_reason_is_an_error_not_an_answer() -> None:
    events = [
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "RemoteBash", "input": {}}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": '{"command": "l'}},
    ]
    cut = tools.StreamParser("anthropic")
    for event in events:
        cut.push(event)
    with pytest.raises(deskwire.ProtocolError) as caught:
        cut.finish()
    assert caught.value.code == "incomplete"
    assert "cut off" in str(caught.value)

    whole = tools.StreamParser("anthropic")
    for event in [*events, {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}]:
        whole.push(event)
    response = whole.finish()
    assert response.to_dict()["stop_reason"] == "tool_use"
    assert response.invalid_tool_calls[0]["id"] == "toolu_1"


def test_results_for_calls_the_turn_did_not_make_are_refused() -> None:
    reply = tools.parse_response("anthropic", {
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}}],
        "stop_reason": "tool_use",
    })
    for provider in tools.PROVIDERS:
        with pytest.raises(deskwire.LocalError) as caught:
            tools.tool_results(provider, [tools.result("nope", "x")], reply)
        assert "nope" in str(caught.value), provider
        assert tools.tool_results(provider, [tools.result("toolu_1", "x")], reply)
    # Without the turn (the APIs that pair by id alone), nothing is checked.
    assert tools.tool_results("anthropic", [tools.result("nope", "x")])
