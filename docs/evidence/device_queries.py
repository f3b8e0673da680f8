"""Collection's device queries answered from a probe process (devices/device_queries.py), on a GPU.

    python docs/evidence/device_queries.py [--tests 200] [--workers 4] [--out DIR]

1. The probe's answers against torch's own in this process, attribute by attribute, and what the
   probe and an in-process CUDA initialization cost.
2. A stand-in for a Triton test module: a conftest asking Triton's driver for the target at
   import, a module of 3000 parametrized items with an architecture skipif, of which --tests run
   (one CUDA op each): in-process and cold, with answering on (auto forks) and off (auto uses
   the zygote), with -n 0 and -n WORKERS. Prints one JSON object per run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

CONFTEST = """
import os
import torch
from triton.runtime import driver

TARGET = driver.active.get_current_target()
CAP = torch.cuda.get_device_capability()

def pytest_collection_modifyitems(items):
    items[:] = items[:int(os.environ["SUITE_TESTS"])]
"""
MODULE = """
import pytest
import torch

@pytest.mark.skipif(torch.cuda.get_device_capability() < (8, 0), reason="needs sm_80")
@pytest.mark.parametrize("i", range(3000))
def test_op(i):
    x = torch.full((i % 64 + 1,), 2.0, device="cuda")
    assert x.sum().item() == 2.0 * (i % 64 + 1)
"""


def probe_against_torch() -> dict[str, object]:
    from pytest_coldcompile.devices import device_probe

    began = time.perf_counter()
    import torch

    import_s = time.perf_counter() - began
    began = time.perf_counter()
    record = device_probe.Probe(lambda: device_probe.ask(torch.cuda)).record()
    probe_s = time.perf_counter() - began
    clean = not torch.cuda.is_initialized()
    began = time.perf_counter()
    torch.cuda.get_device_capability()
    init_s = time.perf_counter() - began
    differ = []
    for index, answered in enumerate(record.devices):
        real = torch.cuda.get_device_properties(index)
        if repr(real) != repr(answered):
            differ.append(f"{index}: repr")
        for name in (n for n in dir(real) if not n.startswith("_")):
            value = getattr(real, name)
            if callable(value):
                continue
            mine = getattr(answered, name, "<missing>")
            same = (str(value) == str(mine)) if name == "uuid" else value == mine
            if not same:
                differ.append(f"{index}.{name}: {value!r} != {mine!r}")
    return {
        "import_torch_s": round(import_s, 3), "probe_s": round(probe_s, 3),
        "parent_clean_after_probe": clean, "in_process_first_query_s": round(init_s, 3),
        "devices": len(record.devices), "failed": record.failed, "differ": differ,
        "bf16": [record.bf16, [torch.cuda.is_bf16_supported(False),
                               torch.cuda.is_bf16_supported(True)]],
        "current_device": [record.current_device, torch.cuda.current_device()],
    }


def run_suite(directory: Path, tests: int, workers: int, cold: bool, answer: bool) -> dict:
    report = directory / "report.json"
    report.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "pytest_coldcompile.plugin", "-o", f"cold_compile_answer_device_queries={answer}"]
    if workers:
        cmd += ["-n", str(workers)]
    if cold:
        cmd += ["--cold-compile", f"--cold-compile-report={report}"]
    env = dict(os.environ, SUITE_TESTS=str(tests),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    began = time.perf_counter()
    proc = subprocess.run([*cmd, str(directory)], capture_output=True, text=True, env=env,
                          cwd=directory, check=False, timeout=580)
    seconds = time.perf_counter() - began
    out = {"cold": cold, "answer": answer, "workers": workers, "seconds": round(seconds, 2),
           "rc": proc.returncode, "last": proc.stdout.strip().splitlines()[-1:]}
    if cold and report.exists():
        records = json.loads(report.read_text()).values()
        out["modes"] = sorted({r["mode"] for r in records})
        out["reasons"] = sorted({r["mode_reason"] for r in records})[:2]
    if proc.returncode:
        out["tail"] = (proc.stdout + proc.stderr)[-3000:]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--only", choices=("probe", "suite"), default=None)
    args = parser.parse_args()
    if args.only != "suite":
        print(json.dumps({"probe": probe_against_torch()}), flush=True)
    if args.only == "probe":
        return
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "conftest.py").write_text(CONFTEST)
        (directory / "test_heavy.py").write_text(MODULE)
        for workers in (0, args.workers):
            for cold, answer in ((False, True), (False, False), (True, True), (True, False)):
                result = run_suite(directory, args.tests, workers, cold, answer)
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
