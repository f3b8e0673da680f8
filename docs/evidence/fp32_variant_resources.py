"""Registers, spills and shared memory of the fp32 kernel variants, compiled on a machine with no
GPU for sm_90 (the H200's architecture): what round 13 read before spending device time.

    python docs/evidence/fp32_variant_resources.py > resources.txt

Each (op, variant, tile) of both H200 calls' plans is compiled with ``triton.compile`` for
``GPUTarget("cuda", 90, 32)`` from the same source the selector validates (``_ast_source``), and
its PTX assembled by Triton's own ``ptxas -v``: registers per thread, spill stores and loads,
and whether Triton chose warpgroup MMA (wgmma) or mma.sync. The installed Triton decides the
code: the CPU machine's 3.7 is not the H200's 3.6 (the shipped tiles' registers agree with the
H200 sweep's, 229 and 255).
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from fp32_variants import KERNELS  # noqa: E402
from tile_check import parse_tile  # noqa: E402

from benchmarks.sweep_tiles import SHAPES  # noqa: E402
from gridpair import validation  # noqa: E402
from gridpair.geometry import Geometry  # noqa: E402
from gridpair.signature import contiguous_signature  # noqa: E402

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
_SHIPPED = [("shipped", t) for t in ("16,32,2,4", "16,64,2,8", "16,32,2,8", "16,64,1,8")]
# Both calls' plans (docs/evidence/h200/round13/fp32-call1 and fp32-call2), tiles without the
# fp32_dots field (all tf32x3).
PLAN = {
    "fwd": [*_SHIPPED[:3],
            *[("split", t) for t in ("16,32,2,4", "16,32,2,8", "16,64,2,8")],
            *[("chunk", t) for t in ("16,32,2,4", "16,32,1,4", "16,64,1,4", "16,16,2,4",
                                     "16,16,1,4", "16,32,1,8", "32,32,1,8", "32,32,2,8",
                                     "32,16,2,4")],
            *[("pair", t) for t in ("16,32,2,4", "64,16,1,4", "64,16,1,8", "64,32,1,8",
                                    "64,16,2,8")]],
    "bwd": [_SHIPPED[0], _SHIPPED[2], _SHIPPED[3],
            *[("split", t) for t in ("16,32,2,4", "16,32,2,8")],
            *[("chunk", t) for t in ("16,32,2,4", "16,32,1,4", "16,16,2,4", "16,16,1,4",
                                     "32,32,1,8", "32,16,1,4", "16,32,1,8")],
            *[("pair", t) for t in ("16,32,2,4", "64,16,1,4", "64,16,1,8", "64,32,1,8",
                                    "64,16,2,8")]],
}


def resources(op: str, name: str, text: str, geometry: Geometry) -> dict[str, object]:
    """Compile one variant for sm_90 and read its footprint."""
    tile = parse_tile(f"{text},tf32x3")
    shipped = validation.KERNELS[op]
    if name != "shipped":
        validation.KERNELS[op] = KERNELS[op, name]  # the same binder, another kernel body
    try:
        signature = contiguous_signature(op, geometry, torch.float32, 300)
        compiled = triton.compile(validation._ast_source(op, geometry, tile, signature),
                                  target=GPUTarget("cuda", 90, 32),
                                  options={"num_warps": tile.num_warps,
                                           "num_stages": tile.num_stages})
    finally:
        validation.KERNELS[op] = shipped
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as ptx:
        ptx.write(compiled.asm["ptx"])
    try:
        report = subprocess.run([str(PTXAS), "-v", "-arch=sm_90a", ptx.name, "-o", os.devnull],
                                capture_output=True, text=True, check=True).stderr
    finally:
        os.unlink(ptx.name)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    return {"registers": int(re.search(r"Used (\d+) registers", report).group(1)),
            "spill_stores": int(spills.group(1)), "spill_loads": int(spills.group(2)),
            "shared": compiled.metadata.shared,
            "mma": "wgmma" if "wgmma" in compiled.asm["ptx"] else "mma.sync"}


def main() -> int:
    geometry = Geometry(*SHAPES["P147"])
    print(f"triton {triton.__version__}, sm_90, P147 float32, tf32x3 tiles (rows,grid,stages,"
          "warps)")
    print(f"{'op':<4} {'variant':<8} {'tile':<10} {'regs':>4} {'spill st/ld B':>13} "
          f"{'shared B':>8}  mma")
    for op, entries in PLAN.items():
        for name, text in entries:
            got = resources(op, name, text, geometry)
            print(f"{op:<4} {name:<8} {text:<10} {got['registers']:>4} "
                  f"{got['spill_stores']:>6}/{got['spill_loads']:<6} {got['shared']:>8}  "
                  f"{got['mma']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
