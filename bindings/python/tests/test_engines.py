"""The engines driven from Python on a virtual clock: two JSON-RPC peers in each dialect and
framing, timeouts, cancellation, progress; the IRC session; the in-memory relay with the bare
OA1 endpoints."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest

import deskwire
from deskwire import Timeout, Transmit, irc, jsonrpc, oa1, sim


def pump(a: Any, b: Any, now: int) -> Tuple[List[Any], List[Any]]:
    """Moves every transmit between ``a`` and ``b`` until both are drained; the events."""
    events: Tuple[List[Any], List[Any]] = ([], [])
    moved = True
    while moved:
        moved = False
        for side, (src, dst) in enumerate(((a, b), (b, a))):
            while True:
                out = src.poll_output(now)
                if isinstance(out, Transmit):
                    dst.handle_bytes(now, out.data)
                    moved = True
                elif isinstance(out, Timeout):
                    break
                else:
                    events[side].append(out)
    return events


@pytest.mark.parametrize("dialect", ["jsonrpc2", "sidecar"])
@pytest.mark.parametrize("framing", ["ndjson", "content_length"])
def test_two_peers(dialect: str, framing: str) -> None:
    client = jsonrpc.Peer(dialect, framing=framing, seed=1)
    server = jsonrpc.Peer(dialect, framing=framing, seed=2)
    call = client.call(0, "health.ping", {"x": [1, 2.5, None, "ü"]}, user=9)
    out = client.poll_output(0)
    assert isinstance(out, Transmit)
    if framing == "content_length":
        assert out.data.startswith(b"Content-Length: ")
    else:
        assert out.data.endswith(b"\n")
    server.handle_bytes(0, out.data)
    (request,) = [e for e in pump(client, server, 0)[1] if isinstance(e, jsonrpc.Request)]
    assert request.method == "health.ping" and request.params == {"x": [1, 2.5, None, "ü"]}
    if dialect == "sidecar":
        server.progress(1, request.id, {"stage": "warming", "epoch": 1})
    server.respond(2, request.id, {"status": "ok"})
    events = pump(client, server, 2)[0]
    if dialect == "sidecar":
        assert isinstance(events[0], jsonrpc.Progress) and events[0].progress["epoch"] == 1
    assert events[-1] == jsonrpc.Response(id=call, method="health.ping", user=9, result={"status": "ok"})
    with pytest.raises(deskwire.LocalError) as caught:
        server.respond(3, request.id, {})
    assert caught.value.code == "unknown_id"


def test_timeout_cancel_and_errors() -> None:
    client = jsonrpc.Peer("sidecar", timeouts="sidecar", seed=1)
    server = jsonrpc.Peer("sidecar", seed=2)
    ping = client.call(0, "health.ping", {})
    pump(client, server, 0)
    # health.* times out after 10 s under the sidecar policy.
    client.handle_timeout(10_000)
    events = pump(client, server, 10_000)[0]
    assert [e for e in events if isinstance(e, jsonrpc.Failed)][0].timed_out
    assert client.stats()["timeouts"] == 1

    train = client.call(10_000, "training.start", {"model_id": "m"})
    pump(client, server, 10_000)
    client.cancel(10_001, train)
    assert not client.is_pending(train)
    assert client.stats()["cancelled"] == 1
    with pytest.raises(deskwire.LocalError):
        client.cancel(10_002, train)

    load = client.call(20_000, "model.load", {"model_id": "x"})
    (req,) = [e for e in pump(client, server, 20_000)[1] if isinstance(e, jsonrpc.Request) and e.method == "model.load"]
    server.respond_error(20_001, req.id, "MODEL_NOT_FOUND", "no model x")
    failed = [e for e in pump(client, server, 20_001)[0] if isinstance(e, jsonrpc.Failed)]
    assert failed[-1].id == load and failed[-1].remote == {"code": "MODEL_NOT_FOUND", "message": "no model x"}


def test_jsonrpc2_refuses_what_the_dialect_cannot_carry() -> None:
    server = jsonrpc.Peer("jsonrpc2")
    server.handle_bytes(0, b'{"jsonrpc":"2.0","id":1,"method":"m"}\n')
    (req,) = [o for o in [server.poll_output(0)] if isinstance(o, jsonrpc.Request)]
    with pytest.raises(deskwire.LocalError) as caught:
        server.progress(0, req.id, {"x": 1})
    assert caught.value.code == "unsupported"
    with pytest.raises(deskwire.LocalError):
        server.respond_error(0, req.id, "NAME", "a string code in JSON-RPC 2.0")
    server.respond_error(0, req.id, -32601, "Method not found", {"method": "m"})
    out = server.poll_output(0)
    assert isinstance(out, Transmit) and b'"code":-32601' in out.data


def test_irc_session_registers_joins_and_answers_ping() -> None:
    session = irc.Session("desk", ["#desk"], now_ms=0)
    outs = []
    while True:
        o = session.poll_output(0)
        if isinstance(o, Timeout):
            break
        outs.append(o)
    sent = b"".join(o.data for o in outs if isinstance(o, Transmit))
    assert b"NICK desk\r\n" in sent and b"USER desk" in sent
    session.handle_bytes(1, b":srv 433 * desk :Nickname is already in use\r\n")
    session.handle_bytes(1, b":srv 001 desk_ :Welcome\r\n:desk_!~desk@h JOIN #desk\r\nPING :tok\r\n")
    events, sent = [], b""
    while True:
        o = session.poll_output(1)
        if isinstance(o, Timeout):
            break
        if isinstance(o, Transmit):
            sent += o.data
        else:
            events.append(o)
    assert irc.Registered(nick="desk_") in events and irc.Joined(channel="#desk") in events
    assert b"PONG" in sent and session.nick == "desk_" and session.channels == ["#desk"]
    with pytest.raises(deskwire.LocalError) as caught:
        session.privmsg("#desk", "bad\nline")
    assert caught.value.code == "forbidden_byte"
    with pytest.raises(deskwire.LocalError):
        irc.Session("bad nick", [])


def test_bare_endpoints_over_the_relay() -> None:
    relay = sim.Relay("#desk", seed=3, noise=2)
    relay.join("desk")
    relay.join("deskbot")
    client = oa1.Client("#desk", "desk", seed=5, allowed_sender="deskbot")
    server = oa1.Server("#desk", "deskbot", allowed_sender="desk", flush_delay_ms=0)
    rid = client.request(0, "ping ü\t\\ " * 100)
    result = None
    for now in range(0, 60_000, 500):
        for endpoint, nick in ((client, "desk"), (server, "deskbot")):
            while True:
                o = endpoint.poll_output(now)
                if isinstance(o, Transmit):
                    relay.send(nick, o.data.decode())
                elif isinstance(o, Timeout):
                    break
                elif isinstance(o, oa1.Request):
                    server.send(now, o.id, o.payload.upper())
                    server.finish(now, o.id)
                elif isinstance(o, oa1.Response):
                    result = o
            while (line := relay.recv(nick)) is not None:
                endpoint.handle_line(now, line.encode())
        if result:
            break
    # The relay trims each line as IRC servers do: toward a peer not known to be deskwire the
    # spec's escapes carry no final space, so the one that ends the text is eaten, exactly as a
    # spec-only sender's would be. Every other byte arrives.
    assert result is not None and result.id == rid and result.text == ("PING Ü\t\\ " * 100)[:-1]
    assert relay.stats()["noise"] > 0 and client.stats()["ignored"] > 0


def _request_lines(text: str) -> List[bytes]:
    client = oa1.Client("#desk", "desk", seed=9, pacing={"burst": 10_000, "interval_ms": 0})
    client.request(0, text)
    lines, events, deadline = client.drain(0)
    assert events == [] and isinstance(deadline, int)
    assert client.poll_output(0) == Timeout(deadline)
    return [b":desk!~desk@host " + line for line in lines]


def test_drain_gives_what_poll_output_would() -> None:
    text = "ü\t\\ line\n" * 3000
    lines = _request_lines(text)
    client = oa1.Client("#desk", "desk", seed=9, pacing={"burst": 10_000, "interval_ms": 0})
    client.request(0, text)
    one_by_one = []
    while isinstance(out := client.poll_output(0), Transmit):
        one_by_one.append(b":desk!~desk@host " + out.data)
    assert lines == one_by_one and len(lines) > 100
    # Pacing holds lines back in drain as in poll_output: the deadline says when the next goes.
    paced = oa1.Client("#desk", "desk", seed=9, pacing={"burst": 3, "interval_ms": 1000})
    paced.request(0, text)
    first, _, deadline = paced.drain(0)
    assert [b":desk!~desk@host " + line for line in first] == lines[:3] and deadline == 1000


def test_handle_lines_is_handle_line_for_each() -> None:
    text = "ü\t\\ line\n" * 7000  # past the size at which the GIL is released
    lines = _request_lines(text)
    assert sum(map(len, lines)) > 64 * 1024
    bulk = oa1.Server("#desk", "deskbot")
    bulk.handle_lines(0, iter(lines))
    single = oa1.Server("#desk", "deskbot")
    for line in lines:
        single.handle_line(0, line)
    _, (request,), _ = bulk.drain(0)
    assert isinstance(request, oa1.Request) and request.payload == text
    assert single.poll_output(0) == request and isinstance(single.poll_output(0), Timeout)
    assert bulk.stats() == single.stats()


def test_handle_lines_checks_every_item_first() -> None:
    lines = _request_lines("hello")
    server = oa1.Server("#desk", "deskbot")
    with pytest.raises(TypeError):
        server.handle_lines(0, lines + ["a str, not bytes"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        server.handle_lines(0, 42)  # type: ignore[arg-type]
    assert server.stats()["lines_in"] == 0
    server.handle_lines(0, lines)
    assert server.stats()["lines_in"] == len(lines)
    server.close()
    with pytest.raises(deskwire.ClosedError):
        server.handle_lines(0, lines)
    with pytest.raises(deskwire.ClosedError):
        server.drain(0)


def _failed(code: str, message: str) -> oa1.Failed:
    """The desk's ``Failed`` for a request the remote answers ``ERR code: message``."""
    client = oa1.Client("#desk", "desk", seed=11, allowed_sender="deskbot")
    rid = client.request(0, "x")
    client.drain(0)
    client.handle_line(0, f":deskbot!~b@h PRIVMSG #desk :OA1 ERR {rid} 1 0 {code}: {message}".encode())
    _, events, _ = client.drain(0)
    (failed,) = events
    assert isinstance(failed, oa1.Failed) and failed.id == rid
    return failed


