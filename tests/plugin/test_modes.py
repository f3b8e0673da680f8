"""fork, zygote and spawn children agree: crashes, timeouts, reports, output, logging,
worker_id (with xdist's workerinput and testrun_uid), environment and tmp_path."""

from __future__ import annotations

import json
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest
from coldhelp import LIGHT_PRELOAD, needs_fork, run, timed_out_lines

pytestmark = needs_fork

MODES = ["fork", "zygote", "spawn"]

CRASH = """
import os, signal, pytest

@pytest.mark.cold_compile
def test_segfault():
    print("said before the crash")
    os.kill(os.getpid(), signal.SIGSEGV)

def test_after():
    pass
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_crash_is_reported_and_the_session_goes_on(cold: pytest.Pytester, mode: str) -> None:
    cold.makepyfile(CRASH)
    result = run(cold, f"--cold-compile-mode={mode}", *LIGHT_PRELOAD)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            f"*cold-compile: {mode} ({mode}: chosen by --cold-compile-mode)*",
            "*_ test_segfault _*",
            "*running the test CRASHED with signal 11 (SIGSEGV)",
            "*Captured stdout call*",
            "said before the crash",
            f"1 run as {mode} (*",
        ]
    )


HANG = """
import time

def test_hangs():
    print("waiting forever")
    time.sleep(120)

def test_next():
    pass
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_timeout_kills_the_child_in_every_mode(cold: pytest.Pytester, mode: str) -> None:
    cold.makepyfile(HANG)
    began = time.monotonic()
    # The limit covers a re-collecting child's start-up too (not the zygote's preload): measured
    # on 2 cores, with 4 busy loops beside, the body began 0.5 s into a spawned child's life and
    # 0.2 s into a zygote's; 5 s leaves ten times that for a CI machine busier still.
    result = run(cold, "--cold-compile", f"--cold-compile-mode={mode}", "--cold-compile-timeout=5",
                 *LIGHT_PRELOAD)
    assert time.monotonic() - began < 100
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(timed_out_lines(5))


PARITY_CONFTEST = """
import os
import pytest_coldcompile.selectors as _selectors
_selectors._entry_points = [ep for ep in _selectors.entry_points() if ep.name != "gridpair"]
"""

PARITY = """
import logging, os, pytest

def test_0_in_process():
    os.environ["LEFT_BY_AN_EARLIER_TEST"] = "1"  # a forked child cannot see it

@pytest.mark.cold_compile
@pytest.mark.parametrize("i", range(2))
def test_cold(i, worker_id, testrun_uid, request, tmp_path, record_property):
    record_property("worker_id", worker_id)
    record_property("testrun_uid", testrun_uid)
    record_property("tmp_path", str(tmp_path))
    (tmp_path / "kept.txt").write_text("left for a look after the run")
    assert worker_id == os.environ.get("PYTEST_XDIST_WORKER", "master")
    workerinput = getattr(request.config, "workerinput", None)
    if worker_id == "master":
        assert workerinput is None
    else:  # what an xdist worker's own config holds, as a forked child inherits it
        assert workerinput["workerid"] == worker_id and workerinput["workercount"] == 2
        assert workerinput["testrunuid"] == testrun_uid
    assert os.environ["SET_BEFORE_THE_RUN"] == "yes"
    assert "LEFT_BY_AN_EARLIER_TEST" not in os.environ
    print(f"out {i}")
    logging.getLogger("parity").warning("logged %d", i)
    assert i == 0
"""


def _parity_run(cold: pytest.Pytester, mode: str, *args: str) -> pytest.RunResult:
    cold.makeconftest(PARITY_CONFTEST)
    cold.makepyfile(test_parity=PARITY)
    cold._monkeypatch.setenv("SET_BEFORE_THE_RUN", "yes")
    return run(
        cold,
        f"--cold-compile-mode={mode}",
        "--junitxml=junit.xml",
        "--cold-compile-report=report.json",
        "-o",
        "log_cli=true",
        "--log-cli-level=WARNING",
        *LIGHT_PRELOAD,
        *args,
    )


def _properties(path: Path) -> dict[str, dict[str, str]]:
    cases = ElementTree.parse(path).getroot().iter("testcase")
    return {
        c.get("name", ""): {p.get("name", ""): p.get("value", "") for p in c.iter("property")}
        for c in cases
    }


def _check_parity(cold: pytest.Pytester, result: pytest.RunResult, mode: str) -> dict:
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_cold?1? _*",
            "*assert 1 == 0*",
            "*Captured stdout call*",
            "out 1",
            "*Captured log call*",
            "WARNING *parity*logged 1",
        ]
    )
    report = json.loads((cold.path / "report.json").read_text())
    assert {r["mode"] for r in report.values()} == {mode}
    assert {n: r["outcome"] for n, r in report.items()} == {
        "test_parity.py::test_cold[0]": "passed",
        "test_parity.py::test_cold[1]": "failed",
    }
    props = _properties(cold.path / "junit.xml")
    for name in ("test_cold[0]", "test_cold[1]"):
        kept = Path(props[name]["tmp_path"]) / "kept.txt"
        assert kept.read_text() == "left for a look after the run", "tmp_path outlives the test"
    return props


@pytest.mark.parametrize("mode", MODES)
def test_children_agree_on_reports_output_logging_env_and_tmp_path(
    cold: pytest.Pytester, mode: str
) -> None:
    result = _parity_run(cold, mode)
    props = _check_parity(cold, result, mode)
    assert {props[f"test_cold[{i}]"]["worker_id"] for i in range(2)} == {"master"}


@pytest.mark.parametrize("mode", MODES)
def test_children_agree_on_worker_id_under_xdist(cold: pytest.Pytester, mode: str) -> None:
    pytest.importorskip("xdist")
    result = _parity_run(cold, mode, "-n", "2")
    props = _check_parity(cold, result, mode)
    for i in range(2):
        assert props[f"test_cold[{i}]"]["worker_id"] in ("gw0", "gw1")
        assert (
            f"popen-{props[f'test_cold[{i}]']['worker_id']}" in props[f"test_cold[{i}]"]["tmp_path"]
        )
    # One test run, whichever worker and child ran each test.
    assert props["test_cold[0]"]["testrun_uid"] == props["test_cold[1]"]["testrun_uid"]
