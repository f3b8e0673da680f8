"""A cold child that collects its test again (spawned, or forked from the zygote): it checks
the collected item against the parent's fingerprint, prepares itself cold and runs the test
(and any earlier tests it was asked to run first) as pytest's own session.
"""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import Any

import pytest

from pytest_coldcompile.child.capture import retarget_capture
from pytest_coldcompile.child.context import ChildContext, prepare
from pytest_coldcompile.child.fingerprint import fingerprint_difference, item_fingerprint
from pytest_coldcompile.child.sinks import ReportSink, WarningSink
from pytest_coldcompile.processes import die_with_parent
from pytest_coldcompile.records import (
    write_record,
)


class RecollectingChild:
    """Plugin of a spawned cold child (``--cold-compile-child=SPEC``): one test, recorded."""

    def __init__(self, config: pytest.Config, spec_path: str) -> None:
        self.config = config
        self.spec = json.loads(Path(spec_path).read_text())
        # A spawned child's parent is the pytest process, which may have died before this
        # line; a zygote's child was armed by its fork server already.
        spawned = self.spec.get("mode") == "spawn"
        die_with_parent(self.spec.get("parent_pid") if spawned else None)
        self.test_dir = self.spec["dir"]
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
        keep = [it for it in items if it.nodeid == self.spec["nodeid"]]
        drop = [it for it in items if it.nodeid != self.spec["nodeid"]]
        want = self.spec.get("fingerprint")
        refused = None
        if len(keep) > 1:
            refused = f"{len(keep)} items have this node id here"
        elif keep and isinstance(want, dict):
            refused = fingerprint_difference(want, item_fingerprint(keep[0]))
        earlier, missing = self._earlier(drop)
        if keep and refused is None and missing:
            refused = f"the earlier tests {missing} are not here, or not the parent's"
        if earlier and refused is None:
            drop = [it for it in drop if all(it is not e for e in earlier)]
            keep = [*earlier, *keep]
        if refused is not None:
            # Never run another parametrization than the one the parent asked for.
            self._refuse(
                f"collected a different item under node id {self.spec['nodeid']!r}: "
                f"{refused}; its collection differs from the parent's (parameters built "
                "from unordered or process-dependent values?)"
            )
            drop += keep
            keep = []
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep

    def _earlier(self, found: list[pytest.Item]) -> tuple[list[pytest.Item], list[str]]:
        """The spec' earlier tests (``before``) among found, in the spec' order, each the
        parent's item by its fingerprint; and the node ids of those that are not."""
        by_id: dict[str, list[pytest.Item]] = {}
        for it in found:
            by_id.setdefault(it.nodeid, []).append(it)
        prints = self.spec.get("before_fingerprints") or []
        earlier, missing = [], []
        for i, nodeid in enumerate(self.spec.get("before") or []):
            same = by_id.get(nodeid, [])
            want = prints[i] if i < len(prints) else None
            if len(same) != 1 or (isinstance(want, dict)
                                  and fingerprint_difference(want, item_fingerprint(same[0]))):
                missing.append(nodeid)
            else:
                earlier.append(same[0])
        return earlier, missing

    def _refuse(self, why: str) -> None:
        self.refused = (
            f"the re-collecting cold child ({self.spec.get('mode', 'spawn')}) {why}; "
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
                f"collected no test with node id {self.spec['nodeid']!r} ({found.strip()})"
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
                f"collected no test with node id {self.spec['nodeid']!r}; "
                f"collection errors:\n{errors}"
            )
            return True
        if self.spec.get("before"):
            # The earlier tests first, in the parent's order, whatever reordered them since.
            rank = {nodeid: i for i, nodeid in enumerate([*self.spec["before"],
                                                           self.spec["nodeid"]])}
            session.items.sort(key=lambda it: rank.get(it.nodeid, len(rank)))
        target = self.spec["nodeid"] if self.spec.get("before") else None
        try:
            retarget_capture(self.config, self.test_dir, keep=True)
            self.ctx = prepare(self.config, self.spec)
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
