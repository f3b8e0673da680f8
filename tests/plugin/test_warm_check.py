"""The warm-cache check: --cold-compile-warm-check reruns each passing cold test from a private
copy of its first run's caches and names what it compiled again.

Measured on torch 2.13 (CPU): a graph whose code is the same hits the FX-graph and AOTAutograd
caches when rerun from the cold run's caches; one holding a ``time.time()`` taken in the test
(Dynamo bakes the float into the graph) misses both. (A module-level stamp would not: forked
children share the module the pytest process imported at collection.)
"""

from __future__ import annotations

import json

import pytest
from coldhelp import needs_fork, needs_modules, run

pytestmark = needs_fork


def _records(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "cold.json").read_text())


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_a_test_whose_outcome_depends_on_the_caches_is_reported(
    pytester: pytest.Pytester, mode: str
) -> None:
    pytester.makepyfile(
        """
        import os, pytest

        @pytest.mark.cold_compile
        def test_caches_empty(cold_state):
            found = [n for _, _, names in os.walk(cold_state.cache_dir) for n in names]
            assert not found, found
            with open(os.path.join(cold_state.cache_dir, "marker"), "w") as f:
                f.write("left by the cold run")

        @pytest.mark.cold_compile
        def test_fails():
            assert False

        def test_in_process():
            pass
        """
    )
    result = run(pytester, "--cold-compile-warm-check", "--cold-compile-report=cold.json",
                 f"--cold-compile-mode={mode}")
    result.assert_outcomes(passed=2, failed=1)  # the warm rerun adds no outcome of its own
    result.stdout.fnmatch_lines([
        "*= cold compile warm check: 1 tests rerun warm, 1 with unstable cache keys =*",
        "*::test_caches_empty: warm failed, compile 0.00 s (cold 0.00 s), FX graph cache 0 hit "
        "/ 0 miss, AOTAutograd cache 0 hit / 0 miss",
        "  unstable cache key: warm outcome failed, cold outcome passed",
    ])
    records = _records(pytester)
    empty = next(v for k, v in records.items() if k.endswith("test_caches_empty"))
    fails = next(v for k, v in records.items() if k.endswith("test_fails"))
    assert empty["outcome"] == "passed" and empty["warm"]["outcome"] == "failed"
    assert fails["warm"] is None  # only a passing test is rerun
    # every record has the same keys, and the warm object too
    assert {tuple(sorted(r)) for r in records.values()} == {tuple(sorted(empty))}
    assert sorted(empty["warm"]) == sorted([
        "outcome", "total_s", "compile_s", "selection_s", "tracing_s", "inductor_s", "frames",
        "forward_graphs", "backward_graphs", "cache", "cold_cache", "recompiled_graphs",
        "recompiled_kernels", "triton_kernels", "unstable"])


@pytest.mark.parametrize(("args", "runs"), [([], "x"), (["--cold-compile-warm-check"], "xx")])
def test_a_passing_cold_test_runs_once_more_only_with_the_option(
    pytester: pytest.Pytester, args: list[str], runs: str
) -> None:
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.cold_compile
        def test_once():
            with open("runs.txt", "a") as f:
                f.write("x")
        """
    )
    result = run(pytester, "--cold-compile-report=cold.json", *args)
    result.assert_outcomes(passed=1)
    assert (pytester.path / "runs.txt").read_text() == runs
    (record,) = _records(pytester).values()
    assert (record["warm"] is None) == (not args)


@needs_modules("torch")
def test_a_stable_graph_hits_and_a_timestamped_one_is_an_unstable_key(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import time, torch, pytest

        @pytest.mark.cold_compile
        def test_stable():
            assert torch.compile(lambda x: (x * 2).sin())(torch.ones(4)).shape == (4,)

        @pytest.mark.cold_compile
        def test_stamped():
            stamp = time.time()  # in the child: the warm run's differs, and so does its graph
            assert torch.compile(lambda x: x + stamp)(torch.ones(4)).shape == (4,)
        """
    )
    # As in test_child_timings.py: no ISA probe .so, and the run's shared precompiled header;
    # the kernels themselves are still compiled and cached.
    pytester._monkeypatch.setenv("TORCHINDUCTOR_VEC_ISA_OK", "1")
    result = run(pytester, "--cold-compile-warm-check", "--cold-compile-report=cold.json",
                 timeout=900)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*cold compile warm check: 2 tests rerun warm, 1 with unstable cache keys*",
        "*::test_stable: warm passed, *FX graph cache 1 hit / 0 miss, AOTAutograd cache 1 hit "
        "/ 0 miss",
        "*::test_stamped: warm passed, *FX graph cache 0 hit / 1 miss, AOTAutograd cache 0 hit "
        "/ 1 miss",
        "  unstable cache key: FX graph f* compiled again (kernels cpp_fused_add_0)",
    ])
    records = _records(pytester)
    stable = next(v for k, v in records.items() if k.endswith("test_stable"))["warm"]
    stamped = next(v for k, v in records.items() if k.endswith("test_stamped"))["warm"]
    assert stable["unstable"] == [] and stable["recompiled_graphs"] == []
    assert stable["cold_cache"]["fxgraph_cache_miss"] == 1  # the cold run compiled it
    assert stable["inductor_s"] < next(
        v for k, v in records.items() if k.endswith("test_stable"))["inductor_s"]
    assert len(stamped["recompiled_graphs"]) == 1
    assert stamped["recompiled_kernels"] == ["cpp_fused_add_0"]
