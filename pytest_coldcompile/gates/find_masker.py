"""The masker finder: for a test that fails cold, which earlier test's warm state hides the
failure in a plain run, and through which state (docs/find-masker.md).

The test runs alone in a fresh cold child, then after all the tests that ran before it in one
fresh child, then after shorter and shorter prefixes of them (a bisection): the shortest prefix
after which it passes ends with the masker. In each child, an observer records what the test
met warm during its own span (after the earlier tests): a selector's cached admissions, FX-graph
and AOTAutograd cache hits, the Triton kernels it compiled. What the passing run met and the
failing one did not is the state through which the masker masks.
"""

from __future__ import annotations

import os
import shutil
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_coldcompile import item_options, options, records, selectors
from pytest_coldcompile.child import context, pristine, stats
from pytest_coldcompile.child_spec import ChildSpec
from pytest_coldcompile.gates import settings

if TYPE_CHECKING:
    from pytest_coldcompile.isolation.engine import ColdEngine, ColdRun

SPEC_KEY = "find_masker"
"""The spec' key that tells a cold child's observer to record the test's span."""
RECORD = "find_masker"

SELECTOR_CACHED = "selector admission cached"
FX_GRAPH_HIT = "FX-graph cache hit"
AOT_AUTOGRAD_HIT = "AOTAutograd cache hit"
TRITON_HIT = "Triton kernel found in the cache"
OTHER = "other process state"
STATES = (SELECTOR_CACHED, FX_GRAPH_HIT, AOT_AUTOGRAD_HIT, TRITON_HIT, OTHER)
"""The state kinds, in the order a masker's is named when it shows several."""

MASKED, NOT_MASKED, PASSES_ALONE, NO_EARLIER, ERROR = (
    "masked", "not masked", "passes alone", "no earlier tests", "error")
VERDICTS = (MASKED, NOT_MASKED, PASSES_ALONE, NO_EARLIER, ERROR)
MASKER_KEYS = ("verdict", "nodeid", "with", "state", "states", "candidates", "children",
               "message")
"""The keys of a record's ``masker`` object (docs/report-schema.md)."""

_HITS = ("fxgraph_cache_hit", "autograd_cache_hit")  # what a warm cache gives


def _hit_counters() -> dict[str, int]:
    counts = stats.cache_counters()
    return {key: counts[key] for key in _HITS}


def _triton_kernels(cache_dir: str | None) -> set[str]:
    """Triton's cache holds <hash>/<kernel name>.json for each kernel it compiled."""
    if not cache_dir or not os.path.isdir(cache_dir):
        return set()
    paths = []
    for entry in os.listdir(cache_dir):
        try:
            paths += [f"{entry}/{name}" for name in os.listdir(os.path.join(cache_dir, entry))]
        except OSError:
            continue
    return pristine.triton_kernels(paths)


class Observer:
    """In a cold child the finder ordered: what the child's own test met during its span."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.spec: ChildSpec | None = None
        self.recording = False
        self.cached: set[tuple[str, str]] = set()  # (selector, op) admitted "cached"

    def pytest_coldcompile_child_configure(
        self, config: pytest.Config, spec: ChildSpec
    ) -> None:
        if not spec.get(SPEC_KEY):
            return
        self.spec = spec
        # The child's set-up has reset and subscribed the selectors loaded so far; the others are
        # subscribed as they load.
        selectors.subscribe(selectors.loaded(), self._event)
        selectors.on_load(self._adopt)

    def _adopt(self, selector: Any) -> None:
        selectors.subscribe([selector], self._event)

    def _event(self, event: Any) -> None:
        if self.recording and event.kind == "admit" and event.outcome == "cached":
            self.cached.add((event.selector or "?", event.op))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        ctx = context.active(self.config)
        if self.spec is None or ctx is None or item.nodeid != self.spec.get("nodeid"):
            return (yield)
        triton_dir = os.environ.get("TRITON_CACHE_DIR")
        hits, kernels = _hit_counters(), _triton_kernels(triton_dir)
        self.recording = True
        try:
            return (yield)
        finally:
            self.recording = False
            after = _hit_counters()
            records.write_record(ctx.test_dir, {
                "type": RECORD,
                "cached": sorted([s, op] for s, op in self.cached),
                "hits": {k: after[k] - hits.get(k, 0) for k in after},
                "triton_compiled": sorted(_triton_kernels(triton_dir) - kernels),
            })


@dataclass
class Run:
    """One child of the search: whether the test passed, and what it met."""

    passed: bool
    seen: dict[str, Any] = field(default_factory=dict)


def _passed(lines: list[dict[str, Any]]) -> bool:
    phases = [(r["data"].get("when"), r["data"].get("outcome"))
              for r in lines if r.get("type") == "report"]
    return ("call", "passed") in phases and not any(o == "failed" for _, o in phases)


def failed(reports: Sequence[pytest.TestReport]) -> bool:
    """Whether a cold test's reports say it failed (an xfail did not)."""
    return any(r.failed for r in reports) and not any(hasattr(r, "wasxfail") for r in reports)


