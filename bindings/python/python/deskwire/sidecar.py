"""The Python side of the sidecar IPC (``docs/sidecar-and-mobile.md``): NDJSON
requests on stdin, results, errors and progress on stdout, logs on stderr.

:func:`serve` runs each request's handler as its own asyncio task (so a long training does not
hold up a ``health.ping``), lets a handler report progress, and answers with its result or its
error. ``health.ping`` and ``lifecycle.shutdown`` are built in (a handler of the same name
replaces them); an unknown method is answered ``UNKNOWN_METHOD``::

    from deskwire import sidecar

    async def train(params, progress):
        for epoch in range(1, 4):
            progress({"stage": "training", "epoch": epoch, "total_epochs": 3})
            await asyncio.sleep(0.1)
        return {"status": "completed", "model_path": "/tmp/model", "metrics": {}}

    sidecar.serve({"training.start": train})

Errors: a handler raises :class:`SidecarError` to answer with a code, ``SidecarError(
"INVALID_PARAMS", "model_id is missing")`` when the params are wrong (only the handler knows
what its params must be) and ``SidecarError("MODEL_NOT_LOADED", ...)`` and the like otherwise.
Any other exception is the handler's own failure, whatever its type (a ``KeyError``, a
``LocalError`` from a deskwire call, a result that is not JSON): it is answered
``INTERNAL_ERROR`` with its type and text, and logged with its traceback.

Progress is a state, not a log: while a request's previous report has not been written yet (the
host reads slower than the handler reports), the newest one replaces it. ``progress`` never
blocks, and however fast a handler reports, what waits to be written is at most one report per
request in progress plus what the pipe's buffer holds, not a backlog.

The framing, the message shapes and the error codes are the core's (``jsonrpc.Peer`` in the
``sidecar`` dialect); this module only moves bytes and runs tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import sys
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional

from . import jsonrpc
from ._deskwire import __version__, read_def
from ._deskwire.jsonrpc import is_sidecar_error_code
from ._errors import DeskwireError, LocalError
from .aio.pump import _Pump, now_ms

__all__ = ["serve", "serve_async", "read", "SidecarError", "Handler", "Progress", "ERROR_CODES"]

log = logging.getLogger("deskwire.sidecar")

ERROR_CODES = (
    "MODEL_NOT_LOADED",
    "MODEL_NOT_FOUND",
    "TRAINING_IN_PROGRESS",
    "TRAINING_NOT_RUNNING",
    "INVALID_PARAMS",
    "INFERENCE_ERROR",
    "UNKNOWN_METHOD",
    "INTERNAL_ERROR",
)
"""The spec's error codes."""

Progress = Callable[[Dict[str, Any]], None]
"""Reports progress of the request being handled (``{"stage": ..., "epoch": ...}``, a dict:
anything else raises ``TypeError`` at once). A report not yet written when the next one comes
is replaced by it."""

Handler = Callable[[Dict[str, Any], Progress], Awaitable[Any]]
"""``async def handler(params, progress) -> result``."""


class SidecarError(DeskwireError):
    """Raise it from a handler to answer with an error code: one of :data:`ERROR_CODES`
    (``SidecarError("MODEL_NOT_LOADED", "call model.load first")``,
    ``SidecarError("INVALID_PARAMS", "model_id is missing")``) or a code of your own, which is
    sent as it is. The spec spells every code ``SCREAMING_SNAKE_CASE``; another spelling is
    refused here, when the error is made (``LocalError`` ``invalid_value``)."""

    def __init__(self, code: str, message: str) -> None:
        if not isinstance(code, str) or not is_sidecar_error_code(code):
            raise LocalError(
                "invalid_value",
                f"a sidecar error code is SCREAMING_SNAKE_CASE ([A-Z][A-Z0-9_]*), not {code!r}; "
                f"the spec's are {', '.join(ERROR_CODES)}",
            )
        if not isinstance(message, str):
            raise TypeError(f"a sidecar error message is a str, not {type(message).__name__}")
        super().__init__(code, message)



def _is_stream(fd: int) -> bool:
    """Whether asyncio's pipe transports take ``fd``: a pipe, a socket or a character device
    (a terminal, ``/dev/null``). A regular file (``< requests.ndjson``, ``> out.txt``) is not
    one of them."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


class _FileReader:
    """Reads a regular file given as stdin. A file is always ready (reading it does not wait
    for a writer), so each read is a plain ``os.read``."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def read(self, n: int = -1) -> bytes:
        return os.read(self._fd, n if n > 0 else 1 << 16)


