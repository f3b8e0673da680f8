"""Collection's CUDA device queries, answered from a probe process (device_probe.py), so that
importing conftests and test modules never initializes CUDA in the pytest process and ``auto``
can keep forking. Owns the wrappers on torch.cuda's query functions, when they answer (from
pytest_load_initial_conftests until collection finishes, in the pytest process only), and the
account of what was answered that ``auto``'s mode_reason and the header give.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

import pytest

from pytest_coldcompile import import_hooks
from pytest_coldcompile.devices import cuda
from pytest_coldcompile.devices.device_probe import DeviceProperties, Probe, Record, ask

PLUGIN_NAME = "coldcompile-device-queries"


class _PassThrough(Exception):
    """Not answerable from the record: the original takes the call."""

_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_FRAMEWORK_DIRS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (pytest.__file__, getattr(sys.modules.get("_pytest"), "__file__", None),
                 getattr(sys.modules.get("pluggy"), "__file__", None))
    if path
)
# Named queries, at most this many, in the account.
_NAMED = 3


class _Answering:
    """The process's answering state: one per pytest process that collects."""

    def __init__(self) -> None:
        self.on = False
        self.record: Record | None = None
        self.module: ModuleType | None = None
        self.originals: dict[str, Callable[..., Any]] = {}
        self.count = 0
        self.where: dict[str, None] = {}  # "torch.cuda.f from file:line", first seen first
        self.declined = ""  # why queries went to the driver after all
        self.depth = threading.local()  # an answer asking another query counts once
        self.lock = threading.Lock()

    def answers(self) -> Record | None:
        """The probe's record when queries are answered now, else None."""
        if not self.on or cuda.torch_cuda_initialized():
            return None  # initialized already: torch's own answers cost nothing more
        with self.lock:
            if self.record is None:
                probe = _start_probe()
                if probe is None:  # nothing to answer from, nor to gain: torch answers as ever
                    self.record = Record(failed="no NVIDIA driver")
                else:
                    self.record = probe.record()
                    if not self.record.usable():
                        self.declined = (self.record.failed
                                         or "the probe process saw no usable CUDA device")
        return self.record if self.record.usable() else None

    def note(self, name: str, frame: FrameType | None) -> None:
        self.count += 1
        if len(self.where) < _NAMED + 1:
            self.where.setdefault(f"torch.cuda.{name} from {_user_location(frame)}")


_state = _Answering()


def _start_probe() -> Probe | None:
    """The probe; None on a machine without an NVIDIA driver (the originals answer then, as
    they would without this plugin)."""
    if not os.path.exists(cuda.NVIDIA_CONTROL) or _state.module is None:
        return None
    module = _state.module

    def in_child() -> dict[str, Any]:
        _state.on = False  # torch's own functions, through the wrappers, in the probe child
        return ask(module)

    return Probe(in_child)


def _user_location(frame: FrameType | None) -> str:
    """file:line of the innermost caller outside torch, this plugin, pytest and the importer."""
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None)
    torch_dir = os.path.dirname(os.path.abspath(torch_file)) + os.sep if torch_file else None
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith("<frozen"):
            full = os.path.abspath(path)
            if not (full.startswith(_OWN_DIR) or full.startswith(_FRAMEWORK_DIRS)
                    or (torch_dir and full.startswith(torch_dir))):
                return f"{_short(full)}:{frame.f_lineno}"
        frame = frame.f_back
    return "torch"


def _short(path: str) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


# -- the answers, each as torch.cuda computes it once CUDA is initialized ----------------------

def _index(module: ModuleType, record: Record, device: Any) -> int:
    if device is None:
        return record.current_device
    resolve = getattr(module, "_get_device_index", None)  # torch's own: same errors as torch
    index = resolve(device, optional=True) if resolve is not None else int(device)
    if index < 0 or index >= len(record.devices):
        raise AssertionError("Invalid device id")  # torch's own message
    return int(index)


def _properties(module: ModuleType, record: Record, device: Any = None) -> DeviceProperties:
    return record.devices[_index(module, record, device)]


def _capability(module: ModuleType, record: Record, device: Any = None) -> tuple[int, int]:
    props = _properties(module, record, device)
    return props.major, props.minor  # type: ignore[attr-defined]


def _name(module: ModuleType, record: Record, device: Any = None) -> str:
    return str(_properties(module, record, device).name)  # type: ignore[attr-defined]


def _current_device(module: ModuleType, record: Record) -> int:
    return record.current_device


def _bf16(module: ModuleType, record: Record, including_emulation: bool = True) -> bool:
    if record.bf16 is None:
        raise _PassThrough
    return record.bf16[bool(including_emulation)]


def _is_available(module: ModuleType, record: Record) -> bool:
    return record.is_available