def test_failures_raise_the_class_of_the_core_s_typed_failure() -> None:
    # The remote's own ERR is the remote's error, even when it calls itself "timeout".
    remote_timeout = _failed("timeout", "the command ran too long")
    assert remote_timeout.error == "timeout"
    error = remote_timeout.exception()
    assert type(error) is deskwire.RemoteError and not isinstance(error, TimeoutError)
    assert (error.code, error.message) == ("timeout", "the command ran too long")
    # The desk's own timeout is a RequestTimeout (a TimeoutError); a CANCEL goes out with it.
    client = oa1.Client("#desk", "desk", seed=12, allowed_sender="deskbot")
    client.request(0, "sleep 60", 1000)
    client.drain(0)
    client.handle_timeout(1000)
    lines, events, _ = client.drain(1000)
    (timed_out,) = events
    assert type(timed_out.exception()) is deskwire.RequestTimeout
    assert isinstance(timed_out.exception(), TimeoutError)
    assert any(b"OA1 CANCEL" in line for line in lines)
    # A held request that never could leave: not_ready, saying what it waited for.
    client = oa1.Client("#desk", "desk", seed=13, allowed_sender="deskbot", ready_timeout_ms=500)
    client.set_held(True)
    client.request(0, "x")
    client.handle_timeout(500)
    _, events, _ = client.drain(500)
    (not_ready,) = events
    assert not_ready.error == "not_ready" and not_ready.message.startswith("not ready after 500 ms")
    assert type(not_ready.exception()) is deskwire.NotReadyError
    # A Failed made by hand has no core failure behind it: a plain RemoteError.
    made = oa1.Failed(id="x", error="kicked", message="by hand")
    assert type(made.exception()) is deskwire.RemoteError


