"""tests/vectors/tools.json and tests/vectors/providers/*.json through ``deskwire.tools``."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

import deskwire
from deskwire import tools

from conftest import load_vectors

TOOLS = load_vectors("tools.json")


@pytest.fixture(scope="module")
def toolbox() -> tools.Toolbox:
    return tools.Toolbox(TOOLS["policy"])


@pytest.mark.parametrize("case", TOOLS["cases"], ids=[c["name"] for c in TOOLS["cases"]])
def test_tools(case: Dict[str, Any], toolbox: tools.Toolbox) -> None:
    if case["kind"] == "authorize":
        toolbox.set_context(case["agent"], case["context"])
        got = toolbox.authorize(case["agent"], case["call"], case.get("origin", "model"))
        assert got == case["expect"]
    elif case["kind"] == "slash":
        if "error" in case["expect"]:
            with pytest.raises(deskwire.LocalError) as caught:
                toolbox.parse_slash(case["line"])
            assert caught.value.code == case["expect"]["error"]
        else:
            call = toolbox.parse_slash(case["line"])
            assert {"name": call["name"], "args": call["args"]} == case["expect"]
    elif case["kind"] == "visible":
        toolbox.set_context(case["agent"], case["context"])
        assert [t["name"] for t in toolbox.visible_tools(case["agent"])] == case["expect"]
    else:
        raise AssertionError(case["kind"])


def provider_cases() -> List[Any]:
    out = []
    for provider in tools.PROVIDERS:
        doc = load_vectors(f"providers/{provider}.json")
        assert doc["provider"] == provider
        for case in doc["cases"]:
            out.append(pytest.param(provider, case, id=f"{provider}: {case['name']}"))
    return out


def sse_text(provider: str, events: List[Dict[str, Any]]) -> str:
    """The server-sent event stream of a stream case (as the Rust runner writes it)."""
    text = ""
    for e in events:
        if provider in ("anthropic", "openai_responses") and isinstance(e.get("type"), str):
            text += f"event: {e['type']}\n"
        text += "data: " + json.dumps(e, separators=(",", ":")) + "\n\n"
    if provider == "openai_chat":
        text += "data: [DONE]\n\n"
    return text


def outcome(run: Any) -> Dict[str, Any]:
    try:
        return {"expect": run().to_dict()}
    except deskwire.DeskwireError as e:
        names = {"not_json": "NotJson", "shape": "Shape", "provider": "Provider", "too_large": "TooLarge",
                 "incomplete": "Incomplete"}
        return {"error": names[e.code]}


def listed(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


@pytest.mark.parametrize("provider,case", provider_cases())
def test_providers(provider: str, case: Dict[str, Any]) -> None:
    seed = case.get("seed", 0)
    want = {k: case[k] for k in ("expect", "error") if k in case}
    kind = case["kind"]
    if kind == "request":
        got = tools.request_tools(
            provider,
            case["tools"],
            choice=case.get("choice"),
            catalog=case.get("catalog"),
            parallel_tool_calls=case.get("parallel_tool_calls"),
            strict=case.get("strict", False),
        )
        assert {"expect": got} == want
    elif kind == "response":
        body = case["body"]
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        got = outcome(lambda: tools.parse_response(provider, raw, seed=seed))
        assert got == want
        # The same body as str, and as a dict when it is JSON.
        assert outcome(lambda: tools.parse_response(provider, raw.decode(), seed=seed)) == want
        if not isinstance(body, str):
            assert outcome(lambda: tools.parse_response(provider, body, seed=seed)) == want
    elif kind == "stream":
        data = sse_text(provider, case["events"]).encode()

        def feed(pieces: List[bytes]) -> Any:
            def run() -> tools.ProviderResponse:
                parser = tools.StreamParser(provider, seed=seed)
                for piece in pieces:
                    parser.feed(piece)
                return parser.finish()

            return outcome(run)

        whole = feed([data])
        assert whole == want
        assert feed([data[i : i + 1] for i in range(len(data))]) == whole
        for cut in range(0, len(data), max(1, len(data) // 16)):
            assert feed([data[:cut], data[cut:]]) == whole, f"cut at {cut}"

        def pushed() -> tools.ProviderResponse:
            parser = tools.StreamParser(provider, seed=seed)
            for e in case["events"]:
                parser.push(e)
            return parser.finish()

        assert outcome(pushed) == want
    elif kind == "echo":
        previous = case["response"]
        got: Dict[str, Any] = {
            "assistant": tools.assistant_message(provider, previous),
        }
        try:
            got["results"] = tools.tool_results(provider, case["results"], previous)
        except deskwire.LocalError as e:
            got["results"] = {"error": e.message}
        # Python always gives a list to extend the conversation with; the vectors have the
        # provider's own shape, one message where the provider has one.
        expect = dict(want["expect"])
        assert isinstance(got["assistant"], list)
        expect["assistant"] = listed(expect["assistant"])
        if "error" not in got["results"]:
            assert isinstance(got["results"], list)
            expect["results"] = listed(expect["results"])
        assert got == expect
    else:
        raise AssertionError(kind)
