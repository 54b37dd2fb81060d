"""The JSON Schemas of deskwire's JSON protocols (``core/schemas/``, JSON Schema 2020-12),
carried in the package.

:func:`schema` gives a document as a ``dict``, by file name (``"rexd.schema.json"``) or by
protocol (``"rexd"``, ``"sidecar"``, ``"gateway"``, ``"mobile"``: the document that protocol's
messages are written against). :func:`validate` checks a value against one ``$defs`` entry with
the ``jsonschema`` package (``pip install 'deskwire[schemas]'``)::

    from deskwire import schemas
    schemas.validate("rexd", "ExecStartParams", {"session_id": "s_1", "argv": ["ls"]})
    schemas.is_valid("mobile", "ClientMessage", {"type": "ping"})      # True

The schema says what a message may look like; ``read`` of :mod:`deskwire.rexd`,
:mod:`deskwire.sidecar`, :mod:`deskwire.gateway` and :mod:`deskwire.mobile` reads it through the
core's types, as a peer would. The conformance vectors hold both to the same cases.
"""

from __future__ import annotations

import importlib
import json
from typing import Any, Dict, List, Tuple

from ._deskwire import schema_names, schema_text
from ._errors import LocalError, ProtocolError

__all__ = ["names", "schema", "validate", "is_valid"]


def names() -> List[str]:
    """The file names of the schema documents, e.g. ``"rexd.schema.json"``."""
    return schema_names()


def schema(name: str) -> Dict[str, Any]:
    """The schema document ``name`` (a file name, optionally under ``core/schemas/`` as the
    vectors write it, or a protocol) as a new ``dict``; :class:`deskwire.LocalError` with code
    ``unknown_schema`` for any other name."""
    parsed: Dict[str, Any] = json.loads(schema_text(name))
    return parsed


# Compiled validators by (schema name, def). Only names and defs that exist get in, so it
# holds at most one per def and spelling of its schema's name.
_VALIDATORS: Dict[Tuple[str, str], Any] = {}


def _validator(name: str, def_name: str) -> Any:
    known = _VALIDATORS.get((name, def_name))
    if known is not None:
        return known
    try:
        # Imported by name: an optional dependency, whose types a user may not have installed.
        jsonschema = importlib.import_module("jsonschema")
    except ImportError:
        raise LocalError(
            "missing_dependency",
            "validating needs the jsonschema package: pip install 'deskwire[schemas]'",
        ) from None
    document = schema(name)
    defs = document.get("$defs", {})
    if def_name not in defs:
        raise LocalError("unknown_def", f"{name} has no $defs entry {def_name!r}")
    # The def alone: the document's own root (whole messages) gives way to the def, and its
    # other defs stay for the def's references.
    alone = {"$schema": document["$schema"], "$defs": defs, "$ref": f"#/$defs/{def_name}"}
    validator = jsonschema.Draft202012Validator(alone)
    _VALIDATORS[(name, def_name)] = validator
    return validator


def validate(name: str, def_name: str, value: Any) -> None:
    """Checks ``value`` against ``$defs/<def_name>`` of the schema ``name`` (a file name or a
    protocol). Raises :class:`deskwire.ProtocolError` (code ``invalid``) naming where the value
    breaks the schema, :class:`deskwire.LocalError` for an unknown schema or def (codes
    ``unknown_schema``, ``unknown_def``) or when ``jsonschema`` is not installed
    (``missing_dependency``)."""
    validator = _validator(name, def_name)
    error = next(iter(validator.iter_errors(value)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(the value)"
        raise ProtocolError("invalid", f"{where}: {error.message}")


def is_valid(name: str, def_name: str, value: Any) -> bool:
    """Whether ``value`` fits ``$defs/<def_name>`` of the schema ``name`` (see :func:`validate`;
    unknown names and a missing ``jsonschema`` raise as there)."""
    return bool(_validator(name, def_name).is_valid(value))
