"""The plugin's own hooks: how its features (CI gates, prove mode, the report) and other
plugins take part in cold runs. The engine calls them and knows none of their implementers.

Added with ``pluginmanager.add_hookspecs`` when the plugin loads. A hook keeps its name and
arguments once released; a new argument is added as pluggy allows, and implementations need
not take it. In the docstrings, "the pytest process" is the one that runs a test (an xdist
worker under xdist), "the controller" the one that writes the session's report (the xdist
controller, or the same pytest process without xdist), and "the child" a cold child.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_coldcompile.child_spec import ChildSpec

if TYPE_CHECKING:
    from pytest_coldcompile.isolation.engine import ColdEngine, ColdRun

hookspec = pytest.hookspec


@hookspec
def pytest_coldcompile_engine_items(session: pytest.Session) -> list[pytest.Item] | None:
    """Items, besides those run cold, that a feature will ask the engine to run cold (a proof's
    original, deselected by ``-k``). The pytest process starts the engine where any test is
    cold or any implementation returns an item. Called once, after collection."""


@hookspec
def pytest_coldcompile_engine_started(engine: ColdEngine) -> None:
    """The engine of this pytest process has started: ``engine.mode`` and ``engine.reason``
    say how its children start. Called in the pytest process, before the first test."""


@hookspec
def pytest_coldcompile_explain_mode(config: pytest.Config, mode: str, reason: str) -> str | None:
    """More of why the engine chose ``mode`` (``fork``, ``zygote``, ``spawn``) for ``auto`` or
    ``fork``: each returned sentence is appended to the reason. Called once in the pytest
    process, before the engine starts."""


@hookspec
def pytest_coldcompile_child_spec(item: pytest.Item, spec: ChildSpec) -> None:
    """The spec of a cold child for ``item`` are being made: add an entry that a child-side
    implementation reads (JSON-serializable, under a key of the implementer's own). Called in
    the pytest process, once per child, also for a child forked ahead of its test."""


@hookspec
def pytest_coldcompile_child_configure(config: pytest.Config, spec: ChildSpec) -> None:
    """In a cold child, before its test's setup: the child's caches, resets and selectors are
    in place and ``spec`` are what the pytest process made. Register child-side plugins
    here. A forked child has the pytest process's plugins; a re-collecting one (zygote,
    spawn) registered them at its own configure."""


@hookspec
def pytest_coldcompile_child_ended(item: pytest.Item, run: ColdRun) -> None:
    """A cold child of ``item`` has ended and its records are read: ``run.reports`` (the
    test's reports, which an implementation may replace), ``run.record`` (the test's record,
    to which it may add its own keys), ``run.test_dir`` (the child's directory and caches, which
    exist until every implementation has returned). Called in the pytest process, before
    :func:`pytest_coldcompile_gate`."""


@hookspec
def pytest_coldcompile_gate(item: pytest.Item, record: dict[str, Any]) -> str | None:
    """Judge a cold test by its record (the keys of the JSON report, docs/report-schema.md); a
    returned message fails its passed call, as ``pytest.fail(message, pytrace=False)`` in the
    test would. An implementation may add its own keys to ``record``. A failure, a skip or an
    xfail stays as it is. Called in the pytest process, after the child ended."""


@hookspec
def pytest_coldcompile_record(nodeid: str, record: dict[str, Any]) -> None:
    """A cold test's record is complete, as the JSON report will hold it (its ``outcome`` and
    every field). Called in the controller, once per cold test, after its teardown report."""


@hookspec
def pytest_coldcompile_records_done(
    session: pytest.Session, records: dict[str, dict[str, Any]]
) -> None:
    """Every record of the session (node id -> record; none where no test ran cold), before
    the JSON report is written: an implementation may add its own keys, or set
    ``session.exitstatus``. Called in the controller, at session finish."""


@hookspec
def pytest_coldcompile_terminal_summary(
    terminalreporter: Any, records: dict[str, dict[str, Any]], config: pytest.Config
) -> None:
    """Write a section after the cold compile summary. Called in the controller, only in a
    session that ran a cold test (``records`` is not empty)."""
