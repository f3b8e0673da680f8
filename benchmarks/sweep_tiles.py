"""Tile sweep on a CUDA device: every candidate tile of each (shape, dtype, op), compiled in
parallel worker processes first (into Triton's cache), then checked against float64 and timed.
The fastest validated tiles feed gridpair/tuned.py.

Kernels are timed as the GPU runs them: one launch captured in a CUDA graph and replayed, with
wrap_triton's eager dispatch off as the custom ops have it, so host overhead (which is the same
for every tile) cannot hide the differences between tiles.

    python benchmarks/sweep_tiles.py --out sweep.json [--shapes P147,P49] [--nodes 300]
"""

import argparse
import json
import multiprocessing
import os
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_gridpair import SHAPES as LMAX_SHAPES

# name: (degrees, focus, frames, channels, grid), the order of gridpair's Geometry
SHAPES = {name: ((lmax + 1) ** 2, focus, frames, channels, grid)
          for name, (lmax, frames, focus, channels, grid) in LMAX_SHAPES.items()}
OPERANDS = {"fwd": 2, "bwd": 3, "bwd2": 5}
DTYPES = {"bf16": "bfloat16", "fp32": "float32"}  # fp32 tiles carry their dot precision
EXTRA_TILES = [(rows, grid, stages, warps) for rows in (128, 64, 32) for grid in (128, 64, 32, 16)
               for stages in (2, 3, 4) for warps in (4, 8)]
# fp32 extras stay at 4 warps and at most 32 rows: on the H200 (triton 3.6) a 64-row 8-warp
# tf32x3 fwd tile compiled and loaded, then made an illegal memory access, which poisons the
# CUDA context for every later timing (docs/evidence/h200/sweep-p147-graph-timed.log).
EXTRA_FP32_TILES = [(rows, grid, stages, 4, "tf32x3") for rows in (32, 16)
                    for grid in (64, 32, 16) for stages in (2, 3)]
# A tile is eligible for the tuned table only within the operator tests' numerics bound.
ERROR_BOUND = 5.0


H200_SHARED = 232448


def _shared_16bit(op, geometry, tile):
    """Shared memory of a 16-bit tile as Triton lays it out: resident operand rows plus the
    pipelined projector tiles (both checked against the H200 sweep's compiles)."""
    from gridpair.geometry import slot_cover

    padded = sum(slot_cover(geometry.slots))
    return 2 * padded * (OPERANDS[op] * tile.block_rows
                         + tile.num_stages * 2 * tile.block_grid)


def _jobs(shapes, dtypes):
    import torch

    from gridpair.geometry import Geometry, Tile
    from gridpair.ladder import generated_candidates

    jobs = []
    for shape in shapes:
        geometry = Geometry(*SHAPES[shape])
        for label in dtypes:
            dtype = getattr(torch, DTYPES[label])
            for op in OPERANDS:
                extra = [Tile(*t) for t in (EXTRA_TILES if dtype == torch.bfloat16
                                            else EXTRA_FP32_TILES)]
                tiles = list(dict.fromkeys([*generated_candidates(op, geometry, dtype), *extra]))
                if dtype == torch.bfloat16:  # exact for 16-bit tiles: skip what cannot load
                    tiles = [t for t in tiles if _shared_16bit(op, geometry, t) <= H200_SHARED]
                jobs += [(shape, label, op, tile) for tile in tiles]
    return jobs


_NODES = 300


