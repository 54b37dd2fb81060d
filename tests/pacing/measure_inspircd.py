#!/usr/bin/env python3
"""Measure which client-side flood pacing a real InspIRCd 3 takes without throttling or
disconnecting us (its default connect class: no `threshold`, `commandrate` or `recvq` set).

Usage (from the repository root, after `cargo build -p deskwire-integration`):

    python3 tests/pacing/measure_inspircd.py          # the default cases, about 8 minutes

It starts InspIRCd (with Atheme, through tests/integration's `services-irc`), registers a sender
`snd` and a receiver `rcv` in `#desk`, and for each pacing sends N PRIVMSG lines of 450 bytes
(CRLF counted) while the receiver timestamps each relayed line. Pacing = the engine's token
bucket: `burst` lines at once, then one per `interval` ms (line i is due at
max(0, i - burst + 1) * interval).

Each case prints the lines that arrived, the largest lag (arrival minus due time; loopback is
about 0.01 s) and whether the server closed the link. This script on InspIRCd 3.15
(2026-11-29):

    n=80 burst=3 interval=1000ms: got 80/80 max_lag=0.04 disc=None
    n=80 burst=1 interval=1000ms: got 80/80 max_lag=0.01 disc=None
    n=80 burst=3 interval=900ms: got 80/80 max_lag=0.01 disc=None
    n=30 burst=3 interval=700ms: got 30/30 max_lag=1.01 disc=None
    n=80 burst=3 interval=700ms: got 51/80 max_lag=5.6 disc=ERROR :Closing link: (snd@127.0.0.1) [RecvQ exceeded]
    n=80 burst=3 interval=600ms: got 36/80 max_lag=4.81 disc=ERROR :Closing link: (snd@127.0.0.1) [RecvQ exceeded]
    n=30 burst=3 interval=500ms: got 30/30 max_lag=6.01 disc=None
    n=8 burst=8 interval=0ms: got 8/8 max_lag=0.0 disc=None
    n=10 burst=10 interval=0ms: got 10/10 max_lag=0.0 disc=None

(An earlier run of the same cases in another order cut off 10 lines written together, and 12,
at once: they came while the penalty of the case before had not drained.)

InspIRCd's class (penalty 1 a line, drained at `commandrate` 1000 = a line a second, up to
`threshold` 10, then `fakelag`) lets a sender run ahead of one line a second for a while, then
holds its lines back, queues them, and closes the link once the queue passes `recvq`: a pacing
faster than a line a second ends in a disconnect on a long enough answer (700 ms: after about 50
lines, in both runs), and 900 ms only lasts longer. One line a second, in bursts of 3, is what
holds. Stdlib only; bounded loopback traffic only.
"""

import json
import os
import select
import socket
import subprocess
import sys
import time

SERVICES = os.environ.get("DESKWIRE_SERVICES_IRC", "target/debug/services-irc")
CASES = [
    (80, 3, 1000),
    (80, 1, 1000),
    (80, 3, 900),
    (30, 3, 700),
    (80, 3, 700),
    (80, 3, 600),
    (30, 3, 500),
    (8, 8, 0),
    (10, 10, 0),
]
SETTLE = 12  # s between cases: the penalty drains


class Conn:
    def __init__(self, port, nick):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.buf = b""
        self.sock.sendall(f"NICK {nick}\r\nUSER {nick} 0 * :{nick}\r\n".encode())

    def lines(self):
        """Complete lines read so far (PINGs answered), or None at the end of the stream."""
        try:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buf += data
        except BlockingIOError:
            pass
        out = []
        while b"\r\n" in self.buf:
            line, self.buf = self.buf.split(b"\r\n", 1)
            if line.startswith(b"PING"):
                self.sock.sendall(b"PONG" + line[4:] + b"\r\n")
            out.append(line)
        return out

    def wait(self, want, timeout=15.0):
        end = time.time() + timeout
        while time.time() < end:
            select.select([self.sock], [], [], 0.1)
            got = self.lines()
            if got is None:
                return False
            if any(want in line for line in got):
                return True
        return False


def joined(port, nick):
    c = Conn(port, nick)
    assert c.wait(b" 001 "), f"{nick} not registered"
    c.sock.sendall(b"JOIN #desk\r\n")
    assert c.wait(b" JOIN "), f"{nick} not joined"
    return c


def case(tx, rx, n, burst, interval_ms, size=450):
    filler = "x" * (size - len("PRIVMSG #desk :000 \r\n"))
    due = [max(0, i - burst + 1) * interval_ms / 1000 for i in range(n)]
    arrived = {}
    sent = 0
    closed = None
    start = time.time()
    while len(arrived) < n and time.time() - start < n * max(interval_ms, 500) / 1000 + 60:
        now = time.time() - start
        while sent < n and due[sent] <= now:
            tx.sock.sendall(f"PRIVMSG #desk :{sent:03d} {filler}\r\n".encode())
            sent += 1
        select.select([rx.sock, tx.sock], [], [], 0.01)
        for line in rx.lines() or []:
            if b"PRIVMSG #desk :" in line:
                arrived[int(line.split(b"PRIVMSG #desk :")[1][:3])] = time.time() - start
        got = tx.lines()
        if got is None:
            closed = "EOF"
        else:
            closed = next((l.decode() for l in got if l.startswith(b"ERROR")), None)
        if closed:
            break
    lag = max(arrived[i] - due[i] for i in arrived) if arrived else None
    print(
        f"n={n} burst={burst} interval={interval_ms}ms: got {len(arrived)}/{n} "
        f"max_lag={None if lag is None else round(lag, 2)} disc={closed}",
        flush=True,
    )
    return closed


def main():
    read_end, write_end = os.pipe()  # services-irc stops when its stdin closes
    services = subprocess.Popen([SERVICES], stdin=read_end, stdout=subprocess.PIPE)
    os.close(read_end)
    try:
        port = json.loads(services.stdout.readline())["port"]
        tx, rx = joined(port, "snd"), joined(port, "rcv")
        time.sleep(3)
        for n, burst, interval_ms in CASES:
            if case(tx, rx, n, burst, interval_ms):
                tx = joined(port, "snd")
            time.sleep(SETTLE)
    finally:
        os.close(write_end)
        services.wait()


if __name__ == "__main__":
    sys.exit(main())
