"""Running a tool from a test: the command must succeed; its output is returned."""

from __future__ import annotations

import subprocess


def run(cmd: list, **kw) -> str:
    """stdout + stderr of `cmd` (extra keywords go to subprocess.run); fails the test, with the command and
    the tail of its output, when it exits non-zero."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    shown = " ".join(map(str, cmd))
    tail = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, f"{shown} failed ({proc.returncode}):\n{tail}"
    return proc.stdout + proc.stderr
