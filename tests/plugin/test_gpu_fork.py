"""GPU tests of forked cold children and of GPU assignment under xdist (skipped without a GPU).

Nothing here touches CUDA at collection (importing torch and triton does not load the CUDA
driver), so `auto` forks: the fork server was forked before any test ran, so its children
may initialize CUDA themselves, even after an in-process test did.
"""

from __future__ import annotations

import os

import pytest
import triton
import triton.language as tl


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

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    record_property("worker", worker)
    record_property("cuda_visible_devices", os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    record_property("device_count", torch.cuda.device_count())
    record_property("gpu", _gpu_identity())
    torch.ones(4, device="cuda").sum().item()
    if worker:
        assert torch.cuda.device_count() == 1


@pytest.mark.requires_cuda
def test_warm_triton_kernel_in_process():
    """Runs in the pytest process and leaves a compiled kernel in Triton's cache there."""
    assert _bump() == [1.0] * 16
    assert _jit_cache_entries() == 1


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
def test_cold_child_does_not_inherit_the_warm_triton_kernel(cold_state):
    from pytest_coldcompile import device

    assert device.cuda_driver_loaded() is False, "the fork server was forked before CUDA"
    assert _jit_cache_entries() == 0, "the warm test's kernel is in this child"
    assert _bump() == [1.0] * 16
    assert _jit_cache_entries() == 1
    triton_cache = os.path.join(cold_state.cache_dir, "triton", "cache")
    assert os.listdir(triton_cache), "the kernel was not compiled into the private cache"
