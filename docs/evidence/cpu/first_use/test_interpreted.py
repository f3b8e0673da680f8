"""30 tiny interpreted kernels, in the manner of Triton's test_core.py: the elementwise ones
compare with numpy as Triton's own tests do, the reductions with torch.testing."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def _binary(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    if OP == "add":
        z = x + y
    elif OP == "mul":
        z = x * y
    else:
        z = tl.where(x > y, x, y)
    tl.store(out_ptr + offs, z, mask=mask)


@triton.jit
def _row_sum(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


REFERENCE = {"add": np.add, "mul": np.multiply, "max": np.maximum}


@pytest.mark.parametrize("n", [7, 64, 130])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("op", ["add", "mul", "max"])
def test_binary(op, dtype, n):
    x = torch.arange(n, dtype=dtype) % 11
    y = torch.arange(n, dtype=dtype).flip(0) % 7
    out = torch.empty_like(x)
    _binary[(triton.cdiv(n, 32),)](x, y, out, n, OP=op, BLOCK=32)
    np.testing.assert_allclose(out.numpy(), REFERENCE[op](x.numpy(), y.numpy()))


@pytest.mark.parametrize(("rows", "cols"), [(1, 5), (3, 16), (4, 33), (2, 64), (5, 7), (8, 3),
                                       (6, 31), (2, 2), (7, 9), (3, 40), (1, 64), (9, 1)])
def test_row_sum(rows, cols):
    x = torch.randn(rows, cols)
    out = torch.empty(rows)
    _row_sum[(rows,)](x, out, cols, BLOCK=triton.next_power_of_2(cols))
    torch.testing.assert_close(out, x.sum(1))
