"""Shared pytest fixtures for the tests/ suites (hub interop, end-to-end)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.kforge_hub import Hub, start_hub  # noqa: E402


@pytest.fixture
def kforge_hub(tmp_path: Path):
    """A running `kforge hub serve` on 127.0.0.1 (see support/kforge_hub.py for the Hub API)."""
    hub: Hub = start_hub(tmp_path)
    try:
        yield hub
    finally:
        hub.stop()
