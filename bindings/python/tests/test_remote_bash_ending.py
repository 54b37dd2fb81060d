"""``oa1.remote_bash_ending``: how the command behind a ``RemoteBash`` answer ended, read from
the answer's last line, and the status a host mirroring it (a CLI, a CI step) exits with."""

from __future__ import annotations

import pytest

from deskwire import oa1


@pytest.mark.parametrize(
    "text,want",
    [
        ("hi\n", {"kind": "exited", "status": 0}),
        ("", {"kind": "exited", "status": 0}),
        ("no\n[exit code: 3]\n", {"kind": "exited", "status": 3}),
        ("x\n[signal: KILL]", {"kind": "signaled", "status": 137, "signal": "KILL"}),
        ("x\n[signal: 34]", {"kind": "signaled", "status": 162, "signal": "34"}),
        ("started\n...[cut at the 30 s timeout: 8 bytes arrived; the rest was cancelled]...",
         {"kind": "cut_at_timeout", "status": 124}),
        ("started\n...[cut short: remote `rexd` left #desk (quit: bye); 8 bytes arrived; how the "
         "command ended is unknown]...", {"kind": "cut_short", "status": 255}),
        # A marker that is not the last line is the command's own output.
        ("[exit code: 3]\nmore", {"kind": "exited", "status": 0}),
    ],
)
def test_an_answers_last_line_says_how_the_command_ended(text: str, want: object) -> None:
    assert oa1.remote_bash_ending(text) == want


def test_the_exit_marker_reads_back() -> None:
    line = oa1.exit_marker(None, "TERM")
    assert line is not None
    assert oa1.remote_bash_ending(f"out\n{line}") == {"kind": "signaled", "status": 143, "signal": "TERM"}
