"""Show kforge's ROCm device-code reports in the test summary, so CI logs carry the resource numbers."""

from __future__ import annotations

import pytest

_REPORTS: list[str] = []


@pytest.fixture
def rocm_report():
    """Call with a `kforge build --backend rocm --device-only` output to have it printed after the run."""
    return _REPORTS.append


def pytest_terminal_summary(terminalreporter):
    if _REPORTS:
        terminalreporter.section("ROCm device code (compiled and disassembled, not executed)")
        for text in _REPORTS:
            terminalreporter.write_line(text.rstrip())
