"""Cost of a cached launch selection: what every custom-op call pays once a choice exists.

    python benchmarks/bench_selection.py [--calls 20000]

Runs on the CPU with a device profile (GRIDPAIR_DEVICE); on a GPU the same call also reads
Triton's (lru-cached) shared-memory limit of the device.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--profile", default="h200")
    args = parser.parse_args(argv)
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
