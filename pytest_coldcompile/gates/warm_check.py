"""The warm-cache check: a cold test that passed runs once more, in a fresh child whose caches
are the first run's (moved, private to it: nothing reaches the user's cache directories). What
it compiled again (an FX graph, a Triton kernel) is an unstable cache key; so is another outcome.
"""

from __future__ import annotations

import os
import re
import shutil
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_coldcompile import options, records
from pytest_coldcompile.child import context, pristine, stats
from pytest_coldcompile.gates import settings

if TYPE_CHECKING:
    from pytest_coldcompile.isolation.engine import ColdEngine, ColdRun

WARM_FIGURES = ("total_s", "compile_s", "selection_s", "tracing_s", "inductor_s", "frames",
                "forward_graphs", "backward_graphs")
WARM_KEYS = ("outcome", *WARM_FIGURES, "cache", "cold_cache", "recompiled_graphs",
             "recompiled_kernels", "triton_kernels", "unstable")
"""The keys of a record's ``warm`` object (docs/ci-gates.md)."""
# Inductor's output code names each kernel it compiles: async_compile.cpp_pybinding('name', ...)
_KERNEL = re.compile(r"^(\w+) = async_compile\.(?:triton|cpp_pybinding|cpp)\(", re.MULTILINE)
RECORD = "cache_counters"


class CacheCounterRecorder:
    """In a cold child (the check's cold run and warm rerun): the cache counters at teardown."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Any:
        report = yield
        ctx = context.active(self.config)
        if call.when == "teardown" and ctx is not None:
            records.write_record(ctx.test_dir, {"type": RECORD, **stats.cache_counters()})
        return report


@dataclass
class Snapshot:
    """The first run's caches, moved out of its directory before that is removed."""

    caches: str
    files: set[str]
    counters: dict[str, int] | None
    outcome: str = "passed"
    summary: dict[str, Any] = field(default_factory=dict)


def _listing(caches: str) -> set[str]:
    found = set()
    for root, _, names in os.walk(caches):
        for name in names:
            found.add(os.path.relpath(os.path.join(root, name), caches))
    return found


def _counters(lines: list[dict[str, Any]]) -> dict[str, int] | None:
    found = [r for r in lines if r.get("type") == RECORD]
    return {k: v for k, v in found[-1].items() if k != "type"} if found else None


def set_aside(engine: ColdEngine, test_dir: str) -> Snapshot | None:
    """Move test_dir's caches aside for the rerun (called before test_dir is removed)."""
    caches = os.path.join(test_dir, records.CACHES)
    if not os.path.isdir(caches):
        return None
    aside = os.path.join(engine.new_test_dir(), "warm")
    os.rename(caches, aside)
    return Snapshot(aside, _listing(aside), _counters(records.read_records(test_dir)))


def drop(snapshot: Snapshot | None) -> None:
    if snapshot is not None:
        shutil.rmtree(snapshot.caches, ignore_errors=True)


def _passed(reports: list[pytest.TestReport]) -> bool:
    return bool(reports) and all(r.passed for r in reports) and any(
        r.when == "call" for r in reports) and not any(hasattr(r, "wasxfail") for r in reports)


def _outcome(lines: list[dict[str, Any]], ended: Any) -> str:
    phases = {r["data"].get("when"): r["data"].get("outcome")
              for r in lines if r.get("type") == "report"}
    if "failed" in phases.values():
        return "failed"
    if phases.get("call") == "skipped" or phases.get("setup") == "skipped":
        return "skipped"
    if phases.get("call") == "passed" and "teardown" in phases:
        return "passed"
    if getattr(ended, "timed_out", False):
        return "timed out"
    if getattr(ended, "signal", None):
        return f"crashed (signal {ended.signal})"
    return f"did not finish (exit status {getattr(ended, 'returncode', None)})"


def _kernels(caches: str, files: list[str]) -> list[str]:
    """The kernels named in Inductor output code written anew (inductor/<2>/<key>.py)."""
    names = []
    for rel in files:
        parts = rel.split("/")
        if len(parts) == 3 and parts[0] == "inductor" and rel.endswith(".py"):
            try:
                with open(os.path.join(caches, rel), encoding="utf-8", errors="replace") as f:
                    names += _KERNEL.findall(f.read())
            except OSError:
                continue
    return sorted(set(names))


def _triton_kernels(files: list[str]) -> list[str]:
    """The names of the kernels Triton compiled among files (under the caches' triton/cache)."""
    under = "triton/cache/"
    kernels = pristine.triton_kernels(rel[len(under):] for rel in files if rel.startswith(under))
    return sorted({kernel.split("/", 1)[1] for kernel in kernels})


def _graph_keys(files: list[str]) -> list[str]:
    """inductor/fxgraph/<2>/<key>/<entry>: the FX graph cache keys written anew."""
    return sorted({rel.split("/")[3] for rel in files
                   if rel.startswith("inductor/fxgraph/") and rel.count("/") >= 4})