def _rocm() -> bool:
    return bool(getattr(getattr(sys.modules.get("torch"), "version", None), "hip", None))


# Calls that initialize nothing as torch makes them: the original takes them, and no probe
# is started for them.
HARMLESS: dict[str, Callable[[], bool]] = {
    # torch asks NVML then (the plugin sets the variable unless the user did)
    "is_available": lambda: os.getenv("PYTORCH_NVML_BASED_CUDA_CHECK") == "1",
    "is_bf16_supported": _rocm,  # ROCm answers True without asking the device
}


ANSWERS: dict[str, Callable[..., Any]] = {
    "current_device": _current_device,
    "get_device_properties": _properties,
    "get_device_capability": _capability,
    "get_device_name": _name,
    "is_bf16_supported": _bf16,
    "is_available": _is_available,
}


def _wrap(module: ModuleType, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    answer = ANSWERS[name]
    harmless = HARMLESS.get(name, lambda: False)

    @functools.wraps(original)
    def query(*args: Any, **kwargs: Any) -> Any:
        if not _state.on or harmless():  # the cheap path of every call after collection
            return original(*args, **kwargs)
        record = _state.answers()
        if record is None:
            return original(*args, **kwargs)
        depth = getattr(_state.depth, "n", 0)
        _state.depth.n = depth + 1
        try:
            value = answer(module, record, *args, **kwargs)
        except _PassThrough:
            return original(*args, **kwargs)
        finally:
            _state.depth.n = depth
        if depth == 0:
            _state.note(name, sys._getframe(1))
        return value

    query._coldcompile_answers = original  # type: ignore[attr-defined]
    return query


def _install_on(module: ModuleType) -> None:
    """On torch.cuda, the moment it is imported (or now): wrap its queries."""
    if not _state.on or _state.module is not None:
        return
    _state.module = module
    for name in ANSWERS:
        original = getattr(module, name, None)
        if callable(original) and not hasattr(original, "_coldcompile_answers"):
            _state.originals[name] = original
            setattr(module, name, _wrap(module, name, original))


def stop() -> None:
    """Collection is over: torch.cuda's own functions again (holders of a wrapper get the
    original through it)."""
    _state.on = False
    import_hooks.forget("torch.cuda", _install_on)
    module = _state.module
    if module is not None:
        for name, original in _state.originals.items():
            if getattr(getattr(module, name, None), "_coldcompile_answers", None) is original:
                setattr(module, name, original)


class _Stopper:
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self) -> None:
        stop()

    def pytest_unconfigure(self) -> None:
        stop()  # a session whose collection never finished


def install(early_config: pytest.Config, mode: Callable[[], str],
            wanted: Callable[[], bool]) -> None:
    """From pytest_load_initial_conftests: answer device queries until collection finishes, in
    the pytest process of a session that may fork (mode() auto or fork), unless wanted() (the
    ini key) says no. Not in a cold child or an xdist controller, which never forks cold
    children. Both callables may raise pytest.UsageError, which pytest_configure reports."""
    ns = early_config.known_args_namespace
    if getattr(ns, "cold_compile_child", None) or not hasattr(os, "fork"):
        return
    if os.environ.get("PYTEST_XDIST_WORKER") is None and (
        getattr(ns, "numprocesses", None) or getattr(ns, "tx", None)
    ):
        return
    try:
        if mode() not in ("auto", "fork") or not wanted():
            return
    except pytest.UsageError:
        return  # pytest_configure reports it
    early_config.pluginmanager.register(_Stopper(), PLUGIN_NAME)
    start()


def start() -> None:
    """Answer device queries from now until stop(), wrapping torch.cuda now or when imported."""
    global _state
    stop()  # an earlier in-process run's
    _state = _Answering()
    _state.on = True
    import_hooks.when_imported("torch.cuda", _install_on)


def account() -> str:
    """What was answered, for auto's reason; empty when nothing was."""
    if not _state.count:
        return ""
    named = list(_state.where)
    listed = ", ".join(named[:_NAMED]) + (", ..." if len(named) > _NAMED else "")
    what = "query" if _state.count == 1 else "queries"
    return (f"collection's {_state.count} device {what} ({listed}) "
            f"{'was' if _state.count == 1 else 'were'} answered from a probe process")


def answered_any() -> bool:
    """Whether collection asked the device anything that was answered from the probe."""
    return _state.count > 0


def declined() -> str:
    """Why device queries went to the driver although answering was on; empty otherwise."""
    return _state.declined


def header_lines() -> list[str]:
    said = account()
    if said:
        return [f"cold-compile: so far {said}"]
    if _state.declined:
        return [f"cold-compile: device queries were not answered: {_state.declined}"]
    return []
