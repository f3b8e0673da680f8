"""Host time of grid_pair's eager path on the CPU, the kernel launch stubbed out: a bf16-amp
force step over small CPU tensors through the eager Functions (selection, padding, autograd
wiring all real; only the Triton launch replaced by allocating its results), against the same
step through trivial autograd Functions (the floor). From the repository root:

    python docs/evidence/cpu/eager_host_stubbed.py
"""

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ["GRIDPAIR_DEVICE"] = "h200"

import torch  # noqa: E402
from bench_gridpair import make_pass  # noqa: E402
from profile_eager import StandIn  # noqa: E402

import gridpair  # noqa: E402
from gridpair import eager, launch  # noqa: E402
from gridpair.geometry import Tile  # noqa: E402
from gridpair.kernels import result_dtypes  # noqa: E402
from gridpair.probe import Compiled  # noqa: E402
from gridpair.selector import LaunchSelector, using_selector  # noqa: E402


class OneTile(LaunchSelector):
    def candidates(self, key, device_name):
        return [Tile(16, 16, 1, 4)]

    def validate(self, key, tile, limits):
        return Compiled(0, None)


def stubbed_launch(op, operands, to_grid, from_grid, n_frames, tile, direct=False, key=None):
    launch.padded_projector(to_grid)
    launch.padded_projector(from_grid)
    dtypes = result_dtypes(op, [x.dtype for x in operands], to_grid.dtype)
    return tuple(torch.empty(operands[0].shape, dtype=dtype) for dtype in dtypes)


def main() -> int:
    launch.kernels_run_on = lambda device: True
    eager.launch = stubbed_launch
    nodes, degrees, focus, frames, channels, grid = 4, 49, 2, 3, 8, 64
    coefficients = [torch.randn(nodes, degrees, focus, frames * channels) for _ in range(5)]
    projectors = [torch.randn(grid, degrees * frames) for _ in range(2)]
    args = (*coefficients[:2], *projectors, *coefficients[2:])
    with using_selector(OneTile()):
        for label, fn in (("eager path", gridpair.grid_pair),
                          ("trivial Functions", StandIn.apply)):
            step = make_pass("force", fn, frames)

            def run(step=step):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return step(*args)

            for _ in range(20):
                run()
            start = time.perf_counter()
            for _ in range(300):
                run()
            print(f"{label}: {(time.perf_counter() - start) / 300 * 1e6:.0f} us per step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
