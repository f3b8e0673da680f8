"""Fused grid-pair kernels against the reference composition, eager and compiled.

    python benchmarks/bench_gridpair.py --out benchmarks/results/h200.json

Shapes P147 (lmax 6, K=3, F=2, C=96, G=584), P49 (6,1,1,256,584), P25 (4,1,1,64,296) and P108
(5,3,2,64,344), 300 nodes; dtypes float32 and bf16-amp (CUDA autocast); passes fwd, fwd+bwd and
force (forward + backward with create_graph + second backward, one each); implementations fused
(grid_pair, eager, as a kernel author calls it), fused-ops (optional: the same eager pass through
the custom ops' dispatch, not grid_pair's eager path), fused-compiled (the same pass traced with
make_fx and compiled with torch.compile's default mode), reference-eager (reference_grid_pair) and
reference-compiled (the pass traced with make_fx and compiled with torch.compile, mode
max-autotune-no-cudagraphs for the shapes in --autotune-shapes, Inductor's default mode for the
others, recorded per row). Median time of triton.testing.do_bench (host overhead included, as a
caller sees it), extra peak memory over the inputs, achieved TFLOP/s and % of the H200's datasheet
peak (bf16 dense 989.5, fp32 non-tensor 66.9 TFLOP/s). ``graph_ms`` is the same pass captured once
in a CUDA graph and replayed: the GPU's time without the host's.
"""

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gridpair import grid_pair, reference_grid_pair

SHAPES = {  # name: (lmax, K, F, C, G)
    "P147": (6, 3, 2, 96, 584),
    "P49": (6, 1, 1, 256, 584),
    "P25": (4, 1, 1, 64, 296),
    "P108": (5, 3, 2, 64, 344),
}
PASSES = {"fwd": 3, "fwd+bwd": 8, "force": 16}  # grid-pair products (2*G*D*K*C*N*F flops each)
PEAK_TFLOPS = {"bf16-amp": 989.5, "float32": 66.9}
IMPLS = ("fused", "fused-compiled", "reference-eager", "reference-compiled")
# Not in the default run: the eager pass through the custom ops' dispatch (what ``fused`` was
# before gridpair.eager), for a side-by-side measure of the eager path.
EXTRA_IMPLS = ("fused-ops",)


def grid_pair_through_ops(left, right, to_grid, from_grid, n_frames):
    """grid_pair's checks, then always the custom op (never the eager path)."""
    from gridpair.inputs import check_constant_projectors, check_operands

    check_operands(left, right, to_grid, from_grid, n_frames)
    check_constant_projectors(to_grid, from_grid)
    return torch.ops.gridpair.grid_pair_fwd(left, right, to_grid, from_grid, n_frames)


def shape_label(name: str, nodes: int) -> str:
    _, frames, focus, channels, grid = SHAPES[name]
    return f"{name}-C{channels}-F{focus}-K{frames}-G{grid}-N{nodes}"


def make_pass(kind: str, fn, n_frames: int):
    """The pass as one function of (left, right, to_grid, from_grid, w, h_left, h_right)."""

    # Every pass returns all it computes (energy, first gradients, loss), as a training step
    # uses them: a compiled pass may not drop the forward or the first backward as dead code.
    # The energy weights are fixed (no gradient), so no implementation needs the gradient of
    # the first backward's cotangent: autograd prunes it from the reference, and the fused
    # ops take their second backward through the bwd kernel.
    def run(left, right, to_grid, from_grid, weight, h_left, h_right):
        if kind == "fwd":
            return fn(left, right, to_grid, from_grid, n_frames)
        left = left.detach().requires_grad_()
        right = right.detach().requires_grad_()
        out = fn(left, right, to_grid, from_grid, n_frames)
        energy = (out.float() * weight).sum()
        if kind == "fwd+bwd":
            return energy.detach(), *torch.autograd.grad(energy, (left, right))
        grad_left, grad_right = torch.autograd.grad(energy, (left, right), create_graph=True)
        loss = (grad_left.float() * h_left).sum() + (grad_right.float() * h_right).sum()
        second = torch.autograd.grad(loss, (left, right))
        return energy.detach(), loss.detach(), grad_left.detach(), grad_right.detach(), *second

    return run


def inputs(name: str, nodes: int, device: str, seed: int = 0):
    lmax, frames, focus, channels, grid = SHAPES[name]
    degrees = (lmax + 1) ** 2
    gen = torch.Generator(device=device).manual_seed(seed)

    def rand(*size, scale=1.0):
        return torch.randn(*size, device=device, generator=gen) * scale

    coefficients = (nodes, degrees, focus, frames * channels)
    scale = (degrees * frames) ** -0.5
    return (rand(*coefficients), rand(*coefficients), rand(grid, degrees * frames, scale=scale),
            rand(grid, degrees * frames, scale=scale), rand(*coefficients),
            rand(*coefficients), rand(*coefficients))


