"""Cost of a cached launch selection: what every custom-op call pays once a choice exists.

    python benchmarks/bench_selection.py [--calls 20000]

Runs on the CPU with a device profile (GRIDPAIR_DEVICE); on a GPU the same call also reads
Triton's (lru-cached) shared-memory limit of the device.

    python benchmarks/bench_selection.py --cold [--workers 1 2 ...]

Cold selection instead: the six searches of a P147 force step (fwd, bwd, bwd2 x bf16, fp32),
each run in a fresh process with an empty Triton cache, once per worker count; the forward of
each dtype is chosen first and its backwards right after, as tracing the step does. Figures
(RESULTS) are the wall time of the six ``choose`` calls.

RESULTS (2026-12-01; the same six decisions and events at every worker count):

- H200 (16 cores, Python 3.12, torch 2.11, triton 3.6), ``--cold --profile cuda --workers 1 16
  --repeats 2``, validation on the GPU: 1 worker 10.3 s (10.0, 10.6); 16 workers 7.8 s (8.6,
  7.1). The same H200 host with ``--profile h200``: 7.5 s serial, 6.3 s with 16 workers.
- 2-core CPU (load about 1), ``--cold --profile h200 --workers 1 2 --repeats 2``: 1 worker
  12.1 s (12.4, 11.9); 2 workers 10.0 s (8.9, 11.1).

Every candidate a ladder starts with fits here, so the gain comes from validating bwd and
bwd2 beside each other once fwd is decided: per dtype the chain is fwd, then the longer of
bwd and bwd2. Compiling past the head of each ladder as well doubled the time on the busy
2-core machine (30 s serial, 65 s), so look-ahead starts at a ladder's first rejection.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_COLD_CHILD = """
import json, sys, time, torch
from gridpair.selector import LaunchSelector
selector = LaunchSelector(workers=int(sys.argv[1]))
chosen, events = [], []
selector.subscribe(lambda e: events.append([e.kind, e.op, e.config, e.outcome]))
device = sys.argv[2]
if device == "cuda":
    torch.cuda.init()  # CUDA's start is not selection time
if sys.argv[3] == "hashed":  # as in a cold child readied ahead (pristine.warm_compile_stack)
    from triton.runtime.cache import triton_key
    triton_key()
waits = []
start = time.perf_counter()
for dtype in (torch.bfloat16, torch.float32):
    operands = [torch.zeros(300, 49, 2, 288, dtype=dtype, device=device) for _ in range(5)]
    projectors = (torch.zeros(584, 147, dtype=dtype, device=device),) * 2
    for op, count in (("fwd", 2), ("bwd", 3), ("bwd2", 5)):
        began = time.perf_counter()
        chosen.append(str(selector.choose(op, operands[:count], projectors, 3)))
        waits.append(round(time.perf_counter() - began, 2))
seconds = time.perf_counter() - start
selector.idle()
print(json.dumps({"seconds": seconds, "waits": waits, "chosen": chosen, "events": events}))
"""


def cold(profile: str, workers: list[int], repeats: int, smem_limit: int | None = None,
         hashed: bool = False) -> None:
    """Time the six searches per worker count; every run must decide and report alike.
    ``hashed``: Triton's installation hash is computed before the clock starts, as a cold
    child readied ahead has it (it is otherwise the first compile's, 0.3-0.4 s)."""
    first = None
    for count in workers:
        seconds, waits = [], []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "TRITON_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
                env.pop("PYTEST_COLDCOMPILE_SMEM_LIMIT", None)
                if smem_limit is not None:
                    env["PYTEST_COLDCOMPILE_SMEM_LIMIT"] = str(smem_limit)
                env.pop("GRIDPAIR_DEVICE", None)
                if profile != "cuda":
                    env["GRIDPAIR_DEVICE"] = profile
                device = "cuda" if profile == "cuda" else "cpu"
                run = subprocess.run([sys.executable, "-c", _COLD_CHILD, str(count), device,
                                      "hashed" if hashed else "unhashed"],
                                     env=env, capture_output=True, text=True, check=True)
                result = json.loads(run.stdout.splitlines()[-1])
                seconds.append(result["seconds"])
                waits.append(result["waits"])
                first = first or result
                if (result["chosen"], result["events"]) != (first["chosen"], first["events"]):
                    raise SystemExit(f"workers={count} decided otherwise: {result}")
        capped = f" under a {smem_limit}-byte limit" if smem_limit is not None else ""
        hash_note = ", Triton hashed first" if hashed else ""
        print(f"cold selection, six ops of a P147 step on {profile}{capped}{hash_note}, "
              f"workers={count}: median {statistics.median(seconds):.1f} s of {repeats} "
              f"({', '.join(f'{s:.1f}' for s in seconds)}); each choose waited "
              f"(bf16 fwd bwd bwd2, fp32 fwd bwd bwd2): {waits}; "
              f"decisions: {first['chosen']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--profile", default="h200",
                        help="device profile; with --cold, 'cuda' validates on the GPU")
    parser.add_argument("--cold", action="store_true", help="time cold searches instead")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smem-limit", type=int, default=None,
                        help="with --cold, the per-block shared memory the searches validate "
                             "against (as pytest --smem-limit)")
    parser.add_argument("--hashed", action="store_true",
                        help="with --cold, compute Triton's installation hash first")
    args = parser.parse_args(argv)
    if args.cold:
        cold(args.profile, args.workers, args.repeats, args.smem_limit, args.hashed)
        return 0
    os.environ.setdefault("GRIDPAIR_DEVICE", args.profile)

    import torch

    from gridpair.selector import LaunchSelector

    selector = LaunchSelector()
    operands = [torch.zeros(300, 49, 2, 288) for _ in range(5)]
    projectors = (torch.zeros(584, 147), torch.zeros(584, 147))
    for op, count in (("fwd", 2), ("bwd", 3), ("bwd2", 5)):
        assert selector.choose(op, operands[:count], projectors, 3) is not None  # searched once
        rounds = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(args.calls):
                selector.choose(op, operands[:count], projectors, 3)
            rounds.append((time.perf_counter() - start) / args.calls * 1e6)
        print(f"{op:5} cached choose: median {statistics.median(rounds):.2f} us per call "
              f"(5 rounds of {args.calls}; min {min(rounds):.2f}, max {max(rounds):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
