"""Replays the fuzz seeds and saved crash inputs (fuzz/seeds, fuzz/regressions) through the fuzz targets'
bodies on stable Rust: `cargo test --manifest-path fuzz/Cargo.toml`, sharing the workspace's target dir."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_fuzz_seeds_and_regressions_replay():
    env = dict(os.environ, CARGO_TARGET_DIR=os.environ.get("CARGO_TARGET_DIR", str(REPO / "target")))
    cmd = ["cargo", "test", "--manifest-path", str(REPO / "fuzz" / "Cargo.toml"), "--", "--nocapture"]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert re.search(r"test result: ok\. 2 passed", out), out[-4000:]
    # Every target replayed its seeds.
    for target in ("build_toml", "metadata_json", "commit_ndjson", "elf_reader", "variant_name"):
        m = re.search(rf"{target}: (\d+) seeds, (\d+) regressions replayed", out)
        assert m and int(m.group(1)) > 0, f"{target} did not replay its seeds:\n{out[-4000:]}"
