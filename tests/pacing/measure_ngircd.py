#!/usr/bin/env python3
"""Measure which client-side flood pacing keeps a real ngircd from throttling us.

Usage (from the repository root):

    python3 tests/pacing/measure_ngircd.py            # default grid, about 4 minutes
    python3 tests/pacing/measure_ngircd.py --quick    # a few cases, about 1.5 minutes
    python3 tests/pacing/measure_ngircd.py --full     # bursts 1-5 x 7 intervals and more, ~9 minutes
    add --lags to print every line's lag

The script starts its own ngircd (`ngircd -n -f CONF`) on a free 127.0.0.1 port with a generated config in
a temp dir (default limits), registers a receiver `rcv` and a sender `snd` on `#desk`, and for each
pacing sends N PRIVMSG lines from the sender while the receiver timestamps each relayed line.

Pacing model = the engine's token bucket: capacity `burst`, full at the start, one token back per
`interval`. Line i (0-based) is scheduled at  max(0, i - burst + 1) * interval.  Lines due at the same
instant (the initial burst) are written with one send() ("1w") or one send() per line ("Nw").
"all" = unpaced: every line in one write.  Line sizes: 450 B (long), 120 B (medium), 22 B (short),
counted with CRLF.

Columns:
  send_s   time from the first to the last write
  recv_s   time from the first write to the last arrival at the receiver
  max_lag  max over lines of (arrival - scheduled send time); loopback baseline is ~1 ms
  growth   lag trend over the steady-state part (least-squares slope x lines); > 0.5 s = GROWING
  lost     lines not relayed within the deadline;  disc = sender got ERROR/EOF
  verdict  OK (no line held back: max_lag <= 0.05 s), THROTTLED (held back by a penalty, lag bounded),
           GROWING (the server is queueing us), LOSS, DISC

The final line `recommended: burst=B interval_ms=I` is the fastest long-line (450 B) pacing whose verdict
is OK and for which every tested long-line case at least as gentle (interval >= I, burst <= B, either
write mode) is OK too.  Long lines are the binding case because ngircd's limit is in bytes:

Why (ngircd 26.1 source, src/ngircd/):
  - parse.c My_Commands: PRIVMSG carries penalty 0; irc.c Send_Message adds 1 s per extra target only.
  - conn.c Read_Request: after each read, bps += bytes handled; bps is zeroed when the wall-clock second
    differs from the previous read's (so the first read of each second is free); once bps >= 256
    (COMMAND_LEN/2) -> Throttle_Connection -> Conn_SetPenalty(Idx, 1).
  - conn.c Handle_Buffer: at most MAX_COMMANDS = 3 lines per pass; anything left -> 1 s penalty.
  - conn-func.c Conn_SetPenalty: delaytime = max(delaytime, now) + s.  conn.c Conn_Handler stops reading
    the socket while delaytime > time(NULL) and re-arms it only on its next pass (1 s poll timeout).
  - irc-write.c IRC_WriteErrClient: every error numeric costs 2 s more.
  So: any penalty stops reading at once; a 450-byte line needs its own wall-clock second; at most 3 lines
  in one write; and once a backlog exists it drains at only 3 lines per pass.

Stdlib only.  Bounded loopback traffic only.
"""

import argparse
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time

CHANNEL = "#desk"
LAG_OK = 0.05          # s: above this a line was held back by the server (loopback baseline ~1 ms)
GROWTH_LIMIT = 0.5     # s: lag increase over the run that counts as "growing"
SETTLE = 2.1           # s idle between cases: ngircd penalties are whole seconds, at most +2 per event
LONG = 450             # bytes per PRIVMSG line incl. CRLF (relayed line stays < 512 with our prefix)
MEDIUM = 120           # bytes per PRIVMSG line incl. CRLF
SHORT = 22             # bytes per PRIVMSG line incl. CRLF


# --------------------------------------------------------------------------- ngircd process

def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def write_config(tmp, port):
    inc = os.path.join(tmp, "conf.d")
    os.mkdir(inc)
    conf = os.path.join(tmp, "ngircd.conf")
    with open(conf, "w") as f:
        f.write(
            "[Global]\n"
            "\tName = pacing.deskwire.test\n"
            "\tInfo = deskwire pacing measurement\n"
            "\tAdminInfo1 = deskwire\n"
            "\tAdminInfo2 = loopback\n"
            "\tAdminEMail = nobody@deskwire.test\n"
            "\tListen = 127.0.0.1\n"
            f"\tPorts = {port}\n"
            "\tMotdPhrase = pacing\n"
            "[Limits]\n"
            "\tMaxConnectionsIP = 0\n"
            "\tPingTimeout = 120\n"
            "\tPongTimeout = 20\n"
            "[Options]\n"
            "\tPAM = no\n"
            "\tIdent = no\n"
            "\tDNS = no\n"
            f"\tIncludeDir = {inc}\n"
        )
    # ngircd drops to nobody when started as root: keep the dir readable.
    os.chmod(tmp, 0o755)
    os.chmod(inc, 0o755)
    os.chmod(conf, 0o644)
    return conf


