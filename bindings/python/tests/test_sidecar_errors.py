"""What deskwire.sidecar.serve answers when a handler fails, in a real child process: the
handler's own bugs are INTERNAL_ERROR (never INVALID_PARAMS, which blames the caller), the
codes a handler raises are sent as they are, and a bad progress report raises at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from deskwire import LocalError, sidecar

SERVE = '''
from deskwire import LocalError, sidecar

async def returns_a_set(params, progress):
    return {1, 2}

async def key_error(params, progress):
    return {"x": params["missing"]}

async def local_error(params, progress):
    raise LocalError("invalid_value", "a deskwire call refused its argument")

async def value_error(params, progress):
    return int("not a number")

async def bad_params(params, progress):
    raise sidecar.SidecarError("INVALID_PARAMS", "model_id is missing")

async def custom_code(params, progress):
    raise sidecar.SidecarError("NOT_A_SPEC_CODE", "custom")

async def badly_spelt_code(params, progress):
    raise sidecar.SidecarError("not snake case", "custom")

async def bad_progress(params, progress):
    try:
        progress("not a dict")
    except TypeError as e:
        return {"refused": str(e)}
    return {"refused": None}

sidecar.serve({
    "returns_a_set": returns_a_set, "key_error": key_error, "local_error": local_error,
    "value_error": value_error, "bad_params": bad_params, "custom_code": custom_code,
    "badly_spelt_code": badly_spelt_code, "bad_progress": bad_progress,
})
'''

METHODS = [
    "returns_a_set", "key_error", "local_error", "value_error", "bad_params", "custom_code",
    "badly_spelt_code", "bad_progress",
]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Dict[str, Any]]:
    script = tmp_path_factory.mktemp("sidecar") / "serve.py"
    script.write_text(SERVE)
    requests = b"".join(
        json.dumps({"id": m, "method": m, "params": {}}).encode() + b"\n" for m in METHODS
    ) + b'{"id":"bye","method":"lifecycle.shutdown","params":{}}\n'
    process = subprocess.run(
        [sys.executable, str(script)], input=requests, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, timeout=60,
    )
    assert process.returncode == 0, process.stderr.decode()
    lines = [json.loads(line) for line in process.stdout.splitlines()]
    assert not any("progress" in line for line in lines), lines
    return {line["id"]: line for line in lines}


@pytest.mark.parametrize(
    "method, says",
    [("returns_a_set", "not a JSON value"), ("key_error", "KeyError"),
     ("local_error", "LocalError"), ("value_error", "ValueError"),
     ("badly_spelt_code", "SCREAMING_SNAKE_CASE")],
)
def test_the_handlers_own_failures_are_internal_errors(
    answers: Dict[str, Dict[str, Any]], method: str, says: str
) -> None:
    error = answers[method]["error"]
    assert error["code"] == "INTERNAL_ERROR", error
    assert says in error["message"], error


def test_codes_the_handler_raises_are_sent_as_they_are(answers: Dict[str, Dict[str, Any]]) -> None:
    assert answers["bad_params"]["error"] == {"code": "INVALID_PARAMS", "message": "model_id is missing"}
    assert answers["custom_code"]["error"] == {"code": "NOT_A_SPEC_CODE", "message": "custom"}


def test_progress_that_is_not_a_dict_raises_at_once(answers: Dict[str, Dict[str, Any]]) -> None:
    refused = answers["bad_progress"]["result"]["refused"]
    assert refused is not None and "dict" in refused, answers["bad_progress"]


def test_sidecar_error_refuses_a_code_the_spec_cannot_carry() -> None:
    assert sidecar.SidecarError("MY_OWN_CODE_2", "x").code == "MY_OWN_CODE_2"
    for bad in ["not snake case", "lower", "", "_LEADING", "9LIVES"]:
        with pytest.raises(LocalError, match="SCREAMING_SNAKE_CASE"):
            sidecar.SidecarError(bad, "x")
    with pytest.raises(TypeError):
        sidecar.SidecarError("X", 5)  # type: ignore[arg-type]
