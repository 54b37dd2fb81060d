"""The tool layer, for Python users of the OpenAI, Anthropic and Google SDKs.

A :class:`Toolbox` decides what a model sees and may run: ``RemoteBash`` only while the agent's
NPC sits at the desk (:meth:`Toolbox.bind`), REXD's ``bash``, ``read``, ``write``, ``list``,
``glob``, ``stat`` always, under a policy with deny lists, path roots and approvals.
:meth:`Toolbox.tool_request` gives the keyword arguments for the SDK call; :func:`parse_response`
and :class:`StreamParser` read what comes back (bytes, ``str``, a ``dict`` or the SDK's own
response object); :meth:`Toolbox.check_call` says what to do with each call (:class:`Run`,
:class:`Refuse` or :class:`Pending`); :func:`assistant_message` and :func:`tool_results` give
the next turn's messages in the provider's shape, always as a list to ``extend`` with. One
turn with Anthropic's SDK (the README's Python section has it whole, run in CI)::

    toolbox = tools.Toolbox()
    toolbox.bind("npc-1", "npc-1")                        # the NPC sits down: RemoteBash appears
    message = await client.messages.create(model=model, max_tokens=1024, messages=messages,
                                           **toolbox.tool_request("npc-1", "anthropic"))
    reply = tools.parse_response("anthropic", message)    # the SDK object as it is
    results = []
    for call in reply.tool_calls:
        verdict = toolbox.check_call(now_ms(), "npc-1", call)
        if isinstance(verdict, tools.Run):
            results.append(await desk.run_tool(call))      # RemoteBash; REXD's: rexd.run_tool
        elif isinstance(verdict, tools.Refuse):
            results.append(tools.result(call["id"], verdict.observation, is_error=True))
    messages += tools.assistant_message("anthropic", reply)
    messages += tools.tool_results("anthropic", results, reply)

With many tools, :class:`ToolIndex` offers the model only the best few for the user's intent.
:func:`rexd_request` turns a call of REXD's ``bash``, ``read``, ... into the REXD request, which
:meth:`deskwire.aio.RexdClient.run_tool` sends and turns into the tool result (``bash`` starts a
process whose output it collects; a daemon runs it only with ``--allow-shell``)::

    index = tools.ToolIndex(toolbox.visible_tools("npc-1"))
    index.top_n("show me the file contents", 3)   # [('read', 1.9), ...]
    results.append(await rexd.run_tool(call))     # {"callId", "content", "isError"?}

Providers are named ``openai_chat``, ``openai_responses``, ``anthropic`` and ``gemini``
(:data:`Provider`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Sequence, Union

from ._deskwire import tools as _native
from ._deskwire.tools import REMOTE_BASH, ToolIndex, Toolbox, request_tools, rexd_request
from ._events import event

# Spelled as a Union of Literals, which type checkers read as ``Literal["openai_chat", ...]``:
# at run time it then is a Union too, as mypy.stubtest expects of the alias.
Provider = Union[
    Literal["openai_chat"], Literal["openai_responses"], Literal["anthropic"], Literal["gemini"]
]
"""A provider's name: OpenAI Chat Completions, OpenAI Responses, Anthropic Messages, Gemini."""

__all__ = [
    "Toolbox",
    "ToolIndex",
    "rexd_request",
    "StreamParser",
    "ProviderResponse",
    "parse_response",
    "request_tools",
    "assistant_message",
    "tool_results",
    "result",
    "Verdict",
    "Run",
    "Refuse",
    "Pending",
    "Provider",
    "ToolsChanged",
    "ApprovalRequested",
    "ApprovalDecided",
    "REMOTE_BASH",
    "PROVIDERS",
]

PROVIDERS: "tuple[Provider, ...]" = ("openai_chat", "openai_responses", "anthropic", "gemini")
"""The provider names."""

Body = Union[bytes, str, Dict[str, Any], Any]
"""A response body: bytes, str, a dict, or an SDK object with ``model_dump``."""


