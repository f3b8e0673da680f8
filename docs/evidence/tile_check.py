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


def parse_tile(text: str) -> Tile:
    """``rows,grid,stages,warps[,fp32_dots]`` as a Tile."""
    rows, grid, stages, warps, *dots = text.split(",")
    return Tile(int(rows), int(grid), int(stages), int(warps), dots[0] if dots else None)


def fp32_case(shape: str, nodes: int, op: str):
    """(float32 operands and projectors on the GPU, the op's float64 results) at ``shape``."""
    lmax, frames, focus, channels, points = SHAPES[shape]
    ops = draw(nodes, (lmax + 1) ** 2, focus, frames, channels, points, seed=7, device="cuda")
    exact = getattr(reference, op)(*[getattr(ops, n) for n in NAMES[op]], ops.to_grid,
                                   ops.from_grid, ops.n_frames)
    single = ops.to(torch.float32)
    return single, exact if isinstance(exact, tuple) else (exact,)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="P147")
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--op", default="fwd")
    parser.add_argument("--tile", default="64,32,2,8,tf32x3")
    args = parser.parse_args()
    tile = parse_tile(args.tile)
    single, exact = fp32_case(args.shape, args.nodes, args.op)
    got = launch(args.op, [getattr(single, n) for n in NAMES[args.op]], single.to_grid,
                 single.from_grid, single.n_frames, tile, direct=True)
    torch.cuda.synchronize()
    errors = [relative_error(g, e) for g, e in zip(got, exact)]
    print(f"{args.shape} {args.op} {tile}: relative errors {[format(e, '.2e') for e in errors]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
