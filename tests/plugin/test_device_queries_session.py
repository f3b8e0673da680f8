"""A stand-in for a heavy GPU suite (issue #40): a generated module of thousands of parametrized
items whose conftest asks the device the way Triton's driver does, run cold on the CPU.

A fake ``torch`` package stands for torch: its ``torch.cuda._lazy_init`` writes the pid of the
process that initializes "CUDA" to a log and sets ``is_initialized()`` (which the plugin reads),
and every query calls it first, as torch's do. A plugin loaded with ``-p`` points the plugin's
NVIDIA driver file at a file that exists, so the probe process runs (importing this fake torch).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coldhelp import LIGHT_PRELOAD, modules_importable_by_name, needs_fork, run

pytestmark = needs_fork

FAKE_TORCH_CUDA = """
import os
_initialized = False

class _CudaDeviceProperties:
    def __init__(self, index):
        self.name, self.major, self.minor = "Fake H200", 9, 0
        self.total_memory, self.multi_processor_count = 150_000_000_000 + index, 132
    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory >> 20}MB)")

def is_initialized():
    return _initialized

def _lazy_init():
    global _initialized
    if not _initialized:
        with open(os.environ["FAKE_CUDA_LOG"], "a") as log:
            log.write(f"{os.getpid()}\\n")
        _initialized = True

def is_available():
    return True  # as through NVML: initializes nothing

def init():
    _lazy_init()

def synchronize():
    _lazy_init()

def device_count():
    return 2

def _get_device_index(device, optional=False):
    return current_device() if device is None else int(str(device).rpartition(":")[2])

def current_device():
    _lazy_init()
    return 0

def get_device_properties(device=None):
    _lazy_init()
    return _CudaDeviceProperties(_get_device_index(device, optional=True))

def get_device_capability(device=None):
    props = get_device_properties(device)
    return props.major, props.minor

def get_device_name(device=None):
    return get_device_properties(device).name

def zeros(n):  # allocating a CUDA tensor
    _lazy_init()
    return [0] * n

ORIGINALS = dict(current_device=current_device, get_device_capability=get_device_capability,
                 get_device_properties=get_device_properties, get_device_name=get_device_name)
"""

# Triton's GPUDriver binds torch.cuda's functions when it is made; get_current_target asks them.
TRITONLIKE = """
import torch

class Driver:
    def __init__(self):
        self.get_device_capability = torch.cuda.get_device_capability
        self.get_current_device = torch.cuda.current_device

    def get_current_target(self):
        device = self.get_current_device()
        return ("cuda", *self.get_device_capability(device))

active = Driver()
"""

CONFTEST = """
import os
import torch
import tritonlike

with open("pytest-pid", "a") as f:
    f.write(f"{os.getpid()}\\n")
TARGET = tritonlike.active.get_current_target()
NAME = torch.cuda.get_device_name(1)
PROPS = repr(torch.cuda.get_device_properties("cuda:1"))
"""

HEAVY = """
import os
import pytest
import torch
import tritonlike

AT_COLLECTION = tritonlike.active.get_current_target()
pytestmark = pytest.mark.skipif(torch.cuda.get_device_capability()[0] < 8, reason="needs sm_80")

@pytest.mark.parametrize("i", range(3000))
def test_kernel(i):
    with open("initialized-at-start", "a") as f:
        f.write(f"{torch.cuda.is_initialized()}\\n")
    if i % 3 == 2:
        pytest.skip("a variant this device lacks")
    assert torch.cuda.get_device_capability is torch.cuda.ORIGINALS["get_device_capability"]
    assert tritonlike.active.get_current_target() == AT_COLLECTION  # through the held wrappers
    assert repr(torch.cuda.get_device_properties(1)).startswith("_CudaDeviceProperties(")
    assert torch.cuda.is_initialized()
    with open("test-pids", "a") as f:
        f.write(f"{os.getpid()}\\n")
