"""Where the time of test_oa1_bench.py's 128 KiB round trip goes (a measurement, not a test).

    cd bindings/python && python benches/oa1_breakdown.py [ROUNDS]

Times, in turns round after round and as medians:
1. the bulk round trip call by call (what is Rust's, what is CPython's, what is the relay's);
2. the CPython conversions in it next to the C-API calls that could replace them: with the
   abi3 wheel a str's UTF-8 comes from PyUnicode_AsUTF8String and a str from UTF-8 from
   PyUnicode_FromStringAndSize; PyUnicode_FromWideChar (stable ABI) and PyUnicode_FromKindAndData
   (not in the limited API) start from UCS4 instead, so a Rust transcoder would run before them;
3. the round trip with the same str each round, a str made for the round, and a str whose UTF-8
   CPython has cached (PyUnicode_AsUTF8AndSize, limited API only from 3.10: what a build for
   3.10+ or a non-abi3 build would read without encoding);
4. the pure-Python round trip of test_oa1_bench.py next to the floor both implementations pay
   with a str in and a str out (encode, relay, decode, no OA1 at all): the best ratio an engine
   taking no time at all could reach;
5. the bytes round trip with the lines in one buffer each way (``drain_into``, the relay on the
   buffer, ``handle_lines`` of it), call by call, next to the pure-Python one fed bytes.
The C-API calls go through ctypes, which adds well under a microsecond per call.
"""

from __future__ import annotations

import ctypes
import statistics
import sys
import time
from typing import Callable, Dict, List

import test_oa1_bench as b

from deskwire import _deskwire, oa1

TEXT, PREFIX, FAST = b.TEXT, b.PREFIX, b.FAST
UTF8 = TEXT.encode()
UCS4 = ctypes.create_string_buffer(TEXT.encode("utf-32-le"), 4 * len(TEXT))

api = ctypes.pythonapi
api.PyUnicode_AsUTF8AndSize.restype = ctypes.c_void_p
api.PyUnicode_AsUTF8AndSize.argtypes = [ctypes.py_object, ctypes.c_void_p]
api.PyUnicode_AsUTF8String.restype = ctypes.py_object
api.PyUnicode_AsUTF8String.argtypes = [ctypes.py_object]
api.PyUnicode_FromStringAndSize.restype = ctypes.py_object
api.PyUnicode_FromStringAndSize.argtypes = [ctypes.c_char_p, ctypes.c_ssize_t]
api.PyUnicode_FromWideChar.restype = ctypes.py_object
api.PyUnicode_FromWideChar.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
api.PyUnicode_FromKindAndData.restype = ctypes.py_object
api.PyUnicode_FromKindAndData.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ssize_t]


def bulk_round_trip(text: str) -> str:
    client = oa1.Client("#desk", "desk", seed=1, **FAST)
    server = oa1.Server("#desk", "deskbot", **FAST)
    client.request(0, text)
    lines, _, _ = client.drain(0)
    server.handle_lines(0, [PREFIX + line for line in lines])
    _, (request,), _ = server.drain(0)
    return str(request.payload)


