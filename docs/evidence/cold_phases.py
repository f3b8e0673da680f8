"""Where the wall time of one cold force-step regression goes, phase by phase, in a fresh
process with empty Triton and Inductor caches: the body of test_compiled_force_loss_step_cold,
timed. Imports, the compile stack a child readied ahead imports before its test
(``pytest_coldcompile.child.pristine.warm_compile_stack``), CUDA's start, tracing with launch
selection inside (and the selection's own seconds per op), Inductor's compile and first run,
the other node counts, and the float64 references the test compares with.

    PYTEST_COLDCOMPILE_SMEM_LIMIT=101376 python docs/evidence/cold_phases.py multi-focus bf16-amp

The cap is applied as a cold child applies it (``pytest_coldcompile.devices.smem_cap.SmemCap``).
Each phase also lists the Triton compiles this process ran in it (kernel name, seconds, cache
hit): validation's compiles of gridpair's kernels, Inductor's compiles of them and of its own.

    COLD_PHASES_INDUCTOR_WORKERS=16 python docs/evidence/cold_phases.py multi-focus float32

runs Inductor with its compile worker pool instead of in-process (a cold child's
``compile_threads=1``), the pool started in the warm-up phase, as a child readied ahead could
start it, and awaited there; its compiles are not in the lists (they run in the workers).
"""

import os
import sys
import tempfile
import time
from pathlib import Path

START = time.perf_counter()
ROOT = Path(__file__).resolve().parents[2]
caches = tempfile.mkdtemp(prefix="cold-phases-")
os.environ["TRITON_CACHE_DIR"] = os.path.join(caches, "triton")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(caches, "inductor")
INDUCTOR_WORKERS = os.environ.get("COLD_PHASES_INDUCTOR_WORKERS", "1")
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = INDUCTOR_WORKERS  # 1 as in a cold child
COMPILES: list[tuple[str, float, bool]] = []
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "regressions"), str(ROOT / "tests" / "gridpair")]


def phase(name: str, since: list[float]) -> None:
    now = time.perf_counter()
    print(f"{name:<38} {now - since[0]:7.2f} s   (at {now - START:6.2f} s)", flush=True)
    since[0] = now
    if COMPILES:
        print(f"{'  Triton compiles':<38} {sum(s for _, s, _ in COMPILES):7.2f} s   ("
              + ", ".join(f"{n} {s:.2f}{' hit' if hit else ''}" for n, s, hit in COMPILES) + ")",
              flush=True)
        COMPILES.clear()


def listen(*, src, metadata, metadata_group, times, cache_hit) -> None:
    seconds = (getattr(times, "ir_initialization", 0)
               + sum(t for _, t in getattr(times, "lowering_stages", ()))
               + getattr(times, "store_results", 0)) / 1e6
    COMPILES.append((metadata["name"].removeprefix("_grid_pair_"), seconds, cache_hit))


def main() -> int:
    mark = [START]
    import torch
    import triton  # noqa: F401

    phase("import torch, triton", mark)
    from force_step import Case, assert_matches_reference, compile_step, operands

    import gridpair
    from pytest_coldcompile.child import pristine
    from pytest_coldcompile.devices.smem_cap import SmemCap

    phase("import gridpair, force_step", mark)
    limit = os.environ.get("PYTEST_COLDCOMPILE_SMEM_LIMIT")
    if limit:
        SmemCap(int(limit)).install()
    pristine.warm_compile_stack()
    from triton import knobs

    knobs.compilation.listener = listen
    if INDUCTOR_WORKERS != "1":
        from torch._inductor.async_compile import AsyncCompile, maybe_warm_pool

        maybe_warm_pool()
        AsyncCompile.wait_pool_ready()
    phase(f"compile stack and hashes (warm-up{', pool' if INDUCTOR_WORKERS != '1' else ''})",
          mark)
    seconds: dict[str, float] = {}
    gridpair.SELECTOR.subscribe(
        lambda e: seconds.__setitem__(e.op, seconds.get(e.op, 0.0) + (e.seconds or 0.0))
        if e.kind in ("admit", "fallback") else None)
    torch.cuda.init()
    torch.ones(1, device="cuda")
    phase("CUDA start", mark)
    case = Case(sys.argv[1], sys.argv[2], "cuda")
    example = operands(case, case.node_counts()[0], seed=0)
    phase("operands", mark)
    compiled, _ = compile_step(case, "inductor", example)
    phase("make_fx trace (selection inside)", mark)
    per_op = ", ".join(f"{op} {s:.2f}" for op, s in seconds.items())
    print(f"{'  of which launch selection':<38} {sum(seconds.values()):7.2f} s   ({per_op})",
          flush=True)
    results = [(example, compiled(*example))]
    torch.cuda.synchronize()
    phase("torch.compile + first call", mark)
    for index, nodes in enumerate(case.node_counts()[1:], start=1):
        inputs = operands(case, nodes, seed=index)
        results.append((inputs, compiled(*inputs)))
    torch.cuda.synchronize()
    phase("two more node counts", mark)
    for inputs, got in results:
        assert_matches_reference(case, got, inputs)
    torch.cuda.synchronize()
    phase("float64 references and checks", mark)
    return 0


if __name__ == "__main__":
    sys.exit(main())