class Search:
    """The children of one failing test's search, counted."""

    def __init__(self, engine: ColdEngine, item: pytest.Item, timeout: float | None) -> None:
        self.engine, self.item, self.timeout = engine, item, timeout
        self.children = 0

    def run(self, before: Sequence[pytest.Item]) -> Run:
        """The test in one fresh cold child, after the tests before (none: alone)."""
        self.children += 1
        test_dir = self.engine.new_test_dir()
        try:
            spec = self.engine.child_spec(self.item, test_dir)
            spec["find_masker"] = True
            # The test's limit holds for each test the child runs.
            timeout = None if self.timeout is None else self.timeout * (len(before) + 1)
            self.engine.launch_again(self.item, spec, timeout, before)
            lines = records.read_records(test_dir)
        finally:
            shutil.rmtree(test_dir, ignore_errors=True)
        seen: dict[str, Any] = next((r for r in reversed(lines) if r.get("type") == RECORD), {})
        return Run(_passed(lines), seen)


def states(masked: Run, alone: Run) -> list[tuple[str, str]]:
    """(kind, what) of each state the masked run met that the failing one did not; OTHER
    where it met none of them."""
    out = []
    cached_alone = {tuple(c) for c in alone.seen.get("cached", [])}
    by_selector: dict[str, list[str]] = {}
    for selector, op in masked.seen.get("cached", []):
        if (selector, op) not in cached_alone:
            by_selector.setdefault(selector, []).append(op)
    for selector in sorted(by_selector):
        out.append((SELECTOR_CACHED, f"selector {selector}: admission cached"))
    hits, hits_alone = masked.seen.get("hits", {}), alone.seen.get("hits", {})
    for key, kind in (("fxgraph_cache_hit", FX_GRAPH_HIT), ("autograd_cache_hit",
                                                            AOT_AUTOGRAD_HIT)):
        more = int(hits.get(key, 0)) - int(hits_alone.get(key, 0))
        if more > 0:
            out.append((kind, kind))
    found = sorted(set(alone.seen.get("triton_compiled", []))
                   - set(masked.seen.get("triton_compiled", [])))
    if found:
        names = ", ".join(sorted({f.split("/", 1)[-1] for f in found}))
        out.append((TRITON_HIT, f"Triton kernel {names} found in the cache"))
    return out or [(OTHER, OTHER)]


