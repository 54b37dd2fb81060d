#!/usr/bin/env python3
"""Runs the workspace's Rust test binaries side by side (three at a time), then the doctests.

`cargo test --workspace` runs its test binaries one after another. Most of their time is spent
waiting on real peers (ngircd's flood pacing, sshd, child processes), not on the CPU, so several
at once take about the time of the longest rather than the sum. tests/run.sh also lets each run
four of its tests at once (RUST_TEST_THREADS=4): 883 tests in 138 s here, doctests included,
where the same binaries one after another spent 273 s before the doctests (2 cores, 2026-11-29). Each binary runs as cargo runs it
(its package's directory as the working directory, `CARGO_MANIFEST_DIR` set) and its output is
printed whole when it ends, never interleaved, followed by cargo's own `test result:` line.

    python3 tests/rust_tests.py [--jobs N] [-- TEST-ARGS...]

Exits non-zero when any binary failed, after naming each.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def test_binaries():
    """(name, executable, package dir) of every test harness `cargo test --workspace` runs."""
    out = subprocess.run(
        ["cargo", "test", "--workspace", "--no-run", "--quiet", "--message-format=json"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    found = []
    for line in out.splitlines():
        m = json.loads(line)
        if m.get("reason") != "compiler-artifact" or not m["profile"]["test"]:
            continue
        if not m.get("executable"):
            continue
        target = m["target"]
        # `path+file:///work/rexd#0.1.0`, or `...#deskwire-integration@0.1.0` when the
        # directory is not the package's name.
        url, _, fragment = m["package_id"].partition("#")
        package = fragment.split("@")[0] if "@" in fragment else url.rstrip("/").rsplit("/", 1)[-1]
        name = f"{package} {target['kind'][0]} {target['name']}"
        found.append((name, m["executable"], os.path.dirname(m["manifest_path"])))
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("test_args", nargs="*")
    args = parser.parse_args()
    binaries = test_binaries()
    # The longest first (as far as names tell: the real-server suites), so two long ones do not
    # end up last on one lane.
    slow = (
        "irc_ngircd", "device_code", "rex_ssh", "ssh", "net", "irc_multi", "irc_network", "mcp",
        "reload",
    )
    binaries.sort(key=lambda b: (not any(s in b[1] for s in slow), b[0]))
    lock = threading.Lock()
    failed = []

    def run(binary):
        name, exe, cwd = binary
        env = dict(os.environ, CARGO_MANIFEST_DIR=cwd)
        start = time.monotonic()
        done = subprocess.run(
            [exe, *args.test_args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        took = time.monotonic() - start
        with lock:
            print(f"     Running {name} ({os.path.relpath(exe)}), {took:.1f}s", flush=True)
            sys.stdout.write(done.stdout.decode("utf-8", "replace"))
            sys.stdout.flush()
            if done.returncode != 0:
                failed.append(f"{name}: exit {done.returncode}")

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(run, binaries))
    doc = subprocess.run(["cargo", "test", "--workspace", "--doc", "--quiet", *(
        ["--", *args.test_args] if args.test_args else [])])
    if doc.returncode != 0:
        failed.append("doctests")
    if failed:
        print("failed: " + "; ".join(failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
