"""What cold tests need from the pytest plugins users combine them with: pytest-timeout's limit
as a bound on the cold child, pytest-rerunfailures' reruns as fresh cold children, and a terminal
stand-in for re-collecting children that run without pytest's terminal reporter."""

from __future__ import annotations

import os
import re
import time
from typing import Any

import pytest

_xml_key: Any = None
try:  # private: where pytest keeps its JUnit XML writer (LogXML) in config.stash
    from _pytest import junitxml as _junitxml

    _xml_key = _junitxml.xml_key
except (ImportError, AttributeError):  # pragma: no cover - no XML we could feed then
    pass


def junit_xml(config: pytest.Config) -> Any:
    """This session's LogXML (--junitxml), None where there is none."""
    return config.stash.get(_xml_key, None) if _xml_key is not None else None


def set_junit_xml(config: pytest.Config, writer: Any) -> None:
    """Put writer where pytest's record_xml_attribute and record_testsuite_property look."""
    if _xml_key is not None:
        config.stash[_xml_key] = writer


class TerminalStandIn:
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


class Reruns:
    """pytest-rerunfailures for a cold test: each rerun is a fresh cold child; a failed
    attempt's failing reports are logged as "rerun", as the plugin does in-process. Its
    --only-rerun and --rerun-except patterns are matched against the failure's text."""

    def __init__(self, item: pytest.Item) -> None:
        self.item = item
        self.plugin = item.config.pluginmanager.get_plugin("rerunfailures")
        count = None
        if self.plugin is not None and not rerun_path_excluded(self.plugin, item):
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
        assert self.plugin is not None  # again() answered True: rerunfailures is here
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


def rerun_path_excluded(plugin: Any, item: pytest.Item) -> bool:
    excluded = getattr(plugin, "_is_rerun_path_excluded", None)
    return bool(excluded(item)) if excluded is not None else False


# How long past pytest-timeout's limit a cold child may run before the parent kills it: the
# child's own pytest-timeout fires first (a spawned child's timer starts after its startup).
TIMEOUT_PLUGIN_ALLOWANCE = 60.0


def pytest_timeout_limit(item: pytest.Item) -> tuple[float, str] | None:
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
