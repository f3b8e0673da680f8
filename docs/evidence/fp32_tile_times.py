"""GPU time of fp32 tiles of one kernel at a benchmark shape, each replayed from a CUDA graph and
checked against float64: for finding tiles that spill less than the tuned ones.

    python docs/evidence/fp32_tile_times.py --op bwd --tiles 16,32,2,4,tf32x3 16,32,2,8,tf32x3
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tile_check import NAMES, fp32_case, parse_tile
from triton.runtime.errors import OutOfResources

from benchmarks.bench_gridpair import replayed_ms
from gridpair import reference
from gridpair.launch import launch
from numerics import relative_error


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="P147")
    parser.add_argument("--op", default="bwd")
    parser.add_argument("--tiles", nargs="+", required=True)
    args = parser.parse_args()
    single, exact = fp32_case(args.shape, 300, args.op)
    frames = single.n_frames
    operands = [getattr(single, n) for n in NAMES[args.op]]
    own = getattr(reference, args.op)(*operands, single.to_grid, single.from_grid, frames)
    own = own if isinstance(own, tuple) else (own,)
    own_error = max(relative_error(o, e) for o, e in zip(own, exact))
    reference_ms = replayed_ms(lambda: getattr(reference, args.op)(
        *operands, single.to_grid, single.from_grid, frames))
    print(f"{args.op} reference (einsums, IEEE fp32): {reference_ms:.3f} ms", flush=True)
    for text in args.tiles:
        tile = parse_tile(text)

        def run(tile=tile):
            return launch(args.op, operands, single.to_grid, single.from_grid, frames, tile,
                          direct=True)

        try:
            got = run()
        except OutOfResources as error:
            print(f"{args.op} {tile}: {error}", flush=True)
            continue
        torch.cuda.synchronize()
        error = max(relative_error(g, e) for g, e in zip(got, exact))
        milliseconds = replayed_ms(run)
        print(f"{args.op} {tile}: {milliseconds:.3f} ms, error {error:.2e} "
              f"(float32 reference {own_error:.2e})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
