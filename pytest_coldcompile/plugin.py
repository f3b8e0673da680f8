"""pytest hook implementations of pytest-coldcompile; the work is done in the other modules."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Generator
from typing import Any

import pytest

from pytest_coldcompile import child, device_markers, options, report, smem_cap, zygote
from pytest_coldcompile.engine import ColdEngine
from pytest_coldcompile.fixtures import cold_state, compile_counter, launch_events

__all__ = ["cold_state", "compile_counter", "launch_events"]

ENGINE_KEY = pytest.StashKey[ColdEngine]()
CAP_KEY = pytest.StashKey[smem_cap.SmemCap]()
DEVICE_SKIP_KEY = pytest.StashKey[bool]()
WORKERINPUT_KEY = pytest.StashKey[dict]()

# torch.cuda.is_available() at collection (a skipif, a conftest) then asks NVML instead of
# initializing the CUDA driver, so the pytest process stays safe to fork. Set at plugin import,
# before any conftest imports torch; a value the user set wins.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    workerinput = session.config.stash.get(WORKERINPUT_KEY, None)
    if workerinput and not hasattr(session.config, "workerinput"):
        # A re-collecting child of an xdist worker: worker_id and testrun_uid say what they
        # say in a forked child. Set after pytest_configure, where plugins (rerunfailures)
        # would take it for a live xdist channel and connect to the controller.
        session.config.workerinput = workerinput  # type: ignore[attr-defined]


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # Before any conftest or test module is imported: what the zygote inherits is clean.
    started = zygote.start_early(early_config)
    if started is not None:
        early_config.stash[zygote.ZYGOTE_KEY] = started
        early_config.add_cleanup(started.stop)  # inline (pytester) runs end here too


def pytest_configure(config: pytest.Config) -> None:
    for line in options.MARKERS.values():
        config.addinivalue_line("markers", line)
    s = options.load(config)
    config.stash[options.SETTINGS_KEY] = s
    if s.child_orders:
        spawned = child.SpawnedChild(config, s.child_orders)
        config.pluginmanager.register(spawned, "coldcompile-child")
        config.stash[WORKERINPUT_KEY] = spawned.orders.get("workerinput") or {}
    else:
        config.pluginmanager.register(
            report.ColdReporter(config, s.report_path), "coldcompile-report"
        )


def pytest_report_header(config: pytest.Config) -> list[str]:
    s = options.settings(config)
    if not (s.cold_all or s.smem_limit or s.mode_source != "default" or s.timeout):
        return []
    parts = [
        "every test" if s.cold_all else "tests marked cold_compile",
        f"mode {s.mode} ({s.mode_source})",
        f"timeout {s.timeout:g} s" if s.timeout else "no timeout",
    ]
    if s.smem_limit:
        parts.append(f"smem limit {s.smem_limit} bytes ({s.smem_source})")
    lines = ["cold-compile: " + ", ".join(parts)]
    started = zygote.of(config)
    if started is not None:
        lines.append(
            "cold-compile: zygote forked before collection; when used it preloads "
            + (", ".join(started.modules) or "nothing")
        )
    return lines


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, Any, Any]:
    config = session.config
    s = options.settings(config)
    engine = None
    if (
        not s.child_orders
        and not config.option.collectonly
        and any(options.is_cold(item) for item in session.items)
    ):
        engine = ColdEngine(session)
        engine.start()
        config.stash[ENGINE_KEY] = engine
        reporter = config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"cold-compile: {engine.mode} ({engine.reason})")
    try:
        return (yield)
    finally:
        if engine is not None:
            engine.close()
            del config.stash[ENGINE_KEY]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    engine = item.config.stash.get(ENGINE_KEY, None)
    if child.ACTIVE is not None:
        return _child_protocol(item, nextitem)
    if engine is None or not options.is_cold(item):
        return None
    ihook = item.ihook
    backstop = _timeout_plugin_backstop(item)
    reruns = _Reruns(item)
    while True:
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports, result = engine.run(item, backstop)
        again = result.exit is None and not result.interrupted and reruns.again(reports)
        if not again:
            _teardown_parent(item, nextitem, reports)
        for rep in reports:
            ihook.pytest_runtest_logreport(report=rep)
        for message in result.warnings:
            ihook.pytest_warning_recorded.call_historic(
                kwargs={
                    "warning_message": message,
                    "when": "runtest",
                    "nodeid": item.nodeid,
                    "location": None,
                }
            )
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        if not again:
            break
        reruns.pause()
    if result.exit is not None:
        pytest.exit(result.exit.get("msg", ""), result.exit.get("returncode"))
    if result.interrupted:
        raise KeyboardInterrupt
    return True


def _child_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """A spawned or zygote child's protocol: one attempt, so that a protocol plugin such as
    pytest-rerunfailures reruns in the parent, each attempt in a fresh child, as in fork mode.
    (A forked child never gets here: child.run_forked registers its own protocol first.)"""
    from _pytest.runner import runtestprotocol

    if item.config.pluginmanager.get_plugin("terminalreporter") is None:
        # Run with -p no:terminal; plugins that write to the terminal (pytest-timeout's
        # stack dumps) would fail on the missing reporter: their text goes to stderr instead.
        item.config.pluginmanager.register(_TerminalStandIn(), "terminalreporter")
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    runtestprotocol(item, nextitem=nextitem, log=True)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


class _TerminalStandIn:
    """config.get_terminal_writer() and the reporter's write methods, onto this stderr."""

    def __init__(self) -> None:
        from _pytest._io import TerminalWriter

        self._tw = TerminalWriter(file=os.fdopen(os.dup(2), "w", buffering=1))

    def write(self, content: str, **markup: bool) -> None:
        self._tw.write(content, **markup)

    def write_line(self, line: str, **markup: bool) -> None:
        self._tw.line(line, **markup)

    def line(self, msg: str, **markup: bool) -> None:
        self._tw.line(msg, **markup)

    def write_sep(self, sep: str, title: str | None = None, **markup: bool) -> None:
        self._tw.sep(sep, title, **markup)

    def section(self, title: str, sep: str = "=", **markup: bool) -> None:
        self._tw.sep(sep, title, **markup)