def test_desks_refuse_configs_that_cannot_work() -> None:
    cases = [
        ({}, "a desk needs its remote's nick in oa1.allowed_sender"),
        ({"oa1": {"allowed_sender": "two words"}}, "oa1.allowed_sender"),
        ({"nick": "a b", "oa1": {"allowed_sender": "rexd"}}, "invalid nick"),
        ({"nick": "", "oa1": {"allowed_sender": "rexd"}}, "invalid nick"),
        ({"channel": "desk", "oa1": {"allowed_sender": "rexd"}}, "invalid channel name"),
    ]
    for options, words in cases:
        nick = options.pop("nick", "desk")
        channel = options.pop("channel", "#desk")
        with pytest.raises(deskwire.LocalError) as caught:
            oa1.Desk(nick, channel, **options)
        assert caught.value.code == "invalid_config" and words in caught.value.message, options
    # "*" is the explicit "anyone"; a mask names the remote's user and host too.
    oa1.Desk("desk", "#desk", oa1={"allowed_sender": "*"})
    oa1.Desk("desk", "#desk", oa1={"allowed_sender": "rexd!~rexd@10.0.0.7"})


def test_a_remote_says_who_asked_with_the_whole_prefix() -> None:
    # A nick alone proves nothing; the remote engine keeps the asker's nick!user@host to log.
    net = sim.Network(seed=1)
    unpaced = {"pacing": {"burst": 1_000_000, "interval_ms": 0}}
    desk = oa1.Desk("desk", "#desk", oa1={**unpaced, "allowed_sender": "rexd"})
    remote = oa1.Remote("rexd", "#desk", oa1={**unpaced, "allowed_sender": "desk!~desk@10.0.0.9"})
    links = [(desk, net.connect("10.0.0.9")), (remote, net.connect("10.0.0.2"))]
    request_id = desk.request(0, "id -un")
    asked = None
    for _ in range(20):
        for engine, link in links:
            data, events, _ = engine.drain(0)
            net.handle_bytes(link, data)
            engine.handle_bytes(0, net.take_bytes(link))
            asked = asked or next((e for e in events if isinstance(e, oa1.Request)), None)
    assert asked is not None and asked.id == request_id
    assert remote.source(request_id) == "desk!~desk@10.0.0.9"
    assert remote.source("unknown") is None


