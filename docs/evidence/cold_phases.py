"""Where the wall time of one cold force-step regression goes, phase by phase, in a fresh
process with empty Triton and Inductor caches (the body of test_compiled_force_loss_step_cold,
timed): imports, CUDA start, tracing with launch selection, Inductor's compile and first run,
the other node counts, the eager references.

    PYTEST_COLDCOMPILE_SMEM_LIMIT=101376 python docs/evidence/cold_phases.py multi-focus bf16-amp
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
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "regressions"), str(ROOT / "tests" / "gridpair")]


def phase(name: str, since: list[float]) -> None:
    now = time.perf_counter()
    print(f"{name:<34} {now - since[0]:7.2f} s   (at {now - START:6.2f} s)", flush=True)
    since[0] = now


def main() -> int:
    mark = [START]
    import torch
    import triton  # noqa: F401
    phase("import torch, triton", mark)
    from force_step import Case, compile_step, operands

    import gridpair
    phase("import gridpair, force_step", mark)
    seconds = []
    gridpair.SELECTOR.subscribe(
        lambda e: seconds.append(e.seconds or 0.0) if e.kind in ("admit", "fallback") else None)
    torch.cuda.init()
    torch.ones(1, device="cuda")
    phase("CUDA start", mark)
    case = Case(sys.argv[1], sys.argv[2], "cuda")
    example = operands(case, case.node_counts()[0], seed=0)
    phase("operands", mark)
    compiled, step = compile_step(case, "inductor", example)
    phase("make_fx trace (selection inside)", mark)
    print(f"{'  of which launch selection':<34} {sum(seconds):7.2f} s", flush=True)
    compiled(*example)
    torch.cuda.synchronize()
    phase("torch.compile + first call", mark)
    for index, nodes in enumerate(case.node_counts()[1:], start=1):
        compiled(*operands(case, nodes, seed=index))
    torch.cuda.synchronize()
    phase("two more node counts", mark)
    for index, nodes in enumerate(case.node_counts()):
        with case.autocast():
            step(*operands(case, nodes, seed=index))
    torch.cuda.synchronize()
    phase("eager references", mark)
    return 0


if __name__ == "__main__":
    sys.exit(main())