def autocast(dtype: str, device: str):
    if dtype == "bf16-amp":
        return torch.autocast(device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def build(impl: str, kind: str, dtype: str, name: str, args, device: str, autotune: bool):
    frames = SHAPES[name][1]
    if impl == "fused-ops":
        step = make_pass(kind, grid_pair_through_ops, frames)
    elif impl.startswith("fused"):
        step = make_pass(kind, grid_pair, frames)
    else:
        step = make_pass(kind, reference_grid_pair, frames)
    if not impl.endswith("-compiled"):
        def run():
            with autocast(dtype, device):
                return step(*args)
        return run, None
    from torch.fx.experimental.proxy_tensor import make_fx

    with autocast(dtype, device):
        graph = make_fx(step)(*args)
    mode = "max-autotune-no-cudagraphs" if autotune and impl.startswith("reference") else "default"
    compiled = torch.compile(graph, mode=mode)
    return (lambda: compiled(*args)), mode


def measure(run, device: str):
    """(median ms, extra peak MiB, graph ms) of ``run``; the first call also compiles and
    warms up. Graph ms is None off CUDA or where the pass cannot be captured."""
    run()
    if device != "cuda":
        times = []
        for _ in range(3):
            start = time.perf_counter()
            run()
            times.append((time.perf_counter() - start) * 1e3)
        return sorted(times)[1], None, None
    from triton.testing import do_bench

    torch.cuda.synchronize()
    milliseconds = do_bench(run, warmup=50, rep=200, return_mode="median")
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    run()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    return milliseconds, peak, graph_ms(run)


def replayed_ms(run, rep: int = 100) -> float:
    """Median GPU time of ``run`` captured once in a CUDA graph and replayed (no host time)."""
    from triton.testing import do_bench

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return do_bench(graph.replay, warmup=rep // 5, rep=rep, return_mode="median")


def graph_ms(run) -> float | None:
    """``replayed_ms`` of a pass, or None where it cannot be captured (a diagnostic column)."""
    try:
        return replayed_ms(run)
    except Exception as error:  # recorded as None: capture is a diagnostic, not the figure
        print(f"  (no CUDA graph: {type(error).__name__}: {str(error)[:120]})", flush=True)
        return None
    finally:
        torch.cuda.synchronize()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="benchmarks/results/h200.json")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--dtypes", default="float32,bf16-amp")
    parser.add_argument("--passes", default=",".join(PASSES))
    parser.add_argument("--impls", default=",".join(IMPLS))
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--autotune-shapes", default="P147",
                        help="shapes whose reference-compiled uses max-autotune-no-cudagraphs")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)

    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 references are IEEE fp32
    records = []
    autotune = set(args.autotune_shapes.split(",")) if args.autotune_shapes else set()
    print(f"{'shape':<32} {'dtype':<9} {'pass':<8} {'impl':<19} {'ms':>9} {'peak MiB':>9} "
          f"{'TFLOP/s':>8} {'% peak':>7} {'graph ms':>9}", flush=True)
    for name in args.shapes.split(","):
        lmax, frames, focus, channels, grid = SHAPES[name]
        flops_per_product = 2 * grid * (lmax + 1) ** 2 * frames * channels * args.nodes * focus
        data = inputs(name, args.nodes, args.device)
        for dtype in args.dtypes.split(","):
            for kind in args.passes.split(","):
                for impl in args.impls.split(","):
                    run, mode = build(impl, kind, dtype, name, data, args.device,
                                      name in autotune)
                    milliseconds, peak, graph = measure(run, args.device)
                    flops = PASSES[kind] * flops_per_product
                    tflops = flops / (milliseconds * 1e-3) / 1e12
                    # Unrounded: a tiny CPU shape's TFLOP/s would round to 0.
                    record = {"shape": shape_label(name, args.nodes), "dtype": dtype,
                              "pass": kind, "impl": impl, "ms": milliseconds,
                              "peak_mib": None if peak is None else round(peak, 1),
                              "flops": flops, "tflops": tflops,
                              "pct_peak": round(100 * tflops / PEAK_TFLOPS[dtype], 2),
                              "graph_ms": None if graph is None else round(graph, 4)}
                    if mode:
                        record["compile_mode"] = mode
                    records.append(record)
                    peak_text = "-" if peak is None else f"{peak:9.1f}"
                    print(f"{record['shape']:<32} {dtype:<9} {kind:<8} {impl:<19} "
                          f"{milliseconds:9.3f} {peak_text:>9} {tflops:8.1f} "
                          f"{record['pct_peak']:7.1f} "
                          f"{'-' if graph is None else format(graph, '9.3f'):>9}", flush=True)
                    del run
                    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                    Path(args.out).write_text(json.dumps(records, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