class _FileWriter:
    """Writes to a regular file given as stdout: each write goes to the file at once (a file
    takes it without waiting for a reader), so there is never anything to drain."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    async def drain(self) -> None:
        return None


async def _stdio() -> "tuple[Any, Any]":
    """stdin and stdout as the pump's reader and writer: asyncio's pipe transports for pipes,
    sockets and terminals, plain reads and writes for regular files."""
    loop = asyncio.get_running_loop()
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    reader: Any
    writer: Any
    if _is_stream(stdin):
        reader = asyncio.StreamReader(limit=1 << 24)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    else:
        reader = _FileReader(stdin)
    if _is_stream(stdout):
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, sys.stdout.buffer
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
    else:
        sys.stdout.flush()
        writer = _FileWriter(stdout)
    return reader, writer


async def serve_async(
    handlers: Mapping[str, Handler],
    *,
    reader: Optional[asyncio.StreamReader] = None,
    writer: Optional[asyncio.StreamWriter] = None,
    version: str = __version__,
) -> None:
    """Serves requests until ``lifecycle.shutdown`` or the end of the input; in-flight handlers
    are cancelled at the end. ``reader``/``writer`` default to stdin/stdout."""
    if reader is None or writer is None:
        reader, writer = await _stdio()
    peer = jsonrpc.Peer("sidecar")
    tasks: Dict[Any, "asyncio.Task[None]"] = {}
    done = asyncio.get_running_loop().create_future()
    pump: Optional[_Pump] = None

    def kick() -> None:
        if pump is not None:
            pump.kick()

    async def run(request: jsonrpc.Request) -> None:
        def progress(data: Dict[str, Any]) -> None:
            if not isinstance(data, dict):
                raise TypeError(
                    f"progress takes a dict (the spec's progress is a JSON object), "
                    f"not {type(data).__name__}"
                )
            peer.progress(now_ms(), request.id, data)
            kick()

        params = request.params if request.params is not None else {}
        try:
            handler = handlers.get(request.method)
            if handler is not None:
                result = await handler(params, progress)
            elif request.method == "health.ping":
                result = {"status": "ok", "version": version}
            elif request.method == "lifecycle.shutdown":
                result = {"status": "shutting_down"}
            else:
                peer.respond_method_not_found(now_ms(), request.id, request.method)
                return
            peer.respond(now_ms(), request.id, result)
        except asyncio.CancelledError:
            with contextlib.suppress(DeskwireError):
                peer.respond_error(now_ms(), request.id, "INTERNAL_ERROR", "cancelled at shutdown")
            raise
        except SidecarError as e:
            # The handler's own answer, INVALID_PARAMS included: the code as it is.
            peer.respond_error(now_ms(), request.id, e.code, e.message)
        except Exception as e:
            # The handler failed (or returned what cannot be sent): not the caller's fault.
            log.exception("%s failed", request.method)
            peer.respond_error(now_ms(), request.id, "INTERNAL_ERROR", f"{type(e).__name__}: {e}")
        finally:
            tasks.pop(request.id, None)
            kick()
        if request.method == "lifecycle.shutdown" and not done.done():
            done.set_result(None)

    def on_event(event: Any) -> None:
        if isinstance(event, jsonrpc.Request):
            tasks[event.id] = asyncio.get_running_loop().create_task(run(event))
        elif isinstance(event, jsonrpc.Malformed):
            log.warning("unreadable input: %s", event.reason)
        elif isinstance(event, jsonrpc.Notification):
            log.info("notification %s ignored", event.method)

    def on_end() -> None:
        if not done.done():
            done.set_result(None)

    pump = _Pump(peer, reader, writer, on_event, on_end)
    await done
    for task in list(tasks.values()):
        task.cancel()
    for task in list(tasks.values()):
        with contextlib.suppress(asyncio.CancelledError):
            await task
    # A task cancelled before it started never ran its own answer: every request is answered.
    for request_id in list(tasks):
        with contextlib.suppress(DeskwireError):
            peer.respond_error(now_ms(), request_id, "INTERNAL_ERROR", "cancelled at shutdown")
    # Flush what is left (the shutdown answer, cancellations) before going.
    pump.kick()
    await asyncio.sleep(0)
    pump.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pump.task
    while True:
        out = peer.poll_output(now_ms())
        data = getattr(out, "data", None)
        if data is None:
            break
        writer.write(data)
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    peer.close()


def serve(handlers: Mapping[str, Handler], *, version: str = __version__) -> None:
    """Serves the sidecar protocol on stdin/stdout until ``lifecycle.shutdown`` or end of
    input, logging to stderr (``logging`` at INFO unless configured). Either may be a pipe, a
    socket, a terminal or a regular file (``python my_sidecar.py < requests.ndjson >
    answers.ndjson`` replays a file of requests)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                            format="%(asctime)s sidecar %(levelname)s %(message)s")
    asyncio.run(serve_async(handlers, version=version))


def read(name: str, value: Any) -> Any:
    """Reads ``value`` as ``$defs/<name>`` of ``core/schemas/ipc-message.schema.json`` (a whole
    message, or a method's params or result) through the core's types and gives it back in
    canonical form; :class:`deskwire.ProtocolError` when it does not fit."""
    return read_def("sidecar", name, value)
