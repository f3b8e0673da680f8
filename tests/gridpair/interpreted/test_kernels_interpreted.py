"""The Triton kernels themselves, run on the CPU by Triton's interpreter (TRITON_INTERPRET=1),
against float64 evaluations of the reference, in this process (``interpreted_kernels``).

bfloat16 is left out: the interpreter multiplies bfloat16 dot operands as raw bit patterns
(triton-lang/triton#11584); float16 exercises the same 16-bit code path.
"""


import pytest
import torch

from gridpair import reference
from gridpair.geometry import Tile
from gridpair.launch import launch
from numerics import draw, relative_error

OPERAND_NAMES = {
    "fwd": ("left", "right"),
    "bwd": ("cotangent", "left", "right"),
    "bwd2": ("cotangent", "left", "right", "grad_grad_left", "grad_grad_right"),
}
SHAPES = [  # (nodes, degrees, focus, frames, channels, grid): odd sizes, a slot tail, K=1
    (3, 9, 2, 3, 5, 23),
    (2, 49, 1, 3, 3, 37),
    (5, 4, 1, 1, 3, 5),
]
TILES = [Tile(16, 16, 1, 4), Tile(32, 16, 2, 4), Tile(16, 32, 3, 8)]


def _run(op, ops, dtype, tile):
    operands = [getattr(ops, name).to(dtype) for name in OPERAND_NAMES[op]]
    return launch(op, operands, ops.to_grid.to(dtype), ops.from_grid.to(dtype), ops.n_frames,
                  tile)


def _exact(op, ops, dtype=torch.float64):
    operands = [getattr(ops, name).to(dtype) for name in OPERAND_NAMES[op]]
    result = getattr(reference, op)(*operands, ops.to_grid.to(dtype), ops.from_grid.to(dtype),
                                    ops.n_frames)
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "N{}-D{}-F{}-K{}-C{}-G{}".format(*s))
@pytest.mark.parametrize("layout", ["contiguous", "degree_major"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_kernel_within_reference_error(op, shape, layout, dtype):
    ops = draw(*shape, seed=21, layout=layout)
    exact = _exact(op, ops)
    own = _exact(op, ops, dtype)
    got = _run(op, ops, dtype, TILES[0])
    floor = 4 * torch.finfo(dtype).eps
    for index, (g, o, e) in enumerate(zip(got, own, exact)):
        assert g.dtype == dtype and g.is_contiguous() and g.shape == e.shape
        assert torch.isfinite(g).all(), f"result {index} has non-finite values (unwritten?)"
        err, ref_err = relative_error(g, e), relative_error(o, e)
        assert err <= 5 * max(ref_err, floor), f"result {index}: {err:.2e} vs {ref_err:.2e}"


@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
def test_every_tile_computes_the_same_function(op):
    ops = draw(3, 9, 2, 3, 5, 23, seed=22, layout="degree_major")
    exact = _exact(op, ops)
    own = _exact(op, ops, torch.float32)
    # The bound is the float32 reference's own error: tiles may sum in another order (and the
    # interpreter's BLAS may change its order with a block's shape), never by more than that.
    bound = [5 * max(relative_error(o, e), 4 * torch.finfo(torch.float32).eps)
             for o, e in zip(own, exact)]
    first = _run(op, ops, torch.float32, TILES[0])
    for tile in [*TILES[1:], Tile(32, 16, 3, 8)]:
        for index, (a, b) in enumerate(zip(first, _run(op, ops, torch.float32, tile))):
            assert b.shape == a.shape and b.dtype == a.dtype
            assert relative_error(b, exact[index]) <= bound[index], f"{tile}: result {index}"
            assert relative_error(b, a) <= 2 * bound[index], f"{tile} vs {TILES[0]}: {index}"


@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
def test_every_result_element_is_written(op, monkeypatch):
    ops = draw(3, 9, 2, 3, 5, 23, seed=23)
    empty = torch.empty
    # Results start as NaN, so an element the kernel never writes shows up.
    monkeypatch.setattr(torch, "empty", lambda *a, **k: empty(*a, **k).fill_(float("nan")))
    for result in _run(op, ops, torch.float32, TILES[1]):
        assert torch.isfinite(result).all()


@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
def test_the_64_bit_offset_path_computes_the_same_function(op, monkeypatch):
    """Small shapes forced through the WIDE kernels (64-bit slot offsets), as a launch past
    2^31 takes them: same bound against float64 as the 32-bit path."""
    from gridpair import launch as launch_module
    from gridpair import signature

    monkeypatch.setattr(signature, "_INT32_MAX", 0)  # every offset "passes" the limit
    seen = []
    constexprs = launch_module.kernel_constexprs

    def spy(*args, **kwargs):
        seen.append(constexprs(*args, **kwargs)["WIDE"])
        return constexprs(*args, **kwargs)

    monkeypatch.setattr(launch_module, "kernel_constexprs", spy)
    ops = draw(3, 9, 2, 3, 5, 23, seed=24, layout="degree_major")
    exact = _exact(op, ops)
    own = _exact(op, ops, torch.float32)
    got = _run(op, ops, torch.float32, TILES[1])
    assert seen == [True]
    floor = 4 * torch.finfo(torch.float32).eps
    for index, (g, o, e) in enumerate(zip(got, own, exact)):
        err, ref_err = relative_error(g, e), relative_error(o, e)
        assert err <= 5 * max(ref_err, floor), f"result {index}: {err:.2e} vs {ref_err:.2e}"


@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
def test_float32_operands_are_rounded_as_they_are_loaded(op):
    """The mixed-precision launch (float32 coefficients, float16 projectors and cotangent, as
    autocast calls it) computes what the launch on operands cast beforehand computes: the same
    rounded inputs to the same dots. Only the stores differ: a gradient of a float32 operand
    is stored in float32, unrounded."""
    ops = draw(3, 9, 2, 3, 5, 23, seed=25, layout="degree_major")
    half, single = torch.float16, torch.float32
    operands = [getattr(ops, name).to(single) for name in OPERAND_NAMES[op]]
    if op != "fwd":
        operands[0] = operands[0].to(half)  # the cotangent of the forward's float16 output
    projectors = (ops.to_grid.to(half), ops.from_grid.to(half))
    mixed = launch(op, operands, *projectors, ops.n_frames, TILES[1])
    cast = launch(op, [x.to(half) for x in operands], *projectors, ops.n_frames, TILES[1])
    want_dtypes = {"fwd": [half], "bwd": [single, single], "bwd2": [half, single, single]}[op]
    assert [m.dtype for m in mixed] == want_dtypes
    exact = _exact(op, ops)
    for index, (m, c, e) in enumerate(zip(mixed, cast, exact)):
        assert torch.equal(m.to(half), c), f"result {index}"
        # Unrounded, a float32 result is no further from float64 than the float16 one.
        assert relative_error(m, e) <= relative_error(c, e) * (1 + 1e-6), f"result {index}"
