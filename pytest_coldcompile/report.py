"""What cold runs report: the terminal summary table and the ``--cold-compile-report`` JSON
file, in the controller, from the records on each cold test's teardown report (``record``);
JUnit XML gets the same fields as user properties. Other features add their sections and keys
through the plugin's hooks.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_coldcompile import options
from pytest_coldcompile.devices import cuda
from pytest_coldcompile.record import GATE_KEYS, RECORD_KEYS, from_properties

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
    """Collects cold tests' records from logged reports; prints and writes them at the end."""

    def __init__(self, config: pytest.Config, report_path: Path | None) -> None:
        self.config = config
        self.report_path = report_path
        self.tests: dict[str, dict[str, Any]] = {}
        self._outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        self._outcomes[nodeid] = _outcome(report, self._outcomes.get(nodeid))
        if report.when != "teardown":
            return
        final = self._outcomes.pop(nodeid)
        fields = from_properties(report.user_properties)
        if fields:
            # One schema for every record: a child that died reported no figures (null).
            record = {"outcome": final, **dict.fromkeys(RECORD_KEYS + GATE_KEYS), **fields}
            self.tests[nodeid] = record
            self.config.hook.pytest_coldcompile_record(nodeid=nodeid, record=record)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.tests:
            return
        tr = terminalreporter
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
        self.config.hook.pytest_coldcompile_terminal_summary(
            terminalreporter=tr, records=self.tests, config=self.config)
        if self.report_path is not None:
            tr.write_line(f"cold compile report written to {self.report_path}")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput"):
            return  # xdist workers: the controller has the records
        self.config.hook.pytest_coldcompile_records_done(session=session, records=self.tests)
        if self.report_path is None:
            return
        self.report_path.parent.mkdir(parents=True, exist_ok=True)
        self.report_path.write_text(json.dumps(self.tests, indent=2, sort_keys=True) + "\n")


def register(config: pytest.Config) -> None:
    """In the pytest process and the xdist controller, not in cold children."""
    s = options.settings(config)
    if not s.child_spec:
        config.pluginmanager.register(ColdReporter(config, s.report_path), "coldcompile-report")


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
