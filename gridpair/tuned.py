"""Tuned tiles for exact devices, preferred over the generated ladder and validated like it.

Entries come from timing sweeps on the named device (``benchmarks/sweep_tiles.py``, see
docs/evidence/); a tuned tile that no longer fits - a lowered shared-memory cap, a new compiler -
is rejected like any other candidate and the search goes on. ``GRIDPAIR_TUNED_TILES`` names a
JSON file of more entries (the sweep's ``--tuned-out``), preferred over the built-in table: a
user tunes for their own device without editing the package.
"""

import json
import os
from functools import lru_cache
from pathlib import Path

import torch

from gridpair.geometry import Geometry, Tile

TUNED_TILES_ENV = "GRIDPAIR_TUNED_TILES"
OPS = ("fwd", "bwd", "bwd2")

_H200 = "NVIDIA H200"
_P147 = (49, 2, 3, 96, 584)  # lmax 6, F=2, K=3, C=96, G=584
_P49 = (49, 1, 1, 256, 584)  # lmax 6, F=1, K=1, C=256, G=584

TunedKey = tuple[str, str, torch.dtype, tuple[int, int, int, int, int]]

# (device name as torch reports it, op, dtype, (D, F, K, C, G)) -> tiles, best first; chosen by
# sweep on the H200 (docs/design-gridpair.md, "Tuned tiles").
TUNED: dict[TunedKey, tuple[Tile, ...]] = {
    (_H200, "fwd", torch.bfloat16, _P147): (Tile(128, 64, 3, 8), Tile(64, 32, 3, 4)),
    (_H200, "bwd", torch.bfloat16, _P147): (Tile(128, 32, 3, 8), Tile(128, 32, 4, 8)),
    (_H200, "bwd2", torch.bfloat16, _P147): (Tile(16, 64, 3, 4), Tile(16, 64, 2, 4)),
    (_H200, "fwd", torch.float32, _P147): (Tile(16, 32, 2, 4, "tf32x3"),
                                            Tile(16, 64, 2, 4, "tf32x3")),
    (_H200, "bwd", torch.float32, _P147): (Tile(16, 32, 2, 4, "tf32x3"),
                                            Tile(16, 16, 2, 4, "tf32x3")),
    (_H200, "bwd2", torch.float32, _P147): (Tile(16, 64, 2, 8, "tf32x3"),
                                             Tile(16, 32, 3, 4, "tf32x3")),
    (_H200, "fwd", torch.bfloat16, _P49): (Tile(64, 64, 3, 4), Tile(64, 32, 4, 4)),
    (_H200, "bwd", torch.bfloat16, _P49): (Tile(64, 64, 3, 4), Tile(64, 32, 3, 4)),
    (_H200, "bwd2", torch.bfloat16, _P49): (Tile(64, 64, 3, 4), Tile(64, 64, 4, 4)),
}


def lookup(device_name: str, op: str, dtype: torch.dtype, geometry: Geometry) -> tuple[Tile, ...]:
    """Tuned tiles for this exact device, op, dtype and geometry (empty when none): those of
    ``GRIDPAIR_TUNED_TILES`` first, then the built-in table's."""
    shape = (geometry.degrees, geometry.focus, geometry.frames, geometry.channels, geometry.grid)
    key = (device_name, op, dtype, shape)
    path = os.environ.get(TUNED_TILES_ENV)
    from_file = load_tuned_file(path).get(key, ()) if path else ()
    return tuple(dict.fromkeys([*from_file, *TUNED.get(key, ())]))


def load_tuned_file(path: str) -> dict[TunedKey, tuple[Tile, ...]]:
    """Parse a tuned-tiles file: a JSON list of entries
    ``{"device", "op", "dtype", "geometry": {degrees, focus, frames, channels, grid},
    "tiles": [{block_rows, block_grid, num_stages, num_warps[, fp32_dots]}, ...]}``.

    Raises ValueError naming the file, the entry and the field or rule at fault. The file is
    read on every call (it is small, and read once per launch decision) and parsed once per
    content, so an edited file takes effect.
    """
    where = f"{TUNED_TILES_ENV}={path}"
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ValueError(f"{where}: cannot read a JSON tuned-tiles file: {error}") from None
    return _parse(where, text)


