from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from typing_extensions import final

__all__ = ['escape', 'unescape', 'split', 'parse_frame', 'format_frame', 'parse_err_payload', 'remote_bash_args', 'remote_bash_failure', 'exit_marker', 'remote_bash_ending', 'Client', 'Server', 'Desk', 'Remote', 'MultiDesk', 'TRUNCATION_MARKER', 'TOOL_NAME', 'TOOL_DESCRIPTION', 'TOOL_INPUT_SCHEMA']

TRUNCATION_MARKER: str
TOOL_NAME: str
TOOL_DESCRIPTION: str
TOOL_INPUT_SCHEMA: str

def escape(text: str) -> str:
    """Escapes ``text`` for an OA1 payload (``\\\\``, ``\\n``, ``\\r``, ``\\t``, NUL as ``\\0``)."""
def unescape(escaped: bytes) -> bytes:
    """Decodes an escaped OA1 payload back to bytes (unknown escapes stay as they are)."""
def split(text: str, budget: int) -> List[str]:
    """Escapes ``text`` and cuts it into frame payloads of at most ``budget`` bytes each, never inside
    an escape pair or a UTF-8 sequence (the payloads the endpoints send, in order).
    """
def parse_frame(text: str) -> Optional[Dict[str, Any]]:
    """Parses the text of a ``PRIVMSG`` as an OA1 frame: a dict with ``type``, ``id``, ``seq``, ``more``,
    ``payload`` (still escaped), or ``None`` when the text is not a well-formed frame.
    """
def format_frame(kind: str, id: str, seq: int, more: bool, payload: str = "") -> str:
    """Formats an OA1 frame (``OA1 TYPE ID SEQ MORE PAYLOAD``); ``payload`` must already be escaped."""
def parse_err_payload(payload: str) -> Tuple[str, str]:
    """Reads an ``ERR`` payload ``code: message`` as ``(code, message)`` (code ``error`` when it has none)."""
def remote_bash_args(args: Union[str, Dict[str, Any]]) -> Tuple[str, Optional[int]]:
    """``RemoteBash`` arguments (``{"command": ..., "timeout_sec": ...}``) as ``(command,
    timeout_sec)``, in seconds like ``IrcDesk.remote_bash(timeout=)``; a ``LocalError`` with code
    ``invalid_arguments`` when they are not valid.
    """
def remote_bash_failure(code: str, message: str) -> str:
    """The ``RemoteBash`` tool result of a failed call: the
    ``{"ok": false, "error": code, "message": ...}`` JSON the model reads.
    """
def remote_bash_ending(text: str) -> Dict[str, Any]:
    """How the command behind a ``RemoteBash`` answer's text ended, from its last line:
    ``{"kind": "exited" | "signaled" | "cut_at_timeout" | "cut_short", "status": N}`` (plus
    ``"signal": "KILL"`` when signaled). ``status`` is what a shell over ssh would report: the
    exit code, 128 + the signal's number, 124 cut at the timeout, 255 cut short.
    """
def exit_marker(exit_code: Optional[int], signal: Optional[str] = None) -> Optional[str]:
    """The line a shell tool's output ends with when the command did not exit 0: ``[exit code: 2]``
    or ``[signal: KILL]`` (``RemoteBash`` and REXD's ``bash`` alike); ``None`` for exit 0 or when
    neither is known.
    """

