"""Cost of an emulated device's target compile per kernel, in the interpreter (a benchmark,
not a timed test).

    PYTHONPATH=. python benchmarks/bench_emulation.py

For each device and tile of Triton's tutorial matmul (fp16, 8 warps), the first interpreted
launch under the emulation (target compile + interpretation) and a second one (interpretation
only: the target compile is cached). Writes into a temporary Triton cache only.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

os.environ["TRITON_INTERPRET"] = "1"
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-emulation-")

import torch
import triton

from pytest_coldcompile.devices import named
from pytest_coldcompile.devices.emulate import Emulation

# The emulation tests' kernel, so the figure is the cost of what they judge.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "plugin"))
from matmul_kernel import matmul_kernel


def matmul(a: torch.Tensor, b: torch.Tensor, tile: tuple[int, int, int, int]) -> torch.Tensor:
    (m, k), (_, n) = a.shape, b.shape
    c = torch.empty(m, n, dtype=a.dtype)
    bm, bn, bk, stages = tile
    matmul_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
        c.stride(1), BM=bm, BN=bn, BK=bk, num_warps=8, num_stages=stages)
    return c


def main() -> None:
    a = torch.randn(128, 64, dtype=torch.float16)
    b = torch.randn(64, 128, dtype=torch.float16)
    print(f"triton {triton.__version__}, {os.cpu_count()} CPUs")
    for device in ("a100", "h100", "rtx-pro-6000-blackwell"):
        emulation = Emulation(named.DEVICES[device]).install()
        for tile in ((64, 64, 32, 2), (128, 128, 64, 3), (128, 128, 64, 4)):
            start = time.perf_counter()
            matmul(a, b, tile)
            first = time.perf_counter() - start
            start = time.perf_counter()
            matmul(a, b, tile)
            again = time.perf_counter() - start
            print(f"{device:24} {tile}: first launch {first:.2f} s, again {again:.2f} s")
        emulation.remove()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
