from typing import Any, Dict, List, Optional, Tuple

from typing_extensions import final

__all__ = ['Gateway']

@final
class Gateway:
    """The gateway: answers the Commander's requests (``jobs.create``, ``jobs.start``, ``jobs.status``,
    ``jobs.stream``, approvals, ...) on the connections the host names, and takes the executor's
    reports (``transition``, ``review_ready``, ``complete``, ``fail``, ``log``, ``request_approval``).

    ``Gateway(tokens=["secret"], now_ms=0, entropy=os.urandom(32), **config)``: ``config`` keys are
    the core's ``Config`` (camelCase, e.g. ``maxJobs``); ``entropy`` (32 bytes) makes approval ids.
    """
    def __new__(cls, tokens: List[str], *, now_ms: int = 0, entropy: Optional[bytes] = None, **config: Any) -> Gateway: ...
    def handle_message(self, now_ms: int, conn: int, data: bytes) -> None:
        """A message arrived on connection ``conn`` (raises ``LocalError`` ``backpressure`` when the
        output queue is full: drain ``poll_output`` and feed it again).
        """
    def check_connection(self, token: Optional[str]) -> Optional[Tuple[int, int, str]]:
        """Before accepting a WebSocket upgrade that presents ``token`` (or none): ``None`` to accept
        it, or why to refuse it as ``(http_status, close_code, message)``: 401 for a token that
        is not accepted, 503 when ``maxConnections`` connections are authenticated already
        (``close_code`` is for a connection accepted before the refusal was known: 1008, 1013).
        """
    def authenticate_connection(self, conn: int, token: str) -> bool:
        """Authenticates ``conn`` once for all its requests (the WebSocket handshake's token)."""
    def close_connection(self, conn: int) -> None:
        """``conn`` closed: its streams end."""
    def transition(self, now_ms: int, job_id: str, to: str) -> None:
        """Moves job ``job_id`` to state ``to`` (``"RUNNING"``, ...) if the state machine allows it."""
    def review_ready(self, now_ms: int, job_id: str, artifacts: Any) -> None:
        """Execution finished: ``RUNNING → REVIEW_READY`` with the artifacts (``summary``, ``git``,
        ``diff``, ``checks``, ``commands``).
        """
    def complete(self, now_ms: int, job_id: str, artifacts: Any = None) -> None:
        """The job is done: ``→ COMPLETED``."""
    def fail(self, now_ms: int, job_id: str, error: Any) -> None:
        """The job failed: ``→ FAILED`` with the error body (``{"code", "message"}``)."""
    def roll_back(self, now_ms: int, job_id: str) -> None:
        """The job's changes were undone: ``→ ROLLED_BACK``."""
    def cancel(self, now_ms: int, job_id: str) -> None:
        """The gateway cancels the job: ``→ CANCELLED``."""
    def set_progress(self, job_id: str, step: Optional[str] = None, progress: Optional[float] = None) -> None:
        """What the job is doing (``step``, ``progress`` in 0..=1), for ``jobs.status``."""
    def log(self, job_id: str, level: str, msg: str) -> None:
        """A log line for the job's streams (``level`` ``"info"``, ``"warn"``, ``"error"``, ...)."""
    def request_approval(self, job_id: str, kind: str, requested: str, approval_id: Optional[str] = None) -> Dict[str, Any]:
        """The executor wants to run a sensitive step: ``{"approval_id", "status"}`` (pending until
        the Commander decides; ``ApprovalDecided`` follows).
        """
    def job_state(self, job_id: str) -> Optional[str]:
        """The job's state (``"RUNNING"``, ...), ``None`` for an unknown job."""
    def handle_timeout(self, now_ms: int) -> None:
        """The deadline of the last ``Timeout`` passed (jobs time out)."""
    def poll_output(self, now_ms: int, ts: Optional[str] = None) -> Any:
        """A ``Send`` (a message for one connection, stamped with ``ts``: RFC 3339 text, default now
        from the wall clock), an event (``JobCreated``, ``StateChanged``, ``ApprovalDecided``, ...) or
        a ``Timeout``.
        """
    def stats(self) -> Dict[str, Any]:
        """The counters, as a dict."""
    def close(self) -> None:
        """Drops the engine; later calls raise ``ClosedError``."""
