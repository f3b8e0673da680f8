"""Where the host time of the eager P147 force step goes, part by part (H200 evidence).

    python docs/evidence/eager_host_breakdown.py --dtype bf16-amp

1. The step side by side: grid_pair's eager path, the same step with a stand-in op that has
   grid_pair's autograd chain (fwd -> bwd -> bwd) but launches nothing (the floor: the step's own
   casts, sums and autograd), and the reference. Wall (do_bench median), host (issuing 50 steps),
   graph (CUDA graph replay). "unprepared": every call asks the selector and prepares its
   launch again, as before round 8's prepared launches; "JIT launches": unprepared, and every
   launch through Triton's JIT, as before the resolved-kernel launch; "no launch": prepared,
   everything but the kernel launch itself (which result values do not time).
2. One eager launch's parts in microseconds at 2 nodes (perf_counter over many calls, GPU not
   awaited): the selector's cached choice, the launch with and without Triton's JIT binder, the
   bare compiled-kernel call, the launch's preparation.
"""

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_gridpair import SHAPES, inputs, make_pass  # noqa: E402
from profile_eager import StandIn, autocast_run, step_times  # noqa: E402

import gridpair  # noqa: E402
from gridpair import eager, launch, signature  # noqa: E402
from gridpair.active import active_selector  # noqa: E402
from gridpair.geometry import Geometry, kernel_arguments, kernel_constexprs  # noqa: E402
from gridpair.kernels import KERNELS  # noqa: E402


def stand_in(left, right, to_grid, from_grid, n_frames):
    """grid_pair's casts and autograd chain, no kernels."""
    left, right, *_ = eager.autocast_inputs((left, right, to_grid, from_grid))
    return StandIn.apply(left, right)


def per_call_us(fn, calls: int = 300) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def steps(args) -> None:

    data = inputs(args.shape, 300, "cuda")
    frames = SHAPES[args.shape][1]
    impls = [("grid_pair eager", gridpair.grid_pair),
             ("grid_pair eager, unprepared", gridpair.grid_pair),
             ("grid_pair eager, JIT launches", gridpair.grid_pair),
             ("grid_pair eager, no launch", gridpair.grid_pair),
             ("stand-in (no kernels)", stand_in),
             ("reference eager", gridpair.reference_grid_pair)]
    resolved = launch._launch_resolved

    def not_launched(kernel, memo, grid, args, constexprs, tile):
        pass  # results stay uninitialized: the step's own ops still run on them

    def through_jit(kernel, memo, grid, args, constexprs, tile):
        kernel[grid](*args, **constexprs, num_warps=tile.num_warps, num_stages=tile.num_stages)

    prepared = eager._PREPARED

    class Unprepared(dict):
        """Keeps no prepared launch: every call asks the selector and prepares again."""

        def __setitem__(self, key, value):
            pass

    for label, fn in impls:
        launch._launch_resolved = (through_jit if "JIT" in label
                                   else not_launched if "no launch" in label else resolved)
        eager._PREPARED = (Unprepared() if "unprepared" in label or "JIT" in label
                           else prepared)
        run = autocast_run(make_pass("force", fn, frames), data, args.dtype)
        wall, host, graph = step_times(run)
        print(f"step {label:30s} wall {wall:.3f} ms  host {host:.3f} ms  graph {graph:.3f} ms  "
              f"wall/graph {wall / graph:.2f}", flush=True)
    launch._launch_resolved, eager._PREPARED = resolved, prepared