def _compile(job):
    """Worker: compile one candidate for sm_90 into Triton's cache (no GPU touched)."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget

    from gridpair.geometry import Geometry
    from gridpair.signature import contiguous_signature
    from gridpair.validation import _ast_source

    shape, label, op, tile = job
    signature = contiguous_signature(op, Geometry(*SHAPES[shape]), getattr(torch, DTYPES[label]),
                                     _NODES)
    start = time.perf_counter()
    try:
        compiled = triton.compile(_ast_source(op, Geometry(*SHAPES[shape]), tile, signature),
                                  target=GPUTarget("cuda", 90, 32),
                                  options={"num_warps": tile.num_warps,
                                           "num_stages": tile.num_stages})
    except Exception as error:  # recorded, not fatal: the sweep reports it
        return job, {"error": repr(error)[:300]}
    from gridpair.cubin import cubin_registers

    return job, {"shared": compiled.metadata.shared, "registers": cubin_registers(compiled.kernel),
                 "compile_s": round(time.perf_counter() - start, 2)}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="sweep.json")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--plan", default=None,
                        help="shape:dtype,dtype;shape:dtype... (overrides --shapes/--dtypes)")
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--tuned-out", default=None,
                        help="write the two fastest tiles within the numerics bound of each "
                             "(shape, dtype, op) as a GRIDPAIR_TUNED_TILES file")
    args = parser.parse_args(argv)
    global _NODES
    _NODES = args.nodes  # read by the forked workers
    if args.plan:
        plan = {part.split(":")[0]: part.split(":")[1].split(",") for part in args.plan.split(";")}
    else:
        plan = {shape: args.dtypes.split(",") for shape in args.shapes.split(",")}
    shapes = list(plan)
    jobs = [job for shape, dtypes in plan.items() for job in _jobs([shape], dtypes)]
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        compiled = dict(pool.map(_compile, jobs, chunksize=1))
    print(f"compiled {len(jobs)} candidates in {time.perf_counter() - start:.0f} s", flush=True)

    import torch
    from torch._library.triton import set_wrap_triton_enabled

    from benchmarks.bench_gridpair import replayed_ms
    from gridpair import reference
    from gridpair.launch import launch

    def kernel_ms(run):
        return replayed_ms(run, rep=60)

    limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    rows = []
    for shape in shapes:
        degrees, focus, frames, channels, grid = SHAPES[shape]
        gen = torch.Generator(device="cuda").manual_seed(0)
        rand = partial(torch.randn, device="cuda", generator=gen, dtype=torch.float64)

        operands64 = [rand(args.nodes, degrees, focus, frames * channels) for _ in range(5)]
        scale = (degrees * frames) ** -0.5
        to_grid64 = rand(grid, degrees * frames) * scale
        from_grid64 = rand(grid, degrees * frames) * scale
        for label in plan[shape]:
            dtype = getattr(torch, DTYPES[label])
            for op, count in OPERANDS.items():
                exact = getattr(reference, op)(*operands64[:count], to_grid64, from_grid64, frames)
                exact = exact if isinstance(exact, tuple) else (exact,)
                xs = [x.to(dtype) for x in operands64[:count]]
                projectors = (to_grid64.to(dtype), from_grid64.to(dtype))
                ref_ms = kernel_ms(partial(getattr(reference, op), *xs, *projectors, frames))
                ref_out = getattr(reference, op)(*xs, *projectors, frames)
                ref_out = ref_out if isinstance(ref_out, tuple) else (ref_out,)
                ref_err = max(((r.double() - e).norm() / e.norm()).item()
                              for r, e in zip(ref_out, exact))
                for job in [j for j in jobs if j[:3] == (shape, label, op)]:
                    tile = job[3]
                    row = {"shape": shape, "dtype": label, "op": op, "tile": tile.as_dict(),
                           **compiled[job], "reference_ms": round(ref_ms, 4),
                           "reference_error": ref_err}
                    if "error" not in row and row["shared"] <= limit:
                        try:
                            run = partial(launch, op, xs, *projectors, frames, tile)
                            with set_wrap_triton_enabled(False):
                                got = run()
                            row["error_vs_f64"] = max(((g.double() - e).norm() / e.norm()).item()
                                                      for g, e in zip(got, exact))
                            with set_wrap_triton_enabled(False):
                                row["ms"] = round(kernel_ms(run), 4)
                        except Exception as error:
                            row["launch_error"] = repr(error)[:300]
                    rows.append(row)
                    with open(args.out + "l", "a") as stream:
                        stream.write(json.dumps(row) + "\n")
                timed = [r for r in rows if r["shape"] == shape and r["dtype"] == label
                         and r["op"] == op and "ms" in r]
                best = min(timed, key=lambda r: r["ms"]) if timed else None
                print(f"{shape:5} {label:12} {op:5} ref {ref_ms:8.3f} ms err {ref_err:.1e} | "
                      + (f"best {best['ms']:8.3f} ms {best['tile']} err "
                         f"{best['error_vs_f64']:.1e} shared {best['shared']}" if best else
                         "no tile ran"), flush=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))
    if args.tuned_out:
        entries = tuned_entries(rows, torch.cuda.get_device_name(0))
        Path(args.tuned_out).write_text(json.dumps(entries, indent=1) + "\n")


def tuned_entries(rows, device_name, keep=2):
    """GRIDPAIR_TUNED_TILES entries: per (shape, dtype, op) the ``keep`` fastest tiles whose
    error from float64 is within ERROR_BOUND times the reference composition's own."""
    from gridpair.geometry import Geometry

    entries = []
    for shape, label, op in dict.fromkeys((r["shape"], r["dtype"], r["op"]) for r in rows):
        timed = sorted((r for r in rows if (r["shape"], r["dtype"], r["op"]) == (shape, label, op)
                        and "ms" in r and r["error_vs_f64"] <= ERROR_BOUND * r["reference_error"]),
                       key=lambda r: r["ms"])
        if timed:
            geometry = Geometry(*SHAPES[shape])
            entries.append({"device": device_name, "op": op, "dtype": DTYPES[label],
                            "geometry": {name: getattr(geometry, name) for name in
                                         ("degrees", "focus", "frames", "channels", "grid")},
                            "tiles": [r["tile"] for r in timed[:keep]],
                            "ms": [r["ms"] for r in timed[:keep]]})
    return entries


if __name__ == "__main__":
    main()