@dataclass(frozen=True)
class ProviderResponse:
    """A model's answer, normalised (``ProviderResponse`` of the tool protocol)."""

    segments: List[Dict[str, Any]]
    """In order: ``{"type": "text", "text"}``, ``{"type": "tool_call", "toolCall": {"id",
    "name", "args"}}``, ``{"type": "invalid_tool_call", "invalidToolCall": {...}}`` (answer it
    with an error result), ``{"type": "reasoning", "raw"}`` (echoed back unchanged)."""
    stop_reason: Optional[str] = None
    """Why the model stopped, as the provider says it."""

    @property
    def tool_calls(self) -> List[Dict[str, Any]]:
        """The valid tool calls (``{"id", "name", "args", ...}``)."""
        return [s["toolCall"] for s in self.segments if s.get("type") == "tool_call"]

    @property
    def invalid_tool_calls(self) -> List[Dict[str, Any]]:
        """The calls whose arguments could not be read."""
        return [s["invalidToolCall"] for s in self.segments if s.get("type") == "invalid_tool_call"]

    @property
    def text(self) -> str:
        """All text, joined."""
        return "".join(s["text"] for s in self.segments if s.get("type") == "text")

    def to_dict(self) -> Dict[str, Any]:
        """The JSON shape of the tool protocol (``{"segments": [...], "stop_reason"?}``)."""
        out: Dict[str, Any] = {"segments": self.segments}
        if self.stop_reason is not None:
            out["stop_reason"] = self.stop_reason
        return out


def _response(value: Dict[str, Any]) -> ProviderResponse:
    return ProviderResponse(segments=value["segments"], stop_reason=value.get("stop_reason"))


