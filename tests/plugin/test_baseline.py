"""Baselines: --cold-compile-baseline compares each cold test with an earlier report.

The runs use a fake selector (admissions, fallbacks, selection seconds: no torch); Dynamo
frames and graphs, which need a compile, are compared on report records directly.
"""

from __future__ import annotations

import json

import pytest
from coldhelp import conftest, needs_fork, run

from pytest_coldcompile.gates import baseline

SELECTOR = """
import pytest_coldcompile

class Event:
    def __init__(self, kind, shared, seconds, warps=4):
        self.kind, self.op, self.seconds = kind, "fwd", seconds
        self.outcome = "fits" if kind == "admit" else "out_of_resources"
        self.config = {"BLOCK": shared // 16, "warps": warps}
        self.resources = {"shared": shared}

class Fake:
    name = "fake"
    def __init__(self):
        self.listeners = []
    def reset(self):
        pass
    def subscribe(self, listener):
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)
    def emit(self, kind, shared=1024, seconds=0.0, warps=4):
        for listener in list(self.listeners):
            listener(Event(kind, shared, seconds, warps))

S = pytest_coldcompile.register_selector(Fake())
"""

BEFORE = """
import conftest

def test_tile():
    conftest.S.emit("admit", shared=4096)

def test_fallback():
    conftest.S.emit("admit")

def test_slow():
    conftest.S.emit("admit", seconds=1.0)

def test_gone():
    pass
"""

AFTER = """
import conftest

def test_tile():
    conftest.S.emit("admit", shared=8192)

def test_fallback():
    conftest.S.emit("fallback")

def test_slow():
    conftest.S.emit("admit", seconds=3.0)

def test_new():
    pass
"""


def _two_runs(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeconftest(conftest(SELECTOR))
    pytester.makepyfile(test_suite=BEFORE)
    first = run(pytester, "--cold-compile", "--cold-compile-report=old.json")
    first.assert_outcomes(passed=4)
    pytester.makepyfile(test_suite=AFTER)
    return run(pytester, "--cold-compile", "--cold-compile-baseline=old.json",
               "--cold-compile-report=new.json", *args)


@needs_fork
def test_changes_are_listed_regressions_first_and_recorded(pytester: pytest.Pytester) -> None:
    result = _two_runs(pytester)
    result.assert_outcomes(passed=4)
    assert result.ret == 0  # not strict: reported only
    result.stdout.fnmatch_lines([
        "*= cold compile baseline: 8 changes against old.json (timings beyond 25% and 0.5 s) =*",
        "kind *test *figure *baseline *now",
        "regression *test_suite.py::test_fallback *fallback *0 *1",
        "regression (timing) *test_suite.py::test_slow *selection_s *1.00 *3.00",
        "change *test_suite.py::test_fallback *admitted *1 *0",
        "change *test_suite.py::test_fallback *launches *admit fwd* *fallback fwd*",
        "change *test_suite.py::test_tile *max_admitted_shared *4096 *8192",
        "change *test_suite.py::test_tile *launches *BLOCK*: 256* *BLOCK*: 512*",
        "new *test_suite.py::test_new *test *- *passed",
        "gone *test_suite.py::test_gone *test *passed *-",
    ])
    result.stdout.no_fnmatch_line("*baseline-strict*")
    records = json.loads((pytester.path / "new.json").read_text())
    assert records["test_suite.py::test_new"]["baseline"] == [{
        "test": "test_suite.py::test_new", "figure": "test", "old": None, "new": "passed",
        "kind": "new", "deterministic": False,
    }]
    tile = records["test_suite.py::test_tile"]["baseline"]
    assert [(c["figure"], c["old"], c["new"], c["deterministic"]) for c in tile] == [
        ("max_admitted_shared", 4096, 8192, True),
        ("launches", ['admit fwd {"BLOCK": 256, "warps": 4}'],
         ['admit fwd {"BLOCK": 512, "warps": 4}'], True)]
    assert {len(r) for r in records.values()} == {len(records["test_suite.py::test_new"])}


@needs_fork
def test_strict_fails_the_session_on_deterministic_changes_only(pytester: pytest.Pytester) -> None:
    result = _two_runs(pytester, "--cold-compile-baseline-strict")
    result.assert_outcomes(passed=4)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "cold-compile: --cold-compile-baseline-strict: 5 deterministic changes (graphs, "
        "admissions, fallbacks) against old.json; failing the session"
    ])
    # Against itself, with the timing moved only: the session passes.
    pytester.makepyfile(test_suite=AFTER.replace("seconds=3.0", "seconds=9.0"))
    same = run(pytester, "--cold-compile", "--cold-compile-baseline=new.json",
               "--cold-compile-baseline-strict", "--cold-compile-baseline-tolerance=10,1")
    assert same.ret == 0
    same.stdout.fnmatch_lines([
        "*cold compile baseline: 1 changes against new.json (timings beyond 10% and 1 s)*",
        "regression (timing) *test_slow *selection_s *3.00 *9.00",
    ])


