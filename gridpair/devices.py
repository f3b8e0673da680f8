"""Device profiles and the limits launch validation targets.

A CUDA operand validates against its real device: Triton's own view of the per-block shared
memory, loaded handles enforcing the rest. A test harness may emulate a profile on a machine
with no GPU, or lower the shared-memory limit, through ``gridpair.harness`` (the one seam).
"""

import functools
from dataclasses import dataclass

import torch

from gridpair import harness
from gridpair.harness import DEVICE_ENV, SMEM_LIMIT_ENV  # noqa: F401  (re-exported names)

# Per-block limits shared by every CUDA architecture we target (CUDA C++ Programming Guide,
# "Technical Specifications per Compute Capability": 1024 threads, 64K 32-bit registers per
# block, 255 registers per thread).
MAX_THREADS_PER_BLOCK = 1024
REGISTERS_PER_BLOCK = 65536

_GUIDE = ("CUDA C++ Programming Guide, Technical Specifications per Compute Capability, "
          "'maximum amount of shared memory per thread block'")


@dataclass(frozen=True)
class DeviceProfile:
    """A GPU as validation sees it: architecture and per-block opt-in shared memory."""

    name: str
    device_name: str
    arch: int
    shared_per_block: int
    source: str

    @property
    def shared_memory_per_block_optin(self) -> int:
        """The same limit under torch's name for it."""
        return self.shared_per_block

    @property
    def max_shared_mem(self) -> int:
        """The same limit under Triton's name for it."""
        return self.shared_per_block


PROFILES: dict[str, DeviceProfile] = {
    profile.name: profile
    for profile in (
        DeviceProfile("a100", "NVIDIA A100-SXM4-80GB", 80, 166912,
                      f"{_GUIDE}: 163 KB for compute capability 8.0; NVIDIA Ampere Tuning Guide"),
        DeviceProfile("l40s", "NVIDIA L40S", 89, 101376,
                      f"{_GUIDE}: 99 KB for compute capability 8.9; NVIDIA Ada Tuning Guide"),
        DeviceProfile("rtx-4090", "NVIDIA GeForce RTX 4090", 89, 101376,
                      f"{_GUIDE}: 99 KB for compute capability 8.9; NVIDIA Ada Tuning Guide"),
        DeviceProfile("h100", "NVIDIA H100 80GB HBM3", 90, 232448,
                      f"{_GUIDE}: 227 KB for compute capability 9.0; NVIDIA Hopper Tuning Guide"),
        DeviceProfile("h200", "NVIDIA H200", 90, 232448,
                      f"{_GUIDE}: 227 KB for compute capability 9.0; read as 232448 from "
                      "torch.cuda.get_device_properties(0).shared_memory_per_block_optin and "
                      "Triton's max_shared_mem on our H200 (docs/evidence/)"),
        DeviceProfile("b200", "NVIDIA B200", 100, 232448,
                      f"{_GUIDE}: 227 KB for compute capability 10.0; NVIDIA Blackwell Tuning "
                      "Guide"),
        DeviceProfile("rtx-pro-6000-blackwell", "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                      120, 101376,
                      f"{_GUIDE}: 99 KB for compute capability 12.0; NVIDIA Blackwell Tuning "
                      "Guide"),
    )
}


@dataclass(frozen=True)
class DeviceLimits:
    """What one validation targets: a real device (handles get loaded) or a profile."""

    identity: str
    device_name: str
    arch: int
    shared: int
    index: int | None

    @property
    def physical(self) -> bool:
        return self.index is not None


def profile(name: str) -> DeviceProfile:
    """The profile called ``name``; a ValueError lists the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown device profile {name!r}; expected one of: {known}") from None


def capped(limit: int) -> int:
    """``limit`` lowered to the harness's shared-memory cap, if one is set."""
    cap = harness.shared_memory_cap()
    return limit if cap is None else min(limit, cap)


_physical: dict[int, tuple[str, int]] = {}


def _physical_device(index: int) -> tuple[str, int]:
    """(name, arch) of a CUDA device; fixed for the process, so looked up once."""
    if index not in _physical:
        major, minor = torch.cuda.get_device_capability(index)
        _physical[index] = (torch.cuda.get_device_name(index), major * 10 + minor)
    return _physical[index]


def limits_for(device: torch.device) -> DeviceLimits | None:
    """The limits a launch on ``device`` validates against, or None: nothing to validate.

    CUDA devices answer with Triton's own per-block shared-memory figure, looked up on every
    call because a cap can change it; other devices have nothing to validate, unless the
    test harness emulates a profile (``gridpair.harness``).
    """
    if device.type == "cuda":
        from triton.compiler import compiler

        index = device.index if device.index is not None else torch.cuda.current_device()
        return _cuda_limits(index, capped(compiler.max_shared_mem(index)))
    emulated = harness.emulated_profile()
    if emulated is None:
        return None
    if emulated not in PROFILES:
        raise ValueError(f"{harness.DEVICE_ENV}: unknown device profile {emulated!r}; expected "
                         f"one of: {', '.join(sorted(PROFILES))}")
    return profile_limits(emulated)


@functools.lru_cache(maxsize=64)
def _cuda_limits(index: int, shared: int) -> DeviceLimits:
    # Asked before every launch: one object per device and limit.
    name, arch = _physical_device(index)
    return DeviceLimits(f"{name} (sm_{arch}, cuda:{index})", name, arch, shared, index)


def profile_limits(name: str) -> DeviceLimits:
    """The limits of profile ``name``, lowered to the harness's cap if one is set."""
    return _profile_limits(name, harness.state())


@functools.lru_cache(maxsize=64)
def _profile_limits(name: str, state: tuple[str | None, str | None]) -> DeviceLimits:
    # Keyed by the harness's raw variables, so a changed cap or profile is a new entry.
    chosen = profile(name)
    return DeviceLimits(f"profile {chosen.name} (sm_{chosen.arch})", chosen.device_name,
                        chosen.arch, capped(chosen.shared_per_block), None)
