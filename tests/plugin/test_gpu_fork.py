"""GPU tests of forked cold children and of GPU assignment under xdist (skipped without a GPU).

Nothing here touches CUDA at collection, so `auto` forks: the fork server was forked before
any test ran, so its children may initialize CUDA themselves.
"""

from __future__ import annotations

import os

import pytest


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
