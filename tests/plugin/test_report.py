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


# A conftest as on a GPU machine, where collection or an earlier test initialized CUDA: the
# detector reads the driver as initialized (tests/plugin/test_cuda_init.py initializes a fake
# one; here only the answer matters).
CUDA_WAS_INITIALIZED = """
from pytest_coldcompile.devices import cuda
cuda.cuda_driver_initialized = lambda: True
"""


def test_no_cold_tests_no_word_where_cuda_was_initialized(
    cold: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Who initialized CUDA explains a cold test's mode: without one the plugin says nothing,
    neither in a new process nor in one where an earlier session initialized CUDA."""
    from pytest_coldcompile.devices import cuda

    cold.makeconftest(CUDA_WAS_INITIALIZED)
    cold.makepyfile("def test_plain():\n    pass\n")
    result = run(cold)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*cold-compile*")
    monkeypatch.setattr(cuda, "cuda_driver_initialized", lambda: True)
    cold.makeconftest("")
    result = run_inprocess(cold)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*cold-compile*")


def test_who_initialized_cuda_is_said_once_a_cold_test_runs(cold: pytest.Pytester) -> None:
    """A marked test is known only after collection: the engine's line and the summary name
    who initialized CUDA, the header (printed before collection) does not."""
    cold.makeconftest(CUDA_WAS_INITIALIZED)
    cold.makepyfile("import pytest\n@pytest.mark.cold_compile\ndef test_cold():\n    pass\n")
    result = run(cold)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    said = "cold-compile: the CUDA driver was initialized outside torch"
    assert said not in out.split("collected")[0]
    assert said in out.split("cold compile summary")[1]


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
