"""Wall time of the stand-in suite in-process and cold on two checkouts, side by side.

    python docs/evidence/cpu/first_use/measure.py BASE_CHECKOUT NEW_CHECKOUT [ROUNDS] [-- ARGS]

Each round runs the suite in-process (NEW's plugin loaded, nothing cold), then with
--cold-compile on BASE's code, then on NEW's (PYTHONPATH picks the checkout); ARGS are added
to the cold runs (e.g. --cold-compile-mode=fork, -n 2). Prints each run's seconds (pytest's
own session time) and the cold/in-process ratios of the medians.
"""

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).resolve().parent


def session_seconds(checkout: str, extra: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": checkout, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(SUITE), *extra]
    out = subprocess.run(cmd, env=env, cwd=SUITE, capture_output=True, text=True).stdout
    found = re.search(r"(\d+) passed.* in ([\d.]+)s", out)
    if found is None or found.group(1) != "35":
        raise SystemExit(f"unexpected outcome of {cmd}:\n{out[-3000:]}")
    return float(found.group(2))


def main() -> None:
    args = sys.argv[1:]
    extra = args[args.index("--") + 1:] if "--" in args else []
    args = args[: args.index("--")] if "--" in args else args
    base, new = args[0], args[1]
    rounds = int(args[2]) if len(args) > 2 else 3
    runs = {"in-process": [], "cold, base": [], "cold, new": []}
    for r in range(rounds):
        runs["in-process"].append(session_seconds(new, []))
        runs["cold, base"].append(session_seconds(base, ["--cold-compile", *extra]))
        runs["cold, new"].append(session_seconds(new, ["--cold-compile", *extra]))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in runs.items()),
              flush=True)
    warm = statistics.median(runs["in-process"])
    for name, seconds in runs.items():
        med = statistics.median(seconds)
        print(f"{name:12} median {med:6.2f} s  ratio to in-process {med / warm:5.2f}")


if __name__ == "__main__":
    main()
