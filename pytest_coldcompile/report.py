"""What cold runs report: figures as user properties (hence JUnit XML), the terminal summary
table, and the ``--cold-compile-report`` JSON file.

Figures travel on the teardown report's user_properties, so an xdist controller sees them too.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_coldcompile.devices import cuda
from pytest_coldcompile.gates import debug
from pytest_coldcompile.prove import summary as proof_summary

PREFIX = "cold_compile."
TIMINGS = ("selection_s", "tracing_s", "inductor_s", "compile_s")
"""The compile-time breakdown: selection (launch validation), tracing (Dynamo, AOTAutograd),
Inductor, and their compile-window total; ``total_s`` is the child's wall time."""
FIGURES = (
    *TIMINGS,
    "frames",
    "forward_graphs",
    "backward_graphs",
    "probed",
    "admitted",
    "fallback",
    "max_admitted_shared",
    "warmed_ahead",
)
DEVICE_KEYS = ("smem_limit", "smem_device", "emulated_device", "emulation")
"""The device a cold test ran as: its shared-memory cap in bytes, the named device that cap is
(if one's), the emulated device, and the emulation's kernels (``devices.emulate``)."""
RECORD_KEYS = ("mode", "mode_reason", "total_s", *FIGURES, "selectors", "launches",
               *DEVICE_KEYS)
"""The keys of every test's record in the JSON report, besides its outcome."""
GATE_KEYS = ("budget_s", "budget_exceeded", "warm", "baseline")
"""The CI gates' keys of every record (docs/ci-gates.md), null where a gate is off."""
COLUMNS = (  # (heading, key)
    ("total s", "total_s"),
    ("compile s", "compile_s"),
    ("select s", "selection_s"),
    ("trace s", "tracing_s"),
    ("inductor s", "inductor_s"),
    ("frames", "frames"),
    ("fwd", "forward_graphs"),
    ("bwd", "backward_graphs"),
    ("probed", "probed"),
    ("admitted", "admitted"),
    ("fallback", "fallback"),
    ("max smem", "max_admitted_shared"),
)


def properties(
    mode: str, reason: str, summary: dict[str, Any] | None, total_s: float | None = None
) -> list[tuple[str, Any]]:
    """The user properties a cold test's teardown report carries; total_s: the child's wall
    time, start included (None when it never ran)."""
    props: list[tuple[str, Any]] = [(PREFIX + "mode", mode), (PREFIX + "mode_reason", reason)]
    if total_s is not None:
        props.append((PREFIX + "total_s", round(float(total_s), 3)))
    if summary:
        props += [(PREFIX + key, summary.get(key)) for key in FIGURES]
        if summary.get("selectors"):
            props.append((PREFIX + "selectors", ",".join(summary["selectors"])))
        if summary.get("launches") is not None:
            props.append((PREFIX + "launches", summary["launches"]))
        props += [(PREFIX + key, summary[key]) for key in DEVICE_KEYS
                  if summary.get(key) is not None]
    return props


def _outcome(report: pytest.TestReport, before: str | None) -> str:
    xfail = hasattr(report, "wasxfail")
    if report.when == "setup":
        return "error" if report.failed else "skipped" if report.skipped else "passed"
    if report.when == "call":
        if report.skipped:
            return "xfailed" if xfail else "skipped"
        if report.passed:
            return "xpassed" if xfail else "passed"
        return "failed"
    if report.failed and before not in ("failed", "error"):  # teardown
        return "error"
    return before or "passed"


