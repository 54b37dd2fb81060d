"""tests/vectors/{rexd,sidecar,gateway,mobile}.json through the package, both halves of each
case: the JSON Schema the package carries (``deskwire.schemas.validate``, with the Python
``jsonschema`` package, against ``$defs/<def>`` of the case's ``schema``, else the file's) and
``read`` of ``deskwire.rexd``, ``deskwire.sidecar``, ``deskwire.gateway`` and
``deskwire.mobile`` (the core's types). Each accepts a case exactly when it is ``valid``, and a
valid case read comes back as its ``canonical`` form (else its ``json``). The gateway
``sequences`` run in test_vectors_gateway.py."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable, Dict, List

import pytest

import deskwire
from deskwire import gateway, mobile, rexd, schemas, sidecar

from conftest import REPO, load_vectors

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
            case = {**case, "schema": case.get("schema", doc["schema"])}
            out.append(pytest.param(protocol, case, id=f"{protocol}: {case['name']}"))
    return out


@pytest.mark.parametrize("protocol,case", cases())
def test_schema_vectors_against_the_carried_schemas(protocol: str, case: Dict[str, Any]) -> None:
    if case["valid"]:
        schemas.validate(case["schema"], case["def"], case["json"])
    else:
        with pytest.raises(deskwire.ProtocolError) as caught:
            schemas.validate(case["schema"], case["def"], case["json"])
        assert caught.value.code == "invalid"


@pytest.mark.parametrize("protocol,case", cases())
def test_schema_vectors_through_the_types(protocol: str, case: Dict[str, Any]) -> None:
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


def test_every_schema_document_is_carried_and_parses() -> None:
    root = REPO / "core" / "schemas"
    on_disk = sorted(p.name for p in root.glob("*.schema.json"))
    assert schemas.names() == on_disk
    for name in on_disk:
        document = schemas.schema(name)
        assert document == json.loads((root / name).read_text())
        assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schemas.schema("rexd") == schemas.schema("core/schemas/rexd.schema.json")
    assert schemas.schema("mobile")["$id"].endswith("/ws-message.schema.json")
    # A new dict each time: changing one does not change the next.
    schemas.schema("rexd")["$defs"].clear()
    assert schemas.schema("rexd")["$defs"]


def test_validate_names_where_a_value_breaks_the_schema() -> None:
    schemas.validate("rexd", "ExecStartParams", {"session_id": "s_1", "argv": ["ls"]})
    assert schemas.is_valid("mobile", "ClientMessage", {"type": "pong"})
    assert not schemas.is_valid("mobile", "ClientMessage", {"type": "ping"})
    with pytest.raises(deskwire.ProtocolError) as caught:
        schemas.validate("rexd", "ExecStartParams", {"session_id": "s_1", "argv": "ls"})
    assert caught.value.code == "invalid"
    assert caught.value.message.startswith("argv: ")


def test_unknown_schema_or_def_is_a_local_error() -> None:
    for name in ["oa1", "nope.schema.json", "../rexd.schema.json", ""]:
        with pytest.raises(deskwire.LocalError) as caught:
            schemas.schema(name)
        assert caught.value.code == "unknown_schema"
        # The message names what there is.
        assert "gateway, mobile" in caught.value.message
        assert "rexd.schema.json" in caught.value.message
    with pytest.raises(deskwire.LocalError) as caught:
        schemas.validate("rexd", "NoSuchDef", {})
    assert caught.value.code == "unknown_def"
    with pytest.raises(TypeError):
        schemas.schema(None)  # type: ignore[arg-type]


def test_validate_without_jsonschema_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    schemas._VALIDATORS.clear()
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # as if not installed
    try:
        with pytest.raises(deskwire.LocalError) as caught:
            schemas.validate("rexd", "ExecStartParams", {})
        assert caught.value.code == "missing_dependency"
        assert "deskwire[schemas]" in caught.value.message
        assert schemas.schema("rexd")["$defs"]  # reading the documents needs nothing
    finally:
        schemas._VALIDATORS.clear()
