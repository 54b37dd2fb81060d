"""The provider fixtures against the official SDKs' own pydantic models (PyPI openai, anthropic,
google-genai): every request's tool fields validate as the SDK's request param types, every
response body validates as the SDK's response class, and the SDK object itself — as a user holds
it after ``client....create()`` — parses through ``deskwire.tools`` to the fixture's segments.
Streams go event by event as the SDK's stream event types."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from pydantic import TypeAdapter

from deskwire import tools

from conftest import load_vectors

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
genai_types = pytest.importorskip("google.genai.types")

from anthropic.types import Message, RawMessageStreamEvent, ToolChoiceParam, ToolUnionParam  # noqa: E402
from openai.types.chat import ChatCompletion, ChatCompletionChunk  # noqa: E402
from openai.types.chat.completion_create_params import (  # noqa: E402
    ChatCompletionToolChoiceOptionParam,
    ChatCompletionToolUnionParam,
)
from openai.types.responses import Response, ResponseStreamEvent  # noqa: E402
from openai.types.responses.response_create_params import ToolChoice, ToolParam  # noqa: E402


def cases(provider: str, kind: str) -> List[Any]:
    doc = load_vectors(f"providers/{provider}.json")
    return [
        pytest.param(c, id=c["name"])
        for c in doc["cases"]
        if c["kind"] == kind and "expect" in c and isinstance(c.get("body", {}), dict)
    ]


def strict(adapter: TypeAdapter[Any], value: Any) -> None:
    """Validates and checks nothing was dropped: the dump of the validated value equals it."""
    validated = adapter.validate_python(value)
    assert adapter.dump_python(validated, mode="json", exclude_unset=True, by_alias=True) == value


# Requests: the tool fields deskwire makes are the SDKs' request param types.


@pytest.mark.parametrize("case", cases("openai_chat", "request"))
def test_openai_chat_request_params(case: Dict[str, Any]) -> None:
    fields = tools.request_tools("openai_chat", case["tools"], choice=case.get("choice"),
                                 parallel_tool_calls=case.get("parallel_tool_calls"),
                                 strict=case.get("strict", False))
    if "tools" in fields:
        strict(TypeAdapter(List[ChatCompletionToolUnionParam]), fields["tools"])
    if "tool_choice" in fields:
        strict(TypeAdapter(ChatCompletionToolChoiceOptionParam), fields["tool_choice"])


@pytest.mark.parametrize("case", cases("openai_responses", "request"))
def test_openai_responses_request_params(case: Dict[str, Any]) -> None:
    fields = tools.request_tools("openai_responses", case["tools"], choice=case.get("choice"),
                                 catalog=case.get("catalog"),
                                 parallel_tool_calls=case.get("parallel_tool_calls"),
                                 strict=case.get("strict", False))
    if "tools" in fields:
        strict(TypeAdapter(List[ToolParam]), fields["tools"])
    if "tool_choice" in fields:
        strict(TypeAdapter(ToolChoice), fields["tool_choice"])


@pytest.mark.parametrize("case", cases("anthropic", "request"))
def test_anthropic_request_params(case: Dict[str, Any]) -> None:
    fields = tools.request_tools("anthropic", case["tools"], choice=case.get("choice"),
                                 parallel_tool_calls=case.get("parallel_tool_calls"))
    if "tools" in fields:
        strict(TypeAdapter(List[ToolUnionParam]), fields["tools"])
    if "tool_choice" in fields:
        strict(TypeAdapter(ToolChoiceParam), fields["tool_choice"])


def upper_types(value: Any) -> Any:
    """google-genai writes JSON Schema types as its enum (``OBJECT``); Gemini takes either."""
    if isinstance(value, dict):
        return {k: (v.upper() if k == "type" and isinstance(v, str) else upper_types(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [upper_types(v) for v in value]
    return value


@pytest.mark.parametrize("case", cases("gemini", "request"))
def test_gemini_request_params(case: Dict[str, Any]) -> None:
    fields = tools.request_tools("gemini", case["tools"], choice=case.get("choice"),
                                 catalog=case.get("catalog"))
    for tool in fields.get("tools", []):
        model = genai_types.Tool.model_validate(tool)
        assert model.model_dump(mode="json", exclude_unset=True, by_alias=True) == upper_types(tool)
    if "toolConfig" in fields:
        model = genai_types.ToolConfig.model_validate(fields["toolConfig"])
        assert model.model_dump(mode="json", exclude_unset=True, by_alias=True) == fields["toolConfig"]


# Responses: a body validates as the SDK's class, and the SDK object parses through deskwire.

RESPONSE_CLASSES = {
    "openai_chat": ChatCompletion,
    "openai_responses": Response,
    "anthropic": Message,
    "gemini": genai_types.GenerateContentResponse,
}


# The fixtures keep the parts of a body that matter for tool calls; a complete response as the
# API sends it also has these envelope fields (values of no consequence here).
ENVELOPES: Dict[str, Dict[str, Any]] = {
    "openai_chat": {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-4.1"},
    "openai_responses": {"id": "resp_1", "object": "response", "created_at": 1700000000, "model": "gpt-4.1",
                         "output": [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": []},
    "anthropic": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                  "content": [], "stop_reason": None, "stop_sequence": None,
                  "usage": {"input_tokens": 10, "output_tokens": 5}},
    "gemini": {},
}


def responses_item(i: int, item: Dict[str, Any]) -> Dict[str, Any]:
    """An OpenAI Responses output item with the fields the fixtures leave out."""
    if item.get("type") == "message":
        content = [{"annotations": [], **c} if c.get("type") == "output_text" else c for c in item.get("content", [])]
        return {"id": f"msg_{i}", "status": "completed", "role": "assistant", **item, "content": content}
    if item.get("type") == "function_call":
        return {"status": "completed", **item}
    return item


def complete(provider: str, body: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(ENVELOPES[provider])
    out.update(body)
    if provider == "openai_chat":
        out["choices"] = [
            {"index": i, "logprobs": None, **c, "message": {"role": "assistant", "content": None, **c.get("message", {})}}
            for i, c in enumerate(body.get("choices", []))
        ]
    if provider == "openai_responses":
        out["output"] = [responses_item(i, item) for i, item in enumerate(out["output"])]
    return out


def complete_event(provider: str, n: int, event: Dict[str, Any]) -> Dict[str, Any]:
    """A stream event with the fields the fixtures leave out."""
    if provider == "openai_chat":
        choices = [{"index": 0, **c, "delta": c.get("delta", {})} for c in event.get("choices", [])]
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                "model": "gpt-4.1", **event, "choices": choices}
    if provider == "anthropic":
        out = dict(event)
        if out.get("type") == "message_start":
            out["message"] = complete("anthropic", out["message"])
        if out.get("type") == "message_delta":
            out = {"usage": {"output_tokens": 5}, **out}
            out["delta"] = {"stop_sequence": None, **out.get("delta", {})}
        return out
    if provider == "openai_responses":
        out = {"sequence_number": n, **event}
        if isinstance(out.get("response"), dict):
            out["response"] = complete("openai_responses", out["response"])
        if isinstance(out.get("item"), dict):
            out["item"] = responses_item(n, out["item"])
        if out.get("type", "").startswith("response.output_text") and "logprobs" not in out:
            out["logprobs"] = []
        return out
    return event


# Fixtures whose point is input the SDKs' own types refuse (tool arguments as an array): they
# cannot be SDK objects, and run in test_vectors_tools.py only.
NOT_SDK_OBJECTS = {
    "anthropic: thinking kept for the echo, array input is invalid",
    "gemini: functionCall with id; missing args mean {}; array args invalid",
}


def response_cases() -> List[Any]:
    return [
        pytest.param(p, c.values[0], id=f"{p}: {c.id}")
        for p in RESPONSE_CLASSES
        for c in cases(p, "response")
    ]


@pytest.mark.parametrize("provider,case", response_cases())
def test_sdk_response_objects_parse(provider: str, case: Dict[str, Any]) -> None:
    if f"{provider}: {case['name']}" in NOT_SDK_OBJECTS:
        pytest.skip("the fixture's arguments are an array, which the SDK's types refuse")
    sdk_object = RESPONSE_CLASSES[provider].model_validate(complete(provider, case["body"]))
    got = tools.parse_response(provider, sdk_object, seed=case.get("seed", 0))
    assert got.to_dict() == case["expect"]
    # As the SDK serializes it to JSON, too.
    as_json = sdk_object.model_dump_json(exclude_unset=True, by_alias=True)
    assert tools.parse_response(provider, as_json, seed=case.get("seed", 0)).to_dict() == case["expect"]


STREAM_EVENTS = {
    "openai_chat": TypeAdapter(ChatCompletionChunk),
    "openai_responses": TypeAdapter(ResponseStreamEvent),
    "anthropic": TypeAdapter(RawMessageStreamEvent),
    "gemini": TypeAdapter(genai_types.GenerateContentResponse),
}


def stream_cases() -> List[Any]:
    return [pytest.param(p, c.values[0], id=f"{p}: {c.id}") for p in STREAM_EVENTS for c in cases(p, "stream")]


@pytest.mark.parametrize("provider,case", stream_cases())
def test_sdk_stream_events_parse(provider: str, case: Dict[str, Any]) -> None:
    parser = tools.StreamParser(provider, seed=case.get("seed", 0))
    for n, event in enumerate(case["events"]):
        parser.push(STREAM_EVENTS[provider].validate_python(complete_event(provider, n, event)))
    assert parser.finish().to_dict() == case["expect"]
