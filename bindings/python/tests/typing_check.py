"""What a typed user's checker sees, checked by ``mypy --strict`` in run_tests.sh (not run by
pytest): the drivers are their own class inside ``async with``, a verdict is one of three
classes, provider names are a ``Literal`` (a typo is an error, which the ``type: ignore`` below
needs: with ``--strict`` an ignore that silences nothing is an error itself)."""

from typing import Any, Dict, List, Optional, Union

from typing_extensions import assert_type

from deskwire import oa1, tools
from deskwire.aio import IrcDesk, IrcDesks, IrcRemote, RexdClient


async def drivers() -> None:
    async with await IrcDesk.connect("127.0.0.1") as desk:
        assert_type(desk, IrcDesk)
        assert_type(await desk.remote_bash("uname -a", timeout=30), str)
    async with await IrcRemote.connect("127.0.0.1", handler=answer) as remote:
        assert_type(remote, IrcRemote)
    async with await RexdClient.connect("local", compression=True) as rexd:
        assert_type(rexd, RexdClient)
        assert_type(await rexd.read_file("README.md", max_size=None), bytes)
        async for chunk in rexd.read_chunks("README.md", offset=10):
            assert_type(chunk, bytes)
    await RexdClient.connect("local", compresion=True)  # type: ignore[call-arg]
    async with await IrcDesks.connect("127.0.0.1", channels=["#a"], chat=True) as desks:
        assert_type(desks, IrcDesks)
        await desks.add_desk("#b", "rexd", ready_timeout=None)
        assert_type(await desks.remote_bash("#a", "ls"), str)
        assert_type(desks.send_text("#a", "hello", notice=True), int)
        assert_type(desks.remove_desk("#b"), bool)
        async for item in desks.chat():
            assert_type(item, oa1.ChatEvent)
            if isinstance(item, oa1.ChatMessage):
                assert_type(item.kind, oa1.ChatKind)
                assert_type(item.tags, Dict[str, str])
            elif isinstance(item, oa1.MemberQuit):
                assert_type(item.reason, Optional[str])
        await desks.remote_bash("#a")  # type: ignore[call-arg]


async def answer(request: oa1.Request) -> str:
    return request.payload


def verdicts(toolbox: tools.Toolbox, call: tools.ProviderResponse) -> None:
    verdict = toolbox.check_call(0, "npc-1", call.tool_calls[0])
    assert_type(verdict, Union[tools.Run, tools.Refuse, tools.Pending])
    if isinstance(verdict, tools.Refuse):
        assert_type(verdict.observation, str)
    elif isinstance(verdict, tools.Pending):
        assert_type(verdict.approval_id, str)
    assert_type(tools.assistant_message("anthropic", call), List[Dict[str, Any]])
    tools.parse_response("anthropic", b"{}")
    tools.parse_response("antropic", b"{}")  # type: ignore[arg-type]
    assert_type(oa1.remote_bash_args({"command": "ls"}), "tuple[str, int | None]")
