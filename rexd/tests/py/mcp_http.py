"""rexd --listen's /mcp driven by the official MCP Python SDK's Streamable HTTP client.

Usage: mcp_http.py URL ROOT; the token is in $REXD_TOKEN. Exits non-zero with the reason when
something is off; prints one JSON line of facts.
"""

import json
import os
import sys

import anyio
import httpx2

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

URL, ROOT = sys.argv[1], sys.argv[2]
TOKEN = os.environ["REXD_TOKEN"]


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main():
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with http:
        async with streamable_http_client(URL + "/mcp", http_client=http) as (r, w):
            async with ClientSession(r, w) as s:
                init = await s.initialize()
                assert init.server_info.name == "rexd", init
                tools = [t.name for t in (await s.list_tools()).tools]
                assert tools == ["bash", "exec", "read", "write", "list", "glob", "stat"], tools
                ran = await s.call_tool(
                    "bash", {"command": "echo one; echo oops >&2; exit 3", "cwd": ROOT}
                )
                assert ran.is_error is True
                sc = ran.structured_content
                assert (sc["exit_code"], sc["stdout"], sc["stderr"]) == (3, "one\n", "oops\n"), sc
                path = os.path.join(ROOT, "mcp.txt")
                wrote = await s.call_tool("write", {"path": path, "content": "over http\n"})
                assert wrote.is_error is False, text_of(wrote)
                read = await s.call_tool("read", {"path": path})
                assert "over http" in text_of(read), text_of(read)
                outside = await s.call_tool("read", {"path": "/etc/passwd"})
                assert outside.is_error is True
    # Without the token: 401, nothing more.
    async with httpx2.AsyncClient() as plain:
        resp = await plain.post(
            URL + "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
            headers={"Accept": "application/json, text/event-stream"},
        )
        assert resp.status_code == 401 and resp.content == b"", resp
    print(json.dumps({"ok": True}))


anyio.run(main)