_FP32_DOTS = (None, "tf32x3", "ieee")
_FUSED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_MAX_WARPS = 32  # 1024 threads per block (CUDA's per-block limit) of 32-thread warps


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def tile_rule_broken(tile: Tile, dtype: torch.dtype) -> str | None:
    """The first rule of the kernels' compile that ``tile`` breaks for ``dtype``, or None.

    Block extents are ``tl.arange`` ranges (powers of two) and dot extents (16 at least);
    Triton takes a power-of-two warp count; a pipeline has at least one stage; the dot
    precision is a choice of float32 operands only (16-bit dots always take the tensor cores).
    """
    fields = (tile.block_rows, tile.block_grid, tile.num_stages, tile.num_warps)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in fields):
        return "needs positive integers"
    for name in ("block_rows", "block_grid"):
        value = getattr(tile, name)
        if not _is_power_of_two(value) or value < 16:
            return f"{name}={value}: expected a power of two >= 16 (tl.arange and tl.dot extents)"
    if not _is_power_of_two(tile.num_warps) or tile.num_warps > _MAX_WARPS:
        return (f"num_warps={tile.num_warps}: expected a power of two from 1 to {_MAX_WARPS} "
                "(1024 threads per block)")
    if tile.num_stages < 1:
        return f"num_stages={tile.num_stages}: expected at least 1"
    if tile.fp32_dots not in _FP32_DOTS:
        return f"fp32_dots {tile.fp32_dots!r} is not tf32x3 or ieee"
    if tile.fp32_dots is not None and dtype != torch.float32:
        return f"fp32_dots={tile.fp32_dots!r}: applies to float32 only, not {dtype}"
    return None


@lru_cache(maxsize=8)
def _parse(where: str, text: str) -> dict[TunedKey, tuple[Tile, ...]]:
    # Keyed by the file's name and contents: a changed file is a new entry.
    try:
        entries = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{where}: cannot read a JSON tuned-tiles file: {error}") from None
    if not isinstance(entries, list):
        raise ValueError(f"{where}: expected a JSON list of entries")
    table: dict[TunedKey, tuple[Tile, ...]] = {}
    for index, entry in enumerate(entries):
        at = f"{where}: entry {index}"
        if not isinstance(entry, dict):
            raise ValueError(f"{at}: expected an object")
        missing = {"device", "op", "dtype", "geometry", "tiles"} - set(entry)
        if missing:
            raise ValueError(f"{at}: missing {', '.join(sorted(missing))}")
        if entry["op"] not in OPS:
            raise ValueError(f"{at}: op {entry['op']!r} is not one of {', '.join(OPS)}")
        dtype = getattr(torch, str(entry["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"{at}: dtype {entry['dtype']!r} is not a torch dtype name")
        if dtype not in _FUSED_DTYPES:
            raise ValueError(f"{at}: dtype {entry['dtype']!r} has no fused kernel (expected "
                             "float32, bfloat16 or float16)")
        try:
            geometry = Geometry(**entry["geometry"])
            tiles = tuple(Tile(**tile) for tile in entry["tiles"])
        except TypeError as error:
            raise ValueError(f"{at}: bad geometry or tile: {error}") from None
        for number, tile in enumerate(tiles):
            broken = tile_rule_broken(tile, dtype)
            if broken:
                raise ValueError(f"{at}, tile {number} {tile.as_dict()}: {broken}")
        shape = (geometry.degrees, geometry.focus, geometry.frames, geometry.channels,
                 geometry.grid)
        key = (str(entry["device"]), entry["op"], dtype, shape)
        table[key] = tuple(dict.fromkeys([*table.get(key, ()), *tiles]))
    return table
