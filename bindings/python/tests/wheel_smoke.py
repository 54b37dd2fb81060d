"""Run by run_tests.sh with another CPython, where the built abi3 wheel was installed with no
Rust on PATH: the wheel is self-contained and loads on every CPython from 3.9. Standard library
only (no pytest), so the oldest interpreter the wheel claims can run it.

    python wheel_smoke.py

Each engine once, with answers checked: OA1 desk and remote over the in-memory IRC server,
JSON-RPC, the schema reader and the carried schemas, the provider translation, errors.
"""

import json
import sys

import deskwire
from deskwire import Timeout, Transmit, jsonrpc, oa1, rexd, schemas, sim, tools


def oa1_round_trip() -> None:
    net = sim.Network(seed=1)
    unpaced = {"pacing": {"burst": 1_000_000, "interval_ms": 0}}
    desk = oa1.Desk("desk", "#desk", oa1={**unpaced, "allowed_sender": "deskbot"})
    remote = oa1.Remote("deskbot", "#desk", oa1=unpaced)
    links = [(desk, net.connect()), (remote, net.connect())]

    def step() -> list:
        events = []
        for engine, link in links:
            data, got, _ = engine.drain(0)
            net.handle_bytes(link, data)
            events += got
            engine.handle_bytes(0, net.take_bytes(link))
        return events

    for _ in range(5):
        step()
    assert desk.state == "ready", desk.state
    text = "héllo 𝄞 \\ line\n" * 300
    request_id = desk.request(0, text)
    answered = None
    for _ in range(50):
        for event in step():
            if isinstance(event, oa1.Request):
                assert event.payload == text
                remote.respond(0, event.id, event.payload.upper())
            elif isinstance(event, oa1.Response):
                answered = event
        if answered:
            break
    assert answered is not None and answered.id == request_id
    assert answered.text == text.upper()


def drain(peer: jsonrpc.Peer) -> tuple:
    """Everything `peer` has to write and every event, until it answers Timeout."""
    data, events = b"", []
    while True:
        out = peer.poll_output(0)
        if isinstance(out, Timeout):
            return data, events
        if isinstance(out, Transmit):
            data += out.data
        else:
            events.append(out)


def jsonrpc_peer() -> None:
    client = jsonrpc.Peer("jsonrpc2")
    server = jsonrpc.Peer("jsonrpc2")
    call_id = client.call(0, "health.ping", {"n": 1})
    server.handle_bytes(0, drain(client)[0])
    _, (request,) = drain(server)
    assert request.method == "health.ping" and request.params == {"n": 1}
    server.respond(0, request.id, {"pong": True})
    client.handle_bytes(0, drain(server)[0])
    _, (response,) = drain(client)
    assert response.id == call_id and response.result == {"pong": True}


def schema_and_tools() -> None:
    params = {"session_id": "s_1", "path": "README.md"}
    assert rexd.read("FsReadParams", params)["path"] == "README.md"
    assert schemas.schema("rexd")["$defs"]["FsReadParams"]
    toolbox = tools.Toolbox()
    toolbox.bind("npc-1", "npc-1")
    names = [t["function"]["name"] for t in toolbox.tool_request("npc-1", "openai_chat")["tools"]]
    assert tools.REMOTE_BASH in names, names
    body = {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "RemoteBash", "arguments": json.dumps({"command": "ls"})},
            }],
        }}],
    }
    (call,) = tools.parse_response("openai_chat", json.dumps(body).encode()).tool_calls
    assert call["name"] == "RemoteBash" and call["args"] == {"command": "ls"}


def errors() -> None:
    # Giving up after a wait is a TimeoutError on every version (on 3.9 and 3.10,
    # asyncio.TimeoutError is another class that `except TimeoutError` misses).
    for cls in (deskwire.NotReadyError, deskwire.RequestTimeout):
        try:
            raise cls("not_ready", "not ready after 30 s: waiting for remote `rexd` in #desk")
        except TimeoutError as e:
            assert isinstance(e, deskwire.DeskwireError) and not isinstance(e, deskwire.LocalError)
    try:
        oa1.Desk("desk", "#desk")
    except deskwire.LocalError as e:
        assert e.code == "invalid_config" and "rexd" in e.message, e
    else:
        raise AssertionError("a desk without its remote was accepted")
    try:
        oa1.Client("#desk", "desk").cancel(0, "nope", "no such request")
    except deskwire.LocalError as e:
        assert e.code, e
    else:
        raise AssertionError("cancel of an unknown id did not raise")
    try:
        oa1.unescape(b"\xff\xfe")
    except (deskwire.DeskwireError, ValueError):
        pass
    assert isinstance(oa1.Client("#desk", "desk").poll_output(0), Timeout)


def main() -> None:
    oa1_round_trip()
    jsonrpc_peer()
    schema_and_tools()
    errors()
    version = ".".join(map(str, sys.version_info[:3]))
    print(f"deskwire {deskwire.__version__} on CPython {version}: ok")


if __name__ == "__main__":
    main()
