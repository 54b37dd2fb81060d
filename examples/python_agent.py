#!/usr/bin/env python3
"""An agent loop in the OpenAI Chat tool-call format, with a scripted stand-in for the model (no
network), on deskwire's tool layer and OA1.

The NPC starts away from the desk: the model is offered no ``RemoteBash``, and when it calls it
anyway the toolbox refuses with an observation the model reads. Then the NPC sits down,
``RemoteBash`` appears in the next request's ``tools=``, the model's call goes through OA1 to a
remote that runs it, and the result is fed back as a ``tool`` message.

    python examples/python_agent.py                      # in-memory IRC, executor in-process
    python examples/python_agent.py --irc 127.0.0.1:6667 # rexd --irc as the remote, via a server
                                                         # (rexd --irc HOST:PORT --allow-from desk
                                                         #  --secret-file FILE or --unauthenticated)

With the real SDK the model call is ``OpenAI().chat.completions.create(model=..., messages=
messages, **toolbox.tool_request(agent, "openai_chat"))`` and its return value goes to
``tools.parse_response("openai_chat", completion)`` unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from deskwire import Timeout, Transmit, oa1, sim, tools
from deskwire.aio import IrcDesk

AGENT = "npc-1"
COMMAND = "printf 'hello from %s\\n' \"$(uname -s)\""


class ScriptedModel:
    """Stands in for ``client.chat.completions.create``: answers from a script, in the API's
    response shape, after checking the request the way the API would (a call only of a tool it
    was offered... except once, on purpose, as models sometimes do)."""

    def __init__(self) -> None:
        self.turn = 0

    def create(self, *, model: str, messages: List[Dict[str, Any]], **fields: Any) -> Dict[str, Any]:
        self.turn += 1
        offered = [t["function"]["name"] for t in fields.get("tools", [])]
        print(f"model turn {self.turn}: offered {offered}")
        last = messages[-1]
        if last["role"] == "user":
            # Calls RemoteBash whether or not it was offered.
            return self._call("call_1", "RemoteBash", {"command": COMMAND, "timeout_sec": 30})
        if last["role"] == "tool" and "not available" in last["content"]:
            return self._text("I can only run that at the desk; I will wait until I am seated.")
        if last["role"] == "tool":
            return self._text(f"The remote machine says: {last['content'].strip()}")
        raise AssertionError(f"unexpected conversation: {last}")

    @staticmethod
    def _call(call_id: str, name: str, args: Dict[str, Any]) -> Dict[str, Any]:
        return {
            "id": "chatcmpl-demo", "object": "chat.completion", "created": int(time.time()),
            "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": call_id, "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)}}]}}],
        }

    @staticmethod
    def _text(text: str) -> Dict[str, Any]:
        return {
            "id": "chatcmpl-demo", "object": "chat.completion", "created": int(time.time()),
            "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
        }


class InMemoryDesk:
    """A desk and a remote on deskwire's in-memory IRC server; the remote runs commands with
    ``sh -c`` in this process."""

    def __init__(self) -> None:
        self.network = sim.Network(seed=1)
        self.desk = oa1.Desk("desk", "#desk", oa1={"allowed_sender": "rexd"})
        self.remote = oa1.Remote("rexd", "#desk", oa1={"allowed_sender": "desk"})
        self.links = [(self.desk, self.network.connect()), (self.remote, self.network.connect())]
        self.now = 0

    def _step(self) -> List[Any]:
        events = []
        for engine, link in self.links:
            while True:
                out = engine.poll_output(self.now)
                if isinstance(out, Transmit):
                    self.network.handle_bytes(link, out.data)
                elif isinstance(out, Timeout):
                    break
                else:
                    events.append(out)
            engine.handle_bytes(self.now, self.network.take_bytes(link))
        self.now += 5
        return events

    async def run_tool(self, call: Dict[str, Any]) -> Dict[str, Any]:
        """What ``IrcDesk.run_tool`` does, on the in-memory server."""
        command, timeout = oa1.remote_bash_args(call["args"])
        outcome = await self.remote_bash(command, timeout)
        return tools.result(call["id"], oa1.remote_bash_result(outcome),
                            is_error=isinstance(outcome, oa1.Failed))

    async def remote_bash(self, command: str, timeout: Optional[float]) -> Any:
        request_id = self.desk.request(self.now, command, None if timeout is None else int(timeout * 1000))
        for _ in range(100_000):
            for event in self._step():
                if isinstance(event, oa1.Request):
                    done = subprocess.run(["sh", "-c", event.payload], capture_output=True, text=True,
                                          timeout=timeout)
                    self.remote.respond(self.now, event.id, done.stdout + done.stderr)
                elif isinstance(event, (oa1.Response, oa1.Failed)) and event.id == request_id:
                    return event
        raise RuntimeError("no answer")

    async def close(self) -> None:
        pass


class IrcTransport:
    """The desk on a real IRC server, ``rexd --irc`` (its default nick ``rexd``, the desk's
    default remote) as the remote."""

    def __init__(self, desk: IrcDesk) -> None:
        self.desk = desk

    @classmethod
    async def connect(cls, address: str) -> "IrcTransport":
        host, _, port = address.rpartition(":")
        return cls(await IrcDesk.connect(host, int(port), nick="desk", channel="#desk"))

    async def run_tool(self, call: Dict[str, Any]) -> Dict[str, Any]:
        # The output, or the failure as an error result the model reads.
        return await self.desk.run_tool(call)

    async def close(self) -> None:
        await self.desk.close()


async def agent_turns(transport: Any) -> str:
    toolbox = tools.Toolbox()
    model = ScriptedModel()
    messages: List[Dict[str, Any]] = [
        {"role": "system", "content": "You are an NPC with a desk."},
        {"role": "user", "content": "Which OS does the remote machine run?"},
    ]
    now = 0
    final = ""
    for phase in ("away from the desk", "seated at the desk"):
        print(f"-- the NPC is {phase}")
        if phase == "seated at the desk":
            toolbox.bind(AGENT, AGENT)
            print(f"   {toolbox.poll_output(now)}")
            messages.append({"role": "user", "content": "You are seated now. Try again."})
        while True:
            completion = model.create(model="scripted", messages=messages,
                                      **toolbox.tool_request(AGENT, "openai_chat"))
            reply = tools.parse_response("openai_chat", completion)
            messages += tools.assistant_message("openai_chat", reply)
            if not reply.tool_calls:
                final = reply.text
                print(f"model: {final}")
                break
            results = []
            for call in reply.tool_calls:
                verdict = toolbox.check_call(now, AGENT, call)
                if isinstance(verdict, tools.Run):
                    result = await transport.run_tool(call)
                    print(f"   RemoteBash {call['args']['command']!r} -> {result['content']!r}")
                    results.append(result)
                elif isinstance(verdict, tools.Refuse):
                    print(f"   refused: {verdict.observation}")
                    results.append(tools.result(call["id"], verdict.observation, is_error=True))
                else:
                    raise AssertionError(f"no approvals in this policy: {verdict}")
            messages += tools.tool_results("openai_chat", results)
            if phase == "away from the desk":
                # One round is enough to show the refusal; the model's reply ends the phase.
                completion = model.create(model="scripted", messages=messages,
                                          **toolbox.tool_request(AGENT, "openai_chat"))
                reply = tools.parse_response("openai_chat", completion)
                messages += tools.assistant_message("openai_chat", reply)
                print(f"model: {reply.text}")
                break
    return final


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--irc", metavar="HOST:PORT", help="use rexd --irc through this IRC server")
    args = parser.parse_args()
    transport = await IrcTransport.connect(args.irc) if args.irc else InMemoryDesk()
    try:
        final = await agent_turns(transport)
    finally:
        await transport.close()
    return 0 if "hello from" in final else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
