"""The cold child: private empty caches, resets, one test, reports written to a file.

Runs in a process forked from the fork server or spawned fresh. It imports nothing from the
parent-side machinery (engine, fork server, reports); the parent reads its record file.
"""

from __future__ import annotations

import faulthandler
import io
import json
import os
import re
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

from pytest_coldcompile import interop, selectors
from pytest_coldcompile.child import pristine, shared_imports
from pytest_coldcompile.child.stats import CompileStats
from pytest_coldcompile.devices import cuda, named
from pytest_coldcompile.devices.emulate import Emulation
from pytest_coldcompile.devices.smem_cap import SmemCap
from pytest_coldcompile.processes import die_with_parent, exit_now
from pytest_coldcompile.records import (
    CACHES,
    CAPTURED_ERR,
    CAPTURED_OUT,
    redirect_std_fds,
    write_record,
)

EARLIER = "earlier"
"""Where a child that runs earlier tests before its own (``ColdEngine.launch_again``'s
``before``) writes their reports and warnings: a directory under its own, so that the test's
records stay the test's alone."""


def record_dir(test_dir: str, target: str | None, nodeid: str | None) -> str:
    """The directory for a record of nodeid in a child of target (None: any test is its)."""
    if target is None or nodeid is None or nodeid == target:
        return test_dir
    earlier = os.path.join(test_dir, EARLIER)
    os.makedirs(earlier, exist_ok=True)
    return earlier


@dataclass
class ChildContext:
    """What a cold child knows about itself; cold_state and the summary read it."""

    orders: dict[str, Any]
    test_dir: str
    cap: SmemCap | None = None
    emulation: Emulation | None = None
    stats: CompileStats = field(default_factory=CompileStats)
    tally: selectors.EventTally = field(default_factory=selectors.EventTally)
    # torch's compile stack was imported before the test began (pristine.warm_compile_stack)
    warmed_ahead: bool = False

    @property
    def mode(self) -> str:
        return str(self.orders.get("mode", ""))

    @property
    def cache_dir(self) -> str:
        return os.path.join(self.test_dir, CACHES)

    @property
    def smem_limit(self) -> int | None:
        if self.emulation is not None:
            return self.emulation.limit
        return self.orders.get("smem_limit")

    @property
    def smem_device(self) -> str | None:
        """The named device whose limit smem_limit is, if it is one's."""
        emulated = self.emulated_device
        if emulated is not None and self.smem_limit == named.DEVICES[emulated].shared_per_block:
            return emulated
        return self.orders.get("smem_device")

    @property
    def emulated_device(self) -> str | None:
        return self.orders.get("emulate_device")

    def summary(self) -> dict[str, Any]:
        return {
            "type": "summary",
            **self.stats.timings(),
            "frames": self.stats.frames(),
            "forward_graphs": self.stats.forward_graphs,
            "backward_graphs": self.stats.backward_graphs,
            **self.tally.counts,
            "max_admitted_shared": self.tally.max_admitted_shared,
            "launches": self.tally.launches,
            "selectors": [str(getattr(s, "name", "?")) for s in selectors.loaded()],
            "cap_patched": list(self.cap.patched) if self.cap else [],
            "smem_limit": self.smem_limit,
            "smem_device": self.smem_device,
            "emulated_device": self.emulated_device,
            "emulation": self.emulation.summary() if self.emulation else None,
            "warmed_ahead": self.warmed_ahead,
        }


CONTEXT_KEY = pytest.StashKey[ChildContext]()


def active(config: pytest.Config) -> ChildContext | None:
    """The cold child's context when config runs a cold child's test, else None.

    Kept on the config, not in the process: a pytest run started inside a cold test (pytester's
    inline runs) has a config of its own and is an ordinary run."""
    return config.stash.get(CONTEXT_KEY, None)


def _adopt_selectors(tally: selectors.EventTally, stats: CompileStats) -> None:
    def sink(event: Any) -> None:
        tally(event)
        stats.on_event(event)

    def adopt(selector: Any) -> None:
        selectors.reset(selector)
        selectors.subscribe([selector], sink)

    selectors.load_entry_points(only_imported=True)
    for selector in selectors.loaded():
        adopt(selector)
    selectors.on_load(adopt)
    # The others are pristine until imported: loaded (hence reset and subscribed) on import.
    selectors.watch_entry_points(raise_errors=True)


