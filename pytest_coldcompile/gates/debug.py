"""--pdb in a cold child: in fork and zygote mode, with an interactive terminal and no xdist, the
failing child takes the terminal (its process group made the foreground one) and runs the
post-mortem debugger itself, in the cold process where the failure is; then gives it back.
"""

from __future__ import annotations

import bdb
import functools
import os
import signal
import sys
import unittest
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_coldcompile.child import context
from pytest_coldcompile.child_spec import ChildSpec

# Judged at import, which is before pytest's capture replaces fds 0 and 1 (and before a zygote
# forks, so its children inherit the verdict of the terminal pytest was started in).
INTERACTIVE = os.isatty(0) and os.isatty(1)
HANDOFF_MODES = ("fork", "zygote")
NAME = "coldcompile-debug-handoff"


def why_not(config: pytest.Config, mode: str | None) -> str | None:
    """Why --pdb cannot stop in this session's cold children; None when it can."""
    if hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None):
        return "under xdist no worker has the terminal"
    if not INTERACTIVE:
        return "no interactive terminal"
    if mode is not None and mode not in HANDOFF_MODES:
        return f"{mode} children run in a session of their own, without the terminal"
    return None


@contextmanager
def _terminal() -> Iterator[tuple[Any, Any]]:
    """The controlling terminal (to read, to write), this process's group in the foreground."""
    fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    # A background group may take the foreground only while it ignores SIGTTOU.
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    foreground = os.tcgetpgrp(fd)
    try:
        os.tcsetpgrp(fd, os.getpgrp())
        # Two streams: a terminal is not seekable, which a read-write text file needs.
        with os.fdopen(os.dup(fd), "r", encoding="utf-8") as reader, \
                os.fdopen(os.dup(fd), "w", buffering=1, encoding="utf-8") as writer:
            yield reader, writer
    finally:
        try:
            os.tcsetpgrp(fd, foreground)
        finally:
            signal.signal(signal.SIGTTOU, previous)
            os.close(fd)


class DebugHandoff:
    """Registered in the pytest process; acts in its cold children (forked ones inherit it,
    a zygote's re-collecting ones register it again)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.mode: str | None = None  # the engine's, in the pytest process
        self.skipped = 0  # failing cold tests that --pdb/--trace could not stop in

    def pytest_coldcompile_engine_started(self, engine: Any) -> None:
        self.mode = engine.mode

    def pytest_coldcompile_child_spec(self, item: pytest.Item, spec: ChildSpec) -> None:
        """What the child's spec says of the debugger: {"pdb", "trace"}, None if not handed."""
        spec["debug_handoff"] = {
            "pdb": bool(self.config.getoption("usepdb", False)),
            "trace": bool(self.config.getoption("trace", False)),
        } if self.active() else None

    def pytest_coldcompile_record(self, nodeid: str, record: dict[str, Any]) -> None:
        if record.get("outcome") in ("failed", "error") and not self.active():
            self.skipped += 1

    def active(self) -> bool:
        return why_not(self.config, self.mode) is None

    def pytest_exception_interact(
        self, node: pytest.Item, call: pytest.CallInfo[Any], report: pytest.TestReport
    ) -> None:
        ctx = context.active(node.config)
        excinfo = call.excinfo
        if ctx is None or excinfo is None or not (ctx.spec.get("debug_handoff") or {}).get("pdb"):
            return
        if isinstance(excinfo.value, (pytest.skip.Exception, unittest.SkipTest, bdb.BdbQuit)):
            return  # as pytest's own --pdb
        try:
            import pdb  # only here: pytest imports it only when it debugs

            with _terminal() as (reader, writer):
                writer.write(f"\n{report.longreprtext}\n")
                writer.write(f">>>>> entering PDB in the cold child (pid {os.getpid()}, "
                             f"{ctx.mode}) >>>>>\n")
                debugger = pdb.Pdb(stdin=reader, stdout=writer)
                debugger.reset()
                debugger.interaction(None, excinfo.tb)
                writer.write(">>>>> leaving PDB; the cold child reports the failure >>>>>\n")
        except OSError as exc:  # no terminal after all: reported as without --pdb
            print(f"cold-compile: --pdb: no terminal in the cold child ({exc})", file=sys.stderr)


    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Any:
        """--trace: the test function runs under the debugger, on the terminal, in its child."""
        ctx = context.active(pyfuncitem.config)
        if ctx is not None and (ctx.spec.get("debug_handoff") or {}).get("trace"):
            original = pyfuncitem.obj

            import pdb

            @functools.wraps(original)
            def traced(*args: Any, **kwargs: Any) -> Any:
                with _terminal() as (reader, writer):
                    writer.write(f">>>>> PDB runcall in the cold child (pid {os.getpid()}, "
                                 f"{ctx.mode}) >>>>>\n")
                    return pdb.Pdb(stdin=reader, stdout=writer).runcall(original, *args, **kwargs)

            pyfuncitem.obj = traced
        return (yield)

    @pytest.hookimpl(tryfirst=True)
    def pytest_coldcompile_terminal_summary(self, terminalreporter: Any) -> None:
        if self.skipped:
            terminalreporter.write_line(debugger_line(self.config, self.skipped), yellow=True)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        why = why_not(self.config, self.mode)
        if why is not None and self.skipped:
            terminalreporter.write_line(
                "cold-compile: --pdb is handed to the failing cold child only in fork and "
                f"zygote mode, with an interactive terminal and no xdist; here: {why}",
                yellow=True)


def debugger_line(config: pytest.Config, failing: int) -> str:
    """The one line saying that the debugger options did not apply to cold children."""
    flag = "--pdb" if config.getoption("usepdb", False) else "--trace"
    tests = "test was" if failing == 1 else "tests were"
    return (
        f"cold-compile: {flag} cannot stop inside a cold child; {failing} failing cold "
        f"{tests} reported instead; rerun without --cold-compile to debug"
    )


class DebugChildSide:
    """In a re-collecting (zygote or spawned) child, which is not given --pdb: the hand-off
    where its spec says so. Forked children inherit the pytest process's DebugHandoff."""

    def pytest_coldcompile_child_configure(self, config: pytest.Config,
                                           spec: ChildSpec) -> None:
        if spec.get("debug_handoff") and config.pluginmanager.get_plugin(NAME) is None:
            config.pluginmanager.register(DebugHandoff(config), NAME)


def register(config: pytest.Config) -> None:
    """With --pdb or --trace, in the pytest process; the child side everywhere (cheap)."""
    if config.getoption("usepdb", False) or config.getoption("trace", False):
        if config.pluginmanager.get_plugin(NAME) is None:
            config.pluginmanager.register(DebugHandoff(config), NAME)
    config.pluginmanager.register(DebugChildSide(), NAME + "-child")
