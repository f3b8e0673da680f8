"""Which specialization Inductor compiles our kernels with, against the validated one (H200).

    TORCH_LOGS=output_code python docs/evidence/inductor_specialization.py 2>&1 \
        | grep -A3 triton_meta

Compiles the P147 bf16 forward through make_fx + torch.compile and prints the selector's
validated kernel's metadata; Inductor's generated code (TORCH_LOGS=output_code) shows its
``triton_meta`` (constants, divisibility attributes) for the same kernel.
"""

import sys
from pathlib import Path

import torch
from torch.fx.experimental.proxy_tensor import make_fx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_gridpair import SHAPES, inputs  # noqa: E402

from gridpair import grid_pair  # noqa: E402
from gridpair.kernels import KERNELS  # noqa: E402

data = [t.to(torch.bfloat16) for t in inputs("P147", 300, "cuda")[:4]]
frames = SHAPES["P147"][1]


def forward(left, right, to_grid, from_grid):
    return grid_pair(left, right, to_grid, from_grid, frames)


graph = make_fx(forward, tracing_mode="symbolic")(*data)
compiled = torch.compile(graph)
out = compiled(*data)
eager = grid_pair(*data, frames)
torch.cuda.synchronize()
print("compiled == eager:", torch.equal(out, eager), flush=True)
for key, kernel in KERNELS["fwd"].device_caches[0][0].items():
    print("JIT cache entry:", key[:300], "shared", kernel.metadata.shared, flush=True)
