"""The cold child: private empty caches, resets, one test, reports written to a file.

Runs in a process forked from the fork server or spawned fresh. It imports nothing from the
parent-side machinery (engine, fork server, reports); the parent reads its record file.
"""

from __future__ import annotations

import faulthandler
import functools
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest

from pytest_coldcompile import _imports, device, selectors
from pytest_coldcompile._linux import die_with_parent
from pytest_coldcompile.emulate import SmemCap

# Files in a cold test's private directory; the parent reads them back.
ORDERS = "orders.json"
RECORDS = "records.jsonl"
RAW_OUT, RAW_ERR = "raw-stdout", "raw-stderr"
CAPTURED_OUT, CAPTURED_ERR = "captured-stdout", "captured-stderr"
CACHES = "caches"

# Already-imported config modules read their environment at import; set them directly.
CONFIG_PATCHES: dict[str, dict[str, Any]] = {
    "torch._inductor.config": {
        "compile_threads": 1,  # no worker pool to start, leak or deadlock on
        "fx_graph_remote_cache": False,
        "autotune_remote_cache": False,
        "bundled_autotune_remote_cache": False,
    },
    "torch._functorch.config": {"enable_remote_autograd_cache": False},
    "torch._dynamo.config": {
        "automatic_dynamic_local_pgo": False,
        "automatic_dynamic_remote_pgo": False,
    },
    "torch.compiler.config": {
        "job_id": None,
        "pgo_extra_read_key": None,
        "pgo_extra_write_key": None,
    },
}
UNSET_ENV = (
    "TORCH_COMPILE_JOB_ID",
    "TORCH_COMPILE_STICKY_PGO_KEY",
    "TORCH_COMPILE_STICKY_PGO_READ",
    "TORCH_COMPILE_STICKY_PGO_WRITE",
    "TRITON_DUMP_DIR",
    "TRITON_OVERRIDE_DIR",
)


