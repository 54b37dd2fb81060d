"""tests/vectors/irc-msg-split.json (ircdocs parser-tests) through ``deskwire.irc.parse``."""

from __future__ import annotations

from typing import Any, Dict

import pytest

from deskwire import irc

from conftest import load_vectors

TESTS = load_vectors("irc-msg-split.json")["tests"]


@pytest.mark.parametrize("vector", TESTS, ids=[t["input"][:60] for t in TESTS])
def test_msg_split(vector: Dict[str, Any]) -> None:
    atoms = vector["atoms"]
    msg = irc.parse(vector["input"].encode())
    assert msg.command == atoms["verb"]
    assert msg.source == atoms.get("source")
    assert list(msg.params) == atoms.get("params", [])
    assert msg.tags == atoms.get("tags", {})
