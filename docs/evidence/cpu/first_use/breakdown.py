"""Where a cold child's time goes in the stand-in suite: each test's call phase profiled.

    python docs/evidence/cpu/first_use/breakdown.py CHECKOUT [-- ARGS]

Runs the suite once in-process and once with --cold-compile (ARGS added, e.g.
--cold-compile-mode=fork) on CHECKOUT's code, with the conftest's cProfile hook on, and prints
a Markdown table per run and test function: the child's whole time (the cold report's total_s:
fork, set-up, the three phases, records), the call phase, and in it the imports and the
interpreter's per-kernel work (rewriting the kernel's source: per-kernel state, kept cold).
Times inside the call phase are cProfile's, so larger than unprofiled ones.
"""

import glob
import json
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SUITE = Path(__file__).resolve().parent


def _cum(stats: pstats.Stats, file_part: str, name: str) -> float:
    return sum(v[3] for (f, _, fn), v in stats.stats.items() if fn == name and file_part in f)


def _key(nodeid: str) -> str:
    return re.sub(r"[^\w.-]+", "_", nodeid)  # the conftest's profile file name


def profile_run(checkout: str, extra: list[str]) -> dict[str, dict[str, float]]:
    out = tempfile.mkdtemp(prefix="first-use-")
    report = os.path.join(out, "cold.json")
    env = {**os.environ, "PYTHONPATH": checkout, "TRITON_INTERPRET": "1",
           "FIRST_USE_PROFILE": os.path.join(out, "prof")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(SUITE), *extra]
    if extra:
        cmd.append(f"--cold-compile-report={report}")
    subprocess.run(cmd, env=env, cwd=SUITE, check=True, capture_output=True)
    totals = {_key(k): v for k, v in json.loads(Path(report).read_text()).items()} if extra else {}
    rows = {}
    for path in sorted(glob.glob(os.path.join(out, "prof", "*.prof")), key=os.path.getmtime):
        stats = pstats.Stats(path)
        key = Path(path).name[: -len(".prof")]
        rows[key] = {
            "call": stats.total_tt,
            "imports": _cum(stats, "importlib._bootstrap", "_find_and_load"),
            "kernel": _cum(stats, "triton/runtime/interpreter.py", "rewrite"),
            "total": float(totals.get(key, {}).get("total_s") or 0.0),
        }
    shutil.rmtree(out, ignore_errors=True)
    return rows


def table(rows: dict[str, dict[str, float]]) -> str:
    """Per test function: sums over its tests (seconds), and the median test's whole time."""
    labels = {"test_binary": "test_binary (interpreted, numpy asserts)",
              "test_row_sum": "test_row_sum (interpreted, torch.testing asserts)",
              "test_round_trip": "test_round_trip (pure Python)"}
    groups: dict[str, list[dict[str, float]]] = {}
    for name, row in rows.items():
        label = next(text for key, text in labels.items() if f"_{key}_" in name)
        groups.setdefault(label, []).append(row)
    lines = ["| tests | n | whole s | call s | imports in call s | kernel rewrite s "
             "| median whole s | median imports s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, rs in groups.items():
        total = {k: sum(r[k] for r in rs) for k in ("total", "call", "imports", "kernel")}
        lines.append(
            f"| {label} | {len(rs)} | {total['total']:.2f} | {total['call']:.2f} | "
            f"{total['imports']:.2f} | {total['kernel']:.2f} | "
            f"{statistics.median(r['total'] for r in rs):.3f} | "
            f"{statistics.median(r['imports'] for r in rs):.3f} |")
    return "\n".join(lines)


def main() -> None:
    args = sys.argv[1:]
    extra = args[args.index("--") + 1:] if "--" in args else []
    checkout = args[0]
    print("in-process (the whole time of a test is measured in cold runs only)\n")
    print(table(profile_run(checkout, [])))
    print(f"\ncold {' '.join(extra)}\n")
    print(table(profile_run(checkout, ["--cold-compile", *extra])))


if __name__ == "__main__":
    main()
