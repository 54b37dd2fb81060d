"""Speed of the package next to baselines measured in the same run (pytest-benchmark; nothing
is asserted about time):

- OA1 encode + decode of 128 KiB of mixed UTF-8 (a str in, and again the UTF-8 bytes a process
  writes in; a str out): with the bare ``oa1.Client``/``oa1.Server``,
  all lines at once (``drain``, ``handle_lines``) and one line at a time (``poll_output``,
  ``handle_line``), the sender's prefix added in Python as a server would; a request through
  ``oa1.Desk`` into IRC lines, relayed by the in-memory server (``sim.Network``, which parses
  each line and adds the prefix), and through ``oa1.Remote`` back into the request; next to a
  pure-Python implementation of the same spec (escaping, chunking at 240 bytes never inside an
  escape pair or a UTF-8 sequence, frames, parsing, unescaping, reassembly) written here with
  the fastest pure-Python means measured (bytes-level ``replace``, ``split``/``join``).
- The issue's two aims, each beside its baseline in a group of its own: bytes in and bytes out
  (``text=False``) against the pure-Python implementation fed the same bytes, and str in and
  str out against the conversion floor (encode, the relay's prefixes, decode, no OA1);
  ``benches/ratios.py`` prints the ratios from ``--benchmark-json``.
- The bytes round trip with the lines in one buffer each way (``drain_into``, the relay adding
  the prefixes to the buffer, ``handle_lines`` of it), beside its own floor: no object per
  line in the package, but CPython's ``bytes.count``/``replace`` on the buffer cost the relay
  more than prefixing a list of lines does, so the aims keep the lists.
- One ``Desk.handle_bytes`` of a relayed ``PRIVMSG`` line, next to a no-op call into the
  extension.

    cd bindings/python && python -m pytest benches --benchmark-columns=min,median,mean,rounds
"""

from __future__ import annotations

import random
import sys
from typing import Dict, List, Tuple

import pytest

from deskwire import Timeout, Transmit, _deskwire, oa1, sim

SIZE = 128 * 1024
BUDGET = 240