def _verdict(verdict: str, children: int | None, candidates: int, message: str,
             **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(MASKER_KEYS)
    out.update(verdict=verdict, candidates=candidates, children=children,
               message=message, **more)
    out["with"] = out["with"] or []
    out["states"] = out["states"] or []
    return out


def find(
    engine: ColdEngine, item: pytest.Item, earlier: Sequence[pytest.Item],
    timeout: float | None,
) -> dict[str, Any]:
    """The ``masker`` object of a test that failed cold, earlier: the tests that ran before it
    in this process, in their order."""
    search = Search(engine, item, timeout)
    n = len(earlier)
    alone = search.run([])
    if alone.passed:
        return _verdict(PASSES_ALONE, search.children, n, (
            "passes alone in a fresh cold child: its cold failure depends on something else "
            "than an earlier test's process state (files, the environment, chance)"))
    if not earlier:
        return _verdict(NO_EARLIER, search.children, n, "fails alone; no test ran before it")
    full = search.run(earlier)
    if not full.passed:
        return _verdict(NOT_MASKED, search.children, n, (
            f"fails alone and after the {n} earlier tests in one process: nothing earlier "
            "masks it"))
    # The shortest prefix after which it passes: its last test is the masker (adding tests
    # is taken not to unmask a masked failure).
    passing = {n - 1: full}
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        run = search.run(earlier[:mid + 1])
        if run.passed:
            hi, passing[mid] = mid, run
        else:
            lo = mid + 1
    masker, needed, masked = earlier[lo], [earlier[lo]], passing[lo]
    if lo > 0:
        solo = search.run([masker])
        if solo.passed:
            masked = solo
        else:
            # It needs earlier tests too: the latest start of a range ending at the masker.
            first, last = 0, lo - 1
            while first < last:
                mid = (first + last + 1) // 2
                run = search.run(earlier[mid:lo + 1])
                if run.passed:
                    first, masked = mid, run
                else:
                    last = mid - 1
            needed = list(earlier[first:lo + 1])
    found = states(masked, alone)
    others = [it.nodeid for it in needed[:-1]]
    said = "; ".join(what for _, what in found)
    return _verdict(MASKED, search.children, n, (
        f"fails alone, passes after {masker.nodeid}"
        + (f" with {', '.join(others)} before it" if others else "") + f": {said}"),
        nodeid=masker.nodeid, state=found[0][0], states=[what for _, what in found],
        **{"with": others})


class MaskerFinder:
    """The search, in the pytest process that runs the tests: in order of the tests it ran
    (xdist: the worker's; -k: the selected ones; -p randomly: the shuffled order)."""

    def __init__(self) -> None:
        self.order: list[pytest.Item] = []
        self.seen: set[int] = set()
        # A rerun that fails again is not searched again: it gets the first search's object.
        self.found: dict[int, dict[str, Any]] = {}

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        if id(item) not in self.seen:  # a rerun (pytest-rerunfailures) is not an earlier test
            self.seen.add(id(item))
            self.order.append(item)
        return (yield)

    def pytest_coldcompile_child_ended(self, item: pytest.Item, run: ColdRun) -> None:
        """The ``masker`` object onto a failing test's record (hence the JSON report)."""
        if not failed(run.reports) or item.stash.get(item_options.PROOF_ITEM_KEY, False):
            return
        if id(item) in self.found:
            run.record["masker"] = self.found[id(item)]
            return
        at = next((i for i, it in enumerate(self.order) if it is item), len(self.order))
        earlier = [it for it in self.order[:at] if id(it) in run.engine.index]
        try:
            run.record["masker"] = self.found[id(item)] = find(
                run.engine, item, earlier, run.timeout)
        except Exception:  # the machinery, not the test: say so on the record, run on
            why = traceback.format_exc().strip().splitlines()[-1]
            run.record["masker"] = self.found[id(item)] = _verdict(
                ERROR, None, len(earlier), f"the masker search could not run: {why}")

    @pytest.hookimpl(trylast=True)
    def pytest_coldcompile_terminal_summary(
        self, terminalreporter: Any, records: dict[str, dict[str, Any]]
    ) -> None:
        found = {k: v["masker"] for k, v in records.items() if isinstance(v.get("masker"), dict)}
        if not found:
            return
        tr = terminalreporter
        masked = sum(1 for m in found.values() if m.get("verdict") == MASKED)
        tests = "test" if len(found) == 1 else "tests"
        tr.write_sep("=", f"cold compile maskers: {len(found)} {tests} failed cold, "
                          f"{masked} masked by an earlier test")
        for nodeid, m in sorted(found.items()):
            tr.write_line(f"{summary_line(nodeid, m)}; {m.get('children')} cold children "
                          f"for {m.get('candidates')} earlier tests")


def summary_line(nodeid: str, masker: dict[str, Any]) -> str:
    """The summary's line of a failing test's ``masker`` object."""
    name = nodeid
    if masker.get("verdict") == MASKED:
        others = masker.get("with") or []
        how = "; ".join(masker.get("states") or []) or str(masker.get("state"))
        return (f"{name} fails cold; masked by {masker.get('nodeid')}"
                + (f" (after {', '.join(others)})" if others else "") + f" ({how})")
    return f"{name} fails cold; {masker.get('verdict')}: {masker.get('message')}"


def register(config: pytest.Config) -> None:
    """With --cold-compile-find-masker: the observer wherever cold children run (forked ones
    inherit it from the pytest process), the search and summary in the pytest process."""
    if not settings.settings(config).find_masker:
        return
    config.pluginmanager.register(Observer(config), "coldcompile-masker-observer")
    if not options.settings(config).child_spec:
        config.pluginmanager.register(MaskerFinder(), "coldcompile-find-masker")
