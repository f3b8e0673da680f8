"""The device markers: ``requires_cuda`` and ``requires_smem`` decide from device facts that
never initialize CUDA in the pytest process, and skip saying what was missing."""

from __future__ import annotations

import pytest

from pytest_coldcompile import device


def _gpu() -> device.Gpu | None:
    gpus = device.facts().gpus
    return gpus[0] if gpus else None


def skip_unless_device(
    needs_cuda: bool, needs_smem: int | None, limit: int | None, source: str
) -> None:
    gpu = _gpu()
    what = "requires_cuda" if needs_smem is None else f"requires_smem({needs_smem})"
    if gpu is None:
        pytest.skip(f"{what}: needs a CUDA device; {device.facts().describe_none()}")
    if needs_smem is None:
        return
    offered = gpu.smem_optin if limit is None else min(gpu.smem_optin, limit)
    if offered < needs_smem:
        lowered = (
            f", lowered to {limit} by {source}"
            if limit is not None and limit < gpu.smem_optin
            else ""
        )
        pytest.skip(
            f"{what}: needs {needs_smem} bytes of shared memory per block; {gpu.name} offers "
            f"{gpu.smem_optin} (opt-in){lowered}"
        )
