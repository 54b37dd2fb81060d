from typing import Any, Dict, List, Optional, Tuple, Union

from typing_extensions import final

__all__ = ['parse_params', 'parse_result', 'parse_event', 'methods', 'error_name', 'resolve_target', 'RawFrames', 'inflate', 'decode', 'is_loopback_host', 'MAX_MESSAGE_BYTES']

MAX_MESSAGE_BYTES: int

def parse_params(method: str, params: Any = None) -> Any:
    """The params of a request to ``method``, checked against the method's type and written back in
    canonical form (a dict). Raises ``ProtocolError`` with code ``unknown_method`` or
    ``invalid_params``.
    """
def parse_result(method: str, result: Any) -> Any:
    """The result of a call of ``method``, checked against the method's result type and written back
    in canonical form.
    """
def parse_event(method: str, params: Any = None) -> Any:
    """The params of an event notification (``exec.stdout``, ``exec.stderr``, ``exec.exit``,
    ``exec.error``, ``pty.output``, ``pty.exit``), checked and written back in canonical form.
    """
def methods() -> Tuple[List[str], List[str]]:
    """The method names REXD serves (requests) and sends (events)."""
def error_name(code: int) -> Optional[str]:
    """The spec's name of a REXD error code (``-32002`` → ``"forbidden_path"``), ``None`` for a number
    REXD does not define.
    """
def resolve_target(
    target: Optional[str] = None,
    *,
    targets_file: Optional[str] = None,
    rexd: Optional[str] = None,
    rexd_args: Optional[List[str]] = None,
    resume: bool = False,
) -> Dict[str, Any]:
    """Resolves a target as ``rex`` does: a name from the targets file (``targets_file``, else
    ``$REX_TARGETS_FILE``, else ``~/.config/rex/targets.toml``), ``local``, or an ``ssh://user@host[:port]``
    URL; ``None`` is the file's current target (or ``$REX_TARGET``, or ``local``). Returns
    ``{"name", "url", "argv", "workspace_roots", "cwd", "local", "rexd_install"}``: ``argv`` starts
    the daemon with its stdio as the connection (``rexd --stdio``, or ``ssh -T -e none … rexd
    --stdio``); ``rexd_install`` says where rexd comes from, for an error when it is missing. ``rexd``
    overrides the daemon's path, ``rexd_args`` its extra arguments (e.g. ``["--root", dir]``);
    ``resume`` starts it as ``rexd --stdio --resumable`` (the bridge to the user's agent).
    """

def inflate(frame: bytes, limit: int) -> bytes:
    """The bytes of one zstd frame (a raw frame's bytes in a session with compression), inflated
    under ``limit`` (``docs/rexd-compression.md``): a frame that states more, inflates past it,
    needs a window over 8 MiB or is not one well-formed frame raises ``ProtocolError`` (code
    ``too_large`` or ``bad_payload``) without being expanded. Pure Rust; the GIL is released.
    """
def is_loopback_host(host: str) -> bool:
    """Whether ``host`` names this machine (a loopback address, or ``localhost``): the only host a
    client reaches in plain text (``http://``, ``ws://``), as ``rex`` decides it.
    """
def decode(text: str, encoding: str, limit: int) -> bytes:
    """The bytes a string field carries with its ``encoding``: ``utf8``, ``base64``, or ``zstd`` (the
    base64 of one zstd frame, inflated under ``limit`` as ``inflate`` does).
    """

_Id = Union[int, str, None]

@final
class RawFrames:
    """The raw-frame splitter (``docs/rexd-raw-frames.md``) between a ``rexd --stdio`` link's bytes
    and the JSON-RPC peer: ``feed`` takes what the link read and returns what the peer should
    see (``feed_text`` and ``feed_binary`` take a ``/ws`` link's messages); the bytes after a raw
    ``fs.read`` answer wait under its id for ``take``, those after an output event in arrival
    order for ``take_output``. Only calls announced with ``expect`` may carry bytes, no more than
    their ``max``, and output events only after ``allow_output``: anything else raises
    ``ProtocolError`` (code ``raw_frame``), after which the link cannot be read on.
    """
    def __new__(cls) -> RawFrames: ...
    def feed(self, data: bytes) -> bytes:
        """Takes bytes read from the link; returns the bytes the peer should see (whole lines
        where a line announces raw bytes, any cut otherwise).
        """
    def feed_text(self, message: bytes) -> bytes:
        """Takes one text message from a ``/ws`` link: one JSON value, returned as the line the peer
        should see (``\\n`` appended). A text message that announces raw bytes is refused: on
        ``/ws`` they come in binary messages only.
        """
    def feed_binary(self, message: bytes) -> bytes:
        """Takes one binary message from a ``/ws`` link: a raw frame whole (its JSON line, ``\\n``,
        then exactly ``raw_bytes`` bytes); returns the line for the peer, and the bytes wait as
        ``feed``'s do. A message that was not asked for, or whose length disagrees with its
        line, is refused.
        """
    def expect(self, id: _Id, max: int) -> None:
        """Call ``id`` asked for raw bytes, ``max`` at most."""
    def forget(self, id: _Id) -> None:
        """Call ``id`` was answered with an error: no bytes will come for it."""
    def drop_call(self, id: _Id) -> None:
        """Call ``id`` is no longer wanted: its bytes, if they come, are skipped."""
    def take(self, id: _Id) -> Optional[bytes]:
        """The bytes that came after the answer to ``id``, once (``None`` when none came)."""
    def allow_output(self, max: int) -> None:
        """The session negotiated raw output: output events may carry ``max`` bytes each."""
    def take_output(self) -> Optional[bytes]:
        """The bytes of the oldest output event handed on and not yet taken; call it once for
        each ``exec.stdout``/``exec.stderr`` event whose params have ``raw_bytes``, in order.
        """
