"""A toy kernel library with the bug pytest-coldcompile exists for: its launch selector picks a
tile by validating candidates, but only an eager call can validate; a traced call (under
torch.compile, say) takes the cached choice when there is one and otherwise guesses a tile
that does not fit. In a plain pytest run an earlier eager test has cached the choice, so the
traced test passes; cold, it fails. The selector follows pytest-coldcompile's selector
protocol (name, reset, subscribe), so a cold child resets it and sees its admissions."""

from collections.abc import Callable
from typing import Any

SHARED_LIMIT = 101376  # bytes per block of the device it "runs" on
TILES = (256, 128, 64)  # candidates, largest first


class Event:
    def __init__(self, kind: str, op: str, tile: int, outcome: str) -> None:
        self.kind, self.op, self.config, self.outcome = kind, op, {"TILE": tile}, outcome
        self.resources = {"shared": shared_bytes(tile), "limit": SHARED_LIMIT}


def shared_bytes(tile: int) -> int:
    return tile * tile * 2


class TileSelector:
    name = "toytiles"

    def __init__(self) -> None:
        self.cache: dict[str, int] = {}
        self.listeners: list[Callable[[Any], None]] = []

    def reset(self) -> None:
        self.cache.clear()

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def _emit(self, kind: str, op: str, tile: int, outcome: str) -> None:
        for listener in list(self.listeners):
            listener(Event(kind, op, tile, outcome))

    def choose(self, op: str, traced: bool) -> int:
        if op in self.cache:
            self._emit("admit", op, self.cache[op], "cached")
            return self.cache[op]
        if traced:  # the bug: no validation while tracing, and no fallback either
            self._emit("admit", op, TILES[0], "fits")
            return TILES[0]
        for tile in TILES:
            fits = shared_bytes(tile) <= SHARED_LIMIT
            self._emit("probe", op, tile, "fits" if fits else "out_of_resources")
            if fits:
                self.cache[op] = tile
                self._emit("admit", op, tile, "fits")
                return tile
        raise RuntimeError(f"no tile fits for {op}")


SELECTOR = TileSelector()


def launch(op: str, traced: bool = False) -> int:
    """Launch op; the tile it ran with. A tile over the limit fails as on the device."""
    tile = SELECTOR.choose(op, traced)
    if shared_bytes(tile) > SHARED_LIMIT:
        raise RuntimeError(f"out of resources: {op} with TILE={tile} needs "
                           f"{shared_bytes(tile)} bytes of shared memory, limit {SHARED_LIMIT}")
    return tile
