#!/usr/bin/env python3
"""A sidecar for the Rust core, served with ``deskwire.sidecar.serve``: NDJSON requests on stdin,
answers and progress on stdout, logs on stderr. ``examples/sidecar_host`` spawns and drives it.

Methods: ``health.ping`` and ``lifecycle.shutdown`` (built in), ``training.start`` (a stand-in
for fine-tuning that reports progress per epoch), ``inference.complete`` (an echo that takes
``delay_sec`` seconds, for timeouts), ``model.load`` (fails with ``MODEL_NOT_FOUND`` for an
unknown model).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Dict

from deskwire import sidecar

log = logging.getLogger("example-sidecar")
MODELS = {"default-llm", "tiny"}


def required(params: Dict[str, Any], name: str) -> Any:
    """``params[name]``, or the caller's fault (``INVALID_PARAMS``) when it is missing."""
    if name not in params:
        raise sidecar.SidecarError("INVALID_PARAMS", f"missing {name!r}")
    return params[name]


async def training_start(params: Dict[str, Any], progress: sidecar.Progress) -> Dict[str, Any]:
    """Pretends to fine-tune: one progress message per epoch, then the final metrics."""
    model_id = required(params, "model_id")
    config = params.get("config") or {}
    epochs = int(config.get("max_epochs", 3))
    loss = 1.0
    for epoch in range(1, epochs + 1):
        await asyncio.sleep(0.05)
        loss *= 0.5
        progress({"stage": "training", "epoch": epoch, "total_epochs": epochs,
                  "global_step": epoch * 100, "metrics": {"train_loss": loss}})
        log.info("epoch %d/%d loss %.4f", epoch, epochs, loss)
    return {"status": "completed", "model_path": f"/tmp/models/{model_id}",
            "metrics": {"train_loss": loss, "epochs": epochs}}


async def inference_complete(params: Dict[str, Any], progress: sidecar.Progress) -> Dict[str, Any]:
    """Echoes the prompt after ``delay_sec`` seconds."""
    await asyncio.sleep(float(params.get("delay_sec", 0)))
    text = str(required(params, "prompt"))
    return {"text": text, "tokens_used": len(text.split()), "model_id": params.get("model_id", "default-llm")}


async def model_load(params: Dict[str, Any], progress: sidecar.Progress) -> Dict[str, Any]:
    """Loads a known model."""
    model_id = required(params, "model_id")
    if model_id not in MODELS:
        raise sidecar.SidecarError("MODEL_NOT_FOUND", f"no model {model_id!r}")
    return {"status": "loaded", "model_id": model_id}


if __name__ == "__main__":
    sidecar.serve({
        "training.start": training_start,
        "inference.complete": inference_complete,
        "model.load": model_load,
    })
