"""rexd --listen's /ws driven by the Python `websockets` library (a client rexd did not write).

Usage: ws_clients.py SCENARIO URL [ARGS...]; the token is in $REXD_TOKEN (the second one, of
another client, in $REXD_OTHER_TOKEN). Exits non-zero with the reason when something is off;
prints one JSON line of facts for the Rust test to check further.
"""

import asyncio
import json
import os
import sys

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

TOKEN = os.environ.get("REXD_TOKEN", "")
OTHER = os.environ.get("REXD_OTHER_TOKEN", "")


def ws_url(url):
    return url.replace("http://", "ws://").replace("https://", "wss://") + "/ws"


def auth(token):
    return {"Authorization": f"Bearer {token}"}


class Session:
    """One JSON-RPC conversation on a WebSocket: calls by id, events kept in order."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.events = []
        self.answers = {}

    async def call(self, method, params=None, expect_error=False):
        self.next_id += 1
        my_id = self.next_id
        msg = {"jsonrpc": "2.0", "id": my_id, "method": method}
        if params is not None:
            msg["params"] = params
        await self.ws.send(json.dumps(msg))
        while my_id not in self.answers:
            await self.read_one()
        answer = self.answers.pop(my_id)
        if expect_error:
            assert "error" in answer, answer
            return answer["error"]
        assert "result" in answer, answer
        return answer["result"]

    async def read_one(self):
        msg = json.loads(await self.ws.recv())
        if isinstance(msg, list):
            for m in msg:
                self.answers[m["id"]] = m
        elif "id" in msg:
            self.answers[msg["id"]] = msg
        else:
            self.events.append(msg)

    async def run(self, sid, argv):
        """exec.start, then the output events and the exit (checking seq order)."""
        started = await self.call("exec.start", {"session_id": sid, "argv": argv})
        pid = started["process_id"]
        out, err, seqs = [], [], {"exec.stdout": 0, "exec.stderr": 0}
        while True:
            while self.events:
                e = self.events.pop(0)
                p = e["params"]
                if p.get("process_id") != pid:
                    continue
                if e["method"] in seqs:
                    assert p["seq"] == seqs[e["method"]] + 1, (e, seqs)
                    seqs[e["method"]] = p["seq"]
                    (out if e["method"] == "exec.stdout" else err).append(p["data"])
                elif e["method"] == "exec.exit":
                    return "".join(out), "".join(err), p
            await self.read_one()


async def session(url):
    async with connect(ws_url(url), additional_headers=auth(TOKEN)) as ws:
        s = Session(ws)
        opened = await s.call("session.open", {"client_name": "py-websockets"})
        sid = opened["session_id"]
        out, err, exit_ = await s.run(sid, ["sh", "-c", "printf 'a\\nb\\n'; echo oops >&2; exit 3"])
        assert (out, err, exit_["exit_code"]) == ("a\nb\n", "oops\n", 3), (out, err, exit_)
        wrote = await s.call(
            "fs.write", {"session_id": sid, "path": "hello.txt", "content": "héllo\n"}
        )
        assert wrote["bytes_written"] == len("héllo\n".encode()), wrote
        read = await s.call("fs.read", {"session_id": sid, "path": "hello.txt"})
        assert read["content"] == "héllo\n", read
        # A batch in one message is answered with one array.
        await ws.send(
            json.dumps(
                [
                    {"jsonrpc": "2.0", "id": 100, "method": "session.info",
                     "params": {"session_id": sid}},
                    {"jsonrpc": "2.0", "id": 101, "method": "fs.stat",
                     "params": {"session_id": sid, "path": "hello.txt"}},
                ]
            )
        )
        while 100 not in s.answers or 101 not in s.answers:
            await s.read_one()
        assert s.answers[100]["result"]["session_id"] == sid
        assert s.answers[101]["result"]["exists"] is True
        # Not JSON: a parse error, and the connection goes on.
        await ws.send("this is not json")
        msg = json.loads(await ws.recv())
        assert msg["error"]["code"] == -32700, msg
        # Another client's token cannot use this session.
        async with connect(ws_url(url), additional_headers=auth(OTHER)) as other:
            o = Session(other)
            e = await o.call("session.info", {"session_id": sid}, expect_error=True)
            assert e["code"] == -32602, e
        info = await s.call("session.info", {"session_id": sid})
        assert info["session_id"] == sid
        # A binary message is not JSON-RPC: closed with 1003.
        await ws.send(b"\x00\x01")
        try:
            while True:
                await ws.recv()
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 1003, closed
    print(json.dumps({"session_id": sid}))


async def refused(url):
    for headers in [{}, auth("wrong-token-wrong-token-wrong"), {"Authorization": "Basic eDp5"}]:
        try:
            async with connect(ws_url(url), additional_headers=headers):
                raise AssertionError(f"connected with {headers}")
        except InvalidStatus as e:
            assert e.response.status_code == 401, e
            assert e.response.body in (b"", None), e.response.body
    print(json.dumps({"refused": 3}))


async def concurrent(url, n):
    n = int(n)

    async def one(i):
        async with connect(ws_url(url), additional_headers=auth(TOKEN), open_timeout=60) as ws:
            s = Session(ws)
            sid = (await s.call("session.open", {"client_name": f"c{i}"}))["session_id"]
            out, _, exit_ = await s.run(sid, ["echo", f"client {i}"])
            assert out == f"client {i}\n" and exit_["exit_code"] == 0, (i, out, exit_)
            await s.call("session.close", {"session_id": sid})
            return sid

    # All connect first, then all run: the sessions are open at the same time.
    sids = await asyncio.gather(*(one(i) for i in range(n)))
    assert len(set(sids)) == n, "session ids repeat"
    print(json.dumps({"sessions": n}))


async def flood(url, count):
    """Sends `count` requests without reading a single answer, then checks that another
    client is served meanwhile, then reads: every request answered, none lost."""
    count = int(count)
    # No keepalive pings: this client reads nothing for a while on purpose, so a pong would
    # wait behind the unread answers, and on a slow machine the library would give up on it
    # (1011, "keepalive ping timeout") before the reading starts.
    async with connect(
        ws_url(url), additional_headers=auth(TOKEN), max_size=None, open_timeout=60,
        ping_interval=None,
    ) as ws:
        s = Session(ws)
        sid = (await s.call("session.open", {"client_name": "flood"}))["session_id"]
        req = {"jsonrpc": "2.0", "method": "fs.stat",
               "params": {"session_id": sid, "path": "."}}
        sent = 0
        # The daemon stops taking this client's messages while its answers go unread, so at
        # some point `send` blocks: the flood waits in the client's socket, not in the daemon.
        blocked = False
        for i in range(count):
            req["id"] = 1000 + i
            try:
                await asyncio.wait_for(ws.send(json.dumps(req)), timeout=2)
            except asyncio.TimeoutError:
                blocked = True
                break
            sent += 1
        # Generous bounds: on a loaded machine the daemon is slow, not stuck.
        async with connect(
            ws_url(url), additional_headers=auth(TOKEN), open_timeout=60
        ) as other:
            o = Session(other)
            osid = (await o.call("session.open", {"client_name": "bystander"}))["session_id"]
            out, _, _ = await o.run(osid, ["echo", "still served"])
            assert out == "still served\n", out
        print(json.dumps({"sent": sent, "blocked": blocked}), flush=True)
        # The Rust side measures the daemon now; then every answer must come.
        sys.stdin.readline()
        got = 0
        while got < sent:
            msg = json.loads(await asyncio.wait_for(ws.recv(), timeout=60))
            if msg.get("id", 0) >= 1000:
                assert "result" in msg, msg
                got += 1
        print(json.dumps({"answered": got}), flush=True)


async def oversize(url, limit):
    limit = int(limit)
    async with connect(ws_url(url), additional_headers=auth(TOKEN), max_size=None) as ws:
        await ws.send("x" * (limit + 1))
        try:
            while True:
                await ws.recv()
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
    assert code == 1009, code
    print(json.dumps({"close": code}))


async def slow_reader(url):
    """Starts a command with a lot of output and reads nothing: the daemon must drop us."""
    async with connect(ws_url(url), additional_headers=auth(TOKEN), max_size=None) as ws:
        s = Session(ws)
        sid = (await s.call("session.open", {"client_name": "slow"}))["session_id"]
        await s.call(
            "exec.start",
            {"session_id": sid, "argv": ["sh", "-c", "yes 0123456789abcdef | head -c 200000000"],
             "max_output_bytes": 300000000},
        )
        print(json.dumps({"session_id": sid}), flush=True)
        # The Rust side waits for the daemon's verdict, then lets us read.
        sys.stdin.readline()
        code = None
        try:
            while True:
                await asyncio.wait_for(ws.recv(), timeout=30)
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
    # The session ended with the connection.
    async with connect(ws_url(url), additional_headers=auth(TOKEN)) as ws:
        e = await Session(ws).call("session.info", {"session_id": sid}, expect_error=True)
        assert e["code"] == -32602, e
    print(json.dumps({"close": code}), flush=True)


SCENARIOS = {
    "session": session,
    "refused": refused,
    "concurrent": concurrent,
    "flood": flood,
    "oversize": oversize,
    "slow_reader": slow_reader,
}

if __name__ == "__main__":
    asyncio.run(SCENARIOS[sys.argv[1]](*sys.argv[2:]))
