"""The terminal summary, the JSON report and the JUnit properties of cold tests."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest
from coldhelp import needs_fork, run, run_inprocess

pytestmark = needs_fork

MIXED = """
import pytest

def test_in_process():
    pass

@pytest.mark.cold_compile
def test_passes():
    pass

@pytest.mark.cold_compile
def test_fails():
    assert 0

@pytest.mark.cold_compile
@pytest.mark.skip(reason="later")
def test_skipped():
    pass

@pytest.mark.cold_compile
@pytest.mark.xfail(reason="known")
def test_xfails():
    assert 0
"""


def test_summary_json_and_junit_cover_the_cold_tests_only(cold: pytest.Pytester) -> None:
    cold.makepyfile(test_mixed=MIXED)
    result = run(cold, "--cold-compile-report=out/cold.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2, failed=1, skipped=1, xfailed=1)
    result.stdout.fnmatch_lines(
        [
            "*= cold compile summary: 4 cold tests =*",
            "4 run as fork (auto: *)",  # the reason's wording is the engine's
            "test * outcome  total s  compile s  select s  trace s  inductor s  frames  fwd  bwd  "
            "probed  admitted  fallback  max smem",
            "test_mixed.py::test_fails    failed  * 0.00 * 0 * 0 * 0 * 0 * 0 * 0 * -",
            "test_mixed.py::test_passes   passed   *",
            "test_mixed.py::test_skipped  skipped  *",
            "test_mixed.py::test_xfails   xfailed  *",
            "pytest process: torch.cuda initialized: no; CUDA driver (libcuda) loaded: no, "
            "initialized: no",
            "cold compile report written to out/cold.json",
        ]
    )
    result.stdout.no_fnmatch_line("*test_mixed.py::test_in_process  *")
    report = json.loads((cold.path / "out" / "cold.json").read_text())
    assert sorted(report) == [
        f"test_mixed.py::test_{n}" for n in ("fails", "passes", "skipped", "xfails")
    ]
    assert {k: v["outcome"] for k, v in report.items()} == {
        "test_mixed.py::test_fails": "failed",
        "test_mixed.py::test_passes": "passed",
        "test_mixed.py::test_skipped": "skipped",
        "test_mixed.py::test_xfails": "xfailed",
    }
    entry = report["test_mixed.py::test_passes"]
    assert entry["mode"] == "fork"
    assert entry["frames"] == 0
    assert entry["admitted"] == 0
    assert set(entry) >= {
        "compile_s",
        "selection_s",
        "tracing_s",
        "inductor_s",
        "forward_graphs",
        "backward_graphs",
        "probed",
        "fallback",
        "max_admitted_shared",
        "mode_reason",
    }
    cases = {c.get("name"): c for c in ElementTree.parse(cold.path / "junit.xml").iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_passes"].iter("property")}
    assert props["cold_compile.mode"] == "fork"
    assert props["cold_compile.frames"] == "0"
    assert props["cold_compile.compile_s"] == "0.0"
    assert list(cases["test_in_process"].iter("property")) == []


def test_no_cold_tests_no_summary(cold: pytest.Pytester) -> None:
    cold.makepyfile("def test_plain():\n    pass\n")
    result = run_inprocess(cold)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*cold compile summary*")
    result.stdout.no_fnmatch_line("*cold-compile*")


def test_xdist_controller_writes_the_report(cold: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    cold.makepyfile(test_mixed=MIXED)
    result = run(cold, "-n", "2", "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=2, failed=1, skipped=1, xfailed=1)
    result.stdout.fnmatch_lines(["*cold compile summary: 4 cold tests*"])
    assert len(json.loads((cold.path / "cold.json").read_text())) == 4


def test_every_record_has_every_key_even_when_the_child_died(cold: pytest.Pytester) -> None:
    """A consumer of the JSON report reads one schema: a crashed or timed-out child's figures
    are null, not missing."""
    cold.makepyfile(
        """
        import os, time, pytest

        @pytest.mark.cold_compile
        def test_passes():
            pass

        @pytest.mark.cold_compile
        def test_crashes():
            os._exit(3)

        @pytest.mark.cold_compile(timeout=1)
        def test_hangs():
            time.sleep(30)
        """
    )
    result = run(cold, "--cold-compile-report=cold.json", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=2)
    report = json.loads((cold.path / "cold.json").read_text())
    keys = set(report["test_every_record_has_every_key_even_when_the_child_died.py::test_passes"])
    assert {"total_s", "compile_s", "selection_s", "tracing_s", "inductor_s", "frames",
            "warmed_ahead", "mode", "mode_reason", "outcome"} <= keys
    for nodeid, record in report.items():
        assert set(record) == keys, nodeid
    died = [r for n, r in report.items() if not n.endswith("test_passes")]
    assert all(r["compile_s"] is None and r["frames"] is None for r in died)
    assert all(r["outcome"] == "failed" for r in died)
