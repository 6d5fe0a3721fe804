"""Loader test setup: import kforge from this checkout (also in subprocesses) and give each test its own
caches."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = PYTHON_DIR.parent
sys.path.insert(0, str(PYTHON_DIR))
sys.path.insert(0, str(REPO_ROOT / "tests"))  # support.kforge_hub
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYTHON_DIR), os.environ.get("PYTHONPATH")]))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """A fresh KERNELS_CACHE and no LOCAL_KERNELS / offline flag leaking in from the environment."""
    monkeypatch.setenv("KERNELS_CACHE", str(tmp_path / "kernels-cache"))
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