def main(rounds: int) -> None:
    cached = TEXT[:-1] + "!"
    api.PyUnicode_AsUTF8AndSize(cached, None)
    assert sys.getsizeof(cached) > sys.getsizeof(TEXT), "no UTF-8 was cached"
    times: Dict[str, List[float]] = {}

    def timed(name: str, f: Callable[[], object]) -> object:
        start = time.perf_counter_ns()
        result = f()
        times.setdefault(name, []).append((time.perf_counter_ns() - start) / 1000)
        return result

    for i in range(rounds):
        timed("1.0 the bulk round trip", b.package_round_trip)
        client, server = timed(  # type: ignore[misc]
            "1.1 Client() + Server()",
            lambda: (
                oa1.Client("#desk", "desk", seed=1, **FAST),
                oa1.Server("#desk", "deskbot", **FAST),
            ),
        )
        timed("1.2 client.request(TEXT)", lambda: client.request(0, TEXT))
        lines = timed("1.3 client.drain(): the lines as bytes", lambda: client.drain(0)[0])
        relayed = timed("1.4 the relay: [PREFIX + line ...]", lambda: [PREFIX + x for x in lines])  # type: ignore[attr-defined]
        timed("1.5 server.handle_lines()", lambda: server.handle_lines(0, relayed))
        events = timed("1.6 server.drain(): the Request", lambda: server.drain(0)[1])
        assert events[0].payload == TEXT  # type: ignore[index]
        timed("2.1 str -> UTF-8: TEXT.encode()", TEXT.encode)
        timed("2.2 str -> UTF-8: PyUnicode_AsUTF8String", lambda: api.PyUnicode_AsUTF8String(TEXT))
        timed("2.3 UTF-8 -> str: PyUnicode_FromStringAndSize", lambda: api.PyUnicode_FromStringAndSize(UTF8, len(UTF8)))
        timed("2.4 UCS4 -> str: PyUnicode_FromWideChar", lambda: api.PyUnicode_FromWideChar(ctypes.addressof(UCS4), len(TEXT)))
        timed("2.5 UCS4 -> str: PyUnicode_FromKindAndData", lambda: api.PyUnicode_FromKindAndData(4, ctypes.addressof(UCS4), len(TEXT)))
        timed("2.6 a no-op call into the extension", _deskwire.noop)
        fresh = TEXT[:-1] + chr(0x41 + i % 26)
        timed("3.1 round trip, the same str", lambda: bulk_round_trip(TEXT))
        timed("3.2 round trip, a str made for it", lambda: bulk_round_trip(fresh))
        timed("3.3 round trip, UTF-8 cached on the str", lambda: bulk_round_trip(cached))
        timed("4.1 the pure-Python round trip", b.pure_python_round_trip)
        timed("4.2 the floor: encode + relay + decode, no OA1", lambda: floor(lines))  # type: ignore[arg-type]
        timed("5.0 bytes round trip, one buffer each way", b.package_round_trip_bytes_buffer)
        client, server = timed(  # type: ignore[misc]
            "5.1 Client() + Server() (text=False)",
            lambda: (
                oa1.Client("#desk", "desk", seed=1, text=False, **FAST),
                oa1.Server("#desk", "deskbot", text=False, **FAST),
            ),
        )
        timed("5.2 client.request(UTF8)", lambda: client.request(0, UTF8))
        buffer = bytearray()
        timed("5.3 client.drain_into(bytearray)", lambda: client.drain_into(0, buffer))
        relayed = timed("5.4 the relay on the buffer", lambda: b.relay_buffer(buffer))  # type: ignore[arg-type]
        timed("5.5 server.handle_lines(buffer)", lambda: server.handle_lines(0, relayed))
        events = timed("5.6 server.drain(): the RequestBytes", lambda: server.drain(0)[1])
        assert events[0].data == UTF8  # type: ignore[index]
        timed("5.7 the pure-Python round trip, bytes", b.pure_python_round_trip_bytes)
    for name in sorted(times):
        print(f"{name:48s} {statistics.median(times[name]):8.1f} us")
    pure = statistics.median(times["4.1 the pure-Python round trip"])
    print(f"{'pure Python / the floor (an engine taking 0 us)':48s} {pure / statistics.median(times['4.2 the floor: encode + relay + decode, no OA1']):8.1f} x")
    print(f"{'pure Python / the package':48s} {pure / statistics.median(times['1.0 the bulk round trip']):8.1f} x")
    pure_bytes = statistics.median(times["5.7 the pure-Python round trip, bytes"])
    print(f"{'bytes: pure Python / the package, one buffer':48s} {pure_bytes / statistics.median(times['5.0 bytes round trip, one buffer each way']):8.1f} x")


def floor(lines: List[bytes]) -> str:
    """What any implementation of the round trip pays with a str in and a str out, both sides
    alike: the str's UTF-8, the relay adding each line's prefix (the server's part, in Python
    in both benchmarks) and the str of the result. Only the OA1 work is left out."""
    TEXT.encode()
    [PREFIX + line for line in lines]
    return UTF8.decode()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
