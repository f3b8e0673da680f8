"""A pretend GPU: its per-block shared-memory limit, and kernels that load only if they fit.

Loading mirrors Triton: a kernel over the limit fails with ``OutOfResources`` when it is
loaded, not when it is compiled. Under a cap from pytest-coldcompile, the limit is the cap.
"""

from __future__ import annotations

import os

DEVICE_LIMIT = 232448  # an H200's opt-in shared memory per block
CAP_ENV = "PYTEST_COLDCOMPILE_SMEM_LIMIT"  # set by pytest-coldcompile's smem_limit


class OutOfResources(RuntimeError):
    """What Triton raises when a kernel needs more than the device offers."""


def shared_limit() -> int:
    """The device's per-block shared memory, lowered by a cap (a GPU with no GPU attached)."""
    cap = os.environ.get(CAP_ENV)
    return min(DEVICE_LIMIT, int(cap)) if cap else DEVICE_LIMIT


class Kernel:
    """A compiled kernel for one tile: ``shared`` bytes per block, loaded on first use."""

    def __init__(self, tile: int) -> None:
        self.tile = tile
        self.shared = tile * 768  # tile 256: 196608 bytes, 128: 98304, 64: 49152

    def load(self) -> None:
        limit = shared_limit()
        if self.shared > limit:
            raise OutOfResources(
                f"out of resource: shared memory, Required: {self.shared}, "
                f"Hardware limit: {limit}"
            )

    def run(self, values: list[float]) -> float:
        self.load()
        return sum(sum(values[i : i + self.tile]) for i in range(0, len(values), self.tile))
