"""The compile-time breakdown of a cold test: selection, tracing, Inductor, compile, total."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from coldhelp import conftest, needs_fork, needs_modules, run

from pytest_coldcompile import record
from pytest_coldcompile.child import stats


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def _event(kind: str, seconds: Any) -> SimpleNamespace:
    return SimpleNamespace(kind=kind, seconds=seconds)


def test_breakdown_splits_compile_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(stats, "time", clock)
    s = stats.CompileStats()
    fx = SimpleNamespace()

    def inner(gm: Any, example_inputs: Any, **kwargs: Any) -> None:
        clock.now += 3.0  # Inductor's own work
        s.on_event(_event("admit", 1.0))  # a decision made inside Inductor: not tracing
        if gm == "outer":
            fx._compile_fx_inner("nested", example_inputs)  # counted once, in the outer time

    fx._compile_fx_inner = inner
    s._hook_inner_compile(fx)  # type: ignore[arg-type]

    s.on_event(_event("fallback", 5.0))  # outside any compile window
    s._on_start()
    clock.now += 2.0
    s.on_event(_event("admit", 2.0))  # inside the window, outside Inductor
    s.on_event(_event("probe", 7.0))  # probes: their time is inside the decision's
    s.on_event(_event("admit", None))  # no timing given
    fx._compile_fx_inner("outer", [], is_backward=False)  # 6 s, nested graph included
    clock.now += 1.0
    s._on_end()

    assert s.compile_s == pytest.approx(9.0)
    assert s.inductor_s == pytest.approx(6.0)
    assert s.selection_s == pytest.approx(5.0 + 2.0 + 1.0 + 1.0)
    assert s.tracing_s == pytest.approx(9.0 - 6.0 - 2.0)
    assert (s.forward_graphs, s.backward_graphs) == (2, 0)
    assert set(s.timings()) == {"selection_s", "tracing_s", "inductor_s", "compile_s"}


def test_total_seconds_travel_as_a_property() -> None:
    summary = {"compile_s": 1.5, "selection_s": 0.5, "tracing_s": 0.25, "inductor_s": 0.75}
    props = dict(record.properties("fork", "why", summary, total_s=2.0004))
    assert props["cold_compile.total_s"] == 2.0
    for key, value in summary.items():
        assert props["cold_compile." + key] == value
    assert "cold_compile.total_s" not in dict(record.properties("fork", "why", summary))


TIMED_SELECTOR = """
import pytest_coldcompile

class Event:
    def __init__(self, kind, seconds):
        self.kind, self.op, self.outcome, self.seconds = kind, "fwd", "fits", seconds
        self.config, self.resources = {}, {}

class Timed:
    name = "timed"
    def __init__(self):
        self.listeners = []
    def reset(self):
        pass
    def subscribe(self, listener):
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)
    def emit(self, kind, seconds):
        for listener in list(self.listeners):
            listener(Event(kind, seconds))

SELECTOR = pytest_coldcompile.register_selector(Timed())
"""


@needs_fork
def test_selector_seconds_reach_the_summary_and_the_json(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(conftest(TIMED_SELECTOR))
    pytester.makepyfile(
        """
        import pytest, conftest

        @pytest.mark.cold_compile
        def test_selects():
            conftest.SELECTOR.emit("probe", 9.0)
            conftest.SELECTOR.emit("admit", 0.25)
            conftest.SELECTOR.emit("fallback", 0.5)
        """
    )
    result = run(pytester, "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["test * outcome * total s  compile s  select s  trace s  inductor s  frames*"]
    )
    (entry,) = json.loads((pytester.path / "cold.json").read_text()).values()
    assert entry["selection_s"] == pytest.approx(0.75)
    assert entry["compile_s"] == 0 and entry["tracing_s"] == 0 and entry["inductor_s"] == 0


@needs_fork
@needs_modules("torch")
def test_a_real_compile_splits_into_tracing_and_inductor(cold: pytest.Pytester) -> None:
    cold.makepyfile(
        """
        import torch, pytest

        @pytest.mark.cold_compile
        def test_compiles():
            assert torch.compile(lambda x: x + 1)(torch.ones(3)).sum().item() == 6
        """
    )
    # The split is the point, not Inductor's build steps around the kernel: no ISA probe .so
    # (test_pristine.py tests the probes). The kernel itself is still compiled, with the
    # precompiled header the children of this whole run share (conftest.py): built once, where
    # doing without it costs each kernel's compile about 4 s on 2 cores.
    cold._monkeypatch.setenv("TORCHINDUCTOR_VEC_ISA_OK", "1")
    result = run(cold, "--cold-compile-report=cold.json", timeout=600)
    result.assert_outcomes(passed=1)
    (entry,) = json.loads((cold.path / "cold.json").read_text()).values()
    assert entry["inductor_s"] > 0 and entry["tracing_s"] > 0
    assert entry["selection_s"] == 0  # no selector here
    parts = entry["tracing_s"] + entry["inductor_s"] + entry["selection_s"]
    assert parts == pytest.approx(entry["compile_s"], abs=0.005)  # each rounded to 1 ms
    assert entry["forward_graphs"] == 1
