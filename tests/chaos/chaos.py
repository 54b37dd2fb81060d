"""The chaos run (issue 38, part 3): desks ask rexd remotes across a linked ngircd network while
faults are injected at times drawn from the seed; every request must end with its exact answer or
a named failure within its bound. Run it through tests/chaos/run.sh, which starts the network
(tests/peers.sh) and gives this script its addresses in the environment.

What runs:
- one `rexd --irc` per server, each serving channels whose desks sit on the other servers, so
  every request crosses at least one server link;
- Python desks (deskwire.aio.IrcDesk, in this process, reconnecting), two of them through a TCP
  proxy written here, and the Rust desk (target/debug/desk --role client, one process a request);
- a fault every few seconds, each kind once per round in an order the seed shuffles.

Every answer is compared with a text computed here, not through deskwire: `echo` of a token,
`seq 1 N`, UTF-8 text, random bytes written by printf's octal escapes (compared with Python's
own UTF-8 decoding with U+FFFD for bytes that are not UTF-8, as an OA1 answer is text).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set

from deskwire import DeskwireError, oa1
from deskwire.aio import IrcDesk, Reconnect

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# How long a request may wait for its connection and remote before it fails not_ready (the
# Python desks; the Rust desk keeps the core's default, 30 s).
READY_TIMEOUT = 10.0
RUST_READY_TIMEOUT = 30.0
# The core's default peer_grace_ms: how long a desk waits for a remote that left to come back.
PEER_GRACE = 2.0
# Slack over each bound for scheduling on a loaded 2-core machine (a desk's loop, a proxy, a
# process start), stated in the table.
MARGIN = 5.0
# Peak RSS bounds (VmHWM, KiB): a rexd process, the Python process holding every Python desk
# and the proxies, one Rust desk process. About three times what a 100 s run measured (rexd
# 19.7 MiB, Python 30.8 MiB, Rust desk 10.9 MiB), so a leak over a long run shows.
RSS_BOUND_KIB = {"rexd": 64 * 1024, "python desks": 96 * 1024, "rust desk": 32 * 1024}


def log(start: float, text: str) -> None:
    print(f"[{time.monotonic() - start:7.1f}s] {text}", flush=True)


# --- requests with answers known here ---------------------------------------------------------


@dataclass
class Request:
    kind: str
    command: str
    timeout: float
    expected: Optional[str]  # None: the request must fail (it times out)
    cancel_after: Optional[float] = None


def octal(data: bytes) -> str:
    """A printf format writing exactly ``data`` (every byte as an octal escape)."""
    return "printf '" + "".join("\\%03o" % b for b in data) + "'"


UTF8_WORDS = ["héllo", "wörld", "☃", "𝄞", "日本語", "Ωμέγα", "emoji 🎉", "ß", "naïve café"]


def make_request(rng: random.Random, serial: str, cancel: bool) -> Request:
    kinds = ["small", "multi", "utf8", "binary", "slow", "timeout"] + (["cancel"] if cancel else [])
    weights = [30, 15, 15, 10, 10, 8] + ([8] if cancel else [])
    kind = rng.choices(kinds, weights)[0]
    if kind == "small":
        return Request(kind, f"echo small-{serial}", 20, f"small-{serial}\n")
    if kind == "multi":
        n = rng.randint(200, 1500)
        return Request(kind, f"seq 1 {n}", 30, "".join(f"{i}\n" for i in range(1, n + 1)))
    if kind == "utf8":
        text = " ".join(rng.sample(UTF8_WORDS, 4)) + f" {serial}"
        return Request(kind, f"printf '%s\\n' {shlex.quote(text)}", 20, text + "\n")
    if kind == "binary":
        data = bytes(rng.randrange(256) for _ in range(rng.randint(16, 120))) + b"\n"
        return Request(kind, octal(data), 20, data.decode("utf-8", "replace"))
    if kind == "slow":
        return Request(kind, f"sleep 3; echo slow-{serial}", 20, f"slow-{serial}\n")
    if kind == "timeout":
        return Request(kind, f"sleep 15; echo late-{serial}", 2, None)
    return Request(kind, f"sleep 5; echo cancel-{serial}", 20, f"cancel-{serial}\n",
                   cancel_after=rng.uniform(0.3, 4.0))


@dataclass
class Tally:
    requests: int = 0
    answered: int = 0
    failed: collections.Counter[str] = field(default_factory=collections.Counter)
    wrong: int = 0
    duplicate: int = 0
    hung: int = 0
    by_kind: Dict[str, collections.Counter[str]] = field(
        default_factory=lambda: collections.defaultdict(collections.Counter))
    problems: List[str] = field(default_factory=list)
    slowest: Dict[str, float] = field(default_factory=dict)

    journal: Optional[Any] = None  # requests.jsonl in the run's directory, one line each

    def outcome(self, desk: str, req: Request, what: str, took: float, detail: str = "") -> None:
        if self.journal is not None:
            self.journal.write(json.dumps({"at": round(time.monotonic(), 2), "desk": desk,
                                           "kind": req.kind, "outcome": what,
                                           "took": round(took, 2)}) + "\n")
        self.by_kind[req.kind][what] += 1
        self.slowest[req.kind] = max(self.slowest.get(req.kind, 0.0), took)
        if what == "answered":
            self.answered += 1
        elif what == "wrong":
            self.wrong += 1
        elif what == "hung":
            self.hung += 1
        else:
            self.failed[what] += 1
        if what in ("wrong", "hung") and len(self.problems) < 20:
            self.problems.append(f"{what}: {desk} {req.kind} {req.command[:60]!r} after "
                                 f"{took:.1f} s {detail}")


# What the core appends to the part of an answer that arrived before the request's timeout
# (core/src/oa1/client.rs, timeout_marker): that part must be the start of the exact answer.
CUT = re.compile(r"\n\.\.\.\[cut at the [0-9.]+ m?s timeout: [0-9]+ bytes arrived; "
                 r"the rest was cancelled\]\.\.\.\Z")


# What it appends to the part that arrived before the remote left or the link ended
# (cut_short_marker): that part too must be the start of the exact answer.
CUT_SHORT = re.compile(r"\n\.\.\.\[cut short: [^\n]*; [0-9]+ bytes arrived; how the command "
                       r"ended is unknown\]\.\.\.\Z")


def check_text(req: Request, text: str) -> str:
    """``answered``, ``cut_at_timeout`` or ``cut_short`` (a true start of the answer, marked as
    cut), or ``wrong``."""
    for marker, what in ((CUT, "cut_at_timeout"), (CUT_SHORT, "cut_short")):
        cut = marker.search(text)
        if cut is not None:
            part, expected = text[: cut.start()], req.expected or ""
            # A character cut in two at the end may arrive as U+FFFD.
            ok = expected.startswith(part) or (
                part.endswith("\ufffd") and expected.startswith(part[:-1]))
            return what if ok else "wrong"
    if req.expected is None:
        return "wrong"  # a whole answer to a request that had to time out
    return "answered" if text == req.expected else "wrong"


def diff(expected: Optional[str], got: str) -> str:
    if expected is None:
        return f"answer {got[:80]!r} where a timeout was due"
    at = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b),
              min(len(expected), len(got)))
    return (f"len {len(got)} vs {len(expected)}, first difference at {at}: "
            f"{got[at:at + 40]!r} vs {expected[at:at + 40]!r}")


# --- processes --------------------------------------------------------------------------------


def track(pid: int) -> None:
    """Registers a child with tests/peers.sh's owner, which stops it whatever ends this run."""
    with contextlib.suppress(OSError):
        open(os.path.join(os.environ["PEERS_DIR"], "pids", str(pid)), "w").close()


