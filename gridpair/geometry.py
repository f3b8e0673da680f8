"""The shared vocabulary of the grid-pair kernels: launch geometry, tiles, the slot cover, and
the one builder of a launch's arguments and constexprs.

``kernel_arguments`` and ``kernel_constexprs`` are the single source of a launch's
specialization: ``validation`` builds its compile from them with dtype placeholders, ``launch``
builds the real launch from them, so both compile the same kernel.
"""

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Geometry:
    """Static geometry of a launch: everything but the node count N and the strides."""

    degrees: int
    focus: int
    frames: int
    channels: int
    grid: int

    @property
    def slots(self) -> int:
        return self.degrees * self.frames

    @classmethod
    def of(cls, left: Tensor, to_grid: Tensor, n_frames: int) -> "Geometry":
        _, degrees, focus, packed = left.shape
        return _geometry(int(degrees), int(focus), n_frames, int(packed),
                         int(to_grid.shape[0]))


@functools.lru_cache(maxsize=256)
def _geometry(degrees: int, focus: int, frames: int, packed: int, grid: int) -> Geometry:
    # One object per geometry: built for every launch and hashed into every selector key.
    return Geometry(degrees, focus, frames, packed // frames, grid)


@dataclass(frozen=True)
class Tile:
    """A launch configuration: row block ((pair, channel) rows: the channel block), grid
    block, pipeline stages, warps, and for fp32 operands the dot precision: "tf32x3" (three
    TF32 tensor-core products, fp32-grade accuracy) or "ieee" (FMA). 16-bit operands always
    take the tensor cores and leave it None."""

    block_rows: int
    block_grid: int
    num_stages: int
    num_warps: int
    fp32_dots: str | None = None

    def as_dict(self) -> dict[str, object]:
        config = asdict(self)
        if self.fp32_dots is None:
            del config["fp32_dots"]
        return config

    def __str__(self) -> str:
        dots = f" {self.fp32_dots}" if self.fp32_dots else ""
        return (f"BM={self.block_rows} BG={self.block_grid} "
                f"stages={self.num_stages} warps={self.num_warps}{dots}")


def next_power_of_two(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def slot_cover(slots: int) -> tuple[int, int]:
    """Power-of-two main and tail blocks covering ``slots`` (tail 0: the main block alone).

    The tail exists only where it saves work over one block of the next power of two:
    147 -> (128, 32), 27 -> (32, 0), 49 -> (64, 0), 300 -> (256, 64). Blocks are at least 16,
    the smallest dot Triton emits.
    """
    whole = max(16, next_power_of_two(slots))
    main = max(16, whole // 2)
    tail = max(16, next_power_of_two(slots - main)) if slots > main else 0
    if tail == 0 or main + tail >= whole:
        return whole, 0
    return main, tail


def dot_precision(tile: Tile, dtype: torch.dtype) -> str:
    """Triton's input_precision for the tile's dots. fp32 never takes plain TF32 (about 1e-3
    relative error); a tile without a choice gets IEEE."""
    if dtype == torch.float32:
        return tile.fp32_dots or "ieee"
    return "tf32"  # ignored by Triton for 16-bit operands


def kernel_constexprs(geometry: Geometry, tile: Tile, dtype: torch.dtype,
                      wide: bool = False) -> dict[str, object]:
    """Compile-time parameters of every grid-pair kernel for this geometry and tile; ``wide``:
    some offset the launch reaches passes 2^31 (``signature.signature_of``)."""
    slots_main, slots_tail = slot_cover(geometry.slots)
    return {
        "FOCUS": geometry.focus,
        "FRAMES": geometry.frames,
        "CHANNELS": geometry.channels,
        "GRID": geometry.grid,
        "SLOTS": geometry.slots,
        "SLOTS_MAIN": slots_main,
        "SLOTS_TAIL": slots_tail,
        "BLOCK_M": tile.block_rows,
        "BLOCK_G": tile.block_grid,
        "PRECISION": dot_precision(tile, dtype),
        "WIDE": wide,
    }


def kernel_arguments(
    operands: Sequence[object],
    projectors: Sequence[object],
    results: Sequence[object],
    n_rows: object,
    strides: Sequence[Sequence[object]],
) -> list[object]:
    """Runtime arguments in kernel order: operands, padded projectors, results, the row count
    and the operand strides."""
    return [*operands, *projectors, *results, n_rows, *(s for stride in strides for s in stride)]
