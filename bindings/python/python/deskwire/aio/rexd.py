"""REXD over ``rexd --stdio``, started directly or through ``ssh`` with the targets of ``rex``,
or over a ``rexd --listen`` daemon's WebSocket (``https://`` / ``wss://`` targets, the
``websockets`` package): :class:`RexdClient`, processes (:class:`ExecOutput`,
:class:`ExecExit`) and terminals (:class:`Pty`, :class:`PtyOutput`, :class:`PtyExit`)."""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import errno
import importlib
import json
import logging
import os
import ssl
import sys
import time
from typing import (
    Any,
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Deque,
    Dict,
    List,
    Optional,
    Sequence,
    Union,
    cast,
)

from .. import jsonrpc, oa1, tools
from .._deskwire import rexd as _rexd
from .._errors import (
    ClosedError,
    ConnectFailedError,
    LocalError,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    TlsError,
)
from .pump import _duration, _keywords_checked, _millis, _Pump, _seconds, _without_secrets, _WsWriter, now_ms

__all__ = ["RexdClient", "ExecOutput", "ExecExit", "Pty", "PtyOutput", "PtyExit"]

log = logging.getLogger(__name__)  # under "deskwire.aio", as before the split


class ExecOutput:
    """A piece of a process's output."""

    __slots__ = ("stream", "data", "seq")
    __match_args__ = ("stream", "data")

    def __init__(self, stream: str, data: bytes, seq: int) -> None:
        self.stream = stream
        """``"stdout"`` or ``"stderr"``."""
        self.data = data
        """The bytes."""
        self.seq = seq
        """The daemon's sequence number."""

    def __repr__(self) -> str:
        return f"ExecOutput(stream={self.stream!r}, data={self.data!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ExecOutput)
            and (self.stream, self.data) == (other.stream, other.data)
        )

    __hash__ = None  # type: ignore[assignment]


class ExecExit:
    """The process ended."""

    __slots__ = ("exit_code", "signal", "timed_out", "duration_ms", "truncated")
    __match_args__ = ("exit_code", "signal")

    def __init__(
        self,
        exit_code: Optional[int],
        signal: Optional[str],
        timed_out: bool,
        duration_ms: int,
        truncated: bool = False,
    ) -> None:
        self.exit_code = exit_code
        """The exit status, ``None`` when a signal ended it."""
        self.signal = signal
        """The signal's name, when one ended it."""
        self.timed_out = timed_out
        """Whether the daemon killed it at its timeout."""
        self.duration_ms = duration_ms
        """How long it ran."""
        self.truncated = truncated
        """Whether its output was cut at the session's cap (``limits.max_output_bytes``, 1 MiB
        by default, or ``max_output_bytes=``): what came before the cut came, the rest did not."""

    def __repr__(self) -> str:
        return (
            f"ExecExit(exit_code={self.exit_code!r}, signal={self.signal!r}, "
            f"timed_out={self.timed_out!r}, duration_ms={self.duration_ms!r}"
            + (", truncated=True)" if self.truncated else ")")
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExecExit) and (
            self.exit_code,
            self.signal,
            self.timed_out,
            self.truncated,
        ) == (other.exit_code, other.signal, other.timed_out, other.truncated)

    __hash__ = None  # type: ignore[assignment]


class PtyOutput:
    """A piece of what a terminal program wrote."""

    __slots__ = ("data", "seq")
    __match_args__ = ("data",)

    def __init__(self, data: bytes, seq: int) -> None:
        self.data = data
        """The bytes, as the terminal gave them (echo, escape sequences, CRLF line ends)."""
        self.seq = seq
        """The daemon's sequence number (1, 2, ... per terminal)."""

    def __repr__(self) -> str:
        return f"PtyOutput(data={self.data!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PtyOutput) and self.data == other.data

    __hash__ = None  # type: ignore[assignment]


class PtyExit:
    """The terminal's program ended."""

    __slots__ = ("exit_code", "signal", "duration_ms")
    __match_args__ = ("exit_code", "signal")

    def __init__(self, exit_code: Optional[int], signal: Optional[str], duration_ms: int = 0) -> None:
        self.exit_code = exit_code
        """The exit status, ``None`` when a signal ended it."""
        self.signal = signal
        """The signal's name, when one ended it."""
        self.duration_ms = duration_ms
        """How long it ran."""

    def __repr__(self) -> str:
        return (
            f"PtyExit(exit_code={self.exit_code!r}, signal={self.signal!r}, "
            f"duration_ms={self.duration_ms!r})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PtyExit) and (self.exit_code, self.signal) == (
            other.exit_code,
            other.signal,
        )

    __hash__ = None  # type: ignore[assignment]


class _PtyInbox:
    """The events of one terminal not yet read, and their size: a terminal's output has no cap
    at the daemon, so the client bounds what it holds for a reader that does not read."""

    def __init__(self, limit: int) -> None:
        # None: the link ended or the output overflowed; an exception: a refused payload.
        self.queue: asyncio.Queue[Optional[Union[PtyOutput, PtyExit, Exception]]] = asyncio.Queue()
        self.buffered = 0
        self.limit = limit
        self.overflowed = False


