"""The parent side of cold runs: fork, zygote or spawn, one private directory and child per test.

One engine per pytest process that runs tests (each xdist worker has its own). It never
initializes CUDA: device facts come from ``devices.cuda``, the children do the rest. It knows
no feature: gates, proofs and the report take part through the plugin's hooks (``hookspecs``).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_coldcompile import interop, item_options, options, record, selectors
from pytest_coldcompile.child import forked, shared_imports
from pytest_coldcompile.child.fingerprint import item_fingerprint
from pytest_coldcompile.child_spec import ChildSpec
from pytest_coldcompile.devices import cuda, device_queries
from pytest_coldcompile.isolation import child_reports, spawn, zygote
from pytest_coldcompile.isolation.forkserver import ChildExit, ForkServer, ServerError


def choose_mode(
    s: options.Settings, zygote_ready: bool = False, no_zygote_because: str = ""
) -> tuple[str, str]:
    """(mode, why) for this process, from the setting and what the process has done so far.

    zygote_ready: a zygote (forked before collection, CUDA-clean) is running for this process;
    no_zygote_because: why not, when it is not.
    """
    can_fork = hasattr(os, "fork")
    if s.mode == "spawn":
        return "spawn", f"spawn: chosen by {s.mode_source}"
    if s.mode in ("fork", "zygote") and not can_fork:
        raise pytest.UsageError(f"{s.mode_source}: fork is unavailable on this platform")
    if s.mode == "fork":
        why = f"fork: chosen by {s.mode_source}"
        if _cuda_initialized():
            why += (
                "; warning: the pytest process has initialized the CUDA driver, "
                "forked children cannot use CUDA"
            )
        return "fork", why
    if s.mode == "zygote":
        if zygote_ready:
            return "zygote", f"zygote: chosen by {s.mode_source}"
        because = no_zygote_because or zygote.LATE_REGISTRATION
        return "spawn", (
            f"zygote: chosen by {s.mode_source}, but no zygote was started ({because}); "
            "spawning"
        )
    if not can_fork:
        return "spawn", "auto: os.fork is unavailable"
    if not _cuda_initialized():
        answered = device_queries.account()
        if answered:
            return "fork", (
                f"auto: {answered}; the pytest process never initialized CUDA, forking is safe")
        return "fork", (
            "auto: the pytest process has not initialized the CUDA driver, forking is safe"
        )
    if zygote_ready:
        return "zygote", (
            "auto: the pytest process initialized the CUDA driver during collection; "
            "forking from the zygote started before collection"
        )
    return "spawn", (
        "auto: the pytest process initialized the CUDA driver and no zygote is running, "
        "so a forked child could not use CUDA"
    )


def _ahead(s: options.Settings, mode: str) -> tuple[bool, str]:
    """(whether children make their CUDA context ahead, the words for mode_reason) once
    collection is over: ini cold_compile_cuda_ahead's auto is true where collection asked the
    device, as a GPU suite does (in-process its tests then find CUDA initialized: by
    collection, or by the test before)."""
    if mode != "fork":
        return False, ""
    cuda_ahead, why = s.cuda_ahead, ""
    if cuda_ahead is None:
        cuda_ahead = device_queries.answered_any()
        why = " (cold_compile_cuda_ahead auto: collection asked the device)"
    words = [f"each child creates its CUDA context before its test{why}"] if cuda_ahead else []
    if s.forked_ahead > 1:
        words.append(f"{s.forked_ahead} children forked ahead")
    return cuda_ahead, ", ".join(words)


def _cuda_initialized() -> bool:
    # torch's flag first: it is set before the driver call returns.
    return cuda.torch_cuda_initialized() or cuda.cuda_driver_initialized()


def _needs_device_facts(items: list[pytest.Item]) -> bool:
    if cuda.xdist_worker_index() is not None:
        return True
    return any(
        it.get_closest_marker("requires_cuda") or it.get_closest_marker("requires_smem")
        for it in items
    )


# The xdist worker facts that a re-collecting (zygote or spawned) child is given.
WORKERINPUT = ("workerid", "workercount", "testrunuid", "mainargv")

TMP_FIXTURES = frozenset({"tmp_path", "tmpdir", "tmp_path_factory", "tmpdir_factory"})


@dataclass
class ColdRun:
    """One cold child of a test, as the ``pytest_coldcompile_child_ended`` hook sees it."""

    engine: ColdEngine
    item: pytest.Item
    test_dir: str  # the child's directory and caches; removed once the hook has returned
    reports: list[pytest.TestReport]
    result: child_reports.ChildResult
    record: dict[str, Any] = field(default_factory=dict)  # the test's record, so far
    ended: ChildExit | None = None  # None where the child never ran
    timeout: float | None = None


ENGINE_KEY = pytest.StashKey["ColdEngine"]()
"""Where the pytest process keeps its running engine (``config.stash``), for features whose
items run a test cold themselves (prove mode)."""


class ColdEngine:
    def __init__(self, session: pytest.Session, extra_items: Sequence[pytest.Item] = ()) -> None:
        self.config = session.config
        self.hook = self.config.hook
        # With the items a feature runs cold itself (a proof's original, deselected by -k).
        present = {id(item) for item in session.items}
        self.items = session.items + [it for it in extra_items if id(it) not in present]
        self.index = {id(item): i for i, item in enumerate(self.items)}
        self.zygote = zygote.of(self.config)
        settings = options.settings(self.config)
        self.mode, self.reason = choose_mode(
            settings, self.zygote is not None, zygote.not_started(self.config)
        )
        self.cuda_ahead, ahead_why = _ahead(settings, self.mode)
        if ahead_why:
            self.reason += "; " + ahead_why
        if settings.mode in ("auto", "fork"):
            more = self.hook.pytest_coldcompile_explain_mode(
                config=self.config, mode=self.mode, reason=self.reason)
            self.reason = "; ".join([self.reason, *(m for m in more if m)])
        self.base = tempfile.mkdtemp(prefix="pytest-coldcompile-")
        self.gpu: tuple[str, int] | None = None
        self.server: ForkServer | None = None
        self.environ: dict[str, str] | None = None
        self.count = 0
        # (item, test directory, spec) announced to the fork server for the next test
        self.promised: tuple[pytest.Item, str, ChildSpec] | None = None
        # Per test file: whether its last cold test that finished compiled a graph
        # (_warms_ahead).
        self.compiled: dict[str, bool] = {}

    def start(self) -> None:
        """Everything children should inherit is done here, before the fork server forks."""
        if _needs_device_facts(self.items):
            facts = cuda.facts()  # a probe subprocess, never CUDA here
            self.gpu = cuda.gpu_for_worker(len(facts.gpus))
        selectors.entry_points()  # list once; importing them is left to the children
        factory = getattr(self.config, "_tmp_path_factory", None)
        if factory is not None and any(
            TMP_FIXTURES.intersection(getattr(it, "fixturenames", ())) for it in self.items
        ):
            # One basetemp for the session, made now: each child would make its own otherwise.
            factory.getbasetemp()
        # What a forked child inherits from the fork server; re-collecting children get it
        # too, not what earlier in-process tests left in os.environ.
        self.environ = dict(os.environ)
        if self.mode == "zygote":
            assert self.zygote is not None
            self.zygote.preload()
            self.server = self.zygote.server  # run, kill and close treat both servers alike
        elif self.zygote is not None:
            # Not needed; stopped before the fork server forks, which must not hold its pipe.
            self.zygote.stop()
            self.zygote = None
        if self.mode == "fork":
            sys.stdout.flush()
            sys.stderr.flush()
            self.server = ForkServer(
                self._child_main, preload=self._preload, child_ready=self._child_ready,
                after_child=shared_imports.after_child,
                spares=options.settings(self.config).forked_ahead,
                warm_spare=self._warm_spare if self.cuda_ahead else None,
            )
            self.server.start()
        self.hook.pytest_coldcompile_engine_started(engine=self)

    def _preload(self) -> None:
        # In the server: selectors whose module is imported already are loaded once, so
        # children inherit them; a failure is reproduced (and reported) by each child.

        forked.set_up_fork_server(self.config)
        selectors.load_entry_points(only_imported=True)

    def _child_main(self, request: dict[str, Any]) -> None:

        forked.run_forked(self.items[request["index"]], request["spec"],
                          [self.items[i] for i in request.get("before", ())])

    def _warm_spare(self) -> None:
        forked.warm_spare(self.gpu[0] if self.gpu else None)

    def _child_ready(self, request: dict[str, Any]) -> None:

        forked.ready_forked(self.items[request["index"]], request["spec"])

    def close(self) -> None:
        self._break_promise()
        if self.server is not None:
            self.server.stop()
            self.server = None
        shutil.rmtree(self.base, ignore_errors=True)

    def kill(self) -> None:
        if self.server is not None:
            self.server.kill()
            self.server = None

    def child_spec(self, item: pytest.Item, test_dir: str) -> ChildSpec:
        """The spec of a cold child of item in test_dir, the features' entries included.

        An implementation of ``pytest_coldcompile_child_spec`` may refuse the test with a
        ValueError naming a bad marker argument: the engine then fails the test's setup.
        """
        spec = self._core_spec(item, test_dir)
        self.hook.pytest_coldcompile_child_spec(item=item, spec=spec)
        return spec

    def _core_spec(self, item: pytest.Item, test_dir: str) -> ChildSpec:
        try:
            limit, smem_device, source = item_options.smem_named_for(item)
        except ValueError:
            limit, smem_device, source = None, None, ""  # the child's setup reports it
        try:
            emulate_device, _ = item_options.emulated_device_for(item)
        except ValueError:
            emulate_device = None  # the same
        workerinput = getattr(self.config, "workerinput", None)
        xml = interop.junit_xml(self.config)
        return {
            # A re-collecting child refuses another item under the same node id.
            "fingerprint": item_fingerprint(item),
            # Whether the parent writes JUnit XML, and in which family: the child records
            # record_xml_attribute / record_testsuite_property calls only then.
            "junit_family": getattr(xml, "family", None),
            # A re-collecting child has no xdist channel; it sets config.workerinput from this,
            # so worker_id and testrun_uid say what they say in a forked child.
            "workerinput": (
                {k: workerinput[k] for k in WORKERINPUT if k in workerinput}
                if isinstance(workerinput, dict)
                else None
            ),
            "dir": test_dir,
            "parent_pid": os.getpid(),
            "nodeid": item.nodeid,
            "mode": self.mode,
            "mode_reason": self.reason,
            "smem_limit": limit,
            "smem_source": source,
            "smem_device": smem_device,
            "emulate_device": emulate_device,
            "cuda_visible_devices": self.gpu[0] if self.gpu else None,
            "gpu_position": self.gpu[1] if self.gpu else None,
            "warm_compile_stack": self._warms_ahead(item),
            "cuda_ahead": self.cuda_ahead,
        }

    def _warms_ahead(self, item: pytest.Item) -> bool:
        """Whether a child forked ahead for item imports torch's compile stack while it waits
        (``pristine.warm_compile_stack``), unless ini cold_compile_warm_ahead is false: when
        the test asks for compile_counter, or the last cold test of its file that finished
        compiled a graph. Tests of a file tend to do alike; asking more widely, every
        non-compiling test after a compiling one would wait for an import it does not use
        (2.6 s on two cores), and a suite that never compiles pays nothing either way."""
        if not options.settings(self.config).warm_ahead:
            return False
        return self.compiled.get(_test_file(item), False) or (
            "compile_counter" in getattr(item, "fixturenames", ()))

    def _server_alive(self) -> bool:
        if self.server is None or self.server.pid is None:
            return False
        try:
            pid, _ = os.waitpid(self.server.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        self.server.pid = None
        return False

    def new_test_dir(self) -> str:
        """A new private directory under the engine's, removed when the engine closes."""
        self.count += 1
        test_dir = os.path.join(self.base, f"{self.count:05d}")
        os.makedirs(test_dir)
        return test_dir

    def _break_promise(self) -> None:
        if self.promised is not None:
            shutil.rmtree(self.promised[1], ignore_errors=True)
            self.promised = None

    def _announce(self, nextitem: pytest.Item | None) -> dict[str, Any] | None:
        """The fork request of nextitem, promised now so that the fork server readies its
        child while this test runs; None where nextitem is not run cold by fork."""
        if nextitem is None or self.mode != "fork" or not item_options.is_cold(nextitem):
            return None
        test_dir = self.new_test_dir()
        try:
            spec = self.child_spec(nextitem, test_dir)
        except ValueError:  # a bad marker argument: its own run says so
            shutil.rmtree(test_dir, ignore_errors=True)
            return None
        self.promised = (nextitem, test_dir, spec)
        return {"index": self.index[id(nextitem)], "spec": spec}

    def _launch(
        self,
        item: pytest.Item,
        spec: ChildSpec,
        timeout: float | None,
        nextitem: pytest.Item | None = None,
    ) -> ChildExit:
        if self.mode in ("fork", "zygote") and not self._server_alive():
            self.mode, self.reason = "spawn", f"the {self.mode} server exited; spawning from now on"
            spec["mode"], spec["mode_reason"] = self.mode, self.reason
        if self.mode in ("fork", "zygote"):
            assert self.server is not None
            if self.mode == "fork":
                request = {"index": self.index[id(item)], "spec": spec}
                announced = self._announce(nextitem)
                if announced is not None:
                    request["next"] = announced
            else:
                request = spawn.zygote_request(self.config, item.nodeid, spec, self.environ)
            try:
                return self.server.run(request, timeout)
            except ServerError:
                self.server = None
                failed = f"the {self.mode} server failed; spawning from now on"
                self.mode, self.reason = "spawn", failed
                raise
        return spawn.run(self.config, item.nodeid, spec, timeout, self.environ)

    def run(
        self,
        item: pytest.Item,
        outer_limit: tuple[float, str] | None = None,
        nextitem: pytest.Item | None = None,
        extra_spec: ChildSpec | None = None,
    ) -> tuple[list[pytest.TestReport], child_reports.ChildResult]:
        """Run item cold; its reports (always a teardown one) and what the child recorded.

        outer_limit: (seconds, source) of another limit on the whole test (pytest-timeout's,
        whose own timer runs in the child); the child is killed when it runs past either.
        Anything raised here while the child runs kills the child's group first; an
        interrupt or pytest.exit() then stops the session, anything else fails the test.
        extra_spec: added to the child's spec (a proof's {"prove": ...}), in a child of its
        own, never one forked ahead.
        """
        spec: ChildSpec | None = None
        if (self.promised is not None and self.promised[0] is item and self.mode == "fork"
                and not extra_spec):
            _, test_dir, spec = self.promised
            self.promised = None
        else:
            self._break_promise()  # a rerun, a test the parent failed, a server that died
            test_dir = self.new_test_dir()
        result = child_reports.ChildResult()
        mode, reason = self.mode, self.reason
        ended: ChildExit | None = None
        try:
            timeout, timeout_source = item_options.timeout_for(item)
            spec = spec or self.child_spec(item, test_dir)
        except ValueError as exc:  # a bad marker argument: say so, as a setup error
            shutil.rmtree(test_dir, ignore_errors=True)
            return child_reports.parent_failure(item, str(exc)), result
        if outer_limit is not None and (timeout is None or outer_limit[0] < timeout):
            timeout, timeout_source = outer_limit
        try:
            if extra_spec:
                spec.update(extra_spec)
            ended = self._launch(item, spec, timeout, nextitem)
            mode, reason = spec["mode"], spec["mode_reason"]
            result = child_reports.read_records(self.config, item, test_dir)
            summary = result.summary or {}
            self.compiled[_test_file(item)] = bool(
                summary.get("frames") or summary.get("forward_graphs"))
            reports = child_reports.complete(item, result, ended, test_dir, timeout, timeout_source)
            if self._echo_output():
                child_reports.echo_uncaptured(test_dir)
        except (KeyboardInterrupt, SystemExit, pytest.exit.Exception):
            self.kill()  # the child was killed where the wait was interrupted; the server too
            shutil.rmtree(test_dir, ignore_errors=True)
            raise
        except Exception:
            reports = child_reports.parent_failure(
                item, "pytest-coldcompile could not run the cold child:\n" + traceback.format_exc()
            )
        except BaseException as exc:  # pytest-timeout's Failed, raised by its SIGALRM handler
            result = child_reports.read_records(self.config, item, test_dir)
            reports = _interrupted(item, result, test_dir, exc)
        try:
            if reports:  # none when pytest.exit() ran before the first phase finished
                reports = self._finish(item, reports, result, ended, mode, reason, test_dir,
                                       timeout)
        finally:
            if self.server is not None:
                self.server.remove_later(test_dir)  # while the next test's child runs
            else:
                shutil.rmtree(test_dir, ignore_errors=True)
        return reports, result

    def _finish(
        self,
        item: pytest.Item,
        reports: list[pytest.TestReport],
        result: child_reports.ChildResult,
        ended: ChildExit | None,
        mode: str,
        reason: str,
        test_dir: str,
        timeout: float | None,
    ) -> list[pytest.TestReport]:
        """The features' part (hooks), then the record onto the teardown report."""
        total_s = ended.seconds if ended is not None else None
        run = ColdRun(self, item, test_dir, reports, result,
                      record.fields(mode, reason, result.summary, total_s), ended, timeout)
        self.hook.pytest_coldcompile_child_ended(item=item, run=run)
        for message in self.hook.pytest_coldcompile_gate(item=item, record=run.record):
            if message:
                child_reports.fail_passed_call(item, run.reports, message)
        run.reports[-1].user_properties.extend(record.as_properties(run.record))
        return run.reports

    def launch_again(
        self,
        item: pytest.Item,
        spec: ChildSpec,
        timeout: float | None,
        before: Sequence[pytest.Item] = (),
    ) -> ChildExit:
        """Run item once more (the warm-cache check), the next test's fork still announced.

        before: tests to run first in the same child, in order, with the same private caches
        (whatever they warm, item meets warm). Only item's reports and records land in
        ``spec["dir"]``; theirs go to its ``sinks.EARLIER`` directory.
        """
        if before:
            spec["before"] = [it.nodeid for it in before]
            spec["before_fingerprints"] = [item_fingerprint(it) for it in before]
        if self.mode == "fork" and self._server_alive():
            assert self.server is not None
            request: dict[str, Any] = {"index": self.index[id(item)], "spec": spec}
            if before:
                request["before"] = [self.index[id(it)] for it in before]
            if self.promised is not None:
                following, _, following_spec = self.promised
                request["next"] = {"index": self.index[id(following)], "spec": following_spec}
            return self.server.run(request, timeout)
        return self._launch(item, spec, timeout)

    def _echo_output(self) -> bool:
        # With -s the user watches output live; a child's arrives when it ends.
        return getattr(self.config.option, "capture", "fd") == "no"


def _test_file(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _interrupted(
    item: pytest.Item, result: child_reports.ChildResult, test_dir: str, exc: BaseException
) -> list[pytest.TestReport]:
    """Reports of a cold test whose wait was cut short in the pytest process by exc: what the
    child finished, then the phase it was in failed with exc, as it would have in-process."""
    reports = list(result.reports)
    when = child_reports.next_phase(reports)
    path, lineno, _ = item.location
    text = (
        f"{path}:{(lineno or 0) + 1}: {type(exc).__name__}: {exc}\n"
        "(raised in the pytest process while the cold child ran; the child's process group "
        "was killed)"
    )
    sections = child_reports.child_output(test_dir, when)
    reports.append(child_reports.make_report(item, when, "failed", text, sections))
    if when != "teardown":
        reports.append(child_reports.make_report(item, "teardown", "passed", None))
    return reports
