"""Fixtures of the cold regressions: the device the case runs on (the GPU when there is one,
else the CPU with launch selection compiling for a device profile)."""

import os
import sys
from pathlib import Path

import pytest
import torch

# The numerics helpers (relative_error) live once, beside the gridpair tests.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gridpair"))

CPU_PROFILE = "rtx-pro-6000-blackwell"


@pytest.fixture
def device(monkeypatch):
    """"cuda" on a GPU machine; on the CPU, "cpu" with GRIDPAIR_DEVICE naming a profile so the
    selector still compiles, probes, admits and falls back as it would on that device."""
    if torch.cuda.is_available():  # in the cold child, never in the pytest process
        return "cuda"
    monkeypatch.setenv("GRIDPAIR_DEVICE", os.environ.get("GRIDPAIR_DEVICE", CPU_PROFILE))
    return "cpu"
