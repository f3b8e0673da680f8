"""Compare two pytest runs of the same tests from their `-rA` logs: the outcome of every test
(passed and failed node ids; skips by count, since -rA folds them by reason), each run's wall
time as pytest reports it, and the ratio of the second to the first.

    python docs/evidence/compare_runs.py IN_PROCESS.log COLD.log
"""

from __future__ import annotations

import re
import sys
from collections import Counter

_OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+)")
_SKIPPED = re.compile(r"^SKIPPED \[(\d+)\]")
_FINAL = re.compile(r"^=+ (.*) in ([0-9.]+)s")


def read(path: str) -> tuple[dict[str, str], int, str, float | None, list[str]]:
    outcomes: dict[str, str] = {}
    skipped = 0
    final, seconds = "", None
    mode_lines = []
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            if m := _OUTCOME.match(line):
                outcomes[m.group(2)] = m.group(1)
            elif m := _SKIPPED.match(line):
                skipped += int(m.group(1))
            elif m := _FINAL.match(line):
                final, seconds = m.group(1), float(m.group(2))
            elif (line.startswith("cold-compile: ") or " run as " in line) and len(mode_lines) < 4:
                mode_lines.append(line.rstrip())
    return outcomes, skipped, final, seconds, mode_lines


def main() -> None:
    first, second = sys.argv[1], sys.argv[2]
    a, a_skips, a_final, a_s, _ = read(first)
    b, b_skips, b_final, b_s, b_modes = read(second)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    print(f"first:  {a_final} in {a_s} s ({dict(Counter(a.values()))}, {a_skips} skipped)")
    print(f"second: {b_final} in {b_s} s ({dict(Counter(b.values()))}, {b_skips} skipped)")
    for line in b_modes:
        print(f"second: {line}")
    same = not differ and a_skips == b_skips
    print(f"outcomes identical: {'yes' if same else 'no'}"
          + (f" ({len(differ)} differ, first: {differ[:5]})" if differ else ""))
    if a_s and b_s:
        print(f"wall ratio second/first: {b_s / a_s:.2f}x")


if __name__ == "__main__":
    main()