def parts(args) -> None:
    """Host microseconds of each part at 2 nodes (the GPU's work is negligible, so the queue
    never fills and the figures are the host's)."""
    data = inputs(args.shape, 2, "cuda")
    frames = SHAPES[args.shape][1]
    left, right, to_grid, from_grid = data[:4]
    dtype = torch.bfloat16 if args.dtype == "bf16-amp" else torch.float32
    left, right, to_grid, from_grid = (t.to(dtype) for t in (left, right, to_grid, from_grid))
    selector = active_selector()
    operands = (left, right)
    projectors = (to_grid, from_grid)
    key, tile = selector.choose_keyed("fwd", operands, projectors, frames)
    print(f"fwd tile {tile}", flush=True)
    results = {}
    results["selector.choose_keyed (cached)"] = per_call_us(
        lambda: selector.choose_keyed("fwd", operands, projectors, frames))
    results["  probe.signature_of"] = per_call_us(
        lambda: signature.signature_of(operands, key.geometry))
    results["launch, resolved kernel (key)"] = per_call_us(
        lambda: launch.launch("fwd", operands, to_grid, from_grid, frames, tile, direct=True,
                              key=key))
    results["launch, through the JIT (no key)"] = per_call_us(
        lambda: launch.launch("fwd", operands, to_grid, from_grid, frames, tile, direct=True))
    results["eager._compute(fwd)"] = per_call_us(
        lambda: eager._compute("fwd", operands, to_grid, from_grid, frames, selector))
    prepared, eager._PREPARED = eager._PREPARED, {}

    def unprepared():
        eager._PREPARED.clear()
        eager._compute("fwd", operands, to_grid, from_grid, frames, selector)

    results["eager._compute(fwd), unprepared"] = per_call_us(unprepared)
    eager._PREPARED = prepared
    results["grid_pair forward, no grad"] = per_call_us(
        lambda: gridpair.grid_pair(left, right, to_grid, from_grid, frames))
    geometry = key.geometry
    out = torch.empty_like(left)
    n_rows = left.shape[0] * geometry.focus * geometry.channels
    padded = (launch.padded_projector(to_grid), launch.padded_projector(from_grid))
    arguments = kernel_arguments(operands, padded, (out,), n_rows, [x.stride() for x in operands])
    constexprs = kernel_constexprs(geometry, tile, dtype, False)
    grid = launch.launch_grid(n_rows, tile)
    kernel = KERNELS["fwd"]
    options = {"num_warps": tile.num_warps, "num_stages": tile.num_stages}
    compiled = kernel[grid](*arguments, **constexprs, **options)
    results["JITFunction[grid](...)"] = per_call_us(
        lambda: kernel[grid](*arguments, **constexprs, **options))
    values = list(constexprs.values())
    results["CompiledKernel[grid](...)"] = per_call_us(
        lambda: compiled[(grid[0], 1, 1)](*arguments, *values))
    results["kernel_arguments"] = per_call_us(
        lambda: kernel_arguments(operands, padded, (out,), n_rows,
                                 [x.stride() for x in operands]))
    results["kernel_constexprs"] = per_call_us(
        lambda: kernel_constexprs(geometry, tile, dtype, False))
    results["padded_projector x2"] = per_call_us(
        lambda: (launch.padded_projector(to_grid), launch.padded_projector(from_grid)))
    results["torch.empty_like"] = per_call_us(lambda: torch.empty_like(left))
    results["eager.autocast_inputs"] = per_call_us(lambda: eager.autocast_inputs(data[:4]))
    results["Geometry.of"] = per_call_us(lambda: Geometry.of(left, to_grid, frames))
    from gridpair import devices

    results["devices.limits_for"] = per_call_us(lambda: devices.limits_for(left.device))
    results["hash(LaunchKey)"] = per_call_us(lambda: hash(key))
    results["nothing_traces"] = per_call_us(
        lambda: launch.nothing_traces((left, right, to_grid, from_grid)))
    for name, value in results.items():
        print(f"part {name:34s} {value:8.1f} us", flush=True)


def profiled(args) -> None:
    """cProfile of 30 eager steps: the top functions by own time and by cumulative time."""
    import cProfile
    import io
    import pstats

    data = inputs(args.shape, 300, "cuda")
    run = autocast_run(make_pass("force", gridpair.grid_pair, SHAPES[args.shape][1]), data,
                       args.dtype)

    for _ in range(5):
        run()
    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(30):
        run()
    torch.cuda.synchronize()
    profiler.disable()
    for order in ("tottime", "cumtime"):
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(40)
        print(f"== cProfile of 30 steps by {order}\n{text.getvalue()}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="P147")
    parser.add_argument("--dtype", default="bf16-amp")
    parser.add_argument("--cprofile", action="store_true", help="and a cProfile of 30 steps")
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, triton {__import__('triton').__version__}, "
          f"{torch.cuda.get_device_name()}", flush=True)
    steps(args)
    parts(args)
    if args.cprofile:
        profiled(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
