"""The Triton kernels themselves, run on the CPU by Triton's interpreter (TRITON_INTERPRET=1),
against float64 evaluations of the reference. Started by ../test_interpreter.py.

bfloat16 is left out: the interpreter multiplies bfloat16 dot operands as raw bit patterns
(triton-lang/triton#11584); float16 exercises the same 16-bit code path.
"""

import os

import pytest
import torch

from gridpair import reference
from gridpair.geometry import Tile
from gridpair.launch import launch
from numerics import draw, relative_error

assert os.environ.get("TRITON_INTERPRET") == "1", "run through test_interpreter.py"

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
    first = _run(op, ops, torch.float32, TILES[0])
    for tile in TILES[1:]:
        for a, b in zip(first, _run(op, ops, torch.float32, tile)):
            torch.testing.assert_close(b, a, rtol=2e-6, atol=2e-6, msg=str(tile))
    # Row blocks and launch options change no arithmetic order: bitwise equal results.
    same_grid_block = _run(op, ops, torch.float32, Tile(32, 16, 3, 8))
    for a, b in zip(first, same_grid_block):
        assert torch.equal(a, b)


@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
def test_every_result_element_is_written(op, monkeypatch):
    ops = draw(3, 9, 2, 3, 5, 23, seed=23)
    empty = torch.empty
    # Results start as NaN, so an element the kernel never writes shows up.
    monkeypatch.setattr(torch, "empty", lambda *a, **k: empty(*a, **k).fill_(float("nan")))
    for result in _run(op, ops, torch.float32, TILES[1]):
        assert torch.isfinite(result).all()
