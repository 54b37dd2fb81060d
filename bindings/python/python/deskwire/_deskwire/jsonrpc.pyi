from typing import Any, Dict, List, Optional, Union

from typing_extensions import final

__all__ = ['Peer', 'parse_message', 'is_sidecar_error_code']

_Id = Union[int, str, None]

@final
class Peer:
    """One end of a JSON-RPC-style conversation: it makes calls (ids, deadlines from the
    per-method timeout policy, progress, cancellation) and answers the calls it receives.

    ``Peer("jsonrpc2")`` (REXD, strict JSON-RPC 2.0, batches), ``Peer("sidecar")`` (the sidecar
    IPC: ``{id, method, params}`` / ``{id, result | error | progress}``) or
    ``Peer("gateway", token=..., epoch_unix_ms=...)`` (the gateway RPC's Commander side: requests
    carry ``token`` in ``auth`` and a ``ts`` of ``epoch_unix_ms + now_ms``, ``jobs.event``
    envelopes come as ``Notification``; :class:`deskwire.aio.GatewayClient` drives it); ``framing="ndjson"`` or
    ``"content_length"``; keyword options are the core's ``PeerConfig`` keys (``max_message_bytes``,
    ``batch_limit``, ``max_pending``, ``max_incoming``, ``timeouts``, ``cancel_notification``,
    ``finished_memory``, ``max_queued``); missing ones take the dialect's defaults.

    ``timeouts`` defaults to the dialect's policy: the sidecar spec's per-method table for
    ``"sidecar"`` (``health.*`` 10 s, ``inference.embed`` 30 s, ``inference.complete``/``plan`` 120 s,
    ``training.start`` 300 s, ``model.*`` 60 s, else 30 s), 30 s for every method for
    ``"jsonrpc2"``. Give ``timeouts="sidecar"``, ``timeouts="default"`` (30 s for every method) or a
    dict ``{"rules": [{"prefix", "timeout_ms", "max_total_ms"}], "default_timeout_ms",
    "default_max_total_factor"}`` to choose another.
    """
    def __new__(cls, dialect: str = "jsonrpc2", *, framing: str = "ndjson", seed: int = 0, **options: Any) -> Peer: ...
    def call(self, now_ms: int, method: str, params: Any = None, user: int = 0) -> _Id:
        """Calls ``method`` with a generated id (returned); ``user`` comes back with the answer."""
    def call_with_id(self, now_ms: int, id: _Id, method: str, params: Any = None, user: int = 0) -> None:
        """Calls ``method`` with the id you choose."""
    def notify(self, now_ms: int, method: str, params: Any = None) -> None:
        """Sends a notification (no answer)."""
    def respond(self, now_ms: int, id: _Id, result: Any) -> None:
        """Answers the incoming call ``id`` with ``result``."""
    def respond_error(self, now_ms: int, id: _Id, code: Union[int, str], message: str, data: Any = None) -> None:
        """Answers the incoming call ``id`` with an error: ``code`` an int (JSON-RPC 2.0) or a
        ``SCREAMING_SNAKE`` name (sidecar).
        """
    def respond_method_not_found(self, now_ms: int, id: _Id, method: str) -> None:
        """Answers the incoming call ``id`` with the dialect's "method not found"."""
    def progress(self, now_ms: int, id: _Id, progress: Any) -> None:
        """Reports progress of the incoming call ``id`` (sidecar only)."""
    def cancel(self, now_ms: int, id: _Id) -> None:
        """Stops waiting for our call ``id`` (its late answer is dropped)."""
    def forget_incoming(self, id: _Id) -> None:
        """Forgets the incoming call ``id`` without answering it."""
    def is_pending(self, id: _Id) -> bool:
        """Whether our call ``id`` still waits for an answer."""
    def handle_bytes(self, now_ms: int, data: bytes) -> None:
        """Bytes read from the stream."""
    def handle_timeout(self, now_ms: int) -> None:
        """The deadline of the last ``Timeout`` passed."""
    def poll_output(self, now_ms: int) -> Any:
        """A ``Transmit`` (framing included), an event (``Request``, ``Notification``, ``Response``,
        ``Failed``, ``Progress``, ``Malformed``) or a ``Timeout``.
        """
    def stats(self) -> Dict[str, int]:
        """The counters, as a dict."""
    def config(self) -> Dict[str, Any]:
        """The configuration, as a dict."""
    def close(self) -> None:
        """Drops the engine; later calls raise ``ClosedError``."""

def parse_message(frame: bytes, batch_limit: int = 64) -> Union[Dict[str, Any], List[Dict[str, Any]]]:
    """Parses one JSON-RPC 2.0 frame as the REXD dialect reads it: a message dict (see
    ``Peer`` docs for its keys), or for a batch a list of them (invalid elements as
    ``{"kind": "invalid", "id", "error"}``). A frame that is not a message or a batch at all
    raises ``ProtocolError`` whose ``.id`` and ``.error`` are what a peer answers.
    """

def is_sidecar_error_code(code: str) -> bool:
    """Whether ``code`` is spelled as the sidecar spec requires of error codes
    (``SCREAMING_SNAKE_CASE``: ``[A-Z][A-Z0-9_]*``).
    """