def _retarget_capture(config: pytest.Config, test_dir: str, keep: bool) -> None:
    """Point the global capture this child already has at the child's own files, keeping
    every stream object of it: code that bound ``sys.stdout`` or ``sys.stderr`` at import
    or collection (``from sys import stdout``, a logging handler, a parameter) still holds
    the live streams, and what it writes lands in this test's captured output.

    Call it with fds 0, 1 and 2 already redirected (``_redirect_fds`` or a spawned child's
    own). keep: whether what the capture holds now belongs to this child (a re-collecting
    child's own, printed while it collected) rather than to the process it was forked from.
    """
    capman = config.pluginmanager.getplugin("capturemanager")
    multi = getattr(capman, "_global_capturing", None)
    if capman is None or multi is None or not capman.is_globally_capturing():
        return  # -s: sys.stdout is the process's own stream, on the child's fd 1 already
    capman.suspend_global_capture()
    # Read only a capture of this process's own: a forked child's fd capture files are still
    # the parent's (one open file shared), which a read would truncate under the parent.
    held = multi.readouterr() if keep else None
    for capture in (multi.in_, multi.out, multi.err):
        saved = getattr(capture, "targetfd_save", None)
        if isinstance(saved, int):
            # fd capture: between phases the fd is given back to what it was; here that is
            # the child's raw file (or /dev/null), not the parent's terminal.
            os.dup2(capture.targetfd, saved)
    for capture, name in ((multi.out, CAPTURED_OUT), (multi.err, CAPTURED_ERR)):
        if not isinstance(getattr(capture, "targetfd_save", None), int):
            continue  # sys and tee-sys capture live in memory: a kill loses the phase's output
        # A named file under the same EncodedFile, instead of the anonymous one the parent
        # shares (fork) or one the parent cannot read: the parent reads it when the child
        # is killed.
        named = os.open(os.path.join(test_dir, name), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.dup2(named, capture.tmpfile.fileno())
        finally:
            os.close(named)
    if held is None:
        multi.readouterr()  # the forked child's own files now; in memory, its parent's copy
        return
    for capture, text in ((multi.out, held.out), (multi.err, held.err)):
        if capture is not None and text:
            # TextIOWrapper's own write: a tee-sys stream would echo it a second time.
            io.TextIOWrapper.write(capture.tmpfile, text)


_fault_file: Any = None


def _redirect_fds(test_dir: str) -> None:
    global _fault_file
    redirect_std_fds(test_dir)
    # pytest's faulthandler writes to a copy of the terminal's stderr; a crash dump belongs
    # in the report, so point it at the child's own stderr file.
    _fault_file = os.fdopen(os.dup(2), "w")
    faulthandler.enable(file=_fault_file)


def _disable_debugger(config: pytest.Config) -> None:
    """A cold child has no terminal (stdin is /dev/null): pdb would read EOF, quit, and stop
    the whole session. The failure is reported instead; the parent says so once."""
    for name in ("pdbinvoke", "pdbtrace"):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin, name)
    # unittest test cases keep tearDown for the debugger while usepdb is set.
    for option in ("usepdb", "trace"):
        if getattr(config.option, option, False):
            setattr(config.option, option, False)


class _AttributeRecorder:
    """What record_xml_attribute gets in a cold child: each attribute becomes a record."""

    def __init__(self, test_dir: str) -> None:
        self.test_dir = test_dir

    def add_attribute(self, name: str, value: object) -> None:
        write_record(
            self.test_dir,
            {"type": "junitxml", "what": "attribute", "name": str(name), "value": str(value)},
        )


class JunitRecorder:
    """Stands in for pytest's LogXML (``config.stash[xml_key]``) in a cold child.

    record_xml_attribute and record_testsuite_property write records instead of filling an
    XML tree that dies with the child; the parent replays them on its own LogXML.
    """

    def __init__(self, test_dir: str, family: str) -> None:
        self.test_dir = test_dir
        self.family = family  # record_xml_attribute warns about xunit2 from it, as in-process

    def node_reporter(self, report: Any) -> _AttributeRecorder:
        return _AttributeRecorder(self.test_dir)

    def add_global_property(self, name: str, value: object) -> None:
        __tracebackhide__ = True
        try:
            from _pytest.junitxml import _check_record_param_type
        except ImportError:  # private; the same check, said the same way
            if not isinstance(name, str):
                raise TypeError(
                    f"name parameter needs to be a string, but {type(name)} given"
                ) from None
        else:
            _check_record_param_type("name", name)
        write_record(
            self.test_dir,
            {"type": "junitxml", "what": "suite_property", "name": name, "value": str(value)},
        )


