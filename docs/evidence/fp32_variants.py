"""GPU time of fp32 kernel variants beside the shipped kernels at P147, each launch replayed from
a CUDA graph and checked against float64 (issue #38).

    python docs/evidence/fp32_variants.py [--nodes 300] [--only fwd|bwd]
    ncu --clock-control none -k regex:bwd python docs/evidence/fp32_variants.py \
        --profile bwd,chunk,16,16,1,4,tf32x3

Prints one line per (op, variant, tile): ms, the relative error of each result against float64
and the float32 reference's own error, and the einsum reference's time per op. Variants come from
``fp32_variant_kernels.py``; "shipped" is gridpair.kernels with Triton's own tf32x3.
"""

import argparse
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[1] / "tests" / "gridpair"))

import fp32_variant_kernels as variants  # noqa: E402
from tile_check import NAMES, fp32_case, parse_tile  # noqa: E402

from benchmarks.bench_gridpair import replayed_ms  # noqa: E402
from gridpair import reference  # noqa: E402
from gridpair.geometry import Geometry, kernel_arguments, kernel_constexprs  # noqa: E402
from gridpair.launch import launch, pad_projector  # noqa: E402
from numerics import relative_error  # noqa: E402

KERNELS = {("fwd", "split"): variants.fwd_split, ("bwd", "split"): variants.bwd_split,
           ("fwd", "chunk"): variants.fwd_chunk, ("bwd", "chunk"): variants.bwd_chunk,
           ("fwd", "pair"): variants.fwd_pair, ("bwd", "pair"): variants.bwd_pair}
# Call 1 of round 13 timed split and chunk at 16 and 32 rows (docs/evidence/h200/round13/
# fp32-call1); this plan times the 64-row warpgroup tiles that chunking lets compile.
PLAN = {
    op: [("shipped", "16,32,2,4,tf32x3"), ("chunk", "16,32,2,4,tf32x3"),
         ("pair", "16,32,2,4,tf32x3"), ("pair", "64,16,1,4,tf32x3"),
         ("pair", "64,16,1,8,tf32x3"), ("pair", "64,32,1,8,tf32x3"),
         ("pair", "64,16,2,8,tf32x3")]
    for op in ("fwd", "bwd")
}


def split_projector(projector: torch.Tensor) -> torch.Tensor:
    """The (G, 2*PADDED) [hi | lo] projector of the variants: hi rounded to TF32 (to nearest,
    ties away, as cvt.rna.tf32.f32), lo = x - hi exactly."""
    padded = pad_projector(projector)
    bits = padded.view(torch.int32)
    hi = ((bits + 0x1000) & -0x2000).view(torch.float32)
    return torch.cat([hi, padded - hi], dim=1).contiguous()


def variant_launch(op, kernel, operands, to_grid, from_grid, n_frames, tile):
    first = operands[0]
    geometry = Geometry.of(first, to_grid, n_frames)
    results = tuple(torch.empty_like(first, memory_format=torch.contiguous_format)
                    for _ in range(1 if op == "fwd" else 2))
    n_rows = first.shape[0] * geometry.focus * geometry.channels
    args = kernel_arguments(operands, (split_projector(to_grid), split_projector(from_grid)),
                            results, n_rows, [x.stride() for x in operands])
    constexprs = kernel_constexprs(geometry, tile, torch.float32)
    grid = (-(-n_rows // tile.block_rows),)

    def run():
        kernel[grid](*args, **constexprs, num_warps=tile.num_warps, num_stages=tile.num_stages)
        return results
    return run


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="P147")
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--only", default="fwd,bwd")
    parser.add_argument("--profile", default=None,
                        help="op,variant,tile: one launch of that variant only (for ncu)")
    args = parser.parse_args()
    if args.profile:
        op, name, text = args.profile.split(",", 2)
        single, _ = fp32_case(args.shape, args.nodes, op)
        operands = [getattr(single, n) for n in NAMES[op]]
        tile = parse_tile(text)
        if name == "shipped":
            launch(op, operands, single.to_grid, single.from_grid, single.n_frames, tile,
                   direct=True)
        else:
            variant_launch(op, KERNELS[op, name], operands, single.to_grid, single.from_grid,
                           single.n_frames, tile)()
        torch.cuda.synchronize()
        print(f"{args.shape} {op} {name} {tile}: one launch profiled", flush=True)
        return 0
    for op in args.only.split(","):
        single, exact = fp32_case(args.shape, args.nodes, op)
        frames = single.n_frames
        operands = [getattr(single, n) for n in NAMES[op]]
        own = getattr(reference, op)(*operands, single.to_grid, single.from_grid, frames)
        own = own if isinstance(own, tuple) else (own,)
        own_error = max(relative_error(o, e) for o, e in zip(own, exact))
        ref_ms = replayed_ms(lambda op=op, operands=operands, single=single, frames=frames:
                             getattr(reference, op)(*operands, single.to_grid,
                                                    single.from_grid, frames))
        print(f"{args.shape} {op} reference einsums IEEE fp32: {ref_ms:.4f} ms, "
              f"error {own_error:.2e}", flush=True)
        for name, text in PLAN[op]:
            tile = parse_tile(text)
            if name == "shipped":
                def run(tile=tile, op=op, operands=operands, single=single, frames=frames):
                    return launch(op, operands, single.to_grid, single.from_grid, frames, tile,
                                  direct=True)
            else:
                run = variant_launch(op, KERNELS[op, name], operands, single.to_grid,
                                     single.from_grid, frames, tile)
            try:
                got = run()
                torch.cuda.synchronize()
            except Exception as error:  # a variant that does not load is a result too
                print(f"{args.shape} {op} {name} {tile}: {type(error).__name__}: "
                      f"{str(error)[:160]}", flush=True)
                continue
            errors = [relative_error(g, e) for g, e in zip(got, exact)]
            milliseconds = replayed_ms(run)
            print(f"{args.shape} {op} {name:<7} {tile}: {milliseconds:.4f} ms "
                  f"({ref_ms / milliseconds:.2f}x reference), errors "
                  f"{' '.join(format(e, '.2e') for e in errors)} (fp32 reference "
                  f"{own_error:.2e})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
