"""Triton kernels of the grid-pair operator: forward, backward and second backward.

Rows are the (pair, channel) lines of the operands, pair = (node, focus): row r is channel
r % C of pair r // C, and its D*K slots are the coefficients the projectors act on. One program
owns a block of ``BLOCK_M`` rows (a channel block of one pair when BLOCK_M divides C, else the
channels of consecutive pairs). It keeps its operand rows and fp32 accumulators resident, walks
the grid in blocks of ``BLOCK_G`` points, projects to the grid with one dot per operand, forms the
pointwise products and projects them back with a dot into the accumulators, as flash attention
walks its keys. The grid field never reaches device memory.

The slot axis (d, k) is covered by a power-of-two main block plus a power-of-two tail block
(147 slots: 128 + 32 instead of 256). The launchers hand the kernels projectors zero-padded to
that cover, so projector tiles need no slot masks and their rows are 16-byte aligned. Row counts
and operand strides are launch scalars (``LAUNCH_SCALARS``) that Triton specializes by class
only (1, a multiple of 16, 32 or 64 bits; ``signature.scalar_class``), as Inductor does when it
compiles these kernels: one compiled kernel serves every batch size of a class, and the kernel
validated with placeholders of those classes is the kernel that runs, eager or compiled.

The dots run in the projectors' dtype (the compute dtype). Under autocast an operand may come in
float32: each row tile is rounded to the compute dtype as it is loaded, so the dots see what a
cast before the launch gives, and a gradient of a float32 operand is stored in float32.
"""

import triton
import triton.language as tl

# Each kernel's operands, results and launch scalars, and where each result's dtype comes from:
# the kernels' interface, which every layer reads, is vocabulary (``geometry``). Importable from
# here too.
from gridpair.geometry import (  # noqa: F401
    LAUNCH_SCALARS,
    OPERAND_STRIDES,
    OPERANDS,
    RESULT_DTYPE_FROM,
    RESULTS,
    result_dtypes,
)


@triton.jit
def _slot_offsets(slots, stride_d, frame_stride, FRAMES: tl.constexpr, WIDE: tl.constexpr):
    """Offsets of the (d, k) slots: d * stride_d + k * frame_stride, in 64 bits when WIDE.

    Rows are int64 already; the slot part is what overflows int32 first, (D-1) * stride_d on
    degree-major views, so a launch whose reachable offsets pass 2^31 widens it too."""
    degree = slots // FRAMES
    frame = slots % FRAMES
    if WIDE:
        degree = degree.to(tl.int64)
        frame = frame.to(tl.int64)
    return degree * stride_d + frame * frame_stride


