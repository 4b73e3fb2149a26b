"""The count of tests skipped for want of torch or torchdata, printed at the end of every run (a pytest hook).

``tests/conftest.py`` imports the hook. The README's test command installs both first (on Python 3.11
their CPU builds lie on this machine's disk), so under it the line reads ``torch tests skipped: 0``;
any other count says which tests a run did not run.
"""
from __future__ import annotations

from typing import Any

from support.optional import NO_TORCH, NO_TORCHDATA


def _reason(report: Any) -> str:
    """The reason of a skipped test's report (``(path, line, "Skipped: reason")``)."""
    return str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print ``torch tests skipped: N``: the tests skipped with the reason `NO_TORCH` or `NO_TORCHDATA`."""
    skipped = [report for report in terminalreporter.stats.get("skipped", [])
               if any(reason in _reason(report) for reason in (NO_TORCH, NO_TORCHDATA))]
    terminalreporter.write_line(f"torch tests skipped: {len(skipped)}")
