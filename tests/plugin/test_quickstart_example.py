"""The quickstart example the README ships (examples/quickstart), run by the README's command.

The cold regression passes with the validating selector and fails with the trial-and-error
one (TOYKERNELS_SELECTION=trial), which a warm in-process run of the same test does not see.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from coldhelp import needs_fork

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "quickstart"
REGRESSION = "tests/test_blocked_sum.py"


def try_it_args() -> list[str]:
    """The pytest arguments of the README's `Try it:` command."""
    line = next(line for line in (REPO / "README.md").read_text().splitlines()
                if line.startswith("Try it:"))
    command = re.search(r"`([^`]*)`", line).group(1)
    assert "pytest " in command, command
    return command.split("pytest ", 1)[1].split()


def copy_example(pytester: pytest.Pytester) -> Path:
    target = pytester.path / "examples" / "quickstart"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def run_try_it(pytester: pytest.Pytester) -> pytest.RunResult:
    # A subprocess even for the in-process case: the example's conftest registers its selector
    # in pytest_coldcompile's process-wide registry, which an inline run would leave behind.
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *try_it_args(), timeout=120)


@needs_fork
def test_the_readme_command_runs_the_example_cold_and_reports_it(pytester: pytest.Pytester):
    copy_example(pytester)
    result = run_try_it(pytester)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "cold-compile: fork (auto: *",
        "probe blocked_sum {'TILE': 256} {'shared': 196608, 'limit': 101376} out_of_resources",
        "probe blocked_sum {'TILE': 128} {'shared': 98304, 'limit': 101376} fits",
        "admit blocked_sum {'TILE': 128} {'shared': 98304, 'limit': 101376} fits",
        "*cold compile summary: 1 cold tests*",
        "test * probed  admitted  fallback  max smem",
        "*::test_compiled_call_fits_a_small_gpu  passed * 2         1         0     98304",
        "pytest process: torch.cuda initialized: no*",
    ])


@needs_fork
def test_the_cold_regression_catches_the_trial_and_error_selector(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    copy_example(pytester)
    monkeypatch.setenv("TOYKERNELS_SELECTION", "trial")
    result = run_try_it(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*OutOfResources: out of resource: shared memory, Required: 196608, "
        "Hardware limit: 101376",
        "FAILED *::test_compiled_call_fits_a_small_gpu*",
    ])


def test_a_warm_run_of_the_same_regression_misses_the_bug(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    # Without cold_compile the regression runs in-process after the eager test, whose choice
    # (made by loading) the selector reuses: the trial-and-error bug stays hidden.
    example = copy_example(pytester)
    regression = example / REGRESSION
    text = regression.read_text()
    assert "@pytest.mark.cold_compile " in text
    regression.write_text(text.replace("@pytest.mark.cold_compile ", "# (not cold) "))
    monkeypatch.setenv("TOYKERNELS_SELECTION", "trial")
    result = run_try_it(pytester)
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*cold compile summary*")
