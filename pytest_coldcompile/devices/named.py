"""The named devices: each GPU's architecture and per-block limits, with where each figure
comes from. ``--smem-limit``/``--emulate-device`` and their marker and ini key take these
names; gridpair keeps a table of its own (it must not import the plugin), checked against this.
"""

from __future__ import annotations

from dataclasses import dataclass

_GUIDE = "CUDA C++ Programming Guide, Technical Specifications per Compute Capability"
_SHARED = f"{_GUIDE}, 'Maximum amount of shared memory per thread block'"
_PER_BLOCK = (
    f"{_GUIDE}: 1024 threads per block, 64K 32-bit registers per block, 255 registers per "
    "thread, warp size 32, for every compute capability from 5.0 to 12.x"
)
# The 32-bit registers a warp is given at once (CUDA Occupancy Calculator, 'Register
# allocation unit size', 256 for every compute capability from 5.0 to 12.x).
REGISTER_ALLOCATION_UNIT = 256


@dataclass(frozen=True)
class NamedDevice:
    """A GPU as emulation sees it: its architecture and its per-block limits."""

    name: str
    marketing_name: str
    arch: int  # compute capability major * 10 + minor: Triton's GPUTarget arch, sm_<arch>
    shared_per_block: int  # opt-in bytes of shared memory per block (Triton's max_shared_mem)
    shared_source: str
    arch_source: str
    warp_size: int = 32
    max_threads_per_block: int = 1024
    registers_per_block: int = 65536
    registers_per_thread: int = 255
    limits_source: str = _PER_BLOCK

    @property
    def sm(self) -> str:
        return f"sm_{self.arch}"

    def max_threads_for(self, registers_per_thread: int) -> int:
        """The most threads a block of a kernel using that many registers per thread can have
        on this device: what the driver reports as the kernel's maximum threads per block."""
        per_warp = -(-registers_per_thread * self.warp_size // REGISTER_ALLOCATION_UNIT)
        per_warp *= REGISTER_ALLOCATION_UNIT
        warps = self.registers_per_block // per_warp if per_warp else self.max_threads_per_block
        return min(self.max_threads_per_block, warps * self.warp_size)


def _device(name: str, marketing: str, arch: int, kib: int, guide: str) -> NamedDevice:
    cc = f"{arch // 10}.{arch % 10}"
    return NamedDevice(
        name=name,
        marketing_name=marketing,
        arch=arch,
        shared_per_block=kib * 1024,
        shared_source=f"{_SHARED}: {kib} KB for compute capability {cc}; {guide}",
        arch_source=f"NVIDIA CUDA GPUs compute capability list: {marketing} is {cc}",
    )


DEVICES: dict[str, NamedDevice] = {
    d.name: d
    for d in (
        _device("a100", "NVIDIA A100", 80, 163, "NVIDIA Ampere GPU Architecture Tuning Guide"),
        _device("l40s", "NVIDIA L40S", 89, 99, "NVIDIA Ada GPU Architecture Tuning Guide"),
        _device("rtx-4090", "NVIDIA GeForce RTX 4090", 89, 99,
                "NVIDIA Ada GPU Architecture Tuning Guide"),
        _device("h100", "NVIDIA H100", 90, 227, "NVIDIA Hopper Tuning Guide"),
        _device("h200", "NVIDIA H200", 90, 227,
                "NVIDIA Hopper Tuning Guide; read as 232448 from torch's "
                "shared_memory_per_block_optin and Triton's max_shared_mem on our H200 "
                "(docs/evidence/)"),
        _device("b200", "NVIDIA B200", 100, 227, "NVIDIA Blackwell Tuning Guide"),
        _device("rtx-pro-6000-blackwell", "NVIDIA RTX PRO 6000 Blackwell", 120, 99,
                "NVIDIA Blackwell Tuning Guide"),
    )
}


def names() -> list[str]:
    return sorted(DEVICES)


def unknown(value: object) -> str:
    """The words that say value names no device, listing the names."""
    return f"unknown device {value!r}; the named devices are: {', '.join(names())}"


def lookup(name: str) -> NamedDevice | None:
    """The device called name (case and surrounding spaces ignored), None when none is."""
    return DEVICES.get(str(name).strip().lower())
