"""What a cold child measures of its compiles: compile seconds split into launch selection,
tracing and Inductor, Dynamo frames, and the forward and backward graphs Inductor compiled.
Hooks go in when torch's modules are imported.
"""

from __future__ import annotations

import collections
import functools
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pytest_coldcompile import import_hooks

# torch._dynamo.utils.counters (torch 2.11-2.13): (group, name) of the compile caches' counts.
CACHE_COUNTERS = (
    ("inductor", "fxgraph_cache_hit"),
    ("inductor", "fxgraph_cache_miss"),
    ("inductor", "fxgraph_cache_bypass"),
    ("aot_autograd", "autograd_cache_hit"),
    ("aot_autograd", "autograd_cache_miss"),
)


def cache_counters() -> dict[str, int]:
    """The FX-graph and AOTAutograd cache counts of this process so far (0 before torch's
    compile stack is imported, which this never imports)."""
    counters = getattr(sys.modules.get("torch._dynamo.utils"), "counters", None)
    out = {}
    for group, name in CACHE_COUNTERS:
        try:
            out[name] = int(counters[group][name]) if counters is not None else 0
        except Exception:
            out[name] = 0
    return out


class CompileStats:
    """Compile seconds, Dynamo frames, and the forward/backward graphs Inductor compiled.

    ``compile_s``: inside Dynamo's compile windows (start/end callbacks). ``inductor_s``:
    inside Inductor's ``_compile_fx_inner``. ``selection_s``: the seconds launch selectors say
    their admit/fallback decisions took (the event's ``seconds``), wherever they happened.
    ``tracing_s`` (Dynamo and AOTAutograd) is what remains of compile_s.
    """

    def __init__(self) -> None:
        self.compile_s = 0.0
        self.inductor_s = 0.0
        self.selection_s = 0.0
        self.forward_graphs = 0
        self.backward_graphs = 0
        self._frames = 0
        self._started: float | None = None
        self._inductor_depth = 0
        # Selection seconds inside a compile window but outside Inductor: the part of
        # compile_s that was neither tracing nor Inductor.
        self._selection_in_tracing_s = 0.0

    @property
    def tracing_s(self) -> float:
        return max(0.0, self.compile_s - self.inductor_s - self._selection_in_tracing_s)

    def on_event(self, event: Any) -> None:
        """Listener for launch events: admit/fallback seconds are selection time."""
        if getattr(event, "kind", None) not in ("admit", "fallback"):
            return
        seconds = getattr(event, "seconds", None)
        if not isinstance(seconds, (int, float)) or seconds < 0:
            return
        self.selection_s += seconds
        if self._started is not None and self._inductor_depth == 0:
            self._selection_in_tracing_s += seconds

    def timings(self) -> dict[str, float]:
        """The compile-time breakdown of the cold report, in seconds."""
        return {
            "compile_s": round(self.compile_s, 3),
            "selection_s": round(self.selection_s, 3),
            "tracing_s": round(self.tracing_s, 3),
            "inductor_s": round(self.inductor_s, 3),
        }

    def install(self) -> None:
        import_hooks.when_imported("torch._dynamo.utils", self._tally_frames)
        import_hooks.when_imported("torch._dynamo.callback", self._hook_callbacks)
        import_hooks.when_imported("torch._inductor.compile_fx", self._hook_inner_compile)

    def _tally_frames(self, mod: ModuleType) -> None:
        # torch._dynamo.test_case.TestCase clears ``counters`` in setUp and tearDown: count
        # each increment of unique_graphs as it happens, through the Counter that the
        # defaultdict makes for "stats" (again after every clear).
        counters = getattr(mod, "counters", None)
        if not isinstance(counters, collections.defaultdict):
            return

        _TallyingCounter.on_graphs = self._add_frames
        counters.default_factory = _TallyingCounter
        if "stats" in counters:
            counters["stats"] = _TallyingCounter(counters["stats"])

    def _add_frames(self, added: int) -> None:
        self._frames += added

    def _hook_callbacks(self, mod: ModuleType) -> None:
        handler = getattr(mod, "callback_handler", None)
        if handler is None:
            return
        handler.register_start_callback(self._on_start)
        handler.register_end_callback(self._on_end)
        clear = handler.clear

        # torch._dynamo.reset() clears every callback (torch's TestCase resets in setUp):
        # register these again after each clear, so the windows are timed after it too.
        @functools.wraps(clear)
        def clear_and_keep_timing() -> None:
            try:
                clear()
            finally:
                if self._on_start not in handler.start_callbacks:
                    handler.register_start_callback(self._on_start)
                if self._on_end not in handler.end_callbacks:
                    handler.register_end_callback(self._on_end)

        handler.clear = clear_and_keep_timing

    def _on_start(self, *args: Any) -> None:
        self._started = time.perf_counter()

    def _on_end(self, *args: Any) -> None:
        if self._started is not None:
            self.compile_s += time.perf_counter() - self._started
            self._started = None

    def _hook_inner_compile(self, mod: ModuleType) -> None:
        # compile_fx_inner looks _compile_fx_inner up at each call; every Inductor graph,
        # forward or backward, whatever the backend wrapper, passes through it.
        inner = getattr(mod, "_compile_fx_inner", None)
        if inner is None:
            return

        @functools.wraps(inner)
        def counted(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
            if kwargs.get("is_backward"):
                self.backward_graphs += 1
            else:
                self.forward_graphs += 1
            # Timed at the outermost call only: nested graphs are inside its time already.
            self._inductor_depth += 1
            began = time.perf_counter()
            try:
                return inner(gm, example_inputs, **kwargs)
            finally:
                self._inductor_depth -= 1
                if self._inductor_depth == 0:
                    self.inductor_s += time.perf_counter() - began

        mod._compile_fx_inner = counted  # type: ignore[attr-defined]

    def frames(self) -> int:
        """Graphs Dynamo compiled since install (its ``unique_graphs``), clears included."""
        return self._frames


class _TallyingCounter(collections.Counter):
    """A Counter that reports each increase of ``unique_graphs`` to ``on_graphs``.

    The listener is the class's, not the instance's: a copy or an unpickled one (plain
    constructor arguments) still counts, and there is one CompileStats per cold child."""

    on_graphs: Callable[[int], None] | None = None

    def __setitem__(self, key: Any, value: Any) -> None:
        listener = type(self).on_graphs
        if listener is not None and key == "unique_graphs" and isinstance(value, int):
            added = value - self.get(key, 0)
            if added > 0:
                listener(added)
        super().__setitem__(key, value)
