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
           "deskwire.tools", "deskwire.schemas", "deskwire.aio", "deskwire.aio.pump",
           "deskwire.aio.irc", "deskwire.aio.desks", "deskwire.aio.rexd", "deskwire.aio.mobile", "deskwire.aio.gateway"]


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
    if isinstance(value, (str, int, tuple)) or attr.startswith("__") or attr in ("Id", "Body", "Handler", "Progress", "Verdict", "Provider", "ChatKind", "MembershipEvent", "ChatEvent"):
        return  # constants and type aliases are documented in the module docs
    assert inspect.getdoc(value), f"{module.__name__}.{attr}"
    if inspect.isclass(value):
        for name, member in inspect.getmembers(value):
            if name.startswith("_") or not callable(member):
                continue
            assert inspect.getdoc(member), f"{module.__name__}.{attr}.{name}"


def test_version_and_error_tree() -> None:
    assert deskwire.__version__.count(".") == 2
    failures = (deskwire.NotReadyError, deskwire.JoinFailedError, deskwire.NickRefusedError,
                deskwire.KickedError, deskwire.PeerLeftError, deskwire.DisconnectedError)
    for cls in (deskwire.LocalError, deskwire.ClosedError, deskwire.RemoteError,
                deskwire.ProtocolError, deskwire.RequestTimeout, *failures):
        assert issubclass(cls, deskwire.DeskwireError)
    # What the peer or the link did is never the caller's misuse.
    for cls in failures:
        assert issubclass(cls, deskwire.RemoteError) and not issubclass(cls, deskwire.LocalError)
    # Giving up after waiting is a TimeoutError, which on 3.9 and 3.10 asyncio.TimeoutError is not.
    for cls in (deskwire.RequestTimeout, deskwire.NotReadyError):
        assert issubclass(cls, TimeoutError)
        try:
            raise cls("not_ready", "x")
        except TimeoutError as caught:
            assert caught.code == "not_ready"  # type: ignore[attr-defined]
    assert issubclass(deskwire.ClosedError, deskwire.LocalError)
    assert not issubclass(deskwire.RemoteError, deskwire.LocalError)
    # Misuse of a connection of many desks: a channel it does not carry, chat text refused.
    assert issubclass(deskwire.UnknownChannelError, deskwire.LocalError)
    for cls in (deskwire.EmptyTextError, deskwire.ForbiddenByteError,
                deskwire.ReservedPrefixError, deskwire.QueueFullError):
        assert issubclass(cls, deskwire.ChatError) and issubclass(cls, deskwire.LocalError)
    # A traceback names each error as it is imported, and a pickled one comes back.
    import pickle
    import traceback
    errors = [v for v in vars(deskwire).values() if isinstance(v, type) and issubclass(v, Exception)]
    assert len(errors) >= 20
    for cls in errors:
        assert cls.__module__ == "deskwire", cls
    try:
        raise deskwire.LocalError("invalid_value", "x")
    except deskwire.LocalError as caught:
        assert "deskwire.LocalError: invalid_value: x" in "".join(traceback.format_exception_only(type(caught), caught))
        assert pickle.loads(pickle.dumps(caught)).code == "invalid_value"


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


def test_the_stubs_carry_the_docstrings() -> None:
    """An IDE shows the stub's docstring on hover, not the compiled module's: every public class,
    function and method of the native module's stubs has one (filled from the Rust docs)."""
    import ast
    from pathlib import Path

    stubs = Path(deskwire.__file__).parent / "_deskwire"
    missing = []
    for stub in sorted(stubs.glob("*.pyi")):
        def visit(body: List[ast.stmt], where: str) -> None:
            for node in body:
                if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and not node.name.startswith("_"):
                    if ast.get_docstring(node) is None:
                        missing.append(f"{where}{node.name}")
                if isinstance(node, ast.ClassDef):
                    visit(node.body, f"{where}{node.name}.")

        visit(ast.parse(stub.read_text()).body, f"{stub.stem}.")
    assert missing == []
