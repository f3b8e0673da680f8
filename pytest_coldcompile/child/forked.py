"""A child forked from the fork server: the server's set-up done once before it forks
(``set_up_fork_server``), a child's set-up ahead of its request (``ready_forked``), and its
run of one test's whole protocol (``run_forked``), leaving with ``os._exit``.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

import pytest

from pytest_coldcompile.child import pristine, shared_imports
from pytest_coldcompile.child.capture import redirect_fds, retarget_capture
from pytest_coldcompile.child.context import ChildContext, prepare
from pytest_coldcompile.child.sinks import ReportSink, WarningSink
from pytest_coldcompile.child_spec import ChildSpec
from pytest_coldcompile.devices import cuda
from pytest_coldcompile.processes import exit_now
from pytest_coldcompile.records import (
    write_record,
)


class _ForkedProtocol:
    """The innermost protocol of a forked child: reports are written, not logged, here."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool:
        from _pytest.runner import runtestprotocol

        # The child's test gets nextitem=None: everything this child set up, session fixtures
        # too, ends there. An earlier test (run_forked's before) keeps what the next one needs.
        runtestprotocol(item, nextitem=nextitem, log=False)
        return True

def _flush_coverage() -> None:
    """os._exit skips atexit: save coverage data of this child under its own suffix."""
    coverage = sys.modules.get("coverage")
    current = getattr(getattr(coverage, "Coverage", None), "current", None)
    cov = current() if current else None
    if cov is None:
        return
    cov.stop()
    data = cov.get_data()
    out = coverage.CoverageData(basename=data.base_filename(), suffix=True)  # type: ignore[union-attr]
    out.update(data)
    out.write()

class ForkServerSetUp:
    """What every forked child needs and no request changes, done once in the fork server.

    Registering a plugin costs pytest milliseconds (it scans the plugin for fixtures), and a
    forked child would pay it for each of three per test. The inherited capture is kept: each
    child retargets it (retarget_capture). The sinks stay inert until a child gives them its
    directory.
    """

    def __init__(self, config: pytest.Config) -> None:
        # pytest-xdist's worker hooks write to its channel; a forked child must stay silent.
        for plugin in list(config.pluginmanager.get_plugins()):
            if type(plugin).__name__ == "WorkerInteractor":
                config.pluginmanager.unregister(plugin)
        self.report_sink = ReportSink(config, None)
        self.warning_sink = WarningSink(None)
        config.pluginmanager.register(self.report_sink, "coldcompile-report-sink")
        config.pluginmanager.register(self.warning_sink, "coldcompile-warning-sink")
        config.pluginmanager.register(_ForkedProtocol(), "coldcompile-forked-protocol")

    def direct_to(self, test_dir: str, target: str | None) -> None:
        self.report_sink.test_dir = self.warning_sink.test_dir = test_dir
        self.report_sink.target = self.warning_sink.target = target

_server_set_up: ForkServerSetUp | None = None

def set_up_fork_server(config: pytest.Config) -> None:
    """In the fork server, before it forks any child: see ForkServerSetUp."""
    global _server_set_up
    _server_set_up = ForkServerSetUp(config)
    pristine.hash_installation()

def _set_up_forked(config: pytest.Config, spec: ChildSpec) -> ChildContext:
    test_dir = spec["dir"]
    set_up = _server_set_up or ForkServerSetUp(config)
    set_up.direct_to(test_dir, spec.get("nodeid") if spec.get("before") else None)
    redirect_fds(test_dir)
    retarget_capture(config, test_dir, keep=False)
    return prepare(config, spec)

# (spec, the context made for them or the traceback of why that failed)
_ready: tuple[ChildSpec, ChildContext | str] | None = None
# Whether this spare made torch's CUDA context before any request was announced (warm_spare).
_context_made_ahead = False


def warm_spare(cuda_visible_devices: str | None) -> None:
    """In a child just forked ahead, before any request is announced to it (ini
    cold_compile_cuda_ahead): torch's CUDA context, on the GPU the session's children see. What
    needs the test's spec (its private caches; Triton's driver, which builds into them) waits
    for ready_forked or the request."""
    global _context_made_ahead
    if cuda_visible_devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
    _context_made_ahead = cuda.torch_context_ahead()

def ready_forked(item: pytest.Item, spec: ChildSpec) -> None:
    """In a child forked ahead of its request: set up for the announced spec now, and
    import torch's compile stack where they say so, while another child runs its test;
    run_forked then only runs the protocol."""
    global _ready
    try:
        ctx = _set_up_forked(item.config, spec)
    except BaseException:
        _ready = (spec, traceback.format_exc())
        return
    _ready = (spec, ctx)  # ready now, whatever the warm-up below meets
    if spec.get("cuda_ahead"):
        ctx.cuda_ahead = cuda.context_ahead()
    if spec.get("warm_compile_stack"):
        ctx.warmed_ahead = pristine.warm_compile_stack()

def run_forked(
    item: pytest.Item, spec: ChildSpec, before: Sequence[pytest.Item] = ()
) -> NoReturn:
    """Body of a forked cold child: run item's whole protocol here, then leave with os._exit.

    before: tests to run first, in order, in this same process and with the same private
    caches (what they leave warm is what item meets); their reports and warnings go to
    EARLIER, item's to the child's directory as always.
    """
    test_dir = spec["dir"]
    code = 0
    try:
        config = item.config
        if _ready is not None and _ready[0] == spec:
            ctx = _ready[1]
            if isinstance(ctx, str):  # the set-up ahead of the request failed: say how
                code = 1
                write_record(test_dir, {"type": "error", "traceback": ctx})
                exit_now(code)
        else:
            ctx = _set_up_forked(config, spec)
            ctx.cuda_ahead = bool(spec.get("cuda_ahead")) and _context_made_ahead
        imported = shared_imports.modules_now()
        try:
            # Through the hook, so the wrappers pytest puts around a test (assertion
            # comparisons, warning capture, ...) are around it here too.
            sequence = [*before, item]
            for this, following in zip(sequence, [*sequence[1:], None]):
                this.ihook.pytest_runtest_protocol(item=this, nextitem=following)
        except pytest.exit.Exception as exc:
            write_record(test_dir, {"type": "exit", "msg": exc.msg, "returncode": exc.returncode})
        except KeyboardInterrupt:
            write_record(test_dir, {"type": "interrupt"})
        write_record(test_dir, ctx.summary())
        shared_imports.write_imported(test_dir, imported)  # for the fork server to share
        _flush_coverage()
    except BaseException:
        code = 1
        try:
            write_record(test_dir, {"type": "error", "traceback": traceback.format_exc()})
        except BaseException:
            code = 2
    finally:
        exit_now(code)