@final
class Client:
    """The desk end of OA1 over IRC lines you read and write yourself (see ``Desk`` for an engine
    that also speaks IRC): ``request``, then feed every received line to ``handle_line`` and drain
    ``poll_output`` until it returns a ``Timeout``. ``handle_lines`` and ``drain`` do the same for many
    lines in one call each (a 128 KiB request is about 580 lines).

    ``Client("#desk", "desk", request_timeout_ms=5000)`` (request ids from the OS's entropy;
    ``seed=`` fixes them, for tests only): keyword options are the keys of
    the core's OA1 config (``allowed_sender``, ``max_frame_payload_bytes``, ``adaptive_payload``,
    ``max_message_bytes``, ``max_streams``, ``request_timeout_ms``, ``partial_timeout_ms``, ``pacing``
    as ``{"burst": n, "interval_ms": ms}``, ``max_line_bytes``, ``finished_memory``, ``flush_delay_ms``).

    ``text=False`` gives each whole message as the UTF-8 ``bytes`` it was reassembled into, without
    making a ``str`` of it: ``ResponseBytes`` for ``Response``, ``RequestBytes`` for ``Request``.
    """
    def __new__(cls, channel: str, nick: str, *, seed: Optional[int] = None, text: bool = True, **options: Any) -> Client: ...
    def request(self, now_ms: int, payload: Union[str, bytes], timeout_ms: Optional[int] = None) -> str:
        """Sends ``payload`` (a ``str``, or UTF-8 ``bytes``) as a request; returns its id. ``timeout_ms``
        overrides the configured request timeout.
        """
    def remote_bash(self, now_ms: int, command: Union[str, bytes], timeout: Optional[float] = None) -> str:
        """Starts a ``RemoteBash`` call: ``command`` runs on the remote, ``timeout`` (seconds, ``None``:
        the configured request timeout) starting when the lines may leave. Returns the request
        id whose ``Response`` or ``Failed`` ends the call. A ``timeout`` that is not a positive,
        finite number raises ``LocalError`` (``invalid_arguments``), as does an empty command
        or one with a NUL byte; a timeout too long for the engine to count is its longest.
        """
    def remote_bash_call(self, now_ms: int, args: Union[str, Dict[str, Any]]) -> str:
        """Starts a model's ``RemoteBash`` call from its arguments (a dict or JSON text,
        ``{"command": ..., "timeout_sec": ...}``); wrong arguments raise ``LocalError``
        (``invalid_arguments``). Returns the request id.
        """
    def cancel(self, now_ms: int, id: str, reason: str) -> None:
        """Cancels request ``id``: it fails no more, and ``CANCEL`` tells the remote to stop."""
    def set_held(self, held: bool) -> None:
        """Holds outgoing lines back (``True``) or lets them go (``False``), for a host whose own IRC
        client is not in the channel yet, or whose remote is away. Requests queue meanwhile; a
        request's timeout starts when its lines may leave, and one held longer than
        ``ready_timeout_ms`` fails ``not_ready`` with what ``set_hold_reason`` said.
        """
    def set_hold_reason(self, reason: str) -> None:
        """What held lines wait for, in words (``remote `rexd` in #desk``), for the message of a
        ``not_ready`` failure.
        """
    def handle_line(self, now_ms: int, line: bytes) -> None:
        """One IRC line as received (without CRLF)."""
    def handle_lines(self, now_ms: int, lines: Union[Iterable[bytes], bytes, bytearray]) -> None:
        """Every line of ``lines`` (an iterable of ``bytes``, each as received, without CRLF;
        or one ``bytes``/``bytearray`` of lines each ended by CRLF or LF, as ``drain_into``
        writes them) in one call: the same as ``handle_line`` for each, with one crossing
        into Rust. Each item is checked first, so a wrong type raises ``TypeError`` before
        any line is handled.
        """
    def handle_timeout(self, now_ms: int) -> None:
        """The deadline of the last ``Timeout`` passed."""
    def poll_output(self, now_ms: int) -> Any:
        """The next thing to do: a ``Transmit`` (one IRC line, without CRLF), an event
        (``Response``, ``Failed``) or a ``Timeout``.
        """
    def drain(self, now_ms: int) -> Tuple[List[bytes], List[Any], int]:
        """Drains ``poll_output`` in one call: ``(lines, events, deadline_ms)``, every transmit's line
        (without CRLF) in order, the events in order, and the deadline of the final ``Timeout``.
        The same as calling ``poll_output`` until it answers ``Timeout``.
        """
    def drain_into(
        self, now_ms: int, buffer: bytearray, max_bytes: Optional[int] = None
    ) -> Tuple[int, List[Any], int]:
        """``drain`` into one buffer: appends every line to ``buffer`` (a ``bytearray``), each
        ended by CRLF, without an object per line. Returns ``(appended, events,
        deadline_ms)``: the bytes appended, the events in order, the deadline of the
        final ``Timeout``. With ``max_bytes``, the buffer grows by at most that much; when
        lines that may go now did not fit, they stay queued and the deadline is
        ``now_ms``: call again with room.
        """
    @property
    def in_flight(self) -> int:
        """Requests in flight."""
    def stats(self) -> Dict[str, int]:
        """The counters, as a dict."""
    def close(self) -> None:
        """Drops the engine; later calls raise ``ClosedError``."""
    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""

