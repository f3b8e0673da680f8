"""Shards across machines with pytest-split: the durations it stores under --cold-compile are
the cold children's, and --splits/--group partitions a cold suite (docs/ci-gates.md's recipe).
"""

from __future__ import annotations

import json
import re

import pytest
from coldhelp import needs_fork, needs_modules, run

pytestmark = [needs_fork, needs_modules("pytest_split")]

SUITE = """
import os, time, pytest

@pytest.mark.parametrize("seconds", [0.2, 0.4, 1.2, 0.3])
def test_sleep(seconds, cold_state):
    assert cold_state.cold and os.getpid() != int(os.environ["PARENT_PID"])
    time.sleep(seconds)
"""


def _ran(result: pytest.RunResult) -> set[str]:
    return set(re.findall(r"PASSED (\S+)", result.stdout.str()))


def test_stored_durations_are_the_cold_childrens_and_groups_partition_the_suite(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest("import os\nos.environ['PARENT_PID'] = str(os.getpid())\n")
    pytester.makepyfile(test_suite=SUITE)
    stored = run(pytester, "--cold-compile", "--store-durations",
                 "--durations-path=durations.json")
    stored.assert_outcomes(passed=4)
    durations = json.loads((pytester.path / "durations.json").read_text())
    assert sorted(durations) == [f"test_suite.py::test_sleep[{s}]" for s in
                                 ("0.2", "0.3", "0.4", "1.2")]
    for nodeid, seconds in durations.items():
        slept = float(nodeid.split("[")[1].rstrip("]"))
        assert slept <= seconds < slept + 5, (nodeid, seconds)  # the body's time, in the child

    groups = []
    for group in (1, 2):
        result = run(pytester, "--cold-compile", "--splits=2", f"--group={group}",
                     "--durations-path=durations.json", "--splitting-algorithm=least_duration",
                     "-rA", "--cold-compile-report=cold.json")
        assert result.ret == 0
        result.stdout.fnmatch_lines(["*cold compile summary: * cold tests*"])
        groups.append(_ran(result))
        assert set(json.loads((pytester.path / "cold.json").read_text())) == groups[-1]
    first, second = groups
    assert first.isdisjoint(second) and len(first | second) == 4
    # least_duration balances by the stored cold durations: the 1.2 s test is alone
    assert {"test_suite.py::test_sleep[1.2]"} in (first, second)
