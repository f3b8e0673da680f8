"""Launch selection: tile candidates, the cached validated selector, and its events.

Selection is separate from launching and happens before anything is recorded: the custom ops
ask ``SELECTOR.choose`` for a tile with the operands they were given (real, fake or functional
tensors alike - only dtypes, static geometry and alignment are read), and either launch that tile
or compute the reference composition. A choice is made by compiling candidates in order and
keeping the first that the device can load; choices and exhausted searches are cached.
"""

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import product

import torch
from torch import Tensor
from triton.runtime.errors import OutOfResources

from gridpair import devices, tuned
from gridpair.devices import DeviceLimits
from gridpair.geometry import Geometry, Tile, next_power_of_two, slot_cover
from gridpair.kernels import OPERANDS, RESULTS
from gridpair.probe import Compiled, Signature, compile_candidate, signature_of
from pytest_coldcompile.protocol import LaunchEvent

FUSED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

FITS = "fits"
OUT_OF_RESOURCES = "out_of_resources"
CACHED = "cached"
UNSUPPORTED = "unsupported_dtype"

# Tile axes, most aggressive first: (row block, grid block, stages); each tile takes the fewest
# warps that keep its resident values in registers. From the sweeps of shared memory,
# registers, spills and H200 timings (docs/evidence/): 16-bit tiles up to 64 rows; fp32 tiles
# of 16 rows (more rows spill catastrophically), first with tf32x3 dots (3-10x faster than
# IEEE FMA dots and within the fp32 error bound), then with IEEE dots, whose smaller footprint
# still fits 99 KB devices.
_BLOCK_ROWS = (64, 32, 16)
_BLOCK_GRID = (64, 32)
_STAGES = (3, 2)
_WARPS = (4, 8)
_SMALLEST = ((16, 16, 2), (16, 16, 1))
_FP32_SHAPES = ((16, 64, 2), (16, 32, 2), (16, 16, 1))
_FP32_DOTS = ("tf32x3", "ieee")
# 32-bit registers per thread the resident values of a tile may take (of 255): accumulators,
# operand rows and the grid fields of one block. Beyond it ptxas spills to local memory.
_RESIDENT_REGISTERS = 192


@dataclass(frozen=True)
class LaunchKey:
    """Everything a choice depends on; pair counts and strides are deliberately absent."""

    op: str
    device: str
    limit: int
    geometry: Geometry
    signature: Signature


@dataclass(frozen=True)
class Probe:
    """A candidate's verdict: its shared memory (None if it never compiled) and the outcome."""

    tile: Tile
    shared: int | None
    outcome: str
    detail: str = ""


@dataclass(frozen=True)
class Decision:
    """The outcome of one search: every probe in order and the admitted one, if any."""

    key: LaunchKey
    probes: tuple[Probe, ...]
    admitted: Probe | None = None


