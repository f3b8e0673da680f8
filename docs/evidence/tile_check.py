"""One fused launch of a chosen tile at a benchmark shape, checked against float64: for running
a suspect tile under compute-sanitizer on the GPU.

    compute-sanitizer python docs/evidence/tile_check.py --op fwd --tile 64,32,2,8,tf32x3
"""

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "gridpair"))

from benchmarks.bench_gridpair import SHAPES  # noqa: E402
from gridpair import reference  # noqa: E402
from gridpair.geometry import Tile  # noqa: E402
from gridpair.launch import launch  # noqa: E402
from numerics import draw, relative_error  # noqa: E402

NAMES = {"fwd": ("left", "right"), "bwd": ("cotangent", "left", "right"),
         "bwd2": ("cotangent", "left", "right", "grad_grad_left", "grad_grad_right")}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="P147")
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--op", default="fwd")
    parser.add_argument("--tile", default="64,32,2,8,tf32x3")
    args = parser.parse_args()
    rows, grid, stages, warps, *dots = args.tile.split(",")
    tile = Tile(int(rows), int(grid), int(stages), int(warps), dots[0] if dots else None)
    lmax, frames, focus, channels, points = SHAPES[args.shape]
    ops = draw(args.nodes, (lmax + 1) ** 2, focus, frames, channels, points, seed=7,
               device="cuda")
    exact = getattr(reference, args.op)(*[getattr(ops, n) for n in NAMES[args.op]],
                                        ops.to_grid, ops.from_grid, ops.n_frames)
    exact = exact if isinstance(exact, tuple) else (exact,)
    single = ops.to(torch.float32)
    got = launch(args.op, [getattr(single, n) for n in NAMES[args.op]], single.to_grid,
                 single.from_grid, single.n_frames, tile, direct=True)
    torch.cuda.synchronize()
    errors = [relative_error(g, e) for g, e in zip(got, exact)]
    print(f"{args.shape} {args.op} {tile}: relative errors {[format(e, '.2e') for e in errors]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
