"""``python -m gridpair explain``: how the selector decides one launch.

It runs the selector's own search for one op, dtype, shape and device (a real CUDA
device or a profile, compiling for the profile's architecture when no GPU is present) and prints
each candidate with its shared memory, the limit and the verdict, then the admitted tile.
"""

import argparse
import json
import sys
import time
from collections.abc import Sequence

import torch

from gridpair import devices
from gridpair.active import SELECTOR
from gridpair.devices import DeviceLimits
from gridpair.geometry import Geometry
from gridpair.selector import Decision
from gridpair.signature import LaunchKey, contiguous_signature

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _shape(text: str) -> tuple[int, int, int, int]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--shape: expected N,D,F,KC integers, got {text!r}") from None
    if len(values) != 4 or min(values) < 1:
        raise argparse.ArgumentTypeError(f"--shape: expected four positive N,D,F,KC, got {text!r}")
    return values


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _limits(device: str | None) -> DeviceLimits:
    if device:
        return devices.profile_limits(device)
    cpu = devices.limits_for(torch.device("cpu"))
    if cpu is not None:
        return cpu
    if torch.cuda.is_available():
        limits = devices.limits_for(torch.device("cuda", torch.cuda.current_device()))
        assert limits is not None
        return limits
    raise SystemExit("explain: no GPU here; pass --device PROFILE (one of: "
                     + ", ".join(sorted(devices.PROFILES)) + ")")


def explain(op: str, dtype: torch.dtype, shape: Sequence[int], frames: int, grid: int,
            limits: DeviceLimits, probe_all: bool = False) -> tuple[Decision, bool]:
    """The decision for this launch, and whether it came from the selector's cache."""
    nodes, degrees, focus, packed = shape
    if packed % frames:
        raise SystemExit(f"explain: --frames {frames} does not divide the last axis {packed}")
    geometry = Geometry(degrees, focus, frames, packed // frames, grid)
    key = LaunchKey(op, limits.identity, limits.shared, geometry,
                    contiguous_signature(op, geometry, dtype, nodes))
    cached = next((d for d in SELECTOR.cached() if d.key == key), None)
    if cached is not None and not probe_all:
        return cached, True
    # The selector's own search, compiling ahead on its worker threads as every search does; no
    # other op is asked for, so none is validated ahead.
    return SELECTOR.decide(key, limits, probe_all=probe_all, siblings=False), False


def as_json(decision: Decision, limits: DeviceLimits, from_cache: bool) -> dict[str, object]:
    admitted = decision.admitted
    return {
        "op": decision.key.op,
        "device": limits.identity,
        "limit": decision.key.limit,
        "candidates": [
            {"config": p.tile.as_dict(), "shared": p.shared,
             "outcome": "cached" if from_cache else p.outcome}
            for p in decision.probes
        ],
        "admitted": ({"config": admitted.tile.as_dict(), "shared": admitted.shared}
                     if admitted else None),
        "fallback": admitted is None,
    }


def _print_table(decision: Decision, limits: DeviceLimits, from_cache: bool,
                 seconds: float) -> None:
    key = decision.key
    print(f"gridpair explain: {key.op} {key.signature.dtype} {key.geometry} on {limits.identity}")
    print(f"per-block shared-memory limit: {key.limit} bytes"
          + (" (decision from the selector's cache)" if from_cache else ""))
    print(f"{'#':>3}  {'config':<38} {'shared':>8} {'limit':>8}  verdict")
    for index, probe in enumerate(decision.probes, start=1):
        shared = "-" if probe.shared is None else str(probe.shared)
        verdict = "cached" if from_cache else probe.outcome
        if probe.outcome != "fits" and probe.detail and "shared memory" not in probe.detail:
            verdict += f" ({probe.detail})"
        print(f"{index:>3}  {probe.tile!s:<38} {shared:>8} {key.limit:>8}  {verdict}")
    if decision.admitted is None:
        print("admitted: none - the op computes with the reference composition (fallback)")
    else:
        print(f"admitted: {decision.admitted.tile} ({decision.admitted.shared} bytes)")
    print(f"({seconds:.1f} s)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gridpair")
    commands = parser.add_subparsers(dest="command", required=True)
    ex = commands.add_parser("explain", help="show how the selector decides one launch")
    ex.add_argument("--op", choices=("fwd", "bwd", "bwd2"), required=True)
    ex.add_argument("--dtype", choices=sorted(_DTYPES), required=True)
    ex.add_argument("--shape", type=_shape, required=True, help="N,D,F,KC of the operands")
    ex.add_argument("--frames", type=_positive, required=True, help="K, frames packed in KC")
    ex.add_argument("--grid", type=_positive, required=True, help="G, grid points")
    ex.add_argument("--device", choices=sorted(devices.PROFILES), default=None,
                    help="device profile (default: $GRIDPAIR_DEVICE, else the current GPU)")
    ex.add_argument("--all", action="store_true",
                    help="probe every candidate, not only up to the admitted one")
    ex.add_argument("--json", action="store_true", help="print the decision as one JSON object")
    args = parser.parse_args(argv)
    if args.shape[3] % args.frames:
        ex.error(f"--frames {args.frames} does not divide the last axis of --shape "
                 f"({args.shape[3]})")
    limits = _limits(args.device)
    start = time.perf_counter()
    decision, from_cache = explain(args.op, _DTYPES[args.dtype], args.shape, args.frames,
                                   args.grid, limits, probe_all=args.all)
    if args.json:
        json.dump(as_json(decision, limits, from_cache), sys.stdout)
        print()
    else:
        _print_table(decision, limits, from_cache, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
