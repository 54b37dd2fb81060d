"""jsonrpc.Peer on its own (sans-IO): what a peer sends that cannot be read, and the sidecar
dialect's default timeouts."""

from __future__ import annotations

import json
from typing import Any, List

import pytest

from deskwire import LocalError, Timeout, Transmit, jsonrpc


def drain(peer: jsonrpc.Peer, now: int) -> List[Any]:
    outs: List[Any] = []
    while True:
        out = peer.poll_output(now)
        if isinstance(out, Timeout):
            return outs
        outs.append(out)


def test_an_unreadable_result_ends_the_call_malformed_and_poll_output_never_raises() -> None:
    host = jsonrpc.Peer("sidecar", seed=1)
    call = host.call(0, "inference.complete", {}, user=4)
    drain(host, 0)
    host.handle_bytes(1, ('{"id":"%s","result":{"text":"\\ud800"}}\n' % call).encode())
    outs = drain(host, 1)
    assert len(outs) == 1 and isinstance(outs[0], jsonrpc.Failed), outs
    failed = outs[0]
    assert (failed.id, failed.user, failed.method) == (call, 4, "inference.complete")
    assert failed.malformed is not None and "unreadable result" in failed.malformed
    assert failed.remote is None and not failed.timed_out
    assert not host.is_pending(call)


def test_a_request_with_unreadable_params_is_answered_invalid_params() -> None:
    sidecar = jsonrpc.Peer("sidecar")
    sidecar.handle_bytes(
        0,
        b'{"id":"s","method":"health.ping","params":{"x":"\\ud800"}}\n'
        b'{"id":"b","method":"health.ping","params":{}}\n',
    )
    outs = drain(sidecar, 0)
    events = [o for o in outs if not isinstance(o, Transmit)]
    sent = [json.loads(o.data) for o in outs if isinstance(o, Transmit)]
    assert isinstance(events[0], jsonrpc.Malformed)
    assert isinstance(events[1], jsonrpc.Request) and events[1].id == "b"
    assert sent[0]["id"] == "s" and sent[0]["error"]["code"] == "INVALID_PARAMS"
    assert "unreadable params" in sent[0]["error"]["message"]


def _timeout_of(peer: jsonrpc.Peer, method: str) -> int:
    peer.call(1_000, method, {})
    outs = drain(peer, 1_000)
    assert all(isinstance(o, Transmit) for o in outs)
    deadline = peer.poll_output(1_000)
    assert isinstance(deadline, Timeout)
    return int(deadline.at_ms) - 1_000


@pytest.mark.parametrize(
    "method, seconds",
    [("health.ping", 10), ("inference.embed", 30), ("inference.complete", 120),
     ("training.start", 300), ("model.load", 60), ("other.thing", 30)],
)
def test_a_sidecar_peer_has_the_sidecar_timeouts_by_default(method: str, seconds: int) -> None:
    assert _timeout_of(jsonrpc.Peer("sidecar"), method) == seconds * 1000
    # Another dialect keeps 30 s for everything; a host's own choice wins.
    assert _timeout_of(jsonrpc.Peer("jsonrpc2"), method) == 30_000
    assert _timeout_of(jsonrpc.Peer("sidecar", timeouts="default"), method) == 30_000
    assert _timeout_of(jsonrpc.Peer("jsonrpc2", timeouts="sidecar"), method) == seconds * 1000
    flat = jsonrpc.Peer("sidecar", timeouts={"default_timeout_ms": 5_000})
    assert _timeout_of(flat, method) == 5_000


def test_config_shows_the_sidecar_table_and_keeps_other_options() -> None:
    peer = jsonrpc.Peer("sidecar", max_pending=3)
    config = peer.config()
    assert config["max_pending"] == 3
    assert {r["prefix"]: r["timeout_ms"] for r in config["timeouts"]["rules"]}["training.start"] == 300_000


@pytest.mark.parametrize("bad", ["sidecars", 5, {"default_timeout": 1}])
def test_a_bad_timeouts_value_says_what_is_valid(bad: Any) -> None:
    with pytest.raises(LocalError) as caught:
        jsonrpc.Peer("sidecar", timeouts=bad)
    text = str(caught.value)
    assert ('"sidecar"' in text and '"default"' in text) or "default_timeout_ms" in text, text
