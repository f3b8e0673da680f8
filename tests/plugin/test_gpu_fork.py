"""GPU tests of forked and zygote cold children and of GPU assignment under xdist (skipped
without a GPU).

Nothing here initializes CUDA at collection (importing torch and triton maps libcuda but does
not initialize it), so `auto` forks: the fork server was forked before any test ran, so its
children may initialize CUDA themselves, even after an in-process test did. The pytester runs
at the end make collection initialize CUDA, where `auto` must use the zygote.
"""

from __future__ import annotations

import json
import os
from importlib import metadata
from xml.etree import ElementTree

import pytest
import triton
import triton.language as tl
from coldhelp import conftest, run


@triton.jit
def _add_one(x_ptr, n, BLOCK: tl.constexpr):
    """x[:n] += 1 for n <= BLOCK."""
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


def _jit_cache_entries() -> int:
    # Triton's in-memory kernel cache of _add_one, per device: (kernels, keys, ...).
    return sum(len(entry[0]) for entry in _add_one.device_caches.values())


def _bump(n: int = 16) -> list[float]:
    import torch

    x = torch.zeros(n, device="cuda")
    _add_one[(1,)](x, n, BLOCK=16)
    return x.tolist()


def _gpu_identity() -> str:
    import torch

    props = torch.cuda.get_device_properties(0)
    return str(getattr(props, "uuid", "")) or props.name


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
def test_forked_child_uses_cuda(cold_state, record_property):
    import torch

    record_property("mode", cold_state.mode)
    x = torch.arange(8, device="cuda", dtype=torch.float32)
    assert torch.compile(lambda t: t * 2)(x).tolist() == [2.0 * i for i in range(8)]


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
@pytest.mark.parametrize("i", range(4))
def test_each_worker_child_sees_one_gpu(i, record_property):
    import torch

    from pytest_coldcompile.devices import cuda

    worker = cuda.xdist_worker_index()
    record_property("worker", os.environ.get("PYTEST_XDIST_WORKER", ""))
    record_property("cuda_visible_devices", os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    record_property("device_count", torch.cuda.device_count())
    record_property("gpu", _gpu_identity())
    assert torch.ones(4, device="cuda").sum().item() == 4.0
    if worker is None:
        # Not narrowed: the child sees what a probe of this environment sees, all of it.
        assert torch.cuda.device_count() == len(cuda.facts().gpus) >= 1
    else:
        assert torch.cuda.device_count() == 1
        assert os.environ["CUDA_VISIBLE_DEVICES"], "a worker's child is given one GPU"


@pytest.mark.requires_cuda
def test_warm_triton_kernel_in_process():
    """Runs in the pytest process and leaves a compiled kernel in Triton's cache there."""
    assert _bump() == [1.0] * 16
    assert _jit_cache_entries() == 1


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
def test_cold_child_does_not_inherit_the_warm_triton_kernel(cold_state):
    from pytest_coldcompile.devices import cuda

    assert cuda.cuda_driver_initialized() is False, "the fork server was forked before CUDA"
    assert _jit_cache_entries() == 0, "the warm test's kernel is in this child"
    assert _bump() == [1.0] * 16
    assert _jit_cache_entries() == 1
    triton_cache = os.path.join(cold_state.cache_dir, "triton", "cache")
    assert os.listdir(triton_cache), "the kernel was not compiled into the private cache"


GPU_PER_WORKER = """
import os, pytest, torch

@pytest.mark.parametrize("i", range(6))
def test_gpu(i, record_property, cold_state, worker_id):
    props = torch.cuda.get_device_properties(0)
    record_property("worker", worker_id)
    record_property("gpu", str(getattr(props, "uuid", "")) or props.name)
    record_property("device_count", torch.cuda.device_count())
    assert torch.ones(4, device="cuda").sum().item() == 4.0
"""

# Collection initializes CUDA in the pytest process (a conftest making a CUDA tensor).
CUDA_AT_COLLECTION = "import torch\n_ON_GPU = torch.zeros(1, device='cuda')\n"


def _plugin_args() -> list[str]:
    # Not installed (the GPU machine runs from the repository): name the plugin explicitly.
    names = {ep.name for ep in metadata.entry_points(group="pytest11")}
    return [] if "coldcompile" in names else ["-p", "pytest_coldcompile.plugin"]


def _two_gpus() -> None:
    from pytest_coldcompile.devices import cuda

    if len(cuda.facts().gpus) < 2:
        pytest.skip("needs two GPUs")


@pytest.mark.parametrize(
    ("mode", "collection_cuda", "chosen"),
    [
        ("auto", False, "fork"),
        ("auto", True, "zygote"),
        ("zygote", False, "zygote"),
        ("spawn", False, "spawn"),
    ],
)
def test_xdist_workers_children_use_different_gpus(
    pytester: pytest.Pytester, mode: str, collection_cuda: bool, chosen: str
) -> None:
    _two_gpus()
    pytester.makeconftest(conftest(CUDA_AT_COLLECTION if collection_cuda else ""))
    pytester.makepyfile(test_gpu_per_worker=GPU_PER_WORKER)
    result = run(
        pytester,
        *_plugin_args(),
        "-n",
        "2",
        "--cold-compile",
        f"--cold-compile-mode={mode}",
        "--junitxml=junit.xml",
        "--cold-compile-report=report.json",
        timeout=400,
    )
    result.assert_outcomes(passed=6)
    report = json.loads((pytester.path / "report.json").read_text())
    assert {entry["mode"] for entry in report.values()} == {chosen}
    gpus: dict[str, set[str]] = {}
    for case in ElementTree.parse(pytester.path / "junit.xml").getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert props["device_count"] == "1"
        gpus.setdefault(str(props["worker"]), set()).add(str(props["gpu"]))
    assert set(gpus) == {"gw0", "gw1"}, "both workers ran cold tests"
    assert all(len(seen) == 1 for seen in gpus.values()), gpus
    assert gpus["gw0"] != gpus["gw1"], "the workers' children share a GPU"


CUDA_AT_START = """
import pytest, torch

@pytest.mark.parametrize("i", range(3))
def test_cuda_at_start(i, record_property):
    record_property("initialized_at_start", torch.cuda.is_initialized())
    assert torch.ones(4, device="cuda").sum().item() == 4.0
"""


@pytest.mark.requires_cuda
@pytest.mark.parametrize("ahead", [False, True])
def test_cuda_ahead_creates_the_context_before_the_test_only_when_asked(
    pytester: pytest.Pytester, ahead: bool
) -> None:
    pytester.makepyfile(test_cuda_at_start=CUDA_AT_START)
    result = run(pytester, *_plugin_args(), "--cold-compile", "--cold-compile-mode=fork",
                 "-o", f"cold_compile_cuda_ahead={str(ahead).lower()}", "-p", "no:randomly",
                 "--junitxml=junit.xml", "--cold-compile-report=report.json", timeout=300)
    result.assert_outcomes(passed=3)
    report = json.loads((pytester.path / "report.json").read_text())
    at_start = {}
    for case in ElementTree.parse(pytester.path / "junit.xml").getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        at_start[case.get("name")] = props["initialized_at_start"]
    # Every child, the first too: a child makes its context as soon as it is forked, before
    # any request reaches it.
    assert set(at_start.values()) == {str(ahead)}, at_start
    assert {r["cuda_ahead"] for r in report.values()} == {ahead}