@final
class Server:
    """The remote end of OA1 over IRC lines you read and write yourself (see ``Remote``): each
    ``Request`` event is answered with ``send`` + ``finish``, ``respond``, or ``fail``.

    ``Server("#desk", "deskbot", allowed_sender="desk")``; the keyword options are the same as
    ``Client``'s.

    ``text=False`` gives each whole message as the UTF-8 ``bytes`` it was reassembled into, without
    making a ``str`` of it: ``ResponseBytes`` for ``Response``, ``RequestBytes`` for ``Request``.
    """
    def __new__(cls, channel: str, nick: str, *, text: bool = True, **options: Any) -> Server: ...
    def send(self, now_ms: int, id: str, output: Union[str, bytes]) -> None:
        """Streams ``output`` (a ``str``, or UTF-8 ``bytes`` such as a process's output) as part of the
        answer to ``id`` (sent in frames as they fill).
        """
    def finish(self, now_ms: int, id: str) -> None:
        """Ends the answer to ``id``."""
    def respond(self, now_ms: int, id: str, text: Union[str, bytes]) -> None:
        """Answers ``id`` with ``text`` (a ``str``, or UTF-8 ``bytes``) in one go (``send`` + ``finish``)."""
    def fail(self, now_ms: int, id: str, code: str, message: str) -> None:
        """Answers ``id`` with ``ERR code: message`` (``code`` of ``[a-z_]+``)."""
    def handle_line(self, now_ms: int, line: bytes) -> None:
        """One IRC line as received (without CRLF)."""
    def handle_lines(self, now_ms: int, lines: Union[Iterable[bytes], bytes, bytearray]) -> None:
        """Every line of ``lines`` (an iterable of ``bytes``, each as received, without CRLF;
        or one ``bytes``/``bytearray`` of lines each ended by CRLF or LF, as ``drain_into``
        writes them) in one call: the same as ``handle_line`` for each, with one crossing
        into Rust. Each item is checked first, so a wrong type raises ``TypeError`` before
        any line is handled.
        """
    def handle_timeout(self, now_ms: int) -> None:
        """The deadline of the last ``Timeout`` passed."""
    def poll_output(self, now_ms: int) -> Any:
        """The next thing to do: a ``Transmit`` (one IRC line, without CRLF), an event
        (``Request``, ``Cancelled``) or a ``Timeout``.
        """
    def drain(self, now_ms: int) -> Tuple[List[bytes], List[Any], int]:
        """Drains ``poll_output`` in one call: ``(lines, events, deadline_ms)``, every transmit's line
        (without CRLF) in order, the events in order, and the deadline of the final ``Timeout``.
        The same as calling ``poll_output`` until it answers ``Timeout``.
        """
    def drain_into(
        self, now_ms: int, buffer: bytearray, max_bytes: Optional[int] = None
    ) -> Tuple[int, List[Any], int]:
        """``drain`` into one buffer: appends every line to ``buffer`` (a ``bytearray``), each
        ended by CRLF, without an object per line. Returns ``(appended, events,
        deadline_ms)``: the bytes appended, the events in order, the deadline of the
        final ``Timeout``. With ``max_bytes``, the buffer grows by at most that much; when
        lines that may go now did not fit, they stay queued and the deadline is
        ``now_ms``: call again with room.
        """
    @property
    def active(self) -> int:
        """Requests being answered."""
    def stats(self) -> Dict[str, int]:
        """The counters, as a dict."""
    def close(self) -> None:
        """Drops the engine; later calls raise ``ClosedError``."""
    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""