def wait_port(port, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


# --------------------------------------------------------------------------- IRC clients

class Client:
    def __init__(self, port, nick):
        self.nick = nick
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""
        self.closed = False
        self.errors = []      # ERROR lines / error numerics received

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError as e:
            self.closed = True
            self.errors.append(f"send: {e}")

    def read_lines(self):
        """Read what is available (socket must be readable). Returns list of str lines."""
        try:
            data = self.sock.recv(65536)
        except OSError as e:
            self.closed = True
            self.errors.append(f"recv: {e}")
            return []
        if not data:
            self.closed = True
            self.errors.append("EOF")
            return []
        self.buf += data
        *lines, self.buf = self.buf.split(b"\r\n")
        out = []
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if line.startswith("PING"):
                self.send(b"PONG" + raw[4:] + b"\r\n")
                continue
            if line.startswith("ERROR"):
                self.closed = True
                self.errors.append(line)
            else:
                parts = line.split(" ")
                # error numerics 400-599 directed at us (each costs 2 s of penalty in ngircd)
                if len(parts) > 1 and parts[1].isdigit() and 400 <= int(parts[1]) < 600:
                    self.errors.append(line)
            out.append(line)
        return out

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def pump(clients, timeout, on_line):
    """select() over the clients once; on_line(client, line, t_arrival) for each line."""
    socks = [c.sock for c in clients if not c.closed]
    if not socks:
        time.sleep(max(0.0, timeout))
        return
    r, _, _ = select.select(socks, [], [], max(0.0, timeout))
    for c in clients:
        if c.sock in r:
            t = time.monotonic()
            for line in c.read_lines():
                on_line(c, line, t)


def wait_for(clients, pred, timeout):
    """Pump until pred(line) is true for some line, or timeout. Returns True on match."""
    end = time.monotonic() + timeout
    hit = []

    def on_line(c, line, t):
        if pred(c, line):
            hit.append(line)

    while not hit and time.monotonic() < end:
        pump(clients, min(0.2, end - time.monotonic()), on_line)
    return bool(hit)


def idle(clients, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pump(clients, end - time.monotonic(), lambda c, l, t: None)


def connect(port, nick, others):
    c = Client(port, nick)
    c.send(f"NICK {nick}\r\nUSER {nick} 0 * :deskwire pacing\r\n".encode())
    allc = others + [c]
    if not wait_for(allc, lambda cl, l: cl is c and l.split(" ")[1:2] == ["001"], 10):
        raise RuntimeError(f"{nick}: no RPL_WELCOME: {c.errors}")
    c.send(f"JOIN {CHANNEL}\r\n".encode())
    if not wait_for(allc, lambda cl, l: cl is c and l.split(" ")[1:2] == ["366"], 10):
        raise RuntimeError(f"{nick}: JOIN {CHANNEL} failed: {c.errors}")
    c.errors.clear()
    return c


# --------------------------------------------------------------------------- one measurement

def make_line(run, seq, size):
    head = f"PRIVMSG {CHANNEL} :{run:02d}.{seq:02d}"
    pad = size - len(head) - 2
    if pad < 0:
        raise ValueError("line size too small")
    body = head + (" " + "x" * (pad - 1) if pad > 1 else "y" * pad)
    return (body + "\r\n").encode()


def linfit_growth(xs, ys):
    """Least-squares slope of ys over xs, times the x span: lag change over the run."""
    n = len(xs)
    if n < 3:
        return 0.0
    mx = sum(xs) / n
    my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope * (xs[-1] - xs[0])


def run_case(tx, rx, run, n, size, burst, interval_ms, mode="one", sched=None):
    """burst=None means unpaced (all lines in one write).
    mode "one": lines due at the same instant go out in one send(); "each": one send() per line.
    sched: optional explicit send offsets in seconds (overrides burst/interval)."""
    if not 1 <= n <= 99:
        raise ValueError("1..99 lines per case")
    lines = [make_line(run, i, size) for i in range(n)]
    if sched is not None:
        sched = list(sched)
    elif burst is None:
        sched = [0.0] * n
    else:
        sched = [max(0, i - burst + 1) * interval_ms / 1000.0 for i in range(n)]
    tag = f"PRIVMSG {CHANNEL} :{run:02d}."
    arrivals = {}

    def on_line(c, line, t):
        if c is rx:
            k = line.find(tag)
            if k >= 0:
                seq = int(line[k + len(tag):k + len(tag) + 2])
                arrivals.setdefault(seq, t)

    sent_at = [None] * n
    t0 = time.monotonic() + 0.02
    i = 0
    deadline = None
    while True:
        now = time.monotonic()
        if i < n and now >= t0 + sched[i]:
            j = i
            while j < n and sched[j] == sched[i]:
                j += 1
            if mode == "one":
                tx.send(b"".join(lines[i:j]))
            else:
                for k in range(i, j):
                    tx.send(lines[k])
            ts = time.monotonic()
            for k in range(i, j):
                sent_at[k] = ts
            i = j
            if i >= n:
                # generous: 3 lines/s drain for everything + 4 s
                deadline = ts + 4.0 + n / 3.0
        if i >= n and (len(arrivals) >= n or time.monotonic() > deadline or rx.closed):
            break
        if tx.closed and i < n:
            # sender gone: stop sending, wait for what was relayed
            i = n
            deadline = time.monotonic() + 3.0
            continue
        nxt = t0 + sched[i] if i < n else deadline
        pump([tx, rx], min(0.5, max(0.0, nxt - time.monotonic())), on_line)

    t_first = min(s for s in sent_at if s is not None)
    t_last_send = max(s for s in sent_at if s is not None)
    got = sorted(arrivals)
    lags = [arrivals[k] - (t0 + sched[k]) for k in got]
    steady = [k for k in got if burst is None or k >= burst]
    growth = linfit_growth(steady, [arrivals[k] - (t0 + sched[k]) for k in steady])
    res = {
        "size": size, "burst": burst, "interval": interval_ms, "n": n, "mode": mode,
        "send_s": t_last_send - t_first,
        "recv_s": (max(arrivals.values()) - t_first) if arrivals else float("nan"),
        "max_lag": max(lags) if lags else float("nan"),
        "growth": growth,
        "lost": n - len(got),
        "disc": tx.closed,
        "errors": list(tx.errors),
        "lags": lags,
    }
    if res["disc"]:
        v = "DISC"
    elif res["lost"]:
        v = "LOSS"
    elif growth > GROWTH_LIMIT:
        v = "GROWING"
    elif res["max_lag"] > LAG_OK:
        v = "THROTTLED"
    else:
        v = "OK"
    res["verdict"] = v
    return res


# --------------------------------------------------------------------------- grid

def build_cases(grid, n_long, n_short):
    """Cases are (size, burst, interval_ms, n, write_mode); burst None = unpaced."""
    L, M, S = LONG, MEDIUM, SHORT
    cases = []
    if grid == "full":
        cases.append((L, None, 0, n_long, "one"))
        for b in (1, 2, 3, 4, 5):
            for iv in (250, 300, 350, 400, 500, 700, 1000):
                cases.append((L, b, iv, n_long, "one"))
        for b in (2, 3):
            cases.append((L, b, 1000, n_long, "each"))
        for iv in (800, 900, 1200):
            cases.append((L, 1, iv, n_long, "one"))
        for iv in (250, 300, 400, 500):
            cases.append((M, 1, iv, n_long, "one"))
        cases.append((S, None, 0, n_short, "one"))
        for b in (1, 3, 5):
            for iv in (50, 80, 100, 150, 250):
                cases.append((S, b, iv, n_short, "one"))
    elif grid == "quick":
        cases.append((L, None, 0, n_long, "one"))
        for iv in (600, 900, 1000):
            cases.append((L, 1, iv, n_long, "one"))
        cases.append((L, 3, 1000, n_long, "one"))
        cases.append((L, 4, 1000, n_long, "one"))
        for iv in (50, 100):
            cases.append((S, 1, iv, n_short, "one"))
    else:
        cases.append((L, None, 0, n_long, "one"))
        for iv in (400, 600, 800, 900, 1000):
            cases.append((L, 1, iv, n_long, "one"))
        for b in (2, 3, 4, 5):
            cases.append((L, b, 1000, n_long, "one"))
        cases.append((L, 3, 1000, n_long, "each"))
        for iv in (300, 400):
            cases.append((M, 1, iv, n_long, "one"))
        cases.append((S, None, 0, n_short, "one"))
        for iv in (50, 80, 100):
            cases.append((S, 1, iv, n_short, "one"))
        cases.append((S, 3, 100, n_short, "one"))
        cases.append((S, 5, 100, n_short, "one"))   # one penalty -> backlog drains at 3 lines/s only
        cases.append((S, 5, 350, n_short, "one"))   # same burst, but below 3 lines/s: recovers
    return cases


def recommend(results, size):
    """Fastest OK pacing (smallest interval, then largest burst) such that every tested case of this
    size that is at least as gentle (interval >= I, burst <= B, any write mode) is OK as well."""
    rs = [r for r in results if r["size"] == size and r["burst"] is not None]

    def safe(r):
        gentler = [g for g in rs if g["interval"] >= r["interval"] and g["burst"] <= r["burst"]]
        return all(g["verdict"] == "OK" for g in gentler)

    cands = [r for r in rs if r["verdict"] == "OK" and safe(r)]
    if not cands:
        return None
    cands.sort(key=lambda r: (r["interval"], -r["burst"]))
    return cands[0]


HEADER = "# bytes burst  wr int_ms   N  send_s  recv_s max_lag  growth lost disc  verdict"


def fmt(r):
    b = "all" if r["burst"] is None else str(r["burst"])
    iv = "-" if r["burst"] is None else str(r["interval"])
    wr = "1w" if r["mode"] == "one" else "Nw"
    return (f"{r['size']:7d} {b:>5} {wr:>3} {iv:>6} {r['n']:3d} {r['send_s']:7.2f} {r['recv_s']:7.2f} "
            f"{r['max_lag']:7.3f} {r['growth']:+7.2f} {r['lost']:4d} {'yes' if r['disc'] else 'no':>4}  "
            f"{r['verdict']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="a few cases only")
    g.add_argument("--full", action="store_true", help="bursts 1-5 x 7 intervals (long runtime)")
    ap.add_argument("--n-long", type=int, default=15, help="lines per long- and medium-line case (default 15)")
    ap.add_argument("--n-short", type=int, default=40, help="lines per short-line case (default 40)")
    ap.add_argument("--lags", action="store_true", help="print the per-line lags of every case")
    args = ap.parse_args()
    grid = "full" if args.full else "quick" if args.quick else "default"

    if not shutil.which("ngircd"):
        sys.exit("ngircd not found (apt-get install ngircd)")
    tmp = tempfile.mkdtemp(prefix="deskwire-ngircd-")
    port = free_port()
    conf = write_config(tmp, port)
    log = open(os.path.join(tmp, "ngircd.log"), "w")
    proc = subprocess.Popen(["ngircd", "-n", "-f", conf], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    clients = []
    results = []
    t_start = time.monotonic()
    try:
        if not wait_port(port) or proc.poll() is not None:
            log.flush()
            sys.exit("ngircd did not start:\n" + open(os.path.join(tmp, "ngircd.log")).read())
        ver = subprocess.run(["ngircd", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
        print(f"# {ver}; 127.0.0.1:{port}; default limits; unit: seconds")
        rx = connect(port, "rcv", [])
        clients.append(rx)
        tx = connect(port, "snd", [rx])
        clients.append(tx)
        idle(clients, SETTLE)  # registration/JOIN penalties expire

        print(HEADER)
        cases = build_cases(grid, args.n_long, args.n_short)
        for run, (size, burst, iv, n, wmode) in enumerate(cases, start=1):
            if tx.closed:
                tx.close()
                tx = connect(port, f"snd{run}", [rx])
                clients = [rx, tx]
                idle(clients, SETTLE)
            r = run_case(tx, rx, run % 100, n, size, burst, iv, wmode)
            results.append(r)
            print(fmt(r), flush=True)
            if args.lags:
                print("#   lags:", " ".join(f"{x:.2f}" for x in r["lags"]))
            if r["errors"]:
                print("#   sender errors:", r["errors"][:3])
                tx.errors.clear()
            idle(clients, SETTLE)
    finally:
        for c in clients:
            c.close()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"# elapsed {time.monotonic() - t_start:.0f} s")
    print("# note: after any penalty ngircd handles at most 3 lines per ~1 s loop pass, so a pacing faster")
    print("#       than 3 lines/s cannot work off a backlog (lag grows until the sender pauses)")
    for size in (SHORT, MEDIUM):
        r = recommend(results, size)
        if r:
            print(f"# {size}-byte lines: fastest clean pacing burst={r['burst']} "
                  f"interval_ms={r['interval']}")
    best = recommend(results, LONG)
    if best is None:
        print("# no tested long-line pacing was free of throttling; falling back to the slowest tested")
        print("recommended: burst=1 interval_ms=1000")
        return 1
    print(f"recommended: burst={best['burst']} interval_ms={best['interval']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
