"""``drain_into``: the bare OA1 endpoints' lines appended to one ``bytearray``, each ended by
CRLF; and ``handle_lines`` taking such a buffer back."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest

import deskwire
from deskwire import Timeout, oa1

FAST: Dict[str, Any] = {"pacing": {"burst": 10_000, "interval_ms": 0}}
PREFIX = b":desk!~desk@host "
TEXT = "ligne\tà \\ échapper 🙂 et un espace \n" * 3000  # 120 KB, some 560 frames


def relayed(buffer: bytes, prefix: bytes = PREFIX) -> bytes:
    """What a server relays of a buffer of CRLF-ended lines: each line with the sender's prefix."""
    return prefix + buffer.replace(b"\r\n", b"\r\n" + prefix, buffer.count(b"\r\n") - 1)


def drained(endpoint: Any, max_bytes: int) -> Tuple[bytearray, List[Any], List[int]]:
    """``drain_into`` called until the deadline is not ``now``: the buffer, the events, and how
    much each call appended."""
    buffer = bytearray(b"head")
    events: List[Any] = []
    appended = []
    while True:
        before = len(buffer)
        n, got, deadline = endpoint.drain_into(0, buffer, max_bytes)
        assert n == len(buffer) - before <= max_bytes
        appended.append(n)
        events += got
        if deadline != 0:
            assert buffer.startswith(b"head")
            return buffer[4:], events, appended


def test_the_buffer_holds_drain_s_lines_each_ended_by_crlf() -> None:
    by_lines = oa1.Client("#desk", "desk", seed=3, **FAST)
    into = oa1.Client("#desk", "desk", seed=3, **FAST)
    rid = by_lines.request(0, TEXT)
    assert into.request(0, TEXT) == rid
    lines, events, deadline = by_lines.drain(0)
    buffer = bytearray()
    n, events_into, deadline_into = into.drain_into(0, buffer)
    assert len(lines) > 500
    assert bytes(buffer) == b"".join(line + b"\r\n" for line in lines)
    assert n == len(buffer)
    assert (events_into, deadline_into) == (events, deadline)
    assert into.stats() == by_lines.stats()
    assert isinstance(into.poll_output(0), Timeout)

    # The server reads the relayed buffer in one call, as it reads the lines one by one.
    one_by_one = oa1.Server("#desk", "deskbot", text=False, **FAST)
    for line in lines:
        one_by_one.handle_line(0, PREFIX + line)
    at_once = oa1.Server("#desk", "deskbot", text=False, **FAST)
    at_once.handle_lines(0, relayed(bytes(buffer)))
    _, (request,), _ = at_once.drain(0)
    assert isinstance(request, oa1.RequestBytes) and request.data == TEXT.encode()
    assert one_by_one.drain(0)[1] == [request]
    assert at_once.stats() == one_by_one.stats()

    # The answer, drained into a bytearray and read back from one too.
    answer = bytearray()
    at_once.respond(0, request.id, TEXT)
    at_once.drain_into(0, answer)
    assert answer.endswith(b"\r\n") and answer.count(b"\r\n") > 500
    into.handle_lines(0, bytearray(relayed(bytes(answer), b":deskbot!~bot@host ")))
    _, (response,), _ = into.drain(0)
    assert isinstance(response, oa1.Response) and response.text == TEXT


def test_max_bytes_bounds_each_call_and_leaves_the_rest_queued() -> None:
    whole = oa1.Client("#desk", "desk", seed=5, **FAST)
    bounded = oa1.Client("#desk", "desk", seed=5, **FAST)
    for client in (whole, bounded):
        client.request(0, TEXT)
    everything = bytearray()
    whole.drain_into(0, everything)
    buffer, events, appended = drained(bounded, 4096)
    assert bytes(buffer) == bytes(everything) and events == []
    assert len(appended) > 30 and max(appended) <= 4096 and min(appended[:-1]) > 3500
    # Room for less than a line: nothing goes, and the deadline says a line is ready now.
    again = oa1.Client("#desk", "desk", seed=5, **FAST)
    again.request(0, "x" * 1000)
    tiny = bytearray()
    assert again.drain_into(0, tiny, 10) == (0, [], 0)
    assert tiny == bytearray()
    assert again.drain_into(0, tiny)[0] == len(tiny) > 0
    # The server's answer frames, made as they go, are bounded the same way.
    server = oa1.Server("#desk", "deskbot", **FAST)
    server.handle_lines(0, relayed(bytes(everything)))
    _, (request,), _ = server.drain(0)
    server.respond(0, request.id, TEXT)
    answer, _, appended = drained(server, 2000)
    assert len(appended) > 60 and max(appended) <= 2000
    assert answer.count(b"\r\n") > 300


def test_pacing_and_events_come_through_drain_into() -> None:
    paced = oa1.Client("#desk", "desk", seed=9, pacing={"burst": 3, "interval_ms": 1000},
                       request_timeout_ms=5000)
    rid = paced.request(0, TEXT)
    buffer = bytearray()
    n, events, deadline = paced.drain_into(0, buffer)
    assert buffer.count(b"\r\n") == 3 and deadline == 1000 and events == []
    # The request times out: its Failed event comes out of drain_into, its lines are withdrawn
    # and a CANCEL goes instead.
    n, events, _ = paced.drain_into(10_000, buffer)
    assert [(type(e), e.id) for e in events] == [(oa1.Failed, rid)]
    assert buffer.endswith(b" 1 0 timeout\r\n") and b"CANCEL" in buffer


def test_wrong_buffers_raise_and_take_nothing() -> None:
    client = oa1.Client("#desk", "desk", seed=1, **FAST)
    client.request(0, "uname -a")
    wrong: Any
    for wrong in (b"bytes are immutable", [], memoryview(bytearray(8)), None, "str"):
        with pytest.raises(TypeError):
            client.drain_into(0, wrong)
    with pytest.raises(OverflowError):
        client.drain_into(0, bytearray(), -1)
    # A bytearray that cannot grow (a memoryview of it is alive) raises before any line goes.
    buffer = bytearray(b"x")
    view = memoryview(buffer)
    with pytest.raises(BufferError):
        client.drain_into(0, buffer)
    view.release()
    assert buffer == bytearray(b"x")
    n, _, _ = client.drain_into(0, buffer)
    assert buffer.endswith(b" uname -a\r\n") and n == len(buffer) - 1
    for wrong_lines in (memoryview(b"x\r\n"), 7, "PRIVMSG #desk :OA1 REQ a 1 0 x\r\n"):
        with pytest.raises(TypeError):
            oa1.Server("#desk", "deskbot").handle_lines(0, wrong_lines)  # type: ignore[arg-type]
    client.close()
    with pytest.raises(deskwire.ClosedError):
        client.drain_into(0, bytearray())


def test_lines_without_crlf_or_with_lf_only_are_read_too() -> None:
    server = oa1.Server("#desk", "deskbot", **FAST)
    frame = PREFIX + b"PRIVMSG #desk :OA1 REQ abc %d %d %s"
    data = b"\n".join([frame % (1, 1, b"one "), frame % (2, 1, b"two ")]) + b"\r\n"
    server.handle_lines(0, data + frame % (3, 0, b"three"))
    _, (request,), _ = server.drain(0)
    assert request.payload == "one two three"
    assert server.stats()["lines_in"] == 3 and server.stats()["invalid_lines"] == 0
