"""fp32 kernel variants of the grid-pair forward and backward, measured against the shipped
kernels by ``fp32_variants.py`` (issue #38): tf32x3 written out as three TF32 dots on operands
split once into a TF32 high part and an fp32 rest.

- ``*_split``: the shipped structure (rows resident, whole-slot dots), projectors pre-split in
  the launcher as one (G, 2*PADDED) [hi | lo] array, so no split runs in the loop.
- ``*_chunk``: the grid projections in 32-slot chunks, operand rows read again per chunk (from
  L1), so no dot holds a whole 128-slot row tile in registers: the shipped kernels replicate the
  16-row A operand in every warp, which is what fills 255 registers.
"""
import triton
import triton.language as tl

from gridpair.kernels import _load_rows, _rows_program, _store_rows


@triton.jit
def _split(x):
    """tf32 high part (round to nearest, ties away, as cvt.rna.tf32.f32) and the fp32 rest."""
    bits = x.to(tl.uint32, bitcast=True)
    hi = ((bits + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)
    return hi, x - hi


@triton.jit
def _load_split_projector(ptr, points, s_main, s_tail, GRID: tl.constexpr, PADDED: tl.constexpr,
                          HAS_TAIL: tl.constexpr):
    """hi and lo (points, slots) tiles of a (G, 2*PADDED) [hi | lo] projector."""
    rows = ptr + points[:, None] * (2 * PADDED)
    ok = (points < GRID)[:, None]
    hm = tl.load(rows + s_main[None, :], mask=ok, other=0.0)
    lm = tl.load(rows + PADDED + s_main[None, :], mask=ok, other=0.0)
    ht = hm
    lt = lm
    if HAS_TAIL:
        ht = tl.load(rows + s_tail[None, :], mask=ok, other=0.0)
        lt = tl.load(rows + PADDED + s_tail[None, :], mask=ok, other=0.0)
    return hm, lm, ht, lt


@triton.jit
def _dot3(a_hi, a_lo, b_hi, b_lo, acc):
    """acc + a @ b in three TF32 products, in the order of Triton's own tf32x3: the small
    terms from zero, then the large, then the running sum added in IEEE fp32. The tensor cores'
    accumulation does not round to nearest; fed the running sum, the small terms lose to it
    (call 1 of round 13: 5e-6 against 7e-7)."""
    small = tl.dot(a_lo, b_hi, input_precision="tf32")
    small = tl.dot(a_hi, b_lo, small, input_precision="tf32")
    return acc + tl.dot(a_hi, b_hi, small, input_precision="tf32")


@triton.jit
def _project3(xhm, xlm, xht, xlt, phm, plm, pht, plt, HAS_TAIL: tl.constexpr, BM: tl.constexpr,
              BG: tl.constexpr):
    field = tl.zeros((BM, BG), dtype=tl.float32)
    field = _dot3(xhm, xlm, tl.trans(phm), tl.trans(plm), field)
    if HAS_TAIL:
        field = _dot3(xht, xlt, tl.trans(pht), tl.trans(plt), field)
    return field


@triton.jit
def _back3(acc_m, acc_t, field, qhm, qlm, qht, qlt, HAS_TAIL: tl.constexpr):
    f_hi, f_lo = _split(field)
    acc_m = _dot3(f_hi, f_lo, qhm, qlm, acc_m)
    if HAS_TAIL:
        acc_t = _dot3(f_hi, f_lo, qht, qlt, acc_t)
    return acc_m, acc_t


@triton.jit
def _rows_split(ptr, rows, n_rows, s_main, s_tail, sn, sd, sf, sc, FOCUS: tl.constexpr,
                FRAMES: tl.constexpr, CHANNELS: tl.constexpr, SLOTS: tl.constexpr,
                WIDE: tl.constexpr):
    m, t = _load_rows(ptr, rows, n_rows, s_main, s_tail, sn, sd, sf, sc, FOCUS, FRAMES,
                      CHANNELS, SLOTS, WIDE, tl.float32)
    hm, lm = _split(m)
    ht, lt = _split(t)
    return hm, lm, ht, lt


@triton.jit
def fwd_split(
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
    rows, s_main, s_tail = _rows_program(BLOCK_M, SLOTS_MAIN, TAIL)
    lhm, llm, lht, llt = _rows_split(left_ptr, rows, n_rows, s_main, s_tail, left_stride_n,
                                     left_stride_d, left_stride_f, left_stride_c,
                                     FOCUS, FRAMES, CHANNELS, SLOTS, WIDE)
    rhm, rlm, rht, rlt = _rows_split(right_ptr, rows, n_rows, s_main, s_tail, right_stride_n,
                                     right_stride_d, right_stride_f, right_stride_c,
                                     FOCUS, FRAMES, CHANNELS, SLOTS, WIDE)
    acc_m = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    acc_t = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
        thm, tlm, tht, tlt = _load_split_projector(to_grid_ptr, points, s_main, s_tail, GRID,
                                                   PADDED, HAS_TAIL)
        field = _project3(lhm, llm, lht, llt, thm, tlm, tht, tlt, HAS_TAIL, BLOCK_M, BLOCK_G)
        field *= _project3(rhm, rlm, rht, rlt, thm, tlm, tht, tlt, HAS_TAIL, BLOCK_M, BLOCK_G)
        fhm, flm, fht, flt = _load_split_projector(from_grid_ptr, points, s_main, s_tail, GRID,
                                                   PADDED, HAS_TAIL)
        acc_m, acc_t = _back3(acc_m, acc_t, field, fhm, flm, fht, flt, HAS_TAIL)
    _store_rows(out_ptr, acc_m, acc_t, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)


@triton.jit
def bwd_split(
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
    rows, s_main, s_tail = _rows_program(BLOCK_M, SLOTS_MAIN, TAIL)
    ghm, glm, ght, glt = _rows_split(grad_out_ptr, rows, n_rows, s_main, s_tail,
                                     grad_out_stride_n, grad_out_stride_d, grad_out_stride_f,
                                     grad_out_stride_c, FOCUS, FRAMES, CHANNELS, SLOTS, WIDE)
    lhm, llm, lht, llt = _rows_split(left_ptr, rows, n_rows, s_main, s_tail, left_stride_n,
                                     left_stride_d, left_stride_f, left_stride_c,
                                     FOCUS, FRAMES, CHANNELS, SLOTS, WIDE)
    rhm, rlm, rht, rlt = _rows_split(right_ptr, rows, n_rows, s_main, s_tail, right_stride_n,
                                     right_stride_d, right_stride_f, right_stride_c,
                                     FOCUS, FRAMES, CHANNELS, SLOTS, WIDE)
    gl_m = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    gl_t = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    gr_m = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    gr_t = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
        fhm, flm, fht, flt = _load_split_projector(from_grid_ptr, points, s_main, s_tail, GRID,
                                                   PADDED, HAS_TAIL)
        f_go = _project3(ghm, glm, ght, glt, fhm, flm, fht, flt, HAS_TAIL, BLOCK_M, BLOCK_G)
        thm, tlm, tht, tlt = _load_split_projector(to_grid_ptr, points, s_main, s_tail, GRID,
                                                   PADDED, HAS_TAIL)
        t_r = _project3(rhm, rlm, rht, rlt, thm, tlm, tht, tlt, HAS_TAIL, BLOCK_M, BLOCK_G)
        gl_m, gl_t = _back3(gl_m, gl_t, f_go * t_r, thm, tlm, tht, tlt, HAS_TAIL)
        t_l = _project3(lhm, llm, lht, llt, thm, tlm, tht, tlt, HAS_TAIL, BLOCK_M, BLOCK_G)
        gr_m, gr_t = _back3(gr_m, gr_t, f_go * t_l, thm, tlm, tht, tlt, HAS_TAIL)
    _store_rows(grad_left_ptr, gl_m, gl_t, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)
    _store_rows(grad_right_ptr, gr_m, gr_t, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)


@triton.jit
def _chunk_rows(ptr, row_offsets, row_ok, slots, stride_d, frame_stride, FRAMES: tl.constexpr,
                SLOTS: tl.constexpr):
    off = (slots // FRAMES) * stride_d + (slots % FRAMES) * frame_stride
    x = tl.load(ptr + row_offsets + off[None, :], mask=row_ok & (slots < SLOTS)[None, :],
                other=0.0)
    return _split(x)


@triton.jit
def _chunk_proj(ptr, points, slots, GRID: tl.constexpr, PADDED: tl.constexpr):
    rows = ptr + points[:, None] * (2 * PADDED) + slots[None, :]
    ok = (points < GRID)[:, None]
    return tl.load(rows, mask=ok, other=0.0), tl.load(rows + PADDED, mask=ok, other=0.0)


@triton.jit
def _row_offsets(rows, n_rows, sn, sf, sc, FOCUS: tl.constexpr, CHANNELS: tl.constexpr):
    pair = rows // CHANNELS
    off = ((pair // FOCUS) * sn + (pair % FOCUS) * sf + (rows % CHANNELS) * sc)[:, None]
    return off, (rows < n_rows)[:, None]


@triton.jit
def fwd_chunk(
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
    KC: tl.constexpr = 32
    NCH: tl.constexpr = PADDED // KC
    rows, s_main, s_tail = _rows_program(BLOCK_M, SLOTS_MAIN, TAIL)
    lo_, lok = _row_offsets(rows, n_rows, left_stride_n, left_stride_f, left_stride_c, FOCUS,
                            CHANNELS)
    ro_, rok = _row_offsets(rows, n_rows, right_stride_n, right_stride_f, right_stride_c,
                            FOCUS, CHANNELS)
    acc_m = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    acc_t = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
        f_l = tl.zeros((BLOCK_M, BLOCK_G), dtype=tl.float32)
        f_r = tl.zeros((BLOCK_M, BLOCK_G), dtype=tl.float32)
        for c in tl.static_range(NCH):
            sl = c * KC + tl.arange(0, KC)
            th, tlo = _chunk_proj(to_grid_ptr, points, sl, GRID, PADDED)
            lh, ll = _chunk_rows(left_ptr, lo_, lok, sl, left_stride_d,
                                 CHANNELS * left_stride_c, FRAMES, SLOTS)
            f_l = _dot3(lh, ll, tl.trans(th), tl.trans(tlo), f_l)
            rh, rl = _chunk_rows(right_ptr, ro_, rok, sl, right_stride_d,
                                 CHANNELS * right_stride_c, FRAMES, SLOTS)
            f_r = _dot3(rh, rl, tl.trans(th), tl.trans(tlo), f_r)
        fhm, flm, fht, flt = _load_split_projector(from_grid_ptr, points, s_main, s_tail, GRID,
                                                   PADDED, HAS_TAIL)
        acc_m, acc_t = _back3(acc_m, acc_t, f_l * f_r, fhm, flm, fht, flt, HAS_TAIL)
    _store_rows(out_ptr, acc_m, acc_t, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)


@triton.jit
def bwd_chunk(
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
    KC: tl.constexpr = 32
    NCH: tl.constexpr = PADDED // KC
    rows, s_main, s_tail = _rows_program(BLOCK_M, SLOTS_MAIN, TAIL)
    go_, gok = _row_offsets(rows, n_rows, grad_out_stride_n, grad_out_stride_f,
                            grad_out_stride_c, FOCUS, CHANNELS)
    lo_, lok = _row_offsets(rows, n_rows, left_stride_n, left_stride_f, left_stride_c, FOCUS,
                            CHANNELS)
    ro_, rok = _row_offsets(rows, n_rows, right_stride_n, right_stride_f, right_stride_c,
                            FOCUS, CHANNELS)
    gl_m = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    gl_t = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    gr_m = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    gr_t = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
        f_go = tl.zeros((BLOCK_M, BLOCK_G), dtype=tl.float32)
        t_l = tl.zeros((BLOCK_M, BLOCK_G), dtype=tl.float32)
        t_r = tl.zeros((BLOCK_M, BLOCK_G), dtype=tl.float32)
        for c in tl.static_range(NCH):
            sl = c * KC + tl.arange(0, KC)
            fh, flo = _chunk_proj(from_grid_ptr, points, sl, GRID, PADDED)
            gh, gl = _chunk_rows(grad_out_ptr, go_, gok, sl, grad_out_stride_d,
                                 CHANNELS * grad_out_stride_c, FRAMES, SLOTS)
            f_go = _dot3(gh, gl, tl.trans(fh), tl.trans(flo), f_go)
            th, tlo = _chunk_proj(to_grid_ptr, points, sl, GRID, PADDED)
            lh, ll = _chunk_rows(left_ptr, lo_, lok, sl, left_stride_d,
                                 CHANNELS * left_stride_c, FRAMES, SLOTS)
            t_l = _dot3(lh, ll, tl.trans(th), tl.trans(tlo), t_l)
            rh, rl = _chunk_rows(right_ptr, ro_, rok, sl, right_stride_d,
                                 CHANNELS * right_stride_c, FRAMES, SLOTS)
            t_r = _dot3(rh, rl, tl.trans(th), tl.trans(tlo), t_r)
        thm, tlm, tht, tlt = _load_split_projector(to_grid_ptr, points, s_main, s_tail, GRID,
                                                   PADDED, HAS_TAIL)
        gl_m, gl_t = _back3(gl_m, gl_t, f_go * t_r, thm, tlm, tht, tlt, HAS_TAIL)
        gr_m, gr_t = _back3(gr_m, gr_t, f_go * t_l, thm, tlm, tht, tlt, HAS_TAIL)
    _store_rows(grad_left_ptr, gl_m, gl_t, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)
    _store_rows(grad_right_ptr, gr_m, gr_t, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)


@triton.jit
def _pair_pass(a_ptr, a_sn, a_sd, a_sf, a_sc, b_ptr, b_sn, b_sd, b_sf, b_sc, pa_ptr, pb_ptr,
               q_ptr, out_ptr, n_rows,
               FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr,
               GRID: tl.constexpr, SLOTS: tl.constexpr, SLOTS_MAIN: tl.constexpr,
               SLOTS_TAIL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr,
               WIDE: tl.constexpr):
    """out = Q^T [(Pa a) * (Pb b)] for one block of rows, the projections in 32-slot chunks
    with the rows read again per chunk: one grid pair, every order's term has this shape."""
    HAS_TAIL: tl.constexpr = SLOTS_TAIL > 0
    TAIL: tl.constexpr = SLOTS_TAIL if HAS_TAIL else 16
    PADDED: tl.constexpr = SLOTS_MAIN + SLOTS_TAIL
    KC: tl.constexpr = 32
    NCH: tl.constexpr = PADDED // KC
    rows, s_main, s_tail = _rows_program(BLOCK_M, SLOTS_MAIN, TAIL)
    a_rows, a_ok = _row_offsets(rows, n_rows, a_sn, a_sf, a_sc, FOCUS, CHANNELS)
    b_rows, b_ok = _row_offsets(rows, n_rows, b_sn, b_sf, b_sc, FOCUS, CHANNELS)
    acc_m = tl.zeros((BLOCK_M, SLOTS_MAIN), dtype=tl.float32)
    acc_t = tl.zeros((BLOCK_M, TAIL), dtype=tl.float32)
    for start in range(0, GRID, BLOCK_G):
        points = start + tl.arange(0, BLOCK_G)
        f_a = tl.zeros((BLOCK_M, BLOCK_G), dtype=tl.float32)
        f_b = tl.zeros((BLOCK_M, BLOCK_G), dtype=tl.float32)
        for c in tl.static_range(NCH):
            sl = c * KC + tl.arange(0, KC)
            ph, plo = _chunk_proj(pa_ptr, points, sl, GRID, PADDED)
            xh, xl = _chunk_rows(a_ptr, a_rows, a_ok, sl, a_sd, CHANNELS * a_sc, FRAMES, SLOTS)
            f_a = _dot3(xh, xl, tl.trans(ph), tl.trans(plo), f_a)
            ph, plo = _chunk_proj(pb_ptr, points, sl, GRID, PADDED)
            xh, xl = _chunk_rows(b_ptr, b_rows, b_ok, sl, b_sd, CHANNELS * b_sc, FRAMES, SLOTS)
            f_b = _dot3(xh, xl, tl.trans(ph), tl.trans(plo), f_b)
        qhm, qlm, qht, qlt = _load_split_projector(q_ptr, points, s_main, s_tail, GRID, PADDED,
                                                   HAS_TAIL)
        acc_m, acc_t = _back3(acc_m, acc_t, f_a * f_b, qhm, qlm, qht, qlt, HAS_TAIL)
    _store_rows(out_ptr, acc_m, acc_t, rows, n_rows, s_main, s_tail,
                FOCUS, FRAMES, CHANNELS, SLOTS, HAS_TAIL, WIDE)


@triton.jit
def fwd_pair(
    left_ptr, right_ptr, to_grid_ptr, from_grid_ptr, out_ptr, n_rows,
    left_stride_n, left_stride_d, left_stride_f, left_stride_c,
    right_stride_n, right_stride_d, right_stride_f, right_stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, GRID: tl.constexpr,
    SLOTS: tl.constexpr, SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr, PRECISION: tl.constexpr, WIDE: tl.constexpr,
):
    """The forward as one pass: F^T [(T l)(T r)]."""
    _pair_pass(left_ptr, left_stride_n, left_stride_d, left_stride_f, left_stride_c,
               right_ptr, right_stride_n, right_stride_d, right_stride_f, right_stride_c,
               to_grid_ptr, to_grid_ptr, from_grid_ptr, out_ptr, n_rows, FOCUS, FRAMES,
               CHANNELS, GRID, SLOTS, SLOTS_MAIN, SLOTS_TAIL, BLOCK_M, BLOCK_G, WIDE)


@triton.jit
def bwd_pair(
    grad_out_ptr, left_ptr, right_ptr, to_grid_ptr, from_grid_ptr,
    grad_left_ptr, grad_right_ptr, n_rows,
    grad_out_stride_n, grad_out_stride_d, grad_out_stride_f, grad_out_stride_c,
    left_stride_n, left_stride_d, left_stride_f, left_stride_c,
    right_stride_n, right_stride_d, right_stride_f, right_stride_c,
    FOCUS: tl.constexpr, FRAMES: tl.constexpr, CHANNELS: tl.constexpr, GRID: tl.constexpr,
    SLOTS: tl.constexpr, SLOTS_MAIN: tl.constexpr, SLOTS_TAIL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr, PRECISION: tl.constexpr, WIDE: tl.constexpr,
):
    """The backward as two passes, one gradient each (six grid products instead of five, each
    with the forward's registers): g_l = T^T [(F go)(T r)], then g_r = T^T [(F go)(T l)]."""
    _pair_pass(grad_out_ptr, grad_out_stride_n, grad_out_stride_d, grad_out_stride_f,
               grad_out_stride_c, right_ptr, right_stride_n, right_stride_d, right_stride_f,
               right_stride_c, from_grid_ptr, to_grid_ptr, to_grid_ptr, grad_left_ptr, n_rows,
               FOCUS, FRAMES, CHANNELS, GRID, SLOTS, SLOTS_MAIN, SLOTS_TAIL, BLOCK_M, BLOCK_G,
               WIDE)
    _pair_pass(grad_out_ptr, grad_out_stride_n, grad_out_stride_d, grad_out_stride_f,
               grad_out_stride_c, left_ptr, left_stride_n, left_stride_d, left_stride_f,
               left_stride_c, from_grid_ptr, to_grid_ptr, to_grid_ptr, grad_right_ptr, n_rows,
               FOCUS, FRAMES, CHANNELS, GRID, SLOTS, SLOTS_MAIN, SLOTS_TAIL, BLOCK_M, BLOCK_G,
               WIDE)