def mixed_utf8(size: int) -> str:
    piece = "log line\twith ä, €, 𝄞 and a \\ backslash\n"
    text = (piece * (size // len(piece.encode()) + 1)).encode()[:size]
    # Not ending in a space: a relay that trims lines (sim.Network, as IRC servers do) would eat
    # it, since only the spec's escapes go toward a remote not known to be deskwire.
    return text.decode("utf-8", "ignore").rstrip(" ")


TEXT = mixed_utf8(SIZE)
UTF8 = TEXT.encode()  # the same text as a process writes it

# glibc's malloc gives a block of 128 KiB or more its own mapping, unmapped again when freed,
# and every page of a new mapping faults on first touch (about 1.5 us a page on this kind of
# machine: 180 us to fill the 456 KB str of TEXT). Freeing such a block raises that threshold
# to its size, so a process that has run a while has raised it, and one that has not pays the
# faults every round, package and pure Python alike, until some test happens to raise it for
# the tests after it. Raised once here, above every buffer of a round, for all of them alike.
_RAISE_MMAP_THRESHOLD = bytes(1 << 20)
del _RAISE_MMAP_THRESHOLD


# --- the pure-Python implementation of the same spec -------------------------------------


def py_escape(text: str) -> bytes:
    # Encoded first, then chained bytes.replace: about 4x faster here than the same chain on
    # the str (a 128 KiB text with an astral character is a 4-byte-per-character str), which
    # was faster than a regex or str.translate.
    return py_escape_utf8(text.encode("utf-8"))


def py_escape_utf8(data: bytes) -> bytes:
    return (
        data.replace(b"\\", b"\\\\")
        .replace(b"\n", b"\\n")
        .replace(b"\r", b"\\r")
        .replace(b"\t", b"\\t")
        .replace(b"\0", b"\\0")
    )


def py_unescape(data: bytes) -> bytes:
    """Each backslash starts a pair; unknown pairs stay as they are.

    Read left to right, the first ``\\\\`` is always a pair (a backslash that is a pair's
    letter follows one that starts a pair, which would be an earlier ``\\\\``), so
    ``split`` finds exactly the escaped backslashes, and between them every backslash starts
    a pair of its own. About 2x faster here than ``re.sub`` with a function.
    """
    return b"\\".join(
        [
            part.replace(b"\\n", b"\n")
            .replace(b"\\r", b"\r")
            .replace(b"\\t", b"\t")
            .replace(b"\\0", b"\0")
            .replace(b"\\s", b" ")
            for part in data.split(b"\\\\")
        ]
    )


def py_split(escaped: bytes, budget: int) -> List[bytes]:
    """Cuts at most ``budget`` bytes, never after a lone escaping backslash or inside a UTF-8
    sequence."""
    out = []
    start = 0
    n = len(escaped)
    while start < n:
        end = min(start + budget, n)
        if end < n:
            while end > start and (escaped[end] & 0xC0) == 0x80:
                end -= 1  # inside a UTF-8 sequence
            backslashes = 0
            i = end - 1
            while i >= start and escaped[i] == 0x5C:
                backslashes += 1
                i -= 1
            if backslashes % 2 == 1:
                end -= 1  # the pair would be split
        out.append(escaped[start:end])
        start = end
    return out


def py_encode(request_id: str, text: str) -> List[bytes]:
    return py_encode_utf8(request_id, text.encode("utf-8"))


def py_encode_utf8(request_id: str, data: bytes) -> List[bytes]:
    chunks = py_split(py_escape_utf8(data), BUDGET)
    last = len(chunks)
    return [
        b"PRIVMSG #desk :OA1 REQ %s %d %d %s" % (request_id.encode(), seq, seq < last, chunk)
        for seq, chunk in enumerate(chunks, 1)
    ]


def py_decode(lines: List[bytes]) -> Dict[Tuple[str, str], str]:
    return {key: data.decode("utf-8", "replace") for key, data in py_decode_utf8(lines).items()}


def py_decode_utf8(lines: List[bytes]) -> Dict[Tuple[str, str], bytes]:
    """The messages as their UTF-8 bytes (valid UTF-8 in, so nothing for ``decode`` to
    replace: the package's ``text=False`` gives the same bytes)."""
    streams: Dict[Tuple[str, str], Dict[int, bytes]] = {}
    done: Dict[Tuple[str, str], bytes] = {}
    for line in lines:
        prefix, _, rest = line.partition(b" ")
        command, _, rest = rest.partition(b" ")
        target, _, trailing = rest.partition(b" :")
        if command != b"PRIVMSG" or target != b"#desk" or not trailing.startswith(b"OA1 "):
            continue
        parts = trailing.split(b" ", 5)
        kind, rid, seq, more = parts[1].decode(), parts[2].decode(), int(parts[3]), parts[4] == b"1"
        key = (prefix[1:].split(b"!", 1)[0].decode(), rid)
        stream = streams.setdefault(key, {})
        stream[seq] = parts[5] if len(parts) > 5 else b""
        if not more and len(stream) == seq:
            body = b"".join(stream[i] for i in range(1, seq + 1))
            done[key] = py_unescape(body)
            del streams[key]
    return done


def pure_python_round_trip() -> str:
    lines = [b":desk!~desk@host " + line for line in py_encode("abc123def456", TEXT)]
    return py_decode(lines)[("desk", "abc123def456")]


def pure_python_round_trip_utf8_in() -> str:
    lines = [b":desk!~desk@host " + line for line in py_encode_utf8("abc123def456", UTF8)]
    return py_decode(lines)[("desk", "abc123def456")]


def pure_python_round_trip_bytes() -> bytes:
    """Bytes in, bytes out."""
    lines = [b":desk!~desk@host " + line for line in py_encode_utf8("abc123def456", UTF8)]
    return py_decode_utf8(lines)[("desk", "abc123def456")]


# --- the same through the package ---------------------------------------------------------

FAST = {"pacing": {"burst": 1_000_000, "interval_ms": 0}}


PREFIX = b":desk!~desk@host "


def package_round_trip() -> str:
    """All lines at once: one call out, the prefix added per line, one call in."""
    client = oa1.Client("#desk", "desk", seed=1, **FAST)
    server = oa1.Server("#desk", "deskbot", **FAST)
    client.request(0, TEXT)
    lines, _, _ = client.drain(0)
    server.handle_lines(0, [PREFIX + line for line in lines])
    _, events, _ = server.drain(0)
    (request,) = events
    return request.payload


def package_round_trip_utf8_in() -> str:
    """All lines at once, the payload given as the UTF-8 bytes a process wrote."""
    client = oa1.Client("#desk", "desk", seed=1, **FAST)
    server = oa1.Server("#desk", "deskbot", **FAST)
    client.request(0, UTF8)
    lines, _, _ = client.drain(0)
    server.handle_lines(0, [PREFIX + line for line in lines])
    _, events, _ = server.drain(0)
    (request,) = events
    return request.payload


def package_round_trip_bytes() -> bytes:
    """All lines at once, bytes in and bytes out (``text=False``)."""
    client = oa1.Client("#desk", "desk", seed=1, text=False, **FAST)
    server = oa1.Server("#desk", "deskbot", text=False, **FAST)
    client.request(0, UTF8)
    lines, _, _ = client.drain(0)
    server.handle_lines(0, [PREFIX + line for line in lines])
    _, events, _ = server.drain(0)
    (request,) = events
    assert isinstance(request, oa1.RequestBytes)
    return request.data


def relay_buffer(buffer: bytes) -> bytes:
    """The relay on a buffer of CRLF-ended lines: each line with the sender's prefix."""
    return PREFIX + buffer.replace(b"\r\n", b"\r\n" + PREFIX, buffer.count(b"\r\n") - 1)


def package_round_trip_bytes_buffer() -> bytes:
    """Bytes in, bytes out, the lines in one buffer each way (``drain_into``, ``handle_lines``
    of the relayed buffer)."""
    client = oa1.Client("#desk", "desk", seed=1, text=False, **FAST)
    server = oa1.Server("#desk", "deskbot", text=False, **FAST)
    client.request(0, UTF8)
    buffer = bytearray()
    client.drain_into(0, buffer)
    server.handle_lines(0, relay_buffer(buffer))  # type: ignore[arg-type]
    _, events, _ = server.drain(0)
    (request,) = events
    assert isinstance(request, oa1.RequestBytes)
    return request.data


def package_round_trip_buffer() -> str:
    """Str in, str out, the lines in one buffer each way."""
    client = oa1.Client("#desk", "desk", seed=1, **FAST)
    server = oa1.Server("#desk", "deskbot", **FAST)
    client.request(0, TEXT)
    buffer = bytearray()
    client.drain_into(0, buffer)
    server.handle_lines(0, relay_buffer(buffer))  # type: ignore[arg-type]
    _, events, _ = server.drain(0)
    (request,) = events
    return request.payload


def conversion_floor_buffer(buffer: bytes) -> str:
    """``conversion_floor`` with the relay on one buffer of lines, as the package's buffer
    round trip relays them."""
    TEXT.encode()
    relay_buffer(buffer)
    return UTF8.decode()


def conversion_floor(lines: List[bytes]) -> str:
    """What any implementation of the str round trip pays, both sides alike, with no OA1 at
    all: the str's UTF-8, the relay adding each line's prefix (the server's part, in Python in
    every round trip here) and the str of the result."""
    TEXT.encode()
    [PREFIX + line for line in lines]
    return UTF8.decode()


def package_round_trip_per_line() -> str:
    """One call per line each way."""
    client = oa1.Client("#desk", "desk", seed=1, **FAST)
    server = oa1.Server("#desk", "deskbot", **FAST)
    client.request(0, TEXT)
    while True:
        out = client.poll_output(0)
        if isinstance(out, Timeout):
            break
        server.handle_line(0, PREFIX + out.data)
    while True:
        out = server.poll_output(0)
        if isinstance(out, oa1.Request):
            return out.payload
        assert not isinstance(out, Timeout), "no request came out"


class Connected:
    """A desk and a remote registered and joined on the in-memory server, reused per round."""

    def __init__(self) -> None:
        self.net = sim.Network(seed=1)
        self.desk = oa1.Desk("desk", "#desk", seed=1,
                             oa1={**FAST, "max_message_bytes": 1 << 20, "allowed_sender": "deskbot"})
        self.remote = oa1.Remote("deskbot", "#desk", oa1={**FAST, "max_message_bytes": 1 << 20})
        self.d, self.r = self.net.connect(), self.net.connect()
        for _ in range(5):
            self.step()

    def step(self) -> list:
        events = []
        for engine, link in ((self.desk, self.d), (self.remote, self.r)):
            data, got, _ = engine.drain(0)
            self.net.handle_bytes(link, data)
            events += got
            engine.handle_bytes(0, self.net.take_bytes(link))
        return events

    def round_trip(self) -> str:
        self.desk.request(0, TEXT)
        data, _, _ = self.desk.drain(0)
        self.net.handle_bytes(self.d, data)
        self.remote.handle_bytes(0, self.net.take_bytes(self.r))
        _, events, _ = self.remote.drain(0)
        for event in events:
            if isinstance(event, oa1.Request):
                self.remote.respond(0, event.id, "")  # ends the request; its answer is not timed
                return event.payload
        raise AssertionError(f"no request came out: {events}")


CONNECTED = Connected()


def test_round_trips_agree() -> None:
    size = sys.getsizeof(TEXT)
    assert pure_python_round_trip() == TEXT
    assert package_round_trip() == TEXT
    assert package_round_trip_per_line() == TEXT
    assert package_round_trip_utf8_in() == TEXT
    assert pure_python_round_trip_utf8_in() == TEXT
    assert CONNECTED.round_trip() == TEXT
    assert package_round_trip_bytes() == UTF8
    assert package_round_trip_bytes_buffer() == UTF8
    assert package_round_trip_buffer() == TEXT
    assert pure_python_round_trip_bytes() == UTF8
    CONNECTED.step()
    # No UTF-8 copy was cached on the str (CPython counts one in its size), so every round
    # encodes it again, as a str the caller has just made would be.
    assert sys.getsizeof(TEXT) == size


def test_pure_python_escaping_is_the_package_s() -> None:
    rng = random.Random(7)
    alphabet = ["\\", "n", "r", "t", "0", "s", "\n", "\r", "\t", "\0", " ", "a", "ä", "€", "𝄞"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
        assert py_escape(text) == oa1.escape(text).encode()
        assert py_unescape(py_escape(text)) == text.encode()
        # Any bytes a peer may send (IRC carries no CR, LF or NUL), unknown escapes included.
        wire = "".join(rng.choice(alphabet[:6] + ["x", "ä", " "]) for _ in range(rng.randrange(12)))
        assert py_unescape(wire.encode()) == oa1.unescape(wire.encode())


@pytest.mark.benchmark(group="oa1 encode+decode 128 KiB mixed UTF-8")
def test_oa1_round_trip_desk_remote(benchmark) -> None:  # type: ignore[no-untyped-def]
    def once() -> str:
        text = CONNECTED.round_trip()
        CONNECTED.step()  # the remote's (empty) answer reaches the desk
        return text

    assert benchmark(once) == TEXT


@pytest.mark.benchmark(group="oa1 encode+decode 128 KiB mixed UTF-8")
def test_oa1_round_trip_client_server_bulk(benchmark) -> None:  # type: ignore[no-untyped-def]
    assert benchmark(package_round_trip) == TEXT


@pytest.mark.benchmark(group="oa1 encode+decode 128 KiB mixed UTF-8")
def test_oa1_round_trip_client_server_per_line(benchmark) -> None:  # type: ignore[no-untyped-def]
    assert benchmark(package_round_trip_per_line) == TEXT


@pytest.mark.benchmark(group="oa1 encode+decode 128 KiB mixed UTF-8")
def test_oa1_round_trip_pure_python(benchmark) -> None:  # type: ignore[no-untyped-def]
    assert benchmark(pure_python_round_trip) == TEXT


@pytest.mark.benchmark(group="oa1 encode+decode 128 KiB mixed UTF-8, bytes in, str out")
def test_oa1_round_trip_utf8_in_client_server_bulk(benchmark) -> None:  # type: ignore[no-untyped-def]
    assert benchmark(package_round_trip_utf8_in) == TEXT


@pytest.mark.benchmark(group="oa1 encode+decode 128 KiB mixed UTF-8, bytes in, str out")
def test_oa1_round_trip_utf8_in_pure_python(benchmark) -> None:  # type: ignore[no-untyped-def]
    assert benchmark(pure_python_round_trip_utf8_in) == TEXT


# --- one handle_bytes with a relayed PRIVMSG line -------------------------------------------

RELAYED = (
    b":deskbot!~deskbot@sim.example PRIVMSG #desk :OA1 RES 0123456789ab 1 1 "
    + ("output line ä€ \\n" * 20).encode()[:200]
    + b"\r\n"
)


@pytest.fixture(scope="module")
def ready_desk() -> oa1.Desk:
    desk = oa1.Desk("desk", "#desk", seed=1, oa1={"allowed_sender": "deskbot"})
    # Registered, in the channel, and the remote there too (the NAMES reply): ready.
    desk.handle_bytes(0, b":sim.example 001 desk :welcome\r\n:desk!~desk@sim.example JOIN #desk\r\n"
                         b":sim.example 353 desk = #desk :desk deskbot\r\n"
                         b":sim.example 366 desk #desk :End of NAMES list\r\n")
    while not isinstance(desk.poll_output(0), Timeout):
        pass
    assert desk.state == "ready"
    return desk


@pytest.mark.benchmark(group="one call")
def test_handle_bytes_relayed_privmsg(benchmark, ready_desk: oa1.Desk) -> None:  # type: ignore[no-untyped-def]
    benchmark(ready_desk.handle_bytes, 1, RELAYED)
    assert ready_desk.stats()["oa1"]["lines_in"] > 0


@pytest.mark.benchmark(group="one call")
def test_noop_pyo3_call(benchmark) -> None:  # type: ignore[no-untyped-def]
    benchmark(_deskwire.noop)


# --- the two aims, each beside its baseline in one group -------------------------------
# Ratios from one run: python benches/ratios.py BENCH.json (pytest --benchmark-json=BENCH.json).


@pytest.mark.benchmark(group="aim: bytes in, bytes out (package / pure Python)")
def test_aim_bytes_package(benchmark) -> None:  # type: ignore[no-untyped-def]
    assert benchmark(package_round_trip_bytes) == UTF8


@pytest.mark.benchmark(group="aim: bytes in, bytes out (package / pure Python)")
def test_aim_bytes_pure_python(benchmark) -> None:  # type: ignore[no-untyped-def]
    assert benchmark(pure_python_round_trip_bytes) == UTF8


@pytest.mark.benchmark(group="aim: str in, str out (package / the conversion floor)")
def test_aim_str_package(benchmark) -> None:  # type: ignore[no-untyped-def]
    assert benchmark(package_round_trip) == TEXT


@pytest.mark.benchmark(group="aim: str in, str out (package / the conversion floor)")
def test_aim_str_floor(benchmark) -> None:  # type: ignore[no-untyped-def]
    client = oa1.Client("#desk", "desk", seed=1, **FAST)
    client.request(0, TEXT)
    lines, _, _ = client.drain(0)
    assert benchmark(conversion_floor, lines) == TEXT


# --- the same with one buffer of lines each way ---------------------------------------------


@pytest.mark.benchmark(group="one buffer each way (drain_into, the relay on the buffer)")
def test_buffer_bytes_package(benchmark) -> None:  # type: ignore[no-untyped-def]
    assert benchmark(package_round_trip_bytes_buffer) == UTF8


@pytest.mark.benchmark(group="one buffer each way (drain_into, the relay on the buffer)")
def test_buffer_str_package(benchmark) -> None:  # type: ignore[no-untyped-def]
    assert benchmark(package_round_trip_buffer) == TEXT


@pytest.mark.benchmark(group="one buffer each way (drain_into, the relay on the buffer)")
def test_buffer_str_floor(benchmark) -> None:  # type: ignore[no-untyped-def]
    client = oa1.Client("#desk", "desk", seed=1, **FAST)
    client.request(0, TEXT)
    buffer = bytearray()
    client.drain_into(0, buffer)
    assert benchmark(conversion_floor_buffer, bytes(buffer)) == TEXT