class Pty:
    """An interactive program in a terminal on the REXD host (``pty.open``); make one with
    :meth:`RexdClient.pty`. Iterate it for :class:`PtyOutput` as it comes, then one
    :class:`PtyExit`; :meth:`write` types, :meth:`resize` resizes, :meth:`close` (or leaving
    ``async with``, on every way out) ends it. Cancelling a task while it iterates closes the
    terminal too."""

    def __init__(self, client: "RexdClient", pty_id: str, process_id: str, inbox: _PtyInbox) -> None:
        self._client = client
        self._inbox = inbox
        self._closed = False
        self.pty_id = pty_id
        """The daemon's id of the terminal."""
        self.process_id = process_id
        """The daemon's id of its process."""
        self.exit: Optional[PtyExit] = None
        """How the program ended, once :class:`PtyExit` was read."""

    async def write(self, data: Union[bytes, str]) -> None:
        """Types ``data`` (``pty.input``): bytes as they are, a str as UTF-8. ``b"\x03"`` is
        Ctrl-C, ``b"\x04"`` Ctrl-D at the start of a line. The bytes travel in base64 in one
        message, which a daemon takes up to 16 MiB: more than about 12 MiB raises
        :class:`deskwire.LocalError` (``too_large``) before anything is sent; write it in
        pieces."""
        if not isinstance(data, (bytes, bytearray, memoryview, str)):
            raise TypeError(f"data must be bytes or str, not {type(data).__name__}")
        self._check_open()
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        params = self._client._with_session(
            {
                "pty_id": self.pty_id,
                "data": base64.b64encode(raw).decode("ascii"),
                "encoding": "base64",
            }
        )
        # The daemon drops a line over its limit unanswered: the call would wait out its
        # timeout.
        if 4 * ((len(raw) + 2) // 3) + _REQUEST_ENVELOPE > _MAX_MESSAGE:
            size = _json_size(params) + _REQUEST_ENVELOPE
            if size > _MAX_MESSAGE:
                raise LocalError(
                    "too_large",
                    f"pty.input of {len(raw)} bytes would be a {size}-byte message in base64, "
                    f"more than the {_MAX_MESSAGE} a daemon takes; write it in pieces",
                )
        await self._client.call("pty.input", params)

    async def resize(self, cols: int, rows: int) -> None:
        """Resizes the terminal (``pty.resize``); the program gets ``SIGWINCH``."""
        for name, value in (("cols", cols), ("rows", rows)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if not 1 <= value <= 65535:
                raise LocalError("invalid_value", f"{name} must be 1..65535, not {value}")
        self._check_open()
        await self._client.call(
            "pty.resize",
            self._client._with_session({"pty_id": self.pty_id, "cols": cols, "rows": rows}),
        )

    async def close(self, kill_process: bool = True) -> None:
        """Closes the terminal (``pty.close``), ending its program unless ``kill_process`` is
        false. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._client._forget_pty(self.pty_id)
        if self._client._ended:
            return
        with contextlib.suppress(RemoteError):  # the program may have ended on its own
            await self._client.call(
                "pty.close",
                self._client._with_session({"pty_id": self.pty_id, "kill_process": kill_process}),
            )

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("closed", f"the terminal {self.pty_id} is closed")
        if self._client._ended:
            raise ClosedError("disconnected", "the REXD connection is closed")

    def _close_now(self) -> None:
        """Closes without waiting (a cancelled reader cannot await)."""
        if self._closed:
            return
        self._closed = True
        self._client._forget_pty(self.pty_id)
        if not self._client._ended:
            with contextlib.suppress(LocalError):
                self._client._peer.call(
                    now_ms(),
                    "pty.close",
                    self._client._with_session({"pty_id": self.pty_id, "kill_process": True}),
                )
            self._client._pump.kick()

    def __aiter__(self) -> "Pty":
        return self

    async def __anext__(self) -> Union[PtyOutput, PtyExit]:
        if self.exit is not None:
            raise StopAsyncIteration
        inbox = self._inbox
        try:
            event = await inbox.queue.get()
        except asyncio.CancelledError:
            self._close_now()
            raise
        if isinstance(event, Exception):
            inbox.queue.put_nowait(event)  # every later read ends the same way
            self._closed = True
            self._client._forget_pty(self.pty_id)
            raise event
        if event is None:
            inbox.queue.put_nowait(None)  # every later read ends the same way
            self._closed = True
            self._client._forget_pty(self.pty_id)
            if inbox.overflowed:
                raise LocalError(
                    "too_large",
                    f"the terminal's unread output passed {inbox.limit} bytes; it was closed",
                )
            raise self._client._closed_error()
        if isinstance(event, PtyOutput):
            inbox.buffered -= len(event.data)
            return event
        self.exit = event
        self._closed = True
        self._client._forget_pty(self.pty_id)
        return self.exit

    async def __aenter__(self) -> "Pty":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Pty(pty_id={self.pty_id!r}, process_id={self.process_id!r})"


def _fs_text(method: str, result: Any) -> str:
    """A REXD file operation's result as the text of a tool result (``rexd --mcp``'s words)."""
    if method == "fs.read" and isinstance(result, dict):
        return _decode(result, "content").decode("utf-8", "replace")
    if method == "fs.write" and isinstance(result, dict):
        return f"wrote {result.get('bytes_written')} bytes to {result.get('path')}"
    if method == "fs.list" and isinstance(result, dict):
        return "".join(
            f"{e.get('name')}{'/' if e.get('type') == 'dir' else ''}\n" for e in result.get("entries", [])
        )
    if method == "fs.glob" and isinstance(result, dict):
        return "".join(f"{m}\n" for m in result.get("matches", []))
    return json.dumps(result, indent=2, ensure_ascii=False)


def _decode(
    params: Dict[str, Any], key: str = "data", *, zstd: bool = False, limit: int = 0
) -> bytes:
    """The bytes a message carries in ``params[key]`` (or after its line, raw frames) as its
    ``encoding`` says. ``zstd`` (accepted only when the session ``zstd`` negotiated it) is
    inflated under ``limit`` (``MAX_EVENT_BYTES`` when 0), a frame that would pass it refused
    unexpanded: :class:`deskwire.ProtocolError` (``too_large`` or ``bad_payload``)."""
    encoding = params.get("encoding")
    if encoding == "zstd" and not zstd:
        raise ProtocolError("bad_payload", "zstd payload in a session that did not negotiate compression")
    raw = params.get(_RAW)
    if raw is not None:  # the bytes that followed the line (raw frames)
        if encoding == "zstd":  # one zstd frame of them
            return _rexd.inflate(raw, limit or MAX_EVENT_BYTES)
        if encoding != "raw":
            raise ProtocolError("raw_frame", f"raw bytes as {encoding!r}, which was not negotiated")
        return cast(bytes, raw)
    data = params.get(key) or ""
    if encoding == "base64":
        return base64.b64decode(data)
    if encoding == "zstd":
        return _rexd.decode(str(data), "zstd", limit or MAX_EVENT_BYTES)
    return str(data).encode("utf-8")


_RAW = "\0raw"
"""Where a message's raw bytes are put in its params or result (no JSON key can be this)."""

MAX_EVENT_BYTES = 16 * 1024 * 1024
"""The most bytes one output event may carry after its line (what one message may hold), and
the most one compressed event may inflate to."""

MAX_READ_PIECE = 8 * 1024 * 1024
"""The largest ``fs.read`` piece asked for (8 MiB, as ``rex``: 11 MiB as base64, under the
16 MiB line cap)."""

READ_AHEAD = 3
"""``fs.read`` pieces in flight at once in :meth:`RexdClient.read_chunks` (as ``rex read``)."""

MAX_READ_FILE = 256 * 1024 * 1024
"""What :meth:`RexdClient.read_file` reads at most unless told otherwise (``max_size``)."""


class _Framed:
    """The peer behind the raw-frame splitter (``docs/rexd-raw-frames.md``): what the link read
    goes through :class:`deskwire.rexd.RawFrames` first, so the bytes after a raw answer's or
    output event's line never reach the peer's NDJSON framing. Everything else is the peer's."""

    def __init__(self, peer: jsonrpc.Peer, frames: Any) -> None:
        self._peer = peer
        self._frames = frames

    def handle_bytes(self, now: int, data: bytes) -> None:
        try:
            lines = self._frames.feed(data)
        except ProtocolError as e:
            # The framing is lost: the link cannot be read on, as if it had ended.
            log.warning("rexd broke the raw framing: %s", e)
            raise ConnectionResetError(str(e)) from e
        self._peer.handle_bytes(now, lines)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._peer, name)


_MAX_MESSAGE = _rexd.MAX_MESSAGE_BYTES
"""The longest message a daemon takes (its NDJSON line, or WebSocket message)."""

_REQUEST_ENVELOPE = 512
"""Room a request's line takes besides its content (the method, the id, the other params)."""

_ZSTD = "zstd"
"""The codec offered at ``session.open`` (the only one REXD has)."""

_LINK_READ = 1 << 20
"""How much the client takes from a daemon's stdout at once, and the pipe buffer it asks for:
a file piece or an output event in a few reads rather than in 64 KiB ones (the pump's turn
costs more than a read)."""

_F_SETPIPE_SZ = 1031  # Linux's fcntl; Python's fcntl module names it from 3.10 only

_DIRECT_PIPE = sys.platform != "win32"
"""Whether the client reads a daemon's stdout itself (:class:`_PipeReader`); elsewhere (Windows'
proactor loop cannot watch a pipe) through asyncio's pipe transport (:class:`_WideReader`)."""


def _widen_pipe(fd: int) -> None:
    """Asks for a ``_LINK_READ`` pipe buffer (Linux; elsewhere, or past
    ``/proc/sys/fs/pipe-max-size``, the pipe stays as it is)."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", _F_SETPIPE_SZ), _LINK_READ)
    except (ImportError, OSError, ValueError):
        pass


def _set_once(ready: "asyncio.Future[None]") -> None:
    if not ready.done():
        ready.set_result(None)


class _PipeReader:
    """The pump's reader over a daemon's stdout pipe, read here rather than through asyncio's
    transport and StreamReader, which allocate and copy every read three times: each read goes
    into one reused ``_LINK_READ`` buffer and only the bytes read are copied out. Reading 10 MiB
    from ``cat`` took 23-25 ms of CPU the asyncio way and 9.4-9.7 ms this way."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        _widen_pipe(fd)
        self._fd: Optional[int] = fd
        self._buffer = bytearray(_LINK_READ)
        self._view = memoryview(self._buffer)
        self._ready: "Optional[asyncio.Future[None]]" = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    async def read(self, _n: int) -> bytes:
        while self._fd is not None:
            fd = self._fd
            try:
                n = os.readv(fd, [self._buffer])
            except BlockingIOError:
                self._loop = loop = asyncio.get_running_loop()
                self._ready = ready = loop.create_future()
                loop.add_reader(fd, _set_once, ready)
                try:
                    await ready
                finally:
                    if self._ready is ready:  # not closed meanwhile
                        self._ready = None
                        loop.remove_reader(fd)
                continue
            except OSError:
                n = 0  # the pipe broke: as its end
            if n == 0:
                self.close()
                break
            return bytes(self._view[:n])
        return b""

    def close(self) -> None:
        """Stops watching the pipe and closes it; a read waiting on it returns its end."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self._ready is not None and self._loop is not None:
            self._loop.remove_reader(fd)
            _set_once(self._ready)
            self._ready = None
        os.close(fd)


class _WideReader:
    """The pump's reader over a daemon's stdout through asyncio's pipe transport (Windows):
    whatever has come, up to ``_LINK_READ``."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self._stream = stream

    async def read(self, n: int) -> bytes:
        return await self._stream.read(max(n, _LINK_READ))

    def close(self) -> None:
        pass


class _Child:
    """A daemon started as a child (``rexd --stdio``, or ssh running it): the process, and the
    reader of its stdout."""

    def __init__(self, process: asyncio.subprocess.Process, reader: Union[_PipeReader, _WideReader]) -> None:
        self.process = process
        self.reader = reader


_NETWORK_SCHEMES = {"https": "wss", "wss": "wss", "http": "ws", "ws": "ws"}


def _ws_url(target: str) -> Optional[str]:
    """The ``/ws`` URL of a network target (``https://host:port`` ...), ``None`` for others."""
    scheme, sep, rest = target.partition("://")
    if not sep or scheme not in _NETWORK_SCHEMES:
        return None
    for suffix in ("/ws", "/"):
        if rest.endswith(suffix):
            rest = rest[: -len(suffix)]
            break
    if not rest or any(c in rest for c in "/@?#"):
        raise LocalError(
            "bad_target", f"{_without_secrets(target)!r}: give only host and port (https://host:7070)"
        )
    url = f"{_NETWORK_SCHEMES[scheme]}://{rest}/ws"
    if url.startswith("ws://") and not _is_loopback(url):
        raise LocalError(
            "bad_target",
            f"{_without_secrets(target)!r}: http:// and ws:// are for loopback only (127.0.0.1, ::1, localhost): "
            "the token would cross the network in clear; use https:// (wss://)",
        )
    return url