class _Reruns:
    """pytest-rerunfailures for a cold test: each rerun is a fresh cold child; a failed
    attempt's failing reports are logged as "rerun", as the plugin does in-process. Its
    --only-rerun and --rerun-except patterns are matched against the failure's text."""

    def __init__(self, item: pytest.Item) -> None:
        self.item = item
        self.plugin = item.config.pluginmanager.get_plugin("rerunfailures")
        count = None
        if self.plugin is not None and not _rerun_path_excluded(self.plugin, item):
            count = self.plugin.get_reruns_count(item)
        self.reruns = int(count or 0)
        self.attempt = 0

    def again(self, reports: list[pytest.TestReport]) -> bool:
        """Whether to run the test again after this attempt's reports (marked if so)."""
        self.attempt += 1
        if self.reruns == 0:
            return False
        self.item.execution_count = self.attempt  # type: ignore[attr-defined]
        for rep in reports:
            rep.rerun = self.attempt - 1  # type: ignore[attr-defined]
        failed = [rep for rep in reports if rep.failed]
        if not failed or self.attempt > self.reruns or not self._matches(failed):
            return False
        for rep in failed:
            rep.outcome = "rerun"  # type: ignore[assignment]
        return True

    def pause(self) -> None:
        delay = self.plugin.get_reruns_delay(self.item)
        backoff = getattr(self.plugin, "get_reruns_delay_backoff_factor", lambda item: 1)
        time.sleep(delay * backoff(self.item) ** (self.attempt - 1))

    def _matches(self, failed: list[pytest.TestReport]) -> bool:
        condition = getattr(self.plugin, "get_reruns_condition", None)
        if condition is not None and not condition(self.item):
            return False
        patterns = getattr(self.plugin, "_get_rerun_filter_regex", lambda item, name: None)
        only = patterns(self.item, "only_rerun") or []
        unless = patterns(self.item, "rerun_except") or []
        text = "\n".join(rep.longreprtext for rep in failed)
        if only and not any(re.search(p, text) for p in only):
            return False
        return not any(re.search(p, text) for p in unless)


