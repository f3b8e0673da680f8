"""Compile-time budgets: cold_compile(budget=...), --cold-compile-budget, ini cold_compile_budget.

Compile seconds come from a fake selector's admit events (their ``seconds`` are selection
time), so no torch is needed: the budget judges selection + tracing + Inductor alike.
"""

from __future__ import annotations

import json

import pytest
from coldhelp import conftest, needs_fork, run

pytestmark = needs_fork

TIMED_SELECTOR = """
import pytest_coldcompile

class Event:
    def __init__(self, seconds):
        self.kind, self.op, self.outcome, self.seconds = "admit", "fwd", "fits", seconds
        self.config, self.resources = {"BLOCK": 64}, {"shared": 1024}

class Timed:
    name = "timed"
    def __init__(self):
        self.listeners = []
    def reset(self):
        pass
    def subscribe(self, listener):
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)
    def select(self, seconds):
        for listener in list(self.listeners):
            listener(Event(seconds))

SELECTOR = pytest_coldcompile.register_selector(Timed())
"""

TESTS = """
import pytest, conftest

@pytest.mark.cold_compile(budget=10)
def test_over():
    conftest.SELECTOR.select(12.25)

@pytest.mark.cold_compile(budget=10)
def test_under():
    conftest.SELECTOR.select(3.0)

@pytest.mark.cold_compile
def test_no_budget():
    conftest.SELECTOR.select(50.0)
"""


def _records(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "cold.json").read_text())


def test_a_marker_budget_fails_a_passing_test_with_the_breakdown(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(conftest(TIMED_SELECTOR))
    pytester.makepyfile(TESTS)
    pytester._monkeypatch.setenv("COLUMNS", "400")  # room for the message in -rA's line
    result = run(pytester, "-rA", "--cold-compile-report=cold.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2, failed=1)
    message = ("compile budget 10 s exceeded: 12.2 s (selection 12.2, tracing 0.0, "
               "inductor 0.0) [budget from cold_compile(budget=...) marker of "
               "test_a_marker_budget_fails_a_passing_test_with_the_breakdown.py::test_over]")
    result.stdout.fnmatch_lines([f"FAILED *::test_over - *{message[:40]}*"])
    assert message in result.stdout.str()  # fnmatch would read its [...] as a character class
    records = _records(pytester)
    over = records[next(k for k in records if k.endswith("test_over"))]
    under = records[next(k for k in records if k.endswith("test_under"))]
    free = records[next(k for k in records if k.endswith("test_no_budget"))]
    assert (over["outcome"], over["budget_s"], over["budget_exceeded"]) == ("failed", 10, True)
    assert (under["outcome"], under["budget_s"], under["budget_exceeded"]) == ("passed", 10, False)
    assert (free["outcome"], free["budget_s"], free["budget_exceeded"]) == ("passed", None, None)
    junit = (pytester.path / "junit.xml").read_text()
    assert junit.count("<failure") == 1 and "compile budget 10 s exceeded" in junit


def test_the_command_line_budget_is_overridden_by_the_marker_and_beats_the_ini(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(conftest(TIMED_SELECTOR))
    pytester.makeini("[pytest]\ncold_compile_budget = 1\n")
    pytester.makepyfile(TESTS)
    # ini 1 s would fail test_no_budget (50 s); the command line's 60 s wins over it, and
    # the markers' 10 s win over both (test_over fails at 12.25 s).
    result = run(pytester, "--cold-compile-budget=60", "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=2, failed=1)
    free = next(v for k, v in _records(pytester).items() if k.endswith("test_no_budget"))
    assert free["budget_s"] == 60 and free["budget_exceeded"] is False
    by_ini = run(pytester, "--cold-compile-report=cold.json")
    by_ini.assert_outcomes(passed=1, failed=2)  # the markers' 10 s still win for test_under
    assert "compile budget 1 s exceeded: 50.0 s (selection 50.0, tracing 0.0, inductor 0.0) " \
        "[budget from ini cold_compile_budget]" in by_ini.stdout.str()


def test_a_failing_body_is_reported_as_itself_not_as_a_budget(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(conftest(TIMED_SELECTOR))
    pytester.makepyfile(
        """
        import pytest, conftest

        @pytest.mark.cold_compile(budget=1)
        def test_fails():
            conftest.SELECTOR.select(5.0)
            assert False, "the body's own failure"
        """
    )
    result = run(pytester, "--cold-compile-report=cold.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the body's own failure*"])
    result.stdout.no_fnmatch_line("*compile budget*exceeded*")
    (record,) = _records(pytester).values()
    assert record["budget_exceeded"] is True  # recorded all the same


@pytest.mark.parametrize(
    ("args", "ini", "marker", "message"),
    [
        (["--cold-compile-budget=soon"], "", "",
         "*--cold-compile-budget: expected a number of seconds, got 'soon'*"),
        ([], "cold_compile_budget = -2", "",
         "*ini cold_compile_budget: expected seconds >= 0 (0: no limit), got '-2'*"),
        ([], "", "(budget='x')",
         "*cold_compile(budget=...) marker of *::test_it: expected a number of seconds, "
         "got 'x'*"),
        ([], "", "(budgt=3)",
         "*cold_compile marker of *::test_it: expected cold_compile or "
         "cold_compile(timeout=SECONDS), got *budgt* (its keyword arguments: timeout=SECONDS, "
         "budget=SECONDS)*"),
    ],
)
def test_bad_budgets_name_where_they_came_from(
    pytester: pytest.Pytester, args: list[str], ini: str, marker: str, message: str
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(f"import pytest\n@pytest.mark.cold_compile{marker}\ndef test_it():\n"
                        "    pass\n")
    result = run(pytester, *args)
    if marker:
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines([message])
    else:
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([message])
