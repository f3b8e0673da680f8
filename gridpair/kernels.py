"""Triton kernels of the grid-pair operator: forward, backward and second backward.

One program owns one (pair, channel block): it keeps its operand slots and fp32 accumulators
resident, walks the grid in blocks of ``BLOCK_G`` points, projects to the grid with dots,
multiplies pointwise and projects back with dots. The grid field never reaches device memory.

The slot axis (d, k) of length ``SLOTS = D*K`` is covered by a power-of-two main block plus a
power-of-two tail block (147 slots: 128 + 32 instead of 256), so counts just past a power of two
are not padded to the next one. Pair counts and operand strides are launch scalars that Triton
must not specialize on (``LAUNCH_SCALARS``): one compiled kernel serves every batch size and
every degree-major view, and the kernel validated with placeholders is the one that runs.
"""

import triton
import triton.language as tl

OPERAND_STRIDES = ("stride_n", "stride_d", "stride_f", "stride_c")

# Operands of each kernel in launch order; every one is followed in the signature by its four
# strides. Projectors and results are contiguous, so their layout is fixed by the constexprs.
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
LAUNCH_SCALARS = {
    op: tuple(f"{name}_{stride}" for name in names for stride in OPERAND_STRIDES)
    for op, names in OPERANDS.items()
}


@triton.jit
def _pair_program(SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr, BLOCK_C: tl.constexpr):
    """This program's pair, its channel offsets and its main and tail slot offsets."""
    pair = tl.program_id(0).to(tl.int64)
    channels = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    slots_main = tl.arange(0, SLOTS_MAIN)
    slots_tail = SLOTS_MAIN + tl.arange(0, SLOTS_TAIL)
    return pair, channels, slots_main, slots_tail