class ColdReporter:
    """Collects cold tests' figures from logged reports; prints and writes them at the end."""

    def __init__(self, config: pytest.Config, report_path: Path | None) -> None:
        self.config = config
        self.report_path = report_path
        self.tests: dict[str, dict[str, Any]] = {}
        self._outcomes: dict[str, str] = {}
        self.debugger_skipped = 0  # failing cold tests that --pdb/--trace could not stop in

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        self._outcomes[nodeid] = _outcome(report, self._outcomes.get(nodeid))
        if report.when != "teardown":
            return
        final = self._outcomes.pop(nodeid)
        figures = {
            name[len(PREFIX) :]: value
            for name, value in report.user_properties
            if isinstance(name, str) and name.startswith(PREFIX)
        }
        figures = proof_summary.nest(figures)  # a proof item's verdict, under "proof"
        if figures:
            # One schema for every record: a child that died reported no figures (null).
            self.tests[nodeid] = {
                "outcome": final, **dict.fromkeys(RECORD_KEYS + GATE_KEYS), **figures
            }
            if final in ("failed", "error") and _debugger_requested(self.config):
                if not debug.handed_off(self.config):  # else debugged in its child
                    self.debugger_skipped += 1

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.tests:
            return
        tr = terminalreporter
        if self.debugger_skipped:
            tr.write_line(debugger_line(self.config, self.debugger_skipped), yellow=True)
        tr.write_sep("=", f"cold compile summary: {len(self.tests)} cold tests")
        for (mode, reason), count in sorted(
            Counter(
                (t.get("mode", "?"), t.get("mode_reason", "")) for t in self.tests.values()
                if t.get("mode") is not None or "proof" not in t  # a proof that ran no child
            ).items()
        ):
            tr.write_line(f"{count} run as {mode} ({reason})")
        for line in table(self.tests):
            tr.write_line(line)
        for line in emulation_lines(self.tests):
            tr.write_line(line)
        tr.write_line(cuda_state_line())
        proofs = proof_summary.proofs(self.tests)
        if proofs:
            tr.write_sep("=", proof_summary.title(proofs))
            for line in proof_summary.lines(proofs):
                tr.write_line(line)
        if self.report_path is not None:
            tr.write_line(f"cold compile report written to {self.report_path}")

    def pytest_sessionfinish(self) -> None:
        if self.report_path is None or hasattr(self.config, "workerinput"):
            return  # xdist workers: the controller writes it
        self.report_path.parent.mkdir(parents=True, exist_ok=True)
        self.report_path.write_text(json.dumps(self.tests, indent=2, sort_keys=True) + "\n")


def _debugger_requested(config: pytest.Config) -> bool:
    return bool(config.getoption("usepdb", False) or config.getoption("trace", False))


def debugger_line(config: pytest.Config, failing: int) -> str:
    """The one line saying that the debugger options did not apply to cold children."""
    flag = "--pdb" if config.getoption("usepdb", False) else "--trace"
    tests = "test was" if failing == 1 else "tests were"
    return (
        f"cold-compile: {flag} cannot stop inside a cold child; {failing} failing cold "
        f"{tests} reported instead; rerun without --cold-compile to debug"
    )


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def table(tests: dict[str, dict[str, Any]]) -> list[str]:
    headings = ["test", "outcome", *(h for h, _ in COLUMNS)]
    rows = [
        [nodeid, t.get("outcome", "?"), *(_cell(t.get(key)) for _, key in COLUMNS)]
        for nodeid, t in sorted(tests.items())
    ]
    widths = [max(len(r[i]) for r in [headings, *rows]) for i in range(len(headings))]
    widths[0] = min(widths[0], 60)

    def fmt(row: list[str]) -> str:
        first = row[0] if len(row[0]) <= widths[0] else "..." + row[0][-(widths[0] - 3) :]
        cells = [first.ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(row[2:], widths[2:], strict=True)]
        return "  ".join(cells).rstrip()

    return [fmt(headings), *(fmt(r) for r in rows)]


def emulation_lines(tests: dict[str, dict[str, Any]]) -> list[str]:
    """A line for each kernel an emulated device refused, or whose footprint there differs
    from the real GPU's: "fits here, would not fit there" and the other way round."""
    lines = []
    for nodeid, test in sorted(tests.items()):
        emulation = test.get("emulation")
        if not isinstance(emulation, dict):
            continue
        for k in emulation.get("kernels", []):
            there, here = k.get("there") or {}, k.get("here")
            if k.get("outcome") == "fits" and not k.get("differs"):
                continue
            verdict = ("fits" if k.get("outcome") == "fits"
                       else f"out of {k.get('resource')} ({k.get('required')} > "
                            f"{k.get('available')})")
            on_gpu = (f"; here (sm_{here['arch']}) {here['shared']} B, {here['registers']} "
                      "registers" if here else "")
            lines.append(
                f"emulated {emulation.get('device')} (sm_{emulation.get('arch')}): {nodeid}: "
                f"{k.get('kernel')} there {there.get('shared')} B, {there.get('registers')} "
                f"registers: {verdict}{on_gpu}")
    return lines


def cuda_state_line() -> str:
    """What this pytest process did with CUDA; the plugin itself never initializes it."""
    def said(flag: bool) -> str:
        return "yes" if flag else "no"

    loaded = cuda.cuda_driver_loaded()
    return (
        f"pytest process: torch.cuda initialized: {said(cuda.torch_cuda_initialized())}; "
        f"CUDA driver (libcuda) loaded: {said(loaded)}, "
        f"initialized: {said(loaded and cuda.cuda_driver_initialized())}"
    )
