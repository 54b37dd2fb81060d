"""Bad input from Python: wrong types, invalid UTF-8, huge inputs, misuse after close. Every case
ends in a typed exception or a counted, ignored input; the engines keep working afterwards."""

from __future__ import annotations

import math
import os
import sys
import threading
from typing import Any

import pytest

import deskwire
from deskwire import Timeout, Transmit, gateway, irc, jsonrpc, mobile, oa1, sim, tools


def drain(engine: Any, now: int = 0) -> list:
    out = []
    while True:
        o = engine.poll_output(now)
        out.append(o)
        if isinstance(o, Timeout):
            return out


def test_imported_from_the_installed_package() -> None:
    """Under tests/run.sh the package comes from the venv, so a missing build step shows."""
    if os.environ.get("DESKWIRE_INSTALLED") == "1":
        assert deskwire.__file__ is not None and deskwire.__file__.startswith(sys.prefix)
    assert deskwire.__version__


@pytest.mark.parametrize(
    "call",
    [
        lambda: oa1.Client(1, "desk"),  # type: ignore[arg-type]
        lambda: oa1.Client("#desk", "desk").request("0", "x"),  # type: ignore[arg-type]
        lambda: oa1.Client("#desk", "desk").handle_line(0, "a str, not bytes"),  # type: ignore[arg-type]
        lambda: oa1.Desk("desk", "#desk", oa1={"allowed_sender": "deskbot"}).handle_bytes(0, ["list"]),  # type: ignore[arg-type]
        lambda: oa1.escape(b"bytes"),  # type: ignore[arg-type]
        lambda: jsonrpc.Peer().call(0, 5),  # type: ignore[arg-type]
        lambda: jsonrpc.Peer().respond(0, 1.5, {}),
        lambda: irc.parse("str"),  # type: ignore[arg-type]
    ],
)
def test_wrong_types_raise_type_error(call: Any) -> None:
    with pytest.raises(TypeError):
        call()


def test_negative_and_huge_clock_values() -> None:
    client = oa1.Client("#desk", "desk")
    with pytest.raises(OverflowError):
        client.request(-1, "x")
    with pytest.raises(OverflowError):
        client.request(2**64, "x")
    # The largest clock value is accepted and does not overflow inside.
    client.request(2**64 - 1, "x")
    assert isinstance(drain(client, 2**64 - 1)[-1], Timeout)


@pytest.mark.parametrize(
    "options",
    [
        {"no_such_option": 1},
        {"max_streams": "many"},
        {"pacing": {"burst": -1, "interval_ms": 0}},
        {"max_message_bytes": 2**70},
    ],
)
def test_bad_configs_are_local_errors(options: Any) -> None:
    with pytest.raises(deskwire.LocalError) as caught:
        oa1.Client("#desk", "desk", **options)
    assert caught.value.code == "invalid_value"


@pytest.mark.parametrize(
    "make",
    [
        lambda: gateway.Gateway(["t"], max_runing=2),
        lambda: jsonrpc.Peer("sidecar", max_pendng=2),
        lambda: jsonrpc.Peer("jsonrpc2", timeouts={"default_ms": 5}),
        lambda: mobile.Client(max_queud=2),
        lambda: mobile.Server(max_tokns=2),
        lambda: tools.Toolbox(config={"approvals": {"timout_ms": 5}}),
    ],
    ids=["gateway", "peer", "peer timeouts", "mobile client", "mobile server", "toolbox"],
)
def test_misspelt_options_are_refused_not_ignored(make: Any) -> None:
    with pytest.raises(deskwire.LocalError) as caught:
        make()
    assert caught.value.code == "invalid_value"
    assert "unknown field" in caught.value.message


@pytest.mark.parametrize(
    "value",
    [{1: "int key"}, {"x": math.nan}, {"x": 2**80}, {"x": object()}, {"x": {1, 2}}, b"bytes"],
)
def test_values_that_are_not_json_are_local_errors(value: Any) -> None:
    peer = jsonrpc.Peer()
    with pytest.raises(deskwire.LocalError):
        peer.call(0, "m", value)
    # Nothing was sent.
    assert drain(peer)[0] == Timeout(drain(peer)[0].at_ms)


def test_deep_nesting_is_refused_not_a_crash() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(deskwire.LocalError):
        jsonrpc.Peer().call(0, "m", deep)
    cycle: Any = {}
    cycle["self"] = cycle
    with pytest.raises(deskwire.LocalError):
        jsonrpc.Peer().call(0, "m", cycle)


def test_invalid_utf8_lines_are_ignored_and_counted() -> None:
    server = oa1.Server("#desk", "deskbot")
    server.handle_line(0, b":desk!u@h PRIVMSG #desk :OA1 REQ abc 1 0 \xff\xfe\xfd")
    server.handle_line(0, b"\xff\xff\xff")
    server.handle_line(0, b"\x00\r\n")
    events = [o for o in drain(server) if not isinstance(o, (Timeout, Transmit))]
    stats = server.stats()
    assert stats["lines_in"] == 3
    # The frame with invalid UTF-8 is decoded with replacement characters; garbage is counted.
    assert stats["invalid_lines"] + len(events) >= 2
    for event in events:
        assert isinstance(event, oa1.Request) and "\ufffd" in event.payload


