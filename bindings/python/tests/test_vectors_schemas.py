"""tests/vectors/{rexd,sidecar,gateway,mobile}.json through ``read`` of ``deskwire.rexd``,
``deskwire.sidecar``, ``deskwire.gateway`` and ``deskwire.mobile``: a case is accepted exactly
when it is ``valid``, and a valid case comes back as its ``canonical`` form (else its ``json``).

Not run here: the JSON Schema half of each case (the Rust runners validate the vectors against
``core/schemas/`` with the jsonschema crate; a binding reads values through the types, it does
not ship the schemas). The gateway ``sequences`` run in test_vectors_gateway.py."""

from __future__ import annotations

from typing import Any, Callable, Dict, List

import pytest

import deskwire
from deskwire import gateway, mobile, rexd, sidecar

from conftest import load_vectors

READERS: Dict[str, Callable[[str, Any], Any]] = {
    "rexd": rexd.read,
    "sidecar": sidecar.read,
    "gateway": gateway.read,
    "mobile": mobile.read,
}


def cases() -> List[Any]:
    out = []
    for protocol in READERS:
        doc = load_vectors(f"{protocol}.json")
        assert doc["protocol"] == protocol
        for case in doc["cases"]:
            out.append(pytest.param(protocol, case, id=f"{protocol}: {case['name']}"))
    return out


@pytest.mark.parametrize("protocol,case", cases())
def test_schema_vectors(protocol: str, case: Dict[str, Any]) -> None:
    read = READERS[protocol]
    if case["valid"]:
        assert read(case["def"], case["json"]) == case.get("canonical", case["json"])
    else:
        with pytest.raises(deskwire.ProtocolError):
            read(case["def"], case["json"])


def test_unknown_def_is_a_local_error() -> None:
    with pytest.raises(deskwire.LocalError) as caught:
        rexd.read("NoSuchDef", {})
    assert caught.value.code == "unknown_def"
