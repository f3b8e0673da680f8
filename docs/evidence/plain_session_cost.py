"""What a session that runs no cold test pays for the installed plugin: a trivial suite run with
the plugin, with it but no zygote (mode fork), with it but torch's driver-based CUDA check (the
user's PYTORCH_NVML_BASED_CUDA_CHECK=0 wins over the plugin's 1), and with `-p no:coldcompile`;
with no torch, with a conftest importing torch, and with one also asking
torch.cuda.is_available() (as torch's test utilities do); wall and CPU time (the pytest process
and its children), the median of interleaved repeats.

    python docs/evidence/plain_session_cost.py [--tests 300] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {  # name: (arguments, environment)
    "no plugin": (["-p", "no:coldcompile"], {}),
    "plugin": ([], {}),
    "plugin, no zygote": (["--cold-compile-mode=fork"], {}),
    "plugin, driver check": ([], {"PYTORCH_NVML_BASED_CUDA_CHECK": "0"}),
}
CONFTESTS = {
    "no torch": "",
    "import torch": "import torch\n",
    "is_available()": "import torch\ntorch.cuda.is_available()\n",
}


def suite(root: Path, tests: int, conftest: str) -> None:
    root.mkdir()
    (root / "conftest.py").write_text(conftest)
    per_file = 10
    for f in range(tests // per_file):
        (root / f"test_m{f}.py").write_text(
            "".join(f"def test_{i}():\n    pass\n\n" for i in range(per_file)))


def once(root: Path, extra: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
                   cwd=root, check=True, stdout=subprocess.DEVNULL, env={**os.environ, **env})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"{args.tests} trivial tests, median of {args.repeats}; load average "
          f"{os.getloadavg()[0]:.1f}")
    os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
    with tempfile.TemporaryDirectory() as tmp:
        for index, (label, conftest) in enumerate(CONFTESTS.items()):
            root = Path(tmp) / f"suite-{index}"
            suite(root, args.tests, conftest)
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
            once(root, [], {})  # bytecode and page cache
            for _ in range(args.repeats):
                for name, (extra, env) in VARIANTS.items():
                    times[name].append(once(root, extra, env))
            for name, runs in times.items():
                wall = statistics.median(w for w, _ in runs)
                cpu = statistics.median(c for _, c in runs)
                print(f"{label:16} {name:22} wall {wall * 1000:7.0f} ms  cpu {cpu * 1000:7.0f} ms",
                      flush=True)
    print(f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
