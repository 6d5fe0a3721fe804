"""Shared fixtures for the ROCm tests: the CPU emulator's drivers (tests/rocm/emu), and kforge's device-code
reports shown in the test summary so CI logs carry the resource numbers."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

EMU = Path(__file__).resolve().parent / "emu"
CLANG = "clang++-19"

_REPORTS: list[str] = []


@pytest.fixture(scope="session")
def build_emu_driver(tmp_path_factory):
    """Call with a driver's name (`emu/<name>_driver.cpp`) to get it compiled for the CPU; without clang++-19
    the test is skipped (failed on CI)."""

    def build(name: str) -> Path:
        if shutil.which(CLANG) is None:
            message = f"missing {CLANG}: run scripts/install-rocm-tools.sh"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        exe = tmp_path_factory.mktemp("emu") / name
        src = EMU / f"{name}_driver.cpp"
        cmd = [CLANG, "-std=c++20", "-O2", "-pthread", "-w", "-I", str(EMU), str(src), "-o", str(exe)]
        proc = subprocess.run(cmd, capture_output=True)
        assert proc.returncode == 0, proc.stderr.decode()
        return exe

    return build


@pytest.fixture
def rocm_report():
    """Call with a `kforge build --backend rocm --device-only` output to have it printed after the run."""
    return _REPORTS.append


def pytest_terminal_summary(terminalreporter):
    if _REPORTS:
        terminalreporter.section("ROCm device code (compiled and disassembled, not executed)")
        for text in _REPORTS:
            terminalreporter.write_line(text.rstrip())
