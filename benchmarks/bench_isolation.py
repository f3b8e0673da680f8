"""Isolation overhead of pytest-coldcompile: 100 trivial tests, plain and cold, in one run.

    python benchmarks/bench_isolation.py [--tests 100] [--repeats 5] [--spawn-tests 20]

Each configuration runs as its own pytest process, alternating, REPEATS times; the median
wall time of each is compared. The overhead per test is (cold - plain) / tests: what running
a trivial test cold costs beyond running it in-process (goal: at most 50 ms).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST_FILE = """
import pytest
{imports}

@pytest.mark.parametrize("i", range({n}))
def test_trivial(i):
    assert i >= 0
"""


def _run(directory: Path, args: list[str], expect: int) -> float:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(directory)]
    began = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    if proc.returncode != 0 or f"{expect} passed" not in proc.stdout:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return seconds


def measure(tests: int, repeats: int, spawn_tests: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        full, small, heavy = Path(tmp, "full"), Path(tmp, "small"), Path(tmp, "torch")
        for directory, n, imports in (
            (full, tests, ""),
            (small, spawn_tests, ""),
            (heavy, tests, "import torch, triton"),
        ):
            directory.mkdir()
            (directory / "test_trivial.py").write_text(TEST_FILE.format(n=n, imports=imports))
        configs = {
            "plain": (full, [], tests),
            "cold (auto: fork)": (full, ["--cold-compile"], tests),
            "plain, module imports torch": (heavy, [], tests),
            "cold (auto: fork), module imports torch": (heavy, ["--cold-compile"], tests),
        }
        if spawn_tests:
            configs["plain, spawn-sized"] = (small, [], spawn_tests)
            configs["cold (spawn)"] = (
                small,
                ["--cold-compile", "--cold-compile-mode=spawn"],
                spawn_tests,
            )
        times: dict[str, list[float]] = {name: [] for name in configs}
        for _ in range(repeats):
            for name, (directory, args, expect) in configs.items():
                times[name].append(_run(directory, args, expect))
    return times


def report(times: dict[str, list[float]], tests: int, spawn_tests: int, command: str) -> str:
    median = {name: statistics.median(values) for name, values in times.items()}
    lines = [
        f"Command: `{command}`",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        "",
        "| configuration | tests | wall time, median (s) | all runs (s) |",
        "| --- | ---: | ---: | --- |",
    ]
    for name, values in times.items():
        count = spawn_tests if "spawn" in name else tests
        runs = ", ".join(f"{v:.2f}" for v in values)
        lines.append(f"| {name} | {count} | {median[name]:.2f} | {runs} |")
    fork = (median["cold (auto: fork)"] - median["plain"]) / tests * 1000
    heavy = (
        (median["cold (auto: fork), module imports torch"] - median["plain, module imports torch"])
        / tests
        * 1000
    )
    lines += [
        "",
        f"Isolation overhead, fork (the default here): **{fork:.1f} ms per test**",
        f"Isolation overhead, fork, the test module imports torch and triton: "
        f"**{heavy:.1f} ms per test**",
    ]
    if spawn_tests:
        spawn = (median["cold (spawn)"] - median["plain, spawn-sized"]) / spawn_tests * 1000
        lines.append(f"Isolation overhead, spawn: **{spawn:.0f} ms per test**")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--spawn-tests", type=int, default=20, help="tests in the spawn comparison (0: skip it)"
    )
    ns = parser.parse_args()
    times = measure(ns.tests, ns.repeats, ns.spawn_tests)
    print(report(times, ns.tests, ns.spawn_tests, "python " + " ".join(sys.argv)))


if __name__ == "__main__":
    main()