def test_remote_bash_is_one_call_into_the_core() -> None:
    # The command, the timeout and the model's arguments are checked by the core's RemoteBash
    # contract; the outcome is the core's typed failure, raised as a timeout.
    net = sim.Network(seed=1)
    unpaced = {"pacing": {"burst": 1_000_000, "interval_ms": 0}}
    desk = oa1.Desk("desk", "#desk", seed=3, oa1={**unpaced, "allowed_sender": "rexd"})
    remote = oa1.Remote("rexd", "#desk", oa1={**unpaced, "allowed_sender": "desk"})
    links = [(desk, net.connect("10.0.0.9")), (remote, net.connect("10.0.0.2"))]
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(deskwire.LocalError) as refused:
            desk.remote_bash(0, "ls", timeout=bad)
        assert refused.value.code == "invalid_arguments"
    # Longer than a Duration holds: the longest timeout, as the asyncio desks take it.
    assert desk.remote_bash(0, "true", timeout=1e30)
    desk.cancel(0, desk.remote_bash(0, "true", timeout=1e30), "never mind")
    for args in ({"command": 1}, {}, '{"command": "x", "timeout_sec": 0}', "not json", {"command": " \n"}):
        with pytest.raises(deskwire.LocalError) as refused:
            desk.remote_bash_call(0, args)
        assert refused.value.code == "invalid_arguments"
    # A command that runs nothing, or that no shell line can carry, is refused before it is sent.
    for command, why in (("", "the command is empty"), ("\t ", "the command is empty"), ("ls\0 -la", "NUL byte at byte 2")):
        with pytest.raises(deskwire.LocalError, match=why) as refused:
            desk.remote_bash(0, command)
        assert refused.value.code == "invalid_arguments"

    answered = desk.remote_bash_call(0, {"command": "id -un", "timeout_sec": 5})
    silent = desk.remote_bash(0, "sleep 60", timeout=0.25)
    outcomes = {}
    for now in (0, 0, 0, 0, 0, 100, 249, 250):
        for engine, link in links:
            data, events, _ = engine.drain(now)
            net.handle_bytes(link, data)
            engine.handle_bytes(now, net.take_bytes(link))
            for event in events:
                if isinstance(event, oa1.Request) and event.payload == "id -un":
                    remote.respond(now, event.id, "desk\n")
                if isinstance(event, (oa1.Response, oa1.Failed)):
                    outcomes[event.id] = (now, event)
    assert isinstance(outcomes[answered][1], oa1.Response)
    assert oa1.remote_bash_result(outcomes[answered][1]) == "desk\n"
    failed_at, failed = outcomes[silent]
    assert failed_at == 250 and isinstance(failed, oa1.Failed) and failed.error == "timeout"
    assert isinstance(failed.exception(), deskwire.RequestTimeout)
    assert isinstance(failed.exception(), TimeoutError)
    assert '"error":"timeout"' in oa1.remote_bash_result(failed)



MIXED = "log line\twith ä, €, 𝄞 and a \\ backslash\n" * 50