def cache_env(test_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Environment that points every compile cache of the child into test_dir and turns off
    what is shared beyond it (remote caches, PGO, worker pools)."""
    caches = Path(test_dir) / CACHES
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "TRITON_CACHE_DIR": str(caches / "triton" / "cache"),
        "TRITON_HOME": str(caches / "triton"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "0",
        "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "0",
        "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE": "0",
        "TORCHINDUCTOR_BUNDLED_AUTOTUNE_REMOTE_CACHE": "0",
        "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO": "0",
        "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_REMOTE_PGO": "0",
    }


def child_environ(test_dir: str, orders: dict[str, Any], base: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in UNSET_ENV}
    env.update(cache_env(test_dir))
    if orders.get("cuda_visible_devices") is not None:
        env["CUDA_VISIBLE_DEVICES"] = orders["cuda_visible_devices"]
    return env


def write_record(test_dir: str, record: dict[str, Any]) -> None:
    """Append one JSON line; each is one write, so a kill leaves whole lines behind."""
    line = (json.dumps(_encode(record), default=_jsonable) + "\n").encode()
    fd = os.open(os.path.join(test_dir, RECORDS), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _encode(value: Any) -> Any:
    # JSON has no tuples, but pytest's reports hold some (a skip's longrepr, sections,
    # user_properties) and their consumers check for them.
    if isinstance(value, tuple):
        return {TUPLE: [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def decode_hook(obj: dict[str, Any]) -> Any:
    """json object_hook undoing _encode."""
    if len(obj) == 1 and TUPLE in obj:
        return tuple(obj[TUPLE])
    return obj


TUPLE = "__coldcompile_tuple__"


def _jsonable(value: Any) -> Any:
    # user_properties may hold anything; xdist has the same limit and stringifies too.
    if isinstance(value, (set, frozenset)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


class CompileStats:
    """Compile seconds, Dynamo frames, and the forward/backward graphs Inductor compiled."""

    def __init__(self) -> None:
        self.compile_s = 0.0
        self.forward_graphs = 0
        self.backward_graphs = 0
        self._frames_before = 0
        self._started: float | None = None

    def install(self) -> None:
        _imports.when_imported("torch._dynamo.utils", self._baseline)
        _imports.when_imported("torch._dynamo.callback", self._hook_callbacks)
        _imports.when_imported("torch._inductor.compile_fx", self._hook_inner_compile)

    def _baseline(self, mod: ModuleType) -> None:
        self._frames_before = _unique_graphs(mod)

    def _hook_callbacks(self, mod: ModuleType) -> None:
        handler = getattr(mod, "callback_handler", None)
        if handler is None:
            return
        handler.register_start_callback(self._on_start)
        handler.register_end_callback(self._on_end)

    def _on_start(self, *args: Any) -> None:
        self._started = time.perf_counter()

    def _on_end(self, *args: Any) -> None:
        if self._started is not None:
            self.compile_s += time.perf_counter() - self._started
            self._started = None

    def _hook_inner_compile(self, mod: ModuleType) -> None:
        # compile_fx_inner looks _compile_fx_inner up at each call; every Inductor graph,
        # forward or backward, whatever the backend wrapper, passes through it.
        inner = getattr(mod, "_compile_fx_inner", None)
        if inner is None:
            return

        @functools.wraps(inner)
        def counted(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
            if kwargs.get("is_backward"):
                self.backward_graphs += 1
            else:
                self.forward_graphs += 1
            return inner(gm, example_inputs, **kwargs)

        mod._compile_fx_inner = counted  # type: ignore[attr-defined]

    def frames(self) -> int:
        mod = sys.modules.get("torch._dynamo.utils")
        return _unique_graphs(mod) - self._frames_before if mod else 0


def _unique_graphs(mod: ModuleType | None) -> int:
    counters = getattr(mod, "counters", None)
    try:
        return int(counters["stats"]["unique_graphs"]) if counters is not None else 0
    except Exception:
        return 0


@dataclass
class ChildContext:
    """What a cold child knows about itself; cold_state and the summary read it."""

    orders: dict[str, Any]
    test_dir: str
    cap: SmemCap | None = None
    stats: CompileStats = field(default_factory=CompileStats)
    tally: selectors.EventTally = field(default_factory=selectors.EventTally)

    @property
    def mode(self) -> str:
        return str(self.orders.get("mode", ""))

    @property
    def cache_dir(self) -> str:
        return os.path.join(self.test_dir, CACHES)

    @property
    def smem_limit(self) -> int | None:
        return self.orders.get("smem_limit")

    def summary(self) -> dict[str, Any]:
        return {
            "type": "summary",
            "compile_s": round(self.stats.compile_s, 3),
            "frames": self.stats.frames(),
            "forward_graphs": self.stats.forward_graphs,
            "backward_graphs": self.stats.backward_graphs,
            **self.tally.counts,
            "max_admitted_shared": self.tally.max_admitted_shared,
            "selectors": [str(getattr(s, "name", "?")) for s in selectors.loaded()],
            "cap_patched": list(self.cap.patched) if self.cap else [],
        }


ACTIVE: ChildContext | None = None
"""Set in a cold child only."""


def _patch_config(module_name: str, values: dict[str, Any]) -> None:
    def patch(mod: ModuleType) -> None:
        for key, value in values.items():
            if hasattr(mod, key):
                setattr(mod, key, value)

    _imports.when_imported(module_name, patch)


def _private_triton_dirs(caches: str) -> None:
    def patch(knobs: ModuleType) -> None:
        cache = getattr(knobs, "cache", None)
        if cache is None:
            return
        # Explicit values win over any set before the fork; env alone would not override them.
        home = os.path.join(caches, "triton")
        for name, value in (
            ("home_dir", home),
            ("dir", os.path.join(home, "cache")),
            ("dump_dir", os.path.join(home, ".triton", "dump")),
            ("override_dir", os.path.join(home, ".triton", "override")),
        ):
            if hasattr(cache, name):
                setattr(cache, name, value)

    _imports.when_imported("triton.knobs", patch)


def _private_header_dir(caches: str) -> None:
    # Inductor keeps precompiled C++ headers in the default cache dir on purpose ("global");
    # a cold child must not write there.
    def patch(codecache: ModuleType) -> None:
        if hasattr(codecache, "_HEADER_DIR"):
            codecache._HEADER_DIR = os.path.join(caches, "inductor", "precompiled_headers")  # type: ignore[attr-defined]
            codecache._HEADER_LOCK_DIR = os.path.join(codecache._HEADER_DIR, "locks")  # type: ignore[attr-defined]

    _imports.when_imported("torch._inductor.codecache", patch)


def _reset_compiler_state() -> None:
    """Forget compile state that existed before the child began (e.g. made at collection)."""
    dynamo = sys.modules.get("torch._dynamo")
    counters = getattr(sys.modules.get("torch._dynamo.utils"), "counters", None)
    # reset() calls torch.cuda.is_available(): skip it when Dynamo has seen no frame at all.
    if dynamo is not None and (counters is None or counters["frames"]["total"]):
        dynamo.reset()
    async_compile = sys.modules.get("torch._inductor.async_compile")
    pool_owner = getattr(async_compile, "AsyncCompile", None)
    for name in ("pool", "process_pool"):
        cached = getattr(pool_owner, name, None)
        # A pool inherited through fork has its threads in another process; forget it.
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()


def _adopt_selectors(tally: selectors.EventTally) -> None:
    def adopt(selector: Any) -> None:
        selectors.reset(selector)
        selectors.subscribe([selector], tally)

    selectors.load_entry_points(only_imported=True)
    for selector in selectors.loaded():
        adopt(selector)
    selectors.on_load(adopt)
    # The others are pristine until imported: load, reset and subscribe them on import.
    for ep in selectors.pending_entry_points():
        module = ep.module

        def load(_mod: ModuleType, ep: Any = ep) -> None:
            selectors.load_entry_point(ep)

        _imports.when_imported(module, load)


def _named_capture(fd: int, path: str) -> Any:
    from _pytest.capture import EncodedFile, FDCapture, SysCapture

    cap = FDCapture(fd)
    cap.tmpfile.close()
    # A named file instead of an anonymous one: the parent reads it when the child is killed.
    cap.tmpfile = EncodedFile(
        open(path, "wb+", buffering=0),
        encoding="utf-8",
        errors="replace",
        newline="",
        write_through=True,
    )
    cap.syscapture = SysCapture(fd, cap.tmpfile)
    return cap


def _stop_capture(config: pytest.Config) -> str | None:
    """Stop the capture inherited from the parent; returns its method, None if not capturing."""
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is None or not capman.is_globally_capturing():
        return None
    method = str(getattr(capman, "_method", "fd"))
    # Between tests the parent's capture files are empty, so this reads nothing of the parent's.
    capman.stop_global_capturing()
    return method


def _start_capture(config: pytest.Config, test_dir: str, method: str | None) -> None:
    """Capture again, onto named files in test_dir when capturing file descriptors."""
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is None or method is None:
        return
    if method == "fd":
        from _pytest.capture import FDCapture, MultiCapture

        multi = MultiCapture(
            in_=FDCapture(0),
            out=_named_capture(1, os.path.join(test_dir, CAPTURED_OUT)),
            err=_named_capture(2, os.path.join(test_dir, CAPTURED_ERR)),
        )
        capman._global_capturing = multi
        multi.start_capturing()
    else:  # sys capture lives in memory: a kill loses the running phase's output
        capman.start_global_capturing()
    capman.suspend_global_capture()


_fault_file: Any = None


def _redirect_fds(test_dir: str) -> None:
    global _fault_file
    sys.stdout.flush()
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for fd, name in ((1, RAW_OUT), (2, RAW_ERR)):
        raw = os.open(os.path.join(test_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(raw, fd)
        os.close(raw)
    # pytest's faulthandler writes to a copy of the terminal's stderr; a crash dump belongs
    # in the report, so point it at the child's own stderr file.
    _fault_file = os.fdopen(os.dup(2), "w")
    faulthandler.enable(file=_fault_file)


def prepare(config: pytest.Config, orders: dict[str, Any]) -> ChildContext:
    """Make this process a cold child: private caches, resets, cap, selectors, statistics."""
    global ACTIVE
    test_dir = orders["dir"]
    ctx = ChildContext(orders=orders, test_dir=test_dir)
    for name in UNSET_ENV:
        os.environ.pop(name, None)
    os.environ.update(child_environ(test_dir, orders, {}))
    if orders.get("mode") == "fork" and orders.get("gpu_position") is not None:
        device.narrow_to(int(orders["gpu_position"]))
    for module_name, values in CONFIG_PATCHES.items():
        _patch_config(module_name, values)
    _private_triton_dirs(ctx.cache_dir)
    _private_header_dir(ctx.cache_dir)
    _reset_compiler_state()
    ctx.stats.install()
    if orders.get("smem_limit"):
        ctx.cap = SmemCap(int(orders["smem_limit"])).install()
    _adopt_selectors(ctx.tally)
    ACTIVE = ctx
    return ctx


class ReportSink:
    """Writes each report of the test as soon as it exists, so a later crash keeps it."""

    def __init__(self, config: pytest.Config, test_dir: str) -> None:
        self.config = config
        self.test_dir = test_dir

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Any:
        report = yield
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        write_record(self.test_dir, {"type": "report", "data": data})
        return report


class WarningSink:
    """Records the warnings the test raised; the parent hands them to its own warning hooks."""

    def __init__(self, test_dir: str) -> None:
        self.test_dir = test_dir

    def pytest_warning_recorded(self, warning_message: Any, when: str) -> None:
        if when != "runtest":
            return  # a spawned child's config and collection warnings are the parent's too
        category = warning_message.category
        write_record(
            self.test_dir,
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
    def pytest_runtest_protocol(self, item: pytest.Item) -> bool:
        from _pytest.runner import runtestprotocol

        # nextitem=None: everything this child set up, session fixtures too, ends here.
        runtestprotocol(item, nextitem=None, log=False)
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


def run_forked(item: pytest.Item, orders: dict[str, Any]) -> NoReturn:
    """Body of a forked cold child: run item's whole protocol here, then leave with os._exit."""
    test_dir = orders["dir"]
    code = 0
    try:
        config = item.config
        method = _stop_capture(config)
        _redirect_fds(test_dir)
        _start_capture(config, test_dir, method)
        # pytest-xdist's worker hooks write to its channel; a forked child must stay silent.
        for plugin in list(config.pluginmanager.get_plugins()):
            if type(plugin).__name__ == "WorkerInteractor":
                config.pluginmanager.unregister(plugin)
        ctx = prepare(config, orders)
        config.pluginmanager.register(ReportSink(config, test_dir), "coldcompile-report-sink")
        config.pluginmanager.register(WarningSink(test_dir), "coldcompile-warning-sink")
        config.pluginmanager.register(_ForkedProtocol(), "coldcompile-forked-protocol")
        try:
            # Through the hook, so the wrappers pytest puts around a test (assertion
            # comparisons, warning capture, ...) are around it here too.
            item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
        except pytest.exit.Exception as exc:
            write_record(test_dir, {"type": "exit", "msg": exc.msg, "returncode": exc.returncode})
        except KeyboardInterrupt:
            write_record(test_dir, {"type": "interrupt"})
        write_record(test_dir, ctx.summary())
        _flush_coverage()
    except BaseException:
        code = 1
        try:
            write_record(test_dir, {"type": "error", "traceback": traceback.format_exc()})
        except BaseException:
            code = 2
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code)


