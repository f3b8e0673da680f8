"""The fork engine readies the next test's child (forked, caches made, capture and cap set)
while the current test runs; what the tests see and report is what they saw before."""

from __future__ import annotations

from pathlib import Path

import pytest
from coldhelp import needs_fork, run

pytestmark = needs_fork

RECORD_READIED = """
import os
import pytest_coldcompile.child as child

real_ready = child.ready_forked

def ready_forked(item, orders):
    with open(os.path.join(os.environ["READIED_LOG"]), "a") as f:
        f.write(f"{os.getpid()} {item.name}\\n")
    real_ready(item, orders)

child.ready_forked = ready_forked

real_prepare = child.prepare

def prepare(config, orders):
    if orders["nodeid"].endswith("test_b"):
        raise RuntimeError("the set-up of test_b failed")
    return real_prepare(config, orders)

child.prepare = prepare
"""

TESTS = """
import os

def record():
    name = os.environ["PYTEST_CURRENT_TEST"].split("::")[1].split()[0]
    with open(os.environ["RAN_LOG"], "a") as f:
        f.write(f"{os.getpid()} {name} {os.environ['TORCHINDUCTOR_CACHE_DIR']}\\n")

def test_a():
    record()

def test_b():
    record()

def test_c():
    record()
"""


def lines(path: Path) -> dict[str, list[str]]:
    text = path.read_text() if path.exists() else ""
    return {fields[1]: [fields[0], *fields[2:]] for fields in map(str.split, text.splitlines())}


@pytest.mark.parametrize("mode", ["fork", "auto"])
def test_the_next_child_is_readied_during_the_test_before_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    readied_log, ran_log = pytester.path / "readied.log", pytester.path / "ran.log"
    monkeypatch.setenv("READIED_LOG", str(readied_log))
    monkeypatch.setenv("RAN_LOG", str(ran_log))
    pytester.makeconftest(RECORD_READIED)
    pytester.makepyfile(TESTS)
    args = ["--cold-compile"]
    if mode != "auto":
        args.append(f"--cold-compile-mode={mode}")
    result = run(pytester, *args, "-v")
    # test_b's set-up failed ahead of its request: reported as its set-up error, not run.
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_b*", "*the set-up of test_b failed*"])
    readied, ran = lines(readied_log), lines(ran_log)
    assert set(ran) == {"test_a", "test_c"}
    # Each test after the first ran in the child readied for it; the first had no test before.
    assert set(readied) == {"test_b", "test_c"}
    assert ran["test_c"][0] == readied["test_c"][0] != readied["test_b"][0]
    # Each with caches of its own.
    assert ran["test_a"][1] != ran["test_c"][1]
