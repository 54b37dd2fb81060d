"""The ratios of the issue's two aims from one pytest-benchmark run (medians), then the same
with one buffer of lines each way (``drain_into``, the relay on the buffer):

    cd bindings/python && python -m pytest benches -k aim --benchmark-json=/tmp/oa1.json
    python benches/ratios.py /tmp/oa1.json
"""

from __future__ import annotations

import json
import sys


def main(path: str) -> None:
    with open(path) as f:
        median = {b["name"]: b["stats"]["median"] * 1e6 for b in json.load(f)["benchmarks"]}
    pairs = [
        ("bytes in, bytes out: pure Python / package (aim 20x)", "test_aim_bytes_pure_python", "test_aim_bytes_package"),
        ("str in, str out: package / conversion floor (aim 1.5x)", "test_aim_str_package", "test_aim_str_floor"),
        ("  one buffer each way, bytes: pure Python / package", "test_aim_bytes_pure_python", "test_buffer_bytes_package"),
        ("  one buffer each way, str: package / its floor", "test_buffer_str_package", "test_buffer_str_floor"),
    ]
    for label, top, bottom in pairs:
        if top in median and bottom in median:
            print(f"{label}: {median[top]:.1f} us / {median[bottom]:.1f} us = {median[top] / median[bottom]:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1])
