"""The one seam through which a test harness steers launch validation: two environment
variables, read here and nowhere else in gridpair. Without them validation targets the real
device only, and a CPU tensor is not validated at all (it runs the reference).

- ``GRIDPAIR_DEVICE=PROFILE`` (tests on a machine with no GPU): operands on a non-CUDA device
  validate by compiling for that ``gridpair.devices.PROFILES`` entry and applying its limits.
- ``PYTEST_COLDCOMPILE_SMEM_LIMIT=BYTES`` (set by pytest-coldcompile's ``--smem-limit`` and
  ``smem_limit`` mark, alongside the cap it installs in Triton): lowers the per-block shared
  memory that validation admits, on a real device or a profile.
"""

import os

DEVICE_ENV = "GRIDPAIR_DEVICE"

SMEM_LIMIT_ENV = "PYTEST_COLDCOMPILE_SMEM_LIMIT"
"""The name is fixed by the pytest-coldcompile selector protocol (its ``protocol.SMEM_LIMIT_ENV``):
the plugin sets it while a cap is active. gridpair spells it out rather than import the plugin."""

__all__ = ["DEVICE_ENV", "SMEM_LIMIT_ENV", "emulated_profile", "shared_memory_cap", "state"]


def emulated_profile() -> str | None:
    """The profile non-CUDA operands validate for, or None."""
    return os.environ.get(DEVICE_ENV) or None


def shared_memory_cap() -> int | None:
    """The emulated per-block shared-memory cap in bytes, or None; a ValueError names the
    variable when it is not a positive byte count."""
    raw = os.environ.get(SMEM_LIMIT_ENV)
    if not raw:
        return None
    try:
        cap = int(raw)
    except ValueError:
        raise ValueError(f"{SMEM_LIMIT_ENV}: expected a byte count, got {raw!r}") from None
    if cap <= 0:
        raise ValueError(f"{SMEM_LIMIT_ENV}: expected a positive byte count, got {raw!r}")
    return cap


def state() -> tuple[str | None, str | None]:
    """The raw values of both variables: a cache key for anything derived from them."""
    return os.environ.get(DEVICE_ENV), os.environ.get(SMEM_LIMIT_ENV)
