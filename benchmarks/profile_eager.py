"""Where the host time of an eager force step goes: cProfile and host-only timing of the P147
force step, through grid_pair's eager path and through the custom ops' dispatch, side by side.

    python benchmarks/profile_eager.py --dtype bf16-amp --steps 30 > profile.txt

For each path: the step's wall time per call as do_bench reports it, the host time per step
(issuing 50 steps without waiting for the GPU), the GPU time of the step replayed from a CUDA
graph, and cProfile's top functions by self time over ``--steps`` steps.
"""

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gridpair import SHAPES, autocast, grid_pair_through_ops, inputs, make_pass, replayed_ms

from gridpair import grid_pair


def host_ms(run, steps: int = 50) -> float:
    """Milliseconds per step to issue ``steps`` steps, the GPU left to catch up afterwards."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        run()
    issued = time.perf_counter() - start
    torch.cuda.synchronize()
    return issued / steps * 1e3


class StandIn(torch.autograd.Function):
    """grid_pair's autograd chain (fwd -> bwd -> bwd) with empty results and no kernels: what
    a step costs without the operator. ``apply(left, right, *constants)``."""

    @staticmethod
    def forward(ctx, left, right, *constants):
        ctx.save_for_backward(left, right)
        ctx.constants = len(constants)
        return torch.empty_like(left)

    @staticmethod
    def backward(ctx, grad_out):
        left, right = ctx.saved_tensors
        return (*StandInBackward.apply(grad_out, left, right), *(None,) * ctx.constants)


class StandInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, grad_out, left, right):
        ctx.save_for_backward(grad_out)
        return torch.empty_like(left), torch.empty_like(right)

    @staticmethod
    def backward(ctx, grad_grad_left, grad_grad_right):
        (grad_out,) = ctx.saved_tensors
        return None, *StandInBackward.apply(grad_out, grad_grad_left, grad_grad_right)


def autocast_run(step, data, dtype: str, device: str = "cuda"):
    """``step(*data)`` under the autocast of ``dtype`` ("bf16-amp"; none for float32)."""

    def run():
        with autocast(dtype, device):
            return step(*data)

    return run


def step_times(run) -> tuple[float, float, float]:
    """(wall, host, graph) milliseconds of a step: do_bench's median, issuing 50 steps without
    waiting (best of three), and the step replayed from a CUDA graph."""
    from triton.testing import do_bench

    run()
    torch.cuda.synchronize()
    wall = do_bench(run, warmup=50, rep=200, return_mode="median")
    host = min(host_ms(run) for _ in range(3))
    return wall, host, replayed_ms(run)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="P147")
    parser.add_argument("--dtype", default="bf16-amp")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    data = inputs(args.shape, 300, "cuda")
    frames = SHAPES[args.shape][1]
    for label, fn in (("grid_pair (eager path)", grid_pair),
                      ("custom ops (fused-ops)", grid_pair_through_ops)):
        run = autocast_run(make_pass("force", fn, frames), data, args.dtype)
        wall, host, graph = step_times(run)
        print(f"== {label}: {args.shape} {args.dtype} force step: wall {wall:.3f} ms, "
              f"host {host:.3f} ms, graph {graph:.3f} ms, wall/graph {wall / graph:.2f}",
              flush=True)
        profiler = cProfile.Profile()
        torch.cuda.synchronize()
        profiler.enable()
        for _ in range(args.steps):
            run()
        torch.cuda.synchronize()
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(args.top)
        print(text.getvalue(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