def _client_server_round_trip(text: bool) -> Tuple[Any, Any]:
    """A request of ``MIXED`` from a bare client to a bare server, answered with it upper-cased:
    the server's request event and the client's response event."""
    unpaced = {"burst": 1_000_000, "interval_ms": 0}
    client = oa1.Client("#desk", "desk", seed=21, text=text, allowed_sender="deskbot", pacing=unpaced)
    server = oa1.Server("#desk", "deskbot", text=text, allowed_sender="desk", pacing=unpaced,
                        flush_delay_ms=0)
    client.request(0, MIXED)
    lines, _, _ = client.drain(0)
    server.handle_lines(0, [b":desk!~desk@host " + line for line in lines])
    _, (request,), _ = server.drain(0)
    server.respond(0, request.id, MIXED.upper())
    lines, _, _ = server.drain(0)
    client.handle_lines(0, [b":deskbot!~b@host " + line for line in lines])
    _, (response,), _ = client.drain(0)
    return request, response


def test_text_false_gives_the_utf8_bytes_of_the_str() -> None:
    request, response = _client_server_round_trip(text=True)
    raw_request, raw_response = _client_server_round_trip(text=False)
    assert isinstance(request, oa1.Request) and isinstance(response, oa1.Response)
    assert isinstance(raw_request, oa1.RequestBytes) and isinstance(raw_response, oa1.ResponseBytes)
    assert raw_request.data == request.payload.encode() == MIXED.encode()
    assert raw_response.data == response.text.encode() == MIXED.upper().encode()
    assert (raw_request.id, raw_request.sender) == (request.id, request.sender)
    assert (raw_response.id, raw_response.truncated) == (response.id, response.truncated)
    assert oa1.remote_bash_result(raw_response) == oa1.remote_bash_result(response)


def _desk_remote_round_trip(text: bool) -> Tuple[Any, Any]:
    """The same through ``Desk`` and ``Remote`` on the in-memory server, by ``poll_output``."""
    net = sim.Network(seed=1)
    unpaced = {"pacing": {"burst": 1_000_000, "interval_ms": 0}}
    desk = oa1.Desk("desk", "#desk", seed=22, text=text, oa1={**unpaced, "allowed_sender": "rexd"})
    remote = oa1.Remote("rexd", "#desk", text=text, oa1={**unpaced, "allowed_sender": "desk"})
    links = [(desk, net.connect()), (remote, net.connect())]
    desk.request(0, MIXED)
    request = response = None
    for _ in range(20):
        for engine, link in links:
            while True:
                out = engine.poll_output(0)
                if isinstance(out, Timeout):
                    break
                if isinstance(out, Transmit):
                    net.handle_bytes(link, out.data)
                elif isinstance(out, (oa1.Request, oa1.RequestBytes)):
                    request = out
                    remote.respond(0, out.id, MIXED.upper())
                elif isinstance(out, (oa1.Response, oa1.ResponseBytes)):
                    response = out
            engine.handle_bytes(0, net.take_bytes(link))
    return request, response


def test_text_false_on_the_connection_engines() -> None:
    request, response = _desk_remote_round_trip(text=True)
    raw_request, raw_response = _desk_remote_round_trip(text=False)
    assert isinstance(request, oa1.Request) and isinstance(response, oa1.Response)
    assert isinstance(raw_request, oa1.RequestBytes) and isinstance(raw_response, oa1.ResponseBytes)
    assert raw_request.data == request.payload.encode() == MIXED.encode()
    assert raw_response.data == response.text.encode() == MIXED.upper().encode()


@pytest.mark.parametrize("engine", ["Client", "Server", "Desk", "Remote"])
def test_text_takes_only_a_bool_and_only_by_keyword(engine: str) -> None:
    cls = getattr(oa1, engine)
    args = ("#desk", "desk") if engine in ("Client", "Server") else ("desk", "#desk")
    options: Any = {} if engine in ("Client", "Server") else {"oa1": {"allowed_sender": "rexd"}}
    assert not cls(*args, text=False, **options).closed
    for wrong in ("no", 0, None, b""):
        with pytest.raises(TypeError):
            cls(*args, text=wrong, **options)
    with pytest.raises(TypeError):
        cls(*args, False, **options)  # keyword only
    if engine in ("Desk", "Remote"):  # not an OA1 config key: refused where it does not belong
        with pytest.raises(deskwire.LocalError):
            cls(*args, oa1={"allowed_sender": "rexd", "text": False})
