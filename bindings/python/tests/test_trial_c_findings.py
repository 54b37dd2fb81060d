"""What the C trial found accepted, refused by the core for Python too (notes/trial-c.md 1,
5, 6): zero timeouts, a channel or nick given twice with different values, and JSON-RPC params
that are neither an object nor an array (the sidecar dialect: not an object)."""

from __future__ import annotations

from typing import Any

import pytest

import deskwire
from deskwire import Timeout, jsonrpc, oa1


@pytest.mark.parametrize("field", ["request_timeout_ms", "ready_timeout_ms", "partial_timeout_ms"])
def test_a_zero_timeout_is_refused_naming_the_field(field: str) -> None:
    with pytest.raises(deskwire.LocalError, match=f"oa1.{field} is 0"):
        oa1.Desk("desk", "#desk", oa1={"allowed_sender": "rexd", field: 0})
    oa1.Desk("desk", "#desk", oa1={"allowed_sender": "rexd", field: 1})


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"oa1": {"allowed_sender": "rexd", "channel": "#other"}}, ['channel is "#desk"', 'oa1.channel is "#other"']),
        ({"oa1": {"allowed_sender": "rexd", "nick": "other"}}, ['nick is "desk"', 'oa1.nick is "other"']),
        ({"session": {"nick": "other"}, "oa1": {"allowed_sender": "rexd"}}, ['session.nick is "other"']),
        ({"session": {"channels": ["#x"]}, "oa1": {"allowed_sender": "rexd"}}, ['session.channels is ["#x"]']),
    ],
)
def test_a_channel_or_nick_given_twice_must_agree(options: dict[str, Any], names: list[str]) -> None:
    with pytest.raises(deskwire.LocalError) as refused:
        oa1.Desk("desk", "#desk", **options)
    for name in names:
        assert name in str(refused.value)
    # The same value repeated is fine.
    oa1.Desk("desk", "#desk", session={"nick": "desk", "channels": ["#desk"]}, oa1={"allowed_sender": "rexd", "channel": "#desk"})


def _sent(peer: jsonrpc.Peer) -> list[Any]:
    out = []
    while not isinstance(o := peer.poll_output(0), Timeout):
        out.append(o)
    return out


@pytest.mark.parametrize("params", ["str", 5, True])
def test_params_that_are_not_an_object_or_array_are_refused(params: Any) -> None:
    peer = jsonrpc.Peer("jsonrpc2")
    with pytest.raises(deskwire.LocalError, match="an object or an array"):
        peer.call(0, "m", params)
    assert _sent(peer) == []
    peer.call(0, "m", [1])
    assert len(_sent(peer)) == 1
    sidecar = jsonrpc.Peer("sidecar")
    with pytest.raises(deskwire.LocalError, match="an object"):
        sidecar.call(0, "m", [1])
    sidecar.call(0, "m", {})


@pytest.mark.parametrize(
    ("method", "null_id", "why"),
    [("", False, "an empty method name"), ("rpc.discover", False, "reserved"), ("m", True, "null id")],
)
def test_a_call_the_peer_could_not_take_is_refused(method: str, null_id: bool, why: str) -> None:
    """An empty method, a JSON-RPC 2.0 name the protocol reserves (``rpc.``) and a ``null`` id,
    which the answers to unreadable requests carry (trial-c, finding 11)."""
    peer = jsonrpc.Peer("jsonrpc2")
    with pytest.raises(deskwire.LocalError, match=why):
        if null_id:
            peer.call_with_id(0, None, method)
        else:
            peer.call(0, method)
    assert _sent(peer) == []


@pytest.mark.parametrize(
    ("id", "seq", "payload", "why"),
    [
        ("ab", 1, "x\r\nQUIT", "CR"),
        ("ab", 1, "x\nQUIT", "LF"),
        ("ab", 1, "x\0y", "NUL"),
        ("a b", 1, "x", "id"),
        ("ab", 0, "x", "seq"),
    ],
)
def test_a_frame_the_parser_would_refuse_is_not_formatted(id: str, seq: int, payload: str, why: str) -> None:
    """A raw CR or LF would end the IRC line inside the payload: the rest would be a line of
    its own (an injected QUIT)."""
    with pytest.raises(deskwire.LocalError) as refused:
        oa1.format_frame("REQ", id, seq, False, payload)
    assert why in str(refused.value)
    assert oa1.parse_frame(oa1.format_frame("REQ", "ab", 1, False, oa1.escape("x\r\nQUIT"))) is not None