@triton.jit
def _load_operand(
    ptr, pair, channels, slots, stride_n, stride_d, stride_f, stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, SLOTS: tl.constexpr,
):
    """(slots, channels) tile of a (N, D, F, K*C) operand for one (node, focus) pair."""
    base = (pair // FOCUS) * stride_n + (pair % FOCUS) * stride_f
    slot_offsets = (slots // FRAMES) * stride_d + (slots % FRAMES) * (CHANNELS * stride_c)
    offsets = base + slot_offsets[:, None] + channels[None, :] * stride_c
    mask = (slots < SLOTS)[:, None] & (channels < CHANNELS)[None, :]
    return tl.load(ptr + offsets, mask=mask, other=0.0)


@triton.jit
def _load_slots(
    ptr, pair, channels, slots_main, slots_tail, stride_n, stride_d, stride_f, stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, SLOTS: tl.constexpr,
):
    """Main and tail slot tiles of one operand."""
    main = _load_operand(ptr, pair, channels, slots_main, stride_n, stride_d, stride_f, stride_c,
                         FOCUS, FRAMES, CHANNELS, SLOTS)
    tail = _load_operand(ptr, pair, channels, slots_tail, stride_n, stride_d, stride_f, stride_c,
                         FOCUS, FRAMES, CHANNELS, SLOTS)
    return main, tail


@triton.jit
def _store_slots(
    ptr, main, tail, pair, channels, slots_main, slots_tail,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, SLOTS: tl.constexpr,
    HAS_TAIL: tl.constexpr,
):
    """Store main and tail accumulators into a contiguous (N, D, F, K*C) result."""
    stride_f: tl.constexpr = FRAMES * CHANNELS
    stride_d: tl.constexpr = FOCUS * stride_f
    stride_n: tl.constexpr = (SLOTS // FRAMES) * stride_d
    base = (pair // FOCUS) * stride_n + (pair % FOCUS) * stride_f
    channel_ok = (channels < CHANNELS)[None, :]
    offsets = (slots_main // FRAMES) * stride_d + (slots_main % FRAMES) * CHANNELS
    tl.store(ptr + base + offsets[:, None] + channels[None, :],
             main.to(ptr.dtype.element_ty), mask=(slots_main < SLOTS)[:, None] & channel_ok)
    if HAS_TAIL:
        offsets = (slots_tail // FRAMES) * stride_d + (slots_tail % FRAMES) * CHANNELS
        tl.store(ptr + base + offsets[:, None] + channels[None, :],
                 tail.to(ptr.dtype.element_ty), mask=(slots_tail < SLOTS)[:, None] & channel_ok)


@triton.jit
def _load_projector(ptr, points, slots_main, slots_tail, GRID: tl.constexpr, SLOTS: tl.constexpr):
    """Main and tail (points, slots) tiles of a contiguous (G, D*K) projector."""
    point_ok = (points < GRID)[:, None]
    rows = ptr + points[:, None] * SLOTS
    main = tl.load(rows + slots_main[None, :], mask=point_ok & (slots_main < SLOTS)[None, :],
                   other=0.0)
    tail = tl.load(rows + slots_tail[None, :], mask=point_ok & (slots_tail < SLOTS)[None, :],
                   other=0.0)
    return main, tail


@triton.jit
def _project(proj_main, proj_tail, x_main, x_tail, HAS_TAIL: tl.constexpr,
             PRECISION: tl.constexpr):
    """Grid field (BLOCK_G, BLOCK_C) in fp32: projector (BLOCK_G, slots) @ x (slots, BLOCK_C)."""
    field = tl.dot(proj_main, x_main, input_precision=PRECISION, out_dtype=tl.float32)
    if HAS_TAIL:
        field = tl.dot(proj_tail, x_tail, field, input_precision=PRECISION, out_dtype=tl.float32)
    return field


@triton.jit
def _project_back(acc_main, acc_tail, proj_main, proj_tail, field, HAS_TAIL: tl.constexpr,
                  PRECISION: tl.constexpr):
    """Accumulate projector^T (slots, BLOCK_G) @ field (BLOCK_G, BLOCK_C) into the slots."""
    acc_main = tl.dot(tl.trans(proj_main), field, acc_main, input_precision=PRECISION)
    if HAS_TAIL:
        acc_tail = tl.dot(tl.trans(proj_tail), field, acc_tail, input_precision=PRECISION)
    return acc_main, acc_tail


@triton.jit(do_not_specialize=LAUNCH_SCALARS["fwd"])
def _grid_pair_fwd_kernel(
    left_ptr, right_ptr, to_grid_ptr, from_grid_ptr, out_ptr,
    left_stride_n, left_stride_d, left_stride_f, left_stride_c,
    right_stride_n, right_stride_d, right_stride_f, right_stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, GRID: tl.constexpr,
    SLOTS: tl.constexpr, SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr,
    BLOCK_C: tl.constexpr, BLOCK_G: tl.constexpr, PRECISION: tl.constexpr,
):
    """out = F^T [(T l) * (T r)] for one (pair, channel block).

    Args:
        left_ptr, right_ptr: (N, D, F, K*C) operands, read through their strides.
        to_grid_ptr, from_grid_ptr: contiguous (G, D*K) projectors T and F, slots ordered (d, k).
        out_ptr: contiguous (N, D, F, K*C) result.
        SLOTS_MAIN, SLOTS_TAIL: power-of-two cover of the D*K slots (tail 0: none).
        Launch grid: (N * F, cdiv(C, BLOCK_C)).
    """
    HAS_TAIL: tl.constexpr = SLOTS_TAIL > 0
    TAIL: tl.constexpr = SLOTS_TAIL if HAS_TAIL else 16
    pair, channels, s_main, s_tail = _pair_program(SLOTS_MAIN, TAIL, BLOCK_C)
    l_main, l_tail = _load_slots(left_ptr, pair, channels, s_main, s_tail, left_stride_n,
                                 left_stride_d, left_stride_f, left_stride_c,
                                 FOCUS, FRAMES, CHANNELS, SLOTS)
    r_main, r_tail = _load_slots(right_ptr, pair, channels, s_main, s_tail, right_stride_n,
                                 right_stride_d, right_stride_f, right_stride_c,
                                 FOCUS, FRAMES, CHANNELS, SLOTS)
    acc_main = tl.zeros((SLOTS_MAIN, BLOCK_C), dtype=tl.float32)
    acc_tail = tl.zeros((TAIL, BLOCK_C), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
        t_main, t_tail = _load_projector(to_grid_ptr, points, s_main, s_tail, GRID, SLOTS)
        f_main, f_tail = _load_projector(from_grid_ptr, points, s_main, s_tail, GRID, SLOTS)
        field = _project(t_main, t_tail, l_main, l_tail, HAS_TAIL, PRECISION)
        field *= _project(t_main, t_tail, r_main, r_tail, HAS_TAIL, PRECISION)
        acc_main, acc_tail = _project_back(acc_main, acc_tail, f_main, f_tail,
                                           field.to(left_ptr.dtype.element_ty),
                                           HAS_TAIL, PRECISION)
    _store_slots(out_ptr, acc_main, acc_tail, pair, channels, s_main, s_tail,
                 FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL)


@triton.jit(do_not_specialize=LAUNCH_SCALARS["bwd"])
def _grid_pair_bwd_kernel(
    grad_out_ptr, left_ptr, right_ptr, to_grid_ptr, from_grid_ptr,
    grad_left_ptr, grad_right_ptr,
    grad_out_stride_n, grad_out_stride_d, grad_out_stride_f, grad_out_stride_c,
    left_stride_n, left_stride_d, left_stride_f, left_stride_c,
    right_stride_n, right_stride_d, right_stride_f, right_stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, GRID: tl.constexpr,
    SLOTS: tl.constexpr, SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr,
    BLOCK_C: tl.constexpr, BLOCK_G: tl.constexpr, PRECISION: tl.constexpr,
):
    """g_l = T^T [(F go) * (T r)], g_r = T^T [(F go) * (T l)] for one (pair, channel block).

    Args:
        grad_out_ptr, left_ptr, right_ptr: (N, D, F, K*C) operands, read through their strides.
        to_grid_ptr, from_grid_ptr: contiguous (G, D*K) projectors T and F.
        grad_left_ptr, grad_right_ptr: contiguous (N, D, F, K*C) results.
        Launch grid: (N * F, cdiv(C, BLOCK_C)).
    """
    HAS_TAIL: tl.constexpr = SLOTS_TAIL > 0
    TAIL: tl.constexpr = SLOTS_TAIL if HAS_TAIL else 16
    pair, channels, s_main, s_tail = _pair_program(SLOTS_MAIN, TAIL, BLOCK_C)
    go_main, go_tail = _load_slots(grad_out_ptr, pair, channels, s_main, s_tail,
                                   grad_out_stride_n, grad_out_stride_d, grad_out_stride_f,
                                   grad_out_stride_c, FOCUS, FRAMES, CHANNELS, SLOTS)
    l_main, l_tail = _load_slots(left_ptr, pair, channels, s_main, s_tail, left_stride_n,
                                 left_stride_d, left_stride_f, left_stride_c,
                                 FOCUS, FRAMES, CHANNELS, SLOTS)
    r_main, r_tail = _load_slots(right_ptr, pair, channels, s_main, s_tail, right_stride_n,
                                 right_stride_d, right_stride_f, right_stride_c,
                                 FOCUS, FRAMES, CHANNELS, SLOTS)
    gl_main = tl.zeros((SLOTS_MAIN, BLOCK_C), dtype=tl.float32)
    gl_tail = tl.zeros((TAIL, BLOCK_C), dtype=tl.float32)
    gr_main = tl.zeros((SLOTS_MAIN, BLOCK_C), dtype=tl.float32)
    gr_tail = tl.zeros((TAIL, BLOCK_C), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
        t_main, t_tail = _load_projector(to_grid_ptr, points, s_main, s_tail, GRID, SLOTS)
        f_main, f_tail = _load_projector(from_grid_ptr, points, s_main, s_tail, GRID, SLOTS)
        f_go = _project(f_main, f_tail, go_main, go_tail, HAS_TAIL, PRECISION)
        t_r = _project(t_main, t_tail, r_main, r_tail, HAS_TAIL, PRECISION)
        t_l = _project(t_main, t_tail, l_main, l_tail, HAS_TAIL, PRECISION)
        gl_main, gl_tail = _project_back(gl_main, gl_tail, t_main, t_tail,
                                         (f_go * t_r).to(left_ptr.dtype.element_ty),
                                         HAS_TAIL, PRECISION)
        gr_main, gr_tail = _project_back(gr_main, gr_tail, t_main, t_tail,
                                         (f_go * t_l).to(left_ptr.dtype.element_ty),
                                         HAS_TAIL, PRECISION)
    _store_slots(grad_left_ptr, gl_main, gl_tail, pair, channels, s_main, s_tail,
                 FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL)
    _store_slots(grad_right_ptr, gr_main, gr_tail, pair, channels, s_main, s_tail,
                 FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL)


@triton.jit(do_not_specialize=LAUNCH_SCALARS["bwd2"])
def _grid_pair_bwd2_kernel(
    grad_out_ptr, left_ptr, right_ptr, grad_grad_left_ptr, grad_grad_right_ptr,
    to_grid_ptr, from_grid_ptr,
    grad_grad_out_ptr, grad2_left_ptr, grad2_right_ptr,
    grad_out_stride_n, grad_out_stride_d, grad_out_stride_f, grad_out_stride_c,
    left_stride_n, left_stride_d, left_stride_f, left_stride_c,
    right_stride_n, right_stride_d, right_stride_f, right_stride_c,
    grad_grad_left_stride_n, grad_grad_left_stride_d, grad_grad_left_stride_f,
    grad_grad_left_stride_c,
    grad_grad_right_stride_n, grad_grad_right_stride_d, grad_grad_right_stride_f,
    grad_grad_right_stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, GRID: tl.constexpr,
    SLOTS: tl.constexpr, SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr,
    BLOCK_C: tl.constexpr, BLOCK_G: tl.constexpr, PRECISION: tl.constexpr,
):
    """Second backward for one (pair, channel block), h_l, h_r the grad-grads of g_l, g_r.

    ggo = F^T [(T h_l)(T r) + (T l)(T h_r)], g2_l = T^T [(F go)(T h_r)],
    g2_r = T^T [(F go)(T h_l)].

    Args:
        grad_out_ptr, left_ptr, right_ptr, grad_grad_left_ptr, grad_grad_right_ptr:
            (N, D, F, K*C) operands go, l, r, h_l, h_r, read through their strides.
        to_grid_ptr, from_grid_ptr: contiguous (G, D*K) projectors T and F.
        grad_grad_out_ptr, grad2_left_ptr, grad2_right_ptr: contiguous (N, D, F, K*C) results.
        Launch grid: (N * F, cdiv(C, BLOCK_C)).
    """
    HAS_TAIL: tl.constexpr = SLOTS_TAIL > 0
    TAIL: tl.constexpr = SLOTS_TAIL if HAS_TAIL else 16
    pair, channels, s_main, s_tail = _pair_program(SLOTS_MAIN, TAIL, BLOCK_C)
    go_main, go_tail = _load_slots(grad_out_ptr, pair, channels, s_main, s_tail,
                                   grad_out_stride_n, grad_out_stride_d, grad_out_stride_f,
                                   grad_out_stride_c, FOCUS, FRAMES, CHANNELS, SLOTS)
    l_main, l_tail = _load_slots(left_ptr, pair, channels, s_main, s_tail, left_stride_n,
                                 left_stride_d, left_stride_f, left_stride_c,
                                 FOCUS, FRAMES, CHANNELS, SLOTS)
    r_main, r_tail = _load_slots(right_ptr, pair, channels, s_main, s_tail, right_stride_n,
                                 right_stride_d, right_stride_f, right_stride_c,
                                 FOCUS, FRAMES, CHANNELS, SLOTS)
    hl_main, hl_tail = _load_slots(grad_grad_left_ptr, pair, channels, s_main, s_tail,
                                   grad_grad_left_stride_n, grad_grad_left_stride_d,
                                   grad_grad_left_stride_f, grad_grad_left_stride_c,
                                   FOCUS, FRAMES, CHANNELS, SLOTS)
    hr_main, hr_tail = _load_slots(grad_grad_right_ptr, pair, channels, s_main, s_tail,
                                   grad_grad_right_stride_n, grad_grad_right_stride_d,
                                   grad_grad_right_stride_f, grad_grad_right_stride_c,
                                   FOCUS, FRAMES, CHANNELS, SLOTS)
    ggo_main = tl.zeros((SLOTS_MAIN, BLOCK_C), dtype=tl.float32)
    ggo_tail = tl.zeros((TAIL, BLOCK_C), dtype=tl.float32)
    g2l_main = tl.zeros((SLOTS_MAIN, BLOCK_C), dtype=tl.float32)
    g2l_tail = tl.zeros((TAIL, BLOCK_C), dtype=tl.float32)
    g2r_main = tl.zeros((SLOTS_MAIN, BLOCK_C), dtype=tl.float32)
    g2r_tail = tl.zeros((TAIL, BLOCK_C), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
        t_main, t_tail = _load_projector(to_grid_ptr, points, s_main, s_tail, GRID, SLOTS)
        f_main, f_tail = _load_projector(from_grid_ptr, points, s_main, s_tail, GRID, SLOTS)
        t_l = _project(t_main, t_tail, l_main, l_tail, HAS_TAIL, PRECISION)
        t_r = _project(t_main, t_tail, r_main, r_tail, HAS_TAIL, PRECISION)
        t_hl = _project(t_main, t_tail, hl_main, hl_tail, HAS_TAIL, PRECISION)
        t_hr = _project(t_main, t_tail, hr_main, hr_tail, HAS_TAIL, PRECISION)
        f_go = _project(f_main, f_tail, go_main, go_tail, HAS_TAIL, PRECISION)
        ggo_main, ggo_tail = _project_back(ggo_main, ggo_tail, f_main, f_tail,
                                           (t_hl * t_r + t_l * t_hr).to(left_ptr.dtype.element_ty),
                                           HAS_TAIL, PRECISION)
        g2l_main, g2l_tail = _project_back(g2l_main, g2l_tail, t_main, t_tail,
                                           (f_go * t_hr).to(left_ptr.dtype.element_ty),
                                           HAS_TAIL, PRECISION)
        g2r_main, g2r_tail = _project_back(g2r_main, g2r_tail, t_main, t_tail,
                                           (f_go * t_hl).to(left_ptr.dtype.element_ty),
                                           HAS_TAIL, PRECISION)
    _store_slots(grad_grad_out_ptr, ggo_main, ggo_tail, pair, channels, s_main, s_tail,
                 FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL)
    _store_slots(grad2_left_ptr, g2l_main, g2l_tail, pair, channels, s_main, s_tail,
                 FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL)
    _store_slots(grad2_right_ptr, g2r_main, g2r_tail, pair, channels, s_main, s_tail,
                 FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL)


KERNELS = {
    "fwd": _grid_pair_fwd_kernel,
    "bwd": _grid_pair_bwd_kernel,
    "bwd2": _grid_pair_bwd2_kernel,
}
