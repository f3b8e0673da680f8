"""The test harness's one seam (gridpair/harness.py): the only gridpair module that reads the
variables, and what each of them changes in the limits validation targets."""

import ast
from pathlib import Path

import pytest
import torch

import gridpair
from gridpair import devices, harness

PACKAGE = Path(gridpair.__file__).parent


def test_only_the_seam_reads_the_harness_variables():
    readers = []
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text())
        names = {node.value for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str)}
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "pytest_coldcompile.protocol" for alias in node.names}
        if {"GRIDPAIR_DEVICE", "PYTEST_COLDCOMPILE_SMEM_LIMIT"} & names or (
                "SMEM_LIMIT_ENV" in imported):
            readers.append(path.name)
    assert readers == ["harness.py"]


def test_without_the_variables_a_cpu_tensor_is_not_validated(monkeypatch):
    monkeypatch.delenv(harness.DEVICE_ENV, raising=False)
    monkeypatch.delenv(harness.SMEM_LIMIT_ENV, raising=False)
    assert devices.limits_for(torch.device("cpu")) is None


def test_a_profile_and_a_cap_through_the_seam(monkeypatch):
    monkeypatch.setenv(harness.DEVICE_ENV, "h100")
    monkeypatch.delenv(harness.SMEM_LIMIT_ENV, raising=False)
    limits = devices.limits_for(torch.device("cpu"))
    assert (limits.arch, limits.shared, limits.physical) == (
        90, devices.PROFILES["h100"].shared_per_block, False)
    monkeypatch.setenv(harness.SMEM_LIMIT_ENV, "50000")
    assert devices.limits_for(torch.device("cpu")).shared == 50000
    monkeypatch.setenv(harness.SMEM_LIMIT_ENV, "-1")
    with pytest.raises(ValueError, match="PYTEST_COLDCOMPILE_SMEM_LIMIT: expected a positive"):
        devices.limits_for(torch.device("cpu"))
