"""The launch selector: which tile ``blocked_sum`` launches with, cached per device limit.

It follows pytest-coldcompile's selector protocol (``name``, ``reset``, ``subscribe``) and
emits a probe event per candidate tried and an admit event per decision (outcome ``cached``
when it was decided before).
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable

from toykernels.device import Kernel, OutOfResources, shared_limit

TILES = (256, 128, 64)  # most to least aggressive


class Selector:
    name = "toykernels"

    def __init__(self) -> None:
        self._chosen: dict[tuple[str, int], Kernel] = {}
        self._listeners: list[Callable] = []

    def reset(self) -> None:
        """Forget every choice (pytest-coldcompile calls it before each cold test)."""
        self._chosen.clear()

    def subscribe(self, listener: Callable) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def choose(self, op: str, tracing: bool) -> Kernel:
        key = (op, shared_limit())
        if key in self._chosen:
            kernel = self._chosen[key]
            self._emit("admit", op, kernel, "cached")
            return kernel
        kernel = self._chosen[key] = self._search(op, tracing)
        return kernel

    def _search(self, op: str, tracing: bool) -> Kernel:
        trust_the_trace = os.environ.get("TOYKERNELS_SELECTION") == "trial"
        for tile in TILES:
            kernel = Kernel(tile)
            try:
                if tracing and trust_the_trace:
                    pass  # the bug: a trace loads nothing, so nothing can fail here
                else:
                    kernel.load()  # the fix: validate by loading, traced or not
            except OutOfResources:
                self._emit("probe", op, kernel, "out_of_resources")
                continue
            self._emit("probe", op, kernel, "fits")
            self._emit("admit", op, kernel, "fits")
            return kernel
        raise OutOfResources(f"{op}: no tile fits {shared_limit()} bytes")

    def _emit(self, kind: str, op: str, kernel: Kernel, outcome: str) -> None:
        event = types.SimpleNamespace(
            kind=kind, op=op, config={"TILE": kernel.tile}, outcome=outcome,
            resources={"shared": kernel.shared, "limit": shared_limit()},
        )
        for listener in list(self._listeners):
            listener(event)


SELECTOR = Selector()