def _dump(value: Any) -> Any:
    """An SDK object (pydantic) as the API sent it: wire names (Gemini's are camelCase
    aliases), only the fields that were set; other values unchanged."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump(mode="json", exclude_unset=True, by_alias=True)
    return value


def parse_response(provider: Provider, body: Body, *, seed: Optional[int] = None) -> ProviderResponse:
    """Normalises a whole (non-streamed) response of ``provider``: bytes, ``str``, a ``dict``
    or the SDK's response object. Raises :class:`deskwire.ProtocolError` when it is not the
    provider's shape and :class:`deskwire.RemoteError` when it reports an error. The call ids
    Gemini leaves out are made from the OS's entropy, new on every call; ``seed`` fixes them (for
    tests)."""
    return _response(_native.parse_response(provider, _dump(body), seed=seed))


class StreamParser:
    """Assembles a streamed response: :meth:`feed` the raw bytes of the event stream as they
    arrive (any split), or :meth:`push` each event (bytes, ``str``, ``dict`` or an SDK stream
    event such as ``openai``'s ``ChatCompletionChunk``); :meth:`finish` gives the response."""

    def __init__(
        self,
        provider: Provider,
        *,
        seed: Optional[int] = None,
        max_bytes: Optional[int] = None,
        max_items: Optional[int] = None,
    ) -> None:
        self._parser = _native.StreamParser(
            provider, seed=seed, max_bytes=max_bytes, max_items=max_items
        )

    def feed(self, data: bytes) -> None:
        """Raw bytes of the server-sent event stream."""
        self._parser.feed(data)

    def push(self, event: Body) -> None:
        """The data of one event."""
        self._parser.push_data(_dump(event))

    def finish(self) -> ProviderResponse:
        """Ends the stream; the parser takes nothing more afterwards."""
        return _response(self._parser.finish())


def _segments(response: Union[ProviderResponse, Dict[str, Any]]) -> Dict[str, Any]:
    return response.to_dict() if isinstance(response, ProviderResponse) else response


def _listed(value: Any) -> List[Dict[str, Any]]:
    """One message, or a list of them, as a list (what the providers' shapes differ in)."""
    return list(value) if isinstance(value, list) else [value]


def assistant_message(
    provider: Provider, response: Union[ProviderResponse, Dict[str, Any]]
) -> List[Dict[str, Any]]:
    """The assistant turn to add to the conversation (``messages += ...``), in ``provider``'s
    shape, with tool calls and reasoning echoed as the API requires. Always a list, whatever
    the provider (one message for OpenAI Chat, Anthropic and Gemini; input items for
    Responses), so a loop over providers can ``extend`` with it."""
    return _listed(_native.assistant_message(provider, _segments(response)))


def result(call_id: str, content: str, *, is_error: bool = False) -> Dict[str, Any]:
    """A tool result for :func:`tool_results`."""
    out: Dict[str, Any] = {"callId": call_id, "content": content}
    if is_error:
        out["isError"] = True
    return out


def tool_results(
    provider: Provider,
    results: Sequence[Dict[str, Any]],
    response: Union[ProviderResponse, Dict[str, Any], None] = None,
) -> List[Dict[str, Any]]:
    """The results in ``provider``'s shape, to add after the assistant turn (``messages +=
    ...``): ``tool`` messages (OpenAI Chat), ``function_call_output`` items (Responses), one
    ``user`` message (Anthropic) or one ``user`` content of ``functionResponse`` parts (Gemini,
    which needs the ``response`` the calls came in). Given ``response``, a result for a call it
    did not make raises :class:`deskwire.LocalError` (every API would refuse it). Always a list,
    like :func:`assistant_message`."""
    return _listed(
        _native.tool_results(
            provider, list(results), None if response is None else _segments(response)
        )
    )


@event("tools.verdict", "run")
@dataclass(frozen=True)
class Run:
    """:meth:`Toolbox.check_call`: run the call now, and send its result back."""

    may_run = True
    """Whether the call may run now."""


@event("tools.verdict", "refuse")
@dataclass(frozen=True)
class Refuse:
    """:meth:`Toolbox.check_call`: do not run the call; send ``observation`` back as its error
    result (``tools.result(call["id"], verdict.observation, is_error=True)``)."""

    observation: str
    """The text for the model: why, and what it can do instead."""

    may_run = False
    """Whether the call may run now."""


@event("tools.verdict", "pending")
@dataclass(frozen=True)
class Pending:
    """:meth:`Toolbox.check_call`: a human decides (:class:`ApprovalRequested` was queued);
    run the call when :class:`ApprovalDecided` for ``approval_id`` says ``may_run``."""

    approval_id: str
    """The approval's id."""

    may_run = False
    """Whether the call may run now."""


Verdict = Union[Run, Refuse, Pending]
"""What :meth:`Toolbox.check_call` says to do with a call: ``isinstance(verdict, tools.Run)``,
or ``verdict.may_run``."""


@event("tools", "tools_changed")
@dataclass(frozen=True)
class ToolsChanged:
    """What ``agent`` may see changed: rebuild its tool list."""

    agent: str
    """The agent."""
    visible: List[str] = field(default_factory=list)
    """Everything it may see now."""
    added: List[str] = field(default_factory=list)
    """Newly visible."""
    removed: List[str] = field(default_factory=list)
    """No longer visible."""


@event("tools", "approval_requested")
@dataclass(frozen=True)
class ApprovalRequested:
    """A call needs a human: show it, then :meth:`Toolbox.respond`."""

    id: str
    """The approval id."""
    agent: str
    """The agent that made the call."""
    call: Dict[str, Any]
    """The call."""
    tier: str
    """How risky it is."""
    description: str
    """What the human is asked, in one line: who asks, for what, and what the tool does
    (``npc-1 asks to run `make deploy` with RemoteBash (Run a shell command ...)``)."""
    deadline_ms: int
    """When it times out."""


@event("tools", "approval_decided")
@dataclass(frozen=True)
class ApprovalDecided:
    """A waiting call was settled: run it when ``outcome == "approved"``."""

    request: Dict[str, Any]
    """The request."""
    outcome: str
    """``approved``, ``denied``, ``timed_out`` or ``cancelled``."""
    remember: bool
    """The human asked to remember the answer."""
    reason: Optional[str] = None
    """The reason given, if any."""

    @property
    def may_run(self) -> bool:
        """Whether the call may run now."""
        return self.outcome == "approved"
