"""The native module (pyo3). Use the ``deskwire`` package's modules instead."""

from typing import Any, Final, List

from typing_extensions import final

__all__ = ['__version__', 'Transmit', 'Timeout', 'noop', 'read_def', 'schema_text', 'schema_names', 'oa1', 'irc', 'sim', 'jsonrpc', 'tools', 'rexd', 'gateway', 'mobile']

from . import gateway as gateway
from . import irc as irc
from . import jsonrpc as jsonrpc
from . import mobile as mobile
from . import oa1 as oa1
from . import rexd as rexd
from . import sim as sim
from . import tools as tools

__version__: Final[str]

@final
class Transmit:
    """``poll_output``: bytes to write to the connection, framing included."""

    __match_args__: Final = ("data",)
    def __new__(cls, data: bytes) -> Transmit: ...
    @property
    def data(self) -> bytes:
        """The bytes to write."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Timeout:
    """``poll_output``: nothing to do before ``at_ms`` unless new input arrives."""

    __match_args__: Final = ("at_ms",)
    def __new__(cls, at_ms: int) -> Timeout: ...
    @property
    def at_ms(self) -> int:
        """The deadline, in ms of the host's clock."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

def noop() -> None:
    """Does nothing (the cost of a call into Rust, for benchmarks)."""

def read_def(protocol: str, name: str, value: Any) -> Any:
    """Reads ``value`` as a def of ``protocol``'s schema and gives it back in canonical form."""

def schema_text(name: str) -> str:
    """The text of a JSON Schema document, by file name or protocol."""

def schema_names() -> List[str]:
    """The file names of the JSON Schema documents the package carries."""
