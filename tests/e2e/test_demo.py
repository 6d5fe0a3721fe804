"""The README's main job, as a test: build the example kernels, push them to a local hub, load them with
kforge's and HF's loaders, run them and compare with torch (scripts/demo.py; CPU variants only in CI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_builds_pushes_loads_and_matches_torch():
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "demo.py"), "--backend", "cpu"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # Both loaders ran both kernels and every comparison held.
    for loader in ("kforge", "kernels"):
        assert f"==> {loader}.get_kernel from the hub" in output, output
    assert output.count("  relu: True") == 2, output
    assert output.count("  fp8-gemm: True") == 2, output
    assert "OK: built, pushed, loaded" in output