def test_a_new_recompile_is_a_regression_and_fewer_graphs_an_improvement() -> None:
    old = {"t": {"outcome": "passed", "frames": 1, "forward_graphs": 2, "backward_graphs": 1,
                 "compile_s": 10.0, "inductor_s": 2.0}}
    new = {"t": {"outcome": "passed", "frames": 2, "forward_graphs": 2, "backward_graphs": 0,
                 "compile_s": 12.0, "inductor_s": 2.4}}
    changes = baseline.compare(old, new, (0.25, 0.5))
    assert [(c.figure, c.kind, c.deterministic) for c in changes] == [
        ("frames", "regression", True),
        ("backward_graphs", "improvement", True),
    ]  # 10 -> 12 s is within 25 %, 2.0 -> 2.4 s within 0.5 s
    slower = baseline.compare(old, {"t": {**new["t"], "compile_s": 13.0}}, (0.25, 0.5))
    assert ("compile_s", "regression", False) in [(c.figure, c.kind, c.deterministic)
                                                 for c in slower]
    # A child that died recorded no figures: nothing to compare, the outcome says it.
    died = baseline.compare(old, {"t": {"outcome": "failed", "frames": None}}, (0.25, 0.5))
    assert [(c.figure, c.kind) for c in died] == [("outcome", "regression")]


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (None, ["--cold-compile-baseline=nope.json"],
         "*--cold-compile-baseline: cannot read 'nope.json' (No such file or directory)*"),
        ("{not json", ["--cold-compile-baseline=old.json"],
         "*--cold-compile-baseline: 'old.json' is not JSON (*"),
        ('[1, 2]', ["--cold-compile-baseline=old.json"],
         "*--cold-compile-baseline: 'old.json' is not a --cold-compile-report file (expected a "
         "JSON object of test records keyed by node id)*"),
        ("{}", ["--cold-compile-baseline-strict"],
         "*--cold-compile-baseline-strict: needs --cold-compile-baseline*"),
        ("{}", ["--cold-compile-baseline=old.json", "--cold-compile-baseline-tolerance=lots"],
         "*--cold-compile-baseline-tolerance: expected PERCENT,SECONDS (e.g. 25,0.5), got "
         "'lots'*"),
    ],
)
def test_a_bad_baseline_is_a_usage_error_naming_the_option_and_path(
    pytester: pytest.Pytester, content: str | None, args: list[str], message: str
) -> None:
    if content is not None:
        (pytester.path / "old.json").write_text(content)
    pytester.makepyfile("def test_it():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--cold-compile", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@needs_fork
def test_another_tile_with_the_same_bytes_is_a_deterministic_change(
    pytester: pytest.Pytester,
) -> None:
    """The admitted config itself is compared, not only its shared memory."""
    pytester.makeconftest(conftest(SELECTOR))
    pytester.makepyfile(test_suite="import conftest\n\ndef test_tile():\n"
                                   "    conftest.S.emit('admit', shared=4096, warps=4)\n")
    run(pytester, "--cold-compile", "--cold-compile-report=old.json").assert_outcomes(passed=1)
    pytester.makepyfile(test_suite="import conftest\n\ndef test_tile():\n"
                                   "    conftest.S.emit('admit', shared=4096, warps=8)\n")
    result = run(pytester, "--cold-compile", "--cold-compile-baseline=old.json",
                 "--cold-compile-baseline-strict", "--cold-compile-report=new.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines([
        '*change*test_tile*launches*admit fwd {"BLOCK": 256, "warps": 4}'
        '*admit fwd {"BLOCK": 256, "warps": 8}*',
    ])
    record = json.loads((pytester.path / "new.json").read_text())["test_suite.py::test_tile"]
    assert record["launches"] == ['admit fwd {"BLOCK": 256, "warps": 8}']
    assert [c["figure"] for c in record["baseline"]] == ["launches"]
