"""Seconds of each Triton compile stage for the six P147 kernels the shipped tiles compile
(validation for the h200 profile, no GPU needed), in a fresh process with an empty Triton
cache; on a GPU machine also what Triton's first launch-side step costs there: building its
CUDA driver helper into an empty cache.

    python docs/evidence/compile_stage_times.py [--repeat]

The first compile of a process carries the front end's one-time costs (the total against the
sum of its stages); ``--repeat`` compiles the six again into a second empty cache.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="stage-times-")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import triton.backends.nvidia.compiler as nvidia
from triton import knobs

from gridpair import devices
from gridpair.geometry import Geometry, Tile
from gridpair.signature import contiguous_signature
from gridpair.validation import compile_candidate

P147 = Geometry(49, 2, 3, 96, 584)
SHIPPED = [("fwd", torch.bfloat16, Tile(128, 64, 3, 8)),
           ("bwd", torch.bfloat16, Tile(128, 32, 3, 8)),
           ("bwd2", torch.bfloat16, Tile(16, 64, 3, 4)),
           ("fwd", torch.float32, Tile(16, 32, 2, 4, "tf32x3")),
           ("bwd", torch.float32, Tile(16, 32, 2, 4, "tf32x3")),
           ("bwd2", torch.float32, Tile(16, 64, 2, 8, "tf32x3"))]
STAGES: dict[str, float] = {}
_add_stages = nvidia.CUDABackend.add_stages


def timed_stages(self, stages, options, language):
    _add_stages(self, stages, options, language)
    for name, stage in list(stages.items()):
        def timed(src, metadata, stage=stage, name=name):
            start = time.perf_counter()
            try:
                return stage(src, metadata)
            finally:
                STAGES[name] = time.perf_counter() - start
        stages[name] = timed


def compile_six(limits) -> None:
    for op, dtype, tile in SHIPPED:
        STAGES.clear()
        signature = contiguous_signature(op, P147, dtype, 300)
        start = time.perf_counter()
        compiled = compile_candidate(op, P147, tile, signature, limits)
        total = time.perf_counter() - start
        stages = " ".join(f"{name} {seconds:.2f}" for name, seconds in STAGES.items())
        print(f"stages {op:4s} {str(dtype)[6:]:8s} {tile}: total {total:.2f} s, stages "
              f"{sum(STAGES.values()):.2f} s ({stages}), shared {compiled.shared}", flush=True)


def main() -> int:
    nvidia.CUDABackend.add_stages = timed_stages
    compile_six(devices.profile_limits("h200"))
    if "--repeat" in sys.argv:
        knobs.cache.dir = tempfile.mkdtemp(prefix="stage-times-")
        compile_six(devices.profile_limits("h200"))
    if torch.cuda.is_available():
        from triton.runtime import driver

        torch.ones(1, device="cuda")
        knobs.cache.dir = tempfile.mkdtemp(prefix="stage-times-")
        start = time.perf_counter()
        driver.active.utils  # noqa: B018 - built on first access
        print(f"driver helper into an empty cache: {time.perf_counter() - start:.2f} s",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
