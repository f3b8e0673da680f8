"""The fixtures of cold regressions: compile_counter, launch_events, cold_state.

All three work in a cold child and in-process. torch is imported only when a compile_counter
compiles something.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_coldcompile import item_options, selectors
from pytest_coldcompile.child import context
from pytest_coldcompile.protocol import KINDS, LaunchEvent


@dataclass(frozen=True)
class ColdState:
    """Whether this test runs cold, how, where its private caches are, and its shared-memory cap."""

    cold: bool
    mode: str | None
    cache_dir: str | None
    smem_limit: int | None
    smem_device: str | None = None  # the named device whose limit smem_limit is, if any
    emulated_device: str | None = None  # the named device whose architecture is emulated


@pytest.fixture
def cold_state(request: pytest.FixtureRequest) -> ColdState:
    """Facts about how this test runs: ``.cold``, ``.mode``, ``.cache_dir``, ``.smem_limit``,
    ``.smem_device``, ``.emulated_device``."""
    ctx = context.active(request.config)
    if ctx is not None:
        return ColdState(True, ctx.mode, ctx.cache_dir, ctx.smem_limit, ctx.smem_device,
                         ctx.emulated_device)
    limit, device, _ = item_options.smem_named_for(request.node)
    return ColdState(False, None, None, limit, device)


# -- compile_counter ---------------------------------------------------------------------------


def _guard_failures() -> dict[Any, list[str]]:
    utils = sys.modules.get("torch._dynamo.utils")
    return getattr(utils, "guard_failures", {}) if utils else {}


class CompileCounter:
    """A torch.compile backend that runs Inductor and counts what it was given.

    ``frames``: graphs Dynamo handed to this backend (one per compiled frame; a graph break
    makes more); ``forward_graphs``/``backward_graphs``: AOTAutograd graphs handed to Inductor
    (the AOTAutograd cache is bypassed so that a hit cannot hide one);
    ``recompile_reasons``: Dynamo's guard failures recorded since the counter was made.
    """

    def __init__(self) -> None:
        self.frames = 0
        self.forward_graphs = 0
        self.backward_graphs = 0
        # Each code's list of reasons itself, and how many it held: torch._dynamo.reset()
        # clears guard_failures, and a code's later reasons start a new list from zero.
        self._seen = {code: (reasons, len(reasons)) for code, reasons in _guard_failures().items()}

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        import torch._functorch.config as functorch_config
        from torch._inductor.compile_fx import compile_fx

        self.frames += 1
        # An AOTAutograd cache hit would skip Inductor, so the counts would depend on what
        # earlier runs cached (in-process; a cold child's caches are empty anyway).
        with functorch_config.patch(enable_autograd_cache=False):
            return compile_fx(gm, example_inputs, inner_compile=self._inner_compile)

    def _inner_compile(self, gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        from torch._inductor.compile_fx import compile_fx_inner

        if kwargs.get("is_backward"):
            self.backward_graphs += 1
        else:
            self.forward_graphs += 1
        return compile_fx_inner(gm, example_inputs, **kwargs)

    @property
    def recompile_reasons(self) -> list[str]:
        out = []
        for code, reasons in _guard_failures().items():
            name = getattr(code, "co_name", str(code))
            seen, count = self._seen.get(code, (None, 0))
            out += [f"{name}: {r}" for r in reasons[count if seen is reasons else 0 :]]
        return out

    def assert_graphs(
        self, frames: int | None = None, forward: int | None = None, backward: int | None = None
    ) -> None:
        """Raise AssertionError listing Dynamo's recompile reasons unless every count matches."""
        __tracebackhide__ = True
        wanted = (
            ("frames", frames, self.frames),
            ("forward", forward, self.forward_graphs),
            ("backward", backward, self.backward_graphs),
        )
        wrong = [
            f"{name}: expected {want}, got {got}"
            for name, want, got in wanted
            if want is not None and want != got
        ]
        if wrong:
            reasons = self.recompile_reasons
            listed = "\n".join(f"  - {r}" for r in reasons) or "  (Dynamo recorded none)"
            # AssertionError, as torch.testing.assert_close and pytest.approx raise: callers
            # can catch it with pytest.raises(AssertionError) or unittest's machinery.
            raise AssertionError(
                f"compile_counter: {'; '.join(wrong)}\nrecompile reasons:\n{listed}"
            )

    def __repr__(self) -> str:
        return (
            f"CompileCounter(frames={self.frames}, forward_graphs={self.forward_graphs}, "
            f"backward_graphs={self.backward_graphs})"
        )


@pytest.fixture
def compile_counter() -> CompileCounter:
    """A torch.compile backend (Inductor underneath) counting frames and AOT graphs."""
    return CompileCounter()


# -- launch_events -----------------------------------------------------------------------------


def _bucket(kind: str) -> str:
    if kind in KINDS.values():
        return kind
    if kind in KINDS:
        return KINDS[kind]
    accepted = ", ".join(repr(k) for k in KINDS.values())
    raise ValueError(f"launch_events: kind must be one of {accepted}, got {kind!r}")


class EventList:
    """Events in arrival order, with views by kind."""

    def __init__(self) -> None:
        self.events: list[LaunchEvent] = []

    def of(self, kind: str) -> list[LaunchEvent]:
        bucket = _bucket(kind)
        return [e for e in self.events if KINDS.get(e.kind) == bucket]

    @property
    def probed(self) -> list[LaunchEvent]:
        return self.of("probed")

    @property
    def admitted(self) -> list[LaunchEvent]:
        return self.of("admitted")

    @property
    def fallback(self) -> list[LaunchEvent]:
        return self.of("fallback")

    def ops(self, kind: str) -> set[str]:
        """The ops with at least one event of kind ("probed" | "admitted" | "fallback")."""
        return {e.op for e in self.of(kind)}

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[LaunchEvent]:
        return iter(self.events)

    def __repr__(self) -> str:
        parts = ", ".join(f"{b}={sorted(self.ops(b))}" for b in KINDS.values())
        return f"<{type(self).__name__} {len(self.events)} events: {parts}>"


class LaunchEvents(EventList):
    """Every event registered selectors emit while the test runs."""

    def __init__(self) -> None:
        super().__init__()
        self._windows: list[EventList] = []

    def add(self, event: LaunchEvent) -> None:
        self.events.append(event)
        for window in self._windows:
            window.events.append(event)

    def clear(self) -> None:
        self.events.clear()

    @contextmanager
    def window(self) -> Iterator[EventList]:
        """``with launch_events.window() as w:`` - w holds only the events of the block."""
        window = EventList()
        self._windows.append(window)
        try:
            yield window
        finally:
            self._windows.remove(window)


@pytest.fixture
def launch_events() -> Iterator[LaunchEvents]:
    """Events of every launch selector in use during the test (an entry point's from when its
    module is imported)."""
    events = LaunchEvents()
    undo: list[Callable[[], None]] = []

    def follow(selector: Any) -> None:
        undo.append(selectors.subscribe([selector], events.add))

    try:
        for selector in selectors.all_selectors():
            follow(selector)
        undo.append(selectors.on_load(follow))  # ones registered during the test, too
        yield events
    finally:
        for u in reversed(undo):
            u()
    # A selector whose module the test imported and that failed to load: this test missed
    # its events, so this test is told (at teardown), not the next one that asks for events.
    selectors.load_entry_points(only_imported=True)
