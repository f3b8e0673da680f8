"""Host time of grid_pair's eager path on the CPU, the kernel launch stubbed out: a bf16-amp
force step over small CPU tensors through the eager Functions (selection, padding, autograd
wiring all real; only the Triton kernel replaced by a no-op), with and without prepared
launches, against the same step through trivial autograd Functions (the floor); best of five
interleaved runs of 300 steps. From the repository root:

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
from gridpair.active import using_selector  # noqa: E402
from gridpair.geometry import Tile  # noqa: E402
from gridpair.selector import LaunchSelector  # noqa: E402
from gridpair.validation import Compiled  # noqa: E402


class OneTile(LaunchSelector):
    def candidates(self, key, device_name):
        return [Tile(16, 16, 1, 4)]

    def validate(self, key, tile, limits):
        return Compiled(0, None)


class NoKernel:
    """Stands in for a Triton kernel: ``kernel[grid](...)`` does nothing (results stay as
    allocated)."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


class Unprepared(dict):
    """Keeps no prepared launch: every call asks the selector and prepares again."""

    def __setitem__(self, key, value):
        pass


def main() -> int:
    launch.kernels_run_on = lambda device: True
    for op in launch.KERNELS:
        launch.KERNELS[op] = NoKernel()
    nodes, degrees, focus, frames, channels, grid = 4, 49, 2, 3, 8, 64
    coefficients = [torch.randn(nodes, degrees, focus, frames * channels) for _ in range(5)]
    projectors = [torch.randn(grid, degrees * frames) for _ in range(2)]
    args = (*coefficients[:2], *projectors, *coefficients[2:])
    prepared = eager._PREPARED
    steps = {}
    with using_selector(OneTile()):
        for label, fn in (("eager path", gridpair.grid_pair),
                          ("eager path, unprepared", gridpair.grid_pair),
                          ("trivial Functions", StandIn.apply)):
            step = make_pass("force", fn, frames)

            def run(step=step):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return step(*args)

            steps[label] = run
        best = dict.fromkeys(steps, float("inf"))
        for _ in range(5):  # interleaved, so that a slow spell of the machine hits all three
            for label, run in steps.items():
                eager._PREPARED = Unprepared() if "unprepared" in label else prepared
                for _ in range(20):
                    run()
                start = time.perf_counter()
                for _ in range(300):
                    run()
                best[label] = min(best[label], (time.perf_counter() - start) / 300 * 1e6)
    for label, us in best.items():
        print(f"{label}: {us:.0f} us per step", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
