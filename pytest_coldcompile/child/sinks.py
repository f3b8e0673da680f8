"""A cold child's reports and warnings, each written as a record as soon as it exists (a later
crash keeps it); a child that runs earlier tests first writes theirs apart.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_coldcompile.records import (
    write_record,
)

EARLIER = "earlier"
"""Where a child that runs earlier tests before its own (``ColdEngine.launch_again``'s
``before``) writes their reports and warnings: a directory under its own, so that the test's
records stay the test's alone."""

def record_dir(test_dir: str, target: str | None, nodeid: str | None) -> str:
    """The directory for a record of nodeid in a child of target (None: any test is its)."""
    if target is None or nodeid is None or nodeid == target:
        return test_dir
    earlier = os.path.join(test_dir, EARLIER)
    os.makedirs(earlier, exist_ok=True)
    return earlier

class ReportSink:
    """Writes each report of the test as soon as it exists, so a later crash keeps it."""

    def __init__(
        self, config: pytest.Config, test_dir: str | None, target: str | None = None
    ) -> None:
        self.config = config
        self.test_dir = test_dir  # None: armed in a fork server, no child yet
        self.target = target  # the child's own test; others' reports go to EARLIER

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Any:
        report = yield
        if self.test_dir is None:
            return report
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        write_record(record_dir(self.test_dir, self.target, item.nodeid),
                     {"type": "report", "data": data})
        return report

class WarningSink:
    """Records the warnings the test raised; the parent hands them to its own warning hooks."""

    def __init__(self, test_dir: str | None, target: str | None = None) -> None:
        self.test_dir = test_dir  # None: armed in a fork server, no child yet
        self.target = target  # the child's own test; others' warnings go to EARLIER

    def pytest_warning_recorded(self, warning_message: Any, when: str, nodeid: str) -> None:
        if when != "runtest" or self.test_dir is None:
            return  # a spawned child's config and collection warnings are the parent's too
        category = warning_message.category
        write_record(
            record_dir(self.test_dir, self.target, nodeid),
            {
                "type": "warning",
                "when": when,
                "message": str(warning_message.message),
                "category": f"{category.__module__}.{category.__qualname__}",
                "filename": warning_message.filename,
                "lineno": warning_message.lineno,
            },
        )
