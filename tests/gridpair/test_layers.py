"""A launch goes down gridpair's layers once: operands -> path -> decision -> launch, entering
each module once (docs/gridpair-internals.md). Traced at run time: the gridpair modules a
grid_pair call enters, in order, from the operator to the kernel - eager, and traced with a cold
selector (the search and its validation compiles)."""

import sys

import torch
from interpreted_kernels import interpreted_kernels
from torch.fx.experimental.proxy_tensor import make_fx

from gridpair import grid_pair
from gridpair.active import using_selector
from gridpair.geometry import Tile
from gridpair.selector import LaunchSelector
from gridpair.validation import Compiled

# Shared vocabulary that every layer reads (tables, limits, real-or-traced predicates): not
# stops of the walk.
VOCABULARY = {"gridpair.geometry", "gridpair.devices", "gridpair.harness", "gridpair.events",
              "gridpair.tracing", "gridpair._versions"}
# The layers in order, as docs/gridpair-internals.md lists them.
EAGER_WALK = ["api", "inputs", "eager", "active", "autograd", "selector", "signature", "launch",
              "kernels"]
# Traced with nothing decided: the key (and the keys to validate ahead), the ladder, the compile
# task and the validation compile for the profile, then the reference (no launch on the CPU).
TRACED_COLD_WALK = ["api", "inputs", "ops", "active", "selector", "signature", "ladder", "tuned",
                    "pool", "validation", "cubin", "reference"]


class _OneTile(LaunchSelector):
    """Admits one small tile without compiling (validation has its own tests)."""

    def candidates(self, key, device_name):
        return [Tile(16, 16, 1, 4)]

    def validate(self, key, tile, limits):
        return Compiled(0, None)


def _module(frame) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name.startswith("gridpair") and name not in VOCABULARY else None


def walk(call) -> list[str]:
    """The gridpair modules ``call`` enters, in order: a stop is a call into a module from
    another (or from outside gridpair); consecutive stops in one module count once."""
    stops: list[str] = []

    def profile(frame, event, arg):
        if event != "call" or (frame.f_code.co_name.startswith("__") and \
                frame.f_code.co_name not in ("__init__", "__call__")):
            return
        callee = _module(frame)
        if callee is None:
            return
        caller = frame.f_back
        while caller is not None and _module(caller) is None and \
                not caller.f_globals.get("__name__", "").startswith("gridpair"):
            caller = caller.f_back
        if caller is not None and _module(caller) == callee:
            return
        name = callee.removeprefix("gridpair.")
        if not stops or stops[-1] != name:
            stops.append(name)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return stops


def returns(stops: list[str]) -> list[str]:
    """The stops at a module the walk had already entered and left."""
    return [name for index, name in enumerate(stops) if name in stops[:index]]


def _operands(nodes):
    generator = torch.Generator().manual_seed(nodes)
    left, right = (torch.randn(nodes, 9, 2, 12, generator=generator) for _ in range(2))
    to_grid, from_grid = (torch.randn(23, 27, generator=generator) * 0.2 for _ in range(2))
    return left, right, to_grid, from_grid, 3


def test_an_eager_launch_enters_each_layer_once_in_order(monkeypatch):
    monkeypatch.setenv("GRIDPAIR_DEVICE", "h200")
    with using_selector(_OneTile()), interpreted_kernels():
        # Operands kept alive: a projector freed mid-walk would run its cache's callback.
        warm, operands = _operands(3), _operands(5)
        grid_pair(*warm)  # decides the key
        first = walk(lambda: grid_pair(*operands))  # same key, a new layout
        repeat = walk(lambda: grid_pair(*operands))  # the prepared launch
    assert returns(first) == [] and returns(repeat) == [], (first, repeat)
    assert first == EAGER_WALK, first
    assert repeat == [m for m in EAGER_WALK if m != "signature"], repeat


def test_a_traced_launch_with_a_cold_selector_enters_each_layer_once(monkeypatch):
    """Traced (fake tensors) with nothing decided: the key, the search and its validation
    compile, then the reference composition (no GPU here) - each module once."""
    monkeypatch.setenv("GRIDPAIR_DEVICE", "h200")
    monkeypatch.delenv("PYTEST_COLDCOMPILE_SMEM_LIMIT", raising=False)
    operands = _operands(5)
    with using_selector(LaunchSelector(workers=1)):
        traced = walk(lambda: make_fx(grid_pair, tracing_mode="fake")(*operands))
    assert returns(traced) == [], " -> ".join(traced)
    assert traced == TRACED_COLD_WALK, " -> ".join(traced)
