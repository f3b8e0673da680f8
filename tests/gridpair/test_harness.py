"""The test harness's one seam (gridpair/harness.py): the only gridpair module that reads the
variables, and what each of them changes in the limits validation targets."""

import pytest
import torch

from gridpair import devices, harness

# The CUDA C++ Programming Guide's per-block opt-in shared memory of compute capability 9.0:
# 227 KB.
H100_SHARED_PER_BLOCK = 227 * 1024


def test_validation_reads_the_variables_through_the_seam_alone(monkeypatch):
    """The limits follow what the seam answers, whatever the environment says: no other module
    reads the variables behind its back."""
    monkeypatch.setenv(harness.DEVICE_ENV, "h100")
    monkeypatch.setenv(harness.SMEM_LIMIT_ENV, "50000")
    monkeypatch.setattr(harness, "emulated_profile", lambda: "l40s")
    monkeypatch.setattr(harness, "shared_memory_cap", lambda: 40000)
    monkeypatch.setattr(harness, "state", lambda: ("seam", "40000"))
    limits = devices.limits_for(torch.device("cpu"))
    assert (limits.arch, limits.shared) == (89, 40000)


def test_the_cap_variable_is_the_protocols():
    """The plugin sets the cap under this name (the selector protocol fixes it); gridpair
    spells it out instead of importing the plugin."""
    protocol = pytest.importorskip("pytest_coldcompile.protocol")
    assert harness.SMEM_LIMIT_ENV == protocol.SMEM_LIMIT_ENV


def test_without_the_variables_a_cpu_tensor_is_not_validated(monkeypatch):
    monkeypatch.delenv(harness.DEVICE_ENV, raising=False)
    monkeypatch.delenv(harness.SMEM_LIMIT_ENV, raising=False)
    assert devices.limits_for(torch.device("cpu")) is None


def test_a_profile_and_a_cap_through_the_seam(monkeypatch):
    monkeypatch.setenv(harness.DEVICE_ENV, "h100")
    monkeypatch.delenv(harness.SMEM_LIMIT_ENV, raising=False)
    limits = devices.limits_for(torch.device("cpu"))
    assert (limits.arch, limits.shared, limits.physical) == (
        90, H100_SHARED_PER_BLOCK, False)
    monkeypatch.setenv(harness.SMEM_LIMIT_ENV, "50000")
    assert devices.limits_for(torch.device("cpu")).shared == 50000
    monkeypatch.setenv(harness.SMEM_LIMIT_ENV, "-1")
    with pytest.raises(ValueError, match="PYTEST_COLDCOMPILE_SMEM_LIMIT: expected a positive"):
        devices.limits_for(torch.device("cpu"))
