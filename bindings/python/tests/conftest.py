"""Shared helpers: where the repository's vectors are, and events back in the vectors' shape."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Dict

import pytest

from deskwire import Timeout, Transmit
from deskwire._events import REGISTRY

REPO = Path(os.environ.get("DESKWIRE_REPO", Path(__file__).resolve().parents[3]))
VECTORS = REPO / "tests" / "vectors"

_TAGS = {cls: tag for (_family, tag), cls in REGISTRY.items()}


def load_vectors(name: str) -> Dict[str, Any]:
    """A vector file of tests/vectors/."""
    with open(VECTORS / name, encoding="utf-8") as f:
        return json.load(f)


def event_json(event: Any) -> Dict[str, Any]:
    """An event dataclass in the core's serde shape: ``{"tag": {fields}}``."""
    return {_TAGS[type(event)]: dataclasses.asdict(event)}


def output_json(output: Any) -> Dict[str, Any]:
    """A ``poll_output`` value in the vectors' shape."""
    if isinstance(output, Transmit):
        return {"transmit": output.data.decode("utf-8")}
    if isinstance(output, Timeout):
        return {"timeout": output.at_ms}
    return {"event": event_json(output)}


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return REPO