def _record_junitxml(config: pytest.Config, orders: dict[str, Any], test_dir: str) -> None:
    """Put a JunitRecorder where record_xml_attribute/record_testsuite_property look."""
    xml = interop.junit_xml(config)
    if xml is not None:  # forked: the parent's LogXML, copied
        family = str(getattr(xml, "family", "xunit1"))
    elif orders.get("mode") == "fork":  # forked from a parent that writes no XML
        return
    elif "junit_family" in orders:  # re-collected: the parent said whether it writes XML
        if orders["junit_family"] is None:
            return
        family = str(orders["junit_family"])
    else:  # a parent that does not say: record anyway, the parent drops what it cannot use
        family = str(config.getini("junit_family"))
    interop.set_junit_xml(config, JunitRecorder(test_dir, family))


def prepare(config: pytest.Config, orders: dict[str, Any]) -> ChildContext:
    """Make this process a cold child: private caches, resets, cap, selectors, statistics."""
    _disable_debugger(config)
    _record_junitxml(config, orders, orders["dir"])
    test_dir = orders["dir"]
    ctx = ChildContext(orders=orders, test_dir=test_dir)
    for name in pristine.UNSET_ENV:
        os.environ.pop(name, None)
    os.environ.update(pristine.child_environ(test_dir, orders, {}))
    if orders.get("mode") == "fork" and orders.get("gpu_position") is not None:
        cuda.narrow_to(int(orders["gpu_position"]))
    os.makedirs(ctx.cache_dir, exist_ok=True)  # cold_state.cache_dir exists, empty
    pristine.make_private(ctx.cache_dir)
    pristine.reset_compiler_state()
    ctx.stats.install()
    if orders.get("emulate_device"):
        ctx.emulation = Emulation(named.DEVICES[orders["emulate_device"]],
                                  orders.get("smem_limit"),
                                  os.path.join(ctx.cache_dir, "emulation-tmp")).install()
        ctx.cap = ctx.emulation.cap
    elif orders.get("smem_limit"):
        ctx.cap = SmemCap(int(orders["smem_limit"])).install()
    _adopt_selectors(ctx.tally, ctx.stats)
    config.stash[CONTEXT_KEY] = ctx
    config.hook.pytest_coldcompile_child_configure(config=config, orders=orders)
    return ctx


class ReportSink:
    """Writes each report of the test as soon as it exists, so a later crash keeps it."""

    def __init__(
        self, config: pytest.Config, test_dir: str | None, target: str | None = None
    ) -> None:
        self.config = config
        self.test_dir = test_dir  # None: armed in a fork server, no child yet
        self.target = target  # the child's own test; others' reports go to EARLIER

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Any:
        report = yield
        if self.test_dir is None:
            return report
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        write_record(record_dir(self.test_dir, self.target, item.nodeid),
                     {"type": "report", "data": data})
        return report


