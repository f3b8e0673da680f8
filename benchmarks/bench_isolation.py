"""Isolation overhead of pytest-coldcompile per mode and kind of test module (a benchmark, not
a timed test).

    python benchmarks/bench_isolation.py [--tests 10] [--spawn-tests 3] [--pure-tests 900]
        [--heavy-tests 30] [--repeats 1] [--out benchmarks/results/isolation-h200.json]

Each (mode, kind) runs as its own pytest process; modes: plain (no cold run), auto, fork, zygote,
spawn; fork-context-in-test (fork, ini cold_compile_cuda_ahead false: each test makes its CUDA
context), fork-one-ahead (fork, contexts made ahead, one child forked ahead). Kinds: "trivial" (the
module imports torch and triton), "pure-python" (no torch import; --pure-tests tests), "cuda" (each
test runs one CUDA op), "collection-cuda" (the module calls torch.cuda.is_available() at import
with PYTORCH_NVML_BASED_CUDA_CHECK=0, which asks the CUDA driver: the plugin answers it from its
probe process, so the pytest process stays CUDA-clean and `auto` forks; each test runs one CUDA
op), "heavy-collection-cuda" (a module of 5,000 parametrized items, of which --heavy-tests run in
every mode, and a conftest that initializes CUDA at collection as Triton's driver does:
current_device() and get_device_capability() through driver.active.get_current_target(); each test
runs one CUDA op). Each row: wall seconds and CPU seconds (user + system of the whole process tree,
from wait4), medians over --repeats of a plain run and the mode's run back to back; ratio = the
mode's wall / the plain wall and cpu_ratio = the same of CPU seconds (same kind and tests);
overhead_ms and overhead_cpu_ms = the paired differences' median per test; child_median_ms = a cold
child's median wall time, request to exit (the report's total_s). Without a GPU the CUDA kinds are
skipped with a note. The first three kinds took about 4 minutes on the H200 with the defaults;
pure-python and heavy-collection-cuda add more, since each zygote and spawned child collects its
module again (900 children, and 30 that collect 5,000 items each).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MODES = ("plain", "auto", "fork", "zygote", "spawn", "fork-context-in-test", "fork-one-ahead")
KINDS = ("trivial", "pure-python", "cuda", "collection-cuda", "heavy-collection-cuda")
CUDA_KINDS = ("cuda", "collection-cuda", "heavy-collection-cuda")
HEAVY_ITEMS = 5000

HEADER = {
    "trivial": "import pytest, torch, triton\n",
    "pure-python": "import pytest\n",
    "cuda": "import pytest, torch, triton\n",
    # With the NVML check off, is_available() asks the driver (answered from the probe).
    "collection-cuda": ("import pytest, torch, triton\nassert torch.cuda.is_available()\n"),
    "heavy-collection-cuda": "import pytest, torch, triton\n",
}
CUDA_OP = "    assert torch.ones(4, device='cuda').sum().item() == 4.0\n"
BODY = {
    "trivial": "    assert i >= 0\n",
    "pure-python": "    assert i >= 0\n",
    "cuda": CUDA_OP,
    "collection-cuda": CUDA_OP,
    "heavy-collection-cuda": CUDA_OP,
}
TEST = '@pytest.mark.parametrize("i", {values})\ndef test_{kind}(i):\n{body}'
# The heavy kind collects HEAVY_ITEMS items and runs the first n, marked bench_run (-m).
HEAVY_VALUES = (
    "[pytest.param(i, marks=pytest.mark.bench_run) if i < {n} else i for i in range({items})]"
)
HEAVY_CONFTEST = """\
import pytest
from triton.runtime import driver


def pytest_configure(config):
    config.addinivalue_line("markers", "bench_run: the items a benchmark run selects")


