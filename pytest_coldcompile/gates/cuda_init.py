"""Who initialized CUDA in the pytest process: the first stack through torch.cuda._lazy_init,
else the step (a conftest's import, a module's collection) after which the driver was found
initialized outside torch, with the CUDA libraries and modules loaded. Explains ``auto``'s mode.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import traceback
from types import ModuleType
from typing import Any

import pytest

from pytest_coldcompile import import_hooks, options
from pytest_coldcompile.devices import cuda

# Where frames are never the user's: this plugin, pytest, pluggy, the import system.
_OWN_DIRS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (
        os.path.dirname(__file__),
        pytest.__file__,
        getattr(sys.modules.get("_pytest"), "__file__", None),
        getattr(sys.modules.get("pluggy"), "__file__", None),
        importlib.__file__,
    )
    if path
)
# Python modules and shared libraries that initialize the driver themselves.
CUDA_MODULES = ("cupy", "jax", "jaxlib", "tensorflow", "pycuda", "numba.cuda", "cuda.bindings",
                "tensorrt", "triton")
CUDA_LIBRARIES = ("libcudart", "libnvrtc", "libcublas", "libcupy", "xla_extension",
                  "libtensorflow", "libtorch_cuda", "libnvJitLink", "libcudnn")
# torch.cuda's modules that import _lazy_init by name (torch 2.11-2.13).
_BOUND = ("torch.cuda", "torch.cuda.memory", "torch.cuda.random")


class FirstInit:
    """What is known of the first CUDA initialization in this process."""

    def __init__(self) -> None:
        self.stack: list[traceback.FrameSummary] | None = None  # torch's, innermost last
        self.step: str | None = None  # the pytest step after which it was first seen

    def user_frame(self) -> traceback.FrameSummary | None:
        """The innermost frame outside torch, this plugin, pytest and importlib."""
        torch_file = getattr(sys.modules.get("torch"), "__file__", None)
        torch_dir = (os.path.dirname(os.path.abspath(torch_file)) + os.sep
                     if isinstance(torch_file, str) else None)
        for frame in reversed(self.stack or []):
            path = os.path.abspath(frame.filename)
            if torch_dir and path.startswith(torch_dir):
                continue
            if path.startswith(_OWN_DIRS) or frame.filename.startswith("<frozen"):
                continue
            return frame
        return None

    def describe(self) -> str:
        if self.stack is not None:
            frame = self.user_frame()
            where = (f"{frame.filename}:{frame.lineno} (in {frame.name})" if frame
                     else "no frame outside torch")
            text = f"CUDA first initialized by torch.cuda._lazy_init, called from {where}"
        else:
            text = f"the CUDA driver was initialized outside torch ({_driver_users()})"
        return text + (f", {self.step}" if self.step else "")

    def stack_lines(self) -> list[str]:
        """The stack without pytest's, pluggy's, this plugin's and the import system's frames."""
        frames = [
            f for f in self.stack or []
            if not os.path.abspath(f.filename).startswith(_OWN_DIRS)
            and not f.filename.startswith("<frozen")
        ]
        return [line.rstrip() for line in traceback.format_list(frames)]


_first = FirstInit()


def first() -> FirstInit:
    return _first


def _driver_users() -> str:
    """Which loaded libraries and modules can have initialized the driver, as far as told."""
    path = cuda.cuda_driver_path()
    libs: set[str] = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                name = os.path.basename(line.rsplit(maxsplit=1)[-1])
                if name.startswith(CUDA_LIBRARIES):
                    libs.add(name)
    except OSError:
        pass
    mods = sorted(m for m in CUDA_MODULES if m in sys.modules)
    found = ", ".join([*(f"module {m}" for m in mods), *sorted(libs)])
    return (f"libcuda {path or '?'}; "
            + (f"loaded that use CUDA: {found}" if found
               else "no CUDA library or module known to this plugin is loaded: a direct "
                    "ctypes/cffi load of libcuda?"))


def _wrap_lazy_init(mod: ModuleType) -> None:
    original = getattr(mod, "_lazy_init", None)
    if original is None or getattr(original, "_coldcompile_watched", False):
        return

    def initialized() -> bool:
        try:
            return bool(mod.is_initialized())
        except Exception:
            return False

    def restore() -> None:
        for name in _BOUND:
            bound = sys.modules.get(name)
            if bound is not None and getattr(bound, "_lazy_init", None) is lazy_init:
                bound._lazy_init = original  # type: ignore[attr-defined]

    @functools.wraps(original)
    def lazy_init(*args: Any, **kwargs: Any) -> Any:
        if initialized():  # forked after torch initialized: nothing of ours to learn
            restore()
            return original(*args, **kwargs)
        stack = traceback.extract_stack()[:-1]
        try:
            return original(*args, **kwargs)
        finally:
            if initialized():
                if _first.stack is None:
                    _first.stack = stack
                restore()  # every later call pays nothing

    lazy_init._coldcompile_watched = True  # type: ignore[attr-defined]
    for name in _BOUND:
        bound = sys.modules.get(name)
        if bound is not None and getattr(bound, "_lazy_init", None) is original:
            bound._lazy_init = lazy_init  # type: ignore[attr-defined]


class CudaInitWatch:
    """In the pytest process, from before its first conftest: notes the first step after which
    CUDA is found initialized; its stack, when torch did it, comes from the _lazy_init hook."""

    def __init__(self) -> None:
        self.done = False
        import_hooks.when_imported("torch.cuda", _wrap_lazy_init)

    def note(self, step: str) -> None:
        if self.done:
            return
        if _first.stack is not None or cuda.torch_cuda_initialized() or (
                cuda.cuda_driver_initialized()):
            self.done = True
            _first.step = step

    def pytest_plugin_registered(self, plugin: object) -> None:
        path = getattr(plugin, "__file__", None)
        if isinstance(path, str) and os.path.basename(path) == "conftest.py":
            self.note(f"while importing {path}")

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Any:
        report = yield
        if isinstance(collector, pytest.Module):
            self.note(f"while collecting {collector.nodeid}")
        return report

    def pytest_collection_finish(self) -> None:
        self.note("during collection")

    def pytest_coldcompile_explain_mode(self, mode: str, reason: str) -> str | None:
        """Who initialized CUDA, when the watcher saw it happen."""
        self.note("before the first test")
        return _first.describe() if self.done else None

    def pytest_coldcompile_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.done:
            return
        terminalreporter.write_line("cold-compile: " + _first.describe(), yellow=True)
        for line in _first.stack_lines():
            terminalreporter.write_line(line)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        """Only where every test runs cold: the header comes before collection, and a session
        that runs no cold test hears nothing of this plugin. Marked tests hear it after
        collection, in the engine's line (auto's reason) and the summary."""
        if not self.done or not options.settings(config).cold_all:
            return []
        return [f"cold-compile: {_first.describe()}"]


WATCH_NAME = "coldcompile-cuda-init"


def watch(early_config: pytest.Config) -> None:
    """Start watching in the pytest process (not in a cold child, not for spawn mode)."""
    ns = early_config.known_args_namespace
    if getattr(ns, "cold_compile_child", None) or getattr(ns, "cold_compile_mode", None) == "spawn":
        return
    if early_config.pluginmanager.get_plugin(WATCH_NAME) is None:
        early_config.pluginmanager.register(CudaInitWatch(), WATCH_NAME)
