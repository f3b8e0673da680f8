"""Cold tests under pytest-rerunfailures and pytest's tmp_path retention, compared with the
same tests run in-process: each rerun is a fresh cold child, and a failed test's tmp_path
is kept (or not) exactly as in-process."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from coldhelp import LIGHT_PRELOAD, inprocess_basetemp, needs_fork, run, run_inprocess

pytestmark = needs_fork

MODES = {"in-process": [], "fork": ["--cold-compile", "--cold-compile-mode=fork"]}
MODES["spawn"] = ["--cold-compile", "--cold-compile-mode=spawn"]
MODES["zygote"] = ["--cold-compile", "--cold-compile-mode=zygote", *LIGHT_PRELOAD]

TMP = """
import os

def test_pass(tmp_path):
    (tmp_path / "marker").write_text("pass")
    with open("passed.txt", "w") as f:
        f.write(str(tmp_path))

def test_fail(tmp_path):
    (tmp_path / "marker").write_text("fail")
    with open("failed.txt", "w") as f:
        f.write(str(tmp_path))
    assert False
"""


def run_mode(pytester: pytest.Pytester, mode: str, *args: str) -> pytest.RunResult:
    """The in-process reference runs in this process: nothing there is cold."""
    if mode == "in-process":
        return run_inprocess(pytester, *args)
    return run(pytester, *args, *MODES[mode])


def kept(pytester: pytest.Pytester, name: str, mode: str) -> bool:
    path = Path((pytester.path / name).read_text())
    # The session's basetemp: pytester gives an in-process run and a subprocess different ones.
    if mode == "in-process":
        basetemp = inprocess_basetemp(pytester)
    else:
        basetemp = pytester.path / "runpytest-0"
    assert path.is_relative_to(basetemp), path
    return (path / "marker").exists()


@pytest.mark.parametrize("policy", ["all", "failed"])
@pytest.mark.parametrize("mode", list(MODES))
def test_tmp_path_follows_the_retention_policy(
    cold: pytest.Pytester, mode: str, policy: str
) -> None:
    cold.makeini(f"[pytest]\ntmp_path_retention_policy = {policy}\n")
    cold.makepyfile(TMP)
    result = run_mode(cold, mode)
    result.assert_outcomes(passed=1, failed=1)
    assert kept(cold, "failed.txt", mode)
    assert kept(cold, "passed.txt", mode) == (policy == "all")


FLAKY = """
import os, pytest

def attempt(name):
    with open(name, "a") as f:
        f.write(f"{os.getpid()}\\n")
    with open(name) as f:
        return len(f.read().split())

def test_flaky_twice():
    assert attempt("flaky.pids") > 2, "fails on the first two attempts"

def test_always_fails():
    attempt("always.pids")
    assert False, "always"

@pytest.mark.flaky(reruns=1)
def test_marked():
    assert attempt("marked.pids") > 1

def test_not_matching():
    attempt("other.pids")
    raise KeyError("no rerun for this one")
"""


def attempts(pytester: pytest.Pytester, name: str) -> list[int]:
    return [int(line) for line in (pytester.path / name).read_text().split()]


@pytest.mark.skipif(
    importlib.util.find_spec("pytest_rerunfailures") is None, reason="needs pytest-rerunfailures"
)
@pytest.mark.parametrize("mode", list(MODES))
def test_reruns_behave_as_in_process_each_in_a_fresh_child(
    cold: pytest.Pytester, mode: str
) -> None:
    cold.makepyfile(FLAKY)
    result = run_mode(cold, mode, "--reruns", "2", "--only-rerun", "AssertionError")
    outcomes = result.parseoutcomes()
    # In-process: flaky passes on its third attempt, always fails after 2 reruns, the marker
    # overrides --reruns with 1, KeyError does not match --only-rerun.
    assert outcomes.get("passed") == 2 and outcomes.get("failed") == 2, outcomes
    assert outcomes.get("rerun") == 5, outcomes
    assert len(attempts(cold, "flaky.pids")) == 3
    assert len(attempts(cold, "always.pids")) == 3
    assert len(attempts(cold, "marked.pids")) == 2
    assert len(attempts(cold, "other.pids")) == 1
    if mode != "in-process":
        pids = [p for n in ("flaky", "always", "marked") for p in attempts(cold, f"{n}.pids")]
        assert len(set(pids)) == len(pids), "a rerun ran in an earlier attempt's child"