# What a Triton test suite does at collection (a kernel's target, a skip condition): Triton's
# driver asks torch.cuda.current_device() and torch.cuda.get_device_capability(), which would
# initialize CUDA in the pytest process (the plugin answers them from its probe process).
TARGET = driver.active.get_current_target()
"""


def _module(kind: str, n: int) -> str:
    values = (
        HEAVY_VALUES.format(n=n, items=max(HEAVY_ITEMS, n))
        if kind == "heavy-collection-cuda"
        else f"range({n})"
    )
    test = TEST.format(values=values, kind=kind.replace("-", "_"), body=BODY[kind])
    return HEADER[kind] + "\n\n" + test


def write_kind(directory: Path, kind: str, n: int) -> None:
    """The test module (and conftest) of kind with n tests to run, in directory."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"test_{kind.replace('-', '_')}.py").write_text(_module(kind, n))
    if kind == "heavy-collection-cuda":
        (directory / "conftest.py").write_text(HEAVY_CONFTEST)


def _plugin_args() -> list[str]:
    # Not installed (the GPU machine runs from the repository): name the plugin explicitly.
    names = {ep.name for ep in metadata.entry_points(group="pytest11")}
    return [] if "coldcompile" in names else ["-p", "pytest_coldcompile.plugin"]


def _env(kind: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    if kind == "collection-cuda":
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "0"
    return env


def _run(directory: Path, kind: str, mode: str, tests: int) -> dict[str, Any]:
    report = directory / f"report-{mode}.json"
    args = ["-q", "-p", "no:cacheprovider", *_plugin_args()]
    if kind == "heavy-collection-cuda":
        args += ["-m", "bench_run"]
    if mode != "plain":
        args += ["--cold-compile", f"--cold-compile-report={report}"]
        args += ["--cold-compile-timeout=120"]
        if mode == "fork-context-in-test":
            args += ["--cold-compile-mode=fork", "-o", "cold_compile_cuda_ahead=false"]
        elif mode == "fork-one-ahead":
            args += ["--cold-compile-mode=fork", "-o", "cold_compile_cuda_ahead=true",
                     "-o", "cold_compile_forked_ahead=1"]
        elif mode != "auto":
            args.append(f"--cold-compile-mode={mode}")
    cmd = [sys.executable, "-m", "pytest", *args, str(directory)]
    with tempfile.TemporaryFile("w+") as out:
        began = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True,
                                env=_env(kind))
        try:
            # wait4: the CPU time of pytest and of every process it waited for (the fork
            # server waits for its children, pytest for the server and spawned children).
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            raise
        seconds = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        stdout = out.read()
    if proc.returncode != 0 or f"{tests} passed" not in stdout:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{stdout}")
    chosen, child = "plain", None
    if mode != "plain":
        entries = json.loads(report.read_text()).values()
        chosen = "+".join(sorted({entry["mode"] for entry in entries}))
        child = statistics.median(entry.get("total_s") or 0.0 for entry in entries)
    return {"chosen": chosen, "seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime,
            "child_s": child}


def _cuda_present() -> bool:
    probe = "import torch; print(torch.cuda.device_count())"
    try:
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
        )
        return int(out.stdout.strip() or 0) > 0
    except (subprocess.SubprocessError, ValueError):
        return False


def _counts(kind: str, modes: list[str], tests: dict[str, int]) -> dict[str, int]:
    """Tests run per mode of kind."""
    if kind == "heavy-collection-cuda":
        return {m: tests["heavy"] for m in modes}
    if kind == "pure-python":
        return {m: (tests["spawn"] if m == "spawn" else tests["pure"]) for m in modes}
    return {m: (tests["spawn"] if m == "spawn" else tests["tests"]) for m in modes}