@final
class Desk:
    """The desk end of OA1 on one IRC connection: registration, ``PING``, ``JOIN`` and the OA1 client
    in one engine over raw socket bytes. Requests made before the channel is joined and the
    remote is there wait inside.

    ``Desk("desk", "#desk", now_ms=0, oa1={"allowed_sender": "rexd"},
    session={"password": "..."})``: ``session`` and ``oa1`` hold what differs from the defaults, in
    the shape of the core's ``ConnectionConfig``; ``oa1.allowed_sender`` (the remote's nick, a
    ``nick!user@host`` mask, or ``"*"`` for anyone) is required, and a bad nick or channel raises
    ``LocalError`` (``invalid_config``). Request ids come from the OS's entropy; ``seed=`` fixes
    them, for tests only.

    ``text=False`` gives each whole message as the UTF-8 ``bytes`` it was reassembled into, without
    making a ``str`` of it: ``ResponseBytes`` for ``Response``, ``RequestBytes`` for ``Request``.
    """
    def __new__(cls, nick: str, channel: str, *, seed: Optional[int] = None, now_ms: int = 0, text: bool = True, **options: Any) -> Desk: ...
    def request(self, now_ms: int, payload: Union[str, bytes], timeout_ms: Optional[int] = None) -> str:
        """Sends ``payload`` (a ``str``, or UTF-8 ``bytes``) as a request (queued until the channel is
        joined); returns its id.
        """
    def remote_bash(self, now_ms: int, command: Union[str, bytes], timeout: Optional[float] = None) -> str:
        """Starts a ``RemoteBash`` call: ``command`` runs on the remote, ``timeout`` (seconds, ``None``:
        the configured request timeout) starting when the lines may leave. Returns the request
        id whose ``Response`` or ``Failed`` ends the call. A ``timeout`` that is not a positive,
        finite number raises ``LocalError`` (``invalid_arguments``), as does an empty command
        or one with a NUL byte; a timeout too long for the engine to count is its longest.
        """
    def remote_bash_call(self, now_ms: int, args: Union[str, Dict[str, Any]]) -> str:
        """Starts a model's ``RemoteBash`` call from its arguments (a dict or JSON text,
        ``{"command": ..., "timeout_sec": ...}``); wrong arguments raise ``LocalError``
        (``invalid_arguments``). Returns the request id.
        """
    def cancel(self, now_ms: int, id: str, reason: str) -> None:
        """Cancels request ``id`` and tells the remote with ``CANCEL``."""
    @property
    def in_flight(self) -> int:
        """Requests in flight."""
    def waiting_for(self) -> Optional[str]:
        """What requests wait for before they can leave, in words (``remote `rexd` in #desk;
        members: deskbot``, ``joining #desk (refused: 473 Cannot join channel (+i))``), or ``None``
        when ready or closed. A host that gives up waiting says this.
        """
    def members(self) -> List[str]:
        """The other members of the channel, as the server wrote their nicks."""
    def tool_description(self) -> str:
        """The ``RemoteBash`` description for this link: the output budget it states follows the
        pacing in force (the server's own once in the channel). Give it to the model in place of
        ``TOOL_DESCRIPTION`` once the desk is ready.
        """
    def handle_bytes(self, now_ms: int, data: bytes) -> None:
        """Bytes read from the socket (partial lines wait for the rest)."""
    def handle_eof(self, now_ms: int) -> None:
        """The socket closed or failed."""
    def handle_timeout(self, now_ms: int) -> None:
        """The deadline of the last ``Timeout`` passed."""
    def quit(self, now_ms: int, reason: str = "bye") -> None:
        """Leaves the server with ``QUIT :reason``."""
    def poll_output(self, now_ms: int) -> Any:
        """The next thing to do: a ``Transmit`` (one IRC line, CRLF included), an event
        (``irc.Registered``, ``irc.Joined``, ..., ``oa1.Response``, ...) or a ``Timeout``.
        """
    def drain(self, now_ms: int) -> Tuple[bytes, List[Any], int]:
        """Drains ``poll_output`` in one call: ``(data, events, deadline_ms)``, every transmit
        concatenated into ``data`` (write it to the socket), the events in order, and the
        deadline of the final ``Timeout``. The same as calling ``poll_output`` until it
        answers ``Timeout``, with one crossing into Rust instead of one per line.
        """
    @property
    def state(self) -> str:
        """The connection's state as the core names it: ``"registering"``, ``"joining"``,
        ``"ready"``, ``"closed"``, ...; ``"closed"`` after ``close()`` too.
        """
    def stats(self) -> Dict[str, Dict[str, int]]:
        """The counters of both layers: ``{"irc": {...}, "oa1": {...}}``; after ``close()``,
        the last ones.
        """
    def close(self) -> None:
        """Drops the engine; later calls raise ``ClosedError`` (``state``, ``stats()`` and
        ``closed`` stay readable).
        """
    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""

