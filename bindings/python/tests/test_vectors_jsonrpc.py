"""tests/vectors/jsonrpc.json (the JSON-RPC 2.0 message model) through ``jsonrpc.parse_message``."""

from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from deskwire import ProtocolError, jsonrpc

from conftest import load_vectors

DOC = load_vectors("jsonrpc.json")
LIMIT = DOC["batch_limit"]


def check_message(got: Dict[str, Any], expect: Dict[str, Any]) -> None:
    assert got["kind"] == expect["kind"]
    if expect["kind"] == "invalid":
        assert got["error"]["code"] == expect["code"]
        assert got["id"] == expect["id"]
        return
    if "id" in expect:
        assert got["id"] == expect["id"]
    if "method" in expect:
        assert got["method"] == expect["method"]
    if "params" in expect:
        assert got["params"] == json.loads(expect["params"])
    else:
        assert "params" not in got
    if "result" in expect:
        assert got["result"] == json.loads(expect["result"])
    if "code" in expect:
        assert got["error"]["code"] == expect["code"]
    if "canonical" in expect:
        assert got["wire"] == expect["canonical"].encode()
        again = jsonrpc.parse_message(got["wire"], LIMIT)
        assert again == got


@pytest.mark.parametrize("case", DOC["cases"], ids=[c["name"] for c in DOC["cases"]])
def test_message_model(case: Dict[str, Any]) -> None:
    frame = case["input"].encode() if "input" in case else bytes.fromhex(case["input_hex"])
    expect = case["expect"]
    if expect["kind"] == "invalid":
        with pytest.raises(ProtocolError) as caught:
            jsonrpc.parse_message(frame, LIMIT)
        assert caught.value.error["code"] == expect["code"]  # type: ignore[attr-defined]
        assert caught.value.id == expect["id"]  # type: ignore[attr-defined]
    elif expect["kind"] == "batch":
        got = jsonrpc.parse_message(frame, LIMIT)
        assert isinstance(got, list)
        assert len(got) == len(expect["elements"])
        for item, element in zip(got, expect["elements"]):
            check_message(item, element)
    else:
        check_message(jsonrpc.parse_message(frame, LIMIT), expect)