def measure(
    tests: dict[str, int], repeats: int, modes: list[str], kinds: list[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """tests: the counts by --tests, --spawn-tests, --pure-tests, --heavy-tests (keys tests,
    spawn, pure, heavy)."""
    notes: list[str] = []
    if any(k in CUDA_KINDS for k in kinds) and not _cuda_present():
        skipped = [k for k in kinds if k in CUDA_KINDS]
        notes.append(f"no CUDA device: the kinds {', '.join(skipped)} were skipped")
        kinds = [k for k in kinds if k not in CUDA_KINDS]
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            counts = _counts(kind, modes, tests)
            for n in sorted(set(counts.values())):
                write_kind(Path(tmp, f"{kind}-{n}"), kind, n)
            for mode in modes:
                n = counts[mode]
                d = Path(tmp, f"{kind}-{n}")
                # Each repeat pairs a plain run with the mode's, back to back: the start of
                # pytest (seconds of imports on a loaded machine) drifts between minutes, and
                # the overhead is the median of the paired differences.
                plain, runs = [], []
                for _ in range(repeats):
                    plain.append(_run(d, kind, "plain", n))
                    runs.append(plain[-1] if mode == "plain" else _run(d, kind, mode, n))
                records.append(_record(mode, kind, n, plain, runs))
                print(json.dumps(records[-1]), file=sys.stderr, flush=True)
    return records, notes


def _record(
    mode: str, kind: str, n: int, plain: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> dict[str, Any]:
    def median(key: str, of: list[dict[str, Any]]) -> float:
        return statistics.median(r[key] for r in of)

    def per_test(key: str) -> float:
        overhead = statistics.median(r[key] - p[key] for r, p in zip(runs, plain))
        return round(overhead / n * 1000, 1)

    return {
        "mode": mode,
        "chosen": runs[0]["chosen"],
        "kind": kind,
        "tests": n,
        "seconds": round(median("seconds", runs), 3),
        "plain_seconds": round(median("seconds", plain), 3),
        "ratio": round(median("seconds", runs) / median("seconds", plain), 2),
        "overhead_ms": per_test("seconds"),
        "cpu_seconds": round(median("cpu", runs), 3),
        "plain_cpu_seconds": round(median("cpu", plain), 3),
        "cpu_ratio": round(median("cpu", runs) / median("cpu", plain), 2),
        "overhead_cpu_ms": per_test("cpu"),
        "repeats": len(runs),
        # A cold child's median wall time, request to exit (the report's total_s).
        "child_median_ms": (None if runs[0]["child_s"] is None
                            else round(statistics.median(r["child_s"] for r in runs) * 1000, 1)),
    }


def table(records: list[dict[str, Any]]) -> str:
    lines = [
        "| kind | mode | chosen | tests | wall (s) | ratio | overhead per test (ms) "
        "| CPU (s) | CPU ratio | CPU overhead per test (ms) |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in records:
        lines.append(
            f"| {r['kind']} | {r['mode']} | {r['chosen']} | {r['tests']} | "
            f"{r['seconds']:.2f} | {r['ratio']:.2f} | {r['overhead_ms']:.1f} | "
            f"{r['cpu_seconds']:.2f} | {r['cpu_ratio']:.2f} | {r['overhead_cpu_ms']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tests", type=int, default=10, help="tests per run (default 10)")
    parser.add_argument(
        "--spawn-tests", type=int, default=3, help="tests per spawn run (default 3: ~5 s each)"
    )
    parser.add_argument(
        "--pure-tests", type=int, default=900, help="tests per pure-python run (default 900)"
    )
    parser.add_argument(
        "--heavy-tests",
        type=int,
        default=30,
        help=f"tests run of the {HEAVY_ITEMS} heavy-collection-cuda items, every mode (default 30)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs per configuration")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset")
    parser.add_argument("--out", type=Path, default=None, help="write the records here (JSON)")
    ns = parser.parse_args()
    modes = [m for m in ns.modes.split(",") if m]
    kinds = [k for k in ns.kinds.split(",") if k]
    for name, values, allowed in (("--modes", modes, MODES), ("--kinds", kinds, KINDS)):
        bad = sorted(set(values) - set(allowed))
        if bad:
            parser.error(f"{name}: unknown {bad}; expected some of {', '.join(allowed)}")
    if "plain" not in modes:
        modes.insert(0, "plain")  # every overhead is measured against it
    for name in ("tests", "spawn_tests", "pure_tests", "heavy_tests", "repeats"):
        if getattr(ns, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: expected a positive count")
    counts = {"tests": ns.tests, "spawn": ns.spawn_tests, "pure": ns.pure_tests,
              "heavy": ns.heavy_tests}
    records, notes = measure(counts, ns.repeats, modes, kinds)
    print(f"Command: `python {' '.join(sys.argv)}`\n")
    print(
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}\n"
    )
    print(table(records))
    for note in notes:
        print(f"\nNote: {note}")
    if ns.out is not None:
        ns.out.parent.mkdir(parents=True, exist_ok=True)
        ns.out.write_text(json.dumps(records, indent=2) + "\n")
        print(f"\nrecords written to {ns.out}")


if __name__ == "__main__":
    main()