def _refused(keyword: str, path: Any, e: Exception) -> LocalError:
    """:class:`deskwire.LocalError` (``bad_setting``) for a file that cannot be used, naming it
    and the keyword that gave it."""
    if isinstance(e, OSError) and not isinstance(e, ssl.SSLError):
        reason = e.strerror or str(e)
    elif isinstance(e, UnicodeDecodeError):
        reason = "not UTF-8 text"  # not e's text: it quotes a byte of the file
    elif "KEY_VALUES_MISMATCH" in str(e):
        reason = "the key (client_key) does not belong to this certificate"
    elif "NO_CERTIFICATE_OR_CRL_FOUND" in str(e):
        reason = "no PEM certificate in it (a DER file? `openssl x509 -inform der -in FILE -out FILE.pem` converts it)"
    else:
        reason = str(e)
    return LocalError("bad_setting", f"{keyword} {path}: {reason}")


def _tls_context(ca_file: Optional[str], client_cert: Optional[str], client_key: Optional[str]) -> ssl.SSLContext:
    """The client's TLS context; a file that cannot be used raises :class:`deskwire.LocalError`
    (``bad_setting``) naming it and the keyword that gave it."""
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as e:
        raise _refused("ca_file", ca_file, e) from e
    if client_cert is not None:
        try:
            context.load_cert_chain(client_cert, client_key)
        except (OSError, ssl.SSLError) as e:
            raise _refused("client_cert", client_cert, e) from e
    return context


def _checked_token(value: str, where: str, empty: str) -> str:
    """A bearer token without the white space around it (a file's line end, a pasted space).
    One that is empty, or holds white space, a control character or non-ASCII inside, raises
    :class:`deskwire.LocalError` (``bad_setting``) naming ``where`` it came from and never its
    value: a message is logged, and the token is a secret."""
    token = value.strip()
    if not token:
        raise LocalError("bad_setting", f"{where}: {empty}")
    for i, c in enumerate(token):
        if not "!" <= c <= "~":
            raise LocalError(
                "bad_setting",
                f"{where}: the token holds white space, a control character or a non-ASCII "
                f"character (at character {i + 1}); a bearer token is one word of printable ASCII",
            )
    return token


def _bearer_token(token: Optional[str], token_file: Any, token_env: str) -> Optional[str]:
    """The token to send: ``token``, else the first line of ``token_file``, else
    ``$token_env`` (unset or empty: none), checked by :func:`_checked_token`. A token file
    others can read is used, as ``rex`` uses it, with a warning."""
    if token is not None:
        if not isinstance(token, str):
            raise TypeError(f"token must be a str, not {type(token).__name__}")
        return _checked_token(
            token, "token=", "empty; pass the daemon's token, or leave token= out for token_file= or $" + token_env
        )
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as f:
                mode = os.fstat(f.fileno()).st_mode
                line = f.readline()
        except (OSError, UnicodeDecodeError) as e:
            raise _refused("token_file", token_file, e) from None  # e's text could quote the file
        if sys.platform != "win32" and mode & 0o077:
            log.warning(
                "the token file %s is readable by group or others (mode %o); `chmod 600` it: "
                "whoever reads it can act as you on the daemon",
                token_file,
                mode & 0o777,
            )
        return _checked_token(
            line,
            f"token_file {token_file}",
            "its first line is empty (the file holds the token alone, on its first line)",
        )
    value = os.environ.get(token_env)
    if not value:
        return None
    return _checked_token(value, f"${token_env}", "only white space")


def _handshake_text(e: BaseException, token: Optional[str]) -> "tuple[str, bool]":
    """What a failed handshake's exception says, for our message, and whether it had to be
    cut: websockets puts a header it refuses in its text with the value, and the request's
    ``Authorization`` header holds the token, which must reach no message or traceback."""
    text = str(e) or type(e).__name__
    name = getattr(e, "name", None)
    if isinstance(name, str) and name.lower() in ("authorization", "proxy-authorization"):
        return f"invalid {name} header", True
    if token and token in text:
        return text.replace(token, "<the token>"), True
    return text, False


def _strings(name: str, value: Any, what: Optional[str] = None) -> Optional[List[str]]:
    """``value`` (``rexd_args``, ``workspace_roots``, an argv) as a list of str; a str or bytes
    there would be taken letter by letter, so it is a :class:`TypeError` saying ``what`` it must
    be (by default, a list of str) and what to pass."""
    what = what or f"{name} must be a list of str"
    if value is None:
        return None
    if isinstance(value, (str, bytes, bytearray)):
        hint = f": pass {name}={value.split()!r}" if isinstance(value, str) else ""
        raise TypeError(f"{what}, not {type(value).__name__}{hint}")
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{what}, not {type(value).__name__}") from None
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{what}; {name}[{i}] is {type(item).__name__}")
    return items


def _program(argv: Any) -> Dict[str, Any]:
    """A command's ``exec.start`` / ``pty.open`` params: a shell command string, or an argv of
    str (anything else is a :class:`TypeError` here, not a JSON complaint of the engine)."""
    if isinstance(argv, str):
        return {"command": argv, "shell": True}
    what = "argv must be a list of str (or one shell command str)"
    if argv is None:
        raise TypeError(f"{what}, not NoneType")
    return {"argv": _strings("argv", argv, what)}


def _json_size(value: Any) -> int:
    """The bytes ``value`` takes in a JSON line as the engine writes it (UTF-8, control
    characters escaped); 0 for a value JSON cannot hold (the engine says so when sent)."""
    try:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError):
        return 0


def _is_loopback(url: str) -> bool:
    """Whether a ``/ws`` URL names this machine (the rule is ``rex``'s, from the native
    module)."""
    host = url.split("://", 1)[1].rsplit("/", 1)[0]
    host = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return bool(_rexd.is_loopback_host(host.strip("[]")))


class _WsReader:
    """The pump's reader over a WebSocket: a text message is one JSON value and a binary
    message one raw frame whole (its line, ``\n``, then exactly ``raw_bytes`` bytes:
    ``docs/rexd-raw-frames.md``), both checked by ``frames`` (:class:`deskwire.rexd.RawFrames`);
    the bytes wait there, and the peer sees the line."""

    def __init__(self, ws: Any, closed: Any, frames: Any) -> None:
        self._ws = ws
        self._closed = closed
        self._frames = frames
        self.reason = ""

    async def read(self, _n: int) -> bytes:
        try:
            message = await self._ws.recv()
        except self._closed as e:
            rcvd = getattr(e, "rcvd", None)
            self.reason = (
                f"the daemon closed the connection ({rcvd.code}): {rcvd.reason}"
                if rcvd is not None
                else "the connection ended"
            )
            return b""
        try:
            if isinstance(message, str):
                return bytes(self._frames.feed_text(message.encode("utf-8")))
            return bytes(self._frames.feed_binary(message))
        except ProtocolError as e:
            # The framing is lost, as over a byte stream: the link cannot be read on.
            log.warning("rexd broke the raw framing: %s", e)
            self.reason = f"the daemon broke the raw framing: {e}"
            with contextlib.suppress(Exception):
                # 1002: a protocol error. A daemon that does not answer the close is cut after 1 s.
                await asyncio.wait_for(self._ws.close(1002, "raw framing broken"), 1)
            return b""


