"""The downstream gate of examples/custom_gate (docs/plugin.md, "Writing your own gate"): a
conftest implementing pytest_coldcompile_gate fails a cold test over its ini limit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from coldhelp import needs_fork

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_gate"


def run_example(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    # A subprocess: the example's conftest registers its selector in pytest_coldcompile's
    # process-wide registry, which an inline run would leave behind.
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", *args, timeout=120)


@needs_fork
def test_the_gate_fails_the_test_over_the_ini_limit_only(pytester: pytest.Pytester) -> None:
    result = run_example(pytester, "--cold-compile-report=report.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*admitted 98304 bytes of shared memory, over max_admitted_shared = 65536*",
        "PASSED tests/test_tiles.py::test_small_tile",
        "FAILED tests/test_tiles.py::test_large_tile - *",
    ])
    records = json.loads((pytester.path / "report.json").read_text())
    assert records["tests/test_tiles.py::test_large_tile"]["max_admitted_shared"] == 98304
    assert records["tests/test_tiles.py::test_large_tile"]["outcome"] == "failed"
    assert records["tests/test_tiles.py::test_small_tile"]["outcome"] == "passed"


@needs_fork
def test_the_ini_key_sets_the_limit(pytester: pytest.Pytester) -> None:
    result = run_example(pytester, "-o", "max_admitted_shared=131072")
    result.assert_outcomes(passed=2)
