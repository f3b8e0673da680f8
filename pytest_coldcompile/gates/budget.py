"""Compile-time budgets: a cold test whose compile time (launch selection + tracing + Inductor)
exceeds its budget fails although its body passed, as a pytest-timeout limit fails a test.
Judged in the pytest process from the figures its child recorded.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_coldcompile import options
from pytest_coldcompile.child_spec import ChildSpec
from pytest_coldcompile.gates import settings

PARTS = (("selection", "selection_s"), ("tracing", "tracing_s"), ("inductor", "inductor_s"))


def compile_seconds(summary: dict[str, Any]) -> float:
    """Selection + tracing + Inductor seconds: compile_s plus any selection outside a compile
    window (an eager launch choosing its tile), which a budget counts too."""
    return sum(float(summary.get(key) or 0.0) for _, key in PARTS)


def exceeded_message(budget: float, summary: dict[str, Any], source: str) -> str:
    parts = ", ".join(f"{name} {float(summary.get(key) or 0.0):.1f}" for name, key in PARTS)
    return (
        f"compile budget {budget:g} s exceeded: {compile_seconds(summary):.1f} s ({parts}) "
        f"[budget from {source}]"
    )


class BudgetGate:
    """The budget as a gate on the plugin's hooks, in the pytest process that runs the tests."""

    def pytest_coldcompile_child_spec(self, item: pytest.Item, spec: ChildSpec) -> None:
        settings.budget_for(item)  # a bad budget= of the marker fails the setup, as timeout=

    def pytest_coldcompile_gate(self, item: pytest.Item, record: dict[str, Any]) -> str | None:
        """Record the budget; over it, fail the passed call. A child that recorded no figures
        (a crash) is judged by what killed it."""
        seconds, source = settings.budget_for(item)
        exceeded: bool | None = None
        message = None
        if seconds is not None and "compile_s" in record:  # the child recorded its figures
            exceeded = compile_seconds(record) > seconds
            if exceeded:
                message = exceeded_message(seconds, record, source)
        record["budget_s"] = seconds
        record["budget_exceeded"] = exceeded
        return message


def register(config: pytest.Config) -> None:
    """Where cold tests run: the pytest process (and, inherited, its forked children)."""
    if not options.settings(config).child_spec:
        config.pluginmanager.register(BudgetGate(), "coldcompile-budget")