def _rerun_path_excluded(plugin: Any, item: pytest.Item) -> bool:
    excluded = getattr(plugin, "_is_rerun_path_excluded", None)
    return bool(excluded(item)) if excluded is not None else False


def _teardown_parent(
    item: pytest.Item, nextitem: pytest.Item | None, reports: list[pytest.TestReport]
) -> None:
    """Tear down, here, the fixtures of earlier in-process tests that nextitem does not need."""
    call = pytest.CallInfo.from_call(
        lambda: item.session._setupstate.teardown_exact(nextitem), when="teardown"
    )
    if call.excinfo is None:
        return
    failed = item.ihook.pytest_runtest_makereport(item=item, call=call)
    teardown = reports[-1]
    if teardown.passed:
        failed.sections = teardown.sections + failed.sections
        failed.user_properties = teardown.user_properties
        reports[-1] = failed
    else:
        teardown.sections.append(("parent teardown", str(failed.longrepr)))


# How long past pytest-timeout's limit a cold child may run before the parent kills it: the
# child's own pytest-timeout fires first (a spawned child's timer starts after its startup).
TIMEOUT_PLUGIN_ALLOWANCE = 60.0


def _timeout_plugin_backstop(item: pytest.Item) -> tuple[float, str] | None:
    """pytest-timeout's limit for item, plus an allowance, as a bound on the cold child.

    pytest-timeout is active in the child too, so its timer fires there, inside the test, and
    the child reports it. The parent's own timer is cancelled: its signal method would
    interrupt the parent's wait, its thread method would os._exit the whole session.
    """
    plugin = item.config.pluginmanager.get_plugin("timeout")
    settings_of = getattr(plugin, "_get_item_settings", None)
    if settings_of is None:
        return None
    settings = settings_of(item)
    if not settings.timeout or settings.timeout <= 0 or settings.func_only:
        return None  # func_only: the parent set no timer, and setup time is not limited
    item.config.hook.pytest_timeout_cancel_timer(item=item)
    limit = settings.timeout + TIMEOUT_PLUGIN_ALLOWANCE
    return limit, (
        f"pytest-timeout's {settings.timeout:g} s, which the child did not report, "
        f"plus {TIMEOUT_PLUGIN_ALLOWANCE:g} s"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    limit, source = options.smem_limit_for(item)  # a bad marker fails the setup here
    needs_cuda = item.get_closest_marker("requires_cuda") is not None
    needs_smem = options.required_smem(item)
    if needs_cuda or needs_smem is not None:
        item.stash[DEVICE_SKIP_KEY] = True
        device_markers.skip_unless_device(needs_cuda, needs_smem, limit, source)
        del item.stash[DEVICE_SKIP_KEY]
    if limit is not None and child.ACTIVE is None:
        # In-process: capped from setup to teardown. Kernels this process loaded before are
        # not checked again.
        item.stash[CAP_KEY] = smem_cap.install(limit)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if call.when == "setup" and item.stash.get(DEVICE_SKIP_KEY, False):
        # Like pytest's own skip markers: point at the test, not at this plugin.
        if report.skipped and isinstance(report.longrepr, tuple):
            path, line = item.reportinfo()[:2]
            report.longrepr = (str(path), (line or 0) + 1, report.longrepr[2])
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, Any, Any]:
    try:
        return (yield)
    finally:
        cap = item.stash.get(CAP_KEY, None)
        if cap is not None:
            cap.remove()
            del item.stash[CAP_KEY]
