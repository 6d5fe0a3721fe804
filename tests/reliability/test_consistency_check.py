"""The store consistency check of bench/reliability.py (run after every kill -9) must catch damage."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import tamper_suite

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("reliability_bench", REPO / "bench" / "reliability.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_consistency_check_passes_a_clean_store_and_names_a_damaged_blob(kforge_hub, tmp_path):
    variant, _ = tamper_suite.build_variant(tmp_path / "src", sign=False)
    token = kforge_hub.token("alice", orgs=["acme"])
    cmd = [str(tamper_suite.kforge_bin()), "push", str(variant.parent.parent), "--repo", "acme/relu"]
    done = subprocess.run(
        cmd, env=dict(os.environ, **kforge_hub.env(token)), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert bench.consistency_problems(kforge_hub, "acme/relu") == []

    # Damage the stored bytes of __init__.py (same size): the check must name the file.
    init = (variant / "__init__.py").read_bytes()
    blob = next(
        p
        for p in (kforge_hub.data_dir / "blobs").rglob("*")
        if p.is_file() and p.suffix != ".meta" and p.read_bytes() == init
    )
    blob.write_bytes(bytes([init[0] ^ 1]) + init[1:])
    problems = bench.consistency_problems(kforge_hub, "acme/relu")
    assert problems, "a damaged blob went unnoticed"
    assert all("__init__.py" in p for p in problems), problems

    # A leftover partial upload is reported too.
    (kforge_hub.data_dir / "tmp" / "upload-123").write_bytes(b"partial")
    assert any("partial uploads left" in p for p in bench.consistency_problems(kforge_hub, "acme/relu"))
