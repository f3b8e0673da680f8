"""Experiment (not the shipped kernels): do fp32 kernels gain from reading their operand rows
again for every grid block, from L2, instead of keeping them resident in registers?

The tuned fp32 tiles are 16 rows: resident fp32 rows, fp32 accumulators and the split operands
of tf32x3 dots spill at more (docs/evidence/h200/round3/call2: 255 registers, spills). Rows
read per grid block free those registers for larger row blocks. This times the forward and the
backward both ways at P147 (300 nodes), each launch replayed from a CUDA graph and checked
against float64.

    python docs/evidence/fp32_reload_experiment.py [--tiles 64,32,2,4 ...]
"""

import argparse
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tile_check import NAMES, fp32_case, parse_tile
from triton.runtime.errors import OutOfResources

from benchmarks.bench_gridpair import replayed_ms
from gridpair.geometry import Geometry, kernel_arguments, kernel_constexprs
from gridpair.kernels import (
    _load_projector,
    _load_rows,
    _project,
    _project_back,
    _rows_program,
    _store_rows,
)
from gridpair.launch import launch, launch_grid, pad_projector
from numerics import relative_error


@triton.jit
def _fwd_reload(
    left_ptr, right_ptr, to_grid_ptr, from_grid_ptr, out_ptr, n_rows,
    left_stride_n, left_stride_d, left_stride_f, left_stride_c,
    right_stride_n, right_stride_d, right_stride_f, right_stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, GRID: tl.constexpr,
    SLOTS: tl.constexpr, SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr, PRECISION: tl.constexpr, WIDE: tl.constexpr,
):
    HAS_TAIL: tl.constexpr = SLOTS_TAIL > 0
    TAIL: tl.constexpr = SLOTS_TAIL if HAS_TAIL else 16
    PADDED: tl.constexpr = SLOTS_MAIN + SLOTS_TAIL
    COMPUTE: tl.constexpr = to_grid_ptr.dtype.element_ty
    rows, s_main, s_tail = _rows_program(BLOCK_M, SLOTS_MAIN, TAIL)
    acc_main = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    acc_tail = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
        l_main, l_tail = _load_rows(left_ptr, rows, n_rows, s_main, s_tail, left_stride_n,
                                    left_stride_d, left_stride_f, left_stride_c,
                                    FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
        r_main, r_tail = _load_rows(right_ptr, rows, n_rows, s_main, s_tail, right_stride_n,
                                    right_stride_d, right_stride_f, right_stride_c,
                                    FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
        t_main, t_tail = _load_projector(to_grid_ptr, points, s_main, s_tail, GRID, PADDED,
                                         HAS_TAIL)
        f_main, f_tail = _load_projector(from_grid_ptr, points, s_main, s_tail, GRID, PADDED,
                                         HAS_TAIL)
        field = _project(l_main, l_tail, t_main, t_tail, HAS_TAIL, PRECISION)
        field *= _project(r_main, r_tail, t_main, t_tail, HAS_TAIL, PRECISION)
        acc_main, acc_tail = _project_back(acc_main, acc_tail, field, f_main, f_tail,
                                           HAS_TAIL, PRECISION)
    _store_rows(out_ptr, acc_main, acc_tail, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)


@triton.jit
def _bwd_reload(
    grad_out_ptr, left_ptr, right_ptr, to_grid_ptr, from_grid_ptr,
    grad_left_ptr, grad_right_ptr, n_rows,
    grad_out_stride_n, grad_out_stride_d, grad_out_stride_f, grad_out_stride_c,
    left_stride_n, left_stride_d, left_stride_f, left_stride_c,
    right_stride_n, right_stride_d, right_stride_f, right_stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, GRID: tl.constexpr,
    SLOTS: tl.constexpr, SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr, PRECISION: tl.constexpr, WIDE: tl.constexpr,
):
    HAS_TAIL: tl.constexpr = SLOTS_TAIL > 0
    TAIL: tl.constexpr = SLOTS_TAIL if HAS_TAIL else 16
    PADDED: tl.constexpr = SLOTS_MAIN + SLOTS_TAIL
    COMPUTE: tl.constexpr = to_grid_ptr.dtype.element_ty
    rows, s_main, s_tail = _rows_program(BLOCK_M, SLOTS_MAIN, TAIL)
    gl_main = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    gl_tail = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    gr_main = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    gr_tail = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
        t_main, t_tail = _load_projector(to_grid_ptr, points, s_main, s_tail, GRID, PADDED,
                                         HAS_TAIL)
        f_main, f_tail = _load_projector(from_grid_ptr, points, s_main, s_tail, GRID, PADDED,
                                         HAS_TAIL)
        go_main, go_tail = _load_rows(grad_out_ptr, rows, n_rows, s_main, s_tail,
                                      grad_out_stride_n, grad_out_stride_d, grad_out_stride_f,
                                      grad_out_stride_c, FOCUS, FRAMES, CHANNELS, SLOTS, WIDE,
                                      COMPUTE)
        f_go = _project(go_main, go_tail, f_main, f_tail, HAS_TAIL, PRECISION)
        r_main, r_tail = _load_rows(right_ptr, rows, n_rows, s_main, s_tail, right_stride_n,
                                    right_stride_d, right_stride_f, right_stride_c,
                                    FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
        t_r = _project(r_main, r_tail, t_main, t_tail, HAS_TAIL, PRECISION)
        gl_main, gl_tail = _project_back(gl_main, gl_tail, f_go * t_r, t_main, t_tail,
                                         HAS_TAIL, PRECISION)
        l_main, l_tail = _load_rows(left_ptr, rows, n_rows, s_main, s_tail, left_stride_n,
                                    left_stride_d, left_stride_f, left_stride_c,
                                    FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
        t_l = _project(l_main, l_tail, t_main, t_tail, HAS_TAIL, PRECISION)
        gr_main, gr_tail = _project_back(gr_main, gr_tail, f_go * t_l, t_main, t_tail,
                                         HAS_TAIL, PRECISION)
    _store_rows(grad_left_ptr, gl_main, gl_tail, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)
    _store_rows(grad_right_ptr, gr_main, gr_tail, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)


RELOAD = {"fwd": _fwd_reload, "bwd": _bwd_reload}
TUNED = {"fwd": "16,32,2,4,tf32x3", "bwd": "16,32,2,4,tf32x3"}


def sweep(op: str, tiles: list[str]) -> None:
    single, exact = fp32_case("P147", 300, op)
    frames = single.n_frames
    operands = [getattr(single, n) for n in NAMES[op]]
    geometry = Geometry.of(single.left, single.to_grid, frames)
    projectors = (pad_projector(single.to_grid), pad_projector(single.from_grid))
    n_rows = operands[0].shape[0] * geometry.focus * geometry.channels
    tuned = parse_tile(TUNED[op])

    def shipped(tile=tuned):
        return launch(op, operands, single.to_grid, single.from_grid, frames, tile, direct=True)

    got = shipped()
    error = max(relative_error(g, e) for g, e in zip(got, exact))
    print(f"{op} shipped {tuned}: {replayed_ms(shipped):.3f} ms, error {error:.2e}", flush=True)
    for text in tiles:
        tile = parse_tile(text)

        def reload(tile=tile):
            results = [torch.empty_like(operands[0]) for _ in range(len(got))]
            kernel_args = kernel_arguments(operands, projectors, results, n_rows,
                                           [x.stride() for x in operands])
            RELOAD[op][launch_grid(n_rows, tile)](
                *kernel_args, **kernel_constexprs(geometry, tile, torch.float32),
                num_warps=tile.num_warps, num_stages=tile.num_stages)
            return results

        try:
            out = reload()
            torch.cuda.synchronize()
        except OutOfResources as refused:
            print(f"{op} reload {tile}: {refused}", flush=True)
            continue
        error = max(relative_error(g, e) for g, e in zip(out, exact))
        print(f"{op} reload {tile}: {replayed_ms(reload):.3f} ms, error {error:.2e}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", nargs="+", default=["fwd", "bwd"])
    parser.add_argument("--tiles", nargs="+", default=[
        f"{m},{g},{s},{w},tf32x3" for w in (4, 8) for m in (32, 64) for g in (32, 64)
        for s in (2, 3)])
    args = parser.parse_args()
    for op in args.ops:
        sweep(op, args.tiles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