def rerun(
    engine: ColdEngine,
    item: pytest.Item,
    reports: list[pytest.TestReport],
    snapshot: Snapshot | None,
    timeout: float | None,
) -> dict[str, Any] | None:
    """Run item warm from snapshot when its cold run passed; the ``warm`` object, else None."""
    if snapshot is None or not _passed(reports):
        drop(snapshot)
        return None
    test_dir = engine.new_test_dir()
    try:
        caches = os.path.join(test_dir, records.CACHES)
        os.rename(snapshot.caches, caches)
        spec = engine.child_spec(item, test_dir)
        spec["warm_check"] = True
        ended = engine.launch_again(item, spec, timeout)
        lines = records.read_records(test_dir)
        new = sorted(_listing(caches) - snapshot.files)
        kernels = _kernels(caches, new)
    finally:
        shutil.rmtree(test_dir, ignore_errors=True)
        drop(snapshot)
    summary: dict[str, Any] = next(
        (r for r in reversed(lines) if r.get("type") == "summary"), {})
    warm: dict[str, Any] = {key: summary.get(key) for key in WARM_FIGURES}
    warm["total_s"] = round(float(ended.seconds), 3) if ended.seconds is not None else None
    warm["outcome"] = _outcome(lines, ended)
    warm["cache"] = _counters(lines)
    warm["cold_cache"] = snapshot.counters
    warm["recompiled_graphs"] = _graph_keys(new)
    warm["recompiled_kernels"] = kernels
    warm["triton_kernels"] = _triton_kernels(new)
    warm["unstable"] = unstable(warm)
    return warm


def failed_rerun(why: str) -> dict[str, Any]:
    """The warm object of a rerun that could not be run at all (its machinery failed)."""
    warm: dict[str, Any] = dict.fromkeys(WARM_KEYS)
    warm.update(outcome="not run", recompiled_graphs=[], recompiled_kernels=[], triton_kernels=[],
                unstable=[f"the warm rerun could not run: {why.strip().splitlines()[-1]}"])
    return warm


def unstable(warm: dict[str, Any]) -> list[str]:
    """What the warm run says of the cache keys: each graph or kernel compiled again."""
    said = []
    if warm["outcome"] != "passed":
        said.append(f"warm outcome {warm['outcome']}, cold outcome passed")
    kernels = ", ".join(warm["recompiled_kernels"])
    for key in warm["recompiled_graphs"]:
        said.append(f"FX graph {key} compiled again" + (f" (kernels {kernels})" if kernels else ""))
    for name in warm["triton_kernels"]:
        said.append(f"Triton kernel {name} compiled again")
    cache = warm["cache"] or {}
    if not said and cache.get("fxgraph_cache_miss"):
        said.append(f"{cache['fxgraph_cache_miss']} FX graph cache misses")
    if cache.get("autograd_cache_miss"):
        said.append(f"{cache['autograd_cache_miss']} AOTAutograd cache misses")
    return said


class WarmCheck:
    """The warm-cache check on the plugin's hooks: the rerun in the pytest process that runs
    the tests, its section of the summary in the controller."""

    def pytest_coldcompile_child_ended(self, item: pytest.Item, run: ColdRun) -> None:
        """The rerun's ``warm`` object onto the test's record (hence the JSON report)."""
        snapshot = set_aside(run.engine, run.test_dir)
        try:
            warm = rerun(run.engine, item, run.reports, snapshot, run.timeout)
        except Exception:  # the machinery, not the test: say so on the record, run on
            drop(snapshot)
            warm = failed_rerun(traceback.format_exc())
        run.record["warm"] = warm

    @pytest.hookimpl(trylast=True)
    def pytest_coldcompile_terminal_summary(
        self, terminalreporter: Any, records: dict[str, dict[str, Any]]
    ) -> None:
        warm = {k: v["warm"] for k, v in records.items() if isinstance(v.get("warm"), dict)}
        if not warm:
            return
        bad = {k: v for k, v in warm.items() if v.get("unstable")}
        tr = terminalreporter
        tr.write_sep("=", f"cold compile warm check: {len(warm)} tests rerun warm, "
                          f"{len(bad)} with unstable cache keys")
        for nodeid, w in sorted(warm.items()):
            cache = w.get("cache") or {}
            tr.write_line(
                f"{nodeid}: warm {w.get('outcome')}, compile {_s(w.get('compile_s'))} s "
                f"(cold {_s(records[nodeid].get('compile_s'))} s), FX graph cache "
                f"{cache.get('fxgraph_cache_hit', 0)} hit / {cache.get('fxgraph_cache_miss', 0)} "
                f"miss, AOTAutograd cache {cache.get('autograd_cache_hit', 0)} hit / "
                f"{cache.get('autograd_cache_miss', 0)} miss")
            for line in w.get("unstable") or []:
                tr.write_line(f"  unstable cache key: {line}", red=True)


def _s(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "-"


def register(config: pytest.Config) -> None:
    """With --cold-compile-warm-check: the counters' recorder wherever cold children run
    (forked ones inherit it from the pytest process), the rerun and summary in the pytest
    process."""
    if not settings.settings(config).warm_check:
        return
    config.pluginmanager.register(CacheCounterRecorder(config), "coldcompile-cache-counters")
    if not options.settings(config).child_spec:
        config.pluginmanager.register(WarmCheck(), "coldcompile-warm-check")
