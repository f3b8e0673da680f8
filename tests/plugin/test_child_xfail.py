"""A crash under xfail marks (a signal, or the child exiting before it reported the test) is
judged as pytest judges an exception there: conditions, raises, run, strict and --runxfail all
count."""

from __future__ import annotations

import pytest
from coldhelp import needs_fork, run

pytestmark = needs_fork

CRASHES = """
import os, signal, sys, pytest

def crash():
    CRASH

@pytest.mark.xfail(False, reason="positional false condition")
def test_false_condition():
    crash()

@pytest.mark.xfail(True, reason="positional true condition")
def test_true_condition():
    crash()

@pytest.mark.xfail(condition=False, reason="keyword false condition")
def test_false_condition_kwarg():
    crash()

@pytest.mark.xfail("sys.platform == 'no-such-platform'", reason="string false condition")
def test_false_string_condition():
    crash()

@pytest.mark.xfail("sys.platform == sys.platform", reason="string true condition")
def test_true_string_condition():
    crash()

@pytest.mark.xfail(raises=ValueError, reason="wants a ValueError")
def test_raises_other_type():
    crash()

@pytest.mark.xfail(strict=True, reason="strict concerns passes only")
def test_strict():
    crash()

@pytest.mark.xfail(run=False, reason="never run")
def test_not_run():
    crash()
"""

EXPECTED_XFAIL = ["test_true_condition", "test_true_string_condition", "test_strict"]
EXPECTED_FAILED = [
    "test_false_condition",
    "test_false_condition_kwarg",
    "test_false_string_condition",
    "test_raises_other_type",
]


@pytest.mark.parametrize(("crash", "said"), [
    ("os.kill(os.getpid(), signal.SIGABRT)", "CRASHED with signal 6"),
    ("os._exit(7)", "EXITED with status 7"),
])
def test_crashes_under_xfail_follow_pytests_evaluation(
    cold: pytest.Pytester, crash: str, said: str
) -> None:
    cold.makepyfile(CRASHES.replace("CRASH", crash))
    result = run(cold, "--cold-compile", "-rxXf")
    result.assert_outcomes(failed=len(EXPECTED_FAILED), xfailed=len(EXPECTED_XFAIL) + 1)
    out = result.stdout.str()
    for name in EXPECTED_FAILED:
        assert f"FAILED test_crashes_under_xfail_follow_pytests_evaluation.py::{name}" in out
    result.stdout.fnmatch_lines(
        [
            f"*XFAIL*::test_true_condition - positional true condition (*{said}*",
            "*XFAIL*::test_not_run - *NOTRUN* never run",
        ]
    )
    result.stdout.fnmatch_lines(["*xfail(raises=*ValueError*) expects an exception, not a crash*"])
