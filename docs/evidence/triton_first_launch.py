"""Where a cold child of a Triton GPU suite spends its first second: each phase of a fresh
process's first Triton launch, with an empty Triton cache (as a cold child has it).

    python docs/evidence/triton_first_launch.py [--runs 3]

Each run is a fresh interpreter with its own empty TRITON_CACHE_DIR. Runs "private": Triton as
it is (its driver's C utilities compiled in every process); runs "shared": through
pytest_coldcompile.child.host_modules.share_builds on one directory, as a session's cold
children have it (the first run builds, the next copy). Phases, in seconds: import (torch and
triton), cuda (torch.cuda.init and a first tensor), driver (Triton's active driver and its
utilities: the C compile where not shared), first (the first kernel compiled, launched and
synchronized), second (another kernel, the same).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys, time
t = [time.perf_counter()]
import torch, triton, triton.language as tl
t.append(time.perf_counter())
if sys.argv[1]:
    from pytest_coldcompile.child import host_modules
    host_modules.share_builds(sys.argv[1])
torch.cuda.init(); x = torch.ones(1024, device="cuda"); torch.cuda.synchronize()
t.append(time.perf_counter())
from triton.runtime import driver
driver.active.utils; driver.active.get_current_target()
t.append(time.perf_counter())

@triton.jit
def add_one(X, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(X + offs, tl.load(X + offs) + 1)

@triton.jit
def times_two(X, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(X + offs, tl.load(X + offs) * 2)

add_one[(1,)](x, N=1024); torch.cuda.synchronize()
t.append(time.perf_counter())
times_two[(1,)](x, N=1024); torch.cuda.synchronize()
t.append(time.perf_counter())
assert x[0].item() == 4.0
names = ["import", "cuda", "driver", "first", "second"]
print(json.dumps({n: round(b - a, 3) for n, a, b in zip(names, t, t[1:])}))
"""


def one_run(shared: str) -> dict[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as cache:
        env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
        script = os.path.join(cache, "first_launch.py")  # @triton.jit reads its source file
        with open(script, "w") as f:
            f.write(CHILD)
        out = subprocess.run([sys.executable, script, shared], env=env,
                             capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    for _ in range(runs):
        print("private", json.dumps(one_run("")), flush=True)
    with tempfile.TemporaryDirectory() as shared:
        for _ in range(runs):
            print("shared ", json.dumps(one_run(shared)), flush=True)


if __name__ == "__main__":
    main()
