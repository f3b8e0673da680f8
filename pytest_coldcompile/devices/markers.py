"""The device markers: ``requires_cuda`` and ``requires_smem`` decide from device facts that
never initialize CUDA in the pytest process, and skip saying what was missing: the driver, a
device, or a CUDA build of torch."""

from __future__ import annotations

import ast
import importlib.util
import os
import sys

import pytest

from pytest_coldcompile.devices import cuda


def _gpu() -> cuda.Gpu | None:
    gpus = cuda.facts().gpus
    return gpus[0] if gpus else None


def _version_file_fields(text: str) -> dict[str, object]:
    """The constant assignments of torch/version.py (``cuda = '12.8'``, ``__version__ = ...``)."""
    fields: dict[str, object] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            fields[target.id] = value.value
    return fields


def torch_build() -> tuple[str, bool] | None:
    """(torch's version, whether it is built for a GPU (CUDA or ROCm)), None without torch.

    An imported torch answers from torch.version. Otherwise torch/version.py is read as text,
    not imported: importing torch initializes no CUDA either (torch.cuda.is_initialized() stays
    False), but costs seconds and maps libcuda into this process.
    """
    torch = sys.modules.get("torch")
    version = getattr(torch, "version", None)
    if version is not None:
        gpu = bool(getattr(version, "cuda", None) or getattr(version, "hip", None))
        return str(getattr(version, "__version__", getattr(torch, "__version__", "?"))), gpu
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = os.path.join(location, "version.py")
        try:
            with open(path, encoding="utf-8") as f:
                fields = _version_file_fields(f.read())
        except (OSError, SyntaxError, ValueError):
            continue
        return str(fields.get("__version__", "?")), bool(fields.get("cuda") or fields.get("hip"))
    return None


def missing_for_cuda() -> list[str]:
    """What keeps this process from using CUDA: no driver or device, a CPU build of torch."""
    missing = []
    if _gpu() is None:
        missing.append(cuda.facts().describe_none())
    build = torch_build()
    if build is not None and not build[1]:
        missing.append(f"torch {build[0]} is a CPU build")
    return missing


def skip_unless_device(
    needs_cuda: bool, needs_smem: int | None, limit: int | None, source: str
) -> None:
    what = "requires_cuda" if needs_smem is None else f"requires_smem({needs_smem})"
    missing = missing_for_cuda()
    if missing:
        pytest.skip(f"{what}: needs a CUDA device; {'; '.join(missing)}")
    gpu = _gpu()
    assert gpu is not None  # missing_for_cuda() names its absence
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