def test_huge_inputs_stay_bounded() -> None:
    desk = oa1.Desk("desk", "#desk", oa1={"allowed_sender": "deskbot"})
    garbage = os.urandom(8 << 20).replace(b"\n", b"x")  # 8 MiB without a line end
    desk.handle_bytes(0, garbage)
    desk.handle_bytes(0, b"\r\n:irc PING :x\r\n")
    assert desk.stats()["irc"]["ignored_too_long"] >= 1
    assert any(isinstance(o, Transmit) and b"PONG" in o.data for o in drain(desk))

    peer = jsonrpc.Peer()
    peer.handle_bytes(0, b"[" * (20 << 20) + b"\n")  # 20 MiB over the message limit
    peer.handle_bytes(0, b'{"jsonrpc":"2.0","id":1,"method":"m"}\n')
    assert peer.stats()["framing_errors"] == 1
    assert any(isinstance(o, jsonrpc.Request) for o in drain(peer))
    assert peer.stats()["bytes_buffered"] < 1 << 20

    client = oa1.Client("#desk", "desk", max_message_bytes=1024)
    with pytest.raises(deskwire.LocalError) as caught:
        client.request(0, "x" * 2048)
    assert caught.value.code == "too_large"

    big = "ü\\\n" * (4 << 20)
    assert oa1.unescape(oa1.escape(big).encode()) == big.encode()

    with pytest.raises(deskwire.ProtocolError) as perr:
        tools.parse_response("openai_chat", b"{" * (1 << 20))
    assert perr.value.code == "not_json"


def test_use_after_close_raises_closed_error() -> None:
    engines: Any = [
        oa1.Client("#desk", "desk"),
        oa1.Server("#desk", "deskbot"),
        oa1.Desk("desk", "#desk", oa1={"allowed_sender": "deskbot"}),
        oa1.Remote("deskbot", "#desk"),
        jsonrpc.Peer(),
        irc.Session("desk", ["#desk"]),
    ]
    for engine in engines:
        engine.close()
        with pytest.raises(deskwire.ClosedError):
            engine.poll_output(0)
        with pytest.raises(deskwire.ClosedError):
            engine.handle_timeout(0)
        assert isinstance(deskwire.ClosedError("closed", "x"), deskwire.LocalError)
    parser = tools.StreamParser("anthropic")
    parser.push({"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
    parser.finish()
    with pytest.raises(deskwire.ClosedError):
        parser.feed(b"data: {}\n\n")


def test_engine_closed_by_the_peer_refuses_requests() -> None:
    desk = oa1.Desk("desk", "#desk", oa1={"allowed_sender": "deskbot"})
    desk.handle_eof(0)
    drain(desk)
    assert desk.state == "closed"
    with pytest.raises(deskwire.ClosedError):
        desk.request(0, "x")


def test_provider_garbage_is_a_protocol_error() -> None:
    for provider in tools.PROVIDERS:
        for body in (b"", b"\xff\xfe", b"[]", b'{"unexpected": true}', "null"):
            if provider == "gemini" and body == b"[]":
                continue  # an array of responses is Gemini's streamGenerateContent without SSE
            with pytest.raises(deskwire.DeskwireError):
                tools.parse_response(provider, body)
    with pytest.raises(deskwire.LocalError):
        tools.parse_response("no_such_provider", b"{}")
    parser = tools.StreamParser("openai_chat", max_bytes=1024)
    with pytest.raises(deskwire.ProtocolError):
        parser.feed(b"data: " + b'{"choices":[{"delta":{"content":"' + b"x" * 4096 + b'"}}]}\n\n')


def test_threads_share_an_engine_safely() -> None:
    client = oa1.Client("#desk", "desk", max_streams=10_000, pacing={"burst": 1000000, "interval_ms": 0})
    errors: list = []

    def work() -> None:
        try:
            for i in range(500):
                client.request(i, f"payload {i}")
                client.poll_output(i)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert client.in_flight == 2000


def test_relay_refuses_over_long_lines() -> None:
    relay = sim.Relay("#desk")
    relay.join("desk")
    with pytest.raises(deskwire.LocalError) as caught:
        relay.send("desk", "PRIVMSG #desk :" + "x" * 600)
    assert caught.value.code == "too_long"


def test_payloads_may_be_utf8_bytes_but_nothing_else() -> None:
    client = oa1.Client("#desk", "desk", seed=1)
    server = oa1.Server("#desk", "deskbot")
    text = "héllo 𝄞\n\\ end"
    client.request(0, text.encode())
    lines, _, _ = client.drain(0)
    server.handle_lines(0, [b":desk!~desk@host " + line for line in lines])
    _, (request,), _ = server.drain(0)
    assert request.payload == text
    server.respond(0, request.id, "done ✓".encode())
    lines, _, _ = server.drain(0)
    client.handle_lines(0, [b":deskbot!~deskbot@host " + line for line in lines])
    _, (response,), _ = client.drain(0)
    assert (response.id, response.text) == (request.id, "done ✓")

    before = client.in_flight
    with pytest.raises(deskwire.LocalError) as caught:
        client.request(0, b"caf\xc3")  # a sequence cut short
    assert caught.value.code == "invalid_value"
    assert "payload" in caught.value.message and "UTF-8" in caught.value.message
    assert "index 3" in caught.value.message  # where the bad sequence starts
    assert client.in_flight == before  # nothing was sent
    for wrong in (bytearray(b"x"), memoryview(b"x"), 7, None):
        with pytest.raises(TypeError):
            client.request(0, wrong)  # type: ignore[arg-type]
    with pytest.raises(deskwire.LocalError):
        server.send(0, request.id, b"\xff")
