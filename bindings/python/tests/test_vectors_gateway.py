"""tests/vectors/gateway.json ``sequences`` through ``deskwire.gateway.Gateway``: each replays
one gateway (the token ``s3cr3t-token``, clock at 0, one connection) through Commander
messages and executor calls, and every step's output must equal the vector's envelopes (stamped
with the sequence's ``ts``). The file's ``cases`` run in test_vectors_schemas.py."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

import deskwire
from deskwire import Timeout, gateway

from conftest import load_vectors

DOC = load_vectors("gateway.json")


def host(gw: gateway.Gateway, now: int, h: Dict[str, Any]) -> None:
    job = h.get("jobId", "")
    action = h["action"]
    if action == "progress":
        gw.set_progress(job, h.get("step"), h.get("progress"))
    elif action == "log":
        gw.log(job, h["level"], h["msg"])
    elif action == "review_ready":
        gw.review_ready(now, job, h["artifacts"])
    elif action == "complete":
        gw.complete(now, job, h.get("artifacts"))
    elif action == "fail":
        gw.fail(now, job, h["error_body"])
    elif action == "roll_back":
        gw.roll_back(now, job)
    elif action == "cancel":
        gw.cancel(now, job)
    elif action == "transition":
        gw.transition(now, job, h["to"])
    elif action == "request_approval":
        ticket = gw.request_approval(job, h["kind"], h["requested"], h.get("approvalId"))
        assert ticket["status"] == h.get("status", "pending")
        if h.get("approvalId"):
            assert ticket["approval_id"] == h["approvalId"]
    elif action == "authenticate":
        assert gw.authenticate_connection(1, h["token"]) == h["accepted"]
    elif action == "close":
        gw.close_connection(1)
    elif action == "timeout":
        gw.handle_timeout(h["now_ms"])
    else:
        raise AssertionError(f"unknown host action {action}")


@pytest.mark.parametrize("seq", DOC["sequences"], ids=[s["name"] for s in DOC["sequences"]])
def test_sequences(seq: Dict[str, Any]) -> None:
    gw = gateway.Gateway(["s3cr3t-token"], now_ms=0, entropy=bytes(32), **(seq.get("config") or {}))
    now = 0
    for i, step in enumerate(seq["steps"]):
        at = f"step {i}"
        now = step.get("now_ms", now)
        if "in" in step:
            gw.handle_message(now, 1, json.dumps(step["in"]).encode())
        else:
            if step["host"]["action"] == "timeout":
                now = step["host"]["now_ms"]
            if "error" in step:
                with pytest.raises(deskwire.LocalError) as caught:
                    host(gw, now, step["host"])
                assert caught.value.code == "transition", at
                assert step["error"]["from"] in caught.value.message, at
                assert step["error"]["to"] in caught.value.message, at
            else:
                host(gw, now, step["host"])
        out: List[Dict[str, Any]] = []
        while True:
            o = gw.poll_output(now, ts=seq["ts"])
            if isinstance(o, Timeout):
                break
            if isinstance(o, gateway.Send):
                assert o.conn == 1
                out.append(o.message)
        assert out == step["out"], at