"""

SELECTED = [f"test_heavy.py::test_kernel[{i}]" for i in (0, 1, 2, 2998)]


def _heavy_suite(pytester: pytest.Pytester, conftest_extra: str = "") -> None:
    torch = pytester.path / "torch"
    (torch / "cuda").mkdir(parents=True)
    (torch / "__init__.py").write_text("from . import cuda\n")
    (torch / "cuda" / "__init__.py").write_text(FAKE_TORCH_CUDA)
    modules_importable_by_name(pytester)
    pytester._monkeypatch.setenv("FAKE_CUDA_LOG", str(pytester.path / "cuda-init-pids"))
    (pytester.path / "nvidiactl").touch()
    pytester.makepyfile(
        fakedriver="import pytest_coldcompile.devices.cuda as d\n"
        f"d.NVIDIA_CONTROL = {str(pytester.path / 'nvidiactl')!r}\n",
        tritonlike=TRITONLIKE,
        test_heavy=HEAVY,
    )
    pytester.makeconftest(CONFTEST + conftest_extra)


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _reset(pytester: pytest.Pytester) -> None:
    for name in ("cuda-init-pids", "pytest-pid", "test-pids", "initialized-at-start"):
        (pytester.path / name).unlink(missing_ok=True)


def test_a_heavy_suite_whose_collection_asks_the_device_forks_and_never_initializes_cuda(
    pytester: pytest.Pytester,
) -> None:
    _heavy_suite(pytester)
    plain = run(pytester, "-p", "fakedriver", *SELECTED)
    plain.assert_outcomes(passed=3, skipped=1)
    _reset(pytester)

    result = run(pytester, "-p", "fakedriver", *LIGHT_PRELOAD, "--cold-compile",
                 "--cold-compile-report=cold.json", *SELECTED)
    assert result.parseoutcomes() == plain.parseoutcomes()
    parent, *recollected = _lines(pytester.path / "pytest-pid")
    initialized = _lines(pytester.path / "cuda-init-pids")
    children = _lines(pytester.path / "test-pids")
    assert parent not in initialized, "the pytest process initialized CUDA"
    assert not recollected, "forked children do not import the conftest again"
    assert len(children) == 3 and parent not in children
    assert set(children) <= set(initialized), "each child initialized CUDA itself, for real"
    # ini cold_compile_cuda_ahead auto: collection asked the device, so each child made its
    # context before its test began, as in-process every test finds CUDA initialized.
    assert _lines(pytester.path / "initialized-at-start") == ["True"] * 4
    reason = (
        "auto: collection's 7 device queries (torch.cuda.current_device from tritonlike.py:9, "
        "torch.cuda.get_device_capability from tritonlike.py:10, torch.cuda.get_device_name "
        "from conftest.py:8, ...) were answered from a probe process; the pytest process never "
        "initialized CUDA, forking is safe; each child creates its CUDA context before its test "
        "(cold_compile_cuda_ahead auto: collection asked the device)"
    )
    records = json.loads((pytester.path / "cold.json").read_text())
    assert {r["mode"] for r in records.values()} == {"fork"}
    assert {r["mode_reason"] for r in records.values()} == {reason}
    assert {r["cuda_ahead"] for r in records.values()} == {True}
    out = result.stdout.str()
    assert f"cold-compile: fork ({reason})" in out
    assert f"run as fork ({reason})" in out
    header = out.split("collected")[0]
    assert ("cold-compile: so far collection's 4 device queries (torch.cuda.current_device from "
            "tritonlike.py:9, ") in header  # the conftest's, before the test module's


@pytest.mark.parametrize("forked_ahead", ["1", "3"])
def test_cuda_ahead_false_leaves_each_child_to_initialize_cuda_in_its_test(
    pytester: pytest.Pytester, forked_ahead: str
) -> None:
    _heavy_suite(pytester)
    result = run(pytester, "-p", "fakedriver", *LIGHT_PRELOAD, "--cold-compile",
                 "-o", "cold_compile_cuda_ahead=false", "-o",
                 f"cold_compile_forked_ahead={forked_ahead}",
                 "--cold-compile-report=cold.json", *SELECTED)
    result.assert_outcomes(passed=3, skipped=1)
    assert _lines(pytester.path / "initialized-at-start") == ["False"] * 4
    records = json.loads((pytester.path / "cold.json").read_text())
    assert {r["cuda_ahead"] for r in records.values()} == {False}
    (reason,) = {r["mode_reason"] for r in records.values()}
    assert "CUDA context" not in reason, reason
    assert reason.endswith("forking is safe" + ("; 3 children forked ahead"
                                                 if forked_ahead == "3" else "")), reason


def test_a_suite_whose_collection_asked_nothing_makes_no_context_ahead(
    pytester: pytest.Pytester,
) -> None:
    _heavy_suite(pytester)
    pytester.makeconftest("")
    # Nothing asks the device at collection; the tests do.
    pytester.makepyfile(test_heavy="""
