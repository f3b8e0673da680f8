"""Isolation overhead of pytest-coldcompile per mode and kind of test module (a benchmark, not
a timed test).

    python benchmarks/bench_isolation.py [--tests 10] [--spawn-tests 3] [--repeats 1]
        [--out benchmarks/results/isolation-h200.json]

Each (mode, kind) runs as its own pytest process; modes: plain (no cold run), auto, fork,
zygote, spawn. Kinds: "trivial" (the module imports torch and triton), "cuda" (each test runs
one CUDA op), "collection-cuda" (the module calls torch.cuda.is_available() at import with
PYTORCH_NVML_BASED_CUDA_CHECK=0, which asks the CUDA driver: the plugin answers it from its
probe process, so the pytest process stays CUDA-clean and `auto` forks; each test runs one CUDA
op). overhead_ms = (wall - plain wall, same kind and test count) / tests, the median over
--repeats of a plain run and the mode's run back to back. Without a GPU
the cuda kinds are skipped with a note. About 4 minutes on the H200 with the defaults.
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
MODES = ("plain", "auto", "fork", "zygote", "spawn")
KINDS = ("trivial", "cuda", "collection-cuda")

HEADER = {
    "trivial": "import pytest, torch, triton\n",
    "cuda": "import pytest, torch, triton\n",
    # With the NVML check off, is_available() asks the driver (answered from the probe).
    "collection-cuda": ("import pytest, torch, triton\nassert torch.cuda.is_available()\n"),
}
BODY = {
    "trivial": "    assert i >= 0\n",
    "cuda": "    assert torch.ones(4, device='cuda').sum().item() == 4.0\n",
    "collection-cuda": "    assert torch.ones(4, device='cuda').sum().item() == 4.0\n",
}
TEST = '@pytest.mark.parametrize("i", range({n}))\ndef test_{kind}(i):\n{body}'


def _module(kind: str, n: int) -> str:
    test = TEST.format(n=n, kind=kind.replace("-", "_"), body=BODY[kind])
    return HEADER[kind] + "\n\n" + test


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
    if mode != "plain":
        args += ["--cold-compile", f"--cold-compile-report={report}"]
        args += ["--cold-compile-timeout=120"]
        if mode != "auto":
            args.append(f"--cold-compile-mode={mode}")
    cmd = [sys.executable, "-m", "pytest", *args, str(directory)]
    began = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, check=False, env=_env(kind), timeout=900
    )
    seconds = time.perf_counter() - began
    if proc.returncode != 0 or f"{tests} passed" not in proc.stdout:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    chosen = "plain"
    if mode != "plain":
        modes = {entry["mode"] for entry in json.loads(report.read_text()).values()}
        chosen = "+".join(sorted(modes))
    return {"chosen": chosen, "seconds": seconds}


def _cuda_present() -> bool:
    probe = "import torch; print(torch.cuda.device_count())"
    try:
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
        )
        return int(out.stdout.strip() or 0) > 0
    except (subprocess.SubprocessError, ValueError):
        return False


def measure(
    tests: int, spawn_tests: int, repeats: int, modes: list[str], kinds: list[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    notes: list[str] = []
    if any(k != "trivial" for k in kinds) and not _cuda_present():
        notes.append("no CUDA device: the cuda and collection-cuda kinds were skipped")
        kinds = [k for k in kinds if k == "trivial"]
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            counts = {m: (spawn_tests if m == "spawn" else tests) for m in modes}
            for n in sorted(set(counts.values())):
                d = Path(tmp, f"{kind}-{n}")
                d.mkdir()
                (d / f"test_{kind.replace('-', '_')}.py").write_text(_module(kind, n))
            for mode in modes:
                n = counts[mode]
                d = Path(tmp, f"{kind}-{n}")
                # Each repeat pairs a plain run with the mode's, back to back: the start of
                # pytest (seconds of imports on a loaded machine) drifts between minutes, and
                # the overhead is the median of the paired differences.
                plain, runs = [], []
                for _ in range(repeats):
                    plain.append(_run(d, kind, "plain", n)["seconds"])
                    runs.append(
                        {"chosen": "plain", "seconds": plain[-1]}
                        if mode == "plain"
                        else _run(d, kind, mode, n)
                    )
                overhead = statistics.median(r["seconds"] - p for r, p in zip(runs, plain))
                records.append(
                    {
                        "mode": mode,
                        "chosen": runs[0]["chosen"],
                        "kind": kind,
                        "tests": n,
                        "seconds": round(statistics.median(r["seconds"] for r in runs), 3),
                        "overhead_ms": round(overhead / n * 1000, 1),
                    }
                )
                print(json.dumps(records[-1]), file=sys.stderr, flush=True)
    return records, notes


def table(records: list[dict[str, Any]]) -> str:
    lines = [
        "| kind | mode | chosen | tests | wall (s) | overhead per test (ms) |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in records:
        lines.append(
            f"| {r['kind']} | {r['mode']} | {r['chosen']} | {r['tests']} | "
            f"{r['seconds']:.2f} | {r['overhead_ms']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tests", type=int, default=10, help="tests per run (default 10)")
    parser.add_argument(
        "--spawn-tests", type=int, default=3, help="tests per spawn run (default 3: ~5 s each)"
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
    for name in ("tests", "spawn_tests", "repeats"):
        if getattr(ns, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: expected a positive count")
    records, notes = measure(ns.tests, ns.spawn_tests, ns.repeats, modes, kinds)
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