class RexdClient:
    """A REXD session over ``rexd --stdio`` (directly, or through ``ssh``), or over a
    ``rexd --listen`` daemon's WebSocket. Make one with :meth:`connect`; every call is a method
    of the REXD spec."""

    def __init__(
        self,
        child: Optional[_Child],
        peer: jsonrpc.Peer,
        ws: Any = None,
    ) -> None:
        self._process = child.process if child is not None else None
        self._link_reader: Union[_PipeReader, _WideReader, None] = None
        self._ws = ws
        self._ws_reader: Optional[_WsReader] = None
        self._peer = peer
        self._calls: Dict[Any, asyncio.Future[Any]] = {}
        self._exec: Dict[str, asyncio.Queue[Any]] = {}
        self._ptys: Dict[str, _PtyInbox] = {}
        # Output can come in the same read as pty.open's answer, before pty() has its inbox: it
        # is kept while an open is pending. Late output of a terminal closed here is dropped.
        self._pty_opening = 0
        self._pty_limit = 0
        self._ptys_closed: Deque[str] = collections.deque(maxlen=256)
        self._stderr = bytearray()
        self._ended = False
        # Why the link ended (the daemon's last stderr, or the WebSocket's close), for errors.
        self._end_reason = ""
        # Over a child's stdio (rexd --stdio, ssh): the raw-frame splitter, new for each link.
        self._frames: Any = None
        self.session: Dict[str, Any] = {}
        """The ``session.open`` result (``session_id``, ``capabilities``, ``limits``, ...)."""
        self._stderr_task: Optional[asyncio.Task[None]] = None
        # Resuming (resume=True): how to dial again (a WebSocket, or a new ssh / rexd process
        # bridged to the same agent), the last event seen.
        self._dial: Optional[Callable[[], Awaitable[Any]]] = None
        self._last_event = 0
        self._resuming: Optional[asyncio.Task[None]] = None
        self._closing = False
        if child is not None:
            self._attach_process(child)
        else:
            self._attach(ws)

    def _attach_process(self, child: _Child) -> None:
        """Runs the pump over the daemon's (or ssh's) stdio."""
        process = child.process
        assert process.stdin is not None
        self._process = process
        self._link_reader = child.reader
        self._frames = _rexd.RawFrames()
        if self.session.get("raw_output"):
            self._frames.allow_output(MAX_EVENT_BYTES)
        engine = cast(jsonrpc.Peer, _Framed(self._peer, self._frames))
        # The pump only calls read(n) on its reader, which both readers provide.
        reader = cast(asyncio.StreamReader, child.reader)
        self._pump = _Pump(engine, reader, process.stdin, self._event, self._end)
        self._stderr_task = asyncio.get_running_loop().create_task(self._read_stderr(process))

    def _attach(self, ws: Any) -> None:
        """Runs the pump over WebSocket ``ws``."""
        self._ws = ws
        # Raw frames come as binary messages, checked here whether or not they were offered:
        # one that was not asked for breaks the link as on a byte stream.
        self._frames = _rexd.RawFrames()
        if self.session.get("raw_output"):
            self._frames.allow_output(MAX_EVENT_BYTES)
        closed = importlib.import_module("websockets.exceptions").ConnectionClosed
        self._ws_reader = _WsReader(ws, closed, self._frames)
        # The pump only calls read(n) on its reader, which _WsReader provides.
        reader = cast(asyncio.StreamReader, self._ws_reader)
        self._pump = _Pump(self._peer, reader, _WsWriter(ws, closed), self._event, self._end)

    def _can_resume(self) -> bool:
        return self._dial is not None and bool(self.session.get("resume")) and not self._closing

    def _dial_failures(self) -> "tuple[type[BaseException], ...]":
        """What a re-dial may fail with that a later try may not: a refused or cut connection,
        our timeout (on Python 3.9 and 3.10 no OSError), a daemon that ended or answered with
        an error, and over a WebSocket a handshake it refused (an HTTP status or a hang-up)."""
        failures: "tuple[type[BaseException], ...]" = (
            OSError,
            asyncio.TimeoutError,
            ClosedError,
            RemoteError,
        )
        if self._ws is not None:
            failures += (importlib.import_module("websockets.exceptions").InvalidHandshake,)
        return failures

    async def _reconnect(self) -> None:
        """The link dropped: dial again and ``session.resume`` from the last event seen, after
        0.2, 0.5, 1, 2, 4 and 8 s; the streams of running commands go on, each event once."""
        try:
            for delay in (0.2, 0.5, 1, 2, 4, 8):
                await asyncio.sleep(delay)
                assert self._dial is not None
                try:
                    link = await self._dial()
                except self._dial_failures() as e:
                    # A handshake error's text may quote a header: its type (and any HTTP
                    # status) only, never the token.
                    said: object = e
                    if not isinstance(e, (OSError, ClosedError, RemoteError)):
                        status = getattr(getattr(e, "response", None), "status_code", None)
                        said = type(e).__name__ + (f" (HTTP {status})" if status else "")
                    log.debug("resume: cannot reconnect yet: %s", said)
                    continue
                self._peer = jsonrpc.Peer("jsonrpc2", seed=time.time_ns() & 0xFFFFFFFF)
                if isinstance(link, _Child):
                    await self._reap(self._process)
                    self._attach_process(link)
                else:
                    self._attach(link)
                self._ended = False
                try:
                    await self.call(
                        "session.resume",
                        {
                            "session_id": self.session_id,
                            "resume_secret": self.session["resume"]["resume_secret"],
                            "last_seq": self._last_event,
                        },
                    )
                    return
                except ClosedError:
                    continue  # the new link dropped too
                except RemoteError as e:
                    # The session is gone (its grace passed) or events were lost: no retry helps.
                    log.warning("resume failed: %s", e)
                    break
        finally:
            self._resuming = None
        self._dial = None
        self._end()

    @classmethod
    @_keywords_checked
    async def connect(
        cls,
        target: Optional[str] = "local",
        *,
        targets_file: Optional[str] = None,
        rexd: Optional[str] = None,
        rexd_args: Optional[Sequence[str]] = None,
        client_name: str = "deskwire-python",
        workspace_roots: Optional[Sequence[str]] = None,
        timeout: float = 30,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        token_env: str = "REXD_TOKEN",
        ca_file: Optional[str] = None,
        client_cert: Optional[str] = None,
        client_key: Optional[str] = None,
        resume: bool = False,
        raw_frames: bool = True,
        compression: Optional[bool] = None,
    ) -> "RexdClient":
        """Starts the daemon for ``target`` as ``rex`` does (``"local"``, a name from the
        targets file, an ``ssh://user@host[:port]`` URL, or ``None`` for the file's current
        target) and opens a session. ``rexd`` overrides the daemon's path and ``rexd_args`` its
        extra arguments, a list of str (``["--root", "/srv/app"]``, ``["--allow-shell"]`` for
        REXD's ``bash`` tool and shell command strings). ``timeout`` (seconds) bounds the
        connection and the session's opening: a timeout that is not a positive number raises
        :class:`deskwire.LocalError` (``invalid_value``; :class:`TypeError` for a non-number)
        before anything starts, and no session in time :class:`deskwire.RequestTimeout`.

        ``"local"`` runs ``rexd`` from ``PATH`` (on an ssh target, the remote ``PATH``): the
        static binary of the release's ``rexd-VERSION-TARGET.tar.gz`` (or its ``.deb``), or
        from the source ``cargo install --path rexd``. Without it (or with a ``rexd=`` that is
        no executable program), :class:`deskwire.LocalError` (``not_found``) says so. When ssh
        or the daemon ends before
        the session opens (a refused port, a host name that does not resolve, a key the host
        does not take, no ``rexd`` on the host), :class:`deskwire.ConnectFailedError` (a
        :class:`ConnectionError` too) carries ssh's own words.

        ``https://host:port`` (or ``wss://``; ``http://`` / ``ws://`` for loopback only) connects
        to a ``rexd --listen`` daemon's ``/ws`` with the ``websockets`` package. The bearer token
        is ``token``, else the first line of ``token_file``, else ``$REXD_TOKEN`` (``token_env``
        names another variable), without the white space around it; one that is empty or holds
        white space or control characters inside raises :class:`deskwire.LocalError`
        (``bad_setting``) naming where it came from; no message ever holds the token. A token
        file readable by group or others is used, with a warning logged (``chmod 600`` it).
        ``ca_file`` trusts a private CA for the daemon's certificate,
        ``client_cert`` and ``client_key`` answer a daemon that asks for one (mTLS); a file that
        cannot be used (``token_file`` too) raises :class:`deskwire.LocalError`
        (``bad_setting``) naming it. A refused
        token raises :class:`deskwire.RemoteError` (``unauthorized``; ``forbidden`` for a token of
        another scope), a daemon that is not there :class:`deskwire.ConnectFailedError` (a
        :class:`ConnectionError` too) naming the host and the port, and a TLS handshake that
        fails (a certificate nobody vouches for, a name it does not list, a client certificate
        the daemon refuses, a plain-text port) :class:`deskwire.TlsError`, a
        :class:`deskwire.ConnectFailedError` too, saying which.

        With ``resume=True`` the session is resumable: when the link drops (the ssh connection
        killed, the WebSocket cut), the client dials again after 0.2, 0.5, 1, 2, 4 and 8 s and
        resumes by itself, and running commands' output goes on, each event once (calls waiting
        for an answer at that moment raise :class:`deskwire.ClosedError`). Over ssh and locally
        the daemon runs as ``rexd --stdio --resumable``, a bridge to the user's rexd agent,
        which keeps the session while no link is there (``rexd``'s ``--resume-grace-ms``).

        Over ``rexd --stdio`` (locally or through ssh) the client offers raw frames
        (``docs/rexd-raw-frames.md``): file bytes and command output come after their JSON
        lines as they are, not escaped or in base64, and no more than each call asked for is
        taken; a daemon that does not know them answers as before. To a network target they
        come as binary WebSocket messages, one raw frame each. ``raw_frames=False`` does not
        offer them (as ``rex --no-raw-frames``).

        Over ssh and to a network target on another machine the client also offers zstd
        compression (``docs/rexd-compression.md``): when the daemon takes it, output and file
        pieces that shrink travel as zstd frames (after their lines with raw frames, else in base64),
        inflated here under the same bounds as ``rex`` (no more than a read piece asked for,
        16 MiB for an output event, an 8 MiB window; a frame past them raises
        :class:`deskwire.ProtocolError`, unexpanded). To a ``local`` daemon, or a network target
        on loopback (``127.0.0.1``, ``::1``, ``localhost``), it is not offered unless
        ``compression=True``: on the same machine it costs both sides CPU and saves nothing.
        ``compression=False`` never offers it (``rex`` offers it only with ``--compress``)."""
        # Checked before anything starts: a bad one would fail half-way, a process started.
        wait = _seconds(timeout)
        rexd_args = _strings("rexd_args", rexd_args)
        workspace_roots = _strings("workspace_roots", workspace_roots)
        url = _ws_url(target) if isinstance(target, str) else None
        if url is not None:
            return await cls._connect_ws(
                url,
                client_name=client_name,
                workspace_roots=workspace_roots,
                timeout=wait,
                token=token,
                token_file=token_file,
                token_env=token_env,
                ca_file=ca_file,
                client_cert=client_cert,
                client_key=client_key,
                resume=resume,
                compression=compression or (compression is None and not _is_loopback(url)),
                raw_frames=raw_frames,
            )
        spec = _rexd.resolve_target(
            target,
            targets_file=targets_file,
            rexd=rexd,
            rexd_args=rexd_args,
            resume=resume,
        )

        async def spawn() -> _Child:
            if not _DIRECT_PIPE:
                process = await asyncio.create_subprocess_exec(
                    *spec["argv"],
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=bool(spec["local"]),
                    limit=_LINK_READ,
                )
                assert process.stdout is not None
                return _Child(process, _WideReader(process.stdout))
            # The daemon's stdout is a pipe this side reads itself (_PipeReader).
            read_end, write_end = os.pipe()
            try:
                process = await asyncio.create_subprocess_exec(
                    *spec["argv"],
                    stdin=asyncio.subprocess.PIPE,
                    stdout=write_end,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=bool(spec["local"]),
                )
            except BaseException:
                os.close(read_end)
                raise
            finally:
                os.close(write_end)
            return _Child(process, _PipeReader(read_end))

        try:
            child = await spawn()
        except FileNotFoundError as e:
            raise LocalError(
                "not_found",
                f"cannot start {spec['argv'][0]}: {e.strerror}; put rexd on PATH or pass rexd= "
                f"its path: {spec['rexd_install']}",
            ) from e
        except OSError as e:
            # A file that is there but no program (rexd="/etc/passwd", a directory): no rexd
            # at that path either.
            if not isinstance(e, PermissionError) and e.errno != errno.ENOEXEC:
                raise
            raise LocalError(
                "not_found",
                f"cannot start {spec['argv'][0]}: {e.strerror}: not an executable program; pass "
                f"rexd= the path of the rexd binary: {spec['rexd_install']}",
            ) from e
        peer = jsonrpc.Peer("jsonrpc2", seed=time.time_ns() & 0xFFFFFFFF)
        client = cls(child, peer)
        # Raw frames: file bytes and command output after their lines, not in JSON strings.
        params: Dict[str, Any] = {"client_name": client_name}
        if raw_frames:
            params.update(raw_frames=True, raw_output=True)
        if compression or (compression is None and not spec["local"]):
            params["compression"] = [_ZSTD]
        roots = list(workspace_roots) if workspace_roots is not None else spec["workspace_roots"]
        if roots:
            params["workspace_roots"] = roots
        if resume:
            params["resumable"] = True
            client._dial = spawn
        try:
            await client._open_session(params, wait, f"no REXD session with {target}: no answer to session.open")
        except ClosedError as e:
            if e.code != "disconnected":
                raise
            # ssh (or rexd) ended before the session opened: ssh's own words say why (a refused
            # port, a name that does not resolve, a key not taken, no rexd on the host's PATH).
            raise ConnectFailedError("connect_failed", f"no REXD session with {target}: {e.message}") from e
        return client

    @classmethod
    async def _connect_ws(
        cls,
        url: str,
        *,
        client_name: str,
        workspace_roots: Optional[Sequence[str]],
        timeout: Optional[float],
        token: Optional[str],
        token_file: Optional[str],
        token_env: str,
        ca_file: Optional[str],
        client_cert: Optional[str],
        client_key: Optional[str],
        resume: bool = False,
        compression: bool = True,
        raw_frames: bool = True,
    ) -> "RexdClient":
        try:
            ws_client = importlib.import_module("websockets.asyncio.client")
            ws_errors = importlib.import_module("websockets.exceptions")
        except ImportError as e:
            raise LocalError(
                "missing_dependency",
                "network targets need the websockets package: pip install 'deskwire[mobile]'",
            ) from e
        token = _bearer_token(token, token_file, token_env)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        context: Optional[ssl.SSLContext] = None
        if url.startswith("wss://"):
            context = _tls_context(ca_file, client_cert, client_key)

        async def dial() -> Any:
            # open_timeout=None: ``timeout`` bounds the whole handshake, not websockets' 10 s.
            return await asyncio.wait_for(
                ws_client.connect(
                    url, additional_headers=headers, ssl=context, max_size=None, open_timeout=None
                ),
                timeout,
            )

        where = url.split("://", 1)[1].rsplit("/", 1)[0]

        try:
            ws = await dial()
        except ws_errors.InvalidStatus as e:
            status = e.response.status_code
            if status == 401:
                raise RemoteError(
                    "unauthorized",
                    f"{url} refused the credentials (401): pass token=, token_file= or set "
                    f"${token_env}",
                ) from e
            if status == 403:
                raise RemoteError(
                    "forbidden",
                    f"{url} refused the token (403): it is known but not for this (a metrics "
                    "token reads /metrics only); use a token of the default scope",
                ) from e
            raise ConnectFailedError(
                "connect_failed", f"{url} answered HTTP {status}: not a rexd --listen /ws there?"
            ) from e
        except ws_errors.InvalidHandshake as e:
            # With TLS 1.3 a refused client certificate shows only after the handshake: the
            # daemon hangs up instead of answering. Without TLS, the likely cause is a TLS port.
            # Never a header's value (the token): nor in the chained traceback when it had one.
            said, cut = _handshake_text(e, token)
            cause = None if cut else e
            if url.startswith("wss://"):
                raise TlsError(
                    "tls_failed",
                    f"{url} hung up during the handshake ({said}): a client certificate it does not "
                    "accept, or not a rexd --listen",
                ) from cause
            raise ConnectFailedError(
                "connect_failed", f"{url} hung up during the handshake ({said}): a TLS port? use https:// for it"
            ) from cause
        except ssl.SSLCertVerificationError as e:
            mismatch = any(m in str(e.verify_message) for m in ("Hostname mismatch", "IP address mismatch"))
            hint = "connect by a name the certificate lists" if mismatch else "give the server's CA with ca_file="
            raise TlsError(
                "tls_failed", f"TLS with {url} failed: certificate verify failed: {e.verify_message} ({hint})"
            ) from e
        except ssl.SSLError as e:
            raise TlsError(
                "tls_failed", f"TLS with {url} failed: {e.reason or e} (a plain-text port? use http:// for it, on loopback)"
            ) from e
        except (asyncio.TimeoutError, OSError) as e:
            # A refused or unreachable port: a ConnectionError too, as IrcDesk.connect's. Our
            # timeout (from Python 3.11 an OSError, with no errno and no text) and an error
            # without either (a reset during the TLS handshake) are said in words.
            import socket  # here: the one use in this module

            code = getattr(e, "errno", None)
            if isinstance(e, socket.gaierror):
                # The resolver's own words ("Name or service not known"): its codes are no
                # errnos (os.strerror(-2) is "Unknown error -2").
                reason = e.strerror or str(e)
            elif code:
                reason = os.strerror(code)
            elif isinstance(e, asyncio.TimeoutError) and timeout is not None:
                reason = (
                    f"no answer to the TLS or WebSocket handshake within {_duration(timeout)} (a "
                    "port that accepts and does not answer: not a rexd --listen, or a firewall "
                    "holding it)"
                )
            else:
                reason = str(e) or (
                    f"the connection ended during the handshake ({type(e).__name__}): a port "
                    "that hangs up at once, not a rexd --listen"
                )
            raise ConnectFailedError(
                "connect_failed", f"connect to {where} failed: {reason} ({url})"
            ) from e
        peer = jsonrpc.Peer("jsonrpc2", seed=time.time_ns() & 0xFFFFFFFF)
        client = cls(None, peer, ws=ws)
        params: Dict[str, Any] = {"client_name": client_name}
        if raw_frames:
            params.update(raw_frames=True, raw_output=True)
        if compression:
            params["compression"] = [_ZSTD]
        if workspace_roots:
            params["workspace_roots"] = list(workspace_roots)
        if resume:
            params["resumable"] = True
            client._dial = dial
        await client._open_session(params, timeout, f"{url} did not answer session.open")
        return client

    async def _open_session(self, params: Dict[str, Any], timeout: Optional[float], no_answer: str) -> None:
        """``session.open`` within ``timeout``: the session, and raw output allowed where it
        was granted. Any failure closes the client; no answer in time raises
        :class:`deskwire.RequestTimeout` saying ``no_answer`` and how long it waited."""
        try:
            self.session = await asyncio.wait_for(self.call("session.open", params), timeout)
        except asyncio.TimeoutError as e:
            await self.close()
            if isinstance(e, RequestTimeout) or timeout is None:
                raise
            raise RequestTimeout("timeout", f"{no_answer} within {_duration(timeout)}") from None
        except BaseException:
            await self.close()
            raise
        if self.session.get("raw_output"):
            self._frames.allow_output(MAX_EVENT_BYTES)

    @property
    def session_id(self) -> str:
        """The session's id."""
        return str(self.session["session_id"])

    @property
    def _zstd(self) -> bool:
        """The session negotiated zstd payloads."""
        return self.session.get("compression") == _ZSTD

    async def _read_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while True:
            line = await process.stderr.readline()
            if not line:
                return
            if len(self._stderr) < 64 * 1024:
                self._stderr += line
            log.debug("rexd: %s", line.decode("utf-8", "replace").rstrip())

    def _event(self, event: Any) -> None:
        if (
            self._frames is not None
            and isinstance(event, jsonrpc.Notification)
            and event.method in ("exec.stdout", "exec.stderr")
            and isinstance(event.params, dict)
            and "raw_bytes" in event.params
        ):
            # Its bytes, taken in the order the lines came (even for an event dropped below).
            raw = self._frames.take_output()
            if raw is None:
                log.warning("rexd announced raw bytes that did not come: %s", event.method)
                return
            event.params[_RAW] = raw
        if isinstance(event, jsonrpc.Notification) and isinstance(event.params, dict):
            # A resumed session sends again what may have been seen: each event once.
            seq = event.params.get("event_seq")
            if isinstance(seq, int):
                if seq <= self._last_event:
                    return
                self._last_event = seq
        if isinstance(event, (jsonrpc.Response, jsonrpc.Failed)):
            future = self._calls.pop(event.id, None)
            if future is not None and not future.done():
                future.set_result(event)
        elif isinstance(event, jsonrpc.Notification):
            params = event.params if isinstance(event.params, dict) else {}
            process_id = params.get("process_id")
            if isinstance(process_id, str) and event.method.startswith("exec."):
                # Output may come in the same read as exec.start's answer, before exec() has
                # its queue: keep it for the process. (rexd bounds a process's output.)
                self._exec.setdefault(process_id, asyncio.Queue()).put_nowait(event)
            pty_id = params.get("pty_id")
            if isinstance(pty_id, str) and event.method in ("pty.output", "pty.exit"):
                self._pty_event(pty_id, event.method, params)
        elif isinstance(event, jsonrpc.Malformed):
            log.warning("rexd sent something unreadable: %s", event.reason)

    def _forget_pty(self, pty_id: str) -> None:
        self._ptys.pop(pty_id, None)
        self._ptys_closed.append(pty_id)

    def _pty_event(self, pty_id: str, method: str, params: Dict[str, Any]) -> None:
        inbox = self._ptys.get(pty_id)
        if inbox is None and self._pty_opening and pty_id not in self._ptys_closed:
            inbox = self._ptys[pty_id] = _PtyInbox(self._pty_limit)
        if inbox is None or inbox.overflowed:
            return  # a terminal closed on our side, or not ours
        if method == "pty.exit":
            code = params.get("exit_code")
            signal = params.get("signal")
            inbox.queue.put_nowait(
                PtyExit(
                    code if isinstance(code, int) else None,
                    signal if isinstance(signal, str) else None,
                    int(params.get("duration_ms") or 0),
                )
            )
            return
        try:
            data = _decode(params, zstd=self._zstd)
        except ProtocolError as e:
            # A payload refused unexpanded: the reader hears why, and the terminal is closed.
            inbox.overflowed = True
            inbox.queue.put_nowait(e)
            self._close_pty_now(pty_id)
            return
        inbox.buffered += len(data)
        if inbox.buffered > inbox.limit:
            # Nobody reads it: close the terminal rather than hold its output without bound.
            inbox.overflowed = True
            inbox.queue.put_nowait(None)
            self._close_pty_now(pty_id)
            return
        inbox.queue.put_nowait(PtyOutput(data, int(params.get("seq") or 0)))

    def _close_pty_now(self, pty_id: str) -> None:
        with contextlib.suppress(LocalError):
            self._peer.call(
                now_ms(),
                "pty.close",
                self._with_session({"pty_id": pty_id, "kill_process": True}),
            )
        self._pump.kick()

    def _end(self) -> None:
        self._ended = True
        if self._can_resume():
            # Answers in flight are lost with the link; the commands' events are not.
            for future in self._calls.values():
                if not future.done():
                    future.set_exception(
                        ClosedError("disconnected", "the link dropped before the answer came")
                    )
            self._calls.clear()
            if self._resuming is None:
                self._resuming = asyncio.get_running_loop().create_task(self._reconnect())
            return
        reason = self._stderr.decode("utf-8", "replace").strip()[-2000:]
        if self._ws_reader is not None:
            reason = self._ws_reader.reason
        self._end_reason = reason
        for future in self._calls.values():
            if not future.done():
                future.set_exception(
                    ClosedError("disconnected", f"rexd ended{': ' + reason if reason else ''}")
                )
        self._calls.clear()
        for queue in self._exec.values():
            queue.put_nowait(None)
        for inbox in self._ptys.values():
            inbox.queue.put_nowait(None)

    def _closed_error(self) -> ClosedError:
        """What a stream's reader raises when the link ended under it, saying why if known."""
        reason = self._end_reason
        return ClosedError("disconnected", f"the REXD connection closed{': ' + reason if reason else ''}")

    async def call(self, method: str, params: Optional[Dict[str, Any]] = None) -> Any:
        """Calls a REXD method and returns its result. A REXD error raises
        :class:`deskwire.RemoteError` whose ``code`` is the spec's name (``forbidden_path``, ...)
        with ``number`` and ``data``; no answer in time raises :class:`deskwire.RequestTimeout`.
        Cancelling the awaiting task stops waiting for the answer."""
        return await self._call(method, params)

    async def _call(self, method: str, params: Optional[Dict[str, Any]], raw_max: Optional[int] = None) -> Any:
        """:meth:`call`; with ``raw_max``, the answer may carry that many raw bytes after its line,
        put in the result under ``_RAW``."""
        if self._ended:
            raise ClosedError("closed", "the REXD connection is closed")
        call_id = self._peer.call(now_ms(), method, params)
        frames = self._frames if raw_max is not None else None
        if frames is not None:
            frames.expect(call_id, raw_max)  # before the pump can read its answer
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls[call_id] = future
        self._pump.kick()
        try:
            outcome = await future
        except asyncio.CancelledError:
            if frames is not None:
                frames.drop_call(call_id)  # its bytes, if they still come, are skipped
            if self._calls.pop(call_id, None) is not None:
                with contextlib.suppress(LocalError):
                    self._peer.cancel(now_ms(), call_id)
                self._pump.kick()
            raise
        if frames is not None:
            if isinstance(outcome, jsonrpc.Failed):
                (frames.forget if outcome.remote else frames.drop_call)(call_id)
            elif isinstance(outcome.result, dict) and "raw_bytes" in outcome.result:
                outcome.result[_RAW] = frames.take(call_id) or b""
            else:
                frames.forget(call_id)  # answered in its string (a batch, an older daemon)
        if isinstance(outcome, jsonrpc.Failed):
            if outcome.timed_out:
                raise RequestTimeout("timeout", f"no answer to {method} in time")
            remote = outcome.remote or {}
            number = remote.get("code")
            name = _rexd.error_name(number) if isinstance(number, int) else None
            error = RemoteError(name or str(number), str(remote.get("message", "")))
            error.number = number  # type: ignore[attr-defined]
            error.data = remote.get("data")  # type: ignore[attr-defined]
            raise error
        return outcome.result

    def _with_session(self, params: Dict[str, Any]) -> Dict[str, Any]:
        return {"session_id": self.session_id, **{k: v for k, v in params.items() if v is not None}}

    async def exec(
        self,
        argv: Union[Sequence[str], str],
        *,
        cwd: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        stdin: Optional[str] = None,
        timeout: Optional[float] = None,
        max_output_bytes: Optional[int] = None,
        uncapped: bool = False,
    ) -> AsyncIterator[Union[ExecOutput, ExecExit]]:
        """Runs a process (an argv list, or a shell command string) and yields its output as it
        comes, then its :class:`ExecExit`. Leaving the loop early or cancelling the consuming
        task kills it (``exec.kill``); a daemon-side timeout raises
        :class:`deskwire.RequestTimeout` after the output.

        The output is capped, to keep an agent's context small: at the session's
        ``limits.max_output_bytes`` (1 MiB by default), or lower with ``max_output_bytes``; past
        the cap the process runs on, its output is dropped, and :attr:`ExecExit.truncated`
        says so. ``uncapped=True`` asks for all of it, as ``rex exec`` does, bounded only by the
        daemon's hard limit (``limits.hard_output_bytes``); a daemon that does not know it
        keeps the cap, and ``truncated`` says so.

        ``stdin`` (text) travels in the ``exec.start`` message, which a daemon takes up to
        16 MiB: more raises :class:`deskwire.LocalError` (``too_large``) before anything is
        sent; :meth:`write` the input to a file first and give the command that file."""
        program = _program(argv)
        if stdin is not None and not isinstance(stdin, str):
            raise TypeError(f"stdin must be a str, not {type(stdin).__name__}")
        timeout = _seconds(timeout)
        params = self._with_session(
            {
                **program,
                "cwd": cwd,
                "env": env,
                "stdin": stdin,
                "timeout_ms": None if timeout is None else _millis(timeout),
                "max_output_bytes": max_output_bytes,
                "uncapped_output": True if uncapped else None,
            }
        )
        # The daemon drops a line over its limit unanswered: the call would wait out its
        # timeout. Only a long stdin can pass it (a character is at most 6 bytes in JSON).
        if stdin is not None and 6 * len(stdin) + _REQUEST_ENVELOPE > _MAX_MESSAGE:
            size = _json_size(params) + _REQUEST_ENVELOPE
            if size > _MAX_MESSAGE:
                raise LocalError(
                    "too_large",
                    f"exec.start with {len(stdin)} characters of stdin would be a {size}-byte "
                    f"message, more than the {_MAX_MESSAGE} a daemon takes; write the input to a "
                    'file with write() (in pieces, the rest with mode="append") and give the '
                    "command that file (its path, or ['sh', '-c', 'cmd < FILE'])",
                )
        events = self._exec_events(params, repr(argv))
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()  # a loop left early kills the process now, not at collection

    async def _exec_events(
        self, params: Dict[str, Any], what: str
    ) -> AsyncGenerator[Union[ExecOutput, ExecExit], None]:
        """``exec.start`` with ``params``, then its events (see :meth:`exec`)."""
        start = asyncio.ensure_future(self.call("exec.start", params))
        try:
            started = await asyncio.shield(start)
        except asyncio.CancelledError:
            # The daemon may be running it already: kill it once its id comes back.
            start.add_done_callback(self._kill_once_started)
            raise
        process_id = started["process_id"]
        queue = self._exec.setdefault(process_id, asyncio.Queue())
        exited = False
        try:
            while True:
                event = await queue.get()
                if event is None:
                    raise self._closed_error()
                method, body = event.method, event.params
                if method in ("exec.stdout", "exec.stderr"):
                    data = _decode(body, zstd=self._zstd)
                    yield ExecOutput(method[5:], data, int(body.get("seq", 0)))
                elif method == "exec.exit":
                    exited = True
                    done = ExecExit(
                        body.get("exit_code"),
                        body.get("signal"),
                        bool(body.get("timed_out")),
                        int(body.get("duration_ms") or 0),
                        bool(body.get("truncated")),
                    )
                    if done.timed_out:
                        raise RequestTimeout("timeout", f"{what} ran past its timeout")
                    yield done
                    return
                elif method == "exec.error":
                    exited = True
                    raise RemoteError("exec_error", str(body.get("message", "")))
        finally:
            self._exec.pop(process_id, None)
            if not exited and not self._ended:
                with contextlib.suppress(LocalError):
                    self._peer.call(
                        now_ms(),
                        "exec.kill",
                        self._with_session({"process_id": process_id, "signal": "KILL"}),
                    )
                self._pump.kick()

    def _kill_once_started(self, start: "asyncio.Future[Any]") -> None:
        """Kills the process of an ``exec.start`` whose caller was cancelled while it ran."""
        if start.cancelled() or start.exception() is not None or self._ended:
            return
        with contextlib.suppress(LocalError):
            self._peer.call(
                now_ms(),
                "exec.kill",
                self._with_session({"process_id": start.result()["process_id"], "signal": "KILL"}),
            )
        self._pump.kick()

    async def pty(
        self,
        argv: Union[Sequence[str], str],
        *,
        cwd: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        cols: int = 80,
        rows: int = 24,
        max_buffered: int = 4 << 20,
    ) -> Pty:
        """Starts an interactive program (an argv list, or a shell command string) in a
        ``cols`` × ``rows`` terminal (``pty.open``)::

            async with await rexd.pty(["sh"]) as term:
                await term.write(b"ls\n")
                async for event in term:        # PtyOutput(...), ..., PtyExit(...)
                    ...

        At most ``max_buffered`` bytes of output wait for the reader; past that the terminal is
        closed and reading raises :class:`deskwire.LocalError` (``too_large``)."""
        if not isinstance(max_buffered, int) or max_buffered <= 0:
            raise LocalError("invalid_value", "max_buffered must be a positive int")
        for name, value in (("cols", cols), ("rows", rows)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if not 1 <= value <= 65535:
                raise LocalError("invalid_value", f"{name} must be 1..65535, not {value}")
        program = _program(argv)
        params = self._with_session({**program, "cwd": cwd, "env": env, "cols": cols, "rows": rows})
        self._pty_opening += 1
        self._pty_limit = max(self._pty_limit, max_buffered)
        try:
            opened = await self.call("pty.open", params)
        finally:
            self._pty_opening -= 1
        pty_id = str(opened["pty_id"])
        inbox = self._ptys.setdefault(pty_id, _PtyInbox(max_buffered))
        inbox.limit = max_buffered
        return Pty(self, pty_id, str(opened["process_id"]), inbox)

    async def run(
        self, argv: Union[Sequence[str], str], **options: Any
    ) -> "tuple[int, bytes, bytes]":
        """Runs a process to its end: ``(exit_code, stdout, stderr)`` (``-1`` for a signal).
        ``options`` are :meth:`exec`'s; output cut at the cap is logged as a warning (use
        :meth:`exec` to see :attr:`ExecExit.truncated`, or ``uncapped=True``)."""
        out, err = bytearray(), bytearray()
        code = -1
        async for event in self.exec(argv, **options):
            if isinstance(event, ExecOutput):
                (out if event.stream == "stdout" else err).extend(event.data)
            else:
                code = event.exit_code if event.exit_code is not None else -1
                if event.truncated:
                    log.warning("%r: output cut at the session's cap after %d bytes", argv, len(out) + len(err))
        return code, bytes(out), bytes(err)

    async def run_tool(self, call: Dict[str, Any]) -> Dict[str, Any]:
        """Runs a model's call of REXD's logical tools (``bash``, ``read``, ``write``,
        ``list``, ``glob``, ``stat``: an item of
        :attr:`deskwire.tools.ProviderResponse.tool_calls` whose verdict is
        :class:`deskwire.tools.Run`) and gives its result for
        :func:`deskwire.tools.tool_results`, in the words ``rexd --mcp`` uses: for ``bash`` the
        output (stderr after ``[stderr]``), with ``[exit code: N]`` (or ``[signal: KILL]``) and an error result for a
        non-zero exit; a file's text; a listing; ``wrote N bytes to PATH``. What the model got
        wrong (its arguments, a path outside the roots) and what the daemon refused come back
        as error results with the reason. ``bash`` runs through a shell, which a daemon allows
        only with ``--allow-shell`` (``security.allow_shell``); without it the result says so.

        (``tools.rexd_request(call, session_id)`` and :meth:`call` are the same by hand: for
        ``bash`` that answers ``exec.start`` with a process id, whose output then comes as
        notifications.)"""
        call_id = str(call.get("id", "")) if isinstance(call, dict) else ""
        try:
            method, params = tools.rexd_request(call, self.session_id)
        except ProtocolError as e:  # the model's arguments
            return tools.result(call_id, f"{e.code}: {e.message}", is_error=True)
        try:
            if method == "exec.start":
                text, failed = await self._bash_text(params)
                return tools.result(call_id, text, is_error=failed)
            result = await self.call(method, params)
        except RequestTimeout as e:
            return tools.result(call_id, f"{e.code}: {e.message}", is_error=True)
        except RemoteError as e:
            # The daemon's message says what to change (a shell refused: --allow-shell).
            text = f"{e.code} ({getattr(e, 'number', '')}): {e.message}"
            return tools.result(call_id, text, is_error=True)
        return tools.result(call_id, _fs_text(method, result))

    async def _bash_text(self, params: Dict[str, Any]) -> "tuple[str, bool]":
        """The text of a ``bash`` call's result and whether it failed."""
        out, err = bytearray(), bytearray()
        ending = ""
        failed = False
        try:
            async for event in self._exec_events(params, "the command"):
                if isinstance(event, ExecOutput):
                    (out if event.stream == "stdout" else err).extend(event.data)
                elif event.signal is not None or event.exit_code != 0:
                    # The core's marker, as RemoteBash and rexd --mcp end a failed command.
                    code = -1 if event.exit_code is None else event.exit_code
                    ending, failed = f"\n{oa1.exit_marker(code, event.signal)}", True
        except RequestTimeout:
            ending, failed = "\n[timed out]", True
        text = out.decode("utf-8", "replace")
        if err:
            text += "\n[stderr]\n" + err.decode("utf-8", "replace")
        return text + ending, failed

    async def read(self, path: str, *, offset: Optional[int] = None, length: Optional[int] = None) -> bytes:
        """The bytes of a file (one ``fs.read``): from ``offset``, at most ``length`` and at most
        the session's ``max_file_read_bytes``. Over a child's stdio they come as they are after
        the answer's line (raw frames), else in base64; with compression, a piece that shrinks
        comes as a zstd frame. :meth:`read_file` reads a whole file."""
        limit = (self.session.get("limits") or {}).get("max_file_read_bytes")
        bounds = [n for n in (length, limit) if isinstance(n, int) and n >= 0]
        _, data = await self._read_piece(path, offset, length, min(bounds) if bounds else MAX_EVENT_BYTES)
        return data

    async def _read_piece(
        self, path: str, offset: Optional[int], length: Optional[int], most: int
    ) -> "tuple[Dict[str, Any], bytes]":
        """One ``fs.read`` and its bytes, no more than ``most`` of them: asked for raw where the
        session has raw frames, else as zstd where it has compression, else base64 (any bytes,
        never a piece cut short before a character)."""
        raw = self._frames is not None and bool(self.session.get("raw_frames"))
        encoding = "raw" if raw else _ZSTD if self._zstd else "base64"
        params = self._with_session({"path": path, "offset": offset, "length": length, "encoding": encoding})
        result = await self._call("fs.read", params, raw_max=most if raw else None)
        # Inflated here, on the loop: a 1 MiB piece takes a few ms, while the daemon's next
        # pieces wait in the 1 MiB pipe (a worker thread was not faster in a run on 2 cores).
        data = _decode(result, "content", zstd=self._zstd, limit=most)
        if len(data) > most:
            raise ProtocolError("too_large", f"fs.read of {path} answered {len(data)} bytes, more than the {most} asked")
        return result, data

    async def read_chunks(
        self,
        path: str,
        *,
        offset: int = 0,
        length: Optional[int] = None,
        max_size: Optional[int] = None,
    ) -> AsyncIterator[bytes]:
        """A whole file (or ``length`` bytes from ``offset``), byte-exact, as its pieces come, as
        ``rex read`` reads it: pieces of the session's ``max_file_read_bytes`` (8 MiB at most),
        the first alone (it tells the size), then up to three in flight, so the daemon reads and
        sends the next while this side takes the last. Memory stays within those pieces.

        A file larger than ``max_size`` bytes (within ``offset`` and ``length``) raises
        :class:`deskwire.LocalError` (``too_large``) before any of it is given; one whose
        ``mtime`` changes between pieces raises :class:`deskwire.RemoteError`
        (``concurrency_conflict``) rather than splice two versions. Leaving the loop early
        stops the pieces in flight."""
        for name, value in (("offset", offset), ("length", length), ("max_size", max_size)):
            if (value is not None or name == "offset") and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0
            ):
                raise LocalError("invalid_value", f"{name} must be a non-negative int, not {value!r}")
        limit = (self.session.get("limits") or {}).get("max_file_read_bytes")
        piece = min(max(limit, 1), MAX_READ_PIECE) if isinstance(limit, int) else MAX_READ_PIECE
        ahead: Deque["tuple[int, asyncio.Future[tuple[Dict[str, Any], bytes]]]"] = collections.deque()

        def ask(at: int, n: int) -> None:
            ahead.append((n, asyncio.ensure_future(self._read_piece(path, at, n, n))))

        def drop_ahead() -> None:
            for _, later in ahead:
                later.cancel()
                # A piece that failed meanwhile: its error is not news.
                later.add_done_callback(lambda f: f.cancelled() or f.exception())
            ahead.clear()

        # The first piece tells the size; the rest are asked for ahead.
        first = piece if length is None else min(length, piece)
        ask(offset, first)
        asked_to, at = offset + first, offset
        end = offset
        sized = False
        mtime: Any = None
        try:
            while ahead:
                asked, pending = ahead.popleft()
                result, data = await pending
                if not sized:
                    sized, mtime = True, result.get("mtime")
                    file_end = max(int(result.get("size") or 0), offset)
                    end = file_end if length is None else min(file_end, offset + length)
                    if max_size is not None and end - offset > max_size:
                        raise LocalError(
                            "too_large", f"{path} is {end - offset} bytes to read, over max_size={max_size}"
                        )
                elif result.get("mtime") != mtime:
                    error = RemoteError("concurrency_conflict", f"{path} changed while it was read")
                    error.number = -32006  # type: ignore[attr-defined]
                    error.data = None  # type: ignore[attr-defined]
                    raise error
                at += len(data)
                if data:
                    yield data
                if not data or at >= end:
                    return
                if len(data) < asked:
                    # Short of what was asked (the file shrank): the pieces in flight do not
                    # follow on, so ask again from where the data ends.
                    drop_ahead()
                    asked_to = at
                while len(ahead) < READ_AHEAD and asked_to < end:
                    n = min(piece, end - asked_to)
                    ask(asked_to, n)
                    asked_to += n
        finally:
            drop_ahead()

    async def read_file(
        self,
        path: str,
        *,
        offset: int = 0,
        length: Optional[int] = None,
        max_size: Optional[int] = MAX_READ_FILE,
    ) -> bytes:
        """A whole file (or ``length`` bytes from ``offset``), byte-exact, read as
        :meth:`read_chunks` reads it (pieces three at a time, raw frames and compression where
        the session has them)::

            data = await rexd.read_file("/srv/app/app.log")

        At most ``max_size`` bytes (256 MiB unless told; ``None`` for no cap): a larger file
        raises :class:`deskwire.LocalError` (``too_large``) after its first piece, before the
        rest is asked for."""
        # One join: a growing bytearray copied the bytes more than once (a fifth slower).
        chunks = [chunk async for chunk in self.read_chunks(path, offset=offset, length=length, max_size=max_size)]
        return b"".join(chunks)

    async def write(
        self,
        path: str,
        data: Union[bytes, str],
        *,
        mode: str = "replace",
        atomic: bool = True,
        mkdir_parents: Optional[bool] = None,
    ) -> Dict[str, Any]:
        """Writes a file (``fs.write``); returns the result (``bytes_written``, ``mtime``, ...).
        The bytes travel in base64 in one message, which a daemon takes up to 16 MiB: more than
        about 12 MiB raises :class:`deskwire.LocalError` (``too_large``) before anything is
        sent; write a larger file in pieces, the rest with ``mode="append"``."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        encoded = 4 * ((len(raw) + 2) // 3)
        if encoded + _REQUEST_ENVELOPE + len(path.encode("utf-8", "replace")) > _MAX_MESSAGE:
            raise LocalError(
                "too_large",
                f"fs.write of {len(raw)} bytes would be a {encoded}-byte message in base64, more "
                f"than the {_MAX_MESSAGE} a daemon takes; write it in pieces, the rest with "
                'mode="append"',
            )
        return dict(
            await self.call(
                "fs.write",
                self._with_session(
                    {
                        "path": path,
                        "content": base64.b64encode(raw).decode("ascii"),
                        "encoding": "base64",
                        "mode": mode,
                        "atomic": atomic,
                        "mkdir_parents": mkdir_parents,
                    }
                ),
            )
        )

    async def list(
        self, path: str, *, recursive: bool = False, max_entries: Optional[int] = None
    ) -> List[Dict[str, Any]]:
        """The entries of a directory (``fs.list``)."""
        result = await self.call(
            "fs.list",
            self._with_session({"path": path, "recursive": recursive, "max_entries": max_entries}),
        )
        return list(result["entries"])

    async def stat(self, path: str) -> Dict[str, Any]:
        """A file's metadata (``fs.stat``; ``exists`` is false for a missing path)."""
        return dict(await self.call("fs.stat", self._with_session({"path": path})))

    async def glob(
        self, pattern: str, *, cwd: Optional[str] = None, max_matches: Optional[int] = None
    ) -> List[str]:
        """The paths matching ``pattern`` (``fs.glob``)."""
        result = await self.call(
            "fs.glob",
            self._with_session({"pattern": pattern, "cwd": cwd, "max_matches": max_matches}),
        )
        return list(result["matches"])

    async def _reap(self, process: Optional[asyncio.subprocess.Process]) -> None:
        """Waits for the process of a link that dropped (killing it if it lingers), and stops
        reading its stderr."""
        if self._link_reader is not None:
            self._link_reader.close()
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stderr_task
            self._stderr_task = None

    async def close(self, timeout: float = 5.0) -> None:
        """Closes the session and the daemon's stdin, and waits for it to exit (killing it after
        ``timeout`` seconds)."""
        self._closing = True
        if self._resuming is not None:
            self._resuming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._resuming
        if not self._ended and self.session:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self.call("session.close", {"session_id": self.session_id}), timeout
                )
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._ws.close(), timeout)
        if self._process is not None:
            if self._process.stdin is not None:
                with contextlib.suppress(Exception):
                    self._process.stdin.close()
            try:
                await asyncio.wait_for(self._process.wait(), timeout)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self._process.kill()
                await self._process.wait()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(self._pump.task, timeout)
        if self._link_reader is not None:
            self._link_reader.close()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stderr_task
        self._peer.close()

    async def __aenter__(self) -> "RexdClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
