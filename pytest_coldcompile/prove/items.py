"""The proof items of --cold-compile-prove: one ``TEST[prove]`` item after each test marked
guards, run in the pytest process; it starts the cold children (the unmutated run where this
process did not run the test, the bug-active run, the warm leg) and turns their verdicts
into its own outcome and report properties.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_coldcompile import interop, item_options, options
from pytest_coldcompile.isolation.engine import ENGINE_KEY
from pytest_coldcompile.prove import marker, summary
from pytest_coldcompile.prove.child import PROOF_RECORD
from pytest_coldcompile.record import PREFIX

PROOF_PREFIX = PREFIX + "proof."
PROVER_KEY = pytest.StashKey["Prover"]()
# Markers that say how the original runs, not which tests these are: the proof item runs in
# this process and decides its own outcome.
_NOT_COPIED = frozenset({"cold_compile", "parametrize", "usefixtures", "xfail", "timeout",
                         "filterwarnings"})


def proof_name(original: pytest.Item) -> str:
    """test_x -> test_x[prove]; test_x[a-b] -> test_x[a-b-prove]."""
    name = original.name
    if name.endswith("]") and "[" in name:
        return name[:-1] + "-prove]"
    return name + "[prove]"


class ProofItem(pytest.Item):
    """Proves that its original test, marked guards, fails as it should with the bug active."""

    def __init__(self, *, original: pytest.Item, guards: marker.Guards, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.original = original
        self.guards = guards
        self.stash[item_options.PROOF_ITEM_KEY] = True
        for mark in original.own_markers:
            if mark.name not in _NOT_COPIED:  # -m selection, skips with their usual reasons
                self.own_markers.append(mark)
                self.keywords[mark.name] = mark
        self.user_properties.append((PROOF_PREFIX + "guards", original.nodeid))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        path, lineno, _ = self.original.reportinfo()
        return path, lineno, self.name

    def runtest(self) -> None:
        prover = self.config.stash[PROVER_KEY]
        _run(self, prover.outcomes.get(self.original.nodeid))


@dataclass
class Outcome:
    """How a run of the original ended: status passed, failed or skipped; in which phase;
    the skip reason or failure text."""

    status: str = "passed"
    phase: str = ""
    text: str = ""

    def add(self, report: pytest.TestReport) -> None:
        if report.failed and self.status != "failed":
            self.status, self.phase, self.text = "failed", report.when, report.longreprtext
        elif report.skipped and self.status == "passed":
            self.status, self.phase = "skipped", report.when
            longrepr = report.longrepr
            reason = getattr(report, "wasxfail", None)
            if reason is None and isinstance(longrepr, tuple) and len(longrepr) == 3:
                reason = longrepr[2]
            self.text = str(reason or report.longreprtext)

    @classmethod
    def of(cls, reports: list[pytest.TestReport]) -> Outcome:
        out = cls()
        for report in reports:
            out.add(report)
        return out


def _engine(config: pytest.Config) -> Any:
    engine = config.stash.get(ENGINE_KEY, None)
    if engine is None:
        raise RuntimeError("pytest-coldcompile: no cold engine runs in this process")
    return engine


def _cold_run(item: ProofItem, leg: str | None) -> tuple[list[pytest.TestReport], Any]:
    extra = None if leg is None else {"prove": {"leg": leg}}
    if hasattr(item.config.hook, "pytest_timeout_cancel_timer"):
        # pytest-timeout bounds each child (the outer limit below), not this in-process item.
        item.config.hook.pytest_timeout_cancel_timer(item=item)
    outer_limit = interop.pytest_timeout_limit(item.original)
    return _engine(item.config).run(item.original, outer_limit, None, extra)


def _verdict_of(reports: list[pytest.TestReport], result: Any) -> dict[str, Any]:
    """The child's proof record; where it wrote none (killed, crashed, timed out, its machinery
    failed), what its reports say."""
    record = result.last(PROOF_RECORD) or {}
    failed = Outcome.of(reports)
    if record.get("provisional"):  # the child died bringing the bug back
        first = (failed.text.strip().splitlines() or [""])[0]
        return {"verdict": "broken", "message": f"{record['message']}: {first}"}
    if record.get("verdict") is not None:
        return dict(record)
    if result.error is not None or result.refused is not None or not result.reports:
        return {"verdict": "error", "message": "the bug-active cold child could not run the "
                f"test: {(result.refused or failed.text or result.error or '').strip()}"}
    if failed.status == "failed":  # a crash or a timeout: the bug did not raise what it must
        return {"verdict": "vacuous", "message": failed.text.strip().splitlines()[0],
                "detail": "the cold child wrote no verdict; see its report"}
    return {"verdict": "error", "message": "the bug-active cold child wrote no verdict"}


def _failure_text(reports: list[pytest.TestReport]) -> str | None:
    for report in reports:
        if report.failed:
            return report.longreprtext
    return None


def _figures(reports: list[pytest.TestReport]) -> list[tuple[str, Any]]:
    """The cold figures of the bug-active child (mode, timings, counts), for the JSON report."""
    if not reports:
        return []
    return [(k, v) for k, v in reports[-1].user_properties
            if isinstance(k, str) and k.startswith(PREFIX)]


def message(guards: marker.Guards, record: dict[str, Any]) -> str:
    """One sentence saying what the bug-active run showed."""
    verdict = record["verdict"]
    exc = f"{record.get('exception')}: {record.get('message', '')}".strip()
    at = f" at {record['location']}" if record.get("location") else ""
    if verdict == "caught":
        text = f"caught: the bug made the test fail with {exc}{at}"
    elif verdict == "vacuous" and record.get("exception"):
        text = (f"vacuous: with the bug active the test failed with {exc}{at}, not with "
                f"{guards.describe_raises()}")
    elif verdict == "vacuous":  # no exception to name: a crash, a timeout
        text = (f"vacuous: with the bug active, not {guards.describe_raises()}: "
                f"{record.get('message', '')}")
    elif verdict == "missed":
        text = f"missed: the test passed with the bug active ({guards.describe_bug()})"
    elif verdict == "broken" and record.get("exception"):
        text = f"broken: bringing the bug back ({guards.describe_bug()}) failed: {exc}{at}"
    elif verdict == "broken":
        text = f"broken: bringing the bug back ({guards.describe_bug()}): {record['message']}"
    elif verdict == "skipped":
        text = f"skipped with the bug active: {record.get('message', '')}"
    else:
        text = f"{verdict}: {record.get('message', '')}"
    if record.get("detail"):
        text += f" ({record['detail']})"
    return text


def _warm_leg(item: ProofItem) -> tuple[str, str]:
    """(masked, sentence) of the warm leg: the warm-up, then the test, the bug active."""
    reports, result = _cold_run(item, "warm")
    record = _verdict_of(reports, result)
    warm = marker.describe(item.guards.masked_by)
    verdict = record["verdict"]
    if verdict == "missed":
        return "masked", f"masked: after {warm}() the test passed with the bug active"
    if verdict in ("caught", "vacuous"):
        failure = _failure_text(reports)
        if failure:
            item.add_report_section("call", "warm leg", failure)
        return "not masked", (f"not masked: after {warm}() the test still failed with the bug "
                              f"active ({message(item.guards, record)})")
    return verdict, f"warm leg {message(item.guards, record)}"


def _run(item: ProofItem, baseline: Outcome | None) -> None:
    props = item.user_properties
    if baseline is None:  # not run here (xdist, -k prove, another order): run it now, cold
        reports, _ = _cold_run(item, None)
        baseline = Outcome.of(reports)
    if baseline.status != "passed":
        said = f"{item.original.nodeid} {baseline.status} ({baseline.phase})"
        if baseline.status == "skipped":
            props += [(PROOF_PREFIX + "verdict", "skipped"),
                      (PROOF_PREFIX + "message", f"{said}: {baseline.text}")]
            pytest.skip(f"unproven: {said}: {baseline.text}")
        text = f"unproven: without the bug {said}; a proof counts only where it passes"
        props += [(PROOF_PREFIX + "verdict", "unproven"), (PROOF_PREFIX + "message", text)]
        item.add_report_section("call", "unmutated run", baseline.text)
        pytest.fail(text, pytrace=False)
    reports, result = _cold_run(item, "cold")
    props += _figures(reports)
    record = _verdict_of(reports, result)
    text = message(item.guards, record)
    for key in ("verdict", "exception", "message", "location", "chain", "detail"):
        if record.get(key) is not None:
            props.append((PROOF_PREFIX + key, record[key]))
    failure = _failure_text(reports)
    if failure:
        item.add_report_section("call", "bug-active run", failure)
    if record["verdict"] == "caught" and item.guards.masked_by is not None:
        masked, said = _warm_leg(item)
        props.append((PROOF_PREFIX + "masked", masked))
        props.append((PROOF_PREFIX + "masked_message", said))
        text += "; " + said
        if masked != "masked":
            pytest.fail(text, pytrace=False)
    item.add_report_section("call", "proof", text)
    if record["verdict"] == "skipped":
        pytest.skip(text)
    if record["verdict"] != "caught":
        pytest.fail(text, pytrace=False)


def originals(items: list[pytest.Item]) -> list[pytest.Item]:
    """The originals of the proof items among items: a proof runs them cold, through the
    engine, also where -k deselected them."""
    return [it.original for it in items if isinstance(it, ProofItem)]


class Prover:
    """The pytest process's side of --cold-compile-prove: checks guards marks at collection,
    adds the proof items, and remembers how each original ended."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.outcomes: dict[str, Outcome] = {}
        self.originals: set[str] = set()

    @pytest.hookimpl(wrapper=True)
    def pytest_pycollect_makeitem(self, collector: pytest.Collector) -> Generator[None, Any, Any]:
        """Each test marked guards is collected with its proof item right after it."""
        made = yield
        if made is None or isinstance(made, pytest.Collector):
            return made
        out: list[Any] = []
        for item in made if isinstance(made, list) else [made]:
            out.append(item)
            if not isinstance(item, pytest.Item) or not item.get_closest_marker(marker.NAME):
                continue
            try:
                guards = marker.read(item)
            except marker.GuardsError as exc:  # a collection error of the test's file
                raise collector.CollectError(str(exc)) from None
            out.append(ProofItem.from_parent(collector, name=proof_name(item),
                                             original=item, guards=guards))
            self.originals.add(item.nodeid)
        return out

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.originals:
            return
        if report.when == "setup" or getattr(report, "outcome", "") == "rerun":
            self.outcomes.pop(report.nodeid, None)  # a new attempt
        if getattr(report, "outcome", "") == "rerun":
            return
        self.outcomes.setdefault(report.nodeid, Outcome()).add(report)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        if isinstance(item, ProofItem) and call.when == "setup" and report.skipped:
            # A proof skipped before it ran (requires_cuda, skipif): listed with the reason.
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
            reason = str(reason).removeprefix("Skipped: ")
            item.user_properties += [(PROOF_PREFIX + "verdict", "skipped"),
                                     (PROOF_PREFIX + "message", str(reason))]
        return report

    def pytest_coldcompile_engine_items(self, session: pytest.Session) -> list[pytest.Item]:
        return originals(session.items)

    @pytest.hookimpl(tryfirst=True)
    def pytest_coldcompile_terminal_summary(
        self, terminalreporter: Any, records: dict[str, dict[str, Any]]
    ) -> None:
        proofs = summary.proofs(records)
        if proofs:
            terminalreporter.write_sep("=", summary.title(proofs))
            for line in summary.lines(proofs):
                terminalreporter.write_line(line)

    def pytest_report_header(self) -> list[str]:
        return ["cold-compile: --cold-compile-prove: each test marked guards is run again, "
                "cold, with its bug active, as TEST[prove]"]


def register(config: pytest.Config) -> None:
    """The prover in the pytest process, with --cold-compile-prove."""
    s = options.settings(config)
    if s.prove and not s.child_spec:
        prover = Prover(config)
        config.stash[PROVER_KEY] = prover
        config.pluginmanager.register(prover, "coldcompile-prove")