import pytest
import torch

@pytest.mark.parametrize("i", range(3000))
def test_kernel(i):
    with open("initialized-at-start", "a") as f:
        f.write(f"{torch.cuda.is_initialized()}\\n")
    assert torch.cuda.get_device_capability() == (9, 0)
""")
    result = run(pytester, "-p", "fakedriver", *LIGHT_PRELOAD, "--cold-compile",
                 "--cold-compile-report=cold.json", *SELECTED)
    result.assert_outcomes(passed=4)
    assert _lines(pytester.path / "initialized-at-start") == ["False"] * 4
    records = json.loads((pytester.path / "cold.json").read_text())
    assert {r["cuda_ahead"] for r in records.values()} == {False}


def test_answering_turned_off_leaves_the_queries_to_the_driver(pytester: pytest.Pytester) -> None:
    _heavy_suite(pytester)
    result = run(pytester, "-p", "fakedriver", *LIGHT_PRELOAD, "--cold-compile",
                 "-o", "cold_compile_answer_device_queries=false",
                 "--cold-compile-report=cold.json", *SELECTED[:2])
    result.assert_outcomes(passed=2)
    parent = _lines(pytester.path / "pytest-pid")[0]  # then the zygote's children
    assert parent in _lines(pytester.path / "cuda-init-pids")
    records = json.loads((pytester.path / "cold.json").read_text())
    assert {r["mode"] for r in records.values()} == {"zygote"}


def test_a_conftest_that_really_uses_the_device_falls_back_to_the_zygote(
    pytester: pytest.Pytester,
) -> None:
    _heavy_suite(pytester, "\nBUFFER = torch.cuda.zeros(4)\n")
    result = run(pytester, "-p", "fakedriver", *LIGHT_PRELOAD, "--cold-compile",
                 "--cold-compile-report=cold.json", *SELECTED)
    result.assert_outcomes(passed=3, skipped=1)
    (parent, *recollected) = _lines(pytester.path / "pytest-pid")
    assert parent in _lines(pytester.path / "cuda-init-pids")
    assert len(recollected) == 4, "each zygote child imported the conftest again"
    records = json.loads((pytester.path / "cold.json").read_text())
    assert {r["mode"] for r in records.values()} == {"zygote"}
    (reason,) = {r["mode_reason"] for r in records.values()}
    assert reason.startswith("auto: the pytest process initialized the CUDA driver during "
                             "collection; forking from the zygote"), reason
    assert ("CUDA first initialized by torch.cuda._lazy_init, called from "
            f"{pytester.path / 'conftest.py'}:11 (in <module>)") in reason



REAL_CONFTEST = """
import torch
from triton.runtime import driver

TARGET = driver.active.get_current_target()
PROPS = repr(torch.cuda.get_device_properties(0))
NAME = torch.cuda.get_device_name()
"""

REAL_MODULE = """
import pytest
import torch
from conftest import NAME, PROPS, TARGET
from triton.runtime import driver

@pytest.mark.skipif(torch.cuda.get_device_capability() < (7, 0), reason="needs sm_70")
@pytest.mark.parametrize("i", range(3000))
def test_op(i, cold_state):
    assert cold_state.mode == "fork"
    assert torch.full((4,), 2.0, device="cuda").sum().item() == 8.0
    assert repr(torch.cuda.get_device_properties(0)) == PROPS
    assert (driver.active.get_current_target(), torch.cuda.get_device_name()) == (TARGET, NAME)
"""


@pytest.mark.requires_cuda
def test_on_a_gpu_collections_real_queries_are_answered_and_children_use_cuda(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(REAL_CONFTEST)
    pytester.makepyfile(test_real=REAL_MODULE)
    result = run(pytester, "--cold-compile", "--cold-compile-report=cold.json",
                 *(f"test_real.py::test_op[{i}]" for i in (0, 1, 2999)))
    result.assert_outcomes(passed=3)
    (reason,) = {r["mode_reason"] for r in json.loads((pytester.path / "cold.json").read_text())
                 .values()}
    assert reason.startswith("auto: collection's ") and "were answered from a probe" in reason
    assert "torch.cuda.current_device from " in reason, reason
    result.stdout.fnmatch_lines(["*torch.cuda initialized: no*"])
