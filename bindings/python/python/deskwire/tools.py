"""The tool layer, for Python users of the OpenAI, Anthropic and Google SDKs.

A :class:`Toolbox` decides what a model sees and may run: ``RemoteBash`` only while the agent's
NPC sits at the desk (:meth:`Toolbox.bind`), REXD's ``bash``, ``read``, ``write``, ``list``,
``glob``, ``stat`` always, under a policy with deny lists, path roots and approvals.
:meth:`Toolbox.tool_request` gives the keyword arguments for the SDK call; :func:`parse_response`
and :class:`StreamParser` read what comes back (bytes, ``str``, a ``dict`` or the SDK's own
response object); :func:`assistant_message` and :func:`tool_results` feed the turn and the
results back in the provider's shape::

    from openai import OpenAI
    from deskwire import tools

    toolbox = tools.Toolbox()
    toolbox.bind("npc-1", "npc-1")                       # RemoteBash appears
    reply = OpenAI().chat.completions.create(
        model="gpt-4.1", messages=messages, **toolbox.tool_request("npc-1", "openai_chat"))
    response = tools.parse_response("openai_chat", reply)   # the SDK object as it is
    for call in response.tool_calls:
        verdict = toolbox.check_call(now_ms, "npc-1", call)  # "run" | {"refuse": ...} | ...

With many tools, :class:`ToolIndex` offers the model only the best few for the user's intent,
and :func:`rexd_request` turns a call of REXD's ``bash``, ``read``, ... into the request for
:meth:`deskwire.aio.RexdClient.call`::

    index = tools.ToolIndex(toolbox.visible_tools("npc-1"))
    index.top_n("show me the file contents", 3)   # [('read', 1.9), ...]
    method, params = tools.rexd_request(call, rexd.session_id)
    output = await rexd.call(method, params)

Providers are named ``openai_chat``, ``openai_responses``, ``anthropic`` and ``gemini``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

from ._deskwire import tools as _native
from ._deskwire.tools import REMOTE_BASH, ToolIndex, Toolbox, request_tools, rexd_request
from ._events import event

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
    "ToolsChanged",
    "ApprovalRequested",
    "ApprovalDecided",
    "REMOTE_BASH",
    "PROVIDERS",
]

PROVIDERS = ("openai_chat", "openai_responses", "anthropic", "gemini")
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


def parse_response(provider: str, body: Body, *, seed: int = 0) -> ProviderResponse:
    """Normalises a whole (non-streamed) response of ``provider``: bytes, ``str``, a ``dict``
    or the SDK's response object. Raises :class:`deskwire.ProtocolError` when it is not the
    provider's shape and :class:`deskwire.RemoteError` when it reports an error. ``seed`` makes
    the call ids Gemini leaves out."""
    return _response(_native.parse_response(provider, _dump(body), seed=seed))


class StreamParser:
    """Assembles a streamed response: :meth:`feed` the raw bytes of the event stream as they
    arrive (any split), or :meth:`push` each event (bytes, ``str``, ``dict`` or an SDK stream
    event such as ``openai``'s ``ChatCompletionChunk``); :meth:`finish` gives the response."""

    def __init__(
        self,
        provider: str,
        *,
        seed: int = 0,
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


def assistant_message(provider: str, response: Union[ProviderResponse, Dict[str, Any]]) -> Any:
    """The assistant turn to append to the conversation, in ``provider``'s shape (a list of
    input items for ``openai_responses``), with tool calls and reasoning echoed as required."""
    return _native.assistant_message(provider, _segments(response))


def result(call_id: str, content: str, *, is_error: bool = False) -> Dict[str, Any]:
    """A tool result for :func:`tool_results`."""
    out: Dict[str, Any] = {"callId": call_id, "content": content}
    if is_error:
        out["isError"] = True
    return out


def tool_results(
    provider: str,
    results: Sequence[Dict[str, Any]],
    response: Union[ProviderResponse, Dict[str, Any], None] = None,
) -> Any:
    """The results in ``provider``'s shape, to append after the assistant turn: ``tool``
    messages (OpenAI Chat), ``function_call_output`` items (Responses), one ``user`` message
    (Anthropic) or one ``user`` content of ``functionResponse`` parts (Gemini, which needs the
    ``response`` the calls came in)."""
    return _native.tool_results(
        provider, list(results), None if response is None else _segments(response)
    )


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
    """A description for the human."""
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
