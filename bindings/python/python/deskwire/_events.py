"""The registry that turns the core's events into the dataclasses of each module.

Each module declares its events as frozen dataclasses registered with :func:`event`; the native
module looks a class up by (family, tag), the tag being the event's name in the core's serde
shape (``{"response": {...}}`` is ``oa1.Response``), and calls it with the event's fields.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Dict, Tuple, Type, TypeVar

if TYPE_CHECKING:
    from ._errors import DeskwireError

T = TypeVar("T")

REGISTRY: Dict[Tuple[str, str], Type[Any]] = {}
"""(family, tag) → event class."""


def event(family: str, tag: str) -> Callable[[Type[T]], Type[T]]:
    """Registers a (frozen dataclass) class as the event ``tag`` of ``family``."""

    def register(cls: Type[T]) -> Type[T]:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} must be a dataclass")
        REGISTRY[(family, tag)] = cls
        return cls

    return register


def attached_exception(event: Any, code: str, message: str) -> "DeskwireError":
    """The exception the native module hung on ``event`` (its class chosen from the core's
    typed failure, ``src/errors.rs``), or, for an event made by hand, a
    :class:`deskwire.RemoteError` with ``code`` and ``message``."""
    from ._errors import DeskwireError, RemoteError

    made = event.__dict__.get("_exception")
    return made if isinstance(made, DeskwireError) else RemoteError(code, message)