def untrack(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(os.environ["PEERS_DIR"], "pids", str(pid)))


def peers(*calls: str) -> None:
    """Runs tests/peers.sh functions in a shell sharing this run's PEERS_DIR."""
    script = "source tests/peers.sh && " + " && ".join(calls)
    env = dict(os.environ, PEERS_SHARED="1")
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"{calls}: {done.stderr.strip()[-400:]}")


def peak_kib(pid: int) -> int:
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    return 0


class Rexd:
    def __init__(self, name: str, server: int, channels: List[str], workdir: str) -> None:
        self.name, self.server, self.channels = name, server, channels
        self.log_path = os.path.join(workdir, f"rexd-{name}.log")
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.stopped = False
        self.starts = 0

    def start(self) -> None:
        args = [os.environ.get("PEERS_REXD", os.path.join(REPO, "target/debug/rexd")),
                "--irc", os.environ[f"PEERS_IRC_ADDR_{self.server}"], "--nick", self.name,
                "--unauthenticated", "--log-level", "info",
                "--reconnect-first-ms", "500", "--reconnect-max-ms", "3000"]
        for channel in self.channels:
            args += ["--channel", channel]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                         cwd=REPO, start_new_session=True)
        track(self.proc.pid)
        self.stopped = False
        self.starts += 1

    def joined(self) -> int:
        with open(self.log_path, errors="replace") as f:
            return f.read().lower().count("joined")

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc is None:
            return
        self.signal(signal.SIGKILL)
        self.proc.wait()
        untrack(self.proc.pid)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.kill()
        untrack(self.proc.pid)


