"""The tile ladder: the candidates a search tries for one key, most aggressive first - tuned
tiles for the exact device, then the generated tiles whose resident values stay in registers.
"""

from itertools import product

import torch

from gridpair import tuned
from gridpair.geometry import OPERANDS, RESULTS, Geometry, Tile, next_power_of_two, slot_cover

# Tile axes, most aggressive first: (row block, grid block, stages); each tile takes the fewest
# warps that keep its resident values in registers. Chosen by sweep (docs/design-gridpair.md):
# 16-bit tiles up to 64 rows; fp32 tiles of 16 rows (more rows spill), first with tf32x3 dots
# (faster than IEEE FMA dots and within the fp32 error bound), then with IEEE dots, whose
# smaller footprint still fits 99 KB devices.
_BLOCK_ROWS = (64, 32, 16)
_BLOCK_GRID = (64, 32)
_STAGES = (3, 2)
_WARPS = (4, 8)
_SMALLEST = ((16, 16, 2), (16, 16, 1))
_FP32_SHAPES = ((16, 64, 2), (16, 32, 2), (16, 16, 1))
_FP32_DOTS = ("tf32x3", "ieee")
# 32-bit registers per thread the resident values of a tile may take (of 255): accumulators,
# operand rows and the grid fields of one block. Beyond it ptxas spills to local memory.
_RESIDENT_REGISTERS = 192


def resident_registers(op: str, geometry: Geometry, tile: Tile, dtype: torch.dtype) -> int:
    """32-bit registers per thread a tile's resident values take: fp32 accumulators, operand
    rows in the compute dtype (rounded as they are loaded), and the fp32 grid fields of one
    grid block.

    fp32 operands go through FMA dots, whose operand layouts hold each row twice over (the
    offline sweep: 64-row fp32 tiles spill at 8 warps where bf16 ones do not).
    """
    main, tail = slot_cover(geometry.slots)
    slots = main + tail
    n_operands, n_results = len(OPERANDS[op]), len(RESULTS[op])
    operand_words = dtype.itemsize / 4 * (2 if dtype == torch.float32 else 1)
    words = (n_results * tile.block_rows * slots
             + n_operands * tile.block_rows * slots * operand_words
             + n_operands * tile.block_rows * tile.block_grid)
    return int(words // (tile.num_warps * 32))


def generated_candidates(op: str, geometry: Geometry, dtype: torch.dtype) -> list[Tile]:
    """The ladder from the most to the least aggressive tile whose resident values stay in
    registers; grid blocks larger than the grid are left out."""
    widest_grid = max(16, next_power_of_two(geometry.grid))
    shapes: list[tuple[int, int, int, str | None]]
    if dtype == torch.float32:
        shapes = [(*shape, dots) for dots in _FP32_DOTS for shape in _FP32_SHAPES]
    else:
        shapes = [(*s, None) for s in product(_BLOCK_ROWS, _BLOCK_GRID, _STAGES)]
        shapes += [(*s, None) for s in _SMALLEST]
    ladder = []
    for rows, grid, stages, dots in shapes:
        if grid > widest_grid:
            continue
        for warps in _WARPS:
            tile = Tile(rows, grid, stages, warps, dots)
            if resident_registers(op, geometry, tile, dtype) <= _RESIDENT_REGISTERS:
                ladder.append(tile)
                break
        else:  # even 8 warps are over the budget: the smallest footprint still gets a try
            if (rows, grid, stages) == _SMALLEST[-1]:
                ladder.append(Tile(rows, grid, stages, _WARPS[-1], dots))
    return ladder


def candidates(op: str, geometry: Geometry, dtype: torch.dtype, device_name: str) -> list[Tile]:
    """Tuned tiles for this exact device first, then the generated ladder, no repeats."""
    preferred = tuned.lookup(device_name, op, dtype, geometry)
    return list(dict.fromkeys([*preferred, *generated_candidates(op, geometry, dtype)]))
