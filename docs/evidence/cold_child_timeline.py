"""Where a cold GPU test's wall time goes: a timeline of each test, from the pytest process's
start of the test to its end, through the child's phases.

    python docs/evidence/cold_child_timeline.py [--tests 30] [-- extra pytest args]

A generated module of --tests tests, each one CUDA op (as bench_isolation's collection-cuda
kind: its collection asks the driver, answered from the probe), runs cold in fork mode with the
given ini settings. A conftest logs, with time.time() and the pid: logstart (pytest process, the
test begins), setup (the child, before the first fixture), call and call-end (the test's body),
teardown-end (the child, its teardown done), logfinish (pytest process, the test's reports
logged). Printed: the median of each gap over the tests but the first, in milliseconds. Also
printed: a fresh process's first CUDA op after its context exists, and its second.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CONFTEST = """
import os, time
import pytest
import torch

assert torch.cuda.is_available()  # with the NVML check off: asks the driver
LOG = os.path.join(os.path.dirname(__file__), "timeline.log")

def _log(event, item):
    with open(LOG, "a") as f:
        f.write(f"{item} {event} {os.getpid()} {time.time():.6f}\\n")

def pytest_runtest_logstart(nodeid, location):
    _log("logstart", nodeid)

def pytest_runtest_logfinish(nodeid, location):
    _log("logfinish", nodeid)

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _log("setup", item.nodeid)

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _log("call", item.nodeid)
    yield
    _log("call-end", item.nodeid)

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    _log("teardown-end", item.nodeid)
"""

MODULE = """
import pytest, torch

@pytest.mark.parametrize("i", range({n}))
def test_op(i):
    assert torch.ones(4, device="cuda").sum().item() == 4.0
"""

FIRST_OP = """
import time, torch
torch.cuda.init(); torch.cuda.synchronize()
t0 = time.perf_counter()
torch.ones(4, device="cuda").sum().item()
t1 = time.perf_counter()
torch.ones(4, device="cuda").sum().item()
t2 = time.perf_counter()
print(f"after the context: first op {1000 * (t1 - t0):.1f} ms, second {1000 * (t2 - t1):.1f} ms")
"""

GAPS = [("logstart", "setup"), ("setup", "call"), ("call", "call-end"),
        ("call-end", "teardown-end"), ("teardown-end", "logfinish"), ("logstart", "logfinish")]


def timeline(directory: Path, args: list[str]) -> None:
    log = directory / "timeline.log"
    log.unlink(missing_ok=True)
    env = dict(os.environ, PYTORCH_NVML_BASED_CUDA_CHECK="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--cold-compile",
           "--cold-compile-mode=fork", *args, str(directory)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=directory)
    tail = out.stdout.strip().splitlines()[-1:] if out.stdout.strip() else []
    events: dict[str, dict[str, float]] = {}
    for line in log.read_text().splitlines():
        nodeid, event, _, at = line.split()
        events.setdefault(nodeid, {})[event] = float(at)
    ordered = sorted(events.values(), key=lambda e: e.get("logstart", 0))[1:]
    gaps = []
    for a, b in GAPS:
        values = [1000 * (e[b] - e[a]) for e in ordered if a in e and b in e]
        gaps.append(f"{a}->{b} {statistics.median(values):.1f}" if values else f"{a}->{b} -")
    starts = [e["logstart"] for e in ordered]
    per_test = 1000 * (starts[-1] - starts[0]) / max(1, len(starts) - 1)
    print(f"{' '.join(args) or 'defaults'}: {tail} per test {per_test:.1f} ms; "
          + "; ".join(gaps), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=30)
    known, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    first = subprocess.run([sys.executable, "-c", FIRST_OP], capture_output=True, text=True)
    print(first.stdout.strip() or first.stderr.strip()[-2000:], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "conftest.py").write_text(CONFTEST)
        (directory / "test_timeline.py").write_text(MODULE.format(n=known.tests))
        variants = [[], ["-o", "cold_compile_cuda_ahead=false"],
                    ["-o", "cold_compile_forked_ahead=1"]]
        for args in ([extra] if extra else variants):
            timeline(directory, args)


if __name__ == "__main__":
    main()
