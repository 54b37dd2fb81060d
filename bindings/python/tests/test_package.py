"""The package as a user meets it: every public name documented, one exception tree, the
version, the poll_output values usable in ``match`` and comparisons."""

from __future__ import annotations

import importlib
import inspect
from typing import Any, List

import pytest

import deskwire
from deskwire import Timeout, Transmit

MODULES = ["deskwire", "deskwire.irc", "deskwire.oa1", "deskwire.sim", "deskwire.jsonrpc",
           "deskwire.rexd", "deskwire.sidecar", "deskwire.gateway", "deskwire.mobile",
           "deskwire.tools", "deskwire.schemas", "deskwire.aio"]


def public_names() -> List[Any]:
    out = []
    for name in MODULES:
        module = importlib.import_module(name)
        assert module.__doc__, name
        for attr in getattr(module, "__all__", []):
            out.append(pytest.param(module, attr, id=f"{name}.{attr}"))
    return out


@pytest.mark.parametrize("module,attr", public_names())
def test_every_public_name_has_a_docstring(module: Any, attr: str) -> None:
    value = getattr(module, attr)
    if isinstance(value, (str, int, tuple)) or attr.startswith("__") or attr in ("Id", "Body", "Handler", "Progress"):
        return  # constants and type aliases are documented in the module docs
    assert inspect.getdoc(value), f"{module.__name__}.{attr}"
    if inspect.isclass(value):
        for name, member in inspect.getmembers(value):
            if name.startswith("_") or not callable(member):
                continue
            assert inspect.getdoc(member), f"{module.__name__}.{attr}.{name}"


def test_version_and_error_tree() -> None:
    assert deskwire.__version__.count(".") == 2
    for cls in (deskwire.LocalError, deskwire.ClosedError, deskwire.RemoteError,
                deskwire.ProtocolError, deskwire.RequestTimeout):
        assert issubclass(cls, deskwire.DeskwireError)
    assert issubclass(deskwire.RequestTimeout, TimeoutError)
    assert issubclass(deskwire.ClosedError, deskwire.LocalError)
    assert not issubclass(deskwire.RemoteError, deskwire.LocalError)


def test_outputs_compare_and_match() -> None:
    assert Transmit(b"x") == Transmit(b"x") and Transmit(b"x") != Transmit(b"y")
    assert Timeout(5) == Timeout(5) and hash(Timeout(5)) == hash(Timeout(5))
    assert repr(Transmit(b"PING")) == "Transmit(data=b'PING')"
    match Timeout(7):
        case Timeout(at_ms):
            assert at_ms == 7
    event = deskwire.oa1.Response(id="a", text="t", truncated=False)
    assert event == deskwire.oa1.Response("a", "t", False)
    with pytest.raises(Exception):
        event.text = "changed"  # type: ignore[misc]
