"""A toy kernel wrapper: candidate tiles, a device limit, a tile selector, a toy compiler.

Loading a kernel whose tile needs more shared memory than the device has raises
OutOfResources, as Triton does. A trace (toy_compile) records launches without loading
anything, so a retry loop that tries a launch and catches OutOfResources learns nothing
while tracing: that is the bug. The fix validates each candidate by loading it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

SHARED_PER_BLOCK = 49152  # the toy device's shared memory per block, in bytes
TILES = (256, 128, 64)  # candidate tiles, fastest first


class OutOfResources(Exception):
    def __init__(self, required: int, limit: int) -> None:
        super().__init__(f"out of resource: shared memory, Required: {required}, "
                         f"Hardware limit: {limit}")


def shared_bytes(tile: int) -> int:
    return tile * 256


def load(tile: int) -> None:
    """Load the kernel for tile on the device: the resource check happens here."""
    need = shared_bytes(tile)
    if need > SHARED_PER_BLOCK:
        raise OutOfResources(need, SHARED_PER_BLOCK)


_tracing = False


@contextlib.contextmanager
def tracing() -> Iterator[None]:
    global _tracing
    _tracing = True
    try:
        yield
    finally:
        _tracing = False


def launch(values: list[float], tile: int) -> float:
    if _tracing:
        return 0.0  # recorded, not loaded
    load(tile)
    return float(sum(values))


class TileSelector:
    """Chooses a tile per problem size and caches it."""

    def __init__(self) -> None:
        self.cache: dict[int, int] = {}
        self.trust_trace = False  # True: the old retry loop (the bug)

    def choose(self, values: list[float]) -> int:
        size = len(values)
        if size not in self.cache:
            self.cache[size] = self._search(values)
        return self.cache[size]

    def _search(self, values: list[float]) -> int:
        for tile in TILES:
            try:
                if self.trust_trace:
                    launch(values, tile)  # the old loop: a launch that did not fail fits
                else:
                    load(tile)  # the fix: load it, traced or not
            except OutOfResources:
                continue
            return tile
        raise RuntimeError("no tile fits this device")

    def reset(self) -> None:
        self.cache.clear()


SELECTOR = TileSelector()


def kernel_sum(values: list[float]) -> float:
    return launch(values, SELECTOR.choose(values))


def toy_compile(fn: Callable[[list[float]], float]) -> Callable[[list[float]], float]:
    """Trace fn once (launches recorded, tiles chosen), then run it for real."""
    def compiled(values: list[float]) -> float:
        with tracing():
            fn(values)
        return fn(values)

    return compiled
