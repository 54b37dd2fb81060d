from typing import Any, Dict, List, Optional

from typing_extensions import final

__all__ = ['Client', 'Server']

@final
class Client:
    """The phone's end: ``start`` (with a stored token) or ``pair`` (with the code the desktop shows),
    then follow ``poll_output``: ``Connect`` (open the WebSocket, with the bearer token if any),
    ``Transmit`` (send the UTF-8 bytes as one text frame), ``Close``, events, ``Timeout``. Report the
    socket with ``connected``/``disconnected`` and every received text frame with ``handle_text``.

    ``Client(token=None, **config)``: ``config`` keys are the core's (``backoff_ms``, ...).
    """
    def __new__(cls, token: Optional[str] = None, **options: Any) -> Client: ...
    def start(self, now_ms: int) -> None:
        """Connects with the stored token."""
    def pair(self, now_ms: int, code: str) -> None:
        """Connects and pairs with the code the desktop shows."""
    def stop(self, now_ms: int) -> None:
        """Disconnects and stays offline."""
    def forget_token(self) -> None:
        """Forgets the stored token (pair again afterwards)."""
    def connected(self, now_ms: int) -> None:
        """The WebSocket opened."""
    def disconnected(self, now_ms: int, reason: Any = None) -> None:
        """The WebSocket closed or failed: ``"closed"``, ``"unauthorized"``, ``"server_timeout"`` or
        ``{"failed": "why"}``.
        """
    def handle_text(self, now_ms: int, text: str) -> None:
        """One text frame received."""
    def handle_timeout(self, now_ms: int) -> None:
        """The deadline of the last ``Timeout`` passed."""
    def respond_permission(self, now_ms: int, id: str, approved: bool, remember: bool = False) -> None:
        """Answers the permission request ``id``."""
    def send_command(self, now_ms: int, command: Any) -> None:
        """Sends an agent command (``{"action": "start", "task": ...}``)."""
    def send_message(self, now_ms: int, content: str) -> None:
        """Sends a chat message."""
    def poll_output(self, now_ms: int) -> Any:
        """``Connect``, ``Transmit`` (a text frame as UTF-8 bytes), ``Close``, an event or a ``Timeout``."""
    @property
    def connection_state(self) -> Any:
        """The connection state (``"idle"``, ``{"waiting": {"retry_at": ms}}``, ``"connecting"``,
        ``"authenticating"``, ``{"online": {"synced": bool}}``).
        """
    @property
    def token(self) -> Optional[str]:
        """The bearer token, once paired."""
    @property
    def pending_permissions(self) -> List[str]:
        """The ids of the permission requests that can still be answered, oldest first (past
        ``max_pending_permissions`` the oldest are dropped, counted in ``stats()["dropped"]``)."""
    def stats(self) -> Dict[str, int]:
        """The counters, as a dict."""
    def close(self) -> None:
        """Drops the engine; later calls raise ``ClosedError``."""

@final
class Server:
    """The desktop's end: one engine for every phone connection (``conn``, numbered by the host).
    ``open`` a connection when a WebSocket upgrade arrives (with its bearer token, if any) and
    follow its admission; feed every text frame to ``handle_text``; ``poll_output`` gives ``Send``
    (a text frame for one connection), ``CloseConnection``, events, ``Timeout``.

    ``Server(entropy=os.urandom(32), **config)``.
    """
    def __new__(cls, *, entropy: Optional[bytes] = None, **options: Any) -> Server: ...
    def add_token(self, token: str) -> None:
        """Accepts ``token`` as a bearer token (one issued earlier and stored by the host)."""
    def revoke_token(self, token: str) -> bool:
        """Revokes ``token``; its connections are closed."""
    def start_pairing(self, now_ms: int) -> str:
        """Shows a new pairing code (returned)."""
    def cancel_pairing(self) -> None:
        """Withdraws the pairing code."""
    def pairing_code(self, now_ms: int) -> Optional[str]:
        """The pairing code in force, if any."""
    def open(self, now_ms: int, conn: int, bearer: Optional[str] = None) -> Any:
        """A WebSocket upgrade on ``conn``: ``"authenticated"``, ``"awaiting_pairing"`` or
        ``{"refused": "bad_token" | "too_many_connections"}``.
        """
    def closed(self, now_ms: int, conn: int) -> None:
        """The WebSocket of ``conn`` closed."""
    def close_connection(self, now_ms: int, conn: int) -> None:
        """Closes ``conn`` from our side."""
    def handle_text(self, now_ms: int, conn: int, text: str) -> None:
        """One text frame from ``conn``."""
    def set_state(self, now_ms: int, state: Any) -> None:
        """The agent's state (``{"status": "Running", "data": {"task_id", "iteration"}}``, ...), synced to
        every phone.
        """
    def send_message(self, now_ms: int, message: Any) -> None:
        """A chat message to every phone (``{"role", "content", "timestamp"}``)."""
    def send_task_update(self, now_ms: int, update: Any) -> None:
        """A task update to every phone (``{"task_id", "iteration", "status"}``)."""
    def request_permission(self, now_ms: int, permission: Any) -> str:
        """Asks the phones to approve a tool call (``{"tool_name", "command", "description",
        "tier"}``); returns the request id (``PermissionAnswered`` or ``PermissionTimedOut`` follows).
        """
    def cancel_permission(self, now_ms: int, id: str) -> None:
        """Withdraws the permission request ``id``."""
    def handle_timeout(self, now_ms: int) -> None:
        """The deadline of the last ``Timeout`` passed."""
    def poll_output(self, now_ms: int) -> Any:
        """``Send`` (a text frame for ``conn``), ``CloseConnection``, an event or a ``Timeout``."""
    @property
    def connections(self) -> int:
        """Phones connected now."""
    def stats(self) -> Dict[str, int]:
        """The counters, as a dict."""
    def close(self) -> None:
        """Drops the engine; later calls raise ``ClosedError``."""
