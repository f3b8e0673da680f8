"""The launch of a grid-pair kernel with a chosen tile: allocate the results, pad the
projectors, compute the launch grid and call the kernel (through ``wrap_triton`` so that tracing
records it)."""

from collections.abc import Sequence

import torch
from torch import Tensor
from torch.library import wrap_triton

from gridpair.geometry import Geometry, Tile, kernel_arguments, kernel_constexprs, slot_cover
from gridpair.kernels import KERNELS, OPERANDS, RESULTS
from gridpair.probe import needs_wide_offsets


def pad_projector(projector: Tensor) -> Tensor:
    """A fresh contiguous copy zero-padded to the kernels' slot cover: no slot masks, aligned
    rows, and always 16-byte aligned, whatever the caller's tensor."""
    main, tail = slot_cover(projector.shape[1])
    return torch.nn.functional.pad(projector, (0, main + tail - projector.shape[1])).contiguous()


def launch_grid(n_rows: int, tile: Tile) -> tuple[int]:
    """One program per block of (pair, channel) rows."""
    return (-(-n_rows // tile.block_rows),)


def launch(op: str, operands: Sequence[Tensor], to_grid: Tensor, from_grid: Tensor,
           n_frames: int, tile: Tile) -> tuple[Tensor, ...]:
    """Run kernel ``op`` ("fwd", "bwd", "bwd2") with ``tile``; return its fresh results.

    Operands are (N, D, F, K*C) in any strides, projectors (G, D*K); results are contiguous,
    in the operands' dtype.
    """
    if len(operands) != len(OPERANDS[op]):
        raise ValueError(f"{op}: expected operands {OPERANDS[op]}, got {len(operands)} tensors")
    first = operands[0]
    geometry = Geometry.of(first, to_grid, n_frames)
    results = tuple(torch.empty(first.shape, dtype=first.dtype, device=first.device)
                    for _ in RESULTS[op])
    n_rows = first.shape[0] * geometry.focus * geometry.channels
    if n_rows == 0:
        return results
    args = kernel_arguments(operands, (pad_projector(to_grid), pad_projector(from_grid)),
                            results, n_rows, [x.stride() for x in operands])
    grid = launch_grid(n_rows, tile)
    kernel = KERNELS[op]
    runner = wrap_triton(kernel) if not _interpreted(kernel) else kernel
    # The same decision as the selector's signature, so the validated kernel is the one run.
    wide = any(needs_wide_offsets(x) for x in operands)
    runner[grid](*args, **kernel_constexprs(geometry, tile, first.dtype, wide),
                 num_warps=tile.num_warps, num_stages=tile.num_stages)
    return results


def _interpreted(kernel: object) -> bool:
    """Under TRITON_INTERPRET=1 kernels are interpreter functions that wrap_triton refuses."""
    return type(kernel).__name__ == "InterpretedFunction"
