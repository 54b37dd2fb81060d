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
) -> Dict[str, Any]: ...
def parse_response(provider: _Provider, body: Any, *, seed: int = 0) -> Dict[str, Any]: ...
def assistant_message(provider: _Provider, response: Any) -> Any: ...
def tool_results(provider: _Provider, results: Any, response: Any = None) -> Any: ...

@final
class StreamParser:
    def __new__(cls, provider: _Provider, *, seed: int = 0, max_bytes: Optional[int] = None, max_items: Optional[int] = None) -> StreamParser: ...
    def feed(self, data: bytes) -> None: ...
    def push_data(self, data: Any) -> None: ...
    def finish(self) -> Dict[str, Any]: ...

@final
class Toolbox:
    def __new__(cls, policy: Any = None, *, seed: int = 0, builtins: bool = True, config: Any = None) -> Toolbox: ...
    def register(self, spec: Any, visibility: Any = None) -> None: ...
    def set_context(self, agent: str, context: Any) -> None: ...
    def bind(self, agent: str, npc_id: str) -> None: ...
    def unbind(self, agent: str) -> None: ...
    def visible_tools(self, agent: str) -> List[Dict[str, Any]]: ...
    def tool_request(
        self,
        agent: str,
        provider: _Provider,
        *,
        choice: Any = None,
        keep_list: bool = False,
        parallel_tool_calls: Optional[bool] = None,
        strict: bool = False,
    ) -> Dict[str, Any]: ...
    def authorize(self, agent: str, call: Any, origin: str = "model") -> Dict[str, Any]: ...
    def check_call(self, now_ms: int, agent: str, call: Any, origin: str = "model") -> Union[Run, Refuse, Pending]: ...
    def respond(self, now_ms: int, response: Any) -> Dict[str, Any]: ...
    def cancel_approval(self, id: str) -> Dict[str, Any]: ...
    def pending_approvals(self) -> List[Dict[str, Any]]: ...
    def parse_slash(self, line: str, *, seed: int = 0) -> Dict[str, Any]: ...
    def handle_timeout(self, now_ms: int) -> None: ...
    def poll_output(self, now_ms: int) -> Any: ...

@final
class ToolIndex:
    """A search index over tools: the best few for an intent (BM25, optionally blended with the
    host's scores or embeddings)."""

    def __new__(cls, tools: Sequence[Dict[str, Any]]) -> ToolIndex: ...
    def set_embedding(self, name: str, embedding: Sequence[float]) -> None:
        """Stores tool ``name``'s embedding for ``top_n(query_embedding=...)``."""
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
