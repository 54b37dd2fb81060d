"""A REXD session against a released rexd, from the outside: session.open, exec.start (its
stdout and exit), fs.read. The daemon is the command after `--`, serving --stdio.

    python3 rexd_session.py ROOT PROGRAM EXPECTED_STDOUT FILE FILE_CONTENT -- COMMAND...

ROOT is the workspace root as the daemon sees it; PROGRAM (an absolute path there) is run with
`-V` (the short version, without `--version`'s commit and features) and must print
EXPECTED_STDOUT; FILE (relative to ROOT) must read FILE_CONTENT.
"""

import json
import subprocess
import sys
import threading
import queue

WAIT = 60


def main() -> int:
    split = sys.argv.index("--")
    root, program, expected, path, content = sys.argv[1:split]
    daemon = subprocess.Popen(sys.argv[split + 1 :], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    lines: "queue.Queue[dict]" = queue.Queue()

    def read() -> None:
        for line in daemon.stdout:
            lines.put(json.loads(line))

    threading.Thread(target=read, daemon=True).start()
    next_id = 0
    notes = []

    def call(method: str, params: dict) -> dict:
        nonlocal next_id
        next_id += 1
        message = {"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}
        daemon.stdin.write((json.dumps(message) + "\n").encode())
        daemon.stdin.flush()
        while True:
            reply = lines.get(timeout=WAIT)
            if reply.get("id") == next_id:
                if "error" in reply:
                    raise SystemExit(f"{method} failed: {reply['error']}")
                return reply["result"]
            notes.append(reply)

    try:
        opened = call("session.open", {"client_name": "dist-test", "workspace_roots": [root]})
        session = opened["session_id"]
        print(f"session.open: {opened['protocol']}, server {opened['server_version']}")
        started = call("exec.start", {"session_id": session, "argv": [program, "-V"], "cwd": root})
        stdout = ""
        while True:
            note = notes.pop(0) if notes else lines.get(timeout=WAIT)
            params = note.get("params", {})
            if params.get("process_id") != started["process_id"]:
                continue
            if note.get("method") == "exec.stdout":
                stdout += params["data"]
            elif note.get("method") == "exec.exit":
                break
        print(f"exec.start {program} -V: {stdout.strip()!r}, exit {params['exit_code']}")
        if params["exit_code"] != 0 or stdout.strip() != expected:
            raise SystemExit(f"expected {expected!r} and exit 0")
        read = call("fs.read", {"session_id": session, "path": path})
        print(f"fs.read {path}: {read['content']!r}")
        if read["content"] != content:
            raise SystemExit(f"expected {content!r}")
    finally:
        daemon.stdin.close()
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
