"""Reports of a cold test: read back from the child's record file, and made up for children
that crashed, timed out, or whose machinery broke.

They are pytest's own TestReport objects, so the terminal, JUnit XML and xdist treat them
like any other.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_coldcompile import interop, records
from pytest_coldcompile.isolation.forkserver import ChildExit

# The last line of a child's traceback when a launch selector failed to load, subscribe or
# reset while the child was being prepared for its test.
_SELECTOR_ERROR = re.compile(r"^pytest_coldcompile\.selectors\.SelectorError: (.+)$",
                             re.MULTILINE)


@dataclass
class ChildResult:
    reports: list[pytest.TestReport] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    error: str | None = None  # traceback of the child's own machinery
    exit: dict[str, Any] | None = None  # the test called pytest.exit()
    interrupted: bool = False
    warnings: list[warnings.WarningMessage] = field(default_factory=list)
    # (what, name, value): record_xml_attribute / record_testsuite_property calls in the child
    junitxml: list[tuple[str, str, str]] = field(default_factory=list)
    refused: str | None = None  # a re-collecting child found another item under the node id
    # The records of other types, by type, in order: what a feature's child-side plugin wrote
    # for its parent-side one (prove mode's verdict, the warm check's cache counters).
    other: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def last(self, kind: str) -> dict[str, Any] | None:
        """The last record of a feature's type, None where the child wrote none."""
        found = self.other.get(kind)
        return found[-1] if found else None


