"""Tuned tiles for exact devices, preferred over the generated ladder and validated like it.

Entries come from timing sweeps on the named device (``python -m gridpair bench --sweep``, see
docs/evidence/); a tuned tile that no longer fits - a lowered shared-memory cap, a new compiler -
is rejected like any other candidate and the search goes on.
"""

import torch

from gridpair.launchers import Geometry, Tile

# (device name as torch reports it, op, dtype, (D, F, K, C, G)) -> tiles, best first.
TUNED: dict[tuple[str, str, torch.dtype, tuple[int, int, int, int, int]], tuple[Tile, ...]] = {}


def lookup(device_name: str, op: str, dtype: torch.dtype, geometry: Geometry) -> tuple[Tile, ...]:
    """Tuned tiles for this exact device, op, dtype and geometry (empty when none)."""
    shape = (geometry.degrees, geometry.focus, geometry.frames, geometry.channels, geometry.grid)
    return TUNED.get((device_name, op, dtype, shape), ())
