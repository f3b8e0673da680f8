"""Compile-time budgets: a cold test whose compile time (launch selection + tracing + Inductor)
exceeds its budget fails although its body passed, as a pytest-timeout limit fails a test.
Judged in the pytest process from the figures its child recorded.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_coldcompile.report import PREFIX

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


def apply(
    item: pytest.Item,
    reports: list[pytest.TestReport],
    summary: dict[str, Any] | None,
    budget: tuple[float | None, str],
) -> None:
    """Record the budget on the teardown report; over it, turn the passed call into a failure.

    Only a passed call fails: a failure or skip already says more, and a child that recorded
    no figures (a crash) is judged by what killed it.
    """
    seconds, source = budget
    exceeded: bool | None = None
    if seconds is not None and summary:
        exceeded = compile_seconds(summary) > seconds
        at = next((i for i, r in enumerate(reports) if r.when == "call"), None)
        call = reports[at] if at is not None else None
        if exceeded and call is not None and call.passed and not hasattr(call, "wasxfail"):
            reports[at] = _failed_call(item, call, exceeded_message(seconds, summary, source))
    if reports:
        reports[-1].user_properties.extend(
            [(PREFIX + "budget_s", seconds), (PREFIX + "budget_exceeded", exceeded)]
        )


def _failed_call(item: pytest.Item, call: pytest.TestReport, message: str) -> pytest.TestReport:
    """The call report failed with message, as pytest.fail(pytrace=False) in the body would
    fail it (so -rA, JUnit and xdist show the message); the child's output and figures kept."""

    def fail() -> None:
        pytest.fail(message, pytrace=False)

    # Built directly, not through the makereport hook: other plugins' wrappers (rerunfailures)
    # expect the state of an in-process run there.
    failed = pytest.TestReport.from_item_and_call(item, pytest.CallInfo.from_call(fail, "call"))
    failed.sections = list(call.sections)
    failed.duration = call.duration
    failed.user_properties = list(call.user_properties)
    return failed