@final
class Remote:
    """The remote end of OA1 on one IRC connection: each ``oa1.Request`` is answered with ``send`` +
    ``finish``, ``respond`` or ``fail``; ``oa1.Cancelled`` says to stop.

    ``Remote("rexd", "#desk", oa1={"allowed_sender": "desk"})``. ``allowed_sender`` (a nick or a
    ``nick!user@host`` mask) proves nothing: whoever takes the desk's nick once it quits, or copies
    its user name from the same host on a network that does not verify users, is served. When
    the requests run commands, share a secret (``oa1={"auth": ...}``) and log ``source(id)``.

    ``text=False`` gives each whole message as the UTF-8 ``bytes`` it was reassembled into, without
    making a ``str`` of it: ``ResponseBytes`` for ``Response``, ``RequestBytes`` for ``Request``.
    """
    def __new__(cls, nick: str, channel: str, *, now_ms: int = 0, text: bool = True, **options: Any) -> Remote: ...
    def send(self, now_ms: int, id: str, output: Union[str, bytes]) -> None:
        """Streams ``output`` (a ``str``, or UTF-8 ``bytes`` such as a process's output) as part of the
        answer to ``id``.
        """
    def finish(self, now_ms: int, id: str) -> None:
        """Ends the answer to ``id``."""
    def respond(self, now_ms: int, id: str, text: Union[str, bytes]) -> None:
        """Answers ``id`` with ``text`` (a ``str``, or UTF-8 ``bytes``) in one go."""
    def fail(self, now_ms: int, id: str, code: str, message: str) -> None:
        """Answers ``id`` with ``ERR code: message``."""
    @property
    def active(self) -> int:
        """Requests being answered."""
    def source(self, id: str) -> Optional[str]:
        """Who sent request ``id`` (being answered), as the server showed them:
        ``nick!user@host``, or ``None``. Log it: the nick alone proves nothing.
        """
    def handle_bytes(self, now_ms: int, data: bytes) -> None:
        """Bytes read from the socket (partial lines wait for the rest)."""
    def handle_eof(self, now_ms: int) -> None:
        """The socket closed or failed."""
    def handle_timeout(self, now_ms: int) -> None:
        """The deadline of the last ``Timeout`` passed."""
    def quit(self, now_ms: int, reason: str = "bye") -> None:
        """Leaves the server with ``QUIT :reason``."""
    def poll_output(self, now_ms: int) -> Any:
        """The next thing to do: a ``Transmit`` (one IRC line, CRLF included), an event
        (``irc.Registered``, ``irc.Joined``, ..., ``oa1.Response``, ...) or a ``Timeout``.
        """
    def drain(self, now_ms: int) -> Tuple[bytes, List[Any], int]:
        """Drains ``poll_output`` in one call: ``(data, events, deadline_ms)``, every transmit
        concatenated into ``data`` (write it to the socket), the events in order, and the
        deadline of the final ``Timeout``. The same as calling ``poll_output`` until it
        answers ``Timeout``, with one crossing into Rust instead of one per line.
        """
    @property
    def state(self) -> str:
        """The connection's state as the core names it: ``"registering"``, ``"joining"``,
        ``"ready"``, ``"closed"``, ...; ``"closed"`` after ``close()`` too.
        """
    def stats(self) -> Dict[str, Dict[str, int]]:
        """The counters of both layers: ``{"irc": {...}, "oa1": {...}}``; after ``close()``,
        the last ones.
        """
    def close(self) -> None:
        """Drops the engine; later calls raise ``ClosedError`` (``state``, ``stats()`` and
        ``closed`` stay readable).
        """
    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""

