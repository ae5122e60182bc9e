"""Session-wide test hooks: the fuzz figures in the terminal summary."""

from __future__ import annotations

import pytest

from tests.fuzzing import FUZZ_REPORT


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how many fuzzed events were tried, refused and accepted."""
    if FUZZ_REPORT:
        terminalreporter.section("fuzz figures")
        for line in FUZZ_REPORT:
            terminalreporter.write_line(line)
