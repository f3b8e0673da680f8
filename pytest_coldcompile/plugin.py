"""pytest hook implementations of pytest-coldcompile: options, the plugin's own hooks, and the
features registered as plugins (CI gates, prove mode, the report); the work is done in the
other modules."""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from typing import Any

import pytest

from pytest_coldcompile import hookspecs, interop, item_options, options, report
from pytest_coldcompile.child import context, recollected
from pytest_coldcompile.devices import device_queries, markers, smem_cap
from pytest_coldcompile.fixtures import cold_state, compile_counter, launch_events
from pytest_coldcompile.gates import baseline, budget, cuda_init, debug, find_masker, warm_check
from pytest_coldcompile.gates import settings as gate_settings
from pytest_coldcompile.isolation import zygote
from pytest_coldcompile.isolation.engine import ENGINE_KEY, ColdEngine
from pytest_coldcompile.prove import child as prove_child
from pytest_coldcompile.prove import items as prove_items

__all__ = ["ENGINE_KEY", "cold_state", "compile_counter", "launch_events"]

# The features, each a plugin on pytest's hooks and the plugin's own: register(config) puts
# it where it acts (the pytest process, the controller, cold children).
FEATURES = (report, budget, baseline, warm_check, find_masker, debug, prove_items,
            prove_child)
CAP_KEY = pytest.StashKey[smem_cap.SmemCap]()
DEVICE_SKIP_KEY = pytest.StashKey[bool]()
WORKERINPUT_KEY = pytest.StashKey[dict]()

# torch.cuda.is_available() at collection (a skipif, a conftest) then asks NVML instead of
# initializing the CUDA driver, so the pytest process stays safe to fork. Set at plugin import,
# before any conftest imports torch; a value the user set wins.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)
    gate_settings.add_options(parser)


def pytest_plugin_registered(
    plugin: object, plugin_name: str, manager: pytest.PytestPluginManager
) -> None:
    # `-p pytest_coldcompile.plugin` where the distribution is installed too: the entry point
    # would register this module a second time under its own name, which pytest refuses.
    if plugin is sys.modules[__name__] and plugin_name != "coldcompile":
        manager.set_blocked("coldcompile")


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
    cuda_init.watch(early_config)  # after the zygote's fork: it has no watcher
    device_queries.install(  # the same: the zygote's children ask the driver
        early_config,
        mode=lambda: options.early_mode(early_config)[0],
        wanted=lambda: options.answer_device_queries(early_config),
    )


def pytest_configure(config: pytest.Config) -> None:
    for line in options.MARKERS.values():
        config.addinivalue_line("markers", line)
    s = options.load(config)
    config.stash[options.SETTINGS_KEY] = s
    config.stash[gate_settings.GATES_KEY] = gate_settings.load(config)
    if s.child_spec:
        spawned = recollected.RecollectingChild(config, s.child_spec)
        config.pluginmanager.register(spawned, "coldcompile-child")
        config.stash[WORKERINPUT_KEY] = spawned.spec.get("workerinput") or {}
    for feature in FEATURES:
        feature.register(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    s = options.settings(config)
    if not (s.cold_all or s.smem_limit or s.mode_source != "default" or s.timeout
            or s.emulate_device):
        return []
    parts = [
        "every test" if s.cold_all else "tests marked cold_compile",
        f"mode {s.mode} ({s.mode_source})",
        f"timeout {s.timeout:g} s" if s.timeout else "no timeout",
    ]
    if s.smem_limit:
        named = f"{s.smem_device}'s, " if s.smem_device else ""
        parts.append(f"smem limit {s.smem_limit} bytes ({named}{s.smem_source})")
    if s.emulate_device:
        parts.append(f"emulating {s.emulate_device} ({s.emulate_source})")
    lines = ["cold-compile: " + ", ".join(parts)]
    started = zygote.of(config)
    if started is not None:
        lines.append(
            "cold-compile: zygote forked before collection; when used it preloads "
            + (", ".join(started.modules) or "nothing")
        )
    return lines + device_queries.header_lines()


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, Any, Any]:
    config = session.config
    s = options.settings(config)
    engine = None
    if not s.child_spec and not config.option.collectonly:
        extra = [it for found in config.hook.pytest_coldcompile_engine_items(session=session)
                 for it in found or ()]
        if extra or any(item_options.is_cold(item) for item in session.items):
            engine = ColdEngine(session, extra)
    if engine is not None:
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
    if context.active(item.config) is not None:
        return _child_protocol(item, nextitem)
    if engine is None or not item_options.is_cold(item):
        return None
    ihook = item.ihook
    outer_limit = interop.pytest_timeout_limit(item)
    reruns = interop.Reruns(item)
    while True:
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports, result = engine.run(item, outer_limit, nextitem)
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
    (A forked child never gets here: forked.run_forked registers its own protocol first.)"""
    from _pytest.runner import runtestprotocol

    if item.config.pluginmanager.get_plugin("terminalreporter") is None:
        # Run with -p no:terminal; plugins that write to the terminal (pytest-timeout's
        # stack dumps) would fail on the missing reporter: their text goes to stderr instead.
        item.config.pluginmanager.register(interop.TerminalStandIn(), "terminalreporter")
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    runtestprotocol(item, nextitem=nextitem, log=True)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


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


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    try:
        limit, source = item_options.effective_smem_for(item)
        needs_cuda = item_options.requires_cuda(item)
        needs_smem = item_options.required_smem(item)
    except ValueError as exc:  # a bad marker argument: the message names it, no traceback
        pytest.fail(str(exc), pytrace=False)
    if needs_cuda or needs_smem is not None:
        item.stash[DEVICE_SKIP_KEY] = True
        markers.skip_unless_device(needs_cuda, needs_smem, limit, source)
        del item.stash[DEVICE_SKIP_KEY]
    if limit is not None and context.active(item.config) is None and not item.stash.get(
        item_options.PROOF_ITEM_KEY, False  # a proof's cold children are capped, not this process
    ):
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