def _read(test_dir: str, name: str) -> str:
    try:
        with open(os.path.join(test_dir, name), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def read_records(config: pytest.Config, item: pytest.Item, test_dir: str) -> ChildResult:
    result = ChildResult()
    for record in records.read_records(test_dir):
        kind = record.get("type")
        if kind == "report":
            report = config.hook.pytest_report_from_serializable(config=config, data=record["data"])
            # Same item, so the same id: a spawned child computes it against the same rootdir,
            # but the parent's own is the one every other plugin knows.
            report.nodeid = item.nodeid
            report.location = item.location
            result.reports.append(report)
        elif kind == "summary":
            result.summary = record
        elif kind == "error":
            result.error = record.get("traceback", "")
        elif kind == "exit":
            result.exit = record
        elif kind == "interrupt":
            result.interrupted = True
        elif kind == "warning":
            result.warnings.append(_warning(record))
        elif kind == "junitxml":
            result.junitxml.append((record["what"], record["name"], record["value"]))
        elif kind == "refused":
            result.refused = str(record.get("message", ""))
        else:  # a feature's own record (a proof's verdict, the warm check's counters)
            result.other.setdefault(str(kind), []).append(record)
    replay_junitxml(config, item, result)
    return result


def replay_junitxml(config: pytest.Config, item: pytest.Item, result: ChildResult) -> None:
    """Hand the child's JUnit XML attributes and suite properties to this process's LogXML.

    Before the reports are logged: LogXML keeps attributes set on a test's node reporter
    ahead of its first report, as in-process. Without a LogXML here (no --junitxml, or an
    xdist worker) they go where an in-process call sends them: nowhere.
    """
    if not result.junitxml:
        return
    xml = interop.junit_xml(config)
    if xml is None:
        return
    for what, name, value in result.junitxml:
        if what == "attribute":
            xml.node_reporter(item.nodeid).add_attribute(name, value)
        else:
            xml.add_global_property(name, value)


def _category(name: str) -> type[Warning]:
    module, _, attr = name.rpartition(".")
    found = getattr(sys.modules.get(module), attr, None)  # never import for this
    return found if isinstance(found, type) and issubclass(found, Warning) else UserWarning


def _warning(record: dict[str, Any]) -> warnings.WarningMessage:
    category = _category(str(record.get("category", "")))
    try:
        message: Warning = category(record.get("message", ""))
    except Exception:
        category = UserWarning
        message = UserWarning(record.get("message", ""))
    return warnings.WarningMessage(
        message, category, record.get("filename", "?"), record.get("lineno", 0)
    )


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _where(item: pytest.Item) -> str:
    path, lineno, _ = item.location
    return f"{path}:{(lineno or 0) + 1}"


def next_phase(reports: list[pytest.TestReport]) -> str:
    done = {r.when: r for r in reports}
    if "setup" not in done:
        return "setup"
    if done["setup"].passed and "call" not in done:
        return "call"
    return "teardown"


def make_report(
    item: pytest.Item,
    when: str,
    outcome: str,
    longrepr: Any,
    sections: list[tuple[str, str]] | None = None,
    duration: float = 0.0,
    **extra: Any,
) -> pytest.TestReport:
    return pytest.TestReport(
        nodeid=item.nodeid,
        location=item.location,
        keywords=dict.fromkeys(item.keywords, 1),
        outcome=outcome,  # type: ignore[arg-type]
        longrepr=longrepr,
        when=when,  # type: ignore[arg-type]
        sections=sections or [],
        duration=duration,
        user_properties=list(item.user_properties),
        **extra,
    )


def child_output(test_dir: str, when: str | None) -> list[tuple[str, str]]:
    """Report sections with what the child printed that no finished report holds."""
    sections = []
    if when is not None:
        for name, title in ((records.CAPTURED_OUT, "stdout"), (records.CAPTURED_ERR, "stderr")):
            text = _read(test_dir, name)
            if text:
                sections.append((f"Captured {title} {when}", text))
    for name, title in ((records.RAW_OUT, "stdout"), (records.RAW_ERR, "stderr")):
        text = _read(test_dir, name)
        if text:
            sections.append((f"Cold child {title} (uncaptured)", text))
    return sections


def problem(
    item: pytest.Item,
    result: ChildResult,
    ended: ChildExit,
    timeout: float | None,
    timeout_source: str,
    test_dir: str,
) -> str | None:
    """Why the child's own reports cannot stand alone, or None when they can."""
    if ended.timed_out:
        return (
            f"{_where(item)}: timeout: the cold child ran longer than {timeout:g} s "
            f"({timeout_source}); its process group was killed"
        )
    if result.refused is not None:
        return f"{_where(item)}: {result.refused}"
    if result.error is not None:
        selector = _SELECTOR_ERROR.search(result.error)
        if selector is not None:  # the user's selector, not the plugin, failed the set-up
            return f"{_where(item)}: {selector.group(1)}\n{result.error}"
        return "the cold child's own machinery failed (not the test itself):\n" + result.error
    if ended.signal is not None:
        return (
            f"{_where(item)}: running the test CRASHED with signal {ended.signal} "
            f"({signal_name(ended.signal)})"
        )
    if _exited_early(result):
        by = (
            " (pytest-timeout's thread method ended it: Timeout)"
            if _ended_by_pytest_timeout(test_dir)
            else ""
        )
        return (
            f"{_where(item)}: the cold child EXITED with status {ended.returncode} "
            f"before it reported the whole test{by}"
        )
    return None


def _exited_early(result: ChildResult) -> bool:
    """The child ended on its own before it reported the test's teardown."""
    finished = any(r.when == "teardown" for r in result.reports)
    return not finished and result.exit is None and not result.interrupted


def _ended_by_pytest_timeout(test_dir: str) -> bool:
    # pytest-timeout's thread method dumps the stacks, then os._exit(1)s the child.
    streams = (records.RAW_OUT, records.RAW_ERR, records.CAPTURED_OUT, records.CAPTURED_ERR)
    printed = "".join(_read(test_dir, name) for name in streams)
    return re.search(r"\+{3,} Timeout \+{3,}", printed) is not None


def _crashed(result: ChildResult, ended: ChildExit, test_dir: str) -> bool:
    """The test's process died under it, no exception to judge: killed by a signal, or it
    exited (os._exit, a library's exit) before it reported the test. Not a timeout, of the
    plugin or of pytest-timeout, and not a failure of the plugin's own machinery."""
    if ended.timed_out or result.error is not None or result.refused is not None:
        return False
    if ended.signal is not None:
        return True
    return _exited_early(result) and not _ended_by_pytest_timeout(test_dir)


def _evaluate_xfail(item: pytest.Item) -> Any:
    """The triggered xfail of item as pytest evaluates it (condition, reason, raises, run,
    strict), or None. pytest's evaluator is private, so a fallback covers its absence."""
    try:
        from _pytest.skipping import evaluate_xfail_marks
    except ImportError:
        return _evaluate_xfail_fallback(item)
    try:
        return evaluate_xfail_marks(item)
    except Exception:
        # The child evaluated the same marks in its setup and reported the bad condition.
        return None


@dataclass(frozen=True)
class _Xfail:
    reason: str
    run: bool
    strict: bool
    raises: Any


def _evaluate_xfail_fallback(item: pytest.Item) -> _Xfail | None:
    """For a pytest without _pytest.skipping.evaluate_xfail_marks: the same rules, shortened."""
    for mark in item.iter_markers(name="xfail"):
        kw = mark.kwargs
        made = _Xfail(
            kw.get("reason", ""), kw.get("run", True), bool(kw.get("strict")), kw.get("raises")
        )
        conditions = (kw["condition"],) if "condition" in kw else mark.args
        if not conditions:
            return made
        for condition in conditions:
            if isinstance(condition, str):  # evaluated as pytest does, in the module's globals
                namespace = {"os": os, "sys": sys, "config": item.config}
                namespace.update(getattr(getattr(item, "module", None), "__dict__", {}))
                try:
                    condition = eval(condition, namespace)
                except Exception:
                    return None
            if condition:
                return made
    return None


def _xfail_instead(item: pytest.Item, text: str) -> dict[str, Any] | None:
    """A crash under a triggered xfail is its expected failure, as pytest-forked reports it.

    As in pytest: --runxfail and a false condition mean no xfail; ``raises=`` names exception
    types, which a crash (a signal or an early exit, no exception) is not, so it is a failure
    there; strict concerns passing tests only, so it changes nothing for a crash.
    """
    if item.config.getoption("runxfail", False):
        return None
    xfailed = _evaluate_xfail(item)
    if xfailed is None:
        return None
    first = text.splitlines()[0]
    if xfailed.raises is not None:
        return {
            "outcome": "failed",
            "note": f"xfail(raises={xfailed.raises!r}) expects an exception, not a crash",
        }
    return {"outcome": "skipped", "wasxfail": f"{xfailed.reason} ({first})".strip()}


def complete(
    item: pytest.Item,
    result: ChildResult,
    ended: ChildExit,
    test_dir: str,
    timeout: float | None,
    timeout_source: str,
) -> list[pytest.TestReport]:
    """The child's reports, plus a failure for the phase it did not finish, plus a teardown."""
    reports = list(result.reports)
    text = problem(item, result, ended, timeout, timeout_source, test_dir)
    if text is None:
        if result.exit is None and not result.interrupted:
            extra = child_output(test_dir, None)
            if extra and reports:
                reports[-1].sections.extend(extra)
        return reports
    when = next_phase(reports)
    longrepr: Any = text
    outcome = "failed"
    fields: dict[str, Any] = {}
    if _crashed(result, ended, test_dir):
        xfail = _xfail_instead(item, text)
        if xfail is not None and xfail["outcome"] == "skipped":
            outcome = xfail["outcome"]
            fields["wasxfail"] = xfail["wasxfail"]
            longrepr = None
        elif xfail is not None:
            longrepr = f"{text}\n{xfail['note']}"
    reports.append(
        make_report(
            item, when, outcome, longrepr, child_output(test_dir, when), ended.seconds, **fields
        )
    )
    if when != "teardown":
        reports.append(make_report(item, "teardown", "passed", None))
    return reports


def fail_passed_call(
    item: pytest.Item, reports: list[pytest.TestReport], message: str
) -> None:
    """Turn the passed call report among reports into a failure saying message, as
    pytest.fail(message, pytrace=False) in the body would (so -rA, JUnit and xdist show it); the
    child's output and figures are kept. A failure, a skip or an xfail stays as it is."""
    at = next((i for i, r in enumerate(reports) if r.when == "call"), None)
    if at is None or not reports[at].passed or hasattr(reports[at], "wasxfail"):
        return
    call = reports[at]

    def fail() -> None:
        pytest.fail(message, pytrace=False)

    # Built directly, not through the makereport hook: other plugins' wrappers (rerunfailures)
    # expect the state of an in-process run there.
    failed = pytest.TestReport.from_item_and_call(item, pytest.CallInfo.from_call(fail, "call"))
    failed.sections = list(call.sections)
    failed.duration = call.duration
    failed.user_properties = list(call.user_properties)
    reports[at] = failed


def parent_failure(item: pytest.Item, text: str, when: str = "setup") -> list[pytest.TestReport]:
    """Reports for a cold test whose child could not even be started."""
    reports = [make_report(item, when, "failed", text)]
    if when != "teardown":
        reports.append(make_report(item, "teardown", "passed", None))
    return reports


def echo_uncaptured(test_dir: str) -> None:
    """Write what the child printed uncaptured to this process's streams (for ``-s`` runs)."""
    for name, stream in ((records.RAW_OUT, sys.stdout), (records.RAW_ERR, sys.stderr)):
        text = _read(test_dir, name)
        if text:
            stream.write(text)
            stream.flush()