@triton.jit
def _load_rows(
    ptr, rows, n_rows, slots_main, slots_tail, stride_n, stride_d, stride_f, stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, SLOTS: tl.constexpr,
    WIDE: tl.constexpr, COMPUTE: tl.constexpr,
):
    """Main and tail (rows, slots) tiles of a (N, D, F, K*C) operand read through its strides,
    in the compute dtype ``COMPUTE``.

    Rounded as they are loaded (float32 operands under autocast), so the resident rows take
    the compute dtype's registers, and the dots see what a cast before the launch would give."""
    pair = rows // CHANNELS
    row_offsets = ((pair // FOCUS) * stride_n + (pair % FOCUS) * stride_f
                   + (rows % CHANNELS) * stride_c)[:, None]
    row_ok = (rows < n_rows)[:, None]
    if WIDE:
        # tl.cast, not .to: a unit stride arrives as the constant 1 (signature.scalar_class).
        frame_stride = CHANNELS * tl.cast(stride_c, tl.int64)
    else:
        frame_stride = CHANNELS * stride_c
    main_offsets = _slot_offsets(slots_main, stride_d, frame_stride, FRAMES, WIDE)
    main = tl.load(ptr + row_offsets + main_offsets[None, :],
                   mask=row_ok & (slots_main < SLOTS)[None, :], other=0.0)
    tail_offsets = _slot_offsets(slots_tail, stride_d, frame_stride, FRAMES, WIDE)
    tail = tl.load(ptr + row_offsets + tail_offsets[None, :],
                   mask=row_ok & (slots_tail < SLOTS)[None, :], other=0.0)
    return main.to(COMPUTE), tail.to(COMPUTE)


@triton.jit
def _store_rows(
    ptr, main, tail, rows, n_rows, slots_main, slots_tail,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, SLOTS: tl.constexpr,
    HAS_TAIL: tl.constexpr, WIDE: tl.constexpr,
):
    """Store main and tail (rows, slots) accumulators into a contiguous (N, D, F, K*C) result."""
    stride_f: tl.constexpr = FRAMES * CHANNELS
    stride_d: tl.constexpr = FOCUS * stride_f
    stride_n: tl.constexpr = (SLOTS // FRAMES) * stride_d
    pair = rows // CHANNELS
    row_offsets = ((pair // FOCUS) * stride_n + (pair % FOCUS) * stride_f
                   + rows % CHANNELS)[:, None]
    row_ok = (rows < n_rows)[:, None]
    offsets = _slot_offsets(slots_main, stride_d, CHANNELS, FRAMES, WIDE)
    tl.store(ptr + row_offsets + offsets[None, :], main.to(ptr.dtype.element_ty),
             mask=row_ok & (slots_main < SLOTS)[None, :])
    if HAS_TAIL:
        offsets = _slot_offsets(slots_tail, stride_d, CHANNELS, FRAMES, WIDE)
        tl.store(ptr + row_offsets + offsets[None, :], tail.to(ptr.dtype.element_ty),
                 mask=row_ok & (slots_tail < SLOTS)[None, :])


@triton.jit
def _load_projector(ptr, points, slots_main, slots_tail, GRID: tl.constexpr,
                    SLOTS_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr):
    """Main and tail (points, slots) tiles of a zero-padded (G, SLOTS_PADDED) projector."""
    rows = ptr + points[:, None] * SLOTS_PADDED
    point_ok = (points < GRID)[:, None]
    main = tl.load(rows + slots_main[None, :], mask=point_ok, other=0.0)
    tail = main
    if HAS_TAIL:
        tail = tl.load(rows + slots_tail[None, :], mask=point_ok, other=0.0)
    return main, tail


@triton.jit
def _project(x_main, x_tail, proj_main, proj_tail, HAS_TAIL: tl.constexpr,
             PRECISION: tl.constexpr):
    """Grid field (BLOCK_M, BLOCK_G) in fp32: rows (BLOCK_M, slots) @ projector^T."""
    field = tl.dot(x_main, tl.trans(proj_main), input_precision=PRECISION, out_dtype=tl.float32)
    if HAS_TAIL:
        field = tl.dot(x_tail, tl.trans(proj_tail), field, input_precision=PRECISION,
                       out_dtype=tl.float32)
    return field


@triton.jit
def _project_back(acc_main, acc_tail, field, proj_main, proj_tail, HAS_TAIL: tl.constexpr,
                  PRECISION: tl.constexpr):
    """Accumulate field (BLOCK_M, BLOCK_G) @ projector (BLOCK_G, slots) into the rows."""
    field = field.to(proj_main.dtype)
    acc_main = tl.dot(field, proj_main, acc_main, input_precision=PRECISION)
    if HAS_TAIL:
        acc_tail = tl.dot(field, proj_tail, acc_tail, input_precision=PRECISION)
    return acc_main, acc_tail


@triton.jit
def _rows_program(BLOCK_M: tl.constexpr, SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr):
    """This program's rows and the main and tail slot offsets."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    slots_main = tl.arange(0, SLOTS_MAIN)
    slots_tail = SLOTS_MAIN + tl.arange(0, SLOTS_TAIL)
    return rows, slots_main, slots_tail


@triton.jit
def _grid_pair_fwd_kernel(
    left_ptr, right_ptr, to_grid_ptr, from_grid_ptr, out_ptr, n_rows,
    left_stride_n, left_stride_d, left_stride_f, left_stride_c,
    right_stride_n, right_stride_d, right_stride_f, right_stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, GRID: tl.constexpr,
    SLOTS: tl.constexpr, SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr, PRECISION: tl.constexpr, WIDE: tl.constexpr,
):
    """out = F^T [(T l) * (T r)] for one block of rows.

    Args:
        left_ptr, right_ptr: (N, D, F, K*C) operands, read through their strides.
        to_grid_ptr, from_grid_ptr: (G, SLOTS_MAIN + SLOTS_TAIL) projectors T and F, the D*K
            slots ordered (d, k) and zero-padded.
        out_ptr: contiguous (N, D, F, K*C) result.
        n_rows: N * F * C.
        SLOTS_MAIN, SLOTS_TAIL: power-of-two cover of the D*K slots (tail 0: none).
        WIDE: 64-bit slot offsets (some reachable offset passes 2^31).
        Launch grid: (cdiv(n_rows, BLOCK_M),).
    """
    HAS_TAIL: tl.constexpr = SLOTS_TAIL > 0
    TAIL: tl.constexpr = SLOTS_TAIL if HAS_TAIL else 16
    PADDED: tl.constexpr = SLOTS_MAIN + SLOTS_TAIL
    COMPUTE: tl.constexpr = to_grid_ptr.dtype.element_ty
    rows, s_main, s_tail = _rows_program(BLOCK_M, SLOTS_MAIN, TAIL)
    l_main, l_tail = _load_rows(left_ptr, rows, n_rows, s_main, s_tail, left_stride_n,
                                left_stride_d, left_stride_f, left_stride_c,
                                FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
    r_main, r_tail = _load_rows(right_ptr, rows, n_rows, s_main, s_tail, right_stride_n,
                                right_stride_d, right_stride_f, right_stride_c,
                                FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
    acc_main = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    acc_tail = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
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
def _grid_pair_bwd_kernel(
    grad_out_ptr, left_ptr, right_ptr, to_grid_ptr, from_grid_ptr,
    grad_left_ptr, grad_right_ptr, n_rows,
    grad_out_stride_n, grad_out_stride_d, grad_out_stride_f, grad_out_stride_c,
    left_stride_n, left_stride_d, left_stride_f, left_stride_c,
    right_stride_n, right_stride_d, right_stride_f, right_stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, GRID: tl.constexpr,
    SLOTS: tl.constexpr, SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr, PRECISION: tl.constexpr, WIDE: tl.constexpr,
):
    """g_l = T^T [(F go) * (T r)], g_r = T^T [(F go) * (T l)] for one block of rows.

    Args:
        grad_out_ptr, left_ptr, right_ptr: (N, D, F, K*C) operands, read through their strides.
        to_grid_ptr, from_grid_ptr: zero-padded (G, SLOTS_MAIN + SLOTS_TAIL) projectors.
        grad_left_ptr, grad_right_ptr: contiguous (N, D, F, K*C) results.
        n_rows: N * F * C. Launch grid: (cdiv(n_rows, BLOCK_M),).
    """
    HAS_TAIL: tl.constexpr = SLOTS_TAIL > 0
    TAIL: tl.constexpr = SLOTS_TAIL if HAS_TAIL else 16
    PADDED: tl.constexpr = SLOTS_MAIN + SLOTS_TAIL
    COMPUTE: tl.constexpr = to_grid_ptr.dtype.element_ty
    rows, s_main, s_tail = _rows_program(BLOCK_M, SLOTS_MAIN, TAIL)
    go_main, go_tail = _load_rows(grad_out_ptr, rows, n_rows, s_main, s_tail,
                                  grad_out_stride_n, grad_out_stride_d, grad_out_stride_f,
                                  grad_out_stride_c, FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
    l_main, l_tail = _load_rows(left_ptr, rows, n_rows, s_main, s_tail, left_stride_n,
                                left_stride_d, left_stride_f, left_stride_c,
                                FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
    r_main, r_tail = _load_rows(right_ptr, rows, n_rows, s_main, s_tail, right_stride_n,
                                right_stride_d, right_stride_f, right_stride_c,
                                FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
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
        f_go = _project(go_main, go_tail, f_main, f_tail, HAS_TAIL, PRECISION)
        t_r = _project(r_main, r_tail, t_main, t_tail, HAS_TAIL, PRECISION)
        gl_main, gl_tail = _project_back(gl_main, gl_tail, f_go * t_r, t_main, t_tail,
                                         HAS_TAIL, PRECISION)
        t_l = _project(l_main, l_tail, t_main, t_tail, HAS_TAIL, PRECISION)
        gr_main, gr_tail = _project_back(gr_main, gr_tail, f_go * t_l, t_main, t_tail,
                                         HAS_TAIL, PRECISION)
    _store_rows(grad_left_ptr, gl_main, gl_tail, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)
    _store_rows(grad_right_ptr, gr_main, gr_tail, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)


@triton.jit
def _grid_pair_bwd2_kernel(
    grad_out_ptr, left_ptr, right_ptr, grad_grad_left_ptr, grad_grad_right_ptr,
    to_grid_ptr, from_grid_ptr,
    grad_grad_out_ptr, grad2_left_ptr, grad2_right_ptr, n_rows,
    grad_out_stride_n, grad_out_stride_d, grad_out_stride_f, grad_out_stride_c,
    left_stride_n, left_stride_d, left_stride_f, left_stride_c,
    right_stride_n, right_stride_d, right_stride_f, right_stride_c,
    grad_grad_left_stride_n, grad_grad_left_stride_d, grad_grad_left_stride_f,
    grad_grad_left_stride_c,
    grad_grad_right_stride_n, grad_grad_right_stride_d, grad_grad_right_stride_f,
    grad_grad_right_stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, GRID: tl.constexpr,
    SLOTS: tl.constexpr, SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr, PRECISION: tl.constexpr, WIDE: tl.constexpr,
):
    """Second backward for one block of rows, h_l, h_r the grad-grads of g_l, g_r:
    ggo = F^T [(T h_l)(T r) + (T l)(T h_r)], g2_l = T^T [(F go)(T h_r)],
    g2_r = T^T [(F go)(T h_l)].

    Args:
        grad_out_ptr, left_ptr, right_ptr, grad_grad_left_ptr, grad_grad_right_ptr:
            (N, D, F, K*C) operands go, l, r, h_l, h_r, read through their strides.
        to_grid_ptr, from_grid_ptr: zero-padded (G, SLOTS_MAIN + SLOTS_TAIL) projectors.
        grad_grad_out_ptr, grad2_left_ptr, grad2_right_ptr: contiguous (N, D, F, K*C) results.
        n_rows: N * F * C. Launch grid: (cdiv(n_rows, BLOCK_M),).
    """
    HAS_TAIL: tl.constexpr = SLOTS_TAIL > 0
    TAIL: tl.constexpr = SLOTS_TAIL if HAS_TAIL else 16
    PADDED: tl.constexpr = SLOTS_MAIN + SLOTS_TAIL
    COMPUTE: tl.constexpr = to_grid_ptr.dtype.element_ty
    rows, s_main, s_tail = _rows_program(BLOCK_M, SLOTS_MAIN, TAIL)
    go_main, go_tail = _load_rows(grad_out_ptr, rows, n_rows, s_main, s_tail,
                                  grad_out_stride_n, grad_out_stride_d, grad_out_stride_f,
                                  grad_out_stride_c, FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
    l_main, l_tail = _load_rows(left_ptr, rows, n_rows, s_main, s_tail, left_stride_n,
                                left_stride_d, left_stride_f, left_stride_c,
                                FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
    r_main, r_tail = _load_rows(right_ptr, rows, n_rows, s_main, s_tail, right_stride_n,
                                right_stride_d, right_stride_f, right_stride_c,
                                FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
    hl_main, hl_tail = _load_rows(grad_grad_left_ptr, rows, n_rows, s_main, s_tail,
                                  grad_grad_left_stride_n, grad_grad_left_stride_d,
                                  grad_grad_left_stride_f, grad_grad_left_stride_c,
                                  FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
    hr_main, hr_tail = _load_rows(grad_grad_right_ptr, rows, n_rows, s_main, s_tail,
                                  grad_grad_right_stride_n, grad_grad_right_stride_d,
                                  grad_grad_right_stride_f, grad_grad_right_stride_c,
                                  FOCUS, FRAMES, CHANNELS, SLOTS, WIDE, COMPUTE)
    ggo_main = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    ggo_tail = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    g2l_main = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    g2l_tail = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    g2r_main = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    g2r_tail = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
        t_main, t_tail = _load_projector(to_grid_ptr, points, s_main, s_tail, GRID, PADDED,
                                         HAS_TAIL)
        f_main, f_tail = _load_projector(from_grid_ptr, points, s_main, s_tail, GRID, PADDED,
                                         HAS_TAIL)
        f_go = _project(go_main, go_tail, f_main, f_tail, HAS_TAIL, PRECISION)
        t_hl = _project(hl_main, hl_tail, t_main, t_tail, HAS_TAIL, PRECISION)
        g2r_main, g2r_tail = _project_back(g2r_main, g2r_tail, f_go * t_hl, t_main, t_tail,
                                           HAS_TAIL, PRECISION)
        t_hr = _project(hr_main, hr_tail, t_main, t_tail, HAS_TAIL, PRECISION)
        g2l_main, g2l_tail = _project_back(g2l_main, g2l_tail, f_go * t_hr, t_main, t_tail,
                                           HAS_TAIL, PRECISION)
        t_l = _project(l_main, l_tail, t_main, t_tail, HAS_TAIL, PRECISION)
        t_r = _project(r_main, r_tail, t_main, t_tail, HAS_TAIL, PRECISION)
        ggo_main, ggo_tail = _project_back(ggo_main, ggo_tail, t_hl * t_r + t_l * t_hr,
                                           f_main, f_tail, HAS_TAIL, PRECISION)
    _store_rows(grad_grad_out_ptr, ggo_main, ggo_tail, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)
    _store_rows(grad2_left_ptr, g2l_main, g2l_tail, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)
    _store_rows(grad2_right_ptr, g2r_main, g2r_tail, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)


KERNELS = {
    "fwd": _grid_pair_fwd_kernel,
    "bwd": _grid_pair_bwd_kernel,
    "bwd2": _grid_pair_bwd2_kernel,
}