class WarningSink:
    """Records the warnings the test raised; the parent hands them to its own warning hooks."""

    def __init__(self, test_dir: str | None, target: str | None = None) -> None:
        self.test_dir = test_dir  # None: armed in a fork server, no child yet
        self.target = target  # the child's own test; others' warnings go to EARLIER

    def pytest_warning_recorded(self, warning_message: Any, when: str, nodeid: str) -> None:
        if when != "runtest" or self.test_dir is None:
            return  # a spawned child's config and collection warnings are the parent's too
        category = warning_message.category
        write_record(
            record_dir(self.test_dir, self.target, nodeid),
            {
                "type": "warning",
                "when": when,
                "message": str(warning_message.message),
                "category": f"{category.__module__}.{category.__qualname__}",
                "filename": warning_message.filename,
                "lineno": warning_message.lineno,
            },
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


class _ForkServerArming:
    """What every forked child needs and no request changes, done once in the fork server.

    Registering a plugin costs pytest milliseconds (it scans the plugin for fixtures), and a
    forked child would pay it for each of three per test. The inherited capture is kept: each
    child retargets it (_retarget_capture). The sinks stay inert until a child gives them its
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

    def aim(self, test_dir: str, target: str | None) -> None:
        self.report_sink.test_dir = self.warning_sink.test_dir = test_dir
        self.report_sink.target = self.warning_sink.target = target


_arming: _ForkServerArming | None = None


def arm_fork_server(config: pytest.Config) -> None:
    """In the fork server, before it forks any child: see _ForkServerArming."""
    global _arming
    _arming = _ForkServerArming(config)


def _set_up_forked(config: pytest.Config, orders: dict[str, Any]) -> ChildContext:
    test_dir = orders["dir"]
    arming = _arming or _ForkServerArming(config)
    arming.aim(test_dir, orders.get("nodeid") if orders.get("before") else None)
    _redirect_fds(test_dir)
    _retarget_capture(config, test_dir, keep=False)
    return prepare(config, orders)


# (orders, the context made for them or the traceback of why that failed)
_ready: tuple[dict[str, Any], ChildContext | str] | None = None


def ready_forked(item: pytest.Item, orders: dict[str, Any]) -> None:
    """In a child forked ahead of its request: set up for the announced orders now, and
    import torch's compile stack where they say so, while another child runs its test;
    run_forked then only runs the protocol."""
    global _ready
    try:
        ctx = _set_up_forked(item.config, orders)
    except BaseException:
        _ready = (orders, traceback.format_exc())
        return
    _ready = (orders, ctx)  # ready now, whatever the warm-up below meets
    if orders.get("warm_compile_stack"):
        ctx.warmed_ahead = pristine.warm_compile_stack()


def run_forked(
    item: pytest.Item, orders: dict[str, Any], before: Sequence[pytest.Item] = ()
) -> NoReturn:
    """Body of a forked cold child: run item's whole protocol here, then leave with os._exit.

    before: tests to run first, in order, in this same process and with the same private
    caches (what they leave warm is what item meets); their reports and warnings go to
    EARLIER, item's to the child's directory as always.
    """
    test_dir = orders["dir"]
    code = 0
    try:
        config = item.config
        if _ready is not None and _ready[0] == orders:
            ctx = _ready[1]
            if isinstance(ctx, str):  # the set-up ahead of the request failed: say how
                code = 1
                write_record(test_dir, {"type": "error", "traceback": ctx})
                exit_now(code)
        else:
            ctx = _set_up_forked(config, orders)
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


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _stable_repr(value: Any, depth: int = 0) -> str:
    """A repr two processes agree on for the same parameter: no addresses, sets sorted."""
    if depth < 4 and isinstance(value, (set, frozenset)):
        inner = sorted(_stable_repr(v, depth + 1) for v in value)
        return f"{type(value).__name__}({{{', '.join(inner)}}})"
    if depth < 4 and isinstance(value, (list, tuple)):
        return f"{type(value).__name__}({', '.join(_stable_repr(v, depth + 1) for v in value)})"
    if depth < 4 and isinstance(value, dict):
        items = (
            f"{_stable_repr(k, depth + 1)}: {_stable_repr(v, depth + 1)}" for k, v in value.items()
        )
        return "{" + ", ".join(items) + "}"
    if isinstance(value, io.IOBase):
        # A stream's repr names its file descriptor, which differs between processes (a
        # parameter sys.stdout is a capture file, or the zygote child's own stdout); a file
        # opened by path is told by its path.
        name = getattr(value, "name", None)
        path = f" {name!r}" if isinstance(name, str) and not name.startswith("<") else ""
        return f"<{type(value).__qualname__}{path}>"
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<{type(value).__qualname__}: repr raised {type(exc).__name__}>"
    return _ADDRESS.sub(" at 0x?", text[:500])


def item_fingerprint(item: pytest.Item) -> dict[str, Any]:
    """What identifies item beyond its node id (its definition's place, its parameters).

    A re-collecting child (spawn, zygote) compares it with the item it found under the same
    node id: index-based parametrize ids (``p0``, ``p1``) can name other values there.
    """
    path, lineno, _ = item.location
    out: dict[str, Any] = {"location": [str(path), lineno]}
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        out["params"] = {name: _stable_repr(v) for name, v in sorted(callspec.params.items())}
    return out


def _difference(want: dict[str, Any], got: dict[str, Any]) -> str | None:
    wrong = [
        f"{key}: the parent's {want.get(key)!r}, the child's {got.get(key)!r}"
        for key in sorted(set(want) | set(got))
        if want.get(key) != got.get(key)
    ]
    return "; ".join(wrong) or None


class SpawnedChild:
    """Plugin of a spawned cold child (``--cold-compile-child=ORDERS``): one test, recorded."""

    def __init__(self, config: pytest.Config, orders_path: str) -> None:
        self.config = config
        self.orders = json.loads(Path(orders_path).read_text())
        # A spawned child's parent is the pytest process, which may have died before this
        # line; a zygote's child was armed by its fork server already.
        spawned = self.orders.get("mode") == "spawn"
        die_with_parent(self.orders.get("parent_pid") if spawned else None)
        self.test_dir = self.orders["dir"]
        self.ctx: ChildContext | None = None
        self.collect_errors: list[str] = []
        self.refused: str | None = None

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors.append(f"{report.nodeid}: {report.longreprtext}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        keep = [it for it in items if it.nodeid == self.orders["nodeid"]]
        drop = [it for it in items if it.nodeid != self.orders["nodeid"]]
        want = self.orders.get("fingerprint")
        refused = None
        if len(keep) > 1:
            refused = f"{len(keep)} items have this node id here"
        elif keep and isinstance(want, dict):
            refused = _difference(want, item_fingerprint(keep[0]))
        earlier, missing = self._earlier(drop)
        if keep and refused is None and missing:
            refused = f"the earlier tests {missing} are not here, or not the parent's"
        if earlier and refused is None:
            drop = [it for it in drop if all(it is not e for e in earlier)]
            keep = [*earlier, *keep]
        if refused is not None:
            # Never run another parametrization than the one the parent asked for.
            self._refuse(
                f"collected a different item under node id {self.orders['nodeid']!r}: "
                f"{refused}; its collection differs from the parent's (parameters built "
                "from unordered or process-dependent values?)"
            )
            drop += keep
            keep = []
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep

    def _earlier(self, found: list[pytest.Item]) -> tuple[list[pytest.Item], list[str]]:
        """The orders' earlier tests (``before``) among found, in the orders' order, each the
        parent's item by its fingerprint; and the node ids of those that are not."""
        by_id: dict[str, list[pytest.Item]] = {}
        for it in found:
            by_id.setdefault(it.nodeid, []).append(it)
        prints = self.orders.get("before_fingerprints") or []
        earlier, missing = [], []
        for i, nodeid in enumerate(self.orders.get("before") or []):
            same = by_id.get(nodeid, [])
            want = prints[i] if i < len(prints) else None
            if len(same) != 1 or (isinstance(want, dict)
                                  and _difference(want, item_fingerprint(same[0]))):
                missing.append(nodeid)
            else:
                earlier.append(same[0])
        return earlier, missing

    def _refuse(self, why: str) -> None:
        self.refused = (
            f"the re-collecting cold child ({self.orders.get('mode', 'spawn')}) {why}; "
            "the test was not run"
        )
        write_record(self.test_dir, {"type": "refused", "message": self.refused})

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session: pytest.Session) -> Any:
        try:
            return (yield)
        except pytest.UsageError as exc:  # pytest's "not found: <node id>"
            found = " ".join(str(a) for a in exc.args)
            self._refuse(
                f"collected no test with node id {self.orders['nodeid']!r} ({found.strip()})"
            )
            raise

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """Prepare the child before pytest's own loop runs the one test; True skips the loop."""
        if self.refused is not None:
            return True  # recorded already; the parent reports it
        if not session.items:
            errors = "\n".join(self.collect_errors) or "(no collection error reported)"
            self._refuse(
                f"collected no test with node id {self.orders['nodeid']!r}; "
                f"collection errors:\n{errors}"
            )
            return True
        if self.orders.get("before"):
            # The earlier tests first, in the parent's order, whatever reordered them since.
            rank = {nodeid: i for i, nodeid in enumerate([*self.orders["before"],
                                                           self.orders["nodeid"]])}
            session.items.sort(key=lambda it: rank.get(it.nodeid, len(rank)))
        target = self.orders["nodeid"] if self.orders.get("before") else None
        try:
            _retarget_capture(self.config, self.test_dir, keep=True)
            self.ctx = prepare(self.config, self.orders)
            self.config.pluginmanager.register(ReportSink(self.config, self.test_dir, target))
            self.config.pluginmanager.register(WarningSink(self.test_dir, target))
        except BaseException:
            write_record(self.test_dir, {"type": "error", "traceback": traceback.format_exc()})
            return True
        return None

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        exc = excinfo.value
        if isinstance(exc, pytest.exit.Exception):
            write_record(
                self.test_dir, {"type": "exit", "msg": exc.msg, "returncode": exc.returncode}
            )
        else:
            write_record(self.test_dir, {"type": "interrupt"})

    def pytest_sessionfinish(self) -> None:
        if self.ctx is not None:
            write_record(self.test_dir, self.ctx.summary())
