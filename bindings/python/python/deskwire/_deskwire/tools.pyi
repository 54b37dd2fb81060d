from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union

from typing_extensions import TypeAlias, final

from deskwire.tools import Pending, Refuse, Run

_Provider: TypeAlias = Literal["openai_chat", "openai_responses", "anthropic", "gemini"]

__all__ = ['request_tools', 'parse_response', 'assistant_message', 'tool_results', 'StreamParser', 'Toolbox', 'ToolIndex', 'rexd_request', 'REMOTE_BASH']

REMOTE_BASH: str

def request_tools(
    provider: _Provider,
    tools: Any,
    *,
    choice: Any = None,
    catalog: Any = None,
    parallel_tool_calls: Optional[bool] = None,
    strict: bool = False,
) -> Dict[str, Any]:
    """The tool fields of a request body for ``provider`` (``tools``, ``tool_choice``, ``toolConfig``, ...)
    for the given tool specs: merge them into the SDK call (``client.chat.completions.create(
    model=..., messages=..., **fields)``).
    """
def parse_response(provider: _Provider, body: Any, *, seed: Optional[int] = None) -> Dict[str, Any]:
    """A whole (non-streamed) response of ``provider`` — bytes, str, a dict, or the SDK's own
    response object (anything with ``model_dump``) — normalised to
    ``{"segments": [...], "stop_reason": ...}``. Raises ``ProtocolError`` (not JSON, not the
    provider's shape, too large) or ``RemoteError`` (the provider reported an error). The ids
    Gemini leaves out come from the OS's entropy (``seed=`` fixes them, for tests).
    """
def assistant_message(provider: _Provider, response: Any) -> Any:
    """The provider's assistant turn to append to the conversation for a parsed response
    (``{"segments": ...}``), with the tool calls and reasoning echoed as the API wants them.
    """
def tool_results(provider: _Provider, results: Any, response: Any = None) -> Any:
    """The tool results in the provider's shape, to append after the assistant turn: a list of
    ``tool`` messages (OpenAI Chat), a list of ``function_call_output`` items (Responses), one
    ``user`` message of ``tool_result`` blocks (Anthropic), one ``user`` content of
    ``functionResponse`` parts (Gemini, which needs the ``response`` the calls came in).
    ``results`` are ``{"callId", "content", "isError"?}``.
    """

@final
class StreamParser:
    """Assembles a streamed response (server-sent events) of ``provider``: ``feed`` the raw bytes of
    the HTTP body as they come (any split), or ``push_data`` the data of one event (bytes, str, a
    dict, or an SDK event object); ``finish`` gives the normalised response.
    """
    def __new__(cls, provider: _Provider, *, seed: Optional[int] = None, max_bytes: Optional[int] = None, max_items: Optional[int] = None) -> StreamParser: ...
    def feed(self, data: bytes) -> None:
        """Raw bytes of the event stream."""
    def push_data(self, data: Any) -> None:
        """The data of one event: bytes, str, a dict or an SDK event object."""
    def finish(self) -> Dict[str, Any]:
        """Ends the stream: the normalised response ``{"segments": [...], "stop_reason": ...}``.
        The parser is closed afterwards.
        """

