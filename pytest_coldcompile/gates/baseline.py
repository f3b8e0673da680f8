"""Baselines: each cold test compared with an earlier ``--cold-compile-report``. Graphs, launch
admissions and fallbacks are deterministic (``--cold-compile-baseline-strict`` fails the
session on a change); compile times, beyond a tolerance, and tests new or gone are reported.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_coldcompile.gates import settings

# (figure, what more of it means): more Dynamo frames or graphs is a recompile, more fallbacks a
# selector that no longer finds a launch; any other move of these is a change.
DETERMINISTIC = {
    "frames": "regression",
    "forward_graphs": "regression",
    "backward_graphs": "regression",
    "fallback": "regression",
    "admitted": "change",
    "probed": "change",
    "max_admitted_shared": "change",  # another tile admitted
    "launches": "change",  # another tile admitted, or a fallback, whatever its bytes
    "selectors": "change",
}
TIMINGS = ("compile_s", "selection_s", "tracing_s", "inductor_s")
ORDER = ("regression", "change", "improvement", "new", "gone")


@dataclass(frozen=True)
class Change:
    test: str
    figure: str
    old: Any
    new: Any
    kind: str  # one of ORDER
    deterministic: bool


def load(path: Path, source: str = "--cold-compile-baseline") -> dict[str, dict[str, Any]]:
    """The records of a --cold-compile-report file; a UsageError naming source and path."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise pytest.UsageError(f"{source}: cannot read {str(path)!r} "
                                f"({exc.strerror or exc})") from None
    except ValueError as exc:
        raise pytest.UsageError(f"{source}: {str(path)!r} is not JSON ({exc})") from None
    if not isinstance(data, dict) or not all(
        isinstance(r, dict) and "outcome" in r for r in data.values()
    ):
        raise pytest.UsageError(f"{source}: {str(path)!r} is not a --cold-compile-report file "
                                "(expected a JSON object of test records keyed by node id)")
    return data


def _timing_moved(old: Any, new: Any, tolerance: tuple[float, float]) -> bool:
    fraction, seconds = tolerance
    return abs(new - old) > max(abs(old) * fraction, seconds)


def compare_one(
    test: str, old: dict[str, Any], new: dict[str, Any], tolerance: tuple[float, float]
) -> list[Change]:
    changes = []
    if old.get("outcome") != new.get("outcome"):
        kind = "regression" if new.get("outcome") in ("failed", "error") else "change"
        changes.append(Change(test, "outcome", old.get("outcome"), new.get("outcome"), kind,
                              False))
    for figure, more in DETERMINISTIC.items():
        before, after = old.get(figure), new.get(figure)
        if before is None or after is None or before == after:
            continue  # a child that died recorded nothing to compare
        kind = "change"
        if more == "regression" and isinstance(before, int) and isinstance(after, int):
            kind = "regression" if after > before else "improvement"
        changes.append(Change(test, figure, before, after, kind, True))
    for figure in TIMINGS:
        before, after = old.get(figure), new.get(figure)
        if not isinstance(before, (int, float)) or not isinstance(after, (int, float)):
            continue
        if _timing_moved(before, after, tolerance):
            kind = "regression" if after > before else "improvement"
            changes.append(Change(test, figure, before, after, kind, False))
    return changes


def compare(
    old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]], tolerance: tuple[float, float]
) -> list[Change]:
    """Every change from old to new, regressions first, deterministic ones before timings."""
    changes: list[Change] = []
    for test in sorted(set(old) | set(new)):
        if test not in old:
            changes.append(Change(test, "test", None, new[test].get("outcome"), "new", False))
        elif test not in new:
            changes.append(Change(test, "test", old[test].get("outcome"), None, "gone", False))
        else:
            changes += compare_one(test, old[test], new[test], tolerance)
    return sorted(changes, key=lambda c: (ORDER.index(c.kind), not c.deterministic, c.test))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _cells(old: Any, new: Any) -> tuple[str, str]:
    """A list figure (the launches) shows only what left and what came."""
    if isinstance(old, list) and isinstance(new, list):
        return ("; ".join(x for x in old if x not in new) or "-",
                "; ".join(x for x in new if x not in old) or "-")
    return _cell(old), _cell(new)


def table(changes: list[Change]) -> list[str]:
    rows = [["kind", "test", "figure", "baseline", "now"]] + [
        [c.kind + (" (timing)" if c.figure in TIMINGS else ""), c.test, c.figure,
         *_cells(c.old, c.new)]
        for c in changes
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    widths[1] = min(widths[1], 60)

    def fmt(row: list[str]) -> str:
        test = row[1] if len(row[1]) <= widths[1] else "..." + row[1][-(widths[1] - 3):]
        cells = [row[0].ljust(widths[0]), test.ljust(widths[1]), row[2].ljust(widths[2]),
                 row[3].rjust(widths[3]), row[4].rjust(widths[4])]
        return "  ".join(cells).rstrip()

    return [fmt(r) for r in rows]


class BaselineGate:
    """Compares at the session's end, before the JSON report is written, and says so after."""

    def __init__(self, config: pytest.Config, path: Path) -> None:
        self.config = config
        self.path = path
        self.old = load(path)
        self.changes: list[Change] | None = None

    def pytest_coldcompile_records_done(
        self, session: pytest.Session, records: dict[str, dict[str, Any]]
    ) -> None:
        g = settings.settings(self.config)
        self.changes = compare(self.old, records, g.tolerance)
        for test, record in records.items():
            record["baseline"] = [asdict(c) for c in self.changes if c.test == test]
        if g.strict and self.deterministic() and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def deterministic(self) -> list[Change]:
        return [c for c in self.changes or [] if c.deterministic]

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.changes is None:
            return
        tr = terminalreporter
        g = settings.settings(self.config)
        fraction, seconds = g.tolerance
        tr.write_sep("=", f"cold compile baseline: {len(self.changes)} changes against "
                          f"{self.path} (timings beyond {fraction:.0%} and {seconds:g} s)")
        if self.changes:
            for line in table(self.changes):
                tr.write_line(line)
        fixed = self.deterministic()
        if g.strict and fixed:
            tr.write_line(
                f"cold-compile: --cold-compile-baseline-strict: {len(fixed)} deterministic "
                f"changes (graphs, admissions, fallbacks) against {self.path}; failing the "
                "session", red=True, bold=True)


def register(config: pytest.Config) -> None:
    """In the pytest process that writes the report (not in xdist workers, not in children)."""
    path = settings.settings(config).baseline_path
    if path is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(BaselineGate(config, path), "coldcompile-baseline")