def resident_registers(op: str, geometry: Geometry, tile: Tile, dtype: torch.dtype) -> int:
    """32-bit registers per thread a tile's resident values take: fp32 accumulators, operand
    rows in the operand dtype, and the fp32 grid fields of one grid block.

    fp32 operands go through FMA dots, whose operand layouts hold each row twice over (the
    offline sweep: 64-row fp32 tiles spill at 8 warps where bf16 ones do not).
    """
    main, tail = slot_cover(geometry.slots)
    slots = main + tail
    n_operands, n_results = len(OPERANDS[op]), len(RESULTS[op])
    operand_words = dtype.itemsize / 4 * (2 if dtype == torch.float32 else 1)
    words = (n_results * tile.block_rows * slots
             + n_operands * tile.block_rows * slots * operand_words
             + n_operands * tile.block_rows * tile.block_grid)
    return int(words // (tile.num_warps * 32))


def generated_candidates(op: str, geometry: Geometry, dtype: torch.dtype) -> list[Tile]:
    """The ladder from the most to the least aggressive tile whose resident values stay in
    registers; grid blocks larger than the grid are left out."""
    widest_grid = max(16, next_power_of_two(geometry.grid))
    if dtype == torch.float32:
        shapes = [(*shape, dots) for dots in _FP32_DOTS for shape in _FP32_SHAPES]
    else:
        shapes = [(*s, None) for s in product(_BLOCK_ROWS, _BLOCK_GRID, _STAGES)]
        shapes += [(*s, None) for s in _SMALLEST]
    ladder = []
    for rows, grid, stages, dots in shapes:
        if grid > widest_grid:
            continue
        for warps in _WARPS:
            tile = Tile(rows, grid, stages, warps, dots)
            if resident_registers(op, geometry, tile, dtype) <= _RESIDENT_REGISTERS:
                ladder.append(tile)
                break
        else:  # even 8 warps are over the budget: the smallest footprint still gets a try
            if (rows, grid, stages) == _SMALLEST[-1]:
                ladder.append(Tile(rows, grid, stages, _WARPS[-1], dots))
    return ladder


class LaunchSelector:
    """Chooses the tile of each grid-pair kernel launch by validated compilation.

    Implements the pytest-coldcompile selector protocol: ``name``, ``reset()``,
    ``subscribe(listener) -> unsubscribe``; listeners receive ``LaunchEvent``s.
    """

    name = "gridpair"

    def __init__(self) -> None:
        self._decisions: dict[LaunchKey, Decision] = {}
        self._listeners: list[Callable[[LaunchEvent], None]] = []
        self._lock = threading.RLock()

    # -- selector protocol -------------------------------------------------------------------
    def reset(self) -> None:
        """Forget every cached choice and every cached exhausted search."""
        with self._lock:
            self._decisions.clear()

    def subscribe(self, listener: Callable[[LaunchEvent], None]) -> Callable[[], None]:
        """Call ``listener(event)`` for every probe, admission and fallback until unsubscribed."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    # -- selection ---------------------------------------------------------------------------
    def choose(self, op: str, operands: Sequence[Tensor], projectors: Sequence[Tensor],
               n_frames: int) -> Tile | None:
        """The admitted tile for this launch, or None: compute with the reference composition.

        Reads only dtypes, static shapes, device and alignment, so it runs the same on real,
        fake and functional tensors, before any kernel call is traced.
        """
        limits = devices.limits_for(operands[0].device)
        if limits is None:
            return None
        key = self.key(op, operands, projectors, n_frames, limits)
        decision = self._decisions.get(key)
        if decision is not None:
            self._emit_cached(decision)
        else:
            decision = self.decide(key, limits)
        return decision.admitted.tile if decision.admitted is not None else None

    def key(self, op: str, operands: Sequence[Tensor], projectors: Sequence[Tensor],
            n_frames: int, limits: DeviceLimits) -> LaunchKey:
        return LaunchKey(op, limits.identity, limits.shared,
                         Geometry.of(operands[0], projectors[0], n_frames),
                         signature_of(operands))

    def decide(self, key: LaunchKey, limits: DeviceLimits, probe_all: bool = False) -> Decision:
        """Search the candidates of ``key`` (all of them with ``probe_all``) and cache it."""
        with self._lock:
            if key.signature.dtype not in FUSED_DTYPES:
                decision = Decision(key, ())
                self._emit("fallback", key, None, {"limit": key.limit}, UNSUPPORTED)
            else:
                decision = self._search(key, limits, probe_all)
            self._decisions[key] = decision
            return decision

    def candidates(self, key: LaunchKey, device_name: str) -> list[Tile]:
        """Tuned tiles for this exact device first, then the generated ladder, no repeats."""
        preferred = tuned.lookup(device_name, key.op, key.signature.dtype, key.geometry)
        ordered = [*preferred, *generated_candidates(key.op, key.geometry, key.signature.dtype)]
        return list(dict.fromkeys(ordered))

    def validate(self, key: LaunchKey, tile: Tile, limits: DeviceLimits) -> Compiled:
        """Compile ``tile``; OutOfResources if the device cannot load it. Overridable."""
        return compile_candidate(key.op, key.geometry, tile, key.signature, limits)

    def _search(self, key: LaunchKey, limits: DeviceLimits, probe_all: bool) -> Decision:
        probes: list[Probe] = []
        admitted = None
        for tile in self.candidates(key, limits.device_name):
            try:
                compiled = self.validate(key, tile, limits)
            except OutOfResources as error:
                shared = error.required if error.name == "shared memory" else None
                probe = Probe(tile, shared, OUT_OF_RESOURCES, str(error))
            else:
                probe = Probe(tile, compiled.shared, FITS)
            probes.append(probe)
            self._emit("probe", key, tile, _resources(key, probe), probe.outcome)
            if probe.outcome == FITS and admitted is None:
                admitted = probe
                self._emit("admit", key, tile, _resources(key, probe), FITS)
                if not probe_all:
                    break
        if admitted is None:
            self._emit("fallback", key, None, {"limit": key.limit}, OUT_OF_RESOURCES)
        return Decision(key, tuple(probes), admitted)

    def _emit_cached(self, decision: Decision) -> None:
        if not self._listeners:
            return
        key, admitted = decision.key, decision.admitted
        if admitted is None:
            self._emit("fallback", key, None, {"limit": key.limit}, CACHED)
        else:
            self._emit("admit", key, admitted.tile, _resources(key, admitted), CACHED)

    def _emit(self, kind: str, key: LaunchKey, tile: Tile | None,
              resources: Mapping[str, object], outcome: str) -> None:
        if not self._listeners:
            return
        event = LaunchEvent(kind, key.op, tile.as_dict() if tile else {}, resources, outcome,
                            self.name, key.device)
        for listener in list(self._listeners):
            listener(event)

    def cached(self) -> Iterator[Decision]:
        """The decisions held now (for inspection and ``explain``)."""
        return iter(list(self._decisions.values()))


def _resources(key: LaunchKey, probe: Probe) -> dict[str, object]:
    return {"shared": probe.shared, "limit": key.limit}


SELECTOR = LaunchSelector()
_active = [SELECTOR]


def active_selector() -> LaunchSelector:
    """The selector the custom ops consult: ``SELECTOR`` unless ``using_selector`` says else."""
    return _active[-1]


@contextmanager
def using_selector(selector: LaunchSelector) -> Iterator[LaunchSelector]:
    """Route the custom ops' launch choices through ``selector`` for the block (for tests and
    experiments with other selection policies; the ops trace the same either way)."""
    _active.append(selector)
    try:
        yield selector
    finally:
        _active.remove(selector)