# --- a TCP proxy that stalls, cuts, trickles or reads slowly ----------------------------------


class Proxy:
    """Between one desk and its server. Modes: ``pass``; ``stall`` (nothing moves either way);
    ``trickle`` (every byte, both ways, its own write); ``slow`` (the server's bytes are read
    64 at a time, 10 times a second: a desk whose host reads slowly). ``cut()`` closes every
    connection (the desk reconnects through it)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.mode = "pass"
        self.links: List[asyncio.StreamWriter] = []
        self.server: Optional[asyncio.base_events.Server] = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._link, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self.links += [writer, up_w]
        await asyncio.gather(self._pump(reader, up_w, False), self._pump(up_r, writer, True),
                             return_exceptions=True)
        for w in (writer, up_w):
            w.close()
            with contextlib.suppress(ValueError):
                self.links.remove(w)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                    down: bool) -> None:
        try:
            while True:
                if self.mode == "stall":
                    await asyncio.sleep(0.05)
                    continue
                slow = down and self.mode == "slow"
                size = 1 if self.mode == "trickle" else 64 if slow else 65536
                data = await src.read(size)
                if not data:
                    break
                dst.write(data)
                await dst.drain()
                if slow:
                    await asyncio.sleep(0.1)
        finally:
            dst.close()

    def cut(self) -> None:
        for w in list(self.links):
            with contextlib.suppress(Exception):
                w.transport.abort()

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


# --- desks ------------------------------------------------------------------------------------


class CountingDesk(IrcDesk):
    """An IrcDesk that counts the outcomes its engine hands out per request id: the binding
    settles the first and drops the rest, so a second one would pass unseen."""

    def __init__(self, *args: Any) -> None:
        self.outcomes: collections.Counter[str] = collections.Counter()
        super().__init__(*args)

    def _event(self, event: Any) -> None:
        if isinstance(event, (oa1.Response, oa1.Failed)):
            self.outcomes[event.id] += 1
        super()._event(event)


@dataclass
class PyDesk:
    nick: str
    server: int
    channel: str
    remote: str
    proxy: Optional[str] = None  # "faulty" or "slow"
    desk: Optional[CountingDesk] = None


class Chaos:
    def __init__(self, seconds: float, seed: int, workdir: str) -> None:
        self.seconds, self.seed, self.workdir = seconds, seed, workdir
        self.start = time.monotonic()
        self.tally = Tally()
        self.tally.journal = open(os.path.join(workdir, "requests.jsonl"), "w", buffering=1)
        self.faults: collections.Counter[str] = collections.Counter()
        self.servers = int(os.environ["PEERS_NET_SIZE"])
        names = ["rxa", "rxb", "rxc"][: self.servers]
        self.desks: List[PyDesk] = []
        channels: Dict[str, List[str]] = {n: [] for n in names}
        # Three Python desks per remote, on the servers other than the remote's; one desk goes
        # through the faulty proxy, one through the slow reader.
        for r, remote in enumerate(names):
            for k in range(3):
                others = [s for s in range(1, self.servers + 1) if s != r + 1]
                server = others[k % len(others)]
                desk = PyDesk(f"py{remote[-1]}{k}", server, f"#{remote}-py{k}", remote)
                self.desks.append(desk)
                channels[remote].append(desk.channel)
        self.desks[0].proxy = "faulty"
        self.desks[4].proxy = "slow"
        for remote in names:
            channels[remote].append(f"#{remote}-rust")
        self.rexds = [Rexd(n, i + 1, channels[n], workdir) for i, n in enumerate(names)]
        self.proxies: Dict[str, Proxy] = {}
        self.rust_peak = 0
        self.rust_pids: Set[int] = set()
        self.rust_serial = 0
        self.deadline = 0.0
        self.peaks: Dict[str, int] = {}
        self.network_end = "not checked"
        # Servers and rexds a fault has taken down on purpose, which the watchdog leaves alone.
        self.down_on_purpose: Set[str] = set()
        self.crashes: collections.Counter[str] = collections.Counter()
        self.outcome_ids = 0

    def say(self, text: str) -> None:
        log(self.start, text)
        if self.tally.journal is not None:
            self.tally.journal.write(json.dumps({"at": round(time.monotonic(), 2),
                                                 "event": text}) + "\n")

    def port(self, server: int) -> int:
        return int(os.environ[f"PEERS_IRC_PORT_{server}"])

    # -- requests --

    def bound(self, req: Request, ready: float) -> float:
        # The wait for the connection (with a reconnect, up to ready_timeout), then for the
        # remote (the engine's ready_timeout again), the request's timeout, the peer grace.
        return 2 * ready + req.timeout + PEER_GRACE + MARGIN

    async def py_request(self, d: PyDesk, req: Request) -> None:
        assert d.desk is not None
        self.tally.requests += 1
        t0 = time.monotonic()
        task = asyncio.ensure_future(d.desk.remote_bash(req.command, timeout=req.timeout))
        if req.cancel_after is not None:
            done, _ = await asyncio.wait({task}, timeout=req.cancel_after)
            if not done:
                task.cancel()
        bound = self.bound(req, READY_TIMEOUT)
        done, _ = await asyncio.wait({task}, timeout=max(0.0, bound - (time.monotonic() - t0)))
        took = time.monotonic() - t0
        if not done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            self.tally.outcome(d.nick, req, "hung", took, f"(bound {bound:.0f} s)")
            return
        try:
            text = task.result()
        except asyncio.CancelledError:
            self.tally.outcome(d.nick, req, "cancelled", took)
            return
        except DeskwireError as e:
            self.tally.outcome(d.nick, req, e.code, took)
            return
        what = check_text(req, text)
        self.tally.outcome(d.nick, req, what, took, diff(req.expected, text) if what == "wrong" else "")

    async def py_worker(self, d: PyDesk, index: int) -> None:
        rng = random.Random(f"{self.seed}/{d.nick}/{index}")
        serial = 0
        while time.monotonic() < self.deadline:
            serial += 1
            await self.py_request(d, make_request(rng, f"{d.nick}.{index}.{serial}", True))
            await asyncio.sleep(rng.uniform(1.0, 4.0))

    async def rust_request(self, rng: random.Random, worker: int) -> None:
        r = rng.randrange(len(self.rexds))
        rexd = self.rexds[r]
        server = rng.choice([s for s in range(1, self.servers + 1) if s != rexd.server])
        self.rust_serial += 1
        nick = f"rs{worker}n{self.rust_serial % 1000}"
        req = make_request(rng, nick, False)
        args = [os.environ.get("CHAOS_DESK", os.path.join(REPO, "target/debug/desk")),
                "--irc", f"127.0.0.1:{self.port(server)}", "--role", "client",
                "--channel", f"#{rexd.name}-rust", "--desk-nick", nick,
                "--remote-nick", rexd.name, "--timeout-sec", str(int(req.timeout)), req.command]
        self.tally.requests += 1
        t0 = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True)
        track(proc.pid)
        self.rust_pids.add(proc.pid)
        # One wait for the remote (the Rust desk does not reconnect), then as for Python.
        bound = RUST_READY_TIMEOUT + req.timeout + PEER_GRACE + MARGIN
        try:
            out, err = await asyncio.wait_for(proc.communicate(), bound)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            self.tally.outcome(nick, req, "hung", time.monotonic() - t0,
                               f"(rust desk, bound {bound:.0f} s)")
            return
        finally:
            self.rust_pids.discard(proc.pid)
            untrack(proc.pid)
        took = time.monotonic() - t0
        text = out.decode("utf-8", "replace")
        if text.endswith("]...\n") and (CUT.search(text[:-1]) or CUT_SHORT.search(text[:-1])):
            text = text[:-1]  # the desk ends with a newline what does not: the cut line
        if proc.returncode == 0:
            what = check_text(req, text)
            self.tally.outcome(nick, req, what, took,
                               diff(req.expected, text) if what == "wrong" else "")
        elif proc.returncode == 1:
            try:
                code = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                self.tally.outcome(nick, req, "wrong", took, f"exit 1, stdout {text[:120]!r}")
                return
            self.tally.outcome(nick, req, str(code), took)
        else:
            said = err.decode("utf-8", "replace")
            code = ("disconnected" if "session ended" in said or "closed" in said
                    else "connect_failed" if "connect" in said else f"exit {proc.returncode}")
            self.tally.outcome(nick, req, code, took)

    async def rust_worker(self, worker: int) -> None:
        rng = random.Random(f"{self.seed}/rust/{worker}")
        while time.monotonic() < self.deadline:
            await self.rust_request(rng, worker)
            await asyncio.sleep(rng.uniform(1.0, 3.0))

    # -- faults --

    async def fault(self, rng: random.Random, kind: str) -> None:
        loop = asyncio.get_running_loop()
        if kind == "server_restart":
            i = rng.randint(1, self.servers)
            down = rng.uniform(1, 4)
            self.say(f"fault: irc{i} killed, restarted in {down:.1f} s")
            self.down_on_purpose.add(f"irc{i}")
            try:
                await loop.run_in_executor(None, peers, f"peers_kill_server {i}")
                await asyncio.sleep(down)
                await loop.run_in_executor(None, peers, f"peers_restart_server {i}")
            finally:
                self.down_on_purpose.discard(f"irc{i}")
        elif kind == "squit":
            i = rng.randint(2, self.servers)
            name = f"irc{i}.deskwire.test"
            if rng.random() < 0.5:
                self.say(f"fault: SQUIT {name} (it links again by itself)")
                await loop.run_in_executor(None, peers, f"peers_squit {name}")
            else:
                wait = rng.uniform(0.2, 2)
                self.say(f"fault: SQUIT {name}, CONNECT {wait:.1f} s later")
                await loop.run_in_executor(None, peers, f"peers_squit {name}")
                await asyncio.sleep(wait)
                await loop.run_in_executor(None, peers, f"peers_connect {name}")
        elif kind == "rexd_stop":
            rexd = rng.choice(self.rexds)
            pause = rng.uniform(1, 5)
            self.say(f"fault: {rexd.name} SIGSTOP for {pause:.1f} s")
            rexd.signal(signal.SIGSTOP)
            await asyncio.sleep(pause)
            rexd.signal(signal.SIGCONT)
        elif kind == "rexd_kill":
            rexd = rng.choice(self.rexds)
            down = rng.uniform(0.5, 4)
            self.say(f"fault: {rexd.name} SIGKILL, restarted in {down:.1f} s")
            self.down_on_purpose.add(rexd.name)
            try:
                rexd.kill()
                await asyncio.sleep(down)
                rexd.start()
            finally:
                self.down_on_purpose.discard(rexd.name)
        elif kind in ("proxy_stall", "proxy_trickle"):
            proxy = self.proxies["faulty"]
            length = rng.uniform(2, 6)
            proxy.mode = kind.split("_")[1]
            self.say(f"fault: proxy {proxy.mode} for {length:.1f} s")
            await asyncio.sleep(length)
            proxy.mode = "pass"
        elif kind == "proxy_cut":
            self.say("fault: proxy cuts its connections")
            self.proxies["faulty"].cut()
        elif kind == "slow_reader":
            proxy = self.proxies["slow"]
            length = rng.uniform(3, 8)
            self.say(f"fault: slow reader (640 B/s from the server) for {length:.1f} s")
            proxy.mode = "slow"
            await asyncio.sleep(length)
            proxy.mode = "pass"
        self.faults[kind] += 1

    async def faults_loop(self) -> None:
        rng = random.Random(f"{self.seed}/faults")
        kinds = ["server_restart", "squit", "rexd_stop", "rexd_kill", "proxy_stall",
                 "proxy_cut", "proxy_trickle", "slow_reader"]
        await asyncio.sleep(rng.uniform(3, 6))
        while True:
            order = kinds[:]
            rng.shuffle(order)
            for kind in order:
                # The last fault ends a little before the requests stop, so the run ends healed.
                if time.monotonic() > self.deadline - 15:
                    return
                try:
                    await self.fault(rng, kind)
                except (RuntimeError, subprocess.SubprocessError) as e:
                    # Not a deskwire failure: said, counted, and the run goes on.
                    self.say(f"fault {kind} could not be injected: {e}")
                    self.faults[f"{kind} (not injected)"] += 1
                await asyncio.sleep(rng.uniform(1, 3))

    # -- a watchdog, as a service manager would be --

    def server_alive(self, i: int) -> bool:
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(os.environ["PEERS_DIR"], f"net-{i}", "pid")) as f:
                pid = int(f.read())
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(") ")[-1][:1] != "Z"
        return False

    async def watchdog(self) -> None:
        """Starts again what died without a fault: an ngircd that crashed (ngircd 26.1 has
        segfaulted here when a leaf linked again right after a SQUIT, the other leaf just
        gone), and a rexd that exited (rexd ends when its first connection fails, as a
        restart while its server is down does; systemd's Restart= would start it again)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(0.5)
            for i in range(1, self.servers + 1):
                if f"irc{i}" not in self.down_on_purpose and not self.server_alive(i):
                    self.say(f"irc{i} DIED by itself (not a fault): started again")
                    self.crashes[f"ngircd irc{i}"] += 1
                    with contextlib.suppress(RuntimeError):
                        await loop.run_in_executor(None, peers, f"peers_restart_server {i}")
            for rexd in self.rexds:
                if (rexd.name not in self.down_on_purpose and rexd.proc is not None
                        and rexd.proc.poll() is not None):
                    self.say(f"{rexd.name} exited by itself (status {rexd.proc.returncode}): "
                             "started again in 1 s")
                    self.crashes[f"rexd {rexd.name} exit {rexd.proc.returncode}"] += 1
                    untrack(rexd.proc.pid)
                    await asyncio.sleep(1)
                    rexd.start()

    # -- memory --

    async def sample_memory(self) -> None:
        peaks = {"rexd": 0, "python desks": 0, "rust desk": 0}
        while True:
            for rexd in self.rexds:
                if rexd.proc is not None and rexd.proc.poll() is None:
                    peaks["rexd"] = max(peaks["rexd"], peak_kib(rexd.proc.pid))
            peaks["python desks"] = max(peaks["python desks"], peak_kib(os.getpid()))
            for pid in list(self.rust_pids):
                peaks["rust desk"] = max(peaks["rust desk"], peak_kib(pid))
            self.peaks = peaks
            await asyncio.sleep(0.5)

    # -- the run --

    async def run(self) -> int:
        for rexd in self.rexds:
            rexd.start()
        for _ in range(500):
            if all(r.joined() >= len(r.channels) for r in self.rexds):
                break
            await asyncio.sleep(0.05)
        else:
            raise RuntimeError("the rexds did not join their channels in 25 s")
        for d in self.desks:
            port = self.port(d.server)
            if d.proxy:
                proxy = Proxy(port)
                await proxy.start()
                self.proxies[d.proxy] = proxy
                port = proxy.port
            desk = await CountingDesk.connect(
                "127.0.0.1", port, nick=d.nick, channel=d.channel, remote_nick=d.remote,
                ready_timeout=READY_TIMEOUT, reconnect=Reconnect(min_delay=0.5, max_delay=3.0))
            assert isinstance(desk, CountingDesk)
            d.desk = desk
        self.say(f"ready: {len(self.desks)} Python desks, 2 Rust desk workers, "
                 f"{len(self.rexds)} rexd, {self.servers} servers; seed {self.seed}")
        self.deadline = time.monotonic() + self.seconds
        memory = asyncio.ensure_future(self.sample_memory())
        faults = asyncio.ensure_future(self.faults_loop())
        watchdog = asyncio.ensure_future(self.watchdog())
        workers = [self.py_worker(d, i) for d in self.desks for i in range(2 if d.proxy is None else 1)]
        workers += [self.rust_worker(w) for w in range(2)]
        await asyncio.gather(*workers)
        faults.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await faults
        for rexd in self.rexds:  # a fault cancelled mid-way leaves nothing stopped
            rexd.signal(signal.SIGCONT)
        for proxy in self.proxies.values():
            proxy.mode = "pass"
        await asyncio.sleep(0.6)
        memory.cancel()
        watchdog.cancel()
        # Every server up and linked again (ngircd itself crashing would show here).
        try:
            await asyncio.get_running_loop().run_in_executor(None, peers, "peers_wait_linked")
            self.network_end = "every server up and linked"
        except RuntimeError as e:
            self.network_end = f"NOT healed: {e}"
        for d in self.desks:
            if d.desk is not None:
                self.tally.duplicate += sum(n - 1 for n in d.desk.outcomes.values() if n > 1)
                self.outcome_ids += len(d.desk.outcomes)
        return self.report()

    def report(self) -> int:
        t = self.tally
        took = time.monotonic() - self.start
        print()
        print(f"chaos run: seed {self.seed}, {self.seconds:g} s of requests ({took:.0f} s in all), "
              f"{self.servers} linked ngircd, {len(self.rexds)} rexd --irc, "
              f"{len(self.desks)} Python desks + 2 Rust desk workers")
        print(f"bound per request: timeout + peer grace ({PEER_GRACE:g} s) + {MARGIN:g} s margin + "
              f"the wait for readiness (Python desks: 2 x {READY_TIMEOUT:g} s, the connection's "
              f"and the remote's; Rust desk: {RUST_READY_TIMEOUT:g} s)")
        print("faults: " + ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())))
        print(f"network at the end: {self.network_end}")
        print("died without a fault and started again: "
              + (", ".join(f"{k} {v}" for k, v in sorted(self.crashes.items())) or "nothing"))
        print(f"duplicates looked for among the outcomes of {self.outcome_ids} request ids the "
              "Python desks' engines settled")
        print()
        outcomes = sorted({o for c in t.by_kind.values() for o in c})
        width = max([len(o) for o in outcomes] + [8])
        print("kind      " + " ".join(f"{o:>{width}}" for o in outcomes) + "   slowest")
        for kind in sorted(t.by_kind):
            row = t.by_kind[kind]
            print(f"{kind:<9} " + " ".join(f"{row.get(o, 0):>{width}}" for o in outcomes)
                  + f"   {t.slowest[kind]:6.1f} s")
        print()
        print("failed by kind: " + (", ".join(f"{k} {v}" for k, v in t.failed.most_common())
                                    or "none"))
        rss_ok = True
        for what, peak in self.peaks.items():
            bound = RSS_BOUND_KIB[what]
            ok = peak <= bound
            rss_ok &= ok
            print(f"peak RSS {what}: {peak / 1024:.1f} MiB (bound {bound / 1024:.0f} MiB)"
                  + ("" if ok else "  OVER"))
        for p in t.problems:
            print(p)
        failed = sum(t.failed.values())
        bad = t.wrong or t.duplicate or t.hung or not rss_ok
        if bad:
            print(f"FAILED: repeat with: bash tests/chaos/run.sh --seconds {self.seconds:g} "
                  f"--seed {self.seed} (logs kept in {self.workdir})")
        print(f"chaos: {t.requests} requests, {t.answered} answered, {failed} failed, "
              f"{t.wrong} wrong, {t.duplicate} duplicate, {t.hung} hung")
        return 1 if bad else 0

    async def close(self) -> None:
        for d in self.desks:
            if d.desk is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(d.desk.close(), 3)
        for proxy in self.proxies.values():
            await proxy.close()
        for rexd in self.rexds:
            rexd.stop()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    chaos = Chaos(args.seconds, args.seed, args.workdir)
    try:
        return await chaos.run()
    finally:
        await chaos.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
