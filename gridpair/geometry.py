"""The shared vocabulary of the grid-pair kernels: launch geometry, tiles, the slot cover, each
kernel's interface (its operands, results, result dtypes and launch scalars), and the one builder
of a launch's arguments and constexprs.

``kernel_arguments`` and ``kernel_constexprs`` are the single source of a launch's
specialization: ``validation`` builds its compile from them with dtype placeholders, ``launch``
builds the real launch from them, so both compile the same kernel. The interface tables are read
by every layer (the signature, the ladder, validation, the launch, the reference composition);
``kernels`` holds the kernels alone, which only a launch enters.
"""

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TypeVar

import torch
from torch import Tensor

T = TypeVar("T")

# -- each kernel's interface ------------------------------------------------------------------

OPERAND_STRIDES = ("stride_n", "stride_d", "stride_f", "stride_c")

# Operands of each kernel in launch order; in the signature they are followed by the two padded
# projectors, the results, the row count and the four strides of every operand. Results are
# contiguous, so their layout follows from the constexprs.
OPERANDS = {
    "fwd": ("left", "right"),
    "bwd": ("grad_out", "left", "right"),
    "bwd2": ("grad_out", "left", "right", "grad_grad_left", "grad_grad_right"),
}
RESULTS = {
    "fwd": ("out",),
    "bwd": ("grad_left", "grad_right"),
    "bwd2": ("grad_grad_out", "grad2_left", "grad2_right"),
}
# Where each result's dtype comes from: the operand at that index (a gradient takes the dtype of
# the operand it is the gradient of), or None for the compute dtype (the projectors'). The
# kernels store each result in its dtype from fp32 accumulators.
RESULT_DTYPE_FROM = {
    "fwd": (None,),
    "bwd": (1, 2),
    "bwd2": (0, 1, 2),
}


def result_dtypes(op: str, operand_dtypes: Sequence[T], compute_dtype: T) -> tuple[T, ...]:
    """The dtype of each result of kernel ``op`` (``RESULT_DTYPE_FROM``)."""
    return tuple(compute_dtype if index is None else operand_dtypes[index]
                 for index in RESULT_DTYPE_FROM[op])


LAUNCH_SCALARS = {
    op: ("n_rows", *(f"{name}_{stride}" for name in names for stride in OPERAND_STRIDES))
    for op, names in OPERANDS.items()
}


# -- geometry and tiles -----------------------------------------------------------------------
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
