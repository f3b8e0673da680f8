"""Tuned tiles for exact devices, preferred over the generated ladder and validated like it.

Entries come from timing sweeps on the named device (``python -m gridpair bench --sweep``, see
docs/evidence/); a tuned tile that no longer fits - a lowered shared-memory cap, a new compiler -
is rejected like any other candidate and the search goes on.
"""

import torch

from gridpair.launchers import Geometry, Tile

_H200 = "NVIDIA H200"
_P147 = (49, 2, 3, 96, 584)  # lmax 6, F=2, K=3, C=96, G=584
_P49 = (49, 1, 1, 256, 584)  # lmax 6, F=1, K=1, C=256, G=584

# (device name as torch reports it, op, dtype, (D, F, K, C, G)) -> tiles, best first.
# Fastest validated tiles of the H200 sweep, 300 nodes, torch 2.11 / triton 3.6
# (docs/evidence/h200-tile-sweep.md, benchmarks/sweep_tiles.py).
TUNED: dict[tuple[str, str, torch.dtype, tuple[int, int, int, int, int]], tuple[Tile, ...]] = {
    (_H200, "fwd", torch.bfloat16, _P147): (Tile(64, 64, 3, 8),),
    (_H200, "bwd", torch.bfloat16, _P147): (Tile(64, 16, 3, 4),),
    (_H200, "bwd2", torch.bfloat16, _P147): (Tile(16, 64, 3, 4),),
    (_H200, "fwd", torch.float32, _P147): (Tile(16, 32, 2, 4, "tf32x3"),),
    (_H200, "bwd", torch.float32, _P147): (Tile(16, 32, 2, 4, "tf32x3"),),
    (_H200, "bwd2", torch.float32, _P147): (Tile(16, 64, 2, 8, "tf32x3"),),
    (_H200, "fwd", torch.bfloat16, _P49): (Tile(64, 16, 3, 4),),
    (_H200, "bwd", torch.bfloat16, _P49): (Tile(64, 16, 3, 4),),
    (_H200, "bwd2", torch.bfloat16, _P49): (Tile(64, 64, 4, 4),),
}


def lookup(device_name: str, op: str, dtype: torch.dtype, geometry: Geometry) -> tuple[Tile, ...]:
    """Tuned tiles for this exact device, op, dtype and geometry (empty when none)."""
    shape = (geometry.degrees, geometry.focus, geometry.frames, geometry.channels, geometry.grid)
    return TUNED.get((device_name, op, dtype, shape), ())
