"""The downstream example of docs/find-masker.md (examples/masker): a plain run passes, a cold
run fails test_forward_traced, and --cold-compile-find-masker names test_forward_eager and the
selector's cached admission."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from coldhelp import needs_fork

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "masker"


def run_example(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    # A subprocess: the example's conftest registers its selector in pytest_coldcompile's
    # process-wide registry, which an inline run would leave behind.
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=120)


def test_a_plain_run_passes_because_an_earlier_test_warmed_the_selector(
    pytester: pytest.Pytester,
) -> None:
    run_example(pytester).assert_outcomes(passed=21)


@needs_fork
def test_the_finder_names_the_masker_and_its_state(pytester: pytest.Pytester) -> None:
    result = run_example(pytester, "--cold-compile", "--cold-compile-find-masker",
                         "--cold-compile-report=report.json")
    result.assert_outcomes(passed=20, failed=1)
    result.stdout.fnmatch_lines([
        "*= cold compile maskers: 1 test failed cold, 1 masked by an earlier test =*",
        "tests/test_layers.py::test_forward_traced fails cold; masked by "
        "tests/test_layers.py::test_forward_eager (selector toytiles: admission cached); "
        "7 cold children for 12 earlier tests",
    ])
    records = json.loads((pytester.path / "report.json").read_text())
    masker = records["tests/test_layers.py::test_forward_traced"]["masker"]
    assert masker["nodeid"] == "tests/test_layers.py::test_forward_eager"
    assert (masker["verdict"], masker["state"]) == ("masked", "selector admission cached")
