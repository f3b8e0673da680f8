"""Where the host time of the eager P147 force step goes inside the step itself (H200 evidence).

    python docs/evidence/eager_step_split.py --dtype bf16-amp

Issues 50 steps without waiting for the GPU (best of three) with perf_counter wrappers around
grid_pair's parts, and prints each part's microseconds per step next to the step's host time
and the same step's host time unwrapped. A wrapper costs well under a microsecond.
"""

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_gridpair import SHAPES, inputs, make_pass  # noqa: E402
from profile_eager import autocast_run, host_ms  # noqa: E402

import gridpair  # noqa: E402
from gridpair import api, eager, launch, selector  # noqa: E402

SPENT: dict[str, float] = defaultdict(float)


def timed(name, fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[name] += time.perf_counter() - start
    return wrapper


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="P147")
    parser.add_argument("--dtype", default="bf16-amp")
    args = parser.parse_args(argv)
    data = inputs(args.shape, 300, "cuda")
    run = autocast_run(make_pass("force", gridpair.grid_pair, SHAPES[args.shape][1]), data,
                       args.dtype)
    for _ in range(20):
        run()
    plain = min(host_ms(run) for _ in range(3))
    wrapped = {
        "grid_pair (all of it)": (api, "grid_pair"),
        "  check_operands": (api, "check_operands"),
        "  nothing_traces": (api, "nothing_traces"),
        "  grid_pair_eager": (api, "grid_pair_eager"),
        "    _compute": (eager, "_compute"),
        "      choose_keyed": (selector.LaunchSelector, "choose_keyed"),
        "      launch": (eager, "launch"),
        "        _launch_resolved": (launch, "_launch_resolved"),
        "        _reused_padding": (launch, "_reused_padding"),
    }
    for name, (owner, attr) in wrapped.items():
        setattr(owner, attr, timed(name, getattr(owner, attr)))
    gridpair.grid_pair = api.grid_pair
    run = autocast_run(make_pass("force", api.grid_pair, SHAPES[args.shape][1]), data,
                       args.dtype)
    for _ in range(20):
        run()
    best, parts = float("inf"), {}
    for _ in range(3):
        SPENT.clear()
        host = host_ms(run)
        if host < best:
            best, parts = host, dict(SPENT)
    print(f"split step host {plain:.3f} ms unwrapped, {best:.3f} ms wrapped", flush=True)
    for name, seconds in parts.items():
        print(f"split {name:28s} {seconds / 50 * 1e6:8.1f} us per step", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