class SpawnedChild:
    """Plugin of a spawned cold child (``--cold-compile-child=ORDERS``): one test, recorded."""

    def __init__(self, config: pytest.Config, orders_path: str) -> None:
        die_with_parent()
        self.config = config
        self.orders = json.loads(Path(orders_path).read_text())
        self.test_dir = self.orders["dir"]
        self.ctx: ChildContext | None = None
        self.collect_errors: list[str] = []

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors.append(f"{report.nodeid}: {report.longreprtext}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        keep = [it for it in items if it.nodeid == self.orders["nodeid"]]
        drop = [it for it in items if it.nodeid != self.orders["nodeid"]]
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        try:
            if not session.items:
                errors = "\n".join(self.collect_errors) or "(no collection error reported)"
                raise RuntimeError(
                    f"the spawned cold child collected no test with node id "
                    f"{self.orders['nodeid']!r}; collection errors:\n{errors}"
                )
            _start_capture(self.config, self.test_dir, _stop_capture(self.config))
            self.ctx = prepare(self.config, self.orders)
            self.config.pluginmanager.register(ReportSink(self.config, self.test_dir))
            self.config.pluginmanager.register(WarningSink(self.test_dir))
        except BaseException:
            write_record(self.test_dir, {"type": "error", "traceback": traceback.format_exc()})
            return True
        return (yield)

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
