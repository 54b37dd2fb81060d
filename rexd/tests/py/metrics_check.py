"""rexd's metrics read with the official Python prometheus_client parser (OpenMetrics), checked
against a scripted session.

Usage:
  metrics_check.py listen URL METRICS_URL   a session over /ws; /metrics scraped on both binds
  metrics_check.py stdio REXD CONFIG        a session over rexd --stdio; rexd.metrics
The token is in $REXD_TOKEN. Exits non-zero with the reason when a number is off.
"""

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request
import os

from prometheus_client.openmetrics.parser import text_string_to_metric_families

TOKEN = os.environ.get("REXD_TOKEN", "")


def samples(text):
    """{(sample name, frozenset(labels)): value} from the OpenMetrics text."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(parsed, name, **labels):
    return parsed.get((name, frozenset(labels.items())), 0)


def scrape(url, token=TOKEN):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text"), r.headers
        return samples(r.read().decode())


def check_counts(before, after, opened_now):
    """What the scripted session must have added."""

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("rexd_sessions_opened_total") == 1, delta("rexd_sessions_opened_total")
    assert value(after, "rexd_sessions_open") == opened_now, value(after, "rexd_sessions_open")
    assert delta("rexd_execs_total", **{"class": "unclassified", "outcome": "exit_0"}) == 1
    assert delta("rexd_execs_total", **{"class": "unclassified", "outcome": "exit_nonzero"}) == 1
    assert delta("rexd_execs_total", **{"class": "destructive", "outcome": "refused"}) == 1
    assert delta("rexd_errors_total", code="-32001") == 1
    assert delta("rexd_errors_total", code="-32009") == 1
    assert value(after, "rexd_processes_running") == 0
    assert delta("rexd_stream_bytes_total", direction="in") > 0
    assert delta("rexd_stream_bytes_total", direction="out") > 0


class Rpc:
    """JSON-RPC over a line transport: send(msg), recv() -> dict."""

    def __init__(self, send, recv):
        self.send, self.recv, self.next_id = send, recv, 0

    async def call(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(json.dumps(msg))
        while True:
            m = await self.recv()
            if m.get("id") == self.next_id:
                return m

    async def run(self, sid, argv):
        r = await self.call("exec.start", {"session_id": sid, "argv": argv})
        if "error" in r:
            return r
        pid = r["result"]["process_id"]
        while True:
            m = await self.recv()
            if m.get("method") == "exec.exit" and m["params"]["process_id"] == pid:
                return m


async def script(rpc):
    """The scripted session: 1 session, 2 execs that run (exit 0, exit 1), 1 refused by the
    policy, 1 read of a missing file."""
    sid = (await rpc.call("session.open", {"client_name": "metrics"}))["result"]["session_id"]
    assert (await rpc.run(sid, ["true"]))["params"]["exit_code"] == 0
    assert (await rpc.run(sid, ["false"]))["params"]["exit_code"] == 1
    refused = await rpc.run(sid, ["rm", "-rf", "x"])
    assert refused["error"]["code"] == -32001, refused
    missing = await rpc.call("fs.read", {"session_id": sid, "path": "nope.txt"})
    assert missing["error"]["code"] == -32009, missing
    return sid


async def listen(url, metrics_url):
    from websockets.asyncio.client import connect

    before = scrape(url + "/metrics")
    # A wrong token: 401, counted.
    try:
        scrape(url + "/metrics", token="wrong-wrong-wrong-wrong")
        raise AssertionError("a wrong token was served")
    except urllib.error.HTTPError as e:
        assert e.code == 401
    ws_url = url.replace("http://", "ws://") + "/ws"
    async with connect(ws_url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:

        async def recv():
            return json.loads(await ws.recv())

        rpc = Rpc(ws.send, recv)
        sid = await script(rpc)
        after = scrape(url + "/metrics")
        check_counts(before, after, opened_now=1)
        assert value(after, "rexd_auth_failures_total", reason="token") - value(
            before, "rexd_auth_failures_total", reason="token"
        ) == 1
        # The separate bind serves the same numbers.
        other = scrape(metrics_url)
        assert value(other, "rexd_execs_total", **{"class": "destructive", "outcome": "refused"}) == 1
        # The same numbers through rexd.metrics on the session's own connection.
        m = await rpc.call("rexd.metrics")
        text = samples(m["result"]["text"])
        assert value(text, "rexd_sessions_opened_total") == value(after, "rexd_sessions_opened_total")
        await rpc.call("session.close", {"session_id": sid})
    closed = scrape(url + "/metrics")
    assert value(closed, "rexd_sessions_open") == 0, value(closed, "rexd_sessions_open")
    print(json.dumps({"ok": True}))


async def stdio(rexd, config):
    proc = await asyncio.create_subprocess_exec(
        rexd, "--stdio", "--config", config,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )

    async def send(line):
        proc.stdin.write(line.encode() + b"\n")
        await proc.stdin.drain()

    async def recv():
        return json.loads(await proc.stdout.readline())

    rpc = Rpc(send, recv)
    before = samples((await rpc.call("rexd.metrics"))["result"]["text"])
    await script(rpc)
    after = samples((await rpc.call("rexd.metrics", {}))["result"]["text"])
    check_counts(before, after, opened_now=1)
    proc.stdin.close()
    await proc.wait()
    print(json.dumps({"ok": True}))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "listen":
        asyncio.run(listen(sys.argv[2], sys.argv[3]))
    else:
        asyncio.run(stdio(sys.argv[2], sys.argv[3]))