@final
class MultiDesk:
    """Many desks on one IRC connection, one per channel: each with its own remote, request ids,
    timeouts and counters, added and removed at run time. The channels share the connection's
    flood pacing, in turns, so one channel's long answer does not hold back another's short one.

    ``MultiDesk("npcs", seed=None, now_ms=0, chat=False, membership=False,
    oa1={"request_timeout_ms": 60000}, session={"password": "..."})``: ``oa1`` holds what every desk
    is made with (its ``channel`` and ``allowed_sender`` come from ``add_desk``), ``session`` the IRC
    login, in the shape of the core's ``ConnectionConfig``. A bad nick raises ``LocalError``
    (``invalid_config``).

    ``chat=True`` hands out every ``PRIVMSG``, ``NOTICE`` and ``ACTION`` of a desk channel that is not
    OA1 as ``ChatMessage``; ``membership=True`` every join, part, kick, quit, nick change and ``NAMES``
    list of a desk channel as ``MemberJoined``, ...; both in the order their lines came, at most
    1024 waiting (the oldest dropped, counted in ``chat_dropped``). ``text=False`` gives each whole
    answer as ``ResponseBytes``, its UTF-8 ``bytes``, without making a ``str`` of it.

    ``poll_output`` and ``drain`` give each event of a channel as ``ChannelEvent(channel, event)``
    (``channel`` ``None`` for the connection's own: registration, the end of the link).
    """
    def __new__(cls, nick: str, *, seed: Optional[int] = None, now_ms: int = 0, text: bool = True, chat: bool = False, membership: bool = False, **options: Any) -> MultiDesk: ...
    def add_desk(self, now_ms: int, channel: str, remote: str, **oa1: Any) -> None:
        """Adds a desk in ``channel`` whose remote is ``remote`` (a nick, a ``nick!user@host`` mask, or
        ``"*"``), with the connection's ``oa1`` settings and ``oa1`` overrides of its own (a secret,
        timeouts, limits); the channel is joined (after registration when not yet registered).
        Requests to it wait until the remote is in the channel. A channel carried already
        raises ``LocalError`` (``duplicate_channel``), a bad channel or remote ``LocalError``
        (``invalid_config``).
        """
    def remove_desk(self, now_ms: int, channel: str) -> bool:
        """Leaves ``channel`` and drops its desk: its requests fail ``disconnected`` (their events still
        come out). ``False`` when the connection has no such desk.
        """
    def channels(self) -> List[str]:
        """The desks' channels, as added, in the order they were."""
    def request(self, now_ms: int, channel: str, payload: Union[str, bytes], timeout_ms: Optional[int] = None) -> str:
        """Sends ``payload`` (a ``str``, or UTF-8 ``bytes``) to the remote of the desk in ``channel``
        (queued until it is there); returns the request id. ``UnknownChannelError`` for a channel
        the connection does not carry.
        """
    def remote_bash(self, now_ms: int, channel: str, command: Union[str, bytes], timeout: Optional[float] = None) -> str:
        """Starts a ``RemoteBash`` call on the remote of the desk in ``channel``: ``timeout`` in seconds
        (``None``: the configured request timeout). Returns the request id.
        """
    def remote_bash_call(self, now_ms: int, channel: str, args: Union[str, Dict[str, Any]]) -> str:
        """Starts a model's ``RemoteBash`` call on the desk in ``channel`` from its arguments (a dict
        or JSON text, ``{"command": ..., "timeout_sec": ...}``); wrong arguments raise
        ``LocalError`` (``invalid_arguments``). Returns the request id.
        """
    def cancel(self, now_ms: int, channel: str, id: str, reason: str) -> None:
        """Cancels request ``id`` of the desk in ``channel`` and tells its remote with ``CANCEL``."""
    def in_flight(self, channel: str) -> int:
        """Requests of the desk in ``channel`` in flight."""
    def members(self, channel: str) -> List[str]:
        """The other members of the desk's channel, as the server wrote their nicks."""
    def tool_description(self, channel: str) -> str:
        """The ``RemoteBash`` description for the desk in ``channel``, whose output budget follows the
        shared pacing.
        """
    def waiting_for(self, channel: str) -> Optional[str]:
        """What the desk's requests wait for before they can leave, in words (``remote `rexd` in
        #desk-1``), or ``None`` when it is ready.
        """
    def channel_state(self, channel: str) -> str:
        """Where the desk in ``channel`` stands: ``"registering"``, ``"joining"``, ``"waiting_for_peer"``
        (its remote is not in the channel), ``"ready"``, ``"closed"``, ...
        """
    def channel_stats(self, channel: str) -> Dict[str, int]:
        """The OA1 counters of the desk in ``channel`` (``requests``, ``responses``, ``frames_in``, ...)."""
    def irc_stats(self) -> Dict[str, int]:
        """The IRC session's counters (lines in and out, ...); after ``close()``, the last ones."""
    def pacing(self) -> Dict[str, Any]:
        """The flood pacing the desks share: the configured one, or the server's own once it has
        said what it is.
        """
    def send_text(self, channel: str, text: str, notice: bool = False) -> int:
        """Sends ``text`` to ``channel`` as chat (``NOTICE``s with ``notice``): cut at spaces, or at
        character boundaries, into lines that fit, never a line starting with ``OA1 ``, through
        the shared pacing in turn with the desks' OA1 lines, once the channel is joined. Returns
        the number of lines. Raises ``UnknownChannelError``, ``ReservedPrefixError`` (text starting
        with ``OA1 ``), ``EmptyTextError``, ``ForbiddenByteError`` (NUL, CR or LF), ``QueueFullError``
        (64 KiB wait for the channel already) or ``ClosedError``; nothing is sent then.
        """
    @property
    def chat_dropped(self) -> int:
        """Chat messages and membership changes dropped because they were not taken."""
    def handle_bytes(self, now_ms: int, data: bytes) -> None:
        """Bytes read from the socket (partial lines wait for the rest)."""
    def handle_eof(self, now_ms: int) -> None:
        """The socket closed or failed: the connection ends, and every desk with it."""
    def handle_timeout(self, now_ms: int) -> None:
        """The deadline of the last ``Timeout`` passed."""
    def quit(self, now_ms: int, reason: str = "bye") -> None:
        """Leaves the server with ``QUIT :reason``."""
    def poll_output(self, now_ms: int) -> Any:
        """The next thing to do: a ``Transmit`` (one IRC line, CRLF included), a ``ChannelEvent``, a
        ``ChatMessage``, a membership change (``MemberJoined``, ...), or a ``Timeout``.
        """
    def drain(self, now_ms: int) -> Tuple[bytes, List[Any], int]:
        """Drains ``poll_output`` in one call: ``(data, events, deadline_ms)``, every transmit
        concatenated into ``data`` (write it to the socket), the events in order, and the
        deadline of the final ``Timeout``.
        """
    @property
    def state(self) -> str:
        """The connection's state: ``"registering"``, ``"ready"`` once registered, ``"closed"`` (after
        ``close()`` too). Each desk has its own (``channel_state``).
        """
    def close(self) -> None:
        """Drops the engine; later calls raise ``ClosedError`` (``state``, ``irc_stats()``,
        ``channel_stats()`` of the desks then and ``closed`` stay readable).
        """
    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
