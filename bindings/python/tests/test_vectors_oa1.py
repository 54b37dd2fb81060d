"""tests/vectors/oa1.json through the Python API: escaping, frames, chunking, ERR payloads, and
the scripted client/server exchanges on a virtual clock."""

from __future__ import annotations

from typing import Any, Dict, List, Union

import pytest

import deskwire
from deskwire import Timeout, oa1

from conftest import load_vectors, output_json

DOC = load_vectors("oa1.json")


def ids(cases: List[Dict[str, Any]]) -> List[str]:
    return [c["name"] for c in cases]


@pytest.mark.parametrize("case", DOC["escape"], ids=ids(DOC["escape"]))
def test_escape(case: Dict[str, Any]) -> None:
    assert oa1.escape(case["text"]) == case["escaped"]


@pytest.mark.parametrize("case", DOC["unescape"], ids=ids(DOC["unescape"]))
def test_unescape(case: Dict[str, Any]) -> None:
    assert oa1.unescape(case["escaped"].encode()) == case["text"].encode()


@pytest.mark.parametrize("case", DOC["frames"], ids=ids(DOC["frames"]))
def test_frames(case: Dict[str, Any]) -> None:
    assert oa1.parse_frame(case["text"]) == case["frame"]


@pytest.mark.parametrize("case", DOC["format"], ids=ids(DOC["format"]))
def test_format(case: Dict[str, Any]) -> None:
    f = case["frame"]
    text = oa1.format_frame(f["type"], f["id"], f["seq"], f["more"], f["payload"])
    assert text == case["text"]
    assert oa1.parse_frame(text) == f


@pytest.mark.parametrize("case", DOC["chunks"], ids=ids(DOC["chunks"]))
def test_chunks(case: Dict[str, Any]) -> None:
    payloads = oa1.split(case["text"], case["budget"])
    assert payloads == case["payloads"]
    joined = b"".join(oa1.unescape(p.encode()) for p in payloads)
    assert joined == case["text"].encode()


@pytest.mark.parametrize("case", DOC["err_payloads"], ids=ids(DOC["err_payloads"]))
def test_err_payloads(case: Dict[str, Any]) -> None:
    assert oa1.parse_err_payload(case["payload"]) == (case["code"], case["message"])


def bind(value: Any, bound: Dict[str, str]) -> Any:
    """Replaces ``{name}`` with the ids bound so far, in every string of ``value``."""
    if isinstance(value, str):
        for name, rid in bound.items():
            value = value.replace("{" + name + "}", rid)
        return value
    if isinstance(value, list):
        return [bind(v, bound) for v in value]
    if isinstance(value, dict):
        return {k: bind(v, bound) for k, v in value.items()}
    return value


def shaped(output: Any, expected: Union[Dict[str, Any], None]) -> Dict[str, Any]:
    """An output as the vectors write it: a ``failed`` event carries its message only where
    the expectation has one (the texts of timeout and incomplete are not protocol)."""
    got = output_json(output)
    failed = got.get("event", {}).get("failed")
    if failed is not None:
        wants = expected is not None and "message" in expected.get("event", {}).get("failed", {})
        if not wants:
            del failed["message"]
    return got


def run_step(endpoint: Any, step: Dict[str, Any], bound: Dict[str, str]) -> None:
    now = step["at"]
    if "request" in step:
        r = step["request"]
        rid = endpoint.request(now, r["payload"], r.get("timeout_ms"))
        if "bind" in step:
            bound[step["bind"]] = rid
    elif "cancel" in step:
        endpoint.cancel(now, step["cancel"]["id"], step["cancel"]["reason"])
    elif "send" in step:
        endpoint.send(now, step["send"]["id"], step["send"]["text"])
    elif "finish" in step:
        endpoint.finish(now, step["finish"]["id"])
    elif "respond" in step:
        endpoint.respond(now, step["respond"]["id"], step["respond"]["text"])
    elif "fail" in step:
        f = step["fail"]
        endpoint.fail(now, f["id"], f["code"], f["message"])
    else:
        raise AssertionError(f"unknown step {step}")


@pytest.mark.parametrize("exchange", DOC["exchanges"], ids=ids(DOC["exchanges"]))
def test_exchanges(exchange: Dict[str, Any]) -> None:
    config = dict(exchange["config"])
    channel, nick = config.pop("channel"), config.pop("nick")
    if exchange["endpoint"] == "client":
        endpoint: Any = oa1.Client(channel, nick, seed=exchange["seed"], **config)
    else:
        endpoint = oa1.Server(channel, nick, **config)
    bound: Dict[str, str] = {}
    for index, raw in enumerate(exchange["steps"]):
        step = bind(raw, bound)
        at = f"step {index}: {raw}"
        now = step["at"]
        if "line" in step:
            endpoint.handle_line(now, step["line"].encode())
        elif "poll" in step:
            expected = step["poll"]
            got: List[Dict[str, Any]] = []
            while True:
                out = endpoint.poll_output(now)
                got.append(shaped(out, expected[len(got)] if len(got) < len(expected) else None))
                assert len(got) <= len(expected) + 50, f"{at}: poll does not end"
                if isinstance(out, Timeout):
                    break
            assert got == expected, at
        elif "stats" in step:
            stats = endpoint.stats()
            for counter, value in step["stats"].items():
                assert counter in stats, f"{at}: unknown counter {counter}"
                assert stats[counter] == value, f"{at}: {counter}"
        else:
            expected_error = step.get("expect_error")
            if expected_error is None:
                run_step(endpoint, step, bound)
            else:
                with pytest.raises(deskwire.LocalError) as caught:
                    run_step(endpoint, step, bound)
                assert caught.value.code == expected_error, at