@final
class Toolbox:
    """The tool layer for many agents: what each may see (``RemoteBash`` only while its NPC sits at
    the desk), whether a call may run under the policy, and the approvals in between.

    ``Toolbox(policy=None, builtins=True)``: ``policy`` in the core's shape (``{"default":
    "allow", "rules": [...]}``; ``None`` allows everything); ``builtins`` registers ``RemoteBash`` and
    REXD's ``bash``, ``read``, ``write``, ``list``, ``glob``, ``stat``. Approval and call ids come
    from the OS's entropy (``seed=`` fixes them, for tests).
    """
    def __new__(cls, policy: Any = None, *, seed: Optional[int] = None, builtins: bool = True, config: Any = None) -> Toolbox: ...
    def register(self, spec: Any, visibility: Any = None) -> None:
        """Registers a tool ``{"name", "description", "input_schema"}``; ``visibility`` is ``"always"``
        or the core's shape (e.g. ``{"bound_npc": ...}``).
        """
    def set_context(self, agent: str, context: Any) -> None:
        """Sets what ``agent`` is doing (``{"bound_npc_id": ..., "target": ..., "cwd": ...}``); a change
        of its visible tools queues a ``ToolsChanged`` event.
        """
    def bind(self, agent: str, npc_id: str) -> None:
        """Binds ``agent`` to the desk of ``npc_id`` (its NPC sits down): ``RemoteBash`` appears."""
    def unbind(self, agent: str) -> None:
        """Unbinds ``agent`` (its NPC stood up): ``RemoteBash`` disappears."""
    def remove_agent(self, agent: str) -> bool:
        """Forgets ``agent`` (its NPC left the office); ``True`` if it was known. At most
        ``config["max_agents"]`` (1024) agents are remembered at once."""
    def visible_tools(self, agent: str) -> List[Dict[str, Any]]:
        """The tool specs ``agent`` may see now."""
    def tool_request(
        self,
        agent: str,
        provider: _Provider,
        *,
        choice: Any = None,
        keep_list: bool = False,
        parallel_tool_calls: Optional[bool] = None,
        strict: bool = False,
    ) -> Dict[str, Any]:
        """The fields to pass to ``provider``'s SDK for ``agent`` now (``tools=``, ``tool_choice=``, ...):
        ``client.chat.completions.create(model=..., messages=..., **toolbox.tool_request(agent,
        "openai_chat"))``. ``keep_list`` sends the full stable list restricted to the visible tools
        where the API can (cache-friendly).
        """
    def authorize(self, agent: str, call: Any, origin: str = "model") -> Dict[str, Any]:
        """Whether ``call`` (``{"id", "name", "args"}``) may run for ``agent``, changing nothing: the
        core's authorization (``{"kind": "allowed" | "needs_approval" | "denied" | "unknown",
        ...}``).
        """
    def check_call(self, now_ms: int, agent: str, call: Any, origin: str = "model") -> Union[Run, Refuse, Pending]:
        """What to do with ``call`` now: ``tools.Run()``, ``tools.Refuse(observation)`` (send it back
        as the call's error result) or ``tools.Pending(approval_id)`` (a human decides:
        ``ApprovalDecided`` follows).
        """
    def respond(self, now_ms: int, response: Any) -> Dict[str, Any]:
        """A human answered approval ``{"id", "approved", "remember"?, "reason"?}`` (``approved`` a bool;
        ``remember`` applies the same answer to such calls from now on); returns the settlement."""
    def cancel_approval(self, id: str) -> Dict[str, Any]:
        """Withdraws the waiting approval ``id``."""
    def pending_approvals(self) -> List[Dict[str, Any]]:
        """The waiting approvals."""
    def parse_slash(self, line: str, *, seed: Optional[int] = None) -> Dict[str, Any]:
        """Parses a slash command (``/bash ls -la``) into a call of a registered tool, with an id of
        its own (``seed=`` makes the id from that seed instead, for tests)."""
    def handle_timeout(self, now_ms: int) -> None:
        """The deadline of the last ``Timeout`` passed (approvals time out)."""
    def poll_output(self, now_ms: int) -> Any:
        """An event (``ToolsChanged``, ``ApprovalRequested``, ``ApprovalDecided``) or a ``Timeout``."""

@final
class ToolIndex:
    """A search index over tools: the best few for an intent (BM25, optionally blended with the
    host's scores or embeddings)."""

    def __new__(cls, tools: Sequence[Dict[str, Any]]) -> ToolIndex: ...
    def set_embedding(self, name: str, embedding: Sequence[float]) -> None:
        """Stores tool ``name``'s embedding for ``top_n(query_embedding=...)``. Every embedding of
        an index has the first one's dimension; another, a tool the index does not hold, no
        values or a value that is not finite raise ``LocalError`` (``invalid_value``), as does
        a ``query_embedding`` of another dimension.
        """
    def top_n(
        self,
        query: str,
        n: int = 5,
        *,
        scores: Optional[Dict[str, float]] = None,
        query_embedding: Optional[Sequence[float]] = None,
        lexical_weight: float = 0.5,
    ) -> List[Tuple[str, float]]:
        """The ``n`` best tools for ``query``, best first, as ``(name, score)``."""

def rexd_request(call: Dict[str, Any], session_id: str) -> Tuple[str, Any]:
    """The REXD ``(method, params)`` that runs a call of REXD's logical tools."""
